// Workload files (`workloads/` and `- include: FILE`): every ready file runs on a small fabric,
// included workloads take their place in the list (names, paths, overrides), and the errors of
// an include name the right file, line and column.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/test_support.hpp"

namespace rocesim::scenario {
namespace {

/// 2 racks of 2 servers of 4 GPUs (16 GPUs) and the given workload list items.
std::string scenario(const std::string& items) {
  return test::clos_topology(2, 2, 4, 4) + "workloads:\n" + items;
}

std::vector<std::string> names(const ScenarioRun& run) {
  std::vector<std::string> out;
  for (const metrics::WorkloadResult& w : run.recorder->workloads())
    out.push_back(w.name);
  return out;
}

TEST(WorkloadFiles, EveryReadyFileRuns) {
  // Each file of workloads/ included alone: it loads, runs to the end, and every workload it
  // holds finishes in a positive time.
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::source_path("workloads"))) {
    if (e.path().extension() != ".yaml") continue;
    ++files;
    SCOPED_TRACE(e.path().string());
    const auto run = test::scenario_from_yaml(
        scenario(fmt::format("  - include: workloads/{}", e.path().filename().string())));
    run->run();
    ASSERT_FALSE(run->recorder->workloads().empty());
    for (const metrics::WorkloadResult& w : run->recorder->workloads()) {
      EXPECT_GT((w.end - w.start).in_seconds(), 0) << w.name;
    }
  }
  EXPECT_GE(files, 5u);
}

TEST(WorkloadFiles, IncludedWorkloadsTakeTheirPlaceInTheList) {
  // A written workload, a file of four, and one more: six workloads in that order, the
  // included ones addressable by index (their place in the whole list) and by name.
  const std::string yaml = scenario(R"(  - {name: first, type: permutation, bytes: 1MiB}
  - include: workloads/allreduce_sweep.yaml
  - {name: last, type: permutation, bytes: 1MiB, after: [allreduce_512MiB]})");
  const auto run = test::scenario_from_yaml(yaml);
  run->run();
  EXPECT_EQ(names(*run), (std::vector<std::string>{"first", "allreduce_1MiB", "allreduce_8MiB",
                                                   "allreduce_64MiB", "allreduce_512MiB", "last"}));
  // The effective scenario holds the included workloads themselves.
  EXPECT_TRUE(test::contains(run->effective_yaml, "allreduce_64MiB"));
  EXPECT_FALSE(test::contains(run->effective_yaml, "include"));
}

TEST(WorkloadFiles, KeysBesideIncludeReplaceTheFilesOwn) {
  // permutation_4qps.yaml says 64 MiB on 4 QPs; the include asks for 1 MiB and a new name.
  const auto run = test::scenario_from_yaml(
      scenario("  - {include: workloads/permutation_4qps.yaml, name: small, bytes: 1MiB}"));
  run->run();
  ASSERT_EQ(names(*run), std::vector<std::string>{"small"});
  EXPECT_TRUE(test::contains(run->effective_yaml, "bytes: 1MiB"));
  EXPECT_TRUE(test::contains(run->effective_yaml, "qps_per_connection: 4"));
}

TEST(WorkloadFiles, ErrorsPointIntoTheIncludedFile) {
  // A bad value in an included file is reported at its line and column there, under the path
  // of its place in the scenario's list.
  const std::string dir = test::temp_dir("workload_files");
  const std::string file = dir + "/bad.yaml";
  std::ofstream(file) << "# a comment\nname: bad\ntype: permutation\nbytes: lots\n";
  const InputError e = test::input_error([&] {
    test::scenario_from_yaml(
        scenario(fmt::format("  - {{type: permutation, bytes: 1MiB}}\n  - include: {}", file)));
  });
  ASSERT_TRUE(e.where().known());
  EXPECT_EQ(*e.where().file, file);
  EXPECT_EQ(e.where().line, 4);
  EXPECT_EQ(e.where().column, 8);
  EXPECT_EQ(e.key(), "workloads[1].bytes");
}

TEST(WorkloadFiles, AMissingFileIsReportedWhereItIsNamed) {
  const InputError e = test::input_error(
      [&] { test::scenario_from_yaml(scenario("  - include: workloads/no_such_file.yaml")); });
  EXPECT_EQ(e.key(), "workloads[0].include");
  EXPECT_EQ(e.where().line, 9);
  EXPECT_TRUE(test::contains(e.what(), "does not exist")) << e.what();
}

TEST(WorkloadFiles, ANameBesideAnIncludeOfSeveralWorkloadsIsAnError) {
  const InputError e = test::input_error([&] {
    test::scenario_from_yaml(
        scenario("  - {include: workloads/allreduce_sweep.yaml, name: sweep}"));
  });
  EXPECT_EQ(e.key(), "workloads[0].name");
  EXPECT_TRUE(test::contains(e.what(), "4 workloads")) << e.what();
}

TEST(WorkloadFiles, RelativePathsInAnIncludedWorkloadStartAtItsFile) {
  // A flows workload in a file of its own directory reads its CSV next to it, wherever the
  // scenario is.
  const std::string dir = test::temp_dir("workload_files_csv");
  std::ofstream(dir + "/flows.csv") << "src,dst,bytes\n0,5,1MiB\n";
  std::ofstream(dir + "/w.yaml") << "name: csv\ntype: flows\nfile: flows.csv\n";
  const auto run = test::scenario_from_yaml(scenario(fmt::format("  - include: {}/w.yaml", dir)));
  run->run();
  ASSERT_EQ(run->recorder->workloads().size(), 1u);
  EXPECT_EQ(run->recorder->workloads()[0].flows, 1u);
}

}  // namespace
}  // namespace rocesim::scenario
