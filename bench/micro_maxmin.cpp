// Micro-benchmarks of the max-min solver (Google Benchmark). Run: make bench, or
//   build/release/bench/micro_maxmin --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <vector>

#include "sim/core/rng.hpp"
#include "sim/network/maxmin_solver.hpp"

namespace {

using rocesim::RandomStream;
using rocesim::network::MaxMinSolver;
using Link = MaxMinSolver::LinkIndex;
constexpr double kRate = 400e9 / 8;

// A two-tier fabric in miniature: `hosts` hosts, 16 per leaf, 16 spines; a flow crosses
// host-up, leaf-up, spine-down, host-down links (4 hops) through a random spine.
struct Fabric {
  size_t hosts;
  size_t leaves;
  std::vector<double> capacity;
  explicit Fabric(size_t h)
      : hosts(h), leaves(h / 16), capacity(2 * h + 2 * (h / 16) * 16, kRate) {}
  std::vector<Link> path(size_t src, size_t dst, size_t spine) const {
    const size_t ls = src / 16, ld = dst / 16;
    if (ls == ld) return {Link(src), Link(hosts + dst)};
    return {Link(src), Link(2 * hosts + ls * 16 + spine),
            Link(2 * hosts + leaves * 16 + ld * 16 + spine), Link(hosts + dst)};
  }
};

// Solving a batch of flows that all start together: a permutation of `hosts` flows.
void BM_SolvePermutation(benchmark::State& state) {
  const auto hosts = static_cast<size_t>(state.range(0));
  const Fabric f(hosts);
  RandomStream rng(1, "bench");
  std::vector<size_t> p(hosts);
  for (size_t i = 0; i < hosts; ++i)
    p[i] = i;
  for (size_t i = hosts - 1; i >= 1; --i)
    std::swap(p[i], p[rng.below(i)]);
  std::vector<std::vector<Link>> paths;
  for (size_t i = 0; i < hosts; ++i)
    paths.push_back(f.path(i, p[i], rng.below(16)));
  std::vector<MaxMinSolver::FlowSlot> changed;
  for (auto _ : state) {
    MaxMinSolver s(f.capacity);
    for (const auto& path : paths)
      s.add(path);
    s.solve(changed);
    benchmark::DoNotOptimize(changed.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * hosts));
}
BENCHMARK(BM_SolvePermutation)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond);

// Incremental updates in an all-to-all: n(n-1) flows on n hosts; flows are removed one at a
// time in order of rate, fastest first (as equal-size flows complete), with a solve after each.
void BM_AllToAllCompletions(benchmark::State& state) {
  const auto hosts = static_cast<size_t>(state.range(0));
  const Fabric f(hosts);
  RandomStream rng(2, "bench");
  std::vector<std::vector<Link>> paths;
  for (size_t s = 0; s < hosts; ++s) {
    for (size_t d = 0; d < hosts; ++d) {
      if (s != d) paths.push_back(f.path(s, d, rng.below(16)));
    }
  }
  std::vector<MaxMinSolver::FlowSlot> changed;
  const size_t removals = 512;
  for (auto _ : state) {
    state.PauseTiming();
    MaxMinSolver s(f.capacity);
    std::vector<MaxMinSolver::FlowSlot> slots;
    for (const auto& path : paths)
      slots.push_back(s.add(path));
    s.solve(changed);
    std::sort(slots.begin(), slots.end(), [&](auto a, auto b) {
      return s.rate(a) > s.rate(b) || (s.rate(a) == s.rate(b) && a < b);
    });
    state.ResumeTiming();
    for (size_t i = 0; i < removals; ++i) {
      s.remove(slots[i]);
      s.solve(changed);
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * removals));
}
BENCHMARK(BM_AllToAllCompletions)->Arg(64)->Arg(128)->Unit(benchmark::kMillisecond);

// The ring pattern: flows that never share a link, started and finished one by one.
void BM_IsolatedFlowChurn(benchmark::State& state) {
  const Fabric f(4096);
  std::vector<MaxMinSolver::FlowSlot> changed;
  MaxMinSolver s(f.capacity);
  size_t i = 0;
  for (auto _ : state) {
    const auto slot = s.add(f.path(i % 4096, (i + 1) % 4096, i % 16));
    s.solve(changed);
    s.remove(slot);
    s.solve(changed);
    ++i;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_IsolatedFlowChurn);

}  // namespace

BENCHMARK_MAIN();
