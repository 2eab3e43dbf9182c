// The rocesim command line, end to end: every example scenario runs and prints its summary, every
// ready topology is described, results.h5 is deterministic (the same bytes for the same scenario
// and seed, whatever the thread count) and readable with h5py, and the committed scenario
// reference is what `rocesim schema` prints.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "calibrate/lib/nicprobe_report.hpp"
#include "sim/scenario/scenario.hpp"
#include "tests/support/test_support.hpp"
#include "validation/lib/nccl_tests_log.hpp"
#include "validation/lib/validate.hpp"

namespace rocesim::test {
namespace {

using testing::HasSubstr;
using testing::Not;

/// The YAML files of a source directory, sorted, found when the tests are listed: adding a
/// scenario or a topology adds a test.
std::vector<std::string> yaml_files(const std::string& relative_dir) {
  std::vector<std::string> out;
  const std::filesystem::path dir = source_path(relative_dir);
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".yaml") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// A test name from a file name: "ai-zone-128.yaml" -> "ai_zone_128".
std::string test_name(const testing::TestParamInfo<std::string>& info) {
  std::string s = std::filesystem::path(info.param).stem().string();
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

/// Runs tests/cli/check_results.py on a results file (with more arguments, if any).
CommandResult check_results(const std::string& results, const std::string& more = "") {
  return run_command(fmt::format("{} {} {} {}", ROCESIM_PYTHON,
                                 source_path("tests/cli/check_results.py"), results, more));
}

/// A temporary directory removed when the test ends.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) : path_(temp_dir(tag)) {}
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// ---- every example scenario ----

class ExampleScenario : public testing::TestWithParam<std::string> {};

TEST_P(ExampleScenario, RunsPrintsItsSummaryAndWritesReadableResults) {
  const std::string& scenario = GetParam();
  const TempDir dir("cli-scenario");
  const std::string results = dir / "results.h5";
  const CommandResult r = run_cli(fmt::format("run {} -o {}", scenario, results));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");

  // The summary names the scenario, its fabric and every workload, and the link tiers.
  const auto expected = scenario::load_scenario(scenario);
  EXPECT_THAT(r.out,
              HasSubstr(fmt::format("scenario {}  (seed {})", expected->name, expected->seed)));
  EXPECT_THAT(r.out, HasSubstr(expected->fabric.description()));
  for (const engine::WorkloadState& w : expected->sim->workloads())
    EXPECT_THAT(r.out, HasSubstr(w.workload->name()));
  EXPECT_THAT(r.out, HasSubstr("link tier"));
  EXPECT_THAT(r.out, HasSubstr("results written to " + results));

  const CommandResult check = check_results(results);
  EXPECT_EQ(check.exit_code, 0) << check.err << check.out;
}

TEST_P(ExampleScenario, ItsEffectiveScenarioRunsAgainAsItRan) {
  // results.h5 keeps the scenario with every default filled in (/meta.scenario, docs/output.md)
  // so that a run can be repeated from its results alone: run from that text, the scenario
  // must load, give itself again, and end every workload at the same instant with the same
  // flows and bytes. (A workload's own `nccl` section was once recorded with the table's
  // defaults instead of the scenario's values it inherits; an event's `count` was recorded on
  // events that may not have one.)
  const std::string& path = GetParam();
  const auto first = scenario::load_scenario(path);
  first->run();
  const auto again = scenario::load_scenario_text(
      first->effective_yaml, first->name, std::filesystem::path(path).parent_path().string());
  again->run();
  EXPECT_EQ(again->effective_yaml, first->effective_yaml);
  const auto& a = first->sim->workloads();
  const auto& b = again->sim->workloads();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i].workload->name(), a[i].workload->name());
    EXPECT_EQ(b[i].end, a[i].end) << a[i].workload->name();
    EXPECT_EQ(b[i].flows, a[i].flows) << a[i].workload->name();
    EXPECT_EQ(b[i].bytes, a[i].bytes) << a[i].workload->name();
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ExampleScenario, testing::ValuesIn(yaml_files("scenarios")),
                         test_name);

// ---- the README ----

TEST(Readme, TheScenarioRunsWhereItSaysToSaveIt) {
  // The YAML block after "A scenario" in README.md, saved as scenarios/my-study.yaml of a copy
  // of the layout (topologies/ beside scenarios/), runs; shrunk with --set to rings of 8 and
  // one QP so that the suite stays quick (the file as written takes a few seconds).
  const std::string readme = read_file(source_path("README.md"));
  const size_t at = readme.find("A scenario, saved as `scenarios/my-study.yaml`");
  ASSERT_NE(at, std::string::npos);
  const size_t begin = readme.find("```yaml\n", at) + 8;
  const size_t end = readme.find("```", begin);
  ASSERT_LT(begin, end);
  const TempDir dir("readme");
  std::filesystem::create_directories(dir / "scenarios");
  std::filesystem::create_directory_symlink(source_path("topologies"), dir / "topologies");
  std::ofstream(dir / "scenarios/my-study.yaml") << readme.substr(begin, end - begin);
  const CommandResult r =
      run_cli(fmt::format("run {} --no-output --set workloads[dp-allreduce].group_size=8 --set "
                          "workloads[dp-allreduce].qps_per_connection=1",
                          dir / "scenarios/my-study.yaml"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("scenario my-study"));
}

TEST(Docs, TheNcclTestsExampleIsWhatTheCommandPrints) {
  // docs/nccl-tests.md shows the output of one command: its size rows and average bus
  // bandwidth must be what that command prints now (they had drifted from the model).
  const std::string doc = read_file(source_path("docs/nccl-tests.md"));
  const size_t at = doc.find("$ rocesim nccl-tests --scenario scenarios/nccl_collectives.yaml");
  ASSERT_NE(at, std::string::npos);
  const size_t end = doc.find("```", at);
  ASSERT_NE(end, std::string::npos);
  const std::string shown = doc.substr(at, end - at);
  const CommandResult r = run_cli(
      fmt::format("nccl-tests --scenario {} --no-output all_reduce_perf -b 8 -e 256M -f 32 -n 1 "
                  "-w 0",
                  source_path("scenarios/nccl_collectives.yaml")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    while (!line.empty() && line.back() == ' ')
      line.pop_back();  // (nccl-tests pads its header lines)
    const bool row = !line.empty() && line.front() != '#';
    if (!row && line.rfind("# Avg bus bandwidth", 0) != 0) continue;
    rows += row ? 1 : 0;
    EXPECT_THAT(shown, HasSubstr(line + "\n")) << "not in docs/nccl-tests.md";
  }
  EXPECT_EQ(rows, 6);
}

TEST(Run, StartsOnceMoreForHugePagesWhereTheKernelGivesThemOnRequest) {
  // glibc reads GLIBC_TUNABLES when a process starts, so rocesim starts itself again with
  // glibc.malloc.hugetlb=1 where transparent huge pages are "madvise" (cli/main.cpp). The
  // dynamic loader's LD_DEBUG=libs says "initialize program" at each start: twice then, once
  // where the kernel has no such mode, in a sanitizer's build, or when the user set the tunable.
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(thp, modes);
  bool restarts = modes.find("[madvise]") != std::string::npos;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  restarts = false;
#endif
  const auto starts = [&](const char* env) {
    const CommandResult r = run_command(
        fmt::format("env -u GLIBC_TUNABLES {} LD_DEBUG=libs {} --version", env, cli_path()));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    size_t n = 0;
    for (size_t at = r.err.find("initialize program"); at != std::string::npos;
         at = r.err.find("initialize program", at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(starts(""), restarts ? 2u : 1u) << modes;
  EXPECT_EQ(starts("GLIBC_TUNABLES=glibc.malloc.hugetlb=0"), 1u);
}

TEST(Run, NotesATruncatedFlowTableOnlyWhenItWritesOne) {
  // results.h5 keeps output.max_flows flow records, and the summary says when it keeps fewer
  // than the run had; without a results file there is no table to speak of.
  const std::string scenario = source_path("scenarios/quickstart.yaml");
  const TempDir dir("truncated");
  const CommandResult written =
      run_cli(fmt::format("run {} -o {} --set output.max_flows=3", scenario, dir / "r.h5"));
  ASSERT_EQ(written.exit_code, 0) << written.err;
  EXPECT_THAT(written.out, HasSubstr("results.h5 keeps the first 3 of"));
  const CommandResult none =
      run_cli(fmt::format("run {} --no-output --set output.max_flows=3", scenario));
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_THAT(none.out, Not(HasSubstr("keeps the first")));
}

// ---- rocesim plot ----

TEST(Plot, DrawsTheTiersAndTheFlowsOfARunTheSameEachTimeBusBandwidthOfNcclTestsAndCongestion) {
  const TempDir dir("cli-plot");
  ASSERT_EQ(run_cli(fmt::format("run {} -q -o {}", source_path("scenarios/quickstart.yaml"),
                                dir / "q.h5"))
                .exit_code,
            0);
  const CommandResult a = run_cli(fmt::format("plot {} -o {}", dir / "q.h5", dir / "a"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, fmt::format("{}/links.png\n{}/fct.png\n", dir / "a", dir / "a"));
  ASSERT_EQ(run_cli(fmt::format("plot {} -o {}", dir / "q.h5", dir / "b")).exit_code, 0);
  for (const char* png : {"links.png", "fct.png"}) {
    const std::string bytes = read_file(dir / "a" + "/" + png);
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << png;
    EXPECT_EQ(bytes, read_file(dir / "b" + "/" + png)) << png;
  }
  ASSERT_EQ(run_cli(fmt::format("nccl-tests --scenario {} -o {} all_reduce_perf -b 8 -e 1M -f 8",
                                source_path("scenarios/nccl_collectives.yaml"), dir / "n.h5"))
                .exit_code,
            0);
  const CommandResult n = run_cli(fmt::format("plot {} -o {}", dir / "n.h5", dir / "n"));
  ASSERT_EQ(n.exit_code, 0) << n.err;
  EXPECT_THAT(n.out, HasSubstr("busbw.png"));
  EXPECT_THAT(a.out + n.out, Not(HasSubstr("congestion.png"))) << "max-min has no queues";
  // A run of the fluid model: its queues and pauses, the same each time.
  ASSERT_EQ(run_cli(fmt::format("run {} -q -o {}", source_path("scenarios/fluid_tcp_incast.yaml"),
                                dir / "f.h5"))
                .exit_code,
            0);
  for (const char* out : {"f1", "f2"}) {
    const CommandResult f = run_cli(fmt::format("plot {} -o {}", dir / "f.h5", dir / out));
    ASSERT_EQ(f.exit_code, 0) << f.err;
    EXPECT_THAT(f.out, HasSubstr(fmt::format("{}/congestion.png", dir / out)));
  }
  const std::string congestion = read_file(dir / "f1" + "/congestion.png");
  EXPECT_EQ(congestion.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(congestion, read_file(dir / "f2" + "/congestion.png"));
  // Not a results file: exit 2, nothing drawn.
  std::ofstream(dir / "bad.h5") << "not hdf5";
  const CommandResult bad = run_cli(fmt::format("plot {} -o {}", dir / "bad.h5", dir / "c"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("expected a results.h5 written by rocesim"));
  EXPECT_FALSE(std::filesystem::exists(dir / "c"));
}

// ---- rocesim nccl-tests ----

TEST(NcclTests, PrintsTheTableAndWritesItsRows) {
  // all_reduce_perf from 8 B to 128 MiB by factors of 4 on the example's 128 GPUs: 13 rows, the
  // "# Avg bus bandwidth" line, one "#  Rank" line per GPU; results.h5 holds the rows in
  // /tables/nccl_tests (checked by check_results.py: algbw = size / time).
  const TempDir dir("cli-nccl-tests");
  const CommandResult r = run_cli(
      fmt::format("nccl-tests --scenario {} -o {} all_reduce_perf -b 8 -e 128M -f 4 -n 2 -w 1",
                  source_path("scenarios/nccl_collectives.yaml"), dir / "results.h5"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("# Collective test starting: all_reduce_perf"));
  EXPECT_THAT(r.out, HasSubstr("# Avg bus bandwidth    : "));
  EXPECT_THAT(r.out, HasSubstr("#  Rank 127 Group  0"));
  EXPECT_THAT(r.out, HasSubstr("   134217728      33554432     float     sum      -1"));
  size_t rows = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] != '#') ++rows;
  }
  EXPECT_EQ(rows, 13u);
  const CommandResult check = check_results(dir / "results.h5");
  EXPECT_EQ(check.exit_code, 0) << check.err << check.out;
}

TEST(NcclTests, RunningOutOfMemoryIsSaidSo) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves more address space than the limit allows";
#endif
  // The 1,024-GPU AlltoAll peaks at about 300 MiB resident, beside the libraries' address
  // space; under a 300 MB limit on the address space the allocation that fails ends the run
  // with a message that says what happened, not a bare std::bad_alloc, and no table.
  const CommandResult r = run_command(
      fmt::format("ulimit -v 300000; {} nccl-tests --scenario {} alltoall_perf -b 1G -e 1G -n 1 "
                  "-w 0",
                  cli_path(), source_path("bench/scenarios/nccl_1024.yaml")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("error: out of memory"));
  EXPECT_THAT(r.out, Not(HasSubstr("1073741824")));
}

TEST(NcclTests, SettingsOnTheCommandLineOverTheScenarios) {
  // -x NCCL_ALGO=Ring forces rings where the tuner would pick a tree for 64 KiB: slower.
  const std::string scenario = source_path("scenarios/nccl_collectives.yaml");
  auto time_of = [&](const std::string& extra) {
    const CommandResult r = run_cli(fmt::format(
        "nccl-tests --scenario {} --no-output {} all_reduce_perf -b 64K -e 64K -n 1 -w 0", scenario,
        extra));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      std::string f;
      for (int i = 0; i < 6; ++i)
        fields >> f;
      return std::stod(f);
    }
    return 0.0;
  };
  EXPECT_GT(time_of("-x NCCL_ALGO=Ring"), time_of(""));
}

TEST(NcclTests, NcclDebugInfoLogsTheChannelsAndTheTunersChoices) {
  // -x NCCL_DEBUG=INFO prints NCCL's init line of the communicator as the model runs it: the
  // example's 16 servers x 8 GPUs with 8 x 400G NICs have 16 channels (two per NIC), no
  // CollNet, NVLS's 16 on Hopper, 16 p2p channels (16 is a power of two) and 1 p2p channel per
  // network peer (NCCL 2.22 to 2.28: 2 x 128 ranks > 4 x 16 channels, halved to 1; one NIC a
  // GPU). With NCCL_DEBUG_SUBSYS naming TUNING, one line per size before its row: the
  // algorithm, protocol and channels the row ran and NCCL's own estimate. The table's rows are
  // those of the run without the log.
  const std::string scenario = source_path("scenarios/nccl_collectives.yaml");
  const std::string test = "all_reduce_perf -b 8 -e 64M -f 64 -n 1 -w 0";
  // The table's rows (NCCL's log lines aside), or the lines that hold `needle`.
  auto lines = [](const std::string& out, const std::string& needle) {
    std::vector<std::string> v;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      const bool log = line.find("NCCL INFO") != std::string::npos;
      if (needle.empty() ? !line.empty() && line[0] != '#' && !log
                         : line.find(needle) != std::string::npos) {
        v.push_back(line);
      }
    }
    return v;
  };
  const CommandResult plain =
      run_cli(fmt::format("nccl-tests --scenario {} --no-output {}", scenario, test));
  const CommandResult info = run_cli(
      fmt::format("nccl-tests --scenario {} --no-output -x NCCL_DEBUG=INFO {}", scenario, test));
  const CommandResult tuning =
      run_cli(fmt::format("nccl-tests --scenario {} --no-output -x NCCL_DEBUG=info "
                          "-x NCCL_DEBUG_SUBSYS=INIT,TUNING {}",
                          scenario, test));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(info.exit_code, 0) << info.err;
  ASSERT_EQ(tuning.exit_code, 0) << tuning.err;
  const std::string init =
      "node0:0:0 [0] NCCL INFO 16 coll channels, 0 collnet channels, 16 nvls channels, 16 p2p "
      "channels, 1 p2p channels per peer";
  EXPECT_EQ(lines(info.out, "NCCL INFO"), std::vector<std::string>{init});
  EXPECT_EQ(lines(plain.out, "NCCL INFO").size(), 0u);
  EXPECT_THAT(info.out, Not(HasSubstr("NCCL_DEBUG")));  // read, so not listed as not modelled
  const std::vector<std::string> sizes = lines(tuning.out, "NCCL INFO AllReduce: ");
  ASSERT_EQ(sizes.size(), 4u);  // 8 B, 512 B, 32 KiB, 2 MiB
  EXPECT_THAT(sizes[0], HasSubstr("AllReduce: 8 Bytes -> Algo "));
  EXPECT_THAT(sizes[2], testing::MatchesRegex(".*AllReduce: 32768 Bytes -> Algo [A-Z_]+ proto "
                                              "(LL|LL128|SIMPLE) channels [0-9]+ time [0-9.]+"));
  // Each before its row, and the rows those of the run without the log.
  std::vector<std::string> order;
  for (const std::string& line : lines(tuning.out, " ")) {
    if (line[0] != '#') order.push_back(line);
  }
  ASSERT_EQ(order.size(), 9u);  // the init line, then each size's line and its row
  EXPECT_EQ(order[0], init);
  for (size_t i = 1; i < order.size(); i += 2) {
    EXPECT_THAT(order[i], HasSubstr("NCCL INFO AllReduce"));
    EXPECT_THAT(order[i + 1], Not(HasSubstr("NCCL INFO")));
  }
  const std::vector<std::string> table = lines(plain.out, "");
  ASSERT_EQ(table.size(), 4u);
  EXPECT_EQ(lines(info.out, ""), table);
  EXPECT_EQ(lines(tuning.out, ""), table);
  // NCCL_MAX_P2P_NCHANNELS and NCCL_MIN_P2P_NCHANNELS bound the p2p channels (4; 32, over
  // which a network peer still gets 1: 2 x 128 ranks > 4 x 32).
  for (const auto& [env, expected] :
       {std::pair{"NCCL_MAX_P2P_NCHANNELS=4", "4 p2p channels, 1 p2p channels per peer"},
        std::pair{"NCCL_MIN_P2P_NCHANNELS=32", "32 p2p channels, 1 p2p channels per peer"}}) {
    const CommandResult bounded = run_cli(fmt::format(
        "nccl-tests --scenario {} --no-output -x NCCL_DEBUG=INFO -x {} {}", scenario, env, test));
    ASSERT_EQ(bounded.exit_code, 0) << bounded.err;
    EXPECT_THAT(bounded.out, HasSubstr(std::string("16 nvls channels, ") + expected)) << env;
  }
  // ^INIT: every subsystem but INIT, so the sizes and no init line.
  const CommandResult no_init = run_cli(fmt::format(
      "nccl-tests --scenario {} --no-output -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=^INIT {}",
      scenario, test));
  ASSERT_EQ(no_init.exit_code, 0) << no_init.err;
  EXPECT_EQ(lines(no_init.out, "coll channels").size(), 0u);
  EXPECT_EQ(lines(no_init.out, "NCCL INFO AllReduce").size(), 4u);
}

TEST(NcclTests, NcclDebugInfoReportsTheEnvironmentAndValidateReadsItBack) {
  // NCCL reports each variable it reads from the environment (ENV, a default subsystem):
  // "NCCL_ALGO set by environment to Tree." The emulation prints the NCCL_* and RCCL_* it was
  // given the same way, and `validate` takes them back from the log: its rows run Tree, and
  // NCCL_IB_HCA is listed as not modelled.
  const TempDir dir("cli-info-env");
  const std::string scenario = source_path("validation/scenarios/aws-p4d-efa.yaml");
  const CommandResult r = run_cli(
      fmt::format("nccl-tests --scenario {} --no-output -x NCCL_DEBUG=INFO -x NCCL_ALGO=Tree -x "
                  "NCCL_IB_HCA=mlx5_0 all_reduce_perf -b 64K -e 1M -f 4",
                  scenario));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("NCCL INFO NCCL_ALGO set by environment to Tree.\n"));
  EXPECT_THAT(r.out, HasSubstr("NCCL INFO NCCL_IB_HCA set by environment to mlx5_0.\n"));
  const std::string log = dir / "run.log";
  std::ofstream(log) << r.out;
  const CommandResult v = run_cli(fmt::format(
      "validate --measured {} --scenario {} -o {} --no-plot", log, scenario, dir / "v"));
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_THAT(v.out, HasSubstr("NCCL settings applied: NCCL_ALGO=Tree"));
  EXPECT_THAT(v.out, HasSubstr("environment not modelled: NCCL_IB_HCA=mlx5_0"));
  std::ifstream csv(dir / "v/validation.csv");
  std::string line;
  std::getline(csv, line);  // the header
  int rows = 0;
  while (std::getline(csv, line)) {
    EXPECT_THAT(line, HasSubstr(",Tree,")) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 3);
  const CommandResult quiet = run_cli(fmt::format(
      "nccl-tests --scenario {} --no-output -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT -x "
      "NCCL_ALGO=Tree all_reduce_perf -b 64K -e 64K",
      scenario));
  EXPECT_THAT(quiet.out, Not(HasSubstr("set by environment")));
}

TEST(NcclTests, NcclDebugInfoMatchesNccl28sLogOnTwoP4dServers) {
  // NCCL 2.8.3's own log of all_reduce_perf on 2 AWS p4d.24xlarge (16 A100, 4 x 100G EFA a
  // server; the EFA-on-EKS guide of aws-samples): "8 coll channels, 8 p2p channels, 1 p2p
  // channels per peer". The development cluster's scenario (NCCL 2.8.3's tables) derives the
  // same: 4 NICs x 2 channels, 8 rounded up to a power of two, and 2.8's one channel a network
  // peer.
  const CommandResult r = run_cli(fmt::format(
      "nccl-tests --scenario {} --no-output -x NCCL_DEBUG=INFO all_reduce_perf -b 1M -e 1M -n 1 "
      "-w 0",
      source_path("validation/scenarios/aws-p4d-efa.yaml")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out,
              HasSubstr("NCCL INFO 8 coll channels, 8 p2p channels, 1 p2p channels per peer\n"));
}

TEST(NcclTests, NcclDebugInfoNamesTheSocketNetworkAndItsThreads) {
  // NCCL over sockets logs "Using network Socket" and, with helper threads, its socket plugin's
  // "NET/Socket: Using 2 threads and 4 sockets per thread" (net_socket.cc); NCCL's IB
  // transport prints neither.
  const std::string scenario = source_path("validation/scenarios/aws-p4d-efa.yaml");
  const std::string args = "-x NCCL_DEBUG=INFO all_reduce_perf -b 1M -e 1M -n 1 -w 0";
  const CommandResult s = run_cli(fmt::format(
      "nccl-tests --scenario {} --no-output -x NCCL_NET=Socket -x NCCL_SOCKET_NTHREADS=2 -x "
      "NCCL_NSOCKS_PERTHREAD=4 {}",
      scenario, args));
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_THAT(s.out, HasSubstr("NCCL INFO Using network Socket\n"));
  EXPECT_THAT(s.out, HasSubstr("NCCL INFO NET/Socket: Using 2 threads and 4 sockets per thread\n"));
  const CommandResult ib =
      run_cli(fmt::format("nccl-tests --scenario {} --no-output {}", scenario, args));
  ASSERT_EQ(ib.exit_code, 0) << ib.err;
  EXPECT_EQ(ib.out.find("Socket"), std::string::npos);
}

TEST(NcclTests, BadArgumentsExitTwoAndWriteNothing) {
  const TempDir dir("cli-nccl-tests-bad");
  const std::string scenario = source_path("scenarios/nccl_collectives.yaml");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"all_reduce_perf -b 8X", "'-b': expected a size in bytes"},
      {"allreduce -b 8", "'test': expected an nccl-tests benchmark"},
      {"-x NCCL_ALGO=Rings all_reduce_perf", "'nccl.NCCL_ALGO': expected a list of Ring, Tree"},
      {"--ranks 129 all_reduce_perf", "'--ranks': expected 1 to 128"},
      {"broadcast_perf -r 128", "'-r': expected a rank below 128"},
  };
  for (const auto& [args, message] : cases) {
    const CommandResult r = run_cli(
        fmt::format("nccl-tests --scenario {} -o {} {}", scenario, dir / "results.h5", args));
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_THAT(r.err, HasSubstr(message)) << args;
    EXPECT_EQ(r.out, "") << args;
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// ---- rocesim validate ----

struct ValidationCase {
  const char* scenario;  // validation/scenarios/<scenario>.yaml
  const char* dataset;   // validation/data/measured/<dataset>.yaml
};

class Validate : public testing::TestWithParam<ValidationCase> {};

/// What a successful `rocesim validate` run prints and writes into `dir`: the band summary, one
/// CSV line per measured row of `log` (and the header), the plot, the band table and a valid
/// validation.h5.
void expect_validation_outputs(const CommandResult& r, const validation::NcclTestsLog& log,
                               const std::string& dir) {
  EXPECT_THAT(r.out, HasSubstr("Absolute relative errors per size band"));
  size_t measured = 0;
  for (const validation::NcclTestsTable& t : log.tables)
    measured += t.rows.size();
  size_t lines = 0;
  std::istringstream csv(read_file(dir + "/validation.csv"));
  for (std::string line; std::getline(csv, line);)
    ++lines;
  EXPECT_EQ(lines, measured + 1);  // and the header
  EXPECT_GT(std::filesystem::file_size(dir + "/validation.png"), 10000u);
  EXPECT_TRUE(std::filesystem::exists(dir + "/validation_bands.csv"));
  const CommandResult check = check_results(dir + "/validation.h5", "--tables-only");
  EXPECT_EQ(check.exit_code, 0) << check.err << check.out;
}

TEST_P(Validate, EveryDevelopmentDatasetOnItsClustersScenario) {
  // One CSV row per measured row, the band summary, the HDF5 tables and the plot.
  const ValidationCase v = GetParam();
  const std::string dataset =
      source_path(fmt::format("validation/data/measured/{}.yaml", v.dataset));
  const TempDir dir("cli-validate");
  const CommandResult r = run_cli(fmt::format(
      "validate --measured {} --scenario {} -o {}", dataset,
      source_path(fmt::format("validation/scenarios/{}.yaml", v.scenario)), dir.path()));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr("all tables"));
  expect_validation_outputs(r, validation::read_measured_dataset(dataset), dir.path());
}

INSTANTIATE_TEST_SUITE_P(
    Datasets, Validate,
    testing::Values(ValidationCase{"h100-ib-400g", "nvidia_nccl-tests_issue309_h100_ib_2-8nodes"},
                    ValidationCase{"aws-p4d-efa", "aws_p4d_efa_a100_2node_allreduce"},
                    ValidationCase{"abci-a100-sharp", "abci_a100_ib_sharp_2node_allreduce"},
                    ValidationCase{"h200-one-gpu", "rocesim-bench_h200_1gpu"}),
    [](const auto& p) {
      std::string s = p.param.scenario;
      std::replace(s.begin(), s.end(), '-', '_');
      return s;
    });

// A dataset that mixes clusters (the AMD Accelerator Cloud file holds MI300X, MI325X and MI355X
// tables): each cluster's scenario is validated on its own tables, copied verbatim into a
// dataset of their own.

/// Writes `path`: the head of a measured dataset (up to `tables:`) and, as written, the blocks of
/// the tables whose names start with one of `prefixes`. Returns how many tables it kept.
size_t write_cluster_tables(const std::string& dataset, const std::vector<std::string>& prefixes,
                            const std::string& path) {
  const std::string text =
      read_file(source_path(fmt::format("validation/data/measured/{}.yaml", dataset)));
  const size_t first = text.find("\n- name: ");
  if (first == std::string::npos) return 0;
  std::string subset = text.substr(0, first + 1);
  size_t kept = 0;
  for (size_t at = first + 1; at < text.size();) {
    const size_t next = std::min(text.find("\n- name: ", at), text.size());
    const std::string block = text.substr(at, next + 1 - at);
    for (const std::string& prefix : prefixes) {
      if (block.rfind("- name: " + prefix, 0) == 0) {
        subset += block;
        ++kept;
        break;
      }
    }
    at = next + 1;
  }
  std::ofstream(path) << subset;
  return kept;
}

struct ClusterCase {
  const char* scenario;             // validation/scenarios/<scenario>.yaml
  const char* dataset;              // validation/data/measured/<dataset>.yaml
  std::vector<std::string> tables;  // name prefixes of this cluster's tables
  size_t table_count;               // how many tables they select
};

class ValidateCluster : public testing::TestWithParam<ClusterCase> {};

TEST_P(ValidateCluster, ItsTablesOfAMixedDatasetOnItsScenario) {
  const ClusterCase& c = GetParam();
  const TempDir dir("cli-validate-cluster");
  const std::string dataset = dir / "measured.yaml";
  ASSERT_EQ(write_cluster_tables(c.dataset, c.tables, dataset), c.table_count);

  const CommandResult r = run_cli(fmt::format(
      "validate --measured {} --scenario {} -o {}", dataset,
      source_path(fmt::format("validation/scenarios/{}.yaml", c.scenario)), dir / "out"));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const validation::NcclTestsLog log = validation::read_measured_dataset(dataset);
  EXPECT_EQ(log.tables.size(), c.table_count);
  expect_validation_outputs(r, log, dir / "out");
}

const std::vector<ClusterCase> kAmdClusters = {
    {"amd-mi300x-roce",
     "amd_aac_mi300x_mi325x_mi355x_rccl_allreduce",
     {"aac8_mi300x_", "aac10_mi300x_"},
     2},
    {"amd-mi325x-roce", "amd_aac_mi300x_mi325x_mi355x_rccl_allreduce", {"aac11_mi325x_"}, 4},
    {"amd-mi355x-pollara", "amd_aac_mi300x_mi325x_mi355x_rccl_allreduce", {"aac14_mi355x_"}, 1},
};

INSTANTIATE_TEST_SUITE_P(Clusters, ValidateCluster, testing::ValuesIn(kAmdClusters),
                         [](const auto& p) {
                           std::string s = p.param.scenario;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

TEST(ValidateClusters, EveryTableOfTheMixedDatasetHasItsScenario) {
  // The clusters' table selections together cover the whole AMD file.
  size_t selected = 0;
  for (const ClusterCase& c : kAmdClusters)
    selected += c.table_count;
  EXPECT_EQ(selected, validation::read_measured_dataset(
                          source_path("validation/data/measured/"
                                      "amd_aac_mi300x_mi325x_mi355x_rccl_allreduce.yaml"))
                          .tables.size());
}

TEST(ValidateErrors, ATableWithMoreRanksThanTheJobIsALocatedError) {
  // The H100 dataset has tables of 32 and 64 ranks; the AWS scenario's job has 16 GPUs: exit 2,
  // at the first table's total_ranks in the dataset, nothing written.
  const TempDir dir("cli-validate-bad");
  const std::string out = dir / "out";
  const CommandResult r = run_cli(fmt::format(
      "validate --measured {} --scenario {} -o {} --no-plot",
      source_path("validation/data/measured/nvidia_nccl-tests_issue309_h100_ib_2-8nodes.yaml"),
      source_path("validation/scenarios/aws-p4d-efa.yaml"), out));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("nvidia_nccl-tests_issue309_h100_ib_2-8nodes.yaml:110:16: "
                               "error: 'total_ranks': expected a table measured on at most the "
                               "16 ranks"));
  EXPECT_FALSE(std::filesystem::exists(out));
  // A bad value in a table's env: at that value (it was the table's first line).
  std::string text;
  {
    std::ifstream in(source_path("validation/data/measured/rocesim-bench_h200_1gpu.yaml"));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::string anchor = "    env:\n";
  const size_t at = text.find(anchor);
  ASSERT_NE(at, std::string::npos);
  text.insert(at + anchor.size(), "      NCCL_ALGO: Rings\n");
  const int line = 2 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
  const std::string bad_env = dir / "env.yaml";
  std::ofstream(bad_env) << text;
  const CommandResult env =
      run_cli(fmt::format("validate --measured {} --scenario {} -o {} --no-plot", bad_env,
                          source_path("validation/scenarios/h200-one-gpu.yaml"), out));
  EXPECT_EQ(env.exit_code, 2);
  EXPECT_THAT(env.err, HasSubstr(fmt::format("env.yaml:{}:18: error: 'env.NCCL_ALGO'", line)));
  const CommandResult missing =
      run_cli(fmt::format("validate --measured {} --scenario {}", dir / "nothing-here",
                          source_path("validation/scenarios/aws-p4d-efa.yaml")));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("'--measured'"));
}

TEST(ValidateErrors, ADirectoryWithOneBadFileWritesTheRestAndExitsTwo) {
  // One good dataset and one log with an impossible row: the dataset is validated and written
  // out completely, the log is reported at its row, and the exit status says something was bad.
  const TempDir dir("cli-validate-dir");
  const std::string measured = dir / "measured", out = dir / "out";
  std::filesystem::create_directory(measured);
  const std::string dataset =
      source_path("validation/data/measured/aws_p4d_efa_a100_2node_allreduce.yaml");
  std::filesystem::copy_file(dataset, measured + "/a.yaml");
  const std::string bad_row =
      "     1048576        262144   float     sum   -483.5    2.17    4.07  5e-07    483.6    "
      "2.17    4.07  5e-07";
  std::ofstream(measured + "/b.log") << "+ mpirun -np 16 ./build/all_reduce_perf -b 1M -e 1M\n"
                                     << bad_row << "\n";

  const CommandResult r =
      run_cli(fmt::format("validate --measured {} --scenario {} -o {} --no-plot", measured,
                          source_path("validation/scenarios/aws-p4d-efa.yaml"), out));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr(fmt::format("{}/b.log:2:{}: error: expected a positive number "
                                           "(out-of-place time in us), found '-483.5'",
                                           measured, bad_row.find("-483.5") + 1)));
  EXPECT_THAT(r.err, HasSubstr("error: 1 of 2 measured files left out"));
  EXPECT_THAT(r.out, HasSubstr("Absolute relative errors per size band"));
  EXPECT_THAT(r.out, testing::Not(HasSubstr("b.log")));
  // Every row of the good file, and only the three outputs (no temporary file left behind).
  size_t measured_rows = 0;
  for (const validation::NcclTestsTable& t : validation::read_measured_dataset(dataset).tables)
    measured_rows += t.rows.size();
  size_t lines = 0;
  std::istringstream csv(read_file(out + "/validation.csv"));
  for (std::string line; std::getline(csv, line);)
    ++lines;
  EXPECT_EQ(lines, measured_rows + 1);
  std::vector<std::string> written;
  for (const auto& e : std::filesystem::directory_iterator(out))
    written.push_back(e.path().filename().string());
  std::sort(written.begin(), written.end());
  EXPECT_EQ(written,
            (std::vector<std::string>{"validation.csv", "validation.h5", "validation_bands.csv"}));
  const CommandResult check = check_results(out + "/validation.h5", "--tables-only");
  EXPECT_EQ(check.exit_code, 0) << check.err << check.out;
}

// ---- rocesim calibrate fit ----

TEST(CalibrateFit, FitsTheDevelopmentDataAndFeedsValidate) {
  // The loop a user runs: fit on the measured 2- and 4-node tables, hold out the 8-node ones,
  // then validate with the calibration file. The fit must lower the training cost, write a
  // calibration file a scenario reads, report the held-out rows, and validate must simulate with
  // the fitted values (echoed into validation.h5).
  const TempDir dir("cli-calibrate");
  const std::string measured =
      source_path("validation/data/measured/nvidia_nccl-tests_issue309_h100_ib_2-8nodes.yaml");
  const std::string scenario = source_path("validation/scenarios/h100-ib-400g.yaml");
  const std::string cal = dir / "calibration.yaml", res = dir / "residuals.csv";
  const CommandResult r = run_cli(fmt::format(
      "calibrate fit --measured {} --scenario {} -o {} --residuals {} --train nodes=2..4 "
      "--threads 2",
      measured, scenario, cal, res));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("topology.node.nic_efficiency"));
  EXPECT_THAT(r.out, HasSubstr("test   all"));
  ASSERT_TRUE(std::filesystem::exists(cal));
  const std::vector<scenario::ParamOverride> values = scenario::read_calibration_file(cal);
  EXPECT_EQ(values.size(), 5u);
  std::ifstream rin(res);
  const std::string header((std::istreambuf_iterator<char>(rin)), {});
  EXPECT_THAT(header, testing::StartsWith("set,source,table,collective,nranks,size_bytes"));
  EXPECT_THAT(header, HasSubstr("\ntest,"));

  const std::string out = dir / "val";
  const CommandResult v =
      run_cli(fmt::format("validate --measured {} --scenario {} --calibration {} -o {} --no-plot",
                          measured, scenario, cal, out));
  ASSERT_EQ(v.exit_code, 0) << v.err;
  const CommandResult h5 = run_command(fmt::format(
      "{} -c \"import h5py; print(h5py.File('{}')['meta'].attrs['calibration'].decode())\"",
      ROCESIM_PYTHON, out + "/validation.h5"));
  ASSERT_EQ(h5.exit_code, 0) << h5.err;
  EXPECT_THAT(h5.out, HasSubstr("topology.node.nic_efficiency: "));
  EXPECT_THAT(h5.out, HasSubstr("calibration.yaml:"));
}

TEST(CalibrateFit, OnAnXgmiMeshTheDefaultsFitTheXgmiEfficiency) {
  // An MI355X cluster (`scale_up: mesh`) has no NVLink: the default parameters fit
  // topology.node.xgmi_efficiency where an NVSwitch server fits nvlink_efficiency.
  const TempDir dir("cli-calibrate-mesh");
  const std::string measured = dir / "measured.yaml", cal = dir / "calibration.yaml";
  ASSERT_EQ(write_cluster_tables("amd_aac_mi300x_mi325x_mi355x_rccl_allreduce", {"aac14_mi355x_"},
                                 measured),
            1u);
  const CommandResult r =
      run_cli(fmt::format("calibrate fit --measured {} --scenario {} -o {} --threads 2", measured,
                          source_path("validation/scenarios/amd-mi355x-pollara.yaml"), cal));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("topology.node.xgmi_efficiency"));
  EXPECT_THAT(r.out, testing::Not(HasSubstr("nvlink_efficiency")));
  const std::vector<scenario::ParamOverride> values = scenario::read_calibration_file(cal);
  ASSERT_EQ(values.size(), 5u);
  EXPECT_EQ(values[1].path, "topology.node.xgmi_efficiency");
}

/// Median |time error| of the rows of 64 MiB and more in a validation.csv.
double large_message_median_error(const std::string& csv_path) {
  std::istringstream csv(read_file(csv_path));
  std::string line;
  std::getline(csv, line);  // header: ..., size_bytes [B] (5th), ..., time_error (9th), ...
  std::vector<double> errors;
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, ',');)
      f.push_back(x);
    if (f.size() > 8 && std::stoll(f[4]) >= (int64_t{64} << 20)) {
      errors.push_back(std::abs(std::stod(f[8])));
    }
  }
  return errors.empty() ? -1 : validation::percentile(errors, 0.5);
}

TEST(Fidelity, TheDevelopmentSetKeepsItsDocumentedErrors) {
  // The six development clusters of docs/validation.md, uncalibrated, their rows pooled: the
  // median |time error| per size band and the 90th percentile from 64 MiB may not grow beyond
  // the figures that page gives ("all six clusters, now": 11.9% under 1 MiB, 15.2% from 1 to
  // 64 MiB, 2.7% / 11.8% from 64 MiB) by more than half a point; from 64 MiB the median and the
  // 90th percentile also meet issue 8's targets of 5% and 12%. A change that moves them updates
  // that table and this test. From 64 MiB each table is also held against the line-rate roofline
  // (below).
  struct Cluster {
    const char* scenario;
    const char* dataset;
    const char* tables;  // --tables, or empty
  };
  const Cluster clusters[] = {
      {"h100-ib-400g", "nvidia_nccl-tests_issue309_h100_ib_2-8nodes", ""},
      {"aws-p4d-efa", "aws_p4d_efa_a100_2node_allreduce", ""},
      {"abci-a100-sharp", "abci_a100_ib_sharp_2node_allreduce", ""},
      {"amd-mi300x-roce", "amd_aac_mi300x_mi325x_mi355x_rccl_allreduce", "aac8_,aac10_"},
      {"amd-mi325x-roce", "amd_aac_mi300x_mi325x_mi355x_rccl_allreduce", "aac11_"},
      {"amd-mi355x-pollara", "amd_aac_mi300x_mi325x_mi355x_rccl_allreduce", "aac14_"},
  };
  const TempDir dir("cli-fidelity");
  std::map<std::string, std::vector<double>> bands;  // band -> |time error| of its rows
  // Per table, from 64 MiB: |time error| of the simulation and of the line-rate roofline.
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> large;
  std::vector<std::string> slower;  // "table size" of rows flagged slower_than_next
  size_t rows = 0;
  for (const Cluster& c : clusters) {
    const std::string out = dir / c.scenario;
    const CommandResult r =
        run_cli(fmt::format("validate --no-plot --measured {} --scenario {} -o {}{}",
                            source_path(fmt::format("validation/data/measured/{}.yaml", c.dataset)),
                            source_path(fmt::format("validation/scenarios/{}.yaml", c.scenario)),
                            out, *c.tables != 0 ? fmt::format(" --tables {}", c.tables) : ""));
    ASSERT_EQ(r.exit_code, 0) << c.scenario << r.err;
    std::istringstream csv(read_file(out + "/validation.csv"));
    std::string line;
    std::getline(csv, line);  // header: ..., band (6th), ..., time_error (9th), ...
    while (std::getline(csv, line)) {
      std::vector<std::string> f;
      std::istringstream fields(line);
      for (std::string x; std::getline(fields, x, ',');)
        f.push_back(x);
      ASSERT_GT(f.size(), 19u) << line;  // ..., roofline_error (19th), slower_than_next
      bands[f[5]].push_back(std::abs(std::stod(f[8])));
      if (f[5] == ">=64MiB") {
        large[f[1]].first.push_back(std::abs(std::stod(f[8])));
        large[f[1]].second.push_back(std::abs(std::stod(f[18])));
      }
      if (f[19] == "1") slower.push_back(f[1] + " " + f[4]);
      ++rows;
    }
  }
  EXPECT_EQ(rows, 297u);
  const auto median = [&](const char* band) { return validation::percentile(bands[band], 0.5); };
  EXPECT_LE(median("<1MiB"), 0.119 + 0.005);
  EXPECT_LE(median("1-64MiB"), 0.152 + 0.005);
  EXPECT_LE(median(">=64MiB"), 0.05);
  EXPECT_LE(median(">=64MiB"), 0.027 + 0.005);
  EXPECT_LE(validation::percentile(bands[">=64MiB"], 0.9), 0.12);
  EXPECT_LE(validation::percentile(bands[">=64MiB"], 0.9), 0.118 + 0.005);
  // Issue 8: every table beats the line-rate roofline from 64 MiB (its median |time error| is
  // below the roofline's). 14 of the 16 tables with such rows do; docs/validation.md names the
  // two that do not (SHARP's 2 servers, 4.1% against 3.7%; gj-aion's forced rings, 6.4% against
  // 4.5%), and no other may join them.
  std::vector<std::string> behind;
  for (const auto& [table, errors] : large) {
    if (validation::percentile(errors.first, 0.5) >= validation::percentile(errors.second, 0.5)) {
      behind.push_back(table);
    }
  }
  EXPECT_EQ(large.size(), 16u);
  EXPECT_THAT(behind,
              testing::IsSubsetOf({"a100_2node_ib_sharp", "gjaion_2node_ring_minctas24_qps2"}));
  // Issue 8: no size simulated slower than the next larger one unless NCCL's model says so;
  // docs/validation.md explains the five rows that are (EFA's 64 KiB ring; its 512 KiB tree,
  // before a ring that the simulation runs too fast, as every EFA ring; RCCL's 32 B ring
  // before its MSCCL at 64 B; RCCL's last Tree/LL sizes before its LL128, which the simulation
  // runs too fast, on 2 MI355X and 2 MI300X servers), and no other may join them.
  EXPECT_THAT(slower, testing::IsSubsetOf({"a100_p4d_2node_efa 65536", "a100_p4d_2node_efa 524288",
                                           "aac8_mi300x_1node_INTRA 32",
                                           "aac14_mi355x_pollara400_2node 65536",
                                           "aac10_mi300x_2node 1048576"}));
}

TEST(CalibrateFit, AFitOnOneClusterCarriesOverToAnotherWithTheSameGpus) {
  // Calibrated parameters belong to parts: the xGMI efficiency fitted on one MI300X server
  // (AAC8) describes the MI300X platform's links, which the MI325X platform shares (AAC11). Both
  // scenarios start from a wrong link figure, 0.9 of 64 GB/s (57.6 GB/s, above every measured
  // link): the fit on the MI300X server brings it back near the 45.1-47.2 GB/s TransferBench
  // measures (0.70-0.74), and the MI325X server's large-message error, many percent with 0.9,
  // falls to a few with the MI300X calibration.
  const TempDir dir("cli-calibrate-transfer");
  const std::string mi300x = dir / "mi300x.yaml", mi325x = dir / "mi325x.yaml",
                    cal = dir / "calibration.yaml";
  const std::string dataset = "amd_aac_mi300x_mi325x_mi355x_rccl_allreduce";
  ASSERT_EQ(write_cluster_tables(dataset, {"aac8_mi300x_"}, mi300x), 1u);
  ASSERT_EQ(write_cluster_tables(dataset, {"aac11_mi325x_1node"}, mi325x), 1u);
  const auto wrong_links = [&](const std::string& name) {
    std::string text = read_file(source_path("validation/scenarios/" + name));
    const std::string node = "    transport: roce\n";
    const auto at = text.find(node);
    EXPECT_NE(at, std::string::npos) << name;
    text.insert(at + node.size(), "    xgmi_efficiency: 0.9\n");
    const std::string path = dir / name;
    std::ofstream(path) << text;
    return path;
  };
  const std::string mi300x_scenario = wrong_links("amd-mi300x-roce.yaml");
  const std::string mi325x_scenario = wrong_links("amd-mi325x-roce.yaml");
  const CommandResult fit = run_cli(fmt::format(
      "calibrate fit --measured {} --scenario {} -o {} --param topology.node.xgmi_efficiency",
      mi300x, mi300x_scenario, cal));
  ASSERT_EQ(fit.exit_code, 0) << fit.err;
  const auto fitted = scenario::read_calibration_file(cal);
  ASSERT_EQ(fitted.size(), 1u);
  const double xgmi = std::stod(fitted.front().value.value());
  EXPECT_GT(xgmi, 0.68);
  EXPECT_LT(xgmi, 0.76);
  const CommandResult nominal =
      run_cli(fmt::format("validate --no-plot --measured {} --scenario {} -o {}", mi325x,
                          mi325x_scenario, dir / "nominal"));
  const CommandResult calibrated =
      run_cli(fmt::format("validate --no-plot --measured {} --scenario {} --calibration {} -o {}",
                          mi325x, mi325x_scenario, cal, dir / "calibrated"));
  ASSERT_EQ(nominal.exit_code, 0) << nominal.err;
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.err;
  const double before = large_message_median_error(dir / "nominal/validation.csv");
  const double after = large_message_median_error(dir / "calibrated/validation.csv");
  ASSERT_GE(before, 0);
  EXPECT_GT(before, 0.15);
  EXPECT_LT(after, 0.03) << "nominal " << before << ", with the MI300X calibration " << after;
}

TEST(CalibrateFit, ANicProbeFixesTheNicSpeedEfficiencyAndPcieLatency) {
  // The sample probe (ConnectX-7, RoCE 400G) measures 387.9 Gb/s achievable RDMA WRITE
  // bandwidth, 387.9 / 400 = 0.970 of the line rate; RoCEv2 framing at its 4096-byte MTU leaves
  // 4096 / 4178 of it for payload, which the scenario applies itself, so the NIC's own
  // efficiency is 0.970 / 0.98037 = 0.989. Its port runs at 400 Gb/s, and its zero-byte write
  // takes L one way (the latency fit's intercept), half of it per crossing of the PCIe path.
  // All three are fixed while the launch factor is fitted.
  const TempDir dir("cli-calibrate-probe");
  const std::string cal = dir / "calibration.yaml";
  const CommandResult r = run_cli(
      fmt::format("calibrate fit --measured {} --scenario {} -o {} --nicprobe {} --param "
                  "nccl.base_latency_factor",
                  source_path("validation/data/measured/aws_p4d_efa_a100_2node_allreduce.yaml"),
                  source_path("validation/scenarios/aws-p4d-efa.yaml"), cal,
                  source_path("tests/calibrate/nicprobe/cx7_roce_400g.yaml")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("387.9 Gb/s achievable"));
  const calibrate::NicProbeReport probe =
      calibrate::read_nicprobe_report(source_path("tests/calibrate/nicprobe/cx7_roce_400g.yaml"));
  ASSERT_TRUE(probe.loopback.at(0).fit && probe.loopback.at(0).fit->latency_us);
  const double one_way_us = *probe.loopback.at(0).fit->latency_us;
  const std::vector<scenario::ParamOverride> values = scenario::read_calibration_file(cal);
  ASSERT_EQ(values.size(), 4u);
  EXPECT_EQ(values[0].path, "topology.node.nic_speed");
  EXPECT_EQ(values[0].value.value(), "400Gbps");
  EXPECT_EQ(values[1].path, "topology.node.nic_efficiency");
  EXPECT_NEAR(std::stod(values[1].value.value()), 387.9 / 400 / (4096.0 / 4178), 2e-3);
  EXPECT_EQ(values[2].path, "topology.node.pcie_latency");
  EXPECT_NEAR(std::stod(values[2].value.value()), one_way_us / 2 * 1e3, 1e-3);
  EXPECT_GT(one_way_us, 1.5);  // the sample's small writes: 1.58 us one way
  EXPECT_EQ(values[3].path, "nccl.base_latency_factor");
}

TEST(CalibrateFit, BadInputIsALocatedErrorAndWritesNothing) {
  const TempDir dir("cli-calibrate-bad");
  const std::string cal = dir / "calibration.yaml";
  const std::string scenario = source_path("validation/scenarios/aws-p4d-efa.yaml");
  // A malformed row in a log: its file and line.
  const std::string log = dir / "bad.log";
  std::ofstream(log) << "#       size         count      type   redop    root     time   algbw   "
                        "busbw #wrong     time   algbw   busbw #wrong\n"
                        "           8             2     float     sum      -1    12.3    "
                        "0.00    0.00      0    twelve    0.00    0.00      0\n";
  const CommandResult bad_log =
      run_cli(fmt::format("calibrate fit --measured {} --scenario {} -o {}", log, scenario, cal));
  EXPECT_EQ(bad_log.exit_code, 2);
  EXPECT_THAT(bad_log.err, HasSubstr("bad.log:2:"));
  // An unknown parameter, a bad selection.
  const std::string measured =
      source_path("validation/data/measured/aws_p4d_efa_a100_2node_allreduce.yaml");
  const CommandResult bad_param = run_cli(
      fmt::format("calibrate fit --measured {} --scenario {} -o {} --param nccl.NCCL_NET_OVERHEED",
                  measured, scenario, cal));
  EXPECT_EQ(bad_param.exit_code, 2);
  EXPECT_THAT(bad_param.err, HasSubstr("NCCL_NET_OVERHEED"));
  const CommandResult bad_sel =
      run_cli(fmt::format("calibrate fit --measured {} --scenario {} -o {} --train size=1XB..",
                          measured, scenario, cal));
  EXPECT_EQ(bad_sel.exit_code, 2);
  EXPECT_THAT(bad_sel.err, HasSubstr("'--train'"));
  EXPECT_FALSE(std::filesystem::exists(cal));
}

// ---- every ready topology ----

class ReadyTopology : public testing::TestWithParam<std::string> {};

TEST_P(ReadyTopology, IsDescribedByTopo) {
  const std::string& file = GetParam();
  const CommandResult r = run_cli("topo " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const fabric::Fabric f = scenario::load_topology(file);
  EXPECT_THAT(r.out, HasSubstr(f.description()));
  EXPECT_THAT(r.out, HasSubstr(fmt::format("{} GPUs", f.gpu_count())));
  EXPECT_THAT(r.out, HasSubstr("bisection bandwidth"));
}

INSTANTIATE_TEST_SUITE_P(Topologies, ReadyTopology, testing::ValuesIn(yaml_files("topologies")),
                         test_name);

TEST(Topo, AcceptsAScenarioFileAndDescribesItsTopology) {
  const std::string quickstart = source_path("scenarios/quickstart.yaml");
  const CommandResult r = run_cli("topo " + quickstart);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(scenario::load_topology(quickstart).description()));
}

// ---- determinism ----

TEST(Determinism, SameSeedSameBytesWhateverTheThreadCount) {
  // The principle (docs/architecture.md): same scenario and seed, same bytes of output. Run the
  // quickstart with 1 thread twice and with 2 threads.
  const std::string quickstart = source_path("scenarios/quickstart.yaml");
  const TempDir dir("cli-determinism");
  for (const auto& [name, threads] : {std::pair{"a.h5", 1}, {"b.h5", 1}, {"c.h5", 2}}) {
    const CommandResult r =
        run_cli(fmt::format("run {} -q --threads {} -o {}", quickstart, threads, dir / name));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const std::string a = read_file(dir / "a.h5");
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == read_file(dir / "b.h5")) << "two runs with --threads 1 differ";
  EXPECT_TRUE(a == read_file(dir / "c.h5")) << "--threads 1 and --threads 2 differ";
}

TEST(Determinism, AnotherSeedChangesTheQpsAndFlows) {
  // The seed draws QP numbers and UDP source ports, hence ECMP paths and flow timings, and the
  // random permutation of the quickstart.
  const std::string quickstart = source_path("scenarios/quickstart.yaml");
  const TempDir dir("cli-seed");
  for (const auto& [name, seed] : {std::pair{"one.h5", 1}, {"two.h5", 2}}) {
    const CommandResult r =
        run_cli(fmt::format("run {} -q --seed {} -o {}", quickstart, seed, dir / name));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const CommandResult check = check_results(dir / "two.h5", "--differs-from " + (dir / "one.h5"));
  EXPECT_EQ(check.exit_code, 0) << check.err << check.out;
}

TEST(Determinism, TheResultsCheckerNoticesIdenticalFiles) {
  // check_results.py --differs-from must fail on a file compared with itself, or the test above
  // would prove nothing.
  const TempDir dir("cli-seed-self");
  const std::string results = dir / "one.h5";
  ASSERT_EQ(
      run_cli(fmt::format("run {} -q -o {}", source_path("scenarios/quickstart.yaml"), results))
          .exit_code,
      0);
  EXPECT_NE(check_results(results, "--differs-from " + results).exit_code, 0);
}

// ---- output files ----

TEST(Output, NoOutputWritesNothing) {
  const TempDir dir("cli-no-output");
  const CommandResult r =
      run_command(fmt::format("cd {} && {} run {} --no-output", dir.path(), cli_path(),
                              source_path("scenarios/quickstart.yaml")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("scenario quickstart"));
  EXPECT_THAT(r.out, testing::Not(HasSubstr("results written")));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(Output, QuietPrintsNothing) {
  const TempDir dir("cli-quiet");
  const CommandResult r = run_cli(
      fmt::format("run {} -q -o {}", source_path("scenarios/quickstart.yaml"), dir / "results.h5"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(std::filesystem::exists(dir / "results.h5"));
}

TEST(Output, AMissingOutputDirectoryIsRefusedBeforeTheRun) {
  // The output directory does not exist: an input error on the command line (exit 2), found
  // before anything is simulated, nothing written.
  const TempDir dir("cli-unwritable");
  const CommandResult r = run_cli(fmt::format(
      "run {} -q -o {}", source_path("scenarios/quickstart.yaml"), dir / "missing/results.h5"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("whose directory"));
  EXPECT_THAT(r.err, HasSubstr("error: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(Output, ResultsAreNeverWrittenOverAFileThatIsNotHdf5) {
  // `-o` naming the scenario itself (or a CSV of flows, a topology: any file that is not HDF5)
  // is an input error before the run, and the file is left as it was; an HDF5 file is replaced.
  const TempDir dir("cli-overwrite");
  const std::string scenario = dir / "s.yaml";
  std::filesystem::copy_file(source_path("scenarios/fluid_tcp_incast.yaml"), scenario);
  const std::string text = read_file(scenario);
  for (const char* command : {"run", "sweep"}) {
    const CommandResult r = run_cli(fmt::format("{} {} -q -o {}", command, scenario, scenario));
    EXPECT_EQ(r.exit_code, 2) << command << r.err;
    EXPECT_THAT(r.err, HasSubstr("which exists and is not an HDF5 file")) << command;
    EXPECT_EQ(read_file(scenario), text) << command;
  }
  const CommandResult n = run_cli(fmt::format(
      "nccl-tests --scenario {} -o {} all_reduce_perf -b 1M -e 1M", scenario, scenario));
  EXPECT_EQ(n.exit_code, 2) << n.err;
  EXPECT_EQ(read_file(scenario), text);
  const std::string results = dir / "r.h5";
  for (int i = 0; i < 2; ++i) {
    const CommandResult r = run_cli(fmt::format("run {} -q -o {}", scenario, results));
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
}

TEST(Output, AScenarioOfMoreThan64KiBIsKeptWhole) {
  // /meta's `scenario` attribute holds the effective scenario, however long: HDF5 keeps an
  // attribute in its object's header up to 64 KiB, so /meta keeps its attributes in dense
  // storage. 2,000 flows written out in the scenario: about 170 KB of text.
  const TempDir dir("cli-long-scenario");
  std::string text =
      "topology: {type: clos, racks: 2, nodes_per_rack: 2, node: {gpus: 4}, leaf: {uplinks: 8}, "
      "spine: {count: 4}}\nworkloads:\n  - type: flows\n    name: many\n    flows:\n";
  for (int i = 0; i < 2000; ++i)
    text += fmt::format("      - {{src: {}, dst: {}, bytes: 1MiB, start: {}ns}}\n", i % 16,
                        (i + 5) % 16, i);
  std::ofstream(dir / "long.yaml") << text;
  const CommandResult r = run_cli(fmt::format("run {} -q -o {}", dir / "long.yaml", dir / "r.h5"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CommandResult read = run_command(
      fmt::format("{} -c \"import h5py; print(len(h5py.File('{}')['meta'].attrs['scenario']))\"",
                  ROCESIM_PYTHON, dir / "r.h5"));
  ASSERT_EQ(read.exit_code, 0) << read.err;
  EXPECT_GT(std::stoul(read.out), 65536u);
  EXPECT_EQ(check_results(dir / "r.h5").exit_code, 0);
}

// ---- the scenario reference ----

TEST(Schema, MatchesTheCommittedScenarioReference) {
  const CommandResult r = run_cli("schema");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# Scenario reference"));
  const std::string committed = read_file(source_path("docs/scenario.md"));
  EXPECT_TRUE(r.out == committed)
      << "docs/scenario.md is out of date with the parameter tables; regenerate it with "
         "`make schema` (rocesim schema > docs/scenario.md) and commit it";
}

// ---- help ----

TEST(Help, TopLevelAndEverySubcommandExitZero) {
  for (const char* args : {"--help", "run --help", "topo --help", "schema --help",
                           "calibrate --help", "calibrate fit --help", "train --help"}) {
    const CommandResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr("Usage:")) << args;
  }
  const CommandResult top = run_cli("--help");
  for (const char* sub : {"run", "topo", "schema"})
    EXPECT_THAT(top.out, HasSubstr(sub));
  const CommandResult run = run_cli("run --help");
  for (const char* option :
       {"--output", "--seed", "--threads", "--no-output", "--quiet", "--trace"})
    EXPECT_THAT(run.out, HasSubstr(option));
}

// ---- training jobs and the timeline trace ----

/// The value a summary line "  name = value" gives, as printed (6 significant digits).
std::string summary_value(const std::string& out, const std::string& name) {
  const size_t at = out.find(" " + name + " = ");
  if (at == std::string::npos) return "";
  const size_t begin = at + name.size() + 4;
  return out.substr(begin, out.find('\n', begin) - begin);
}

TEST(TrainingCli, TheTraceShowsEachRanksStreamsAndTheirComputeAddsUp) {
  // Rank 0's compute stream: its forward, backward and optimizer spans add up to the compute
  // time of the breakdown (all ranks compute alike here), and no two spans of a track overlap.
  const TempDir dir("trace");
  const CommandResult r =
      run_cli(fmt::format("run {} --no-output --trace {}",
                          source_path("scenarios/training_zero_440m.yaml"), dir / "t.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string compute = summary_value(r.out, "compute_s");
  ASSERT_FALSE(compute.empty()) << r.out;
  const CommandResult check = run_command(
      fmt::format("{} {} {} 'zero1 / rank 0' compute forward,backward,optimizer {}", ROCESIM_PYTHON,
                  source_path("tests/cli/check_trace.py"), dir / "t.json", compute));
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  // Workloads without a timeline of their own are traced by their flows, nccl-tests by phase.
  ASSERT_EQ(run_cli(fmt::format("run {} -q --no-output --trace {}",
                                source_path("scenarios/quickstart.yaml"), dir / "q.json"))
                .exit_code,
            0);
  EXPECT_EQ(run_command(fmt::format("{} {} {}", ROCESIM_PYTHON,
                                    source_path("tests/cli/check_trace.py"), dir / "q.json"))
                .exit_code,
            0);
  const CommandResult nt =
      run_cli(fmt::format("nccl-tests --scenario {} --trace {} all_reduce_perf -b 1M -e 4M -f 2",
                          source_path("scenarios/nccl_collectives.yaml"), dir / "n.json"));
  ASSERT_EQ(nt.exit_code, 0) << nt.err;
  const CommandResult n = run_command(fmt::format(
      "{} {} {}", ROCESIM_PYTHON, source_path("tests/cli/check_trace.py"), dir / "n.json"));
  EXPECT_EQ(n.exit_code, 0) << n.out;
  EXPECT_THAT(n.out, HasSubstr("6 spans"));  // 3 sizes, out of place and in place
}

TEST(TrainingCli, TrainFindsTheLargestMicroBatchThatFits) {
  // 440M model, ZeRO 1 on 16 A100 40GB: 16 per GPU fits, 17 does not (docs/models/training.md).
  const CommandResult r = run_cli(
      fmt::format("train {} --max-batch", source_path("scenarios/training_zero_440m.yaml")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("memory per GPU: 22.29 GiB of 40.00 GiB (fits"));
  EXPECT_THAT(r.out, HasSubstr("largest micro-batch that fits: 16 ("));
  const CommandResult none =
      run_cli(fmt::format("train {}", source_path("scenarios/quickstart.yaml")));
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("a workload of type training"));
}

TEST(Help, VersionExitsZero) {
  const CommandResult r = run_cli("--version");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, testing::MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+\n"));
}

TEST(Help, NoSubcommandIsABadArgument) {
  const CommandResult r = run_cli("");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("subcommand"));
}

}  // namespace
}  // namespace rocesim::test
