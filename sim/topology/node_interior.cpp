#include "sim/topology/node_interior.hpp"

#include <fmt/format.h>

#include <bit>
#include <charconv>
#include <string>
#include <string_view>
#include <vector>

namespace rocesim::topology {
namespace {

// Defaults: H100 HGX-class server (MODELS.md 7 and 8.1). NVLink 4 gives 450 GB/s per direction
// per GPU; PCIe Gen5 x16; ConnectX-7 at 400 Gb/s on RoCEv2 with a 4096-byte MTU. The payload rates
// of the NIC cable and of PCIe follow from their framing (sim/fabric/wire.hpp). The two latencies
// are estimates [E] of one hop through NVSwitch and through the PCIe switch; calibrate them.
// The xGMI defaults, for `scale_up: mesh`, are the MI300X's (HARDWARE.md 1.4): 7 Infinity Fabric
// links per GPU, 64 GB/s raw per link per direction; the xGMI latency is an estimate [E] too.
constexpr Param kServerParams[] = {
    {.key = "server",
     .type = ParamType::String,
     .help = "a server preset whose keys this section starts from (written keys win): a name in "
             "topologies/hardware/servers (hgx-h100, mi300x, ...) or the path of a preset file",
     .optional = true},
    {.key = "nic",
     .type = ParamType::String,
     .help = "a NIC preset (nic_speed, PCIe), under the server preset's keys: a name in "
             "topologies/hardware/nics (connectx-7, pollara-400, ...) or the path of a preset file",
     .optional = true},
    {.key = "gpus",
     .type = ParamType::Integer,
     .fallback = "8",
     .help = "GPUs per server",
     .check = Check::Positive,
     .max = 1024},
    {.key = "gpu_arch",
     .type = ParamType::Choice,
     .fallback = "hopper",
     .help = "GPU generation, which sets the collective library's per-channel protocol "
             "throughput (NCCL's tuning tables): volta (V100), ampere (A100), hopper (H100, "
             "H200), blackwell (B200, B300, GB200), cdna3 (AMD MI300X, MI325X: gfx942), cdna4 "
             "(AMD MI350X, MI355X: gfx950)",
     .choices = "volta|ampere|hopper|blackwell|cdna3|cdna4"},
    {.key = "gpu_tflops",
     .type = ParamType::Number,
     .fallback = "989.4",
     .help = "a GPU's dense BF16/FP16 tensor throughput, TFLOP/s, from its datasheet (H100 SXM "
             "989.4, A100 312); the compute model of training workloads scales it by achieved "
             "efficiencies",
     .check = Check::Positive},
    {.key = "gpu_tflops_fp8",
     .type = ParamType::Number,
     .fallback = "1978.9",
     .help = "dense FP8 tensor throughput, TFLOP/s (0: the GPU has no FP8; A100)",
     .check = Check::NonNegative},
    {.key = "gpu_tflops_fp32",
     .type = ParamType::Number,
     .fallback = "494.7",
     .help = "dense TF32 tensor throughput, TFLOP/s, for FP32 training (H100 SXM 494.7, A100 156)",
     .check = Check::Positive},
    {.key = "gpu_memory",
     .type = ParamType::Bytes,
     .fallback = "80GB",
     .help = "a GPU's memory (HBM), what a training job's memory model must fit in",
     .check = Check::Positive},
    {.key = "gpu_memory_bandwidth",
     .type = ParamType::Bandwidth,
     .fallback = "3.35TB/s",
     .help = "a GPU's memory bandwidth (H100 SXM 3.35TB/s, A100 80GB 2.039TB/s): the roofline of "
             "memory-bound operations of training workloads",
     .check = Check::Positive},
    {.key = "gpu_copy_efficiency",
     .type = ParamType::Number,
     .fallback = "0.9",
     .help = "share of gpu_memory_bandwidth that a device-to-device copy achieves, counting the "
             "bytes read and written: NCCL's collectives on one rank copy the buffer so "
             "(cudaMemcpyAsync). 0.9: 4.31 TB/s of 4.8 measured on one H200 (docs/models/"
             "collectives/README.md, One rank)",
     .check = Check::Fraction},
    {.key = "gpu_copy_latency",
     .type = ParamType::Time,
     .fallback = "6us",
     .help = "time of a device-to-device copy of no bytes, as a benchmark's CUDA events see it "
             "(NCCL's collectives on one rank); 6us measured on one H200",
     .check = Check::Positive},
    {.key = "nics",
     .type = ParamType::Integer,
     .help = "RDMA NICs per server (default: one per GPU), a divisor of gpus (GPU i uses NIC "
             "i*nics/gpus, shared) or a multiple (GPU i owns NICs i*k .. i*k+k-1, k = nics/gpus, "
             "each behind its own PCIe link; NCCL runs a rail per NIC)",
     .check = Check::Positive,
     .optional = true,
     .max = 1024},
    {.key = "nic_speed",
     .type = ParamType::Bandwidth,
     .fallback = "400Gbps",
     .help = "line rate of each NIC and of its cable to the leaf",
     .check = Check::Positive},
    {.key = "transport",
     .type = ParamType::Choice,
     .fallback = "roce",
     .help = "the NICs' link layer, whose packet framing sets the payload share of nic_speed: "
             "roce (RoCEv2, 82 bytes per packet at IPv4) or infiniband (28 bytes per packet)",
     .choices = "roce|infiniband"},
    {.key = "mtu",
     .type = ParamType::Bytes,
     .fallback = "4096B",
     .help = "RDMA path MTU: payload bytes per packet (256B to 4096B, a power of two)",
     .check = Check::Positive},
    {.key = "ipv6",
     .type = ParamType::Boolean,
     .fallback = "false",
     .help = "RoCEv2 over IPv6 (40-byte IP header instead of 20)"},
    {.key = "vlan",
     .type = ParamType::Boolean,
     .fallback = "false",
     .help = "RoCEv2 frames carry an 802.1Q tag (4 bytes)"},
    {.key = "net_latency",
     .type = ParamType::Time,
     .fallback = "0s",
     .help = "the NIC's latency as its network plugin reports it to NCCL (graph latencyInter): "
             "0 for InfiniBand and RoCE verbs; AWS's aws-ofi-nccl reports 75us for EFA on p4d and "
             "p5, 35us on p5en and p6. NCCL adds it to every network step, twice for Simple; so "
             "does the simulation",
     .check = Check::NonNegative},
    {.key = "nic_paths",
     .type = ParamType::Integer,
     .fallback = "1",
     .help = "paths the NIC itself spreads each QP's packets over, each with its own UDP source "
             "port (entropy) through the switches' hashing, the QP's bytes split evenly among "
             "them: multipath transports such as AWS EFA's SRD (64) and Ultra Ethernet packet "
             "spraying; 1: one path per QP, as RoCE and InfiniBand reliable connections",
     .check = Check::Positive,
     .max = 256},
    {.key = "nic_efficiency",
     .type = ParamType::Number,
     .fallback = "1",
     .help = "fraction of the wire's payload rate (nic_speed x mtu / (mtu + framing)) that the "
             "NIC sustains: NIC and host limits beyond the framing; calibratable",
     .check = Check::Fraction},
    {.key = "scale_up",
     .type = ParamType::Choice,
     .fallback = "nvswitch",
     .help = "how the GPUs of a server reach each other: nvswitch (NVIDIA NVLink: one link of "
             "nvlink_bandwidth per GPU to a non-blocking NVSwitch, GPU -> NVSwitch -> GPU), "
             "mesh (AMD Infinity Fabric / xGMI: one direct link of xgmi_link_bandwidth per GPU "
             "pair, gpus - 1 per GPU, GPU -> GPU) or pcie (no GPU interconnect: GPU -> PCIe "
             "switch -> GPU below one switch, through the CPU sockets between switches; needs "
             "pcie_switches)",
     .choices = "nvswitch|mesh|pcie"},
    {.key = "nvlink_bandwidth",
     .type = ParamType::Bandwidth,
     .fallback = "450GB/s",
     .help = "NVLink bandwidth per GPU per direction (A100: 300GB/s, H100: 450GB/s); "
             "scale_up: nvswitch only",
     .check = Check::Positive},
    {.key = "nvlink_efficiency",
     .type = ParamType::Number,
     .fallback = "1",
     .help = "fraction of nvlink_bandwidth that NCCL's kernels achieve; calibratable; "
             "scale_up: nvswitch only",
     .check = Check::Fraction},
    {.key = "nvlink_latency",
     .type = ParamType::Time,
     .fallback = "250ns",
     .help = "one-way latency of each GPU-NVSwitch link; scale_up: nvswitch only",
     .check = Check::NonNegative},
    {.key = "xgmi_link_bandwidth",
     .type = ParamType::Bandwidth,
     .fallback = "64GB/s",
     .help = "bandwidth of one xGMI link (one GPU pair) per direction, raw; a GPU has gpus - 1 "
             "of them (MI300X, MI325X: 64GB/s, 448GB/s per GPU); scale_up: mesh only",
     .check = Check::Positive},
    {.key = "xgmi_efficiency",
     .type = ParamType::Number,
     .fallback = "1",
     .help = "fraction of xgmi_link_bandwidth that the collective library's kernels achieve "
             "(MI300X: 45-48 of 64GB/s measured); calibratable; scale_up: mesh only",
     .check = Check::Fraction},
    {.key = "xgmi_latency",
     .type = ParamType::Time,
     .fallback = "250ns",
     .help = "one-way latency of each GPU-GPU xGMI link; scale_up: mesh only",
     .check = Check::NonNegative},
    {.key = "pcie_generation",
     .type = ParamType::Integer,
     .fallback = "5",
     .help = "PCIe generation of the GPU-NIC path (1 to 6)",
     .check = Check::Positive},
    {.key = "pcie_lanes",
     .type = ParamType::Integer,
     .fallback = "16",
     .help = "PCIe lanes of the GPU-NIC path (1, 2, 4, 8 or 16)",
     .check = Check::Positive,
     .max = 32},
    {.key = "pcie_max_payload",
     .type = ParamType::Bytes,
     .fallback = "256B",
     .help = "PCIe max payload size (MPS) of a write TLP; sets the TLP overhead",
     .check = Check::Positive},
    {.key = "pcie_bandwidth",
     .type = ParamType::Bandwidth,
     .help = "GPU-to-NIC payload bandwidth per direction (default: derived from "
             "pcie_generation, pcie_lanes and pcie_max_payload; Gen5 x16 at 256B = 57.6GB/s)",
     .check = Check::Positive,
     .optional = true},
    {.key = "pcie_latency",
     .type = ParamType::Time,
     .fallback = "500ns",
     .help = "one-way GPU-to-NIC latency through the PCIe switch (with pcie_switches, half on "
             "each side of the switch, and half again from a switch to its CPU socket)",
     .check = Check::NonNegative},
    {.key = "pcie_switches",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "PCIe switches per server; GPU i sits below switch i * pcie_switches / gpus and NIC "
             "j below j * pcie_switches / nics, so a GPU's traffic to its NIC crosses its switch "
             "and shares its links, and with scale_up: pcie its traffic to other GPUs too; a "
             "divisor of gpus and of nics. 0: each GPU-NIC pair has its own PCIe link",
     .check = Check::NonNegative,
     .max = 64},
    {.key = "gpu_pcie_bandwidth",
     .type = ParamType::Bandwidth,
     .help = "payload bandwidth per direction of a GPU's own PCIe link to its switch "
             "(pcie_switches > 0), where the GPU's PCIe differs from the NIC's (L40S: Gen4 x16 "
             "behind Gen5 switches); default: pcie_bandwidth",
     .check = Check::Positive,
     .optional = true},
    {.key = "pcie_uplink_bandwidth",
     .type = ParamType::Bandwidth,
     .help = "payload bandwidth per direction of a PCIe switch's link to its CPU socket "
             "(pcie_switches > 0); default: pcie_bandwidth",
     .check = Check::Positive,
     .optional = true},
    {.key = "sockets",
     .type = ParamType::Integer,
     .fallback = "2",
     .help = "CPU sockets per server, switch k hanging off socket k * sockets / pcie_switches; "
             "a divisor of pcie_switches (pcie_switches > 0)",
     .check = Check::Positive,
     .max = 8},
    {.key = "cpu_link_bandwidth",
     .type = ParamType::Bandwidth,
     .fallback = "76.8GB/s",
     .help = "bandwidth per direction between two CPU sockets (Intel UPI, AMD Infinity "
             "Fabric), crossed by traffic between PCIe switches of different sockets; default: "
             "two UPI 2.0 links at 16 GT/s (Sapphire Rapids), 38.4GB/s each",
     .check = Check::Positive},
    {.key = "cpu_link_latency",
     .type = ParamType::Time,
     .fallback = "50ns",
     .help = "one-way latency added by crossing from one CPU socket to the other (a remote "
             "socket's memory costs some 40-50 ns more than the local one's)",
     .check = Check::NonNegative},
    {.key = "cpu",
     .type = ParamType::Choice,
     .fallback = "intel-skylake",
     .help = "the host CPU as NCCL tells it apart, which sets NCCL's figure for the link "
             "between sockets (intel-broadwell 6, intel-skylake 10 for Skylake to Ice Lake, "
             "intel-sapphire-rapids 22, intel-emerald-rapids 40 for Emerald and Granite Rapids, "
             "amd-zen2 16 for Zen 1-2, amd-zen4 24 for Zen 3-4, amd-zen5 32, arm 6 GB/s), the "
             "extra bandwidth its search reserves through an Intel root complex, NCCL's LL "
             "throughput cap across nodes and its default NCCL_NET_OVERHEAD (AMD or not)",
     .choices = "intel-broadwell|intel-skylake|intel-sapphire-rapids|intel-emerald-rapids|"
                "amd-zen2|amd-zen4|amd-zen5|arm"},
};

// The keys of each kind of scale-up domain.
struct ScaleUpKeys {
  std::string_view bandwidth, efficiency, latency;
};
constexpr ScaleUpKeys kNvlinkKeys{"nvlink_bandwidth", "nvlink_efficiency", "nvlink_latency"};
constexpr ScaleUpKeys kXgmiKeys{"xgmi_link_bandwidth", "xgmi_efficiency", "xgmi_latency"};

/// The first of `keys` written with a value other than its default, or empty: the keys of the
/// other kind of scale-up domain would be ignored, a mistake unless they hold their defaults (as
/// the effective scenario echoes them, which must load again).
std::string_view set_away_from_default(const ParamReader& r, const ScaleUpKeys& keys) {
  const ConfigNode empty = ConfigNode::map(SourceLocation{}, "");
  const ParamReader defaults(empty, server_table());
  if (r.has(keys.bandwidth) && r.bandwidth(keys.bandwidth) != defaults.bandwidth(keys.bandwidth)) {
    return keys.bandwidth;
  }
  if (r.has(keys.efficiency) && r.number(keys.efficiency) != defaults.number(keys.efficiency)) {
    return keys.efficiency;
  }
  if (r.has(keys.latency) && r.time(keys.latency) != defaults.time(keys.latency)) {
    return keys.latency;
  }
  return {};
}

}  // namespace

const ParamTable& server_table() {
  static const ParamTable table{
      "node",
      "The inside of each server: GPUs, their scale-up domain (an NVSwitch, an xGMI mesh or "
      "PCIe alone), NICs, PCIe switches and CPU sockets.",
      kServerParams};
  return table;
}

ServerSpec read_server(const ParamReader& r) {
  ServerSpec s;
  s.gpus = r.integer_as<uint32_t>("gpus");
  s.nics = r.has("nics") ? r.integer_as<uint32_t>("nics") : s.gpus;
  if (s.gpus % s.nics != 0 && s.nics % s.gpus != 0) {
    r.fail("nics", fmt::format("a divisor or a multiple of gpus ({})", s.gpus),
           std::to_string(s.nics));
  }
  const std::string arch = r.choice("gpu_arch");
  for (fabric::GpuArch a :
       {fabric::GpuArch::Volta, fabric::GpuArch::Ampere, fabric::GpuArch::Hopper,
        fabric::GpuArch::Blackwell, fabric::GpuArch::Cdna3, fabric::GpuArch::Cdna4}) {
    if (fabric::gpu_arch_name(a) == arch) s.arch = a;
  }
  s.gpu.tflops_16bit = r.number("gpu_tflops");
  s.gpu.tflops_fp8 = r.number("gpu_tflops_fp8");
  s.gpu.tflops_fp32 = r.number("gpu_tflops_fp32");
  s.gpu.memory = r.bytes("gpu_memory");
  s.gpu.memory_bandwidth = r.bandwidth("gpu_memory_bandwidth");
  s.gpu.copy_efficiency = r.number("gpu_copy_efficiency");
  s.gpu.copy_latency = r.time("gpu_copy_latency");
  s.nic_speed = r.bandwidth("nic_speed");
  s.wire.layer = r.choice("transport") == "infiniband" ? fabric::LinkLayer::InfiniBand
                                                       : fabric::LinkLayer::RoCEv2;
  s.wire.mtu = r.bytes("mtu").count();
  if (s.wire.mtu < 256 || s.wire.mtu > 4096 ||
      !std::has_single_bit(static_cast<uint64_t>(s.wire.mtu))) {
    r.fail("mtu", "a power of two from 256B to 4096B (an RDMA path MTU)",
           std::to_string(s.wire.mtu) + "B");
  }
  s.wire.ipv6 = r.boolean("ipv6");
  s.wire.vlan = r.boolean("vlan");
  s.nic_efficiency = r.number("nic_efficiency");
  s.net_latency = r.time("net_latency");
  s.nic_paths = r.integer_as<uint32_t>("nic_paths");
  const std::string scale_up = r.choice("scale_up");
  s.scale_up = scale_up == "mesh"   ? fabric::ScaleUp::Mesh
               : scale_up == "pcie" ? fabric::ScaleUp::Pcie
                                    : fabric::ScaleUp::NvSwitch;
  // The keys of the other kinds of scale-up domain would be ignored.
  const bool mesh = s.scale_up == fabric::ScaleUp::Mesh;
  const bool pcie_only = s.scale_up == fabric::ScaleUp::Pcie;
  for (const bool nvlink_keys : {true, false}) {
    if (nvlink_keys ? s.scale_up == fabric::ScaleUp::NvSwitch : mesh) continue;
    const std::string_view key = set_away_from_default(r, nvlink_keys ? kNvlinkKeys : kXgmiKeys);
    if (key.empty()) continue;
    r.fail(key,
           pcie_only ? fmt::format("no {} value with scale_up: pcie (a PCIe server has no GPU "
                                   "interconnect)",
                                   nvlink_keys ? "NVLink" : "xGMI")
           : mesh    ? "no NVLink value with scale_up: mesh (the mesh's links are set by "
                       "xgmi_link_bandwidth, xgmi_efficiency and xgmi_latency)"
                  : "no xGMI value with scale_up: nvswitch (set scale_up: mesh for an xGMI mesh)",
           fmt::format("{}: {}", key, r.self().find(key)->value()));
  }
  s.nvlink_bandwidth = r.bandwidth("nvlink_bandwidth");
  s.nvlink_efficiency = r.number("nvlink_efficiency");
  s.nvlink_latency = r.time("nvlink_latency");
  s.xgmi_link_bandwidth = r.bandwidth("xgmi_link_bandwidth");
  s.xgmi_efficiency = r.number("xgmi_efficiency");
  s.xgmi_latency = r.time("xgmi_latency");
  fabric::PcieLink pcie;
  pcie.generation = r.integer_as<int>("pcie_generation");
  if (pcie.generation > 6) r.fail("pcie_generation", "1 to 6", std::to_string(pcie.generation));
  pcie.lanes = r.integer_as<int>("pcie_lanes");
  if (pcie.lanes > 16 || !std::has_single_bit(static_cast<unsigned>(pcie.lanes))) {
    r.fail("pcie_lanes", "1, 2, 4, 8 or 16", std::to_string(pcie.lanes));
  }
  pcie.max_payload = r.bytes("pcie_max_payload").count();
  if (pcie.max_payload < 128 || pcie.max_payload > 4096 ||
      !std::has_single_bit(static_cast<uint64_t>(pcie.max_payload))) {
    r.fail("pcie_max_payload", "a power of two from 128B to 4096B",
           std::to_string(pcie.max_payload) + "B");
  }
  s.pcie_bandwidth = r.has("pcie_bandwidth") ? r.bandwidth("pcie_bandwidth") : pcie.payload();
  s.pcie_latency = r.time("pcie_latency");
  s.pcie_switches = r.integer_as<uint32_t>("pcie_switches");
  s.sockets = r.integer_as<uint32_t>("sockets");
  s.gpu_pcie_bandwidth =
      r.has("gpu_pcie_bandwidth") ? r.bandwidth("gpu_pcie_bandwidth") : s.pcie_bandwidth;
  s.pcie_uplink_bandwidth =
      r.has("pcie_uplink_bandwidth") ? r.bandwidth("pcie_uplink_bandwidth") : s.pcie_bandwidth;
  s.cpu_link_bandwidth = r.bandwidth("cpu_link_bandwidth");
  s.cpu_link_latency = r.time("cpu_link_latency");
  const std::string cpu = r.choice("cpu");
  for (fabric::CpuKind c :
       {fabric::CpuKind::IntelBroadwell, fabric::CpuKind::IntelSkylake,
        fabric::CpuKind::IntelSapphireRapids, fabric::CpuKind::IntelEmeraldRapids,
        fabric::CpuKind::AmdZen2, fabric::CpuKind::AmdZen4, fabric::CpuKind::AmdZen5,
        fabric::CpuKind::Arm}) {
    if (fabric::cpu_kind_name(c) == cpu) s.cpu = c;
  }
  if (s.scale_up == fabric::ScaleUp::Pcie && s.pcie_switches == 0) {
    r.fail("pcie_switches",
           "at least 1 with scale_up: pcie (its GPUs reach each other through "
           "their PCIe switches)",
           "0");
  }
  if (s.pcie_switches > 0) {
    if (s.gpus % s.pcie_switches != 0 || s.nics % s.pcie_switches != 0) {
      r.fail("pcie_switches",
             fmt::format("a divisor of gpus ({}) and of nics ({}): as many GPUs and NICs below "
                         "each switch",
                         s.gpus, s.nics),
             std::to_string(s.pcie_switches));
    }
    if (s.pcie_switches % s.sockets != 0) {
      r.fail("sockets",
             fmt::format("a divisor of pcie_switches ({}): as many switches on each socket",
                         s.pcie_switches),
             std::to_string(s.sockets));
    }
  }
  return s;
}

SwitchSpec read_switch(const ParamReader& r) {
  return {r.time("latency"), r.bytes("buffer"),
          r.has("capacity") ? r.bandwidth("capacity") : Bandwidth{}};
}

void check_switch_capacity(const fabric::Fabric& f, fabric::SwitchRole role, const SwitchSpec& spec,
                           const ParamReader& section) {
  if (spec.capacity.bits_per_second() <= 0) return;
  std::vector<int64_t> port_rate(f.node_count(), 0);  // per node, over its outgoing links
  for (const fabric::Link& l : f.links())
    port_rate[l.src] += l.line_rate.bits_per_second();
  for (fabric::NodeId n = 0; n < f.node_count(); ++n) {
    const fabric::Node& node = f.node(n);
    if (node.kind != fabric::NodeKind::Switch || node.role != role) continue;
    const int64_t ports = port_rate[n];
    if (ports > spec.capacity.bits_per_second()) {
      section.fail(
          "capacity",
          fmt::format("ports within the switch's capacity of {}",
                      format_bandwidth_gbps(static_cast<double>(spec.capacity.bits_per_second()))),
          fmt::format("{} with ports of {} in total", node.name,
                      format_bandwidth_gbps(static_cast<double>(ports))));
    }
  }
}

namespace {

/// "node<server>/<part><k>" ("node<server>/<part>" for k < 0), written without a format string:
/// a fabric of 65,536 servers names about 131,000 parts, and formatting was 8 % of its start-up.
std::string part_name(uint32_t server, std::string_view part, int64_t k = -1) {
  char digits[24];
  std::string name = "node";
  name.append(digits, std::to_chars(digits, digits + sizeof digits, server).ptr);
  name += '/';
  name += part;
  if (k >= 0) name.append(digits, std::to_chars(digits, digits + sizeof digits, k).ptr);
  return name;
}

}  // namespace

uint32_t add_server(fabric::Fabric& f, const ServerSpec& spec, uint32_t rack, uint32_t zone) {
  using fabric::Node;
  using fabric::NodeKind;
  const auto index = static_cast<uint32_t>(f.servers().size());
  fabric::Server s;
  s.gpus = spec.gpus;
  s.nics = spec.nics;
  s.rack = rack;
  s.arch = spec.arch;
  s.gpu = spec.gpu;
  s.net_latency = spec.net_latency;
  s.nic_paths = spec.nic_paths;
  s.zone = zone;
  for (uint32_t i = 0; i < spec.gpus; ++i) {
    const fabric::NodeId g = f.add_node(Node{.kind = NodeKind::Gpu,
                                             .server = index,
                                             .local = i,
                                             .zone = zone,
                                             .name = part_name(index, "gpu", i)});
    if (i == 0) s.first_gpu = g;
  }
  for (uint32_t i = 0; i < spec.nics; ++i) {
    const fabric::NodeId n = f.add_node(Node{.kind = NodeKind::Nic,
                                             .server = index,
                                             .local = i,
                                             .zone = zone,
                                             .name = part_name(index, "nic", i)});
    if (i == 0) s.first_nic = n;
  }
  s.scale_up = spec.scale_up;
  if (spec.scale_up == fabric::ScaleUp::Mesh) {
    // One cable per GPU pair, in pair order (0-1, 0-2, ..., 1-2, ...), which fixes link ids.
    for (uint32_t i = 0; i < spec.gpus; ++i) {
      for (uint32_t j = i + 1; j < spec.gpus; ++j) {
        f.add_cable(s.first_gpu + i, s.first_gpu + j, spec.xgmi_payload_rate(), spec.xgmi_latency,
                    spec.xgmi_link_bandwidth);
      }
    }
  } else if (spec.has_nvswitch()) {
    s.nvswitch = f.add_node(Node{.kind = NodeKind::Switch,
                                 .role = fabric::SwitchRole::NvSwitch,
                                 .server = index,
                                 .zone = zone,
                                 .name = part_name(index, "nvswitch")});
    for (uint32_t i = 0; i < spec.gpus; ++i) {
      f.add_cable(s.first_gpu + i, s.nvswitch, spec.nvlink_payload_rate(), spec.nvlink_latency,
                  spec.nvlink_bandwidth);
    }
  }
  s.cpu = spec.cpu;
  if (spec.pcie_switches == 0) {
    // PCIe: a cable per GPU to the NIC it uses, or per NIC to the GPU that owns it.
    for (uint32_t i = 0; i < std::max(spec.gpus, spec.nics); ++i) {
      const uint32_t gpu = spec.nics > spec.gpus ? i / (spec.nics / spec.gpus) : i;
      const uint32_t nic = spec.nics > spec.gpus ? i : i / (spec.gpus / spec.nics);
      f.add_cable(s.first_gpu + gpu, s.first_nic + nic, spec.pcie_bandwidth, spec.pcie_latency);
    }
  } else {
    // A PCIe tree: sockets joined pairwise, switches on their sockets, GPUs and NICs below their
    // switches. pcie_latency is GPU -> switch -> NIC, half on each link.
    s.pcie_switches = spec.pcie_switches;
    s.sockets = spec.sockets;
    const Time half = Time::ps(spec.pcie_latency.count_ps() / 2);
    for (uint32_t k = 0; k < spec.sockets; ++k) {
      const fabric::NodeId c = f.add_node(Node{.kind = NodeKind::Switch,
                                               .role = fabric::SwitchRole::Cpu,
                                               .server = index,
                                               .local = k,
                                               .zone = zone,
                                               .name = part_name(index, "cpu", k)});
      if (k == 0) s.first_cpu = c;
    }
    for (uint32_t a = 0; a < spec.sockets; ++a) {
      for (uint32_t b = a + 1; b < spec.sockets; ++b) {
        f.add_cable(s.first_cpu + a, s.first_cpu + b, spec.cpu_link_bandwidth,
                    spec.cpu_link_latency);
      }
    }
    for (uint32_t k = 0; k < spec.pcie_switches; ++k) {
      const fabric::NodeId p = f.add_node(Node{.kind = NodeKind::Switch,
                                               .role = fabric::SwitchRole::PcieSwitch,
                                               .server = index,
                                               .local = k,
                                               .zone = zone,
                                               .name = part_name(index, "pcie", k)});
      if (k == 0) s.first_pcie_switch = p;
      f.add_cable(p, s.first_cpu + k * spec.sockets / spec.pcie_switches,
                  spec.pcie_uplink_bandwidth, half);
    }
    for (uint32_t i = 0; i < spec.gpus; ++i) {
      f.add_cable(s.first_gpu + i, s.first_pcie_switch + i * spec.pcie_switches / spec.gpus,
                  spec.gpu_pcie_bandwidth, half);
    }
    for (uint32_t j = 0; j < spec.nics; ++j) {
      f.add_cable(s.first_nic + j, s.first_pcie_switch + j * spec.pcie_switches / spec.nics,
                  spec.pcie_bandwidth, half);
    }
  }
  f.add_server(s);
  return index;
}

}  // namespace rocesim::topology
