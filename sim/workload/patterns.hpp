// Generated traffic patterns, each a task graph of transfers that all start together:
//   permutation   every rank sends to one other rank and receives from one (a random
//                 derangement: Sattolo's algorithm, so the result is a single cycle)
//   incast        groups of fan_in senders and one receiver, formed from a random shuffle
//   all_to_all    every rank sends to every other rank
//   ring_step     one step of a ring: rank i sends to rank i+1 (mod n)
// Randomness comes from the workload's own stream (scenario seed and workload name).
#pragma once

#include <memory>

#include "sim/engine/workload_params.hpp"

namespace rocesim::workload {

extern const ParamTable kPermutationTable;
extern const ParamTable kIncastTable;
extern const ParamTable kAllToAllTable;
extern const ParamTable kRingStepTable;

std::unique_ptr<engine::Workload> make_permutation(const engine::WorkloadInput& in);
std::unique_ptr<engine::Workload> make_incast(const engine::WorkloadInput& in);
std::unique_ptr<engine::Workload> make_all_to_all(const engine::WorkloadInput& in);
std::unique_ptr<engine::Workload> make_ring_step(const engine::WorkloadInput& in);

}  // namespace rocesim::workload
