// The summary printed on stdout after a run: per workload its completion time and achieved
// bandwidth, per link tier the utilisation and ECMP balance.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sim/metrics/recorder.hpp"

namespace rocesim::metrics {

struct RunInfo {
  std::string scenario_name;
  uint64_t seed = 0;
  double wall_seconds = 0;
  bool results_file = true;  // a results.h5 is written (its flow table's truncation is noted)
};

std::string format_summary(const Recorder& rec, const RunInfo& info);

/// A run's figures by name, as the points table of a sweep holds them: `end_s` (the simulated
/// end, s); per workload `<name>.completion_s`, `.throughput_gbps`, `.mean_fct_s`,
/// `.max_fct_s` and each of its figures (`<name>.busbw_GBps`, ...); per link class
/// `<class>.util_mean`, `.util_p99`, `.util_max`, `.mmr`, `.busy_mmr`; where there are congestion
/// figures (a model with queues), per link class `<class>.paused_fraction`, `.pauses`,
/// `.max_queue_bytes`, `.ecn_marks`, `.drop_bytes`, and `cnps`.
std::vector<std::pair<std::string, double>> run_metrics(const Recorder& rec, Time end);

}  // namespace rocesim::metrics
