#include "cli/commands.hpp"

namespace rocesim::cli {

std::vector<scenario::ParamOverride> parse_sets(const std::vector<std::string>& sets) {
  std::vector<scenario::ParamOverride> out;
  for (const std::string& s : sets)
    out.push_back(scenario::parse_override(s, "--set " + s));
  return out;
}

}  // namespace rocesim::cli
