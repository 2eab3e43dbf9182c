#include "sim/training/training.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <span>

#include "sim/core/error.hpp"
#include "sim/core/memory.hpp"
#include "sim/core/rng.hpp"
#include "sim/training/program.hpp"

namespace rocesim::training {

using collectives::nccl::Collective;
using collectives::nccl::NcclConfig;

namespace {

constexpr Param kStragglerParams[] = {
    {.key = "ranks",
     .type = ParamType::Any,
     .help = "the slowed ranks (of the workload's ranks): a rank, a range, a list, or GPU "
             "names (a server's GPUs slow the server)",
     .choices = "GPU selection"},
    {.key = "slowdown",
     .type = ParamType::Number,
     .help = "factor on their compute time (1.5: 50 % slower)",
     .check = Check::Positive},
};
const ParamTable kStragglerTable{"straggler",
                                 "GPUs that compute slower than the others (a failing GPU, a "
                                 "throttled server). A slow link is a link event (events).",
                                 kStragglerParams};

constexpr Param kTrainingParams[] = {
    engine::kWorkloadTypeParam,
    engine::kWorkloadNameParam,
    engine::kWorkloadStartParam,
    engine::kWorkloadAfterParam,
    engine::kWorkloadJobParam,
    {.key = "ranks",
     .type = ParamType::Any,
     .fallback = "all",
     .help = "the job's ranks that train, in rank order",
     .choices = "GPU selection"},
    {.key = "model",
     .type = ParamType::Any,
     .help = "the model: a mapping (see model) or the path of a model file (workloads/*.yaml, "
             "relative to the scenario), whose root is the mapping or has one `model` key",
     .choices = "model mapping or file name"},
    {.key = "deepspeed",
     .type = ParamType::Any,
     .fallback = "{}",
     .help = "DeepSpeed's configuration: the path of a ds_config.json (relative to the "
             "scenario), or a mapping of its keys, which may name a `file` whose keys it "
             "overrides (see deepspeed)",
     .choices = "file name or mapping"},
    {.key = "tensor_parallel",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "tensor-parallel ranks TP (Megatron-style: 2 AllReduces per layer and pass)",
     .check = Check::Positive,
     .max = 1 << 16},
    {.key = "pipeline_parallel",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "pipeline stages PP (1F1B schedule; ZeRO stage 0 or 1, as DeepSpeed's pipeline "
             "engine allows)",
     .check = Check::Positive,
     .max = 1 << 16},
    {.key = "expert_parallel",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "expert-parallel ranks EP, within the data-parallel group (MoE: AlltoAll of the "
             "tokens before and after the experts); divides DP and experts",
     .check = Check::Positive,
     .max = 1 << 16},
    {.key = "expert_imbalance",
     .type = ParamType::Number,
     .fallback = "0",
     .help = "the router's load imbalance, in [0, 1): each expert-parallel pair's tokens are "
             "uniform in mean x [1 - u, 1 + u], a new draw per AlltoAll (an NCCL AlltoAllv; "
             "0: a balanced AlltoAll). Exact max-min re-shares at each unequal pair's end: on "
             "large EP groups see network.reshare_delay",
     .check = Check::NonNegative},
    {.key = "data_parallel",
     .type = ParamType::Integer,
     .help = "data-parallel ranks DP (default: ranks / (TP x PP)); a check",
     .check = Check::Positive,
     .optional = true,
     .max = 1 << 24},
    {.key = "activation_checkpointing",
     .type = ParamType::Choice,
     .fallback = "none",
     .help = "none, or full: each layer keeps its input and recomputes its forward pass in "
             "backward",
     .choices = "none|full"},
    {.key = "attention",
     .type = ParamType::Choice,
     .fallback = "flash",
     .help = "flash: a fused kernel that keeps no attention scores; eager: scores and softmax "
             "kept for backward (memory)",
     .choices = "flash|eager"},
    {.key = "steps",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "optimizer steps simulated; the figures are per step",
     .check = Check::Positive,
     .max = 100000},
    {.key = "compute",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "the compute model's efficiencies",
     .choices = "see compute"},
    {.key = "memory",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "the memory model's allowances",
     .choices = "see memory"},
    {.key = "stragglers",
     .type = ParamType::List,
     .help = "slow GPUs",
     .choices = "straggler",
     .optional = true},
    {.key = "trace_ranks",
     .type = ParamType::Any,
     .fallback = "0-0",
     .help = "ranks whose streams the timeline trace (--trace) shows",
     .choices = "GPU selection"},
    {.key = "nccl",
     .type = ParamType::Section,
     .help = "NCCL settings for this workload, over the scenario's",
     .choices = "see nccl",
     .optional = true},
};

double act_bytes(Precision p) {
  return p == Precision::Fp32 ? 4 : 2;
}
double weight_bytes(Precision p) {
  return p == Precision::Fp32 ? 4 : 2;
}

/// A piece of a stage whose parameters are gathered and reduced together: the embedding, a
/// layer's attention or MLP, the head.
struct Block {
  double params = 0;  // elements this GPU holds (after TP)
  double gather = 0;  // stage 3: elements gathered (less those that persist)
  bool expert = false;
  bool tensor = false;  // an AllReduce over TP after it (forward and backward)
  bool alltoall = false;
  double fwd = 0, bwd = 0;  // seconds
};

struct StageParams {
  double dense = 0, expert = 0, largest_gather = 0;
};

}  // namespace

const ParamTable kTrainingWorkloadTable{
    "workload (type: training)",
    "Optimizer steps of a DeepSpeed ZeRO job with DP x TP x PP (x EP) parallelism: compute and "
    "collectives per rank and stream (docs/models/training.md).",
    kTrainingParams};

const ParamTable& straggler_table() {
  return kStragglerTable;
}

std::vector<const ParamTable*> training_subtables() {
  std::vector<const ParamTable*> t{&model_table(), &compute_table(), &memory_table(),
                                   &kStragglerTable, &ds_config_table()};
  for (const ParamTable* s : ds_config_subtables())
    t.push_back(s);
  return t;
}

int TrainingSetup::stage_layers(int stage) const {
  return model.layers / pp + (stage < model.layers % pp ? 1 : 0);
}

namespace {

Shard shard_of(const TrainingSetup& s, int64_t micro_batch) {
  Shard sh;
  sh.tp = s.tp;
  sh.tokens = static_cast<double>(micro_batch) * static_cast<double>(s.model.seq_len);
  sh.local_experts = s.model.experts / s.ep;
  return sh;
}

std::vector<Block> stage_blocks(const TrainingSetup& s, int stage, int64_t micro_batch) {
  const Model& m = s.model;
  const Shard sh = shard_of(s, micro_batch);
  const Gpu gpu = gpu_for(s.gpu, s.ds.precision);
  const double t = s.tp;
  const double persist = s.ds.zero.persistence_threshold;
  const auto gathered = [&](double params) { return params < persist ? 0.0 : params; };
  const auto timed = [&](Block b, const Work& w) {
    b.fwd = seconds(w, gpu, s.compute);
    b.bwd = seconds(w.scaled(2), gpu, s.compute);
    return b;
  };
  std::vector<Block> out;
  if (stage == 0) {
    Block b;
    b.params = static_cast<double>(m.embedding_params()) / t;
    b.gather = gathered(b.params);
    out.push_back(timed(b, embedding(m, sh)));
  }
  const auto h = static_cast<double>(m.hidden);
  for (int l = 0; l < s.stage_layers(stage); ++l) {
    Block a;
    // Norms (2 h) stay whole below the persistence threshold; the router goes with attention.
    a.params = static_cast<double>(m.attention_params()) / t +
               static_cast<double>(m.norm_params()) + (m.moe() ? h * m.experts : 0);
    a.gather = gathered(static_cast<double>(m.attention_params()) / t) +
               gathered(m.moe() ? h * m.experts : 0);
    a.tensor = s.tp > 1;
    out.push_back(timed(a, attention_block(m, sh)));
    Block f;
    f.expert = m.moe();
    f.params = static_cast<double>(m.expert_params()) / t * sh.local_experts;
    f.gather = gathered(f.params);
    f.tensor = s.tp > 1;
    f.alltoall = m.moe() && s.ep > 1;
    out.push_back(timed(f, mlp_block(m, sh)));
  }
  if (stage == s.pp - 1) {
    Block b;
    // A tied head with one stage uses the embedding's weights (gathered again); with several,
    // the last stage keeps its own copy, as Megatron does.
    b.params = static_cast<double>(m.tied_embeddings && s.pp == 1 ? 0 : m.embedding_params()) / t;
    b.gather = gathered(static_cast<double>(m.embedding_params()) / t);
    out.push_back(timed(b, head(m, sh)));
  }
  return out;
}

StageParams stage_params(const std::vector<Block>& blocks) {
  StageParams p;
  for (const Block& b : blocks) {
    (b.expert ? p.expert : p.dense) += b.params;
    p.largest_gather = std::max(p.largest_gather, b.gather);
  }
  return p;
}

}  // namespace

MemoryBreakdown TrainingSetup::memory(int stage, int64_t mb) const {
  const std::vector<Block> blocks = stage_blocks(*this, stage, mb);
  const StageParams sp = stage_params(blocks);
  const ZeroConfig& z = ds.zero;
  MemoryInput in;
  in.params = sp.dense + sp.expert;
  in.expert_params = sp.expert;
  in.dp = dp;
  in.expert_dp = dp / ep;
  in.stage = z.stage;
  in.precision = ds.precision;
  if (z.stage == 3) {
    in.live_gathered = std::min(z.max_live_parameters, z.prefetch_bucket + sp.largest_gather);
    if (z.hpz_partition_size > 1) in.hpz_share = sp.dense / z.hpz_partition_size;
  }
  in.model = &model;
  in.tp = tp;
  in.micro_batch = mb;
  in.layers = stage_layers(stage);
  in.micro_batches_live = static_cast<int>(std::min<int64_t>(pp - stage, grad_accumulation));
  in.checkpointing = checkpointing;
  in.flash_attention = flash_attention;
  in.partition_activations = ds.partition_activations;
  in.holds_head = stage == pp - 1;
  // Buckets, at most the stage's parameters (DeepSpeed sizes its flat buffers so).
  const double total = in.params;
  const double reduce = std::min(z.reduce_bucket, total) * ds.grad_comm_bytes();
  if (z.stage == 0) {
    in.buffers = reduce;
  } else if (z.stage <= 2) {
    in.buffers = reduce + std::min(z.allgather_bucket, total) * weight_bytes(ds.precision);
  } else {
    in.buffers = reduce + std::min(z.prefetch_bucket, total) * weight_bytes(ds.precision);
  }
  return memory_per_gpu(in, memory_params);
}

std::pair<int, MemoryBreakdown> TrainingSetup::peak_memory(int64_t mb) const {
  std::pair<int, MemoryBreakdown> best{0, memory(0, mb)};
  for (int st = 1; st < pp; ++st) {
    MemoryBreakdown m = memory(st, mb);
    if (m.total() > best.second.total()) best = {st, std::move(m)};
  }
  return best;
}

int64_t TrainingSetup::max_micro_batch() const {
  const auto capacity = static_cast<double>(gpu.memory.count());
  const auto fits = [&](int64_t mb) { return peak_memory(mb).second.total() <= capacity; };
  if (!fits(1)) return 0;
  int64_t lo = 1, hi = 2;
  while (hi <= (int64_t{1} << 24) && fits(hi)) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

namespace {

// Instructions per micro-step apart from the blocks (pipeline sends and receives, the waits
// that end a backward pass, the final bucket flushes), and per step (the optimizer).
constexpr double kInstrPerMicroStep = 8;
constexpr double kInstrPerStep = 2;

}  // namespace

double program_instructions_bound(const TrainingSetup& s, int stage) {
  const std::vector<Block> blocks = stage_blocks(s, stage, s.micro_batch);
  const ZeroConfig& z = s.ds.zero;
  const double passes = s.checkpointing == Checkpointing::Full ? 3 : 2;  // fwd, (recompute), bwd
  // Per micro-step, as StageBuilder adds them: each pass of a block is its compute with its
  // tensor-parallel AllReduce and two expert AlltoAlls; ZeRO-3 gathers a block for each of its
  // two uses (a wait, the AllGather, the compute's wait); a block's gradients close at most one
  // bucket (its reduction and the wait before it).
  double per_micro = kInstrPerMicroStep;
  for (const Block& b : blocks) {
    per_micro += passes * (1 + (b.tensor ? 1 : 0) + (b.alltoall ? 2 : 0)) +
                 (z.stage == 3 && b.gather > 0 ? 6 : 0) + 2;
  }
  // ZeRO 1 and 2 gather the updated parameters in allgather_bucket_size chunks every step; stage
  // 0 and pipelined stage 1 reduce every block's gradients after the last micro-step.
  double per_step = kInstrPerStep + 2 * static_cast<double>(blocks.size()) + 2;
  if (z.stage == 1 || z.stage == 2) {
    const StageParams sp = stage_params(blocks);
    per_step +=
        std::ceil(sp.dense / z.allgather_bucket) + std::ceil(sp.expert / z.allgather_bucket);
  }
  return static_cast<double>(s.steps) *
         (static_cast<double>(s.grad_accumulation) * per_micro + per_step);
}

namespace {

/// Builds the program of one pipeline stage.
class StageBuilder {
 public:
  StageBuilder(const TrainingSetup& s, int stage)
      : s_(s), stage_(stage), blocks_(stage_blocks(s, stage, s.micro_batch)) {
    const Model& m = s.model;
    const double tokens = static_cast<double>(s.micro_batch) * static_cast<double>(m.seq_len);
    const double act = act_bytes(s.ds.precision);
    tensor_bytes_ =
        std::max<int64_t>(1, std::llround(tokens * static_cast<double>(m.hidden) * act));
    alltoall_bytes_ = std::max<int64_t>(
        1, std::llround(tokens * m.top_k * static_cast<double>(m.hidden) * act / s.tp));
    p2p_bytes_ =
        std::max<int64_t>(1, std::llround(tokens * static_cast<double>(m.hidden) * act / s.tp));
    const ZeroConfig& z = s.ds.zero;
    grad_bytes_ = z.quantized_gradients && z.stage == 3 ? 0.5 : s.ds.grad_comm_bytes();
    param_bytes_ = z.quantized_weights ? 1 : weight_bytes(s.ds.precision);
    grad_op_ = z.stage == 3 ? Collective::ReduceScatter
               : z.stage >= 1 && z.reduce_scatter && !z.multi_rank_bucket_allreduce
                   ? Collective::ReduceScatter
                   : Collective::AllReduce;
  }

  Program build() {
    const int64_t micro = s_.grad_accumulation;
    const int warm = static_cast<int>(std::min<int64_t>(s_.pp - stage_ - 1, micro));
    const ZeroConfig& z = s_.ds.zero;
    plan_gathers();
    for (int step = 0; step < s_.steps; ++step) {
      int64_t f = 0, b = 0;
      for (; f < warm; ++f)
        forward();
      while (b < micro) {
        if (f < micro) forward(), ++f;
        const bool last = b == micro - 1;
        const bool during = z.stage >= 2 || (z.stage == 1 && s_.pp == 1 && last);
        backward(during);
        ++b;
      }
      if (z.stage == 0 || (z.stage == 1 && s_.pp > 1)) reduce_all();
      optimizer();
    }
    return std::move(p_);
  }

 private:
  Instr compute(Purpose p, double seconds) const {
    Instr i;
    i.kind = Instr::Kind::Compute;
    i.purpose = p;
    i.seconds = seconds;
    return i;
  }
  static Instr collective(Purpose p, Family fam, Collective op, double bytes) {
    Instr i;
    i.kind = Instr::Kind::Collective;
    i.purpose = p;
    i.family = fam;
    i.op = op;
    i.bytes = std::max<int64_t>(1, std::llround(bytes));
    return i;
  }
  static Instr wait(Stream s, uint32_t count) {
    Instr i;
    i.kind = Instr::Kind::Wait;
    i.stream = s;
    i.count = count;
    return i;
  }
  static Instr p2p(Instr::Kind k, uint8_t peer, int64_t bytes) {
    Instr i;
    i.kind = k;
    i.purpose = Purpose::Pipeline;
    i.peer = peer;
    i.bytes = bytes;
    return i;
  }
  int dp_size(bool expert) const { return expert ? s_.dp / s_.ep : s_.dp; }
  Family dp_family(bool expert) const { return expert ? Family::ExpertDp : Family::Dp; }

  // ZeRO-3: which uses of a block gather it, and how far ahead (the prefetch window).
  void plan_gathers() {
    if (s_.ds.zero.stage != 3) return;
    const ZeroConfig& z = s_.ds.zero;
    const size_t n = blocks_.size();
    // One step's uses: per micro-step, forward in order and backward in reverse.
    std::vector<size_t>& uses = use_block_;  // the block of each use
    for (int step = 0; step < s_.steps; ++step) {
      for (int64_t k = 0; k < s_.grad_accumulation; ++k) {
        for (size_t i = 0; i < n; ++i)
          uses.push_back(i);
        for (size_t i = n; i-- > 0;)
          uses.push_back(i);
      }
    }
    gathers_.assign(uses.size(), false);
    prefetch_from_.assign(uses.size(), 0);
    std::vector<int64_t> last(n, -1);
    std::vector<double> prefix(uses.size() + 1, 0);
    const double keep = std::min(z.max_reuse_distance, z.max_live_parameters);
    for (size_t q = 0; q < uses.size(); ++q) {
      const Block& b = blocks_[uses[q]];
      prefix[q + 1] = prefix[q] + b.gather;
      const int64_t prev = last[uses[q]];
      // Still live from its last use when what was gathered since fits the reuse distance.
      gathers_[q] = b.gather > 0 && dp_size(b.expert) > 1 &&
                    (prev < 0 || prefix[q] - prefix[static_cast<size_t>(prev) + 1] > keep);
      last[uses[q]] = static_cast<int64_t>(q);
    }
    // Use q's gather is issued when the compute begins use m(q), the first use such that the
    // gathers after it up to q fit the prefetch bucket (and the live-parameter bound).
    const double window = std::min(z.prefetch_bucket, z.max_live_parameters);
    size_t m = 0;
    double ahead = 0;  // gathered elements of uses m+1..q
    for (size_t q = 0; q < uses.size(); ++q) {
      if (q > m && gathers_[q]) ahead += blocks_[uses[q]].gather;
      while (m < q && ahead > window) {
        ++m;
        if (gathers_[m]) ahead -= blocks_[uses[m]].gather;
      }
      prefetch_from_[q] = m;
    }
  }

  // The gather of use q (ZeRO-3), then its compute waits for it.
  void gather_for_use(bool backward) {
    if (s_.ds.zero.stage != 3) return;
    const size_t q = use_++;
    use_begin_.push_back(p_.size(kCompute));
    if (!gathers_[q]) return;
    const Block& b = blocks_[use_block_[q]];
    const ZeroConfig& z = s_.ds.zero;
    Family fam = dp_family(b.expert);
    if (backward && !b.expert && z.hpz_partition_size > 1) fam = Family::Hpz;
    p_.add(kGather, wait(kCompute, use_begin_[prefetch_from_[q]]));
    const uint32_t done = p_.add(
        kGather,
        collective(Purpose::Parameters, fam, Collective::AllGather, b.gather * param_bytes_));
    p_.add(kCompute, wait(kGather, done));
  }

  void forward() {
    if (stage_ > 0) p_.add(kCompute, p2p(Instr::Kind::Recv, 0, p2p_bytes_));
    for (const Block& b : blocks_) {
      gather_for_use(false);
      run_block(b, Purpose::Forward, b.fwd);
    }
    if (stage_ < s_.pp - 1) p_.add(kCompute, p2p(Instr::Kind::Send, 0, p2p_bytes_));
  }

  void run_block(const Block& b, Purpose p, double seconds) {
    // The tokens to the experts and back: balanced, or as the router spreads them.
    const Collective tokens =
        s_.expert_imbalance > 0 ? Collective::AllToAllv : Collective::AllToAll;
    if (b.alltoall) {
      p_.add(kCompute, collective(Purpose::Experts, Family::Ep, tokens,
                                  static_cast<double>(alltoall_bytes_)));
    }
    p_.add(kCompute, compute(p, seconds));
    if (b.alltoall) {
      p_.add(kCompute, collective(Purpose::Experts, Family::Ep, tokens,
                                  static_cast<double>(alltoall_bytes_)));
    }
    if (b.tensor) {
      p_.add(kCompute, collective(Purpose::Tensor, Family::Tp, Collective::AllReduce,
                                  static_cast<double>(tensor_bytes_)));
    }
  }

  void backward(bool reduce) {
    if (stage_ < s_.pp - 1) p_.add(kCompute, p2p(Instr::Kind::Recv, 1, p2p_bytes_));
    const bool overlap = s_.ds.zero.overlap() && s_.ds.zero.stage >= 1;
    for (size_t i = blocks_.size(); i-- > 0;) {
      const Block& b = blocks_[i];
      gather_for_use(true);
      if (s_.checkpointing == Checkpointing::Full) run_block(b, Purpose::Recompute, b.fwd);
      run_block(b, Purpose::Backward, b.bwd);
      if (reduce) add_gradients(b, overlap);
    }
    if (reduce) {
      flush(false, overlap);
      flush(true, overlap);
      if (overlap) p_.add(kCompute, wait(kReduce, p_.size(kReduce)));
    }
    if (stage_ > 0) p_.add(kCompute, p2p(Instr::Kind::Send, 1, p2p_bytes_));
  }

  void add_gradients(const Block& b, bool overlap) {
    if (dp_size(b.expert) < 2) return;
    double& pending = pending_[b.expert ? 1 : 0];
    pending += b.params;
    if (pending >= s_.ds.zero.reduce_bucket) flush(b.expert, overlap);
  }

  void flush(bool expert, bool overlap) {
    double& pending = pending_[expert ? 1 : 0];
    if (pending <= 0) return;
    const Instr c =
        collective(Purpose::Gradients, dp_family(expert), grad_op_, pending * grad_bytes_);
    pending = 0;
    if (overlap) {
      p_.add(kReduce, wait(kCompute, p_.size(kCompute)));
      p_.add(kReduce, c);
    } else {
      p_.add(kCompute, c);
    }
  }

  void reduce_all() {
    for (size_t i = blocks_.size(); i-- > 0;)
      add_gradients(blocks_[i], false);
    flush(false, false);
    flush(true, false);
  }

  void optimizer() {
    const ZeroConfig& z = s_.ds.zero;
    const StageParams sp = stage_params(blocks_);
    const double part =
        z.stage >= 1 ? sp.dense / s_.dp + sp.expert / (s_.dp / s_.ep) : sp.dense + sp.expert;
    const Gpu gpu = gpu_for(s_.gpu, s_.ds.precision);
    p_.add(kCompute,
           compute(Purpose::Optimizer, part * s_.compute.optimizer_bytes_per_param /
                                           (gpu.memory_bandwidth * s_.compute.memory_efficiency)));
    if (z.stage == 1 || z.stage == 2) {
      for (const bool expert : {false, true}) {
        const double total = expert ? sp.expert : sp.dense;
        if (total <= 0 || dp_size(expert) < 2) continue;
        for (double done = 0; done < total; done += z.allgather_bucket) {
          const double chunk = std::min(z.allgather_bucket, total - done);
          p_.add(kCompute, collective(Purpose::Parameters, dp_family(expert), Collective::AllGather,
                                      chunk * param_bytes_));
        }
      }
    }
  }

  const TrainingSetup& s_;
  int stage_;
  std::vector<Block> blocks_;
  Program p_;
  int64_t tensor_bytes_ = 0, alltoall_bytes_ = 0, p2p_bytes_ = 0;
  double grad_bytes_ = 2, param_bytes_ = 2;
  Collective grad_op_ = Collective::AllReduce;
  double pending_[2] = {0, 0};
  // ZeRO-3 gathers, per use of a block.
  std::vector<size_t> use_block_;  // per use (forward, then backward, per micro-step)
  std::vector<bool> gathers_;
  std::vector<size_t> prefetch_from_;
  std::vector<uint32_t> use_begin_;
  size_t use_ = 0;
};

Plan::Communicators communicators(const TrainingSetup& s, Family fam, size_t n) {
  Plan::Communicators c;
  const int group = fam == Family::Dp         ? s.dp
                    : fam == Family::Tp       ? s.tp
                    : fam == Family::Ep       ? s.ep
                    : fam == Family::ExpertDp ? s.dp / s.ep
                                              : s.ds.zero.hpz_partition_size;
  if (group < 2) return c;
  c.of_rank.assign(n, -1);
  std::map<std::array<int, 3>, int32_t> index;
  for (size_t r = 0; r < n; ++r) {
    const int tp_i = static_cast<int>(r % static_cast<size_t>(s.tp));
    const int dp_i = static_cast<int>(r / static_cast<size_t>(s.tp) % static_cast<size_t>(s.dp));
    const int pp_i = static_cast<int>(r / static_cast<size_t>(s.tp * s.dp));
    std::array<int, 3> key{};
    switch (fam) {
      case Family::Dp:
        key = {tp_i, pp_i, 0};
        break;
      case Family::Tp:
        key = {dp_i, pp_i, 0};
        break;
      case Family::Ep:
        key = {tp_i, pp_i, dp_i / s.ep};
        break;
      case Family::ExpertDp:
        key = {tp_i, pp_i, dp_i % s.ep};
        break;
      case Family::Hpz:
        key = {tp_i, pp_i, dp_i / group};
        break;
    }
    auto [it, added] = index.try_emplace(key, static_cast<int32_t>(c.instances.size()));
    if (added) c.instances.emplace_back();
    c.instances[static_cast<size_t>(it->second)].push_back(static_cast<uint32_t>(r));
    c.of_rank[r] = it->second;
  }
  return c;
}

}  // namespace

namespace {

/// A key of the DeepSpeed configuration's zero_optimization section, where the file writes it;
/// nullptr when it does not.
const ConfigNode* zero_setting(const ConfigNode& deepspeed, std::string_view key) {
  const ConfigNode* z = deepspeed.find("zero_optimization");
  return z != nullptr && z->is_map() ? z->find(key) : nullptr;
}

/// A training workload's setup on `gpus` (its ranks, in rank order).
TrainingSetup read_training_setup(const engine::WorkloadInput& in, const TrainingSources& src,
                                  std::span<const fabric::NodeId> gpus) {
  const ParamReader& r = in.spec;
  TrainingSetup s;
  s.gpu = in.fabric.server_of(gpus.front()).gpu;
  s.model = read_model(ParamReader(src.model, model_table()));
  s.ds = read_ds_config(src.deepspeed);
  s.tp = r.integer_as<int>("tensor_parallel");
  s.pp = r.integer_as<int>("pipeline_parallel");
  s.ep = r.integer_as<int>("expert_parallel");
  s.expert_imbalance = r.number("expert_imbalance");
  if (s.expert_imbalance >= 1) {
    r.fail("expert_imbalance", "a value in [0, 1)", std::to_string(s.expert_imbalance));
  }
  const auto w = static_cast<int64_t>(gpus.size());
  if (w % (int64_t{s.tp} * s.pp) != 0) {
    r.fail("tensor_parallel",
           fmt::format("TP x PP ({} x {}) to divide the {} ranks", s.tp, s.pp, w),
           std::to_string(s.tp));
  }
  s.dp = static_cast<int>(w / (int64_t{s.tp} * s.pp));
  if (r.has("data_parallel") && r.integer("data_parallel") != s.dp) {
    r.fail("data_parallel", fmt::format("ranks / (TP x PP) = {}", s.dp),
           std::to_string(r.integer("data_parallel")));
  }
  const Model& m = s.model;
  if (m.heads % s.tp != 0 || m.kv_heads % s.tp != 0) {
    r.fail("tensor_parallel",
           fmt::format("a divisor of the heads ({}) and key/value heads ({})", m.heads, m.kv_heads),
           std::to_string(s.tp));
  }
  if (s.pp > m.layers) {
    r.fail("pipeline_parallel", fmt::format("at most the layers ({})", m.layers),
           std::to_string(s.pp));
  }
  if (s.ep > 1 && (!m.moe() || s.dp % s.ep != 0 || m.experts % s.ep != 0)) {
    r.fail(
        "expert_parallel",
        fmt::format("a divisor of DP ({}) and of the experts ({}) of a MoE model", s.dp, m.experts),
        std::to_string(s.ep));
  }
  if (m.moe() && m.experts % s.ep != 0) {
    r.fail("expert_parallel", fmt::format("a divisor of the experts ({})", m.experts),
           std::to_string(s.ep));
  }
  if (s.pp > 1 && s.ds.zero.stage >= 2) {
    r.fail("pipeline_parallel",
           "1 with ZeRO stage 2 or 3 (DeepSpeed's pipeline engine runs stages 0 and 1)",
           fmt::format("{} with stage {}", s.pp, s.ds.zero.stage));
  }
  const int hpz = s.ds.zero.hpz_partition_size;
  if (s.dp % hpz != 0) {
    // At the value in the DeepSpeed file (the file's first line when it is not written).
    const ConfigNode* v = zero_setting(src.deepspeed, "zero_hpz_partition_size");
    throw InputError(v != nullptr ? v->where() : src.deepspeed.where(),
                     "zero_optimization.zero_hpz_partition_size",
                     fmt::format("a divisor of the data-parallel ranks ({})", s.dp),
                     std::to_string(hpz));
  }
  std::tie(s.micro_batch, s.grad_accumulation) = s.ds.batch(s.dp);
  s.steps = r.integer_as<int>("steps");
  s.checkpointing =
      r.choice("activation_checkpointing") == "full" ? Checkpointing::Full : Checkpointing::None;
  s.flash_attention = r.choice("attention") == "flash";
  s.compute = read_compute(r.section("compute", compute_table()));
  s.memory_params = read_memory(r.section("memory", memory_table()));
  return s;
}

std::string rank_list(const std::vector<uint32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    if (!out.empty()) out += ",";
    out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j;
  }
  return out;
}

class TrainingWorkload final : public engine::Workload {
 public:
  TrainingWorkload(std::string name, TrainingSetup setup, ProgramRunner runner,
                   std::pair<int, MemoryBreakdown> memory, bool slowed)
      : Workload(std::move(name)),
        s_(std::move(setup)),
        runner_(std::move(runner)),
        memory_(std::move(memory)),
        slowed_(slowed) {}

  std::string_view type() const override { return "training"; }
  bool out_of_memory() const {
    return memory_.second.total() > static_cast<double>(s_.gpu.memory.count());
  }
  void start(engine::Simulation& sim, engine::WorkloadId id) override {
    if (out_of_memory()) {
      sim.finish(id);  // reported, not simulated
      return;
    }
    runner_.start(sim, id);
    check(sim, id);
  }
  void on_transfer_done(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) override {
    runner_.on_transfer_done(sim, id, tag);
    check(sim, id);
  }
  void on_timer(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) override {
    runner_.on_timer(sim, id, tag);
    check(sim, id);
  }
  void figures(engine::WorkloadFigures& out, Time) const override;
  void trace(std::vector<engine::TraceSpan>& out) const override {
    static constexpr std::string_view kStreamNames[kStreams] = {"compute", "reduce", "gather"};
    for (const Span& s : runner_.spans()) {
      std::string name(purpose_name(s.purpose));
      if (s.collective) name = fmt::format("{} {}", collectives::nccl::collective_name(s.op), name);
      out.push_back({fmt::format("rank {}", s.rank), std::string(kStreamNames[s.stream]),
                     std::move(name), s.start, s.end});
    }
  }
  const ProgramRunner& runner() const { return runner_; }
  const TrainingSetup& setup() const { return s_; }
  const Plan& plan() const { return runner_.plan(); }

 private:
  void check(engine::Simulation& sim, engine::WorkloadId id) {
    if (runner_.done() && !finished_) {
      finished_ = true;
      sim.finish(id);
    }
  }

  TrainingSetup s_;
  ProgramRunner runner_;
  std::pair<int, MemoryBreakdown> memory_;
  bool slowed_ = false;
  bool finished_ = false;
};

void TrainingWorkload::figures(engine::WorkloadFigures& out, Time) const {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  const Model& m = s_.model;
  out.note("model", fmt::format("{} ({:.3g}B parameters)", m.name.empty() ? "model" : m.name,
                                static_cast<double>(m.total_params()) * 1e-9));
  out.note("layout", fmt::format("DP {} x TP {} x PP {} x EP {}", s_.dp, s_.tp, s_.pp, s_.ep));
  out.note("precision", std::string(precision_name(s_.ds.precision)));
  out.add("params", static_cast<double>(m.total_params()));
  out.add("zero_stage", s_.ds.zero.stage);
  out.add("micro_batch", static_cast<double>(s_.micro_batch));
  out.add("grad_accumulation", static_cast<double>(s_.grad_accumulation));
  out.add("global_batch", static_cast<double>(s_.global_batch()));
  if (!s_.ds.not_modelled.empty()) {
    std::string keys;
    for (const std::string& k : s_.ds.not_modelled)
      keys += (keys.empty() ? "" : ", ") + k;
    out.note("deepspeed_not_modelled", keys);
  }
  const MemoryBreakdown& mem = memory_.second;
  out.add("memory_GiB", mem.total() / kGiB);
  out.add("memory_capacity_GiB", static_cast<double>(s_.gpu.memory.count()) / kGiB);
  for (const auto& [part, bytes] : mem.parts)
    out.add(fmt::format("memory_{}_GiB", part), bytes / kGiB);
  out.add("out_of_memory", out_of_memory() ? 1 : 0);
  if (out_of_memory()) {
    out.note("out_of_memory",
             fmt::format("needs {:.1f} GiB of {:.1f} GiB (pipeline stage {})", mem.total() / kGiB,
                         static_cast<double>(s_.gpu.memory.count()) / kGiB, memory_.first));
    return;
  }
  if (!runner_.done()) return;
  const double steps = s_.steps;
  const double step = (runner_.ended() - runner_.started()).in_seconds() / steps;
  const auto tokens = static_cast<double>(s_.global_batch()) * static_cast<double>(m.seq_len);
  const double flops = m.flops_per_token() * tokens;
  const double world = s_.world();
  out.add("step_time_s", step);
  out.add("samples_per_s", static_cast<double>(s_.global_batch()) / step);
  out.add("samples_per_s_per_gpu", static_cast<double>(s_.global_batch()) / step / s_.world());
  out.add("tokens_per_s", tokens / step);
  out.add("tflops_per_gpu", flops / step / world * 1e-12);
  out.add("mfu", flops / step / world / gpu_for(s_.gpu, s_.ds.precision).peak_flops);
  // The breakdown of a step, mean over ranks: it adds up to the step time.
  RankTime mean;
  const auto times = runner_.times();
  for (const RankTime& t : times) {
    mean.compute += t.compute;
    for (int p = 0; p < kPurposes; ++p)
      mean.computed[p] += t.computed[p];
    mean.bubble += t.bubble;
    mean.waiting += t.waiting;
    mean.tail += t.tail;
    for (int p = 0; p < kPurposes; ++p)
      mean.exposed[p] += t.exposed[p];
  }
  const double n = static_cast<double>(times.size()) * steps;
  out.add("compute_s", mean.compute / n);
  // The compute by pass, as DeepSpeed's timers split a micro-step (fwd, bwd_inner with the
  // recompute, step): per optimizer step, mean over ranks.
  for (const Purpose p :
       {Purpose::Forward, Purpose::Backward, Purpose::Recompute, Purpose::Optimizer}) {
    out.add(fmt::format("compute_{}_s", purpose_name(p)),
            mean.computed[static_cast<size_t>(p)] / n);
  }
  const auto comm = runner_.communication();
  for (const Purpose p :
       {Purpose::Gradients, Purpose::Parameters, Purpose::Tensor, Purpose::Experts}) {
    out.add(fmt::format("exposed_{}_s", purpose_name(p)), mean.exposed[static_cast<size_t>(p)] / n);
  }
  // A stage through its part of the step before the others idles in the pipeline's drain: the
  // bubble. Without stages, a rank through early waits for the others.
  const bool staged = s_.pp > 1;
  out.add("bubble_s", (mean.bubble + (staged ? mean.tail : 0)) / n);
  out.add("waiting_s", (mean.waiting + (staged ? 0 : mean.tail)) / n);
  for (const Purpose p :
       {Purpose::Gradients, Purpose::Parameters, Purpose::Tensor, Purpose::Experts}) {
    out.add(fmt::format("comm_{}_s", purpose_name(p)), comm[static_cast<size_t>(p)] / steps);
  }
  out.add("collectives", static_cast<double>(runner_.collectives_run()));
  if (slowed_) {
    // Who waited and for how long: the ranks that waited more than 1 % of a step (the range of
    // their waits per step), and the one that waited least.
    const auto waited_s = [&](uint32_t i) {
      return (times[i].waiting + (staged ? 0 : times[i].tail)) / steps;
    };
    std::vector<uint32_t> waited;
    uint32_t least = 0;
    double most = 0, fewest = std::numeric_limits<double>::infinity();
    for (uint32_t r = 0; r < times.size(); ++r) {
      if (waited_s(r) < waited_s(least)) least = r;
      most = std::max(most, waited_s(r));
      if (waited_s(r) > 0.01 * step) {
        waited.push_back(r);
        fewest = std::min(fewest, waited_s(r));
      }
    }
    out.add("waiting_max_s", most);
    out.note("waited",
             waited.empty()
                 ? fmt::format("no rank waited more than 1 % of a step; rank {} least", least)
                 : fmt::format("ranks {} waited {:.3g}-{:.3g} ms per step; rank {} {:.3g} ms",
                               rank_list(waited), fewest * 1e3, most * 1e3, least,
                               waited_s(least) * 1e3));
  }
}

}  // namespace

const TrainingSetup* training_setup_of(const engine::Workload& w) {
  const auto* t = dynamic_cast<const TrainingWorkload*>(&w);
  return t != nullptr ? &t->setup() : nullptr;
}

const Plan* training_plan_of(const engine::Workload& w) {
  const auto* t = dynamic_cast<const TrainingWorkload*>(&w);
  return t != nullptr ? &t->plan() : nullptr;
}

std::unique_ptr<engine::Workload> make_training_workload(const engine::WorkloadInput& in,
                                                         const NcclConfig& scenario_nccl,
                                                         const TrainingSources& src) {
  const ParamReader& r = in.spec;
  std::vector<fabric::NodeId> gpus = in.ranks.select(r.value("ranks"));
  TrainingSetup s = read_training_setup(in, src, gpus);
  const size_t n = gpus.size();
  Plan plan;
  plan.role.resize(n);
  plan.peers.assign(n, {-1, -1});
  plan.slowdown.assign(n, 1.0);
  for (size_t i = 0; i < n; ++i) {
    const auto stage = static_cast<int>(i / static_cast<size_t>(s.tp * s.dp));
    plan.role[i] = static_cast<uint16_t>(stage);
    const auto stride = static_cast<int32_t>(s.tp * s.dp);
    if (stage + 1 < s.pp) plan.peers[i][0] = static_cast<int32_t>(i) + stride;
    if (stage > 0) plan.peers[i][1] = static_cast<int32_t>(i) - stride;
  }
  // Stragglers: ranks by their GPUs.
  std::map<fabric::NodeId, uint32_t> rank_of;
  for (size_t i = 0; i < n; ++i)
    rank_of.emplace(gpus[i], static_cast<uint32_t>(i));
  const auto ranks_of = [&](const ParamReader& item, std::string_view key) {
    std::vector<uint32_t> out;
    for (fabric::NodeId g : in.ranks.select(item.value(key))) {
      const auto it = rank_of.find(g);
      if (it == rank_of.end()) {
        item.fail(key, "ranks of the workload", in.fabric.node(g).name);
      }
      out.push_back(it->second);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  bool slowed = false;
  if (r.has("stragglers")) {
    for (const ConfigNode& item : r.node("stragglers").items()) {
      const ParamReader sr = r.child(item, kStragglerTable);
      const double f = sr.number("slowdown");
      for (uint32_t rank : ranks_of(sr, "ranks"))
        plan.slowdown[rank] *= f;
      slowed = true;
    }
  }
  // The programs' memory, bounded before they are built (docs/reliability.md): each stage's, and
  // ZeRO-3's gather plan of two uses per block and micro-step (four words each).
  double instructions = 0, largest = 0, uses = 0;
  for (int stage = 0; stage < s.pp; ++stage) {
    const double k = program_instructions_bound(s, stage);
    instructions += k;
    largest = std::max(largest, k);
    if (s.ds.zero.stage == 3) {
      uses += 2.0 * static_cast<double>(s.steps) * static_cast<double>(s.grad_accumulation) *
              static_cast<double>(stage_blocks(s, stage, s.micro_batch).size());
    }
  }
  // A program's instruction vectors grow by doubling as they are built: they hold up to twice
  // their instructions (a 440M-parameter job with one-element AllGather buckets held 15.7 GiB
  // where the instructions alone came to 13.0).
  const double bytes = 2 * instructions * static_cast<double>(sizeof(Instr)) + uses * 32;
  const auto available = static_cast<double>(available_memory_bytes());
  if (largest > kMaxProgramInstructions || (available > 0 && bytes > available)) {
    // When ZeRO 1 or 2's AllGather buckets make most of the instructions, the bucket size is
    // what to change: said at it, in the DeepSpeed configuration.
    double gathers = 0;
    if (s.ds.zero.stage == 1 || s.ds.zero.stage == 2) {
      for (int stage = 0; stage < s.pp; ++stage) {
        const StageParams sp = stage_params(stage_blocks(s, stage, s.micro_batch));
        gathers +=
            static_cast<double>(s.steps) * (std::ceil(sp.dense / s.ds.zero.allgather_bucket) +
                                            std::ceil(sp.expert / s.ds.zero.allgather_bucket));
      }
    }
    const ConfigNode* bucket = zero_setting(src.deepspeed, "allgather_bucket_size");
    if (bucket != nullptr && 2 * gathers > instructions) {
      throw InputError(
          bucket->where(), "zero_optimization.allgather_bucket_size",
          fmt::format(
              "buckets that keep the job's programs within {}",
              largest > kMaxProgramInstructions
                  ? fmt::format("{} instructions per pipeline stage", kMaxProgramInstructions)
                  : fmt::format("this machine's memory ({} available)", format_memory(available))),
          fmt::format("{} elements: {:.3g} AllGathers over {} steps, of {:.3g} instructions "
                      "(about {})",
                      bucket->value(), gathers, s.steps, instructions, format_memory(bytes)));
    }
    r.fail("steps",
           largest > kMaxProgramInstructions
               ? fmt::format("a training job of at most {} instructions per pipeline stage",
                             kMaxProgramInstructions)
               : fmt::format("a training job whose programs fit in this machine's memory ({} "
                             "available)",
                             format_memory(available)),
           fmt::format("{} steps of {} micro-steps over {} pipeline stages: up to {:.3g} "
                       "instructions, about {}",
                       s.steps, s.grad_accumulation, s.pp, instructions, format_memory(bytes)));
  }
  for (int stage = 0; stage < s.pp; ++stage)
    plan.programs.push_back(StageBuilder(s, stage).build());
  for (int fam = 0; fam < kFamilies; ++fam)
    plan.families[fam] = communicators(s, static_cast<Family>(fam), n);
  NcclConfig cfg = scenario_nccl;
  if (r.has("nccl")) cfg = read_nccl(r.section("nccl", collectives::nccl::nccl_table()), cfg, true);
  const fabric::GpuArch arch = in.fabric.server_of(gpus.front()).arch;
  plan.p2p_connection.qps = cfg.qps_per_connection;
  plan.p2p_connection.message_bytes = cfg.p2p_net_chunksize
                                          .value_or(collectives::nccl::default_p2p_net_chunksize(
                                              collectives::nccl::for_gpus(cfg, arch).is_rccl(),
                                              arch, static_cast<int>(gpus.size())))
                                          .count();
  plan.expert_imbalance = s.expert_imbalance;
  plan.seed = in.seed ^ fnv1a64(in.name);
  plan.gpus = std::move(gpus);
  std::vector<uint32_t> traced = ranks_of(r, "trace_ranks");
  auto memory = s.peak_memory(s.micro_batch);
  ProgramRunner runner(in.fabric, std::move(plan), cfg);
  runner.trace_ranks(std::move(traced));
  return std::make_unique<TrainingWorkload>(in.name, std::move(s), std::move(runner),
                                            std::move(memory), slowed);
}

}  // namespace rocesim::training
