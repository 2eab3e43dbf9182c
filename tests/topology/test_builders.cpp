// Topology builders: node and link counts from closed forms, subscription ratios and bisection
// bandwidth from the report, located validation errors, and every shipped topology file.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <string>

#include "sim/scenario/scenario.hpp"
#include "sim/topology/report.hpp"
#include "sim/topology/topology.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::topology {
namespace {

using test::contains;
using test::input_error;

using fabric::Fabric;

size_t nodes_of(const TopologyReport& r, const std::string& role) {
  for (const RoleCount& c : r.nodes) {
    if (c.name == role) return c.nodes;
  }
  return 0;
}

const LinkClassCount* links_of(const TopologyReport& r, const std::string& cls) {
  for (const LinkClassCount& c : r.links) {
    if (c.name == cls) return &c;
  }
  return nullptr;
}

size_t link_count_of(const TopologyReport& r, const std::string& cls) {
  const LinkClassCount* c = links_of(r, cls);
  return c == nullptr ? 0 : c->links;
}

const TierSubscription* subscription_of(const TopologyReport& r, const std::string& role) {
  for (const TierSubscription& t : r.subscription) {
    if (t.role == role) return &t;
  }
  return nullptr;
}

// ---- clos ----

// A server of G GPUs and G NICs adds 2G + 1 nodes (GPUs, NICs, NVSwitch) and three cables per
// GPU (GPU-NVSwitch, GPU-NIC, NIC-leaf), i.e. 6G directed links.

TEST(Clos, OneZoneCounts) {
  // R = 4 racks x N = 3 servers x G = 4 GPUs, U = 6 uplinks per leaf over S = 3 spines.
  //   nodes = R N (2G + 1) + R + S = 12 * 9 + 4 + 3 = 115
  //   links = R N * 6G + 2 R U     = 12 * 24 + 48   = 336
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
racks: 4
nodes_per_rack: 3
node: {gpus: 4}
leaf: {uplinks: 6}
spine: {count: 3}
)");
  EXPECT_EQ(f.node_count(), 115u);
  EXPECT_EQ(f.link_count(), 336u);
  const TopologyReport r = analyze(f);
  EXPECT_EQ(r.servers, 12u);
  EXPECT_EQ(r.gpus, 48u);
  EXPECT_EQ(nodes_of(r, "gpu"), 48u);
  EXPECT_EQ(nodes_of(r, "nic"), 48u);
  EXPECT_EQ(nodes_of(r, "nvswitch"), 12u);
  EXPECT_EQ(nodes_of(r, "leaf"), 4u);
  EXPECT_EQ(nodes_of(r, "spine"), 3u);
  EXPECT_EQ(nodes_of(r, "aggregation"), 0u);
  EXPECT_EQ(link_count_of(r, "nic->leaf"), 48u);
  EXPECT_EQ(link_count_of(r, "leaf->spine"), 24u);
  EXPECT_EQ(link_count_of(r, "spine->leaf"), 24u);
  // Uplinks spread evenly: every leaf has U / S = 2 parallel links to every spine.
  for (const fabric::NodeId n : {f.find("leaf0"), f.find("leaf3")}) {
    std::map<fabric::NodeId, int> per_spine;
    for (const fabric::LinkId l : f.out_links(n)) {
      const fabric::Node& d = f.node(f.link(l).dst);
      if (d.role == fabric::SwitchRole::Spine) ++per_spine[f.link(l).dst];
    }
    EXPECT_EQ(per_spine.size(), 3u);
    for (const auto& [spine, count] : per_spine)
      EXPECT_EQ(count, 2);
  }
  // Servers hang off the leaf of their rack.
  EXPECT_EQ(f.first_hop_switch(f.find("node5/nic2")), f.find("leaf1"));
  EXPECT_EQ(f.servers()[5].rack, 1u);
}

TEST(Clos, SeveralZonesWithAnAggregationTier) {
  // Z = 3 zones of R = 2 racks x N = 2 servers x G = 2 GPUs; U = 4 leaf uplinks over S = 2
  // spines per zone; A = 4 aggregation switches, V = 8 uplinks per spine.
  //   nodes = Z (R N (2G + 1) + R + S) + A = 3 (4 * 5 + 2 + 2) + 4 = 76
  //   links = Z (R N * 6G + 2 R U) + 2 Z S V = 3 (48 + 16) + 2 * 3 * 2 * 8 = 288
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
zones: 3
racks: 2
nodes_per_rack: 2
node: {gpus: 2}
leaf: {uplinks: 4}
spine: {count: 2}
aggregation: {count: 4, uplinks: 8}
)");
  EXPECT_EQ(f.node_count(), 76u);
  EXPECT_EQ(f.link_count(), 288u);
  const TopologyReport r = analyze(f);
  EXPECT_EQ(nodes_of(r, "leaf"), 6u);
  EXPECT_EQ(nodes_of(r, "spine"), 6u);
  EXPECT_EQ(nodes_of(r, "aggregation"), 4u);
  EXPECT_EQ(link_count_of(r, "spine->aggregation"), 48u);
  EXPECT_EQ(link_count_of(r, "aggregation->spine"), 48u);
  // Names carry the zone; zones are recorded on servers and switches.
  ASSERT_NE(f.find("zone2/leaf1"), fabric::kNone);
  ASSERT_NE(f.find("zone1/spine0"), fabric::kNone);
  ASSERT_NE(f.find("agg3"), fabric::kNone);
  EXPECT_EQ(f.node(f.find("zone2/leaf1")).zone, 2u);
  EXPECT_EQ(f.servers()[9].zone, 2u);  // 4 servers per zone
  // Every spine reaches every ATSW with V / A = 2 parallel links of 400 Gb/s, whose flows share
  // the RoCEv2 payload rate 400 x 4096 / 4178 Gb/s.
  for (const fabric::LinkId l : f.out_links(f.find("zone1/spine1"))) {
    if (f.node(f.link(l).dst).role != fabric::SwitchRole::Aggregation) continue;
    EXPECT_EQ(f.link(l).line_rate.bits_per_second(), 400'000'000'000);
    EXPECT_NEAR(static_cast<double>(f.link(l).capacity.bits_per_second()) / 8,
                test::roce_payload(400e9), 1);
  }
}

TEST(Clos, LeafSubscriptionRatios) {
  // 16 x 400G NICs per leaf (2 servers x 8 GPUs). Subscription = capacity down : up:
  //   16 uplinks -> 6.4 T : 6.4 T = 1:1, 32 -> 6.4 : 12.8 = 1:2, 18 -> 6.4 : 7.2 = 1:1.125.
  struct Case {
    int uplinks;
    double ratio;  // down / up
    const char* text;
  };
  for (const Case c : {Case{16, 1.0, "= 1:1\n"}, Case{32, 0.5, "= 1:2\n"},
                       Case{18, 16.0 / 18.0, "= 1:1.125\n"}, Case{8, 2.0, "= 2:1\n"}}) {
    const Fabric f = test::fabric_from_yaml(fmt::format(R"(
type: clos
racks: 2
nodes_per_rack: 2
node: {{gpus: 8, nic_speed: 400Gbps}}
leaf: {{uplinks: {}, uplink_speed: 400Gbps}}
spine: {{count: 2}}
)",
                                                        c.uplinks));
    const TopologyReport r = analyze(f);
    const TierSubscription* leaf = subscription_of(r, "leaf");
    ASSERT_NE(leaf, nullptr);
    EXPECT_DOUBLE_EQ(leaf->down_bps, 2 * 16 * 400e9);  // two leaves
    EXPECT_DOUBLE_EQ(leaf->up_bps, 2 * c.uplinks * 400e9);
    EXPECT_NEAR(leaf->ratio(), c.ratio, 1e-12) << c.uplinks;
    EXPECT_TRUE(contains(format_report(r), c.text)) << format_report(r);
    // The spines are the top tier: no uplinks, no ratio.
    EXPECT_EQ(subscription_of(r, "spine"), nullptr);
  }
}

TEST(Clos, BisectionBandwidth) {
  // Bisection = min over tier boundaries of half the upward capacity. 2 leaves x 16 x 400G NICs:
  //   NIC tier   32 * 400G / 2 = 6.4 T
  //   leaf tier  2 * U * 400G / 2 = U * 400G  ->  12.8 T for U = 32, 3.2 T for U = 8.
  for (const auto& [uplinks, expected] :
       {std::pair{32, 6.4e12}, std::pair{16, 6.4e12}, std::pair{8, 3.2e12}}) {
    const Fabric f = test::fabric_from_yaml(fmt::format(R"(
type: clos
racks: 2
nodes_per_rack: 2
node: {{gpus: 8}}
leaf: {{uplinks: {}}}
spine: {{count: 2}}
)",
                                                        uplinks));
    EXPECT_DOUBLE_EQ(analyze(f).bisection_bps, expected) << uplinks;
  }
}

TEST(Clos, BisectionIgnoresTiersNoHalfNeedsToReach) {
  // The same 2 leaves (U = 8: 3.2 T at the leaf tier), one zone, with an aggregation tier over
  // its 2 spines of 2 x 400G uplinks each (spine tier: 2 x 2 x 400G / 2 = 0.8 T). The spines
  // already join every leaf: no traffic between two halves goes up to the aggregation tier, so
  // the bisection stays 3.2 T (it printed 0.8 T before; with several zones the aggregation
  // tier is the cut). A single leaf: nothing goes up at all, the NICs' 16 x 400G / 2 = 3.2 T.
  const Fabric zone = test::fabric_from_yaml(R"(
type: clos
racks: 2
nodes_per_rack: 2
node: {gpus: 8}
leaf: {uplinks: 8}
spine: {count: 2}
aggregation: {count: 2, uplinks: 2}
)");
  EXPECT_DOUBLE_EQ(analyze(zone).bisection_bps, 3.2e12);
  const Fabric leaf = test::fabric_from_yaml(R"(
type: clos
racks: 1
nodes_per_rack: 2
node: {gpus: 8}
leaf: {uplinks: 1}
spine: {count: 1}
)");
  EXPECT_DOUBLE_EQ(analyze(leaf).bisection_bps, 3.2e12);
}

// ---- rail-optimized ----

TEST(RailOptimized, Counts) {
  // M = 5 servers x G = 4 GPUs (4 rails), P = 2 servers per leaf: ceil(5 / 2) = 3 leaves per
  // rail, 12 rail leaves; S = 2 spines, U = 4 uplinks per leaf.
  //   nodes = M (2G + 1) + rails * L + S = 45 + 12 + 2 = 59
  //   links = M * 6G + 2 * rails * L * U = 120 + 96 = 216
  const Fabric f = test::fabric_from_yaml(R"(
type: rail_optimized
nodes: 5
nodes_per_leaf: 2
node: {gpus: 4}
leaf: {uplinks: 4}
spine: {count: 2}
)");
  EXPECT_EQ(f.node_count(), 59u);
  EXPECT_EQ(f.link_count(), 216u);
  const TopologyReport r = analyze(f);
  EXPECT_EQ(nodes_of(r, "rail"), 12u);
  EXPECT_EQ(nodes_of(r, "spine"), 2u);
  EXPECT_EQ(link_count_of(r, "nic->rail"), 20u);
  EXPECT_EQ(link_count_of(r, "rail->spine"), 48u);
  // NIC k of server s is on leaf s / P of rail k; the last leaf of a rail has one server.
  EXPECT_EQ(f.first_hop_switch(f.find("node3/nic2")), f.find("rail2/leaf1"));
  EXPECT_EQ(f.first_hop_switch(f.find("node4/nic0")), f.find("rail0/leaf2"));
  size_t nics_on_last = 0;
  for (const fabric::LinkId l : f.in_links(f.find("rail0/leaf2"))) {
    if (f.node(f.link(l).src).kind == fabric::NodeKind::Nic) ++nics_on_last;
  }
  EXPECT_EQ(nics_on_last, 1u);
  // Same-index NICs of one leaf's servers share a rail switch; different indices do not.
  EXPECT_EQ(f.first_hop_switch(f.find("node0/nic1")), f.first_hop_switch(f.find("node1/nic1")));
  EXPECT_NE(f.first_hop_switch(f.find("node0/nic1")), f.first_hop_switch(f.find("node0/nic2")));
}

TEST(RailOptimized, GpusWithTwoNicsEachOwnTwoRails) {
  // M = 2 servers x G = 2 GPUs x k = 2 NICs per GPU (4 rails), P = 2: one leaf per rail, S = 2.
  //   nodes = M (G + G k + 1) + rails + S = 2 x 7 + 4 + 2 = 20
  //   links = M (2 G k PCIe + 2 G NVLink + 2 G k NIC cables) + 2 rails U = 2 x 20 + 32 = 72
  // GPU i owns NICs 2i and 2i + 1, each behind its own PCIe cable, each on its own rail.
  const Fabric f = test::fabric_from_yaml(R"(
type: rail_optimized
nodes: 2
nodes_per_leaf: 2
node: {gpus: 2, nics: 4, pcie_bandwidth: 400Gbps}
leaf: {uplinks: 4}
spine: {count: 2}
)");
  EXPECT_EQ(f.node_count(), 20u);
  EXPECT_EQ(f.link_count(), 72u);
  EXPECT_EQ(f.servers()[0].nics_per_gpu(), 2u);
  const fabric::NodeId gpu1 = f.find("node1/gpu1");
  EXPECT_EQ(f.nic_of_gpu(gpu1), f.find("node1/nic2"));
  EXPECT_EQ(f.nic_of_gpu(gpu1, 1), f.find("node1/nic3"));
  size_t pcie = 0;
  for (const fabric::LinkId l : f.out_links(gpu1)) {
    if (f.node(f.link(l).dst).kind == fabric::NodeKind::Nic) ++pcie;
  }
  EXPECT_EQ(pcie, 2u);
  EXPECT_EQ(f.first_hop_switch(f.find("node0/nic3")), f.first_hop_switch(f.find("node1/nic3")));
  EXPECT_NE(f.first_hop_switch(f.find("node1/nic2")), f.first_hop_switch(f.find("node1/nic3")));
}

// ---- fat-tree ----

TEST(FatTree, CountsForK4AndK8) {
  // k-ary fat-tree (Al-Fares et al. 2008): k^3 / 4 hosts, k pods of k/2 edge and k/2
  // aggregation switches plus (k/2)^2 cores = 5 k^2 / 4 switches; cables: k^3 / 4 host links,
  // k (k/2)^2 edge-aggregation and k (k/2)^2 aggregation-core, i.e. 3 k^3 / 4, plus one GPU-NIC
  // cable per single-GPU host.
  for (const int k : {4, 8}) {
    const Fabric f = test::fabric_from_yaml(
        fmt::format("type: fat_tree\nk: {}\nnode: {{gpus: 1, nic_speed: 100Gbps}}\n", k));
    const size_t hosts = static_cast<size_t>(k * k * k / 4);
    const size_t switches = static_cast<size_t>(5 * k * k / 4);
    const TopologyReport r = analyze(f);
    EXPECT_EQ(r.gpus, hosts) << k;
    EXPECT_EQ(nodes_of(r, "nic"), hosts) << k;
    EXPECT_EQ(nodes_of(r, "leaf") + nodes_of(r, "spine") + nodes_of(r, "core"), switches) << k;
    EXPECT_EQ(nodes_of(r, "core"), static_cast<size_t>(k * k / 4)) << k;
    EXPECT_EQ(nodes_of(r, "nvswitch"), 0u) << k;  // single-GPU hosts
    EXPECT_EQ(f.node_count(), 2 * hosts + switches) << k;
    EXPECT_EQ(f.link_count(), 2 * (hosts + 3 * hosts)) << k;
    // Every switch has k ports.
    for (fabric::NodeId n = 0; n < f.node_count(); ++n) {
      if (f.node(n).kind == fabric::NodeKind::Switch) {
        EXPECT_EQ(f.out_links(n).size(), static_cast<size_t>(k)) << f.node(n).name;
      }
    }
    // Full bisection: every tier boundary carries hosts * 100G upward, half of it crosses.
    EXPECT_DOUBLE_EQ(r.bisection_bps, static_cast<double>(hosts) * 100e9 / 2) << k;
    // Edge and aggregation are 1:1.
    for (const char* role : {"leaf", "spine"}) {
      const TierSubscription* t = subscription_of(r, role);
      ASSERT_NE(t, nullptr) << role;
      EXPECT_DOUBLE_EQ(t->ratio(), 1.0) << role;
    }
  }
}

TEST(FatTree, MultiNicServersFillEdgePorts) {
  // k = 8: 4 host ports per edge, servers of 2 NICs -> 2 servers per edge, 64 servers.
  const Fabric f = test::fabric_from_yaml("type: fat_tree\nk: 8\nnode: {gpus: 4, nics: 2}\n");
  EXPECT_EQ(f.servers().size(), 64u);
  EXPECT_EQ(f.gpu_count(), 256u);
  EXPECT_EQ(f.nics().size(), 128u);
}

// ---- validation errors ----

TEST(BuilderErrors, UplinksNotAMultipleOfSpines) {
  const InputError e = input_error([] {
    (void)test::fabric_from_yaml(
        "type: clos\nracks: 2\nnodes_per_rack: 1\nleaf:\n  uplinks: 6\nspine: {count: 4}\n");
  });
  EXPECT_EQ(e.key(), "leaf.uplinks");
  ASSERT_TRUE(e.where().known());
  EXPECT_EQ(e.where().line, 5);
  EXPECT_EQ(e.where().column, 12);
  EXPECT_TRUE(contains(e.what(), "a multiple of spine.count (4), found 6")) << e.what();
  // The rail-optimized builder checks the same.
  const InputError rail = input_error([] {
    (void)test::fabric_from_yaml(
        "type: rail_optimized\nnodes: 2\nnodes_per_leaf: 2\nleaf: {uplinks: 3}\n"
        "spine: {count: 2}\n");
  });
  EXPECT_EQ(rail.key(), "leaf.uplinks");
  EXPECT_EQ(rail.where().line, 4);
}

TEST(BuilderErrors, SeveralZonesNeedAnAggregationTier) {
  const InputError e = input_error([] {
    (void)test::fabric_from_yaml(
        "type: clos\nzones: 2\nracks: 2\nnodes_per_rack: 1\nleaf: {uplinks: 2}\n"
        "spine: {count: 2}\n");
  });
  EXPECT_EQ(e.key(), "aggregation");
  ASSERT_TRUE(e.where().known());
  EXPECT_EQ(e.where().line, 1);  // absent: located at the topology mapping
  EXPECT_TRUE(contains(e.what(), "an aggregation section when zones > 1")) << e.what();
}

TEST(BuilderErrors, AggregationUplinksNotAMultipleOfCount) {
  const InputError e = input_error([] {
    (void)test::fabric_from_yaml(
        "type: clos\nzones: 2\nracks: 1\nnodes_per_rack: 1\nleaf: {uplinks: 2}\n"
        "spine: {count: 2}\naggregation: {count: 4, uplinks: 6}\n");
  });
  EXPECT_EQ(e.key(), "aggregation.uplinks");
  EXPECT_EQ(e.where().line, 7);
}

TEST(BuilderErrors, FatTreeKMustBeEvenAndFitTheServers) {
  const InputError odd =
      input_error([] { (void)test::fabric_from_yaml("type: fat_tree\n\nk: 5\n"); });
  EXPECT_EQ(odd.key(), "k");
  ASSERT_TRUE(odd.where().known());
  EXPECT_EQ(odd.where().line, 3);
  EXPECT_EQ(odd.where().column, 4);
  EXPECT_TRUE(contains(odd.what(), "an even number >= 2, found 5")) << odd.what();
  const InputError zero = input_error([] { (void)test::fabric_from_yaml("type: fat_tree\nk: 0"); });
  EXPECT_EQ(zero.key(), "k");
  // k/2 = 2 host ports per edge cannot take servers of 8 NICs.
  const InputError nics =
      input_error([] { (void)test::fabric_from_yaml("type: fat_tree\nk: 4\nnode: {gpus: 8}\n"); });
  EXPECT_EQ(nics.key(), "k");
  EXPECT_TRUE(contains(nics.what(), "multiple of the NICs per server (8)")) << nics.what();
}

TEST(BuilderErrors, TableErrorsAreLocated) {
  // Unknown type, missing required key, unknown key with a suggestion, NICs not dividing GPUs.
  const InputError type = input_error([] { (void)test::fabric_from_yaml("type: torus\n"); });
  EXPECT_EQ(type.key(), "type");
  EXPECT_TRUE(contains(type.what(), "'clos', 'rail_optimized', 'fat_tree'")) << type.what();
  const InputError missing = input_error(
      [] { (void)test::fabric_from_yaml("type: clos\nracks: 2\nleaf: {uplinks: 2}\n"); });
  EXPECT_EQ(missing.key(), "nodes_per_rack");
  const InputError typo = input_error([] {
    (void)test::fabric_from_yaml(
        "type: clos\nracks: 2\nnodes_per_rack: 1\nleaf: {uplink: 2}\nspine: {count: 2}\n");
  });
  EXPECT_EQ(typo.key(), "leaf.uplink");
  EXPECT_EQ(typo.where().line, 4);
  EXPECT_TRUE(contains(typo.what(), "did you mean 'uplinks'?")) << typo.what();
  const InputError nics = input_error([] {
    (void)test::fabric_from_yaml(
        "type: clos\nracks: 1\nnodes_per_rack: 1\nnode: {gpus: 8, nics: 3}\nleaf: {uplinks: 1}\n"
        "spine: {count: 1}\n");
  });
  EXPECT_EQ(nics.key(), "node.nics");
  EXPECT_EQ(nics.where().line, 4);
  EXPECT_TRUE(contains(nics.what(), "a divisor or a multiple of gpus (8)")) << nics.what();
  const InputError zero_speed = input_error([] {
    (void)test::fabric_from_yaml(
        "type: clos\nracks: 1\nnodes_per_rack: 1\nleaf: {uplinks: 1, uplink_speed: 0Gbps}\n"
        "spine: {count: 1}\n");
  });
  EXPECT_EQ(zero_speed.key(), "leaf.uplink_speed");
}

// ---- shipped topologies ----

TEST(TopologyFiles, EveryFileBuilds) {
  // GPU counts of the files whose names state them; any other file must still build.
  const std::map<std::string, size_t> expected_gpus = {
      {"ai-zone-128.yaml", 128}, {"ai-zone-4096.yaml", 4096}, {"dc-32768.yaml", 32768},
      {"fat-tree-k8.yaml", 128}, {"rail-1024.yaml", 1024},
  };
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_path("topologies"))) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    SCOPED_TRACE(entry.path().string());
    const Fabric f = scenario::load_topology(entry.path().string());
    EXPECT_TRUE(f.sealed());
    EXPECT_GT(f.gpu_count(), 0u);
    const auto it = expected_gpus.find(entry.path().filename().string());
    if (it != expected_gpus.end()) {
      EXPECT_EQ(f.gpu_count(), it->second);
    }
    const TopologyReport r = analyze(f);
    EXPECT_GT(r.bisection_bps, 0.0);
    EXPECT_FALSE(format_report(r).empty());
  }
  EXPECT_GE(files, expected_gpus.size());
}

TEST(TopologyFiles, DcFabricIsFourToOneAcrossZones) {
  // dc-32768: every spine has 256 x 400G down and 64 x 400G up (4:1); the narrowest tier is
  // spine -> ATSW: 8 zones x 16 spines x 64 x 400G / 2 = 1.6384 Pb/s.
  const Fabric f = scenario::load_topology(test::source_path("topologies/dc-32768.yaml"));
  const TopologyReport r = analyze(f);
  const TierSubscription* spine = subscription_of(r, "spine");
  ASSERT_NE(spine, nullptr);
  EXPECT_DOUBLE_EQ(spine->ratio(), 4.0);
  EXPECT_DOUBLE_EQ(r.bisection_bps, 8.0 * 16 * 64 * 400e9 / 2);
  const TierSubscription* leaf = subscription_of(r, "leaf");
  ASSERT_NE(leaf, nullptr);
  EXPECT_DOUBLE_EQ(leaf->ratio(), 1.0);
}

}  // namespace
}  // namespace rocesim::topology
