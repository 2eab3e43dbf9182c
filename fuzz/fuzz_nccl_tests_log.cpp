// Fuzz target: the nccl-tests / rccl-tests log reader (the text people paste from a run).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/core/error.hpp"
#include "validation/lib/nccl_tests_log.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rocesim::validation::read_nccl_tests_log(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.log");
  } catch (const rocesim::InputError&) {
  }
  return 0;
}
