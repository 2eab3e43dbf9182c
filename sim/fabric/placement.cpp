#include "sim/fabric/placement.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "sim/core/rng.hpp"

namespace rocesim::fabric {
namespace {

/// A server's rack, or a value of its own when the fabric has no racks.
uint64_t rack_key(const Server& s) {
  return s.rack != kNone ? s.rack : (uint64_t{1} << 32) + s.index;
}

}  // namespace

uint64_t ServerPool::free_gpus() const {
  uint64_t n = 0;
  for (const Server& s : f_.servers())
    n += taken_[s.index] == 0 ? s.gpus : 0;
  return n;
}

void ServerPool::take(const std::vector<NodeId>& gpus) {
  for (const NodeId g : gpus)
    taken_[f_.node(g).server] = 1;
}

std::vector<NodeId> ServerPool::place(const PlacementRequest& r) const {
  std::vector<uint32_t> order;  // servers in allocation order
  uint64_t have = 0;
  auto take = [&](uint32_t s) {
    order.push_back(s);
    have += f_.servers()[s].gpus;
  };
  std::vector<uint32_t> candidates;
  for (const Server& s : f_.servers()) {
    if (taken_[s.index] == 0 && s.gpus > 0) candidates.push_back(s.index);
  }
  switch (r.allocation) {
    case Allocation::Contiguous:
      for (size_t i = 0; i < candidates.size() && have < r.gpus; ++i)
        take(candidates[i]);
      break;
    case Allocation::Random: {
      RandomStream rng(r.seed, "placement");
      while (have < r.gpus && !candidates.empty()) {
        const auto k = static_cast<size_t>(rng.below(candidates.size()));
        take(candidates[k]);
        candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(k));
      }
      break;
    }
    case Allocation::Fragmented: {
      std::map<uint64_t, uint32_t> used;  // per rack
      for (size_t i = 0; i < candidates.size() && have < r.gpus; ++i) {
        uint32_t& n = used[rack_key(f_.servers()[candidates[i]])];
        if (n >= r.per_rack) continue;
        ++n;
        take(candidates[i]);
      }
      break;
    }
  }
  if (have < r.gpus) return {};
  std::vector<NodeId> gpus;
  gpus.reserve(r.gpus);
  for (const uint32_t s : order) {
    const Server& srv = f_.servers()[s];
    for (uint32_t g = 0; g < srv.gpus && gpus.size() < r.gpus; ++g)
      gpus.push_back(srv.first_gpu + g);
  }
  if (r.order == RankOrder::Topology) order_by_topology(f_, gpus);
  return gpus;
}

void order_by_topology(const Fabric& f, std::vector<NodeId>& gpus) {
  auto key = [&](NodeId g) {
    const Node& n = f.node(g);
    const Server& s = f.servers()[n.server];
    return std::make_tuple(s.zone, rack_key(s), s.index, n.local);
  };
  std::stable_sort(gpus.begin(), gpus.end(), [&](NodeId a, NodeId b) { return key(a) < key(b); });
}

uint32_t ring_rack_crossings(const Fabric& f, const std::vector<NodeId>& gpus) {
  uint32_t n = 0;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const NodeId a = gpus[i], b = gpus[(i + 1) % gpus.size()];
    n += rack_key(f.server_of(a)) != rack_key(f.server_of(b)) ? 1 : 0;
  }
  return n;
}

}  // namespace rocesim::fabric
