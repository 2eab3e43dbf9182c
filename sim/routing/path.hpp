// Interned paths. A path is the ordered list of directed links a flow crosses, from the sending
// GPU to the receiving GPU, with its first-byte latency (propagation on every link plus the
// forwarding latency of every switch on the way). Flows of one QP share one interned path.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/units.hpp"
#include "sim/fabric/fabric.hpp"

namespace rocesim::routing {

using PathId = uint32_t;

class PathTable {
 public:
  PathId add(const fabric::Fabric& f, std::span<const fabric::LinkId> links);
  std::span<const fabric::LinkId> links(PathId p) const {
    return {links_.data() + begin_[p], links_.data() + begin_[p + 1]};
  }
  Time latency(PathId p) const { return latency_[p]; }
  size_t size() const { return latency_.size(); }
  size_t max_hops() const { return max_hops_; }

 private:
  std::vector<fabric::LinkId> links_;
  std::vector<uint32_t> begin_{0};
  std::vector<Time> latency_;
  size_t max_hops_ = 0;
};

/// Sum of link propagation delays and the forwarding latency of every node entered except the
/// last (the receiving GPU).
Time path_latency(const fabric::Fabric& f, std::span<const fabric::LinkId> links);

}  // namespace rocesim::routing
