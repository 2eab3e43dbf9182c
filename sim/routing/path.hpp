// Interned paths. A path is the ordered list of directed links a flow crosses, from the sending
// GPU to the receiving GPU, with its first-byte latency (propagation on every link plus the
// forwarding latency of every switch on the way). Flows of one QP share one interned path.
//
// A weighted path is the union of several routes used together, e.g. every edge of an NCCL ring
// channel moving the same data in lockstep: each link carries a weight, the bytes it moves per
// byte of the whole (several edges on one link, or one QP of several sharing an edge's bytes).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/core/units.hpp"
#include "sim/fabric/fabric.hpp"

namespace rocesim::routing {

using PathId = uint32_t;

class PathTable {
 public:
  PathId add(const fabric::Fabric& f, std::span<const fabric::LinkId> links);
  /// A weighted path (no link twice) with the latency its user accounts for.
  PathId add_weighted(std::span<const fabric::LinkId> links, std::span<const double> weights,
                      Time latency);
  /// The weighted path with these links, weights and latency: the one added before if there is
  /// one (operations repeated on the same connections use the same unions: the table does not
  /// grow with the number of operations), otherwise a new one.
  PathId intern_weighted(std::span<const fabric::LinkId> links, std::span<const double> weights,
                         Time latency);
  std::span<const fabric::LinkId> links(PathId p) const {
    return {links_.data() + begin_[p], links_.data() + begin_[p + 1]};
  }
  /// Per-link weights of a weighted path; empty for a plain path (all weights 1).
  std::span<const double> weights(PathId p) const {
    if (weight_begin_[p] == kPlain) return {};
    return {weights_.data() + weight_begin_[p], links(p).size()};
  }
  Time latency(PathId p) const { return latency_[p]; }
  size_t size() const { return latency_.size(); }
  size_t max_hops() const { return max_hops_; }

 private:
  std::vector<fabric::LinkId> links_;
  std::vector<uint32_t> begin_{0};
  std::vector<Time> latency_;
  static constexpr uint32_t kPlain = static_cast<uint32_t>(-1);
  std::vector<uint32_t> weight_begin_;  // kPlain or the start of the path's weights
  std::vector<double> weights_;
  size_t max_hops_ = 0;
  std::unordered_multimap<uint64_t, PathId> interned_;  // weighted paths by content hash
};

/// Sum of link propagation delays and the forwarding latency of every node entered except the
/// last (the receiving GPU).
Time path_latency(const fabric::Fabric& f, std::span<const fabric::LinkId> links);

}  // namespace rocesim::routing
