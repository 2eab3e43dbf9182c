#include "sim/scenario/jobs.hpp"

#include <fmt/format.h>

#include "sim/core/rng.hpp"
#include "sim/fabric/gpu_selection.hpp"
#include "sim/fabric/placement.hpp"

namespace rocesim::scenario {
namespace {

constexpr Param kRanksParam{
    .key = "ranks",
    .type = ParamType::Any,
    .fallback = "all",
    .help =
        "the job's GPUs in rank order, explicitly ('all': every GPU still free); not with "
        "`gpus`",
    .choices = "GPU selection"};
constexpr Param kGpusParam{.key = "gpus",
                           .type = ParamType::Integer,
                           .help =
                               "how many GPUs the job gets by its `placement`, in whole "
                               "servers (the last one partly) among those still free",
                           .check = Check::Positive,
                           .optional = true};
constexpr Param kPlacementParam{
    .key = "placement",
    .type = ParamType::Choice,
    .help =
        "with `gpus`: contiguous (the default: the first free servers, rack after rack), "
        "random (free servers drawn by the seed, in the order drawn) or fragmented (at most "
        "`per_rack` servers of each rack: partial racks)",
    .choices = "contiguous|random|fragmented",
    .optional = true};
constexpr Param kPerRackParam{
    .key = "per_rack",
    .type = ParamType::Integer,
    .help =
        "placement fragmented: servers taken from each rack at most (default: half a rack, "
        "at least 1)",
    .check = Check::Positive,
    .optional = true};
constexpr Param kOrderParam{
    .key = "order",
    .type = ParamType::Choice,
    .fallback = "allocation",
    .help =
        "rank order: as the GPUs were given (the list, or the servers as allocated), or "
        "topology (by zone, rack, server, GPU: a ring enters each rack once)",
    .choices = "allocation|topology"};

constexpr Param kJobParams[] = {kRanksParam, kGpusParam, kPlacementParam, kPerRackParam,
                                kOrderParam};
const ParamTable kJobTable{
    "job",
    "The job whose GPUs run the collectives of the front ends, and whose ranks the workloads "
    "select unless they name another job. Placed before the jobs of `jobs`.",
    kJobParams};

constexpr Param kJobsItemParams[] = {
    {.key = "name", .type = ParamType::String, .help = "what workloads call it (`job: NAME`)"},
    kRanksParam,
    kGpusParam,
    kPlacementParam,
    kPerRackParam,
    kOrderParam,
};
const ParamTable kJobsItemTable{
    "jobs item",
    "Another job on the same fabric, placed after `job` and the jobs before it, on the servers "
    "they left free.",
    kJobsItemParams};

std::vector<fabric::NodeId> place(const ParamReader& r, const fabric::Fabric& f,
                                  fabric::ServerPool& pool, uint64_t seed,
                                  const std::string& name) {
  std::vector<fabric::NodeId> gpus;
  if (pool.free_gpus() == 0) {
    r.fail(r.has("gpus") ? "gpus" : "ranks", "GPUs left by the jobs placed before this one",
           "none: every server is taken (the scenario's `job` takes every GPU unless it has "
           "`gpus` or `ranks`)");
  }
  if (r.has("gpus")) {
    if (r.has("ranks")) r.fail("ranks", "either `ranks` or `gpus` (a placement)", "both");
    fabric::PlacementRequest req;
    req.gpus = r.integer_as<uint32_t>("gpus");
    const std::string p = r.has("placement") ? r.choice("placement") : "contiguous";
    req.allocation = p == "random"       ? fabric::Allocation::Random
                     : p == "fragmented" ? fabric::Allocation::Fragmented
                                         : fabric::Allocation::Contiguous;
    if (r.has("per_rack") && req.allocation != fabric::Allocation::Fragmented) {
      r.fail("per_rack", "no such key unless placement is fragmented", "the key");
    }
    if (req.allocation == fabric::Allocation::Fragmented) {
      uint32_t rack_size = 0;  // servers of the first rack
      for (const fabric::Server& s : f.servers())
        rack_size += s.rack == f.servers().front().rack ? 1 : 0;
      req.per_rack = r.has("per_rack") ? r.integer_as<uint32_t>("per_rack")
                                       : std::max<uint32_t>(1, rack_size / 2);
    }
    req.order = r.choice("order") == "topology" ? fabric::RankOrder::Topology
                                                : fabric::RankOrder::Allocation;
    // Each job its own stream: adding a job does not move the ones before it.
    req.seed = seed ^ fnv1a64("placement/" + name);
    gpus = pool.place(req);
    if (gpus.empty()) {
      r.fail("gpus",
             fmt::format("at most the GPUs the free servers can give under placement {} ({} "
                         "GPUs on free servers)",
                         p, pool.free_gpus()),
             std::to_string(req.gpus));
    }
  } else {
    for (const char* key : {"placement", "per_rack"}) {
      if (r.has(key)) r.fail(key, "no such key without `gpus`", "the key");
    }
    const ConfigNode sel = r.value("ranks");
    if (sel.is_scalar() && sel.value() == "all") {
      for (const fabric::NodeId g : f.gpus()) {
        if (pool.free(f.node(g).server)) gpus.push_back(g);
      }
    } else {
      gpus = fabric::select_gpus(sel, f);
      for (const fabric::NodeId g : gpus) {
        if (!pool.free(f.node(g).server)) {
          r.fail("ranks", "GPUs of servers no job placed before this one holds",
                 fmt::format("{}, on a server already given to a job", f.node(g).name));
        }
      }
    }
    if (r.choice("order") == "topology") fabric::order_by_topology(f, gpus);
  }
  pool.take(gpus);
  return gpus;
}

}  // namespace

const ParamTable& job_table() {
  return kJobTable;
}

const ParamTable& jobs_item_table() {
  return kJobsItemTable;
}

Jobs read_jobs(const ParamReader& scenario, const fabric::Fabric& f, uint64_t seed) {
  Jobs out;
  fabric::ServerPool pool(f);
  out.main = place(scenario.section("job", kJobTable), f, pool, seed, "job");
  if (!scenario.has("jobs")) return out;
  for (const ConfigNode& item : scenario.node("jobs").items()) {
    if (!item.is_map()) {
      throw InputError(item.where(), item.path(), "a job mapping with a 'name'", item.describe());
    }
    const ParamReader r = scenario.child(item, kJobsItemTable);
    const std::string name = r.string("name");
    if (name == "job" || out.named.count(name) != 0) {
      r.fail("name", "a name no other job has ('job' is the scenario's job)",
             fmt::format("'{}' again", name));
    }
    out.named[name] = place(r, f, pool, seed, name);
  }
  return out;
}

}  // namespace rocesim::scenario
