// The RoCEv2 header fields that switches hash, and how NICs choose them.
//
// Every RDMA flow is one queue pair (QP). On the wire it is UDP/IPv4: source and destination IP
// of the two NICs, UDP destination port 4791 (fixed by the RoCEv2 spec), protocol 17, and a UDP
// source port that the NIC derives per QP: the only per-connection entropy in the 5-tuple. The
// BTH destination QP number is carried too, for switches that hash it (enhanced ECMP).
#pragma once

#include <cstdint>
#include <string_view>

#include "sim/core/rng.hpp"
#include "sim/fabric/fabric.hpp"

namespace rocesim::fabric {

inline constexpr uint16_t kRoceV2Port = 4791;
inline constexpr uint8_t kUdpProtocol = 17;

struct FlowKey {
  uint32_t src_ip = 0;
  uint32_t dst_ip = 0;
  uint16_t src_port = 0;
  uint16_t dst_port = kRoceV2Port;
  uint8_t protocol = kUdpProtocol;
  uint32_t dst_qpn = 0;  // 24-bit BTH DestQP
  bool operator==(const FlowKey&) const = default;
};

/// Linux's rdma_get_udp_sport() with a zero flow label (MODELS.md 3.3): the flow label is
/// derived from the two QP numbers and folded into 0xC000-0xFFFF. Fixed per QP pair.
constexpr uint16_t linux_roce_udp_sport(uint32_t lqpn, uint32_t rqpn) {
  uint64_t fl = static_cast<uint64_t>(lqpn) * rqpn;
  fl ^= fl >> 20;
  fl ^= fl >> 40;
  fl &= 0xFFFFF;
  return static_cast<uint16_t>(0xC000 | ((fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)));
}

enum class SourcePortPolicy : uint8_t {
  Linux,   // rdma_get_udp_sport() from the QP numbers (rxe, irdma, hns, ...)
  Random,  // uniform in [49152, 65535] per QP, drawn from a seeded stream
};

/// Allocates QP numbers per NIC and the UDP source port of each QP. QP numbers start at a
/// seeded random base per NIC and increase by one per QP, as on mlx5 devices; the order of
/// allocation is the order in which workloads open connections, so it is deterministic.
class QpAllocator {
 public:
  QpAllocator(const Fabric& fabric, uint64_t seed, SourcePortPolicy policy);

  struct Qp {
    uint32_t local_qpn;
    uint32_t remote_qpn;
    uint16_t src_port;
  };
  /// One RC QP between two NICs (one number on each side).
  Qp open(NodeId src_nic, NodeId dst_nic);

  /// The header of a flow on `qp` from src_nic to dst_nic.
  FlowKey key(const Fabric& f, NodeId src_nic, NodeId dst_nic, const Qp& qp) const {
    return FlowKey{f.ip_of(src_nic), f.ip_of(dst_nic), qp.src_port,
                   kRoceV2Port,      kUdpProtocol,     qp.remote_qpn};
  }

 private:
  uint32_t next_qpn(NodeId nic);
  std::vector<uint32_t> next_qpn_;  // per node; 0 = not yet initialised
  uint64_t seed_;
  SourcePortPolicy policy_;
  RandomStream port_stream_;
};

SourcePortPolicy parse_source_port_policy(std::string_view s);

}  // namespace rocesim::fabric
