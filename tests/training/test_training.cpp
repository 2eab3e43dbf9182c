// The training workload: the model's counts, the memory model against the ZeRO paper, the step
// against closed forms (stage 0 = compute + AllReduce, the 1F1B bubble), DeepSpeed's
// configuration, and the directions DOMAIN.md reports from real clusters.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <string>
#include <string_view>

#include "sim/core/params.hpp"
#include "sim/metrics/trace.hpp"
#include "sim/scenario/yaml_source.hpp"
#include "sim/training/deepspeed.hpp"
#include "sim/training/memory.hpp"
#include "sim/training/model.hpp"
#include "sim/training/program.hpp"
#include "sim/training/training.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::training {
namespace {

using Figures = std::map<std::string, double>;

struct Outcome {
  Figures values;
  std::map<std::string, std::string> notes;
  uint64_t flows = 0;
};

Outcome run_scenario(const std::string& yaml) {
  auto r = test::scenario_from_yaml(yaml);
  r->run();
  Outcome out;
  const metrics::WorkloadResult& w = r->recorder->workloads().at(0);
  for (const auto& [k, v] : w.figures.values)
    out.values[k] = v;
  for (const auto& [k, v] : w.figures.notes)
    out.notes[k] = v;
  out.flows = w.flows;
  return out;
}

// A small LLaMA-like model: the vocabulary is small so that the pipeline's first and last stages
// do as much work as the others.
constexpr const char* kSmallModel =
    "{name: small, layers: 8, hidden_size: 2048, heads: 16, ffn_size: 5632, vocab_size: 256, "
    "seq_len: 2048}";
// 1.6B parameters: more than DeepSpeed's stage3_max_reuse_distance (1e9 elements), so that
// stage 3 gathers every layer again in backward, as it does for the models it is used for.
constexpr const char* kLargerModel =
    "{name: larger, layers: 8, hidden_size: 4096, heads: 32, ffn_size: 11008, vocab_size: 256, "
    "seq_len: 2048}";
// 32 layers: the sends between pipeline stages (8 MiB each) are ~0.1 % of a stage's compute.
constexpr const char* kDeepModel =
    "{name: deep, layers: 32, hidden_size: 2048, heads: 16, ffn_size: 5632, vocab_size: 256, "
    "seq_len: 2048}";

/// `servers` HGX H100 on one leaf with NICs of `nic`, and `workloads`.
std::string fabric_with(int servers, const std::string& nic, const std::string& workloads) {
  return fmt::format(R"(name: training-test
topology:
  type: clos
  racks: 1
  nodes_per_rack: {}
  node: {{server: hgx-h100, nic_speed: {}}}
  leaf: {{uplinks: 8, uplink_speed: 400Gbps}}
  spine: {{count: 1}}
job: {{ranks: all}}
workloads:
{}
)",
                     servers, nic, workloads);
}

/// A training scenario: the workload's keys are indented four spaces.
std::string scenario(int servers, const std::string& nic, const std::string& workload,
                     const std::string& model = kSmallModel) {
  return fabric_with(
      servers, nic,
      fmt::format("  - name: train\n    type: training\n    model: {}\n{}", model, workload));
}

Model model_from(const std::string& yaml) {
  const ConfigNode n = scenario::load_yaml_text(yaml, "<model>");
  return read_model(ParamReader(n, model_table()));
}

TEST(TrainingModel, LlamaShapesCountTheirPublishedParameters) {
  // Llama 3 8B: 32 x (2 h^2 + 2 h (8 x 128) + 3 h 14336 + 2 h) + 2 x 128256 h = 8.030B;
  // 70B: 80 layers of h = 8192, f = 28672: 70.554B.
  const Model m8 = model_from(
      "{layers: 32, hidden_size: 4096, heads: 32, kv_heads: 8, ffn_size: 14336, vocab_size: "
      "128256, seq_len: 8192}");
  EXPECT_NEAR(static_cast<double>(m8.total_params()), 8.030e9, 0.001e9);
  // The model file says the same.
  const ConfigNode file =
      scenario::load_yaml_file(test::source_path("workloads/models/llama-3-8b.yaml"), "");
  EXPECT_EQ(read_model(ParamReader(*file.find("model"), model_table())).total_params(),
            m8.total_params());
  const Model m70 = model_from(
      "{layers: 80, hidden_size: 8192, heads: 64, kv_heads: 8, ffn_size: 28672, vocab_size: "
      "128256, seq_len: 8192}");
  EXPECT_NEAR(static_cast<double>(m70.total_params()), 70.554e9, 0.001e9);
  // Mixtral 8x7B: 46.7B parameters, 12.9B active (2 of 8 experts).
  const Model moe = model_from(
      "{layers: 32, hidden_size: 4096, heads: 32, kv_heads: 8, ffn_size: 14336, vocab_size: "
      "32000, experts: 8, top_k: 2, seq_len: 4096}");
  EXPECT_NEAR(static_cast<double>(moe.total_params()), 46.70e9, 0.01e9);
  EXPECT_NEAR(static_cast<double>(moe.active_params()), 12.88e9, 0.01e9);
}

TEST(TrainingModel, AParameterCountAloneGivesAShapeOfThatSize) {
  for (const double n : {1e9, 8e9, 70e9}) {
    const Model m = model_from(fmt::format("{{parameters: {}, seq_len: 4096}}", n));
    EXPECT_NEAR(static_cast<double>(m.total_params()) / n, 1.0, 0.1) << n;
    EXPECT_EQ(m.hidden, 128 * m.layers);
  }
}

TEST(TrainingMemory, ModelStatesMatchTheZeroPaper) {
  // ZeRO paper (arXiv:1910.02054), 7.5B parameters on 64 GPUs, mixed-precision Adam (2 + 2 +
  // 12 bytes per parameter): 120 GB; 4 Psi + 12 Psi / 64 = 31.4 GB; 2 Psi + 14 Psi / 64 =
  // 16.6 GB; 16 Psi / 64 = 1.9 GB.
  const double psi = 7.5e9;
  EXPECT_NEAR(model_state_bytes(psi, 64, 0, Precision::Bf16) / 1e9, 120.0, 0.05);
  EXPECT_NEAR(model_state_bytes(psi, 64, 1, Precision::Bf16) / 1e9, 31.4, 0.05);
  EXPECT_NEAR(model_state_bytes(psi, 64, 2, Precision::Bf16) / 1e9, 16.6, 0.05);
  EXPECT_NEAR(model_state_bytes(psi, 64, 3, Precision::Bf16) / 1e9, 1.9, 0.05);
}

TEST(TrainingStep, StageZeroWithoutOverlapIsComputePlusTheAllReduce) {
  // Stage 0 reduces every gradient after backward, on the compute stream: with one bucket the
  // step is the compute (forward, backward, optimizer) plus one AllReduce of 2 Psi bytes. That
  // AllReduce, run alone as an nccl workload on the same ranks, takes the same time.
  const std::string ds =
      "    deepspeed: {train_micro_batch_size_per_gpu: 1, bf16: {enabled: true}, "
      "zero_optimization: {stage: 0, reduce_bucket_size: 1e10}}";
  const Outcome t = run_scenario(scenario(2, "400Gbps", ds));
  const double bytes = 2 * t.values.at("params");
  EXPECT_NEAR(t.values.at("step_time_s"),
              t.values.at("compute_s") + t.values.at("exposed_dp_gradients_s"), 1e-9);
  EXPECT_EQ(t.values.at("collectives"), 1);
  const Outcome ar =
      run_scenario(fabric_with(2, "400Gbps",
                               fmt::format("  - {{type: nccl, collective: allreduce, bytes: {}B}}",
                                           static_cast<int64_t>(bytes))));
  EXPECT_NEAR(t.values.at("exposed_dp_gradients_s"), ar.values.at("time_us") * 1e-6,
              1e-6 * ar.values.at("time_us") * 1e-6);
}

TEST(TrainingStep, TheOneForwardOneBackwardBubbleIsPMinusOneOverMPlusPMinusOne) {
  // 4 equal stages, 8 micro-batches, no data parallelism and an optimizer of no cost: every
  // stage computes m (t_f + t_b) in a step of (m + p - 1)(t_f + t_b), so the bubble is
  // (p - 1) / (m + p - 1) = 3 / 11 of the step (the sends over NVLink add ~0.2 %).
  const Outcome t = run_scenario(scenario(1, "400Gbps",
                                          "    pipeline_parallel: 4\n"
                                          "    ranks: 0-3\n"
                                          "    compute: {optimizer_bytes_per_param: 1e-9}\n"
                                          "    deepspeed: {train_micro_batch_size_per_gpu: 1, "
                                          "gradient_accumulation_steps: 8, bf16: {enabled: true}}",
                                          kDeepModel));
  EXPECT_NEAR(t.values.at("bubble_s") / t.values.at("step_time_s"), 3.0 / 11.0, 0.005);
  EXPECT_NEAR(t.values.at("compute_s") / t.values.at("step_time_s"), 8.0 / 11.0, 0.005);
}

TEST(TrainingStep, TheBreakdownAddsUpToTheStep) {
  // Per rank, compute + exposed communication + bubble + waiting is the step.
  const Outcome t = run_scenario(scenario(2, "400Gbps",
                                          "    tensor_parallel: 2\n"
                                          "    pipeline_parallel: 2\n"
                                          "    deepspeed: {train_micro_batch_size_per_gpu: 2, "
                                          "gradient_accumulation_steps: 4, bf16: {enabled: true}, "
                                          "zero_optimization: {stage: 1}}"));
  double sum = t.values.at("compute_s") + t.values.at("bubble_s") + t.values.at("waiting_s");
  for (const char* k :
       {"exposed_dp_gradients_s", "exposed_dp_parameters_s", "exposed_tp_s", "exposed_ep_s"})
    sum += t.values.at(k);
  EXPECT_NEAR(sum, t.values.at("step_time_s"), 1e-9 * t.values.at("step_time_s"));
  EXPECT_GT(t.values.at("exposed_tp_s"), 0);
  EXPECT_GT(t.values.at("bubble_s"), 0);
}

TEST(TrainingStep, TheComputeSplitsByPassAsDeepSpeedTimesIt) {
  // compute_s = forward + backward + recompute + optimizer (DeepSpeed's fwd, bwd_inner and step
  // timers). Every block's backward costs twice its forward (the model's rule), so without
  // recomputation backward = 2 x forward; with full activation checkpointing each block's
  // forward runs again before its backward: recompute = forward.
  const auto run = [](bool recompute) {
    return run_scenario(
               scenario(2, "400Gbps",
                        std::string(recompute ? "    activation_checkpointing: full\n" : "") +
                            "    deepspeed: {train_micro_batch_size_per_gpu: 2, "
                            "gradient_accumulation_steps: 2, bf16: {enabled: true}, "
                            "zero_optimization: {stage: 1}}"))
        .values;
  };
  for (const bool recompute : {false, true}) {
    const auto v = run(recompute);
    const double fwd = v.at("compute_forward_s"), bwd = v.at("compute_backward_s");
    EXPECT_NEAR(fwd + bwd + v.at("compute_recompute_s") + v.at("compute_optimizer_s"),
                v.at("compute_s"), 1e-9 * v.at("compute_s"));
    EXPECT_NEAR(bwd, 2 * fwd, 1e-9 * bwd);
    EXPECT_NEAR(v.at("compute_recompute_s"), recompute ? fwd : 0.0, 1e-9 * bwd);
    EXPECT_GT(v.at("compute_optimizer_s"), 0);
  }
}

double step_of(int stage, bool reduce_scatter = false, const std::string& nic = "25Gbps") {
  const std::string ds = fmt::format(
      "    deepspeed: {{train_micro_batch_size_per_gpu: 1, gradient_accumulation_steps: 2, "
      "bf16: {{enabled: true}}, zero_optimization: {{stage: {}, overlap_comm: true, "
      "use_multi_rank_bucket_allreduce: {}}}}}",
      stage, reduce_scatter ? "false" : "true");
  return run_scenario(scenario(2, nic, ds, kLargerModel)).values.at("step_time_s");
}

TEST(TrainingDirections, StageThreeIsTheSlowestOnABandwidthLimitedFabric) {
  // 25 Gb/s NICs: stage 3 moves 3 Psi per micro-step and its forward waits on the gathers.
  const double s3 = step_of(3);
  for (int stage = 0; stage < 3; ++stage)
    EXPECT_GT(s3, step_of(stage)) << "stage " << stage;
}

TEST(TrainingDirections, ReduceScatterBeatsAllReduceInStagesOneAndTwo) {
  // A ReduceScatter moves half the bytes of an AllReduce of the same bucket.
  for (int stage : {1, 2})
    EXPECT_LT(step_of(stage, true), step_of(stage, false)) << "stage " << stage;
}

TEST(TrainingDirections, WithTheGlobalBatchFixedALargerMicroBatchIsNotAlwaysFaster) {
  // Through a pipeline of 4 stages, global batch 16: micro-batches of 1 (m = 16, bubble 3/19)
  // beat micro-batches of 8 (m = 2, bubble 3/5) although each runs 8x the tokens at once.
  const auto step = [](int micro, int accumulation) {
    return run_scenario(scenario(1, "400Gbps",
                                 fmt::format("    pipeline_parallel: 4\n    ranks: 0-3\n"
                                             "    deepspeed: {{train_micro_batch_size_per_gpu: "
                                             "{}, gradient_accumulation_steps: {}, bf16: "
                                             "{{enabled: true}}}}",
                                             micro, accumulation)))
        .values.at("step_time_s");
  };
  EXPECT_LT(step(1, 16), step(8, 2));
}

TEST(TrainingDirections, OneSlowGpuSlowsTheWholeJobByAboutItsSlowdown) {
  // Every collective waits for rank 3, slowed by 1.5: the step's compute stretches by 1.5 for
  // all, and the output names the ranks that waited.
  const std::string ds =
      "    deepspeed: {train_micro_batch_size_per_gpu: 1, gradient_accumulation_steps: 2, "
      "bf16: {enabled: true}, zero_optimization: {stage: 2}}";
  const Outcome base = run_scenario(scenario(2, "400Gbps", ds));
  const Outcome slow =
      run_scenario(scenario(2, "400Gbps", ds + "\n    stragglers: [{ranks: [3], slowdown: 1.5}]"));
  // Stage 2 reduces after every micro-step's backward: the slow rank's extra compute, 0.5 of
  // the compute, is on the critical path once per micro-step, the collectives are unchanged.
  const double base_step = base.values.at("step_time_s");
  EXPECT_NEAR(slow.values.at("step_time_s"), base_step + 0.5 * base.values.at("compute_s"),
              0.01 * base_step);
  // Each other rank waits for the slow one's extra 0.5 x compute, once per step in all.
  EXPECT_NEAR(slow.values.at("waiting_max_s"), 0.5 * base.values.at("compute_s"), 0.01 * base_step);
  EXPECT_THAT(slow.notes.at("waited"), ::testing::StartsWith("ranks 0-2,4-15 waited "));
  EXPECT_THAT(slow.notes.at("waited"), ::testing::EndsWith(" ms per step; rank 3 0 ms"));
  EXPECT_GT(slow.values.at("waiting_s"), 0.2 * base.values.at("step_time_s"));
}

TEST(TrainingDirections, AnImbalancedRouterSlowsTheExpertAlltoAllsByLessThanItsSpread) {
  // A MoE model with 4-way expert parallelism on 16 GPUs: each block's two token AlltoAlls
  // block the compute stream, so they are its exposed EP time. With expert_imbalance u each
  // pair carries mean x [1 - u, 1 + u] (AlltoAllv, a new draw per operation): a batch of NCCL's
  // schedule ends with its largest pair, above the mean but at most (1 + u) x the mean, so
  // the exposed EP time grows, by less than the factor 1 + u. The same seed gives the same step.
  const std::string moe =
      "{name: moe, layers: 4, hidden_size: 1024, heads: 8, ffn_size: 2048, vocab_size: 256, "
      "seq_len: 1024, experts: 8, top_k: 2}";
  const auto job = [&](const std::string& u) {
    return scenario(2, "400Gbps",
                    "    expert_parallel: 4\n    expert_imbalance: " + u +
                        "\n    deepspeed: {train_micro_batch_size_per_gpu: 1, "
                        "gradient_accumulation_steps: 2, bf16: {enabled: true}, "
                        "zero_optimization: {stage: 1}}",
                    moe);
  };
  const Outcome balanced = run_scenario(job("0")), spread = run_scenario(job("0.4")),
                again = run_scenario(job("0.4"));
  const double b = balanced.values.at("exposed_ep_s"), s = spread.values.at("exposed_ep_s");
  EXPECT_GT(b, 0);
  EXPECT_GT(s, b);
  EXPECT_LT(s, 1.4 * b);
  EXPECT_GT(spread.values.at("step_time_s"), balanced.values.at("step_time_s"));
  EXPECT_EQ(again.values.at("step_time_s"), spread.values.at("step_time_s"));
  const InputError e = test::input_error([&] { test::scenario_from_yaml(job("1.5")); });
  EXPECT_THAT(e.key(), testing::HasSubstr("expert_imbalance"));
  EXPECT_THAT(e.what(), testing::HasSubstr("[0, 1)"));
}

TEST(TrainingMemory, AConfigurationThatDoesNotFitIsReportedNotSimulated) {
  // The 440M model with micro-batches of 32 on 40 GiB A100s: activations alone need
  // 24 x 2048 x 32 x 1024 x 34 bytes = 51 GiB.
  const std::string ds =
      "    deepspeed: {train_micro_batch_size_per_gpu: 32, bf16: {enabled: true}, "
      "zero_optimization: {stage: 1}}";
  const std::string yaml = fmt::format(R"(name: oom
topology:
  type: clos
  racks: 1
  nodes_per_rack: 2
  node: {{server: hgx-a100, gpu_memory: 40GiB}}
  leaf: {{uplinks: 8, uplink_speed: 200Gbps}}
  spine: {{count: 1}}
workloads:
  - name: train
    type: training
    model: workloads/models/llama-440m.yaml
{}
)",
                                       ds);
  const Outcome t = run_scenario(yaml);
  EXPECT_EQ(t.values.at("out_of_memory"), 1);
  EXPECT_EQ(t.flows, 0u);
  EXPECT_EQ(t.values.count("step_time_s"), 0u);
  EXPECT_NEAR(t.values.at("memory_activations_GiB"), 24.0 * 2048 * 32 * 1024 * 34 / (1 << 30),
              1e-9);
}

TEST(DeepSpeedConfig, ReadsAsDeepSpeedDoesAndListsWhatItDoesNotModel) {
  const ConfigNode n =
      scenario::load_yaml_file(test::source_path("workloads/deepspeed/zero1.json"), "");
  const DsConfig ds = read_ds_config(n);
  EXPECT_EQ(ds.zero.stage, 1);
  EXPECT_EQ(ds.precision, Precision::Bf16);
  EXPECT_FALSE(ds.zero.overlap());
  EXPECT_EQ(ds.batch(16), (std::pair<int64_t, int64_t>{8, 8}));
  EXPECT_EQ(ds.not_modelled, (std::vector<std::string>{"optimizer", "gradient_clipping",
                                                       "steps_per_print", "wall_clock_breakdown"}));
  // DeepSpeed derives what is missing: train_batch_size / (micro x dp) accumulation steps.
  const DsConfig two = read_ds_config(scenario::load_yaml_text(
      R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2})", "ds.json"));
  EXPECT_EQ(two.batch(8), (std::pair<int64_t, int64_t>{2, 4}));
  EXPECT_TRUE(
      read_ds_config(scenario::load_yaml_text(R"({"zero_optimization": {"stage": 3}})", "ds.json"))
          .zero.overlap());
}

TEST(DeepSpeedConfig, WrongValuesAreLocatedInTheJsonFile) {
  const auto error = [](const std::string& json) -> std::string {
    return test::input_error([&] { read_ds_config(scenario::load_yaml_text(json, "ds.json")); })
        .what();
  };
  EXPECT_THAT(error("{\n  \"zero_optimization\": {\n    \"stage\": 4\n  }\n}"),
              ::testing::HasSubstr("ds.json:3:14"));
  EXPECT_THAT(error(R"({"train_micro_batch_size_per_gpu": "auto"})"),
              ::testing::HasSubstr("'auto'"));
  EXPECT_THAT(error(R"({"bf16": {"enabled": true}, "fp16": {"enabled": true}})"),
              ::testing::HasSubstr("not both"));
  EXPECT_THAT(error(R"({"zero_optimization": {"reduce_bucket_size": 2.5}})"),
              ::testing::HasSubstr("whole number"));
  // A value checked against the job (hpZ's partition must divide the 16 data-parallel ranks):
  // at the value, not at the configuration's first line.
  const std::string job = R"(name: hpz
topology:
  type: clos
  racks: 1
  nodes_per_rack: 2
  node: {server: hgx-a100}
  leaf: {uplinks: 8, uplink_speed: 200Gbps}
  spine: {count: 1}
workloads:
  - name: train
    type: training
    model: workloads/models/llama-440m.yaml
    deepspeed: {zero_optimization: {stage: 3, zero_hpz_partition_size: 3}}
)";
  const InputError hpz = test::input_error([&] { test::scenario_from_yaml(job); });
  EXPECT_EQ(hpz.key(), "zero_optimization.zero_hpz_partition_size");
  EXPECT_EQ(hpz.where().line, 13);
  EXPECT_EQ(hpz.where().column,
            static_cast<int>(std::string_view("    deepspeed: {zero_optimization: {stage: 3, "
                                              "zero_hpz_partition_size: ")
                                 .size()) +
                1);
  const DsConfig bad = read_ds_config(scenario::load_yaml_text(
      R"({"train_batch_size": 60, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4})",
      "ds.json"));
  EXPECT_THROW(bad.batch(8), InputError);
}

}  // namespace
}  // namespace rocesim::training

namespace rocesim::training {
namespace {

TEST(TrainingJobs, TheProgramEstimateBoundsWhatIsBuilt) {
  // A job's programs are bounded before they are built (program_instructions_bound), so that a
  // job too large for the machine is refused at once. The bound must hold for every ZeRO stage,
  // with tensor, pipeline and expert parallelism and recomputation, and must not be so loose
  // that it refuses jobs several times smaller than the machine: within 4x of what is built.
  const std::string moe =
      "{name: moe, layers: 4, hidden_size: 1024, heads: 8, ffn_size: 2048, vocab_size: 256, "
      "seq_len: 1024, experts: 8, top_k: 2}";
  struct Case {
    std::string layout, model;
    int stage;
  };
  const std::vector<Case> cases = {
      {"", kDeepModel, 0},
      {"", kDeepModel, 1},
      {"", kDeepModel, 2},
      {"", kDeepModel, 3},
      {"    tensor_parallel: 2\n    pipeline_parallel: 2\n    activation_checkpointing: full\n",
       kDeepModel, 1},
      {"    expert_parallel: 4\n", moe, 3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.layout + " stage " + std::to_string(c.stage));
    const std::string ds = fmt::format(
        "    deepspeed: {{train_micro_batch_size_per_gpu: 1, gradient_accumulation_steps: 4, "
        "bf16: {{enabled: true}}, zero_optimization: {{stage: {}, reduce_bucket_size: 2e7, "
        "allgather_bucket_size: 5e7}}}}\n    steps: 2\n{}",
        c.stage, c.layout);
    auto run = test::scenario_from_yaml(scenario(2, "400Gbps", ds, c.model));
    const engine::Workload& w = *run->sim->workloads()[0].workload;
    const TrainingSetup& s = *training_setup_of(w);
    const Plan& plan = *training_plan_of(w);
    for (int stage = 0; stage < s.pp; ++stage) {
      size_t built = 0;
      for (const auto& stream : plan.programs.at(static_cast<size_t>(stage)).streams)
        built += stream.size();
      const double bound = program_instructions_bound(s, stage);
      EXPECT_GE(bound, static_cast<double>(built)) << "stage " << stage;
      EXPECT_LE(bound, 4.0 * static_cast<double>(built)) << "stage " << stage;
    }
  }
}

TEST(TrainingJobs, AJobTooLargeForTheMachineIsRefusedWithItsEstimateBeforeItIsBuilt) {
  // A million micro-steps of the 32-layer model would build programs of about 10 GB; with the
  // machine's memory capped at 64 MiB (ROCESIM_MEMORY_LIMIT) the job is refused at its `steps`,
  // with the estimate, before anything is built.
  const test::MemoryLimit limit("67108864");
  const std::string ds =
      "    deepspeed: {train_micro_batch_size_per_gpu: 1, gradient_accumulation_steps: 1000000, "
      "bf16: {enabled: true}, zero_optimization: {stage: 1}}";
  const InputError e =
      test::input_error([&] { test::scenario_from_yaml(scenario(2, "400Gbps", ds, kDeepModel)); });
  EXPECT_THAT(e.key(), testing::HasSubstr("steps"));
  EXPECT_THAT(e.what(), testing::HasSubstr("fit in this machine's memory"));
  EXPECT_THAT(e.what(), testing::HasSubstr("1000000 micro-steps"));
  // One-element AllGather buckets: the buckets make the instructions, so the bucket size is
  // named, at its value, as the thing to change.
  const std::string tiny =
      "    deepspeed: {train_micro_batch_size_per_gpu: 1, bf16: {enabled: true}, "
      "zero_optimization: {stage: 1, allgather_bucket_size: 1}}";
  const InputError b = test::input_error(
      [&] { test::scenario_from_yaml(scenario(2, "400Gbps", tiny, kDeepModel)); });
  EXPECT_EQ(b.key(), "zero_optimization.allgather_bucket_size");
  EXPECT_THAT(b.what(), testing::HasSubstr("found 1 elements"));
  EXPECT_GT(b.where().line, 0);
}

TEST(TrainingJobs, TwoJobsOnOneFabricShareItsLinks) {
  // Two 16-GPU jobs, each with one server in each of two racks whose leaves have one 100 Gb/s
  // uplink: each job's gradient AllReduce crosses that uplink, so with both jobs running each
  // gets about half of it and its exposed communication about doubles.
  const auto ranks = [](int first, int second) {
    std::string out;
    for (int base : {first, second}) {
      for (int g = 0; g < 8; ++g)
        out += fmt::format("{}{}", out.empty() ? "" : ", ", base + g);
    }
    return "[" + out + "]";
  };
  const std::string job = fmt::format(
      "    type: training\n    model: {}\n    deepspeed: {{train_micro_batch_size_per_gpu: 1, "
      "bf16: {{enabled: true}}, zero_optimization: {{stage: 2}}}}\n",
      kSmallModel);
  const auto yaml = [&](bool both) {
    return fmt::format(R"(name: two-jobs
topology:
  type: clos
  racks: 2
  nodes_per_rack: 2
  node: {{server: hgx-h100}}
  leaf: {{uplinks: 1, uplink_speed: 100Gbps}}
  spine: {{count: 1}}
job: {{ranks: {}}}
jobs:
  - {{name: b, ranks: {}}}
workloads:
  - name: train_a
{}{}
)",
                       ranks(0, 16), ranks(8, 24), job,
                       both ? "  - name: train_b\n    job: b\n" + job : "");
  };
  const Outcome alone = run_scenario(yaml(false));
  const Outcome shared = run_scenario(yaml(true));
  const double comm = alone.values.at("exposed_dp_gradients_s");
  EXPECT_GT(comm, 0.2 * alone.values.at("step_time_s"));
  EXPECT_NEAR(shared.values.at("exposed_dp_gradients_s") / comm, 2.0, 0.3);
  EXPECT_NEAR(shared.values.at("compute_s"), alone.values.at("compute_s"), 1e-9);
}

}  // namespace
}  // namespace rocesim::training

namespace rocesim::training {
namespace {

TEST(TrainingTrace, TheTraceIsBoundedAndSaysWhatItLeftOut) {
  // Rank 0 of a 2-micro-step ZeRO 2 job: 8 layers x 2 blocks + embedding + head = 18 blocks, so
  // 2 x 18 forward + 2 x 18 backward + 1 optimizer = 73 compute spans, plus the gradient
  // AllReduces (one per micro-step: the bucket holds the whole model) and the parameter
  // AllGather: 76 spans. With a bound of 10, 66 are left out.
  auto run = test::scenario_from_yaml(
      scenario(2, "400Gbps",
               "    deepspeed: {train_micro_batch_size_per_gpu: 1, gradient_accumulation_steps: 2, "
               "bf16: {enabled: true}, zero_optimization: {stage: 2}}"));
  run->run();
  const std::string all = metrics::trace_json(*run->sim, *run->recorder, 1000);
  EXPECT_THAT(all, ::testing::HasSubstr("\"spans\": 76, \"spans_left_out\": 0"));
  const std::string bounded = metrics::trace_json(*run->sim, *run->recorder, 10);
  EXPECT_THAT(bounded, ::testing::HasSubstr("\"spans\": 10, \"spans_left_out\": 66"));
  EXPECT_THAT(bounded, ::testing::HasSubstr("\"name\": \"train / rank 0\""));
}

}  // namespace
}  // namespace rocesim::training
