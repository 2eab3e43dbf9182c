// rocesim nccl-tests: nccl-tests' benchmarks on a scenario's fabric and job.
#include <fmt/format.h>

#include <iostream>
#include <set>

#include "cli/commands.hpp"
#include "sim/collectives/nccl/nccl_tests.hpp"
#include "sim/collectives/nccl/tuning.hpp"
#include "sim/metrics/hdf5_writer.hpp"
#include "sim/metrics/trace.hpp"
#include "sim/scenario/scenario.hpp"

#ifndef ROCESIM_VERSION
#define ROCESIM_VERSION "0.0.0"
#endif

namespace rocesim::cli {
namespace {

namespace nccl = collectives::nccl;

metrics::Table rows_table(const nccl::NcclTestsOptions& o, int nranks,
                          const std::vector<nccl::NcclTestsRow>& rows) {
  metrics::Table t("nccl_tests",
                   fmt::format("rocesim nccl-tests {}: one row per size, as nccl-tests prints it "
                               "(time per operation, algbw = size / time, busbw = algbw x factor)",
                               o.test));
  const size_t size = t.add_integer("size_bytes", "B"), count = t.add_integer("count"),
               type = t.add_text("type"), redop = t.add_text("redop"), root = t.add_integer("root"),
               t0 = t.add_number("time_us_out_of_place", "us"),
               a0 = t.add_number("algbw_out_of_place", "GB/s"),
               b0 = t.add_number("busbw_out_of_place", "GB/s"),
               t1 = t.add_number("time_us_in_place", "us"),
               a1 = t.add_number("algbw_in_place", "GB/s"),
               b1 = t.add_number("busbw_in_place", "GB/s"), algo = t.add_text("algorithm"),
               proto = t.add_text("protocol"), ch = t.add_integer("channels"),
               model = t.add_number("nccl_model_us", "us");
  for (const nccl::NcclTestsRow& r : rows) {
    t.push(size, r.size.size_bytes);
    t.push(count, r.size.count);
    t.push(type, r.datatype);
    t.push(redop, r.op);
    t.push(root, int64_t{r.root});
    t.push(t0, r.time_us[0]);
    t.push(a0, r.algbw_GBps[0]);
    t.push(b0, r.busbw_GBps[0]);
    t.push(t1, r.time_us[1]);
    t.push(a1, r.algbw_GBps[1]);
    t.push(b1, r.busbw_GBps[1]);
    t.push(algo,
           std::string(nccl::path_name(o.collective, nranks, r.algorithm, r.size.size_bytes)));
    t.push(proto,
           std::string(nccl::path_protocol_name(o.collective, r.protocol, r.size.size_bytes)));
    t.push(ch, int64_t{r.channels});
    t.push(model, r.nccl_model_us);
  }
  return t;
}

}  // namespace

int nccl_tests(const NcclTestsCommand& c) {
  // The benchmark's flags first: a typo should not wait for the fabric to be built.
  const nccl::NcclTestsOptions o = nccl::parse_nccl_tests_args(c.args);
  scenario::Overrides overrides;
  overrides.seed = c.seed;
  overrides.skip_workloads = true;
  overrides.parameters = parse_sets(c.set, c.calibration);
  overrides.flow_records = !c.output.empty() || !c.trace.empty();
  std::vector<std::string> not_modelled;
  // NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=TUNING): NCCL's log lines of what the model ran.
  std::string debug_level, debug_subsys = "INIT,BOOTSTRAP,ENV";
  std::vector<std::pair<std::string, std::string>> set_by_env;  // NCCL_* and RCCL_* as passed
  // The variables the NCCL model knows set the scenario's `nccl` section, after any --set (so
  // that they are checked as its keys, and the effective scenario in results.h5 holds them);
  // others (NCCL_IB_GID_INDEX, UCX_..., as mpirun -x passes anything) are accepted and listed
  // as not modelled, as `validate` lists a table's.
  const auto where = std::make_shared<const std::string>("command line");
  for (const std::string& kv : c.env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw InputError(SourceLocation{where, 0, 0}, "--env", "KEY=VALUE", "'" + kv + "'");
    }
    const std::string key = kv.substr(0, eq);
    if (key == "NCCL_DEBUG" || key == "NCCL_DEBUG_SUBSYS") {
      (key == "NCCL_DEBUG" ? debug_level : debug_subsys) = kv.substr(eq + 1);
      continue;
    }
    if (key.starts_with("NCCL_") || key.starts_with("RCCL_"))
      set_by_env.emplace_back(key, kv.substr(eq + 1));
    if (nccl::nccl_table().find(key) == nullptr) {
      not_modelled.push_back(kv);
      continue;
    }
    const std::string path = config_path("nccl", key);
    overrides.parameters.push_back(
        {path, ConfigNode::scalar(nccl::nccl_env_value(key, kv.substr(eq + 1)),
                                  SourceLocation{where, 0, 0}, path)});
  }
  std::unique_ptr<scenario::ScenarioRun> run = scenario::load_scenario(c.scenario, overrides);
  std::vector<fabric::NodeId> ranks = run->job_ranks;
  if (c.ranks) {
    if (*c.ranks < 1 || static_cast<size_t>(*c.ranks) > ranks.size()) {
      throw InputError(SourceLocation{std::make_shared<const std::string>(c.scenario), 0, 0},
                       "--ranks", fmt::format("1 to {} (the ranks of the job)", ranks.size()),
                       std::to_string(*c.ranks));
    }
    ranks.resize(static_cast<size_t>(*c.ranks));
  }
  std::vector<std::string> names;
  std::set<uint32_t> servers;
  for (fabric::NodeId g : ranks) {
    names.push_back(run->fabric.node(g).name);
    servers.insert(run->fabric.node(g).server);
  }
  auto sweep = std::make_unique<nccl::NcclTestsWorkload>(
      o.test, nccl::OpRunner(run->fabric, ranks, run->nccl), o);
  const nccl::NcclTestsWorkload* s = sweep.get();
  run->sim->add_workload(std::move(sweep), Time{});
  Progress progress(*run->sim, false);
  run->run();
  progress.done();

  std::string banner = fmt::format(
      "rocesim {} simulation of {}: scenario '{}' ({}), {} ranks on {} servers, seed {}",
      ROCESIM_VERSION, o.test, run->name, c.scenario, ranks.size(), servers.size(), run->seed);
  if (!not_modelled.empty()) {
    std::string list;
    for (const std::string& kv : not_modelled)
      list += (list.empty() ? "" : " ") + kv;
    banner += "\n# Environment not modelled: " + list;
  }
  nccl::NcclDebugLog log;
  const bool debug = nccl::nccl_debug_info(debug_level);
  if (debug) {
    // Rank 0's host, as nccl-tests' device list names it.
    const std::string& gpu = names.front();
    log.prefix = fmt::format("{}:0:0 [0] NCCL INFO ", gpu.substr(0, gpu.find('/')));
    if (nccl::nccl_debug_subsys(debug_subsys, "ENV")) {
      // As NCCL reports the variables it reads (ENV subsystem), which `validate` reads back.
      for (const auto& [key, value] : set_by_env)
        log.init.push_back(fmt::format("{} set by environment to {}.", key, value));
    }
    if (nccl::nccl_debug_subsys(debug_subsys, "INIT")) {
      const nccl::NcclConfig& nc = s->runner().config();
      if (nc.net_socket) log.init.push_back("Using network Socket");
      // As the release prints it: NCCL 2.8's line has no CollNet nor NVLS channels.
      const nccl::OpRunner::Channels ch = s->runner().channels();
      log.init.push_back(
          nccl::tuning_tables(s->runner().config().tuning_tables).nccl28
              ? fmt::format("{} coll channels, {} p2p channels, {} p2p channels per peer", ch.coll,
                            ch.p2p, ch.p2p_per_peer)
              : fmt::format("{} coll channels, {} collnet channels, {} nvls channels, {} p2p "
                            "channels, {} p2p channels per peer",
                            ch.coll, ch.collnet, ch.nvls, ch.p2p, ch.p2p_per_peer));
      // The socket plugin's line as its connections open (only with helper threads).
      if (nc.net_socket && nc.socket_nthreads > 0) {
        log.init.push_back(fmt::format("NET/Socket: Using {} threads and {} sockets per thread",
                                       nc.socket_nthreads, nc.sockets_per_thread()));
      }
    }
    log.tuning = nccl::nccl_debug_subsys(debug_subsys, "TUNING");
  }
  std::cout << nccl::format_nccl_tests(o, s->rows(), names, banner, debug ? &log : nullptr);
  if (!c.output.empty()) {
    metrics::ResultsMeta meta{
        ROCESIM_VERSION,      run->name, c.scenario,
        run->effective_yaml,  run->seed, {rows_table(o, static_cast<int>(ranks.size()), s->rows())},
        run->calibration_yaml};
    metrics::write_results_h5(c.output, *run->recorder, meta, run->compression);
  }
  if (!c.trace.empty()) metrics::write_trace(c.trace, *run->sim, *run->recorder);
#ifndef __SANITIZE_ADDRESS__
  (void)run.release();  // see cmd_run in main.cpp
#endif
  return 0;
}

}  // namespace rocesim::cli
