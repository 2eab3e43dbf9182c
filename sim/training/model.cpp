#include "sim/training/model.hpp"

#include <fmt/format.h>

#include <cmath>

namespace rocesim::training {
namespace {

constexpr Param kModelParams[] = {
    {.key = "name",
     .type = ParamType::String,
     .help = "the model's name, for the summary",
     .optional = true},
    {.key = "parameters",
     .type = ParamType::Number,
     .help = "parameter count (e.g. 8e9). Alone, it sets a LLaMA-like shape: gated MLP of "
             "f = 8h/3, hidden = 128 x layers (h / L of LLaMA 3 8B), heads of 128; with a "
             "shape written, the shape's count must be within 10 % of it",
     .check = Check::Positive,
     .optional = true},
    {.key = "layers",
     .type = ParamType::Integer,
     .help = "transformer layers L",
     .check = Check::Positive,
     .optional = true,
     .max = 100000},
    {.key = "hidden_size",
     .type = ParamType::Integer,
     .help = "hidden size h",
     .check = Check::Positive,
     .optional = true,
     .max = 1 << 20},
    {.key = "heads",
     .type = ParamType::Integer,
     .help = "attention heads (default: h / 128)",
     .check = Check::Positive,
     .optional = true,
     .max = 1 << 16},
    {.key = "kv_heads",
     .type = ParamType::Integer,
     .help = "key/value heads, grouped-query attention (default: heads)",
     .check = Check::Positive,
     .optional = true,
     .max = 1 << 16},
    {.key = "ffn_size",
     .type = ParamType::Integer,
     .help = "MLP inner size f, per expert (default: 8h/3 gated, 4h plain, rounded up to 256)",
     .check = Check::Positive,
     .optional = true,
     .max = 1 << 24},
    {.key = "mlp",
     .type = ParamType::Choice,
     .fallback = "gated",
     .help = "gated (SwiGLU: 3 matrices of h x f, LLaMA) or plain (2 matrices, GPT)",
     .choices = "gated|plain"},
    {.key = "vocab_size",
     .type = ParamType::Integer,
     .fallback = "32000",
     .help = "vocabulary V",
     .check = Check::Positive,
     .max = 1 << 24},
    {.key = "seq_len",
     .type = ParamType::Integer,
     .help = "sequence length s of a sample, in tokens",
     .check = Check::Positive,
     .max = 1 << 24},
    {.key = "tied_embeddings",
     .type = ParamType::Boolean,
     .fallback = "false",
     .help = "the output head shares the embedding's weights"},
    {.key = "experts",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "MLP experts per layer (1: dense; mixture of experts above)",
     .check = Check::Positive,
     .max = 1 << 16},
    {.key = "top_k",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "experts each token is routed to",
     .check = Check::Positive,
     .max = 1 << 16},
};

int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

}  // namespace

const ParamTable& model_table() {
  static const ParamTable table{
      "model",
      "A decoder-only transformer (LLaMA-style; docs/models/training.md): its shape, or a "
      "parameter count.",
      kModelParams};
  return table;
}

int64_t Model::attention_params() const {
  return 2 * hidden * hidden + 2 * hidden * head_dim() * kv_heads;
}
int64_t Model::expert_params() const {
  return (gated_mlp ? 3 : 2) * hidden * ffn;
}
int64_t Model::mlp_params() const {
  return experts * expert_params() + (moe() ? hidden * experts : 0);
}
int64_t Model::total_params() const {
  return layers * layer_params() + embedding_params() + head_params();
}
int64_t Model::active_params() const {
  return total_params() - layers * (experts - top_k) * expert_params();
}
double Model::flops_per_token() const {
  // The embedding lookup is no matmul; the head is one, tied or not.
  const double n =
      static_cast<double>(active_params() - embedding_params() - head_params() + vocab * hidden);
  return 6 * n + 12.0 * layers * static_cast<double>(hidden) * static_cast<double>(seq_len);
}

Model read_model(const ParamReader& r) {
  Model m;
  if (r.has("name")) m.name = r.string("name");
  m.gated_mlp = r.choice("mlp") == "gated";
  m.vocab = r.integer("vocab_size");
  m.seq_len = r.integer("seq_len");
  m.tied_embeddings = r.boolean("tied_embeddings");
  m.experts = r.integer_as<int>("experts");
  m.top_k = r.integer_as<int>("top_k");
  if (m.top_k > m.experts) {
    r.fail("top_k", fmt::format("at most experts ({})", m.experts), std::to_string(m.top_k));
  }
  const bool shape = r.has("layers") || r.has("hidden_size");
  if (!shape && !r.has("parameters")) {
    r.fail("layers", "a shape (layers and hidden_size) or a parameter count (parameters)",
           "neither");
  }
  if (shape) {
    if (!r.has("layers")) r.fail("layers", "layers with hidden_size", "none");
    if (!r.has("hidden_size")) r.fail("hidden_size", "hidden_size with layers", "none");
    m.layers = r.integer_as<int>("layers");
    m.hidden = r.integer("hidden_size");
  } else {
    // N ~ L (12 h^2) + 2 V h with h = 128 L (gated MLP of 8h/3: 4 h^2 + 8 h^2 per layer).
    const double n = r.number("parameters");
    const double per_layer_cube = 12.0 * 128 * 128;
    double layers = std::cbrt(n / per_layer_cube);
    for (int i = 0; i < 50; ++i) {  // fixed point with the embeddings
      const double h = 128 * layers;
      layers =
          std::cbrt(std::max(1.0, n - 2.0 * static_cast<double>(m.vocab) * h) / per_layer_cube);
    }
    m.layers = std::max(1, static_cast<int>(std::lround(layers)));
    m.hidden = 128 * static_cast<int64_t>(m.layers);
  }
  m.heads = r.has("heads") ? r.integer_as<int>("heads")
                           : static_cast<int>(std::max<int64_t>(1, m.hidden / 128));
  if (m.hidden % m.heads != 0) {
    r.fail("heads", fmt::format("a divisor of hidden_size ({})", m.hidden),
           std::to_string(m.heads));
  }
  m.kv_heads = r.has("kv_heads") ? r.integer_as<int>("kv_heads") : m.heads;
  if (m.heads % m.kv_heads != 0) {
    r.fail("kv_heads", fmt::format("a divisor of heads ({})", m.heads), std::to_string(m.kv_heads));
  }
  m.ffn = r.has("ffn_size") ? r.integer("ffn_size")
                            : round_up(m.gated_mlp ? (8 * m.hidden + 2) / 3 : 4 * m.hidden, 256);
  if (shape && r.has("parameters")) {
    const double want = r.number("parameters");
    const auto got = static_cast<double>(m.total_params());
    if (std::abs(got - want) > 0.1 * want) {
      r.fail("parameters",
             fmt::format("within 10 % of the shape's {:.4g} parameters (or no shape)", got),
             fmt::format("{:.4g}", want));
    }
  }
  return m;
}

}  // namespace rocesim::training
