// Strong types for the three quantities every model speaks in: simulated time, byte counts and
// bit rates. Time is an integer count of picoseconds (as in htsim) so that timelines are exact and
// the same on every machine; byte counts are 64-bit integers; link rates are integer bits per
// second. The fluid models work in double-precision bytes per second internally and convert at the
// edges with the helpers below.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <string>

namespace rocesim {

/// A point or span of simulated time, in integer picoseconds (range: about 106 days).
class Time {
 public:
  constexpr Time() = default;
  static constexpr Time ps(int64_t v) { return Time(v); }
  static constexpr Time ns(double v) { return Time(static_cast<int64_t>(std::llround(v * 1e3))); }
  static constexpr Time us(double v) { return Time(static_cast<int64_t>(std::llround(v * 1e6))); }
  static constexpr Time ms(double v) { return Time(static_cast<int64_t>(std::llround(v * 1e9))); }
  static constexpr Time seconds(double v) {
    return Time(static_cast<int64_t>(std::llround(v * 1e12)));
  }
  static constexpr Time zero() { return Time(0); }
  static constexpr Time infinity() { return Time(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t count_ps() const { return ps_; }
  constexpr double in_seconds() const { return static_cast<double>(ps_) * 1e-12; }
  constexpr double in_us() const { return static_cast<double>(ps_) * 1e-6; }
  constexpr bool is_infinite() const { return ps_ == std::numeric_limits<int64_t>::max(); }

  constexpr Time operator+(Time o) const { return Time(ps_ + o.ps_); }
  constexpr Time operator-(Time o) const { return Time(ps_ - o.ps_); }
  constexpr Time& operator+=(Time o) {
    ps_ += o.ps_;
    return *this;
  }
  constexpr Time operator*(int64_t k) const { return Time(ps_ * k); }
  constexpr auto operator<=>(const Time&) const = default;

 private:
  constexpr explicit Time(int64_t ps) : ps_(ps) {}
  int64_t ps_ = 0;
};

/// A byte count. Signed 64-bit so that differences are safe; never negative in a valid model.
class Bytes {
 public:
  constexpr Bytes() = default;
  constexpr explicit Bytes(int64_t n) : n_(n) {}
  constexpr int64_t count() const { return n_; }
  constexpr double as_double() const { return static_cast<double>(n_); }
  constexpr Bytes operator+(Bytes o) const { return Bytes(n_ + o.n_); }
  constexpr Bytes operator-(Bytes o) const { return Bytes(n_ - o.n_); }
  constexpr Bytes& operator+=(Bytes o) {
    n_ += o.n_;
    return *this;
  }
  constexpr auto operator<=>(const Bytes&) const = default;

 private:
  int64_t n_ = 0;
};

/// A data rate in integer bits per second (400 Gb/s = 400'000'000'000).
class Bandwidth {
 public:
  constexpr Bandwidth() = default;
  static constexpr Bandwidth bps(int64_t v) { return Bandwidth(v); }
  static constexpr Bandwidth gbps(double v) {
    return Bandwidth(static_cast<int64_t>(std::llround(v * 1e9)));
  }
  constexpr int64_t bits_per_second() const { return bps_; }
  constexpr double bytes_per_second() const { return static_cast<double>(bps_) / 8.0; }
  constexpr double in_gbps() const { return static_cast<double>(bps_) * 1e-9; }
  constexpr Bandwidth operator*(int64_t k) const { return Bandwidth(bps_ * k); }
  constexpr Bandwidth operator+(Bandwidth o) const { return Bandwidth(bps_ + o.bps_); }
  constexpr auto operator<=>(const Bandwidth&) const = default;

 private:
  constexpr explicit Bandwidth(int64_t v) : bps_(v) {}
  int64_t bps_ = 0;
};

/// The latest a transfer may end: 2^62 ps, about 53 days of simulated time, so that an end plus
/// the latencies and spans added to it stays within Time's range.
inline constexpr int64_t kMaxTransferPs = int64_t{1} << 62;

/// Raises the input error for a transfer that would end after kMaxTransferPs.
[[noreturn]] void transfer_time_out_of_range(double bytes, double bytes_per_second);

/// Picoseconds to move `bytes` at `bytes_per_second`, rounded up (as a double: it may be beyond
/// Time's range).
inline double transfer_ps(double bytes, double bytes_per_second) {
  return std::ceil(bytes / bytes_per_second * 1e12);
}

/// Time to move `bytes` at `bytes_per_second`, rounded up to the next picosecond, started at
/// `from`. A transfer that would end after kMaxTransferPs (a size or rate that no run can
/// simulate) is an input error.
inline Time transfer_time(double bytes, double bytes_per_second, Time from = Time::zero()) {
  const double ps = transfer_ps(bytes, bytes_per_second);
  if (!(ps < static_cast<double>(kMaxTransferPs - from.count_ps()))) [[unlikely]]
    transfer_time_out_of_range(bytes, bytes_per_second);
  return Time::ps(static_cast<int64_t>(ps));
}

/// transfer_time, or Time::infinity() for a span beyond kMaxTransferPs: for a prediction that
/// a later change of rate replaces (a rate that is almost nothing now).
inline Time transfer_time_or_never(double bytes, double bytes_per_second) {
  const double ps = transfer_ps(bytes, bytes_per_second);
  if (!(ps < static_cast<double>(kMaxTransferPs))) return Time::infinity();
  return Time::ps(static_cast<int64_t>(ps));
}

/// Human-readable forms used in summaries ("1.346 ms", "400 Gb/s", "16 MiB").
std::string format_time(Time t);
std::string format_bandwidth_gbps(double bits_per_second);
std::string format_bytes(Bytes b);

}  // namespace rocesim
