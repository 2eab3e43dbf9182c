// Adaptive routing / packet spraying, as Spectrum-X and Ultra Ethernet fabrics do it (MODELS.md
// 4.4): every switch spreads a QP's packets over all its equal-cost next hops, by load, and the
// receiving NIC puts them back in order. As a fluid, a QP's bytes split at every switch with a
// choice in proportion to the spare capacity of each member link (capacity - the load the
// network model gives it now, at least `min_spare` of the capacity, so that a busy link still
// gets a share); its paths are the products of these choices, each carrying the product of its
// shares. A QP is spread again, with the loads of that instant, at every burst that starts on
// it after an idle gap (flowlet_timeout 0) and when routing converges after a link event.
// To bound the paths per QP, a switch whose branching would take a QP past `max_paths` paths
// sends it whole to its member with the most spare capacity.
#pragma once

#include <unordered_map>
#include <vector>

#include "sim/routing/ecmp.hpp"

namespace rocesim::routing {

struct AdaptiveConfig {
  EcmpConfig ecmp;          // ties and the members beyond max_paths: by the hash
  double min_spare = 0.05;  // fraction of a member's capacity it is always given credit for
  uint32_t max_paths = 64;
};

class AdaptiveRouter final : public Router {
 public:
  AdaptiveRouter(const fabric::Fabric& f, const AdaptiveConfig& config);
  std::string_view scheme() const override { return "adaptive"; }
  /// The path of the QP's largest share (what a single path would be).
  bool route(const RouteRequest& req, std::vector<fabric::LinkId>& out) override;
  bool spread(const RouteRequest& req, Spread& out) override;
  void links_changed() override {
    walker_.set_view(view_);
    cache_.clear();
  }
  Time flowlet_timeout() const override { return Time::zero(); }

 private:
  /// Spare capacity of a member link, at least min_spare of its capacity (0 when down).
  double spare(fabric::LinkId l) const;
  /// Depth-first over the choices: `prefix` fixes the members taken so far.
  void explore(const RouteRequest& req, std::vector<uint32_t>& prefix, double share,
               uint64_t branches, Spread& out);

  FabricWalker walker_;
  EcmpHash hash_;
  AdaptiveConfig config_;
  std::vector<fabric::LinkId> scratch_;
  std::vector<uint32_t> prefix_;
  std::vector<std::vector<fabric::LinkId>> groups_;  // explore()'s, by depth
  // The fabric part (first-hop switch to last) of the spreads of this instant, by switch pair.
  std::unordered_map<uint64_t, Spread> cache_;
  Time cache_time_ = Time::infinity();
};

}  // namespace rocesim::routing
