// rocesim sweep STUDY.yaml: runs a base scenario at every point of a study (scenario/study.hpp)
// on worker threads and writes sweep.h5 (metrics::SweepFile): /runs/<point> as `run` writes
// results.h5, and /points, one row per point with its axes and summary metrics.
//
// Every point's scenario is loaded (and so checked) before anything runs: a bad value at any
// point is an input error and nothing is written. Points finish in any order on the workers;
// they are written in point order, so the file does not depend on the thread count. A point
// already in the output file (a sweep resumed) is not run again. SIGINT or SIGTERM stops
// starting points; those running finish, and the file is written with every finished point.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

#include "cli/commands.hpp"
#include "cli/mpi.hpp"
#include "sim/metrics/hdf5_writer.hpp"
#include "sim/metrics/summary.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/scenario/study.hpp"

#ifndef ROCESIM_VERSION
#define ROCESIM_VERSION "0.0.0"
#endif

namespace rocesim::cli {
namespace {

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int sig) {
  g_stop = sig;
}

/// A point's row as text: "axis <path>=<value>" and "metric <name>=<number>" lines (numbers
/// with 17 significant digits, so they read back exactly), kept in sweep.h5 so that a resumed
/// sweep rebuilds its table without running the point again.
std::string row_text(const scenario::Study& study, const scenario::StudyPoint& p,
                     const scenario::ScenarioRun& run) {
  std::string out = fmt::format("seed {}\n", run.seed);
  for (size_t a = 0; a < study.axes.size(); ++a)
    out += fmt::format("axis {}={}\n", study.axes[a], p.values[a]);
  for (const auto& [name, v] : metrics::run_metrics(*run.recorder, run.sim->end_time()))
    out += fmt::format("metric {}={:.17g}\n", name, v);
  return out;
}

struct ParsedRow {
  uint64_t seed = 0;
  std::vector<std::pair<std::string, std::string>> axes;
  std::vector<std::pair<std::string, double>> metrics;
};

ParsedRow parse_row(const std::string& text) {
  ParsedRow r;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (line.rfind("seed ", 0) == 0) {
      r.seed = std::stoull(line.substr(5));
    } else if (line.rfind("axis ", 0) == 0 && eq != std::string::npos) {
      r.axes.emplace_back(line.substr(5, eq - 5), line.substr(eq + 1));
    } else if (line.rfind("metric ", 0) == 0 && eq != std::string::npos) {
      r.metrics.emplace_back(line.substr(7, eq - 7), std::stod(line.substr(eq + 1)));
    }
  }
  return r;
}

/// The points table: point, seed, the axes (text as written), then every metric any point
/// has, in order of first appearance (NaN where a point lacks it).
metrics::Table points_table(const scenario::Study& study,
                            const std::map<uint32_t, std::string>& rows) {
  metrics::Table t("points", "one row per point of the study");
  const size_t point_col = t.add_integer("point");
  const size_t seed_col = t.add_integer("seed");
  std::vector<size_t> axis_col;
  for (const std::string& a : study.axes)
    axis_col.push_back(t.add_text(a));
  std::vector<ParsedRow> parsed;
  std::vector<std::string> names;
  std::map<std::string, size_t> index;
  for (const auto& [id, text] : rows) {
    parsed.push_back(parse_row(text));
    for (const auto& [name, v] : parsed.back().metrics) {
      if (index.emplace(name, names.size()).second) names.push_back(name);
    }
  }
  std::vector<size_t> metric_col;
  for (const std::string& n : names)
    metric_col.push_back(t.add_number(n));
  size_t k = 0;
  for (const auto& [id, text] : rows) {
    const ParsedRow& r = parsed[k++];
    t.push(point_col, static_cast<int64_t>(id));
    t.push(seed_col, static_cast<int64_t>(r.seed));
    for (size_t a = 0; a < study.axes.size(); ++a) {
      std::string v;
      for (const auto& [name, value] : r.axes) {
        if (name == study.axes[a]) v = value;
      }
      t.push(axis_col[a], v);
    }
    std::vector<double> values(names.size(), std::nan(""));
    for (const auto& [name, v] : r.metrics)
      values[index[name]] = v;
    for (size_t m = 0; m < names.size(); ++m)
      t.push(metric_col[m], values[m]);
  }
  return t;
}

std::unique_ptr<scenario::ScenarioRun> load_point(const scenario::Study& study,
                                                  const scenario::StudyPoint& p) {
  scenario::Overrides o;
  o.seed = p.seed;
  o.threads = 1;
  o.parameters = p.overrides;
  return scenario::load_scenario(study.scenario, o);
}

}  // namespace

int sweep(const SweepCommand& c) {
  const scenario::Study study = scenario::load_study(c.study);
  if (c.points && (c.points->first > c.points->second || c.points->second >= study.points.size())) {
    throw InputError(
        SourceLocation{}, "--points",
        fmt::format("FIRST-LAST within 0-{} (the study's points)", study.points.size() - 1),
        fmt::format("{}-{}", c.points->first, c.points->second));
  }
  const int threads = std::max(1, c.threads);

  // Check every point before anything runs or is written: one load per set of values (the
  // points that differ only by their seed are one scenario).
  {
    std::vector<uint32_t> distinct;
    std::set<std::vector<std::string>> seen;
    for (const scenario::StudyPoint& p : study.points) {
      if (seen.insert(p.values).second) distinct.push_back(p.id);
    }
    const int d = static_cast<int>(distinct.size());
    std::vector<std::exception_ptr> errors(distinct.size());
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int i = 0; i < d; ++i) {
      try {
        (void)load_point(study, study.points[distinct[static_cast<size_t>(i)]]);
      } catch (...) {
        errors[static_cast<size_t>(i)] = std::current_exception();
      }
    }
    for (const std::exception_ptr& e : errors) {
      if (e && mpi::rank() == 0) std::rethrow_exception(e);
      if (e) return kExitInput;  // rank 0 reports it; the same error on every rank
    }
  }

  // Rank 0 holds the output (a resumed sweep's points are in it) and writes its own points
  // there; with several processes (mpirun) each other rank writes the points it runs to a part
  // file, which rank 0 copies in at the end.
  const int rank = mpi::rank(), ranks = mpi::size();
  std::unique_ptr<metrics::SweepFile> output;
  std::exception_ptr open_error;
  std::vector<uint32_t> done;
  if (rank == 0) {
    try {
      output =
          std::make_unique<metrics::SweepFile>(c.output, study.name, study.text, ROCESIM_VERSION);
      for (const auto& [id, row] : output->resumed())
        done.push_back(id);
    } catch (...) {
      open_error = std::current_exception();
    }
  }
  if (mpi::max_all(open_error ? 1 : 0) != 0) {
    if (open_error) std::rethrow_exception(open_error);
    return 1;  // rank 0 reports it
  }
  mpi::broadcast(done);
  std::map<uint32_t, std::string> rows;
  if (output) rows = output->resumed();
  const std::string part_path = fmt::format("{}.part{}", c.output, rank);
  std::unique_ptr<metrics::SweepFile> part;
  if (rank > 0) {
    std::error_code ec;
    std::filesystem::remove(part_path, ec);  // a stale part of an earlier, killed sweep
    part = std::make_unique<metrics::SweepFile>(part_path, study.name, study.text, ROCESIM_VERSION);
  }
  metrics::SweepFile& file = rank > 0 ? *part : *output;
  std::vector<uint32_t> pending;
  size_t k = 0;
  for (const scenario::StudyPoint& p : study.points) {
    const bool chosen = !c.points || (p.id >= c.points->first && p.id <= c.points->second);
    if (!chosen || std::binary_search(done.begin(), done.end(), p.id)) continue;
    if (k++ % static_cast<size_t>(ranks) == static_cast<size_t>(rank)) pending.push_back(p.id);
  }

  g_stop = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);

  const bool progress = !c.quiet && rank == 0 && ::isatty(STDERR_FILENO);
  const auto wall0 = std::chrono::steady_clock::now();
  // Two locks: `mutex` guards the finished points and the counters (held for moments), `writing`
  // the output file (HDF5 is written by one thread at a time). A thread that finishes a point
  // writes what is ready in point order unless another is writing already, which then takes
  // it too: simulating goes on beside the writes.
  std::mutex mutex, writing;
  std::map<uint32_t, std::unique_ptr<scenario::ScenarioRun>> ready;  // finished, not written
  size_t next = 0;  // index in `pending` of the next point to write
  size_t finished = 0;
  std::vector<std::exception_ptr> errors(pending.size());
  auto write = [&](uint32_t id, const scenario::ScenarioRun& run) {
    const std::string row = row_text(study, study.points[id], run);
    const metrics::ResultsMeta meta{ROCESIM_VERSION,     run.name, study.scenario,
                                    run.effective_yaml,  run.seed, {},
                                    run.calibration_yaml};
    file.add_run(id, *run.recorder, meta, row, run.compression);
    rows[id] = row;
  };
  // The next point to write, in point order, if it has finished (under `mutex`): its id and
  // run, or no run.
  auto take = [&]() -> std::pair<uint32_t, std::unique_ptr<scenario::ScenarioRun>> {
    if (next == pending.size()) return {0, nullptr};
    const auto it = ready.find(pending[next]);
    if (it == ready.end()) return {0, nullptr};
    std::pair<uint32_t, std::unique_ptr<scenario::ScenarioRun>> out{it->first,
                                                                    std::move(it->second)};
    ready.erase(it);
    ++next;
    return out;
  };
  // Writes the finished points in point order, as far as they go, unless another thread is
  // writing: that one checks again after it lets go, so no point is left behind.
  auto flush = [&]() {
    for (;;) {
      std::unique_lock<std::mutex> w(writing, std::try_to_lock);
      if (!w.owns_lock()) return;
      for (;;) {
        std::pair<uint32_t, std::unique_ptr<scenario::ScenarioRun>> point;
        {
          const std::lock_guard<std::mutex> lock(mutex);
          point = take();
        }
        if (!point.second) break;
        write(point.first, *point.second);
      }
      w.unlock();
      const std::lock_guard<std::mutex> lock(mutex);
      if (next == pending.size() || ready.find(pending[next]) == ready.end()) return;
    }
  };
  const size_t held = rows.size();  // points the file held before
  const int m = static_cast<int>(pending.size());
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int i = 0; i < m; ++i) {
    if (g_stop != 0) continue;
    try {
      auto run = load_point(study, study.points[pending[static_cast<size_t>(i)]]);
      run->run();
      {
        const std::lock_guard<std::mutex> lock(mutex);
        ready.emplace(pending[static_cast<size_t>(i)], std::move(run));
        ++finished;
      }
      flush();
      if (progress) {
        const std::lock_guard<std::mutex> lock(mutex);
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
        const double eta = elapsed / static_cast<double>(finished) *
                           static_cast<double>(pending.size() - finished);
        std::fprintf(stderr, "\r[rocesim sweep] %zu/%zu points  %.0f s  ETA %.0f s   ",
                     held + finished, study.points.size(), elapsed, eta);
        std::fflush(stderr);
      }
    } catch (...) {
      errors[static_cast<size_t>(i)] = std::current_exception();
    }
  }
  if (progress) std::fprintf(stderr, "\n");
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  std::exception_ptr run_error;
  for (const std::exception_ptr& e : errors) {
    if (e && !run_error) run_error = e;
  }
  // Interrupted: the points that finished after a gap are written too, in point order.
  if (!run_error) {
    try {
      for (const auto& [id, run] : ready)
        write(id, *run);
      if (part) part->finish(points_table(study, {}));
    } catch (...) {
      run_error = std::current_exception();
    }
  }
  const int stopped = mpi::max_all(static_cast<int>(g_stop));
  if (mpi::max_all(run_error ? 1 : 0) != 0) {
    // Every process removes its own temporary files; rank 0 reports (its error, or that of
    // another process, which prints its own).
    std::error_code ec;
    std::filesystem::remove(part_path, ec);
    if (run_error && (rank == 0 || ranks > 1)) std::rethrow_exception(run_error);
    if (rank == 0) throw std::runtime_error("another process of the sweep failed (see above)");
    return 1;
  }
  mpi::barrier();  // every part is written
  if (rank != 0) return stopped != 0 ? 128 + stopped : 0;
  if (ranks > 1) {
    std::vector<std::string> parts;
    for (int r = 1; r < ranks; ++r)
      parts.push_back(fmt::format("{}.part{}", c.output, r));
    for (const auto& [id, row] : output->merge(parts))
      rows[id] = row;
    for (const std::string& p : parts) {
      std::error_code ec;
      std::filesystem::remove(p, ec);
    }
  }
  output->finish(points_table(study, rows));
  const size_t resumed = output->resumed().size();
  if (!c.quiet) {
    std::cout << fmt::format("sweep {}: {} of {} points in {} ({} run now, {} resumed)\n",
                             study.name, rows.size(), study.points.size(), c.output,
                             rows.size() - resumed, resumed);
  }
  if (stopped != 0) {
    std::cerr << fmt::format(
        "sweep interrupted: {} of {} points written to {}; run the same command to resume\n",
        rows.size(), study.points.size(), c.output);
    return 128 + stopped;
  }
  return 0;
}

}  // namespace rocesim::cli
