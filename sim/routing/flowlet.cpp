#include "sim/routing/flowlet.hpp"

#include <limits>

namespace rocesim::routing {

FlowletRouter::FlowletRouter(const fabric::Fabric& f, const FlowletConfig& config)
    : walker_(f),
      hash_(f, config.ecmp),
      config_(config),
      random_(config.ecmp.seed, "routing/flowlet"),
      placed_(f.link_count(), 0.0) {}

uint32_t FlowletRouter::least_loaded(fabric::NodeId at, std::span<const fabric::LinkId> hops,
                                     const fabric::FlowKey& key, double rate) {
  const fabric::Fabric& f = walker_.fabric();
  const Time now = view_ != nullptr ? view_->now() : Time::zero();
  if (now != instant_) {
    for (const fabric::LinkId l : placed_links_)
      placed_[l] = 0;
    placed_links_.clear();
    instant_ = now;
  }
  // From the hash member on, so that equal loads fall to the member ECMP would take.
  const auto n = static_cast<uint32_t>(hops.size());
  const uint32_t start = hash_.choose(at, key, n);
  uint32_t best = start;
  double best_u = std::numeric_limits<double>::infinity();
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t k = (start + i) % n;
    const fabric::LinkId l = hops[k];
    const double cap =
        view_ != nullptr ? view_->capacity(l) : f.link(l).capacity.bytes_per_second();
    if (cap <= 0) continue;  // down, routing not converged yet: carries nothing
    const double u = ((view_ != nullptr ? view_->load(l) : 0.0) + placed_[l]) / cap;
    if (u < best_u * (1 - 1e-12)) {
      best = k;
      best_u = u;
    }
  }
  if (placed_[hops[best]] == 0) placed_links_.push_back(hops[best]);
  placed_[hops[best]] += rate;
  return best;
}

bool FlowletRouter::route(const RouteRequest& req, std::vector<fabric::LinkId>& out) {
  const double rate = walker_.uplink_capacity(walker_.sender_nic(req));
  bool first = true;
  return walker_.walk(req, out, [&](fabric::NodeId at, std::span<const fabric::LinkId> hops) {
    const auto n = static_cast<uint32_t>(hops.size());
    if (!first) return hash_.choose(at, req.key, n);
    first = false;
    if (config_.choice == FlowletChoice::Random) return static_cast<uint32_t>(random_.below(n));
    return least_loaded(at, hops, req.key, rate);
  });
}

}  // namespace rocesim::routing
