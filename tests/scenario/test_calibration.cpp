// Calibrated parameters over a scenario: calibration files named by `calibration:` and
// Overrides::parameters (`--set`). They replace the scenario's values before anything reads them,
// so they change the model exactly as if written in the scenario, and a mistake in them is
// reported at the line of the calibration file that holds it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "sim/scenario/calibration.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::test {
namespace {

using testing::HasSubstr;

// 2 racks x 1 server x 2 GPUs, 400 Gb/s NICs; its calibration file comes from the test.
const std::string kScenario = R"(name: calibrated
topology:
  type: clos
  racks: 2
  nodes_per_rack: 1
  node: {gpus: 2, nic_speed: 400Gbps}
  leaf: {uplinks: 2}
  spine: {count: 2}
calibration: calibration.yaml
workloads:
  - {type: permutation, bytes: 1MiB}
)";

struct Files {
  std::string dir, scenario;
};

Files write_files(const std::string& calibration, const std::string& scenario = kScenario) {
  Files f;
  f.dir = temp_dir("calibration");
  f.scenario = f.dir + "/scenario.yaml";
  std::ofstream(f.scenario) << scenario;
  std::ofstream(f.dir + "/calibration.yaml") << calibration;
  return f;
}

/// Capacity of the first NIC -> leaf link.
double nic_link_gbps(const fabric::Fabric& f) {
  for (const fabric::Link& l : f.links()) {
    if (f.node(l.src).kind == fabric::NodeKind::Nic &&
        f.node(l.dst).kind == fabric::NodeKind::Switch)
      return l.capacity.in_gbps();
  }
  ADD_FAILURE() << "no NIC link";
  return 0;
}

TEST(Calibration, FileValuesReplaceTheScenarioAndAreEchoed) {
  const Files f = write_files(
      "format: rocesim-calibration/1\n"
      "parameters:\n"
      "  topology.node.nic_efficiency: 0.5\n"
      "  nccl.NCCL_NET_OVERHEAD: 3us\n"
      "fit: {anything: [1, 2]}\n");
  const auto run = scenario::load_scenario(f.scenario);
  // The NIC cable carries payload at nic_speed x RoCEv2 framing x nic_efficiency
  // = 400 x 4096/4178 x 0.5 = 196.07 Gb/s.
  EXPECT_NEAR(nic_link_gbps(run->fabric), 400 * 4096.0 / 4178 * 0.5, 1e-6);
  EXPECT_EQ(run->nccl.net_overhead, Time::us(3));
  EXPECT_THAT(run->effective_yaml, HasSubstr("nic_efficiency: 0.5"));
  // The values are in the effective scenario; re-running it needs no calibration file.
  EXPECT_THAT(run->effective_yaml, testing::Not(HasSubstr("calibration")));
  ASSERT_EQ(run->calibration.size(), 2u);
  EXPECT_THAT(run->calibration_yaml, HasSubstr("topology.node.nic_efficiency: 0.5"));
  EXPECT_THAT(run->calibration_yaml, HasSubstr("calibration.yaml:3:33"));
}

TEST(Calibration, LaterOverridesWin) {
  const Files f = write_files(
      "parameters:\n"
      "  topology.node.nic_efficiency: 0.5\n");
  scenario::Overrides o;
  o.parameters.push_back(scenario::parse_override("topology.node.nic_efficiency=0.25", "--set"));
  const auto run = scenario::load_scenario(f.scenario, o);
  EXPECT_NEAR(nic_link_gbps(run->fabric), 400 * 4096.0 / 4178 * 0.25, 1e-6);
}

TEST(Calibration, KeysOfATopologyFileCanBeSet) {
  // ai-zone-128.yaml sets a 3 us spine latency; the override replaces it.
  const std::string scenario =
      "topology: " + source_path("topologies/ai-zone-128.yaml") +
      "\ncalibration: calibration.yaml\nworkloads: [{type: permutation, bytes: 1MiB}]\n";
  const Files f = write_files("parameters: {topology.spine.latency: 1234ns}\n", scenario);
  const auto run = scenario::load_scenario(f.scenario);
  EXPECT_THAT(run->effective_yaml, HasSubstr("latency: 1234ns"));
}

TEST(Calibration, ATopologyFileCanBeSetAndThenItsKeys) {
  // `--set topology=FILE` (or a study's axis of topology files) reads the file in as a written
  // `topology: FILE` is, relative to the scenario; a later override reaches into it. The
  // scenario names ai-zone-128 (16 servers); the override swaps in rail-1024 and sets its
  // spine latency.
  const std::string scenario = "topology: " + source_path("topologies/ai-zone-128.yaml") +
                               "\nworkloads: [{type: permutation, bytes: 1MiB}]\n";
  const Files f = write_files("", scenario);
  scenario::Overrides o;
  o.parameters.push_back(
      scenario::parse_override("topology=" + source_path("topologies/rail-1024.yaml"), "--set"));
  o.parameters.push_back(scenario::parse_override("topology.spine.latency=1234ns", "--set"));
  const auto run = scenario::load_scenario(f.scenario, o);
  EXPECT_EQ(run->fabric.servers().size(), 128u);
  EXPECT_THAT(run->effective_yaml, HasSubstr("latency: 1234ns"));
  // A file that is not there is an error at the override, naming the path it looked for.
  const InputError e = input_error([&] {
    scenario::Overrides bad;
    bad.parameters.push_back(scenario::parse_override("topology=nope.yaml", "--set"));
    (void)scenario::load_scenario(f.scenario, bad);
  });
  EXPECT_EQ(e.where().to_string(), "--set");  // the origin the override was given
  EXPECT_THAT(std::string(e.what()), HasSubstr("nope.yaml"));
}

TEST(Calibration, ListItemsAreSetByIndexOrByName) {
  // Two permutations: the first by index (two spellings), the second by its name.
  const std::string scenario = "topology: " + source_path("topologies/ai-zone-128.yaml") +
                               "\nworkloads:\n  - {type: permutation, bytes: 1MiB}\n"
                               "  - {name: second, type: permutation, bytes: 1MiB}\n";
  const Files f = write_files("", scenario);
  // (The first has no name: it runs as permutation0, and is found by that name too.)
  for (const std::string first : {"workloads.0.bytes=3MiB", "workloads[0].bytes=3MiB",
                                  "workloads[permutation0].bytes=3MiB"}) {
    scenario::Overrides o;
    o.parameters.push_back(scenario::parse_override(first, "--set"));
    o.parameters.push_back(scenario::parse_override("workloads[second].bytes=5MiB", "--set"));
    const auto run = scenario::load_scenario(f.scenario, o);
    EXPECT_THAT(run->effective_yaml, HasSubstr("bytes: 3MiB")) << first;
    EXPECT_THAT(run->effective_yaml, HasSubstr("bytes: 5MiB")) << first;
    EXPECT_THAT(run->effective_yaml, testing::Not(HasSubstr("bytes: 1MiB"))) << first;
  }
  struct Bad {
    std::string set, expected;
  };
  for (const Bad& b :
       {Bad{"workloads[third].bytes=1MiB",
            "expected an item of workloads by index (0 to 1) or by name (permutation0, second)"},
        Bad{"events[0].at=1ms", "found no 'events' in the scenario"},
        Bad{"workloads.2.bytes=1MiB", "found '2'"},
        Bad{"workloads.1=1MiB", "a key inside the list item"},
        Bad{"topology[0].x=1", "a list at 'topology' to take an item of"},
        Bad{"workloads[0.bytes=1", "list items by index or name"}}) {
    const InputError e = input_error([&] {
      scenario::Overrides o;
      o.parameters.push_back(scenario::parse_override(b.set, "--set"));
      (void)scenario::load_scenario(f.scenario, o);
    });
    EXPECT_THAT(std::string(e.what()), HasSubstr(b.expected)) << b.set;
  }
}

TEST(Calibration, ASetValueMayBeAListOrAMappingInFlowForm) {
  // `ranks=[0, 2, 4]` sets a list and `node={gpus: 4, nics: 2}` a mapping, both echoed in the
  // effective scenario; a flow value that is not YAML is a located error.
  const std::string scenario = "topology: " + source_path("topologies/ai-zone-128.yaml") +
                               "\nworkloads:\n  - {type: permutation, bytes: 1MiB}\n";
  const Files f = write_files("", scenario);
  scenario::Overrides o;
  o.parameters.push_back(scenario::parse_override("workloads[0].ranks=[0, 2, 4, 6]", "--set"));
  const auto run = scenario::load_scenario(f.scenario, o);
  EXPECT_THAT(run->effective_yaml,
              HasSubstr("ranks:\n      - 0\n      - 2\n      - 4\n      - 6\n"));
  run->run();
  EXPECT_EQ(run->recorder->workloads().at(0).flows, 4u);  // a permutation of 4 ranks
  const scenario::ParamOverride m =
      scenario::parse_override("topology.node={gpus: 4, nics: 2}", "--set");
  ASSERT_TRUE(m.value.is_map());
  EXPECT_EQ(m.value.find("nics")->value(), "2");
  EXPECT_THAT(std::string(input_error([] {
                            scenario::parse_override("workloads[0].ranks=[0, 2", "--set");
                          }).what()),
              HasSubstr("valid YAML"));
}

TEST(Calibration, UnknownKeyIsReportedInTheCalibrationFile) {
  const Files f = write_files("parameters:\n  topology.node.nic_eficiency: 0.5\n");
  const InputError e = input_error([&] { scenario::load_scenario(f.scenario); });
  EXPECT_THAT(e.where().to_string(), HasSubstr("calibration.yaml:2:32"));
  EXPECT_THAT(std::string(e.what()), HasSubstr("nic_eficiency"));
}

TEST(Calibration, OutOfRangeValueIsReportedInTheCalibrationFile) {
  const Files f = write_files("parameters:\n  topology.node.nic_efficiency: 1.5\n");
  const InputError e = input_error([&] { scenario::load_scenario(f.scenario); });
  EXPECT_THAT(e.where().to_string(), HasSubstr("calibration.yaml:2:33"));
  EXPECT_EQ(e.key(), "topology.node.nic_efficiency");
}

TEST(Calibration, PathThroughAValueIsAnError) {
  const Files f = write_files("parameters:\n  topology.type.x: 1\n");
  const InputError e = input_error([&] { scenario::load_scenario(f.scenario); });
  EXPECT_THAT(e.where().to_string(), HasSubstr("calibration.yaml:2:20"));
  EXPECT_THAT(std::string(e.what()), HasSubstr("not a mapping"));
}

TEST(Calibration, MalformedFilesAreLocatedErrors) {
  EXPECT_THAT(input_error([&] {
                scenario::load_scenario(write_files("format: other/2\nparameters: {}\n").scenario);
              })
                  .where()
                  .to_string(),
              HasSubstr("calibration.yaml:1:9"));
  EXPECT_THAT(
      input_error([&] { scenario::load_scenario(write_files("parameters: [1, 2]\n").scenario); })
          .where()
          .to_string(),
      HasSubstr("calibration.yaml:1:13"));
  EXPECT_THAT(input_error([&] {
                scenario::load_scenario(write_files("parameters:\n  a..b: 1\n").scenario);
              })
                  .where()
                  .to_string(),
              HasSubstr("calibration.yaml:2:3"));
  EXPECT_THAT(input_error([&] { scenario::load_scenario(write_files("prameters: {}\n").scenario); })
                  .where()
                  .to_string(),
              HasSubstr("calibration.yaml:1:1"));
  const InputError missing = input_error([&] {
    scenario::load_scenario(
        write_files("", std::string(kScenario).replace(kScenario.find("calibration.yaml"), 16,
                                                       "nowhere.yaml"))
            .scenario);
  });
  EXPECT_THAT(missing.where().to_string(), HasSubstr("scenario.yaml:9:14"));
}

TEST(Calibration, SetOptionNeedsKeyAndValue) {
  EXPECT_THAT(std::string(input_error([] { scenario::parse_override("novalue", "--set"); }).what()),
              HasSubstr("KEY=VALUE"));
  EXPECT_THAT(std::string(input_error([] { scenario::parse_override("a b=1", "--set"); }).what()),
              HasSubstr("dotted path"));
}

}  // namespace
}  // namespace rocesim::test
