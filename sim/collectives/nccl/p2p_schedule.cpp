#include "sim/collectives/nccl/p2p_schedule.hpp"

#include <algorithm>
#include <bit>

#include "sim/core/error.hpp"

namespace rocesim::collectives::nccl {

std::vector<int> triangular_order(int n) {
  uint32_t pow2 = 1;
  while (pow2 < static_cast<uint32_t>(n))
    pow2 <<= 1;
  std::vector<int> order;
  uint32_t delta = 0;
  for (uint32_t k = 0; k < pow2; ++k) {
    // delta_k = k (k + 1) / 2 mod pow2: visits every residue once when pow2 is a power of two.
    if (delta < static_cast<uint32_t>(n)) order.push_back(static_cast<int>(delta));
    delta = (delta + k + 1) & (pow2 - 1);
  }
  return order;
}

uint32_t reverse_bits(uint32_t x, int bits) {
  uint32_t y = 0;
  for (int i = 0; i < bits; ++i) {
    y = (y << 1) | (x & 1);
    x >>= 1;
  }
  return y;
}

int p2p_parts(int64_t bytes, int per_peer, int ranks, int channels, int64_t step) {
  ROCESIM_CHECK(bytes > 0 && per_peer >= 1 && ranks >= 1 && step >= 2, "p2p parts' inputs");
  int fewest = per_peer;
  while (static_cast<int64_t>(fewest) * ranks > channels && fewest > 1)
    fewest /= 2;
  const int64_t smallest = step / 2, largest = step;
  const auto div_up = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  int parts = static_cast<int>(std::min<int64_t>(fewest, div_up(bytes, smallest)));
  int64_t part = std::max(smallest, div_up(bytes, parts));
  while (part > largest && parts <= per_peer / 2) {
    parts *= 2;
    part = div_up(bytes, parts);
  }
  return parts;
}

int p2p_channels_per_peer(std::optional<int> per_net_peer, bool in_paths, int net_default,
                          int ranks, int channels, int nics) {
  ROCESIM_CHECK(ranks >= 1 && channels >= 1 && nics >= 1 && net_default >= 1,
                "p2p channels per peer's inputs");
  const auto pow2_up = [](int v) {
    return static_cast<int>(std::bit_ceil(static_cast<unsigned>(v)));
  };
  // Halved while it times the ranks exceeds 4 times `bound` channels, down to 1.
  const auto by_scale = [ranks](int c, int bound) {
    while (static_cast<int64_t>(c) * ranks > static_cast<int64_t>(bound) * 4 && c > 1)
      c /= 2;
    return c;
  };
  if (in_paths) {
    const int net = per_net_peer ? *per_net_peer : std::max(by_scale(2, channels), nics);
    return pow2_up(std::min(channels, net));
  }
  return by_scale(pow2_up(std::min(channels, per_net_peer.value_or(net_default))),
                  pow2_up(channels));
}

P2pSchedule::P2pSchedule(const std::vector<int>& node_of, const std::vector<int>& local_of,
                         int channels)
    : node_of_(node_of), local_of_(local_of), channels_(channels) {
  ROCESIM_CHECK(node_of.size() == local_of.size() && !node_of.empty(), "a rank's node and place");
  ROCESIM_CHECK(channels >= 1 && (channels & (channels - 1)) == 0, "p2p channels: a power of two");
  while ((1 << channel_bits_) < channels)
    ++channel_bits_;
  const int n = ranks();
  nodes_ = 1 + *std::max_element(node_of.begin(), node_of.end());
  std::vector<int> size(static_cast<size_t>(nodes_), 0);
  for (const int k : node_of)
    ++size[static_cast<size_t>(k)];
  local_size_ = size.front();
  flat_ = std::any_of(size.begin(), size.end(), [&](int s) { return s != local_size_; });
  if (flat_) {
    // NCCL's schedule for nodes of unequal size: one node of every rank.
    local_size_ = n;
    const std::vector<int> order = triangular_order(n);
    flat_pos_.assign(static_cast<size_t>(n), 0);
    for (size_t k = 0; k < order.size(); ++k)
      flat_pos_[static_cast<size_t>(order[k])] = static_cast<int>(k);
  } else {
    const std::vector<int> order = triangular_order(nodes_);
    node_pos_.assign(static_cast<size_t>(nodes_), 0);
    for (size_t k = 0; k < order.size(); ++k)
      node_pos_[static_cast<size_t>(order[k])] = static_cast<int>(k);
  }
}

int P2pSchedule::round(int from, int to) const {
  const int n = ranks();
  if (flat_) return flat_pos_[static_cast<size_t>((to - from + n) % n)];
  const int node_delta =
      (node_of_[static_cast<size_t>(to)] - node_of_[static_cast<size_t>(from)] + nodes_) % nodes_;
  const int local_delta =
      (local_of_[static_cast<size_t>(to)] - local_of_[static_cast<size_t>(from)] + local_size_) %
      local_size_;
  return node_pos_[static_cast<size_t>(node_delta)] * local_size_ + local_delta;
}

int P2pSchedule::channel(int round, int part) const {
  uint32_t base = static_cast<uint32_t>(round);
  if (nodes_ > 1) {
    const int groups_per_delta = (local_size_ + kPerBatch - 1) / kPerBatch;
    base = static_cast<uint32_t>((round / local_size_) * groups_per_delta +
                                 (round % local_size_) / kPerBatch);
  }
  const uint32_t first = reverse_bits(base, channel_bits_);
  return static_cast<int>((first + static_cast<uint32_t>(part)) &
                          static_cast<uint32_t>(channels_ - 1));
}

}  // namespace rocesim::collectives::nccl
