#include "sim/engine/task_graph.hpp"

#include <vector>

#include "sim/core/flat_map.hpp"
#include "sim/core/rng.hpp"

namespace rocesim::engine {

TaskGraph::TaskId TaskGraph::add_transfer(const TransferSpec& t) {
  ROCESIM_CHECK(t.bytes.count() > 0 && t.conn.qps >= 1, "a transfer moves bytes over >= 1 QP");
  transfers_.push_back(t);
  tasks_.push_back(Task{true, static_cast<uint32_t>(transfers_.size() - 1)});
  return static_cast<TaskId>(tasks_.size() - 1);
}

TaskGraph::TaskId TaskGraph::add_delay(Time d) {
  ROCESIM_CHECK(d >= Time::zero(), "a delay cannot be negative");
  delays_.push_back(d);
  tasks_.push_back(Task{false, static_cast<uint32_t>(delays_.size() - 1)});
  return static_cast<TaskId>(tasks_.size() - 1);
}

void TaskGraph::add_dependency(TaskId before, TaskId after) {
  ROCESIM_CHECK(before < tasks_.size() && after < tasks_.size() && before != after,
                "dependency between unknown tasks");
  edges_.emplace_back(before, after);
  ++tasks_[after].waiting;
}

void TaskGraph::start(Simulation& sim, WorkloadId id) {
  dep_begin_.assign(tasks_.size() + 1, 0);
  for (const auto& [b, a] : edges_)
    ++dep_begin_[b + 1];
  for (size_t i = 0; i < tasks_.size(); ++i)
    dep_begin_[i + 1] += dep_begin_[i];
  deps_.resize(edges_.size());
  std::vector<uint32_t> fill(dep_begin_.begin(), dep_begin_.end() - 1);
  for (const auto& [b, a] : edges_)
    deps_[fill[b]++] = a;

  // Transfers with the same endpoints and connection settings share one connection, made when
  // the first of them comes (an all-to-all has a million transfers).
  // The key carries its hash, so that a probe that meets another transfer's key compares two
  // numbers before it reads that transfer (a random access into a million of them).
  struct Same {  // a transfer as a key: its endpoints and connection settings
    const TransferSpec* t = nullptr;
    uint64_t hash = 0;
    bool operator==(const Same& o) const {
      return hash == o.hash && t->src == o.t->src && t->dst == o.t->dst &&
             t->conn.qps == o.t->conn.qps && t->conn.mode == o.t->conn.mode &&
             t->conn.message_bytes == o.t->conn.message_bytes && t->conn.relay == o.t->conn.relay &&
             t->via == o.t->via;
    }
  };
  struct SameHash {
    size_t operator()(const Same& k) const { return static_cast<size_t>(k.hash); }
  };
  auto key = [](const TransferSpec& t) {
    uint64_t h = mix64((static_cast<uint64_t>(t.src) << 32) ^ t.dst);
    h = mix64(h ^ t.conn.qps ^ (static_cast<uint64_t>(t.conn.mode) << 32));
    h = mix64(h ^ static_cast<uint64_t>(t.conn.message_bytes));
    h = mix64(h ^ t.conn.relay);
    for (fabric::NodeId v : t.via)
      h = mix64(h ^ v);
    return Same{&t, h};
  };
  FlatMap<Same, ConnectionId, SameHash> open;
  open.reserve(transfers_.size());
  connection_.resize(transfers_.size());
  for (size_t i = 0; i < transfers_.size(); ++i) {
    const TransferSpec& t = transfers_[i];
    const Same k = key(t);
    if (const ConnectionId* c = open.find(k)) {
      connection_[i] = *c;
    } else {
      connection_[i] = sim.connect(t.src, t.dst, t.conn, t.via);
      open.insert(k, connection_[i]);
    }
  }

  remaining_ = tasks_.size();
  if (remaining_ == 0) {
    sim.finish(id);
    return;
  }
  for (TaskId t = 0; t < tasks_.size(); ++t) {
    if (tasks_[t].waiting == 0) release(sim, id, t);
  }
}

void TaskGraph::release(Simulation& sim, WorkloadId id, TaskId t) {
  const Task& task = tasks_[t];
  if (task.is_transfer) {
    sim.transfer(id, connection_[task.payload], transfers_[task.payload].bytes, t);
  } else {
    sim.timer(id, sim.now() + delays_[task.payload], t);
  }
}

void TaskGraph::done(Simulation& sim, WorkloadId id, TaskId t) {
  for (uint32_t i = dep_begin_[t]; i < dep_begin_[t + 1]; ++i) {
    if (--tasks_[deps_[i]].waiting == 0) release(sim, id, deps_[i]);
  }
  if (--remaining_ == 0) sim.finish(id);
}

void TaskGraph::on_transfer_done(Simulation& sim, WorkloadId id, uint64_t tag) {
  done(sim, id, static_cast<TaskId>(tag));
}

void TaskGraph::on_timer(Simulation& sim, WorkloadId id, uint64_t tag) {
  done(sim, id, static_cast<TaskId>(tag));
}

}  // namespace rocesim::engine
