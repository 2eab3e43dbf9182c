// The calibration loop end to end on the stand-in cluster (README.md here): rocesim-bench,
// compiled unchanged against the stand-in CUDA runtime and NCCL, runs under mpirun with one rank
// per stand-in GPU; its collectives take the time rocesim predicts for a hidden ground truth
// (the nominal cluster.yaml with kTruth applied) times seeded log-normal noise. Then, as a user
// would: `rocesim calibrate fit` on the datasets with the nominal scenario, and `rocesim
// validate` with the calibration file on rank counts and sizes the fit did not see. And the
// failures a real cluster produces: a rank killed mid-run, an operation that never completes, a
// NCCL error, a node with fewer GPUs than ranks.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/test_support.hpp"
#include "validation/lib/validate.hpp"

namespace rocesim::test {
namespace {

namespace fs = std::filesystem;

// The hidden ground truth: NICs deliver 80% of their framed line rate, NCCL's launch latency is
// 1.4x and its per-step latency 1.6x what NCCL's tuning model says. The fitter starts from the
// nominal values (1, 1, 1) and is never told these.
constexpr const char* kTruth =
    "topology.node.nic_efficiency=0.8;nccl.base_latency_factor=1.4;nccl.hop_latency_factor=1.6";
const std::vector<std::pair<std::string, double>> kHidden = {{"topology.node.nic_efficiency", 0.8},
                                                             {"nccl.base_latency_factor", 1.4},
                                                             {"nccl.hop_latency_factor", 1.6}};

// Noise of one operation: log-normal with sigma 2% (the same on every rank of an operation).
// A table row is the mean of -n 5 iterations, so its log-noise is about 0.02 / sqrt(5) = 0.9%.
constexpr double kNoise = 0.02;
constexpr int kIters = 5;

std::string scenario() {
  return source_path("tests/calibrate/standin/cluster.yaml");
}

/// Runs `mpirun -np N standin-node.sh PER_NODE rocesim-bench-standin ARGS` with the ground truth
/// in the environment (and `env`, e.g. a failure to inject), from a fresh launcher environment.
/// Open MPI's own allocations are not the bench's: no leak report under the sanitizers.
CommandResult bench(int np, int per_node, const std::string& args, const std::string& env = "",
                    const std::string& truth = kTruth) {
  return run_command(fmt::format(
      "env -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_RANK -u SLURM_PROCID "
      "-u MV2_COMM_WORLD_RANK ASAN_OPTIONS=detect_leaks=0 ROCESIM_STANDIN_SCENARIO='{}' "
      "ROCESIM_STANDIN_TRUTH='{}' "
      "ROCESIM_STANDIN_GPUS={} {} '{}' --oversubscribe --allow-run-as-root -np {} '{}' {} '{}' "
      "-n {} -w 1 {}",
      scenario(), truth, per_node, env, ROCESIM_STANDIN_MPIRUN, np,
      source_path("tests/calibrate/standin/standin-node.sh"), per_node, ROCESIM_BENCH_STANDIN_EXE,
      kIters, args));
}

std::string trim_newline(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r'))
    s.pop_back();
  return s;
}

/// Whether standin-node.sh can give each virtual node its own host name (a UTS namespace).
bool virtual_hosts() {
  return run_command("unshare --uts true").exit_code == 0;
}

/// The host name a rank of virtual node `node` reports.
std::string host_of_node(int node) {
  if (virtual_hosts()) return fmt::format("standin-node{}", node);
  return trim_newline(run_command("hostname").out);
}

/// Skips the test where mpirun cannot start processes (no slots, no launcher).
#define REQUIRE_MPIRUN()                                                                      \
  do {                                                                                        \
    const CommandResult probe = run_command(fmt::format(                                      \
        "{} --oversubscribe --allow-run-as-root -np 2 /bin/true", ROCESIM_STANDIN_MPIRUN));   \
    if (probe.exit_code != 0) GTEST_SKIP() << "mpirun cannot start processes: " << probe.err; \
  } while (false)

/// The rows of a validation.csv: per row, column name -> text.
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::map<std::string, std::string>> rows;
  std::vector<std::string> header;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream s(line);
    std::string cell;
    while (std::getline(s, cell, ','))
      cells.push_back(cell);
    if (header.empty()) {
      header = cells;
      continue;
    }
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < cells.size(); ++i)
      row[header[i]] = cells[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

/// Measures the training sets (AllReduce and AllGather, 8 B to 128 MiB by 16, on 2 and 4
/// servers: train4.yaml, train8.yaml in `dir`) on `truth` with kNoise, then runs `calibrate fit`
/// on them with `fit_args`; the calibration file's contents, or a fatal failure.
YAML::Node measure_and_fit(const std::string& dir, const std::string& truth,
                           const std::string& fit_args) {
  for (const int np : {4, 8}) {
    const CommandResult r = bench(
        np, 2,
        fmt::format("--collective all_reduce,all_gather -b 8 -e 128M -f 16 -o {}/train{}.yaml", dir,
                    np),
        fmt::format("ROCESIM_STANDIN_NOISE={} ROCESIM_STANDIN_SEED={}", kNoise, np), truth);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    if (r.exit_code != 0) return {};
  }
  const CommandResult fit = run_cli(fmt::format(
      "calibrate fit --scenario '{0}' --measured '{1}/train4.yaml' --measured '{1}/train8.yaml' "
      "{2} --threads 2 -o '{1}/calibration.yaml'",
      scenario(), dir, fit_args));
  EXPECT_EQ(fit.exit_code, 0) << fit.out << fit.err;
  if (fit.exit_code != 0) return {};
  std::cout << fit.out;
  return YAML::LoadFile(dir + "/calibration.yaml");
}

/// The fitted `path` in `cal` lies within 4 of its standard deviations of `truth`, which must be
/// positive and under a tenth of the truth; returns its fit entry.
YAML::Node expect_recovered(const YAML::Node& cal, const std::string& path, double truth) {
  SCOPED_TRACE(path);
  const YAML::Node p = cal["fit"]["parameters"][path];
  EXPECT_TRUE(p) << path;
  if (!p) return p;
  const double sd = std::stod(p["stddev"].as<std::string>());
  EXPECT_GT(sd, 0);
  EXPECT_LT(sd, 0.1 * truth);
  EXPECT_NEAR(std::stod(p["value"].as<std::string>()), truth, 4 * sd);
  return p;
}

TEST(StandinCluster, BenchMeasuresTheGroundTruthSimulation) {
  // Without noise, every row the bench measures is rocesim's time for that collective, rank
  // count and size on the ground truth: the stand-ins map each NCCL call to the nccl-tests
  // operation it belongs to (AllGather's per-rank count, AlltoAll's grouped sends and receives,
  // ...), the events time it, and the table prints it. Checked against the simulation the
  // validator runs on the truth, to the table's printed precision (better than 0.1%); and
  // against the nominal values, which must differ by far more, or the truth would not be hidden.
  REQUIRE_MPIRUN();
  const std::string dir = temp_dir("standin_exact");
  const std::string out = dir + "/all.yaml";
  const CommandResult r = bench(4, 2, fmt::format("--collective all -b 1K -e 1M -f 32 -o {}", out));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(contains(r.err, "stand-in")) << r.err;  // no leaks, no stand-in complaints
  ASSERT_TRUE(fs::exists(out)) << r.out;
  const validation::NcclTestsLog log = validation::read_measured_file(out);
  ASSERT_EQ(log.tables.size(), 6u);
  for (const validation::NcclTestsTable& t : log.tables) {
    EXPECT_EQ(t.nranks, 4);
    EXPECT_EQ(t.rows.size(), 3u);  // 1K, 32K, 1M
  }
  // One host per virtual node where the test may set host names (standin-node.sh).
  if (virtual_hosts()) {
    EXPECT_EQ(log.tables.front().nodes, 2);
    EXPECT_TRUE(contains(read_file(out), "standin-node1")) << read_file(out);
  }
  scenario::Overrides truth;
  std::string rest = kTruth;
  for (size_t end; !rest.empty(); rest = end == std::string::npos ? "" : rest.substr(end + 1)) {
    end = rest.find(';');
    truth.parameters.push_back(scenario::parse_override(rest.substr(0, end), "truth"));
  }
  const validation::ValidationReport on_truth = validation::validate({log}, scenario(), truth);
  const validation::ValidationReport on_nominal = validation::validate({log}, scenario(), {});
  ASSERT_EQ(on_truth.tables.size(), 6u);
  double nominal_max = 0;
  for (size_t t = 0; t < on_truth.tables.size(); ++t) {
    for (size_t i = 0; i < on_truth.tables[t].rows.size(); ++i) {
      const validation::ComparedRow& row = on_truth.tables[t].rows[i];
      EXPECT_NEAR(row.time_error, 0.0, 1e-3)
          << on_truth.tables[t].table << " " << row.size_bytes << ": measured "
          << row.measured_time_us << " us, truth " << row.simulated_time_us << " us";
      nominal_max = std::max(nominal_max, std::abs(on_nominal.tables[t].rows[i].time_error));
    }
  }
  EXPECT_GT(nominal_max, 0.1);
}

TEST(StandinCluster, ABuildWithoutMpiRunsOneProcess) {
  // Where configure finds no MPI, rocesim-bench is built with its single-process mode alone (as
  // nccl-tests without MPI): with --single-process it drives every GPU of the node (2 stand-in
  // GPUs here) in one communicator; started by hand without it, one GPU, as an MPI build run by
  // hand; under a launcher that started 2 processes it refuses with exit code 2 and says why.
  const std::string dir = temp_dir("standin_nompi");
  const std::string env = fmt::format(
      "env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_RANK -u PMI_SIZE "
      "-u SLURM_PROCID -u SLURM_STEP_NUM_TASKS ROCESIM_STANDIN_SCENARIO='{}' "
      "ROCESIM_STANDIN_TRUTH='{}' ROCESIM_STANDIN_GPUS=2",
      scenario(), kTruth);
  const CommandResult both =
      run_command(fmt::format("{} '{}' --single-process -b 1M -e 1M -n 2 "
                              "-w 1 -o {}/two.yaml",
                              env, ROCESIM_BENCH_STANDIN_NOMPI_EXE, dir));
  ASSERT_EQ(both.exit_code, 0) << both.out << both.err;
  const CommandResult one = run_command(fmt::format("{} '{}' -b 1M -e 1M -n 2 -w 1 -o {}/one.yaml",
                                                    env, ROCESIM_BENCH_STANDIN_NOMPI_EXE, dir));
  ASSERT_EQ(one.exit_code, 0) << one.out << one.err;
  for (const auto& [file, ranks] : {std::pair<std::string, int>{"two.yaml", 2}, {"one.yaml", 1}}) {
    const validation::NcclTestsLog log = validation::read_measured_file(dir + "/" + file);
    ASSERT_EQ(log.tables.size(), 1u) << file;
    EXPECT_EQ(log.tables.front().nranks, ranks) << file;
    EXPECT_TRUE(contains(read_file(dir + "/" + file), "mode: single-process")) << file;
  }
  const CommandResult launched =
      run_command(fmt::format("{} OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 '{}' -b 8 -e 8",
                              env, ROCESIM_BENCH_STANDIN_NOMPI_EXE));
  EXPECT_EQ(launched.exit_code, 2);
  EXPECT_TRUE(contains(launched.err, "this build has no MPI")) << launched.err;
}

TEST(StandinCluster, AFitThatStopsBesideATunerSwitchIsProbedPastIt) {
  // The simulated times jump where the tuner switches protocol, and that point moves with the
  // parameters. The same measurements as below, on the same truth but with each channel's proxy
  // post at 240 ns (known, not fitted): the descent from the nominal values stops at a NIC
  // efficiency of 0.809, where an 8 MiB AllGather runs Simple instead of the truth's LL128 and
  // its finite difference straddles the switch (the reported stddev 0.0002, 40 of them from the
  // truth 0.8). The probe of a converged descent (calibrate/lib/fit.hpp) steps each parameter
  // past the switch and descends again, so every parameter is recovered as without it.
  REQUIRE_MPIRUN();
  const std::string dir = temp_dir("standin_switch");
  const std::string post = "nccl.proxy_post_latency=240ns";
  const YAML::Node cal =
      measure_and_fit(dir, fmt::format("{};{}", kTruth, post),
                      fmt::format("--set {} --param topology.node.nic_efficiency --param "
                                  "nccl.base_latency_factor --param nccl.hop_latency_factor",
                                  post));
  ASSERT_TRUE(cal);
  for (const auto& [path, truth] : kHidden)
    expect_recovered(cal, path, truth);
}

TEST(StandinCluster, CalibrationLoopRecoversTheHiddenParameters) {
  // Measure: AllReduce and AllGather on 2 servers (4 ranks) and 4 servers (8 ranks), 8 B to
  // 128 MiB by factors of 16, 2% noise per operation. Fit the three parameters from the nominal
  // scenario. The parameters act on different rows (the NIC efficiency on the large sizes, the
  // launch factor on every size alike, the per-step factor with the step count, which grows with
  // the ranks), so they are identifiable; each fitted value must lie within 4 of its reported
  // standard deviations of the truth (noise only), and the deviations must be small.
  REQUIRE_MPIRUN();
  const std::string dir = temp_dir("standin_loop");
  const YAML::Node cal =
      measure_and_fit(dir, kTruth,
                      "--param topology.node.nic_efficiency --param nccl.base_latency_factor "
                      "--param nccl.hop_latency_factor");
  ASSERT_TRUE(cal);
  for (const auto& [path, truth] : kHidden) {
    const YAML::Node p = expect_recovered(cal, path, truth);
    if (p) {
      EXPECT_EQ(p["identifiable"].as<std::string>(), "true") << path;
    }
  }

  // Validate: AllReduce and AllGather on 3 servers (6 ranks, not fitted) at sizes between the
  // fitted ones (32 B to 512 MiB by 16), other noise. With the calibration every row must be
  // within the noise of the truth: a row's noise is 0.9% (1 sigma), so |error| < 4% (4.4 sigma
  // plus what the fit's uncertainty adds), the median < 2%. With the nominal values the same rows
  // are off by much more (the truth is 20% slower NICs and 40-60% longer latencies).
  const CommandResult r = bench(
      6, 2,
      fmt::format("--collective all_reduce,all_gather -b 32 -e 512M -f 16 -o {}/test6.yaml", dir),
      fmt::format("ROCESIM_STANDIN_NOISE={} ROCESIM_STANDIN_SEED=99", kNoise));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::vector<double> fitted, nominal;
  for (const bool calibrated : {true, false}) {
    const std::string out = dir + (calibrated ? "/val_fitted" : "/val_nominal");
    const CommandResult v = run_cli(fmt::format(
        "validate --scenario '{}' --measured '{}/test6.yaml' --no-plot -o '{}' {}", scenario(), dir,
        out, calibrated ? fmt::format("--calibration '{}/calibration.yaml'", dir) : ""));
    ASSERT_EQ(v.exit_code, 0) << v.out << v.err;
    for (const auto& row : read_csv(out + "/validation.csv"))
      (calibrated ? fitted : nominal).push_back(std::abs(std::stod(row.at("time_error"))));
  }
  ASSERT_EQ(fitted.size(), 14u);  // 2 collectives x 7 sizes
  std::cout << fmt::format(
      "held-out rows (6 ranks): |time error| with the calibration median {:.2f}%, max {:.2f}%; "
      "nominal median {:.2f}%, max {:.2f}%\n",
      100 * validation::percentile(fitted, 0.5), 100 * validation::percentile(fitted, 1.0),
      100 * validation::percentile(nominal, 0.5), 100 * validation::percentile(nominal, 1.0));
  for (const double e : fitted)
    EXPECT_LT(e, 0.04);
  EXPECT_LT(validation::percentile(fitted, 0.5), 0.02);
  EXPECT_GT(validation::percentile(nominal, 0.5), 0.1);
}

TEST(StandinCluster, TheNicProbeFixesTheNicAndTheFitFindsTheRest) {
  // The loop with the NIC probe, as a user with RDMA access runs it: rocesim-nicprobe --loopback
  // on a node's NIC (the stand-in NIC: the same hidden cluster, tests/calibrate/nicprobe/
  // fake_verbs.cpp), then `calibrate fit --nicprobe` with the bench's datasets. The truth has a
  // fourth hidden value, a PCIe latency of 900 ns (the preset's 500 ns is nominal), which only
  // the probe sees clearly. The probe must fix what it measured: the port's 400 Gb/s, the NIC
  // efficiency 0.8 (its bandwidth over the framed rate; within 0.5%, the noise of 9 rows of 200
  // writes) and the PCIe latency (half the 1.8 us one-way loopback latency; within 1%); the fit
  // must find the launch and per-step factors with these fixed, within 4 of its standard
  // deviations of the truth as in CalibrationLoopRecoversTheHiddenParameters.
#ifndef ROCESIM_NICPROBE_FAKE_EXE
  GTEST_SKIP() << "rocesim-nicprobe was not built (no libibverbs-dev)";
#else
  REQUIRE_MPIRUN();
  const std::string truth = std::string(kTruth) + ";topology.node.pcie_latency=900ns";
  const std::string dir = temp_dir("standin_nicprobe");
  const CommandResult probe = run_command(fmt::format(
      "env ROCESIM_STANDIN_SCENARIO='{}' ROCESIM_STANDIN_TRUTH='{}' ROCESIM_STANDIN_NOISE={} "
      "'{}' --loopback -d mlx5_1 -p 1 --sizes 4K:1M -n 200 -q -o '{}/probe.yaml'",
      scenario(), truth, kNoise, ROCESIM_NICPROBE_FAKE_EXE, dir));
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  const YAML::Node cal =
      measure_and_fit(dir, truth,
                      fmt::format("--nicprobe '{}/probe.yaml' --param nccl.base_latency_factor "
                                  "--param nccl.hop_latency_factor",
                                  dir));
  ASSERT_TRUE(cal);
  const YAML::Node values = cal["parameters"];
  EXPECT_EQ(values["topology.node.nic_speed"].as<std::string>(), "400Gbps");
  EXPECT_NEAR(std::stod(values["topology.node.nic_efficiency"].as<std::string>()), 0.8,
              0.005 * 0.8);
  const std::string pcie = values["topology.node.pcie_latency"].as<std::string>();
  ASSERT_TRUE(pcie.ends_with("ns")) << pcie;
  EXPECT_NEAR(std::stod(pcie), 900, 0.01 * 900);
  for (const auto& [path, value] : kHidden) {
    if (path != "topology.node.nic_efficiency") expect_recovered(cal, path, value);
  }
#endif
}

// The failure paths. Each run: AllReduce at 1K, 32K and 1M on 2 servers x 2 ranks, -w 1 -n 5,
// so the operations of a rank are: 1-2 the warm-ups (1M, then 1K), 3-7 1K out of place, 8-12 1K
// in place, 13-17 32K out of place, ... Operation 15 is in the middle of the sweep. Every
// failure must name the rank and its host, and leave no dataset (rank 0 writes it only after
// the last collective, under a temporary name then renamed): the directory stays empty.
constexpr const char* kFailRun = "-b 1K -e 1M -f 32";

struct FailedRun {
  CommandResult result;
  bool wrote_nothing = false;
};

FailedRun failing_bench(const std::string& tag, const std::string& env,
                        const std::string& args = "") {
  const std::string dir = temp_dir(tag);
  FailedRun f;
  f.result = bench(4, 2, fmt::format("{} {} -o {}/out.yaml", kFailRun, args, dir), env);
  f.wrote_nothing = fs::is_empty(dir);
  return f;
}

TEST(StandinCluster, ARankKilledMidRunEndsTheJobWithoutADataset) {
  // Rank 1 is killed (SIGKILL, as by the OOM killer or a node crash) at its operation 15. The
  // other ranks wait for it in MPI; mpirun sees the death, names the rank and its node, and ends
  // the job with a non-zero status.
  REQUIRE_MPIRUN();
  const FailedRun f = failing_bench("standin_die", "ROCESIM_STANDIN_FAIL=die:1:15");
  const std::string text = f.result.out + f.result.err;
  EXPECT_NE(f.result.exit_code, 0) << text;
  EXPECT_TRUE(contains(text, "rank 1 ")) << text;
  EXPECT_TRUE(contains(text, "signal 9")) << text;
  EXPECT_TRUE(f.wrote_nothing);
}

TEST(StandinCluster, AnOperationThatNeverCompletesTimesOut) {
  // Rank 1's operation 15 (AllReduce, 32 KiB, out of place) never completes, and nothing reports
  // an error (a stalled fabric). With -T 2 rank 1 gives up after 2 s, names itself, its host,
  // the collective and size, and aborts the job with exit code 1.
  REQUIRE_MPIRUN();
  const FailedRun f = failing_bench("standin_hang", "ROCESIM_STANDIN_FAIL=hang:1:15", "-T 2");
  EXPECT_EQ(f.result.exit_code, 1) << f.result.out << f.result.err;
  EXPECT_TRUE(contains(f.result.err, fmt::format("rank 1 on {}: all_reduce_perf at 32768 B, out "
                                                 "of place: timed out",
                                                 host_of_node(0))))
      << f.result.err;
  EXPECT_TRUE(f.wrote_nothing);
}

TEST(StandinCluster, ANcclErrorNamesTheRankAndEndsTheJob) {
  // Rank 2's operation 15 fails in the network: NCCL reports ncclRemoteError asynchronously (as
  // on an InfiniBand retry-exceeded completion). Rank 2 reports NCCL's text and last error, with
  // its rank, host, collective and size, and aborts the job with exit code 1.
  REQUIRE_MPIRUN();
  const FailedRun f = failing_bench("standin_error", "ROCESIM_STANDIN_FAIL=error:2:15");
  EXPECT_EQ(f.result.exit_code, 1) << f.result.out << f.result.err;
  EXPECT_TRUE(contains(f.result.err,
                       fmt::format("rank 2 on {}: all_reduce_perf at 32768 B, out of place: "
                                   "NCCL operation (asynchronous error) failed: remote process "
                                   "exited or there was a network error (NET/IB",
                                   host_of_node(1))))
      << f.result.err;
  EXPECT_TRUE(f.wrote_nothing);
}

TEST(StandinCluster, ANodeWithFewerGpusThanRanksIsRefused) {
  // Node 1 has one GPU but runs two ranks (2,3): both would use its device 0. The bench refuses
  // before NCCL starts, naming both ranks, the host, the GPU and the counts; exit code 3 (as for
  // no GPU), no dataset.
  REQUIRE_MPIRUN();
  const FailedRun f = failing_bench("standin_gpus", "ROCESIM_STANDIN_GPUS=2,1");
  EXPECT_EQ(f.result.exit_code, 3) << f.result.out << f.result.err;
  EXPECT_TRUE(contains(f.result.err,
                       fmt::format("rank 3 on {0} would share CUDA device 0 (PCI 0001:10:00.0) "
                                   "with rank 2: {0} runs {1} ranks but they see 1 CUDA device;",
                                   host_of_node(1), virtual_hosts() ? 2 : 4)))
      << f.result.err;
  EXPECT_TRUE(f.wrote_nothing);
}

}  // namespace
}  // namespace rocesim::test
