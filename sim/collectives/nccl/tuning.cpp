#include "sim/collectives/nccl/tuning.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/core/error.hpp"

namespace rocesim::collectives::nccl {
namespace {

constexpr int kNvlink = 0, kPci = 1, kNet = 2;
constexpr double kInf = std::numeric_limits<double>::infinity();

// [algorithm Tree, Ring, CollNet][protocol LL, LL128, Simple]; CollNet runs Simple only.
constexpr TuningTables kNewest{"newest",
                               {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}},
                               {{{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {3.7, 3.7, 3.7}},
                                {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {3.7, 3.7, 3.7}},
                                {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}, {31.0, 31.0, 31.0}}},
                               true};

constexpr TuningTables kV2203{"2.20.3",
                              {{6.8, 14.0, 0.0}, {6.6, 14.0, 8.4}, {0, 0, 0}},
                              {{{0.6, 1.25, 28.0}, {0.6, 1.9, 3.4}, {3.7, 3.7, 3.7}},
                               {{1.0, 1.9, 28.0}, {1.0, 2.5, 5.7}, {3.7, 3.7, 3.7}},
                               {{5.0, 8.5, 28.0}, {2.7, 4.0, 14.0}, {31.0, 31.0, 31.0}}},
                              false};

// NCCL 2.27's tables (HARDWARE.md 5.5), GB/s, columns 1 / 2 / more nodes. llMaxBws: the first
// column by GPU generation, the others those of an Intel host (NCCL's row 0 for Volta, Hopper
// keeps its own row). Blackwell is twice Hopper in 2.27.
constexpr ProtocolCaps kVoltaCaps{
    {39.0, 39.0, 20.4}, {20, 20, 20}, {20, 20, 20}, {26.5, 18.5, 10.0}};
constexpr ProtocolCaps kAmpereCaps{
    {87.7, 39.0, 20.4}, {20, 20, 20}, {20, 20, 20}, {24.0, 23.6, 17.8}};
constexpr ProtocolCaps kHopperCaps{
    {141.0, 45.0, 35.0}, {36.7, 36.7, 36.7}, {36.7, 36.7, 29.0}, {38.7, 41.4, 36.0}};
constexpr ProtocolCaps kBlackwellCaps{
    {282.0, 90.0, 70.0}, {73.4, 73.4, 73.4}, {73.4, 73.4, 58.0}, {77.4, 82.8, 72.0}};

int ai(Algorithm a) {
  return static_cast<int>(a);
}
int pi(Protocol p) {
  return static_cast<int>(p);
}

bool supported(const TuningInput& in, Algorithm a, Protocol p) {
  switch (a) {
    case Algorithm::Ring:
      return !is_p2p(in.collective);
    case Algorithm::Tree:
      return in.collective == Collective::AllReduce && in.nranks > 1;
    case Algorithm::CollNet:
      return in.collective == Collective::AllReduce && in.collnet && p == Protocol::Simple &&
             in.nnodes > 1;
  }
  return false;
}

// Steps of a ring operation on n ranks, and how many of them cross nodes.
void ring_steps(const TuningInput& in, int& steps, int& inter) {
  switch (in.collective) {
    case Collective::AllReduce:
      steps = 2 * (in.nranks - 1);
      inter = 2 * (in.nnodes - 1);
      break;
    default:  // AllGather, ReduceScatter, Broadcast, Reduce
      steps = in.nranks - 1;
      inter = in.nnodes - 1;
      break;
  }
}

}  // namespace

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
      break;
  }
  return kHopperCaps;
}

const TuningTables& tuning_tables(std::string_view release) {
  if (release == "2.20.3") return kV2203;
  return kNewest;
}

double hop_latency_us(const TuningTables& t, const TuningInput& in, Algorithm a, Protocol p,
                      bool network_hop) {
  if (network_hop) return t.hw_lat[kNet][ai(a)][pi(p)];
  double intra = t.hw_lat[kNvlink][ai(a)][pi(p)];
  if (in.nnodes > 1) {
    intra = std::max(intra, in.net_overhead_us * (p == Protocol::Simple ? 3.0 : 1.0));
  }
  return intra;
}

double model_time_us(const TuningTables& t, const TuningInput& in, Algorithm a, Protocol p,
                     double bytes) {
  if (!supported(in, a, p)) return kInf;
  if (in.nranks <= 1) return 0;
  // Bandwidth: per channel inside a node, or the narrower of NVLink and NIC across nodes.
  const double per_channel = in.nnodes > 1 ? std::min(in.bw_intra, in.bw_inter) : in.bw_intra;
  double bus = in.channels * per_channel;
  const ProtocolCaps& caps = protocol_caps(in.arch);
  const int col = caps_column(in.nnodes);
  const double graph = in.graph_channels;
  if (a == Algorithm::Ring && p == Protocol::LL) {
    const double f = t.ring_ll_half ? 0.5
                     : (in.nnodes > 1 || in.collective == Collective::AllReduce ||
                        in.collective == Collective::Reduce)
                         ? 0.25
                         : 1.0 / 3.0;
    bus = std::min(caps.ll_max_bw[col], bus * f);
  }
  if (a == Algorithm::Ring && p == Protocol::LL128) {
    bus = std::min(bus * 0.92, graph * caps.ring_ll128[col]);
  }
  if (a == Algorithm::Tree) {
    bus = std::min(bus * 0.92, graph * caps.tree[col]);
    if (p == Protocol::LL) bus = std::min(bus / 3.8, caps.ll_max_bw[col]);
    if (p == Protocol::LL128) {
      bus = std::min(bus * (in.ppn == 1 ? 7.0 / 9.0 : 120.0 / 128.0), graph * caps.tree_ll128[col]);
    }
    bus *= 0.85;  // NCCL's correction for the tree pattern
  }
  int steps = 0, inter = 0;
  ring_steps(in, steps, inter);
  double algbw = bus;
  if (a == Algorithm::Ring) {
    if (in.collective == Collective::AllReduce || in.collective == Collective::AllGather ||
        in.collective == Collective::ReduceScatter) {
      algbw = bus * in.nranks / steps;
    }
  } else {
    algbw = bus * 0.5;  // Tree and CollNet
  }
  // Latency.
  const double intra_lat = hop_latency_us(t, in, a, p, false);
  const double inter_lat = hop_latency_us(t, in, a, p, true);
  double lat = t.base_lat[ai(a)][pi(p)];
  switch (a) {
    case Algorithm::Ring:
      lat += (steps - inter) * intra_lat + inter * inter_lat;
      break;
    case Algorithm::Tree:
      lat += 2 * ((in.ppn - 1) * intra_lat + std::log2(std::max(1, in.nnodes)) * inter_lat);
      break;
    case Algorithm::CollNet:
      lat += 2 * (std::min(1, in.ppn - 1) * intra_lat + 0.4 * (in.ppn - 1)) + inter_lat;
      break;
  }
  ROCESIM_CHECK(algbw > 0, "the tuning model needs a positive bandwidth");
  return lat + bytes / (1000.0 * algbw);
}

AlgoChoice choose(const TuningTables& t, const TuningInput& in, double bytes,
                  std::optional<Algorithm> algo, std::optional<Protocol> proto) {
  AlgoChoice best{Algorithm::Ring, Protocol::Simple, kInf};
  for (Algorithm a : {Algorithm::Tree, Algorithm::Ring, Algorithm::CollNet}) {
    if (algo && *algo != a) continue;
    for (Protocol p : {Protocol::LL, Protocol::LL128, Protocol::Simple}) {
      if (proto && *proto != p) continue;
      const double us = model_time_us(t, in, a, p, bytes);
      if (us < best.model_us) best = {a, p, us};
    }
  }
  if (std::isinf(best.model_us)) {
    // The forced combination is not one NCCL offers for this collective: NCCL falls back to
    // what it can run; so does rocesim (Ring, and Simple where the protocol is not offered).
    best.algorithm = Algorithm::Ring;
    best.protocol = proto.value_or(Protocol::Simple);
    best.model_us = model_time_us(t, in, best.algorithm, best.protocol, bytes);
  }
  return best;
}

}  // namespace rocesim::collectives::nccl
