#include "sim/metrics/summary.hpp"

#include <fmt/format.h>

namespace rocesim::metrics {

std::string format_summary(const Recorder& rec, const RunInfo& info) {
  const engine::Simulation& sim = rec.simulation();
  const fabric::Fabric& f = sim.fabric();
  std::string out = fmt::format("scenario {}  (seed {})\n", info.scenario_name, info.seed);
  out += fmt::format("fabric   {}; {} GPUs, {} nodes, {} links\n", f.description(), f.gpu_count(),
                     f.node_count(), f.link_count());
  const double events_per_s =
      info.wall_seconds > 0 ? static_cast<double>(sim.events()) / info.wall_seconds : 0;
  out += fmt::format(
      "run      simulated {} in {:.3f} s of wall time; {} flows, {} events "
      "({:.3g} events/s)\n\n",
      format_time(sim.end_time()), info.wall_seconds, rec.flows_seen(), sim.events(), events_per_s);

  out += fmt::format("{:<20} {:<15} {:>12} {:>12} {:>9} {:>11} {:>13} {:>12} {:>12}\n", "workload",
                     "type", "start", "completion", "flows", "bytes", "throughput", "mean FCT",
                     "max FCT");
  for (const WorkloadResult& w : rec.workloads()) {
    out += fmt::format("{:<20} {:<15} {:>12} {:>12} {:>9} {:>11} {:>8.2f} Gb/s {:>12} {:>12}\n",
                       w.name, w.type, format_time(w.start), format_time(w.end - w.start), w.flows,
                       format_bytes(Bytes(w.bytes)), w.throughput_gbps,
                       format_time(Time::seconds(w.mean_fct_s)),
                       format_time(Time::seconds(w.max_fct_s)));
    for (const auto& [name, value] : w.figures.values) {
      out += fmt::format("{:<20}   {} = {:.6g}\n", "", name, value);
    }
    for (const auto& [name, text] : w.figures.notes) {
      out += fmt::format("{:<20}   {} = {}\n", "", name, text);
    }
  }

  out += fmt::format("\n{:<24} {:>8} {:>10} {:>10} {:>10} {:>10} {:>8} {:>7} {:>8} {:>8}\n",
                     "link tier", "links", "util mean", "util p50", "util p99", "util max",
                     "QPs max", "MMR", "busy", "MMR busy");
  for (const TierResult& t : rec.tiers()) {
    out += fmt::format(
        "{:<24} {:>8} {:>9.1f}% {:>9.1f}% {:>9.1f}% {:>9.1f}% {:>8} {:>7.3f} {:>8} {:>8.3f}\n",
        t.link_class, t.links, 100 * t.mean_utilization, 100 * t.p50_utilization,
        100 * t.p99_utilization, 100 * t.max_utilization, t.max_qps, t.mmr, t.busy_links,
        t.busy_mmr);
  }
  if (sim.router().flowlet_timeout() != Time::infinity()) {
    out += fmt::format(
        "\nflowlets: {} bursts after idle gaps longer than {} routed again; {} took another path, "
        "{} of them able to arrive before the previous burst (reordering)\n",
        sim.flowlets(), format_time(sim.router().flowlet_timeout()), sim.flowlet_moves(),
        sim.flowlet_reorders());
  }
  if (sim.router().recompute_period() != Time::infinity()) {
    out += fmt::format(
        "\ntraffic engineering: {} computations (every {}); they moved {} QPs and {} running "
        "flows\n",
        sim.recomputations(), format_time(sim.router().recompute_period()), sim.recompute_qps(),
        sim.recompute_flows());
  }
  if (!sim.link_events().empty()) {
    out += fmt::format("\n{:<36} {:>12} {:>12} {:>13} {:>14} {:>11}\n", "link event", "at",
                       "converged", "QPs rerouted", "flows rerouted", "no path");
    for (const engine::LinkEvent& e : sim.link_events()) {
      const std::string converged = !e.applied                  ? "not reached"
                                    : e.converged.is_infinite() ? "-"
                                                                : format_time(e.converged);
      out += fmt::format("{:<36} {:>12} {:>12} {:>13} {:>14} {:>11}\n", e.what, format_time(e.at),
                         converged, e.qps_rerouted, e.flows_rerouted, e.qps_unroutable);
    }
  }
  const CongestionRecorder& cr = rec.congestion();
  if (cr.any()) {
    out += fmt::format("\n{:<24} {:>8} {:>8} {:>10} {:>12} {:>10}\n", "congestion", "paused",
                       "pauses", "max queue", "ECN marks", "drops");
    for (const TierCongestion& t : cr.tiers()) {
      out += fmt::format(
          "{:<24} {:>7.2f}% {:>8} {:>10} {:>12.4g} {:>10}\n", t.link_class, 100 * t.paused_fraction,
          t.pauses, format_bytes(Bytes(static_cast<int64_t>(std::llround(t.max_queue)))),
          t.ecn_marks, format_bytes(Bytes(static_cast<int64_t>(std::llround(t.drops)))));
    }
    out += fmt::format("CNPs received by the senders: {:.4g}\n", cr.cnps());
  }
  if (info.results_file && rec.flows_truncated()) {
    out += fmt::format("\nnote: results.h5 keeps the first {} of {} flows (output.max_flows)\n",
                       rec.flows().size(), rec.flows_seen());
  }
  return out;
}

std::vector<std::pair<std::string, double>> run_metrics(const Recorder& rec, Time end) {
  std::vector<std::pair<std::string, double>> out;
  out.emplace_back("end_s", end.in_seconds());
  for (const WorkloadResult& w : rec.workloads()) {
    out.emplace_back(w.name + ".completion_s", (w.end - w.start).in_seconds());
    out.emplace_back(w.name + ".throughput_gbps", w.throughput_gbps);
    out.emplace_back(w.name + ".mean_fct_s", w.mean_fct_s);
    out.emplace_back(w.name + ".max_fct_s", w.max_fct_s);
    for (const auto& [name, value] : w.figures.values)
      out.emplace_back(w.name + "." + name, value);
  }
  for (const TierResult& t : rec.tiers()) {
    out.emplace_back(t.link_class + ".util_mean", t.mean_utilization);
    out.emplace_back(t.link_class + ".util_p99", t.p99_utilization);
    out.emplace_back(t.link_class + ".util_max", t.max_utilization);
    out.emplace_back(t.link_class + ".mmr", t.mmr);
    out.emplace_back(t.link_class + ".busy_mmr", t.busy_mmr);
  }
  const CongestionRecorder& cr = rec.congestion();
  if (cr.any()) {
    for (const TierCongestion& t : cr.tiers()) {
      out.emplace_back(t.link_class + ".paused_fraction", t.paused_fraction);
      out.emplace_back(t.link_class + ".pauses", static_cast<double>(t.pauses));
      out.emplace_back(t.link_class + ".max_queue_bytes", t.max_queue);
      out.emplace_back(t.link_class + ".ecn_marks", t.ecn_marks);
      out.emplace_back(t.link_class + ".drop_bytes", t.drops);
    }
    out.emplace_back("cnps", cr.cnps());
  }
  return out;
}

}  // namespace rocesim::metrics
