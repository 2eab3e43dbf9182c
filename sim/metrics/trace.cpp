#include "sim/metrics/trace.hpp"

#include <fmt/format.h>

#include <map>
#include <utility>
#include <vector>

#include "sim/metrics/table.hpp"

namespace rocesim::metrics {
namespace {

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Microseconds (the format's unit of `ts` and `dur`) with three decimals: a time rounded to the
// nanosecond, so that a span that starts where another ends starts exactly there.
int64_t ns(Time t) {
  return (t.count_ps() + 500) / 1000;
}
std::string us(int64_t ns) {
  return fmt::format("{}.{:03d}", ns / 1000, ns % 1000);
}

}  // namespace

std::string trace_json(const engine::Simulation& sim, const Recorder& rec, size_t max_spans) {
  std::vector<std::vector<engine::TraceSpan>> spans(sim.workloads().size());
  std::vector<bool> own(spans.size());
  for (size_t w = 0; w < spans.size(); ++w) {
    sim.workloads()[w].workload->trace(spans[w]);
    own[w] = !spans[w].empty();
  }
  // Workloads without a timeline of their own: their flows, one track per sending GPU.
  const fabric::Fabric& f = sim.fabric();
  for (const engine::FlowRecord& flow : rec.flows()) {
    if (!own[flow.workload]) {
      spans[flow.workload].push_back(
          {f.node(flow.src).name, fmt::format("QP {}", flow.qp),
           fmt::format("to {} ({} B)", f.node(flow.dst).name, flow.bytes.count()), flow.start,
           flow.delivered});
    }
  }
  std::string out = "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  std::map<std::pair<std::string, std::string>, int> pids;  // (workload, process)
  std::map<std::pair<int, std::string>, int> tids;          // (pid, thread)
  size_t written = 0, left_out = 0;
  bool first = true;
  const auto emit = [&](const std::string& event) {
    out += first ? "" : ",\n";
    out += event;
    first = false;
  };
  for (size_t w = 0; w < spans.size(); ++w) {
    const std::string& workload = sim.workloads()[w].workload->name();
    for (const engine::TraceSpan& s : spans[w]) {
      if (written == max_spans) {
        ++left_out;
        continue;
      }
      auto [p, new_process] =
          pids.try_emplace({workload, s.process}, static_cast<int>(pids.size()) + 1);
      if (new_process) {
        emit(fmt::format(
            R"({{"name": "process_name", "ph": "M", "pid": {}, "args": {{"name": {}}}}})",
            p->second, json_string(workload + " / " + s.process)));
        emit(fmt::format(
            R"({{"name": "process_sort_index", "ph": "M", "pid": {}, "args": {{"sort_index": {}}}}})",
            p->second, p->second));
      }
      auto [t, new_thread] =
          tids.try_emplace({p->second, s.thread}, static_cast<int>(tids.size()) + 1);
      if (new_thread) {
        emit(fmt::format(
            R"({{"name": "thread_name", "ph": "M", "pid": {}, "tid": {}, "args": {{"name": {}}}}})",
            p->second, t->second, json_string(s.thread)));
      }
      emit(fmt::format(R"({{"name": {}, "ph": "X", "pid": {}, "tid": {}, "ts": {}, "dur": {}}})",
                       json_string(s.name), p->second, t->second, us(ns(s.start)),
                       us(ns(s.end) - ns(s.start))));
      ++written;
    }
  }
  out += fmt::format(
      "\n], \"otherData\": {{\"spans\": {}, \"spans_left_out\": {}, "
      "\"flows_not_recorded\": {}}}}}\n",
      written, left_out, rec.flows_seen() - rec.flows().size());
  return out;
}

void write_trace(const std::string& path, const engine::Simulation& sim, const Recorder& rec,
                 size_t max_spans) {
  write_text_file(path, trace_json(sim, rec, max_spans));
}

}  // namespace rocesim::metrics
