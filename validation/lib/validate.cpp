#include "validation/lib/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <limits>
#include <map>
#include <optional>

#include "sim/collectives/nccl/nccl_tests.hpp"
#include "sim/scenario/scenario.hpp"

namespace rocesim::validation {
namespace {

namespace nccl = collectives::nccl;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::string_view kBands[] = {"<1MiB", "1-64MiB", ">=64MiB"};

bool is_dataset(const std::string& path) {
  // By name, not by content: a YAML file without its `tables:` list is a broken dataset (an error
  // saying so), not a log without rows.
  const std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".yaml" || ext == ".yml";
}

/// The scenario without its workloads: validation runs its own.
std::unique_ptr<scenario::ScenarioRun> load_without_workloads(const std::string& path,
                                                              scenario::Overrides overrides) {
  overrides.skip_workloads = true;
  return scenario::load_scenario(path, overrides);
}

/// The table's NCCL environment, split into what the NCCL model reads and the rest.
nccl::NcclConfig apply_env(const NcclTestsTable& t, nccl::NcclConfig base, ComparedTable& out) {
  ConfigNode env = ConfigNode::map(t.where, "env");
  bool any = false;
  for (const auto& [key, value] : t.metadata) {
    if (!key.starts_with("env.")) continue;
    const std::string name = key.substr(4);
    if (nccl::nccl_table().find(name) != nullptr) {
      const SourceLocation& at = t.where_of(key);
      env.set(name, at,
              ConfigNode::scalar(nccl::nccl_env_value(name, value), at, config_path("env", name)));
      out.env_applied.push_back(name + "=" + value);
      any = true;
    } else {
      out.env_not_modelled.push_back(name + "=" + value);
    }
  }
  if (!any) return base;
  return nccl::read_nccl(ParamReader(env, nccl::nccl_table()), base, true);
}

/// NCCL's tables for the release the measured table names (its log's "NCCL version", a
/// dataset's `nccl_version`), where neither the scenario nor the table's environment names the
/// tables or the library and the GPUs are NVIDIA's: 2.8.3's up to 2.11 (CollNetDirect came with
/// 2.12), 2.20.3's up to 2.21, the newest from 2.22 (its point-to-point channels, NCCL 2.22 to
/// 2.28). Applied, it is listed with the NCCL settings.
nccl::NcclConfig for_release(nccl::NcclConfig c, const std::string& version, fabric::GpuArch arch,
                             ComparedTable& out) {
  if (c.rccl || !c.tuning_tables.empty() || fabric::is_amd(arch)) return c;
  int major = 0, minor = 0;
  if (std::sscanf(version.c_str(), " %d.%d", &major, &minor) != 2 || major != 2) return c;
  c.tuning_tables = minor <= 11 ? "2.8.3" : minor <= 21 ? "2.20.3" : "newest";
  out.env_applied.push_back(fmt::format("tuning_tables={} (NCCL {})", c.tuning_tables,
                                        version.substr(0, version.find(' '))));
  return c;
}

ComparedTable compare(const NcclTestsLog& log, const NcclTestsTable& table, size_t index,
                      const std::string& scenario_path, const scenario::Overrides& overrides,
                      const RowFilter& keep) {
  // The rows asked for, in the table's order.
  NcclTestsTable t = table;
  if (keep) {
    std::erase_if(t.rows, [&](const NcclTestsRow& r) { return !keep(table, r); });
  }
  ComparedTable out;
  out.source = log.source;
  const auto name = t.metadata.find("name");
  out.table = name != t.metadata.end() ? name->second : fmt::format("table{}", index + 1);
  out.collective = t.collective;
  const std::string test = t.test.empty() ? nccl_tests_binary(t.collective) : t.test;
  const auto collective = nccl::nccl_tests_collective(test);
  if (!collective) {
    throw InputError(t.where, "collective",
                     "a table of a collective rocesim emulates (all_reduce_perf, "
                     "all_gather_perf, reduce_scatter_perf, alltoall_perf, broadcast_perf, "
                     "reduce_perf, sendrecv_perf, gather_perf, scatter_perf)",
                     t.test.empty() ? "an unknown benchmark" : "'" + t.test + "'");
  }

  if (t.nranks == 0) {
    // The whole job would be a guess, and a wrong rank count changes every simulated time.
    throw InputError(t.where, "ranks",
                     "a rank count: the '#  Rank' lines or NCCL's nranks in a log; total_ranks, "
                     "or nodes and gpus_per_node, in a dataset",
                     fmt::format("none (table '{}')", out.table));
  }
  std::unique_ptr<scenario::ScenarioRun> run = load_without_workloads(scenario_path, overrides);
  std::vector<fabric::NodeId> ranks = run->job_ranks;
  out.nranks = t.nranks;
  if (static_cast<size_t>(t.nranks) > ranks.size()) {
    const bool stated = t.metadata_where.contains("total_ranks");
    throw InputError(t.where_of("total_ranks"), stated ? "total_ranks" : "ranks",
                     fmt::format("a table measured on at most the {} ranks of the scenario's job "
                                 "({})",
                                 ranks.size(), scenario_path),
                     fmt::format("{} ranks", t.nranks));
  }
  ranks.resize(static_cast<size_t>(out.nranks));

  nccl::NcclTestsOptions o;
  o.test = test;
  o.collective = *collective;
  o.iters = 1;
  o.warmup = 0;
  if (!t.rows.empty()) {
    const NcclTestsRow& first = t.rows.front();
    if (const auto size = nccl::nccl_tests_type_size(first.type)) {
      o.datatype = first.type;
      o.type_size = *size;
    } else {
      throw InputError(first.where, "type", "an nccl-tests data type such as float or half",
                       "'" + first.type + "'");
    }
    if (first.root >= 0) o.root = static_cast<int>(first.root);
    if (!first.redop.empty() && first.redop != "none") o.op = first.redop;
  }
  for (const NcclTestsRow& r : t.rows) {
    if (r.size_bytes > nccl::kMaxOperationBytes) {
      throw InputError(r.where, "size", "a size of at most 1 PiB (2^50 bytes)",
                       std::to_string(r.size_bytes));
    }
    o.sizes.push_back(r.size_bytes);
  }
  if (o.sizes.empty()) return out;

  const double roof_busbw = roofline_busbw(run->fabric, ranks);  // bytes/s
  const nccl::NcclConfig cfg = for_release(apply_env(t, run->nccl, out), t.nccl_version,
                                           run->fabric.server_of(ranks.front()).arch, out);
  auto sweep = std::make_unique<nccl::NcclTestsWorkload>(
      "validate", nccl::OpRunner(run->fabric, ranks, cfg), o);
  const nccl::NcclTestsWorkload* s = sweep.get();
  run->sim->add_workload(std::move(sweep), Time{});
  run->run();

  for (size_t i = 0; i < t.rows.size(); ++i) {
    const NcclTestsRow& m = t.rows[i];
    const nccl::NcclTestsRow& sim = s->rows().at(i);
    ComparedRow c;
    c.size_bytes = m.size_bytes;
    const bool oop = m.has_out_of_place;
    c.measured_time_us = oop ? m.time_us_out : m.time_us_in;
    // busbw from the measured time, as nccl-tests computes it before printing it to 0.01 GB/s
    // (a printed 0.01 would make the relative error of small sizes meaningless).
    c.measured_busbw = c.measured_time_us > 0
                           ? static_cast<double>(m.size_bytes) / c.measured_time_us * 1e-3 *
                                 nccl::busbw_factor(*collective, out.nranks)
                           : 0;
    c.simulated_time_us = sim.time_us[0];
    c.simulated_busbw = sim.busbw_GBps[0];
    c.noop = nccl::is_noop(*collective, sim.size.size_bytes);
    c.time_error = c.measured_time_us > 0 && !c.noop
                       ? (c.simulated_time_us - c.measured_time_us) / c.measured_time_us
                       : kNaN;
    c.busbw_error = c.measured_busbw > 0 && !c.noop
                        ? (c.simulated_busbw - c.measured_busbw) / c.measured_busbw
                        : kNaN;
    c.algorithm =
        std::string(nccl::path_name(*collective, out.nranks, sim.algorithm, sim.size.size_bytes));
    c.protocol =
        std::string(nccl::path_protocol_name(*collective, sim.protocol, sim.size.size_bytes));
    c.channels = sim.channels;
    c.nccl_model_us = sim.nccl_model_us;
    c.tuner_disagrees = !nccl::is_p2p(*collective) && c.nccl_model_us > 0 &&
                        c.simulated_time_us > 0 &&
                        std::abs(c.simulated_time_us / c.nccl_model_us - 1) > kTunerDisagreement;
    // busbw = S / T x factor, so the roofline's T = S x factor / B.
    c.roofline_time_us = roof_busbw > 0
                             ? static_cast<double>(m.size_bytes) *
                                   nccl::busbw_factor(*collective, out.nranks) / roof_busbw * 1e6
                             : kNaN;
    c.roofline_error = c.measured_time_us > 0 && roof_busbw > 0 && !c.noop
                           ? (c.roofline_time_us - c.measured_time_us) / c.measured_time_us
                           : kNaN;
    out.rows.push_back(std::move(c));
  }
  // A row that takes longer than the next, larger one, unless NCCL's model says so too (with
  // no estimate, as for RCCL's MSCCL, nothing says so).
  for (size_t i = 0; i + 1 < out.rows.size(); ++i) {
    ComparedRow& a = out.rows[i];
    const ComparedRow& b = out.rows[i + 1];
    const bool model_says_so =
        a.nccl_model_us > 0 && b.nccl_model_us > 0 && a.nccl_model_us > b.nccl_model_us;
    a.slower_than_next =
        b.size_bytes > a.size_bytes && a.simulated_time_us > b.simulated_time_us && !model_says_so;
  }
  return out;
}

/// Adds the tables of `log` that `keep` selects (its warnings too, without a filter), all or none:
/// an InputError from one of them leaves the report as it was.
void add_log(ValidationReport& report, const NcclTestsLog& log, const std::string& scenario_path,
             const scenario::Overrides& overrides, const RowFilter& keep,
             const std::function<void()>& table_done = {}) {
  std::vector<ComparedTable> tables;
  for (size_t i = 0; i < log.tables.size(); ++i) {
    if (keep && std::none_of(log.tables[i].rows.begin(), log.tables[i].rows.end(),
                             [&](const NcclTestsRow& r) { return keep(log.tables[i], r); })) {
      continue;
    }
    tables.push_back(compare(log, log.tables[i], i, scenario_path, overrides, keep));
    if (table_done) table_done();
  }
  if (!keep)
    report.warnings.insert(report.warnings.end(), log.warnings.begin(), log.warnings.end());
  std::move(tables.begin(), tables.end(), std::back_inserter(report.tables));
}

BandSummary summarise(std::string source, std::string table, std::string_view band,
                      const std::vector<const ComparedRow*>& rows) {
  BandSummary b{std::move(source), std::move(table), std::string(band)};
  std::vector<double> t, bw, roof;
  for (const ComparedRow* r : rows) {
    if (!std::isnan(r->time_error)) t.push_back(std::abs(r->time_error));
    if (!std::isnan(r->busbw_error)) bw.push_back(std::abs(r->busbw_error));
    if (!std::isnan(r->roofline_error)) roof.push_back(std::abs(r->roofline_error));
  }
  b.rows = rows.size();
  b.median_abs_time_error = percentile(t, 0.5);
  b.p90_abs_time_error = percentile(t, 0.9);
  b.median_abs_busbw_error = bw.empty() ? kNaN : percentile(bw, 0.5);
  b.p90_abs_busbw_error = bw.empty() ? kNaN : percentile(bw, 0.9);
  b.median_abs_roofline_error = roof.empty() ? kNaN : percentile(roof, 0.5);
  b.p90_abs_roofline_error = roof.empty() ? kNaN : percentile(roof, 0.9);
  return b;
}

/// The band summaries of the report's tables: per table, then over all of them.
void add_bands(ValidationReport& report) {
  std::map<std::string_view, std::vector<const ComparedRow*>> all;
  for (const ComparedTable& t : report.tables) {
    std::map<std::string_view, std::vector<const ComparedRow*>> by_band;
    for (const ComparedRow& r : t.rows) {
      if (r.noop) continue;  // NCCL ran nothing: nothing of the model to compare
      by_band[size_band(r.size_bytes)].push_back(&r);
      all[size_band(r.size_bytes)].push_back(&r);
    }
    for (std::string_view band : kBands) {
      if (by_band.contains(band)) {
        report.bands.push_back(summarise(t.source, t.table, band, by_band[band]));
      }
    }
  }
  for (std::string_view band : kBands) {
    if (all.contains(band)) report.bands.push_back(summarise("all", "all", band, all[band]));
  }
}

std::string percent(double x) {
  return std::isnan(x) ? std::string("-") : fmt::format("{:.1f}%", 100 * x);
}

}  // namespace

std::string_view size_band(int64_t size_bytes) {
  if (size_bytes < (int64_t{1} << 20)) return kBands[0];
  if (size_bytes < (int64_t{64} << 20)) return kBands[1];
  return kBands[2];
}

double roofline_busbw(const fabric::Fabric& f, std::span<const fabric::NodeId> ranks) {
  if (ranks.size() < 2) return 0;
  // Per server: its ranks, and the NICs they send by.
  std::map<uint32_t, std::vector<fabric::NodeId>> by_server;
  for (const fabric::NodeId g : ranks)
    by_server[f.node(g).server].push_back(g);
  double bound = std::numeric_limits<double>::infinity();
  for (const auto& [server, gpus] : by_server) {
    if (gpus.size() > 1) {
      for (const fabric::NodeId g : gpus) {
        // The GPU's ports into its scale-up domain: the NVSwitch, or its peers (a mesh).
        double scale_up = 0, widest = 0;
        for (const fabric::LinkId l : f.out_links(g)) {
          const fabric::Link& link = f.link(l);
          const fabric::Node& to = f.node(link.dst);
          const double rate = link.line_rate.bytes_per_second();
          widest = std::max(widest, rate);
          if (to.kind == fabric::NodeKind::Gpu || to.role == fabric::SwitchRole::NvSwitch) {
            scale_up += rate;
          }
        }
        // A server without a GPU interconnect joins its GPUs through PCIe: the GPU's own link.
        bound = std::min(bound, scale_up > 0 ? scale_up : widest);
      }
    }
    if (by_server.size() > 1) {
      std::vector<fabric::NodeId> nics;
      for (const fabric::NodeId g : gpus) {
        for (uint32_t port = 0; port < f.server_of(g).nics_per_gpu(); ++port)
          nics.push_back(f.nic_of_gpu(g, port));
      }
      std::sort(nics.begin(), nics.end());
      nics.erase(std::unique(nics.begin(), nics.end()), nics.end());
      double out = 0;
      for (const fabric::NodeId n : nics) {
        for (const fabric::LinkId l : f.out_links(n)) {
          if (fabric::is_network_switch(f.node(f.link(l).dst))) {
            out += f.link(l).line_rate.bytes_per_second();
          }
        }
      }
      bound = std::min(bound, out);
    }
  }
  return std::isfinite(bound) ? bound : 0;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

std::vector<std::string> measured_files(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto where = [&] {
    return SourceLocation{std::make_shared<const std::string>(path), 0, 0};
  };
  if (fs::is_regular_file(path, ec)) return {path};
  if (!fs::is_directory(path, ec)) {
    throw InputError(where(), "--measured", "an nccl-tests log, a measured dataset or a directory",
                     "no such file or directory");
  }
  std::vector<std::string> out;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.starts_with(".") || name == "README.md") continue;
    out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  if (out.empty()) {
    throw InputError(where(), "--measured", "a directory with nccl-tests logs or datasets",
                     "no files");
  }
  return out;
}

NcclTestsLog read_measured_file(const std::string& file) {
  return is_dataset(file) ? read_measured_dataset(file) : read_nccl_tests_file(file);
}

std::vector<NcclTestsLog> read_measured(const std::vector<std::string>& files) {
  std::vector<NcclTestsLog> logs;
  for (const std::string& f : files)
    logs.push_back(read_measured_file(f));
  return logs;
}

ValidationReport validate(const std::vector<NcclTestsLog>& logs, const std::string& scenario_path,
                          const scenario::Overrides& overrides, const RowFilter& keep) {
  ValidationReport report;
  for (const NcclTestsLog& log : logs)
    add_log(report, log, scenario_path, overrides, keep);
  add_bands(report);
  return report;
}

bool TableNames::matches(const std::string& name) const {
  return prefixes.empty() || std::any_of(prefixes.begin(), prefixes.end(),
                                         [&](const auto& p) { return name.starts_with(p); });
}

ValidationReport validate_files(const std::vector<std::string>& files,
                                const std::string& scenario_path,
                                const scenario::Overrides& overrides, const TableNames& names,
                                const TableProgress& progress) {
  // A scenario that does not load would fail every file: that is its error, not theirs.
  load_without_workloads(scenario_path, overrides);
  ValidationReport report;
  // Every file read first (its tables named and filtered), so that progress knows the total.
  std::vector<std::optional<NcclTestsLog>> logs;
  size_t kept = 0;
  for (const std::string& f : files) {
    try {
      NcclTestsLog log = read_measured_file(f);
      // Unnamed tables (logs) are named by position before any is left out, so that they keep
      // their names in the report.
      for (size_t i = 0; i < log.tables.size(); ++i)
        log.tables[i].metadata.try_emplace("name", fmt::format("table{}", i + 1));
      std::erase_if(log.tables,
                    [&](const NcclTestsTable& t) { return !names.matches(t.metadata.at("name")); });
      kept += log.tables.size();
      logs.emplace_back(std::move(log));
    } catch (const InputError& e) {
      report.errors.emplace_back(e.what());
      logs.emplace_back();
    }
  }
  size_t done = 0;
  const auto table_done = [&] {
    if (progress) progress(++done, kept);
  };
  for (std::optional<NcclTestsLog>& log : logs) {
    if (!log || log->tables.empty()) continue;
    try {
      add_log(report, *log, scenario_path, overrides, {}, table_done);
    } catch (const InputError& e) {
      report.errors.emplace_back(e.what());
    }
  }
  if (kept == 0 && !names.prefixes.empty() && report.errors.empty()) {
    std::string list;
    for (const std::string& p : names.prefixes)
      list += (list.empty() ? "'" : ", '") + p + "'";
    throw InputError(SourceLocation{std::make_shared<const std::string>("--tables"), 0, 0},
                     "--tables", "a prefix of a table name in the measured files",
                     "no table named " + list + "...");
  }
  add_bands(report);
  return report;
}

std::vector<metrics::Table> report_tables(const ValidationReport& r) {
  metrics::Table rows("validation",
                      "Measured against simulated nccl-tests rows; errors are (sim - meas) / "
                      "meas");
  const size_t source = rows.add_text("source"), table = rows.add_text("table"),
               collective = rows.add_text("collective"), nranks = rows.add_integer("nranks"),
               size = rows.add_integer("size_bytes", "B"), band = rows.add_text("band"),
               mt = rows.add_number("measured_time_us", "us"),
               st = rows.add_number("simulated_time_us", "us"), te = rows.add_number("time_error"),
               mb = rows.add_number("measured_busbw_GBps", "GB/s"),
               sb = rows.add_number("simulated_busbw_GBps", "GB/s"),
               be = rows.add_number("busbw_error"), algo = rows.add_text("algorithm"),
               proto = rows.add_text("protocol"), ch = rows.add_integer("channels"),
               model = rows.add_number("nccl_model_us", "us"),
               disagree = rows.add_integer("tuner_disagrees"),
               roof = rows.add_number("roofline_time_us", "us"),
               roof_err = rows.add_number("roofline_error"),
               slower = rows.add_integer("slower_than_next");
  for (const ComparedTable& t : r.tables) {
    for (const ComparedRow& c : t.rows) {
      rows.push(source, t.source);
      rows.push(table, t.table);
      rows.push(collective, t.collective);
      rows.push(nranks, int64_t{t.nranks});
      rows.push(size, c.size_bytes);
      rows.push(band, std::string(size_band(c.size_bytes)));
      rows.push(mt, c.measured_time_us);
      rows.push(st, c.simulated_time_us);
      rows.push(te, c.time_error);
      rows.push(mb, c.measured_busbw);
      rows.push(sb, c.simulated_busbw);
      rows.push(be, c.busbw_error);
      rows.push(algo, c.algorithm);
      rows.push(proto, c.protocol);
      rows.push(ch, int64_t{c.channels});
      rows.push(model, c.nccl_model_us);
      rows.push(disagree, int64_t{c.tuner_disagrees ? 1 : 0});
      rows.push(roof, c.roofline_time_us);
      rows.push(roof_err, c.roofline_error);
      rows.push(slower, int64_t{c.slower_than_next ? 1 : 0});
    }
  }
  metrics::Table bands("validation_bands",
                       "Median and 90th percentile of the absolute relative errors per size band "
                       "(<1MiB, 1-64MiB, >=64MiB), per table and over all tables, of the "
                       "simulation and of the line-rate roofline");
  const size_t bs = bands.add_text("source"), bt = bands.add_text("table"),
               bb = bands.add_text("band"), bn = bands.add_integer("rows"),
               m1 = bands.add_number("median_abs_time_error"),
               p1 = bands.add_number("p90_abs_time_error"),
               m2 = bands.add_number("median_abs_busbw_error"),
               p2 = bands.add_number("p90_abs_busbw_error"),
               m3 = bands.add_number("median_abs_roofline_error"),
               p3 = bands.add_number("p90_abs_roofline_error");
  for (const BandSummary& b : r.bands) {
    bands.push(bs, b.source);
    bands.push(bt, b.table);
    bands.push(bb, b.band);
    bands.push(bn, static_cast<int64_t>(b.rows));
    bands.push(m1, b.median_abs_time_error);
    bands.push(p1, b.p90_abs_time_error);
    bands.push(m2, b.median_abs_busbw_error);
    bands.push(p2, b.p90_abs_busbw_error);
    bands.push(m3, b.median_abs_roofline_error);
    bands.push(p3, b.p90_abs_roofline_error);
  }
  return {std::move(rows), std::move(bands)};
}

std::string format_report(const ValidationReport& r) {
  std::string out;
  for (const ComparedTable& t : r.tables) {
    out += fmt::format("{} / {}: {} on {} ranks\n", t.source, t.table, t.collective, t.nranks);
    if (!t.env_applied.empty()) {
      out += "  NCCL settings applied:";
      for (const std::string& e : t.env_applied)
        out += " " + e;
      out += "\n";
    }
    if (!t.env_not_modelled.empty()) {
      out += "  environment not modelled:";
      for (const std::string& e : t.env_not_modelled)
        out += " " + e;
      out += "\n";
    }
    out += fmt::format("  {:>12s}  {:>10s}  {:>10s}  {:>8s}  {:>9s}  {:>9s}  {:>8s}  {}\n",
                       "size (B)", "meas (us)", "sim (us)", "time err", "meas GB/s", "sim GB/s",
                       "bw err", "sim algorithm");
    for (const ComparedRow& c : t.rows) {
      out += fmt::format(
          "  {:12d}  {:10.2f}  {:10.2f}  {:>8s}  {:9.2f}  {:9.2f}  {:>8s}  {}/{}{}{}\n",
          c.size_bytes, c.measured_time_us, c.simulated_time_us, percent(c.time_error),
          c.measured_busbw, c.simulated_busbw, percent(c.busbw_error), c.algorithm, c.protocol,
          c.tuner_disagrees ? fmt::format("  (tuner's estimate {:.1f} us)", c.nccl_model_us) : "",
          c.slower_than_next ? "  (slower than the next size)" : "");
    }
    out += "\n";
  }
  size_t disagreements = 0, all_rows = 0;
  std::vector<std::string> slower;  // "table: size"
  for (const ComparedTable& t : r.tables) {
    for (const ComparedRow& c : t.rows) {
      all_rows += 1;
      disagreements += c.tuner_disagrees ? 1 : 0;
      if (c.slower_than_next) slower.push_back(fmt::format("{}: {} B", t.table, c.size_bytes));
    }
  }
  if (!slower.empty()) {
    out += fmt::format(
        "{} row{} simulated slower than the next larger size of {} table, which NCCL's own "
        "estimates do not say:\n",
        slower.size(), slower.size() == 1 ? "" : "s", slower.size() == 1 ? "its" : "their");
    for (const std::string& s : slower)
      out += "  " + s + "\n";
    out += "\n";
  }
  if (disagreements > 0) {
    out += fmt::format(
        "{} of {} rows: NCCL's own estimate of what its tuner chose and the simulation differ by "
        "more than {:.0f}% (marked with the tuner's estimate); there the tuner's choice may not "
        "be the fastest the simulation runs\n\n",
        disagreements, all_rows, 100 * kTunerDisagreement);
  }
  out +=
      "Absolute relative errors per size band (median / 90th percentile); roofline: the time "
      "the ports' line rates give, size x busbw factor / bandwidth:\n";
  out += fmt::format("  {:<40s}  {:<8s}  {:>4s}  {:>15s}  {:>15s}  {:>15s}\n", "table", "band",
                     "rows", "time", "busbw", "roofline time");
  std::vector<std::string> behind;  // tables the roofline matches or beats from 64 MiB
  size_t compared = 0;
  for (const BandSummary& b : r.bands) {
    const std::string label = b.source == "all" ? "all tables" : b.table;
    out += fmt::format("  {:<40s}  {:<8s}  {:4d}  {:>7s}/{:>7s}  {:>7s}/{:>7s}  {:>7s}/{:>7s}\n",
                       label, b.band, b.rows, percent(b.median_abs_time_error),
                       percent(b.p90_abs_time_error), percent(b.median_abs_busbw_error),
                       percent(b.p90_abs_busbw_error), percent(b.median_abs_roofline_error),
                       percent(b.p90_abs_roofline_error));
    if (b.source != "all" && b.band == kBands[2] && !std::isnan(b.median_abs_roofline_error)) {
      ++compared;
      if (b.median_abs_time_error >= b.median_abs_roofline_error) behind.push_back(b.table);
    }
  }
  if (compared > 0) {
    out += fmt::format(
        "\nFrom 64 MiB the simulation's median error is below the roofline's on {} of {} "
        "tables{}\n",
        compared - behind.size(), compared, behind.empty() ? "" : "; not on:");
    for (const std::string& t : behind)
      out += "  " + t + "\n";
  }
  return out;
}

}  // namespace rocesim::validation
