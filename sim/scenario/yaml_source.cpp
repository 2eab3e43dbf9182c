#include "sim/scenario/yaml_source.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace rocesim::scenario {
namespace {

SourceLocation at(const std::shared_ptr<const std::string>& file, const YAML::Mark& m) {
  return SourceLocation{file, m.line + 1, m.column + 1};
}

ConfigNode convert(const YAML::Node& n, const std::shared_ptr<const std::string>& file,
                   const std::string& path) {
  const SourceLocation where = at(file, n.Mark());
  switch (n.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return ConfigNode::null_value(where, path);
    case YAML::NodeType::Scalar:
      return ConfigNode::scalar(n.Scalar(), where, path);
    case YAML::NodeType::Sequence: {
      ConfigNode out = ConfigNode::sequence(where, path);
      size_t i = 0;
      for (const YAML::Node& item : n) {
        out.append(convert(item, file, fmt::format("{}[{}]", path, i++)));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      ConfigNode out = ConfigNode::map(where, path);
      for (const auto& kv : n) {
        const YAML::Node& key = kv.first;
        const SourceLocation key_where = at(file, key.Mark());
        if (!key.IsScalar()) {
          throw InputError(key_where, path, "keys that are plain names", "a complex key");
        }
        const std::string k = key.Scalar();
        if (out.find(k) != nullptr) {
          throw InputError(key_where, config_path(path, k), "each key once in a mapping",
                           fmt::format("'{}' a second time", k));
        }
        out.set(k, key_where, convert(kv.second, file, config_path(path, k)));
      }
      return out;
    }
  }
  return ConfigNode();
}

ConfigNode parse(std::istream& in, const std::shared_ptr<const std::string>& file,
                 const std::string& root_path) {
  YAML::Node root;
  try {
    root = YAML::Load(in);
  } catch (const YAML::Exception& e) {
    throw InputError(at(file, e.mark), root_path, "valid YAML",
                     fmt::format("a syntax error ({})", e.msg));
  }
  ConfigNode c = convert(root, file, root_path);
  if (c.is_null()) {
    throw InputError(SourceLocation{file, 1, 1}, root_path, "a YAML mapping", "an empty file");
  }
  return c;
}

void emit(YAML::Emitter& out, const ConfigNode& n) {
  switch (n.kind()) {
    case ConfigNode::Kind::Null:
      out << YAML::Null;
      break;
    case ConfigNode::Kind::Scalar:
      out << n.value();
      break;
    case ConfigNode::Kind::Sequence:
      out << YAML::BeginSeq;
      for (const ConfigNode& item : n.items())
        emit(out, item);
      out << YAML::EndSeq;
      break;
    case ConfigNode::Kind::Map:
      out << YAML::BeginMap;
      for (const ConfigNode::Entry& e : n.entries()) {
        out << YAML::Key << e.key << YAML::Value;
        emit(out, e.value);
      }
      out << YAML::EndMap;
      break;
  }
}

/// Why a file cannot be read, for "found ..." in messages: "'x.yaml', which does not exist".
std::string unreadable_file(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) return fmt::format("'{}', which does not exist", path);
  if (std::filesystem::is_directory(st)) return fmt::format("'{}', which is a directory", path);
  return fmt::format("'{}', which cannot be opened for reading", path);
}

}  // namespace

ConfigNode load_yaml_file(const std::string& path, const std::string& root_path,
                          const ConfigNode* referenced_by) {
  std::ifstream in(path);
  if (!in || std::filesystem::is_directory(path)) {
    if (referenced_by != nullptr) {
      throw InputError(referenced_by->where(), referenced_by->path(), "a readable YAML file",
                       unreadable_file(path));
    }
    throw InputError(SourceLocation{std::make_shared<const std::string>(path), 0, 0}, root_path,
                     "a readable YAML file", unreadable_file(path));
  }
  return parse(in, std::make_shared<const std::string>(path), root_path);
}

ConfigNode load_yaml_text(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  return parse(in, std::make_shared<const std::string>(name), "");
}

std::string to_yaml(const ConfigNode& node) {
  YAML::Emitter out;
  emit(out, node);
  return std::string(out.c_str()) + "\n";
}

}  // namespace rocesim::scenario
