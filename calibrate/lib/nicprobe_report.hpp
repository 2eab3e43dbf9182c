// The GPU- and NIC-free half of rocesim-nicprobe (calibrate/nicprobe): the report it writes, the
// reader that imports it for the fitter, the fit of the loopback measurements, and the decoding
// of the verbs port attributes. Kept apart from libibverbs so that it is built and tested
// everywhere; calibrate/nicprobe/README.md lists every key of the file.
//
// File. `format: rocesim-nicprobe/1`, the host, the RDMA devices (limits, ports, GID tables) and,
// with --loopback, one entry of `loopback` per tested device port with one row per message size:
// bytes, bw_gbps and msg_rate_mpps from the bandwidth test (perftest's ib_write_bw: a window of
// RDMA WRITEs in flight), lat_us_median/min/p99 from the latency test (ib_write_lat: ping-pong,
// half the round trip). The reader checks every key (a missing or unknown key, a wrong type, a
// value out of range is an InputError at file:line:column naming the key, what was expected and
// what was found) and the consistency of the rows.
//
// Fit. In the bandwidth test the NIC streams `iters` writes of s bytes in an elapsed time T, and
//
//     bw_gbps = 8 s iters / T_ns            (1 Gb/s = 1 bit/ns)
//
// so the time the stream spends per message is t(s) = T / iters = 8 s / bw_gbps ns, in us
//
//     t(s) = 8 s / (1000 bw_gbps(s))        (= 1 / msg_rate_mpps).
//
// The model is a fixed per-message cost o (doorbell, WQE fetch, completion, packet headers of a
// one-packet message) plus the payload at the achievable bandwidth B:
//
//     t(s) = o + 8 s / (1000 B)   =   a + b s   with a = o [us], b = 8 / (1000 B) [us/byte],
//
// linear in (a, b). Small messages are overhead-bound (t ~ o, tens of ns), large ones
// bandwidth-bound (t ~ 8 s / B, up to ms), so plain least squares on t would let the largest
// sizes decide the overhead. The fit minimises the relative error instead: weighted least squares
// with weights w_i = 1 / t_i^2,
//
//     minimise  sum_i w_i (a + b s_i - t_i)^2,
//
// whose closed form, with weighted means s_bar = sum w s / sum w and t_bar = sum w t / sum w, is
//
//     b = sum w (s - s_bar)(t - t_bar) / sum w (s - s_bar)^2,      a = t_bar - b s_bar,
//
// and then o = a, B = 8 / (1000 b) Gb/s. When a < 0 (the sweep starts too large to see the
// overhead, or noise), the constrained optimum with o >= 0 lies on o = 0: b = sum w s t /
// sum w s^2. A fit needs two distinct sizes and b > 0. `residual` is the root mean square of the
// relative errors (a + b s_i) / t_i - 1 (0.01: the model is within about 1%). The same fit of
// lat_us_median gives `latency_us`, the one-way latency of a zero-byte write (its intercept).
// With the port's signalling rate R (rate_gbps), efficiency = B / R is the fraction of the line
// rate that carries RDMA payload: the scenario's topology.node.nic_efficiency.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/core/error.hpp"

namespace rocesim::calibrate {

inline constexpr std::string_view kNicProbeFormat = "rocesim-nicprobe/1";

// ---------------------------------------------------------------------------------------------
// Decoding the verbs port attributes (struct ibv_port_attr), shared by the tool and the tests.

/// One value of ibv_port_attr.active_speed / active_speed_ex: the InfiniBand name of the
/// signalling speed and the data rate of one lane in Gb/s as ibv_devinfo prints it (after line
/// coding: QDR 10, FDR 14, EDR 25, HDR 50, NDR 100, XDR 200).
struct IbSpeed {
  std::string_view name;
  double lane_gbps = 0;
};
/// The speed a code means (1 SDR, 2 DDR, 4 QDR, 8 FDR10, 16 FDR, 32 EDR, 64 HDR, 128 NDR,
/// 256 XDR); nothing for another code.
std::optional<IbSpeed> decode_ib_speed(uint32_t code);
/// Lanes of an ibv_port_attr.active_width code (1: 1X, 2: 4X, 4: 8X, 8: 12X, 16: 2X); nothing
/// for another code.
std::optional<int> decode_ib_width(uint32_t code);
/// Bytes of an enum ibv_mtu value (1: 256 ... 5: 4096); nothing for another value.
std::optional<int> decode_ib_mtu(uint32_t code);
/// Name of an ibv_port_attr.state value: NOP, DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER, else
/// "unknown(N)".
std::string port_state_name(uint32_t state);
/// Name of an ibv_port_attr.phys_state value as the IBTA names it (SLEEP, POLLING, DISABLED,
/// PORT_CONFIGURATION_TRAINING, LINK_UP, LINK_ERROR_RECOVERY, PHY_TEST), else "unknown(N)".
std::string port_phys_state_name(uint32_t phys_state);
/// "InfiniBand", "Ethernet" (RoCE) or "unspecified" for ibv_port_attr.link_layer (1, 2, else).
std::string link_layer_name(uint32_t link_layer);
/// A GID as ibv_devinfo prints it: eight groups of four hex digits, "fe80:0000:...:2b3c".
std::string format_gid(const uint8_t (&raw)[16]);
/// The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d, RoCE v2 over IPv4), else empty.
std::string gid_ipv4(const uint8_t (&raw)[16]);

/// Message sizes of --sizes: "MIN:MAX" (powers of two from MIN up to MAX, like ib_write_bw -a
/// between 2 and 8M) or a comma-separated list ("64,4K,1M"); suffixes K, M, G are binary (x1024).
/// Throws std::invalid_argument with a message on a malformed or empty range, a zero size or a
/// size over `max_bytes`.
std::vector<int64_t> parse_message_sizes(std::string_view text, int64_t max_bytes);

// ---------------------------------------------------------------------------------------------
// The report

struct NicProbeGid {
  int index = 0;       ///< index in the port's GID table (the --gid-index of perftest and NCCL)
  std::string gid;     ///< format_gid()
  std::string type;    ///< "IB", "RoCEv1", "RoCEv2"
  std::string netdev;  ///< Ethernet interface of a RoCE GID ("eth2", "ens1f0np0"); may be empty
  std::string ipv4;    ///< gid_ipv4(); empty for other GIDs
  SourceLocation where;
};

struct NicProbePort {
  int port = 1;                ///< 1-based port number
  std::string state;           ///< port_state_name()
  std::string phys_state;      ///< port_phys_state_name()
  std::string link_layer;      ///< "Ethernet" (RoCE), "InfiniBand" or "unspecified"
  uint32_t speed_code = 0;     ///< active_speed (active_speed_ex where verbs has it), as reported
  uint32_t width_code = 0;     ///< active_width, as reported
  std::string speed;           ///< "NDR", ...; empty when the code is unknown
  double lane_gbps = 0;        ///< data rate of one lane; 0 when unknown
  std::string width;           ///< "4X", ...; empty when the code is unknown
  int lanes = 0;               ///< 0 when unknown
  double rate_gbps = 0;        ///< lanes x lane_gbps: the port's data rate; 0 when unknown
  int mtu_active = 0;          ///< bytes
  int mtu_max = 0;             ///< bytes
  int lid = 0;                 ///< InfiniBand local identifier (0 on Ethernet)
  int sm_lid = 0;              ///< LID of the subnet manager (0 on Ethernet)
  uint64_t max_msg_bytes = 0;  ///< largest message the port sends
  int gid_table_size = 0;      ///< entries of the GID table (valid or not)
  std::vector<NicProbeGid> gids;  ///< the valid (non-zero) entries
  SourceLocation where;
};

struct NicProbeDevice {
  std::string name;              ///< "mlx5_0"
  std::string node_type;         ///< ibv_node_type_str(): "InfiniBand channel adapter", ...
  std::string node_guid;         ///< "b8ce:f603:00a1:2b3c"
  std::string fw_ver;            ///< firmware version, "28.39.1002"
  uint32_t vendor_id = 0;        ///< PCI vendor (0x02c9 Mellanox/NVIDIA)
  uint32_t vendor_part_id = 0;   ///< PCI device (4129 ConnectX-7)
  uint32_t hw_ver = 0;           ///< hardware revision
  std::string pci;               ///< PCI address from sysfs ("0000:17:00.0"); may be empty
  std::optional<int> numa_node;  ///< NUMA node of the PCI device, when sysfs says
  /// ibv_device_attr limits by name (max_qp, max_qp_wr, max_cqe, max_mr_size, ...), in file order.
  std::vector<std::pair<std::string, uint64_t>> limits;
  std::vector<NicProbePort> ports;
  SourceLocation where;

  /// A limit by name; nothing when absent.
  std::optional<uint64_t> limit(std::string_view key) const;
};

/// One message size of the loopback test.
struct NicProbeRow {
  int64_t bytes = 0;
  double bw_gbps = 0;        ///< bandwidth test: 8 x bytes x iters / elapsed, Gb/s
  double msg_rate_mpps = 0;  ///< bandwidth test: iters / elapsed, million messages per second
  double lat_us_median = 0;  ///< latency test: one-way latency (half the round trip), us
  double lat_us_min = 0;
  double lat_us_p99 = 0;
  SourceLocation where;
};

/// The fit of one loopback sweep (see the header comment).
struct NicProbeFit {
  double overhead_us = 0;            ///< per-message cost o
  double bandwidth_gbps = 0;         ///< achievable bandwidth B
  double residual = 0;               ///< rms relative error of the model over the rows
  int rows = 0;                      ///< rows fitted
  bool overhead_clamped = false;     ///< the unconstrained overhead was negative; fitted with o = 0
  std::optional<double> latency_us;  ///< intercept of the latency fit (one-way, zero bytes)
  std::optional<double> efficiency;  ///< bandwidth_gbps / the port's rate_gbps, when known
};

/// The loopback test of one device port: two RC queue pairs of the device connected to each
/// other.
struct NicProbeLoopback {
  std::string device;
  int port = 1;
  std::string link_layer;        ///< of the port: "Ethernet" (RoCE, GRH) or "InfiniBand" (LID)
  std::optional<int> gid_index;  ///< RoCE: the source and destination GID index
  std::string gid_type;          ///< RoCE: the type of that GID ("RoCEv2")
  std::optional<int> lid;        ///< InfiniBand: the port's LID (destination of both QPs)
  int mtu = 0;                   ///< path MTU of the QPs, bytes
  int iters = 0;                 ///< timed iterations per size and test
  int warmup = 0;                ///< untimed iterations before them
  int tx_depth = 0;              ///< writes in flight in the bandwidth test
  int inline_bytes = 0;          ///< latency test: sizes up to this many bytes are sent inline
  std::vector<NicProbeRow> rows;
  SourceLocation where;

  /// Filled by the reader (fit_loopback()); nothing when the rows cannot be fitted (see
  /// fit_note).
  std::optional<NicProbeFit> fit;
  std::string fit_note;  ///< why there is no fit, or what to know about it; empty otherwise
};

struct NicProbeReport {
  std::string format{kNicProbeFormat};
  std::string tool;  ///< "rocesim-nicprobe 0.1.0"
  std::string host;
  std::string date;  ///< UTC, ISO 8601: "2025-03-14T09:26:53Z"
  std::vector<NicProbeDevice> devices;
  std::vector<NicProbeLoopback> loopback;
  std::string source;  ///< the file read; empty for a report built in code

  const NicProbeDevice* find_device(std::string_view name) const;
  const NicProbePort* find_port(std::string_view device, int port) const;
};

/// The weighted least-squares fit of rows (see the header comment); nothing with fewer than two
/// distinct sizes or a non-positive slope, with the reason in `note`. `rate_gbps` > 0 adds the
/// efficiency.
std::optional<NicProbeFit> fit_loopback(const std::vector<NicProbeRow>& rows, double rate_gbps,
                                        std::string* note = nullptr);

/// Reads and checks a rocesim-nicprobe file and fits every loopback sweep. Throws InputError.
NicProbeReport read_nicprobe_report(const std::string& path);
/// The same from YAML text; `name` stands in for the file name in messages.
NicProbeReport read_nicprobe_yaml(const std::string& text, const std::string& name);

/// The report as the YAML file rocesim-nicprobe writes (fits are not written: the reader
/// recomputes them).
std::string nicprobe_to_yaml(const NicProbeReport& report);
/// The human-readable summary: one line per port, one per GID, the loopback table and its fit.
std::string nicprobe_summary(const NicProbeReport& report);

}  // namespace rocesim::calibrate
