// rocesim-nicprobe: lists the RDMA devices and ports of this host and, with --loopback, measures
// RDMA WRITE bandwidth and latency between two queue pairs of one device (calibrate/nicprobe/
// README.md). Writes a YAML report (rocesim-nicprobe/1, read by calibrate/lib/nicprobe_report.hpp)
// on stdout or to -o FILE, and a human-readable summary on stderr (on stdout with --human).
//
//   rocesim-nicprobe [--device D]... [-o FILE] [--human] [-q]
//   rocesim-nicprobe --loopback [--device D]... [--port P] [--gid-index G] [--sizes 2:8M]
//                    [--iters N] [--warmup N] [--tx-depth N] [-o FILE] [--human] [-q]
//
// Exit codes: 0 success; 2 bad usage (an unknown option, a malformed value); 3 no RDMA device,
// or the device asked for cannot do what was asked (absent, port not ACTIVE, no GID, a verbs
// call failed); 1 anything else (the output file cannot be written).
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/lib/nicprobe_report.hpp"
#include "calibrate/nicprobe/loopback.hpp"
#include "calibrate/nicprobe/probe.hpp"
#include "calibrate/nicprobe/verbs.hpp"
#include "sim/metrics/table.hpp"

#ifndef ROCESIM_VERSION
#define ROCESIM_VERSION "0.0.0"
#endif

namespace {

using rocesim::calibrate::NicProbeDevice;
using rocesim::calibrate::NicProbePort;
using rocesim::calibrate::NicProbeReport;
using rocesim::nicprobe::DeviceError;

constexpr int kExitOk = 0;
constexpr int kExitOther = 1;
constexpr int kExitUsage = 2;
constexpr int kExitDevice = 3;
constexpr int64_t kMaxMessageBytes = int64_t{1} << 30;

struct Options {
  std::vector<std::string> devices;
  bool loopback = false;
  std::optional<int> port;
  std::optional<int> gid_index;
  std::string sizes = "2:8M";
  int iters = 1000;
  int warmup = 100;
  int tx_depth = 128;
  std::string output;
  bool human = false;
  bool quiet = false;
};

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32] = {};
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// The port --loopback tests on `d`: --port, else the first ACTIVE port; nullptr when none.
const NicProbePort* loopback_port(const NicProbeDevice& d, const Options& o) {
  for (const NicProbePort& p : d.ports) {
    if (o.port ? p.port == *o.port : p.state == "ACTIVE") return &p;
  }
  return nullptr;
}

int run(const Options& o) {
  std::vector<int64_t> sizes;
  if (o.loopback) {
    try {
      sizes = rocesim::calibrate::parse_message_sizes(o.sizes, kMaxMessageBytes);
    } catch (const std::invalid_argument& e) {
      std::cerr << "rocesim-nicprobe: error: --sizes " << o.sizes << ": " << e.what() << "\n";
      return kExitUsage;
    }
  }

  NicProbeReport report;
  report.tool = "rocesim-nicprobe " ROCESIM_VERSION;
  report.host = host_name();
  report.date = utc_now();

  const rocesim::nicprobe::DeviceList list;
  if (list.devices().empty()) {
    std::cerr << "rocesim-nicprobe: no RDMA device found (ibv_get_device_list lists none; "
                 "`ibv_devices` lists the NICs once an RDMA driver such as mlx5_ib is loaded)\n";
    return kExitDevice;
  }

  // The devices: those named, else all (a device that cannot be opened is then skipped).
  std::vector<ibv_device*> chosen;
  for (const std::string& name : o.devices) {
    ibv_device* d = list.find(name);
    if (d == nullptr) {
      std::string names;
      for (ibv_device* x : list.devices())
        names += std::string(names.empty() ? "" : ", ") + ibv_get_device_name(x);
      throw DeviceError("no RDMA device named '" + name + "' (this host has: " + names + ")");
    }
    chosen.push_back(d);
  }
  const bool all = chosen.empty();
  if (all) chosen.assign(list.devices().begin(), list.devices().end());
  std::vector<ibv_device*> probed;
  for (ibv_device* d : chosen) {
    try {
      report.devices.push_back(rocesim::nicprobe::probe_device(d));
      probed.push_back(d);
    } catch (const DeviceError& e) {
      if (!all) throw;
      std::cerr << "rocesim-nicprobe: warning: skipping " << ibv_get_device_name(d) << ": "
                << e.what() << "\n";
    }
  }
  if (report.devices.empty()) throw DeviceError("no RDMA device could be queried");

  if (o.loopback) {
    rocesim::nicprobe::LoopbackOptions lo;
    lo.gid_index = o.gid_index;
    lo.sizes = sizes;
    lo.iters = o.iters;
    lo.warmup = o.warmup;
    lo.tx_depth = o.tx_depth;
    for (size_t i = 0; i < report.devices.size(); ++i) {
      const NicProbeDevice& d = report.devices[i];
      const NicProbePort* p = loopback_port(d, o);
      if (p == nullptr) {
        if (all) continue;
        throw DeviceError(o.port ? d.name + " has no port " + std::to_string(*o.port)
                                 : d.name + " has no ACTIVE port to test");
      }
      if (!o.quiet) {
        std::cerr << "rocesim-nicprobe: loopback RDMA WRITE on " << d.name << " port " << p->port
                  << ", " << sizes.size() << " sizes x " << o.iters << " iterations\n";
      }
      report.loopback.push_back(rocesim::nicprobe::run_loopback(probed[i], d, *p, lo));
      auto& l = report.loopback.back();
      l.fit = rocesim::calibrate::fit_loopback(l.rows, p->rate_gbps, &l.fit_note);
    }
    if (report.loopback.empty()) {
      throw DeviceError(o.port ? "no device has an ACTIVE port " + std::to_string(*o.port)
                               : "no device has an ACTIVE port to test");
    }
  }

  const std::string yaml = rocesim::calibrate::nicprobe_to_yaml(report);
  const std::string summary = rocesim::calibrate::nicprobe_summary(report);
  if (!o.output.empty()) rocesim::metrics::write_text_file(o.output, yaml);
  if (o.human) {
    std::cout << summary;
  } else {
    if (o.output.empty()) std::cout << yaml;
    if (!o.quiet) std::cerr << summary;
  }
  if (!o.output.empty() && !o.quiet) std::cerr << "report written to " << o.output << "\n";
  std::cout.flush();
  return std::cout ? kExitOk : kExitOther;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "rocesim-nicprobe: lists the RDMA devices and ports (link layer, speed, width, MTU, GIDs, "
      "limits) and, with --loopback, measures RDMA WRITE bandwidth and latency between two queue "
      "pairs of one device. Writes a YAML report (format rocesim-nicprobe/1) on stdout or to -o "
      "FILE and a summary on stderr. Exit codes: 0 ok, 2 bad usage, 3 no RDMA device or device "
      "unusable, 1 other errors.",
      "rocesim-nicprobe"};
  app.set_version_flag("--version", "rocesim-nicprobe " ROCESIM_VERSION);
  app.add_option("--device,-d", o.devices,
                 "RDMA device to list and test (as ibv_devices names it: mlx5_0); repeatable; "
                 "default: all");
  CLI::Option* loopback =
      app.add_flag("--loopback", o.loopback,
                   "measure RDMA WRITE bandwidth (like ib_write_bw) and latency (like "
                   "ib_write_lat) between two RC queue pairs of each device, on one port");
  app.add_option("--port,-p", o.port,
                 "port to test (default: the first ACTIVE port of each device)")
      ->check(CLI::Range(1, 255))
      ->needs(loopback);
  app.add_option("--gid-index,-x", o.gid_index,
                 "GID index for RoCE (default: a RoCE v2 GID with an IPv4 address, as NCCL "
                 "picks); on InfiniBand, adds a GRH with this GID")
      ->check(CLI::Range(0, 65535))
      ->needs(loopback);
  app.add_option("--sizes", o.sizes,
                 "message sizes: MIN:MAX (powers of two, like ib_write_bw -a) or a list "
                 "(64,4K,1M); K, M, G are x1024; at most 1G")
      ->capture_default_str()
      ->needs(loopback);
  app.add_option("--iters,-n", o.iters, "timed iterations per size, for each test")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000000))
      ->needs(loopback);
  app.add_option("--warmup", o.warmup, "untimed iterations before them")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000000))
      ->needs(loopback);
  app.add_option("--tx-depth,-t", o.tx_depth,
                 "RDMA WRITEs in flight in the bandwidth test (capped by the device's limits)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536))
      ->needs(loopback);
  app.add_option("-o,--output", o.output,
                 "write the YAML report to FILE (through a temporary file and a rename) instead "
                 "of stdout");
  app.add_flag("--human", o.human,
               "print the human-readable summary on stdout (and the YAML only with -o)");
  app.add_flag("-q,--quiet", o.quiet, "no summary or progress on stderr");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "rocesim-nicprobe: error: " << e.what()
              << " (rocesim-nicprobe --help lists the options)\n";
    return kExitUsage;
  }

  try {
    return run(o);
  } catch (const DeviceError& e) {
    std::cerr << "rocesim-nicprobe: " << e.what() << "\n";
    return kExitDevice;
  } catch (const std::exception& e) {
    std::cerr << "rocesim-nicprobe: error: " << e.what() << "\n";
    return kExitOther;
  }
}
