// Placement: which GPUs a job gets and in which order its ranks are numbered. Ranks are
// logical; the placement maps them to GPUs, above routing and below the workloads (whose
// `ranks` select ranks of their job).
//
// A job takes whole servers from those still free (the last one partly when the GPU count is
// not a multiple of the server's), and numbers its ranks server after server in the order the
// servers were allocated, GPUs in local order:
//   contiguous  the first free servers in server order (rack after rack)
//   random      free servers drawn uniformly without replacement (a seeded stream), in the
//               order drawn: a scheduler that hands out nodes in no particular order
//   fragmented  at most `per_rack` servers from each rack, racks in order: partial racks
// `order: topology` then renumbers the ranks by (zone, rack, server, GPU): a ring over them
// enters each rack and zone once, the fewest boundary crossings a ring can have.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/fabric/fabric.hpp"

namespace rocesim::fabric {

enum class Allocation : uint8_t { Contiguous, Random, Fragmented };
enum class RankOrder : uint8_t { Allocation, Topology };

struct PlacementRequest {
  uint32_t gpus = 0;  // how many
  Allocation allocation = Allocation::Contiguous;
  uint32_t per_rack = 0;  // Fragmented: servers per rack at most (> 0)
  RankOrder order = RankOrder::Allocation;
  uint64_t seed = 1;  // Random
};

/// The servers still free, and how many GPUs each has left (whole servers only are taken).
class ServerPool {
 public:
  explicit ServerPool(const Fabric& f) : f_(f), taken_(f.servers().size(), 0) {}
  bool free(uint32_t server) const { return taken_[server] == 0; }
  /// GPUs of the free servers.
  uint64_t free_gpus() const;
  /// Marks every server of `gpus` taken (whole servers, even if a job uses part of one).
  void take(const std::vector<NodeId>& gpus);

  /// Allocates and orders a job's GPUs; empty when the free servers cannot hold them under the
  /// request's rule (the caller reports it).
  std::vector<NodeId> place(const PlacementRequest& r) const;

 private:
  const Fabric& f_;
  std::vector<uint8_t> taken_;
};

/// Renumbers ranks by (zone, rack, server, local GPU).
void order_by_topology(const Fabric& f, std::vector<NodeId>& gpus);
/// Rack boundaries a ring over `gpus` in rank order crosses: pairs of consecutive ranks, the
/// last and the first included, on different racks (servers without a rack count as their own).
uint32_t ring_rack_crossings(const Fabric& f, const std::vector<NodeId>& gpus);

}  // namespace rocesim::fabric
