#include "sim/routing/router.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/routing/adaptive.hpp"
#include "sim/routing/ecmp.hpp"
#include "sim/routing/flowlet.hpp"
#include "sim/routing/pinned.hpp"
#include "sim/routing/te.hpp"

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

// Keys every scheme has.
constexpr Param kSchemeParam{
    .key = "scheme",
    .type = ParamType::Choice,
    .fallback = "ecmp",
    .help =
        "ecmp hashes the 5-tuple; e-ecmp also hashes the BTH destination QP; pinned takes "
        "the uplink of the destination's leaf port; flowlet moves bursts after idle gaps; te "
        "programs each QP's uplink from a central computation; adaptive sprays packets over "
        "every equal-cost path by load "
        "(see the tables of each scheme)",
    .choices = "ecmp|e-ecmp|pinned|flowlet|te|adaptive"};
constexpr Param kSourcePortParam{
    .key = "source_port",
    .type = ParamType::Choice,
    .fallback = "linux",
    .help =
        "how NICs pick the UDP source port of a QP: the Linux rdma_get_udp_sport rule on "
        "the QP numbers, or uniform random in 49152-65535",
    .choices = "linux|random"};
// No public measurement of a RoCE fabric's reconvergence is in the sources (MODELS.md); 50 ms is
// an assumption of the order of BFD detection (3 x 10-20 ms) plus BGP withdrawal in a Clos
// (RFC 7938), and a parameter to sweep.
constexpr Param kReconvergenceParam{
    .key = "reconvergence",
    .type = ParamType::Time,
    .fallback = "50ms",
    .help =
        "time from a link or switch changing state to every switch routing around it (the "
        "routing protocol's detection and withdrawal); meanwhile flows on a down link stall",
    .check = Check::NonNegative};

constexpr Param kHashParam{.key = "hash",
                           .type = ParamType::Choice,
                           .fallback = "crc32",
                           .help = "switch hash function",
                           .choices = "crc32|crc16-ccitt|murmur3"};
constexpr Param kHashOffsetParam{.key = "hash_offset",
                                 .type = ParamType::Section,
                                 .fallback = "{}",
                                 .help = "hash window offset per switch role",
                                 .choices = "see routing.hash_offset"};

constexpr Param kEcmpParams[] = {
    kSchemeParam, kHashParam, kHashOffsetParam, kSourcePortParam, kReconvergenceParam,
};
const ParamTable kEcmpTable{
    "routing (scheme: ecmp, e-ecmp)",
    "How switches choose among equal-cost paths. `ecmp` (the default): each switch hashes the "
    "RoCEv2 5-tuple of a QP's packets; `e-ecmp` also hashes the destination QP of the base "
    "transport header (docs/models/ecmp.md).",
    kEcmpParams};

// Pinning hashes nothing; `hash` and `hash_offset` are accepted (and unused) so that a scenario
// written for ECMP runs with `--set routing.scheme=pinned`, as studies do.
constexpr Param kPinnedParams[] = {kSchemeParam, kHashParam, kHashOffsetParam, kSourcePortParam,
                                   kReconvergenceParam};
const ParamTable kPinnedTable{
    "routing (scheme: pinned)",
    "Path pinning by destination slice: every switch with a choice takes the member numbered "
    "by the destination NIC's port on its own leaf, modulo the group size "
    "(docs/models/routing.md). `hash` and `hash_offset` are accepted and not used.",
    kPinnedParams};

// MODELS.md 8: flowlet_timeout 100 us (ConWeave's RoCE implementations; sweep 50-500 us);
// path choice least-congested (CONGA) or random (LetFlow).
constexpr Param kFlowletParams[] = {
    kSchemeParam,
    {.key = "flowlet_timeout",
     .type = ParamType::Time,
     .fallback = "100us",
     .help = "idle gap of a QP after which its next burst is a new flowlet, routed again",
     .check = Check::Positive},
    {.key = "choice",
     .type = ParamType::Choice,
     .fallback = "least_loaded",
     .help = "first-hop choice for a flowlet: the least utilised uplink (CONGA-like) or a "
             "uniformly random one (LetFlow)",
     .choices = "least_loaded|random"},
    kHashParam,
    kHashOffsetParam,
    kSourcePortParam,
    kReconvergenceParam,
};
const ParamTable kFlowletTable{
    "routing (scheme: flowlet)",
    "Flowlet switching at the first-hop switch: a QP's first burst, and every burst after an "
    "idle gap longer than `flowlet_timeout`, takes the uplink `choice` picks; the switches after "
    "it hash the header as ECMP does (`hash`, `hash_offset`) (docs/models/routing.md).",
    kFlowletParams};

/// The hash settings of a section that has `hash` and `hash_offset`.
EcmpConfig read_hash(const ParamReader& r, uint64_t seed) {
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
  return c;
}

// DOMAIN.md: the controller runs CSPF periodically, e.g. every 30 s.
constexpr Param kTeParams[] = {
    kSchemeParam,
    {.key = "period",
     .type = ParamType::Time,
     .fallback = "30s",
     .help = "time between two computations of the controller (QPs new since the last one take "
             "the ECMP routes meanwhile); 0: each QP placed as it first asks",
     .check = Check::NonNegative},
    kHashParam,
    kHashOffsetParam,
    kSourcePortParam,
    kReconvergenceParam,
};
const ParamTable kTeTable{
    "routing (scheme: te)",
    "Centralized traffic engineering: a controller places every QP it knows on the leaf uplink "
    "whose path has the widest residual capacity (CSPF over the live links, demands = the NIC "
    "rate shared among its QPs) and programs it at the leaf; ECMP after the leaf, for QPs new "
    "since the last computation, and where a programmed link is down (docs/models/routing.md).",
    kTeParams};

constexpr Param kAdaptiveParams[] = {
    kSchemeParam,
    {.key = "min_spare",
     .type = ParamType::Number,
     .fallback = "0.05",
     .help = "share of a member link's capacity counted as spare however loaded it is (a busy "
             "link still gets packets)",
     .check = Check::Fraction},
    {.key = "max_paths",
     .type = ParamType::Integer,
     .fallback = "64",
     .help = "paths a QP is spread over at most; a switch whose branching would exceed it "
             "sends the QP to its least loaded member",
     .check = Check::Positive},
    kHashParam,
    kHashOffsetParam,
    kSourcePortParam,
    kReconvergenceParam,
};
const ParamTable kAdaptiveTable{
    "routing (scheme: adaptive)",
    "Adaptive routing / packet spraying (Spectrum-X, Ultra Ethernet): every switch spreads a "
    "QP's bytes over its equal-cost next hops in proportion to their spare capacity, again at "
    "every new burst of the QP; the receiving NIC reorders (docs/models/routing.md).",
    kAdaptiveParams};

std::unique_ptr<Router> make_ecmp(const ParamReader& r, const fabric::Fabric& f, uint64_t seed) {
  return std::make_unique<EcmpRouter>(f, read_hash(r, seed));
}

std::unique_ptr<Router> make_flowlet(const ParamReader& r, const fabric::Fabric& f, uint64_t seed) {
  FlowletConfig c;
  c.ecmp = read_hash(r, seed);
  c.timeout = r.time("flowlet_timeout");
  c.choice = r.choice("choice") == "random" ? FlowletChoice::Random : FlowletChoice::LeastLoaded;
  return std::make_unique<FlowletRouter>(f, c);
}

std::unique_ptr<Router> make_te(const ParamReader& r, const fabric::Fabric& f, uint64_t seed) {
  TeConfig c;
  c.ecmp = read_hash(r, seed);
  c.period = r.time("period");
  return std::make_unique<TeRouter>(f, c);
}

std::unique_ptr<Router> make_adaptive(const ParamReader& r, const fabric::Fabric& f,
                                      uint64_t seed) {
  AdaptiveConfig c;
  c.ecmp = read_hash(r, seed);
  c.min_spare = r.number("min_spare");
  c.max_paths = r.integer_as<uint32_t>("max_paths");
  if (c.max_paths > 4096) r.fail("max_paths", "at most 4096", std::to_string(c.max_paths));
  return std::make_unique<AdaptiveRouter>(f, c);
}

std::unique_ptr<Router> make_pinned(const ParamReader&, const fabric::Fabric& f, uint64_t) {
  return std::make_unique<PinnedRouter>(f);
}

}  // namespace

bool FabricWalker::ends(const RouteRequest& req, std::vector<fabric::LinkId>& head,
                        std::vector<fabric::LinkId>& tail) const {
  head.clear();
  tail.clear();
  fabric::NodeId sender = req.src;
  if (req.relay != fabric::kNone && req.relay != req.src) {
    ROCESIM_CHECK(f_.node(req.relay).server == f_.node(req.src).server,
                  "a relay GPU is on the sender's server");
    f_.scale_up_path(req.src, req.relay, head);
    sender = req.relay;
  }
  const fabric::NodeId src_nic = f_.nic_of_gpu(sender, req.port);
  const fabric::NodeId dst_nic = f_.nic_of_gpu(req.dst, req.port);
  f_.host_path(sender, src_nic, head);
  const fabric::LinkId uplink = link_between(src_nic, f_.first_hop_switch(src_nic));
  const fabric::LinkId downlink = link_between(f_.first_hop_switch(dst_nic), dst_nic);
  if (!usable(uplink) || !usable(downlink)) return false;
  head.push_back(uplink);
  tail.push_back(downlink);
  f_.host_path(dst_nic, req.dst, tail);
  return true;
}

fabric::LinkId FabricWalker::link_between(fabric::NodeId a, fabric::NodeId b) const {
  if (const fabric::LinkId l = f_.link_from_to(a, b); l != fabric::kNone) return l;
  throw InternalError(fmt::format("no link from {} to {}", f_.node(a).name, f_.node(b).name));
}

bool spread_over_entropies(Router& router, const RouteRequest& req, uint32_t paths, Spread& out,
                           Spread& scratch) {
  out.clear();
  RouteRequest r = req;
  constexpr uint32_t kBase = 0xC000, kRange = 0x4000;
  const uint32_t first = (req.key.src_port >= kBase ? req.key.src_port - kBase : req.key.src_port);
  for (uint32_t i = 0; i < paths; ++i) {
    r.key.src_port = static_cast<uint16_t>(kBase + (first + i) % kRange);
    if (!router.spread(r, scratch)) return false;
    for (size_t j = 0; j < scratch.size(); ++j) {
      const std::span<const fabric::LinkId> path = scratch.path(j);
      const double share = scratch.share[j] / paths;
      size_t k = 0;
      while (k < out.size() && !std::ranges::equal(out.path(k), path))
        ++k;
      if (k < out.size()) {
        out.share[k] += share;
      } else {
        out.links.insert(out.links.end(), path.begin(), path.end());
        out.begin.push_back(static_cast<uint32_t>(out.links.size()));
        out.share.push_back(share);
      }
    }
  }
  return true;
}

std::span<const RouterType> routing_schemes() {
  static const RouterType schemes[] = {
      {"ecmp", &kEcmpTable, &make_ecmp},
      {"e-ecmp", &kEcmpTable, &make_ecmp},
      {"pinned", &kPinnedTable, &make_pinned},
      {"flowlet", &kFlowletTable, &make_flowlet},
      {"te", &kTeTable, &make_te},
      {"adaptive", &kAdaptiveTable, &make_adaptive},
  };
  return schemes;
}

std::span<const ParamTable* const> routing_subtables() {
  static const ParamTable* const tables[] = {&kOffsetTable};
  return tables;
}

Routing make_routing(const ParamReader& parent, std::string_view key, const fabric::Fabric& f,
                     uint64_t seed) {
  std::string name{kSchemeParam.fallback};
  if (parent.has(key)) {
    const ConfigNode& section = parent.node(key);
    if (const ConfigNode* s = section.is_map() ? section.find("scheme") : nullptr) {
      if (s->is_scalar()) name = s->value();
    }
  }
  for (const RouterType& t : routing_schemes()) {
    if (t.name != name) continue;
    const ParamReader r = parent.section(key, *t.table);
    Routing out;
    out.router = t.make(r, f, seed);
    out.router->set_reconvergence(r.time("reconvergence"));
    out.source_port = fabric::parse_source_port_policy(r.choice("source_port"));
    return out;
  }
  // Not a known scheme: the scheme's own reader reports it, located, with the choices.
  (void)parent.section(key, *routing_schemes().front().table).choice("scheme");
  throw InternalError("an unknown routing scheme was accepted");
}

}  // namespace rocesim::routing
