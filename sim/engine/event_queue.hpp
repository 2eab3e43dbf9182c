// The event queue: a binary heap on (time, sequence number). The sequence number is the order of
// insertion, so events at the same picosecond run in the order they were scheduled, on every
// machine and at every thread count.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "sim/core/units.hpp"

namespace rocesim::engine {

enum class EventKind : uint8_t {
  WorkloadStart,  // a: workload
  Timer,          // a: workload, b: tag
  FlowDelivered,  // a: in-flight flow slot
};

struct Event {
  Time at;
  uint64_t seq = 0;
  EventKind kind = EventKind::Timer;
  uint32_t a = 0;
  uint64_t b = 0;
};

class EventQueue {
 public:
  void push(Time at, EventKind kind, uint32_t a, uint64_t b = 0) {
    heap_.push(Event{at, next_seq_++, kind, a, b});
  }
  bool empty() const { return heap_.empty(); }
  Time next_time() const { return heap_.empty() ? Time::infinity() : heap_.top().at; }
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }
  size_t size() const { return heap_.size(); }

 private:
  struct Later {
    bool operator()(const Event& x, const Event& y) const {
      return x.at > y.at || (x.at == y.at && x.seq > y.seq);
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace rocesim::engine
