// What a link's line rate leaves for payload: the framing arithmetic of RoCEv2, InfiniBand and
// PCIe, so that a scenario written from datasheets (400 Gb/s, PCIe Gen5 x16) gets the rate that
// RDMA data actually moves at, not the line rate.
//
// RoCEv2 (HARDWARE.md 4.1; IBTA Vol. 1 Annex A17): every packet of an RDMA WRITE carries one
// path-MTU of payload and, around it, preamble+SFD 8, inter-frame gap 12, Ethernet header 14,
// FCS 4, IPv4 20 (IPv6 40), UDP 8, BTH 12 and ICRC 4 bytes: 82 bytes at IPv4, +4 with an 802.1Q
// tag. The RETH of a WRITE's first packet is amortised over NCCL's 512 KiB steps (< 0.01 %) and
// not counted; neither are ACKs and CNPs, which flow the other way.
//   efficiency = mtu / (mtu + overhead):  4096 / 4178 = 0.98037 at 4096-byte MTU, IPv4.
// InfiniBand (HARDWARE.md 4.2; UCX's header constants): LRH 8, BTH 12, ICRC 4, VCRC 2 and the
// 2-byte wire delimiter, 28 bytes per packet (a GRH of 40 only on routed subnets, not counted);
// lane encoding is already inside the nominal data rate. 4096 / 4124 = 0.99321.
// PCIe (HARDWARE.md 4.3; Intel AN 456): a posted write of `max_payload` bytes carries a TLP with
// a 4-DW header (GPU and NIC BARs sit above 4 GB): 16 bytes, plus sequence number 2, LCRC 4 and
// framing 2 = 24 bytes. The lanes run gen 1-2 with 8b/10b, gen 3-5 with 128b/130b encoding;
// gen 6 moves 256-byte FLITs that hold 236 bytes of TLPs (the rest: 6 DLP, 8 CRC, 6 FEC bytes),
// and a TLP inside a FLIT needs no LCRC, sequence number or framing: 16 bytes of header.
//   Gen5 x16, 256-byte payload: 32 GT/s x 16 x 128/130 / 8 = 63.02 GB/s raw, x 256/280 = 57.6 GB/s.
// Reverse-direction DLLPs (ACK, flow-control updates) and SKP ordered sets are not subtracted.
#pragma once

#include <cstdint>
#include <string_view>

#include "sim/core/units.hpp"

namespace rocesim::fabric {

enum class LinkLayer : uint8_t { RoCEv2, InfiniBand };

struct WireFormat {
  LinkLayer layer = LinkLayer::RoCEv2;
  int64_t mtu = 4096;  // path MTU: payload bytes per packet
  bool ipv6 = false;   // RoCEv2 only
  bool vlan = false;   // RoCEv2 only: an 802.1Q tag

  /// Bytes on the wire around each packet's payload.
  int64_t overhead_bytes() const;
  /// Payload bytes per byte of line rate: mtu / (mtu + overhead).
  double efficiency() const;
};

/// "roce" or "infiniband" (as scenarios spell them).
std::string_view link_layer_name(LinkLayer l);

struct PcieLink {
  int generation = 5;         // 1..6
  int lanes = 16;             // 1, 2, 4, 8, 16
  int64_t max_payload = 256;  // MPS in bytes
  /// Data rate of the lanes after line encoding (or FLIT framing), per direction.
  Bandwidth raw() const;
  /// Payload bytes per byte of raw rate: max_payload / (max_payload + TLP overhead).
  double tlp_efficiency() const;
  /// raw() x tlp_efficiency(): what a DMA stream of large writes achieves.
  Bandwidth payload() const;
};

}  // namespace rocesim::fabric
