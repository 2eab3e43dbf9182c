// Fuzz target: the scenario loader, YAML text to a built scenario (topology, routing, network
// model, workloads, recorder), not run. Relative paths resolve against scenarios/, so the seed
// corpus (scenarios/, studies/, topologies/, workloads/) loads as it does from the command line.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "sim/core/error.hpp"
#include "sim/scenario/scenario.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rocesim::fuzz::limit_memory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    rocesim::scenario::load_scenario_text(text, "fuzz.yaml", ROCESIM_SCENARIOS_DIR);
  } catch (const rocesim::InputError&) {
  }
  return 0;
}
