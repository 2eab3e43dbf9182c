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

/// What a rocesim-nicprobe loopback measured of the NIC, as values of the scenario's node keys,
/// from its first fitted loopback sweep:
///   topology.node.nic_speed       the port's rate (a port that trained below the NIC's speed
///                                 shows here);
///   topology.node.nic_efficiency  the achievable RDMA WRITE bandwidth over the payload rate the
///                                 port's framing leaves (its rate x mtu / (mtu + framing),
///                                 sim/fabric/wire.hpp), since the scenario applies that framing
///                                 itself;
///   topology.node.pcie_latency    half the one-way latency of a zero-byte write: a loopback write
///                                 crosses the PCIe path between memory and NIC twice, and
///                                 rocesim has no NIC latency apart from it.
/// Fixed, or the fit's starting values when the fit names them (later values win).
std::vector<scenario::ParamOverride> node_from_probe(const std::string& path) {
  const calibrate::NicProbeReport probe = calibrate::read_nicprobe_report(path);
  for (const calibrate::NicProbeLoopback& l : probe.loopback) {
    const calibrate::NicProbePort* port = probe.find_port(l.device, l.port);
    if (!l.fit || !l.fit->efficiency || port == nullptr) continue;
    fabric::WireFormat wire;
    wire.layer =
        l.link_layer == "InfiniBand" ? fabric::LinkLayer::InfiniBand : fabric::LinkLayer::RoCEv2;
    if (l.mtu > 0) wire.mtu = l.mtu;
    const double e = std::min(1.0, *l.fit->efficiency / wire.efficiency());
    std::vector<scenario::ParamOverride> out;
    const auto set = [&](const char* key, std::string value) {
      out.push_back({key, ConfigNode::scalar(std::move(value), l.where, key)});
    };
    set("topology.node.nic_speed", fmt::format("{:.6g}Gbps", port->rate_gbps));
    set("topology.node.nic_efficiency", fmt::format("{:.6g}", e));
    std::cout << fmt::format(
        "NIC probe {}: {} port {}: {:g} Gb/s port, {:.1f} Gb/s achievable, {:.2f} us per message; "
        "{:.4g} of the line rate, of which {} framing at a {}-byte MTU leaves {:.4g}: "
        "topology.node.nic_speed = {:g}Gbps, topology.node.nic_efficiency = {:.4g}",
        path, l.device, l.port, port->rate_gbps, l.fit->bandwidth_gbps, l.fit->overhead_us,
        *l.fit->efficiency, fabric::link_layer_name(wire.layer), wire.mtu, wire.efficiency(),
        port->rate_gbps, e);
    if (l.fit->latency_us) {
      const double pcie_ns = *l.fit->latency_us / 2 * 1e3;
      set("topology.node.pcie_latency", fmt::format("{:.6g}ns", pcie_ns));
      std::cout << fmt::format(", {:.3g} us one way: topology.node.pcie_latency = {:.4g}ns",
                               *l.fit->latency_us, pcie_ns);
    }
    std::cout << "\n";
    return out;
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
  o.priors = !c.no_priors;
  o.loss = c.loss;
  o.loss_scale = c.loss_scale;
  o.threads = c.threads;
  o.seed = c.seed;
  o.fixed = parse_sets(c.set, c.calibration);
  if (!c.nicprobe.empty()) {
    const std::vector<scenario::ParamOverride> probed = node_from_probe(c.nicprobe);
    o.fixed.insert(o.fixed.begin(), probed.begin(), probed.end());
  }

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
