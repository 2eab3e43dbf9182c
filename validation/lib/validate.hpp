// Simulated against measured: runs rocesim's nccl-tests emulation at every collective, rank
// count and size of measured nccl-tests tables and reports the errors.
//
// For each measured table: the communicator is the scenario job's first N ranks (N = the table's
// rank count); NCCL settings the table's run environment states (env.NCCL_* of a measured
// dataset) are applied over the scenario's `nccl:` section when rocesim models them, and listed
// as not modelled otherwise; every size of the table is simulated on an otherwise idle fabric,
// one operation per size (the model is deterministic and an idle fabric makes repeated operations
// identical, so nccl-tests' -n iterations would only repeat the same number). The measured time
// is the out-of-place one where the table has it (the in-place one otherwise).
//
// Errors are signed and relative, (simulated - measured) / measured, for the time and the bus
// bandwidth (the measured one recomputed from the measured time with nccl-tests' formula: the
// printed value is rounded to 0.01 GB/s); the summary gives, per size band (under 1 MiB, 1 to 64
// MiB, 64 MiB and over), the median and 90th percentile of their absolute values (percentiles
// interpolate linearly between order statistics).
//
// Beside the simulation, every row is also predicted by the line-rate roofline that anyone
// computes by hand: the size over the bus bandwidth the hardware's nominal line rates allow,
// T = S x busbw_factor / B (roofline_busbw), no latency at all. The summary gives its errors
// too, so that a table shows what the model adds over that arithmetic.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "sim/metrics/table.hpp"
#include "sim/scenario/scenario.hpp"
#include "validation/lib/nccl_tests_log.hpp"

namespace rocesim::validation {

/// Size bands of the summary.
std::string_view size_band(int64_t size_bytes);

struct ComparedRow {
  int64_t size_bytes = 0;
  double measured_time_us = 0, simulated_time_us = 0;
  double measured_busbw = 0, simulated_busbw = 0;  // GB/s
  double time_error = 0;                           // (sim - meas) / meas
  double busbw_error = 0;  // idem; NaN where the measured busbw is 0 (printed as 0.00)
  std::string algorithm, protocol;
  int channels = 0;
  /// NCCL's own estimate of the operation it chose (its tuning model), and whether it and the
  /// simulation disagree by more than kTunerDisagreement: the tuner may then have chosen what
  /// the simulation runs slower than another choice.
  double nccl_model_us = 0;
  bool tuner_disagrees = false;
  /// The line-rate roofline's time and its error, (roofline - meas) / meas; NaN without a
  /// roofline (one rank).
  double roofline_time_us = 0, roofline_error = 0;
  /// Simulated slower than the table's next row, of a larger size, where NCCL's own estimates
  /// of the two do not say so (issue 8's monotonicity: a size may take longer than the next
  /// only as NCCL's model has it).
  bool slower_than_next = false;
  /// The simulated size holds no elements, so NCCL runs nothing (nccl::is_noop) and the
  /// measured time is the host's own call: the row is listed, its errors are NaN and it counts
  /// in no band (nor in a calibration fit).
  bool noop = false;
};
inline constexpr double kTunerDisagreement = 0.2;

struct ComparedTable {
  std::string source;  // measured file
  std::string table;   // table name (dataset) or "table<k>" (log)
  std::string collective;
  int nranks = 0;
  std::vector<std::string> env_applied;       // "NCCL_ALGO=Ring"
  std::vector<std::string> env_not_modelled;  // "NCCL_IB_HCA=mlx5_0:1,..."
  std::vector<ComparedRow> rows;
};

struct BandSummary {
  std::string source, table, band;  // source and table "all" for the whole run
  size_t rows = 0;
  double median_abs_time_error = 0, p90_abs_time_error = 0;
  double median_abs_busbw_error = 0, p90_abs_busbw_error = 0;  // over rows with a busbw
  /// The line-rate roofline's |time error| over the same rows (NaN: no roofline).
  double median_abs_roofline_error = 0, p90_abs_roofline_error = 0;
};

struct ValidationReport {
  std::vector<ComparedTable> tables;
  std::vector<BandSummary> bands;
  std::vector<std::string> warnings;
  /// validate_files: the InputError message ("file:line:col: error: ...") of each measured file
  /// left out of the report.
  std::vector<std::string> errors;
};

/// Measured files under `path`: the file itself, or every *.yaml (a measured dataset, with a
/// `tables:` list) and every other regular file (an nccl-tests log) of a directory, sorted by
/// name. Throws InputError if there is none.
std::vector<std::string> measured_files(const std::string& path);

/// Reads one measured file: a dataset (*.yaml, *.yml) or an nccl-tests log. Throws InputError.
NcclTestsLog read_measured_file(const std::string& file);
/// Reads measured files; throws the InputError of the first bad one.
std::vector<NcclTestsLog> read_measured(const std::vector<std::string>& files);

/// Selects the measured rows to simulate (a table, one of its rows); an empty filter keeps all.
using RowFilter = std::function<bool(const NcclTestsTable&, const NcclTestsRow&)>;

/// Simulates the rows of `logs` that `keep` selects, on the scenario loaded with `overrides`
/// (seed, calibrated parameters; its workloads are always left out). Tables without a selected
/// row are left out of the report; the readers' warnings are reported only without a filter.
/// Throws InputError for a table that cannot be simulated: an unknown benchmark or data type, no
/// rank count, more ranks than the scenario's job.
ValidationReport validate(const std::vector<NcclTestsLog>& logs, const std::string& scenario_path,
                          const scenario::Overrides& overrides, const RowFilter& keep = {});

/// Reads and simulates every row of `files`, one file at a time, as validate() does: a file that
/// cannot be read or simulated (an InputError) is left out whole, its error in the report's
/// `errors`, and the others are still reported, so that one bad file among many costs only
/// itself. Throws InputError if the scenario cannot be loaded.
/// Which tables to compare, by name (a dataset's table name, `table<k>` in a log).
struct TableNames {
  std::vector<std::string> prefixes;  // empty: every table
  bool matches(const std::string& name) const;
};
/// Tables whose names match none of `names` are skipped; if no table of any file matches, that
/// is an InputError naming the prefixes.
/// `progress`, when set, is called after each simulated table with the tables done and the
/// tables to simulate (the files are read first).
using TableProgress = std::function<void(size_t done, size_t total)>;
ValidationReport validate_files(const std::vector<std::string>& files,
                                const std::string& scenario_path,
                                const scenario::Overrides& overrides, const TableNames& names = {},
                                const TableProgress& progress = {});

/// The bus bandwidth (bytes/s) of the line-rate roofline for a communicator of `ranks` (GPU
/// nodes), from the nominal line rates of the fabric's ports: on one server a GPU's scale-up
/// ports (its NVLink to the NVSwitch, its xGMI links to its peers, or its PCIe link where the
/// server has no GPU interconnect), which every bus byte crosses; across servers also what
/// the NICs of a server's ranks carry to the network together (NCCL's rings and trees move
/// busbw bytes per second through each server's NICs), the least of both; a server holding
/// one rank adds no scale-up bound. The smallest over the communicator's GPUs and servers; 0
/// for a single rank (a copy in its own memory: no roofline).
double roofline_busbw(const fabric::Fabric& f, std::span<const fabric::NodeId> ranks);

/// Percentile p in [0, 1] of `values` (linear interpolation; 0 for none).
double percentile(std::vector<double> values, double p);

/// The report as tables: "validation" (one row per size) and "validation_bands".
std::vector<metrics::Table> report_tables(const ValidationReport& r);
/// The report as text: per table, its rows; then the band summary.
std::string format_report(const ValidationReport& r);

}  // namespace rocesim::validation
