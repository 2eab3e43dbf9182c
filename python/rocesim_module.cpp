// The rocesim Python module: scenarios loaded and run in process, results as Python objects
// (lists of dicts that pandas takes as they are: pd.DataFrame(run.workloads)).
//
//   import rocesim
//   r = rocesim.run("scenarios/quickstart.yaml", set={"routing.scheme": "e-ecmp"}, seed=2)
//   r.workloads, r.tiers, r.link_events, r.end_s, r.summary; r.write("results.h5")
//   rocesim.InputError (a ValueError) carries .file, .line, .column and .key
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "sim/metrics/hdf5_writer.hpp"
#include "sim/metrics/summary.hpp"
#include "sim/scenario/calibration.hpp"
#include "sim/scenario/scenario.hpp"

#ifndef ROCESIM_VERSION
#define ROCESIM_VERSION "0.0.0"
#endif

namespace py = pybind11;
using namespace rocesim;

namespace {

/// A scenario that ran: its results, as Python sees them.
class Run {
 public:
  Run(std::unique_ptr<scenario::ScenarioRun> run, std::string file)
      : run_(std::move(run)), file_(std::move(file)) {}

  std::string name() const { return run_->name; }
  uint64_t seed() const { return run_->seed; }
  double end_s() const { return run_->sim->end_time().in_seconds(); }
  std::string scenario() const { return run_->effective_yaml; }

  py::list workloads() const {
    py::list out;
    for (const metrics::WorkloadResult& w : run_->recorder->workloads()) {
      py::dict d;
      d["name"] = w.name;
      d["type"] = w.type;
      d["start_s"] = w.start.in_seconds();
      d["completion_s"] = (w.end - w.start).in_seconds();
      d["flows"] = w.flows;
      d["bytes"] = w.bytes;
      d["throughput_gbps"] = w.throughput_gbps;
      d["mean_fct_s"] = w.mean_fct_s;
      d["max_fct_s"] = w.max_fct_s;
      for (const auto& [k, v] : w.figures.values)
        d[py::str(k)] = v;
      for (const auto& [k, v] : w.figures.notes)
        d[py::str(k)] = v;
      out.append(d);
    }
    return out;
  }

  py::list tiers() const {
    py::list out;
    for (const metrics::TierResult& t : run_->recorder->tiers()) {
      py::dict d;
      d["link_class"] = t.link_class;
      d["links"] = t.links;
      d["capacity_bps"] = t.capacity_bps;
      d["mean_utilization"] = t.mean_utilization;
      d["p50_utilization"] = t.p50_utilization;
      d["p90_utilization"] = t.p90_utilization;
      d["p99_utilization"] = t.p99_utilization;
      d["max_utilization"] = t.max_utilization;
      d["mean_qps"] = t.mean_qps;
      d["max_qps"] = t.max_qps;
      d["mmr"] = t.mmr;
      d["busy_links"] = t.busy_links;
      d["busy_mmr"] = t.busy_mmr;
      out.append(d);
    }
    return out;
  }

  py::list link_events() const {
    py::list out;
    for (const engine::LinkEvent& e : run_->sim->link_events()) {
      py::dict d;
      d["what"] = e.what;
      d["at_s"] = e.at.in_seconds();
      d["applied"] = e.applied;
      d["converged_s"] = e.converged.is_infinite()
                             ? py::object(py::none())
                             : py::object(py::float_(e.converged.in_seconds()));
      d["qps_rerouted"] = e.qps_rerouted;
      d["flows_rerouted"] = e.flows_rerouted;
      d["qps_unroutable"] = e.qps_unroutable;
      out.append(d);
    }
    return out;
  }

  std::string summary() const {
    return metrics::format_summary(*run_->recorder, metrics::RunInfo{run_->name, run_->seed, 0});
  }

  void write(const std::string& path) const {
    const metrics::ResultsMeta meta{ROCESIM_VERSION,       run_->name, file_,
                                    run_->effective_yaml,  run_->seed, {},
                                    run_->calibration_yaml};
    metrics::write_results_h5(path, *run_->recorder, meta, run_->compression);
  }

 private:
  std::unique_ptr<scenario::ScenarioRun> run_;
  std::string file_;
};

scenario::Overrides overrides(const py::dict& set, std::optional<uint64_t> seed, int threads) {
  scenario::Overrides o;
  o.seed = seed;
  o.threads = threads;
  for (const auto& [k, v] : set) {
    const std::string text = py::str(k).cast<std::string>() + "=" + py::str(v).cast<std::string>();
    o.parameters.push_back(scenario::parse_override(text, "set"));
  }
  return o;
}

}  // namespace

PYBIND11_MODULE(rocesim, m) {
  m.doc() = "rocesim: a flow-level simulator of RoCE fabrics for AI training clusters";
  m.attr("__version__") = ROCESIM_VERSION;

  static py::exception<InputError> input_error(m, "InputError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      // The message as the command line prints it, and where, as attributes.
      PyObject* type = input_error.ptr();
      py::object instance =
          py::reinterpret_steal<py::object>(PyObject_CallFunction(type, "s", e.what()));
      instance.attr("file") = e.where().file ? *e.where().file : std::string();
      instance.attr("line") = e.where().line;
      instance.attr("column") = e.where().column;
      instance.attr("key") = e.key();
      PyErr_SetObject(type, instance.ptr());
    }
  });

  py::class_<Run>(m, "Run", "A scenario that ran")
      .def_property_readonly("name", &Run::name)
      .def_property_readonly("seed", &Run::seed)
      .def_property_readonly("end_s", &Run::end_s, "simulated end of the run (s)")
      .def_property_readonly("scenario", &Run::scenario,
                             "the effective scenario (YAML), every default filled in")
      .def_property_readonly("workloads", &Run::workloads,
                             "one dict per workload: times (s), flows, bytes and its figures")
      .def_property_readonly("tiers", &Run::tiers, "one dict per link class (as /tiers)")
      .def_property_readonly("link_events", &Run::link_events, "one dict per link event")
      .def_property_readonly("summary", &Run::summary, "the summary `rocesim run` prints")
      .def("write", &Run::write, py::arg("path"), "write results.h5 (docs/output.md)");

  m.def(
      "run",
      [](const std::string& scenario, const py::dict& set, std::optional<uint64_t> seed,
         int threads) {
        auto run = scenario::load_scenario(scenario, overrides(set, seed, threads));
        {
          py::gil_scoped_release release;
          run->run();
        }
        return Run(std::move(run), scenario);
      },
      py::arg("scenario"), py::arg("set") = py::dict(), py::arg("seed") = py::none(),
      py::arg("threads") = 1,
      "Load a scenario file with `set` values over it (paths as --set takes them) and run it");
  m.def("schema", &scenario::scenario_reference_markdown, "the scenario reference (Markdown)");
}
