#include "sim/routing/adaptive.hpp"

#include <algorithm>
#include <utility>

namespace rocesim::routing {
namespace {

// Shares sum to 1 in exact arithmetic; make it so in floating point too.
void normalize(Spread& s) {
  double sum = 0;
  for (const double x : s.share)
    sum += x;
  for (double& x : s.share)
    x /= sum;
}

// The part of a path from switch `first` to switch `last`: [begin, end) of its links.
std::pair<size_t, size_t> fabric_part(const fabric::Fabric& f, std::span<const fabric::LinkId> p,
                                      fabric::NodeId first, fabric::NodeId last) {
  size_t a = 0, b = p.size();
  while (a < p.size() && f.link(p[a]).src != first)
    ++a;
  while (b > a && f.link(p[b - 1]).dst != last)
    --b;
  return {a, b};
}

}  // namespace

AdaptiveRouter::AdaptiveRouter(const fabric::Fabric& f, const AdaptiveConfig& config)
    : walker_(f), hash_(f, config.ecmp), config_(config) {}

double AdaptiveRouter::spare(fabric::LinkId l) const {
  const double nominal = walker_.fabric().link(l).capacity.bytes_per_second();
  const double cap = view_ != nullptr ? view_->capacity(l) : nominal;
  if (cap <= 0) return 0;
  const double load = view_ != nullptr ? view_->load(l) : 0;
  return std::max(cap - load, config_.min_spare * cap);
}

int32_t AdaptiveRouter::build(std::vector<Choice>& tree, const RouteRequest& req,
                              std::vector<uint32_t>& prefix, fabric::NodeId first,
                              fabric::NodeId last) {
  // The walk with the prefix's choices, recording the group at the first choice beyond them.
  const size_t level = prefix.size();
  Choice node;
  size_t depth = 0;
  const bool ok =
      walker_.walk(req, scratch_, [&](fabric::NodeId at, std::span<const fabric::LinkId> hops) {
        const auto n = static_cast<uint32_t>(hops.size());
        if (depth < prefix.size()) return prefix[depth++] % n;
        if (depth++ == level) node.group.assign(hops.begin(), hops.end());
        return hash_.choose(at, req.key, n);
      });
  if (!ok) return kNoPath;
  if (node.group.empty() && first == fabric::kNone) {
    node.segment = scratch_;  // the whole path
  } else if (node.group.empty()) {
    const auto [a, b] = fabric_part(walker_.fabric(), scratch_, first, last);
    node.segment.assign(scratch_.begin() + a, scratch_.begin() + b);
  } else {
    node.child.assign(node.group.size(), kUnbuilt);
  }
  tree.push_back(std::move(node));
  ++tree_nodes_;
  return static_cast<int32_t>(tree.size() - 1);
}

void AdaptiveRouter::evaluate(std::vector<Choice>& tree, int32_t node, const RouteRequest& req,
                              std::vector<uint32_t>& prefix, double share, uint64_t branches,
                              fabric::NodeId first, fabric::NodeId last, Spread& out) {
  if (node == kNoPath) return;
  if (tree[node].group.empty()) {
    const std::vector<fabric::LinkId>& s = tree[node].segment;
    out.links.insert(out.links.end(), s.begin(), s.end());
    out.begin.push_back(static_cast<uint32_t>(out.links.size()));
    out.share.push_back(share);
    return;
  }
  // Member i's node, the prefix ending in i: built the first time it is taken (`tree` may
  // grow, so the node is held by its index).
  auto child = [&](uint32_t i) {
    if (tree[node].child[i] == kUnbuilt) {
      const int32_t c = build(tree, req, prefix, first, last);
      tree[node].child[i] = c;
    }
    return tree[node].child[i];
  };
  // The members' spare capacities, on a stack that the levels below leave as they found it.
  const size_t members = tree[node].group.size();
  const size_t base = spares_.size();
  double total = 0, most = -1;
  uint32_t best = 0;
  for (size_t i = 0; i < members; ++i) {
    const double w = spare(tree[node].group[i]);
    spares_.push_back(w);
    total += w;
    if (w > most) {
      most = w;
      best = static_cast<uint32_t>(i);
    }
  }
  if (total <= 0) {  // every member down: no path this way
    spares_.resize(base);
    return;
  }
  if (branches * members > config_.max_paths) {
    // Too many paths: the member with the most spare capacity takes it all (first on ties).
    prefix.push_back(best);
    evaluate(tree, child(best), req, prefix, share, branches, first, last, out);
    prefix.pop_back();
    spares_.resize(base);
    return;
  }
  for (size_t i = 0; i < members; ++i) {
    const double w = spares_[base + i];
    if (w <= 0) continue;
    const auto m = static_cast<uint32_t>(i);
    prefix.push_back(m);
    evaluate(tree, child(m), req, prefix, share * w / total, branches * members, first, last, out);
    prefix.pop_back();
  }
  spares_.resize(base);
}

AdaptiveRouter::Pair* AdaptiveRouter::pair_for(const RouteRequest& req) {
  // The spread between two leaves depends on the loads of the fabric links only, not on the
  // QP: within one instant every QP between the same two first-hop switches gets the same
  // fabric part, between its own host links.
  const fabric::Fabric& f = walker_.fabric();
  const fabric::NodeId sender = req.sender();
  const bool fabric_path =
      req.via.empty() && (req.through_nics || f.node(sender).server != f.node(req.dst).server);
  if (!fabric_path) return nullptr;
  const fabric::NodeId first = f.first_hop_switch(f.nic_of_gpu(sender, req.port));
  const fabric::NodeId last = f.first_hop_switch(f.nic_of_gpu(req.dst, req.port));
  if (first == last) return nullptr;
  // About 100 bytes a node: the trees of a large all-to-all are forgotten, and walked again,
  // rather than grow past some 25 MB.
  constexpr size_t kMaxTreeNodes = size_t{1} << 18;
  if (tree_nodes_ > kMaxTreeNodes) {
    pairs_.clear();
    tree_nodes_ = 0;
    ++epoch_;  // the pairs' versions start again
  }
  Pair& pair = pairs_[(static_cast<uint64_t>(first) << 32) | last];
  const Time now = view_ != nullptr ? view_->now() : Time::zero();
  if (pair.at != now) {
    // This instant's fabric part, read off the pair's choice tree; its version moves when it
    // differs from the last one.
    prefix_.clear();
    const int32_t root = pair.tree.empty() ? build(pair.tree, req, prefix_, first, last) : 0;
    next_.clear();
    evaluate(pair.tree, root, req, prefix_, 1.0, 1, first, last, next_);
    normalize(next_);
    if (next_.links != pair.spread.links || next_.begin != pair.spread.begin ||
        next_.share != pair.spread.share) {
      std::swap(next_, pair.spread);
      ++pair.version;
    }
    pair.at = now;
  }
  return &pair;
}

uint64_t AdaptiveRouter::spread_version(const RouteRequest& req) {
  const Pair* pair = pair_for(req);
  if (pair == nullptr || pair->spread.size() == 0) return kNoVersion;
  return static_cast<uint64_t>(epoch_) << 32 | pair->version;
}

bool AdaptiveRouter::spread(const RouteRequest& req, Spread& out) {
  if (Pair* pair = pair_for(req); pair != nullptr) {
    if (pair->spread.size() == 0) return false;
    // Between this QP's own host links.
    if (!walker_.ends(req, head_, tail_)) return false;
    const Spread& seg = pair->spread;
    out.clear();
    for (size_t i = 0; i < seg.size(); ++i) {
      out.links.insert(out.links.end(), head_.begin(), head_.end());
      const std::span<const fabric::LinkId> p = seg.path(i);
      out.links.insert(out.links.end(), p.begin(), p.end());
      out.links.insert(out.links.end(), tail_.begin(), tail_.end());
      out.begin.push_back(static_cast<uint32_t>(out.links.size()));
      out.share.push_back(seg.share[i]);
    }
    return true;
  }
  // Inside one leaf, or through given switches: the whole paths, from a tree of this request
  // alone.
  std::vector<Choice>& tree = other_;
  tree.clear();
  out.clear();
  prefix_.clear();
  const int32_t root = build(tree, req, prefix_, fabric::kNone, fabric::kNone);
  evaluate(tree, root, req, prefix_, 1.0, 1, fabric::kNone, fabric::kNone, out);
  tree_nodes_ -= tree.size();  // counted by build(), not kept
  if (out.size() == 0) return false;
  normalize(out);
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
