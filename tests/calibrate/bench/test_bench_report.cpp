// rocesim-bench's GPU-free half: statistics, sizes, bandwidths, the nccl-tests table and the
// measured dataset, read back by the validation readers.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "calibrate/lib/bench_report.hpp"
#include "sim/metrics/table.hpp"
#include "tests/support/test_support.hpp"
#include "validation/lib/nccl_tests_log.hpp"

namespace rocesim::calibrate {
namespace {

namespace fs = std::filesystem;
using test::contains;

// ---------------------------------------------------------------------------------------------
// Statistics

TEST(BenchStats, OneToHundredHasClosedForms) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i)
    v.push_back(i);  // unsorted on purpose
  const TimeStats t = time_stats(v);
  EXPECT_EQ(t.samples, 100u);
  EXPECT_DOUBLE_EQ(t.mean_us, 50.5);
  EXPECT_DOUBLE_EQ(t.min_us, 1);
  EXPECT_DOUBLE_EQ(t.max_us, 100);
  // Linear interpolation: position p (n - 1). Median: 49.5 -> (50 + 51) / 2.
  EXPECT_DOUBLE_EQ(t.median_us, 50.5);
  // p99: 0.99 * 99 = 98.01 -> x_98 + 0.01 (x_99 - x_98) = 99 + 0.01.
  EXPECT_NEAR(t.p99_us, 99.01, 1e-12);
}

TEST(BenchStats, SmallSamples) {
  const TimeStats one = time_stats({7.5});
  EXPECT_EQ(one.samples, 1u);
  EXPECT_DOUBLE_EQ(one.mean_us, 7.5);
  EXPECT_DOUBLE_EQ(one.min_us, 7.5);
  EXPECT_DOUBLE_EQ(one.median_us, 7.5);
  EXPECT_DOUBLE_EQ(one.p99_us, 7.5);
  EXPECT_DOUBLE_EQ(one.max_us, 7.5);

  const TimeStats four = time_stats({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(four.mean_us, 2.5);
  EXPECT_DOUBLE_EQ(four.median_us, 2.5);  // position 1.5
  EXPECT_NEAR(four.p99_us, 3.97, 1e-12);  // position 2.97
  const TimeStats odd = time_stats({10, 30, 20});
  EXPECT_DOUBLE_EQ(odd.median_us, 20);
  EXPECT_NEAR(odd.p99_us, 29.8, 1e-12);  // position 1.98 -> 20 + 0.98 * 10

  const TimeStats same = time_stats(std::vector<double>(20, 12.25));
  EXPECT_DOUBLE_EQ(same.mean_us, 12.25);
  EXPECT_DOUBLE_EQ(same.p99_us, 12.25);
}

TEST(BenchStats, RejectsNoSamplesAndNonTimes) {
  EXPECT_THROW(time_stats({}), std::invalid_argument);
  EXPECT_THROW(time_stats({1, -2}), std::invalid_argument);
  EXPECT_THROW(time_stats({1, std::nan("")}), std::invalid_argument);
  EXPECT_THROW(time_stats({INFINITY}), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Collectives, sizes, bandwidth

TEST(BenchCollectives, NamesInEverySpelling) {
  EXPECT_EQ(parse_bench_collective("all_reduce"), BenchCollective::AllReduce);
  EXPECT_EQ(parse_bench_collective("AllReduce"), BenchCollective::AllReduce);
  EXPECT_EQ(parse_bench_collective("all_gather_perf"), BenchCollective::AllGather);
  EXPECT_EQ(parse_bench_collective("reduce-scatter"), BenchCollective::ReduceScatter);
  EXPECT_EQ(parse_bench_collective("all_to_all"), BenchCollective::AlltoAll);
  EXPECT_EQ(parse_bench_collective("sendrecv"), BenchCollective::SendRecv);
  EXPECT_EQ(parse_bench_collective("broadcast"), BenchCollective::Broadcast);
  EXPECT_FALSE(parse_bench_collective("reduce"));  // nccl-tests has it; rocesim-bench does not
  EXPECT_FALSE(parse_bench_collective("allreduc"));
  for (const BenchCollective c : kBenchCollectives) {
    EXPECT_EQ(parse_bench_collective(bench_option_name(c)), c);
    EXPECT_EQ(validation::normalise_collective(bench_binary(c)), bench_canonical_name(c));
    EXPECT_EQ(validation::nccl_tests_binary(bench_canonical_name(c)), bench_binary(c));
  }
}

TEST(BenchSizes, SweepLikeNcclTests) {
  EXPECT_EQ(bench_sweep({8, 64, 1, 2}), (std::vector<int64_t>{8, 16, 32, 64}));
  EXPECT_EQ(bench_sweep({8, 100, 1, 2}), (std::vector<int64_t>{8, 16, 32, 64}));
  EXPECT_EQ(bench_sweep({1 << 20, 3 << 20, 1 << 20, 1}),
            (std::vector<int64_t>{1 << 20, 2 << 20, 3 << 20}));
  EXPECT_EQ(bench_sweep(BenchSweep{}), (std::vector<int64_t>{32 << 20}));
}

TEST(BenchSizes, ColumnsAndBuffersPerCollective) {
  // 4 ranks, float, 1000 B requested: 250 elements; the divided collectives use 250 / 4 = 62 per
  // rank, 62 * 4 * 4 = 992 B in all.
  const BenchSize ar = bench_size(BenchCollective::AllReduce, 1000, 4, 4);
  EXPECT_EQ(ar.size_bytes, 1000);
  EXPECT_EQ(ar.count, 250);
  EXPECT_EQ(ar.send_bytes, 1000);
  EXPECT_EQ(ar.recv_bytes, 1000);
  const BenchSize ag = bench_size(BenchCollective::AllGather, 1000, 4, 4);
  EXPECT_EQ(ag.size_bytes, 992);
  EXPECT_EQ(ag.count, 62);
  EXPECT_EQ(ag.send_bytes, 248);
  EXPECT_EQ(ag.recv_bytes, 992);
  const BenchSize rs = bench_size(BenchCollective::ReduceScatter, 1000, 4, 4);
  EXPECT_EQ(rs.size_bytes, 992);
  EXPECT_EQ(rs.count, 62);
  EXPECT_EQ(rs.send_bytes, 992);
  EXPECT_EQ(rs.recv_bytes, 248);
  const BenchSize a2a = bench_size(BenchCollective::AlltoAll, 1000, 4, 4);
  EXPECT_EQ(a2a.size_bytes, 992);
  EXPECT_EQ(a2a.count, 62);  // per peer
  EXPECT_EQ(a2a.send_bytes, 992);
  const BenchSize bc = bench_size(BenchCollective::Broadcast, 10, 4, 2);
  EXPECT_EQ(bc.size_bytes, 10);
  EXPECT_EQ(bc.count, 5);
  const BenchSize sr = bench_size(BenchCollective::SendRecv, 7, 2, 4);  // rounded down
  EXPECT_EQ(sr.size_bytes, 4);
  EXPECT_EQ(sr.count, 1);
  EXPECT_THROW(bench_size(BenchCollective::AllReduce, 8, 0, 4), std::invalid_argument);
}

TEST(BenchBandwidth, BusBandwidthFactorsAsNcclTests) {
  EXPECT_DOUBLE_EQ(bench_busbw_factor(BenchCollective::AllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bench_busbw_factor(BenchCollective::AllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bench_busbw_factor(BenchCollective::ReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(bench_busbw_factor(BenchCollective::AlltoAll, 8), 0.875);
  EXPECT_DOUBLE_EQ(bench_busbw_factor(BenchCollective::Broadcast, 8), 1);
  EXPECT_DOUBLE_EQ(bench_busbw_factor(BenchCollective::SendRecv, 8), 1);
  EXPECT_DOUBLE_EQ(bench_busbw_factor(BenchCollective::AllReduce, 16), 1.875);
  // One rank: nothing crosses a bus for the collectives, Broadcast and Send/Recv stay 1.
  EXPECT_DOUBLE_EQ(bench_busbw_factor(BenchCollective::AllReduce, 1), 0);
  EXPECT_DOUBLE_EQ(bench_busbw_factor(BenchCollective::AllGather, 1), 0);
  EXPECT_DOUBLE_EQ(bench_busbw_factor(BenchCollective::Broadcast, 1), 1);
  EXPECT_DOUBLE_EQ(bench_busbw_factor(BenchCollective::SendRecv, 1), 1);
}

TEST(BenchBandwidth, RowFromMeanTimes) {
  const BenchSize s = bench_size(BenchCollective::AllReduce, 1000000, 8, 4);
  const BenchRow r =
      make_bench_row(BenchCollective::AllReduce, s, 3, 8, time_stats({90, 110}), time_stats({200}));
  EXPECT_EQ(r.root, -1);                    // AllReduce has none
  EXPECT_DOUBLE_EQ(r.algbw_GBps[0], 10.0);  // 1e6 B / 100 us
  EXPECT_DOUBLE_EQ(r.busbw_GBps[0], 17.5);
  EXPECT_DOUBLE_EQ(r.algbw_GBps[1], 5.0);
  EXPECT_DOUBLE_EQ(r.busbw_GBps[1], 8.75);
  const BenchRow b =
      make_bench_row(BenchCollective::Broadcast, s, 3, 8, time_stats({100}), time_stats({100}));
  EXPECT_EQ(b.root, 3);
  EXPECT_DOUBLE_EQ(b.busbw_GBps[0], 10.0);
  EXPECT_DOUBLE_EQ(algbw_GBps(123, 0), 0);
}

// ---------------------------------------------------------------------------------------------
// Machines

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(BenchMachines, RdmaDevicesFromSysfs) {
  const fs::path root = fs::path(test::temp_dir("bench_sysfs")) / "infiniband";
  write(root / "mlx5_1/ports/1/state", "4: ACTIVE\n");
  write(root / "mlx5_1/ports/1/link_layer", "InfiniBand\n");
  write(root / "mlx5_1/ports/1/rate", "400 Gb/sec (4X NDR)\n");
  write(root / "mlx5_0/ports/1/state", "1: DOWN\n");
  write(root / "mlx5_0/ports/1/link_layer", "Ethernet\n");
  write(root / "mlx5_0/ports/1/rate", "100 Gb/sec (2X HDR)\n");
  write(root / "mlx5_0/ports/2/state", "4: ACTIVE\n");
  fs::create_directories(root / "irdma0");  // no ports directory
  const std::vector<NicDevice> d = list_rdma_devices(root.string());
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].name, "irdma0");
  EXPECT_TRUE(d[0].ports.empty());
  EXPECT_FALSE(d[0].active());
  EXPECT_EQ(d[1].name, "mlx5_0");
  ASSERT_EQ(d[1].ports.size(), 2u);
  EXPECT_EQ(d[1].ports[0].port, 1);
  EXPECT_EQ(d[1].ports[0].state, "DOWN");
  EXPECT_EQ(d[1].ports[0].link_layer, "Ethernet");
  EXPECT_DOUBLE_EQ(d[1].ports[0].rate_gbps, 100);
  EXPECT_EQ(d[1].ports[1].state, "ACTIVE");
  EXPECT_DOUBLE_EQ(d[1].ports[1].rate_gbps, 0);  // no rate file
  EXPECT_TRUE(d[1].active());
  EXPECT_EQ(d[2].name, "mlx5_1");
  EXPECT_EQ(d[2].ports[0].link_layer, "InfiniBand");
  EXPECT_DOUBLE_EQ(d[2].ports[0].rate_gbps, 400);
  EXPECT_TRUE(list_rdma_devices((root / "missing").string()).empty());
}

RankRecord record(int rank, const std::string& host, int device) {
  RankRecord r;
  r.rank = rank;
  r.host = host;
  r.pid = 4000 + rank;
  r.device = device;
  r.bus_id = fmt::format("0000:{:02X}:00.0", 0x10 + device);
  r.gpu = "NVIDIA H100 80GB HBM3";
  for (int k = 0; k < 8; ++k) {
    r.nics.push_back(NicDevice{fmt::format("mlx5_{}", k), {{1, "ACTIVE", "InfiniBand", 400}}});
  }
  r.nics.push_back(NicDevice{"mlx5_bond_0", {{1, "DOWN", "Ethernet", 25}}});
  return r;
}

TEST(BenchMachines, RankRecordsRoundTrip) {
  const RankRecord r = record(5, "node-a.cluster", 5);
  const RankRecord back = decode_rank_record(encode_rank_record(r));
  EXPECT_EQ(back.rank, 5);
  EXPECT_EQ(back.host, "node-a.cluster");
  EXPECT_EQ(back.pid, 4005);
  EXPECT_EQ(back.device, 5);
  EXPECT_EQ(back.bus_id, r.bus_id);
  EXPECT_EQ(back.gpu, r.gpu);
  ASSERT_EQ(back.nics.size(), 9u);
  EXPECT_EQ(back.nics[8].name, "mlx5_bond_0");
  EXPECT_EQ(back.nics[8].ports[0].state, "DOWN");
  EXPECT_DOUBLE_EQ(back.nics[8].ports[0].rate_gbps, 25);
  RankRecord bare;
  bare.host = "h";
  EXPECT_TRUE(decode_rank_record(encode_rank_record(bare)).nics.empty());
  EXPECT_THROW(decode_rank_record("garbage"), std::invalid_argument);
}

TEST(BenchMachines, NcclEnvironmentAndVersion) {
  const char* env[] = {"PATH=/usr/bin",  "NCCL_IB_HCA=mlx5_0:1,mlx5_1:1",
                       "NCCL_ALGO=Ring", "XNCCL_NOT=1",
                       "NCCL_WEIRD=a=b", nullptr};
  const auto e = nccl_environment(env);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0], (std::pair<std::string, std::string>{"NCCL_ALGO", "Ring"}));
  EXPECT_EQ(e[1], (std::pair<std::string, std::string>{"NCCL_IB_HCA", "mlx5_0:1,mlx5_1:1"}));
  EXPECT_EQ(e[2], (std::pair<std::string, std::string>{"NCCL_WEIRD", "a=b"}));
  EXPECT_TRUE(nccl_environment(nullptr).empty());
  EXPECT_EQ(nccl_version_string(22809), "2.28.9");
  EXPECT_EQ(nccl_version_string(21903), "2.19.3");
  EXPECT_EQ(nccl_version_string(2804), "2.8.4");
}

// ---------------------------------------------------------------------------------------------
// A run: 16 ranks on two hosts

BenchRun sample_run() {
  BenchRun run;
  run.rocesim_version = "0.1.0";
  run.nccl_version = "2.28.9+cuda13.0";
  run.cuda_runtime = "13.0";
  run.cuda_driver = "13.0";
  run.mpi_library = "Open MPI v4.1.4, package: Debian OpenMPI";
  run.command = "rocesim-bench --collective all_reduce,all_gather,broadcast -b 8 -e 4G -f 8";
  run.env = {{"NCCL_IB_HCA", "mlx5_0:1,mlx5_1:1"}, {"NCCL_ALGO", "Ring"}, {"NCCL_IB_QPS", "2"}};
  for (int r = 0; r < 16; ++r)
    run.ranks.push_back(record(r, r < 8 ? "node1" : "node2", r % 8));
  run.sweep = BenchSweep{8, int64_t{4} << 30, 1, 8};
  run.iters = 2;
  run.warmup = 1;
  run.root = 3;
  return run;
}

/// Rows whose mean times print exactly (two decimals below 100 us, one below 10 ms, none above),
/// so that what the table says is what the statistics hold.
std::vector<BenchRow> sample_rows(const BenchRun& run, BenchCollective c) {
  const double means[] = {24.5, 25.25, 150.5, 2048.5, 30000, 250000};
  std::vector<BenchRow> rows;
  size_t k = 0;
  for (const int64_t requested : bench_sweep(run.sweep)) {
    const double m = means[k++ % 6];
    const BenchSize s = bench_size(c, requested, run.nranks(), run.type_size);
    rows.push_back(make_bench_row(c, s, run.root, run.nranks(), time_stats({m - 0.5, m + 0.5}),
                                  time_stats({m, m})));
  }
  return rows;
}

TEST(BenchRunSummary, HostsGpusNics) {
  const RunSummary s = summarize(sample_run());
  EXPECT_EQ(s.hosts, (std::vector<std::string>{"node1", "node2"}));
  EXPECT_EQ(s.nodes, 2);
  EXPECT_EQ(s.gpus_per_node, 8);
  EXPECT_EQ(s.gpu, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(s.nics_per_node, 8);  // the bond port is DOWN
  EXPECT_EQ(s.nic_speed_gbps, 400);
  EXPECT_EQ(s.fabric, "InfiniBand");

  BenchRun odd = sample_run();
  odd.ranks.pop_back();
  odd.ranks[0].gpu = "NVIDIA A100-SXM4-80GB";
  for (NicDevice& d : odd.ranks[0].nics)
    d.ports[0].link_layer = "Ethernet";
  const RunSummary o = summarize(odd);
  EXPECT_FALSE(o.gpus_per_node);
  EXPECT_EQ(o.gpu, "mixed: NVIDIA A100-SXM4-80GB, NVIDIA H100 80GB HBM3");
  EXPECT_FALSE(o.fabric);  // RoCE on one host, InfiniBand on the other

  BenchRun roce = sample_run();
  for (RankRecord& r : roce.ranks)
    for (NicDevice& d : r.nics)
      d.ports[0].link_layer = "Ethernet";
  EXPECT_EQ(summarize(roce).fabric, "RoCE");
  EXPECT_EQ(bench_table_name(sample_run(), BenchCollective::AllReduce), "2nodes_16ranks_allreduce");
  BenchRun named = sample_run();
  named.name = "h100_ib";
  EXPECT_EQ(bench_table_name(named, BenchCollective::AlltoAll), "h100_ib_alltoall");
}

TEST(BenchTableText, ReadBackByTheNcclTestsReader) {
  const BenchRun run = sample_run();
  const std::vector<BenchRow> rows = sample_rows(run, BenchCollective::AllReduce);
  const std::string text = format_bench_table(run, BenchCollective::AllReduce, rows);
  // The pieces the benchmark prints as it goes add up to the table.
  std::string pieces = format_table_header(run, BenchCollective::AllReduce);
  for (const BenchRow& r : rows)
    pieces += format_table_row(run, BenchCollective::AllReduce, r);
  pieces += format_table_footer(BenchCollective::AllReduce, rows);
  EXPECT_EQ(pieces, text);
  EXPECT_TRUE(contains(text, "# Collective test starting: all_reduce_perf\n"));
  EXPECT_TRUE(contains(text, "#       size         count      type   redop    root     time"));

  const validation::NcclTestsLog log = validation::read_nccl_tests_log(text, "bench");
  EXPECT_TRUE(log.warnings.empty()) << log.warnings.front();
  ASSERT_EQ(log.tables.size(), 1u);
  const validation::NcclTestsTable& t = log.tables.front();
  EXPECT_EQ(t.test, "all_reduce_perf");
  EXPECT_EQ(t.collective, "allreduce");
  EXPECT_EQ(t.nranks, 16);
  EXPECT_EQ(t.nodes, 2);
  EXPECT_EQ(t.nccl_version, "2.28.9+cuda13.0");
  ASSERT_EQ(t.devices.size(), 16u);
  EXPECT_EQ(t.devices[15], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t.params.min_bytes, 8);
  EXPECT_EQ(t.params.max_bytes, int64_t{4} << 30);
  EXPECT_EQ(t.params.step_factor, 8);
  EXPECT_EQ(t.params.iters, 2);
  EXPECT_EQ(t.params.warmup_iters, 1);
  EXPECT_EQ(t.out_of_bounds, 0);
  ASSERT_TRUE(t.avg_busbw);
  EXPECT_NEAR(*t.avg_busbw, average_busbw(rows), 1e-5 * average_busbw(rows));
  ASSERT_EQ(t.rows.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const validation::NcclTestsRow& r = t.rows[i];
    EXPECT_EQ(r.size_bytes, rows[i].size.size_bytes);
    EXPECT_EQ(r.count, rows[i].size.count);
    EXPECT_EQ(r.type, "float");
    EXPECT_EQ(r.redop, "sum");
    EXPECT_EQ(r.root, -1);
    EXPECT_DOUBLE_EQ(r.time_us_out, rows[i].time[0].mean_us);
    EXPECT_DOUBLE_EQ(r.time_us_in, rows[i].time[1].mean_us);
    EXPECT_NEAR(r.busbw_out, rows[i].busbw_GBps[0], 0.005 + 1e-9);
    EXPECT_NEAR(r.algbw_in, rows[i].algbw_GBps[1], 0.005 + 1e-9);
    EXPECT_EQ(r.wrong_out, "N/A");
    EXPECT_TRUE(r.has_out_of_place);
    EXPECT_TRUE(r.has_in_place);
  }
}

TEST(BenchTableText, NonReducingAndRootedCollectives) {
  const BenchRun run = sample_run();
  const std::vector<BenchRow> rows = sample_rows(run, BenchCollective::Broadcast);
  const auto log = validation::read_nccl_tests_log(
      format_bench_table(run, BenchCollective::Broadcast, rows), "bench");
  ASSERT_EQ(log.tables.size(), 1u);
  EXPECT_EQ(log.tables[0].collective, "broadcast");
  EXPECT_EQ(log.tables[0].rows[0].redop, "none");
  EXPECT_EQ(log.tables[0].rows[0].root, 3);

  BenchRun reduced = run;
  reduced.requested_max_bytes = int64_t{64} << 30;
  const auto log2 = validation::read_nccl_tests_log(
      format_bench_table(reduced, BenchCollective::AlltoAll,
                         sample_rows(reduced, BenchCollective::AlltoAll)),
      "bench");
  ASSERT_EQ(log2.tables.size(), 1u);
  EXPECT_EQ(log2.tables[0].collective, "alltoall");
  EXPECT_EQ(log2.tables[0].params.max_bytes, int64_t{4} << 30);
}

// ---------------------------------------------------------------------------------------------
// The dataset

std::vector<BenchTable> sample_tables(const BenchRun& run) {
  std::vector<BenchTable> tables;
  for (const BenchCollective c :
       {BenchCollective::AllReduce, BenchCollective::AllGather, BenchCollective::Broadcast}) {
    BenchTable t;
    t.collective = c;
    t.rows = sample_rows(run, c);
    t.text = format_bench_table(run, c, t.rows);
    tables.push_back(std::move(t));
  }
  return tables;
}

TEST(BenchDataset, ReadBackByTheMeasuredDatasetReader) {
  const BenchRun run = sample_run();
  const std::vector<BenchTable> tables = sample_tables(run);
  const std::string dir = test::temp_dir("bench_dataset");
  const std::string path = dir + "/run.yaml";
  metrics::write_text_file(path, bench_dataset_yaml(run, tables));
  // Only the file: the temporary one was renamed.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);

  const validation::NcclTestsLog log = validation::read_measured_dataset(path);
  EXPECT_TRUE(log.warnings.empty()) << log.warnings.front();
  ASSERT_EQ(log.tables.size(), 3u);
  const char* collectives[] = {"allreduce", "allgather", "broadcast"};
  const char* binaries[] = {"all_reduce_perf", "all_gather_perf", "broadcast_perf"};
  for (size_t k = 0; k < 3; ++k) {
    const validation::NcclTestsTable& t = log.tables[k];
    SCOPED_TRACE(collectives[k]);
    EXPECT_EQ(t.collective, collectives[k]);
    EXPECT_EQ(t.test, binaries[k]);
    EXPECT_EQ(t.nranks, 16);
    EXPECT_EQ(t.nodes, 2);
    EXPECT_EQ(t.nccl_version, "2.28.9+cuda13.0");
    EXPECT_EQ(t.params.iters, 2);
    EXPECT_EQ(t.params.warmup_iters, 1);
    EXPECT_EQ(t.metadata.at("name"), bench_table_name(run, tables[k].collective));
    EXPECT_EQ(t.metadata.at("gpus_per_node"), "8");
    EXPECT_EQ(t.metadata.at("gpu"), "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(t.metadata.at("nics_per_node"), "8");
    EXPECT_EQ(t.metadata.at("nic_speed_gbps"), "400");
    EXPECT_EQ(t.metadata.at("fabric"), "InfiniBand");
    EXPECT_EQ(t.metadata.at("datatype"), "float");
    EXPECT_EQ(t.metadata.at("redop"), k == 0 ? "sum" : "none");
    EXPECT_EQ(t.metadata.at("command"), run.command);
    EXPECT_EQ(t.metadata.at("env.NCCL_IB_HCA"), "mlx5_0:1,mlx5_1:1");
    EXPECT_EQ(t.metadata.at("env.NCCL_ALGO"), "Ring");
    EXPECT_EQ(t.metadata.at("env.NCCL_IB_QPS"), "2");
    const std::vector<BenchRow>& rows = tables[k].rows;
    ASSERT_EQ(t.rows.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(t.rows[i].size_bytes, rows[i].size.size_bytes);
      EXPECT_EQ(t.rows[i].count, rows[i].size.count);
      EXPECT_DOUBLE_EQ(t.rows[i].time_us_out, rows[i].time[0].mean_us);
      EXPECT_DOUBLE_EQ(t.rows[i].time_us_in, rows[i].time[1].mean_us);
      // Locations point into the YAML file, at the row's line.
      EXPECT_GT(t.rows[i].where.line, 1);
    }
  }

  // raw_table_verbatim is the printed text, byte for byte.
  const YAML::Node doc = YAML::LoadFile(path);
  EXPECT_EQ(doc["source"].as<std::string>(), "rocesim-bench");
  EXPECT_EQ(doc["format"].as<std::string>(), "rocesim-bench/1");
  for (size_t k = 0; k < 3; ++k)
    EXPECT_EQ(doc["tables"][k]["raw_table_verbatim"].as<std::string>(), tables[k].text);
  const YAML::Node t0 = doc["tables"][0];
  EXPECT_EQ(t0["hosts"].size(), 2u);
  EXPECT_EQ(t0["nic_devices"]["node2"].size(), 9u);
  EXPECT_EQ(t0["nic_devices"]["node2"][0]["ports"][0]["rate_gbps"].as<double>(), 400);
  EXPECT_EQ(t0["ranks"].size(), 16u);
  EXPECT_EQ(t0["ranks"][9]["host"].as<std::string>(), "node2");
  EXPECT_EQ(t0["mpi"].as<std::string>(), run.mpi_library);
  EXPECT_EQ(t0["warmup_iters"].as<int>(), 1);
  EXPECT_EQ(t0["iters"]["iters"].as<int>(), 2);
  EXPECT_EQ(doc["tables"][2]["root"].as<int>(), 3);
  EXPECT_EQ(t0["root"].as<int>(), -1);
}

TEST(BenchDataset, StatisticsReadBack) {
  const BenchRun run = sample_run();
  std::vector<BenchTable> tables = sample_tables(run);
  // Uneven samples: min, median and p99 differ from the mean.
  const BenchSize s = bench_size(BenchCollective::AllReduce, 8, 16, 4);
  tables[0].rows[0] = make_bench_row(BenchCollective::AllReduce, s, 0, 16,
                                     time_stats({20.125, 21, 22, 30.5}), time_stats({19, 23}));
  tables[0].text = format_bench_table(run, BenchCollective::AllReduce, tables[0].rows);
  const std::string path = test::temp_dir("bench_stats") + "/stats.yaml";
  metrics::write_text_file(path, bench_dataset_yaml(run, tables));

  const std::vector<BenchStatsTable> back = read_bench_dataset(path);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].name, "2nodes_16ranks_allreduce");
  EXPECT_EQ(back[0].collective, "allreduce");
  EXPECT_EQ(back[1].collective, "allgather");
  EXPECT_EQ(back[0].total_ranks, 16);
  EXPECT_EQ(back[0].nodes, 2);
  for (size_t k = 0; k < 3; ++k) {
    ASSERT_EQ(back[k].stats.size(), tables[k].rows.size());
    for (size_t i = 0; i < back[k].stats.size(); ++i) {
      const BenchStatsRow& r = back[k].stats[i];
      const BenchRow& w = tables[k].rows[i];
      EXPECT_EQ(r.size_bytes, w.size.size_bytes);
      EXPECT_EQ(r.count, w.size.count);
      EXPECT_EQ(r.samples, static_cast<int64_t>(w.time[0].samples));
      EXPECT_NEAR(r.time_us_mean, w.time[0].mean_us, 5e-4);
      EXPECT_NEAR(r.time_us_min, w.time[0].min_us, 5e-4);
      EXPECT_NEAR(r.time_us_median, w.time[0].median_us, 5e-4);
      EXPECT_NEAR(r.time_us_p99, w.time[0].p99_us, 5e-4);
      EXPECT_NEAR(r.time_us_max, w.time[0].max_us, 5e-4);
      EXPECT_NEAR(r.busbw_mean, w.busbw_GBps[0], 5e-5);
      ASSERT_TRUE(r.in_place);
      EXPECT_NEAR(r.in_place->mean_us, w.time[1].mean_us, 5e-4);
      EXPECT_NEAR(*r.in_place_busbw_mean, w.busbw_GBps[1], 5e-5);
    }
  }
  const BenchStatsRow& first = back[0].stats[0];
  EXPECT_DOUBLE_EQ(first.time_us_mean, 23.406);  // 93.625 / 4, rounded to the nanosecond
  EXPECT_DOUBLE_EQ(first.time_us_min, 20.125);
  EXPECT_DOUBLE_EQ(first.time_us_median, 21.5);
  EXPECT_DOUBLE_EQ(first.time_us_p99, 30.245);  // position 2.97: 22 + 0.97 * 8.5
  EXPECT_DOUBLE_EQ(first.time_us_max, 30.5);
  EXPECT_DOUBLE_EQ(first.in_place->median_us, 21);
}

TEST(BenchDataset, EmptyEnvironmentAndNoNics) {
  BenchRun run;
  run.mode = "single-process";
  run.rocesim_version = "0.1.0";
  run.gpus_per_process = 1;
  RankRecord r;
  r.host = "ws";
  r.gpu = "NVIDIA L4";
  run.ranks.push_back(r);
  run.sweep = BenchSweep{1 << 20, 1 << 20, 1, 1};
  BenchTable t;
  t.collective = BenchCollective::SendRecv;
  t.rows = {make_bench_row(t.collective, bench_size(t.collective, 1 << 20, 1, 4), 0, 1,
                           time_stats({10}), time_stats({10}))};
  t.text = format_bench_table(run, t.collective, t.rows);
  const std::string path = test::temp_dir("bench_bare") + "/one.yml";
  metrics::write_text_file(path, bench_dataset_yaml(run, {t}));
  const auto log = validation::read_measured_dataset(path);
  ASSERT_EQ(log.tables.size(), 1u);
  EXPECT_EQ(log.tables[0].collective, "sendrecv");
  EXPECT_EQ(log.tables[0].nranks, 1);
  EXPECT_EQ(log.tables[0].metadata.at("nics_per_node"), "0");
  EXPECT_EQ(log.tables[0].metadata.count("nic_speed_gbps"), 0u);  // null
  EXPECT_EQ(log.tables[0].metadata.count("nccl_version"), 0u);
  EXPECT_DOUBLE_EQ(log.tables[0].rows[0].busbw_out, 104.86);  // 1 MiB / 10 us, factor 1
  EXPECT_EQ(read_bench_dataset(path)[0].stats.size(), 1u);
}

TEST(BenchDataset, ReaderNamesWhatIsWrong) {
  // A transcribed dataset is not a rocesim-bench one.
  const InputError e = test::input_error([] {
    read_bench_dataset(test::source_path(
        "validation/data/measured/nvidia_nccl-tests_issue309_h100_ib_2-8nodes.yaml"));
  });
  EXPECT_TRUE(contains(e.what(), "format")) << e.what();

  const std::string dir = test::temp_dir("bench_bad");
  std::ofstream(dir + "/bad.yaml") << "format: rocesim-bench/1\ntables:\n- collective: allreduce\n"
                                      "  total_ranks: 2\n  nodes: 1\n  stats:\n"
                                      "  - {size_bytes: 8, count: 2, time_us_mean: fast}\n";
  const InputError e2 = test::input_error([&] { read_bench_dataset(dir + "/bad.yaml"); });
  EXPECT_TRUE(contains(e2.what(), "bad.yaml:7")) << e2.what();
  EXPECT_TRUE(contains(e2.what(), "time_us_mean")) << e2.what();
}

TEST(BenchOutput, ProblemsBeforeTheRun) {
  const std::string dir = test::temp_dir("bench_out");
  EXPECT_FALSE(output_problem(dir + "/ok.yaml"));
  EXPECT_FALSE(fs::exists(dir + "/ok.yaml"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 0);
  EXPECT_TRUE(contains(*output_problem(dir + "/out.txt"), ".yaml"));
  EXPECT_TRUE(contains(*output_problem(dir + "/missing/out.yaml"), "does not exist"));
  fs::create_directories(dir + "/d.yaml");
  EXPECT_TRUE(contains(*output_problem(dir + "/d.yaml"), "directory"));
  EXPECT_THROW(metrics::write_text_file(dir + "/missing/out.yaml", "x"), std::runtime_error);
  metrics::write_text_file(dir + "/w.yaml", "a: 1\n");
  metrics::write_text_file(dir + "/w.yaml", "a: 2\n");  // replaces
  std::ifstream in(dir + "/w.yaml");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "a: 2");
}

}  // namespace
}  // namespace rocesim::calibrate
