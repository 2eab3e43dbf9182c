// Helpers shared by the tests: absolute paths (tests never depend on the working directory),
// fabrics and scenarios built from YAML text, and running the rocesim command line.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>

#include "sim/core/error.hpp"
#include "sim/fabric/fabric.hpp"
#include "sim/routing/router.hpp"
#include "sim/scenario/scenario.hpp"

namespace rocesim::test {

/// Absolute path of a file in the source tree, e.g. source_path("scenarios/quickstart.yaml").
std::string source_path(const std::string& relative);
/// Absolute path of the rocesim executable.
std::string cli_path();
/// The bytes of a file ("" if it cannot be read).
std::string read_file(const std::string& path);
/// A fresh empty directory under the system temporary directory, unique per call.
std::string temp_dir(const std::string& tag);

/// Builds and seals a fabric from a topology mapping in YAML text.
fabric::Fabric fabric_from_yaml(const std::string& topology_yaml);
/// A router from a `routing` section in YAML text, e.g. "{scheme: pinned}" (defaults from its
/// scheme's table).
std::unique_ptr<routing::Router> router_from_yaml(const fabric::Fabric& f,
                                                  const std::string& routing_yaml,
                                                  uint64_t seed = 1);
/// The `topology:` section of a small leaf-spine fabric: `racks` leaves of `nodes_per_rack`
/// servers of `gpus` GPUs (one 400G NIC each), `uplinks` 400G uplinks per leaf over as many
/// spines.
std::string clos_topology(int racks, int nodes_per_rack, int gpus, int uplinks);
/// Loads a scenario from YAML text (relative paths resolve against the source tree).
std::unique_ptr<scenario::ScenarioRun> scenario_from_yaml(const std::string& yaml,
                                                          uint64_t seed = 1, int threads = 1);

/// Runs `f` and returns the InputError it throws; fails the test if it throws none.
template <typename F>
InputError input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no InputError thrown";
  return InputError(SourceLocation{}, "none");
}

/// Payload rate in bytes/s of a link of `line_bps` carrying RoCEv2 at the default 4096-byte MTU
/// over IPv4: line x 4096 / (4096 + 82) (sim/fabric/wire.hpp), rounded to whole bits per second
/// as the fabric stores it. Closed forms on fabrics with the default framing use it.
inline double roce_payload(double line_bps) {
  return static_cast<double>(std::llround(line_bps * 4096.0 / 4178.0)) / 8;
}

/// Sets ROCESIM_MEMORY_LIMIT (the memory a scenario may assume the machine has) for a scope.
struct MemoryLimit {
  explicit MemoryLimit(const char* bytes) { ::setenv("ROCESIM_MEMORY_LIMIT", bytes, 1); }
  ~MemoryLimit() { ::unsetenv("ROCESIM_MEMORY_LIMIT"); }
  MemoryLimit(const MemoryLimit&) = delete;
  MemoryLimit& operator=(const MemoryLimit&) = delete;
};

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
/// Runs a shell command (stdout and stderr captured separately).
CommandResult run_command(const std::string& command);
/// Runs `rocesim <args>`.
CommandResult run_cli(const std::string& args);

}  // namespace rocesim::test
