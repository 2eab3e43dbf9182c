// What a router may know about the links while a simulation runs: which links routing believes
// are up (the fabric as the routing protocol, or the TE controller, last converged on it), their
// current capacity and the load the network model puts on them. The engine supplies the view;
// routers only read it, so `routing/` never sees `network/`.
#pragma once

#include "sim/core/units.hpp"
#include "sim/fabric/fabric.hpp"

namespace rocesim::routing {

class LinkView {
 public:
  virtual ~LinkView() = default;
  /// Routing may use the link: it is up as of the last reconvergence.
  virtual bool up(fabric::LinkId l) const = 0;
  /// Payload capacity now (bytes/s): the nominal one, a degraded speed, or 0 while down.
  virtual double capacity(fabric::LinkId l) const = 0;
  /// Bytes per second the flows on the link are given now (as of the last instant whose rates
  /// were computed: flows started in the current instant are not in it yet).
  virtual double load(fabric::LinkId l) const = 0;
  /// The simulated time of the question.
  virtual Time now() const = 0;
};

}  // namespace rocesim::routing
