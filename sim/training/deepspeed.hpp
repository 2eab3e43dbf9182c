// DeepSpeed's configuration (ds_config.json), read as DeepSpeed reads it: the keys that decide a
// training step's traffic, memory and precision, with DeepSpeed's defaults
// (deepspeed/runtime/zero/config.py, deepspeed/runtime/config.py). Keys rocesim does not model
// (optimizer and scheduler settings, logging, ...) are kept, by path, in `not_modelled`, as
// DeepSpeed itself ignores keys it does not know; a modelled key with a wrong value is a located
// error in the JSON file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/core/config.hpp"
#include "sim/core/params.hpp"
#include "sim/training/compute.hpp"

namespace rocesim::training {

struct ZeroConfig {
  int stage = 0;
  double reduce_bucket = 5e8;        // elements
  double allgather_bucket = 5e8;     // elements
  std::optional<bool> overlap_comm;  // default: true for stage 3 only
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  bool multi_rank_bucket_allreduce = true;
  double prefetch_bucket = 5e7;        // stage3_prefetch_bucket_size, elements
  double max_live_parameters = 1e9;    // stage3_max_live_parameters
  double persistence_threshold = 1e5;  // stage3_param_persistence_threshold
  double max_reuse_distance = 1e9;     // stage3_max_reuse_distance
  bool quantized_weights = false;      // ZeRO++ qwZ: int8 parameter AllGather
  bool quantized_gradients = false;    // ZeRO++ qgZ: int4 gradient reduction
  int hpz_partition_size = 1;          // ZeRO++ hpZ: secondary weight partition
  bool overlap() const { return overlap_comm.value_or(stage == 3); }
};

struct DsConfig {
  std::optional<int64_t> micro_batch;  // train_micro_batch_size_per_gpu
  std::optional<int64_t> grad_accumulation;
  std::optional<int64_t> train_batch;
  Precision precision = Precision::Fp32;  // bf16 / fp16 `enabled`; DeepSpeed's default fp32
  std::optional<Precision> communication_dtype;
  bool partition_activations = false;  // activation_checkpointing.partition_activations
  ZeroConfig zero;
  std::vector<std::string> not_modelled;  // paths of keys read but not modelled
  SourceLocation where;                   // train_batch_size (or the configuration), for errors
  std::string path = "train_batch_size";  // its path

  /// Micro-batch and accumulation steps for `dp` data-parallel ranks, as DeepSpeed derives them
  /// (train_batch_size = micro x accumulation x dp; any two give the third; one alone: the
  /// others 1 or derived). Throws a located error when they disagree.
  std::pair<int64_t, int64_t> batch(int64_t dp) const;
  /// Bytes per element of gradient communication (communication_data_type, else the precision).
  double grad_comm_bytes() const;
};

const ParamTable& ds_config_table();
/// Its sections' tables (zero_optimization, bf16 / fp16, activation_checkpointing).
std::vector<const ParamTable*> ds_config_subtables();
/// Reads a DeepSpeed configuration (a mapping: a ds_config.json loaded, or written inline).
DsConfig read_ds_config(const ConfigNode& config);

}  // namespace rocesim::training
