#include "sim/scenario/yaml_source.hpp"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

namespace rocesim::scenario {
namespace {

SourceLocation at(const std::shared_ptr<const std::string>& file, const YAML::Mark& m) {
  return SourceLocation{file, m.line + 1, m.column + 1};
}

/// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past
/// U+10FFFF) without NUL characters: text that may become a name in results.h5.
bool clean_text(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(len) > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<size_t>(len);
  }
  return true;
}

/// Values a document may expand to: YAML aliases repeat what their anchor holds, and nested
/// ones multiply (a "billion laughs" document of a few hundred bytes stands for gigabytes).
constexpr size_t kMaxValues = 2'000'000;

struct Reading {
  std::shared_ptr<const std::string> file;
  std::string root_path;
  std::vector<std::string> unread;  // top-level keys left unexpanded
  size_t values_left = kMaxValues;
};

ConfigNode convert(const YAML::Node& n, Reading& rd, const std::string& path) {
  const std::shared_ptr<const std::string>& file = rd.file;
  const SourceLocation where = at(file, n.Mark());
  if (rd.values_left-- == 0) {
    throw InputError(
        where, path,
        fmt::format("a document of at most {} values once its aliases are expanded", kMaxValues),
        "more (anchors and aliases nested into each other?)");
  }
  switch (n.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return ConfigNode::null_value(where, path);
    case YAML::NodeType::Scalar:
      if (!clean_text(n.Scalar())) {
        throw InputError(where, path, "text in UTF-8 without NUL characters",
                         "invalid UTF-8 or a NUL character");
      }
      return ConfigNode::scalar(n.Scalar(), where, path);
    case YAML::NodeType::Sequence: {
      ConfigNode out = ConfigNode::sequence(where, path);
      size_t i = 0;
      for (const YAML::Node& item : n) {
        out.append(convert(item, rd, fmt::format("{}[{}]", path, i++)));
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
        if (!clean_text(k)) {
          throw InputError(key_where, path, "keys in UTF-8 without NUL characters",
                           "invalid UTF-8 or a NUL character");
        }
        if (out.find(k) != nullptr) {
          throw InputError(key_where, config_path(path, k), "each key once in a mapping",
                           fmt::format("'{}' a second time", k));
        }
        // Sections a reader documents as not read are kept empty, not expanded.
        const bool unread = path == rd.root_path &&
                            std::find(rd.unread.begin(), rd.unread.end(), k) != rd.unread.end();
        out.set(k, key_where,
                unread ? ConfigNode::null_value(at(file, kv.second.Mark()), config_path(path, k))
                       : convert(kv.second, rd, config_path(path, k)));
      }
      return out;
    }
  }
  return ConfigNode();
}

/// Where each document of a YAML stream starts; nothing else of the events is kept.
struct DocumentStarts : YAML::EventHandler {
  YAML::Mark last = YAML::Mark::null_mark();
  void OnDocumentStart(const YAML::Mark& mark) override { last = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

ConfigNode parse(std::istream& in, const std::shared_ptr<const std::string>& file,
                 const std::string& root_path, const std::vector<std::string>& unread = {}) {
  // A raw NUL byte never reaches the checks of the values: the YAML reader turns it into
  // something else (a backspace, or an escape that fails later). Found here, at its place.
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    const size_t line_start = text.rfind('\n', nul);
    const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + nul, '\n'));
    const int column =
        1 + static_cast<int>(line_start == std::string::npos ? nul : nul - line_start - 1);
    throw InputError(SourceLocation{file, line, column}, root_path,
                     "text in UTF-8 without NUL characters", "a NUL character");
  }
  YAML::Node root;
  std::optional<YAML::Mark> second;
  try {
    root = YAML::Load(text);
    // A second document would be read by nobody: say so rather than drop it. Only a stream
    // with a document marker ('---' or '...') can hold one, so only such a text is parsed
    // again, its events walked for at most two documents (YAML::LoadAll, which builds them
    // all, can go on making empty documents on some malformed input until memory runs out).
    if (text.find("---") != std::string::npos || text.find("...") != std::string::npos) {
      std::istringstream stream(text);
      YAML::Parser parser(stream);
      DocumentStarts starts;
      if (parser.HandleNextDocument(starts) && parser.HandleNextDocument(starts)) {
        second = starts.last;
      }
    }
  } catch (const YAML::Exception& e) {
    throw InputError(at(file, e.mark), root_path, "valid YAML",
                     fmt::format("a syntax error ({})", e.msg));
  }
  if (second) {
    throw InputError(second->is_null() ? SourceLocation{file, 1, 1} : at(file, *second), root_path,
                     "one YAML document", "a second document ('---')");
  }
  Reading rd{file, root_path, unread};
  ConfigNode c = convert(root, rd, root_path);
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
                          const ConfigNode* referenced_by, const std::vector<std::string>& unread) {
  std::ifstream in(path);
  if (!in || std::filesystem::is_directory(path)) {
    if (referenced_by != nullptr) {
      throw InputError(referenced_by->where(), referenced_by->path(), "a readable YAML file",
                       unreadable_file(path));
    }
    throw InputError(SourceLocation{std::make_shared<const std::string>(path), 0, 0}, root_path,
                     "a readable YAML file", unreadable_file(path));
  }
  return parse(in, std::make_shared<const std::string>(path), root_path, unread);
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
