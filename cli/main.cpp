// rocesim: the command-line front end.
//   rocesim run SCENARIO.yaml [-o results.h5] [--trace trace.json] [--seed N] [--threads N]
//   rocesim nccl-tests --scenario SCENARIO.yaml [-o results.h5] TEST [nccl-tests flags]
//   rocesim validate --measured LOG_OR_DIR --scenario SCENARIO.yaml [-o DIR]
//   rocesim calibrate fit --measured FILES --scenario SCENARIO.yaml [-o calibration.yaml]
//   [mpirun -np N] rocesim sweep STUDY.yaml [-o sweep.h5] [--threads N]
//   rocesim plot RESULTS.h5 [-o DIR]
//   rocesim train SCENARIO.yaml [--max-batch]
//   rocesim topo FILE.yaml
//   rocesim schema
// Exit codes (commands.hpp): 0 success, 2 bad input (scenario, arguments), 3 internal error, 1
// anything else (e.g. the output file cannot be written).
#include <fmt/format.h>
#include <malloc.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <new>
#include <string>

#include "cli/commands.hpp"
#include "cli/mpi.hpp"
#include "sim/core/error.hpp"
#include "sim/metrics/hdf5_writer.hpp"
#include "sim/metrics/output_files.hpp"
#include "sim/metrics/summary.hpp"
#include "sim/metrics/trace.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/topology/report.hpp"
#include "sim/training/training.hpp"

#ifndef ROCESIM_VERSION
#define ROCESIM_VERSION "0.0.0"
#endif

namespace {

using namespace rocesim;
using cli::kExitInput;
using cli::kExitInternal;

int cmd_run(const std::string& scenario_path, const std::string& out_path,
            const std::string& trace_path, std::optional<uint64_t> seed, int threads, bool quiet,
            const std::vector<std::string>& sets, const std::vector<std::string>& calibrations) {
  const auto wall0 = std::chrono::steady_clock::now();
  scenario::Overrides o;
  o.seed = seed;
  o.threads = threads;
  o.parameters = cli::parse_sets(sets, calibrations);
  o.flow_records = !out_path.empty() || !trace_path.empty();
  std::unique_ptr<scenario::ScenarioRun> run = scenario::load_scenario(scenario_path, o);

  cli::Progress progress(*run->sim, quiet);
  run->run();
  progress.done();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();

  if (!out_path.empty()) {
    metrics::ResultsMeta meta{ROCESIM_VERSION, run->name, scenario_path,        run->effective_yaml,
                              run->seed,       {},        run->calibration_yaml};
    metrics::write_results_h5(out_path, *run->recorder, meta, run->compression);
  }
  if (!trace_path.empty()) metrics::write_trace(trace_path, *run->sim, *run->recorder);
  if (!quiet) {
    std::cout << metrics::format_summary(*run->recorder,
                                         {run->name, run->seed, wall, !out_path.empty()});
    if (!out_path.empty()) std::cout << fmt::format("\nresults written to {}\n", out_path);
    if (!trace_path.empty()) std::cout << fmt::format("trace written to {}\n", trace_path);
  }
  // The process ends here: let the OS reclaim the simulation's memory in one go rather than
  // free its hundreds of thousands of objects one by one (as compilers do with -disable-free).
  // Sanitizer builds free everything, so that leak checking keeps its meaning.
#ifndef __SANITIZE_ADDRESS__
  (void)run.release();
#endif
  return 0;
}

/// The memory of each training workload of a scenario; with `max_batch`, the largest
/// micro-batch per GPU that fits.
int cmd_train(const std::string& scenario_path, bool max_batch,
              const std::vector<std::string>& sets, const std::vector<std::string>& calibrations) {
  scenario::Overrides o;
  o.parameters = cli::parse_sets(sets, calibrations);
  const std::unique_ptr<scenario::ScenarioRun> run = scenario::load_scenario(scenario_path, o);
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  const auto breakdown = [&](const training::MemoryBreakdown& m) {
    std::string parts;
    for (const auto& [name, bytes] : m.parts)
      parts += fmt::format("  {}={:.2f}", name, bytes / kGiB);
    return parts;
  };
  int found = 0;
  for (const engine::WorkloadState& w : run->sim->workloads()) {
    const training::TrainingSetup* s = training::training_setup_of(*w.workload);
    if (s == nullptr) continue;
    ++found;
    const double capacity = static_cast<double>(s->gpu.memory.count());
    const auto [stage, mem] = s->peak_memory(s->micro_batch);
    std::cout << fmt::format(
        "{}: {} on DP {} x TP {} x PP {} x EP {}, ZeRO stage {}, micro-batch {} x {} "
        "accumulation steps\n",
        w.workload->name(), s->model.name.empty() ? "model" : s->model.name, s->dp, s->tp, s->pp,
        s->ep, s->ds.zero.stage, s->micro_batch, s->grad_accumulation);
    std::cout << fmt::format("  memory per GPU: {:.2f} GiB of {:.2f} GiB ({}; pipeline stage {})\n",
                             mem.total() / kGiB, capacity / kGiB,
                             mem.total() <= capacity ? "fits" : "out of memory", stage);
    std::cout << fmt::format("  GiB:{}\n", breakdown(mem));
    if (!max_batch) continue;
    const int64_t best = s->max_micro_batch();
    if (best == 0) {
      std::cout << "  largest micro-batch that fits: none (1 does not fit)\n";
      continue;
    }
    const auto [best_stage, best_mem] = s->peak_memory(best);
    const auto [next_stage, next_mem] = s->peak_memory(best + 1);
    std::cout << fmt::format(
        "  largest micro-batch that fits: {} ({:.2f} GiB; {} needs {:.2f} GiB)\n  GiB:{}\n", best,
        best_mem.total() / kGiB, best + 1, next_mem.total() / kGiB, breakdown(best_mem));
  }
  if (found == 0) {
    throw InputError(SourceLocation{std::make_shared<const std::string>(scenario_path), 0, 0},
                     "workloads", "a workload of type training", "none");
  }
  return 0;
}

int cmd_topo(const std::string& path) {
  const fabric::Fabric f = scenario::load_topology(path);
  std::cout << topology::format_report(topology::analyze(f));
  return 0;
}

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// Transparent huge pages for glibc's heap (its tunable glibc.malloc.hugetlb=1, glibc 2.35 and
// later: malloc advises the memory it takes from the kernel MADV_HUGEPAGE). A large run then
// faults its memory in 2 MiB pages rather than 4 KiB ones: the 65,536-host permutation 42,700
// page faults -> about 1,900 and 0.61 of the time, the 16,384-host one 0.67, a 1,024-GPU ring
// 0.91; a run of 20 ms pays the restart's 8 ms (docs/performance.md, "Huge pages"). glibc
// reads its tunables when a process starts, so rocesim starts itself again, once, with the
// tunable set, where the kernel gives huge pages on request (transparent_hugepage "madvise",
// Debian's default; with "always" the heap has them anyway, with "never" there are none). Not
// where GLIBC_TUNABLES is set (the user's choice stands: glibc.malloc.hugetlb=0 keeps 4 KiB
// pages and skips the restart), nor under a sanitizer's allocator (the macros above) or
// valgrind's, which would lose sight of the new image. The results are the same bytes.
void restart_with_huge_pages(char** argv) {
  if (std::getenv("GLIBC_TUNABLES") != nullptr) return;
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload != nullptr && std::strstr(preload, "vgpreload") != nullptr) return;
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  if (!std::getline(thp, modes) || modes.find("[madvise]") == std::string::npos) return;
  if (setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("GLIBC_TUNABLES");  // the exec failed: carry on in this image
}
#endif

}  // namespace

int main(int argc, char** argv) {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  restart_with_huge_pages(argv);
#endif
#ifdef __GLIBC__
  // A simulation allocates and frees many large buffers (per operation, per sweep point). glibc
  // maps each one over its dynamic threshold afresh and unmaps it when freed, so every reuse
  // faults its pages in again; from the heap, a freed buffer serves the next one. Blocks up to
  // 64 MiB come from the heap, and up to 128 MiB of free heap top is kept. A 64-point sweep of
  // the quickstart on 2 threads: 16,600-37,800 page faults -> 7,600-8,600, 0.19-0.22 -> 0.18 s;
  // the 1,024-host all-to-all 244,000 -> 177,000, 2.09-2.17 -> 2.03 s (docs/performance.md).
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
#endif
  // Under mpirun (rocesim sweep), MPI runs from here to the end, whatever the exit path.
  cli::mpi::init(&argc, &argv);
  struct Finalize {
    ~Finalize() { cli::mpi::finalize(); }
  } finalize;
  // An output half written when SIGINT or SIGTERM arrives is removed (output_files.hpp).
  metrics::remove_temporaries_on_signals();
  CLI::App app{"rocesim: a flow-level simulator of RoCE fabrics for AI training clusters"};
  app.set_version_flag("--version", ROCESIM_VERSION);
  app.require_subcommand(1);

  std::string scenario_path, out_path = "results.h5", topo_path, trace_path;
  std::optional<uint64_t> seed;
  int threads = 1;
  bool quiet = false, no_output = false;
  std::vector<std::string> sets, calibrations;
  const auto add_set = [](CLI::App* cmd, std::vector<std::string>& into,
                          std::vector<std::string>& files) {
    cmd->add_option("--calibration", files,
                    "a calibration file (rocesim calibrate fit) over the scenario and its own "
                    "calibration files (repeatable)")
        ->allow_extra_args(false);
    cmd->add_option("--set", into,
                    "a parameter value KEY=VALUE over the scenario and the calibration files "
                    "(repeatable), e.g. --set topology.node.nic_efficiency=0.95")
        ->allow_extra_args(false);
  };

  // A seed is a whole number from 0 to 2^64 - 1: "-1" is not read as 2^64 - 1.
  const CLI::Validator seed_check(
      [](std::string& s) -> std::string {
        const bool digits =
            !s.empty() && s.size() <= 20 &&
            std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (!digits || (s.size() == 20 && s > "18446744073709551615")) {
          return "a seed is a whole number from 0 to 18446744073709551615, not '" + s + "'";
        }
        return {};
      },
      "SEED");
  const auto add_seed = [&](CLI::App* cmd, std::optional<uint64_t>& into) {
    cmd->add_option("--seed", into, "override the scenario's seed")->check(seed_check);
  };

  CLI::App* run =
      app.add_subcommand("run", "Simulate a scenario; print a summary, write results.h5");
  run->add_option("scenario", scenario_path, "scenario file (YAML)")->required();
  run->add_option("-o,--output", out_path, "results file (HDF5)")->capture_default_str();
  add_seed(run, seed);
  run->add_option("--threads", threads, "worker threads (results do not depend on it)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  run->add_flag("--no-output", no_output, "do not write results.h5");
  run->add_option("--trace", trace_path,
                  "write a timeline trace (Chrome trace / Perfetto JSON) of the workloads");
  run->add_flag("-q,--quiet", quiet, "print nothing on success");
  add_set(run, sets, calibrations);

  CLI::App* topo = app.add_subcommand("topo",
                                      "Describe a topology: counts, subscription, "
                                      "bisection bandwidth");
  topo->add_option("file", topo_path, "topology or scenario file (YAML)")->required();

  cli::NcclTestsCommand nt;
  bool nt_no_output = false;
  CLI::App* nccl_tests = app.add_subcommand(
      "nccl-tests",
      "Run an nccl-tests benchmark on the scenario's job and print its table, e.g. "
      "`rocesim nccl-tests --scenario S.yaml all_reduce_perf -b 8 -e 8G -f 2`");
  nccl_tests->add_option("--scenario", nt.scenario, "scenario file (YAML)")->required();
  nccl_tests->add_option("-o,--output", nt.output, "results file (HDF5); none without it");
  nccl_tests->add_flag("--no-output", nt_no_output, "write no results file (the default)");
  nccl_tests->add_option("--trace", nt.trace, "write a timeline trace (Chrome trace JSON)");
  add_seed(nccl_tests, nt.seed);
  nccl_tests->add_option("--ranks", nt.ranks, "use the job's first N ranks");
  add_set(nccl_tests, nt.set, nt.calibration);
  nccl_tests
      ->add_option("-x,--env", nt.env,
                   "an NCCL setting KEY=VALUE over the scenario's `nccl:` section, as "
                   "`mpirun -x` passes it (repeatable), e.g. -x NCCL_ALGO=Ring")
      ->allow_extra_args(false);
  // Everything from the benchmark's name on belongs to nccl-tests.
  nccl_tests->prefix_command();

  cli::ValidateCommand val;
  val.output_dir = "validation-results";
  bool no_plot = false;
  CLI::App* validate = app.add_subcommand(
      "validate",
      "Simulate every collective and size of measured nccl-tests tables and report the errors");
  validate
      ->add_option("--measured", val.measured,
                   "an nccl-tests log, a measured dataset, or a "
                   "directory of them")
      ->required();
  validate
      ->add_option("--scenario", val.scenario,
                   "scenario file (YAML) of the measured "
                   "cluster")
      ->required();
  validate
      ->add_option("-o,--output", val.output_dir,
                   "directory for validation.csv, validation_bands.csv, validation.h5 and "
                   "validation.png")
      ->capture_default_str();
  add_seed(validate, val.seed);
  validate
      ->add_option("--tables", val.tables,
                   "compare only the tables whose names start with one of these (repeatable or "
                   "comma-separated), e.g. --tables aac8_,aac10_ for one cluster of a file that "
                   "holds several")
      ->delimiter(',');
  validate->add_flag("--no-plot", no_plot, "do not draw validation.png");
  add_set(validate, val.set, val.calibration);

  cli::CalibrateFitCommand cf;
  cf.output = "calibration.yaml";
  CLI::App* calibrate =
      app.add_subcommand("calibrate", "Fit the model's parameters to measurements of a cluster");
  calibrate->require_subcommand(1);
  CLI::App* fit = calibrate->add_subcommand(
      "fit",
      "Fit named scenario parameters to measured collective times (Levenberg-Marquardt with the "
      "simulator in the loop) and write calibration.yaml");
  fit->add_option("--measured", cf.measured,
                  "nccl-tests logs, measured datasets (rocesim-bench output), or directories of "
                  "them (repeatable)")
      ->required();
  fit->add_option("--scenario", cf.scenario, "scenario file (YAML) of the measured cluster")
      ->required();
  fit->add_option("-o,--output", cf.output, "calibration file to write")->capture_default_str();
  fit->add_option("--residuals", cf.residuals, "also write the residual of every row (CSV)");
  fit->add_option("--param", cf.params,
                  "a parameter to fit, PATH or PATH=LO..HI with units (repeatable); default: "
                  "topology.node.nic_efficiency, topology.node.nvlink_efficiency (xgmi_efficiency "
                  "on an xGMI mesh), "
                  "nccl.NCCL_NET_OVERHEAD, nccl.base_latency_factor, nccl.hop_latency_factor")
      ->allow_extra_args(false);
  fit->add_option("--train", cf.train,
                  "rows to fit on, e.g. 'collective=allreduce,size=1MiB..,nodes=2..4' (default: "
                  "all)");
  fit->add_option("--test", cf.test,
                  "held-out rows to report errors on (default: every row not in --train, when "
                  "--train is given)");
  add_set(fit, cf.set, cf.calibration);
  fit->add_option("--nicprobe", cf.nicprobe,
                  "rocesim-nicprobe output with a loopback test: its port rate, NIC efficiency "
                  "(achievable bandwidth / framed port rate) and half its zero-byte latency set "
                  "topology.node.nic_speed, nic_efficiency and pcie_latency (as starting values "
                  "when those parameters are fitted)");
  fit->add_flag("--no-priors", cf.no_priors,
                "fit to the data alone: no Gaussian priors around the physical values of "
                "efficiencies, latency factors and times");
  fit->add_option("--max-iterations", cf.max_iterations, "Levenberg-Marquardt iterations")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  fit->add_option("--loss", cf.loss,
                  "linear (least squares), soft_l1 or cauchy (robust to rows the model cannot "
                  "explain)")
      ->capture_default_str()
      ->check(CLI::IsMember({"linear", "soft_l1", "cauchy"}));
  fit->add_option("--loss-scale", cf.loss_scale,
                  "log-ratio residual where a robust loss stops counting fully (0.1: ~10%)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) {
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            if (end != v.c_str() && *end == '\0' && x > 0 && std::isfinite(x)) return std::string();
            return "expected a number > 0, found '" + v + "'";
          },
          "NUMBER > 0"));
  fit->add_option("--threads", cf.threads,
                  "simulations run in parallel (results do not depend on it)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  add_seed(fit, cf.seed);

  cli::SweepCommand sw;
  sw.output = "sweep.h5";
  CLI::App* sweep = app.add_subcommand(
      "sweep",
      "Run a scenario at every point of a study (grid, zipped axes, explicit points, seeds) and "
      "write sweep.h5");
  sweep->add_option("study", sw.study, "study file (YAML)")->required();
  sweep->add_option("-o,--output", sw.output, "sweep file (HDF5); an existing one is resumed")
      ->capture_default_str();
  sweep->add_option("--threads", sw.threads, "points run at once (results do not depend on it)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  sweep->add_flag("-q,--quiet", sw.quiet, "print nothing on success");
  std::string sweep_points;
  sweep->add_option("--points", sweep_points,
                    "run only the points FIRST-LAST of the study (the file keeps the others it "
                    "holds)");

  std::string plot_results, plot_dir = "plots";
  CLI::App* plot = app.add_subcommand(
      "plot",
      "Draw a results.h5: link utilisation per tier, flow completion times, and bus bandwidth "
      "over size for nccl-tests runs (PNG files)");
  plot->add_option("results", plot_results, "results file (HDF5) of run or nccl-tests")->required();
  plot->add_option("-o,--output", plot_dir, "directory for the PNG files")->capture_default_str();

  std::string train_path;
  bool train_max_batch = false;
  CLI::App* train = app.add_subcommand(
      "train", "Memory of a scenario's training workloads, per GPU, without simulating");
  train->add_option("scenario", train_path, "scenario file (YAML)")->required();
  train->add_flag("--max-batch", train_max_batch,
                  "also find the largest micro-batch per GPU that fits");
  add_set(train, sets, calibrations);

  CLI::App* schema = app.add_subcommand("schema", "Print the scenario reference (Markdown)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // An unknown command is an extra argument to CLI11 ("A subcommand is required"): name it.
    if (argc > 1 && argv[1][0] != '-' && app.get_subcommands().empty()) {
      std::cerr << fmt::format("error: unknown command '{}' (rocesim --help lists the commands)\n",
                               argv[1]);
      return kExitInput;
    }
    std::cerr << "error: " << e.what() << " (rocesim --help lists the options)\n";
    return kExitInput;
  }

  const auto dispatch = [&]() -> int {
    if (run->parsed())
      return cmd_run(scenario_path, no_output ? "" : out_path, trace_path, seed, threads, quiet,
                     sets, calibrations);
    if (topo->parsed()) return cmd_topo(topo_path);
    if (train->parsed()) return cmd_train(train_path, train_max_batch, sets, calibrations);
    if (nccl_tests->parsed()) {
      nt.args = nccl_tests->remaining();
      if (nt_no_output) nt.output.clear();
      return cli::nccl_tests(nt);
    }
    if (validate->parsed()) {
      val.plot = !no_plot;
      return cli::validate(val);
    }
    if (fit->parsed()) return cli::calibrate_fit(cf);
    if (plot->parsed()) return cli::plot(plot_results, plot_dir);
    if (sweep->parsed()) {
      if (!sweep_points.empty()) {
        unsigned first = 0, last = 0;
        char dash = 0, extra = 0;
        if (std::sscanf(sweep_points.c_str(), "%u%c%u%c", &first, &dash, &last, &extra) != 3 ||
            dash != '-') {
          throw InputError(SourceLocation{}, "--points", "FIRST-LAST, e.g. 0-15",
                           "'" + sweep_points + "'");
        }
        sw.points = std::make_pair(first, last);
      }
      return cli::sweep(sw);
    }
    if (schema->parsed()) {
      std::cout << "# Scenario reference\n\n"
                << "Generated by `rocesim schema` from the parameter tables in the code.\n\n"
                << scenario::scenario_reference_markdown();
      return 0;
    }
    return 0;
  };

  // Outputs are checked before any work: a run of an hour must not end on a bad -o.
  const auto outputs = [&] {
    using metrics::check_output_dir;
    using metrics::check_output_path;
    if (run->parsed() && !no_output) check_output_path(out_path, "-o", true);
    // Two outputs of one command in one file: the second would replace the first.
    const auto apart = [](const std::string& first, const std::string& second,
                          const std::string& option) {
      std::error_code ec;
      const auto where = [&](const std::string& p) {
        return std::filesystem::weakly_canonical(std::filesystem::absolute(p, ec), ec);
      };
      if (first.empty() || second.empty() || where(first) != where(second)) return;
      throw InputError(SourceLocation{std::make_shared<const std::string>("command line"), 0, 0},
                       option, "a file other than -o's", "'" + second + "'");
    };
    if (run->parsed() && !trace_path.empty()) check_output_path(trace_path, "--trace");
    if (run->parsed() && !no_output) apart(out_path, trace_path, "--trace");
    if (nccl_tests->parsed() && nccl_tests->count("-o") > 0 && !nt_no_output)
      check_output_path(nt.output, "-o", true);
    if (nccl_tests->parsed() && !nt.trace.empty()) check_output_path(nt.trace, "--trace");
    if (nccl_tests->parsed() && nccl_tests->count("-o") > 0 && !nt_no_output)
      apart(nt.output, nt.trace, "--trace");
    if (validate->parsed()) check_output_dir(val.output_dir, "-o");
    if (fit->parsed()) {
      check_output_path(cf.output, "-o");
      if (fit->count("--residuals") > 0) {
        check_output_path(cf.residuals, "--residuals");
        apart(cf.output, cf.residuals, "--residuals");
      }
    }
    if (sweep->parsed()) check_output_path(sw.output, "-o", true);
    if (plot->parsed()) check_output_dir(plot_dir, "-o");
  };

  int rc = 0;
  try {
    outputs();
    rc = dispatch();
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    rc = kExitInput;
  } catch (const InternalError& e) {
    std::cerr << e.what() << "\n";
    rc = kExitInternal;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory: the simulation needs more memory than this process may "
                 "use (what a run holds grows with its flows in flight and its connections: "
                 "docs/performance.md gives figures per flow)\n";
    rc = 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    rc = 1;
  }
  // A table lost on a full device is a failure, not a success.
  std::cout.flush();
  if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
    std::cerr << "error: cannot write to standard output: " << std::strerror(errno) << "\n";
    if (rc == 0) rc = 1;
  }
  return rc;
}
