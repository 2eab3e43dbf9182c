// The hidden ground truth of the stand-in cluster (README.md here), as the stand-ins read it
// from the environment: the stand-in NCCL (standin_nccl.cpp) times collectives on it, the
// stand-in RDMA device of rocesim-nicprobe (../nicprobe/fake_verbs.cpp) takes its NIC from it.
//
//   ROCESIM_STANDIN_SCENARIO=FILE   the cluster: a rocesim scenario
//   ROCESIM_STANDIN_TRUTH=K=V;...   parameter values applied over it, as `--set K=V` (the truth)
//   ROCESIM_STANDIN_NOISE=S         standard deviation of the log-normal noise (default 0)
//   ROCESIM_STANDIN_SEED=N          seed of the noise (default 1)
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sim/scenario/calibration.hpp"
#include "sim/scenario/scenario.hpp"

namespace rocesim::standin {

/// The hidden parameter values, as scenario overrides.
inline scenario::Overrides truth() {
  scenario::Overrides o;
  const char* v = std::getenv("ROCESIM_STANDIN_TRUTH");
  const std::string text = v != nullptr ? v : "";
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find(';', start), text.size());
    if (end > start) {
      o.parameters.push_back(
          scenario::parse_override(text.substr(start, end - start), "ROCESIM_STANDIN_TRUTH"));
    }
    start = end + 1;
  }
  return o;
}

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// exp(S z_k): the noise factor of event k (an operation, a message), with S and the seed from
/// the environment; z_k ~ N(0, 1) depends only on the seed and k.
inline double noise_factor(uint64_t k) {
  const char* s = std::getenv("ROCESIM_STANDIN_NOISE");
  const double sigma = s != nullptr ? std::atof(s) : 0.0;
  if (sigma <= 0) return 1.0;
  const char* seed_text = std::getenv("ROCESIM_STANDIN_SEED");
  const uint64_t seed = seed_text != nullptr ? std::strtoull(seed_text, nullptr, 10) : 1;
  const uint64_t a = splitmix64(seed ^ splitmix64(k));
  const uint64_t b = splitmix64(a);
  // Box-Muller on two uniforms in (0, 1].
  const double u1 = (static_cast<double>(a >> 11) + 1.0) * 0x1.0p-53;
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  return std::exp(sigma * z);
}

}  // namespace rocesim::standin
