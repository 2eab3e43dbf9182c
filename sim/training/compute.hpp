// The compute model: the time a GPU takes for each pass of a layer, from FLOPs and bytes.
//
// Every operation is a roofline, max(FLOPs / (peak x efficiency), bytes / (HBM bandwidth x
// memory_efficiency)), with the peak of the precision in use and one achieved efficiency per
// operation class: matmuls (the layer's GEMMs), the attention core (a fused, causal
// FlashAttention kernel: it runs half of the PaLM-counted 4 s h FLOPs per token) and the
// memory-bound rest (norms, residual adds, rotary embedding, the MLP's activation, the loss).
// Backward costs twice forward, FLOPs and bytes. The defaults and their sources are in the
// parameter table (docs/models/training.md).
#pragma once

#include "sim/core/params.hpp"
#include "sim/fabric/fabric.hpp"
#include "sim/training/model.hpp"

namespace rocesim::training {

enum class Precision : uint8_t { Fp32, Fp16, Bf16, Fp8 };
std::string_view precision_name(Precision p);

struct ComputeParams {
  double matmul_efficiency = 0.7;
  double attention_efficiency = 0.5;
  double memory_efficiency = 0.8;
  double optimizer_bytes_per_param = 30;
};
const ParamTable& compute_table();
ComputeParams read_compute(const ParamReader& r);

/// FLOPs and HBM bytes of one operation class of a pass.
struct Work {
  double matmul_flops = 0, matmul_bytes = 0;
  double attention_flops = 0, attention_bytes = 0;
  double memory_bytes = 0;  // elementwise
  Work& operator+=(const Work& o);
  Work scaled(double f) const;
};

/// Where a layer is cut by tensor parallelism (t) and how many tokens one GPU runs per pass.
struct Shard {
  int tp = 1;
  double tokens = 0;      // micro-batch x seq_len
  int local_experts = 1;  // experts held by this GPU (MoE)
};

/// Forward work of a layer's attention block (norm, QKV, core, projection, residual), of its
/// MLP block (dense or the experts this GPU runs, with the router), of the embedding lookup and
/// of the output head with the loss.
Work attention_block(const Model& m, const Shard& s);
Work mlp_block(const Model& m, const Shard& s);
Work embedding(const Model& m, const Shard& s);
Work head(const Model& m, const Shard& s);

struct Gpu {
  double peak_flops;        // of the precision in use, FLOP/s
  double memory_bandwidth;  // bytes/s
};
Gpu gpu_for(const fabric::GpuSpec& g, Precision p);

/// Seconds for `w` on `gpu`: the roofline of each class, summed.
double seconds(const Work& w, const Gpu& gpu, const ComputeParams& c);

}  // namespace rocesim::training
