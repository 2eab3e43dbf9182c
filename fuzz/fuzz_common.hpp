// Shared by the fuzz targets: inputs that readers take as files are written to one temporary
// file per process; every rocesim reader must answer malformed input with an InputError (or
// accept it), never crash, hang, exhaust memory or throw anything else.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace rocesim::fuzz {

/// The input as a file: "<TMPDIR>/rocesim-fuzz-<pid><suffix>", rewritten for each input.
inline const std::string& as_file(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path = [&] {
    const char* tmp = std::getenv("TMPDIR");
    return std::string(tmp != nullptr && *tmp != 0 ? tmp : "/tmp") + "/rocesim-fuzz-" +
           std::to_string(::getpid()) + suffix;
  }();
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

/// Scenarios estimated under 64 MB (a fabric of some 30,000 nodes): larger ones are refused with
/// their estimate, so that every input loads in well under a second even under the sanitizers
/// (a larger fabric's only finding would be the fuzzer's time or memory limit, not a defect).
inline void limit_memory() {
  ::setenv("ROCESIM_MEMORY_LIMIT", "64000000", 1);
}

}  // namespace rocesim::fuzz
