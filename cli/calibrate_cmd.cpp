#include <fmt/format.h>

#include <iostream>

#include "calibrate/lib/fit.hpp"
#include "cli/commands.hpp"
#include "sim/metrics/table.hpp"
#include "validation/lib/validate.hpp"

namespace rocesim::cli {

int calibrate_fit(const CalibrateFitCommand& c) {
  calibrate::FitOptions o;
  for (const std::string& p : c.params)
    o.parameters.push_back(calibrate::ParameterSpec::parse(p, "--param " + p));
  o.train = calibrate::Selection::parse(c.train, "--train");
  o.test = calibrate::Selection::parse(c.test, "--test");
  o.max_iterations = c.max_iterations;
  o.loss = c.loss;
  o.loss_scale = c.loss_scale;
  o.threads = c.threads;
  o.seed = c.seed;
  o.fixed = parse_sets(c.set, c.calibration);

  std::vector<std::string> files;
  for (const std::string& m : c.measured) {
    for (std::string& f : validation::measured_files(m))
      files.push_back(std::move(f));
  }
  const std::vector<validation::NcclTestsLog> logs = validation::read_measured(files);
  for (const validation::NcclTestsLog& log : logs) {
    for (const std::string& w : log.warnings)
      std::cerr << w << "\n";
  }
  const calibrate::FitReport report = calibrate::fit(logs, files, c.scenario, o);
  std::cout << calibrate::format_report(report);
  metrics::write_text_file(c.output, calibrate::calibration_yaml(report));
  std::cout << fmt::format("\nwritten: {}", c.output);
  if (!c.residuals.empty()) {
    metrics::write_text_file(c.residuals, calibrate::residuals_csv(report));
    std::cout << fmt::format(", {}", c.residuals);
  }
  std::cout << "\n";
  return 0;
}

}  // namespace rocesim::cli
