// rocesim validate: simulated against measured nccl-tests tables.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"
#include "sim/metrics/hdf5_writer.hpp"
#include "sim/metrics/output_files.hpp"
#include "sim/metrics/table.hpp"
#include "validation/lib/validate.hpp"

#ifndef ROCESIM_VERSION
#define ROCESIM_VERSION "0.0.0"
#endif
#ifndef ROCESIM_PYTHON
#define ROCESIM_PYTHON "/usr/bin/python3"
#endif
#ifndef ROCESIM_PLOT_SCRIPT
#define ROCESIM_PLOT_SCRIPT "validation/plot_validation.py"
#endif

namespace rocesim::cli {

int validate(const ValidateCommand& c) {
  namespace fs = std::filesystem;
  const std::vector<std::string> files = validation::measured_files(c.measured);
  scenario::Overrides overrides;
  overrides.seed = c.seed;
  overrides.skip_workloads = true;
  overrides.parameters = parse_sets(c.set, c.calibration);
  overrides.flow_records = false;  // validation reads operation times only
  // The scenario as simulated (calibrated parameters applied), for results.h5.
  const std::unique_ptr<scenario::ScenarioRun> run = scenario::load_scenario(c.scenario, overrides);
  // A bad file is left out and reported at the end: the others are still worth their results.
  validation::TableNames names;
  names.prefixes = c.tables;
  StepProgress progress("validate", false);
  const validation::ValidationReport report = validation::validate_files(
      files, c.scenario, overrides, names,
      [&](size_t done, size_t total) { progress.update(done, total, "tables"); });
  progress.done();
  for (const std::string& w : report.warnings)
    std::cerr << w << "\n";
  const auto input_errors = [&] {
    for (const std::string& e : report.errors)
      std::cerr << e << "\n";
    std::cerr << fmt::format("error: {} of {} measured file{} left out{}\n", report.errors.size(),
                             files.size(), files.size() == 1 ? "" : "s",
                             report.tables.empty() ? "; nothing written" : "");
    return kExitInput;
  };
  if (report.tables.empty()) return input_errors();
  std::cout << validation::format_report(report);

  std::error_code ec;
  fs::create_directories(c.output_dir, ec);
  if (ec) {
    throw std::runtime_error(
        fmt::format("cannot create the output directory '{}': {}", c.output_dir, ec.message()));
  }
  const std::vector<metrics::Table> tables = validation::report_tables(report);
  const std::string csv = (fs::path(c.output_dir) / "validation.csv").string();
  const std::string bands_csv = (fs::path(c.output_dir) / "validation_bands.csv").string();
  const std::string h5 = (fs::path(c.output_dir) / "validation.h5").string();
  const std::string png = (fs::path(c.output_dir) / "validation.png").string();
  // The outputs appear together, complete, or not at all.
  metrics::OutputSet outputs;
  const std::string staged_csv = outputs.stage(csv);
  metrics::write_text_file(staged_csv, tables[0].csv());
  metrics::write_text_file(outputs.stage(bands_csv), tables[1].csv());
  metrics::ResultsMeta meta;
  meta.version = ROCESIM_VERSION;
  meta.scenario_name = fs::path(c.scenario).stem().string();
  meta.scenario_file = c.scenario;
  meta.seed = run->seed;
  meta.effective_scenario = run->effective_yaml;
  meta.calibration = run->calibration_yaml;
  meta.tables = tables;
  metrics::write_tables_h5(outputs.stage(h5), meta);
  int plot_rc = 0;
  if (c.plot) {
    plot_rc =
        run_program({ROCESIM_PYTHON, ROCESIM_PLOT_SCRIPT, staged_csv, outputs.stage(png), "--title",
                     fmt::format("rocesim {} vs measured: {}", ROCESIM_VERSION,
                                 fs::path(c.scenario).filename().string())});
    if (plot_rc != 0) {
      // A full disk fails the whole command (nothing is written); a missing plotting library
      // only the plot.
      if (metrics::disk_is_full(png)) {
        throw std::runtime_error(metrics::write_failure(png, "the plot could not be written"));
      }
      outputs.drop(png);
    }
  }
  outputs.commit();
  std::cout << fmt::format("\nwritten: {}, {}, {}", csv, bands_csv, h5);
  if (plot_rc != 0) {
    std::cout << "\n";
    std::cerr << fmt::format(
        "error: the plot script failed (exit status {}); the tables are written. Is Debian's "
        "python3-matplotlib installed (scripts/install-deps)?\n",
        plot_rc);
    return report.errors.empty() ? 1 : input_errors();
  }
  if (c.plot) std::cout << ", " << png;
  std::cout << "\n";
  return report.errors.empty() ? 0 : input_errors();
}

}  // namespace rocesim::cli
