// Max-min fair bandwidth sharing: the numerical heart of the `maxmin` network model.
//
// The maths
// ---------
// Links l have capacities C_l (bytes/s). Flow f crosses the set of links P_f, using w_fl > 0 of
// link l per unit of its rate (w = 1 for an ordinary flow; a pipeline whose edges share a link,
// or that splits its bytes over several QPs, has other weights), and may have its own rate cap
// c_f (e.g. a credit window over a round trip; +inf when absent). A rate vector r is feasible
// when, for every link, sum_{f crosses l} w_fl r_f <= C_l and r_f <= c_f. It is max-min fair when
// no flow's rate can be raised without lowering the rate of a flow that has an equal or smaller
// rate; equivalently, every flow has a bottleneck: a saturated link on its path on which it has
// the largest rate (or its own cap).
//
// Progressive filling computes it. Raise a common "water level" lambda for all unfixed flows.
// Link l saturates when  F_l + W_l * lambda = C_l,  where F_l is the capacity already taken by
// fixed flows and W_l the summed weight of the unfixed flows crossing it, i.e. at its fair share
// s_l = (C_l - F_l) / W_l.
// Take the link with the smallest share (or the smallest cap), fix its unfixed flows at that
// level, update F and n of the other links they cross, repeat. Shares only grow as flows are
// fixed ((R - w lambda)/(W - w) >= R/W when lambda <= R/W), so a heap keyed by share gives
// O(H log L) for H flow-link incidences. Each link sits in the heap once and is re-keyed in
// place, so the heap never outgrows the component's links.
//
// Incremental updates
// -------------------
// Rates are recomputed only when flows come or go, and only where that can change anything:
//  * Components: a change propagates only through links shared by flows, so only the connected
//    components (flows joined by common links) that contain a changed link are recomputed.
//  * Levels: progressive filling is identical below the level of the lowest change. Removing
//    flow f cannot change any flow whose rate was below r_f: no link on f's path saturated
//    before level r_f (else f would have been fixed lower), and every other link sees the same
//    equations until then. Adding flow g likewise cannot change flows below g's new rate, which
//    is at least  min(c_g, min_{l in P_g} C_l / W_l)  (no link saturates below C_l / W_l, its
//    share when every flow on it is at one level).
//    So with tau = min(rates of removed flows, these bounds for added flows), flows with rates
//    below tau keep them ("frozen": their rates are subtracted from the capacities), and the
//    components are explored only through flows at or above tau. When a collective's equal
//    flows complete from the fastest down, this touches few flows however many are active.
//  * Busy links: a changed link whose flows are all frozen starts no component, yet finding
//    that out by walking its list costs as many steps as it has flows (an all-to-all's host
//    links carry one flow per peer, and nearly every completion leaves only such links behind).
//    So a link with many flows also keeps upper bounds on their rates, sorted largest first;
//    when the largest is below tau the link is passed over without reading its list. The
//    bounds are sorted when first asked for and invalidated when a flow joins the link or the
//    link is walked (a flow changes rate only in a component whose links are all walked, or
//    alone on links it just joined), and a removed flow's bound is skipped when it comes first.
//    Passing over such a link changes nothing that is computed (it joins no component and no flow
//    reaches it), so the rates are exactly those of the walk, bit for bit. A completion then costs
//    in proportion to the flows whose rates change and the links they cross.
// `set_incremental(false)` disables all three (every solve recomputes every flow from scratch); a
// test demands that both paths agree.
//
// Independent components are solved in parallel (OpenMP) when several are dirty; each writes
// only its own flows and links, and results are gathered in component order, so the output
// does not depend on the thread count.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "sim/core/slot_pool.hpp"

namespace rocesim::network {

class MaxMinSolver {
 public:
  using FlowSlot = uint32_t;
  using LinkIndex = uint32_t;
  /// Paths up to this long without weights are stored in the flow itself (the common case:
  /// between GPUs of a two-tier fabric, PXN's NVLink detour included, a path has at most 8
  /// links; PCIe switches in the servers or a third tier of switches make longer ones); longer
  /// or weighted paths are stored beside it.
  static constexpr uint32_t kInlineHops = 8;
  static constexpr double kNoCap = std::numeric_limits<double>::infinity();

  /// Capacities in bytes per second, all positive.
  explicit MaxMinSolver(std::vector<double> link_capacity);

  /// Adds a flow over `links` (no link twice) with an optional rate cap. `weights` (empty: all 1)
  /// gives the capacity each link spends per unit of the flow's rate. The rate is undefined until
  /// the next solve().
  FlowSlot add(std::span<const LinkIndex> links, double cap = kNoCap,
               std::span<const double> weights = {});
  /// Removes a flow; its slot may be reused by a later add().
  void remove(FlowSlot f);
  /// A link's capacity from the next solve on (0: the flows on it get rate 0). Every flow of
  /// its component is recomputed (a capacity that falls can lower any rate).
  void set_capacity(LinkIndex l, double capacity);
  /// Recomputes the rates that the adds and removes since the last call can have changed, and
  /// replaces `changed` with the flows whose rate differs from before (new flows included), in
  /// a deterministic order.
  void solve(std::vector<FlowSlot>& changed);

  double rate(FlowSlot f) const { return flows_[f].rate; }
  std::span<const LinkIndex> links(FlowSlot f) const {
    const Flow& x = flows_[f];
    return simple(x) ? std::span<const LinkIndex>(x.hops, x.nhops)
                     : std::span<const LinkIndex>(extended_[x.extended].hops);
  }
  /// The weight of hop i of a flow.
  double weight(FlowSlot f, uint32_t i) const { return weight(flows_[f], i); }
  size_t active_flows() const { return active_; }
  size_t link_count() const { return links_.size(); }
  double capacity(LinkIndex l) const { return fill_[l].cap; }
  /// Capacity the flows on a link currently use, sum of w * rate (checks, utilisation).
  double load(LinkIndex l) const;

  void set_incremental(bool on) { incremental_ = on; }
  void set_threads(int n) { threads_ = n < 1 ? 1 : n; }

  struct HeapEntry {
    double share;
    LinkIndex link;
  };

  struct Stats {
    uint64_t solves = 0;
    uint64_t components = 0;
    uint64_t flows_recomputed = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  static constexpr uint32_t kNone = static_cast<uint32_t>(-1);
  // Layouts keep what one step touches together: a flow's cache line holds what the solve reads
  // of it (its path, cap, rate and solve state); the positions in its links' lists, which only
  // adding and removing it read, are beside it (pos_). A link's list, capacity and solve state
  // share one line.
  struct alignas(64) Flow {
    LinkIndex hops[kInlineHops];  // the path, when `extended` is kNone
    double cap = kNoCap;
    double rate = -1;           // < 0: added since the last solve
    uint32_t nhops = 0;         // 0: not live
    uint32_t extended = kNone;  // index in extended_ for long or weighted paths
    uint32_t mark = 0;          // == epoch_: in a component of this solve
    uint32_t comp_pos = 0;      // position in comp_flows_ during a solve
  };
  static_assert(sizeof(Flow) == 64, "a flow is one cache line");
  /// Of a flow whose path is in it: the index of the flow in each hop's list.
  using InlinePos = std::array<uint32_t, kInlineHops>;
  struct Extended {  // a path that does not fit a Flow
    std::vector<LinkIndex> hops;
    std::vector<uint32_t> pos;
    std::vector<double> weight;
  };
  bool simple(const Flow& x) const { return x.extended == kNone; }
  LinkIndex hop(const Flow& x, uint32_t i) const {
    return simple(x) ? x.hops[i] : extended_[x.extended].hops[i];
  }
  double weight(const Flow& x, uint32_t i) const {
    return simple(x) ? 1.0 : extended_[x.extended].weight[i];
  }
  /// A flow on a link's list, and which of its hops the link is. Whether the flow's positions
  /// are in its Extended record rides in the hop's top bit, so that moving an entry within a
  /// busy link's list (removal swaps the last one into the hole) updates the moved flow's
  /// position without first reading that flow's cache line.
  struct Entry {
    static constexpr uint32_t kExtendedBit = 1u << 31;
    FlowSlot flow;
    uint32_t bits;
    uint32_t hop() const { return bits & ~kExtendedBit; }
    bool extended() const { return (bits & kExtendedBit) != 0; }
  };
  uint32_t& pos(const Entry& e) {
    return e.extended() ? extended_[flows_[e.flow].extended].pos[e.hop()] : pos_[e.flow][e.hop()];
  }
  /// The flows on a link: a vector that keeps up to two entries inline, because most links
  /// carry one or two flows and an extra allocation would cost a cache miss on every visit.
  class FlowList {
   public:
    FlowList() : heap_(nullptr) {}
    FlowList(FlowList&& o) noexcept : size_(o.size_), cap_(o.cap_) {
      if (o.cap_ > kInline) {
        heap_ = o.heap_;
      } else {
        for (uint32_t i = 0; i < size_; ++i)
          inline_[i] = o.inline_[i];
      }
      o.size_ = 0;
      o.cap_ = kInline;
    }
    FlowList(const FlowList&) = delete;
    FlowList& operator=(const FlowList&) = delete;
    FlowList& operator=(FlowList&&) = delete;
    ~FlowList() {
      if (cap_ > kInline) delete[] heap_;
    }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    Entry* begin() { return data(); }
    Entry* end() { return data() + size_; }
    const Entry* begin() const { return data(); }
    const Entry* end() const { return data() + size_; }
    Entry& operator[](size_t i) { return data()[i]; }
    Entry& back() { return data()[size_ - 1]; }
    void pop_back() { --size_; }
    void push_back(Entry e) {
      if (size_ == cap_) grow();
      data()[size_++] = e;
    }

   private:
    static constexpr uint32_t kInline = 2;
    Entry* data() { return cap_ > kInline ? heap_ : inline_; }
    const Entry* data() const { return cap_ > kInline ? heap_ : inline_; }
    void grow() {
      auto* bigger = new Entry[2 * cap_];
      for (uint32_t i = 0; i < size_; ++i)
        bigger[i] = data()[i];
      if (cap_ > kInline) delete[] heap_;
      heap_ = bigger;
      cap_ *= 2;
    }
    union {
      Entry inline_[kInline];
      Entry* heap_;
    };
    uint32_t size_ = 0;
    uint32_t cap_ = kInline;
  };

  // A link's list and marks (what adding and removing flows touch, half a cache line) apart from
  // its capacity and the fill's state (what a solve reads and writes besides).
  struct alignas(32) LinkState {
    FlowList flows;             // live flows only (removal swaps with the last)
    uint32_t mark = 0;          // == epoch_: visited by this solve
    bool bounds_valid = false;  // bounds_ of the link hold since the last change on it
    bool dirty = false;         // in dirty_links_
  };
  static_assert(sizeof(LinkState) == 32, "two links a cache line");
  struct alignas(32) LinkFill {
    double cap = 0;
    double remaining = 0;  // capacity left for the unfixed flows of a component
    double unfixed_w = 0;  // their summed weight
    uint32_t unfixed = 0;  // how many there are
  };
  static_assert(sizeof(LinkFill) == 32, "two links a cache line");
  struct Component {
    uint32_t link_begin, link_end, flow_begin, flow_end;
  };

  /// A bound on the rate of a flow on a busy link: the rate rounded up to a float (+inf for a
  /// flow without a rate yet). The entry is current while it matches the flow's bound_of_; a
  /// stale entry that happens to match (a reused slot) only overestimates.
  struct RateBound {
    float bound;
    FlowSlot flow;
  };
  /// The bounds of a link's flows, largest first from `head` (those before it are stale).
  /// While LinkState::bounds_valid, every flow on the link has a current entry; a change (a
  /// flow joins, or a flow on it takes a new rate) only resets the flag, in the cache line
  /// that the change touches anyway, and the next question rebuilds them.
  struct Bounds {
    std::vector<RateBound> sorted;
    uint32_t head = 0;
  };
  /// Links with at least this many flows are asked their bounds; shorter lists are walked.
  static constexpr uint32_t kBoundsFrom = 16;
  static float rate_bound(double rate) {
    if (rate < 0) return std::numeric_limits<float>::infinity();  // no rate yet: never frozen
    const float b = static_cast<float>(rate);
    // Rounded down: the next float up, which for a positive float is the next bit pattern.
    if (static_cast<double>(b) < rate) return std::bit_cast<float>(std::bit_cast<uint32_t>(b) + 1);
    return b;
  }
  bool current(const RateBound& b) const { return bound_of_[b.flow] == b.bound; }
  /// Gives a flow a new rate. Its links' bounds need no reset: a flow takes a new rate either
  /// alone on links it just joined (add reset them) or in a component, all of whose links
  /// explore() walked (and reset).
  void set_rate(FlowSlot f, double r) {
    flows_[f].rate = r;
    bound_of_[f] = rate_bound(r);
  }
  /// False when every flow on the link has a rate below `freeze_below`, known from its bounds
  /// without walking its list; true otherwise (and always for short lists).
  bool may_hold_unfrozen(LinkIndex l, double freeze_below);

  void explore(double tau);
  struct Scratch {  // per thread
    std::vector<HeapEntry> heap;
    std::vector<std::pair<double, FlowSlot>> capped;
  };
  void fill(const Component& c, Scratch& scratch);
  // The fill's min-heap of links keyed by (share, link), whose keys may lag behind the shares
  // (see fill).
  static void sift_down(std::vector<HeapEntry>& heap, uint32_t i);

  std::vector<LinkState> links_;
  std::vector<LinkFill> fill_;        // per link
  std::vector<double> extra_weight_;  // per link: sum of (w - 1) over the weighted flows on it
  std::vector<Bounds> bounds_;        // per link
  // Per flow slot: rate_bound of its rate while live, -1 (matching no entry) when free. Beside
  // the flows rather than in them, so checking a heap entry reads 4 bytes, not a cache line.
  std::vector<float> bound_of_;
  SlotPool<Flow> flows_;
  std::vector<InlinePos> pos_;  // per flow slot
  SlotPool<Extended> extended_;
  size_t active_ = 0;

  // Changes since the last solve.
  std::vector<LinkIndex> dirty_links_;  // each once, in the order of their first change
  void mark_dirty(LinkIndex l) {
    if (links_[l].dirty) return;
    links_[l].dirty = true;
    dirty_links_.push_back(l);
  }
  void clear_dirty() {
    for (const LinkIndex l : dirty_links_)
      links_[l].dirty = false;
    dirty_links_.clear();
  }
  std::vector<FlowSlot> added_;
  double removed_min_rate_ = kNoCap;
  bool capacity_changed_ = false;

  // Solve state; marks compare against `epoch_` to avoid clearing.
  uint32_t epoch_ = 0;
  std::vector<LinkIndex> comp_links_;
  std::vector<FlowSlot> comp_flows_;
  std::vector<Component> components_;
  std::vector<double> comp_rate_;  // per position in comp_flows_: the new rate, < 0 until fixed
  Scratch scratch_;

  bool incremental_ = true;
  int threads_ = 1;
  Stats stats_;
};

}  // namespace rocesim::network
