// Fuzz target: the measured dataset reader (validation/data/measured/*.yaml, rocesim-bench
// output): YAML whose tables hold printed nccl-tests lines.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_common.hpp"
#include "sim/core/error.hpp"
#include "validation/lib/nccl_tests_log.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rocesim::validation::read_measured_dataset(rocesim::fuzz::as_file(data, size, ".yaml"));
  } catch (const rocesim::InputError&) {
  }
  return 0;
}
