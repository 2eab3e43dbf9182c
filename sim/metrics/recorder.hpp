// The recorder observes a simulation and keeps what the summary and results.h5 report: every
// delivered flow (up to a limit), per-link bytes and routed QPs, and per-workload figures. It
// never writes files itself; writers read its results.
//
// Definitions:
//  * link utilisation = bytes carried * 8 / (capacity * end of simulation), over the whole run;
//  * routed QPs of a link = how many distinct RoCEv2 5-tuples (QPs) ECMP placed on it;
//  * MMR (max-mean ratio) of a tier = max over its links of routed QPs / mean over its links:
//    1.0 is perfect balance, the figure operators use to judge ECMP collisions.
#pragma once

#include <string>
#include <vector>

#include "sim/engine/simulation.hpp"
#include "sim/metrics/congestion.hpp"

namespace rocesim::metrics {

struct WorkloadResult {
  std::string name;
  std::string type;
  Time start{}, end{};
  uint64_t flows = 0;
  int64_t bytes = 0;
  double throughput_gbps = 0;  // bytes * 8 / duration
  double mean_fct_s = 0;
  double max_fct_s = 0;
  engine::WorkloadFigures figures;
};

struct TierResult {
  std::string link_class;  // "leaf->spine"
  size_t links = 0;
  double capacity_bps = 0;  // of one link (the largest in the class)
  double mean_utilization = 0;
  double max_utilization = 0;
  // The distribution of the links' utilisations (linear interpolation between order
  // statistics), every link of the class counted.
  double p50_utilization = 0, p90_utilization = 0, p99_utilization = 0;
  double mean_qps = 0;  // routed QPs per link
  uint32_t max_qps = 0;
  double mmr = 0;         // max_qps / mean_qps (0 when no QP crossed the class)
  size_t busy_links = 0;  // links at least one QP was routed across
  double busy_mmr = 0;    // max_qps / mean QPs over the busy links only (0 when none)
};

struct LinkResult {
  int64_t bytes = 0;
  uint32_t qps = 0;
  double utilization = 0;
};

class Recorder final : public engine::Observer {
 public:
  /// Keeps at most `max_flows` flow records (0: none); counts all of them regardless.
  Recorder(const engine::Simulation& sim, size_t max_flows);

  void on_qp_routed(engine::QpIndex qp, routing::PathId path) override;
  void on_qp_rerouted(engine::QpIndex qp, routing::PathId from, routing::PathId to) override;
  void on_flow_delivered(const engine::FlowRecord& flow) override;
  void on_path_bytes(routing::PathId path, Bytes bytes) override;

  /// Fills the per-link, per-tier and per-workload results; call after Simulation::run().
  void finalize();

  const std::vector<engine::FlowRecord>& flows() const { return flows_; }
  bool flows_truncated() const { return flows_seen_ > flows_.size(); }
  uint64_t flows_seen() const { return flows_seen_; }
  const std::vector<LinkResult>& links() const { return links_; }
  const std::vector<TierResult>& tiers() const { return tiers_; }
  const std::vector<WorkloadResult>& workloads() const { return workloads_; }
  const engine::Simulation& simulation() const { return sim_; }
  /// The network model's congestion events (attach it to the model with add_observer).
  CongestionRecorder& congestion() { return congestion_; }
  const CongestionRecorder& congestion() const { return congestion_; }

 private:
  const engine::Simulation& sim_;
  size_t max_flows_;
  uint64_t flows_seen_ = 0;
  std::vector<engine::FlowRecord> flows_;
  std::vector<int64_t> path_bytes_;  // bytes delivered per path
  std::vector<LinkResult> links_;
  std::vector<TierResult> tiers_;
  std::vector<WorkloadResult> workloads_;
  CongestionRecorder congestion_;
};

/// Max over mean of a set of counts (0 when the mean is 0).
double max_mean_ratio(const std::vector<uint32_t>& counts);
/// The q-quantile (0-1) of `values` by linear interpolation between order statistics; 0 when
/// empty. Sorts `values`.
double quantile(std::vector<double>& values, double q);

}  // namespace rocesim::metrics
