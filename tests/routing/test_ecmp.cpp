// ECMP routing on RoCEv2 headers: every path is a shortest up/down chain of links from GPU to
// GPU, routing is deterministic, waypoints are honoured; and the statistics that matter for AI
// traffic, each checked against its closed form or an ideal balls-into-bins Monte Carlo run here:
// the max-mean ratio of random hashing, hash polarization across tiers, and QP scaling.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "sim/core/rng.hpp"
#include "sim/fabric/roce.hpp"
#include "sim/metrics/recorder.hpp"
#include "sim/routing/ecmp.hpp"
#include "sim/routing/path.hpp"
#include "sim/routing/router.hpp"
#include "sim/scenario/yaml_source.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::routing {
namespace {

using fabric::Fabric;
using fabric::LinkId;
using fabric::NodeId;

std::unique_ptr<Router> make(const Fabric& f, const std::string& routing_yaml, uint64_t seed) {
  return test::router_from_yaml(f, routing_yaml, seed);
}

/// Height in the tree: GPU 0, NIC and NVSwitch 1, fabric switches 1 + their tier.
int level(const fabric::Node& n) {
  switch (n.kind) {
    case fabric::NodeKind::Gpu:
      return 0;
    case fabric::NodeKind::Nic:
      return 1;
    case fabric::NodeKind::Switch:
      return n.role == fabric::SwitchRole::NvSwitch ? 1 : 1 + n.tier;
  }
  return -1;
}

/// The path is a chain of links from `src` to `dst` that visits no node twice and goes strictly
/// up, then strictly down (valley-free).
::testing::AssertionResult valid_up_down(const Fabric& f, NodeId src, NodeId dst,
                                         const std::vector<LinkId>& p) {
  const auto name = [&](NodeId n) { return f.node(n).name; };
  if (p.empty()) return ::testing::AssertionFailure() << "empty path";
  if (f.link(p.front()).src != src) {
    return ::testing::AssertionFailure() << "starts at " << name(f.link(p.front()).src);
  }
  if (f.link(p.back()).dst != dst) {
    return ::testing::AssertionFailure() << "ends at " << name(f.link(p.back()).dst);
  }
  std::vector<NodeId> nodes{src};
  for (size_t i = 0; i < p.size(); ++i) {
    if (i > 0 && f.link(p[i - 1]).dst != f.link(p[i]).src) {
      return ::testing::AssertionFailure() << "link " << i << " does not continue the chain";
    }
    nodes.push_back(f.link(p[i]).dst);
  }
  std::set<NodeId> distinct(nodes.begin(), nodes.end());
  if (distinct.size() != nodes.size()) return ::testing::AssertionFailure() << "a node repeats";
  bool down = false;
  for (size_t i = 1; i < nodes.size(); ++i) {
    const int a = level(f.node(nodes[i - 1])), b = level(f.node(nodes[i]));
    if (a == b) return ::testing::AssertionFailure() << "sideways hop at " << name(nodes[i]);
    if (b < a) down = true;
    if (down && b > a) {
      return ::testing::AssertionFailure() << "goes up again at " << name(nodes[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

/// Hop distances from `start` over NICs and fabric switches only (no GPUs, no NVLink, and a NIC
/// other than `start` does not forward): an independent shortest-path oracle.
std::vector<uint32_t> bfs(const Fabric& f, NodeId start) {
  std::vector<uint32_t> d(f.node_count(), fabric::kNone);
  std::vector<NodeId> queue{start};
  d[start] = 0;
  for (size_t head = 0; head < queue.size(); ++head) {
    const NodeId v = queue[head];
    if (v != start && f.node(v).kind == fabric::NodeKind::Nic) continue;
    for (const LinkId l : f.out_links(v)) {
      const NodeId u = f.link(l).dst;
      const fabric::Node& n = f.node(u);
      const bool fabric_node =
          n.kind == fabric::NodeKind::Nic ||
          (n.kind == fabric::NodeKind::Switch && n.role != fabric::SwitchRole::NvSwitch);
      if (fabric_node && d[u] == fabric::kNone) {
        d[u] = d[v] + 1;
        queue.push_back(u);
      }
    }
  }
  return d;
}

/// Routes every ordered GPU pair with a fresh QP each and checks: valid up/down chain, length
/// equal to the shortest (2 inside a server, else 2 + NIC-to-NIC distance), and equal to the
/// closed-form `expected(src, dst)`.
template <typename Expected>
void check_all_pairs(const Fabric& f, Router& router, Expected&& expected) {
  fabric::QpAllocator qa(f, 1, fabric::SourcePortPolicy::Linux);
  std::map<NodeId, std::vector<uint32_t>> dist;
  std::vector<LinkId> path;
  for (const NodeId a : f.gpus()) {
    for (const NodeId b : f.gpus()) {
      if (a == b) continue;
      const NodeId na = f.nic_of_gpu(a), nb = f.nic_of_gpu(b);
      RouteRequest req{a, b, qa.key(f, na, nb, qa.open(na, nb)), {}};
      router.route(req, path);
      ASSERT_TRUE(valid_up_down(f, a, b, path)) << f.node(a).name << " -> " << f.node(b).name;
      size_t shortest = 2;
      if (f.node(a).server != f.node(b).server) {
        if (!dist.contains(na)) dist[na] = bfs(f, na);
        shortest = 2 + dist[na][nb];
      }
      ASSERT_EQ(path.size(), shortest) << f.node(a).name << " -> " << f.node(b).name;
      ASSERT_EQ(path.size(), expected(a, b)) << f.node(a).name << " -> " << f.node(b).name;
    }
  }
}

// ---- paths ----

TEST(EcmpPaths, TwoTierClosShortestUpDown) {
  // Inside a server: GPU -> NVSwitch -> GPU, 2 links. Same leaf: GPU -> NIC -> leaf -> NIC ->
  // GPU, 4 links. Across leaves: GPU, NIC, leaf, spine, leaf, NIC, GPU: 6 links.
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
racks: 3
nodes_per_rack: 2
node: {gpus: 4}
leaf: {uplinks: 4}
spine: {count: 2}
)");
  const auto router = make(f, "{}", 1);
  check_all_pairs(f, *router, [&](NodeId a, NodeId b) -> size_t {
    const fabric::Server& sa = f.servers()[f.node(a).server];
    const fabric::Server& sb = f.servers()[f.node(b).server];
    if (sa.index == sb.index) return 2;
    return sa.rack == sb.rack ? 4 : 6;
  });
}

TEST(EcmpPaths, ThreeTierClosCrossesZonesInEightLinks) {
  // Across zones: GPU, NIC, leaf, spine, aggregation, spine, leaf, NIC, GPU: 8 links.
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
zones: 3
racks: 2
nodes_per_rack: 2
node: {gpus: 2}
leaf: {uplinks: 4}
spine: {count: 2}
aggregation: {count: 2, uplinks: 4}
)");
  const auto router = make(f, "{}", 1);
  check_all_pairs(f, *router, [&](NodeId a, NodeId b) -> size_t {
    const fabric::Server& sa = f.servers()[f.node(a).server];
    const fabric::Server& sb = f.servers()[f.node(b).server];
    if (sa.index == sb.index) return 2;
    if (sa.rack == sb.rack) return 4;
    return sa.zone == sb.zone ? 6 : 8;
  });
}

TEST(EcmpPaths, FatTreeShortestUpDown) {
  // k = 4, single-GPU hosts: same edge 4 links, same pod 6 (via an aggregation switch), other
  // pods 8 (via a core).
  const Fabric f = test::fabric_from_yaml("type: fat_tree\nk: 4\nnode: {gpus: 1}\n");
  const auto router = make(f, "{}", 3);
  check_all_pairs(f, *router, [&](NodeId a, NodeId b) -> size_t {
    const uint32_t ea = f.servers()[f.node(a).server].rack;  // edge index = pod * k/2 + e
    const uint32_t eb = f.servers()[f.node(b).server].rack;
    if (ea == eb) return 4;
    return ea / 2 == eb / 2 ? 6 : 8;
  });
}

TEST(EcmpPaths, RailOptimizedShortestUpDown) {
  // Same-index GPUs of servers on one rail leaf: 4 links. Any other pair of servers crosses a
  // spine: 6 links (NVLink forwarding to the right rail, PXN, is not modelled).
  const Fabric f = test::fabric_from_yaml(R"(
type: rail_optimized
nodes: 4
nodes_per_leaf: 2
node: {gpus: 4}
leaf: {uplinks: 2}
spine: {count: 2}
)");
  const auto router = make(f, "{}", 1);
  check_all_pairs(f, *router, [&](NodeId a, NodeId b) -> size_t {
    const fabric::Node& na = f.node(a);
    const fabric::Node& nb = f.node(b);
    if (na.server == nb.server) return 2;
    return na.local == nb.local && na.server / 2 == nb.server / 2 ? 4 : 6;
  });
}

TEST(EcmpPaths, PathLatencyAddsWiresAndSwitches) {
  // Across leaves: wires PCIe 0.5 + NIC 0.1 + 1 + 1 + NIC 0.1 + PCIe 0.5 = 3.2 us; switches
  // entered: NIC (0), leaf 0.6, spine 3, leaf 0.6, NIC (0) = 4.2 us; total 7.4 us.
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
racks: 2
nodes_per_rack: 1
node: {gpus: 2, pcie_latency: 500ns}
leaf: {uplinks: 2, latency: 600ns}
spine: {count: 2, latency: 3us}
nic_link_latency: 100ns
link_latency: 1us
)");
  const auto router = make(f, "{}", 1);
  std::vector<LinkId> path;
  router->route(RouteRequest{f.gpu(0), f.gpu(3), fabric::FlowKey{}, {}}, path);
  ASSERT_EQ(path.size(), 6u);
  EXPECT_EQ(path_latency(f, path), Time::ns(7400));
  PathTable table;
  const PathId id = table.add(f, path);
  EXPECT_EQ(table.latency(id), Time::ns(7400));
  EXPECT_EQ(std::vector<LinkId>(table.links(id).begin(), table.links(id).end()), path);
  EXPECT_EQ(table.max_hops(), 6u);
}

// ---- determinism ----

std::vector<std::vector<LinkId>> all_paths(const Fabric& f, Router& router) {
  fabric::QpAllocator qa(f, 5, fabric::SourcePortPolicy::Linux);
  std::vector<std::vector<LinkId>> out;
  std::vector<LinkId> path;
  for (const NodeId a : f.gpus()) {
    for (const NodeId b : f.gpus()) {
      if (a == b) continue;
      const NodeId na = f.nic_of_gpu(a), nb = f.nic_of_gpu(b);
      router.route(RouteRequest{a, b, qa.key(f, na, nb, qa.open(na, nb)), {}}, path);
      out.push_back(path);
    }
  }
  return out;
}

TEST(EcmpPaths, RoutingIsDeterministic) {
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
zones: 2
racks: 2
nodes_per_rack: 2
node: {gpus: 4}
leaf: {uplinks: 4}
spine: {count: 4}
aggregation: {count: 4, uplinks: 4}
)");
  const auto r1 = make(f, "{}", 42);
  const auto r2 = make(f, "{}", 42);
  const auto first = all_paths(f, *r1);
  EXPECT_EQ(first, all_paths(f, *r2));  // an independent router with the same seed
  EXPECT_EQ(first, all_paths(f, *r1));  // the same router again (caches warm)
  // Another seed changes the per-switch hash seeds, hence some choices.
  const auto r3 = make(f, "{}", 43);
  const auto other = all_paths(f, *r3);
  size_t differ = 0;
  for (size_t i = 0; i < first.size(); ++i)
    differ += first[i] != other[i];
  EXPECT_GT(differ, first.size() / 4);
}

TEST(EcmpPaths, EnhancedEcmpHashesTheDestinationQp) {
  // One 5-tuple, 64 destination QPs: plain ECMP puts them all on one path; E-ECMP spreads them
  // (4 uplinks: the chance that 64 uniform picks agree is 4^-63).
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
racks: 2
nodes_per_rack: 1
node: {gpus: 1}
leaf: {uplinks: 4}
spine: {count: 4}
)");
  const auto ecmp = make(f, "{scheme: ecmp}", 1);
  const auto eecmp = make(f, "{scheme: e-ecmp}", 1);
  EXPECT_EQ(ecmp->scheme(), "ecmp");
  EXPECT_EQ(eecmp->scheme(), "e-ecmp");
  fabric::FlowKey key{f.ip_of(f.nics()[0]), f.ip_of(f.nics()[1]), 0xC555, 4791, 17, 0};
  std::set<std::vector<LinkId>> plain, enhanced;
  std::vector<LinkId> path;
  for (uint32_t q = 0; q < 64; ++q) {
    key.dst_qpn = 0x1000 + q;
    ecmp->route(RouteRequest{f.gpu(0), f.gpu(1), key, {}}, path);
    plain.insert(path);
    eecmp->route(RouteRequest{f.gpu(0), f.gpu(1), key, {}}, path);
    enhanced.insert(path);
  }
  EXPECT_EQ(plain.size(), 1u);
  EXPECT_EQ(enhanced.size(), 4u);
}

// ---- waypoints ----

std::vector<NodeId> nodes_of(const Fabric& f, const std::vector<LinkId>& path) {
  std::vector<NodeId> out;
  for (const LinkId l : path)
    out.push_back(f.link(l).dst);
  return out;
}

TEST(EcmpPaths, WaypointsAreVisitedInOrder) {
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
zones: 2
racks: 3
nodes_per_rack: 1
node: {gpus: 2}
leaf: {uplinks: 4}
spine: {count: 4}
aggregation: {count: 4, uplinks: 4}
)");
  const auto router = make(f, "{}", 7);
  fabric::QpAllocator qa(f, 1, fabric::SourcePortPolicy::Linux);
  const auto key = [&](NodeId a, NodeId b) {
    const NodeId na = f.nic_of_gpu(a), nb = f.nic_of_gpu(b);
    return qa.key(f, na, nb, qa.open(na, nb));
  };
  std::vector<LinkId> path;
  const NodeId g0 = f.find("node0/gpu0"), g0b = f.find("node0/gpu1");  // zone0/leaf0
  const NodeId g1 = f.find("node1/gpu0");                              // zone0/leaf1
  const NodeId g4 = f.find("node4/gpu1");                              // zone1/leaf1
  for (int i = 0; i < 20; ++i) {
    // Across leaves of a zone, pinned to one spine: still 6 links, through spine 2.
    const std::vector<NodeId> spine2{f.find("zone0/spine2")};
    router->route(RouteRequest{g0, g1, key(g0, g1), spine2}, path);
    ASSERT_TRUE(valid_up_down(f, g0, g1, path));
    ASSERT_EQ(path.size(), 6u);
    EXPECT_EQ(nodes_of(f, path)[2], spine2[0]);
    // Across zones through a chosen ATSW and a chosen far spine, in that order.
    const std::vector<NodeId> via{f.find("agg1"), f.find("zone1/spine3")};
    router->route(RouteRequest{g0, g4, key(g0, g4), via}, path);
    ASSERT_TRUE(valid_up_down(f, g0, g4, path));
    ASSERT_EQ(path.size(), 8u);
    EXPECT_EQ(nodes_of(f, path)[3], via[0]);
    EXPECT_EQ(nodes_of(f, path)[4], via[1]);
    // A detour through another leaf: leaf0 -> spine -> leaf2 -> spine -> leaf1, 8 links.
    const std::vector<NodeId> leaf2{f.find("zone0/leaf2")};
    router->route(RouteRequest{g0, g1, key(g0, g1), leaf2}, path);
    ASSERT_EQ(path.size(), 8u);
    EXPECT_EQ(nodes_of(f, path)[3], leaf2[0]);
    EXPECT_EQ(f.link(path.front()).src, g0);
    EXPECT_EQ(f.link(path.back()).dst, g1);
  }
  // Two GPUs of one server go over NVLink unless a waypoint sends them into the fabric.
  router->route(RouteRequest{g0, g0b, fabric::FlowKey{}, {}}, path);
  EXPECT_EQ(path.size(), 2u);
  const std::vector<NodeId> leaf0{f.find("zone0/leaf0")};
  router->route(RouteRequest{g0, g0b, key(g0, g0b), leaf0}, path);
  EXPECT_EQ(path.size(), 4u);  // GPU -> NIC -> leaf -> NIC -> GPU
  EXPECT_EQ(nodes_of(f, path)[1], leaf0[0]);
  const std::vector<NodeId> spine0{f.find("zone0/spine0")};
  router->route(RouteRequest{g0, g0b, key(g0, g0b), spine0}, path);
  EXPECT_EQ(path.size(), 6u);
  EXPECT_EQ(nodes_of(f, path)[2], spine0[0]);
}

// ---- statistics ----

/// Max-mean ratio of bin counts.
double mmr(const std::vector<uint32_t>& counts) {
  double sum = 0;
  uint32_t most = 0;
  for (const uint32_t c : counts) {
    sum += c;
    most = std::max(most, c);
  }
  return most * static_cast<double>(counts.size()) / sum;
}

/// Monte Carlo of ideal hashing: `groups` independent groups of `balls` balls thrown uniformly
/// into `bins` bins each; the MMR over all groups' bins together, averaged over `trials`.
double balls_into_bins_mmr(int groups, int balls, int bins, int trials, uint64_t seed) {
  RandomStream rng(seed, "test/balls-into-bins");
  double total = 0;
  std::vector<uint32_t> counts(static_cast<size_t>(groups * bins));
  for (int t = 0; t < trials; ++t) {
    std::fill(counts.begin(), counts.end(), 0u);
    for (int g = 0; g < groups; ++g) {
      for (int b = 0; b < balls; ++b)
        ++counts[static_cast<size_t>(g * bins) + rng.below(static_cast<uint64_t>(bins))];
    }
    total += mmr(counts);
  }
  return total / trials;
}

TEST(EcmpStatistics, ThousandFlowsOnSixteenUplinksMatchBallsIntoBins) {
  // m = 1000 flows with distinct 5-tuples, n = 16 equal-cost uplinks of one leaf. Under ideal
  // hashing each uplink's count is Binomial(m, 1/n): mean m/n = 62.5, s.d.
  // sqrt(m (1/n)(1 - 1/n)) = 7.65. The largest of 16 such counts is about
  // mean + 1.766 s.d. = 76.0 (1.766 = expected maximum of 16 standard normals), so
  //   MMR = E[max] / mean ~ 1.216,
  // a little more (~1.23) with the binomial's right skew; Raab and Steger's high-probability
  // bound m/n + sqrt(2 (m/n) ln n) = 81.1 gives 1.30 (MODELS.md 3.5). The test compares the
  // hashed MMR, averaged over 30 seeds, with a Monte Carlo of ideal balls-into-bins computed
  // here. Tolerance: per-seed MMR has s.d. ~0.07, so the mean of 30 has ~0.013; allow 0.05.
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
racks: 4
nodes_per_rack: 2
node: {gpus: 8}
leaf: {uplinks: 16}
spine: {count: 16}
)");
  const NodeId leaf0 = f.find("leaf0");
  std::vector<LinkId> uplinks;  // port order = ECMP member order
  for (const LinkId l : f.out_links(leaf0)) {
    if (f.node(f.link(l).dst).role == fabric::SwitchRole::Spine) uplinks.push_back(l);
  }
  ASSERT_EQ(uplinks.size(), 16u);

  constexpr int kFlows = 1000, kSeeds = 30;
  double sum_mmr = 0, min_mmr = 1e9, max_mmr = 0;
  std::vector<LinkId> path;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const auto router = make(f, "{hash: crc32}", seed);
    const auto* ecmp = dynamic_cast<const EcmpRouter*>(router.get());
    ASSERT_NE(ecmp, nullptr);
    fabric::QpAllocator qa(f, seed, fabric::SourcePortPolicy::Linux);
    RandomStream pick(seed, "test/ecmp-flows");
    std::set<std::tuple<uint32_t, uint32_t, uint16_t>> seen;
    std::vector<uint32_t> counts(16, 0);
    int flows = 0;
    while (flows < kFlows) {
      const NodeId src = f.gpu(static_cast<uint32_t>(pick.below(16)));       // under leaf0
      const NodeId dst = f.gpu(static_cast<uint32_t>(16 + pick.below(48)));  // other leaves
      const NodeId sn = f.nic_of_gpu(src), dn = f.nic_of_gpu(dst);
      const fabric::FlowKey key = qa.key(f, sn, dn, qa.open(sn, dn));
      if (!seen.insert({key.src_ip, key.dst_ip, key.src_port}).second) continue;  // distinct
      router->route(RouteRequest{src, dst, key, {}}, path);
      ASSERT_EQ(path.size(), 6u);
      const auto it = std::find(uplinks.begin(), uplinks.end(), path[2]);
      ASSERT_NE(it, uplinks.end());
      // The route took the member that the leaf's hash picks.
      ASSERT_EQ(static_cast<uint32_t>(it - uplinks.begin()), ecmp->choose(leaf0, key, 16));
      ++counts[static_cast<size_t>(it - uplinks.begin())];
      ++flows;
    }
    const double m = mmr(counts);
    sum_mmr += m;
    min_mmr = std::min(min_mmr, m);
    max_mmr = std::max(max_mmr, m);
  }
  const double hashed = sum_mmr / kSeeds;
  const double ideal = balls_into_bins_mmr(1, kFlows, 16, 4000, 1);
  std::printf(
      "[ measured ] m=1000 n=16: hashed mean MMR %.4f (min %.3f, max %.3f, %d seeds); "
      "ideal balls-into-bins %.4f\n",
      hashed, min_mmr, max_mmr, kSeeds, ideal);
  RecordProperty("hashed_mean_mmr", fmt::format("{:.4f}", hashed));
  RecordProperty("ideal_mean_mmr", fmt::format("{:.4f}", ideal));
  EXPECT_NEAR(ideal, 1.23, 0.02);  // the Monte Carlo agrees with the closed form above
  EXPECT_NEAR(hashed, ideal, 0.05);
  EXPECT_GT(hashed, 1.15);  // far from perfect balance (1.0): hashing collides
  EXPECT_LT(hashed, 1.30);
}

struct SpineSpread {
  double distinct_uplinks = 0;  // mean over the spines of zone 0 of agg uplinks used
  double mmr = 0;               // over all spine -> aggregation links of zone 0
};

/// All 512 flows from the 16 GPUs of zone0/leaf0 to the 32 GPUs of zone 1, one QP each: which
/// aggregation uplinks do they take at the spines of zone 0?
SpineSpread spine_spread(const Fabric& f, Router& router, uint64_t seed) {
  fabric::QpAllocator qa(f, seed, fabric::SourcePortPolicy::Linux);
  std::map<NodeId, std::set<LinkId>> used;  // spine -> uplinks used
  std::map<LinkId, uint32_t> count;
  for (LinkId l = 0; l < f.link_count(); ++l) {
    const fabric::Node& s = f.node(f.link(l).src);
    if (s.role == fabric::SwitchRole::Spine && s.zone == 0 &&
        f.node(f.link(l).dst).role == fabric::SwitchRole::Aggregation) {
      count[l] = 0;
    }
  }
  std::vector<LinkId> path;
  for (uint32_t a = 0; a < 16; ++a) {
    for (uint32_t b = 32; b < 64; ++b) {
      const NodeId src = f.gpu(a), dst = f.gpu(b);
      const NodeId sn = f.nic_of_gpu(src), dn = f.nic_of_gpu(dst);
      router.route(RouteRequest{src, dst, qa.key(f, sn, dn, qa.open(sn, dn)), {}}, path);
      if (path.size() != 8) {
        ADD_FAILURE() << "a cross-zone path of " << path.size() << " links";
        return {};
      }
      const fabric::Link& up = f.link(path[3]);  // spine -> aggregation
      EXPECT_EQ(f.node(up.src).role, fabric::SwitchRole::Spine);
      EXPECT_EQ(f.node(up.dst).role, fabric::SwitchRole::Aggregation);
      used[up.src].insert(path[3]);
      ++count.at(path[3]);
    }
  }
  SpineSpread s;
  for (const auto& [spine, links] : used)
    s.distinct_uplinks += static_cast<double>(links.size());
  s.distinct_uplinks /= static_cast<double>(used.size());
  std::vector<uint32_t> counts;
  for (const auto& [l, c] : count)
    counts.push_back(c);
  s.mmr = mmr(counts);
  return s;
}

TEST(EcmpStatistics, HashPolarizationAcrossTiers) {
  // Leaf and spine both hash the same 13 header bytes. A CRC with seed s is crc(m) ^ c(s) for
  // messages of one length, so the spine's hash is the leaf's XOR a constant. Leaf zone0/leaf0
  // has 8 uplinks, one to each spine: the flows reaching spine s are exactly those whose
  // leaf hash has low 3 bits = s (window at offset 0, mod 8 = low 3 bits). If the spine reads
  // the same window (offset 0) and takes it mod 8, all of them pick ONE of its 8 aggregation
  // uplinks: complete polarization, MMR over the 64 spine uplinks >= 8 (64 flows where a mean
  // of 8 was due).
  // With the default windows (leaf bits 0-15, spine bits 16-31) the spine's choice is
  // independent of the leaf's: 512 flows over 8 spines x 8 uplinks behave as 512 balls in 64
  // bins, expected MMR 15.33 / 8 = 1.92 (MODELS.md 3.5), and every spine uses all 8 uplinks
  // (chance of an empty one among 64 flows: 8 (7/8)^64 = 0.15%).
  // Polarized, the busiest spine's whole share lands on one link: MMR = 8 * (max spine load /
  // 64), i.e. 8 times the MMR of 512 balls in 8 bins (about 8 * 1.16 = 9.3).
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
zones: 2
racks: 2
nodes_per_rack: 2
node: {gpus: 8}
leaf: {uplinks: 8}
spine: {count: 8}
aggregation: {count: 8, uplinks: 8}
)");
  constexpr int kSeeds = 5;
  const double ideal = balls_into_bins_mmr(1, 512, 64, 2000, 2);
  const double polarized = 8 * balls_into_bins_mmr(1, 512, 8, 2000, 2);
  struct Config {
    const char* name;
    const char* yaml;
    bool polarizes;
  };
  const Config configs[] = {
      {"crc32, default offsets (leaf 0, spine 16, aggregation 8)", "{hash: crc32}", false},
      {"crc32, equal offsets (leaf 0, spine 0)", "{hash: crc32, hash_offset: {leaf: 0, spine: 0}}",
       true},
      {"crc16-ccitt (one 16-bit window for every tier)", "{hash: crc16-ccitt}", true},
      {"murmur3, equal offsets (non-linear: seeds decorrelate)",
       "{hash: murmur3, hash_offset: {leaf: 0, spine: 0}}", false},
  };
  for (const Config& c : configs) {
    double distinct = 0, m = 0;
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      const auto router = make(f, c.yaml, seed);
      const SpineSpread s = spine_spread(f, *router, seed);
      distinct += s.distinct_uplinks / kSeeds;
      m += s.mmr / kSeeds;
      if (c.polarizes) {
        // Exact, for every seed: each spine sends all of leaf0's flows up one link.
        EXPECT_EQ(s.distinct_uplinks, 1.0) << c.name << ", seed " << seed;
        EXPECT_GE(s.mmr, 8.0) << c.name << ", seed " << seed;
      }
    }
    std::printf(
        "[ measured ] %s: %.2f of 8 aggregation uplinks used per spine, MMR %.3f (ideal %.3f, "
        "fully polarized %.3f)\n",
        c.name, distinct, m, ideal, polarized);
    if (c.polarizes) {
      EXPECT_NEAR(m, polarized, 0.6) << c.name;
    } else {
      EXPECT_GE(distinct, 7.8) << c.name;
      EXPECT_NEAR(m, ideal, 0.35) << c.name;
    }
  }
}

TEST(EcmpStatistics, MoreQpsPerConnectionLowerTheMmr) {
  // One ring step over 4 single-server racks of 8 GPUs, ranks ordered so that every step
  // crosses servers: 32 connections, 8 per leaf, each leaf with 8 uplinks to 8 spines. With q
  // QPs per connection (qp_mode split: every QP carries data) each leaf throws 8q flows on its
  // 8 uplinks; the leaf->spine tier has 32 links with mean q routed QPs.
  //   q = 1: m = n = 8 per leaf, E[max] = 2.61 per leaf (MODELS.md 3.5); the max over 4 leaves
  //          makes the tier MMR about 3.3.
  //   q = 8: m/n = 8, max ~ m/n + sqrt(2 (m/n) ln n) per leaf -> MMR ~ 1 + sqrt(2 ln 8 / 8)
  //          = 1.72 (1.74 with the max over 4 leaves).
  // Both are checked against a Monte Carlo of the same structure (4 groups of 8q balls into 8
  // bins) averaged over 20 seeds. Tolerances: per-seed s.d. ~0.7 (q = 1, integer maxima) and
  // ~0.2 (q = 8), i.e. 0.16 and 0.05 for the mean of 20; allow 0.5 and 0.15.
  std::string ranks;
  for (int g = 0; g < 8; ++g) {
    for (int s = 0; s < 4; ++s)
      ranks += fmt::format("{}{}", ranks.empty() ? "" : ", ", s * 8 + g);
  }
  const auto scenario = [&](int qps) {
    return fmt::format(R"(
name: qp-scaling
topology:
  type: clos
  racks: 4
  nodes_per_rack: 1
  node: {{gpus: 8}}
  leaf: {{uplinks: 8}}
  spine: {{count: 8}}
routing: {{scheme: ecmp, hash: crc32}}
workloads:
  - type: ring_step
    ranks: [{}]
    bytes: 1MiB
    qps_per_connection: {}
    qp_mode: split
)",
                       ranks, qps);
  };
  constexpr int kSeeds = 20;
  std::map<int, double> hashed, ideal;
  for (const int q : {1, 8}) {
    double sum = 0;
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      const auto run = test::scenario_from_yaml(scenario(q), seed);
      run->run();
      const metrics::TierResult* tier = nullptr;
      for (const metrics::TierResult& t : run->recorder->tiers()) {
        if (t.link_class == "leaf->spine") tier = &t;
      }
      ASSERT_NE(tier, nullptr);
      ASSERT_EQ(tier->links, 32u);
      ASSERT_DOUBLE_EQ(tier->mean_qps, q);  // every connection crosses exactly one uplink
      sum += tier->mmr;
    }
    hashed[q] = sum / kSeeds;
    ideal[q] = balls_into_bins_mmr(4, 8 * q, 8, 4000, 3);
    std::printf(
        "[ measured ] ring step, %d QP(s) per connection: leaf->spine MMR %.3f "
        "(ideal %.3f)\n",
        q, hashed[q], ideal[q]);
  }
  EXPECT_NEAR(hashed[1], ideal[1], 0.5);
  EXPECT_NEAR(hashed[8], ideal[8], 0.15);
  EXPECT_LT(hashed[8], hashed[1] - 1.0);  // QP scaling helps, by a wide margin
}

}  // namespace
}  // namespace rocesim::routing
