// Seeded random streams. A component that needs randomness derives its own stream from the
// scenario seed and a key (a name such as "workload/perm", or a node id), so streams are
// independent of each other and of the order in which they are created, and the thread count
// never changes what anyone draws. (What is drawn per QP still depends on the order in which
// workloads open their QPs, which is the order of the scenario.)
#pragma once

#include <cstdint>
#include <string_view>

namespace rocesim {

/// SplitMix64's finalizer: every bit of `z` spread over every bit of the result (also a hash of
/// 64-bit keys whose low bits repeat, for open-addressing tables).
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// SplitMix64 (Steele, Lea, Flood 2014): used to expand seeds. `next()` is the reference
/// algorithm (also the ECMP hash of the reference scenarios in bench/reference.py).
class SplitMix64 {
 public:
  explicit constexpr SplitMix64(uint64_t state) : state_(state) {}
  constexpr uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return mix64(state_);
  }

 private:
  uint64_t state_;
};

/// 64-bit FNV-1a of a name, to key streams.
constexpr uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

__extension__ typedef unsigned __int128 u128;  // for Lemire's bounded draw

/// xoshiro256** (Blackman and Vigna 2018), seeded through SplitMix64.
class RandomStream {
 public:
  RandomStream(uint64_t seed, std::string_view name) : RandomStream(seed ^ fnv1a64(name)) {}
  explicit RandomStream(uint64_t key) {
    SplitMix64 sm(key);
    for (auto& w : s_)
      w = sm.next();
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform integer in [0, n), without modulo bias (Lemire's method).
  uint64_t below(uint64_t n) {
    if (n <= 1) return 0;
    const uint64_t threshold = (0 - n) % n;
    while (true) {
      const u128 m = static_cast<u128>(next_u64()) * n;
      if (static_cast<uint64_t>(m) >= threshold) return static_cast<uint64_t>(m >> 64);
    }
  }

  /// Uniform double in [0, 1).
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

 private:
  static constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace rocesim
