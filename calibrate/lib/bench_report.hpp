// The GPU-free half of rocesim-bench (calibrate/bench): what the benchmark measures and how it
// reports it, kept apart from CUDA, NCCL and MPI so that it is built and tested everywhere.
//
//  * Collectives and sizes follow nccl-tests: the size sweep of -b/-e/-f/-i, the `size` and
//    `count` columns (sim/collectives/nccl/nccl_tests.hpp, nccl_tests_size()), the buffers each
//    operation reads and writes, and busbw = algbw x factor (AllReduce 2(n-1)/n; AllGather,
//    ReduceScatter, AlltoAll (n-1)/n; Broadcast and Send/Recv 1, also on one rank).
//  * Times: every iteration is timed on its own (a CUDA event pair around it); per iteration the
//    benchmark keeps the maximum over ranks (the slowest rank ends the collective), and per size
//    reports over the iterations the mean, minimum, median, 99th percentile and maximum.
//    Percentiles interpolate linearly between order statistics, as `rocesim validate` does
//    (validation::percentile): p of n sorted samples x_0..x_{n-1} is x_k + f (x_{k+1} - x_k) with
//    k + f = p (n - 1) (numpy's default): the median of an even count is the mean of the middle
//    two, p99 of 100 samples is x_98 + 0.01 (x_99 - x_98).
//  * The printed table is nccl-tests' (header, "#  Rank" lines, column header, one row per size
//    with the out-of-place and in-place halves, footer); its time column is the mean, and algbw =
//    size / mean time (GB/s, 1 GB = 1e9 B). #wrong is N/A: the benchmark does not check data.
//  * The machine-readable file is a measured dataset (validation/data/measured/README.md) that
//    validation::read_measured_dataset() reads as it reads the transcribed ones: `source:
//    rocesim-bench`, `format: rocesim-bench/1`, one entry of `tables` per collective with the run's
//    facts, `raw_table_verbatim` (the table exactly as printed) and `stats` (per size, the full
//    statistics, for the fitter). calibrate/bench/README.md lists every key.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/collectives/nccl/nccl.hpp"

namespace rocesim::calibrate {

// ---------------------------------------------------------------------------------------------
// Collectives

enum class BenchCollective : uint8_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  AlltoAll,
  SendRecv,
  Broadcast
};

inline constexpr std::array<BenchCollective, 6> kBenchCollectives{
    BenchCollective::AllReduce, BenchCollective::AllGather, BenchCollective::ReduceScatter,
    BenchCollective::AlltoAll,  BenchCollective::SendRecv,  BenchCollective::Broadcast};

/// The collective a name means, in any spelling validation::normalise_collective() accepts
/// ("all_reduce", "allreduce", "AllReduce", "all_reduce_perf"); nothing for others.
std::optional<BenchCollective> parse_bench_collective(std::string_view name);
/// The --collective spelling: all_reduce, all_gather, reduce_scatter, alltoall, sendrecv,
/// broadcast.
std::string_view bench_option_name(BenchCollective c);
/// The canonical name of the validation tools: allreduce, allgather, ... (normalise_collective).
std::string_view bench_canonical_name(BenchCollective c);
/// The nccl-tests binary: all_reduce_perf, ...
std::string_view bench_binary(BenchCollective c);
/// The simulator's collective, for the shared nccl-tests conventions.
collectives::nccl::Collective sim_collective(BenchCollective c);
/// Whether the operation reduces (prints its redop; the others print "none").
bool bench_reduces(BenchCollective c);
/// Whether the operation has a root (Broadcast; the others print root -1).
bool bench_has_root(BenchCollective c);
/// nccl-tests' bus-bandwidth factor on n ranks (see the top of the file).
double bench_busbw_factor(BenchCollective c, int nranks);

// ---------------------------------------------------------------------------------------------
// Sizes

/// The size sweep, nccl-tests' -b -e -f -i (defaults as nccl-tests: 32 MiB only).
struct BenchSweep {
  int64_t min_bytes = int64_t{32} << 20;
  int64_t max_bytes = int64_t{32} << 20;
  int64_t step_bytes = int64_t{1} << 20;
  int64_t step_factor = 1;  ///< > 1: multiply by it; otherwise add step_bytes
};

/// The requested sizes in order: min, then times the factor (or plus the step) while <= max.
std::vector<int64_t> bench_sweep(const BenchSweep& s);

/// One size as nccl-tests counts it and the buffers the operation uses.
struct BenchSize {
  int64_t requested_bytes = 0;
  int64_t size_bytes = 0;  ///< the `size` column (AllGather, ReduceScatter, AlltoAll: all ranks)
  int64_t count = 0;  ///< the `count` column: the element count passed to NCCL (per peer: AlltoAll)
  int64_t send_bytes = 0;  ///< bytes each rank sends from its send buffer
  int64_t recv_bytes = 0;  ///< bytes each rank receives into its receive buffer
};
BenchSize bench_size(BenchCollective c, int64_t requested_bytes, int nranks, int type_size);

// ---------------------------------------------------------------------------------------------
// Statistics of per-iteration times

struct TimeStats {
  size_t samples = 0;
  double mean_us = 0, min_us = 0, median_us = 0, p99_us = 0, max_us = 0;
};

/// Statistics of per-iteration times in microseconds (see the top of the file for the percentile
/// definition). Throws std::invalid_argument for no samples or a negative or non-finite one.
TimeStats time_stats(std::vector<double> samples_us);

/// algbw in GB/s of `size_bytes` in `time_us` (0 for a zero time).
double algbw_GBps(int64_t size_bytes, double time_us);

// ---------------------------------------------------------------------------------------------
// Facts about the machines

struct NicPort {
  int port = 0;
  std::string state;       ///< "ACTIVE", "DOWN", ... (the text after "4: ")
  std::string link_layer;  ///< "InfiniBand", "Ethernet"
  double rate_gbps = 0;    ///< from "400 Gb/sec (4X NDR)"; 0 when unknown
};
struct NicDevice {
  std::string name;  ///< "mlx5_0"
  std::vector<NicPort> ports;
  bool active() const;  ///< at least one port ACTIVE
};
/// The RDMA devices under `sysfs_root` (default /sys/class/infiniband: every entry, sorted by
/// name, with ports/N/{state,link_layer,rate}); empty when the directory does not exist.
std::vector<NicDevice> list_rdma_devices(const std::string& sysfs_root = "/sys/class/infiniband");

/// What one rank reports about itself.
struct RankRecord {
  int rank = 0;
  std::string host;
  int64_t pid = 0;
  int device = 0;               ///< CUDA device index in the process
  std::string bus_id;           ///< PCI bus id, "0000:1B:00.0"
  std::string gpu;              ///< device name, "NVIDIA H100 80GB HBM3"
  std::vector<NicDevice> nics;  ///< the RDMA devices of its host
};
/// One line of text for MPI_Gatherv, and back. decode throws std::invalid_argument when
/// malformed.
std::string encode_rank_record(const RankRecord& r);
RankRecord decode_rank_record(std::string_view text);

/// Every NCCL_* variable of an environment block (environ), sorted by name.
std::vector<std::pair<std::string, std::string>> nccl_environment(const char* const* envp);

/// An NCCL version code (ncclGetVersion: 22809, or 2804 before 2.9) as "2.28.9".
std::string nccl_version_string(int code);

// ---------------------------------------------------------------------------------------------
// A run and its tables

struct BenchRun {
  std::string name;             ///< table-name prefix (--name); empty: "<n>nodes_<r>ranks"
  std::string mode = "mpi";     ///< "mpi" or "single-process"
  std::string rocesim_version;  ///< the benchmark's version
  std::string nccl_version;     ///< "2.28.9+cuda13.0"
  std::string cuda_runtime;     ///< "13.0"
  std::string cuda_driver;      ///< "13.0" (the driver's CUDA version)
  std::string mpi_library;      ///< first line of MPI_Get_library_version; empty: no MPI
  std::string command;          ///< the command line of rank 0
  std::vector<std::pair<std::string, std::string>> env;  ///< NCCL_* of rank 0
  std::vector<RankRecord> ranks;                         ///< in rank order
  int gpus_per_process = 1;                              ///< nccl-tests' nGpus
  BenchSweep sweep;  ///< as run (maxBytes possibly reduced to fit in memory)
  std::optional<int64_t> requested_max_bytes;  ///< set when maxBytes was reduced from this
  int iters = 20;
  int warmup = 5;
  std::string datatype = "float";
  int type_size = 4;
  std::string redop = "sum";
  int root = 0;

  int nranks() const { return static_cast<int>(ranks.size()); }
};

/// What a run's ranks have in common, as the dataset states it.
struct RunSummary {
  std::vector<std::string> hosts;  ///< distinct, in order of first rank
  int nodes = 0;
  std::optional<int> gpus_per_node;      ///< ranks per host when every host has as many
  std::string gpu;                       ///< the GPU model; "mixed: A, B" when ranks differ
  std::optional<int> nics_per_node;      ///< RDMA devices with an ACTIVE port, when equal on hosts
  std::optional<double> nic_speed_gbps;  ///< rate of every ACTIVE port, when all are equal
  std::optional<std::string> fabric;     ///< "InfiniBand" / "RoCE" when every ACTIVE port agrees
};
RunSummary summarize(const BenchRun& run);

/// One printed row: [0] out of place, [1] in place.
struct BenchRow {
  BenchSize size;
  int root = -1;  ///< -1 where the collective has none
  TimeStats time[2];
  double algbw_GBps[2] = {};  ///< from the mean time
  double busbw_GBps[2] = {};
};
BenchRow make_bench_row(BenchCollective c, const BenchSize& size, int root, int nranks,
                        const TimeStats& out_of_place, const TimeStats& in_place);

struct BenchTable {
  BenchCollective collective = BenchCollective::AllReduce;
  std::vector<BenchRow> rows;
  std::string text;  ///< the table exactly as printed (header, rows, footer)
};

/// The table as nccl-tests prints it, in the pieces the benchmark prints as it goes:
/// header (through the column header), one line per row, footer. Their concatenation is
/// format_bench_table().
std::string format_table_header(const BenchRun& run, BenchCollective c);
std::string format_table_row(const BenchRun& run, BenchCollective c, const BenchRow& row);
std::string format_table_footer(BenchCollective c, const std::vector<BenchRow>& rows);
std::string format_bench_table(const BenchRun& run, BenchCollective c,
                               const std::vector<BenchRow>& rows);
/// nccl-tests' average bus bandwidth: the mean busbw over every row, out of place and in place.
double average_busbw(const std::vector<BenchRow>& rows);

/// The name of a collective's table: "<prefix>_<canonical>", e.g. "2nodes_16ranks_allreduce".
std::string bench_table_name(const BenchRun& run, BenchCollective c);

/// The measured dataset (YAML text) of a run.
std::string bench_dataset_yaml(const BenchRun& run, const std::vector<BenchTable>& tables);

/// Why `path` cannot take the output (a missing directory, no permission, a directory, not
/// ending in .yaml/.yml); nothing when it can. Probes by creating and removing a temporary file.
/// The output itself is written with metrics::write_text_file (a temporary name, then a rename).
std::optional<std::string> output_problem(const std::string& path);

// ---------------------------------------------------------------------------------------------
// Reading the statistics back

struct BenchStatsRow {
  int64_t size_bytes = 0;
  int64_t count = 0;
  double time_us_mean = 0, time_us_min = 0, time_us_median = 0, time_us_p99 = 0;
  double time_us_max = 0;  ///< 0 when absent
  double busbw_mean = 0;
  int64_t samples = 0;  ///< 0 when absent
  /// The in-place half {time_us_mean, ..., busbw_mean}, when the file has it.
  std::optional<TimeStats> in_place;
  std::optional<double> in_place_busbw_mean;
};
struct BenchStatsTable {
  std::string name;
  std::string collective;  ///< canonical
  int total_ranks = 0;
  int nodes = 0;
  std::vector<BenchStatsRow> stats;
};
/// The `stats` of every table of a rocesim-bench dataset (the rows and metadata come from
/// validation::read_measured_dataset). Throws InputError (file:line:col) for a file that is not
/// one (`format` other than rocesim-bench/1) or a malformed entry.
std::vector<BenchStatsTable> read_bench_dataset(const std::string& path);

}  // namespace rocesim::calibrate
