// The nccl-tests / rccl-tests log reader: every printed table of the measured datasets parses to
// the rows transcribed next to it, full synthetic logs (headers, launcher prefixes, NCCL INFO
// noise, several tables, a killed run) read as expected, and malformed rows are reported at
// file:line:column with what was expected and what was found.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "sim/scenario/yaml_source.hpp"
#include "tests/support/test_support.hpp"
#include "validation/lib/nccl_tests_log.hpp"

namespace rocesim::validation {
namespace {

using test::contains;

const char* const kDatasets[] = {
    "validation/data/measured/aws_p4d_efa_a100_2node_allreduce.yaml",
    "validation/data/measured/abci_a100_ib_sharp_2node_allreduce.yaml",
    "validation/data/measured/nvidia_nccl-tests_issue309_h100_ib_2-8nodes.yaml",
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    out.push_back(l);
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// 1-based number of the first line of `text` containing `needle`.
int line_of(const std::string& text, const std::string& needle) {
  const std::vector<std::string> lines = lines_of(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (contains(lines[i], needle)) return static_cast<int>(i) + 1;
  }
  ADD_FAILURE() << "no line contains '" << needle << "'";
  return 0;
}

/// Every line of `text` with `prefix` in front, as a launcher writes it.
std::string prefixed(const std::string& prefix, const std::string& text) {
  std::string out;
  for (const std::string& l : lines_of(text))
    out += prefix + l + "\n";
  return out;
}

double number(const ConfigNode& map, const char* key) {
  const ConfigNode* n = map.find(key);
  EXPECT_NE(n, nullptr) << key;
  return n == nullptr ? 0.0 : std::stod(n->value());
}

/// Checks a parsed row against a transcribed `rows` entry of a dataset: every printed number.
void expect_row_matches(const NcclTestsRow& row, const ConfigNode& ref, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(row.size_bytes, std::stoll(ref.find("size_bytes")->value()));
  EXPECT_EQ(row.count, std::stoll(ref.find("count")->value()));
  EXPECT_EQ(row.type, ref.find("type")->value());
  EXPECT_EQ(row.redop, ref.find("redop")->value());
  if (const ConfigNode* root = ref.find("root")) {
    EXPECT_EQ(row.root, std::stoll(root->value()));
  } else {
    EXPECT_EQ(row.root, -1);  // old layout: no root column
  }
  EXPECT_TRUE(row.has_out_of_place);
  EXPECT_TRUE(row.has_in_place);
  EXPECT_DOUBLE_EQ(row.time_us_out, number(ref, "time_us_out_of_place"));
  EXPECT_DOUBLE_EQ(row.algbw_out, number(ref, "algbw_out_of_place"));
  EXPECT_DOUBLE_EQ(row.busbw_out, number(ref, "busbw_out_of_place"));
  EXPECT_DOUBLE_EQ(row.time_us_in, number(ref, "time_us_in_place"));
  EXPECT_DOUBLE_EQ(row.algbw_in, number(ref, "algbw_in_place"));
  EXPECT_DOUBLE_EQ(row.busbw_in, number(ref, "busbw_in_place"));
  // New layout: `#wrong` (a count); old layout: `error` (max relative error, "5e-07").
  const bool old = ref.find("error_out_of_place") != nullptr;
  EXPECT_DOUBLE_EQ(std::stod(row.wrong_out),
                   number(ref, old ? "error_out_of_place" : "wrong_out_of_place"));
  EXPECT_DOUBLE_EQ(std::stod(row.wrong_in), number(ref, old ? "error_in_place" : "wrong_in_place"));
}

/// The value printed on the "# Avg bus bandwidth" line of a raw table.
double printed_avg_busbw(const std::string& raw) {
  for (const std::string& l : lines_of(raw)) {
    const size_t colon = l.find("Avg bus bandwidth    : ");
    if (colon != std::string::npos) return std::stod(l.substr(colon + 23));
  }
  ADD_FAILURE() << "no Avg bus bandwidth line";
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The measured datasets: the verbatim printed text against the transcribed rows.

TEST(NcclTestsLog, EveryDatasetRawTableParsesToItsTranscribedRows) {
  int tables_checked = 0, rows_checked = 0;
  for (const char* relative : kDatasets) {
    const ConfigNode root = scenario::load_yaml_file(test::source_path(relative), "");
    const bool old =
        contains(root.find("nccl_tests_format") != nullptr ? root.find("nccl_tests_format")->value()
                                                           : std::string(),
                 "old");
    for (const ConfigNode& entry : root.find("tables")->items()) {
      const std::string name = entry.find("name")->value();
      SCOPED_TRACE(name);
      const std::string raw = entry.find("raw_table_verbatim")->value();
      const NcclTestsLog log = read_nccl_tests_log(raw, name);
      ASSERT_EQ(log.tables.size(), 1u);
      // The only warning: the collective is inferred (the raw rows name no benchmark).
      ASSERT_EQ(log.warnings.size(), 1u);
      EXPECT_TRUE(contains(log.warnings[0], "names no benchmark")) << log.warnings[0];
      const NcclTestsTable& t = log.tables.front();
      const std::vector<ConfigNode>& ref = entry.find("rows")->items();
      ASSERT_EQ(t.rows.size(), ref.size());
      EXPECT_EQ(static_cast<int64_t>(t.rows.size()), std::stoll(entry.find("n_rows")->value()));
      for (size_t i = 0; i < ref.size(); ++i) {
        expect_row_matches(t.rows[i], ref[i], fmt::format("{} row {}", name, i));
        EXPECT_EQ(t.rows[i].where.line, static_cast<int>(i) + 1);  // rows come first in the raw
        ++rows_checked;
      }
      EXPECT_EQ(t.old_layout, old);
      EXPECT_FALSE(t.truncated);
      ASSERT_TRUE(t.avg_busbw.has_value());
      EXPECT_DOUBLE_EQ(*t.avg_busbw, printed_avg_busbw(raw));
      ASSERT_TRUE(t.out_of_bounds.has_value());
      EXPECT_EQ(*t.out_of_bounds, 0);
      // No benchmark name in the raw rows: AllReduce is recognised from busbw/algbw = 2(n-1)/n.
      EXPECT_EQ(t.collective, "allreduce");
      EXPECT_EQ(t.test, "all_reduce_perf");
      EXPECT_EQ(t.nranks, 0);  // the raw rows do not list the ranks
      ++tables_checked;
    }
  }
  EXPECT_EQ(tables_checked, 9);
  EXPECT_GT(rows_checked, 150);
}

TEST(NcclTestsLog, OpenMpiTaggedRawTableHasItsPrefixesStripped) {
  const ConfigNode root = scenario::load_yaml_file(test::source_path(kDatasets[0]), "");
  const std::string raw = root.find("tables")->items()[0].find("raw_table_verbatim")->value();
  ASSERT_TRUE(contains(raw, "[1,0]<stdout>:"));
  const NcclTestsLog log = read_nccl_tests_log(raw, "aws.log");
  ASSERT_EQ(log.tables.size(), 1u);
  const NcclTestsRow& last = log.tables[0].rows.back();
  EXPECT_EQ(last.size_bytes, 1073741824);
  EXPECT_DOUBLE_EQ(last.time_us_out, 61556);  // printed "%7.0f" above 10 ms
  EXPECT_EQ(last.wrong_out, "5e-07");
  EXPECT_TRUE(log.tables[0].old_layout);
  EXPECT_DOUBLE_EQ(*log.tables[0].avg_busbw, 7.80081);
}

TEST(NcclTestsLog, MeasuredDatasetReaderReadsAllThreeFiles) {
  for (const char* relative : kDatasets) {
    const std::string path = test::source_path(relative);
    SCOPED_TRACE(path);
    const ConfigNode root = scenario::load_yaml_file(path, "");
    const std::vector<std::string> file_lines = lines_of(slurp(path));
    const NcclTestsLog log = read_measured_dataset(path);
    EXPECT_EQ(log.source, path);
    EXPECT_TRUE(log.warnings.empty()) << log.warnings.front();
    const std::vector<ConfigNode>& entries = root.find("tables")->items();
    ASSERT_EQ(log.tables.size(), entries.size());
    for (size_t k = 0; k < entries.size(); ++k) {
      const NcclTestsTable& t = log.tables[k];
      const ConfigNode& entry = entries[k];
      const auto value = [&](const char* key) -> std::string {
        const ConfigNode* n = entry.find(key) != nullptr ? entry.find(key) : root.find(key);
        return n == nullptr || n->is_null() ? std::string() : n->value();
      };
      SCOPED_TRACE(value("name"));
      EXPECT_EQ(t.metadata.at("name"), value("name"));
      EXPECT_EQ(t.collective, "allreduce");
      EXPECT_EQ(t.test, "all_reduce_perf");
      EXPECT_EQ(t.nranks, std::stoi(value("total_ranks")));
      EXPECT_EQ(t.nodes, std::stoi(value("nodes")));
      EXPECT_EQ(t.metadata.at("gpus_per_node"), "8");
      EXPECT_EQ(t.metadata.at("gpu"), value("gpu"));
      EXPECT_EQ(t.nccl_version, value("nccl_version"));
      EXPECT_EQ(t.metadata.count("nccl_version"), value("nccl_version").empty() ? 0u : 1u);
      EXPECT_EQ(t.metadata.count("nic_speed_gbps"), value("nic_speed_gbps").empty() ? 0u : 1u);
      EXPECT_TRUE(t.devices.empty());
      EXPECT_FALSE(t.truncated);
      EXPECT_EQ(t.where.line, entry.where().line);
      ASSERT_EQ(t.rows.size(), entry.find("rows")->items().size());
      for (size_t i = 0; i < t.rows.size(); ++i) {
        const NcclTestsRow& row = t.rows[i];
        expect_row_matches(row, entry.find("rows")->items()[i], fmt::format("row {}", i));
        // Rows are located in the YAML file itself: the printed line starts at `where`.
        ASSERT_EQ(*row.where.file, path);
        ASSERT_GE(row.where.line, 1);
        const std::string& file_line = file_lines[static_cast<size_t>(row.where.line - 1)];
        ASSERT_GE(row.where.column, 1);
        const std::string printed = file_line.substr(static_cast<size_t>(row.where.column - 1));
        EXPECT_TRUE(contains(printed, std::to_string(row.size_bytes))) << printed;
        EXPECT_EQ(printed, lines_of(entry.find("raw_table_verbatim")->value())[i]);
      }
    }
  }
}

TEST(NcclTestsLog, MeasuredDatasetMetadataComesFromTheTableThenTheFile) {
  const NcclTestsLog aws = read_measured_dataset(test::source_path(kDatasets[0]));
  ASSERT_EQ(aws.tables.size(), 1u);
  const NcclTestsTable& a = aws.tables[0];
  EXPECT_TRUE(a.old_layout);
  EXPECT_EQ(a.nccl_version, "2.8.3+cuda11.2");
  EXPECT_EQ(a.metadata.at("nics_per_node"), "4");
  EXPECT_EQ(a.metadata.at("nic_speed_gbps"), "100");
  EXPECT_EQ(a.metadata.at("binary"), "all_reduce_perf");
  EXPECT_EQ(a.params.warmup_iters, 5);
  EXPECT_EQ(a.params.iters, 1000);
  EXPECT_DOUBLE_EQ(*a.avg_busbw, 7.80081);

  const NcclTestsLog abci = read_measured_dataset(test::source_path(kDatasets[1]));
  const NcclTestsTable& b = abci.tables.at(0);
  EXPECT_TRUE(contains(b.metadata.at("in_network_reduction"), "SHARP"));
  EXPECT_EQ(b.metadata.count("nic_speed_gbps"), 0u);  // null in the file: left out
  EXPECT_EQ(b.metadata.count("nics_per_node"), 0u);
  EXPECT_EQ(b.metadata.at("env.NCCL_COLLNET_ENABLE"), "1");
  EXPECT_EQ(b.metadata.at("env.UCX_TLS"), "dc,shm,self");
  EXPECT_EQ(b.metadata.at("fabric"), "InfiniBand");
  EXPECT_EQ(b.params.warmup_iters, 50);
  EXPECT_EQ(b.rows.back().size_bytes, 2147483648);

  const NcclTestsLog h100 = read_measured_dataset(test::source_path(kDatasets[2]));
  ASSERT_EQ(h100.tables.size(), 7u);
  const NcclTestsTable& first = h100.tables.front();
  EXPECT_FALSE(first.old_layout);
  EXPECT_EQ(first.nccl_version, "2.26.2+cuda12.8");
  EXPECT_EQ(first.metadata.at("env.NCCL_IB_GID_INDEX"), "0");
  EXPECT_EQ(first.rows.back().size_bytes, 17179869184);  // 16 GiB does not fit 32 bits
  EXPECT_EQ(first.rows.back().count, 4294967296);
  const NcclTestsTable& ring = h100.tables.back();
  EXPECT_EQ(ring.metadata.at("name"), "gjaion_2node_ring_minctas24_qps2");
  EXPECT_EQ(ring.metadata.at("env.NCCL_ALGO"), "Ring");
  EXPECT_EQ(ring.metadata.at("env.NCCL_IB_QPS_PER_CONNECTION"), "2");
  EXPECT_EQ(ring.metadata.count("env.NCCL_IB_HCA"), 0u);  // the first table's env is its own
  EXPECT_TRUE(ring.nccl_version.empty());                 // null for this run
  EXPECT_EQ(ring.nranks, 16);
  EXPECT_EQ(ring.nodes, 2);
  int nodes8 = 0;
  for (const NcclTestsTable& t : h100.tables)
    nodes8 += t.nodes == 8 && t.nranks == 64 ? 1 : 0;
  EXPECT_EQ(nodes8, 2);
}

// ---------------------------------------------------------------------------------------------
// Synthetic full logs

/// The device lines nccl-tests prints, with its format ("#  Rank %2d Group %2d Pid %6d on %10s
/// device %2d [0x%02x] %s"): 8 GPUs on each host.
std::string rank_lines(const std::vector<std::string>& hosts, const std::string& device) {
  static const int kBus[] = {0x1b, 0x43, 0x52, 0x61, 0x9d, 0xc3, 0xd1, 0xdf};
  std::string out;
  int rank = 0;
  for (size_t h = 0; h < hosts.size(); ++h) {
    for (int d = 0; d < 8; ++d, ++rank) {
      out += fmt::format("#  Rank {:2} Group {:2} Pid {:6} on {:>10} device {:2} [0x{:02x}] {}\n",
                         rank, 0, 12345 + 10000 * static_cast<int>(h) + d, hosts[h], d, kBus[d],
                         device);
    }
  }
  return out;
}

/// The device lines of nccl-tests before Group ids ("#   Rank %2d Pid %6d on %10s device %2d
/// [0x%02x] %s"), as on the AWS p4d run: 2 pods x 8 A100.
std::string old_rank_lines() {
  std::string out;
  for (int rank = 0; rank < 16; ++rank) {
    out += fmt::format(
        "#   Rank {:2} Pid {:6} on nccl-efa-tests-worker-{} device {:2} [0x{:02x}] "
        "A100-SXM4-40GB\n",
        rank, 30 + rank % 8, rank / 8, rank % 8, 0x10 + 0x10 * (rank % 8));
  }
  return out;
}

/// One row as nccl-tests prints it: "%12li  %12li  %8s  %6s  %6i" and per half
/// "  %7s  %6.2f  %6.2f  %5li", the time as "%7.0f" from 10 ms, "%7.1f" from 100 us, else "%7.2f".
std::string row(int64_t size, int64_t count, const char* type, const char* redop, int root,
                double t_out, double alg_out, double bus_out, double t_in, double alg_in,
                double bus_in) {
  const auto time = [](double us) {
    return us >= 10000 ? fmt::format("{:7.0f}", us)
           : us >= 100 ? fmt::format("{:7.1f}", us)
                       : fmt::format("{:7.2f}", us);
  };
  return fmt::format(
      "{:12}  {:12}  {:>8}  {:>6}  {:6}  {}  {:6.2f}  {:6.2f}  {:5}  {}  {:6.2f}  "
      "{:6.2f}  {:5}\n",
      size, count, type, redop, root, time(t_out), alg_out, bus_out, 0, time(t_in), alg_in, bus_in,
      0);
}

const char* const kNewColumnHeader =
    "#                                                              out-of-place                  "
    "     in-place          \n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time "
    "  algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us) "
    " (GB/s)  (GB/s)       \n";

/// An all_reduce_perf run on 2 hosts x 8 H100 (rows of the 2-node run of nccl-tests issue 309).
std::string allreduce_run() {
  std::string s;
  s += "# nccl-tests version 2.13.8 nccl-headers=21803 nccl-library=21803\n";
  s += "# Collective test starting: all_reduce_perf\n";
  s += "# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 "
       "iters: 20 agg iters: 1 validation: 1 graph: 0\n";
  s += "#\n# Using devices\n";
  s += rank_lines({"node1", "node2"}, "NVIDIA H100 80GB HBM3");
  s += "node1:12345:12345 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n";
  s += "node1:12345:12345 [0] NCCL INFO NCCL version 2.18.3+cuda12.2\n";
  s += "node2:22345:22401 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB "
       "eth0:10.0.0.2<0>\n";
  s += "node1:12345:12400 [0] NCCL INFO comm 0x55d5c8a0e8d0 rank 0 nranks 16 cudaDev 0 nvmlDev 0 "
       "busId 1b000 commId 0x8f1d7e2a93c6b1e4 - Init COMPLETE\n";
  s += "#\n";
  s += kNewColumnHeader;
  s += row(8, 2, "float", "sum", -1, 68.52, 0.00, 0.00, 24.70, 0.00, 0.00);
  s += row(16, 4, "float", "sum", -1, 24.96, 0.00, 0.00, 24.93, 0.00, 0.00);
  s += row(1048576, 262144, "float", "sum", -1, 71.93, 14.58, 27.33, 71.47, 14.67, 27.51);
  s += row(8388608, 2097152, "float", "sum", -1, 132.6, 63.24, 118.57, 131.4, 63.85, 119.72);
  s += row(1073741824, 268435456, "float", "sum", -1, 4484.9, 239.41, 448.90, 4470.2, 240.20,
           450.37);
  s += row(17179869184, 4294967296, "float", "sum", -1, 68652, 250.24, 469.21, 68668, 250.19,
           469.10);
  s += "# Out of bounds values : 0 OK\n";
  s += "# Avg bus bandwidth    : 139.56 \n";
  s += "#\n";
  s += "# Collective test concluded: all_reduce_perf\n";
  return s;
}

void expect_allreduce_run(const NcclTestsTable& t) {
  EXPECT_EQ(t.test, "all_reduce_perf");
  EXPECT_EQ(t.collective, "allreduce");
  EXPECT_EQ(t.nranks, 16);
  EXPECT_EQ(t.nodes, 2);
  ASSERT_EQ(t.devices.size(), 16u);
  EXPECT_EQ(t.devices.front(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t.devices.back(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t.nccl_version, "2.18.3+cuda12.2");
  EXPECT_EQ(t.metadata.at("nccl_tests_version"), "2.13.8");
  EXPECT_EQ(t.params.threads, 1);
  EXPECT_EQ(t.params.gpus_per_thread, 1);
  EXPECT_EQ(t.params.min_bytes, 8);
  EXPECT_EQ(t.params.max_bytes, 17179869184);
  EXPECT_EQ(t.params.step_factor, 2.0);
  EXPECT_FALSE(t.params.step_bytes.has_value());
  EXPECT_EQ(t.params.warmup_iters, 5);
  EXPECT_EQ(t.params.iters, 20);
  EXPECT_EQ(t.params.agg_iters, 1);
  EXPECT_FALSE(t.old_layout);
  EXPECT_FALSE(t.truncated);
  ASSERT_TRUE(t.avg_busbw.has_value());
  EXPECT_DOUBLE_EQ(*t.avg_busbw, 139.56);
  EXPECT_EQ(t.out_of_bounds, 0);
  ASSERT_EQ(t.rows.size(), 6u);
  const NcclTestsRow& r = t.rows[3];
  EXPECT_EQ(r.size_bytes, 8388608);
  EXPECT_EQ(r.count, 2097152);
  EXPECT_EQ(r.type, "float");
  EXPECT_EQ(r.redop, "sum");
  EXPECT_EQ(r.root, -1);
  EXPECT_DOUBLE_EQ(r.time_us_out, 132.6);
  EXPECT_DOUBLE_EQ(r.algbw_out, 63.24);
  EXPECT_DOUBLE_EQ(r.busbw_out, 118.57);
  EXPECT_EQ(r.wrong_out, "0");
  EXPECT_DOUBLE_EQ(r.time_us_in, 131.4);
  EXPECT_DOUBLE_EQ(r.algbw_in, 63.85);
  EXPECT_DOUBLE_EQ(r.busbw_in, 119.72);
  EXPECT_EQ(r.wrong_in, "0");
  // busbw = algbw x 2(n-1)/n for AllReduce: 63.24 x 30/16 = 118.575, printed 118.57.
  EXPECT_NEAR(r.busbw_out, r.algbw_out * 2.0 * 15.0 / 16.0, 0.01);
  EXPECT_DOUBLE_EQ(t.rows.front().time_us_out, 68.52);
  EXPECT_DOUBLE_EQ(t.rows.back().time_us_out, 68652);
  EXPECT_EQ(t.rows.back().size_bytes, 17179869184);
}

TEST(NcclTestsLog, FullLogWithHeaderFooterAndRankLines) {
  const std::string text =
      "$ mpirun -np 16 -N 8 ./build/all_reduce_perf -b 8 -e 16G -f 2\n" + allreduce_run();
  const NcclTestsLog log = read_nccl_tests_log(text, "allreduce.log");
  EXPECT_EQ(log.source, "allreduce.log");
  EXPECT_TRUE(log.warnings.empty()) << log.warnings.front();
  ASSERT_EQ(log.tables.size(), 1u);
  const NcclTestsTable& t = log.tables[0];
  expect_allreduce_run(t);
  EXPECT_EQ(*t.where.file, "allreduce.log");
  EXPECT_EQ(t.where.line, line_of(text, "# nccl-tests version"));
  EXPECT_EQ(t.rows[0].where.line, line_of(text, "68.52"));
  EXPECT_EQ(t.rows[0].where.column, 1);
  EXPECT_EQ(t.rows[5].where.line, line_of(text, "17179869184  "));
}

TEST(NcclTestsLog, NcclsInfoLinesGiveTheRunsSettings) {
  // With NCCL_DEBUG=INFO, NCCL prints each variable the environment set ("NCCL_ALGO set by
  // environment to Ring.", one line per rank): they are the table's environment, located at
  // the value, as a dataset's `env` would be. A run that follows, with a header of its own and
  // no such lines, has none.
  std::string text = allreduce_run();
  const std::string info =
      "node1:12345:12345 [0] NCCL INFO NCCL_ALGO set by environment to Ring.\n"
      "node2:22345:22345 [0] NCCL INFO NCCL_ALGO set by environment to Ring.\n"
      "node1:12345:12345 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0:1,mlx5_1:1.\n";
  text.insert(text.find("node1:12345:12345 [0] NCCL INFO NCCL version"), info);
  const NcclTestsLog log = read_nccl_tests_log(text + allreduce_run(), "info.log");
  ASSERT_EQ(log.tables.size(), 2u);
  const NcclTestsTable& t = log.tables[0];
  EXPECT_EQ(t.metadata.at("env.NCCL_ALGO"), "Ring");
  EXPECT_EQ(t.metadata.at("env.NCCL_IB_HCA"), "mlx5_0:1,mlx5_1:1");
  const std::string_view second =
      "node2:22345:22345 [0] NCCL INFO NCCL_ALGO set by environment to ";
  EXPECT_EQ(t.where_of("env.NCCL_ALGO").line, line_of(text, std::string(second)));
  EXPECT_EQ(t.where_of("env.NCCL_ALGO").column, static_cast<int>(second.size()) + 1);
  EXPECT_EQ(log.tables[1].metadata.count("env.NCCL_ALGO"), 0u);
}

TEST(NcclTestsLog, SlurmLabelPrefixesAreStripped) {
  // srun --label: " 0: " on rank 0's lines, " 8: " on rank 8's NCCL INFO lines.
  std::string text = prefixed(" 0: ", allreduce_run());
  text.insert(text.find(" 0: node1:12345:12400"),
              " 8: node2:22345:22345 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0,mlx5_1\n");
  const NcclTestsLog log = read_nccl_tests_log(text, "slurm.log");
  EXPECT_TRUE(log.warnings.empty()) << log.warnings.front();
  ASSERT_EQ(log.tables.size(), 1u);
  expect_allreduce_run(log.tables[0]);
  EXPECT_EQ(log.tables[0].rows[2].where.line, line_of(text, "71.93"));

  // Without the space and with wider rank numbers.
  const NcclTestsLog tight = read_nccl_tests_log(prefixed("0:", allreduce_run()), "tight.log");
  ASSERT_EQ(tight.tables.size(), 1u);
  expect_allreduce_run(tight.tables[0]);
  const NcclTestsLog wide = read_nccl_tests_log(prefixed(" 12: ", allreduce_run()), "wide.log");
  ASSERT_EQ(wide.tables.size(), 1u);
  expect_allreduce_run(wide.tables[0]);
  // MPICH / Intel MPI -prepend-rank.
  const NcclTestsLog mpich = read_nccl_tests_log(prefixed("[0] ", allreduce_run()), "mpich.log");
  ASSERT_EQ(mpich.tables.size(), 1u);
  expect_allreduce_run(mpich.tables[0]);
}

TEST(NcclTestsLog, OldLayoutWithOpenMpiTagsAndNoRootColumn) {
  // nccl-tests 2.x before #wrong: no root column, max relative error; Open MPI --tag-output.
  const std::string text =
      std::string(
          "+ mpirun -np 16 --tag-output /opt/nccl-tests/build/all_reduce_perf -b 8 -e 1G -f 2 -n "
          "1000\n"
          "[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup "
          "iters: 5 iters: 1000 validation: 1 \n"
          "[1,0]<stdout>:#\n"
          "[1,0]<stdout>:# Using devices\n") +
      prefixed("[1,0]<stdout>:", old_rank_lines()) +
      "[1,2]<stdout>:nccl-efa-tests-worker-1:30:30 [0] NCCL INFO NET/OFI Selected Provider is efa\n"
      "[1,0]<stdout>:nccl-efa-tests-worker-0:30:30 [0] NCCL INFO NCCL version 2.8.3+cuda11.2\n"
      "[1,0]<stdout>:#\n"
      "[1,0]<stdout>:#                                                     out-of-place          "
      "             in-place          \n"
      "[1,0]<stdout>:#       size         count    type   redop     time   algbw   busbw  error  "
      "   time   algbw   busbw  error\n"
      "[1,0]<stdout>:#        (B)    (elements)                     (us)  (GB/s)  (GB/s)         "
      "   (us)  (GB/s)  (GB/s)       \n"
      "[1,0]<stdout>:           8             2   float     sum    167.5    0.00    0.00  2e-07  "
      "  167.1    0.00    0.00  1e-07\n"
      "[1,3]<stderr>:nccl-efa-tests-worker-1:31:45 [1] NCCL WARN NET/OFI Request 0x7f completed "
      "with error\n"
      "[1,0]<stdout>:     1048576        262144   float     sum    483.5    2.17    4.07  5e-07  "
      "  483.6    2.17    4.07  5e-07\n"
      "[1,0]<stdout>:  1073741824     268435456   float     sum    61556   17.44   32.71  5e-07  "
      "  61303   17.52   32.84  5e-07\n"
      "[1,0]<stdout>:# Out of bounds values : 0 OK\n"
      "[1,0]<stdout>:# Avg bus bandwidth    : 7.80081 \n";
  const NcclTestsLog log = read_nccl_tests_log(text, "efa.log");
  EXPECT_TRUE(log.warnings.empty()) << log.warnings.front();
  ASSERT_EQ(log.tables.size(), 1u);
  const NcclTestsTable& t = log.tables[0];
  EXPECT_TRUE(t.old_layout);
  EXPECT_EQ(t.nranks, 16);
  EXPECT_EQ(t.nodes, 2);
  EXPECT_EQ(t.devices, std::vector<std::string>(16, "A100-SXM4-40GB"));
  EXPECT_EQ(t.nccl_version, "2.8.3+cuda11.2");
  EXPECT_EQ(t.params.iters, 1000);
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(t.rows[0].root, -1);
  EXPECT_EQ(t.rows[0].redop, "sum");
  EXPECT_EQ(t.rows[0].wrong_out, "2e-07");
  EXPECT_EQ(t.rows[0].wrong_in, "1e-07");
  EXPECT_DOUBLE_EQ(t.rows[2].time_us_out, 61556);
  EXPECT_DOUBLE_EQ(t.rows[2].time_us_in, 61303);
  EXPECT_DOUBLE_EQ(*t.avg_busbw, 7.80081);
  EXPECT_EQ(t.test, "all_reduce_perf");  // from the launch command
  EXPECT_EQ(t.collective, "allreduce");
  // busbw = algbw x 2(n-1)/n = 17.44 x 30/16 = 32.70, printed 32.71.
  EXPECT_NEAR(t.rows[2].busbw_out, t.rows[2].algbw_out * 30.0 / 16.0, 0.02);
}

TEST(NcclTestsLog, TwoRunsInOneLogGiveTwoTables) {
  std::string gather;
  gather += "# Collective test starting: all_gather_perf\n";
  gather +=
      "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 8388608 step: 1048576(bytes) warmup "
      "iters: 2 iters: 10 agg iters: 1 validation: 0 graph: 0\n";
  gather += "#\n# Using devices\n";
  gather += rank_lines({"gpu-a"}, "NVIDIA A100-SXM4-80GB");
  gather += kNewColumnHeader;
  gather +=
      "     1048576         32768     float    none      -1    37.41   28.03   24.53    N/A   "
      " 36.22   28.95   25.33    N/A\n";
  gather +=
      "     2097152         65536     float    none      -1    50.18   41.79   36.57    N/A   "
      " 49.83   42.09   36.83    N/A\n";
  gather += "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 30.815 \n#\n";
  const std::string text = allreduce_run() + "srun: launching all_gather_perf\n" + gather;

  const NcclTestsLog log = read_nccl_tests_log(text, "two.log");
  EXPECT_TRUE(log.warnings.empty()) << log.warnings.front();
  ASSERT_EQ(log.tables.size(), 2u);
  expect_allreduce_run(log.tables[0]);
  const NcclTestsTable& g = log.tables[1];
  EXPECT_EQ(g.test, "all_gather_perf");
  EXPECT_EQ(g.collective, "allgather");
  EXPECT_EQ(g.nranks, 8);
  EXPECT_EQ(g.nodes, 1);
  EXPECT_EQ(g.devices.front(), "NVIDIA A100-SXM4-80GB");
  EXPECT_TRUE(g.nccl_version.empty());  // the second run printed none
  EXPECT_EQ(g.params.gpus_per_thread, 8);
  EXPECT_EQ(g.params.step_bytes, 1048576);
  EXPECT_FALSE(g.params.step_factor.has_value());
  EXPECT_EQ(g.where.line, line_of(text, "Collective test starting: all_gather_perf"));
  ASSERT_EQ(g.rows.size(), 2u);
  EXPECT_EQ(g.rows[0].redop, "none");
  EXPECT_EQ(g.rows[0].wrong_out, "N/A");
  EXPECT_EQ(g.rows[1].wrong_in, "N/A");
  // AllGather: busbw = algbw (n-1)/n = 41.79 x 7/8 = 36.57.
  EXPECT_NEAR(g.rows[1].busbw_out, g.rows[1].algbw_out * 7.0 / 8.0, 0.01);
  EXPECT_DOUBLE_EQ(*g.avg_busbw, 30.815);
}

TEST(NcclTestsLog, SizeColumnGoingDownStartsANewTableWithTheSameHeader) {
  // all_reduce_perf -d all: one header, one sweep per data type; one footer at the end.
  std::string text =
      "# nThread 1 nGpus 8 minBytes 1024 maxBytes 4096 step: 2(factor) warmup "
      "iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n";
  text += rank_lines({"dgx01"}, "NVIDIA H100 80GB HBM3");
  text += kNewColumnHeader;
  text += row(1024, 256, "float", "sum", -1, 11.02, 0.09, 0.16, 10.91, 0.09, 0.16);
  text += row(2048, 512, "float", "sum", -1, 11.34, 0.18, 0.32, 11.20, 0.18, 0.32);
  text += row(4096, 1024, "float", "sum", -1, 11.87, 0.35, 0.60, 11.80, 0.35, 0.61);
  text += row(1024, 512, "half", "sum", -1, 10.95, 0.09, 0.16, 10.88, 0.09, 0.16);
  text += row(2048, 1024, "half", "sum", -1, 11.26, 0.18, 0.32, 11.17, 0.18, 0.32);
  text += "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.3228 \n";
  const NcclTestsLog log = read_nccl_tests_log(text, "dall.log");
  ASSERT_EQ(log.tables.size(), 2u);
  EXPECT_EQ(log.tables[0].rows.size(), 3u);
  EXPECT_EQ(log.tables[1].rows.size(), 2u);
  EXPECT_EQ(log.tables[1].rows[0].type, "half");
  for (const NcclTestsTable& t : log.tables) {
    EXPECT_EQ(t.nranks, 8);
    EXPECT_EQ(t.nodes, 1);
    EXPECT_EQ(t.params.min_bytes, 1024);
  }
  EXPECT_EQ(log.tables[1].where.line, line_of(text, "    half"));
  EXPECT_FALSE(log.tables[0].avg_busbw.has_value());  // the footer follows the last sweep
  EXPECT_DOUBLE_EQ(*log.tables[1].avg_busbw, 0.3228);
}

TEST(NcclTestsLog, GarbageBetweenRowsIsIgnored) {
  std::string text = allreduce_run();
  const auto insert_before = [&](const std::string& needle, const std::string& lines) {
    text.insert(text.rfind('\n', text.find(needle)) + 1, lines);
  };
  // Lines that are not rows: NCCL INFO/WARN, blank lines, a shell prompt, a progress message.
  insert_before("16             4",
                "node1:12345:12410 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/IPC\n\n");
  insert_before("1048576        262144",
                "node2:22345:22410 [0] NCCL WARN NET/IB : Got completion from peer with error "
                "12, opcode 0, len 0, vendor err 129\n   \n"
                "Warning: Permanently added 'node2' (ED25519) to the list of known hosts.\n");
  insert_before("8388608", "\t\n# a comment line\n");
  const NcclTestsLog log = read_nccl_tests_log(text, "noisy.log");
  EXPECT_TRUE(log.warnings.empty()) << log.warnings.front();
  ASSERT_EQ(log.tables.size(), 1u);
  expect_allreduce_run(log.tables[0]);
  EXPECT_EQ(log.tables[0].rows[2].where.line, line_of(text, "71.93"));
}

TEST(NcclTestsLog, LogWithoutRowsIsALocatedError) {
  // Nothing to compare against: an error, not an empty measurement that validate would write out.
  const auto no_rows = [](const std::string& text, const std::string& name, int line,
                          const std::string& found) {
    SCOPED_TRACE(name);
    const InputError e = test::input_error([&] { read_nccl_tests_log(text, name); });
    EXPECT_EQ(*e.where().file, name);
    EXPECT_EQ(e.where().line, line);
    EXPECT_TRUE(contains(e.what(), fmt::format("{}:{}:1: error: expected the printed rows of an "
                                               "nccl-tests table",
                                               name, line)))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "found " + found)) << e.what();
  };
  no_rows("", "empty.log", 1, "no text");
  no_rows("\n  \n", "blank.log", 1, "no text");
  no_rows("node1:1:1 [0] NCCL INFO Bootstrap : Using eth0\nsrun: error: node1: task 0: Exited\n",
          "failed.log", 1, "2 lines of text, none of them a result row");
  // A header without rows (the run died during initialisation): located at the header.
  no_rows(std::string("srun: launching all_reduce_perf\n# nThread 1 nGpus 1 minBytes 8 maxBytes 8 "
                      "step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 "
                      "graph: 0\n") +
              kNewColumnHeader,
          "header.log", 2, "a table header and no result rows after it");
  // The only row is cut off by the end of the log.
  no_rows(
      std::string(kNewColumnHeader) + "  2147483648     536870912     float     sum      -1   87",
      "cut.log", 4, "only a row cut off by the end of the log");

  // Random bytes (a binary file passed by mistake), read from a file.
  static const char kBytes[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR\xff\xfe\x01 7f\n\x13\xa7 ~@\n";
  const std::string dir = test::temp_dir("nccl-log-no-rows");
  const std::string random = dir + "/random.bin";
  std::ofstream(random, std::ios::binary) << std::string(kBytes, sizeof kBytes - 1);
  const InputError e = test::input_error([&] { read_nccl_tests_file(random); });
  EXPECT_TRUE(contains(e.what(), random + ":1:1: error: expected the printed rows")) << e.what();
  EXPECT_TRUE(contains(e.what(), "none of them a result row")) << e.what();

  // A measured dataset without its tables.
  const std::string no_tables = dir + "/no_tables.yaml";
  std::ofstream(no_tables) << "gpu: H100\nnodes: 2\n";
  const InputError d = test::input_error([&] { read_measured_dataset(no_tables); });
  EXPECT_TRUE(contains(d.what(), no_tables + ":1:1: error: 'tables': expected a list of measured "
                                             "tables, found no 'tables' key"))
      << d.what();
  const std::string empty_tables = dir + "/empty_tables.yaml";
  std::ofstream(empty_tables) << "gpu: H100\ntables: []\n";
  const InputError d2 = test::input_error([&] { read_measured_dataset(empty_tables); });
  EXPECT_EQ(d2.where().line, 2);
  EXPECT_TRUE(contains(d2.what(), "found a list of 0 items")) << d2.what();
}

// ---------------------------------------------------------------------------------------------
// Truncated logs

TEST(NcclTestsLog, CutOffLastRowKeepsTheCompleteRows) {
  std::string text = allreduce_run();
  text = text.substr(0, text.find("# Out of bounds"));
  // The job is killed while row 1 GiB... is being printed: no line break at the end.
  const std::string cut =
      "  2147483648     536870912     float     sum      -1   8729.8  245.99  46";
  for (const std::string& ending : {cut, cut + "\n", std::string("  2147483648     53687"),
                                    std::string("  2147483648     536870912     float     su"),
                                    std::string("  2147483648     536870912     float     sum  "
                                                "    -1   8729.8  245.99  461.24      0   87")}) {
    SCOPED_TRACE(ending);
    const std::string log_text = text + ending;
    const NcclTestsLog log = read_nccl_tests_log(log_text, "killed.log");
    ASSERT_EQ(log.tables.size(), 1u);
    const NcclTestsTable& t = log.tables[0];
    EXPECT_TRUE(t.truncated);
    EXPECT_EQ(t.rows.size(), 6u);
    EXPECT_FALSE(t.avg_busbw.has_value());
    ASSERT_EQ(log.warnings.size(), 1u);
    EXPECT_TRUE(
        contains(log.warnings[0], fmt::format("killed.log:{}:1: warning: the last row is cut off",
                                              line_of(log_text, "2147483648"))))
        << log.warnings[0];
  }
}

TEST(NcclTestsLog, CutOffRowFollowedByTheFailureMessages) {
  std::string text = allreduce_run();
  text = text.substr(0, text.find("# Out of bounds"));
  // NCCL's failure lands on the unfinished line; the launcher adds its own lines after it.
  text +=
      "  2147483648     536870912     float     sum      -1node1: Test NCCL failure "
      "common.cu:1005 'remote process exited or there was a network error / '\n"
      " .. node1 pid 12345: Test failure common.cu:891\n"
      "srun: error: node2: task 8: Exited with exit code 3\n";
  const NcclTestsLog log = read_nccl_tests_log(text, "crash.log");
  ASSERT_EQ(log.tables.size(), 1u);
  EXPECT_TRUE(log.tables[0].truncated);
  EXPECT_EQ(log.tables[0].rows.size(), 6u);
  EXPECT_EQ(log.warnings.size(), 1u);

  // The last line is the size alone.
  std::string size_only = allreduce_run();
  size_only = size_only.substr(0, size_only.find("# Out of bounds")) + "  34359738368";
  const NcclTestsLog log2 = read_nccl_tests_log(size_only, "size_only.log");
  ASSERT_EQ(log2.tables.size(), 1u);
  EXPECT_TRUE(log2.tables[0].truncated);
  EXPECT_EQ(log2.tables[0].rows.size(), 6u);
}

TEST(NcclTestsLog, KilledRunFollowedByARerunInTheSameLog) {
  std::string first = allreduce_run();
  first = first.substr(0, first.find("# Out of bounds")) +
          "  2147483648     536870912     float     sum      -1   8729.8\n";
  const std::string text = first + allreduce_run();
  const NcclTestsLog log = read_nccl_tests_log(text, "rerun.log");
  ASSERT_EQ(log.tables.size(), 2u);
  EXPECT_TRUE(log.tables[0].truncated);
  EXPECT_EQ(log.tables[0].rows.size(), 6u);
  EXPECT_FALSE(log.tables[0].avg_busbw.has_value());
  EXPECT_FALSE(log.tables[1].truncated);
  expect_allreduce_run(log.tables[1]);
  EXPECT_EQ(log.warnings.size(), 1u);
}

// ---------------------------------------------------------------------------------------------
// Malformed rows

/// The InputError for `text` (read as "bad.log"), checked to name `line`:`column`.
InputError error_at(const std::string& text, int line, int column) {
  const InputError e = test::input_error([&] { read_nccl_tests_log(text, "bad.log"); });
  EXPECT_TRUE(e.where().known());
  EXPECT_EQ(*e.where().file, "bad.log");
  EXPECT_EQ(e.where().line, line);
  EXPECT_EQ(e.where().column, column);
  EXPECT_TRUE(contains(e.what(), fmt::format("bad.log:{}:{}: error: ", line, column))) << e.what();
  return e;
}

std::string two_rows_and(const std::string& bad) {
  return std::string(kNewColumnHeader) +
         "           8             2     float     sum      -1    68.52    0.00    0.00      0    "
         "24.70    0.00    0.00      0\n" +
         bad + "\n" +
         "          32             8     float     sum      -1    24.93    0.00    0.00      0    "
         "25.02    0.00    0.00      0\n";
}

TEST(NcclTestsLog, MalformedRowsAreLocatedErrors) {
  {
    // A time that is not a number: line 5 (after the 3 header lines and one row), column 47.
    const std::string bad =
        "          16             4     float     sum      -1      abc    0.00    0.00      0    "
        "24.93    0.00    0.00      0";
    const InputError e = error_at(two_rows_and(bad), 5, static_cast<int>(bad.find("abc")) + 1);
    EXPECT_TRUE(
        contains(e.what(), "expected a positive number (out-of-place time in us), found 'abc'"))
        << e.what();
  }
  {
    const std::string bad =
        "          16             4     float     sum      -1    24.96    0.00    0.00      0    "
        "24.93    0.00    0.x0      0";
    const InputError e = error_at(two_rows_and(bad), 5, static_cast<int>(bad.find("0.x0")) + 1);
    EXPECT_TRUE(contains(e.what(), "a non-negative number (in-place busbw in GB/s), found '0.x0'"))
        << e.what();
  }
  {
    const std::string bad =
        "          16             4     float     sum     one    24.96    0.00    0.00      0    "
        "24.93    0.00    0.00      0";
    const InputError e = error_at(two_rows_and(bad), 5, static_cast<int>(bad.find("one")) + 1);
    EXPECT_TRUE(contains(e.what(), "a root rank, or -1 for none (root), found 'one'")) << e.what();
  }
  {
    const std::string bad =
        "          16             4      4.5f     sum      -1    24.96    0.00    0.00      0    "
        "24.93    0.00    0.00      0";
    const InputError e = error_at(two_rows_and(bad), 5, static_cast<int>(bad.find("4.5f")) + 1);
    EXPECT_TRUE(contains(e.what(), "a data type name")) << e.what();
  }
  {
    const std::string bad =
        "          16             4     float     sum      -1    24.96    0.00    0.00      0    "
        "24.93    0.00    0.00      0    extra";
    const InputError e = error_at(two_rows_and(bad), 5, static_cast<int>(bad.find("extra")) + 1);
    EXPECT_TRUE(contains(e.what(),
                         "expected 13 fields (size count type redop root, then time "
                         "algbw busbw #wrong out of place and in place), found 14 "
                         "fields; the first extra one is 'extra'"))
        << e.what();
  }
  {
    // A short row with more rows after it is not a cut-off one.
    const std::string bad =
        "          16             4     float     sum      -1    24.96    0.00    0.00      0";
    const InputError e = error_at(two_rows_and(bad), 5, static_cast<int>(bad.size()) + 1);
    EXPECT_TRUE(contains(e.what(), "found 9 fields: the row ends before the in-place time"))
        << e.what();
  }
  {
    // A short last row before the footer: the run completed, so the row is malformed.
    const std::string bad =
        "          16             4     float     sum      -1    24.96    0.00    0.00      0";
    const InputError e =
        error_at(std::string(kNewColumnHeader) + bad + "\n# Out of bounds values : 0 OK\n", 4,
                 static_cast<int>(bad.size()) + 1);
    EXPECT_TRUE(contains(e.what(), "found 9 fields")) << e.what();
  }
  {
    // A bad field on the last line is still an error: only a cut-off end is forgiven.
    const std::string text =
        std::string(kNewColumnHeader) +
        "           8             2     float     sum      -1    68.52    0.00    0.00      0    "
        "24.70    0.00    0.00      0\n"
        "          16             4     float     sum      -1    24.96    zero\n";
    const InputError e = error_at(
        text, 5, static_cast<int>(text.rfind("zero") - text.rfind('\n', text.rfind("zero"))));
    EXPECT_TRUE(
        contains(e.what(), "a non-negative number (out-of-place algbw in GB/s), found 'zero'"))
        << e.what();
  }
  {
    // Launcher prefixes count in the column: the file's own column is reported.
    const std::string bad =
        "[1,0]<stdout>:          16             4     float     sum      -1    24.96    0.00    "
        "0.00      Z    24.93    0.00    0.00      0";
    const InputError e =
        error_at(prefixed("[1,0]<stdout>:", two_rows_and("")) + bad + "\n" +
                     "[1,0]<stdout>:          32             8     float     sum      -1    24.93  "
                     "  0.00    0.00      0    25.02    0.00    0.00      0\n",
                 7, static_cast<int>(bad.find(" Z ")) + 2);
    EXPECT_TRUE(contains(e.what(),
                         "a count of wrong elements or N/A (out-of-place #wrong), found "
                         "'Z'"))
        << e.what();
  }
}

TEST(NcclTestsLog, ImpossibleValuesInRowsAreLocatedErrors) {
  // Values nccl-tests never prints: they would give NaN or infinite errors, or split the table.
  const struct {
    std::string row, token, message;
  } cases[] = {
      {"          16             4     float     sum      -1     0.00    0.00    0.00      0    "
       "24.93    0.00    0.00      0",
       " 0.00", "expected a positive number (out-of-place time in us), found '0.00'"},
      {"          16             4     float     sum      -1   -24.96    0.00    0.00      0    "
       "24.93    0.00    0.00      0",
       "-24.96", "expected a positive number (out-of-place time in us), found '-24.96'"},
      {"          16             4     float     sum      -1    24.96    0.00    0.00      0    "
       "  nan    0.00    0.00      0",
       "nan", "expected a positive number (in-place time in us), found 'nan'"},
      {"          16             4     float     sum      -1    24.96    0.00     inf      0    "
       "24.93    0.00    0.00      0",
       "inf", "expected a non-negative number (out-of-place busbw in GB/s), found 'inf'"},
      {"           0             4     float     sum      -1    24.96    0.00    0.00      0    "
       "24.93    0.00    0.00      0",
       " 0 ",
       "expected a positive size for a count of 4 elements (size = count x type size), "
       "found '0'"},
      // Sizes and counts nccl-tests never prints: the row is refused at them, not passed over
      // as a line of prose (which dropped it from the comparison without a word).
      {"         -16             4     float     sum      -1    24.96    0.00    0.00      0    "
       "24.93    0.00    0.00      0",
       "-16", "found '-16'"},
      {"        16.5             4     float     sum      -1    24.96    0.00    0.00      0    "
       "24.93    0.00    0.00      0",
       "16.5", "found '16.5'"},
      {"          16            -4     float     sum      -1    24.96    0.00    0.00      0    "
       "24.93    0.00    0.00      0",
       "-4", "found '-4'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.row);
    const int column = static_cast<int>(c.row.find(c.token) + c.token.find_first_not_of(' ')) + 1;
    const InputError e = error_at(two_rows_and(c.row), 5, column);
    EXPECT_TRUE(contains(e.what(), c.message)) << e.what();
  }

  // A size of 0 with a count of 0 is real: the no-op nccl-tests runs when the count per rank
  // rounds down to 0 (reduce_scatter_perf -b 8 on 16 ranks). It is kept, in the same table, and
  // NCCL returns from it at once, so a fast host may time it at 0.00 us (only such a row).
  const NcclTestsLog noop =
      read_nccl_tests_log(std::string(kNewColumnHeader) +
                              row(0, 0, "float", "sum", -1, 0.27, 0.00, 0.00, 0.20, 0.00, 0.00) +
                              row(0, 0, "float", "sum", -1, 0.00, 0.00, 0.00, 0.00, 0.00, 0.00) +
                              row(256, 1, "float", "sum", -1, 86.94, 0.00, 0.00, 86.94, 0.00, 0.00),
                          "noop.log");
  ASSERT_EQ(noop.tables.size(), 1u);
  ASSERT_EQ(noop.tables[0].rows.size(), 3u);
  EXPECT_EQ(noop.tables[0].rows[1].time_us_out, 0.0);
}

TEST(NcclTestsLog, MissingFileIsALocatedInputError) {
  const std::string path = test::temp_dir("nccl-log") + "/missing.log";
  const InputError e = test::input_error([&] { read_nccl_tests_file(path); });
  EXPECT_EQ(*e.where().file, path);
  EXPECT_TRUE(contains(e.what(), "expected a readable nccl-tests log file")) << e.what();
  EXPECT_TRUE(contains(e.what(), "does not exist")) << e.what();

  const std::string dir = test::temp_dir("nccl-log-dir");
  EXPECT_TRUE(contains(test::input_error([&] { read_nccl_tests_file(dir); }).what(),
                       "which is a directory"));
}

TEST(NcclTestsLog, ReadsAFile) {
  const std::string path = test::temp_dir("nccl-log") + "/run.log";
  std::ofstream(path) << allreduce_run();
  const NcclTestsLog log = read_nccl_tests_file(path);
  EXPECT_EQ(log.source, path);
  ASSERT_EQ(log.tables.size(), 1u);
  expect_allreduce_run(log.tables[0]);
  EXPECT_EQ(*log.tables[0].rows[0].where.file, path);
}

// ---------------------------------------------------------------------------------------------
// Layout variants

TEST(NcclTestsLog, HeaderlessRowsInferLayoutAndCollective) {
  // Rows only, new layout, 16 ranks: busbw/algbw = 2 x 15/16 = 1.875 says AllReduce.
  const std::string text =
      "     4194304       1048576     float     sum      -1    110.9   37.82   70.91      0    "
      "111.9   37.47   70.25      0\n"
      "     8388608       2097152     float     sum      -1    151.6   55.35  103.78      0    "
      "150.5   55.74  104.51      0\n";
  const NcclTestsLog log = read_nccl_tests_log(text, "rows.log");
  ASSERT_EQ(log.tables.size(), 1u);
  EXPECT_EQ(log.tables[0].collective, "allreduce");
  EXPECT_EQ(log.tables[0].test, "all_reduce_perf");
  EXPECT_EQ(log.tables[0].nranks, 0);
  EXPECT_FALSE(log.tables[0].old_layout);
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_TRUE(contains(log.warnings[0], "implies 16 ranks")) << log.warnings[0];

  // Old AllGather: no redop and no root column (11 fields); busbw/algbw < 1 tells nothing.
  const NcclTestsLog gather = read_nccl_tests_log(
      "     1048576         32768   float    48.32   21.70   20.35  0e+00    47.90   21.89   "
      "20.52  0e+00\n",
      "gather.log");
  ASSERT_EQ(gather.tables.size(), 1u);
  EXPECT_TRUE(gather.tables[0].old_layout);
  EXPECT_TRUE(gather.tables[0].collective.empty());
  EXPECT_TRUE(gather.tables[0].rows[0].redop.empty());
  EXPECT_DOUBLE_EQ(gather.tables[0].rows[0].time_us_out, 48.32);
  EXPECT_EQ(gather.tables[0].rows[0].wrong_in, "0e+00");

  // Old Broadcast: the fourth column is the root.
  const NcclTestsLog bcast = read_nccl_tests_log(
      "     1048576        262144   float       0    40.11   26.14   26.14  0e+00    39.85   "
      "26.31   26.31  0e+00\n",
      "bcast.log");
  ASSERT_EQ(bcast.tables.size(), 1u);
  EXPECT_EQ(bcast.tables[0].rows[0].root, 0);
  EXPECT_TRUE(bcast.tables[0].rows[0].redop.empty());
}

TEST(NcclTestsLog, OnlyOneHalfPrinted) {
  // Rows with one timed group and no header: taken as out of place.
  const NcclTestsLog out = read_nccl_tests_log(
      "     1048576        262144     float     sum      -1    71.93   14.58   27.33      0\n"
      "     2097152        524288     float     sum      -1    76.24   27.51   51.58      0\n",
      "out.log");
  ASSERT_EQ(out.tables.size(), 1u);
  ASSERT_EQ(out.tables[0].rows.size(), 2u);
  EXPECT_TRUE(out.tables[0].rows[1].has_out_of_place);
  EXPECT_FALSE(out.tables[0].rows[1].has_in_place);
  EXPECT_DOUBLE_EQ(out.tables[0].rows[1].busbw_out, 51.58);
  EXPECT_TRUE(out.tables[0].rows[1].wrong_in.empty());

  // A header that names in-place only.
  const NcclTestsLog in = read_nccl_tests_log(
      "#                                                                in-place\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n"
      "     1048576        262144     float     sum      -1    71.47   14.67   27.51      0\n",
      "in.log");
  ASSERT_EQ(in.tables.size(), 1u);
  const NcclTestsRow& r = in.tables[0].rows.at(0);
  EXPECT_FALSE(r.has_out_of_place);
  EXPECT_TRUE(r.has_in_place);
  EXPECT_DOUBLE_EQ(r.time_us_in, 71.47);
  EXPECT_DOUBLE_EQ(r.time_us_out, 0.0);
}

TEST(NcclTestsLog, RcclTestsHeaderCputimeCrlfAndTabs) {
  // rccl-tests device lines (no Group), cputime columns (-C 1), CRLF line ends, tab separators.
  std::string text =
      "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 "
      "iters: 20 agg iters: 1 validation: 1 graph: 0\r\n"
      "#\r\n# Using devices\r\n"
      "#   Rank  0 Pid  41121 on   mi300-01 device  0 [0000:0c:00.0] AMD Instinct MI300X\r\n"
      "#   Rank  1 Pid  41122 on   mi300-01 device  1 [0000:22:00.0] AMD Instinct MI300X\r\n"
      "mi300-01:41121:41121 [0] NCCL INFO RCCL version 2.18.3+hip6.0 HEAD:2fc7b18\r\n"
      "#\r\n"
      "#                                                              out-of-place              "
      "         in-place          \r\n"
      "#       size         count      type   redop    root  cputime   algbw   busbw #wrong  "
      "cputime   algbw   busbw #wrong\r\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
      "(us)  (GB/s)  (GB/s)       \r\n"
      "     1048576\t262144\tfloat\tsum\t-1\t20.15\t52.04\t52.04\t0\t19.88\t52.75\t52.75\t0\r\n"
      "     2097152        524288     float     sum      -1    32.90   63.74   63.74      0    "
      "32.71   64.11   64.11      0\r\n";
  const NcclTestsLog log = read_nccl_tests_log(text, "rccl.log");
  EXPECT_TRUE(log.warnings.empty()) << log.warnings.front();
  ASSERT_EQ(log.tables.size(), 1u);
  const NcclTestsTable& t = log.tables[0];
  EXPECT_EQ(t.nranks, 2);
  EXPECT_EQ(t.nodes, 1);
  EXPECT_EQ(t.devices[1], "AMD Instinct MI300X");
  EXPECT_EQ(t.nccl_version, "2.18.3+hip6.0");
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(t.rows[0].time_us_out, 20.15);
  EXPECT_EQ(t.rows[0].wrong_in, "0");
  EXPECT_EQ(t.rows[1].wrong_in, "0");
  EXPECT_TRUE(t.collective.empty());  // busbw = algbw: broadcast, reduce, or 2-rank AllReduce
}

TEST(NcclTestsLog, NcclInfoMentionsFillRanksAndNodes) {
  // No device lines: "nRanks 16 nNodes 2" from NCCL's init line, the binary from the command.
  const std::string text =
      "+ mpirun -np 16 /opt/nccl-tests/build/reduce_scatter_perf_mpi -b 8M -e 16M -f 2\n"
      "node1:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL "
      "0\n" +
      row(8388608, 131072, "float", "sum", -1, 151.6, 55.35, 51.89, 150.5, 55.74, 52.26) +
      row(16777216, 262144, "float", "sum", -1, 201.6, 83.24, 78.03, 202.7, 82.77, 77.60);
  const NcclTestsLog log = read_nccl_tests_log(text, "rs.log");
  EXPECT_TRUE(log.warnings.empty()) << log.warnings.front();
  ASSERT_EQ(log.tables.size(), 1u);
  EXPECT_EQ(log.tables[0].test, "reduce_scatter_perf");
  EXPECT_EQ(log.tables[0].collective, "reducescatter");
  EXPECT_EQ(log.tables[0].nranks, 16);
  EXPECT_EQ(log.tables[0].nodes, 2);
  EXPECT_TRUE(log.tables[0].devices.empty());
}

TEST(NcclTestsLog, CollectiveNames) {
  EXPECT_EQ(normalise_collective("all_reduce_perf"), "allreduce");
  EXPECT_EQ(normalise_collective("./build/all_reduce_perf_mpi"), "allreduce");
  EXPECT_EQ(normalise_collective("AllReduce"), "allreduce");
  EXPECT_EQ(normalise_collective("all-gather"), "allgather");
  EXPECT_EQ(normalise_collective("ReduceScatter"), "reducescatter");
  EXPECT_EQ(normalise_collective("alltoall_perf"), "alltoall");
  EXPECT_EQ(normalise_collective("sendrecv"), "sendrecv");
  EXPECT_EQ(normalise_collective("hypercube_perf"), "hypercube");
  EXPECT_EQ(normalise_collective("alltoallv_perf"), "");
  EXPECT_EQ(normalise_collective("ring"), "");
  EXPECT_EQ(nccl_tests_binary("reducescatter"), "reduce_scatter_perf");
  EXPECT_EQ(nccl_tests_binary("gather"), "gather_perf");
  EXPECT_EQ(nccl_tests_binary("nope"), "");
}

// ---------------------------------------------------------------------------------------------
// Dataset errors

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = test::temp_dir("nccl-dataset") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(NcclTestsLog, MeasuredDatasetErrorsPointIntoTheYaml) {
  const std::string good_row =
      "           8             2     float     sum      -1    68.52    0.00    0.00      0    "
      "24.70    0.00    0.00      0";
  const std::string bad_row =
      "          16             4     float     sum      -1    24.96    0.00    0.00      0    "
      "24.93    0.00    0.00    0 0";
  const std::string path = write_file("bad.yaml",
                                      "collective: allreduce\n"
                                      "tables:\n"
                                      "- name: t\n"
                                      "  total_ranks: 16\n"
                                      "  raw_table_verbatim: |2\n"
                                      "    " +
                                          good_row + "\n" + "    " + bad_row + "\n");
  const InputError e = test::input_error([&] { read_measured_dataset(path); });
  EXPECT_EQ(*e.where().file, path);
  EXPECT_EQ(e.where().line, 7);
  EXPECT_EQ(e.where().column, 4 + static_cast<int>(bad_row.rfind(" 0")) + 2);
  EXPECT_EQ(e.key(), "tables[0].raw_table_verbatim");
  EXPECT_TRUE(contains(e.what(), "found 14 fields")) << e.what();

  const std::string no_raw = write_file("noraw.yaml", "tables:\n- name: t\n  nodes: 2\n");
  const InputError e2 = test::input_error([&] { read_measured_dataset(no_raw); });
  EXPECT_EQ(e2.where().line, 2);
  EXPECT_TRUE(contains(e2.what(), "'tables[0].raw_table_verbatim': expected the printed lines"))
      << e2.what();

  const std::string bad_collective = write_file("coll.yaml",
                                                "tables:\n- name: t\n  collective: allscatter\n"
                                                "  raw_table_verbatim: |\n    " +
                                                    good_row + "\n");
  const InputError e3 = test::input_error([&] { read_measured_dataset(bad_collective); });
  EXPECT_EQ(e3.where().line, 3);
  EXPECT_TRUE(contains(e3.what(), "expected one of allreduce, allgather")) << e3.what();
  EXPECT_TRUE(contains(e3.what(), "found 'allscatter'")) << e3.what();

  const std::string bad_ranks = write_file("ranks.yaml",
                                           "tables:\n- name: t\n  total_ranks: many\n"
                                           "  raw_table_verbatim: |\n    " +
                                               good_row + "\n");
  const InputError e4 = test::input_error([&] { read_measured_dataset(bad_ranks); });
  EXPECT_EQ(e4.where().line, 3);
  EXPECT_TRUE(contains(e4.what(), "'tables[0].total_ranks': expected a positive whole number"))
      << e4.what();

  const std::string no_rows = write_file("norows.yaml",
                                         "tables:\n- name: t\n"
                                         "  raw_table_verbatim: |\n"
                                         "    # Avg bus bandwidth    : 1.0\n");
  const InputError e5 = test::input_error([&] { read_measured_dataset(no_rows); });
  EXPECT_EQ(e5.where().line, 4);
  EXPECT_TRUE(contains(e5.what(),
                       "'tables[0].raw_table_verbatim': expected the printed rows of an "
                       "nccl-tests table (size count type ... then time algbw busbw per half), "
                       "found 1 line of text, none of them a result row"))
      << e5.what();

  const InputError e6 =
      test::input_error([&] { read_measured_dataset(test::temp_dir("x") + "/none.yaml"); });
  EXPECT_TRUE(contains(e6.what(), "does not exist")) << e6.what();
}

/// A printed AllReduce row, as a dataset's raw_table_verbatim holds it (indented by 4).
const char* const kDatasetRow =
    "    4194304       1048576     float     sum      -1    110.9   37.82   70.91      0    "
    "111.9   37.47   70.25      0\n";

/// The "env.NAME" metadata of a table.
std::map<std::string, std::string> environment(const NcclTestsTable& t) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : t.metadata) {
    if (key.starts_with("env.")) out[key.substr(4)] = value;
  }
  return out;
}

TEST(NcclTestsLog, DatasetEnvironmentInProseIsAWarning) {
  // Sources describe the environment in words: nothing to apply, but no reason to stop.
  const std::string path = write_file("prose_env.yaml",
                                      "collective: allreduce\n"
                                      "total_ranks: 16\n"
                                      "tables:\n"
                                      "- name: launcher\n"
                                      "  env: NCCL_ALGO=Ring, exported by the launcher script\n"
                                      "  raw_table_verbatim: |\n"
                                      "    " +
                                          std::string(kDatasetRow));
  const NcclTestsLog log = read_measured_dataset(path);
  ASSERT_EQ(log.tables.size(), 1u);
  EXPECT_TRUE(environment(log.tables[0]).empty());
  EXPECT_EQ(log.tables[0].rows.size(), 1u);
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_TRUE(contains(log.warnings[0],
                       path + ":5:8: warning: table 'launcher': 'tables[0].env' is text, not a "
                              "mapping of environment variables to values; it is ignored "
                              "(found 'NCCL_ALGO=Ring, exported by the launcher script')"))
      << log.warnings[0];

  // A list is no description: still an error.
  const std::string list = write_file("list_env.yaml",
                                      "collective: allreduce\ntotal_ranks: 16\ntables:\n"
                                      "- name: t\n  env: [NCCL_ALGO=Ring]\n"
                                      "  raw_table_verbatim: |\n    " +
                                          std::string(kDatasetRow));
  const InputError e = test::input_error([&] { read_measured_dataset(list); });
  EXPECT_TRUE(contains(e.what(), list + ":5:8: error: 'tables[0].env': expected a mapping"))
      << e.what();
}

TEST(NcclTestsLog, DatasetCommonEnvAppliesToEveryTable) {
  const std::string table = "  raw_table_verbatim: |\n    " + std::string(kDatasetRow);
  const std::string path = write_file("common_env.yaml",
                                      "collective: allreduce\n"
                                      "total_ranks: 16\n"
                                      "common_env: {NCCL_IB_HCA: mlx5_0, NCCL_ALGO: Tree}\n"
                                      "tables:\n"
                                      "- name: own\n"
                                      "  env: {NCCL_ALGO: Ring, NCCL_MIN_CTAS: 24}\n" +
                                          table + "- name: none\n" + table +
                                          "- name: unset\n"
                                          "  env: {NCCL_IB_HCA: null}\n" +
                                          table +
                                          "- name: prose\n"
                                          "  env: the cluster's defaults\n" +
                                          table);
  const NcclTestsLog log = read_measured_dataset(path);
  ASSERT_EQ(log.tables.size(), 4u);
  using Env = std::map<std::string, std::string>;
  // The table's own values win key by key; the common ones fill the rest.
  EXPECT_EQ(environment(log.tables[0]),
            (Env{{"NCCL_ALGO", "Ring"}, {"NCCL_IB_HCA", "mlx5_0"}, {"NCCL_MIN_CTAS", "24"}}));
  EXPECT_EQ(environment(log.tables[1]), (Env{{"NCCL_ALGO", "Tree"}, {"NCCL_IB_HCA", "mlx5_0"}}));
  // A null value unsets a common variable.
  EXPECT_EQ(environment(log.tables[2]), (Env{{"NCCL_ALGO", "Tree"}}));
  // Prose adds nothing to the common environment (and is warned about).
  EXPECT_EQ(environment(log.tables[3]), (Env{{"NCCL_ALGO", "Tree"}, {"NCCL_IB_HCA", "mlx5_0"}}));
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_TRUE(contains(log.warnings[0], "table 'prose': 'tables[3].env' is text"))
      << log.warnings[0];

  // common_env is a mapping too.
  const std::string bad = write_file("bad_common_env.yaml",
                                     "collective: allreduce\ntotal_ranks: 16\ncommon_env: [a, b]\n"
                                     "tables:\n- name: t\n" +
                                         table);
  const InputError e = test::input_error([&] { read_measured_dataset(bad); });
  EXPECT_TRUE(contains(e.what(), bad + ":3:13: error: 'common_env': expected a mapping"))
      << e.what();
}

}  // namespace
}  // namespace rocesim::validation
