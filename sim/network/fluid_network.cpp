#include "sim/network/fluid_network.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>

#include "sim/core/error.hpp"

namespace rocesim::network {
namespace {

// When a gap of `gap` bytes that changes by `drift` bytes/s closes (never if it does not shrink).
double until_closed(double gap, double drift) {
  return drift < 0 ? std::max(0.0, gap) / -drift : 1e300;
}

constexpr double kEmpty = 1e-6;  // bytes: a queue holding less is empty

bool fabric_switch(const fabric::Node& n) {
  return fabric::is_network_switch(n);
}

// 802.1Qbb headroom of a link's receiver (MODELS.md 2.2): what arrives after it decides to send
// XOFF. Bit times of the PHY/MAC delay and of the sender's response at the nearest listed speed
// at or below the link's rate (the 400G interface delay is not published: the 100G figure).
double headroom_bytes(double line_bps, double cable_s, double frame_bytes) {
  struct Row {
    double gbps, intf_bits, resp_bits;
  };
  static constexpr Row kRows[] = {{10, 8192, 30720},
                                  {25, 6144, 40960},
                                  {40, 24576, 60416},
                                  {100, 122880, 201728},
                                  {400, 122880, 463360}};
  Row r = kRows[0];
  for (const Row& x : kRows) {
    if (line_bps >= x.gbps * 1e9) r = x;
  }
  const double frame_bits = frame_bytes * 8 + 96 + 64;
  const double bits =
      frame_bits + 672 + 2 * r.intf_bits + 2 * line_bps * cable_s + r.resp_bits + frame_bits;
  return bits / 8;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Construction and flows

FluidNetwork::FluidNetwork(const fabric::Fabric& f, const FluidConfig& config, int threads)
    : fabric_(f), config_(config), threads_(std::max(1, threads)) {
  ROCESIM_CHECK(config.step > 0, "the fluid step is positive");
  parts_.resize(threads_ == 1 ? 1 : static_cast<size_t>(threads_) * 8);
  links_.resize(f.link_count());
  unmarked_.assign(f.link_count(), 1.0);
  stats_.resize(f.link_count());
  node_used_.assign(f.node_count(), 0.0);
  node_drift_.assign(f.node_count(), 0.0);
  node_buffer_.assign(f.node_count(), 0.0);
  for (fabric::NodeId n = 0; n < f.node_count(); ++n) {
    const fabric::Node& x = f.node(n);
    if (fabric_switch(x)) node_buffer_[n] = static_cast<double>(x.buffer.shared.count());
  }
  for (fabric::LinkId l = 0; l < f.link_count(); ++l) {
    const fabric::Link& link = f.link(l);
    LinkState& s = links_[l];
    s.src = link.src;
    s.dst = link.dst;
    s.cap = link.capacity.bytes_per_second();
    s.latency = link.latency.in_seconds();
    const fabric::Node& src = f.node(link.src);
    s.nic_out = src.kind == fabric::NodeKind::Nic && fabric_switch(f.node(link.dst));
    s.between_switches = fabric_switch(src) && fabric_switch(f.node(link.dst));
    if (fabric_switch(src)) {
      const EcnProfile& e = config.ecn[static_cast<size_t>(src.role)];
      const double line = static_cast<double>(link.line_rate.bits_per_second());
      const double scale = e.scale_with_rate ? line / 25e9 : 1.0;
      s.ecn = e.enabled;
      s.kmin = e.kmin * scale;
      s.kmax = e.kmax * scale;
      s.pmax = e.pmax;
    }
    stats_[l].headroom = headroom_bytes(static_cast<double>(link.line_rate.bits_per_second()),
                                        link.latency.in_seconds(), config.packet + 82);
  }
}

FlowHandle FluidNetwork::start(const FlowSpec& spec, Time now) {
  ROCESIM_CHECK(spec.bytes > 0 && !spec.routes.empty(), "a flow moves bytes over >= 1 route");
  if (now.in_seconds() > now_) integrate(now);
  const double t = now.in_seconds();
  const FlowHandle h = flows_.acquire();
  FlowState& fl = flows_[h];
  fl.routes.clear();
  fl.bytes = spec.bytes;
  fl.sent = 0;
  fl.rate = 0;
  fl.cap = spec.rate_cap;
  fl.live = true;
  fl.sending = true;
  fl.in_flight = 0;
  fl.reduce = spec.reduce_in_switches;
  fl.lost = 0;
  fl.window = spec.window;
  fl.sent_base = 0;
  fl.sent_t = t;
  ++active_flows_;
  add_routes(h, spec.routes, t);
  if (dirty_ || !shortcuts_ || !append(h)) dirty_ = true;
  added_ = true;
  return h;
}

void FluidNetwork::count_reduced(std::span<const Route> routes, bool reduce, int sign) {
  // In-network reduction: on a link between two fabric switches the flow's routes together
  // carry one stream, min(1, sum of their shares) per byte of the flow. share_on_link_ is zero
  // outside start() and reroute().
  if (!reduce) return;
  if (share_on_link_.size() < fabric_.link_count()) share_on_link_.assign(fabric_.link_count(), 0);
  for (const Route& r : routes) {
    for (const fabric::LinkId l : r.hops)
      share_on_link_[l] = sign > 0 ? share_on_link_[l] + r.share : 0;
  }
}

void FluidNetwork::set_hops(uint32_t id, std::span<const fabric::LinkId> hops, bool reduce) {
  RouteState& rs = routes_[id];
  rs.path = static_cast<uint32_t>(refs_.size());
  rs.length = 0;
  rs.sched = 0;
  rs.cc = false;
  rs.tcp = false;
  rs.line = links_[hops.front()].cap;
  const bool tcp = rs.transport == Transport::Tcp;
  // The acknowledgements come back the way the data went (ECMP hashes both directions alike).
  rs.base_rtt = config_.tcp.host_latency;
  for (const fabric::LinkId l : hops) {
    const LinkState& s = links_[l];
    rs.base_rtt += 2 * s.latency;
    Hop hop;
    hop.route = id;
    if (reduce && s.between_switches && share_on_link_[l] > 1) hop.w = 1.0 / share_on_link_[l];
    refs_.push_back({l, static_cast<uint32_t>(hops_.size())});
    ++rs.length;
    hops_.push_back(hop);
    out_.push_back(0);
    if (rs.sched == 0 && s.nic_out) {
      // The NIC schedules its QPs onto its port (PCIe before it only feeds it).
      rs.cc = !tcp && config_.dcqcn.enabled;
      rs.tcp = tcp;
      tcp_ = tcp_ || tcp;
      rs.line = links_[l].cap;
      rs.sched = rs.length - 1;
    }
  }
}

void FluidNetwork::add_routes(FlowHandle h, std::span<const Route> routes, double t) {
  FlowState& fl = flows_[h];
  count_reduced(routes, fl.reduce, 1);
  for (const Route& r : routes) {
    ROCESIM_CHECK(!r.hops.empty() && r.share > 0, "a route crosses a link and carries bytes");
    const uint32_t id = routes_.acquire();
    RouteState& rs = routes_[id];
    rs = RouteState{};
    rs.flow = h;
    rs.qp = r.qp;
    rs.share = r.share;
    rs.tc = r.traffic_class;
    rs.transport = r.transport;
    rs.window = fl.window * r.share;
    rs.live = true;
    set_hops(id, r.hops, fl.reduce);
    if (rs.qp != kNoQp) {
      if (rs.qp >= qps_.size()) qps_.resize(rs.qp + 1);
      QpState& q = qps_[rs.qp];
      const TcpConfig& tcp = config_.tcp;
      if (!q.seen) {
        q.seen = true;
        q.line = rs.line;
        q.rc = q.rt = rs.line;
        q.alpha = 1;
        q.last = t;
        q.cwnd = tcp.initial_window * tcp.mss;
        q.ssthresh = std::numeric_limits<double>::infinity();
        q.rtt = rs.base_rtt;
      } else if (rs.tcp) {
        // A connection idle for longer than its time-out starts again from its initial window
        // (RFC 2861; Linux's tcp_slow_start_after_idle).
        if (q.users == 0 && tcp.restart_after_idle && t - q.last > std::max(tcp.min_rto, q.rtt))
          q.cwnd = std::min(q.cwnd, tcp.initial_window * tcp.mss);
      } else if (q.sending > 0) {
        // Sending: its rate control up to now, before a route joins it.
        if (settle_qp(q, t)) report_qp(rs.qp, Time::seconds(t));
      } else if (q.users == 0 && t > q.last) {
        // Idle since its last flow: what the increase timer did meanwhile, without congestion.
        update_qp(q, t - q.last);
      }
      q.last = t;
    }
    fl.routes.push_back(id);
    new_routes_.push_back(id);
  }
  count_reduced(routes, fl.reduce, -1);
}

double FluidNetwork::sent(FlowHandle f, Time) const {
  const FlowState& fl = flows_[f];
  return std::max(0.0, sent_now(fl, now_) - fl.sent_base);
}

FlowHandle FluidNetwork::reroute(FlowHandle f, std::span<const Route> routes, Time now) {
  FlowState& fl = flows_[f];
  ROCESIM_CHECK(fl.live, "rerouting a running flow");
  if (now.in_seconds() > now_) integrate(now);
  settle_hops(now);  // (what the old hops hold now goes back to the sender)
  fl.sent_base = sent_now(fl, now_);
  dirty_ = true;
  added_ = true;  // rates are computed again at the next commit
  only_starts_ = false;
  if (routes.size() != fl.routes.size()) {
    // Another number of paths (a sprayed QP after a failure): the old routes retire, and what
    // they still held counts as not sent, for the new routes to send again; the flow's
    // progress is that of its route furthest behind.
    double behind = 0;
    for (const uint32_t r : fl.routes) {
      RouteState& rs = routes_[r];
      double held = 0;
      for (const HopRef& ref : path(rs)) {
        Hop& hop = hops_[ref.at];
        held += hop.b;
        hop.a = hop.b = out_[ref.at] = 0;
        hop.prev = kNoIndex;  // (the slot before it may be another route's: append())
      }
      behind = std::max(behind, held / rs.share);
      rs.live = false;
      retired_.push_back(r);
    }
    fl.routes.clear();
    add_routes(f, routes, now_);
    fl.lost += behind;
    if (fl.lost > 0 || !fl.sending) resend(fl, now_);
    return f;
  }
  count_reduced(routes, fl.reduce, 1);
  for (size_t i = 0; i < routes.size(); ++i) {
    const uint32_t id = fl.routes[i];
    RouteState& rs = routes_[id];
    const std::span<const HopRef> hops = path(rs);
    const bool same =
        std::equal(hops.begin(), hops.end(), routes[i].hops.begin(), routes[i].hops.end(),
                   [](const HopRef& h, fabric::LinkId l) { return h.link == l; });
    if (same || rs.tracer >= hops.size()) continue;  // unchanged, or all through already
    // What the old links still hold goes back to the sender and is sent again.
    // (The old hops stay where their links' ranges hold them, empty, until the next rebuild.)
    double held = 0;
    for (const HopRef& ref : hops) {
      Hop& hop = hops_[ref.at];
      held += hop.b;
      hop.a = hop.b = out_[ref.at] = 0;
    }
    set_hops(id, routes[i].hops, fl.reduce);  // (moves refs_: `hops` is gone)
    hops_[path(rs)[0].at].b = held;
    if (!rs.sending) {
      // The last byte is at the back of the sender's queue again.
      rs.tracer = 0;
      rs.ahead = links_[path(rs)[0].link].queue[static_cast<size_t>(rs.tc)] + held;
      rs.traced_to = now_;
    }
  }
  count_reduced(routes, fl.reduce, -1);
  return f;
}

void FluidNetwork::resend(FlowState& fl, double t) {
  const double sent = sent_now(fl, t);
  fl.sent += std::max(0.0, sent - fl.lost) - sent;
  fl.lost = 0;
  added_ = true;  // the sender's rate may change: compute again at the next commit
  only_starts_ = false;
  if (fl.sending) return;
  // It had sent its last byte: it sends again, and its last bytes are not on their way yet.
  fl.sending = true;
  fl.in_flight = 0;
  for (const uint32_t r : fl.routes) {
    RouteState& rs = routes_[r];
    if (!rs.sending && rs.cc && rs.qp != kNoQp) ++qps_[rs.qp].sending;
    rs.sending = true;
    rs.tracer = 0;
    rs.ahead = 0;
  }
}

void FluidNetwork::set_capacity(fabric::LinkId l, double bytes_per_second, Time now) {
  ROCESIM_CHECK(bytes_per_second >= 0 && std::isfinite(bytes_per_second),
                "link capacities must be >= 0");
  if (now.in_seconds() > now_) integrate(now);  // the time before, at the capacity it had
  settle_hops(now);
  eager_ = true;  // (until the next computation: what reaches a link that is down is lost)
  links_[l].cap = bytes_per_second;
  added_ = true;  // rates are computed again at the next commit
  only_starts_ = false;
}

double FluidNetwork::link_load(fabric::LinkId l) const {
  const LinkState& s = links_[l];
  return std::accumulate(s.served.begin(), s.served.end(), 0.0);
}

double FluidNetwork::queue(fabric::LinkId l) const {
  const LinkState& s = links_[l];
  return std::accumulate(s.queue.begin(), s.queue.end(), 0.0);
}

// ---------------------------------------------------------------------------------------------
// Structure: which route hops sit on which link, and the order links feed each other

bool FluidNetwork::append(FlowHandle h) {
  // A flow of one route whose links are not laid out or hold an empty hop (of a route delivered
  // since the layout was made), in the order the layout serves them, with those not laid out at
  // the end: on each link the route takes the first empty slot (the range stays as it is), or
  // the hop set_hops() put at the end of hops_ for a link not laid out, which then follows the
  // last. A computation serves each link after those that feed it, as after rebuild() (a link's
  // hops may be in another order, so its sums may differ in their last bits). Ranges stay in the
  // order of the links (what the passes on threads split by), so the layout is the same at any
  // number of threads; their groups are made again (regroup_).
  const FlowState& fl = flows_[h];
  if (fl.routes.size() != 1 || levels_.empty()) return false;
  const uint32_t r = fl.routes.front();
  RouteState& rs = routes_[r];
  const std::span<HopRef> refs = path(rs);
  slots_.clear();
  uint32_t last = kNoIndex;  // the position of the last link met that is laid out
  bool fresh = false;        // a link met so far is not laid out
  for (const HopRef& ref : refs) {
    const LinkState& s = links_[ref.link];
    if (s.pos == kNoIndex) {
      // (A link twice on the route would take two ranges: a layout sorts that out.)
      for (size_t k = 0; k < slots_.size(); ++k) {
        if (refs[k].link == ref.link) return false;
      }
      fresh = true;
      slots_.push_back(kNoIndex);
      continue;
    }
    if (fresh || (last != kNoIndex && s.pos <= last)) return false;
    last = s.pos;
    uint32_t j = s.begin;
    while (j < s.end && routes_[hops_[j].route].live)
      ++j;
    if (j == s.end) return false;  // no empty slot
    slots_.push_back(j);
  }
  uint32_t in_place = 0;
  for (uint32_t k = 0; k < refs.size(); ++k) {
    HopRef& ref = refs[k];
    LinkState& s = links_[ref.link];
    if (slots_[k] != kNoIndex) {
      hops_[slots_[k]] = hops_[ref.at];
      out_[slots_[k]] = out_[ref.at];
      ref.at = slots_[k];
      ++in_place;
    } else {
      s.begin = ref.at;
      s.end = ref.at + 1;
      s.pos = static_cast<uint32_t>(order_.size());
      order_.push_back(ref.link);
    }
    Hop& hop = hops_[ref.at];
    hop.prev = k == 0 ? kNoIndex : refs[k - 1].at;
    hop.prev_link = k == 0 ? fabric::LinkId{} : refs[k - 1].link;
    hop.tc = rs.tc;
    hop.sched = k == rs.sched;
    if (hop.sched && !s.senders) sender_links_.push_back(ref.link);
    s.senders = s.senders || hop.sched;
  }
  // The slots at the end that the route did not take: dropped when it took none of them, else
  // counted with the empty hops (for the next rebuild()).
  retired_hops_ -= std::min<size_t>(retired_hops_, in_place);
  if (in_place == refs.size()) {
    hops_.resize(hops_.size() - in_place);
    out_.resize(out_.size() - in_place);
  } else {
    retired_hops_ += in_place;
  }
  live_routes_.push_back(r);
  regroup_ = grouped_;
  if (rs.qp != kNoQp && !qps_[rs.qp].listed) {
    qps_[rs.qp].listed = true;
    qps_[rs.qp].use = static_cast<uint32_t>(in_use_.size());
    in_use_.push_back(rs.qp);
  }
  return true;
}

void FluidNetwork::rebuild() {
  ++layouts_;
  for (const fabric::LinkId l : order_) {
    links_[l].pos = kNoIndex;
    links_[l].begin = links_[l].end = 0;
    links_[l].senders = false;
    links_[l].served.fill(0);  // set again below for the links still in use
  }
  // (A route on its way out leaves the list of those draining before its slot is reused.)
  std::erase_if(draining_, [&](uint32_t r) { return !draining(routes_[r]); });
  for (const uint32_t r : retired_)
    routes_.release(r);
  retired_.clear();
  live_routes_.clear();
  for (uint32_t r = 0; r < routes_.capacity(); ++r) {
    if (routes_[r].live) live_routes_.push_back(r);
  }
  // The links in use: a paused link stays visited until it resumes, and a queue until it is
  // seen empty, even when no route crosses them any more; then the links of the routes, in the
  // order met (routes in slot order). scratch_ maps a link to its position in `touched`,
  // kNoIndex elsewhere: work and scratch are proportional to the links in use, not to the
  // fabric.
  if (scratch_.size() < fabric_.link_count()) scratch_.assign(fabric_.link_count(), kNoIndex);
  std::vector<fabric::LinkId>& touched = touched_;
  touched.clear();
  auto touch = [&](fabric::LinkId l) {
    if (scratch_[l] != kNoIndex) return;
    scratch_[l] = static_cast<uint32_t>(touched.size());
    touched.push_back(l);
  };
  for (const fabric::LinkId l : order_) {
    const LinkState& s = links_[l];
    if (s.paused || s.source_paused || s.queued) touch(l);
  }
  size_t total = 0;
  for (const uint32_t r : live_routes_) {
    for (const HopRef& ref : path(routes_[r]))
      touch(ref.link);
    total += routes_[r].length;
  }
  // Kahn's algorithm on "link a feeds link b" (consecutive hops of a route), in the order the
  // links were met (deterministic); links on a cycle (a routing loop) follow in that order and
  // take their upstream arrivals from the previous computation.
  const auto n = static_cast<uint32_t>(touched.size());
  indegree_.assign(n, 0);
  count_.assign(n, 0);
  succ_begin_.assign(n + 1, 0);
  for (const uint32_t r : live_routes_) {
    const std::span<const HopRef> hops = path(routes_[r]);
    for (uint32_t k = 0; k < hops.size(); ++k) {
      ++count_[scratch_[hops[k].link]];
      if (k + 1 == hops.size()) break;
      ++succ_begin_[scratch_[hops[k].link] + 1];
      ++indegree_[scratch_[hops[k + 1].link]];
    }
  }
  std::partial_sum(succ_begin_.begin(), succ_begin_.end(), succ_begin_.begin());
  succ_.resize(succ_begin_.back());
  fill_.assign(succ_begin_.begin(), succ_begin_.end() - 1);
  for (const uint32_t r : live_routes_) {
    const std::span<const HopRef> hops = path(routes_[r]);
    for (uint32_t k = 0; k + 1 < hops.size(); ++k)
      succ_[fill_[scratch_[hops[k].link]]++] = scratch_[hops[k + 1].link];
  }
  // The queue of ready links holds them level by level: those a level makes ready come after
  // it, and no link of a level feeds another of the same level.
  order_.clear();
  ready_.clear();
  levels_.assign(1, 0);
  for (uint32_t i = 0; i < n; ++i) {
    if (indegree_[i] == 0) ready_.push_back(i);
  }
  for (size_t i = 0, level_end = ready_.size(); i < ready_.size(); ++i) {
    const uint32_t x = ready_[i];
    order_.push_back(touched[x]);
    for (uint32_t j = succ_begin_[x]; j < succ_begin_[x + 1]; ++j) {
      if (--indegree_[succ_[j]] == 0) ready_.push_back(succ_[j]);
    }
    if (i + 1 == level_end) {
      levels_.push_back(static_cast<uint32_t>(i + 1));
      level_end = ready_.size();
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (indegree_[i] > 0) order_.push_back(touched[i]);  // on a cycle
  }
  // The hops, link by link in that order, and on a link in route order; what they hold moves
  // with them.
  fill_.resize(n);
  uint32_t at = 0;
  for (const fabric::LinkId l : order_) {
    const uint32_t i = scratch_[l];
    links_[l].begin = fill_[i] = at;
    at += count_[i];
    links_[l].end = at;
  }
  next_hops_.resize(total);
  next_out_.resize(total);
  next_refs_.resize(total);
  // With them, the QPs in use; those no route uses any more have no users.
  for (const QpId q : in_use_) {
    QpState& qp = qps_[q];
    qp.users = qp.sending = 0;
    qp.p = qp.x = 0;
    qp.listed = false;
  }
  in_use_.clear();
  uint32_t refs = 0;
  for (const uint32_t r : live_routes_) {
    RouteState& rs = routes_[r];
    if (rs.qp != kNoQp && !qps_[rs.qp].listed) {
      qps_[rs.qp].listed = true;
      qps_[rs.qp].use = static_cast<uint32_t>(in_use_.size());
      in_use_.push_back(rs.qp);
    }
    std::copy_n(refs_.begin() + rs.path, rs.length, next_refs_.begin() + refs);
    rs.path = refs;
    refs += rs.length;
    const std::span<HopRef> hops{next_refs_.data() + rs.path, rs.length};
    for (uint32_t k = 0; k < hops.size(); ++k) {
      HopRef& ref = hops[k];
      const uint32_t to = fill_[scratch_[ref.link]]++;
      Hop& hop = next_hops_[to];
      hop = hops_[ref.at];
      next_out_[to] = out_[ref.at];
      hop.route = r;
      hop.prev = k == 0 ? kNoIndex : hops[k - 1].at;
      hop.prev_link = k == 0 ? fabric::LinkId{} : hops[k - 1].link;
      hop.tc = rs.tc;
      hop.sched = k == rs.sched;
      links_[ref.link].senders = links_[ref.link].senders || hop.sched;
      ref.at = to;
    }
  }
  hops_.swap(next_hops_);
  out_.swap(next_out_);
  refs_.swap(next_refs_);
  sender_links_.clear();
  for (const fabric::LinkId l : order_) {
    if (links_[l].senders) sender_links_.push_back(l);
  }
  for (const fabric::LinkId l : touched)
    scratch_[l] = kNoIndex;
  dirty_ = false;
  retired_hops_ = 0;
  waste_ = 0;
  // A computation of fewer than 8,192 route hops (a ring's few hundred) stays on one thread:
  // its dozen passes would wake the threads a dozen times for little work each (the 1,024-GPU
  // ring ran 1.25x slower on two threads than on one).
  for (uint32_t i = 0; i < order_.size(); ++i)
    links_[order_[i]].pos = i;
  grouped_ = threads_ > 1 && total >= kGroupFrom;
  if (grouped_) group();
  regroup_ = false;
}

void FluidNetwork::group() {
  order_end_.clear();
  for (const fabric::LinkId l : order_)
    order_end_.push_back(links_[l].end);
  // The sending nodes, each with its links.
  if (node_slot_.size() < fabric_.node_count()) node_slot_.assign(fabric_.node_count(), kNoIndex);
  nodes_.clear();
  node_begin_.assign(1, 0);
  for (const fabric::LinkId l : order_) {
    uint32_t& slot = node_slot_[links_[l].src];
    if (slot == kNoIndex) {
      slot = static_cast<uint32_t>(nodes_.size());
      nodes_.push_back(links_[l].src);
      node_begin_.push_back(0);
    }
    ++node_begin_[slot + 1];
  }
  std::partial_sum(node_begin_.begin(), node_begin_.end(), node_begin_.begin());
  node_links_.resize(order_.size());
  fill_.assign(node_begin_.begin(), node_begin_.end() - 1);
  node_hops_.assign(nodes_.size(), 0);
  for (const fabric::LinkId l : order_) {
    const uint32_t slot = node_slot_[links_[l].src];
    node_links_[fill_[slot]++] = l;
    node_hops_[slot] += links_[l].end - links_[l].begin;
  }
  std::partial_sum(node_hops_.begin(), node_hops_.end(), node_hops_.begin());
  for (const fabric::NodeId v : nodes_)
    node_slot_[v] = kNoIndex;
  // The routes of each QP in use.
  qp_begin_.assign(in_use_.size() + 1, 0);
  for (const uint32_t r : live_routes_) {
    if (routes_[r].qp != kNoQp) ++qp_begin_[qps_[routes_[r].qp].use + 1];
  }
  std::partial_sum(qp_begin_.begin(), qp_begin_.end(), qp_begin_.begin());
  qp_routes_.resize(qp_begin_.back());
  fill_.assign(qp_begin_.begin(), qp_begin_.end() - 1);
  for (const uint32_t r : live_routes_) {
    if (routes_[r].qp != kNoQp) qp_routes_[fill_[qps_[routes_[r].qp].use]++] = r;
  }
}

// ---------------------------------------------------------------------------------------------
// PFC, ECN, DCQCN

inline double FluidNetwork::xoff(fabric::LinkId l) const {
  const fabric::NodeId v = links_[l].dst;
  const double buffer = node_buffer_[v];
  if (buffer <= 0) return config_.device_buffer;
  return config_.pfc_alpha * std::max(0.0, buffer - node_used_[v]);
}

double FluidNetwork::marking(const LinkState& l, double q) const {
  if (!l.ecn || q <= l.kmin) return 0;
  if (q > l.kmax) return 1;
  return l.pmax * (q - l.kmin) / (l.kmax - l.kmin);
}

void FluidNetwork::update_pauses(double now) {
  for (const fabric::LinkId l : order_) {
    LinkState& s = links_[l];
    PfcDiagnostics& st = stats_[l];
    const double off = xoff(l);
    const double on = std::max(0.0, off - std::min(config_.xon_offset, off / 2));
    st.max_ingress = std::max(st.max_ingress, s.ingress);
    if (!config_.pfc) continue;
    if (!s.paused && s.ingress > kEmpty && s.ingress >= off) {
      s.paused = true;
      s.storm = false;
      s.paused_since = now;
      for (NetworkObserver* o : observers_)
        o->on_pause(l, TrafficClass::Lossless, Time::seconds(now), true);
    } else if (s.paused && s.ingress <= on) {
      s.paused = false;
      for (NetworkObserver* o : observers_)
        o->on_pause(l, TrafficClass::Lossless, Time::seconds(now), false);
    }
    if (s.paused) {
      st.headroom_used = std::max(st.headroom_used, s.ingress - off);
      if (now - s.paused_since > config_.watchdog && !s.storm) {
        s.storm = true;  // once per pause
        ++st.storms;
      }
    }
    // The senders' own send queue (bytes a NIC or GPU took in but could not put on the link).
    const double soff = config_.device_buffer;
    if (!s.source_paused && s.source >= soff) {
      s.source_paused = true;
    } else if (s.source_paused && s.source <= soff / 2) {
      s.source_paused = false;
    }
  }
}

double FluidNetwork::lossy_cap(fabric::LinkId l) const {
  const fabric::NodeId v = links_[l].src;
  const double buffer = node_buffer_[v];
  if (buffer <= 0) return std::numeric_limits<double>::infinity();
  const double cap = config_.lossy_alpha * std::max(0.0, buffer - node_used_[v]);
  return config_.lossy_limit > 0 ? std::min(cap, config_.lossy_limit) : cap;
}

void FluidNetwork::update_tcp(QpState& q, double now, double dt) const {
  const TcpConfig& c = config_.tcp;
  const bool cubic = c.algorithm == TcpConfig::Algorithm::Cubic;
  // Multiplicative decrease: NewReno halves (RFC 5681), CUBIC keeps 0.7 (RFC 9438).
  const double beta = cubic ? 0.7 : 0.5;
  if (q.dropped > 0) {
    q.dropped = 0;
    // The losses of one window are one congestion event: one cut per round trip.
    if (now - q.last_cut < q.rtt) return;
    const double before = q.cwnd;
    q.w_max = before;
    q.last_cut = now;
    q.ssthresh = std::max(before * beta, 2 * c.mss);
    if (before < 4 * c.mss) {
      // Too few segments in flight for three duplicate acknowledgements: the retransmission
      // timer finds the loss (Linux: RTO = SRTT + max(4 RTTVAR, TCP_RTO_MIN)), and the sender
      // starts again from one segment (RFC 5681's loss window).
      q.rto_until = now + q.rtt + c.min_rto;
      q.cwnd = c.mss;
    } else {
      q.cwnd = q.ssthresh;  // fast retransmit and recovery
    }
    return;
  }
  if (q.x <= 0 || dt <= 0) return;
  const double acked = q.x * dt;  // bytes acknowledged in the interval (fluid)
  if (q.cwnd < q.ssthresh) {
    // Slow start, a segment per segment acknowledged: dW/dt = x. While the window is what
    // bounds the rate (x = W / RTT) W grows as e^(t / RTT) until W / RTT reaches the rate the
    // path gives; from there (or if the rate was bounded already) it grows by x dt. Solved over
    // the interval, so the window grows as in continuous time whatever the step.
    const double rtt = std::max(q.rtt, 1e-12);
    double grown = q.cwnd + acked;
    if (q.x * rtt >= 0.999 * q.cwnd) {
      const double ceiling = std::min(q.line, c.host_rate > 0 ? c.host_rate : q.line) * rtt;
      const double reach = q.cwnd < ceiling ? rtt * std::log(ceiling / q.cwnd) : 0;
      grown = reach >= dt ? q.cwnd * std::exp(dt / rtt)
                          : std::max(ceiling, q.cwnd) + (ceiling / rtt) * (dt - reach);
    }
    q.cwnd = std::min(grown, q.ssthresh);
  } else if (!cubic) {
    q.cwnd += c.mss * acked / q.cwnd;  // congestion avoidance: a segment per window
  } else {
    // CUBIC (RFC 9438), in segments: W(t) = C (t - K)^3 + W_max with C = 0.4, and its
    // Reno-friendly estimate; the window moves towards the target by (target - cwnd) / cwnd
    // per acknowledgement, at most 1.5 cwnd.
    constexpr double kC = 0.4;
    const double t = now - q.last_cut;
    const double wmax = q.w_max / c.mss;
    const double k = std::cbrt(wmax * (1 - beta) / kC);
    const double w_cubic = kC * (t - k) * (t - k) * (t - k) + wmax;
    const double w_est = wmax * beta + 3 * (1 - beta) / (1 + beta) * t / std::max(q.rtt, 1e-12);
    const double target = std::min(std::max(w_cubic, w_est) * c.mss, 1.5 * q.cwnd);
    if (target > q.cwnd) q.cwnd = std::min(target, q.cwnd + acked * (target - q.cwnd) / q.cwnd);
  }
  q.cwnd = std::min(q.cwnd, c.max_window);
}

void FluidNetwork::update_qp(QpState& q, double dt) const {
  const DcqcnConfig& c = config_.dcqcn;
  const double ai = c.ai_fraction * q.line, hai = c.hai_fraction * q.line;
  if (q.p <= 0 && q.rc >= q.line && q.rt >= q.line) {
    q.alpha *= std::exp(-c.g * dt / c.alpha_interval);
    return;
  }
  if (q.p <= 0 && q.users == 0) {
    // Idle, in closed form: the timer's increase events raise Rt at R_HAI per period and pull
    // Rc towards Rt (fast recovery halves the gap per period: about e^(-t / 2T)).
    q.rt = std::min(q.line, q.rt + hai * dt / c.timer);
    q.rc = q.rt - (q.rt - q.rc) * std::exp(-dt / (2 * c.timer));
    q.alpha *= std::exp(-c.g * dt / c.alpha_interval);
    return;
  }
  // DCQCN's fluid equations (Zhu et al. 2016, with constant hyper increase past F + 1 events),
  // explicit Euler in sub-steps short against the fastest term (1/tau).
  const double h_max = 0.5 / std::max(1.0 / c.cnp_interval, c.g / c.alpha_interval);
  const int n = std::max(1, static_cast<int>(std::ceil(dt / h_max)));
  const double h = dt / n;
  const double p = std::min(q.p, 1 - 1e-12);
  const double lp = std::log1p(-p);  // ln(1 - p), <= 0
  const double bp = c.byte_counter / config_.packet;
  const double f = c.fast_recovery;
  for (int i = 0; i < n; ++i) {
    const double r = q.rc / config_.packet;  // packets/s
    double a = 0, b = 0, b_ai = 0, b_hai = 0, d = 0, d_ai = 0, d_hai = 0, am = 0;
    if (p <= 0) {
      b = bp > 0 ? 1 / bp : 0;
      d = 1 / (c.timer * r);
      b_hai = b;  // never a CNP: every event is past F + 1
      d_hai = d;
    } else {
      a = -std::expm1(c.cnp_interval * r * lp);
      am = -std::expm1(c.alpha_interval * r * lp);
      if (bp > 0) {
        b = p / std::expm1(-bp * lp);
        b_ai = b * std::exp(f * bp * lp) - b * std::exp((f + 1) * bp * lp);
        b_hai = b * std::exp((f + 1) * bp * lp);
      }
      d = p / std::expm1(-c.timer * r * lp);
      d_ai = d * std::exp(f * c.timer * r * lp) - d * std::exp((f + 1) * c.timer * r * lp);
      d_hai = d * std::exp((f + 1) * c.timer * r * lp);
    }
    const double drc = -q.rc * q.alpha * a / (2 * c.cnp_interval) + (q.rt - q.rc) * r * (b + d) / 2;
    const double drt =
        -(q.rt - q.rc) * a / c.cnp_interval + r * (ai * (b_ai + d_ai) + hai * (b_hai + d_hai));
    const double dalpha = c.g / c.alpha_interval * (am - q.alpha);
    q.rc = std::clamp(q.rc + drc * h, c.min_rate, q.line);
    q.rt = std::clamp(q.rt + drt * h, c.min_rate, q.line);
    q.alpha = std::clamp(q.alpha + dalpha * h, 0.0, 1.0);
  }
  // Fast recovery approaches Rt geometrically: within 1e-4 of it is there.
  if (p <= 0 && q.rt - q.rc < 1e-4 * q.line) q.rc = q.rt;
}

// ---------------------------------------------------------------------------------------------
// Rates

bool FluidNetwork::parallel(size_t work) const {
  // (Below a thousand items a pass takes a few microseconds, about what waking threads costs.)
  return grouped_ && work >= 1024;
}

template <class Body>
void FluidNetwork::in_parts(size_t work, Body&& body) {
  if (!parallel(work)) {
    body(size_t{0}, size_t{1});
    return;
  }
  // The same parts to the same thread at every computation (contiguous runs of parts): a
  // thread then finds in its own cache the hops, routes and QPs it worked on a step before.
  // Handed out as threads came free (dynamic, 1), each pass moved data between the cores' caches:
  // the 128-GPU AlltoAll on 2 threads took 1.74 s against 1.56 s (docs/performance.md).
  const size_t parts = parts_.size();
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (size_t part = 0; part < parts; ++part)
    body(part, parts);
}

std::pair<uint32_t, uint32_t> FluidNetwork::link_part(uint32_t lo, uint32_t hi, size_t part,
                                                      size_t parts) const {
  if (parts == 1 || lo >= hi) return {lo, hi};
  const uint64_t first = links_[order_[lo]].begin, last = order_end_[hi - 1];
  auto cut = [&](size_t k) {
    if (k == 0) return lo;
    if (k == parts) return hi;
    // The first link that ends past the part's share of the hops starts the next part.
    const uint64_t target = first + (last - first) * k / parts;
    return static_cast<uint32_t>(
        std::upper_bound(order_end_.begin() + lo, order_end_.begin() + hi, target) -
        order_end_.begin());
  };
  return {cut(part), cut(part + 1)};
}

std::pair<uint32_t, uint32_t> FluidNetwork::node_part(size_t part, size_t parts) const {
  const auto n = static_cast<uint32_t>(nodes_.size());
  auto cut = [&](size_t k) {
    if (k == 0) return uint32_t{0};
    if (k == parts) return n;
    const uint64_t target = uint64_t{node_hops_.back()} * k / parts;
    return static_cast<uint32_t>(std::upper_bound(node_hops_.begin(), node_hops_.end(), target) -
                                 node_hops_.begin());
  };
  return n == 0 ? std::pair{0u, 0u} : std::pair{cut(part), cut(part + 1)};
}

// (Inlined: called once per link per computation, many of them with one or two hops.)
[[gnu::always_inline]] inline double FluidNetwork::sum_queues(LinkState& s, double& most) {
  double lossless = 0, lossy = 0, control = 0, source = 0;
  for (uint32_t j = s.begin; j < s.end; ++j) {
    const Hop& hop = hops_[j];
    const double bytes = hop.w * hop.b;
    if (bytes <= 0) continue;
    most = std::max(most, hop.b);
    if (hop.tc == TrafficClass::Lossless) {
      lossless += bytes;
      if (hop.prev == kNoIndex) {
        source += bytes;
      } else {
        links_[hop.prev_link].ingress += bytes;
      }
    } else if (hop.tc == TrafficClass::Lossy) {
      lossy += bytes;
    } else {
      control += bytes;
    }
  }
  s.queue = {lossless, lossy, control};
  s.source = source;
  return lossless + lossy + control;
}

[[gnu::always_inline]] inline bool FluidNetwork::serve(fabric::LinkId l, double dt) {
  LinkState& s = links_[l];
  bool moving = false;
  double lossless = 0, lossy = 0, control = 0;
  for (uint32_t i = s.begin; i < s.end; ++i) {
    Hop& hop = hops_[i];
    hop.a = hop.prev == kNoIndex ? routes_[hop.route].x : out_[hop.prev];
    const double asks = hop.w * (hop.b / dt + hop.a);
    if (hop.tc == TrafficClass::Lossless) {
      lossless += asks;
    } else if (hop.tc == TrafficClass::Lossy) {
      lossy += asks;
    } else {
      control += asks;
    }
  }
  std::array<double, kTrafficClasses> need{lossless, lossy, control};
  std::array<double, kTrafficClasses> given{};
  double left = s.cap;
  given[2] = std::min(need[2], left);  // control: strict priority
  left -= given[2];
  const double need_ll = s.paused ? 0 : need[0], need_ly = need[1];
  const double w_ll = 1, w_ly = config_.lossy_weight;
  if (need_ll + need_ly <= left) {
    given[0] = need_ll;
    given[1] = need_ly;
  } else if (need_ll <= left * w_ll / (w_ll + w_ly)) {
    given[0] = need_ll;
    given[1] = left - need_ll;
  } else if (need_ly <= left * w_ly / (w_ll + w_ly)) {
    given[1] = need_ly;
    given[0] = left - need_ly;
  } else {
    given[0] = left * w_ll / (w_ll + w_ly);
    given[1] = left * w_ly / (w_ll + w_ly);
  }
  s.served = given;
  // A full lossy queue drops what arrives beyond what it serves and has room for (drop-tail);
  // the route hops there lose the same fraction of their arrivals. So does the lossless class
  // where PFC is off: nothing pauses its senders, and a switch's queue has the same room.
  s.drop = {};
  for (const TrafficClass tc : {TrafficClass::Lossless, TrafficClass::Lossy}) {
    const auto c = static_cast<size_t>(tc);
    if (need[c] <= 0 || (tc == TrafficClass::Lossless && config_.pfc)) continue;
    const double room = lossy_cap(l) - s.queue[c];
    double arriving = 0;
    for (uint32_t i = s.begin; i < s.end; ++i) {
      if (hops_[i].tc == tc) arriving += hops_[i].w * hops_[i].a;
    }
    const double allowed = given[c] + std::max(0.0, room) / dt;
    if (arriving > allowed) {
      s.drop[c] = (arriving - allowed) / arriving;
      need[c] -= arriving - allowed;
      moving = true;
    }
  }
  std::array<double, kTrafficClasses>& frac = s.frac;
  for (size_t c = 0; c < kTrafficClasses; ++c) {
    frac[c] = need[c] > 0 ? std::min(1.0, given[c] / need[c]) : 1.0;
    if (need[c] > 0 && frac[c] < 1 - 1e-12) moving = true;
  }
  // How long this plan holds (the adaptive step): until a hop's backlog empties (its departures
  // would outrun what it holds), or the data queue crosses ECN's thresholds, at these rates.
  const bool adaptive = this->adaptive();
  double calm = 1e300, drift = 0;
  for (uint32_t i = s.begin; i < s.end; ++i) {
    Hop& hop = hops_[i];
    const double a = hop.a * (1 - s.drop[static_cast<size_t>(hop.tc)]);
    out_[i] = frac[static_cast<size_t>(hop.tc)] * (hop.b / dt + a);
    if (!adaptive) continue;
    if (hop.b > 0 && out_[i] > a) calm = std::min(calm, hop.b / (out_[i] - a));
    if (hop.tc != TrafficClass::Control) drift += hop.w * (a - out_[i]);
  }
  if (s.ecn && drift != 0) {
    const double q = s.queue[0] + s.queue[1];
    for (const double threshold : {s.kmin, s.kmax}) {
      const double t = (threshold - q) / drift;
      if (t > 0) calm = std::min(calm, t);
    }
  }
  s.calm = calm;
  return moving;
}

double FluidNetwork::pfc_horizon(std::span<const fabric::LinkId> links) {
  // `links`: every egress link of some nodes, so that the ingress counters of those nodes'
  // links are summed here and nowhere else (what sum_queues() adds to, at the rates planned).
  for (const fabric::LinkId l : links) {
    const LinkState& s = links_[l];
    node_drift_[s.src] = 0;
    for (uint32_t j = s.begin; j < s.end; ++j) {
      if (hops_[j].prev != kNoIndex) links_[hops_[j].prev_link].ingress_drift = 0;
    }
  }
  for (const fabric::LinkId l : links) {
    LinkState& s = links_[l];
    double source = 0, total = 0;
    for (uint32_t j = s.begin; j < s.end; ++j) {
      const Hop& hop = hops_[j];
      const double a = hop.a * (1 - s.drop[static_cast<size_t>(hop.tc)]);
      const double d = hop.w * (a - out_[j]);
      total += d;
      if (hop.tc != TrafficClass::Lossless) continue;
      if (hop.prev == kNoIndex) {
        source += d;
      } else {
        links_[hop.prev_link].ingress_drift += d;
      }
    }
    s.source_drift = source;
    node_drift_[s.src] += total;
  }
  // The distance of each ingress counter to its XOFF (which the shared buffer's use moves too:
  // alpha (B - U)), and of each sender's send queue to the device buffer.
  double calm = 1e300;
  for (const fabric::LinkId l : links) {
    const LinkState& s = links_[l];
    calm = std::min(calm, until_closed(config_.device_buffer - s.source, -s.source_drift));
    for (uint32_t j = s.begin; j < s.end; ++j) {
      const Hop& hop = hops_[j];
      if (hop.prev == kNoIndex || hop.tc != TrafficClass::Lossless) continue;
      const LinkState& in = links_[hop.prev_link];
      const bool shared = node_buffer_[in.dst] > 0;
      const double moving = shared ? -config_.pfc_alpha * node_drift_[in.dst] : 0;
      calm =
          std::min(calm, until_closed(xoff(hop.prev_link) - in.ingress, moving - in.ingress_drift));
    }
  }
  return calm;
}

void FluidNetwork::compute_rates(Time at) {
  const double now = at.in_seconds();
  // What the rates of the last computation did up to now: the queues, the QPs' rate control and
  // the last bytes on their way (moved here, not at every event between two computations; the
  // senders' bytes in the pass over flows below, before their rates change).
  settle_hops(at);
  settle_qps(at);
  settle_tracers(now);
  // The empty hops that the computations since the last layout passed over: once more than
  // twice the live ones (about what a layout costs), a new layout clears them out.
  if (waste_ > 2 * (hops_.size() - retired_hops_)) dirty_ = true;
  waste_ += retired_hops_;
  if (dirty_) {
    rebuild();
  } else if (regroup_) {
    group();
    regroup_ = false;
  }
  delivered_ = false;
  new_routes_.clear();
  only_starts_ = true;
  for (Part& p : parts_) {
    p.moving = false;
    p.eager = false;
    p.rdma = false;
    p.wake = 1e300;
    p.min_rtt = 1e300;
    p.most_held = 0;
    p.calm = 1e300;
  }
  const auto links = static_cast<uint32_t>(order_.size());
  // Queues, ingress counters and buffer use from the routes' bytes; on threads node by node (a
  // node's egress queues hold what came over its ingress links), else link by link.
  for (const fabric::LinkId l : order_)
    links_[l].ingress = 0;
  if (grouped_) {
    in_parts(hops_.size(), [&](size_t part, size_t parts) {
      const auto [lo, hi] = node_part(part, parts);
      bool moving = false;
      double most = 0;
      for (uint32_t n = lo; n < hi; ++n) {
        double used = 0;
        for (uint32_t k = node_begin_[n]; k < node_begin_[n + 1]; ++k)
          used += sum_queues(links_[node_links_[k]], most);
        node_used_[nodes_[n]] = used;
        moving = moving || used > 0;
      }
      parts_[part].moving = moving;
      parts_[part].most_held = most;
    });
  } else {
    for (const fabric::LinkId l : order_)
      node_used_[links_[l].src] = 0;
    bool moving = false;
    for (const fabric::LinkId l : order_) {
      const double held = sum_queues(links_[l], parts_[0].most_held);
      node_used_[links_[l].src] += held;
      moving = moving || held > 0;
    }
    parts_[0].moving = moving;
  }
  // No route holds more than its hops times the most one hop holds: a route whose window is
  // more than that is not full, without adding up its hops (in the passes below).
  double most_held = 0;
  for (const Part& p : parts_)
    most_held = std::max(most_held, p.most_held);
  bool in_motion = false;
  bool lossless_held = false;  // a lossless or control queue, or a pause
  update_pauses(now);
  bool paused = false;  // (the adaptive step, below)
  for (const fabric::LinkId l : order_) {
    LinkState& s = links_[l];
    const double q = s.queue[0] + s.queue[1];
    paused = paused || s.paused || s.source_paused;
    s.p = marking(s, q);
    unmarked_[l] = 1 - s.p;
    in_motion = in_motion || s.paused || s.source_paused || s.p > 0;
    lossless_held = lossless_held || s.paused || s.source_paused || s.queue[0] + s.queue[2] > 0;
    // Queue depths while they are not zero, and once when they become zero again.
    const bool queued = q + s.queue[2] > 0;
    if (!observers_.empty() && (queued || s.queued)) {
      for (size_t c = 0; c < kTrafficClasses; ++c) {
        for (NetworkObserver* o : observers_)
          o->on_queue(l, static_cast<TrafficClass>(c), Time::seconds(now), s.queue[c]);
      }
    }
    s.queued = queued;
  }
  // What each QP sees (the most marked of its sending routes) and who uses it; on threads QP by
  // QP, else route by route.
  auto reset = [](QpState& q) {
    q.users = q.sending = 0;
    q.p = q.x = 0;
  };
  auto count = [this](QpState& q, const RouteState& rs) {
    if (!rs.sending) return;
    ++q.users;
    if (rs.cc) ++q.sending;
    double pass = 1;
    for (const HopRef& hop : path(rs))
      pass *= unmarked_[hop.link];
    q.p = std::max(q.p, 1 - pass);
  };
  if (grouped_) {
    const size_t qps = in_use_.size();
    in_parts(live_routes_.size(), [&](size_t part, size_t parts) {
      for (size_t i = qps * part / parts; i < qps * (part + 1) / parts; ++i) {
        reset(qps_[in_use_[i]]);
        for (uint32_t j = qp_begin_[i]; j < qp_begin_[i + 1]; ++j)
          count(qps_[in_use_[i]], routes_[qp_routes_[j]]);
      }
    });
  } else {
    for (const QpId q : in_use_)
      reset(qps_[q]);
    for (const uint32_t r : live_routes_) {
      if (routes_[r].qp != kNoQp) count(qps_[routes_[r].qp], routes_[r]);
    }
  }
  const size_t routes = live_routes_.size();
  // Senders' demands (on one thread with TCP, whose routes write their QP's round trip), then
  // the port each sends from shared max-min (the NIC's round robin).
  in_parts(tcp_ ? 0 : routes, [&](size_t part, size_t parts) {
    bool moving = false, rdma = false;
    double wake = 1e300, min_rtt = 1e300, calm = 1e300;
    for (size_t i = routes * part / parts; i < routes * (part + 1) / parts; ++i) {
      RouteState& rs = routes_[live_routes_[i]];
      rs.x = 0;
      rs.demand = 0;
      if (!rs.sending) continue;
      if (rs.tcp) {
        min_rtt = std::min(min_rtt, rs.base_rtt);
      } else {
        rdma = true;
      }
      const LinkState& first = links_[path(rs).front().link];
      if (rs.tc == TrafficClass::Lossless && (first.source_paused || first.paused)) continue;
      double want = rs.line;
      if (rs.cc && rs.qp != kNoQp) {
        const QpState& q = qps_[rs.qp];
        want = q.rc / q.users;
        moving = moving || q.rc < q.line || q.rt < q.line;
      }
      if (rs.tcp && rs.qp != kNoQp) {
        // TCP: a window per round trip, the round trip growing with the queues on the way (the
        // fluid model of Misra, Gong and Towsley); nothing during a retransmission time-out.
        QpState& q = qps_[rs.qp];
        if (q.rto_until > now + 1e-12) {  // (a picosecond: the clock's grain)
          wake = std::min(wake, q.rto_until);
          continue;
        }
        double rtt = rs.base_rtt;
        for (const HopRef& hop : path(rs)) {
          const LinkState& s = links_[hop.link];
          if (s.cap > 0) rtt += (s.queue[0] + s.queue[1] + s.queue[2]) / s.cap;
        }
        q.rtt = rtt;
        want = std::min(q.line, q.cwnd / rtt);
        if (config_.tcp.host_rate > 0) want = std::min(want, config_.tcp.host_rate);
        want /= q.users;
        // The window grows while it bounds the rate (and until its maximum).
        moving = moving || (q.cwnd < config_.tcp.max_window && q.cwnd / rtt < q.line);
      }
      if (rs.window > 0) {
        // Receiver-driven admission: with its window in flight, a sender sends as the receiver
        // returns credits, i.e. as the last hop delivers. (No hop holds more than most_held.)
        double in_flight = most_held * rs.length;
        if (in_flight * (1 + 1e-12) >= rs.window) {
          in_flight = 0;
          for (const HopRef& hop : path(rs))
            in_flight += hops_[hop.at].b;
        }
        if (in_flight >= rs.window) {
          want = std::min(want, out_[path(rs).back().at]);
        } else {
          calm = std::min(calm, (rs.window - in_flight) / rs.line);  // the adaptive step
        }
      }
      rs.demand = want;
    }
    parts_[part].moving = parts_[part].moving || moving;
    parts_[part].rdma = parts_[part].rdma || rdma;
    parts_[part].wake = std::min(parts_[part].wake, wake);
    parts_[part].min_rtt = std::min(parts_[part].min_rtt, min_rtt);
    parts_[part].calm = std::min(parts_[part].calm, calm);
  });
  const size_t ports = sender_links_.size();
  in_parts(hops_.size(), [&](size_t part, size_t parts) {
    std::vector<std::pair<double, uint32_t>>& senders = parts_[part].senders;
    for (size_t i = ports * part / parts; i < ports * (part + 1) / parts; ++i) {
      const LinkState& s = links_[sender_links_[i]];
      senders.clear();
      double asked = 0;
      for (uint32_t j = s.begin; j < s.end; ++j) {
        const Hop& hop = hops_[j];
        if (!hop.sched) continue;
        const double demand = routes_[hop.route].demand;
        if (demand <= 0) continue;
        senders.emplace_back(demand, hop.route);
        asked += demand;
      }
      // Max-min: those asking for less than the level get what they ask, the others the level,
      // (capacity left) / (senders left); the level rises as senders below it are served.
      double left = s.cap;
      if (asked <= left) {
        for (const auto& [demand, r] : senders)
          routes_[r].x = demand;
        continue;
      }
      auto rest = senders.begin();
      while (rest != senders.end()) {
        const double level = std::max(0.0, left) / static_cast<double>(senders.end() - rest);
        const auto above = std::partition(rest, senders.end(),
                                          [level](const auto& x) { return x.first <= level; });
        if (above == rest) {
          for (; rest != senders.end(); ++rest)
            routes_[rest->second].x = level;
          break;
        }
        for (; rest != above; ++rest) {
          routes_[rest->second].x = rest->first;
          left -= rest->first;
        }
      }
    }
  });
  // Flows: what each sender sent since the last computation at its rate; then a pipeline's
  // routes move in lockstep; rate caps (on one thread with TCP, whose routes add to their QP's
  // rate).
  const size_t slots = flows_.capacity();
  in_parts(tcp_ ? 0 : slots, [&](size_t part, size_t parts) {
    for (size_t h = slots * part / parts; h < slots * (part + 1) / parts; ++h) {
      FlowState& fl = flows_[static_cast<uint32_t>(h)];
      if (!fl.live || !fl.sending) continue;
      fl.sent += fl.rate * (now - fl.sent_t);
      fl.sent_t = now;
      double rate = fl.cap;
      for (const uint32_t r : fl.routes)
        rate = std::min(rate, routes_[r].x / routes_[r].share);
      fl.rate = rate;
      for (const uint32_t r : fl.routes) {
        RouteState& rs = routes_[r];
        rs.x = rate * rs.share;
        if (rs.tcp) qps_[rs.qp].x += rs.x;
      }
    }
  });
  // The step: network.step while anything but TCP is in motion (PFC's reaction, DCQCN's
  // feedback); with TCP alone, whose windows move once per round trip, up to tcp.step and half
  // the least base round trip of the connections that send, in whole steps.
  double step = config_.step;
  if (tcp_) {
    bool rdma = lossless_held;
    double min_rtt = 1e300;
    for (const Part& p : parts_) {
      rdma = rdma || p.rdma;
      min_rtt = std::min(min_rtt, p.min_rtt);
    }
    for (const uint32_t r : draining_)
      rdma = rdma || (!routes_[r].tcp && draining(routes_[r]));
    const double k = std::floor(std::min(config_.tcp.step, min_rtt / 2) / config_.step + 1e-9);
    if (!rdma && k > 1) step = k * config_.step;
  }
  // Queues in the order links feed each other, level by level: each serves what it holds and
  // what arrives.
  const double grid = (std::floor(now / step + 1e-9) + 1) * step;
  const double dt = grid - now;  // what the rates are planned for
  auto serve_part = [&](size_t v, size_t part, size_t parts) {
    const auto [lo, hi] = link_part(levels_[v], levels_[v + 1], part, parts);
    bool moving = false, eager = false;
    double calm = 1e300;
    for (uint32_t i = lo; i < hi; ++i) {
      if (serve(order_[i], dt)) moving = true;
      eager = eager || links_[order_[i]].dropping() || links_[order_[i]].cap <= 0;
      calm = std::min(calm, links_[order_[i]].calm);
    }
    parts_[part].moving = parts_[part].moving || moving;
    parts_[part].eager = parts_[part].eager || eager;
    parts_[part].calm = std::min(parts_[part].calm, calm);
  };
  const size_t levels = levels_.size() - 1;
  if (!parallel(hops_.size())) {
    for (size_t v = 0; v < levels; ++v)
      serve_part(v, 0, 1);
  } else {
    const size_t parts = parts_.size();
#pragma omp parallel num_threads(threads_)
    for (size_t v = 0; v < levels; ++v) {
#pragma omp for schedule(static)  // (as in_parts(); its end waits for the whole level)
      for (size_t part = 0; part < parts; ++part)
        serve_part(v, part, parts);
    }
  }
  const bool adaptive = this->adaptive();
  bool eager = tcp_;  // (TCP keeps its own step: above)
  double calm = rate_calm_;
  for (uint32_t i = levels_.back(); i < links; ++i) {  // a routing loop's
    if (serve(order_[i], dt)) in_motion = true;
    eager = eager || links_[order_[i]].dropping() || links_[order_[i]].cap <= 0;
    calm = std::min(calm, links_[order_[i]].calm);
  }
  double wake = 1e300;
  for (const Part& p : parts_) {
    in_motion = in_motion || p.moving;
    eager = eager || p.eager;
    wake = std::min(wake, p.wake);
    calm = std::min(calm, p.calm);
  }
  in_motion = in_motion || !draining_.empty();  // (settle_tracers() kept only those)
  wake_ = wake;
  moving_ = in_motion;
  eager_ = eager;
  // The adaptive step: the plan holds for more than one step (up to max_step, at most twice as
  // many as the last computation planned for) while no pause is on, nothing drops, and no
  // queue, backlog or PFC counter reaches a threshold within it at these rates; the rates are
  // planned as for one step (a backlog drains as fast as it would), so where something reaches
  // a threshold sooner, the plan is for one step, as without it.
  double stretch = 1;
  if (adaptive && !paused && !eager && calm > dt + step) {
    // PFC's counters at the planned rates, node by node (a node's ingress counters hold what its
    // egress queues hold).
    if (grouped_) {
      in_parts(hops_.size(), [&](size_t part, size_t parts) {
        const auto [lo, hi] = node_part(part, parts);
        parts_[part].calm = pfc_horizon(
            std::span(node_links_).subspan(node_begin_[lo], node_begin_[hi] - node_begin_[lo]));
      });
      for (const Part& p : parts_)
        calm = std::min(calm, p.calm);
    } else {
      calm = std::min(calm, pfc_horizon(order_));
    }
  }
  if (adaptive && !paused && !eager) {
    const double most = std::floor(config_.max_step / step + 1e-9);
    stretch =
        std::clamp(1 + std::floor((calm - dt) / step + 1e-9), 1.0, std::min(most, 2 * stretch_));
  }
  stretch_ = stretch;
  grid_ = Time::seconds(grid + (stretch - 1) * step);
  plan(now, true);
  if (moving_ && config_.pfc) detect_deadlock();
}

Time FluidNetwork::predict(const Due& d, double now) const {
  if (!d.tracer) {
    const FlowState& fl = flows_[d.id];
    if (!fl.live || !fl.sending || fl.rate <= 0) return Time::infinity();
    const Time left = transfer_time_or_never(fl.bytes - sent_now(fl, now), fl.rate);
    return left.is_infinite() ? left : Time::seconds(now) + left;
  }
  const RouteState& rs = routes_[d.id];
  if (!draining(rs)) return Time::infinity();
  const std::span<const HopRef> hops = path(rs);
  double wait = 0;
  for (uint32_t k = rs.tracer; k < hops.size(); ++k) {
    const LinkState& s = links_[hops[k].link];
    const double served = s.served[static_cast<size_t>(rs.tc)];
    const double ahead = k == rs.tracer ? rs.ahead : s.queue[static_cast<size_t>(rs.tc)];
    if (ahead <= kEmpty) continue;
    if (served <= 0) return Time::infinity();
    wait += ahead / served;
  }
  const Time left = transfer_time_or_never(wait, 1.0);
  return left.is_infinite() ? left : Time::seconds(now) + left;
}

void FluidNetwork::plan(double now, bool full) {
  // The earliest end of a sender or of a last byte's way through the queues, or the next step
  // while anything is in motion. Predictions hold while rates hold: they are made for every
  // flow after a full computation, for the new last bytes after a partial one, and kept in a
  // heap; an entry whose flow or last byte has gone is dropped when it comes to the top, and
  // one that is due but not done (rounding) is predicted again.
  // (due_ is a heap on std::greater: the earliest on top; a full plan makes it in one go.)
  // While in motion, the next computation, at the next step, plans again: what would happen
  // after it is not kept.
  const int64_t now_ps = Time::seconds(now).count_ps();
  const int64_t horizon = full && moving_ ? grid_.count_ps() : std::numeric_limits<int64_t>::max();
  auto add = [&](uint32_t id, bool tracer, std::vector<Due>& due) {
    Due d{0, id, tracer};
    const Time t = predict(d, now);
    if (t.is_infinite()) return false;
    d.ps = std::max(t.count_ps(), now_ps + 1);  // what is due now was taken by advance()
    if (d.ps > horizon) return false;
    due.push_back(d);
    return true;
  };
  auto push = [&](uint32_t id, bool tracer) {
    if (add(id, tracer, due_)) std::push_heap(due_.begin(), due_.end(), std::greater<>());
  };
  auto pop = [&] {
    std::pop_heap(due_.begin(), due_.end(), std::greater<>());
    due_.pop_back();
  };
  if (full) {
    const size_t slots = flows_.capacity();
    in_parts(slots, [&](size_t part, size_t parts) {
      for (size_t h = slots * part / parts; h < slots * (part + 1) / parts; ++h)
        add(static_cast<uint32_t>(h), false, parts_[part].due);
    });
    due_.clear();
    for (Part& p : parts_) {
      due_.insert(due_.end(), p.due.begin(), p.due.end());
      p.due.clear();
    }
    for (const uint32_t r : draining_)
      add(r, true, due_);
    std::make_heap(due_.begin(), due_.end(), std::greater<>());
  } else {
    for (const uint32_t r : ended_)
      push(r, true);
    for (const uint32_t r : new_routes_)  // (started at rest: start_at_rest())
      push(routes_[r].flow, false);
  }
  Time next = Time::infinity();
  while (!due_.empty()) {
    const Due d = due_.front();
    const Time t = predict(d, now);
    if (t.is_infinite()) {
      pop();  // gone, or stuck behind a paused link: steps take it up
      continue;
    }
    if (d.ps <= now_ps) {
      pop();
      push(d.id, d.tracer);
      continue;
    }
    next = Time::ps(d.ps);
    break;
  }
  if (moving_) next = std::min(next, std::max(grid_, Time::seconds(now) + Time::ps(1)));
  // Flows whose last bytes got through while the state moved outside advance() (a computation
  // moves the last bytes on their way): advance() at this instant ends them.
  if (!emptied_.empty()) next = std::min(next, clock_);
  if (wake_ < 1e299) {
    next = std::min(next, std::max(Time::ps(static_cast<int64_t>(std::ceil(wake_ * 1e12))),
                                   Time::seconds(now) + Time::ps(1)));
  }
  next_event_ = next;
}

bool FluidNetwork::alone_on_port(uint32_t r) const {
  const LinkState& port = links_[path(routes_[r])[routes_[r].sched].link];
  for (uint32_t j = port.begin; j < port.end; ++j) {
    const Hop& hop = hops_[j];
    if (hop.sched && hop.route != r && routes_[hop.route].sending) return false;
  }
  return true;
}

bool FluidNetwork::ended_alone() const {
  // Each sender that stopped was the only route its QP sent on, and the only one sending from
  // its port, at the last computation: no one else's share of the port or of the QP moves.
  for (const uint32_t r : ended_) {
    const RouteState& rs = routes_[r];
    if (rs.qp != kNoQp && qps_[rs.qp].users > 1) return false;
    if (!alone_on_port(r)) return false;
  }
  return true;
}

bool FluidNetwork::start_at_rest() {
  // What compute_rates() gives a sender alone on its port and QP, with nothing in motion: its
  // QP's rate (DCQCN at line rate) or its line, all of it at its port, its flow's cap; no queue.
  for (const uint32_t r : new_routes_) {
    const RouteState& rs = routes_[r];
    const FlowState& fl = flows_[rs.flow];
    if (fl.routes.size() != 1) return false;
    if (rs.qp != kNoQp) {
      const QpState& q = qps_[rs.qp];
      if (q.users > 0 || (rs.cc && (q.rc < q.line || q.rt < q.line))) return false;
    }
    if (!alone_on_port(r)) return false;
  }
  for (const uint32_t r : new_routes_) {
    RouteState& rs = routes_[r];
    FlowState& fl = flows_[rs.flow];
    double want = rs.line;
    if (rs.qp != kNoQp) {
      QpState& q = qps_[rs.qp];
      if (q.users > 0) return false;  // a second new route of the QP
      q.users = 1;
      q.sending = rs.cc ? 1 : 0;
      q.p = q.x = 0;
      if (rs.cc) want = q.rc;
    }
    rs.demand = want;
    const double cap = links_[path(rs)[rs.sched].link].cap;
    const double x = want <= cap ? want : std::max(0.0, cap);
    fl.sent_t = now_;  // (it sent nothing at rate 0 since it started)
    fl.rate = std::min(fl.cap, x / rs.share);
    rs.x = fl.rate * rs.share;
    for (const HopRef& hop : path(rs)) {
      if (serve(hop.link, config_.step)) return false;  // it would queue: compute
    }
  }
  return true;
}

void FluidNetwork::commit(Time now) {
  if (now.in_seconds() > now_) integrate(now);  // events of the engine since the last advance
  if (!moving_ && !added_ && ended_.empty() && !dirty_ && !delivered_ && now_ < wake_) {
    plan(now_, false);  // nothing changed: the same rates, from now
    return;
  }
  if (moving_ && !added_ && now < grid_) {
    // Between two steps, only senders that finished: their routes stop injecting now and the
    // rest keeps the rates of the step (the capacity they free is shared at the next step). A
    // hop's departure was its link's fraction of (queue drained over the step + arrivals): only
    // the arrivals change, so the departure changes by the fraction of their change. (Draining
    // the queue over what is left of the step instead would serve more than the link does.)
    for (const uint32_t r : ended_) {
      RouteState& rs = routes_[r];
      if (!rs.live) continue;
      const std::span<const HopRef> hops = path(rs);
      for (uint32_t k = 0; k < hops.size(); ++k) {
        const Hop& hop = hops_[hops[k].at];
        const LinkState& s = links_[hops[k].link];
        const double kept = 1 - s.drop[static_cast<size_t>(rs.tc)];
        const double a = k == 0 ? 0 : out_[hops[k - 1].at];
        const double d = std::max(
            0.0, out_[hops[k].at] + s.frac[static_cast<size_t>(rs.tc)] * (a - hop.a) * kept);
        retime(hops[k], now_, a, d);
      }
    }
    if (stretch_ > 1 && !ended_.empty()) {
      // A stretched step ends at the next boundary of network.step: the capacity they free is
      // shared as soon as without the stretch.
      const double next = (std::floor(now_ / config_.step + 1e-9) + 1) * config_.step;
      if (Time::seconds(next) < grid_) grid_ = Time::seconds(next);
      stretch_ = 1;
    }
    plan(now_, false);
    ended_.clear();
    return;
  }
  if (shortcuts_ && !moving_ && !eager_ && !tcp_ && (!added_ || (only_starts_ && !dirty_)) &&
      ended_alone()) {
    // At rest (every queue empty, every link serving all it is asked), senders that stopped
    // alone on their ports and QPs free capacity that no other sender was denied: every other
    // rate stays. Their hops are served again without them, as a computation would serve them;
    // the rest holds (a delivered flow's empty hops, too, until the next computation). Senders
    // that start alone on their ports and QPs take their line rates where every link on their
    // way can carry them (start_at_rest()); else the rates are computed.
    for (const uint32_t r : ended_) {
      RouteState& rs = routes_[r];
      rs.demand = 0;
      if (rs.qp != kNoQp) {
        QpState& q = qps_[rs.qp];
        q.users = q.sending = 0;
        q.p = q.x = 0;
      }
      for (const HopRef& hop : path(rs))
        serve(hop.link, config_.step);  // (no queue: what a hop sends does not depend on dt)
    }
    if (start_at_rest()) {
      delivered_ = false;
      added_ = false;
      plan(now_, false);
      ended_.clear();
      new_routes_.clear();
      return;
    }
  }
  compute_rates(now);
  added_ = false;
  ended_.clear();
  ++steps_;
}

bool FluidNetwork::trace(RouteState& rs, double& budget) {
  const std::span<const HopRef> hops = path(rs);
  while (rs.tracer < hops.size()) {
    const LinkState& s = links_[hops[rs.tracer].link];
    // Never more ahead of it than the queue holds (the queue may have drained meanwhile).
    rs.ahead = std::min(rs.ahead, s.queue[static_cast<size_t>(rs.tc)]);
    if (rs.ahead > kEmpty) {
      const double served = s.served[static_cast<size_t>(rs.tc)];
      if (served <= 0 || rs.ahead > served * budget) {
        rs.ahead -= served * budget;
        budget = 0;
        return false;
      }
      budget -= rs.ahead / served;
    }
    // Past this hop. In FIFO order every byte of the route was ahead of its last one; what the
    // fluid mixing left of them here stays, for the link to serve (moving it on with the last
    // byte would carry it past the link without using the link's capacity): the flow is
    // delivered once they are through too (advance()).
    if (++rs.tracer < hops.size())
      rs.ahead = links_[hops[rs.tracer].link].queue[static_cast<size_t>(rs.tc)];
  }
  return true;
}

void FluidNetwork::end_sending(FlowState& fl, double now) {
  fl.sent = sent_now(fl, now);
  fl.sending = false;
  fl.rate = 0;
  fl.sent_at = now;
  fl.in_flight = 0;
  for (const uint32_t r : fl.routes) {
    RouteState& rs = routes_[r];
    ended_.push_back(r);
    if (rs.sending && rs.cc && rs.qp != kNoQp && qps_[rs.qp].sending > 0) {
      // Its rate control up to now, while the route still sent.
      if (settle_qp(qps_[rs.qp], now)) report_qp(rs.qp, Time::seconds(now));
      --qps_[rs.qp].sending;
    }
    rs.sending = false;
    rs.x = 0;
    rs.tracer = 0;
    rs.ahead = links_[path(rs)[0].link].queue[static_cast<size_t>(rs.tc)];
    rs.traced_to = now;
    double budget = 0;
    if (!trace(rs, budget)) {
      ++fl.in_flight;
      draining_.push_back(r);
    }
  }
}

bool FluidNetwork::integrate_losses(fabric::LinkId l, Time t, double dt) {
  LinkState& s = links_[l];
  const bool marks = s.p > 0 && !observers_.empty();
  double marked = 0;  // bytes/s
  bool lost_any = false;
  for (uint32_t i = s.begin; i < s.end; ++i) {
    Hop& hop = hops_[i];
    double a = hop.a;
    if (const double drop = s.drop[static_cast<size_t>(hop.tc)]; drop > 0) {
      // Drop-tail: the bytes are the sender's to send again, and TCP's congestion signal.
      const RouteState& rs = routes_[hop.route];
      const double lost = hop.a * drop * dt;
      a -= hop.a * drop;
      flows_[rs.flow].lost += lost / rs.share;
      lost_any = lost_any || lost > 0;
      if (rs.qp != kNoQp) qps_[rs.qp].dropped += lost;
      for (NetworkObserver* o : observers_)
        o->on_drop(l, hop.tc, t, hop.w * lost);
    }
    hop.b += (a - out_[i]) * dt;
    if (hop.b < kEmpty) hop.b = 0;
    if (hop.b > 0 && s.cap <= 0) {
      // A link that is down drops what reaches it: no queue, no mark, no pause; the bytes are
      // the sender's to send again (go-back-N).
      const RouteState& rs = routes_[hop.route];
      flows_[rs.flow].lost += hop.b / rs.share;
      lost_any = true;
      for (NetworkObserver* o : observers_)
        o->on_drop(l, hop.tc, t, hop.w * hop.b);
      hop.b = 0;
    }
    if (marks && hop.tc != TrafficClass::Lossy) marked += hop.w * out_[i];
  }
  s.marked = marks ? marked * dt + s.mark_fix : 0;
  s.mark_fix = 0;
  return lost_any;
}

void FluidNetwork::advance(Time t, std::vector<Completion>& finished) {
  finished.clear();
  integrate(t);
  complete(t, finished);
}

void FluidNetwork::settle_hops(Time t) {
  const double to = t.in_seconds();
  const double dt = to - hops_t_;
  if (dt <= 0) return;
  if (!moving_ && !eager_) {
    // Nothing was in motion: every queue empty, every hop served in full (its departures its
    // arrivals, to the bit), nothing marked; and retime() changes rates only in motion.
    hops_t_ = to;
    return;
  }
  // The queues, link by link (hops of retired routes are empty and stay so); links that drop
  // after, in order on this thread (their losses go back to flows and QPs), and so are the
  // ECN marks reported (with what the rates that changed since hops_t_ marked before:
  // mark_fix). ECN marks RDMA's packets; TCP's are not ECN-capable (Linux's default tcp_ecn =
  // 2 accepts ECN but never asks for it).
  const auto links = static_cast<uint32_t>(order_.size());
  in_parts(hops_.size(), [&](size_t part, size_t parts) {
    const auto [lo, hi] = link_part(0, links, part, parts);
    std::vector<uint32_t>& found = parts_[part].found;
    for (uint32_t i = lo; i < hi; ++i) {
      LinkState& s = links_[order_[i]];
      if (s.dropping() || s.cap <= 0) {
        found.push_back(order_[i]);
        continue;
      }
      const bool marks = s.p > 0 && !observers_.empty();
      double marked = 0;  // bytes/s
      for (uint32_t j = s.begin; j < s.end; ++j) {
        Hop& hop = hops_[j];
        hop.b += (hop.a - out_[j]) * dt;
        if (hop.b < kEmpty) hop.b = 0;
        if (marks && hop.tc != TrafficClass::Lossy) marked += hop.w * out_[j];
      }
      s.marked = marks ? marked * dt + s.mark_fix : 0;
      s.mark_fix = 0;
      if (s.marked > 0) found.push_back(order_[i]);
    }
  });
  bool losses = false;
  for (Part& p : parts_) {
    for (const fabric::LinkId l : p.found) {
      const LinkState& s = links_[l];
      if ((s.dropping() || s.cap <= 0) && integrate_losses(l, t, dt)) losses = true;
      if (s.marked > 0) {
        for (NetworkObserver* o : observers_)
          o->on_ecn(l, t, s.p * s.marked / config_.packet);
      }
    }
    p.found.clear();
  }
  if (losses) {
    for (uint32_t h = 0; h < flows_.capacity(); ++h) {
      FlowState& fl = flows_[h];
      if (fl.live && fl.lost > 0) resend(fl, to);
    }
  }
  hops_t_ = to;
}

double FluidNetwork::hop_bytes(uint32_t j, double t) const {
  const double b = hops_[j].b + (hops_[j].a - out_[j]) * (t - hops_t_);
  return b < kEmpty ? 0 : b;
}

void FluidNetwork::retime(const HopRef& ref, double t, double a, double d) {
  // hops_[j].b holds what makes b + (a - d) (t' - hops_t_) the bytes queued at any t' until the
  // next settle_hops(): the bytes at t, then the new rates.
  Hop& hop = hops_[ref.at];
  const double since = t - hops_t_;
  if (since > 0) {
    const double b = hop_bytes(ref.at, t);
    if (hop.tc != TrafficClass::Lossy && links_[ref.link].p > 0)  // (p holds until then)
      links_[ref.link].mark_fix += hop.w * (out_[ref.at] - d) * since;
    hop.b = b - (a - d) * since;
  }
  hop.a = a;
  out_[ref.at] = d;
}

void FluidNetwork::integrate(Time t) {
  clock_ = t;
  const double to = t.in_seconds();
  const double dt = to - now_;
  if (dt > 0) {
    // The queues at every event while something drops or TCP runs (losses go back to the
    // senders at once); else at the next computation (settle_hops(): the rates hold until then
    // but where retime() changed them, and hop_bytes() gives a queue in between).
    if (eager_) settle_hops(t);
    // TCP windows, from what the connections sent and lost (if any connection ever was TCP).
    // (The senders' bytes and DCQCN's rates move at the next computation: compute_rates(),
    // settle_qps().)
    if (tcp_) {
      for (const uint32_t r : live_routes_) {
        const RouteState& rs = routes_[r];
        if (!rs.tcp || rs.qp == kNoQp) continue;
        QpState& q = qps_[rs.qp];
        if (q.last >= to) continue;
        const double before = q.cwnd;
        update_tcp(q, to, to - q.last);
        q.last = to;
        if (q.cwnd != before) {
          for (NetworkObserver* o : observers_)
            o->on_rate(rs.qp, t, q.cwnd / std::max(q.rtt, 1e-12));
        }
      }
    }
  }
  // Last bytes on their way: those predicted out of their last queue by now (their positions
  // move at the service rates of the last computation, which hold: the others move at the next
  // one, settle_tracers()).
  due_by(t);
  for (const uint32_t r : due_routes_)
    move_tracer(r, to);
  now_ = to;
}

void FluidNetwork::due_by(Time t) {
  // (due_ is a heap, earliest on top: its entries due by t are a subtree at its top.)
  const int64_t ps = t.count_ps();
  due_flows_.clear();
  due_routes_.clear();
  heap_walk_.clear();
  if (!due_.empty() && due_[0].ps <= ps) heap_walk_.push_back(0);
  for (size_t i = 0; i < heap_walk_.size(); ++i) {
    const size_t at = heap_walk_[i];
    (due_[at].tracer ? due_routes_ : due_flows_).push_back(due_[at].id);
    for (const size_t child : {2 * at + 1, 2 * at + 2}) {
      if (child < due_.size() && due_[child].ps <= ps) heap_walk_.push_back(child);
    }
  }
  // In route order, as the list of those draining had them (a flow's count of routes in flight
  // is what they change).
  std::sort(due_routes_.begin(), due_routes_.end());
  due_routes_.erase(std::unique(due_routes_.begin(), due_routes_.end()), due_routes_.end());
}

void FluidNetwork::move_tracer(uint32_t r, double to) {
  RouteState& rs = routes_[r];
  if (!draining(rs) || to < rs.traced_to) return;
  double budget = to - rs.traced_to;
  rs.traced_to = to;
  if (trace(rs, budget) && --flows_[rs.flow].in_flight == 0) emptied_.push_back(rs.flow);
}

void FluidNetwork::settle_tracers(double now) {
  size_t kept = 0;
  for (const uint32_t r : draining_) {
    move_tracer(r, now);
    if (draining(routes_[r])) draining_[kept++] = r;
  }
  draining_.resize(kept);
}

void FluidNetwork::complete(Time t, std::vector<Completion>& finished) {
  // Senders that sent their last byte, and flows delivered, in slot order (a flow's end touches
  // no other flow's state). Only some flows can: those whose sender's end was predicted by now
  // (rates hold between computations, and every computation predicts every sender's end up to
  // the next step), those whose last byte got through now, and those waiting for the bytes
  // they left in queues to drain (residue_).
  const double to = t.in_seconds();
  candidates_.swap(emptied_);
  emptied_.clear();
  // Those waiting for their queues: only when they may be empty (their hops' rates hold from one
  // computation to the next; they are not the hops whose rates retime() changes, once known).
  size_t waiting = 0;
  for (const uint32_t h : residue_) {
    FlowState& fl = flows_[h];
    if (!fl.live || fl.sending || fl.in_flight > 0) continue;
    if (!eager_ && fl.empty_for != steps_) {
      fl.empty_at = empty_time(fl);
      fl.empty_for = steps_;
    }
    if (!eager_ && to < fl.empty_at - 1e-12) {
      residue_[waiting++] = h;
    } else {
      candidates_.push_back(h);
    }
  }
  residue_.resize(waiting);
  candidates_.insert(candidates_.end(), due_flows_.begin(), due_flows_.end());  // (due_by(t))
  std::sort(candidates_.begin(), candidates_.end());
  candidates_.erase(std::unique(candidates_.begin(), candidates_.end()), candidates_.end());
  for (const uint32_t h : candidates_) {
    const FlowState& fl = flows_[h];
    if (!fl.live) continue;
    if (sent_all(fl, to) || (!fl.sending && fl.in_flight == 0 && drained(fl)))
      end_flow(h, to, finished);
    if (fl.live && !fl.sending && fl.in_flight == 0) {
      residue_.push_back(h);
      flows_[h].empty_for = kNoStep;  // (its routes' last rates may be retimed at this instant)
    }
  }
  candidates_.clear();
}

bool FluidNetwork::settle_qp(QpState& q, double to) const {
  q.cnps = 0;
  q.moved = false;
  if (q.sending == 0 || q.last >= to) return false;
  const double before = q.rc;
  if (q.p > 0) {
    q.cnps = -std::expm1(config_.dcqcn.cnp_interval * q.rc / config_.packet *
                         std::log1p(-std::min(q.p, 1 - 1e-12))) *
             (to - q.last) / config_.dcqcn.cnp_interval;
  }
  update_qp(q, to - q.last);
  q.last = to;
  q.moved = q.rc != before;
  return q.cnps > 0 || q.moved;
}

void FluidNetwork::report_qp(QpId id, Time t) {
  const QpState& q = qps_[id];
  for (NetworkObserver* o : observers_) {
    if (q.cnps > 0) o->on_cnp(id, t, q.cnps);
    if (q.moved) o->on_rate(id, t, q.rc);
  }
}

void FluidNetwork::settle_qps(Time t) {
  // Rate control of the QPs in use, from the marking they saw since the last computation.
  const double now = t.in_seconds();
  const size_t qps = in_use_.size();
  // (The adaptive step: how long until a QP's rate, moving as it moved over the interval, has
  // moved by step_tolerance of itself.)
  rate_calm_ = 1e300;
  in_parts(qps, [&](size_t part, size_t parts) {
    double calm = 1e300;
    for (size_t i = qps * part / parts; i < qps * (part + 1) / parts; ++i) {
      QpState& q = qps_[in_use_[i]];
      const double since = now - q.last, before = q.rc;
      if (settle_qp(q, now) && !observers_.empty()) parts_[part].found.push_back(in_use_[i]);
      if (adaptive() && q.rc != before && since > 0)
        calm = std::min(calm, config_.step_tolerance * q.rc * since / std::abs(q.rc - before));
    }
    parts_[part].rate_calm = calm;
  });
  for (Part& p : parts_) {
    for (const QpId id : p.found)
      report_qp(id, t);
    p.found.clear();
    rate_calm_ = std::min(rate_calm_, p.rate_calm);
  }
}

bool FluidNetwork::drained(const FlowState& fl) const {
  return std::all_of(fl.routes.begin(), fl.routes.end(), [&](uint32_t r) {
    return std::all_of(path(routes_[r]).begin(), path(routes_[r]).end(),
                       [&](const HopRef& hop) { return hop_bytes(hop.at, now_) <= kEmpty; });
  });
}

double FluidNetwork::empty_time(const FlowState& fl) const {
  // A hop holds b + (a - d) (t - hops_t_): one that drains is empty from some time on, one that
  // fills until some time; the flow's hops are all empty in the interval between, if any.
  double from = -std::numeric_limits<double>::infinity();
  double until = std::numeric_limits<double>::infinity();
  for (const uint32_t r : fl.routes) {
    for (const HopRef& hop : path(routes_[r])) {
      const double b = hops_[hop.at].b;
      const double fall = out_[hop.at] - hops_[hop.at].a;
      if (fall > 0) {
        from = std::max(from, hops_t_ + (b - kEmpty) / fall);
      } else if (fall < 0) {
        until = std::min(until, hops_t_ + (kEmpty - b) / -fall);
      } else if (b > kEmpty) {
        return std::numeric_limits<double>::infinity();
      }
    }
  }
  return from <= until ? from : std::numeric_limits<double>::infinity();
}

void FluidNetwork::end_flow(uint32_t h, double to, std::vector<Completion>& finished) {
  FlowState& fl = flows_[h];
  // A sender that sent its last byte now: it starts behind what is queued at its first hop.
  if (sent_all(fl, to)) end_sending(fl, to);
  // Its last bytes have all left the last queue, and every byte before them: delivered (the
  // engine adds the wire).
  if (fl.sending || fl.in_flight > 0 || !drained(fl)) return;
  finished.push_back({h, Time::seconds(to - fl.sent_at)});
  for (const uint32_t r : fl.routes) {
    // Retired: its hops stay in their links' ranges, empty (and its route gives them nothing to
    // send), until the next rebuild (a new route over its links takes their slots: append()).
    // The rates are computed again at the next commit, on the same structure, unless nothing
    // was in motion (commit()).
    RouteState& rs = routes_[r];
    rs.live = false;
    retired_hops_ += rs.length;
    for (const HopRef& ref : path(rs)) {
      retime(ref, to, 0, 0);
      hops_[ref.at].b = 0;  // (drained: at most kEmpty)
      // Its arrivals are its route's (none): the slot before it may be another route's once a
      // new route takes it (append()).
      hops_[ref.at].prev = kNoIndex;
    }
    retired_.push_back(r);
  }
  fl.live = false;
  flows_.release(h);
  --active_flows_;
  delivered_ = true;
  // The empty hops wait in their links' ranges for the next routes over them (append()); they
  // cost only the computations that pass over them, and are cleared out with a new layout when
  // those have cost more than a layout (compute_rates()), or, for memory, when the routes laid
  // out since the last layout (whose states and paths only a layout frees) hold eight times the
  // hops of the live ones and 2^18 more (some 64K routes, 10 MB).
  const size_t live = hops_.size() - retired_hops_;
  if (refs_.size() > 8 * live + (size_t{1} << 18)) dirty_ = true;
}

void FluidNetwork::detect_deadlock() {
  // Wait-for graph over paused links: l -> m when bytes that came over l wait in its receiver
  // for m, and m is paused too. A cycle whose links have all been paused for 100 steps cannot
  // drain: a cyclic buffer dependency.
  std::vector<std::vector<fabric::LinkId>> waits;
  std::vector<fabric::LinkId> paused;
  for (const fabric::LinkId l : order_) {
    if (links_[l].paused && now_ - links_[l].paused_since >= 100 * config_.step)
      paused.push_back(l);
  }
  if (paused.size() < 2) return;
  std::vector<int32_t>& index = deadlock_index_;  // -1 outside this function
  if (index.size() < fabric_.link_count()) index.assign(fabric_.link_count(), -1);
  for (size_t i = 0; i < paused.size(); ++i)
    index[paused[i]] = static_cast<int32_t>(i);
  struct Reset {  // leaves the map clean on every way out, the throw included
    std::vector<int32_t>& index;
    const std::vector<fabric::LinkId>& links;
    ~Reset() {
      for (const fabric::LinkId l : links)
        index[l] = -1;
    }
  } reset{index, paused};
  waits.resize(paused.size());
  for (const uint32_t r : live_routes_) {
    const RouteState& rs = routes_[r];
    if (!rs.live) continue;  // (a delivered route's slots may be another's since: append())
    const std::span<const HopRef> hops = path(rs);
    for (uint32_t k = 1; k < hops.size(); ++k) {
      const int32_t from = index[hops[k - 1].link], to = index[hops[k].link];
      if (from >= 0 && to >= 0 && hops_[hops[k].at].b > 0) waits[from].push_back(hops[k].link);
    }
  }
  // Iterative depth-first search with colours; report the first cycle found.
  std::vector<uint8_t> colour(paused.size(), 0);
  std::vector<int32_t> parent(paused.size(), -1);
  for (size_t s = 0; s < paused.size(); ++s) {
    if (colour[s] != 0) continue;
    std::vector<std::pair<int32_t, size_t>> stack{{static_cast<int32_t>(s), 0}};
    colour[s] = 1;
    while (!stack.empty()) {
      auto& [u, i] = stack.back();
      if (i < waits[u].size()) {
        const int32_t v = index[waits[u][i++]];
        if (colour[v] == 1) {
          std::vector<std::string> cycle;
          for (int32_t x = u; x != v && x >= 0; x = parent[x]) {
            const fabric::Link& l = fabric_.link(paused[x]);
            cycle.push_back(fabric_.node(l.src).name + "->" + fabric_.node(l.dst).name);
          }
          const fabric::Link& l = fabric_.link(paused[v]);
          cycle.push_back(fabric_.node(l.src).name + "->" + fabric_.node(l.dst).name);
          std::reverse(cycle.begin(), cycle.end());
          throw FabricDeadlock(fmt::format(
              "PFC deadlock at {:.3f} ms: a cyclic buffer dependency of {} paused links ({}); "
              "nothing on it can drain (a routing loop? lossless traffic on a path that goes "
              "down and up again?)",
              now_ * 1e3, cycle.size(), fmt::join(cycle, ", ")));
        }
        if (colour[v] == 0) {
          colour[v] = 1;
          parent[v] = u;
          stack.emplace_back(v, 0);
        }
      } else {
        colour[u] = 2;
        stack.pop_back();
      }
    }
  }
}

}  // namespace rocesim::network

// ---------------------------------------------------------------------------------------------
// The `network` section when `model: fluid`

namespace rocesim::network {
namespace {

constexpr Param kPfcParams[] = {
    {.key = "enabled",
     .type = ParamType::Boolean,
     .fallback = "true",
     .help = "pause the lossless class hop by hop (IEEE 802.1Qbb); false: its switch queues "
             "drop at the room a lossy queue has (lossy_alpha, lossy_limit)"},
    {.key = "alpha",
     .type = ParamType::Number,
     .fallback = "0.125",
     .help = "dynamic threshold of a switch's lossless ingress queue: XOFF = alpha x (free "
             "shared buffer) (Choudhury-Hahne; 1/8 as HPCC's MMU for NIC-speed ports, SONiC "
             "uses 2^dynamic_th)",
     .check = Check::Positive},
    {.key = "xon_offset",
     .type = ParamType::Bytes,
     .fallback = "18KiB",
     .help = "a pause ends when the ingress queue falls this far below XOFF (SONiC's "
             "pg_lossless profile xon, 18432 B; at most half of XOFF)",
     .check = Check::NonNegative},
    {.key = "watchdog",
     .type = ParamType::Time,
     .fallback = "200ms",
     .help = "a pause longer than this is counted as a PFC storm (SONiC detection_time)",
     .check = Check::Positive},
};
const ParamTable kPfcTable{"network.pfc (model: fluid)", "Priority flow control.", kPfcParams};

constexpr Param kEcnRoleParams[] = {
    {.key = "enabled",
     .type = ParamType::Boolean,
     .help = "mark on this role's egress queues (default: ecn.enabled)",
     .optional = true},
    {.key = "kmin",
     .type = ParamType::Bytes,
     .help = "queue below which nothing is marked (default: ecn.kmin)",
     .check = Check::NonNegative,
     .optional = true},
    {.key = "kmax",
     .type = ParamType::Bytes,
     .help = "queue above which every packet is marked (default: ecn.kmax)",
     .check = Check::Positive,
     .optional = true},
    {.key = "pmax",
     .type = ParamType::Number,
     .help = "marking probability at kmax (default: ecn.pmax)",
     .check = Check::Fraction,
     .optional = true},
    {.key = "scale_with_rate",
     .type = ParamType::Boolean,
     .help = "thresholds are per 25 Gb/s of port rate (default: ecn.scale_with_rate)",
     .optional = true},
};
const ParamTable kEcnRoleTable{
    "network.ecn.<role> (model: fluid)",
    "ECN marking of one switch role (leaf, rail, spine, aggregation, core); every key "
    "defaults to the `ecn` value.",
    kEcnRoleParams};

constexpr Param kEcnParams[] = {
    {.key = "enabled",
     .type = ParamType::Boolean,
     .fallback = "true",
     .help = "RED-style ECN marking on switch egress queues"},
    {.key = "kmin",
     .type = ParamType::Bytes,
     .fallback = "100KB",
     .help = "queue below which nothing is marked (HPCC: 100 KB per 25 Gb/s)",
     .check = Check::NonNegative},
    {.key = "kmax",
     .type = ParamType::Bytes,
     .fallback = "400KB",
     .help = "queue above which every packet is marked (HPCC: 400 KB per 25 Gb/s)",
     .check = Check::Positive},
    {.key = "pmax",
     .type = ParamType::Number,
     .fallback = "0.2",
     .help = "marking probability at kmax (HPCC)",
     .check = Check::Fraction},
    {.key = "scale_with_rate",
     .type = ParamType::Boolean,
     .fallback = "true",
     .help = "kmin and kmax are per 25 Gb/s of port rate (HPCC's rule); false: absolute"},
    {.key = "leaf",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "leaf overrides",
     .choices = "see network.ecn.<role>"},
    {.key = "rail",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "rail switch overrides",
     .choices = "see network.ecn.<role>"},
    {.key = "spine",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "spine overrides",
     .choices = "see network.ecn.<role>"},
    {.key = "aggregation",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "aggregation switch overrides",
     .choices = "see network.ecn.<role>"},
    {.key = "core",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "core switch overrides",
     .choices = "see network.ecn.<role>"},
};
const ParamTable kEcnTable{"network.ecn (model: fluid)",
                           "Marking at the congestion point (MODELS.md 1.2).", kEcnParams};

constexpr Param kDcqcnParams[] = {
    {.key = "enabled",
     .type = ParamType::Boolean,
     .fallback = "true",
     .help = "DCQCN rate control on every QP that leaves a NIC onto the fabric; false: QPs "
             "send at line rate and only PFC holds them back"},
    {.key = "g",
     .type = ParamType::Number,
     .fallback = "0.00390625",
     .help = "alpha gain (1/256: DCQCN paper, HPCC)",
     .check = Check::Fraction},
    {.key = "alpha_interval",
     .type = ParamType::Time,
     .fallback = "1us",
     .help = "alpha update period tau' (NVIDIA dce_tcp_rtt 1 us; the paper 55 us)",
     .check = Check::Positive},
    {.key = "cnp_interval",
     .type = ParamType::Time,
     .fallback = "4us",
     .help = "shortest time between two CNPs of a QP, tau (NVIDIA min_time_between_cnps and "
             "rate_reduce_monitor_period 4 us; the paper 50 us)",
     .check = Check::Positive},
    {.key = "timer",
     .type = ParamType::Time,
     .fallback = "300us",
     .help = "rate-increase timer T (NVIDIA rpg_time_reset; the paper 55 us)",
     .check = Check::Positive},
    {.key = "byte_counter",
     .type = ParamType::Bytes,
     .fallback = "0B",
     .help = "increase event every this many bytes sent, B; 0 = off, as in HPCC (the paper "
             "10 MB)",
     .check = Check::NonNegative},
    {.key = "fast_recovery",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "increase events of fast recovery before additive increase, F (NVIDIA "
             "rpg_threshold 1; the paper 5)",
     .check = Check::NonNegative},
    {.key = "ai_fraction",
     .type = ParamType::Number,
     .fallback = "0.0002",
     .help = "additive increase R_AI as a fraction of the QP's line rate (5 Mb/s per 25 Gb/s: "
             "NVIDIA's rpg_ai_rate scaled with link speed as HPCC does)",
     .check = Check::Fraction},
    {.key = "hai_fraction",
     .type = ParamType::Number,
     .fallback = "0.002",
     .help = "hyper increase R_HAI as a fraction of the QP's line rate (50 Mb/s per 25 Gb/s)",
     .check = Check::Fraction},
    {.key = "min_rate",
     .type = ParamType::Bandwidth,
     .fallback = "1Mbps",
     .help = "floor of a QP's rate (NVIDIA rpg_min_rate)",
     .check = Check::Positive},
};
const ParamTable kDcqcnTable{"network.dcqcn (model: fluid)",
                             "DCQCN's reaction point per QP, as fluid equations (the notification "
                             "point's CNP spacing is cnp_interval).",
                             kDcqcnParams};

constexpr Param kTcpParams[] = {
    {.key = "congestion_control",
     .type = ParamType::Choice,
     .fallback = "cubic",
     .help = "window growth and cut: cubic (RFC 9438, Linux's default) or newreno (RFC 5681 / "
             "6582)",
     .choices = "cubic|newreno"},
    {.key = "mss",
     .type = ParamType::Bytes,
     .fallback = "8948B",
     .help = "payload per segment: a 9000-byte MTU less IPv4 (20), TCP (20) and timestamp (12) "
             "headers; 1448 B at a 1500-byte MTU",
     .check = Check::Positive},
    {.key = "initial_window",
     .type = ParamType::Integer,
     .fallback = "10",
     .help = "segments of the first window (RFC 6928, Linux's TCP_INIT_CWND)",
     .check = Check::Positive},
    {.key = "max_window",
     .type = ParamType::Bytes,
     .fallback = "6MiB",
     .help = "largest window: the receive buffer (Linux's net.ipv4.tcp_rmem maximum, 6 MiB)",
     .check = Check::Positive},
    {.key = "min_rto",
     .type = ParamType::Time,
     .fallback = "200ms",
     .help = "least retransmission time-out, added to the round trip (Linux's TCP_RTO_MIN)",
     .check = Check::Positive},
    {.key = "host_rate",
     .type = ParamType::Bandwidth,
     .fallback = "0bps",
     .help = "most one connection's host stack moves (system calls, copies, interrupts: measure "
             "it, e.g. one iperf3 stream); 0: no bound, else at least 1Mbps",
     .check = Check::NonNegative},
    {.key = "host_latency",
     .type = ParamType::Time,
     .fallback = "0s",
     .help = "time both hosts' stacks add to a round trip (measure it, e.g. sockperf ping-pong "
             "less the wire); at most 1s",
     .check = Check::NonNegative},
    {.key = "restart_after_idle",
     .type = ParamType::Boolean,
     .fallback = "true",
     .help = "a connection idle for longer than its time-out restarts from its initial window "
             "(RFC 2861; Linux's net.ipv4.tcp_slow_start_after_idle)"},
    {.key = "step",
     .type = ParamType::Time,
     .fallback = "4us",
     .help = "the most the integration step grows to while TCP alone is in motion (no other "
             "route sending or draining, no lossless queue, no pause): at most half the least "
             "base round trip of the sending connections, in whole network.step; "
             "network.step or less: always network.step (docs/models/fluid.md)",
     .check = Check::Positive},
};
const ParamTable kTcpTable{"network.tcp (model: fluid)",
                           "TCP senders: the connections of workloads with `transport: tcp`, "
                           "whose bytes travel in the lossy class.",
                           kTcpParams};

constexpr Param kFluidParams[] = {
    kModelParam,
    {.key = "step",
     .type = ParamType::Time,
     .fallback = "1us",
     .help = "integration step while queues, pauses or rate control are in motion (at least "
             "1ns); bounds the reaction time of PFC and the feedback delay of DCQCN",
     .check = Check::Positive},
    {.key = "max_step",
     .type = ParamType::Time,
     .fallback = "8us",
     .help = "the most the step grows to, in whole steps, while no pause is on, nothing drops "
             "and no queue, backlog or PFC counter nears a threshold (ECN's, XOFF, empty) at "
             "the current rates (the adaptive step, docs/models/fluid.md); network.step or "
             "less: always network.step",
     .check = Check::Positive},
    {.key = "step_tolerance",
     .type = ParamType::Number,
     .fallback = "0.05",
     .help = "the adaptive step: the most a QP's DCQCN rate may move, as a fraction of itself, "
             "within one step (its sending rate holds over a step); in (0, 1]",
     .check = Check::Positive},
    {.key = "packet_size",
     .type = ParamType::Bytes,
     .fallback = "4096B",
     .help = "payload per packet (the RoCE path MTU): ECN marks and DCQCN's equations count "
             "packets",
     .check = Check::Positive},
    {.key = "device_buffer",
     .type = ParamType::Bytes,
     .fallback = "256KiB",
     .help = "bytes a NIC, NVSwitch or GPU holds per ingress port (and a sender per send "
             "queue) before it stops its upstream: the credit or PFC threshold of devices",
     .check = Check::Positive},
    {.key = "lossy_weight",
     .type = ParamType::Number,
     .fallback = "1",
     .help = "share of the lossy class against the lossless class (weight 1) on a link where "
             "both queue (ETS; Cumulus' RoCE default is 50/50)",
     .check = Check::Positive},
    {.key = "lossy_alpha",
     .type = ParamType::Number,
     .fallback = "1",
     .help = "dynamic threshold of a switch's lossy egress queue: it drops past alpha x (free "
             "shared buffer) (Choudhury-Hahne; alone, a queue takes alpha / (1 + alpha) of the "
             "buffer)",
     .check = Check::Positive},
    {.key = "lossy_limit",
     .type = ParamType::Bytes,
     .fallback = "0B",
     .help = "fixed cap on a switch's lossy egress queue (a per-port drop-tail limit), on top of "
             "the dynamic threshold; 0: none",
     .check = Check::NonNegative},
    {.key = "pfc",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "priority flow control",
     .choices = "see network.pfc"},
    {.key = "ecn",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "ECN marking",
     .choices = "see network.ecn"},
    {.key = "dcqcn",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "DCQCN rate control",
     .choices = "see network.dcqcn"},
    {.key = "tcp",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "TCP senders (`transport: tcp`)",
     .choices = "see network.tcp"},
};
const ParamTable kFluidTable{
    "network (model: fluid)",
    "Queues at every egress port, PFC, ECN, DCQCN and TCP, integrated in time steps "
    "(docs/models/fluid.md). Lossless RDMA class, lossy class (drop-tail) and a strict-priority "
    "control class; switch buffers from the topology (`leaf.buffer`, ...).",
    kFluidParams};

constexpr const ParamTable* kFluidSubtables[] = {&kPfcTable, &kEcnTable, &kEcnRoleTable,
                                                 &kDcqcnTable, &kTcpTable};

}  // namespace

const ParamTable& fluid_table() {
  return kFluidTable;
}

std::span<const ParamTable* const> fluid_subtables() {
  return kFluidSubtables;
}

FluidConfig read_fluid(const ParamReader& r) {
  (void)r.choice("model");
  FluidConfig c;
  c.step = r.time("step").in_seconds();
  c.max_step = r.time("max_step").in_seconds();
  c.step_tolerance = r.number("step_tolerance");
  if (c.step_tolerance > 1)
    r.fail("step_tolerance", "at most 1", fmt::format("{}", c.step_tolerance));
  // Under a nanosecond a step moves less than a minimum Ethernet frame (64 bytes) on a 400G
  // link: finer than anything the queues resolve, at a million steps a simulated millisecond.
  if (c.step < 1e-9) r.fail("step", "at least 1ns", format_time(r.time("step")));
  c.packet = static_cast<double>(r.bytes("packet_size").count());
  c.device_buffer = static_cast<double>(r.bytes("device_buffer").count());
  c.lossy_weight = r.number("lossy_weight");
  c.lossy_alpha = r.number("lossy_alpha");
  c.lossy_limit = static_cast<double>(r.bytes("lossy_limit").count());
  const ParamReader pfc = r.section("pfc", kPfcTable);
  c.pfc = pfc.boolean("enabled");
  c.pfc_alpha = pfc.number("alpha");
  c.xon_offset = static_cast<double>(pfc.bytes("xon_offset").count());
  c.watchdog = pfc.time("watchdog").in_seconds();
  const ParamReader ecn = r.section("ecn", kEcnTable);
  EcnProfile base;
  base.enabled = ecn.boolean("enabled");
  base.kmin = static_cast<double>(ecn.bytes("kmin").count());
  base.kmax = static_cast<double>(ecn.bytes("kmax").count());
  base.pmax = ecn.number("pmax");
  base.scale_with_rate = ecn.boolean("scale_with_rate");
  c.ecn.fill(base);
  auto role = [&](std::string_view key, fabric::SwitchRole which) {
    const ParamReader x = ecn.section(key, kEcnRoleTable);
    EcnProfile& e = c.ecn[static_cast<size_t>(which)];
    if (x.has("enabled")) e.enabled = x.boolean("enabled");
    if (x.has("kmin")) e.kmin = static_cast<double>(x.bytes("kmin").count());
    if (x.has("kmax")) e.kmax = static_cast<double>(x.bytes("kmax").count());
    if (x.has("pmax")) e.pmax = x.number("pmax");
    if (x.has("scale_with_rate")) e.scale_with_rate = x.boolean("scale_with_rate");
    if (e.kmax <= e.kmin) {
      x.fail(x.has("kmax") ? "kmax" : "kmin", "kmax above kmin",
             fmt::format("kmin {} B, kmax {} B", e.kmin, e.kmax));
    }
  };
  if (base.kmax <= base.kmin) {
    ecn.fail("kmax", "kmax above kmin", fmt::format("kmin {} B, kmax {} B", base.kmin, base.kmax));
  }
  role("leaf", fabric::SwitchRole::Leaf);
  role("rail", fabric::SwitchRole::Rail);
  role("spine", fabric::SwitchRole::Spine);
  role("aggregation", fabric::SwitchRole::Aggregation);
  role("core", fabric::SwitchRole::Core);
  const ParamReader d = r.section("dcqcn", kDcqcnTable);
  c.dcqcn.enabled = d.boolean("enabled");
  c.dcqcn.g = d.number("g");
  c.dcqcn.alpha_interval = d.time("alpha_interval").in_seconds();
  c.dcqcn.cnp_interval = d.time("cnp_interval").in_seconds();
  c.dcqcn.timer = d.time("timer").in_seconds();
  c.dcqcn.byte_counter = static_cast<double>(d.bytes("byte_counter").count());
  c.dcqcn.fast_recovery = d.integer_as<int>("fast_recovery");
  c.dcqcn.ai_fraction = d.number("ai_fraction");
  c.dcqcn.hai_fraction = d.number("hai_fraction");
  c.dcqcn.min_rate = d.bandwidth("min_rate").bytes_per_second();
  const ParamReader t = r.section("tcp", kTcpTable);
  c.tcp.algorithm = t.choice("congestion_control") == "newreno" ? TcpConfig::Algorithm::NewReno
                                                                : TcpConfig::Algorithm::Cubic;
  c.tcp.mss = static_cast<double>(t.bytes("mss").count());
  c.tcp.initial_window = static_cast<double>(t.integer_as<int>("initial_window"));
  c.tcp.max_window = static_cast<double>(t.bytes("max_window").count());
  c.tcp.min_rto = t.time("min_rto").in_seconds();
  c.tcp.host_rate = t.bandwidth("host_rate").bytes_per_second();
  c.tcp.host_latency = t.time("host_latency").in_seconds();
  // Beyond these a host is not a host, and the integration would step through hours or years
  // of simulated time at network.step (a run that never ends, or never finishes its flows).
  if (c.tcp.host_rate > 0 && c.tcp.host_rate < 1e6 / 8) {
    t.fail("host_rate", "0 (no bound) or at least 1Mbps",
           fmt::format("{} bps", t.bandwidth("host_rate").bits_per_second()));
  }
  if (c.tcp.host_latency > 1)
    t.fail("host_latency", "at most 1s", format_time(t.time("host_latency")));
  c.tcp.restart_after_idle = t.boolean("restart_after_idle");
  c.tcp.step = t.time("step").in_seconds();
  return c;
}

std::unique_ptr<NetworkModel> make_fluid(const ParamReader& section, const fabric::Fabric& f,
                                         const ModelOptions& options) {
  return std::make_unique<FluidNetwork>(f, read_fluid(section), options.threads);
}

}  // namespace rocesim::network
