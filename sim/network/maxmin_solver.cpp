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

// The fill's min-heap order: by share, ties by link index so the order of fixing is
// deterministic. A link is in the heap at most once, so no two entries tie.
using HeapEntry = MaxMinSolver::HeapEntry;
bool before(const HeapEntry& a, const HeapEntry& b) {
  return a.share < b.share || (a.share == b.share && a.link < b.link);
}
constexpr float kFreeSlot = -1;  // bound_of_ of a slot without a live flow

}  // namespace

MaxMinSolver::MaxMinSolver(std::vector<double> link_capacity)
    : links_(link_capacity.size()),
      fill_(link_capacity.size()),
      extra_weight_(link_capacity.size(), 0.0),
      bounds_(link_capacity.size()) {
  for (size_t l = 0; l < links_.size(); ++l) {
    const double c = link_capacity[l];
    ROCESIM_CHECK(c > 0 && std::isfinite(c), "link capacities must be > 0");
    fill_[l].cap = c;
  }
}

MaxMinSolver::FlowSlot MaxMinSolver::add(std::span<const LinkIndex> links, double cap,
                                         std::span<const double> weights) {
  ROCESIM_CHECK(!links.empty(), "a flow crosses at least one link");
  ROCESIM_CHECK(links.size() < Entry::kExtendedBit, "a flow crosses fewer than 2^31 links");
  ROCESIM_CHECK(weights.empty() || weights.size() == links.size(), "one weight per link");
  ROCESIM_CHECK(cap > 0, "a flow's rate cap must be positive");
  const bool weighted =
      std::any_of(weights.begin(), weights.end(), [](double w) { return w != 1; });
  const FlowSlot f = flows_.acquire();
  if (f >= bound_of_.size()) bound_of_.resize(f + 1, kFreeSlot);
  if (f >= pos_.size()) pos_.resize(f + 1);
  bound_of_[f] = rate_bound(-1);
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
      links_[l].flows.push_back({f, i | Entry::kExtendedBit});
      links_[l].bounds_valid = false;
    }
  } else {
    for (uint32_t i = 0; i < x.nhops; ++i) {
      const LinkIndex l = links[i];
      ROCESIM_CHECK(l < links_.size(), "link index out of range");
      x.hops[i] = l;
      pos_[f][i] = static_cast<uint32_t>(links_[l].flows.size());
      links_[l].flows.push_back({f, i});
      links_[l].bounds_valid = false;
    }
  }
  // One link is seed enough: the exploration walks the new flow (it has no rate yet, so it is
  // never frozen) and from it every link it crosses, with whatever shares them.
  mark_dirty(links[0]);
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
      const uint32_t at = pos_[f][i];
      v[at] = last;
      pos(last) = at;
      v.pop_back();
      mark_dirty(l);
    }
  } else {
    Extended& e = extended_[x.extended];
    for (uint32_t i = 0; i < x.nhops; ++i) {
      const LinkIndex l = e.hops[i];
      FlowList& v = links_[l].flows;
      extra_weight_[l] = v.size() == 1 ? 0 : extra_weight_[l] - (e.weight[i] - 1);
      const Entry last = v.back();
      v[e.pos[i]] = last;
      pos(last) = e.pos[i];
      v.pop_back();
      mark_dirty(l);
    }
  }
  x.nhops = 0;
  bound_of_[f] = kFreeSlot;
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
  fill_[l].cap = capacity;
  mark_dirty(l);
  capacity_changed_ = true;
}

double MaxMinSolver::load(LinkIndex l) const {
  double sum = 0;
  for (const Entry& e : links_[l].flows) {
    const Flow& x = flows_[e.flow];
    if (x.rate > 0) sum += x.rate * weight(x, e.hop());
  }
  return sum;
}

bool MaxMinSolver::may_hold_unfrozen(LinkIndex l, double freeze_below) {
  LinkState& ls = links_[l];
  if (ls.flows.size() < kBoundsFrom) return true;  // a short list is walked
  Bounds& b = bounds_[l];
  if (ls.bounds_valid) {
    while (b.head < b.sorted.size() && !current(b.sorted[b.head]))
      ++b.head;  // a flow that has left
  }
  if (!ls.bounds_valid || b.head == b.sorted.size()) {
    // Invalidated by a change since they were built (or never built): every flow's bound,
    // afresh, largest first. This costs about what one walk of the list costs, and serves
    // every later question until the next change on the link.
    ls.bounds_valid = true;
    b.sorted.clear();
    b.head = 0;
    for (const Entry& e : ls.flows)
      b.sorted.push_back({bound_of_[e.flow], e.flow});
    std::sort(b.sorted.begin(), b.sorted.end(),
              [](const RateBound& x, const RateBound& y) { return x.bound > y.bound; });
  }
  return static_cast<double>(b.sorted[b.head].bound) >= freeze_below;
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
      double remaining = fill_[l].cap;
      double unfixed_w = 0;
      uint32_t unfixed = 0;
      for (const Entry& e : links_[l].flows) {
        Flow& x = flows_[e.flow];
        const double w = weight(x, e.hop());
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
      links_[l].bounds_valid = false;  // its flows may take new rates in this solve
      LinkFill& lf = fill_[l];
      lf.remaining = std::max(remaining, 0.0);
      lf.unfixed = unfixed;
      lf.unfixed_w = unfixed_w;
    }
    c.link_end = static_cast<uint32_t>(comp_links_.size());
    c.flow_end = static_cast<uint32_t>(comp_flows_.size());
    if (c.flow_end > c.flow_begin) components_.push_back(c);
  }
}

void MaxMinSolver::sift_down(std::vector<HeapEntry>& heap, uint32_t i) {
  const HeapEntry e = heap[i];
  const auto n = static_cast<uint32_t>(heap.size());
  for (;;) {
    uint32_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && before(heap[child + 1], heap[child])) ++child;
    if (!before(heap[child], e)) break;
    heap[i] = heap[child];
    i = child;
  }
  heap[i] = e;
}

void MaxMinSolver::fill(const Component& c, Scratch& scratch) {
  if (c.flow_end - c.flow_begin == 1) {
    // A flow alone in its component gets the least capacity left on its path, or its cap.
    const FlowSlot f = comp_flows_[c.flow_begin];
    const Flow& x = flows_[f];
    double r = x.cap;
    for (uint32_t i = 0; i < x.nhops; ++i)
      r = std::min(r, fill_[hop(x, i)].remaining / weight(x, i));
    comp_rate_[x.comp_pos] = r;
    return;
  }
  // The links that have unfixed flows, in a min-heap on (share, link), each once. Fixing a flow
  // raises the share of every other link it crosses (in exact arithmetic), and the heap is not
  // told: a key may lag behind its link's share, never run ahead of it. So when the top's key is
  // its link's share it is the least share of all, and when it is not, the top is re-keyed and
  // sunk and the next one looked at. Fixing a flow therefore costs a constant per link it
  // crosses instead of a re-keying (a pipeline of 100,000 links that shares them with one other
  // flow used to re-key them all twice; now the first link taken fixes both), and the link taken
  // at each step is the same: the smallest (share, link).
  std::vector<HeapEntry>& heap = scratch.heap;
  std::vector<std::pair<double, FlowSlot>>& capped = scratch.capped;
  heap.clear();
  for (uint32_t i = c.link_begin; i < c.link_end; ++i) {
    const LinkIndex l = comp_links_[i];
    if (fill_[l].unfixed == 0) continue;
    heap.push_back({fill_[l].remaining / fill_[l].unfixed_w, l});
  }
  for (auto i = static_cast<uint32_t>(heap.size() / 2); i-- > 0;)
    sift_down(heap, i);
  capped.clear();
  for (uint32_t i = c.flow_begin; i < c.flow_end; ++i) {
    const FlowSlot f = comp_flows_[i];
    if (flows_[f].cap != kNoCap) capped.emplace_back(flows_[f].cap, f);
  }
  // The caps in a min-heap on (cap, flow), popped only as the fill's level reaches them: most
  // caps of a large component sit above every link's share and are never looked at, so making
  // the heap (linear) replaces a sort of them all. The order of those taken is the sort's.
  const auto cap_after = std::greater<>{};
  std::make_heap(capped.begin(), capped.end(), cap_after);

  uint32_t left = c.flow_end - c.flow_begin;
  double level = 0;
  auto fix = [&](FlowSlot f, double r, LinkIndex skip) {
    const Flow& x = flows_[f];
    comp_rate_[x.comp_pos] = r;
    --left;
    for (uint32_t i = 0; i < x.nhops; ++i) {
      const LinkIndex h = hop(x, i);
      if (h == skip) continue;
      LinkFill& ls = fill_[h];
      const double w = weight(x, i);
      ls.remaining = std::max(ls.remaining - r * w, 0.0);
      ls.unfixed_w = --ls.unfixed > 0 ? std::max(ls.unfixed_w - w, 0.0) : 0.0;
    }
  };
  auto pop = [&] {
    heap.front() = heap.back();
    heap.pop_back();
    if (!heap.empty()) sift_down(heap, 0);
  };
  // Brings the top's key up to its link's share (see above); links left without unfixed flows
  // leave the heap.
  auto settle = [&] {
    while (!heap.empty()) {
      HeapEntry& top = heap.front();
      const LinkFill& ls = fill_[top.link];
      if (ls.unfixed == 0) {
        pop();
        continue;
      }
      const double share = ls.unfixed_w > 0 ? ls.remaining / ls.unfixed_w : kNoCap;
      if (share > top.share) {
        top.share = share;
        sift_down(heap, 0);
        continue;
      }
      // Rounding may leave a share a hair below its key: the top takes it, as it would have
      // been re-keyed to it.
      top.share = share;
      return;
    }
  };

  while (left > 0) {
    settle();
    const double link_share = heap.empty() ? kNoCap : heap.front().share;
    // Caps of flows that a link has fixed already leave the heap when they come to its top.
    while (!capped.empty() && capped.front().first <= link_share &&
           comp_rate_[flows_[capped.front().second].comp_pos] >= 0) {
      std::pop_heap(capped.begin(), capped.end(), cap_after);
      capped.pop_back();
    }
    if (!capped.empty() && capped.front().first <= link_share) {
      // The flow's own cap binds before any link: it is its own bottleneck.
      const auto [cap, f] = capped.front();
      std::pop_heap(capped.begin(), capped.end(), cap_after);
      capped.pop_back();
      level = std::max(level, cap);
      fix(f, cap, kNoLink);
      continue;
    }
    ROCESIM_CHECK(!heap.empty(), "max-min: unfixed flows but no link left to saturate");
    const HeapEntry top = heap.front();
    pop();
    // Shares grow monotonically in exact arithmetic; clamp rounding noise.
    level = std::max(level, top.share);
    const LinkIndex l = top.link;
    for (const Entry& e : links_[l].flows) {
      if (flows_[e.flow].mark != epoch_ || comp_rate_[flows_[e.flow].comp_pos] >= 0) continue;
      fix(e.flow, level, l);
    }
    fill_[l].unfixed = 0;
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
        bound = std::min(bound, fill_[l].cap / total);
      }
      if (alone) {
        // A new flow that shares no link is a component of its own and its bound is its rate;
        // marking its links keeps the exploration away from them.
        for (uint32_t i = 0; i < x.nhops; ++i)
          links_[hop(x, i)].mark = epoch_;
        set_rate(f, bound);
        changed.push_back(f);
        ++stats_.components;
        ++stats_.flows_recomputed;
        continue;
      }
      tau = std::min(tau, bound);
    }
  } else {
    tau = 0;  // nothing frozen
    clear_dirty();
    for (LinkIndex l = 0; l < links_.size(); ++l) {
      if (!links_[l].flows.empty()) mark_dirty(l);
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
      set_rate(f, r);
      changed.push_back(f);
    }
  }
  clear_dirty();
  added_.clear();
  removed_min_rate_ = kNoCap;
}

}  // namespace rocesim::network
