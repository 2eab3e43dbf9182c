// The event queue: a binary heap on (time, sequence number). The sequence number is the order of
// insertion, so events at the same picosecond run in the order they were scheduled, on every
// machine and at every thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "sim/core/error.hpp"
#include "sim/core/units.hpp"

namespace rocesim::engine {

enum class EventKind : uint8_t {
  WorkloadStart,  // a: workload
  Timer,          // a: workload, b: tag
  LinkChange,     // a: link event
  Reconverge,     // a: link event whose reconvergence this is
  Recompute,      // the router's periodic recomputation (traffic engineering)
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

/// Deliveries: a flow's last byte reaches the receiver one path latency after its bandwidth phase
/// ends, plus whatever it waits in queues. Bandwidth phases end in time order, so the deliveries
/// of all paths with the same latency and no queueing are in time order too: a FIFO per distinct
/// latency (a "lane") replaces the priority queue for them, and the next delivery is the earliest
/// lane head. A delivery delayed by queues (push_late) may overtake others: it goes to a heap.
/// Ties go to the lane created first, then first in, first out, then the heap in order of
/// insertion: deterministic.
template <typename Item>
class DeliveryLanes {
 public:
  uint32_t lane_for(Time latency) {
    for (uint32_t i = 0; i < lanes_.size(); ++i) {
      if (lanes_[i].latency == latency) return i;
    }
    lanes_.push_back(Lane{latency});
    return static_cast<uint32_t>(lanes_.size() - 1);
  }
  void push(uint32_t lane, Time at, Item item) { lanes_[lane].push(at, std::move(item)); }
  /// A delivery in no particular order relative to the others.
  void push_late(Time at, Item item) { late_.push(Late{at, late_seq_++, std::move(item)}); }
  Time next_time() const {
    Time t = late_.empty() ? Time::infinity() : late_.top().at;
    for (const Lane& l : lanes_) {
      if (l.count > 0) t = std::min(t, l.slots[l.head].first);
    }
    return t;
  }
  /// Removes and returns the first item due at `t` (which must be next_time()).
  Item pop(Time t) {
    for (Lane& l : lanes_) {
      if (l.count > 0 && l.slots[l.head].first == t) return l.pop();
    }
    ROCESIM_CHECK(!late_.empty() && late_.top().at == t, "no delivery due at this time");
    Item out = late_.top().item;
    late_.pop();
    return out;
  }

 private:
  struct Late {
    Time at;
    uint64_t seq;
    Item item;
    bool operator>(const Late& o) const { return at > o.at || (at == o.at && seq > o.seq); }
  };
  std::priority_queue<Late, std::vector<Late>, std::greater<>> late_;
  uint64_t late_seq_ = 0;
  // A circular buffer: memory stays at the largest number of deliveries in flight at once.
  struct Lane {
    Time latency;
    std::vector<std::pair<Time, Item>> slots = std::vector<std::pair<Time, Item>>(64);
    size_t head = 0, count = 0;

    void push(Time at, Item item) {
      if (count == slots.size()) {
        std::vector<std::pair<Time, Item>> bigger(2 * slots.size());
        for (size_t i = 0; i < count; ++i)
          bigger[i] = std::move(slots[(head + i) % slots.size()]);
        slots.swap(bigger);
        head = 0;
      }
      slots[(head + count++) & (slots.size() - 1)] = {at, std::move(item)};
    }
    Item pop() {
      Item out = std::move(slots[head].second);
      head = (head + 1) & (slots.size() - 1);
      --count;
      return out;
    }
  };
  std::vector<Lane> lanes_;
};

}  // namespace rocesim::engine
