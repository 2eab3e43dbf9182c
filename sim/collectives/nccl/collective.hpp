// One NCCL operation on the simulated fabric, as NCCL runs it.
//
// Algorithm and protocol come from NCCL_ALGO / NCCL_PROTO or, when open, from NCCL's tuning model
// (tuning.hpp). The data is split over channels (2 per NIC of a server by default, RCCL 64 or 56;
// within NCCL_MIN/MAX_NCHANNELS, fewer for small messages as NCCL does). Each channel of a ring,
// tree, chain or CollNet operation is a pipeline: NCCL cuts the channel's data into chunks, each
// ring step moves one chunk per edge, and a rank forwards a chunk slice by slice (Simple) or line
// by line (LL, LL128) as it arrives, so every edge of the channel streams the same bytes at the
// pace of the slowest. rocesim therefore moves a channel as ONE fluid flow across the union of
// its edges' links (Simulation::pipeline): its rate is the max-min share of its slowest edge,
// with every other flow of the fabric competing, and each link carries its weight of the
// channel's bytes (edges on the link, the QP split, protocol overhead). Receiver-driven
// admission caps it: a sender may only have NCCL_STEPS steps unacknowledged, and a credit comes
// back after a round trip R = 2 L + C (L the edge's one-way latency, C the receiver's
// credit_latency). A ring's rate is at most buffer / R; a tree, chain or NVLS channel moves one
// chunk per step, so its window W is 8 chunks of the size in use (NVLS: per head, each head on
// its own connection): the first window leaves at once, each later one a round trip after the
// one before.
//
// Two things bound a channel's rate besides the links: the credit window above, and the
// kernel's protocol throughput (NCCL's llMaxBw and per-channel LL128 and Tree caps for the GPU
// generation, spread over the channels the kernel runs, llMaxBw over its default channels, since
// one CTA moves its share however few run; none for RCCL, whose model has none).
//
// What the fluid flow does not see is the pipeline's start and step structure; it is added when
// the bandwidth phase ends, from the rate r the channel achieved. A hop's latency is its wire
// (the path's latency) plus NCCL's per-step cost of the hop: NCCL's hwLat for the algorithm and
// protocol, scaled by `hop_latency_factor`, less the wire of NCCL's reference hop (one scale-up
// domain, one switch), which hwLat already contains.
//  * rings (AllReduce 2(n-1) step positions per pass, AllGather and ReduceScatter n-1), with K
//    steps of c bytes and per-edge wire latency W_e: a rank starts step k+1 when it has done
//    step k (c/r) and the upstream rank's step k has reached it over edge e (s_e/r + W_e: its
//    first slice, or with LL and LL128 through the network its whole chunk, which NCCL's proxy
//    sends only complete); the last step trails K c/r by the heaviest path of that recurrence
//    (ring_delay). The per-step costs h_e are paid one after another on the first pass only, as
//    NCCL's model counts them: F = ring_delay + mean_e W_e + positions * mean_e h_e over the
//    ring's E edges;
//  * chains and trees (Broadcast, Reduce, Tree and CollNetChain AllReduce; CollNetDirect as a
//    tree of one NVLink hop each way, every GPU to each of its server's NIC GPUs, the heads, each
//    head with 1/h of the data and its own legs through the switches), a pipeline of depth H hops
//    along the critical path (up from the deepest node and down again for trees): F = sum_h L_h
//    plus a slice through every stage but the slowest, each at its own pace ((H-1) s/r when all
//    are as slow as the channel). Trees and CollNet forward whole chunks (one step, halved for
//    operations too small to fill the pipeline, as NCCL does), chains one step at a time, LL
//    and LL128 line by line through NVLink and a step at a time through the network (Tree/LL128
//    a step of NCCL's smaller chunk), their network steps one step cost apart;
//  * NVLS (one node) and NVLSTree: every GPU's scale-up link carries (1 + 1/ppn) of the data each
//    way at NCCL's NVLS efficiency (the heads' multimem reduce and multicast), NVLSTree's heads a
//    tree of the nodes over their NICs; F = one NVLS step + 2 x depth network hops + (H-1) s/r,
//    where a step s is a chunk for every head (NCCL's kernel loops over nHeads x chunk).
// Every operation also pays a launch latency (NCCL's baseLat for the algorithm and protocol, or
// `launch_latency`).
//
// AlltoAll(v), Gather, Scatter and Send/Recv are point-to-point: one transfer per pair of ranks
// (through the PXN relay on the receiver's rail), each capped by its window of 8 chunks of
// NCCL_P2P_NET_CHUNKSIZE over the round trip, plus NCCL's network hop latency.
//
// PAT (AllGather and ReduceScatter with one rank per server) is one transfer per rank, dimension
// and channel, its chunk's way through the dimensions added at the end (plan_pat).
//
// RCCL's MSCCL all-pairs AllReduce (8 GPUs of one xGMI mesh, up to 16 MiB; msccl.hpp) runs
// before its tuner: one transfer per ordered pair and channel, in one pass or two (plan_msccl).
//
// Scope: LL128 is offered wherever NCCL's model allows it; GPU compute for reductions is
// not modelled (links, NICs and the kernels' protocol throughput bound the collectives here).
#pragma once

#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/collectives/nccl/layout.hpp"
#include "sim/collectives/nccl/msccl.hpp"
#include "sim/collectives/nccl/nccl.hpp"
#include "sim/collectives/nccl/p2p_schedule.hpp"
#include "sim/collectives/nccl/tuning.hpp"
#include "sim/core/flat_map.hpp"
#include "sim/core/rng.hpp"
#include "sim/engine/simulation.hpp"
#include "sim/engine/workload_params.hpp"

namespace rocesim::collectives::nccl {

/// The largest operation rocesim simulates, 2^50 bytes (1 PiB): far beyond any GPU's memory, and
/// small enough that every byte count derived from it (wire bytes, a channel's share) stays
/// within 64 bits.
inline constexpr int64_t kMaxOperationBytes = int64_t{1} << 50;

struct OpResult {
  Collective collective = Collective::AllReduce;
  int64_t bytes = 0;
  Algorithm algorithm = Algorithm::Ring;
  Protocol protocol = Protocol::Simple;
  int channels = 0;
  int threads = 0;      // threads of each channel's CTA (fewer for small operations)
  double model_us = 0;  // NCCL's own estimate (tuning model), for comparison
  Time start{}, end{};
  Time duration() const { return end - start; }
};

/// nccl-tests' bus-bandwidth factor of a collective on n ranks (busbw = algbw * factor).
double busbw_factor(Collective c, int n);

/// How far a ring's last step trails its own pace K c/r, in the unit of `gain`. Rank p starts
/// step j once it has done step j-1 (c/r after starting it) and the upstream rank's step j-1 has
/// reached it over edge e (a_e after that started): T(p, j) = max(T(p, j-1) + c/r,
/// T(p-1, j-1) + a_e). The last step trails by the heaviest path of `advances` = K-1 moves, each
/// a stay (0) or a move along the ring over edge e (gain[e] = a_e - c/r, edge e from rank e to
/// e+1): a walk over consecutive edges, which laps the ring while a lap gains (latency-bound)
/// and otherwise keeps to the best arc shorter than a lap. With every gain alike: max(0, g) x
/// advances.
double ring_delay(const std::vector<double>& gain, double advances);

/// Runs NCCL operations for a workload on one communicator, one operation at a time. A workload
/// may hold several runners with distinct `id`s (communicators, or streams of one, with
/// operations in flight at once): each runner's tags carry its id, so the workload forwards
/// every callback to runner_of(tag). Tags below kTagLimit are free for the owner.
class OpRunner {
 public:
  static constexpr uint64_t kTagLimit = uint64_t{1} << 63;
  static constexpr uint32_t kMaxRunners = 1u << 23;

  OpRunner(const fabric::Fabric& f, std::vector<fabric::NodeId> ranks, const NcclConfig& config,
           uint32_t id = 0);
  /// The id of the runner a tag belongs to, or -1 for an owner's tag.
  static int64_t runner_of(uint64_t tag) {
    return tag < kTagLimit ? -1 : static_cast<int64_t>((tag - kTagLimit) >> 40);
  }
  uint32_t id() const { return id_; }

  /// Starts an operation now. `root` is a rank index (Broadcast, Reduce, Gather, Scatter);
  /// `imbalance` in [0, 1) spreads AlltoAllv pair sizes uniformly around their mean.
  void start(engine::Simulation& sim, engine::WorkloadId id, Collective c, int64_t bytes,
             int root = 0, double imbalance = 0, uint64_t seed = 0);
  /// Returns true when the callback belonged to the runner; `done()` then tells whether the
  /// operation has finished.
  bool on_transfer_done(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag);
  bool on_timer(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag);
  bool done() const { return pending_ == 0 && !running_; }
  const OpResult& result() const { return result_; }
  const Communicator& communicator() const { return comm_; }
  const NcclConfig& config() const { return config_; }
  /// Channels an operation of `bytes` would use with an algorithm and protocol: NCCL's count
  /// lowered while a channel's threads would get less than their threshold each
  /// (enqueue.cc, topoGetAlgoInfo).
  int channels_for(Collective c, int64_t bytes, Protocol p, Algorithm a) const;
  /// Threads of each channel's CTA: halved, once a single channel is left, while they would
  /// still get less than their threshold each; trees, NVLS and CollNetDirect keep all.
  int threads_for(Collective c, int64_t bytes, Protocol p, Algorithm a, int channels) const;
  /// The channels NCCL's kernel runs by default for an operation large enough for all of them.
  int default_channels() const;
  /// NCCL's point-to-point chunk of the communicator, for every pair (init.cc
  /// computeBuffSizes, enqueue.cc): NCCL_P2P_NET_CHUNKSIZE across servers (NVLink pairs too),
  /// inside one server NCCL_P2P_NVL_CHUNKSIZE where NVLink (or xGMI) joins the GPUs and
  /// NCCL_P2P_PCI_CHUNKSIZE (128 KiB) over PCIe, within an eighth of the Simple buffer.
  int64_t p2p_chunk() const;
  /// The communicator's channels (NCCL's comm->nChannels): the default within NCCL_MIN/MAX_*,
  /// at most the library's MAXCHANNELS (channel_limit()).
  int comm_channels() const;
  /// The most channels the library runs (MAXCHANNELS): NCCL's newest 64, earlier releases 32;
  /// RCCL 128 on one node, 64 across nodes.
  int channel_limit() const;
  /// The lower bound NCCL_MIN_NCHANNELS and NCCL_MIN_CTAS set, as the library takes it: NCCL
  /// limits it to MAXCHANNELS; RCCL ignores it above its limit, or above 64 for fewer than 8
  /// ranks.
  int min_channels() const;
  /// c within NCCL_MAX_NCHANNELS / NCCL_MAX_CTAS, the minimum and the library's limit.
  int bounded_channels(int c) const;
  /// Whether network sends go through the GPU on the destination's rail (PXN): as
  /// NCCL_PXN_DISABLE says, unset as the library decides (default_pxn: NCCL always, RCCL on
  /// MI300-class GPUs from 64 ranks, MI350-class from 32).
  /// Not over NCCL's sockets: its plugin takes host memory only, and PXN refuses host buffers
  /// ("PXN should not use host buffers for data", net.cc).
  bool pxn() const { return config_.pxn.value_or(true) && !comm_.pcie() && !config_.net_socket; }
  /// CollNet needs NCCL's CollNet plugin (SHARP) beside its RDMA transport: not over sockets.
  bool collnet() const { return config_.collnet && !config_.net_socket; }
  /// PXN for rings and chains. RCCL's rings over an xGMI mesh leave each node from the last GPU
  /// of their Hamiltonian path by its own NIC (its rome models' ringBase): PXN moves only its
  /// point-to-point transfers.
  bool ring_pxn() const { return pxn() && !(config_.is_rccl() && comm_.mesh()); }
  /// NCCL's bandwidth of a graph ring inside a PCIe server (scale_up: pcie), GB/s: the narrowest
  /// GPU-to-GPU path of its node ring, links between sockets at NCCL's figure for the CPU.
  double pcie_ring_gbytes() const { return pcie_ring_gbytes_; }
  /// The rings of NCCL's graph inside one PCIe server: 1, or 2 where the ring reaches 25 GB/s.
  int pcie_graph_channels() const;
  /// Channels of an NVLS or NVLSTree operation (NCCL's nvlsChannels; no per-size reduction).
  int nvls_channels() const;
  /// The communicator's channels as NCCL's init reports them with NCCL_DEBUG=INFO ("N coll
  /// channels, N collnet channels, N nvls channels, N p2p channels, N p2p channels per peer"),
  /// as the model runs them: CollNet's where it is enabled across nodes, NVLS's where the
  /// servers have it, and the most parts of a point-to-point pair (1 on one server, where
  /// rocesim does not split a pair).
  struct Channels {
    int coll = 0, collnet = 0, nvls = 0, p2p = 0, p2p_per_peer = 0;
  };
  Channels channels() const;

 private:
  struct Channel {
    std::vector<engine::ConnectionId> legs;
    std::vector<double> latency_us;  // per leg: path latency + NCCL's hop latency
    std::vector<double> step_us;     // per leg: NCCL's hop latency alone (a step's fixed cost)
    std::vector<double> shares;      // per leg: bytes per byte of the channel (empty: all 1)
    // Chain/tree: per leg, the stage of the pipeline it carries (0 first); kEveryStage for a
    // leg that serves several (NVLS's loads and stores, CollNet's way through the switches).
    std::vector<int> leg_stage;
    // Chain/tree: each stage's own pace, in the order a slice crosses them (bytes of the
    // channel per second; see set_stage_rates).
    std::vector<double> stages;
    // The wire bytes a leg forwards at a time, where they differ from `slice` (LL and LL128
    // cross the network a buffer step at a time); empty: `slice` on every leg.
    std::vector<double> leg_slice;
    // LL and LL128: the wire bytes of one step through the network (a buffer step, or the
    // smaller chunk of a Tree/LL128 operation), which the proxy sends once all its lines are in.
    double net_step = 0;
    // LL and LL128 chains and trees: the rate at which their network steps leave, one step
    // cost apart (wire bytes per second; none otherwise).
    double step_pace = network::kNoRateCap;
    // Chain/tree: the same per stage (its legs' largest); empty: `slice` on every stage.
    std::vector<double> stage_slice;
    int depth = 0;               // NVLSTree: network hops from the deepest node to the root
    double positions = 0;        // ring: steps of one pass (2(n-1) or n-1)
    bool ring = true;            // ring formula; otherwise chain/tree
    double hops_latency_us = 0;  // chain/tree: summed latency along the critical path
    int hops = 0;                // chain/tree: depth H
    // NVLS: the heads that each take a chunk of every step, each on its own connection.
    int heads = 1;
    double steps = 0, chunk = 0, slice = 0, wire_bytes = 0;  // ring: K, c, s; all: bytes
    Time data_start{};
  };
  // A runner's tags: kTagLimit + (id << 40) + (kind << 32) + index.
  enum Kind : uint64_t {
    kLaunch = 1,
    kPipeline = 2,
    kChannelDone = 3,
    kP2p = 4,
    kP2pDone = 5,
    kP2pPass = 6
  };
  uint64_t tag(Kind k, uint64_t i) const {
    ROCESIM_CHECK(i < (uint64_t{1} << 32), "a runner's tag index below 2^32");
    return kTagLimit + (uint64_t{id_} << 40) + (uint64_t{k} << 32) + i;
  }

  /// The connection of an edge on a channel, made on first use and kept for later operations
  /// (NCCL connects each channel's peers once). Point-to-point pairs use kP2pChannel, kP2pChannel -
  /// 1, ...
  engine::ConnectionId connection(engine::Simulation& sim, const Edge& e, int64_t message,
                                  int channel);
  /// A new connection of an edge (connection() keeps it under its key).
  engine::ConnectionId connect(engine::Simulation& sim, const Edge& e, int64_t message);
  static constexpr int kP2pChannel = -1;
  static constexpr int kEveryStage = -1;
  TuningInput tuning_input(Collective c, int channels) const;
  /// NCCL's p2p channels and the most parts of a point-to-point pair (p2pnChannelsPerPeer).
  std::pair<int, int> p2p_channels() const;
  void launch_data(engine::Simulation& sim, engine::WorkloadId id);
  void plan_pipelined(engine::Simulation& sim, Collective c, int64_t bytes, int root);
  /// The heads of NCCL's NVLS graph: each GPU of the node on one node (8 at most), one GPU per
  /// NIC across nodes (its search pairs a NIC with a GPU of its own for each head).
  int nvls_heads() const;
  /// Data per chunk of an NVLS or NVLSTree operation.
  double nvls_chunk(double bytes, Algorithm a) const;
  /// Data per chunk (= slice) of a Tree or CollNetChain operation with Simple.
  double tree_chunk(double bytes, double step, bool tree) const;
  /// Wire bytes per chunk (= network step) of a Tree operation with LL128.
  double tree_ll128_chunk(double bytes, double step_wire, double efficiency) const;
  /// Data per chunk of each head of a CollNetDirect operation.
  double direct_chunk(double bytes, double step, int heads) const;
  /// PAT's AllGather or ReduceScatter: each rank's blocks to its peers at distances 2^j.
  void plan_pat(engine::Simulation& sim, Collective c, int64_t bytes);
  void plan_p2p(engine::Simulation& sim, Collective c, int64_t bytes, int root, double imbalance,
                uint64_t seed);
  /// The connection of part `k` of rank i's point-to-point transfer to rank j, and whether it
  /// goes through the NET transport.
  std::pair<engine::ConnectionId, bool> p2p_connection(engine::Simulation& sim, int i, int j,
                                                       int k);
  /// RCCL's MSCCL schedule that runs the operation instead of its tuner's choice, or nullptr.
  const MscclAlgorithm* msccl_for(Collective c, int64_t bytes) const;
  /// MSCCL's all-pairs AllReduce: every rank's transfers to every peer, in one or two passes.
  void plan_msccl(engine::Simulation& sim, int64_t bytes, const MscclAlgorithm& m);
  /// The operation's algorithm as the tuning tables know it (Ring's rows for MSCCL).
  Algorithm table_algorithm() const;
  /// Starts a pass of the point-to-point transfers (p2p_): all at once, or NCCL's first batches
  /// (p2p_batched_).
  void launch_p2p(engine::Simulation& sim, engine::WorkloadId id);
  /// Posts transfer i of p2p_.
  void post_p2p(engine::Simulation& sim, engine::WorkloadId id, size_t i);
  /// NCCL's schedule of the communicator's grouped point-to-point operations, made once.
  const P2pSchedule& p2p_schedule();
  /// A transfer of plan_p2p on NCCL's schedule: the (rank, channel) queues of its send and of
  /// its receive (rank x channels + channel) and its batch in each.
  struct P2pSides {
    uint32_t send_queue, recv_queue;
    uint32_t send_batch, recv_batch;
  };
  /// Puts the transfers of plan_p2p (`sides`, each of round `rounds[t]` and part `parts[t]`)
  /// into NCCL's batches, and those into waves (p2p_wave_, p2p_wave_order_, p2p_batched_);
  /// not batched when every channel has one batch (all run at once). `self`: the ranks
  /// whose operation with themselves (a copy) takes its place first, in round 0.
  void batch_p2p(std::vector<P2pSides>& sides, const std::vector<uint32_t>& rounds,
                 const std::vector<uint8_t>& parts, const std::vector<uint32_t>& self);
  /// Starts the next wave of point-to-point transfers, if there is one.
  void next_wave(engine::Simulation& sim, engine::WorkloadId id);
  double leg_latency_us(engine::Simulation& sim, engine::ConnectionId c, bool network) const;
  /// The most data bytes/s one channel's kernel moves with the operation's protocol.
  double protocol_cap() const;
  /// NCCL's bytes per thread before an operation takes another channel (threadThresholds;
  /// RCCL's for AllGather and ReduceScatter across nodes from its tuning model).
  double thread_threshold(Collective c, Protocol p, Algorithm a) const;
  /// The GPU generation of the communicator's first rank.
  fabric::GpuArch arch() const { return f_.server_of(comm_.ranks().front()).arch; }
  /// RCCL's tuning model for the communicator's GPUs, or null for NCCL.
  const RcclModel* rccl() const { return rccl_model(config_.tuning_tables, arch()); }
  /// A channel's full complement of threads with a protocol.
  double max_threads(Protocol p) const;
  /// The pace of each stage of the chain and tree channels: a stage's slowest leg on the
  /// busiest of its links, with the legs of every channel that run there at the same time,
  /// moves capacity / load bytes of a channel per second.
  void set_stage_rates(engine::Simulation& sim, Collective c, int64_t bytes, int root);
  struct StageUse {
    uint32_t link;  // the link's index among those the operation crosses
    int stage;      // a leg's stage, or kEveryStage
    double share;
  };
  // set_stage_rates()'s tables, kept between operations: per fabric link, the operation (stamp)
  // that last indexed it and its index; per indexed link, its uses grouped by stage
  // (sorted[begin[k] .. begin[k + 1])) and their loads.
  struct StageLoads {
    std::vector<uint64_t> stamp;
    std::vector<uint32_t> index;
    uint64_t now = 0;
    std::vector<fabric::LinkId> links;
    std::vector<StageUse> uses, sorted;
    std::vector<uint32_t> begin, fill;
    std::vector<double> load;
  };
  StageLoads stage_loads_;
  // The stage paces of the last operation that computed them and what they came from: the
  // same operation again on the same paths and capacities (nccl-tests' iterations) plans the
  // same channels, so it takes them as they are.
  struct StagePaces {
    uint64_t paths_version = 0;
    Collective collective{};
    Algorithm algorithm{};
    Protocol protocol{};
    int channels = 0;
    int64_t bytes = -1;  // none yet
    int root = 0;
    std::vector<std::vector<double>> stages;  // per channel (empty for a ring's)
  };
  StagePaces stage_paces_;
  /// NCCL's per-step cost of a hop (hwLat x hop_latency_factor, less the reference wire), in us,
  /// of the operation in progress: set_step_costs() computes both kinds when it starts.
  double step_cost_us(bool network) const { return step_cost_us_[network ? 1 : 0]; }
  /// NCCL's hop latency for (a, p), times hop_latency_factor, less the wire of NCCL's
  /// reference hop (at least 0): what a step adds to its path's own latency.
  double beyond_wire_us(const TuningInput& in, Algorithm a, Protocol p, bool network) const;
  void set_step_costs();
  void finish_op(engine::Simulation& sim);

  const fabric::Fabric& f_;
  uint32_t id_ = 0;
  Communicator comm_;
  NcclConfig config_;
  const TuningTables& tables_;
  double ref_nvlink_us_ = 0;         // wire latency of a GPU-GPU hop inside a server
  double ref_net_us_ = 0;            // and between servers one switch apart
  double pcie_ring_gbytes_ = 0;      // pcie_ring_gbytes(), fixed by the communicator
  double step_cost_us_[2] = {0, 0};  // per-step cost of an intra-node and a network hop
  struct EdgeKey {
    fabric::NodeId src, dst, relay;
    int64_t message;
    int channel;
    bool operator==(const EdgeKey&) const = default;
  };
  struct EdgeHash {
    size_t operator()(const EdgeKey& k) const {
      // Mixed at every step: the map probes linearly from the low bits, which a multiply
      // alone would leave to the low bits of the last field.
      uint64_t h = mix64((static_cast<uint64_t>(k.src) << 32) ^ k.dst);
      h = mix64(h ^ k.relay);
      h = mix64(h ^ static_cast<uint64_t>(k.message));
      return static_cast<size_t>(mix64(h ^ static_cast<uint32_t>(k.channel)));
    }
  };
  FlatMap<EdgeKey, engine::ConnectionId, EdgeHash> connections_;
  // The point-to-point connection of every ordered pair of ranks and part, as its id times 2
  // plus 1 where it goes through the NET transport (kNoPair: not connected yet). Made at the
  // first AlltoAll, which connects every pair: an entry here costs 4 bytes, one in the map some
  // 80 (the map's entries for pairs connected before the table stay valid, and are found).
  std::vector<uint32_t> p2p_pairs_;
  static constexpr uint32_t kNoPair = static_cast<uint32_t>(-1);
  // A channel's edges and connections by shape: kept from one operation to the next.
  enum class LegShape : uint8_t {
    Ring,
    ChainFromRoot,
    ChainToRoot,
    Nvls,
    NvlsTree,
    Tree,
    CollNetChains,
    CollNetDirect
  };
  struct LegKey {
    LegShape shape;
    int root;
    int channel;
    int64_t message;
    auto operator<=>(const LegKey&) const = default;
  };
  struct LegSet {
    std::vector<Edge> edges;
    std::vector<engine::ConnectionId> legs;
  };
  std::map<LegKey, LegSet> legs_;
  /// The communicator's tree of a shape (Tree, CollNetChains, CollNetDirect, NvlsTree's
  /// leaders) on a channel, made once: it depends on nothing else.
  const Communicator::Tree& tree_of(LegShape shape, int channel);
  std::map<std::pair<LegShape, int>, Communicator::Tree> trees_;

  // The operation in progress.
  OpResult result_;
  bool running_ = false;
  size_t pending_ = 0;
  std::vector<Channel> channels_;
  struct P2pTransfer {
    engine::ConnectionId connection;
    bool network = false;  // across servers (NET transport) or inside one (P2P over NVLink)
    int64_t bytes = 0;
    double window = 0;  // bytes unacknowledged; 0: NCCL_STEPS point-to-point chunks
  };
  std::vector<P2pTransfer> p2p_;  // pair transfers
  // NCCL's batches as waves (p2p_schedule.hpp): per transfer its wave; the transfers by wave,
  // the first not started yet, and how many of the running wave are not done.
  std::vector<uint32_t> p2p_wave_, p2p_wave_order_;
  size_t p2p_wave_next_ = 0;
  size_t p2p_wave_left_ = 0;
  bool p2p_batched_ = false;  // the operation runs in waves (p2p_wave_ holds its plan)
  // The waves are kept for the next operation with the same transfers (a hash of them).
  bool p2p_plan_valid_ = false;
  bool p2p_plan_batched_ = false;
  uint64_t p2p_plan_key_ = 0;
  std::unique_ptr<P2pSchedule> p2p_schedule_;
  int p2p_per_peer_ = 1;        // NCCL's p2pnChannelsPerPeer, set with p2p_schedule_
  int p2p_passes_ = 1;          // times they run, each after the one before (MSCCL: 1 or 2)
  double p2p_tail_us_ = 0;      // NCCL's hop latency of the NET transport (after each pass)
  double p2p_nvl_tail_us_ = 0;  // and of the P2P transport
};

// ---- workloads ----

extern const ParamTable kNcclWorkloadTable;
/// `type: nccl`: one collective, repeated `iterations` times back to back.
std::unique_ptr<engine::Workload> make_nccl_workload(const engine::WorkloadInput& in,
                                                     const NcclConfig& scenario_nccl);

}  // namespace rocesim::collectives::nccl
