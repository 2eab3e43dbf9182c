#include "sim/collectives/ring_allreduce.hpp"

#include <fmt/format.h>

#include "sim/fabric/gpu_selection.hpp"

namespace rocesim::collectives {
namespace {

constexpr Param kRingParams[] = {
    engine::kWorkloadTypeParam,
    engine::kWorkloadNameParam,
    engine::kWorkloadStartParam,
    engine::kWorkloadAfterParam,
    engine::kWorkloadJobParam,
    {.key = "ranks",
     .type = ParamType::Any,
     .fallback = "all",
     .help = "ranks of the job in the ring, in ring order",
     .choices = "GPU selection"},
    {.key = "bytes",
     .type = ParamType::Bytes,
     .help = "buffer size S per rank",
     .check = Check::Positive},
    engine::kQpsParam,
    engine::kQpModeParam,
    engine::kMessageSizeParam,
    engine::kTransportParam,
    engine::kGroupSizeParam,
    engine::kGroupStrideParam,
};

}  // namespace

const ParamTable kRingAllReduceTable{
    "workload (type: ring_allreduce)",
    "Plain ring AllReduce (reduce-scatter then all-gather, one flow per step); with group_size, "
    "one independent ring per group, all at once.",
    kRingParams};

RingAllReduce::RingAllReduce(std::string name, std::vector<fabric::NodeId> ranks, size_t group,
                             Bytes bytes, engine::ConnectionSpec conn)
    : Workload(std::move(name)),
      ranks_(std::move(ranks)),
      group_(group),
      bytes_(bytes),
      conn_(conn),
      chunk_base_(bytes.count() / static_cast<int64_t>(group)),
      chunk_extra_(bytes.count() % static_cast<int64_t>(group)) {
  ROCESIM_CHECK(group_ >= 2 && ranks_.size() % group_ == 0, "rings of at least two ranks");
}

Bytes RingAllReduce::step_bytes(size_t rank, size_t step) const {
  // Chunk c = (position - step) mod n has floor(S/n) bytes, plus one for the first S mod n
  // chunks. A position is below n and a step below 2n: the residues take a subtraction each.
  const size_t n = group_;
  const size_t at = position(rank);
  const size_t back = step >= n ? step - n : step;
  const size_t chunk = at >= back ? at - back : at + n - back;
  return Bytes(chunk_base_ + (static_cast<int64_t>(chunk) < chunk_extra_ ? 1 : 0));
}

void RingAllReduce::start(engine::Simulation& sim, engine::WorkloadId id) {
  const size_t n = ranks_.size();
  next_.resize(n);
  for (size_t i = 0; i < n; ++i)
    next_[i] = sim.connect(ranks_[i], ranks_[successor(i)], conn_);
  sent_.assign(n, 0);
  received_.assign(n, 0);
  busy_.assign(n, 0);
  ranks_done_ = 0;
  for (size_t i = n; i-- > 0;)
    ready_.push_back(i);
  drain(sim, id);
}

void RingAllReduce::step_done(size_t rank) {
  const size_t succ = successor(rank);
  ++sent_[rank];
  ++received_[succ];
  // A rank is done once it has sent and received all its steps; exactly one of the two
  // counters moves per rank here, so each rank is counted once.
  if (sent_[rank] == steps() && received_[rank] == steps()) ++ranks_done_;
  if (received_[succ] == steps() && sent_[succ] == steps()) ++ranks_done_;
  ready_.push_back(succ);
  ready_.push_back(rank);
}

void RingAllReduce::drain(engine::Simulation& sim, engine::WorkloadId id) {
  while (!ready_.empty()) {
    if (ranks_done_ == ranks_.size()) {
      ready_.clear();
      sim.finish(id);
      return;
    }
    const size_t rank = ready_.back();
    ready_.pop_back();
    const uint32_t k = sent_[rank];
    // Step 0 needs no input; step k needs the predecessor's step k-1.
    if (busy_[rank] || k >= steps() || (k > 0 && received_[rank] < k)) continue;
    const Bytes b = step_bytes(rank, k);
    if (b.count() == 0) {
      step_done(rank);  // S < n: an empty chunk costs nothing
      continue;
    }
    busy_[rank] = 1;
    sim.transfer(id, next_[rank], b, rank);
  }
  if (ranks_done_ == ranks_.size()) sim.finish(id);
}

void RingAllReduce::on_transfer_done(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) {
  const auto rank = static_cast<size_t>(tag);
  busy_[rank] = 0;
  step_done(rank);
  drain(sim, id);
}

void RingAllReduce::figures(engine::WorkloadFigures& out, Time duration) const {
  // nccl-tests' definitions and units: algbw = S / t in GB/s (1e9 bytes/s), busbw = algbw *
  // 2(n-1)/n. With several groups, t is the time until the last group has finished.
  if (duration <= Time{}) return;
  const double n = static_cast<double>(group_);
  const double algbw = bytes_.as_double() / duration.in_seconds() * 1e-9;
  out.add("ranks_per_group", n);
  out.add("groups", static_cast<double>(ranks_.size() / group_));
  out.add("algbw_GBps", algbw);
  out.add("busbw_GBps", algbw * 2 * (n - 1) / n);
}

std::unique_ptr<engine::Workload> make_ring_allreduce(const engine::WorkloadInput& in) {
  std::vector<fabric::NodeId> ranks = in.ranks.select(in.spec.value("ranks"));
  if (ranks.size() < 2) {
    in.spec.fail("ranks", "at least 2 GPUs",
                 fmt::format("{} GPU{}", ranks.size(), ranks.size() == 1 ? "" : "s"));
  }
  const size_t group = engine::arrange_groups(in.spec, ranks);
  return std::make_unique<RingAllReduce>(in.name, std::move(ranks), group, in.spec.bytes("bytes"),
                                         engine::read_connection_spec(in.spec));
}

}  // namespace rocesim::collectives
