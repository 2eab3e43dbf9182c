// rocesim sweep, end to end: the points of a study (grid x zip x explicit points x seeds), the
// points table against the same points run one by one, the same file at any thread count, a
// resumed sweep against an uninterrupted one, an interrupted sweep that keeps its finished
// points, and the errors. tests/cli/check_sweep.py reads the files with h5py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/scenario/study.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::test {
namespace {

using testing::HasSubstr;

CommandResult check_sweep(const std::string& file, const std::string& more = "") {
  return run_command(fmt::format("{} {} {} {}", ROCESIM_PYTHON,
                                 source_path("tests/cli/check_sweep.py"), file, more));
}

/// A study of the quickstart (its AllReduce cut to 16 MiB) in a fresh directory.
std::string write_study(const std::string& dir, const std::string& body) {
  const std::string path = dir + "/study.yaml";
  std::ofstream(path) << fmt::format("scenario: {}\nset:\n  workloads[allreduce].bytes: 16MiB\n{}",
                                     source_path("scenarios/quickstart.yaml"), body);
  return path;
}

const std::string kGrid =
    "grid:\n  routing.scheme: [ecmp, e-ecmp]\n  workloads[permutation].qps_per_connection: [1, "
    "4]\nseeds: [1, 2]\n";

TEST(Study, PointsAreTheGridTimesTheZipTimesThePointsTimesTheSeeds) {
  // grid 2 x 3, zip of 2 rows, 2 explicit points, 2 seeds: 2 x 3 x 2 x 2 x 2 = 48 points; the
  // last grid axis varies fastest, the seeds fastest of all.
  const std::string dir = temp_dir("study");
  const std::string path = write_study(
      dir,
      "grid:\n  routing.scheme: [ecmp, e-ecmp]\n  workloads[permutation].qps_per_connection: [1, "
      "2, 4]\nzip:\n  topology.leaf.uplinks: [16, 8]\n  topology.spine.count: [8, 4]\npoints:\n"
      "  - {network.model: maxmin}\n  - {routing.source_port: random}\nseeds: [5, 6]\n");
  const scenario::Study s = scenario::load_study(path);
  ASSERT_EQ(s.points.size(), 48u);
  EXPECT_EQ(s.axes,
            (std::vector<std::string>{"routing.scheme", "workloads[permutation].qps_per_connection",
                                      "topology.leaf.uplinks", "topology.spine.count",
                                      "network.model", "routing.source_port"}));
  const scenario::StudyPoint& p = s.points[1];  // point 0 with the second seed
  EXPECT_EQ(p.seed, 6u);
  EXPECT_EQ(p.values, (std::vector<std::string>{"ecmp", "1", "16", "8", "maxmin", ""}));
  // Point g x 8 + z x 4 + e x 2 + seed: ecmp with 2 QPs (g = 1), zip row 1, explicit point 1,
  // seed 5 is point 14; the explicit point leaves network.model unset there.
  const scenario::StudyPoint& q = s.points[14];
  EXPECT_EQ(q.values, (std::vector<std::string>{"ecmp", "2", "8", "4", "", "random"}));
  EXPECT_EQ(q.seed, 5u);
  EXPECT_EQ(s.points.back().values[0], "e-ecmp");
}

TEST(Sweep, TheTableIsThePointsRunOneByOneAndTheFileIsTheSameAtAnyThreadCount) {
  const std::string dir = temp_dir("sweep");
  const std::string study = write_study(dir, kGrid);
  const CommandResult one = run_cli(fmt::format("sweep {} -o {}/one.h5", study, dir));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_THAT(one.out, HasSubstr("8 of 8 points"));
  const CommandResult two = run_cli(fmt::format("sweep {} -o {}/two.h5 --threads 2", study, dir));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(read_file(dir + "/one.h5"), read_file(dir + "/two.h5"));
  // Point 7: e-ecmp, 4 QPs, seed 2, as `rocesim run` runs it with the same values.
  const CommandResult run = run_cli(fmt::format(
      "run {} --seed 2 --set workloads[allreduce].bytes=16MiB --set routing.scheme=e-ecmp --set "
      "workloads[permutation].qps_per_connection=4 -q -o {}/p7.h5",
      source_path("scenarios/quickstart.yaml"), dir));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const CommandResult check = check_sweep(dir + "/one.h5", fmt::format("--run 7 {}/p7.h5", dir));
  EXPECT_EQ(check.exit_code, 0) << check.err;
  // And the checker tells points apart: point 6 is seed 1.
  EXPECT_NE(check_sweep(dir + "/one.h5", fmt::format("--run 6 {}/p7.h5", dir)).exit_code, 0);
  std::filesystem::remove_all(dir);
}

TEST(Sweep, AResumedSweepHoldsWhatAnUninterruptedOneDoes) {
  const std::string dir = temp_dir("sweep-resume");
  const std::string study = write_study(dir, kGrid);
  ASSERT_EQ(run_cli(fmt::format("sweep {} -o {}/full.h5 -q", study, dir)).exit_code, 0);
  const CommandResult part =
      run_cli(fmt::format("sweep {} -o {}/part.h5 --points 2-4", study, dir));
  ASSERT_EQ(part.exit_code, 0) << part.err;
  EXPECT_THAT(part.out, HasSubstr("3 of 8 points"));
  const CommandResult rest = run_cli(fmt::format("sweep {} -o {}/part.h5", study, dir));
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_THAT(rest.out, HasSubstr("(5 run now, 3 resumed)"));
  const CommandResult check = check_sweep(dir + "/part.h5", "--same-as " + dir + "/full.h5");
  EXPECT_EQ(check.exit_code, 0) << check.err;
  // A file of another study is not resumed: the study must be unchanged.
  const std::string other = write_study(dir, "seeds: [3]\n");
  const CommandResult r = run_cli(fmt::format("sweep {} -o {}/part.h5", other, dir));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("holds another study"));
  std::filesystem::remove_all(dir);
}

TEST(Sweep, TwoProcessesUnderMpirunWriteWhatOneProcessDoes) {
#ifndef ROCESIM_MPIRUN
  GTEST_SKIP() << "rocesim was built without MPI, or mpirun is missing";
#else
  // Ranks take every other point and write parts; rank 0 merges them in point order: the same
  // table and runs as one process, and no part file left.
  // A machine where mpirun cannot start two processes (no slots, no launcher) cannot run this.
  const CommandResult probe = run_command(
      fmt::format("{} --oversubscribe --allow-run-as-root -np 2 /bin/true", ROCESIM_MPIRUN));
  if (probe.exit_code != 0) GTEST_SKIP() << "mpirun cannot start processes here: " << probe.err;
  const std::string dir = temp_dir("sweep-mpi");
  const std::string study = write_study(dir, kGrid);
  ASSERT_EQ(run_cli(fmt::format("sweep {} -o {}/one.h5 -q", study, dir)).exit_code, 0);
  // Open MPI's own allocations are not the simulator's: no leak report under the sanitizers.
  const CommandResult r = run_command(fmt::format(
      "ASAN_OPTIONS=detect_leaks=0 {} --oversubscribe --allow-run-as-root -np 2 {} sweep {} -o "
      "{}/two.h5",
      ROCESIM_MPIRUN, cli_path(), study, dir));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("8 of 8 points"));
  const CommandResult check = check_sweep(dir + "/two.h5", "--same-as " + dir + "/one.h5");
  EXPECT_EQ(check.exit_code, 0) << check.err;
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 3u);  // study.yaml, one.h5, two.h5
  std::filesystem::remove_all(dir);
#endif
}

TEST(Sweep, AnInterruptedSweepKeepsEveryFinishedPointAndNoTemporaryFile) {
  // 300 replicates of the quickstart; SIGINT once the sweep has started writing. It exits
  // 128 + 2 with a valid file of the points that finished, and leaves no temporary file.
  const std::string dir = temp_dir("sweep-int");
  const std::string study = write_study(dir, "replicates: 300\n");
  const CommandResult r = run_command(fmt::format(
      "sh -c '{} sweep {} -o {}/s.h5 & pid=$!; i=0; while [ $i -lt 600 ] && ! ls {}/s.h5.tmp-* "
      ">/dev/null 2>&1; do sleep 0.02; i=$((i+1)); done; sleep 0.3; kill -INT $pid; wait $pid; "
      "echo exit $?'",
      cli_path(), study, dir, dir));
  EXPECT_THAT(r.out, HasSubstr("exit 130")) << r.err;
  EXPECT_THAT(r.err, HasSubstr("run the same command to resume"));
  const CommandResult check = check_sweep(dir + "/s.h5");
  EXPECT_EQ(check.exit_code, 0) << check.err;
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 2u);  // study.yaml and s.h5
  std::filesystem::remove_all(dir);
}

TEST(Sweep, ABadValueAtAnyPointIsALocatedErrorAndNothingIsWritten) {
  const std::string dir = temp_dir("sweep-bad");
  const std::string study =
      write_study(dir, "grid:\n  workloads[permutation].qps_per_connection: [1, 0]\n");
  const CommandResult r = run_cli(fmt::format("sweep {} -o {}/s.h5", study, dir));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("study.yaml:5:50"));
  EXPECT_THAT(r.err, HasSubstr("workloads[1].qps_per_connection"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/s.h5"));
  const std::string zip = write_study(
      dir, "zip:\n  routing.scheme: [ecmp]\n  workloads[permutation].bytes: [1MiB, 2MiB]\n");
  const CommandResult z = run_cli(fmt::format("sweep {} -o {}/s.h5", zip, dir));
  EXPECT_EQ(z.exit_code, 2);
  EXPECT_THAT(z.err, HasSubstr("lists of one length"));
  // A path is one column of the points table: the seed is the study's own (`seeds`,
  // `replicates`), and a path is an axis of the grid or of the zip, not of both.
  const std::string seed = write_study(dir, "grid:\n  seed: [1, 2]\n");
  const CommandResult sd = run_cli(fmt::format("sweep {} -o {}/s.h5", seed, dir));
  EXPECT_EQ(sd.exit_code, 2);
  EXPECT_THAT(sd.err, HasSubstr("study.yaml:5:3: error: 'grid.seed': expected a scenario path "
                                "other than `seed`"));
  const std::string both =
      write_study(dir, "grid:\n  routing.scheme: [ecmp]\nzip:\n  routing.scheme: [e-ecmp]\n");
  const CommandResult b = run_cli(fmt::format("sweep {} -o {}/s.h5", both, dir));
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_THAT(b.err, HasSubstr("study.yaml:7:3: error: 'zip.routing.scheme': expected a path that "
                               "is not also an axis of the grid"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/s.h5"));
  // Nor of an explicit point, which is crossed with the grid (it made points all alike).
  const std::string crossed = write_study(
      dir, "grid:\n  routing.scheme: [ecmp, e-ecmp]\npoints:\n  - {routing.scheme: pinned}\n");
  const CommandResult c = run_cli(fmt::format("sweep {} -o {}/s.h5", crossed, dir));
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_THAT(c.err, HasSubstr("'points[0].routing.scheme': expected a path that is not also an "
                               "axis of the grid"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/s.h5"));
  const std::string good = write_study(dir, kGrid);  // 8 points
  const CommandResult p = run_cli(fmt::format("sweep {} -o {}/s.h5 --points 3-9", good, dir));
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_THAT(p.err, HasSubstr("--points"));
  std::filesystem::remove_all(dir);
}

// ---- every example study ----

class ExampleStudy : public testing::TestWithParam<std::string> {};

TEST_P(ExampleStudy, RunsAndWritesACheckedSweepFile) {
  const std::string dir = temp_dir("example-study");
  const CommandResult r = run_cli(fmt::format("sweep {} -o {}/s.h5 --threads 2", GetParam(), dir));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CommandResult check = check_sweep(dir + "/s.h5");
  EXPECT_EQ(check.exit_code, 0) << check.err;
  std::filesystem::remove_all(dir);
}

std::vector<std::string> studies() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(source_path("studies"))) {
    if (e.path().extension() == ".yaml") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

INSTANTIATE_TEST_SUITE_P(Studies, ExampleStudy, testing::ValuesIn(studies()),
                         [](const testing::TestParamInfo<std::string>& p) {
                           std::string s = std::filesystem::path(p.param).stem().string();
                           for (char& c : s) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace rocesim::test
