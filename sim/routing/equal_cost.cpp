#include "sim/routing/equal_cost.hpp"

#include <fmt/format.h>

namespace rocesim::routing {

EqualCostTable::EqualCostTable(const fabric::Fabric& f)
    : f_(f), switch_index_(f.node_count(), fabric::kNone) {
  for (fabric::NodeId n = 0; n < f.node_count(); ++n) {
    const fabric::Node& node = f.node(n);
    if (node.kind == fabric::NodeKind::Switch && node.role != fabric::SwitchRole::NvSwitch) {
      switch_index_[n] = static_cast<uint32_t>(switches_.size());
      switches_.push_back(n);
    }
  }
}

const std::vector<uint16_t>& EqualCostTable::distances(fabric::NodeId target) {
  auto it = dist_.find(target);
  if (it != dist_.end()) return it->second;
  ROCESIM_CHECK(is_fabric_switch(target), "equal-cost target must be a fabric switch");
  std::vector<uint16_t> d(switches_.size(), 0xFFFF);
  std::vector<uint32_t> queue;
  queue.reserve(switches_.size());
  d[switch_index_[target]] = 0;
  queue.push_back(switch_index_[target]);
  for (size_t head = 0; head < queue.size(); ++head) {
    const fabric::NodeId v = switches_[queue[head]];
    const uint16_t next = static_cast<uint16_t>(d[queue[head]] + 1);
    for (fabric::LinkId l : f_.in_links(v)) {
      const uint32_t u = switch_index_[f_.link(l).src];
      if (u != fabric::kNone && d[u] == 0xFFFF) {
        d[u] = next;
        queue.push_back(u);
      }
    }
  }
  return dist_.emplace(target, std::move(d)).first->second;
}

uint16_t EqualCostTable::distance(fabric::NodeId at, fabric::NodeId target) {
  return distances(target)[switch_index_[at]];
}

std::span<const fabric::LinkId> EqualCostTable::next_hops(fabric::NodeId at,
                                                          fabric::NodeId target) {
  const uint64_t key = (static_cast<uint64_t>(at) << 32) | target;
  auto it = groups_.find(key);
  if (it == groups_.end()) {
    const std::vector<uint16_t>& d = distances(target);
    const uint16_t here = d[switch_index_[at]];
    ROCESIM_CHECK(here != 0xFFFF,
                  fmt::format("no path from {} to {}", f_.node(at).name, f_.node(target).name));
    const auto begin = static_cast<uint32_t>(members_.size());
    if (here > 0) {
      for (fabric::LinkId l : f_.out_links(at)) {
        const uint32_t n = switch_index_[f_.link(l).dst];
        if (n != fabric::kNone && d[n] + 1 == here) members_.push_back(l);
      }
    }
    it = groups_.emplace(key, std::make_pair(begin, static_cast<uint32_t>(members_.size()))).first;
  }
  return {members_.data() + it->second.first, members_.data() + it->second.second};
}

}  // namespace rocesim::routing
