// Parameters are declared once, in a table next to the code that uses them: key, type, default
// (or required), help with unit, legal values and a range check. The same table
//  * validates a scenario section (unknown keys, wrong types, missing units, bad ranges) with the
//    file:line:col of the offending value,
//  * fills in defaults,
//  * produces the effective configuration echoed into results.h5, and
//  * generates the scenario reference (docs/scenario.md, `rocesim schema`).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/core/config.hpp"
#include "sim/core/units.hpp"

namespace rocesim {

/// Levenshtein distance between two strings (for suggesting the name a user meant).
size_t edit_distance(std::string_view a, std::string_view b);

/// The name a user most likely meant: of the names offered, the first nearest to `given`
/// within two edits (names whose lengths differ by the best distance so far are passed over
/// unmeasured: they cannot be nearer).
class NearestName {
 public:
  explicit NearestName(std::string_view given) : given_(given) {}
  void offer(std::string_view name);
  /// The nearest name offered, or empty when none is within two edits.
  std::string_view best() const { return best_; }

 private:
  std::string_view given_;
  std::string_view best_;
  size_t best_d_ = 3;
};

enum class ParamType {
  Integer,    // whole number
  Number,     // real number
  Boolean,    // true | false
  String,     // free text
  Choice,     // one of `choices` ("a|b|c")
  Bytes,      // size with unit: 4MiB
  Time,       // time with unit: 1.5us
  Bandwidth,  // rate with unit: 400Gbps
  Section,    // a mapping described by the table named in `choices`; fallback "{}" = optional
  List,       // a list; its items are described by the table named in `choices` (if any)
  Any,        // checked by the reading code (e.g. a rank selection); `choices` documents it
};

enum class Check {
  None,
  Positive,     // > 0
  NonNegative,  // >= 0
  Fraction,     // 0 < x <= 1
};

struct Param {
  std::string_view key;
  ParamType type = ParamType::String;
  std::string_view fallback{};  // default as scenario text; empty: required unless `optional`
  std::string_view help{};
  std::string_view choices{};
  Check check = Check::None;
  bool optional = false;  // may be absent and has no default
  /// Upper bound of an Integer (0: none), documented with the key: counts are bounded so that
  /// no value wraps and no size grows past what a fabric or a workload can be.
  int64_t max = 0;

  bool required() const { return fallback.empty() && !optional; }
};

struct ParamTable {
  std::string_view name;  // e.g. "topology (type: clos)"
  std::string_view help;
  std::span<const Param> params;

  const Param* find(std::string_view key) const;
};

/// Collects, for every mapping read through a table, the mapping with its defaults filled in, and
/// assembles the effective scenario that results.h5 echoes back.
class EffectiveConfig {
 public:
  void record(ConfigNode effective_map);
  /// The written tree with every recorded mapping replaced by its effective form.
  ConfigNode assemble(const ConfigNode& written) const;

 private:
  std::map<std::string, ConfigNode> by_path_;
};

/// Reads one mapping of a scenario against its table. Construction checks the shape (a mapping,
/// no unknown keys, all required keys present); the typed getters parse, range-check and fall
/// back to defaults. Every failure is an InputError located at the offending text.
class ParamReader {
 public:
  ParamReader(const ConfigNode& node, const ParamTable& table, EffectiveConfig* sink = nullptr);

  /// Reader for the Section `key` against `table`, sharing the sink. A Section declared with
  /// fallback "{}" may be absent: the reader then sees an empty mapping and applies defaults.
  ParamReader section(std::string_view key, const ParamTable& table) const;
  /// Reader for any mapping below this one (e.g. an item of a List), sharing the sink.
  ParamReader child(const ConfigNode& node, const ParamTable& table) const;
  EffectiveConfig* sink() const { return sink_; }

  /// True when the key was written in the scenario (not defaulted).
  bool has(std::string_view key) const;

  int64_t integer(std::string_view key) const;
  /// An integer used as type T: a value outside T's range is a located error, never wrapped.
  template <typename T>
  T integer_as(std::string_view key) const {
    const int64_t v = integer(key);
    constexpr auto lo = static_cast<int64_t>(std::numeric_limits<T>::min());
    constexpr auto hi = static_cast<int64_t>(std::numeric_limits<T>::max());
    // The key's own check (> 0, >= 0) has passed: only the side that is out says anything.
    if (v > hi) fail(key, "an integer of at most " + std::to_string(hi), std::to_string(v));
    if (v < lo) fail(key, "an integer of at least " + std::to_string(lo), std::to_string(v));
    return static_cast<T>(v);
  }
  double number(std::string_view key) const;
  bool boolean(std::string_view key) const;
  std::string string(std::string_view key) const;
  std::string choice(std::string_view key) const;
  Bytes bytes(std::string_view key) const;
  Time time(std::string_view key) const;
  Bandwidth bandwidth(std::string_view key) const;
  /// A Section, List or Any value as written. Throws if absent (check `has` first for optional).
  const ConfigNode& node(std::string_view key) const;
  /// Any value as written, or its default as a scalar (for Any-typed keys with a fallback).
  ConfigNode value(std::string_view key) const;

  /// Location of the value of `key` (or of the mapping when the key is absent).
  SourceLocation where(std::string_view key) const;
  std::string path(std::string_view key) const { return config_path(node_.path(), key); }
  const ConfigNode& self() const { return node_; }
  const ParamTable& table() const { return table_; }

  /// Raise a located InputError about `key`, for checks that involve several values.
  [[noreturn]] void fail(std::string_view key, std::string expected, std::string found) const;

  /// Records in the sink the mapping as written, without the table's defaults: for a section
  /// that overrides another (a workload's `nccl`, whose absent keys come from the scenario's
  /// section, not from the table), so that the effective scenario runs again as this run did.
  void record_as_written() const;

  /// The mapping as written plus every scalar default, in table order; Sections and Lists are
  /// copied as written (their readers add their own defaults). `computed` gives the values of
  /// keys without a fallback that the caller works out (key, scalar text), for those absent.
  ConfigNode effective(
      std::span<const std::pair<std::string_view, std::string>> computed = {}) const;

 private:
  ParamReader(std::shared_ptr<const ConfigNode> owned, const ParamTable& table,
              EffectiveConfig* sink);
  const Param& param(std::string_view key, ParamType type) const;
  /// The scalar text for key (written or default); nullptr only for absent optional keys.
  const ConfigNode* scalar_node(const Param& p, ConfigNode& storage) const;
  template <typename T>
  void check_range(const Param& p, const ConfigNode& n, T value) const;

  std::shared_ptr<const ConfigNode> owned_;  // an absent Section read with its defaults
  const ConfigNode& node_;
  const ParamTable& table_;
  EffectiveConfig* sink_ = nullptr;
};

/// Describes a table as Markdown (a heading, its help, one row per key) for docs/scenario.md.
std::string table_markdown(const ParamTable& table);
std::string_view param_type_name(ParamType type);

/// Parsers for scalar text shared with code that reads values outside a table (e.g. CSV files).
int64_t parse_integer(const ConfigNode& n);
double parse_number(const ConfigNode& n);

}  // namespace rocesim
