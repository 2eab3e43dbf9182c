// Max-min solver: closed forms, the optimality conditions on random instances, and the
// incremental path against the from-scratch path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "sim/core/rng.hpp"
#include "sim/network/maxmin_solver.hpp"

namespace rocesim::network {
namespace {

using Slot = MaxMinSolver::FlowSlot;
constexpr double kGbps = 1e9 / 8;  // bytes per second in one Gb/s

std::vector<Slot> solve(MaxMinSolver& s) {
  std::vector<Slot> changed;
  s.solve(changed);
  return changed;
}

TEST(MaxMinSolver, ThreeFlowsShareOneLinkEqually) {
  // One 100 Gb/s link, three flows: each gets 100/3 Gb/s.
  MaxMinSolver s({100 * kGbps});
  const MaxMinSolver::LinkIndex l[] = {0};
  const Slot a = s.add(l), b = s.add(l), c = s.add(l);
  EXPECT_EQ(solve(s).size(), 3u);
  for (Slot f : {a, b, c})
    EXPECT_NEAR(s.rate(f), 100 * kGbps / 3, 1e-6);
}

TEST(MaxMinSolver, ParkingLot) {
  // Links A (10 Gb/s) and B (4 Gb/s) in series. Flow "long" crosses both, "a" only A, "b" only
  // B. B saturates first at its fair share 4/2 = 2 Gb/s, fixing long and b at 2; A then gives
  // its remaining 10 - 2 = 8 Gb/s to a.
  MaxMinSolver s({10 * kGbps, 4 * kGbps});
  const MaxMinSolver::LinkIndex both[] = {0, 1}, only_a[] = {0}, only_b[] = {1};
  const Slot lng = s.add(both), a = s.add(only_a), b = s.add(only_b);
  solve(s);
  EXPECT_NEAR(s.rate(lng), 2 * kGbps, 1e-3);
  EXPECT_NEAR(s.rate(b), 2 * kGbps, 1e-3);
  EXPECT_NEAR(s.rate(a), 8 * kGbps, 1e-3);
}

TEST(MaxMinSolver, ClassicParkingLotOfThreeHops) {
  // n = 3 equal links of capacity C in a chain; one flow over all of them and one local flow per
  // link: every link carries 2 flows, so every flow gets C/2.
  const double c = 400 * kGbps;
  MaxMinSolver s({c, c, c});
  const MaxMinSolver::LinkIndex all[] = {0, 1, 2};
  const Slot lng = s.add(all);
  std::vector<Slot> local;
  for (MaxMinSolver::LinkIndex l = 0; l < 3; ++l) {
    const MaxMinSolver::LinkIndex one[] = {l};
    local.push_back(s.add(one));
  }
  solve(s);
  EXPECT_NEAR(s.rate(lng), c / 2, 1e-3);
  for (Slot f : local)
    EXPECT_NEAR(s.rate(f), c / 2, 1e-3);
}

TEST(MaxMinSolver, RateCapBindsBeforeTheLink) {
  // 100 Gb/s link, one flow capped at 10 Gb/s and two uncapped: the capped flow is its own
  // bottleneck at 10, the others share the remaining 90: 45 each.
  MaxMinSolver s({100 * kGbps});
  const MaxMinSolver::LinkIndex l[] = {0};
  const Slot capped = s.add(l, 10 * kGbps), x = s.add(l), y = s.add(l);
  solve(s);
  EXPECT_NEAR(s.rate(capped), 10 * kGbps, 1e-3);
  EXPECT_NEAR(s.rate(x), 45 * kGbps, 1e-3);
  EXPECT_NEAR(s.rate(y), 45 * kGbps, 1e-3);
}

TEST(MaxMinSolver, RemovalGivesCapacityBack) {
  // Two flows on 100 Gb/s get 50 each; remove one and the other gets 100; only it changes.
  MaxMinSolver s({100 * kGbps});
  const MaxMinSolver::LinkIndex l[] = {0};
  const Slot a = s.add(l), b = s.add(l);
  solve(s);
  EXPECT_NEAR(s.rate(a), 50 * kGbps, 1e-3);
  s.remove(b);
  const std::vector<Slot> changed = solve(s);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0], a);
  EXPECT_NEAR(s.rate(a), 100 * kGbps, 1e-3);
}

TEST(MaxMinSolver, UntouchedComponentsAreNotRecomputed) {
  // Flows on disjoint links form separate components: adding a flow to link 1 must not recompute
  // the flow on link 0.
  MaxMinSolver s({100 * kGbps, 100 * kGbps});
  const MaxMinSolver::LinkIndex l0[] = {0}, l1[] = {1};
  s.add(l0);
  solve(s);
  const uint64_t before = s.stats().flows_recomputed;
  s.add(l1);
  EXPECT_EQ(solve(s).size(), 1u);
  EXPECT_EQ(s.stats().flows_recomputed - before, 1u);
}

TEST(MaxMinSolver, WeightedFlowsPayForWhatTheyUse) {
  // One 100 Gb/s link; flow A uses it twice per unit of rate (weight 2, e.g. two edges of one
  // ring channel on the link), B once. Max-min on rates: both at level x with 2x + x = 100, so
  // x = 33.3 Gb/s each; A takes 66.7 Gb/s of the link.
  MaxMinSolver s({100 * kGbps});
  const MaxMinSolver::LinkIndex l[] = {0};
  const double two[] = {2.0};
  const Slot a = s.add(l, MaxMinSolver::kNoCap, two), b = s.add(l);
  solve(s);
  EXPECT_NEAR(s.rate(a), 100 * kGbps / 3, 1e-3);
  EXPECT_NEAR(s.rate(b), 100 * kGbps / 3, 1e-3);
  EXPECT_NEAR(s.load(0), 100 * kGbps, 1e-3);
}

TEST(MaxMinSolver, FractionalWeightsSplitAFlowOverParallelPaths) {
  // A flow split evenly over two parallel 100 Gb/s links (weight 1/2 on each, as a connection
  // with two QPs hashed onto different uplinks) and a plain flow on the first link. At level x
  // the first link carries x/2 + x = 100: x = 66.7 Gb/s for both; the second link then has
  // 100 - 33.3 left over, which nobody can use (the split is fixed).
  MaxMinSolver s({100 * kGbps, 100 * kGbps});
  const MaxMinSolver::LinkIndex both[] = {0, 1}, first[] = {0};
  const double halves[] = {0.5, 0.5};
  const Slot split = s.add(both, MaxMinSolver::kNoCap, halves), plain = s.add(first);
  solve(s);
  EXPECT_NEAR(s.rate(split), 200 * kGbps / 3, 1e-3);
  EXPECT_NEAR(s.rate(plain), 200 * kGbps / 3, 1e-3);
}

TEST(MaxMinSolver, LongPathsAreBottleneckedByTheirNarrowestLink) {
  // 40 links in a row, one of them at 10 Gb/s: a flow over all of them gets 10 Gb/s; a second
  // flow over the last 20 links (not the slow one) shares them and gets the rest of 100 Gb/s.
  std::vector<double> cap(40, 100 * kGbps);
  cap[7] = 10 * kGbps;
  MaxMinSolver s(cap);
  std::vector<MaxMinSolver::LinkIndex> all, tail;
  for (MaxMinSolver::LinkIndex l = 0; l < 40; ++l) {
    all.push_back(l);
    if (l >= 20) tail.push_back(l);
  }
  const Slot lng = s.add(all), shrt = s.add(tail);
  solve(s);
  EXPECT_NEAR(s.rate(lng), 10 * kGbps, 1e-3);
  EXPECT_NEAR(s.rate(shrt), 90 * kGbps, 1e-3);
  EXPECT_EQ(s.links(lng).size(), 40u);
  s.remove(lng);
  solve(s);
  EXPECT_NEAR(s.rate(shrt), 100 * kGbps, 1e-3);
}

// ---- random instances ----

struct Instance {
  std::vector<double> cap;
  std::vector<std::vector<MaxMinSolver::LinkIndex>> paths;
  std::vector<std::vector<double>> weights;  // empty: all 1
  std::vector<double> caps;
};

Instance random_instance(RandomStream& rng, size_t links, size_t flows) {
  Instance in;
  for (size_t l = 0; l < links; ++l)
    in.cap.push_back((1 + static_cast<double>(rng.below(8))) * 50 * kGbps);
  for (size_t f = 0; f < flows; ++f) {
    std::vector<MaxMinSolver::LinkIndex> p;
    // Mostly short paths; some longer than a flow stores inline.
    const size_t hops =
        rng.below(8) == 0 ? 13 + rng.below(std::min<size_t>(links - 13, 10)) : 1 + rng.below(5);
    while (p.size() < hops) {
      const auto l = static_cast<MaxMinSolver::LinkIndex>(rng.below(links));
      if (std::find(p.begin(), p.end(), l) == p.end()) p.push_back(l);
    }
    in.paths.push_back(p);
    std::vector<double> w;
    if (rng.below(4) == 0) {
      for (size_t i = 0; i < p.size(); ++i)
        w.push_back(0.25 * static_cast<double>(1 + rng.below(8)));
    }
    in.weights.push_back(w);
    in.caps.push_back(rng.below(6) == 0 ? (1 + static_cast<double>(rng.below(100))) * kGbps
                                        : MaxMinSolver::kNoCap);
  }
  return in;
}

/// Checks the definition of max-min fairness directly, independently of how the rates were
/// computed: the rates are feasible (sum of weight x rate within every capacity), and every flow
/// has a bottleneck, i.e. its own cap binds or some link on its path is saturated and no flow on
/// that link has a larger rate. (A rate vector with these two properties is the unique max-min
/// fair allocation, with weights as with plain flows: Bertsekas and Gallager, Data Networks 6.5.)
void expect_max_min_fair(const MaxMinSolver& s, const std::vector<Slot>& live,
                         const std::vector<double>& caps) {
  std::vector<double> load(s.link_count(), 0), max_rate(s.link_count(), 0);
  for (Slot f : live) {
    const auto links = s.links(f);
    for (uint32_t i = 0; i < links.size(); ++i) {
      load[links[i]] += s.rate(f) * s.weight(f, i);
      max_rate[links[i]] = std::max(max_rate[links[i]], s.rate(f));
    }
  }
  for (MaxMinSolver::LinkIndex l = 0; l < load.size(); ++l) {
    EXPECT_LE(load[l], s.capacity(l) * (1 + 1e-9)) << "link " << l << " over capacity";
  }
  for (size_t i = 0; i < live.size(); ++i) {
    const Slot f = live[i];
    EXPECT_LE(s.rate(f), caps[i] * (1 + 1e-9));
    bool bottleneck = s.rate(f) >= caps[i] * (1 - 1e-9);
    for (auto l : s.links(f)) {
      bottleneck |= load[l] >= s.capacity(l) * (1 - 1e-9) && s.rate(f) >= max_rate[l] * (1 - 1e-9);
    }
    EXPECT_TRUE(bottleneck) << "flow " << f << " (rate " << s.rate(f) << ") has no bottleneck";
  }
}

TEST(MaxMinSolver, RandomInstancesAreMaxMinFair) {
  RandomStream rng(7, "maxmin-fairness");
  for (int trial = 0; trial < 50; ++trial) {
    const Instance in = random_instance(rng, 20, 60);
    MaxMinSolver s(in.cap);
    std::vector<Slot> live;
    for (size_t f = 0; f < in.paths.size(); ++f)
      live.push_back(s.add(in.paths[f], in.caps[f], in.weights[f]));
    solve(s);
    expect_max_min_fair(s, live, in.caps);
  }
}

TEST(MaxMinSolver, IncrementalAgreesWithFullRecomputation) {
  // Drive two solvers, one incremental and one recomputing everything, through the same random
  // sequence of batches of adds and removes; after every solve the rates must agree.
  RandomStream rng(11, "maxmin-incremental");
  for (int trial = 0; trial < 10; ++trial) {
    const Instance in = random_instance(rng, 40, 400);
    MaxMinSolver inc(in.cap), full(in.cap);
    full.set_incremental(false);
    std::vector<std::pair<Slot, Slot>> live;  // (incremental slot, full slot)
    size_t next = 0;
    for (int batch = 0; batch < 60; ++batch) {
      const size_t adds = rng.below(8), removes = std::min<size_t>(live.size(), rng.below(8));
      for (size_t i = 0; i < removes; ++i) {
        const size_t k = rng.below(live.size());
        inc.remove(live[k].first);
        full.remove(live[k].second);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      }
      for (size_t i = 0; i < adds && next < in.paths.size(); ++i, ++next) {
        live.emplace_back(inc.add(in.paths[next], in.caps[next], in.weights[next]),
                          full.add(in.paths[next], in.caps[next], in.weights[next]));
      }
      solve(inc);
      solve(full);
      for (const auto& [a, b] : live) {
        ASSERT_NEAR(inc.rate(a), full.rate(b), 1e-9 * full.rate(b))
            << "trial " << trial << " batch " << batch;
      }
    }
    // The incremental path must actually have saved work.
    EXPECT_LT(inc.stats().flows_recomputed, full.stats().flows_recomputed);
  }
}

TEST(MaxMinSolver, ThreadsDoNotChangeRates) {
  // Many independent components solved on 1 and on 4 threads give bit-identical rates.
  RandomStream rng(3, "maxmin-threads");
  std::vector<double> cap(4000);
  for (double& c : cap)
    c = (1 + static_cast<double>(rng.below(4))) * 100 * kGbps;
  MaxMinSolver one(cap), four(cap);
  four.set_threads(4);
  std::vector<std::pair<Slot, Slot>> slots;
  for (int f = 0; f < 12000; ++f) {
    // Paths stay inside blocks of 8 links: 500 independent components.
    const auto block = static_cast<MaxMinSolver::LinkIndex>(8 * rng.below(500));
    const auto a = static_cast<MaxMinSolver::LinkIndex>(rng.below(4));
    const auto b = static_cast<MaxMinSolver::LinkIndex>(rng.below(4));
    const MaxMinSolver::LinkIndex p[] = {block + a, block + 4 + b};
    slots.emplace_back(one.add(p), four.add(p));
  }
  solve(one);
  solve(four);
  for (const auto& [a, b] : slots)
    ASSERT_EQ(one.rate(a), four.rate(b));
}

// ---- completions: flows leave in the order they finish ----

/// A two-tier fabric in miniature, as in bench/micro_maxmin.cpp: `hosts` hosts, `per_leaf` per
/// leaf, `spines` spines; a flow crosses host-up, leaf-up, spine-down and host-down links (two
/// links inside a leaf) through the spine it names.
struct LeafSpine {
  size_t hosts, per_leaf, spines, leaves;
  std::vector<double> cap;
  LeafSpine(size_t h, size_t p, size_t s, double host_rate, double uplink_rate)
      : hosts(h), per_leaf(p), spines(s), leaves(h / p) {
    cap.assign(2 * hosts, host_rate);
    cap.resize(2 * hosts + 2 * leaves * spines, uplink_rate);
  }
  std::vector<MaxMinSolver::LinkIndex> path(size_t src, size_t dst, size_t spine) const {
    using L = MaxMinSolver::LinkIndex;
    const size_t ls = src / per_leaf, ld = dst / per_leaf;
    if (ls == ld) return {L(src), L(hosts + dst)};
    return {L(src), L(2 * hosts + ls * spines + spine),
            L(2 * hosts + leaves * spines + ld * spines + spine), L(hosts + dst)};
  }
};

/// An incremental solver and a from-scratch one (set_incremental(false)) driven through the
/// same flows, removing after every solve the flows that finish first, as the network model
/// does: each flow has bytes left, and the flows with the least time left end together (to
/// 1e-12 relative, the rounding of one end time). The incremental solver's rates decide; after
/// every solve both must give every live flow the same rate to 1e-9 relative (the two freeze
/// different flows, so their sums round differently).
struct Pair {
  MaxMinSolver inc, full;
  explicit Pair(const std::vector<double>& cap) : inc(cap), full(cap) {
    full.set_incremental(false);
  }
};
struct LiveFlow {
  Slot inc, full;
  double left;  // bytes
  double cap;
};

void expect_same_rates(const Pair& p, const std::vector<LiveFlow>& live, const std::string& at) {
  for (const LiveFlow& f : live) {
    ASSERT_NEAR(p.inc.rate(f.inc), p.full.rate(f.full), 1e-9 * p.full.rate(f.full)) << at;
  }
}

/// Removes the flows that finish first (by the incremental rates), advancing the others.
void complete_first(Pair& p, std::vector<LiveFlow>& live) {
  double t = std::numeric_limits<double>::infinity();
  for (const LiveFlow& f : live)
    t = std::min(t, f.left / p.inc.rate(f.inc));
  std::vector<LiveFlow> next;
  for (const LiveFlow& f : live) {
    const double dt = f.left / p.inc.rate(f.inc);
    if (dt <= t * (1 + 1e-12)) {
      p.inc.remove(f.inc);
      p.full.remove(f.full);
    } else {
      next.push_back({f.inc, f.full, f.left - t * p.inc.rate(f.inc), f.cap});
    }
  }
  live.swap(next);
}

TEST(MaxMinSolver, IncrementalAgreesWithFullAtEveryCompletionOfAnAllToAll) {
  // An all-to-all on 48 hosts (16 per leaf, 3 leaves, 8 spines picked at random): 2,256 flows,
  // 47 on every host link and about 64 on every leaf uplink. Flows of one size would finish
  // from the fastest down and leave only slower flows behind, which keep their rates; sizes of
  // 64 to 256 KiB make flows of one level end apart, so the flows left beside them speed up.
  // Either way most solves pass over busy links without walking them (their bounds are below
  // tau) and recompute few flows. The from-scratch solver recomputes all of them every time;
  // the two must agree at every completion until the last flow ends.
  const double host = 400 * kGbps;
  const LeafSpine fabric(48, 16, 8, host, host);
  Pair p(fabric.cap);
  RandomStream rng(5, "maxmin-alltoall");
  std::vector<LiveFlow> live;
  for (size_t s = 0; s < fabric.hosts; ++s) {
    for (size_t d = 0; d < fabric.hosts; ++d) {
      if (s == d) continue;
      const auto path = fabric.path(s, d, rng.below(fabric.spines));
      const double bytes = 64 * 1024.0 * static_cast<double>(1 + rng.below(4));
      live.push_back({p.inc.add(path), p.full.add(path), bytes, MaxMinSolver::kNoCap});
    }
  }
  ASSERT_EQ(live.size(), 48u * 47u);
  int solves = 0;
  while (!live.empty()) {
    solve(p.inc);
    solve(p.full);
    ++solves;
    expect_same_rates(p, live, "completion " + std::to_string(solves));
    if (HasFatalFailure()) return;
    complete_first(p, live);
  }
  EXPECT_EQ(p.inc.active_flows(), 0u);
  EXPECT_GT(solves, 10);
  // The incremental path did a fraction of the work.
  EXPECT_LT(p.inc.stats().flows_recomputed * 10, p.full.stats().flows_recomputed);
}

TEST(MaxMinSolver, RandomFabricsAgreeAndAreFairAtEveryCompletion) {
  // Property: on 25 random leaf-spine fabrics (2-6 leaves of 2-12 hosts, 1-6 spines, uplinks
  // slower or faster than hosts), random flow sets (random pairs and spines, sizes 1-8 units,
  // some capped by their own rate, some weighted as if split over two QPs) run to completion,
  // with new flows joining between completions and a link's capacity changed now and then:
  // after every solve the incremental rates equal the from-scratch ones (to 1e-9 relative) and
  // satisfy the definition of max-min fairness (expect_max_min_fair). Busy links (16 flows and
  // more) ask their sorted bounds, quieter ones are walked, so both paths are exercised.
  RandomStream rng(13, "maxmin-completions");
  for (int trial = 0; trial < 25; ++trial) {
    const size_t per_leaf = 2 + rng.below(11), leaves = 2 + rng.below(5);
    const size_t spines = 1 + rng.below(6);
    const double host = 100 * kGbps * static_cast<double>(1 + rng.below(4));
    const double uplink = 100 * kGbps * static_cast<double>(1 + rng.below(4));
    const LeafSpine fabric(per_leaf * leaves, per_leaf, spines, host, uplink);
    Pair p(fabric.cap);
    std::vector<LiveFlow> live;
    auto add_flow = [&] {
      const size_t s = rng.below(fabric.hosts);
      size_t d = rng.below(fabric.hosts - 1);
      d += d >= s ? 1 : 0;
      const auto path = fabric.path(s, d, rng.below(spines));
      const double cap =
          rng.below(5) == 0 ? host * (0.05 + 0.5 * rng.uniform()) : MaxMinSolver::kNoCap;
      std::vector<double> w;
      if (rng.below(6) == 0) w.assign(path.size(), rng.below(2) == 0 ? 0.5 : 2.0);
      live.push_back({p.inc.add(path, cap, w), p.full.add(path, cap, w),
                      1e6 * static_cast<double>(1 + rng.below(8)), cap});
    };
    const size_t initial = 20 + rng.below(300), arrivals = rng.below(100);
    for (size_t i = 0; i < initial; ++i)
      add_flow();
    size_t arrived = 0;
    for (int step = 0; !live.empty(); ++step) {
      solve(p.inc);
      solve(p.full);
      const std::string at = "trial " + std::to_string(trial) + " step " + std::to_string(step);
      expect_same_rates(p, live, at);
      std::vector<Slot> slots;
      std::vector<double> caps;
      for (const LiveFlow& f : live) {
        slots.push_back(f.inc);
        caps.push_back(f.cap);
      }
      expect_max_min_fair(p.inc, slots, caps);
      if (HasFailure()) return;
      complete_first(p, live);
      for (size_t k = rng.below(3); k > 0 && arrived < arrivals; --k, ++arrived)
        add_flow();
      if (rng.below(25) == 0) {
        // A link slows down or recovers (never to 0, so every flow keeps an end).
        const auto l = static_cast<MaxMinSolver::LinkIndex>(rng.below(fabric.cap.size()));
        const double c = fabric.cap[l] * (rng.below(2) == 0 ? 0.5 : 1.0);
        p.inc.set_capacity(l, c);
        p.full.set_capacity(l, c);
      }
    }
  }
}

}  // namespace
}  // namespace rocesim::network
