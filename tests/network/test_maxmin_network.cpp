// The maxmin network model: flow completion times from the rates it gets over time.
#include <gtest/gtest.h>

#include "sim/network/maxmin_network.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::network {
namespace {

// Two servers of one GPU on one leaf: 400 Gb/s RoCEv2 NICs, PCIe faster.
const char* kTwoHosts = R"(
type: clos
racks: 1
nodes_per_rack: 4
node: {gpus: 1, nic_speed: 400Gbps, pcie_bandwidth: 400Gbps}
leaf: {uplinks: 1}
spine: {count: 1}
)";

std::vector<fabric::LinkId> path(const fabric::Fabric& f, uint32_t src_rank, uint32_t dst_rank) {
  // GPU -> NIC -> leaf -> NIC -> GPU.
  std::vector<fabric::LinkId> p;
  fabric::NodeId at = f.gpu(src_rank);
  const fabric::NodeId dst = f.gpu(dst_rank);
  const fabric::NodeId hops[] = {f.nic_of_gpu(at), f.first_hop_switch(f.nic_of_gpu(at)),
                                 f.nic_of_gpu(dst), dst};
  for (fabric::NodeId next : hops) {
    for (fabric::LinkId l : f.out_links(at)) {
      if (f.link(l).dst == next) p.push_back(l);
    }
    at = next;
  }
  return p;
}

const double kRate = test::roce_payload(400e9);  // bytes/s: the NIC cable carries payload

TEST(MaxMinNetwork, SingleFlowTakesBytesOverBandwidth) {
  // 16 MiB at 400 Gb/s of RoCEv2 (4096 / 4178 of it payload): 16777216 / 49.0187e9 s = 342.26 us.
  const fabric::Fabric f = test::fabric_from_yaml(kTwoHosts);
  MaxMinNetwork net(f);
  net.start(path(f, 0, 1), {}, 16777216.0, Time::zero(), kNoRateCap);
  net.commit(Time::zero());
  EXPECT_NEAR(net.next_event().in_seconds(), 16777216.0 / kRate, 1e-12);
  std::vector<FlowHandle> done;
  net.advance(net.next_event(), done);
  EXPECT_EQ(done.size(), 1u);
  EXPECT_EQ(net.next_event(), Time::infinity());
}

TEST(MaxMinNetwork, StaggeredFlowsShareThenSpeedUp) {
  // A starts at 0 with S bytes; B starts on the same path at t1 = S/(2C), when A is half done.
  // They then share C: A's remaining S/2 at C/2 takes S/C, so A ends at 1.5 S/C; B has sent
  // S/2 by then and finishes the other half alone at C: B ends at 2 S/C.
  const fabric::Fabric f = test::fabric_from_yaml(kTwoHosts);
  MaxMinNetwork net(f);
  const double s = 8e6;
  const Time t1 = transfer_time(s / 2, kRate);
  const FlowHandle a = net.start(path(f, 0, 1), {}, s, Time::zero(), kNoRateCap);
  net.commit(Time::zero());
  ASSERT_LT(t1, net.next_event());
  const FlowHandle b = net.start(path(f, 0, 1), {}, s, t1, kNoRateCap);
  net.commit(t1);
  std::vector<FlowHandle> done;
  const Time end_a = net.next_event();
  EXPECT_NEAR(end_a.in_seconds(), 1.5 * s / kRate, 1e-11);
  net.advance(end_a, done);
  ASSERT_EQ(done, std::vector<FlowHandle>{a});
  net.commit(end_a);
  const Time end_b = net.next_event();
  EXPECT_NEAR(end_b.in_seconds(), 2 * s / kRate, 1e-11);
  net.advance(end_b, done);
  ASSERT_EQ(done, std::vector<FlowHandle>{b});
}

TEST(MaxMinNetwork, SimultaneousCompletionsAreOneEvent) {
  // Two equal flows on disjoint paths end at the same picosecond and come out of one advance.
  const fabric::Fabric f = test::fabric_from_yaml(kTwoHosts);
  MaxMinNetwork net(f);
  net.start(path(f, 0, 1), {}, 1e6, Time::zero(), kNoRateCap);
  net.start(path(f, 2, 3), {}, 1e6, Time::zero(), kNoRateCap);
  net.commit(Time::zero());
  std::vector<FlowHandle> done;
  net.advance(net.next_event(), done);
  EXPECT_EQ(done.size(), 2u);
  EXPECT_EQ(net.solver().stats().solves, 1u);
}

}  // namespace
}  // namespace rocesim::network
