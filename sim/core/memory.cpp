#include "sim/core/memory.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

namespace rocesim {

uint64_t available_memory_bytes() {
  uint64_t bytes = 0;
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    uint64_t kib = 0;
    std::string unit;
    in >> kib >> unit;
    if (key == "MemAvailable:") {
      bytes = kib * 1024;
      break;
    }
  }
  if (bytes == 0) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  }
  if (const char* limit = std::getenv("ROCESIM_MEMORY_LIMIT"); limit != nullptr && *limit != 0) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(limit, &end, 10);
    if (end != limit && *end == 0 && v > 0) bytes = bytes == 0 ? v : std::min<uint64_t>(bytes, v);
  }
  return bytes;
}

std::string format_memory(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024 * 1024) return fmt::format("{:.1f} TiB", bytes / (1ull << 40));
  if (bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.1f} GiB", bytes / (1ull << 30));
  return fmt::format("{:.0f} MiB", bytes / (1ull << 20));
}

}  // namespace rocesim
