// Reading YAML files into ConfigNode trees that remember file, line and column of every value.
// This is the only place that knows yaml-cpp.
#pragma once

#include <string>
#include <vector>

#include "sim/core/config.hpp"

namespace rocesim::scenario {

/// Parses `path`; every node's path starts at `root_path` (e.g. "topology" for an included
/// topology file). `referenced_by` is the value that named the file when it is included, so a
/// missing file is reported where it was named and under that key. Top-level keys listed in
/// `unread` (sections the reader documents as not read) are kept as empty values, unexpanded.
/// Throws InputError, also for text that is not UTF-8 or holds NUL characters, and for a
/// document that expands to more than 2,000,000 values (nested aliases).
ConfigNode load_yaml_file(const std::string& path, const std::string& root_path,
                          const ConfigNode* referenced_by = nullptr,
                          const std::vector<std::string>& unread = {});
/// Parses YAML text (for tests and notebooks); `name` stands in for the file name.
ConfigNode load_yaml_text(const std::string& text, const std::string& name);

/// YAML text of a tree (for the effective scenario echoed into results.h5).
std::string to_yaml(const ConfigNode& node);

}  // namespace rocesim::scenario
