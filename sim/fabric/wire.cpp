#include "sim/fabric/wire.hpp"

#include <cmath>

#include "sim/core/error.hpp"

namespace rocesim::fabric {
namespace {

// RoCEv2 over Ethernet, per packet (HARDWARE.md 4.1).
constexpr int64_t kPreambleSfd = 8, kInterFrameGap = 12, kEthernetHeader = 14, kFcs = 4;
constexpr int64_t kIpv4 = 20, kIpv6 = 40, kUdp = 8, kBth = 12, kIcrc = 4, kVlanTag = 4;
// InfiniBand, per packet (HARDWARE.md 4.2): LRH, BTH, ICRC, VCRC and the wire delimiter.
constexpr int64_t kLrh = 8, kVcrc = 2, kIbDelimiter = 2;
// PCIe TLP around a memory write with a 4-DW header (HARDWARE.md 4.3).
constexpr int64_t kTlpHeader4Dw = 16, kTlpSequence = 2, kTlpLcrc = 4, kTlpFraming = 2;
// PCIe 6.0 FLIT: 256 bytes, of which 236 carry TLPs.
constexpr double kFlitTlpFraction = 236.0 / 256.0;

}  // namespace

int64_t WireFormat::overhead_bytes() const {
  switch (layer) {
    case LinkLayer::RoCEv2:
      return kPreambleSfd + kInterFrameGap + kEthernetHeader + kFcs + (ipv6 ? kIpv6 : kIpv4) +
             kUdp + kBth + kIcrc + (vlan ? kVlanTag : 0);
    case LinkLayer::InfiniBand:
      return kLrh + kBth + kIcrc + kVcrc + kIbDelimiter;
  }
  return 0;
}

double WireFormat::efficiency() const {
  ROCESIM_CHECK(mtu > 0, "a positive MTU");
  return static_cast<double>(mtu) / static_cast<double>(mtu + overhead_bytes());
}

std::string_view link_layer_name(LinkLayer l) {
  return l == LinkLayer::InfiniBand ? "infiniband" : "roce";
}

Bandwidth PcieLink::raw() const {
  ROCESIM_CHECK(generation >= 1 && generation <= 6, "a PCIe generation from 1 to 6");
  // Transfer rate per lane in GT/s, then the share of it that carries data.
  constexpr double kGts[] = {2.5, 5, 8, 16, 32, 64};
  const double gts = kGts[generation - 1];
  const double encoding = generation <= 2 ? 8.0 / 10.0 : generation <= 5 ? 128.0 / 130.0 : 1.0;
  const double framing = generation == 6 ? kFlitTlpFraction : 1.0;
  return Bandwidth::bps(std::llround(gts * 1e9 * lanes * encoding * framing));
}

double PcieLink::tlp_efficiency() const {
  ROCESIM_CHECK(max_payload > 0, "a positive PCIe max payload size");
  const int64_t overhead =
      generation == 6 ? kTlpHeader4Dw : kTlpHeader4Dw + kTlpSequence + kTlpLcrc + kTlpFraming;
  return static_cast<double>(max_payload) / static_cast<double>(max_payload + overhead);
}

Bandwidth PcieLink::payload() const {
  return Bandwidth::bps(
      std::llround(static_cast<double>(raw().bits_per_second()) * tlp_efficiency()));
}

}  // namespace rocesim::fabric
