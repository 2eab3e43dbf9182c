// Wire framing: the payload share of RoCEv2, InfiniBand and PCIe links, against the arithmetic
// of HARDWARE.md 4.1-4.3, and the capacities a scenario's fabric gets from it.
#include <gtest/gtest.h>

#include "sim/fabric/wire.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::fabric {
namespace {

TEST(Wire, RoceV2FramingPerMtu) {
  // 82 bytes around each payload at IPv4 (8 preamble + 12 IFG + 14 Ethernet + 4 FCS + 20 IPv4
  // + 8 UDP + 12 BTH + 4 ICRC): 1024/1106 = 92.59 %, 2048/2130 = 96.15 %, 4096/4178 = 98.04 %.
  WireFormat w;
  EXPECT_EQ(w.overhead_bytes(), 82);
  for (const auto& [mtu, eff] : {std::pair{1024, 0.9259}, {2048, 0.9615}, {4096, 0.9804}}) {
    w.mtu = mtu;
    EXPECT_NEAR(w.efficiency(), eff, 5e-5) << mtu;
  }
  // An 802.1Q tag adds 4 bytes (4096/4182 = 97.94 %); IPv6 20 more (4096/4198 = 97.57 %).
  w.vlan = true;
  EXPECT_NEAR(w.efficiency(), 0.9794, 5e-5);
  w.vlan = false;
  w.ipv6 = true;
  EXPECT_NEAR(w.efficiency(), 0.9757, 5e-5);
}

TEST(Wire, InfiniBandFramingPerMtu) {
  // LRH 8 + BTH 12 + ICRC 4 + VCRC 2 + delimiter 2 = 28 bytes: 4096/4124 = 99.32 %,
  // 2048/2076 = 98.65 %; NDR 400 Gb/s then carries 49.66 GB/s of payload.
  WireFormat w{.layer = LinkLayer::InfiniBand};
  EXPECT_EQ(w.overhead_bytes(), 28);
  EXPECT_NEAR(w.efficiency(), 0.9932, 5e-5);
  EXPECT_NEAR(400e9 / 8 * w.efficiency() * 1e-9, 49.66, 5e-3);
  w.mtu = 2048;
  EXPECT_NEAR(w.efficiency(), 0.9865, 5e-5);
}

TEST(Wire, PcieRawRateAndTlpOverhead) {
  // Gen4 x16: 16 GT/s x 16 x 128/130 / 8 = 31.51 GB/s; Gen5 doubles it to 63.02 GB/s. A 256-byte
  // write with a 4-DW header carries 24 bytes of TLP overhead: 256/280 = 91.4 %, so Gen5 x16
  // moves 57.61 GB/s of payload and Gen4 x16 28.81; at 512 bytes 512/536 = 95.5 % (60.19 GB/s).
  PcieLink p{.generation = 4};
  EXPECT_NEAR(p.raw().bytes_per_second() * 1e-9, 31.51, 5e-3);
  EXPECT_NEAR(p.payload().bytes_per_second() * 1e-9, 28.81, 5e-3);
  p.generation = 5;
  EXPECT_NEAR(p.raw().bytes_per_second() * 1e-9, 63.02, 5e-3);
  EXPECT_NEAR(p.tlp_efficiency(), 256.0 / 280, 1e-12);
  EXPECT_NEAR(p.payload().bytes_per_second() * 1e-9, 57.61, 5e-3);
  p.max_payload = 512;
  EXPECT_NEAR(p.payload().bytes_per_second() * 1e-9, 60.19, 5e-3);
  // Gen3 x8: 8 GT/s x 8 x 128/130 / 8 = 7.877 GB/s; Gen2 x16 with 8b/10b: 5 x 16 x 0.8 / 8 = 8.
  p = {.generation = 3, .lanes = 8};
  EXPECT_NEAR(p.raw().bytes_per_second() * 1e-9, 7.877, 5e-4);
  p = {.generation = 2, .lanes = 16};
  EXPECT_NEAR(p.raw().bytes_per_second() * 1e-9, 8.0, 1e-9);
  // Gen6 x16 (FLIT mode): 64 GT/s x 16 / 8 x 236/256 = 118.0 GB/s of TLPs; a 256-byte write
  // needs only its 16-byte header there: 256/272 = 94.1 %, 111.06 GB/s of payload.
  p = {.generation = 6};
  EXPECT_NEAR(p.raw().bytes_per_second() * 1e-9, 118.0, 5e-3);
  EXPECT_NEAR(p.payload().bytes_per_second() * 1e-9, 111.06, 5e-3);
}

double link_gbps(const Fabric& f, NodeKind from, NodeKind to, bool line) {
  for (const Link& l : f.links()) {
    if (f.node(l.src).kind == from && f.node(l.dst).kind == to) {
      return static_cast<double>((line ? l.line_rate : l.capacity).bits_per_second()) * 1e-9;
    }
  }
  ADD_FAILURE() << "no such link";
  return 0;
}

TEST(Wire, ScenarioFabricsCarryPayloadRates) {
  // One leaf of InfiniBand NICs at 400 Gb/s with a NIC efficiency of 0.9 and PCIe Gen5 x8:
  // NIC cable 400 x 4096/4124 x 0.9 = 357.556 Gb/s, uplinks 400 x 4096/4124 = 397.28 Gb/s (the
  // NIC efficiency is the NIC's, not the fabric's), PCIe 31.51 x 256/280 = 28.81 GB/s; the
  // reports keep the nominal 400 Gb/s.
  const Fabric f = test::fabric_from_yaml(R"(
type: clos
racks: 1
nodes_per_rack: 2
node: {gpus: 2, nic_speed: 400Gbps, transport: infiniband, nic_efficiency: 0.9, pcie_lanes: 8}
leaf: {uplinks: 4}
spine: {count: 2}
)");
  EXPECT_NEAR(link_gbps(f, NodeKind::Nic, NodeKind::Switch, false), 357.556, 5e-3);
  EXPECT_NEAR(link_gbps(f, NodeKind::Nic, NodeKind::Switch, true), 400, 1e-9);
  EXPECT_NEAR(link_gbps(f, NodeKind::Switch, NodeKind::Switch, false), 397.28, 5e-3);
  EXPECT_NEAR(link_gbps(f, NodeKind::Gpu, NodeKind::Nic, false) / 8, 28.81, 5e-3);
}

TEST(Wire, BadFramingValuesAreLocatedErrors) {
  const auto bad = [](const std::string& node) {
    return test::input_error([&] {
      test::fabric_from_yaml("type: clos\nracks: 1\nnodes_per_rack: 2\nnode: {" + node +
                             "}\nleaf: {uplinks: 4}\nspine: {count: 2}\n");
    });
  };
  EXPECT_EQ(bad("mtu: 1500B").key(), "node.mtu");
  EXPECT_EQ(bad("transport: ethernet").key(), "node.transport");
  EXPECT_EQ(bad("pcie_generation: 7").key(), "node.pcie_generation");
  EXPECT_EQ(bad("pcie_lanes: 12").key(), "node.pcie_lanes");
  EXPECT_EQ(bad("pcie_max_payload: 100B").key(), "node.pcie_max_payload");
  EXPECT_TRUE(test::contains(bad("mtu: 1500B").what(), "power of two"));
}

}  // namespace
}  // namespace rocesim::fabric
