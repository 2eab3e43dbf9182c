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

constexpr Param kNetworkParams[] = {
    {.key = "model",
     .type = ParamType::Choice,
     .fallback = "maxmin",
     .help = "rate model: maxmin shares links max-min fairly between fluid flows",
     .choices = "maxmin"},
};
const ParamTable kNetworkTable{"network", "How flows share the links.", kNetworkParams};

}  // namespace

const ParamTable& network_table() {
  return kNetworkTable;
}

MaxMinNetwork::MaxMinNetwork(const fabric::Fabric& f, int threads) : solver_(capacities(f)) {
  solver_.set_threads(threads);
}

FlowHandle MaxMinNetwork::start(std::span<const fabric::LinkId> links,
                                std::span<const double> weights, double bytes, Time now,
                                double rate_cap) {
  ROCESIM_CHECK(bytes > 0, "a flow moves at least one byte");
  const FlowHandle f = solver_.add(links, rate_cap, weights);
  if (f >= state_.size()) state_.resize(f + 1);
  FlowState& s = state_[f];
  s.remaining = bytes;
  s.rate = 0;
  s.since = now;
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

void MaxMinNetwork::advance(Time t, std::vector<FlowHandle>& finished) {
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
    finished.push_back(p.flow);
  }
}

void MaxMinNetwork::commit(Time now) {
  solver_.solve(changed_);
  for (const MaxMinSolver::FlowSlot f : changed_) {
    FlowState& s = state_[f];
    s.remaining = std::max(0.0, s.remaining - s.rate * (now - s.since).in_seconds());
    s.since = now;
    s.rate = solver_.rate(f);
    ROCESIM_CHECK(s.rate > 0, "max-min gave a running flow no bandwidth");
    ++s.version;
    const Time end = now + transfer_time(s.remaining, s.rate);
    ends_.push({end.count_ps(), f, s.version});
  }
}

}  // namespace rocesim::network
