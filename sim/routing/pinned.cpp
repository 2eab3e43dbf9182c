#include "sim/routing/pinned.hpp"

namespace rocesim::routing {

PinnedRouter::PinnedRouter(const fabric::Fabric& f) : walker_(f), slice_(f.node_count(), 0) {
  // Host ports in port (link) order: the links from a switch to NICs.
  for (fabric::NodeId s = 0; s < f.node_count(); ++s) {
    if (!fabric::is_network_switch(f.node(s))) continue;
    uint32_t port = 0;
    for (const fabric::LinkId l : f.out_links(s)) {
      const fabric::NodeId n = f.link(l).dst;
      if (f.node(n).kind == fabric::NodeKind::Nic) slice_[n] = port++;
    }
  }
}

bool PinnedRouter::route(const RouteRequest& req, std::vector<fabric::LinkId>& out) {
  const fabric::Fabric& f = walker_.fabric();
  const uint32_t s = slice_[f.nic_of_gpu(req.dst, req.port)];
  return walker_.walk(req, out, [&](fabric::NodeId, std::span<const fabric::LinkId> hops) {
    return s % static_cast<uint32_t>(hops.size());
  });
}

}  // namespace rocesim::routing
