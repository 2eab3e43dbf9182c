// A scenario: a YAML file that names a topology (inline or a file of topologies/), the routing
// scheme, the network model and a list of workloads. Loading validates everything against the
// parameter tables and builds the whole simulation before anything runs or is written, so a
// mistake anywhere is reported with its file, line and column and nothing is left half done.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>

#include "sim/collectives/nccl/nccl.hpp"
#include "sim/engine/simulation.hpp"
#include "sim/fabric/fabric.hpp"
#include "sim/metrics/recorder.hpp"
#include "sim/network/network_model.hpp"
#include "sim/routing/router.hpp"
#include "sim/scenario/calibration.hpp"

namespace rocesim::scenario {

struct Overrides {
  std::optional<uint64_t> seed;
  int threads = 1;
  /// Leave out the scenario's workloads (front ends that bring their own, such as
  /// `rocesim nccl-tests`); a scenario may then have none.
  bool skip_workloads = false;
  /// Parameter values applied after the scenario's calibration files (`--set`, the fitter).
  std::vector<ParamOverride> parameters;
  /// False when nothing will read the run's flow records (no results file, no trace): none is
  /// kept, whatever `output.max_flows` says (a million of them take 72 MB).
  bool flow_records = true;
};

/// Everything one run needs, built and wired; run() simulates.
struct ScenarioRun {
  std::string name;
  std::string file;
  uint64_t seed = 0;
  std::string effective_yaml;  // the scenario with every default filled in
  /// The calibrated parameters applied (calibration files, then Overrides::parameters), and
  /// their YAML form echoed into results.h5 (empty when none).
  std::vector<ParamOverride> calibration;
  std::string calibration_yaml;
  size_t max_flow_records = 0;
  int compression = 0;  // deflate level of results.h5

  fabric::Fabric fabric;
  collectives::nccl::NcclConfig nccl;     // the scenario's NCCL settings
  std::vector<fabric::NodeId> job_ranks;  // the job's GPUs, in rank order
  std::unique_ptr<routing::Router> router;
  std::unique_ptr<network::NetworkModel> network;
  std::unique_ptr<engine::Simulation> sim;
  std::unique_ptr<metrics::Recorder> recorder;

  void run();
};

std::unique_ptr<ScenarioRun> load_scenario(const std::string& path, const Overrides& o = {});
/// Same, from YAML text; relative file references resolve against `base_dir`.
std::unique_ptr<ScenarioRun> load_scenario_text(const std::string& text, const std::string& name,
                                                const std::string& base_dir,
                                                const Overrides& o = {});

/// Builds and seals just the topology of a scenario or topology file (for `rocesim topo`).
fabric::Fabric load_topology(const std::string& path);

/// Every parameter table, in the order of the scenario reference (docs/scenario.md).
std::vector<const ParamTable*> all_tables();
/// The scenario reference as Markdown.
std::string scenario_reference_markdown();

}  // namespace rocesim::scenario
