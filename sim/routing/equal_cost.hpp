// Equal-cost next hops through the switch fabric, shared by every routing scheme.
//
// The fabric switches (NVSwitches excluded: they are inside servers) form a graph; the
// equal-cost next hops of switch s toward switch t are its links to switches one hop closer to
// t, in port order (the order of the members of an ECMP group).
//
// Distances without a search per target. A shortest path from s != t to t ends with a link
// from one of t's in-neighbours, so  dist(s, t) = 1 + min_{n in N(t)} dist(s, n),  and the right
// side is one multi-source breadth-first search (on the reverse graph) from the set N(t). All
// leaves of a zone share the same spines, so one search serves the whole zone (one per pod in a
// fat-tree); a leaf with a different neighbour set (e.g. after a link failure) simply gets its
// own search.
// Searches, per-target lookups and next-hop groups are computed lazily and kept until reset().
//
// Links that the LinkView says are down are not part of the graph: after a failure the groups
// lose the member (ECMP re-hashes over the others) and distances may grow; a switch cut off from
// a target has no next hop toward it.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "sim/core/flat_map.hpp"
#include "sim/core/rng.hpp"
#include "sim/fabric/fabric.hpp"
#include "sim/routing/link_view.hpp"

namespace rocesim::routing {

class EqualCostTable {
 public:
  explicit EqualCostTable(const fabric::Fabric& f);

  /// Leaves out the links `view` says are down (null: every link is up); resets the table.
  void set_view(const LinkView* view);
  /// Forgets every search and group: the view's links changed state.
  void reset();

  /// Links out of switch `at` on shortest paths to switch `target`, in port order. Empty when
  /// at == target or when `target` cannot be reached from `at`.
  std::span<const fabric::LinkId> next_hops(fabric::NodeId at, fabric::NodeId target);
  /// Hop distance between fabric switches (kUnreachable if there is no path).
  uint32_t distance(fabric::NodeId at, fabric::NodeId target);
  bool is_fabric_switch(fabric::NodeId n) const { return index_[n] != fabric::kNone; }
  /// Links on any shortest route from GPU `src` to GPU `dst` through the waypoints `via` (every
  /// equal-cost choice has the same length); kUnreachable if a segment has no path.
  uint32_t route_length(fabric::NodeId src, fabric::NodeId dst,
                        std::span<const fabric::NodeId> via);

  static constexpr uint32_t kUnreachable = 0xFFFF;

 private:
  /// Distances from every switch to the nearest member of `target`'s in-neighbour set.
  const std::vector<uint16_t>& to_neighbours(fabric::NodeId target);
  void build();
  bool usable(fabric::LinkId l) const { return view_ == nullptr || view_->up(l); }
  uint32_t dist(uint32_t from_index, fabric::NodeId target, const std::vector<uint16_t>& d) const {
    if (switches_[from_index] == target) return 0;
    return d[from_index] == kUnreachable ? kUnreachable : 1u + d[from_index];
  }

  const fabric::Fabric& f_;
  const LinkView* view_ = nullptr;
  std::vector<uint32_t> index_;  // node -> dense index among fabric switches
  std::vector<fabric::NodeId> switches_;
  std::vector<uint32_t> in_begin_;  // reverse switch graph: in-neighbours (dense indices)
  std::vector<uint32_t> in_;
  std::map<std::vector<uint32_t>, std::vector<uint16_t>> by_set_;
  /// The open-addressing tables index by a hash's low bits, which for (at, target) pairs would
  /// be the target's alone: the key's bits are mixed first.
  struct Mix64 {
    size_t operator()(uint64_t k) const { return static_cast<size_t>(mix64(k)); }
  };
  FlatMap<uint64_t, const std::vector<uint16_t>*, Mix64> by_target_;
  FlatMap<uint64_t, std::pair<uint32_t, uint32_t>, Mix64> groups_;  // (at, target) -> range
  std::vector<fabric::LinkId> members_;
};

}  // namespace rocesim::routing
