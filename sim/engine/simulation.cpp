#include "sim/engine/simulation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <numeric>

namespace rocesim::engine {

void Workload::on_timer(Simulation&, WorkloadId, uint64_t) {}
void Workload::figures(WorkloadFigures&, Time) const {}
void Workload::trace(std::vector<TraceSpan>&) const {}

void Observer::on_qp_routed(QpIndex, routing::PathId) {}
void Observer::on_qp_rerouted(QpIndex, routing::PathId, routing::PathId) {}
void Observer::on_path_bytes(routing::PathId, Bytes) {}
void Observer::on_flow_delivered(const FlowRecord&) {}
void Observer::on_workload_done(WorkloadId, Time, Time) {}

Simulation::Simulation(const fabric::Fabric& f, routing::Router& router, network::NetworkModel& net,
                       const SimulationConfig& config)
    : fabric_(f),
      router_(router),
      net_(net),
      config_(config),
      qp_alloc_(f, config.seed, config.source_port),
      link_up_(f.link_count(), 1),
      routed_up_(f.link_count(), 1),
      link_speed_(f.link_count(), 1.0),
      nics_spray_(std::ranges::any_of(f.servers(),
                                      [](const fabric::Server& s) { return s.nic_paths > 1; })) {
  ROCESIM_CHECK(f.sealed(), "simulations run on sealed fabrics");
  router_.attach(&view_);
  flowlet_timeout_ = router_.flowlet_timeout();
}

bool Simulation::is_pipeline(uint32_t slot) const {
  return slot < pipe_legs_.size() && !pipe_legs_[slot].empty();
}

template <typename F>
void Simulation::for_each_qp(uint32_t slot, F&& f) const {
  if (is_pipeline(slot)) {
    for (const PipelineLeg& leg : pipe_legs_[slot]) {
      const Connection& c = connections_[leg.connection];
      for (uint32_t q = 0; q < c.qps; ++q)
        f(c.first_qp + q);
    }
  } else {
    f(running_[slot].qp);
  }
}

void Simulation::new_burst(QpIndex q) {
  QpInfo& info = qps_[q];
  // NVLink has no routes; the first burst is routed when the QP is first used; a busy QP's
  // burst joins its flowlet.
  if (info.nvlink || info.path == fabric::kNone || qp_busy_[q] > 0) return;
  if (now_ - qp_idle_since_[q] <= flowlet_timeout_) return;
  ++flowlets_;
  // A router that can tell its spread has not changed since the QP's (adaptive routing between
  // two leaves, where every burst is spread again) saves spreading it to compare.
  const routing::RouteRequest req = request(q);
  const uint64_t version =
      nic_sprays(req) ? routing::Router::kNoVersion : router_.spread_version(req);
  if (version != routing::Router::kNoVersion && version == qp_spread_version_[q]) return;
  if (!route_qp(q)) return;  // nowhere to go now: it stays
  qp_spread_version_[q] = version;
  if (same_route(q)) return;  // the same: it stays
  const routing::PathId from = info.path;
  assign_route(q);
  ++flowlet_moves_;
  // Its first byte arrives one path latency from now; the previous burst's last arrived (or
  // will arrive) at qp_last_delivered_.
  if (now_ + paths_.latency(info.path) < qp_last_delivered_[q]) ++flowlet_reorders_;
  for (Observer* o : observers_)
    o->on_qp_rerouted(q, from, info.path);
}

double Simulation::link_capacity(fabric::LinkId l) const {
  return link_up_[l] ? link_speed_[l] * fabric_.link(l).capacity.bytes_per_second() : 0.0;
}

uint32_t Simulation::add_link_event(LinkEvent e) {
  ROCESIM_CHECK(!e.links.empty(), "a link event changes at least one link");
  ROCESIM_CHECK(e.speed > 0, "a link's speed is a positive fraction of its nominal rate");
  for (const fabric::LinkId l : e.links)
    ROCESIM_CHECK(l < fabric_.link_count(), "link event on a link of the fabric");
  const auto i = static_cast<uint32_t>(link_events_.size());
  queue_.push(e.at, EventKind::LinkChange, i);
  link_events_.push_back(std::move(e));
  return i;
}

void Simulation::apply_link_event(uint32_t i) {
  LinkEvent& e = link_events_[i];
  e.applied = true;
  ++paths_version_;
  for (const fabric::LinkId l : e.links) {
    switch (e.action) {
      case LinkAction::Down:
        link_up_[l] = 0;
        break;
      case LinkAction::Up:
        link_up_[l] = 1;
        break;
      case LinkAction::Speed:
        link_speed_[l] = e.speed;
        break;
    }
    net_.set_capacity(l, link_capacity(l), now_);
  }
  if (e.action != LinkAction::Speed) {
    queue_.push(now_ + router_.reconvergence(), EventKind::Reconverge, i);
  }
}

routing::RouteRequest Simulation::request(QpIndex qp) const {
  const QpInfo& info = qps_[qp];
  const Connection& c = connections_[info.connection];
  routing::RouteRequest req;
  req.src = c.src;
  req.dst = c.dst;
  req.key = info.key;
  req.via = std::span<const fabric::NodeId>(via_.data() + c.via_begin, c.via_end - c.via_begin);
  req.relay = c.relay;
  req.port = c.port;
  req.through_nics = c.through_nics;
  return req;
}

bool Simulation::nic_sprays(const routing::RouteRequest& req) const {
  // A multipath NIC (EFA's SRD) spreads the QP itself over its entropies, across servers. (Asked
  // at every new burst: a fabric without such NICs answers without looking at the servers.)
  return nics_spray_ && fabric_.server_of(req.sender()).nic_paths > 1 &&
         (req.through_nics || fabric_.node(req.sender()).server != fabric_.node(req.dst).server);
}

bool Simulation::route_qp(QpIndex qp) {
  const routing::RouteRequest req = request(qp);
  if (nic_sprays(req)) {
    return routing::spread_over_entropies(router_, req, fabric_.server_of(req.sender()).nic_paths,
                                          spread_, entropy_);
  }
  return router_.spread(req, spread_);
}

bool Simulation::same_route(QpIndex qp) const {
  const QpInfo& info = qps_[qp];
  const size_t n = info.sub_count == 0 ? 1 : info.sub_count;
  if (spread_.size() != n) return false;
  for (size_t i = 0; i < n; ++i) {
    const routing::PathId p =
        info.sub_count == 0 ? info.path : sub_routes_[info.sub_begin + i].path;
    const double share = info.sub_count == 0 ? 1.0 : sub_routes_[info.sub_begin + i].share;
    const std::span<const fabric::LinkId> mine = paths_.links(p), theirs = spread_.path(i);
    if (share != spread_.share[i] ||
        !std::equal(mine.begin(), mine.end(), theirs.begin(), theirs.end())) {
      return false;
    }
  }
  return true;
}

routing::PathId Simulation::assign_route(QpIndex qp) {
  ++paths_version_;
  QpInfo& info = qps_[qp];
  if (spread_.size() == 1) {
    info.sub_count = 0;
    info.path = paths_.add(fabric_, spread_.path(0));
    lane_of_path_.push_back(deliveries_.lane_for(paths_.latency(info.path)));
    return info.path;
  }
  // Sprayed: each path interned, and their union weighted by the shares, whose latency is the
  // slowest path's (the last byte comes by it).
  info.sub_begin = static_cast<uint32_t>(sub_routes_.size());
  info.sub_count = static_cast<uint32_t>(spread_.size());
  Time latency{};
  for (size_t i = 0; i < spread_.size(); ++i) {
    const routing::PathId p = paths_.add(fabric_, spread_.path(i));
    lane_of_path_.push_back(deliveries_.lane_for(paths_.latency(p)));
    latency = std::max(latency, paths_.latency(p));
    sub_routes_.push_back({p, spread_.share[i]});
  }
  flow_routes_.clear();
  append_routes(qp, 1.0, flow_routes_);
  network::FlowSpec spec;
  spec.routes = flow_routes_;
  network::merge_routes(fabric_, spec, link_weight_, pipe_links_, pipe_weights_);
  info.path = paths_.add_weighted(pipe_links_, pipe_weights_, latency);
  lane_of_path_.push_back(deliveries_.lane_for(latency));
  return info.path;
}

template <typename F>
void Simulation::for_each_route(QpIndex qp, double share, F&& f) const {
  const QpInfo& info = qps_[qp];
  if (info.sub_count == 0) {
    f(info.path, share);
    return;
  }
  for (uint32_t i = 0; i < info.sub_count; ++i) {
    const SubRoute& s = sub_routes_[info.sub_begin + i];
    f(s.path, share * s.share);
  }
}

template <typename F>
void Simulation::for_each_leg_qp(std::span<const PipelineLeg> legs, F&& f) const {
  for (const PipelineLeg& leg : legs) {
    const Connection& c = connections_.at(leg.connection);
    const double per_qp = leg.share / c.qps;
    for (uint32_t q = 0; q < c.qps; ++q)
      f(c.first_qp + q, per_qp);
  }
}

void Simulation::append_routes(QpIndex qp, double share, std::vector<network::Route>& out) const {
  const Connection& c = connections_[qps_[qp].connection];
  for_each_route(qp, share, [&](routing::PathId p, double s) {
    out.push_back({paths_.links(p), s, qp, c.traffic_class, c.transport});
  });
}

void Simulation::flow_routes(uint32_t slot) {
  const Running& r = running_[slot];
  pipe_routes_.clear();
  if (is_pipeline(slot)) {
    for_each_leg_qp(pipe_legs_[slot],
                    [&](QpIndex q, double share) { append_routes(q, share, pipe_routes_); });
  } else {
    append_routes(r.qp, 1.0, pipe_routes_);
  }
}

void Simulation::reconverge(uint32_t i) {
  routed_up_ = link_up_;
  router_.links_changed();
  LinkEvent& e = link_events_[i];
  e.converged = now_;
  // Every routed QP is asked again: a group that lost or regained a member re-hashes all of
  // its flows, not only those of the failed link.
  reroute_all(e.qps_rerouted, e.flows_rerouted, e.qps_unroutable);
}

void Simulation::recompute() {
  router_.recompute();
  ++recomputations_;
  uint64_t unroutable = 0;
  reroute_all(recompute_qps_, recompute_flows_, unroutable);
  if (workloads_done_ < workloads_.size()) {
    queue_.push(now_ + router_.recompute_period(), EventKind::Recompute, 0);
  }
}

void Simulation::reroute_all(uint64_t& qps_moved, uint64_t& flows_moved, uint64_t& unroutable) {
  const uint64_t before = qps_moved;
  qp_moved_.assign(qps_.size(), 0);
  for (QpIndex q = 0; q < qps_.size(); ++q) {
    QpInfo& info = qps_[q];
    if (info.path == fabric::kNone) continue;  // not used yet: routed when it is
    if (info.nvlink) continue;
    if (!route_qp(q)) {
      ++unroutable;  // keeps its path and waits for the links to come back
      continue;
    }
    if (same_route(q)) continue;
    const routing::PathId from = info.path;
    assign_route(q);
    qp_moved_[q] = 1;
    ++qps_moved;
    for (Observer* o : observers_)
      o->on_qp_rerouted(q, from, info.path);
  }
  if (qps_moved == before) return;
  for (uint32_t slot = 0; slot < running_.capacity(); ++slot) {
    Running& r = running_[slot];
    if (!r.live || r.bandwidth_end != Time::infinity()) continue;  // gone, or sent already
    flow_routes(slot);
    const bool moved = std::any_of(pipe_routes_.begin(), pipe_routes_.end(),
                                   [&](const network::Route& x) { return qp_moved_[x.qp] != 0; });
    if (!moved) continue;
    const bool single = !is_pipeline(slot);
    if (single) {
      // What it carried on the path it leaves counts there.
      const auto carried = static_cast<int64_t>(std::llround(net_.sent(r.handle, now_)));
      const int64_t part = std::min(carried, r.bytes - r.moved_bytes);
      if (part > 0) {
        r.moved_bytes += part;
        for (Observer* o : observers_)
          o->on_path_bytes(r.path, Bytes(part));
      }
    }
    const network::FlowHandle h = net_.reroute(r.handle, pipe_routes_, now_);
    if (h != r.handle) {
      if (h >= slot_of_handle_.size()) slot_of_handle_.resize(h + 1);
      slot_of_handle_[h] = slot;
      r.handle = h;
    }
    if (single) r.path = qps_[r.qp].path;  // its delivery latency is the new path's
    ++flows_moved;
  }
}

void Simulation::report_stall() const {
  // Flows left on links that are down and no other way: the scenario's events cut the fabric.
  std::vector<QpIndex> used;
  for (uint32_t slot = 0; slot < running_.capacity(); ++slot) {
    if (!running_[slot].live) continue;
    used.clear();
    for_each_qp(slot, [&](QpIndex q) { used.push_back(q); });
    for (const QpIndex qp : used) {
      for (const fabric::LinkId l : paths_.links(qps_[qp].path)) {
        if (link_up_[l]) continue;
        const fabric::Link& link = fabric_.link(l);
        const LinkEvent* cut = nullptr;
        for (const LinkEvent& e : link_events_) {
          if (e.applied && e.action == LinkAction::Down &&
              std::find(e.links.begin(), e.links.end(), l) != e.links.end()) {
            cut = &e;
          }
        }
        throw InputError(
            cut != nullptr ? cut->where : SourceLocation{}, cut != nullptr ? cut->key : "events",
            "events after which traffic can finish",
            fmt::format("a flow from {} to {} that waits on link {} -> {}, which is down ({}) with "
                        "no other path, until the end of the events",
                        fabric_.node(connections_[qps_[qp].connection].src).name,
                        fabric_.node(connections_[qps_[qp].connection].dst).name,
                        fabric_.node(link.src).name, fabric_.node(link.dst).name,
                        cut != nullptr ? cut->what : "down"));
      }
    }
  }
  for (const WorkloadState& s : workloads_) {
    if (!s.done) {
      throw InternalError(fmt::format(
          "workload '{}' ({}) never finished: it {} but no traffic is "
          "left to complete it",
          s.workload->name(), s.workload->type(), s.started ? "started" : "never started"));
    }
  }
  throw InternalError("report_stall() without a stalled workload");
}

Simulation::~Simulation() = default;

WorkloadId Simulation::add_workload(std::unique_ptr<Workload> w, Time start_at,
                                    std::vector<WorkloadId> after) {
  const auto id = static_cast<WorkloadId>(workloads_.size());
  for (WorkloadId a : after)
    ROCESIM_CHECK(a < id, "a workload may only wait on earlier ones");
  WorkloadState s;
  s.workload = std::move(w);
  s.start_at = start_at;
  s.waiting = static_cast<uint32_t>(after.size());
  s.after = std::move(after);
  for (WorkloadId a : s.after)
    workloads_[a].dependents.push_back(id);
  workloads_.push_back(std::move(s));
  return id;
}

void Simulation::set_progress(std::function<void(const Progress&)> cb, double interval_seconds) {
  progress_ = std::move(cb);
  progress_interval_ = interval_seconds;
}

ConnectionId Simulation::connect(fabric::NodeId src_gpu, fabric::NodeId dst_gpu,
                                 const ConnectionSpec& spec, std::span<const fabric::NodeId> via) {
  const uint32_t qps = spec.qps;
  ROCESIM_CHECK(qps >= 1, "a connection needs at least one QP");
  ROCESIM_CHECK(spec.message_bytes >= 0, "message size cannot be negative");
  ROCESIM_CHECK(src_gpu != dst_gpu, "a connection joins two different GPUs");
  ROCESIM_CHECK(spec.port < 65536, "a NIC port below 65,536");
  ROCESIM_CHECK(spec.min_chunk_bytes >= 0 && std::has_single_bit(static_cast<uint64_t>(
                                                 std::max<int64_t>(spec.min_chunk_bytes, 1))),
                "a connection's least piece is 0 or a power of two");
  const fabric::Node& s = fabric_.node(src_gpu);
  const fabric::Node& d = fabric_.node(dst_gpu);
  ROCESIM_CHECK(s.kind == fabric::NodeKind::Gpu && d.kind == fabric::NodeKind::Gpu,
                "connections join GPUs");
  const auto id = static_cast<ConnectionId>(connections_.size());
  Connection c{
      spec.message_bytes,
      src_gpu,
      dst_gpu,
      static_cast<QpIndex>(qps_.size()),
      qps,
      0,
      static_cast<uint32_t>(via_.size()),
      0,
      spec.relay == src_gpu ? fabric::kNone : spec.relay,
      static_cast<uint16_t>(spec.port),
      spec.mode,
      spec.traffic_class,
      spec.transport,
      false,
      spec.through_nics && s.server == d.server,
      static_cast<uint8_t>(spec.min_chunk_bytes > 0
                               ? std::countr_zero(static_cast<uint64_t>(spec.min_chunk_bytes))
                               : 0)};
  ROCESIM_CHECK(c.relay == fabric::kNone || fabric_.node(c.relay).server == s.server,
                "a relay GPU must be on the sender's server");
  via_.insert(via_.end(), via.begin(), via.end());
  c.via_end = static_cast<uint32_t>(via_.size());
  const bool nvlink =
      s.server == d.server && via.empty() && c.relay == fabric::kNone && !c.through_nics;
  c.nvlink = nvlink;
  if (nvlink) {
    c.transport = network::Transport::Rdma;
  } else if (c.transport == network::Transport::Tcp) {
    c.traffic_class = network::TrafficClass::Lossy;
  }
  if (nvlink) {
    c.qps = 1;  // one NVLink channel; QPs are a NIC concept
    qps_.push_back(QpInfo{id, fabric::FlowKey{0, 0, 0, 0, 0, 0}, fabric::kNone, 0, 0, true});
  } else {
    const fabric::NodeId src_nic =
        fabric_.nic_of_gpu(c.relay == fabric::kNone ? src_gpu : c.relay, c.port);
    const fabric::NodeId dst_nic = fabric_.nic_of_gpu(dst_gpu, c.port);
    for (uint32_t q = 0; q < qps; ++q) {
      const fabric::QpAllocator::Qp qp = qp_alloc_.open(src_nic, dst_nic);
      qps_.push_back(QpInfo{id, qp_alloc_.key(fabric_, src_nic, dst_nic, qp), fabric::kNone});
    }
  }
  connections_.push_back(c);
  if (flowlet_timeout_ != Time::infinity()) {
    qp_busy_.resize(qps_.size(), 0);
    qp_spread_version_.resize(qps_.size(), routing::Router::kNoVersion);
    qp_idle_since_.resize(qps_.size(), Time::zero());
    qp_last_delivered_.resize(qps_.size(), Time::zero());
  }
  return id;
}

routing::PathId Simulation::path_of(QpIndex qp) {
  QpInfo& info = qps_[qp];
  if (info.path == fabric::kNone) {
    if (!route_qp(qp)) {
      // Nothing reachable now: the path the fabric had when whole. Its down links give the flow
      // rate 0 until routing moves it or the links come back.
      router_.attach(nullptr);
      const bool ok = route_qp(qp);
      router_.attach(&view_);
      ROCESIM_CHECK(ok, "every pair of GPUs has a path in the whole fabric");
    }
    assign_route(qp);
    for (Observer* o : observers_)
      o->on_qp_routed(qp, info.path);
  }
  return info.path;
}

void Simulation::start_flow(uint32_t transfer, QpIndex qp, int64_t bytes, double rate_cap,
                            double window) {
  if (flowlet_timeout_ != Time::infinity()) new_burst(qp);
  const routing::PathId path = path_of(qp);
  flow_routes_.clear();
  append_routes(qp, 1.0, flow_routes_);
  network::FlowSpec spec;
  spec.routes = flow_routes_;
  spec.bytes = static_cast<double>(bytes);
  spec.rate_cap = rate_cap;
  spec.window = window;
  // The QP's path is its route, or the union of its sprayed routes merged when it was routed.
  spec.merged_links = paths_.links(path);
  spec.merged_weights = paths_.weights(path);
  start_running(transfer, qp, path, 1, spec);
}

Time Simulation::connection_latency(ConnectionId c) {
  return paths_.latency(path_of(connections_.at(c).first_qp));
}

uint32_t Simulation::start_running(uint32_t transfer, QpIndex qp, routing::PathId path,
                                   uint32_t legs, const network::FlowSpec& spec) {
  const network::FlowHandle h = net_.start(spec, now_);
  const uint32_t slot = running_.acquire();
  const Connection& c = connections_[qps_[qp].connection];
  running_[slot] = Running{transfer,
                           qp,
                           path,
                           legs,
                           c.src,
                           c.dst,
                           next_flow_id_++,
                           static_cast<int64_t>(spec.bytes),
                           now_,
                           Time::infinity(),
                           Time::infinity(),
                           h,
                           true,
                           0};
  if (h >= slot_of_handle_.size()) slot_of_handle_.resize(h + 1);
  slot_of_handle_[h] = slot;
  if (slot < pipe_legs_.size()) pipe_legs_[slot].clear();
  if (flowlet_timeout_ != Time::infinity()) {
    // Once per QP, as its completion counts it down (for_each_qp): a sprayed QP's routes are
    // consecutive.
    QpIndex last = network::kNoQp;
    for (const network::Route& r : spec.routes) {
      if (r.qp != last) ++qp_busy_[r.qp];
      last = r.qp;
    }
  }
  return slot;
}

void Simulation::pipeline(WorkloadId w, std::span<const PipelineLeg> legs, Bytes bytes,
                          double rate_cap, uint64_t tag, bool reduce_in_switches, double window) {
  ROCESIM_CHECK(!legs.empty() && bytes.count() > 0, "a pipeline moves bytes over >= 1 leg");
  // Route every QP first: routing one may grow the path table and move the others' links.
  for_each_leg_qp(legs, [&](QpIndex q, double) {
    if (flowlet_timeout_ != Time::infinity()) new_burst(q);
    (void)path_of(q);
  });
  auto build = [&]() {
    pipe_routes_.clear();
    for_each_leg_qp(legs, [&](QpIndex q, double share) { append_routes(q, share, pipe_routes_); });
  };
  build();
  network::FlowSpec spec;
  spec.routes = pipe_routes_;
  spec.bytes = static_cast<double>(bytes.count());
  spec.rate_cap = rate_cap;
  spec.window = window;  // per unit of share: a leg's window spread over its QPs
  spec.reduce_in_switches = reduce_in_switches;
  // The union of the legs, as results count the bytes on each link; the workload accounts for
  // the pipeline's latency itself. The same routes with the same shares make the same union: an
  // operation repeated on the same connections takes the one merged before (by its routes'
  // paths and shares, a few words per leg, rather than its thousands of links).
  pipe_key_.clear();
  pipe_key_.push_back(reduce_in_switches ? 1 : 0);
  for_each_leg_qp(legs, [&](QpIndex q, double share) {
    for_each_route(q, share, [&](routing::PathId p, double s) {
      pipe_key_.push_back(p);
      pipe_key_.push_back(std::bit_cast<uint64_t>(s));
    });
  });
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const uint64_t v : pipe_key_)
    hash = (hash ^ v) * 0x100000001b3ull;
  const PipeUnion* known_union = nullptr;
  const auto [first, last] = pipe_union_of_.equal_range(hash);
  for (auto it = first; it != last && known_union == nullptr; ++it) {
    if (pipe_unions_[it->second].key == pipe_key_) known_union = &pipe_unions_[it->second];
  }
  routing::PathId p = 0;
  if (known_union != nullptr) {
    p = known_union->path;
    spec.merged_links = paths_.links(p);
    if (!known_union->plain) spec.merged_weights = paths_.weights(p);
  } else {
    network::merge_routes(fabric_, spec, link_weight_, pipe_links_, pipe_weights_);
    const bool plain = pipe_weights_.empty();
    if (plain) pipe_weights_.assign(pipe_links_.size(), 1.0);
    // The same union from other legs (the same links and weights) is the same path too: the
    // table does not grow with the operations a workload repeats.
    const size_t known = paths_.size();
    p = paths_.intern_weighted(pipe_links_, pipe_weights_, Time::zero());
    build();  // the table may have moved
    spec.routes = pipe_routes_;
    if (paths_.size() > known) lane_of_path_.push_back(deliveries_.lane_for(Time::zero()));
    pipe_union_of_.emplace(hash, static_cast<uint32_t>(pipe_unions_.size()));
    pipe_unions_.push_back({pipe_key_, p, plain});
    spec.merged_links = pipe_links_;
    if (!plain) spec.merged_weights = pipe_weights_;
  }
  const uint32_t slot = transfers_.acquire();
  transfers_[slot] = Transfer{tag, w, 1};
  const uint32_t flow = start_running(slot, connections_[legs.front().connection].first_qp, p,
                                      static_cast<uint32_t>(legs.size()), spec);
  // The legs, to route the pipeline again if routing changes under it.
  if (pipe_legs_.size() <= flow) pipe_legs_.resize(flow + 1);
  pipe_legs_[flow].assign(legs.begin(), legs.end());
}

void Simulation::transfer(WorkloadId w, ConnectionId c, Bytes bytes, uint64_t tag, double rate_cap,
                          double window) {
  ROCESIM_CHECK(bytes.count() > 0, "a transfer moves at least one byte");
  Connection& conn = connections_.at(c);
  const uint32_t slot = transfers_.acquire();
  // Bytes per QP for this transfer.
  const int64_t total = bytes.count();
  if (conn.qps == 1) {
    transfers_[slot] = Transfer{tag, w, 1};
    start_flow(slot, conn.first_qp, total, rate_cap, window);
    return;
  }
  qp_bytes_.assign(conn.qps, 0);
  if (conn.mode == QpMode::Split) {
    // Every message split evenly; overall that is an even split, the first (total mod qps)
    // QPs carrying one byte more.
    for (uint32_t q = 0; q < conn.qps; ++q) {
      qp_bytes_[q] = total / conn.qps + (q < static_cast<uint64_t>(total % conn.qps) ? 1 : 0);
    }
  } else if (conn.mode == QpMode::Chunked) {
    chunk_messages(conn, total);
  } else {
    // Whole messages, each to the next QP in turn; the round-robin position carries over from
    // one transfer to the next, as on a NIC.
    const int64_t m = conn.message_bytes > 0 ? conn.message_bytes : total;
    const int64_t messages = (total + m - 1) / m;
    const int64_t rounds = messages / conn.qps;
    const auto rest = static_cast<uint32_t>(messages % conn.qps);
    for (uint32_t i = 0; i < conn.qps; ++i) {
      qp_bytes_[(conn.next + i) % conn.qps] = rounds * m + (i < rest ? m : 0);
    }
    // The last message is short: take the difference off the QP that carries it.
    const uint32_t last = static_cast<uint32_t>((conn.next + messages - 1) % conn.qps);
    qp_bytes_[last] -= messages * m - total;
    conn.next = static_cast<uint32_t>((conn.next + messages) % conn.qps);
  }
  uint32_t used = 0;
  for (int64_t b : qp_bytes_)
    used += b > 0 ? 1 : 0;
  transfers_[slot] = Transfer{tag, w, used};
  for (uint32_t q = 0; q < conn.qps; ++q) {
    if (qp_bytes_[q] > 0) start_flow(slot, conn.first_qp + q, qp_bytes_[q], rate_cap, window);
  }
}

void Simulation::chunk_messages(Connection& c, int64_t total) {
  const int64_t m = c.message_bytes > 0 ? std::min(c.message_bytes, total) : total;
  const int64_t least = c.chunk_log2 > 0 ? int64_t{1} << c.chunk_log2 : 1;
  // One message's pieces, from the QP after the last one used.
  auto message = [&](int64_t bytes, int64_t times) {
    const int64_t piece = std::max(least, (bytes + c.qps - 1) / c.qps);
    for (int64_t at = 0; at < bytes; at += piece) {
      qp_bytes_[c.next] += times * std::min(piece, bytes - at);
      c.next = (c.next + 1) % c.qps;
    }
  };
  // Whole messages repeat their placement once the position comes round: a message of k pieces
  // moves it by k, so every qps / gcd(k, qps) messages. Those cycles are counted at once.
  const int64_t whole = total / m;
  const int64_t piece = std::max(least, (m + c.qps - 1) / c.qps);
  const int64_t k = (m + piece - 1) / piece;
  const int64_t cycle = c.qps / std::gcd(k, static_cast<int64_t>(c.qps));
  const int64_t cycles = whole / cycle;
  if (cycles > 0) {
    for (int64_t i = 0; i < cycle; ++i)
      message(m, cycles);
  }
  for (int64_t i = cycles * cycle; i < whole; ++i)
    message(m, 1);
  if (total > whole * m) message(total - whole * m, 1);
}

void Simulation::timer(WorkloadId w, Time at, uint64_t tag) {
  ROCESIM_CHECK(at >= now_, "timers cannot fire in the past");
  queue_.push(at, EventKind::Timer, w, tag);
}

void Simulation::finish(WorkloadId w) {
  WorkloadState& s = workloads_.at(w);
  ROCESIM_CHECK(s.started && !s.done,
                fmt::format("workload '{}' finished twice or before starting", s.workload->name()));
  s.done = true;
  s.end = now_;
  ++workloads_done_;
  for (Observer* o : observers_)
    o->on_workload_done(w, s.start, s.end);
  for (WorkloadId d : s.dependents) {
    WorkloadState& ds = workloads_[d];
    if (--ds.waiting == 0) queue_.push(std::max(now_, ds.start_at), EventKind::WorkloadStart, d);
  }
}

void Simulation::start_workload(WorkloadId w) {
  WorkloadState& s = workloads_[w];
  s.started = true;
  s.start = now_;
  s.workload->start(*this, w);
}

void Simulation::dispatch(const Event& e) {
  switch (e.kind) {
    case EventKind::WorkloadStart:
      start_workload(e.a);
      break;
    case EventKind::Timer:
      workloads_[e.a].workload->on_timer(*this, e.a, e.b);
      break;
    case EventKind::LinkChange:
      apply_link_event(e.a);
      break;
    case EventKind::Reconverge:
      reconverge(e.a);
      break;
    case EventKind::Recompute:
      recompute();
      break;
  }
}

void Simulation::deliver(uint32_t flow) {
  const Running r = running_[flow];
  running_[flow].live = false;
  running_.release(flow);
  const Transfer& tr = transfers_[r.transfer];
  const FlowRecord rec{r.id,
                       tr.workload,
                       r.src,
                       r.dst,
                       r.qp,
                       r.path,
                       r.legs,
                       Bytes(r.bytes),
                       Bytes(r.bytes - r.moved_bytes),
                       r.start,
                       r.bandwidth_end,
                       r.delivered};
  ++delivered_;
  WorkloadState& ws = workloads_[rec.workload];
  ++ws.flows;
  ws.bytes += rec.bytes.count();
  const Time fct = rec.delivered - rec.start;
  ws.fct_sum_s += fct.in_seconds();
  ws.fct_max = std::max(ws.fct_max, fct);
  for (Observer* o : observers_)
    o->on_flow_delivered(rec);
  Transfer& t = transfers_[r.transfer];
  if (--t.pending == 0) {
    transfers_.release(r.transfer);
    workloads_[t.workload].workload->on_transfer_done(*this, t.workload, t.tag);
  }
}

void Simulation::report_progress(bool force) {
  if (!progress_) return;
  const auto wall = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(wall - wall_last_).count();
  if (!force && since < progress_interval_) return;
  wall_last_ = wall;
  progress_(Progress{now_, events_, delivered_, net_.active_flows(),
                     std::chrono::duration<double>(wall - wall_start_).count()});
}

void Simulation::run() {
  wall_start_ = wall_last_ = std::chrono::steady_clock::now();
  for (WorkloadId w = 0; w < workloads_.size(); ++w) {
    if (workloads_[w].waiting == 0) {
      queue_.push(workloads_[w].start_at, EventKind::WorkloadStart, w);
    }
  }
  uint64_t instants = 0;
  if (router_.recompute_period() != Time::infinity() && router_.recompute_period() > Time::zero()) {
    queue_.push(router_.recompute_period(), EventKind::Recompute, 0);
  }
  // Link events later than the last workload do not extend the run.
  while (workloads_done_ < workloads_.size()) {
    const Time t_net = net_.next_event();
    const Time t = std::min({t_net, queue_.next_time(), deliveries_.next_time()});
    if (t.is_infinite()) break;
    ROCESIM_CHECK(t >= now_, "time went backwards");
    now_ = t;
    if (t_net == t) {
      net_.advance(t, finished_);
      for (const network::Completion& c : finished_) {
        const uint32_t slot = slot_of_handle_[c.flow];
        Running& r = running_[slot];
        r.bandwidth_end = t - c.queueing;
        r.delivered = t + paths_.latency(r.path);
        if (flowlet_timeout_ != Time::infinity()) {
          for_each_qp(slot, [&](QpIndex q) {
            --qp_busy_[q];
            qp_idle_since_[q] = r.bandwidth_end;
            qp_last_delivered_[q] = std::max(qp_last_delivered_[q], r.delivered);
          });
        }
        deliveries_.push(lane_of_path_[r.path], r.delivered, slot);
        ++events_;
      }
    }
    // Everything due at t: deliveries first, then queued events; either may add more at t.
    while (true) {
      if (deliveries_.next_time() == t) {
        deliver(deliveries_.pop(t));
      } else if (queue_.next_time() == t) {
        dispatch(queue_.pop());
      } else {
        break;
      }
      ++events_;
    }
    net_.commit(t);
    if ((++instants & 0x3FF) == 0) report_progress(false);
  }
  report_progress(true);
  if (workloads_done_ < workloads_.size()) report_stall();
}

}  // namespace rocesim::engine
