#include "sim/routing/adaptive.hpp"

#include <algorithm>

namespace rocesim::routing {

AdaptiveRouter::AdaptiveRouter(const fabric::Fabric& f, const AdaptiveConfig& config)
    : walker_(f), hash_(f, config.ecmp), config_(config), groups_(64) {}

double AdaptiveRouter::spare(fabric::LinkId l) const {
  const double nominal = walker_.fabric().link(l).capacity.bytes_per_second();
  const double cap = view_ != nullptr ? view_->capacity(l) : nominal;
  if (cap <= 0) return 0;
  const double load = view_ != nullptr ? view_->load(l) : 0;
  return std::max(cap - load, config_.min_spare * cap);
}

void AdaptiveRouter::explore(const RouteRequest& req, std::vector<uint32_t>& prefix, double share,
                             uint64_t branches, Spread& out) {
  // Walk with the prefix's choices; at the first choice beyond it, copy the group (the
  // equal-cost table may grow, and move its storage, on later walks), into a buffer per depth.
  const size_t level = prefix.size();
  ROCESIM_CHECK(level < groups_.size(), "a path with fewer choices than the buffers");
  std::vector<fabric::LinkId>& group = groups_[level];  // groups_ never grows during a spread
  group.clear();
  size_t depth = 0;
  const bool ok =
      walker_.walk(req, scratch_, [&](fabric::NodeId at, std::span<const fabric::LinkId> hops) {
        const auto n = static_cast<uint32_t>(hops.size());
        if (depth < prefix.size()) return prefix[depth++] % n;
        if (depth++ == level) group.assign(hops.begin(), hops.end());
        return hash_.choose(at, req.key, n);
      });
  if (!ok) return;
  if (group.empty()) {  // a whole path: every choice fixed
    out.links.insert(out.links.end(), scratch_.begin(), scratch_.end());
    out.begin.push_back(static_cast<uint32_t>(out.links.size()));
    out.share.push_back(share);
    return;
  }
  double total = 0, most = -1;
  uint32_t best = 0;
  for (size_t i = 0; i < group.size(); ++i) {
    const double w = spare(group[i]);
    total += w;
    if (w > most) {
      most = w;
      best = static_cast<uint32_t>(i);
    }
  }
  if (total <= 0) return;  // every member down: no path this way
  if (branches * group.size() > config_.max_paths) {
    // Too many paths: the member with the most spare capacity takes it all (first on ties).
    prefix.push_back(best);
    explore(req, prefix, share, branches, out);
    prefix.pop_back();
    return;
  }
  for (size_t i = 0; i < group.size(); ++i) {
    const double w = spare(group[i]);
    if (w <= 0) continue;
    prefix.push_back(static_cast<uint32_t>(i));
    explore(req, prefix, share * w / total, branches * group.size(), out);
    prefix.pop_back();
  }
}

bool AdaptiveRouter::spread(const RouteRequest& req, Spread& out) {
  const fabric::Fabric& f = walker_.fabric();
  // The spread between two leaves depends on the loads of the fabric links only, not on the
  // QP: within one instant every QP between the same two first-hop switches gets the same
  // fabric part, between its own host links (found by one walk).
  const Time now = view_ != nullptr ? view_->now() : Time::zero();
  if (now != cache_time_) {
    cache_.clear();
    cache_time_ = now;
  }
  const fabric::NodeId sender = req.sender();
  const bool fabric_path =
      req.via.empty() && (req.through_nics || f.node(sender).server != f.node(req.dst).server);
  const fabric::NodeId first = fabric_path ? f.first_hop_switch(f.nic_of_gpu(sender, req.port)) : 0;
  const fabric::NodeId last = fabric_path ? f.first_hop_switch(f.nic_of_gpu(req.dst, req.port)) : 0;
  const uint64_t key = (static_cast<uint64_t>(first) << 32) | last;
  if (fabric_path && first != last) {
    const auto hit = cache_.find(key);
    if (hit != cache_.end()) {
      if (!walker_.walk(req, scratch_, [&](fabric::NodeId at, std::span<const fabric::LinkId> h) {
            return hash_.choose(at, req.key, static_cast<uint32_t>(h.size()));
          })) {
        return false;
      }
      // scratch_: host links, fabric links, host links; replace the fabric part.
      size_t a = 0, b = scratch_.size();
      while (a < scratch_.size() && f.link(scratch_[a]).src != first)
        ++a;
      while (b > a && f.link(scratch_[b - 1]).dst != last)
        --b;
      const Spread& seg = hit->second;
      out.clear();
      for (size_t i = 0; i < seg.size(); ++i) {
        out.links.insert(out.links.end(), scratch_.begin(), scratch_.begin() + a);
        const std::span<const fabric::LinkId> p = seg.path(i);
        out.links.insert(out.links.end(), p.begin(), p.end());
        out.links.insert(out.links.end(), scratch_.begin() + b, scratch_.end());
        out.begin.push_back(static_cast<uint32_t>(out.links.size()));
        out.share.push_back(seg.share[i]);
      }
      return true;
    }
  }
  out.clear();
  prefix_.clear();
  explore(req, prefix_, 1.0, 1, out);
  if (out.size() == 0) return false;
  // Shares sum to 1 in exact arithmetic; make it so in floating point too.
  double sum = 0;
  for (const double s : out.share)
    sum += s;
  for (double& s : out.share)
    s /= sum;
  if (fabric_path && first != last) {
    Spread seg;
    for (size_t i = 0; i < out.size(); ++i) {
      const std::span<const fabric::LinkId> p = out.path(i);
      size_t a = 0, b = p.size();
      while (a < p.size() && f.link(p[a]).src != first)
        ++a;
      while (b > a && f.link(p[b - 1]).dst != last)
        --b;
      seg.links.insert(seg.links.end(), p.begin() + a, p.begin() + b);
      seg.begin.push_back(static_cast<uint32_t>(seg.links.size()));
      seg.share.push_back(out.share[i]);
    }
    cache_.emplace(key, std::move(seg));
  }
  return true;
}

bool AdaptiveRouter::route(const RouteRequest& req, std::vector<fabric::LinkId>& out) {
  Spread s;
  if (!spread(req, s)) return false;
  const size_t best =
      static_cast<size_t>(std::max_element(s.share.begin(), s.share.end()) - s.share.begin());
  const std::span<const fabric::LinkId> p = s.path(best);
  out.assign(p.begin(), p.end());
  return true;
}

}  // namespace rocesim::routing
