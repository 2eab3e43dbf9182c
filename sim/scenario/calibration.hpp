// Calibrated parameters: values of scenario keys that replace what a scenario writes (or
// defaults). They come from calibration files (`calibration: FILE` in a scenario; written by
// `rocesim calibrate fit`) and from the command line (`--set KEY=VALUE`), and are applied to the
// scenario's tree before anything reads it, so they are validated exactly like the scenario's own
// keys: an unknown key, a wrong unit or an out-of-range value is reported at the line of the
// calibration file (or the option) that set it.
//
// A parameter is named by its dotted path from the scenario root through mappings:
// `topology.node.nic_efficiency`, `topology.spine.latency`, `nccl.NCCL_NET_OVERHEAD`. A
// topology given as a file name counts as written inline, so its keys can be set too. Later
// overrides win: the scenario's calibration files in the order listed, then the command line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/core/config.hpp"
#include "sim/core/params.hpp"

namespace rocesim::scenario {

struct ParamOverride {
  std::string path;  // "topology.node.nic_efficiency"
  ConfigNode value;  // the value (a scalar; from --set also a list or mapping), located where it
                     // was written
};

/// The keys of a calibration file (for docs/scenario.md).
const ParamTable& calibration_file_table();

/// Reads the `parameters` of a calibration file. `referenced_by` is the scenario value naming
/// the file (for a missing file). Throws InputError.
std::vector<ParamOverride> read_calibration_file(const std::string& path,
                                                 const ConfigNode* referenced_by = nullptr);

/// The name a workload without `name` runs under, and is addressed by in a path:
/// `<type><position>` ("permutation0").
std::string default_workload_name(std::string_view type, size_t position);

/// The keys of a parameter path ("topology.node.nic_efficiency" -> topology, node,
/// nic_efficiency). Throws InputError (at `where`, under `key`) for an empty or malformed key.
std::vector<std::string> split_path(const std::string& path, const SourceLocation& where,
                                    const std::string& key);

/// "KEY=VALUE" from the command line; `origin` names it in messages (e.g. "--set"). A VALUE that
/// starts with '[' or '{' is a list or a mapping in YAML's flow form.
ParamOverride parse_override(const std::string& text, const std::string& origin);

/// `root` with the value at `o.path` replaced (or added, creating missing mappings on the way).
/// Throws InputError when the path runs through a value that is not a mapping.
ConfigNode apply_override(const ConfigNode& root, const ParamOverride& o);

/// The overrides as YAML (a mapping from path to value, with the source of each in a
/// comment-free `from` list), echoed into results.h5 as /meta.calibration; empty for none.
std::string overrides_yaml(const std::vector<ParamOverride>& overrides);

}  // namespace rocesim::scenario
