// A workload drives traffic: it opens connections, posts transfers and waits on timers, and
// reacts when they complete. This is the narrow seam between traffic and the network (send,
// schedule, now, finished): a workload never sees rates or links, so the same workload runs on
// any network model. Workloads emit transfers as they become ready instead of materialising
// their whole schedule, so a ring over 16,384 GPUs costs memory per rank, not per step.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/core/units.hpp"

namespace rocesim::engine {

class Simulation;
using WorkloadId = uint32_t;

/// Named figures a workload reports for the summary and results.h5 (e.g. "busbw_GBps").
struct WorkloadFigures {
  std::vector<std::pair<std::string, double>> values;
  std::vector<std::pair<std::string, std::string>> notes;  // e.g. the algorithm NCCL ran
  void add(std::string name, double v) { values.emplace_back(std::move(name), v); }
  void note(std::string name, std::string text) {
    notes.emplace_back(std::move(name), std::move(text));
  }
};

/// One span of a timeline (a kernel, a collective, a transfer) for the trace (--trace): on the
/// track `thread` (a stream) of `process` (a rank, a GPU, a communicator).
struct TraceSpan {
  std::string process;
  std::string thread;
  std::string name;
  Time start{}, end{};
};

class Workload {
 public:
  explicit Workload(std::string name) : name_(std::move(name)) {}
  virtual ~Workload() = default;
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;

  const std::string& name() const { return name_; }
  virtual std::string_view type() const = 0;

  /// Called when the workload starts (its start time and its dependencies reached). It must
  /// eventually call sim.finish(id).
  virtual void start(Simulation& sim, WorkloadId id) = 0;
  /// A transfer posted with `tag` has been delivered in full.
  virtual void on_transfer_done(Simulation& sim, WorkloadId id, uint64_t tag) = 0;
  /// A timer set with `tag` has fired.
  virtual void on_timer(Simulation& sim, WorkloadId id, uint64_t tag);
  /// Figures specific to the workload (bus bandwidth of a collective, ...), given its duration
  /// (0 when it did not run, e.g. a training job reported out of memory).
  virtual void figures(WorkloadFigures& out, Time duration) const;
  /// Spans of its own timeline (its operations, its ranks' streams). A workload that adds none
  /// is traced by its flows.
  virtual void trace(std::vector<TraceSpan>& out) const;

 private:
  std::string name_;
};

}  // namespace rocesim::engine
