#include "sim/training/memory.hpp"

namespace rocesim::training {
namespace {

// Defaults [E]: a CUDA context, the NCCL communicators' buffers and the framework's workspace
// take 1-3 GiB per GPU in practice; PyTorch's caching allocator loses some memory to
// fragmentation.
constexpr Param kMemoryParams[] = {
    {.key = "overhead",
     .type = ParamType::Bytes,
     .fallback = "2GiB",
     .help = "fixed bytes per GPU: CUDA context, NCCL buffers, workspaces (estimate)",
     .check = Check::NonNegative},
    {.key = "fragmentation",
     .type = ParamType::Number,
     .fallback = "0.05",
     .help = "allowance for the allocator's fragmentation, a fraction of the rest (estimate)",
     .check = Check::NonNegative},
};

struct StateBytes {
  double weights, gradients, optimizer;
};
StateBytes state_bytes(Precision p) {
  if (p == Precision::Fp32) return {4, 4, 8};
  return {2, 2, 12};
}

}  // namespace

const ParamTable& memory_table() {
  static const ParamTable table{"memory",
                                "The memory model of a training workload: what is added to "
                                "model states, activations and buffers.",
                                kMemoryParams};
  return table;
}

MemoryParams read_memory(const ParamReader& r) {
  return {static_cast<double>(r.bytes("overhead").count()), r.number("fragmentation")};
}

double MemoryBreakdown::total() const {
  double t = 0;
  for (const auto& [name, bytes] : parts)
    t += bytes;
  return t;
}

double model_state_bytes(double params, int dp, int stage, Precision precision) {
  const StateBytes b = state_bytes(precision);
  const double n = dp;
  const double w = stage >= 3 ? b.weights / n : b.weights;
  const double g = stage >= 2 ? b.gradients / n : b.gradients;
  const double o = stage >= 1 ? b.optimizer / n : b.optimizer;
  return params * (w + g + o);
}

MemoryBreakdown memory_per_gpu(const MemoryInput& in, const MemoryParams& p) {
  const StateBytes b = state_bytes(in.precision);
  const double dense = in.params - in.expert_params;
  const auto share = [&](double params, int n, bool partitioned) {
    return partitioned ? params / n : params;
  };
  MemoryBreakdown out;
  const double weights = b.weights * (share(dense, in.dp, in.stage >= 3) +
                                      share(in.expert_params, in.expert_dp, in.stage >= 3) +
                                      in.live_gathered + in.hpz_share);
  out.parts.emplace_back("weights", weights);
  out.parts.emplace_back("gradients",
                         b.gradients * (share(dense, in.dp, in.stage >= 2) +
                                        share(in.expert_params, in.expert_dp, in.stage >= 2)));
  out.parts.emplace_back("optimizer",
                         b.optimizer * (share(dense, in.dp, in.stage >= 1) +
                                        share(in.expert_params, in.expert_dp, in.stage >= 1)));
  // Activations of one micro-batch through one layer, 16-bit.
  const Model& m = *in.model;
  const double sbh = static_cast<double>(m.seq_len) * static_cast<double>(in.micro_batch) *
                     static_cast<double>(m.hidden);
  const double t = in.tp;
  const double scores = in.flash_attention ? 0
                                           : 5.0 * m.heads * static_cast<double>(m.seq_len) /
                                                 (static_cast<double>(m.hidden) * t);
  double per_layer = sbh * (10 + 24 / t + scores);
  if (m.moe()) {
    // The MLP's share (the 19 s b h of its inputs, activation and output, of 34) runs top_k
    // times.
    per_layer += sbh * 19.0 / t * (m.top_k - 1);
  }
  double activations = 0;
  if (in.checkpointing == Checkpointing::Full) {
    const double kept = 2 * sbh / (in.partition_activations ? t : 1);
    activations = kept * in.layers * in.micro_batches_live + per_layer;
  } else {
    activations = per_layer * in.layers * in.micro_batches_live;
  }
  out.parts.emplace_back("activations", activations);
  if (in.holds_head) {
    // Logits in 16 bits and their fp32 copy for the loss.
    out.parts.emplace_back("logits", static_cast<double>(m.seq_len) *
                                         static_cast<double>(in.micro_batch) *
                                         static_cast<double>(m.vocab) / t * (2 + 4));
  }
  out.parts.emplace_back("buffers", in.buffers);
  out.parts.emplace_back("overhead", p.overhead);
  out.parts.emplace_back("fragmentation", p.fragmentation * out.total());
  return out;
}

}  // namespace rocesim::training
