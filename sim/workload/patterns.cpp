#include "sim/workload/patterns.hpp"

#include "sim/core/memory.hpp"

#include <fmt/format.h>

#include "sim/core/rng.hpp"
#include "sim/engine/task_graph.hpp"
#include "sim/fabric/gpu_selection.hpp"

namespace rocesim::workload {
namespace {

using engine::TaskGraph;

constexpr Param kRanksParam{.key = "ranks",
                            .type = ParamType::Any,
                            .fallback = "all",
                            .help = "ranks of the job taking part",
                            .choices = "GPU selection"};
constexpr Param kBytesParam{.key = "bytes",
                            .type = ParamType::Bytes,
                            .help = "bytes per transfer",
                            .check = Check::Positive};

constexpr Param kPermutationParams[] = {engine::kWorkloadTypeParam,
                                        engine::kWorkloadNameParam,
                                        engine::kWorkloadStartParam,
                                        engine::kWorkloadAfterParam,
                                        engine::kWorkloadJobParam,
                                        kRanksParam,
                                        kBytesParam,
                                        engine::kQpsParam,
                                        engine::kQpModeParam,
                                        engine::kMessageSizeParam,
                                        engine::kTransportParam};
constexpr Param kIncastParams[] = {engine::kWorkloadTypeParam,
                                   engine::kWorkloadNameParam,
                                   engine::kWorkloadStartParam,
                                   engine::kWorkloadAfterParam,
                                   engine::kWorkloadJobParam,
                                   kRanksParam,
                                   kBytesParam,
                                   engine::kQpsParam,
                                   engine::kQpModeParam,
                                   engine::kMessageSizeParam,
                                   engine::kTransportParam,
                                   {.key = "fan_in",
                                    .type = ParamType::Integer,
                                    .fallback = "16",
                                    .help = "senders per receiver (an N:1 incast)",
                                    .check = Check::Positive,
                                    .max = 1048576}};
constexpr Param kAllToAllParams[] = {engine::kWorkloadTypeParam,
                                     engine::kWorkloadNameParam,
                                     engine::kWorkloadStartParam,
                                     engine::kWorkloadAfterParam,
                                     engine::kWorkloadJobParam,
                                     kRanksParam,
                                     {.key = "bytes",
                                      .type = ParamType::Bytes,
                                      .help = "bytes per ordered pair of ranks",
                                      .check = Check::Positive},
                                     engine::kQpsParam,
                                     engine::kQpModeParam,
                                     engine::kMessageSizeParam,
                                     engine::kTransportParam};
constexpr Param kRingStepParams[] = {engine::kWorkloadTypeParam,
                                     engine::kWorkloadNameParam,
                                     engine::kWorkloadStartParam,
                                     engine::kWorkloadAfterParam,
                                     engine::kWorkloadJobParam,
                                     kRanksParam,
                                     kBytesParam,
                                     engine::kQpsParam,
                                     engine::kQpModeParam,
                                     engine::kMessageSizeParam,
                                     engine::kTransportParam,
                                     engine::kGroupSizeParam,
                                     engine::kGroupStrideParam};

struct Common {
  std::vector<fabric::NodeId> ranks;
  Bytes bytes;
  engine::ConnectionSpec conn;
};

Common read_common(const engine::WorkloadInput& in, size_t min_ranks) {
  Common c;
  c.ranks = in.ranks.select(in.spec.value("ranks"));
  if (c.ranks.size() < min_ranks) {
    in.spec.fail("ranks", fmt::format("at least {} GPUs", min_ranks),
                 fmt::format("{} GPU{}", c.ranks.size(), c.ranks.size() == 1 ? "" : "s"));
  }
  c.bytes = in.spec.bytes("bytes");
  c.conn = engine::read_connection_spec(in.spec);
  return c;
}

void add(TaskGraph& g, const Common& c, fabric::NodeId src, fabric::NodeId dst) {
  g.add_transfer(TaskGraph::TransferSpec{src, dst, c.bytes, c.conn, {}});
}

}  // namespace

const ParamTable kPermutationTable{
    "workload (type: permutation)",
    "Every rank sends `bytes` to one other rank and receives from one: a random cyclic "
    "permutation (Sattolo).",
    kPermutationParams};
const ParamTable kIncastTable{
    "workload (type: incast)",
    "Groups of `fan_in` senders and one receiver, formed from a random shuffle of the ranks; "
    "leftover ranks stay idle.",
    kIncastParams};
const ParamTable kAllToAllTable{"workload (type: all_to_all)",
                                "Every rank sends `bytes` to every other rank.", kAllToAllParams};
const ParamTable kRingStepTable{"workload (type: ring_step)",
                                "One step of a ring: rank i sends `bytes` to rank i+1 (mod n); "
                                "with group_size, one such step in every group at once.",
                                kRingStepParams};

std::unique_ptr<engine::Workload> make_permutation(const engine::WorkloadInput& in) {
  const Common c = read_common(in, 2);
  RandomStream rng(in.seed, "workload/" + in.name);
  const size_t n = c.ranks.size();
  std::vector<size_t> p(n);
  for (size_t i = 0; i < n; ++i)
    p[i] = i;
  for (size_t i = n - 1; i >= 1; --i)
    std::swap(p[i], p[rng.below(i)]);
  auto g = std::make_unique<TaskGraph>(in.name, "permutation");
  for (size_t i = 0; i < n; ++i)
    add(*g, c, c.ranks[i], c.ranks[p[i]]);
  return g;
}

std::unique_ptr<engine::Workload> make_incast(const engine::WorkloadInput& in) {
  const auto fan_in = static_cast<size_t>(in.spec.integer("fan_in"));
  const Common c = read_common(in, fan_in + 1);
  RandomStream rng(in.seed, "workload/" + in.name);
  std::vector<fabric::NodeId> q = c.ranks;
  for (size_t i = q.size() - 1; i >= 1; --i)
    std::swap(q[i], q[rng.below(i + 1)]);
  auto g = std::make_unique<TaskGraph>(in.name, "incast");
  for (size_t base = 0; base + fan_in + 1 <= q.size(); base += fan_in + 1) {
    for (size_t s = 1; s <= fan_in; ++s)
      add(*g, c, q[base + s], q[base]);
  }
  return g;
}

std::unique_ptr<engine::Workload> make_all_to_all(const engine::WorkloadInput& in) {
  const Common c = read_common(in, 2);
  // n(n-1) connections: the one pattern whose memory grows faster than its ranks. A connection
  // and its QP cost about 1 KiB in a run, each further QP 64 B (measured: 215 MiB for the
  // 261,632 connections of 512 ranks, 68 MiB more with 8 QPs each).
  const auto n = static_cast<double>(c.ranks.size());
  const double bytes = n * (n - 1) * (1024.0 + 64.0 * (c.conn.qps - 1));
  if (const auto available = static_cast<double>(available_memory_bytes());
      available > 0 && bytes > available) {
    in.spec.fail("ranks",
                 fmt::format("an all-to-all that fits in this machine's memory ({} available)",
                             format_memory(available)),
                 fmt::format("{} ranks: {:.0f} connections, about {} to simulate", c.ranks.size(),
                             n * (n - 1), format_memory(bytes)));
  }
  auto g = std::make_unique<TaskGraph>(in.name, "all_to_all");
  for (fabric::NodeId s : c.ranks) {
    for (fabric::NodeId d : c.ranks) {
      if (s != d) add(*g, c, s, d);
    }
  }
  return g;
}

std::unique_ptr<engine::Workload> make_ring_step(const engine::WorkloadInput& in) {
  Common c = read_common(in, 2);
  const size_t group = engine::arrange_groups(in.spec, c.ranks);
  auto g = std::make_unique<TaskGraph>(in.name, "ring_step");
  for (size_t base = 0; base < c.ranks.size(); base += group) {
    for (size_t i = 0; i < group; ++i) {
      add(*g, c, c.ranks[base + i], c.ranks[base + (i + 1) % group]);
    }
  }
  return g;
}

}  // namespace rocesim::workload
