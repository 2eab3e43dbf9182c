#include "sim/metrics/recorder.hpp"

#include <algorithm>
#include <cmath>

namespace rocesim::metrics {

double max_mean_ratio(const std::vector<uint32_t>& counts) {
  if (counts.empty()) return 0;
  uint64_t sum = 0;
  uint32_t most = 0;
  for (uint32_t c : counts) {
    sum += c;
    most = std::max(most, c);
  }
  if (sum == 0) return 0;
  return static_cast<double>(most) * static_cast<double>(counts.size()) / static_cast<double>(sum);
}

double quantile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  // Several quantiles of one vector sort it once (sorting sorted data costs n log n again).
  if (!std::is_sorted(values.begin(), values.end())) std::sort(values.begin(), values.end());
  const double k = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(k));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (k - static_cast<double>(lo));
}

Recorder::Recorder(const engine::Simulation& sim, size_t max_flows)
    : sim_(sim),
      max_flows_(max_flows),
      links_(sim.fabric().link_count()),
      congestion_(sim.fabric()) {}

void Recorder::on_qp_routed(engine::QpIndex, routing::PathId path) {
  for (fabric::LinkId l : sim_.paths().links(path))
    ++links_[l].qps;
}

void Recorder::on_qp_rerouted(engine::QpIndex, routing::PathId from, routing::PathId to) {
  // A link's QP count is of the QPs routed across it as the run ends.
  for (fabric::LinkId l : sim_.paths().links(from))
    --links_[l].qps;
  for (fabric::LinkId l : sim_.paths().links(to))
    ++links_[l].qps;
}

void Recorder::on_path_bytes(routing::PathId path, Bytes bytes) {
  if (path >= path_bytes_.size()) path_bytes_.resize(path + 1, 0);
  path_bytes_[path] += bytes.count();
}

void Recorder::on_flow_delivered(const engine::FlowRecord& flow) {
  ++flows_seen_;
  // Bytes are counted per path and spread over the path's links once, in finalize(): a path
  // carries many flows (every message of its QP), so the cost per flow stays constant.
  if (flow.path >= path_bytes_.size()) path_bytes_.resize(flow.path + 1, 0);
  path_bytes_[flow.path] += flow.path_bytes.count();
  if (flows_.size() < max_flows_) flows_.push_back(flow);
}

void Recorder::finalize() {
  const fabric::Fabric& f = sim_.fabric();
  congestion_.finalize(sim_.end_time());
  // Summed in double and rounded once per link: weighted paths (pipelines) would otherwise
  // gather a rounding error per path and link.
  std::vector<double> carried(f.link_count(), 0.0);
  for (routing::PathId p = 0; p < path_bytes_.size(); ++p) {
    const std::span<const fabric::LinkId> links = sim_.paths().links(p);
    const std::span<const double> weights = sim_.paths().weights(p);
    for (size_t i = 0; i < links.size(); ++i) {
      const double w = weights.empty() ? 1.0 : weights[i];
      carried[links[i]] += w * static_cast<double>(path_bytes_[p]);
    }
  }
  for (fabric::LinkId l = 0; l < f.link_count(); ++l)
    links_[l].bytes += static_cast<int64_t>(std::llround(carried[l]));
  const double horizon = sim_.end_time().in_seconds();
  for (fabric::LinkId l = 0; l < f.link_count(); ++l) {
    const double cap = f.link(l).capacity.bytes_per_second();
    links_[l].utilization =
        horizon > 0 ? static_cast<double>(links_[l].bytes) / (cap * horizon) : 0;
  }

  tiers_.assign(f.link_classes().size(), TierResult{});
  std::vector<std::vector<uint32_t>> qps(tiers_.size());
  std::vector<std::vector<double>> utilization(tiers_.size());
  for (fabric::LinkId l = 0; l < f.link_count(); ++l) {
    const fabric::Link& link = f.link(l);
    TierResult& t = tiers_[link.link_class];
    ++t.links;
    t.capacity_bps = std::max(t.capacity_bps, static_cast<double>(link.capacity.bits_per_second()));
    t.mean_utilization += links_[l].utilization;
    t.max_utilization = std::max(t.max_utilization, links_[l].utilization);
    qps[link.link_class].push_back(links_[l].qps);
    utilization[link.link_class].push_back(links_[l].utilization);
  }
  for (size_t c = 0; c < tiers_.size(); ++c) {
    TierResult& t = tiers_[c];
    t.link_class = f.link_classes()[c];
    t.mean_utilization /= static_cast<double>(t.links);
    uint64_t sum = 0;
    for (uint32_t q : qps[c]) {
      sum += q;
      t.max_qps = std::max(t.max_qps, q);
    }
    t.mean_qps = static_cast<double>(sum) / static_cast<double>(t.links);
    t.mmr = max_mean_ratio(qps[c]);
    std::vector<uint32_t> busy;
    for (uint32_t q : qps[c]) {
      if (q > 0) busy.push_back(q);
    }
    t.busy_links = busy.size();
    t.busy_mmr = max_mean_ratio(busy);
    t.p50_utilization = quantile(utilization[c], 0.5);
    t.p90_utilization = quantile(utilization[c], 0.9);
    t.p99_utilization = quantile(utilization[c], 0.99);
  }

  for (const engine::WorkloadState& s : sim_.workloads()) {
    WorkloadResult w;
    w.name = s.workload->name();
    w.type = std::string(s.workload->type());
    w.start = s.start;
    w.end = s.end;
    w.flows = s.flows;
    w.bytes = s.bytes;
    const double d = (s.end - s.start).in_seconds();
    w.throughput_gbps = d > 0 ? static_cast<double>(s.bytes) * 8e-9 / d : 0;
    w.mean_fct_s = s.flows > 0 ? s.fct_sum_s / static_cast<double>(s.flows) : 0;
    w.max_fct_s = s.fct_max.in_seconds();
    s.workload->figures(w.figures, s.end - s.start);
    workloads_.push_back(std::move(w));
  }
}

}  // namespace rocesim::metrics
