// The `training` workload: optimizer steps of a DeepSpeed job (ZeRO stages 0-3) with data,
// tensor, pipeline and expert parallelism, as per-rank programs of compute and collectives
// (program.hpp) built from the model (model.hpp), DeepSpeed's configuration (deepspeed.hpp), the
// compute model (compute.hpp) and checked against the memory model (memory.hpp) first.
//
// Ranks are numbered tensor-parallel fastest, then data-parallel, then pipeline stage (Megatron's
// order): rank = tp + TP (dp + DP pp), so that a tensor-parallel group sits inside a server.
// docs/models/training.md describes the step, its sources and its validation.
#pragma once

#include <memory>
#include <optional>

#include "sim/collectives/nccl/nccl.hpp"
#include "sim/core/config.hpp"
#include "sim/engine/workload_params.hpp"
#include "sim/training/deepspeed.hpp"
#include "sim/training/memory.hpp"
#include "sim/training/model.hpp"

namespace rocesim::training {

extern const ParamTable kTrainingWorkloadTable;
const ParamTable& straggler_table();
/// The tables a training workload's sections are read with (model, compute, memory,
/// stragglers, DeepSpeed's configuration), for `rocesim schema`.
std::vector<const ParamTable*> training_subtables();

/// What the scenario layer resolves for a training workload: the model mapping (inline or from
/// its file) and the DeepSpeed configuration (its file, overlaid with the inline keys).
struct TrainingSources {
  ConfigNode model;
  ConfigNode deepspeed;
};

/// A job's configuration, before any traffic: the layout, the batch and the memory it needs.
struct TrainingSetup {
  Model model;
  DsConfig ds;
  int tp = 1, pp = 1, ep = 1, dp = 1;
  double expert_imbalance = 0;  // the router's: AlltoAllv pair sizes in mean x [1 - u, 1 + u]
  int64_t micro_batch = 1, grad_accumulation = 1;
  int steps = 1;
  Checkpointing checkpointing = Checkpointing::None;
  bool flash_attention = true;
  ComputeParams compute;
  MemoryParams memory_params;
  fabric::GpuSpec gpu;

  int world() const { return tp * pp * dp; }
  int64_t global_batch() const { return micro_batch * grad_accumulation * dp; }
  int stage_layers(int stage) const;
  /// Memory of a GPU of a pipeline stage with a micro-batch of `micro_batch` samples.
  MemoryBreakdown memory(int stage, int64_t micro_batch) const;
  /// The stage that needs the most memory, and its breakdown.
  std::pair<int, MemoryBreakdown> peak_memory(int64_t micro_batch) const;
  /// The largest micro-batch that fits in the GPU's memory (0: not even 1).
  int64_t max_micro_batch() const;
};

/// An upper bound on the instructions of a pipeline stage's program (all of its steps), known
/// before it is built: the workload refuses a job whose programs would not fit in the machine's
/// memory, or that would have more than kMaxProgramInstructions in a stage, with the estimate.
double program_instructions_bound(const TrainingSetup& s, int stage);
inline constexpr double kMaxProgramInstructions = 1u << 31;

/// The setup of a training workload, or nullptr for another kind.
const TrainingSetup* training_setup_of(const engine::Workload& w);
struct Plan;  // program.hpp
/// The per-rank programs of a training workload, or nullptr for another kind.
const Plan* training_plan_of(const engine::Workload& w);

std::unique_ptr<engine::Workload> make_training_workload(
    const engine::WorkloadInput& in, const collectives::nccl::NcclConfig& scenario_nccl,
    const TrainingSources& src);

}  // namespace rocesim::training
