#include "sim/training/deepspeed.hpp"

#include <fmt/format.h>

#include <cmath>

#include "sim/core/error.hpp"

namespace rocesim::training {
namespace {

constexpr Param kEnabledParams[] = {
    {.key = "enabled", .type = ParamType::Boolean, .fallback = "false", .help = "use it"},
};
const ParamTable kEnabledTable{"deepspeed bf16 / fp16", "16-bit mixed precision.", kEnabledParams};

constexpr Param kCheckpointingParams[] = {
    {.key = "partition_activations",
     .type = ParamType::Boolean,
     .fallback = "false",
     .help = "checkpointed activations are split across the tensor-parallel ranks"},
};
const ParamTable kCheckpointingTable{
    "deepspeed activation_checkpointing",
    "How checkpointed activations are kept (whether layers are checkpointed is the model "
    "code's choice: the workload's `activation_checkpointing`).",
    kCheckpointingParams};

// Elements are plain numbers in DeepSpeed's files (5e8): Number, checked whole and positive.
constexpr Param kZeroParams[] = {
    {.key = "stage",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "0: data parallel; 1: optimizer states partitioned; 2: and gradients; 3: and "
             "parameters",
     .check = Check::NonNegative,
     .max = 3},
    {.key = "reduce_bucket_size",
     .type = ParamType::Number,
     .fallback = "5e8",
     .help = "elements per gradient reduction",
     .check = Check::Positive},
    {.key = "allgather_bucket_size",
     .type = ParamType::Number,
     .fallback = "5e8",
     .help = "elements per AllGather of updated parameters (stages 1 and 2)",
     .check = Check::Positive},
    {.key = "overlap_comm",
     .type = ParamType::Boolean,
     .help = "reductions on a separate stream, overlapping backward (default: stage 3 only)",
     .optional = true},
    {.key = "contiguous_gradients",
     .type = ParamType::Boolean,
     .fallback = "true",
     .help = "gradients copied into a contiguous buffer (memory; no traffic change)"},
    {.key = "reduce_scatter",
     .type = ParamType::Boolean,
     .fallback = "true",
     .help = "stages 1-2: reduce each bucket to its owners rather than by AllReduce; with "
             "use_multi_rank_bucket_allreduce (default) DeepSpeed still runs one AllReduce per "
             "bucket"},
    {.key = "use_multi_rank_bucket_allreduce",
     .type = ParamType::Boolean,
     .fallback = "true",
     .help = "stages 1-2: one AllReduce per bucket (DeepSpeed's default); false with "
             "reduce_scatter: one ReduceScatter per bucket"},
    {.key = "stage3_prefetch_bucket_size",
     .type = ParamType::Number,
     .fallback = "5e7",
     .help = "stage 3: parameter elements gathered ahead of the compute",
     .check = Check::NonNegative},
    {.key = "stage3_max_live_parameters",
     .type = ParamType::Number,
     .fallback = "1e9",
     .help = "stage 3: gathered parameter elements kept at once (bounds the prefetch)",
     .check = Check::Positive},
    {.key = "stage3_param_persistence_threshold",
     .type = ParamType::Number,
     .fallback = "1e5",
     .help = "stage 3: parameters smaller than this stay whole on every rank (norms)",
     .check = Check::NonNegative},
    {.key = "stage3_max_reuse_distance",
     .type = ParamType::Number,
     .fallback = "1e9",
     .help = "stage 3: a parameter used again within this many gathered elements is kept, not "
             "gathered again",
     .check = Check::NonNegative},
    {.key = "zero_quantized_weights",
     .type = ParamType::Boolean,
     .fallback = "false",
     .help = "ZeRO++ qwZ: parameters gathered in int8 (1 byte per element)"},
    {.key = "zero_quantized_gradients",
     .type = ParamType::Boolean,
     .fallback = "false",
     .help = "ZeRO++ qgZ: gradients reduced in int4 (half a byte per element)"},
    {.key = "zero_hpz_partition_size",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "ZeRO++ hpZ: a secondary copy of the parameters partitioned over this many ranks "
             "(a server), from which backward gathers",
     .check = Check::Positive,
     .max = 1 << 20},
};
const ParamTable kZeroTable{"deepspeed zero_optimization",
                            "ZeRO (deepspeed/runtime/zero/config.py).", kZeroParams};

constexpr Param kDsParams[] = {
    {.key = "train_micro_batch_size_per_gpu",
     .type = ParamType::Integer,
     .help = "samples per GPU per micro-step",
     .check = Check::Positive,
     .optional = true,
     .max = 1 << 24},
    {.key = "gradient_accumulation_steps",
     .type = ParamType::Integer,
     .help = "micro-steps per optimizer step",
     .check = Check::Positive,
     .optional = true,
     .max = 1 << 24},
    {.key = "train_batch_size",
     .type = ParamType::Integer,
     .help = "samples per optimizer step: micro-batch x accumulation x data-parallel ranks",
     .check = Check::Positive,
     .optional = true,
     .max = int64_t{1} << 40},
    {.key = "bf16",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "bf16 mixed precision (`enabled`)",
     .choices = "see deepspeed bf16 / fp16"},
    {.key = "fp16",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "fp16 mixed precision (`enabled`)",
     .choices = "see deepspeed bf16 / fp16"},
    {.key = "communication_data_type",
     .type = ParamType::Choice,
     .help = "gradient communication type (default: the training precision)",
     .choices = "fp32|fp16|bf16",
     .optional = true},
    {.key = "zero_optimization",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "ZeRO settings",
     .choices = "see deepspeed zero_optimization"},
    {.key = "activation_checkpointing",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "how checkpointed activations are kept",
     .choices = "see deepspeed activation_checkpointing"},
};
const ParamTable kDsTable{
    "deepspeed",
    "A DeepSpeed configuration (ds_config.json or a mapping): the keys rocesim models. Other "
    "keys are listed as not modelled.",
    kDsParams};

/// `node` without the keys `table` does not know, which go to `unknown` (recursively into the
/// table's sections that `sub` names).
ConfigNode known_keys(const ConfigNode& node, const ParamTable& table,
                      std::vector<std::string>& unknown) {
  if (!node.is_map()) return node;
  ConfigNode out = ConfigNode::map(node.where(), node.path());
  for (const auto& e : node.entries()) {
    const Param* p = table.find(e.key);
    if (p == nullptr) {
      unknown.push_back(e.value.path());
      continue;
    }
    if (p->type == ParamType::Section) {
      const ParamTable* sub = e.key == "zero_optimization"          ? &kZeroTable
                              : e.key == "activation_checkpointing" ? &kCheckpointingTable
                                                                    : &kEnabledTable;
      out.set(e.key, e.key_where, known_keys(e.value, *sub, unknown));
    } else {
      if (e.value.is_scalar() && e.value.value() == "auto") {
        throw InputError(e.value.where(), e.value.path(),
                         "a plain value (Hugging Face's Trainer replaces 'auto' before "
                         "DeepSpeed reads the file)",
                         "'auto'");
      }
      out.set(e.key, e.key_where, e.value);
    }
  }
  return out;
}

double whole_elements(const ParamReader& r, std::string_view key) {
  const double v = r.number(key);
  if (v != std::floor(v) || v > 1e15)
    r.fail(key, "a whole number of elements", fmt::format("{}", v));
  return v;
}

}  // namespace

const ParamTable& ds_config_table() {
  return kDsTable;
}
std::vector<const ParamTable*> ds_config_subtables() {
  return {&kZeroTable, &kEnabledTable, &kCheckpointingTable};
}

DsConfig read_ds_config(const ConfigNode& config) {
  DsConfig ds;
  ds.where = config.where();
  const ConfigNode known = known_keys(config, kDsTable, ds.not_modelled);
  // Keys as the configuration names them, without the scenario path it sits at.
  const std::string prefix = config.path().empty() ? "" : config.path() + ".";
  for (std::string& key : ds.not_modelled) {
    if (key.starts_with(prefix)) key.erase(0, prefix.size());
  }
  const ParamReader r(known, kDsTable);
  if (r.has("train_micro_batch_size_per_gpu")) {
    ds.micro_batch = r.integer("train_micro_batch_size_per_gpu");
  }
  if (r.has("gradient_accumulation_steps")) {
    ds.grad_accumulation = r.integer("gradient_accumulation_steps");
  }
  if (r.has("train_batch_size")) {
    ds.train_batch = r.integer("train_batch_size");
    ds.where = r.where("train_batch_size");
    ds.path = r.path("train_batch_size");
  }
  const bool bf16 = r.section("bf16", kEnabledTable).boolean("enabled");
  const bool fp16 = r.section("fp16", kEnabledTable).boolean("enabled");
  if (bf16 && fp16) r.fail("fp16", "bf16 or fp16 enabled, not both", "both enabled");
  ds.precision = bf16 ? Precision::Bf16 : fp16 ? Precision::Fp16 : Precision::Fp32;
  if (r.has("communication_data_type")) {
    const std::string c = r.choice("communication_data_type");
    ds.communication_dtype = c == "fp32"   ? Precision::Fp32
                             : c == "fp16" ? Precision::Fp16
                                           : Precision::Bf16;
  }
  ds.partition_activations =
      r.section("activation_checkpointing", kCheckpointingTable).boolean("partition_activations");
  const ParamReader z = r.section("zero_optimization", kZeroTable);
  ZeroConfig& zc = ds.zero;
  zc.stage = z.integer_as<int>("stage");
  zc.reduce_bucket = whole_elements(z, "reduce_bucket_size");
  zc.allgather_bucket = whole_elements(z, "allgather_bucket_size");
  if (z.has("overlap_comm")) zc.overlap_comm = z.boolean("overlap_comm");
  zc.contiguous_gradients = z.boolean("contiguous_gradients");
  zc.reduce_scatter = z.boolean("reduce_scatter");
  zc.multi_rank_bucket_allreduce = z.boolean("use_multi_rank_bucket_allreduce");
  zc.prefetch_bucket = whole_elements(z, "stage3_prefetch_bucket_size");
  zc.max_live_parameters = whole_elements(z, "stage3_max_live_parameters");
  zc.persistence_threshold = whole_elements(z, "stage3_param_persistence_threshold");
  zc.max_reuse_distance = whole_elements(z, "stage3_max_reuse_distance");
  zc.quantized_weights = z.boolean("zero_quantized_weights");
  zc.quantized_gradients = z.boolean("zero_quantized_gradients");
  zc.hpz_partition_size = z.integer_as<int>("zero_hpz_partition_size");
  if (zc.stage != 3) {
    for (std::string_view key : {"zero_quantized_weights", "zero_hpz_partition_size"}) {
      if (z.has(key) &&
          (key == "zero_quantized_weights" ? zc.quantized_weights : zc.hpz_partition_size != 1)) {
        z.fail(key, "stage 3 (ZeRO++ qwZ and hpZ partition parameters)",
               fmt::format("stage {}", zc.stage));
      }
    }
  }
  return ds;
}

std::pair<int64_t, int64_t> DsConfig::batch(int64_t dp) const {
  int64_t micro = micro_batch.value_or(0);
  int64_t ga = grad_accumulation.value_or(0);
  const auto fail = [&](const std::string& found) {
    throw InputError(where, path,
                     fmt::format("train_batch_size = train_micro_batch_size_per_gpu x "
                                 "gradient_accumulation_steps x {} data-parallel ranks",
                                 dp),
                     found);
  };
  if (train_batch) {
    const int64_t tb = *train_batch;
    if (micro == 0 && ga == 0) ga = 1;
    if (micro == 0) {
      if (tb % (ga * dp) != 0) fail(fmt::format("{} (not a multiple of {})", tb, ga * dp));
      micro = tb / (ga * dp);
    } else if (ga == 0) {
      if (tb % (micro * dp) != 0) fail(fmt::format("{} (not a multiple of {})", tb, micro * dp));
      ga = tb / (micro * dp);
    }
    if (micro * ga * dp != tb) {
      fail(fmt::format("{} with micro-batch {} and {} accumulation steps", tb, micro, ga));
    }
  }
  return {micro == 0 ? 1 : micro, ga == 0 ? 1 : ga};
}

double DsConfig::grad_comm_bytes() const {
  const Precision p = communication_dtype.value_or(precision);
  return p == Precision::Fp32 ? 4 : 2;
}

}  // namespace rocesim::training
