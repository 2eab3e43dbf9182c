#include "cli/commands.hpp"

namespace rocesim::cli {

std::vector<scenario::ParamOverride> parse_sets(const std::vector<std::string>& sets,
                                                const std::vector<std::string>& files) {
  std::vector<scenario::ParamOverride> out;
  for (const std::string& f : files) {
    for (scenario::ParamOverride& o : scenario::read_calibration_file(f))
      out.push_back(std::move(o));
  }
  for (const std::string& s : sets)
    out.push_back(scenario::parse_override(s, "--set " + s));
  return out;
}

}  // namespace rocesim::cli
