#include "sim/network/maxmin_network.hpp"

#include <cmath>

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

Time MaxMinNetwork::next_event() {
  while (!ends_.empty()) {
    const Pending& p = ends_.top();
    const FlowState& s = state_[p.flow];
    if (s.live && s.version == p.version) return Time::ps(p.end_ps);
    ends_.pop();
  }
  return Time::infinity();
}

void MaxMinNetwork::advance(Time t, std::vector<Completion>& finished) {
  finished.clear();
  while (!ends_.empty() && ends_.top().end_ps <= t.count_ps()) {
    const Pending p = ends_.top();
    ends_.pop();
    FlowState& s = state_[p.flow];
    if (!s.live || s.version != p.version) continue;
    ROCESIM_CHECK(p.end_ps == t.count_ps(), "the network was advanced past a flow's end");
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
    ends_.push({end.count_ps(), f, s.version});
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
