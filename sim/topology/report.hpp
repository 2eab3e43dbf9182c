// What `rocesim topo` prints: node and link counts per tier, the subscription ratio of each switch
// tier (nominal line rates toward the servers : away from them) and the bisection bandwidth.
#pragma once

#include <string>
#include <vector>

#include "sim/fabric/fabric.hpp"

namespace rocesim::topology {

struct RoleCount {
  std::string name;  // "gpu", "nic", "nvswitch", "leaf", ...
  size_t nodes = 0;
};

struct LinkClassCount {
  std::string name;  // "leaf->spine"
  size_t links = 0;
  double capacity_bps = 0;  // sum over the links of the class
};

struct TierSubscription {
  std::string role;     // switch role
  double down_bps = 0;  // capacity of links toward lower tiers
  double up_bps = 0;    // capacity of links toward higher tiers
  double ratio() const { return up_bps > 0 ? down_bps / up_bps : 0; }
};

struct TopologyReport {
  std::string description;
  size_t servers = 0;
  size_t gpus = 0;
  std::vector<RoleCount> nodes;
  std::vector<LinkClassCount> links;
  std::vector<TierSubscription> subscription;
  /// Min over tier boundaries of half the capacity crossing it upward: the capacity between two
  /// halves of the servers split along the structure of the tree (the usual Clos figure).
  double bisection_bps = 0;
};

TopologyReport analyze(const fabric::Fabric& f);
std::string format_report(const TopologyReport& r);

}  // namespace rocesim::topology
