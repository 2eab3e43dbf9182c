// The rocesim-nicprobe executable, where it was built (libibverbs found). On a machine without an
// RDMA device it must say so in one line on stderr and exit with 3, before touching the output
// file; bad usage exits with 2 whatever the hardware. On a machine with RDMA devices the listing
// must succeed and read back.
//
// NicProbeFake runs the same code linked with a fake libibverbs (fake_verbs.cpp: a RoCE and an
// InfiniBand device, writes carried out by memcpy, strict about queue limits, QP transitions and
// release order, failures injected through the environment): listing, the loopback test on both
// link layers, and every way out with exit code 3, without leaking a verbs object.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <utility>

#include "calibrate/lib/nicprobe_report.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::test {
namespace {

using testing::HasSubstr;

#ifdef ROCESIM_NICPROBE_EXE
const char* const kExe = ROCESIM_NICPROBE_EXE;
const char* const kFake = ROCESIM_NICPROBE_FAKE_EXE;
#else
const char* const kExe = nullptr;
const char* const kFake = nullptr;
#endif

#define REQUIRE_NICPROBE() \
  if (kExe == nullptr) GTEST_SKIP() << "rocesim-nicprobe was not built (no libibverbs-dev)"

CommandResult nicprobe(const std::string& args) {
  return run_command(fmt::format("{} {}", kExe, args));
}

/// Whether this machine has an RDMA device (the kernel lists one in sysfs).
bool have_rdma_device() {
  std::error_code ec;
  const std::filesystem::directory_iterator it("/sys/class/infiniband", ec);
  return !ec && it != std::filesystem::directory_iterator();
}

TEST(NicProbeCli, HelpListsTheOptions) {
  REQUIRE_NICPROBE();
  const CommandResult r = nicprobe("--help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* option : {"--loopback", "--device", "--port", "--gid-index", "--sizes",
                             "--iters", "--human", "--output", "Exit codes"})
    EXPECT_THAT(r.out, HasSubstr(option));
}

TEST(NicProbeCli, NoRdmaDeviceExitsWith3) {
  REQUIRE_NICPROBE();
  if (have_rdma_device()) GTEST_SKIP() << "this machine has an RDMA device";
  const std::string dir = temp_dir("nicprobe");
  const std::string out = dir + "/probe.yaml";
  for (const std::string& args :
       {std::string(), std::string("--loopback"), "--device mlx5_0 -o " + out}) {
    SCOPED_TRACE(args);
    const CommandResult r = nicprobe(args);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_THAT(r.err, HasSubstr("rocesim-nicprobe: no RDMA device"));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;  // one line
    EXPECT_EQ(r.out, "");
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  std::filesystem::remove_all(dir);
}

TEST(NicProbeCli, ListingReadsBackWhereThereIsADevice) {
  REQUIRE_NICPROBE();
  if (!have_rdma_device()) GTEST_SKIP() << "no RDMA device on this machine";
  const CommandResult r = nicprobe("-q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const calibrate::NicProbeReport report = calibrate::read_nicprobe_yaml(r.out, "stdout");
  EXPECT_FALSE(report.devices.empty());
}

TEST(NicProbeCli, BadUsageExitsWith2) {
  REQUIRE_NICPROBE();
  const std::pair<const char*, const char*> cases[] = {
      {"--no-such-option", "not expected"},
      {"--port 1", "--port requires --loopback"},
      {"--loopback --sizes 8:2", "MIN must not exceed MAX"},
      {"--loopback --sizes 2:4X", "not a message size"},
      {"--loopback --sizes 2:2G", "over the largest allowed"},
      {"--loopback --iters 0", "--iters"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    const CommandResult r = nicprobe(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr(message));
    EXPECT_EQ(r.out, "");
  }
}

// ---------------------------------------------------------------------------------------------
// With the fake verbs provider

/// rocesim-nicprobe-fake with `env` (VAR=value ...) set; fails the test if the fake reports a
/// misuse or a leak.
CommandResult fake(const std::string& env, const std::string& args) {
  const CommandResult r = run_command(fmt::format("env {} {} {}", env, kFake, args));
  EXPECT_THAT(r.err, testing::Not(HasSubstr("fake verbs:"))) << r.err;
  return r;
}

calibrate::NicProbeReport report_of(const CommandResult& r) {
  return calibrate::read_nicprobe_yaml(r.out, "stdout");
}

TEST(NicProbeFake, ListsDevicesPortsAndGids) {
  REQUIRE_NICPROBE();
  const CommandResult r = fake("", "-q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const calibrate::NicProbeReport p = report_of(r);
  ASSERT_EQ(p.devices.size(), 2u);
  EXPECT_TRUE(p.loopback.empty());
  const calibrate::NicProbeDevice& roce = p.devices[0];
  EXPECT_EQ(roce.name, "mlx5_0");
  EXPECT_EQ(roce.node_guid, "946d:ae03:00f2:1a3c");
  EXPECT_EQ(roce.vendor_part_id, 4129u);
  EXPECT_EQ(roce.limit("max_qp_wr"), 32768u);
  EXPECT_EQ(roce.limit("max_mr_size"), UINT64_MAX);
  ASSERT_EQ(roce.ports.size(), 1u);
  const calibrate::NicProbePort& eth = roce.ports[0];
  EXPECT_EQ(eth.link_layer, "Ethernet");
  EXPECT_EQ(eth.state, "ACTIVE");
  EXPECT_EQ(eth.phys_state, "LINK_UP");
  EXPECT_EQ(eth.speed, "NDR");
  EXPECT_EQ(eth.width, "4X");
  EXPECT_DOUBLE_EQ(eth.rate_gbps, 400);
  EXPECT_EQ(eth.mtu_active, 4096);
  EXPECT_EQ(eth.gid_table_size, 16);
  ASSERT_EQ(eth.gids.size(), 4u);  // the valid entries only
  EXPECT_EQ(eth.gids[3].gid, "0000:0000:0000:0000:0000:ffff:0a00:0001");
  EXPECT_EQ(eth.gids[3].type, "RoCEv2");
  EXPECT_EQ(eth.gids[3].ipv4, "10.0.0.1");
  EXPECT_EQ(eth.gids[2].type, "RoCEv1");
  EXPECT_FALSE(eth.gids[3].netdev.empty());  // interface index 1 (the loopback interface)

  const calibrate::NicProbeDevice& ib = p.devices[1];
  ASSERT_EQ(ib.ports.size(), 2u);
  EXPECT_EQ(ib.ports[0].link_layer, "InfiniBand");
  EXPECT_EQ(ib.ports[0].speed, "HDR");
  EXPECT_DOUBLE_EQ(ib.ports[0].rate_gbps, 200);
  EXPECT_EQ(ib.ports[0].lid, 7);
  EXPECT_EQ(ib.ports[0].gids[0].type, "IB");
  EXPECT_EQ(ib.ports[1].state, "DOWN");
  EXPECT_EQ(ib.ports[1].rate_gbps, 0);
  EXPECT_EQ(ib.ports[1].max_msg_bytes, 1u << 20);
}

TEST(NicProbeFake, ListsGidsOneByOneWithoutTheGidTableCall) {
  REQUIRE_NICPROBE();
  const CommandResult r = fake("FAKE_VERBS_NO_GID_TABLE=1", "-q -d mlx5_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const calibrate::NicProbeReport p = report_of(r);
  ASSERT_EQ(p.devices.size(), 1u);
  ASSERT_EQ(p.devices[0].ports[0].gids.size(), 4u);
  EXPECT_EQ(p.devices[0].ports[0].gids[3].index, 3);
  EXPECT_EQ(p.devices[0].ports[0].gids[3].ipv4, "10.0.0.1");
}

TEST(NicProbeFake, LoopbackOnEveryActivePort) {
  REQUIRE_NICPROBE();
  const std::string dir = temp_dir("nicprobe-fake");
  const std::string out = dir + "/probe.yaml";
  const CommandResult r =
      fake("", "--loopback --sizes 2:64K -n 50 --warmup 5 -o " + out + " --human");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("loopback RDMA WRITE on mlx5_0 port 1 (Ethernet, gid index 3"));
  EXPECT_THAT(r.out, HasSubstr("loopback RDMA WRITE on mlx5_1 port 1 (InfiniBand, lid 7)"));
  EXPECT_THAT(r.err, HasSubstr("report written to " + out));
  // Only the report is left: the temporary file was renamed.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            1);

  const calibrate::NicProbeReport p = calibrate::read_nicprobe_report(out);
  ASSERT_EQ(p.loopback.size(), 2u);
  const calibrate::NicProbeLoopback& roce = p.loopback[0];
  EXPECT_EQ(roce.device, "mlx5_0");
  EXPECT_EQ(roce.link_layer, "Ethernet");
  EXPECT_EQ(roce.gid_index, 3);  // RoCE v2 with an IPv4 address, as NCCL picks
  EXPECT_EQ(roce.gid_type, "RoCEv2");
  EXPECT_EQ(roce.mtu, 4096);
  EXPECT_EQ(roce.iters, 50);
  EXPECT_EQ(roce.warmup, 5);
  EXPECT_EQ(roce.tx_depth, 128);
  EXPECT_EQ(roce.inline_bytes, 220);  // asked 220, granted 224: the smaller is used
  ASSERT_EQ(roce.rows.size(), 16u);
  for (const calibrate::NicProbeRow& row : roce.rows) {
    EXPECT_GT(row.bw_gbps, 0);
    EXPECT_GT(row.lat_us_min, 0);
  }
  const calibrate::NicProbeLoopback& ib = p.loopback[1];
  EXPECT_EQ(ib.device, "mlx5_1");
  EXPECT_EQ(ib.link_layer, "InfiniBand");
  EXPECT_EQ(ib.lid, 7);
  EXPECT_FALSE(ib.gid_index.has_value());
  EXPECT_EQ(ib.rows.size(), 16u);
  std::filesystem::remove_all(dir);
}

TEST(NicProbeFake, LoopbackWithGivenGidDepthAndPort) {
  REQUIRE_NICPROBE();
  CommandResult r = fake("", "--loopback -d mlx5_0 -x 1 -t 4 --sizes 64,4K,64 -n 40 -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  calibrate::NicProbeReport p = report_of(r);
  ASSERT_EQ(p.loopback.size(), 1u);
  EXPECT_EQ(p.loopback[0].gid_index, 1);
  EXPECT_EQ(p.loopback[0].tx_depth, 4);
  ASSERT_EQ(p.loopback[0].rows.size(), 2u);
  EXPECT_EQ(p.loopback[0].rows[1].bytes, 4096);

  // InfiniBand with a GRH: the LID and the GID.
  r = fake("", "--loopback -d mlx5_1 -p 1 -x 0 --sizes 8 -n 20 -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  p = report_of(r);
  ASSERT_EQ(p.loopback.size(), 1u);
  EXPECT_EQ(p.loopback[0].gid_index, 0);
  EXPECT_EQ(p.loopback[0].gid_type, "IB");
  EXPECT_EQ(p.loopback[0].lid, 7);
}

TEST(NicProbeFake, WithoutInlineData) {
  REQUIRE_NICPROBE();
  const CommandResult r = fake("FAKE_VERBS_NO_INLINE=1", "--loopback -d mlx5_0 --sizes 8 -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(report_of(r).loopback.at(0).inline_bytes, 0);
}

/// Runs the fake expecting exit code 3 and `message` on a single line of stderr.
void expect_unusable(const std::string& env, const std::string& args, const std::string& message) {
  SCOPED_TRACE(env + " " + args);
  const CommandResult r = fake(env, args);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("rocesim-nicprobe: " + message));
  EXPECT_EQ(r.out, "");
}

TEST(NicProbeFake, NoDeviceInTheList) {
  REQUIRE_NICPROBE();
  expect_unusable("FAKE_VERBS_DEVICES=0", "", "no RDMA device found");
  expect_unusable("FAKE_VERBS_DEVICES=0", "--loopback", "no RDMA device found");
}

TEST(NicProbeFake, DeviceOrPortThatCannotDoIt) {
  REQUIRE_NICPROBE();
  expect_unusable("", "-d mlx5_9", "no RDMA device named 'mlx5_9' (this host has: mlx5_0, mlx5_1)");
  expect_unusable("", "--loopback -q -d mlx5_1 -p 2",
                  "mlx5_1 port 2 is DOWN: the loopback test needs an ACTIVE port");
  expect_unusable("", "--loopback -q -d mlx5_0 -p 2", "mlx5_0 has no port 2");
  expect_unusable("", "--loopback -q -d mlx5_1 --sizes 2M",
                  "2097152 bytes is over the largest message of mlx5_1 port 1 (1048576 bytes)");
  expect_unusable("", "--loopback -q -d mlx5_0 -x 9", "GID index 9 of mlx5_0 port 1 is empty");
  expect_unusable("", "--loopback -q -d mlx5_0 -x 99",
                  "--gid-index 99 is outside the GID table of mlx5_0 port 1 (16 entries)");
}

TEST(NicProbeFake, VerbsFailuresNameTheCallAndErrno) {
  REQUIRE_NICPROBE();
  const std::pair<const char*, const char*> cases[] = {
      {"ibv_open_device", "ibv_open_device(mlx5_0) failed"},
      {"ibv_query_device", "ibv_query_device(mlx5_0) failed"},
      {"ibv_query_port", "ibv_query_port(mlx5_0 port 1) failed"},
      {"ibv_query_gid_table", "ibv_query_gid_table(mlx5_0) failed"},
      {"ibv_alloc_pd", "ibv_alloc_pd(mlx5_0) failed"},
      {"ibv_reg_mr", "ibv_reg_mr(mlx5_0, 4096 bytes, QP A) failed"},
      {"ibv_create_cq", "ibv_create_cq(mlx5_0, 129 entries) failed"},
      {"ibv_create_qp", "ibv_create_qp(mlx5_0, RC, 128 send WRs, QP A) failed"},
      {"ibv_modify_qp", "ibv_modify_qp(mlx5_0, QP A, INIT) failed"},
  };
  for (const auto& [call, message] : cases) {
    expect_unusable(fmt::format("FAKE_VERBS_FAIL={}", call), "--loopback -q -d mlx5_0 --sizes 64",
                    fmt::format("{}: Cannot allocate memory (errno 12)", message));
  }
}

TEST(NicProbeFake, WriteCompletedWithAnError) {
  REQUIRE_NICPROBE();
  // Write 30 is in the bandwidth test (55 writes: 5 warm-up, 50 timed), write 70 in the latency
  // test.
  expect_unusable("FAKE_VERBS_WC_ERROR=30", "--loopback -q -d mlx5_0 --sizes 64 -n 50 --warmup 5",
                  "RDMA WRITE (bandwidth test, 64 bytes) completed with an error: transport retry "
                  "counter exceeded (ibv_wc_status 12, vendor error 0x81)");
  expect_unusable("FAKE_VERBS_WC_ERROR=70", "--loopback -q -d mlx5_0 --sizes 64 -n 50 --warmup 5",
                  "RDMA WRITE (latency test, 64 bytes) completed with an error");
}

TEST(NicProbeFake, TheStandinClusterNicIsTheGroundTruths) {
  // The stand-in NIC of the calibration loop: the stand-in cluster's scenario with hidden values
  // (a port trained at 200 Gb/s, NICs at 80% of the framed rate, 900 ns of PCIe latency), 2%
  // log-normal noise per write. Expected from rocesim's model of that NIC:
  //   port: 200 Gb/s = 4X HDR;
  //   B = 200 Gb/s x 4096 / (4096 + 28) (InfiniBand framing) x 0.8 = 158.914 Gb/s, the NIC's
  //       port being narrower than its PCIe path (Gen5 x16: 460 Gb/s of payload);
  //   one-way latency of a write of s bytes: L + s / B with L = 2 x 900 ns = 1.8 us;
  //   the bandwidth test's 200 writes of s bytes: 200 s / B back to back, plus L for the last
  //   one's completion: a row's bandwidth is 200 x 8 s / (200 x 8 s / B + 1.8 us);
  //   the fit of t = o + s / B to those rows: B exactly, o = L / 200.
  // The clock is the emulation's, so the noise is all there is: 2% per write, 0.14% on a row
  // of 200 (tolerance 0.5%), the fitted bandwidth within 0.3%, the latency intercept within
  // 0.5%, and the same rows on a second run.
  REQUIRE_NICPROBE();
  const std::string env = fmt::format(
      "ROCESIM_STANDIN_SCENARIO='{}' ROCESIM_STANDIN_TRUTH='topology.node.nic_speed=200Gbps;"
      "topology.node.nic_efficiency=0.8;topology.node.pcie_latency=900ns' "
      "ROCESIM_STANDIN_NOISE=0.02 ROCESIM_STANDIN_SEED=7",
      source_path("tests/calibrate/standin/cluster.yaml"));
  const std::string args = "--loopback -d mlx5_1 -p 1 --sizes 4K:1M -n 200 -q";
  const CommandResult r = fake(env, args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const calibrate::NicProbeReport p = report_of(r);
  ASSERT_EQ(p.loopback.size(), 1u);
  const calibrate::NicProbePort* port = p.find_port("mlx5_1", 1);
  ASSERT_NE(port, nullptr);
  EXPECT_EQ(port->rate_gbps, 200);
  EXPECT_EQ(port->speed, "HDR");
  EXPECT_EQ(port->lanes, 4);

  const double b_gbps = 200 * 4096.0 / (4096 + 28) * 0.8;
  const calibrate::NicProbeLoopback& l = p.loopback[0];
  ASSERT_TRUE(l.fit.has_value()) << l.fit_note;
  EXPECT_NEAR(l.fit->bandwidth_gbps, b_gbps, 0.003 * b_gbps);
  EXPECT_NEAR(*l.fit->efficiency, b_gbps / 200, 0.003 * b_gbps / 200);
  ASSERT_TRUE(l.fit->latency_us.has_value());
  EXPECT_NEAR(*l.fit->latency_us, 1.8, 0.005 * 1.8);
  ASSERT_EQ(l.rows.size(), 9u);
  for (const calibrate::NicProbeRow& row : l.rows) {
    const double one_way = 1.8 + 8.0 * static_cast<double>(row.bytes) / (1000 * b_gbps);
    EXPECT_NEAR(row.lat_us_median, one_way, 0.02 * one_way) << row.bytes;
    const double stream_ns = 200 * 8.0 * static_cast<double>(row.bytes) / b_gbps + 1800;
    const double bw = 200 * 8.0 * static_cast<double>(row.bytes) / stream_ns;
    EXPECT_NEAR(row.bw_gbps, bw, 0.005 * bw) << row.bytes;
  }
  // Virtual time: the same measurements, whatever the machine's load.
  const CommandResult again = fake(env, args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const calibrate::NicProbeReport p2 = report_of(again);
  const std::vector<calibrate::NicProbeRow>& rows = p2.loopback.at(0).rows;
  ASSERT_EQ(rows.size(), l.rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].bw_gbps, l.rows[i].bw_gbps);
    EXPECT_EQ(rows[i].lat_us_median, l.rows[i].lat_us_median);
  }
}

}  // namespace
}  // namespace rocesim::test
