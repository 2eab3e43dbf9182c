// The native part of the rocesim Python package (python/rocesim/__init__.py is the public
// face): scenarios and studies loaded and run in process, results as Python objects (lists of
// dicts and dicts of floats, which the package turns into pandas DataFrames).
//
//   import rocesim._rocesim as native
//   r = native.load("scenarios/quickstart.yaml", {"routing.scheme": "e-ecmp"}, 2, 1); r.run()
//   r.workloads, r.tiers, r.link_events, r.metrics, r.end_s, r.summary; r.write("results.h5")
//   InputError (a ValueError) carries .file, .line, .column and .key
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sim/metrics/hdf5_writer.hpp"
#include "sim/metrics/summary.hpp"
#include "sim/scenario/calibration.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/scenario/study.hpp"

#ifndef ROCESIM_VERSION
#define ROCESIM_VERSION "0.0.0"
#endif

namespace py = pybind11;
using namespace rocesim;

namespace {

/// A scenario loaded (checked and built) and, once run() is called, simulated: its results as
/// Python sees them.
class Run {
 public:
  Run(std::unique_ptr<scenario::ScenarioRun> run, std::string file)
      : run_(std::move(run)), file_(std::move(file)) {}

  /// Simulates, without the GIL (other Python threads go on); once.
  void run() {
    if (ran_) return;
    py::gil_scoped_release release;
    simulate();
  }
  /// Simulates; the caller has released the GIL (a pool of points).
  void simulate() {
    run_->run();
    ran_ = true;
  }
  bool ran() const { return ran_; }

  std::string name() const { return run_->name; }
  uint64_t seed() const { return run_->seed; }
  std::string scenario() const { return run_->effective_yaml; }
  double end_s() const {
    need_run();
    return run_->sim->end_time().in_seconds();
  }

  py::dict metrics() const {
    need_run();
    py::dict out;
    for (const auto& [name, value] : metrics::run_metrics(*run_->recorder, run_->sim->end_time()))
      out[py::str(name)] = value;
    return out;
  }

  py::list workloads() const {
    need_run();
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
    need_run();
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

  /// One row per link class, as /congestion/tiers of results.h5; empty for a model without
  /// queues.
  py::list congestion() const {
    need_run();
    py::list out;
    const metrics::CongestionRecorder& cr = run_->recorder->congestion();
    if (!cr.any()) return out;
    for (const metrics::TierCongestion& t : cr.tiers()) {
      py::dict d;
      d["link_class"] = t.link_class;
      d["links"] = t.links;
      d["paused_fraction"] = t.paused_fraction;
      d["pauses"] = t.pauses;
      d["max_queue_bytes"] = t.max_queue;
      d["ecn_marks"] = t.ecn_marks;
      d["drop_bytes"] = t.drops;
      out.append(d);
    }
    return out;
  }

  py::list link_events() const {
    need_run();
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
    need_run();
    return metrics::format_summary(*run_->recorder, metrics::RunInfo{run_->name, run_->seed, 0});
  }

  void write(const std::string& path) const {
    need_run();
    const metrics::ResultsMeta meta{ROCESIM_VERSION,       run_->name, file_,
                                    run_->effective_yaml,  run_->seed, {},
                                    run_->calibration_yaml};
    metrics::write_results_h5(path, *run_->recorder, meta, run_->compression);
  }

 private:
  void need_run() const {
    if (!ran_) throw py::value_error("the scenario has not run yet: call run() first");
  }

  std::unique_ptr<scenario::ScenarioRun> run_;
  std::string file_;
  bool ran_ = false;
};

/// A study's points (a study file, or its text): run a set of them on worker threads.
class Study {
 public:
  explicit Study(scenario::Study s) : s_(std::move(s)) {}

  std::string name() const { return s_.name; }
  std::string scenario() const { return s_.scenario; }
  std::vector<std::string> axes() const { return s_.axes; }
  py::list points() const {
    py::list out;
    for (const scenario::StudyPoint& p : s_.points) {
      py::dict d;
      d["point"] = p.id;
      d["seed"] = p.seed ? py::object(py::int_(*p.seed)) : py::object(py::none());
      d["values"] = p.values;
      out.append(d);
    }
    return out;
  }

  /// Loads the points `ids` (in order, so the first bad value is the one reported), then runs
  /// them on `workers` threads without the GIL. Each point runs on one thread, so the results
  /// are those of the points run one by one.
  std::vector<std::shared_ptr<Run>> run(const std::vector<uint32_t>& ids, int workers) {
    std::vector<std::shared_ptr<Run>> runs;
    for (uint32_t id : ids) {
      if (id >= s_.points.size()) throw py::index_error("no such point: " + std::to_string(id));
      const scenario::StudyPoint& p = s_.points[id];
      scenario::Overrides o;
      o.seed = p.seed;
      o.parameters = p.overrides;
      runs.push_back(std::make_shared<Run>(scenario::load_scenario(s_.scenario, o), s_.scenario));
    }
    py::gil_scoped_release release;
    std::atomic<size_t> next{0};
    std::exception_ptr failure;
    std::atomic<bool> failed{false};
    auto work = [&] {
      for (size_t i = next++; i < runs.size() && !failed; i = next++) {
        try {
          runs[i]->simulate();
        } catch (...) {
          if (!failed.exchange(true)) failure = std::current_exception();
        }
      }
    };
    std::vector<std::thread> pool;
    const size_t n = std::min<size_t>(std::max(1, workers), runs.size());
    for (size_t t = 1; t < n; ++t)
      pool.emplace_back(work);
    work();
    for (std::thread& t : pool)
      t.join();
    if (failure) std::rethrow_exception(failure);
    return runs;
  }

 private:
  scenario::Study s_;
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

PYBIND11_MODULE(_rocesim, m) {
  m.doc() = "rocesim's native part: scenarios and studies loaded and run in process";
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

  py::class_<Run, std::shared_ptr<Run>>(m, "Run", "A scenario loaded and, after run(), simulated")
      .def("run", &Run::run, "simulate (once; without the GIL)")
      .def_property_readonly("ran", &Run::ran)
      .def_property_readonly("name", &Run::name)
      .def_property_readonly("seed", &Run::seed)
      .def_property_readonly("scenario", &Run::scenario,
                             "the effective scenario (YAML), every default filled in")
      .def_property_readonly("end_s", &Run::end_s, "simulated end of the run (s)")
      .def_property_readonly("metrics", &Run::metrics,
                             "the run's figures by name, as a sweep's points table has them")
      .def_property_readonly("workloads", &Run::workloads,
                             "one dict per workload: times (s), flows, bytes and its figures")
      .def_property_readonly("tiers", &Run::tiers, "one dict per link class (as /tiers)")
      .def_property_readonly("congestion", &Run::congestion,
                             "one dict per link class (as /congestion/tiers); empty with max-min")
      .def_property_readonly("link_events", &Run::link_events, "one dict per link event")
      .def_property_readonly("summary", &Run::summary, "the summary `rocesim run` prints")
      .def("write", &Run::write, py::arg("path"), "write results.h5 (docs/output.md)");

  py::class_<Study>(m, "Study", "A study's points")
      .def_property_readonly("name", &Study::name)
      .def_property_readonly("scenario", &Study::scenario, "the base scenario's path")
      .def_property_readonly("axes", &Study::axes, "the axes' paths")
      .def_property_readonly("points", &Study::points, "point, seed (None: the scenario's), values")
      .def("run", &Study::run, py::arg("ids"), py::arg("workers") = 1,
           "load the points, then run them on worker threads; returns their Runs");

  m.def(
      "load",
      [](const std::string& scenario, const py::dict& set, std::optional<uint64_t> seed,
         int threads) {
        return std::make_shared<Run>(
            scenario::load_scenario(scenario, overrides(set, seed, threads)), scenario);
      },
      py::arg("scenario"), py::arg("set") = py::dict(), py::arg("seed") = py::none(),
      py::arg("threads") = 1,
      "Load a scenario file with `set` values over it (paths as --set takes them)");
  m.def(
      "load_text",
      [](const std::string& text, const std::string& name, const std::string& base_dir,
         const py::dict& set, std::optional<uint64_t> seed, int threads) {
        return std::make_shared<Run>(
            scenario::load_scenario_text(text, name, base_dir, overrides(set, seed, threads)),
            name);
      },
      py::arg("text"), py::arg("name"), py::arg("base_dir"), py::arg("set") = py::dict(),
      py::arg("seed") = py::none(), py::arg("threads") = 1,
      "Load a scenario from YAML text (JSON is YAML); relative paths start at base_dir");
  m.def(
      "study", [](const std::string& path) { return Study(scenario::load_study(path)); },
      py::arg("path"), "Read a study file");
  m.def(
      "study_text",
      [](const std::string& text, const std::string& name, const std::string& base_dir) {
        return Study(scenario::load_study_text(text, name, base_dir));
      },
      py::arg("text"), py::arg("name"), py::arg("base_dir"), "Read a study from YAML text");
  m.def("schema", &scenario::scenario_reference_markdown, "the scenario reference (Markdown)");
}
