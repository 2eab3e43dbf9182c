// Keys every workload entry of a scenario has, declared once and included in each workload
// type's table. The scenario loader reads them; the workload's own factory reads the rest.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/core/params.hpp"
#include "sim/engine/simulation.hpp"
#include "sim/fabric/gpu_selection.hpp"

namespace rocesim::engine {

inline constexpr Param kWorkloadTypeParam{
    .key = "type",
    .type = ParamType::Choice,
    .help = "workload kind",
    .choices = "flows|permutation|incast|all_to_all|ring_step|ring_allreduce|nccl|training"};
inline constexpr Param kWorkloadNameParam{
    .key = "name",
    .type = ParamType::String,
    .help = "name in the summary and in results.h5 (default: the type and its position)",
    .optional = true};
inline constexpr Param kWorkloadStartParam{.key = "start",
                                           .type = ParamType::Time,
                                           .fallback = "0s",
                                           .help = "earliest start time",
                                           .check = Check::NonNegative};
inline constexpr Param kWorkloadAfterParam{
    .key = "after",
    .type = ParamType::List,
    .help = "names of workloads that must finish before this one starts",
    .optional = true};
inline constexpr Param kWorkloadJobParam{
    .key = "job",
    .type = ParamType::String,
    .help =
        "the job whose ranks this workload's ranks are (a name of `jobs`; default: the "
        "scenario's `job`)",
    .optional = true};

// Connection settings shared by generated traffic, with NCCL's names for the same knobs.
inline constexpr Param kQpsParam{
    .key = "qps_per_connection",
    .type = ParamType::Integer,
    .fallback = "1",
    .help = "QPs per connection (NCCL_IB_QPS_PER_CONNECTION); each has its own UDP source port",
    .check = Check::Positive,
    .max = 128};
inline constexpr Param kMessageSizeParam{
    .key = "message_size",
    .type = ParamType::Bytes,
    .fallback = "512KiB",
    .help =
        "transfers are posted as messages of this size, each to the next QP (NCCL posts one "
        "RDMA write per buffer step: NCCL_BUFFSIZE / 8 = 512 KiB)",
    .check = Check::Positive};
inline constexpr Param kQpModeParam{
    .key = "qp_mode",
    .type = ParamType::Choice,
    .fallback = "round_robin",
    .help =
        "round_robin posts each message to the next QP; split divides every message across "
        "all QPs (NCCL_IB_SPLIT_DATA_ON_QPS=1)",
    .choices = "round_robin|split"};

inline constexpr Param kTransportParam{
    .key = "transport",
    .type = ParamType::Choice,
    .fallback = "rdma",
    .help =
        "rdma: the NIC's RDMA (RoCEv2 or InfiniBand), in the lossless class; tcp: the host's TCP "
        "stack, in the lossy class (its congestion control, losses and time-outs need "
        "network.model: fluid, see network.tcp)",
    .choices = "rdma|tcp"};

inline network::Transport read_transport(const ParamReader& r) {
  return r.choice("transport") == "tcp" ? network::Transport::Tcp : network::Transport::Rdma;
}

// Splitting the ranks of a collective into independent groups (communicators).
inline constexpr Param kGroupSizeParam{
    .key = "group_size",
    .type = ParamType::Integer,
    .fallback = "0",
    .help =
        "split the ranks into independent groups of this many, each its own ring (e.g. the "
        "data-parallel groups of a job); 0: one group of all ranks",
    .check = Check::NonNegative};
inline constexpr Param kGroupStrideParam{
    .key = "group_stride",
    .type = ParamType::Integer,
    .fallback = "1",
    .help =
        "rank distance between consecutive members of a group: groups fill blocks of "
        "group_size x group_stride ranks, member k of group j of a block being its rank "
        "j + k x group_stride (1: contiguous groups; 8 on 8-GPU servers: GPU j of "
        "group_size consecutive servers)",
    .check = Check::Positive};

/// Reorders `ranks` so that consecutive runs of the returned group size are the groups that
/// group_size and group_stride describe.
inline size_t arrange_groups(const ParamReader& r, std::vector<fabric::NodeId>& ranks) {
  const auto group = static_cast<size_t>(r.integer("group_size"));
  const auto stride = static_cast<size_t>(r.integer("group_stride"));
  if (group == 0) {
    if (stride != 1) r.fail("group_stride", "1 when group_size is 0", std::to_string(stride));
    return ranks.size();
  }
  if (group < 2) r.fail("group_size", "0 or a group of at least 2 ranks", std::to_string(group));
  const size_t block = group * stride;
  if (ranks.size() % block != 0) {
    r.fail("group_size",
           "group_size x group_stride (" + std::to_string(block) + ") to divide the " +
               std::to_string(ranks.size()) + " ranks",
           std::to_string(group));
  }
  std::vector<fabric::NodeId> out;
  out.reserve(ranks.size());
  for (size_t b = 0; b < ranks.size(); b += block) {
    for (size_t j = 0; j < stride; ++j) {
      for (size_t k = 0; k < group; ++k)
        out.push_back(ranks[b + j + k * stride]);
    }
  }
  ranks = std::move(out);
  return group;
}

/// What a workload factory gets: its own section of the scenario (validated against its table),
/// the sealed fabric, the scenario seed, its name and the directory relative file paths start in.
struct WorkloadInput {
  const ParamReader& spec;
  const fabric::Fabric& fabric;
  /// The ranks of the workload's job: `ranks`, `src` and `dst` select among them.
  const fabric::Ranks& ranks;
  uint64_t seed;
  std::string name;
  std::string base_dir;
};

/// Reads qps_per_connection, qp_mode, message_size and transport.
inline ConnectionSpec read_connection_spec(const ParamReader& r) {
  ConnectionSpec c;
  c.qps = r.integer_as<uint32_t>("qps_per_connection");
  c.mode = r.choice("qp_mode") == "split" ? QpMode::Split : QpMode::RoundRobin;
  c.message_bytes = r.bytes("message_size").count();
  c.transport = read_transport(r);
  return c;
}

}  // namespace rocesim::engine
