// Equal-cost next hops through the switch fabric, shared by every routing scheme.
//
// For a target switch t, a breadth-first search over the reverse graph of fabric switches
// (NVSwitches excluded: they are inside servers) gives every switch's hop distance to t; the
// equal-cost next hops of switch s toward t are its links to switches one hop closer, in port
// order (the order of the members of an ECMP group). Distances are computed lazily per target
// and kept; targets are the first-hop switches of destination NICs and path waypoints, so the
// memory is (targets x switches) small integers, not (NICs x nodes).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/fabric/fabric.hpp"

namespace rocesim::routing {

class EqualCostTable {
 public:
  explicit EqualCostTable(const fabric::Fabric& f);

  /// Links out of switch `at` on shortest paths to switch `target`, in port order. Empty when
  /// at == target; throws InternalError if `target` cannot be reached.
  std::span<const fabric::LinkId> next_hops(fabric::NodeId at, fabric::NodeId target);
  /// Hop distance between fabric switches (0xFFFF if unreachable).
  uint16_t distance(fabric::NodeId at, fabric::NodeId target);
  bool is_fabric_switch(fabric::NodeId n) const { return switch_index_[n] != fabric::kNone; }

 private:
  const std::vector<uint16_t>& distances(fabric::NodeId target);

  const fabric::Fabric& f_;
  std::vector<uint32_t> switch_index_;  // node -> dense index among fabric switches
  std::vector<fabric::NodeId> switches_;
  std::unordered_map<fabric::NodeId, std::vector<uint16_t>> dist_;
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> groups_;  // (at,target) -> range
  std::vector<fabric::LinkId> members_;
};

}  // namespace rocesim::routing
