// Hardware presets: a scenario's node section names a server and a NIC from
// topologies/hardware instead of re-deriving them, key by key overridable.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sim/scenario/scenario.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::test {
namespace {

using testing::HasSubstr;

std::string scenario_with(const std::string& node) {
  return "name: presets\ntopology: {type: clos, racks: 1, nodes_per_rack: 2, node: {" + node +
         "}, leaf: {uplinks: 8}, spine: {count: 1}}\n"
         "workloads: [{type: permutation, bytes: 1MiB}]\n";
}

/// Nominal rate in Gb/s of the first link from a node of kind `from` to one of kind `to`.
double line_gbps(const fabric::Fabric& f, fabric::NodeKind from, fabric::NodeKind to) {
  for (const fabric::Link& l : f.links()) {
    if (f.node(l.src).kind == from && f.node(l.dst).kind == to)
      return static_cast<double>(l.line_rate.bits_per_second()) * 1e-9;
  }
  ADD_FAILURE() << "no such link";
  return 0;
}

TEST(HardwarePresets, AServerPresetGivesItsHardware) {
  // hgx-h100: 8 H100 (hopper), NVLink 450 GB/s x 0.824, 8 x ConnectX-7 (400 Gb/s, PCIe Gen5 x16:
  // 57.61 GB/s of payload at a 256-byte max payload).
  const auto run = scenario_from_yaml(scenario_with("server: hgx-h100"));
  const fabric::Fabric& f = run->fabric;
  const fabric::Server& s = f.servers()[0];
  EXPECT_EQ(s.gpus, 8u);
  EXPECT_EQ(s.nics, 8u);
  EXPECT_EQ(s.arch, fabric::GpuArch::Hopper);
  EXPECT_NEAR(line_gbps(f, fabric::NodeKind::Nic, fabric::NodeKind::Switch), 400, 1e-9);
  EXPECT_NEAR(s.scale_up_bandwidth.bytes_per_second() * 1e-9, 450 * 0.824, 1e-6);
  EXPECT_NEAR(line_gbps(f, fabric::NodeKind::Gpu, fabric::NodeKind::Nic) / 8, 57.61, 5e-3);
  EXPECT_THAT(run->effective_yaml, HasSubstr("server: hgx-h100"));
}

TEST(HardwarePresets, WrittenKeysWinOverTheServerWhichWinsOverTheNic) {
  // mi300x names connectx-7 (400 Gb/s); a written nic (connectx-8, 800 Gb/s) replaces it, and a
  // written nic_speed wins over both.
  const auto a = scenario_from_yaml(scenario_with("server: mi300x, nic: connectx-8"));
  EXPECT_NEAR(line_gbps(a->fabric, fabric::NodeKind::Nic, fabric::NodeKind::Switch), 800, 1e-9);
  EXPECT_EQ(a->fabric.servers()[0].scale_up, fabric::ScaleUp::Mesh);
  const auto b = scenario_from_yaml(scenario_with("server: mi300x, nic_speed: 200Gbps"));
  EXPECT_NEAR(line_gbps(b->fabric, fabric::NodeKind::Nic, fabric::NodeKind::Switch), 200, 1e-9);
  const auto c = scenario_from_yaml(scenario_with("nic: pollara-400, gpus: 4"));
  EXPECT_NEAR(line_gbps(c->fabric, fabric::NodeKind::Nic, fabric::NodeKind::Switch), 400, 1e-9);
}

TEST(HardwarePresets, EveryPresetBuilds) {
  // Every server preset, and every NIC preset on a default server, builds a fabric whose NIC
  // cables run at a positive rate.
  const std::filesystem::path dir = source_path("topologies/hardware");
  int servers = 0, nics = 0;
  for (const char* kind : {"servers", "nics"}) {
    for (const auto& e : std::filesystem::directory_iterator(dir / kind)) {
      if (e.path().extension() != ".yaml") continue;
      const std::string key = std::string(kind) == "servers" ? "server" : "nic";
      const auto run = scenario_from_yaml(scenario_with(key + ": " + e.path().stem().string()));
      EXPECT_GT(line_gbps(run->fabric, fabric::NodeKind::Nic, fabric::NodeKind::Switch), 0)
          << e.path();
      ++(key == "server" ? servers : nics);
    }
  }
  EXPECT_GE(servers, 9);
  EXPECT_GE(nics, 7);
}

TEST(HardwarePresets, BadPresetsAreLocatedErrors) {
  const InputError unknown =
      input_error([] { scenario_from_yaml(scenario_with("server: hgx-h900")); });
  EXPECT_EQ(unknown.key(), "topology.node.server");
  EXPECT_THAT(std::string(unknown.what()), HasSubstr("hgx-h100"));  // the known names
  EXPECT_THAT(std::string(unknown.what()), HasSubstr("hgx-h900"));
  // A bad value inside a preset file is reported in that file, at its line.
  const std::string d = temp_dir("presets");
  std::ofstream(d + "/bad.yaml") << "# a preset\ngpus: 8\nnic_speed: fast\n";
  const InputError bad =
      input_error([&] { scenario_from_yaml(scenario_with("server: " + d + "/bad.yaml")); });
  EXPECT_THAT(bad.where().to_string(), HasSubstr("bad.yaml:3:"));
  EXPECT_EQ(bad.key(), "topology.node.nic_speed");
  // A NIC preset cannot name a server.
  std::ofstream(d + "/nested.yaml") << "server: hgx-h100\n";
  const InputError nested =
      input_error([&] { scenario_from_yaml(scenario_with("nic: " + d + "/nested.yaml")); });
  EXPECT_THAT(nested.where().to_string(), HasSubstr("nested.yaml:1:"));
}

std::string scenario_with_switches(const std::string& leaf, const std::string& spine,
                                   int uplinks = 8) {
  return "name: switches\ntopology: {type: clos, racks: 2, nodes_per_rack: 2, node: {gpus: 8}, "
         "leaf: {uplinks: " +
         std::to_string(uplinks) + ", " + leaf + "}, spine: {count: 2, " + spine +
         "}}\nworkloads: [{type: permutation, bytes: 1MiB}]\n";
}

const fabric::Node& first(const fabric::Fabric& f, fabric::SwitchRole role) {
  for (const fabric::Node& n : f.nodes()) {
    if (n.role == role) return n;
  }
  ADD_FAILURE() << "no switch of that role";
  return f.node(0);
}

TEST(HardwarePresets, SwitchPresetsGiveTheirSourcedFiguresAndWrittenKeysWin) {
  // spectrum4: 128 MB of buffer (the leaf's default latency, 500 ns, stays); quantum2: 330 ns
  // (the spine's default 8 GB buffer stays). A written key wins over the preset.
  const auto a =
      scenario_from_yaml(scenario_with_switches("switch: spectrum4", "switch: quantum2"));
  EXPECT_EQ(first(a->fabric, fabric::SwitchRole::Leaf).buffer.shared.count(), 128'000'000);
  EXPECT_EQ(first(a->fabric, fabric::SwitchRole::Leaf).forwarding_latency, Time::ns(500));
  EXPECT_EQ(first(a->fabric, fabric::SwitchRole::Spine).forwarding_latency, Time::ns(330));
  EXPECT_EQ(first(a->fabric, fabric::SwitchRole::Spine).buffer.shared.count(), 8'000'000'000);
  const auto b = scenario_from_yaml(
      scenario_with_switches("switch: spectrum4, buffer: 32MB", "switch: jericho3-ai"));
  EXPECT_EQ(first(b->fabric, fabric::SwitchRole::Leaf).buffer.shared.count(), 32'000'000);
  // An override may name another preset: presets apply after --set.
  scenario::Overrides o;
  o.parameters.push_back(
      {"topology.spine.switch", ConfigNode::scalar("quantum2", SourceLocation{}, "switch")});
  const auto c = scenario::load_scenario_text(
      scenario_with_switches("switch: tomahawk5", "switch: jericho3-ai"), "c", ".", o);
  EXPECT_EQ(first(c->fabric, fabric::SwitchRole::Spine).forwarding_latency, Time::ns(330));
}

TEST(HardwarePresets, EverySwitchPresetBuildsAndChecksItsCapacity) {
  // Each switch preset on the leaves and spines of a small Clos builds (16 x 400G NICs and
  // 8 x 400G uplinks per leaf: 9.6 Tb/s, within every preset's capacity). With 64 uplinks a
  // leaf has 16 x 400G + 64 x 400G = 32 Tb/s of ports: more than a Quantum-2's 25.6 Tb/s, an
  // error located in the preset file at its capacity.
  int count = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(source_path("topologies/hardware/switches"))) {
    if (e.path().extension() != ".yaml") continue;
    const std::string name = e.path().stem().string();
    const auto run =
        scenario_from_yaml(scenario_with_switches("switch: " + name, "switch: " + name));
    EXPECT_GT(run->fabric.link_count(), 0u) << name;
    ++count;
  }
  EXPECT_GE(count, 4);
  const auto err =
      input_error([] { scenario_from_yaml(scenario_with_switches("switch: quantum2", "", 64)); });
  EXPECT_EQ(err.key(), "topology.leaf.capacity");
  EXPECT_THAT(err.where().to_string(), HasSubstr("quantum2.yaml"));
  EXPECT_THAT(err.what(), HasSubstr("leaf0"));
  const auto unknown =
      input_error([] { scenario_from_yaml(scenario_with_switches("switch: tomahawk9", "")); });
  EXPECT_THAT(unknown.what(), HasSubstr("a switch preset"));
  EXPECT_THAT(unknown.what(), HasSubstr("spectrum4"));
}

}  // namespace
}  // namespace rocesim::test
