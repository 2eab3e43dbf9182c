#include "sim/collectives/nccl/tuning.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/core/error.hpp"

namespace rocesim::collectives::nccl {
namespace {

// Rows of hwLat: NVLink (also xGMI), PCI (GPUs that reach each other over PCIe alone), network.
constexpr int kNvlink = 0, kPci = 1, kNet = 2;
constexpr double kInf = std::numeric_limits<double>::infinity();

// [algorithm Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT][protocol LL, LL128,
// Simple]; CollNet, NVLS, NVLSTree and PAT run Simple only (NCCL 2.27, tuning.cc; PAT's row as
// NCCL 2.30.7 writes it: baseLat 8, hwLat 4.0 / 4.0 / 14 us, what 2.23 to 2.29 put in its
// latency formula; CollNetDirect and CollNetChain as 2.20 to 2.29 write them, baseLat 0, hwLat
// 3.7 / 3.7 / 31 and 2.8 / 2.8 / 30). MSCCL (RCCL's) has no row: zeros.
constexpr TuningTables kNewest{
    "newest",
    {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 8.0}},
    {{{0.6, 1.25, 4.0},
      {0.6, 1.9, 3.4},
      {0, 0, 3.7},
      {0, 0, 2.8},
      {0, 0, 25},
      {0, 0, 25},
      {0, 0, 4.0}},
     {{1.0, 1.9, 4.0},
      {1.0, 2.5, 5.7},
      {0, 0, 3.7},
      {0, 0, 2.8},
      {0, 0, 0},
      {0, 0, 0},
      {0, 0, 4.0}},
     {{5.0, 8.5, 14.0},
      {2.7, 4.0, 14.0},
      {0, 0, 31.0},
      {0, 0, 30.0},
      {0, 0, 18},
      {0, 0, 14},
      {0, 0, 14.0}}},
    true,
    true,
    true,
    true,
    false,
    false,
    true,
    2,
    true};

// NCCL 2.20.3 predates PAT.
constexpr TuningTables kV2203{
    "2.20.3",
    {{6.8, 14.0, 0.0}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
    {{{0.6, 1.25, 28.0},
      {0.6, 1.9, 3.4},
      {0, 0, 3.7},
      {0, 0, 2.8},
      {0, 0, 23},
      {0, 0, 23},
      {0, 0, 0}},
     {{1.0, 1.9, 28.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
     {{5.0, 8.5, 28.0},
      {2.7, 4.0, 14.0},
      {0, 0, 31.0},
      {0, 0, 30.0},
      {0, 0, 18},
      {0, 0, 14},
      {0, 0, 0}}},
    false,
    false,
    false,
    false,
    true,
    false,
    false,
    2,
    false};

// NCCL 2.8.3 (NVIDIA/nccl@920dbe5b, v2.8.3-1, src/graph/tuning.cc): Tree, Ring and one CollNet
// algorithm, the chain, whose row stands in CollNetChain's place (LL and Simple; CollNetDirect
// came with 2.12 and has no row). baseLat {4.4, 4.4, 0} {3.6, 10.0, 8.4} {4.4, 4.4, 0}; hwLat
// NVLink {.52, 1.25, 28} {.47, 1.9, 3.4} {.5, 1.2, 4.0}, PCI {1.0, 1.9, 28} {1.0, 2.5, 5.7}
// {1.0, 1.9, 5.5}, NET {5.0, 8.5, 28} {2.7, 4.0, 9.6} {5.0, 5.0, 10.7}.
constexpr TuningTables kV283{"2.8.3",
                             {{4.4, 4.4, 0.0},
                              {3.6, 10.0, 8.4},
                              {0, 0, 0},
                              {4.4, 4.4, 0.0},
                              {0, 0, 0},
                              {0, 0, 0},
                              {0, 0, 0}},
                             {{{0.52, 1.25, 28.0},
                               {0.47, 1.9, 3.4},
                               {0, 0, 0},
                               {0.5, 1.2, 4.0},
                               {0, 0, 0},
                               {0, 0, 0},
                               {0, 0, 0}},
                              {{1.0, 1.9, 28.0},
                               {1.0, 2.5, 5.7},
                               {0, 0, 0},
                               {1.0, 1.9, 5.5},
                               {0, 0, 0},
                               {0, 0, 0},
                               {0, 0, 0}},
                              {{5.0, 8.5, 28.0},
                               {2.7, 4.0, 9.6},
                               {0, 0, 0},
                               {5.0, 5.0, 10.7},
                               {0, 0, 0},
                               {0, 0, 0},
                               {0, 0, 0}}},
                             false,
                             false,
                             false,
                             false,
                             false,
                             true,
                             false,
                             1,
                             false};

// RCCL's tuning model 5 (ROCm/rccl@ee2d4e42 src/graph/tuning.cc; selected by rome_model_81, 8 x
// MI300X with 8 NICs). xGMI hops use the NVLink row. LL128 shares LL's latencies. Its model
// has no PAT figures (no bandwidth ratio): PAT is not offered. Its CollNet row (read as
// CollNetDirect's) serves CollNetChain too.
constexpr RcclModel kRcclMi300{
    {"rccl-mi300",
     {{12.0, 12.0, 17.0},
      {12.0, 12.0, 17.0},
      {12.0, 12.0, 17.0},
      {12.0, 12.0, 17.0},
      {0, 0, 0},
      {0, 0, 0},
      {0, 0, 0}},
     {{{0.9, 0.9, 2.3},
       {0.8, 0.8, 2.1},
       {0.0, 0.0, 0.9},
       {0.0, 0.0, 0.9},
       {0, 0, 0},
       {0, 0, 0},
       {0, 0, 0}},
      {{2.2, 2.2, 5.7},
       {2.2, 2.2, 5.7},
       {0.0, 0.0, 5.7},
       {0.0, 0.0, 5.7},
       {0, 0, 0},
       {0, 0, 0},
       {0, 0, 0}},
      {{10.5, 10.5, 25.0},
       {9.5, 9.5, 320.0},
       {0.0, 0.0, 10.5},
       {0.0, 0.0, 10.5},
       {0, 0, 0},
       {0, 0, 0},
       {0, 0, 0}}},
     true,
     false,
     false,
     false,
     true,
     false,
     false,
     2,
     false},
    {{{0.06, 0.06, 0.11},
      {0.08, 0.08, 1.00},
      {0.00, 0.00, 1.00},
      {0.00, 0.00, 1.00},
      {0, 0, 0},
      {0, 0, 0},
      {0, 0, 0}},
     {{0.06, 0.06, 0.59},
      {0.08, 0.08, 1.00},
      {0.00, 0.00, 1.00},
      {0.00, 0.00, 1.00},
      {0, 0, 0},
      {0, 0, 0},
      {0, 0, 0}}},
    {{0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 1.0, 1.0, 1.0, 1.0, 1.0, 0.6, 1.0, 0.9,
      1.0, 1.0, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1},
     {0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 1.0, 1.0, 1.0, 1.0, 1.0, 0.6, 1.0, 0.9,
      1.0, 1.0, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1},
     {0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1,
      0.1, 0.7, 1.0, 1.0, 1.0, 1.0, 1.0, 0.7, 0.7, 0.5, 0.6, 0.6, 0.6}},
    {{0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 1.0, 0.2, 1.0,
      0.4, 0.4, 0.1, 0.2, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1},
     {0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 1.0, 0.2, 1.0,
      0.4, 0.4, 0.1, 0.2, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1},
     {0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1,
      0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 1.0, 0.8, 1.0, 1.0, 1.0}},
    {655360, 131072, 3211264, 16, 64},  // ReduceScatter
    {98304, 98304, 5046272, 16, 64},    // AllGather
    {1048576, 1048576, 9437184, 0, 0},  // AllReduce
    {},                                 // Broadcast: none
    Algorithm::Tree};

// RCCL's tuning model 6 (ROCm/rccl@9e22c79d src/graph/tuning.cc), which RCCL takes on gfx950
// GPUs (MI350-class) in place of the platform model's (rome_models.cc: "if gfx950: tuning =
// 6"): model 5's latencies and bandwidth ratios, its own corrections (Tree/LL128 and
// Tree/Simple, Ring/LL128 at 16 MiB, Ring/Simple at 1 GiB) and protocol ranges (AllReduce: LL
// up to 128 KiB a rank, LL128 to 16.8 MiB; AllGather LL128 from 8 bytes a rank; a Broadcast's;
// its Reduce range is not applied by the releases that apply Broadcast's).
constexpr RcclModel kRcclMi355 = [] {
  RcclModel m = kRcclMi300;
  constexpr double tree_ll128[27] = {0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 1.0, 1.0, 1.0,
                                     1.0, 1.0, 0.6, 1.0, 0.9, 1.0, 1.0, 1.0, 1.0,
                                     1.0, 2.0, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1};
  constexpr double tree_simple[27] = {0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1,
                                      0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.7, 1.0, 0.1,
                                      0.1, 0.1, 0.9, 0.9, 0.7, 0.8, 0.6, 0.6, 0.6};
  for (int i = 0; i < 27; ++i) {
    m.tree_correction[1][i] = tree_ll128[i];
    m.tree_correction[2][i] = tree_simple[i];
  }
  m.ring_correction[1][18] = 0.1;
  m.ring_correction[2][24] = 0.8;
  m.reduce_scatter = {131071, 131071, 4194304, 16, 64};
  m.all_gather = {7, 7, 8388608, 16, 64};
  m.all_reduce = {131071, 131071, 17660227, 0, 0};
  m.broadcast = {2048, 2048, 16777216, 0, 0};
  return m;
}();

// NCCL 2.27's tables (HARDWARE.md 5.5), GB/s, columns 1 / 2 / more nodes; Blackwell is twice
// Hopper in 2.27. NVLS efficiency and the NVLSTree kernel's throughput from NCCL 2.30 (no NVLS
// before Hopper).
constexpr ProtocolCaps kVoltaCaps{39.0, {20, 20, 20}, {20, 20, 20}, {26.5, 18.5, 10.0}, 0, {}};
constexpr ProtocolCaps kAmpereCaps{87.7, {20, 20, 20}, {20, 20, 20}, {24.0, 23.6, 17.8}, 0, {}};
constexpr ProtocolCaps kHopperCaps{
    141.0, {36.7, 36.7, 36.7}, {36.7, 36.7, 29.0}, {38.7, 41.4, 36.0}, 0.85, {0, 57.7, 45.5}};
constexpr ProtocolCaps kBlackwellCaps{
    282.0, {73.4, 73.4, 73.4}, {73.4, 73.4, 58.0}, {77.4, 82.8, 72.0}, 0.74, {0, 96.0, 80.0}};

// NCCL's treeCorrectionFactor[protocol][log2(bytes / 64)], 64 B .. 256 MiB (enqueue.cc and
// tuning.cc): its measured tree efficiency by size, applied by its model when choosing.
constexpr double kTreeCorrection[3][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6, .5,
     .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6, .6,
     .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
// NCCL 2.8.3's LL128 row (its LL and Simple rows are the same as the later releases').
constexpr double kTreeCorrectionLl128V28[23] = {1.0, 1.0, 1.0, 1.0, 1.0, .9,  .8, .8,
                                                .8,  .7,  .6,  .6,  .6,  .5,  .6, .6,
                                                .7,  .7,  .8,  .9,  .9,  .92, .92};
// NCCL 2.8.3's per-channel LL128 caps by collective (ll128MaxBwPerCh: Broadcast, Reduce,
// AllGather, ReduceScatter, AllReduce), GB/s, for rings and trees alike.
double ll128_cap_v28(Collective c) {
  switch (c) {
    case Collective::Broadcast:
      return 18.8;
    case Collective::Reduce:
      return 12.0;
    case Collective::AllGather:
      return 18.3;
    case Collective::ReduceScatter:
      return 15.2;
    default:
      return 16.9;
  }
}
// NCCL 2.8.3's perChMaxTreeBws: A100 (compCap 80) {24.0, 22.5, 16.0}, every other GPU Volta's
// {26.5, 18.5, 10.0}, by 1 node, 2, more.
double tree_cap_v28(fabric::GpuArch arch, int col) {
  constexpr double kAmpere[3] = {24.0, 22.5, 16.0}, kVolta[3] = {26.5, 18.5, 10.0};
  return arch == fabric::GpuArch::Ampere ? kAmpere[col] : kVolta[col];
}

int ai(Algorithm a) {
  return static_cast<int>(a);
}
int pi(Protocol p) {
  return static_cast<int>(p);
}

bool supported(const TuningTables& t, const TuningInput& in, Algorithm a, Protocol p) {
  if (in.rccl != nullptr && p == Protocol::LL128 && !rccl_ll128(in.arch)) return false;
  // RCCL's tables give no bandwidth to what it does not run (NVLS and NVLSTree: no NVSwitch
  // multicast in its build), whatever GPUs it is told it runs on.
  if (in.rccl != nullptr && a != Algorithm::Msccl &&
      in.rccl->bw_ratio[in.nnodes <= 2 ? 0 : 1][ai(a)][pi(p)] <= 0) {
    return false;
  }
  if (p == Protocol::LL128 && !in.ll128) return false;
  switch (a) {
    case Algorithm::Ring:
      return !is_p2p(in.collective);
    case Algorithm::Tree:
      return in.collective == Collective::AllReduce && in.nranks > 1;
    case Algorithm::CollNetDirect:
      // Only where an NVSwitch joins the GPUs (nvsCount) and for up to 8 GPUs a node
      // (NCCL_MAX_DIRECT_ARITY + 1), as Chain. NCCL 2.8 has none.
      return in.collective == Collective::AllReduce && in.collnet && p == Protocol::Simple &&
             in.nnodes > 1 && in.ppn <= 8 && in.nvswitch && !t.nccl28;
    case Algorithm::CollNetChain:
      // NCCL 2.8's CollNet offers LL too ("CollNet does not support LL128").
      return in.collective == Collective::AllReduce && in.collnet &&
             (p == Protocol::Simple || (t.nccl28 && p == Protocol::LL)) && in.nnodes > 1 &&
             in.ppn <= 8;
    case Algorithm::Nvls:
      // AllReduce; across nodes NVLS reduces between the nodes through CollNet (IB SHARP):
      // NCCL disables it where CollNet is off (2.20.3 "if (comm->collNetSupport == 0) ... if
      // (comm->nNodes > 1) algoEnable[NCCL_ALGO_NVLS] = 0"; 2.27 "Disable ... Collnet+NVLS if
      // collnet is not supported"). AllGather and ReduceScatter inside one node (NCCL 2.17 on:
      // "now we only support single-node NVLS allgather and reducescatter"; across nodes NCCL
      // 2.27 needs its CollNet plugin's iallgather / ireducescatter, not modelled).
      if (!in.nvls || p != Protocol::Simple || t.nccl28) return false;  // NCCL 2.17 on
      if (in.collective == Collective::AllReduce) return in.nnodes == 1 || in.collnet;
      return (in.collective == Collective::AllGather ||
              in.collective == Collective::ReduceScatter) &&
             in.nnodes == 1;
    case Algorithm::NvlsTree:
      return in.collective == Collective::AllReduce && in.nvls && p == Protocol::Simple &&
             in.nnodes > 1 && !t.nccl28;
    case Algorithm::Pat:
      // ncclPatEnable: one rank per node, Simple, AllGather and ReduceScatter.
      return (in.collective == Collective::AllGather ||
              in.collective == Collective::ReduceScatter) &&
             t.pat && in.pat && p == Protocol::Simple && in.nranks > 1 && in.ppn == 1;
    case Algorithm::Msccl:
      return false;  // RCCL runs it before asking its tuner (msccl.hpp)
  }
  return false;
}

// Steps of a ring operation on n ranks, and how many of them cross nodes.
void ring_steps(const TuningTables& t, const TuningInput& in, int& steps, int& inter) {
  switch (in.collective) {
    case Collective::AllReduce:
      steps = 2 * (in.nranks - 1);
      inter = in.nnodes == 1 ? 0 : t.ring_allreduce_2n_inter ? 2 * in.nnodes : 2 * (in.nnodes - 1);
      break;
    default:  // AllGather, ReduceScatter, Broadcast, Reduce
      steps = in.nranks - 1;
      inter = in.nnodes - 1;
      break;
  }
}

}  // namespace

bool rccl_ll128(fabric::GpuArch arch) {
  return fabric::is_amd(arch);
}

double ll_max_bw(fabric::GpuArch arch, int nnodes, bool amd_host) {
  if (nnodes <= 1) return protocol_caps(arch).ll_max_bw_one_node;
  if (amd_host) return nnodes == 2 ? 22.5 : 19.0;
  return nnodes == 2 ? 39.0 : 20.4;
}

const ProtocolCaps& protocol_caps(fabric::GpuArch arch) {
  switch (arch) {
    case fabric::GpuArch::Volta:
      return kVoltaCaps;
    case fabric::GpuArch::Ampere:
      return kAmpereCaps;
    case fabric::GpuArch::Blackwell:
      return kBlackwellCaps;
    case fabric::GpuArch::Hopper:
    case fabric::GpuArch::Cdna3:
    case fabric::GpuArch::Cdna4:
      break;
  }
  return kHopperCaps;
}

const RcclRange* RcclModel::range(Collective c) const {
  switch (c) {
    case Collective::ReduceScatter:
      return &reduce_scatter;
    case Collective::AllGather:
      return &all_gather;
    case Collective::AllReduce:
      return &all_reduce;
    case Collective::Broadcast:
      return &broadcast;
    default:
      return nullptr;
  }
}

const RcclModel* rccl_model(std::string_view release, fabric::GpuArch arch) {
  if (release != kRcclMi300.tables.name) return nullptr;
  return arch == fabric::GpuArch::Cdna4 ? &kRcclMi355 : &kRcclMi300;
}

const TuningTables& tuning_tables(std::string_view release) {
  if (release == "2.20.3") return kV2203;
  if (release == "2.8.3") return kV283;
  if (release == kRcclMi300.tables.name) return kRcclMi300.tables;
  return kNewest;
}

double nvls_bus_bandwidth(const TuningTables& t, const TuningInput& in) {
  // Per head of the NVLS graph: its NVLink share, across nodes at most its NIC path too
  // (tuning.cc "bw = std::min(graphs[a]->bwIntra, graphs[a]->bwInter)"; one node's graph has
  // its NVLink share for both). NCCL 2.27's AllGather and ReduceScatter: "bw =
  // std::min(graphs[a]->bwIntra * (ppn - 1.0f) / ppn, graphs[a]->bwInter * 0.9f)".
  const double inter = in.nnodes > 1 ? in.nvls_bw_inter : in.nvls_bw_intra;
  const bool gather =
      in.collective == Collective::AllGather || in.collective == Collective::ReduceScatter;
  if (gather && t.nvls_gather_27) {
    return in.nvls_heads * std::min(in.nvls_bw_intra * (in.ppn - 1.0) / in.ppn, inter * 0.9);
  }
  return in.nvls_heads * std::min(in.nvls_bw_intra, inter);
}

double hop_latency_us(const TuningTables& t, const TuningInput& in, Algorithm a, Protocol p,
                      bool network_hop, bool in_model) {
  const bool host_costs = !(in_model && t.nccl28);
  // The net plugin's reported latency (NCCL's graph latencyInter) joins every network step,
  // twice for Simple ("flush extra latency", tuning.cc).
  if (network_hop) {
    const Algorithm net = t.ppn_one_tree_net && in.ppn == 1 ? Algorithm::Tree : a;
    return t.hw_lat[kNet][ai(net)][pi(p)] +
           (host_costs ? in.latency_inter_us * (p == Protocol::Simple ? 2.0 : 1.0) : 0.0);
  }
  double intra = t.hw_lat[in.pci_intra ? kPci : kNvlink][ai(a)][pi(p)];
  // NCCL 2.8: "if (nNodes > 1 && p == NCCL_PROTO_LL) intraLat *= 1.8".
  if (t.nccl28 && in.nnodes > 1 && p == Protocol::LL) intra *= 1.8;
  // "Inter-node rings still have to launch nsteps * net overhead" (tuning.cc): rings only.
  if (host_costs && in.nnodes > 1 && a == Algorithm::Ring) {
    intra = std::max(intra, in.net_overhead_us * (p == Protocol::Simple ? 3.0 : 1.0));
  }
  return intra;
}

double step_latency_us(const TuningTables& t, const TuningInput& in, Algorithm a, Protocol p,
                       bool network_hop) {
  if (in.rccl != nullptr && network_hop && a == Algorithm::Ring && p == Protocol::Simple) {
    a = in.rccl->ring_simple_net_step_as;
  }
  return hop_latency_us(t, in, a, p, network_hop);
}

double model_time_us(const TuningTables& t, const TuningInput& in, Algorithm a, Protocol p,
                     double bytes) {
  if (!supported(t, in, a, p)) return kInf;
  if (in.nranks <= 1) return 0;
  // Per graph channel: the intra-node bandwidth on up to 2 nodes, the inter-node one beyond.
  const ProtocolCaps& caps = protocol_caps(in.arch);
  const int col = caps_column(in.nnodes);
  const double graph = in.graph_channels;
  // NCCL 2.8's CollNet took the intra-node bandwidth at any size ("nNodes <= 2 || a ==
  // NCCL_ALGO_COLLNET ? speedIntra : speedInter") and capped A100s at 235 GB/s.
  const bool intra_bw = in.nnodes <= 2 || (t.nccl28 && a == Algorithm::CollNetChain);
  double bus = graph * (intra_bw ? in.bw_intra : in.bw_inter);
  if (t.nccl28 && in.arch == fabric::GpuArch::Ampere) bus = std::min(bus, 235.0);
  const double ll_max = ll_max_bw(in.arch, in.nnodes, in.amd_host);
  if (a == Algorithm::Nvls) bus = nvls_bus_bandwidth(t, in);
  if (a == Algorithm::NvlsTree) {
    bus = in.nvls_heads *
          std::min(in.nvls_bw_intra, in.nnodes <= 2 ? in.nvls_bw_inter : in.nvls_bw_inter / 2);
  }
  if (in.rccl != nullptr) {
    bus *= in.rccl->bw_ratio[in.nnodes <= 2 ? 0 : 1][ai(a)][pi(p)];
  } else if (a == Algorithm::Ring && p == Protocol::LL) {
    const double f = t.ring_ll_half ? 0.5
                     : (in.nnodes > 1 || in.collective == Collective::AllReduce ||
                        in.collective == Collective::Reduce)
                         ? 0.25
                         : 1.0 / 3.0;
    bus = std::min(ll_max, bus * f);
  }
  if (in.rccl == nullptr && a == Algorithm::Ring && p == Protocol::LL128) {
    // "busBw * (ppn < 2 ? 0.7 : 0.92 /*120.0/128.0*/)": a GPU alone on its server sends and
    // receives through its NIC.
    const double cap = t.nccl28 ? ll128_cap_v28(in.collective) : caps.ring_ll128[col];
    bus = std::min(bus * (in.ppn < 2 ? 0.7 : 0.92), graph * cap);
  }
  if (in.rccl == nullptr && a == Algorithm::Tree) {
    bus = std::min(bus * 0.92, graph * (t.nccl28 ? tree_cap_v28(in.arch, col) : caps.tree[col]));
    if (p == Protocol::LL) bus = std::min(bus / 3.8, ll_max);
    if (p == Protocol::LL128) {
      const double cap = t.nccl28 ? ll128_cap_v28(in.collective) : caps.tree_ll128[col];
      const double f = in.nnodes == 1 ? 7.0 / 9.0 : t.nccl28 ? 0.915 : 120.0 / 128.0;
      bus = std::min(bus * f, graph * cap);
    }
    // "if (a == NCCL_ALGO_TREE && graphs[a]->pattern == NCCL_TOPO_PATTERN_TREE) busBw *= .85":
    // NCCL searches its tree graph with the BALANCED_TREE pattern (init.cc), which its search
    // keeps, except with one GPU a node ("if (ngpus == 1) if (graph->pattern !=
    // NCCL_TOPO_PATTERN_RING) graph->pattern = NCCL_TOPO_PATTERN_TREE", search.cc).
    if (in.ppn == 1 && !t.nccl28) bus *= 0.85;  // NCCL 2.8 has no pattern factor
  }
  if (t.nccl28 && a == Algorithm::CollNetChain) {
    // "busBw *= .9"; LL: "busBw *= 1.0/6.0; // Take into account that GDR read is disabled on
    // both sides".
    bus *= 0.9;
    if (p == Protocol::LL) bus /= 6.0;
  }
  if (a == Algorithm::Pat) bus *= 0.75;  // NCCL's figure for the PAT kernel
  if (a == Algorithm::CollNetDirect && in.rccl == nullptr) {
    // "Collnet+Direct requires all GPUs to have a local NIC to work at full speed": the GPU/NIC
    // ratio f = ppn / channels, eased to f - (f - 1) / 2; Hopper and later x 0.85.
    double f = static_cast<double>(in.ppn) / graph;
    f -= (f - 1) / 2;
    bus /= f;
    if (in.arch == fabric::GpuArch::Hopper || in.arch == fabric::GpuArch::Blackwell) bus *= 0.85;
  }
  int steps = 0, inter = 0;
  ring_steps(t, in, steps, inter);
  double algbw = bus;
  if (a == Algorithm::Ring) {
    if (in.collective == Collective::AllReduce || in.collective == Collective::AllGather ||
        in.collective == Collective::ReduceScatter) {
      algbw = bus * in.nranks / steps;
    }
  } else if (a == Algorithm::Nvls || a == Algorithm::NvlsTree) {
    // NCCL 2.27 leaves the bus bandwidth of AllGather and ReduceScatter unconverted for every
    // algorithm but the ring ("if (!(a != NCCL_ALGO_RING && (coll == ncclFuncAllGather ||
    // coll == ncclFuncReduceScatter)))"); 2.20.3 converts NVLS's of every collective.
    const bool unconverted = t.nvls_gather_27 && in.collective != Collective::AllReduce;
    algbw = unconverted ? bus : bus * 5.0 / 6.0;
  } else if (a != Algorithm::Pat) {
    algbw = bus * 0.5;  // Tree and CollNet; PAT's AllGather and ReduceScatter stay unconverted
  }
  // Latency.
  const double intra_lat = hop_latency_us(t, in, a, p, false, true);
  const double inter_lat = hop_latency_us(t, in, a, p, true, true);
  const double log_nodes = std::floor(std::log2(std::max(1, in.nnodes)));
  double lat = t.base_lat[ai(a)][pi(p)];
  switch (a) {
    case Algorithm::Ring:
      lat += (steps - inter) * intra_lat + inter * inter_lat;
      // NCCL's "plateau effect of ring": multi-node Ring/Simple AllReduce once each rank's
      // share of a channel reaches 64 bytes.
      if (in.rccl == nullptr && p == Protocol::Simple && in.nnodes > 1 &&
          in.collective == Collective::AllReduce) {
        // NCCL 2.8: "nBytes >= nRanks/16.0*65536", x 1.9 whatever the GPU.
        if (t.nccl28 && bytes >= in.nranks / 16.0 * 65536) lat *= 1.9;
        if (!t.nccl28 && bytes / (in.channels * in.nranks) >= 64) {
          lat *= in.arch == fabric::GpuArch::Volta ? 1.9 : 1.4;
        }
      }
      break;
    case Algorithm::Tree:
      lat += 2 * ((in.ppn - 1) * intra_lat + log_nodes * inter_lat);
      break;
    case Algorithm::CollNetDirect:
      // "Add 0.4 us arity serialization latency" per GPU of the node.
      lat += 2 * (std::min(1, in.ppn - 1) * intra_lat + 0.4 * (in.ppn - 1)) + inter_lat;
      break;
    case Algorithm::CollNetChain:
      lat += 2 * (in.ppn - 1) * intra_lat + inter_lat;
      break;
    case Algorithm::Nvls:
      // One NVLS step inside the node, and across nodes one through CollNet's switches.
      lat = intra_lat + (in.nnodes > 1 ? inter_lat : 0.0);
      break;
    case Algorithm::NvlsTree:
      lat += intra_lat + 2 * log_nodes * inter_lat;
      break;
    case Algorithm::Pat:
      // A logarithmic part and "still a linear part" (tuning.cc).
      lat += log_nodes * inter_lat / 3.5 + 2.8 * in.nranks;
      break;
    case Algorithm::Msccl:
      break;  // not supported(): never reached
  }
  if (bytes >= 64) {
    const int i = static_cast<int>(std::floor(std::log2(bytes / 64)));
    if (in.rccl != nullptr) {
      // RCCL corrects trees of every collective and multi-node rings, clamping large sizes.
      if (a == Algorithm::Tree) algbw *= in.rccl->tree_correction[pi(p)][std::min(i, 26)];
      if (a == Algorithm::Ring && in.nnodes > 1) {
        algbw *= in.rccl->ring_correction[pi(p)][std::min(i, 26)];
      }
    } else if (a == Algorithm::Tree && i < 23) {
      algbw *=
          t.nccl28 && p == Protocol::LL128 ? kTreeCorrectionLl128V28[i] : kTreeCorrection[pi(p)][i];
    }
  }
  ROCESIM_CHECK(algbw > 0, "the tuning model needs a positive bandwidth");
  return lat + bytes / (1000.0 * algbw);
}

AlgoChoice choose(const TuningTables& t, const TuningInput& in, double bytes, uint8_t algos,
                  uint8_t protos) {
  AlgoChoice best{Algorithm::Ring, Protocol::Simple, kInf};
  for (int a = 0; a < kAlgorithms; ++a) {
    if ((algos >> a & 1u) == 0) continue;
    for (int p = 0; p < 3; ++p) {
      if ((protos >> p & 1u) == 0) continue;
      const double us =
          model_time_us(t, in, static_cast<Algorithm>(a), static_cast<Protocol>(p), bytes);
      if (us < best.model_us) best = {static_cast<Algorithm>(a), static_cast<Protocol>(p), us};
    }
  }
  const RcclRange* range = in.rccl != nullptr ? in.rccl->range(in.collective) : nullptr;
  if (range != nullptr && range->defined() && in.nnodes >= 2 && protos == kAnyProtocol &&
      std::isfinite(best.model_us)) {
    // RCCL overrides the model's protocol of multi-node collectives by size
    // (rcclUpdateCollectiveProtocol): Simple, LL in its range, LL128 in its own (the upper bound
    // of AllReduce's x 3.8 beyond 2 nodes), by the bytes of each rank.
    const bool all_reduce = in.collective == Collective::AllReduce;
    const double per_rank = all_reduce ? bytes : std::floor(bytes / in.nranks);
    const double ll128_max = range->ll128_max * (all_reduce && in.nnodes > 2 ? 3.8 : 1.0);
    Protocol p = Protocol::Simple;
    if (per_rank > 0 && per_rank <= range->ll_max) p = Protocol::LL;
    if (rccl_ll128(in.arch) && per_rank > range->ll128_min && per_rank <= ll128_max) {
      p = Protocol::LL128;
    }
    if (std::isfinite(model_time_us(t, in, best.algorithm, p, bytes))) {
      best.protocol = p;
      best.model_us = model_time_us(t, in, best.algorithm, p, bytes);
    }
  }
  if (std::isinf(best.model_us)) {
    // Nothing allowed is offered for this collective: NCCL falls back to what it can run; so
    // does rocesim (Ring, with the first allowed protocol, Simple if none).
    best.algorithm = Algorithm::Ring;
    best.protocol = Protocol::Simple;
    for (int p = 0; p < 3; ++p) {
      if ((protos >> p & 1u) != 0) {
        best.protocol = static_cast<Protocol>(p);
        break;
      }
    }
    best.model_us = model_time_us(t, in, best.algorithm, best.protocol, bytes);
  }
  return best;
}

}  // namespace rocesim::collectives::nccl
