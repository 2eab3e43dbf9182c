// The scale-up domain inside a server: the NVSwitch (every GPU one link to a non-blocking switch
// node) and the AMD xGMI full mesh (one direct link per GPU pair). Counts and capacities from
// closed forms, the report's link classes, one-hop routing between two GPUs of a mesh, what
// flows see (distinct links per peer against one shared NVSwitch link), and located errors.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sim/routing/router.hpp"
#include "sim/scenario/yaml_source.hpp"
#include "sim/topology/report.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::topology {
namespace {

using fabric::Fabric;
using fabric::LinkId;
using fabric::NodeId;
using test::contains;
using test::input_error;

/// One leaf, two servers of `gpus` GPUs (one NIC each), with the given node keys.
std::string two_servers(uint32_t gpus, const std::string& node_keys) {
  return fmt::format(
      "type: clos\nracks: 1\nnodes_per_rack: 2\nnode: {{gpus: {}{}}}\nleaf: {{uplinks: {}}}\n"
      "spine: {{count: 1}}\n",
      gpus, node_keys, 2 * gpus);
}

const LinkClassCount* links_of(const TopologyReport& r, const std::string& cls) {
  for (const LinkClassCount& c : r.links) {
    if (c.name == cls) return &c;
  }
  return nullptr;
}

size_t nodes_of(const TopologyReport& r, const std::string& role) {
  for (const RoleCount& c : r.nodes) {
    if (c.name == role) return c.nodes;
  }
  return 0;
}

routing::RouteRequest request(NodeId src, NodeId dst, NodeId relay = fabric::kNone) {
  routing::RouteRequest r;
  r.src = src;
  r.dst = dst;
  r.relay = relay;
  return r;
}

std::unique_ptr<routing::Router> ecmp(const Fabric& f) {
  return test::router_from_yaml(f, "{scheme: ecmp}");
}

// ---- counts and capacities ----

TEST(MeshScaleUp, CountsAndCapacitiesFromClosedForms) {
  // MI300X-like: 8 GPUs, 7 xGMI links each of 64 GB/s raw per direction at efficiency 0.75.
  // A mesh server has G + G nodes (no NVSwitch) and G (G - 1) GPU-GPU links plus 2G PCIe links
  // and 2G NIC cable links. Two servers, U = 16 uplinks:
  //   nodes = 2 (8 + 8) + 1 leaf + 1 spine         = 34
  //   links = 2 (8 * 7 + 2 * 8 + 2 * 8) + 2 * 16  = 208
  // Each GPU-GPU link carries 64 GB/s x 0.75 = 48 GB/s = 384 Gb/s of payload, a GPU 7 x 48 =
  // 336 GB/s; the report quotes the raw 512 Gb/s line rate: 112 links, 57.344 Tb/s.
  const Fabric f = test::fabric_from_yaml(
      two_servers(8, ", scale_up: mesh, xgmi_link_bandwidth: 64GB/s, xgmi_efficiency: 0.75"));
  EXPECT_EQ(f.node_count(), 34u);
  EXPECT_EQ(f.link_count(), 208u);
  EXPECT_EQ(f.find("node0/nvswitch"), fabric::kNone);
  for (const fabric::Server& s : f.servers()) {
    EXPECT_EQ(s.scale_up, fabric::ScaleUp::Mesh);
    EXPECT_EQ(s.nvswitch, fabric::kNone);
    EXPECT_EQ(s.scale_up_links, 7u);
    EXPECT_EQ(s.scale_up_link_bandwidth.bits_per_second(), 384'000'000'000);
    EXPECT_EQ(s.scale_up_bandwidth.bits_per_second(), 7 * 384'000'000'000);
    EXPECT_EQ(s.scale_up_latency, Time::ns(250));  // the default xgmi_latency, one hop
  }
  size_t gpu_gpu = 0;
  for (const NodeId g : f.gpus()) {
    EXPECT_DOUBLE_EQ(f.scale_up_bandwidth(g).bytes_per_second(), 336e9);
    // Exactly one link to each of the 7 other GPUs of its server, none elsewhere.
    std::set<NodeId> peers;
    for (const LinkId l : f.out_links(g)) {
      const fabric::Link& link = f.link(l);
      if (f.node(link.dst).kind != fabric::NodeKind::Gpu) continue;
      ++gpu_gpu;
      EXPECT_EQ(f.node(link.dst).server, f.node(g).server);
      EXPECT_TRUE(peers.insert(link.dst).second) << f.node(g).name;
      EXPECT_EQ(link.capacity.bits_per_second(), 384'000'000'000);
      EXPECT_EQ(link.line_rate.bits_per_second(), 512'000'000'000);
      EXPECT_EQ(link.latency, Time::ns(250));
      ASSERT_NE(link.reverse, fabric::kNone);
      EXPECT_EQ(f.link(link.reverse).src, link.dst);
      EXPECT_EQ(f.link_classes()[link.link_class], "gpu->gpu");
    }
    EXPECT_EQ(peers.size(), 7u) << f.node(g).name;
  }
  EXPECT_EQ(gpu_gpu, 2u * 8 * 7);

  const TopologyReport r = analyze(f);
  EXPECT_EQ(nodes_of(r, "nvswitch"), 0u);
  const LinkClassCount* mesh = links_of(r, "gpu->gpu");
  ASSERT_NE(mesh, nullptr);
  EXPECT_EQ(mesh->links, 112u);
  EXPECT_DOUBLE_EQ(mesh->capacity_bps, 112 * 512e9);
  EXPECT_EQ(links_of(r, "gpu->nvswitch"), nullptr);
  EXPECT_EQ(links_of(r, "nvswitch->gpu"), nullptr);
  EXPECT_EQ(links_of(r, "gpu->nic")->links, 16u);
  // GPUs take no part in subscription and bisection: the leaf's own figures, as without a mesh.
  EXPECT_DOUBLE_EQ(r.bisection_bps, 16 * 400e9 / 2);
  const std::string text = format_report(r);
  EXPECT_TRUE(contains(text, "gpu->gpu")) << text;
  EXPECT_TRUE(contains(text, "57.3 Tb/s total")) << text;
  EXPECT_FALSE(contains(text, "nvswitch")) << text;
}

TEST(MeshScaleUp, LinkCountIsGTimesGMinusOnePerServer) {
  // G = 2, 4, 8: G (G - 1) GPU-GPU links per server, against 2G GPU-NVSwitch links for the
  // switch; a single-GPU server has neither.
  for (const uint32_t g : {1u, 2u, 4u, 8u}) {
    const Fabric mesh = test::fabric_from_yaml(two_servers(g, ", scale_up: mesh"));
    const Fabric nvs = test::fabric_from_yaml(two_servers(g, ""));
    const TopologyReport rm = analyze(mesh);
    const TopologyReport rn = analyze(nvs);
    const size_t expected = 2 * size_t{g} * (g - 1);
    const LinkClassCount* m = links_of(rm, "gpu->gpu");
    EXPECT_EQ(m == nullptr ? 0 : m->links, expected) << g;
    EXPECT_EQ(mesh.servers()[0].scale_up_links, g - 1) << g;
    EXPECT_EQ(nodes_of(rn, "nvswitch"), g > 1 ? 2u : 0u) << g;
    EXPECT_EQ(nvs.servers()[0].scale_up_links, g > 1 ? 1u : 0u) << g;
    // Mesh: no NVSwitch node; G (G - 1) instead of 2G scale-up links per server.
    EXPECT_EQ(mesh.node_count() + (g > 1 ? 2 : 0), nvs.node_count()) << g;
    EXPECT_EQ(mesh.link_count() + (g > 1 ? 2 * 2 * size_t{g} : 0), nvs.link_count() + expected)
        << g;
  }
}

TEST(NvSwitchScaleUp, ServerFiguresAreTheNvlinkLink) {
  // The default interior: one 450 GB/s link per GPU to the NVSwitch at efficiency 0.5, 250 ns
  // each way: 225 GB/s per GPU, 500 ns from GPU to GPU.
  const Fabric f = test::fabric_from_yaml(two_servers(8, ", nvlink_efficiency: 0.5"));
  const fabric::Server& s = f.servers()[1];
  EXPECT_EQ(s.scale_up, fabric::ScaleUp::NvSwitch);
  EXPECT_EQ(s.nvswitch, f.find("node1/nvswitch"));
  EXPECT_EQ(s.scale_up_links, 1u);
  EXPECT_DOUBLE_EQ(s.scale_up_link_bandwidth.bytes_per_second(), 225e9);
  EXPECT_DOUBLE_EQ(f.scale_up_bandwidth(f.find("node1/gpu3")).bytes_per_second(), 225e9);
  EXPECT_EQ(s.scale_up_latency, Time::ns(500));
}

// ---- paths ----

TEST(MeshScaleUp, ATransferBetweenTwoGpusOfAServerTakesOneHop) {
  const Fabric mesh = test::fabric_from_yaml(two_servers(8, ", scale_up: mesh"));
  const Fabric nvs = test::fabric_from_yaml(two_servers(8, ""));
  auto mesh_router = ecmp(mesh);
  auto nvs_router = ecmp(nvs);
  std::vector<LinkId> path;
  for (uint32_t i = 0; i < 8; ++i) {
    for (uint32_t j = 0; j < 8; ++j) {
      if (i == j) continue;
      const NodeId a = mesh.find(fmt::format("node1/gpu{}", i));
      const NodeId b = mesh.find(fmt::format("node1/gpu{}", j));
      mesh_router->route(request(a, b), path);
      ASSERT_EQ(path.size(), 1u) << i << "->" << j;
      EXPECT_EQ(mesh.link(path[0]).src, a);
      EXPECT_EQ(mesh.link(path[0]).dst, b);
      // Through the NVSwitch: two hops.
      nvs_router->route(
          request(nvs.find(fmt::format("node1/gpu{}", i)), nvs.find(fmt::format("node1/gpu{}", j))),
          path);
      ASSERT_EQ(path.size(), 2u);
      EXPECT_EQ(nvs.link(path[0]).dst, nvs.find("node1/nvswitch"));
    }
  }
  // A relay (PXN): the hop to the relay GPU is its direct link, then the relay's NIC sends.
  const NodeId src = mesh.find("node0/gpu0"), relay = mesh.find("node0/gpu3");
  mesh_router->route(request(src, mesh.find("node1/gpu3"), relay), path);
  ASSERT_EQ(path.size(), 5u);  // gpu0 -> gpu3 -> nic3 -> leaf -> node1/nic3 -> node1/gpu3
  EXPECT_EQ(mesh.link(path[0]).src, src);
  EXPECT_EQ(mesh.link(path[0]).dst, relay);
  EXPECT_EQ(mesh.link(path[1]).dst, mesh.find("node0/nic3"));
}

TEST(MeshScaleUp, EachPeerHasItsOwnLink) {
  // GPU 0 sends 48 MB to GPU 1 and 48 MB to GPU 2 at once, scale-up links of 48 GB/s. In a mesh
  // each flow has its own link: both take 1 ms, delivered 250 ns (one xGMI hop) later. Through
  // an NVSwitch of the same per-link speed they share GPU 0's one link: 2 ms, 500 ns later.
  const std::string flows =
      "workloads:\n  - type: flows\n    flows:\n"
      "      - {src: node0/gpu0, dst: node0/gpu1, bytes: 48MB}\n"
      "      - {src: node0/gpu0, dst: node0/gpu2, bytes: 48MB}\n";
  auto scenario = [&](const std::string& node_keys) {
    std::string yaml = "topology:\n";
    std::istringstream lines(two_servers(8, node_keys));
    for (std::string l; std::getline(lines, l);)
      yaml += "  " + l + "\n";
    return test::scenario_from_yaml(yaml + flows);
  };
  const auto mesh = scenario(", scale_up: mesh, xgmi_link_bandwidth: 48GB/s");
  const auto nvs = scenario(", nvlink_bandwidth: 48GB/s");
  mesh->run();
  nvs->run();
  ASSERT_EQ(mesh->recorder->flows().size(), 2u);
  ASSERT_EQ(nvs->recorder->flows().size(), 2u);
  for (const engine::FlowRecord& r : mesh->recorder->flows()) {
    EXPECT_EQ(r.bandwidth_end, Time::ms(1));
    EXPECT_EQ(r.delivered, Time::ms(1) + Time::ns(250));
    EXPECT_EQ(mesh->sim->paths().links(r.path).size(), 1u);
  }
  for (const engine::FlowRecord& r : nvs->recorder->flows()) {
    EXPECT_EQ(r.bandwidth_end, Time::ms(2));
    EXPECT_EQ(r.delivered, Time::ms(2) + Time::ns(500));
  }
}

// ---- PCIe servers ----

TEST(PcieScaleUp, GpusReachEachOtherThroughTheirSwitchesAndSockets) {
  // 8 GPUs, 4 NICs, 4 PCIe switches (GPUs 2k, 2k + 1 and NIC k below switch k), 2 sockets
  // (switches 0, 1 on socket 0). Per server 8 + 4 + 4 + 2 = 18 nodes and 2 (8 + 4 + 4) + 2 = 34
  // links; two servers, a leaf with 16 uplinks and a spine:
  //   nodes = 2 x 18 + 2 = 38,  links = 2 x 34 + 2 x 2 x 4 (NIC cables) + 2 x 16 = 116.
  // Paths: below one switch 2 links, across switches of a socket 4 (through its root complex),
  // across sockets 5. A GPU reaches its NIC through its switch, sharing the switch's link to the
  // NIC with its neighbour. Latencies: pcie_latency 500 ns is GPU -> switch -> NIC, 250 ns a
  // link; 250 ns again to the socket; 50 ns between sockets.
  const Fabric f = test::fabric_from_yaml(two_servers(
      8, ", nics: 4, scale_up: pcie, pcie_switches: 4, sockets: 2, gpu_pcie_bandwidth: 24GB/s"));
  EXPECT_EQ(f.node_count(), 38u);
  EXPECT_EQ(f.link_count(), 116u);
  const fabric::Server& s = f.servers()[1];
  EXPECT_EQ(s.scale_up, fabric::ScaleUp::Pcie);
  EXPECT_EQ(s.nvswitch, fabric::kNone);
  EXPECT_EQ(s.scale_up_links, 1u);
  EXPECT_DOUBLE_EQ(s.scale_up_bandwidth.bytes_per_second(), 24e9);
  EXPECT_EQ(s.scale_up_latency, Time::ns(500));
  const auto gpu = [&](int i) { return f.find(fmt::format("node1/gpu{}", i)); };
  std::vector<LinkId> path;
  const auto hops = [&](NodeId a, NodeId b) {
    path.clear();
    f.scale_up_path(a, b, path);
    std::vector<std::string> names;
    for (LinkId l : path)
      names.push_back(f.node(f.link(l).dst).name);
    return names;
  };
  EXPECT_EQ(hops(gpu(0), gpu(1)), (std::vector<std::string>{"node1/pcie0", "node1/gpu1"}));
  EXPECT_EQ(hops(gpu(0), gpu(2)),
            (std::vector<std::string>{"node1/pcie0", "node1/cpu0", "node1/pcie1", "node1/gpu2"}));
  EXPECT_EQ(hops(gpu(7), gpu(0)),
            (std::vector<std::string>{"node1/pcie3", "node1/cpu1", "node1/cpu0", "node1/pcie0",
                                      "node1/gpu0"}));
  Time latency{};
  for (LinkId l : path)
    latency += f.link(l).latency;
  EXPECT_EQ(latency, Time::ns(4 * 250 + 50));
  // GPU 1 sends through NIC 0 (nics / gpus = 1/2), behind its switch.
  auto router = ecmp(f);
  router->route(request(gpu(1), f.find("node0/gpu1")), path);
  ASSERT_GE(path.size(), 4u);
  EXPECT_EQ(f.node(f.link(path[0]).dst).name, "node1/pcie0");
  EXPECT_EQ(f.node(f.link(path[1]).dst).name, "node1/nic0");
  // The report's classes: GPU links to switches, switches to sockets and back, one socket link.
  const TopologyReport r = analyze(f);
  ASSERT_NE(links_of(r, "gpu->pcie-switch"), nullptr);
  EXPECT_EQ(links_of(r, "gpu->pcie-switch")->links, 16u);
  ASSERT_NE(links_of(r, "cpu->cpu"), nullptr);
  EXPECT_EQ(links_of(r, "cpu->cpu")->links, 4u);
}

TEST(PcieScaleUp, FlowsIntoOneGpuShareItsLink) {
  // GPUs 0 and 2 each send 24 MB to GPU 1 at once (switch links of 24 GB/s): both cross
  // switch 0 -> GPU 1 and share it: 24 MB / 12 GB/s = 2 ms each. GPU 0's path is 2 links
  // (500 ns), GPU 2's 4 (1 us, through socket 0).
  const std::string flows =
      "workloads:\n  - type: flows\n    flows:\n"
      "      - {src: node0/gpu0, dst: node0/gpu1, bytes: 24MB}\n"
      "      - {src: node0/gpu2, dst: node0/gpu1, bytes: 24MB}\n";
  std::string yaml = "topology:\n";
  std::istringstream lines(two_servers(
      8, ", nics: 4, scale_up: pcie, pcie_switches: 4, sockets: 2, pcie_bandwidth: 24GB/s"));
  for (std::string l; std::getline(lines, l);)
    yaml += "  " + l + "\n";
  const auto run = test::scenario_from_yaml(yaml + flows);
  run->run();
  ASSERT_EQ(run->recorder->flows().size(), 2u);
  for (const engine::FlowRecord& r : run->recorder->flows())
    EXPECT_EQ(r.bandwidth_end, Time::ms(2));
  EXPECT_EQ(run->recorder->flows()[0].delivered, Time::ms(2) + Time::ns(500));
  EXPECT_EQ(run->recorder->flows()[1].delivered, Time::ms(2) + Time::us(1));
}

// ---- errors ----

TEST(ScaleUpErrors, BadValuesAreLocated) {
  struct Case {
    std::string node;     // the node mapping's keys after "gpus: 8", on line 4 of the topology
    std::string key;      // the key of the error
    std::string value;    // the offending value, where the error points
    std::string message;  // part of the message
  };
  const std::vector<Case> cases = {
      {"scale_up: torus", "node.scale_up", "torus", "one of 'nvswitch', 'mesh'"},
      {"scale_up: mesh, xgmi_link_bandwidth: 0GB/s", "node.xgmi_link_bandwidth", "0GB/s", "0GB/s"},
      {"scale_up: mesh, xgmi_link_bandwidth: 64", "node.xgmi_link_bandwidth", "64", "64"},
      {"scale_up: mesh, xgmi_efficiency: 1.5", "node.xgmi_efficiency", "1.5", "1.5"},
      {"scale_up: mesh, xgmi_latency: -1ns", "node.xgmi_latency", "-1ns", "-1ns"},
      {"scale_up: mesh, nvlink_bandwidth: 300GB/s", "node.nvlink_bandwidth", "300GB/s",
       "expected no NVLink value with scale_up: mesh (the mesh's links are set by "
       "xgmi_link_bandwidth, xgmi_efficiency and xgmi_latency), found nvlink_bandwidth: 300GB/s"},
      {"scale_up: mesh, nvlink_efficiency: 0.9", "node.nvlink_efficiency", "0.9",
       "expected no NVLink value with scale_up: mesh"},
      {"scale_up: mesh, nvlink_latency: 1us", "node.nvlink_latency", "1us",
       "expected no NVLink value with scale_up: mesh"},
      {"xgmi_efficiency: 0.75", "node.xgmi_efficiency", "0.75",
       "expected no xGMI value with scale_up: nvswitch"},
      {"scale_up: nvswitch, xgmi_link_bandwidth: 76.8GB/s", "node.xgmi_link_bandwidth", "76.8GB/s",
       "expected no xGMI value with scale_up: nvswitch"},
      {"scale_up: pcie, pcie_switches: 4, nvlink_bandwidth: 300GB/s", "node.nvlink_bandwidth",
       "300GB/s", "expected no NVLink value with scale_up: pcie"},
      {"scale_up: pcie, pcie_switches: 4, xgmi_efficiency: 0.75", "node.xgmi_efficiency", "0.75",
       "expected no xGMI value with scale_up: pcie"},
      {"scale_up: pcie", "node.pcie_switches", "{", "expected at least 1 with scale_up: pcie"},
      {"pcie_switches: 3", "node.pcie_switches", "3", "a divisor of gpus (8) and of nics (8)"},
      {"pcie_switches: 4, sockets: 3", "node.sockets", "3", "a divisor of pcie_switches (4)"},
      {"cpu: intel-pentium", "node.cpu", "intel-pentium", "one of 'intel-broadwell'"},
  };
  for (const Case& c : cases) {
    const std::string line = fmt::format("node: {{gpus: 8, {}}}", c.node);
    const InputError e = input_error([&] {
      (void)test::fabric_from_yaml(
          fmt::format("type: clos\nracks: 1\nnodes_per_rack: 1\n{}\nleaf: {{uplinks: 8}}\n"
                      "spine: {{count: 1}}\n",
                      line));
    });
    EXPECT_EQ(e.key(), c.key) << c.node;
    ASSERT_TRUE(e.where().known()) << c.node;
    EXPECT_EQ(e.where().line, 4) << c.node;
    EXPECT_EQ(e.where().column, static_cast<int>(line.rfind(c.value)) + 1) << c.node;
    EXPECT_TRUE(contains(e.what(), c.message)) << e.what();
  }
}

TEST(ScaleUpErrors, TheOtherKindsDefaultsAreAcceptedSoTheEffectiveScenarioLoadsAgain) {
  // The effective scenario echoes every default, the keys of the other kind of scale-up domain
  // included: written back at their defaults they are harmless, and the scenario loads again
  // with the same fabric.
  for (const std::string node_keys : {", scale_up: mesh, xgmi_efficiency: 0.75", ""}) {
    std::string yaml = "topology:\n";
    std::istringstream lines(two_servers(8, node_keys));
    for (std::string l; std::getline(lines, l);)
      yaml += "  " + l + "\n";
    yaml += "workloads:\n  - {type: flows, flows: [{src: 0, dst: 1, bytes: 1MB}]}\n";
    const auto first = test::scenario_from_yaml(yaml);
    const auto again = test::scenario_from_yaml(first->effective_yaml);
    EXPECT_TRUE(contains(first->effective_yaml, "nvlink_bandwidth: 450GB/s")) << node_keys;
    EXPECT_TRUE(contains(first->effective_yaml, "xgmi_link_bandwidth: 64GB/s")) << node_keys;
    EXPECT_EQ(again->fabric.link_count(), first->fabric.link_count()) << node_keys;
    EXPECT_EQ(again->fabric.servers()[0].scale_up_bandwidth,
              first->fabric.servers()[0].scale_up_bandwidth)
        << node_keys;
  }
  // Written by hand at their defaults, too.
  const Fabric f = test::fabric_from_yaml(
      two_servers(8, ", scale_up: mesh, nvlink_bandwidth: 450GB/s, nvlink_efficiency: 1"));
  EXPECT_EQ(f.servers()[0].scale_up_links, 7u);
}

/// One server of 3 GPUs marked as a mesh, with the given GPU pairs cabled, one NIC on a leaf.
Fabric hand_built_mesh(const std::vector<std::pair<uint32_t, uint32_t>>& pairs,
                       bool with_nvswitch = false) {
  Fabric f;
  const NodeId leaf = f.add_node(fabric::Node{.kind = fabric::NodeKind::Switch,
                                              .role = fabric::SwitchRole::Leaf,
                                              .tier = 1,
                                              .name = "leaf"});
  fabric::Server s;
  for (uint32_t i = 0; i < 3; ++i) {
    const NodeId g = f.add_node(fabric::Node{
        .kind = fabric::NodeKind::Gpu, .server = 0, .local = i, .name = fmt::format("g{}", i)});
    if (i == 0) s.first_gpu = g;
  }
  s.first_nic = f.add_node(fabric::Node{.kind = fabric::NodeKind::Nic, .server = 0, .name = "n0"});
  f.add_cable(s.first_nic, leaf, Bandwidth::gbps(400), Time::zero());
  for (uint32_t i = 0; i < 3; ++i)
    f.add_cable(s.first_gpu + i, s.first_nic, Bandwidth::gbps(400), Time::zero());
  for (const auto& [a, b] : pairs)
    f.add_cable(s.first_gpu + a, s.first_gpu + b, Bandwidth::gbps(384), Time::ns(250));
  if (with_nvswitch) {
    s.nvswitch = f.add_node(fabric::Node{.kind = fabric::NodeKind::Switch,
                                         .role = fabric::SwitchRole::NvSwitch,
                                         .server = 0,
                                         .name = "nvs"});
    for (uint32_t i = 0; i < 3; ++i)
      f.add_cable(s.first_gpu + i, s.nvswitch, Bandwidth::gbps(400), Time::zero());
  }
  s.gpus = 3;
  s.nics = 1;
  s.scale_up = fabric::ScaleUp::Mesh;
  f.add_server(s);
  return f;
}

TEST(ScaleUpErrors, SealChecksTheMesh) {
  const SourceLocation where{std::make_shared<const std::string>("topo.yaml"), 2, 3};
  Fabric complete = hand_built_mesh({{0, 1}, {0, 2}, {1, 2}});
  complete.seal(where);
  EXPECT_EQ(complete.servers()[0].scale_up_links, 2u);
  EXPECT_DOUBLE_EQ(complete.servers()[0].scale_up_bandwidth.in_gbps(), 2 * 384.0);

  Fabric missing = hand_built_mesh({{0, 1}, {1, 2}});  // no 0-2 cable
  const InputError m = input_error([&] { missing.seal(where); });
  EXPECT_EQ(m.where().line, 2);
  EXPECT_TRUE(contains(m.what(), "server 0 (mesh scale-up) has no link from 'g0' to 'g2'"))
      << m.what();
  Fabric twice = hand_built_mesh({{0, 1}, {0, 2}, {1, 2}, {1, 2}});
  EXPECT_TRUE(contains(input_error([&] { twice.seal(where); }).what(),
                       "has 2 links from 'g1' to 'g2'; a mesh has one per GPU pair"));
  Fabric both = hand_built_mesh({{0, 1}, {0, 2}, {1, 2}}, true);
  EXPECT_TRUE(contains(input_error([&] { both.seal(where); }).what(),
                       "server 0 is a mesh and has an NVSwitch"));
}

}  // namespace
}  // namespace rocesim::topology
