// One simulation: a sealed fabric, a router, a network model and the workloads that drive them.
// There is no global state; tests, sweeps and notebooks may hold many simulations at once.
//
// The loop, one instant at a time:
//   t = min(next network event, next queued event)
//   network.advance(t)      -> flows whose last byte left the sender at t; each is delivered to
//                              the receiver one path latency later (an event, maybe at t itself)
//   run every event at t    -> deliveries complete transfers, workloads post new transfers
//   network.commit(t)       -> rates recomputed once for everything that started or ended at t
// Simultaneous completions are therefore one event for the rate model.
//
// Connections and QPs: a workload opens a connection between two GPUs with a number of QPs (as
// NCCL_IB_QPS_PER_CONNECTION does). Each QP has its own RoCEv2 header (QP numbers and UDP
// source port from the QpAllocator), hence its own path, routed when first used and cached. A
// transfer is cut into messages; each message goes to the next QP in turn (round robin) or is
// split evenly across all of them (NCCL_IB_SPLIT_DATA_ON_QPS=1). Messages on one QP follow each
// other back to back, so at flow level each QP used by a transfer carries one flow with the sum
// of its messages. Transfers between GPUs of one server use NVLink.
//
// The network model sees each flow as its routes (one per QP; a pipeline's edges each with their
// own), the QP ids (so that transport state such as a DCQCN rate lives across messages) and the
// connection's traffic class. It reports a flow when its last byte has come through the queues
// on its way (with how long that took); the receiver has it one path latency later.
//
// Links change during a run (link events): a link goes down (its capacity in the network model
// becomes 0 at once, and the flows on it stall), comes up, or runs at another speed. The router
// sees the change after its reconvergence delay: then every routed QP is asked for its path
// again, and a QP whose path differs moves, with the running flows that use it (each flow's
// bytes count on each path what it sent there). Routing also changes with flowlets (a QP idle
// longer than the router's flowlet timeout is routed again at its next burst) and with a
// controller's periodic computation (traffic engineering). A sprayed QP (adaptive routing) has
// several paths with shares: its flows carry one route per path. Routers read the links through
// a LinkView the simulation supplies (up as routing last converged on it, capacity and load
// now).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/core/error.hpp"
#include "sim/core/slot_pool.hpp"
#include "sim/core/units.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/workload.hpp"
#include "sim/fabric/fabric.hpp"
#include "sim/fabric/roce.hpp"
#include "sim/network/network_model.hpp"
#include "sim/routing/path.hpp"
#include "sim/routing/router.hpp"

namespace rocesim::engine {

using ConnectionId = uint32_t;
using QpIndex = uint32_t;

enum class QpMode : uint8_t {
  RoundRobin,  // each message goes to the next QP of the connection (NCCL's default)
  Split,       // each message is split evenly across all QPs (NCCL_IB_SPLIT_DATA_ON_QPS=1)
  /// Each message is cut into pieces of max(min_chunk_bytes, message / QPs), which go to the
  /// next QPs in turn, the position carrying over from one message to the next (NCCL's socket
  /// plugin over its sockets: tasks of at least 64 KiB).
  Chunked,
};

/// How a connection posts data: QPs, how messages map to them, and the message size.
struct ConnectionSpec {
  uint32_t qps = 1;
  QpMode mode = QpMode::RoundRobin;
  /// Transfers are cut into messages of this size (the last one shorter); 0 = one message per
  /// transfer. NCCL posts one RDMA write per buffer step (512 KiB with Simple's 4 MiB buffer).
  int64_t message_bytes = 0;
  /// QpMode::Chunked: the least piece of a message, a power of two (0: none).
  int64_t min_chunk_bytes = 0;
  /// Send through this GPU's NIC (a GPU of the sender's server, reached over NVLink: NCCL's PXN)
  /// rather than the sender's own; kNone: the sender's own NIC.
  fabric::NodeId relay = fabric::kNone;
  /// Which of its NICs the sending GPU (the relay under PXN) and the receiver use, where GPUs
  /// own several (fabric::Server::nics_per_gpu()); 0 otherwise.
  uint32_t port = 0;
  network::TrafficClass traffic_class = network::TrafficClass::Lossless;
  /// TCP puts the connection's fabric traffic in the lossy class (inside a server it is NVLink
  /// whatever the transport).
  network::Transport transport = network::Transport::Rdma;
  /// Between two GPUs of one server, go through their NICs and the fabric instead of the
  /// server's own interconnect (NCCL's network transport inside a node, where the GPUs' NICs
  /// are faster than the PCIe path between them).
  bool through_nics = false;
};

/// One connection of a pipeline and the share of the pipeline's bytes it carries.
struct PipelineLeg {
  ConnectionId connection = 0;
  double share = 1.0;
};

enum class LinkAction : uint8_t {
  Down,   // capacity 0; routing withdraws the link after its reconvergence delay
  Up,     // back at its speed; routing uses it again after its reconvergence delay
  Speed,  // runs at `speed` x its nominal rate (e.g. 0.5: a 400G port at 200G); routing unchanged
};

/// A change of some links at a time: a cable is its two directed links, a switch all of its.
struct LinkEvent {
  Time at{};
  LinkAction action = LinkAction::Down;
  std::vector<fabric::LinkId> links;
  double speed = 1;  // Speed: fraction of the nominal rate
  std::string what;  // for results, e.g. "down leaf0-spine1"
  SourceLocation where;
  std::string key;  // its key in the scenario, e.g. "events[2].action", for errors
  // Filled in by the run:
  bool applied = false;
  Time converged = Time::infinity();  // when routing reflected it (Down and Up)
  uint64_t qps_rerouted = 0;          // QPs whose path changed then
  uint64_t flows_rerouted = 0;        // running flows moved then
  uint64_t qps_unroutable = 0;        // QPs left without any path (they keep waiting)
};

struct SimulationConfig {
  uint64_t seed = 1;
  fabric::SourcePortPolicy source_port = fabric::SourcePortPolicy::Linux;
};

/// One flow (the part of a transfer carried by one QP), as observers see it when delivered.
struct FlowRecord {
  uint64_t id = 0;  // in order of start
  WorkloadId workload = 0;
  fabric::NodeId src = fabric::kNone;  // GPUs
  fabric::NodeId dst = fabric::kNone;
  QpIndex qp = 0;  // for a pipeline: the first QP of its first leg
  routing::PathId path = 0;
  uint32_t legs = 1;  // connections the flow spans (a pipeline has several)
  Bytes bytes{};      // per leg
  /// Of `bytes`, those carried on `path`: all of them unless routing moved the flow during
  /// its life (the rest went to Observer::on_path_bytes for the paths it left).
  Bytes path_bytes{};
  Time start{};
  Time bandwidth_end{};  // last byte left the sender
  Time delivered{};      // last byte arrived: bandwidth_end + path latency + queueing
};

struct QpInfo {
  ConnectionId connection;
  fabric::FlowKey key;  // all zero for NVLink connections
  /// Its path; for a QP whose packets are sprayed, the union of its paths, each link weighted
  /// by the share of the QP's bytes it carries.
  routing::PathId path = fabric::kNone;
  uint32_t sub_begin = 0, sub_count = 0;  // sprayed: its paths in Simulation's sub-route list
  bool nvlink = false;  // its connection's, kept here: asked at every transfer of a rerouting
                        // scheme, where a look into the connection costs a cache miss
};

/// Receives what happens; writers and statistics subscribe, models never write files.
class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_qp_routed(QpIndex qp, routing::PathId path);
  /// Routing moved a QP from path `from` to path `to` after a link event.
  virtual void on_qp_rerouted(QpIndex qp, routing::PathId from, routing::PathId to);
  /// A running flow left `path` after carrying `bytes` on it (routing moved it).
  virtual void on_path_bytes(routing::PathId path, Bytes bytes);
  virtual void on_flow_delivered(const FlowRecord& flow);
  virtual void on_workload_done(WorkloadId w, Time start, Time end);
};

struct Progress {
  Time now;
  uint64_t events = 0;
  uint64_t flows_delivered = 0;
  size_t active_flows = 0;
  double wall_seconds = 0;
};

struct WorkloadState {
  std::unique_ptr<Workload> workload;
  Time start_at{};                // earliest start
  std::vector<WorkloadId> after;  // must finish first
  std::vector<WorkloadId> dependents;
  uint32_t waiting = 0;
  bool started = false;
  bool done = false;
  Time start{}, end{};
  uint64_t flows = 0;
  int64_t bytes = 0;
  double fct_sum_s = 0;
  Time fct_max{};
};

class Simulation {
 public:
  Simulation(const fabric::Fabric& f, routing::Router& router, network::NetworkModel& net,
             const SimulationConfig& config);
  ~Simulation();
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  // ---- set-up ----
  WorkloadId add_workload(std::unique_ptr<Workload> w, Time start_at,
                          std::vector<WorkloadId> after = {});
  void add_observer(Observer* o) { observers_.push_back(o); }
  /// Schedules a change of links (see LinkEvent); returns its index in link_events().
  uint32_t add_link_event(LinkEvent e);
  void set_progress(std::function<void(const Progress&)> cb, double interval_seconds);
  /// Runs until every workload has finished. Throws InternalError if traffic stalls.
  void run();

  // ---- for workloads ----
  Time now() const { return now_; }
  const fabric::Fabric& fabric() const { return fabric_; }
  uint64_t seed() const { return config_.seed; }
  ConnectionId connect(fabric::NodeId src_gpu, fabric::NodeId dst_gpu, const ConnectionSpec& spec,
                       std::span<const fabric::NodeId> via = {});
  /// Posts `bytes` on a connection; each of its flows is capped at `rate_cap` bytes/s (e.g. a
  /// credit window over a round trip) and may have at most `window` bytes in flight at once
  /// (receiver-driven admission; 0: none).
  void transfer(WorkloadId w, ConnectionId c, Bytes bytes, uint64_t tag,
                double rate_cap = network::kNoRateCap, double window = 0);
  /// First-byte latency of a connection's path (of its first QP; routes it if need be).
  Time connection_latency(ConnectionId c);
  /// Moves `bytes` over every leg at once, in lockstep, as one fluid flow across the union of
  /// the legs' links (each leg's bytes spread evenly over its QPs): the network model for a
  /// pipelined collective channel, whose edges all move the same data and whose throughput is
  /// that of its slowest edge. `rate_cap` (bytes/s) bounds it, e.g. a credit window over a round
  /// trip. The transfer is done when its bandwidth phase ends: the workload adds the pipeline's
  /// latency itself. `via` of the legs' connections is honoured.
  /// With `reduce_in_switches` (in-network reduction, CollNet/SHARP) a link between two fabric
  /// switches carries one reduced stream however many legs cross it.
  /// `window` (0: none) bounds the bytes in flight on each leg (one credit window per
  /// connection, spread over its QPs).
  void pipeline(WorkloadId w, std::span<const PipelineLeg> legs, Bytes bytes, double rate_cap,
                uint64_t tag, bool reduce_in_switches = false, double window = 0);
  void timer(WorkloadId w, Time at, uint64_t tag);
  void finish(WorkloadId w);

  // ---- results ----
  std::span<const WorkloadState> workloads() const { return workloads_; }
  const routing::PathTable& paths() const { return paths_; }
  std::span<const QpInfo> qps() const { return qps_; }
  /// QP index range [first, first + count) of a connection.
  std::pair<QpIndex, uint32_t> connection_qps(ConnectionId c) const {
    return {connections_[c].first_qp, connections_[c].qps};
  }
  /// Sending and receiving GPU of a connection.
  std::pair<fabric::NodeId, fabric::NodeId> connection_endpoints(ConnectionId c) const {
    return {connections_[c].src, connections_[c].dst};
  }
  std::span<const LinkEvent> link_events() const { return link_events_; }
  const routing::Router& router() const { return router_; }
  /// Flowlet switching (a router with a finite flowlet timeout): bursts that came after an
  /// idle gap and were routed again, those that took another path, and those of them whose
  /// first byte could arrive before the previous burst's last (reordering at the receiver).
  uint64_t flowlets() const { return flowlets_; }
  uint64_t flowlet_moves() const { return flowlet_moves_; }
  uint64_t flowlet_reorders() const { return flowlet_reorders_; }
  /// Periodic recomputations of a router that has them (traffic engineering), and the QPs and
  /// running flows they moved in all.
  uint64_t recomputations() const { return recomputations_; }
  uint64_t recompute_qps() const { return recompute_qps_; }
  uint64_t recompute_flows() const { return recompute_flows_; }
  /// Whether a link is up now, and its capacity now (bytes/s of payload; 0 while down).
  bool link_up(fabric::LinkId l) const { return link_up_[l] != 0; }
  double link_capacity(fabric::LinkId l) const;
  /// Moves whenever a QP takes a path or a link's capacity changes: what a workload derived
  /// from the QPs' paths and the links' capacities holds while it has not moved.
  uint64_t paths_version() const { return paths_version_; }
  uint64_t events() const { return events_; }
  uint64_t flows_started() const { return next_flow_id_; }
  Time end_time() const { return now_; }

 private:
  struct Connection {
    int64_t message_bytes;
    fabric::NodeId src, dst;
    QpIndex first_qp;
    uint32_t qps;
    uint32_t next = 0;  // round-robin position
    uint32_t via_begin, via_end;
    fabric::NodeId relay;
    uint16_t port;
    QpMode mode;
    network::TrafficClass traffic_class;
    network::Transport transport;
    bool nvlink;         // inside one server: never routed through the fabric
    bool through_nics;   // between GPUs of one server, through their NICs and the fabric
    uint8_t chunk_log2;  // QpMode::Chunked: log2 of the least piece (0: none)
  };
  static_assert(sizeof(Connection) == 48);
  /// QpMode::Chunked: adds to qp_bytes_ what `total` bytes of a connection's messages put on
  /// each of its QPs, and moves its position on.
  void chunk_messages(Connection& c, int64_t total);
  struct Transfer {
    uint64_t tag;
    WorkloadId workload;
    uint32_t pending;  // flows not yet delivered
  };
  struct Running {  // a flow from its start to its delivery
    uint32_t transfer;
    QpIndex qp;
    routing::PathId path;
    uint32_t legs;
    // Its connection's ends, copied at the start (where the connection is in hand) so that the
    // delivery reads no QP or connection: those tables are the largest (an AlltoAll's).
    fabric::NodeId src, dst;
    uint64_t id;
    int64_t bytes;
    Time start;
    Time bandwidth_end;
    Time delivered;
    network::FlowHandle handle;
    bool live;
    int64_t moved_bytes;  // carried on paths routing moved the flow off
  };
  /// The links as routers see them.
  class RoutingView final : public routing::LinkView {
   public:
    explicit RoutingView(const Simulation& sim) : sim_(sim) {}
    bool up(fabric::LinkId l) const override { return sim_.routed_up_[l] != 0; }
    double capacity(fabric::LinkId l) const override { return sim_.link_capacity(l); }
    double load(fabric::LinkId l) const override { return sim_.net_.link_load(l); }
    Time now() const override { return sim_.now_; }

   private:
    const Simulation& sim_;
  };

  routing::PathId path_of(QpIndex qp);
  /// What the router is asked for a QP.
  routing::RouteRequest request(QpIndex qp) const;
  /// Whether the request's NIC spreads its QP over entropies itself (a multipath NIC).
  bool nic_sprays(const routing::RouteRequest& req) const;
  /// Asks the router for a QP's paths into spread_; false when there is none now.
  bool route_qp(QpIndex qp);
  /// Whether spread_ is the QP's current routing.
  bool same_route(QpIndex qp) const;
  /// Makes spread_ the QP's routing (interns its paths); returns the QP's path (or union).
  routing::PathId assign_route(QpIndex qp);
  /// The routes a flow on `qp` carrying `share` of its bytes takes (several if sprayed).
  void append_routes(QpIndex qp, double share, std::vector<network::Route>& out) const;
  /// Calls f(path, share) for each route a flow on `qp` carrying `share` of its bytes takes.
  template <typename F>
  void for_each_route(QpIndex qp, double share, F&& f) const;
  /// Calls f(qp, share) for every QP of a pipeline's legs, with its share of the bytes.
  template <typename F>
  void for_each_leg_qp(std::span<const PipelineLeg> legs, F&& f) const;
  /// The routes of a running flow over its QPs' current paths, into pipe_routes_.
  void flow_routes(uint32_t slot);
  /// Whether a running flow is a pipeline (several legs; else one QP's flow).
  bool is_pipeline(uint32_t slot) const;
  /// Calls f(qp) for every QP a running flow uses.
  template <typename F>
  void for_each_qp(uint32_t slot, F&& f) const;
  /// A burst is about to start on a QP: after an idle gap longer than the flowlet timeout it
  /// is a new flowlet, routed again.
  void new_burst(QpIndex qp);
  void apply_link_event(uint32_t e);
  void reconverge(uint32_t e);
  void recompute();
  /// Routes every routed QP again; moves those whose path changed, with their running flows.
  void reroute_all(uint64_t& qps_moved, uint64_t& flows_moved, uint64_t& unroutable);
  /// Why workloads that never finished are stuck, thrown as an error.
  [[noreturn]] void report_stall() const;
  void start_flow(uint32_t transfer, QpIndex qp, int64_t bytes, double rate_cap, double window);
  /// Starts a flow in the network model; returns its engine flow slot.
  uint32_t start_running(uint32_t transfer, QpIndex qp, routing::PathId path, uint32_t legs,
                         const network::FlowSpec& spec);
  void start_workload(WorkloadId w);
  void dispatch(const Event& e);
  void deliver(uint32_t flow);
  void report_progress(bool force);

  const fabric::Fabric& fabric_;
  routing::Router& router_;
  network::NetworkModel& net_;
  RoutingView view_{*this};
  SimulationConfig config_;
  fabric::QpAllocator qp_alloc_;
  routing::PathTable paths_;
  EventQueue queue_;
  Time now_{};

  std::vector<WorkloadState> workloads_;
  std::vector<Observer*> observers_;
  std::vector<Connection> connections_;
  std::vector<fabric::NodeId> via_;
  std::vector<QpInfo> qps_;
  SlotPool<Transfer> transfers_;
  SlotPool<Running> running_;             // by engine flow slot
  std::vector<uint32_t> slot_of_handle_;  // network handle -> engine flow slot
  DeliveryLanes<uint32_t> deliveries_;    // bandwidth phase over, waiting for the last byte
  std::vector<uint32_t> lane_of_path_;    // delivery lane of each path (by its latency)
  uint64_t paths_version_ = 0;            // see paths_version()
  std::vector<network::Completion> finished_;
  routing::Spread spread_;   // the router's last answer
  routing::Spread entropy_;  // one entropy's answer, for a multipath NIC's spread
  struct SubRoute {
    routing::PathId path;
    double share;
  };
  std::vector<SubRoute> sub_routes_;  // of sprayed QPs (QpInfo::sub_begin, sub_count)
  std::vector<network::Route> flow_routes_;
  std::vector<int64_t> qp_bytes_;    // per QP of the connection being posted to
  std::vector<double> link_weight_;  // scratch per link while merging a pipeline's legs
  std::vector<network::Route> pipe_routes_;
  std::vector<fabric::LinkId> pipe_links_;
  std::vector<double> pipe_weights_;
  // The unions of pipelines already started, by what they are made of: each route's path and
  // share (and in-network reduction), so that an operation repeated on the same connections
  // and routes finds its union without merging its legs again.
  struct PipeUnion {
    std::vector<uint64_t> key;
    routing::PathId path;
    bool plain;  // every weight 1
  };
  std::vector<PipeUnion> pipe_unions_;
  std::unordered_multimap<uint64_t, uint32_t> pipe_union_of_;  // key hash -> pipe_unions_
  std::vector<uint64_t> pipe_key_;
  std::vector<std::vector<PipelineLeg>> pipe_legs_;  // by engine flow slot, for pipelines
  // Links: up now, up as routing last converged, speed as a fraction of nominal.
  std::vector<uint8_t> link_up_, routed_up_;
  std::vector<double> link_speed_;
  bool nics_spray_;  // some server's NICs spread a QP over several paths (nic_sprays)
  std::vector<LinkEvent> link_events_;
  std::vector<uint8_t> qp_moved_;  // reconverge()'s scratch
  // Flowlet switching (only with a finite router_.flowlet_timeout()): per QP, flows running on
  // it, when its last one left the sender and the latest delivery of its flows.
  Time flowlet_timeout_ = Time::infinity();
  std::vector<uint32_t> qp_busy_;
  std::vector<Time> qp_idle_since_, qp_last_delivered_;
  /// Per QP: the router's version of the spread it was last routed by (kNoVersion: unknown).
  std::vector<uint64_t> qp_spread_version_;
  uint64_t flowlets_ = 0, flowlet_moves_ = 0, flowlet_reorders_ = 0;
  uint64_t recomputations_ = 0, recompute_qps_ = 0, recompute_flows_ = 0;
  uint32_t workloads_done_ = 0;
  uint64_t next_flow_id_ = 0;
  uint64_t events_ = 0;
  uint64_t delivered_ = 0;

  std::function<void(const Progress&)> progress_;
  double progress_interval_ = 1.0;
  std::chrono::steady_clock::time_point wall_start_, wall_last_;
};

}  // namespace rocesim::engine
