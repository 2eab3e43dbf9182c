#include "sim/fabric/roce.hpp"

namespace rocesim::fabric {

QpAllocator::QpAllocator(const Fabric& fabric, uint64_t seed, SourcePortPolicy policy)
    : next_qpn_(fabric.node_count(), 0),
      seed_(seed),
      policy_(policy),
      port_stream_(seed, "fabric/udp-source-port") {}

uint32_t QpAllocator::next_qpn(NodeId nic) {
  uint32_t& next = next_qpn_.at(nic);
  if (next == 0) {
    // A per-NIC base in [0x100, 0x800100): low enough never to wrap the 24-bit field.
    RandomStream s(seed_ ^ (0x51D0ull << 40) ^ nic);
    next = 0x100 + static_cast<uint32_t>(s.below(1u << 23));
  }
  return next++ & 0xFFFFFF;
}

QpAllocator::Qp QpAllocator::open(NodeId src_nic, NodeId dst_nic) {
  Qp qp{};
  qp.local_qpn = next_qpn(src_nic);
  qp.remote_qpn = next_qpn(dst_nic);
  qp.src_port = policy_ == SourcePortPolicy::Linux
                    ? linux_roce_udp_sport(qp.local_qpn, qp.remote_qpn)
                    : static_cast<uint16_t>(49152 + port_stream_.below(16384));
  return qp;
}

SourcePortPolicy parse_source_port_policy(std::string_view s) {
  return s == "random" ? SourcePortPolicy::Random : SourcePortPolicy::Linux;
}

}  // namespace rocesim::fabric
