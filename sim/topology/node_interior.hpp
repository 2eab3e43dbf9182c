// The inside of a server (a "node" in the cluster sense): GPUs joined by a scale-up domain, and
// NICs behind PCIe, one per GPU by default: with fewer NICs than GPUs, GPU i uses NIC
// i * nics / gpus (GPUs share a NIC); with more, GPU i owns NICs i * k .. i * k + k - 1 (k = nics
// / gpus), each behind its own PCIe link.
// GPUDirect RDMA is assumed: data moves GPU -> PCIe -> NIC without touching host memory. The
// scale-up domain (`scale_up`) is either
//  * nvswitch: an NVLink domain modelled as one non-blocking NVSwitch with a link of
//    `nvlink_bandwidth` each way per GPU (GPU -> NVSwitch -> GPU), or
//  * mesh: AMD Infinity Fabric (xGMI), one direct cable of `xgmi_link_bandwidth` each way per GPU
//    pair, so each GPU has gpus - 1 links and a GPU pair exactly one (GPU -> GPU), or
//  * pcie: none; GPUs reach each other through their PCIe switches, and between switches through
//    the CPU sockets' root complexes and the link between sockets.
// With `pcie_switches` > 0 the server's PCIe is a tree: GPUs and NICs below their switches (in
// index order, as many below each), each switch's uplink to its CPU socket, the sockets joined
// pairwise by `cpu_link_bandwidth`; a GPU's traffic to its NIC then crosses its switch. Without,
// each GPU-NIC pair has a PCIe link of its own.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "sim/core/params.hpp"
#include "sim/fabric/fabric.hpp"
#include "sim/fabric/wire.hpp"

namespace rocesim::topology {

struct ServerSpec {
  uint32_t gpus = 8;
  uint32_t nics = 8;
  fabric::GpuArch arch = fabric::GpuArch::Hopper;
  fabric::GpuSpec gpu{};
  Time net_latency{};      // what the NIC's network plugin reports to NCCL as its latency
  uint32_t nic_paths = 1;  // paths the NIC sprays one QP's packets over (1: one path per QP)
  Bandwidth nic_speed = Bandwidth::gbps(400);  // line rate
  fabric::WireFormat wire;                     // the NIC link's framing
  double nic_efficiency = 1.0;                 // achieved / wire payload rate
  fabric::ScaleUp scale_up = fabric::ScaleUp::NvSwitch;
  Bandwidth nvlink_bandwidth = Bandwidth::gbps(3600);
  double nvlink_efficiency = 1.0;  // achieved / nominal NVLink bandwidth
  Time nvlink_latency{};
  Bandwidth xgmi_link_bandwidth = Bandwidth::gbps(512);  // per GPU pair per direction
  double xgmi_efficiency = 1.0;                          // achieved / nominal xGMI bandwidth
  Time xgmi_latency{};
  Bandwidth pcie_bandwidth = Bandwidth::gbps(400);  // payload rate per direction
  Time pcie_latency{};
  uint32_t pcie_switches = 0;  // 0: a PCIe link per GPU-NIC pair, no switch
  uint32_t sockets = 2;
  Bandwidth gpu_pcie_bandwidth = Bandwidth::gbps(400);     // a GPU's link to its switch
  Bandwidth pcie_uplink_bandwidth = Bandwidth::gbps(400);  // switch to CPU, payload, per direction
  Bandwidth cpu_link_bandwidth = Bandwidth::gbps(400);     // between two sockets, per direction
  Time cpu_link_latency{};
  fabric::CpuKind cpu = fabric::CpuKind::IntelSkylake;

  /// Capacity of a NIC's cable as flows see it: the line rate times the framing's payload share
  /// times the NIC efficiency.
  Bandwidth nic_payload_rate() const {
    return scale(nic_speed, wire.efficiency() * nic_efficiency);
  }
  /// Capacity of a switch-to-switch link of line rate `speed` as flows see it: the fabric carries
  /// the NICs' packets, so the same framing applies.
  Bandwidth fabric_payload_rate(Bandwidth speed) const { return scale(speed, wire.efficiency()); }
  /// Capacity of a GPU's NVLink as flows see it.
  Bandwidth nvlink_payload_rate() const { return scale(nvlink_bandwidth, nvlink_efficiency); }
  /// Capacity of one xGMI link (one GPU pair, one direction) as flows see it.
  Bandwidth xgmi_payload_rate() const { return scale(xgmi_link_bandwidth, xgmi_efficiency); }
  /// Whether the GPUs share an NVSwitch node (scale_up: nvswitch, and more than one GPU).
  bool has_nvswitch() const { return scale_up == fabric::ScaleUp::NvSwitch && gpus > 1; }

 private:
  static Bandwidth scale(Bandwidth b, double f) {
    return Bandwidth::bps(std::llround(static_cast<double>(b.bits_per_second()) * f));
  }
};

const ParamTable& server_table();
ServerSpec read_server(const ParamReader& node_section);

/// Adds one server's GPUs, NICs and NVSwitch (or xGMI mesh) with their internal links and
/// registers it. Returns the index of the server; its NICs are `fabric.servers()[i].first_nic + k`.
uint32_t add_server(fabric::Fabric& f, const ServerSpec& spec, uint32_t rack, uint32_t zone);
/// Nodes and directed links one server adds (for Fabric::reserve); its NIC cables not included.
/// PCIe: 2 per GPU and NIC pair, or with switches 2 per GPU, NIC and switch and 2 per socket
/// pair; NVSwitch: 2 per GPU; mesh: gpus (gpus - 1), one per ordered GPU pair.
inline size_t server_nodes(const ServerSpec& s) {
  return s.gpus + s.nics + (s.has_nvswitch() ? 1 : 0) +
         (s.pcie_switches > 0 ? s.pcie_switches + s.sockets : 0);
}
inline size_t server_links(const ServerSpec& s) {
  const size_t scale_up = s.scale_up == fabric::ScaleUp::Mesh ? size_t{s.gpus} * (s.gpus - 1)
                          : s.has_nvswitch()                  ? 2 * size_t{s.gpus}
                                                              : 0;
  const size_t pcie = s.pcie_switches > 0 ? 2 * size_t{s.gpus + s.nics + s.pcie_switches} +
                                                size_t{s.sockets} * (s.sockets - 1)
                                          : 2 * size_t{std::max(s.gpus, s.nics)};
  return pcie + scale_up;
}

/// Per-role switch settings shared by builders: forwarding latency, buffer, and the ASIC's
/// switching capacity when known (the sum of its port rates may not exceed it).
struct SwitchSpec {
  Time latency{};
  Bytes buffer{};
  Bandwidth capacity{};  // zero: unchecked
};
/// Keys every switch section has besides its own: a hardware preset and the capacity check.
inline constexpr Param kSwitchPresetParam{
    .key = "switch",
    .type = ParamType::String,
    .help =
        "hardware preset of the switch ASIC (topologies/hardware/switches/NAME.yaml, or a "
        "path): its latency, buffer and capacity; keys written here win",
    .optional = true};
inline constexpr Param kSwitchCapacityParam{
    .key = "capacity",
    .type = ParamType::Bandwidth,
    .help =
        "switching capacity of the ASIC per direction; the sum of the rates of the "
        "switch's ports may not exceed it",
    .check = Check::Positive,
    .optional = true};
/// Reads the `latency`, `buffer` and `capacity` keys of a switch section.
SwitchSpec read_switch(const ParamReader& section);
/// Fails at `section`'s capacity key if a switch of `role` has more port capacity (sum of the
/// line rates of its outgoing links) than `spec.capacity`.
void check_switch_capacity(const fabric::Fabric& f, fabric::SwitchRole role, const SwitchSpec& spec,
                           const ParamReader& section);

}  // namespace rocesim::topology
