#include "sim/core/error.hpp"

#include <fmt/format.h>

namespace rocesim {

std::string SourceLocation::to_string() const {
  if (!file) return "<default>";
  if (line <= 0) return *file;
  return fmt::format("{}:{}:{}", *file, line, column);
}

namespace {
std::string compose(const SourceLocation& where, const std::string& key,
                    const std::string& expected, const std::string& found) {
  std::string msg = where.to_string() + ": error: ";
  if (!key.empty()) msg += "'" + key + "': ";
  if (!expected.empty()) msg += "expected " + expected;
  if (!found.empty()) msg += (expected.empty() ? "found " : ", found ") + found;
  return msg;
}
}  // namespace

InputError::InputError(SourceLocation where, std::string key, std::string expected,
                       std::string found)
    : std::runtime_error(compose(where, key, expected, found)),
      where_(std::move(where)),
      key_(std::move(key)) {}

InputError::InputError(SourceLocation where, std::string message)
    : std::runtime_error(where.to_string() + ": error: " + message), where_(std::move(where)) {}

void fail_check(const char* condition, const char* file, int line, const std::string& message) {
  throw InternalError(fmt::format("internal error at {}:{}: check '{}' failed: {}", file, line,
                                  condition, message));
}

}  // namespace rocesim
