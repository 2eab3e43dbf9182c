// Errors. Two kinds, never mixed:
//  * InputError: the user's scenario is wrong. It carries where (file:line:column of the YAML),
//    which key, what was expected and what was found, so the message can be acted on. The CLI
//    turns it into exit code 2.
//  * InternalError: an invariant of the simulator broke (a bug). ROCESIM_CHECK raises it and stays
//    on in release builds, because a silently wrong simulation is worse than a stopped one.
// Library code throws; it never calls exit().
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

namespace rocesim {

/// Where a value came from: a file and a 1-based line and column. A default value or a value
/// built in code has no file (`known()` is false).
struct SourceLocation {
  std::shared_ptr<const std::string> file;
  int line = 0;
  int column = 0;

  bool known() const { return file != nullptr; }
  /// "file:line:col", "file" when the position is unknown, or "<default>".
  std::string to_string() const;
};

class InputError : public std::runtime_error {
 public:
  /// `key` is the dotted path of the offending key ("topology.leaf.uplinks"); `expected` says what
  /// a valid value looks like and `found` what was there. Either may be empty.
  InputError(SourceLocation where, std::string key, std::string expected, std::string found);
  /// A free-form message for errors that are not about one value (e.g. a disconnected topology).
  InputError(SourceLocation where, std::string message);

  const SourceLocation& where() const { return where_; }
  const std::string& key() const { return key_; }

 private:
  SourceLocation where_;
  std::string key_;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void fail_check(const char* condition, const char* file, int line,
                             const std::string& message);

}  // namespace rocesim

/// Invariant check that stays on in release builds.
#define ROCESIM_CHECK(cond, msg)                                          \
  do {                                                                    \
    if (!(cond)) [[unlikely]]                                             \
      ::rocesim::fail_check(#cond, __FILE__, __LINE__, std::string(msg)); \
  } while (false)
