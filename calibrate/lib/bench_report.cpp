#include "calibrate/lib/bench_report.hpp"

#include <fmt/format.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "sim/collectives/nccl/collective.hpp"
#include "sim/collectives/nccl/nccl_tests.hpp"
#include "sim/core/config.hpp"
#include "sim/scenario/yaml_source.hpp"
#include "validation/lib/nccl_tests_log.hpp"
#include "validation/lib/validate.hpp"

namespace rocesim::calibrate {
namespace {

namespace fs = std::filesystem;
using collectives::nccl::Collective;

struct CollectiveNames {
  BenchCollective c;
  std::string_view option;
  std::string_view canonical;
  std::string_view binary;
  Collective sim;
};
constexpr std::array<CollectiveNames, 6> kNames{{
    {BenchCollective::AllReduce, "all_reduce", "allreduce", "all_reduce_perf",
     Collective::AllReduce},
    {BenchCollective::AllGather, "all_gather", "allgather", "all_gather_perf",
     Collective::AllGather},
    {BenchCollective::ReduceScatter, "reduce_scatter", "reducescatter", "reduce_scatter_perf",
     Collective::ReduceScatter},
    {BenchCollective::AlltoAll, "alltoall", "alltoall", "alltoall_perf", Collective::AllToAll},
    {BenchCollective::SendRecv, "sendrecv", "sendrecv", "sendrecv_perf", Collective::SendRecv},
    {BenchCollective::Broadcast, "broadcast", "broadcast", "broadcast_perf", Collective::Broadcast},
}};

const CollectiveNames& names(BenchCollective c) {
  for (const CollectiveNames& n : kNames) {
    if (n.c == c) return n;
  }
  return kNames.front();
}

// Separators of encode_rank_record(): ASCII unit, record, group and file separators, which no
// host name, device name or sysfs value contains (they are replaced if one does).
constexpr char kField = '\x1f';
constexpr char kNic = '\x1e';
constexpr char kPort = '\x1d';
constexpr char kPortField = '\x1c';

std::string clean(std::string_view s) {
  std::string out(s);
  for (char& ch : out) {
    if (ch == kField || ch == kNic || ch == kPort || ch == kPortField || ch == '\n') ch = '?';
  }
  return out;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(sep, start);
    if (end == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
}

template <typename T>
std::optional<T> parse_number(std::string_view s) {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string trim(std::string s) {
  const auto space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; };
  while (!s.empty() && space(s.back()))
    s.pop_back();
  size_t i = 0;
  while (i < s.size() && space(s[i]))
    ++i;
  return s.substr(i);
}

std::string read_small_file(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return trim(ss.str());
}

std::string format_time_us(double us) {
  // nccl-tests: "%7.0f" from 10 ms, "%7.1f" from 100 us, "%7.2f" below.
  if (us >= 10000.0) return fmt::format("{:7.0f}", us);
  if (us >= 100.0) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

double round_to(double x, double unit) {
  return std::round(x / unit) * unit;
}

// ---- YAML emission helpers ----

void key_value(YAML::Emitter& out, const char* key, const std::string& value) {
  out << YAML::Key << key << YAML::Value << value;
}
void key_value(YAML::Emitter& out, const char* key, int64_t value) {
  out << YAML::Key << key << YAML::Value << value;
}
void key_value(YAML::Emitter& out, const char* key, double value) {
  out << YAML::Key << key << YAML::Value << value;
}
template <typename T>
void key_optional(YAML::Emitter& out, const char* key, const std::optional<T>& value) {
  out << YAML::Key << key << YAML::Value;
  if (value) {
    out << *value;
  } else {
    out << YAML::Null;
  }
}
void key_text_or_null(YAML::Emitter& out, const char* key, const std::string& value) {
  out << YAML::Key << key << YAML::Value;
  if (value.empty()) {
    out << YAML::Null;
  } else {
    out << YAML::DoubleQuoted << value;
  }
}

void emit_stats(YAML::Emitter& out, const TimeStats& t, double algbw, double busbw) {
  key_value(out, "time_us_mean", round_to(t.mean_us, 1e-3));
  key_value(out, "time_us_min", round_to(t.min_us, 1e-3));
  key_value(out, "time_us_median", round_to(t.median_us, 1e-3));
  key_value(out, "time_us_p99", round_to(t.p99_us, 1e-3));
  key_value(out, "time_us_max", round_to(t.max_us, 1e-3));
  key_value(out, "algbw_mean", round_to(algbw, 1e-4));
  key_value(out, "busbw_mean", round_to(busbw, 1e-4));
}

// ---- reading helpers ----

[[noreturn]] void bad_value(const ConfigNode& n, const std::string& expected) {
  throw InputError(n.where(), n.path(), expected, n.describe());
}

const ConfigNode& required(const ConfigNode& map, std::string_view key) {
  const ConfigNode* n = map.find(key);
  if (n == nullptr) {
    throw InputError(map.named_at(), config_path(map.path(), key), fmt::format("a '{}' entry", key),
                     "no such key");
  }
  return *n;
}

double real_value(const ConfigNode& n) {
  const auto v = n.is_scalar() ? parse_number<double>(n.value()) : std::nullopt;
  if (!v || !std::isfinite(*v) || *v < 0) bad_value(n, "a non-negative number");
  return *v;
}

int64_t whole_value(const ConfigNode& n) {
  const auto v = n.is_scalar() ? parse_number<int64_t>(n.value()) : std::nullopt;
  if (!v || *v < 0) bad_value(n, "a non-negative whole number");
  return *v;
}

TimeStats read_time_stats(const ConfigNode& m) {
  TimeStats t;
  t.mean_us = real_value(required(m, "time_us_mean"));
  t.min_us = real_value(required(m, "time_us_min"));
  t.median_us = real_value(required(m, "time_us_median"));
  t.p99_us = real_value(required(m, "time_us_p99"));
  if (const ConfigNode* n = m.find("time_us_max")) t.max_us = real_value(*n);
  return t;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Collectives

std::optional<BenchCollective> parse_bench_collective(std::string_view name) {
  const std::string canonical = validation::normalise_collective(name);
  for (const CollectiveNames& n : kNames) {
    if (n.canonical == canonical) return n.c;
  }
  return std::nullopt;
}

std::string_view bench_option_name(BenchCollective c) {
  return names(c).option;
}
std::string_view bench_canonical_name(BenchCollective c) {
  return names(c).canonical;
}
std::string_view bench_binary(BenchCollective c) {
  return names(c).binary;
}
Collective sim_collective(BenchCollective c) {
  return names(c).sim;
}

bool bench_reduces(BenchCollective c) {
  return c == BenchCollective::AllReduce || c == BenchCollective::ReduceScatter;
}

bool bench_has_root(BenchCollective c) {
  return c == BenchCollective::Broadcast;
}

double bench_busbw_factor(BenchCollective c, int nranks) {
  // nccl-tests: factor 1 for Broadcast and SendRecv whatever the rank count (the simulator's
  // busbw_factor gives 0 on one rank, where it never runs them).
  if (c == BenchCollective::Broadcast || c == BenchCollective::SendRecv) return 1;
  return collectives::nccl::busbw_factor(sim_collective(c), nranks);
}

// ---------------------------------------------------------------------------------------------
// Sizes

std::vector<int64_t> bench_sweep(const BenchSweep& s) {
  collectives::nccl::NcclTestsOptions o;
  o.min_bytes = s.min_bytes;
  o.max_bytes = s.max_bytes;
  o.step_bytes = s.step_bytes;
  o.step_factor = s.step_factor;
  return collectives::nccl::nccl_tests_sweep(o);
}

BenchSize bench_size(BenchCollective c, int64_t requested_bytes, int nranks, int type_size) {
  if (nranks < 1 || type_size < 1 || requested_bytes < 0)
    throw std::invalid_argument("bench_size: ranks and type size must be positive");
  const collectives::nccl::NcclTestsSize s =
      collectives::nccl::nccl_tests_size(sim_collective(c), requested_bytes, nranks, type_size);
  BenchSize b;
  b.requested_bytes = requested_bytes;
  b.size_bytes = s.size_bytes;
  b.count = s.count;
  const int64_t per_rank = s.count * type_size;
  switch (c) {
    case BenchCollective::AllGather:
      b.send_bytes = per_rank;  // each rank's part; the result is every part
      b.recv_bytes = s.size_bytes;
      break;
    case BenchCollective::ReduceScatter:
      b.send_bytes = s.size_bytes;  // the whole input; each rank keeps its reduced part
      b.recv_bytes = per_rank;
      break;
    default:  // AllReduce, AlltoAll (count per peer, size over all peers), SendRecv, Broadcast
      b.send_bytes = s.size_bytes;
      b.recv_bytes = s.size_bytes;
      break;
  }
  return b;
}

// ---------------------------------------------------------------------------------------------
// Statistics

TimeStats time_stats(std::vector<double> samples_us) {
  if (samples_us.empty()) throw std::invalid_argument("time_stats: no samples");
  for (const double x : samples_us) {
    if (!std::isfinite(x) || x < 0)
      throw std::invalid_argument(fmt::format("time_stats: sample {} is not a time", x));
  }
  std::sort(samples_us.begin(), samples_us.end());
  TimeStats t;
  t.samples = samples_us.size();
  double sum = 0;
  for (const double x : samples_us)
    sum += x;
  t.mean_us = sum / static_cast<double>(samples_us.size());
  t.min_us = samples_us.front();
  t.max_us = samples_us.back();
  t.median_us = validation::percentile(samples_us, 0.5);
  t.p99_us = validation::percentile(samples_us, 0.99);
  return t;
}

double algbw_GBps(int64_t size_bytes, double time_us) {
  return time_us > 0 ? static_cast<double>(size_bytes) / time_us * 1e-3 : 0;
}

// ---------------------------------------------------------------------------------------------
// Machines

bool NicDevice::active() const {
  return std::any_of(ports.begin(), ports.end(),
                     [](const NicPort& p) { return p.state == "ACTIVE"; });
}

std::vector<NicDevice> list_rdma_devices(const std::string& sysfs_root) {
  std::vector<NicDevice> out;
  std::error_code ec;
  if (!fs::is_directory(sysfs_root, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(sysfs_root, ec)) {
    NicDevice d;
    d.name = e.path().filename().string();
    const fs::path ports = e.path() / "ports";
    std::error_code pec;
    if (fs::is_directory(ports, pec)) {
      for (const fs::directory_entry& p : fs::directory_iterator(ports, pec)) {
        const auto number = parse_number<int>(p.path().filename().string());
        if (!number) continue;
        NicPort port;
        port.port = *number;
        port.state = read_small_file(p.path() / "state");
        if (const size_t colon = port.state.find(": "); colon != std::string::npos)
          port.state = port.state.substr(colon + 2);  // "4: ACTIVE"
        port.link_layer = read_small_file(p.path() / "link_layer");
        const std::string rate = read_small_file(p.path() / "rate");  // "400 Gb/sec (4X NDR)"
        const std::string number_text = rate.substr(0, rate.find(' '));
        port.rate_gbps = parse_number<double>(number_text).value_or(0);
        d.ports.push_back(std::move(port));
      }
      std::sort(d.ports.begin(), d.ports.end(),
                [](const NicPort& a, const NicPort& b) { return a.port < b.port; });
    }
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(),
            [](const NicDevice& a, const NicDevice& b) { return a.name < b.name; });
  return out;
}

std::string encode_rank_record(const RankRecord& r) {
  std::string nics;
  for (size_t i = 0; i < r.nics.size(); ++i) {
    if (i > 0) nics += kNic;
    nics += clean(r.nics[i].name);
    for (const NicPort& p : r.nics[i].ports) {
      nics += kPort;
      nics += fmt::format("{}{}{}{}{}{}{}", p.port, kPortField, clean(p.state), kPortField,
                          clean(p.link_layer), kPortField, p.rate_gbps);
    }
  }
  return fmt::format("{1}{0}{2}{0}{3}{0}{4}{0}{5}{0}{6}{0}{7}", kField, r.rank, clean(r.host),
                     r.pid, r.device, clean(r.bus_id), clean(r.gpu), nics);
}

RankRecord decode_rank_record(std::string_view text) {
  const std::vector<std::string_view> f = split(text, kField);
  const auto fail = [&](const std::string& what) -> std::invalid_argument {
    return std::invalid_argument("malformed rank record (" + what + ")");
  };
  if (f.size() != 7) throw fail(fmt::format("{} fields, expected 7", f.size()));
  RankRecord r;
  const auto rank = parse_number<int>(f[0]);
  const auto pid = parse_number<int64_t>(f[2]);
  const auto device = parse_number<int>(f[3]);
  if (!rank || !pid || !device) throw fail("rank, pid or device is not a number");
  r.rank = *rank;
  r.host = std::string(f[1]);
  r.pid = *pid;
  r.device = *device;
  r.bus_id = std::string(f[4]);
  r.gpu = std::string(f[5]);
  if (!f[6].empty()) {
    for (const std::string_view nic : split(f[6], kNic)) {
      const std::vector<std::string_view> parts = split(nic, kPort);
      NicDevice d;
      d.name = std::string(parts[0]);
      for (size_t k = 1; k < parts.size(); ++k) {
        const std::vector<std::string_view> pf = split(parts[k], kPortField);
        if (pf.size() != 4) throw fail("a NIC port");
        NicPort p;
        const auto number = parse_number<int>(pf[0]);
        const auto rate = parse_number<double>(pf[3]);
        if (!number || !rate) throw fail("a NIC port number or rate");
        p.port = *number;
        p.state = std::string(pf[1]);
        p.link_layer = std::string(pf[2]);
        p.rate_gbps = *rate;
        d.ports.push_back(std::move(p));
      }
      r.nics.push_back(std::move(d));
    }
  }
  return r;
}

std::vector<std::pair<std::string, std::string>> nccl_environment(const char* const* envp) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (!entry.starts_with("NCCL_")) continue;
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    out.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string nccl_version_string(int code) {
  // NCCL_VERSION(X,Y,Z): X*10000 + Y*100 + Z from 2.9, X*1000 + Y*100 + Z before.
  if (code >= 10000) return fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100);
}

// ---------------------------------------------------------------------------------------------
// Runs and tables

RunSummary summarize(const BenchRun& run) {
  RunSummary s;
  std::map<std::string, int> ranks_on;
  std::map<std::string, const RankRecord*> first_on;
  std::vector<std::string> gpus;
  for (const RankRecord& r : run.ranks) {
    if (ranks_on[r.host]++ == 0) {
      s.hosts.push_back(r.host);
      first_on[r.host] = &r;
    }
    if (std::find(gpus.begin(), gpus.end(), r.gpu) == gpus.end()) gpus.push_back(r.gpu);
  }
  s.nodes = static_cast<int>(s.hosts.size());
  if (!s.hosts.empty()) {
    const int per = ranks_on[s.hosts.front()];
    if (std::all_of(ranks_on.begin(), ranks_on.end(),
                    [&](const auto& kv) { return kv.second == per; }))
      s.gpus_per_node = per;
  }
  if (gpus.size() == 1) {
    s.gpu = gpus.front();
  } else if (gpus.size() > 1) {
    s.gpu = "mixed: ";
    for (size_t i = 0; i < gpus.size(); ++i)
      s.gpu += (i > 0 ? ", " : "") + gpus[i];
  }

  std::set<int> active_counts;
  std::set<double> rates;
  std::set<std::string> layers;
  size_t active_ports = 0;
  for (const std::string& host : s.hosts) {
    int active = 0;
    for (const NicDevice& d : first_on[host]->nics) {
      if (d.active()) ++active;
      for (const NicPort& p : d.ports) {
        if (p.state != "ACTIVE") continue;
        ++active_ports;
        rates.insert(p.rate_gbps);
        layers.insert(p.link_layer);
      }
    }
    active_counts.insert(active);
  }
  if (active_counts.size() == 1) s.nics_per_node = *active_counts.begin();
  if (active_ports > 0 && rates.size() == 1 && *rates.begin() > 0)
    s.nic_speed_gbps = *rates.begin();
  if (active_ports > 0 && layers.size() == 1) {
    if (*layers.begin() == "InfiniBand") s.fabric = "InfiniBand";
    if (*layers.begin() == "Ethernet") s.fabric = "RoCE";
  }
  return s;
}

BenchRow make_bench_row(BenchCollective c, const BenchSize& size, int root, int nranks,
                        const TimeStats& out_of_place, const TimeStats& in_place) {
  BenchRow row;
  row.size = size;
  row.root = bench_has_root(c) ? root : -1;
  row.time[0] = out_of_place;
  row.time[1] = in_place;
  for (int k = 0; k < 2; ++k) {
    row.algbw_GBps[k] = algbw_GBps(size.size_bytes, row.time[k].mean_us);
    row.busbw_GBps[k] = row.algbw_GBps[k] * bench_busbw_factor(c, nranks);
  }
  return row;
}

std::string format_table_header(const BenchRun& run, BenchCollective c) {
  std::string out =
      fmt::format("# rocesim-bench {}: NCCL collectives on GPUs, nccl-tests table format\n",
                  run.rocesim_version.empty() ? "(unknown version)" : run.rocesim_version);
  out += fmt::format("# Collective test starting: {}\n", bench_binary(c));
  const BenchSweep& s = run.sweep;
  const std::string step = s.step_factor > 1 ? fmt::format("{}(factor)", s.step_factor)
                                             : fmt::format("{}(bytes)", s.step_bytes);
  out += fmt::format(
      "# nThread 1 nGpus {} minBytes {} maxBytes {} step: {} warmup iters: {} iters: {} agg "
      "iters: 1 validation: 0 graph: 0\n",
      run.gpus_per_process, s.min_bytes, s.max_bytes, step, run.warmup, run.iters);
  out += "#\n";
  if (run.requested_max_bytes) {
    out += fmt::format("# Reducing maxBytes to {} due to memory limitation\n#\n", s.max_bytes);
  }
  if (!run.nccl_version.empty()) out += fmt::format("# NCCL version {}\n", run.nccl_version);
  out +=
      "# Timing: a CUDA event pair around every iteration, the slowest rank per iteration; time "
      "is the mean over the iterations\n";
  out += "#\n# Using devices\n";
  for (const RankRecord& r : run.ranks) {
    out += fmt::format("#  Rank {:2d} Group  0 Pid {:6d} on {:>10s} device {:2d} [{}] {}\n", r.rank,
                       r.pid, r.host, r.device, r.bus_id.empty() ? "unknown" : r.bus_id, r.gpu);
  }
  out += "#\n";
  out += collectives::nccl::nccl_tests_column_header();
  return out;
}

std::string format_table_row(const BenchRun& run, BenchCollective c, const BenchRow& row) {
  const std::string redop = bench_reduces(c) ? run.redop : "none";
  std::string out = fmt::format("{:12d}  {:12d}  {:>8s}  {:>6s}  {:6d}", row.size.size_bytes,
                                row.size.count, run.datatype, redop, row.root);
  for (int k = 0; k < 2; ++k) {
    out += fmt::format("  {}  {:6.2f}  {:6.2f}  {:>5s}", format_time_us(row.time[k].mean_us),
                       row.algbw_GBps[k], row.busbw_GBps[k], "N/A");
  }
  out += "\n";
  return out;
}

double average_busbw(const std::vector<BenchRow>& rows) {
  if (rows.empty()) return 0;
  double sum = 0;
  for (const BenchRow& r : rows)
    sum += r.busbw_GBps[0] + r.busbw_GBps[1];
  return sum / (2.0 * static_cast<double>(rows.size()));
}

std::string format_table_footer(BenchCollective c, const std::vector<BenchRow>& rows) {
  std::string out = "# Out of bounds values : 0 OK\n";
  out += fmt::format("# Avg bus bandwidth    : {:g} \n", average_busbw(rows));
  out += "#\n";
  out += fmt::format("# Collective test concluded: {}\n", bench_binary(c));
  return out;
}

std::string format_bench_table(const BenchRun& run, BenchCollective c,
                               const std::vector<BenchRow>& rows) {
  std::string out = format_table_header(run, c);
  for (const BenchRow& r : rows)
    out += format_table_row(run, c, r);
  out += format_table_footer(c, rows);
  return out;
}

std::string bench_table_name(const BenchRun& run, BenchCollective c) {
  std::string prefix = run.name;
  if (prefix.empty()) {
    const RunSummary s = summarize(run);
    prefix = fmt::format("{}node{}_{}rank{}", s.nodes, s.nodes == 1 ? "" : "s", run.nranks(),
                         run.nranks() == 1 ? "" : "s");
  }
  return fmt::format("{}_{}", prefix, bench_canonical_name(c));
}

std::string bench_dataset_yaml(const BenchRun& run, const std::vector<BenchTable>& tables) {
  const RunSummary s = summarize(run);
  YAML::Emitter out;
  out.SetDoublePrecision(15);
  out << YAML::BeginMap;
  key_value(out, "source", std::string("rocesim-bench"));
  key_value(out, "format", std::string("rocesim-bench/1"));
  key_value(out, "measurement_kind", std::string("rocesim-bench"));
  key_text_or_null(out, "rocesim_version", run.rocesim_version);
  out << YAML::Key << "tables" << YAML::Value << YAML::BeginSeq;
  for (const BenchTable& t : tables) {
    const BenchCollective c = t.collective;
    out << YAML::BeginMap;
    key_value(out, "name", bench_table_name(run, c));
    key_value(out, "binary", std::string(bench_binary(c)));
    key_value(out, "collective", std::string(bench_canonical_name(c)));
    key_value(out, "mode", run.mode);
    key_value(out, "total_ranks", int64_t{run.nranks()});
    key_value(out, "nodes", int64_t{s.nodes});
    key_optional(out, "gpus_per_node", s.gpus_per_node);
    key_value(out, "gpus_per_process", int64_t{run.gpus_per_process});
    out << YAML::Key << "hosts" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& h : s.hosts)
      out << h;
    out << YAML::EndSeq;
    key_value(out, "gpu", s.gpu);
    key_optional(out, "nics_per_node", s.nics_per_node);
    key_optional(out, "nic_speed_gbps", s.nic_speed_gbps);
    key_optional(out, "fabric", s.fabric);
    out << YAML::Key << "nic_devices" << YAML::Value << YAML::BeginMap;
    for (const std::string& h : s.hosts) {
      const auto first = std::find_if(run.ranks.begin(), run.ranks.end(),
                                      [&](const RankRecord& r) { return r.host == h; });
      out << YAML::Key << h << YAML::Value << YAML::BeginSeq;
      for (const NicDevice& d : first->nics) {
        out << YAML::Flow << YAML::BeginMap;
        key_value(out, "name", d.name);
        out << YAML::Key << "ports" << YAML::Value << YAML::BeginSeq;
        for (const NicPort& p : d.ports) {
          out << YAML::BeginMap;
          key_value(out, "port", int64_t{p.port});
          key_value(out, "state", p.state);
          key_value(out, "link_layer", p.link_layer);
          key_value(out, "rate_gbps", p.rate_gbps);
          out << YAML::EndMap;
        }
        out << YAML::EndSeq << YAML::EndMap;
      }
      out << YAML::EndSeq;
    }
    out << YAML::EndMap;
    key_text_or_null(out, "nccl_version", run.nccl_version);
    key_text_or_null(out, "cuda_runtime", run.cuda_runtime);
    key_text_or_null(out, "cuda_driver", run.cuda_driver);
    key_text_or_null(out, "mpi", run.mpi_library);
    key_value(out, "datatype", run.datatype);
    key_value(out, "type_size", int64_t{run.type_size});
    key_value(out, "redop", bench_reduces(c) ? run.redop : std::string("none"));
    key_value(out, "root", int64_t{bench_has_root(c) ? run.root : -1});
    key_value(out, "command", run.command);
    out << YAML::Key << "env" << YAML::Value;
    if (run.env.empty()) {
      out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
    } else {
      out << YAML::BeginMap;
      for (const auto& [k, v] : run.env)
        out << YAML::Key << k << YAML::Value << YAML::DoubleQuoted << v;
      out << YAML::EndMap;
    }
    out << YAML::Key << "iters" << YAML::Value << YAML::Flow << YAML::BeginMap;
    key_value(out, "warmup", int64_t{run.warmup});
    key_value(out, "iters", int64_t{run.iters});
    out << YAML::EndMap;
    key_value(out, "warmup_iters", int64_t{run.warmup});
    out << YAML::Key << "sweep" << YAML::Value << YAML::Flow << YAML::BeginMap;
    key_value(out, "min_bytes", run.sweep.min_bytes);
    key_value(out, "max_bytes", run.sweep.max_bytes);
    if (run.sweep.step_factor > 1) {
      key_value(out, "step_factor", run.sweep.step_factor);
    } else {
      key_value(out, "step_bytes", run.sweep.step_bytes);
    }
    key_optional(out, "requested_max_bytes", run.requested_max_bytes);
    out << YAML::EndMap;
    out << YAML::Key << "timing" << YAML::Value << YAML::Flow << YAML::BeginMap;
    key_value(out, "per_iteration", std::string("cuda_event_pair"));
    key_value(out, "over_ranks", std::string("max"));
    key_value(out, "time_column", std::string("mean"));
    key_value(out, "percentile", std::string("linear_interpolation"));
    out << YAML::EndMap;
    out << YAML::Key << "in_place" << YAML::Value << true;
    out << YAML::Key << "ranks" << YAML::Value << YAML::BeginSeq;
    for (const RankRecord& r : run.ranks) {
      out << YAML::Flow << YAML::BeginMap;
      key_value(out, "rank", int64_t{r.rank});
      key_value(out, "host", r.host);
      key_value(out, "pid", r.pid);
      key_value(out, "device", int64_t{r.device});
      // Quoted: YAML 1.1 readers (PyYAML) take 0000:1b:00.0 for a base-60 number.
      out << YAML::Key << "bus_id" << YAML::Value << YAML::DoubleQuoted << r.bus_id;
      key_value(out, "gpu", r.gpu);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
    out << YAML::Key << "stats" << YAML::Value << YAML::BeginSeq;
    for (const BenchRow& r : t.rows) {
      out << YAML::Flow << YAML::BeginMap;
      key_value(out, "size_bytes", r.size.size_bytes);
      key_value(out, "count", r.size.count);
      key_value(out, "samples", static_cast<int64_t>(r.time[0].samples));
      emit_stats(out, r.time[0], r.algbw_GBps[0], r.busbw_GBps[0]);
      out << YAML::Key << "in_place" << YAML::Value << YAML::BeginMap;
      emit_stats(out, r.time[1], r.algbw_GBps[1], r.busbw_GBps[1]);
      out << YAML::EndMap;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
    out << YAML::Key << "raw_table_verbatim" << YAML::Value << YAML::Literal << t.text;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::EndMap;
  if (!out.good()) throw std::logic_error("bench_dataset_yaml: " + out.GetLastError());
  return "# Written by rocesim-bench (calibrate/bench/README.md). Read by `rocesim validate "
         "--measured` and `rocesim calibrate fit --measured`.\n" +
         std::string(out.c_str()) + "\n";
}

std::optional<std::string> output_problem(const std::string& path) {
  const fs::path p(path);
  const std::string ext = p.extension().string();
  if (ext != ".yaml" && ext != ".yml") {
    return fmt::format(
        "'{}' does not end in .yaml or .yml (rocesim validate reads measured datasets by that "
        "name)",
        path);
  }
  std::error_code ec;
  if (fs::is_directory(p, ec)) return fmt::format("'{}' is a directory", path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    return fmt::format("the directory '{}' does not exist", dir.string());
  const std::string probe = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream f(probe, std::ios::binary | std::ios::trunc);
    if (!f) return fmt::format("'{}' cannot be created: {}", probe, std::strerror(errno));
  }
  fs::remove(probe, ec);
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Reading

std::vector<BenchStatsTable> read_bench_dataset(const std::string& path) {
  const ConfigNode root = scenario::load_yaml_file(path, "");
  if (!root.is_map()) bad_value(root, "a rocesim-bench dataset (a mapping)");
  const ConfigNode& format = required(root, "format");
  if (!format.is_scalar() || format.value() != "rocesim-bench/1")
    bad_value(format, "rocesim-bench/1 (a file written by rocesim-bench)");
  const ConfigNode& tables = required(root, "tables");
  if (!tables.is_sequence()) bad_value(tables, "a list of tables");

  std::vector<BenchStatsTable> out;
  for (const ConfigNode& entry : tables.items()) {
    if (!entry.is_map()) bad_value(entry, "a mapping describing one table");
    BenchStatsTable t;
    if (const ConfigNode* n = entry.find("name"); n != nullptr && n->is_scalar())
      t.name = n->value();
    const ConfigNode& c = required(entry, "collective");
    t.collective = c.is_scalar() ? validation::normalise_collective(c.value()) : "";
    if (t.collective.empty()) bad_value(c, "a collective name such as allreduce");
    t.total_ranks = static_cast<int>(whole_value(required(entry, "total_ranks")));
    t.nodes = static_cast<int>(whole_value(required(entry, "nodes")));
    const ConfigNode& stats = required(entry, "stats");
    if (!stats.is_sequence()) bad_value(stats, "a list of per-size statistics");
    for (const ConfigNode& s : stats.items()) {
      if (!s.is_map()) bad_value(s, "a mapping {size_bytes, count, time_us_mean, ...}");
      BenchStatsRow r;
      r.size_bytes = whole_value(required(s, "size_bytes"));
      r.count = whole_value(required(s, "count"));
      const TimeStats oop = read_time_stats(s);
      r.time_us_mean = oop.mean_us;
      r.time_us_min = oop.min_us;
      r.time_us_median = oop.median_us;
      r.time_us_p99 = oop.p99_us;
      r.time_us_max = oop.max_us;
      r.busbw_mean = real_value(required(s, "busbw_mean"));
      if (const ConfigNode* n = s.find("samples")) r.samples = whole_value(*n);
      if (const ConfigNode* ip = s.find("in_place"); ip != nullptr && !ip->is_null()) {
        if (!ip->is_map()) bad_value(*ip, "a mapping {time_us_mean, ..., busbw_mean}");
        TimeStats in = read_time_stats(*ip);
        in.samples = static_cast<size_t>(r.samples);
        r.in_place = in;
        r.in_place_busbw_mean = real_value(required(*ip, "busbw_mean"));
      }
      t.stats.push_back(std::move(r));
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace rocesim::calibrate
