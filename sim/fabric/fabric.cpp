#include "sim/fabric/fabric.hpp"

#include "sim/core/memory.hpp"

#include <fmt/format.h>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>

#include <algorithm>

namespace rocesim::fabric {

FabricTooLarge::FabricTooLarge(size_t n, size_t l, double b, double a)
    : std::runtime_error("fabric too large"), nodes(n), links(l), bytes(b), available(a) {}

void Fabric::reserve(size_t nodes, size_t links) {
  const double bytes =
      kBytesPerNode * static_cast<double>(nodes) + kBytesPerLink * static_cast<double>(links);
  const auto available = static_cast<double>(available_memory_bytes());
  if (available > 0 && bytes > available) throw FabricTooLarge(nodes, links, bytes, available);
  nodes_.reserve(nodes);
  links_.reserve(links);
}

std::string_view role_name(SwitchRole r) {
  switch (r) {
    case SwitchRole::None:
      return "none";
    case SwitchRole::NvSwitch:
      return "nvswitch";
    case SwitchRole::PcieSwitch:
      return "pcie-switch";
    case SwitchRole::Cpu:
      return "cpu";
    case SwitchRole::Leaf:
      return "leaf";
    case SwitchRole::Rail:
      return "rail";
    case SwitchRole::Spine:
      return "spine";
    case SwitchRole::Aggregation:
      return "aggregation";
    case SwitchRole::Core:
      return "core";
  }
  return "?";
}

std::string_view scale_up_name(ScaleUp s) {
  switch (s) {
    case ScaleUp::NvSwitch:
      return "nvswitch";
    case ScaleUp::Mesh:
      return "mesh";
    case ScaleUp::Pcie:
      return "pcie";
  }
  return "?";
}

std::string_view cpu_kind_name(CpuKind c) {
  switch (c) {
    case CpuKind::IntelBroadwell:
      return "intel-broadwell";
    case CpuKind::IntelSkylake:
      return "intel-skylake";
    case CpuKind::IntelSapphireRapids:
      return "intel-sapphire-rapids";
    case CpuKind::IntelEmeraldRapids:
      return "intel-emerald-rapids";
    case CpuKind::AmdZen2:
      return "amd-zen2";
    case CpuKind::AmdZen4:
      return "amd-zen4";
    case CpuKind::AmdZen5:
      return "amd-zen5";
    case CpuKind::Arm:
      return "arm";
  }
  return "?";
}

std::string_view kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::Gpu:
      return "gpu";
    case NodeKind::Nic:
      return "nic";
    case NodeKind::Switch:
      return "switch";
  }
  return "?";
}

std::string ip_to_string(uint32_t ip) {
  return fmt::format("{}.{}.{}.{}", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
}

void Fabric::check_open() const {
  ROCESIM_CHECK(!sealed_, "the fabric is sealed; it cannot be changed any more");
}

NodeId Fabric::add_node(Node node) {
  check_open();
  nodes_.push_back(std::move(node));
  return static_cast<NodeId>(nodes_.size() - 1);
}

uint16_t Fabric::class_of(NodeId src, NodeId dst) {
  // A class is named by what the two ends are; look the pair up before formatting a name.
  auto end_code = [&](NodeId n) {
    return static_cast<uint32_t>(nodes_[n].kind) * 16 + static_cast<uint32_t>(nodes_[n].role);
  };
  const uint32_t key = end_code(src) * 256 + end_code(dst);
  if (class_by_ends_.empty()) class_by_ends_.assign(256 * 256, 0);
  if (class_by_ends_[key] != 0) return static_cast<uint16_t>(class_by_ends_[key] - 1);
  auto end_name = [&](NodeId n) -> std::string_view {
    const Node& x = nodes_[n];
    return x.kind == NodeKind::Switch ? role_name(x.role) : kind_name(x.kind);
  };
  link_classes_.push_back(fmt::format("{}->{}", end_name(src), end_name(dst)));
  const auto cls = static_cast<uint16_t>(link_classes_.size() - 1);
  class_by_ends_[key] = static_cast<uint16_t>(cls + 1);
  return cls;
}

LinkId Fabric::add_link(NodeId src, NodeId dst, Bandwidth capacity, Time latency,
                        Bandwidth line_rate) {
  check_open();
  ROCESIM_CHECK(src < nodes_.size() && dst < nodes_.size() && src != dst, "bad link endpoints");
  Link l;
  l.src = src;
  l.dst = dst;
  l.capacity = capacity;
  l.line_rate = line_rate.bits_per_second() > 0 ? line_rate : capacity;
  l.latency = latency;
  l.link_class = class_of(src, dst);
  links_.push_back(l);
  return static_cast<LinkId>(links_.size() - 1);
}

std::string_view gpu_arch_name(GpuArch a) {
  switch (a) {
    case GpuArch::Volta:
      return "volta";
    case GpuArch::Ampere:
      return "ampere";
    case GpuArch::Hopper:
      return "hopper";
    case GpuArch::Blackwell:
      return "blackwell";
    case GpuArch::Cdna3:
      return "cdna3";
    case GpuArch::Cdna4:
      return "cdna4";
  }
  return "hopper";
}

std::pair<LinkId, LinkId> Fabric::add_cable(NodeId a, NodeId b, Bandwidth capacity, Time latency,
                                            Bandwidth line_rate) {
  const LinkId ab = add_link(a, b, capacity, latency, line_rate);
  const LinkId ba = add_link(b, a, capacity, latency, line_rate);
  links_[ab].reverse = ba;
  links_[ba].reverse = ab;
  return {ab, ba};
}

void Fabric::add_server(Server s) {
  check_open();
  s.index = static_cast<uint32_t>(servers_.size());
  servers_.push_back(s);
}

NodeId Fabric::find(std::string_view name) const {
  const NodeId* v = by_name_.find(name);
  return v == nullptr ? kNone : *v;
}

void Fabric::build_adjacency() {
  const size_t n = nodes_.size();
  out_begin_.assign(n + 1, 0);
  in_begin_.assign(n + 1, 0);
  for (const Link& l : links_) {
    ++out_begin_[l.src + 1];
    ++in_begin_[l.dst + 1];
  }
  for (size_t i = 0; i < n; ++i) {
    out_begin_[i + 1] += out_begin_[i];
    in_begin_[i + 1] += in_begin_[i];
  }
  out_.resize(links_.size());
  in_.resize(links_.size());
  std::vector<uint32_t> o(out_begin_.begin(), out_begin_.end() - 1);
  std::vector<uint32_t> in(in_begin_.begin(), in_begin_.end() - 1);
  // Links are visited in id order, so each node's list is sorted by link id: the order of the
  // switch's ports, which is the order of ECMP group members.
  for (LinkId id = 0; id < links_.size(); ++id) {
    out_[o[links_[id].src]++] = id;
    in_[in[links_[id].dst]++] = id;
  }
}

void Fabric::validate(const SourceLocation& where) const {
  if (nodes_.empty()) throw InputError(where, "the topology has no nodes");
  for (const Link& l : links_) {
    if (l.capacity.bits_per_second() <= 0) {
      throw InputError(
          where, fmt::format("link {} -> {} has capacity {} b/s; capacities must be positive",
                             nodes_[l.src].name, nodes_[l.dst].name, l.capacity.bits_per_second()));
    }
    if (l.latency < Time::zero()) {
      throw InputError(where, fmt::format("link {} -> {} has a negative latency",
                                          nodes_[l.src].name, nodes_[l.dst].name));
    }
  }
  for (const Server& s : servers_) {
    if (s.gpus == 0 || s.nics == 0 || (s.gpus % s.nics != 0 && s.nics % s.gpus != 0)) {
      throw InputError(where, fmt::format("server {} has {} GPUs and {} NICs; each NIC must serve "
                                          "the same number of GPUs, or each GPU own the same "
                                          "number of NICs",
                                          s.index, s.gpus, s.nics));
    }
    if (s.pcie_switches > 0 && (s.gpus % s.pcie_switches != 0 || s.nics % s.pcie_switches != 0 ||
                                s.sockets == 0 || s.pcie_switches % s.sockets != 0)) {
      throw InputError(where, fmt::format("server {} has {} GPUs, {} NICs, {} PCIe switches and {} "
                                          "CPU sockets; each switch must hold as many GPUs and "
                                          "NICs as the next, each socket as many switches",
                                          s.index, s.gpus, s.nics, s.pcie_switches, s.sockets));
    }
    if (s.scale_up == ScaleUp::Pcie && s.pcie_switches == 0) {
      throw InputError(where, fmt::format("server {} joins its GPUs over PCIe and has no PCIe "
                                          "switch",
                                          s.index));
    }
  }
  // Every node must reach every other. Node 0 reaching all nodes forward and backward proves it
  // cheaply on the adjacency arrays; only when that fails are the strongly connected parts
  // counted (Boost) for the message.
  auto reaches_all = [&](const std::vector<uint32_t>& begin, const std::vector<LinkId>& adj,
                         bool forward) {
    std::vector<uint8_t> seen(nodes_.size(), 0);
    std::vector<NodeId> queue{0};
    seen[0] = 1;
    for (size_t head = 0; head < queue.size(); ++head) {
      const NodeId v = queue[head];
      for (uint32_t i = begin[v]; i < begin[v + 1]; ++i) {
        const NodeId u = forward ? links_[adj[i]].dst : links_[adj[i]].src;
        if (!seen[u]) {
          seen[u] = 1;
          queue.push_back(u);
        }
      }
    }
    return queue.size() == nodes_.size();
  };
  if (reaches_all(out_begin_, out_, true) && reaches_all(in_begin_, in_, false)) return;

  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  Graph g(nodes_.size());
  for (const Link& l : links_)
    boost::add_edge(l.src, l.dst, g);
  std::vector<int> component(nodes_.size());
  const int count = boost::strong_components(g, component.data());
  NodeId stray = 0;  // a node that node 0 cannot reach, or that cannot reach node 0
  for (NodeId v = 0; v < nodes_.size(); ++v) {
    if (component[v] != component[0]) {
      stray = v;
      break;
    }
  }
  throw InputError(where, fmt::format("the topology is disconnected: {} strongly connected parts; "
                                      "'{}' and '{}' cannot reach each other in both directions",
                                      count, nodes_[0].name, nodes_[stray].name));
}

LinkId Fabric::link_from_to(NodeId a, NodeId b) const {
  // Both lists are in link id order, so either walk finds the same first link.
  const std::span<const LinkId> out = out_links(a), in = in_links(b);
  if (in.size() < out.size()) {
    for (LinkId l : in) {
      if (links_[l].src == a) return l;
    }
    return kNone;
  }
  for (LinkId l : out) {
    if (links_[l].dst == b) return l;
  }
  return kNone;
}

void Fabric::seal_scale_up(const SourceLocation& where) {
  // Every GPU of a server with more than one GPU reaches every other: through one link each way
  // to the server's NVSwitch, or over exactly one direct link per ordered pair (mesh). The
  // figures the collectives read (bandwidth per GPU, per link, GPU-to-GPU latency) are taken
  // from the links of the server's first GPU.
  for (Server& s : servers_) {
    if (s.gpus < 2) continue;
    const NodeId g0 = s.first_gpu;
    auto missing = [&](NodeId a, NodeId b) {
      return InputError(
          where, fmt::format("server {} ({} scale-up) has no link from '{}' to '{}'", s.index,
                             scale_up_name(s.scale_up), nodes_[a].name, nodes_[b].name));
    };
    if (s.scale_up == ScaleUp::Pcie) {
      // Each GPU's one link to its PCIe switch carries all it sends to its peers; the figures
      // are those of the path from the first GPU to the second.
      if (s.nvswitch != kNone) {
        throw InputError(where,
                         fmt::format("server {} is a PCIe server and has an NVSwitch", s.index));
      }
      std::vector<LinkId> path;
      for (uint32_t i = 1; i < s.gpus; ++i) {
        path.clear();
        host_path(g0, g0 + i, path);
        for (LinkId l : path) {
          if (l == kNone) throw missing(g0, g0 + i);
        }
      }
      path.clear();
      host_path(g0, g0 + 1, path);
      s.scale_up_links = 1;
      s.scale_up_link_bandwidth = links_[path.front()].capacity;
      s.scale_up_bandwidth = s.scale_up_link_bandwidth;
      s.scale_up_latency = Time::zero();
      for (LinkId l : path)
        s.scale_up_latency += links_[l].latency;
      continue;
    }
    if (s.scale_up == ScaleUp::NvSwitch) {
      if (s.nvswitch == kNone || nodes_[s.nvswitch].role != SwitchRole::NvSwitch) {
        throw InputError(where,
                         fmt::format("server {} has {} GPUs and no NVSwitch", s.index, s.gpus));
      }
      for (uint32_t i = 0; i < s.gpus; ++i) {
        if (link_from_to(g0 + i, s.nvswitch) == kNone) throw missing(g0 + i, s.nvswitch);
        if (link_from_to(s.nvswitch, g0 + i) == kNone) throw missing(s.nvswitch, g0 + i);
      }
      const Link& up = links_[link_from_to(g0, s.nvswitch)];
      const Link& down = links_[link_from_to(s.nvswitch, g0 + 1)];
      s.scale_up_links = 1;
      s.scale_up_link_bandwidth = up.capacity;
      s.scale_up_bandwidth = up.capacity;
      s.scale_up_latency = up.latency + nodes_[s.nvswitch].forwarding_latency + down.latency;
      continue;
    }
    if (s.nvswitch != kNone) {
      throw InputError(where, fmt::format("server {} is a mesh and has an NVSwitch", s.index));
    }
    for (uint32_t i = 0; i < s.gpus; ++i) {
      for (uint32_t j = 0; j < s.gpus; ++j) {
        if (i == j) continue;
        uint32_t count = 0;
        for (LinkId l : out_links(g0 + i))
          count += links_[l].dst == g0 + j ? 1 : 0;
        if (count == 0) throw missing(g0 + i, g0 + j);
        if (count > 1) {
          throw InputError(where,
                           fmt::format("server {} (mesh scale-up) has {} links from '{}' "
                                       "to '{}'; a mesh has one per GPU pair",
                                       s.index, count, nodes_[g0 + i].name, nodes_[g0 + j].name));
        }
      }
    }
    s.scale_up_links = s.gpus - 1;
    int64_t sum = 0;
    for (uint32_t j = 1; j < s.gpus; ++j)
      sum += links_[link_from_to(g0, g0 + j)].capacity.bits_per_second();
    const Link& one = links_[link_from_to(g0, g0 + 1)];
    s.scale_up_link_bandwidth = one.capacity;
    s.scale_up_bandwidth = Bandwidth::bps(sum);
    s.scale_up_latency = one.latency;
  }
}

void Fabric::scale_up_path(NodeId a, NodeId b, std::vector<LinkId>& out) const {
  const Server& s = server_of(a);
  ROCESIM_CHECK(a != b && nodes_.at(b).server == s.index,
                "a scale-up path joins two GPUs of one server");
  if (s.scale_up == ScaleUp::Mesh) {
    const LinkId l = link_from_to(a, b);
    ROCESIM_CHECK(l != kNone, "a mesh has a link per GPU pair");
    out.push_back(l);
    return;
  }
  if (s.scale_up == ScaleUp::Pcie) {
    host_path(a, b, out);
    return;
  }
  const LinkId up = link_from_to(a, s.nvswitch);
  const LinkId down = link_from_to(s.nvswitch, b);
  ROCESIM_CHECK(up != kNone && down != kNone, "every GPU is cabled to its server's NVSwitch");
  out.push_back(up);
  out.push_back(down);
}

NodeId Fabric::pcie_switch_of(NodeId n) const {
  const Node& x = nodes_.at(n);
  const Server& s = servers_.at(x.server);
  if (s.pcie_switches == 0) return kNone;
  const uint32_t members = x.kind == NodeKind::Gpu ? s.gpus : s.nics;
  return s.first_pcie_switch + x.local * s.pcie_switches / members;
}

NodeId Fabric::cpu_of_switch(NodeId pcie_switch) const {
  const Server& s = servers_.at(nodes_.at(pcie_switch).server);
  return s.first_cpu + (pcie_switch - s.first_pcie_switch) * s.sockets / s.pcie_switches;
}

void Fabric::host_path(NodeId a, NodeId b, std::vector<LinkId>& out) const {
  ROCESIM_CHECK(a != b && nodes_.at(a).server == nodes_.at(b).server,
                "a PCIe path joins two devices of one server");
  if (const LinkId direct = link_from_to(a, b); direct != kNone) {
    out.push_back(direct);
    return;
  }
  const NodeId sa = pcie_switch_of(a), sb = pcie_switch_of(b);
  ROCESIM_CHECK(sa != kNone && sb != kNone, "devices without a link of their own share PCIe");
  out.push_back(link_from_to(a, sa));
  if (sa != sb) {
    const NodeId ca = cpu_of_switch(sa), cb = cpu_of_switch(sb);
    out.push_back(link_from_to(sa, ca));
    if (ca != cb) out.push_back(link_from_to(ca, cb));
    out.push_back(link_from_to(cb, sb));
  }
  out.push_back(link_from_to(sb, b));
}

void Fabric::assign_addresses(const SourceLocation& where) {
  // Each first-hop switch gets a power-of-two subnet of 10.0.0.0/8 large enough for its NICs
  // plus network and broadcast addresses; NICs are numbered in node order within it.
  std::vector<uint32_t> per_switch(nodes_.size(), 0);
  std::vector<uint32_t> port_index(nodes_.size(), 0);
  uint32_t most = 0;
  for (NodeId nic : nics_) {
    const NodeId sw = first_hop_[nic];
    port_index[nic] = per_switch[sw]++;
    most = std::max(most, per_switch[sw]);
  }
  uint32_t bits = 1;
  while ((1u << bits) < most + 2)
    ++bits;
  std::vector<uint32_t> subnet(nodes_.size(), kNone);
  uint32_t next_subnet = 0;
  ip_.assign(nodes_.size(), 0);
  for (NodeId nic : nics_) {
    const NodeId sw = first_hop_[nic];
    if (subnet[sw] == kNone) subnet[sw] = next_subnet++;
    const uint64_t host = (static_cast<uint64_t>(subnet[sw]) << bits) + port_index[nic] + 1;
    if (host >= (1u << 24)) {
      throw InputError(where, "the fabric has too many NICs for the 10.0.0.0/8 address plan");
    }
    ip_[nic] = 0x0A000000u | static_cast<uint32_t>(host);
  }
}

void Fabric::seal(const SourceLocation& where) {
  check_open();
  build_adjacency();
  validate(where);

  rank_of_.assign(nodes_.size(), kNone);
  nic_of_gpu_.assign(nodes_.size(), kNone);
  first_hop_.assign(nodes_.size(), kNone);
  for (const Server& s : servers_) {
    const uint32_t gpus_per_nic = s.nics >= s.gpus ? 1 : s.gpus / s.nics;
    for (uint32_t i = 0; i < s.gpus; ++i) {
      const NodeId g = s.first_gpu + i;
      ROCESIM_CHECK(nodes_[g].kind == NodeKind::Gpu && nodes_[g].server == s.index,
                    "server GPUs must be contiguous nodes");
      rank_of_[g] = static_cast<uint32_t>(gpus_.size());
      gpus_.push_back(g);
      nic_of_gpu_[g] = s.first_nic + i / gpus_per_nic * s.nics_per_gpu();
    }
  }
  seal_scale_up(where);
  for (NodeId v = 0; v < nodes_.size(); ++v) {
    const Node& node = nodes_[v];
    if (node.kind == NodeKind::Gpu && rank_of_[v] == kNone) {
      throw InputError(where, fmt::format("GPU '{}' belongs to no server", node.name));
    }
    if (node.kind != NodeKind::Nic) continue;
    nics_.push_back(v);
    for (LinkId l : out_links(v)) {
      if (is_network_switch(nodes_[links_[l].dst])) {
        first_hop_[v] = links_[l].dst;
        break;
      }
    }
    if (first_hop_[v] == kNone) {
      throw InputError(where, fmt::format("NIC '{}' has no link to a switch", node.name));
    }
  }
  assign_addresses(where);
  by_name_.reserve(nodes_.size());
  for (NodeId v = 0; v < nodes_.size(); ++v) {
    if (!by_name_.try_insert(nodes_[v].name, v)) {
      throw InputError(where, fmt::format("two nodes are named '{}'", nodes_[v].name));
    }
  }
  sealed_ = true;
}

}  // namespace rocesim::fabric
