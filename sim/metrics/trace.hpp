// The timeline trace: Chrome trace / Perfetto JSON (the "Trace Event Format": complete events
// with process and thread names) of what the workloads did, opened in ui.perfetto.dev or
// chrome://tracing. Workloads that describe their own timeline (the ranks' streams of a training
// job, the operations of a collective) give their spans; the others are traced by their flows
// (one track per sending GPU). At most `max_spans` spans, in the order the workloads give them;
// the file says how many were left out.
#pragma once

#include <cstddef>
#include <string>

#include "sim/engine/simulation.hpp"
#include "sim/metrics/recorder.hpp"

namespace rocesim::metrics {

inline constexpr size_t kDefaultTraceSpans = 500000;

/// The trace as JSON text.
std::string trace_json(const engine::Simulation& sim, const Recorder& rec, size_t max_spans);
/// Writes it to `path` (through a temporary, renamed when complete).
void write_trace(const std::string& path, const engine::Simulation& sim, const Recorder& rec,
                 size_t max_spans = kDefaultTraceSpans);

}  // namespace rocesim::metrics
