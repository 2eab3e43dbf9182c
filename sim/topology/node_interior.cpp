#include "sim/topology/node_interior.hpp"

#include <fmt/format.h>

namespace rocesim::topology {
namespace {

// Defaults: H100 HGX-class server (MODELS.md 7 and 8.1). NVLink 4 gives 450 GB/s per direction
// per GPU; PCIe Gen5 x16 about 50 GB/s achievable; ConnectX-7 at 400 Gb/s. The two latencies are
// estimates [E] of one hop through NVSwitch and through the PCIe switch; calibrate them.
constexpr Param kServerParams[] = {
    {.key = "gpus",
     .type = ParamType::Integer,
     .fallback = "8",
     .help = "GPUs per server",
     .check = Check::Positive},
    {.key = "nics",
     .type = ParamType::Integer,
     .help = "RDMA NICs per server (default: one per GPU); GPU i uses NIC i*nics/gpus",
     .check = Check::Positive,
     .optional = true},
    {.key = "nic_speed",
     .type = ParamType::Bandwidth,
     .fallback = "400Gbps",
     .help = "line rate of each NIC and of its cable to the leaf",
     .check = Check::Positive},
    {.key = "nic_efficiency",
     .type = ParamType::Number,
     .fallback = "1",
     .help = "fraction of nic_speed that carries RDMA payload (headers, MTU, NIC limits; RoCEv2 "
             "at 4096-byte MTU at most 4096/4178 = 0.98); calibratable",
     .check = Check::Fraction},
    {.key = "nvlink_bandwidth",
     .type = ParamType::Bandwidth,
     .fallback = "450GB/s",
     .help = "NVLink bandwidth per GPU per direction (A100: 300GB/s, H100: 450GB/s)",
     .check = Check::Positive},
    {.key = "nvlink_efficiency",
     .type = ParamType::Number,
     .fallback = "1",
     .help = "fraction of nvlink_bandwidth that NCCL's kernels achieve; calibratable",
     .check = Check::Fraction},
    {.key = "nvlink_latency",
     .type = ParamType::Time,
     .fallback = "250ns",
     .help = "one-way latency of each GPU-NVSwitch link",
     .check = Check::NonNegative},
    {.key = "pcie_bandwidth",
     .type = ParamType::Bandwidth,
     .fallback = "50GB/s",
     .help = "GPU-to-NIC PCIe bandwidth per direction (Gen4 x16 ~25GB/s, Gen5 x16 ~50GB/s "
             "achievable)",
     .check = Check::Positive},
    {.key = "pcie_latency",
     .type = ParamType::Time,
     .fallback = "500ns",
     .help = "one-way GPU-to-NIC latency through the PCIe switch",
     .check = Check::NonNegative},
};

}  // namespace

const ParamTable& server_table() {
  static const ParamTable table{
      "node", "The inside of each server: GPUs, their NVLink domain, NICs and PCIe.",
      kServerParams};
  return table;
}

ServerSpec read_server(const ParamReader& r) {
  ServerSpec s;
  s.gpus = static_cast<uint32_t>(r.integer("gpus"));
  s.nics = r.has("nics") ? static_cast<uint32_t>(r.integer("nics")) : s.gpus;
  if (s.gpus % s.nics != 0) {
    r.fail("nics", fmt::format("a divisor of gpus ({})", s.gpus), std::to_string(s.nics));
  }
  s.nic_speed = r.bandwidth("nic_speed");
  s.nic_efficiency = r.number("nic_efficiency");
  s.nvlink_bandwidth = r.bandwidth("nvlink_bandwidth");
  s.nvlink_efficiency = r.number("nvlink_efficiency");
  s.nvlink_latency = r.time("nvlink_latency");
  s.pcie_bandwidth = r.bandwidth("pcie_bandwidth");
  s.pcie_latency = r.time("pcie_latency");
  return s;
}

SwitchSpec read_switch(const ParamReader& r) {
  return {r.time("latency"), r.bytes("buffer")};
}

uint32_t add_server(fabric::Fabric& f, const ServerSpec& spec, uint32_t rack, uint32_t zone) {
  using fabric::Node;
  using fabric::NodeKind;
  const auto index = static_cast<uint32_t>(f.servers().size());
  fabric::Server s;
  s.gpus = spec.gpus;
  s.nics = spec.nics;
  s.rack = rack;
  s.zone = zone;
  for (uint32_t i = 0; i < spec.gpus; ++i) {
    const fabric::NodeId g = f.add_node(Node{.kind = NodeKind::Gpu,
                                             .server = index,
                                             .local = i,
                                             .zone = zone,
                                             .name = fmt::format("node{}/gpu{}", index, i)});
    if (i == 0) s.first_gpu = g;
  }
  for (uint32_t i = 0; i < spec.nics; ++i) {
    const fabric::NodeId n = f.add_node(Node{.kind = NodeKind::Nic,
                                             .server = index,
                                             .local = i,
                                             .zone = zone,
                                             .name = fmt::format("node{}/nic{}", index, i)});
    if (i == 0) s.first_nic = n;
  }
  if (spec.gpus > 1) {
    s.nvswitch = f.add_node(Node{.kind = NodeKind::Switch,
                                 .role = fabric::SwitchRole::NvSwitch,
                                 .server = index,
                                 .zone = zone,
                                 .name = fmt::format("node{}/nvswitch", index)});
    for (uint32_t i = 0; i < spec.gpus; ++i) {
      f.add_cable(s.first_gpu + i, s.nvswitch, spec.nvlink_payload_rate(), spec.nvlink_latency);
    }
  }
  const uint32_t gpus_per_nic = spec.gpus / spec.nics;
  for (uint32_t i = 0; i < spec.gpus; ++i) {
    f.add_cable(s.first_gpu + i, s.first_nic + i / gpus_per_nic, spec.pcie_bandwidth,
                spec.pcie_latency);
  }
  f.add_server(s);
  return index;
}

}  // namespace rocesim::topology
