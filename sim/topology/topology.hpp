// Topology builders turn a topology description (the `topology:` mapping of a scenario or a file
// in topologies/) into a sealed Fabric. Builders are chosen by `type` from a registry:
//   clos            two-tier leaf/spine Clos (an AI Zone), optionally several zones joined by an
//                   aggregation (ATSW) tier with its own oversubscription
//   rail_optimized  NIC k of every server on rail k's leaves, spines shared by all rails
//   fat_tree        k-ary fat-tree (edge, aggregation, core)
// Every builder shares the server interior (node_interior.hpp): GPUs on an NVLink domain, a
// GPU-to-NIC mapping over PCIe, NICs at a given speed.
#pragma once

#include <span>
#include <string_view>

#include "sim/core/params.hpp"
#include "sim/fabric/fabric.hpp"

namespace rocesim::topology {

struct TopologyBuilder {
  std::string_view type;
  const ParamTable* table;
  /// Adds nodes and links to an empty fabric; the caller seals it.
  void (*build)(const ParamReader& spec, fabric::Fabric& out);
};

/// All builders, in documentation order.
std::span<const TopologyBuilder> topology_builders();

/// The table that only reads `type` (to pick the builder).
const ParamTable& topology_type_table();

/// Builds and seals the fabric described by `spec` (a mapping with a `type` key).
fabric::Fabric build_topology(const ConfigNode& spec, EffectiveConfig* sink = nullptr);

}  // namespace rocesim::topology
