// Selecting GPUs in a scenario ("ranks"). A selection is one of
//   all              every GPU of the fabric, in rank order (server-major)
//   "0-127"          a range of ranks, inclusive; "0-127:8" takes every 8th
//   [0, 5, 9]        a list of ranks (whole numbers) or GPU names ("node3/gpu2")
// and gives the GPUs in the order written. Ranks are global GPU indices: GPU g of server s is
// rank s * gpus_per_server + g.
#pragma once

#include <vector>

#include "sim/core/config.hpp"
#include "sim/fabric/fabric.hpp"

namespace rocesim::fabric {

std::vector<NodeId> select_gpus(const ConfigNode& selection, const Fabric& f);
/// One GPU by rank or name.
NodeId select_gpu(const ConfigNode& value, const Fabric& f);
/// One switch by name (for path waypoints).
NodeId select_switch(const ConfigNode& value, const Fabric& f);

}  // namespace rocesim::fabric
