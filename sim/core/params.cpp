#include "sim/core/params.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <memory>

#include "sim/core/quantity.hpp"

namespace rocesim {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

void NearestName::offer(std::string_view name) {
  const size_t gap =
      name.size() > given_.size() ? name.size() - given_.size() : given_.size() - name.size();
  if (gap >= best_d_) return;
  const size_t d = edit_distance(given_, name);
  if (d < best_d_) {
    best_d_ = d;
    best_ = name;
  }
}

namespace {

std::string key_list(const ParamTable& table) {
  std::string out;
  for (const Param& p : table.params) {
    if (!out.empty()) out += ", ";
    out += p.key;
  }
  return out;
}

std::string choices_text(std::string_view choices) {
  std::string out;
  size_t start = 0;
  while (start <= choices.size()) {
    const size_t bar = choices.find('|', start);
    const std::string_view c =
        choices.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start);
    if (!out.empty()) out += ", ";
    out += fmt::format("'{}'", c);
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return out;
}

bool is_choice(std::string_view choices, std::string_view value) {
  size_t start = 0;
  while (true) {
    const size_t bar = choices.find('|', start);
    if (choices.substr(
            start, bar == std::string_view::npos ? std::string_view::npos : bar - start) == value) {
      return true;
    }
    if (bar == std::string_view::npos) return false;
    start = bar + 1;
  }
}

/// The type as a noun with its article, for "expected ..." ("an integer", "a size").
std::string_view type_noun(ParamType type) {
  switch (type) {
    case ParamType::Integer:
      return "an integer";
    case ParamType::Number:
      return "a number";
    case ParamType::Boolean:
      return "a boolean";
    case ParamType::String:
      return "a string";
    case ParamType::Choice:
      return "a choice";
    case ParamType::Bytes:
      return "a size";
    case ParamType::Time:
      return "a time";
    case ParamType::Bandwidth:
      return "a bandwidth";
    case ParamType::Section:
      return "a mapping";
    case ParamType::List:
      return "a list";
    case ParamType::Any:
      return "a value";
  }
  return "a value";
}

std::string_view check_text(Check c) {
  switch (c) {
    case Check::None:
      return "";
    case Check::Positive:
      return "> 0";
    case Check::NonNegative:
      return ">= 0";
    case Check::Fraction:
      return "in (0, 1]";
  }
  return "";
}

}  // namespace

std::string_view param_type_name(ParamType type) {
  switch (type) {
    case ParamType::Integer:
      return "integer";
    case ParamType::Number:
      return "number";
    case ParamType::Boolean:
      return "boolean";
    case ParamType::String:
      return "string";
    case ParamType::Choice:
      return "choice";
    case ParamType::Bytes:
      return "bytes";
    case ParamType::Time:
      return "time";
    case ParamType::Bandwidth:
      return "bandwidth";
    case ParamType::Section:
      return "mapping";
    case ParamType::List:
      return "list";
    case ParamType::Any:
      return "see text";
  }
  return "?";
}

const Param* ParamTable::find(std::string_view key) const {
  for (const Param& p : params) {
    if (p.key == key) return &p;
  }
  return nullptr;
}

int64_t parse_integer(const ConfigNode& n) {
  const std::string& s = n.value();
  int64_t v = 0;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (first != last && *first == '+') ++first;
  const auto [ptr, ec] = std::from_chars(first, last, v);
  if (!n.is_scalar() || ec != std::errc() || ptr != last || first == last) {
    throw InputError(n.where(), n.path(), "a whole number", n.describe());
  }
  return v;
}

double parse_number(const ConfigNode& n) {
  const std::string& s = n.value();
  double v = 0;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (first != last && *first == '+') ++first;
  const auto [ptr, ec] = std::from_chars(first, last, v, std::chars_format::general);
  if (!n.is_scalar() || ec != std::errc() || ptr != last || first == last || !std::isfinite(v)) {
    throw InputError(n.where(), n.path(), "a number", n.describe());
  }
  return v;
}

void EffectiveConfig::record(ConfigNode effective_map) {
  std::string path = effective_map.path();
  by_path_.insert_or_assign(std::move(path), std::move(effective_map));
}

ConfigNode EffectiveConfig::assemble(const ConfigNode& written) const {
  if (written.is_sequence()) {
    ConfigNode out = ConfigNode::sequence(written.where(), written.path());
    for (const ConfigNode& item : written.items())
      out.append(assemble(item));
    return out;
  }
  if (!written.is_map()) return written;
  const auto it = by_path_.find(written.path());
  const ConfigNode& base = it == by_path_.end() ? written : it->second;
  ConfigNode out = ConfigNode::map(written.where(), written.path());
  for (const ConfigNode::Entry& e : base.entries()) {
    const ConfigNode* w = written.find(e.key);
    out.set(e.key, e.key_where, assemble(w != nullptr ? *w : e.value));
  }
  return out;
}

ParamReader ParamReader::section(std::string_view key, const ParamTable& table) const {
  if (!has(key)) {
    const Param* p = table_.find(key);
    ROCESIM_CHECK(p != nullptr && p->type == ParamType::Section && p->fallback == "{}",
                  fmt::format("section '{}' read while absent", key));
    return ParamReader(
        std::make_shared<const ConfigNode>(ConfigNode::map(node_.where(), path(key))), table,
        sink_);
  }
  return ParamReader(node(key), table, sink_);
}

ParamReader::ParamReader(std::shared_ptr<const ConfigNode> owned, const ParamTable& table,
                         EffectiveConfig* sink)
    : ParamReader(*owned, table, sink) {
  owned_ = std::move(owned);
}

ParamReader ParamReader::child(const ConfigNode& node, const ParamTable& table) const {
  return ParamReader(node, table, sink_);
}

ParamReader::ParamReader(const ConfigNode& node, const ParamTable& table, EffectiveConfig* sink)
    : node_(node), table_(table), sink_(sink) {
  if (!node.is_map()) {
    throw InputError(node.where(), node.path(),
                     fmt::format("a mapping with keys {}", key_list(table)), node.describe());
  }
  for (const ConfigNode::Entry& e : node.entries()) {
    if (table.find(e.key) != nullptr) continue;
    std::string expected = fmt::format("one of the keys of {}: {}", table.name, key_list(table));
    NearestName meant(e.key);
    for (const Param& p : table.params)
      meant.offer(p.key);
    std::string found = fmt::format("unknown key '{}'", e.key);
    if (!meant.best().empty()) found += fmt::format(" (did you mean '{}'?)", meant.best());
    throw InputError(e.key_where, config_path(node.path(), e.key), expected, found);
  }
  for (const Param& p : table.params) {
    if (p.required() && node.find(p.key) == nullptr) {
      throw InputError(
          node.named_at(), config_path(node.path(), p.key),
          fmt::format("the required key '{}' ({}: {})", p.key, param_type_name(p.type), p.help),
          "the key is missing");
    }
  }
  if (sink_ != nullptr) sink_->record(effective());
}

bool ParamReader::has(std::string_view key) const {
  return node_.find(key) != nullptr;
}

const Param& ParamReader::param(std::string_view key, ParamType type) const {
  const Param* p = table_.find(key);
  ROCESIM_CHECK(p != nullptr, fmt::format("key '{}' is not declared in {}", key, table_.name));
  ROCESIM_CHECK(p->type == type || (type == ParamType::String && p->type == ParamType::Choice),
                fmt::format("key '{}' of {} read with the wrong type", key, table_.name));
  return *p;
}

const ConfigNode* ParamReader::scalar_node(const Param& p, ConfigNode& storage) const {
  if (const ConfigNode* n = node_.find(p.key)) {
    if (!n->is_scalar()) {
      throw InputError(n->where(), n->path(), fmt::format("{} ({})", type_noun(p.type), p.help),
                       n->describe());
    }
    return n;
  }
  if (p.fallback.empty()) {
    ROCESIM_CHECK(p.optional, "required key absent after construction");
    return nullptr;
  }
  storage = ConfigNode::scalar(std::string(p.fallback), SourceLocation{},
                               config_path(node_.path(), p.key) + " (default)");
  return &storage;
}

template <typename T>
void ParamReader::check_range(const Param& p, const ConfigNode& n, T value) const {
  bool ok = true;
  switch (p.check) {
    case Check::None:
      break;
    case Check::Positive:
      ok = value > T{};
      break;
    case Check::NonNegative:
      ok = value >= T{};
      break;
    case Check::Fraction:
      if constexpr (std::is_arithmetic_v<T>) ok = value > T{} && value <= T{1};
      break;
  }
  if (!ok) {
    throw InputError(n.where(), n.path(),
                     fmt::format("{} {} ({})", type_noun(p.type), check_text(p.check), p.help),
                     n.describe());
  }
}

namespace {
[[noreturn]] void absent(const ConfigNode& map, std::string_view key) {
  throw InternalError(
      fmt::format("optional key '{}' read without checking has()", config_path(map.path(), key)));
}
}  // namespace

int64_t ParamReader::integer(std::string_view key) const {
  const Param& p = param(key, ParamType::Integer);
  ConfigNode storage;
  const ConfigNode* n = scalar_node(p, storage);
  if (n == nullptr) absent(node_, key);
  const int64_t v = parse_integer(*n);
  check_range(p, *n, v);
  if (p.max > 0 && v > p.max) {
    throw InputError(n->where(), n->path(),
                     fmt::format("{} from {} to {} ({})", type_noun(p.type),
                                 p.check == Check::Positive ? 1 : 0, p.max, p.help),
                     n->describe());
  }
  return v;
}

double ParamReader::number(std::string_view key) const {
  const Param& p = param(key, ParamType::Number);
  ConfigNode storage;
  const ConfigNode* n = scalar_node(p, storage);
  if (n == nullptr) absent(node_, key);
  const double v = parse_number(*n);
  check_range(p, *n, v);
  return v;
}

bool ParamReader::boolean(std::string_view key) const {
  const Param& p = param(key, ParamType::Boolean);
  ConfigNode storage;
  const ConfigNode* n = scalar_node(p, storage);
  if (n == nullptr) absent(node_, key);
  if (n->value() == "true") return true;
  if (n->value() == "false") return false;
  throw InputError(n->where(), n->path(), "true or false", n->describe());
}

std::string ParamReader::string(std::string_view key) const {
  const Param& p = param(key, ParamType::String);
  ConfigNode storage;
  const ConfigNode* n = scalar_node(p, storage);
  if (n == nullptr) absent(node_, key);
  if (p.type == ParamType::Choice && !is_choice(p.choices, n->value())) {
    throw InputError(n->where(), n->path(), fmt::format("one of {}", choices_text(p.choices)),
                     n->describe());
  }
  return n->value();
}

std::string ParamReader::choice(std::string_view key) const {
  ROCESIM_CHECK(param(key, ParamType::Choice).type == ParamType::Choice, "not a choice");
  return string(key);
}

Bytes ParamReader::bytes(std::string_view key) const {
  const Param& p = param(key, ParamType::Bytes);
  ConfigNode storage;
  const ConfigNode* n = scalar_node(p, storage);
  if (n == nullptr) absent(node_, key);
  Bytes v;
  try {
    v = parse_bytes(n->value());
  } catch (const QuantityError& e) {
    throw InputError(n->where(), n->path(), fmt::format("a size with a unit ({})", p.help),
                     e.what());
  }
  check_range(p, *n, v);
  return v;
}

Time ParamReader::time(std::string_view key) const {
  const Param& p = param(key, ParamType::Time);
  ConfigNode storage;
  const ConfigNode* n = scalar_node(p, storage);
  if (n == nullptr) absent(node_, key);
  Time v;
  try {
    v = parse_time(n->value());
  } catch (const QuantityError& e) {
    throw InputError(n->where(), n->path(), fmt::format("a time with a unit ({})", p.help),
                     e.what());
  }
  check_range(p, *n, v);
  // No run reaches past kMaxTransferPs: a later time (a start, an event) would fail when the
  // run gets there, far from the key that set it.
  if (v.count_ps() > kMaxTransferPs) {
    throw InputError(n->where(), n->path(),
                     "a time of at most 4.6e6 s (2^62 ps, about 53 days: the latest a run can "
                     "reach)",
                     n->describe());
  }
  return v;
}

Bandwidth ParamReader::bandwidth(std::string_view key) const {
  const Param& p = param(key, ParamType::Bandwidth);
  ConfigNode storage;
  const ConfigNode* n = scalar_node(p, storage);
  if (n == nullptr) absent(node_, key);
  Bandwidth v;
  try {
    v = parse_bandwidth(n->value());
  } catch (const QuantityError& e) {
    throw InputError(n->where(), n->path(), fmt::format("a bandwidth with a unit ({})", p.help),
                     e.what());
  }
  check_range(p, *n, v);
  return v;
}

const ConfigNode& ParamReader::node(std::string_view key) const {
  const Param* p = table_.find(key);
  ROCESIM_CHECK(p != nullptr, fmt::format("key '{}' is not declared in {}", key, table_.name));
  const ConfigNode* n = node_.find(key);
  if (n == nullptr) absent(node_, key);
  if (p->type == ParamType::Section && !n->is_map()) {
    throw InputError(n->where(), n->path(), fmt::format("a mapping ({})", p->help), n->describe());
  }
  if (p->type == ParamType::List && !n->is_sequence()) {
    throw InputError(n->where(), n->path(), fmt::format("a list ({})", p->help), n->describe());
  }
  return *n;
}

ConfigNode ParamReader::value(std::string_view key) const {
  const Param* p = table_.find(key);
  ROCESIM_CHECK(p != nullptr, fmt::format("key '{}' is not declared in {}", key, table_.name));
  if (const ConfigNode* n = node_.find(key)) return *n;
  if (p->fallback.empty()) absent(node_, key);
  return ConfigNode::scalar(std::string(p->fallback), SourceLocation{}, path(key) + " (default)");
}

SourceLocation ParamReader::where(std::string_view key) const {
  if (const ConfigNode* n = node_.find(key)) return n->where();
  return node_.where();
}

void ParamReader::fail(std::string_view key, std::string expected, std::string found) const {
  throw InputError(where(key), path(key), std::move(expected), std::move(found));
}

void ParamReader::record_as_written() const {
  if (sink_ != nullptr) sink_->record(node_);
}

ConfigNode ParamReader::effective(
    std::span<const std::pair<std::string_view, std::string>> computed) const {
  ConfigNode out = ConfigNode::map(node_.where(), node_.path());
  for (const Param& p : table_.params) {
    const auto value = std::find_if(computed.begin(), computed.end(),
                                    [&](const auto& c) { return c.first == p.key; });
    if (const ConfigNode* n = node_.find(p.key)) {
      out.set(std::string(p.key), node_.key_where(p.key), *n);
    } else if (value != computed.end()) {
      out.set(
          std::string(p.key), SourceLocation{},
          ConfigNode::scalar(value->second, SourceLocation{}, config_path(node_.path(), p.key)));
    } else if (p.type == ParamType::Section && p.fallback == "{}") {
      out.set(std::string(p.key), SourceLocation{},
              ConfigNode::map(SourceLocation{}, config_path(node_.path(), p.key)));
    } else if (!p.fallback.empty()) {
      out.set(std::string(p.key), SourceLocation{},
              ConfigNode::scalar(std::string(p.fallback), SourceLocation{},
                                 config_path(node_.path(), p.key)));
    }
  }
  return out;
}

std::string table_markdown(const ParamTable& table) {
  std::string out = fmt::format("### {}\n\n{}\n\n", table.name, table.help);
  out += "| key | type | default | description |\n|---|---|---|---|\n";
  for (const Param& p : table.params) {
    std::string type(param_type_name(p.type));
    if (p.type == ParamType::Choice) type = fmt::format("one of {}", choices_text(p.choices));
    if ((p.type == ParamType::Section || p.type == ParamType::List || p.type == ParamType::Any) &&
        !p.choices.empty()) {
      type += fmt::format(" ({})", p.choices);
    }
    if (p.check != Check::None) type += fmt::format(", {}", check_text(p.check));
    if (p.max > 0) type += fmt::format(", at most {}", p.max);
    const std::string def = p.required() ? std::string("**required**")
                            : p.optional ? std::string("(none)")
                                         : fmt::format("`{}`", p.fallback);
    out += fmt::format("| `{}` | {} | {} | {} |\n", p.key, type, def, p.help);
  }
  return out;
}

}  // namespace rocesim
