#include "sim/network/network_model.hpp"

#include <algorithm>

#include "sim/core/error.hpp"

namespace rocesim::network {

std::string_view traffic_class_name(TrafficClass c) {
  switch (c) {
    case TrafficClass::Lossless:
      return "lossless";
    case TrafficClass::Lossy:
      return "lossy";
    case TrafficClass::Control:
      return "control";
  }
  return "?";
}

void NetworkObserver::on_queue(fabric::LinkId, TrafficClass, Time, double) {}
void NetworkObserver::on_pause(fabric::LinkId, TrafficClass, Time, bool) {}
void NetworkObserver::on_ecn(fabric::LinkId, Time, double) {}
void NetworkObserver::on_cnp(QpId, Time, double) {}
void NetworkObserver::on_drop(fabric::LinkId, TrafficClass, Time, double) {}
void NetworkObserver::on_rate(QpId, Time, double) {}

void merge_routes(const fabric::Fabric& f, const FlowSpec& spec, std::vector<double>& scratch,
                  std::vector<fabric::LinkId>& links, std::vector<double>& weights) {
  ROCESIM_CHECK(!spec.routes.empty(), "a flow has at least one route");
  links.clear();
  weights.clear();
  if (spec.routes.size() == 1 && spec.routes[0].share == 1.0) {
    links.assign(spec.routes[0].hops.begin(), spec.routes[0].hops.end());
    return;  // every weight is 1: no weights
  }
  if (scratch.size() < f.link_count()) scratch.assign(f.link_count(), 0.0);
  for (const Route& r : spec.routes) {
    for (const fabric::LinkId l : r.hops) {
      if (scratch[l] == 0) links.push_back(l);
      scratch[l] += r.share;
    }
  }
  // In link order: a solver walking the union of a pipeline over thousands of GPUs then reads
  // its link table front to back rather than at random (10% of a large training step).
  std::sort(links.begin(), links.end());
  auto fabric_switch = [&](fabric::NodeId n) { return fabric::is_network_switch(f.node(n)); };
  bool all_one = true;
  for (const fabric::LinkId l : links) {
    double w = scratch[l];
    if (spec.reduce_in_switches && fabric_switch(f.link(l).src) && fabric_switch(f.link(l).dst)) {
      w = std::min(w, 1.0);
    }
    all_one = all_one && w == 1.0;
    weights.push_back(w);
    scratch[l] = 0;
  }
  if (all_one) weights.clear();
}

}  // namespace rocesim::network
