// Centralized traffic engineering (DOMAIN.md, "Routing: what went wrong and what fixed it"): a
// controller that knows the live topology (the link view) and the traffic matrix (every QP
// that has asked for a path, each demanding its NIC's line rate shared among that NIC's QPs)
// runs a constrained shortest-path-first placement and programs, per QP (its source port and
// destination), the uplink its first-hop leaf takes; the switches after the leaf hash as ECMP
// does. Placement, QP after QP in order of decreasing demand (then first seen): the uplink
// whose path (the uplink, then ECMP) has the largest residual capacity at its bottleneck,
// residual = capacity - the demands placed on the link so far; ties to the ECMP hash member.
//
// With `period` > 0 the controller recomputes every period: QPs that asked since the last
// computation take the ECMP routes (the BGP fallback) until the next one. With period 0 it
// places each QP as it first asks, against the demands placed before it (the per-operation
// limit). A QP whose programmed path crosses a link that is down falls back to ECMP until the
// next computation.
#pragma once

#include <map>
#include <tuple>
#include <vector>

#include "sim/routing/ecmp.hpp"

namespace rocesim::routing {

struct TeConfig {
  EcmpConfig ecmp;                  // fallback routes, and the switches after the leaf
  Time period = Time::seconds(30);  // 0: place every QP as it first asks
};

class TeRouter final : public Router {
 public:
  TeRouter(const fabric::Fabric& f, const TeConfig& config);
  std::string_view scheme() const override { return "te"; }
  bool route(const RouteRequest& req, std::vector<fabric::LinkId>& out) override;
  void links_changed() override { walker_.set_view(view_); }
  Time recompute_period() const override {
    return config_.period > Time::zero() ? config_.period : Time::infinity();
  }
  void recompute() override;

 private:
  using Key = std::tuple<fabric::NodeId, fabric::NodeId, fabric::NodeId, uint32_t, uint32_t,
                         uint16_t, uint32_t>;
  struct Demand {
    fabric::NodeId src, dst, relay;
    uint32_t port;  // RouteRequest::port
    fabric::FlowKey key;
    fabric::NodeId nic;           // the sending NIC
    uint32_t member = kNoMember;  // programmed uplink (index in the first group); kNoMember: none
  };
  static constexpr uint32_t kNoMember = 0xFFFFFFFF;

  static Key key_of(const RouteRequest& req);
  RouteRequest request(const Demand& d) const;
  /// Walks with the first choice forced to `member` (kNoMember: the ECMP hash), ECMP after.
  bool walk(const RouteRequest& req, uint32_t member, std::vector<fabric::LinkId>& out);
  /// Places demand `d` of `rate` bytes/s: the member with the widest residual bottleneck.
  void place(Demand& d, double rate);

  FabricWalker walker_;
  EcmpHash hash_;
  TeConfig config_;
  std::vector<Demand> demands_;  // in the order first seen
  std::map<Key, uint32_t> index_;
  std::vector<double> placed_;  // per link: demands placed (bytes/s)
  std::map<fabric::NodeId, uint32_t> qps_of_nic_;
  std::vector<fabric::LinkId> scratch_;
};

}  // namespace rocesim::routing
