// The subcommands of the rocesim command line, one function each (main.cpp parses the arguments).
// Exit codes: 0 success, 2 bad input (scenario, arguments, measured files), 3 internal error, 1
// anything else (e.g. an output file that cannot be written).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/engine/simulation.hpp"
#include "sim/scenario/calibration.hpp"

namespace rocesim::cli {

inline constexpr int kExitInput = 2;
inline constexpr int kExitInternal = 3;

struct NcclTestsCommand {
  std::string scenario;
  std::string output;  // results.h5; empty: none
  std::string trace;   // timeline trace; empty: none
  std::optional<uint64_t> seed;
  std::optional<int> ranks;              // the job's first N ranks
  std::vector<std::string> env;          // NCCL settings KEY=VALUE over the scenario's `nccl:`
  std::vector<std::string> args;         // the test name and nccl-tests' flags
  std::vector<std::string> set;          // parameter values KEY=VALUE (after calibration files)
  std::vector<std::string> calibration;  // calibration files (after the scenario's own)
};
int nccl_tests(const NcclTestsCommand& c);

struct ValidateCommand {
  std::string measured;  // a log, a dataset, or a directory of them
  std::string scenario;
  std::string output_dir;
  std::optional<uint64_t> seed;
  std::vector<std::string> set;          // parameter values KEY=VALUE (after calibration files)
  std::vector<std::string> calibration;  // calibration files (after the scenario's own)
  std::vector<std::string> tables;       // prefixes of the table names to compare (empty: all)
  bool plot = true;
};

struct CalibrateFitCommand {
  std::vector<std::string> measured;  // logs, datasets, directories
  std::string scenario;
  std::string output;                    // calibration.yaml
  std::string residuals;                 // CSV per measured row; empty: none
  std::vector<std::string> params;       // PATH or PATH=LO..HI; empty: the defaults
  std::string train, test;               // selections
  std::vector<std::string> set;          // fixed values KEY=VALUE
  std::vector<std::string> calibration;  // fixed values from calibration files
  std::string nicprobe;                  // rocesim-nicprobe output: the NIC's speed, efficiency and
                                         // PCIe latency
  bool no_priors = false;                // the data alone, without the parameters' priors
  int max_iterations = 40;
  std::string loss = "soft_l1";
  double loss_scale = 0.1;
  int threads = 1;
  std::optional<uint64_t> seed;
};
int calibrate_fit(const CalibrateFitCommand& c);

/// The parameter overrides of `--calibration FILE` options, then of `--set KEY=VALUE` options.
/// Throws InputError.
std::vector<scenario::ParamOverride> parse_sets(const std::vector<std::string>& sets,
                                                const std::vector<std::string>& files = {});
int validate(const ValidateCommand& c);

/// A progress line on stderr while a simulation runs longer than 2 s, only when stderr is a
/// terminal (and not `quiet`); done() ends the line.
class Progress {
 public:
  Progress(engine::Simulation& sim, bool quiet);
  void done();

 private:
  bool shown_ = false;
};

/// A progress line on stderr for a command that works through steps (tables, iterations,
/// points): shown once it has run 2 s, only when stderr is a terminal (and not `quiet`), with
/// the steps done and, when `total` is known, an estimate of the time left. done() ends it.
class StepProgress {
 public:
  StepProgress(std::string what, bool quiet);
  ~StepProgress() { done(); }
  StepProgress(const StepProgress&) = delete;
  StepProgress& operator=(const StepProgress&) = delete;
  /// `done` of `total` (0: unknown) `unit` ("tables", "iterations"), then `detail`.
  void update(size_t done, size_t total, const char* unit, const std::string& detail = "");
  void done();

 private:
  std::string what_;
  bool enabled_ = false, shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

/// Runs a program (argv[0] an absolute path) and waits: its exit status, -1 if it could not
/// be started or did not exit.
int run_program(const std::vector<std::string>& argv);
/// `rocesim plot`: scripts/plot_results.py on a results.h5, PNGs into `out_dir`.
int plot(const std::string& results, const std::string& out_dir);

struct SweepCommand {
  std::string study;
  std::string output;  // sweep.h5
  int threads = 1;
  bool quiet = false;
  /// Run only the points first..last of the study (e.g. to share them among machines); the
  /// file holds those and the ones it held before.
  std::optional<std::pair<uint32_t, uint32_t>> points;
};
/// Exit 0, or 128 + the signal when interrupted (the file then holds every finished point).
int sweep(const SweepCommand& c);

}  // namespace rocesim::cli
