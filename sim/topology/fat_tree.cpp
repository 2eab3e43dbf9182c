// k-ary fat-tree (Al-Fares et al., SIGCOMM 2008): k pods, each with k/2 edge and k/2
// aggregation switches; (k/2)^2 core switches; every edge switch has k/2 host ports, filled with
// the NICs of (k/2) / nics-per-server servers; aggregation switch j of every pod connects to
// core switches j*k/2 .. j*k/2 + k/2 - 1. Full bisection bandwidth with equal link speeds.
// Roles: edge = leaf, aggregation = spine, core = core.
#include <fmt/format.h>

#include "sim/topology/builders.hpp"

namespace rocesim::topology {
namespace {

constexpr Param kFatTreeParams[] = {
    kTypeParam,
    {.key = "k",
     .type = ParamType::Integer,
     .help = "switch radix; even, >= 2",
     .check = Check::Positive,
     .max = 512},
    {.key = "node",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "server interior; NICs per server must divide k/2",
     .choices = "see node"},
    {.key = "link_speed",
     .type = ParamType::Bandwidth,
     .help = "rate of switch-switch links (default: node.nic_speed)",
     .check = Check::Positive,
     .optional = true},
    {.key = "switch_latency",
     .type = ParamType::Time,
     .fallback = "500ns",
     .help = "forwarding latency per hop of every switch",
     .check = Check::NonNegative},
    {.key = "switch_buffer",
     .type = ParamType::Bytes,
     .fallback = "64MB",
     .help = "shared packet buffer per switch",
     .check = Check::NonNegative},
    {.key = "nic_link_latency",
     .type = ParamType::Time,
     .fallback = "1us",
     .help = "propagation delay of a NIC-edge cable",
     .check = Check::NonNegative},
    {.key = "link_latency",
     .type = ParamType::Time,
     .fallback = "1us",
     .help = "propagation delay of a switch-switch cable",
     .check = Check::NonNegative},
};

}  // namespace

const ParamTable kFatTreeTable{"topology (type: fat_tree)", "k-ary fat-tree.", kFatTreeParams};

void build_fat_tree(const ParamReader& r, fabric::Fabric& f) {
  using fabric::Node;
  using fabric::NodeKind;
  using fabric::SwitchRole;

  const auto k = r.integer_as<uint32_t>("k");
  if (k < 2 || k % 2 != 0) r.fail("k", "an even number >= 2", std::to_string(k));
  const ServerSpec server = read_server(r.section("node", server_table()));
  const uint32_t half = k / 2;
  if (half % server.nics != 0) {
    r.fail("k", fmt::format("k/2 to be a multiple of the NICs per server ({})", server.nics),
           std::to_string(k));
  }
  const Bandwidth speed = r.has("link_speed") ? r.bandwidth("link_speed") : server.nic_speed;
  const Time sw_lat = r.time("switch_latency");
  const Bytes buffer = r.bytes("switch_buffer");
  const Time nic_lat = r.time("nic_link_latency");
  const Time link_lat = r.time("link_latency");
  const uint32_t servers_per_edge = half / server.nics;

  auto make_switch = [&](SwitchRole role, uint8_t tier, uint32_t local, std::string name) {
    return f.add_node(Node{.kind = NodeKind::Switch,
                           .role = role,
                           .tier = tier,
                           .local = local,
                           .forwarding_latency = sw_lat,
                           .buffer = {buffer},
                           .name = std::move(name)});
  };

  const size_t servers = size_t{k} * half * servers_per_edge;
  f.reserve(servers * server_nodes(server) + 5 * size_t{k} * k / 4,
            servers * (server_links(server) + 2 * server.nics) + 4 * size_t{k} * half * half);
  std::vector<fabric::NodeId> core;
  for (uint32_t c = 0; c < half * half; ++c) {
    core.push_back(make_switch(SwitchRole::Core, 3, c, fmt::format("core{}", c)));
  }
  for (uint32_t pod = 0; pod < k; ++pod) {
    std::vector<fabric::NodeId> edges, aggs;
    for (uint32_t e = 0; e < half; ++e) {
      edges.push_back(
          make_switch(SwitchRole::Leaf, 1, pod * half + e, fmt::format("pod{}/edge{}", pod, e)));
      for (uint32_t s = 0; s < servers_per_edge; ++s) {
        const uint32_t idx = add_server(f, server, pod * half + e, fabric::kNone);
        const fabric::Server& srv = f.servers()[idx];
        for (uint32_t n = 0; n < srv.nics; ++n) {
          f.add_cable(srv.first_nic + n, edges.back(), server.nic_payload_rate(), nic_lat,
                      server.nic_speed);
        }
      }
    }
    for (uint32_t a = 0; a < half; ++a) {
      aggs.push_back(
          make_switch(SwitchRole::Spine, 2, pod * half + a, fmt::format("pod{}/agg{}", pod, a)));
    }
    for (fabric::NodeId e : edges) {
      for (fabric::NodeId a : aggs)
        f.add_cable(e, a, server.fabric_payload_rate(speed), link_lat, speed);
    }
    for (uint32_t a = 0; a < half; ++a) {
      for (uint32_t c = 0; c < half; ++c)
        f.add_cable(aggs[a], core[a * half + c], server.fabric_payload_rate(speed), link_lat,
                    speed);
    }
  }
  f.set_description(fmt::format("fat_tree: k = {}, {} servers x {} GPUs, {} switches", k,
                                f.servers().size(), server.gpus, 5 * k * k / 4));
}

}  // namespace rocesim::topology
