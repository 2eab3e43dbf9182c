#include "calibrate/lib/nicprobe_report.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <stdexcept>

#include "sim/collectives/nccl/nccl_tests.hpp"
#include "sim/core/config.hpp"
#include "sim/scenario/yaml_source.hpp"

namespace rocesim::calibrate {

// ---------------------------------------------------------------------------------------------
// Decoding

std::optional<IbSpeed> decode_ib_speed(uint32_t code) {
  switch (code) {
    case 1:
      return IbSpeed{"SDR", 2.5};
    case 2:
      return IbSpeed{"DDR", 5};
    case 4:
      return IbSpeed{"QDR", 10};
    case 8:
      return IbSpeed{"FDR10", 10};
    case 16:
      return IbSpeed{"FDR", 14};
    case 32:
      return IbSpeed{"EDR", 25};
    case 64:
      return IbSpeed{"HDR", 50};
    case 128:
      return IbSpeed{"NDR", 100};
    case 256:
      return IbSpeed{"XDR", 200};
    default:
      return std::nullopt;
  }
}

std::optional<int> decode_ib_width(uint32_t code) {
  switch (code) {
    case 1:
      return 1;
    case 2:
      return 4;
    case 4:
      return 8;
    case 8:
      return 12;
    case 16:
      return 2;
    default:
      return std::nullopt;
  }
}

std::optional<int> decode_ib_mtu(uint32_t code) {
  if (code < 1 || code > 5) return std::nullopt;
  return 128 << code;
}

std::string port_state_name(uint32_t state) {
  static constexpr std::array<std::string_view, 6> kNames{"NOP",   "DOWN",   "INIT",
                                                          "ARMED", "ACTIVE", "ACTIVE_DEFER"};
  if (state < kNames.size()) return std::string(kNames[state]);
  return fmt::format("unknown({})", state);
}

std::string port_phys_state_name(uint32_t phys_state) {
  static constexpr std::array<std::string_view, 8> kNames{"NOP",
                                                          "SLEEP",
                                                          "POLLING",
                                                          "DISABLED",
                                                          "PORT_CONFIGURATION_TRAINING",
                                                          "LINK_UP",
                                                          "LINK_ERROR_RECOVERY",
                                                          "PHY_TEST"};
  if (phys_state >= 1 && phys_state < kNames.size()) return std::string(kNames[phys_state]);
  return fmt::format("unknown({})", phys_state);
}

std::string link_layer_name(uint32_t link_layer) {
  switch (link_layer) {
    case 1:
      return "InfiniBand";
    case 2:
      return "Ethernet";
    default:
      return "unspecified";
  }
}

std::string format_gid(const uint8_t (&raw)[16]) {
  std::string out;
  for (int i = 0; i < 16; i += 2) {
    if (i > 0) out += ':';
    out += fmt::format("{:02x}{:02x}", raw[i], raw[i + 1]);
  }
  return out;
}

std::string gid_ipv4(const uint8_t (&raw)[16]) {
  for (int i = 0; i < 10; ++i) {
    if (raw[i] != 0) return "";
  }
  if (raw[10] != 0xff || raw[11] != 0xff) return "";
  return fmt::format("{}.{}.{}.{}", raw[12], raw[13], raw[14], raw[15]);
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<int64_t> parse_message_sizes(std::string_view text, int64_t max_bytes) {
  const auto size_of = [&](std::string_view s) {
    // The sizes nccl-tests and perftest take: bytes, optionally with K, M or G (powers of 1024).
    const std::optional<int64_t> v = collectives::nccl::parse_nccl_tests_size(trim(s));
    if (!v) {
      throw std::invalid_argument(fmt::format(
          "'{}' is not a message size (a whole number of bytes, optionally with K, M or G)",
          trim(s)));
    }
    if (*v < 1) throw std::invalid_argument("message sizes must be at least 1 byte");
    if (*v > max_bytes) {
      throw std::invalid_argument(
          fmt::format("message size {} is over the largest allowed, {} bytes", *v, max_bytes));
    }
    return *v;
  };
  std::vector<int64_t> sizes;
  if (const size_t colon = text.find(':'); colon != std::string_view::npos) {
    const int64_t lo = size_of(text.substr(0, colon));
    const int64_t hi = size_of(text.substr(colon + 1));
    if (hi < lo) {
      throw std::invalid_argument(
          fmt::format("the range {}:{} is empty (MIN must not exceed MAX)", lo, hi));
    }
    for (int64_t s = lo; s <= hi; s *= 2)
      sizes.push_back(s);
  } else {
    size_t start = 0;
    while (start <= text.size()) {
      const size_t comma = std::min(text.find(',', start), text.size());
      sizes.push_back(size_of(text.substr(start, comma - start)));
      start = comma + 1;
    }
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  }
  return sizes;
}

// ---------------------------------------------------------------------------------------------
// Report

std::optional<uint64_t> NicProbeDevice::limit(std::string_view key) const {
  for (const auto& [k, v] : limits) {
    if (k == key) return v;
  }
  return std::nullopt;
}

const NicProbeDevice* NicProbeReport::find_device(std::string_view name) const {
  for (const NicProbeDevice& d : devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

const NicProbePort* NicProbeReport::find_port(std::string_view device, int port) const {
  const NicProbeDevice* d = find_device(device);
  if (d == nullptr) return nullptr;
  for (const NicProbePort& p : d->ports) {
    if (p.port == port) return &p;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Fit

namespace {

struct LineFit {
  double a = 0;  // intercept, us
  double b = 0;  // slope, us per byte
  bool clamped = false;
};

/// Weighted least squares of t = a + b s with weights 1 / t^2 (relative errors); a >= 0.
std::optional<LineFit> fit_line(const std::vector<double>& s, const std::vector<double>& t) {
  double sw = 0, sws = 0, swt = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const double w = 1 / (t[i] * t[i]);
    sw += w;
    sws += w * s[i];
    swt += w * t[i];
  }
  const double s_bar = sws / sw, t_bar = swt / sw;
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const double w = 1 / (t[i] * t[i]);
    sxx += w * (s[i] - s_bar) * (s[i] - s_bar);
    sxy += w * (s[i] - s_bar) * (t[i] - t_bar);
  }
  if (!(sxx > 0)) return std::nullopt;
  LineFit f;
  f.b = sxy / sxx;
  f.a = t_bar - f.b * s_bar;
  if (f.a < 0) {
    // The constrained optimum (a >= 0) of a convex problem whose free optimum has a < 0.
    double swss = 0, swst = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const double w = 1 / (t[i] * t[i]);
      swss += w * s[i] * s[i];
      swst += w * s[i] * t[i];
    }
    f.a = 0;
    f.b = swst / swss;
    f.clamped = true;
  }
  if (!(f.b > 0) || !std::isfinite(f.b)) return std::nullopt;
  return f;
}

}  // namespace

std::optional<NicProbeFit> fit_loopback(const std::vector<NicProbeRow>& rows, double rate_gbps,
                                        std::string* note) {
  const auto fail = [&](std::string why) -> std::optional<NicProbeFit> {
    if (note != nullptr) *note = std::move(why);
    return std::nullopt;
  };
  std::vector<double> s, t, lat;
  for (const NicProbeRow& r : rows) {
    if (!(r.bw_gbps > 0) || r.bytes <= 0) continue;
    s.push_back(static_cast<double>(r.bytes));
    t.push_back(8.0 * static_cast<double>(r.bytes) / (1000.0 * r.bw_gbps));
    lat.push_back(r.lat_us_median);
  }
  const bool two_sizes = std::adjacent_find(s.begin(), s.end(), std::not_equal_to<>()) != s.end();
  if (!two_sizes) return fail("no fit: the loopback test needs at least two message sizes");
  const std::optional<LineFit> f = fit_line(s, t);
  if (!f) {
    return fail(
        "no fit: the time per message does not grow with the message size (bandwidth not "
        "positive)");
  }
  NicProbeFit out;
  out.overhead_us = f->a;
  out.bandwidth_gbps = 8.0 / (1000.0 * f->b);
  out.overhead_clamped = f->clamped;
  out.rows = static_cast<int>(s.size());
  double sum2 = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const double e = (f->a + f->b * s[i]) / t[i] - 1;
    sum2 += e * e;
  }
  out.residual = std::sqrt(sum2 / static_cast<double>(s.size()));
  if (std::all_of(lat.begin(), lat.end(), [](double v) { return v > 0; })) {
    if (const std::optional<LineFit> l = fit_line(s, lat)) out.latency_us = l->a;
  }
  if (rate_gbps > 0) out.efficiency = out.bandwidth_gbps / rate_gbps;
  if (note != nullptr) {
    *note = f->clamped ? "the free fit gave a negative overhead (the sweep does not reach "
                         "overhead-bound sizes, or noise); fitted with overhead 0"
                       : "";
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Reading

namespace {

/// A mapping of the file, read key by key; every error names the key and its location.
class MapReader {
 public:
  /// `what` describes the mapping in messages ("a device").
  MapReader(const ConfigNode& node, std::string_view what,
            std::initializer_list<std::string_view> keys)
      : node_(node) {
    if (!node.is_map()) {
      throw InputError(node.where(), node.path(), fmt::format("a mapping ({})", what),
                       node.describe());
    }
    for (const ConfigNode::Entry& e : node.entries()) {
      if (std::find(keys.begin(), keys.end(), e.key) == keys.end()) {
        std::string list;
        for (const std::string_view k : keys)
          list += (list.empty() ? "" : ", ") + std::string(k);
        throw InputError(e.key_where, config_path(node.path(), e.key),
                         fmt::format("one of the keys of {}: {}", what, list),
                         fmt::format("the unknown key '{}'", e.key));
      }
    }
  }

  const ConfigNode& node() const { return node_; }
  SourceLocation where() const { return node_.where(); }

  /// The value of `key`, or nullptr when absent or null.
  const ConfigNode* optional(std::string_view key) const {
    const ConfigNode* n = node_.find(key);
    return n == nullptr || n->is_null() ? nullptr : n;
  }
  /// The value of `key`; absent or null is an error.
  const ConfigNode& required(std::string_view key, std::string_view expected) const {
    const ConfigNode* n = node_.find(key);
    if (n == nullptr) {
      throw InputError(node_.where(), config_path(node_.path(), key), std::string(expected),
                       "no such key");
    }
    if (n->is_null()) throw InputError(n->where(), n->path(), std::string(expected), n->describe());
    return *n;
  }

 private:
  const ConfigNode& node_;
};

[[noreturn]] void bad(const ConfigNode& n, std::string_view expected) {
  throw InputError(n.where(), n.path(), std::string(expected), n.describe());
}

std::string text(const ConfigNode& n, std::string_view expected = "a single value (text)") {
  if (!n.is_scalar()) bad(n, expected);
  return n.value();
}

std::optional<int64_t> parse_integer(std::string_view s) {
  int base = 10;
  if (s.starts_with("0x") || s.starts_with("0X")) {
    s.remove_prefix(2);
    base = 16;
  }
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

int64_t integer(const ConfigNode& n, int64_t least, int64_t most, std::string_view what) {
  const std::string expected =
      most == INT64_MAX ? fmt::format("a whole number >= {} ({})", least, what)
                        : fmt::format("a whole number in {}..{} ({})", least, most, what);
  if (!n.is_scalar()) bad(n, expected);
  const std::optional<int64_t> v = parse_integer(n.value());
  if (!v || *v < least || *v > most) bad(n, expected);
  return *v;
}

uint64_t unsigned_integer(const ConfigNode& n, std::string_view what) {
  const std::string expected = fmt::format("a whole number >= 0 ({})", what);
  if (!n.is_scalar()) bad(n, expected);
  std::string_view s = n.value();
  int base = 10;
  if (s.starts_with("0x") || s.starts_with("0X")) {
    s.remove_prefix(2);
    base = 16;
  }
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) bad(n, expected);
  return v;
}

/// A finite number > 0 (or >= 0 with `zero_ok`).
double number(const ConfigNode& n, std::string_view what, bool zero_ok = false) {
  const std::string expected =
      fmt::format("a {} number ({})", zero_ok ? "non-negative" : "positive", what);
  if (!n.is_scalar()) bad(n, expected);
  const std::string_view s = n.value();
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || !std::isfinite(v) || v < 0 ||
      (v == 0 && !zero_ok)) {
    bad(n, expected);
  }
  return v;
}

std::string choice(const ConfigNode& n, std::initializer_list<std::string_view> choices) {
  std::string list;
  for (const std::string_view c : choices)
    list += (list.empty() ? "" : ", ") + std::string(c);
  const std::string expected = "one of " + list;
  const std::string v = text(n, expected);
  if (std::find(choices.begin(), choices.end(), v) == choices.end()) bad(n, expected);
  return v;
}

const std::vector<ConfigNode>& list(const ConfigNode& n, std::string_view expected,
                                    bool non_empty) {
  if (!n.is_sequence() || (non_empty && n.items().empty())) bad(n, expected);
  return n.items();
}

int mtu_bytes(const ConfigNode& n) {
  const int64_t v = integer(n, 256, 4096, "MTU in bytes: 256, 512, 1024, 2048 or 4096");
  if (v != 256 && v != 512 && v != 1024 && v != 2048 && v != 4096)
    bad(n, "an MTU in bytes: 256, 512, 1024, 2048 or 4096");
  return static_cast<int>(v);
}

bool is_gid_text(std::string_view s) {
  if (s.size() != 39) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (i % 5 == 4) {
      if (c != ':') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

/// |a - b| within `rel` of b (plus a rounding allowance for the 6 digits the tool writes).
bool close(double a, double b, double rel) {
  return std::abs(a - b) <= rel * std::abs(b) + 1e-9;
}

NicProbeGid read_gid(const ConfigNode& node) {
  const MapReader m(node, "a GID table entry", {"index", "gid", "type", "netdev", "ipv4"});
  NicProbeGid g;
  g.where = m.where();
  g.index = static_cast<int>(integer(m.required("index", "the GID index"), 0, 65535, "GID index"));
  const ConfigNode& gid = m.required("gid", "a GID: eight groups of four hex digits");
  g.gid = text(gid);
  if (!is_gid_text(g.gid)) bad(gid, "a GID: eight groups of four hex digits separated by ':'");
  g.type =
      choice(m.required("type", "the GID type: IB, RoCEv1 or RoCEv2"), {"IB", "RoCEv1", "RoCEv2"});
  if (const ConfigNode* n = m.optional("netdev")) g.netdev = text(*n);
  if (const ConfigNode* n = m.optional("ipv4")) g.ipv4 = text(*n);
  return g;
}

NicProbePort read_port(const ConfigNode& node) {
  const MapReader m(node, "a port",
                    {"port", "state", "phys_state", "link_layer", "active_speed", "active_width",
                     "speed", "lane_gbps", "width", "lanes", "rate_gbps", "mtu_active", "mtu_max",
                     "lid", "sm_lid", "max_msg_bytes", "gid_table_size", "gids"});
  NicProbePort p;
  p.where = m.where();
  p.port = static_cast<int>(integer(m.required("port", "the port number"), 1, 255, "port number"));
  p.state = text(m.required("state", "the port state (ACTIVE, DOWN, ...)"));
  if (const ConfigNode* n = m.optional("phys_state")) p.phys_state = text(*n);
  p.link_layer = choice(m.required("link_layer", "the link layer: Ethernet or InfiniBand"),
                        {"Ethernet", "InfiniBand", "unspecified"});
  if (const ConfigNode* n = m.optional("active_speed"))
    p.speed_code = static_cast<uint32_t>(integer(*n, 0, 65535, "verbs active_speed code"));
  if (const ConfigNode* n = m.optional("active_width"))
    p.width_code = static_cast<uint32_t>(integer(*n, 0, 255, "verbs active_width code"));
  if (const ConfigNode* n = m.optional("speed")) p.speed = text(*n);
  if (const ConfigNode* n = m.optional("lane_gbps")) p.lane_gbps = number(*n, "Gb/s per lane");
  if (const ConfigNode* n = m.optional("width")) p.width = text(*n);
  if (const ConfigNode* n = m.optional("lanes"))
    p.lanes = static_cast<int>(integer(*n, 1, 32, "lanes"));
  if (const ConfigNode* n = m.optional("rate_gbps")) {
    p.rate_gbps = number(*n, "the port's data rate in Gb/s");
    if (p.lanes > 0 && p.lane_gbps > 0 && !close(p.rate_gbps, p.lanes * p.lane_gbps, 0.01)) {
      bad(*n, fmt::format("lanes x lane_gbps = {} x {} = {} Gb/s", p.lanes, p.lane_gbps,
                          p.lanes * p.lane_gbps));
    }
  }
  p.mtu_active = mtu_bytes(m.required("mtu_active", "the active MTU in bytes"));
  p.mtu_max = mtu_bytes(m.required("mtu_max", "the largest MTU in bytes"));
  if (const ConfigNode* n = m.optional("lid"))
    p.lid = static_cast<int>(integer(*n, 0, 65535, "LID"));
  if (const ConfigNode* n = m.optional("sm_lid"))
    p.sm_lid = static_cast<int>(integer(*n, 0, 65535, "LID of the subnet manager"));
  if (const ConfigNode* n = m.optional("max_msg_bytes"))
    p.max_msg_bytes = unsigned_integer(*n, "bytes");
  if (const ConfigNode* n = m.optional("gid_table_size"))
    p.gid_table_size = static_cast<int>(integer(*n, 0, 65535, "GID table entries"));
  if (const ConfigNode* n = m.optional("gids")) {
    for (const ConfigNode& item : list(*n, "a list of GID table entries", false))
      p.gids.push_back(read_gid(item));
  }
  return p;
}

NicProbeDevice read_device(const ConfigNode& node) {
  const MapReader m(node, "a device",
                    {"name", "node_type", "node_guid", "fw_ver", "vendor_id", "vendor_part_id",
                     "hw_ver", "pci", "numa_node", "limits", "ports"});
  NicProbeDevice d;
  d.where = m.where();
  d.name = text(m.required("name", "the device name (mlx5_0)"));
  if (const ConfigNode* n = m.optional("node_type")) d.node_type = text(*n);
  if (const ConfigNode* n = m.optional("node_guid")) d.node_guid = text(*n);
  if (const ConfigNode* n = m.optional("fw_ver")) d.fw_ver = text(*n);
  if (const ConfigNode* n = m.optional("vendor_id"))
    d.vendor_id = static_cast<uint32_t>(integer(*n, 0, UINT32_MAX, "PCI vendor id"));
  if (const ConfigNode* n = m.optional("vendor_part_id"))
    d.vendor_part_id = static_cast<uint32_t>(integer(*n, 0, UINT32_MAX, "PCI device id"));
  if (const ConfigNode* n = m.optional("hw_ver"))
    d.hw_ver = static_cast<uint32_t>(integer(*n, 0, UINT32_MAX, "hardware revision"));
  if (const ConfigNode* n = m.optional("pci")) d.pci = text(*n);
  if (const ConfigNode* n = m.optional("numa_node"))
    d.numa_node = static_cast<int>(integer(*n, 0, 65535, "NUMA node"));
  if (const ConfigNode* n = m.optional("limits")) {
    if (!n->is_map()) bad(*n, "a mapping of device limits to whole numbers");
    for (const ConfigNode::Entry& e : n->entries())
      d.limits.emplace_back(e.key, unsigned_integer(e.value, "a device limit"));
  }
  for (const ConfigNode& item :
       list(m.required("ports", "a list of ports"), "a non-empty list of ports", true)) {
    NicProbePort p = read_port(item);
    for (const NicProbePort& q : d.ports) {
      if (q.port == p.port) {
        throw InputError(item.find("port")->where(), config_path(item.path(), "port"),
                         "each port of a device once", fmt::format("port {} again", p.port));
      }
    }
    d.ports.push_back(std::move(p));
  }
  return d;
}

NicProbeRow read_row(const ConfigNode& node) {
  const MapReader m(
      node, "a loopback row",
      {"bytes", "bw_gbps", "msg_rate_mpps", "lat_us_median", "lat_us_min", "lat_us_p99"});
  NicProbeRow r;
  r.where = m.where();
  r.bytes = integer(m.required("bytes", "the message size in bytes"), 1, INT64_MAX,
                    "message size in bytes");
  const ConfigNode& bw = m.required("bw_gbps", "the bandwidth in Gb/s");
  r.bw_gbps = number(bw, "bandwidth in Gb/s");
  const ConfigNode& rate = m.required("msg_rate_mpps", "the message rate in Mpps");
  r.msg_rate_mpps = number(rate, "million messages per second");
  const ConfigNode& med = m.required("lat_us_median", "the median latency in us");
  r.lat_us_median = number(med, "one-way latency in us");
  r.lat_us_min =
      number(m.required("lat_us_min", "the minimum latency in us"), "one-way latency in us");
  const ConfigNode& p99 = m.required("lat_us_p99", "the 99th percentile latency in us");
  r.lat_us_p99 = number(p99, "one-way latency in us");
  const double expected_bw = 8.0 * static_cast<double>(r.bytes) * r.msg_rate_mpps / 1000.0;
  if (!close(r.bw_gbps, expected_bw, 0.01)) {
    bad(bw, fmt::format("bytes x 8 x msg_rate_mpps / 1000 = {:.6g} Gb/s (within 1%)", expected_bw));
  }
  if (r.lat_us_median < r.lat_us_min) {
    bad(med, fmt::format("a median at least lat_us_min ({:.6g} us)", r.lat_us_min));
  }
  if (r.lat_us_p99 < r.lat_us_median) {
    bad(p99, fmt::format("a 99th percentile at least lat_us_median ({:.6g} us)", r.lat_us_median));
  }
  return r;
}

NicProbeLoopback read_loopback(const ConfigNode& node, const NicProbeReport& report) {
  const MapReader m(node, "a loopback test",
                    {"device", "port", "link_layer", "gid_index", "gid_type", "lid", "mtu", "iters",
                     "warmup", "tx_depth", "inline_bytes", "rows"});
  NicProbeLoopback l;
  l.where = m.where();
  const ConfigNode& device = m.required("device", "the device tested");
  l.device = text(device);
  const NicProbeDevice* d = report.find_device(l.device);
  if (d == nullptr) bad(device, "the name of a device listed under 'devices'");
  const ConfigNode& port = m.required("port", "the port tested");
  l.port = static_cast<int>(integer(port, 1, 255, "port number"));
  const NicProbePort* p = report.find_port(l.device, l.port);
  if (p == nullptr) bad(port, fmt::format("a port listed under device {}", l.device));
  l.link_layer = choice(m.required("link_layer", "the link layer: Ethernet or InfiniBand"),
                        {"Ethernet", "InfiniBand"});
  if (const ConfigNode* n = m.optional("gid_index"))
    l.gid_index = static_cast<int>(integer(*n, 0, 65535, "GID index"));
  if (const ConfigNode* n = m.optional("gid_type"))
    l.gid_type = choice(*n, {"IB", "RoCEv1", "RoCEv2"});
  if (const ConfigNode* n = m.optional("lid"))
    l.lid = static_cast<int>(integer(*n, 1, 65535, "LID"));
  if (l.link_layer == "Ethernet" && !l.gid_index)
    m.required("gid_index", "the GID index used on an Ethernet (RoCE) port");
  if (l.link_layer == "InfiniBand" && !l.lid && !l.gid_index)
    m.required("lid", "the LID used on an InfiniBand port");
  l.mtu = mtu_bytes(m.required("mtu", "the path MTU in bytes"));
  l.iters = static_cast<int>(
      integer(m.required("iters", "the timed iterations per size"), 1, INT32_MAX, "iterations"));
  if (const ConfigNode* n = m.optional("warmup"))
    l.warmup = static_cast<int>(integer(*n, 0, INT32_MAX, "warm-up iterations"));
  if (const ConfigNode* n = m.optional("tx_depth"))
    l.tx_depth = static_cast<int>(integer(*n, 1, INT32_MAX, "writes in flight"));
  if (const ConfigNode* n = m.optional("inline_bytes"))
    l.inline_bytes = static_cast<int>(integer(*n, 0, INT32_MAX, "bytes"));
  const ConfigNode& rows = m.required("rows", "a list of rows, one per message size");
  for (const ConfigNode& item :
       list(rows, "a non-empty list of rows, one per message size", true)) {
    NicProbeRow r = read_row(item);
    if (!l.rows.empty() && r.bytes <= l.rows.back().bytes) {
      const ConfigNode& b = *item.find("bytes");
      bad(b, fmt::format("sizes in increasing order, each once (after {} bytes)",
                         l.rows.back().bytes));
    }
    l.rows.push_back(r);
  }
  l.fit = fit_loopback(l.rows, p->rate_gbps, &l.fit_note);
  return l;
}

NicProbeReport read_root(const ConfigNode& root, const std::string& source) {
  const MapReader m(root, "a rocesim-nicprobe report",
                    {"format", "tool", "host", "date", "devices", "loopback"});
  NicProbeReport r;
  r.source = source;
  const ConfigNode& format = m.required("format", fmt::format("'format: {}'", kNicProbeFormat));
  r.format = text(format);
  if (r.format != kNicProbeFormat) {
    bad(format,
        fmt::format("'{}' (a rocesim-nicprobe report this rocesim reads)", kNicProbeFormat));
  }
  if (const ConfigNode* n = m.optional("tool")) r.tool = text(*n);
  r.host = text(m.required("host", "the host name"));
  if (const ConfigNode* n = m.optional("date")) r.date = text(*n);
  for (const ConfigNode& item : list(m.required("devices", "a list of RDMA devices"),
                                     "a non-empty list of RDMA devices", true)) {
    NicProbeDevice d = read_device(item);
    if (r.find_device(d.name) != nullptr) {
      throw InputError(item.find("name")->where(), config_path(item.path(), "name"),
                       "each device once", fmt::format("'{}' again", d.name));
    }
    r.devices.push_back(std::move(d));
  }
  if (const ConfigNode* n = m.optional("loopback")) {
    for (const ConfigNode& item : list(*n, "a list of loopback tests", false))
      r.loopback.push_back(read_loopback(item, r));
  }
  return r;
}

}  // namespace

NicProbeReport read_nicprobe_report(const std::string& path) {
  return read_root(scenario::load_yaml_file(path, ""), path);
}

NicProbeReport read_nicprobe_yaml(const std::string& text, const std::string& name) {
  return read_root(scenario::load_yaml_text(text, name), name);
}

// ---------------------------------------------------------------------------------------------
// Writing

namespace {

/// Numbers with six significant digits ("392.114", "0.0213"), as plain YAML scalars.
std::string num(double v) {
  return fmt::format("{:.6g}", v);
}

void quoted(YAML::Emitter& out, std::string_view key, const std::string& value) {
  out << YAML::Key << std::string(key) << YAML::Value << YAML::DoubleQuoted << value;
}

template <typename T>
void plain(YAML::Emitter& out, std::string_view key, const T& value) {
  out << YAML::Key << std::string(key) << YAML::Value << value;
}

void null_or(YAML::Emitter& out, std::string_view key, bool known, const std::string& value) {
  out << YAML::Key << std::string(key) << YAML::Value;
  if (known) {
    out << value;
  } else {
    out << YAML::Null;
  }
}

}  // namespace

std::string nicprobe_to_yaml(const NicProbeReport& report) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  plain(out, "format", report.format);
  quoted(out, "tool", report.tool);
  quoted(out, "host", report.host);
  quoted(out, "date", report.date);
  out << YAML::Key << "devices" << YAML::Value << YAML::BeginSeq;
  for (const NicProbeDevice& d : report.devices) {
    out << YAML::BeginMap;
    quoted(out, "name", d.name);
    quoted(out, "node_type", d.node_type);
    quoted(out, "node_guid", d.node_guid);
    quoted(out, "fw_ver", d.fw_ver);
    plain(out, "vendor_id", fmt::format("0x{:04x}", d.vendor_id));
    plain(out, "vendor_part_id", d.vendor_part_id);
    plain(out, "hw_ver", fmt::format("0x{:x}", d.hw_ver));
    if (!d.pci.empty()) quoted(out, "pci", d.pci);
    if (d.numa_node) plain(out, "numa_node", *d.numa_node);
    out << YAML::Key << "limits" << YAML::Value << YAML::BeginMap;
    for (const auto& [k, v] : d.limits)
      plain(out, k, v);
    out << YAML::EndMap;
    out << YAML::Key << "ports" << YAML::Value << YAML::BeginSeq;
    for (const NicProbePort& p : d.ports) {
      out << YAML::BeginMap;
      plain(out, "port", p.port);
      plain(out, "state", p.state);
      plain(out, "phys_state", p.phys_state);
      plain(out, "link_layer", p.link_layer);
      plain(out, "active_speed", p.speed_code);
      plain(out, "active_width", p.width_code);
      null_or(out, "speed", !p.speed.empty(), p.speed);
      null_or(out, "lane_gbps", p.lane_gbps > 0, num(p.lane_gbps));
      null_or(out, "width", !p.width.empty(), p.width);
      null_or(out, "lanes", p.lanes > 0, std::to_string(p.lanes));
      null_or(out, "rate_gbps", p.rate_gbps > 0, num(p.rate_gbps));
      plain(out, "mtu_active", p.mtu_active);
      plain(out, "mtu_max", p.mtu_max);
      plain(out, "lid", p.lid);
      plain(out, "sm_lid", p.sm_lid);
      plain(out, "max_msg_bytes", p.max_msg_bytes);
      plain(out, "gid_table_size", p.gid_table_size);
      out << YAML::Key << "gids" << YAML::Value << YAML::BeginSeq;
      for (const NicProbeGid& g : p.gids) {
        out << YAML::Flow << YAML::BeginMap;
        plain(out, "index", g.index);
        quoted(out, "gid", g.gid);
        plain(out, "type", g.type);
        if (!g.netdev.empty()) quoted(out, "netdev", g.netdev);
        if (!g.ipv4.empty()) quoted(out, "ipv4", g.ipv4);
        out << YAML::EndMap;
      }
      out << YAML::EndSeq;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  if (!report.loopback.empty()) {
    out << YAML::Key << "loopback" << YAML::Value << YAML::BeginSeq;
    for (const NicProbeLoopback& l : report.loopback) {
      out << YAML::BeginMap;
      quoted(out, "device", l.device);
      plain(out, "port", l.port);
      plain(out, "link_layer", l.link_layer);
      if (l.gid_index) plain(out, "gid_index", *l.gid_index);
      if (!l.gid_type.empty()) plain(out, "gid_type", l.gid_type);
      if (l.lid) plain(out, "lid", *l.lid);
      plain(out, "mtu", l.mtu);
      plain(out, "iters", l.iters);
      plain(out, "warmup", l.warmup);
      plain(out, "tx_depth", l.tx_depth);
      plain(out, "inline_bytes", l.inline_bytes);
      out << YAML::Key << "rows" << YAML::Value << YAML::BeginSeq;
      for (const NicProbeRow& r : l.rows) {
        out << YAML::Flow << YAML::BeginMap;
        plain(out, "bytes", r.bytes);
        plain(out, "bw_gbps", num(r.bw_gbps));
        plain(out, "msg_rate_mpps", num(r.msg_rate_mpps));
        plain(out, "lat_us_median", num(r.lat_us_median));
        plain(out, "lat_us_min", num(r.lat_us_min));
        plain(out, "lat_us_p99", num(r.lat_us_p99));
        out << YAML::EndMap;
      }
      out << YAML::EndSeq;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

namespace {

std::string size_text(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30) && bytes % (int64_t{1} << 30) == 0)
    return fmt::format("{}G", bytes >> 30);
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0)
    return fmt::format("{}M", bytes >> 20);
  if (bytes >= (int64_t{1} << 10) && bytes % (int64_t{1} << 10) == 0)
    return fmt::format("{}K", bytes >> 10);
  return std::to_string(bytes);
}

}  // namespace

std::string nicprobe_summary(const NicProbeReport& report) {
  std::string s = fmt::format("rocesim-nicprobe on {}: {} RDMA device{}\n", report.host,
                              report.devices.size(), report.devices.size() == 1 ? "" : "s");
  for (const NicProbeDevice& d : report.devices) {
    s += fmt::format("{}  fw {}  vendor 0x{:04x} part {}{}{}\n", d.name, d.fw_ver, d.vendor_id,
                     d.vendor_part_id, d.pci.empty() ? "" : "  pci " + d.pci,
                     d.numa_node ? fmt::format("  numa {}", *d.numa_node) : "");
    for (const NicProbePort& p : d.ports) {
      const std::string rate =
          p.rate_gbps > 0
              ? fmt::format("{:g} Gb/s ({} {})", p.rate_gbps, p.width, p.speed)
              : fmt::format("rate unknown (speed {}, width {})", p.speed_code, p.width_code);
      s += fmt::format("  port {}  {:<10} {:<8} {}  mtu {} (max {}){}\n", p.port, p.link_layer,
                       p.state, rate, p.mtu_active, p.mtu_max,
                       p.link_layer == "InfiniBand" ? fmt::format("  lid {}", p.lid) : "");
      for (const NicProbeGid& g : p.gids) {
        std::string line = fmt::format("    gid {:>3}  {}  {:<6}  {:<15}  {}", g.index, g.gid,
                                       g.type, g.ipv4, g.netdev);
        line.erase(line.find_last_not_of(' ') + 1);
        s += line + "\n";
      }
    }
  }
  for (const NicProbeLoopback& l : report.loopback) {
    s += fmt::format("\nloopback RDMA WRITE on {} port {} ({}{}), mtu {}, {} iterations per size\n",
                     l.device, l.port, l.link_layer,
                     l.gid_index ? fmt::format(", gid index {} {}", *l.gid_index, l.gid_type)
                     : l.lid     ? fmt::format(", lid {}", *l.lid)
                                 : "",
                     l.mtu, l.iters);
    s += fmt::format("{:>8} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "bytes", "bw Gb/s", "Mpps",
                     "lat med us", "min us", "p99 us");
    for (const NicProbeRow& r : l.rows) {
      s += fmt::format("{:>8} {:>10.2f} {:>10.3f} {:>10.2f} {:>10.2f} {:>10.2f}\n",
                       size_text(r.bytes), r.bw_gbps, r.msg_rate_mpps, r.lat_us_median,
                       r.lat_us_min, r.lat_us_p99);
    }
    std::string note = l.fit_note;
    std::optional<NicProbeFit> fit = l.fit;
    if (!fit && note.empty()) {
      const NicProbePort* p = report.find_port(l.device, l.port);
      fit = fit_loopback(l.rows, p != nullptr ? p->rate_gbps : 0, &note);
    }
    if (fit) {
      s += fmt::format(
          "fit: time per message = {:.4g} us + size / {:.4g} Gb/s (rms error {:.1f}%){}{}\n",
          fit->overhead_us, fit->bandwidth_gbps, 100 * fit->residual,
          fit->efficiency ? fmt::format(", efficiency {:.3f} of the line rate", *fit->efficiency)
                          : "",
          fit->latency_us ? fmt::format(", zero-byte latency {:.3g} us", *fit->latency_us) : "");
    }
    if (!note.empty()) s += note + "\n";
  }
  return s;
}

}  // namespace rocesim::calibrate
