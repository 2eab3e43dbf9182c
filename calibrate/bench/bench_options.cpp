#include "calibrate/bench/bench_options.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <sstream>
#include <string_view>

#include "sim/collectives/nccl/nccl_tests.hpp"

#ifndef ROCESIM_VERSION
#define ROCESIM_VERSION "0.0.0"
#endif

namespace rocesim::calibrate {
namespace {

constexpr std::array<std::string_view, 5> kRedops{"sum", "prod", "min", "max", "avg"};
constexpr std::array<std::string_view, 16> kTypes{
    "int8", "char",    "uint8", "int32",   "int",    "uint32",  "int64",    "uint64",
    "half", "float16", "float", "float32", "double", "float64", "bfloat16", "fp8_e4m3"};

constexpr const char* kDescription =
    "rocesim-bench: NCCL collectives on real GPUs, timed like nccl-tests, for rocesim's "
    "validation and calibration.\n"
    "Runs one MPI rank per GPU (mpirun, srun), or one process driving every local GPU "
    "(--single-process). Rank 0 prints an nccl-tests table per collective and, with -o "
    "FILE.yaml, writes a measured dataset for `rocesim validate --measured` and `rocesim "
    "calibrate fit --measured`.";

constexpr const char* kFooter =
    "Sizes take K, M or G (powers of 1024). Times: a CUDA event pair around every iteration, "
    "the slowest rank per iteration; the table's time is the mean, the dataset adds the "
    "minimum, median and 99th percentile.\n"
    "Exit codes: 0 success; 1 a CUDA, NCCL or MPI error during the run, or the output cannot "
    "be written; 2 bad command line; 3 no CUDA device, or NCCL/MPI failed to start.\n"
    "Examples:\n"
    "  mpirun -np 16 -H node1:8,node2:8 -x NCCL_IB_HCA rocesim-bench --collective all_reduce "
    "-b 8 -e 1G -f 2 -o ar.yaml\n"
    "  srun --mpi=pmix -N 2 --ntasks-per-node=8 --gpus-per-node=8 rocesim-bench --collective "
    "all_reduce,all_gather -b 8 -e 1G -f 2 -o run.yaml\n"
    "  rocesim-bench --single-process --gpus 8 --collective all -b 1M -e 1G -f 2 -o node.yaml";

std::string join(const auto& items) {
  std::string out;
  for (const auto& s : items)
    out += (out.empty() ? "" : ", ") + std::string(s);
  return out;
}

bool is_redop(std::string_view s) {
  return std::find(kRedops.begin(), kRedops.end(), s) != kRedops.end();
}

bool yaml_name(std::string_view s) {
  return s.ends_with(".yaml") || s.ends_with(".yml");
}

ParsedBenchArgs usage_error(const std::string& message) {
  ParsedBenchArgs r;
  r.exit_code = kBenchExitUsage;
  r.err = fmt::format("rocesim-bench: {}\nRun with --help for more information.\n", message);
  return r;
}

}  // namespace

std::optional<int64_t> parse_bench_size(const std::string& text) {
  return collectives::nccl::parse_nccl_tests_size(text);
}

std::string shell_join(int argc, const char* const* argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    const std::string_view a(argv[i]);
    const bool plain = !a.empty() && std::all_of(a.begin(), a.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) != 0 ||
             std::string_view("_./:=,+@%-").find(ch) != std::string_view::npos;
    });
    if (!out.empty()) out += ' ';
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (const char ch : a) {
      if (ch == '\'') {
        out += "'\\''";
      } else {
        out += ch;
      }
    }
    out += '\'';
  }
  return out;
}

ParsedBenchArgs parse_bench_args(int argc, const char* const* argv) {
  BenchOptions o;
  CLI::App app{kDescription, "rocesim-bench"};
  app.footer(kFooter);
  app.set_version_flag("--version", std::string("rocesim-bench ") + ROCESIM_VERSION);
  app.get_formatter()->column_width(34);

  std::vector<std::string> collectives;
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M";
  std::vector<std::string> o_values;
  std::string op, output;
  bool factor_set = false;

  app.add_option("--collective", collectives,
                 "Collectives to measure, repeatable or a comma list: all_reduce, all_gather, "
                 "reduce_scatter, alltoall, sendrecv, broadcast, or all (default all_reduce)")
      ->delimiter(',')
      ->type_name("NAME");
  app.add_option("-b,--minbytes", min_bytes, "Smallest size (default 32M)")->type_name("BYTES");
  app.add_option("-e,--maxbytes", max_bytes, "Largest size (default 32M)")->type_name("BYTES");
  app.add_option("-i,--stepbytes", step_bytes, "Size increment when -f is 1 (default 1M)")
      ->type_name("BYTES");
  app.add_option_function<int64_t>(
         "-f,--stepfactor",
         [&](const int64_t& f) {
           o.sweep.step_factor = f;
           factor_set = true;
         },
         "Size multiplication factor; 1: add -i instead (default 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->type_name("N");
  app.add_option("-n,--iters", o.iters, "Timed iterations per size and placement (default 20)")
      ->check(CLI::Range(1, 100000))
      ->type_name("N");
  app.add_option("-w,--warmup_iters", o.warmup,
                 "Untimed iterations at the largest and at the smallest size (default 5)")
      ->check(CLI::Range(0, 1000000))
      ->type_name("N");
  app.add_option("-T,--timeout", o.timeout_s,
                 "Seconds to wait for an operation before failing the run; 0: wait forever "
                 "(default 0)")
      ->check(CLI::Range(0, 1000000))
      ->type_name("SECONDS");
  app.add_option("-d,--datatype", o.datatype, "Data type: " + join(kTypes) + " (default float)")
      ->type_name("TYPE");
  app.add_option("-o", o_values,
                 "A reduction (sum, prod, min, max, avg; as nccl-tests' -o, default sum), or the "
                 "dataset file when it ends in .yaml or .yml; may be given twice")
      ->allow_extra_args(false)
      ->type_name("OP|FILE.yaml");
  app.add_option("--op", op, "The reduction: sum, prod, min, max, avg")->type_name("OP");
  app.add_option("--output", output,
                 "The machine-readable dataset (YAML; written under a temporary name, then "
                 "renamed)")
      ->type_name("FILE.yaml");
  app.add_option("-r,--root", o.root, "Root rank of Broadcast (default 0)")
      ->check(CLI::Range(0, 1 << 30))
      ->type_name("RANK");
  CLI::Option* single = app.add_flag(
      "--single-process", o.single_process,
      "One process drives the GPUs of this node (ncclCommInitAll and group calls); no MPI");
  app.add_option("--gpus", o.gpus, "With --single-process: how many GPUs (default every visible)")
      ->check(CLI::Range(1, 4096))
      ->needs(single)
      ->type_name("N");
  app.add_option("--name", o.name,
                 "Prefix of the table names in the dataset (default <nodes>nodes_<ranks>ranks)")
      ->type_name("TEXT");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    const int code = app.exit(e, out, err);
    ParsedBenchArgs r;
    r.exit_code = code == 0 ? kBenchExitOk : kBenchExitUsage;
    r.out = out.str();
    r.err = code == 0 ? err.str() : "rocesim-bench: " + err.str();
    return r;
  }

  // Collectives, in the order given, each once.
  if (!collectives.empty()) {
    o.collectives.clear();
    for (const std::string& name : collectives) {
      std::vector<BenchCollective> add;
      if (name == "all") {
        add.assign(kBenchCollectives.begin(), kBenchCollectives.end());
      } else if (const auto c = parse_bench_collective(name)) {
        add.push_back(*c);
      } else {
        std::vector<std::string_view> known;
        for (const BenchCollective k : kBenchCollectives)
          known.push_back(bench_option_name(k));
        return usage_error(
            fmt::format("--collective: expected one of {} or all; found '{}'", join(known), name));
      }
      for (const BenchCollective c : add) {
        if (std::find(o.collectives.begin(), o.collectives.end(), c) == o.collectives.end())
          o.collectives.push_back(c);
      }
    }
  }

  // Sizes.
  const std::pair<const char*, std::string*> sizes[] = {
      {"-b", &min_bytes}, {"-e", &max_bytes}, {"-i", &step_bytes}};
  int64_t values[3] = {};
  for (size_t k = 0; k < 3; ++k) {
    const auto v = parse_bench_size(*sizes[k].second);
    if (!v) {
      return usage_error(
          fmt::format("{}: expected a size in bytes, optionally with K, M or G (e.g. 8, 128K, "
                      "1G); found '{}'",
                      sizes[k].first, *sizes[k].second));
    }
    values[k] = *v;
  }
  o.sweep.min_bytes = values[0];
  o.sweep.max_bytes = values[1];
  o.sweep.step_bytes = values[2];
  if (!factor_set) o.sweep.step_factor = 1;
  if (o.sweep.max_bytes < o.sweep.min_bytes) {
    return usage_error(fmt::format("-e: expected at least the smallest size -b ({} B); found {} B",
                                   o.sweep.min_bytes, o.sweep.max_bytes));
  }
  if (o.sweep.step_factor == 1 && o.sweep.step_bytes == 0 &&
      o.sweep.max_bytes > o.sweep.min_bytes) {
    return usage_error("-i: expected a positive step when -f is 1; found 0");
  }

  // Data type.
  const auto type_size = collectives::nccl::nccl_tests_type_size(o.datatype);
  if (!type_size) {
    return usage_error(fmt::format("-d: expected one of {}; found '{}'", join(kTypes), o.datatype));
  }
  o.type_size = *type_size;

  // -o: a reduction or the output file; --op and --output.
  std::string redop_from_o, output_from_o;
  for (const std::string& v : o_values) {
    std::string& target = is_redop(v) ? redop_from_o : output_from_o;
    if (!is_redop(v) && !yaml_name(v)) {
      return usage_error(fmt::format(
          "-o: expected a reduction ({}) or an output file ending in .yaml or .yml; found '{}'",
          join(kRedops), v));
    }
    if (!target.empty()) {
      return usage_error(fmt::format("-o: {} given twice ('{}' and '{}')",
                                     is_redop(v) ? "a reduction" : "an output file", target, v));
    }
    target = v;
  }
  if (!op.empty() && !is_redop(op)) {
    return usage_error(fmt::format("--op: expected one of {}; found '{}'", join(kRedops), op));
  }
  if (!op.empty() && !redop_from_o.empty() && op != redop_from_o) {
    return usage_error(
        fmt::format("--op {} and -o {} name different reductions", op, redop_from_o));
  }
  if (!output.empty() && !output_from_o.empty() && output != output_from_o) {
    return usage_error(
        fmt::format("--output {} and -o {} name different files", output, output_from_o));
  }
  if (!op.empty()) o.redop = op;
  if (!redop_from_o.empty()) o.redop = redop_from_o;
  o.output = !output.empty() ? output : output_from_o;
  if (!o.output.empty() && !yaml_name(o.output)) {
    return usage_error(fmt::format(
        "--output: expected a file name ending in .yaml or .yml (rocesim validate reads "
        "measured datasets by that name); found '{}'",
        o.output));
  }

  if (!o.name.empty() && !std::all_of(o.name.begin(), o.name.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_' || ch == '-' ||
               ch == '.';
      })) {
    return usage_error(
        fmt::format("--name: expected letters, digits, '_', '-' or '.'; found '{}'", o.name));
  }

  o.command = shell_join(argc, argv);
  ParsedBenchArgs r;
  r.options = std::move(o);
  return r;
}

}  // namespace rocesim::calibrate
