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
// Link lists are compacted when stale entries outnumber live ones by this much.
constexpr uint32_t kCompactSlack = 32;
constexpr MaxMinSolver::LinkIndex kNoLink = static_cast<MaxMinSolver::LinkIndex>(-1);

struct HeapEntry {
  double share;
  MaxMinSolver::LinkIndex link;
  uint32_t version;
};
// Min-heap on share; ties by link index so the order of fixing is deterministic.
struct HeapAfter {
  bool operator()(const HeapEntry& a, const HeapEntry& b) const {
    return a.share > b.share || (a.share == b.share && a.link > b.link);
  }
};

}  // namespace

MaxMinSolver::MaxMinSolver(std::vector<double> link_capacity)
    : cap_(std::move(link_capacity)),
      on_link_(cap_.size()),
      live_count_(cap_.size(), 0),
      dead_count_(cap_.size(), 0),
      link_mark_(cap_.size(), 0),
      remaining_(cap_.size(), 0),
      unfixed_(cap_.size(), 0),
      version_(cap_.size(), 0) {
  for (double c : cap_)
    ROCESIM_CHECK(c > 0 && std::isfinite(c), "link capacities must be > 0");
}

MaxMinSolver::FlowSlot MaxMinSolver::add(std::span<const LinkIndex> links, double cap) {
  ROCESIM_CHECK(!links.empty() && links.size() <= kMaxHops, "a flow crosses 1 to 16 links");
  ROCESIM_CHECK(cap > 0, "a flow's rate cap must be positive");
  FlowSlot f;
  if (!free_.empty()) {
    f = free_.back();
    free_.pop_back();
  } else {
    f = static_cast<FlowSlot>(flows_.size());
    flows_.emplace_back();
    flow_mark_.push_back(0);
    fixed_mark_.push_back(0);
    new_rate_.push_back(0);
  }
  Flow& x = flows_[f];
  ++x.generation;
  x.live = true;
  x.cap = cap;
  x.rate = -1;
  x.nhops = static_cast<uint8_t>(links.size());
  for (size_t i = 0; i < links.size(); ++i) {
    const LinkIndex l = links[i];
    ROCESIM_CHECK(l < cap_.size(), "link index out of range");
    x.hops[i] = l;
    on_link_[l].push_back({f, x.generation});
    ++live_count_[l];
    dirty_links_.push_back(l);
  }
  added_.push_back(f);
  ++active_;
  return f;
}

void MaxMinSolver::remove(FlowSlot f) {
  Flow& x = flows_.at(f);
  ROCESIM_CHECK(x.live, "removing a flow that is not active");
  x.live = false;
  if (x.rate >= 0) removed_min_rate_ = std::min(removed_min_rate_, x.rate);
  for (uint8_t i = 0; i < x.nhops; ++i) {
    const LinkIndex l = x.hops[i];
    --live_count_[l];
    ++dead_count_[l];
    dirty_links_.push_back(l);
  }
  free_.push_back(f);
  --active_;
}

void MaxMinSolver::compact(LinkIndex l) {
  std::vector<Entry>& v = on_link_[l];
  std::erase_if(v, [&](const Entry& e) { return !entry_live(e); });
  dead_count_[l] = 0;
}

double MaxMinSolver::load(LinkIndex l) const {
  double sum = 0;
  for (const Entry& e : on_link_[l]) {
    if (entry_live(e) && flows_[e.flow].rate > 0) sum += flows_[e.flow].rate;
  }
  return sum;
}

void MaxMinSolver::explore(double tau) {
  const double freeze_below = tau * (1 - kFreezeMargin);
  comp_links_.clear();
  comp_flows_.clear();
  components_.clear();
  for (const LinkIndex seed : dirty_links_) {
    if (link_mark_[seed] == epoch_) continue;
    Component c{static_cast<uint32_t>(comp_links_.size()), 0,
                static_cast<uint32_t>(comp_flows_.size()), 0};
    link_mark_[seed] = epoch_;
    comp_links_.push_back(seed);
    for (size_t head = c.link_begin; head < comp_links_.size(); ++head) {
      const LinkIndex l = comp_links_[head];
      if (dead_count_[l] > live_count_[l] + kCompactSlack) compact(l);
      double remaining = cap_[l];
      uint32_t unfixed = 0;
      for (const Entry& e : on_link_[l]) {
        if (!entry_live(e)) continue;
        const Flow& x = flows_[e.flow];
        if (x.rate >= 0 && x.rate < freeze_below) {
          remaining -= x.rate;  // frozen: keeps its rate
          continue;
        }
        ++unfixed;
        if (flow_mark_[e.flow] == epoch_) continue;
        flow_mark_[e.flow] = epoch_;
        comp_flows_.push_back(e.flow);
        for (uint8_t i = 0; i < x.nhops; ++i) {
          const LinkIndex h = x.hops[i];
          if (link_mark_[h] != epoch_) {
            link_mark_[h] = epoch_;
            comp_links_.push_back(h);
          }
        }
      }
      remaining_[l] = std::max(remaining, 0.0);
      unfixed_[l] = unfixed;
    }
    c.link_end = static_cast<uint32_t>(comp_links_.size());
    c.flow_end = static_cast<uint32_t>(comp_flows_.size());
    if (c.flow_end > c.flow_begin) components_.push_back(c);
  }
}

void MaxMinSolver::fill(const Component& c, std::vector<std::pair<double, LinkIndex>>& capped) {
  std::vector<HeapEntry> heap;
  heap.reserve(c.link_end - c.link_begin);
  for (uint32_t i = c.link_begin; i < c.link_end; ++i) {
    const LinkIndex l = comp_links_[i];
    if (unfixed_[l] == 0) continue;
    heap.push_back({remaining_[l] / unfixed_[l], l, ++version_[l]});
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
    fixed_mark_[f] = epoch_;
    new_rate_[f] = r;
    --left;
    const Flow& x = flows_[f];
    for (uint8_t i = 0; i < x.nhops; ++i) {
      const LinkIndex h = x.hops[i];
      if (h == skip) continue;
      remaining_[h] = std::max(remaining_[h] - r, 0.0);
      if (--unfixed_[h] > 0) {
        heap.push_back({remaining_[h] / unfixed_[h], h, ++version_[h]});
        std::push_heap(heap.begin(), heap.end(), HeapAfter{});
      }
    }
  };

  while (left > 0) {
    while (!heap.empty() && (heap.front().version != version_[heap.front().link] ||
                             unfixed_[heap.front().link] == 0)) {
      std::pop_heap(heap.begin(), heap.end(), HeapAfter{});
      heap.pop_back();
    }
    while (next_cap < capped.size() && fixed_mark_[capped[next_cap].second] == epoch_)
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
    for (const Entry& e : on_link_[l]) {
      if (!entry_live(e) || flow_mark_[e.flow] != epoch_ || fixed_mark_[e.flow] == epoch_) continue;
      fix(e.flow, level, l);
    }
    unfixed_[l] = 0;
  }
}

void MaxMinSolver::solve(std::vector<FlowSlot>& changed) {
  changed.clear();
  if (dirty_links_.empty()) return;
  ++stats_.solves;
  ++epoch_;

  double tau = removed_min_rate_;
  if (incremental_) {
    for (const FlowSlot f : added_) {
      const Flow& x = flows_[f];
      if (!x.live || x.rate >= 0) continue;
      double bound = x.cap;
      for (uint8_t i = 0; i < x.nhops; ++i) {
        bound = std::min(bound, cap_[x.hops[i]] / live_count_[x.hops[i]]);
      }
      tau = std::min(tau, bound);
    }
  } else {
    tau = 0;  // nothing frozen
    dirty_links_.clear();
    for (LinkIndex l = 0; l < cap_.size(); ++l) {
      if (live_count_[l] > 0) dirty_links_.push_back(l);
    }
  }

  explore(tau);
  stats_.components += components_.size();
  stats_.flows_recomputed += comp_flows_.size();

  const bool parallel = threads_ > 1 && components_.size() > 1 && comp_flows_.size() > 4096;
  if (parallel) {
#pragma omp parallel num_threads(threads_)
    {
      std::vector<std::pair<double, LinkIndex>> capped;
#pragma omp for schedule(dynamic, 1)
      for (size_t i = 0; i < components_.size(); ++i)
        fill(components_[i], capped);
    }
  } else {
    std::vector<std::pair<double, LinkIndex>> capped;
    for (const Component& c : components_)
      fill(c, capped);
  }

  for (const FlowSlot f : comp_flows_) {
    Flow& x = flows_[f];
    if (x.rate != new_rate_[f]) {
      x.rate = new_rate_[f];
      changed.push_back(f);
    }
  }
  dirty_links_.clear();
  added_.clear();
  removed_min_rate_ = kNoCap;
}

}  // namespace rocesim::network
