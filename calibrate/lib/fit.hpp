// The model fitter behind `rocesim calibrate fit`: finds the values of named scenario parameters
// (NIC and NVLink efficiency, NCCL's per-step overhead, launch and hop latency factors, link and
// switch latencies, ...) that make rocesim's simulated collective times match measured ones.
//
// Model. Measurement i is one row of a measured nccl-tests table (a collective, a rank count, a
// message size, a measured time t_i). With parameters theta, the simulator gives s_i(theta): the
// validation run of that row (validation/lib/validate.hpp) on the scenario with theta applied as
// calibrated parameters (sim/scenario/calibration.hpp). The residual is the log ratio
//
//     r_i(theta) = ln(s_i(theta) / t_i),
//
// so that an 8-byte latency and an 8-GiB transfer weigh alike (a relative error e gives
// r = ln(1 + e) ~ e), and the fit minimises S(theta) = sum_i f^2 rho((r_i / f)^2) subject to
// bounds lower_j <= theta_j <= upper_j. The loss rho is `linear` (rho(z) = z: plain least
// squares), `soft_l1` (rho(z) = 2 (sqrt(1 + z) - 1): quadratic for small residuals, linear for
// large ones) or `cauchy` (rho(z) = ln(1 + z)); f (`loss_scale`, default 0.1, about a 10% error)
// is where a residual stops counting fully. Real nccl-tests logs hold rows a model should not
// chase (a congested run, a size where NCCL switched protocol for reasons outside the model);
// a robust loss keeps them from dragging every other row off.
//
// Method: Levenberg-Marquardt (Nielsen's damping update) in scaled coordinates
// x_j = (theta_j - lower_j) / (upper_j - lower_j) in [0, 1], with the simulator in the loop. The
// Jacobian J_ij = dr_i/dx_j is taken by central differences (step h = 1e-3; one-sided, inward, at
// a bound). A robust loss enters as iteratively reweighted least squares with weights
// w_i = rho'((r_i / f)^2). A step solves (J'WJ + lambda diag(J'WJ)) dx = -J'Wr over the free
// parameters (a parameter at a bound whose gradient pushes it outward is held), is projected onto
// the box, and is kept if it lowers S. The simulations of one Jacobian run in parallel
// (`threads`); the result does not depend on it. The simulated times are piecewise smooth (the
// tuner's algorithm and protocol, chunk counts): a difference that straddles a switch gives a
// slope that is not there, and the descent can stop beside a switch with a lower cost beyond it.
// So a converged descent is probed, each free parameter alone at +-0.003, 0.01 and 0.03 in
// scaled coordinates; the best probe that lowers S by more than the tolerance starts a new
// descent (at most 4 times, within the iteration limit).
//
// Uncertainty. At the optimum, with m measurements and p free parameters, the residual variance
// is s^2 = sum w_i r_i^2 / (m - p) and the covariance of x is s^2 (J'WJ)^+ (pseudo-inverse by
// SVD; with a robust loss, the usual approximation that treats the weights as fixed); the
// standard deviation of theta_j is (upper_j - lower_j) sqrt(cov_jj). A parameter is reported as
// not identifiable when its column of J is (numerically) zero -- no measurement depends on it --
// and as confounded with another when their correlation exceeds 0.95 in absolute value or the
// scaled J'J is singular (condition number above 1e8): the data cannot tell them apart.
//
// Priors. A parameter with a physical value has a Gaussian prior around its nominal value (the
// scenario's, i.e. its hardware preset's or the collective library's): an efficiency N(nominal,
// (0.1 nominal)^2) (framing, datasheets and the library's own figures fix it to about 10%),
// NCCL's launch and per-step latency factors N(1, 0.5^2) (NCCL's constants, measured on NVIDIA's
// reference systems, are off by tens of percent elsewhere), a time N(nominal, nominal^2); other
// parameters have none. They enter after the fit, with the data's covariance s^2 (J'WJ)^+ as its
// likelihood (the Laplace approximation): the posterior precision is J'WJ / s^2 + P, P the
// priors' precisions, and the posterior mean is one Gauss-Newton step from the data's optimum
// toward the nominal values, x + (J'WJ / s^2 + P)^-1 P (x0 - x). The noisier the rows (s^2,
// model errors included), the more the priors hold: a parameter the data can only move by
// absorbing a model error stays near its physical value, and the report says when a prior held
// a parameter more than one of the data's standard deviations from where the data alone put it.
// `value` and `stddev` are the posterior's; `data_value` and `data_stddev` the data's alone, and
// identifiability, correlations and the absorbed-error warnings are about the data alone.
//
// Cross-validation: the fit uses the `train` selection of the measured rows; the `test`
// selection (by default, when `train` is given, every other row) is simulated with the nominal
// and with the fitted values, and its errors are reported per size band.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/params.hpp"
#include "validation/lib/nccl_tests_log.hpp"
#include "validation/lib/validate.hpp"

namespace rocesim::calibrate {

/// A subset of measured rows: clauses joined by ',' that must all hold, each KEY=VALUES with
/// alternatives joined by '|':
///   collective=allreduce|allgather   (any spelling normalise_collective accepts)
///   size=1MiB..64MiB                 (a range of the size column, either end open: ..4KiB)
///   nodes=2..4, ranks=16             (integer ranges; nodes from the table, else ranks / the
///                                     scenario's GPUs per server)
///   table=NAME                       (a table name of a measured dataset, or "table<k>")
/// An empty text selects every row.
class Selection {
 public:
  Selection() = default;
  /// Throws InputError (located at `origin`, e.g. "--train") for a malformed selection.
  static Selection parse(const std::string& text, const std::string& origin);
  /// `gpus_per_server` turns a rank count into nodes when the table has no node count.
  bool matches(const validation::NcclTestsTable& t, size_t table_index,
               const validation::NcclTestsRow& r, int gpus_per_server) const;
  bool empty() const { return clauses_.empty(); }
  const std::string& text() const { return text_; }

 private:
  struct Clause {
    std::string key;
    std::vector<std::string> names;                   // collective, table
    std::vector<std::pair<int64_t, int64_t>> ranges;  // size, nodes, ranks (inclusive)
  };
  std::string text_;
  std::vector<Clause> clauses_;
};

/// A parameter to fit: a scenario key's dotted path, optionally with bounds in its own unit
/// ("topology.node.nic_efficiency", "nccl.NCCL_NET_OVERHEAD=0us..20us").
struct ParameterSpec {
  std::string path;
  std::optional<std::string> lower, upper;  // as written, with units
  /// Parses "PATH" or "PATH=LO..HI" (either end may be empty). Throws InputError.
  static ParameterSpec parse(const std::string& text, const std::string& origin);
};

/// The parameters fitted when none are named: they cover the bandwidth (NIC and NVLink
/// efficiency) and the latency (NCCL's per-step network overhead, launch and per-hop latency
/// factors) of the NCCL model. fit() fits the xGMI efficiency instead of the NVLink one on
/// servers with an xGMI mesh (`scale_up: mesh`).
std::vector<ParameterSpec> default_parameters();

struct FitOptions {
  std::vector<ParameterSpec> parameters;  // empty: default_parameters()
  Selection train, test;                  // test empty: the complement of train, if train is set
  int max_iterations = 40;
  /// Stop when an accepted step lowers S by less than this fraction of it: the simulated times
  /// are piecewise smooth (chunk counts, protocol and algorithm choices), so smaller gains are
  /// steps along a rough valley floor, not information.
  double tolerance = 1e-3;
  std::string loss = "soft_l1";  // linear | soft_l1 | cauchy
  double loss_scale = 0.1;       // f: the log-ratio residual where the loss turns robust
  int threads = 1;
  std::optional<uint64_t> seed;
  /// Combine the fit with the parameters' priors (see the header); false: the data alone.
  bool priors = true;
  /// Values applied before fitting and not fitted (e.g. --set, or a NIC probe's efficiency).
  std::vector<scenario::ParamOverride> fixed;
  /// Called at the start of each iteration (1-based) with the iteration limit and the cost so
  /// far (progress reports).
  std::function<void(int iteration, int max_iterations, double cost)> on_iteration;
};

inline constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

struct FittedParameter {
  std::string path;
  ParamType type = ParamType::Number;
  double nominal = 0, lower = 0, upper = 0;  // SI: seconds, bit/s, bytes, or plain
  double value = 0, stddev = 0;              // with priors: the posterior's
  double prior_sigma = 0;                    // the prior's width around `nominal` (SI); 0: no prior
  double data_value = 0, data_stddev = kNoValue;  // the data's alone (NaN when not estimated)
  bool at_bound = false;
  bool identifiable = true;
  /// The value as scenario text with its unit ("2.31us", "391.5Gbps", "0.9321").
  std::string text(double v) const;
};

/// One measured row with its simulated times.
struct Residual {
  std::string source, table, collective;
  int nranks = 0;
  int64_t size_bytes = 0;
  bool train = true;
  double measured_us = 0, nominal_us = 0, fitted_us = 0;
  double nominal_error() const { return nominal_us / measured_us - 1; }
  double fitted_error() const { return fitted_us / measured_us - 1; }
};

/// Median and 90th percentile of |relative time error| per size band, nominal and fitted.
struct BandError {
  std::string set, band;  // set: "train" | "test"; band: "<1MiB", "1-64MiB", ">=64MiB", "all"
  size_t rows = 0;
  double nominal_median = 0, nominal_p90 = 0, fitted_median = 0, fitted_p90 = 0;
};

struct FitReport {
  std::string scenario;
  std::vector<std::string> measured;  // files
  std::string train, test;            // selections as given ("" all / complement)
  std::vector<FittedParameter> parameters;
  std::vector<std::vector<double>> correlation;  // between fitted parameters
  std::vector<Residual> residuals;
  std::vector<BandError> bands;
  int iterations = 0;
  int simulations = 0;  // scenario evaluations (each simulates every training row)
  bool converged = false;
  std::string loss;
  double loss_scale = 0;
  double nominal_cost = 0, fitted_cost = 0;  // S at the nominal and fitted values
  double nominal_rms = 0, fitted_rms = 0;    // root mean square log ratio, training rows
  std::vector<std::string> warnings;
  std::vector<scenario::ParamOverride> fixed;
};

/// Fits the parameters to the measured rows. Throws InputError for an unknown parameter, one
/// that is not a number, time, bandwidth or size, bounds that do not contain the nominal value,
/// or a selection without rows.
FitReport fit(const std::vector<validation::NcclTestsLog>& measured,
              const std::vector<std::string>& measured_files, const std::string& scenario_path,
              const FitOptions& options);

/// calibration.yaml: `format`, `parameters` (the fitted values, with units) and `fit` (how they
/// were obtained); readable by a scenario's `calibration:` key.
std::string calibration_yaml(const FitReport& r);
/// The report for a terminal: parameters with uncertainty, warnings, errors per band.
std::string format_report(const FitReport& r);
/// Per measured row: set, sizes, measured, nominal and fitted times and errors (CSV).
std::string residuals_csv(const FitReport& r);

}  // namespace rocesim::calibrate
