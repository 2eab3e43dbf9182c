// A workload given as a graph of tasks: transfers between GPUs and delays (compute time, idle
// time), with dependencies. A task is released when all the tasks it depends on are done;
// tasks with no dependencies are released when the workload starts. Explicit flow lists and
// generated traffic patterns are task graphs; so will be the steps of training jobs.
#pragma once

#include <vector>

#include "sim/engine/simulation.hpp"

namespace rocesim::engine {

class TaskGraph : public Workload {
 public:
  using TaskId = uint32_t;

  TaskGraph(std::string name, std::string type)
      : Workload(std::move(name)), type_(std::move(type)) {}
  std::string_view type() const override { return type_; }

  struct TransferSpec {
    fabric::NodeId src = fabric::kNone;  // GPUs
    fabric::NodeId dst = fabric::kNone;
    Bytes bytes{};
    ConnectionSpec conn{};
    std::vector<fabric::NodeId> via;
  };
  TaskId add_transfer(const TransferSpec& t);
  TaskId add_delay(Time d);
  /// `after` runs only once `before` is done.
  void add_dependency(TaskId before, TaskId after);
  size_t size() const { return tasks_.size(); }

  void start(Simulation& sim, WorkloadId id) override;
  void on_transfer_done(Simulation& sim, WorkloadId id, uint64_t tag) override;
  void on_timer(Simulation& sim, WorkloadId id, uint64_t tag) override;

 private:
  struct Task {
    bool is_transfer;
    uint32_t payload;  // index into transfers_ or delays_
    uint32_t waiting = 0;
  };
  void release(Simulation& sim, WorkloadId id, TaskId t);
  void done(Simulation& sim, WorkloadId id, TaskId t);

  std::string type_;
  std::vector<Task> tasks_;
  std::vector<TransferSpec> transfers_;
  std::vector<Time> delays_;
  std::vector<std::pair<TaskId, TaskId>> edges_;
  // Built at start: dependents in CSR form, and one connection per distinct (src, dst, connection
  // settings, via) so that transfers between the same GPUs reuse their QPs.
  std::vector<uint32_t> dep_begin_;
  std::vector<TaskId> deps_;
  std::vector<ConnectionId> connection_;  // per transfer
  size_t remaining_ = 0;
};

}  // namespace rocesim::engine
