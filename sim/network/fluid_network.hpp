// The `fluid` network model: queues at every egress port, PFC, ECN and DCQCN, integrated in time
// steps. The maths, every parameter and its source: docs/models/fluid.md.
//
// State. Each route (one QP's part of a flow) holds, for each of its hops k, the bytes b[k] it
// has queued at the egress of that hop's link (k = 0: at the sender, waiting for the first
// link). An egress queue (link, class) is the sum of the b of the routes there; a node's ingress
// counter for link l (what PFC watches) is the sum of the b queued in the node that arrived over
// l. Each QP has DCQCN state (current rate Rc, target rate Rt, alpha), kept across its flows.
//
// Rates are piecewise constant: recomputed at every commit() (a flow started or ended) and at
// every step boundary (multiples of `step`) while anything is in motion: a queue not empty, a
// pause on, a QP below its line rate. When nothing is in motion the model only wakes up for the
// next flow end (a flow that meets no congestion costs what it costs in max-min).
//
// One computation of rates, in order:
//  1. PFC: a link is paused (lossless class) when its receiver's ingress counter for it reaches
//     XOFF: the switch's dynamic threshold alpha x (free shared buffer), or a device's buffer;
//     it resumes below XOFF - xon_offset. The sender's own send queue pauses the QP the same way.
//  2. ECN: each switch egress queue marks with the RED probability p(q) of its switch role; a
//     route sees 1 - prod(1 - p) over its hops.
//  3. Senders: a QP sends at its DCQCN rate Rc (line rate without congestion control), shared
//     by its routes; the routes leaving on one link share it max-min (the NIC's round robin);
//     a pipeline's routes move in lockstep at the pace of the slowest; rate caps apply.
//  4. Queues, link by link in the order routes cross them: a link serves its queued and
//     arriving bytes at its capacity (0 while paused), classes by priority (control, then
//     lossless and lossy sharing by weight), each route in proportion to its bytes there (FIFO
//     mixing); what passes is the next hop's arrival in the same step.
// Between computations b[k] += (arrival - departure) dt, each flow's sent bytes grow at its
// rate, and DCQCN's fluid equations (Zhu et al., CoNEXT 2016, with the NIC's hyper increase)
// move Rc, Rt and alpha from the marking each QP saw.
//
// A flow is delivered when its last byte has come through the queues of every route (a tracer
// that waits behind what each queue held when it arrived) and every hop of the flow is empty;
// the completion reports how long the last byte took after leaving the sender.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <vector>

#include "sim/core/params.hpp"
#include "sim/core/slot_pool.hpp"
#include "sim/network/network_model.hpp"
#include "sim/network/registry.hpp"

namespace rocesim::network {

/// RED marking on an egress queue: p = 0 up to kmin, pmax at kmax, linear between, 1 above.
struct EcnProfile {
  bool enabled = true;
  double kmin = 100e3;  // bytes (per 25 Gb/s of port rate when scaled)
  double kmax = 400e3;
  double pmax = 0.2;
  bool scale_with_rate = true;  // thresholds x port rate / 25 Gb/s (HPCC)
};

/// DCQCN's reaction point, as fluid equations (docs/models/fluid.md).
struct DcqcnConfig {
  bool enabled = true;
  double g = 1.0 / 256;
  double alpha_interval = 1e-6;  // s: tau', the alpha update period
  double cnp_interval = 4e-6;    // s: tau, the shortest time between two CNPs of a QP
  double timer = 300e-6;         // s: T, the rate-increase timer
  double byte_counter = 0;       // bytes: B, increase events per B bytes sent; 0 = off
  int fast_recovery = 1;         // F: increase events before additive increase
  double ai_fraction = 2e-4;     // R_AI / line rate (5 Mb/s per 25 Gb/s)
  double hai_fraction = 2e-3;    // R_HAI / line rate (50 Mb/s per 25 Gb/s)
  double min_rate = 125e3;       // bytes/s (1 Mb/s)
};

/// TCP senders (`transport: tcp`), as fluid window dynamics (docs/models/fluid.md).
struct TcpConfig {
  enum class Algorithm : uint8_t { NewReno, Cubic };
  Algorithm algorithm = Algorithm::Cubic;  // Linux's default
  double mss = 8948;            // bytes: a 9000-byte MTU less IPv4 (20), TCP (20), timestamps (12)
  double initial_window = 10;   // segments (RFC 6928)
  double max_window = 6291456;  // bytes: Linux's tcp_rmem maximum (6 MiB)
  double min_rto = 0.2;         // s: Linux's TCP_RTO_MIN
  double host_rate = 0;         // bytes/s one connection's host stack moves; 0: no bound
  double host_latency = 0;      // s both hosts' stacks add to a round trip
  bool restart_after_idle = true;  // RFC 2861: the window restarts after an idle RTO
  double step = 4e-6;              // s: the most the step grows to while TCP alone is in motion
};

struct FluidConfig {
  double step = 1e-6;             // s
  double max_step = 8e-6;         // s: the most the step grows to while nothing nears a threshold
  double step_tolerance = 0.05;   // the most a QP's rate moves, relative to itself, in a step
  double packet = 4096;           // payload bytes per packet (the RoCE path MTU)
  bool pfc = true;                // lossless class paused hop by hop
  double pfc_alpha = 0.125;       // dynamic threshold of a lossless ingress queue
  double xon_offset = 18432;      // bytes below XOFF at which a pause ends
  double device_buffer = 262144;  // bytes per ingress port of a NIC, NVSwitch or GPU
  double lossy_weight = 1.0;      // share of the lossy class when both data classes queue
  double lossy_alpha = 1.0;       // dynamic threshold of a switch's lossy egress queue
  double lossy_limit = 0;         // bytes, a fixed cap on a lossy egress queue; 0: none
  double watchdog = 0.2;          // s: a pause longer than this is a PFC storm
  // Per switch role (index: fabric::SwitchRole).
  std::array<EcnProfile, fabric::kSwitchRoles> ecn{};
  DcqcnConfig dcqcn{};
  TcpConfig tcp{};
};

/// PFC diagnostics of one link's receiver (counts of pauses, queues and marks go to the
/// observers: metrics::CongestionRecorder).
struct PfcDiagnostics {
  double max_ingress = 0;    // bytes, largest ingress counter for the link
  double headroom_used = 0;  // bytes, most the ingress counter went past XOFF while paused
  double headroom = 0;       // bytes the receiver can absorb after sending XOFF (802.1Qbb)
  uint64_t storms = 0;       // pauses longer than the watchdog
};

/// A cyclic buffer dependency: paused links that wait on each other, so that none can drain.
class FabricDeadlock : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class FluidNetwork final : public NetworkModel {
 public:
  static constexpr FlowHandle kNone = std::numeric_limits<FlowHandle>::max();  // no flow

  /// `threads`: OpenMP threads for the passes over links, routes and QPs (results do not depend
  /// on it).
  FluidNetwork(const fabric::Fabric& f, const FluidConfig& config, int threads = 1);

  std::string_view name() const override { return "fluid"; }
  bool reports_congestion() const override { return true; }
  FlowHandle start(const FlowSpec& spec, Time now) override;
  Time next_event() override { return next_event_; }
  void advance(Time t, std::vector<Completion>& finished) override;
  void commit(Time now) override;
  double rate(FlowHandle f) const override { return flows_[f].rate; }
  size_t active_flows() const override { return active_flows_; }
  double link_load(fabric::LinkId l) const override;
  double sent(FlowHandle f, Time now) const override;
  void set_capacity(fabric::LinkId l, double bytes_per_second, Time now) override;
  FlowHandle reroute(FlowHandle f, std::span<const Route> routes, Time now) override;

  const FluidConfig& config() const { return config_; }
  std::span<const PfcDiagnostics> pfc() const { return stats_; }
  /// Bytes queued at the egress of a link (all classes), and whether its sender is paused.
  double queue(fabric::LinkId l) const;
  bool paused(fabric::LinkId l) const { return links_[l].paused; }
  /// DCQCN state of a QP (line rate when it never met congestion).
  double qp_rate(QpId q) const { return q < qps_.size() ? qps_[q].rc : 0; }
  /// Computations of every rate so far (a diagnostic of the model's cost).
  uint64_t steps() const { return steps_; }
  /// Times the route hops were laid out again (rebuild()), for tests.
  uint64_t layouts() const { return layouts_; }
  /// Off, every start lays every route hop out again and every change computes every rate, as
  /// before the shortcuts at rest (commit(), append()); a test demands that both agree.
  void set_shortcuts(bool on) { shortcuts_ = on; }

 private:
  static constexpr uint32_t kNoIndex = std::numeric_limits<uint32_t>::max();
  static constexpr uint64_t kNoStep = std::numeric_limits<uint64_t>::max();
  // A route's hop on a link. All hops live in hops_, laid out link by link in the order links
  // feed each other (rebuild()), so that the passes over links read them in sequence; a route
  // finds its own through HopRef. A route started since the last rebuild() took empty slots
  // in its links' ranges, or single-hop ranges at the end (append()); one that could not waits
  // at the end, in no link's range, until the next rebuild().
  struct Hop {
    double b = 0;  // bytes queued at the egress of this hop's link
    double a = 0;  // arrival rate (bytes/s) in the current interval (departures: out_)
    double w = 1;  // bytes on the link per byte of the route (< 1: reduced in a switch)
    uint32_t route = kNoIndex;
    uint32_t prev = kNoIndex;    // the route's previous hop in hops_ (its arrivals), or none
    fabric::LinkId prev_link{};  // the link of that hop
    TrafficClass tc = TrafficClass::Lossless;
    bool sched = false;  // the hop where the route's sender is scheduled
  };
  struct HopRef {
    fabric::LinkId link;
    uint32_t at;  // index in hops_
  };
  struct RouteState {
    FlowHandle flow = kNone;
    QpId qp = kNoQp;
    double share = 1;
    TrafficClass tc = TrafficClass::Lossless;  // Route::traffic_class
    Transport transport = Transport::Rdma;     // Route::transport
    bool cc = false;                           // crosses a NIC onto the fabric: DCQCN applies
    bool tcp = false;     // crosses a NIC onto the fabric with transport TCP: its window applies
    double base_rtt = 0;  // s: the route's propagation there and back, with the hosts' stacks
    uint32_t sched = 0;   // the hop whose link the sender's scheduler shares (the NIC's port)
    double line = 0;      // the QP's line rate (bytes/s): NIC uplink, or the first hop
    double window = 0;    // bytes that may be queued on the way at once; 0: no limit
    double demand = 0;    // what the sender asks for in this interval
    double x = 0;         // injection rate (bytes/s)
    uint32_t path = 0, length = 0;  // its hops: refs_[path, path + length), in order
    bool live = false;
    bool sending = true;  // false once the flow's last byte left the sender
    // The last byte, once sent: the hop whose queue it is in, and the bytes (on that link)
    // ahead of it; hops.size() when it has left the last queue.
    uint32_t tracer = 0;
    double ahead = 0;
    double traced_to = 0;  // s, the time its last byte's position is for
  };
  struct FlowState {
    std::vector<uint32_t> routes;
    double bytes = 0;
    double sent = 0;
    double rate = 0;  // bytes of the flow per second
    double cap = kNoRateCap;
    double sent_at = 0;      // s, when the last byte left the sender
    uint32_t in_flight = 0;  // routes whose last byte is still in a queue
    bool live = false;
    bool sending = false;
    bool reduce = false;   // FlowSpec::reduce_in_switches
    double lost = 0;       // bytes dropped by links that are down, to send again
    double window = 0;     // FlowSpec::window
    double sent_base = 0;  // `sent` at the last reroute
    double sent_t = 0;     // s: `sent` is what it sent by then (its rate holds since)
    // In residue_: when its queues are empty at the rates of computation `empty_for`
    // (kNoStep: not known yet).
    double empty_at = 0;
    uint64_t empty_for = kNoStep;
  };
  struct QpState {
    double rc = 0, rt = 0, alpha = 1;
    double line = 0;
    double p = 0;          // marking seen in the current interval
    double last = 0;       // time of the last update (s)
    uint32_t users = 0;    // routes using the QP in the current interval
    uint32_t sending = 0;  // of those under DCQCN, the ones still sending (their QP moves)
    double cnps = 0;       // CNPs received over the last interval (for the observers)
    bool moved = false;    // DCQCN moved it over the last interval
    bool seen = false;
    bool listed = false;  // in in_use_
    uint32_t use = 0;     // its position there
    // TCP (a connection: its window outlives a flow, as DCQCN's rate does).
    double cwnd = 0;          // bytes
    double ssthresh = 0;      // bytes
    double w_max = 0;         // bytes, the window at the last loss (CUBIC)
    double last_cut = -1e30;  // s, when the window was last cut
    double rtt = 0;           // s, the round trip its routes see (propagation + queues)
    double x = 0;             // bytes/s sent in the current interval
    double dropped = 0;       // bytes lost in queues since the last update
    double rto_until = -1;    // s, a retransmission time-out: silent until then
  };
  struct LinkState {
    fabric::NodeId src{}, dst{};  // its sender and receiver (as in the fabric)
    double cap = 0;
    // Fraction of each class's arrivals dropped (a full queue), this interval: the lossy
    // class's, and the lossless class's where PFC is off; control never drops.
    std::array<double, kTrafficClasses> drop{};
    bool dropping() const { return drop[0] > 0 || drop[1] > 0; }
    uint32_t begin = 0, end = 0;  // its route hops in hops_, rebuilt when routes come and go
    uint32_t pos = kNoIndex;      // its position in order_, or none
    double latency = 0;           // s, the fabric link's
    bool nic_out = false;         // from a NIC to a switch: where a NIC schedules its QPs
    bool between_switches = false;
    bool senders = false;        // some of them are scheduled here (a sender's port)
    bool paused = false;         // the receiver paused this link (lossless)
    bool source_paused = false;  // the senders' own send queue is full
    std::array<double, kTrafficClasses> queue{};
    std::array<double, kTrafficClasses> served{};  // bytes/s given to each class
    std::array<double, kTrafficClasses> frac{};    // share of what each class asked for
    double ingress = 0;   // lossless bytes held by the receiver that came over this link
    double source = 0;    // lossless bytes of routes starting here, at their sender
    double p = 0;         // marking probability of the egress queue
    double marked = 0;    // bytes marked since the last settle_hops() (for the observers)
    double mark_fix = 0;  // bytes: what rates changed by retime() marked before they changed
    double kmin = 0, kmax = 0, pmax = 0;
    bool ecn = false;
    bool queued = false;  // had bytes queued at the last computation
    bool storm = false;   // the current pause outlasted the watchdog
    double paused_since = 0;
    // The adaptive step: how long the last plan of serve() holds for this link's queue (s), and
    // how fast, at the rates planned, its receiver's ingress counter and its senders' send
    // queue grow (bytes/s; pfc_horizon()).
    double calm = 0;
    double ingress_drift = 0, source_drift = 0;
  };

  /// Adds (sign > 0) the routes' shares to share_on_link_ for a flow reduced in switches, or
  /// clears them again (sign < 0).
  void count_reduced(std::span<const Route> routes, bool reduce, int sign);
  /// Route `id`'s hops over `hops` (new ones, at the end of hops_), its sender's scheduling hop
  /// and line rate.
  void set_hops(uint32_t id, std::span<const fabric::LinkId> hops, bool reduce);
  /// New route states for a flow's `routes` (appended to its list), with their QPs' state.
  void add_routes(FlowHandle h, std::span<const Route> routes, double t);
  /// The sender of a flow that lost bytes on a link that is down sends them again (at `t`).
  void resend(FlowState& fl, double t);
  /// Moves the state to `t` (queues, TCP windows, last bytes on their way) without ending flows:
  /// advance() ends them after; a start, reroute, capacity change or commit at a time the model
  /// was not advanced to (another event of the engine) moves it there first.
  void integrate(Time t);
  /// The flows (due_flows_) and last bytes (due_routes_, in route order) predicted due by `t`.
  void due_by(Time t);
  /// Route r's last byte moved to `to` at the service rates of the last computation; its flow
  /// to emptied_ when it was the flow's last route in flight.
  void move_tracer(uint32_t r, double to);
  /// Every last byte on its way moved to `now`; draining_ keeps those still in a queue.
  void settle_tracers(double now);
  /// Every route hop's queue moved to `t` (from hops_t_), with the ECN marks and the losses of
  /// the interval.
  void settle_hops(Time t);
  /// Bytes queued at route hop `j` at `t` (its rates hold since hops_t_).
  double hop_bytes(uint32_t j, double t) const;
  /// A route hop's arrival and departure rates change to `a` and `d` at `t`, between two
  /// settle_hops().
  void retime(const HopRef& ref, double t, double a, double d);
  /// The flows whose sender ends or that are delivered at `t`, in slot order (advance()).
  void complete(Time t, std::vector<Completion>& finished);
  /// DCQCN's state of a QP that sends, moved to `to` (with its CNPs, for the observers);
  /// returns whether it moved or received CNPs.
  bool settle_qp(QpState& q, double to) const;
  /// Tells the observers what settle_qp() found for QP `id` (CNPs, a new rate) at `t`.
  void report_qp(QpId id, Time t);
  /// Every QP in use moved to `t` (compute_rates(), before the rates change).
  void settle_qps(Time t);
  /// Bytes a flow's sender has sent by `t` (its rate holds since fl.sent_t, or it stopped).
  double sent_now(const FlowState& fl, double t) const {
    return fl.sending ? fl.sent + fl.rate * (t - fl.sent_t) : fl.sent;
  }
  void rebuild();
  /// Lays out the hops of flow h's single route without rebuild(): in an empty slot of each
  /// link that is laid out, after the last link for the others, where that keeps the order in
  /// which links feed each other; false where it cannot.
  bool append(FlowHandle h);
  void compute_rates(Time at);
  /// Runs body(part, parts) for each part of the work: one part on this thread for small work
  /// or one thread, else parts_.size() parts (8 a thread) handed out to the threads as they
  /// come free. Parts write disjoint state and reduce exactly (or, min) into parts_[part], so
  /// results do not depend on the thread count.
  template <class Body>
  void in_parts(size_t work, Body&& body);
  /// Whether a pass over `work` items of the current computation is worth threads.
  bool parallel(size_t work) const;
  /// The nodes and QPs grouped for the passes on threads (nodes_..., qp_begin_...).
  void group();
  /// A link's queues from its hops' bytes, the lossless bytes still at their senders, and the
  /// ingress counters of the links its hops' bytes came over; the bytes it holds. `most` rises
  /// to the most bytes that one of its hops holds.
  double sum_queues(LinkState& s, double& most);
  /// Part `part` of `parts` of the links order_[lo, hi): contiguous, about equal in route hops.
  std::pair<uint32_t, uint32_t> link_part(uint32_t lo, uint32_t hi, size_t part,
                                          size_t parts) const;
  /// Part `part` of `parts` of nodes_, contiguous, about equal in route hops.
  std::pair<uint32_t, uint32_t> node_part(size_t part, size_t parts) const;
  /// One link's service over the interval `dt` (its classes, drops, the hops' departures);
  /// true when a class is not served in full or drops (in motion).
  bool serve(fabric::LinkId l, double dt);
  /// True when every route of ended_ sent alone on its port and its QP at the last computation
  /// (commit()).
  bool ended_alone() const;
  /// At rest, the routes of new_routes_ (each its flow's only route, laid out by append()) take
  /// their rates alone on their ports and QPs, and their links are served again with them; false
  /// where one is not alone or a link cannot carry it (a computation must run).
  bool start_at_rest();
  /// True when route r is the only route sending from its port (the link its sender is
  /// scheduled on).
  bool alone_on_port(uint32_t r) const;
  /// A link's queues over `dt` when it drops (a full lossy queue, or down): the bytes lost go
  /// back to their senders (true when there were some).
  bool integrate_losses(fabric::LinkId l, Time t, double dt);
  double xoff(fabric::LinkId l) const;
  void update_pauses(double now);
  void update_qp(QpState& q, double dt) const;
  /// A TCP connection's window over `dt` at its rate, or its cut after a loss.
  void update_tcp(QpState& q, double now, double dt) const;
  /// Largest lossy queue on a link (its sender a switch): the dynamic threshold of the free
  /// shared buffer, capped by lossy_limit; infinite elsewhere (hosts and devices do not drop).
  double lossy_cap(fabric::LinkId l) const;
  void detect_deadlock();
  /// A predicted event: a flow's sender ends (tracer false) or a route's last byte leaves its
  /// last queue (tracer true), at ps.
  struct Due {
    int64_t ps;
    uint32_t id;
    bool tracer;
    bool operator>(const Due& o) const {
      return ps > o.ps || (ps == o.ps && (id > o.id || (id == o.id && tracer > o.tracer)));
    }
  };
  /// When a Due happens at the current rates, from `now`; infinity if it cannot (gone, or
  /// waiting on a link that serves nothing).
  Time predict(const Due& d, double now) const;
  /// next_event_ from the current rates (senders' ends, last bytes, the next step); `full`
  /// after a computation of every rate, else only the last bytes of ended_ are new.
  void plan(double now, bool full);
  /// Whether a route's last byte has been sent and is still in a queue.
  static bool draining(const RouteState& rs) {
    return rs.live && !rs.sending && rs.tracer < rs.length;
  }
  /// A route's hops, in order.
  std::span<HopRef> path(const RouteState& rs) { return {refs_.data() + rs.path, rs.length}; }
  std::span<const HopRef> path(const RouteState& rs) const {
    return {refs_.data() + rs.path, rs.length};
  }
  /// A flow's sender sent its last byte at `now`: its routes' last bytes start on their way.
  void end_sending(FlowState& fl, double now);
  /// Whether a flow's sender has sent every byte by `t` but has not ended yet.
  bool sent_all(const FlowState& fl, double t) const {
    return fl.sending && sent_now(fl, t) >= fl.bytes * (1 - 1e-12) - 1e-6;
  }
  /// Whether every hop of a flow is empty.
  bool drained(const FlowState& fl) const;
  /// When every hop of a flow will be empty at the current rates (infinity: not before they
  /// change).
  double empty_time(const FlowState& fl) const;
  /// At `to`: flow h's sender ends if it sent all, and the flow is delivered (to `finished`)
  /// once its last bytes are through and its hops are empty.
  void end_flow(uint32_t h, double to, std::vector<Completion>& finished);
  /// Moves a sent route's last byte through the queues for `budget` seconds at the current
  /// service rates; true when it has left the last one.
  bool trace(RouteState& rs, double& budget);
  double marking(const LinkState& l, double q) const;
  /// The step may grow past network.step (max_step above it): the bounds of the adaptive step
  /// are worked out only then.
  bool adaptive() const { return config_.max_step > config_.step; }
  /// The adaptive step's bound from PFC: the earliest time an ingress counter of the nodes whose
  /// egress links are `links` reaches its XOFF, or a send queue there the device buffer, at the
  /// rates just planned.
  double pfc_horizon(std::span<const fabric::LinkId> links);

  const fabric::Fabric& fabric_;
  FluidConfig config_;
  int threads_ = 1;
  // What each part of a parallel pass reduces (one cache line each).
  struct alignas(64) Part {
    bool moving = false;
    bool eager = false;  // a link drops or is down
    bool rdma = false;   // a route other than TCP's sends
    double wake = 1e300;
    double min_rtt = 1e300;    // the least base round trip of the TCP routes that send
    double most_held = 0;      // the most bytes one route hop holds
    double calm = 1e300;       // s, the least LinkState::calm of the part's links
    double rate_calm = 1e300;  // s, settle_qps()'s bound on the adaptive step
    std::vector<std::pair<double, uint32_t>> senders;  // the port max-min's scratch
    std::vector<uint32_t> found;  // what a pass leaves to its one-thread tail, in order
    std::vector<Due> due;         // predictions made, in slot order
  };
  std::vector<Part> parts_;
  std::vector<LinkState> links_;
  std::vector<PfcDiagnostics> stats_;
  std::vector<double> unmarked_;     // 1 - the marking probability of each link's egress queue
  std::vector<double> node_used_;    // bytes queued in each node's egress queues
  std::vector<double> node_drift_;   // bytes/s those change by at the rates planned (adaptive step)
  std::vector<double> node_buffer_;  // shared buffer of each switch (0: a device)
  SlotPool<RouteState> routes_;
  SlotPool<FlowState> flows_;
  std::vector<QpState> qps_;
  std::vector<uint32_t> live_routes_;  // in slot order after rebuild()
  // The links with route hops (or a pause or a queue to watch), upstream before downstream.
  std::vector<fabric::LinkId> order_;
  // order_ by level: no link of order_[levels_[v], levels_[v + 1]) feeds another of them (the
  // links of a routing loop, after the last level, are served in order on one thread).
  std::vector<uint32_t> levels_;
  std::vector<uint32_t> order_end_;           // links_[order_[i]].end (non-decreasing)
  std::vector<fabric::LinkId> sender_links_;  // the links of order_ that schedule senders
  // The nodes that send on links of order_, each with those links in order_'s order
  // (node_links_[node_begin_[i], node_begin_[i + 1])), and the route hops on the links of the
  // nodes before and with each (node_hops_[i], for splitting them in parts).
  std::vector<fabric::NodeId> nodes_;
  std::vector<uint32_t> node_begin_, node_hops_;
  std::vector<fabric::LinkId> node_links_;
  std::vector<uint32_t> node_slot_;  // rebuild()'s scratch: a node's index in nodes_
  // The live routes of each QP of in_use_: qp_routes_[qp_begin_[i], qp_begin_[i + 1]).
  std::vector<uint32_t> qp_begin_, qp_routes_;
  bool grouped_ = false;  // threads will work: nodes_ and qp_begin_ are made (rebuild())
  /// Route hops from which a computation is split between threads, when there are several.
  static constexpr size_t kGroupFrom = 8192;
  bool regroup_ = false;         // routes appended since the last group()
  std::vector<uint32_t> slots_;  // append()'s scratch: each hop's empty slot, or kNoIndex
  std::vector<Hop> hops_;
  // The routes' hops, each route's in a row (live routes in slot order after rebuild(); those
  // set since at the end).
  std::vector<HopRef> refs_;
  // Each hop's departure rate (bytes/s), beside hops_: the next hop of its route reads it.
  std::vector<double> out_;
  // rebuild()'s scratch, kept between calls.
  std::vector<Hop> next_hops_;
  std::vector<double> next_out_;
  std::vector<HopRef> next_refs_;
  std::vector<uint32_t> scratch_;
  std::vector<fabric::LinkId> touched_;
  std::vector<uint32_t> indegree_, succ_begin_, succ_, fill_, ready_, count_;
  std::vector<double> share_on_link_;    // start(): shares per link of an in-network reduction
  std::vector<int32_t> deadlock_index_;  // detect_deadlock(): paused link -> its index
  bool dirty_ = false;                   // routes came, or empty hops cost too much: rebuild
  bool added_ = false;                   // flows started since the last computation
  bool delivered_ = false;               // flows ended since the last computation
  size_t retired_hops_ = 0;              // hops of routes retired since the last rebuild
  size_t waste_ = 0;             // empty hops the computations since the last rebuild passed over
  std::vector<uint32_t> ended_;  // routes whose sender finished since the last computation
  std::vector<uint32_t> new_routes_;  // routes added since the last computation
  bool only_starts_ = true;  // nothing but flows that started changed since (no reroute, ...)
  std::vector<uint32_t> draining_;  // routes whose last byte may be in a queue (draining())
  std::vector<QpId> in_use_;        // QPs of the live routes (rebuild()), in the routes' order
  bool tcp_ = false;                // a route of TCP was ever added
  std::vector<uint32_t> retired_;   // routes done, released at the next rebuild
  Time grid_{};                     // the step after the last computation
  double stretch_ = 1;              // steps the last computation planned for
  double rate_calm_ = 1e300;        // s, until a QP's rate moves by step_tolerance (settle_qps())
  std::vector<Due> due_;            // a heap, earliest first
  size_t active_flows_ = 0;
  double now_ = 0;  // s, the time the state was moved to (integrate())
  Time clock_{};    // the same, as the engine gave it
  // s, the time to which the route hops' queues are counted: a hop holds b + (a - d) (t -
  // hops_t_) at t until the next settle_hops() (a computation, or every event while eager_).
  double hops_t_ = 0;
  bool eager_ = true;  // links drop or TCP runs: queues move at every event (integrate())
  // Flows whose sender ended and whose last bytes are through, waiting for the queues they
  // left bytes in to empty (complete() looks at them, and at the flows due, not at every flow).
  std::vector<uint32_t> residue_;
  std::vector<uint32_t> candidates_;              // complete()'s scratch
  std::vector<size_t> heap_walk_;                 // due_by()'s scratch: due_'s entries due
  std::vector<uint32_t> due_flows_, due_routes_;  // due_by()
  std::vector<uint32_t> emptied_;  // flows whose last route's last byte got through now
  bool moving_ = false;            // queues, pauses or rate control in motion: step
  Time next_event_ = Time::infinity();
  double wake_ = 1e300;  // s, the earliest end of a TCP time-out, when nothing else moves
  uint64_t steps_ = 0;
  uint64_t layouts_ = 0;
  bool shortcuts_ = true;
};

/// The `network` section when `model: fluid`.
const ParamTable& fluid_table();
std::span<const ParamTable* const> fluid_subtables();
FluidConfig read_fluid(const ParamReader& section);
std::unique_ptr<NetworkModel> make_fluid(const ParamReader& section, const fabric::Fabric& f,
                                         const ModelOptions& options);

}  // namespace rocesim::network
