// The rocesim-nicprobe report without a NIC: the reader on two hand-written samples (a 400G RoCE
// ConnectX-7 and an HDR InfiniBand ConnectX-6), the writer read back, the fit of the loopback
// rows where the answer is known, the decoding of the verbs port attributes and --sizes, and one
// located error per kind of malformed file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "calibrate/lib/nicprobe_report.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::test {
namespace {

using calibrate::NicProbeFit;
using calibrate::NicProbeReport;
using calibrate::NicProbeRow;
using testing::HasSubstr;

std::string fixture_path(const std::string& name) {
  return source_path("tests/calibrate/nicprobe/" + name);
}

std::string fixture_text(const std::string& name) {
  std::ifstream in(fixture_path(name));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---------------------------------------------------------------------------------------------
// The samples

TEST(NicProbeReport, ReadsRoceConnectX7Sample) {
  const NicProbeReport r = calibrate::read_nicprobe_report(fixture_path("cx7_roce_400g.yaml"));
  EXPECT_EQ(r.format, "rocesim-nicprobe/1");
  EXPECT_EQ(r.host, "gpu-node-017");
  EXPECT_EQ(r.date, "2025-03-14T09:26:53Z");
  ASSERT_EQ(r.devices.size(), 1u);
  const calibrate::NicProbeDevice& d = r.devices[0];
  EXPECT_EQ(d.name, "mlx5_0");
  EXPECT_EQ(d.vendor_id, 0x02c9u);
  EXPECT_EQ(d.vendor_part_id, 4129u);
  EXPECT_EQ(d.fw_ver, "28.39.1002");
  EXPECT_EQ(d.pci, "0000:1a:00.0");
  EXPECT_EQ(d.numa_node, 0);
  EXPECT_EQ(d.limit("max_qp"), 131072u);
  EXPECT_EQ(d.limit("max_cqe"), 4194303u);
  EXPECT_EQ(d.limit("max_mr_size"), UINT64_MAX);
  EXPECT_FALSE(d.limit("max_widgets").has_value());

  ASSERT_EQ(d.ports.size(), 1u);
  const calibrate::NicProbePort& p = d.ports[0];
  EXPECT_EQ(p.port, 1);
  EXPECT_EQ(p.state, "ACTIVE");
  EXPECT_EQ(p.link_layer, "Ethernet");
  EXPECT_EQ(p.speed, "NDR");
  EXPECT_EQ(p.width, "4X");
  EXPECT_EQ(p.lanes, 4);
  EXPECT_DOUBLE_EQ(p.rate_gbps, 400);
  EXPECT_EQ(p.mtu_active, 4096);
  EXPECT_EQ(p.mtu_max, 4096);
  EXPECT_EQ(p.max_msg_bytes, uint64_t{1} << 30);
  ASSERT_EQ(p.gids.size(), 4u);
  EXPECT_EQ(p.gids[3].index, 3);
  EXPECT_EQ(p.gids[3].type, "RoCEv2");
  EXPECT_EQ(p.gids[3].ipv4, "10.12.0.21");
  EXPECT_EQ(p.gids[3].netdev, "ens1f0np0");
  EXPECT_EQ(p.gids[0].type, "RoCEv1");
  EXPECT_TRUE(p.gids[0].ipv4.empty());

  ASSERT_EQ(r.loopback.size(), 1u);
  const calibrate::NicProbeLoopback& l = r.loopback[0];
  EXPECT_EQ(l.device, "mlx5_0");
  EXPECT_EQ(l.gid_index, 3);
  EXPECT_EQ(l.gid_type, "RoCEv2");
  EXPECT_FALSE(l.lid.has_value());
  ASSERT_EQ(l.rows.size(), 23u);  // 2 B .. 8 MiB
  EXPECT_EQ(l.rows.front().bytes, 2);
  EXPECT_EQ(l.rows.back().bytes, 8 << 20);
  EXPECT_DOUBLE_EQ(l.rows.back().bw_gbps, 387.158);
  EXPECT_EQ(l.rows[0].where.line, r.loopback[0].rows[1].where.line - 1);

  // The rows were made with 0.030 us + size / 388 Gb/s and up to 0.5% noise per row; the
  // overhead rests on the small sizes (about 10 rows within 0.5%), hence the wider tolerance.
  ASSERT_TRUE(l.fit.has_value()) << l.fit_note;
  EXPECT_NEAR(l.fit->bandwidth_gbps, 388, 388 * 0.005);
  EXPECT_NEAR(l.fit->overhead_us, 0.030, 0.030 * 0.03);
  EXPECT_LT(l.fit->residual, 0.005);
  EXPECT_FALSE(l.fit->overhead_clamped);
  EXPECT_EQ(l.fit->rows, 23);
  ASSERT_TRUE(l.fit->efficiency.has_value());
  EXPECT_NEAR(*l.fit->efficiency, 388.0 / 400.0, 0.005);
  ASSERT_TRUE(l.fit->latency_us.has_value());
  EXPECT_NEAR(*l.fit->latency_us, 1.58, 0.02);
}

TEST(NicProbeReport, ReadsInfiniBandSample) {
  const NicProbeReport r = calibrate::read_nicprobe_report(fixture_path("cx6_ib_hdr.yaml"));
  ASSERT_EQ(r.devices.size(), 1u);
  const calibrate::NicProbeDevice& d = r.devices[0];
  ASSERT_EQ(d.ports.size(), 2u);
  EXPECT_EQ(d.ports[0].link_layer, "InfiniBand");
  EXPECT_EQ(d.ports[0].speed, "HDR");
  EXPECT_DOUBLE_EQ(d.ports[0].rate_gbps, 200);
  EXPECT_EQ(d.ports[0].lid, 17);
  EXPECT_EQ(d.ports[0].sm_lid, 1);
  EXPECT_EQ(d.ports[0].gids[0].type, "IB");
  // A port that is down: speed and width unknown (null).
  EXPECT_EQ(d.ports[1].state, "DOWN");
  EXPECT_TRUE(d.ports[1].speed.empty());
  EXPECT_EQ(d.ports[1].rate_gbps, 0);
  EXPECT_EQ(r.find_port("mlx5_2", 2), &d.ports[1]);
  EXPECT_EQ(r.find_port("mlx5_2", 3), nullptr);

  ASSERT_EQ(r.loopback.size(), 1u);
  const calibrate::NicProbeLoopback& l = r.loopback[0];
  EXPECT_EQ(l.link_layer, "InfiniBand");
  EXPECT_EQ(l.lid, 17);
  EXPECT_FALSE(l.gid_index.has_value());
  ASSERT_EQ(l.rows.size(), 20u);  // 2 B .. 1 MiB
  // Made with 0.072 us + size / 196 Gb/s, up to 0.5% noise.
  ASSERT_TRUE(l.fit.has_value()) << l.fit_note;
  EXPECT_NEAR(l.fit->bandwidth_gbps, 196, 196 * 0.005);
  EXPECT_NEAR(l.fit->overhead_us, 0.072, 0.072 * 0.03);
  EXPECT_NEAR(*l.fit->efficiency, 196.0 / 200.0, 0.005);
  EXPECT_NEAR(*l.fit->latency_us, 1.12, 0.02);
}

TEST(NicProbeReport, WriterOutputReadsBackTheSame) {
  for (const char* name : {"cx7_roce_400g.yaml", "cx6_ib_hdr.yaml"}) {
    SCOPED_TRACE(name);
    const NicProbeReport a = calibrate::read_nicprobe_report(fixture_path(name));
    const std::string yaml = calibrate::nicprobe_to_yaml(a);
    EXPECT_THAT(yaml, HasSubstr("format: rocesim-nicprobe/1\n"));
    const NicProbeReport b = calibrate::read_nicprobe_yaml(yaml, "written.yaml");
    EXPECT_EQ(b.host, a.host);
    EXPECT_EQ(b.tool, a.tool);
    ASSERT_EQ(b.devices.size(), a.devices.size());
    for (size_t i = 0; i < a.devices.size(); ++i) {
      const auto &da = a.devices[i], &db = b.devices[i];
      EXPECT_EQ(db.name, da.name);
      EXPECT_EQ(db.fw_ver, da.fw_ver);
      EXPECT_EQ(db.vendor_id, da.vendor_id);
      EXPECT_EQ(db.numa_node, da.numa_node);
      EXPECT_EQ(db.limits, da.limits);
      ASSERT_EQ(db.ports.size(), da.ports.size());
      for (size_t k = 0; k < da.ports.size(); ++k) {
        const auto &pa = da.ports[k], &pb = db.ports[k];
        EXPECT_EQ(pb.state, pa.state);
        EXPECT_EQ(pb.link_layer, pa.link_layer);
        EXPECT_EQ(pb.speed_code, pa.speed_code);
        EXPECT_EQ(pb.speed, pa.speed);
        EXPECT_EQ(pb.width, pa.width);
        EXPECT_EQ(pb.rate_gbps, pa.rate_gbps);
        EXPECT_EQ(pb.mtu_active, pa.mtu_active);
        EXPECT_EQ(pb.lid, pa.lid);
        ASSERT_EQ(pb.gids.size(), pa.gids.size());
        for (size_t g = 0; g < pa.gids.size(); ++g) {
          EXPECT_EQ(pb.gids[g].gid, pa.gids[g].gid);
          EXPECT_EQ(pb.gids[g].type, pa.gids[g].type);
          EXPECT_EQ(pb.gids[g].ipv4, pa.gids[g].ipv4);
          EXPECT_EQ(pb.gids[g].netdev, pa.gids[g].netdev);
        }
      }
    }
    ASSERT_EQ(b.loopback.size(), a.loopback.size());
    for (size_t i = 0; i < a.loopback.size(); ++i) {
      const auto &la = a.loopback[i], &lb = b.loopback[i];
      EXPECT_EQ(lb.gid_index, la.gid_index);
      EXPECT_EQ(lb.lid, la.lid);
      EXPECT_EQ(lb.inline_bytes, la.inline_bytes);
      ASSERT_EQ(lb.rows.size(), la.rows.size());
      for (size_t k = 0; k < la.rows.size(); ++k) {
        EXPECT_EQ(lb.rows[k].bytes, la.rows[k].bytes);
        EXPECT_DOUBLE_EQ(lb.rows[k].bw_gbps, la.rows[k].bw_gbps);  // 6 digits both ways
        EXPECT_DOUBLE_EQ(lb.rows[k].lat_us_p99, la.rows[k].lat_us_p99);
      }
      ASSERT_TRUE(lb.fit.has_value());
      EXPECT_DOUBLE_EQ(lb.fit->bandwidth_gbps, la.fit->bandwidth_gbps);
    }
  }
}

TEST(NicProbeReport, SummaryNamesPortsAndFit) {
  const NicProbeReport r = calibrate::read_nicprobe_report(fixture_path("cx7_roce_400g.yaml"));
  const std::string s = calibrate::nicprobe_summary(r);
  EXPECT_THAT(s, HasSubstr("mlx5_0"));
  EXPECT_THAT(s, HasSubstr("400 Gb/s (4X NDR)"));
  EXPECT_THAT(s, HasSubstr("10.12.0.21"));
  EXPECT_THAT(s, HasSubstr("fit: time per message"));
  EXPECT_THAT(s, HasSubstr("8M"));
}

// ---------------------------------------------------------------------------------------------
// The fit

/// Rows exactly on t(s) = o + 8 s / (1000 B) us, 2 B .. 8 MiB; latency 1 us + s / B.
std::vector<NicProbeRow> model_rows(double o_us, double b_gbps,
                                    const std::vector<double>& noise = {}) {
  std::vector<NicProbeRow> rows;
  size_t k = 0;
  for (int64_t s = 2; s <= (int64_t{8} << 20); s *= 2, ++k) {
    const double e = noise.empty() ? 0 : noise[k % noise.size()];
    const double t = (o_us + 8.0 * static_cast<double>(s) / (1000 * b_gbps)) * (1 + e);
    NicProbeRow r;
    r.bytes = s;
    r.bw_gbps = 8.0 * static_cast<double>(s) / (1000 * t);
    r.msg_rate_mpps = 1 / t;
    r.lat_us_median = r.lat_us_min = r.lat_us_p99 =
        1.0 + 8.0 * static_cast<double>(s) / (1000 * b_gbps);
    rows.push_back(r);
  }
  return rows;
}

TEST(NicProbeFit, RecoversOverheadAndBandwidthFromExactRows) {
  // Rows on the line t = a + b s give the weighted sums exactly: b = sum w (s - s_bar)(t -
  // t_bar) / sum w (s - s_bar)^2 = b, a = t_bar - b s_bar = a, whatever the weights; only
  // rounding remains (relative 1e-9).
  const std::optional<NicProbeFit> f = calibrate::fit_loopback(model_rows(0.25, 100), 400);
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR(f->overhead_us, 0.25, 0.25 * 1e-9);
  EXPECT_NEAR(f->bandwidth_gbps, 100, 100 * 1e-9);
  EXPECT_NEAR(f->residual, 0, 1e-12);
  EXPECT_NEAR(*f->efficiency, 0.25, 1e-9);
  EXPECT_NEAR(*f->latency_us, 1.0, 1e-9);
  EXPECT_EQ(f->rows, 23);
}

TEST(NicProbeFit, RecoversWithinTheNoise) {
  // +-1% multiplicative noise per row: the relative residuals are about 1%, the bandwidth (set
  // by the ~10 bandwidth-bound rows) is within about 1% / sqrt(10), the overhead (set by the ~8
  // overhead-bound rows) within about 1%; tolerances 1% and 3%.
  const std::vector<double> noise{0.01, -0.01, 0.007, -0.004, -0.01, 0.01, 0.002, -0.006};
  const std::optional<NicProbeFit> f = calibrate::fit_loopback(model_rows(0.040, 390, noise), 400);
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR(f->bandwidth_gbps, 390, 390 * 0.01);
  EXPECT_NEAR(f->overhead_us, 0.040, 0.040 * 0.03);
  EXPECT_GT(f->residual, 0.002);
  EXPECT_LT(f->residual, 0.012);
}

TEST(NicProbeFit, NegativeOverheadIsFittedAtZero) {
  // Large sizes only, with times 0.5 us short of pure streaming at 400 Gb/s: the free fit's
  // intercept is -0.5 us; the fit with o >= 0 puts o = 0 and, with w = 1 / t^2,
  // b = sum w s t / sum w s^2 = sum (s / t) / sum (s / t)^2, B = 8 / (1000 b): a weighted mean
  // of the rows' own bandwidths, between 400 and the fastest row's (1 MiB: 2.4% over).
  std::vector<NicProbeRow> rows;
  double sum_st = 0, sum_ss = 0;
  for (int64_t s = 1 << 20; s <= (8 << 20); s *= 2) {
    const double t = 8.0 * static_cast<double>(s) / (1000 * 400.0) - 0.5;
    NicProbeRow r;
    r.bytes = s;
    r.bw_gbps = 8.0 * static_cast<double>(s) / (1000 * t);
    r.msg_rate_mpps = 1 / t;
    rows.push_back(r);
    sum_st += static_cast<double>(s) / t;
    sum_ss += (static_cast<double>(s) / t) * (static_cast<double>(s) / t);
  }
  const double expected_gbps = 8.0 / (1000 * (sum_st / sum_ss));
  std::string note;
  const std::optional<NicProbeFit> f = calibrate::fit_loopback(rows, 0, &note);
  ASSERT_TRUE(f.has_value());
  EXPECT_TRUE(f->overhead_clamped);
  EXPECT_EQ(f->overhead_us, 0);
  EXPECT_NEAR(f->bandwidth_gbps, expected_gbps, expected_gbps * 1e-9);
  EXPECT_GT(f->bandwidth_gbps, 400);
  EXPECT_LT(f->bandwidth_gbps, rows.front().bw_gbps);
  EXPECT_FALSE(f->efficiency.has_value());  // no rate given
  EXPECT_FALSE(f->latency_us.has_value());  // no latencies in these rows
  EXPECT_THAT(note, HasSubstr("negative overhead"));
}

TEST(NicProbeFit, NeedsTwoSizes) {
  std::string note;
  std::vector<NicProbeRow> rows = model_rows(0.25, 100);
  rows.resize(1);
  EXPECT_FALSE(calibrate::fit_loopback(rows, 400, &note).has_value());
  EXPECT_THAT(note, HasSubstr("two message sizes"));
}

TEST(NicProbeFit, NoFitWhenTimeDoesNotGrowWithSize) {
  // Every size at the same message rate: the slope is 0, no bandwidth.
  std::vector<NicProbeRow> rows = model_rows(0.25, 100);
  for (NicProbeRow& r : rows)
    r.bw_gbps = 8.0 * static_cast<double>(r.bytes) / 1000.0;  // 1 us per message
  std::string note;
  EXPECT_FALSE(calibrate::fit_loopback(rows, 400, &note).has_value());
  EXPECT_THAT(note, HasSubstr("bandwidth not positive"));
}

// ---------------------------------------------------------------------------------------------
// Decoding

TEST(NicProbeDecode, SpeedsWidthsMtus) {
  EXPECT_EQ(calibrate::decode_ib_speed(1)->name, "SDR");
  EXPECT_DOUBLE_EQ(calibrate::decode_ib_speed(1)->lane_gbps, 2.5);
  EXPECT_EQ(calibrate::decode_ib_speed(8)->name, "FDR10");
  EXPECT_DOUBLE_EQ(calibrate::decode_ib_speed(16)->lane_gbps, 14);
  EXPECT_DOUBLE_EQ(calibrate::decode_ib_speed(32)->lane_gbps, 25);
  EXPECT_EQ(calibrate::decode_ib_speed(64)->name, "HDR");
  EXPECT_DOUBLE_EQ(calibrate::decode_ib_speed(128)->lane_gbps, 100);
  EXPECT_EQ(calibrate::decode_ib_speed(256)->name, "XDR");  // active_speed_ex only
  EXPECT_DOUBLE_EQ(calibrate::decode_ib_speed(256)->lane_gbps, 200);
  EXPECT_FALSE(calibrate::decode_ib_speed(0).has_value());
  EXPECT_FALSE(calibrate::decode_ib_speed(3).has_value());

  EXPECT_EQ(calibrate::decode_ib_width(1), 1);
  EXPECT_EQ(calibrate::decode_ib_width(2), 4);
  EXPECT_EQ(calibrate::decode_ib_width(4), 8);
  EXPECT_EQ(calibrate::decode_ib_width(8), 12);
  EXPECT_EQ(calibrate::decode_ib_width(16), 2);
  EXPECT_FALSE(calibrate::decode_ib_width(0).has_value());

  EXPECT_EQ(calibrate::decode_ib_mtu(1), 256);
  EXPECT_EQ(calibrate::decode_ib_mtu(3), 1024);
  EXPECT_EQ(calibrate::decode_ib_mtu(5), 4096);
  EXPECT_FALSE(calibrate::decode_ib_mtu(0).has_value());
  EXPECT_FALSE(calibrate::decode_ib_mtu(6).has_value());

  EXPECT_EQ(calibrate::port_state_name(4), "ACTIVE");
  EXPECT_EQ(calibrate::port_state_name(1), "DOWN");
  EXPECT_EQ(calibrate::port_state_name(9), "unknown(9)");
  EXPECT_EQ(calibrate::port_phys_state_name(5), "LINK_UP");
  EXPECT_EQ(calibrate::port_phys_state_name(2), "POLLING");
  EXPECT_EQ(calibrate::link_layer_name(2), "Ethernet");
  EXPECT_EQ(calibrate::link_layer_name(1), "InfiniBand");
  EXPECT_EQ(calibrate::link_layer_name(0), "unspecified");
}

TEST(NicProbeDecode, Gids) {
  const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 12, 0, 21};
  EXPECT_EQ(calibrate::format_gid(v4), "0000:0000:0000:0000:0000:ffff:0a0c:0015");
  EXPECT_EQ(calibrate::gid_ipv4(v4), "10.12.0.21");
  const uint8_t link_local[16] = {0xfe, 0x80, 0,    0,    0,    0,    0,    0,
                                  0x96, 0x6d, 0xae, 0xff, 0xfe, 0xf2, 0x1a, 0x3c};
  EXPECT_EQ(calibrate::format_gid(link_local), "fe80:0000:0000:0000:966d:aeff:fef2:1a3c");
  EXPECT_EQ(calibrate::gid_ipv4(link_local), "");
}

TEST(NicProbeDecode, MessageSizes) {
  const std::vector<int64_t> all = calibrate::parse_message_sizes("2:8M", int64_t{1} << 30);
  ASSERT_EQ(all.size(), 23u);
  EXPECT_EQ(all.front(), 2);
  EXPECT_EQ(all[1], 4);
  EXPECT_EQ(all.back(), 8 << 20);
  EXPECT_EQ(calibrate::parse_message_sizes("64,4K,1M,64", 1 << 30),
            (std::vector<int64_t>{64, 4096, 1 << 20}));
  EXPECT_EQ(calibrate::parse_message_sizes("1G", int64_t{1} << 30),
            (std::vector<int64_t>{int64_t{1} << 30}));
  EXPECT_EQ(calibrate::parse_message_sizes("3:20", 1 << 30), (std::vector<int64_t>{3, 6, 12}));
  for (const char* bad : {"8:2", "0:8", "2:2G", "abc", "", "4,,8", "-4", "2:8X"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(calibrate::parse_message_sizes(bad, int64_t{1} << 30), std::invalid_argument);
  }
}

// ---------------------------------------------------------------------------------------------
// Malformed files: every error names the file, the line and column, the key, what was expected
// and what was found.

/// The RoCE sample with `from` (which must occur in it) replaced by `to`.
std::string edited(const std::string& from, const std::string& to,
                   const std::string& name = "cx7_roce_400g.yaml") {
  std::string text = fixture_text(name);
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

/// 1-based line and column of the first `needle` in `text`.
std::pair<int, int> position(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  const size_t line_start =
      text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
  const int line = 1 + static_cast<int>(std::count(
                           text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  return {line, static_cast<int>(at - line_start) + 1};
}

InputError read_error(const std::string& text) {
  return input_error([&] { calibrate::read_nicprobe_yaml(text, "bad.yaml"); });
}

void expect_at(const InputError& e, const std::string& text, const std::string& needle,
               const std::string& key) {
  const auto [line, column] = position(text, needle);
  EXPECT_EQ(e.where().line, line) << e.what();
  EXPECT_EQ(e.where().column, column) << e.what();
  EXPECT_EQ(e.key(), key) << e.what();
  EXPECT_THAT(e.what(), HasSubstr(fmt::format("bad.yaml:{}:{}: error: '{}'", line, column, key)));
}

TEST(NicProbeMalformed, MissingFormat) {
  const std::string text = edited("format: rocesim-nicprobe/1\n", "");
  const InputError e = read_error(text);
  expect_at(e, text, "tool:", "format");  // the mapping that lacks it starts at its first key
  EXPECT_THAT(e.what(), HasSubstr("expected 'format: rocesim-nicprobe/1', found no such key"));
}

TEST(NicProbeMalformed, OtherFormatVersion) {
  const std::string text = edited("format: rocesim-nicprobe/1", "format: rocesim-nicprobe/2");
  const InputError e = read_error(text);
  expect_at(e, text, "rocesim-nicprobe/2", "format");
  EXPECT_THAT(e.what(), HasSubstr("found 'rocesim-nicprobe/2'"));
}

TEST(NicProbeMalformed, WrongTypeOfRate) {
  const std::string text = edited("rate_gbps: 400", "rate_gbps: fast");
  const InputError e = read_error(text);
  expect_at(e, text, "fast", "devices[0].ports[0].rate_gbps");
  EXPECT_THAT(e.what(), HasSubstr("expected a positive number (the port's data rate in Gb/s), "
                                  "found 'fast'"));
}

TEST(NicProbeMalformed, RateInconsistentWithLanes) {
  const std::string text = edited("rate_gbps: 400", "rate_gbps: 200");
  const InputError e = read_error(text);
  expect_at(e, text, "200\n", "devices[0].ports[0].rate_gbps");
  EXPECT_THAT(e.what(), HasSubstr("lanes x lane_gbps = 4 x 100 = 400 Gb/s"));
}

TEST(NicProbeMalformed, NegativeBandwidth) {
  const std::string text = edited("bw_gbps: 0.530479", "bw_gbps: -0.530479");
  const InputError e = read_error(text);
  expect_at(e, text, "-0.530479", "loopback[0].rows[0].bw_gbps");
  EXPECT_THAT(e.what(), HasSubstr("expected a positive number (bandwidth in Gb/s)"));
}

TEST(NicProbeMalformed, BandwidthInconsistentWithMessageRate) {
  const std::string text = edited("bw_gbps: 100.492", "bw_gbps: 110.492");
  const InputError e = read_error(text);
  expect_at(e, text, "110.492", "loopback[0].rows[8].bw_gbps");
  EXPECT_THAT(e.what(), HasSubstr("bytes x 8 x msg_rate_mpps / 1000 = 100.49"));
}

TEST(NicProbeMalformed, MissingRowKey) {
  const std::string text = edited("msg_rate_mpps: 33.155, ", "");
  const InputError e = read_error(text);
  expect_at(e, text, "{bytes: 2,", "loopback[0].rows[0].msg_rate_mpps");
  EXPECT_THAT(e.what(), HasSubstr("found no such key"));
}

TEST(NicProbeMalformed, UnknownKey) {
  const std::string text =
      edited("        mtu_max: 4096\n", "        mtu_max: 4096\n        colour: blue\n");
  const InputError e = read_error(text);
  expect_at(e, text, "colour", "devices[0].ports[0].colour");
  EXPECT_THAT(e.what(), HasSubstr("found the unknown key 'colour'"));
}

TEST(NicProbeMalformed, BadMtu) {
  const std::string text = edited("mtu_active: 4096", "mtu_active: 3000");
  const InputError e = read_error(text);
  expect_at(e, text, "3000", "devices[0].ports[0].mtu_active");
  EXPECT_THAT(e.what(), HasSubstr("256, 512, 1024, 2048 or 4096"));
}

TEST(NicProbeMalformed, PortsNotAList) {
  const std::string text = fixture_text("cx6_ib_hdr.yaml");
  const size_t from = text.find("    ports:\n");
  const size_t to = text.find("loopback:");
  const std::string cut = text.substr(0, from) + "    ports: 1\n" + text.substr(to);
  const InputError e = read_error(cut);
  expect_at(e, cut, "1\nloopback", "devices[0].ports");
  EXPECT_THAT(e.what(), HasSubstr("expected a non-empty list of ports, found '1'"));
}

TEST(NicProbeMalformed, BadGid) {
  const std::string text = edited("\"fe80:0000:0000:0000:966d:aeff:fef2:1a3c\", type: RoCEv1",
                                  "\"fe80::966d:aeff:fef2:1a3c\", type: RoCEv1");
  const InputError e = read_error(text);
  expect_at(e, text, "\"fe80::", "devices[0].ports[0].gids[0].gid");
}

TEST(NicProbeMalformed, LoopbackOnUnlistedDevice) {
  const std::string text = edited("  - device: \"mlx5_0\"", "  - device: \"mlx5_9\"");
  const InputError e = read_error(text);
  expect_at(e, text, "\"mlx5_9\"", "loopback[0].device");
  EXPECT_THAT(e.what(), HasSubstr("the name of a device listed under 'devices'"));
}

TEST(NicProbeMalformed, RoceLoopbackWithoutGidIndex) {
  const std::string text = edited("    gid_index: 3\n", "");
  const InputError e = read_error(text);
  expect_at(e, text, "device: \"mlx5_0\"\n    port: 1", "loopback[0].gid_index");
}

TEST(NicProbeMalformed, SizesOutOfOrder) {
  // The 4-byte row measured at 2 bytes: the size repeats.
  const std::string text = edited("{bytes: 4, bw_gbps: 1.06694, msg_rate_mpps: 33.342,",
                                  "{bytes: 2, bw_gbps: 0.530479, msg_rate_mpps: 33.155,");
  const InputError e = read_error(text);
  expect_at(e, text, "2, bw_gbps: 0.530479, msg_rate_mpps: 33.155, lat_us_median: 1.58087",
            "loopback[0].rows[1].bytes");
  EXPECT_THAT(e.what(), HasSubstr("increasing order"));
}

TEST(NicProbeMalformed, PercentileBelowMedian) {
  const std::string text = edited("lat_us_p99: 1.91522", "lat_us_p99: 1.2");
  const InputError e = read_error(text);
  expect_at(e, text, "1.2}", "loopback[0].rows[0].lat_us_p99");
}

TEST(NicProbeMalformed, YamlSyntax) {
  const std::string text = edited("host: \"gpu-node-017\"", "host: [gpu-node-017");
  const InputError e = read_error(text);
  EXPECT_GT(e.where().line, 0);
  EXPECT_THAT(e.what(), HasSubstr("valid YAML"));
}

TEST(NicProbeMalformed, MissingFile) {
  const InputError e =
      input_error([] { calibrate::read_nicprobe_report(fixture_path("no_such_report.yaml")); });
  EXPECT_THAT(e.what(), HasSubstr("does not exist"));
}

}  // namespace
}  // namespace rocesim::test
