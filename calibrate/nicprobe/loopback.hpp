// The loopback test: RDMA WRITE bandwidth and latency between two reliable-connected queue pairs
// of one device port, connected to each other, like perftest's ib_write_bw and ib_write_lat run
// against the same NIC. The traffic leaves the host over PCIe and comes back through the NIC
// (on ConnectX, its internal loopback: the cable and the switch are not crossed).
//
// Verbs flow (one context, everything owned by RAII members, released in reverse order):
//   ibv_open_device -> ibv_query_port (the port must be ACTIVE; its LID, MTU) ->
//   ibv_alloc_pd -> per side A and B: a host buffer of 2 x the largest size (a send half and a
//   receive half), ibv_reg_mr (local write, remote write), ibv_create_cq, ibv_create_qp (RC) ->
//   ibv_modify_qp RESET->INIT (port, remote write access) -> INIT->RTR (the peer's QP number,
//   path MTU = the port's active MTU, address vector: on Ethernet (RoCE) a GRH to the port's own
//   GID at --gid-index; on InfiniBand the port's own LID) -> RTR->RTS (retry counts, PSN).
//
// Bandwidth (per size): A posts RDMA WRITEs from its send half into B's receive half, keeping
// tx_depth of them in flight; every 16th is signalled (the unsignalled ones before it complete
// with it) and ibv_poll_cq retires them. After `warmup` untimed writes, `iters` writes are timed
// from the first post to the last completion: bw_gbps = 8 x bytes x iters / ns, msg_rate_mpps =
// iters / us.
//
// Latency (per size), ping-pong: A stores a sequence value in the last byte of its message and
// writes it into B's receive half (inline when the size fits the QP's inline limit); the
// program spins on that byte of B's buffer until the value lands (the NIC places the payload in
// address order, so the last byte arrives last), then B writes the same way back to A and the
// program spins on A's buffer. Half the round trip is one sample; the report gives the median,
// minimum and 99th percentile of `iters` samples after `warmup`. One thread plays both sides.
//
// A completion with an error status, or a write that does not land within 10 s, stops the test
// with DeviceError.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "calibrate/lib/nicprobe_report.hpp"

namespace rocesim::nicprobe {

/// What --loopback runs. Sizes over the port's largest message or the device's largest memory
/// region, and depths over the device's queue limits, are DeviceErrors of run_loopback().
struct LoopbackOptions {
  std::optional<int> gid_index;  ///< RoCE: GID index; default: choose_gid_index()
  std::vector<int64_t> sizes;    ///< message sizes, bytes, increasing
  int iters = 1000;              ///< timed iterations per size and test
  int warmup = 100;              ///< untimed iterations before them
  int tx_depth = 128;            ///< writes in flight in the bandwidth test
};

/// The GID index NCCL and perftest would pick on a RoCE port: a RoCE v2 GID with an IPv4
/// address, else any RoCE v2 GID, else the first valid GID; nothing when the table is empty.
std::optional<int> choose_gid_index(const calibrate::NicProbePort& port);

/// Runs both tests on `port` of `device` (`info`: its entry from probe_device()). Throws
/// DeviceError.
calibrate::NicProbeLoopback run_loopback(ibv_device* device, const calibrate::NicProbeDevice& info,
                                         const calibrate::NicProbePort& port,
                                         const LoopbackOptions& options);

}  // namespace rocesim::nicprobe
