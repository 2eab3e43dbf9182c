// How NCCL lays a communicator out on the hardware, channel by channel.
//
// Ranks are grouped by server (a "node" in NCCL's words) in the order they appear. NIC r of
// every server is on "rail" r; channel c works on rail c mod (NICs per server), so a server with
// 8 NICs runs 16 channels as two per NIC.
//  * Ring channel c: the ring enters every node at the node's GPU on rail r (the GPU whose NIC
//    is NIC r), visits the node's other GPUs over NVLink, and leaves from the last one towards
//    the next node's rail-r GPU. With PXN the last GPU hands the data over NVLink to the rail-r
//    GPU of its own node, whose NIC sends it: every network hop of the channel stays on rail r
//    (NCCL's rings "enter and leave a node through the same NIC"). Without PXN the last GPU's own
//    NIC sends, across rails.
//  * Tree channel c: one of the two trees of NCCL's double binary tree over the nodes. Like NCCL
//    (which duplicates its channels and gives the copies the second tree), channels 0 .. NICs-1
//    use tree 0 and the next NICs channels tree 1, so each NIC serves one channel of each tree
//    and a node that is an inner node of one tree is a leaf of the other. Inside a node the GPUs
//    form a chain ending at the rail-r GPU, which talks to the parent and child nodes.
//  * Chains (Broadcast, Reduce) follow the ring from or to the root.
//  * CollNet: the chains inside nodes, and the node leaders reducing through the switches: the
//    aggregation root is the switch closest (in hops) to every leader's first switch.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "sim/fabric/fabric.hpp"

namespace rocesim::collectives::nccl {

/// A logical edge: src sends to dst, through `relay`'s NIC when set (PXN).
struct Edge {
  fabric::NodeId src = fabric::kNone;
  fabric::NodeId dst = fabric::kNone;
  fabric::NodeId relay = fabric::kNone;
  bool network = false;  // through the NICs: across servers, or NCCL's network transport inside
                         // a PCIe server (net_inside_server)
  uint32_t port = 0;     // which NIC of its GPUs a network edge uses (GPUs with several NICs)
};

/// NCCL's figure in GB/s for the link between two CPU sockets (ncclTopoGetInterCpuBw).
double nccl_inter_cpu_gbytes(fabric::CpuKind cpu);
/// The bandwidth NCCL's topology gives a path inside a server, GB/s: its narrowest link, a link
/// between CPU sockets counted at NCCL's figure for the CPU rather than its own capacity.
double nccl_path_gbytes(const fabric::Fabric& f, std::span<const fabric::LinkId> path);
/// A GPU's way out of its server in GB/s: its PCIe path to its NIC (port `port`) and the NIC's
/// cable, whichever is narrower (NCCL's GPU -> NET path bandwidth).
double nic_path_gbytes(const fabric::Fabric& f, fabric::NodeId gpu, uint32_t port = 0);
/// Whether NCCL moves data between GPUs a and b of one PCIe server (scale_up: pcie) through
/// their NICs and the network: when each GPU's path to its NIC is faster than the path between
/// the two GPUs (ncclTopoCheckNet, which both its peer-to-peer and shared-memory transports ask
/// first). Never with NVLink or xGMI, whose paths outrun any NIC.
bool net_inside_server(const fabric::Fabric& f, fabric::NodeId a, fabric::NodeId b);

/// NCCL's binary tree over n ranks (src/graph/trees.cc): parent and up to two children of
/// `rank`, -1 where absent.
struct BtreeLinks {
  int parent = -1;
  int child0 = -1;
  int child1 = -1;
};
BtreeLinks btree(int n, int rank);
/// Tree t (0 or 1) of NCCL's double binary tree: tree 1 mirrors tree 0 (even n) or shifts it
/// by one (odd n), so that ranks that are leaves in one tree are inner nodes in the other.
BtreeLinks dtree(int n, int rank, int t);

/// n - 1 directed Hamiltonian cycles of the complete directed graph on n vertices that use
/// every arc exactly once (they exist for every n but 4 and 6: Tillson 1980), found by a
/// seeded backtracking search that gives up after a bounded amount of work; each cycle starts
/// at vertex 0. Empty when none is found. The rings RCCL lays over a full xGMI mesh use every
/// link of every GPU, as these do.
std::vector<std::vector<int>> hamiltonian_decomposition(int n);
/// n directed Hamiltonian paths of the complete directed graph on n vertices, path k from
/// vertex k, that use every arc exactly once (each vertex also ends one path), found as above;
/// empty when none is found. RCCL's multi-node rings over an 8-GPU MI300X mesh are such a set
/// (src/graph/rome_models.cc: a ring enters each GPU's NIC and crosses every link once).
std::vector<std::vector<int>> hamiltonian_paths(int n);

class Communicator {
 public:
  Communicator(const fabric::Fabric& f, std::vector<fabric::NodeId> ranks);

  int nranks() const { return static_cast<int>(ranks_.size()); }
  int nnodes() const { return static_cast<int>(nodes_.size()); }
  int ppn() const { return ppn_; }  // most ranks on one node
  int nics_per_node() const { return nics_; }
  /// The NICs its own GPUs send on, on the node that has the fewest: all of a server's where
  /// the communicator holds every GPU, fewer where it holds some (NCCL's search makes one graph
  /// channel per NIC of its ranks' GPUs).
  int nics_in_use() const { return nics_in_use_; }
  const std::vector<fabric::NodeId>& ranks() const { return ranks_; }
  const std::vector<std::vector<fabric::NodeId>>& nodes() const { return nodes_; }
  /// Per rank: the index of its node in nodes(), and its place among that node's ranks.
  const std::vector<int>& node_of_rank() const { return node_of_rank_; }
  const std::vector<int>& local_of_rank() const { return local_of_rank_; }
  const fabric::Fabric& fabric() const { return f_; }

  /// The rail (NIC index within its server) a GPU sends on: its first, where a GPU owns several
  /// NICs (rails rail_of .. rail_of + nics_per_gpu - 1).
  int rail_of(fabric::NodeId gpu) const;
  int nics_per_gpu() const { return nics_per_gpu_; }
  /// The servers' GPUs form an xGMI mesh (scale_up: mesh), not an NVSwitch domain.
  bool mesh() const { return mesh_; }
  /// The servers' GPUs reach each other over PCIe only (scale_up: pcie).
  bool pcie() const { return pcie_; }
  /// The GPU of node k on rail r; where none of its ranks is on that rail, its ranks' rails in
  /// turn (rail / NICs per GPU, modulo its ranks).
  fabric::NodeId rail_gpu(int node, int rail) const;

  /// GPUs of a channel's ring in ring order (all ranks): each node's GPUs in the channel's
  /// node order (see node_order), nodes in communicator order; `pxn`: the ring leaves a node
  /// through the GPU of the channel's rail.
  std::vector<fabric::NodeId> ring_order(int channel, bool pxn = true) const;
  /// The edges of a channel's ring: ring_order()[i] -> ring_order()[i+1], and the last back to
  /// the first.
  std::vector<Edge> ring(int channel, bool pxn) const;
  /// The edges from `root` along the ring to every other rank (Broadcast), or the reverse
  /// (towards the root, Reduce), in pipeline order.
  std::vector<Edge> chain(int channel, fabric::NodeId root, bool to_root, bool pxn) const;

  struct Tree {
    std::vector<Edge> up;    // reduce direction: GPU chains to leaders, children to parents
    std::vector<Edge> down;  // broadcast direction
    // Each edge's place in its direction's pipeline, 0 first: a slice going up crosses the
    // edges of stage 0, then 1, ... (chains from their far end, then the network from the
    // deepest nodes); going down, the network from the root, then the chains.
    std::vector<int> up_stage, down_stage;
    int depth = 0;  // network hops from the deepest node to the root
    int intra = 0;  // NVLink hops of a node's chain
  };
  Tree tree(int channel) const;
  /// The network part of a channel's tree: the node leaders (rail GPUs) of one tree of the
  /// double binary tree, children to parents (up) and back (down); `intra` is 0.
  Tree leader_tree(int channel) const;
  /// Every GPU of node k to the next and the last to the first, through the NVLink domain:
  /// each GPU's NVLink once each way (NVLS's loads and stores, spread over its heads).
  std::vector<Edge> node_ring(int node) const;
  /// Which tree of the double binary tree a channel uses (0 or 1).
  int tree_of_channel(int channel) const;

  /// The chain edges of CollNetChain (inside nodes, both directions) and the node leaders.
  Tree collnet_chains(int channel) const;
  std::vector<fabric::NodeId> leaders(int channel) const;
  /// CollNetDirect's heads of node k: its GPUs with a NIC (one per NIC, a GPU once), at most 8.
  std::vector<fabric::NodeId> heads(int node) const;
  /// The heads every node has (the least over the nodes): CollNetDirect pairs head j across them.
  int head_count() const { return head_count_; }
  /// CollNetDirect's edges inside the nodes: every GPU to each of its node's first head_count()
  /// heads but itself (up: the scatter of each head's share) and each head back to every other
  /// GPU (down: the broadcast of the result), all at stage 0 of their direction; `intra` 1 (0
  /// with one GPU a node).
  Tree collnet_direct() const;
  /// The edge a -> b; across servers (or through the network inside a PCIe server, see
  /// net_inside_server) on rail `rail` where b is on it (else on b's first rail): through that
  /// rail's NIC of each server, the sender's GPU relaying to it over NVLink with PXN.
  Edge edge(fabric::NodeId a, fabric::NodeId b, bool pxn, int rail = -1) const;

 private:
  /// The node's GPUs in a channel's chain order, starting at its GPU on the channel's rail (any
  /// GPU on one node). Behind an NVSwitch every order costs the same and the rotation of the
  /// node's GPUs is used; in an xGMI mesh each channel takes the order whose links earlier
  /// channels used least, as RCCL's rings spread over all of a GPU's links (across nodes
  /// without PXN: its rail GPU's Hamiltonian path).
  std::vector<fabric::NodeId> node_order(int node, int channel, bool pxn = true) const;
  /// Positions (in nodes_[node]) of the mesh order of a channel (made for every channel up to
  /// it).
  const std::vector<int>& mesh_order(int node, int channel, bool pxn) const;

  const fabric::Fabric& f_;
  std::vector<fabric::NodeId> ranks_;
  std::vector<std::vector<fabric::NodeId>> nodes_;
  std::vector<std::pair<uint32_t, size_t>> node_of_server_;  // (server, index in nodes_), sorted
  std::vector<int> node_of_rank_, local_of_rank_;
  int ppn_ = 1;
  int nics_ = 1;
  int nics_in_use_ = 1;
  int nics_per_gpu_ = 1;
  bool mesh_ = false;
  bool pcie_ = false;
  int head_count_ = 8;  // head_count(), counted once
  struct MeshOrders {
    std::vector<std::vector<int>> cycles;    // hamiltonian_decomposition of the node's size
    std::vector<std::vector<int>> paths;     // hamiltonian_paths of it, across nodes
    std::vector<std::vector<int>> channels;  // positions in nodes_[node], per channel
    std::vector<std::vector<int>> used;      // directed link use counts [from][to]
    std::vector<int> exit_uses;              // channels whose order ends at each position
  };
  mutable std::vector<MeshOrders> mesh_orders_;
  /// hamiltonian_decomposition by node size, searched once per communicator.
  mutable std::map<int, std::vector<std::vector<int>>> decompositions_;
  /// hamiltonian_paths by node size, likewise.
  mutable std::map<int, std::vector<std::vector<int>>> path_decompositions_;
};

}  // namespace rocesim::collectives::nccl
