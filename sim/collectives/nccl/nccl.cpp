#include "sim/collectives/nccl/nccl.hpp"

#include <array>

namespace rocesim::collectives::nccl {
namespace {

constexpr std::array<std::string_view, 10> kCollectiveNames{
    "allreduce", "allgather", "reducescatter", "broadcast", "reduce",
    "alltoall",  "alltoallv", "gather",        "scatter",   "sendrecv"};

// Defaults from NCCL (MODELS.md 5.3-5.5): buffer sizes from src/init.cc, p2p chunks from
// NCCL_P2P_NET_CHUNKSIZE and NCCL_P2P_NVL_CHUNKSIZE, net overhead 1 us (Intel hosts; NCCL uses 2 us
// on AMD).
constexpr Param kNcclParams[] = {
    {.key = "NCCL_ALGO",
     .type = ParamType::Choice,
     .fallback = "auto",
     .help = "algorithm; auto lets the tuner choose as NCCL would",
     .choices = "auto|Ring|Tree|CollNet"},
    {.key = "NCCL_PROTO",
     .type = ParamType::Choice,
     .fallback = "auto",
     .help = "protocol; auto lets the tuner choose",
     .choices = "auto|LL|LL128|Simple"},
    {.key = "NCCL_MIN_NCHANNELS",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "lower bound on channels (0: automatic, 2 per NIC of a server)",
     .check = Check::NonNegative},
    {.key = "NCCL_MAX_NCHANNELS",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "upper bound on channels (0: automatic, at most 32)",
     .check = Check::NonNegative},
    {.key = "NCCL_MIN_CTAS",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "lower bound on channels (CTAs), like NCCL_MIN_NCHANNELS; the larger bound wins",
     .check = Check::NonNegative},
    {.key = "NCCL_MAX_CTAS",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "upper bound on channels (CTAs), like NCCL_MAX_NCHANNELS; the smaller bound wins",
     .check = Check::NonNegative},
    {.key = "NCCL_NCHANNELS_PER_NET_PEER",
     .type = ParamType::Integer,
     .fallback = "2",
     .help = "point-to-point (AlltoAll, Gather, Scatter, Send/Recv): channels, hence "
             "connections and QPs, per pair of ranks on different servers; the data is split "
             "evenly",
     .check = Check::Positive},
    {.key = "NCCL_IB_QPS_PER_CONNECTION",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "QPs per connection; each has its own UDP source port, hence ECMP path",
     .check = Check::Positive},
    {.key = "NCCL_IB_SPLIT_DATA_ON_QPS",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "1: every message is split over all QPs; 0: messages go to the QPs in turn",
     .check = Check::NonNegative},
    {.key = "NCCL_BUFFSIZE",
     .type = ParamType::Bytes,
     .fallback = "4MiB",
     .help = "buffer per connection for the Simple protocol (8 steps)",
     .check = Check::Positive},
    {.key = "NCCL_LL_BUFFSIZE",
     .type = ParamType::Bytes,
     .fallback = "512KiB",
     .help = "buffer per connection for LL",
     .check = Check::Positive},
    {.key = "NCCL_LL128_BUFFSIZE",
     .type = ParamType::Bytes,
     .fallback = "4915200B",
     .help = "buffer per connection for LL128",
     .check = Check::Positive},
    {.key = "NCCL_P2P_NET_CHUNKSIZE",
     .type = ParamType::Bytes,
     .fallback = "128KiB",
     .help = "chunk of point-to-point sends over the network (8 in flight per peer)",
     .check = Check::Positive},
    {.key = "NCCL_P2P_NVL_CHUNKSIZE",
     .type = ParamType::Bytes,
     .fallback = "512KiB",
     .help = "chunk of point-to-point sends between GPUs of one server, over NVLink (8 in flight "
             "per peer)",
     .check = Check::Positive},
    {.key = "NCCL_PXN_DISABLE",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "1 disables PXN: a GPU then sends through its own NIC instead of crossing NVLink "
             "to the GPU on the destination's rail",
     .check = Check::NonNegative},
    {.key = "NCCL_COLLNET_ENABLE",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "1 allows CollNet (in-network reduction in the switches, SHARP-style) for "
             "AllReduce",
     .check = Check::NonNegative},
    {.key = "NCCL_NET_OVERHEAD",
     .type = ParamType::Time,
     .fallback = "1us",
     .help = "host overhead per network step (NCCL: 1 us Intel, 2 us AMD; x3 for Simple)",
     .check = Check::NonNegative},
    {.key = "tuning_tables",
     .type = ParamType::Choice,
     .fallback = "newest",
     .help = "the NCCL release whose tuning.cc constants (latencies, bandwidth caps) are used",
     .choices = "newest|2.20.3"},
    {.key = "launch_latency",
     .type = ParamType::Time,
     .help = "fixed cost of each operation (default: NCCL's baseLat of the algorithm and "
             "protocol)",
     .check = Check::NonNegative,
     .optional = true},
    {.key = "base_latency_factor",
     .type = ParamType::Number,
     .fallback = "1",
     .help = "scales NCCL's launch latency estimates (baseLat) when launch_latency is not set; "
             "the tuner keeps NCCL's own constants",
     .check = Check::NonNegative},
    {.key = "credit_latency",
     .type = ParamType::Time,
     .fallback = "0s",
     .help = "receiver-driven admission: time for a receiver to return a credit (clear-to-send) "
             "beyond the path's round trip; a connection moves at most one buffer per round trip "
             "plus this",
     .check = Check::NonNegative},
    {.key = "hop_latency_factor",
     .type = ParamType::Number,
     .fallback = "1",
     .help = "scales NCCL's per-hop latency estimates (hwLat), the GPU, proxy and protocol cost "
             "of one pipeline step added to the fabric's own latency",
     .check = Check::NonNegative},
};
const ParamTable kNcclTable{"nccl",
                            "NCCL settings (NCCL's environment variables) and the NCCL model's "
                            "calibratable parameters.",
                            kNcclParams};

bool flag(const ParamReader& r, std::string_view key) {
  const int64_t v = r.integer(key);
  if (v > 1) r.fail(key, "0 or 1", std::to_string(v));
  return v == 1;
}

}  // namespace

std::string_view collective_name(Collective c) {
  return kCollectiveNames[static_cast<size_t>(c)];
}

std::string_view algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::Tree:
      return "Tree";
    case Algorithm::Ring:
      return "Ring";
    case Algorithm::CollNet:
      return "CollNet";
  }
  return "?";
}

std::string_view protocol_name(Protocol p) {
  switch (p) {
    case Protocol::LL:
      return "LL";
    case Protocol::LL128:
      return "LL128";
    case Protocol::Simple:
      return "Simple";
  }
  return "?";
}

std::optional<Collective> parse_collective(std::string_view s) {
  for (size_t i = 0; i < kCollectiveNames.size(); ++i) {
    if (kCollectiveNames[i] == s) return static_cast<Collective>(i);
  }
  return std::nullopt;
}

ProtocolTraits protocol_traits(Protocol p) {
  // LL: 16-byte lines of 8 data bytes and 8 flag bytes; LL128: 128-byte lines of 120 data
  // bytes; Simple: bulk data, synchronised once per step (MODELS.md 5.3).
  switch (p) {
    case Protocol::LL:
      return {0.5, 8, false};
    case Protocol::LL128:
      return {120.0 / 128.0, 120, false};
    case Protocol::Simple:
      return {1.0, 0, true};
  }
  return {1.0, 0, true};
}

Bytes NcclConfig::buffer(Protocol p) const {
  switch (p) {
    case Protocol::LL:
      return ll_buffsize;
    case Protocol::LL128:
      return ll128_buffsize;
    case Protocol::Simple:
      return buffsize;
  }
  return buffsize;
}

const ParamTable& nccl_table() {
  return kNcclTable;
}

NcclConfig read_nccl(const ParamReader& r, NcclConfig c, bool only_written) {
  // Every key when reading a scenario's section (the table's defaults are the defaults), only
  // the written ones when a workload overrides the scenario's settings.
  auto take = [&](std::string_view key) { return !only_written || r.has(key); };
  if (take("NCCL_ALGO")) {
    const std::string a = r.choice("NCCL_ALGO");
    c.algo = a == "auto"   ? std::nullopt
             : a == "Ring" ? std::optional(Algorithm::Ring)
             : a == "Tree" ? std::optional(Algorithm::Tree)
                           : std::optional(Algorithm::CollNet);
  }
  if (take("NCCL_PROTO")) {
    const std::string p = r.choice("NCCL_PROTO");
    c.proto = p == "auto"    ? std::nullopt
              : p == "LL"    ? std::optional(Protocol::LL)
              : p == "LL128" ? std::optional(Protocol::LL128)
                             : std::optional(Protocol::Simple);
  }
  if (take("NCCL_MIN_NCHANNELS"))
    c.min_channels = static_cast<int>(r.integer("NCCL_MIN_NCHANNELS"));
  if (take("NCCL_MAX_NCHANNELS"))
    c.max_channels = static_cast<int>(r.integer("NCCL_MAX_NCHANNELS"));
  if (c.min_channels > kMaxChannels) {
    r.fail("NCCL_MIN_NCHANNELS", "at most 32 channels", std::to_string(c.min_channels));
  }
  if (take("NCCL_MIN_CTAS")) c.min_ctas = static_cast<int>(r.integer("NCCL_MIN_CTAS"));
  if (take("NCCL_MAX_CTAS")) c.max_ctas = static_cast<int>(r.integer("NCCL_MAX_CTAS"));
  if (c.min_ctas > kMaxChannels) {
    r.fail("NCCL_MIN_CTAS", "at most 32 channels", std::to_string(c.min_ctas));
  }
  if (take("NCCL_NCHANNELS_PER_NET_PEER")) {
    c.channels_per_net_peer = static_cast<int>(r.integer("NCCL_NCHANNELS_PER_NET_PEER"));
    if (c.channels_per_net_peer > kMaxChannels) {
      r.fail("NCCL_NCHANNELS_PER_NET_PEER", "at most 32 channels",
             std::to_string(c.channels_per_net_peer));
    }
  }
  if (take("NCCL_IB_QPS_PER_CONNECTION")) {
    c.qps_per_connection = static_cast<uint32_t>(r.integer("NCCL_IB_QPS_PER_CONNECTION"));
  }
  if (take("NCCL_IB_SPLIT_DATA_ON_QPS")) c.split_data_on_qps = flag(r, "NCCL_IB_SPLIT_DATA_ON_QPS");
  if (take("NCCL_BUFFSIZE")) c.buffsize = r.bytes("NCCL_BUFFSIZE");
  if (take("NCCL_LL_BUFFSIZE")) c.ll_buffsize = r.bytes("NCCL_LL_BUFFSIZE");
  if (take("NCCL_LL128_BUFFSIZE")) c.ll128_buffsize = r.bytes("NCCL_LL128_BUFFSIZE");
  if (take("NCCL_P2P_NET_CHUNKSIZE")) c.p2p_net_chunksize = r.bytes("NCCL_P2P_NET_CHUNKSIZE");
  if (take("NCCL_P2P_NVL_CHUNKSIZE")) c.p2p_nvl_chunksize = r.bytes("NCCL_P2P_NVL_CHUNKSIZE");
  if (take("NCCL_PXN_DISABLE")) c.pxn = !flag(r, "NCCL_PXN_DISABLE");
  if (take("NCCL_COLLNET_ENABLE")) c.collnet = flag(r, "NCCL_COLLNET_ENABLE");
  if (take("NCCL_NET_OVERHEAD")) c.net_overhead = r.time("NCCL_NET_OVERHEAD");
  if (take("tuning_tables")) c.tuning_tables = r.choice("tuning_tables");
  if (r.has("launch_latency")) c.launch_latency = r.time("launch_latency");
  if (take("base_latency_factor")) c.base_latency_factor = r.number("base_latency_factor");
  if (take("credit_latency")) c.credit_latency = r.time("credit_latency");
  if (take("hop_latency_factor")) c.hop_latency_factor = r.number("hop_latency_factor");
  return c;
}

}  // namespace rocesim::collectives::nccl
