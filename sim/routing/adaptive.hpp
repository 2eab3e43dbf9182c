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
  /// Between two first-hop switches: the pair's epoch and the version of its spread.
  uint64_t spread_version(const RouteRequest& req) override;
  void links_changed() override {
    walker_.set_view(view_);
    pairs_.clear();
    tree_nodes_ = 0;
    ++epoch_;
  }
  Time flowlet_timeout() const override { return Time::zero(); }

 private:
  /// Spare capacity of a member link, at least min_spare of its capacity (0 when down).
  double spare(fabric::LinkId l) const;
  /// A QP's paths as the switches' choices make them: a node is either a path (no choice left:
  /// between two first-hop switches, its fabric segment) or an equal-cost group whose members
  /// lead to further nodes, each found by a walk the first time a spread takes it. It depends
  /// on which links are up, not on their loads, so a pair of first-hop switches keeps its tree
  /// until links_changed(): a spread reads the members' spare capacities along it instead of
  /// walking the fabric once per path.
  struct Choice {
    std::vector<fabric::LinkId> group;    // empty: a path
    std::vector<fabric::LinkId> segment;  // a path's links (its fabric part, for a pair)
    std::vector<int32_t> child;           // per member: a node, kUnbuilt or kNoPath
  };
  static constexpr int32_t kUnbuilt = -1, kNoPath = -2;
  /// The node that the walk with `prefix`'s choices reaches (kNoPath when it finds no path),
  /// appended to `tree`; a path is cut to its part from switch `first` to switch `last`, or
  /// kept whole when `first` is kNone.
  int32_t build(std::vector<Choice>& tree, const RouteRequest& req, std::vector<uint32_t>& prefix,
                fabric::NodeId first, fabric::NodeId last);
  /// The paths below `node` with their shares: at a group, in proportion to the members' spare
  /// capacities (depth first, members in order), or all to the best member past max_paths.
  void evaluate(std::vector<Choice>& tree, int32_t node, const RouteRequest& req,
                std::vector<uint32_t>& prefix, double share, uint64_t branches,
                fabric::NodeId first, fabric::NodeId last, Spread& out);

  FabricWalker walker_;
  EcmpHash hash_;
  AdaptiveConfig config_;
  std::vector<fabric::LinkId> scratch_, head_, tail_;
  std::vector<double> spares_;  // evaluate()'s, one group per level
  std::vector<uint32_t> prefix_;
  std::vector<Choice> other_;  // the tree of a request not between two first-hop switches
  /// Between two first-hop switches: the choice tree, and the fabric part of the spread of the
  /// instant `at` (every QP between them in that instant gets it, between its own host links).
  struct Pair {
    std::vector<Choice> tree;
    Spread spread;
    Time at = Time::infinity();
    uint32_t version = 0;  // moves when the spread of an instant differs from the last one
  };
  /// The pair of first-hop switches a request crosses the fabric between, its spread of this
  /// instant made; null for a request inside one leaf or through given switches.
  Pair* pair_for(const RouteRequest& req);
  std::unordered_map<uint64_t, Pair> pairs_;
  Spread next_;            // pair_for()'s
  size_t tree_nodes_ = 0;  // in all trees (bounded: forgotten past 2^18)
  uint32_t epoch_ = 0;     // moves when the pairs are forgotten
};

}  // namespace rocesim::routing
