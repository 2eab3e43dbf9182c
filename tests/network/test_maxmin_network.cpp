// The maxmin network model: flow completion times from the rates it gets over time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "sim/core/rng.hpp"
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

FlowHandle start(NetworkModel& net, const std::vector<fabric::LinkId>& links, double bytes,
                 Time now) {
  const Route route{links, 1.0, kNoQp};
  FlowSpec spec;
  spec.routes = std::span<const Route>(&route, 1);
  spec.bytes = bytes;
  return net.start(spec, now);
}

std::vector<FlowHandle> handles(const std::vector<Completion>& done) {
  std::vector<FlowHandle> out;
  for (const Completion& c : done) {
    EXPECT_EQ(c.queueing, Time::zero()) << "max-min has no queues";
    out.push_back(c.flow);
  }
  return out;
}

TEST(MaxMinNetwork, SingleFlowTakesBytesOverBandwidth) {
  // 16 MiB at 400 Gb/s of RoCEv2 (4096 / 4178 of it payload): 16777216 / 49.0187e9 s = 342.26 us.
  const fabric::Fabric f = test::fabric_from_yaml(kTwoHosts);
  MaxMinNetwork net(f);
  start(net, path(f, 0, 1), 16777216.0, Time::zero());
  net.commit(Time::zero());
  EXPECT_NEAR(net.next_event().in_seconds(), 16777216.0 / kRate, 1e-12);
  std::vector<Completion> done;
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
  const FlowHandle a = start(net, path(f, 0, 1), s, Time::zero());
  net.commit(Time::zero());
  ASSERT_LT(t1, net.next_event());
  const FlowHandle b = start(net, path(f, 0, 1), s, t1);
  net.commit(t1);
  std::vector<Completion> done;
  const Time end_a = net.next_event();
  EXPECT_NEAR(end_a.in_seconds(), 1.5 * s / kRate, 1e-11);
  net.advance(end_a, done);
  ASSERT_EQ(handles(done), std::vector<FlowHandle>{a});
  net.commit(end_a);
  const Time end_b = net.next_event();
  EXPECT_NEAR(end_b.in_seconds(), 2 * s / kRate, 1e-11);
  net.advance(end_b, done);
  ASSERT_EQ(handles(done), std::vector<FlowHandle>{b});
}

TEST(MaxMinNetwork, SimultaneousCompletionsAreOneEvent) {
  // Two equal flows on disjoint paths end at the same picosecond and come out of one advance.
  const fabric::Fabric f = test::fabric_from_yaml(kTwoHosts);
  MaxMinNetwork net(f);
  start(net, path(f, 0, 1), 1e6, Time::zero());
  start(net, path(f, 2, 3), 1e6, Time::zero());
  net.commit(Time::zero());
  std::vector<Completion> done;
  net.advance(net.next_event(), done);
  EXPECT_EQ(handles(done).size(), 2u);
  EXPECT_EQ(net.solver().stats().solves, 1u);
}

// The ends of flows that share one link of rate C as a processor: between two events the n
// flows present each move C / n. Flows are (start, bytes), starts in order; returns the ends.
std::vector<double> processor_sharing_ends(const std::vector<std::pair<double, double>>& flows,
                                           double c) {
  std::vector<double> left, end(flows.size(), -1);
  for (const auto& [start, bytes] : flows)
    left.push_back(bytes);
  double now = 0;
  size_t arrived = 0;
  for (;;) {
    while (arrived < flows.size() && flows[arrived].first <= now)
      ++arrived;
    size_t n = 0;
    double least = 1e300;
    for (size_t i = 0; i < arrived; ++i) {
      if (end[i] >= 0) continue;
      ++n;
      least = std::min(least, left[i]);
    }
    if (n == 0 && arrived == flows.size()) return end;
    double dt = n > 0 ? least * static_cast<double>(n) / c : 1e300;
    if (arrived < flows.size()) dt = std::min(dt, flows[arrived].first - now);
    now += dt;
    for (size_t i = 0; i < arrived; ++i) {
      if (end[i] >= 0) continue;
      left[i] -= dt * c / static_cast<double>(n);
      if (left[i] <= 1e-6) end[i] = now;
    }
  }
}

TEST(MaxMinNetwork, EndsAsProcessorSharingOnEachPathWhateverTheirOrder) {
  // Four disjoint paths (0->1, 1->0, 2->3, 3->2), each a processor shared at C: 100 flows on
  // each, arriving at random within 2 ms with sizes from 0.1 to 10 MB (log-uniform). Every
  // arrival slows the flows of its path and every end speeds them up, so their predicted ends
  // move earlier and later past those of the other paths, hundreds of durations at once: the
  // lanes overflow and the end-time heap re-keys its entries both ways. Each flow must end when
  // processor sharing on its path says (processor_sharing_ends, an independent account event by
  // event), to 1 ns (each predicted end is rounded up to the picosecond), one end at a time.
  const fabric::Fabric f = test::fabric_from_yaml(kTwoHosts);
  MaxMinNetwork net(f);
  const std::vector<fabric::LinkId> paths[] = {path(f, 0, 1), path(f, 1, 0), path(f, 2, 3),
                                               path(f, 3, 2)};
  SplitMix64 rng(2026);
  const auto uniform = [&] { return static_cast<double>(rng.next() >> 11) * 0x1p-53; };
  struct Arrival {
    int64_t at_ps;
    size_t path;
    double bytes;
  };
  std::vector<Arrival> arrivals;
  for (size_t p = 0; p < 4; ++p) {
    for (int k = 0; k < 100; ++k)
      arrivals.push_back(
          {static_cast<int64_t>(uniform() * 2e9), p, 1e5 * std::pow(100.0, uniform())});
  }
  std::sort(arrivals.begin(), arrivals.end(),
            [](const Arrival& x, const Arrival& y) { return x.at_ps < y.at_ps; });
  std::vector<std::pair<double, double>> on_path[4];  // (start s, bytes), in start order
  std::vector<std::pair<size_t, size_t>> which;       // per arrival: (path, index on it)
  for (const Arrival& a : arrivals) {
    which.emplace_back(a.path, on_path[a.path].size());
    on_path[a.path].emplace_back(Time::ps(a.at_ps).in_seconds(), a.bytes);
  }
  std::vector<double> expected[4];
  for (size_t p = 0; p < 4; ++p)
    expected[p] = processor_sharing_ends(on_path[p], kRate);

  std::vector<size_t> owner;  // per flow handle: the arrival that holds it
  std::vector<Completion> done;
  size_t next = 0, ended = 0;
  while (ended < arrivals.size()) {
    const Time end = net.next_event();
    if (next < arrivals.size() && Time::ps(arrivals[next].at_ps) < end) {
      const Time at = Time::ps(arrivals[next].at_ps);
      const FlowHandle h = start(net, paths[arrivals[next].path], arrivals[next].bytes, at);
      if (h >= owner.size()) owner.resize(h + 1);
      owner[h] = next++;
      net.commit(at);
      continue;
    }
    ASSERT_NE(end, Time::infinity());
    net.advance(end, done);
    ASSERT_EQ(done.size(), 1u) << "at " << end.in_seconds() << " s";
    const auto [p, i] = which[owner[done[0].flow]];
    EXPECT_NEAR(end.in_seconds(), expected[p][i], 1e-9) << "path " << p << ", flow " << i;
    ++ended;
    net.commit(end);
  }
  EXPECT_EQ(net.next_event(), Time::infinity());
}

TEST(MaxMinNetwork, APipelineRunsAtItsSlowestEdge) {
  // Two routes in lockstep, 0->1 and 1->0, each carrying the flow's bytes (share 1): they cross
  // disjoint directed links, so the pipeline runs at C. A third route 0->1 with share 0.5 adds
  // half a byte per byte on the links of the first: those carry 1.5 per byte, so the rate is
  // C / 1.5 and S bytes take 1.5 S / C.
  const fabric::Fabric f = test::fabric_from_yaml(kTwoHosts);
  MaxMinNetwork net(f);
  const std::vector<fabric::LinkId> ab = path(f, 0, 1), ba = path(f, 1, 0);
  const Route routes[] = {{ab, 1.0, 0}, {ba, 1.0, 1}, {ab, 0.5, 2}};
  FlowSpec spec;
  spec.routes = routes;
  spec.bytes = 1e6;
  net.start(spec, Time::zero());
  net.commit(Time::zero());
  EXPECT_NEAR(net.next_event().in_seconds(), 1.5e6 / kRate, 1e-12);
}

TEST(MergeRoutes, SumsSharesAndCapsReducedSwitchLinks) {
  // Shares add per link; a plain single route keeps its order and no weights, a union is in
  // increasing link id. With reduce_in_switches only a link joining two fabric switches is
  // capped at 1 (none on one leaf: the weights stay 1.5).
  const fabric::Fabric f = test::fabric_from_yaml(kTwoHosts);
  const std::vector<fabric::LinkId> ab = path(f, 0, 1);
  std::vector<double> scratch;
  std::vector<fabric::LinkId> links;
  std::vector<double> weights;
  const Route one[] = {{ab, 1.0, 0}};
  FlowSpec spec;
  spec.routes = one;
  merge_routes(f, spec, scratch, links, weights);
  EXPECT_EQ(links, ab);
  EXPECT_TRUE(weights.empty());
  const Route two[] = {{ab, 1.0, 0}, {ab, 0.5, 1}};
  spec.routes = two;
  spec.reduce_in_switches = true;
  merge_routes(f, spec, scratch, links, weights);
  std::vector<fabric::LinkId> sorted = ab;
  std::ranges::sort(sorted);
  EXPECT_EQ(links, sorted);
  EXPECT_EQ(weights, std::vector<double>(ab.size(), 1.5));
  for (double x : scratch)
    EXPECT_EQ(x, 0.0) << "scratch is left zeroed";
}

}  // namespace
}  // namespace rocesim::network
