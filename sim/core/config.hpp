// A scenario value tree that remembers where every value came from. The scenario layer builds it
// from YAML (following file references); every other layer reads it through ParamReader
// (params.hpp), so builders and models can report "file:line:col: 'topology.leaf.uplinks': ..."
// without knowing anything about YAML.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/core/error.hpp"

namespace rocesim {

class ConfigNode {
 public:
  enum class Kind { Null, Scalar, Sequence, Map };
  struct Entry;

  ConfigNode() = default;
  static ConfigNode scalar(std::string value, SourceLocation where, std::string path);
  static ConfigNode sequence(SourceLocation where, std::string path);
  static ConfigNode map(SourceLocation where, std::string path);
  static ConfigNode null_value(SourceLocation where, std::string path);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_scalar() const { return kind_ == Kind::Scalar; }
  bool is_sequence() const { return kind_ == Kind::Sequence; }
  bool is_map() const { return kind_ == Kind::Map; }

  const SourceLocation& where() const { return where_; }
  /// Dotted path from the scenario root, e.g. "workloads[1].size"; used in messages.
  const std::string& path() const { return path_; }
  const std::string& value() const { return value_; }
  const std::vector<ConfigNode>& items() const { return items_; }
  const std::vector<Entry>& entries() const { return entries_; }

  /// Map lookup; nullptr when absent.
  const ConfigNode* find(std::string_view key) const;
  /// The location of a key itself (for "unknown key" errors); the map's location if absent.
  SourceLocation key_where(std::string_view key) const;
  /// Where this value is named: its key in the parent mapping, or the value itself when it has
  /// no key (the root, a list item). Errors about a whole mapping point here.
  const SourceLocation& named_at() const { return named_at_.known() ? named_at_ : where_; }

  void append(ConfigNode item);
  void set(std::string key, SourceLocation key_where, ConfigNode value);

  /// What the value looks like, for "found ..." in messages: "the string 'abc'", "a list", ...
  std::string describe() const;

  /// The same tree under another path (a value read from one file and placed elsewhere in the
  /// scenario, e.g. an included workload): every path below is rebuilt, locations are kept.
  ConfigNode rebased(const std::string& path) const;

 private:
  void rebase(const std::string& path);  // rebased(), in place

  Kind kind_ = Kind::Null;
  SourceLocation where_;
  std::string path_;
  std::string value_;
  SourceLocation named_at_;
  std::vector<ConfigNode> items_;
  std::vector<Entry> entries_;
};

struct ConfigNode::Entry {
  std::string key;
  SourceLocation key_where;
  ConfigNode value;
};

/// Joins a parent path and a key: ("topology", "leaf") -> "topology.leaf"; ("", "seed") -> "seed".
std::string config_path(std::string_view parent, std::string_view key);

}  // namespace rocesim
