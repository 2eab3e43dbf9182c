// Reading the output of nccl-tests and rccl-tests (all_reduce_perf, all_gather_perf, ...): the
// measured side of a simulated-vs-measured comparison. The benchmarks print, on rank 0, a header
// (run parameters, one "#  Rank  N ... device ..." line per GPU, a two-line column header), one
// row per message size, and a footer ("# Out of bounds values", "# Avg bus bandwidth"). A row is
//
//   size  count  type  redop  root | time  algbw  busbw  #wrong | time  algbw  busbw  #wrong
//                                  |      out-of-place          |        in-place
//
// in nccl-tests since about v2.10; older releases (and old rccl-tests) print no `root` column
// (broadcast/reduce print `root` instead of `redop`, all_gather neither) and a max relative error
// (`error`, "5e-07") where new ones count wrong elements (`#wrong`, "0", "N/A" without -c).
// Times are microseconds per iteration; algbw = size / time in GB/s (1 GB = 1e9 B); busbw =
// algbw x a collective factor (AllReduce 2(n-1)/n; AllGather, ReduceScatter, AlltoAll (n-1)/n).
//
// Real logs are messy: MPI launchers prefix every line ("[1,0]<stdout>:", " 0:"), NCCL INFO/WARN
// lines and job-scheduler chatter sit between the rows, several runs are concatenated, a killed job
// leaves the last row cut short. The reader keeps every line that is a result row, attributes the
// header lines around it to its table, and ignores the rest. A line that starts like a row (an
// integer size then an integer count) but is malformed, or holds a value nccl-tests cannot print
// (a size of 0, a time that is not positive, a NaN), is an InputError naming file:line:column,
// what was expected and what was found, except a cut-off last row, which is a warning. So is a
// text without a single complete row (an empty file, a header alone, something else than a log).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/error.hpp"

namespace rocesim::validation {

/// One printed row: one message size, timed out of place and in place.
struct NcclTestsRow {
  int64_t size_bytes = 0;  ///< `size` column, bytes (AllGather, AlltoAll: the total over ranks)
  int64_t count = 0;       ///< `count` column, elements
  std::string type;        ///< data type as printed: "float", "half", "bfloat16", ...
  std::string redop;       ///< "sum", "none" (no reduction); empty when the layout has no redop
  int64_t root = -1;       ///< root rank; -1 when the layout has no root column (old layout)
  double time_us_out = 0;  ///< out-of-place time per iteration, us
  double algbw_out = 0;    ///< out-of-place algorithm bandwidth, GB/s
  double busbw_out = 0;    ///< out-of-place bus bandwidth, GB/s
  std::string wrong_out;   ///< error column as printed: "0", "N/A", "4e-07" (old layout)
  double time_us_in = 0;   ///< in-place time per iteration, us
  double algbw_in = 0;     ///< in-place algorithm bandwidth, GB/s
  double busbw_in = 0;     ///< in-place bus bandwidth, GB/s
  std::string wrong_in;    ///< in-place error column as printed
  /// Some outputs print only one half; the fields of the missing half stay 0 / empty.
  bool has_out_of_place = true;
  bool has_in_place = true;
  SourceLocation where;  ///< file, 1-based line of the row, column 1 of that line's text
};

/// The "# nThread 1 nGpus 1 minBytes 8 maxBytes ... step: 2(factor) warmup iters: 5 iters: 20"
/// line, when the log has one. Values the line does not carry stay empty.
struct NcclTestsRunParameters {
  std::optional<int> threads;          ///< nThread: threads per process (-t)
  std::optional<int> gpus_per_thread;  ///< nGpus: GPUs per thread (-g)
  std::optional<int64_t> min_bytes;    ///< minBytes (-b)
  std::optional<int64_t> max_bytes;    ///< maxBytes (-e), or "Reducing maxBytes to ..." when shown
  std::optional<double> step_factor;   ///< "step: 2(factor)" (-f)
  std::optional<int64_t> step_bytes;   ///< "step: 1048576(bytes)" (-i)
  std::optional<int> warmup_iters;     ///< "warmup iters: 5" (-w)
  std::optional<int> iters;            ///< "iters: 20" (-n)
  std::optional<int> agg_iters;        ///< "agg iters: 1" (-m)
};

/// One sweep over message sizes: the rows of one run, or of one data type / reduction when a run
/// sweeps several (-d all, -o all), which restarts the size column.
struct NcclTestsTable {
  /// Benchmark name: canonical ("all_reduce_perf") when the log names a known binary or, naming
  /// none, the collective can be inferred from the rows; as printed when it names an unknown one
  /// (then `collective` is empty); empty otherwise.
  std::string test;
  /// allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv, gather, scatter,
  /// hypercube; empty when unknown.
  std::string collective;
  /// Ranks: the "#  Rank  N ..." device lines, else an "nranks N" mention (NCCL INFO); 0 unknown.
  int nranks = 0;
  /// Distinct host names of the device lines, else an "nNodes N" mention; 0 when unknown.
  int nodes = 0;
  std::string nccl_version;          ///< "2.18.3+cuda12.2" from "NCCL version ..."; empty unknown
  std::vector<std::string> devices;  ///< device name per rank, in rank order, from the rank lines
  NcclTestsRunParameters params;
  /// The error column holds the max relative error ("error", nccl-tests before ~2.10) rather than
  /// a count of wrong elements ("#wrong"). Without a column header it is inferred from the rows:
  /// a row without a root column is old.
  bool old_layout = false;
  std::optional<double> avg_busbw;       ///< "# Avg bus bandwidth    : 7.80081", GB/s
  std::optional<int64_t> out_of_bounds;  ///< "# Out of bounds values : 0 OK"
  std::vector<NcclTestsRow> rows;
  bool truncated = false;  ///< the log ends in a cut-off row (dropped; see the warnings)
  /// Extra facts: from a measured dataset (gpu, fabric, env.NAME, ...), or "nccl_tests_version".
  std::map<std::string, std::string> metadata;
  /// Where each metadata value was written (a measured dataset's key), for errors about it.
  std::map<std::string, SourceLocation> metadata_where;
  SourceLocation where;  ///< the table's first header line, or its first row when headerless
  /// Where metadata `key` was written, else the table.
  const SourceLocation& where_of(const std::string& key) const {
    const auto it = metadata_where.find(key);
    return it != metadata_where.end() ? it->second : where;
  }
};

struct NcclTestsLog {
  std::string source;  ///< file name, or the name given for text
  std::vector<NcclTestsTable> tables;
  /// "file:line:col: warning: ..." for what was kept but is doubtful (a cut-off last row, a footer
  /// without a table, a collective inferred from busbw/algbw, a dataset environment in prose).
  std::vector<std::string> warnings;
};

/// Parses nccl-tests / rccl-tests output. `source_name` names the text in locations and messages.
/// Throws InputError for a malformed row, an impossible value, or no complete row at all.
NcclTestsLog read_nccl_tests_log(std::string_view text, const std::string& source_name);

/// Reads and parses a log file. Throws InputError (located at the file) if it cannot be read.
NcclTestsLog read_nccl_tests_file(const std::string& path);

/// Reads a measured dataset (validation/data/measured/*.yaml): one table per entry of `tables`,
/// whose rows are parsed from `raw_table_verbatim` (the printed lines; locations point into the
/// YAML file) and whose metadata comes from the entry, else from the top level of the file:
/// collective, binary -> test, total_ranks (else nodes x gpus_per_node when the printed lines
/// list no ranks) -> nranks, nodes, nccl_version, iters -> params, and in `metadata`: name,
/// binary, collective, total_ranks, nodes, gpus_per_node, nccl_version, gpu, nic_speed_gbps,
/// nics_per_node, fabric, in_network_reduction, datatype, redop, command and env.NAME per
/// environment variable: the top-level `common_env` mapping, then the table's `env` (else the
/// file's) over it key by key (null values are left out, and remove a common one). An `env` that
/// is text rather than a mapping is ignored with a warning. Throws InputError.
NcclTestsLog read_measured_dataset(const std::string& path);

/// The canonical collective name for a benchmark or collective name in any common spelling
/// ("all_reduce_perf", "./build/all_reduce_perf_mpi", "AllReduce", "all-reduce", "allreduce" ->
/// "allreduce"); empty when it names none of the collectives nccl-tests measures.
std::string normalise_collective(std::string_view name);

/// The nccl-tests benchmark for a canonical collective name ("allreduce" -> "all_reduce_perf");
/// empty for an unknown name.
std::string nccl_tests_binary(std::string_view collective);

}  // namespace rocesim::validation
