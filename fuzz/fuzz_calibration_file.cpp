// Fuzz target: the calibration file reader (what `rocesim calibrate fit` writes and scenarios
// and `--calibration` read).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_common.hpp"
#include "sim/core/error.hpp"
#include "sim/scenario/calibration.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rocesim::scenario::read_calibration_file(rocesim::fuzz::as_file(data, size, ".yaml"));
  } catch (const rocesim::InputError&) {
  }
  return 0;
}
