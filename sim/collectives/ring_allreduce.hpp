// Plain ring AllReduce over a set of ranks: a reduce-scatter followed by an all-gather, 2(n-1)
// steps. The S bytes of every rank are cut into n chunks; in step k rank i sends chunk
// (i - k) mod n to rank i+1, which reduces it (first n-1 steps) or stores it (last n-1). A rank
// starts step k+1 once its step-k send is delivered and it has received its predecessor's step-k
// chunk, so a slow link holds the whole ring back, as in the real collective.
//
// On an idle non-blocking fabric with per-rank bandwidth B and path latency L every step takes
// S/(n B) + L, so the collective takes 2(n-1) (S/(n B) + L): the bandwidth term 2(n-1)/n * S/B
// plus 2(n-1) latencies. algbw = S / t and busbw = algbw * 2(n-1)/n (nccl-tests' definitions).
// Several independent rings (group_size) run side by side, sharing the fabric.
//
// This is the textbook algorithm with one flow per step: NCCL's channels, chunking, protocols
// and pipelining are not modelled here. State is O(n): transfers are emitted as
// they become ready, never materialised per step.
#pragma once

#include <memory>
#include <vector>

#include "sim/engine/workload_params.hpp"

namespace rocesim::collectives {

class RingAllReduce final : public engine::Workload {
 public:
  /// `ranks` holds the groups one after the other, `group` ranks each, in ring order.
  RingAllReduce(std::string name, std::vector<fabric::NodeId> ranks, size_t group, Bytes bytes,
                engine::ConnectionSpec conn);

  std::string_view type() const override { return "ring_allreduce"; }
  void start(engine::Simulation& sim, engine::WorkloadId id) override;
  void on_transfer_done(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) override;
  void figures(engine::WorkloadFigures& out, Time duration) const override;

  size_t steps() const { return 2 * (group_ - 1); }
  /// Bytes rank i sends in step k.
  Bytes step_bytes(size_t rank, size_t step) const;

 private:
  /// Position of rank i in its ring (one ring: i itself, without a division per step).
  size_t position(size_t i) const { return group_ == ranks_.size() ? i : i % group_; }
  /// Index of the next rank of the same ring.
  size_t successor(size_t i) const {
    const size_t at = position(i);
    return at + 1 == group_ ? i - at : i + 1;
  }
  void step_done(size_t rank);
  /// Posts the next step of every rank on the ready list that can go.
  void drain(engine::Simulation& sim, engine::WorkloadId id);

  std::vector<fabric::NodeId> ranks_;
  size_t group_;
  Bytes bytes_;
  engine::ConnectionSpec conn_;
  int64_t chunk_base_, chunk_extra_;        // S = base n + extra: chunk sizes
  std::vector<engine::ConnectionId> next_;  // rank i -> rank i+1
  std::vector<uint32_t> sent_;              // steps whose send is delivered, per rank
  std::vector<uint32_t> received_;          // steps received from the predecessor, per rank
  std::vector<uint8_t> busy_;               // a send is in flight
  std::vector<size_t> ready_;               // ranks to look at
  size_t ranks_done_ = 0;
};

extern const ParamTable kRingAllReduceTable;
std::unique_ptr<engine::Workload> make_ring_allreduce(const engine::WorkloadInput& in);

}  // namespace rocesim::collectives
