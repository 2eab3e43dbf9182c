// The rocesim-bench executable, where it was built (CUDA, NCCL and MPI found at configure time).
// With no CUDA device it must say so and exit 3; the command line works without a GPU. On a
// machine with a GPU, a one-GPU run must write a dataset that the validation reader takes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "calibrate/lib/bench_report.hpp"
#include "tests/support/test_support.hpp"
#include "validation/lib/nccl_tests_log.hpp"

namespace rocesim::calibrate {
namespace {

using test::contains;

#ifdef ROCESIM_BENCH_EXE
constexpr const char* kBench = ROCESIM_BENCH_EXE;
#define REQUIRE_BENCH() (void)0
#else
constexpr const char* kBench = "";
#define REQUIRE_BENCH() \
  GTEST_SKIP() << "rocesim-bench was not built (CUDA, NCCL or MPI not found at configure time)"
#endif

test::CommandResult bench(const std::string& args, const std::string& env = "") {
  // No launcher variables: the test may itself run under one.
  return test::run_command(
      fmt::format("env -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_RANK -u SLURM_PROCID "
                  "-u MV2_COMM_WORLD_RANK {} '{}' {}",
                  env, kBench, args));
}

TEST(BenchE2E, NoCudaDeviceExitsThree) {
  REQUIRE_BENCH();
  // CUDA_VISIBLE_DEVICES= hides every GPU, so the answer is the same on a GPU machine.
  for (const char* mode : {"", "--single-process"}) {
    SCOPED_TRACE(mode);
    const test::CommandResult r =
        bench(fmt::format("{} -b 8 -e 64 -f 2 --collective all", mode), "CUDA_VISIBLE_DEVICES=");
    EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
    EXPECT_TRUE(contains(r.err, "no CUDA device")) << r.err;
    EXPECT_TRUE(contains(r.err, "cudaGetDeviceCount")) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(BenchE2E, HelpAndBadFlags) {
  REQUIRE_BENCH();
  const test::CommandResult help = bench("--help");
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_TRUE(contains(help.out, "Usage:"));
  EXPECT_TRUE(contains(help.out, "--collective"));
  const test::CommandResult bad = bench("--no-such-flag");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "--no-such-flag")) << bad.err;
  const test::CommandResult bad_o = bench("-o results.h5");
  EXPECT_EQ(bad_o.exit_code, 2);
  EXPECT_TRUE(contains(bad_o.err, ".yaml")) << bad_o.err;
  const test::CommandResult bad_c = bench("--collective all_reduce,gossip");
  EXPECT_EQ(bad_c.exit_code, 2);
  EXPECT_TRUE(contains(bad_c.err, "gossip")) << bad_c.err;
}

TEST(BenchE2E, OneGpuWritesADataset) {
  REQUIRE_BENCH();
  const std::string dir = test::temp_dir("bench_e2e");
  const std::string out = dir + "/one.yaml";
  const test::CommandResult r = bench(fmt::format(
      "--single-process --gpus 1 --collective all -b 8 -e 64K -f 32 -n 3 -w 1 -o {}", out));
  if (r.exit_code == 3) GTEST_SKIP() << "no usable GPU here: " << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "# Collective test starting: all_reduce_perf"));
  const validation::NcclTestsLog log = validation::read_measured_dataset(out);
  ASSERT_EQ(log.tables.size(), 6u);
  for (const validation::NcclTestsTable& t : log.tables) {
    EXPECT_EQ(t.nranks, 1);
    EXPECT_EQ(t.rows.size(), 3u);  // 8, 256, 8K (64K is not reached: 8K * 32 > 64K)
  }
  const std::vector<BenchStatsTable> stats = read_bench_dataset(out);
  ASSERT_EQ(stats.size(), 6u);
  EXPECT_EQ(stats[0].stats[0].samples, 3);
  EXPECT_LE(stats[0].stats[0].time_us_min, stats[0].stats[0].time_us_p99);
}

}  // namespace
}  // namespace rocesim::calibrate
