// Deliveries: lanes of equal latency in FIFO order, and late deliveries (delayed by queues) that
// may overtake them, all in a deterministic order.
#include <gtest/gtest.h>

#include "sim/engine/event_queue.hpp"

namespace rocesim::engine {
namespace {

TEST(DeliveryLanes, LateDeliveriesOvertakeAndTiesAreDeterministic) {
  DeliveryLanes<int> d;
  const uint32_t fast = d.lane_for(Time::ns(100));
  const uint32_t slow = d.lane_for(Time::ns(500));
  d.push(fast, Time::ns(100), 1);
  d.push(slow, Time::ns(500), 2);
  d.push(fast, Time::ns(300), 3);
  d.push_late(Time::ns(250), 4);  // queued behind others: arrives before 3 and 2
  d.push_late(Time::ns(100), 5);  // ties with 1: lanes first
  d.push_late(Time::ns(50), 6);
  std::vector<int> order;
  while (d.next_time() != Time::infinity())
    order.push_back(d.pop(d.next_time()));
  EXPECT_EQ(order, (std::vector<int>{6, 1, 5, 4, 3, 2}));
}

}  // namespace
}  // namespace rocesim::engine
