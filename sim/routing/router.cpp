#include "sim/routing/router.hpp"

#include <fmt/format.h>

#include "sim/routing/ecmp.hpp"

namespace rocesim::routing {
namespace {

// Window offsets per tier: different 16-bit windows of the 32-bit hash at leaf, spine and
// aggregation so that tiers do not polarize (see hash.hpp). Ignored for crc16-ccitt, whose
// result is only 16 bits wide (and which therefore polarizes, as on real ASICs).
constexpr Param kOffsetParams[] = {
    {.key = "leaf",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "leaves (RTSW)",
     .check = Check::NonNegative},
    {.key = "rail",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "rail leaves",
     .check = Check::NonNegative},
    {.key = "spine",
     .type = ParamType::Integer,
     .fallback = "16",
     .help = "spines (CTSW)",
     .check = Check::NonNegative},
    {.key = "aggregation",
     .type = ParamType::Integer,
     .fallback = "8",
     .help = "aggregation switches (ATSW)",
     .check = Check::NonNegative},
    {.key = "core",
     .type = ParamType::Integer,
     .fallback = "4",
     .help = "fat-tree core",
     .check = Check::NonNegative},
};
const ParamTable kOffsetTable{"routing.hash_offset",
                              "Bit offset (0-16) of the 16-bit window of a 32-bit hash that "
                              "each switch role uses to pick an ECMP member.",
                              kOffsetParams};

constexpr Param kRoutingParams[] = {
    {.key = "scheme",
     .type = ParamType::Choice,
     .fallback = "ecmp",
     .help = "ecmp hashes the 5-tuple; e-ecmp also hashes the BTH destination QP",
     .choices = "ecmp|e-ecmp"},
    {.key = "hash",
     .type = ParamType::Choice,
     .fallback = "crc32",
     .help = "switch hash function",
     .choices = "crc32|crc16-ccitt|murmur3"},
    {.key = "hash_offset",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "hash window offset per switch role",
     .choices = "see routing.hash_offset"},
    {.key = "source_port",
     .type = ParamType::Choice,
     .fallback = "linux",
     .help = "how NICs pick the UDP source port of a QP: the Linux rdma_get_udp_sport rule on "
             "the QP numbers, or uniform random in 49152-65535",
     .choices = "linux|random"},
};
const ParamTable kRoutingTable{"routing", "How switches choose among equal-cost paths.",
                               kRoutingParams};

}  // namespace

fabric::LinkId FabricWalker::link_between(fabric::NodeId a, fabric::NodeId b) const {
  for (fabric::LinkId l : f_.out_links(a)) {
    if (f_.link(l).dst == b) return l;
  }
  throw InternalError(fmt::format("no link from {} to {}", f_.node(a).name, f_.node(b).name));
}

const ParamTable& routing_table() {
  return kRoutingTable;
}

std::span<const ParamTable* const> routing_subtables() {
  static const ParamTable* const tables[] = {&kOffsetTable};
  return tables;
}

std::unique_ptr<Router> make_router(const ParamReader& r, const fabric::Fabric& f, uint64_t seed) {
  EcmpConfig c;
  c.hash = parse_hash_algorithm(r.choice("hash"));
  c.hash_dst_qpn = r.choice("scheme") == "e-ecmp";
  c.seed = seed;
  const ParamReader off = r.section("hash_offset", kOffsetTable);
  using fabric::SwitchRole;
  auto set = [&](SwitchRole role, std::string_view key) {
    const int64_t v = off.integer(key);
    if (v > 16)
      off.fail(key, "an offset from 0 to 16 (a 16-bit window of a 32-bit hash)", std::to_string(v));
    c.offset[static_cast<size_t>(role)] = static_cast<unsigned>(v);
  };
  set(SwitchRole::Leaf, "leaf");
  set(SwitchRole::Rail, "rail");
  set(SwitchRole::Spine, "spine");
  set(SwitchRole::Aggregation, "aggregation");
  set(SwitchRole::Core, "core");
  return std::make_unique<EcmpRouter>(f, c);
}

}  // namespace rocesim::routing
