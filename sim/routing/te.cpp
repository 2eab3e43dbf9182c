#include "sim/routing/te.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace rocesim::routing {

TeRouter::TeRouter(const fabric::Fabric& f, const TeConfig& config)
    : walker_(f), hash_(f, config.ecmp), config_(config), placed_(f.link_count(), 0.0) {}

TeRouter::Key TeRouter::key_of(const RouteRequest& req) {
  return {req.src,        req.dst,          req.relay,      req.key.src_ip,
          req.key.dst_ip, req.key.src_port, req.key.dst_qpn};
}

RouteRequest TeRouter::request(const Demand& d) const {
  RouteRequest r;
  r.src = d.src;
  r.dst = d.dst;
  r.relay = d.relay;
  r.port = d.port;
  r.key = d.key;
  return r;
}

bool TeRouter::walk(const RouteRequest& req, uint32_t member, std::vector<fabric::LinkId>& out) {
  bool first = true;
  return walker_.walk(req, out, [&](fabric::NodeId at, std::span<const fabric::LinkId> hops) {
    const auto n = static_cast<uint32_t>(hops.size());
    if (first && member != kNoMember) {
      first = false;
      return member % n;
    }
    first = false;
    return hash_.choose(at, req.key, n);
  });
}

void TeRouter::place(Demand& d, double rate) {
  const fabric::Fabric& f = walker_.fabric();
  const RouteRequest req = request(d);
  // The ECMP walk tells the first group with a choice: its size and the hash member.
  uint32_t members = 0, start = 0;
  if (!walker_.walk(req, scratch_, [&](fabric::NodeId at, std::span<const fabric::LinkId> hops) {
        const uint32_t c = hash_.choose(at, req.key, static_cast<uint32_t>(hops.size()));
        if (members == 0) {
          members = static_cast<uint32_t>(hops.size());
          start = c;
        }
        return c;
      })) {
    d.member = kNoMember;  // no path now: the fallback will say so
    return;
  }
  d.member = kNoMember;  // nothing to engineer (same leaf, or one uplink)
  if (members > 1) {
    // The widest residual bottleneck, from the hash member on: ties fall to ECMP's choice.
    double best = -std::numeric_limits<double>::infinity();
    for (uint32_t i = 0; i < members; ++i) {
      const uint32_t m = (start + i) % members;
      if (!walk(req, m, scratch_)) continue;
      double residual = std::numeric_limits<double>::infinity();
      for (const fabric::LinkId l : scratch_) {
        const double cap =
            view_ != nullptr ? view_->capacity(l) : f.link(l).capacity.bytes_per_second();
        residual = std::min(residual, cap - placed_[l]);
      }
      if (d.member == kNoMember || residual > best + 1e-6) {
        best = residual;
        d.member = m;
      }
    }
  }
  if (walk(req, d.member, scratch_)) {
    for (const fabric::LinkId l : scratch_)
      placed_[l] += rate;
  }
}

void TeRouter::recompute() {
  std::fill(placed_.begin(), placed_.end(), 0.0);
  // Demands: the NIC's rate shared among its QPs; larger first, then in order of first ask.
  std::vector<uint32_t> order(demands_.size());
  std::iota(order.begin(), order.end(), 0u);
  auto rate = [&](const Demand& d) { return walker_.uplink_capacity(d.nic) / qps_of_nic_[d.nic]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return rate(demands_[a]) > rate(demands_[b]); });
  for (const uint32_t i : order)
    place(demands_[i], rate(demands_[i]));
}

bool TeRouter::route(const RouteRequest& req, std::vector<fabric::LinkId>& out) {
  if (!req.via.empty()) return walk(req, kNoMember, out);  // waypoints: as written
  const Key k = key_of(req);
  auto it = index_.find(k);
  if (it == index_.end()) {
    Demand d{req.src, req.dst, req.relay, req.port, req.key, walker_.sender_nic(req)};
    ++qps_of_nic_[d.nic];
    it = index_.emplace(k, static_cast<uint32_t>(demands_.size())).first;
    demands_.push_back(d);
    if (config_.period == Time::zero()) {
      Demand& nd = demands_.back();
      place(nd, walker_.uplink_capacity(nd.nic) / qps_of_nic_[nd.nic]);
    }
  }
  const Demand& d = demands_[it->second];
  // The programmed path, unless a link of it is down (then ECMP until the next computation).
  if (d.member != kNoMember && walk(req, d.member, out)) {
    const bool up = std::all_of(out.begin(), out.end(),
                                [&](fabric::LinkId l) { return view_ == nullptr || view_->up(l); });
    if (up) return true;
  }
  return walk(req, kNoMember, out);
}

}  // namespace rocesim::routing
