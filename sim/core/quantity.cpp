#include "sim/core/quantity.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <utility>

namespace rocesim {
namespace {

struct Unit {
  std::string_view name;
  double factor;  // to the base unit (ps, bytes, bits per second)
};

constexpr std::array kTimeUnits{
    Unit{"ps", 1.0},        Unit{"ns", 1e3}, Unit{"us", 1e6}, Unit{"\xC2\xB5s", 1e6},
    Unit{"\xCE\xBCs", 1e6}, Unit{"ms", 1e9}, Unit{"s", 1e12},
};

constexpr std::array kByteUnits{
    Unit{"B", 1.0},
    Unit{"KB", 1e3},
    Unit{"kB", 1e3},
    Unit{"MB", 1e6},
    Unit{"GB", 1e9},
    Unit{"TB", 1e12},
    Unit{"KiB", 1024.0},
    Unit{"MiB", 1024.0 * 1024.0},
    Unit{"GiB", 1024.0 * 1024.0 * 1024.0},
    Unit{"TiB", 1024.0 * 1024.0 * 1024.0 * 1024.0},
};

constexpr std::array kRateUnits{
    Unit{"bps", 1.0},
    Unit{"Kbps", 1e3},
    Unit{"kbps", 1e3},
    Unit{"Mbps", 1e6},
    Unit{"Gbps", 1e9},
    Unit{"Tbps", 1e12},
    Unit{"b/s", 1.0},
    Unit{"Kb/s", 1e3},
    Unit{"kb/s", 1e3},
    Unit{"Mb/s", 1e6},
    Unit{"Gb/s", 1e9},
    Unit{"Tb/s", 1e12},
    Unit{"bit/s", 1.0},
    Unit{"Kbit/s", 1e3},
    Unit{"Mbit/s", 1e6},
    Unit{"Gbit/s", 1e9},
    Unit{"Tbit/s", 1e12},
    Unit{"B/s", 8.0},
    Unit{"KB/s", 8e3},
    Unit{"kB/s", 8e3},
    Unit{"MB/s", 8e6},
    Unit{"GB/s", 8e9},
    Unit{"TB/s", 8e12},
    Unit{"KiB/s", 8.0 * 1024},
    Unit{"MiB/s", 8.0 * 1024 * 1024},
    Unit{"GiB/s", 8.0 * 1024 * 1024 * 1024},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

template <size_t N>
double parse_with_units(std::string_view text, const std::array<Unit, N>& units,
                        std::string_view what, std::string_view help) {
  const std::string_view s = trim(text);
  if (s.empty()) throw QuantityError(fmt::format("an empty value; expected a {}", what));
  // The number is the longest prefix that from_chars accepts; the rest is the unit.
  double value = 0.0;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (*first == '+') ++first;
  const auto [ptr, ec] = std::from_chars(first, last, value, std::chars_format::general);
  if (ec != std::errc() || ptr == first) {
    throw QuantityError(
        fmt::format("'{}' is not a {} (a number followed by a unit: {})", s, what, help));
  }
  const std::string_view unit = trim(std::string_view(ptr, static_cast<size_t>(last - ptr)));
  if (unit.empty()) {
    throw QuantityError(fmt::format("'{}' has no unit; a {} needs one of: {}", s, what, help));
  }
  for (const Unit& u : units) {
    if (u.name == unit) {
      if (!std::isfinite(value)) throw QuantityError(fmt::format("'{}' is not finite", s));
      return value * u.factor;
    }
  }
  throw QuantityError(
      fmt::format("'{}' has an unknown unit '{}'; a {} needs one of: {}", s, unit, what, help));
}

int64_t to_integer(double v, std::string_view text, std::string_view base_unit) {
  const double r = std::round(v);
  if (std::fabs(r) > 9.2e18) throw QuantityError(fmt::format("'{}' is out of range", text));
  if (std::fabs(v - r) > 1e-6 * std::max(1.0, std::fabs(v))) {
    throw QuantityError(
        fmt::format("'{}' is not a whole number of {} ({})", trim(text), base_unit, v));
  }
  return static_cast<int64_t>(r);
}

}  // namespace

std::string_view time_units_help() {
  return "ps, ns, us, ms, s";
}
std::string_view bytes_units_help() {
  return "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB";
}
std::string_view bandwidth_units_help() {
  return "bps, Kbps, Mbps, Gbps, Tbps, b/s ... Tb/s (bits); B/s, KB/s ... TB/s, KiB/s ... GiB/s "
         "(bytes)";
}

Time parse_time(std::string_view text) {
  const double ps = parse_with_units(text, kTimeUnits, "time", time_units_help());
  return Time::ps(to_integer(ps, text, "picoseconds"));
}

Bytes parse_bytes(std::string_view text) {
  const double b = parse_with_units(text, kByteUnits, "size in bytes", bytes_units_help());
  return Bytes(to_integer(b, text, "bytes"));
}

Bandwidth parse_bandwidth(std::string_view text) {
  const double bps = parse_with_units(text, kRateUnits, "bandwidth", bandwidth_units_help());
  return Bandwidth::bps(to_integer(bps, text, "bits per second"));
}

std::string to_text(Time t) {
  const int64_t ps = t.count_ps();
  constexpr std::array<std::pair<int64_t, std::string_view>, 4> kSteps{
      {{1'000'000'000'000, "s"}, {1'000'000'000, "ms"}, {1'000'000, "us"}, {1'000, "ns"}}};
  for (const auto& [f, name] : kSteps) {
    if (ps != 0 && ps % f == 0) return fmt::format("{}{}", ps / f, name);
  }
  for (const auto& [f, name] : kSteps) {
    if (std::llabs(ps) >= f) {
      // Above about 1e15 ps the decimal fraction, scaled back by the parser, can miss by a
      // picosecond; the exact count is the canonical text then.
      std::string text =
          fmt::format("{}{}", static_cast<double>(ps) / static_cast<double>(f), name);
      if (parse_time(text) == t) return text;
      break;
    }
  }
  return fmt::format("{}ps", ps);
}

std::string to_text(Bytes b) {
  const int64_t n = b.count();
  constexpr std::array<std::pair<int64_t, std::string_view>, 6> kSteps{{{int64_t{1} << 40, "TiB"},
                                                                        {int64_t{1} << 30, "GiB"},
                                                                        {int64_t{1} << 20, "MiB"},
                                                                        {1'000'000'000, "GB"},
                                                                        {1'000'000, "MB"},
                                                                        {int64_t{1} << 10, "KiB"}}};
  for (const auto& [f, name] : kSteps) {
    if (n != 0 && n % f == 0) return fmt::format("{}{}", n / f, name);
  }
  return fmt::format("{}B", n);
}

std::string to_text(Bandwidth b) {
  const int64_t v = b.bits_per_second();
  constexpr std::array<std::pair<int64_t, std::string_view>, 4> kSteps{
      {{1'000'000'000'000, "Tbps"}, {1'000'000'000, "Gbps"}, {1'000'000, "Mbps"}, {1'000, "Kbps"}}};
  for (const auto& [f, name] : kSteps) {
    if (v != 0 && v % f == 0) return fmt::format("{}{}", v / f, name);
  }
  return fmt::format("{}bps", v);
}

}  // namespace rocesim
