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

constexpr Param kMaxMinParams[] = {kModelParam};
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
  return std::make_unique<MaxMinNetwork>(f, options.threads);
}

MaxMinNetwork::MaxMinNetwork(const fabric::Fabric& f, int threads)
    : fabric_(f), solver_(capacities(f)) {
  solver_.set_threads(threads);
}

FlowHandle MaxMinNetwork::start(const FlowSpec& spec, Time now) {
  ROCESIM_CHECK(spec.bytes > 0, "a flow moves at least one byte");
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

void MaxMinNetwork::EndQueue::push(int64_t end_ps, Pending p) {
  if (end_ps != open_end_) {
    // A new time: the end alone on the heap.
    times_.push({end_ps, p.flow, p.version});
    open_end_ = end_ps;
    open_group_ = kNoGroup;
    return;
  }
  if (open_group_ == kNoGroup) {
    // A second end at the same time: the ends from here on share a group.
    if (free_.empty()) {
      open_group_ = static_cast<uint32_t>(groups_.size());
      groups_.emplace_back();
    } else {
      open_group_ = free_.back();
      free_.pop_back();
    }
    times_.push({end_ps, kGroup, open_group_});
  }
  groups_[open_group_].push_back(p);
}

void MaxMinNetwork::EndQueue::pop_top() {
  const Key& k = times_.top();
  // The next push at this time starts afresh (several entries of one time are merged anyway).
  if (k.end_ps == open_end_) open_end_ = -1;
  if (k.flow == kGroup) {
    groups_[k.value].clear();
    free_.push_back(k.value);
  }
  times_.pop();
}

int64_t MaxMinNetwork::EndQueue::next(const std::vector<FlowState>& state) {
  const auto current = [&](const Pending& p) {
    return state[p.flow].live && state[p.flow].version == p.version;
  };
  while (!times_.empty()) {
    const Key& k = times_.top();
    if (k.flow != kGroup) {
      if (current({k.flow, k.value})) return k.end_ps;
    } else {
      std::vector<Pending>& g = groups_[k.value];
      while (!g.empty() && !current(g.back()))
        g.pop_back();
      if (!g.empty()) return k.end_ps;
    }
    pop_top();
  }
  return std::numeric_limits<int64_t>::max();
}

void MaxMinNetwork::EndQueue::take(int64_t t, const std::vector<FlowState>& state,
                                   std::vector<Pending>& out) {
  const size_t first = out.size();
  bool ordered = true;
  const auto add = [&](const Pending& p) {
    if (!state[p.flow].live || state[p.flow].version != p.version) return;  // stale
    ordered = ordered && (out.size() == first || out.back().flow < p.flow);
    out.push_back(p);
  };
  while (!times_.empty() && times_.top().end_ps == t) {
    const Key& k = times_.top();
    if (k.flow != kGroup) {
      add({k.flow, k.value});
    } else {
      for (const Pending& p : groups_[k.value])
        add(p);
    }
    pop_top();
  }
  if (!ordered) {
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
              [](const Pending& a, const Pending& b) { return a.flow < b.flow; });
  }
}

Time MaxMinNetwork::next_event() {
  const int64_t end = ends_.next(state_);
  return end == std::numeric_limits<int64_t>::max() ? Time::infinity() : Time::ps(end);
}

void MaxMinNetwork::advance(Time t, std::vector<Completion>& finished) {
  finished.clear();
  const int64_t now = t.count_ps();
  ROCESIM_CHECK(ends_.next(state_) >= now, "the network was advanced past a flow's end");
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
}

void MaxMinNetwork::commit(Time now) {
  solver_.solve(changed_);
  for (const MaxMinSolver::FlowSlot f : changed_) {
    FlowState& s = state_[f];
    s.remaining = std::max(0.0, s.remaining - s.rate * (now - s.since).in_seconds());
    s.since = now;
    s.rate = solver_.rate(f);
    ++s.version;
    if (s.rate <= 0) continue;  // on a link that is down: no end until it moves or comes back
    const Time end = now + transfer_time(s.remaining, s.rate);
    ends_.push(end.count_ps(), {f, s.version});
  }
}

double MaxMinNetwork::sent(FlowHandle f, Time now) const {
  const FlowState& s = state_[f];
  const double left = std::max(0.0, s.remaining - s.rate * (now - s.since).in_seconds());
  return std::max(0.0, s.bytes - left);
}

void MaxMinNetwork::set_capacity(fabric::LinkId l, double bytes_per_second, Time) {
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
