// Switch-style header hashes for ECMP (MODELS.md 3.1-3.2).
//
// Switch ASICs hash selected header fields with a CRC and a per-switch seed, take a 16-bit window
// of the result (the "hash offset") and index the ECMP group with it. CRCs are affine over GF(2):
// changing the seed only XORs a constant into the result, so two switches that use the same
// window of the same CRC make correlated choices (hash polarization) however their seeds differ.
// Operators avoid it by using different windows (or functions) per tier; rocesim does the same
// by default (see EcmpConfig), and its tests show the polarization when that is turned off.
// Murmur3 (what HPCC's ns-3 uses) is non-linear and decorrelates by seed alone.
#pragma once

#include <cstdint>
#include <string_view>

#include "sim/fabric/roce.hpp"

namespace rocesim::routing {

enum class HashAlgorithm : uint8_t {
  Crc16Ccitt,  // CRC-16/CCITT-FALSE polynomial 0x1021, seed as initial value (FBOSS default)
  Crc32,       // CRC-32 (Ethernet, reflected 0xEDB88320), seed as initial value
  Murmur3,     // MurmurHash3 x86_32 with the seed (HPCC ns-3 EcmpHash)
};

HashAlgorithm parse_hash_algorithm(std::string_view s);
std::string_view hash_algorithm_name(HashAlgorithm a);

/// Hash of the RoCEv2 header: source IP, destination IP, protocol, UDP source and destination
/// port (the 5-tuple, in that order), plus the BTH destination QP when `with_dst_qpn` (E-ECMP).
uint32_t header_hash(HashAlgorithm algo, uint32_t seed, const fabric::FlowKey& key,
                     bool with_dst_qpn);

/// Raw hashes over bytes, exposed for tests against published check values.
uint16_t crc16_ccitt(const uint8_t* data, size_t n, uint16_t init);
uint32_t crc32(const uint8_t* data, size_t n, uint32_t init);
uint32_t murmur3_32(const uint8_t* data, size_t n, uint32_t seed);

/// ECMP member from a hash: a 16-bit window at `offset` bits, modulo the group size.
inline uint32_t ecmp_member(uint32_t hash, unsigned offset, uint32_t members) {
  return ((hash >> offset) & 0xFFFFu) % members;
}

}  // namespace rocesim::routing
