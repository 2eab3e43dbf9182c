// Rail-optimized fabric: NIC k of every server connects to a leaf of rail k, so same-index GPUs
// of different servers are one switch apart. Each rail has ceil(nodes / nodes_per_leaf) leaves;
// every rail leaf has `leaf.uplinks` uplinks spread evenly over the spines, which are shared by
// all rails, so traffic between different rails (or between leaves of one rail) crosses a spine.
#include <fmt/format.h>

#include "sim/topology/builders.hpp"

namespace rocesim::topology {
namespace {

constexpr Param kRailLeafParams[] = {
    {.key = "uplinks",
     .type = ParamType::Integer,
     .help = "uplinks per rail leaf, spread evenly over the spines",
     .check = Check::Positive,
     .max = 4096},
    {.key = "uplink_speed",
     .type = ParamType::Bandwidth,
     .fallback = "400Gbps",
     .help = "rate of each leaf uplink",
     .check = Check::Positive},
    {.key = "latency",
     .type = ParamType::Time,
     .fallback = "500ns",
     .help = "forwarding latency per hop",
     .check = Check::NonNegative},
    {.key = "buffer",
     .type = ParamType::Bytes,
     .fallback = "64MB",
     .help = "shared packet buffer per switch",
     .check = Check::NonNegative},
    kSwitchPresetParam,
    kSwitchCapacityParam,
};

constexpr Param kRailSpineParams[] = {
    {.key = "count",
     .type = ParamType::Integer,
     .help = "spines, shared by all rails",
     .check = Check::Positive,
     .max = 4096},
    {.key = "latency",
     .type = ParamType::Time,
     .fallback = "500ns",
     .help = "forwarding latency per hop",
     .check = Check::NonNegative},
    {.key = "buffer",
     .type = ParamType::Bytes,
     .fallback = "64MB",
     .help = "shared packet buffer per switch",
     .check = Check::NonNegative},
    kSwitchPresetParam,
    kSwitchCapacityParam,
};

constexpr Param kRailParams[] = {
    kTypeParam,
    {.key = "nodes",
     .type = ParamType::Integer,
     .help = "servers",
     .check = Check::Positive,
     .max = 1048576},
    {.key = "nodes_per_leaf",
     .type = ParamType::Integer,
     .help = "servers per rail leaf (each leaf takes one NIC of each)",
     .check = Check::Positive,
     .max = 4096},
    {.key = "node",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "server interior; rails = NICs per server",
     .choices = "see node"},
    {.key = "leaf",
     .type = ParamType::Section,
     .help = "rail leaf settings",
     .choices = "see rail_optimized.leaf"},
    {.key = "spine",
     .type = ParamType::Section,
     .help = "spine settings",
     .choices = "see rail_optimized.spine"},
    {.key = "nic_link_latency",
     .type = ParamType::Time,
     .fallback = "1us",
     .help = "propagation delay of a NIC-leaf cable",
     .check = Check::NonNegative},
    {.key = "link_latency",
     .type = ParamType::Time,
     .fallback = "1us",
     .help = "propagation delay of a leaf-spine cable",
     .check = Check::NonNegative},
};

const ParamTable kRailLeafTable{"rail_optimized.leaf", "Rail leaf settings.", kRailLeafParams};
const ParamTable kRailSpineTable{"rail_optimized.spine",
                                 "Spine settings of a rail-optimized "
                                 "fabric.",
                                 kRailSpineParams};

}  // namespace

const ParamTable kRailTable{"topology (type: rail_optimized)",
                            "Rail-optimized fabric: NIC k of every server on a leaf of rail k.",
                            kRailParams};

std::span<const ParamTable* const> rail_subtables() {
  static const ParamTable* const tables[] = {&kRailLeafTable, &kRailSpineTable};
  return tables;
}

void build_rail_optimized(const ParamReader& r, fabric::Fabric& f) {
  using fabric::Node;
  using fabric::NodeKind;
  using fabric::SwitchRole;

  const auto nodes = r.integer_as<uint32_t>("nodes");
  const auto per_leaf = r.integer_as<uint32_t>("nodes_per_leaf");
  const ServerSpec server = read_server(r.section("node", server_table()));
  const ParamReader leaf = r.section("leaf", kRailLeafTable);
  const ParamReader spine = r.section("spine", kRailSpineTable);
  const auto uplinks = leaf.integer_as<uint32_t>("uplinks");
  const auto spines = spine.integer_as<uint32_t>("count");
  if (uplinks % spines != 0) {
    leaf.fail("uplinks", fmt::format("a multiple of spine.count ({})", spines),
              std::to_string(uplinks));
  }
  const uint32_t rails = server.nics;
  const SwitchSpec leaf_sw = read_switch(leaf);
  const SwitchSpec spine_sw = read_switch(spine);
  const Bandwidth uplink_speed = leaf.bandwidth("uplink_speed");
  const Time nic_lat = r.time("nic_link_latency");
  const Time link_lat = r.time("link_latency");
  const uint32_t leaves_per_rail = (nodes + per_leaf - 1) / per_leaf;
  f.reserve(size_t{nodes} * server_nodes(server) + spines + size_t{rails} * leaves_per_rail,
            size_t{nodes} * (server_links(server) + 2 * server.nics) +
                size_t{rails} * leaves_per_rail * uplinks * 2);

  for (uint32_t s = 0; s < nodes; ++s)
    add_server(f, server, s / per_leaf, fabric::kNone);

  std::vector<fabric::NodeId> spine_ids;
  for (uint32_t s = 0; s < spines; ++s) {
    spine_ids.push_back(f.add_node(Node{.kind = NodeKind::Switch,
                                        .role = SwitchRole::Spine,
                                        .tier = 2,
                                        .local = s,
                                        .forwarding_latency = spine_sw.latency,
                                        .buffer = {spine_sw.buffer},
                                        .name = fmt::format("spine{}", s)}));
  }
  for (uint32_t rail = 0; rail < rails; ++rail) {
    for (uint32_t k = 0; k < leaves_per_rail; ++k) {
      const fabric::NodeId lf = f.add_node(Node{.kind = NodeKind::Switch,
                                                .role = SwitchRole::Rail,
                                                .tier = 1,
                                                .local = rail * leaves_per_rail + k,
                                                .forwarding_latency = leaf_sw.latency,
                                                .buffer = {leaf_sw.buffer},
                                                .name = fmt::format("rail{}/leaf{}", rail, k)});
      for (uint32_t s = k * per_leaf; s < std::min(nodes, (k + 1) * per_leaf); ++s) {
        f.add_cable(f.servers()[s].first_nic + rail, lf, server.nic_payload_rate(), nic_lat,
                    server.nic_speed);
      }
      for (uint32_t u = 0; u < uplinks; ++u) {
        f.add_cable(lf, spine_ids[u % spines], server.fabric_payload_rate(uplink_speed), link_lat,
                    uplink_speed);
      }
    }
  }
  check_switch_capacity(f, fabric::SwitchRole::Rail, leaf_sw, leaf);
  check_switch_capacity(f, fabric::SwitchRole::Spine, spine_sw, spine);
  f.set_description(fmt::format(
      "rail_optimized: {} servers x {} GPUs, {} rails x {} leaves, {} uplinks per leaf over {} "
      "spines",
      nodes, server.gpus, rails, leaves_per_rail, uplinks, spines));
}

}  // namespace rocesim::topology
