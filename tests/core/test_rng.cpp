// Seeded random streams: reference algorithms (checked against an implementation written here
// from the published descriptions and against published outputs), determinism, independence of
// named streams, and bounded draws without modulo bias.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sim/core/rng.hpp"

namespace rocesim {
namespace {

// ---- reference implementations, written from the papers ----

// SplitMix64 (Steele, Lea and Flood, OOPSLA 2014; as in Vigna's splitmix64.c): add the golden
// gamma, then the variant-13 finaliser of MurmurHash3's fmix64.
uint64_t ref_splitmix64(uint64_t& x) {
  x += 0x9e3779b97f4a7c15ull;
  uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t ref_rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

// xoshiro256** (Blackman and Vigna, "Scrambled linear pseudorandom number generators", 2018).
struct RefXoshiro256 {
  std::array<uint64_t, 4> s;
  uint64_t next() {
    const uint64_t result = ref_rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = ref_rotl(s[3], 45);
    return result;
  }
};

TEST(SplitMix64, ReferenceImplementationMatchesPublishedOutputs) {
  // First outputs for state 0, as printed by Vigna's reference splitmix64.c (also the test
  // vector of several libraries). This pins the reference written above.
  uint64_t x = 0;
  EXPECT_EQ(ref_splitmix64(x), 0xe220a8397b1dcdafull);
  EXPECT_EQ(ref_splitmix64(x), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(ref_splitmix64(x), 0x06c45d188009454full);
  EXPECT_EQ(ref_splitmix64(x), 0xf88bb8a8724c81ecull);
  EXPECT_EQ(ref_splitmix64(x), 0x1b39896a51a8749bull);
}

TEST(SplitMix64, MatchesTheReferenceForSeveralStates) {
  for (const uint64_t seed :
       {uint64_t{0}, uint64_t{1}, uint64_t{42}, ~uint64_t{0}, uint64_t{0x9e3779b97f4a7c15ull}}) {
    uint64_t ref = seed;
    SplitMix64 sm(seed);
    for (int i = 0; i < 100; ++i)
      ASSERT_EQ(sm.next(), ref_splitmix64(ref)) << "seed " << seed << " output " << i;
  }
  // And the published first outputs directly, for state 0 and state 1.
  SplitMix64 zero(0);
  EXPECT_EQ(zero.next(), 0xe220a8397b1dcdafull);
  uint64_t one_ref = 1;
  SplitMix64 one(1);
  EXPECT_EQ(one.next(), ref_splitmix64(one_ref));
}

TEST(SplitMix64, IsConstexpr) {
  constexpr uint64_t first = [] {
    SplitMix64 sm(0);
    return sm.next();
  }();
  static_assert(first == 0xe220a8397b1dcdafull);
  EXPECT_EQ(first, 0xe220a8397b1dcdafull);
}

TEST(Xoshiro256StarStar, ReferenceImplementationMatchesPublishedOutputs) {
  // State {1, 2, 3, 4}: the test vector used by the rand_xoshiro crate.
  RefXoshiro256 g{{1, 2, 3, 4}};
  const uint64_t expected[] = {11520,
                               0,
                               1509978240,
                               1215971899390074240ull,
                               1216172134540287360ull,
                               607988272756665600ull,
                               16172922978634559625ull,
                               8476171486693032832ull,
                               10595114339597558777ull,
                               2904607092377533576ull};
  for (const uint64_t e : expected)
    EXPECT_EQ(g.next(), e);
}

TEST(RandomStream, IsXoshiro256StarStarSeededBySplitMix64) {
  // RandomStream(key): state words are four SplitMix64 outputs from `key`; outputs follow
  // xoshiro256**.
  for (const uint64_t key : {uint64_t{0}, uint64_t{1}, uint64_t{123456789}}) {
    uint64_t x = key;
    RefXoshiro256 ref{{ref_splitmix64(x), ref_splitmix64(x), ref_splitmix64(x), ref_splitmix64(x)}};
    RandomStream s(key);
    for (int i = 0; i < 1000; ++i)
      ASSERT_EQ(s.next_u64(), ref.next()) << "key " << key << " output " << i;
  }
}

TEST(RandomStream, NamedStreamKeyIsSeedXorFnv1aOfTheName) {
  // FNV-1a 64 published check values: "" -> offset basis, "a" -> 0xaf63dc4c8601ec8c,
  // "foobar" -> 0x85944171f73967e8.
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  RandomStream named(99, "workload/perm");
  RandomStream keyed(99 ^ fnv1a64("workload/perm"));
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(named.next_u64(), keyed.next_u64());
}

// ---- determinism and independence ----

TEST(RandomStream, SameSeedAndNameGiveTheSameSequence) {
  RandomStream a(1, "fabric/qpn/nic17"), b(1, "fabric/qpn/nic17");
  for (int i = 0; i < 10000; ++i)
    ASSERT_EQ(a.next_u64(), b.next_u64());
}

TEST(RandomStream, StreamsDoNotDependOnCreationOrderOrOnOtherStreams) {
  // Sequence of "b" alone ...
  std::vector<uint64_t> alone;
  {
    RandomStream b(5, "b");
    for (int i = 0; i < 100; ++i)
      alone.push_back(b.next_u64());
  }
  // ... equals "b" created after "a" and interleaved with draws from "a".
  RandomStream a(5, "a");
  for (int i = 0; i < 37; ++i)
    (void)a.next_u64();
  RandomStream b(5, "b");
  for (int i = 0; i < 100; ++i) {
    (void)a.next_u64();
    ASSERT_EQ(b.next_u64(), alone[static_cast<size_t>(i)]);
  }
}

/// Fraction of equal bits between two streams over `n` 64-bit draws.
double equal_bit_fraction(RandomStream a, RandomStream b, int n) {
  uint64_t equal = 0;
  for (int i = 0; i < n; ++i)
    equal += static_cast<uint64_t>(64 - __builtin_popcountll(a.next_u64() ^ b.next_u64()));
  return static_cast<double>(equal) / (64.0 * n);
}

/// Pearson correlation of the uniform() draws of two streams.
double correlation(RandomStream a, RandomStream b, int n) {
  double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
  for (int i = 0; i < n; ++i) {
    const double x = a.uniform(), y = b.uniform();
    sa += x;
    sb += y;
    saa += x * x;
    sbb += y * y;
    sab += x * y;
  }
  const double m = n;
  const double cov = sab / m - (sa / m) * (sb / m);
  return cov / std::sqrt((saa / m - (sa / m) * (sa / m)) * (sbb / m - (sb / m) * (sb / m)));
}

TEST(RandomStream, NamedStreamsAreIndependent) {
  // Two independent streams agree on each bit with probability 1/2: over N = 64 * 20000 bits
  // the fraction of equal bits is 0.5 with standard deviation 0.5 / sqrt(N) = 3.9e-4. Allow 6
  // sigma. The Pearson correlation of their uniforms is 0 with s.d. 1/sqrt(n) = 0.007; allow 6
  // sigma. Pairs: different names, same name with neighbouring seeds, names one character apart.
  const int n = 20000;
  const double bit_tol = 6 * 0.5 / std::sqrt(64.0 * n);
  const double corr_tol = 6 / std::sqrt(static_cast<double>(n));
  struct Pair {
    RandomStream a, b;
  };
  const Pair pairs[] = {
      {RandomStream(1, "a"), RandomStream(1, "b")},
      {RandomStream(1, "workload/perm"), RandomStream(2, "workload/perm")},
      {RandomStream(1, "fabric/qpn/nic1"), RandomStream(1, "fabric/qpn/nic2")},
      {RandomStream(0), RandomStream(1)},
  };
  for (const Pair& p : pairs) {
    EXPECT_NEAR(equal_bit_fraction(p.a, p.b, n), 0.5, bit_tol);
    EXPECT_NEAR(correlation(p.a, p.b, n), 0.0, corr_tol);
  }
  // The checks can fail: a stream against itself agrees on every bit.
  EXPECT_DOUBLE_EQ(equal_bit_fraction(RandomStream(1, "a"), RandomStream(1, "a"), 100), 1.0);
}

// ---- bounded draws ----

TEST(RandomStream, BelowStaysInBounds) {
  RandomStream s(3, "test/below");
  EXPECT_EQ(s.below(0), 0u);
  EXPECT_EQ(s.below(1), 0u);
  for (const uint64_t n :
       {uint64_t{2}, uint64_t{3}, uint64_t{7}, uint64_t{10}, uint64_t{1000}, uint64_t{1} << 32,
        (uint64_t{1} << 32) + 1, (uint64_t{1} << 63) + 1, ~uint64_t{0}}) {
    uint64_t most = 0;
    for (int i = 0; i < 20000; ++i) {
      const uint64_t v = s.below(n);
      ASSERT_LT(v, n);
      most = std::max(most, v);
    }
    // The top of the range is reached: for small n exactly, for large n within 0.1% (the largest
    // of 20000 uniforms exceeds 0.999 n with probability 1 - 0.999^20000 = 1 - 2e-9).
    if (n <= 1000) {
      EXPECT_EQ(most, n - 1) << n;
    } else {
      EXPECT_GT(static_cast<double>(most), 0.999 * static_cast<double>(n)) << n;
    }
  }
}

/// Pearson's chi-square statistic of `counts` against equal expected counts.
double chi_square(const std::vector<uint64_t>& counts) {
  uint64_t total = 0;
  for (const uint64_t c : counts)
    total += c;
  const double expected = static_cast<double>(total) / static_cast<double>(counts.size());
  double x2 = 0;
  for (const uint64_t c : counts) {
    const double d = static_cast<double>(c) - expected;
    x2 += d * d / expected;
  }
  return x2;
}

TEST(RandomStream, BelowIsUniform) {
  // 100000 draws of below(10): under uniformity the statistic is chi-square with 9 degrees of
  // freedom (mean 9). The threshold 46 is its 1 - 1e-6 quantile (Wilson-Hilferty), generous
  // enough never to flake, tight enough to catch a real bias: two bins 5.5% above and below
  // their expected 10000 give 2 * 550^2 / 10000 = 60.
  for (const uint64_t seed : {1u, 2u, 3u}) {
    RandomStream s(seed, "test/chi2");
    std::vector<uint64_t> counts(10, 0);
    for (int i = 0; i < 100000; ++i)
      ++counts[s.below(10)];
    EXPECT_LT(chi_square(counts), 46.0) << "seed " << seed;
  }
  // 16 bins (an ECMP group), df = 15: 1 - 1e-6 quantile 57.4.
  RandomStream s(4, "test/chi2-16");
  std::vector<uint64_t> counts(16, 0);
  for (int i = 0; i < 160000; ++i)
    ++counts[s.below(16)];
  EXPECT_LT(chi_square(counts), 57.4);
}

TEST(RandomStream, BelowHasNoModuloBias) {
  // n = 3 * 2^62. With a plain `next_u64() % n`, values below 2^64 - n = 2^62 have two
  // preimages and the rest one: the first third of [0, n) gets probability 1/2 and each other
  // third 1/4. Lemire's method must give 1/3 each. With N = 30000 draws into the three thirds,
  // the statistic under uniformity is chi-square with 2 degrees of freedom; its 1 - 1e-6
  // quantile is -2 ln(1e-6) = 27.6. The biased draw scores about
  // N * ((1/2 - 1/3)^2 + 2 (1/4 - 1/3)^2) / (1/3) = N / 8 = 3750, so the check can tell.
  const uint64_t n = 3ull << 62;
  const uint64_t third = 1ull << 62;
  RandomStream lemire(11, "test/bias"), modulo(11, "test/bias");
  std::vector<uint64_t> good(3, 0), biased(3, 0);
  for (int i = 0; i < 30000; ++i) {
    ++good[lemire.below(n) / third];
    ++biased[(modulo.next_u64() % n) / third];
  }
  EXPECT_LT(chi_square(good), 27.6);
  EXPECT_GT(chi_square(biased), 1000.0);  // the test's own sensitivity
}

TEST(RandomStream, UniformIsInUnitIntervalWithMeanOneHalf) {
  // Mean of n uniforms: 1/2 with s.d. sqrt(1/12 / n) = 0.0013 for n = 50000; allow 6 sigma.
  RandomStream s(8, "test/uniform");
  const int n = 50000;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const double u = s.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 6 * std::sqrt(1.0 / 12.0 / n));
}

}  // namespace
}  // namespace rocesim
