#include "sim/collectives/nccl/collective.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

#include "sim/core/rng.hpp"
#include "sim/fabric/gpu_selection.hpp"
#include "sim/routing/equal_cost.hpp"

namespace rocesim::collectives::nccl {
namespace {

const Communicator::Tree kNoTree{};  // a tree of no edges (NVLS inside one node)

// NCCL's chunking of collectives (MODELS.md 5.1): CHUNKSTEPS = NCCL_STEPS/2 and SLICESTEPS =
// NCCL_STEPS/4 for AllReduce, AllGather and ReduceScatter; 1 and 1 for Broadcast and Reduce.
constexpr int kChunkSteps = kNcclSteps / 2;
constexpr int kSliceSteps = kNcclSteps / 4;
// NCCL's threads per channel (maxThreads: LL 512, LL128 640, Simple 512) and the bytes each
// thread should get before the operation takes another channel (threadThresholds, tuning.cc:
// NCCL_LL_THREAD_THRESHOLD 8, NCCL_LL128_THREAD_THRESHOLD 8, NCCL_SIMPLE_THREAD_THRESHOLD 64).
constexpr double kThreads[3] = {512, 640, 512};
constexpr double kThreadThreshold[3] = {8, 8, 64};
// Per-peer point-to-point buffer: NCCL_STEPS chunks of NCCL_P2P_NET_CHUNKSIZE.
constexpr int kP2pSteps = kNcclSteps;

/// Items 0 .. n-1 grouped by bucket (bucket_of(i) < buckets), in item order within a bucket
/// (a counting sort): bucket b's items are order[begin[b] .. begin[b + 1]).
template <typename BucketOf>
void group_by(size_t n, size_t buckets, BucketOf bucket_of, std::vector<uint32_t>& begin,
              std::vector<uint32_t>& order) {
  begin.assign(buckets + 1, 0);
  for (size_t i = 0; i < n; ++i)
    ++begin[bucket_of(i) + 1];
  for (size_t b = 0; b < buckets; ++b)
    begin[b + 1] += begin[b];
  std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
  order.resize(n);
  for (size_t i = 0; i < n; ++i)
    order[fill[bucket_of(i)]++] = static_cast<uint32_t>(i);
}

double seconds(Time t) {
  return t.in_seconds();
}

// The rate of D bytes sent in pieces of s, the first at once and each later one `gap` seconds
// after the one before: they take (D - s) gap / s, the rate D s / ((D - s) gap); no bound where
// one piece holds them all or nothing waits.
double paced_rate(double d, double s, double gap) {
  return d > s && gap > 0 ? d * s / ((d - s) * gap) : network::kNoRateCap;
}

}  // namespace

double ring_delay(const std::vector<double>& gain, double advances) {
  const size_t n = gain.size();
  if (n == 0 || advances < 1) return 0;
  // Best arc of at most `len` edges (0 for none): prefix sums over two laps (made once for
  // both questions below), the least earlier prefix within `len` kept in a monotone queue.
  std::vector<double> prefix;
  std::vector<size_t> window;  // indices of increasing prefix values
  const auto best_arc = [&](size_t len) {
    len = std::min(len, n);
    if (len == 0) return 0.0;
    if (prefix.empty()) {
      prefix.assign(2 * n + 1, 0);
      for (size_t k = 0; k < 2 * n; ++k)
        prefix[k + 1] = prefix[k] + gain[k % n];
      window.reserve(2 * n);
    }
    window.clear();
    size_t head = 0;
    double best = 0;
    for (size_t j = 1; j <= 2 * n; ++j) {
      while (window.size() > head && prefix[window.back()] >= prefix[j - 1])
        window.pop_back();
      window.push_back(j - 1);
      while (window[head] + len < j)
        ++head;
      best = std::max(best, prefix[j] - prefix[window[head]]);
    }
    return best;
  };
  const double lap = std::accumulate(gain.begin(), gain.end(), 0.0);
  const double laps = std::floor(advances / static_cast<double>(n));
  if (lap <= 0 || laps < 1) {
    return best_arc(static_cast<size_t>(std::min(advances, static_cast<double>(n - 1))));
  }
  const auto rest = static_cast<size_t>(advances - laps * static_cast<double>(n));
  return std::max(laps * lap + best_arc(rest), (laps - 1) * lap + best_arc(n - 1));
}

double busbw_factor(Collective c, int n) {
  if (n <= 1) return 0;
  const double nd = n;
  switch (c) {
    case Collective::AllReduce:
      return 2 * (nd - 1) / nd;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
    case Collective::AllToAllv:
    case Collective::Gather:
    case Collective::Scatter:
      return (nd - 1) / nd;
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::SendRecv:
      return 1;
  }
  return 1;
}

OpRunner::OpRunner(const fabric::Fabric& f, std::vector<fabric::NodeId> ranks,
                   const NcclConfig& config, uint32_t id)
    : f_(f),
      id_(id),
      comm_(f, std::move(ranks)),
      config_(for_gpus(config, f.server_of(comm_.ranks().front()).arch)),
      tables_(tuning_tables(config_.tuning_tables)) {
  ROCESIM_CHECK(id < kMaxRunners, "a runner id below 2^23");
  // NCCL's buffers as its init sizes them (computeBuffSizes): Simple's by the host CPU unless
  // set, and the point-to-point chunks within an eighth of it (NCCL_STEPS of them fill it).
  const fabric::Server& server = f_.server_of(comm_.ranks().front());
  if (!config_.buffsize) config_.buffsize = default_buffsize(server.cpu, config_.tuning_tables);
  const Bytes step_bound(config_.buffsize->count() / kNcclSteps);
  if (!config_.p2p_net_chunksize) {
    config_.p2p_net_chunksize =
        default_p2p_net_chunksize(config_.is_rccl(), server.arch, comm_.nranks());
  }
  // GBx hosts (Arm with Blackwell) double it across nodes, a set value too (init.cc).
  const bool gbx = server.cpu == fabric::CpuKind::Arm && server.arch == fabric::GpuArch::Blackwell;
  if (tables_.gbx_p2p_net_chunk && gbx && comm_.nnodes() > 1) {
    config_.p2p_net_chunksize = Bytes(2 * config_.p2p_net_chunksize->count());
  }
  config_.p2p_net_chunksize = std::min(*config_.p2p_net_chunksize, step_bound);
  if (!config_.pxn) config_.pxn = default_pxn(config_.is_rccl(), server.arch, comm_.nranks());
  config_.p2p_nvl_chunksize = std::min(config_.p2p_nvl_chunksize, step_bound);
  // The wire of NCCL's reference hops (see step_cost_us): GPU -> scale-up domain -> GPU inside
  // a server, and GPU -> PCIe -> NIC -> one switch -> NIC -> PCIe -> GPU between servers.
  const fabric::NodeId g = comm_.ranks().front();
  auto latency_to = [&](fabric::NodeId from, auto&& pick) {
    for (fabric::LinkId l : f_.out_links(from)) {
      if (pick(f_.node(f_.link(l).dst))) return f_.link(l).latency.in_us();
    }
    return 0.0;
  };
  ref_nvlink_us_ = f_.server_of(g).scale_up_latency.in_us();
  if (comm_.pcie()) {
    // NCCL's graph ring inside a PCIe server: the narrowest hop of the first node's ring over
    // its GPUs in order, in NCCL's figures (a single GPU: its NIC path).
    const std::vector<fabric::NodeId>& node = comm_.nodes().front();
    double bw = std::numeric_limits<double>::infinity();
    std::vector<fabric::LinkId> path;
    for (size_t i = 0; i < node.size() && node.size() > 1; ++i) {
      path.clear();
      f_.scale_up_path(node[i], node[(i + 1) % node.size()], path);
      bw = std::min(bw, nccl_path_gbytes(f_, path));
    }
    pcie_ring_gbytes_ = std::isfinite(bw) ? bw : nic_path_gbytes(f_, node.front());
  }
  const fabric::NodeId nic = f_.nic_of_gpu(g);
  if (nic != fabric::kNone) {
    const fabric::NodeId sw = f_.first_hop_switch(nic);
    std::vector<fabric::LinkId> host;
    f_.host_path(g, nic, host);
    double pcie = 0;
    for (fabric::LinkId l : host)
      pcie += f_.link(l).latency.in_us();
    const double cable = latency_to(
        nic, [](const fabric::Node& n) { return fabric::is_network_switch(n) && n.tier > 0; });
    ref_net_us_ =
        2 * (pcie + cable) + (sw != fabric::kNone ? f_.node(sw).forwarding_latency.in_us() : 0.0);
  }
}

int64_t OpRunner::p2p_chunk() const {
  if (comm_.nnodes() > 1) return config_.p2p_net_chunksize->count();
  if (comm_.pcie()) return std::min<int64_t>(128 << 10, config_.buffsize->count() / kNcclSteps);
  return config_.p2p_nvl_chunksize.count();
}

int OpRunner::default_channels() const {
  // NCCL: two channels per NIC (its graph's rings, doubled). RCCL on MI300-class GPUs: 64
  // across nodes (its rome model's rings), 56 inside one (28 xGMI rings, doubled) (HARDWARE.md
  // 6; ROCm/rccl src/graph/connect.cc); 112 inside one node of 8 MI350-class GPUs (gfx950: RCCL
  // for ROCm 7.0, CHANGELOG.md).
  // Inside one PCIe server, NCCL's one ring (twice where it is fast), doubled.
  if (config_.is_rccl()) {
    if (comm_.nnodes() > 1) return 64;
    return arch() == fabric::GpuArch::Cdna4 && comm_.ppn() == 8 ? 112 : 56;
  }
  if (comm_.pcie() && comm_.nnodes() == 1) return 2 * pcie_graph_channels();
  return std::min(kMaxChannels, 2 * comm_.nics_per_node());
}

double OpRunner::thread_threshold(Collective c, Protocol p, Algorithm a) const {
  // NCCL's threadThresholds (tuning.cc): Ring/LL's times the ranks, CollNet's Simple 512 bytes
  // a thread (RCCL 256).
  double t = kThreadThreshold[static_cast<int>(p)];
  if (a == Algorithm::Ring && p == Protocol::LL) t *= comm_.nranks();
  if (is_collnet(a) && p == Protocol::Simple) t = config_.is_rccl() ? 256 : 512;
  // RCCL's tuning model sets AllGather's and ReduceScatter's across nodes, times the ranks,
  // unless the channels are set (rcclUpdateThreadThreshold).
  const RcclRange* range = rccl() != nullptr ? rccl()->range(c) : nullptr;
  const bool channels_set = min_channels() > 0 || config_.max_channels > 0;
  if (range != nullptr && comm_.nnodes() > 1 && !channels_set &&
      (c == Collective::AllGather || c == Collective::ReduceScatter)) {
    const double tuned = p == Protocol::LL      ? range->ll_threads
                         : p == Protocol::LL128 ? range->ll128_threads
                                                : 0;
    if (tuned > 0) t = tuned * comm_.nranks();
  }
  return t;
}

double OpRunner::max_threads(Protocol p) const {
  // RCCL's channels run 256 threads (64-wide wavefronts), NCCL's 512 or 640.
  return config_.is_rccl() ? 256 : kThreads[static_cast<int>(p)];
}

int OpRunner::channel_limit() const {
  // NCCL: MAXCHANNELS 64 (nccl@593de54, v2.27.7, src/include/device.h), 32 in earlier releases
  // (2.12's device.h). RCCL: 128, 64 when multi-node (ROCm/rccl src/graph/connect.cc; HARDWARE.md
  // 6).
  if (config_.is_rccl()) return comm_.nnodes() > 1 ? 64 : 128;
  return config_.tuning_tables == "newest" ? 64 : 32;
}

int OpRunner::min_channels() const {
  const int asked = std::max(config_.min_channels, config_.min_ctas);
  const int limit = channel_limit();
  if (!config_.is_rccl()) return std::min(asked, limit);  // "limiting to %d" (ncclMinNchannels)
  // RCCL's init.cc sets a minimum it does not allow back to 2, one that is no bound here:
  // above 64 with fewer than 8 ranks ("ignored due to less than 8 GPUs"), above its maximum
  // (as ROCm/rocm-systems#11255 quotes them).
  if (asked > limit || (comm_.nranks() < 8 && asked > 64)) return 0;
  return asked;
}

int OpRunner::bounded_channels(int c) const {
  for (int bound : {config_.max_channels, config_.max_ctas}) {
    if (bound > 0) c = std::min(c, bound);
  }
  return std::min(std::max(c, min_channels()), channel_limit());
}

int OpRunner::comm_channels() const {
  return bounded_channels(default_channels());
}

int OpRunner::channels_for(Collective c, int64_t bytes, Protocol p, Algorithm a) const {
  const int channels = comm_channels();
  const double per_channel = max_threads(p) * thread_threshold(c, p, a);
  const int by_size = static_cast<int>(static_cast<double>(bytes) / per_channel);
  return std::max(1, std::min(channels, by_size));
}

int OpRunner::threads_for(Collective c, int64_t bytes, Protocol p, Algorithm a,
                          int channels) const {
  auto nt = static_cast<int>(max_threads(p));
  // NCCL's trees use all their threads ("Tree now uses all threads"), NVLS and CollNetDirect
  // are not reduced.
  if (a == Algorithm::Tree || a == Algorithm::Nvls || a == Algorithm::NvlsTree ||
      a == Algorithm::CollNetDirect) {
    return nt;
  }
  const double threshold = thread_threshold(c, p, a);
  while (static_cast<double>(bytes) < channels * nt * threshold && nt % 128 == 0)
    nt /= 2;
  return nt;
}

TuningInput OpRunner::tuning_input(Collective c, int channels) const {
  TuningInput in;
  in.collective = c;
  in.nranks = comm_.nranks();
  in.nnodes = comm_.nnodes();
  in.ppn = comm_.ppn();
  in.channels = channels;
  const fabric::NodeId g = comm_.ranks().front();
  const fabric::Server& server = f_.servers()[f_.node(g).server];
  in.arch = server.arch;
  // A GPU's scale-up bandwidth: its NVLink to the NVSwitch, or all its xGMI links.
  const double nvlink = f_.scale_up_bandwidth(g).bytes_per_second() * 1e-9;
  // A GPU's way out of its server: its PCIe path to the NIC and the NIC's cable, whichever is
  // narrower (NCCL's GPU -> NIC path bandwidth).
  const double nic_path = nic_path_gbytes(f_, g);
  // NCCL's ring and tree graphs across nodes: one channel per NIC of the communicator's GPUs at
  // the NIC path's bandwidth (its search, HARDWARE.md 5.4), at most MAXCHANNELS / 2 of them
  // (init.cc: "maxChannels = MAXCHANNELS/2"); on one node, channels over NVLink.
  // A graph channel enters a node at one GPU and crosses the NVLink of every other, so the
  // search fits the channels that do not enter at a GPU into its NVLink: 8 H100 rings at 48 GB/s
  // leave 7 x 48 on each GPU's 370.8 GB/s, but an NVL72 domain's 32 (of its 72 NICs; 16 where
  // MAXCHANNELS is 32) cross most of its GPUs, whose 721.8 GB/s bounds them to 22.6 (45.1). (In
  // an xGMI mesh each channel crossing a GPU takes a link of its own, at RCCL's 48 GB/s: the NIC
  // path's.)
  // Over PCIe every graph ring crosses every GPU's PCIe link and the links between switches,
  // so the rings share the narrowest of them (pcie_ring_gbytes).
  in.pci_intra = server.scale_up == fabric::ScaleUp::Pcie;
  if (in.nnodes > 1) {
    in.graph_channels = std::min(comm_.nics_in_use(), channel_limit() / 2);
    in.bw_intra = in.bw_inter = nic_path;
    if (in.pci_intra && in.ppn > 1) {
      in.bw_intra = in.bw_inter = std::min(nic_path, pcie_ring_gbytes() / in.graph_channels);
    } else if (in.ppn > 1 && server.nvswitch != fabric::kNone && nvlink > 0) {
      const int crossing = in.graph_channels - in.graph_channels / in.ppn;
      in.bw_intra = in.bw_inter = std::min(nic_path, nvlink / crossing);
    }
  } else if (in.pci_intra) {
    in.graph_channels = pcie_graph_channels();
    in.bw_intra = in.bw_inter = pcie_ring_gbytes() / in.graph_channels;
  } else {
    in.graph_channels = std::max(1, channels / 2);
    in.bw_intra = in.bw_inter = (nvlink > 0 ? nvlink : nic_path) / in.graph_channels;
  }
  // NVLS: NVSwitch multicast from Hopper on, more than 2 GPUs. Its graph has one head per GPU
  // (8 at most), and the search gives each head the NVLink share that leaves room for the
  // head's double traffic: (heads + 1) x bw within a GPU's NVLink.
  const double nvls_efficiency = protocol_caps(in.arch).nvls_efficiency;
  in.nvls = config_.nvls_enable != 0 && server.nvswitch != fabric::kNone && nvls_efficiency > 0 &&
            in.ppn > 2 && nvlink > 0;
  in.nvls_heads = nvls_heads();
  in.nvls_bw_intra = nvlink / (in.nvls_heads + 1);
  in.nvls_bw_inter = nic_path;
  in.collnet = collnet();
  in.nvswitch = server.nvswitch != fabric::kNone;
  in.pat = config_.pat_enable != 0;
  in.net_overhead_us = config_.net_overhead.value_or(default_net_overhead(server.cpu)).in_us();
  in.latency_inter_us = server.net_latency.in_us();
  in.rccl = rccl();
  in.amd_host = fabric::is_amd(server.cpu);
  // LL128 only where NCCL has tested it, inside NVLink domains, unless NCCL_PROTO names the
  // protocols (tuning.cc: an explicit list enables what it allows).
  in.ll128 = config_.protos_set || !in.pci_intra;
  return in;
}

int OpRunner::pcie_graph_channels() const {
  // NCCL's search finds one ring over PCIe (every ring crosses every GPU's one link) and
  // duplicates it when it reaches 25 GB/s (ncclTopoDupChannels), each copy at half the rate.
  return pcie_ring_gbytes() >= 25.0 ? 2 : 1;
}

int OpRunner::nvls_channels() const {
  // NCCL's nvlsChannels (src/transport/nvls.cc): 16 on Hopper; Blackwell 24 inside one NVLink
  // domain, 32 across.
  const fabric::GpuArch arch = f_.servers()[f_.node(comm_.ranks().front()).server].arch;
  const int c = arch == fabric::GpuArch::Blackwell ? (comm_.nnodes() > 1 ? 32 : 24) : 16;
  // NCCL bounds them by the CTA limits like its other channels.
  return bounded_channels(c);
}

engine::ConnectionId OpRunner::connection(engine::Simulation& sim, const Edge& e, int64_t message,
                                          int channel) {
  const EdgeKey key{e.src, e.dst, e.relay, message, channel};
  if (const engine::ConnectionId* known = connections_.find(key)) return *known;
  const engine::ConnectionId id = connect(sim, e, message);
  connections_.insert(key, id);
  return id;
}

engine::ConnectionId OpRunner::connect(engine::Simulation& sim, const Edge& e, int64_t message) {
  engine::ConnectionSpec spec;
  if (e.network && config_.net_socket) {
    // NCCL's socket plugin: TCP connections, each message cut into tasks over its sockets.
    spec.transport = network::Transport::Tcp;
    spec.qps = static_cast<uint32_t>(config_.sockets());
    spec.mode = engine::QpMode::Chunked;
    spec.min_chunk_bytes = kSocketMinChunk;
  } else {
    spec.qps = config_.qps_per_connection;
    spec.mode = config_.split_data_on_qps ? engine::QpMode::Split : engine::QpMode::RoundRobin;
  }
  spec.message_bytes = message;
  spec.relay = e.relay;
  spec.port = e.port;
  spec.through_nics = e.network && f_.node(e.src).server == f_.node(e.dst).server;
  return sim.connect(e.src, e.dst, spec);
}

double OpRunner::beyond_wire_us(const TuningInput& in, Algorithm a, Protocol p,
                                bool network) const {
  // NCCL's hwLat is the measured cost of a pipeline step between GPUs of NCCL's reference
  // system, wire included: one NVLink domain inside a server, one switch between servers. What
  // it adds to a hop beyond its own wire is therefore hwLat less the reference wire; a longer
  // path (more switches, PXN's NVLink detour) adds its extra wire on top, and a hop never costs
  // less than its wire.
  const double hw = config_.hop_latency_factor * step_latency_us(tables_, in, a, p, network);
  return std::max(0.0, hw - (network ? ref_net_us_ : ref_nvlink_us_));
}

void OpRunner::set_step_costs() {
  // Computed once per operation: every leg of it reads them.
  const TuningInput in = tuning_input(result_.collective, result_.channels);
  for (const bool network : {false, true})
    step_cost_us_[network ? 1 : 0] =
        beyond_wire_us(in, table_algorithm(), result_.protocol, network);
  // A GPU's proxy thread posts the network steps of its channels one after another: the last
  // channel's step waits for the others' posts.
  step_cost_us_[1] += std::max(0, result_.channels - 1) * config_.proxy_post_latency.in_us();
}

double OpRunner::leg_latency_us(engine::Simulation& sim, engine::ConnectionId c,
                                bool network) const {
  return sim.connection_latency(c).in_us() + step_cost_us(network);
}

void OpRunner::start(engine::Simulation& sim, engine::WorkloadId id, Collective c, int64_t bytes,
                     int root, double imbalance, uint64_t seed) {
  ROCESIM_CHECK(!running_ && pending_ == 0, "one operation at a time per runner");
  ROCESIM_CHECK(root >= 0 && root < comm_.nranks(), "the root is a rank of the communicator");
  result_ = OpResult{};
  result_.collective = c;
  result_.bytes = bytes;
  result_.start = sim.now();
  running_ = true;
  channels_.clear();
  p2p_.clear();
  p2p_batched_ = false;
  p2p_passes_ = 1;
  if (is_noop(c, bytes)) {
    // No elements: NCCL returns before it makes a task (is_noop), so the operation is over as
    // it is called; launch_data finds nothing to move.
    sim.timer(id, sim.now(), tag(kLaunch, 0));
    return;
  }
  // NCCL's one-rank path (enqueue.cc, taskAppend; RCCL's alike): no tuner and no kernel of its
  // own; out of place a device-to-device copy of the buffer (ncclLaunchOneRank), in place
  // nothing. rocesim's operations are out of place, as nccl-tests' first columns.
  const bool one_rank = comm_.nranks() == 1 && !is_p2p(c);
  const MscclAlgorithm* msccl = is_p2p(c) || one_rank ? nullptr : msccl_for(c, bytes);
  if (is_p2p(c) || one_rank) {
    result_.algorithm = Algorithm::Ring;  // NCCL's point-to-point path; unused for one rank
    result_.protocol = Protocol::Simple;
    result_.channels = 0;
  } else if (msccl != nullptr) {
    // RCCL runs a matching MSCCL schedule without asking its tuner: no model estimate.
    result_.algorithm = Algorithm::Msccl;
    result_.protocol = msccl->protocol;
    result_.channels = msccl->channels;
    result_.threads = static_cast<int>(max_threads(result_.protocol));
    set_step_costs();
  } else {
    uint8_t algos = config_.algos[static_cast<size_t>(c)];
    if (config_.tree_threshold && c == Collective::AllReduce) {
      // Older NCCL: the size alone picks Tree or Ring for AllReduce.
      algos &=
          bytes < config_.tree_threshold->count() ? only(Algorithm::Tree) : only(Algorithm::Ring);
    }
    // NCCL's model is the communicator's, made once for all its channels (tuning.cc; the ring's
    // plateau counts comm->nChannels), whatever the channels an operation then runs.
    const AlgoChoice choice =
        choose(tables_, tuning_input(c, comm_channels()), static_cast<double>(bytes), algos,
               config_.protos[static_cast<size_t>(c)]);
    result_.algorithm = choice.algorithm;
    result_.protocol = choice.protocol;
    const bool nvls =
        choice.algorithm == Algorithm::Nvls || choice.algorithm == Algorithm::NvlsTree;
    result_.channels =
        nvls ? nvls_channels() : channels_for(c, bytes, choice.protocol, choice.algorithm);
    result_.threads = threads_for(c, bytes, choice.protocol, choice.algorithm, result_.channels);
    set_step_costs();
    result_.model_us = model_time_us(tables_, tuning_input(c, comm_channels()), choice.algorithm,
                                     choice.protocol, static_cast<double>(bytes));
  }
  if (comm_.nranks() < 2) {
    // Nothing crosses a link: a rank alone copies in its own memory (below).
    running_ = true;
  } else if (is_p2p(c)) {
    plan_p2p(sim, c, bytes, root, imbalance, seed);
  } else if (result_.algorithm == Algorithm::Pat) {
    plan_pat(sim, c, bytes);
  } else if (result_.algorithm == Algorithm::Msccl) {
    plan_msccl(sim, bytes, *msccl);
  } else {
    plan_pipelined(sim, c, bytes, root);
  }
  Time launch = config_.launch_latency.value_or(Time::us(
      config_.base_latency_factor *
      tables_.base_lat[static_cast<int>(table_algorithm())][static_cast<int>(result_.protocol)]));
  if (comm_.nranks() == 1) {
    // The copy reads and writes every byte in the GPU's memory: after cudaMemcpyAsync's own
    // latency for a collective, inside NCCL's kernel for point-to-point (a send to itself).
    const fabric::GpuSpec& gpu = f_.server_of(comm_.ranks().front()).gpu;
    const Time copy = transfer_time(2.0 * static_cast<double>(bytes),
                                    gpu.memory_bandwidth.bytes_per_second() * gpu.copy_efficiency);
    launch = (one_rank ? gpu.copy_latency : launch) + copy;
  }
  sim.timer(id, sim.now() + launch, tag(kLaunch, 0));
}

const Communicator::Tree& OpRunner::tree_of(LegShape shape, int channel) {
  const int ch = shape == LegShape::CollNetDirect ? 0 : channel;  // one for every channel
  auto [it, fresh] = trees_.try_emplace({shape, ch});
  if (fresh) {
    switch (shape) {
      case LegShape::Tree:
        it->second = comm_.tree(ch);
        break;
      case LegShape::CollNetChains:
        it->second = comm_.collnet_chains(ch);
        break;
      case LegShape::CollNetDirect:
        it->second = comm_.collnet_direct();
        break;
      case LegShape::NvlsTree:
        it->second = comm_.leader_tree(ch);
        break;
      default:
        ROCESIM_CHECK(false, "a tree shape");
    }
  }
  return it->second;
}

void OpRunner::plan_pipelined(engine::Simulation& sim, Collective c, int64_t bytes, int root) {
  const Protocol p = result_.protocol;
  const Algorithm a = result_.algorithm;
  const ProtocolTraits traits = protocol_traits(p, config_.is_rccl());
  const double step_wire = config_.buffer(p).as_double() / kNcclSteps;
  const double step_data = step_wire * traits.efficiency;
  const bool bcast_like = c == Collective::Broadcast || c == Collective::Reduce;
  // Chunk and slice in data bytes (Simple); LL and LL128 forward line by line.
  const double chunk_data = traits.slices ? step_data * (bcast_like ? 1 : kChunkSteps) : step_data;
  const double slice_data =
      traits.slices ? step_data * (bcast_like ? 1 : kSliceSteps) : traits.line_bytes;
  const int n = comm_.nranks();
  const int nch = result_.channels;
  const int64_t message = static_cast<int64_t>(step_wire);
  const fabric::NodeId root_gpu = comm_.ranks()[static_cast<size_t>(root)];

  // CollNetDirect's and, across nodes, NVLS's heads per node (each with its NIC into the
  // switches' reduction), and how many every node has (one otherwise).
  const bool in_network = reduces_in_network(a, comm_.nnodes());
  std::vector<std::vector<fabric::NodeId>> node_heads;
  if (a == Algorithm::CollNetDirect || (in_network && a == Algorithm::Nvls)) {
    for (int k = 0; k < comm_.nnodes(); ++k)
      node_heads.push_back(comm_.heads(k));
  }
  const int heads = node_heads.empty() ? 1 : comm_.head_count();
  // NVLS's chunk and its NVLink efficiency are the operation's, the same on every channel.
  const bool nvls_like = a == Algorithm::Nvls || a == Algorithm::NvlsTree;
  const double nvls_chunk_data = nvls_like ? nvls_chunk(static_cast<double>(bytes), a) : 0;
  const double nvls_efficiency = protocol_caps(arch()).nvls_efficiency;
  for (int ch = 0; ch < nch; ++ch) {
    const double data = static_cast<double>(bytes / nch + (ch < bytes % nch ? 1 : 0));
    if (data <= 0) continue;
    Channel chan;
    chan.net_step = step_wire;
    // The channel's edges and their connections, made once per shape and kept: a later
    // operation with the same algorithm, root, channel and message size reuses them.
    const auto legs_of = [&](LegShape shape, auto make) -> const std::vector<Edge>& {
      auto [it, fresh] = legs_.try_emplace(LegKey{shape, root, ch, message});
      if (fresh) {
        it->second.edges = make();
        for (const Edge& e : it->second.edges)
          it->second.legs.push_back(connection(sim, e, message, ch));
      }
      chan.legs = it->second.legs;
      return it->second.edges;
    };
    const std::vector<Edge>* edges = nullptr;
    if (a == Algorithm::Ring && !bcast_like) {
      edges = &legs_of(LegShape::Ring, [&] { return comm_.ring(ch, ring_pxn()); });
      const double steps = c == Collective::AllReduce ? 2.0 * (n - 1) : n - 1.0;
      const double loops = std::max(1.0, std::ceil(data / (n * chunk_data)));
      const double c_data = data / (n * loops);
      chan.ring = true;
      chan.positions = steps;
      chan.steps = loops * steps;
      chan.chunk = c_data / traits.efficiency;
      // NCCL's primitives cut a chunk into its slices (2 for Simple), each at least 1/32 of a
      // full slice, however small the chunk.
      chan.slice =
          traits.slices
              ? std::min(c_data, std::max(c_data / (kChunkSteps / kSliceSteps), slice_data / 32))
              : std::min(slice_data, c_data);
      chan.slice /= traits.efficiency;
      chan.wire_bytes = chan.steps * chan.chunk;
    } else if (bcast_like) {
      const bool to_root = c == Collective::Reduce;
      edges = &legs_of(to_root ? LegShape::ChainToRoot : LegShape::ChainFromRoot,
                       [&] { return comm_.chain(ch, root_gpu, to_root, ring_pxn()); });
      chan.ring = false;
      chan.hops = static_cast<int>(edges->size());
      for (int i = 0; i < chan.hops; ++i)
        chan.leg_stage.push_back(i);  // a chain's edges in pipeline order
      chan.slice = std::min(slice_data, data) / traits.efficiency;
      chan.wire_bytes = data / traits.efficiency;
    } else if (nvls_like) {
      // NVLS: the channel's head GPU reduces its share through the NVSwitch (multimem loads:
      // every GPU's NVLink sends the share once) and stores the result back (multimem store:
      // the head sends it once, every GPU receives it): over the channels, whose heads rotate,
      // each GPU's NVLink carries (1 + 1/ppn) x its data each way, at NVLS's efficiency. The
      // node ring's legs put exactly that on every GPU link. NVLSTree sends each head's
      // reduced share up a tree of the nodes' heads over their NICs and back down; NVLS across
      // nodes sends it through its NIC into the switches' reduction (CollNet) and receives
      // the sum back (all_reduce.h: "Reduce, send to network", "Recv from network,
      // broadcast"), as CollNetDirect's heads do (their legs are added below). AllGather
      // (multimem stores: each GPU sends its share once and the NVSwitch writes it to every
      // GPU) and ReduceScatter (multimem loads: each GPU reads its share reduced, every GPU's
      // NVLink sending the data once) are one NVLS step, a GPU's NVLink carrying the data one
      // way and 1/ppn of it the other ("NVLS: Send S/N, Receive S" and "Send S, Receive S/N",
      // NVIDIA/nccl#1083): the node ring's legs, which load both ways alike, carry the data.
      const bool gather = c == Collective::AllGather || c == Collective::ReduceScatter;
      size_t node_legs = 0;
      for (int k = 0; k < comm_.nnodes(); ++k)
        node_legs += comm_.node_ring(k).size();
      const bool nvls_tree = a == Algorithm::NvlsTree;
      const Communicator::Tree& t = nvls_tree ? tree_of(LegShape::NvlsTree, ch) : kNoTree;
      edges = &legs_of(nvls_tree ? LegShape::NvlsTree : LegShape::Nvls, [&] {
        std::vector<Edge> out;
        for (int k = 0; k < comm_.nnodes(); ++k) {
          for (const Edge& e : comm_.node_ring(k))
            out.push_back(e);
        }
        out.insert(out.end(), t.up.begin(), t.up.end());
        out.insert(out.end(), t.down.begin(), t.down.end());
        return out;
      });
      const double nvlink_share = (gather ? 1.0 : 1.0 + 1.0 / comm_.ppn()) / nvls_efficiency;
      chan.shares.assign(node_legs, nvlink_share);
      chan.shares.resize(edges->size(), 1.0);
      const int depth = nvls_tree ? t.depth : in_network ? 1 : 0;
      chan.ring = false;
      chan.hops = gather ? 1 : 2 + 2 * depth;
      chan.depth = depth;
      // Stages: the NVLS reduction (0), up the nodes' tree or to the switches (1 .. depth), down
      // again, the NVLS broadcast (2 depth + 1); the NVLink legs carry both NVLS stages.
      // AllGather and ReduceScatter: the one NVLS stage.
      chan.leg_stage.assign(node_legs, kEveryStage);
      for (const int s : t.up_stage)
        chan.leg_stage.push_back(1 + s);
      for (const int s : t.down_stage)
        chan.leg_stage.push_back(1 + depth + s);
      // A channel's step is a chunk for every head (NCCL's loop over nHeads x chunkCount
      // elements): the heads reduce and forward their chunks side by side, each over its own
      // connection, and the pipeline moves on a step at a time.
      chan.heads = nvls_heads();
      chan.slice = std::min(chan.heads * nvls_chunk_data, data);
      chan.wire_bytes = data;
    } else {
      // Tree: up the chains and the tree, and down again; CollNetChain: the chains inside nodes;
      // CollNetDirect: every GPU's share to each head and the result back (the legs of the
      // leaders or heads through the switches are added below). One slice per chunk.
      const bool tree = a == Algorithm::Tree;
      const bool direct = a == Algorithm::CollNetDirect;
      const LegShape shape = tree     ? LegShape::Tree
                             : direct ? LegShape::CollNetDirect
                                      : LegShape::CollNetChains;
      const Communicator::Tree& t = tree_of(shape, ch);
      edges = &legs_of(shape, [&] {
        std::vector<Edge> out = t.up;
        out.insert(out.end(), t.down.begin(), t.down.end());
        return out;
      });
      chan.ring = false;
      chan.hops = tree ? 2 * (t.intra + t.depth) : 2 * t.intra + 2;
      chan.depth = tree ? t.depth : 1;  // CollNet: up to the switches and down again
      // Stages: up (chains, then the tree or the switches), then down; CollNet's legs through
      // the switches (added below) carry its two middle stages.
      chan.leg_stage = t.up_stage;
      for (const int s : t.down_stage)
        chan.leg_stage.push_back(chan.hops / 2 + (tree ? 0 : 1) + s);
      double slice =
          traits.slices ? tree_chunk(static_cast<double>(bytes), step_data, tree) : slice_data;
      if (direct) {
        // Each head takes 1/h of the channel's data; a step is a chunk for every head, each on
        // its own connections (NCCL's loop of nHeads chunks), as NVLS's heads.
        chan.heads = heads;
        chan.shares.assign(edges->size(), 1.0 / chan.heads);
        slice = chan.heads * direct_chunk(static_cast<double>(bytes), step_data, chan.heads);
      }
      chan.slice = std::min(slice, data) / traits.efficiency;
      chan.wire_bytes = data / traits.efficiency;
      if (tree && p == Protocol::LL128)
        chan.net_step = tree_ll128_chunk(static_cast<double>(bytes), step_wire, traits.efficiency);
    }
    double net_max = 0, nvlink_max = 0, sum = 0;
    for (size_t i = 0; i < edges->size(); ++i) {
      const double l = leg_latency_us(sim, chan.legs[i], (*edges)[i].network);
      chan.latency_us.push_back(l);
      chan.step_us.push_back(step_cost_us((*edges)[i].network));
      sum += l;
      double& worst = (*edges)[i].network ? net_max : nvlink_max;
      worst = std::max(worst, l);
      // LL and LL128 forward line by line through NVLink, but NCCL's proxy posts a network send
      // only for a whole buffer step, once every line of it has its flag (net transport,
      // sendProxyProgress): a network leg takes the channel's data a chunk (one step) at a time.
      if (!traits.slices && (*edges)[i].network) {
        chan.leg_slice.resize(edges->size(), chan.slice);
        chan.leg_slice[i] = chan.ring ? chan.chunk : std::min(chan.net_step, chan.wire_bytes);
        // A chain's or tree's network steps do not overlap their fixed cost (the kernel's flag
        // polls and fences, the proxy posting the step): the first leaves at once, each later
        // one a step cost after the one before, so D bytes in steps of s take (D - s) x cost /
        // s beyond the first. (A ring's steps wait for their upstream data, and its fill
        // charges the cost step after step on its first pass.)
        if (!chan.ring) {
          chan.step_pace = std::min(chan.step_pace, paced_rate(chan.wire_bytes, chan.leg_slice[i],
                                                               chan.step_us.back() * 1e-6));
        }
      }
    }
    if (!chan.ring && !chan.leg_slice.empty()) {
      chan.stage_slice.assign(static_cast<size_t>(chan.hops), chan.slice);
      for (size_t i = 0; i < chan.leg_slice.size(); ++i)
        if (chan.leg_stage[i] != kEveryStage) {
          double& s = chan.stage_slice[static_cast<size_t>(chan.leg_stage[i])];
          s = std::max(s, chan.leg_slice[i]);
        }
    }
    if (!chan.ring) {
      if (bcast_like) {
        chan.hops_latency_us = sum;
      } else if (a == Algorithm::Tree) {
        const Communicator::Tree& t = tree_of(LegShape::Tree, ch);
        chan.hops_latency_us = 2 * (t.intra * nvlink_max + t.depth * net_max);
      } else if (nvls_like) {
        // NCCL's count: one NVLS step inside the node, the tree up and down between nodes (NVLS
        // across nodes: its legs through the switches, added below).
        chan.hops_latency_us = nvlink_max + 2 * chan.depth * net_max;
      } else {
        // CollNet: through the node (the chain, or Direct's one hop) up and down again; the
        // switches' leg is added below.
        chan.hops_latency_us = (chan.hops - 2) * nvlink_max;
      }
    }
    channels_.push_back(std::move(chan));
  }
  if (in_network) {
    // The node leaders of each channel (CollNetDirect and NVLS: each head j of every node, with
    // 1/h of the data) send up to the aggregation root and receive the result back: legs leader k
    // -> root -> leader k+1 cover every leader's way up and down once; the switches reduce, so a
    // link between two switches carries one stream of the channel (see pipeline()).
    routing::EqualCostTable distances(f_);
    for (int ch = 0; ch < static_cast<int>(channels_.size()); ++ch) {
      Channel& chan = channels_[static_cast<size_t>(ch)];
      const auto port = static_cast<uint32_t>(ch % comm_.nics_per_node() % comm_.nics_per_gpu());
      double net_latency = 0;
      for (int j = 0; j < heads; ++j) {
        std::vector<fabric::NodeId> lead;
        if (node_heads.empty()) {
          lead = comm_.leaders(ch);
        } else {
          for (const std::vector<fabric::NodeId>& hs : node_heads)
            lead.push_back(hs[static_cast<size_t>(j)]);
        }
        std::vector<fabric::NodeId> first;
        for (fabric::NodeId g : lead)
          first.push_back(f_.first_hop_switch(f_.nic_of_gpu(g, port)));
        fabric::NodeId root_switch = fabric::kNone;
        uint32_t best = std::numeric_limits<uint32_t>::max();
        for (fabric::NodeId s = 0; s < f_.node_count(); ++s) {
          if (!distances.is_fabric_switch(s)) continue;
          uint32_t worst = 0;
          for (fabric::NodeId x : first)
            worst = std::max(worst, distances.distance(x, s));
          if (worst < best) {
            best = worst;
            root_switch = s;
          }
        }
        for (size_t k = 0; k < lead.size(); ++k) {
          engine::ConnectionSpec spec;
          spec.qps = config_.qps_per_connection;
          spec.mode =
              config_.split_data_on_qps ? engine::QpMode::Split : engine::QpMode::RoundRobin;
          spec.message_bytes = message;
          spec.port = port;
          const fabric::NodeId via[] = {root_switch};
          const engine::ConnectionId leg =
              sim.connect(lead[k], lead[(k + 1) % lead.size()], spec, via);
          chan.legs.push_back(leg);
          if (!chan.shares.empty()) chan.shares.push_back(1.0 / heads);
          chan.leg_stage.push_back(kEveryStage);
          chan.latency_us.push_back(leg_latency_us(sim, leg, true));
          net_latency = std::max(net_latency, chan.latency_us.back());
        }
      }
      chan.hops_latency_us += net_latency;  // up to the root and down again: one leg's path
    }
  }
  set_stage_rates(sim, c, bytes, root);
}

void OpRunner::set_stage_rates(engine::Simulation& sim, Collective c, int64_t bytes, int root) {
  StagePaces& kept = stage_paces_;
  if (kept.bytes == bytes && kept.paths_version == sim.paths_version() && kept.collective == c &&
      kept.algorithm == result_.algorithm && kept.protocol == result_.protocol &&
      kept.channels == result_.channels && kept.root == root &&
      kept.stages.size() == channels_.size()) {
    for (size_t ch = 0; ch < channels_.size(); ++ch)
      channels_[ch].stages = kept.stages[ch];
    return;
  }
  // Every channel of the operation moves alike and in step, so stage k of one channel runs
  // alongside stage k of every other. A stage moves at the pace of its slowest leg alone at the
  // busiest link of its path (its QP's path): capacity / load, the load being the bytes per
  // byte of a channel of the legs that run there, on average over the stage's busy time. With
  // N slices in a channel (N = data / slice, a fraction for a last partial slice), stage k is
  // busy N slice times from slice time k, and stage k + d from k + d: they overlap for
  // max(0, N - |d|) of stage k's N, so a leg d stages away counts with that fraction of its
  // share (nearly all of it once N is well past the depth, the steady state; none at |d| >= N),
  // and the legs of every stage count whole. A stage with no leg of its own (NVLS's, CollNet's
  // way through the switches) moves at the pace of those legs.
  StageLoads& t = stage_loads_;
  auto path_of = [&](engine::ConnectionId leg) {
    return sim.paths().links(sim.qps()[sim.connection_qps(leg).first].path);
  };
  // The links the operation's legs cross, each with a dense index (its first use; a stamp per
  // operation spares clearing the fabric-wide table), and what each stage puts on each.
  if (t.stamp.size() < f_.link_count()) {
    t.stamp.resize(f_.link_count(), 0);
    t.index.resize(f_.link_count(), 0);
  }
  ++t.now;
  t.links.clear();
  t.uses.clear();
  auto index_of = [&](fabric::LinkId l) {
    if (t.stamp[l] != t.now) {
      t.stamp[l] = t.now;
      t.index[l] = static_cast<uint32_t>(t.links.size());
      t.links.push_back(l);
    }
    return t.index[l];
  };
  for (const Channel& chan : channels_) {
    if (chan.ring) continue;
    for (size_t i = 0; i < chan.legs.size(); ++i) {
      for (const fabric::LinkId l : path_of(chan.legs[i]))
        t.uses.push_back(
            {index_of(l), chan.leg_stage[i], chan.shares.empty() ? 1.0 : chan.shares[i]});
    }
  }
  if (t.uses.empty()) return;
  // Grouped by link (counting sort, in order of use), then by stage within a link, the shares of
  // one stage added up.
  t.begin.assign(t.links.size() + 1, 0);
  for (const StageUse& u : t.uses)
    ++t.begin[u.link + 1];
  std::partial_sum(t.begin.begin(), t.begin.end(), t.begin.begin());
  t.sorted.resize(t.uses.size());
  t.fill.assign(t.begin.begin(), t.begin.end() - 1);
  for (const StageUse& u : t.uses)
    t.sorted[t.fill[u.link]++] = u;
  uint32_t out = 0;
  for (size_t k = 0; k < t.links.size(); ++k) {
    const auto first = t.sorted.begin() + t.begin[k], last = t.sorted.begin() + t.begin[k + 1];
    std::sort(first, last, [](const StageUse& a, const StageUse& b) { return a.stage < b.stage; });
    t.begin[k] = out;
    for (auto it = first; it != last; ++it) {
      if (it != first && t.sorted[out - 1].stage == it->stage) {
        t.sorted[out - 1].share += it->share;
      } else {
        t.sorted[out++] = *it;
      }
    }
  }
  t.begin.back() = out;
  t.sorted.resize(out);
  // Each (link, stage)'s load for N slices, made again when a channel's N differs.
  double slices_done = -1;
  auto make_loads = [&](double slices) {
    if (slices == slices_done) return;
    t.load.resize(t.sorted.size());
    for (size_t k = 0; k < t.links.size(); ++k) {
      for (uint32_t i = t.begin[k]; i < t.begin[k + 1]; ++i) {
        const int stage = t.sorted[i].stage;
        double sum = 0;
        for (uint32_t j = t.begin[k]; j < t.begin[k + 1]; ++j) {
          const int other = t.sorted[j].stage;
          const double overlap = stage == kEveryStage || other == kEveryStage
                                     ? 1.0
                                     : std::max(0.0, slices - std::abs(other - stage)) / slices;
          sum += t.sorted[j].share * overlap;
        }
        t.load[i] = sum;
      }
    }
    slices_done = slices;
  };
  auto load = [&](fabric::LinkId l, int stage) {
    const uint32_t k = t.index[l];
    uint32_t i = t.begin[k];
    while (t.sorted[i].stage != stage)
      ++i;
    return t.load[i];
  };
  for (Channel& chan : channels_) {
    if (chan.ring) continue;
    // Slices in flight: of the coarsest stage (a network step of LL and LL128).
    double coarsest = chan.slice;
    for (const double s : chan.stage_slice)
      coarsest = std::max(coarsest, s);
    make_loads(std::max(1.0, chan.wire_bytes / std::max(coarsest, 1.0)));
    chan.stages.assign(static_cast<size_t>(chan.hops), network::kNoRateCap);
    double shared = network::kNoRateCap;  // the legs of every stage
    for (size_t i = 0; i < chan.legs.size(); ++i) {
      const int stage = chan.leg_stage[i];
      double rate = network::kNoRateCap;
      for (const fabric::LinkId l : path_of(chan.legs[i]))
        rate = std::min(rate, sim.link_capacity(l) / load(l, stage));
      double& pace = stage == kEveryStage ? shared : chan.stages[static_cast<size_t>(stage)];
      pace = std::min(pace, rate);
    }
    std::vector<char> own(chan.stages.size(), 0);
    for (const int stage : chan.leg_stage) {
      if (stage != kEveryStage) own[static_cast<size_t>(stage)] = 1;
    }
    for (size_t k = 0; k < chan.stages.size(); ++k) {
      if (own[k] == 0) chan.stages[k] = shared;
    }
  }
  kept = {sim.paths_version(),
          c,
          result_.algorithm,
          result_.protocol,
          result_.channels,
          bytes,
          root,
          {}};
  for (const Channel& chan : channels_)
    kept.stages.push_back(chan.stages);
}

double OpRunner::protocol_cap() const {
  // NCCL's per-channel protocol throughput (tuning.cc) is a bus bandwidth per channel of its
  // graph: spread over the channels the kernel runs, and for trees and CollNet halved, since
  // their bus bandwidth counts the data going up and coming down (algBw = busBw / 2). The
  // NVLSTree kernel's is per head of the NVLS graph, and NCCL converts it to an algorithm
  // bandwidth as a ring's (algBw = busBw x nRanks / nSteps).
  const TuningInput in = tuning_input(result_.collective, result_.channels);
  // RCCL's HIP build has none of these caps (its model scales bandwidth by ratios instead),
  // but across nodes NCCL's LL cap is not the GPU's: "for multi-node, we look at CPU type"
  // (llMaxBws' rows 1 and 2 by the host's vendor; tuning.cc, RCCL's copy alike). LL's lines go
  // through the proxy and host memory of the host, which RCCL's LL shares on the same host:
  // across nodes it has the host's cap too.
  if (in.rccl != nullptr && (result_.protocol != Protocol::LL || in.nnodes < 2)) {
    return network::kNoRateCap;
  }
  const ProtocolCaps& caps = protocol_caps(in.arch);
  const int col = caps_column(in.nnodes);
  const double per_graph = static_cast<double>(in.graph_channels) / result_.channels;
  const bool tree = result_.algorithm != Algorithm::Ring;
  // A channel whose CTA runs fewer threads (a small operation) moves as much less of what its
  // kernel moves (applied to `bus` at the end, unless a case folds it into its kernel's part).
  double threads = result_.threads > 0 ? result_.threads / max_threads(result_.protocol) : 1.0;
  double bus = network::kNoRateCap;
  switch (result_.protocol) {
    case Protocol::LL:
      // llMaxBw is the kernel's with its default channels running: a channel (a CTA) has its
      // share of it however many run (fewer for small operations or NCCL_MAX_NCHANNELS, more
      // with NCCL_MIN_NCHANNELS).
      bus = ll_max_bw(in.arch, in.nnodes, in.amd_host) / default_channels();
      // NCCL 2.8's CollNet with LL moves a sixth of its graph's bandwidth x 0.9 ("Take into
      // account that GDR read is disabled on both sides"): the path's throughput, as its model
      // states it.
      if (tables_.nccl28 && result_.algorithm == Algorithm::CollNetChain)
        bus = std::min(bus, in.bw_intra * 0.9 / 6.0 * per_graph);
      if (in.nnodes > 1) {
        // Across nodes llMaxBw is the host's path (its rows go by the CPU's vendor), shared by
        // the channels whatever threads each runs; what a CTA's threads bound is the kernel's
        // own throughput, one node's llMaxBw of the GPU (none in RCCL's build), which a small
        // operation's fewer threads scale down.
        const double kernel =
            in.rccl != nullptr ? network::kNoRateCap
                               : ll_max_bw(in.arch, 1, in.amd_host) / default_channels() * threads;
        bus = std::min(bus, kernel);
        threads = 1;
      }
      break;
    case Protocol::LL128:
      bus = (tree ? caps.tree_ll128[col] : caps.ring_ll128[col]) * per_graph;
      break;
    case Protocol::Simple:
      // CollNetChain's kernel is the tree's: each CTA's threads split between reducing up the
      // chain and broadcasting down it (all_reduce.h), so its channels move at the tree
      // kernel's throughput.
      if (result_.algorithm == Algorithm::Tree || result_.algorithm == Algorithm::CollNetChain)
        bus = caps.tree[col] * per_graph;
      if (result_.algorithm == Algorithm::NvlsTree && caps.nvls_tree[col] > 0) {
        // NVLSTree runs AllReduce only: nSteps = 2 (n - 1).
        return caps.nvls_tree[col] * in.nvls_heads / result_.channels * in.nranks /
               (2.0 * (in.nranks - 1)) * 1e9;
      }
      break;
  }
  if (bus == network::kNoRateCap) return bus;
  return bus * 1e9 / (tree ? 2.0 : 1.0) * threads;
}

int OpRunner::nvls_heads() const {
  return comm_.nnodes() > 1 ? comm_.head_count() : std::min(comm_.ppn(), 8);
}

double OpRunner::nvls_chunk(double bytes, Algorithm a) const {
  // NCCL's NVLS chunking (enqueue.cc calcCollChunking): NCCL_NVLS_CHUNKSIZE (128 KiB), for
  // NVLSTree at most 64 KiB from 4 nodes on, for NVLS across nodes 32 KiB where its model's
  // AllReduce bandwidth is under 150 GB/s; then smaller while the operation has too few chunks
  // for its concurrent operations (channels x heads).
  const double ops = static_cast<double>(result_.channels) * nvls_heads();
  double chunk = 128 << 10;
  if (a == Algorithm::Nvls && comm_.nnodes() > 1 &&
      nvls_bus_bandwidth(tables_, tuning_input(Collective::AllReduce, comm_channels())) * 5.0 /
              6.0 <
          150) {
    chunk = 32 << 10;
  }
  if (a == Algorithm::NvlsTree) {
    if (comm_.nnodes() >= 4) chunk = 64 << 10;
    for (const auto& [per_op, floor_bytes] :
         {std::pair{16.0, 131072.0}, {4.0, 65536.0}, {1.0, 32768.0}}) {
      if (bytes < per_op * ops * chunk && chunk > floor_bytes) chunk = floor_bytes;
    }
  } else {
    for (const auto& [per_op, floor_bytes] :
         {std::pair{64.0, 65536.0}, {8.0, 32768.0}, {2.0, 16384.0}}) {
      if (bytes < per_op * ops * chunk && chunk > floor_bytes) chunk = floor_bytes;
    }
  }
  return chunk;
}

double OpRunner::direct_chunk(double bytes, double step, int heads) const {
  // NCCL (enqueue.cc, calcCollChunking) for CollNetDirect: a step, halved while the operation
  // has fewer than 64 chunks per head and channel for each level of its depth (2, 1 with one
  // GPU a node), down to 128 KiB; then fewer than 8, down to 64 and then 32 KiB.
  const double depth = comm_.ppn() > 1 ? 2 : 1;
  const double per_head = bytes / (static_cast<double>(result_.channels) * heads);
  double chunk = step;
  for (const auto& [per_level, floor_bytes] :
       {std::pair{64.0, 131072.0}, {8.0, 65536.0}, {8.0, 32768.0}}) {
    while (per_head / chunk < depth * per_level && chunk > floor_bytes)
      chunk /= 2;
  }
  return chunk;
}

double OpRunner::tree_chunk(double bytes, double step, bool tree) const {
  // NCCL (enqueue.cc) moves Tree and CollNet data with Simple in chunks of one step, halved
  // while the operation has too few chunks per channel to fill the pipeline: below 8, 4 and 1
  // chunks per level of depth for Tree (down to 128, 64 and 32 KiB; NCCL 2.8's computeColl;
  // the later releases' calcCollChunking halves no Tree/Simple chunk. RCCL's is taken to halve
  // as NCCL 2.8 did: its source was not at hand, and its measured Tree/Simple rows of 32-128
  // MiB on 2 MI300X and MI355X servers come out 17-58% slow with whole steps); for CollNet below
  // 16, 4 and 1 (NCCL 2.8's computeColl) or, from a chunk of at most 256 KiB, below 64, 8 and 1
  // (the later releases' CollNetChain, calcCollChunking), down to 128, 64 and 32 KiB. NCCL's depth
  // estimate: ranks per node - 1 + floor(log2(nodes)) for the tree, ranks per node for
  // CollNet's chains.
  const double depth = tree ? comm_.ppn() - 1 + std::floor(std::log2(comm_.nnodes()))
                            : static_cast<double>(comm_.ppn());
  const double per_channel = bytes / result_.channels;
  double chunk = step;
  auto shrink = [&](double per_level, double floor_bytes) {
    while (per_channel / chunk < depth * per_level && chunk > floor_bytes)
      chunk /= 2;
  };
  if (tree) {
    if (!tables_.nccl28 && !config_.is_rccl()) return chunk;  // a whole step
    shrink(8, 128 << 10);
    shrink(4, 64 << 10);
  } else if (tables_.nccl28) {
    shrink(16, 128 << 10);
    shrink(4, 64 << 10);
  } else {
    chunk = std::min(chunk, 256.0 * 1024);
    shrink(64, 128 << 10);
    shrink(8, 64 << 10);
  }
  shrink(1, 32 << 10);
  return chunk;
}

double OpRunner::tree_ll128_chunk(double bytes, double step_wire, double efficiency) const {
  // NCCL (enqueue.cc, in every release pinned here; RCCL's copy alike) fills a Tree/LL128 step
  // with a chunk of one step, halved while the operation has too few chunks per channel for the
  // tree's steps, 1 + log2(nodes) + ppn / 10 of them: below 64 / ppn chunks per step (down to
  // 128 KiB), then below 16 / ppn (down to 32 KiB). The channel's bytes over the chunk are an
  // integer division in NCCL, as here. NCCL 2.8 halves the step's wire bytes and takes the
  // data of the chunk left (computeColl); the later releases pinned here, and RCCL, halve the
  // step's data (calcCollChunking).
  const double ppn = static_cast<double>(comm_.nranks()) / comm_.nnodes();
  const double steps = 1 + std::floor(std::log2(comm_.nnodes())) + 0.1 * ppn;
  const double per_channel = bytes / result_.channels;
  const bool on_wire = tables_.nccl28;
  double chunk = on_wire ? step_wire : step_wire * efficiency;
  auto shrink = [&](double per_step, double floor_bytes) {
    while (std::floor(per_channel / chunk) < steps * per_step / ppn && chunk > floor_bytes)
      chunk = std::floor(chunk / 2);
  };
  shrink(64, 131072);
  shrink(16, 32768);
  return on_wire ? chunk : chunk / efficiency;
}

std::pair<engine::ConnectionId, bool> OpRunner::p2p_connection(engine::Simulation& sim, int i,
                                                               int j, int k) {
  const int n = comm_.nranks();
  const bool table = !p2p_pairs_.empty();
  const size_t at = (static_cast<size_t>(i) * static_cast<size_t>(n) + static_cast<size_t>(j)) *
                        static_cast<size_t>(p2p_per_peer_) +
                    static_cast<size_t>(k);
  if (table && p2p_pairs_[at] != kNoPair) return {p2p_pairs_[at] >> 1, (p2p_pairs_[at] & 1) != 0};
  // Where GPUs own several NICs, channel k of the pair i -> j goes through NIC (d + k) mod
  // nics-per-GPU, d = (j - i) mod n (NCCL gives each peer distance its channels, and a channel
  // its NIC by its id), so a GPU's peers spread over all of its NICs, sending and receiving;
  // with PXN it is relayed over NVLink to the sender server's GPU of that rail.
  const fabric::NodeId src = comm_.ranks()[static_cast<size_t>(i)];
  const fabric::NodeId dst = comm_.ranks()[static_cast<size_t>(j)];
  const int port = ((j - i + n) % n + k) % comm_.nics_per_gpu();
  const Edge e = comm_.edge(src, dst, pxn(), comm_.rail_of(dst) + port);
  const int64_t message = p2p_chunk();
  if (!table) return {connection(sim, e, message, kP2pChannel - k), e.network};
  // A pair connected before the table was made is in the map; a new one is kept here alone.
  const engine::ConnectionId* known =
      connections_.find(EdgeKey{e.src, e.dst, e.relay, message, kP2pChannel - k});
  const engine::ConnectionId id = known != nullptr ? *known : connect(sim, e, message);
  ROCESIM_CHECK(id < kNoPair / 2, "point-to-point connections below 2^31");
  p2p_pairs_[at] = id << 1 | (e.network ? 1u : 0u);
  return {id, e.network};
}

void OpRunner::plan_p2p(engine::Simulation& sim, Collective c, int64_t bytes, int root,
                        double imbalance, uint64_t seed) {
  const int n = comm_.nranks();
  // Every transfer's round and part in NCCL's schedule, and its sender's and receiver's
  // channel: batch_p2p puts them into batches once all are known.
  const P2pSchedule& schedule = p2p_schedule();
  const auto channels = static_cast<uint32_t>(schedule.channels());
  if ((c == Collective::AllToAll || c == Collective::AllToAllv) && p2p_pairs_.empty()) {
    p2p_pairs_.assign(
        static_cast<size_t>(n) * static_cast<size_t>(n) * static_cast<size_t>(p2p_per_peer_),
        kNoPair);
  }
  const bool across_nodes = comm_.nnodes() > 1;
  std::vector<P2pSides> sides;
  std::vector<uint32_t> rounds;
  std::vector<uint8_t> part_of;
  auto add = [&](int i, int j, int64_t b) {
    if (i == j) return;
    // An empty message still goes to its peer (NCCL schedules a send of no bytes as any other,
    // and its receiver completes only once it has arrived): one byte stands for its packet of
    // headers, which a flow cannot carry empty.
    b = std::max<int64_t>(b, 1);
    // In a communicator across servers NCCL spreads each operation, over the network or
    // NVLink, over as many channels as p2p_parts says, each with its own connection (and QPs).
    const int parts = across_nodes ? p2p_parts(b, p2p_per_peer_, n, static_cast<int>(channels),
                                               config_.p2p_net_chunksize->count())
                                   : 1;
    for (int k = 0; k < parts; ++k) {
      const int64_t share = b / parts + (k < b % parts ? 1 : 0);
      if (share <= 0) continue;
      const auto [id, net] = p2p_connection(sim, i, j, k);
      p2p_.push_back({id, net, share});
      const int round = schedule.round(i, j);
      const auto ch = static_cast<uint32_t>(schedule.channel(round, k));
      sides.push_back({static_cast<uint32_t>(i) * channels + ch,
                       static_cast<uint32_t>(j) * channels + ch, 0, 0});
      rounds.push_back(static_cast<uint32_t>(round));
      part_of.push_back(static_cast<uint8_t>(k));
    }
  };
  // nccl-tests posts a rank's operation with itself too (a copy, in round 0 of its schedule).
  std::vector<uint32_t> self;
  switch (c) {
    case Collective::AllToAll:
    case Collective::AllToAllv: {
      // nccl-tests' size is what every rank sends in total: size / n to each peer.
      const int64_t per_pair = bytes / n;
      RandomStream rng(seed, "nccl/alltoallv");
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          double b = static_cast<double>(per_pair);
          if (c == Collective::AllToAllv && imbalance > 0) {
            b *= 1 - imbalance + 2 * imbalance * rng.uniform();
          }
          add(i, j, static_cast<int64_t>(std::llround(b)));
        }
        self.push_back(static_cast<uint32_t>(i));
      }
      break;
    }
    case Collective::Gather:
      for (int i = 0; i < n; ++i)
        add(i, root, bytes / n);
      self.push_back(static_cast<uint32_t>(root));
      break;
    case Collective::Scatter:
      for (int j = 0; j < n; ++j)
        add(root, j, bytes / n);
      self.push_back(static_cast<uint32_t>(root));
      break;
    case Collective::SendRecv:
      for (int i = 0; i < n; ++i)
        add(i, (i + 1) % n, bytes);
      break;
    default:
      ROCESIM_CHECK(false, "not a point-to-point collective");
  }
  // NCCL's hop latency for Simple beyond its reference wire, as a pipeline step's (the
  // transfer's own wire is in its delivery): the cost of a peer's last chunk being noticed and
  // completed, paid once at the end, and on each round trip of a pair's window; the network
  // one when any pair crosses servers.
  const TuningInput in = tuning_input(c, 1);
  p2p_tail_us_ = beyond_wire_us(in, Algorithm::Ring, Protocol::Simple, true);
  p2p_nvl_tail_us_ = beyond_wire_us(in, Algorithm::Ring, Protocol::Simple, false);
  const bool any_network =
      std::any_of(p2p_.begin(), p2p_.end(), [](const P2pTransfer& t) { return t.network; });
  if (!any_network) p2p_tail_us_ = p2p_nvl_tail_us_;
  batch_p2p(sides, rounds, part_of, self);
}

std::pair<int, int> OpRunner::p2p_channels() const {
  // NCCL's p2p channels (ncclTopoComputeP2pChannels): the communicator's, within
  // NCCL_MAX_P2P_NCHANNELS and then at least NCCL_MIN_P2P_NCHANNELS, rounded up to a power of
  // two (at most MAXCHANNELS).
  const int unrounded = std::clamp(
      std::max(std::min(comm_channels(), config_.max_p2p_channels), config_.min_p2p_channels), 1,
      kMaxChannels);
  const auto channels = static_cast<int>(std::bit_ceil(static_cast<unsigned>(unrounded)));
  // p2pnChannelsPerPeer: the least of the peers' channel counts, a network peer's as the
  // release derives them (a peer over NVLink has two per NVLink, more), within the
  // communicator's channels, rounded up to a power of two.
  const int per_peer =
      comm_.nnodes() > 1
          ? p2p_channels_per_peer(config_.channels_per_net_peer, tables_.p2p_channels_in_paths,
                                  tables_.p2p_net_channels, comm_.nranks(), unrounded,
                                  comm_.nics_per_gpu())
          : 1;
  return {channels, per_peer};
}

OpRunner::Channels OpRunner::channels() const {
  Channels c;
  c.coll = comm_channels();
  c.collnet = collnet() && comm_.nnodes() > 1 ? c.coll : 0;
  c.nvls = tuning_input(Collective::AllReduce, c.coll).nvls ? nvls_channels() : 0;
  std::tie(c.p2p, c.p2p_per_peer) = p2p_channels();
  return c;
}

const P2pSchedule& OpRunner::p2p_schedule() {
  if (p2p_schedule_) return *p2p_schedule_;
  int channels = 0;
  std::tie(channels, p2p_per_peer_) = p2p_channels();
  p2p_schedule_ =
      std::make_unique<P2pSchedule>(comm_.node_of_rank(), comm_.local_of_rank(), channels);
  return *p2p_schedule_;
}

void OpRunner::batch_p2p(std::vector<P2pSides>& sides, const std::vector<uint32_t>& rounds,
                         const std::vector<uint8_t>& parts, const std::vector<uint32_t>& self) {
  const P2pSchedule& schedule = *p2p_schedule_;
  const auto channels = static_cast<uint32_t>(schedule.channels());
  const size_t queues = static_cast<size_t>(comm_.nranks()) * channels;
  const size_t transfers = sides.size();
  ROCESIM_CHECK(2 * transfers < (uint64_t{1} << 32), "point-to-point transfers below 2^31");
  // The batches depend on the transfers' queues, rounds and parts and on the copies to self
  // alone: an operation like the one before (nccl-tests repeats each size) keeps its waves.
  uint64_t key_of_plan = mix64(transfers);
  for (size_t t = 0; t < transfers; ++t) {
    key_of_plan = mix64(key_of_plan ^
                        (static_cast<uint64_t>(sides[t].send_queue) << 32 | sides[t].recv_queue));
    key_of_plan = mix64(key_of_plan ^ (static_cast<uint64_t>(rounds[t]) << 8 | parts[t]));
  }
  for (const uint32_t rank : self)
    key_of_plan = mix64(key_of_plan ^ rank);
  if (p2p_plan_valid_ && key_of_plan == p2p_plan_key_) {
    p2p_batched_ = p2p_plan_batched_;
    return;
  }
  // Each transfer's two sides (transfer x 2 + 1 for its receive) by queue, then each queue's
  // sides in round order.
  std::vector<uint32_t> begin, order;
  group_by(
      2 * transfers, queues,
      [&](size_t side) {
        return side % 2 == 0 ? sides[side / 2].send_queue : sides[side / 2].recv_queue;
      },
      begin, order);
  std::vector<uint8_t> has_self(queues, 0);
  for (const uint32_t rank : self)
    has_self[rank * channels + static_cast<uint32_t>(schedule.channel(0, 0))] = 1;
  const auto key = [&](uint32_t side) {
    return (static_cast<uint64_t>(rounds[side / 2]) << 8) | parts[side / 2];
  };
  for (size_t q = 0; q < queues; ++q) {
    const auto b = order.begin() + begin[q];
    const auto e = order.begin() + begin[q + 1];
    std::sort(b, e,
              [&](uint32_t x, uint32_t y) { return key(x) != key(y) ? key(x) < key(y) : x < y; });
    // The operations of a channel in round order, P2pSchedule::kPerBatch to a batch (a round's
    // send and receive are one operation; a rank's copy to itself is the first).
    uint32_t ops = has_self[q];
    uint64_t last = UINT64_MAX;
    for (auto it = b; it != e; ++it) {
      if (key(*it) != last) {
        ++ops;
        last = key(*it);
      }
      P2pSides& t = sides[*it / 2];
      (*it % 2 == 0 ? t.send_batch : t.recv_batch) = (ops - 1) / P2pSchedule::kPerBatch;
    }
  }
  // The batches as waves over the communicator and its channels (see p2p_schedule.hpp): a
  // transfer runs in the later of its send's and its receive's batch.
  uint32_t waves = 0;
  p2p_wave_.resize(transfers);
  for (size_t t = 0; t < transfers; ++t) {
    p2p_wave_[t] = std::max(sides[t].send_batch, sides[t].recv_batch);
    waves = std::max(waves, p2p_wave_[t] + 1);
  }
  p2p_plan_key_ = key_of_plan;
  p2p_plan_valid_ = true;
  p2p_plan_batched_ = p2p_batched_ = waves > 1;
  if (!p2p_batched_) {  // one batch on every channel: every transfer at once
    p2p_wave_.clear();
    return;
  }
  // The transfers by wave, in transfer order within a wave.
  group_by(
      transfers, waves, [&](size_t t) { return p2p_wave_[t]; }, begin, p2p_wave_order_);
}

void OpRunner::next_wave(engine::Simulation& sim, engine::WorkloadId id) {
  if (p2p_wave_next_ == p2p_wave_order_.size()) return;
  const uint32_t wave = p2p_wave_[p2p_wave_order_[p2p_wave_next_]];
  p2p_wave_left_ = 0;
  for (; p2p_wave_next_ < p2p_wave_order_.size() &&
         p2p_wave_[p2p_wave_order_[p2p_wave_next_]] == wave;
       ++p2p_wave_next_, ++p2p_wave_left_)
    post_p2p(sim, id, p2p_wave_order_[p2p_wave_next_]);
}

void OpRunner::plan_pat(engine::Simulation& sim, Collective c, int64_t bytes) {
  // PAT (NCCL 2.23 on; Jeaugey, "PAT: a new algorithm for all-gather and reduce-scatter
  // operations at scale", arXiv:2506.20252) is Bruck's algorithm with its dimensions reversed:
  // a rank's block reaches the rank at offset m = sum of 2^j over the set bits j of m, one
  // dimension after another, the far ones first for AllGather, so that the long hops carry the
  // few aggregated blocks and the near ones the many. Over its k = ceil(log2 n) dimensions
  // rank r sends dimension j's blocks to r - 2^j (AllGather; ReduceScatter, its transpose, to
  // r + 2^j, the near dimensions first): those of the offsets m < n whose lowest set bit is j,
  // floor((n - 1 - 2^j) / 2^(j+1)) + 1 blocks of S / n. In all n - 1 blocks, as a ring sends.
  // NCCL pipelines its chunks through the dimensions, so in the fluid limit a rank's
  // dimensions send side by side, each channel its share over its own connection, and a
  // chunk's way through them is added at the end: the wire of every dimension but the one the
  // last delivery already paid, NCCL's cost of a dimension (its model's interLat / 3.5, less
  // the reference wire, as for every hop) and its linear part (2.8 us a rank).
  const int n = comm_.nranks();
  const int nch = result_.channels;
  const std::vector<fabric::NodeId>& r = comm_.ranks();
  const double block = static_cast<double>(bytes) / n;
  // NCCL's PAT chunk (enqueue.cc): a step, halved while the operation is small.
  int64_t chunk = config_.buffsize->count() / kNcclSteps;
  const int64_t parts = c == Collective::AllGather ? 32 : 16;
  while (chunk * nch * parts > bytes && chunk > 65536)
    chunk /= 2;
  const double window = config_.buffsize->as_double();
  int dims = 0;
  while ((1 << dims) < n)
    ++dims;
  double wire_sum = 0, wire_max = 0;
  for (int j = 0; j < dims; ++j) {
    const int distance = 1 << j;
    const int64_t blocks = (n - 1 - distance) / (2 * distance) + 1;
    double wire = 0;
    for (int i = 0; i < n; ++i) {
      const int peer = c == Collective::AllGather ? (i - distance + n) % n : (i + distance) % n;
      const fabric::NodeId src = r[static_cast<size_t>(i)], dst = r[static_cast<size_t>(peer)];
      for (int ch = 0; ch < nch; ++ch) {
        const double share = static_cast<double>(blocks) * block / nch;
        if (share < 1) continue;
        const int port = ch % comm_.nics_per_gpu();
        const Edge e = comm_.edge(src, dst, pxn(), comm_.rail_of(dst) + port);
        const engine::ConnectionId id = connection(sim, e, chunk, ch);
        wire = std::max(wire, sim.connection_latency(id).in_us());
        p2p_.push_back({id, e.network, static_cast<int64_t>(std::llround(share)), window});
      }
    }
    wire_sum += wire;
    wire_max = std::max(wire_max, wire);
  }
  const TuningInput in = tuning_input(c, nch);
  const double dimension = std::max(
      0.0, config_.hop_latency_factor *
                   hop_latency_us(tables_, in, Algorithm::Pat, Protocol::Simple, true) / 3.5 -
               ref_net_us_);
  p2p_tail_us_ = wire_sum - wire_max + dims * dimension + config_.hop_latency_factor * 2.8 * n;
  p2p_nvl_tail_us_ = p2p_tail_us_;
}

Algorithm OpRunner::table_algorithm() const {
  // MSCCL has no row in RCCL's tables; its kernels launch, complete and step like RCCL's own
  // (model 5 gives its rings and trees the same figures), so they read the ring's.
  return result_.algorithm == Algorithm::Msccl ? Algorithm::Ring : result_.algorithm;
}

const MscclAlgorithm* OpRunner::msccl_for(Collective c, int64_t bytes) const {
  // RCCL's MSCCL-enabled node: 8 GPUs of one xGMI mesh, the communicator inside the server.
  if (!config_.is_rccl() || !config_.msccl || c != Collective::AllReduce || comm_.nnodes() != 1 ||
      !comm_.mesh()) {
    return nullptr;
  }
  return msccl_allreduce(comm_.nranks(), bytes);
}

void OpRunner::plan_msccl(engine::Simulation& sim, int64_t bytes, const MscclAlgorithm& m) {
  // All pairs over the mesh: rank i sends to every j != i directly, on each of the schedule's
  // channels its share, through the protocol's connection buffer (NCCL_STEPS slots). A one-pass
  // schedule sends the whole buffer (each rank then reduces the n - 1 copies it received);
  // otherwise a reduce-scatter pass sends the block j owns (S / n) and, once every block is in
  // and reduced, an all-gather pass sends the rank's reduced block to every peer: the same
  // transfers again. A pass ends with its last delivery and the protocol's step cost on the
  // receiver; the next one starts then.
  const int n = comm_.nranks();
  const std::vector<fabric::NodeId>& r = comm_.ranks();
  const double wire = 1.0 / protocol_traits(m.protocol, config_.is_rccl()).efficiency;
  const double per_pair = static_cast<double>(m.one_pass ? bytes : bytes / n) * wire;
  const int64_t share =
      std::max<int64_t>(1, static_cast<int64_t>(std::llround(per_pair / m.channels)));
  const double window = config_.buffer(m.protocol).as_double();
  const auto step = static_cast<int64_t>(window / kNcclSteps);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      const Edge e = comm_.edge(r[static_cast<size_t>(i)], r[static_cast<size_t>(j)], false);
      for (int ch = 0; ch < m.channels; ++ch) {
        p2p_.push_back({connection(sim, e, step, ch), false, share, window});
      }
    }
  }
  p2p_passes_ = m.one_pass ? 1 : 2;
  p2p_tail_us_ = p2p_nvl_tail_us_ = step_cost_us(false);
}

void OpRunner::launch_data(engine::Simulation& sim, engine::WorkloadId id) {
  const double credit_us = config_.credit_latency.in_us();
  if (!channels_.empty()) {
    const double buffer = config_.buffer(result_.protocol).as_double();
    const ProtocolTraits traits = protocol_traits(result_.protocol, config_.is_rccl());
    const bool slices = traits.slices;
    // The kernel's throughput a channel, on the wire (the same for every channel).
    const double kernel_cap = protocol_cap() / traits.efficiency;
    for (size_t ch = 0; ch < channels_.size(); ++ch) {
      Channel& chan = channels_[ch];
      std::vector<engine::PipelineLeg> legs;
      // Credit window of the channel's connections: NCCL_STEPS steps in flight. A ring's
      // steps wait for their upstream data anyway (see the fill), so only the whole buffer
      // bounds it; trees, chains and NVLS move one chunk per step, so the window is
      // NCCL_STEPS chunks of the size in use (Simple) or of the data (LL, LL128).
      double window = buffer;
      if (!chan.ring) {
        const double step =
            slices ? chan.slice / chan.heads : std::min(chan.net_step, chan.wire_bytes);
        window = chan.heads * std::min(buffer, kNcclSteps * step);
      }
      double rtt = 0;
      for (size_t i = 0; i < chan.legs.size(); ++i) {
        legs.push_back({chan.legs[i], chan.shares.empty() ? 1.0 : chan.shares[i]});
        // One round trip of the leg, plus the receiver's time to post the credit.
        rtt = std::max(rtt, (2 * chan.latency_us[i] + credit_us) * 1e-6);
      }
      // The first window leaves at once; each later one waits for the credit of the one
      // before, a round trip R later (paced_rate). Rings keep the steady-state buffer / R.
      const double window_cap = chan.ring ? buffer / rtt : paced_rate(chan.wire_bytes, window, rtt);
      const double cap = std::min({window_cap, kernel_cap, chan.step_pace});
      chan.data_start = sim.now();
      sim.pipeline(id, legs, Bytes(static_cast<int64_t>(std::ceil(chan.wire_bytes))), cap,
                   tag(kPipeline, ch), reduces_in_network(result_.algorithm, comm_.nnodes()),
                   buffer);
      ++pending_;
    }
  }
  launch_p2p(sim, id);
  if (pending_ == 0) finish_op(sim);
}

void OpRunner::launch_p2p(engine::Simulation& sim, engine::WorkloadId id) {
  pending_ += p2p_.size();
  if (!p2p_batched_) {
    for (size_t i = 0; i < p2p_.size(); ++i)
      post_p2p(sim, id, i);
    return;
  }
  // NCCL's batches, wave by wave.
  p2p_wave_next_ = 0;
  next_wave(sim, id);
}

void OpRunner::post_p2p(engine::Simulation& sim, engine::WorkloadId id, size_t i) {
  // Each peer connection may have NCCL_STEPS chunks unacknowledged: a pair's rate is at most
  // that window over the round trip (shared by the QPs of a split connection). The chunk is the
  // communicator's (p2p_chunk); a step across servers pays the NET transport's hop latency,
  // inside a server the intra-node one. PAT and MSCCL connections have their own window (a
  // collective's buffer) and step cost. (NCCL cuts a small operation's network chunk to a half
  // or a quarter, enqueue.cc; not here: a cap of window over round trip would charge the smaller
  // window to an operation that fits in it, which waits for no credit at all.)
  const double credit_us = config_.credit_latency.in_us();
  const P2pTransfer& t = p2p_[i];
  const double chunk = static_cast<double>(p2p_chunk());
  const double window = t.window > 0 ? t.window : kP2pSteps * chunk;
  const double hop = t.window > 0 ? step_cost_us(t.network)
                     : t.network  ? p2p_tail_us_
                                  : p2p_nvl_tail_us_;
  const double rtt = (2 * (sim.connection_latency(t.connection).in_us() + hop) + credit_us) * 1e-6;
  // The connection's window, spread over the QPs (sockets) that share each message.
  const double per_qp = !t.network                  ? 1.0
                        : config_.net_socket        ? config_.sockets()
                        : config_.split_data_on_qps ? config_.qps_per_connection
                                                    : 1.0;
  sim.transfer(id, t.connection, Bytes(t.bytes), tag(kP2p, i), window / rtt / per_qp,
               window / per_qp);
}

bool OpRunner::on_transfer_done(engine::Simulation& sim, engine::WorkloadId id, uint64_t t) {
  if (runner_of(t) != id_) return false;
  const uint64_t kind = (t >> 32) & 0xff;
  const uint64_t i = t & 0xffffffffu;
  if (kind == kPipeline) {
    const Channel& chan = channels_[i];
    const double bw_time = seconds(sim.now() - chan.data_start);
    const double r = chan.wire_bytes / std::max(bw_time, 1e-15);  // achieved wire rate
    double fill_us = 0;
    if (chan.ring) {
      // The wire's latency overlaps with the chunks in flight; NCCL's per-step cost (the
      // kernel's flag polls and fences, the proxy posting each step) is paid step after step on
      // the first pass through the ring and overlaps with the data only on later passes, as
      // NCCL's own model counts it (tuning.cc: nsteps x hwLat + bytes / bw).
      const double edges = static_cast<double>(chan.latency_us.size());
      double mean = 0, step = 0;
      std::vector<double> gain;
      for (size_t e = 0; e < chan.latency_us.size(); ++e) {
        const double wire = chan.latency_us[e] - chan.step_us[e];
        const double slice = chan.leg_slice.empty() ? chan.slice : chan.leg_slice[e];
        mean += wire;
        step += chan.step_us[e];
        gain.push_back((slice - chan.chunk) / r * 1e6 + wire);
      }
      mean /= edges;
      fill_us = ring_delay(gain, chan.steps - 1) + mean + chan.positions * step / edges;
    } else if (!chan.stages.empty()) {
      // A slice crosses every stage, each at its own pace (the channel's rate r where that is
      // slower); the slowest stage is the pipeline's own pace, which the data already took:
      // T = D / r + sum of slice / pace over the other stages.
      double sum = 0, slowest = 0;
      for (size_t k = 0; k < chan.stages.size(); ++k) {
        const double slice = chan.stage_slice.empty() ? chan.slice : chan.stage_slice[k];
        const double stage = slice / std::max(r, chan.stages[k]);
        sum += stage;
        slowest = std::max(slowest, stage);
      }
      fill_us = chan.hops_latency_us + (sum - slowest) * 1e6;
    } else {
      fill_us = chan.hops_latency_us + std::max(0, chan.hops - 1) * chan.slice / r * 1e6;
    }
    sim.timer(id, sim.now() + Time::us(fill_us), tag(kChannelDone, i));
    return true;
  }
  if (kind == kP2p) {
    // The last transfer of a wave: the next one starts.
    if (p2p_batched_ && --p2p_wave_left_ == 0) next_wave(sim, id);
    if (--pending_ == 0) {
      // A pass is over: the next one (MSCCL's all-gather) starts after the step's cost.
      sim.timer(id, sim.now() + Time::us(p2p_tail_us_),
                tag(--p2p_passes_ > 0 ? kP2pPass : kP2pDone, 0));
    }
    return true;
  }
  return false;
}

bool OpRunner::on_timer(engine::Simulation& sim, engine::WorkloadId id, uint64_t t) {
  if (runner_of(t) != id_) return false;
  const uint64_t kind = (t >> 32) & 0xff;
  if (kind == kLaunch) {
    launch_data(sim, id);
    return true;
  }
  if (kind == kChannelDone) {
    if (--pending_ == 0) finish_op(sim);
    return true;
  }
  if (kind == kP2pPass) {
    launch_p2p(sim, id);
    return true;
  }
  if (kind == kP2pDone) {
    finish_op(sim);
    return true;
  }
  return false;
}

void OpRunner::finish_op(engine::Simulation& sim) {
  result_.end = sim.now();
  running_ = false;
  pending_ = 0;
}

// ---- the `nccl` workload ----

namespace {

constexpr Param kNcclWorkloadParams[] = {
    engine::kWorkloadTypeParam,
    engine::kWorkloadNameParam,
    engine::kWorkloadStartParam,
    engine::kWorkloadAfterParam,
    engine::kWorkloadJobParam,
    {.key = "collective",
     .type = ParamType::Choice,
     .help = "the NCCL collective",
     .choices = "allreduce|allgather|reducescatter|broadcast|reduce|alltoall|alltoallv|gather|"
                "scatter|sendrecv"},
    {.key = "ranks",
     .type = ParamType::Any,
     .fallback = "all",
     .help = "ranks of the job in the communicator, in communicator rank order",
     .choices = "GPU selection"},
    {.key = "bytes",
     .type = ParamType::Bytes,
     .help = "size as nccl-tests counts it: the buffer of AllReduce, Broadcast, Reduce and "
             "Send/Recv; the total of AllGather, ReduceScatter, AlltoAll, Gather and Scatter",
     .check = Check::Positive},
    {.key = "root",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "root rank (index in ranks) of Broadcast, Reduce, Gather and Scatter",
     .check = Check::NonNegative},
    {.key = "iterations",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "operations run back to back; the figures are their mean",
     .check = Check::Positive,
     .max = 1000000},
    {.key = "imbalance",
     .type = ParamType::Number,
     .fallback = "0",
     .help = "AlltoAllv: each pair's size is uniform in mean x [1 - imbalance, 1 + imbalance]",
     .check = Check::NonNegative},
    {.key = "nccl",
     .type = ParamType::Section,
     .help = "NCCL settings for this workload, over the scenario's",
     .choices = "see nccl",
     .optional = true},
};

class NcclWorkload final : public engine::Workload {
 public:
  NcclWorkload(std::string name, OpRunner runner, Collective c, int64_t bytes, int root,
               int iterations, double imbalance, uint64_t seed)
      : Workload(std::move(name)),
        runner_(std::move(runner)),
        collective_(c),
        bytes_(bytes),
        root_(root),
        iterations_(iterations),
        imbalance_(imbalance),
        seed_(seed) {}

  std::string_view type() const override { return "nccl"; }
  void start(engine::Simulation& sim, engine::WorkloadId id) override { next(sim, id); }
  void on_transfer_done(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) override {
    runner_.on_transfer_done(sim, id, tag);
    check(sim, id);
  }
  void on_timer(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) override {
    runner_.on_timer(sim, id, tag);
    check(sim, id);
  }
  void trace(std::vector<engine::TraceSpan>& out) const override {
    for (const OpResult& r : ops_) {
      out.push_back({name(), "operations",
                     fmt::format("{} {} B {}/{}", collective_name(r.collective), r.bytes,
                                 path_name(r.collective, runner_.communicator().nranks(),
                                           r.algorithm, r.bytes),
                                 path_protocol_name(r.collective, r.protocol, r.bytes)),
                     r.start, r.end});
    }
  }
  void figures(engine::WorkloadFigures& out, Time) const override {
    if (ops_.empty()) return;
    double mean_s = 0;
    for (const OpResult& r : ops_)
      mean_s += seconds(r.duration());
    mean_s /= static_cast<double>(ops_.size());
    const int n = runner_.communicator().nranks();
    const double algbw = static_cast<double>(bytes_) / mean_s * 1e-9;
    out.add("ranks", n);
    out.add("time_us", mean_s * 1e6);
    out.add("algbw_GBps", algbw);
    out.add("busbw_GBps", algbw * busbw_factor(collective_, n));
    if (reduces_in_network(ops_.front().algorithm, runner_.communicator().nnodes()) &&
        !is_p2p(collective_)) {
      // In-network reduction: every rank sends its data once and receives the result once.
      out.add("collnet_busbw_GBps", algbw);
    }
    out.add("channels", ops_.front().channels);
    out.add("nccl_model_us", ops_.front().model_us);
    out.note("collective", std::string(collective_name(collective_)));
    const OpResult& first = ops_.front();
    out.note("algorithm", std::string(path_name(collective_, n, first.algorithm, first.bytes)));
    out.note("protocol", std::string(path_protocol_name(collective_, first.protocol, first.bytes)));
    // The summary's flows and bytes columns are the engine's: say what they are here (the
    // text fits results.h5's 48-character notes).
    const Algorithm a = ops_.front().algorithm;
    const bool transfers = is_p2p(collective_) || a == Algorithm::Pat || a == Algorithm::Msccl;
    out.note("counted_as", transfers ? "flows: per QP of each transfer; bytes: sent"
                                     : "flows: channel pipelines; bytes: per edge");
  }

 private:
  void next(engine::Simulation& sim, engine::WorkloadId id) {
    runner_.start(sim, id, collective_, bytes_, root_, imbalance_,
                  seed_ + static_cast<uint64_t>(ops_.size()));
  }
  void check(engine::Simulation& sim, engine::WorkloadId id) {
    if (!runner_.done()) return;
    ops_.push_back(runner_.result());
    if (static_cast<int>(ops_.size()) == iterations_) {
      sim.finish(id);
    } else {
      next(sim, id);
    }
  }

  OpRunner runner_;
  Collective collective_;
  int64_t bytes_;
  int root_;
  int iterations_;
  double imbalance_;
  uint64_t seed_;
  std::vector<OpResult> ops_;
};

}  // namespace

const ParamTable kNcclWorkloadTable{
    "workload (type: nccl)",
    "One NCCL collective as NCCL runs it (channels, rings, trees, protocols, QPs, PXN), "
    "repeated `iterations` times.",
    kNcclWorkloadParams};

std::unique_ptr<engine::Workload> make_nccl_workload(const engine::WorkloadInput& in,
                                                     const NcclConfig& scenario_nccl) {
  std::vector<fabric::NodeId> ranks = in.ranks.select(in.spec.value("ranks"));
  const Collective c = *parse_collective(in.spec.choice("collective"));
  const auto root = in.spec.integer_as<int>("root");
  if (root >= static_cast<int>(ranks.size())) {
    in.spec.fail("root", fmt::format("a rank index below {}", ranks.size()), std::to_string(root));
  }
  const double imbalance = in.spec.number("imbalance");
  if (imbalance >= 1) in.spec.fail("imbalance", "a value in [0, 1)", std::to_string(imbalance));
  // (A zero is every collective's default, as the effective scenario writes it.)
  if (imbalance > 0 && c != Collective::AllToAll && c != Collective::AllToAllv) {
    in.spec.fail("imbalance", "no such key unless collective is alltoall (an AlltoAllv)",
                 fmt::format("the key, with collective {}", in.spec.choice("collective")));
  }
  const int64_t bytes = in.spec.bytes("bytes").count();
  if (bytes > kMaxOperationBytes) {
    in.spec.fail("bytes", "a size of at most 1 PiB", format_bytes(Bytes(bytes)));
  }
  NcclConfig cfg = scenario_nccl;
  if (in.spec.has("nccl")) cfg = read_nccl(in.spec.section("nccl", nccl_table()), cfg, true);
  return std::make_unique<NcclWorkload>(in.name, OpRunner(in.fabric, std::move(ranks), cfg), c,
                                        bytes, root, in.spec.integer_as<int>("iterations"),
                                        imbalance, in.seed ^ fnv1a64(in.name));
}

}  // namespace rocesim::collectives::nccl
