// ECMP on real RoCEv2 headers (MODELS.md 3). At every switch with more than one equal-cost next
// hop, the member is `window(hash(header, seed_switch), offset_role) mod members`: the hash runs
// over the 5-tuple the QP puts on the wire (and the BTH destination QP for enhanced ECMP), the
// seed is per switch, the 16-bit window offset per switch role. Flows collide exactly when their
// headers hash alike: collisions come out of the hash, never out of a random draw per flow.
#pragma once

#include <array>
#include <vector>

#include "sim/routing/hash.hpp"
#include "sim/routing/router.hpp"

namespace rocesim::routing {

struct EcmpConfig {
  HashAlgorithm hash = HashAlgorithm::Crc32;
  bool hash_dst_qpn = false;  // enhanced ECMP: UDF hashing of the BTH destination QP
  uint64_t seed = 1;
  /// 16-bit window offset per switch role (indexed by fabric::SwitchRole).
  std::array<unsigned, fabric::kSwitchRoles> offset{};
};

/// The member each switch takes for a header: the per-switch seed and per-role window of
/// ECMP, shared by every scheme that hashes (flowlet, te and adaptive after their own choices).
class EcmpHash {
 public:
  EcmpHash(const fabric::Fabric& f, const EcmpConfig& config);
  /// The member switch `at` picks for `key` among `members` equal-cost hops.
  uint32_t choose(fabric::NodeId at, const fabric::FlowKey& key, uint32_t members) const;

 private:
  EcmpConfig config_;
  std::vector<uint32_t> seed_;   // per node
  std::vector<uint8_t> offset_;  // per node
};

class EcmpRouter final : public Router {
 public:
  EcmpRouter(const fabric::Fabric& f, const EcmpConfig& config);
  std::string_view scheme() const override { return config_.hash_dst_qpn ? "e-ecmp" : "ecmp"; }
  bool route(const RouteRequest& req, std::vector<fabric::LinkId>& out) override;
  void links_changed() override { walker_.set_view(view_); }

  /// The member switch `at` picks for `key` among `members` equal-cost hops.
  uint32_t choose(fabric::NodeId at, const fabric::FlowKey& key, uint32_t members) const {
    return hash_.choose(at, key, members);
  }

 private:
  FabricWalker walker_;
  EcmpConfig config_;
  EcmpHash hash_;
};

}  // namespace rocesim::routing
