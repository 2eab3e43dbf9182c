// The fabric: the network graph of one simulated cluster. Nodes are GPUs, RDMA NICs and switches
// (the NVSwitch of a server's NVLink domain, leaves, spines, aggregation and core switches);
// links are directed, each with a capacity and a propagation latency; switches carry their
// forwarding latency and buffer size. A cable is two links, one per direction. A server's GPUs
// reach each other through its NVSwitch or, in an xGMI mesh, over direct GPU-GPU cables.
//
// Build, then seal: topology builders add nodes and links, `seal()` validates (every node
// reaches every other, capacities positive, every GPU in a server, every NIC cabled to a switch,
// GPU and NIC counts consistent, every server's scale-up domain complete), assigns the address
// plan and freezes the graph. Routing tables and path caches are computed only on a sealed
// fabric.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/error.hpp"
#include "sim/core/flat_map.hpp"
#include "sim/core/units.hpp"

namespace rocesim::fabric {

using NodeId = uint32_t;
using LinkId = uint32_t;
inline constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

enum class NodeKind : uint8_t { Gpu, Nic, Switch };

/// What a switch does in the fabric. Fat-trees map edge/aggregation/core onto leaf/spine/core.
enum class SwitchRole : uint8_t {
  None,         // not a switch
  NvSwitch,     // the NVLink domain inside a server
  Leaf,         // rack training switch (RTSW), first hop from NICs
  Rail,         // leaf of a rail-optimized fabric (NIC k of every server in rail k)
  Spine,        // cluster training switch (CTSW) / fat-tree aggregation
  Aggregation,  // aggregator training switch (ATSW) joining AI zones
  Core,         // fat-tree core
  PcieSwitch,   // a PCIe switch inside a server: GPUs and NICs below it, a CPU socket above
  Cpu,          // a CPU socket's PCIe root complex; sockets are joined by their links (UPI, xGMI)
};
inline constexpr size_t kSwitchRoles = 9;  // for arrays indexed by role

std::string_view role_name(SwitchRole r);
std::string_view kind_name(NodeKind k);

/// Buffer settings of a switch, carried for the queueing (fluid) models.
struct BufferSpec {
  Bytes shared{0};  // shared packet buffer of the switch ASIC
};

struct Node {
  NodeKind kind = NodeKind::Switch;
  SwitchRole role = SwitchRole::None;
  uint8_t tier = 0;           // 0: inside a server (GPU, NIC, NVSwitch); 1: leaf/rail; 2: spine; 3+
  uint32_t server = kNone;    // server (compute node) index for GPUs, NICs and NVSwitches
  uint32_t local = 0;         // GPU/NIC index within its server; index within its tier otherwise
  uint32_t zone = kNone;      // AI zone, when the fabric has zones
  Time forwarding_latency{};  // per-hop pipeline latency of a switch (zero for endpoints)
  BufferSpec buffer{};
  std::string name;
};

struct Link {
  NodeId src = kNone;
  NodeId dst = kNone;
  Bandwidth capacity{};     // payload rate: what flows share
  Bandwidth line_rate{};    // nominal rate of the port (framing included), for reports
  Time latency{};           // propagation delay of the wire
  uint16_t link_class = 0;  // index into Fabric::link_classes(), e.g. "leaf->spine"
  LinkId reverse = kNone;   // the other direction of the same cable, if any
};

/// The GPU generation of a server, as collective libraries see it: NCCL and RCCL choose
/// constants by it (protocol throughput per channel, NVLink speeds, which protocols exist).
enum class GpuArch : uint8_t { Volta, Ampere, Hopper, Blackwell, Cdna3, Cdna4 };
std::string_view gpu_arch_name(GpuArch a);
/// AMD's Instinct GPUs (which run RCCL, not NCCL).
inline bool is_amd(GpuArch a) {
  return a == GpuArch::Cdna3 || a == GpuArch::Cdna4;
}

/// What a GPU computes and holds, from its datasheet: the compute and memory models of training
/// workloads read it (dense tensor-core peaks, no 2:4 sparsity).
struct GpuSpec {
  double tflops_16bit = 989.4;  // BF16/FP16 dense, TFLOP/s
  double tflops_fp8 = 1978.9;   // FP8 dense, TFLOP/s (0: none)
  double tflops_fp32 = 494.7;   // TF32 tensor dense, TFLOP/s (FP32 matmuls)
  Bytes memory{80'000'000'000};
  Bandwidth memory_bandwidth = Bandwidth::gbps(3.35e12 * 8 / 1e9);
  // A device-to-device copy (cudaMemcpyAsync, NCCL's one-rank collectives): its share of
  // memory_bandwidth, counting the bytes read and written, and its time for no bytes.
  double copy_efficiency = 0.9;
  Time copy_latency = Time::us(6);
};

/// The host CPU of a server, as NCCL tells it apart (its topology's CPU vendor and model): it
/// sets NCCL's figure for the link between sockets, whether GPUs use PCIe peer-to-peer through
/// the CPU, NCCL's LL throughput cap across nodes and its default network post overhead.
enum class CpuKind : uint8_t {
  IntelBroadwell,  // and older
  IntelSkylake,    // Skylake to Ice Lake
  IntelSapphireRapids,
  IntelEmeraldRapids,  // and Granite Rapids, Sierra Forest
  AmdZen2,             // Zen 1 and 2 (Naples, Rome)
  AmdZen4,             // Zen 3 and 4 (Milan, Genoa)
  AmdZen5,             // Turin
  Arm,
};
std::string_view cpu_kind_name(CpuKind c);
inline bool is_amd(CpuKind c) {
  return c == CpuKind::AmdZen2 || c == CpuKind::AmdZen4 || c == CpuKind::AmdZen5;
}
inline bool is_intel(CpuKind c) {
  return !is_amd(c) && c != CpuKind::Arm;
}

/// How the GPUs of a server reach each other: the server's scale-up domain.
enum class ScaleUp : uint8_t {
  NvSwitch,  // one link per GPU to the server's NVSwitch node (NVLink): GPU -> NVSwitch -> GPU
  Mesh,      // one direct link per GPU pair (AMD Infinity Fabric / xGMI): GPU -> GPU
  Pcie,      // no GPU interconnect: GPU -> PCIe switch [-> CPU [-> CPU] -> PCIe switch] -> GPU
};
std::string_view scale_up_name(ScaleUp s);

/// A server: GPUs joined by a scale-up domain, each GPU with a NIC (1:1 unless nics < gpus).
struct Server {
  uint32_t index = 0;
  NodeId first_gpu = kNone;
  uint32_t gpus = 0;
  NodeId first_nic = kNone;
  uint32_t nics = 0;  // a divisor of gpus (GPUs share a NIC) or a multiple (GPUs own several)
  /// NICs of one GPU (its ports): nics / gpus when GPUs own several, else 1.
  uint32_t nics_per_gpu() const { return nics > gpus ? nics / gpus : 1; }
  ScaleUp scale_up = ScaleUp::NvSwitch;
  NodeId nvswitch = kNone;  // the NVSwitch (ScaleUp::NvSwitch, > 1 GPU); kNone otherwise
  GpuArch arch = GpuArch::Hopper;
  GpuSpec gpu{};
  Time net_latency{};      // the NIC's latency as its network plugin reports it to NCCL
  uint32_t nic_paths = 1;  // paths its NICs spray a QP's packets over (EFA's SRD); 1: one
  uint32_t rack = kNone;
  uint32_t zone = kNone;
  // PCIe switches (0: each GPU-NIC pair has its own PCIe link) and the CPU sockets above them:
  // GPU i and NIC j sit below switch i * pcie_switches / gpus and j * pcie_switches / nics,
  // switch k below socket k * sockets / pcie_switches.
  uint32_t pcie_switches = 0;
  NodeId first_pcie_switch = kNone;
  uint32_t sockets = 0;
  NodeId first_cpu = kNone;
  CpuKind cpu = CpuKind::IntelSkylake;

  // Filled by Fabric::seal from the server's links; zero for a single-GPU server.
  uint32_t scale_up_links = 0;  // a GPU's scale-up links: 1 (NVSwitch, PCIe), gpus - 1 (mesh)
  Bandwidth scale_up_link_bandwidth{};  // capacity (payload rate) of one, per direction
  Bandwidth scale_up_bandwidth{};       // of all of a GPU's scale-up links, per direction
  Time scale_up_latency{};              // wire latency of the path between two of its GPUs
};

/// A switch of the network (leaf, spine, ...), not one inside a server (NVSwitch, PCIe switch,
/// CPU root complex).
inline bool is_network_switch(const Node& n) {
  return n.kind == NodeKind::Switch && n.role != SwitchRole::NvSwitch &&
         n.role != SwitchRole::PcieSwitch && n.role != SwitchRole::Cpu;
}

/// Thrown by Fabric::reserve() when a fabric would not fit in this machine's memory;
/// topology::build_topology() reports it as an InputError at the topology, with the estimate.
struct FabricTooLarge : std::runtime_error {
  FabricTooLarge(size_t n, size_t l, double b, double a);
  size_t nodes, links;
  double bytes, available;
};

class Fabric {
 public:
  /// Memory a node and a directed link cost in a run (fabric, routing tables, network model,
  /// recorder), for the estimate of reserve(): 123 MiB measured for the 71,872 nodes and 278,528
  /// links of topologies/dc-32768.yaml with a 32,768-flow permutation (peak resident set less
  /// the 14 MiB of the program itself), rounded up to these.
  static constexpr double kBytesPerNode = 1024, kBytesPerLink = 256;

  Fabric() = default;
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;
  Fabric(Fabric&&) = default;
  Fabric& operator=(Fabric&&) = default;

  // ---- building (before seal) ----
  /// Capacity hint for builders that know their size (avoids regrowing large vectors), given
  /// before building anything: throws FabricTooLarge when the run would not fit in memory.
  void reserve(size_t nodes, size_t links);
  NodeId add_node(Node node);
  /// A directed link whose flows share `capacity` (payload); `line_rate` is the port's nominal
  /// rate (default: the capacity), which reports quote.
  LinkId add_link(NodeId src, NodeId dst, Bandwidth capacity, Time latency,
                  Bandwidth line_rate = {});
  /// Two links, one per direction, that know each other as `reverse`.
  std::pair<LinkId, LinkId> add_cable(NodeId a, NodeId b, Bandwidth capacity, Time latency,
                                      Bandwidth line_rate = {});
  /// Registers a server whose GPUs, NICs and NVSwitch (if any) were added with `server` = its
  /// index.
  void add_server(Server s);
  /// Free-form description shown by `rocesim topo` (builder type and key parameters).
  void set_description(std::string text) { description_ = std::move(text); }

  /// Validates and freezes. `where` locates the topology description for error messages.
  void seal(const SourceLocation& where);
  bool sealed() const { return sealed_; }

  // ---- queries ----
  size_t node_count() const { return nodes_.size(); }
  size_t link_count() const { return links_.size(); }
  const Node& node(NodeId n) const { return nodes_[n]; }
  const Link& link(LinkId l) const { return links_[l]; }
  std::span<const Node> nodes() const { return nodes_; }
  std::span<const Link> links() const { return links_; }
  std::span<const LinkId> out_links(NodeId n) const {
    return {out_.data() + out_begin_[n], out_.data() + out_begin_[n + 1]};
  }
  std::span<const LinkId> in_links(NodeId n) const {
    return {in_.data() + in_begin_[n], in_.data() + in_begin_[n + 1]};
  }
  /// The link from a to b (the lowest id of parallel ones), or kNone: a walk of the shorter of
  /// a's out-links and b's in-links (a spine's or leaf's hundreds of ports against a NIC's one).
  LinkId link_from_to(NodeId a, NodeId b) const;
  const std::string& description() const { return description_; }

  /// Link class names ("nic->leaf", "leaf->spine", ...) in order of first appearance.
  std::span<const std::string> link_classes() const { return link_classes_; }

  std::span<const Server> servers() const { return servers_; }
  /// GPUs in global rank order (server-major, then local index).
  std::span<const NodeId> gpus() const { return gpus_; }
  size_t gpu_count() const { return gpus_.size(); }
  NodeId gpu(uint32_t rank) const { return gpus_.at(rank); }
  /// Rank of a GPU node (its index in gpus()).
  uint32_t rank_of(NodeId gpu) const { return rank_of_.at(gpu); }
  /// The NIC a GPU sends through (GPU-to-NIC mapping of its server).
  /// The NIC a GPU sends and receives by: its first, or its `port`-th where it owns several
  /// (`port` below Server::nics_per_gpu()).
  NodeId nic_of_gpu(NodeId gpu, uint32_t port = 0) const {
    ROCESIM_CHECK(port == 0 || port < servers_[nodes_[gpu].server].nics_per_gpu(),
                  "a GPU's NIC port below its NIC count");
    return nic_of_gpu_.at(gpu) + port;
  }
  /// The server a GPU, NIC or NVSwitch belongs to.
  const Server& server_of(NodeId n) const { return servers_.at(nodes_.at(n).server); }
  /// Scale-up bandwidth of a GPU per direction, as flows see it (payload): its link to the
  /// NVSwitch, or the sum of its gpus - 1 links in a mesh; zero on a single-GPU server.
  Bandwidth scale_up_bandwidth(NodeId gpu) const { return server_of(gpu).scale_up_bandwidth; }
  /// Appends the links from GPU `a` to GPU `b` of the same server: GPU -> NVSwitch -> GPU, the
  /// pair's one direct link in a mesh, or their PCIe path (host_path) in a PCIe server.
  void scale_up_path(NodeId a, NodeId b, std::vector<LinkId>& out) const;
  /// Appends the PCIe links from `a` to `b`, each a GPU or a NIC of one server: their own link
  /// where they have one, else up from `a` to its PCIe switch and, where `b` is below another,
  /// on to its CPU socket, the other socket where `b`'s switch hangs off another, and down.
  void host_path(NodeId a, NodeId b, std::vector<LinkId>& out) const;
  /// The PCIe switch a GPU or NIC sits below; kNone where its server has none.
  NodeId pcie_switch_of(NodeId n) const;
  /// The CPU socket a PCIe switch hangs off.
  NodeId cpu_of_switch(NodeId pcie_switch) const;
  /// All NICs, in node order.
  std::span<const NodeId> nics() const { return nics_; }
  /// The switch a NIC's first fabric link leads to.
  NodeId first_hop_switch(NodeId nic) const { return first_hop_.at(nic); }
  /// IPv4 address of a NIC (host byte order), from the address plan.
  uint32_t ip_of(NodeId nic) const { return ip_.at(nic); }

  /// Node by name; kNone if absent.
  NodeId find(std::string_view name) const;

 private:
  void check_open() const;
  uint16_t class_of(NodeId src, NodeId dst);
  void build_adjacency();
  void validate(const SourceLocation& where) const;
  void seal_scale_up(const SourceLocation& where);
  void assign_addresses(const SourceLocation& where);

  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<Server> servers_;
  std::vector<std::string> link_classes_;
  std::vector<uint16_t> class_by_ends_;  // (end code, end code) -> class + 1 (0: none yet)
  std::string description_;
  bool sealed_ = false;

  // Filled by seal().
  std::vector<uint32_t> out_begin_, in_begin_;
  std::vector<LinkId> out_, in_;
  std::vector<NodeId> gpus_, nics_;
  std::vector<uint32_t> rank_of_;
  std::vector<NodeId> nic_of_gpu_;
  std::vector<NodeId> first_hop_;
  std::vector<uint32_t> ip_;
  FlatMap<std::string_view, NodeId, std::hash<std::string_view>> by_name_;
};

/// Dotted-quad text of an IPv4 address.
std::string ip_to_string(uint32_t ip);

}  // namespace rocesim::fabric
