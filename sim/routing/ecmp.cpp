#include "sim/routing/ecmp.hpp"

#include <fmt/format.h>

#include "sim/core/rng.hpp"

namespace rocesim::routing {

EcmpHash::EcmpHash(const fabric::Fabric& f, const EcmpConfig& config)
    : config_(config), seed_(f.node_count()), offset_(f.node_count()) {
  const unsigned width = config.hash == HashAlgorithm::Crc16Ccitt ? 16 : 32;
  for (fabric::NodeId n = 0; n < f.node_count(); ++n) {
    SplitMix64 sm(config.seed ^ (0xEC3Bull << 48) ^ n);
    seed_[n] = static_cast<uint32_t>(sm.next());
    const unsigned off = config.offset[static_cast<size_t>(f.node(n).role)];
    ROCESIM_CHECK(off + 16 <= width || width == 16, "hash window beyond the hash width");
    offset_[n] = static_cast<uint8_t>(width == 16 ? 0 : off);
  }
}

EcmpRouter::EcmpRouter(const fabric::Fabric& f, const EcmpConfig& config)
    : walker_(f), config_(config), hash_(f, config) {}

uint32_t EcmpHash::choose(fabric::NodeId at, const fabric::FlowKey& key, uint32_t members) const {
  const uint32_t h = header_hash(config_.hash, seed_[at], key, config_.hash_dst_qpn);
  return ecmp_member(h, offset_[at], members);
}

bool EcmpRouter::route(const RouteRequest& req, std::vector<fabric::LinkId>& out) {
  return walker_.walk(req, out, [&](fabric::NodeId at, std::span<const fabric::LinkId> hops) {
    return choose(at, req.key, static_cast<uint32_t>(hops.size()));
  });
}

}  // namespace rocesim::routing
