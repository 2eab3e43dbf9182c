#include "sim/routing/path.hpp"

#include <algorithm>

namespace rocesim::routing {

Time path_latency(const fabric::Fabric& f, std::span<const fabric::LinkId> links) {
  Time t{};
  for (size_t i = 0; i < links.size(); ++i) {
    const fabric::Link& l = f.link(links[i]);
    t += l.latency;
    if (i + 1 < links.size()) t += f.node(l.dst).forwarding_latency;
  }
  return t;
}

PathId PathTable::add(const fabric::Fabric& f, std::span<const fabric::LinkId> links) {
  links_.insert(links_.end(), links.begin(), links.end());
  begin_.push_back(static_cast<uint32_t>(links_.size()));
  latency_.push_back(path_latency(f, links));
  weight_begin_.push_back(kPlain);
  max_hops_ = std::max(max_hops_, links.size());
  return static_cast<PathId>(latency_.size() - 1);
}

PathId PathTable::add_weighted(std::span<const fabric::LinkId> links,
                               std::span<const double> weights, Time latency) {
  ROCESIM_CHECK(links.size() == weights.size(), "one weight per link");
  links_.insert(links_.end(), links.begin(), links.end());
  begin_.push_back(static_cast<uint32_t>(links_.size()));
  latency_.push_back(latency);
  weight_begin_.push_back(static_cast<uint32_t>(weights_.size()));
  weights_.insert(weights_.end(), weights.begin(), weights.end());
  max_hops_ = std::max(max_hops_, links.size());
  return static_cast<PathId>(latency_.size() - 1);
}

}  // namespace rocesim::routing
