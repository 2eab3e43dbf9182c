// The summary printed on stdout after a run: per workload its completion time and achieved
// bandwidth, per link tier the utilisation and ECMP balance.
#pragma once

#include <string>

#include "sim/metrics/recorder.hpp"

namespace rocesim::metrics {

struct RunInfo {
  std::string scenario_name;
  uint64_t seed = 0;
  double wall_seconds = 0;
};

std::string format_summary(const Recorder& rec, const RunInfo& info);

}  // namespace rocesim::metrics
