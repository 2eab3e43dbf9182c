#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "calibrate/lib/fit.hpp"
#include "calibrate/lib/nicprobe_report.hpp"
#include "cli/commands.hpp"
#include "sim/fabric/wire.hpp"
#include "sim/metrics/output_files.hpp"
#include "sim/metrics/table.hpp"
#include "validation/lib/validate.hpp"

namespace rocesim::cli {
namespace {

/// The NIC efficiency a rocesim-nicprobe loopback measured, as a value of
/// topology.node.nic_efficiency: the achievable RDMA WRITE bandwidth over the payload rate the
/// port's framing leaves (its rate x mtu / (mtu + framing), sim/fabric/wire.hpp), since the
/// scenario applies that framing itself. Fixed, or the fit's starting value when the fit names
/// it (later values win).
scenario::ParamOverride nic_efficiency_from_probe(const std::string& path) {
  const calibrate::NicProbeReport probe = calibrate::read_nicprobe_report(path);
  for (const calibrate::NicProbeLoopback& l : probe.loopback) {
    if (!l.fit || !l.fit->efficiency) continue;
    fabric::WireFormat wire;
    wire.layer =
        l.link_layer == "InfiniBand" ? fabric::LinkLayer::InfiniBand : fabric::LinkLayer::RoCEv2;
    if (l.mtu > 0) wire.mtu = l.mtu;
    const double e = std::min(1.0, *l.fit->efficiency / wire.efficiency());
    std::cout << fmt::format(
        "NIC probe {}: {} port {}: {:.1f} Gb/s achievable, {:.2f} us per message; {:.4g} of the "
        "line rate, of which {} framing at a {}-byte MTU leaves {:.4g}: "
        "topology.node.nic_efficiency = {:.4g}\n",
        path, l.device, l.port, l.fit->bandwidth_gbps, l.fit->overhead_us, *l.fit->efficiency,
        fabric::link_layer_name(wire.layer), wire.mtu, wire.efficiency(), e);
    return scenario::ParamOverride{
        "topology.node.nic_efficiency",
        ConfigNode::scalar(fmt::format("{:.6g}", e), l.where, "topology.node.nic_efficiency")};
  }
  throw InputError(SourceLocation{std::make_shared<const std::string>(path), 0, 0}, "loopback",
                   "a loopback test with a fitted bandwidth and a known port rate "
                   "(rocesim-nicprobe --loopback)",
                   "none");
}

}  // namespace

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
  if (!c.nicprobe.empty()) o.fixed.insert(o.fixed.begin(), nic_efficiency_from_probe(c.nicprobe));

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
  StepProgress progress("calibrate fit", false);
  o.on_iteration = [&](int it, int max, double cost) {
    progress.update(static_cast<size_t>(it), static_cast<size_t>(max), "iterations",
                    fmt::format("cost {:.4g}", cost));
  };
  const calibrate::FitReport report = calibrate::fit(logs, files, c.scenario, o);
  progress.done();
  std::cout << calibrate::format_report(report);
  // The calibration and its residuals appear together, or neither.
  metrics::OutputSet outputs;
  metrics::write_text_file(outputs.stage(c.output), calibrate::calibration_yaml(report));
  if (!c.residuals.empty()) {
    metrics::write_text_file(outputs.stage(c.residuals), calibrate::residuals_csv(report));
  }
  outputs.commit();
  std::cout << fmt::format("\nwritten: {}", c.output);
  if (!c.residuals.empty()) std::cout << fmt::format(", {}", c.residuals);
  std::cout << "\n";
  return 0;
}

}  // namespace rocesim::cli
