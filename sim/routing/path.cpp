#include "sim/routing/path.hpp"

#include <algorithm>
#include <bit>

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

PathId PathTable::intern_weighted(std::span<const fabric::LinkId> links,
                                  std::span<const double> weights, Time latency) {
  // FNV-1a over the links, the weights' bits and the latency.
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  for (const fabric::LinkId l : links)
    mix(l);
  for (const double w : weights)
    mix(std::bit_cast<uint64_t>(w));
  mix(static_cast<uint64_t>(latency.count_ps()));
  const auto [first, last] = interned_.equal_range(h);
  for (auto it = first; it != last; ++it) {
    const PathId p = it->second;
    const std::span<const double> pw = this->weights(p);
    if (latency_[p] == latency && std::ranges::equal(this->links(p), links) &&
        std::ranges::equal(pw, weights)) {
      return p;
    }
  }
  const PathId p = add_weighted(links, weights, latency);
  interned_.emplace(h, p);
  return p;
}

}  // namespace rocesim::routing
