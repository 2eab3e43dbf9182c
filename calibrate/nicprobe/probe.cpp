#include "calibrate/nicprobe/probe.hpp"

#include <endian.h>
#include <fmt/format.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/nicprobe/verbs.hpp"

namespace rocesim::nicprobe {
namespace {

using calibrate::NicProbeDevice;
using calibrate::NicProbeGid;
using calibrate::NicProbePort;

/// First line of a sysfs file, without the newline; nothing when it cannot be read.
std::optional<std::string> read_sysfs(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::string sysfs_dir(const std::string& device) {
  return "/sys/class/infiniband/" + device;
}

/// "IB", "RoCEv1" or "RoCEv2". The kernel reports RoCE v1 GIDs with the InfiniBand type value
/// (both are 0, "IB/RoCE v1" in sysfs): the port's link layer tells them apart.
std::string gid_type_name(bool roce_v2, bool ethernet) {
  if (roce_v2) return "RoCEv2";
  return ethernet ? "RoCEv1" : "IB";
}

bool is_zero(const uint8_t (&raw)[16]) {
  for (const uint8_t b : raw) {
    if (b != 0) return false;
  }
  return true;
}

NicProbeGid make_gid(int index, const uint8_t (&raw)[16], std::string type, std::string netdev) {
  NicProbeGid g;
  g.index = index;
  g.gid = calibrate::format_gid(raw);
  g.type = std::move(type);
  g.netdev = std::move(netdev);
  g.ipv4 = calibrate::gid_ipv4(raw);
  return g;
}

/// GID table of one port by index (ibv_query_gid + sysfs): valid entries only.
std::vector<NicProbeGid> gids_by_index(ibv_context* ctx, const std::string& dev, int port,
                                       int table_size, bool ethernet) {
  std::vector<NicProbeGid> out;
  const std::string attrs = fmt::format("{}/ports/{}/gid_attrs", sysfs_dir(dev), port);
  for (int i = 0; i < table_size; ++i) {
    ibv_gid gid{};
    check_rc(ibv_query_gid(ctx, static_cast<uint8_t>(port), i, &gid),
             fmt::format("ibv_query_gid({} port {} index {})", dev, port, i));
    if (is_zero(gid.raw)) continue;
    const std::string type = read_sysfs(fmt::format("{}/types/{}", attrs, i)).value_or("");
    const std::string ndev = read_sysfs(fmt::format("{}/ndevs/{}", attrs, i)).value_or("");
    out.push_back(make_gid(i, gid.raw, gid_type_name(type == "RoCE v2", ethernet), ndev));
  }
  return out;
}

#ifdef ROCESIM_HAVE_IBV_QUERY_GID_TABLE
/// Every valid GID of the device (ibv_query_gid_table), per port; nothing when the kernel does
/// not support the call (the caller then reads the tables by index).
std::optional<std::vector<ibv_gid_entry>> gid_table(ibv_context* ctx, const std::string& dev,
                                                    size_t entries) {
  std::vector<ibv_gid_entry> table(std::max<size_t>(entries, 1));
  errno = 0;
  const ssize_t n = ibv_query_gid_table(ctx, table.data(), table.size(), 0);
  if (n < 0) {
    const int err = n < -1 ? static_cast<int>(-n) : errno;
    if (err == EOPNOTSUPP || err == ENOSYS) return std::nullopt;
    throw_verbs(fmt::format("ibv_query_gid_table({})", dev), err);
  }
  table.resize(static_cast<size_t>(n));
  return table;
}

std::string interface_name(uint32_t ifindex) {
  if (ifindex == 0) return "";
  char name[IF_NAMESIZE] = {};
  return if_indextoname(ifindex, name) != nullptr ? std::string(name) : "";
}
#endif

std::string guid_text(__be64 guid_be) {
  const uint64_t g = be64toh(guid_be);
  return fmt::format("{:04x}:{:04x}:{:04x}:{:04x}", (g >> 48) & 0xffff, (g >> 32) & 0xffff,
                     (g >> 16) & 0xffff, g & 0xffff);
}

uint64_t non_negative(int v) {
  return v > 0 ? static_cast<uint64_t>(v) : 0;
}

}  // namespace

NicProbeDevice probe_device(ibv_device* device) {
  NicProbeDevice d;
  d.name = ibv_get_device_name(device);
  d.node_type = ibv_node_type_str(device->node_type);
  d.node_guid = guid_text(ibv_get_device_guid(device));

  const Context ctx = open_device(device);
  ibv_device_attr attr{};
  check_rc(ibv_query_device(ctx.get(), &attr), fmt::format("ibv_query_device({})", d.name));
  d.fw_ver = attr.fw_ver;
  d.vendor_id = attr.vendor_id;
  d.vendor_part_id = attr.vendor_part_id;
  d.hw_ver = attr.hw_ver;
  d.limits = {
      {"max_qp", non_negative(attr.max_qp)},
      {"max_qp_wr", non_negative(attr.max_qp_wr)},
      {"max_sge", non_negative(attr.max_sge)},
      {"max_sge_rd", non_negative(attr.max_sge_rd)},
      {"max_cq", non_negative(attr.max_cq)},
      {"max_cqe", non_negative(attr.max_cqe)},
      {"max_mr", non_negative(attr.max_mr)},
      {"max_mr_size", attr.max_mr_size},
      {"page_size_cap", attr.page_size_cap},
      {"max_pd", non_negative(attr.max_pd)},
      {"max_qp_rd_atom", non_negative(attr.max_qp_rd_atom)},
      {"max_qp_init_rd_atom", non_negative(attr.max_qp_init_rd_atom)},
      {"max_res_rd_atom", non_negative(attr.max_res_rd_atom)},
      {"max_srq", non_negative(attr.max_srq)},
      {"max_srq_wr", non_negative(attr.max_srq_wr)},
      {"max_srq_sge", non_negative(attr.max_srq_sge)},
      {"max_mw", non_negative(attr.max_mw)},
      {"max_ah", non_negative(attr.max_ah)},
      {"max_mcast_grp", non_negative(attr.max_mcast_grp)},
      {"max_mcast_qp_attach", non_negative(attr.max_mcast_qp_attach)},
      {"max_pkeys", attr.max_pkeys},
      {"local_ca_ack_delay", attr.local_ca_ack_delay},
      {"phys_port_cnt", attr.phys_port_cnt},
  };

  // PCI address and NUMA node: /sys/class/infiniband/DEV/device links to the PCI function.
  std::error_code ec;
  const std::filesystem::path pci = std::filesystem::canonical(sysfs_dir(d.name) + "/device", ec);
  if (!ec) d.pci = pci.filename().string();
  if (const auto numa = read_sysfs(sysfs_dir(d.name) + "/device/numa_node")) {
    try {
      if (const int n = std::stoi(*numa); n >= 0) d.numa_node = n;
    } catch (const std::exception&) {
      // not a number: leave it unknown
    }
  }

  size_t gid_entries = 0;
  for (int p = 1; p <= attr.phys_port_cnt; ++p) {
    ibv_port_attr pa{};
    check_rc(ibv_query_port(ctx.get(), static_cast<uint8_t>(p), &pa),
             fmt::format("ibv_query_port({} port {})", d.name, p));
    NicProbePort port;
    port.port = p;
    port.state = calibrate::port_state_name(pa.state);
    port.phys_state = calibrate::port_phys_state_name(pa.phys_state);
    port.link_layer = calibrate::link_layer_name(pa.link_layer);
    port.speed_code = pa.active_speed;
#ifdef ROCESIM_HAVE_IBV_ACTIVE_SPEED_EX
    // rdma-core 47+: the 32-bit speed (XDR does not fit active_speed); 0 when the kernel does not
    // report it.
    if (pa.active_speed_ex != 0) port.speed_code = pa.active_speed_ex;
#endif
    port.width_code = pa.active_width;
    if (const auto s = calibrate::decode_ib_speed(port.speed_code)) {
      port.speed = std::string(s->name);
      port.lane_gbps = s->lane_gbps;
    }
    if (const auto w = calibrate::decode_ib_width(port.width_code)) {
      port.lanes = *w;
      port.width = fmt::format("{}X", *w);
    }
    if (port.lanes > 0 && port.lane_gbps > 0) port.rate_gbps = port.lanes * port.lane_gbps;
    port.mtu_active = calibrate::decode_ib_mtu(pa.active_mtu).value_or(0);
    port.mtu_max = calibrate::decode_ib_mtu(pa.max_mtu).value_or(0);
    port.lid = pa.lid;
    port.sm_lid = pa.sm_lid;
    port.max_msg_bytes = pa.max_msg_sz;
    port.gid_table_size = pa.gid_tbl_len;
    gid_entries += static_cast<size_t>(std::max(pa.gid_tbl_len, 0));
    d.ports.push_back(std::move(port));
  }

  bool have_table = false;
#ifdef ROCESIM_HAVE_IBV_QUERY_GID_TABLE
  if (const auto table = gid_table(ctx.get(), d.name, gid_entries)) {
    have_table = true;
    for (const ibv_gid_entry& e : *table) {
      if (e.port_num < 1 || e.port_num > d.ports.size() || is_zero(e.gid.raw)) continue;
      NicProbePort& port = d.ports[e.port_num - 1];
      port.gids.push_back(
          make_gid(static_cast<int>(e.gid_index), e.gid.raw,
                   gid_type_name(e.gid_type == IBV_GID_TYPE_ROCE_V2, port.link_layer == "Ethernet"),
                   interface_name(e.ndev_ifindex)));
    }
    for (NicProbePort& port : d.ports) {
      std::sort(port.gids.begin(), port.gids.end(),
                [](const NicProbeGid& a, const NicProbeGid& b) { return a.index < b.index; });
    }
  }
#endif
  if (!have_table) {
    for (NicProbePort& port : d.ports) {
      port.gids = gids_by_index(ctx.get(), d.name, port.port, port.gid_table_size,
                                port.link_layer == "Ethernet");
    }
  }
  return d;
}

}  // namespace rocesim::nicprobe
