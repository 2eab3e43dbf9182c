// The memory model: bytes a GPU holds during a training step, by kind.
//
// Model states in mixed precision with Adam (ZeRO paper, arXiv:1910.02054): 2 bytes of 16-bit
// weights, 2 of gradients and K = 12 of optimizer state (fp32 master weights, momentum,
// variance) per parameter; in fp32, 4 + 4 + 8. With Ψ the GPU's parameters (after tensor and
// pipeline parallelism) and N_d the ranks ZeRO partitions over:
//   stage 0: (2 + 2 + K) Ψ; 1: (2 + 2) Ψ + K Ψ / N_d; 2: 2 Ψ + (2 + K) Ψ / N_d;
//   stage 3: (2 + 2 + K) Ψ / N_d, plus the gathered parameters live at once.
// Activations per layer (Korthikanti et al., arXiv:2205.05198), s sequence, b micro-batch,
// h hidden, a heads, t tensor-parallel ranks: s b h (10 + 24 / t + 5 a s / (h t)); FlashAttention
// keeps no s x s scores (the last term goes); full recomputation keeps 2 s b h per layer plus
// one layer's full activations. A pipeline stage holds the activations of the micro-batches in
// flight (1F1B: p - stage of them). Plus the loss's logits, the communication buckets, a fixed
// overhead (CUDA context, NCCL buffers) and a fragmentation allowance.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sim/core/params.hpp"
#include "sim/training/compute.hpp"

namespace rocesim::training {

struct MemoryParams {
  double overhead = 2.0 * (1 << 30);  // bytes
  double fragmentation = 0.05;        // of the rest
};
const ParamTable& memory_table();
MemoryParams read_memory(const ParamReader& r);

enum class Checkpointing : uint8_t { None, Full };

struct MemoryInput {
  double params = 0;         // parameters this GPU computes with (after TP, PP; dense)
  double expert_params = 0;  // of which experts, partitioned over expert_dp instead of dp
  int dp = 1, expert_dp = 1;
  int stage = 0;
  Precision precision = Precision::Bf16;
  double live_gathered = 0;  // stage 3: parameter elements gathered at once
  double hpz_share = 0;      // hpZ: secondary partition, elements
  // Activations.
  const Model* model = nullptr;
  int tp = 1;
  int64_t micro_batch = 1;
  int layers = 0;              // in this pipeline stage
  int micro_batches_live = 1;  // 1F1B: pipeline stages from here to the last
  Checkpointing checkpointing = Checkpointing::None;
  bool flash_attention = true;
  bool partition_activations = false;
  bool holds_head = true;
  double buffers = 0;  // communication buckets, bytes
};

struct MemoryBreakdown {
  std::vector<std::pair<std::string, double>> parts;  // name, bytes
  double total() const;
};
MemoryBreakdown memory_per_gpu(const MemoryInput& in, const MemoryParams& p);
/// Model-state bytes per parameter on a GPU: weights, gradients and optimizer states (the ZeRO
/// paper's table).
double model_state_bytes(double params, int dp, int stage, Precision precision);

}  // namespace rocesim::training
