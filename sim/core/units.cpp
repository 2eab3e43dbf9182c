#include "sim/core/units.hpp"

#include <fmt/format.h>

#include <memory>

#include "sim/core/error.hpp"

namespace rocesim {

void transfer_time_out_of_range(double bytes, double bytes_per_second) {
  throw InputError(SourceLocation{std::make_shared<const std::string>("simulation"), 0, 0},
                   fmt::format("moving {:.6g} bytes at {:.6g} bytes/s takes {:.6g} s and would "
                               "end after the {:.0f} days of simulated time a run can reach (it "
                               "counts picoseconds); check the scenario's sizes, link speeds and "
                               "rates",
                               bytes, bytes_per_second, bytes / bytes_per_second,
                               static_cast<double>(kMaxTransferPs) * 1e-12 / 86400));
}

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
