// Path pinning by destination slice, as deployed before enhanced ECMP (DOMAIN.md, "Routing: what
// went wrong and what fixed it"). A destination's slice is the index of its NIC's port among the
// host ports of its leaf. Every switch with a choice takes member (slice mod group size) of its
// equal-cost group: on a leaf with as many uplinks as host ports, the flows that leave it toward
// distinct slices take distinct uplinks, and the spine reached that way has one link down to
// the destination's leaf. A permutation between whole racks is therefore collision-free; with
// partial racks (two racks' slice-0 GPUs receiving from one leaf) or after a failure (a group of
// n - 1 members, slice mod n - 1) flows collide again.
#pragma once

#include <vector>

#include "sim/routing/router.hpp"

namespace rocesim::routing {

class PinnedRouter final : public Router {
 public:
  explicit PinnedRouter(const fabric::Fabric& f);
  std::string_view scheme() const override { return "pinned"; }
  bool route(const RouteRequest& req, std::vector<fabric::LinkId>& out) override;
  void links_changed() override { walker_.set_view(view_); }

  /// The slice of a NIC: its port index among the host ports of its first-hop switch.
  uint32_t slice(fabric::NodeId nic) const { return slice_[nic]; }

 private:
  FabricWalker walker_;
  std::vector<uint32_t> slice_;  // per node; NICs only
};

}  // namespace rocesim::routing
