#include "sim/topology/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

namespace rocesim::topology {

namespace {
std::string node_role(const fabric::Node& n) {
  return std::string(n.kind == fabric::NodeKind::Switch ? fabric::role_name(n.role)
                                                        : fabric::kind_name(n.kind));
}

// Tier used for subscription and bisection: NICs sit at 0, switches at their tier. GPUs and
// the switches inside servers (NVSwitch, PCIe, CPU) take no part.
int fabric_tier(const fabric::Node& n) {
  if (n.kind == fabric::NodeKind::Nic) return 0;
  if (fabric::is_network_switch(n)) return n.tier;
  return -1;
}
/// The lowest tier t such that the NICs and network switches of tiers 0 to t, with the links
/// between them, connect every NIC; the highest tier if none does before it.
int lowest_joining_tier(const fabric::Fabric& f) {
  std::vector<int> tiers;
  for (const fabric::Node& n : f.nodes()) {
    if (fabric_tier(n) >= 0) tiers.push_back(fabric_tier(n));
  }
  std::sort(tiers.begin(), tiers.end());
  tiers.erase(std::unique(tiers.begin(), tiers.end()), tiers.end());
  std::vector<fabric::NodeId> parent(f.node_count());
  const auto root = [&](fabric::NodeId v) {
    while (parent[v] != v)
      v = parent[v] = parent[parent[v]];
    return v;
  };
  for (const int t : tiers) {
    for (fabric::NodeId v = 0; v < f.node_count(); ++v)
      parent[v] = v;
    for (const fabric::Link& l : f.links()) {
      const int a = fabric_tier(f.node(l.src)), b = fabric_tier(f.node(l.dst));
      if (a >= 0 && b >= 0 && a <= t && b <= t) parent[root(l.src)] = root(l.dst);
    }
    fabric::NodeId first = fabric::kNone;
    bool one = true;
    for (fabric::NodeId v = 0; v < f.node_count() && one; ++v) {
      if (f.node(v).kind != fabric::NodeKind::Nic) continue;
      if (first == fabric::kNone) first = root(v);
      one = root(v) == first;
    }
    if (one) return t;
  }
  return tiers.empty() ? 0 : tiers.back();
}

}  // namespace

TopologyReport analyze(const fabric::Fabric& f) {
  TopologyReport r;
  r.description = f.description();
  r.servers = f.servers().size();
  r.gpus = f.gpu_count();

  for (const fabric::Node& n : f.nodes()) {
    const std::string role = node_role(n);
    auto it = std::find_if(r.nodes.begin(), r.nodes.end(),
                           [&](const RoleCount& c) { return c.name == role; });
    if (it == r.nodes.end()) {
      r.nodes.push_back({role, 0});
      it = r.nodes.end() - 1;
    }
    ++it->nodes;
  }
  r.links.resize(f.link_classes().size());
  for (size_t i = 0; i < r.links.size(); ++i)
    r.links[i].name = f.link_classes()[i];
  std::map<int, double> up_capacity;  // tier -> capacity of links leaving it upward
  for (const fabric::Link& l : f.links()) {
    LinkClassCount& c = r.links[l.link_class];
    ++c.links;
    c.capacity_bps += static_cast<double>(l.line_rate.bits_per_second());
    const int ts = fabric_tier(f.node(l.src));
    const int td = fabric_tier(f.node(l.dst));
    if (ts < 0 || td < 0) continue;
    const double cap = static_cast<double>(l.line_rate.bits_per_second());
    if (td > ts) up_capacity[ts] += cap;
    const fabric::Node& src = f.node(l.src);
    if (src.kind != fabric::NodeKind::Switch) continue;
    const std::string role = node_role(src);
    auto it = std::find_if(r.subscription.begin(), r.subscription.end(),
                           [&](const TierSubscription& t) { return t.role == role; });
    if (it == r.subscription.end()) {
      r.subscription.push_back({role, 0, 0});
      it = r.subscription.end() - 1;
    }
    (td < ts ? it->down_bps : it->up_bps) += cap;
  }
  // The top tier has no uplinks and no ratio.
  std::erase_if(r.subscription, [](const TierSubscription& t) { return t.up_bps == 0; });
  // A boundary counts only below the lowest tier whose switches, with those under them,
  // already join every NIC: above it no traffic between two halves needs to go (a single AI
  // zone's spines with an aggregation tier over them).
  const int joined = lowest_joining_tier(f);
  r.bisection_bps = std::numeric_limits<double>::infinity();
  for (const auto& [tier, cap] : up_capacity) {
    if (tier < joined) r.bisection_bps = std::min(r.bisection_bps, cap / 2);
  }
  if (up_capacity.empty()) r.bisection_bps = 0;
  return r;
}

std::string format_report(const TopologyReport& r) {
  std::string out =
      fmt::format("{}\n{} servers, {} GPUs\n\nnodes\n", r.description, r.servers, r.gpus);
  for (const RoleCount& c : r.nodes)
    out += fmt::format("  {:<14} {:>9}\n", c.name, c.nodes);
  out += "\nlinks (one direction each)\n";
  for (const LinkClassCount& c : r.links) {
    out += fmt::format("  {:<24} {:>9}   {:>12.1f} Tb/s total\n", c.name, c.links,
                       c.capacity_bps * 1e-12);
  }
  out += "\nsubscription (capacity down : up)\n";
  for (const TierSubscription& t : r.subscription) {
    // Written the way operators do: 2:1 oversubscribed, 1:1.125 or 1:2 undersubscribed.
    const std::string ratio = t.down_bps >= t.up_bps
                                  ? fmt::format("{:.4g}:1", t.down_bps / t.up_bps)
                                  : fmt::format("1:{:.4g}", t.up_bps / t.down_bps);
    out += fmt::format("  {:<14} {:>10.1f} Tb/s : {:>10.1f} Tb/s   = {}\n", t.role,
                       t.down_bps * 1e-12, t.up_bps * 1e-12, ratio);
  }
  out += fmt::format("\nbisection bandwidth  {:.1f} Tb/s\n", r.bisection_bps * 1e-12);
  return out;
}

}  // namespace rocesim::topology
