#include "sim/routing/hash.hpp"

#include <array>
#include <cstring>

namespace rocesim::routing {
namespace {

constexpr std::array<uint16_t, 256> make_crc16_table() {
  std::array<uint16_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint16_t c = static_cast<uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b) {
      c = static_cast<uint16_t>((c & 0x8000) ? (c << 1) ^ 0x1021 : c << 1);
    }
    t[i] = c;
  }
  return t;
}

constexpr std::array<uint32_t, 256> make_crc32_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int b = 0; b < 8; ++b)
      c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    t[i] = c;
  }
  return t;
}

constexpr auto kCrc16Table = make_crc16_table();
constexpr auto kCrc32Table = make_crc32_table();

constexpr uint32_t rotl32(uint32_t x, int r) {
  return (x << r) | (x >> (32 - r));
}

}  // namespace

uint16_t crc16_ccitt(const uint8_t* data, size_t n, uint16_t init) {
  uint16_t crc = init;
  for (size_t i = 0; i < n; ++i) {
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ data[i]) & 0xFF]);
  }
  return crc;
}

uint32_t crc32(const uint8_t* data, size_t n, uint32_t init) {
  uint32_t crc = ~init;
  for (size_t i = 0; i < n; ++i)
    crc = (crc >> 8) ^ kCrc32Table[(crc ^ data[i]) & 0xFF];
  return ~crc;
}

uint32_t murmur3_32(const uint8_t* data, size_t n, uint32_t seed) {
  constexpr uint32_t c1 = 0xcc9e2d51;
  constexpr uint32_t c2 = 0x1b873593;
  uint32_t h = seed;
  const size_t blocks = n / 4;
  for (size_t i = 0; i < blocks; ++i) {
    uint32_t k;
    std::memcpy(&k, data + 4 * i, 4);
    k *= c1;
    k = rotl32(k, 15);
    k *= c2;
    h ^= k;
    h = rotl32(h, 13);
    h = h * 5 + 0xe6546b64;
  }
  uint32_t k = 0;
  const uint8_t* tail = data + 4 * blocks;
  switch (n & 3) {
    case 3:
      k ^= static_cast<uint32_t>(tail[2]) << 16;
      [[fallthrough]];
    case 2:
      k ^= static_cast<uint32_t>(tail[1]) << 8;
      [[fallthrough]];
    case 1:
      k ^= tail[0];
      k *= c1;
      k = rotl32(k, 15);
      k *= c2;
      h ^= k;
  }
  h ^= static_cast<uint32_t>(n);
  h ^= h >> 16;
  h *= 0x85ebca6b;
  h ^= h >> 13;
  h *= 0xc2b2ae35;
  h ^= h >> 16;
  return h;
}

uint32_t header_hash(HashAlgorithm algo, uint32_t seed, const fabric::FlowKey& key,
                     bool with_dst_qpn) {
  // The 5-tuple in its usual order (sip, dip, proto, sport, dport), network byte order.
  uint8_t b[16];
  size_t n = 0;
  auto put32 = [&](uint32_t v) {
    b[n++] = static_cast<uint8_t>(v >> 24);
    b[n++] = static_cast<uint8_t>(v >> 16);
    b[n++] = static_cast<uint8_t>(v >> 8);
    b[n++] = static_cast<uint8_t>(v);
  };
  put32(key.src_ip);
  put32(key.dst_ip);
  b[n++] = key.protocol;
  b[n++] = static_cast<uint8_t>(key.src_port >> 8);
  b[n++] = static_cast<uint8_t>(key.src_port);
  b[n++] = static_cast<uint8_t>(key.dst_port >> 8);
  b[n++] = static_cast<uint8_t>(key.dst_port);
  if (with_dst_qpn) {
    b[n++] = static_cast<uint8_t>(key.dst_qpn >> 16);
    b[n++] = static_cast<uint8_t>(key.dst_qpn >> 8);
    b[n++] = static_cast<uint8_t>(key.dst_qpn);
  }
  switch (algo) {
    case HashAlgorithm::Crc16Ccitt:
      return crc16_ccitt(b, n, static_cast<uint16_t>(seed));
    case HashAlgorithm::Crc32:
      return crc32(b, n, seed);
    case HashAlgorithm::Murmur3:
      return murmur3_32(b, n, seed);
  }
  return 0;
}

HashAlgorithm parse_hash_algorithm(std::string_view s) {
  if (s == "crc16-ccitt") return HashAlgorithm::Crc16Ccitt;
  if (s == "murmur3") return HashAlgorithm::Murmur3;
  return HashAlgorithm::Crc32;
}

std::string_view hash_algorithm_name(HashAlgorithm a) {
  switch (a) {
    case HashAlgorithm::Crc16Ccitt:
      return "crc16-ccitt";
    case HashAlgorithm::Crc32:
      return "crc32";
    case HashAlgorithm::Murmur3:
      return "murmur3";
  }
  return "?";
}

}  // namespace rocesim::routing
