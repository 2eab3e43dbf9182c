#include "sim/collectives/nccl/nccl.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <vector>

#include "sim/collectives/nccl/tuning.hpp"
#include "sim/core/error.hpp"

namespace rocesim::collectives::nccl {
namespace {

constexpr std::array<std::string_view, 10> kCollectiveNames{
    "allreduce", "allgather", "reducescatter", "broadcast", "reduce",
    "alltoall",  "alltoallv", "gather",        "scatter",   "sendrecv"};

// Defaults from NCCL (MODELS.md 5.3-5.5): buffer sizes from src/init.cc, p2p chunks from
// NCCL_P2P_NET_CHUNKSIZE and NCCL_P2P_NVL_CHUNKSIZE, the net overhead by the host CPU
// (default_net_overhead).
constexpr Param kNcclParams[] = {
    {.key = "NCCL_ALGO",
     .type = ParamType::String,
     .fallback = "auto",
     .help = "algorithms the tuner may choose, as NCCL reads them: a list (Ring,Tree), '^' "
             "to exclude (^NVLS,NVLSTree), per collective (allreduce:tree;allgather:ring); "
             "names Ring, Tree, CollNet (both CollNet algorithms), CollNetDirect, CollNetChain, "
             "NVLS, NVLSTree, PAT; auto allows all"},
    {.key = "NCCL_PROTO",
     .type = ParamType::String,
     .fallback = "auto",
     .help = "protocols the tuner may choose (LL, LL128, Simple), in NCCL_ALGO's syntax; auto "
             "allows all"},
    {.key = "NCCL_TREE_THRESHOLD",
     .type = ParamType::Bytes,
     .help = "NCCL releases before 2.5: AllReduce runs Tree below this size and Ring from it on, "
             "instead of the tuner's choice (default: unset, the tuner chooses)",
     .check = Check::NonNegative,
     .optional = true},
    {.key = "NCCL_NVLS_ENABLE",
     .type = ParamType::Integer,
     .fallback = "2",
     .help = "0 disables NVLS and NVLSTree; otherwise they are offered where the servers' "
             "NVSwitch supports multicast (Hopper or later, more than 2 GPUs)",
     .check = Check::NonNegative},
    {.key = "NCCL_PAT_ENABLE",
     .type = ParamType::Integer,
     .fallback = "2",
     .help = "0 disables PAT; otherwise AllGather and ReduceScatter may run it (Simple) where "
             "every server holds one rank of the communicator (NCCL 2.23 on; not in the "
             "2.20.3 tables nor RCCL's)",
     .check = Check::NonNegative},
    {.key = "RCCL_MSCCL_ENABLE",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "RCCL: 1 runs its MSCCL all-pairs AllReduce where one matches (8 GPUs of one "
             "xGMI mesh, up to 16 MiB), before its tuner and whatever NCCL_ALGO says; 0 "
             "leaves every operation to the tuner",
     .check = Check::NonNegative},
    {.key = "NCCL_MIN_NCHANNELS",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "lower bound on channels (0: automatic, 2 per NIC of a server); NCCL limits it to its "
             "MAXCHANNELS (64; 32 with tuning_tables 2.20.3, 2.8.3), RCCL ignores it above its own "
             "(128 on one node, 64 across) or above 64 with fewer than 8 ranks",
     .check = Check::NonNegative,
     .max = 256},
    {.key = "NCCL_MAX_NCHANNELS",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "upper bound on channels (0: automatic)",
     .check = Check::NonNegative,
     .max = 256},
    {.key = "NCCL_MIN_CTAS",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "lower bound on channels (CTAs), like NCCL_MIN_NCHANNELS; the larger bound wins",
     .check = Check::NonNegative,
     .max = 256},
    {.key = "NCCL_MAX_CTAS",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "upper bound on channels (CTAs), like NCCL_MAX_NCHANNELS; the smaller bound wins",
     .check = Check::NonNegative,
     .max = 256},
    {.key = "NCCL_MIN_P2P_NCHANNELS",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "lower bound on the point-to-point channels (NCCL's p2pnChannels: the "
             "communicator's channels within NCCL_MIN/MAX_P2P_NCHANNELS, rounded up to a power "
             "of two)",
     .check = Check::Positive,
     .max = 32},
    {.key = "NCCL_MAX_P2P_NCHANNELS",
     .type = ParamType::Integer,
     .fallback = "32",
     .help = "upper bound on the point-to-point channels (the SMs AlltoAll, Gather, Scatter "
             "and Send/Recv may take)",
     .check = Check::Positive,
     .max = 32},
    {.key = "NCCL_NCHANNELS_PER_NET_PEER",
     .type = ParamType::Integer,
     .help = "point-to-point (AlltoAll, Gather, Scatter, Send/Recv) across servers: the most "
             "channels, hence connections and QPs, that a pair's operation is split into, as "
             "NCCL splits it (fewer for small operations); the data is split evenly (default: 2, "
             "halved while they times the ranks exceed 4 times the p2p channels; NCCL 2.22 to "
             "2.28 (tuning_tables newest) then take at least the GPU's NICs and a set value as "
             "it is, older releases and RCCL halve a set value too; NCCL 2.8 takes 1)",
     .check = Check::Positive,
     .optional = true,
     .max = 32},
    {.key = "NCCL_IB_QPS_PER_CONNECTION",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "QPs per connection; each has its own UDP source port, hence ECMP path",
     .check = Check::Positive,
     .max = 128},
    {.key = "NCCL_IB_SPLIT_DATA_ON_QPS",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "1: every message is split over all QPs; 0: messages go to the QPs in turn",
     .check = Check::NonNegative},
    {.key = "NCCL_NET",
     .type = ParamType::String,
     .fallback = "IB",
     .help = "the network NCCL uses between servers, by its plugin's name (any case): Socket "
             "(TCP through the hosts: each connection's data on NCCL_SOCKET_NTHREADS x "
             "NCCL_NSOCKS_PERTHREAD TCP connections in the lossy class, staged in host memory, "
             "so neither PXN nor CollNet; TCP's own dynamics need network.model: fluid, see "
             "network.tcp); IB (NCCL's RDMA transport, InfiniBand and RoCE) or the name of an "
             "external plugin (such as AWS Libfabric): RDMA over the scenario's NICs"},
    {.key = "NCCL_SOCKET_NTHREADS",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "NCCL_NET=Socket: helper threads per connection, each driving "
             "NCCL_NSOCKS_PERTHREAD sockets; 0 (NCCL's default but on AWS and GCP NICs, "
             "where it takes 2 and 4): the data goes over the connection's one control socket",
     .check = Check::NonNegative,
     .max = 16},
    {.key = "NCCL_NSOCKS_PERTHREAD",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "NCCL_NET=Socket: sockets per helper thread (NCCL's default but on AWS NICs, 8); "
             "threads x sockets at most 64, NCCL lowering the sockets per thread to fit",
     .check = Check::Positive,
     .max = 64},
    {.key = "NCCL_BUFFSIZE",
     .type = ParamType::Bytes,
     .help = "buffer per connection for the Simple protocol (8 steps); it also bounds the "
             "point-to-point chunks to an eighth of it (default: NCCL's, 4MiB; 1MiB on Arm "
             "hosts (node.cpu) with tuning_tables 2.8.3, as NCCL before 2.19; the effective "
             "scenario records the value used)",
     .check = Check::Positive,
     .optional = true},
    {.key = "NCCL_LL_BUFFSIZE",
     .type = ParamType::Bytes,
     .help = "buffer per connection for LL (default: the library's, 8 lines of 16 bytes a "
             "thread for 8 steps: NCCL 512KiB, RCCL 256KiB with its 256 threads)",
     .check = Check::Positive,
     .optional = true},
    {.key = "NCCL_LL128_BUFFSIZE",
     .type = ParamType::Bytes,
     .help = "buffer per connection for LL128 (default: the library's, NCCL 4915200B: 120 "
             "8-byte elements x 640 threads x 8 steps; RCCL 458752B: 28 x 256 x 8)",
     .check = Check::Positive,
     .optional = true},
    {.key = "NCCL_P2P_NET_CHUNKSIZE",
     .type = ParamType::Bytes,
     .help = "chunk of point-to-point sends over the network (8 in flight per peer; default: "
             "NCCL's, 128KiB; RCCL's by GPU and ranks: 512KiB from 64 ranks on cdna3, 256KiB "
             "from 16 and 512KiB from 32 on cdna4; the newest NCCL doubles it, set or not, "
             "across nodes of Arm hosts with blackwell GPUs)",
     .check = Check::Positive,
     .optional = true},
    {.key = "NCCL_P2P_NVL_CHUNKSIZE",
     .type = ParamType::Bytes,
     .fallback = "512KiB",
     .help = "chunk of point-to-point sends between GPUs of one server, over NVLink (8 in flight "
             "per peer)",
     .check = Check::Positive},
    {.key = "NCCL_PXN_DISABLE",
     .type = ParamType::Integer,
     .help = "1 disables PXN: a GPU then sends through its own NIC instead of crossing NVLink "
             "to the GPU on the destination's rail (default: PXN on with NCCL; with RCCL from "
             "64 ranks on cdna3, from 32 on cdna4, as RCCL decides when the variable is unset)",
     .check = Check::NonNegative,
     .optional = true},
    {.key = "NCCL_COLLNET_ENABLE",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "1 allows CollNet (in-network reduction in the switches, SHARP-style) for "
             "AllReduce across servers: CollNetDirect (servers with an NVSwitch) and "
             "CollNetChain, up to 8 GPUs a server",
     .check = Check::NonNegative},
    {.key = "NCCL_NET_OVERHEAD",
     .type = ParamType::Time,
     .help = "host overhead per network step, x3 for Simple (default: NCCL's for the servers' "
             "node.cpu, 2 us on AMD x86 hosts, 1 us on Intel and Arm; the effective scenario "
             "records the value used)",
     .check = Check::NonNegative,
     .optional = true},
    {.key = "library",
     .type = ParamType::Choice,
     .help = "the collective library: nccl (NVIDIA) or rccl (AMD: its tuning model, channel "
             "counts, 256 threads per channel, LL128 lines of 64 bytes); default: the GPUs' "
             "own, rccl on AMD GPUs (gpu_arch cdna3, cdna4), nccl on the others (or the one "
             "tuning_tables names)",
     .choices = "nccl|rccl",
     .optional = true},
    {.key = "tuning_tables",
     .type = ParamType::Choice,
     .help = "the release whose tuning.cc constants (latencies, bandwidth caps) are used: "
             "newest, 2.20.3 or 2.8.3 of NCCL, rccl-mi300 (RCCL's model 5 on MI300-class "
             "servers, model 6 on MI350-class GPUs, gpu_arch cdna4, as RCCL switches); "
             "default: newest for nccl, rccl-mi300 for rccl",
     .choices = "newest|2.20.3|2.8.3|rccl-mi300",
     .optional = true},
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
     .help =
         "receiver-driven admission: time for a receiver to return a credit (clear-to-send) "
         "beyond the path's round trip; a connection has at most NCCL_STEPS steps in flight per "
         "round trip plus this",
     .check = Check::NonNegative},
    {.key = "hop_latency_factor",
     .type = ParamType::Number,
     .fallback = "1",
     .help = "scales NCCL's per-hop latency estimates (hwLat), the GPU, proxy and protocol cost "
             "of one pipeline step added to the fabric's own latency",
     .check = Check::NonNegative},
    {.key = "proxy_post_latency",
     .type = ParamType::Time,
     .fallback = "130ns",
     .help = "host time a GPU's proxy thread spends posting one channel's network step; it posts "
             "the channels one after another, so a network step of an operation on C channels "
             "waits (C - 1) x this for its last channel (130 ns: the growth of small-message "
             "times with the channel count, 110-167 ns on the H100 and MI355X development "
             "tables; 0: not charged)",
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
    case Algorithm::CollNetDirect:
      return "CollNetDirect";
    case Algorithm::CollNetChain:
      return "CollNetChain";
    case Algorithm::Nvls:
      return "NVLS";
    case Algorithm::NvlsTree:
      return "NVLSTree";
    case Algorithm::Pat:
      return "PAT";
    case Algorithm::Msccl:
      return "MSCCL";
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

bool is_noop(Collective c, int64_t bytes) {
  return bytes == 0 && !is_p2p(c);
}

std::string_view path_protocol_name(Collective c, Protocol p, int64_t bytes) {
  return is_noop(c, bytes) ? "none" : protocol_name(p);
}

std::string_view path_name(Collective c, int nranks, Algorithm a, int64_t bytes) {
  if (is_p2p(c)) return "p2p";
  if (is_noop(c, bytes)) return "none";
  return nranks == 1 ? "copy" : algorithm_name(a);
}

std::optional<Collective> parse_collective(std::string_view s) {
  for (size_t i = 0; i < kCollectiveNames.size(); ++i) {
    if (kCollectiveNames[i] == s) return static_cast<Collective>(i);
  }
  return std::nullopt;
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

/// Calls f on each `sep`-separated item of `list`, in order, while it returns true; false when
/// one did not.
template <class F>
bool each_item(std::string_view list, char sep, F&& f) {
  while (!list.empty()) {
    const size_t at = list.find(sep);
    if (!f(list.substr(0, at))) return false;
    list = at == std::string_view::npos ? std::string_view{} : list.substr(at + 1);
  }
  return true;
}

/// Bits of one name: an algorithm or protocol; nullopt if unknown.
std::optional<uint8_t> list_bits(std::string_view name, bool algorithms) {
  const std::string n = lower(trim(name));
  if (algorithms) {
    if (n == "tree") return uint8_t{1} << static_cast<int>(Algorithm::Tree);
    if (n == "ring") return uint8_t{1} << static_cast<int>(Algorithm::Ring);
    if (n == "collnetdirect") return uint8_t{1} << static_cast<int>(Algorithm::CollNetDirect);
    if (n == "collnetchain") return uint8_t{1} << static_cast<int>(Algorithm::CollNetChain);
    if (n == "collnet") {
      return static_cast<uint8_t>((1u << static_cast<int>(Algorithm::CollNetDirect)) |
                                  (1u << static_cast<int>(Algorithm::CollNetChain)));
    }
    if (n == "nvls") return uint8_t{1} << static_cast<int>(Algorithm::Nvls);
    if (n == "nvlstree") return uint8_t{1} << static_cast<int>(Algorithm::NvlsTree);
    if (n == "pat") return uint8_t{1} << static_cast<int>(Algorithm::Pat);
    return std::nullopt;
  }
  if (n == "ll") return uint8_t{1} << static_cast<int>(Protocol::LL);
  if (n == "ll128") return uint8_t{1} << static_cast<int>(Protocol::LL128);
  if (n == "simple") return uint8_t{1} << static_cast<int>(Protocol::Simple);
  return std::nullopt;
}

}  // namespace

std::optional<NcclMask> parse_nccl_list(std::string_view text, bool algorithms, std::string& bad) {
  const uint8_t all = algorithms ? kTunerAlgorithms : 0b111;
  NcclMask mask{};
  mask.fill(all);
  text = trim(text);
  if (text.empty() || lower(text) == "auto") return mask;
  // One "[func:][^]name,name" entry, applied to the collectives it names (all without func).
  auto apply = [&](std::string_view entry) -> bool {
    entry = trim(entry);
    std::vector<Collective> targets;
    const size_t colon = entry.find(':');
    if (colon != std::string_view::npos) {
      const std::string func = lower(trim(entry.substr(0, colon)));
      const std::optional<Collective> c = parse_collective(func);
      if (!c) {
        bad = func;
        return false;
      }
      targets.push_back(*c);
      entry = trim(entry.substr(colon + 1));
    } else {
      for (int c = 0; c < kCollectives; ++c)
        targets.push_back(static_cast<Collective>(c));
    }
    const bool exclude = !entry.empty() && entry.front() == '^';
    if (exclude) entry.remove_prefix(1);
    uint8_t bits = 0;
    const bool known = each_item(entry, ',', [&](std::string_view name) {
      const std::optional<uint8_t> b = list_bits(name, algorithms);
      if (!b) bad = std::string(trim(name));
      bits = static_cast<uint8_t>(bits | b.value_or(0));
      return b.has_value();
    });
    if (!known) return false;
    for (Collective c : targets)
      mask[static_cast<size_t>(c)] = exclude ? static_cast<uint8_t>(all & ~bits) : bits;
    return true;
  };
  if (!each_item(text, ';', apply)) return std::nullopt;
  return mask;
}

bool nccl_debug_info(std::string_view level) {
  const std::string l = lower(trim(level));
  return l == "info" || l == "trace";
}

bool nccl_debug_subsys(std::string_view list, std::string_view name) {
  list = trim(list);
  const bool invert = !list.empty() && list.front() == '^';
  if (invert) list.remove_prefix(1);
  const std::string wanted = lower(name);
  bool named = false;
  each_item(list, ',', [&](std::string_view item) {
    const std::string n = lower(trim(item));
    named = named || n == wanted || n == "all";
    return true;
  });
  return named != invert;
}

ProtocolTraits protocol_traits(Protocol p, bool rccl) {
  if (rccl && p == Protocol::LL128) return {56.0 / 64.0, 56, false};
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
  // The defaults as NCCL and RCCL size them (init.cc, DEFAULT_LL_BUFFSIZE and
  // DEFAULT_LL128_BUFFSIZE from device.h): LL NCCL_LL_LINES_PER_THREAD (8) lines of 16 bytes for
  // each of NCCL_LL_MAX_NTHREADS for NCCL_STEPS (8); LL128 NCCL_LL128_ELEMS_PER_THREAD 8-byte
  // elements for each of NCCL_LL128_MAX_NTHREADS, 8 steps. NCCL: 512 threads, 120 elements of
  // 640 threads; RCCL (ROCm/rccl src/include/device.h): 256 threads, 28 elements of 256.
  switch (p) {
    case Protocol::LL:
      return ll_buffsize.value_or(Bytes(int64_t{8} * (is_rccl() ? 256 : 512) * kNcclSteps * 16));
    case Protocol::LL128:
      return ll128_buffsize.value_or(
          Bytes(int64_t{is_rccl() ? 28 * 256 : 120 * 640} * kNcclSteps * 8));
    case Protocol::Simple:
      break;
  }
  ROCESIM_CHECK(buffsize.has_value(), "NCCL's Simple buffer resolved for the host");
  return *buffsize;
}

int NcclConfig::sockets_per_thread() const {
  return socket_nthreads == 0 ? nsocks_perthread : std::min(nsocks_perthread, 64 / socket_nthreads);
}

int NcclConfig::sockets() const {
  if (socket_nthreads == 0) return 1;  // the control socket
  return socket_nthreads * sockets_per_thread();
}

Time default_net_overhead(fabric::CpuKind cpu) {
  return fabric::is_amd(cpu) ? Time::us(2) : Time::us(1);
}

Bytes default_buffsize(fabric::CpuKind cpu, std::string_view release) {
  return Bytes(cpu == fabric::CpuKind::Arm && tuning_tables(release).nccl28 ? 1 << 20 : 4 << 20);
}

Bytes default_p2p_net_chunksize(bool rccl, fabric::GpuArch arch, int nranks) {
  if (rccl && arch == fabric::GpuArch::Cdna3 && nranks >= 64) return Bytes(512 << 10);
  if (rccl && arch == fabric::GpuArch::Cdna4 && nranks >= 16)
    return Bytes(nranks >= 32 ? 512 << 10 : 256 << 10);
  return Bytes(128 << 10);
}

bool default_pxn(bool rccl, fabric::GpuArch arch, int nranks) {
  if (rccl && arch == fabric::GpuArch::Cdna3) return nranks >= 64;
  if (rccl && arch == fabric::GpuArch::Cdna4) return nranks >= 32;
  return true;  // NCCL's default; RCCL's on other GPUs too
}

const ParamTable& nccl_table() {
  return kNcclTable;
}

std::string nccl_env_value(std::string_view key, std::string value) {
  const Param* p = kNcclTable.find(key);
  const bool digits = !value.empty() && std::all_of(value.begin(), value.end(),
                                                    [](char ch) { return ch >= '0' && ch <= '9'; });
  if (p != nullptr && p->type == ParamType::Bytes && digits) value += "B";
  return value;
}

NcclConfig for_gpus(NcclConfig c, fabric::GpuArch arch) {
  if (!c.rccl) {
    c.rccl = c.tuning_tables.empty() ? fabric::is_amd(arch) : c.tuning_tables == "rccl-mi300";
  }
  if (c.tuning_tables.empty()) c.tuning_tables = *c.rccl ? "rccl-mi300" : "newest";
  return c;
}

NcclConfig read_nccl(const ParamReader& r, NcclConfig c, bool only_written) {
  // Every key when reading a scenario's section (the table's defaults are the defaults), only
  // the written ones when a workload overrides the scenario's settings.
  auto take = [&](std::string_view key) { return !only_written || r.has(key); };
  if (only_written) r.record_as_written();
  for (const bool algorithms : {true, false}) {
    const char* key = algorithms ? "NCCL_ALGO" : "NCCL_PROTO";
    if (!take(key)) continue;
    std::string bad;
    const std::optional<NcclMask> m = parse_nccl_list(r.string(key), algorithms, bad);
    if (!m) {
      r.fail(key,
             algorithms ? "a list of Ring, Tree, CollNet, CollNetDirect, CollNetChain, NVLS, "
                          "NVLSTree, PAT (optionally '^' first, or func:list entries)"
                        : "a list of LL, LL128, Simple (optionally '^' first, or func:list "
                          "entries)",
             "'" + bad + "' in '" + r.string(key) + "'");
    }
    // NCCL fails an operation that none of its algorithms or protocols may run
    // ("no algorithm/protocol available"): such a list is refused at the key.
    if (std::any_of(m->begin(), m->end(), [](uint8_t bits) { return bits == 0; })) {
      r.fail(key,
             algorithms ? "a list that leaves every collective an algorithm to run"
                        : "a list that leaves every collective a protocol to run",
             "'" + r.string(key) + "', which leaves a collective none");
    }
    (algorithms ? c.algos : c.protos) = *m;
    if (!algorithms && r.has(key)) {
      const std::string text = lower(trim(r.string(key)));
      c.protos_set = !text.empty() && text != "auto";
    }
  }
  if (take("NCCL_NVLS_ENABLE")) c.nvls_enable = r.integer_as<int>("NCCL_NVLS_ENABLE");
  if (take("NCCL_PAT_ENABLE")) c.pat_enable = r.integer_as<int>("NCCL_PAT_ENABLE");
  if (take("RCCL_MSCCL_ENABLE")) c.msccl = flag(r, "RCCL_MSCCL_ENABLE");
  if (r.has("NCCL_TREE_THRESHOLD")) c.tree_threshold = r.bytes("NCCL_TREE_THRESHOLD");
  if (take("NCCL_MIN_NCHANNELS")) c.min_channels = r.integer_as<int>("NCCL_MIN_NCHANNELS");
  if (take("NCCL_MAX_NCHANNELS")) c.max_channels = r.integer_as<int>("NCCL_MAX_NCHANNELS");
  if (take("NCCL_MIN_CTAS")) c.min_ctas = r.integer_as<int>("NCCL_MIN_CTAS");
  if (take("NCCL_MAX_CTAS")) c.max_ctas = r.integer_as<int>("NCCL_MAX_CTAS");
  if (take("NCCL_MIN_P2P_NCHANNELS")) {
    c.min_p2p_channels = r.integer_as<int>("NCCL_MIN_P2P_NCHANNELS");
  }
  if (take("NCCL_MAX_P2P_NCHANNELS")) {
    c.max_p2p_channels = r.integer_as<int>("NCCL_MAX_P2P_NCHANNELS");
  }
  if (r.has("NCCL_NCHANNELS_PER_NET_PEER")) {
    c.channels_per_net_peer = r.integer_as<int>("NCCL_NCHANNELS_PER_NET_PEER");
  }
  if (take("NCCL_IB_QPS_PER_CONNECTION")) {
    c.qps_per_connection = r.integer_as<uint32_t>("NCCL_IB_QPS_PER_CONNECTION");
  }
  if (take("NCCL_IB_SPLIT_DATA_ON_QPS")) c.split_data_on_qps = flag(r, "NCCL_IB_SPLIT_DATA_ON_QPS");
  if (take("NCCL_NET")) {
    // NCCL picks the plugin whose name matches, case aside (net.cc). Another plugin (AWS
    // Libfabric for EFA, ...) is RDMA over the NICs the scenario describes.
    const std::string net = lower(trim(r.string("NCCL_NET")));
    if (net.empty()) {
      r.fail("NCCL_NET", "a network plugin's name (IB, Socket or an external plugin's)", "''");
    }
    c.net_socket = net == "socket";
  }
  if (take("NCCL_SOCKET_NTHREADS")) c.socket_nthreads = r.integer_as<int>("NCCL_SOCKET_NTHREADS");
  if (take("NCCL_NSOCKS_PERTHREAD")) {
    c.nsocks_perthread = r.integer_as<int>("NCCL_NSOCKS_PERTHREAD");
  }
  // A buffer holds NCCL_STEPS (8) steps and a step, or a chunk, at least two bytes: what a
  // step of the smallest element type moves.
  auto sized = [&](std::string_view key, int64_t least) {
    const Bytes b = r.bytes(key);
    if (b.count() < least) r.fail(key, fmt::format("at least {} bytes", least), format_bytes(b));
    return b;
  };
  if (r.has("NCCL_BUFFSIZE")) c.buffsize = sized("NCCL_BUFFSIZE", 2 * kNcclSteps);
  if (r.has("NCCL_LL_BUFFSIZE")) c.ll_buffsize = sized("NCCL_LL_BUFFSIZE", 2 * kNcclSteps);
  if (r.has("NCCL_LL128_BUFFSIZE")) {
    c.ll128_buffsize = sized("NCCL_LL128_BUFFSIZE", 2 * kNcclSteps);
  }
  if (r.has("NCCL_P2P_NET_CHUNKSIZE")) {
    c.p2p_net_chunksize = sized("NCCL_P2P_NET_CHUNKSIZE", 2);
  }
  if (take("NCCL_P2P_NVL_CHUNKSIZE")) c.p2p_nvl_chunksize = sized("NCCL_P2P_NVL_CHUNKSIZE", 2);
  if (r.has("NCCL_PXN_DISABLE")) c.pxn = !flag(r, "NCCL_PXN_DISABLE");
  if (take("NCCL_COLLNET_ENABLE")) c.collnet = flag(r, "NCCL_COLLNET_ENABLE");
  if (r.has("NCCL_NET_OVERHEAD")) c.net_overhead = r.time("NCCL_NET_OVERHEAD");
  if (r.has("library")) {
    c.rccl = r.choice("library") == "rccl";
    if (!r.has("tuning_tables")) c.tuning_tables.clear();  // the library's
  }
  if (r.has("tuning_tables")) {
    c.tuning_tables = r.choice("tuning_tables");
    if (c.rccl && *c.rccl != (c.tuning_tables == "rccl-mi300")) {
      r.fail("tuning_tables",
             *c.rccl ? "RCCL's tables (rccl-mi300) with library: rccl"
                     : "NCCL's tables (newest, 2.20.3, 2.8.3) with library: nccl",
             c.tuning_tables);
    }
  }
  if (r.has("launch_latency")) c.launch_latency = r.time("launch_latency");
  if (take("base_latency_factor")) c.base_latency_factor = r.number("base_latency_factor");
  if (take("credit_latency")) c.credit_latency = r.time("credit_latency");
  if (take("hop_latency_factor")) c.hop_latency_factor = r.number("hop_latency_factor");
  if (take("proxy_post_latency")) c.proxy_post_latency = r.time("proxy_post_latency");
  return c;
}

}  // namespace rocesim::collectives::nccl
