#include "sim/training/compute.hpp"

#include <algorithm>

namespace rocesim::training {
namespace {

// Defaults [docs/models/training.md, "Compute"]:
//  * matmul_efficiency 0.7: Megatron-LM reaches 163 TFLOP/s of model FLOPs per A100 with full
//    recomputation on a 1T model (Narayanan et al. 2021, arXiv:2104.04473), i.e. 4/3 x 163 =
//    217 TFLOP/s executed, 0.70 of the 312 peak, in a run that is almost all GEMMs;
//  * attention_efficiency 0.5: FlashAttention-2 reaches 50-73 % of an A100's peak forward and
//    less backward (Dao 2023, arXiv:2307.08691);
//  * memory_efficiency 0.8: an estimate [E] of what elementwise kernels get of HBM bandwidth;
//  * optimizer_bytes_per_param 30: Adam in mixed precision reads the fp32 master weight,
//    momentum, variance and gradient (16 B) and writes the first three and the 16-bit weight
//    (14 B): a memory-bound update of the GPU's partition.
constexpr Param kComputeParams[] = {
    {.key = "matmul_efficiency",
     .type = ParamType::Number,
     .fallback = "0.7",
     .help = "fraction of the GPU's peak that the layer's GEMMs achieve (0.70: Megatron-LM's "
             "217 of 312 TFLOP/s executed per A100); calibratable",
     .check = Check::Fraction},
    {.key = "attention_efficiency",
     .type = ParamType::Number,
     .fallback = "0.5",
     .help = "fraction of peak of the fused attention kernel (FlashAttention-2: 50-73 % "
             "forward on A100, less backward); calibratable",
     .check = Check::Fraction},
    {.key = "memory_efficiency",
     .type = ParamType::Number,
     .fallback = "0.8",
     .help = "fraction of the HBM bandwidth that memory-bound kernels achieve (estimate); "
             "calibratable",
     .check = Check::Fraction},
    {.key = "optimizer_bytes_per_param",
     .type = ParamType::Number,
     .fallback = "30",
     .help = "HBM bytes the optimizer step moves per parameter of the GPU's partition (Adam, "
             "mixed precision: reads 16, writes 14)",
     .check = Check::Positive},
};

constexpr double kAct = 2;  // bytes per activation element (16-bit)

// A GEMM of T tokens through a (din x dout) weight: 2 T din dout FLOPs; reads the weight and
// the input, writes the output.
void gemm(Work& w, double tokens, double din, double dout, double weight_bytes) {
  w.matmul_flops += 2 * tokens * din * dout;
  w.matmul_bytes += weight_bytes * din * dout + kAct * tokens * (din + dout);
}

}  // namespace

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::Fp32:
      return "fp32";
    case Precision::Fp16:
      return "fp16";
    case Precision::Bf16:
      return "bf16";
    case Precision::Fp8:
      return "fp8";
  }
  return "?";
}

const ParamTable& compute_table() {
  static const ParamTable table{
      "compute",
      "The compute model of a training workload: achieved efficiencies of a roofline per "
      "operation class.",
      kComputeParams};
  return table;
}

ComputeParams read_compute(const ParamReader& r) {
  return {r.number("matmul_efficiency"), r.number("attention_efficiency"),
          r.number("memory_efficiency"), r.number("optimizer_bytes_per_param")};
}

Work& Work::operator+=(const Work& o) {
  matmul_flops += o.matmul_flops;
  matmul_bytes += o.matmul_bytes;
  attention_flops += o.attention_flops;
  attention_bytes += o.attention_bytes;
  memory_bytes += o.memory_bytes;
  return *this;
}

Work Work::scaled(double f) const {
  return {matmul_flops * f, matmul_bytes * f, attention_flops * f, attention_bytes * f,
          memory_bytes * f};
}

Work attention_block(const Model& m, const Shard& s) {
  const auto h = static_cast<double>(m.hidden);
  const auto t = static_cast<double>(s.tp);
  const double kv = static_cast<double>(m.head_dim()) * m.kv_heads;
  const double tok = s.tokens;
  Work w;
  gemm(w, tok, h, (h + 2 * kv) / t, kAct);  // QKV
  gemm(w, tok, h / t, h, kAct);             // output projection
  // Causal FlashAttention: QK^T and AV over half the s x s scores on average.
  w.attention_flops = 2 * tok * static_cast<double>(m.seq_len) * h / t;
  w.attention_bytes = kAct * tok * (2 * h + 2 * kv) / t;  // reads Q, K, V; writes O
  // Norm (read, write), residual add (two reads, a write), rotary on Q and K (read, write).
  w.memory_bytes = kAct * tok * (2 * h + 3 * h + 2 * (h + kv) / t);
  return w;
}

Work mlp_block(const Model& m, const Shard& s) {
  const auto h = static_cast<double>(m.hidden);
  const auto f = static_cast<double>(m.ffn) / s.tp;
  Work w;
  // Tokens this GPU runs through experts: top_k per token, spread evenly over the EP group's
  // experts, i.e. tokens x top_k per GPU whatever its share of experts.
  const double tok = m.moe() ? s.tokens * m.top_k : s.tokens;
  if (m.moe()) gemm(w, s.tokens, h, static_cast<double>(m.experts), kAct);  // router
  // Weights read once per expert held; each runs tok / local_experts tokens.
  const double per_expert = tok / s.local_experts;
  for (int e = 0; e < s.local_experts; ++e) {
    gemm(w, per_expert, h, (m.gated_mlp ? 2 : 1) * f, kAct);  // gate and up (or up)
    gemm(w, per_expert, f, h, kAct);                          // down
  }
  // Norm, residual add, and the activation (gated: reads two, writes one).
  w.memory_bytes = kAct * (s.tokens * (2 * h + 3 * h) + tok * f * (m.gated_mlp ? 3 : 2));
  return w;
}

Work embedding(const Model& m, const Shard& s) {
  Work w;
  w.memory_bytes = kAct * s.tokens * static_cast<double>(m.hidden) * 2;  // gather, write
  return w;
}

Work head(const Model& m, const Shard& s) {
  const auto h = static_cast<double>(m.hidden);
  const auto v = static_cast<double>(m.vocab) / s.tp;
  Work w;
  gemm(w, s.tokens, h, v, kAct);
  // Final norm; the loss reads the logits, writes fp32 softmax and reads it back.
  w.memory_bytes = kAct * s.tokens * 2 * h + s.tokens * v * (kAct + 4 + 4);
  return w;
}

Gpu gpu_for(const fabric::GpuSpec& g, Precision p) {
  double tflops = g.tflops_16bit;
  if (p == Precision::Fp32) tflops = g.tflops_fp32;
  if (p == Precision::Fp8 && g.tflops_fp8 > 0) tflops = g.tflops_fp8;
  return {tflops * 1e12, g.memory_bandwidth.bytes_per_second()};
}

double seconds(const Work& w, const Gpu& gpu, const ComputeParams& c) {
  const double mem = gpu.memory_bandwidth * c.memory_efficiency;
  const double mm =
      std::max(w.matmul_flops / (gpu.peak_flops * c.matmul_efficiency), w.matmul_bytes / mem);
  const double at = std::max(w.attention_flops / (gpu.peak_flops * c.attention_efficiency),
                             w.attention_bytes / mem);
  return mm + at + w.memory_bytes / mem;
}

}  // namespace rocesim::training
