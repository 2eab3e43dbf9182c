#include "calibrate/lib/fit.hpp"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <memory>

#include "sim/core/quantity.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/scenario/yaml_source.hpp"

namespace rocesim::calibrate {
namespace {

using validation::NcclTestsRow;
using validation::NcclTestsTable;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kStep = 1e-3;  // finite-difference step in scaled coordinates
// Probes of a converged fit, in scaled coordinates, and how many new descents they may start.
constexpr double kProbes[] = {0.003, 0.01, 0.03};
constexpr int kProbeRestarts = 4;
constexpr double kNoEffect = 1e-3;      // max |dr/dx| below which a parameter does nothing
constexpr double kConfounded = 0.95;    // |correlation| above which two are confounded
constexpr double kPhysicalSlack = 0.1;  // an efficiency's relative distance from its nominal
                                        // value beyond which the fit is said to absorb an error,
                                        // and the width of its prior
constexpr double kFactorPrior = 0.5;    // prior width of NCCL's latency factors, relative
constexpr double kTimePrior = 1.0;      // prior width of a time, relative to its nominal value
constexpr double kSingular = 1e8;       // condition number of the scaled J'J

SourceLocation origin_at(const std::string& origin) {
  return SourceLocation{std::make_shared<const std::string>(origin), 0, 0};
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// ---- parameters -------------------------------------------------------------------------------

/// The declaration of the key a path ends in, from the scenario's parameter tables. A key name
/// that several tables declare must have one type everywhere (e.g. `latency`: a time).
const Param* declaration(const std::string& path, const SourceLocation& where) {
  const std::string key = path.substr(path.rfind('.') + 1);
  const Param* found = nullptr;
  for (const ParamTable* t : scenario::all_tables()) {
    const Param* p = t->find(key);
    if (p == nullptr) continue;
    if (found != nullptr && found->type != p->type) {
      throw InputError(where, path, "a parameter whose key has one type in every table",
                       fmt::format("'{}', which is both {} and {}", key,
                                   param_type_name(found->type), param_type_name(p->type)));
    }
    found = p;
  }
  if (found == nullptr) {
    throw InputError(where, path, "the dotted path of a scenario key (see docs/scenario.md)",
                     fmt::format("'{}', a key no table declares", key));
  }
  const ParamType t = found->type;
  if (t != ParamType::Number && t != ParamType::Time && t != ParamType::Bandwidth &&
      t != ParamType::Bytes) {
    throw InputError(where, path, "a number, time, bandwidth or size to fit",
                     fmt::format("a key of type {}", param_type_name(t)));
  }
  return found;
}

/// Scenario text -> SI value (seconds, bit/s, bytes, plain number).
double to_si(ParamType type, const std::string& text, const SourceLocation& where,
             const std::string& key) {
  try {
    switch (type) {
      case ParamType::Time:
        return static_cast<double>(parse_time(text).count_ps()) * 1e-12;
      case ParamType::Bandwidth:
        return static_cast<double>(parse_bandwidth(text).bits_per_second());
      case ParamType::Bytes:
        return static_cast<double>(parse_bytes(text).count());
      default:
        return parse_number(ConfigNode::scalar(text, where, key));
    }
  } catch (const QuantityError& e) {
    throw InputError(where, key, "a value with its unit", fmt::format("'{}' ({})", text, e.what()));
  }
}

std::string si_text(ParamType type, double v) {
  switch (type) {
    case ParamType::Time: {
      // Scenario times are whole picoseconds: round to one, print in ns.
      const long long ps = std::llround(v * 1e12);
      return ps % 1000 == 0 ? fmt::format("{}ns", ps / 1000)
                            : fmt::format("{:.3f}ns", static_cast<double>(ps) * 1e-3);
    }
    case ParamType::Bandwidth:
      return fmt::format("{:.6g}Gbps", v * 1e-9);
    case ParamType::Bytes:
      return fmt::format("{}B", std::llround(v));
    default:
      return fmt::format("{:.6g}", v);
  }
}

/// The scalar at `path` (already checked by ParameterSpec::parse) in a tree, or nullptr.
const ConfigNode* lookup(const ConfigNode& root, const std::string& path) {
  const ConfigNode* n = &root;
  for (const std::string& k : scenario::split_path(path, root.where(), path)) {
    if (!n->is_map()) return nullptr;
    n = n->find(k);
    if (n == nullptr) return nullptr;
  }
  return n->is_scalar() ? n : nullptr;
}

/// The width of a parameter's prior around its nominal value (see the header), 0 for none.
double prior_sigma(const FittedParameter& p) {
  if (!(p.nominal > 0)) return 0;
  if (p.path.ends_with("_efficiency")) return kPhysicalSlack * p.nominal;
  if (p.path == "nccl.base_latency_factor" || p.path == "nccl.hop_latency_factor") {
    return kFactorPrior * p.nominal;
  }
  if (p.type == ParamType::Time) return kTimePrior * p.nominal;
  return 0;
}

FittedParameter resolve(const ParameterSpec& spec, const ConfigNode& effective,
                        const SourceLocation& where) {
  const Param* decl = declaration(spec.path, where);
  FittedParameter p;
  p.path = spec.path;
  p.type = decl->type;
  const ConfigNode* value = lookup(effective, spec.path);
  if (value == nullptr) {
    throw InputError(where, spec.path,
                     "a key with a value in the scenario (written, or a default) to start from",
                     "no value; write a starting value in the scenario or with --set");
  }
  p.nominal = to_si(p.type, value->value(), where, spec.path);
  // Default bounds: the physical range of the key, else a decade around the nominal value.
  const double n = p.nominal;
  switch (decl->check) {
    case Check::Fraction:
      p.lower = 0.05;
      p.upper = 1.0;
      break;
    default:
      if (p.type == ParamType::Bandwidth || p.type == ParamType::Bytes) {
        p.lower = n / 10;
        p.upper = 2 * n;
      } else if (p.type == ParamType::Time) {
        p.lower = 0;
        p.upper = std::max(10 * n, 10e-6);
      } else {
        p.lower = decl->check == Check::None ? -std::max(10 * std::abs(n), 10.0) : 0;
        p.upper = std::max(10 * std::abs(n), 10.0);
      }
  }
  if (spec.lower && !spec.lower->empty()) p.lower = to_si(p.type, *spec.lower, where, spec.path);
  if (spec.upper && !spec.upper->empty()) p.upper = to_si(p.type, *spec.upper, where, spec.path);
  if (!(p.lower < p.upper) || n < p.lower || n > p.upper) {
    throw InputError(where, spec.path,
                     "bounds LO < HI around the nominal value " + si_text(p.type, n),
                     fmt::format("{}..{}", si_text(p.type, p.lower), si_text(p.type, p.upper)));
  }
  // Within the key's own range: the fit tries values up to the bounds, and a scenario refuses
  // what its key refuses (checked here, not when the descent first reaches it).
  const bool in_range = [&] {
    switch (decl->check) {
      case Check::Fraction:
        return p.lower > 0 && p.upper <= 1;
      case Check::Positive:
        return p.lower > 0;
      case Check::NonNegative:
        return p.lower >= 0;
      case Check::None:
        return true;
    }
    return true;
  }();
  if (!in_range) {
    const char* range = decl->check == Check::Fraction   ? "within (0, 1], the key's range"
                        : decl->check == Check::Positive ? "above 0, the key's range"
                                                         : "from 0, the key's range";
    throw InputError(where, spec.path, fmt::format("bounds {}", range),
                     fmt::format("{}..{}", si_text(p.type, p.lower), si_text(p.type, p.upper)));
  }
  p.value = n;
  p.prior_sigma = prior_sigma(p);
  return p;
}

// ---- the loss ---------------------------------------------------------------------------------

struct Loss {
  int kind = 0;  // 0 linear, 1 soft_l1, 2 cauchy
  double f = 1;
  /// rho(z) and rho'(z) at z = (r / f)^2.
  double rho(double z) const {
    return kind == 0 ? z : kind == 1 ? 2 * (std::sqrt(1 + z) - 1) : std::log1p(z);
  }
  double drho(double z) const {
    return kind == 0 ? 1 : kind == 1 ? 1 / std::sqrt(1 + z) : 1 / (1 + z);
  }
  double cost(const Eigen::VectorXd& r) const {
    double c = 0;
    for (Eigen::Index i = 0; i < r.size(); ++i)
      c += f * f * rho(r[i] * r[i] / (f * f));
    return c;
  }
  Eigen::VectorXd weights(const Eigen::VectorXd& r) const {
    Eigen::VectorXd w(r.size());
    for (Eigen::Index i = 0; i < r.size(); ++i)
      w[i] = drho(r[i] * r[i] / (f * f));
    return w;
  }
};

Loss make_loss(const std::string& name, double scale) {
  Loss l;
  l.f = scale;
  if (name == "linear") {
    l.kind = 0;
  } else if (name == "soft_l1") {
    l.kind = 1;
  } else if (name == "cauchy") {
    l.kind = 2;
  } else {
    throw InputError(origin_at("--loss"), "--loss", "linear, soft_l1 or cauchy",
                     fmt::format("'{}'", name));
  }
  if (!(scale > 0)) {
    throw InputError(origin_at("--loss-scale"), "--loss-scale", "a positive number",
                     fmt::format("{}", scale));
  }
  return l;
}

// ---- the model in the loop --------------------------------------------------------------------

struct Row {
  std::string source, table, collective;
  int nranks = 0;
  int64_t size_bytes = 0;
  double measured_us = 0;
};

class Model {
 public:
  Model(const std::vector<validation::NcclTestsLog>& logs, std::string scenario,
        const FitOptions& o, std::vector<FittedParameter>& params)
      : logs_(logs), scenario_(std::move(scenario)), options_(o), params_(params) {}

  /// Simulated times (us) of the selected rows at scaled point x; `rows` receives the rows
  /// when not null.
  std::vector<double> times(const Eigen::VectorXd& x, const validation::RowFilter& keep,
                            std::vector<Row>* rows = nullptr) const {
    scenario::Overrides o;
    o.seed = options_.seed;
    o.parameters = options_.fixed;
    o.flow_records = false;  // the fit reads operation times only
    for (size_t j = 0; j < params_.size(); ++j) {
      const FittedParameter& p = params_[j];
      const double v = p.lower + x[static_cast<Eigen::Index>(j)] * (p.upper - p.lower);
      o.parameters.push_back(
          scenario::ParamOverride{p.path, ConfigNode::scalar(p.text(v), fit_origin_, p.path)});
    }
    const validation::ValidationReport r = validation::validate(logs_, scenario_, o, keep);
    std::vector<double> out;
    for (const validation::ComparedTable& t : r.tables) {
      for (const validation::ComparedRow& c : t.rows) {
        if (c.noop) continue;  // NCCL runs nothing: the host's call is not in the model
        out.push_back(c.simulated_time_us);
        if (rows != nullptr) {
          rows->push_back(
              Row{t.source, t.table, t.collective, t.nranks, c.size_bytes, c.measured_time_us});
        }
      }
    }
    return out;
  }

  /// times() at several points, in parallel; same results at any thread count.
  std::vector<std::vector<double>> batch(const std::vector<Eigen::VectorXd>& xs,
                                         const validation::RowFilter& keep) {
    std::vector<std::vector<double>> out(xs.size());
    std::vector<std::exception_ptr> errors(xs.size());
    const int n = static_cast<int>(xs.size());
#pragma omp parallel for num_threads(std::max(1, options_.threads)) schedule(dynamic, 1)
    for (int i = 0; i < n; ++i) {
      try {
        out[static_cast<size_t>(i)] = times(xs[static_cast<size_t>(i)], keep);
      } catch (...) {
        errors[static_cast<size_t>(i)] = std::current_exception();
      }
    }
    for (const std::exception_ptr& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    simulations_ += n;
    return out;
  }
  int simulations() const {
    return simulations_;
  }

 private:
  const std::vector<validation::NcclTestsLog>& logs_;
  std::string scenario_;
  const FitOptions& options_;
  std::vector<FittedParameter>& params_;
  int simulations_ = 0;
  SourceLocation fit_origin_ = origin_at("fit");  // where fitted values "come from"
};

Eigen::VectorXd log_ratios(const std::vector<double>& sim, const std::vector<Row>& rows) {
  Eigen::VectorXd r(static_cast<Eigen::Index>(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    r[static_cast<Eigen::Index>(i)] = std::log(sim.at(i) / rows[i].measured_us);
  }
  return r;
}

/// Central differences (one-sided, inward, at a bound) of the log ratios at x.
Eigen::MatrixXd jacobian(Model& m, const Eigen::VectorXd& x, const std::vector<Row>& rows,
                         const validation::RowFilter& keep) {
  const Eigen::Index p = x.size();
  std::vector<Eigen::VectorXd> points;
  std::vector<double> lo(static_cast<size_t>(p)), hi(static_cast<size_t>(p));
  for (Eigen::Index j = 0; j < p; ++j) {
    Eigen::VectorXd a = x, b = x;
    a[j] = std::max(0.0, x[j] - kStep);
    b[j] = std::min(1.0, x[j] + kStep);
    lo[static_cast<size_t>(j)] = a[j];
    hi[static_cast<size_t>(j)] = b[j];
    points.push_back(a);
    points.push_back(b);
  }
  const std::vector<std::vector<double>> t = m.batch(points, keep);
  Eigen::MatrixXd J(static_cast<Eigen::Index>(rows.size()), p);
  for (Eigen::Index j = 0; j < p; ++j) {
    const auto k = static_cast<size_t>(j);
    J.col(j) = (log_ratios(t[2 * k + 1], rows) - log_ratios(t[2 * k], rows)) / (hi[k] - lo[k]);
  }
  return J;
}

std::vector<BandError> band_errors(const std::vector<Residual>& rs) {
  std::vector<BandError> out;
  for (const char* set : {"train", "test"}) {
    for (const char* band : {"<1MiB", "1-64MiB", ">=64MiB", "all"}) {
      std::vector<double> nominal, fitted;
      for (const Residual& r : rs) {
        if ((r.train ? "train" : "test") != std::string_view(set)) continue;
        if (std::string_view(band) != "all" && validation::size_band(r.size_bytes) != band)
          continue;
        nominal.push_back(std::abs(r.nominal_error()));
        fitted.push_back(std::abs(r.fitted_error()));
      }
      if (nominal.empty()) continue;
      out.push_back(BandError{set, band, nominal.size(), validation::percentile(nominal, 0.5),
                              validation::percentile(nominal, 0.9),
                              validation::percentile(fitted, 0.5),
                              validation::percentile(fitted, 0.9)});
    }
  }
  return out;
}

}  // namespace

// ---- selections -------------------------------------------------------------------------------

Selection Selection::parse(const std::string& text, const std::string& origin) {
  Selection s;
  s.text_ = text;
  if (trim(text).empty()) return s;
  const SourceLocation where = origin_at(origin);
  for (const std::string& raw : split(text, ',')) {
    const std::string clause = trim(raw);
    const size_t eq = clause.find('=');
    if (eq == std::string::npos) {
      throw InputError(where, origin,
                       "clauses KEY=VALUES joined by ',' (collective, size, nodes, ranks, table)",
                       fmt::format("'{}'", clause));
    }
    Clause c{trim(clause.substr(0, eq)), {}, {}};
    for (const std::string& alt : split(clause.substr(eq + 1), '|')) {
      const std::string v = trim(alt);
      if (c.key == "collective") {
        const std::string name = validation::normalise_collective(v);
        if (name.empty()) {
          throw InputError(where, origin, "a collective such as allreduce or all_gather_perf",
                           fmt::format("'{}'", v));
        }
        c.names.push_back(name);
      } else if (c.key == "table") {
        c.names.push_back(v);
      } else if (c.key == "size" || c.key == "nodes" || c.key == "ranks") {
        const size_t dots = v.find("..");
        const std::string a = trim(dots == std::string::npos ? v : v.substr(0, dots));
        const std::string b = trim(dots == std::string::npos ? v : v.substr(dots + 2));
        const auto bound = [&](const std::string& t, int64_t open) -> int64_t {
          if (t.empty()) return open;
          try {
            if (c.key == "size") return parse_bytes(t).count();
            return parse_integer(ConfigNode::scalar(t, where, origin));
          } catch (const QuantityError& e) {
            throw InputError(where, origin, "a size with its unit, e.g. 64MiB",
                             fmt::format("'{}' ({})", t, e.what()));
          }
        };
        c.ranges.emplace_back(bound(a, 0), bound(b, std::numeric_limits<int64_t>::max()));
      } else {
        throw InputError(where, origin, "a clause on collective, size, nodes, ranks or table",
                         fmt::format("'{}'", c.key));
      }
    }
    s.clauses_.push_back(std::move(c));
  }
  return s;
}

bool Selection::matches(const NcclTestsTable& t, size_t table_index, const NcclTestsRow& r,
                        int gpus_per_server) const {
  for (const Clause& c : clauses_) {
    bool ok = false;
    if (c.key == "collective") {
      ok = std::find(c.names.begin(), c.names.end(), t.collective) != c.names.end();
    } else if (c.key == "table") {
      const auto name = t.metadata.find("name");
      const std::string n =
          name != t.metadata.end() ? name->second : fmt::format("table{}", table_index + 1);
      ok = std::find(c.names.begin(), c.names.end(), n) != c.names.end();
    } else {
      int64_t v = r.size_bytes;
      if (c.key == "ranks") v = t.nranks;
      if (c.key == "nodes") {
        v = t.nodes > 0 ? t.nodes : (gpus_per_server > 0 ? t.nranks / gpus_per_server : 0);
      }
      for (const auto& [lo, hi] : c.ranges)
        ok = ok || (v >= lo && v <= hi);
    }
    if (!ok) return false;
  }
  return true;
}

// ---- parameters -------------------------------------------------------------------------------

ParameterSpec ParameterSpec::parse(const std::string& text, const std::string& origin) {
  ParameterSpec s;
  const size_t eq = text.find('=');
  s.path = trim(text.substr(0, eq));
  if (eq != std::string::npos) {
    const std::string range = text.substr(eq + 1);
    const size_t dots = range.find("..");
    if (dots == std::string::npos) {
      throw InputError(origin_at(origin), origin, "PATH or PATH=LO..HI (either end may be empty)",
                       fmt::format("'{}'", text));
    }
    s.lower = trim(range.substr(0, dots));
    s.upper = trim(range.substr(dots + 2));
  }
  // The same check as a calibration file's paths.
  scenario::split_path(s.path, origin_at(origin), origin);
  return s;
}

std::vector<ParameterSpec> default_parameters() {
  return {{"topology.node.nic_efficiency", {}, {}},
          {"topology.node.nvlink_efficiency", {}, {}},
          {"nccl.NCCL_NET_OVERHEAD", {}, {}},
          {"nccl.base_latency_factor", {}, {}},
          {"nccl.hop_latency_factor", {}, {}}};
}

std::string FittedParameter::text(double v) const {
  return si_text(type, v);
}

// ---- the fit ----------------------------------------------------------------------------------

FitReport fit(const std::vector<validation::NcclTestsLog>& measured,
              const std::vector<std::string>& measured_files, const std::string& scenario_path,
              const FitOptions& options) {
  FitReport report;
  report.scenario = scenario_path;
  report.measured = measured_files;
  report.train = options.train.text();
  report.test = options.test.text();
  report.fixed = options.fixed;
  report.loss = options.loss;
  report.loss_scale = options.loss_scale;
  const Loss loss = make_loss(options.loss, options.loss_scale);

  // Nominal values: the scenario's own (written, or defaults), after the fixed overrides.
  scenario::Overrides base;
  base.seed = options.seed;
  base.skip_workloads = true;
  base.parameters = options.fixed;
  const std::unique_ptr<scenario::ScenarioRun> run = scenario::load_scenario(scenario_path, base);
  const ConfigNode effective = scenario::load_yaml_text(run->effective_yaml, scenario_path);
  const int gpus_per_server =
      run->fabric.servers().empty() ? 0 : static_cast<int>(run->fabric.servers()[0].gpus);
  std::vector<FittedParameter>& params = report.parameters;
  std::vector<ParameterSpec> specs = options.parameters;
  if (specs.empty()) {
    specs = default_parameters();
    // Servers with an xGMI mesh have no NVLink: their scale-up efficiency is the xGMI one.
    if (!run->fabric.servers().empty() &&
        run->fabric.servers()[0].scale_up == fabric::ScaleUp::Mesh) {
      for (ParameterSpec& s : specs) {
        if (s.path == "topology.node.nvlink_efficiency") s.path = "topology.node.xgmi_efficiency";
      }
    }
  }
  for (const ParameterSpec& s : specs) {
    for (const FittedParameter& p : params) {
      if (p.path == s.path) {
        throw InputError(origin_at("--param"), s.path, "each parameter once", "it twice");
      }
    }
    params.push_back(resolve(s, effective, origin_at("--param " + s.path)));
  }

  // Training and test rows.
  std::map<const NcclTestsTable*, size_t> index;
  for (const validation::NcclTestsLog& log : measured) {
    for (size_t i = 0; i < log.tables.size(); ++i)
      index[&log.tables[i]] = i;
  }
  const Selection& train = options.train;
  const Selection& test = options.test;
  const bool has_test = !test.empty() || !train.empty();
  // Rows without a positive time cannot be fitted on a log scale.
  const auto timed = [](const NcclTestsRow& r) {
    return (r.has_out_of_place ? r.time_us_out : r.time_us_in) > 0;
  };
  const validation::RowFilter keep_train = [&](const NcclTestsTable& t, const NcclTestsRow& r) {
    return timed(r) && train.matches(t, index.at(&t), r, gpus_per_server);
  };
  const validation::RowFilter keep_test = [&](const NcclTestsTable& t, const NcclTestsRow& r) {
    const size_t k = index.at(&t);
    if (!timed(r)) return false;
    if (!test.empty()) return test.matches(t, k, r, gpus_per_server);
    return !train.matches(t, k, r, gpus_per_server);
  };

  const auto p = static_cast<Eigen::Index>(params.size());
  Eigen::VectorXd x0(p);
  for (Eigen::Index j = 0; j < p; ++j) {
    const FittedParameter& q = params[static_cast<size_t>(j)];
    x0[j] = (q.nominal - q.lower) / (q.upper - q.lower);
  }
  Model model(measured, scenario_path, options, params);
  std::vector<Row> rows;
  const std::vector<double> t0 = model.times(x0, keep_train, &rows);
  if (rows.empty()) {
    throw InputError(origin_at("--train"), "--train",
                     "a selection of at least one measured row with a time",
                     report.train.empty() ? "no rows in the measured files"
                                          : fmt::format("no rows match '{}'", report.train));
  }
  Eigen::VectorXd r = log_ratios(t0, rows);
  report.nominal_cost = loss.cost(r);
  report.nominal_rms = std::sqrt(r.squaredNorm() / static_cast<double>(r.size()));

  // Parameters that no measurement depends on are held at their nominal value.
  Eigen::MatrixXd J = jacobian(model, x0, rows, keep_train);
  std::vector<bool> free(static_cast<size_t>(p), true);
  for (Eigen::Index j = 0; j < p; ++j) {
    if (J.col(j).cwiseAbs().maxCoeff() < kNoEffect) {
      FittedParameter& q = params[static_cast<size_t>(j)];
      q.identifiable = false;
      free[static_cast<size_t>(j)] = false;
      report.warnings.push_back(fmt::format(
          "{} is not identifiable from these measurements: over its whole range {}..{} it "
          "changes no simulated time by more than {:.1g}%; it keeps its nominal value {}",
          q.path, q.text(q.lower), q.text(q.upper), 100 * kNoEffect, q.text(q.nominal)));
    }
  }

  // Levenberg-Marquardt with bounds (see the header).
  Eigen::VectorXd x = x0;
  double cost = report.nominal_cost;
  double lambda = -1, nu = 2;
  Eigen::VectorXd w = loss.weights(r);
  report.iterations = 0;
  const auto descend = [&] {
    report.converged = false;
    while (report.iterations < options.max_iterations) {
      ++report.iterations;
      if (options.on_iteration) {
        options.on_iteration(report.iterations, options.max_iterations, cost);
      }
      const Eigen::VectorXd g = J.transpose() * w.asDiagonal() * r;
      std::vector<Eigen::Index> active;
      for (Eigen::Index j = 0; j < p; ++j) {
        if (!free[static_cast<size_t>(j)]) continue;
        const bool held = (x[j] <= 0 && g[j] > 0) || (x[j] >= 1 && g[j] < 0);
        if (!held) active.push_back(j);
      }
      if (active.empty()) {
        report.converged = true;
        return;
      }
      const auto q = static_cast<Eigen::Index>(active.size());
      Eigen::MatrixXd A(q, q);
      Eigen::VectorXd b(q);
      for (Eigen::Index a = 0; a < q; ++a) {
        b[a] = -g[active[static_cast<size_t>(a)]];
        for (Eigen::Index c = 0; c < q; ++c) {
          A(a, c) = J.col(active[static_cast<size_t>(a)])
                        .cwiseProduct(w)
                        .dot(J.col(active[static_cast<size_t>(c)]));
        }
      }
      if (lambda < 0) lambda = 1e-3 * A.diagonal().maxCoeff();
      if (b.cwiseAbs().maxCoeff() < 1e-12) {
        report.converged = true;
        return;
      }
      Eigen::MatrixXd D = A.diagonal().cwiseMax(1e-12).asDiagonal();
      const Eigen::VectorXd step = (A + lambda * D).ldlt().solve(b);
      Eigen::VectorXd xn = x;
      for (Eigen::Index a = 0; a < q; ++a) {
        const Eigen::Index j = active[static_cast<size_t>(a)];
        xn[j] = std::clamp(x[j] + step[a], 0.0, 1.0);
      }
      const Eigen::VectorXd dx = xn - x;
      const std::vector<Eigen::VectorXd> trial{xn};
      const Eigen::VectorXd rn = log_ratios(model.batch(trial, keep_train)[0], rows);
      const double cost_n = loss.cost(rn);
      // Gain ratio: actual over predicted decrease of S for the (projected) step, the
      // prediction from the reweighted quadratic model.
      const Eigen::VectorXd predicted_r = r + J * dx;
      const double predicted =
          r.cwiseProduct(w).dot(r) - predicted_r.cwiseProduct(w).dot(predicted_r);
      const double rho = predicted > 0 ? (cost - cost_n) / predicted : -1;
      if (cost_n < cost && rho > 0) {
        const double change = (cost - cost_n) / std::max(cost, 1e-300);
        x = xn;
        r = rn;
        w = loss.weights(r);
        cost = cost_n;
        lambda *= std::max(1.0 / 3.0, 1 - std::pow(2 * rho - 1, 3));
        nu = 2;
        J = jacobian(model, x, rows, keep_train);  // at x: the next step, or the uncertainty
        if (change < options.tolerance || dx.cwiseAbs().maxCoeff() < 1e-7) {
          report.converged = true;
          return;
        }
      } else {
        lambda *= nu;
        nu *= 2;
        if (lambda > 1e12 * std::max(1.0, A.diagonal().maxCoeff())) {
          report.converged = true;  // no step along the gradient lowers S: a minimum
          return;
        }
      }
    }
  };
  descend();
  // The simulated times are piecewise smooth: the tuner's choice of algorithm and protocol, and
  // chunk counts, switch at points that move with the parameters. A finite-difference step that
  // straddles a switch gives the quadratic model a slope that is not there, and the iteration
  // can stop beside a switch whose far side has the lower cost. So a converged descent is
  // probed: each free parameter alone, a few sizes either way (kProbes, in scaled coordinates);
  // the best probe that lowers the cost starts a new descent.
  for (int restart = 0;
       restart < kProbeRestarts && report.converged && report.iterations < options.max_iterations;
       ++restart) {
    std::vector<Eigen::VectorXd> probes;
    for (Eigen::Index j = 0; j < p; ++j) {
      if (!free[static_cast<size_t>(j)]) continue;
      for (const double d : kProbes) {
        for (const double sign : {-1.0, 1.0}) {
          Eigen::VectorXd y = x;
          y[j] = std::clamp(x[j] + sign * d, 0.0, 1.0);
          if (y[j] != x[j]) probes.push_back(y);
        }
      }
    }
    if (probes.empty()) break;
    const std::vector<std::vector<double>> times = model.batch(probes, keep_train);
    size_t best = probes.size();
    double best_cost = cost * (1 - options.tolerance);
    Eigen::VectorXd best_r;
    for (size_t k = 0; k < probes.size(); ++k) {
      const Eigen::VectorXd rk = log_ratios(times[k], rows);
      const double ck = loss.cost(rk);
      if (ck < best_cost) {
        best = k;
        best_cost = ck;
        best_r = rk;
      }
    }
    if (best == probes.size()) break;
    x = probes[best];
    r = best_r;
    w = loss.weights(r);
    cost = best_cost;
    lambda = -1;
    nu = 2;
    J = jacobian(model, x, rows, keep_train);
    descend();
  }
  if (!report.converged) {
    report.warnings.push_back(
        fmt::format("the fit did not converge in {} iterations; the values are the best found",
                    options.max_iterations));
  }

  // Uncertainty and identifiability at the optimum (free parameters not at a bound).
  std::vector<Eigen::Index> est;
  for (Eigen::Index j = 0; j < p; ++j) {
    FittedParameter& q = params[static_cast<size_t>(j)];
    q.value = q.lower + x[j] * (q.upper - q.lower);
    q.at_bound = q.identifiable && (x[j] <= 0 || x[j] >= 1);
    q.stddev = kNaN;
    if (q.identifiable && !q.at_bound && J.col(j).cwiseAbs().maxCoeff() < kNoEffect) {
      // It mattered at the start, but not at the optimum (e.g. a latency that another term
      // now hides): the data do not determine it there.
      q.identifiable = false;
      report.warnings.push_back(fmt::format(
          "{} has no effect on the simulated times at its fitted value {}: the measurements "
          "do not determine it; fix it (--set) or measure where it matters",
          q.path, q.text(q.value)));
    }
    if (q.identifiable && !q.at_bound) est.push_back(j);
    if (q.at_bound) {
      report.warnings.push_back(fmt::format(
          "{} ended at its bound {}: the data push it further; check the bound, the scenario's "
          "hardware, or a model term it stands in for",
          q.path, q.text(q.value)));
    }
  }
  report.correlation.assign(static_cast<size_t>(p),
                            std::vector<double>(static_cast<size_t>(p), kNaN));
  const auto m = static_cast<Eigen::Index>(rows.size());
  const auto k = static_cast<Eigen::Index>(est.size());
  if (k > 0) {
    Eigen::MatrixXd Je(m, k);
    const Eigen::VectorXd sw = w.cwiseSqrt();
    for (Eigen::Index a = 0; a < k; ++a)
      Je.col(a) = J.col(est[static_cast<size_t>(a)]).cwiseProduct(sw);
    const Eigen::MatrixXd JtJ = Je.transpose() * Je;
    Eigen::JacobiSVD<Eigen::MatrixXd> svd(JtJ, Eigen::ComputeFullU | Eigen::ComputeFullV);
    const Eigen::VectorXd sv = svd.singularValues();
    const double cond = sv[k - 1] > 0 ? sv[0] / sv[k - 1] : std::numeric_limits<double>::infinity();
    Eigen::VectorXd inv = sv;
    for (Eigen::Index i = 0; i < k; ++i)
      inv[i] = sv[i] > sv[0] / kSingular ? 1 / sv[i] : 0;
    const Eigen::MatrixXd pinv = svd.matrixV() * inv.asDiagonal() * svd.matrixU().transpose();
    const double s2 = m > k ? r.cwiseProduct(w).dot(r) / static_cast<double>(m - k) : kNaN;
    for (Eigen::Index a = 0; a < k; ++a) {
      FittedParameter& q = params[static_cast<size_t>(est[static_cast<size_t>(a)])];
      q.stddev = std::sqrt(std::max(0.0, s2 * pinv(a, a))) * (q.upper - q.lower);
      if (q.stddev > std::abs(q.value)) {
        // As uncertain as it is large: the report must not call it determined.
        q.identifiable = false;
        report.warnings.push_back(fmt::format(
            "{} is not identifiable: its standard deviation {} exceeds its fitted value {}; "
            "fix it (--set) or add measurements where it matters",
            q.path, q.text(q.stddev), q.text(q.value)));
      } else if (q.path.ends_with("_efficiency") &&
                 std::abs(q.value - q.nominal) >
                     std::max(3 * q.stddev, kPhysicalSlack * q.nominal)) {
        // Efficiencies have physical nominal values (framing, datasheets, the collective
        // library's own figures): a fit far from them describes a model error, not the part.
        report.warnings.push_back(fmt::format(
            "{} moved from its physical value {} to {} ({:+.0f}%), beyond its uncertainty: the "
            "fit absorbs a model error rather than describing the hardware, so it will not carry "
            "over to another cluster with the same part",
            q.path, q.text(q.nominal), q.text(q.value), 100 * (q.value / q.nominal - 1)));
      }
    }
    for (Eigen::Index a = 0; a < k; ++a) {
      for (Eigen::Index c = 0; c < k; ++c) {
        const double d = std::sqrt(pinv(a, a) * pinv(c, c));
        const double rho = d > 0 ? pinv(a, c) / d : kNaN;
        report.correlation[static_cast<size_t>(est[static_cast<size_t>(a)])]
                          [static_cast<size_t>(est[static_cast<size_t>(c)])] = rho;
        if (c > a && std::abs(rho) > kConfounded) {
          report.warnings.push_back(fmt::format(
              "{} and {} are confounded (correlation {:+.3f}): these measurements cannot tell "
              "them apart; fix one (--set) or add measurements that separate them",
              params[static_cast<size_t>(est[static_cast<size_t>(a)])].path,
              params[static_cast<size_t>(est[static_cast<size_t>(c)])].path, rho));
        }
      }
    }
    if (cond > kSingular) {
      report.warnings.push_back(fmt::format(
          "the fitted parameters are confounded as a set, not all identifiable together "
          "(condition number {:.2g} of the scaled normal matrix); their uncertainties are "
          "lower bounds",
          cond));
    }
    for (Eigen::Index a = 0; a < k; ++a) {
      FittedParameter& q = params[static_cast<size_t>(est[static_cast<size_t>(a)])];
      q.data_value = q.value;
      q.data_stddev = q.stddev;
    }

    // Priors (see the header): the posterior of the data's optimum and covariance with each
    // parameter's prior N(nominal, sigma^2), in scaled coordinates: precision L = J'WJ / s^2 +
    // P, mean x + L^-1 P (x0 - x), one Gauss-Newton step from the data's optimum (exact for a
    // model linear around it).
    Eigen::VectorXd P = Eigen::VectorXd::Zero(k);
    for (Eigen::Index a = 0; a < k; ++a) {
      const FittedParameter& q = params[static_cast<size_t>(est[static_cast<size_t>(a)])];
      const double sx = q.prior_sigma / (q.upper - q.lower);
      if (options.priors && sx > 0) P[a] = 1 / (sx * sx);
    }
    if (P.maxCoeff() > 0 && s2 > 0) {
      Eigen::MatrixXd L = JtJ / s2;
      L.diagonal() += P;
      Eigen::JacobiSVD<Eigen::MatrixXd> ls(L, Eigen::ComputeFullU | Eigen::ComputeFullV);
      const Eigen::VectorXd lv = ls.singularValues();
      Eigen::VectorXd linv = lv;
      for (Eigen::Index i = 0; i < k; ++i)
        linv[i] = lv[i] > lv[0] / kSingular ? 1 / lv[i] : 0;
      const Eigen::MatrixXd cov = ls.matrixV() * linv.asDiagonal() * ls.matrixU().transpose();
      Eigen::VectorXd pull(k);
      for (Eigen::Index a = 0; a < k; ++a) {
        const Eigen::Index j = est[static_cast<size_t>(a)];
        pull[a] = P[a] * (x0[j] - x[j]);
      }
      const Eigen::VectorXd step = cov * pull;
      for (Eigen::Index a = 0; a < k; ++a) {
        const Eigen::Index j = est[static_cast<size_t>(a)];
        FittedParameter& q = params[static_cast<size_t>(j)];
        x[j] = std::clamp(x[j] + step[a], 0.0, 1.0);
        q.value = q.lower + x[j] * (q.upper - q.lower);
        q.stddev = std::sqrt(std::max(0.0, cov(a, a))) * (q.upper - q.lower);
        if (std::abs(q.value - q.data_value) > q.data_stddev) {
          report.warnings.push_back(fmt::format(
              "{}: the measurements alone give {} +- {}; its prior, {} +- {} (the part's "
              "physical value), holds it at {}: the data ask for more than the part's range, "
              "and the rest of the misfit is a model error",
              q.path, q.text(q.data_value), q.text(q.data_stddev), q.text(q.nominal),
              q.text(q.prior_sigma), q.text(q.value)));
        }
      }
    }
  }

  // Residuals: training rows, then held-out rows, at the nominal and the fitted values.
  const auto add_residuals = [&](const std::vector<Row>& rs, bool is_train,
                                 const std::vector<double>& nominal,
                                 const std::vector<double>& fitted) {
    for (size_t i = 0; i < rs.size(); ++i) {
      const Row& row = rs[i];
      report.residuals.push_back(Residual{row.source, row.table, row.collective, row.nranks,
                                          row.size_bytes, is_train, row.measured_us, nominal[i],
                                          fitted[i]});
    }
  };
  // The training rows at the fitted values (the posterior's, with priors).
  const std::vector<double> fitted_train = model.batch({x}, keep_train)[0];
  const Eigen::VectorXd rf = log_ratios(fitted_train, rows);
  report.fitted_cost = loss.cost(rf);
  report.fitted_rms = std::sqrt(rf.squaredNorm() / static_cast<double>(rf.size()));
  add_residuals(rows, true, t0, fitted_train);
  if (has_test) {
    std::vector<Row> test_rows;
    const std::vector<double> nominal_test = model.times(x0, keep_test, &test_rows);
    add_residuals(test_rows, false, nominal_test, model.batch({x}, keep_test)[0]);
    if (test_rows.empty()) report.warnings.push_back("the test selection has no rows");
  }
  report.bands = band_errors(report.residuals);
  report.simulations = model.simulations() + 1 + (has_test ? 1 : 0);
  return report;
}

// ---- output -----------------------------------------------------------------------------------

std::string calibration_yaml(const FitReport& r) {
  const SourceLocation none;
  const auto scalar = [&](std::string v) { return ConfigNode::scalar(std::move(v), none, ""); };
  const auto number = [&](double v) {
    return scalar(std::isnan(v) ? std::string(".nan") : fmt::format("{:.6g}", v));
  };
  ConfigNode root = ConfigNode::map(none, "");
  root.set("format", none, scalar("rocesim-calibration/1"));
  ConfigNode params = ConfigNode::map(none, "parameters");
  for (const scenario::ParamOverride& f : r.fixed)
    params.set(f.path, none, scalar(f.value.value()));
  for (const FittedParameter& p : r.parameters)
    params.set(p.path, none, scalar(p.text(p.value)));
  root.set("parameters", none, params);

  ConfigNode fit = ConfigNode::map(none, "fit");
  fit.set("scenario", none, scalar(r.scenario));
  ConfigNode files = ConfigNode::sequence(none, "measured");
  for (const std::string& f : r.measured)
    files.append(scalar(f));
  fit.set("measured", none, files);
  fit.set("train", none, scalar(r.train.empty() ? "all" : r.train));
  fit.set("test", none, scalar(!r.test.empty() ? r.test : r.train.empty() ? "none" : "the rest"));
  size_t train_rows = 0;
  for (const Residual& x : r.residuals)
    train_rows += x.train ? 1 : 0;
  fit.set("train_rows", none, scalar(std::to_string(train_rows)));
  fit.set("test_rows", none, scalar(std::to_string(r.residuals.size() - train_rows)));
  fit.set("iterations", none, scalar(std::to_string(r.iterations)));
  fit.set("converged", none, scalar(r.converged ? "true" : "false"));
  fit.set("loss", none, scalar(r.loss));
  fit.set("loss_scale", none, number(r.loss_scale));
  fit.set("cost_nominal", none, number(r.nominal_cost));
  fit.set("cost_fitted", none, number(r.fitted_cost));
  fit.set("rms_log_ratio_nominal", none, number(r.nominal_rms));
  fit.set("rms_log_ratio_fitted", none, number(r.fitted_rms));
  ConfigNode per = ConfigNode::map(none, "parameters");
  for (const FittedParameter& p : r.parameters) {
    ConfigNode e = ConfigNode::map(none, p.path);
    e.set("value", none, scalar(p.text(p.value)));
    e.set("stddev", none, std::isnan(p.stddev) ? scalar("null") : scalar(p.text(p.stddev)));
    e.set("nominal", none, scalar(p.text(p.nominal)));
    e.set("prior_stddev", none, scalar(p.prior_sigma > 0 ? p.text(p.prior_sigma) : "none"));
    e.set("data_value", none, scalar(p.text(std::isnan(p.data_stddev) ? p.value : p.data_value)));
    e.set("data_stddev", none,
          std::isnan(p.data_stddev) ? scalar("null") : scalar(p.text(p.data_stddev)));
    e.set("bounds", none, scalar(p.text(p.lower) + ".." + p.text(p.upper)));
    e.set("at_bound", none, scalar(p.at_bound ? "true" : "false"));
    e.set("identifiable", none, scalar(p.identifiable ? "true" : "false"));
    per.set(p.path, none, e);
  }
  fit.set("parameters", none, per);
  ConfigNode bands = ConfigNode::sequence(none, "abs_time_error");
  for (const BandError& b : r.bands) {
    ConfigNode e = ConfigNode::map(none, "");
    e.set("set", none, scalar(b.set));
    e.set("band", none, scalar(b.band));
    e.set("rows", none, scalar(std::to_string(b.rows)));
    e.set("nominal_median", none, number(b.nominal_median));
    e.set("nominal_p90", none, number(b.nominal_p90));
    e.set("fitted_median", none, number(b.fitted_median));
    e.set("fitted_p90", none, number(b.fitted_p90));
    bands.append(e);
  }
  fit.set("abs_time_error", none, bands);
  ConfigNode warnings = ConfigNode::sequence(none, "warnings");
  for (const std::string& w : r.warnings)
    warnings.append(scalar(w));
  fit.set("warnings", none, warnings);
  root.set("fit", none, fit);
  return "# Written by rocesim calibrate fit. A scenario uses it with `calibration: FILE`.\n" +
         scenario::to_yaml(root) + "\n";
}

std::string format_report(const FitReport& r) {
  std::string out = fmt::format(
      "calibration fit: {} parameters, {} iterations ({}), {} simulations of the training rows\n"
      "loss {} (scale {:g}): nominal {:.4g}, fitted {:.4g}; rms log ratio: nominal {:.4f}, "
      "fitted {:.4f}\n\n",
      r.parameters.size(), r.iterations, r.converged ? "converged" : "not converged", r.simulations,
      r.loss, r.loss_scale, r.nominal_cost, r.fitted_cost, r.nominal_rms, r.fitted_rms);
  out += fmt::format("{:<36} {:>14} {:>14} {:>14} {:>14}  {}\n", "parameter", "nominal",
                     "prior stddev", "fitted", "stddev", "bounds");
  for (const FittedParameter& p : r.parameters) {
    std::string note = p.text(p.lower) + ".." + p.text(p.upper);
    if (!p.identifiable) {
      note += p.value == p.nominal ? "  not identifiable (held)" : "  not identifiable";
    }
    if (p.at_bound) note += "  at bound";
    out += fmt::format("{:<36} {:>14} {:>14} {:>14} {:>14}  {}\n", p.path, p.text(p.nominal),
                       p.prior_sigma > 0 ? p.text(p.prior_sigma) : "none", p.text(p.value),
                       std::isnan(p.stddev) ? "-" : p.text(p.stddev), note);
  }
  out += fmt::format("\n{:<6} {:<9} {:>5}   {:>22}   {:>22}\n", "rows", "band", "n",
                     "nominal |err| med/p90", "fitted |err| med/p90");
  for (const BandError& b : r.bands) {
    out += fmt::format("{:<6} {:<9} {:>5}   {:>10.1f}% /{:>8.1f}%   {:>10.1f}% /{:>8.1f}%\n", b.set,
                       b.band, b.rows, 100 * b.nominal_median, 100 * b.nominal_p90,
                       100 * b.fitted_median, 100 * b.fitted_p90);
  }
  for (const std::string& w : r.warnings)
    out += "\nwarning: " + w;
  if (!r.warnings.empty()) out += "\n";
  return out;
}

std::string residuals_csv(const FitReport& r) {
  std::string out =
      "set,source,table,collective,nranks,size_bytes,measured_us,nominal_us,fitted_us,"
      "nominal_error,fitted_error\n";
  const auto quoted = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s)
      q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const Residual& x : r.residuals) {
    out += fmt::format("{},{},{},{},{},{},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g}\n",
                       x.train ? "train" : "test", quoted(x.source), quoted(x.table), x.collective,
                       x.nranks, x.size_bytes, x.measured_us, x.nominal_us, x.fitted_us,
                       x.nominal_error(), x.fitted_error());
  }
  return out;
}

}  // namespace rocesim::calibrate
