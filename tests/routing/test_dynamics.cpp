// Routing that changes during a run and the schemes beyond hashing: path pinning by destination
// slice (whole racks, partial racks, after a failure), links that go down, come back and change
// speed (capacities in the network model, reconvergence, flows moved), and the errors of the
// `events:` list. Each expectation is derived in the comment above its check.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "sim/fabric/roce.hpp"
#include "sim/routing/pinned.hpp"
#include "sim/scenario/calibration.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::routing {
namespace {

using fabric::Fabric;
using fabric::LinkId;
using fabric::NodeId;

/// `racks` racks of `hosts` one-GPU servers at 400G, each leaf with `hosts` 400G uplinks to
/// `hosts` spines (1:1).
std::string clos(int racks, int hosts) {
  return fmt::format(R"(type: clos
racks: {0}
nodes_per_rack: {1}
node: {{gpus: 1, nic_speed: 400Gbps}}
leaf: {{uplinks: {1}, uplink_speed: 400Gbps}}
spine: {{count: {1}}}
)",
                     racks, hosts);
}

/// Links every routing view says are up, except `down`.
class Down final : public LinkView {
 public:
  explicit Down(std::vector<LinkId> down) : down_(std::move(down)) {}
  bool up(LinkId l) const override {
    return std::find(down_.begin(), down_.end(), l) == down_.end();
  }
  double capacity(LinkId) const override { return 0; }
  double load(LinkId) const override { return 0; }
  Time now() const override { return Time::zero(); }

 private:
  std::vector<LinkId> down_;
};

/// Flows per leaf->spine link when GPU src[i] sends to GPU dst[i].
std::map<LinkId, int> uplink_flows(const Fabric& f, Router& r, const std::vector<int>& src,
                                   const std::vector<int>& dst) {
  std::map<LinkId, int> count;
  fabric::QpAllocator qa(f, 1, fabric::SourcePortPolicy::Linux);
  std::vector<LinkId> path;
  for (size_t i = 0; i < src.size(); ++i) {
    const NodeId a = f.gpu(static_cast<uint32_t>(src[i]));
    const NodeId b = f.gpu(static_cast<uint32_t>(dst[i]));
    const NodeId na = f.nic_of_gpu(a), nb = f.nic_of_gpu(b);
    EXPECT_TRUE(r.route(RouteRequest{a, b, qa.key(f, na, nb, qa.open(na, nb)), {}}, path));
    for (const LinkId l : path) {
      if (f.node(f.link(l).src).role == fabric::SwitchRole::Leaf &&
          f.node(f.link(l).dst).role == fabric::SwitchRole::Spine) {
        ++count[l];
      }
    }
  }
  return count;
}

int most(const std::map<LinkId, int>& m) {
  int x = 0;
  for (const auto& [l, n] : m)
    x = std::max(x, n);
  return x;
}

TEST(Pinned, WholeRacksMakeEveryPermutationCollisionFree) {
  // 2 racks of 8 hosts, 8 uplinks per leaf. Rack 0 sends to rack 1 by a permutation pi and rack
  // 1 to rack 0 by another. Destinations of one leaf's flows have distinct slices pi(i), so
  // their uplinks slice mod 8 are distinct: 8 flows on 8 uplinks of each leaf, one each (max-mean
  // ratio 1.0). ECMP hashing the same flows collides on some seed (balls into bins: the chance
  // of no collision is 8!/8^8 = 0.24% per leaf).
  const Fabric f = test::fabric_from_yaml(clos(2, 8));
  const auto pinned = test::router_from_yaml(f, "{scheme: pinned}");
  const std::vector<int> pi = {3, 6, 0, 7, 1, 4, 2, 5};
  std::vector<int> src, dst;
  for (int i = 0; i < 8; ++i) {
    src.push_back(i);
    dst.push_back(8 + pi[static_cast<size_t>(i)]);
    src.push_back(8 + i);
    dst.push_back(pi[static_cast<size_t>(7 - i)]);
  }
  const auto count = uplink_flows(f, *pinned, src, dst);
  EXPECT_EQ(count.size(), 16u);  // every uplink of both leaves, once
  EXPECT_EQ(most(count), 1);
  int worst_ecmp = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const auto ecmp = test::router_from_yaml(f, "{scheme: ecmp}", seed);
    worst_ecmp = std::max(worst_ecmp, most(uplink_flows(f, *ecmp, src, dst)));
  }
  EXPECT_GE(worst_ecmp, 2);
}

TEST(Pinned, TheTiersCountIdleLinksInTheMmrButNotInTheBusyMmr) {
  // Rack 0's 8 hosts send to rack 1's by a permutation, pinned: one QP on each of leaf 0's 8
  // uplinks, none on leaf 1's. Over the 16 leaf->spine links, mean 0.5 QP and max 1: MMR 2.0;
  // over the 8 busy ones MMR 1.0. Utilisation: 8 links at u, 8 at 0, so the median is u / 2
  // (between the 8th and 9th order statistics) and the 99th percentile u.
  std::string flows;
  const int pi[] = {3, 6, 0, 7, 1, 4, 2, 5};
  for (int i = 0; i < 8; ++i)
    flows += fmt::format("{{src: {}, dst: {}, bytes: 10MB}}, ", i, 8 + pi[i]);
  const auto run = test::scenario_from_yaml(fmt::format(R"(topology:
  type: clos
  racks: 2
  nodes_per_rack: 8
  node: {{gpus: 1, nic_speed: 400Gbps}}
  leaf: {{uplinks: 8, uplink_speed: 400Gbps}}
  spine: {{count: 8}}
routing: {{scheme: pinned}}
workloads:
  - {{type: flows, flows: [{}]}}
)",
                                                        flows));
  run->run();
  for (const metrics::TierResult& t : run->recorder->tiers()) {
    if (t.link_class != "leaf->spine") continue;
    EXPECT_EQ(t.links, 16u);
    EXPECT_EQ(t.busy_links, 8u);
    EXPECT_DOUBLE_EQ(t.mmr, 2.0);
    EXPECT_DOUBLE_EQ(t.busy_mmr, 1.0);
    EXPECT_NEAR(t.p50_utilization, t.max_utilization / 2, 1e-12);
    EXPECT_NEAR(t.p99_utilization, t.max_utilization, 1e-12);
  }
}

TEST(Pinned, PartialRacksCollide) {
  // Three racks of 4; the job has hosts 0 and 1 of rack 0 and host 0 of racks 1 and 2. Both
  // destinations are slice 0, so both flows leave leaf 0 on its uplink 0: 2 flows on one link,
  // where whole racks would give one per uplink.
  const Fabric f = test::fabric_from_yaml(clos(3, 4));
  const auto pinned = test::router_from_yaml(f, "{scheme: pinned}");
  const auto count = uplink_flows(f, *pinned, {0, 1}, {4, 8});
  ASSERT_EQ(count.size(), 1u);
  EXPECT_EQ(count.begin()->second, 2);
  EXPECT_EQ(f.node(f.link(count.begin()->first).dst).name, "spine0");
}

TEST(Pinned, AFailedUplinkFoldsTwoSlicesOntoOneLink) {
  // 4 uplinks; uplink 3 of leaf 0 down. The group toward leaf 1 has 3 members, so slices 0 and 3
  // both take member 0 (3 mod 3 = 0): the flows to hosts 0 and 3 of rack 1 share a link.
  const Fabric f = test::fabric_from_yaml(clos(2, 4));
  auto pinned = test::router_from_yaml(f, "{scheme: pinned}");
  const NodeId leaf0 = f.find("leaf0"), spine3 = f.find("spine3");
  std::vector<LinkId> cut;
  for (const LinkId l : f.out_links(leaf0)) {
    if (f.link(l).dst == spine3) cut = {l, f.link(l).reverse};
  }
  ASSERT_EQ(cut.size(), 2u);
  const Down view(cut);
  pinned->attach(&view);
  const auto count = uplink_flows(f, *pinned, {0, 1, 2, 3}, {4, 5, 6, 7});
  EXPECT_EQ(count.size(), 3u);
  EXPECT_EQ(most(count), 2);
  EXPECT_EQ(count.count(cut[0]), 0u);
}

TEST(Routing, NoPathWhenTheDestinationsCableIsDown) {
  const Fabric f = test::fabric_from_yaml(clos(2, 2));
  auto ecmp = test::router_from_yaml(f, "{}");
  const NodeId nic = f.find("node2/nic0"), leaf1 = f.find("leaf1");
  std::vector<LinkId> cut;
  for (const LinkId l : f.out_links(leaf1)) {
    if (f.link(l).dst == nic) cut = {l, f.link(l).reverse};
  }
  const Down view(cut);
  ecmp->attach(&view);
  std::vector<LinkId> path;
  EXPECT_FALSE(ecmp->route(RouteRequest{f.gpu(0), f.gpu(2), {}, {}}, path));
  EXPECT_TRUE(ecmp->route(RouteRequest{f.gpu(0), f.gpu(3), {}, {}}, path));
}

// ---- flowlets ----

/// Every link up with its nominal capacity; given loads (bytes/s) on some.
class Loads final : public LinkView {
 public:
  Loads(const Fabric& f, std::map<LinkId, double> load) : f_(f), load_(std::move(load)) {}
  bool up(LinkId) const override { return true; }
  double capacity(LinkId l) const override { return f_.link(l).capacity.bytes_per_second(); }
  double load(LinkId l) const override {
    const auto it = load_.find(l);
    return it == load_.end() ? 0 : it->second;
  }
  Time now() const override { return now_; }
  void set(LinkId l, double load) { load_[l] = load; }
  Time now_ = Time::zero();

 private:
  const Fabric& f_;
  std::map<LinkId, double> load_;
};

TEST(Flowlet, TakesTheLeastLoadedUplinkAndSpreadsTheBurstsOfOneInstant) {
  // Leaf 0's 4 uplinks carry 0.9, 0.5, 0.2 and 0.6 of their capacity C. A burst from host 0
  // takes uplink 2 (0.2 C) and adds its NIC's rate C there: 1.2 C. The next burst of the same
  // instant, from host 1, sees 0.9, 0.5, 1.2, 0.6 and takes uplink 1. At a later instant the
  // placements are forgotten (the network model's loads include them by then): uplink 2 again.
  const Fabric f = test::fabric_from_yaml(clos(2, 4));
  std::vector<LinkId> up;
  for (const LinkId l : f.out_links(f.find("leaf0"))) {
    if (f.node(f.link(l).dst).role == fabric::SwitchRole::Spine) up.push_back(l);
  }
  ASSERT_EQ(up.size(), 4u);
  const double C = f.link(up[0]).capacity.bytes_per_second();
  Loads view(f, {{up[0], 0.9 * C}, {up[1], 0.5 * C}, {up[2], 0.2 * C}, {up[3], 0.6 * C}});
  auto router = test::router_from_yaml(f, "{scheme: flowlet}");
  router->attach(&view);
  std::vector<LinkId> path;
  auto uplink = [&](int src, int dst) {
    EXPECT_TRUE(router->route(
        RouteRequest{f.gpu(static_cast<uint32_t>(src)), f.gpu(static_cast<uint32_t>(dst)), {}, {}},
        path));
    return path[2];  // GPU->NIC, NIC->leaf, then the uplink
  };
  EXPECT_EQ(uplink(0, 4), up[2]);
  EXPECT_EQ(uplink(1, 5), up[1]);
  view.now_ = Time::us(1);
  EXPECT_EQ(uplink(2, 6), up[2]);
}

/// 2 racks of 8 one-GPU hosts, 8 uplinks; host i of rack 0 sends 10 MB to host pi(i) of rack
/// 1 at 0 and again at `again`; routing as given.
std::string two_waves(const std::string& routing, const std::string& again = "1ms") {
  std::string flows;
  const int pi[] = {3, 6, 0, 7, 1, 4, 2, 5};
  for (int i = 0; i < 8; ++i) {
    flows += fmt::format(
        "{{src: {0}, dst: {1}, bytes: 10MB}}, {{src: {0}, dst: {1}, bytes: 10MB, "
        "start: {2}}}, ",
        i, 8 + pi[i], again);
  }
  return fmt::format(R"(topology:
  type: clos
  racks: 2
  nodes_per_rack: 8
  node: {{gpus: 1, nic_speed: 400Gbps}}
  leaf: {{uplinks: 8, uplink_speed: 400Gbps}}
  spine: {{count: 8}}
routing: {}
workloads:
  - {{type: flows, flows: [{}]}}
)",
                     routing, flows);
}

TEST(Flowlet, ALoadAwareFirstChoiceSpreadsABurstOfFlowsOverTheUplinks) {
  // Eight 10 MB flows leave leaf 0 at once. Each first choice sees the uplinks the earlier ones
  // of the instant took: one flow per uplink (busy MMR 1.0), each at the payload rate C, so the
  // first wave ends at B / C plus the path latency L, where ECMP's collisions (seed 2 here)
  // make the busiest uplink carry 2 or more flows and the wave take at least twice as long.
  const auto flowlet = test::scenario_from_yaml(two_waves("{scheme: flowlet}"), 2);
  flowlet->run();
  const auto ecmp = test::scenario_from_yaml(two_waves("{scheme: ecmp}"), 2);
  ecmp->run();
  const double C = test::roce_payload(400e9), B = 10e6;
  double first_wave_flowlet = 0, first_wave_ecmp = 0;
  for (const engine::FlowRecord& r : flowlet->recorder->flows()) {
    if (r.start == Time::zero())
      first_wave_flowlet = std::max(first_wave_flowlet, (r.delivered - r.start).in_us());
  }
  for (const engine::FlowRecord& r : ecmp->recorder->flows()) {
    if (r.start == Time::zero())
      first_wave_ecmp = std::max(first_wave_ecmp, (r.delivered - r.start).in_us());
  }
  const double L =
      1e6 * (flowlet->sim->paths().latency(flowlet->recorder->flows()[0].path)).in_seconds();
  EXPECT_NEAR(first_wave_flowlet, B / C * 1e6 + L, 0.01);
  EXPECT_GT(first_wave_ecmp, 1.9 * B / C * 1e6);
  for (const metrics::TierResult& t : flowlet->recorder->tiers()) {
    if (t.link_class == "leaf->spine") {
      EXPECT_DOUBLE_EQ(t.busy_mmr, 1.0);
    }
  }
}

TEST(Flowlet, OnlyGapsLongerThanTheTimeoutMakeNewFlowlets) {
  // Each connection is idle from about B / C = 204 us until its second flow at 1 ms: a gap of
  // about 0.8 ms. With a 100 us timeout the 8 second flows are new flowlets, routed again (all
  // uplinks idle then, so each again gets one to itself and the second wave also takes B / C);
  // with a 1 s timeout (longer than every gap) none is, and the paths stay the first choices.
  // Equal path delays and no queues: a move never reorders.
  const auto short_timeout = test::scenario_from_yaml(two_waves("{scheme: flowlet}"));
  short_timeout->run();
  EXPECT_EQ(short_timeout->sim->flowlets(), 8u);
  EXPECT_EQ(short_timeout->sim->flowlet_reorders(), 0u);
  const auto long_timeout =
      test::scenario_from_yaml(two_waves("{scheme: flowlet, flowlet_timeout: 1s}"));
  long_timeout->run();
  EXPECT_EQ(long_timeout->sim->flowlets(), 0u);
  EXPECT_EQ(long_timeout->sim->flowlet_moves(), 0u);
  const double C = test::roce_payload(400e9), B = 10e6;
  for (const auto* run : {short_timeout.get(), long_timeout.get()}) {
    for (const engine::FlowRecord& r : run->recorder->flows()) {
      EXPECT_NEAR((r.bandwidth_end - r.start).in_us(), B / C * 1e6, 0.01);
    }
  }
}

// ---- link events in a run ----

/// 2 racks of 2 one-GPU hosts, 2 spines, every port 400G; pinned routing (host i of rack 0 to
/// host i of rack 1 over spine i), two flows of `bytes` and the given events and network.
std::string two_flows(const std::string& events, const std::string& network = "{}",
                      const std::string& bytes = "100MB") {
  return fmt::format(R"(name: failure
topology:
  type: clos
  racks: 2
  nodes_per_rack: 2
  node: {{gpus: 1, nic_speed: 400Gbps}}
  leaf: {{uplinks: 2, uplink_speed: 400Gbps}}
  spine: {{count: 2}}
routing: {{scheme: pinned, reconvergence: 100us}}
network: {0}
workloads:
  - {{name: a, type: flows, flows: [{{src: 0, dst: 2, bytes: {1}}}]}}
  - {{name: b, type: flows, flows: [{{src: 1, dst: 3, bytes: {1}}}]}}
{2}
)",
                     network, bytes, events);
}

double end_us(const scenario::ScenarioRun& run, size_t w) {
  return run.sim->workloads()[w].end.in_us();
}

TEST(LinkEvents, ALinkDownStallsItsFlowThenMovesItAfterReconvergence) {
  // C = payload rate of a 400G port, B = 100 MB per flow, t0 = 50 us, R = 100 us. Flow a rides
  // spine 0, flow b spine 1 (pinned), each at C. leaf0-spine1 goes down at t0: b stalls (rate 0)
  // until t0 + R, when routing moves it to spine 0, where a and b share C. With
  //   r_a = B - C (t0 + R)   (a's bytes left then),   r_b = B - C t0,
  // a ends at t0 + R + 2 r_a / C; b has r_b - r_a = C R left and, alone, ends R later.
  // Delivery adds the path latency L (same for both).
  const auto base = test::scenario_from_yaml(two_flows(""));
  base->run();
  const auto run = test::scenario_from_yaml(
      two_flows("events:\n  - {at: 50us, action: down, link: [leaf0, spine1]}"));
  run->run();
  const double C = test::roce_payload(400e9);
  const double B = 100e6, t0 = 50e-6, R = 100e-6;
  const double alone = B / C;  // without the failure: both at C
  const double L = end_us(*base, 0) - alone * 1e6;
  ASSERT_NEAR(end_us(*base, 1), end_us(*base, 0), 1e-3);
  const double ra = B - C * (t0 + R);
  const double a_end = t0 + R + 2 * ra / C;
  EXPECT_NEAR(end_us(*run, 0), a_end * 1e6 + L, 0.01);
  EXPECT_NEAR(end_us(*run, 1), (a_end + R) * 1e6 + L, 0.01);

  const auto events = run->sim->link_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].what, "down leaf0-spine1");
  EXPECT_EQ(events[0].links.size(), 2u);  // both directions of the cable
  EXPECT_NEAR(events[0].converged.in_us(), (t0 + R) * 1e6, 1e-6);
  EXPECT_EQ(events[0].flows_rerouted, 1u);
  EXPECT_EQ(events[0].qps_rerouted, 1u);
  EXPECT_EQ(events[0].qps_unroutable, 0u);

  // Bytes count on the links that carried them: b's first C t0 on leaf0->spine1, its rest and
  // all of a on leaf0->spine0 (to a byte of rounding).
  const fabric::Fabric& f = run->fabric;
  for (const LinkId l : f.out_links(f.find("leaf0"))) {
    const std::string to = f.node(f.link(l).dst).name;
    const double bytes = static_cast<double>(run->recorder->links()[l].bytes);
    if (to == "spine1") {
      EXPECT_NEAR(bytes, C * t0, 2.0);
    } else if (to == "spine0") {
      EXPECT_NEAR(bytes, 2 * B - C * t0, 2.0);
    }
  }
}

TEST(LinkEvents, ASlowerLinkSlowsItsFlowFromThatInstant) {
  // Flow b's uplink runs at 200G from t0 = 50 us: b moves C t0, then the rest at C / 2:
  // end = t0 + 2 (B - C t0) / C. Routing does not change (a speed is not a failure).
  const auto base = test::scenario_from_yaml(two_flows(""));
  base->run();
  const auto run = test::scenario_from_yaml(
      two_flows("events:\n  - {at: 50us, action: speed, speed: 200Gbps, link: [leaf0, spine1]}"));
  run->run();
  const double C = test::roce_payload(400e9);
  const double B = 100e6, t0 = 50e-6;
  const double L = end_us(*base, 1) - B / C * 1e6;
  EXPECT_NEAR(end_us(*run, 0), end_us(*base, 0), 1e-6);
  EXPECT_NEAR(end_us(*run, 1), (t0 + 2 * (B - C * t0) / C) * 1e6 + L, 0.01);
  EXPECT_EQ(run->sim->link_events()[0].qps_rerouted, 0u);
}

TEST(LinkEvents, ALinkThatComesBackBeforeReconvergenceOnlyPausesItsFlow) {
  // Down at 50 us, up at 80 us (a flap shorter than R = 100 us): b stalls 30 us and resumes on
  // its own path; routing, converging at 150 and 180 us on a fabric that is whole again, moves
  // nothing. b ends 30 us after a.
  const auto run = test::scenario_from_yaml(two_flows(
      "events:\n  - {at: 50us, action: flap, link: [leaf0, spine1], period: 60us, down_for: "
      "30us}"));
  run->run();
  EXPECT_NEAR(end_us(*run, 1) - end_us(*run, 0), 30, 1e-3);
  for (const engine::LinkEvent& e : run->sim->link_events())
    EXPECT_EQ(e.flows_rerouted, 0u) << e.what;
  EXPECT_EQ(run->sim->link_events().size(), 2u);
}

TEST(LinkEvents, LaterEventsDoNotExtendTheRun) {
  const auto run =
      test::scenario_from_yaml(two_flows("events:\n  - {at: 1s, action: down, switch: spine0}"));
  run->run();
  EXPECT_EQ(run->sim->end_time(), run->sim->workloads()[1].end);
  EXPECT_FALSE(run->sim->link_events()[0].applied);
}

TEST(LinkEvents, TheFluidModelDropsAtADownLinkAndMovesFlowsToo) {
  // The same failure in the fluid model. A link that is down drops what reaches it (the sender
  // sends it again later): no queue builds there, so nothing is paused and nothing marked
  // upstream of it, and b, stalled, makes no progress until it moves. After the move a and b
  // share one uplink under DCQCN, so both end later than without the failure, b last.
  const std::string ev = "events:\n  - {at: 50us, action: down, link: [leaf0, spine1]}";
  const auto whole = test::scenario_from_yaml(two_flows("", "{model: fluid}"));
  whole->run();
  const auto fluid = test::scenario_from_yaml(two_flows(ev, "{model: fluid}"));
  fluid->run();
  EXPECT_EQ(fluid->sim->link_events()[0].flows_rerouted, 1u);
  EXPECT_GT(end_us(*fluid, 0), end_us(*whole, 0));
  EXPECT_GT(end_us(*fluid, 1), end_us(*fluid, 0));
  // b's NIC, seeing no mark, sends at its line rate C into the dead link for R = 100 us: the
  // leaf->spine tier drops C R bytes; had the link held them instead, its queue would have
  // reached XOFF within microseconds and paused leaf 0's ingress from b's NIC.
  const double C = test::roce_payload(400e9), R = 100e-6;
  const auto tiers = fluid->recorder->congestion().tiers();
  const auto& classes = fluid->fabric.link_classes();
  bool seen = false;
  for (size_t c = 0; c < tiers.size(); ++c) {
    if (classes[c] == "leaf->spine") {
      seen = true;
      EXPECT_NEAR(tiers[c].drops / (C * R), 1.0, 0.02);
    }
    if (classes[c] == "nic->leaf") {
      EXPECT_EQ(tiers[c].pauses, 0u);
    }
  }
  EXPECT_TRUE(seen);
}

TEST(LinkEvents, AFabricCutForGoodIsALocatedError) {
  // The receiving NIC's cable goes down and never comes back: no path, the flow waits forever.
  const std::string yaml =
      two_flows("events:\n  - {at: 10us, action: down, link: [leaf1, node3/nic0]}");
  const InputError e = test::input_error([&] { test::scenario_from_yaml(yaml)->run(); });
  EXPECT_TRUE(test::contains(e.what(), "expected events after which traffic can finish"))
      << e.what();
  EXPECT_TRUE(test::contains(e.what(), "down leaf1-node3/nic0")) << e.what();
  EXPECT_EQ(e.key(), "events[0].action");
  EXPECT_EQ(e.where().line, 15);
}

TEST(LinkEvents, BadEventsAreLocatedErrors) {
  struct Case {
    std::string event, key, expected;
  };
  const Case cases[] = {
      {"{at: 1us, action: down, link: [leaf0, spine1], switch: spine0}", "switch",
       "exactly one of 'link' and 'switch'"},
      {"{at: 1us, action: down}", "link", "exactly one of 'link' and 'switch'"},
      {"{at: 1us, action: down, link: [leaf0, leaf1]}", "link", "two nodes joined by a cable"},
      {"{at: 1us, action: down, link: [leaf0, node0/gpu0]}", "link[1]",
       "the name of a fabric switch or a NIC"},
      // A name the fabric does not have: the nearest it has (within two edits), or one that
      // ends the same after a '/' (a NIC's "node1/nic0" for "nic0").
      {"{at: 1us, action: down, link: [leaf0, spine7]}", "link[1]",
       "found 'spine7', which is not one (did you mean 'spine0'?)"},
      {"{at: 1us, action: down, link: [leaf0, nic0]}", "link[1]",
       "which is not one (did you mean 'node0/nic0'?)"},
      {"{at: 1us, action: down, switch: leaf7}", "switch",
       "found 'leaf7', which is not a fabric switch (did you mean 'leaf0'?)"},
      {"{at: 1us, action: speed, speed: 800Gbps, link: [leaf0, spine1]}", "speed",
       "at most the links' nominal rate"},
      {"{at: 1us, action: down, speed: 100Gbps, link: [leaf0, spine1]}", "speed",
       "no such key unless action is speed"},
      {"{at: 1us, action: flap, link: [leaf0, spine1], period: 10us, down_for: 10us}", "down_for",
       "less than the period"},
      {"{at: 1us, action: reboot, link: [leaf0, spine1]}", "action", "one of"},
  };
  for (const Case& c : cases) {
    const InputError e = test::input_error(
        [&] { (void)test::scenario_from_yaml(two_flows("events:\n  - " + c.event)); });
    EXPECT_TRUE(test::contains(e.key(), "events[0]." + c.key)) << c.event << ": " << e.key();
    EXPECT_TRUE(test::contains(e.what(), c.expected)) << c.event << ": " << e.what();
    EXPECT_EQ(e.where().line, 15) << c.event;
  }
}

// ---- traffic engineering ----

TEST(Te, PlacingEachQpAsItAsksReachesTheMaxMinOptimumOfATrafficMatrixThatFits) {
  // period 0: each of the 8 QPs leaving leaf 0 at once is placed on the uplink with the widest
  // residual, i.e. one not yet used: one flow per uplink, each at C, the wave ends at B / C + L
  // (to 0.01 us), the max-min optimum of this fabric for this matrix.
  const auto te = test::scenario_from_yaml(two_waves("{scheme: te, period: 0s}"), 2);
  te->run();
  const double C = test::roce_payload(400e9), B = 10e6;
  for (const engine::FlowRecord& r : te->recorder->flows()) {
    const double L = te->sim->paths().latency(r.path).in_us();
    EXPECT_NEAR((r.delivered - r.start).in_us(), B / C * 1e6 + L, 0.01);
  }
  EXPECT_EQ(te->sim->recomputations(), 0u);
}

TEST(Te, APeriodicComputationMovesTheQpsThatEcmpCollided) {
  // period T = 100 us: until T the new QPs take ECMP's paths (seed 2: k flows on the busiest
  // uplink, each at C / k there, and on the one link down from its spine); at T the controller
  // spreads them, one per uplink, each at C from then on. The last flow ends at
  // T + (B - T C / k) / C, before ECMP alone (k B / C).
  const auto ecmp = test::scenario_from_yaml(two_waves("{scheme: ecmp}"), 2);
  ecmp->run();
  uint32_t k = 0;
  for (const metrics::TierResult& t : ecmp->recorder->tiers()) {
    if (t.link_class == "leaf->spine") k = t.max_qps;
  }
  ASSERT_GE(k, 2u);
  const auto te = test::scenario_from_yaml(two_waves("{scheme: te, period: 100us}"), 2);
  te->run();
  const double C = test::roce_payload(400e9), B = 10e6, T = 100e-6;
  double last = 0;
  for (const engine::FlowRecord& r : te->recorder->flows()) {
    if (r.start == Time::zero()) last = std::max(last, r.bandwidth_end.in_seconds());
  }
  EXPECT_NEAR(last * 1e6, (T + (B - T * C / k) / C) * 1e6, 0.01);
  EXPECT_GE(te->sim->recomputations(), 1u);
  EXPECT_GE(te->sim->recompute_qps(), 1u);
}

TEST(Te, AProgrammedPathThatFailsFallsBackToEcmp) {
  // The controller puts a and b on the two spines (period 0). When leaf0-spine1 goes down at
  // t0, b stalls until routing converges at t0 + R; its programmed path is down, so it takes the
  // ECMP route (spine 0, the only one left) and shares it with a: the closed form of the
  // pinned case, a at t0 + R + 2 r_a / C and b R later.
  auto yaml = two_flows("events:\n  - {at: 50us, action: down, link: [leaf0, spine1]}");
  const std::string pinned = "{scheme: pinned, reconvergence: 100us}";
  yaml.replace(yaml.find(pinned), pinned.size(), "{scheme: te, period: 0s, reconvergence: 100us}");
  const auto run = test::scenario_from_yaml(yaml);
  run->run();
  const auto base = test::scenario_from_yaml(two_flows(""));
  base->run();
  const double C = test::roce_payload(400e9);
  const double B = 100e6, t0 = 50e-6, R = 100e-6;
  const double L = end_us(*base, 0) - B / C * 1e6;
  const double a_end = t0 + R + 2 * (B - C * (t0 + R)) / C;
  EXPECT_NEAR(end_us(*run, 0), a_end * 1e6 + L, 0.01);
  EXPECT_NEAR(end_us(*run, 1), (a_end + R) * 1e6 + L, 0.01);
  EXPECT_EQ(run->sim->link_events()[0].flows_rerouted, 1u);
}

// ---- adaptive routing (packet spraying) ----

TEST(Adaptive, SpreadsAQpOverEveryPathByTheSpareCapacityOfEachHop) {
  // 4 uplinks (one per spine, one link down from each spine): 4 paths. Idle, each gets 1/4.
  // With uplinks at 0, 0.5, 0.9 and 0.97 of their capacity C, the spares are C, 0.5 C, 0.1 C
  // and 0.05 C (min_spare: 0.03 C is below it): shares 1/1.65, 0.5/1.65, 0.1/1.65, 0.05/1.65.
  const Fabric f = test::fabric_from_yaml(clos(2, 4));
  auto router = test::router_from_yaml(f, "{scheme: adaptive}");
  std::vector<LinkId> up;
  for (const LinkId l : f.out_links(f.find("leaf0"))) {
    if (f.node(f.link(l).dst).role == fabric::SwitchRole::Spine) up.push_back(l);
  }
  ASSERT_EQ(up.size(), 4u);
  const RouteRequest req{f.gpu(0), f.gpu(5), {}, {}};
  Spread s;
  ASSERT_TRUE(router->spread(req, s));
  ASSERT_EQ(s.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_DOUBLE_EQ(s.share[i], 0.25);
  const double C = f.link(up[0]).capacity.bytes_per_second();
  Loads view(f, {{up[0], 0}, {up[1], 0.5 * C}, {up[2], 0.9 * C}, {up[3], 0.97 * C}});
  router->attach(&view);
  view.now_ = Time::us(1);  // another instant: nothing of the first spread is kept
  ASSERT_TRUE(router->spread(req, s));
  ASSERT_EQ(s.size(), 4u);
  const double expected[] = {1 / 1.65, 0.5 / 1.65, 0.1 / 1.65, 0.05 / 1.65};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(s.path(i)[2], up[i]);  // GPU->NIC, NIC->leaf, the uplink
    EXPECT_NEAR(s.share[i], expected[i], 1e-12);
  }
  // Later the loads have moved, the links have not (the router keeps what it found of the
  // paths between the two leaves): uplink 0 at 0.75 C, the others idle: spares 0.25 C, C, C, C,
  // shares 0.25/3.25, then 1/3.25 each. Within that instant another QP between the two leaves
  // (host 1 to host 4) gets the same, between its own host links.
  // The version of the pair's spread stays while the spread does (another instant, the same
  // loads), and moves with it.
  const uint64_t loaded = router->spread_version(req);
  EXPECT_NE(loaded, routing::Router::kNoVersion);
  view.now_ = Time::us(1.5);
  EXPECT_EQ(router->spread_version(req), loaded);
  view.set(up[0], 0.75 * C);
  view.set(up[1], 0);
  view.set(up[2], 0);
  view.set(up[3], 0);
  view.now_ = Time::us(2);
  EXPECT_NE(router->spread_version(req), loaded);
  for (const RouteRequest& r : {req, RouteRequest{f.gpu(1), f.gpu(4), {}, {}}}) {
    ASSERT_TRUE(router->spread(r, s));
    ASSERT_EQ(s.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(s.path(i)[2], up[i]);
      EXPECT_EQ(f.link(s.path(i).front()).src, r.src);
      EXPECT_EQ(f.link(s.path(i).back()).dst, r.dst);
      EXPECT_NEAR(s.share[i], (i == 0 ? 0.25 : 1.0) / 3.25, 1e-12);
    }
  }
}

TEST(Adaptive, SprayingRemovesTheCollisionsOfHashing) {
  // The eight simultaneous flows of two_waves, each spread over the 8 uplinks: every uplink
  // carries 1/8 of each, C in all, and every flow runs at C: B / C + L to 0.01 us.
  const auto run = test::scenario_from_yaml(two_waves("{scheme: adaptive}"), 2);
  run->run();
  const double C = test::roce_payload(400e9), B = 10e6;
  for (const engine::FlowRecord& r : run->recorder->flows()) {
    const double L = run->sim->paths().latency(r.path).in_us();
    EXPECT_NEAR((r.delivered - r.start).in_us(), B / C * 1e6 + L, 0.01);
  }
}

TEST(Adaptive, ASprayedQpIsSpreadAgainAtEveryBurstAfterAnIdleGap) {
  // two_waves: each of the 8 connections sends at 0 and again at 1 ms, idle in between. Each QP
  // is sprayed over the 8 uplinks, and its second flow is a new burst (flowlet_timeout 0), so
  // all 8 are spread again: 8 flowlets, each to the same union (all uplinks idle then), no
  // move. (A QP counted busy once per sprayed route but idle once per flow was never spread
  // again.)
  const auto run = test::scenario_from_yaml(two_waves("{scheme: adaptive}"));
  run->run();
  EXPECT_EQ(run->sim->flowlets(), 8u);
  EXPECT_EQ(run->sim->flowlet_moves(), 0u);
}

TEST(MultipathNic, SpraysAQpOverItsEntropiesThroughTheSwitchesHash) {
  // One 10 MB flow between the two racks of a fabric whose leaves have 4 uplinks of 100G to 4
  // spines (NICs 400G). With one path per QP it crosses one uplink: B / C + L. A NIC that sprays
  // over 64 entropies (nic_paths, EFA's SRD) sends each UDP source port's 1/64 of the bytes
  // down the path ECMP hashes that port to: uplink i carries m_i / 64 of the flow, m_i the
  // entropies hashed to it (counted here with the same router and the QP's key, one port at a
  // time), so the flow runs at C / max_i(m_i / 64): B max_i(m_i) / (64 C) + L.
  const auto topology = [](int paths) {
    return fmt::format(
        "{{type: clos, racks: 2, nodes_per_rack: 1, node: {{gpus: 1, nic_speed: 400Gbps, "
        "nic_paths: {}}}, leaf: {{uplinks: 4, uplink_speed: 100Gbps}}, spine: {{count: 4}}}}",
        paths);
  };
  const Fabric f = test::fabric_from_yaml(topology(64));
  auto router = test::router_from_yaml(f, "{}", 7);
  fabric::QpAllocator qa(f, 7, fabric::SourcePortPolicy::Linux);  // the run's, seed 7
  const NodeId a = f.gpu(0), b = f.gpu(1);
  const NodeId na = f.nic_of_gpu(a), nb = f.nic_of_gpu(b);
  RouteRequest req{a, b, qa.key(f, na, nb, qa.open(na, nb)), {}};
  const auto uplink = [&](std::span<const LinkId> path) {
    for (const LinkId l : path) {
      if (f.node(f.link(l).dst).role == fabric::SwitchRole::Spine) return l;
    }
    return fabric::kNone;
  };
  std::map<LinkId, int> entropies;
  std::vector<LinkId> path;
  RouteRequest one = req;
  for (int i = 0; i < 64; ++i) {
    one.key.src_port = static_cast<uint16_t>(0xC000 + (req.key.src_port - 0xC000 + i) % 0x4000);
    ASSERT_TRUE(router->route(one, path));
    ++entropies[uplink(path)];
  }
  Spread s, scratch;
  ASSERT_TRUE(spread_over_entropies(*router, req, 64, s, scratch));
  ASSERT_EQ(s.size(), entropies.size());
  double total = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_DOUBLE_EQ(s.share[i], entropies.at(uplink(s.path(i))) / 64.0);
    total += s.share[i];
  }
  EXPECT_DOUBLE_EQ(total, 1.0);
  int most = 0;
  for (const auto& [l, m] : entropies)
    most = std::max(most, m);
  EXPECT_EQ(entropies.size(), 4u);  // every spine
  EXPECT_LT(most, 32);              // so spraying at least halves the time of one path

  const double B = 10e6;
  const auto time = [&](int paths, double* latency_us) {
    const auto run = test::scenario_from_yaml(
        fmt::format("topology: {}\nworkloads:\n  - {{type: flows, flows: [{{src: 0, dst: 1, "
                    "bytes: 10MB}}]}}\n",
                    topology(paths)),
        7);
    run->run();
    const engine::FlowRecord& r = run->recorder->flows().at(0);
    *latency_us = run->sim->paths().latency(r.path).in_us();
    return (r.delivered - r.start).in_us();
  };
  double C = 0;
  for (const LinkId l : f.out_links(f.find("leaf0"))) {
    if (f.node(f.link(l).dst).role == fabric::SwitchRole::Spine) {
      C = f.link(l).capacity.bytes_per_second();
    }
  }
  double l1 = 0, l64 = 0;
  const double t1 = time(1, &l1), t64 = time(64, &l64);
  EXPECT_NEAR(t1, B / C * 1e6 + l1, 0.01);
  EXPECT_NEAR(t64, B * most / (64 * C) * 1e6 + l64, 0.01);
}

TEST(Adaptive, AFailureStallsEverySprayedFlowUntilRoutingConverges) {
  // a and b each spray half their bytes over each spine. When leaf0-spine1 goes down at t0,
  // half of each flow is on a dead link: both stall until t0 + R, then both move wholly to
  // spine 0 and share it: each sent C t0 before, then (B - C t0) at C / 2:
  // end = t0 + R + 2 (B - C t0) / C for both (plus the path latency). The fluid model moves
  // the same flows (2 routes become 1; what the dead route held is sent again) and, with
  // queues and DCQCN on the shared uplink, cannot beat the max-min end.
  const std::string ev = "events:\n  - {at: 50us, action: down, link: [leaf0, spine1]}";
  auto yaml = [&](const std::string& network) {
    std::string y = two_flows(ev, network);
    const std::string pinned = "{scheme: pinned, reconvergence: 100us}";
    return y.replace(y.find(pinned), pinned.size(), "{scheme: adaptive, reconvergence: 100us}");
  };
  const auto run = test::scenario_from_yaml(yaml("{}"));
  run->run();
  const auto base = test::scenario_from_yaml(two_flows(""));
  base->run();
  const double C = test::roce_payload(400e9);
  const double B = 100e6, t0 = 50e-6, R = 100e-6;
  const double L = end_us(*base, 0) - B / C * 1e6;
  const double end = (t0 + R + 2 * (B - C * t0) / C) * 1e6 + L;
  EXPECT_NEAR(end_us(*run, 0), end, 0.01);
  EXPECT_NEAR(end_us(*run, 1), end, 0.01);
  EXPECT_EQ(run->sim->link_events()[0].flows_rerouted, 2u);
  const auto fluid = test::scenario_from_yaml(yaml("{model: fluid}"));
  fluid->run();
  EXPECT_EQ(fluid->sim->link_events()[0].flows_rerouted, 2u);
  EXPECT_GE(end_us(*fluid, 0), 0.99 * end);
  EXPECT_GE(end_us(*fluid, 1), 0.99 * end);
}

// ---- in direction, on the quickstart's AI Zone (128 GPUs, 1:1), seeds 1-3 ----

/// Mean completion (ms) of the quickstart's 64 MiB permutation over seeds 1-3 with `sets`.
double permutation_ms(const std::vector<std::string>& sets) {
  double sum = 0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    scenario::Overrides o;
    o.seed = seed;
    o.parameters.push_back(scenario::parse_override("workloads[allreduce].bytes=1MiB", "test"));
    for (const std::string& s : sets)
      o.parameters.push_back(scenario::parse_override(s, "test"));
    const auto run = scenario::load_scenario(test::source_path("scenarios/quickstart.yaml"), o);
    run->run();
    const engine::WorkloadState& w = run->sim->workloads()[1];
    sum += (w.end - w.start).in_seconds() * 1e3 / 3;
  }
  return sum;
}

TEST(Direction, QpScalingLiftsAHashedPermutation) {
  // Balls into bins: 16 x more QPs spread each connection's bytes over 16 hashes; the busiest
  // uplink's excess shrinks (MODELS.md 3.5), so the permutation ends sooner.
  const double one =
      permutation_ms({"routing.scheme=e-ecmp", "workloads[permutation].qps_per_connection=1"});
  const double sixteen =
      permutation_ms({"routing.scheme=e-ecmp", "workloads[permutation].qps_per_connection=16"});
  EXPECT_LT(sixteen, 0.6 * one) << one << " ms with 1 QP, " << sixteen << " with 16";
}

TEST(Direction, TwiceTheUplinkCapacityRemovesMostOfWhatCollisionsCost) {
  // 1:2 (16 x 800G uplinks for 16 x 400G NICs): two colliding flows fit on one uplink.
  const double full = permutation_ms({"workloads[permutation].qps_per_connection=1"});
  const double half = permutation_ms(
      {"workloads[permutation].qps_per_connection=1", "topology.leaf.uplink_speed=800Gbps"});
  EXPECT_LT(half, 0.6 * full) << full << " ms at 1:1, " << half << " at 1:2";
}

TEST(Direction, TrafficEngineeringBeatsHashingWithAmpleCapacity) {
  // 1:1, no failure: the controller, seeing every QP and the whole path, spreads what E-ECMP
  // hashes.
  const double eecmp =
      permutation_ms({"routing.scheme=e-ecmp", "workloads[permutation].qps_per_connection=4"});
  const double te = permutation_ms(
      {"routing.scheme=te", "routing.period=100us", "workloads[permutation].qps_per_connection=4"});
  EXPECT_LT(te, eecmp) << te << " ms with TE, " << eecmp << " with E-ECMP";
}

}  // namespace
}  // namespace rocesim::routing
