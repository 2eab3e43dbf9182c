#include "sim/metrics/table.hpp"

#include <fmt/format.h>

#include <fstream>

#include "sim/core/error.hpp"
#include "sim/metrics/output_files.hpp"

namespace rocesim::metrics {
namespace {

std::string csv_text(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

size_t Column::size() const {
  return std::visit([](const auto& v) { return v.size(); }, values);
}

size_t Table::add(Column c) {
  for (const Column& x : columns_)
    ROCESIM_CHECK(x.name != c.name, "column names are unique");
  columns_.push_back(std::move(c));
  return columns_.size() - 1;
}

size_t Table::add_number(std::string name, std::string unit) {
  return add({std::move(name), std::move(unit), std::vector<double>{}});
}

size_t Table::add_integer(std::string name, std::string unit) {
  return add({std::move(name), std::move(unit), std::vector<int64_t>{}});
}

size_t Table::add_text(std::string name) {
  return add({std::move(name), "", std::vector<std::string>{}});
}

void Table::push(size_t column, double v) {
  std::get<std::vector<double>>(columns_.at(column).values).push_back(v);
}

void Table::push(size_t column, int64_t v) {
  std::get<std::vector<int64_t>>(columns_.at(column).values).push_back(v);
}

void Table::push(size_t column, std::string v) {
  std::get<std::vector<std::string>>(columns_.at(column).values).push_back(std::move(v));
}

size_t Table::rows() const {
  if (columns_.empty()) return 0;
  const size_t n = columns_.front().size();
  for (const Column& c : columns_)
    ROCESIM_CHECK(c.size() == n, "every column of a table has the same number of rows");
  return n;
}

std::string Table::csv() const {
  const size_t n = rows();
  std::string out;
  for (size_t i = 0; i < columns_.size(); ++i) {
    const Column& c = columns_[i];
    if (i > 0) out += ',';
    out += csv_text(c.unit.empty() ? c.name : fmt::format("{} [{}]", c.name, c.unit));
  }
  out += '\n';
  for (size_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < columns_.size(); ++i) {
      if (i > 0) out += ',';
      std::visit(
          [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::vector<double>>) {
              out += fmt::format("{:.17g}", v[r]);
            } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
              out += std::to_string(v[r]);
            } else {
              out += csv_text(v[r]);
            }
          },
          columns_[i].values);
    }
    out += '\n';
  }
  return out;
}

void write_text_file(const std::string& path, const std::string& text) {
  TemporaryFile tmp(path);
  {
    std::ofstream f(tmp.path(), std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error(write_failure(path, "cannot create the file"));
    f << text;
    f.flush();
    if (!f) throw std::runtime_error(write_failure(path, "the write failed"));
  }
  tmp.commit();
}

}  // namespace rocesim::metrics
