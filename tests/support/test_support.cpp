#include "tests/support/test_support.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/scenario/yaml_source.hpp"
#include "sim/topology/topology.hpp"

namespace rocesim::test {

std::string source_path(const std::string& relative) {
  return (std::filesystem::path(ROCESIM_SOURCE_DIR) / relative).string();
}

std::string cli_path() {
  return ROCESIM_CLI;
}

std::string temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  const auto dir = std::filesystem::temp_directory_path() /
                   fmt::format("rocesim-test-{}-{}-{}", tag, ::getpid(), counter++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

fabric::Fabric fabric_from_yaml(const std::string& topology_yaml) {
  const ConfigNode root = scenario::load_yaml_text(topology_yaml, "<test topology>");
  return topology::build_topology(root);
}

std::unique_ptr<routing::Router> router_from_yaml(const fabric::Fabric& f,
                                                  const std::string& routing_yaml, uint64_t seed) {
  static constexpr Param kParams[] = {
      {.key = "routing", .type = ParamType::Section, .fallback = "{}", .choices = "routing"}};
  static const ParamTable kTable{"test", "", kParams};
  const ConfigNode root = scenario::load_yaml_text("routing: " + routing_yaml, "<test routing>");
  return routing::make_routing(ParamReader(root, kTable), "routing", f, seed).router;
}

std::string clos_topology(int racks, int nodes_per_rack, int gpus, int uplinks) {
  return fmt::format(R"(topology:
  type: clos
  racks: {}
  nodes_per_rack: {}
  node: {{gpus: {}, nic_speed: 400Gbps}}
  leaf: {{uplinks: {}, uplink_speed: 400Gbps}}
  spine: {{count: {}}}
)",
                     racks, nodes_per_rack, gpus, uplinks, uplinks);
}

std::unique_ptr<scenario::ScenarioRun> scenario_from_yaml(const std::string& yaml, uint64_t seed,
                                                          int threads) {
  scenario::Overrides o;
  o.seed = seed;
  o.threads = threads;
  return scenario::load_scenario_text(yaml, "<test scenario>", ROCESIM_SOURCE_DIR, o);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CommandResult run_command(const std::string& command) {
  const std::string dir = temp_dir("cmd");
  const std::string out = dir + "/out", err = dir + "/err";
  const int status = std::system(fmt::format("{} >{} 2>{}", command, out, err).c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  std::filesystem::remove_all(dir);
  return r;
}

CommandResult run_cli(const std::string& args) {
  return run_command(fmt::format("{} {}", cli_path(), args));
}

}  // namespace rocesim::test
