// Simulated against measured, on measured input it cannot simulate: a table without a rank count
// or of an unknown benchmark is an error located at the table, and validate_files leaves a bad
// file out (its error located in it) while the other files are still compared.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "sim/scenario/calibration.hpp"
#include "tests/support/test_support.hpp"
#include "validation/lib/nccl_tests_log.hpp"
#include "validation/lib/validate.hpp"

namespace rocesim::validation {
namespace {

using test::contains;

/// A cluster of 16 GPUs (2 servers of 8).
std::string scenario_path() {
  return test::source_path("validation/scenarios/aws-p4d-efa.yaml");
}

/// Two AllReduce rows, 16 ranks (busbw/algbw = 2 x 15/16), as nccl-tests prints them.
const char* const kRows =
    "     4194304       1048576     float     sum      -1    110.9   37.82   70.91      0    "
    "111.9   37.47   70.25      0\n"
    "     8388608       2097152     float     sum      -1    151.6   55.35  103.78      0    "
    "150.5   55.74  104.51      0\n";

/// `kRows` as a dataset's raw_table_verbatim block.
std::string dataset_rows() {
  std::string out = "  raw_table_verbatim: |\n";
  for (size_t start = 0; start < std::string_view(kRows).size();) {
    const size_t end = std::string_view(kRows).find('\n', start) + 1;
    out += "    " + std::string(kRows + start, kRows + end);
    start = end;
  }
  return out;
}

std::string write_file(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(Validate, ATableWithoutARankCountIsALocatedError) {
  const std::string dir = test::temp_dir("validate-ranks");
  // A dataset that states neither total_ranks nor nodes and gpus_per_node: the error names the
  // table's entry, not the scenario's whole job as a guess.
  const std::string unknown = write_file(dir, "unknown.yaml",
                                         "collective: allreduce\n"
                                         "nodes: 2\n"
                                         "tables:\n"
                                         "- name: two_servers\n" +
                                             dataset_rows());
  const NcclTestsLog log = read_measured_dataset(unknown);
  ASSERT_EQ(log.tables.size(), 1u);
  EXPECT_EQ(log.tables[0].nranks, 0);
  const InputError e = test::input_error([&] { validate({log}, scenario_path(), {}); });
  EXPECT_EQ(*e.where().file, unknown);
  EXPECT_EQ(e.where().line, 4);
  EXPECT_TRUE(contains(e.what(), fmt::format("{}:4:3: error: 'ranks': expected a rank count: the "
                                             "'#  Rank' lines or NCCL's nranks in a log; "
                                             "total_ranks, or nodes and gpus_per_node, in a "
                                             "dataset, found none (table 'two_servers')",
                                             unknown)))
      << e.what();

  // Rows without a header: the busbw/algbw ratio tells the collective, not the rank count.
  const NcclTestsLog rows = read_nccl_tests_log(kRows, "rows.log");
  const InputError r = test::input_error([&] { validate({rows}, scenario_path(), {}); });
  EXPECT_TRUE(contains(r.what(), "rows.log:1:1: error: 'ranks': expected a rank count"))
      << r.what();

  // nodes x gpus_per_node is a rank count.
  const std::string derived = write_file(dir, "derived.yaml",
                                         "collective: allreduce\n"
                                         "nodes: 2\n"
                                         "gpus_per_node: 8\n"
                                         "tables:\n"
                                         "- name: two_servers\n" +
                                             dataset_rows());
  const ValidationReport report = validate({read_measured_dataset(derived)}, scenario_path(), {});
  ASSERT_EQ(report.tables.size(), 1u);
  EXPECT_EQ(report.tables[0].nranks, 16);
  EXPECT_EQ(report.tables[0].rows.size(), 2u);
  EXPECT_TRUE(report.warnings.empty()) << report.warnings.front();
}

TEST(Validate, AnUnknownBenchmarkIsALocatedError) {
  // The log names its benchmark, one rocesim does not know: it is not taken for AllReduce because
  // busbw/algbw happens to be 2(n-1)/n.
  const std::string text =
      "srun: launching\n"
      "# Collective test starting: alltoallv_perf\n"
      "# nccl-tests version 2.13.8\n" +
      std::string(kRows);
  const NcclTestsLog log = read_nccl_tests_log(text, "alltoallv.log");
  ASSERT_EQ(log.tables.size(), 1u);
  EXPECT_EQ(log.tables[0].test, "alltoallv_perf");
  EXPECT_TRUE(log.tables[0].collective.empty());
  EXPECT_TRUE(log.warnings.empty()) << log.warnings.front();
  const InputError e = test::input_error([&] { validate({log}, scenario_path(), {}); });
  EXPECT_TRUE(contains(e.what(),
                       "alltoallv.log:2:1: error: 'collective': expected a table of a "
                       "collective rocesim emulates"))
      << e.what();
  EXPECT_TRUE(contains(e.what(), "found 'alltoallv_perf'")) << e.what();

  // The same from a dataset's binary.
  const std::string path = write_file(test::temp_dir("validate-benchmark"), "binary.yaml",
                                      "binary: ./build/all_reduce_v2_perf\n"
                                      "total_ranks: 16\n"
                                      "tables:\n"
                                      "- name: t\n" +
                                          dataset_rows());
  const NcclTestsLog dataset = read_measured_dataset(path);
  EXPECT_TRUE(dataset.tables.at(0).collective.empty());
  const InputError d = test::input_error([&] { validate({dataset}, scenario_path(), {}); });
  EXPECT_TRUE(contains(d.what(), path + ":4:3: error: 'collective'")) << d.what();
  EXPECT_TRUE(contains(d.what(), "found './build/all_reduce_v2_perf'")) << d.what();
}

TEST(Validate, ADirectoryWithOneBadFileValidatesTheRest) {
  const std::string dir = test::temp_dir("validate-directory");
  write_file(dir, "a_good.yaml",
             "collective: allreduce\ntotal_ranks: 16\ntables:\n- name: good\n" + dataset_rows());
  // Line 2 has a time of 0: the file is left out, its error located.
  const std::string bad_row =
      "     8388608       2097152     float     sum      -1     0.00   55.35  103.78      0    "
      "150.5   55.74  104.51      0\n";
  write_file(dir, "b_bad.log",
             std::string(kRows).substr(0, std::string(kRows).find('\n') + 1) + bad_row);
  // A YAML file is a dataset: without its tables it is an error, not an empty log.
  write_file(dir, "c_no_tables.yaml", "gpu: H100\n");

  const std::vector<std::string> files = measured_files(dir);
  ASSERT_EQ(files.size(), 3u);
  const ValidationReport report = validate_files(files, scenario_path(), {});
  ASSERT_EQ(report.tables.size(), 1u);
  EXPECT_EQ(report.tables[0].table, "good");
  EXPECT_EQ(report.tables[0].rows.size(), 2u);
  EXPECT_FALSE(report.bands.empty());
  EXPECT_EQ(report.bands.back().source, "all");
  ASSERT_EQ(report.errors.size(), 2u);
  EXPECT_TRUE(
      contains(report.errors[0], fmt::format("{}/b_bad.log:2:{}: error: expected a positive number "
                                             "(out-of-place time in us), found '0.00'",
                                             dir, bad_row.find("0.00") + 1)))
      << report.errors[0];
  EXPECT_TRUE(
      contains(report.errors[1], dir + "/c_no_tables.yaml:1:1: error: 'tables': expected a list of "
                                       "measured tables"))
      << report.errors[1];

  // A scenario that does not load is its own error, not one of every file.
  const InputError e = test::input_error(
      [&] { validate_files(files, test::source_path("no-such-scenario.yaml"), {}); });
  EXPECT_TRUE(contains(e.what(), "no-such-scenario.yaml")) << e.what();
}

TEST(Validate, RowsSayWhereTheTunersEstimateAndTheSimulationDisagree) {
  // Every AllReduce row carries NCCL's own estimate of the choice its tuner made; a row is
  // flagged exactly where |simulated / estimate - 1| > 20%. On the EFA cluster the estimates
  // (75 us of network latency per step, 2.20.3 tables) miss some rows by more than that.
  const ValidationReport r = validate(
      read_measured(
          {test::source_path("validation/data/measured/aws_p4d_efa_a100_2node_allreduce.yaml")}),
      scenario_path(), {});
  size_t flagged = 0;
  for (const ComparedTable& t : r.tables) {
    for (const ComparedRow& c : t.rows) {
      ASSERT_GT(c.nccl_model_us, 0) << c.size_bytes;
      EXPECT_EQ(c.tuner_disagrees,
                std::abs(c.simulated_time_us / c.nccl_model_us - 1) > kTunerDisagreement)
          << c.size_bytes;
      flagged += c.tuner_disagrees ? 1 : 0;
    }
  }
  EXPECT_GT(flagged, 0u);
  EXPECT_TRUE(contains(format_report(r), "tuner's estimate"));
}

TEST(Validate, TheRooflineIsTheSizeOverTheLineRates) {
  // AWS p4d: 8 A100 on NVLink (300 GB/s a GPU per direction, nominal) and 4 EFA NICs of 100
  // Gb/s per server. The roofline's bus bandwidth B: one server, a GPU's NVLink, 300e9 B/s;
  // both servers, the least of that and a server's NICs, 4 x 12.5e9 = 50e9 B/s; one GPU on
  // each server, its NIC alone, 12.5e9 B/s (no NVLink crossed); one rank, none.
  scenario::Overrides without_workloads;
  without_workloads.skip_workloads = true;
  const auto run = scenario::load_scenario(scenario_path(), without_workloads);
  const fabric::Fabric& f = run->fabric;
  const std::span<const fabric::NodeId> gpus = f.gpus();
  EXPECT_NEAR(roofline_busbw(f, gpus.subspan(0, 8)), 300e9, 1);
  EXPECT_NEAR(roofline_busbw(f, gpus.subspan(0, 16)), 50e9, 1);
  const std::vector<fabric::NodeId> one_each = {gpus[0], gpus[8]};
  EXPECT_NEAR(roofline_busbw(f, one_each), 12.5e9, 1);
  EXPECT_EQ(roofline_busbw(f, gpus.subspan(0, 1)), 0);

  // Each row: T = S x 2 (n - 1) / n / B, here 4 MiB x 1.875 / 50e9 = 157.286 us against the
  // 110.9 measured, an error of +41.8%; the band summary holds the same errors.
  const std::string dir = test::temp_dir("validate-roofline");
  const std::string path = write_file(
      dir, "rows.yaml",
      "gpu: A100\ncollective: allreduce\ntables:\n- name: t\n  total_ranks: 16\n" + dataset_rows());
  const ValidationReport r = validate(read_measured({path}), scenario_path(), {});
  ASSERT_EQ(r.tables.size(), 1u);
  const ComparedRow& c = r.tables[0].rows.at(0);
  const double roof_us = 4194304.0 * 2 * 15 / 16 / 50e9 * 1e6;
  EXPECT_NEAR(c.roofline_time_us, roof_us, 1e-6);
  EXPECT_NEAR(c.roofline_error, (roof_us - 110.9) / 110.9, 1e-9);
  ASSERT_FALSE(r.bands.empty());
  const double roof2_us = 8388608.0 * 2 * 15 / 16 / 50e9 * 1e6;
  EXPECT_NEAR(r.bands[0].median_abs_roofline_error,
              ((roof_us - 110.9) / 110.9 + (roof2_us - 151.6) / 151.6) / 2, 1e-9);
  EXPECT_TRUE(contains(format_report(r), "roofline"));
}

TEST(Validate, ARowSlowerThanTheNextSizeIsFlaggedUnlessNcclsModelSaysSo) {
  // AWS EFA: NCCL 2.8.3's model takes Ring/LL at 64 KiB (42.7 us) and Tree/LL128 at 128 KiB
  // (49.5 us); the simulation charges the ring EFA's 75 us on each of its four network steps
  // (373 us) and the tree two (194 us). And at 512 KiB the tree's network steps, NCCL's
  // Tree/LL128 chunks of 18000 B, leave a step's cost apart (407 us; measured 410), where 1
  // MiB's Ring/LL128 (NCCL's model: 89.7 and 114.8 us) is simulated too fast, as EFA's rings
  // are (381 us; measured 484). Only those two rows are flagged: every other row is faster
  // than the next.
  const ValidationReport r = validate(
      read_measured(
          {test::source_path("validation/data/measured/aws_p4d_efa_a100_2node_allreduce.yaml")}),
      scenario_path(), {});
  ASSERT_EQ(r.tables.size(), 1u);
  std::vector<int64_t> flagged;
  const std::vector<ComparedRow>& rows = r.tables[0].rows;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].slower_than_next) continue;
    flagged.push_back(rows[i].size_bytes);
    ASSERT_LT(i + 1, rows.size());
    EXPECT_GT(rows[i].simulated_time_us, rows[i + 1].simulated_time_us);
    EXPECT_LE(rows[i].nccl_model_us, rows[i + 1].nccl_model_us);
  }
  EXPECT_EQ(flagged, (std::vector<int64_t>{65536, 524288}));
  EXPECT_FALSE(rows.back().slower_than_next);
  EXPECT_TRUE(contains(format_report(r), "a100_p4d_2node_efa: 65536 B")) << format_report(r);
}

TEST(Validate, TheMeasuredNcclReleasePicksTheTuningTables) {
  // Where the scenario names no tables (nor a library), a table's NCCL version picks them:
  // 2.8.3's up to 2.11, 2.20.3's up to 2.21, the newest from 2.22. The same rows as with the
  // tables set by hand; written tables win over the version. Two servers of 8 H100.
  const std::string dir = test::temp_dir("validate-release");
  const std::string scenario = write_file(dir, "s.yaml", R"(name: release
topology:
  type: clos
  racks: 1
  nodes_per_rack: 2
  node: {server: hgx-h100}
  leaf: {uplinks: 8}
  spine: {count: 1}
job: {ranks: all}
)");
  const auto run = [&](const char* version, const char* tables) {
    const std::string path = write_file(
        dir, fmt::format("rows-{}.yaml", version),
        fmt::format("gpu: H100\ncollective: allreduce\ntables:\n- name: t\n  total_ranks: 16\n{}",
                    *version != 0 ? fmt::format("  nccl_version: {}\n", version) : "") +
            dataset_rows());
    scenario::Overrides o;
    if (*tables != 0)
      o.parameters.push_back(
          scenario::parse_override(fmt::format("nccl.tuning_tables={}", tables), "test"));
    const ValidationReport r = validate(read_measured({path}), scenario, o);
    EXPECT_EQ(r.tables.size(), 1u);
    return r.tables.at(0);
  };
  const auto times = [](const ComparedTable& t) {
    std::vector<double> v;
    for (const ComparedRow& c : t.rows) {
      v.push_back(c.simulated_time_us);
      v.push_back(c.nccl_model_us);
    }
    return v;
  };
  const ComparedTable v218 = run("2.18.3+cuda12.2", ""), v28 = run("2.8.3+cuda11.2", "");
  const ComparedTable v226 = run("2.26.2+cuda12.8", ""), none = run("", "");
  EXPECT_EQ(times(v218), times(run("", "2.20.3")));
  EXPECT_EQ(times(v28), times(run("", "2.8.3")));
  EXPECT_EQ(times(v226), times(none));
  EXPECT_NE(times(v218), times(none));
  EXPECT_NE(times(v28), times(v218));
  EXPECT_EQ(times(run("2.18.3+cuda12.2", "newest")), times(none));
  EXPECT_TRUE(contains(fmt::format("{}", fmt::join(v218.env_applied, " ")),
                       "tuning_tables=2.20.3 (NCCL 2.18.3+cuda12.2)"));
  EXPECT_TRUE(none.env_applied.empty());
}

TEST(Validate, SettingsFromNcclsInfoLinesAreApplied) {
  // A log with NCCL_DEBUG=INFO says what the environment set: NCCL_ALGO=Ring is applied (every
  // row a ring), NCCL_IB_HCA listed as not modelled, as from a dataset's `env`.
  const std::string dir = test::temp_dir("validate-info");
  const std::string head =
      "# Collective test starting: all_reduce_perf\n"
      "node1:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Ring.\n"
      "node1:1:1 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0.\n"
      "node1:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 16 cudaDev 0 - Init COMPLETE\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n";
  const std::string path = write_file(dir, "info.log", head + kRows);
  const ValidationReport r = validate(read_measured({path}), scenario_path(), {});
  ASSERT_EQ(r.tables.size(), 1u);
  for (const ComparedRow& c : r.tables[0].rows)
    EXPECT_EQ(c.algorithm, "Ring") << c.size_bytes;
  EXPECT_TRUE(
      contains(fmt::format("{}", fmt::join(r.tables[0].env_applied, " ")), "NCCL_ALGO=Ring"));
  EXPECT_TRUE(contains(fmt::format("{}", fmt::join(r.tables[0].env_not_modelled, " ")),
                       "NCCL_IB_HCA=mlx5_0"));
}

TEST(Validate, RowsOfNoElementsAreListedButNotCompared) {
  // all_gather_perf -b 8 on 16 ranks: its first row holds no float per rank (printed as size
  // 0), which NCCL does not run (the measured 0.27 us is the host's call); the row is listed
  // with the path "none" and no errors, and the band holds the 256 B row alone.
  const std::string dir = test::temp_dir("validate-noop");
  const std::string path = write_file(
      dir, "gather.yaml",
      "gpu: A100\ncollective: allgather\ntables:\n- name: t\n  total_ranks: 16\n"
      "  raw_table_verbatim: |4\n"
      "               0             0     float    none      -1     0.27    0.00    0.00      0"
      "     0.20    0.00    0.00      0\n"
      "             256             4     float    none      -1    86.94    0.00    0.00      0"
      "    86.94    0.00    0.00      0\n");
  const ValidationReport r = validate(read_measured({path}), scenario_path(), {});
  ASSERT_EQ(r.tables.size(), 1u);
  const std::vector<ComparedRow>& rows = r.tables[0].rows;
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].noop);
  EXPECT_EQ(rows[0].algorithm, "none");
  EXPECT_EQ(rows[0].simulated_time_us, 0.0);
  EXPECT_TRUE(std::isnan(rows[0].time_error));
  EXPECT_TRUE(std::isnan(rows[0].roofline_error));
  EXPECT_FALSE(rows[1].noop);
  EXPECT_FALSE(std::isnan(rows[1].time_error));
  ASSERT_FALSE(r.bands.empty());
  EXPECT_EQ(r.bands[0].rows, 1u);
  EXPECT_NEAR(r.bands[0].median_abs_time_error, std::abs(rows[1].time_error), 1e-12);
}

TEST(Validate, TablesAreChosenByNamePrefix) {
  // The AMD file holds three clusters; --tables aac8_ keeps the one-server MI300X table, which
  // the MI300X scenario then compares alone; a prefix no table has is an error naming it.
  const std::vector<std::string> files = {test::source_path(
      "validation/data/measured/amd_aac_mi300x_mi325x_mi355x_rccl_allreduce.yaml")};
  const std::string scenario = test::source_path("validation/scenarios/amd-mi300x-roce.yaml");
  TableNames names;
  names.prefixes = {"aac8_"};
  const ValidationReport r = validate_files(files, scenario, {}, names);
  ASSERT_EQ(r.tables.size(), 1u);
  EXPECT_EQ(r.tables[0].table, "aac8_mi300x_1node_INTRA");
  EXPECT_TRUE(r.errors.empty());
  names.prefixes = {"aac99_"};
  const InputError e = test::input_error([&] { validate_files(files, scenario, {}, names); });
  EXPECT_TRUE(contains(e.what(), "aac99_"));
}

}  // namespace
}  // namespace rocesim::validation
