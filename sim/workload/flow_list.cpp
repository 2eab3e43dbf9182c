#include "sim/workload/flow_list.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "sim/core/quantity.hpp"
#include "sim/engine/task_graph.hpp"
#include "sim/fabric/gpu_selection.hpp"
#include "sim/routing/equal_cost.hpp"

namespace rocesim::workload {
namespace {

constexpr int64_t kMaxQps = 128;  // QPs a flow may be split across (inline or in a CSV)

using engine::TaskGraph;

constexpr Param kFlowParams[] = {
    {.key = "src",
     .type = ParamType::Any,
     .help = "sending GPU",
     .choices = "rank of the job or GPU name"},
    {.key = "dst",
     .type = ParamType::Any,
     .help = "receiving GPU",
     .choices = "rank of the job or GPU name"},
    {.key = "bytes", .type = ParamType::Bytes, .help = "flow size", .check = Check::Positive},
    {.key = "start",
     .type = ParamType::Time,
     .fallback = "0s",
     .help = "start time, relative to the workload's start",
     .check = Check::NonNegative},
    {.key = "via",
     .type = ParamType::List,
     .help = "switches the path must cross, in order (e.g. [spine3])",
     .optional = true},
    {.key = "qps",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "QPs the flow is split across",
     .check = Check::Positive,
     .max = kMaxQps},
    {.key = "id",
     .type = ParamType::String,
     .help = "name other flows can wait on",
     .optional = true},
    {.key = "after",
     .type = ParamType::List,
     .help = "ids of flows that must be delivered before this one starts",
     .optional = true},
};

constexpr Param kFlowListParams[] = {
    engine::kWorkloadTypeParam,
    engine::kWorkloadNameParam,
    engine::kWorkloadStartParam,
    engine::kWorkloadAfterParam,
    engine::kWorkloadJobParam,
    {.key = "flows",
     .type = ParamType::List,
     .help = "the flows, inline",
     .choices = "see flow",
     .optional = true},
    {.key = "file",
     .type = ParamType::String,
     .help = "CSV file of flows, relative to the file that holds the workload",
     .optional = true},
    engine::kTransportParam,
};

std::vector<fabric::NodeId> read_via(const ConfigNode& list, const fabric::Fabric& f) {
  std::vector<fabric::NodeId> via;
  for (const ConfigNode& s : list.items())
    via.push_back(fabric::select_switch(s, f));
  return via;
}

// Adds a flow starting `start` after the workload: a delay task before the transfer.
TaskGraph::TaskId add_flow(TaskGraph& g, TaskGraph::TransferSpec spec, Time start) {
  const TaskGraph::TaskId t = g.add_transfer(spec);
  if (start > Time::zero()) g.add_dependency(g.add_delay(start), t);
  return t;
}

void check_flow_endpoints(const ConfigNode& where, fabric::NodeId src, fabric::NodeId dst) {
  if (src == dst) {
    throw InputError(where.where(), where.path(), "two different GPUs", "the same GPU twice");
  }
}

/// Waypoints must be reachable from one another, in order; `via_node()` gives the value the
/// error points at (made only for an error).
template <typename ViaNode>
void check_route(routing::EqualCostTable& routes, ViaNode&& via_node,
                 const TaskGraph::TransferSpec& spec) {
  if (routes.route_length(spec.src, spec.dst, spec.via) == routing::EqualCostTable::kUnreachable) {
    const ConfigNode n = via_node();
    throw InputError(n.where(), n.path(), "waypoints that can be reached in turn",
                     "a waypoint with no path to the next one");
  }
}

void read_inline(const engine::WorkloadInput& in, const ConfigNode& flows, TaskGraph& g,
                 routing::EqualCostTable& routes) {
  std::map<std::string, TaskGraph::TaskId> ids;
  std::vector<std::pair<const ConfigNode*, TaskGraph::TaskId>> waits;
  for (const ConfigNode& item : flows.items()) {
    const ParamReader r = in.spec.child(item, kFlowTable);
    TaskGraph::TransferSpec spec;
    spec.src = in.ranks.gpu(r.node("src"));
    spec.dst = in.ranks.gpu(r.node("dst"));
    check_flow_endpoints(item, spec.src, spec.dst);
    spec.bytes = r.bytes("bytes");
    spec.conn.qps = r.integer_as<uint32_t>("qps");
    spec.conn.mode = engine::QpMode::Split;
    spec.conn.transport = engine::read_transport(in.spec);
    if (r.has("via")) {
      spec.via = read_via(r.node("via"), in.fabric);
      check_route(
          routes, [&] { return r.node("via"); }, spec);
    }
    const TaskGraph::TaskId t = add_flow(g, spec, r.time("start"));
    if (r.has("id")) {
      if (!ids.emplace(r.string("id"), t).second) {
        r.fail("id", "an id not used by another flow", fmt::format("'{}' again", r.string("id")));
      }
    }
    if (r.has("after")) waits.emplace_back(&r.node("after"), t);
  }
  // Dependencies, checked for unknown ids and cycles (a flow in a cycle, or waiting on one,
  // would never start) before any is added to the graph.
  std::vector<std::vector<TaskGraph::TaskId>> succ(g.size());
  std::vector<uint32_t> indegree(g.size(), 0);
  for (const auto& [list, t] : waits) {
    for (const ConfigNode& id : list->items()) {
      const auto it = id.is_scalar() ? ids.find(id.value()) : ids.end();
      if (it == ids.end()) {
        throw InputError(id.where(), id.path(), "the id of a flow of this workload", id.describe());
      }
      std::vector<TaskGraph::TaskId>& next = succ[it->second];
      if (std::find(next.begin(), next.end(), t) != next.end()) continue;  // named twice
      next.push_back(t);
      ++indegree[t];
    }
  }
  std::vector<uint32_t> remaining = indegree;
  std::vector<TaskGraph::TaskId> ready;
  for (TaskGraph::TaskId t = 0; t < g.size(); ++t) {
    if (remaining[t] == 0) ready.push_back(t);
  }
  while (!ready.empty()) {
    const TaskGraph::TaskId t = ready.back();
    ready.pop_back();
    for (TaskGraph::TaskId s : succ[t]) {
      if (--remaining[s] == 0) ready.push_back(s);
    }
  }
  for (const auto& [list, t] : waits) {
    if (remaining[t] == 0) continue;
    std::string stuck;
    for (const auto& [name, task] : ids) {
      if (remaining[task] > 0) stuck += fmt::format("{}'{}'", stuck.empty() ? "" : ", ", name);
    }
    throw InputError(list->where(), list->path(), "flows whose 'after' lists form no cycle",
                     fmt::format("flows {} that can never start: their 'after' lists form a "
                                 "cycle",
                                 stuck));
  }
  for (TaskGraph::TaskId before = 0; before < succ.size(); ++before) {
    for (TaskGraph::TaskId after : succ[before])
      g.add_dependency(before, after);
  }
}

/// One cell of a CSV line, trimmed, with the 0-based offset of its text in the line.
struct Cell {
  std::string_view text;
  size_t offset;
};

/// Splits `line` at `sep` into `out` (cleared first: one buffer serves every line).
void split(std::string_view line, char sep, std::vector<Cell>& out) {
  out.clear();
  size_t start = 0;
  while (true) {
    const size_t p = line.find(sep, start);
    std::string_view cell = line.substr(start, p == std::string_view::npos ? p : p - start);
    size_t offset = start;
    while (!cell.empty() && (cell.front() == ' ' || cell.front() == '\t')) {
      cell.remove_prefix(1);
      ++offset;
    }
    while (!cell.empty() && (cell.back() == ' ' || cell.back() == '\t' || cell.back() == '\r')) {
      cell.remove_suffix(1);
    }
    out.push_back(Cell{cell, offset});
    if (p == std::string_view::npos) return;
    start = p + 1;
  }
}

/// A cell that is exactly a number of type T (std::from_chars: no sign, no unit, no space).
template <typename T>
bool plain_number(std::string_view text, T& out) {
  const char* last = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), last, out);
  return !text.empty() && ec == std::errc() && p == last;
}

void read_csv(const engine::WorkloadInput& in, TaskGraph& g, routing::EqualCostTable& routes) {
  const ConfigNode file_node = in.spec.value("file");
  std::filesystem::path path(file_node.value());
  if (path.is_relative()) path = std::filesystem::path(in.base_dir) / path;
  std::ifstream s(path);
  if (!s) {
    throw InputError(file_node.where(), file_node.path(), "a readable CSV file of flows",
                     fmt::format("'{}', which {}", path.string(),
                                 std::filesystem::exists(path) ? "cannot be opened for reading"
                                                               : "does not exist"));
  }
  const auto file = std::make_shared<const std::string>(path.string());
  std::string line;
  int lineno = 0;
  std::vector<std::string> header;
  auto col_of = [&](std::string_view name) -> int {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return static_cast<int>(i);
    }
    return -1;
  };
  int c_src = -1, c_dst = -1, c_bytes = -1, c_start_s = -1, c_start = -1, c_via = -1, c_qps = -1;
  std::vector<Cell> cells, names;
  const network::Transport transport = engine::read_transport(in.spec);
  while (std::getline(s, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#' || line.find_first_not_of(" \t\r") == std::string::npos) {
      continue;
    }
    split(line, ',', cells);
    // A cell as a located value: messages point at its first character. Rows of plain numbers
    // (ranks, byte counts, seconds) and switch names are read in place; a cell that is not one
    // goes through its located value, which reads the other forms and words the errors.
    auto cell_node = [&](int col, std::string_view what) {
      const Cell& c = cells[col];
      return ConfigNode::scalar(std::string(c.text),
                                SourceLocation{file, lineno, static_cast<int>(c.offset + 1)},
                                std::string(what));
    };
    if (header.empty()) {
      static constexpr std::string_view kColumns[] = {"src",   "dst", "bytes", "start_s",
                                                      "start", "via", "qps"};
      for (const Cell& c : cells) {
        const bool known =
            std::find(std::begin(kColumns), std::end(kColumns), c.text) != std::end(kColumns);
        const bool repeated = std::find(header.begin(), header.end(), c.text) != header.end();
        if (!known || repeated) {
          throw InputError(SourceLocation{file, lineno, static_cast<int>(c.offset + 1)}, "header",
                           "each column once, named src, dst, bytes, start_s, start, via or qps",
                           fmt::format("'{}'{}", c.text, repeated ? " a second time" : ""));
        }
        header.emplace_back(c.text);
      }
      c_src = col_of("src");
      c_dst = col_of("dst");
      c_bytes = col_of("bytes");
      c_start_s = col_of("start_s");
      c_start = col_of("start");
      c_via = col_of("via");
      c_qps = col_of("qps");
      if (c_src < 0 || c_dst < 0 || c_bytes < 0 || (c_start_s >= 0 && c_start >= 0)) {
        throw InputError(SourceLocation{file, lineno, 1}, "header",
                         "a header line with columns src, dst and bytes (and optionally "
                         "one of start_s and start, via, qps)",
                         fmt::format("'{}'", line));
      }
      continue;
    }
    if (cells.size() != header.size()) {
      throw InputError(SourceLocation{file, lineno, 1}, "row",
                       fmt::format("{} comma-separated values as in the header", header.size()),
                       fmt::format("{} value{}", cells.size(), cells.size() == 1 ? "" : "s"));
    }
    TaskGraph::TransferSpec spec;
    auto gpu = [&](int col, std::string_view what) {
      const fabric::NodeId by_rank = in.ranks.rank(cells[col].text);
      return by_rank != fabric::kNone ? by_rank : in.ranks.gpu(cell_node(col, what));
    };
    spec.src = gpu(c_src, "src");
    spec.dst = gpu(c_dst, "dst");
    if (spec.src == spec.dst) check_flow_endpoints(cell_node(c_src, "src"), spec.src, spec.dst);
    int64_t b = 0;
    if (!plain_number(cells[c_bytes].text, b)) {
      const ConfigNode bytes = cell_node(c_bytes, "bytes");
      try {
        b = parse_bytes(bytes.value()).count();
      } catch (const QuantityError& e) {
        throw InputError(bytes.where(), "bytes", "a whole number of bytes or a size with a unit",
                         e.what());
      }
    }
    if (b <= 0) {
      const ConfigNode bytes = cell_node(c_bytes, "bytes");
      throw InputError(bytes.where(), "bytes", "a positive size", bytes.describe());
    }
    spec.bytes = Bytes(b);
    Time start{};
    if (c_start_s >= 0) {
      double v = 0;
      if (!plain_number(cells[c_start_s].text, v) || !std::isfinite(v)) {
        v = parse_number(cell_node(c_start_s, "start_s"));
      }
      // The latest a run can reach: 2^62 ps (kMaxTransferPs), as a `start` with a unit.
      if (v < 0 || v > static_cast<double>(kMaxTransferPs) * 1e-12) {
        const ConfigNode n = cell_node(c_start_s, "start_s");
        throw InputError(n.where(), "start_s", "a time in seconds from 0 to 4.6e6", n.describe());
      }
      start = Time::seconds(v);
    } else if (c_start >= 0) {
      const ConfigNode n = cell_node(c_start, "start");
      try {
        start = parse_time(n.value());
      } catch (const QuantityError& e) {
        throw InputError(n.where(), "start", "a time with a unit", e.what());
      }
      if (start < Time::zero()) {
        throw InputError(n.where(), "start", "a time >= 0 with a unit", n.describe());
      }
    }
    if (c_via >= 0 && !cells[c_via].text.empty()) {
      split(cells[c_via].text, '|', names);
      for (const Cell& name : names) {
        if (const fabric::NodeId sw = fabric::find_switch(name.text, in.fabric);
            sw != fabric::kNone) {
          spec.via.push_back(sw);
          continue;
        }
        SourceLocation at{file, lineno, static_cast<int>(cells[c_via].offset + name.offset + 1)};
        spec.via.push_back(fabric::select_switch(
            ConfigNode::scalar(std::string(name.text), at, "via"), in.fabric));
      }
      check_route(
          routes, [&] { return cell_node(c_via, "via"); }, spec);
    }
    if (c_qps >= 0) {
      int64_t q = 0;
      if (!plain_number(cells[c_qps].text, q)) q = parse_integer(cell_node(c_qps, "qps"));
      if (q < 1 || q > kMaxQps) {  // (the inline key's bounds, from its table)
        const ConfigNode n = cell_node(c_qps, "qps");
        throw InputError(n.where(), "qps", fmt::format("a whole number from 1 to {}", kMaxQps),
                         n.describe());
      }
      spec.conn.qps = static_cast<uint32_t>(q);
    }
    spec.conn.mode = engine::QpMode::Split;
    spec.conn.transport = transport;
    add_flow(g, spec, start);
  }
}

}  // namespace

const ParamTable kFlowTable{"flow", "One flow of a `flows` workload.", kFlowParams};
const ParamTable kFlowListTable{
    "workload (type: flows)",
    "An explicit list of flows, inline (`flows`) or from a CSV file (`file`); exactly one of "
    "the two.",
    kFlowListParams};

std::unique_ptr<engine::Workload> make_flow_list(const engine::WorkloadInput& in) {
  routing::EqualCostTable routes(in.fabric);
  const bool inline_flows = in.spec.has("flows");
  if (inline_flows == in.spec.has("file")) {
    in.spec.fail(inline_flows ? "file" : "flows", "exactly one of 'flows' and 'file'",
                 inline_flows ? "both" : "neither");
  }
  auto g = std::make_unique<TaskGraph>(in.name, "flows");
  if (inline_flows) {
    read_inline(in, in.spec.node("flows"), *g, routes);
  } else {
    read_csv(in, *g, routes);
  }
  if (g->size() == 0) in.spec.fail(inline_flows ? "flows" : "file", "at least one flow", "none");
  return g;
}

}  // namespace rocesim::workload
