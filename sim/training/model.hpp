// A transformer model as training sees it: its shape, its parameter count, the FLOPs and bytes of
// each operation of a layer, and the activations a layer keeps for its backward pass.
//
// The shape is a decoder-only transformer as LLaMA builds it (pre-norm, rotary positions,
// grouped-query attention, a gated or plain MLP), optionally with mixture-of-experts MLPs
// (`experts` of them, each token routed to `top_k`). Parameters per layer:
//   attention  h^2 (Q) + 2 h (kv_heads h / heads) (K, V) + h^2 (O)
//   MLP        (gated ? 3 : 2) h f per expert, x experts; plus a router of h x experts
//   norms      2 h
// and the embedding V h (the output head another V h unless tied), V the vocabulary.
// FLOPs (the PaLM convention, arXiv:2204.02311): a matmul of a (d_in x d_out) weight costs
// 2 d_in d_out per token forward, the attention core 4 s h per token forward (QK^T and AV over
// the sequence s, no causal discount); backward costs twice forward. Model FLOPs per token are
// 6 N_active + 12 L h s; a MoE token runs top_k experts.
#pragma once

#include <cstdint>
#include <string>

#include "sim/core/params.hpp"

namespace rocesim::training {

struct Model {
  std::string name;
  int layers = 0;
  int64_t hidden = 0;  // h
  int heads = 0;
  int kv_heads = 0;
  int64_t ffn = 0;  // f, per expert
  bool gated_mlp = true;
  int64_t vocab = 0;  // V
  int64_t seq_len = 0;
  bool tied_embeddings = false;
  int experts = 1;  // 1: dense
  int top_k = 1;

  bool moe() const { return experts > 1; }
  int64_t head_dim() const { return hidden / heads; }
  int64_t attention_params() const;  // per layer
  int64_t expert_params() const;     // one expert's MLP
  int64_t mlp_params() const;        // all experts (and the router) of one layer
  int64_t norm_params() const { return 2 * hidden; }
  int64_t layer_params() const { return attention_params() + mlp_params() + norm_params(); }
  int64_t embedding_params() const { return vocab * hidden; }
  int64_t head_params() const { return tied_embeddings ? 0 : vocab * hidden; }
  int64_t total_params() const;
  /// Parameters a token runs through (top_k of the experts).
  int64_t active_params() const;
  /// Model FLOPs per token of one training pass (PaLM's 6 N + 12 L h s, N without the embedding
  /// lookup but with the output head).
  double flops_per_token() const;
};

const ParamTable& model_table();
/// Reads a `model:` section; `parameters` (if written) is checked against the shape's count.
Model read_model(const ParamReader& r);

}  // namespace rocesim::training
