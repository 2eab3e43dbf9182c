// Two-tier Clos (an AI Zone) and its DC-scale extension.
//
// Inside a zone: `racks` racks of `nodes_per_rack` servers; each rack has one leaf (RTSW) that
// takes every NIC of its servers and has `leaf.uplinks` uplinks of `leaf.uplink_speed`, spread
// evenly over the zone's `spine.count` spines (CTSW). The leaf subscription ratio is
// (NIC capacity below) : (uplink capacity above), so 16 x 400G NICs with 16, 32 or 18 x 400G
// uplinks give 1:1, 1:2 or 1:1.125.
//
// With `zones` > 1 an aggregation tier (ATSW) joins the zones: every spine has
// `aggregation.uplinks` uplinks spread evenly over the `aggregation.count` ATSWs. Cross-zone
// capacity is deliberately oversubscribed: spine down : up = (racks * leaf uplinks / spines) :
// aggregation.uplinks.
#include <fmt/format.h>

#include "sim/topology/builders.hpp"

namespace rocesim::topology {
namespace {

constexpr Param kLeafParams[] = {
    {.key = "uplinks",
     .type = ParamType::Integer,
     .help = "uplinks per leaf, spread evenly over the spines of its zone",
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
     .help = "forwarding latency per hop (shallow-buffer ASIC)",
     .check = Check::NonNegative},
    {.key = "buffer",
     .type = ParamType::Bytes,
     .fallback = "64MB",
     .help = "shared packet buffer per switch",
     .check = Check::NonNegative},
    kSwitchPresetParam,
    kSwitchCapacityParam,
};

constexpr Param kSpineParams[] = {
    {.key = "count",
     .type = ParamType::Integer,
     .help = "spines per zone",
     .check = Check::Positive,
     .max = 4096},
    {.key = "latency",
     .type = ParamType::Time,
     .fallback = "3us",
     .help = "forwarding latency per hop (deep-buffer VOQ chassis)",
     .check = Check::NonNegative},
    {.key = "buffer",
     .type = ParamType::Bytes,
     .fallback = "8GB",
     .help = "packet buffer per switch",
     .check = Check::NonNegative},
    kSwitchPresetParam,
    kSwitchCapacityParam,
};

constexpr Param kAggregationParams[] = {
    {.key = "count",
     .type = ParamType::Integer,
     .help = "aggregation switches (ATSW), shared by "
             "all zones",
     .check = Check::Positive,
     .max = 4096},
    {.key = "uplinks",
     .type = ParamType::Integer,
     .help = "uplinks per spine to the aggregation tier, spread evenly over the ATSWs",
     .check = Check::Positive,
     .max = 4096},
    {.key = "uplink_speed",
     .type = ParamType::Bandwidth,
     .fallback = "400Gbps",
     .help = "rate of each spine-to-ATSW link",
     .check = Check::Positive},
    {.key = "latency",
     .type = ParamType::Time,
     .fallback = "3us",
     .help = "forwarding latency per hop",
     .check = Check::NonNegative},
    {.key = "buffer",
     .type = ParamType::Bytes,
     .fallback = "8GB",
     .help = "packet buffer per switch",
     .check = Check::NonNegative},
    kSwitchPresetParam,
    kSwitchCapacityParam,
};

constexpr Param kClosParams[] = {
    kTypeParam,
    {.key = "zones",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "AI zones; more than one needs an aggregation section",
     .check = Check::Positive,
     .max = 1024},
    {.key = "racks",
     .type = ParamType::Integer,
     .help = "racks per zone (one leaf each)",
     .check = Check::Positive,
     .max = 65536},
    {.key = "nodes_per_rack",
     .type = ParamType::Integer,
     .help = "servers per rack",
     .check = Check::Positive,
     .max = 1024},
    {.key = "node",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "server interior",
     .choices = "see node"},
    {.key = "leaf",
     .type = ParamType::Section,
     .help = "leaf (RTSW) settings",
     .choices = "see clos.leaf"},
    {.key = "spine",
     .type = ParamType::Section,
     .help = "spine (CTSW) settings",
     .choices = "see clos.spine"},
    {.key = "aggregation",
     .type = ParamType::Section,
     .help = "aggregation (ATSW) tier joining the zones",
     .choices = "see clos.aggregation",
     .optional = true},
    {.key = "nic_link_latency",
     .type = ParamType::Time,
     .fallback = "1us",
     .help = "propagation delay of a NIC-leaf cable",
     .check = Check::NonNegative},
    {.key = "link_latency",
     .type = ParamType::Time,
     .fallback = "1us",
     .help = "propagation delay of a switch-switch cable (about 200 m of fibre)",
     .check = Check::NonNegative},
};

const ParamTable kLeafTable{"clos.leaf", "Leaf (rack training switch) settings.", kLeafParams};
const ParamTable kSpineTable{"clos.spine", "Spine (cluster training switch) settings.",
                             kSpineParams};
const ParamTable kAggregationTable{
    "clos.aggregation", "Aggregation tier (ATSW) joining several AI zones.", kAggregationParams};

}  // namespace

const ParamTable kClosTable{
    "topology (type: clos)",
    "Two-tier leaf/spine Clos (an AI Zone); with `zones` > 1, several zones joined by an "
    "aggregation tier.",
    kClosParams};

std::span<const ParamTable* const> clos_subtables() {
  static const ParamTable* const tables[] = {&kLeafTable, &kSpineTable, &kAggregationTable};
  return tables;
}

void build_clos(const ParamReader& r, fabric::Fabric& f) {
  using fabric::Node;
  using fabric::NodeKind;
  using fabric::SwitchRole;

  const auto zones = r.integer_as<uint32_t>("zones");
  const auto racks = r.integer_as<uint32_t>("racks");
  const auto nodes_per_rack = r.integer_as<uint32_t>("nodes_per_rack");
  const ServerSpec server = read_server(r.section("node", server_table()));
  const ParamReader leaf = r.section("leaf", kLeafTable);
  const ParamReader spine = r.section("spine", kSpineTable);
  const Time nic_lat = r.time("nic_link_latency");
  const Time link_lat = r.time("link_latency");
  const SwitchSpec leaf_sw = read_switch(leaf);
  const SwitchSpec spine_sw = read_switch(spine);
  const Bandwidth uplink_speed = leaf.bandwidth("uplink_speed");

  const auto uplinks = leaf.integer_as<uint32_t>("uplinks");
  const auto spines = spine.integer_as<uint32_t>("count");
  if (uplinks % spines != 0) {
    leaf.fail("uplinks", fmt::format("a multiple of spine.count ({})", spines),
              std::to_string(uplinks));
  }
  if (zones > 1 && !r.has("aggregation")) {
    r.fail("aggregation", "an aggregation section when zones > 1", "none");
  }

  const bool multi_zone = zones > 1;
  const size_t servers = size_t{zones} * racks * nodes_per_rack;
  f.reserve(servers * server_nodes(server) + size_t{zones} * (racks + spines) + 1024,
            servers * (server_links(server) + 2 * server.nics) +
                size_t{zones} * racks * uplinks * 2 + size_t{zones} * spines * 2048);
  auto zone_prefix = [&](uint32_t z) { return multi_zone ? fmt::format("zone{}/", z) : ""; };

  std::vector<fabric::NodeId> spine_ids;
  for (uint32_t z = 0; z < zones; ++z) {
    std::vector<fabric::NodeId> leaves;
    for (uint32_t k = 0; k < racks; ++k) {
      const uint32_t rack = z * racks + k;
      leaves.push_back(f.add_node(Node{.kind = NodeKind::Switch,
                                       .role = SwitchRole::Leaf,
                                       .tier = 1,
                                       .local = rack,
                                       .zone = z,
                                       .forwarding_latency = leaf_sw.latency,
                                       .buffer = {leaf_sw.buffer},
                                       .name = fmt::format("{}leaf{}", zone_prefix(z), k)}));
      for (uint32_t s = 0; s < nodes_per_rack; ++s) {
        const uint32_t idx = add_server(f, server, rack, z);
        const fabric::Server& srv = f.servers()[idx];
        for (uint32_t n = 0; n < srv.nics; ++n) {
          f.add_cable(srv.first_nic + n, leaves.back(), server.nic_payload_rate(), nic_lat,
                      server.nic_speed);
        }
      }
    }
    for (uint32_t s = 0; s < spines; ++s) {
      const fabric::NodeId sp =
          f.add_node(Node{.kind = NodeKind::Switch,
                          .role = SwitchRole::Spine,
                          .tier = 2,
                          .local = z * spines + s,
                          .zone = z,
                          .forwarding_latency = spine_sw.latency,
                          .buffer = {spine_sw.buffer},
                          .name = fmt::format("{}spine{}", zone_prefix(z), s)});
      spine_ids.push_back(sp);
    }
    // Leaf uplink u goes to spine u mod spines: parallel links to one spine are distinct ECMP
    // members, as on a real switch.
    for (fabric::NodeId lf : leaves) {
      for (uint32_t u = 0; u < uplinks; ++u) {
        f.add_cable(lf, spine_ids[z * spines + u % spines],
                    server.fabric_payload_rate(uplink_speed), link_lat, uplink_speed);
      }
    }
  }

  if (r.has("aggregation")) {
    const ParamReader agg = r.section("aggregation", kAggregationTable);
    const auto count = agg.integer_as<uint32_t>("count");
    const auto agg_up = agg.integer_as<uint32_t>("uplinks");
    const SwitchSpec agg_sw = read_switch(agg);
    const Bandwidth agg_speed = agg.bandwidth("uplink_speed");
    if (agg_up % count != 0) {
      agg.fail("uplinks", fmt::format("a multiple of aggregation.count ({})", count),
               std::to_string(agg_up));
    }
    std::vector<fabric::NodeId> atsw;
    for (uint32_t a = 0; a < count; ++a) {
      atsw.push_back(f.add_node(Node{.kind = NodeKind::Switch,
                                     .role = SwitchRole::Aggregation,
                                     .tier = 3,
                                     .local = a,
                                     .forwarding_latency = agg_sw.latency,
                                     .buffer = {agg_sw.buffer},
                                     .name = fmt::format("agg{}", a)}));
    }
    for (fabric::NodeId sp : spine_ids) {
      for (uint32_t u = 0; u < agg_up; ++u) {
        f.add_cable(sp, atsw[u % count], server.fabric_payload_rate(agg_speed), link_lat,
                    agg_speed);
      }
    }
    check_switch_capacity(f, SwitchRole::Aggregation, agg_sw, agg);
  }
  check_switch_capacity(f, SwitchRole::Leaf, leaf_sw, leaf);
  check_switch_capacity(f, SwitchRole::Spine, spine_sw, spine);

  f.set_description(fmt::format(
      "clos: {} zone{} x {} racks x {} servers x {} GPUs; {} uplinks per leaf over {} spines{}",
      zones, zones == 1 ? "" : "s", racks, nodes_per_rack, server.gpus, uplinks, spines,
      r.has("aggregation") ? "; aggregation tier" : ""));
}

}  // namespace rocesim::topology
