// Flowlet switching at the first-hop switch (MODELS.md 4.1-4.3; DOMAIN.md, "Routing: what went
// wrong and what fixed it"). A flowlet is a burst of a QP separated from its previous one by an
// idle gap longer than the flowlet timeout; the engine asks the router again for such a burst
// (Router::flowlet_timeout()), and for the QP's first burst. At the first switch with a choice
// (the leaf) the router takes
//   * least_loaded (CONGA-like; the operators' "currently least-loaded port"): the member with
//     the lowest utilisation, (load + what it placed this instant) / capacity, where the load is
//     what the network model gives the link's flows now and each placement of this instant adds
//     the sending NIC's rate (rates of flows started in the same instant are not known yet, and
//     a switch's DRE sees their first packets at once); ties go to the ECMP hash member;
//   * random (LetFlow): a member drawn uniformly from the run's seeded stream.
// Every other switch hashes the header as ECMP does. Whether a move reorders packets (the new
// path delivers before the old one has drained) is the engine's to count.
#pragma once

#include <vector>

#include "sim/core/rng.hpp"
#include "sim/routing/ecmp.hpp"

namespace rocesim::routing {

enum class FlowletChoice : uint8_t { LeastLoaded, Random };

struct FlowletConfig {
  EcmpConfig ecmp;  // for the switches after the first choice
  Time timeout = Time::us(100);
  FlowletChoice choice = FlowletChoice::LeastLoaded;
};

class FlowletRouter final : public Router {
 public:
  FlowletRouter(const fabric::Fabric& f, const FlowletConfig& config);
  std::string_view scheme() const override { return "flowlet"; }
  bool route(const RouteRequest& req, std::vector<fabric::LinkId>& out) override;
  void links_changed() override { walker_.set_view(view_); }
  Time flowlet_timeout() const override { return config_.timeout; }

 private:
  uint32_t least_loaded(fabric::NodeId at, std::span<const fabric::LinkId> hops,
                        const fabric::FlowKey& key, double rate);

  FabricWalker walker_;
  EcmpHash hash_;
  FlowletConfig config_;
  RandomStream random_;
  std::vector<double> placed_;  // per link: NIC rates placed this instant (bytes/s)
  std::vector<fabric::LinkId> placed_links_;
  Time instant_ = Time::infinity();
};

}  // namespace rocesim::routing
