// An explicit list of flows, inline in the scenario or in a CSV file: a flow set designed by hand
// or exported from another simulator. Each flow names its two GPUs, its size, its start time
// (relative to the workload's start) and optionally the switches it must cross ("via"), so that
// a flow set routed elsewhere can be replayed on exactly the same paths. Inline flows may also
// depend on each other (`id`, `after`).
//
// CSV: a header line naming the columns, then one flow per line. Columns: src, dst (ranks or GPU
// names), bytes (a whole number of bytes, or a size with a unit), and optionally start_s
// (seconds) or start (a time with a unit), via (switch names separated by '|'), qps; any other or
// repeated column name is an error. Blank lines and lines starting with '#' are skipped.
#pragma once

#include <memory>

#include "sim/engine/workload_params.hpp"

namespace rocesim::workload {

extern const ParamTable kFlowListTable;
extern const ParamTable kFlowTable;

std::unique_ptr<engine::Workload> make_flow_list(const engine::WorkloadInput& in);

}  // namespace rocesim::workload
