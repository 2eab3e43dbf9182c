#include "sim/scenario/study.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/scenario/yaml_source.hpp"

namespace rocesim::scenario {
namespace {

constexpr Param kStudyParams[] = {
    {.key = "name",
     .type = ParamType::String,
     .help = "study name (default: the file name without extension)",
     .optional = true},
    {.key = "scenario",
     .type = ParamType::String,
     .help = "the base scenario file, relative to the study file"},
    {.key = "grid",
     .type = ParamType::Any,
     .help = "axes whose every combination is a point: a mapping from a scenario path (as "
             "--set takes it, e.g. workloads[allreduce].bytes) to its list of values",
     .choices = "mapping of path: [values]",
     .optional = true},
    {.key = "zip",
     .type = ParamType::Any,
     .help = "axes taken together, row by row: a mapping from a path to a list, all lists of "
             "one length (crossed with the grid)",
     .choices = "mapping of path: [values]",
     .optional = true},
    {.key = "points",
     .type = ParamType::List,
     .help = "explicit points, each a mapping from a path to a value (crossed with the grid "
             "and the zip)",
     .optional = true},
    {.key = "set",
     .type = ParamType::Any,
     .help = "values applied at every point, before the point's own",
     .choices = "mapping of path: value",
     .optional = true},
    {.key = "seeds",
     .type = ParamType::List,
     .help = "seeds run at every point (replicates); default: the scenario's seed",
     .optional = true},
    {.key = "replicates",
     .type = ParamType::Integer,
     .help = "seeds 1 to N at every point; not with `seeds`",
     .check = Check::Positive,
     .optional = true},
};
const ParamTable kStudyTable{"study",
                             "A study file for `rocesim sweep`: a base scenario and the points "
                             "to run it at (docs/studies.md).",
                             kStudyParams};

/// The seed is the study's own column (`seeds`, `replicates`), not an axis of its points.
void not_the_seed(const ConfigNode& m, const ConfigNode::Entry& e) {
  if (e.key != "seed") return;
  throw InputError(e.key_where, config_path(m.path(), e.key),
                   "a scenario path other than `seed` (the study's seeds are its `seeds` or "
                   "`replicates`)",
                   "'seed'");
}

/// Axes of a `grid` or `zip` mapping: path -> list of scalars.
std::vector<std::pair<std::string, std::vector<ConfigNode>>> read_axes(const ConfigNode& m) {
  if (!m.is_map()) {
    throw InputError(m.where(), m.path(), "a mapping from a scenario path to a list of values",
                     m.describe());
  }
  std::vector<std::pair<std::string, std::vector<ConfigNode>>> out;
  for (const ConfigNode::Entry& e : m.entries()) {
    split_path(e.key, e.key_where, config_path(m.path(), e.key));
    not_the_seed(m, e);
    if (!e.value.is_sequence() || e.value.items().empty()) {
      throw InputError(e.value.where(), config_path(m.path(), e.key), "a non-empty list of values",
                       e.value.describe());
    }
    for (const ConfigNode& v : e.value.items()) {
      if (!v.is_scalar()) {
        throw InputError(v.where(), v.path(), "a single value (a number, a word, a size...)",
                         v.describe());
      }
    }
    out.emplace_back(e.key, e.value.items());
  }
  return out;
}

/// path -> value of a `set` mapping or an explicit point (`point`: whose paths are axes).
std::vector<std::pair<std::string, ConfigNode>> read_values(const ConfigNode& m, bool point) {
  if (!m.is_map()) {
    throw InputError(m.where(), m.path(), "a mapping from a scenario path to a value",
                     m.describe());
  }
  std::vector<std::pair<std::string, ConfigNode>> out;
  for (const ConfigNode::Entry& e : m.entries()) {
    split_path(e.key, e.key_where, config_path(m.path(), e.key));
    if (point) not_the_seed(m, e);
    if (!e.value.is_scalar()) {
      throw InputError(e.value.where(), config_path(m.path(), e.key),
                       "a single value (a number, a word, a size...)", e.value.describe());
    }
    out.emplace_back(e.key, e.value);
  }
  return out;
}

}  // namespace

const ParamTable& study_table() {
  return kStudyTable;
}

Study load_study(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return expand_study(load_yaml_file(path, ""), path, text.str(),
                      std::filesystem::path(path).parent_path().string());
}

Study load_study_text(const std::string& text, const std::string& name,
                      const std::string& base_dir) {
  return expand_study(load_yaml_text(text, name), name, text, base_dir);
}

Study expand_study(const ConfigNode& root, const std::string& file, const std::string& text,
                   const std::string& base_dir) {
  const ParamReader r(root, kStudyTable);
  Study s;
  s.file = file;
  s.name = r.has("name") ? r.string("name") : std::filesystem::path(file).stem().string();
  s.text = text;
  const std::filesystem::path dir(base_dir);
  s.scenario = (dir / r.string("scenario")).lexically_normal().string();
  if (!std::filesystem::is_regular_file(s.scenario)) {
    r.fail("scenario", "a scenario file, relative to the study file",
           fmt::format("'{}', which is not a file", r.string("scenario")));
  }

  const auto grid = r.has("grid") ? read_axes(r.node("grid"))
                                  : std::vector<std::pair<std::string, std::vector<ConfigNode>>>{};
  const auto zip = r.has("zip") ? read_axes(r.node("zip"))
                                : std::vector<std::pair<std::string, std::vector<ConfigNode>>>{};
  if (r.has("zip")) {
    // A path is one axis: in the grid or in the zip, not both (each is a column of the points).
    for (const ConfigNode::Entry& e : r.node("zip").entries()) {
      const bool in_grid =
          std::any_of(grid.begin(), grid.end(), [&](const auto& a) { return a.first == e.key; });
      if (in_grid) {
        throw InputError(e.key_where, config_path("zip", e.key),
                         "a path that is not also an axis of the grid", "'" + e.key + "'");
      }
    }
  }
  for (const auto& [name, values] : zip) {
    if (values.size() != zip.front().second.size()) {
      r.fail("zip",
             fmt::format("lists of one length ({} for '{}')", zip.front().second.size(),
                         zip.front().first),
             fmt::format("{} values for '{}'", values.size(), name));
    }
  }
  std::vector<std::vector<std::pair<std::string, ConfigNode>>> explicit_points;
  if (r.has("points")) {
    for (const ConfigNode& p : r.node("points").items()) {
      explicit_points.push_back(read_values(p, true));
      // Points are crossed with the grid and the zip: a path set by both would override the
      // axis's values and make points that are all alike.
      for (const auto& value : explicit_points.back()) {
        const std::string& name = value.first;  // (a structured binding: not captured by clang 14)
        const auto on = [&](const auto& axes) {
          return std::any_of(axes.begin(), axes.end(),
                             [&](const auto& a) { return a.first == name; });
        };
        if (on(grid) || on(zip)) {
          throw InputError(p.key_where(name), config_path(p.path(), name),
                           fmt::format("a path that is not also an axis of the {} (points are "
                                       "crossed with it)",
                                       on(grid) ? "grid" : "zip"),
                           "'" + name + "'");
        }
      }
    }
  }
  const auto common = r.has("set") ? read_values(r.node("set"), false)
                                   : std::vector<std::pair<std::string, ConfigNode>>{};
  std::vector<std::optional<uint64_t>> seeds;
  if (r.has("seeds") && r.has("replicates")) {
    r.fail("replicates", "either `seeds` or `replicates`", "both");
  }
  if (r.has("seeds")) {
    for (const ConfigNode& v : r.node("seeds").items()) {
      uint64_t seed = 0;
      const bool ok = v.is_scalar() && !v.value().empty() && v.value().front() != '-' &&
                      std::all_of(v.value().begin(), v.value().end(),
                                  [](char c) { return c >= '0' && c <= '9'; }) &&
                      v.value().size() <= 19;
      if (ok) seed = std::stoull(v.value());
      if (!ok) throw InputError(v.where(), v.path(), "a seed (a whole number >= 0)", v.describe());
      seeds.emplace_back(seed);
    }
    if (seeds.empty()) r.fail("seeds", "at least one seed", "an empty list");
  } else if (r.has("replicates")) {
    const auto n = r.integer_as<uint32_t>("replicates");
    if (n > 100000) r.fail("replicates", "at most 100000", std::to_string(n));
    for (uint64_t k = 1; k <= n; ++k)
      seeds.emplace_back(k);
  } else {
    seeds.emplace_back(std::nullopt);
  }

  // Axes: the grid's, the zip's, then every path an explicit point sets, in order of first use.
  for (const auto& [name, values] : grid)
    s.axes.push_back(name);
  for (const auto& [name, values] : zip)
    s.axes.push_back(name);
  for (const auto& p : explicit_points) {
    for (const auto& [name, value] : p) {
      if (std::find(s.axes.begin(), s.axes.end(), name) == s.axes.end()) s.axes.push_back(name);
    }
  }
  size_t grid_points = 1;
  for (const auto& [name, values] : grid)
    grid_points *= values.size();
  const size_t zip_rows = zip.empty() ? 1 : zip.front().second.size();
  const size_t explicit_n = std::max<size_t>(1, explicit_points.size());
  const size_t total = grid_points * zip_rows * explicit_n * seeds.size();
  if (total > 1000000) {
    r.fail(r.has("grid") ? "grid" : "points", "at most 1,000,000 points",
           fmt::format("{} points", total));
  }
  for (size_t g = 0; g < grid_points; ++g) {
    for (size_t z = 0; z < zip_rows; ++z) {
      for (size_t e = 0; e < explicit_n; ++e) {
        for (const std::optional<uint64_t>& seed : seeds) {
          StudyPoint p;
          p.id = static_cast<uint32_t>(s.points.size());
          p.seed = seed;
          p.values.assign(s.axes.size(), "");
          auto put = [&](const std::string& name, const ConfigNode& v) {
            p.overrides.push_back(ParamOverride{name, v});
            const auto at = std::find(s.axes.begin(), s.axes.end(), name) - s.axes.begin();
            p.values[static_cast<size_t>(at)] = v.value();
          };
          for (const auto& [name, v] : common)
            p.overrides.push_back(ParamOverride{name, v});
          size_t rest = g;  // mixed radix, the last axis fastest
          std::vector<size_t> digit(grid.size());
          for (size_t a = grid.size(); a-- > 0;) {
            digit[a] = rest % grid[a].second.size();
            rest /= grid[a].second.size();
          }
          for (size_t a = 0; a < grid.size(); ++a)
            put(grid[a].first, grid[a].second[digit[a]]);
          for (const auto& [name, values] : zip)
            put(name, values[z]);
          if (!explicit_points.empty()) {
            for (const auto& [name, v] : explicit_points[e])
              put(name, v);
          }
          s.points.push_back(std::move(p));
        }
      }
    }
  }
  return s;
}

}  // namespace rocesim::scenario
