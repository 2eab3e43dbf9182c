// The `maxmin` network model: fluid flows that share links max-min fairly (maxmin_solver.hpp).
// Rates are piecewise constant between events. Each flow keeps the bytes it had left when its
// rate last changed, so advancing time touches only the flows whose rate changes; the predicted
// end of each flow sits in a heap, and a rate change re-keys it in place.
// The ends of flows that take the same time from their last rate change (the ranks of a
// collective's steps) are kept in a FIFO per duration rather than in the heap.
//
// Bandwidth that ending flows free is re-shared at once (exact max-min), or, with
// `reshare_delay`, at most that long after the first of them ended: flows that only end leave
// the other rates as they were until then, while a start, a reroute or a capacity change
// re-shares at once (docs/models/maxmin.md, "Re-sharing after ends").
//
// Semantics, as in SimGrid's max-min model with zero link latency plus the path latency added
// once (the reference of bench/reference.py): a flow shares bandwidth
// from the instant it starts; its last byte leaves the sender when its bytes are exhausted (the
// end of its bandwidth phase); the engine adds the path's first-byte latency to get the time the
// receiver has it. No headers, no slow start, no store-and-forward.
#pragma once

#include <vector>

#include "sim/core/params.hpp"
#include "sim/network/maxmin_solver.hpp"
#include "sim/network/network_model.hpp"
#include "sim/network/registry.hpp"

namespace rocesim::network {

class MaxMinNetwork final : public NetworkModel {
 public:
  /// `reshare_delay`: how long bandwidth freed by ending flows may wait before it is shared
  /// again (0: at once).
  explicit MaxMinNetwork(const fabric::Fabric& f, int threads = 1,
                         Time reshare_delay = Time::zero());

  std::string_view name() const override { return "maxmin"; }
  FlowHandle start(const FlowSpec& spec, Time now) override;
  Time next_event() override;
  void advance(Time t, std::vector<Completion>& finished) override;
  void commit(Time now) override;
  double rate(FlowHandle f) const override { return state_[f].rate; }
  size_t active_flows() const override { return solver_.active_flows(); }
  double link_load(fabric::LinkId l) const override { return solver_.load(l); }
  double sent(FlowHandle f, Time now) const override;
  void set_capacity(fabric::LinkId l, double bytes_per_second, Time now) override;
  FlowHandle reroute(FlowHandle f, std::span<const Route> routes, Time now) override;

  MaxMinSolver& solver() { return solver_; }

 private:
  struct FlowState {
    double remaining = 0;  // bytes left at `since`
    double rate = 0;       // bytes/s since `since` (0: stalled on a link that is down)
    Time since{};
    double cap = kNoRateCap;
    double bytes = 0;      // at start (or at the reroute that made this state)
    uint32_t version = 0;  // bumps when the predicted end moves
    bool reduce = false;   // FlowSpec::reduce_in_switches
    bool live = false;
  };
  static_assert(sizeof(FlowState) == 48);
  struct Pending {  // a predicted end, current while `version` is the flow's
    FlowHandle flow;
    uint32_t version;
  };
  /// Predicted ends, earliest first. A flow's end is `now + duration`, and many flows share a
  /// duration (the steps of a collective, each rank's flow as long as the last): the ends of one
  /// duration are pushed in time order, since `now` never goes back, so a FIFO per duration (a
  /// lane, as for deliveries) keeps them sorted at O(1) a push and a pop. A few lanes serve the
  /// durations in use; the ends of other durations go to a heap.
  class EndQueue {
   public:
    void push(int64_t now_ps, int64_t end_ps, Pending p);
    /// The earliest time with a current end (dropping stale ones on the way), or INT64_MAX.
    int64_t next(const std::vector<FlowState>& state);
    /// Appends the current ends at time `t` (the earliest current one) to `out`, in flow order,
    /// and drops every end up to `t`.
    void take(int64_t t, const std::vector<FlowState>& state, std::vector<Pending>& out);

   private:
    /// Whether an end is still the flow's (not stale: the flow is live and its rate unchanged).
    static bool current(const Pending& p, const std::vector<FlowState>& state) {
      return state[p.flow].live && state[p.flow].version == p.version;
    }
    struct Entry {
      int64_t end_ps;
      Pending p;
      bool operator<(const Entry& o) const {
        return end_ps < o.end_ps || (end_ps == o.end_ps && p.flow < o.p.flow);
      }
    };
    struct Lane {  // a circular buffer of the ends of one duration, in time order
      int64_t duration = -1;
      std::vector<Entry> slots = std::vector<Entry>(64);
      size_t head = 0, count = 0;
      const Entry& front() const { return slots[head]; }
      void pop() {
        head = (head + 1) & (slots.size() - 1);
        --count;
      }
      void push(const Entry& e);
    };
    static constexpr size_t kLanes = 8;
    std::vector<Lane> lanes_ = std::vector<Lane>(kLanes);
    size_t last_ = 0;  // the lane of the last push
    // The other ends: a binary min-heap on (end, flow) holding at most one entry per flow slot,
    // re-keyed in place when the flow's end moves (a solve that moves every end of a large
    // component would otherwise leave as many stale entries to pop, each at log of a heap
    // grown by them). An entry goes stale only when its flow ends, moves to a lane or its slot
    // is reused, and leaves when it comes to the top.
    static constexpr uint32_t kNotInHeap = ~uint32_t{0};
    std::vector<Entry> heap_;
    std::vector<uint32_t> heap_pos_;  // per flow slot: its entry's index in heap_, or kNotInHeap
    void heap_set(const Entry& e);
    void heap_pop();
    void sift_up(size_t i);
    void sift_down(size_t i);
    void place(size_t i, const Entry& e) {
      heap_[i] = e;
      heap_pos_[e.p.flow] = static_cast<uint32_t>(i);
    }
  };
  const fabric::Fabric& fabric_;
  MaxMinSolver solver_;
  std::vector<FlowState> state_;
  EndQueue ends_;
  std::vector<Pending> due_;  // scratch of advance()
  std::vector<MaxMinSolver::FlowSlot> changed_;
  std::vector<double> merge_scratch_;
  std::vector<fabric::LinkId> links_;
  std::vector<double> weights_;
  Time reshare_delay_;
  Time reshare_at_ = Time::infinity();  // when the bandwidth of flows that ended is re-shared
  bool ended_ = false;                  // flows ended since the last solve
  bool must_solve_ = false;  // a flow started, moved or a capacity changed since the last solve
};

/// The `network` section when `model: maxmin`.
const ParamTable& maxmin_table();
std::unique_ptr<NetworkModel> make_maxmin(const ParamReader& section, const fabric::Fabric& f,
                                          const ModelOptions& options);

}  // namespace rocesim::network
