#include "sim/collectives/nccl/nccl_tests.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <limits>
#include <memory>

namespace rocesim::collectives::nccl {
namespace {

struct TestName {
  std::string_view test;
  Collective collective;
};
constexpr std::array<TestName, 9> kTests{{
    {"all_reduce_perf", Collective::AllReduce},
    {"all_gather_perf", Collective::AllGather},
    {"reduce_scatter_perf", Collective::ReduceScatter},
    {"alltoall_perf", Collective::AllToAll},
    {"broadcast_perf", Collective::Broadcast},
    {"reduce_perf", Collective::Reduce},
    {"sendrecv_perf", Collective::SendRecv},
    {"gather_perf", Collective::Gather},
    {"scatter_perf", Collective::Scatter},
}};

struct DataType {
  std::string_view name;
  int size;
};
// nccl-tests' -d names (src/common.cu), with their sizes.
constexpr std::array<DataType, 16> kTypes{{{"int8", 1},
                                           {"char", 1},
                                           {"uint8", 1},
                                           {"int32", 4},
                                           {"int", 4},
                                           {"uint32", 4},
                                           {"int64", 8},
                                           {"uint64", 8},
                                           {"half", 2},
                                           {"float16", 2},
                                           {"float", 4},
                                           {"float32", 4},
                                           {"double", 8},
                                           {"float64", 8},
                                           {"bfloat16", 2},
                                           {"fp8_e4m3", 1}}};
constexpr std::array<std::string_view, 6> kOps{"sum", "prod", "min", "max", "avg", "mulsum"};
// What `-d all` and `-o all` run, in nccl-tests' order (src/common.cu test_typenames and
// test_opnames, without the FP8 types and mulsum that only some builds have).
constexpr std::array<std::string_view, 10> kAllTypes{
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"};
constexpr std::array<std::string_view, 5> kAllOps{"sum", "prod", "max", "min", "avg"};
// The most sizes one sweep may have (nccl-tests' own sweeps have tens).
constexpr int64_t kMaxSweepSizes = 10000;

[[noreturn]] void bad(const std::string& flag, const std::string& expected,
                      const std::string& found) {
  static const auto where = std::make_shared<const std::string>("nccl-tests command line");
  throw InputError(SourceLocation{where, 0, 0}, flag, expected,
                   found.empty() ? "nothing" : "'" + found + "'");
}

int64_t parse_integer(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc{} || end != v.data() + v.size() || x < lo || x > hi) {
    bad(flag, fmt::format("an integer from {} to {}", lo, hi), v);
  }
  return x;
}

/// A -b/-e/-i value, or a usage error naming the flag.
int64_t parse_size(const std::string& flag, const std::string& v) {
  const std::optional<int64_t> x = parse_nccl_tests_size(v);
  if (!x) bad(flag, "a size in bytes, optionally with K, M or G (e.g. 8, 128K, 8G)", v);
  if (*x > kMaxOperationBytes) bad(flag, "a size of at most 1 PiB (1048576G)", v);
  return *x;
}

std::string format_time_us(double us) {
  // nccl-tests: "%7.0f" from 10 ms, "%7.1f" from 100 us, "%7.2f" below.
  if (us >= 10000.0) return fmt::format("{:7.0f}", us);
  if (us >= 100.0) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

bool divides_per_rank(Collective c) {
  return c == Collective::AllGather || c == Collective::ReduceScatter ||
         c == Collective::AllToAll || c == Collective::AllToAllv || c == Collective::Gather ||
         c == Collective::Scatter;
}

bool has_root(Collective c) {
  return c == Collective::Broadcast || c == Collective::Reduce || c == Collective::Gather ||
         c == Collective::Scatter;
}

bool reduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
}

}  // namespace

std::optional<int> nccl_tests_type_size(std::string_view datatype) {
  for (const DataType& t : kTypes) {
    if (t.name == datatype) return t.size;
  }
  return std::nullopt;
}

std::optional<Collective> nccl_tests_collective(std::string_view test) {
  for (const TestName& t : kTests) {
    if (t.test == test) return t.collective;
  }
  return std::nullopt;
}

NcclTestsOptions parse_nccl_tests_args(const std::vector<std::string>& args) {
  NcclTestsOptions o;
  std::string names;
  for (const TestName& t : kTests)
    names += (names.empty() ? "" : ", ") + std::string(t.test);
  if (args.empty()) bad("test", "an nccl-tests benchmark: " + names, "");
  o.test = args.front();
  const auto c = nccl_tests_collective(o.test);
  if (!c) bad("test", "an nccl-tests benchmark: " + names, o.test);
  o.collective = *c;
  bool factor_set = false;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    // Short flags take the next argument ("-b 8") or an attached value ("-b8"); long ones
    // ("--minbytes 8" or "--minbytes=8").
    const size_t eq = flag.find('=');
    if (flag.starts_with("--") && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (flag.size() > 2 && flag[0] == '-' && flag[1] != '-') {
      value = flag.substr(2);
      flag = flag.substr(0, 2);
    } else {
      if (flag.empty() || flag[0] != '-') bad(flag, "an nccl-tests flag such as -b, -e, -f", flag);
      if (i + 1 >= args.size()) bad(flag, "a value after the flag", "");
      value = args[++i];
    }
    if (flag == "-b" || flag == "--minbytes") {
      o.min_bytes = parse_size(flag, value);
    } else if (flag == "-e" || flag == "--maxbytes") {
      o.max_bytes = parse_size(flag, value);
    } else if (flag == "-i" || flag == "--stepbytes") {
      o.step_bytes = parse_size(flag, value);
      if (o.step_bytes == 0) bad(flag, "a positive step", value);
    } else if (flag == "-f" || flag == "--stepfactor") {
      o.step_factor = parse_integer(flag, value, 1, 1 << 20);
      factor_set = true;
    } else if (flag == "-n" || flag == "--iters") {
      o.iters = static_cast<int>(parse_integer(flag, value, 1, 1 << 20));
    } else if (flag == "-w" || flag == "--warmup_iters") {
      o.warmup = static_cast<int>(parse_integer(flag, value, 0, 1 << 20));
    } else if (flag == "-r" || flag == "--root") {
      o.root = static_cast<int>(parse_integer(flag, value, 0, 1 << 30));
    } else if (flag == "-d" || flag == "--datatype") {
      bool found = value == "all";
      std::string list;
      for (const DataType& t : kTypes) {
        list += (list.empty() ? "" : ", ") + std::string(t.name);
        if (t.name == value) {
          o.type_size = t.size;
          found = true;
        }
      }
      if (!found) bad(flag, "one data type: " + list + ", or all", value);
      o.datatype = value;
    } else if (flag == "-o" || flag == "--op") {
      bool found = value == "all";
      for (std::string_view op : kOps)
        found = found || op == value;
      if (!found) bad(flag, "one reduction: sum, prod, min, max, avg, mulsum, or all", value);
      o.op = value;
    } else if (flag == "-t" || flag == "-g" || flag == "-p" || flag == "-c" || flag == "-z" ||
               flag == "-a" || flag == "-m" || flag == "-G" || flag == "-C" || flag == "-R" ||
               flag == "-T" || flag == "-N" || flag == "--nthreads" || flag == "--ngpus" ||
               flag == "--parallel_init" || flag == "--check" || flag == "--blocking" ||
               flag == "--average" || flag == "--agg_iters" || flag == "--cudagraph" ||
               flag == "--report_cputime" || flag == "--local_register" || flag == "--timeout" ||
               flag == "--run_cycles") {
      parse_integer(flag, value, 0, 1 << 30);
      o.ignored.push_back(flag + " " + value);
    } else {
      bad(flag,
          "an nccl-tests flag: -b -e -i -f -n -w -r -d -o (or -t -g -p -c -z -a -m -G -C -R -T -N, "
          "accepted and ignored)",
          flag);
    }
  }
  if (o.max_bytes < o.min_bytes) {
    bad("-e", fmt::format("at least the minimum size ({} B)", o.min_bytes),
        std::to_string(o.max_bytes));
  }
  if (!factor_set) o.step_factor = 1;
  if (o.sizes.empty()) {
    // The sweep is materialised (and every size simulated): bound it before building it, so
    // that -b 8 -e 8G -i 8 is refused at once instead of filling the memory with 2^30 sizes.
    int64_t n = 1;
    if (o.step_factor > 1) {
      for (int64_t b = o.min_bytes; b > 0 && b <= o.max_bytes / o.step_factor; b *= o.step_factor)
        ++n;
    } else {
      n += (o.max_bytes - o.min_bytes) / o.step_bytes;
    }
    if (n > kMaxSweepSizes) {
      bad(o.step_factor > 1 ? "-f" : "-i",
          fmt::format("a sweep of at most {} sizes from -b {} to -e {}", kMaxSweepSizes,
                      o.min_bytes, o.max_bytes),
          o.step_factor > 1 ? std::to_string(o.step_factor) : std::to_string(o.step_bytes));
    }
  }
  if (!has_root(o.collective) && o.root != 0) o.ignored.push_back(fmt::format("-r {}", o.root));
  return o;
}

NcclTestsSize nccl_tests_size(Collective c, int64_t requested, int nranks, int type_size) {
  NcclTestsSize s;
  const int64_t count = requested / type_size;
  if (divides_per_rank(c)) {
    s.count = count / nranks;
    s.size_bytes = s.count * nranks * type_size;
  } else {
    s.count = count;
    s.size_bytes = count * type_size;
  }
  s.op_bytes = s.size_bytes;
  return s;
}

std::vector<int64_t> nccl_tests_sweep(const NcclTestsOptions& o) {
  if (!o.sizes.empty()) return o.sizes;
  std::vector<int64_t> out;
  for (int64_t b = o.min_bytes; b <= o.max_bytes;) {
    out.push_back(b);
    const int64_t next = o.step_factor > 1 ? b * o.step_factor : b + o.step_bytes;
    if (next <= b) break;  // -b 0 with a factor: nccl-tests would loop forever; one row
    b = next;
  }
  return out;
}

std::vector<NcclTestsCase> nccl_tests_cases(const NcclTestsOptions& o) {
  std::vector<std::pair<std::string, int>> types;
  if (o.datatype == "all") {
    for (std::string_view t : kAllTypes)
      types.emplace_back(std::string(t), *nccl_tests_type_size(t));
  } else {
    types.emplace_back(o.datatype, o.type_size);
  }
  std::vector<std::string> ops;
  if (!reduces(o.collective)) {
    ops.emplace_back("none");
  } else if (o.op == "all") {
    ops.assign(kAllOps.begin(), kAllOps.end());
  } else {
    ops.push_back(o.op);
  }
  const std::vector<int64_t> sizes = nccl_tests_sweep(o);
  std::vector<NcclTestsCase> out;
  for (const auto& [type, size] : types) {
    for (const std::string& op : ops) {
      for (int64_t requested : sizes)
        out.push_back({requested, type, size, op});
    }
  }
  return out;
}

// ---- the sweep ----

NcclTestsWorkload::NcclTestsWorkload(std::string name, OpRunner runner, NcclTestsOptions options)
    : Workload(std::move(name)),
      runner_(std::move(runner)),
      options_(std::move(options)),
      cases_(nccl_tests_cases(options_)) {
  ROCESIM_CHECK(!cases_.empty(), "a sweep has at least one size");
  if (has_root(options_.collective) && options_.root >= runner_.communicator().nranks()) {
    bad("-r", fmt::format("a rank below {}", runner_.communicator().nranks()),
        std::to_string(options_.root));
  }
}

void NcclTestsWorkload::start(engine::Simulation& sim, engine::WorkloadId id) {
  warmups_left_ = options_.warmup;
  size_index_ = 0;
  place_ = 0;
  op_ = 0;
  next(sim, id);
}

void NcclTestsWorkload::next(engine::Simulation& sim, engine::WorkloadId id) {
  const int n = runner_.communicator().nranks();
  const int root = has_root(options_.collective) ? options_.root : 0;
  const NcclTestsCase& k = cases_[size_index_];
  const int64_t requested = warmups_left_ > 0 ? options_.max_bytes : k.requested;
  const NcclTestsSize s = nccl_tests_size(options_.collective, requested, n, k.type_size);
  if (warmups_left_ == 0 && op_ == 0) phase_start_ = sim.now();
  runner_.start(sim, id, options_.collective, s.op_bytes, root, 0, sim.seed());
}

void NcclTestsWorkload::advance(engine::Simulation& sim, engine::WorkloadId id) {
  if (!runner_.done()) return;
  if (warmups_left_ > 0) {
    --warmups_left_;
    next(sim, id);
    return;
  }
  if (++op_ < options_.iters) {
    next(sim, id);
    return;
  }
  // A timed phase ended: nccl-tests divides the time of `iters` back-to-back operations.
  const int n = runner_.communicator().nranks();
  if (place_ == 0) {
    NcclTestsRow row;
    const NcclTestsCase& k = cases_[size_index_];
    row.size = nccl_tests_size(options_.collective, k.requested, n, k.type_size);
    row.datatype = k.datatype;
    row.op = k.op;
    row.root = has_root(options_.collective) ? options_.root : -1;
    const OpResult& r = runner_.result();
    row.algorithm = r.algorithm;
    row.protocol = r.protocol;
    row.channels = r.channels;
    row.nccl_model_us = r.model_us;
    rows_.push_back(row);
  }
  NcclTestsRow& row = rows_.back();
  spans_.push_back(
      {name(), place_ == 0 ? "out of place" : "in place",
       fmt::format("{} {} B x {} ({}/{})", options_.test, row.size.size_bytes, options_.iters,
                   path_name(options_.collective, runner_.communicator().nranks(), row.algorithm,
                             row.size.size_bytes),
                   path_protocol_name(options_.collective, row.protocol, row.size.size_bytes)),
       phase_start_, sim.now()});
  const double us = (sim.now() - phase_start_).in_us() / options_.iters;
  row.time_us[place_] = us;
  row.algbw_GBps[place_] = us > 0 ? static_cast<double>(row.size.size_bytes) / us * 1e-3 : 0;
  row.busbw_GBps[place_] = row.algbw_GBps[place_] * busbw_factor(options_.collective, n);
  op_ = 0;
  if (place_ == 0) {
    place_ = 1;
  } else {
    place_ = 0;
    if (++size_index_ == cases_.size()) {
      sim.finish(id);
      return;
    }
  }
  next(sim, id);
}

void NcclTestsWorkload::on_transfer_done(engine::Simulation& sim, engine::WorkloadId id,
                                         uint64_t tag) {
  runner_.on_transfer_done(sim, id, tag);
  advance(sim, id);
}

void NcclTestsWorkload::on_timer(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) {
  runner_.on_timer(sim, id, tag);
  advance(sim, id);
}

void NcclTestsWorkload::figures(engine::WorkloadFigures& out, Time) const {
  out.add("ranks", runner_.communicator().nranks());
  out.add("sizes", static_cast<double>(rows_.size()));
  out.add("avg_busbw_GBps", average_busbw(rows_));
  out.note("test", options_.test);
}

double average_busbw(const std::vector<NcclTestsRow>& rows) {
  if (rows.empty()) return 0;
  double sum = 0;
  for (const NcclTestsRow& r : rows)
    sum += r.busbw_GBps[0] + r.busbw_GBps[1];
  return sum / (2.0 * static_cast<double>(rows.size()));
}

std::optional<int64_t> parse_nccl_tests_size(std::string_view text) {
  std::string digits(text);
  int64_t unit = 1;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K':
      case 'k':
        unit = int64_t{1} << 10;
        break;
      case 'M':
      case 'm':
        unit = int64_t{1} << 20;
        break;
      case 'G':
      case 'g':
        unit = int64_t{1} << 30;
        break;
      default:
        break;
    }
    if (unit != 1) digits.pop_back();
  }
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), x);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() || x < 0 ||
      x > std::numeric_limits<int64_t>::max() / unit) {
    return std::nullopt;
  }
  return x * unit;
}

std::string_view nccl_tests_column_header() {
  return "#                                                              out-of-place              "
         "  "
         "       in-place          \n"
         "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
         "time   algbw   busbw #wrong\n"
         "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
         "(us)  (GB/s)  (GB/s)       \n";
}

namespace {

// NCCL's names in its logs (ncclFuncToString, ncclAlgoToString, ncclProtoToString).
std::string_view nccl_func_name(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return "AllReduce";
    case Collective::AllGather:
      return "AllGather";
    case Collective::ReduceScatter:
      return "ReduceScatter";
    case Collective::Broadcast:
      return "Broadcast";
    case Collective::Reduce:
      return "Reduce";
    default:
      return "SendRecv";
  }
}

std::string nccl_algo_name(Algorithm a) {
  switch (a) {
    case Algorithm::CollNetDirect:
      return "COLLNET_DIRECT";
    case Algorithm::CollNetChain:
      return "COLLNET_CHAIN";
    case Algorithm::NvlsTree:
      return "NVLS_TREE";
    default: {
      std::string n(algorithm_name(a));
      for (char& ch : n)
        ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      return n;
    }
  }
}

}  // namespace

std::string format_nccl_tests(const NcclTestsOptions& o, const std::vector<NcclTestsRow>& rows,
                              const std::vector<std::string>& gpu_names, const std::string& banner,
                              const NcclDebugLog* log) {
  std::string out = fmt::format("# Collective test starting: {}\n", o.test);
  const std::string step = o.step_factor > 1 ? fmt::format("{}(factor)", o.step_factor)
                                             : fmt::format("{}(bytes)", o.step_bytes);
  out += fmt::format(
      "# nThread 1 nGpus 1 minBytes {} maxBytes {} step: {} warmup iters: {} iters: {} agg iters: "
      "1 validation: 0 graph: 0\n",
      o.min_bytes, o.max_bytes, step, o.warmup, o.iters);
  out += "#\n";
  out += fmt::format("# {}\n", banner);
  if (!o.ignored.empty()) {
    std::string ignored;
    for (const std::string& s : o.ignored)
      ignored += (ignored.empty() ? "" : ", ") + s;
    out += fmt::format("# Ignored (the communicator is the scenario's job): {}\n", ignored);
  }
  out += "#\n# Using devices\n";
  for (size_t r = 0; r < gpu_names.size(); ++r) {
    const std::string& g = gpu_names[r];
    const size_t slash = g.find('/');
    const std::string host = slash == std::string::npos ? g : g.substr(0, slash);
    const std::string dev = slash == std::string::npos ? "gpu" : g.substr(slash + 1);
    out += fmt::format("#  Rank {:2d} Group  0 Pid {:6d} on {:>10s} device {:2d} [{}] simulated\n",
                       r, 0, host, 0, dev);
  }
  if (log != nullptr) {
    for (const std::string& line : log->init)
      out += log->prefix + line + "\n";
  }
  out += "#\n";
  out += nccl_tests_column_header();
  const bool tuning = log != nullptr && log->tuning && !is_p2p(o.collective);
  for (const NcclTestsRow& r : rows) {
    // NCCL logs its tuner's choice and its own estimate as it launches the size (none for a
    // size of no elements, which it does not launch).
    if (tuning && !is_noop(o.collective, r.size.size_bytes)) {
      out +=
          fmt::format("{}{}: {} Bytes -> Algo {} proto {} channels {} time {:.6f}\n", log->prefix,
                      nccl_func_name(o.collective), r.size.size_bytes, nccl_algo_name(r.algorithm),
                      r.protocol == Protocol::Simple ? std::string("SIMPLE")
                                                     : std::string(protocol_name(r.protocol)),
                      r.channels, r.nccl_model_us);
    }
    out += fmt::format("{:12d}  {:12d}  {:>8s}  {:>6s}  {:6d}", r.size.size_bytes, r.size.count,
                       r.datatype, r.op, r.root);
    for (int k = 0; k < 2; ++k) {
      out += fmt::format("  {}  {:6.2f}  {:6.2f}  {:>5s}", format_time_us(r.time_us[k]),
                         r.algbw_GBps[k], r.busbw_GBps[k], "N/A");
    }
    out += "\n";
  }
  out += "# Out of bounds values : 0 OK\n";
  out += fmt::format("# Avg bus bandwidth    : {:g} \n", average_busbw(rows));
  out += "#\n";
  return out;
}

}  // namespace rocesim::collectives::nccl
