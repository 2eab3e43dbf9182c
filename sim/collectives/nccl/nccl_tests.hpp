// nccl-tests (github.com/NVIDIA/nccl-tests) on the simulated fabric: the benchmark's command
// line, its size sweep, its buffer-size conventions and its table, so that a simulated run can be
// put next to a measured one line by line.
//
// What nccl-tests does, and rocesim with it: for each size from -b to -e (times -f, or plus -i),
// run -n operations back to back out of place, then -n in place, and print per size the average
// time of one operation, algbw = size / time and busbw = algbw x the collective's factor
// (busbw_factor()). Before the sweep, -w warm-up operations of the largest size run untimed. The
// communicator is the scenario's job (`job.ranks`); nccl-tests' process and thread layout flags
// (-g, -t, -p) and its run-time switches (-c, -z, -a, -m, -G, -C) are accepted for compatibility
// and do not change the simulation (the simulator moves no data, so #wrong is N/A).
//
// Sizes follow nccl-tests' getCollByteCount(): for AllGather, ReduceScatter, AlltoAll, Gather and
// Scatter the per-rank count is count / nranks (the size column is that times nranks times the
// type size, rounded down; the count column is the per-rank count); the others use the whole
// count.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/collectives/nccl/collective.hpp"

namespace rocesim::collectives::nccl {

struct NcclTestsOptions {
  std::string test;  // e.g. "all_reduce_perf"
  Collective collective = Collective::AllReduce;
  int64_t min_bytes = 32 << 20;  // nccl-tests' defaults
  int64_t max_bytes = 32 << 20;
  int64_t step_bytes = 1 << 20;
  int64_t step_factor = 1;  // > 1: multiply; otherwise add step_bytes
  int iters = 20;
  int warmup = 5;
  int root = 0;
  std::string datatype = "float";    // or "all": every type, one after the other
  int type_size = 4;                 // of `datatype` (unused for "all")
  std::string op = "sum";            // or "all": every reduction
  std::vector<std::string> ignored;  // flags accepted for compatibility, with no effect
  /// Explicit sizes (requested bytes) instead of the -b/-e/-f/-i sweep, e.g. a measured table's.
  std::vector<int64_t> sizes;
};

/// Size in bytes of an nccl-tests data type (-d), e.g. 4 for "float".
std::optional<int> nccl_tests_type_size(std::string_view datatype);
/// The nccl-tests binaries rocesim emulates, and their collectives.
std::optional<Collective> nccl_tests_collective(std::string_view test);
/// Parses an nccl-tests command line: the test name, then its flags (-b 8 -e 8G -f 2 ...).
/// Throws InputError naming the flag and what it expects.
NcclTestsOptions parse_nccl_tests_args(const std::vector<std::string>& args);

/// One size of the sweep as nccl-tests counts it.
struct NcclTestsSize {
  int64_t size_bytes = 0;  // the `size` column
  int64_t count = 0;       // the `count` column (elements per rank where the size is divided)
  int64_t op_bytes = 0;    // the size given to the simulated operation (OpRunner::start)
};
NcclTestsSize nccl_tests_size(Collective c, int64_t requested_bytes, int nranks, int type_size);
/// The requested sizes of the sweep, in order.
std::vector<int64_t> nccl_tests_sweep(const NcclTestsOptions& o);

/// One row to measure: a size of one data type and reduction.
struct NcclTestsCase {
  int64_t requested = 0;
  std::string datatype;
  int type_size = 4;
  std::string op;  // "none" for collectives that do not reduce
};
/// The rows of a run in nccl-tests' order: for each data type (all of them for `-d all`), for
/// each reduction (all for `-o all`), every size of the sweep.
std::vector<NcclTestsCase> nccl_tests_cases(const NcclTestsOptions& o);

struct NcclTestsRow {
  NcclTestsSize size;
  std::string datatype, op;   // the `type` and `redop` columns
  int root = -1;              // -1 where the collective has none
  double time_us[2] = {};     // out of place, in place: mean time of one operation
  double algbw_GBps[2] = {};  // size / time
  double busbw_GBps[2] = {};  // algbw x busbw_factor
  Algorithm algorithm = Algorithm::Ring;
  Protocol protocol = Protocol::Simple;
  int channels = 0;
  double nccl_model_us = 0;  // NCCL's own estimate, for comparison
};

/// Runs the sweep as one workload; rows() holds the results once it has finished.
class NcclTestsWorkload final : public engine::Workload {
 public:
  NcclTestsWorkload(std::string name, OpRunner runner, NcclTestsOptions options);

  std::string_view type() const override { return "nccl-tests"; }
  void start(engine::Simulation& sim, engine::WorkloadId id) override;
  void on_transfer_done(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) override;
  void on_timer(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) override;
  void figures(engine::WorkloadFigures& out, Time duration) const override;
  /// One span per timed phase (a size, out of place or in place: `iters` operations).
  void trace(std::vector<engine::TraceSpan>& out) const override {
    out.insert(out.end(), spans_.begin(), spans_.end());
  }

  const std::vector<NcclTestsRow>& rows() const { return rows_; }
  const NcclTestsOptions& options() const { return options_; }
  const Communicator& communicator() const { return runner_.communicator(); }
  const OpRunner& runner() const { return runner_; }

 private:
  void next(engine::Simulation& sim, engine::WorkloadId id);
  void advance(engine::Simulation& sim, engine::WorkloadId id);

  OpRunner runner_;
  NcclTestsOptions options_;
  std::vector<NcclTestsCase> cases_;
  std::vector<NcclTestsRow> rows_;
  // Position in the sweep: warm-up operations, then per size `iters` out of place and `iters`
  // in place.
  int warmups_left_ = 0;
  size_t size_index_ = 0;
  int place_ = 0;  // 0 out of place, 1 in place
  int op_ = 0;
  Time phase_start_{};
  std::vector<engine::TraceSpan> spans_;
};

/// nccl-tests' parsesize(): an integer, optionally followed by K, M or G (powers of 1024);
/// nothing for anything else.
std::optional<int64_t> parse_nccl_tests_size(std::string_view text);
/// The three-line column header of an nccl-tests table, exactly as nccl-tests prints it.
std::string_view nccl_tests_column_header();

/// What NCCL_DEBUG=INFO adds to nccl-tests' output, as NCCL logs it (each line "host:pid:tid
/// [dev] NCCL INFO ..."): the communicator's channels at its init (subsystem INIT), after the
/// device list, and each size's choice before its row (subsystem TUNING).
struct NcclDebugLog {
  std::string prefix;             // e.g. "node0:0:0 [0] NCCL INFO "
  std::vector<std::string> init;  // without the prefix
  bool tuning = false;
};

/// The table nccl-tests prints, from the header to the "# Avg bus bandwidth" line. `gpu_names`
/// are the ranks' GPUs in rank order; `log`, NCCL's INFO lines among them.
std::string format_nccl_tests(const NcclTestsOptions& o, const std::vector<NcclTestsRow>& rows,
                              const std::vector<std::string>& gpu_names, const std::string& banner,
                              const NcclDebugLog* log = nullptr);

/// nccl-tests' average bus bandwidth: the mean busbw over every row, out of place and in place.
double average_busbw(const std::vector<NcclTestsRow>& rows);

}  // namespace rocesim::collectives::nccl
