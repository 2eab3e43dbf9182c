// The fabric graph: build then seal (validation with located errors), the address plan, the
// RoCEv2 UDP source port rule and QP number allocation, and GPU selections.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "sim/fabric/fabric.hpp"
#include "sim/fabric/gpu_selection.hpp"
#include "sim/fabric/roce.hpp"
#include "sim/scenario/yaml_source.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::fabric {
namespace {

using test::contains;
using test::input_error;

const SourceLocation kWhere{std::make_shared<const std::string>("topo.yaml"), 3, 5};

/// Single-GPU servers hanging off one leaf switch, cabled at `nic_speed`.
struct Tiny {
  Fabric f;
  NodeId leaf = kNone;
  std::vector<NodeId> gpus, nics;
};

Tiny tiny(uint32_t servers, Bandwidth nic_speed = Bandwidth::gbps(400)) {
  Tiny t;
  t.leaf = t.f.add_node(
      Node{.kind = NodeKind::Switch, .role = SwitchRole::Leaf, .tier = 1, .name = "leaf"});
  for (uint32_t s = 0; s < servers; ++s) {
    const NodeId g =
        t.f.add_node(Node{.kind = NodeKind::Gpu, .server = s, .name = fmt::format("gpu{}", s)});
    const NodeId n =
        t.f.add_node(Node{.kind = NodeKind::Nic, .server = s, .name = fmt::format("nic{}", s)});
    t.f.add_cable(g, n, Bandwidth::gbps(400), Time::ns(500));
    t.f.add_cable(n, t.leaf, nic_speed, Time::ns(50));
    Server srv;
    srv.first_gpu = g;
    srv.gpus = 1;
    srv.first_nic = n;
    srv.nics = 1;
    t.f.add_server(srv);
    t.gpus.push_back(g);
    t.nics.push_back(n);
  }
  return t;
}

// ---- build and seal ----

TEST(Fabric, SealedFabricAnswersQueries) {
  Tiny t = tiny(3);
  t.f.seal(kWhere);
  const Fabric& f = t.f;
  ASSERT_TRUE(f.sealed());
  EXPECT_EQ(f.node_count(), 7u);
  EXPECT_EQ(f.link_count(), 12u);  // two cables per server, two directions each
  EXPECT_EQ(f.gpu_count(), 3u);
  for (uint32_t r = 0; r < 3; ++r) {
    EXPECT_EQ(f.gpu(r), t.gpus[r]);
    EXPECT_EQ(f.rank_of(t.gpus[r]), r);
    EXPECT_EQ(f.nic_of_gpu(t.gpus[r]), t.nics[r]);
    EXPECT_EQ(f.first_hop_switch(t.nics[r]), t.leaf);
  }
  EXPECT_EQ(std::vector<NodeId>(f.nics().begin(), f.nics().end()), t.nics);
  EXPECT_EQ(f.find("nic1"), t.nics[1]);
  EXPECT_EQ(f.find("nope"), kNone);
  // Every cable is two links that know each other; adjacency lists agree with the links.
  for (LinkId l = 0; l < f.link_count(); ++l) {
    const Link& link = f.link(l);
    ASSERT_NE(link.reverse, kNone);
    EXPECT_EQ(f.link(link.reverse).reverse, l);
    EXPECT_EQ(f.link(link.reverse).src, link.dst);
    EXPECT_EQ(f.link(link.reverse).dst, link.src);
    const auto out = f.out_links(link.src);
    EXPECT_NE(std::find(out.begin(), out.end(), l), out.end());
    const auto in = f.in_links(link.dst);
    EXPECT_NE(std::find(in.begin(), in.end(), l), in.end());
  }
  EXPECT_EQ(f.out_links(t.leaf).size(), 3u);
  EXPECT_EQ(f.in_links(t.leaf).size(), 3u);
  // Link classes in order of first appearance.
  EXPECT_EQ(std::vector<std::string>(f.link_classes().begin(), f.link_classes().end()),
            (std::vector<std::string>{"gpu->nic", "nic->gpu", "nic->leaf", "leaf->nic"}));
}

TEST(Fabric, SealRejectsADisconnectedFabric) {
  Tiny t = tiny(2);
  t.f.add_node(Node{.kind = NodeKind::Switch, .role = SwitchRole::Spine, .name = "island"});
  const InputError e = input_error([&] { t.f.seal(kWhere); });
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.where().column, 5);
  EXPECT_TRUE(contains(e.what(), "topo.yaml:3:5: error:")) << e.what();
  EXPECT_TRUE(contains(e.what(), "disconnected")) << e.what();
  EXPECT_TRUE(contains(e.what(), "'island'")) << e.what();
  EXPECT_FALSE(t.f.sealed());
}

TEST(Fabric, SealRejectsAOneWayLink) {
  // Reachable in one direction only: not strongly connected, so replies could not come back.
  Fabric f;
  const NodeId a =
      f.add_node(Node{.kind = NodeKind::Switch, .role = SwitchRole::Leaf, .name = "a"});
  const NodeId b =
      f.add_node(Node{.kind = NodeKind::Switch, .role = SwitchRole::Leaf, .name = "b"});
  f.add_link(a, b, Bandwidth::gbps(100), Time::zero());
  EXPECT_TRUE(contains(input_error([&] { f.seal(kWhere); }).what(), "disconnected"));
}

TEST(Fabric, SealRejectsZeroCapacity) {
  Tiny t = tiny(2, Bandwidth::bps(0));
  const InputError e = input_error([&] { t.f.seal(kWhere); });
  EXPECT_TRUE(e.where().known());
  EXPECT_TRUE(contains(e.what(), "capacities must be positive")) << e.what();
  EXPECT_TRUE(contains(e.what(), "nic0 -> leaf")) << e.what();
}

TEST(Fabric, SealRejectsNegativeLatency) {
  Tiny t = tiny(1);
  t.f.add_cable(t.nics[0], t.leaf, Bandwidth::gbps(100), Time::ns(-1));
  EXPECT_TRUE(contains(input_error([&] { t.f.seal(kWhere); }).what(), "negative latency"));
}

TEST(Fabric, SealRejectsAnEmptyFabric) {
  Fabric f;
  EXPECT_TRUE(contains(input_error([&] { f.seal(kWhere); }).what(), "no nodes"));
}

TEST(Fabric, SealRejectsDuplicateNames) {
  Tiny t = tiny(2);
  const NodeId dup =
      t.f.add_node(Node{.kind = NodeKind::Switch, .role = SwitchRole::Spine, .name = "leaf"});
  t.f.add_cable(dup, t.leaf, Bandwidth::gbps(400), Time::zero());
  EXPECT_TRUE(
      contains(input_error([&] { t.f.seal(kWhere); }).what(), "two nodes are named 'leaf'"));
}

TEST(Fabric, SealRejectsAGpuOutsideEveryServer) {
  Tiny t = tiny(1);
  const NodeId g = t.f.add_node(Node{.kind = NodeKind::Gpu, .name = "stray"});
  t.f.add_cable(g, t.nics[0], Bandwidth::gbps(400), Time::zero());
  EXPECT_TRUE(
      contains(input_error([&] { t.f.seal(kWhere); }).what(), "GPU 'stray' belongs to no server"));
}

TEST(Fabric, SealRejectsNicsThatDoNotDivideGpus) {
  Fabric f;
  const NodeId leaf =
      f.add_node(Node{.kind = NodeKind::Switch, .role = SwitchRole::Leaf, .name = "leaf"});
  Server s;
  for (uint32_t i = 0; i < 3; ++i) {
    const NodeId g = f.add_node(
        Node{.kind = NodeKind::Gpu, .server = 0, .local = i, .name = fmt::format("g{}", i)});
    if (i == 0) s.first_gpu = g;
  }
  for (uint32_t i = 0; i < 2; ++i) {
    const NodeId n = f.add_node(
        Node{.kind = NodeKind::Nic, .server = 0, .local = i, .name = fmt::format("n{}", i)});
    if (i == 0) s.first_nic = n;
    f.add_cable(n, leaf, Bandwidth::gbps(400), Time::zero());
  }
  for (uint32_t i = 0; i < 3; ++i)
    f.add_cable(s.first_gpu + i, s.first_nic + i % 2, Bandwidth::gbps(400), Time::zero());
  s.gpus = 3;
  s.nics = 2;
  f.add_server(s);
  EXPECT_TRUE(contains(input_error([&] { f.seal(kWhere); }).what(), "3 GPUs and 2 NICs"));
}

TEST(Fabric, SealedFabricIsFrozen) {
  Tiny t = tiny(2);
  t.f.seal(kWhere);
  EXPECT_THROW(t.f.add_node(Node{.name = "late"}), InternalError);
  EXPECT_THROW(t.f.add_cable(t.nics[0], t.leaf, Bandwidth::gbps(1), Time::zero()), InternalError);
  EXPECT_THROW(t.f.seal(kWhere), InternalError);
}

TEST(Fabric, GpusShareNicsWhenAServerHasFewerNics) {
  // 8 GPUs and 4 NICs: GPU i sends through NIC i * nics / gpus = i / 2.
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
racks: 1
nodes_per_rack: 2
node: {gpus: 8, nics: 4}
leaf: {uplinks: 2}
spine: {count: 2}
)");
  for (const Server& s : f.servers()) {
    ASSERT_EQ(s.gpus, 8u);
    ASSERT_EQ(s.nics, 4u);
    for (uint32_t i = 0; i < 8; ++i)
      EXPECT_EQ(f.nic_of_gpu(s.first_gpu + i), s.first_nic + i / 2);
  }
  // Ranks are server-major.
  EXPECT_EQ(f.rank_of(f.servers()[1].first_gpu + 3), 11u);
  EXPECT_EQ(f.node(f.gpu(11)).name, "node1/gpu3");
}

// ---- address plan ----

TEST(AddressPlan, OneSubnetPerLeafWithDistinctAddresses) {
  // 3 leaves of 2 servers x 4 NICs: 8 NICs per leaf. Each leaf gets the smallest power-of-two
  // block that holds its NICs plus network and broadcast addresses: 8 + 2 <= 16, a /28. Leaf k
  // takes 10.0.0.(16k) / 28 and numbers its NICs from .16k+1 in node order.
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
racks: 3
nodes_per_rack: 2
node: {gpus: 4}
leaf: {uplinks: 2}
spine: {count: 2}
)");
  ASSERT_EQ(f.nics().size(), 24u);
  std::set<uint32_t> seen;
  std::map<NodeId, std::vector<uint32_t>> by_leaf;
  for (const NodeId nic : f.nics()) {
    const uint32_t ip = f.ip_of(nic);
    EXPECT_EQ(ip >> 24, 10u) << ip_to_string(ip);
    EXPECT_TRUE(seen.insert(ip).second) << "duplicate " << ip_to_string(ip);
    by_leaf[f.first_hop_switch(nic)].push_back(ip);
  }
  ASSERT_EQ(by_leaf.size(), 3u);
  for (const auto& [leaf, ips] : by_leaf) {
    const uint32_t k = f.node(leaf).local;
    ASSERT_EQ(ips.size(), 8u);
    for (uint32_t i = 0; i < 8; ++i) {
      EXPECT_EQ(ips[i], 0x0A000000u + 16 * k + 1 + i) << ip_to_string(ips[i]);
      // Same block for the whole leaf; never the network (.0) or broadcast (.15) address.
      EXPECT_EQ((ips[i] & 0xFFu) >> 4, k);
      EXPECT_NE(ips[i] & 0xFu, 0u);
      EXPECT_NE(ips[i] & 0xFu, 0xFu);
    }
  }
  const NodeId first = f.find("node0/nic0");
  EXPECT_EQ(ip_to_string(f.ip_of(first)), "10.0.0.1");
  EXPECT_EQ(ip_to_string(f.ip_of(f.find("node2/nic3"))), "10.0.0.20");  // leaf 1, 4th NIC
}

TEST(AddressPlan, ReservesNetworkAndBroadcastAddresses) {
  // 7 NICs per leaf: 7 + 2 = 9 addresses do not fit a /29 (8), so every leaf gets a /28 (16):
  // leaf k's NICs are 16k + 1 ... 16k + 7, and no NIC takes .16k + 7 of a /29 broadcast.
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
racks: 3
nodes_per_rack: 7
node: {gpus: 1}
leaf: {uplinks: 2}
spine: {count: 2}
)");
  for (const NodeId nic : f.nics()) {
    const uint32_t k = f.node(f.first_hop_switch(nic)).local;
    const uint32_t port = f.node(nic).server % 7;
    EXPECT_EQ(f.ip_of(nic), 0x0A000000u + 16 * k + 1 + port) << ip_to_string(f.ip_of(nic));
  }
}

TEST(AddressPlan, GrowsBeyondOneOctet) {
  // 20 leaves of 16 NICs: 16 + 2 needs a /27 (32 addresses); leaf 10 starts at host 320 + 1 =
  // 10.0.1.65.
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
racks: 20
nodes_per_rack: 2
node: {gpus: 8}
leaf: {uplinks: 2}
spine: {count: 2}
)");
  EXPECT_EQ(ip_to_string(f.ip_of(f.find("node20/nic0"))), "10.0.1.65");
  EXPECT_EQ(ip_to_string(f.ip_of(f.find("node39/nic7"))), "10.0.2.112");  // leaf 19, NIC 16
}

TEST(AddressPlan, RailLeavesGroupNicsOfOneRail) {
  // Rail-optimized: NIC k of every server sits on rail k's leaf, so a subnet holds one NIC per
  // server and NICs of one server are spread over all subnets.
  const Fabric f = test::fabric_from_yaml(R"(
type: rail_optimized
nodes: 4
nodes_per_leaf: 4
node: {gpus: 4}
leaf: {uplinks: 2}
spine: {count: 2}
)");
  std::set<uint32_t> subnets_of_server0;
  for (uint32_t k = 0; k < 4; ++k) {
    const NodeId nic = f.servers()[0].first_nic + k;
    subnets_of_server0.insert(f.ip_of(nic) >> 3);  // 4 + 2 <= 8: /29 blocks
    for (uint32_t s = 1; s < 4; ++s) {
      EXPECT_EQ(f.ip_of(f.servers()[s].first_nic + k) >> 3, f.ip_of(nic) >> 3);
    }
  }
  EXPECT_EQ(subnets_of_server0.size(), 4u);
  EXPECT_EQ(ip_to_string(0xC0A80101u), "192.168.1.1");
}

// ---- RoCEv2 UDP source port ----

TEST(RoceSourcePort, MatchesTheLinuxFormulaWorkedByHand) {
  // rdma_get_udp_sport(): fl = lqpn * rqpn; fl ^= fl >> 20; fl ^= fl >> 40; fl &= 0xFFFFF;
  // sport = 0xC000 | ((fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)).
  //
  // lqpn 2, rqpn 3: fl = 6, no high bits to fold: sport = 0xC006.
  EXPECT_EQ(linux_roce_udp_sport(2, 3), 0xC006);
  // lqpn 0x100, rqpn 0x1000: fl = 0x100000; fl ^= fl >> 20 -> 0x100001; & 0xFFFFF -> 0x00001;
  // sport = 0xC001.
  EXPECT_EQ(linux_roce_udp_sport(0x100, 0x1000), 0xC001);
  // lqpn 0x123456, rqpn 0x654321: fl = 0x7336BF94116;
  //   fl >> 20 = 0x7336BF, fl ^= -> 0x7336B8A77A9;
  //   fl >> 40 = 0x7,      fl ^= -> 0x7336B8A77AE;
  //   fl & 0xFFFFF = 0xA77AE; low 14 bits 0x37AE, bits 14-19 0x29; 0x37AE ^ 0x29 = 0x3787;
  //   sport = 0xC000 | 0x3787 = 0xF787.
  EXPECT_EQ(linux_roce_udp_sport(0x123456, 0x654321), 0xF787);
  // lqpn 0xABCDE, rqpn 0x12345: fl = 0xC379541D6; fl ^= fl >> 20 (0xC379) -> 0xC379582AF;
  //   fl >> 40 = 0; & 0xFFFFF = 0x582AF; 0x02AF ^ 0x16 = 0x02B9; sport = 0xC2B9.
  EXPECT_EQ(linux_roce_udp_sport(0xABCDE, 0x12345), 0xC2B9);
  // Usable in constant expressions.
  static_assert(linux_roce_udp_sport(2, 3) == 0xC006);
}

TEST(RoceSourcePort, AlwaysInTheDynamicRangeAndSymmetric) {
  RandomStream rng(5, "test/sport");
  std::set<uint16_t> ports;
  for (int i = 0; i < 100000; ++i) {
    const auto l = static_cast<uint32_t>(rng.below(1u << 24));
    const auto r = static_cast<uint32_t>(rng.below(1u << 24));
    const uint16_t p = linux_roce_udp_sport(l, r);
    ASSERT_GE(p, 0xC000);
    ASSERT_LE(p, 0xFFFF);
    // A product of the two QP numbers: both ends compute the same port.
    ASSERT_EQ(p, linux_roce_udp_sport(r, l));
    ports.insert(p);
  }
  // The 14 low bits carry the entropy: 100000 random pairs cover nearly all 16384 ports
  // (expected missing: 16384 * exp(-100000/16384) = 36).
  EXPECT_GT(ports.size(), 16200u);
}

// ---- QP allocation ----

Fabric small_clos() {
  return test::fabric_from_yaml(R"(
type: clos
racks: 2
nodes_per_rack: 2
node: {gpus: 4}
leaf: {uplinks: 2}
spine: {count: 2}
)");
}

TEST(QpAllocator, QpnsIncreaseByOnePerNic) {
  const Fabric f = small_clos();
  const NodeId a = f.nics()[0], b = f.nics()[5], c = f.nics()[9];
  QpAllocator qa(f, 1, SourcePortPolicy::Linux);
  const QpAllocator::Qp first = qa.open(a, b);
  const QpAllocator::Qp second = qa.open(a, b);
  const QpAllocator::Qp third = qa.open(a, c);  // a's counter moves on, b's does not
  const QpAllocator::Qp fourth = qa.open(c, b);
  EXPECT_EQ(second.local_qpn, first.local_qpn + 1);
  EXPECT_EQ(second.remote_qpn, first.remote_qpn + 1);
  EXPECT_EQ(third.local_qpn, first.local_qpn + 2);
  EXPECT_EQ(fourth.local_qpn, third.remote_qpn + 1);  // c: remote of the third, then local
  EXPECT_EQ(fourth.remote_qpn, first.remote_qpn + 2);
  // Bases are per NIC (seeded), in [0x100, 0x800100), within the 24-bit QPN field.
  for (const QpAllocator::Qp& q : {first, second, third, fourth}) {
    EXPECT_GE(q.local_qpn, 0x100u);
    EXPECT_LT(q.local_qpn, 0x800100u + 4);
    EXPECT_GE(q.remote_qpn, 0x100u);
    EXPECT_LT(q.remote_qpn, 0x800100u + 4);
    EXPECT_EQ(q.src_port, linux_roce_udp_sport(q.local_qpn, q.remote_qpn));
  }
  EXPECT_NE(first.local_qpn, first.remote_qpn);
}

std::vector<QpAllocator::Qp> open_many(const Fabric& f, uint64_t seed, SourcePortPolicy policy) {
  QpAllocator qa(f, seed, policy);
  std::vector<QpAllocator::Qp> out;
  for (size_t i = 0; i < f.nics().size(); ++i) {
    for (size_t j = 0; j < f.nics().size(); ++j) {
      if (i != j) out.push_back(qa.open(f.nics()[i], f.nics()[j]));
    }
  }
  return out;
}

bool same(const std::vector<QpAllocator::Qp>& a, const std::vector<QpAllocator::Qp>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].local_qpn != b[i].local_qpn || a[i].remote_qpn != b[i].remote_qpn ||
        a[i].src_port != b[i].src_port) {
      return false;
    }
  }
  return true;
}

TEST(QpAllocator, DeterministicPerSeed) {
  const Fabric f = small_clos();
  for (const SourcePortPolicy p : {SourcePortPolicy::Linux, SourcePortPolicy::Random}) {
    EXPECT_TRUE(same(open_many(f, 7, p), open_many(f, 7, p)));
    EXPECT_FALSE(same(open_many(f, 7, p), open_many(f, 8, p)));
  }
}

TEST(QpAllocator, NicsStartAtDifferentBases) {
  const Fabric f = small_clos();
  QpAllocator qa(f, 3, SourcePortPolicy::Linux);
  std::set<uint32_t> bases;
  for (size_t i = 0; i + 1 < f.nics().size(); i += 2)
    bases.insert(qa.open(f.nics()[i], f.nics()[i + 1]).local_qpn);
  EXPECT_EQ(bases.size(), f.nics().size() / 2);
}

TEST(QpAllocator, RandomPolicyDrawsPortsUniformly) {
  // 16384 possible ports; 240 QPs among 16 NICs should hit almost all-distinct ports in the
  // dynamic range (expected collisions 240^2 / (2 * 16384) = 1.8).
  const Fabric f = small_clos();
  const auto qps = open_many(f, 11, SourcePortPolicy::Random);
  std::set<uint16_t> ports;
  for (const QpAllocator::Qp& q : qps) {
    EXPECT_GE(q.src_port, 49152);
    ports.insert(q.src_port);
  }
  EXPECT_GT(ports.size(), qps.size() - 10);
  EXPECT_EQ(parse_source_port_policy("random"), SourcePortPolicy::Random);
  EXPECT_EQ(parse_source_port_policy("linux"), SourcePortPolicy::Linux);
}

TEST(QpAllocator, FlowKeyCarriesTheWireHeader) {
  const Fabric f = small_clos();
  const NodeId a = f.nics()[1], b = f.nics()[12];
  QpAllocator qa(f, 1, SourcePortPolicy::Linux);
  const QpAllocator::Qp q = qa.open(a, b);
  const FlowKey k = qa.key(f, a, b, q);
  EXPECT_EQ(k.src_ip, f.ip_of(a));
  EXPECT_EQ(k.dst_ip, f.ip_of(b));
  EXPECT_EQ(k.src_port, q.src_port);
  EXPECT_EQ(k.dst_port, 4791);
  EXPECT_EQ(k.protocol, 17);
  EXPECT_EQ(k.dst_qpn, q.remote_qpn);
}

// ---- GPU selections ----

TEST(GpuSelection, AllRangesStridesListsAndNames) {
  const Fabric f = small_clos();  // 4 servers x 4 GPUs
  auto sel = [&](const std::string& text) {
    const ConfigNode root = scenario::load_yaml_text("ranks: " + text + "\n", "sel.yaml");
    std::vector<uint32_t> ranks;
    for (const NodeId g : select_gpus(*root.find("ranks"), f))
      ranks.push_back(f.rank_of(g));
    return ranks;
  };
  EXPECT_EQ(sel("all").size(), 16u);
  EXPECT_EQ(sel("2-5"), (std::vector<uint32_t>{2, 3, 4, 5}));
  EXPECT_EQ(sel("0-15:4"), (std::vector<uint32_t>{0, 4, 8, 12}));
  EXPECT_EQ(sel("[7, 0, node2/gpu1]"), (std::vector<uint32_t>{7, 0, 9}));
  for (const char* bad : {"16-17", "5-2", "x", "[0, 0]", "[node9/gpu0]", "[16]", "0-3:0"}) {
    const ConfigNode root = scenario::load_yaml_text(std::string("ranks: ") + bad + "\n", "s.yaml");
    const InputError e = input_error([&] { (void)select_gpus(*root.find("ranks"), f); });
    EXPECT_EQ(e.where().line, 1) << bad;
  }
  const ConfigNode sw = scenario::load_yaml_text("via: spine1\nbad: node0/nvswitch\n", "s.yaml");
  EXPECT_EQ(f.node(select_switch(*sw.find("via"), f)).name, "spine1");
  EXPECT_THROW((void)select_switch(*sw.find("bad"), f), InputError);
}

}  // namespace
}  // namespace rocesim::fabric
