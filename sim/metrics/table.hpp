// A column table for results that are not flows or links: the rows of `rocesim nccl-tests`, the
// comparisons of `rocesim validate`. Columns are numbers or text and carry a unit; writers store
// them in results.h5 (one dataset per column, docs/output.md) and as CSV.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace rocesim::metrics {

struct Column {
  std::string name;
  std::string unit;  // "us", "GB/s", "B", "" for counts and text
  std::variant<std::vector<double>, std::vector<int64_t>, std::vector<std::string>> values;
  size_t size() const;
};

class Table {
 public:
  Table(std::string name, std::string description)
      : name_(std::move(name)), description_(std::move(description)) {}

  /// Adds an empty column; returns its index. Names must be unique.
  size_t add_number(std::string name, std::string unit = "");
  size_t add_integer(std::string name, std::string unit = "");
  size_t add_text(std::string name);

  /// Appends to a column; every column must end up with the same number of rows.
  void push(size_t column, double v);
  void push(size_t column, int64_t v);
  void push(size_t column, std::string v);

  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  const std::vector<Column>& columns() const { return columns_; }
  /// Rows; throws InternalError if the columns differ in length.
  size_t rows() const;

  /// CSV with a header line ("name [unit]" where a unit is set), numbers with 17 significant
  /// digits so that they read back exactly; text quoted where needed (RFC 4180).
  std::string csv() const;

 private:
  size_t add(Column c);
  std::string name_;
  std::string description_;
  std::vector<Column> columns_;
};

/// Writes `text` to `path` under a temporary name and renames it when complete; throws
/// std::runtime_error naming the path on failure and leaves nothing behind.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace rocesim::metrics
