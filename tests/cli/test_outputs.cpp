// Where rocesim writes and how (sim/metrics/output_files.hpp), end to end: only regular files or
// new paths, checked before any work; outputs appear complete or not at all, also when SIGINT or
// SIGTERM arrives; temporaries of dead processes are cleaned up; a lost stdout is an error;
// `nccl-tests` writes a file only when asked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/test_support.hpp"

namespace rocesim::test {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;

/// The files of a directory whose names contain ".tmp-".
std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp-") != std::string::npos)
      out.push_back(e.path().string());
  }
  return out;
}

const std::string& quickstart() {
  static const std::string path = source_path("scenarios/quickstart.yaml");
  return path;
}

TEST(Outputs, AFifoOrADeviceIsNeverReplaced) {
  const fs::path dir = temp_dir("outputs-fifo");
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const CommandResult r = run_cli(fmt::format("run {} -q -o {}", quickstart(), fifo.string()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("'-o': expected a regular file or a new file name"));
  EXPECT_THAT(r.err, HasSubstr("which is a FIFO"));
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(temporaries(dir).empty());
  // A device: refused the same way (before anything is simulated).
  const CommandResult d = run_cli(fmt::format("run {} -q -o /dev/null", quickstart()));
  EXPECT_EQ(d.exit_code, 2);
  EXPECT_THAT(d.err, HasSubstr("which is a device"));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST(Outputs, EmptyNamesAndMissingDirectoriesAreInputErrors) {
  for (const std::string& args :
       {fmt::format("run {} -q -o ''", quickstart()),
        fmt::format("run {} -q -o /no/such/dir/results.h5", quickstart()),
        fmt::format("calibrate fit --scenario {} --measured x -o ''", quickstart()),
        fmt::format("sweep {} -o ''", source_path("studies/subscription.yaml")),
        fmt::format("validate --scenario {} --measured x -o ''", quickstart())}) {
    SCOPED_TRACE(args);
    const CommandResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_THAT(r.err, HasSubstr("command line: error: '-o': expected"));
  }
}

TEST(Outputs, UnwritablePlacesAndTwoOutputsInOneFileAreRefusedBeforeTheWork) {
  // /proc takes no new files, whoever asks (permissions alone would not tell root): every
  // command refuses it before it simulates or fits (they used to fail at the end, exit 1).
  const std::string scenario = source_path("validation/scenarios/h100-ib-400g.yaml");
  for (const std::string& args :
       {fmt::format("run {} -q -o /proc/results.h5", quickstart()),
        fmt::format("nccl-tests --scenario {} -o /proc/r.h5 all_reduce_perf -b 1M -e 1M", scenario),
        fmt::format("calibrate fit --scenario {} --measured x -o /proc/c.yaml", scenario),
        fmt::format("sweep {} -o /proc/s.h5", source_path("studies/subscription.yaml")),
        fmt::format("validate --scenario {} --measured x -o /proc/v", scenario)}) {
    SCOPED_TRACE(args);
    const CommandResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_THAT(r.err, HasSubstr("'-o': expected a place this process may write"));
  }
  // -o and --trace naming one file (spelt two ways): the trace would replace the results.
  const fs::path dir = temp_dir("outputs-same-file");
  const CommandResult same = run_cli(fmt::format("run {} -q -o {}/out.h5 --trace {}/./out.h5",
                                                 quickstart(), dir.string(), dir.string()));
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_THAT(same.err, HasSubstr("'--trace': expected a file other than -o's"));
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(Outputs, NcclTestsWritesAFileOnlyWhenAsked) {
  const fs::path dir = temp_dir("outputs-nccl-tests");
  const std::string scenario = source_path("validation/scenarios/h100-ib-400g.yaml");
  const CommandResult r = run_command(
      fmt::format("cd {} && {} nccl-tests --scenario {} all_reduce_perf -b 1M -e 1M -n 1 -w 0",
                  dir.string(), cli_path(), scenario));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(Outputs, CalibrateWritesBothFilesOrNeither) {
  // --residuals names a directory: refused before the fit, and no calibration.yaml appears.
  const fs::path dir = temp_dir("outputs-calibrate");
  fs::create_directory(dir / "residuals");
  const CommandResult r = run_cli(fmt::format(
      "calibrate fit --scenario {} --measured {} -o {} --residuals {}",
      source_path("validation/scenarios/h100-ib-400g.yaml"),
      source_path("validation/data/measured/nvidia_nccl-tests_issue309_h100_ib_2-8nodes.yaml"),
      (dir / "calibration.yaml").string(), (dir / "residuals").string()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("'--residuals'"));
  EXPECT_FALSE(fs::exists(dir / "calibration.yaml"));
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(Outputs, TemporariesOfDeadProcessesAreRemovedByTheNextWrite) {
  // A process that died before renaming its output (SIGKILL) left "<out>.tmp-<pid>": the next
  // write of the same output removes it; a temporary of a live process (this one) stays.
  const fs::path dir = temp_dir("outputs-stale");
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // the pid is now free (and not reused this soon)
  const fs::path out = dir / "results.h5";
  const fs::path dead = fmt::format("{}.tmp-{}", out.string(), child);
  const fs::path live = fmt::format("{}.tmp-{}", out.string(), ::getpid());
  std::ofstream(dead) << "half";
  std::ofstream(live) << "in progress";
  ASSERT_EQ(run_cli(fmt::format("run {} -q -o {}", quickstart(), out.string())).exit_code, 0);
  EXPECT_TRUE(fs::is_regular_file(out));
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
}

TEST(Outputs, ASignalLeavesACompleteFileOrNoneAndNoTemporary) {
  // SIGINT and SIGTERM at times spread over a run that writes a 60,000-flow results.h5 (the
  // write takes a good part of the run): each time the output is either absent or complete
  // (h5py reads its last dataset), and no temporary is left.
  const fs::path dir = temp_dir("outputs-signal");
  const std::string scenario = source_path("scenarios/quickstart.yaml");
  int complete = 0, absent = 0;
  for (const int sig : {SIGINT, SIGTERM}) {
    for (int ms : {5, 20, 40, 60, 80, 100, 130, 160, 200, 260}) {
      SCOPED_TRACE(fmt::format("signal {} after {} ms", sig, ms));
      const fs::path out = dir / fmt::format("r-{}-{}.h5", sig, ms);
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::execl(cli_path().c_str(), cli_path().c_str(), "run", scenario.c_str(), "-q", "-o",
                out.c_str(), "--set", "output.max_flows=60000", static_cast<char*>(nullptr));
        ::_exit(127);
      }
      ASSERT_GT(pid, 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      ::kill(pid, sig);
      int status = 0;
      ::waitpid(pid, &status, 0);
      EXPECT_TRUE(temporaries(dir).empty());
      if (!fs::exists(out)) {
        ++absent;
        continue;
      }
      ++complete;
      const CommandResult h5 = run_command(
          fmt::format("{} -c \"import h5py; f = h5py.File('{}'); assert len(f['flows']) > 0\"",
                      ROCESIM_PYTHON, out.string()));
      EXPECT_EQ(h5.exit_code, 0) << h5.err;
    }
  }
  // The run ends in well under a second here: some signals come too late to stop it.
  EXPECT_GT(absent, 0);
}

TEST(Outputs, ALostStandardOutputIsAnError) {
  // /dev/full takes no bytes: the summary cannot be printed, so the run fails.
  const CommandResult r = run_command(
      fmt::format("sh -c '{} run {} --no-output > /dev/full'", cli_path(), quickstart()));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("cannot write to standard output"));
}

TEST(Outputs, NcclTestsAcceptsWhatNcclTestsAndMpirunAccept) {
  // -x passes any variable (those the model does not read are listed as not modelled); -d all
  // and -o all run every type and reduction: 10 types x 5 reductions x 2 sizes = 100 rows.
  const CommandResult r = run_cli(fmt::format(
      "nccl-tests --scenario {} -x NCCL_NVLS_ENABLE=0 -x NCCL_IB_GID_INDEX=3 all_reduce_perf "
      "-b 1K -e 2K -f 2 -n 1 -w 0 -d all -o all",
      source_path("validation/scenarios/h100-ib-400g.yaml")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# Environment not modelled: NCCL_IB_GID_INDEX=3"));
  int rows = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] != '#') ++rows;
  }
  EXPECT_EQ(rows, 100);
  EXPECT_THAT(r.out, HasSubstr("bfloat16     avg"));

  // A size as NCCL reads it, plain bytes, is the same size with its unit: the same table.
  const std::string sweep = fmt::format(
      "nccl-tests --scenario {} -x NCCL_BUFFSIZE={} all_reduce_perf -b 1M -e 64M -f 8 -n 1 -w 0",
      source_path("validation/scenarios/h100-ib-400g.yaml"), "{}");
  const CommandResult plain = run_cli(fmt::format(fmt::runtime(sweep), "1048576"));
  const CommandResult unit = run_cli(fmt::format(fmt::runtime(sweep), "1MiB"));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(unit.exit_code, 0) << unit.err;
  EXPECT_EQ(plain.out.substr(plain.out.find("#       size")),
            unit.out.substr(unit.out.find("#       size")));
}

}  // namespace
}  // namespace rocesim::test
