// The Router interface: given the two GPUs of a flow and the RoCEv2 header its QP puts on the
// wire, produce the links the flow crosses. ECMP and enhanced ECMP implement it today; path
// pinning, traffic engineering and flowlets are meant to. The engine calls it once per QP and
// caches the result, so a scheme may be as elaborate as it needs to be.
//
// A request may carry waypoints ("via"): switches the path must visit in order, e.g. the spine a
// flow crossed in another simulator, so that a flow set can be replayed exactly. Between
// waypoints the scheme still chooses among equal-cost hops.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "sim/core/params.hpp"
#include "sim/fabric/fabric.hpp"
#include "sim/fabric/roce.hpp"
#include "sim/routing/equal_cost.hpp"

namespace rocesim::routing {

struct RouteRequest {
  fabric::NodeId src = fabric::kNone;  // sending GPU
  fabric::NodeId dst = fabric::kNone;  // receiving GPU
  fabric::FlowKey key;                 // header seen by the switches (inter-server flows)
  std::span<const fabric::NodeId> via;
  /// A GPU of the sender's server whose NIC sends instead of the sender's own (NCCL's PXN: the
  /// data crosses NVLink to the relay first); kNone for the sender's own NIC.
  fabric::NodeId relay = fabric::kNone;
};

class Router {
 public:
  virtual ~Router() = default;
  virtual std::string_view scheme() const = 0;
  /// Replaces `out` with the path's links, sending GPU to receiving GPU.
  virtual void route(const RouteRequest& req, std::vector<fabric::LinkId>& out) = 0;
};

/// Shared mechanics: the hops inside servers and the walk through the switch fabric, asking
/// `choose` for the member of each equal-cost group.
class FabricWalker {
 public:
  explicit FabricWalker(const fabric::Fabric& f) : f_(f), equal_cost_(f) {}

  template <typename Choose>
  void walk(const RouteRequest& req, std::vector<fabric::LinkId>& out, Choose&& choose);

  const fabric::Fabric& fabric() const { return f_; }
  EqualCostTable& equal_cost() { return equal_cost_; }

 private:
  fabric::LinkId link_between(fabric::NodeId a, fabric::NodeId b) const;

  const fabric::Fabric& f_;
  EqualCostTable equal_cost_;
};

/// The routing section of a scenario and the factory for its scheme.
const ParamTable& routing_table();
std::span<const ParamTable* const> routing_subtables();
std::unique_ptr<Router> make_router(const ParamReader& routing, const fabric::Fabric& f,
                                    uint64_t seed);

// ---- template implementation ----

template <typename Choose>
void FabricWalker::walk(const RouteRequest& req, std::vector<fabric::LinkId>& out,
                        Choose&& choose) {
  out.clear();
  const fabric::Node& s = f_.node(req.src);
  const fabric::Node& d = f_.node(req.dst);
  ROCESIM_CHECK(req.src != req.dst, "a flow needs two different GPUs");
  if (s.server == d.server && req.via.empty() && req.relay == fabric::kNone) {
    f_.scale_up_path(req.src, req.dst, out);  // through the NVSwitch, or one mesh link
    return;
  }
  fabric::NodeId sender = req.src;
  if (req.relay != fabric::kNone && req.relay != req.src) {
    ROCESIM_CHECK(f_.node(req.relay).server == s.server, "a relay GPU is on the sender's server");
    f_.scale_up_path(req.src, req.relay, out);
    sender = req.relay;
  }
  const fabric::NodeId src_nic = f_.nic_of_gpu(sender);
  const fabric::NodeId dst_nic = f_.nic_of_gpu(req.dst);
  out.push_back(link_between(sender, src_nic));
  fabric::NodeId at = f_.first_hop_switch(src_nic);
  out.push_back(link_between(src_nic, at));
  const fabric::NodeId last = f_.first_hop_switch(dst_nic);
  auto go_to = [&](fabric::NodeId target) {
    while (at != target) {
      const std::span<const fabric::LinkId> hops = equal_cost_.next_hops(at, target);
      const fabric::LinkId l = hops.size() == 1 ? hops[0] : hops[choose(at, hops)];
      out.push_back(l);
      at = f_.link(l).dst;
    }
  };
  for (fabric::NodeId w : req.via)
    go_to(w);
  go_to(last);
  out.push_back(link_between(last, dst_nic));
  out.push_back(link_between(dst_nic, req.dst));
}

}  // namespace rocesim::routing
