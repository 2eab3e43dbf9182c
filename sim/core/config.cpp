#include "sim/core/config.hpp"

#include <fmt/format.h>

namespace rocesim {

ConfigNode ConfigNode::scalar(std::string value, SourceLocation where, std::string path) {
  ConfigNode n;
  n.kind_ = Kind::Scalar;
  n.value_ = std::move(value);
  n.where_ = std::move(where);
  n.path_ = std::move(path);
  return n;
}

ConfigNode ConfigNode::sequence(SourceLocation where, std::string path) {
  ConfigNode n;
  n.kind_ = Kind::Sequence;
  n.where_ = std::move(where);
  n.path_ = std::move(path);
  return n;
}

ConfigNode ConfigNode::map(SourceLocation where, std::string path) {
  ConfigNode n;
  n.kind_ = Kind::Map;
  n.where_ = std::move(where);
  n.path_ = std::move(path);
  return n;
}

ConfigNode ConfigNode::null_value(SourceLocation where, std::string path) {
  ConfigNode n;
  n.where_ = std::move(where);
  n.path_ = std::move(path);
  return n;
}

const ConfigNode* ConfigNode::find(std::string_view key) const {
  for (const Entry& e : entries_) {
    if (e.key == key) return &e.value;
  }
  return nullptr;
}

SourceLocation ConfigNode::key_where(std::string_view key) const {
  for (const Entry& e : entries_) {
    if (e.key == key) return e.key_where;
  }
  return where_;
}

// Out of line: the move of a ConfigNode needs Entry complete (clang with libstdc++ insists).
void ConfigNode::append(ConfigNode item) {
  items_.push_back(std::move(item));
}

void ConfigNode::set(std::string key, SourceLocation key_where, ConfigNode value) {
  value.named_at_ = key_where;
  for (Entry& e : entries_) {
    if (e.key == key) {
      e.key_where = std::move(key_where);
      e.value = std::move(value);
      return;
    }
  }
  entries_.push_back(Entry{std::move(key), std::move(key_where), std::move(value)});
}

std::string ConfigNode::describe() const {
  switch (kind_) {
    case Kind::Null:
      return "nothing (an empty value)";
    case Kind::Scalar:
      return fmt::format("'{}'", value_);
    case Kind::Sequence:
      return fmt::format("a list of {} item{}", items_.size(), items_.size() == 1 ? "" : "s");
    case Kind::Map:
      return "a mapping";
  }
  return "?";
}

ConfigNode ConfigNode::rebased(const std::string& path) const {
  ConfigNode n = *this;
  n.rebase(path);
  return n;
}

void ConfigNode::rebase(const std::string& path) {
  path_ = path;
  for (size_t i = 0; i < items_.size(); ++i)
    items_[i].rebase(fmt::format("{}[{}]", path, i));
  for (Entry& e : entries_)
    e.value.rebase(config_path(path, e.key));
}

std::string config_path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return fmt::format("{}.{}", parent, key);
}

}  // namespace rocesim
