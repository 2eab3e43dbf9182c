#include "sim/core/units.hpp"

#include <fmt/format.h>

namespace rocesim {

std::string format_time(Time t) {
  const double ps = static_cast<double>(t.count_ps());
  if (ps == 0) return "0 s";
  if (ps < 1e3) return fmt::format("{:.0f} ps", ps);
  if (ps < 1e6) return fmt::format("{:.3f} ns", ps * 1e-3);
  if (ps < 1e9) return fmt::format("{:.3f} us", ps * 1e-6);
  if (ps < 1e12) return fmt::format("{:.3f} ms", ps * 1e-9);
  return fmt::format("{:.3f} s", ps * 1e-12);
}

std::string format_bandwidth_gbps(double bits_per_second) {
  return fmt::format("{:.2f} Gb/s", bits_per_second * 1e-9);
}

std::string format_bytes(Bytes b) {
  const double n = b.as_double();
  constexpr double kKi = 1024.0;
  if (n < kKi) return fmt::format("{} B", b.count());
  if (n < kKi * kKi) return fmt::format("{:.4g} KiB", n / kKi);
  if (n < kKi * kKi * kKi) return fmt::format("{:.4g} MiB", n / (kKi * kKi));
  return fmt::format("{:.4g} GiB", n / (kKi * kKi * kKi));
}

}  // namespace rocesim
