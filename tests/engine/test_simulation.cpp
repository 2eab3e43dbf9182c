// The engine: task graphs, connections and QPs, and the ring AllReduce closed form.
#include <gtest/gtest.h>

#include <map>

#include <fmt/format.h>

#include "sim/collectives/ring_allreduce.hpp"
#include "sim/engine/task_graph.hpp"
#include "sim/metrics/recorder.hpp"
#include "sim/network/maxmin_network.hpp"
#include "sim/routing/router.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/scenario/yaml_source.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::engine {
namespace {

// Latencies chosen so every path latency is known: PCIe p, NIC cable n, fabric cable c, leaf
// forwarding fl, spine forwarding fs.
constexpr double kP = 0.5e-6, kN = 0.1e-6, kC = 1e-6, kFl = 0.6e-6, kFs = 3e-6;
const double kB = test::roce_payload(400e9);  // NIC payload bytes/s (PCIe is not slower)

std::string topology(int gpus, int racks, int nodes_per_rack) {
  return fmt::format(R"(
  type: clos
  racks: {}
  nodes_per_rack: {}
  node: {{gpus: {}, nic_speed: 400Gbps, pcie_bandwidth: 400Gbps, pcie_latency: 500ns,
          nvlink_bandwidth: 450GB/s, nvlink_latency: 250ns}}
  leaf: {{uplinks: 4, latency: 600ns}}
  spine: {{count: 4, latency: 3us}}
  nic_link_latency: 100ns
  link_latency: 1us
)",
                     racks, nodes_per_rack, gpus);
}

std::unique_ptr<scenario::ScenarioRun> run(const std::string& topo, const std::string& workload) {
  auto r = test::scenario_from_yaml(fmt::format("topology:{}\nworkloads:\n{}", topo, workload));
  r->run();
  return r;
}

TEST(RingAllReduce, ClosedFormOnAnIdleNonBlockingFabric) {
  // 8 single-GPU servers in 4 racks of 2; ring 0 -> 1 -> ... -> 7 -> 0. Every rank sends one
  // chunk of S/n per step; each step ends when the slowest edge has delivered its chunk, the
  // cross-rack edges, whose first-byte latency is
  //   L = 2p + 2n + 2c + 2 fl + fs  (GPU-NIC, NIC-leaf, leaf-spine, spine-leaf, leaf-NIC, NIC-GPU).
  // One cross-rack flow per leaf uplink, so no contention: every chunk moves at B.
  // T = 2(n-1) (S/(n B) + L).
  const int n = 8;
  const double s = 64.0 * 1024 * 1024;
  auto r = run(topology(1, 4, 2), "  - {type: ring_allreduce, bytes: 64MiB}\n");
  const double lat = 2 * kP + 2 * kN + 2 * kC + 2 * kFl + kFs;
  const double expected = 2 * (n - 1) * (s / (n * kB) + lat);
  const auto& w = r->recorder->workloads().at(0);
  EXPECT_NEAR((w.end - w.start).in_seconds(), expected, 2 * (n - 1) * 1e-12 + 1e-12);
  EXPECT_EQ(w.flows, static_cast<uint64_t>(2 * (n - 1) * n));
  // busbw = algbw * 2(n-1)/n = S/T * 2(n-1)/n, which tends to B as latency vanishes.
  double busbw = 0;
  for (const auto& [k, v] : w.figures.values) {
    if (k == "busbw_GBps") busbw = v;
  }
  EXPECT_NEAR(busbw, s / expected * 2 * (n - 1) / n * 1e-9, 1e-9);
}

TEST(RingAllReduce, EightGpuServersAreBoundByTheNicHops) {
  // 4 servers of 8 GPUs in 2 racks, ring over all 32 GPUs in rank order: 28 edges cross NVLink
  // (450 GB/s) and 4 cross servers through NICs (400 Gb/s). The inter-server edges are the
  // slowest: each step takes S/(n B) + L with B = 50 GB/s; the rack-crossing edges have the
  // largest latency L = 2p + 2n + 2c + 2 fl + fs.
  const int n = 32;
  const double s = 256.0 * 1024 * 1024;
  auto r = run(topology(8, 2, 2), "  - {type: ring_allreduce, bytes: 256MiB}\n");
  const double lat = 2 * kP + 2 * kN + 2 * kC + 2 * kFl + kFs;
  const double expected = 2 * (n - 1) * (s / (n * kB) + lat);
  const auto& w = r->recorder->workloads().at(0);
  EXPECT_NEAR((w.end - w.start).in_seconds(), expected, 1e-9);
}

TEST(RingAllReduce, UnevenChunksAndTinyBuffers) {
  // S = 1000 bytes over 8 ranks: chunks of 125 bytes; S = 5 bytes over 8 ranks leaves three
  // chunks empty, which cost nothing; both must complete and move exactly 2(n-1)/n * S per rank
  // in total, i.e. 2(n-1) * S bytes over the whole ring.
  for (const int bytes : {1000, 5, 1001}) {
    auto r =
        run(topology(1, 4, 2), fmt::format("  - {{type: ring_allreduce, bytes: {}B}}\n", bytes));
    const auto& w = r->recorder->workloads().at(0);
    EXPECT_EQ(w.bytes, 2 * 7 * bytes) << bytes;
  }
}

TEST(RingAllReduce, IndependentGroupsRunSideBySide) {
  // 8 single-GPU servers, 4 racks of 2. group_size 2 makes 4 rings of the two servers of each
  // rack: each ring has n = 2 ranks and same-rack latency L = 2p + 2n + fl, and no link is
  // shared, so every ring takes the closed form of a lone ring: 2(n-1) (S/(n B) + L).
  const double s = 8.0 * 1024 * 1024;
  auto r = run(topology(1, 4, 2), "  - {type: ring_allreduce, bytes: 8MiB, group_size: 2}\n");
  const double lat = 2 * kP + 2 * kN + kFl;
  const double expected = 2 * (s / (2 * kB) + lat);
  const auto& w = r->recorder->workloads().at(0);
  EXPECT_NEAR((w.end - w.start).in_seconds(), expected, 1e-11);
  EXPECT_EQ(w.flows, 4u * 2 * 2);  // 4 rings x 2 steps x 2 ranks
}

TEST(RingAllReduce, GroupStrideTakesTheSameGpuOfConsecutiveServers) {
  // 4 servers of 8 GPUs; group_size 4 with stride 8 forms 8 rings, ring j joining GPU j of the
  // 4 servers (a rail). Every transfer therefore crosses servers and never uses NVLink.
  auto r =
      run(topology(8, 2, 2), "  - {type: ring_step, bytes: 1MB, group_size: 4, group_stride: 8}\n");
  ASSERT_EQ(r->recorder->flows().size(), 32u);
  for (const FlowRecord& f : r->recorder->flows()) {
    const uint32_t a = r->fabric.rank_of(f.src), b = r->fabric.rank_of(f.dst);
    EXPECT_EQ(a % 8, b % 8) << a << " -> " << b;
    EXPECT_EQ((a / 8 + 1) % 4, b / 8) << a << " -> " << b;
  }
}

TEST(Connections, RoundRobinMessagesOverQps) {
  // One 5 MiB transfer on a connection of 4 QPs with 512 KiB messages: 10 messages, QP q gets
  // messages q, q+4, q+8: 3, 3, 2, 2 messages = 1.5, 1.5, 1, 1 MiB as four flows. A second
  // transfer continues the rotation at QP 2.
  auto r = run(topology(1, 2, 1),
               "  - {type: flows, flows: [{src: 0, dst: 1, bytes: 1B}]}\n"
               "  - type: permutation\n    ranks: [0, 1]\n    bytes: 5MiB\n"
               "    qps_per_connection: 4\n    message_size: 512KiB\n");
  const auto& flows = r->recorder->flows();
  std::map<uint32_t, int64_t> per_qp;  // of rank 0 -> rank 1 in the permutation
  for (const FlowRecord& f : flows) {
    if (f.workload == 1 && r->fabric.rank_of(f.src) == 0) per_qp[f.qp] += f.bytes.count();
  }
  std::vector<int64_t> bytes;
  for (const auto& [qp, b] : per_qp)
    bytes.push_back(b);
  const int64_t mib = 1024 * 1024;
  EXPECT_EQ(bytes, (std::vector<int64_t>{3 * mib / 2, 3 * mib / 2, mib, mib}));
}

TEST(Connections, SplitModeDividesEveryTransfer) {
  // qp_mode split: 10 MiB + 3 bytes over 4 QPs: 2.5 MiB each and one byte more on the first
  // three.
  auto r = run(topology(1, 2, 1),
               "  - type: permutation\n    ranks: [0, 1]\n    bytes: 10485763B\n"
               "    qps_per_connection: 4\n    qp_mode: split\n");
  std::vector<int64_t> bytes;
  for (const FlowRecord& f : r->recorder->flows()) {
    if (r->fabric.rank_of(f.src) == 0) bytes.push_back(f.bytes.count());
  }
  std::sort(bytes.begin(), bytes.end());
  EXPECT_EQ(bytes, (std::vector<int64_t>{2621440, 2621441, 2621441, 2621441}));
}

/// Posts `transfers` one after another on one connection of `spec` from GPU 0 to GPU 1.
class Posts final : public Workload {
 public:
  Posts(ConnectionSpec spec, std::vector<int64_t> transfers)
      : Workload("posts"), spec_(spec), transfers_(std::move(transfers)) {}
  std::string_view type() const override { return "posts"; }
  void start(Simulation& sim, WorkloadId id) override {
    c_ = sim.connect(sim.fabric().gpus()[0], sim.fabric().gpus()[1], spec_);
    on_transfer_done(sim, id, 0);
  }
  void on_transfer_done(Simulation& sim, WorkloadId id, uint64_t) override {
    if (next_ == transfers_.size()) {
      sim.finish(id);
      return;
    }
    sim.transfer(id, c_, Bytes(transfers_[next_]), next_);
    ++next_;
  }

 private:
  ConnectionSpec spec_;
  std::vector<int64_t> transfers_;
  ConnectionId c_ = 0;
  size_t next_ = 0;
};

TEST(Connections, ChunkedMessagesGoToTheNextQpsInTurn) {
  // NCCL's socket plugin over 4 sockets: a message is cut into pieces of max(64 KiB, message /
  // 4), which go to the next sockets in turn. 128 KiB messages are 2 pieces of 64 KiB, so a
  // transfer of 5 of them puts pieces on QPs 0,1 | 2,3 | 0,1 | 2,3 | 0,1: 192, 192, 128, 128
  // KiB. The next transfer, 300 KiB (messages of 128, 128 and 44 KiB), goes on from QP 2:
  // 2,3 | 0,1 | 2 (44 KiB, one piece): 64, 64, 108, 64 KiB. 1 MiB messages are cut into 4 of
  // 256 KiB, one on each QP, whatever the position (third transfer, 2 MiB: 512 KiB each).
  auto r = test::scenario_from_yaml(fmt::format(
      "topology:{}workloads:\n  - {{type: flows, flows: [{{src: 0, dst: 1, bytes: 1B}}]}}\n",
      topology(1, 2, 1)));
  ConnectionSpec spec;
  spec.qps = 4;
  spec.mode = QpMode::Chunked;
  spec.message_bytes = 128 << 10;
  spec.min_chunk_bytes = 64 << 10;
  const int64_t kib = 1024;
  r->sim->add_workload(std::make_unique<Posts>(spec, std::vector<int64_t>{640 * kib, 300 * kib}),
                       Time{});
  spec.message_bytes = 1 << 20;
  r->sim->add_workload(std::make_unique<Posts>(spec, std::vector<int64_t>{2048 * kib}), Time{});
  r->run();
  std::map<std::pair<WorkloadId, uint32_t>, std::vector<int64_t>> per_qp;  // in delivery order
  for (const FlowRecord& f : r->recorder->flows()) {
    if (f.workload > 0) per_qp[{f.workload, f.qp}].push_back(f.bytes.count());
  }
  std::vector<std::vector<int64_t>> first, second;
  for (const auto& [key, bytes] : per_qp)
    (key.first == 1 ? first : second).push_back(bytes);
  EXPECT_EQ(first, (std::vector<std::vector<int64_t>>{{192 * kib, 64 * kib},
                                                      {192 * kib, 64 * kib},
                                                      {128 * kib, 108 * kib},
                                                      {128 * kib, 64 * kib}}));
  EXPECT_EQ(second, (std::vector<std::vector<int64_t>>{
                        {512 * kib}, {512 * kib}, {512 * kib}, {512 * kib}}));
}

TEST(TaskGraph, DelaysAndDependencies) {
  // Flow a starts after 10 us; flow b waits for a's delivery. a and b each move 1 MB over an
  // idle same-rack path (latency L = 2p + 2n + fl): a is delivered at 10 us + S/B + L, b at
  // twice the transfer part plus 10 us.
  auto r = run(topology(1, 1, 4),
               "  - type: flows\n    flows:\n"
               "      - {id: a, src: 0, dst: 1, bytes: 1MB, start: 10us}\n"
               "      - {id: b, src: 2, dst: 3, bytes: 1MB, after: [a]}\n");
  const double lat = 2 * kP + 2 * kN + kFl;
  const double one = 1e6 / kB + lat;
  const auto& w = r->recorder->workloads().at(0);
  EXPECT_NEAR((w.end - w.start).in_seconds(), 10e-6 + 2 * one, 2e-12);
}

TEST(Workloads, AfterOrdersWorkloads) {
  // The second workload starts when the first ends.
  auto r = run(topology(1, 1, 4),
               "  - {name: first, type: ring_step, bytes: 1MB}\n"
               "  - {name: second, type: ring_step, bytes: 1MB, after: [first]}\n");
  const auto& w = r->recorder->workloads();
  EXPECT_EQ(w.at(1).start, w.at(0).end);
  EXPECT_GT(w.at(0).end, Time::zero());
}

TEST(Simulation, SimultaneousDeliveriesShareOneRateSolve) {
  // A ring step over 4 hosts of one leaf: 4 equal flows on disjoint paths, all ending at the same
  // instant. One solve for the starts, none needed after the completions (nothing left).
  auto r = test::scenario_from_yaml(fmt::format(
      "topology:{}\nworkloads:\n  - {{type: ring_step, bytes: 1MB}}\n", topology(1, 1, 4)));
  r->run();
  auto& net = dynamic_cast<network::MaxMinNetwork&>(*r->network);
  EXPECT_EQ(net.solver().stats().solves, 2u);  // the 4 starts, then the 4 removals
  EXPECT_EQ(r->recorder->flows_seen(), 4u);
}

TEST(PathTable, WeightedPathsAreInternedByContent) {
  // The same links, weights and latency give the same path; any difference a new one.
  routing::PathTable t;
  const std::vector<fabric::LinkId> links{3, 5, 8};
  const std::vector<double> w{1.0, 2.0, 0.5}, w2{1.0, 2.0, 0.25};
  const routing::PathId a = t.intern_weighted(links, w, Time::zero());
  EXPECT_EQ(t.intern_weighted(links, w, Time::zero()), a);
  EXPECT_NE(t.intern_weighted(links, w2, Time::zero()), a);
  EXPECT_NE(t.intern_weighted(links, w, Time::ns(1)), a);
  EXPECT_EQ(t.size(), 3u);
}

TEST(Simulation, RepeatedOperationsDoNotGrowThePathTable) {
  // An NCCL AllReduce run 1 and 12 times on the same connections: every iteration's channel
  // pipelines are the same unions, so the path table (and the memory it holds) is the same size.
  auto paths_after = [](int iterations) {
    const auto run = test::scenario_from_yaml(
        test::clos_topology(2, 2, 4, 4) +
        fmt::format("workloads:\n  - {{type: nccl, collective: allreduce, bytes: 64MiB, "
                    "iterations: {}, nccl: {{NCCL_ALGO: Ring}}}}\n",
                    iterations));
    run->run();
    return run->sim->paths().size();
  };
  EXPECT_EQ(paths_after(12), paths_after(1));
}

TEST(Simulation, ARunWhoseFlowRecordsNobodyReadsKeepsNone) {
  // `rocesim run --no-output` (no results.h5, no trace) asks for no flow records: the recorder
  // keeps none of the 64 flows of this AlltoAll whatever output.max_flows says, and counts them
  // all; a run that writes results keeps the first max_flows.
  const std::string yaml = test::clos_topology(2, 2, 4, 4) +
                           "workloads:\n  - {type: nccl, collective: alltoall, bytes: 1MiB}\n"
                           "output: {max_flows: 10}\n";
  scenario::Overrides o;
  o.flow_records = false;
  const auto none = scenario::load_scenario_text(yaml, "t.yaml", test::source_path(""), o);
  none->run();
  const auto kept = test::scenario_from_yaml(yaml);
  kept->run();
  EXPECT_TRUE(none->recorder->flows().empty());
  EXPECT_EQ(none->recorder->flows_seen(), kept->recorder->flows_seen());
  EXPECT_GE(kept->recorder->flows_seen(), 16u * 15u);
  EXPECT_EQ(kept->recorder->flows().size(), 10u);
  EXPECT_EQ(none->sim->end_time(), kept->sim->end_time());
}

}  // namespace
}  // namespace rocesim::engine
