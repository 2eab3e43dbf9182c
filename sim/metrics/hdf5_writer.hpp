// Writes results.h5 (schema: docs/output.md). The file is written under a temporary name in the
// same directory and renamed when complete, so a reader never sees half a file, and an error
// leaves nothing behind. Object timestamps are off, so the same run gives the same bytes.
#pragma once

#include <string>

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

/// A results file with /meta (version, scenario, seed) and `meta.tables` only:
/// for front ends that run many simulations and report tables, such as `rocesim validate`.
void write_tables_h5(const std::string& path, const ResultsMeta& meta);

}  // namespace rocesim::metrics
