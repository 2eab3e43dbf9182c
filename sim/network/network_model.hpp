// The seam between the engine and a rate model. A model knows links, flows and QPs, never
// collectives. It answers the two questions every model answers: when is your next event, and
// advance to it. The engine starts flows, asks for the next event time, advances, and calls
// commit() once per instant after all the flows of that instant have started and finished.
//
// A flow is described by its routes: each route is the ordered list of links one QP's share of
// the flow crosses, sender to receiver. An ordinary flow has one route. A pipeline (an NCCL ring
// or tree channel, whose edges all move the same bytes in lockstep) has one route per edge and
// QP; a model that cares which hop is congested, and who causes it, sees every hop of every edge
// in order. A model that only shares bandwidth (maxmin) merges the routes into one weighted set
// of links (merge_routes()).
//
// The QP of a route names transport state that outlives one flow (a DCQCN rate, credits): every
// message a workload posts on a QP arrives with the same QP id.
//
// The fabric may change while flows run: a link's capacity changes (a degraded speed, 0 while it
// is down: the flows on it stall), and routing may move a running flow to other links
// (reroute()). Routers see the load the model puts on links (link_load()).
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
/// The engine's QP index: stable for the whole run, shared by every flow of the QP.
using QpId = uint32_t;
inline constexpr QpId kNoQp = std::numeric_limits<QpId>::max();
inline constexpr double kNoRateCap = std::numeric_limits<double>::infinity();

/// Traffic classes, as a RoCE fabric configures them: RDMA data in a lossless (PFC) class, other
/// traffic in a lossy class, congestion notifications and NCCL's clear-to-send messages in a
/// strict-priority class that PFC never pauses.
enum class TrafficClass : uint8_t { Lossless = 0, Lossy = 1, Control = 2 };
inline constexpr size_t kTrafficClasses = 3;
std::string_view traffic_class_name(TrafficClass c);

/// How a sender moves a flow's bytes across the fabric: RDMA (RoCE or InfiniBand: the NIC's
/// rate control, in the class the fabric makes lossless) or TCP (the host's window-based
/// congestion control, in the lossy class, where full queues drop). A model without queues
/// shares both alike.
enum class Transport : uint8_t { Rdma = 0, Tcp = 1 };

/// One QP's part of a flow: the links it crosses in order, the bytes it carries per byte of the
/// flow, and how its QP sends them. Class and transport are the QP's, not the flow's: a
/// pipeline's NVLink edges stay RDMA in the lossless class where its network edges are TCP
/// connections (NCCL over sockets).
struct Route {
  std::span<const fabric::LinkId> hops;
  double share = 1.0;
  QpId qp = kNoQp;
  TrafficClass traffic_class = TrafficClass::Lossless;
  Transport transport = Transport::Rdma;
};

struct FlowSpec {
  std::span<const Route> routes;  // at least one
  double bytes = 0;               // of the flow; route i carries bytes * routes[i].share
  /// Bound on the flow's rate (bytes of the flow per second), e.g. a credit window over a round
  /// trip; kNoRateCap when absent.
  double rate_cap = kNoRateCap;
  /// Receiver-driven admission (NCCL's credits): at most window x share bytes of a route in
  /// flight at once, the receiver returning credits as it drains them; 0: no window. A model
  /// without queues has nothing in flight to count and may ignore it (rate_cap carries the
  /// window over the round trip).
  double window = 0;
  /// In-network reduction (CollNet/SHARP): a link between two fabric switches carries one
  /// reduced stream however many routes cross it.
  bool reduce_in_switches = false;
  /// The union of the routes as merge_routes() makes it, when the caller has it already (a
  /// pipeline's thousands of legs are merged once and reused by every operation on them);
  /// empty: the model merges the routes itself if it needs the union.
  std::span<const fabric::LinkId> merged_links;
  std::span<const double> merged_weights;  // empty: every weight 1
};

/// A flow whose last byte has come through every queue on its way, at the time advance() reports
/// it, and how long ago it left the sender (0 for a model without queues). The engine adds the
/// path's propagation latency: models report completions in time order, so deliveries of paths
/// with equal latency stay in order.
struct Completion {
  FlowHandle flow;
  Time queueing{};
};

/// Events of a model with queues. Metrics and traces subscribe; models never write files.
/// Every call comes from the engine's thread, in a deterministic order.
class NetworkObserver {
 public:
  virtual ~NetworkObserver() = default;
  /// Depth of an egress queue (link, class), reported when it changes by a model step.
  virtual void on_queue(fabric::LinkId link, TrafficClass c, Time t, double bytes);
  /// PFC on a link: the link's sender stops (paused) or resumes sending class c.
  virtual void on_pause(fabric::LinkId link, TrafficClass c, Time t, bool paused);
  /// ECN marks on the egress of a link since its last report, counted in packets (fractional
  /// for a fluid model). Which QPs they reach shows in their CNPs (on_cnp).
  virtual void on_ecn(fabric::LinkId link, Time t, double packets);
  /// Congestion notifications received by a QP's sender (fractional for a fluid model).
  virtual void on_cnp(QpId qp, Time t, double cnps);
  /// Bytes lost at a full egress queue.
  virtual void on_drop(fabric::LinkId link, TrafficClass c, Time t, double bytes);
  /// A QP's sending rate (bytes/s), reported when its rate-control state changes.
  virtual void on_rate(QpId qp, Time t, double bytes_per_second);
};

class NetworkModel {
 public:
  virtual ~NetworkModel() = default;
  virtual std::string_view name() const = 0;

  /// Starts moving spec.bytes over spec.routes at `now`. Handles are reused after a flow
  /// finishes.
  virtual FlowHandle start(const FlowSpec& spec, Time now) = 0;
  /// Earliest time at which the model must be advanced: a flow's end or a step of its own
  /// dynamics; Time::infinity() when nothing is moving.
  virtual Time next_event() = 0;
  /// Moves to `t` (never past next_event()) and replaces `finished` with the flows whose last
  /// byte came out of the last queue at t (left the sender t - queueing ago), in a
  /// deterministic order. Their handles become free.
  virtual void advance(Time t, std::vector<Completion>& finished) = 0;
  /// Recomputes rates after the starts and finishes of instant `now`.
  virtual void commit(Time now) = 0;

  /// Current rate of a running flow in bytes/s.
  virtual double rate(FlowHandle f) const = 0;
  virtual size_t active_flows() const = 0;

  /// Bytes per second the flows on a link are given now.
  virtual double link_load(fabric::LinkId l) const = 0;
  /// Bytes of the flow its sender has sent, as of `now`, since it started or was last rerouted
  /// (what its current routes have carried, for results).
  virtual double sent(FlowHandle f, Time now) const = 0;
  /// From `now` on, the link moves `bytes_per_second` of payload (0: down; flows on it stall
  /// until it comes back or they are rerouted). Takes effect at the next commit().
  virtual void set_capacity(fabric::LinkId l, double bytes_per_second, Time now) = 0;
  /// Moves a running flow onto new routes, one per route it was started with and in the same
  /// order (same QPs and shares): the bytes not yet sent continue on them; bytes the old links
  /// still held are sent again (RoCE's go-back-N after the path changed under them). Returns the
  /// flow's handle from now on (it may change). Takes effect at the next commit().
  virtual FlowHandle reroute(FlowHandle f, std::span<const Route> routes, Time now) = 0;

  void add_observer(NetworkObserver* o) { observers_.push_back(o); }
  /// Whether the model reports queues, pauses, marks, CNPs and drops to its observers: results
  /// then carry congestion figures, zeros where nothing congested. A model without queues has
  /// nothing to report.
  virtual bool reports_congestion() const { return false; }

 protected:
  std::vector<NetworkObserver*> observers_;
};

/// The union of a flow's routes as one set of links, each with the bytes it carries per byte of
/// the flow (the sum of the shares of the routes that cross it; at most 1 on a link between two
/// fabric switches with reduce_in_switches). A single route of share 1 keeps its order; a union
/// is in increasing link id. `scratch` is
/// per-link storage of the fabric's link count, all zero before and after.
void merge_routes(const fabric::Fabric& f, const FlowSpec& spec, std::vector<double>& scratch,
                  std::vector<fabric::LinkId>& links, std::vector<double>& weights);

}  // namespace rocesim::network
