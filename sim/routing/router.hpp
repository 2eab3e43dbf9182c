// The Router interface: given the two GPUs of a flow and the RoCEv2 header its QP puts on the
// wire, produce the links the flow crosses (or, for a scheme that sprays packets, several paths
// with shares: spread()). Schemes are chosen by `routing.scheme` from a registry
// (routing_schemes()), each with its own parameter table. The engine asks once per QP and caches
// the answer, so a scheme may be as elaborate as it needs to be, and asks again when routing
// changes: after a link or switch changed state, once the scheme's reconvergence delay has
// passed (links_changed()); at a QP's next burst after an idle gap (flowlet_timeout()); after a
// controller's computation (recompute()). A QP whose answer differs moves, running flows
// included.
//
// Routers see the links through a read-only LinkView the engine attaches: which links routing
// believes are up, their capacity and their load now.
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
#include "sim/routing/link_view.hpp"

namespace rocesim::routing {

struct RouteRequest {
  fabric::NodeId src = fabric::kNone;  // sending GPU
  fabric::NodeId dst = fabric::kNone;  // receiving GPU
  fabric::FlowKey key;                 // header seen by the switches (inter-server flows)
  std::span<const fabric::NodeId> via;
  /// A GPU of the sender's server whose NIC sends instead of the sender's own (NCCL's PXN: the
  /// data crosses NVLink to the relay first); kNone for the sender's own NIC.
  fabric::NodeId relay = fabric::kNone;
  /// Which of its NICs the sending GPU (the relay under PXN) sends by and the receiver receives
  /// by, where GPUs own several (Server::nics_per_gpu()); 0 otherwise.
  uint32_t port = 0;
  /// Two GPUs of one server that talk through their NICs and the fabric (NCCL's network
  /// transport inside a node) rather than through the server's interconnect.
  bool through_nics = false;
  /// The GPU whose NIC sends: the relay under PXN, else the sender.
  fabric::NodeId sender() const { return relay != fabric::kNone && relay != src ? relay : src; }
};

/// A QP's paths when its packets are sprayed: path i is links[begin[i], begin[i + 1]) and carries
/// share[i] of the QP's bytes (the shares sum to 1). One path of share 1 for other schemes.
struct Spread {
  std::vector<fabric::LinkId> links;
  std::vector<uint32_t> begin{0};
  std::vector<double> share;
  size_t size() const { return share.size(); }
  std::span<const fabric::LinkId> path(size_t i) const {
    return {links.data() + begin[i], begin[i + 1] - begin[i]};
  }
  void clear() {
    links.clear();
    begin.assign(1, 0);
    share.clear();
  }
};

class Router {
 public:
  virtual ~Router() = default;
  virtual std::string_view scheme() const = 0;
  /// Replaces `out` with the path's links, sending GPU to receiving GPU. False when routing, as
  /// it stands, has no path between them (a link or switch on every way is down); `out` is then
  /// unspecified.
  virtual bool route(const RouteRequest& req, std::vector<fabric::LinkId>& out) = 0;
  /// The paths a QP's packets take and each one's share: one path, route()'s, unless the scheme
  /// sprays packets (adaptive routing). False when there is no path.
  virtual bool spread(const RouteRequest& req, Spread& out) {
    out.clear();
    if (!route(req, out.links)) return false;
    out.begin.push_back(static_cast<uint32_t>(out.links.size()));
    out.share.push_back(1.0);
    return true;
  }
  static constexpr uint64_t kNoVersion = ~uint64_t{0};
  /// A number that stays the same for as long as spread(req) gives the same paths and shares,
  /// for a scheme that can tell without spreading (adaptive routing, between two first-hop
  /// switches); kNoVersion when it cannot, and only spreading again tells.
  virtual uint64_t spread_version(const RouteRequest& /*req*/) { return kNoVersion; }
  /// The links changed state and routing has converged on the view's new state: forget what
  /// depended on the old one.
  virtual void links_changed() = 0;
  /// Flowlet switching: a QP idle for longer than this is routed again when it next sends
  /// (its next burst is a new flowlet); infinity for schemes whose paths change only with
  /// the links.
  virtual Time flowlet_timeout() const { return Time::infinity(); }
  /// A controller that recomputes its paths every period (traffic engineering): the engine
  /// calls recompute() then, and routes every QP again. Infinity: never.
  virtual Time recompute_period() const { return Time::infinity(); }
  virtual void recompute() {}

  /// The view of the links (null: every link up, no loads known). Resets what depends on it.
  void attach(const LinkView* view) {
    view_ = view;
    links_changed();
  }
  /// How long after a link or switch changes state routing reflects it (the routing protocol's
  /// withdrawal, the controller's next computation).
  Time reconvergence() const { return reconvergence_; }
  void set_reconvergence(Time t) { reconvergence_ = t; }

 protected:
  const LinkView* view_ = nullptr;

 private:
  Time reconvergence_{};
};

/// The paths of a QP whose NIC sprays its packets itself over `paths` entropies (a multipath
/// transport: AWS EFA's SRD, Ultra Ethernet packet spraying; Server::nic_paths): the scheme's
/// spread for each of the UDP source ports src_port + i, i < paths (wrapping within RoCE's
/// 0xC000-0xFFFF), each with 1 / paths of the bytes, identical paths merged in the order first
/// found. `scratch` holds one entropy's spread. False when any entropy has no path.
bool spread_over_entropies(Router& router, const RouteRequest& req, uint32_t paths, Spread& out,
                           Spread& scratch);

/// Shared mechanics: the hops inside servers and the walk through the switch fabric, asking
/// `choose` for the member of each equal-cost group.
class FabricWalker {
 public:
  explicit FabricWalker(const fabric::Fabric& f) : f_(f), equal_cost_(f) {}

  /// The path through `choose`'s members of every equal-cost group; false when a link it must
  /// take is down or a switch on the way has no next hop.
  template <typename Choose>
  bool walk(const RouteRequest& req, std::vector<fabric::LinkId>& out, Choose&& choose);
  /// The links of a request that leaves its server through the fabric (no `via`) before its
  /// first-hop switch (`head`: through the relay, to the NIC, up its cable) and after its last
  /// (`tail`), as walk() takes them; false when a cable on them is down.
  bool ends(const RouteRequest& req, std::vector<fabric::LinkId>& head,
            std::vector<fabric::LinkId>& tail) const;

  const fabric::Fabric& fabric() const { return f_; }
  EqualCostTable& equal_cost() { return equal_cost_; }
  /// The NIC that sends a request's packets: the relay's under PXN, else the sender's.
  fabric::NodeId sender_nic(const RouteRequest& req) const {
    return f_.nic_of_gpu(req.sender(), req.port);
  }
  /// Payload capacity (bytes/s) of a NIC's cable to its first-hop switch.
  double uplink_capacity(fabric::NodeId nic) const {
    return f_.link(link_between(nic, f_.first_hop_switch(nic))).capacity.bytes_per_second();
  }
  void set_view(const LinkView* view) {
    view_ = view;
    equal_cost_.set_view(view);
  }

 private:
  fabric::LinkId link_between(fabric::NodeId a, fabric::NodeId b) const;
  bool usable(fabric::LinkId l) const { return view_ == nullptr || view_->up(l); }

  const fabric::Fabric& f_;
  const LinkView* view_ = nullptr;
  EqualCostTable equal_cost_;
  std::vector<fabric::LinkId> tail_;  // walk()'s
};

/// A routing scheme: its name (`routing.scheme`), the table the whole `routing` section is read
/// against when it is chosen, and its factory.
struct RouterType {
  std::string_view name;
  const ParamTable* table;
  std::unique_ptr<Router> (*make)(const ParamReader& section, const fabric::Fabric& f,
                                  uint64_t seed);
};

/// Every scheme, in documentation order; the first is the default.
std::span<const RouterType> routing_schemes();
/// Tables that the schemes' tables refer to (routing.hash_offset).
std::span<const ParamTable* const> routing_subtables();

/// The routing section of a scenario, read against its scheme's table.
struct Routing {
  std::unique_ptr<Router> router;
  fabric::SourcePortPolicy source_port = fabric::SourcePortPolicy::Linux;
};
/// Builds the scheme that section `key` of `parent` names (the default when absent).
Routing make_routing(const ParamReader& parent, std::string_view key, const fabric::Fabric& f,
                     uint64_t seed);

// ---- template implementation ----

template <typename Choose>
bool FabricWalker::walk(const RouteRequest& req, std::vector<fabric::LinkId>& out,
                        Choose&& choose) {
  out.clear();
  const fabric::Node& s = f_.node(req.src);
  const fabric::Node& d = f_.node(req.dst);
  ROCESIM_CHECK(req.src != req.dst, "a flow needs two different GPUs");
  if (s.server == d.server && req.via.empty() && req.relay == fabric::kNone && !req.through_nics) {
    f_.scale_up_path(req.src, req.dst, out);  // through the NVSwitch, or one mesh link
    return true;
  }
  // The host links have no alternative: a NIC whose cable is down is cut off.
  if (!ends(req, out, tail_)) return false;
  fabric::NodeId at = f_.link(out.back()).dst;             // the sender's first-hop switch
  const fabric::NodeId last = f_.link(tail_.front()).src;  // the receiver's
  auto go_to = [&](fabric::NodeId target) {
    while (at != target) {
      const std::span<const fabric::LinkId> hops = equal_cost_.next_hops(at, target);
      if (hops.empty()) return false;
      const fabric::LinkId l = hops.size() == 1 ? hops[0] : hops[choose(at, hops)];
      out.push_back(l);
      at = f_.link(l).dst;
    }
    return true;
  };
  for (fabric::NodeId w : req.via) {
    if (!go_to(w)) return false;
  }
  if (!go_to(last)) return false;
  out.insert(out.end(), tail_.begin(), tail_.end());
  return true;
}

}  // namespace rocesim::routing
