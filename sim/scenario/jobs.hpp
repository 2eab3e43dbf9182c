// Jobs and their placement: the scenario's `job` (whose ranks the front ends and, by default,
// the workloads use) and the named jobs of `jobs:`. Each job is given GPUs either explicitly
// (`ranks`, GPUs of the fabric) or by a placement rule (`gpus` and `placement`, over the
// servers the jobs before it left free; fabric/placement.hpp), and numbers its ranks in
// allocation or topology order. `job` is placed first, then `jobs` in the order written.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sim/core/params.hpp"
#include "sim/fabric/fabric.hpp"

namespace rocesim::scenario {

const ParamTable& job_table();
const ParamTable& jobs_item_table();

struct Jobs {
  std::vector<fabric::NodeId> main;                          // `job`
  std::map<std::string, std::vector<fabric::NodeId>> named;  // `jobs`
};

/// Reads `job` and `jobs` of the scenario and places them.
Jobs read_jobs(const ParamReader& scenario, const fabric::Fabric& f, uint64_t seed);

}  // namespace rocesim::scenario
