// The NCCL model: how a communicator is laid out (rings, trees, PXN), the closed forms of the
// collectives on idle fabrics, and the behaviour users rely on it for (ring versus tree, QP
// scaling, hierarchical versus flat, protocols, credit windows, in-network reduction).
//
// Closed forms switch NCCL's own latencies and the proxy's posting time off (`hop_latency_factor:
// 0`, `launch_latency: 0s`, `proxy_post_latency: 0s`) so that every term comes from the fabric,
// whose latencies are chosen to be known:
//   NVLink edge (GPU -> NVSwitch -> GPU):                    L_nvl = 2 v            = 0.5 us
//   network edge through a PXN relay (GPU -> NVSwitch -> relay GPU -> PCIe -> NIC -> rail leaf
//   -> NIC -> PCIe -> GPU):                                  L_pxn = 2v + 2p + 2n + f = 2.3 us
//   network edge from a GPU on the destination's rail:      L_net = 2p + 2n + f      = 1.8 us
// with NVLink latency v = 250 ns, PCIe p = 500 ns, NIC cable n = 100 ns, rail leaf f = 600 ns.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sim/collectives/nccl/collective.hpp"
#include "sim/collectives/nccl/layout.hpp"
#include "sim/collectives/nccl/p2p_schedule.hpp"
#include "sim/collectives/nccl/tuning.hpp"
#include "sim/scenario/yaml_source.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::collectives::nccl {
namespace {

using test::contains;

constexpr double kV = 0.25e-6, kP = 0.5e-6, kN = 0.1e-6, kF = 0.6e-6;
const double kB = test::roce_payload(400e9);  // NIC payload bytes/s (RoCEv2 framing)
constexpr double kLnvl = 2 * kV;
constexpr double kLpxn = 2 * kV + 2 * kP + 2 * kN + kF;
constexpr double kLnet = 2 * kP + 2 * kN + kF;
constexpr double kMiB = 1024.0 * 1024;
constexpr double kGiB = 1024 * kMiB;

/// One rack: every NIC of `nodes` servers on one leaf (non-blocking, one switch between NICs).
std::string rack_topology(int nodes, int gpus) {
  return fmt::format(R"(topology:
  type: clos
  racks: 1
  nodes_per_rack: {0}
  node: {{gpus: {1}, nic_speed: 400Gbps, pcie_bandwidth: 400Gbps, pcie_latency: 500ns,
          nvlink_bandwidth: 450GB/s, nvlink_latency: 250ns}}
  leaf: {{uplinks: 4, latency: 600ns}}
  spine: {{count: 4, latency: 3us}}
  nic_link_latency: 100ns
  link_latency: 1us
)",
                     nodes, gpus);
}

/// A rail-optimized fabric: `nodes` servers of `gpus` GPUs (one NIC each), one leaf per rail
/// holding every server, so every pair of same-rail NICs is one switch apart (non-blocking).
std::string rail_topology(int nodes, int gpus, const char* nic_speed = "400Gbps",
                          bool latencies = true) {
  // (Without latencies every link and switch takes 0 s.)
  const auto l = [&](const char* t) { return latencies ? t : "0s"; };
  return fmt::format(R"(topology:
  type: rail_optimized
  nodes: {0}
  nodes_per_leaf: {0}
  node: {{gpus: {1}, nic_speed: {2}, pcie_bandwidth: 400Gbps, pcie_latency: {3},
          nvlink_bandwidth: 450GB/s, nvlink_latency: {4}}}
  leaf: {{uplinks: 4, latency: {5}}}
  spine: {{count: 4, latency: {6}}}
  nic_link_latency: {7}
  link_latency: {8}
)",
                     nodes, gpus, nic_speed, l("500ns"), l("250ns"), l("600ns"), l("3us"),
                     l("100ns"), l("1us"));
}

constexpr const char* kNoNcclLatency =
    "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, NCCL_PROTO: "
    "Simple}\n";

struct Figures {
  std::map<std::string, double> values;
  std::map<std::string, std::string> notes;
  double seconds = 0;  // the workload's completion time
  uint64_t flows = 0;  // the flows it ran
  double operator[](const std::string& k) const { return values.at(k); }
};

/// Runs a scenario and returns the figures of every workload by name.
std::map<std::string, Figures> run(const std::string& yaml, uint64_t seed = 1) {
  auto r = test::scenario_from_yaml(yaml, seed);
  r->run();
  std::map<std::string, Figures> out;
  for (const metrics::WorkloadResult& w : r->recorder->workloads()) {
    Figures& f = out[w.name];
    for (const auto& [k, v] : w.figures.values)
      f.values[k] = v;
    for (const auto& [k, v] : w.figures.notes)
      f.notes[k] = v;
    f.seconds = (w.end - w.start).in_seconds();
    f.flows = w.flows;
  }
  return out;
}

Figures run_one(const std::string& topology, const std::string& nccl, const std::string& workload,
                uint64_t seed = 1) {
  return run(fmt::format("{}{}workloads:\n  - {{name: w, type: nccl, {}}}\n", topology, nccl,
                         workload),
             seed)
      .at("w");
}

/// The channels of an AllReduce of 1 GiB (data enough for all of them) over the first `ranks`
/// GPUs of `servers` servers of `node` under one leaf, `nccl` the scenario's NCCL section.
double channels_of_1gib(const std::string& node, int servers, int ranks, const std::string& nccl) {
  return run_one(fmt::format(R"(topology:
  type: clos
  racks: 1
  nodes_per_rack: {}
  node: {}
  leaf: {{uplinks: 8}}
  spine: {{count: 1}}
nccl: {{{}}}
job: {{ranks: 0-{}}}
)",
                             servers, node, nccl, ranks - 1),
                 "", "collective: allreduce, bytes: 1GiB")["channels"];
}

// ---- NCCL's trees ----

TEST(NcclTrees, BinaryTreeMatchesNcclsExampleOfFourteenRanks) {
  // src/graph/trees.cc draws the tree of 14 ranks: 0 -> 8; 8 -> 4, 12; 4 -> 2, 6; 12 -> 10, 13;
  // 2 -> 1, 3; 6 -> 5, 7; 10 -> 9, 11. Rank 0 is the root with a single child.
  const std::map<int, std::vector<int>> children = {
      {0, {8}}, {8, {4, 12}}, {4, {2, 6}}, {12, {10, 13}}, {2, {1, 3}}, {6, {5, 7}}, {10, {9, 11}}};
  for (int r = 0; r < 14; ++r) {
    const BtreeLinks l = btree(14, r);
    std::vector<int> got;
    for (int c : {l.child0, l.child1})
      if (c != -1) got.push_back(c);
    std::sort(got.begin(), got.end());
    const auto it = children.find(r);
    EXPECT_EQ(got, it == children.end() ? std::vector<int>{} : it->second) << "rank " << r;
    for (int c : got)
      EXPECT_EQ(btree(14, c).parent, r) << "child " << c << " of " << r;
  }
  EXPECT_EQ(btree(14, 0).parent, -1);
}

TEST(NcclTrees, DoubleBinaryTreeSpansAllRanksAndEvenSizesSwapLeavesAndInnerNodes) {
  // Both trees are spanning trees of arity <= 2 rooted at one rank, parents and children
  // consistent, depth <= ceil(log2 n) + 1. For even n tree 1 mirrors tree 0: the leaves of tree
  // 0 are the odd ranks and those of tree 1 the even ones, so every rank is an inner node of
  // exactly one tree (the point of the double tree: each rank sends and receives about one
  // tree's worth of data).
  for (int n = 1; n <= 64; ++n) {
    for (int t = 0; t < 2; ++t) {
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        const BtreeLinks l = dtree(n, r, t);
        if (l.parent == -1) ++roots;
        for (int c : {l.child0, l.child1}) {
          if (c == -1) continue;
          ASSERT_GE(c, 0);
          ASSERT_LT(c, n);
          EXPECT_EQ(dtree(n, c, t).parent, r) << "n " << n << " tree " << t;
        }
        int depth = 0;
        for (int x = r; dtree(n, x, t).parent != -1; x = dtree(n, x, t).parent) {
          ASSERT_LE(++depth, n) << "cycle, n " << n;
        }
        EXPECT_LE(depth, std::ceil(std::log2(std::max(n, 1))) + 1) << "n " << n;
      }
      EXPECT_EQ(roots, 1) << "n " << n << " tree " << t;
    }
    if (n % 2 == 0 && n > 1) {
      for (int r = 0; r < n; ++r) {
        auto inner = [&](int t) {
          const BtreeLinks l = dtree(n, r, t);
          return l.child0 != -1 || l.child1 != -1;
        };
        EXPECT_NE(inner(0), inner(1)) << "n " << n << " rank " << r;
      }
    }
  }
}

// ---- layout on a rail-optimized fabric ----

TEST(NcclLayout, RingsStayOnTheirRailWithPxnAndCrossRailsWithout) {
  // 4 servers x 8 GPUs: ring channel c enters every server at the GPU on rail r = c mod 8 and
  // visits the other seven over NVLink; the one network edge per server goes from the server's
  // last GPU to the next server's rail-r GPU. With PXN the last GPU hands the data to its own
  // rail-r GPU, whose NIC sends: every network hop stays on rail r. Without PXN the last GPU's
  // own NIC (rail r - 1 mod 8) sends, to a NIC on rail r.
  const fabric::Fabric f = test::fabric_from_yaml(rail_topology(4, 8).substr(10));
  std::vector<fabric::NodeId> ranks;
  for (fabric::NodeId g = 0; g < f.node_count(); ++g)
    if (f.node(g).kind == fabric::NodeKind::Gpu) ranks.push_back(g);
  const Communicator comm(f, ranks);
  ASSERT_EQ(comm.nranks(), 32);
  ASSERT_EQ(comm.nnodes(), 4);
  ASSERT_EQ(comm.nics_per_node(), 8);
  for (int c = 0; c < 16; ++c) {
    const int rail = c % 8;
    const std::vector<fabric::NodeId> order = comm.ring_order(c);
    EXPECT_EQ(std::set<fabric::NodeId>(order.begin(), order.end()).size(), 32u);
    for (const bool pxn : {true, false}) {
      int network = 0;
      for (const Edge& e : comm.ring(c, pxn)) {
        if (!e.network) {
          EXPECT_EQ(f.node(e.src).server, f.node(e.dst).server);
          continue;
        }
        ++network;
        EXPECT_EQ(comm.rail_of(e.dst), rail);
        const fabric::NodeId sender = e.relay == fabric::kNone ? e.src : e.relay;
        EXPECT_EQ(f.node(sender).server, f.node(e.src).server);
        EXPECT_EQ(comm.rail_of(sender), pxn ? rail : (rail + 7) % 8) << "channel " << c;
      }
      EXPECT_EQ(network, 4);
    }
  }
}

TEST(NcclLayout, ANodeWithFewerRanksSpreadsItsChannelsOverItsOwnNics) {
  // 2 servers x 8 GPUs, a communicator of 12 ranks: all 8 GPUs of server 0, GPUs 0-3 of server
  // 1. Ring channel c enters server 1 at its GPU on rail c mod 8 where it has one, else on rail
  // c mod 4 (the ranks it has, in turn): each of its 4 GPUs is the entry of 4 of the 16
  // channels, so its 4 NICs receive 4 channels' network edges each (before, every channel of
  // rails 4-7 entered at GPU 0: its NIC received 10 of the 16). With PXN the sender's relay is
  // on the receiver's rail: server 0's NICs 0-3 send 4 each.
  const fabric::Fabric f = test::fabric_from_yaml(rail_topology(2, 8).substr(10));
  std::vector<fabric::NodeId> ranks;
  for (fabric::NodeId g = 0; g < f.node_count(); ++g)
    if (f.node(g).kind == fabric::NodeKind::Gpu && (f.node(g).server == 0 || ranks.size() < 12))
      ranks.push_back(g);
  ASSERT_EQ(ranks.size(), 12u);
  const Communicator comm(f, ranks);
  ASSERT_EQ(comm.nnodes(), 2);
  std::map<int, int> received, sent;  // server 1's receiving rail, server 0's sending rail
  for (int c = 0; c < 16; ++c) {
    for (const Edge& e : comm.ring(c, true)) {
      if (!e.network) continue;
      const fabric::NodeId sender = e.relay == fabric::kNone ? e.src : e.relay;
      if (f.node(e.dst).server == 1) {
        ++received[comm.rail_of(e.dst)];
        ++sent[comm.rail_of(sender)];
      }
    }
  }
  EXPECT_EQ(received, (std::map<int, int>{{0, 4}, {1, 4}, {2, 4}, {3, 4}}));
  EXPECT_EQ(sent, received);
}

TEST(NcclLayout, EachNicServesOneChannelOfEachTree) {
  // NCCL duplicates its channels and gives the copies the second tree of the double binary
  // tree: with 8 NICs, channels 0-7 use tree 0 and 8-15 tree 1, so channel c and c + 8 share
  // rail c and use different trees.
  const fabric::Fabric f = test::fabric_from_yaml(rail_topology(4, 8).substr(10));
  std::vector<fabric::NodeId> ranks;
  for (fabric::NodeId g = 0; g < f.node_count(); ++g)
    if (f.node(g).kind == fabric::NodeKind::Gpu) ranks.push_back(g);
  const Communicator comm(f, ranks);
  for (int c = 0; c < 8; ++c) {
    EXPECT_EQ(comm.tree_of_channel(c), 0);
    EXPECT_EQ(comm.tree_of_channel(c + 8), 1);
    EXPECT_EQ(comm.leaders(c), comm.leaders(c + 8));
  }
  // A tree channel: 3 network edges up and 3 down (4 nodes), 7 NVLink edges each way per node.
  const Communicator::Tree t = comm.tree(0);
  EXPECT_EQ(t.up.size(), 3u + 4 * 7);
  EXPECT_EQ(t.down.size(), t.up.size());
  EXPECT_EQ(t.intra, 7);
  EXPECT_EQ(t.depth, 2);  // btree(4): 0 -> 2 -> 1, 3
}

// ---- closed forms on an idle fabric ----

struct RingCase {
  const char* collective;
  double steps_per_rank;  // wire bytes per data byte of a channel: 2(n-1)/n or (n-1)/n
  double busbw_factor;
};

class NcclRingClosedForm : public testing::TestWithParam<RingCase> {};

TEST_P(NcclRingClosedForm, OnAnIdleRailFabric) {
  // 4 servers x 8 GPUs x 8 NICs, n = 32 ranks, S = 1 GiB, Ring/Simple, 16 channels (2 per NIC).
  // Channel c moves S/16 bytes; its ring of 32 edges carries f S/16 wire bytes (f = 2(n-1)/n
  // for AllReduce, (n-1)/n for AllGather and ReduceScatter) at the pace of its slowest edge. The
  // rail-r NIC of every server sends the network edges of channels r and r + 8: each channel
  // gets B/2 (NVLink carries at most 16 x B/2 = 400 GB/s < 450 GB/s per GPU). Bandwidth term:
  // f (S/16) / (B/2) = f S / (8 B).
  // Pipeline fill: chunks of 2 MiB and slices of 1 MiB (NCCL_BUFFSIZE 4 MiB / 8 steps x 4 and
  // x 2), so a slice plus an edge latency (< 3 us) always takes less than a chunk (42 us at
  // B/2): no step waits for its upstream, and the fill is the mean edge latency
  //   (28 L_nvl + 4 L_pxn) / 32.
  const RingCase rc = GetParam();
  const double n = 32, s = kGiB;
  const Figures w =
      run_one(rail_topology(4, 8), kNoNcclLatency,
              fmt::format("collective: {}, bytes: 1GiB, nccl: {{NCCL_ALGO: Ring}}", rc.collective));
  const double expected = rc.steps_per_rank * s / (8 * kB) + (28 * kLnvl + 4 * kLpxn) / n;
  EXPECT_NEAR(w.seconds, expected, 2e-9);
  EXPECT_NEAR(w["time_us"] * 1e-6, expected, 2e-9);
  EXPECT_EQ(w["channels"], 16);
  EXPECT_EQ(w.notes.at("algorithm"), "Ring");
  EXPECT_EQ(w.notes.at("protocol"), "Simple");
  // nccl-tests: algbw = S / t, busbw = algbw x factor, which tends to the NIC rate x 8 NICs.
  EXPECT_NEAR(w["algbw_GBps"], s / expected * 1e-9, 1e-6);
  EXPECT_NEAR(w["busbw_GBps"], s / expected * rc.busbw_factor * 1e-9, 1e-6);
  EXPECT_NEAR(w["busbw_GBps"], 8 * kB * 1e-9, 0.5);
}

INSTANTIATE_TEST_SUITE_P(Collectives, NcclRingClosedForm,
                         testing::Values(RingCase{"allreduce", 2 * 31.0 / 32, 2 * 31.0 / 32},
                                         RingCase{"allgather", 31.0 / 32, 31.0 / 32},
                                         RingCase{"reducescatter", 31.0 / 32, 31.0 / 32}),
                         [](const auto& p) { return std::string(p.param.collective); });

TEST(NcclClosedForm, GpusWithTwoNicsEachRunARailPerNic) {
  // The ring of NcclRingClosedForm with 16 x 200G NICs per server, two per GPU, instead of
  // 8 x 400G: 32 channels (2 per NIC), channel c on rail c mod 16, leaving and entering a server
  // by NIC c mod 16 of the GPU that owns it (GPU (c mod 16) / 2, port c mod 2). Each NIC carries
  // two channels at B200 / 2 = B / 4 each: the bandwidth term f (S/32) / (B/4) = f S / (8 B) and
  // the fill (28 L_nvl + 4 L_pxn) / 32 are those of 8 x 400G (B = 2 B200, the same framing).
  // AlltoAll spreads each GPU's peers over both of its NICs: as fast as with one NIC of twice
  // the rate.
  std::string two = rail_topology(4, 8);
  two.replace(two.find("nic_speed: 400Gbps"), 18, "nics: 16, nic_speed: 200Gbps");
  const double n = 32, s = kGiB;
  const Figures ring =
      run_one(two, kNoNcclLatency, "collective: allreduce, bytes: 1GiB, nccl: {NCCL_ALGO: Ring}");
  EXPECT_EQ(ring["channels"], 32);
  const double b = 2 * test::roce_payload(200e9);
  EXPECT_NEAR(ring.seconds, 2 * (n - 1) / n * s / (8 * b) + (28 * kLnvl + 4 * kLpxn) / n, 2e-9);
  const Figures one =
      run_one(rail_topology(4, 8), kNoNcclLatency, "collective: alltoall, bytes: 1GiB");
  const Figures both = run_one(two, kNoNcclLatency, "collective: alltoall, bytes: 1GiB");
  EXPECT_NEAR(both.seconds / one.seconds, 1.0, 1e-6);
}

TEST(NcclClosedForm, AllToAllOnANonBlockingFabric) {
  // AlltoAll of S = 1 GiB (nccl-tests: what every rank sends in total) on N = 4 servers x 8
  // GPUs: every rank sends S/32 to every other rank. With PXN the data for a GPU on rail r
  // leaves through the sender server's rail-r NIC, which thus sends 8 x (N-1) pairs of S/32 =
  // (N-1)/N x S bytes; every NIC is equally loaded and shares B max-min among its pairs, so all
  // network pairs end together at (N-1)/N x S / B. The last byte arrives one path latency later:
  // a relayed pair's L_pxn. NVLink pairs finish earlier (450 GB/s), and the per-pair window
  // (8 chunks of 128 KiB per round trip, > 200 GB/s) never binds.
  const double s = kGiB;
  const Figures w =
      run_one(rail_topology(4, 8), kNoNcclLatency, "collective: alltoall, bytes: 1GiB");
  const double expected = 3.0 / 4 * s / kB + kLpxn;
  EXPECT_NEAR(w.seconds, expected, 2e-9);
  EXPECT_EQ(w.notes.at("algorithm"), "p2p");
  // NCCL splits each pair's 32 MiB, over the network or NVLink, into 2 parts (p2p_parts: 2 per
  // peer, the fewest 1 since 2 x 32 ranks > 16 channels, doubled once as 32 MiB > 128 KiB):
  // 768 network pairs and 224 NVLink pairs, 2 flows each (one QP a connection).
  EXPECT_EQ(w.flows, 2u * (768 + 224));
  EXPECT_NEAR(w["busbw_GBps"], s / expected * 31 / 32 * 1e-9, 1e-6);
}

TEST(NcclClosedForm, APointToPointTailIsNcclsHopLatencyBeyondItsReferenceWire) {
  // Send/Recv of S = 8 B between two single-GPU servers, no launch latency. A network hop costs
  // L + t_tail: the path's latency and NCCL's Ring/Simple network hop, 14 us (hwLat, the newest
  // table), less the wire of NCCL's reference hop, which L already holds (GPU -> PCIe -> NIC ->
  // one switch -> NIC -> PCIe -> GPU = kLnet, as a pipeline step's cost; set_step_costs). The
  // pair's window of 8 chunks of 128 KiB per round trip caps its rate at 8 x 128 KiB / (2 H),
  // H = L + t_tail, and the operation ends t_tail after the last byte arrives: T = S / cap + H.
  // On one rail's leaf L = kLnet, so H = 14 us; across two racks the path adds two switch cables
  // and a spine, H = 14 + 2 x 1 + 3 + 0.6 us.
  const std::string nccl = "nccl: {launch_latency: 0s}\n";
  const std::string w = "collective: sendrecv, bytes: 8B";
  const auto expected = [](double hop) { return 8 / (8 * 131072 / (2 * hop)) + hop; };
  const Figures leaf = run_one(rail_topology(2, 1), nccl, w);
  EXPECT_NEAR(leaf.seconds, expected(14e-6), 2e-12);
  std::string racks = rack_topology(2, 1);
  racks.replace(racks.find("racks: 1\n  nodes_per_rack: 2"), 27, "racks: 2\n  nodes_per_rack: 1");
  const Figures spine = run_one(racks, nccl, w);
  EXPECT_NEAR(spine.seconds, expected(14e-6 + 2e-6 + 3e-6 + 0.6e-6), 2e-12);
}

TEST(NcclClosedForm, GatherIsBoundByTheRootsNic) {
  // Gather of S = 256 MiB to rank 0: each rank sends S/32. The 24 remote ranks' data arrives
  // through the root server's rail-0 NIC (PXN puts it on rail 0 at the sender's server):
  // 24 S/32 = 3/4 S at B, plus L_pxn for the last byte.
  const double s = 256 * kMiB;
  const Figures w =
      run_one(rail_topology(4, 8), kNoNcclLatency, "collective: gather, bytes: 256MiB");
  EXPECT_NEAR(w.seconds, 0.75 * s / kB + kLpxn, 2e-9);
}

TEST(NcclClosedForm, SendRecvAroundTheRanks) {
  // Send/Recv: rank i sends S to rank i+1. The four pairs that cross servers (GPU 7 of server k
  // to GPU 0 of server k+1) each use a different rail-0 NIC through the sender's GPU 0: S / B +
  // L_pxn. busbw = algbw for Send/Recv.
  const double s = 256 * kMiB;
  const Figures w =
      run_one(rail_topology(4, 8), kNoNcclLatency, "collective: sendrecv, bytes: 256MiB");
  const double expected = s / kB + kLpxn;
  EXPECT_NEAR(w.seconds, expected, 2e-9);
  EXPECT_NEAR(w["busbw_GBps"], w["algbw_GBps"], 1e-12);
}

TEST(NcclP2pSchedule, RoundsFollowNcclsTriangularOrder) {
  // NCCL visits distances 0 .. n-1 in the order k (k + 1) / 2 mod 2^ceil(log2 n), skipping those
  // >= n; for 16: 0, 1, 3, 6, 10, 15, 5, 12, 4, 13, 7, 2, 14, 11, 9, 8. For 5 (mod 8: 0, 1, 3,
  // 6, 2, 7, 5, 4): 0, 1, 3, 2, 4.
  EXPECT_EQ(triangular_order(16),
            (std::vector<int>{0, 1, 3, 6, 10, 15, 5, 12, 4, 13, 7, 2, 14, 11, 9, 8}));
  EXPECT_EQ(triangular_order(5), (std::vector<int>{0, 1, 3, 2, 4}));
  EXPECT_EQ(reverse_bits(1, 5), 16u);
  EXPECT_EQ(reverse_bits(3, 5), 24u);
  EXPECT_EQ(reverse_bits(37, 5), 20u);  // the low 5 bits (00101) reversed: 10100

  // 4 nodes of 8 ranks, 32 p2p channels. Round = place of the node distance x 8 + the local
  // distance; node distances in the order 0, 1, 3, 2. Every rank's sends take every round once,
  // round 0 to itself.
  std::vector<int> node_of, local_of;
  for (int r = 0; r < 32; ++r) {
    node_of.push_back(r / 8);
    local_of.push_back(r % 8);
  }
  const P2pSchedule s(node_of, local_of, 32);
  for (int i = 0; i < 32; ++i) {
    std::vector<int> seen(32, 0);
    for (int j = 0; j < 32; ++j)
      ++seen[static_cast<size_t>(s.round(i, j))];
    EXPECT_EQ(seen, std::vector<int>(32, 1)) << "rank " << i;
    EXPECT_EQ(s.round(i, i), 0);
  }
  EXPECT_EQ(s.round(0, 9), 1 * 8 + 1);   // node distance 1, local 1
  EXPECT_EQ(s.round(0, 26), 2 * 8 + 2);  // node distance 3 comes third
  EXPECT_EQ(s.round(9, 0), 2 * 8 + 7);   // distance 3 back to node 0, local 7
  // A node distance's 8 rounds share a base, bits reversed over log2 32; part p adds p.
  EXPECT_EQ(s.channel(0, 0), 0);
  EXPECT_EQ(s.channel(7, 1), 1);
  EXPECT_EQ(s.channel(8, 0), 16);
  EXPECT_EQ(s.channel(16, 1), 9);  // base 2 -> 8, + 1
  EXPECT_EQ(s.channel(24, 0), 24);

  // Nodes of unequal size (8 and 4 ranks) make one flat group of 12: rank distances in the
  // triangular order for 12 (mod 16, those below 12): 0, 1, 3, 6, 10, 5, 4, 7, 2, 11, 9, 8;
  // 8 rounds to a channel base (b = k / 8), 4 channels (2 bits reversed).
  const P2pSchedule flat({0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1}, {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3},
                         4);
  EXPECT_EQ(flat.round(0, 3), 2);
  EXPECT_EQ(flat.round(0, 5), 5);
  EXPECT_EQ(flat.round(11, 7), 11);  // distance 8, the last
  EXPECT_EQ(flat.channel(7, 0), 0);
  EXPECT_EQ(flat.channel(9, 0), 2);  // base 1, reversed over 2 bits
  EXPECT_EQ(flat.channel(9, 1), 3);
}

TEST(NcclP2pSchedule, PartsFollowNcclsSplitOfAnOperation) {
  // addP2pToPlan across nodes, step = 128 KiB (NCCL_P2P_NET_CHUNKSIZE): the fewest parts are
  // per_peer halved while per_peer x ranks > channels; start at min(fewest, ceil(bytes / 64 KiB))
  // and double, up to per_peer, while a part is over 128 KiB.
  const int64_t k = 1024, step = 128 * k;
  // 1,024 ranks, 32 channels, 2 per peer: fewest 1 (2 x 1,024 > 32).
  EXPECT_EQ(p2p_parts(1024 * k, 2, 1024, 32, step), 2);  // 1 MiB > 128 KiB: doubled once
  EXPECT_EQ(p2p_parts(200 * k, 2, 1024, 32, step), 2);   // 200 KiB > 128 KiB
  EXPECT_EQ(p2p_parts(64 * k, 2, 1024, 32, step), 1);    // 64 KiB fits one part
  // 16 ranks, 32 channels, 2 per peer: fewest 2 (2 x 16 = 32).
  EXPECT_EQ(p2p_parts(64 * k, 2, 16, 32, step), 1);   // one part of 64 KiB is enough
  EXPECT_EQ(p2p_parts(128 * k, 2, 16, 32, step), 2);  // two of 64 KiB
  EXPECT_EQ(p2p_parts(100, 2, 16, 32, step), 1);
  // 8 per peer on 16 ranks, 32 channels: fewest 2 (8 -> 4 -> 2); 8 MiB doubles to 8 parts of
  // 1 MiB and stops there (no more than per_peer).
  EXPECT_EQ(p2p_parts(8192 * k, 8, 16, 32, step), 8);
  EXPECT_EQ(p2p_parts(256 * k, 8, 16, 32, step), 2);  // 2 of 128 KiB: not over the step
  EXPECT_EQ(p2p_parts(257 * k, 8, 16, 32, step), 4);
  // One per peer (one channel): always one.
  EXPECT_EQ(p2p_parts(1 << 30, 1, 16, 1, step), 1);
}

TEST(NcclP2pSchedule, ChannelsPerPeerFollowTheRelease) {
  // The most parts of a pair's operation across nodes. NCCL 2.22 to 2.28 (paths.cc): pow2 up of
  // min(channels C, a network peer's channels), these NCCL_NCHANNELS_PER_NET_PEER where set,
  // else 2 halved while 2 x ranks > 4 C, then at least the GPU's NICs.
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, true, 2, 16, 32, 1), 2);  // 32 <= 128
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, true, 2, 64, 32, 1), 2);  // 128 <= 128
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, true, 2, 65, 32, 1), 1);  // 130 > 128
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, true, 2, 32, 16, 1), 2);  // 64 <= 64
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, true, 2, 4096, 16, 1), 1);
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, true, 2, 4096, 16, 2), 2);  // two NICs a GPU
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, true, 2, 16, 2, 4), 2);     // the channels bind
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, true, 2, 16, 3, 3), 4);     // 3 rounded up
  EXPECT_EQ(p2p_channels_per_peer(3, true, 2, 4096, 32, 1), 4);             // set: as it is
  EXPECT_EQ(p2p_channels_per_peer(8, true, 2, 16, 4, 1), 4);                // within the channels
  // Earlier releases and RCCL's model (the enqueue's nChannelsMax): pow2 up of min(C, the
  // setting or 2), halved while it times the ranks exceeds 4 x pow2 up of C; no NIC bound.
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, false, 2, 16, 32, 1), 2);
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, false, 2, 65, 32, 1), 1);
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, false, 2, 4096, 16, 2), 1);  // NICs do not count
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, false, 2, 16, 1, 1), 1);
  // 24 channels: the enqueue compares with 32 (128 <= 128), paths.cc with 24 (128 > 96).
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, false, 2, 64, 24, 1), 2);
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, true, 2, 64, 24, 1), 1);
  EXPECT_EQ(p2p_channels_per_peer(4, false, 2, 16, 32, 1), 4);  // 64 <= 128
  EXPECT_EQ(p2p_channels_per_peer(4, false, 2, 64, 32, 1), 2);  // 256 > 128, 128 <= 128
  EXPECT_EQ(p2p_channels_per_peer(1, false, 2, 16, 32, 4), 1);
  // NCCL 2.8: a network peer has 1 channel (no NCCL_NCHANNELS_PER_NET_PEER yet), whatever the
  // scale; its log on 2 p4d servers (16 ranks, 8 channels) says "1 p2p channels per peer".
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, false, 1, 16, 8, 1), 1);
  EXPECT_EQ(p2p_channels_per_peer(std::nullopt, false, 1, 2, 32, 1), 1);
  EXPECT_EQ(p2p_channels_per_peer(2, false, 1, 16, 8, 1), 2);  // a setting is the model's own
}

TEST(NcclBehaviour, AllToAllAtScaleKeepsOneConnectionAPair) {
  // 8 servers x 8 GPUs (64 ranks, 16 channels, one NIC a GPU): a network peer gets 1 channel
  // (2 x 64 > 4 x 16), so each of the 64 x 63 ordered pairs of a 1 GiB AlltoAll (16 MiB each,
  // over the network or NVLink) is one part, one flow, in NCCL 2.22 to 2.28 and, by the
  // enqueue's halving, in NCCL 2.20.3 too. NCCL_NCHANNELS_PER_NET_PEER=2 is taken as it is from
  // 2.22 (2 parts: p2p_parts' fewest 1, doubled as 16 MiB > 128 KiB) and halved before. Less
  // concurrency, the same bytes: the NICs stay the bound, so the times agree within the waves'
  // latencies.
  const std::string topo = rail_topology(8, 8);
  const std::string w = "collective: alltoall, bytes: 1GiB";
  const std::string base =
      "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, NCCL_PROTO: "
      "Simple";
  const Figures one = run_one(topo, kNoNcclLatency, w);
  const Figures old = run_one(topo, base + ", tuning_tables: \"2.20.3\"}\n", w);
  const Figures set = run_one(topo, base + ", NCCL_NCHANNELS_PER_NET_PEER: 2}\n", w);
  const Figures old_set =
      run_one(topo, base + ", tuning_tables: \"2.20.3\", NCCL_NCHANNELS_PER_NET_PEER: 2}\n", w);
  EXPECT_EQ(one.flows, 64u * 63);
  EXPECT_EQ(old.flows, 64u * 63);
  EXPECT_EQ(old_set.flows, 64u * 63);
  EXPECT_EQ(set.flows, 2u * 64 * 63);
  EXPECT_NEAR(one.seconds, set.seconds, 0.01 * set.seconds);
}

TEST(NcclClosedForm, AllToAllRunsInBatchesOfEightRounds) {
  // AlltoAll of S = 256 MiB on 32 servers of one GPU (one NIC each, no NVLink): NCCL's rounds
  // are the 32 node distances; its p2p channels are the communicator's 2 (two per NIC).
  // With NCCL_NCHANNELS_PER_NET_PEER=2 a pair's two parts of S/64 (p2p_parts: 8 MiB over
  // 128 KiB doubles one part to two) go to channels (r + p) mod 2 of its round r (bits of a
  // 1-bit base reversed: itself). Channel 0 thus holds the rank's copy to itself and 31 parts,
  // channel 1 31 parts: batches of 8 operations, 8 + 8 + 8 + 8 and 8 + 8 + 8 + 7, run one after
  // the other. Every rank's batches hold the same rounds, so in each wave a NIC sends and
  // receives the parts of both channels' batches (15, 16, 16, 15), shared equally, all ending
  // together: 62 parts of S/64 at B, and each of the 4 waves ends with its last byte's path
  // latency, L_net (PCIe, NIC links, leaf) before the next starts:
  //   T = 62 S / (64 B) + 4 L_net,
  // where the parts all at once (a single batch) would take 62 S / (64 B) + L_net.
  const double s = 256 * kMiB;
  const Figures w = run_one(
      rail_topology(32, 1),
      "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, NCCL_PROTO: "
      "Simple, NCCL_NCHANNELS_PER_NET_PEER: 2}\n",
      "collective: alltoall, bytes: 256MiB");
  EXPECT_NEAR(w.seconds, 62 * s / (64 * kB) + 4 * kLnet, 2e-9);
  // NCCL's own default at this scale (2.22 to 2.28) is one channel a network peer (2 x 32
  // ranks > 4 x 2 channels): a pair is one part of S/32 on channel r mod 2, channel 0 holding
  // the copy to itself and 15 parts (batches of 8 and 8), channel 1 16 (8 and 8): two waves of
  // 15 and 16 parts, T = 31 S / (32 B) + 2 L_net.
  const Figures d =
      run_one(rail_topology(32, 1), kNoNcclLatency, "collective: alltoall, bytes: 256MiB");
  EXPECT_NEAR(d.seconds, 31 * s / (32 * kB) + 2 * kLnet, 2e-9);
  // NCCL_MAX_P2P_NCHANNELS = 1: one p2p channel holds the copy to itself and all 31 parts of
  // S/32, batches of 8 operations: 7, 8, 8, 8 parts in turn, T = 31 S / (32 B) + 4 L_net.
  const Figures one = run_one(
      rail_topology(32, 1),
      "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, NCCL_PROTO: "
      "Simple, NCCL_MAX_P2P_NCHANNELS: 1}\n",
      "collective: alltoall, bytes: 256MiB");
  EXPECT_NEAR(one.seconds, 31 * s / (32 * kB) + 4 * kLnet, 2e-9);
}

TEST(NcclClosedForm, GatherWithOneChannelWaitsForEachBatch) {
  // Gather of S = 256 MiB to rank 0 on 16 servers of one GPU with one channel (NCCL_MAX_NCHANNELS
  // 1: one p2p channel, so p2pnChannelsPerPeer is 1 and each operation one part of S/16): the
  // root's channel holds its copy to itself, then the receives of rounds 1-15 in round order:
  // batches of 8 operations hold 7 and 8 receives. A sender's one send waits for the root's
  // batch that holds it. Each batch's receives share the root's NIC:
  //   T = (7 + 8) S / (16 B) + 2 L_net = 15/16 S / B + 2 L_net.
  // (With NCCL_NCHANNELS_PER_NET_PEER's two parts a pair whatever the channels, batches held 7,
  // 8, 8 and 7 parts and T took 4 L_net.)
  const double s = 256 * kMiB;
  const Figures w = run_one(rail_topology(16, 1),
                            "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: "
                            "0s, NCCL_PROTO: Simple, "
                            "NCCL_MAX_NCHANNELS: 1}\n",
                            "collective: gather, bytes: 256MiB");
  EXPECT_NEAR(w.seconds, 15.0 / 16 * s / kB + 2 * kLnet, 2e-9);
}

TEST(NcclClosedForm, OneRankCopiesInItsOwnMemory) {
  // NCCL's one-rank path runs no algorithm: out of place, a collective is a device-to-device
  // copy (cudaMemcpyAsync) that reads and writes S in the GPU's memory, T = L_copy + 2 S /
  // (B_mem e); AlltoAll is a send to itself, the same copy inside NCCL's kernel after its
  // launch (0 here). B_mem = 2 TB/s, e = 0.8, L_copy = 3 us: 1 GiB takes 3 us + 1342.18 us.
  const std::string one_gpu =
      "topology: {type: rail_optimized, nodes: 1, nodes_per_leaf: 1, node: {gpus: 1, "
      "gpu_memory_bandwidth: 2TB/s, gpu_copy_efficiency: 0.8, gpu_copy_latency: 3us}, "
      "leaf: {uplinks: 1}, spine: {count: 1}}\n";
  const double s = kGiB, copy = 2 * s / (2e12 * 0.8);
  for (const char* c : {"allreduce", "allgather", "reducescatter", "broadcast"}) {
    const Figures w =
        run_one(one_gpu, kNoNcclLatency, fmt::format("collective: {}, bytes: 1GiB", c));
    EXPECT_NEAR(w.seconds, 3e-6 + copy, 2e-12) << c;
    EXPECT_EQ(w.notes.at("algorithm"), "copy") << c;
    EXPECT_EQ(w["nccl_model_us"], 0) << c;  // NCCL's tuner is not asked
  }
  const Figures a2a = run_one(one_gpu, kNoNcclLatency, "collective: alltoall, bytes: 1GiB");
  EXPECT_NEAR(a2a.seconds, copy, 2e-12);
  EXPECT_EQ(a2a.notes.at("algorithm"), "p2p");
}

TEST(NcclClosedForm, NvlinkPairsUseTheP2pTransportWindow) {
  // One server, 2 GPUs: Send/Recv 0 -> 1 and 1 -> 0, each over its own NVLink directions, path
  // latency L = L_nvl. A pair may have 8 chunks of NCCL_P2P_NVL_CHUNKSIZE unacknowledged per
  // round trip 2 L (NCCL's hop latency off). Default 512 KiB: 4 MiB per 1 us, above NVLink's
  // 450 GB/s, so T = S / 450 GB/s + L. With 4 KiB chunks the window binds at 32 KiB / 2L:
  // T = S x 2L / 32 KiB + L. NCCL keeps a chunk within an eighth of Simple's buffer
  // (computeBuffSizes): NCCL_BUFFSIZE = 32 KiB makes the chunks 4 KiB too.
  const double s = 64 * kMiB;
  const Figures fast =
      run_one(rail_topology(1, 2), kNoNcclLatency, "collective: sendrecv, bytes: 64MiB");
  EXPECT_NEAR(fast.seconds, s / 450e9 + kLnvl, 2e-9);
  const Figures slow = run_one(rail_topology(1, 2), kNoNcclLatency,
                               "collective: sendrecv, bytes: 64MiB, "
                               "nccl: {NCCL_P2P_NVL_CHUNKSIZE: 4KiB}");
  EXPECT_NEAR(slow.seconds, s * 2 * kLnvl / (32 * 1024) + kLnvl, 2e-9);
  const Figures bounded = run_one(rail_topology(1, 2), kNoNcclLatency,
                                  "collective: sendrecv, bytes: 64MiB, "
                                  "nccl: {NCCL_BUFFSIZE: 32KiB}");
  EXPECT_NEAR(bounded.seconds, slow.seconds, 1e-12);
}

TEST(NcclClosedForm, BroadcastIsAPipelinedChain) {
  // Broadcast of S = 64 GiB from rank 0, Simple: each channel is a chain of n - 1 = 31 edges
  // along its ring from the root, moving S/16 at B/2 (the rail NICs carry two channels each):
  // bandwidth term S / (8 B). A rank forwards each step (512 KiB, chunk = slice for Broadcast)
  // as soon as it has it, so the last rank's data trails by the chain's latency plus a slice
  // through each edge but the slowest, each edge at its own pace: a network edge at B/2, an
  // NVLink edge at 450 GB/s over the 16 channels whose chains cross the GPU's link (14 on the
  // root's own link, which two channels leave by the network). The slowest channels (rails 1-7)
  // enter the root's server through the root's NVLink predecessor, so their chain holds all 4
  // network edges and 27 NVLink edges, the first from the root: 27 L_nvl + 4 L_pxn, and
  // 3 slices at B/2, 26 at 450 GB/s / 16 and one at 450 GB/s / 14.
  // That is the steady state, where every channel's stage on a link runs beside every other's.
  // A chain of N = S / 16 / slice = 8192 slices keeps stage k busy N slice times from k, and a
  // channel d <= 30 stages away shares a link (N - d) / N of that time: each NVLink stage's load
  // is between (1 - 30 / N) and 1 times the steady one, so the time lies between the steady
  // state's and that less 27 x 16 x 30 / N slices at 450 GB/s (1.8 us of 176 ms). (Stage loads
  // at fewer slices: ATreeOfFewSlicesCrossesEachStageAlone.)
  const double s = 64 * kGiB, slice = 512 * 1024, nvlink = 450e9, n = s / 16 / slice;
  const Figures w =
      run_one(rail_topology(4, 8), kNoNcclLatency, "collective: broadcast, bytes: 64GiB");
  const double steady = s / (8 * kB) + 27 * kLnvl + 4 * kLpxn + 3 * slice / (kB / 2) +
                        26 * slice / (nvlink / 16) + slice / (nvlink / 14);
  EXPECT_LE(w.seconds, steady + 2e-9);
  EXPECT_GE(w.seconds, steady - 27 * 16 * 30 / n * slice / nvlink - 2e-9);
  EXPECT_NEAR(w["busbw_GBps"], w["algbw_GBps"], 1e-12);  // factor 1
}

TEST(NcclRingFill, TheDelayIsTheHeaviestPathOfTheStepRecurrence) {
  // ring_delay against the recurrence it solves, run step by step: with own pace c and edge
  // times a_e = c + g_e, T(p, 0) = 0 and T(p, j) = max(T(p, j-1) + c, T(p-1, j-1) + a_{p-1});
  // the last step starts at max_p T(p, K-1) = (K-1) c + delay.
  const auto recurrence = [](const std::vector<double>& gain, int k) {
    const size_t n = gain.size();
    const double c = 10;
    std::vector<double> t(n, 0), next(n);
    for (int j = 1; j < k; ++j) {
      for (size_t p = 0; p < n; ++p) {
        const size_t up = (p + n - 1) % n;
        next[p] = std::max(t[p] + c, t[up] + c + gain[up]);
      }
      t.swap(next);
    }
    return *std::max_element(t.begin(), t.end()) - (k - 1) * c;
  };
  // By hand: alike edges, g = 2: 2 per move; g = -1: never behind. One gaining arc and a losing
  // lap ({2, -1, 2, -6}: edges 0-2 gain 3, a lap -3): 3 however long the ring runs, 2 with two
  // moves. A gaining lap ({2, -1, 2, -1}: +2 a lap) over 9 moves: start at edge 0, 2 laps and
  // edge 0 again = 6.
  EXPECT_DOUBLE_EQ(ring_delay({2, 2, 2, 2}, 10), 20);
  EXPECT_DOUBLE_EQ(ring_delay({-1, -1, -1}, 10), 0);
  EXPECT_DOUBLE_EQ(ring_delay({2, -1, 2, -6}, 100), 3);
  EXPECT_DOUBLE_EQ(ring_delay({2, -1, 2, -6}, 2), 2);
  EXPECT_DOUBLE_EQ(ring_delay({2, -1, 2, -1}, 9), 6);
  EXPECT_DOUBLE_EQ(ring_delay({2, -1, 2, -1}, 10), 6);
  // Mixed rings of every kind: a ring of 8 ranks with 2 network edges (gain = L_net - c/2 at
  // Simple's half-chunk slices) and NVLink edges, from bandwidth- to latency-bound, and random
  // gains.
  for (const double chunk : {0.5, 2.0, 3.0, 4.0, 8.0}) {
    std::vector<double> gain(8, 0.5 - chunk / 2);
    gain[3] = gain[7] = 2.3 - chunk / 2;
    for (const int k : {1, 2, 5, 8, 9, 17, 40})
      EXPECT_NEAR(ring_delay(gain, k - 1), recurrence(gain, k), 1e-9) << chunk << " " << k;
  }
  uint64_t x = 12345;
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> gain(2 + trial % 9);
    for (double& g : gain) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      g = static_cast<double>(x >> 40) / static_cast<double>(1ULL << 24) * 4 - 2.2;
    }
    for (const int k : {2, 7, 30})
      EXPECT_NEAR(ring_delay(gain, k - 1), recurrence(gain, k), 1e-9) << trial << " " << k;
  }
}

TEST(NcclClosedForm, ATreeOfFewSlicesCrossesEachStageAlone) {
  // Tree/Simple AllReduce on 2 single-GPU servers with 100G NICs (B = payload rate), 2 channels
  // on the one NIC each: channel 0 goes up 1 -> 0 (stage 0) and down 0 -> 1 (stage 1), channel
  // 1, on the mirrored tree, up 0 -> 1 and down 1 -> 0. A NIC's send side carries one channel's
  // up and the other's down: 2 streams in the steady state, so each channel moves at r = B/2
  // (below the Tree/Simple kernel's per-channel throughput). Fill: both legs' latencies, 2 L_net,
  // and a slice s through every stage but the slowest, each at its own pace. With N slices,
  // the other channel's stage, one slice behind, shares each NIC (N - 1) / N of the time: the
  // stage's load is 1 + (N - 1) / N, its pace B / (2 - 1/N), and
  // T = D / (B/2) + 2 L_net + s (2 - 1/N) / B.
  //  * 64 KiB: D = 32 KiB a channel, one slice (N = 1): while it goes up, nothing goes down, so
  //    each stage has the NIC to itself: T = D / (B/2) + 2 L_net + s / B = 3 s / B + 2 L_net.
  //  * The chunk is a step, 512 KiB (calcCollChunking of the later releases halves no Tree/Simple
  //    chunk): 4 MiB, D = 2 MiB: N = 4; 2,000 KiB, D = 1,000 KiB: N = 1.95, a partial last
  //    slice and no whole count of slices.
  //  * NCCL 2.8 (computeColl) halves it while a channel has fewer than 8, 4 and 1 chunks per
  //    level of the tree's depth (here ppn - 1 + log2(2) = 1; down to 128, 64 and 32 KiB): 4
  //    MiB, 256 KiB and N = 8; 2,000 KiB, 128 KiB and N = 7.8125.
  const std::string topo = rail_topology(2, 1, "100Gbps");
  const double b = test::roce_payload(100e9);
  const auto time = [&](const char* bytes, const char* tables) {
    const Figures w = run_one(
        topo,
        fmt::format("nccl: {{tuning_tables: \"{}\", hop_latency_factor: 0, launch_latency: 0s, "
                    "proxy_post_latency: 0s, NCCL_PROTO: Simple}}\n",
                    tables),
        fmt::format("collective: allreduce, bytes: {}, nccl: {{NCCL_ALGO: Tree}}", bytes));
    EXPECT_EQ(w.notes.at("algorithm"), "Tree");
    EXPECT_EQ(w["channels"], 2);
    return w.seconds;
  };
  const auto tree = [&](double d, double s) {
    const double n = std::max(1.0, d / s);
    return d / (b / 2) + 2 * kLnet + std::min(s, d) * (2 - 1 / n) / b;
  };
  const double small = 32 * 1024.0, d = 2 * kMiB, part = 1000 * 1024.0, step = 512 * 1024.0;
  EXPECT_NEAR(time("64KiB", "newest"), 3 * small / b + 2 * kLnet, 2e-9);
  EXPECT_NEAR(time("4MiB", "newest"), tree(d, step), 2e-9);
  EXPECT_NEAR(time("2000KiB", "newest"), tree(part, step), 2e-9);
  EXPECT_NEAR(time("64KiB", "2.8.3"), 3 * small / b + 2 * kLnet, 2e-9);
  EXPECT_NEAR(time("4MiB", "2.8.3"), tree(d, 256 * 1024.0), 2e-9);
  EXPECT_NEAR(time("2000KiB", "2.8.3"), tree(part, 128 * 1024.0), 2e-9);
}

TEST(NcclClosedForm, AnOperationRepeatedAfterALinkChangesTakesTheNewPace) {
  // A runner keeps the stage paces of its last operation for the same operation again on the
  // same paths and capacities (nccl-tests' iterations). The 2-node tree above, 4 MiB: a NIC's
  // uplink slows from 100 to 50 Gb/s during the first of two back-to-back operations, so the
  // second runs wholly on the slower link, as an operation started on it would:
  // T(2 operations) - T(1 operation) = T(1 operation started after the change).
  const std::string topo = rail_topology(2, 1, "100Gbps");
  const std::string nccl =
      "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, NCCL_PROTO: "
      "Simple}\n";
  const auto time = [&](const char* at, int iterations, const char* start) {
    return run(fmt::format("{}{}events:\n  - {{at: {}, action: speed, speed: 50Gbps, link: "
                           "[node0/nic0, rail0/leaf0]}}\nworkloads:\n  - {{name: w, type: nccl, "
                           "collective: allreduce, bytes: 4MiB, iterations: {}, start: {}, "
                           "nccl: {{NCCL_ALGO: Tree}}}}\n",
                           topo, nccl, at, iterations, start))
        .at("w")
        .seconds;
  };
  const double one = time("100us", 1, "0s"), two = time("100us", 2, "0s");
  const double after = time("0s", 1, "10us");
  EXPECT_GT(after, time("1s", 1, "0s") * 1.5);  // the slower link binds
  EXPECT_NEAR(two - one, after, 2e-9);
}

TEST(NcclClosedForm, Ll128CrossesTheNetworkAStepAtATime) {
  // LL128's lines carry 120 of 128 bytes, so D of data is D_w = D x 128/120 on the wire. Through
  // NVLink LL128 forwards line by line, but NCCL's proxy sends a buffer step over the network
  // (NCCL_LL128_BUFFSIZE / 8 = 600 KiB of wire) only once all its lines have arrived. Two
  // single-GPU servers with 100G NICs, 2 channels on the one NIC each, as in
  // ATreeOfFewSlicesCrossesEachStageAlone: every leg is a network leg.
  // Tree: both stages take a channel's data a step at a time, and a Tree/LL128 step holds
  // NCCL's chunk (enqueue.cc): a step's data, 576000 B, halved while a channel's D holds fewer
  // than 64 / ppn chunks for each of the tree's 1 + log2(nodes) + ppn / 10 = 2.1 steps (134.4)
  // and the chunk is above 128 KiB, then fewer than 16 / ppn (33.6) and above 32 KiB. With N
  // = D_w / s_w pieces, the other channel's stage shares each NIC (N - 1) / N of the time:
  // T = D_w / (B/2) + 2 L_net + s_w (1 + (N - 1) / N) / B.
  //  * 256 KiB: D = 128 KiB: 0 chunks of 576000, 1 of 288000, 144000 and 72000 (the first rule
  //    stops at 128 KiB), then 3 of 36000: s = 18000 B, s_w = 19200, N = 7.28 (with a step of
  //    600 KiB, one piece: 3 D_w / B + 2 L_net, 8.5 us more).
  //  * 64 MiB: D = 32 MiB: 58 and 116 chunks of 576000 and 288000, 233 of 144000: s_w = 153600,
  //    N = 233.0.
  //  * 40 MB: D = 2e7 B: 34, 69 and 138 chunks: s_w = 153600. NCCL 2.8 halves the step's
  //    wire bytes instead (614400: 32, 65 and 130 chunks of 307200 and 153600, then 76800):
  //    s_w = 76800.
  // Ring, 64 MiB: chunks of one step of data (576000 B) for each of the n = 2 ranks, so
  // ceil(D / (2 x 576000)) = 30 loops of 2 (n - 1) = 2 steps, K = 60. Each step waits for its
  // upstream's chunk, which crossed the network whole: a chunk to fill it at the channel's
  // rate r = B/2, then L_net to cross, and the receiver forwards from the first line on; so
  // every step in the chain of K adds L_net to its own c / r: T = D_w / (B/2) + K L_net (line by
  // line the wire would hide under c / r, leaving L_net once).
  const std::string topo = rail_topology(2, 1, "100Gbps");
  const double b = test::roce_payload(100e9);
  const auto time = [&](const char* algorithm, const char* bytes) {
    const Figures w =
        run_one(topo, "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s}\n",
                fmt::format("collective: allreduce, bytes: {}, nccl: {{NCCL_ALGO: {}, "
                            "NCCL_PROTO: LL128}}",
                            bytes, algorithm));
    EXPECT_EQ(w.notes.at("algorithm"), algorithm);
    EXPECT_EQ(w.notes.at("protocol"), "LL128");
    EXPECT_EQ(w["channels"], 2);
    return w.seconds;
  };
  const auto tree = [&](double d, double s) {
    const double n = d / s;
    return d / (b / 2) + 2 * kLnet + s * (2 - 1 / n) / b;
  };
  EXPECT_NEAR(time("Tree", "256KiB"), tree(128 * 1024.0 * 128 / 120, 19200), 2e-9);
  const double large = 32 * kMiB * 128 / 120;
  EXPECT_NEAR(time("Tree", "64MiB"), tree(large, 153600), 2e-9);
  const double d40 = 2e7 * 128 / 120;
  EXPECT_NEAR(time("Tree", "40MB"), tree(d40, 153600), 2e-9);
  const Figures w28 =
      run_one(topo,
              "nccl: {tuning_tables: \"2.8.3\", hop_latency_factor: 0, launch_latency: 0s, "
              "proxy_post_latency: 0s}\n",
              "collective: allreduce, bytes: 40MB, nccl: {NCCL_ALGO: Tree, NCCL_PROTO: LL128}");
  EXPECT_EQ(w28["channels"], 2);
  EXPECT_NEAR(w28.seconds, tree(d40, 76800), 2e-9);
  EXPECT_NEAR(time("Ring", "64MiB"), large / (b / 2) + 60 * kLnet, 2e-9);
}

TEST(NcclClosedForm, ATreesNetworkStepsLeaveAStepCostApart) {
  // The tree of Ll128CrossesTheNetworkAStepAtATime at 256 KiB: a channel's D_w = 128 KiB x
  // 128/120 of wire in N = D_w / s_w = 7.28 steps of s_w = 19200 B. A network step's fixed cost
  // c is the proxy's posting time of the other channel: (C - 1) x 10 us = 10 us (NCCL's hop
  // latencies off). The first step leaves at once and each later one c after the one before,
  // so the channel moves at D_w s_w / ((D_w - s_w) c) = 2.23 GB/s, below its B/2 = 6.13 GB/s on
  // the NIC, and its data takes (N - 1) c instead of D_w / (B/2); each of the two hops also
  // waits c more. The slices' way through the stages is the same (both stages' paces are above
  // either rate): T = T(c = 0) - D_w / (B/2) + (N + 1) c.
  const std::string topo = rail_topology(2, 1, "100Gbps");
  const double b = test::roce_payload(100e9);
  const auto time = [&](const char* post, const char* protocol) {
    const Figures w = run_one(
        topo,
        fmt::format("nccl: {{hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: {}}}\n",
                    post),
        fmt::format("collective: allreduce, bytes: 256KiB, nccl: {{NCCL_ALGO: Tree, NCCL_PROTO: "
                    "{}}}",
                    protocol));
    EXPECT_EQ(w["channels"], 2);
    return w.seconds;
  };
  const double d = 128 * 1024.0 * 128 / 120, n = d / 19200, c = 10e-6;
  EXPECT_NEAR(time("10us", "LL128"), time("0s", "LL128") - d / (b / 2) + (n + 1) * c, 2e-9);
  // Simple's steps, whose chunks are far larger, pay c once a hop only.
  EXPECT_NEAR(time("10us", "Simple"), time("0s", "Simple") + 2 * c, 2e-9);
}

TEST(NcclClosedForm, PatSendsEachRankTheBlocksOfItsDimensions) {
  // PAT AllGather of S on n = 4 single-GPU servers (one leaf), 2 channels on the one NIC each:
  // k = 2 dimensions; rank r sends dimension 0's blocks (offsets 1 and 3: 2 blocks of S/4) to
  // r - 1 and dimension 1's (offset 2: 1 block) to r - 2, 3 S/4 in all, as a ring would. Every
  // NIC sends and receives 3 S/4 and is busy throughout: 3 S / (4 B). Then the chunk's way
  // through the other dimension, its wire L_net (the last delivery paid one), and with NCCL's
  // latencies on, per dimension its interLat / 3.5 = 14 / 3.5 = 4 us less the reference wire
  // L_net, and 2.8 us per rank: 2 (4 - 1.8) + 4 x 2.8 = 15.6 us. ReduceScatter, the transpose,
  // moves the same bytes the other way.
  const double s = 64 * kMiB;
  const auto time = [&](const char* collective, const char* nccl) {
    const Figures w =
        run_one(rail_topology(4, 1), nccl,
                fmt::format("collective: {}, bytes: 64MiB, nccl: {{NCCL_ALGO: PAT}}", collective));
    EXPECT_EQ(w.notes.at("algorithm"), "PAT");
    EXPECT_EQ(w.notes.at("protocol"), "Simple");
    EXPECT_EQ(w["channels"], 2);
    return w.seconds;
  };
  const char* off = "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s}\n";
  const char* on = "nccl: {launch_latency: 0s}\n";
  EXPECT_NEAR(time("allgather", off), 0.75 * s / kB + 2 * kLnet, 2e-9);
  EXPECT_NEAR(time("reducescatter", off), 0.75 * s / kB + 2 * kLnet, 2e-9);
  EXPECT_NEAR(time("allgather", on), 0.75 * s / kB + 2 * kLnet + 15.6e-6, 2e-9);
}

TEST(NcclBehaviour, PatBeatsTheRingOnSmallAllGathersAcrossManyServers) {
  // 64 single-GPU servers: a ring's AllGather pays 63 network steps, PAT's 6 dimensions and a
  // linear kernel cost. The tuner takes PAT at 1 MiB (NcclTuning.PatForOneRankPerServer: 240
  // us against Ring/LL's 373) and the simulation agrees (232 against 372 us, Ring/LL forced as
  // Ring); with 8 GPUs a server NCCL never offers it.
  const auto run_ag = [&](int nodes, int gpus, const char* algo) {
    return run_one(
        rail_topology(nodes, gpus), "",
        fmt::format("collective: allgather, bytes: 1MiB, nccl: {{NCCL_ALGO: {}}}", algo));
  };
  const Figures chosen = run_ag(64, 1, "auto");
  EXPECT_EQ(chosen.notes.at("algorithm"), "PAT");
  EXPECT_LT(chosen.seconds, 0.7 * run_ag(64, 1, "Ring").seconds);
  EXPECT_EQ(run_ag(8, 8, "auto").notes.at("algorithm"), "Ring");
}

TEST(NcclClosedForm, InNetworkReductionHalvesTheWireBytesOfAllReduce) {
  // CollNet (SHARP-style) AllReduce on 4 single-GPU servers (no NVSwitch: CollNetChain, whose
  // chains are empty with one GPU a server), 2 channels on the one 100 Gb/s NIC (B) each:
  // every rank sends its S/2 per channel up once and receives the reduced S/2 once; the switch
  // combines the streams, so a NIC link carries one stream per channel at B/2. Bandwidth term
  // (S/2) / (B/2) = S / B, against 2(n-1)/n x S / B = 1.5 S / B for the ring: CollNet's own bus
  // bandwidth factor is 1 (reported as collnet_busbw_GBps; busbw keeps nccl-tests' 2(n-1)/n).
  // Fill: one leg's latency up and down through the leaf (2p + 2n + f = L_net) plus one chunk at
  // B/2 (2 hops: to the switch and back), NCCL's CollNetChain chunk (calcCollChunking): at most
  // 256 KiB of the 512 KiB step, halved only below 64 chunks a channel per rank of the chain
  // (here 512). The tree kernel's throughput (Hopper, 4 nodes: 36 GB/s of bus bandwidth per
  // graph channel, 9 GB/s of data a channel) is above B/2.
  const double s = 256 * kMiB, chunk = 256 * 1024, b = test::roce_payload(100e9);
  const std::string nccl =
      "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, "
      "NCCL_COLLNET_ENABLE: 1}\n";
  const Figures cn = run_one(rail_topology(4, 1, "100Gbps"), nccl,
                             "collective: allreduce, bytes: 256MiB, nccl: {NCCL_ALGO: CollNet}");
  EXPECT_EQ(cn.notes.at("algorithm"), "CollNetChain");
  EXPECT_NEAR(cn.seconds, s / b + kLnet + chunk / (b / 2), 2e-9);
  EXPECT_NEAR(cn["collnet_busbw_GBps"], cn["algbw_GBps"], 1e-12);
  const Figures ring = run_one(rail_topology(4, 1, "100Gbps"), nccl,
                               "collective: allreduce, bytes: 256MiB, nccl: {NCCL_ALGO: Ring}");
  EXPECT_NEAR(ring.seconds / cn.seconds, 1.5, 0.01);
}

TEST(NcclClosedForm, CollNetChainMovesAtTheTreeKernelsThroughput) {
  // NCCL's CollNetChain kernel is the tree's (each CTA's threads split between the reduction up
  // the chain and the broadcast down), so a channel moves at most the tree kernel's throughput:
  // perChMaxTreeBw per channel of NCCL's graph, a bus bandwidth counting the data up and down.
  // Hopper, 4 nodes: 36 GB/s a graph channel; one graph channel (one NIC a server) run as 2:
  // 18 GB/s a channel, 9 GB/s of data, below B/2 = 24.5 GB/s. Each channel carries S/2, so the
  // data take S / 18 GB/s; the fill is the previous test's (stages at the links' pace B/2, a
  // chunk of 256 KiB).
  const double s = 256 * kMiB, chunk = 256 * 1024, kernel = 36e9 / 2 / 2;
  const std::string nccl =
      "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, "
      "NCCL_COLLNET_ENABLE: 1}\n";
  const Figures cn = run_one(rail_topology(4, 1), nccl,
                             "collective: allreduce, bytes: 256MiB, nccl: {NCCL_ALGO: CollNet}");
  EXPECT_EQ(cn.notes.at("algorithm"), "CollNetChain");
  EXPECT_EQ(cn["channels"], 2);
  EXPECT_NEAR(cn.seconds, s / 2 / kernel + kLnet + chunk / (kB / 2), 2e-9);
}

TEST(NcclClosedForm, Nccl28CollNetWithLlMovesASixthOfItsGraph) {
  // NCCL 2.8's CollNet with LL moves its graph's bandwidth x 0.9 / 6 (GDR read disabled on both
  // sides), a bus bandwidth counting the data up and down. 4 nodes of one GPU and one NIC (B,
  // the PCIe path wider), one graph channel run as 2: 0.9 / 6 x B / 2 a channel, half of it
  // data, under LL's own cap (llMaxBw 20.4 GB/s over 2 channels). Each channel carries S / 2:
  // S / 2 / (0.0375 B), the fill a few steps of microseconds against 18 ms.
  const std::string topology = R"(topology:
  type: rail_optimized
  nodes: 4
  nodes_per_leaf: 4
  node: {gpus: 1, nic_speed: 400Gbps, pcie_bandwidth: 1600Gbps, pcie_latency: 500ns}
  leaf: {uplinks: 4, latency: 600ns}
  spine: {count: 4, latency: 3us}
)";
  const std::string nccl =
      "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, "
      "NCCL_COLLNET_ENABLE: 1, "
      "tuning_tables: \"2.8.3\"}\n";
  const Figures cn = run_one(topology, nccl,
                             "collective: allreduce, bytes: 64MiB, "
                             "nccl: {NCCL_ALGO: CollNet, NCCL_PROTO: LL}");
  EXPECT_EQ(cn.notes.at("algorithm"), "CollNetChain");
  EXPECT_EQ(cn.notes.at("protocol"), "LL");
  const double bandwidth = 64 * kMiB / 2 / (0.0375 * kB);
  EXPECT_NEAR(cn.seconds, bandwidth, 0.002 * bandwidth);
  EXPECT_GT(cn.seconds, bandwidth);
}

TEST(NcclClosedForm, CollNetDirectScattersToEveryHeadAndBroadcastsBack) {
  // CollNetDirect AllReduce of S = 256 MiB on 2 servers of 2 GPUs behind an NVSwitch (C = 450
  // GB/s a GPU link), each GPU with its own NIC (B): both GPUs are heads, 4 channels (2 per
  // NIC). Per channel (D = S/4) each GPU sends the other head the half it reduces (scatter) and,
  // once the switches have added the servers' halves, that half of the result back (broadcast):
  // D/2 + D/2 on each GPU link, 4 D over the 4 channels. Each NIC carries D/2 up and down per
  // channel, 2 D over all: the NICs bind, a channel runs at r = B/2, and the data takes
  // D / r = S / (2 B), a server's S over its two NICs.
  // Fill: the scatter hop, a leg through the switch and the broadcast hop (2 L_nvl + L_net),
  // then a step of both heads' chunks, s = 2 x 256 KiB (a step of 512 KiB halved while a head
  // has fewer than 64 x depth 2 chunks a channel), through every stage but the slowest: the
  // scatter and the broadcast at their pace over a GPU link that every channel's scatter and
  // broadcast share, half a channel's data each: the 4 scatters whole and the 4 broadcasts,
  // 3 stages away, for (N - 3) / N of the time, N = D / s = 128 slices: a load of
  // 2 + 2 x 125/128; one of the two network stages at r: 2 s load / C + s / (B / 2).
  const auto topology = R"(topology:
  type: clos
  racks: 1
  nodes_per_rack: 2
  node: {gpus: 2, nic_speed: 400Gbps, pcie_bandwidth: 400Gbps, pcie_latency: 500ns,
         nvlink_bandwidth: 450GB/s, nvlink_latency: 250ns}
  leaf: {uplinks: 4, latency: 600ns}
  spine: {count: 4, latency: 3us}
  nic_link_latency: 100ns
  link_latency: 1us
)";
  const std::string nccl =
      "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, "
      "NCCL_COLLNET_ENABLE: 1}\n";
  const Figures d = run_one(
      topology, nccl, "collective: allreduce, bytes: 256MiB, nccl: {NCCL_ALGO: CollNetDirect}");
  EXPECT_EQ(d.notes.at("algorithm"), "CollNetDirect");
  EXPECT_EQ(d["channels"], 4);
  const double s = 256 * kMiB, c = 450e9, slice = 512 * 1024;
  const double load = 2 + 2 * 125.0 / 128;
  EXPECT_NEAR(d.seconds, s / (2 * kB) + 2 * kLnvl + kLnet + 2 * slice * load / c + slice / (kB / 2),
              2e-9);
}

TEST(NcclClosedForm, NvlsAcrossNodesReducesInTheSwitches) {
  // NVLS AllReduce of S = 4 GiB on 2 servers of 8 GPUs (NVSwitch, C = 450 GB/s a GPU link, NVLS
  // efficiency e = 0.85), one NIC a GPU (B), CollNet enabled: 8 heads, 16 channels. Inside a
  // node NVLS reduces each head's share through the NVSwitch and multicasts the result back:
  // each GPU link carries (1 + 1/8) S / e, an algorithm bandwidth of C e / 1.125 = 340 GB/s.
  // Between the nodes each head sends its S/8 through its NIC into the switches' reduction and
  // receives the sum back: a NIC carries S/8 each way, 8 B = 392 GB/s a node. NVLink binds,
  // every channel at r = 340 / 16 = 21.25 GB/s. Fill: the NVLS hop and a leg through the rail
  // switch (L_nvl + L_net), and a step of the 8 heads' chunks (8 x 128 KiB = 1 MiB) through
  // the 3 of the 4 stages (NVLS reduction, up, down, NVLS broadcast) after the first, at r
  // (every leg serves two stages: all move at the channel's pace).
  const std::string nccl =
      "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, NCCL_ALGO: NVLS";
  const Figures sharp = run_one(rail_topology(2, 8), nccl + ", NCCL_COLLNET_ENABLE: 1}\n",
                                "collective: allreduce, bytes: 4GiB");
  EXPECT_EQ(sharp.notes.at("algorithm"), "NVLS");
  EXPECT_EQ(sharp["channels"], 16);
  const double s = 4 * kGiB, r = 450e9 * 0.85 / 1.125 / 16;
  EXPECT_NEAR(sharp.seconds, s / (16 * r) + 3 * kMiB / r + kLnvl + kLnet, 2e-9);
  EXPECT_NEAR(sharp["collnet_busbw_GBps"], sharp["algbw_GBps"], 1e-12);
  // Without CollNet NCCL does not offer NVLS across nodes: the forced choice falls back to a
  // ring.
  const Figures plain =
      run_one(rail_topology(2, 8), nccl + "}\n", "collective: allreduce, bytes: 4GiB");
  EXPECT_EQ(plain.notes.at("algorithm"), "Ring");
}

TEST(NcclClosedForm, NvlsAllGatherAndReduceScatterAreOneStepThroughTheSwitch) {
  // One server of 8 GPUs (NVSwitch, C = 450 GB/s a GPU link, NVLS efficiency e = 0.85), S =
  // 1 GiB, NVLS forced, latencies off. AllGather: each GPU stores its share once through the
  // NVSwitch, which writes it to every GPU, so a GPU's link receives S (and sends S/8);
  // ReduceScatter: each GPU reads its share reduced, every link sending S (receiving S/8). The
  // model puts S/e on each GPU link both ways: T = S / (C e) + L_nvl (one NVLS step, no fill:
  // a single stage).
  const std::string nccl =
      "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, NCCL_ALGO: "
      "NVLS}\n";
  const double s = kGiB, expected = s / (450e9 * 0.85) + kLnvl;
  for (const char* c : {"allgather", "reducescatter"}) {
    const Figures f =
        run_one(rail_topology(1, 8), nccl, fmt::format("collective: {}, bytes: 1GiB", c));
    EXPECT_EQ(f.notes.at("algorithm"), "NVLS") << c;
    EXPECT_EQ(f["channels"], 16) << c;
    EXPECT_NEAR(f.seconds, expected, 2e-9) << c;
  }
  // Across servers NCCL offers it only through its CollNet plugin's allgather (not modelled):
  // a forced NVLS falls back to a ring.
  EXPECT_EQ(run_one(rail_topology(2, 8), "nccl: {NCCL_ALGO: NVLS, NCCL_COLLNET_ENABLE: 1}\n",
                    "collective: allgather, bytes: 1GiB")
                .notes.at("algorithm"),
            "Ring");
}

TEST(NcclClosedForm, CreditWindowBoundsAChannelToOneBufferPerRoundTrip) {
  // Two single-GPU servers, NIC cables of 25 us: one-way latency L = 2p + 2n + f = 51.6 us.
  // NCCL_BUFFSIZE = 256 KiB: a channel may have one buffer unacknowledged per round trip, so it
  // runs at r = 256 KiB / 2L = 2.5 GB/s, far below B/2. Ring AllReduce of S = 8 MiB, 2 ranks,
  // 2 channels of D = 4 MiB; steps of 32 KiB, chunks c = 128 KiB, slices s = 64 KiB, so D takes
  // 16 loops of 2 ring steps: K = 32 steps of c. At r, c/r = L and s/r = L/2: each step waits
  // for its upstream's slice, max(c/r, s/r + L) = 1.5 L. Time: K c/r + (K - 1) L/2 + L
  // = (1.5 K + 0.5) L = 48.5 L.
  const double l = 2 * kP + 2 * 25e-6 + kF;
  std::string topo = rail_topology(2, 1);
  topo.replace(topo.find("nic_link_latency: 100ns"), 23, "nic_link_latency: 25us");
  const Figures w = run_one(topo, kNoNcclLatency,
                            "collective: allreduce, bytes: 8MiB, nccl: {NCCL_ALGO: Ring, "
                            "NCCL_BUFFSIZE: 256KiB}");
  EXPECT_NEAR(w.seconds, 48.5 * l, 2e-9);
}

TEST(NcclClosedForm, AChainSendsItsFirstWindowAtOnceAndLaterOnesPerRoundTrip) {
  // Broadcast between two single-GPU servers, NIC cables of 25 us: L = 2p + 2n + f = 51.6 us.
  // NCCL_BUFFSIZE = 256 KiB: a chain moves one step of 32 KiB per chunk and may have NCCL_STEPS
  // = 8 of them in flight, W = 256 KiB. S = 8 MiB on 2 channels: D = 4 MiB each. The first
  // window leaves at once; each of the other D/W - 1 = 15 waits for the credit of the one
  // before, a round trip 2L: (D - W) 2L / W = 30 L, then the last byte's one hop L. Time 31 L
  // (a steady D / (W / 2L) would say 33 L).
  const double l = 2 * kP + 2 * 25e-6 + kF;
  std::string topo = rail_topology(2, 1);
  topo.replace(topo.find("nic_link_latency: 100ns"), 23, "nic_link_latency: 25us");
  const Figures w = run_one(topo, kNoNcclLatency,
                            "collective: broadcast, bytes: 8MiB, nccl: {NCCL_BUFFSIZE: 256KiB}");
  EXPECT_NEAR(w.seconds, 31 * l, 2e-9);
}

TEST(NcclClosedForm, ArmHostsHadASmallerSimpleBufferBeforeNccl219) {
  // NCCL sized Simple's buffer by the host CPU until 2.19 (init.cc computeBuffSizes: 1 MiB on
  // Arm, DEFAULT_BUFFSIZE_ARM); from 2.19 on every host has 4 MiB. The Broadcast above on Arm
  // hosts with NCCL 2.8's tables, NCCL_BUFFSIZE unset: W = 1 MiB, so D / W - 1 = 3 windows wait
  // a round trip 2L each, then the last byte's hop: (D - W) 2L / W + L = 7 L (each window of
  // 1 MiB leaves in 43 us, within 2L). Setting NCCL_BUFFSIZE = 1 MiB on x86 hosts gives the
  // same; by default on x86, and on Arm with the newest tables, W = 4 MiB = D, no window
  // waits, and the two channels share the NIC: S / B + L.
  const double l = 2 * kP + 2 * 25e-6 + kF;
  std::string topo = rail_topology(2, 1);
  topo.replace(topo.find("nic_link_latency: 100ns"), 23, "nic_link_latency: 25us");
  std::string arm = topo;
  arm.replace(arm.find("pcie_latency: 500ns,"), 20, "pcie_latency: 500ns, cpu: arm,");
  const std::string w = "collective: broadcast, bytes: 8MiB";
  const Figures arm_28 = run_one(arm, kNoNcclLatency, w + ", nccl: {tuning_tables: '2.8.3'}");
  EXPECT_NEAR(arm_28.seconds, 7 * l, 2e-9);
  const Figures set = run_one(topo, kNoNcclLatency, w + ", nccl: {NCCL_BUFFSIZE: 1MiB}");
  EXPECT_NEAR(set.seconds, arm_28.seconds, 1e-12);
  const Figures x86 = run_one(topo, kNoNcclLatency, w);
  EXPECT_NEAR(x86.seconds, 8 * kMiB / kB + l, 2e-9);
  const Figures arm_newest = run_one(arm, kNoNcclLatency, w);
  EXPECT_NEAR(arm_newest.seconds, x86.seconds, 1e-12);
}

TEST(NcclClosedForm, CreditLatencyLengthensTheAdmissionRoundTrip) {
  // As above, with credit_latency C = 2L: a channel now moves one buffer per 2L + C = 4L, so
  // r = 256 KiB / 4L, c/r = 2L and s/r = L. A step takes max(c/r, s/r + L) = 2L = c/r: the
  // upstream slice no longer adds a wait. Time: K c/r + L = (2 K + 1) L = 65 L.
  const double l = 2 * kP + 2 * 25e-6 + kF;
  std::string topo = rail_topology(2, 1);
  topo.replace(topo.find("nic_link_latency: 100ns"), 23, "nic_link_latency: 25us");
  const Figures w = run_one(topo, kNoNcclLatency,
                            fmt::format("collective: allreduce, bytes: 8MiB, nccl: {{NCCL_ALGO: "
                                        "Ring, NCCL_BUFFSIZE: 256KiB, credit_latency: {}ns}}",
                                        2 * l * 1e9));
  EXPECT_NEAR(w.seconds, 65 * l, 2e-9);
}

// ---- behaviour ----

TEST(NcclBehaviour, TreeWinsSmallMessagesAndRingLargeOnes) {
  // 16 servers x 8 GPUs, Simple, NCCL's latencies on. A ring AllReduce has 2(n-1) = 254 steps,
  // each paying NCCL's per-step cost once on the first pass; the double binary tree's critical
  // path has 2(7 + 4) hops. So the tree wins while latency dominates, up to about 1 GiB. For
  // large messages both move about the same bytes per NIC (every node is an inner node of one
  // tree), but the tree's pipeline forwards whole chunks down ~22 hops, which the ring (slices
  // of half a chunk) does not pay, and the ring's fixed cost is amortised: the ring wins at
  // 8 GiB. The difference changes sign exactly once as size grows.
  std::string yaml = rail_topology(16, 8) + "nccl: {NCCL_PROTO: Simple}\nworkloads:\n";
  std::vector<int64_t> sizes;
  for (int64_t b = 4096; b <= (int64_t{8} << 30); b *= 8)
    sizes.push_back(b);
  std::string prev;
  for (const char* algo : {"Ring", "Tree"}) {
    for (int64_t b : sizes) {
      const std::string name = fmt::format("{}{}", algo, b);
      yaml += fmt::format(
          "  - {{name: {}, type: nccl, collective: allreduce, bytes: {}B, "
          "nccl: {{NCCL_ALGO: {}}}{}}}\n",
          name, b, algo, prev.empty() ? "" : ", after: [" + prev + "]");
      prev = name;
    }
  }
  const auto w = run(yaml);
  int changes = 0;
  double last = 0;
  for (int64_t b : sizes) {
    const double d =
        w.at(fmt::format("Tree{}", b)).seconds - w.at(fmt::format("Ring{}", b)).seconds;
    std::printf("[ measured ] %10lld B: ring %.1f us, tree %.1f us\n", static_cast<long long>(b),
                w.at(fmt::format("Ring{}", b)).seconds * 1e6,
                w.at(fmt::format("Tree{}", b)).seconds * 1e6);
    if (last != 0 && (d > 0) != (last > 0)) ++changes;
    last = d;
  }
  EXPECT_LT(w.at("Tree4096").seconds, 0.5 * w.at("Ring4096").seconds);
  EXPECT_GT(w.at("Tree8589934592").seconds, w.at("Ring8589934592").seconds);
  EXPECT_EQ(changes, 1);
}

TEST(NcclBehaviour, QpScalingDiversifiesFiveTuplesAndLowersEcmpCollisions) {
  // Ring AllReduce over 4 racks of one 8-GPU server each (Clos, one leaf per rack, 8 uplinks to
  // 8 spines): each channel's network edge crosses from one rack to the next, so every leaf
  // hashes 16 channel connections onto its 8 uplinks. With q QPs per connection and
  // NCCL_IB_SPLIT_DATA_ON_QPS=1 there are 16q distinct 5-tuples per leaf (distinct source
  // ports), i.e. 16q balls into 8 bins: E[max]/mean falls from about 2 (q = 1) towards 1 as q
  // grows (MODELS.md 3.5), and the channels, paced by their most loaded uplink, get faster.
  // Averaged over 10 seeds.
  auto scenario = [](int qps) {
    return fmt::format(R"(topology:
  type: clos
  racks: 4
  nodes_per_rack: 1
  node: {{gpus: 8}}
  leaf: {{uplinks: 8}}
  spine: {{count: 8}}
routing: {{scheme: ecmp, hash: crc32}}
nccl: {{NCCL_ALGO: Ring, NCCL_PROTO: Simple, NCCL_IB_QPS_PER_CONNECTION: {}, NCCL_IB_SPLIT_DATA_ON_QPS: 1}}
workloads:
  - {{name: w, type: nccl, collective: allreduce, bytes: 256MiB}}
)",
                       qps);
  };
  std::map<int, double> mmr, busbw;
  std::map<int, size_t> tuples;
  constexpr int kSeeds = 10;
  for (const int q : {1, 4}) {
    for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
      auto r = test::scenario_from_yaml(scenario(q), seed);
      r->run();
      for (const metrics::TierResult& t : r->recorder->tiers()) {
        if (t.link_class == "leaf->spine") mmr[q] += t.mmr / kSeeds;
      }
      for (const auto& [k, v] : r->recorder->workloads().at(0).figures.values) {
        if (k == "busbw_GBps") busbw[q] += v / kSeeds;
      }
      std::set<std::tuple<uint32_t, uint32_t, uint16_t, uint16_t>> keys;
      for (const engine::QpInfo& qp : r->sim->qps()) {
        if (qp.key.src_ip != 0)
          keys.insert({qp.key.src_ip, qp.key.dst_ip, qp.key.src_port, qp.key.dst_port});
      }
      if (seed == 1) tuples[q] = keys.size();
    }
    std::printf(
        "[ measured ] %d QP(s): %zu network 5-tuples, leaf->spine MMR %.3f, busbw %.1f "
        "GB/s\n",
        q, tuples[q], mmr[q], busbw[q]);
  }
  EXPECT_EQ(tuples[1], 64u);  // 16 channels x 4 servers
  EXPECT_EQ(tuples[4], 4 * tuples[1]);
  EXPECT_LT(mmr[4], mmr[1] - 0.4);
  EXPECT_GT(busbw[4], 1.2 * busbw[1]);
}

TEST(NcclBehaviour, HierarchicalRingsBeatAFlatRingOnEightGpuServers) {
  // 4 servers x 8 GPUs on one leaf, AllReduce of S = 256 MiB. A flat ring in rank order
  // (ring_allreduce) crosses each server boundary once, through one NIC of eight: every step moves
  // S/n over that NIC, so T_flat = 2(n-1) (S/(n B) + L) with L the slowest edge's latency (L_net).
  // NCCL's hierarchical rings run 16 channels, two per NIC, each entering and leaving a server
  // through its rail: T = 2(n-1)/n x S / (8 B) + fill. All eight NICs work: about 8x faster.
  const double n = 32, s = 256 * kMiB;
  const auto w = run(rack_topology(4, 8) + kNoNcclLatency +
                     "workloads:\n"
                     "  - {name: flat, type: ring_allreduce, bytes: 256MiB}\n"
                     "  - {name: nccl, type: nccl, collective: allreduce, bytes: 256MiB, "
                     "after: [flat], nccl: {NCCL_ALGO: Ring}}\n");
  const double flat = 2 * (n - 1) * (s / (n * kB) + kLnet);
  const double hier = 2 * (n - 1) / n * s / (8 * kB) + (28 * kLnvl + 4 * kLpxn) / n;
  EXPECT_NEAR(w.at("flat").seconds, flat, 1e-8);
  EXPECT_NEAR(w.at("nccl").seconds, hier, 2e-9);
  EXPECT_NEAR(w.at("flat").seconds / w.at("nccl").seconds, 8, 0.1);
}

TEST(NcclBehaviour, LlIsBoundByTheKernelsLlThroughput) {
  // LL sends 8 flag bytes with every 8 data bytes, but its kernels are the bound long before
  // the wire: NCCL's llMaxBw caps an LL operation at 20.4 GB/s of bus bandwidth on more than 2
  // nodes of an Intel host (tuning.cc; HARDWARE.md 5.5), against 8 x 49.02 GB/s of NICs for
  // Simple. Ring AllReduce of S = 256 MiB on n = 32 ranks (4 servers x 8 GPUs), latencies off:
  // every rank moves 2(n-1)/n S = 1.9375 S of bus bytes, so LL takes 1.9375 S / 20.4e9 =
  // 25.5 ms, to within the pipeline fill, and Simple is NIC-bound: 1.9375 S / (8 x 49.02e9).
  const auto w = run(
      rail_topology(4, 8) +
      "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, NCCL_ALGO: Ring}\n"
      "workloads:\n"
      "  - {name: simple, type: nccl, collective: allreduce, bytes: 256MiB, "
      "nccl: {NCCL_PROTO: Simple}}\n"
      "  - {name: ll, type: nccl, collective: allreduce, bytes: 256MiB, "
      "after: [simple], nccl: {NCCL_PROTO: LL}}\n");
  EXPECT_EQ(w.at("ll").notes.at("protocol"), "LL");
  const double s = 256 * kMiB, bus = 2.0 * 31 / 32 * s;
  EXPECT_NEAR(w.at("ll").seconds, bus / 20.4e9, 0.005 * bus / 20.4e9);
  EXPECT_NEAR(w.at("simple").seconds, bus / (8 * kB), 0.01 * bus / (8 * kB));
  // llMaxBw is the kernel's with its 16 default channels (2 per NIC): one channel (a CTA) moves
  // a sixteenth of it however few run. With NCCL_MAX_NCHANNELS=1, 1.9375 S / (20.4e9 / 16).
  const auto one = run(
      rail_topology(4, 8) +
      "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, NCCL_ALGO: Ring, "
      "NCCL_PROTO: LL, NCCL_MAX_NCHANNELS: 1}\n"
      "workloads:\n"
      "  - {name: ll, type: nccl, collective: allreduce, bytes: 16MiB}\n");
  EXPECT_EQ(one.at("ll")["channels"], 1);
  const double one_bus = 2.0 * 31 / 32 * 16 * kMiB;
  EXPECT_NEAR(one.at("ll").seconds, one_bus / (20.4e9 / 16), 0.005 * one_bus / (20.4e9 / 16));
}

TEST(NcclBehaviour, AFewThreadsSlowLlsKernelNotTheHostsPath) {
  // A small operation runs its channel with fewer threads (enqueue.cc), which bounds what the
  // kernel moves: one node's llMaxBw, the GPU's (Hopper 141 GB/s over 16 default channels),
  // times the threads' share. Across nodes NCCL's lower llMaxBw (Intel, > 2 nodes: 20.4 GB/s)
  // is the host's path, shared by the channels whatever threads each runs. Ring/LL AllReduce on
  // 4 servers x 8 GPUs (n = 32, 8 x 32 = 256 bytes a thread), one channel, every latency zero:
  //  * S = 16 KiB runs 64 threads (16 KiB < 128 x 256 B; not halved below 64), so the kernel
  //    binds, 141 / 16 x 64 / 512 = 1.1016 GB/s (under the host's 20.4 / 16 = 1.275): the bus
  //    bytes 2 (n-1)/n S take 31744 / 1.1016e9 = 28.8 us (the host's cap scaled by the threads
  //    would take 199 us);
  //  * S = 256 KiB runs all 512 threads: the host binds, 2 (n-1)/n S / 1.275e9 = 398.8 us.
  const std::string topo =
      rail_topology(4, 8, "400Gbps", false) +
      "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, NCCL_ALGO: "
      "Ring, NCCL_PROTO: LL, NCCL_MAX_NCHANNELS: 1}\n";
  const auto one = [&](const char* bytes) {
    return run(topo + fmt::format("workloads:\n  - {{name: ll, type: nccl, collective: "
                                  "allreduce, bytes: {}}}\n",
                                  bytes))
        .at("ll");
  };
  const Figures small = one("16KiB"), large = one("256KiB");
  EXPECT_EQ(small["channels"], 1);
  EXPECT_EQ(large["channels"], 1);
  const double bus = 2.0 * 31 / 32;
  const double kernel = 141e9 / 16 * 64 / 512, host = 20.4e9 / 16;
  EXPECT_NEAR(small.seconds, bus * 16 * 1024 / kernel, 0.01 * bus * 16 * 1024 / kernel);
  EXPECT_NEAR(large.seconds, bus * 256 * 1024 / host, 0.01 * bus * 256 * 1024 / host);
}

TEST(NcclBehaviour, RcclLlAcrossNodesHasTheHostsLlCap) {
  // Across nodes NCCL's LL cap is the host's ("for multi-node, we look at CPU type": llMaxBws'
  // AMD row, 22.5 GB/s on 2 nodes, 19.0 beyond), and RCCL's LL goes the same way through the
  // proxy and host memory, so it has the cap too (RCCL's own model has no caps). Ring AllReduce
  // of S = 256 MiB with LL on 4 nodes x 8 cdna3 GPUs of AMD hosts, latencies off: every rank
  // moves 1.9375 S of bus bytes at 19.0 GB/s, 27.3 ms to within the fill. On one node, where
  // NCCL's figure is the GPU's, RCCL's LL has none: the same operation on one server is bound by
  // its xGMI links only, far faster.
  const auto topo = [](int nodes) {
    return fmt::format(R"(topology:
  type: rail_optimized
  nodes: {0}
  nodes_per_leaf: {0}
  node: {{gpus: 8, gpu_arch: cdna3, cpu: amd-zen4, scale_up: mesh, nic_speed: 400Gbps}}
  leaf: {{uplinks: 4}}
  spine: {{count: 4}}
nccl: {{library: rccl, hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, NCCL_ALGO: Ring,
        NCCL_PROTO: LL, RCCL_MSCCL_ENABLE: 0}}
workloads:
  - {{name: ll, type: nccl, collective: allreduce, bytes: 256MiB}}
)",
                       nodes);
  };
  const double s = 256 * kMiB;
  const double four = run(topo(4)).at("ll").seconds, bus4 = 2.0 * 31 / 32 * s;
  EXPECT_NEAR(four, bus4 / 19.0e9, 0.005 * bus4 / 19.0e9);
  const double one = run(topo(1)).at("ll").seconds, bus1 = 2.0 * 7 / 8 * s;
  EXPECT_LT(one, bus1 / 19.0e9 / 4);
}

TEST(NcclBehaviour, NvlsTreeIsBoundByItsKernelsThroughput) {
  // NVLSTree's kernel moves at most perChMaxNVLSTreeBws per head of the NVLS graph (NCCL 2.30,
  // Hopper: 57.7 GB/s on 2 nodes, 45.5 beyond; HARDWARE.md 5.5), which NCCL converts like a
  // ring's: algBw = cap x 8 heads x n / (2 (n - 1)). Latencies off, S = 4 GiB:
  //  * 2 nodes (n = 16): 57.7 x 8 x 16/30 = 246.19 GB/s, S / 246.19e9 = 17.45 ms. Without the
  //    cap NVLink would bind: each GPU's link carries (1 + 1/8) S at 0.85 x 450 GB/s, an
  //    algBw of 340 GB/s; the NICs carry S / 8 each way, 8 x 49 GB/s a node;
  //  * 4 nodes (n = 32): 45.5 x 8 x 32/62 = 187.87 GB/s, S / 187.87e9 = 22.86 ms.
  // Plus the pipeline's fill: a channel's step is a chunk for each of its 8 heads (128 KiB on 2
  // nodes, 64 KiB from 4), and a step crosses the 2 + 2 log2(nodes) stages of NCCL's count,
  // each at its own pace, all but the slowest after the data: the two NVLS stages at a GPU
  // link's 450 GB/s over 16 channels of (1 + 1/8) / 0.85 bytes each (21.25 GB/s a channel), the
  // network stages at a NIC's B over the legs that cross it (2 on 2 nodes, 4 on 4: B/2, B/4).
  // On 2 nodes the NVLS stages are the slowest: 1 MiB / 21.25 GB/s + 2 x 1 MiB / (B/2); on 4,
  // a network stage: 2 x 512 KiB / 21.25 GB/s + 3 x 512 KiB / (B/4). (The path latencies, a
  // few us, are inside the tolerance.)
  const double s = 4096 * kMiB;
  const std::string nccl =
      "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s, NCCL_ALGO: "
      "NVLSTree}\n";
  const Figures two = run_one(rail_topology(2, 8), nccl, "collective: allreduce, bytes: 4GiB");
  EXPECT_EQ(two.notes.at("algorithm"), "NVLSTree");
  const double two_bw = 57.7e9 * 8 * 16 / 30;
  const double nvls_stage = 450e9 / (16 * 1.125 / 0.85);
  const double two_expected = s / two_bw + kMiB / nvls_stage + 2 * kMiB / (kB / 2);
  EXPECT_NEAR(two.seconds, two_expected, 0.002 * two_expected);
  const Figures four = run_one(rail_topology(4, 8), nccl, "collective: allreduce, bytes: 4GiB");
  const double four_bw = 45.5e9 * 8 * 32 / 62;
  const double four_expected =
      s / four_bw + 2 * 512 * 1024.0 / nvls_stage + 3 * 512 * 1024.0 / (kB / 4);
  EXPECT_NEAR(four.seconds, four_expected, 0.002 * four_expected);
}

TEST(NcclBehaviour, NvlsTreeHeadsEachHaveTheirOwnCreditWindow) {
  // NVLSTree's 8 heads each send their chunk of a step over their own connection of 8 chunks:
  // a channel has W = 8 heads x 8 x 128 KiB = 8 MiB unacknowledged. With a credit latency of
  // 1 ms the window binds: a channel of D = 4 GiB / 16 = 256 MiB takes (D - W) / W = 31 round
  // trips of about 1 ms beyond its first window (the wire adds microseconds), 31 ms and a
  // little; one connection of 8 chunks per channel would take (D - 1 MiB) / 1 MiB = 255.
  const Figures w = run_one(rail_topology(2, 8),
                            "nccl: {hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: "
                            "0s, NCCL_ALGO: NVLSTree, "
                            "credit_latency: 1ms}\n",
                            "collective: allreduce, bytes: 4GiB");
  EXPECT_EQ(w.notes.at("algorithm"), "NVLSTree");
  EXPECT_GT(w.seconds, 31e-3);
  EXPECT_LT(w.seconds, 32e-3);
}

TEST(NcclBehaviour, TreeThresholdOfOlderReleasesPicksTreeOrRing) {
  // NCCL_TREE_THRESHOLD=1MiB: AllReduce below 1 MiB runs Tree, from 1 MiB on Ring, whatever the
  // tuner would choose.
  const char* nccl = "nccl: {NCCL_TREE_THRESHOLD: 1MiB}\n";
  EXPECT_EQ(run_one(rail_topology(2, 8), nccl, "collective: allreduce, bytes: 512KiB")
                .notes.at("algorithm"),
            "Tree");
  EXPECT_EQ(run_one(rail_topology(2, 8), nccl, "collective: allreduce, bytes: 1MiB")
                .notes.at("algorithm"),
            "Ring");
  EXPECT_EQ(run_one(rail_topology(2, 8), nccl, "collective: allreduce, bytes: 1GiB")
                .notes.at("algorithm"),
            "Ring");
}

TEST(NcclBehaviour, SmallMessagesUseFewerChannels) {
  // NCCL gives each ring or tree channel at least its threads' worth of data: 512 threads x 8
  // bytes for LL, 512 x 64 bytes for Simple; 16 channels at most (2 per NIC). NVLS always runs
  // its 16 channels (Hopper), within NCCL_MAX_NCHANNELS like the others.
  EXPECT_EQ(run_one(rail_topology(2, 8), "nccl: {NCCL_PROTO: LL}\n",
                    "collective: allreduce, bytes: 8KiB")["channels"],
            2);
  EXPECT_EQ(run_one(rail_topology(2, 8), "nccl: {NCCL_PROTO: Simple, NCCL_ALGO: 'Ring,Tree'}\n",
                    "collective: allreduce, bytes: 128KiB")["channels"],
            4);
  EXPECT_EQ(run_one(rail_topology(2, 8), "nccl: {NCCL_PROTO: Simple, NCCL_ALGO: '^NVLSTree'}\n",
                    "collective: allreduce, bytes: 1GiB")["channels"],
            16);
  const Figures nvls = run_one(rail_topology(2, 8), "nccl: {NCCL_PROTO: Simple}\n",
                               "collective: allreduce, bytes: 128KiB");
  EXPECT_EQ(nvls.notes.at("algorithm"), "NVLSTree");
  EXPECT_EQ(nvls["channels"], 16);
  EXPECT_EQ(run_one(rail_topology(2, 8), "nccl: {NCCL_MAX_NCHANNELS: 4}\n",
                    "collective: allreduce, bytes: 1GiB")["channels"],
            4);
}

TEST(NcclBehaviour, AllToAllvImbalanceIsSeededAndKeepsTheMeanVolume) {
  // AlltoAllv with imbalance 0.5: pair sizes uniform in [0.5, 1.5] x S/n from the workload's
  // random stream: same seed, same time; another seed, another time; the busiest NIC carries
  // more than the mean, so it is slower than the balanced AlltoAll.
  const std::string w = "collective: alltoallv, bytes: 256MiB, imbalance: 0.5";
  const Figures a = run_one(rail_topology(4, 8), kNoNcclLatency, w, 7);
  const Figures b = run_one(rail_topology(4, 8), kNoNcclLatency, w, 7);
  const Figures c = run_one(rail_topology(4, 8), kNoNcclLatency, w, 8);
  const Figures even =
      run_one(rail_topology(4, 8), kNoNcclLatency, "collective: alltoall, bytes: 256MiB");
  EXPECT_EQ(a.seconds, b.seconds);
  EXPECT_NE(a.seconds, c.seconds);
  EXPECT_GT(a.seconds, even.seconds);
  EXPECT_LT(a.seconds, 1.5 * even.seconds);
}

TEST(NcclBehaviour, AllToAllvWithAReshareDelayStaysCloseToExactMaxMin) {
  // The AlltoAllv above (seed 7) with `network.reshare_delay: 10us`: its pairs differ in size,
  // so they end one by one, and each end leaves the bandwidth it frees idle for up to 10 us
  // instead of re-sharing it at once. That makes the collective later, by what the key trades
  // for speed: 0.37 % here (docs/models/maxmin.md gives it for 128 and 256 GPUs), held between
  // exact and 1 % over it. Same flows; the same end, to the picosecond, when the key is 0.
  const std::string w = "collective: alltoallv, bytes: 256MiB, imbalance: 0.5";
  const Figures exact = run_one(rail_topology(4, 8), kNoNcclLatency, w, 7);
  const Figures zero = run_one(
      rail_topology(4, 8), std::string(kNoNcclLatency) + "network: {reshare_delay: 0s}\n", w, 7);
  const Figures delayed = run_one(
      rail_topology(4, 8), std::string(kNoNcclLatency) + "network: {reshare_delay: 10us}\n", w, 7);
  EXPECT_EQ(zero.seconds, exact.seconds);
  EXPECT_EQ(delayed.flows, exact.flows);
  EXPECT_GT(delayed.seconds, exact.seconds);
  EXPECT_LT(delayed.seconds, 1.01 * exact.seconds);
}

// ---- NCCL's tuning model ----

/// NCCL's view of HGX-class servers (8 GPUs, 8 NICs): a communicator of `nodes` servers, graphs
/// of 8 channels at `bw` GB/s (the kernel runs 16); with `nvls`, an NVLS graph of 8 heads at
/// 40 GB/s inside the node and `bw` across nodes.
TuningInput hgx_input(int nodes, double bw, bool nvls = false) {
  TuningInput in;
  in.nranks = 8 * nodes;
  in.nnodes = nodes;
  in.ppn = 8;
  in.channels = 16;
  in.graph_channels = 8;
  in.bw_intra = in.bw_inter = bw;
  in.nvls = nvls;
  in.nvls_heads = 8;
  in.nvls_bw_intra = 40;
  in.nvls_bw_inter = bw;
  return in;
}

/// 2 nodes x 8 A100 behind an NVSwitch, NCCL's graph of 4 channels at 24 GB/s, CollNet on.
TuningInput a100_collnet_input() {
  TuningInput in = hgx_input(2, 24);
  in.graph_channels = 4;
  in.arch = fabric::GpuArch::Ampere;
  in.collnet = true;
  in.nvswitch = true;
  return in;
}

TEST(NcclTuning, CollNetDirectAndChainAsTuningCcModelsThem) {
  // 2 nodes x 8 A100 behind an NVSwitch, 4 NICs (NCCL's graph: 4 channels at 24 GB/s), CollNet
  // enabled, Simple ("newest"; 2.20.3 has the same rows):
  //  * CollNetDirect: bus 4 x 24 = 96 GB/s over the GPU/NIC factor f = 8/4 = 2 eased to
  //    f - (f-1)/2 = 1.5: 64 GB/s, algbw x 0.5 = 32; latency 2 (min(1, 7) x 3.7 + 7 x 0.4) + 31
  //    = 44 us. On Hopper the bus x 0.85 too.
  //  * CollNetChain: bus 96, algbw 48; latency 2 x 7 x 2.8 + 30 = 69.2 us.
  // 1 MB: Direct (44 + 31.25 us) over Chain (69.2 + 20.83); 1 GB: Chain. Direct needs the
  // NVSwitch; neither runs with more than 8 GPUs a node, nor with LL.
  TuningInput in = a100_collnet_input();
  const TuningTables& t = tuning_tables("newest");
  const double mb = 1e6, gb = 1e9;
  EXPECT_NEAR(model_time_us(t, in, Algorithm::CollNetDirect, Protocol::Simple, mb),
              44 + mb / (1000 * 32.0), 1e-9);
  EXPECT_NEAR(model_time_us(t, in, Algorithm::CollNetChain, Protocol::Simple, mb),
              69.2 + mb / (1000 * 48.0), 1e-9);
  const uint8_t collnet = only(Algorithm::CollNetDirect) | only(Algorithm::CollNetChain);
  EXPECT_EQ(choose(t, in, mb, collnet, kAnyProtocol).algorithm, Algorithm::CollNetDirect);
  EXPECT_EQ(choose(t, in, gb, collnet, kAnyProtocol).algorithm, Algorithm::CollNetChain);
  EXPECT_NEAR(
      model_time_us(tuning_tables("2.20.3"), in, Algorithm::CollNetChain, Protocol::Simple, mb),
      69.2 + mb / (1000 * 48.0), 1e-9);
  in.arch = fabric::GpuArch::Hopper;
  EXPECT_NEAR(model_time_us(t, in, Algorithm::CollNetDirect, Protocol::Simple, mb),
              44 + mb / (1000 * 32.0 * 0.85), 1e-9);
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::CollNetDirect, Protocol::LL, mb)));
  in.nvswitch = false;
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::CollNetDirect, Protocol::Simple, mb)));
  EXPECT_FALSE(std::isinf(model_time_us(t, in, Algorithm::CollNetChain, Protocol::Simple, mb)));
  in.ppn = 9;
  in.nranks = 18;
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::CollNetChain, Protocol::Simple, mb)));
}

TEST(NcclTuning, Nccl28AsItsTuningCcModelsIt) {
  // NCCL 2.8.3's model (tuning.cc at v2.8.3-1) on 2 nodes x 8 A100, its graph of 4 channels at
  // 24 GB/s (bus 96), CollNet enabled; the plugin's 75 us and the 1 us net overhead are not in
  // it:
  //  * CollNet (the chain) with LL: bus 96 x 0.9 / 6 = 14.4, algbw 7.2; latency baseLat 4.4 +
  //    2 x 7 x (NVLink 0.5 x 1.8 for LL across nodes) + NET 5.0 = 22.0 us. No CollNetDirect.
  //  * Tree/LL128, 1 MB: bus min(96 x 0.92, 4 x 22.5) = 88.32, x 0.915 = 80.81, capped at 4 x
  //    16.9 (ll128MaxBwPerCh of AllReduce) = 67.6, algbw 33.8, x 0.5 (2.8's LL128 correction
  //    at log2(1e6 / 64) = 13); latency 4.4 + 2 (7 x 1.25 + 1 x 8.5) = 38.9 us.
  //  * Ring/Simple: 2 (nodes - 1) = 2 network steps: 8.4 + 28 x 3.4 + 2 x 9.6 = 122.8 us, x 1.9
  //    from nRanks / 16 x 64 KiB = 64 KiB (the plateau); algbw 96 x 16 / 30 = 51.2 GB/s.
  //  * An A100's bus bandwidth at most 235 GB/s: 16 channels x 24 = 384 -> 235.
  TuningInput in = a100_collnet_input();
  in.latency_inter_us = 75;
  in.net_overhead_us = 1;
  const TuningTables& t = tuning_tables("2.8.3");
  const double kib64 = 65536, mb = 1e6, gb = 1e9;
  EXPECT_NEAR(model_time_us(t, in, Algorithm::CollNetChain, Protocol::LL, kib64),
              22.0 + kib64 / (1000 * 7.2), 1e-9);
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::CollNetChain, Protocol::LL128, mb)));
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::CollNetDirect, Protocol::Simple, mb)));
  in.nvls = true;  // NVLS came with NCCL 2.17
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::NvlsTree, Protocol::Simple, mb)));
  in.nvls = false;
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Tree, Protocol::LL128, mb),
              38.9 + mb / (1000 * 33.8 * 0.5), 1e-9);
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Ring, Protocol::Simple, gb),
              122.8 * 1.9 + gb / (1000 * 51.2), 1e-6);
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Ring, Protocol::Simple, 8192),
              122.8 + 8192 / (1000 * 51.2), 1e-9);
  in.graph_channels = 16;
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Ring, Protocol::Simple, gb),
              122.8 * 1.9 + gb / (1000 * 235.0 * 16 / 30), 1e-6);
}

TEST(NcclTuning, RingSimpleEstimateByHand) {
  // NCCL's model for Ring/Simple AllReduce, 2 nodes x 8 GPUs, its graph of 8 channels (one per
  // NIC) at 50 GB/s, the kernel running 16 ("newest" tables): latency = baseLat 8.4 +
  // (2(n-1) - 2(nodes-1)) = 28 intra-node steps x max(hwLat NVLink 3.4, 3 x net overhead 1) + 2
  // network steps x 14 = 131.6 us, x 1.4 for the ring's plateau (1 GB / (16 channels x 16
  // ranks) >= 64 bytes) = 184.24 us; bandwidth = 8 x 50 = 400 GB/s bus, algbw = bus x n /
  // 2(n-1) = 213.33 GB/s; 1 GB takes 4687.5 us.
  TuningInput in = hgx_input(2, 50);
  const TuningTables& t = tuning_tables("newest");
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Ring, Protocol::Simple, 1e9),
              131.6 * 1.4 + 1e9 / (1000 * 400.0 * 16 / 30), 1e-6);
  // Below the plateau (16 x 16 x 64 = 16 KiB) the latency is NCCL's sum alone.
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Ring, Protocol::Simple, 8192),
              131.6 + 8192 / (1000 * 400.0 * 16 / 30), 1e-6);
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::CollNetDirect, Protocol::Simple, 1e9)));
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::CollNetChain, Protocol::Simple, 1e9)));
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::NvlsTree, Protocol::Simple, 1e9)));
  // NCCL 2.20.3 counts 2 x nodes network steps for a ring AllReduce ("nNodes > 1 ? 2*nNodes :
  // 0"): 4 here, 26 intra-node steps x 3.4: 8.4 (Ring/Simple baseLat) + 26 x 3.4 + 4 x 14 =
  // 152.8 us below the plateau.
  EXPECT_NEAR(model_time_us(tuning_tables("2.20.3"), in, Algorithm::Ring, Protocol::Simple, 8192),
              152.8 + 8192 / (1000 * 400.0 * 16 / 30), 1e-6);
  in.collective = Collective::AllGather;
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::Tree, Protocol::Simple, 1e9)));
}

TEST(NcclTuning, RingLl128WithOneGpuAServer) {
  // tuning.cc's Ring/LL128 refinement: busBw x (ppn < 2 ? 0.7 : 0.92), then at most the
  // graph's channels x perChMaxRingLL128 (Hopper, 3+ nodes: 36.7). AllReduce on 4 servers of
  // one GPU, one graph channel at 48 GB/s: min(48 x 0.7, 36.7) = 33.6 GB/s of bus bandwidth
  // (with 0.92 the cap, 36.7, would bind), algbw = 33.6 x 4/6 = 22.4 GB/s. Latency ("newest"):
  // baseLat 14 + 6 steps, all across nodes, at the Tree's network hwLat (ppn = 1): 14 + 6 x 8.5
  // = 65 us.
  TuningInput in = hgx_input(4, 48);
  in.ppn = 1;
  in.nranks = 4;
  in.graph_channels = 1;
  const double gb = 1e9;
  EXPECT_NEAR(model_time_us(tuning_tables("newest"), in, Algorithm::Ring, Protocol::LL128, gb),
              65 + gb / (1000 * 22.4), 1e-6);
}

TEST(NcclTuning, TheModelIsTheCommunicatorsWhateverChannelsAnOperationRuns) {
  // NCCL prices an operation with its communicator's model, made once for all its channels: the
  // ring's plateau (x 1.4) starts where bytes / (comm->nChannels x nRanks) reaches 64. A Ring /
  // Simple AllReduce of 8 KiB on 2 servers of 8 GPUs runs 1 channel (its 512 threads want 64
  // bytes each), but the communicator has 16: 8192 / (16 x 16) = 32 < 64, no plateau, so NCCL's
  // estimate is the latency sum of RingSimpleEstimateByHand, 131.6 us, plus 8 KiB at about 209
  // GB/s (0.04 us); counting the operation's one channel would give 131.6 x 1.4 = 184.2 us.
  const Figures f = run_one(rail_topology(2, 8), "nccl: {NCCL_ALGO: Ring, NCCL_PROTO: Simple}\n",
                            "collective: allreduce, bytes: 8KiB");
  EXPECT_EQ(f["channels"], 1);
  EXPECT_NEAR(f["nccl_model_us"], 131.6 + 0.04, 0.05);
}

TEST(NcclTuning, AnNvlinkDomainsGraphChannelsFitItsNvlink) {
  // Two GB200 NVL72 racks (144 GPUs; 72 NICs, one a GPU, in each NVLink domain) on one leaf.
  // NCCL's search makes at most MAXCHANNELS / 2 = 32 graph rings (one a NIC), each crossing the
  // NVLink of every GPU of the domain but the one it enters at, so 32 x bw fits a GPU's 721.8
  // GB/s (18 links x 40.1): bw = min(the NIC path's 49.0, 721.8 / 32 = 22.56), busBw = 721.8
  // GB/s. A Ring/Simple AllReduce's algbw is then 721.8 x 144 / (2 x 143) = 363.4 GB/s, and
  // NCCL's estimate grows by 64 MiB / 363.4 GB/s = 184.7 us from 64 to 128 MiB (72 rings at 49.0
  // GB/s would be 3,529 GB/s of bus bandwidth: 37.8 us). NVLSTree's heads are not bound so: each
  // of the 8 pairs a GPU with its NIC and crosses that GPU's NVLink alone, at min(721.8 / 9,
  // 49.02) = 49.02 GB/s (RoCE's payload of 50 GB/s), busBw 8 x 49.02, algbw x 5/6 = 326.8 GB/s:
  // 205.4 us more from 64 to 128 MiB (at the rings' 22.56 GB/s it would be 446 us).
  const auto model_us = [](const char* algo, const char* bytes) {
    return run_one(fmt::format(R"(topology:
  type: clos
  racks: 1
  nodes_per_rack: 2
  node: {{server: gb200-nvl72}}
  leaf: {{uplinks: 8}}
  spine: {{count: 1}}
nccl: {{NCCL_ALGO: {}, NCCL_PROTO: Simple}}
)",
                               algo),
                   "", fmt::format("collective: allreduce, bytes: {}", bytes))["nccl_model_us"];
  };
  const double ring = 721.8 * 144 / (2 * 143), nvls_tree = 8 * 49.02 * 5 / 6;
  EXPECT_NEAR(model_us("Ring", "128MiB") - model_us("Ring", "64MiB"), 64 * kMiB / (1e3 * ring),
              0.1);
  EXPECT_NEAR(model_us("NVLSTree", "128MiB") - model_us("NVLSTree", "64MiB"),
              64 * kMiB / (1e3 * nvls_tree), 0.5);
}

TEST(NcclTuning, ACommunicatorOfSomeOfAServersGpusHasTheirNicsGraphChannels) {
  // NCCL's search makes one graph channel per NIC of the communicator's GPUs: 4 of the 8 GPUs
  // (and NICs) of each of 2 servers give 4 graph channels, half the bus bandwidth B of all 8.
  // Ring/Simple AllReduce's algbw is busBw x n / (2 (n - 1)): B x 16 / 30 on 16 ranks, B / 2 x
  // 8 / 14 on 8, so the estimate's growth from 64 to 128 MiB is (16 / 30) / (8 / 28) = 1.867
  // times as large on 4 GPUs a server (0.933 if they had all 8 NICs' channels).
  const auto growth = [](const char* ranks) {
    const auto model_us = [&](const char* bytes) {
      return run_one(fmt::format("{}nccl: {{NCCL_ALGO: Ring, NCCL_PROTO: Simple}}\njob: {{ranks: "
                                 "{}}}\n",
                                 rack_topology(2, 8), ranks),
                     "", fmt::format("collective: allreduce, bytes: {}", bytes))["nccl_model_us"];
    };
    return model_us("128MiB") - model_us("64MiB");
  };
  EXPECT_NEAR(growth("[0, 1, 2, 3, 8, 9, 10, 11]") / growth("all"), (16.0 / 30) / (8.0 / 28), 1e-3);
}

TEST(NcclTuning, TheNetPluginsLatencyJoinsEveryNetworkStep) {
  // A NIC whose network plugin reports 75 us (aws-ofi-nccl on p4d): NCCL adds it to each
  // network step, twice for Simple. Tree/LL AllReduce on 2 nodes: 6.8 + 2 x (7 x 0.6 + 1 x (5.0 +
  // 75)) = 175.2 us (the net overhead floors only a ring's intra-node steps: "inter-node rings
  // still have to launch nsteps * net overhead"); Ring/LL: 6.6 + 28 x max(0.6, 1) + 2 x (2.7 +
  // 75) = 190 us; Ring/Simple below the plateau: 131.6 + 2 network steps x 2 x 75 = 431.6 us,
  // plus the bytes.
  TuningInput in = hgx_input(2, 50);
  in.latency_inter_us = 75;
  const TuningTables& t = tuning_tables("newest");
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Tree, Protocol::LL, 0), 175.2, 1e-9);
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Ring, Protocol::LL, 0), 190.0, 1e-9);
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Ring, Protocol::Simple, 8192),
              431.6 + 8192 / (1000 * 400.0 * 16 / 30), 1e-6);
}

TEST(NcclTuning, NetOverheadFollowsTheHostCpu) {
  // NCCL_NET_OVERHEAD unset: NCCL's getNetOverhead gives 1 us on Intel hosts and 2 us on AMD x86
  // ones, and a multi-node ring's intra-node steps cost at least 3 x that with Simple. Ring/Simple
  // AllReduce of 1 MiB on 2 servers of 2 GPUs ("newest" tables): 2(n-1) - 2(nodes-1) = 4
  // intra-node steps at max(hwLat 3.4, 3 x 1) = 3.4 us on Intel, max(3.4, 3 x 2) = 6 us on AMD,
  // times 1.4 for the ring's plateau (1 MiB / (channels x 4 ranks) >= 64 bytes): NCCL's estimate
  // grows by 4 x 2.6 x 1.4 = 14.56 us. The effective scenario records the value used.
  const auto yaml = [](const char* cpu) {
    return fmt::format(R"(topology:
  type: clos
  racks: 1
  nodes_per_rack: 2
  node: {{gpus: 2, cpu: {}}}
  leaf: {{uplinks: 4}}
  spine: {{count: 4}}
workloads:
  - {{name: w, type: nccl, collective: allreduce, bytes: 1MiB,
      nccl: {{NCCL_ALGO: Ring, NCCL_PROTO: Simple}}}}
)",
                       cpu);
  };
  const Figures intel = run(yaml("intel-sapphire-rapids")).at("w");
  const Figures amd = run(yaml("amd-zen4")).at("w");
  EXPECT_NEAR(amd["nccl_model_us"] - intel["nccl_model_us"], 4 * 2.6 * 1.4, 1e-9);
  EXPECT_GT(amd.seconds, intel.seconds);  // the simulation pays the same step costs
  EXPECT_TRUE(contains(test::scenario_from_yaml(yaml("amd-zen4"))->effective_yaml,
                       "NCCL_NET_OVERHEAD: 2us"));
  EXPECT_TRUE(contains(test::scenario_from_yaml(yaml("intel-sapphire-rapids"))->effective_yaml,
                       "NCCL_NET_OVERHEAD: 1us"));
  // Written, it wins over the CPU's.
  const std::string written = yaml("amd-zen4") + "nccl: {NCCL_NET_OVERHEAD: 1us}\n";
  EXPECT_NEAR(run(written).at("w")["nccl_model_us"], intel["nccl_model_us"], 1e-9);
}

TEST(NcclChannels, ThreadThresholdsAsNcclSetsThem) {
  // NCCL (enqueue.cc, topoGetAlgoInfo): an operation of S bytes runs nc = min(C, max(1,
  // floor(S / (nt x threshold)))) channels, nt its threads (LL 512, LL128 640, Simple 512) and
  // the threshold 8 bytes a thread for LL and LL128, 64 for Simple, times the ranks for Ring/LL
  // and 512 for CollNet's Simple (tuning.cc); then, with one channel left, the threads halve
  // while S < nt x threshold and nt is a multiple of 128, except for trees, NVLS and
  // CollNetDirect. 2 servers x 8 GPUs, a NIC each: C = 16; n = 16 ranks.
  auto run = test::scenario_from_yaml(
      rack_topology(2, 8) +
      "workloads:\n  - {name: w, type: nccl, collective: allreduce, bytes: 1MiB}\n");
  const OpRunner op(run->fabric, run->job_ranks, NcclConfig{}, 0);
  const auto kib = [](int64_t k) { return k << 10; };
  // Ring/LL: 8 x 16 = 128 bytes a thread, 64 KiB a channel.
  EXPECT_EQ(op.channels_for(Collective::AllReduce, kib(128), Protocol::LL, Algorithm::Ring), 2);
  EXPECT_EQ(op.channels_for(Collective::AllReduce, kib(2048), Protocol::LL, Algorithm::Ring), 16);
  // Tree/LL: 4 KiB a channel.
  EXPECT_EQ(op.channels_for(Collective::AllReduce, kib(128), Protocol::LL, Algorithm::Tree), 16);
  EXPECT_EQ(op.channels_for(Collective::AllReduce, kib(8), Protocol::LL, Algorithm::Tree), 2);
  // LL128: 640 x 8 = 5 KiB a channel; Simple: 32 KiB; CollNetChain's Simple: 256 KiB.
  EXPECT_EQ(op.channels_for(Collective::AllReduce, kib(40), Protocol::LL128, Algorithm::Ring), 8);
  EXPECT_EQ(op.channels_for(Collective::AllReduce, kib(64), Protocol::Simple, Algorithm::Ring), 2);
  EXPECT_EQ(
      op.channels_for(Collective::AllReduce, kib(1024), Protocol::Simple, Algorithm::CollNetChain),
      4);
  // Threads: Ring/LL of 16 KiB on its one channel: 512 x 128 B and 256 x 128 B exceed it, 128
  // x 128 B = 16 KiB does not: 128 threads. 8 bytes: down to 64 (not a multiple of 128).
  EXPECT_EQ(op.threads_for(Collective::AllReduce, kib(16), Protocol::LL, Algorithm::Ring, 1), 128);
  EXPECT_EQ(op.threads_for(Collective::AllReduce, 8, Protocol::LL, Algorithm::Ring, 1), 64);
  EXPECT_EQ(op.threads_for(Collective::AllReduce, kib(2048), Protocol::LL, Algorithm::Ring, 16),
            512);
  // Trees keep all their threads.
  EXPECT_EQ(op.threads_for(Collective::AllReduce, 8, Protocol::LL, Algorithm::Tree, 1), 512);
}

TEST(NcclClosedForm, TheProxyPostsEachChannelsNetworkStepInTurn) {
  // proxy_post_latency p: a GPU's proxy thread posts its channels' network steps one after
  // another, so each network step of an operation on C channels costs (C - 1) p more. Tree/LL
  // AllReduce of 64 KiB on 2 servers of 8 GPUs: C = 16 channels (4 KiB each), and the tree's
  // critical path crosses the network twice (up to the root's node and down again), so the
  // operation takes 2 x 15 x p longer than with p = 0: 30 us with p = 1 us, 3.9 us with the
  // default 130 ns. NCCL's own estimate is unchanged.
  const std::string w =
      "collective: allreduce, bytes: 64KiB, nccl: {NCCL_ALGO: Tree, NCCL_PROTO: LL}";
  const Figures base = run_one(rack_topology(2, 8), "nccl: {proxy_post_latency: 0s}\n", w);
  const Figures posted = run_one(rack_topology(2, 8), "nccl: {proxy_post_latency: 1us}\n", w);
  const Figures by_default = run_one(rack_topology(2, 8), "", w);
  EXPECT_EQ(base["channels"], 16);
  EXPECT_NEAR(posted.seconds - base.seconds, 2 * 15 * 1e-6, 1e-9);
  EXPECT_NEAR(by_default.seconds - base.seconds, 2 * 15 * 130e-9, 1e-9);
  EXPECT_DOUBLE_EQ(posted["nccl_model_us"], base["nccl_model_us"]);
}

TEST(NcclTuning, NvlsTreeAndTreeEstimatesByHand) {
  // HGX H100 as NCCL 2.27 sees it (HARDWARE.md 5.4-5.5): ring and tree graphs of 8 channels at
  // 48 GB/s, an NVLS graph of 8 heads at 40 GB/s inside the node, Intel host.
  //  NVLSTree, 2 nodes: latency = NVLink hwLat 25 + 2 x log2(2) x NET hwLat 14 = 53 us; bus =
  //    8 x min(40, 48) = 320 GB/s, algbw = 320 x 5/6 = 266.67 GB/s.
  //  Tree/LL128, 4 nodes: latency = 14 + 2 x (7 x 1.25 + 2 x 8.5) = 65.5 us; bus = min(0.92 x
  //    384, 8 x 41.4 [perChMaxTreeBw]) = 331.2 -> min(331.2 x 120/128, 8 x 29 [Tree LL128, >2
  //    nodes]) = 232 (no x 0.85: NCCL's tree graph has the BALANCED_TREE pattern with 8 GPUs a
  //    node), algbw / 2 = 116 GB/s, times NCCL's tree correction at 1 MiB (LL128, log2(1 MiB /
  //    64) = 14: 0.6) = 69.6 GB/s. With one GPU a node (TREE pattern) x 0.85.
  TuningInput in = hgx_input(2, 48, true);
  const TuningTables& t = tuning_tables("newest");
  EXPECT_NEAR(model_time_us(t, in, Algorithm::NvlsTree, Protocol::Simple, 1e9),
              53 + 1e9 / (1000 * 320 * 5.0 / 6), 1e-6);
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::Nvls, Protocol::Simple, 1e9)));
  in.nranks = 32;
  in.nnodes = 4;
  const double mib = 1 << 20;
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Tree, Protocol::LL128, mib),
              65.5 + mib / (1000 * 232 * 0.5 * 0.6), 1e-6);
  // One GPU a node, one graph channel at 48 GB/s: bus = min(0.92 x 48, 36.0) = 36.0 -> min(36.0
  // x 120/128, 29) = 29 -> x 0.85 = 24.65, algbw 12.325 x 0.6; latency 14 + 2 x 2 x 8.5 = 48 us
  // (no intra-node hops; the network hop at the Tree's latency anyway).
  in.ppn = 1;
  in.nranks = 4;
  in.graph_channels = 1;
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Tree, Protocol::LL128, mib),
              48 + mib / (1000 * 29 * 0.85 * 0.5 * 0.6), 1e-6);
}

TEST(NcclTuning, NvlsAcrossNodesAsTuningCcModelsIt) {
  // HGX H100, 4 nodes, CollNet (IB SHARP) enabled: NVLS across nodes (tuning.cc) has
  // latency = NVLink hwLat 25 + NET hwLat 18 = 43 us (NCCL 2.20.3: 23 + 18 = 41) and bus =
  // 8 heads x min(40, 48) = 320 GB/s, algbw = 320 x 5/6. Without CollNet NCCL disables it.
  // With it the tuner takes NVLS where it took Tree, NVLSTree and Ring
  // (ChoosesAsNcclDoesOnHgxH100): 1 MiB 46.9 us against CollNetDirect's 50.4 (2 (3.7 + 7 x 0.4) +
  // 31 = 44 us, algbw 8 x 48 x 0.85 / 2 = 163.2 GB/s), and above.
  TuningInput in = hgx_input(4, 48, true);
  in.nvswitch = true;
  const TuningTables& t = tuning_tables("newest");
  const double gb = 1e9, mib = 1 << 20;
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::Nvls, Protocol::Simple, gb)));
  in.collnet = true;
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Nvls, Protocol::Simple, gb),
              43 + gb / (1000 * 320 * 5.0 / 6), 1e-6);
  EXPECT_NEAR(model_time_us(tuning_tables("2.20.3"), in, Algorithm::Nvls, Protocol::Simple, gb),
              41 + gb / (1000 * 320 * 5.0 / 6), 1e-6);
  EXPECT_NEAR(model_time_us(t, in, Algorithm::CollNetDirect, Protocol::Simple, mib),
              44 + mib / (1000 * 8 * 48 * 0.85 / 2), 1e-6);
  for (const double bytes : {mib, 16 * mib, 4096 * mib}) {
    const AlgoChoice got = choose(t, in, bytes, kAnyAlgorithm, kAnyProtocol);
    EXPECT_EQ(got.algorithm, Algorithm::Nvls) << bytes;
    EXPECT_EQ(got.protocol, Protocol::Simple) << bytes;
  }
}

TEST(NcclTuning, NvlsAllGatherAndReduceScatterOnOneNode) {
  // One HGX H100 node as NCCL sees it: ring graph of 8 channels at 450 / 8 = 56.25 GB/s, NVLS
  // graph of 8 heads at 450 / 9 = 50 GB/s. NVLS AllGather or ReduceScatter (NCCL 2.27): bus =
  // 8 x min(50 x 7/8, 50 x 0.9) = 350 GB/s, not converted, latency NVLink hwLat 25 us; NCCL
  // 2.20.3: bus 8 x 50 = 400 x 5/6, latency 23 us. Against the ring (algbw = bus x 8/7): LL
  // 10.8 us + S / 161.1 GB/s (llMaxBw 141), LL128 27.3 + S / 335.5, Simple 32.2 + S / 514.3:
  // NVLS takes the sizes between 4.24 and 7.9 MB (2 MiB: LL 23.8 us against NVLS's 31.0; 6 MiB:
  // NVLS 43.0 against Simple's 44.4 and LL128's 46.0; 64 MiB: Simple 162.7 against 216.7).
  TuningInput in = hgx_input(1, 56.25, true);
  in.nvls_bw_intra = 50;
  const TuningTables& t = tuning_tables("newest");
  const double gb = 1e9, mib = 1 << 20;
  for (const Collective c : {Collective::AllGather, Collective::ReduceScatter}) {
    in.collective = c;
    EXPECT_NEAR(model_time_us(t, in, Algorithm::Nvls, Protocol::Simple, gb), 25 + gb / 350e3, 1e-6);
    EXPECT_NEAR(model_time_us(tuning_tables("2.20.3"), in, Algorithm::Nvls, Protocol::Simple, gb),
                23 + gb / (400e3 * 5 / 6), 1e-6);
    EXPECT_EQ(choose(t, in, 2 * mib, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::LL);
    EXPECT_EQ(choose(t, in, 6 * mib, kAnyAlgorithm, kAnyProtocol).algorithm, Algorithm::Nvls);
    const AlgoChoice large = choose(t, in, 64 * mib, kAnyAlgorithm, kAnyProtocol);
    EXPECT_EQ(large.algorithm, Algorithm::Ring);
    EXPECT_EQ(large.protocol, Protocol::Simple);
  }
  // Not across nodes, CollNet or not.
  in = hgx_input(2, 48, true);
  in.collective = Collective::AllGather;
  in.collnet = true;
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::Nvls, Protocol::Simple, gb)));
}

TEST(NcclTuning, ChoosesAsNcclDoesOnHgxH100) {
  // NCCL 2.27's choice for AllReduce on HGX H100 servers, from its model with the inputs above
  // (derived by hand from tuning.cc: latency + bytes / algbw per algorithm and protocol):
  // 2 nodes: NVLSTree/Simple at every size (1 MiB: 57 us against Tree/LL128's 60);
  // 4 nodes: Tree/LL128 at 1 MiB, NVLSTree at 16 MiB, Ring/Simple at 4 GiB.
  TuningInput in = hgx_input(2, 48, true);
  const TuningTables& t = tuning_tables("newest");
  const double mib = 1 << 20;
  struct Case {
    int nodes;
    double bytes;
    Algorithm a;
    Protocol p;
  };
  for (const Case& c : {Case{2, mib, Algorithm::NvlsTree, Protocol::Simple},
                        Case{2, 16 * mib, Algorithm::NvlsTree, Protocol::Simple},
                        Case{2, 4096 * mib, Algorithm::NvlsTree, Protocol::Simple},
                        Case{4, mib, Algorithm::Tree, Protocol::LL128},
                        Case{4, 16 * mib, Algorithm::NvlsTree, Protocol::Simple},
                        Case{4, 4096 * mib, Algorithm::Ring, Protocol::Simple}}) {
    in.nnodes = c.nodes;
    in.nranks = 8 * c.nodes;
    const AlgoChoice got = choose(t, in, c.bytes, kAnyAlgorithm, kAnyProtocol);
    EXPECT_EQ(got.algorithm, c.a) << c.nodes << " nodes, " << c.bytes;
    EXPECT_EQ(got.protocol, c.p) << c.nodes << " nodes, " << c.bytes;
  }
}

TEST(NcclLayout, HamiltonianDecompositionUsesEveryLinkOnce) {
  // The complete directed graph on n vertices splits into n - 1 directed Hamiltonian cycles for
  // every n but 4 and 6 (Tillson 1980): each cycle visits all n vertices, and together they use
  // each of the n (n - 1) arcs exactly once.
  for (int n : {2, 3, 5, 7, 8}) {
    const std::vector<std::vector<int>> cycles = hamiltonian_decomposition(n);
    ASSERT_EQ(cycles.size(), static_cast<size_t>(n - 1)) << n;
    std::set<std::pair<int, int>> arcs;
    for (const std::vector<int>& c : cycles) {
      ASSERT_EQ(c.size(), static_cast<size_t>(n));
      EXPECT_EQ(std::set<int>(c.begin(), c.end()).size(), static_cast<size_t>(n));
      for (size_t i = 0; i < c.size(); ++i)
        arcs.insert({c[i], c[(i + 1) % c.size()]});
    }
    EXPECT_EQ(arcs.size(), static_cast<size_t>(n * (n - 1))) << n;
  }
  EXPECT_TRUE(hamiltonian_decomposition(4).empty());
}

TEST(NcclLayout, HamiltonianPathsUseEveryLinkOnceFromEveryStart) {
  // n directed Hamiltonian paths of the complete directed graph, path k from vertex k, use its
  // n (n - 1) arcs exactly once (n paths of n - 1 arcs); each vertex then ends exactly one path
  // (its n - 1 out-arcs are used by the n paths that do not end there).
  for (int n : {2, 4, 6, 7, 8}) {
    const std::vector<std::vector<int>> paths = hamiltonian_paths(n);
    ASSERT_EQ(paths.size(), static_cast<size_t>(n)) << n;
    std::set<std::pair<int, int>> arcs;
    std::set<int> ends;
    for (int k = 0; k < n; ++k) {
      const std::vector<int>& p = paths[static_cast<size_t>(k)];
      ASSERT_EQ(p.size(), static_cast<size_t>(n));
      EXPECT_EQ(p.front(), k);
      EXPECT_EQ(std::set<int>(p.begin(), p.end()).size(), static_cast<size_t>(n));
      for (size_t i = 0; i + 1 < p.size(); ++i)
        arcs.insert({p[i], p[i + 1]});
      ends.insert(p.back());
    }
    EXPECT_EQ(arcs.size(), static_cast<size_t>(n * (n - 1))) << n;
    EXPECT_EQ(ends.size(), static_cast<size_t>(n)) << n;
  }
}

TEST(NcclLayout, MultiNodeRingsOverAMeshShareLinksAndNicsEvenly) {
  // Two 8-GPU mesh servers, 64 channels (RCCL across nodes), 8 per rail. Leaving each node by
  // its last GPU's NIC (RCCL's rings), channel c takes the Hamiltonian path from its rail GPU:
  // the 8 paths cross every one of the 56 directed links once, so every link carries exactly
  // 64 / 8 = 8 channels, and every NIC sends exactly 8 (each GPU ends one path). Handing over
  // to the rail GPU (PXN), a channel also takes the link back to it: the rotated cycles keep
  // each link, hand-over included, within 10 (64 x 8 = 512 arc uses over 56 links: 9.1 on
  // average; 64 channels over 7 cycles, 9 or 10 each). A single ring order for all channels
  // would put all 64 on one NIC and 7 links.
  const fabric::Fabric f = test::fabric_from_yaml(R"(
type: clos
racks: 1
nodes_per_rack: 2
node: {gpus: 8, scale_up: mesh}
leaf: {uplinks: 16}
spine: {count: 1}
)");
  std::vector<fabric::NodeId> ranks;
  for (uint32_t i = 0; i < 16; ++i)
    ranks.push_back(f.gpu(i));
  const Communicator comm(f, ranks);
  for (const bool pxn : {false, true}) {
    std::map<std::pair<fabric::NodeId, fabric::NodeId>, int> arcs;
    std::map<fabric::NodeId, int> exits;
    for (int c = 0; c < 64; ++c) {
      const std::vector<fabric::NodeId> order = comm.ring_order(c, pxn);
      for (size_t i = 0; i + 1 < 8; ++i)
        ++arcs[{order[i], order[i + 1]}];
      if (pxn) ++arcs[{order[7], order[0]}];
      ++exits[order[7]];
    }
    EXPECT_EQ(arcs.size(), 56u);
    for (const auto& [arc, n] : arcs) {
      if (pxn) {
        EXPECT_LE(n, 10);
      } else {
        EXPECT_EQ(n, 8);
      }
    }
    if (!pxn) {
      EXPECT_EQ(exits.size(), 8u);
      for (const auto& [gpu, n] : exits)
        EXPECT_EQ(n, 8) << gpu;
    }
  }
}

TEST(NcclBehaviour, RingsOverAnXgmiMeshUseEveryLink) {
  // One 8 x MI300X server, xGMI full mesh of 7 links per GPU at 64 GB/s x 0.75 = 48 GB/s, RCCL:
  // its 56 channels follow the 7 Hamiltonian cycles of the mesh in turn, so every directed link
  // carries 8 channels and a GPU sends on all 7 links: the ring's bus bandwidth reaches
  // 7 x 48 = 336 GB/s (a single ring order would put every channel on one link: 48 GB/s).
  // 8 GiB, NCCL latencies off: busbw within 1% of 336.
  const auto w = run(R"(topology:
  type: clos
  racks: 1
  nodes_per_rack: 1
  node: {gpus: 8, gpu_arch: cdna3, scale_up: mesh, xgmi_link_bandwidth: 64GB/s,
         xgmi_efficiency: 0.75}
  leaf: {uplinks: 8}
  spine: {count: 1}
nccl: {library: rccl, NCCL_ALGO: Ring, NCCL_PROTO: Simple, hop_latency_factor: 0,
       launch_latency: 0s}
workloads:
  - {name: ar, type: nccl, collective: allreduce, bytes: 8GiB}
)");
  EXPECT_EQ(w.at("ar")["channels"], 56);
  EXPECT_NEAR(w.at("ar")["busbw_GBps"], 336, 0.01 * 336);
}

TEST(NcclClosedForm, MscclAllPairsOnAnXgmiMesh) {
  // One 8 x MI300X server, xGMI full mesh at 64 GB/s x 0.75 = B = 48 GB/s and L = 250 ns a
  // link, RCCL: an AllReduce of S up to 16 MiB runs MSCCL's all-pairs schedule, every rank
  // sending to each of its 7 peers over their own link at once.
  //  * 1 MiB, simple-op (8 channels, Simple): a reduce-scatter pass sends S/8 to each peer, an
  //    all-gather pass the reduced S/8 again: 2 (S / (8 B) + L) = 5.961 us with NCCL's
  //    latencies off. On: RCCL's ring baseLat for Simple 17 us, and a step per pass at its
  //    ring hwLat 2.1 us less the reference wire L: + 17 + 2 x 1.85 = 26.661 us.
  //  * 16 KiB, ll-1pass-op (2 channels, LL): each rank sends its whole buffer, 2 S wire bytes
  //    (LL's flags): 2 S / B + L = 0.933 us; on: + 12 + (0.8 - 0.25) = 13.483 us.
  // Not MSCCL: 32 B (8 floats, not a multiple of its 16 chunks), 32 MiB (beyond 16 MiB),
  // RCCL_MSCCL_ENABLE: 0, and two servers.
  const std::string server = R"(topology:
  type: clos
  racks: 1
  nodes_per_rack: {}
  node: {{gpus: 8, gpu_arch: cdna3, scale_up: mesh, xgmi_link_bandwidth: 64GB/s,
         xgmi_efficiency: 0.75, xgmi_latency: 250ns}}
  leaf: {{uplinks: 8}}
  spine: {{count: 1}}
nccl: {{library: rccl{}}}
)";
  const auto op = [&](int servers, const char* bytes, const char* nccl) {
    return run_one(fmt::format(fmt::runtime(server), servers, nccl), "",
                   fmt::format("collective: allreduce, bytes: {}", bytes));
  };
  const double b = 48e9, l = 250e-9, mib = kMiB;
  const char* off = ", hop_latency_factor: 0, launch_latency: 0s, proxy_post_latency: 0s";
  const Figures two_pass = op(1, "1MiB", off);
  EXPECT_EQ(two_pass.notes.at("algorithm"), "MSCCL");
  EXPECT_EQ(two_pass.notes.at("protocol"), "Simple");
  EXPECT_EQ(two_pass["channels"], 8);
  EXPECT_DOUBLE_EQ(two_pass["nccl_model_us"], 0);  // the tuner was not asked
  EXPECT_NEAR(two_pass.seconds, 2 * (mib / (8 * b) + l), 1e-9);
  EXPECT_NEAR(op(1, "1MiB", "").seconds, 2 * (mib / (8 * b) + l) + 17e-6 + 2 * 1.85e-6, 1e-9);
  const Figures one_pass = op(1, "16KiB", off);
  EXPECT_EQ(one_pass.notes.at("protocol"), "LL");
  EXPECT_EQ(one_pass["channels"], 2);
  EXPECT_NEAR(one_pass.seconds, 2 * 16384 / b + l, 1e-9);
  EXPECT_NEAR(op(1, "16KiB", "").seconds, 2 * 16384 / b + l + 12e-6 + 0.55e-6, 1e-9);
  EXPECT_EQ(op(1, "32B", "").notes.at("algorithm"), "Ring");
  EXPECT_EQ(op(1, "32MiB", "").notes.at("algorithm"), "Ring");
  EXPECT_NE(op(1, "1MiB", ", RCCL_MSCCL_ENABLE: 0").notes.at("algorithm"), "MSCCL");
  EXPECT_NE(op(2, "1MiB", "").notes.at("algorithm"), "MSCCL");
}

TEST(NcclBehaviour, AmdGpusRunRcclUnlessTheScenarioNamesALibrary) {
  // NCCL does not run on AMD GPUs: where `library` is not written, a communicator of cdna3 or
  // cdna4 GPUs runs RCCL (its tables, rccl-mi300) and one of NVIDIA GPUs NCCL (newest); tables
  // that are written name their library. Observable in the channels of a large AllReduce on 2
  // servers of 8 GPUs with 8 NICs each: RCCL's 64 across nodes, NCCL's 2 per NIC, 16.
  const auto channels = [](const char* arch, const char* nccl) {
    const bool amd = std::string_view(arch).starts_with("cdna");
    return channels_of_1gib(
        fmt::format("{{gpus: 8, gpu_arch: {}, scale_up: {}, nic_speed: 400Gbps}}", arch,
                    amd ? "mesh" : "nvswitch"),
        2, 16, nccl);
  };
  EXPECT_EQ(channels("cdna3", ""), 64);
  EXPECT_EQ(channels("cdna4", ""), 64);
  EXPECT_EQ(channels("cdna3", "library: rccl"), 64);
  EXPECT_EQ(channels("cdna3", "library: nccl"), 16);
  EXPECT_EQ(channels("cdna3", "tuning_tables: newest"), 16);
  EXPECT_EQ(channels("hopper", ""), 16);
  EXPECT_EQ(channels("hopper", "library: rccl"), 64);
  EXPECT_EQ(channels("hopper", "tuning_tables: rccl-mi300"), 64);
}

TEST(NcclTuning, PatForOneRankPerServer) {
  // 64 single-GPU servers, one NIC each (NCCL's graph: 1 channel at 48 GB/s), AllGather,
  // "newest" tables. With one rank per node every network hop costs the Tree's hwLat.
  //  * PAT/Simple: 8 + log2(64) x 14 / 3.5 + 2.8 x 64 = 211.2 us; bus 0.75 x 48 = 36 GB/s,
  //    unconverted for AllGather.
  //  * Ring: 63 network steps: LL 6.6 + 63 x 5.0 = 321.6 us, Simple 8.4 + 63 x 14 = 890.4 us at
  //    48 x 64/63 GB/s.
  // 1 MiB: PAT 240.3 us against Ring/LL 321.6 + 1 MiB / (20.4 x 64/63); 1 GiB: Ring/Simple
  // (22.9 ms against PAT's 30.0 ms).
  TuningInput in;
  in.collective = Collective::AllGather;
  in.nranks = in.nnodes = 64;
  in.ppn = 1;
  in.channels = 2;
  in.graph_channels = 1;
  in.bw_intra = in.bw_inter = 48;
  in.pat = true;
  const TuningTables& t = tuning_tables("newest");
  const double mib = 1 << 20, gib = 1 << 30;
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Pat, Protocol::Simple, mib),
              211.2 + mib / (1000 * 36.0), 1e-6);
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Ring, Protocol::LL, 0), 321.6, 1e-6);
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Ring, Protocol::Simple, gib),
              890.4 + gib / (1000 * 48.0 * 64 / 63), 1e-6);
  EXPECT_EQ(choose(t, in, mib, kAnyAlgorithm, kAnyProtocol).algorithm, Algorithm::Pat);
  EXPECT_EQ(choose(t, in, gib, kAnyAlgorithm, kAnyProtocol).algorithm, Algorithm::Ring);
  in.collective = Collective::ReduceScatter;
  EXPECT_EQ(choose(t, in, mib, kAnyAlgorithm, kAnyProtocol).algorithm, Algorithm::Pat);
  // Not offered: with LL, for AllReduce, with two ranks a node, NCCL_PAT_ENABLE=0, or in NCCL
  // 2.20.3, which predates it.
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::Pat, Protocol::LL, mib)));
  in.collective = Collective::AllReduce;
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::Pat, Protocol::Simple, mib)));
  in.collective = Collective::AllGather;
  in.ppn = 2;
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::Pat, Protocol::Simple, mib)));
  in.ppn = 1;
  in.pat = false;
  EXPECT_TRUE(std::isinf(model_time_us(t, in, Algorithm::Pat, Protocol::Simple, mib)));
  in.pat = true;
  EXPECT_TRUE(std::isinf(
      model_time_us(tuning_tables("2.20.3"), in, Algorithm::Pat, Protocol::Simple, mib)));
}

TEST(NcclTuning, RcclModelFiveByHand) {
  // RCCL's model 5 (MI300X), Ring/Simple AllReduce on 2 nodes x 8 GPUs, its graph of 8 channels
  // at 48 GB/s: latency = baseLat 17 + 26 xGMI steps x max(hwLat 2.1, 3 x net overhead 1) + 4
  // network steps (RCCL counts 2 N: "nNodes > 1 ? 2*nNodes : 0") x 320 = 1375 us (no plateau in
  // RCCL); bus = 8 x 48 x bwRatio 1.0 = 384 GB/s,
  // algbw = 384 x 16/30 = 204.8 GB/s, times the ring correction at 1 GiB (Simple,
  // log2(2^30 / 64) = 24: 1.0). Its protocol ranges override the model on 2 nodes: LL up to 1 MiB
  // per rank, LL128 up to 9 MiB, Simple beyond.
  TuningInput in = hgx_input(2, 48);
  in.channels = 64;
  in.arch = fabric::GpuArch::Cdna3;
  in.rccl = rccl_model("rccl-mi300", in.arch);
  ASSERT_NE(in.rccl, nullptr);
  const TuningTables& t = tuning_tables("rccl-mi300");
  const double gib = 1 << 30;
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Ring, Protocol::Simple, gib),
              17 + 26 * 3.0 + 4 * 320 + gib / (1000 * 384 * 16.0 / 30), 1e-6);
  EXPECT_EQ(choose(t, in, 512 * 1024, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::LL);
  EXPECT_EQ(choose(t, in, 4 << 20, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::LL128);
  EXPECT_EQ(choose(t, in, gib, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::Simple);
  // NCCL_PROTO set: RCCL's ranges do not apply.
  EXPECT_EQ(choose(t, in, 512 * 1024, kAnyAlgorithm, only(Protocol::Simple)).protocol,
            Protocol::Simple);
  // Not a model of NCCL's releases.
  EXPECT_EQ(rccl_model("newest", fabric::GpuArch::Cdna3), nullptr);
}

TEST(NcclTuning, RcclTakesModelSixOnGfx950) {
  // On gfx950 (MI355X, cdna4) RCCL replaces the platform model's tuning by model 6
  // (rome_models.cc: "if gfx950: tuning = 6") and offers LL128 there too (tuning.cc's LL128
  // rule names gfx90a, gfx942 and gfx950; CHANGELOG for ROCm 7.0: "Enabled LL128 protocol on
  // gfx950"). Model 6 has model 5's latencies and bandwidth ratios, so the Ring/Simple time of
  // RcclModelFiveByHand holds but for its ring correction at 1 GiB, 0.8 (model 5: 1.0); its
  // AllReduce ranges on 2 nodes are LL up to 131071 bytes a rank, LL128 up to 17660227, Simple
  // beyond (model 5: 1 MiB and 9 MiB).
  TuningInput in = hgx_input(2, 48);
  in.channels = 64;
  in.arch = fabric::GpuArch::Cdna4;
  in.rccl = rccl_model("rccl-mi300", in.arch);
  ASSERT_NE(in.rccl, nullptr);
  EXPECT_NE(in.rccl, rccl_model("rccl-mi300", fabric::GpuArch::Cdna3));
  const TuningTables& t = tuning_tables("rccl-mi300");
  const double gib = 1 << 30;
  EXPECT_NEAR(model_time_us(t, in, Algorithm::Ring, Protocol::Simple, gib),
              17 + 26 * 3.0 + 4 * 320 + gib / (1000 * 384 * 16.0 / 30 * 0.8), 1e-6);
  EXPECT_EQ(choose(t, in, 131071, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::LL);
  EXPECT_EQ(choose(t, in, 131072, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::LL128);
  EXPECT_EQ(choose(t, in, 16 << 20, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::LL128);
  EXPECT_EQ(choose(t, in, 17660228, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::Simple);
  EXPECT_TRUE(std::isfinite(model_time_us(t, in, Algorithm::Tree, Protocol::LL128, 4 << 20)));
  // Its corrections differ where its tuners measured: a Tree/Simple AllReduce of 16 MiB
  // (log2(2^24 / 64) = 18) has model 6's 0.1 against model 5's 1.0, ten times the bandwidth
  // term: T6 - T5 = 9 x (S / algbw5), the latency term being the same.
  TuningInput five = in;
  five.arch = fabric::GpuArch::Cdna3;
  five.rccl = rccl_model("rccl-mi300", five.arch);
  const double s = 16 << 20;
  const double lat = model_time_us(t, five, Algorithm::Tree, Protocol::Simple, 0);
  const double t5 = model_time_us(t, five, Algorithm::Tree, Protocol::Simple, s);
  const double t6 = model_time_us(t, in, Algorithm::Tree, Protocol::Simple, s);
  EXPECT_NEAR(t6 - t5, 9 * (t5 - lat), 1e-6 * t6);
}

/// `nodes` servers described by `node` (a flow mapping of topology.node keys) on one leaf per
/// rail; arch_fabric: 8 GPUs of a generation (`gpu_arch`); a runner over all their GPUs.
fabric::Fabric node_fabric(const std::string& node, int nodes) {
  return test::fabric_from_yaml(
      fmt::format("type: rail_optimized\nnodes: {0}\nnodes_per_leaf: {0}\nnode: {1}\n"
                  "leaf: {{uplinks: 4}}\nspine: {{count: 4}}\n",
                  nodes, node));
}
fabric::Fabric arch_fabric(const char* arch, int nodes) {
  return node_fabric(fmt::format("{{gpus: 8, gpu_arch: {}}}", arch), nodes);
}
OpRunner runner_of_all(const fabric::Fabric& f, const NcclConfig& cfg) {
  return OpRunner(f, std::vector<fabric::NodeId>(f.gpus().begin(), f.gpus().end()), cfg, 0);
}
OpRunner rccl_runner(const fabric::Fabric& f, NcclConfig cfg) {
  cfg.rccl = true;
  cfg.tuning_tables = "rccl-mi300";
  return runner_of_all(f, cfg);
}

TEST(NcclBehaviour, RcclDefaultsFollowTheGpu) {
  // Where the variables are unset RCCL decides by GPU and ranks (rcclSetPxn,
  // rcclSetP2pNetChunkSize):
  // PXN from 64 ranks on gfx942 and from 32 on gfx950; the point-to-point network chunk 512 KiB
  // from 64 ranks on gfx942, 256 KiB from 16 and 512 KiB from 32 on gfx950, NCCL's 128 KiB
  // otherwise; a set value is taken as it is (the AAC14 MI355X runs set NCCL_PXN_DISABLE=0 on 16
  // ranks). One node of 8 gfx950 runs 112 channels (CHANGELOG for ROCm 7.0), of 8 gfx942 56.
  const fabric::Fabric mi355x_1 = arch_fabric("cdna4", 1), mi355x_2 = arch_fabric("cdna4", 2),
                       mi355x_4 = arch_fabric("cdna4", 4), mi300x_1 = arch_fabric("cdna3", 1),
                       mi300x_4 = arch_fabric("cdna3", 4), mi300x_8 = arch_fabric("cdna3", 8);
  const NcclConfig unset;
  EXPECT_FALSE(rccl_runner(mi355x_2, unset).pxn());
  EXPECT_TRUE(rccl_runner(mi355x_4, unset).pxn());
  EXPECT_FALSE(rccl_runner(mi300x_4, unset).pxn());
  EXPECT_TRUE(rccl_runner(mi300x_8, unset).pxn());
  NcclConfig on = unset;
  on.pxn = true;
  EXPECT_TRUE(rccl_runner(mi355x_2, on).pxn());
  const auto chunk = [](const fabric::Fabric& f, const NcclConfig& cfg) {
    return rccl_runner(f, cfg).config().p2p_net_chunksize->count();
  };
  EXPECT_EQ(chunk(mi355x_1, unset), 128 << 10);
  EXPECT_EQ(chunk(mi355x_2, unset), 256 << 10);
  EXPECT_EQ(chunk(mi355x_4, unset), 512 << 10);
  EXPECT_EQ(chunk(mi300x_4, unset), 128 << 10);
  EXPECT_EQ(chunk(mi300x_8, unset), 512 << 10);
  NcclConfig set = unset;
  set.p2p_net_chunksize = Bytes(64 << 10);
  EXPECT_EQ(chunk(mi355x_4, set), 64 << 10);
  EXPECT_EQ(rccl_runner(mi355x_1, unset).default_channels(), 112);
  EXPECT_EQ(rccl_runner(mi300x_1, unset).default_channels(), 56);
  EXPECT_EQ(rccl_runner(mi355x_2, unset).default_channels(), 64);
  // NCCL keeps PXN on and its 128 KiB chunk whatever the scale.
  const fabric::Fabric h = test::fabric_from_yaml(rail_topology(8, 8).substr(10));
  const OpRunner n(h, std::vector<fabric::NodeId>(h.gpus().begin(), h.gpus().end()), unset, 0);
  EXPECT_TRUE(n.pxn());
  EXPECT_EQ(n.config().p2p_net_chunksize->count(), 128 << 10);
}

TEST(NcclTuning, RcclRangesTakeEachRanksShareOfAllGatherReduceScatterAndBroadcast) {
  // rcclUpdateCollectiveProtocol across nodes compares the bytes of each rank (AllReduce: the
  // buffer; the others: total / ranks) with its model's ranges. 2 nodes x 8 GPUs. Model 5
  // (gfx942): AllGather LL up to 98304 bytes a rank, LL128 to 5046272, Simple beyond; no
  // Broadcast range (the model's own choice stands). Model 6 (gfx950): AllGather LL up to 7
  // bytes a rank (LL128 from 8), Broadcast LL up to 2048 and LL128 to 16 MiB.
  TuningInput in = hgx_input(2, 48);
  in.channels = 64;
  in.arch = fabric::GpuArch::Cdna3;
  in.rccl = rccl_model("rccl-mi300", in.arch);
  const TuningTables& t = tuning_tables("rccl-mi300");
  in.collective = Collective::AllGather;
  EXPECT_EQ(choose(t, in, 16 * 98304.0, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::LL);
  EXPECT_EQ(choose(t, in, 16 * 98305.0, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::LL128);
  EXPECT_EQ(choose(t, in, 16 * 5046273.0, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::Simple);
  in.collective = Collective::Broadcast;  // a ring: the protocol of least model time
  Protocol least = Protocol::LL;
  for (const Protocol p : {Protocol::LL128, Protocol::Simple}) {
    if (model_time_us(t, in, Algorithm::Ring, p, 1 << 20) <
        model_time_us(t, in, Algorithm::Ring, least, 1 << 20)) {
      least = p;
    }
  }
  EXPECT_EQ(choose(t, in, 1 << 20, kAnyAlgorithm, kAnyProtocol).protocol, least);
  EXPECT_NE(least, Protocol::LL128);  // which model 6's range gives (below)
  in.arch = fabric::GpuArch::Cdna4;
  in.rccl = rccl_model("rccl-mi300", in.arch);
  EXPECT_EQ(choose(t, in, 16 * 2048.0, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::LL);
  EXPECT_EQ(choose(t, in, 16 * 2049.0, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::LL128);
  EXPECT_EQ(choose(t, in, 1 << 20, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::LL128);
  in.collective = Collective::AllGather;
  EXPECT_EQ(choose(t, in, 16 * 7.0, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::LL);
  EXPECT_EQ(choose(t, in, 16 * 8.0, kAnyAlgorithm, kAnyProtocol).protocol, Protocol::LL128);
}

TEST(NcclBehaviour, RcclAllGatherTakesItsModelsThreadThresholds) {
  // rcclUpdateThreadThreshold: across nodes an AllGather or ReduceScatter takes its model's
  // bytes a thread per rank (LL 16, LL128 64; both models), times the ranks, where NCCL's
  // Ring/LL has 8 x ranks. 2 nodes x 8 gfx942, 256 threads a channel, 1 MiB with LL: RCCL
  // 2^20 / (256 x 16 x 16) = 16 channels, NCCL's threshold would give 32 (of 64). An AllReduce
  // keeps NCCL's; set channels (NCCL_MAX_NCHANNELS) turn RCCL's off.
  const fabric::Fabric f = arch_fabric("cdna3", 2);
  const NcclConfig unset;
  const OpRunner op = rccl_runner(f, unset);
  EXPECT_EQ(op.channels_for(Collective::AllGather, 1 << 20, Protocol::LL, Algorithm::Ring), 16);
  EXPECT_EQ(op.channels_for(Collective::ReduceScatter, 1 << 20, Protocol::LL, Algorithm::Ring), 16);
  EXPECT_EQ(op.channels_for(Collective::AllReduce, 1 << 20, Protocol::LL, Algorithm::Ring), 32);
  // LL128: 2^22 / (256 x 64 x 16) = 16 channels (NCCL's 8 B a thread: 64, all of them).
  EXPECT_EQ(op.channels_for(Collective::AllGather, 4 << 20, Protocol::LL128, Algorithm::Ring), 16);
  NcclConfig bounded = unset;
  bounded.max_channels = 64;
  EXPECT_EQ(rccl_runner(f, bounded)
                .channels_for(Collective::AllGather, 1 << 20, Protocol::LL, Algorithm::Ring),
            32);
}

TEST(NcclTuning, TheSimulationChargesRcclsRingNetworkStepItsTreesLatency) {
  // RCCL's 320 us for a Ring/Simple network step is a weight of its choice, not a cost: the
  // simulation charges the step its Tree/Simple network latency, 25 us, plus the plugin's
  // latency twice (Simple), here 5 us: 35 us. Every other step is the model's own (Ring/LL
  // network 9.5 us + 5; Ring/Simple xGMI: max(2.1, 3 x net overhead 1) = 3), and NCCL's tables
  // are charged as they are (Ring/Simple network 14 + 2 x 5).
  TuningInput in = hgx_input(2, 48);
  in.arch = fabric::GpuArch::Cdna3;
  in.latency_inter_us = 5;
  const TuningTables& nccl = tuning_tables("newest");
  EXPECT_DOUBLE_EQ(step_latency_us(nccl, in, Algorithm::Ring, Protocol::Simple, true), 24.0);
  in.rccl = rccl_model("rccl-mi300", in.arch);
  const TuningTables& t = tuning_tables("rccl-mi300");
  EXPECT_DOUBLE_EQ(hop_latency_us(t, in, Algorithm::Ring, Protocol::Simple, true), 330.0);
  EXPECT_DOUBLE_EQ(step_latency_us(t, in, Algorithm::Ring, Protocol::Simple, true), 35.0);
  EXPECT_DOUBLE_EQ(step_latency_us(t, in, Algorithm::Ring, Protocol::LL, true), 14.5);
  EXPECT_DOUBLE_EQ(step_latency_us(t, in, Algorithm::Ring, Protocol::Simple, false), 3.0);
}

TEST(NcclParameters, AlgoAndProtoListsAsNcclReadsThem) {
  std::string bad;
  const auto m = parse_nccl_list("^NVLS,nvlstree", true, bad);
  ASSERT_TRUE(m.has_value());
  const auto ar = static_cast<size_t>(Collective::AllReduce);
  EXPECT_EQ((*m)[ar], only(Algorithm::Tree) | only(Algorithm::Ring) |
                          only(Algorithm::CollNetDirect) | only(Algorithm::CollNetChain) |
                          only(Algorithm::Pat));
  const auto per = parse_nccl_list("allreduce:tree,ring;allgather:Ring", true, bad);
  ASSERT_TRUE(per.has_value());
  EXPECT_EQ((*per)[ar], only(Algorithm::Tree) | only(Algorithm::Ring));
  EXPECT_EQ((*per)[static_cast<size_t>(Collective::AllGather)], only(Algorithm::Ring));
  EXPECT_EQ((*per)[static_cast<size_t>(Collective::Broadcast)], kAnyAlgorithm);
  EXPECT_EQ((*parse_nccl_list("COLLNETCHAIN", true, bad))[ar], only(Algorithm::CollNetChain));
  EXPECT_EQ((*parse_nccl_list("CollNetDirect", true, bad))[ar], only(Algorithm::CollNetDirect));
  EXPECT_EQ((*parse_nccl_list("collnet", true, bad))[ar],
            only(Algorithm::CollNetDirect) | only(Algorithm::CollNetChain));
  EXPECT_EQ((*parse_nccl_list("pat", true, bad))[ar], only(Algorithm::Pat));
  EXPECT_EQ((*parse_nccl_list("LL128,simple", false, bad))[ar],
            only(Protocol::LL128) | only(Protocol::Simple));
  EXPECT_FALSE(parse_nccl_list("Ring,Rings", true, bad).has_value());
  EXPECT_EQ(bad, "Rings");
  EXPECT_FALSE(parse_nccl_list("bogus:ring", true, bad).has_value());
  EXPECT_EQ(bad, "bogus");
}

TEST(NcclTuning, ChoosesLowLatencyProtocolsForSmallMessagesAndSimpleForLargeOnes) {
  TuningInput in = hgx_input(16, 50);
  const TuningTables& t = tuning_tables("newest");
  const AlgoChoice small = choose(t, in, 4096, kAnyAlgorithm, kAnyProtocol);
  EXPECT_EQ(small.protocol, Protocol::LL);
  EXPECT_EQ(small.algorithm, Algorithm::Tree);
  const AlgoChoice ring = choose(t, in, 8e9, only(Algorithm::Ring), kAnyProtocol);
  EXPECT_NE(ring.protocol, Protocol::LL);
  // Forcing a combination NCCL does not offer falls back to Ring, as NCCL does.
  in.collective = Collective::AllGather;
  EXPECT_EQ(choose(t, in, 1e6, only(Algorithm::Tree), only(Protocol::Simple)).algorithm,
            Algorithm::Ring);
}

// ---- parameters ----

TEST(NcclParameters, StructDefaultsAreTheTableDefaults) {
  // NcclConfig's member defaults (used by code that builds a runner without a scenario) must be
  // what a scenario without an `nccl:` section gets.
  const ConfigNode root = scenario::load_yaml_text("{}", "defaults.yaml");
  const ParamReader r(root, nccl_table());
  const NcclConfig a = read_nccl(r, NcclConfig{}, false);
  const NcclConfig b{};
  EXPECT_EQ(a.algos, b.algos);
  EXPECT_EQ(a.protos, b.protos);
  EXPECT_EQ(a.nvls_enable, b.nvls_enable);
  EXPECT_EQ(a.min_channels, b.min_channels);
  EXPECT_EQ(a.max_channels, b.max_channels);
  EXPECT_EQ(a.min_ctas, b.min_ctas);
  EXPECT_EQ(a.max_ctas, b.max_ctas);
  EXPECT_EQ(a.channels_per_net_peer, b.channels_per_net_peer);
  EXPECT_EQ(a.min_p2p_channels, b.min_p2p_channels);
  EXPECT_EQ(a.max_p2p_channels, b.max_p2p_channels);
  EXPECT_EQ(a.qps_per_connection, b.qps_per_connection);
  EXPECT_EQ(a.split_data_on_qps, b.split_data_on_qps);
  EXPECT_EQ(a.net_socket, b.net_socket);
  EXPECT_EQ(a.socket_nthreads, b.socket_nthreads);
  EXPECT_EQ(a.nsocks_perthread, b.nsocks_perthread);
  EXPECT_EQ(a.buffsize, b.buffsize);
  EXPECT_EQ(a.ll_buffsize, b.ll_buffsize);
  EXPECT_EQ(a.ll128_buffsize, b.ll128_buffsize);
  EXPECT_EQ(a.p2p_net_chunksize, b.p2p_net_chunksize);
  EXPECT_EQ(a.pxn, b.pxn);
  EXPECT_EQ(a.collnet, b.collnet);
  EXPECT_EQ(a.net_overhead, b.net_overhead);
  EXPECT_EQ(a.tuning_tables, b.tuning_tables);
  EXPECT_EQ(a.launch_latency, b.launch_latency);
  EXPECT_EQ(a.hop_latency_factor, b.hop_latency_factor);
}

TEST(NcclParameters, SocketsAreThreadsTimesSocketsPerThreadAsNcclOpensThem) {
  // ncclNetSocketGetNsockNthread: threads x sockets per thread, the sockets per thread lowered
  // to 64 / threads when the product passes 64; no helper thread: the control socket alone.
  // NCCL_NET names the plugin in any case.
  const auto read = [](const std::string& yaml) {
    const ConfigNode root = scenario::load_yaml_text(yaml, "nccl.yaml");
    return read_nccl(ParamReader(root, nccl_table()), NcclConfig{}, false);
  };
  EXPECT_FALSE(read("{}").net_socket);
  EXPECT_FALSE(read("{NCCL_NET: AWS Libfabric}").net_socket);  // an external plugin: RDMA
  EXPECT_EQ(read("{}").sockets(), 1);
  const NcclConfig s =
      read("{NCCL_NET: SOCKET, NCCL_SOCKET_NTHREADS: 2, NCCL_NSOCKS_PERTHREAD: 8}");
  EXPECT_TRUE(s.net_socket);
  EXPECT_EQ(s.sockets(), 16);
  EXPECT_EQ(read("{NCCL_SOCKET_NTHREADS: 16, NCCL_NSOCKS_PERTHREAD: 8}").sockets(), 64);
  EXPECT_EQ(read("{NCCL_SOCKET_NTHREADS: 0, NCCL_NSOCKS_PERTHREAD: 8}").sockets(), 1);
  EXPECT_EQ(read("{NCCL_SOCKET_NTHREADS: 3, NCCL_NSOCKS_PERTHREAD: 30}").sockets(), 63);
}

TEST(NcclParameters, LlBuffersAreTheLibrarysUnlessSet) {
  // DEFAULT_LL_BUFFSIZE = 8 lines x 16 B x NCCL_LL_MAX_NTHREADS x 8 steps: NCCL 512 threads,
  // 512 KiB; RCCL 256, 256 KiB. DEFAULT_LL128_BUFFSIZE = NCCL_LL128_ELEMS_PER_THREAD x
  // NCCL_LL128_MAX_NTHREADS x 8 steps x 8 B: NCCL 120 x 640, 4915200 B; RCCL 28 x 256, 458752 B.
  NcclConfig nccl;
  EXPECT_EQ(nccl.buffer(Protocol::LL).count(), 512 << 10);
  EXPECT_EQ(nccl.buffer(Protocol::LL128).count(), 4915200);
  NcclConfig rccl;
  rccl.rccl = true;
  EXPECT_EQ(rccl.buffer(Protocol::LL).count(), 256 << 10);
  EXPECT_EQ(rccl.buffer(Protocol::LL128).count(), 458752);
  rccl.ll128_buffsize = Bytes(1 << 20);
  EXPECT_EQ(rccl.buffer(Protocol::LL128).count(), 1 << 20);
}

TEST(NcclBehaviour, GbxHostsDoubleThePointToPointNetChunkAcrossNodes) {
  // init.cc computeBuffSizes (newest releases): across nodes, on Arm hosts with Blackwell GPUs
  // ("GBx platforms only have 4 GPUs per host"), the point-to-point chunk is twice
  // NCCL_P2P_NET_CHUNKSIZE, set or not: 128 KiB -> 256 KiB, a set 64 KiB -> 128 KiB. Not on one
  // node, not on x86 Blackwell hosts, not with the 2.20.3 tables.
  const auto chunk = [](const char* cpu, int nodes, const NcclConfig& cfg) {
    const fabric::Fabric f =
        node_fabric(fmt::format("{{gpus: 4, gpu_arch: blackwell, cpu: {}}}", cpu), nodes);
    return runner_of_all(f, cfg).config().p2p_net_chunksize->count();
  };
  const NcclConfig newest;
  EXPECT_EQ(chunk("arm", 2, newest), 256 << 10);
  EXPECT_EQ(chunk("arm", 1, newest), 128 << 10);
  EXPECT_EQ(chunk("intel-sapphire-rapids", 2, newest), 128 << 10);
  NcclConfig set = newest;
  set.p2p_net_chunksize = Bytes(64 << 10);
  EXPECT_EQ(chunk("arm", 2, set), 128 << 10);
  NcclConfig old = newest;
  old.tuning_tables = "2.20.3";
  EXPECT_EQ(chunk("arm", 2, old), 128 << 10);
}

TEST(NcclBehaviour, APointToPointChunkIsTheCommunicators) {
  // NCCL has one point-to-point chunk a communicator, for every pair (computeBuffSizes; the
  // Simple step of enqueue.cc): NCCL_P2P_NET_CHUNKSIZE (128 KiB) across servers, NVLink pairs
  // included; NCCL_P2P_NVL_CHUNKSIZE (512 KiB) inside one NVLink server; 128 KiB
  // (NCCL_P2P_PCI_CHUNKSIZE) inside one PCIe server.
  const NcclConfig cfg;
  EXPECT_EQ(runner_of_all(arch_fabric("hopper", 2), cfg).p2p_chunk(), 128 << 10);
  EXPECT_EQ(runner_of_all(arch_fabric("hopper", 1), cfg).p2p_chunk(), 512 << 10);
  const fabric::Fabric pcie = node_fabric("{gpus: 4, scale_up: pcie, pcie_switches: 2}", 1);
  EXPECT_EQ(runner_of_all(pcie, cfg).p2p_chunk(), 128 << 10);
}

TEST(NcclBehaviour, OverSocketsNeitherPxnNorCollNet) {
  // NCCL_NET=Socket: the socket plugin takes host memory only, so no PXN (NCCL refuses host
  // buffers for it: network edges leave from the sender's own NIC) and no CollNet (a plugin
  // beside the RDMA transport), whatever NCCL_PXN_DISABLE and NCCL_COLLNET_ENABLE say. (That
  // its network edges are TCP connections of its sockets: FluidNetwork.NcclOverSockets*.)
  const fabric::Fabric f = test::fabric_from_yaml(rail_topology(2, 8).substr(10));
  const std::vector<fabric::NodeId> ranks(f.gpus().begin(), f.gpus().end());
  NcclConfig cfg;
  cfg.collnet = true;
  const OpRunner ib(f, ranks, cfg, 0);
  EXPECT_TRUE(ib.pxn());
  EXPECT_TRUE(ib.collnet());
  cfg.net_socket = true;
  const OpRunner socket(f, ranks, cfg, 0);
  EXPECT_FALSE(socket.pxn());
  EXPECT_FALSE(socket.collnet());
}

TEST(NcclParameters, BusBandwidthFactorsAreNcclTests) {
  // nccl-tests' src/*.cu: AllReduce 2(n-1)/n; AllGather, ReduceScatter, AlltoAll, Gather,
  // Scatter (n-1)/n; Broadcast, Reduce, SendRecv 1.
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::AllReduce, 8), 1.75);
  for (Collective c : {Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll,
                       Collective::AllToAllv, Collective::Gather, Collective::Scatter})
    EXPECT_DOUBLE_EQ(busbw_factor(c, 8), 0.875);
  for (Collective c : {Collective::Broadcast, Collective::Reduce, Collective::SendRecv})
    EXPECT_DOUBLE_EQ(busbw_factor(c, 8), 1.0);
}

TEST(NcclChannels, MinimumsAboveTheLibrarysMaximumAreTakenAsItTakesThem) {
  // NCCL limits NCCL_MIN_NCHANNELS to its MAXCHANNELS (ncclMinNchannels: "limiting to"), 64 in
  // the newest release, 32 before; RCCL takes it up to its own, 128 on one node (AMD's advice
  // for MI300X: NCCL_MIN_NCHANNELS=112) and 64 across nodes, and ignores it above that or above
  // 64 with fewer than 8 ranks. Channels of a 1 GiB AllReduce (enough data for all of them).
  const auto channels = [](const std::string& node, int servers, int ranks, const char* nccl) {
    return channels_of_1gib(node, servers, ranks,
                            std::string("NCCL_ALGO: Ring, NCCL_PROTO: Simple") + nccl);
  };
  const std::string h100 = "{gpus: 8, nic_speed: 400Gbps}";
  const std::string mi300x = "{gpus: 8, gpu_arch: cdna3, scale_up: mesh, nic_speed: 400Gbps}";
  EXPECT_EQ(channels(h100, 2, 16, ", NCCL_MIN_NCHANNELS: 48"), 48);
  EXPECT_EQ(channels(h100, 2, 16, ", NCCL_MIN_NCHANNELS: 100"), 64);
  EXPECT_EQ(channels(h100, 2, 16, ", NCCL_MIN_CTAS: 100, tuning_tables: '2.20.3'"), 32);
  EXPECT_EQ(channels(h100, 2, 16, ""), 16);
  EXPECT_EQ(channels(mi300x, 1, 8, ", NCCL_MIN_NCHANNELS: 112, RCCL_MSCCL_ENABLE: 0"), 112);
  EXPECT_EQ(channels(mi300x, 1, 8, ", RCCL_MSCCL_ENABLE: 0"), 56);
  EXPECT_EQ(channels(mi300x, 1, 4, ", NCCL_MIN_NCHANNELS: 112, RCCL_MSCCL_ENABLE: 0"), 56);
  EXPECT_EQ(channels(mi300x, 2, 16, ", NCCL_MIN_NCHANNELS: 112"), 64);
}

TEST(NcclParameters, BadValuesAreLocatedErrors) {
  struct Case {
    std::string workload, key, expected;
  };
  const std::vector<Case> cases = {
      {"collective: broadcast, bytes: 1MiB, root: 16", "root", "a rank index below 16"},
      {"collective: alltoallv, bytes: 1MiB, imbalance: 1.5", "imbalance", "[0, 1)"},
      // Only an AlltoAll(v) has pairs to make unequal (the key was once accepted and ignored).
      {"collective: allreduce, bytes: 1MiB, imbalance: 0.5", "imbalance",
       "no such key unless collective is alltoall"},
      {"collective: allreduce, bytes: 1MiB, nccl: {NCCL_IB_SPLIT_DATA_ON_QPS: 2}",
       "NCCL_IB_SPLIT_DATA_ON_QPS", "0 or 1"},
      {"collective: allreduce, bytes: 1MiB, nccl: {NCCL_ALGO: Rings}", "NCCL_ALGO", "Ring"},
      // Lists that leave nothing to run: NCCL fails the operation.
      {"collective: allreduce, bytes: 1MiB, nccl: {NCCL_ALGO: '^Ring,Tree,CollNet,NVLS,NVLSTree,"
       "PAT'}",
       "NCCL_ALGO", "leaves every collective an algorithm"},
      {"collective: allreduce, bytes: 1MiB, nccl: {NCCL_PROTO: '^LL,LL128,Simple'}", "NCCL_PROTO",
       "leaves every collective a protocol"},
      {"collective: allreduce, bytes: 1MiB, nccl: {NCCL_MIN_NCHANNELS: 300}", "NCCL_MIN_NCHANNELS",
       "from 0 to 256"},
      {"collective: allreduce, bytes: 1MiB, nccl: {NCCL_NET: ''}", "NCCL_NET", "plugin's name"},
      {"collective: allreduce, bytes: 1MiB, nccl: {NCCL_SOCKET_NTHREADS: 17}",
       "NCCL_SOCKET_NTHREADS", "from 0 to 16"},
      {"collective: allreduce, bytes: 1MiB, nccl: {NCCL_NSOCKS_PERTHREAD: 0}",
       "NCCL_NSOCKS_PERTHREAD", "1"},
      {"collective: allscatter, bytes: 1MiB", "collective", "allreduce"},
  };
  for (const Case& c : cases) {
    const InputError e = test::input_error([&] {
      test::scenario_from_yaml(rail_topology(2, 8) + "workloads:\n  - {type: nccl, " + c.workload +
                               "}\n");
    });
    EXPECT_TRUE(contains(e.key(), c.key)) << e.what();
    EXPECT_TRUE(contains(e.what(), c.expected)) << e.what();
    EXPECT_GT(e.where().line, 0) << e.what();
  }
}

// ---- PCIe servers (scale_up: pcie) ----

/// One server of 4 GPUs without NVLink: 2 PCIe switches (GPUs 2k, 2k + 1 and NIC k below switch
/// k), switch k on CPU socket k; GPU links 24 GB/s, NIC and uplink PCIe 48 GB/s, 400G NICs.
std::string pcie_server(const std::string& cpu, const std::string& cpu_link) {
  return fmt::format(R"(topology:
  type: clos
  racks: 1
  nodes_per_rack: 1
  node: {{gpus: 4, nics: 2, scale_up: pcie, pcie_switches: 2, sockets: 2, cpu: {},
         gpu_pcie_bandwidth: 24GB/s, pcie_bandwidth: 48GB/s, cpu_link_bandwidth: {},
         nic_speed: 400Gbps}}
  leaf: {{uplinks: 2}}
  spine: {{count: 1}}
)",
                     cpu, cpu_link);
}

TEST(NcclPcie, CrossSocketHopsGoThroughTheNicsWhereNcclsPathFigureIsSlower) {
  // ncclTopoCheckNet: GPUs a and b talk through their NICs when each GPU's path to its NIC is
  // faster than the path between them. A GPU's NIC path: min(24 GB/s GPU link, 48 PCIe, 48.8
  // NIC payload) = 24. Below one switch (0 -> 1) the path is the two GPU links, 24: not slower,
  // PCIe. Across sockets (1 -> 2) it includes the link between them at NCCL's figure for the
  // CPU: Sapphire Rapids 22 < 24, the NICs; Emerald Rapids 40, PCIe (24).
  for (const auto& [cpu, net] : std::vector<std::pair<std::string, bool>>{
           {"intel-sapphire-rapids", true}, {"intel-emerald-rapids", false}}) {
    const fabric::Fabric f = test::fabric_from_yaml(pcie_server(cpu, "76.8GB/s").substr(10));
    const std::vector<fabric::NodeId> g(f.gpus().begin(), f.gpus().end());
    EXPECT_DOUBLE_EQ(nic_path_gbytes(f, g[1]), 24.0);
    EXPECT_FALSE(net_inside_server(f, g[0], g[1])) << cpu;
    EXPECT_EQ(net_inside_server(f, g[1], g[2]), net) << cpu;
    EXPECT_EQ(net_inside_server(f, g[3], g[0]), net) << cpu;
    const Communicator comm(f, g);
    ASSERT_TRUE(comm.pcie());
    const std::vector<Edge> ring = comm.ring(0, false);
    ASSERT_EQ(ring.size(), 4u);
    EXPECT_FALSE(ring[0].network);           // 0 -> 1
    EXPECT_EQ(ring[1].network, net) << cpu;  // 1 -> 2
    EXPECT_FALSE(ring[2].network);           // 2 -> 3
    EXPECT_EQ(ring[3].network, net) << cpu;  // 3 -> 0
  }
}

TEST(NcclPcie, AllReduceOnOneServerRunsAtItsNarrowestPcieLinks) {
  // NCCL's graph: one ring at min(24, 22) GB/s (Sapphire Rapids), below 25 so not duplicated:
  // 2 channels. Each channel's ring crosses every GPU's link once each way, so the 2 channels
  // share the 24 GB/s links: B = 24 GB/s for the ring, the cross-socket hops going through NICs
  // and the leaf (48 GB/s and more). Ring/Simple AllReduce of S = 256 MiB with NCCL's latencies
  // off: 2 (n - 1) / n x S / B = 1.5 x 256 MiB / 24 GB/s = 16.777 ms plus the pipeline's fill
  // (under 1 %).
  // With Emerald Rapids NCCL keeps the cross-socket hops on PCIe, through the sockets' link;
  // physically 10 GB/s here, both channels crossing it each way: B = 10 GB/s, 40.265 ms.
  const double s = 256 * kMiB, bound24 = 1.5 * s / 24e9, bound10 = 1.5 * s / 10e9;
  const Figures net = run_one(pcie_server("intel-sapphire-rapids", "10GB/s"), kNoNcclLatency,
                              "collective: allreduce, bytes: 256MiB, nccl: {NCCL_ALGO: Ring}");
  EXPECT_EQ(net["channels"], 2);
  EXPECT_GE(net.seconds, bound24);
  EXPECT_NEAR(net.seconds, bound24, 0.01 * bound24);
  const Figures cpu = run_one(pcie_server("intel-emerald-rapids", "10GB/s"), kNoNcclLatency,
                              "collective: allreduce, bytes: 256MiB, nccl: {NCCL_ALGO: Ring}");
  EXPECT_GE(cpu.seconds, bound10);
  EXPECT_NEAR(cpu.seconds, bound10, 0.01 * bound10);
}

TEST(NcclPcie, NoLl128WithoutNvlinkUnlessNcclProtoNamesIt) {
  // tuning.cc enables LL128 by default only where the graph's intra-node path is NVLink
  // (typeIntra <= PATH_NVB); a list in NCCL_PROTO enables what it allows outright. The PCI
  // row of hwLat prices the hops inside the node: Ring/Simple 5.7 us against NVLink's 3.4.
  for (const char* bytes : {"64KiB", "1MiB", "16MiB", "256MiB"}) {
    const Figures f = run_one(pcie_server("intel-sapphire-rapids", "76.8GB/s"), "",
                              fmt::format("collective: allreduce, bytes: {}", bytes));
    EXPECT_NE(f.notes.at("protocol"), "LL128") << bytes;
  }
  const Figures forced =
      run_one(pcie_server("intel-sapphire-rapids", "76.8GB/s"), "",
              "collective: allreduce, bytes: 1MiB, nccl: {NCCL_ALGO: Ring, NCCL_PROTO: LL128}");
  EXPECT_EQ(forced.notes.at("protocol"), "LL128");
  TuningInput in;
  in.nranks = 4;
  const TuningTables& t = tuning_tables("newest");
  EXPECT_DOUBLE_EQ(hop_latency_us(t, in, Algorithm::Ring, Protocol::Simple, false), 3.4);
  in.pci_intra = true;
  EXPECT_DOUBLE_EQ(hop_latency_us(t, in, Algorithm::Ring, Protocol::Simple, false), 5.7);
  EXPECT_DOUBLE_EQ(hop_latency_us(t, in, Algorithm::Tree, Protocol::LL, false), 1.0);
}

}  // namespace
}  // namespace rocesim::collectives::nccl
