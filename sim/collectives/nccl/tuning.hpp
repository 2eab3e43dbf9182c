// NCCL's analytical tuning model (src/graph/tuning.cc), used for what NCCL uses it for: choosing
// the algorithm and protocol of each operation when NCCL_ALGO / NCCL_PROTO leave the choice open.
// NCCL estimates  time = latency + bytes / algbw  for every (algorithm, protocol) and takes the
// smallest; reproducing that lets rocesim show where NCCL's static model chooses badly (its
// latencies assume a low-RTT fabric). The simulated time itself never comes from this model.
//
// The constants are those of a pinned NCCL release (MODELS.md 5.5): "newest" is the newest
// tuning.cc read for MODELS.md (Ring/LL busBw x 0.5, Hopper llMaxBw 141 GB/s, Tree/Simple
// hwLat 4.0/4.0/14 us); "2.20.3" is NVIDIA/nccl v2.20.3 (Tree/Simple hwLat 28 us on every hop
// type and baseLat 0, Ring/LL busBw x 1/4 multi-node or 1/3). The protocol throughput caps are
// NCCL 2.27's, per GPU generation (ProtocolCaps); the simulation applies them to its channels
// too (collective.hpp), as the kernel's limits. The same tables give the per-hop and per-operation
// latencies of the simulation (see collective.hpp), scaled by the calibratable
// `hop_latency_factor`.
#pragma once

#include <optional>
#include <string_view>

#include "sim/collectives/nccl/nccl.hpp"
#include "sim/fabric/fabric.hpp"

namespace rocesim::collectives::nccl {

struct TuningTables {
  std::string_view name;
  double base_lat[kAlgorithms][3];   // [algorithm][protocol], us
  double hw_lat[3][kAlgorithms][3];  // [hop: NVLink, PCI, NET][algorithm][protocol], us
  bool ring_ll_half;                 // newest: Ring/LL busBw x 0.5; 2.20.3: x 1/4 or 1/3
  bool pat;                          // the release has PAT (NCCL 2.23 on)
  // With one rank per node every algorithm's network hop costs the Tree's ("with ppn=1
  // latencies are fully exposed", tuning.cc of the releases with PAT).
  bool ppn_one_tree_net;
  // NVLS AllGather and ReduceScatter as NCCL 2.27 models them (bw = min(bwIntra (ppn - 1) /
  // ppn, 0.9 bwInter), the bus bandwidth taken as the algorithm's); 2.20.3: as AllReduce's
  // (min(bwIntra, bwInter), x 5/6).
  bool nvls_gather_27;
  // Network steps NCCL counts for a ring AllReduce on N > 1 nodes: 2 N up to 2.20 and in RCCL's
  // model ("nNodes > 1 ? 2*nNodes : 0"), 2 (N - 1) in later NCCL releases.
  bool ring_allreduce_2n_inter;
  // NCCL 2.8's model (tuning.cc of v2.8.3), where it differs from the later releases': one
  // CollNet algorithm, the chain (LL at a sixth of its bandwidth, x 0.9, no LL128); LL128 capped
  // per collective (ll128MaxBwPerCh), trees by 2.8's perChMaxTreeBws, Tree/LL128 x 0.915, and
  // the bus bandwidth of A100s at 235 GB/s; LL's hops inside a node x 1.8 across nodes; neither
  // the network plugin's latency nor the net overhead in the latencies (the simulation keeps
  // both: they are what the hardware and the proxy cost, which 2.8's model left out); no tree
  // pattern factor; the ring plateau x 1.9 from nRanks / 16 x 64 KiB; its own Tree/LL128
  // corrections.
  bool nccl28;
  // Where the scale bounds a point-to-point pair's channels (p2p_channels_per_peer): NCCL 2.22
  // to 2.28 derive a network peer's channels in paths.cc (ncclTopoGetNchannels: unless
  // NCCL_NCHANNELS_PER_NET_PEER is set, 2 halved at scale, then at least the GPU's NICs);
  // earlier releases, and RCCL's model here, halve the most parts of an operation at scale as
  // they enqueue it, whatever the setting.
  bool p2p_channels_in_paths;
  // A network peer's channels where NCCL_NCHANNELS_PER_NET_PEER is unset (ncclTopoGetNchannels):
  // 1 in NCCL 2.8 (which has no such setting), 2 from its introduction on.
  int p2p_net_channels;
  // The point-to-point network chunk doubled across nodes on GBx hosts (Arm, Blackwell): "GBx
  // platforms only have 4 GPUs per host, which reduces the aggregation factor" (init.cc
  // computeBuffSizes of the newest releases; its NCCL_P2P_NET_CHUNKSIZE, set or not, x 2).
  bool gbx_p2p_net_chunk;
};

/// RCCL's tuning model (ROCm/rccl src/graph/tuning.cc, HIP branch; HARDWARE.md 6): NCCL's
/// skeleton and latency formulas with its own hwLat and baseLat (in `tables`), the bus
/// bandwidth scaled by a ratio per algorithm and protocol instead of NCCL's caps, per-size
/// correction factors for trees and multi-node rings, and size ranges that override the
/// protocol of multi-node collectives.
/// RCCL's protocol range of one collective across nodes (its tuning model's llProtoRanges,
/// rcclUpdateCollectiveProtocol), in bytes a rank (AllReduce: its buffer; the others: the
/// share of each rank): LL above 0 up to `ll_max`, LL128 where offered above `ll128_min` up to
/// `ll128_max` (AllReduce's x 3.8 beyond 2 nodes), Simple otherwise; all zero: the model's choice
/// stands. `ll_threads` and `ll128_threads`: AllGather's and ReduceScatter's bytes a thread per
/// rank before another channel (rcclUpdateThreadThreshold; 0: NCCL's thresholds).
struct RcclRange {
  double ll_max = 0;
  double ll128_min = 0;
  double ll128_max = 0;
  double ll_threads = 0;
  double ll128_threads = 0;
  bool defined() const { return ll_max > 0 || ll128_max > 0; }
};

struct RcclModel {
  TuningTables tables;
  double bw_ratio[2][kAlgorithms][3];  // [2 nodes, more][algorithm][protocol]
  double tree_correction[3][27];       // [protocol][log2(bytes / 64)]
  double ring_correction[3][27];
  RcclRange reduce_scatter;
  RcclRange all_gather;
  RcclRange all_reduce;
  RcclRange broadcast;
  /// The algorithm whose network hwLat stands for a Ring/Simple network step in the simulation
  /// (see step_latency_us).
  Algorithm ring_simple_net_step_as;
  /// The range that overrides a collective's protocol across nodes, or null.
  const RcclRange* range(Collective c) const;
};
/// The model of a pinned release on a GPU generation: "rccl-mi300" is tuning model 5, which
/// RCCL's rome model of an 8 x MI300X, 8-NIC server selects (LL128 enabled), and on gfx950
/// (cdna4) model 6, which RCCL for ROCm 7.0 takes there instead (rome_models.cc). Null for
/// NCCL's releases.
const RcclModel* rccl_model(std::string_view release, fabric::GpuArch arch);

/// What one channel's kernel can move with each protocol on a GPU generation, in GB/s of bus
/// bandwidth, per communicator size (1 node, 2 nodes, more): NCCL's llMaxBws,
/// perChMaxRingLL128Bws, perChMaxTreeLL128Bws and perChMaxTreeBws (tuning.cc, HARDWARE.md 5.5).
/// The LL cap is for the whole operation; the others are per channel of NCCL's graph.
struct ProtocolCaps {
  double ll_max_bw_one_node;  // llMaxBws' first column, by GPU generation
  double ring_ll128[3];
  double tree_ll128[3];
  double tree[3];
  /// Fraction of the NVLink bandwidth that NVLS's multimem loads and stores achieve through
  /// the NVSwitch (NCCL 2.30's nvlsEfficiency: Hopper 0.85, Blackwell 0.74); 0: no NVLS.
  double nvls_efficiency;
  /// What one channel of NCCL's NVLS graph (one head GPU) moves with the NVLSTree kernel, in
  /// NCCL's units: algBw = cap x graph channels x nRanks / nSteps (NCCL 2.30's
  /// perChMaxNVLSTreeBws); 0: no cap (one node, where NVLSTree does not run).
  double nvls_tree[3];
};
const ProtocolCaps& protocol_caps(fabric::GpuArch arch);
/// Index into ProtocolCaps' columns: 0 for one node, 1 for two, 2 for more.
inline int caps_column(int nnodes) {
  return nnodes <= 1 ? 0 : nnodes == 2 ? 1 : 2;
}
/// NCCL's LL throughput cap of a whole operation in GB/s: by GPU generation on one node, by
/// the host's CPU across nodes (llMaxBws rows 0 and 1: Intel 39.0 / 20.4, AMD 22.5 / 19.0 on 2
/// and more nodes).
double ll_max_bw(fabric::GpuArch arch, int nnodes, bool amd_host);
/// Whether RCCL offers LL128 on a GPU generation: on gfx942 and gfx950 whose platform model
/// enables it (ROCm/rccl src/graph/tuning.cc names gfx90a, gfx942 and gfx950; its CHANGELOG for
/// ROCm 7.0: "Enabled LL128 protocol on gfx950"), MI300- and MI350-class servers (cdna3, cdna4).
bool rccl_ll128(fabric::GpuArch arch);

/// The tables of a pinned release: "newest" or "2.20.3".
const TuningTables& tuning_tables(std::string_view release);

/// What NCCL's model knows about a communicator.
struct TuningInput {
  Collective collective = Collective::AllReduce;
  int nranks = 1;
  int nnodes = 1;
  int ppn = 1;             // ranks per node
  int channels = 1;        // channels the kernel runs
  int graph_channels = 1;  // channels of NCCL's ring and tree graphs (one per NIC), undoubled
  fabric::GpuArch arch = fabric::GpuArch::Hopper;
  bool amd_host = false;
  // NVLS (NVSwitch multicast): offered at all, its graph's heads (one channel per head: a GPU
  // each on one node, one GPU per NIC across nodes) and per-channel bandwidth inside the node.
  bool nvls = false;
  int nvls_heads = 0;
  double nvls_bw_intra = 0;
  double nvls_bw_inter = 0;  // GB/s per head across nodes: its NIC path (the ring graph's bound
                             // by NVLink does not apply: a head's traffic crosses one GPU)
  double bw_intra = 0;       // GB/s per graph channel inside a node (NVLink, or the NIC path)
  double bw_inter = 0;       // GB/s per graph channel across nodes (the GPU's NIC path)
  bool collnet = false;      // in-network reduction available
  bool nvswitch = false;     // the servers' GPUs share an NVSwitch (CollNetDirect needs one)
  bool pat = false;          // NCCL_PAT_ENABLE allows PAT (the release and the layout decide too)
  const RcclModel* rccl = nullptr;  // RCCL's model instead of NCCL's
  double net_overhead_us = 1;
  double latency_inter_us = 0;  // the NIC's latency as its net plugin reports it to NCCL
  bool pci_intra = false;       // GPUs of a node reach each other over PCIe (hwLat's PCI row)
  bool ll128 = true;            // LL128 offered (by default only inside NVLink domains)
};

/// NCCL's estimated time in us of one operation of `bytes`, or +infinity where NCCL does not
/// offer the combination (e.g. Tree for AllGather, CollNet with LL).
double model_time_us(const TuningTables& t, const TuningInput& in, Algorithm a, Protocol p,
                     double bytes);

/// NCCL's bus bandwidth of NVLS in GB/s for the input's collective (before its conversion to
/// an algorithm bandwidth).
double nvls_bus_bandwidth(const TuningTables& t, const TuningInput& in);

struct AlgoChoice {
  Algorithm algorithm;
  Protocol protocol;
  double model_us;  // NCCL's own estimate, for reports
};
/// The combination NCCL would run: the fastest by its model among those NCCL_ALGO and
/// NCCL_PROTO allow (bit 1 << Algorithm and 1 << Protocol of the masks).
AlgoChoice choose(const TuningTables& t, const TuningInput& in, double bytes, uint8_t algos,
                  uint8_t protos);
/// The mask allowing one algorithm or protocol, or all (for tests and forced settings).
inline uint8_t only(Algorithm a) {
  return static_cast<uint8_t>(1u << static_cast<int>(a));
}
inline uint8_t only(Protocol p) {
  return static_cast<uint8_t>(1u << static_cast<int>(p));
}
inline constexpr uint8_t kAnyAlgorithm = kTunerAlgorithms, kAnyProtocol = 0b111;

/// NCCL's latency of one pipeline step on a hop (NVLink or network), in us; a ring's inside nodes
/// of a multi-node communicator at least the host's network overhead, as NCCL counts it.
/// `in_model`: as the release's own model counts it (NCCL 2.8's left the network plugin's
/// latency and the net overhead out); otherwise what the step costs.
double hop_latency_us(const TuningTables& t, const TuningInput& in, Algorithm a, Protocol p,
                      bool network_hop, bool in_model = false);

/// What one pipeline step on a hop costs the simulation, in us: NCCL's hwLat as its model counts
/// it (hop_latency_us), except where a library's table holds a selection weight rather than a
/// latency. RCCL's model 5 gives a Ring/Simple network step 320 us, 13 times the 25 us of its
/// Tree/Simple step over the same transport, which steers its choice to trees up to large
/// sizes; measured 2-server rings pay 80-350 us for the whole operation, whose first pass alone
/// has 4 network steps. The simulation charges such a step its tree's latency.
double step_latency_us(const TuningTables& t, const TuningInput& in, Algorithm a, Protocol p,
                       bool network_hop);

}  // namespace rocesim::collectives::nccl
