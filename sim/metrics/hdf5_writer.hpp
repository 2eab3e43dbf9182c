// Writes results.h5 (schema: docs/output.md). The file is written under a temporary name in the
// same directory and renamed when complete, so a reader never sees half a file, and an error
// leaves nothing behind. Object timestamps are off, so the same run gives the same bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/metrics/recorder.hpp"
#include "sim/metrics/table.hpp"

namespace rocesim::metrics {

struct ResultsMeta {
  std::string version;
  std::string scenario_name;
  std::string scenario_file;
  std::string effective_scenario;  // YAML text of the scenario with every default filled in
  uint64_t seed = 0;
  std::vector<Table> tables;  // written under /tables/<name>, one dataset per column
  std::string calibration;    // YAML of the calibrated parameters applied; empty for none
};

/// Throws std::runtime_error naming the path if the file cannot be written. `deflate_level`
/// 1-9 compresses the large tables (smaller files, slower writes); 0 stores them plainly.
void write_results_h5(const std::string& path, const Recorder& rec, const ResultsMeta& meta,
                      int deflate_level = 0);

/// sweep.h5 of `rocesim sweep` (docs/studies.md): /meta (the study), /runs/<point> (what
/// `rocesim run` writes, for each point) and /points (one row per point: its axes and metrics, a
/// compound dataset pandas reads in one call). It is written through a temporary file: a
/// resumed sweep copies the existing file first and keeps its runs; finish() renames the
/// temporary file into place, and a SweepFile destroyed without finish() removes it.
class SweepFile {
 public:
  SweepFile(const std::string& path, const std::string& study_name, const std::string& study_text,
            const std::string& version);
  ~SweepFile();
  SweepFile(const SweepFile&) = delete;
  SweepFile& operator=(const SweepFile&) = delete;

  /// The points the file held when opened (a resumed sweep), each with its row (add_run's).
  const std::map<uint32_t, std::string>& resumed() const { return resumed_; }
  /// Writes /runs/<id> and keeps `row` (the point's table row as text) with it.
  void add_run(uint32_t id, const Recorder& rec, const ResultsMeta& meta, const std::string& row,
               int deflate_level);
  /// Copies the runs of `parts` (sweep files of the same study written by the other processes
  /// of an MPI sweep) into this one, in point order; returns their rows.
  std::map<uint32_t, std::string> merge(const std::vector<std::string>& parts);
  /// Writes /points from `points` and puts the file in place.
  void finish(const Table& points);

 private:
  std::string path_, tmp_;
  int64_t file_ = -1;  // hid_t
  std::map<uint32_t, std::string> resumed_;
};

/// A results file with /meta (version, scenario, seed) and `meta.tables` only:
/// for front ends that run many simulations and report tables, such as `rocesim validate`.
void write_tables_h5(const std::string& path, const ResultsMeta& meta);

}  // namespace rocesim::metrics
