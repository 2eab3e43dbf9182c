// The `flows` workload: explicit flows inline in the scenario or in a CSV file. Checked on what
// the simulation delivered (the Recorder's flow records) and on the errors a person gets for a
// bad flow, which must locate the offending YAML value or CSV cell (file:line:column).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/test_support.hpp"

namespace rocesim::workload {
namespace {

using test::contains;
using test::input_error;

using testing::HasSubstr;

// 8 GPUs: 2 racks of 2 servers with 2 GPUs each; leaves leaf0 and leaf1, spines spine0 and
// spine1. Ranks 0-3 hang off leaf0, ranks 4-7 off leaf1.
constexpr const char* kTopology = R"(topology:
  type: clos
  racks: 2
  nodes_per_rack: 2
  node: {gpus: 2}
  leaf: {uplinks: 2}
  spine: {count: 2}
)";

std::unique_ptr<scenario::ScenarioRun> simulate(const std::string& workloads) {
  auto run = test::scenario_from_yaml(fmt::format("{}workloads:\n{}", kTopology, workloads));
  run->run();
  return run;
}

InputError load_error(const std::string& workloads) {
  return input_error([&] {
    (void)test::scenario_from_yaml(fmt::format("{}workloads:\n{}", kTopology, workloads));
  });
}

/// Flow records sorted by (source rank, destination rank, start).
std::vector<engine::FlowRecord> sorted_flows(const scenario::ScenarioRun& r) {
  std::vector<engine::FlowRecord> v = r.recorder->flows();
  std::sort(v.begin(), v.end(), [&](const auto& a, const auto& b) {
    return std::tuple(r.fabric.rank_of(a.src), r.fabric.rank_of(a.dst), a.start) <
           std::tuple(r.fabric.rank_of(b.src), r.fabric.rank_of(b.dst), b.start);
  });
  return v;
}

/// True when the flow's path enters the named switch.
bool crosses(const scenario::ScenarioRun& r, const engine::FlowRecord& f, const char* name) {
  const fabric::NodeId sw = r.fabric.find(name);
  for (fabric::LinkId l : r.sim->paths().links(f.path)) {
    if (r.fabric.link(l).dst == sw) return true;
  }
  return false;
}

/// A temporary directory with one CSV file, removed when the test ends.
class CsvFile {
 public:
  explicit CsvFile(const std::string& text) : dir_(test::temp_dir("flows-csv")) {
    std::ofstream(path()) << text;
  }
  ~CsvFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  CsvFile(const CsvFile&) = delete;
  CsvFile& operator=(const CsvFile&) = delete;
  std::string path() const { return dir_ + "/flows.csv"; }
  /// The workload list entry that reads this file.
  std::string workload() const { return fmt::format("  - {{type: flows, file: {}}}\n", path()); }

 private:
  std::string dir_;
};

// ---- inline flows ----

TEST(InlineFlows, EachFlowIsDeliveredWithItsBytes) {
  const auto r = simulate(
      "  - type: flows\n"
      "    flows:\n"
      "      - {src: 0, dst: 5, bytes: 3MB}\n"
      "      - {src: node1/gpu1, dst: 0, bytes: 1000B}\n"
      "      - {src: 6, dst: 7, bytes: 2KiB}\n");
  const auto flows = sorted_flows(*r);
  ASSERT_EQ(flows.size(), 3u);
  EXPECT_EQ(r->fabric.rank_of(flows[0].src), 0u);
  EXPECT_EQ(r->fabric.rank_of(flows[0].dst), 5u);
  EXPECT_EQ(flows[0].bytes.count(), 3'000'000);
  EXPECT_EQ(r->fabric.rank_of(flows[1].src), 3u);  // node1/gpu1: server 1, GPU 1
  EXPECT_EQ(flows[1].bytes.count(), 1000);
  EXPECT_EQ(flows[2].bytes.count(), 2048);
  const auto& w = r->recorder->workloads().at(0);
  EXPECT_EQ(w.flows, 3u);
  EXPECT_EQ(w.bytes, 3'000'000 + 1000 + 2048);
}

TEST(InlineFlows, StartIsRelativeToTheWorkload) {
  // The workload starts at 5 us; a flow with start 10 us starts at 15 us, one without at 5 us.
  const auto r = simulate(
      "  - type: flows\n"
      "    start: 5us\n"
      "    flows:\n"
      "      - {src: 0, dst: 4, bytes: 1MB, start: 10us}\n"
      "      - {src: 1, dst: 5, bytes: 1MB}\n");
  const auto flows = sorted_flows(*r);
  ASSERT_EQ(flows.size(), 2u);
  EXPECT_EQ(flows[0].start, Time::us(15));
  EXPECT_EQ(flows[1].start, Time::us(5));
}

TEST(InlineFlows, QpsSplitAFlowEvenly) {
  // 1000 bytes over 3 QPs: 334 + 333 + 333, the remainder on the first.
  const auto r = simulate("  - {type: flows, flows: [{src: 0, dst: 4, bytes: 1000B, qps: 3}]}\n");
  std::vector<int64_t> sizes;
  for (const engine::FlowRecord& f : r->recorder->flows())
    sizes.push_back(f.bytes.count());
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, (std::vector<int64_t>{333, 333, 334}));
  EXPECT_EQ(r->recorder->workloads().at(0).bytes, 1000);
}

TEST(InlineFlows, ViaPinsTheSpine) {
  // Rank 0 (leaf0) to rank 4 (leaf1) crosses one of the two spines; via chooses which.
  for (const char* spine : {"spine0", "spine1"}) {
    const auto r = simulate(fmt::format(
        "  - {{type: flows, flows: [{{src: 0, dst: 4, bytes: 1MB, via: [{}]}}]}}\n", spine));
    ASSERT_EQ(r->recorder->flows().size(), 1u);
    EXPECT_TRUE(crosses(*r, r->recorder->flows()[0], spine)) << spine;
  }
}

TEST(InlineFlows, AfterWaitsForDelivery) {
  // b and c wait on a; d waits on b and c. Each starts the instant its last dependency is
  // delivered.
  const auto r = simulate(
      "  - type: flows\n"
      "    flows:\n"
      "      - {id: d, src: 3, dst: 7, bytes: 1MB, after: [b, c]}\n"
      "      - {id: a, src: 0, dst: 4, bytes: 1MB}\n"
      "      - {id: b, src: 4, dst: 1, bytes: 1MB, after: [a]}\n"
      "      - {id: c, src: 4, dst: 2, bytes: 2MB, after: [a]}\n");
  const auto flows = sorted_flows(*r);  // a (0->4), d (3->7), b (4->1), c (4->2)
  ASSERT_EQ(flows.size(), 4u);
  const auto& a = flows[0];
  const auto& d = flows[1];
  const auto& b = flows[2];
  const auto& c = flows[3];
  EXPECT_EQ(a.start, Time::zero());
  EXPECT_EQ(b.start, a.delivered);
  EXPECT_EQ(c.start, a.delivered);
  EXPECT_EQ(d.start, std::max(b.delivered, c.delivered));
}

TEST(InlineFlows, CyclesAreRejected) {
  const InputError e = load_error(
      "  - type: flows\n"
      "    flows:\n"
      "      - {id: a, src: 0, dst: 4, bytes: 1MB, after: [c]}\n"
      "      - {id: b, src: 1, dst: 5, bytes: 1MB, after: [a]}\n"
      "      - {id: c, src: 2, dst: 6, bytes: 1MB, after: [b]}\n");
  // Located at the 'after' of the first flow that can never start; every such flow is named.
  EXPECT_EQ(e.key(), "workloads[0].flows[0].after");
  EXPECT_EQ(e.where().line, 11);
  EXPECT_THAT(e.what(), HasSubstr("expected flows whose 'after' lists form no cycle, found flows "
                                  "'a', 'b', 'c' that can never start"));
}

TEST(InlineFlows, FlowsWaitingOnACycleAreNamedToo) {
  // a and b wait on each other; c waits on b; d waits on nothing and is not named.
  const InputError e = load_error(
      "  - type: flows\n"
      "    flows:\n"
      "      - {id: d, src: 3, dst: 7, bytes: 1MB}\n"
      "      - {id: c, src: 2, dst: 6, bytes: 1MB, after: [b, d]}\n"
      "      - {id: a, src: 0, dst: 4, bytes: 1MB, after: [b]}\n"
      "      - {id: b, src: 1, dst: 5, bytes: 1MB, after: [a]}\n");
  EXPECT_EQ(e.key(), "workloads[0].flows[1].after");
  EXPECT_THAT(e.what(), HasSubstr("found flows 'a', 'b', 'c' that can never start"));
}

TEST(InlineFlows, NamingADependencyTwiceIsHarmless) {
  const auto r = simulate(
      "  - type: flows\n"
      "    flows:\n"
      "      - {id: a, src: 0, dst: 4, bytes: 1MB}\n"
      "      - {src: 4, dst: 1, bytes: 1MB, after: [a, a]}\n");
  const auto flows = sorted_flows(*r);
  ASSERT_EQ(flows.size(), 2u);
  EXPECT_EQ(flows[1].start, flows[0].delivered);
}

TEST(InlineFlows, WaitingOnItselfIsACycle) {
  const InputError e =
      load_error("  - {type: flows, flows: [{id: a, src: 0, dst: 4, bytes: 1MB, after: [a]}]}\n");
  EXPECT_THAT(e.what(), HasSubstr("cycle"));
}

TEST(InlineFlows, UnknownIdsAreRejectedWhereWritten) {
  const InputError e = load_error(
      "  - type: flows\n"
      "    flows:\n"
      "      - {id: a, src: 0, dst: 4, bytes: 1MB}\n"
      "      - {src: 1, dst: 5, bytes: 1MB, after: [a, z]}\n");
  EXPECT_EQ(e.key(), "workloads[0].flows[1].after[1]");
  EXPECT_EQ(e.where().line, 12);  // the topology takes 7 lines, then "workloads:"
  EXPECT_EQ(e.where().column, 49);
  EXPECT_THAT(e.what(), HasSubstr("expected the id of a flow of this workload, found 'z'"));
}

TEST(InlineFlows, RepeatedIdsAreRejected) {
  const InputError e = load_error(
      "  - type: flows\n"
      "    flows:\n"
      "      - {id: a, src: 0, dst: 4, bytes: 1MB}\n"
      "      - {id: a, src: 1, dst: 5, bytes: 1MB}\n");
  EXPECT_EQ(e.key(), "workloads[0].flows[1].id");
  EXPECT_THAT(e.what(), HasSubstr("found 'a' again"));
}

TEST(InlineFlows, ASelfFlowIsRejected) {
  const InputError e = load_error("  - {type: flows, flows: [{src: 2, dst: 2, bytes: 1MB}]}\n");
  EXPECT_EQ(e.key(), "workloads[0].flows[0]");
  EXPECT_THAT(e.what(), HasSubstr("expected two different GPUs"));
}

TEST(InlineFlows, MistakesInAFlowAreLocated) {
  const InputError bytes =
      load_error("  - {type: flows, flows: [{src: 0, dst: 4, bytes: 1000}]}\n");
  EXPECT_EQ(bytes.key(), "workloads[0].flows[0].bytes");
  EXPECT_EQ(bytes.where().line, 9);
  EXPECT_EQ(bytes.where().column, 51);
  EXPECT_THAT(bytes.what(), HasSubstr("no unit"));
  const InputError unknown =
      load_error("  - {type: flows, flows: [{src: 0, dst: 4, bytes: 1MB, qp: 2}]}\n");
  EXPECT_EQ(unknown.key(), "workloads[0].flows[0].qp");
  EXPECT_THAT(unknown.what(), HasSubstr("did you mean 'qps'?"));
  const InputError rank = load_error("  - {type: flows, flows: [{src: 0, dst: 8, bytes: 1MB}]}\n");
  EXPECT_EQ(rank.key(), "workloads[0].flows[0].dst");
  EXPECT_THAT(rank.what(), HasSubstr("rank 8, but the fabric has 8 GPUs"));
}

TEST(InlineFlows, NeedsExactlyOneOfFlowsAndFile) {
  EXPECT_THAT(load_error("  - {type: flows}\n").what(),
              HasSubstr("expected exactly one of 'flows' and 'file', found neither"));
  EXPECT_THAT(
      load_error("  - {type: flows, file: x.csv, flows: [{src: 0, dst: 1, bytes: 1MB}]}\n").what(),
      HasSubstr("found both"));
  EXPECT_THAT(load_error("  - {type: flows, flows: []}\n").what(),
              HasSubstr("expected at least one flow, found none"));
}

// ---- waypoints ----

TEST(FlowList, WaypointsMayMakeLongRoutes) {
  // Bouncing between the two zones three times through leaves gives a route of 2 (GPU, NIC,
  // first leaf) + 3 x 4 (each leaf-to-leaf leg crosses spine, aggregation, spine) + 2 (NIC, GPU)
  // = 16 links, longer than a flow stores inline; it must be routed and simulated like any other.
  const std::string yaml = R"(topology:
  type: clos
  zones: 2
  racks: 2
  nodes_per_rack: 1
  node: {gpus: 1}
  leaf: {uplinks: 1}
  spine: {count: 1}
  aggregation: {count: 1, uplinks: 1}
workloads:
  - type: flows
    flows:
      - {src: 0, dst: 3, bytes: 1MB, via: [zone1/leaf0, zone0/leaf1, zone1/leaf1]}
)";
  auto run = test::scenario_from_yaml(yaml);
  run->run();
  ASSERT_EQ(run->recorder->flows().size(), 1u);
  EXPECT_EQ(run->sim->paths().links(run->recorder->flows()[0].path).size(), 16u);
}

// ---- CSV files ----

TEST(CsvFlows, HeaderCommentsBlankLinesAndOptionalColumns) {
  const CsvFile csv(
      "# exported from another simulator\n"
      "src, dst, bytes, start_s, via, qps\n"
      "\n"
      "0, 4, 1000000, 0, spine1, 1\n"
      "# a comment between rows\n"
      "node0/gpu1, 5, 2MB, 1e-5, , 2\n"
      "2, 6, 4096, 2.5e-6, spine0, 1\n");
  const auto r = simulate(csv.workload());
  const auto flows = sorted_flows(*r);
  // Rows: 0->4 (1 flow), 1->5 on 2 QPs (2 flows of 1 MB), 2->6 (1 flow).
  ASSERT_EQ(flows.size(), 4u);
  EXPECT_EQ(flows[0].bytes.count(), 1'000'000);
  EXPECT_EQ(flows[0].start, Time::zero());
  EXPECT_TRUE(crosses(*r, flows[0], "spine1"));
  EXPECT_EQ(r->fabric.rank_of(flows[1].src), 1u);
  EXPECT_EQ(flows[1].bytes.count(), 1'000'000);
  EXPECT_EQ(flows[2].bytes.count(), 1'000'000);
  EXPECT_EQ(flows[1].start, Time::us(10));
  EXPECT_EQ(flows[3].bytes.count(), 4096);
  EXPECT_EQ(flows[3].start, Time::ns(2500));
  EXPECT_TRUE(crosses(*r, flows[3], "spine0"));
  EXPECT_EQ(r->recorder->workloads().at(0).bytes, 1'000'000 + 2'000'000 + 4096);
}

TEST(CsvFlows, MinimalColumnsInAnyOrderWithStartAsATime) {
  const CsvFile csv("bytes,start,dst,src\n1MiB,3us,4,0\n512KiB,0s,0,4\n");
  const auto flows = sorted_flows(*simulate(csv.workload()));
  ASSERT_EQ(flows.size(), 2u);
  EXPECT_EQ(flows[0].bytes.count(), 1 << 20);
  EXPECT_EQ(flows[0].start, Time::us(3));
  EXPECT_EQ(flows[1].bytes.count(), 512 << 10);
  EXPECT_EQ(flows[1].start, Time::zero());
}

TEST(CsvFlows, EveryFormOfACellReadsAlike) {
  // Plain numbers and switch names are read in place; GPU names, a leading '+' and a size with a
  // unit take the located route: both give the same flows (rank 5 is node2/gpu1).
  const CsvFile plain("src,dst,bytes,start_s,qps,via\n1,5,1048576,0.00001,2,spine1\n");
  const CsvFile forms(
      "src,dst,bytes,start_s,qps,via\nnode0/gpu1,node2/gpu1,1MiB,+1e-5,+2,spine1\n");
  const auto a = sorted_flows(*simulate(plain.workload()));
  const auto b = sorted_flows(*simulate(forms.workload()));
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].src, b[i].src);
    EXPECT_EQ(a[i].dst, b[i].dst);
    EXPECT_EQ(a[i].bytes, b[i].bytes);
    EXPECT_EQ(a[i].start, b[i].start);
    EXPECT_EQ(a[i].path, b[i].path);
  }
  EXPECT_EQ(a[0].bytes.count(), 1 << 19);  // 1 MiB over 2 QPs
  EXPECT_EQ(a[0].start, Time::us(10));
}

TEST(CsvFlows, ViaListsSeveralSwitchesInOrder) {
  // leaf0 -> spine0 -> a leaf -> spine1 -> leaf1: a detour through both spines, in order.
  const CsvFile csv("src,dst,bytes,via\n0,4,1MB,spine0|spine1\n");
  const auto r = simulate(csv.workload());
  ASSERT_EQ(r->recorder->flows().size(), 1u);
  const engine::FlowRecord& f = r->recorder->flows()[0];
  std::vector<std::string> switches;
  for (fabric::LinkId l : r->sim->paths().links(f.path)) {
    const fabric::Node& n = r->fabric.node(r->fabric.link(l).dst);
    if (n.kind == fabric::NodeKind::Switch) switches.push_back(n.name);
  }
  ASSERT_GE(switches.size(), 2u);
  const auto s0 = std::find(switches.begin(), switches.end(), "spine0");
  const auto s1 = std::find(switches.begin(), switches.end(), "spine1");
  EXPECT_TRUE(s0 != switches.end() && s1 != switches.end() && s0 < s1)
      << testing::PrintToString(switches);
}

/// The InputError of a CSV file's workload, with the location checked: the file, the line and
/// the column of the offending cell.
InputError csv_error(const CsvFile& csv, int line, int column) {
  const InputError e = load_error(csv.workload());
  EXPECT_TRUE(e.where().known());
  if (e.where().known()) {
    EXPECT_EQ(*e.where().file, csv.path());
  }
  EXPECT_EQ(e.where().line, line) << e.what();
  EXPECT_EQ(e.where().column, column) << e.what();
  EXPECT_THAT(e.what(), HasSubstr(fmt::format("{}:{}:{}: error: ", csv.path(), line, column)));
  return e;
}

TEST(CsvFlows, BadBytesCellIsLocated) {
  // Line 3, the third cell, after "0, 4, " (6 characters): column 7.
  const CsvFile csv("src,dst,bytes\n0,4,1MB\n0, 4, 12XB\n");
  const InputError e = csv_error(csv, 3, 7);
  EXPECT_EQ(e.key(), "bytes");
  EXPECT_THAT(e.what(), HasSubstr("unknown unit 'XB'"));
}

TEST(CsvFlows, ZeroBytesIsRejected) {
  const CsvFile csv("src,dst,bytes\n0,4,0\n");
  EXPECT_THAT(csv_error(csv, 2, 5).what(), HasSubstr("expected a positive size, found '0'"));
}

TEST(CsvFlows, RankBeyondTheFabricIsLocated) {
  const CsvFile csv("# header next\nsrc,dst,bytes\n 0 ,  99,1MB\n");
  const InputError e = csv_error(csv, 3, 7);
  EXPECT_EQ(e.key(), "dst");
  EXPECT_THAT(e.what(), HasSubstr("rank 99, but the fabric has 8 GPUs"));
}

TEST(CsvFlows, BadStartIsLocated) {
  const CsvFile bad("src,dst,bytes,start_s\n0,4,1MB,soon\n");
  EXPECT_THAT(csv_error(bad, 2, 9).what(), HasSubstr("expected a number, found 'soon'"));
  const CsvFile negative("src,dst,bytes,start_s\n0,4,1MB,-1e-6\n");
  EXPECT_THAT(csv_error(negative, 2, 9).what(), HasSubstr("a time in seconds from 0 to 4.6e6"));
  // No run reaches past 2^62 ps, 4.6e6 s (1e7 s used to start at 0, then to fail mid-run).
  const CsvFile late("src,dst,bytes,start_s\n0,4,1MB,1e7\n");
  EXPECT_THAT(csv_error(late, 2, 9).what(), HasSubstr("a time in seconds from 0 to 4.6e6"));
  const CsvFile unitless("src,dst,bytes,start\n0,4,1MB,3\n");
  EXPECT_THAT(csv_error(unitless, 2, 9).what(), HasSubstr("no unit"));
  const CsvFile before("src,dst,bytes,start\n0,4,1MB,-3us\n");
  EXPECT_THAT(csv_error(before, 2, 9).what(), HasSubstr("a time >= 0"));
}

TEST(CsvFlows, BadQpsIsLocated) {
  // From 1 to 128, as the inline key (a CSV of 5 million QPs took 2.5 GB before it ran).
  const CsvFile csv("src,dst,bytes,qps\n0,4,1MB,0\n");
  const InputError e = csv_error(csv, 2, 9);
  EXPECT_EQ(e.key(), "qps");
  EXPECT_THAT(e.what(), HasSubstr("expected a whole number from 1 to 128, found '0'"));
  const CsvFile many("src,dst,bytes,qps\n0,4,1MB,5000000\n");
  EXPECT_THAT(csv_error(many, 2, 9).what(), HasSubstr("from 1 to 128, found '5000000'"));
}

TEST(CsvFlows, UnknownViaSwitchIsLocatedAtItsName) {
  // "spine0|spine9" starts at column 9; spine9 at column 16.
  const CsvFile csv("src,dst,bytes,via\n0,4,1MB,spine0|spine9\n");
  const InputError e = csv_error(csv, 2, 16);
  EXPECT_THAT(e.what(), HasSubstr("found 'spine9', which is not a fabric switch"));
}

TEST(CsvFlows, RowWithTheWrongNumberOfCells) {
  const CsvFile csv("src,dst,bytes\n0,4,1MB\n1,5\n");
  EXPECT_THAT(csv_error(csv, 3, 1).what(),
              HasSubstr("expected 3 comma-separated values as in the header, found 2 values"));
}

TEST(CsvFlows, HeaderMistakes) {
  const CsvFile missing("src,bytes\n0,1MB\n");
  EXPECT_THAT(csv_error(missing, 1, 1).what(), HasSubstr("a header line with columns src, dst"));
  const CsvFile unknown("src,dst,size\n0,4,1MB\n");
  EXPECT_THAT(csv_error(unknown, 1, 9).what(), HasSubstr("found 'size'"));
  const CsvFile repeated("src,dst,bytes,dst\n0,4,1MB,5\n");
  EXPECT_THAT(csv_error(repeated, 1, 15).what(), HasSubstr("found 'dst' a second time"));
  const CsvFile both("src,dst,bytes,start,start_s\n0,4,1MB,1us,0\n");
  EXPECT_THAT(csv_error(both, 1, 1).what(), HasSubstr("one of start_s and start"));
}

TEST(CsvFlows, OnlyAHeaderIsNoFlows) {
  const CsvFile csv("src,dst,bytes\n# nothing yet\n");
  const InputError e = load_error(csv.workload());
  EXPECT_EQ(e.key(), "workloads[0].file");
  EXPECT_THAT(e.what(), HasSubstr("expected at least one flow, found none"));
}

TEST(CsvFlows, MissingFileIsReportedWhereItIsNamed) {
  const InputError e = load_error("  - {type: flows, file: /nonexistent/flows.csv}\n");
  EXPECT_EQ(e.key(), "workloads[0].file");
  EXPECT_EQ(e.where().line, 9);
  EXPECT_EQ(e.where().column, 25);
  EXPECT_THAT(e.what(), HasSubstr("'/nonexistent/flows.csv', which does not exist"));
}

}  // namespace
}  // namespace rocesim::workload
