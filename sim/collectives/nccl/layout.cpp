#include "sim/collectives/nccl/layout.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "sim/core/error.hpp"
#include "sim/core/rng.hpp"

namespace rocesim::collectives::nccl {

BtreeLinks btree(int n, int rank) {
  // The lowest set bit of the rank decides its level: rank r with lowest bit b has parent
  // (r ^ b) | (b << 1) (or r ^ b past the end) and children r -/+ b/2. Rank 0 is the root and
  // has a single child, the largest power of two below n.
  BtreeLinks l;
  int bit = 1;
  while (bit < n && !(bit & rank))
    bit <<= 1;
  if (rank == 0) {
    l.child1 = n > 1 ? bit >> 1 : -1;
    return l;
  }
  int up = (rank ^ bit) | (bit << 1);
  if (up >= n) up = rank ^ bit;
  l.parent = up;
  int low = bit >> 1;
  l.child0 = low == 0 ? -1 : rank - low;
  int down1 = low == 0 ? -1 : rank + low;
  while (down1 >= n) {
    low >>= 1;
    down1 = low == 0 ? -1 : rank + low;
  }
  l.child1 = down1;
  return l;
}

BtreeLinks dtree(int n, int rank, int t) {
  if (t == 0) return btree(n, rank);
  BtreeLinks l;
  if (n % 2 == 1) {  // shift by one
    const BtreeLinks s = btree(n, (rank - 1 + n) % n);
    auto back = [&](int x) { return x == -1 ? -1 : (x + 1) % n; };
    l = {back(s.parent), back(s.child0), back(s.child1)};
  } else {  // mirror
    const BtreeLinks s = btree(n, n - 1 - rank);
    auto back = [&](int x) { return x == -1 ? -1 : n - 1 - x; };
    l = {back(s.parent), back(s.child0), back(s.child1)};
  }
  return l;
}

double nccl_inter_cpu_gbytes(fabric::CpuKind cpu) {
  // src/graph/topo.h: BDW_QPI_BW 6, SKL_QPI_BW 10, SRP_QPI_BW 22, ERP_QPI_BW 40, AMD_ZEN12_BW
  // 16, AMD_ZEN34_BW 24, AMD_ZEN5_BW 32, ARM_BW 6 (ncclTopoGetInterCpuBw, topo.cc).
  switch (cpu) {
    case fabric::CpuKind::IntelBroadwell:
      return 6.0;
    case fabric::CpuKind::IntelSkylake:
      return 10.0;
    case fabric::CpuKind::IntelSapphireRapids:
      return 22.0;
    case fabric::CpuKind::IntelEmeraldRapids:
      return 40.0;
    case fabric::CpuKind::AmdZen2:
      return 16.0;
    case fabric::CpuKind::AmdZen4:
      return 24.0;
    case fabric::CpuKind::AmdZen5:
      return 32.0;
    case fabric::CpuKind::Arm:
      return 6.0;
  }
  return 6.0;
}

double nccl_path_gbytes(const fabric::Fabric& f, std::span<const fabric::LinkId> path) {
  double bw = std::numeric_limits<double>::infinity();
  int cpus = 0;  // root complexes the path passes through
  for (fabric::LinkId l : path) {
    const fabric::Link& link = f.link(l);
    const bool from_cpu = f.node(link.src).role == fabric::SwitchRole::Cpu;
    const bool between_cpus = from_cpu && f.node(link.dst).role == fabric::SwitchRole::Cpu;
    cpus += from_cpu ? 1 : 0;
    bw = std::min(bw, between_cpus ? nccl_inter_cpu_gbytes(f.server_of(link.src).cpu)
                                   : link.capacity.bytes_per_second() * 1e-9);
  }
  // Through one Intel root complex (PATH_PHB) NCCL's search reserves 6/5 of the bandwidth it
  // places (INTEL_P2P_OVERHEAD, search.cc followPath).
  if (cpus == 1 && fabric::is_intel(f.server_of(f.link(path.front()).src).cpu)) bw /= 1.2;
  return bw;
}

double nic_path_gbytes(const fabric::Fabric& f, fabric::NodeId gpu, uint32_t port) {
  const fabric::NodeId nic = f.nic_of_gpu(gpu, port);
  std::vector<fabric::LinkId> path;
  f.host_path(gpu, nic, path);
  double bw = nccl_path_gbytes(f, path);
  for (fabric::LinkId l : f.out_links(nic)) {
    if (fabric::is_network_switch(f.node(f.link(l).dst))) {
      bw = std::min(bw, f.link(l).capacity.bytes_per_second() * 1e-9);
    }
  }
  return bw;
}

bool net_inside_server(const fabric::Fabric& f, fabric::NodeId a, fabric::NodeId b) {
  if (f.server_of(a).scale_up != fabric::ScaleUp::Pcie) return false;
  std::vector<fabric::LinkId> path;
  f.scale_up_path(a, b, path);
  const double direct = nccl_path_gbytes(f, path);
  return nic_path_gbytes(f, a) > direct && nic_path_gbytes(f, b) > direct;
}

Communicator::Communicator(const fabric::Fabric& f, std::vector<fabric::NodeId> ranks)
    : f_(f), ranks_(std::move(ranks)) {
  ROCESIM_CHECK(!ranks_.empty(), "a communicator has at least one rank");
  std::map<uint32_t, size_t> node_of_server;
  for (fabric::NodeId g : ranks_) {
    const uint32_t server = f.node(g).server;
    auto [it, fresh] = node_of_server.emplace(server, nodes_.size());
    if (fresh) nodes_.emplace_back();
    node_of_rank_.push_back(static_cast<int>(it->second));
    local_of_rank_.push_back(static_cast<int>(nodes_[it->second].size()));
    nodes_[it->second].push_back(g);
  }
  node_of_server_.assign(node_of_server.begin(), node_of_server.end());  // sorted by server
  for (const auto& n : nodes_)
    ppn_ = std::max(ppn_, static_cast<int>(n.size()));
  nics_ = static_cast<int>(f.servers()[f.node(ranks_.front()).server].nics);
  nics_per_gpu_ = static_cast<int>(f.servers()[f.node(ranks_.front()).server].nics_per_gpu());
  nics_in_use_ = nics_;
  for (const auto& n : nodes_) {
    std::set<int> rails;
    for (fabric::NodeId g : n)
      for (int p = 0; p < nics_per_gpu_; ++p)
        rails.insert(rail_of(g) + p);
    nics_in_use_ = std::min(nics_in_use_, static_cast<int>(rails.size()));
  }
  mesh_ = f.server_of(ranks_.front()).scale_up == fabric::ScaleUp::Mesh;
  pcie_ = f.server_of(ranks_.front()).scale_up == fabric::ScaleUp::Pcie;
  mesh_orders_.resize(nodes_.size());
  for (int k = 0; k < nnodes(); ++k)
    head_count_ = std::min(head_count_, static_cast<int>(heads(k).size()));
}

int Communicator::rail_of(fabric::NodeId gpu) const {
  return static_cast<int>(f_.node(f_.nic_of_gpu(gpu)).local);
}

fabric::NodeId Communicator::rail_gpu(int node, int rail) const {
  const std::vector<fabric::NodeId>& g = nodes_[static_cast<size_t>(node)];
  for (fabric::NodeId x : g) {
    if (rail_of(x) <= rail && rail < rail_of(x) + nics_per_gpu_) return x;
  }
  // A node holding fewer of the communicator's ranks than it has rails (4 GPUs of a server in
  // a job of 8-GPU servers) takes the rails of the ranks it has in turn, as NCCL's search
  // spreads a node's channels over its own NICs: not all on its first GPU's NIC.
  return g[static_cast<size_t>(rail / nics_per_gpu_) % g.size()];
}

namespace {

// Hamiltonian cycles (n - 1 of them, from vertex 0) or paths (n, path k from vertex k) of the
// complete directed graph on n vertices that use every arc once: a seeded backtracking search,
// one cycle or path after another over the arcs still unused, a choice that leaves the rest
// unsolvable retried a few times, within a bounded amount of work. Empty when none is found.
std::vector<std::vector<int>> decompose(int n, bool paths) {
  if (n < 2) return {};
  std::vector<std::vector<char>> used(static_cast<size_t>(n),
                                      std::vector<char>(static_cast<size_t>(n), 0));
  std::vector<std::vector<int>> found;
  RandomStream rng(1, paths ? "nccl/mesh-paths" : "nccl/mesh-rings");
  long budget = 2'000'000;  // node expansions before giving up
  std::vector<int> path;
  std::vector<char> seen;
  // One Hamiltonian path from path[0] over unused arcs (closing back to it for a cycle),
  // candidates in random order.
  const std::function<bool()> extend = [&]() -> bool {
    if (--budget < 0) return false;
    if (static_cast<int>(path.size()) == n) {
      return paths ||
             used[static_cast<size_t>(path.back())][static_cast<size_t>(path.front())] == 0;
    }
    const auto from = static_cast<size_t>(path.back());
    std::vector<int> next;
    for (int to = 0; to < n; ++to) {
      if (seen[static_cast<size_t>(to)] == 0 && used[from][static_cast<size_t>(to)] == 0)
        next.push_back(to);
    }
    for (size_t i = next.size(); i > 1; --i)
      std::swap(next[i - 1], next[rng.below(i)]);
    for (int to : next) {
      seen[static_cast<size_t>(to)] = 1;
      path.push_back(to);
      if (extend()) return true;
      path.pop_back();
      seen[static_cast<size_t>(to)] = 0;
    }
    return false;
  };
  const auto mark = [&](const std::vector<int>& c, char v) {
    for (size_t i = 0; i + 1 < c.size(); ++i)
      used[static_cast<size_t>(c[i])][static_cast<size_t>(c[i + 1])] = v;
    if (!paths) used[static_cast<size_t>(c.back())][static_cast<size_t>(c.front())] = v;
  };
  const int wanted = paths ? n : n - 1;
  const std::function<bool()> solve = [&]() -> bool {
    if (static_cast<int>(found.size()) == wanted) return true;
    const int from = paths ? static_cast<int>(found.size()) : 0;
    for (int attempt = 0; attempt < 64 && budget > 0; ++attempt) {
      path.assign(1, from);
      seen.assign(static_cast<size_t>(n), 0);
      seen[static_cast<size_t>(from)] = 1;
      if (!extend()) return false;
      found.push_back(path);
      mark(path, 1);
      if (solve()) return true;
      mark(found.back(), 0);
      found.pop_back();
    }
    return false;
  };
  if (!solve()) return {};
  return found;
}

}  // namespace

std::vector<std::vector<int>> hamiltonian_decomposition(int n) {
  return decompose(n, false);
}

std::vector<std::vector<int>> hamiltonian_paths(int n) {
  return decompose(n, true);
}

const std::vector<int>& Communicator::mesh_order(int node, int channel, bool pxn) const {
  const std::vector<fabric::NodeId>& g = nodes_[static_cast<size_t>(node)];
  const int n = static_cast<int>(g.size());
  MeshOrders& m = mesh_orders_[static_cast<size_t>(node)];
  if (m.used.empty()) {
    m.used.assign(static_cast<size_t>(n), std::vector<int>(static_cast<size_t>(n)));
    auto [it, fresh] = decompositions_.try_emplace(n);
    if (fresh) it->second = hamiltonian_decomposition(n);
    m.cycles = it->second;
    if (nnodes() > 1) {
      auto [p, new_paths] = path_decompositions_.try_emplace(n);
      if (new_paths) p->second = hamiltonian_paths(n);
      m.paths = p->second;
    }
  }
  // Across nodes, a ring that leaves each node by its last GPU's own NIC (no PXN), with a
  // decomposition into Hamiltonian paths: the channel enters the node at its rail GPU and takes
  // that GPU's path. Every path starts at a different GPU and together they cross every link
  // once, so the channels of all rails load every link and every NIC alike, as RCCL's rings on
  // MI300X do. With PXN the last GPU hands the data over to the rail GPU by the link that
  // closes a cycle: the rotated cycles below leave exactly that link free.
  if (nnodes() > 1 && !pxn && !m.paths.empty()) {
    const fabric::NodeId first = rail_gpu(node, channel % nics_);
    return m.paths[static_cast<size_t>(std::find(g.begin(), g.end(), first) - g.begin())];
  }
  // With a decomposition, each channel takes one of its cycles from the channel's first GPU,
  // and uses its arcs but the one back to the first GPU (a multi-node ring leaves the node from
  // the last GPU's NIC instead). Of the cycles, it takes the one whose busiest arc so far is the
  // least busy, then the one whose last GPU (and so NIC) ended fewest channels: the links and
  // the NICs share the channels evenly, as RCCL's rings do.
  if (!m.cycles.empty() && m.exit_uses.empty()) m.exit_uses.assign(static_cast<size_t>(n), 0);
  while (!m.cycles.empty() && static_cast<int>(m.channels.size()) <= channel) {
    const int c = static_cast<int>(m.channels.size());
    const fabric::NodeId first_gpu =
        nnodes() == 1 ? g[static_cast<size_t>(c % n)] : rail_gpu(node, c % nics_);
    const int first = static_cast<int>(std::find(g.begin(), g.end(), first_gpu) - g.begin());
    const auto rotated = [&](size_t k) {
      const std::vector<int>& cycle = m.cycles[k];
      const auto at = std::find(cycle.begin(), cycle.end(), first) - cycle.begin();
      std::vector<int> order(cycle.begin() + at, cycle.end());
      order.insert(order.end(), cycle.begin(), cycle.begin() + at);
      return order;
    };
    const auto key = [&](const std::vector<int>& order) {
      int busiest = 0, total = 0;
      for (size_t i = 0; i + 1 < order.size(); ++i) {
        const int u = m.used[static_cast<size_t>(order[i])][static_cast<size_t>(order[i + 1])];
        busiest = std::max(busiest, u);
        total += u;
      }
      return std::tuple{busiest, m.exit_uses[static_cast<size_t>(order.back())], total};
    };
    std::vector<int> best = rotated(0);
    for (size_t k = 1; k < m.cycles.size(); ++k) {
      std::vector<int> o = rotated(k);
      if (key(o) < key(best)) best = std::move(o);
    }
    for (size_t i = 0; i + 1 < best.size(); ++i)
      ++m.used[static_cast<size_t>(best[i])][static_cast<size_t>(best[i + 1])];
    ++m.exit_uses[static_cast<size_t>(best.back())];
    if (nnodes() == 1) ++m.used[static_cast<size_t>(best.back())][static_cast<size_t>(best[0])];
    m.channels.push_back(std::move(best));
  }
  // Otherwise channels in order, each greedily: from its first GPU, always to the unvisited GPU
  // over the least used link (lowest position on ties), then back to the first (the ring's return,
  // or PXN's hand-over to the rail GPU), counting the links it takes.
  while (static_cast<int>(m.channels.size()) <= channel) {
    const int c = static_cast<int>(m.channels.size());
    const fabric::NodeId first =
        nnodes() == 1 ? g[static_cast<size_t>(c % n)] : rail_gpu(node, c % nics_);
    std::vector<int> order{static_cast<int>(std::find(g.begin(), g.end(), first) - g.begin())};
    std::vector<bool> seen(static_cast<size_t>(n), false);
    seen[static_cast<size_t>(order.front())] = true;
    while (static_cast<int>(order.size()) < n) {
      const auto from = static_cast<size_t>(order.back());
      int best = -1;
      for (int to = 0; to < n; ++to) {
        if (seen[static_cast<size_t>(to)]) continue;
        if (best < 0 ||
            m.used[from][static_cast<size_t>(to)] < m.used[from][static_cast<size_t>(best)]) {
          best = to;
        }
      }
      ++m.used[from][static_cast<size_t>(best)];
      seen[static_cast<size_t>(best)] = true;
      order.push_back(best);
    }
    if (n > 1) ++m.used[static_cast<size_t>(order.back())][static_cast<size_t>(order.front())];
    m.channels.push_back(std::move(order));
  }
  return m.channels[static_cast<size_t>(channel)];
}

std::vector<fabric::NodeId> Communicator::node_order(int node, int channel, bool pxn) const {
  const std::vector<fabric::NodeId>& g = nodes_[static_cast<size_t>(node)];
  if (mesh_) {
    std::vector<fabric::NodeId> out;
    for (int i : mesh_order(node, channel, pxn))
      out.push_back(g[static_cast<size_t>(i)]);
    return out;
  }
  const auto start = std::find(g.begin(), g.end(), rail_gpu(node, channel % nics_));
  std::vector<fabric::NodeId> out(start, g.end());
  out.insert(out.end(), g.begin(), start);
  return out;
}

std::vector<fabric::NodeId> Communicator::ring_order(int channel, bool pxn) const {
  if (nnodes() == 1 && !mesh_) return ranks_;
  std::vector<fabric::NodeId> out;
  out.reserve(ranks_.size());
  for (int k = 0; k < nnodes(); ++k) {
    const std::vector<fabric::NodeId> o = node_order(k, channel, pxn);
    out.insert(out.end(), o.begin(), o.end());
  }
  return out;
}

Edge Communicator::edge(fabric::NodeId a, fabric::NodeId b, bool pxn, int rail) const {
  Edge e{a, b, fabric::kNone, f_.node(a).server != f_.node(b).server};
  if (!e.network && pcie_) e.network = net_inside_server(f_, a, b);
  if (!e.network) return e;
  // The receiver's rail: the one asked for where it has it, else its first.
  if (rail < rail_of(b) || rail >= rail_of(b) + nics_per_gpu_) rail = rail_of(b);
  e.port = static_cast<uint32_t>(rail % nics_per_gpu_);
  if (pxn) {
    // PXN: cross NVLink to the GPU of the sender's node on the rail; its NIC sends.
    const uint32_t server = f_.node(a).server;
    const auto it = std::lower_bound(node_of_server_.begin(), node_of_server_.end(),
                                     std::pair<uint32_t, size_t>{server, 0});
    ROCESIM_CHECK(it != node_of_server_.end() && it->first == server,
                  "an edge's sender is a rank of the communicator");
    const fabric::NodeId relay = rail_gpu(static_cast<int>(it->second), rail);
    if (relay != a && rail_of(relay) == rail - rail % nics_per_gpu_) e.relay = relay;
  }
  return e;
}

std::vector<Edge> Communicator::ring(int channel, bool pxn) const {
  const std::vector<fabric::NodeId> order = ring_order(channel, pxn);
  std::vector<Edge> out;
  if (order.size() < 2) return out;
  for (size_t i = 0; i < order.size(); ++i) {
    out.push_back(edge(order[i], order[(i + 1) % order.size()], pxn, channel % nics_));
  }
  return out;
}

std::vector<Edge> Communicator::chain(int channel, fabric::NodeId root, bool to_root,
                                      bool pxn) const {
  const std::vector<fabric::NodeId> order = ring_order(channel, pxn);
  const size_t n = order.size();
  const size_t r = static_cast<size_t>(std::find(order.begin(), order.end(), root) - order.begin());
  ROCESIM_CHECK(r < n, "the root is a rank of the communicator");
  std::vector<Edge> out;
  for (size_t i = 0; i + 1 < n; ++i) {
    if (to_root) {
      // Reduce: from the rank after the root around to the root.
      out.push_back(edge(order[(r + 1 + i) % n], order[(r + 2 + i) % n], pxn, channel % nics_));
    } else {
      out.push_back(edge(order[(r + i) % n], order[(r + i + 1) % n], pxn, channel % nics_));
    }
  }
  return out;
}

int Communicator::tree_of_channel(int channel) const {
  return (channel / nics_) % 2;
}

std::vector<fabric::NodeId> Communicator::leaders(int channel) const {
  std::vector<fabric::NodeId> out;
  for (int k = 0; k < nnodes(); ++k)
    out.push_back(rail_gpu(k, channel % nics_));
  return out;
}

std::vector<fabric::NodeId> Communicator::heads(int node) const {
  std::vector<fabric::NodeId> out;
  for (int r = 0; r < nics_ && out.size() < 8; r += nics_per_gpu_) {
    const fabric::NodeId g = rail_gpu(node, r);
    if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
  }
  return out;
}

Communicator::Tree Communicator::collnet_direct() const {
  Tree t;
  const auto h = static_cast<size_t>(head_count());
  for (int k = 0; k < nnodes(); ++k) {
    const std::vector<fabric::NodeId> hs = heads(k);
    for (const fabric::NodeId g : nodes_[static_cast<size_t>(k)]) {
      for (size_t j = 0; j < h; ++j) {
        if (hs[j] == g) continue;
        t.up.push_back(edge(g, hs[j], false));
        t.up_stage.push_back(0);
        t.down.push_back(edge(hs[j], g, false));
        t.down_stage.push_back(0);
      }
    }
  }
  t.intra = t.up.empty() ? 0 : 1;
  return t;
}

Communicator::Tree Communicator::collnet_chains(int channel) const {
  Tree t;
  for (int k = 0; k < nnodes(); ++k)
    t.intra = std::max(t.intra, static_cast<int>(nodes_[static_cast<size_t>(k)].size()) - 1);
  for (int k = 0; k < nnodes(); ++k) {
    const std::vector<fabric::NodeId> o = node_order(k, channel);
    for (size_t i = o.size(); i-- > 1;) {
      // Up, the chain's far end first (its edge into the leader last); down, the reverse.
      t.up.push_back(edge(o[i], o[i - 1], false));
      t.up_stage.push_back(t.intra - static_cast<int>(i));
      t.down.push_back(edge(o[i - 1], o[i], false));
      t.down_stage.push_back(static_cast<int>(i) - 1);
    }
  }
  return t;
}

Communicator::Tree Communicator::tree(int channel) const {
  // Up the chains, then up the network; down the network, then down the chains.
  Tree t = collnet_chains(channel);
  const Tree net = leader_tree(channel);
  t.depth = net.depth;
  for (int& s : t.down_stage)
    s += t.depth;
  t.up.insert(t.up.end(), net.up.begin(), net.up.end());
  for (const int s : net.up_stage)
    t.up_stage.push_back(t.intra + s);
  t.down.insert(t.down.end(), net.down.begin(), net.down.end());
  t.down_stage.insert(t.down_stage.end(), net.down_stage.begin(), net.down_stage.end());
  return t;
}

std::vector<Edge> Communicator::node_ring(int node) const {
  const std::vector<fabric::NodeId>& g = nodes_[static_cast<size_t>(node)];
  std::vector<Edge> out;
  if (g.size() < 2) return out;
  for (size_t i = 0; i < g.size(); ++i)
    out.push_back(edge(g[i], g[(i + 1) % g.size()], false));
  return out;
}

Communicator::Tree Communicator::leader_tree(int channel) const {
  Tree t;
  const int n = nnodes();
  const std::vector<fabric::NodeId> lead = leaders(channel);
  const int which = tree_of_channel(channel);
  std::vector<int> depth(n, 0);
  for (int k = 0; k < n; ++k) {
    int d = 0;  // network hops from node k up to the root
    for (int x = k; dtree(n, x, which).parent != -1; x = dtree(n, x, which).parent) {
      ++d;
      ROCESIM_CHECK(d <= n, "the double binary tree has a cycle");
    }
    depth[k] = d;
  }
  t.depth = n > 0 ? *std::max_element(depth.begin(), depth.end()) : 0;
  for (int k = 0; k < n; ++k) {
    const int parent = dtree(n, k, which).parent;
    if (parent == -1) continue;
    // Up, the deepest nodes first; down, the root's children first.
    t.up.push_back(edge(lead[k], lead[parent], false, channel % nics_));
    t.up_stage.push_back(t.depth - depth[k]);
    t.down.push_back(edge(lead[parent], lead[k], false, channel % nics_));
    t.down_stage.push_back(depth[k] - 1);
  }
  return t;
}

}  // namespace rocesim::collectives::nccl
