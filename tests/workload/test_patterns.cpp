// Generated traffic patterns, checked on what the simulation delivered (the Recorder's flow
// records), not on the generator's internals: who sent to whom, how many flows and bytes.
// With one QP per connection and messages of 512 KiB, a transfer of 1 MiB is exactly one flow
// (both messages follow each other on the one QP), so flows and transfers can be counted alike.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/test_support.hpp"

namespace rocesim::workload {
namespace {

using test::contains;
using test::input_error;

constexpr int64_t kMiB = 1 << 20;

// 16 GPUs: 4 racks of 2 servers with 2 GPUs each; non-blocking (4 x 400G NICs per leaf, 4 x 400G
// uplinks).
constexpr const char* kTopology = R"(topology:
  type: clos
  racks: 4
  nodes_per_rack: 2
  node: {gpus: 2}
  leaf: {uplinks: 4}
  spine: {count: 2}
)";

struct Transfer {
  uint32_t src = 0;  // ranks
  uint32_t dst = 0;
  int64_t bytes = 0;
};

struct Outcome {
  std::unique_ptr<scenario::ScenarioRun> run;
  std::vector<Transfer> flows;  // in the order delivered
};

/// Runs `workloads` (YAML list items) on the 16-GPU fabric and collects the delivered flows.
Outcome simulate(const std::string& workloads, uint64_t seed = 1) {
  Outcome o;
  o.run = test::scenario_from_yaml(fmt::format("{}workloads:\n{}", kTopology, workloads), seed);
  o.run->run();
  for (const engine::FlowRecord& f : o.run->recorder->flows()) {
    o.flows.push_back(
        {o.run->fabric.rank_of(f.src), o.run->fabric.rank_of(f.dst), f.bytes.count()});
  }
  return o;
}

/// src -> dst of one-flow-per-transfer patterns; fails the test if a rank sends twice.
std::map<uint32_t, uint32_t> successor(const std::vector<Transfer>& flows) {
  std::map<uint32_t, uint32_t> next;
  for (const Transfer& t : flows)
    EXPECT_TRUE(next.emplace(t.src, t.dst).second) << "rank " << t.src << " sends twice";
  return next;
}

// ---- permutation ----

TEST(Permutation, IsOneCycleThroughEverySelectedRank) {
  // Sattolo's algorithm gives a uniformly random cyclic permutation: every rank sends to one
  // other rank and receives from one, and following the successors from any rank visits all n
  // before returning. Checked for many seeds, on all 16 ranks.
  std::set<std::vector<uint32_t>> seen;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Outcome o = simulate("  - {type: permutation, bytes: 1MiB}\n", seed);
    ASSERT_EQ(o.flows.size(), 16u) << "seed " << seed;
    const auto next = successor(o.flows);
    std::set<uint32_t> receivers;
    for (const auto& [src, dst] : next) {
      EXPECT_NE(src, dst) << "rank " << src << " sends to itself (seed " << seed << ")";
      receivers.insert(dst);
    }
    EXPECT_EQ(receivers.size(), 16u) << "seed " << seed;
    std::vector<uint32_t> cycle{0};
    for (uint32_t r = next.at(0); r != 0 && cycle.size() <= 16; r = next.at(r))
      cycle.push_back(r);
    EXPECT_EQ(cycle.size(), 16u) << "not a single cycle (seed " << seed << ")";
    seen.insert(cycle);
    for (const Transfer& t : o.flows)
      EXPECT_EQ(t.bytes, kMiB);
  }
  // Random, not a fixed rotation: 20 seeds give (almost surely, 15! cycles) 20 different ones.
  EXPECT_GT(seen.size(), 15u);
}

TEST(Permutation, UsesOnlyTheSelectedRanks) {
  // Ranks 1, 4, 7, 10, 13 (a range with stride 3): a 5-cycle among them.
  const Outcome o = simulate("  - {type: permutation, bytes: 1MiB, ranks: '1-13:3'}\n");
  ASSERT_EQ(o.flows.size(), 5u);
  const auto next = successor(o.flows);
  const std::set<uint32_t> chosen{1, 4, 7, 10, 13};
  std::set<uint32_t> senders, receivers;
  for (const auto& [src, dst] : next) {
    senders.insert(src);
    receivers.insert(dst);
  }
  EXPECT_EQ(senders, chosen);
  EXPECT_EQ(receivers, chosen);
  std::vector<uint32_t> cycle{1};
  for (uint32_t r = next.at(1); r != 1 && cycle.size() <= 5; r = next.at(r))
    cycle.push_back(r);
  EXPECT_EQ(cycle.size(), 5u);
}

TEST(Permutation, OfTwoRanksIsASwap) {
  const Outcome o = simulate("  - {type: permutation, bytes: 1MiB, ranks: [5, 9]}\n");
  const auto next = successor(o.flows);
  EXPECT_EQ(next, (std::map<uint32_t, uint32_t>{{5, 9}, {9, 5}}));
}

TEST(Permutation, SameSeedSamePermutationAndEachWorkloadItsOwnStream) {
  const std::string two =
      "  - {name: a, type: permutation, bytes: 1MiB}\n"
      "  - {name: b, type: permutation, bytes: 1MiB, after: [a]}\n";
  const Outcome first = simulate(two, 7), again = simulate(two, 7);
  std::map<uint32_t, uint32_t> a1, b1, a2;
  for (const engine::FlowRecord& f : first.run->recorder->flows()) {
    (f.workload == 0 ? a1 : b1)[first.run->fabric.rank_of(f.src)] =
        first.run->fabric.rank_of(f.dst);
  }
  for (const engine::FlowRecord& f : again.run->recorder->flows()) {
    if (f.workload == 0) a2[again.run->fabric.rank_of(f.src)] = again.run->fabric.rank_of(f.dst);
  }
  EXPECT_EQ(a1, a2);
  // Streams are keyed by the workload's name: a and b draw different cycles (1 in 15! to agree).
  EXPECT_NE(a1, b1);
}

TEST(Permutation, NeedsTwoRanks) {
  const InputError e =
      input_error([] { (void)simulate("  - {type: permutation, bytes: 1MiB, ranks: [3]}\n"); });
  EXPECT_EQ(e.key(), "workloads[0].ranks");
  EXPECT_THAT(e.what(), testing::HasSubstr("expected at least 2 GPUs, found 1 GPU"));
}

// ---- incast ----

/// Checks the shape of an incast over `n` ranks with `fan_in` senders per receiver:
/// floor(n / (fan_in + 1)) groups, each one receiver and fan_in distinct senders, every rank in
/// at most one group, and n mod (fan_in + 1) ranks idle.
void expect_incast(const Outcome& o, const std::set<uint32_t>& ranks, size_t fan_in) {
  const size_t n = ranks.size();
  const size_t groups = n / (fan_in + 1);
  ASSERT_EQ(o.flows.size(), groups * fan_in);
  std::map<uint32_t, size_t> fan;  // receiver -> senders
  std::set<uint32_t> senders;
  for (const Transfer& t : o.flows) {
    ++fan[t.dst];
    EXPECT_TRUE(senders.insert(t.src).second) << "rank " << t.src << " sends twice";
    EXPECT_TRUE(ranks.count(t.src) == 1 && ranks.count(t.dst) == 1);
    EXPECT_EQ(t.bytes, kMiB);
  }
  EXPECT_EQ(fan.size(), groups);
  for (const auto& [receiver, count] : fan) {
    EXPECT_EQ(count, fan_in) << "receiver " << receiver;
    EXPECT_EQ(senders.count(receiver), 0u) << "receiver " << receiver << " also sends";
  }
  EXPECT_EQ(n - senders.size() - fan.size(), n % (fan_in + 1)) << "idle ranks";
}

TEST(Incast, GroupsOfFanInSendersAndOneReceiver) {
  // 16 ranks, fan_in 3: 4 groups of 3 senders, no rank idle.
  std::set<uint32_t> all;
  for (uint32_t r = 0; r < 16; ++r)
    all.insert(r);
  expect_incast(simulate("  - {type: incast, bytes: 1MiB, fan_in: 3}\n"), all, 3);
}

TEST(Incast, LeftoverRanksStayIdle) {
  // 10 ranks, fan_in 3: floor(10 / 4) = 2 groups, 6 flows, 2 ranks idle; for several seeds.
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    expect_incast(simulate("  - {type: incast, bytes: 1MiB, fan_in: 3, ranks: 0-9}\n", seed),
                  {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 3);
  }
}

TEST(Incast, OneGroupWhenFanInIsAllButOne) {
  // 16 ranks, fan_in 15: one 15:1 incast; the receiver takes 15 x 1 MiB.
  const Outcome o = simulate("  - {type: incast, bytes: 1MiB, fan_in: 15}\n");
  ASSERT_EQ(o.flows.size(), 15u);
  const auto& w = o.run->recorder->workloads().at(0);
  EXPECT_EQ(w.flows, 15u);
  EXPECT_EQ(w.bytes, 15 * kMiB);
}

TEST(Incast, NeedsFanInPlusOneRanks) {
  // The default fan_in is 16: 16 ranks are one short.
  const InputError e = input_error([] { (void)simulate("  - {type: incast, bytes: 1MiB}\n"); });
  EXPECT_EQ(e.key(), "workloads[0].ranks");
  EXPECT_THAT(e.what(), testing::HasSubstr("expected at least 17 GPUs, found 16 GPUs"));
}

// ---- all_to_all ----

TEST(AllToAll, EveryOrderedPairOnce) {
  // n ranks: n (n - 1) transfers, each ordered pair once; 16 ranks: 240.
  const Outcome o = simulate("  - {type: all_to_all, bytes: 1MiB}\n");
  ASSERT_EQ(o.flows.size(), 16u * 15u);
  std::set<std::pair<uint32_t, uint32_t>> pairs;
  for (const Transfer& t : o.flows) {
    EXPECT_NE(t.src, t.dst);
    EXPECT_EQ(t.bytes, kMiB);
    pairs.emplace(t.src, t.dst);
  }
  EXPECT_EQ(pairs.size(), 240u);
  const auto& w = o.run->recorder->workloads().at(0);
  EXPECT_EQ(w.flows, 240u);
  EXPECT_EQ(w.bytes, 240 * kMiB);
}

TEST(AllToAll, OverAListOfRanks) {
  // 5 ranks: 5 x 4 = 20 transfers, only among them.
  const Outcome o = simulate("  - {type: all_to_all, bytes: 1MiB, ranks: [0, 3, 6, 9, 15]}\n");
  ASSERT_EQ(o.flows.size(), 20u);
  const std::set<uint32_t> chosen{0, 3, 6, 9, 15};
  std::set<std::pair<uint32_t, uint32_t>> pairs;
  for (const Transfer& t : o.flows) {
    EXPECT_TRUE(chosen.count(t.src) == 1 && chosen.count(t.dst) == 1);
    pairs.emplace(t.src, t.dst);
  }
  EXPECT_EQ(pairs.size(), 20u);
}

TEST(AllToAll, QpsSplitEachTransfer) {
  // With 2 QPs per connection and round robin, a 1 MiB transfer (two 512 KiB messages) is two
  // flows of 512 KiB between GPUs of different servers; between the two GPUs of one server it
  // goes over NVLink, one channel, one flow of 1 MiB. Ranks 0, 1 share server 0; rank 2 is on
  // server 1: 2 NVLink transfers (0<->1) and 4 network transfers -> 2 + 4 x 2 = 10 flows.
  const Outcome o =
      simulate("  - {type: all_to_all, bytes: 1MiB, ranks: [0, 1, 2], qps_per_connection: 2}\n");
  EXPECT_EQ(o.flows.size(), 10u);
  int64_t total = 0;
  for (const Transfer& t : o.flows) {
    const bool nvlink = t.src / 2 == t.dst / 2;
    EXPECT_EQ(t.bytes, nvlink ? kMiB : kMiB / 2) << t.src << " -> " << t.dst;
    total += t.bytes;
  }
  EXPECT_EQ(total, 6 * kMiB);
}

// ---- ring_step ----

TEST(RingStep, EachRankSendsToTheNextOneInTheOrderWritten) {
  const Outcome o = simulate("  - {type: ring_step, bytes: 1MiB, ranks: [3, 0, 5, 1, 12]}\n");
  EXPECT_EQ(successor(o.flows),
            (std::map<uint32_t, uint32_t>{{3, 0}, {0, 5}, {5, 1}, {1, 12}, {12, 3}}));
}

TEST(RingStep, OverAllRanksIsIToIPlusOne) {
  const Outcome o = simulate("  - {type: ring_step, bytes: 2MiB}\n");
  const auto next = successor(o.flows);
  ASSERT_EQ(next.size(), 16u);
  for (uint32_t i = 0; i < 16; ++i)
    EXPECT_EQ(next.at(i), (i + 1) % 16);
  // 2 MiB on one QP: four 512 KiB messages back to back, one flow.
  for (const Transfer& t : o.flows)
    EXPECT_EQ(t.bytes, 2 * kMiB);
  EXPECT_EQ(o.run->recorder->workloads().at(0).bytes, 16 * 2 * kMiB);
}

TEST(RingStep, SendsAtTheNicRateOnAnIdleFabric) {
  // Ranks 0, 2, 4, 6: GPU 0 of servers 0-3, one flow per NIC in each direction and two flows
  // per leaf over four uplinks, so nothing is shared: every flow moves at the NIC rate,
  // min(400 Gb/s NIC x 4096/4178 RoCEv2 framing = 49.02e9 B/s, 50 GB/s PCIe), and 1 MiB takes
  // 1048576 / 49.02e9 s = 21.39 us of bandwidth time (plus latency, which the bandwidth phase
  // excludes).
  const Outcome o = simulate("  - {type: ring_step, bytes: 1MiB, ranks: [0, 2, 4, 6]}\n");
  ASSERT_EQ(o.run->recorder->flows().size(), 4u);
  for (const engine::FlowRecord& f : o.run->recorder->flows()) {
    EXPECT_NEAR((f.bandwidth_end - f.start).in_seconds(), 1048576.0 / test::roce_payload(400e9),
                1e-12);
  }
}

}  // namespace
}  // namespace rocesim::workload
