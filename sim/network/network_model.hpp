// The seam between the engine and a rate model. A model knows links and flows, never
// collectives. It answers the two questions every model answers: when is your next event, and
// advance to it. The engine starts flows, asks for the next event time, advances, and calls
// commit() once per instant after all the flows of that instant have started and finished.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "sim/core/units.hpp"
#include "sim/fabric/fabric.hpp"

namespace rocesim::network {

using FlowHandle = uint32_t;
inline constexpr double kNoRateCap = std::numeric_limits<double>::infinity();

class NetworkModel {
 public:
  virtual ~NetworkModel() = default;
  virtual std::string_view name() const = 0;

  /// Starts moving `bytes` over `links` at `now`, capped at `rate_cap` bytes/s (kNoRateCap).
  /// `weights` (empty: all 1) is what each link carries per byte of the flow: a pipeline whose
  /// edges share a link, or whose bytes are split over several QPs, has weights other than 1.
  /// Handles are reused after a flow finishes.
  virtual FlowHandle start(std::span<const fabric::LinkId> links, std::span<const double> weights,
                           double bytes, Time now, double rate_cap) = 0;
  /// Earliest end of a flow's bandwidth phase, Time::infinity() when nothing is moving.
  virtual Time next_event() = 0;
  /// Moves to `t` (never past next_event()) and replaces `finished` with the flows whose last
  /// byte left the sender at t, in a deterministic order. Their handles become free.
  virtual void advance(Time t, std::vector<FlowHandle>& finished) = 0;
  /// Recomputes rates after the starts and finishes of instant `now`.
  virtual void commit(Time now) = 0;

  /// Current rate of a running flow in bytes/s.
  virtual double rate(FlowHandle f) const = 0;
  virtual size_t active_flows() const = 0;
};

}  // namespace rocesim::network
