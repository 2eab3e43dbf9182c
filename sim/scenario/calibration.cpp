#include "sim/scenario/calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "sim/scenario/yaml_source.hpp"

namespace rocesim::scenario {
namespace {

constexpr std::string_view kFormat = "rocesim-calibration/1";

constexpr Param kCalibrationParams[] = {
    {.key = "format",
     .type = ParamType::String,
     .fallback = "rocesim-calibration/1",
     .help = "file format and version"},
    {.key = "parameters",
     .type = ParamType::Any,
     .help = "the calibrated values: a mapping from a scenario key's dotted path "
             "(topology.node.nic_efficiency, nccl.NCCL_NET_OVERHEAD, ...) to its value, with "
             "its unit",
     .choices = "mapping of path to value"},
    {.key = "fit",
     .type = ParamType::Any,
     .help = "how the values were obtained (written by rocesim calibrate fit: data, residuals, "
             "uncertainties); informational, not read",
     .choices = "any",
     .optional = true},
};

bool valid_segment(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string default_workload_name(std::string_view type, size_t position) {
  return fmt::format("{}{}", type, position);
}

std::vector<std::string> split_path(const std::string& path, const SourceLocation& where,
                                    const std::string& key) {
  // Segments are keys of mappings, or items of lists: by index ("workloads.0", "workloads[0]")
  // or by the item's name ("workloads[allreduce]"), kept as "[...]".
  auto bad = [&]() {
    return InputError(where, key,
                      "the dotted path of a scenario key, through mappings and list items by "
                      "index or name, e.g. 'topology.node.nic_efficiency', 'workloads.0.bytes' "
                      "or 'workloads[allreduce].bytes'",
                      fmt::format("'{}'", path));
  };
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    std::string seg =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    // A key followed by one or more bracketed items: "workloads[allreduce]", "a[0][1]".
    const size_t open = seg.find('[');
    if (!valid_segment(seg.substr(0, open))) throw bad();
    parts.push_back(seg.substr(0, open));
    for (size_t at = open; at != std::string::npos;) {
      const size_t close = seg.find(']', at);
      if (close == std::string::npos || !valid_segment(seg.substr(at + 1, close - at - 1))) {
        throw bad();
      }
      parts.push_back(seg.substr(at, close - at + 1));
      at = close + 1 == seg.size() ? std::string::npos : close + 1;
      if (at != std::string::npos && seg[at] != '[') throw bad();
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

namespace {

/// The item of a list that `key` names: "[name]" (the item whose `name` is that), "[N]" or "N"
/// (by index); throws a located error naming the items there are.
size_t list_item(const ConfigNode& list, const std::string& key, const ParamOverride& o) {
  const bool bracketed = key.front() == '[';
  const std::string inner = bracketed ? key.substr(1, key.size() - 2) : key;
  const bool index = !inner.empty() && std::all_of(inner.begin(), inner.end(),
                                                   [](char c) { return c >= '0' && c <= '9'; });
  // An item's name: its `name`, or for a workload without one the name it runs under,
  // `<type><position>` (docs/workloads.md).
  auto name_of = [&](size_t i) -> std::string {
    const ConfigNode& item = list.items()[i];
    if (!item.is_map()) return {};
    if (const ConfigNode* name = item.find("name"); name != nullptr && name->is_scalar())
      return name->value();
    const ConfigNode* type = item.find("type");
    if (list.path() == "workloads" && type != nullptr && type->is_scalar())
      return default_workload_name(type->value(), i);
    return {};
  };
  std::string names;
  for (size_t i = 0; i < list.items().size(); ++i) {
    if (index && std::to_string(i) == inner) return i;
    const std::string name = name_of(i);
    if (!index && !name.empty() && name == inner) return i;
    if (!name.empty()) names += fmt::format("{}{}", names.empty() ? "" : ", ", name);
  }
  const std::string by_index = list.items().empty()
                                   ? std::string("none: the list is empty")
                                   : fmt::format("0 to {}", list.items().size() - 1);
  throw InputError(o.value.where(), o.path,
                   fmt::format("an item of {} by index ({}) or by name ({})", list.path(), by_index,
                               names.empty() ? "none has a name" : names),
                   fmt::format("'{}'", inner));
}

ConfigNode replaced(const ConfigNode& node, std::span<const std::string> keys,
                    const ParamOverride& o) {
  if (node.is_sequence()) {
    const size_t i = list_item(node, keys.front(), o);
    if (keys.size() == 1) {
      throw InputError(o.value.where(), o.path,
                       "a key inside the list item (a whole item cannot be set from one value)",
                       fmt::format("the path ends at item {} of {}", i, node.path()));
    }
    ConfigNode copy = ConfigNode::sequence(node.where(), node.path());
    for (size_t k = 0; k < node.items().size(); ++k)
      copy.append(k == i ? replaced(node.items()[k], keys.subspan(1), o) : node.items()[k]);
    return copy;
  }
  if (keys.front().front() == '[') {
    throw InputError(o.value.where(), o.path,
                     fmt::format("a list at '{}' to take an item of", node.path()),
                     node.describe());
  }
  if (!node.is_map()) {
    throw InputError(
        o.value.where(), o.path,
        fmt::format("a path through mappings and lists; '{}' is not a mapping or a list in the "
                    "scenario",
                    node.path()),
        node.describe());
  }
  ConfigNode copy = node;
  const std::string& key = keys.front();
  const std::string child_path = config_path(node.path(), key);
  if (keys.size() == 1) {
    ConfigNode v = o.value.is_scalar()
                       ? ConfigNode::scalar(o.value.value(), o.value.where(), child_path)
                       : o.value.rebased(child_path);
    copy.set(key, o.value.where(), std::move(v));
    return copy;
  }
  const ConfigNode* child = node.find(key);
  if (child == nullptr && keys[1].front() == '[') {
    throw InputError(o.value.where(), o.path,
                     fmt::format("a list at '{}' to take an item of", child_path),
                     fmt::format("no '{}' in the scenario (a path sets a value in an item; it "
                                 "cannot add the item)",
                                 child_path));
  }
  const ConfigNode fresh = ConfigNode::map(o.value.where(), child_path);
  const SourceLocation key_where = child != nullptr ? node.key_where(key) : o.value.where();
  copy.set(key, key_where, replaced(child != nullptr ? *child : fresh, keys.subspan(1), o));
  return copy;
}

}  // namespace

const ParamTable& calibration_file_table() {
  static const ParamTable table{
      "calibration file",
      "A calibration file (written by `rocesim calibrate fit`, or by hand), named by a "
      "scenario's `calibration` key. Its parameters replace the scenario's values.",
      kCalibrationParams};
  return table;
}

std::vector<ParamOverride> read_calibration_file(const std::string& path,
                                                 const ConfigNode* referenced_by) {
  // `fit:` is informational: never expanded (nor checked beyond being YAML).
  const ConfigNode root = load_yaml_file(path, "", referenced_by, {"fit"});
  const ParamReader r(root, calibration_file_table());
  if (r.string("format") != kFormat) {
    r.fail("format", fmt::format("'{}'", kFormat), fmt::format("'{}'", r.string("format")));
  }
  const ConfigNode& params = r.node("parameters");
  if (!params.is_map()) {
    throw InputError(params.where(), "parameters",
                     "a mapping from a scenario key's dotted path to its value", params.describe());
  }
  std::vector<ParamOverride> out;
  for (const ConfigNode::Entry& e : params.entries()) {
    split_path(e.key, e.key_where, config_path("parameters", e.key));
    if (!e.value.is_scalar()) {
      throw InputError(e.value.where(), config_path("parameters", e.key),
                       "a single value (a number, or a number with its unit)", e.value.describe());
    }
    out.push_back(ParamOverride{e.key, e.value});
  }
  return out;
}

ParamOverride parse_override(const std::string& text, const std::string& origin) {
  const auto file = std::make_shared<const std::string>(origin);
  const SourceLocation where{file, 0, 0};
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    throw InputError(where, origin, "KEY=VALUE, e.g. topology.node.nic_efficiency=0.95",
                     fmt::format("'{}'", text));
  }
  const std::string key = text.substr(0, eq);
  split_path(key, where, origin);
  const std::string value = text.substr(eq + 1);
  if (value.front() == '[' || value.front() == '{') {
    // A list or a mapping, in YAML's flow form (JSON is one): `stragglers=[{ranks: [3], ...}]`.
    return ParamOverride{key, load_yaml_text(value, origin).rebased(key)};
  }
  return ParamOverride{key, ConfigNode::scalar(value, where, key)};
}

ConfigNode apply_override(const ConfigNode& root, const ParamOverride& o) {
  const std::vector<std::string> keys = split_path(o.path, o.value.where(), o.path);
  return replaced(root, keys, o);
}

std::string overrides_yaml(const std::vector<ParamOverride>& overrides) {
  if (overrides.empty()) return {};
  ConfigNode values = ConfigNode::map(SourceLocation{}, "parameters");
  ConfigNode from = ConfigNode::map(SourceLocation{}, "from");
  for (const ParamOverride& o : overrides) {
    values.set(o.path, SourceLocation{},
               o.value.is_scalar() ? ConfigNode::scalar(o.value.value(), {}, o.path) : o.value);
    from.set(o.path, SourceLocation{}, ConfigNode::scalar(o.value.where().to_string(), {}, o.path));
  }
  ConfigNode root = ConfigNode::map(SourceLocation{}, "");
  root.set("parameters", SourceLocation{}, values);
  root.set("from", SourceLocation{}, from);
  return to_yaml(root);
}

}  // namespace rocesim::scenario
