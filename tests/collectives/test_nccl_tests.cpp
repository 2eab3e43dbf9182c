// The nccl-tests emulation: its command line, its size conventions, its sweep and its table, and
// the table read back by the log reader that reads real nccl-tests output.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim/collectives/nccl/nccl_tests.hpp"
#include "tests/support/test_support.hpp"
#include "validation/lib/nccl_tests_log.hpp"

namespace rocesim::collectives::nccl {
namespace {

using test::contains;

NcclTestsOptions parse(std::vector<std::string> args) {
  return parse_nccl_tests_args(args);
}

TEST(NcclTestsArgs, SizesStepsAndCountsAsNcclTestsReadsThem) {
  // nccl-tests' parsesize(): K, M, G are powers of 1024; -f multiplies, -i adds.
  const NcclTestsOptions o = parse({"all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-n", "5",
                                    "-w", "1", "-d", "half", "-o", "max"});
  EXPECT_EQ(o.collective, Collective::AllReduce);
  EXPECT_EQ(o.min_bytes, 8);
  EXPECT_EQ(o.max_bytes, int64_t{8} << 30);
  EXPECT_EQ(o.step_factor, 2);
  EXPECT_EQ(o.iters, 5);
  EXPECT_EQ(o.warmup, 1);
  EXPECT_EQ(o.type_size, 2);
  EXPECT_EQ(o.op, "max");
  const std::vector<int64_t> sweep = nccl_tests_sweep(o);
  ASSERT_EQ(sweep.size(), 31u);  // 2^3 .. 2^33
  EXPECT_EQ(sweep.back(), int64_t{8} << 30);

  const NcclTestsOptions add = parse({"broadcast_perf", "-b1M", "-e", "4m", "-i", "1M"});
  EXPECT_EQ(nccl_tests_sweep(add), (std::vector<int64_t>{1 << 20, 2 << 20, 3 << 20, 4 << 20}));
  // Defaults: -b 32M -e 32M, 20 iterations after 5 warm-ups, float, sum.
  const NcclTestsOptions d = parse({"alltoall_perf"});
  EXPECT_EQ(nccl_tests_sweep(d), std::vector<int64_t>{32 << 20});
  EXPECT_EQ(d.iters, 20);
  EXPECT_EQ(d.warmup, 5);
  EXPECT_EQ(d.datatype, "float");
  // Process-layout and run-time flags are accepted and reported as ignored.
  EXPECT_EQ(parse({"all_reduce_perf", "-g", "1", "-c", "0"}).ignored.size(), 2u);
}

TEST(NcclTestsArgs, TheLongestSweepAllowedIsTenThousandSizes) {
  // -b 8 -e 80000 -i 8: (80000 - 8) / 8 + 1 = 10000 sizes, the bound; one more step is refused.
  // By factors the count is small however wide the range: 8 B to 8 GiB by 2 is 31 sizes.
  EXPECT_EQ(
      nccl_tests_sweep(parse({"all_reduce_perf", "-b", "8", "-e", "80000", "-i", "8"})).size(),
      10000u);
  const InputError e = test::input_error([&] {
    parse({"all_reduce_perf", "-b", "8", "-e", "80008", "-i", "8"});
  });
  EXPECT_EQ(e.key(), "-i");
  EXPECT_EQ(nccl_tests_sweep(parse({"all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2"})).size(),
            31u);
}

TEST(NcclTestsArgs, BadArgumentsNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string key, expected;
  };
  const std::vector<Case> cases = {
      {{}, "test", "an nccl-tests benchmark"},
      {{"all_reduce"}, "test", "all_reduce_perf"},
      {{"all_reduce_perf", "-b", "8X"}, "-b", "a size in bytes"},
      {{"all_reduce_perf", "-b", "1G", "-e", "1M"}, "-e", "at least the minimum size"},
      {{"all_reduce_perf", "-f", "0"}, "-f", "an integer from 1"},
      {{"all_reduce_perf", "-d", "float128"}, "-d", "one data type"},
      {{"all_reduce_perf", "-o", "every"}, "-o", "one reduction"},
      {{"all_reduce_perf", "-q", "1"}, "-q", "an nccl-tests flag"},
      {{"all_reduce_perf", "-n"}, "-n", "a value after the flag"},
      // 8 B to 8 GiB by 8 B: 2^30 sizes, refused before any is made (each would be simulated).
      {{"all_reduce_perf", "-b", "8", "-e", "8G", "-i", "8"}, "-i", "at most 10000 sizes"},
  };
  for (const Case& c : cases) {
    const InputError e = test::input_error([&] { parse(c.args); });
    EXPECT_EQ(e.key(), c.key) << e.what();
    EXPECT_TRUE(contains(e.what(), c.expected)) << e.what();
    EXPECT_TRUE(contains(e.what(), "nccl-tests command line")) << e.what();
  }
}

TEST(NcclTestsSizes, DividedCollectivesCountPerRank) {
  // nccl-tests' getCollByteCount(): AllGather, ReduceScatter, AlltoAll, Gather, Scatter work on
  // count / nranks elements per rank: size 1 MiB of floats on 6 ranks is 262144 / 6 = 43690
  // per rank, size column 43690 x 6 x 4 = 1048560. AllReduce, Broadcast, Reduce, Send/Recv use
  // the whole count.
  for (Collective c : {Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll,
                       Collective::Gather, Collective::Scatter}) {
    const NcclTestsSize s = nccl_tests_size(c, 1 << 20, 6, 4);
    EXPECT_EQ(s.count, 43690);
    EXPECT_EQ(s.size_bytes, 1048560);
    EXPECT_EQ(s.op_bytes, s.size_bytes);
  }
  for (Collective c :
       {Collective::AllReduce, Collective::Broadcast, Collective::Reduce, Collective::SendRecv}) {
    const NcclTestsSize s = nccl_tests_size(c, 1 << 20, 6, 4);
    EXPECT_EQ(s.count, 262144);
    EXPECT_EQ(s.size_bytes, 1 << 20);
  }
  // Below one element per rank the size is 0, as nccl-tests prints it.
  EXPECT_EQ(nccl_tests_size(Collective::AllGather, 8, 16, 4).size_bytes, 0);
}

constexpr const char* kScenario = R"(name: two-servers
topology:
  type: rail_optimized
  nodes: 2
  nodes_per_leaf: 2
  node: {gpus: 8}
  leaf: {uplinks: 8}
  spine: {count: 8}
job: {ranks: all}
)";

struct Sweep {
  std::unique_ptr<scenario::ScenarioRun> run;
  const NcclTestsWorkload* workload = nullptr;
};

Sweep sweep(const std::vector<std::string>& args) {
  scenario::Overrides o;
  o.skip_workloads = true;
  Sweep s;
  s.run = scenario::load_scenario_text(kScenario, "two-servers.yaml", test::source_path(""), o);
  auto w = std::make_unique<NcclTestsWorkload>(
      "nccl-tests", OpRunner(s.run->fabric, s.run->job_ranks, s.run->nccl), parse(args));
  s.workload = w.get();
  s.run->sim->add_workload(std::move(w), Time{});
  s.run->run();
  return s;
}

TEST(NcclTestsSweep, BandwidthsAreNcclTestsDefinitions) {
  // algbw = size / time (GB/s, 1e9), busbw = algbw x factor; out-of-place and in-place move
  // the same bytes on an idle fabric, so their times agree; the average bus bandwidth is the
  // mean over every row of both halves.
  const Sweep s =
      sweep({"all_gather_perf", "-b", "1K", "-e", "64M", "-f", "4", "-n", "2", "-w", "1"});
  const auto& rows = s.workload->rows();
  ASSERT_EQ(rows.size(), 9u);
  double sum = 0;
  for (const NcclTestsRow& r : rows) {
    for (int k = 0; k < 2; ++k) {
      EXPECT_GT(r.time_us[k], 0);
      EXPECT_NEAR(r.algbw_GBps[k], static_cast<double>(r.size.size_bytes) / r.time_us[k] * 1e-3,
                  1e-12);
      EXPECT_NEAR(r.busbw_GBps[k], r.algbw_GBps[k] * 15.0 / 16, 1e-12);
      sum += r.busbw_GBps[k];
    }
    EXPECT_NEAR(r.time_us[0], r.time_us[1], 1e-6 * r.time_us[0]);
    EXPECT_EQ(r.root, -1);
  }
  EXPECT_NEAR(average_busbw(rows), sum / 18, 1e-12);
  // Larger operations take no less time and reach a higher bus bandwidth (small ones are
  // latency-bound: their times may agree to the picosecond).
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_GE(rows[i].time_us[0], rows[i - 1].time_us[0]);
    EXPECT_GT(rows[i].busbw_GBps[0], rows[i - 1].busbw_GBps[0]);
  }
}

TEST(NcclTestsSweep, IterationsOnAnIdleFabricRepeatTheSameTime) {
  // Every operation runs on the same connections of an otherwise idle fabric: the mean of 5 is
  // the time of 1 (what lets `rocesim validate` simulate one operation per size).
  const Sweep one =
      sweep({"all_reduce_perf", "-b", "8", "-e", "256M", "-f", "32", "-n", "1", "-w", "0"});
  const Sweep five =
      sweep({"all_reduce_perf", "-b", "8", "-e", "256M", "-f", "32", "-n", "5", "-w", "2"});
  ASSERT_EQ(one.workload->rows().size(), five.workload->rows().size());
  for (size_t i = 0; i < one.workload->rows().size(); ++i) {
    EXPECT_NEAR(one.workload->rows()[i].time_us[0], five.workload->rows()[i].time_us[0],
                1e-6 * one.workload->rows()[i].time_us[0]);
  }
}

TEST(NcclTestsTable, ReadsBackWithTheLogReader) {
  // The printed table is nccl-tests' own format: the reader of real logs parses it into the
  // same rows (times to the printed precision), the benchmark, the rank count and the average.
  const Sweep s =
      sweep({"reduce_scatter_perf", "-b", "8", "-e", "1G", "-f", "4", "-n", "1", "-w", "0"});
  std::vector<std::string> names;
  for (fabric::NodeId g : s.run->job_ranks)
    names.push_back(s.run->fabric.node(g).name);
  const std::string text =
      format_nccl_tests(s.workload->options(), s.workload->rows(), names, "rocesim test");
  const validation::NcclTestsLog log = validation::read_nccl_tests_log(text, "simulated.log");
  ASSERT_EQ(log.tables.size(), 1u) << text;
  const validation::NcclTestsTable& t = log.tables[0];
  EXPECT_EQ(t.test, "reduce_scatter_perf");
  EXPECT_EQ(t.collective, "reducescatter");
  EXPECT_EQ(t.nranks, 16);
  EXPECT_EQ(t.nodes, 2);
  ASSERT_EQ(t.rows.size(), s.workload->rows().size());
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const NcclTestsRow& r = s.workload->rows()[i];
    EXPECT_EQ(t.rows[i].size_bytes, r.size.size_bytes);
    EXPECT_EQ(t.rows[i].count, r.size.count);
    EXPECT_EQ(t.rows[i].type, "float");
    EXPECT_EQ(t.rows[i].redop, "sum");
    EXPECT_EQ(t.rows[i].wrong_out, "N/A");
    // %7.2f below 100 us, %7.1f below 10 ms, %7.0f above.
    const double digits = r.time_us[0] < 100 ? 0.005 : r.time_us[0] < 1e4 ? 0.05 : 0.5;
    EXPECT_NEAR(t.rows[i].time_us_out, r.time_us[0], digits + 1e-9);
    EXPECT_NEAR(t.rows[i].busbw_out, r.busbw_GBps[0], 0.005 + 1e-9);
  }
  ASSERT_TRUE(t.avg_busbw.has_value());
  EXPECT_NEAR(*t.avg_busbw, average_busbw(s.workload->rows()), 1e-4 * *t.avg_busbw);
  // With NCCL_DEBUG=INFO's lines among the rows, as real logs have them, the same rows.
  NcclDebugLog debug{"node0:0:0 [0] NCCL INFO ", {"16 coll channels"}, true};
  const std::string logged =
      format_nccl_tests(s.workload->options(), s.workload->rows(), names, "rocesim test", &debug);
  EXPECT_NE(logged, text);
  const validation::NcclTestsLog again = validation::read_nccl_tests_log(logged, "debug.log");
  ASSERT_EQ(again.tables.size(), 1u);
  ASSERT_EQ(again.tables[0].rows.size(), t.rows.size());
  for (size_t i = 0; i < t.rows.size(); ++i)
    EXPECT_EQ(again.tables[0].rows[i].time_us_out, t.rows[i].time_us_out);
}

TEST(NcclTestsTable, NcclDebugReadsItsLevelAndSubsystemsAsNcclDoes) {
  EXPECT_TRUE(nccl_debug_info("INFO"));
  EXPECT_TRUE(nccl_debug_info("info"));
  EXPECT_TRUE(nccl_debug_info("TRACE"));
  EXPECT_FALSE(nccl_debug_info("WARN"));
  EXPECT_FALSE(nccl_debug_info("VERSION"));
  EXPECT_FALSE(nccl_debug_info(""));
  EXPECT_TRUE(nccl_debug_subsys("INIT,BOOTSTRAP,ENV", "INIT"));  // NCCL's default
  EXPECT_FALSE(nccl_debug_subsys("INIT,BOOTSTRAP,ENV", "TUNING"));
  EXPECT_TRUE(nccl_debug_subsys("init,tuning", "TUNING"));
  EXPECT_TRUE(nccl_debug_subsys("ALL", "TUNING"));
  EXPECT_FALSE(nccl_debug_subsys("^TUNING", "TUNING"));
  EXPECT_TRUE(nccl_debug_subsys("^TUNING", "INIT"));
  EXPECT_FALSE(nccl_debug_subsys("^ALL", "INIT"));
  EXPECT_FALSE(nccl_debug_subsys("", "INIT"));
}

TEST(NcclTestsTable, PointToPointTablesLogNoTunersChoice) {
  // NCCL has no algorithm to choose for an AlltoAll: the tuning lines are for collectives.
  const Sweep s = sweep({"alltoall_perf", "-b", "1M", "-e", "4M", "-f", "2", "-n", "1", "-w", "0"});
  std::vector<std::string> names;
  for (fabric::NodeId g : s.run->job_ranks)
    names.push_back(s.run->fabric.node(g).name);
  NcclDebugLog debug{"node0:0:0 [0] NCCL INFO ", {"init"}, true};
  const std::string text =
      format_nccl_tests(s.workload->options(), s.workload->rows(), names, "rocesim test", &debug);
  EXPECT_NE(text.find("NCCL INFO init\n"), std::string::npos);
  EXPECT_EQ(text.find("Bytes -> Algo"), std::string::npos);
}

TEST(NcclTestsSweep, ACollectiveOfNoElementsRunsNothing) {
  // NCCL returns from a collective of count 0 before it makes a task (enqueue.cc, taskAppend):
  // no tuner, no kernel. On 16 ranks all_gather_perf's 8, 16 and 32 B hold no float per rank
  // (size 0): 0 us, algorithm "none", no TUNING line; 64 B (one float a rank) pays its kernel
  // and its ring, and takes what it takes alone (what ran before does not count). AlltoAll's
  // point-to-point operations of 0 bytes still run: every pair exchanges an empty message (one
  // byte on the wire here), so its size-0 rows take what 64 B (one float a pair) takes, to a
  // few bytes' serialization.
  const Sweep s =
      sweep({"all_gather_perf", "-b", "8", "-e", "64", "-f", "2", "-n", "1", "-w", "0"});
  const auto& rows = s.workload->rows();
  ASSERT_EQ(rows.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rows[i].size.size_bytes, 0);
    EXPECT_EQ(rows[i].time_us[0], 0.0);
    EXPECT_EQ(rows[i].time_us[1], 0.0);
    EXPECT_EQ(path_name(Collective::AllGather, 16, rows[i].algorithm, 0), "none");
    EXPECT_EQ(path_protocol_name(Collective::AllGather, rows[i].protocol, 0), "none");
  }
  const Sweep alone = sweep({"all_gather_perf", "-b", "64", "-e", "64", "-n", "1", "-w", "0"});
  EXPECT_EQ(rows[3].size.size_bytes, 64);
  EXPECT_GT(rows[3].time_us[0], 5.0);
  EXPECT_EQ(rows[3].time_us[0], alone.workload->rows()[0].time_us[0]);
  std::vector<std::string> names;
  for (fabric::NodeId g : s.run->job_ranks)
    names.push_back(s.run->fabric.node(g).name);
  NcclDebugLog debug{"node0:0:0 [0] NCCL INFO ", {}, true};
  const std::string text =
      format_nccl_tests(s.workload->options(), s.workload->rows(), names, "rocesim test", &debug);
  EXPECT_EQ(text.find("AllGather: 0 Bytes"), std::string::npos) << text;
  EXPECT_NE(text.find("AllGather: 64 Bytes -> Algo"), std::string::npos) << text;

  const Sweep a2a =
      sweep({"alltoall_perf", "-b", "8", "-e", "64", "-f", "8", "-n", "1", "-w", "0"});
  ASSERT_EQ(a2a.workload->rows().size(), 2u);
  EXPECT_EQ(a2a.workload->rows()[0].size.size_bytes, 0);
  EXPECT_EQ(a2a.workload->rows()[1].size.size_bytes, 64);
  EXPECT_GT(a2a.workload->rows()[0].time_us[0], 5.0);
  EXPECT_NEAR(a2a.workload->rows()[0].time_us[0], a2a.workload->rows()[1].time_us[0], 1e-3);
}

}  // namespace
}  // namespace rocesim::collectives::nccl

namespace rocesim::collectives::nccl {
namespace {

/// A workload with one runner per rank set, all started at once: the seam for workloads with
/// several collectives in flight (communicators, streams). Callbacks go to runner_of(tag).
class Concurrent final : public engine::Workload {
 public:
  Concurrent(std::vector<OpRunner> runners, int64_t bytes)
      : Workload("concurrent"), runners_(std::move(runners)), bytes_(bytes) {}
  std::string_view type() const override { return "concurrent"; }
  void start(engine::Simulation& sim, engine::WorkloadId id) override {
    for (OpRunner& r : runners_)
      r.start(sim, id, Collective::AllReduce, bytes_);
  }
  void on_transfer_done(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) override {
    runner(tag).on_transfer_done(sim, id, tag);
    check(sim, id);
  }
  void on_timer(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) override {
    runner(tag).on_timer(sim, id, tag);
    check(sim, id);
  }
  double seconds(size_t k) const { return runners_[k].result().duration().in_seconds(); }

 private:
  OpRunner& runner(uint64_t tag) {
    const int64_t r = OpRunner::runner_of(tag);
    EXPECT_GE(r, 0);
    return runners_.at(static_cast<size_t>(r));
  }
  void check(engine::Simulation& sim, engine::WorkloadId id) {
    for (const OpRunner& r : runners_) {
      if (!r.done()) return;
    }
    sim.finish(id);
  }
  std::vector<OpRunner> runners_;
  int64_t bytes_;
};

/// Runs AllReduces of `bytes` at once on the given rank sets (one runner each) of the
/// two-server scenario, Ring/Simple, and returns each one's time.
std::vector<double> concurrent(const std::vector<std::vector<size_t>>& sets, int64_t bytes) {
  scenario::Overrides o;
  o.skip_workloads = true;
  auto run = scenario::load_scenario_text(kScenario, "two-servers.yaml", test::source_path(""), o);
  NcclConfig cfg = run->nccl;
  cfg.algos.fill(only(Algorithm::Ring));
  cfg.protos.fill(only(Protocol::Simple));
  std::vector<OpRunner> runners;
  for (size_t k = 0; k < sets.size(); ++k) {
    std::vector<fabric::NodeId> ranks;
    for (size_t r : sets[k])
      ranks.push_back(run->job_ranks[r]);
    runners.emplace_back(run->fabric, ranks, cfg, static_cast<uint32_t>(k));
  }
  auto w = std::make_unique<Concurrent>(std::move(runners), bytes);
  const Concurrent* c = w.get();
  run->sim->add_workload(std::move(w), Time{});
  run->run();
  std::vector<double> out;
  for (size_t k = 0; k < sets.size(); ++k)
    out.push_back(c->seconds(k));
  return out;
}

TEST(OpRunners, SeveralInOneWorkloadRunAtOnceAndShareTheFabric) {
  // Two servers of 8 GPUs. A 1 GiB ring AllReduce over GPUs 0-3 of both servers and one over
  // GPUs 4-7 use disjoint GPUs, NICs and NVLinks (rails 0-3 and 4-7; one spine plane each), so
  // each takes what it takes alone. Two over the same 8 ranks share every link of their rings:
  // at 1 GiB the bandwidth term dominates, so each takes about twice the time of one alone.
  const std::vector<size_t> low{0, 1, 2, 3, 8, 9, 10, 11}, high{4, 5, 6, 7, 12, 13, 14, 15};
  const int64_t gib = int64_t{1} << 30;
  const double alone = concurrent({low}, gib)[0];
  const std::vector<double> apart = concurrent({low, high}, gib);
  EXPECT_NEAR(apart[0], alone, 1e-9 * alone);
  EXPECT_NEAR(apart[1], alone, 1e-9 * alone);
  const std::vector<double> shared = concurrent({low, low}, gib);
  EXPECT_NEAR(shared[0] / alone, 2.0, 0.05);
  EXPECT_NEAR(shared[1], shared[0], 1e-6 * alone);
}

/// Runs collectives one after another on one runner.
class Sequence final : public engine::Workload {
 public:
  Sequence(OpRunner runner, std::vector<Collective> ops)
      : Workload("sequence"), runner_(std::move(runner)), ops_(std::move(ops)) {}
  std::string_view type() const override { return "sequence"; }
  void start(engine::Simulation& sim, engine::WorkloadId id) override { next(sim, id); }
  void on_transfer_done(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) override {
    runner_.on_transfer_done(sim, id, tag);
    if (runner_.done()) next(sim, id);
  }
  void on_timer(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) override {
    runner_.on_timer(sim, id, tag);
    if (runner_.done()) next(sim, id);
  }
  std::vector<double> seconds;

 private:
  void next(engine::Simulation& sim, engine::WorkloadId id) {
    if (at_ > 0) seconds.push_back(runner_.result().duration().in_seconds());
    if (at_ == ops_.size()) {
      sim.finish(id);
      return;
    }
    runner_.start(sim, id, ops_[at_++], int64_t{64} << 20, 3);
  }
  OpRunner runner_;
  std::vector<Collective> ops_;
  size_t at_ = 0;
};

/// Runs `ops` on one runner over all 16 ranks of the two-server scenario (NCCL_MAX_NCHANNELS
/// `max_channels` where > 0); returns the QPs the simulation made and each operation's time.
std::pair<size_t, std::vector<double>> sequence(const std::vector<Collective>& ops,
                                                int max_channels = 0) {
  scenario::Overrides o;
  o.skip_workloads = true;
  auto run = scenario::load_scenario_text(kScenario, "two-servers.yaml", test::source_path(""), o);
  NcclConfig nccl = run->nccl;
  if (max_channels > 0) nccl.max_channels = max_channels;
  auto w = std::make_unique<Sequence>(OpRunner(run->fabric, run->job_ranks, nccl, 0), ops);
  const Sequence* seq = w.get();
  run->sim->add_workload(std::move(w), Time{});
  run->run();
  return {run->sim->qps().size(), seq->seconds};
}

TEST(OpRunners, PointToPointOperationsShareTheirPairsConnections) {
  // NCCL connects a pair once: a Gather, Scatter or Send/Recv uses the connections of the
  // pairs it shares with an AlltoAll, whichever ran first (an AlltoAll keeps its pairs' in a
  // table of its own, beside the map where the others are). So the QPs after Gather, AlltoAll,
  // Scatter, Send/Recv and AlltoAll again are those of one AlltoAll (every ordered pair), and
  // each operation takes the time it takes on a runner that has made its connections already.
  using enum Collective;
  const auto [alone, alone_s] = sequence({AllToAll});
  const auto [mixed, mixed_s] = sequence({Gather, AllToAll, Scatter, SendRecv, AllToAll});
  ASSERT_GT(alone, 16u * 15u);  // every ordered pair, two channels a pair across the servers
  EXPECT_EQ(mixed, alone);
  ASSERT_EQ(mixed_s.size(), 5u);
  EXPECT_DOUBLE_EQ(mixed_s[1], alone_s[0]);
  EXPECT_DOUBLE_EQ(mixed_s[4], alone_s[0]);
  EXPECT_EQ(sequence({AllToAll, Gather}).first, alone);
  EXPECT_EQ(sequence({SendRecv, Gather, Scatter}).first,
            sequence({Scatter, Gather, SendRecv}).first);
}

TEST(OpRunners, BatchedPointToPointOperationsKeepTheirPlanOnlyForTheSameTransfers) {
  // With one channel the 16 ranks' AlltoAll runs in NCCL's batches (a rank's copy to itself and
  // its 7 NVLink peers, then 16 network parts, 8 to a batch: three waves), slower than with
  // every pair at once. A runner keeps the waves of its last plan for an operation with the
  // same transfers, and makes new ones for another: every operation of a mixed sequence takes
  // the time it takes alone on a runner.
  using enum Collective;
  const double all_at_once = sequence({AllToAll}).second[0];
  const double a2a = sequence({AllToAll}, 1).second[0];
  const double gather = sequence({Gather}, 1).second[0];
  EXPECT_GT(a2a, all_at_once * 1.05);
  const std::vector<double> mixed =
      sequence({AllToAll, AllToAll, Gather, AllToAll, Gather}, 1).second;
  ASSERT_EQ(mixed.size(), 5u);
  for (const size_t i : {0, 1, 3})
    EXPECT_DOUBLE_EQ(mixed[i], a2a) << "operation " << i;
  for (const size_t i : {2, 4})
    EXPECT_DOUBLE_EQ(mixed[i], gather) << "operation " << i;
}

}  // namespace
}  // namespace rocesim::collectives::nccl
