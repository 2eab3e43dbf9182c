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

// The ends of flows on disjoint paths, each path a processor of rate C: the n flows present on
// a path each move C / n from the last re-share on. An arrival re-shares every path at once; an
// end re-shares them `delay` after the first end since the last re-share (at once when `delay`
// is 0), the others keeping their shares meanwhile. Flows are (start, bytes, path), starts in
// order; returns the ends. Written event by event, independently of the model.
struct PathFlow {
  double start, bytes;
  size_t path;
};
std::vector<double> processor_sharing_ends(const std::vector<PathFlow>& flows, double c,
                                           double delay = 0) {
  std::vector<double> left, share(flows.size(), 0), end(flows.size(), -1);
  for (const PathFlow& x : flows)
    left.push_back(x.bytes);
  double now = 0, reshare_at = 1e300;
  size_t arrived = 0;
  const auto reshare = [&] {
    std::vector<size_t> n;
    for (size_t i = 0; i < arrived; ++i) {
      if (flows[i].path >= n.size()) n.resize(flows[i].path + 1, 0);
      n[flows[i].path] += end[i] < 0 ? 1 : 0;
    }
    for (size_t i = 0; i < arrived; ++i)
      share[i] = end[i] < 0 ? c / static_cast<double>(n[flows[i].path]) : 0;
    reshare_at = 1e300;
  };
  for (;;) {
    double dt = reshare_at - now;
    if (arrived < flows.size()) dt = std::min(dt, flows[arrived].start - now);
    bool active = false;
    for (size_t i = 0; i < arrived; ++i) {
      if (end[i] >= 0) continue;
      active = true;
      dt = std::min(dt, left[i] / share[i]);
    }
    if (!active && arrived == flows.size()) return end;
    now += dt;
    bool ended = false;
    for (size_t i = 0; i < arrived; ++i) {
      if (end[i] >= 0) continue;
      left[i] -= dt * share[i];
      if (left[i] <= 1e-6) {
        end[i] = now;
        ended = true;
      }
    }
    bool started = false;
    while (arrived < flows.size() && flows[arrived].start <= now) {
      ++arrived;
      started = true;
    }
    if (ended && reshare_at == 1e300) reshare_at = now + delay;
    if (started || now >= reshare_at) reshare();
  }
}

// Four disjoint paths (0->1, 1->0, 2->3, 3->2), each a processor shared at C: 100 flows on
// each, arriving at random within 2 ms with sizes from 0.1 to 10 MB (log-uniform). Every
// arrival slows the flows of its path and every end speeds them up, so their predicted ends
// move earlier and later past those of the other paths, hundreds of durations at once: the
// lanes overflow and the end-time heap re-keys its entries both ways. Each flow must end when
// processor sharing on its path says (processor_sharing_ends, with the same re-share delay,
// one timer for the whole fabric as the model's), to 1 ns (each predicted end is rounded up to the
// picosecond), one end at a time.
void expect_processor_sharing_on_random_paths(Time reshare_delay) {
  const fabric::Fabric f = test::fabric_from_yaml(kTwoHosts);
  MaxMinNetwork net(f, 1, reshare_delay);
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
  std::vector<PathFlow> flows;  // in start order
  for (const Arrival& a : arrivals)
    flows.push_back({Time::ps(a.at_ps).in_seconds(), a.bytes, a.path});
  const std::vector<double> expected =
      processor_sharing_ends(flows, kRate, reshare_delay.in_seconds());

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
    // A re-share due ends nothing; else one flow ends (no two ends coincide here).
    ASSERT_EQ(done.size(), reshare_delay == Time::zero() ? 1u : std::min<size_t>(done.size(), 1))
        << "at " << end.in_seconds() << " s";
    for (const Completion& c : done) {
      const size_t i = owner[c.flow];
      EXPECT_NEAR(end.in_seconds(), expected[i], 1e-9)
          << "flow " << i << " on path " << flows[i].path;
      ++ended;
    }
    net.commit(end);
  }
  EXPECT_EQ(net.next_event(), Time::infinity());
}

TEST(MaxMinNetwork, EndsAsProcessorSharingOnEachPathWhateverTheirOrder) {
  expect_processor_sharing_on_random_paths(Time::zero());
}

TEST(MaxMinNetwork, EndsAsProcessorSharingWithADelayedReshare) {
  // The same with the bandwidth of ending flows re-shared 5 us after the first of them ends on
  // any path (an arrival anywhere re-shares every path at once): the model's deferred solves
  // against the same account.
  expect_processor_sharing_on_random_paths(Time::us(5));
}

TEST(MaxMinNetwork, EndsReshareAfterTheDelayAndStartsAtOnce) {
  // One path of rate C, delay d = 10 us; S = 8 MB, so every phase below lasts longer than d.
  // A (S) and B (2S) start at 0 and share C: A ends at 2S/C, when B has S left. B keeps C/2
  // until the re-share at 2S/C + d (it moves C d / 2 meanwhile), then has C:
  //   B ends at 2S/C + d + (S - C d / 2) / C = 3S/C + d/2        (exact max-min: 3S/C).
  // Then D (S) starts at 3S/C + d/2 + d/4, alone at C at once (a start re-shares): it ends at
  // 4S/C + 3d/4. Solves: the two starts, the re-share, and the ends of B and D, which leave no
  // flow to re-share to (no delay then): 5.
  const fabric::Fabric f = test::fabric_from_yaml(kTwoHosts);
  const Time d = Time::us(10);
  MaxMinNetwork net(f, 1, d);
  const double s = 8e6, c = kRate, ds = d.in_seconds();
  const std::vector<fabric::LinkId> p = path(f, 0, 1);
  std::vector<Completion> done;
  const FlowHandle a = start(net, p, s, Time::zero());
  const FlowHandle b = start(net, p, 2 * s, Time::zero());
  net.commit(Time::zero());
  const Time end_a = net.next_event();
  EXPECT_NEAR(end_a.in_seconds(), 2 * s / c, 1e-11);
  net.advance(end_a, done);
  ASSERT_EQ(handles(done), std::vector<FlowHandle>{a});
  net.commit(end_a);
  EXPECT_NEAR(net.rate(b), c / 2, 1e-9 * c) << "B keeps its share until the re-share";
  const Time reshare = net.next_event();
  EXPECT_EQ(reshare, end_a + d);
  net.advance(reshare, done);
  EXPECT_TRUE(done.empty());
  net.commit(reshare);
  EXPECT_NEAR(net.rate(b), c, 1e-6 * c);
  const Time end_b = net.next_event();
  EXPECT_NEAR(end_b.in_seconds(), 3 * s / c + ds / 2, 1e-11);
  net.advance(end_b, done);
  ASSERT_EQ(handles(done), std::vector<FlowHandle>{b});
  net.commit(end_b);
  const Time t_d = end_b + Time::us(2.5);
  ASSERT_LT(t_d, net.next_event());
  start(net, p, s, t_d);
  net.commit(t_d);
  const Time end_d = net.next_event();
  EXPECT_NEAR(end_d.in_seconds(), 4 * s / c + 0.75 * ds, 1e-11);
  net.advance(end_d, done);
  EXPECT_EQ(done.size(), 1u);
  net.commit(end_d);
  EXPECT_EQ(net.next_event(), Time::infinity()) << "nothing left to re-share";
  EXPECT_EQ(net.solver().stats().solves, 5u);
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
