#include "sim/network/maxmin_network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rocesim::network {
namespace {

std::vector<double> capacities(const fabric::Fabric& f) {
  std::vector<double> c;
  c.reserve(f.link_count());
  for (const fabric::Link& l : f.links())
    c.push_back(l.capacity.bytes_per_second());
  return c;
}

constexpr Param kMaxMinParams[] = {
    kModelParam,
    {.key = "reshare_delay",
     .type = ParamType::Time,
     .fallback = "0s",
     .help = "how long bandwidth freed by ending flows may stay unused before the other flows' "
             "rates are recomputed (0: at once, exact max-min); a flow that starts, moves or a "
             "link that changes recomputes them at once. Trades accuracy for speed where many "
             "flows end one by one on shared links (an AlltoAllv); docs/models/maxmin.md",
     .check = Check::NonNegative},
};
const ParamTable kMaxMinTable{
    "network (model: maxmin)",
    "How flows share the links. `maxmin` (the default): every link is an ideal pipe shared "
    "max-min fairly between the flows that cross it; no queues, no pauses, no congestion "
    "control (docs/models/maxmin.md).",
    kMaxMinParams};

}  // namespace

const ParamTable& maxmin_table() {
  return kMaxMinTable;
}

std::unique_ptr<NetworkModel> make_maxmin(const ParamReader& section, const fabric::Fabric& f,
                                          const ModelOptions& options) {
  (void)section.choice("model");
  return std::make_unique<MaxMinNetwork>(f, options.threads, section.time("reshare_delay"));
}

MaxMinNetwork::MaxMinNetwork(const fabric::Fabric& f, int threads, Time reshare_delay)
    : fabric_(f), solver_(capacities(f)), reshare_delay_(reshare_delay) {
  solver_.set_threads(threads);
}

FlowHandle MaxMinNetwork::start(const FlowSpec& spec, Time now) {
  ROCESIM_CHECK(spec.bytes > 0, "a flow moves at least one byte");
  must_solve_ = true;
  FlowHandle f = 0;
  if (!spec.merged_links.empty()) {
    f = solver_.add(spec.merged_links, spec.rate_cap, spec.merged_weights);
  } else {
    merge_routes(fabric_, spec, merge_scratch_, links_, weights_);
    f = solver_.add(links_, spec.rate_cap, weights_);
  }
  if (f >= state_.size()) state_.resize(f + 1);
  FlowState& s = state_[f];
  s.remaining = spec.bytes;
  s.rate = 0;
  s.since = now;
  s.cap = spec.rate_cap;
  s.reduce = spec.reduce_in_switches;
  s.bytes = spec.bytes;
  ++s.version;
  s.live = true;
  return f;
}

void MaxMinNetwork::EndQueue::Lane::push(const Entry& e) {
  if (count == slots.size()) {
    std::vector<Entry> bigger(2 * slots.size());
    for (size_t i = 0; i < count; ++i)
      bigger[i] = slots[(head + i) & (slots.size() - 1)];
    slots.swap(bigger);
    head = 0;
  }
  slots[(head + count++) & (slots.size() - 1)] = e;
}

void MaxMinNetwork::EndQueue::push(int64_t now_ps, int64_t end_ps, Pending p) {
  const int64_t duration = end_ps - now_ps;
  if (lanes_[last_].duration == duration) {  // most often the lane of the push before
    lanes_[last_].push({end_ps, p});
    return;
  }
  Lane* free = nullptr;
  for (Lane& l : lanes_) {
    if (l.duration == duration) {
      l.push({end_ps, p});
      last_ = static_cast<size_t>(&l - lanes_.data());
      return;
    }
    if (free == nullptr && l.count == 0) free = &l;
  }
  if (free != nullptr) {
    free->duration = duration;
    free->push({end_ps, p});
    last_ = static_cast<size_t>(free - lanes_.data());
  } else {
    heap_set({end_ps, p});
  }
}

void MaxMinNetwork::EndQueue::heap_set(const Entry& e) {
  if (e.p.flow >= heap_pos_.size()) heap_pos_.resize(e.p.flow + 1, kNotInHeap);
  const uint32_t i = heap_pos_[e.p.flow];
  if (i == kNotInHeap) {
    heap_.push_back(e);
    heap_pos_[e.p.flow] = static_cast<uint32_t>(heap_.size() - 1);
    sift_up(heap_.size() - 1);
  } else if (e < heap_[i]) {
    heap_[i] = e;
    sift_up(i);
  } else {
    heap_[i] = e;
    sift_down(i);
  }
}

void MaxMinNetwork::EndQueue::heap_pop() {
  heap_pos_[heap_.front().p.flow] = kNotInHeap;
  const Entry last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) {
    place(0, last);
    sift_down(0);
  }
}

void MaxMinNetwork::EndQueue::sift_up(size_t i) {
  const Entry e = heap_[i];
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!(e < heap_[parent])) break;
    place(i, heap_[parent]);
    i = parent;
  }
  place(i, e);
}

void MaxMinNetwork::EndQueue::sift_down(size_t i) {
  const Entry e = heap_[i];
  const size_t n = heap_.size();
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && heap_[child + 1] < heap_[child]) ++child;
    if (!(heap_[child] < e)) break;
    place(i, heap_[child]);
    i = child;
  }
  place(i, e);
}

int64_t MaxMinNetwork::EndQueue::next(const std::vector<FlowState>& state) {
  int64_t best = std::numeric_limits<int64_t>::max();
  for (Lane& l : lanes_) {
    while (l.count > 0 && !current(l.front().p, state))
      l.pop();
    if (l.count > 0) best = std::min(best, l.front().end_ps);
  }
  while (!heap_.empty() && !current(heap_.front().p, state))
    heap_pop();
  if (!heap_.empty()) best = std::min(best, heap_.front().end_ps);
  return best;
}

void MaxMinNetwork::EndQueue::take(int64_t t, const std::vector<FlowState>& state,
                                   std::vector<Pending>& out) {
  const size_t first = out.size();
  bool ordered = true;
  const auto add = [&](const Pending& p) {
    if (!current(p, state)) return;  // stale
    ordered = ordered && (out.size() == first || out.back().flow < p.flow);
    out.push_back(p);
  };
  // Ends before `t` can only be stale: the network is never advanced past a current end.
  const auto due = [&](const Entry& e) {
    ROCESIM_CHECK(e.end_ps >= t || !current(e.p, state),
                  "the network was advanced past a flow's end");
    return e.end_ps <= t;
  };
  for (Lane& l : lanes_) {
    while (l.count > 0 && due(l.front())) {
      add(l.front().p);
      l.pop();
    }
  }
  while (!heap_.empty() && due(heap_.front())) {
    add(heap_.front().p);
    heap_pop();
  }
  if (!ordered) {
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
              [](const Pending& a, const Pending& b) { return a.flow < b.flow; });
  }
}

Time MaxMinNetwork::next_event() {
  const int64_t end = ends_.next(state_);
  const Time t = end == std::numeric_limits<int64_t>::max() ? Time::infinity() : Time::ps(end);
  return std::min(t, reshare_at_);
}

void MaxMinNetwork::advance(Time t, std::vector<Completion>& finished) {
  finished.clear();
  const int64_t now = t.count_ps();
  // The flows that end now, in flow order (the order of their callbacks and of their removal
  // from the solver, whatever order their groups were pushed in).
  due_.clear();
  ends_.take(now, state_, due_);
  for (const Pending& p : due_) {
    FlowState& s = state_[p.flow];
    s.live = false;
    s.remaining = 0;
    solver_.remove(p.flow);
    finished.push_back({p.flow, Time::zero()});
  }
  ended_ = ended_ || !due_.empty();
}

void MaxMinNetwork::commit(Time now) {
  // Flows that only ended leave the others' rates as they are (still feasible: nothing was
  // added) until the delay since the first of them has passed.
  if (ended_ && !must_solve_ && reshare_delay_ > Time::zero() && solver_.active_flows() > 0) {
    if (reshare_at_.is_infinite()) reshare_at_ = now + reshare_delay_;
    if (now < reshare_at_) return;
  }
  reshare_at_ = Time::infinity();
  ended_ = must_solve_ = false;
  solver_.solve(changed_);
  for (const MaxMinSolver::FlowSlot f : changed_) {
    FlowState& s = state_[f];
    s.remaining = std::max(0.0, s.remaining - s.rate * (now - s.since).in_seconds());
    s.since = now;
    s.rate = solver_.rate(f);
    ++s.version;
    if (s.rate <= 0) continue;  // on a link that is down: no end until it moves or comes back
    const Time end = now + transfer_time(s.remaining, s.rate, now);
    ends_.push(now.count_ps(), end.count_ps(), {f, s.version});
  }
}

double MaxMinNetwork::sent(FlowHandle f, Time now) const {
  const FlowState& s = state_[f];
  const double left = std::max(0.0, s.remaining - s.rate * (now - s.since).in_seconds());
  return std::max(0.0, s.bytes - left);
}

void MaxMinNetwork::set_capacity(fabric::LinkId l, double bytes_per_second, Time) {
  must_solve_ = true;
  solver_.set_capacity(l, bytes_per_second);
}

FlowHandle MaxMinNetwork::reroute(FlowHandle f, std::span<const Route> routes, Time now) {
  FlowState& s = state_[f];
  ROCESIM_CHECK(s.live, "rerouting a flow that is not running");
  FlowSpec spec;
  spec.routes = routes;
  // Nothing is in flight in this model: what is left is what the sender has not sent. A flow
  // due now has already been reported by advance().
  spec.bytes = std::max(s.remaining - s.rate * (now - s.since).in_seconds(), 1e-9);
  spec.rate_cap = s.cap;
  spec.reduce_in_switches = s.reduce;
  s.live = false;
  ++s.version;
  solver_.remove(f);
  return start(spec, now);
}

}  // namespace rocesim::network
