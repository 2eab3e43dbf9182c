// rocesim-bench's command line: nccl-tests' flags, -o as reduction or output file, collectives.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "calibrate/bench/bench_options.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::calibrate {
namespace {

using test::contains;

ParsedBenchArgs parse(std::vector<std::string> args) {
  args.insert(args.begin(), "rocesim-bench");
  std::vector<const char*> argv;
  for (const std::string& a : args)
    argv.push_back(a.c_str());
  return parse_bench_args(static_cast<int>(argv.size()), argv.data());
}

BenchOptions ok(std::vector<std::string> args) {
  const ParsedBenchArgs p = parse(std::move(args));
  EXPECT_TRUE(p.options) << p.err;
  EXPECT_EQ(p.exit_code, kBenchExitOk);
  return p.options.value_or(BenchOptions{});
}

std::string usage_error(std::vector<std::string> args) {
  const ParsedBenchArgs p = parse(std::move(args));
  EXPECT_FALSE(p.options);
  EXPECT_EQ(p.exit_code, kBenchExitUsage);
  EXPECT_TRUE(contains(p.err, "rocesim-bench: ")) << p.err;
  return p.err;
}

TEST(BenchOptions, DefaultsAreNcclTests) {
  const BenchOptions o = ok({});
  EXPECT_EQ(o.collectives, (std::vector<BenchCollective>{BenchCollective::AllReduce}));
  EXPECT_EQ(o.sweep.min_bytes, 32 << 20);
  EXPECT_EQ(o.sweep.max_bytes, 32 << 20);
  EXPECT_EQ(o.sweep.step_bytes, 1 << 20);
  EXPECT_EQ(o.sweep.step_factor, 1);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmup, 5);
  EXPECT_EQ(o.timeout_s, 0);  // nccl-tests' -T 0: no limit
  EXPECT_EQ(o.datatype, "float");
  EXPECT_EQ(o.type_size, 4);
  EXPECT_EQ(o.redop, "sum");
  EXPECT_EQ(o.root, 0);
  EXPECT_FALSE(o.single_process);
  EXPECT_EQ(o.gpus, 0);
  EXPECT_TRUE(o.output.empty());
  EXPECT_EQ(o.command, "rocesim-bench");
}

TEST(BenchOptions, NcclTestsFlags) {
  const BenchOptions o =
      ok({"-b", "8",        "-e", "1G",  "-f", "2",        "-n", "10", "-w", "2",
          "-d", "bfloat16", "-o", "avg", "-o", "out.yaml", "-r", "1",  "-T", "30"});
  EXPECT_EQ(o.sweep.min_bytes, 8);
  EXPECT_EQ(o.sweep.max_bytes, int64_t{1} << 30);
  EXPECT_EQ(o.sweep.step_factor, 2);
  EXPECT_EQ(o.iters, 10);
  EXPECT_EQ(o.warmup, 2);
  EXPECT_EQ(o.datatype, "bfloat16");
  EXPECT_EQ(o.type_size, 2);
  EXPECT_EQ(o.redop, "avg");
  EXPECT_EQ(o.output, "out.yaml");
  EXPECT_EQ(o.root, 1);
  EXPECT_EQ(o.timeout_s, 30);
  EXPECT_EQ(o.command,
            "rocesim-bench -b 8 -e 1G -f 2 -n 10 -w 2 -d bfloat16 -o avg -o out.yaml -r 1 -T 30");

  const BenchOptions l = ok({"--minbytes", "1K", "--maxbytes=4m", "--stepbytes", "512", "--iters",
                             "3", "--warmup_iters", "0", "--datatype", "half", "--op", "max",
                             "--output", "x.yml", "--root", "2", "--timeout", "5"});
  EXPECT_EQ(l.sweep.min_bytes, 1024);
  EXPECT_EQ(l.sweep.max_bytes, 4 << 20);
  EXPECT_EQ(l.sweep.step_bytes, 512);
  EXPECT_EQ(l.sweep.step_factor, 1);
  EXPECT_EQ(l.warmup, 0);
  EXPECT_EQ(l.type_size, 2);
  EXPECT_EQ(l.redop, "max");
  EXPECT_EQ(l.output, "x.yml");
  EXPECT_EQ(l.timeout_s, 5);
  EXPECT_NE(usage_error({"-T", "-1"}), "");

  // -o alone: the output file, the reduction stays sum; or the reduction alone.
  EXPECT_EQ(ok({"-o", "ar.yaml"}).redop, "sum");
  EXPECT_EQ(ok({"-o", "ar.yaml"}).output, "ar.yaml");
  EXPECT_EQ(ok({"-o", "prod"}).redop, "prod");
  EXPECT_TRUE(ok({"-o", "prod"}).output.empty());
}

TEST(BenchOptions, Collectives) {
  EXPECT_EQ(
      ok({"--collective", "all_gather,reduce_scatter", "--collective", "alltoall", "--collective",
          "all_gather"})
          .collectives,
      (std::vector<BenchCollective>{BenchCollective::AllGather, BenchCollective::ReduceScatter,
                                    BenchCollective::AlltoAll}));
  EXPECT_EQ(ok({"--collective", "all"}).collectives.size(), 6u);
  EXPECT_EQ(ok({"--collective", "AllReduce,sendrecv_perf,broadcast"}).collectives,
            (std::vector<BenchCollective>{BenchCollective::AllReduce, BenchCollective::SendRecv,
                                          BenchCollective::Broadcast}));
  EXPECT_TRUE(contains(usage_error({"--collective", "all_reduce,reduce"}), "'reduce'"));
}

TEST(BenchOptions, SingleProcess) {
  const BenchOptions o = ok({"--single-process", "--gpus", "4", "--name", "dgx-h100_a"});
  EXPECT_TRUE(o.single_process);
  EXPECT_EQ(o.gpus, 4);
  EXPECT_EQ(o.name, "dgx-h100_a");
  EXPECT_TRUE(contains(usage_error({"--gpus", "4"}), "--single-process"));
  EXPECT_TRUE(contains(usage_error({"--single-process", "--gpus", "0"}), "--gpus"));
}

TEST(BenchOptions, BadCommandLines) {
  EXPECT_TRUE(contains(usage_error({"--bogus"}), "--bogus"));
  EXPECT_TRUE(contains(usage_error({"-b", "8X"}), "-b"));
  EXPECT_TRUE(contains(usage_error({"-e", "-5"}), "-e"));
  EXPECT_TRUE(contains(usage_error({"-b", "1M", "-e", "1K"}), "-e"));
  EXPECT_TRUE(contains(usage_error({"-b", "1K", "-e", "1M", "-i", "0"}), "-i"));
  EXPECT_TRUE(contains(usage_error({"-f", "0"}), "--stepfactor"));
  EXPECT_TRUE(contains(usage_error({"-n", "0"}), "--iters"));
  EXPECT_TRUE(contains(usage_error({"-d", "float8"}), "bfloat16"));
  EXPECT_TRUE(contains(usage_error({"-o", "sum.txt"}), ".yaml"));
  EXPECT_TRUE(contains(usage_error({"-o", "sum", "-o", "max"}), "twice"));
  EXPECT_TRUE(contains(usage_error({"-o", "a.yaml", "-o", "b.yaml"}), "twice"));
  EXPECT_TRUE(contains(usage_error({"--op", "mulsum"}), "--op"));
  EXPECT_TRUE(contains(usage_error({"--op", "sum", "-o", "max"}), "different"));
  EXPECT_TRUE(contains(usage_error({"--output", "out.csv"}), ".yaml"));
  EXPECT_TRUE(contains(usage_error({"--name", "a b"}), "--name"));
  EXPECT_TRUE(contains(usage_error({"-r", "-1"}), "-r"));
  EXPECT_TRUE(contains(usage_error({"stray"}), "stray"));
}

TEST(BenchOptions, HelpAndVersion) {
  const ParsedBenchArgs h = parse({"--help"});
  EXPECT_FALSE(h.options);
  EXPECT_EQ(h.exit_code, kBenchExitOk);
  EXPECT_TRUE(contains(h.out, "Usage:"));
  EXPECT_TRUE(contains(h.out, "--single-process"));
  EXPECT_TRUE(contains(h.out, "Exit codes"));
  const ParsedBenchArgs v = parse({"--version"});
  EXPECT_EQ(v.exit_code, kBenchExitOk);
  EXPECT_TRUE(contains(v.out, "rocesim-bench "));
}

TEST(BenchOptions, SizesAndQuoting) {
  EXPECT_EQ(parse_bench_size("8"), 8);
  EXPECT_EQ(parse_bench_size("128K"), 128 << 10);
  EXPECT_EQ(parse_bench_size("16g"), int64_t{16} << 30);
  EXPECT_EQ(parse_bench_size("0"), 0);
  EXPECT_FALSE(parse_bench_size(""));
  EXPECT_FALSE(parse_bench_size("G"));
  EXPECT_FALSE(parse_bench_size("1.5M"));
  EXPECT_FALSE(parse_bench_size("99999999999999G"));
  const char* argv[] = {"rocesim-bench", "--name", "a b", "it's", "-b", "8"};
  EXPECT_EQ(shell_join(6, argv), "rocesim-bench --name 'a b' 'it'\\''s' -b 8");
}

}  // namespace
}  // namespace rocesim::calibrate
