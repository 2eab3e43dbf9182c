#include "sim/network/maxmin_solver.hpp"

#include <algorithm>
#include <cmath>

#include "sim/core/error.hpp"

namespace rocesim::network {
namespace {

// Relative margin under tau below which a flow counts as frozen: rates equal in exact arithmetic
// may differ in the last bits, and recomputing a flow is always safe while freezing one that
// should move is not.
constexpr double kFreezeMargin = 1e-9;
constexpr MaxMinSolver::LinkIndex kNoLink = static_cast<MaxMinSolver::LinkIndex>(-1);

// Min-heap on share; ties by link index so the order of fixing is deterministic.
using HeapEntry = MaxMinSolver::HeapEntry;
struct HeapAfter {
  bool operator()(const HeapEntry& a, const HeapEntry& b) const {
    return a.share > b.share || (a.share == b.share && a.link > b.link);
  }
};

}  // namespace

MaxMinSolver::MaxMinSolver(std::vector<double> link_capacity)
    : links_(link_capacity.size()),
      extra_weight_(link_capacity.size(), 0.0),
      rate_heap_(link_capacity.size()) {
  for (size_t l = 0; l < links_.size(); ++l) {
    const double c = link_capacity[l];
    ROCESIM_CHECK(c > 0 && std::isfinite(c), "link capacities must be > 0");
    links_[l].cap = c;
  }
}

MaxMinSolver::FlowSlot MaxMinSolver::add(std::span<const LinkIndex> links, double cap,
                                         std::span<const double> weights) {
  ROCESIM_CHECK(!links.empty(), "a flow crosses at least one link");
  ROCESIM_CHECK(weights.empty() || weights.size() == links.size(), "one weight per link");
  ROCESIM_CHECK(cap > 0, "a flow's rate cap must be positive");
  const bool weighted =
      std::any_of(weights.begin(), weights.end(), [](double w) { return w != 1; });
  const FlowSlot f = flows_.acquire();
  Flow& x = flows_[f];
  x.cap = cap;
  x.rate = -1;
  x.nhops = static_cast<uint32_t>(links.size());
  x.extended = kNone;
  if (links.size() > kInlineHops || weighted) {
    x.extended = extended_.acquire();
    Extended& e = extended_[x.extended];
    e.hops.assign(links.begin(), links.end());
    e.pos.assign(links.size(), 0);
    if (weights.empty()) {
      e.weight.assign(links.size(), 1.0);
    } else {
      e.weight.assign(weights.begin(), weights.end());
    }
    for (uint32_t i = 0; i < x.nhops; ++i) {
      const LinkIndex l = links[i];
      ROCESIM_CHECK(l < links_.size(), "link index out of range");
      ROCESIM_CHECK(e.weight[i] > 0 && std::isfinite(e.weight[i]), "weights must be positive");
      extra_weight_[l] += e.weight[i] - 1;
      e.pos[i] = static_cast<uint32_t>(links_[l].flows.size());
      links_[l].flows.push_back({f, i});
      dirty_links_.push_back(l);
      note_added(l, f);
    }
  } else {
    for (uint32_t i = 0; i < x.nhops; ++i) {
      const LinkIndex l = links[i];
      ROCESIM_CHECK(l < links_.size(), "link index out of range");
      x.hops[i] = l;
      x.pos[i] = static_cast<uint32_t>(links_[l].flows.size());
      links_[l].flows.push_back({f, i});
      dirty_links_.push_back(l);
      note_added(l, f);
    }
  }
  added_.push_back(f);
  ++active_;
  return f;
}

void MaxMinSolver::remove(FlowSlot f) {
  ROCESIM_CHECK(f < flows_.capacity() && flows_[f].nhops > 0, "removing a flow that is not active");
  Flow& x = flows_[f];
  if (x.rate >= 0) removed_min_rate_ = std::min(removed_min_rate_, x.rate);
  // Each hop: swap the last entry of the link's list into this flow's place.
  if (simple(x)) {
    for (uint32_t i = 0; i < x.nhops; ++i) {
      const LinkIndex l = x.hops[i];
      FlowList& v = links_[l].flows;
      const Entry last = v.back();
      v[x.pos[i]] = last;
      pos(flows_[last.flow], last.hop) = x.pos[i];
      v.pop_back();
      if (v.empty()) rate_heap_[l].clear();
      dirty_links_.push_back(l);
    }
  } else {
    Extended& e = extended_[x.extended];
    for (uint32_t i = 0; i < x.nhops; ++i) {
      const LinkIndex l = e.hops[i];
      FlowList& v = links_[l].flows;
      extra_weight_[l] = v.size() == 1 ? 0 : extra_weight_[l] - (e.weight[i] - 1);
      const Entry last = v.back();
      v[e.pos[i]] = last;
      pos(flows_[last.flow], last.hop) = e.pos[i];
      v.pop_back();
      if (v.empty()) rate_heap_[l].clear();
      dirty_links_.push_back(l);
    }
  }
  x.nhops = 0;
  if (!simple(x)) {
    extended_.release(x.extended);
    x.extended = kNone;
  }
  flows_.release(f);
  --active_;
}

void MaxMinSolver::set_capacity(LinkIndex l, double capacity) {
  ROCESIM_CHECK(l < links_.size(), "link index out of range");
  ROCESIM_CHECK(capacity >= 0 && std::isfinite(capacity), "link capacities must be >= 0");
  links_[l].cap = capacity;
  dirty_links_.push_back(l);
  capacity_changed_ = true;
}

double MaxMinSolver::load(LinkIndex l) const {
  double sum = 0;
  for (const Entry& e : links_[l].flows) {
    const Flow& x = flows_[e.flow];
    if (x.rate > 0) sum += x.rate * weight(x, e.hop);
  }
  return sum;
}

float MaxMinSolver::rate_bound(double rate) {
  constexpr float kUnknown = std::numeric_limits<float>::infinity();
  if (rate < 0) return kUnknown;  // added since the last solve: not frozen whatever tau is
  float b = static_cast<float>(rate);
  if (static_cast<double>(b) < rate) b = std::nextafter(b, kUnknown);
  return b;
}

void MaxMinSolver::push_bound(LinkIndex l, RateBound b) {
  std::vector<RateBound>& h = rate_heap_[l];
  // Stale entries leave only when they reach the top; past twice the live flows, start afresh.
  if (h.size() >= 2 * links_[l].flows.size() + kHeapFrom) {
    rebuild_heap(l);
    return;
  }
  h.push_back(b);
  std::push_heap(h.begin(), h.end(), BoundBelow{});
}

void MaxMinSolver::rebuild_heap(LinkIndex l) {
  std::vector<RateBound>& h = rate_heap_[l];
  h.clear();
  for (const Entry& e : links_[l].flows)
    h.push_back({rate_bound(flows_[e.flow].rate), e.flow});
  std::make_heap(h.begin(), h.end(), BoundBelow{});
}

void MaxMinSolver::note_added(LinkIndex l, FlowSlot f) {
  if (!rate_heap_[l].empty()) {
    push_bound(l, {rate_bound(-1), f});
  } else if (links_[l].flows.size() >= kHeapFrom) {
    rebuild_heap(l);  // the link just became busy
  }
}

void MaxMinSolver::note_rate(FlowSlot f) {
  const Flow& x = flows_[f];
  const float b = rate_bound(x.rate);
  for (uint32_t i = 0; i < x.nhops; ++i) {
    const LinkIndex h = hop(x, i);
    if (!rate_heap_[h].empty()) push_bound(h, {b, f});
  }
}

bool MaxMinSolver::may_hold_unfrozen(LinkIndex l, double freeze_below) {
  std::vector<RateBound>& h = rate_heap_[l];
  while (!h.empty() && !current(h.front())) {
    std::pop_heap(h.begin(), h.end(), BoundBelow{});
    h.pop_back();
  }
  // An empty heap: the link is not busy, or (never, by the invariant) lost its entries.
  return h.empty() || static_cast<double>(h.front().bound) >= freeze_below;
}

void MaxMinSolver::explore(double tau) {
  const double freeze_below = tau * (1 - kFreezeMargin);
  comp_links_.clear();
  comp_flows_.clear();
  components_.clear();
  for (const LinkIndex seed : dirty_links_) {
    // A link left without flows constrains nothing (its last flows just ended).
    if (links_[seed].mark == epoch_ || links_[seed].flows.empty()) continue;
    // A busy link whose flows are all frozen would start no component either; its heap tells
    // without walking the list (the walk would find nothing, so skipping it changes nothing).
    if (!may_hold_unfrozen(seed, freeze_below)) continue;
    Component c{static_cast<uint32_t>(comp_links_.size()), 0,
                static_cast<uint32_t>(comp_flows_.size()), 0};
    links_[seed].mark = epoch_;
    comp_links_.push_back(seed);
    for (size_t head = c.link_begin; head < comp_links_.size(); ++head) {
      const LinkIndex l = comp_links_[head];
      double remaining = links_[l].cap;
      double unfixed_w = 0;
      uint32_t unfixed = 0;
      for (const Entry& e : links_[l].flows) {
        Flow& x = flows_[e.flow];
        const double w = weight(x, e.hop);
        if (x.rate >= 0 && x.rate < freeze_below) {
          remaining -= x.rate * w;  // frozen: keeps its rate
          continue;
        }
        ++unfixed;
        unfixed_w += w;
        if (x.mark == epoch_) continue;
        x.mark = epoch_;
        x.comp_pos = static_cast<uint32_t>(comp_flows_.size());
        comp_flows_.push_back(e.flow);
        for (uint32_t i = 0; i < x.nhops; ++i) {
          const LinkIndex h = hop(x, i);
          if (links_[h].mark != epoch_) {
            links_[h].mark = epoch_;
            comp_links_.push_back(h);
          }
        }
      }
      links_[l].remaining = std::max(remaining, 0.0);
      links_[l].unfixed = unfixed;
      links_[l].unfixed_w = unfixed_w;
    }
    c.link_end = static_cast<uint32_t>(comp_links_.size());
    c.flow_end = static_cast<uint32_t>(comp_flows_.size());
    if (c.flow_end > c.flow_begin) components_.push_back(c);
  }
}

void MaxMinSolver::fill(const Component& c, Scratch& scratch) {
  if (c.flow_end - c.flow_begin == 1) {
    // A flow alone in its component gets the least capacity left on its path, or its cap.
    const FlowSlot f = comp_flows_[c.flow_begin];
    const Flow& x = flows_[f];
    double r = x.cap;
    for (uint32_t i = 0; i < x.nhops; ++i)
      r = std::min(r, links_[hop(x, i)].remaining / weight(x, i));
    comp_rate_[x.comp_pos] = r;
    return;
  }
  std::vector<HeapEntry>& heap = scratch.heap;
  std::vector<std::pair<double, FlowSlot>>& capped = scratch.capped;
  heap.clear();
  for (uint32_t i = c.link_begin; i < c.link_end; ++i) {
    const LinkIndex l = comp_links_[i];
    if (links_[l].unfixed == 0) continue;
    heap.push_back({links_[l].remaining / links_[l].unfixed_w, l, ++links_[l].version});
  }
  std::make_heap(heap.begin(), heap.end(), HeapAfter{});
  capped.clear();
  for (uint32_t i = c.flow_begin; i < c.flow_end; ++i) {
    const FlowSlot f = comp_flows_[i];
    if (flows_[f].cap != kNoCap) capped.emplace_back(flows_[f].cap, f);
  }
  std::sort(capped.begin(), capped.end());
  size_t next_cap = 0;

  uint32_t left = c.flow_end - c.flow_begin;
  double level = 0;
  auto fix = [&](FlowSlot f, double r, LinkIndex skip) {
    const Flow& x = flows_[f];
    comp_rate_[x.comp_pos] = r;
    --left;
    for (uint32_t i = 0; i < x.nhops; ++i) {
      const LinkIndex h = hop(x, i);
      if (h == skip) continue;
      LinkState& ls = links_[h];
      const double w = weight(x, i);
      ls.remaining = std::max(ls.remaining - r * w, 0.0);
      if (--ls.unfixed > 0) {
        ls.unfixed_w = std::max(ls.unfixed_w - w, 0.0);
        heap.push_back({ls.unfixed_w > 0 ? ls.remaining / ls.unfixed_w : kNoCap, h, ++ls.version});
        std::push_heap(heap.begin(), heap.end(), HeapAfter{});
      } else {
        ls.unfixed_w = 0;
      }
    }
  };

  while (left > 0) {
    while (!heap.empty() && (heap.front().version != links_[heap.front().link].version ||
                             links_[heap.front().link].unfixed == 0)) {
      std::pop_heap(heap.begin(), heap.end(), HeapAfter{});
      heap.pop_back();
    }
    while (next_cap < capped.size() && comp_rate_[flows_[capped[next_cap].second].comp_pos] >= 0)
      ++next_cap;
    const double link_share = heap.empty() ? kNoCap : heap.front().share;
    if (next_cap < capped.size() && capped[next_cap].first <= link_share) {
      // The flow's own cap binds before any link: it is its own bottleneck.
      const auto [cap, f] = capped[next_cap++];
      level = std::max(level, cap);
      fix(f, cap, kNoLink);
      continue;
    }
    ROCESIM_CHECK(!heap.empty(), "max-min: unfixed flows but no link left to saturate");
    const HeapEntry top = heap.front();
    std::pop_heap(heap.begin(), heap.end(), HeapAfter{});
    heap.pop_back();
    // Shares grow monotonically in exact arithmetic; clamp rounding noise.
    level = std::max(level, top.share);
    const LinkIndex l = top.link;
    for (const Entry& e : links_[l].flows) {
      if (flows_[e.flow].mark != epoch_ || comp_rate_[flows_[e.flow].comp_pos] >= 0) continue;
      fix(e.flow, level, l);
    }
    links_[l].unfixed = 0;
  }
}

void MaxMinSolver::solve(std::vector<FlowSlot>& changed) {
  changed.clear();
  if (dirty_links_.empty()) return;
  ++stats_.solves;
  ++epoch_;

  double tau = capacity_changed_ ? 0 : removed_min_rate_;
  capacity_changed_ = false;
  if (incremental_) {
    for (const FlowSlot f : added_) {
      Flow& x = flows_[f];
      if (x.nhops == 0 || x.rate >= 0) continue;
      double bound = x.cap;
      bool alone = true;
      for (uint32_t i = 0; i < x.nhops; ++i) {
        const LinkIndex l = hop(x, i);
        const size_t n = links_[l].flows.size();
        alone &= n == 1;
        // The summed weight of the flows on the link: their number plus the excess of weighted
        // ones. Alone, that is this flow's own weight.
        const double total = n == 1 ? weight(x, i) : static_cast<double>(n) + extra_weight_[l];
        bound = std::min(bound, links_[l].cap / total);
      }
      if (alone) {
        // A new flow that shares no link is a component of its own and its bound is its rate;
        // marking its links keeps the exploration away from them.
        for (uint32_t i = 0; i < x.nhops; ++i)
          links_[hop(x, i)].mark = epoch_;
        x.rate = bound;
        note_rate(f);
        changed.push_back(f);
        ++stats_.components;
        ++stats_.flows_recomputed;
        continue;
      }
      tau = std::min(tau, bound);
    }
  } else {
    tau = 0;  // nothing frozen
    dirty_links_.clear();
    for (LinkIndex l = 0; l < links_.size(); ++l) {
      if (!links_[l].flows.empty()) dirty_links_.push_back(l);
    }
  }

  explore(tau);
  comp_rate_.assign(comp_flows_.size(), -1);
  stats_.components += components_.size();
  stats_.flows_recomputed += comp_flows_.size();

  const bool parallel = threads_ > 1 && components_.size() > 1 && comp_flows_.size() > 4096;
  if (parallel) {
#pragma omp parallel num_threads(threads_)
    {
      Scratch scratch;
#pragma omp for schedule(dynamic, 1)
      for (size_t i = 0; i < components_.size(); ++i)
        fill(components_[i], scratch);
    }
  } else {
    for (const Component& c : components_)
      fill(c, scratch_);
  }

  for (const FlowSlot f : comp_flows_) {
    Flow& x = flows_[f];
    const double r = comp_rate_[x.comp_pos];
    if (x.rate != r) {
      x.rate = r;
      note_rate(f);
      changed.push_back(f);
    }
  }
  dirty_links_.clear();
  added_.clear();
  removed_min_rate_ = kNoCap;
}

}  // namespace rocesim::network
