#include "sim/routing/equal_cost.hpp"

#include <algorithm>

namespace rocesim::routing {

EqualCostTable::EqualCostTable(const fabric::Fabric& f)
    : f_(f), index_(f.node_count(), fabric::kNone) {
  for (fabric::NodeId n = 0; n < f.node_count(); ++n) {
    const fabric::Node& node = f.node(n);
    if (fabric::is_network_switch(node)) {
      index_[n] = static_cast<uint32_t>(switches_.size());
      switches_.push_back(n);
    }
  }
  build();
}

void EqualCostTable::set_view(const LinkView* view) {
  view_ = view;
  reset();
}

void EqualCostTable::reset() {
  by_set_.clear();
  by_target_.clear();
  groups_.clear();
  members_.clear();
  build();
}

void EqualCostTable::build() {
  in_.clear();
  in_begin_.assign(1, 0);
  for (fabric::NodeId s : switches_) {
    for (fabric::LinkId l : f_.in_links(s)) {
      const uint32_t u = index_[f_.link(l).src];
      if (u != fabric::kNone && usable(l)) in_.push_back(u);
    }
    in_begin_.push_back(static_cast<uint32_t>(in_.size()));
  }
}

const std::vector<uint16_t>& EqualCostTable::to_neighbours(fabric::NodeId target) {
  if (const std::vector<uint16_t>* const* cached = by_target_.find(target)) return **cached;
  ROCESIM_CHECK(is_fabric_switch(target), "equal-cost target must be a fabric switch");
  const uint32_t t = index_[target];
  std::vector<uint32_t> set(in_.begin() + in_begin_[t], in_.begin() + in_begin_[t + 1]);
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  auto it = by_set_.find(set);
  if (it == by_set_.end()) {
    // Multi-source breadth-first search on the reverse graph, from the whole set at once.
    std::vector<uint16_t> d(switches_.size(), static_cast<uint16_t>(kUnreachable));
    std::vector<uint32_t> queue(set.begin(), set.end());
    for (uint32_t s : set)
      d[s] = 0;
    for (size_t head = 0; head < queue.size(); ++head) {
      const uint32_t v = queue[head];
      const auto next = static_cast<uint16_t>(d[v] + 1);
      for (uint32_t i = in_begin_[v]; i < in_begin_[v + 1]; ++i) {
        const uint32_t u = in_[i];
        if (d[u] == kUnreachable) {
          d[u] = next;
          queue.push_back(u);
        }
      }
    }
    it = by_set_.emplace(std::move(set), std::move(d)).first;
  }
  by_target_.insert(target, &it->second);
  return it->second;
}

uint32_t EqualCostTable::distance(fabric::NodeId at, fabric::NodeId target) {
  return dist(index_[at], target, to_neighbours(target));
}

uint32_t EqualCostTable::route_length(fabric::NodeId src, fabric::NodeId dst,
                                      std::span<const fabric::NodeId> via) {
  if (f_.node(src).server == f_.node(dst).server && via.empty()) return 2;  // over NVLink
  // GPU -> NIC -> first switch, the switch segments, last switch -> NIC -> GPU.
  uint32_t links = 4;
  fabric::NodeId at = f_.first_hop_switch(f_.nic_of_gpu(src));
  auto segment = [&](fabric::NodeId target) {
    const uint32_t d = distance(at, target);
    if (d == kUnreachable || links == kUnreachable) {
      links = kUnreachable;
    } else {
      links += d;
    }
    at = target;
  };
  for (fabric::NodeId w : via)
    segment(w);
  segment(f_.first_hop_switch(f_.nic_of_gpu(dst)));
  return links;
}

std::span<const fabric::LinkId> EqualCostTable::next_hops(fabric::NodeId at,
                                                          fabric::NodeId target) {
  const uint64_t key = (static_cast<uint64_t>(at) << 32) | target;
  const std::pair<uint32_t, uint32_t>* range = groups_.find(key);
  if (range == nullptr) {
    const std::vector<uint16_t>& d = to_neighbours(target);
    const uint32_t here = dist(index_[at], target, d);
    const auto begin = static_cast<uint32_t>(members_.size());
    if (here == kUnreachable) {
      // No member: the caller finds the target unreachable.
    } else if (here == 1 && f_.in_links(target).size() < f_.out_links(at).size()) {
      // Adjacent: the links between the two, found from the smaller side (a spine has many
      // more ports than the leaf it is heading to). In-links are in link-id order, which is the
      // order of `at`'s ports too.
      for (fabric::LinkId l : f_.in_links(target)) {
        if (f_.link(l).src == at && usable(l)) members_.push_back(l);
      }
    } else if (here > 0) {
      for (fabric::LinkId l : f_.out_links(at)) {
        const uint32_t n = index_[f_.link(l).dst];
        if (n != fabric::kNone && usable(l) && dist(n, target, d) + 1 == here) {
          members_.push_back(l);
        }
      }
    }
    groups_.insert(key, {begin, static_cast<uint32_t>(members_.size())});
    range = groups_.find(key);
  }
  return {members_.data() + range->first, members_.data() + range->second};
}

}  // namespace rocesim::routing
