#include "sim/topology/topology.hpp"

#include <fmt/format.h>

#include "sim/core/memory.hpp"
#include "sim/topology/builders.hpp"

namespace rocesim::topology {
namespace {

constexpr Param kTypeOnly[] = {kTypeParam};
const ParamTable kTypeTable{"topology", "Picks the builder.", kTypeOnly};

}  // namespace

std::span<const TopologyBuilder> topology_builders() {
  static const TopologyBuilder builders[] = {
      {"clos", &kClosTable, &build_clos},
      {"rail_optimized", &kRailTable, &build_rail_optimized},
      {"fat_tree", &kFatTreeTable, &build_fat_tree},
  };
  return builders;
}

const ParamTable& topology_type_table() {
  return kTypeTable;
}

fabric::Fabric build_topology(const ConfigNode& spec, EffectiveConfig* sink) {
  if (!spec.is_map()) {
    throw InputError(spec.where(), spec.path(), "a topology mapping with a 'type' key",
                     spec.describe());
  }
  const ConfigNode* type = spec.find("type");
  if (type == nullptr) {
    throw InputError(spec.named_at(), config_path(spec.path(), "type"),
                     "the required key 'type' (clos, rail_optimized or fat_tree)",
                     "the key is missing");
  }
  for (const TopologyBuilder& b : topology_builders()) {
    if (type->is_scalar() && type->value() == b.type) {
      const ParamReader reader(spec, *b.table, sink);
      fabric::Fabric f;
      try {
        b.build(reader, f);
      } catch (const fabric::FabricTooLarge& e) {
        throw InputError(spec.named_at(), spec.path(),
                         fmt::format("a fabric that fits in this machine's memory ({} available)",
                                     format_memory(e.available)),
                         fmt::format("{} nodes and {} links, about {} to simulate", e.nodes,
                                     e.links, format_memory(e.bytes)));
      }
      f.seal(spec.where());
      return f;
    }
  }
  throw InputError(type->where(), type->path(), "one of 'clos', 'rail_optimized', 'fat_tree'",
                   type->describe());
}

}  // namespace rocesim::topology
