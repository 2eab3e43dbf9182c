// A study: a base scenario and the points to run it at (`rocesim sweep STUDY.yaml`). Each point
// is the scenario with overrides (paths as `--set` takes them) and a seed. The points are the
// product of the `grid` axes (every combination), the `zip` axes (lists of one length taken
// row by row), the explicit `points` and the seeds (`seeds`, or `replicates: N` for seeds
// 1..N; the scenario's own seed without either), in that nesting order, numbered from 0. `set`
// applies to every point before its own values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/params.hpp"
#include "sim/scenario/calibration.hpp"

namespace rocesim::scenario {

struct StudyPoint {
  uint32_t id = 0;
  std::optional<uint64_t> seed;  // none: the scenario's
  std::vector<ParamOverride> overrides;
  /// The value of each of the study's axes at this point, as written ("" for an axis an
  /// explicit point does not set).
  std::vector<std::string> values;
};

struct Study {
  std::string name;
  std::string file;               // the study file
  std::string scenario;           // the base scenario, resolved against the study's directory
  std::string text;               // the study file as read (echoed into sweep.h5)
  std::vector<std::string> axes;  // paths, in the order of grid, zip, then explicit points
  std::vector<StudyPoint> points;
};

const ParamTable& study_table();
/// Reads and expands a study file; errors are InputErrors located in it.
Study load_study(const std::string& path);
/// Same, from YAML text (`name` stands in for the file name; the scenario is relative to
/// `base_dir`).
Study load_study_text(const std::string& text, const std::string& name,
                      const std::string& base_dir);
/// Expands a study's tree (`file` and `text` as recorded in Study).
Study expand_study(const ConfigNode& root, const std::string& file, const std::string& text,
                   const std::string& base_dir);

}  // namespace rocesim::scenario
