// Internal: the builders behind the registry in topology.cpp.
#pragma once

#include <span>

#include "sim/core/params.hpp"
#include "sim/fabric/fabric.hpp"
#include "sim/topology/node_interior.hpp"

namespace rocesim::topology {

inline constexpr Param kTypeParam{.key = "type",
                                  .type = ParamType::Choice,
                                  .help = "topology builder",
                                  .choices = "clos|rail_optimized|fat_tree"};

extern const ParamTable kClosTable;
extern const ParamTable kRailTable;
extern const ParamTable kFatTreeTable;
std::span<const ParamTable* const> clos_subtables();
std::span<const ParamTable* const> rail_subtables();

void build_clos(const ParamReader& spec, fabric::Fabric& out);
void build_rail_optimized(const ParamReader& spec, fabric::Fabric& out);
void build_fat_tree(const ParamReader& spec, fabric::Fabric& out);

}  // namespace rocesim::topology
