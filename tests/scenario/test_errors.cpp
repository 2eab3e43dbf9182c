// A person's mistakes in a scenario, through the real command line. Each test writes a small
// scenario with one mistake to a temporary directory and runs `rocesim run` on it. The contract
// (docs/architecture.md, "Errors a person can act on"):
//  * exit code 2;
//  * stderr is one line: "FILE:LINE:COL: error: 'KEY': expected WHAT, found WHAT-WAS-THERE",
//    pointing at the offending text (the key itself for an unknown key, the value otherwise);
//  * nothing is written: no results.h5 and no temporary file in the output directory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tests/support/test_support.hpp"

namespace rocesim::test {
namespace {

using testing::HasSubstr;
using testing::StartsWith;

// A valid scenario: 2 racks of one server with 2 GPUs (4 GPUs), 2 leaves, 2 spines.
const std::string kGood = R"(name: small
seed: 3
topology:
  type: clos
  racks: 2
  nodes_per_rack: 1
  node:
    gpus: 2
    nic_speed: 400Gbps
  leaf:
    uplinks: 2
    uplink_speed: 200Gbps
  spine:
    count: 2
    latency: 1us
  link_latency: 500ns
workloads:
  - name: perm
    type: permutation
    bytes: 1MiB
)";

/// `text` with the only occurrence of `from` replaced by `to`.
std::string edit(const std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' is not in the scenario";
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << "'" << from << "' is not unique";
  if (at == std::string::npos) return text;
  return text.substr(0, at) + to + text.substr(at + from.size());
}

struct Location {
  int line = 0;
  int column = 0;
};

/// 1-based line and column of `inner` inside the only occurrence of `context` in `text`, so
/// that a test names the text it expects to be pointed at rather than a bare number.
Location locate(const std::string& text, const std::string& context,
                const std::string& inner = "") {
  const size_t at = text.find(context);
  EXPECT_NE(at, std::string::npos) << "'" << context << "' is not in the scenario";
  EXPECT_EQ(text.find(context, at + 1), std::string::npos) << "'" << context << "' is not unique";
  const size_t pos = at + (inner.empty() ? 0 : context.find(inner));
  Location l{1, 1};
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++l.line;
      l.column = 1;
    } else {
      ++l.column;
    }
  }
  return l;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  return out;
}

/// One run of `rocesim run` on a bad scenario.
struct Failure {
  std::string dir;       // holds scenario.yaml and the files it names
  std::string scenario;  // absolute path of scenario.yaml, as the message names it
  std::string out_dir;   // the results directory, empty before the run
  CommandResult result;
};

/// Removes the temporary directories of its tests when they end.
class ScenarioErrors : public testing::Test {
 protected:
  void TearDown() override {
    for (const std::string& d : dirs_) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
  std::string fresh_dir() { return dirs_.emplace_back(temp_dir("errors")); }
  Failure run_bad(const std::string& yaml, const std::map<std::string, std::string>& files = {},
                  const std::string& options = "");

 private:
  std::vector<std::string> dirs_;
};

Failure ScenarioErrors::run_bad(const std::string& yaml,
                                const std::map<std::string, std::string>& files,
                                const std::string& options) {
  Failure f;
  f.dir = fresh_dir();
  f.scenario = f.dir + "/scenario.yaml";
  f.out_dir = f.dir + "/out";
  std::filesystem::create_directories(f.out_dir);
  write_file(f.scenario, yaml);
  for (const auto& [name, text] : files)
    write_file(f.dir + "/" + name, text);
  f.result = run_cli(fmt::format("run {} -o {}/results.h5 {}", f.scenario, f.out_dir, options));
  return f;
}

/// The message a run must print: where (file, line, column), which key (empty: none, as for a
/// YAML syntax error), what was expected and what was found (each a part of the message).
struct Message {
  std::string file;
  Location at;
  std::string key;
  std::string expected;
  std::string found;
};

void expect_rejected(const Failure& f, const Message& m) {
  const CommandResult& r = f.result;
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  // One message: a single line.
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.err.ends_with("\n")) << r.err;
  const std::string key = m.key.empty() ? "" : fmt::format("'{}': ", m.key);
  EXPECT_THAT(r.err, StartsWith(fmt::format("{}:{}:{}: error: {}expected ", m.file, m.at.line,
                                            m.at.column, key)));
  EXPECT_THAT(r.err, HasSubstr("expected " + m.expected));
  EXPECT_THAT(r.err, HasSubstr(", found " + m.found));
  // Nothing written, not even a temporary file.
  EXPECT_THAT(files_in(f.out_dir), testing::IsEmpty());
}

TEST_F(ScenarioErrors, TheGoodScenarioRuns) {
  // Every other test breaks this scenario in one place; it must itself be valid.
  const Failure f = run_bad(kGood);
  EXPECT_EQ(f.result.exit_code, 0) << f.result.err;
  EXPECT_THAT(files_in(f.out_dir), testing::ElementsAre("results.h5"));
}

// ---- unknown keys ----

TEST_F(ScenarioErrors, UnknownTopLevelKeySuggestsTheNearestOne) {
  const std::string yaml = edit(kGood, "workloads:", "workload:");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "workload:"),
                      .key = "workload",
                      .expected = "one of the keys of scenario: name, seed, topology",
                      .found = "unknown key 'workload' (did you mean 'workloads'?)"});
}

TEST_F(ScenarioErrors, UnknownKeyNestedInTheTopology) {
  const std::string yaml = edit(kGood, "    uplinks: 2", "    uplinsk: 2");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "uplinsk"),
                      .key = "topology.leaf.uplinsk",
                      .expected = "one of the keys of clos.leaf: uplinks, uplink_speed",
                      .found = "unknown key 'uplinsk' (did you mean 'uplinks'?)"});
}

TEST_F(ScenarioErrors, UnknownKeyInAWorkload) {
  const std::string yaml = edit(kGood, "    bytes: 1MiB", "    byte: 1MiB");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "byte: 1MiB"),
                      .key = "workloads[0].byte",
                      .expected = "one of the keys of workload (type: permutation)",
                      .found = "unknown key 'byte' (did you mean 'bytes'?)"});
}

TEST_F(ScenarioErrors, UnknownKeyFarFromEveryKeyGetsNoSuggestion) {
  const std::string yaml = edit(kGood, "    bytes: 1MiB", "    bytes: 1MiB\n    fan_in: 3");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "fan_in: 3"),
                      .key = "workloads[0].fan_in",
                      .expected = "one of the keys of workload (type: permutation)",
                      .found = "unknown key 'fan_in'"});
  EXPECT_THAT(f.result.err, testing::Not(HasSubstr("did you mean")));
}

TEST_F(ScenarioErrors, UnknownWorkloadType) {
  const std::string yaml = edit(kGood, "type: permutation", "type: permutaton");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "type: permutaton", "permutaton"),
                      .key = "workloads[0].type",
                      .expected = "one of 'flows', 'permutation'",
                      .found = "'permutaton'"});
}

// ---- wrong types ----

TEST_F(ScenarioErrors, StringWhereAnIntegerIsExpected) {
  const std::string yaml = edit(kGood, "  racks: 2", "  racks: two");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "racks: two", "two"),
                      .key = "topology.racks",
                      .expected = "a whole number",
                      .found = "'two'"});
}

TEST_F(ScenarioErrors, ATimePastTheLatestARunReachesIsLocated) {
  // A transfer may end at 2^62 ps (4.6e6 s) at the latest: a start past it used to be accepted
  // and fail when the run got there, blaming the flow's size, with no location.
  const std::string yaml = edit(kGood, "    bytes: 1MiB", "    bytes: 1MiB\n    start: 9000000s");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "start: 9000000s", "9000000s"),
                      .key = "workloads[0].start",
                      .expected = "a time of at most 4.6e6 s",
                      .found = "'9000000s'"});
}

TEST_F(ScenarioErrors, AnIntegerTooLargeForItsTypeIsNotWrapped) {
  // 4294967297 = 2^32 + 1 would wrap to 1 as a 32-bit integer: checked in the type it is used
  // as (output.compression has no bound of its own)...
  const std::string yaml = kGood + "output:\n  compression: 4294967297\n";
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "compression: 4294967297", "4294967297"),
                      .key = "output.compression",
                      .expected = "an integer of at most 2147483647",
                      .found = "4294967297"});
  // ...and counts have documented bounds well inside their types.
  const std::string racks = edit(kGood, "  racks: 2", "  racks: 4294967297");
  const Failure r = run_bad(racks);
  expect_rejected(r, {.file = r.scenario,
                      .at = locate(racks, "racks: 4294967297", "4294967297"),
                      .key = "topology.racks",
                      .expected = "an integer from 1 to 65536",
                      .found = "'4294967297'"});
}

TEST_F(ScenarioErrors, MappingWhereAnIntegerIsExpected) {
  const std::string yaml = edit(kGood, "  racks: 2", "  racks: {count: 2}");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "racks: {count: 2}", "{"),
                      .key = "topology.racks",
                      .expected = "an integer (racks per zone",
                      .found = "a mapping"});
}

TEST_F(ScenarioErrors, ListWhereAMappingIsExpected) {
  const std::string yaml =
      edit(kGood, "  spine:\n    count: 2\n    latency: 1us\n", "  spine: [2, 1us]\n");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "spine: [2, 1us]", "["),
                      .key = "topology.spine",
                      .expected = "a mapping (spine (CTSW) settings)",
                      .found = "a list of 2 items"});
}

TEST_F(ScenarioErrors, ScalarWhereTheWorkloadListIsExpected) {
  const std::string yaml =
      edit(kGood, "  - name: perm\n    type: permutation\n    bytes: 1MiB\n", "") +
      "  permutation\n";
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "  permutation\n", "permutation"),
                      .key = "workloads",
                      .expected = "a list (traffic to simulate; `rocesim run` needs at least one; "
                                  "`{include: FILE}` items take a file's)",
                      .found = "'permutation'"});
}

// ---- values with units ----

TEST_F(ScenarioErrors, MissingUnit) {
  const std::string yaml = edit(kGood, "nic_speed: 400Gbps", "nic_speed: 400");
  const Failure f = run_bad(yaml);
  expect_rejected(f,
                  {.file = f.scenario,
                   .at = locate(yaml, "nic_speed: 400", "400"),
                   .key = "topology.node.nic_speed",
                   .expected = "a bandwidth with a unit",
                   .found = "'400' has no unit; a bandwidth needs one of: bps, Kbps, Mbps, Gbps"});
}

TEST_F(ScenarioErrors, WrongUnit) {
  const std::string yaml = edit(kGood, "nic_speed: 400Gbps", "nic_speed: 400Gbs");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "nic_speed: 400Gbs", "400Gbs"),
                      .key = "topology.node.nic_speed",
                      .expected = "a bandwidth with a unit",
                      .found = "'400Gbs' has an unknown unit 'Gbs'"});
}

TEST_F(ScenarioErrors, SizeWithARateUnit) {
  const std::string yaml = edit(kGood, "bytes: 1MiB", "bytes: 1Gbps");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "bytes: 1Gbps", "1Gbps"),
                      .key = "workloads[0].bytes",
                      .expected = "a size with a unit",
                      .found = "'1Gbps' has an unknown unit 'Gbps'"});
}

// ---- range checks ----

TEST_F(ScenarioErrors, ZeroCapacity) {
  const std::string yaml = edit(kGood, "uplink_speed: 200Gbps", "uplink_speed: 0Gbps");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "uplink_speed: 0Gbps", "0Gbps"),
                      .key = "topology.leaf.uplink_speed",
                      .expected = "a bandwidth > 0 (rate of each leaf uplink)",
                      .found = "'0Gbps'"});
}

TEST_F(ScenarioErrors, NegativeCapacity) {
  const std::string yaml = edit(kGood, "nic_speed: 400Gbps", "nic_speed: -400Gbps");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "nic_speed: -400Gbps", "-400Gbps"),
                      .key = "topology.node.nic_speed",
                      .expected = "a bandwidth > 0",
                      .found = "'-400Gbps'"});
}

TEST_F(ScenarioErrors, NegativeLatency) {
  const std::string yaml = edit(kGood, "link_latency: 500ns", "link_latency: -500ns");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "link_latency: -500ns", "-500ns"),
                      .key = "topology.link_latency",
                      .expected = "a time >= 0",
                      .found = "'-500ns'"});
}

TEST_F(ScenarioErrors, ZeroCount) {
  const std::string yaml = edit(kGood, "    count: 2", "    count: 0");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "count: 0", "0"),
                      .key = "topology.spine.count",
                      .expected = "an integer > 0 (spines per zone)",
                      .found = "'0'"});
}

TEST_F(ScenarioErrors, ValuesThatOnlyTogetherAreWrong) {
  // 2 uplinks cannot be spread evenly over 3 spines; the message points at the uplinks.
  const std::string yaml = edit(kGood, "    count: 2", "    count: 3");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "uplinks: 2", "2"),
                      .key = "topology.leaf.uplinks",
                      .expected = "a multiple of spine.count (3)",
                      .found = "2"});
}

// ---- references to things that do not exist ----

TEST_F(ScenarioErrors, AfterNamesNoWorkload) {
  const std::string yaml = edit(kGood, "    bytes: 1MiB", "    bytes: 1MiB\n    after: [nosuch]");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "after: [nosuch]", "nosuch"),
                      .key = "workloads[0].after[0]",
                      .expected = "the name of a workload listed before this one",
                      .found = "'nosuch'"});
}

TEST_F(ScenarioErrors, RankBeyondTheFabric) {
  const std::string yaml = edit(kGood, "    bytes: 1MiB", "    bytes: 1MiB\n    ranks: [0, 4]");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "ranks: [0, 4]", "4"),
                      .key = "workloads[0].ranks[1]",
                      .expected = "a rank from 0 to 3 or a GPU name",
                      .found = "rank 4, but the fabric has 4 GPUs"});
}

TEST_F(ScenarioErrors, RankRangeBeyondTheFabric) {
  const std::string yaml = edit(kGood, "    bytes: 1MiB", "    bytes: 1MiB\n    ranks: 0-7");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "ranks: 0-7", "0-7"),
                      .key = "workloads[0].ranks",
                      .expected = "a rank from 0 to 3",
                      .found = "the range ends at rank 7, but the fabric has 4 GPUs"});
}

TEST_F(ScenarioErrors, GpuNameThatDoesNotExist) {
  const std::string yaml =
      kGood + "  - {type: flows, flows: [{src: node0/gpu0, dst: node9/gpu0, bytes: 1MB}]}\n";
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "node9/gpu0"),
                      .key = "workloads[1].flows[0].dst",
                      .expected = "a rank from 0 to 3 or a GPU name such as 'node0/gpu0'",
                      .found = "'node9/gpu0', which is not a GPU of this fabric (did you mean "
                               "'node0/gpu0'?)"});
}

TEST_F(ScenarioErrors, RepeatedRank) {
  const std::string yaml = edit(kGood, "    bytes: 1MiB", "    bytes: 1MiB\n    ranks: [0, 1, 0]");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "ranks: [0, 1, 0]", "0]"),
                      .key = "workloads[0].ranks[2]",
                      .expected = "each GPU at most once",
                      .found = "'0', which is already item 0 of the list"});
}

TEST_F(ScenarioErrors, ViaNamesNoSwitch) {
  const std::string yaml =
      kGood + "  - {type: flows, flows: [{src: 0, dst: 2, bytes: 1MB, via: [spine7]}]}\n";
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "spine7"),
                      .key = "workloads[1].flows[0].via[0]",
                      .expected = "the name of a fabric switch, such as 'leaf0'",
                      .found = "'spine7', which is not a fabric switch (did you mean 'spine0'?)"});
}

TEST_F(ScenarioErrors, TopologyFileThatDoesNotExist) {
  // The message points at the line of the scenario that names the file.
  const size_t begin = kGood.find("topology:\n");
  const size_t end = kGood.find("workloads:");
  const std::string yaml =
      kGood.substr(0, begin) + "topology: no-such-topology.yaml\n" + kGood.substr(end);
  const Failure f = run_bad(yaml);
  expect_rejected(
      f, {.file = f.scenario,
          .at = locate(yaml, "topology: no-such-topology.yaml", "no-such"),
          .key = "topology",
          .expected = "a readable YAML file",
          .found = fmt::format("'{}/no-such-topology.yaml', which does not exist", f.dir)});
}

TEST_F(ScenarioErrors, MistakeInsideATopologyFileIsLocatedInThatFile) {
  const size_t begin = kGood.find("topology:\n");
  const size_t end = kGood.find("workloads:");
  const std::string topo =
      edit(kGood.substr(begin, end - begin), "uplink_speed: 200Gbps", "uplink_speed: 200");
  const std::string yaml = kGood.substr(0, begin) + "topology: topo.yaml\n" + kGood.substr(end);
  const Failure f = run_bad(yaml, {{"topo.yaml", topo}});
  expect_rejected(f, {.file = f.dir + "/topo.yaml",
                      .at = locate(topo, "uplink_speed: 200", "200"),
                      .key = "topology.leaf.uplink_speed",
                      .expected = "a bandwidth with a unit",
                      .found = "'200' has no unit"});
}

// ---- the topology as a whole ----
// No builder can produce a disconnected fabric from valid parameters (every one wires every
// switch up and down), so Fabric::seal's connectivity check is tested in tests/fabric. Here:
// a file that is not YAML at all.

TEST_F(ScenarioErrors, YamlSyntaxErrorNamesItsLine) {
  // A key indented one space too far: yaml-cpp reports the ':' it cannot place.
  const std::string yaml = edit(kGood, "  nodes_per_rack: 1", "   nodes_per_rack: 1");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "   nodes_per_rack: 1", ": 1"),
                      .key = "",
                      .expected = "valid YAML",
                      .found = "a syntax error (illegal map value)"});
}

TEST_F(ScenarioErrors, UnclosedFlowListNamesALocation) {
  const std::string yaml = edit(kGood, "name: small", "name: [small");
  const Failure f = run_bad(yaml);
  EXPECT_EQ(f.result.exit_code, 2) << f.result.err;
  EXPECT_THAT(f.result.err,
              testing::MatchesRegex(f.scenario + ":[0-9]+:[0-9]+: error: expected valid "
                                                 "YAML, found a syntax error \\(.*\\)\n"));
  EXPECT_THAT(files_in(f.out_dir), testing::IsEmpty());
}

TEST_F(ScenarioErrors, DuplicateKey) {
  const std::string yaml = edit(kGood, "  racks: 2\n", "  racks: 2\n  racks: 3\n");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "  racks: 3", "racks"),
                      .key = "topology.racks",
                      .expected = "each key once in a mapping",
                      .found = "'racks' a second time"});
}

TEST_F(ScenarioErrors, EmptyFile) {
  const Failure f = run_bad("# nothing here\n");
  expect_rejected(f, {.file = f.scenario,
                      .at = {1, 1},
                      .key = "",
                      .expected = "a YAML mapping",
                      .found = "an empty file"});
}

// ---- the workload list ----

TEST_F(ScenarioErrors, DuplicateWorkloadName) {
  const std::string yaml = kGood + "  - name: perm\n    type: ring_step\n    bytes: 1MiB\n";
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "name: perm\n    type: ring_step", "perm"),
                      .key = "workloads[1].name",
                      .expected = "a name not used by another workload",
                      .found = "'perm' again"});
}

TEST_F(ScenarioErrors, EmptyWorkloadList) {
  const std::string yaml =
      kGood.substr(0, kGood.find("workloads:")) + "workloads: []  # to be written\n";
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "workloads: []", "[]"),
                      .key = "workloads",
                      .expected = "at least one workload",
                      .found = "an empty list"});
}

// ---- missing keys ----

TEST_F(ScenarioErrors, MissingRequiredKey) {
  // leaf.uplinks has no default; the message points at the leaf mapping that lacks it.
  const std::string yaml = edit(kGood, "    uplinks: 2\n", "");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "  leaf:", "leaf"),
                      .key = "topology.leaf.uplinks",
                      .expected = "the required key 'uplinks' (integer: uplinks per leaf",
                      .found = "the key is missing"});
}

TEST_F(ScenarioErrors, MissingWorkloadType) {
  const std::string yaml = edit(kGood, "    type: permutation\n", "");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "  - name: perm", "name"),
                      .key = "workloads[0].type",
                      .expected = "the required key 'type' (a workload type: flows|permutation",
                      .found = "the key is missing"});
}

// ---- files and arguments ----

TEST_F(ScenarioErrors, MissingScenarioFileIsNamed) {
  const std::string dir = fresh_dir();
  const std::string path = dir + "/no-such-scenario.yaml";
  const CommandResult r = run_cli(fmt::format("run {} -o {}/results.h5", path, dir));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, fmt::format("{}: error: expected a readable YAML file, found '{}', which does "
                               "not exist\n",
                               path, path));
  EXPECT_THAT(files_in(dir), testing::IsEmpty());
}

TEST_F(ScenarioErrors, ASeedOnTheCommandLineIsNotWrapped) {
  // "-1" would read as 2^64 - 1 in an unsigned 64-bit seed; 2^64 does not fit; both are errors
  // of the option, for every command that takes a seed, and nothing is written.
  const std::string dir = fresh_dir();
  const std::string scenario = source_path("scenarios/quickstart.yaml");
  for (const std::string& cmd :
       {fmt::format("run {} -o {}/r.h5 --seed", scenario, dir),
        fmt::format("nccl-tests --scenario {} -o {}/r.h5 --seed", scenario, dir)}) {
    for (const std::string seed : {"-1", "18446744073709551616", "3x"}) {
      const CommandResult r = run_cli(
          fmt::format("{} {} {}", cmd, seed, cmd.rfind("nccl", 0) == 0 ? "all_reduce_perf" : ""));
      EXPECT_EQ(r.exit_code, 2) << cmd << " " << seed << ": " << r.err;
      EXPECT_THAT(r.err, testing::HasSubstr("--seed: a seed is a whole number from 0 to "
                                            "18446744073709551615, not '" +
                                            seed + "'"));
    }
  }
  EXPECT_THAT(files_in(dir), testing::IsEmpty());
  // The largest seed runs.
  EXPECT_EQ(
      run_cli(fmt::format("run {} --no-output -q --seed 18446744073709551615", scenario)).exit_code,
      0);
}

TEST_F(ScenarioErrors, ScenarioPathThatIsADirectory) {
  const std::string dir = fresh_dir();
  const CommandResult r = run_cli(fmt::format("run {} -o {}/results.h5", dir, dir));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, fmt::format("{}: error: expected a readable YAML file, found '{}', which is a "
                               "directory\n",
                               dir, dir));
  EXPECT_THAT(files_in(dir), testing::IsEmpty());
}

TEST_F(ScenarioErrors, ZeroThreadsIsABadArgument) {
  const Failure f = run_bad(kGood, {}, "--threads 0");
  EXPECT_EQ(f.result.exit_code, 2) << f.result.err;
  EXPECT_THAT(f.result.err, HasSubstr("--threads"));
  EXPECT_THAT(files_in(f.out_dir), testing::IsEmpty());
}

TEST_F(ScenarioErrors, SeedThatIsNotANumberIsABadArgument) {
  const Failure f = run_bad(kGood, {}, "--seed many");
  EXPECT_EQ(f.result.exit_code, 2) << f.result.err;
  EXPECT_THAT(f.result.err, HasSubstr("--seed"));
  EXPECT_THAT(files_in(f.out_dir), testing::IsEmpty());
}

TEST_F(ScenarioErrors, UnknownOptionIsABadArgument) {
  const Failure f = run_bad(kGood, {}, "--fast");
  EXPECT_EQ(f.result.exit_code, 2) << f.result.err;
  EXPECT_THAT(f.result.err, HasSubstr("--fast"));
  EXPECT_THAT(files_in(f.out_dir), testing::IsEmpty());
}

// ---- values each valid that no run can simulate ----

TEST_F(ScenarioErrors, ATransferThatWouldEndPastTheClocksRangeIsAnInputError) {
  // A 1 MiB permutation over 1 b/s NICs: each flow of 1 MiB at 0.125 B/s would take 8.4e6 s,
  // past the 2^62 ps (53 days) a transfer may end at; the int64 picosecond clock would wrap.
  const Failure f = run_bad(edit(kGood, "nic_speed: 400Gbps", "nic_speed: 1bps"));
  EXPECT_EQ(f.result.exit_code, 2) << f.result.err;
  EXPECT_THAT(f.result.err, StartsWith("simulation: error: moving 1.04858e+06 bytes"));
  EXPECT_THAT(f.result.err, HasSubstr("53 days"));
  EXPECT_THAT(files_in(f.out_dir), testing::IsEmpty());
}

TEST_F(ScenarioErrors, NcclBuffersAndChunksTooSmallForAStepAreRefused) {
  // A buffer holds 8 steps of at least 2 bytes; a point-to-point chunk is at least 2 bytes.
  for (const auto& [key, value, least] : {std::tuple{"NCCL_BUFFSIZE", "8B", "16 bytes"},
                                          std::tuple{"NCCL_P2P_NET_CHUNKSIZE", "1B", "2 bytes"}}) {
    const std::string yaml = kGood + fmt::format("nccl:\n  {}: {}\n", key, value);
    const Failure f = run_bad(yaml);
    expect_rejected(f, {.file = f.scenario,
                        .at = locate(yaml, fmt::format("{}: {}", key, value), value),
                        .key = fmt::format("nccl.{}", key),
                        .expected = fmt::format("at least {}", least),
                        .found = ""});
  }
}

TEST_F(ScenarioErrors, AnNcclOperationOverOnePebibyteIsRefused) {
  // 2^50 bytes bounds every byte count derived from an operation within 64 bits.
  const std::string yaml = edit(kGood, "    type: permutation\n    bytes: 1MiB",
                                "    type: nccl\n    collective: allreduce\n    bytes: 2048TiB");
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "bytes: 2048TiB", "2048TiB"),
                      .key = "workloads[0].bytes",
                      .expected = "a size of at most 1 PiB",
                      .found = "2.097e+06 GiB"});
}

TEST_F(ScenarioErrors, AFluidStepUnderANanosecondIsRefused) {
  const std::string yaml = kGood + "network:\n  model: fluid\n  step: 1ps\n";
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "step: 1ps", "1ps"),
                      .key = "network.step",
                      .expected = "at least 1ns",
                      .found = "1 ps"});
  // TCP hosts slower or later than any host: runs that never finished, or never ended.
  for (const auto& [key, value, expected] :
       {std::tuple{"host_rate", "1bps", "0 (no bound) or at least 1Mbps"},
        std::tuple{"host_latency", "2s", "at most 1s"}}) {
    const std::string tcp =
        kGood + fmt::format("network:\n  model: fluid\n  tcp:\n    {}: {}\n", key, value);
    const Failure t = run_bad(tcp);
    expect_rejected(t, {.file = t.scenario,
                        .at = locate(tcp, fmt::format("{}: {}", key, value), value),
                        .key = fmt::format("network.tcp.{}", key),
                        .expected = expected,
                        .found = ""});
  }
}

TEST_F(ScenarioErrors, ASecondYamlDocumentIsRefusedNotDropped) {
  // Nobody would read it: a `---` and a document after the scenario used to change nothing.
  const std::string yaml = kGood + "---\nseed: 4\n";
  const Failure f = run_bad(yaml);
  expect_rejected(f, {.file = f.scenario,
                      .at = locate(yaml, "---"),
                      .key = "",
                      .expected = "one YAML document",
                      .found = "a second document"});
}

TEST_F(ScenarioErrors, TheOutputSectionIsCheckedWhenNothingIsWritten) {
  // `output:` was read only for a run that writes flows: --no-output passed any value.
  const std::string dir = fresh_dir();
  const std::string yaml = kGood + "output: {max_flows: abc}\n";
  write_file(dir + "/scenario.yaml", yaml);
  const CommandResult r = run_cli(fmt::format("run {}/scenario.yaml --no-output", dir));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const Location at = locate(yaml, "max_flows: abc", "abc");
  EXPECT_THAT(r.err, StartsWith(fmt::format("{}/scenario.yaml:{}:{}: error: 'output.max_flows'",
                                            dir, at.line, at.column)));
}

TEST_F(ScenarioErrors, CalibrationFilesCannotBeNamedThroughAnOverride) {
  // Calibration files are read before overrides apply: `--set calibration=FILE` changed nothing,
  // even for a file that does not exist.
  const Failure f = run_bad(kGood, {}, "--set calibration=missing.yaml");
  const CommandResult& r = f.result;
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, StartsWith("--set calibration=missing.yaml: error: 'calibration': expected "
                                "a parameter path"));
}

TEST_F(ScenarioErrors, CommandLineMistakesSayWhatWasWrong) {
  // An unknown command is named (CLI11 said "A subcommand is required"); a bound says what it
  // is (CLI11 printed the range up to the largest double); a preset path that is a directory
  // says so (it said "does not exist").
  const CommandResult unknown = run_cli("simulate x.yaml");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, StartsWith("error: unknown command 'simulate'"));
  const CommandResult scale =
      run_cli("calibrate fit --scenario x.yaml --measured y --loss-scale 0");
  EXPECT_EQ(scale.exit_code, 2);
  EXPECT_THAT(scale.err, StartsWith("error: --loss-scale: expected a number > 0, found '0'"));
  const std::string dir = fresh_dir();
  const Failure f = run_bad(edit(kGood, "    gpus: 2", "    server: " + dir));
  EXPECT_EQ(f.result.exit_code, 2);
  EXPECT_THAT(f.result.err, HasSubstr(fmt::format("({} is a directory)", dir)));
}

}  // namespace
}  // namespace rocesim::test
