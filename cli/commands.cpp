#include "cli/commands.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#ifndef ROCESIM_PYTHON
#define ROCESIM_PYTHON "/usr/bin/python3"
#endif
#ifndef ROCESIM_PLOT_RESULTS_SCRIPT
#define ROCESIM_PLOT_RESULTS_SCRIPT "scripts/plot_results.py"
#endif

namespace rocesim::cli {

int run_program(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Progress::Progress(engine::Simulation& sim, bool quiet) {
  if (quiet || ::isatty(STDERR_FILENO) == 0) return;
  sim.set_progress(
      [this](const engine::Progress& p) {
        if (p.wall_seconds < 2.0) return;
        shown_ = true;
        std::fprintf(stderr,
                     "\r[rocesim] simulated %-12s  %10llu flows delivered  %8zu active  %.1f s  ",
                     format_time(p.now).c_str(), static_cast<unsigned long long>(p.flows_delivered),
                     p.active_flows, p.wall_seconds);
        std::fflush(stderr);
      },
      0.5);
}

void Progress::done() {
  if (shown_) std::fprintf(stderr, "\n");
  shown_ = false;
}

StepProgress::StepProgress(std::string what, bool quiet)
    : what_(std::move(what)),
      enabled_(!quiet && ::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

void StepProgress::update(size_t done, size_t total, const char* unit, const std::string& detail) {
  if (!enabled_) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (elapsed < 2.0) return;
  shown_ = true;
  std::string line = fmt::format("\r[rocesim {}] {}", what_, done);
  if (total > 0) line += fmt::format("/{}", total);
  line += fmt::format(" {}  {:.0f} s", unit, elapsed);
  if (total > 0 && done > 0 && done < total) {
    line += fmt::format("  ETA {:.0f} s",
                        elapsed / static_cast<double>(done) * static_cast<double>(total - done));
  }
  if (!detail.empty()) line += "  " + detail;
  std::fprintf(stderr, "%s   ", line.c_str());
  std::fflush(stderr);
}

void StepProgress::done() {
  if (shown_) std::fprintf(stderr, "\n");
  shown_ = false;
}

int plot(const std::string& results, const std::string& out_dir) {
  // The script reports bad input (exit 2) and a missing library (exit 1) itself.
  const int rc = run_program({ROCESIM_PYTHON, ROCESIM_PLOT_RESULTS_SCRIPT, results, out_dir});
  if (rc < 0 || rc == 127) {
    std::cerr << "error: cannot run " << ROCESIM_PYTHON << " " << ROCESIM_PLOT_RESULTS_SCRIPT
              << " (is Debian's python3 installed? scripts/install-deps)\n";
    return 1;
  }
  return rc;
}

std::vector<scenario::ParamOverride> parse_sets(const std::vector<std::string>& sets,
                                                const std::vector<std::string>& files) {
  std::vector<scenario::ParamOverride> out;
  for (const std::string& f : files) {
    for (scenario::ParamOverride& o : scenario::read_calibration_file(f))
      out.push_back(std::move(o));
  }
  for (const std::string& s : sets)
    out.push_back(scenario::parse_override(s, "--set " + s));
  return out;
}

}  // namespace rocesim::cli
