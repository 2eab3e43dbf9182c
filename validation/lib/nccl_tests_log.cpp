#include "validation/lib/nccl_tests_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <sstream>

#include "sim/core/config.hpp"
#include "sim/scenario/yaml_source.hpp"

namespace rocesim::validation {
namespace {

// ---------------------------------------------------------------------------------------------
// Names

struct CollectiveName {
  std::string_view canonical;
  std::string_view binary;
};

constexpr CollectiveName kCollectives[] = {
    {"allreduce", "all_reduce_perf"},
    {"allgather", "all_gather_perf"},
    {"reducescatter", "reduce_scatter_perf"},
    {"alltoall", "alltoall_perf"},
    {"broadcast", "broadcast_perf"},
    {"reduce", "reduce_perf"},
    {"sendrecv", "sendrecv_perf"},
    {"gather", "gather_perf"},
    {"scatter", "scatter_perf"},
    {"hypercube", "hypercube_perf"},
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// A number as someone might write one where nccl-tests prints a size or a count: signed,
/// with a fraction or an exponent, or in hexadecimal.
bool numberish(std::string_view s) {
  if (s.starts_with('-') || s.starts_with('+')) s.remove_prefix(1);
  return !s.empty() &&
         (std::isdigit(static_cast<unsigned char>(s[0])) != 0 || (s[0] == '.' && s.size() > 1));
}

bool is_identifier(std::string_view s) {
  if (s.empty() || std::isalpha(static_cast<unsigned char>(s[0])) == 0) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  });
}

std::optional<int64_t> parse_int(std::string_view s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

/// The collective a benchmark binary measures: "./build/all_reduce_perf_mpi" -> "allreduce".
/// Only names ending in _perf or _perf_mpi count, so prose mentioning "reduce" does not.
std::string collective_of_binary(std::string_view token) {
  while (!token.empty() && std::isalnum(static_cast<unsigned char>(token.back())) == 0 &&
         token.back() != '_')
    token.remove_suffix(1);
  if (const size_t slash = token.rfind('/'); slash != std::string_view::npos)
    token.remove_prefix(slash + 1);
  if (!token.ends_with("_perf") && !token.ends_with("_perf_mpi")) return "";
  return normalise_collective(token);
}

// ---------------------------------------------------------------------------------------------
// Lines and tokens

struct Token {
  std::string_view text;
  int column = 0;  // 1-based, in the line as printed (MPI prefix included)
};

/// A line shaped as a row of 7 to 13 fields (size, count, a type name, ...) whose size or count
/// is a number nccl-tests never prints (negative, fractional, hexadecimal): a row with a wrong
/// value, to be refused at that value, not a line of prose passed over.
bool row_with_bad_numbers(const std::vector<Token>& t) {
  return t.size() >= 7 && t.size() <= 13 && numberish(t[0].text) && numberish(t[1].text) &&
         is_identifier(t[2].text) && !(is_digits(t[0].text) && is_digits(t[1].text));
}

std::vector<Token> tokenize(std::string_view line, size_t from) {
  std::vector<Token> out;
  size_t i = from;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
      ++i;
    if (i >= line.size()) break;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t')
      ++i;
    out.push_back(Token{line.substr(start, i - start), static_cast<int>(start) + 1});
  }
  return out;
}

/// Length of one launcher prefix at the start of `s`: Open MPI --tag-output "[1,0]<stdout>:",
/// MPICH/Intel MPI -prepend-rank "[0] ", Slurm --label / mpirun -l " 0:" and "0:"; 0 if none.
size_t one_prefix(std::string_view s) {
  if (!s.empty() && s[0] == '[') {
    const size_t close = s.find(']');
    if (close == std::string_view::npos || close < 2) return 0;
    const std::string_view inside = s.substr(1, close - 1);
    const bool ranks = std::all_of(inside.begin(), inside.end(),
                                   [](char c) { return (c >= '0' && c <= '9') || c == ','; });
    if (!ranks || inside.front() == ',') return 0;
    size_t i = close + 1;
    if (i < s.size() && s[i] == '<') {
      const size_t gt = s.find('>', i);
      if (gt == std::string_view::npos) return 0;
      i = gt + 1;
    }
    if (i < s.size() && s[i] == ':') return i + 1;
    if (inside.find(',') == std::string_view::npos && (i == s.size() || s[i] == ' ')) return i;
    return 0;
  }
  size_t i = 0;
  while (i < s.size() && s[i] == ' ')
    ++i;
  size_t j = i;
  while (j < s.size() && s[j] >= '0' && s[j] <= '9')
    ++j;
  if (j > i && j < s.size() && s[j] == ':') return j + 1;
  return 0;
}

size_t prefix_length(std::string_view line) {
  size_t total = 0;
  for (int k = 0; k < 3; ++k) {
    const size_t n = one_prefix(line.substr(total));
    if (n == 0) break;
    total += n;
  }
  return total;
}

/// Where the lines of a text are in their file: a log maps one to one; a dataset's
/// raw_table_verbatim block starts on the line after its '|' and is indented.
struct TextOrigin {
  std::shared_ptr<const std::string> file;
  std::string key;                  // InputError key: empty for a log, the YAML path for a block
  int first_line = 1;               // file line of the text's first line
  std::vector<int> column_offsets;  // per text line: columns before it in the file
  std::optional<SourceLocation> fixed;  // when lines cannot be mapped: every location is this

  SourceLocation at(size_t line_index, int column) const {
    if (fixed) return *fixed;
    const int offset = line_index < column_offsets.size() ? column_offsets[line_index] : 0;
    return SourceLocation{file, first_line + static_cast<int>(line_index), column + offset};
  }
};

std::string warning_at(const SourceLocation& where, const std::string& message) {
  return fmt::format("{}: warning: {}", where.to_string(), message);
}

// ---------------------------------------------------------------------------------------------
// Column layouts

enum class Field { Size, Count, Type, Redop, Root, Other, Time, Algbw, Busbw, Error };

struct Column {
  Field field;
  bool in_place = false;  // for the timed fields
  std::string name;
};

/// Which columns a row has: the key columns (size count type [redop] [root] ...) and one or two
/// timed groups (time algbw busbw error).
struct Layout {
  std::vector<Field> keys;
  std::vector<std::string> key_names;
  bool out_of_place = true;
  bool in_place = true;
  bool error_is_count = true;  // "#wrong" (new) rather than max relative error (old)
  bool from_header = false;

  size_t halves() const { return (out_of_place ? 1u : 0u) + (in_place ? 1u : 0u); }
  size_t fields() const { return keys.size() + 4 * halves(); }

  std::vector<Column> columns() const {
    std::vector<Column> out;
    for (size_t k = 0; k < keys.size(); ++k)
      out.push_back(Column{keys[k], false, key_names[k]});
    const std::string error = error_is_count ? "#wrong" : "error";
    for (int h = 0; h < 2; ++h) {
      const bool in = h == 1;
      if ((in && !in_place) || (!in && !out_of_place)) continue;
      out.push_back(Column{Field::Time, in, "time"});
      out.push_back(Column{Field::Algbw, in, "algbw"});
      out.push_back(Column{Field::Busbw, in, "busbw"});
      out.push_back(Column{Field::Error, in, error});
    }
    return out;
  }

  std::string describe() const {
    std::string names;
    for (const std::string& n : key_names)
      names += (names.empty() ? "" : " ") + n;
    const char* which = halves() == 2  ? "out of place and in place"
                        : out_of_place ? "out of place"
                                       : "in place";
    return fmt::format("{} fields ({}, then time algbw busbw {} {})", fields(), names,
                       error_is_count ? "#wrong" : "error", which);
  }
};

Field key_field(std::string_view name) {
  if (name == "size" || name == "bytes") return Field::Size;
  if (name == "count" || name == "N") return Field::Count;
  if (name == "type") return Field::Type;
  if (name == "redop" || name == "op") return Field::Redop;
  if (name == "root") return Field::Root;
  return Field::Other;
}

/// The layout of a headerless row from its field count: 3 to 5 key columns, then one or two
/// groups of four. 11-13 fields: both halves; 7-9: one. A fourth key column is the root when it
/// is a number (old broadcast/reduce), else the redop; a root column means the new #wrong layout.
std::optional<Layout> infer_layout(const std::vector<Token>& t) {
  const size_t n = t.size();
  if (n < 7 || n > 13 || n == 10) return std::nullopt;
  const size_t halves = n >= 11 ? 2 : 1;
  const size_t nkeys = n - 4 * halves;
  Layout l;
  l.keys = {Field::Size, Field::Count, Field::Type};
  l.key_names = {"size", "count", "type"};
  if (nkeys == 4) {
    const bool root = parse_int(t[3].text).has_value();
    l.keys.push_back(root ? Field::Root : Field::Redop);
    l.key_names.push_back(root ? "root" : "redop");
  } else if (nkeys == 5) {
    l.keys.insert(l.keys.end(), {Field::Redop, Field::Root});
    l.key_names.insert(l.key_names.end(), {"redop", "root"});
  }
  l.error_is_count = nkeys == 5;
  l.in_place = halves == 2;
  return l;
}

std::string half_name(bool in_place) {
  return in_place ? "in-place" : "out-of-place";
}

std::string expected_for(const Column& c, bool error_is_count) {
  const std::string half = half_name(c.in_place);
  switch (c.field) {
    case Field::Size:
      return "a whole number of bytes (size)";
    case Field::Count:
      return "a whole number of elements (count)";
    case Field::Type:
      return "a data type name such as float or bfloat16 (type)";
    case Field::Redop:
      return "a reduction operation such as sum, or none (redop)";
    case Field::Root:
      return "a root rank, or -1 for none (root)";
    case Field::Other:
      return fmt::format("a value ({})", c.name);
    case Field::Time:
      return fmt::format("a positive number ({} time in us)", half);
    case Field::Algbw:
      return fmt::format("a non-negative number ({} algbw in GB/s)", half);
    case Field::Busbw:
      return fmt::format("a non-negative number ({} busbw in GB/s)", half);
    case Field::Error:
      return error_is_count ? fmt::format("a count of wrong elements or N/A ({} #wrong)", half)
                            : fmt::format("a number or N/A ({} max error)", half);
  }
  return "a value";
}

/// Whether `s` is a possible value of field `f`. A measured time is positive and finite, a
/// bandwidth finite and not negative: nccl-tests prints nothing else, and a 0 or a NaN would make
/// the errors of the row meaningless without anyone noticing.
bool valid(Field f, std::string_view s) {
  switch (f) {
    case Field::Size:
    case Field::Count:
      return is_digits(s) && parse_int(s).has_value();
    case Field::Type:
    case Field::Redop:
      return is_identifier(s);
    case Field::Root:
      return parse_int(s).has_value();
    case Field::Other:
      return true;
    case Field::Time: {
      const std::optional<double> v = parse_double(s);
      return v && std::isfinite(*v) && *v > 0;
    }
    case Field::Algbw:
    case Field::Busbw: {
      const std::optional<double> v = parse_double(s);
      return v && std::isfinite(*v) && *v >= 0;
    }
    case Field::Error:
      return s == "N/A" || parse_double(s).has_value();
  }
  return false;
}

bool number_characters(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
  });
}

/// Whether `s` can be the start of a valid value, cut off by the end of the log.
bool valid_prefix(Field f, std::string_view s) {
  switch (f) {
    case Field::Size:
    case Field::Count:
      return is_digits(s);
    case Field::Type:
    case Field::Redop:
      return is_identifier(s);
    case Field::Root:
      return s == "-" || is_digits(s.starts_with('-') ? s.substr(1) : s);
    case Field::Other:
      return true;
    case Field::Time:
    case Field::Algbw:
    case Field::Busbw:
      // Never negative, NaN or infinite (see valid()).
      return !s.starts_with('-') && number_characters(s);
    case Field::Error:
      return std::string_view("N/A").starts_with(s) || std::string_view("inf").starts_with(s) ||
             std::string_view("nan").starts_with(s) || number_characters(s);
  }
  return false;
}

/// Whether the tokens from `from` on carry a failure message: a run that dies mid-row leaves the
/// row unfinished and the launcher or NCCL writes its complaint on the same line.
bool failure_message(const std::vector<Token>& t, size_t from) {
  static constexpr std::string_view kMarkers[] = {
      "NCCL",  "failure", "failed", "error",        "Error",      "ERROR",  "WARN",
      "abort", "Abort",   "Killed", "Segmentation", "Terminated", "exited", "signal"};
  for (size_t k = from; k < t.size(); ++k) {
    for (const std::string_view m : kMarkers) {
      if (t[k].text.find(m) != std::string_view::npos) return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// The parser

struct RankInfo {
  std::string host;
  std::string device;
};

/// What the header lines before a table say about it.
struct Context {
  std::string test;
  std::string nccl_version;
  int nranks_mentioned = 0;
  int nodes_mentioned = 0;
  std::map<int64_t, RankInfo> ranks;
  NcclTestsRunParameters params;
  std::optional<Layout> layout;  // from a column header
  std::map<std::string, std::string> metadata;
  std::map<std::string, SourceLocation> metadata_where;
  SourceLocation where;
};

/// Facts from lines that may sit anywhere (NCCL INFO lines, the launch command): they go to the
/// next table that starts.
struct Mentions {
  std::string test;
  std::string nccl_version;
  int nranks = 0;
  int nodes = 0;
  /// "NCCL_ALGO set by environment to Ring.": the run's NCCL settings, where NCCL printed them.
  std::map<std::string, std::pair<std::string, SourceLocation>> env;
};

struct Line {
  std::string_view text;  // as printed, without the line break
  size_t content = 0;     // where the text after the launcher prefix starts
  std::vector<Token> tokens;
};

class Parser {
 public:
  Parser(const TextOrigin& origin, NcclTestsLog& log) : origin_(origin), log_(log) {}

  void run(std::string_view text) {
    std::vector<Line> lines;
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      std::string_view l = text.substr(start, end - start);
      if (l.ends_with('\r')) l.remove_suffix(1);
      Line line;
      line.text = l;
      line.content = prefix_length(l);
      line.tokens = tokenize(l, line.content);
      lines.push_back(std::move(line));
      start = end + 1;
    }
    size_t last_nonblank = 0;
    for (size_t i = 0; i < lines.size(); ++i)
      if (!lines[i].tokens.empty()) last_nonblank = i;

    for (size_t i = 0; i < lines.size(); ++i) {
      const Line& line = lines[i];
      if (line.tokens.empty()) continue;
      const std::vector<Token>& t = line.tokens;
      if (t[0].text.starts_with('#')) {
        header_line(i, line);
      } else if ((t.size() >= 2 && is_digits(t[0].text) && is_digits(t[1].text)) ||
                 row_with_bad_numbers(t)) {
        row_line(i, line);
      } else if (t.size() == 1 && is_digits(t[0].text) && i == last_nonblank) {
        cut_after_size(i, line);
      } else {
        mentions(i, line.tokens);
      }
    }
    if (cut_) truncate();
    const bool rowless_header = pending_fresh_ && pending_.layout;
    if (std::all_of(log_.tables.begin(), log_.tables.end(),
                    [](const NcclTestsTable& t) { return t.rows.empty(); })) {
      no_rows(lines, rowless_header);
    }
    if (rowless_header) {
      log_.warnings.push_back(warning_at(pending_.where,
                                         "a table header with no result rows after it (the run "
                                         "printed no results)"));
    }
  }

 private:
  /// Not one complete row: an empty or failed run, or not a log at all. Reading it as an empty
  /// measurement would let `validate` write results that compare nothing.
  [[noreturn]] void no_rows(const std::vector<Line>& lines, bool rowless_header) const {
    const auto text_lines =
        std::count_if(lines.begin(), lines.end(), [](const Line& l) { return !l.tokens.empty(); });
    SourceLocation where = origin_.at(0, 1);
    std::string found;
    if (rowless_header) {
      where = pending_.where;
      found = "a table header and no result rows after it (the run printed no results)";
    } else if (!log_.tables.empty()) {
      where = origin_.at(cut_line_, 1);
      found = "only a row cut off by the end of the log";
    } else if (text_lines == 0) {
      found = "no text";
    } else {
      found = fmt::format("{} line{} of text, none of them a result row", text_lines,
                          text_lines == 1 ? "" : "s");
    }
    throw InputError(where, origin_.key,
                     "the printed rows of an nccl-tests table (size count type ... then time "
                     "algbw busbw per half)",
                     found);
  }

  // -- context ---------------------------------------------------------------------------------

  /// The context header lines write to: a fresh one once a table has started.
  Context& header(size_t i) {
    if (!pending_fresh_) {
      pending_ = Context{};
      pending_.where = origin_.at(i, 1);
      pending_fresh_ = true;
    }
    return pending_;
  }

  void header_line(size_t i, const Line& line) {
    // Tokens after the '#': "#  Rank  0" and "#Rank 0" alike.
    const std::string_view text = line.text;
    const size_t hash = text.find('#', line.content);
    const std::vector<Token> t = tokenize(text, hash + 1);
    if (t.empty()) return;
    const auto is = [&](size_t k, std::string_view s) { return k < t.size() && t[k].text == s; };

    if (is(0, "nThread")) {
      run_parameters(i, t, header(i).params);
    } else if (is(0, "Using") && is(1, "devices")) {
      header(i);
    } else if (is(0, "Rank") && t.size() >= 2 && parse_int(t[1].text)) {
      rank_line(i, text, t);
    } else if (is(0, "size") || is(0, "bytes")) {
      column_names(i, t);
    } else if (std::any_of(t.begin(), t.end(), [](const Token& x) {
                 return x.text == "out-of-place" || x.text == "in-place";
               })) {
      header(i);
      title_line_ = i;
      title_out_ =
          std::any_of(t.begin(), t.end(), [](const Token& x) { return x.text == "out-of-place"; });
      title_in_ =
          std::any_of(t.begin(), t.end(), [](const Token& x) { return x.text == "in-place"; });
    } else if (is(0, "Collective") && is(1, "test") && is(2, "concluded:")) {
      // Names the run that just ended, not the next one.
    } else if (is(0, "Collective") && is(1, "test") && is(2, "starting:") && t.size() >= 4) {
      const std::string c = collective_of_binary(t[3].text);
      header(i).test = c.empty() ? std::string(t[3].text) : nccl_tests_binary(c);
    } else if ((is(0, "nccl-tests") || is(0, "rccl-tests")) && is(1, "version") && t.size() >= 3) {
      header(i).metadata["nccl_tests_version"] = std::string(t[2].text);
    } else if (is(0, "Reducing") && is(1, "maxBytes") && is(2, "to") && t.size() >= 4) {
      if (const auto v = parse_int(t[3].text)) header(i).params.max_bytes = *v;
    } else if (is(0, "Out") && is(1, "of") && is(2, "bounds")) {
      footer(i, t, "Out of bounds values", [](NcclTestsTable& table, std::string_view v) {
        const auto n = parse_int(v);
        if (n) table.out_of_bounds = *n;
        return n.has_value();
      });
    } else if (is(0, "Avg") && is(1, "bus") && is(2, "bandwidth")) {
      footer(i, t, "Avg bus bandwidth", [](NcclTestsTable& table, std::string_view v) {
        const auto x = parse_double(v);
        if (x) table.avg_busbw = *x;
        return x.has_value();
      });
    } else {
      mentions(i, t);
    }
  }

  /// "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters:
  /// 20 agg iters: 1 validation: 1 graph: 0"
  void run_parameters(size_t i, const std::vector<Token>& t, NcclTestsRunParameters& p) {
    std::vector<std::string> bad;
    const auto next_int = [&](size_t k) -> std::optional<int64_t> {
      if (k + 1 >= t.size()) return std::nullopt;
      auto v = parse_int(t[k + 1].text);
      if (!v) bad.push_back(fmt::format("'{}' after '{}'", t[k + 1].text, t[k].text));
      return v;
    };
    const auto small = [](std::optional<int64_t> v) -> std::optional<int> {
      if (!v || *v < 0 || *v > 2147483647) return std::nullopt;
      return static_cast<int>(*v);
    };
    for (size_t k = 0; k < t.size(); ++k) {
      const std::string_view w = t[k].text;
      if (w == "nThread") {
        p.threads = small(next_int(k));
      } else if (w == "nGpus") {
        p.gpus_per_thread = small(next_int(k));
      } else if (w == "minBytes") {
        p.min_bytes = next_int(k);
      } else if (w == "maxBytes") {
        p.max_bytes = next_int(k);
      } else if (w == "step:" && k + 1 < t.size()) {
        const std::string_view s = t[k + 1].text;
        const size_t paren = s.find('(');
        const std::string_view number = s.substr(0, paren);
        if (s.ends_with("(factor)") && parse_double(number)) {
          p.step_factor = parse_double(number);
        } else if (s.ends_with("(bytes)") && parse_int(number)) {
          p.step_bytes = parse_int(number);
        } else {
          bad.push_back(fmt::format("'{}' after 'step:'", s));
        }
      } else if (w == "iters:") {
        const std::string_view before = k > 0 ? t[k - 1].text : std::string_view();
        const std::optional<int> v = small(next_int(k));
        if (before == "warmup") {
          p.warmup_iters = v;
        } else if (before == "agg") {
          p.agg_iters = v;
        } else {
          p.iters = v;
        }
      }
    }
    if (!bad.empty()) {
      std::string what;
      for (const std::string& b : bad)
        what += (what.empty() ? "" : ", ") + b;
      log_.warnings.push_back(
          warning_at(origin_.at(i, 1), "run parameters line not fully understood: " + what));
    }
  }

  /// "#  Rank  0 Group  0 Pid  12345 on   node1 device  0 [0x1b] NVIDIA H100 80GB HBM3"
  /// (rccl-tests and older nccl-tests: no Group).
  void rank_line(size_t i, std::string_view text, const std::vector<Token>& t) {
    size_t on = 0, device = 0;
    for (size_t k = 2; k < t.size(); ++k) {
      if (t[k].text == "on" && on == 0) on = k;
      if (t[k].text == "device" && on != 0 && device == 0) device = k;
    }
    if (on == 0 || on + 1 >= t.size() || device == 0 || device + 1 >= t.size()) {
      mentions(i, t);
      return;
    }
    RankInfo r;
    r.host = std::string(t[on + 1].text);
    size_t name = device + 2;  // after the device number
    if (name < t.size() && t[name].text.starts_with('[')) ++name;
    if (name < t.size()) {
      std::string_view rest = text.substr(static_cast<size_t>(t[name].column - 1));
      while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t'))
        rest.remove_suffix(1);
      r.device = std::string(rest);
    }
    header(i).ranks[*parse_int(t[1].text)] = std::move(r);
  }

  void column_names(size_t i, const std::vector<Token>& t) {
    if (t.size() < 2 || !(t[1].text == "count" || t[1].text == "N")) {
      mentions(i, t);
      return;
    }
    Context& c = header(i);
    Layout l;
    l.from_header = true;
    size_t k = 0;
    for (; k < t.size() && t[k].text != "time" && t[k].text != "cputime"; ++k) {
      l.keys.push_back(key_field(t[k].text));
      l.key_names.emplace_back(t[k].text);
    }
    int groups = 0;
    bool error_is_count = true;
    while (k + 4 <= t.size() && (t[k].text == "time" || t[k].text == "cputime") &&
           t[k + 1].text == "algbw" && t[k + 2].text == "busbw") {
      const std::string_view e = t[k + 3].text;
      error_is_count = e == "#wrong" || e == "wrong";
      ++groups;
      k += 4;
    }
    if (k != t.size() || groups == 0 || groups > 2) {
      log_.warnings.push_back(warning_at(
          origin_.at(i, t[0].column),
          "column header not understood; the layout is taken from the rows that follow"));
      c.layout.reset();
      return;
    }
    l.error_is_count = error_is_count;
    if (groups == 1) {
      // One timed group: the title line above says which ("in-place" alone, else out-of-place).
      const bool in_only = title_line_ && *title_line_ + 2 >= i && title_in_ && !title_out_;
      l.in_place = in_only;
      l.out_of_place = !in_only;
    }
    c.layout = l;
  }

  template <typename Set>
  void footer(size_t i, const std::vector<Token>& t, std::string_view what, Set set) {
    size_t colon = 0;
    while (colon < t.size() && t[colon].text != ":")
      ++colon;
    const SourceLocation where = origin_.at(i, t[0].column);
    // The footer is printed when a run completes, so a short row before it was not cut off by
    // the end of the run: it is malformed.
    if (cut_) throw *cut_;
    if (colon + 1 >= t.size()) {
      log_.warnings.push_back(warning_at(where, fmt::format("'{}' without a value", what)));
      return;
    }
    if (log_.tables.empty() || pending_fresh_) {
      log_.warnings.push_back(
          warning_at(where, fmt::format("'{}' with no table before it; ignored", what)));
      return;
    }
    if (!set(log_.tables.back(), t[colon + 1].text)) {
      log_.warnings.push_back(warning_at(
          where, fmt::format("'{}' value '{}' is not a number", what, t[colon + 1].text)));
    }
    // The footer ends the run: the next row starts a new table even if its size is larger.
    closed_ = true;
  }

  /// Facts a line may mention anywhere: "NCCL version 2.18.3+cuda12.2", "nranks 16",
  /// "nNodes 2", a benchmark binary "all_reduce_perf", and the settings NCCL's INFO lines
  /// report, "NCCL_IB_QPS_PER_CONNECTION set by environment to 4." (NCCL_DEBUG=INFO).
  void mentions(size_t i, const std::vector<Token>& t) {
    for (size_t k = 0; k < t.size(); ++k) {
      const std::string_view w = t[k].text;
      if ((w.starts_with("NCCL_") || w.starts_with("RCCL_")) && k + 5 < t.size() &&
          t[k + 1].text == "set" && t[k + 2].text == "by" && t[k + 3].text == "environment" &&
          t[k + 4].text == "to") {
        std::string_view value = t[k + 5].text;
        if (value.ends_with('.')) value.remove_suffix(1);
        mentioned_.env[std::string(w)] = {std::string(value), origin_.at(i, t[k + 5].column)};
        continue;
      }
      if (w == "version" && k > 0 && k + 1 < t.size() &&
          (t[k - 1].text == "NCCL" || t[k - 1].text == "RCCL")) {
        mentioned_.nccl_version = std::string(t[k + 1].text);
        continue;
      }
      const std::string lw = lower(w);
      mention_count(t, k, lw, "nranks", mentioned_.nranks);
      mention_count(t, k, lw, "nnodes", mentioned_.nodes);
      if (const std::string c = collective_of_binary(w); !c.empty()) {
        mentioned_.test = nccl_tests_binary(c);
      }
    }
  }

  /// "nranks 16", "nRanks 16", "nranks=16", "nranks:16" (`lw` is t[k] in lower case).
  static void mention_count(const std::vector<Token>& t, size_t k, std::string_view lw,
                            std::string_view name, int& target) {
    if (!lw.starts_with(name)) return;
    std::string_view value;
    if (lw.size() == name.size() && k + 1 < t.size()) {
      value = t[k + 1].text;
    } else if (lw.size() > name.size() + 1 && (lw[name.size()] == '=' || lw[name.size()] == ':')) {
      value = t[k].text.substr(name.size() + 1);
    }
    const auto v = parse_int(value);
    if (v && *v > 0 && *v < 10000000) target = static_cast<int>(*v);
  }

  // -- rows ------------------------------------------------------------------------------------

  struct Parsed {
    std::optional<NcclTestsRow> row;
    std::optional<InputError> cut;  // the row may be cut off by the end of the log
  };

  void row_line(size_t i, const Line& line) {
    if (cut_) {
      // A cut row followed by more rows of the same run is malformed; one followed by a new
      // header is the end of a killed run.
      if (!pending_fresh_) throw *cut_;
      truncate();
    }
    const bool starts_new = !table_open_ || pending_fresh_ || closed_;
    std::optional<Layout> layout;
    bool force_new = false;
    if (pending_fresh_) {
      layout = pending_.layout;
    } else if (table_open_) {
      layout = table_layout_;
    }
    if (!layout) {
      layout = infer_layout(line.tokens);
    } else if (!layout->from_header && line.tokens.size() > layout->fields()) {
      // A headerless log whose rows grow: another run. (A shorter row may be a cut-off one and
      // is checked against the current layout.)
      if (std::optional<Layout> other = infer_layout(line.tokens)) {
        layout = std::move(other);
        force_new = true;
      }
    }
    if (!layout) {
      const Token& last = line.tokens.back();
      InputError e(
          origin_.at(i, last.column + static_cast<int>(last.text.size())), origin_.key,
          "a row of 11 to 13 fields (size count type [redop] [root], then time algbw "
          "busbw error out of place and in place) or 7 to 9 when one half is printed",
          fmt::format("{} field{}", line.tokens.size(), line.tokens.size() == 1 ? "" : "s"));
      if (line.tokens.size() > 13) throw e;
      if (starts_new) open_table(i, Layout{});
      cut_ = e;
      cut_line_ = i;
      cut_fields_ = line.tokens.size();
      return;
    }

    Parsed p = parse_row(i, line, *layout);
    if (!p.row) {
      if (starts_new || force_new) open_table(i, *layout);
      cut_ = std::move(p.cut);
      cut_line_ = i;
      cut_fields_ = line.tokens.size();
      return;
    }
    const NcclTestsRow& row = *p.row;
    bool new_table = starts_new || force_new || log_.tables.back().rows.empty();
    if (!new_table) {
      const NcclTestsRow& prev = log_.tables.back().rows.back();
      new_table = row.size_bytes < prev.size_bytes || row.type != prev.type ||
                  row.redop != prev.redop || row.root != prev.root;
    }
    if (new_table) open_table(i, *layout);
    log_.tables.back().rows.push_back(row);
  }

  Parsed parse_row(size_t i, const Line& line, const Layout& layout) {
    const std::vector<Column> cols = layout.columns();
    const std::vector<Token>& t = line.tokens;
    const size_t n = t.size();
    // A size of 0 is a call NCCL returns from at once (no elements): a host fast enough times
    // it at 0.00 us.
    bool noop = false;
    for (size_t k = 0; k < std::min(n, cols.size()); ++k) {
      if (cols[k].field == Field::Size) noop = parse_int(t[k].text) == 0;
    }
    for (size_t k = 0; k < std::min(n, cols.size()); ++k) {
      if (valid(cols[k].field, t[k].text)) continue;
      if (noop && cols[k].field == Field::Time && parse_double(t[k].text) == 0.0) continue;
      InputError e(origin_.at(i, t[k].column), origin_.key,
                   expected_for(cols[k], layout.error_is_count), fmt::format("'{}'", t[k].text));
      if ((k + 1 == n && valid_prefix(cols[k].field, t[k].text)) || failure_message(t, k))
        return Parsed{std::nullopt, e};
      throw e;
    }
    if (n > cols.size()) {
      throw InputError(
          origin_.at(i, t[cols.size()].column), origin_.key, layout.describe(),
          fmt::format("{} fields; the first extra one is '{}'", n, t[cols.size()].text));
    }
    if (n < cols.size()) {
      const Column& missing = cols[n];
      const std::string what =
          missing.field >= Field::Time
              ? fmt::format("the {} {}", half_name(missing.in_place), missing.name)
              : fmt::format("the {}", missing.name);
      return Parsed{
          std::nullopt,
          InputError(origin_.at(i, t.back().column + static_cast<int>(t.back().text.size())),
                     origin_.key, layout.describe(),
                     fmt::format("{} fields: the row ends before {}", n, what))};
    }

    NcclTestsRow row;
    row.where = origin_.at(i, 1);
    row.has_out_of_place = layout.out_of_place;
    row.has_in_place = layout.in_place;
    int size_column = 1;
    for (size_t k = 0; k < n; ++k) {
      const std::string_view s = t[k].text;
      const bool in = cols[k].in_place;
      switch (cols[k].field) {
        case Field::Size:
          row.size_bytes = *parse_int(s);
          size_column = t[k].column;
          break;
        case Field::Count:
          row.count = *parse_int(s);
          break;
        case Field::Type:
          row.type = std::string(s);
          break;
        case Field::Redop:
          row.redop = std::string(s);
          break;
        case Field::Root:
          row.root = *parse_int(s);
          break;
        case Field::Other:
          break;
        case Field::Time:
          (in ? row.time_us_in : row.time_us_out) = *parse_double(s);
          break;
        case Field::Algbw:
          (in ? row.algbw_in : row.algbw_out) = *parse_double(s);
          break;
        case Field::Busbw:
          (in ? row.busbw_in : row.busbw_out) = *parse_double(s);
          break;
        case Field::Error:
          (in ? row.wrong_in : row.wrong_out) = std::string(s);
          break;
      }
    }
    // nccl-tests prints size = count x type size (x ranks for the gathers and scatters): a size of
    // 0 is the no-op it runs when the count per rank rounds down to 0, never one of some elements
    // (which would also start a new table, the size going down).
    if (row.size_bytes == 0 && row.count != 0) {
      throw InputError(origin_.at(i, size_column), origin_.key,
                       fmt::format("a positive size for a count of {} elements (size = count x "
                                   "type size)",
                                   row.count),
                       "'0'");
    }
    return Parsed{row, std::nullopt};
  }

  /// The last line of the log is a lone number larger than the size before it: a row cut right
  /// after its size.
  void cut_after_size(size_t i, const Line& line) {
    const auto size = parse_int(line.tokens[0].text);
    if (!table_open_ || pending_fresh_ || closed_ || log_.tables.back().rows.empty() || !size ||
        *size <= log_.tables.back().rows.back().size_bytes) {
      mentions(i, line.tokens);
      return;
    }
    cut_ = InputError(origin_.at(i, 1), origin_.key, "a complete row", "only the size");
    cut_line_ = i;
    cut_fields_ = 1;
  }

  /// The row in `cut_` was cut off by the end of the run: drop it, mark its table.
  void truncate() {
    NcclTestsTable& table = log_.tables.back();
    table.truncated = true;
    log_.warnings.push_back(warning_at(
        origin_.at(cut_line_, 1),
        fmt::format("the last row is cut off ({} field{} printed); it is left out and the table "
                    "({} complete row{}) is marked truncated",
                    cut_fields_, cut_fields_ == 1 ? "" : "s", table.rows.size(),
                    table.rows.size() == 1 ? "" : "s")));
    cut_.reset();
  }

  void open_table(size_t i, const Layout& layout) {
    Context c = pending_;
    // Mentions are newer than an inherited context but lose to a header printed for this run.
    const bool inherited = !pending_fresh_;
    if (!mentioned_.test.empty() && (inherited || c.test.empty())) c.test = mentioned_.test;
    if (!mentioned_.nccl_version.empty() && (inherited || c.nccl_version.empty()))
      c.nccl_version = mentioned_.nccl_version;
    if (mentioned_.nranks > 0 && (inherited || c.nranks_mentioned == 0))
      c.nranks_mentioned = mentioned_.nranks;
    if (mentioned_.nodes > 0 && (inherited || c.nodes_mentioned == 0))
      c.nodes_mentioned = mentioned_.nodes;
    for (const auto& [name, value] : mentioned_.env) {
      c.metadata["env." + name] = value.first;
      c.metadata_where["env." + name] = value.second;
    }
    mentioned_ = Mentions{};

    NcclTestsTable t;
    t.test = c.test;
    t.collective = normalise_collective(c.test);
    if (!c.ranks.empty()) {
      t.nranks = static_cast<int>(c.ranks.size());
      std::set<std::string> hosts;
      for (const auto& [rank, info] : c.ranks) {
        hosts.insert(info.host);
        t.devices.push_back(info.device);
      }
      t.nodes = static_cast<int>(hosts.size());
    } else {
      t.nranks = c.nranks_mentioned;
      t.nodes = c.nodes_mentioned;
    }
    t.nccl_version = c.nccl_version;
    t.params = c.params;
    t.metadata = c.metadata;
    t.metadata_where = c.metadata_where;
    t.old_layout = !layout.error_is_count;
    t.where = pending_fresh_ ? c.where : origin_.at(i, 1);
    log_.tables.push_back(std::move(t));

    c.where = SourceLocation{};
    pending_ = std::move(c);
    pending_fresh_ = false;
    table_open_ = true;
    table_layout_ = layout;
    closed_ = false;
  }

  const TextOrigin& origin_;
  NcclTestsLog& log_;
  Context pending_;             // context for the next table
  bool pending_fresh_ = false;  // header lines seen since the last table started
  Mentions mentioned_;
  bool table_open_ = false;  // log_.tables.back() takes the next rows
  bool closed_ = false;      // a footer followed the open table
  Layout table_layout_;
  std::optional<size_t> title_line_;
  bool title_out_ = false;
  bool title_in_ = false;
  std::optional<InputError> cut_;  // a row that is malformed unless the run ended there
  size_t cut_line_ = 0;
  size_t cut_fields_ = 0;
};

/// Without a benchmark name, busbw/algbw tells AllReduce (2(n-1)/n > 1 for n > 2) and
/// ReduceScatter ((n-1)/n < 1 with a reduction) apart from the rest; others stay unknown.
void infer_collective(NcclTestsTable& t, std::vector<std::string>& warnings) {
  // A benchmark the log names but rocesim does not know stays unknown (validate reports it): a
  // ratio is a guess, the name a fact.
  if (!t.collective.empty() || !t.test.empty() || t.rows.empty()) return;
  std::vector<double> ratios;
  bool reducing = true, has_redop = false;
  for (const NcclTestsRow& r : t.rows) {
    if (!r.redop.empty()) has_redop = true;
    if (r.redop == "none") reducing = false;
    // algbw >= 1 GB/s keeps the rounding of the printed values (0.005) under 0.5%.
    if (r.has_out_of_place && r.algbw_out >= 1.0) ratios.push_back(r.busbw_out / r.algbw_out);
    if (r.has_in_place && r.algbw_in >= 1.0) ratios.push_back(r.busbw_in / r.algbw_in);
  }
  if (ratios.empty() || !reducing) return;
  std::sort(ratios.begin(), ratios.end());
  const double m = ratios[ratios.size() / 2];
  double ranks = 0;
  if (m > 1.1 && m < 2.0) {
    t.collective = "allreduce";
    ranks = 2.0 / (2.0 - m);
  } else if (has_redop && m >= 0.45 && m < 0.99) {
    t.collective = "reducescatter";
    ranks = 1.0 / (1.0 - m);
  } else {
    return;
  }
  t.test = nccl_tests_binary(t.collective);
  warnings.push_back(warning_at(
      t.where, fmt::format("the log names no benchmark; the table is taken for {} ({}) from "
                           "busbw/algbw = {:.3f}, which implies {:.0f} ranks",
                           t.collective, t.test, m, ranks)));
}

NcclTestsLog parse_text(std::string_view text, const TextOrigin& origin,
                        const std::string& source) {
  NcclTestsLog log;
  log.source = source;
  Parser(origin, log).run(text);
  return log;
}

// ---------------------------------------------------------------------------------------------
// Files and datasets

/// Why a file cannot be read, for "found ..." in messages.
std::string unreadable_file(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) return fmt::format("'{}', which does not exist", path);
  if (std::filesystem::is_directory(st)) return fmt::format("'{}', which is a directory", path);
  return fmt::format("'{}', which cannot be opened for reading", path);
}

std::optional<std::string> read_text_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(start, end - start);
    if (l.ends_with('\r')) l.remove_suffix(1);
    out.emplace_back(l);
    start = end + 1;
  }
  return out;
}

/// Maps the lines of a literal block scalar ("key: |" then indented lines) back to the file:
/// yaml-cpp marks the '|', and each line of the value is one line of the file, indented.
TextOrigin block_origin(const ConfigNode& node, const std::vector<std::string>& file_lines) {
  TextOrigin o;
  o.file = node.where().file;
  o.key = node.path();
  const int line = node.where().line, column = node.where().column;
  const bool literal =
      line >= 1 && static_cast<size_t>(line) <= file_lines.size() && column >= 1 &&
      static_cast<size_t>(column) <= file_lines[static_cast<size_t>(line - 1)].size() &&
      file_lines[static_cast<size_t>(line - 1)][static_cast<size_t>(column - 1)] == '|';
  if (!literal) {
    o.fixed = node.where();
    return o;
  }
  o.first_line = line + 1;
  const std::vector<std::string> text_lines = split_lines(node.value());
  for (size_t k = 0; k < text_lines.size(); ++k) {
    const size_t f = static_cast<size_t>(line) + k;  // 0-based index of file line line+1+k
    int offset = 0;
    if (f < file_lines.size() && !text_lines[k].empty() && file_lines[f].ends_with(text_lines[k]))
      offset = static_cast<int>(file_lines[f].size() - text_lines[k].size());
    o.column_offsets.push_back(offset);
  }
  return o;
}

/// A value from the table entry, else from the top level of the file; nullptr if neither has it.
const ConfigNode* lookup(const ConfigNode& table, const ConfigNode& root, std::string_view key) {
  if (const ConfigNode* n = table.find(key)) return n;
  return root.find(key);
}

std::optional<std::string> scalar_text(const ConfigNode* n) {
  if (n == nullptr || n->is_null()) return std::nullopt;
  if (!n->is_scalar()) throw InputError(n->where(), n->path(), "a single value", n->describe());
  return n->value();
}

/// A whole number >= `least`; nothing when absent or null.
std::optional<int> whole_number(const ConfigNode* n, std::string_view what, int least = 1) {
  const std::optional<std::string> s = scalar_text(n);
  if (!s) return std::nullopt;
  const auto v = parse_int(*s);
  if (!v || *v < least || *v > 2147483647) {
    throw InputError(
        n->where(), n->path(),
        fmt::format("a {} whole number ({})", least > 0 ? "positive" : "non-negative", what),
        n->describe());
  }
  return static_cast<int>(*v);
}

std::string collective_list() {
  std::string out;
  for (const CollectiveName& c : kCollectives)
    out += (out.empty() ? "" : ", ") + std::string(c.canonical);
  return out;
}

/// Adds the variables of an environment mapping to `t.metadata` ("env.NAME"); a null value
/// removes the variable (a table unsetting one of the common ones). Sources often describe the
/// environment in words ("env: NCCL_ALGO=Ring set by the launcher"); that text says nothing
/// rocesim can apply, so it is ignored with a warning rather than stopping the validation.
void add_environment(NcclTestsTable& t, const ConfigNode* env, const std::string& table,
                     std::vector<std::string>& warnings) {
  if (env == nullptr || env->is_null()) return;
  if (env->is_scalar()) {
    warnings.push_back(
        warning_at(env->where(), fmt::format("table {}: '{}' is text, not a mapping of environment "
                                             "variables to values; it is ignored (found {})",
                                             table, env->path(), env->describe())));
    return;
  }
  if (!env->is_map())
    throw InputError(env->where(), env->path(), "a mapping of environment variables to values",
                     env->describe());
  for (const ConfigNode::Entry& e : env->entries()) {
    if (const auto v = scalar_text(&e.value)) {
      t.metadata["env." + e.key] = *v;
      t.metadata_where["env." + e.key] = e.value.where();
    } else {
      t.metadata.erase("env." + e.key);
      t.metadata_where.erase("env." + e.key);
    }
  }
}

void apply_dataset_metadata(NcclTestsTable& t, const ConfigNode& entry, const ConfigNode& root,
                            std::vector<std::string>& warnings) {
  for (const std::string_view key :
       {"name", "binary", "collective", "total_ranks", "nodes", "gpus_per_node", "nccl_version",
        "gpu", "nic_speed_gbps", "nics_per_node", "fabric", "in_network_reduction", "datatype",
        "redop", "command"}) {
    const ConfigNode* n = lookup(entry, root, key);
    if (const auto v = scalar_text(n)) {
      t.metadata[std::string(key)] = *v;
      t.metadata_where[std::string(key)] = n->where();
    }
  }
  // The file's common_env, then the table's own env (else the file's env) over it, key by key.
  const auto name = t.metadata.find("name");
  const std::string table = name != t.metadata.end() ? "'" + name->second + "'" : entry.path();
  add_environment(t, root.find("common_env"), table, warnings);
  add_environment(t, lookup(entry, root, "env"), table, warnings);

  // What the dataset states wins over what the printed lines suggest.
  if (const auto binary = scalar_text(lookup(entry, root, "binary"))) {
    const std::string from_binary = collective_of_binary(*binary);
    t.test = from_binary.empty() ? *binary : nccl_tests_binary(from_binary);
    t.collective = from_binary;
  }
  if (const ConfigNode* c = lookup(entry, root, "collective")) {
    if (const auto text = scalar_text(c)) {
      const std::string canonical = normalise_collective(*text);
      if (canonical.empty())
        throw InputError(c->where(), c->path(), "one of " + collective_list(), c->describe());
      if (canonical != t.collective) t.test = nccl_tests_binary(canonical);
      t.collective = canonical;
    }
  }

  const auto ranks_from_log = t.nranks;
  if (const auto n = whole_number(lookup(entry, root, "total_ranks"), "ranks")) {
    if (ranks_from_log > 0 && ranks_from_log != *n) {
      warnings.push_back(
          warning_at(lookup(entry, root, "total_ranks")->where(),
                     fmt::format("total_ranks is {} but the printed rank lines list {}; using {}",
                                 *n, ranks_from_log, *n)));
    }
    t.nranks = *n;
  }
  const std::optional<int> nodes = whole_number(lookup(entry, root, "nodes"), "nodes");
  if (nodes) t.nodes = *nodes;
  if (t.nranks == 0 && nodes) {
    // No rank count stated or printed: servers x GPUs per server, when the dataset gives both.
    const ConfigNode* per = lookup(entry, root, "gpus_per_node");
    if (const auto gpus = whole_number(per, "GPUs per server")) {
      const int64_t ranks = int64_t{*nodes} * *gpus;
      if (ranks > std::numeric_limits<int>::max())
        throw InputError(per->where(), per->path(),
                         "nodes x gpus_per_node ranks that fit in an int",
                         fmt::format("{} x {}", *nodes, *gpus));
      t.nranks = static_cast<int>(ranks);
    }
  }
  if (const auto v = scalar_text(lookup(entry, root, "nccl_version"))) t.nccl_version = *v;
  if (const ConfigNode* iters = lookup(entry, root, "iters");
      iters != nullptr && !iters->is_null()) {
    if (!iters->is_map())
      throw InputError(iters->where(), iters->path(), "a mapping {warmup: N, iters: N}",
                       iters->describe());
    if (const auto w = whole_number(iters->find("warmup"), "warmup iterations", 0))
      t.params.warmup_iters = *w;
    if (const auto n = whole_number(iters->find("iters"), "timed iterations")) t.params.iters = *n;
  }
}

}  // namespace

std::string normalise_collective(std::string_view name) {
  if (const size_t slash = name.rfind('/'); slash != std::string_view::npos)
    name.remove_prefix(slash + 1);
  std::string s = lower(name);
  if (s.ends_with("_mpi")) s.resize(s.size() - 4);
  if (s.ends_with("_perf")) s.resize(s.size() - 5);
  std::erase_if(s, [](char c) { return c == '_' || c == '-' || c == ' '; });
  for (const CollectiveName& c : kCollectives) {
    if (s == c.canonical) return std::string(c.canonical);
  }
  return "";
}

std::string nccl_tests_binary(std::string_view collective) {
  for (const CollectiveName& c : kCollectives) {
    if (collective == c.canonical) return std::string(c.binary);
  }
  return "";
}

NcclTestsLog read_nccl_tests_log(std::string_view text, const std::string& source_name) {
  TextOrigin origin;
  origin.file = std::make_shared<const std::string>(source_name);
  NcclTestsLog log = parse_text(text, origin, source_name);
  for (NcclTestsTable& t : log.tables)
    infer_collective(t, log.warnings);
  return log;
}

NcclTestsLog read_nccl_tests_file(const std::string& path) {
  const std::optional<std::string> text = read_text_file(path);
  if (!text) {
    throw InputError(SourceLocation{std::make_shared<const std::string>(path), 0, 0}, "",
                     "a readable nccl-tests log file", unreadable_file(path));
  }
  return read_nccl_tests_log(*text, path);
}

NcclTestsLog read_measured_dataset(const std::string& path) {
  const ConfigNode root = scenario::load_yaml_file(path, "");
  const std::optional<std::string> file_text = read_text_file(path);
  const std::vector<std::string> file_lines =
      file_text ? split_lines(*file_text) : std::vector<std::string>{};
  if (!root.is_map())
    throw InputError(root.where(), root.path(), "a mapping with a 'tables' list", root.describe());
  const ConfigNode* tables = root.find("tables");
  if (tables == nullptr || !tables->is_sequence() || tables->items().empty()) {
    throw InputError(tables != nullptr ? tables->where() : root.where(), "tables",
                     "a list of measured tables",
                     tables != nullptr ? tables->describe() : "no 'tables' key");
  }

  NcclTestsLog log;
  log.source = path;
  for (const ConfigNode& entry : tables->items()) {
    if (!entry.is_map())
      throw InputError(entry.where(), entry.path(), "a mapping describing one table",
                       entry.describe());
    const ConfigNode* raw = entry.find("raw_table_verbatim");
    if (raw == nullptr || !raw->is_scalar()) {
      throw InputError(raw != nullptr ? raw->where() : entry.named_at(),
                       config_path(entry.path(), "raw_table_verbatim"),
                       "the printed lines of the table as a block of text",
                       raw != nullptr ? raw->describe() : "no such key");
    }
    const TextOrigin origin = block_origin(*raw, file_lines);
    NcclTestsLog part = parse_text(raw->value(), origin, path);
    if (part.tables.size() != 1) {
      throw InputError(raw->where(), raw->path(), "the printed rows of one nccl-tests table",
                       fmt::format("{} tables (a new one starts at line {})", part.tables.size(),
                                   part.tables[1].where.line));
    }
    NcclTestsTable t = std::move(part.tables.front());
    t.where = entry.where();
    apply_dataset_metadata(t, entry, root, part.warnings);
    infer_collective(t, part.warnings);
    log.warnings.insert(log.warnings.end(), part.warnings.begin(), part.warnings.end());
    log.tables.push_back(std::move(t));
  }
  return log;
}

}  // namespace rocesim::validation
