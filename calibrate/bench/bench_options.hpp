// rocesim-bench's command line (calibrate/bench/README.md). GPU-free, so that it is built and
// tested on machines without CUDA, NCCL or MPI; the driver (rocesim_bench.cpp) uses it.
//
// The flags follow nccl-tests where they overlap: -b -e -f -i -n -w -d -r -T, and -o, which names
// the reduction (sum, prod, min, max, avg) as in nccl-tests or, when it ends in .yaml or .yml, the
// machine-readable output file (it may be given twice: -o avg -o out.yaml; --op and --output are
// the unambiguous spellings).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "calibrate/lib/bench_report.hpp"

namespace rocesim::calibrate {

/// Exit codes of rocesim-bench.
inline constexpr int kBenchExitOk = 0;
inline constexpr int kBenchExitFailure = 1;  ///< a CUDA/NCCL/MPI error during the run, output
inline constexpr int kBenchExitUsage = 2;    ///< bad command line
inline constexpr int kBenchExitNoGpu = 3;    ///< no CUDA device, or NCCL/MPI failed to start

struct BenchOptions {
  std::vector<BenchCollective> collectives{BenchCollective::AllReduce};
  BenchSweep sweep;
  int iters = 20;
  int warmup = 5;
  /// -T: seconds an operation may take before the run fails (nccl-tests' -T); 0: no limit.
  int timeout_s = 0;
  std::string datatype = "float";
  int type_size = 4;
  std::string redop = "sum";
  int root = 0;
  bool single_process = false;
  int gpus = 0;         ///< --gpus: GPUs of the single process; 0: every visible one
  std::string output;   ///< the dataset file; empty: none
  std::string name;     ///< table-name prefix; empty: "<n>nodes_<r>ranks"
  std::string command;  ///< the command line, shell-quoted
};

struct ParsedBenchArgs {
  std::optional<BenchOptions> options;  ///< set when the benchmark should run
  int exit_code = kBenchExitOk;         ///< otherwise: 0 after --help/--version, 2 on an error
  std::string out;                      ///< text for stdout (help, version)
  std::string err;                      ///< text for stderr (the error)
};

/// Parses the command line (argv[0] is the program). Never exits or prints.
ParsedBenchArgs parse_bench_args(int argc, const char* const* argv);

/// nccl-tests' size syntax: a whole number of bytes, optionally followed by K, M or G (powers of
/// 1024, either case). Nothing when malformed.
std::optional<int64_t> parse_bench_size(const std::string& text);

/// A command line as a shell would need it typed: arguments joined by spaces, quoted when needed.
std::string shell_join(int argc, const char* const* argv);

}  // namespace rocesim::calibrate
