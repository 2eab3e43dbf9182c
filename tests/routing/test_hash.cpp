// Switch hash functions against published check values, the header layout they hash, the
// seed-linearity of CRCs that causes hash polarization, and the ECMP member window.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "sim/core/rng.hpp"
#include "sim/routing/hash.hpp"

namespace rocesim::routing {
namespace {

const uint8_t* bytes(const std::string& s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

// ---- published check values ----

TEST(Crc32, CheckValue) {
  // CRC-32 (ISO-HDLC / Ethernet / zlib): check value of "123456789" is 0xCBF43926.
  const std::string check = "123456789";
  EXPECT_EQ(crc32(bytes(check), check.size(), 0), 0xCBF43926u);
  EXPECT_EQ(crc32(nullptr, 0, 0), 0u);
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(crc32(bytes(fox), fox.size(), 0), 0x414FA339u);
}

TEST(Crc32, InitialValueContinuesACrc) {
  // The initial value is a previous CRC (zlib's crc32(crc, buf, len) convention):
  // crc(a || b) = crc(b, init = crc(a)).
  const std::string a = "12345", b = "6789";
  EXPECT_EQ(crc32(bytes(b), b.size(), crc32(bytes(a), a.size(), 0)), 0xCBF43926u);
}

TEST(Crc16Ccitt, CheckValues) {
  // CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection): "123456789" -> 0x29B1.
  // With init 0 the same polynomial is CRC-16/XMODEM: 0x31C3.
  const std::string check = "123456789";
  EXPECT_EQ(crc16_ccitt(bytes(check), check.size(), 0xFFFF), 0x29B1);
  EXPECT_EQ(crc16_ccitt(bytes(check), check.size(), 0x0000), 0x31C3);
}

TEST(Murmur3, PublishedTestVectors) {
  // MurmurHash3_x86_32 vectors (SMHasher's reference implementation, as tabulated in the
  // widely used list of test vectors). Keys of 0-3 and 4+ bytes exercise the tail and block
  // paths; "!Ce\x87" is 0x87654321 read little-endian, as the reference does.
  struct Vector {
    std::string key;
    uint32_t seed;
    uint32_t hash;
  };
  const std::vector<Vector> vectors = {
      {"", 0, 0},
      {"", 1, 0x514E28B7},
      {"", 0xFFFFFFFF, 0x81F16F39},
      {std::string("\xFF\xFF\xFF\xFF", 4), 0, 0x76293B50},
      {std::string("\x21\x43\x65\x87", 4), 0, 0xF55B516B},
      {std::string("\x21\x43\x65\x87", 4), 0x5082EDEE, 0x2362F9DE},
      {std::string("\x21\x43\x65", 3), 0, 0x7E4A8634},
      {std::string("\x21\x43", 2), 0, 0xA0F7B07A},
      {std::string("\x21", 1), 0, 0x72661CF4},
      {std::string("\0\0\0\0", 4), 0, 0x2362F9DE},
      {std::string("\0\0\0", 3), 0, 0x85F0B427},
      {std::string("\0\0", 2), 0, 0x30F4C306},
      {std::string("\0", 1), 0, 0x514E28B7},
      {"aaaa", 0x9747B28C, 0x5A97808A},
      {"aaa", 0x9747B28C, 0x283E0130},
      {"aa", 0x9747B28C, 0x5D211726},
      {"a", 0x9747B28C, 0x7FA09EA6},
      {"abcd", 0x9747B28C, 0xF0478627},
      {"abc", 0x9747B28C, 0xC84A62DD},
      {"ab", 0x9747B28C, 0x74875592},
      {"Hello, world!", 0x9747B28C, 0x24884CBA},
      {"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD},
  };
  for (const Vector& v : vectors) {
    EXPECT_EQ(murmur3_32(bytes(v.key), v.key.size(), v.seed), v.hash)
        << "key of " << v.key.size() << " bytes, seed " << v.seed;
  }
}

// ---- the hashed header ----

fabric::FlowKey sample_key() {
  fabric::FlowKey k;
  k.src_ip = 0x0A000011;  // 10.0.0.17
  k.dst_ip = 0x0A000142;  // 10.0.1.66
  k.src_port = 0xC123;
  k.dst_qpn = 0xABCDEF;
  return k;
}

TEST(HeaderHash, HashesTheFiveTupleInTupleOrder) {
  // Source IP, destination IP, protocol, UDP source port, UDP destination port, big-endian:
  // 13 bytes; E-ECMP appends the 24-bit BTH destination QP: 16 bytes.
  const fabric::FlowKey k = sample_key();
  const uint8_t tuple[] = {0x0A, 0x00, 0x00, 0x11, 0x0A, 0x00, 0x01,
                           0x42, 17,   0xC1, 0x23, 0x12, 0xB7};  // 4791 = 0x12B7
  const uint8_t with_qpn[] = {0x0A, 0x00, 0x00, 0x11, 0x0A, 0x00, 0x01, 0x42,
                              17,   0xC1, 0x23, 0x12, 0xB7, 0xAB, 0xCD, 0xEF};
  const uint32_t seed = 0x1234ABCD;
  EXPECT_EQ(header_hash(HashAlgorithm::Crc32, seed, k, false), crc32(tuple, 13, seed));
  EXPECT_EQ(header_hash(HashAlgorithm::Crc32, seed, k, true), crc32(with_qpn, 16, seed));
  EXPECT_EQ(header_hash(HashAlgorithm::Crc16Ccitt, seed, k, false),
            crc16_ccitt(tuple, 13, static_cast<uint16_t>(seed)));
  EXPECT_EQ(header_hash(HashAlgorithm::Murmur3, seed, k, false), murmur3_32(tuple, 13, seed));
  EXPECT_EQ(header_hash(HashAlgorithm::Murmur3, seed, k, true), murmur3_32(with_qpn, 16, seed));
}

TEST(HeaderHash, DestinationQpCountsOnlyForEnhancedEcmp) {
  fabric::FlowKey a = sample_key(), b = sample_key();
  b.dst_qpn = a.dst_qpn + 1;
  for (const HashAlgorithm h :
       {HashAlgorithm::Crc32, HashAlgorithm::Crc16Ccitt, HashAlgorithm::Murmur3}) {
    EXPECT_EQ(header_hash(h, 7, a, false), header_hash(h, 7, b, false));
    EXPECT_NE(header_hash(h, 7, a, true), header_hash(h, 7, b, true));
  }
}

TEST(HeaderHash, CrcSeedsOnlyXorAConstant) {
  // CRCs are affine over GF(2): for messages of one length, crc(m, s1) ^ crc(m, s2) does not
  // depend on m. Two switches with different seeds therefore make correlated choices when they
  // look at the same bits (hash polarization, hash.hpp). Murmur3 is not affine.
  RandomStream rng(3, "test/affine");
  const uint32_t s1 = 0x11111111, s2 = 0x9E3779B9;
  const fabric::FlowKey base = sample_key();
  const uint32_t crc_delta = header_hash(HashAlgorithm::Crc32, s1, base, false) ^
                             header_hash(HashAlgorithm::Crc32, s2, base, false);
  const uint32_t crc16_delta = header_hash(HashAlgorithm::Crc16Ccitt, s1, base, false) ^
                               header_hash(HashAlgorithm::Crc16Ccitt, s2, base, false);
  const uint32_t murmur_delta = header_hash(HashAlgorithm::Murmur3, s1, base, false) ^
                                header_hash(HashAlgorithm::Murmur3, s2, base, false);
  int murmur_same = 0;
  for (int i = 0; i < 200; ++i) {
    fabric::FlowKey k;
    k.src_ip = static_cast<uint32_t>(rng.next_u64());
    k.dst_ip = static_cast<uint32_t>(rng.next_u64());
    k.src_port = static_cast<uint16_t>(49152 + rng.below(16384));
    EXPECT_EQ(header_hash(HashAlgorithm::Crc32, s1, k, false) ^
                  header_hash(HashAlgorithm::Crc32, s2, k, false),
              crc_delta);
    EXPECT_EQ(header_hash(HashAlgorithm::Crc16Ccitt, s1, k, false) ^
                  header_hash(HashAlgorithm::Crc16Ccitt, s2, k, false),
              crc16_delta);
    murmur_same += (header_hash(HashAlgorithm::Murmur3, s1, k, false) ^
                    header_hash(HashAlgorithm::Murmur3, s2, k, false)) == murmur_delta;
  }
  EXPECT_LE(murmur_same, 1);
}

TEST(HeaderHash, SourcePortSpreadsFlowsEvenlyOverEightMembers) {
  // One NIC pair, every source port of the dynamic range: 16384 flows into 8 members. Under a
  // uniform hash the counts are multinomial; chi-square with 7 degrees of freedom, threshold
  // 50 (its 1 - 1e-6 quantile is about 42; a CRC on consecutive ports is in fact far more even).
  for (const HashAlgorithm h :
       {HashAlgorithm::Crc32, HashAlgorithm::Crc16Ccitt, HashAlgorithm::Murmur3}) {
    std::vector<double> counts(8, 0);
    fabric::FlowKey k = sample_key();
    for (uint32_t p = 49152; p <= 65535; ++p) {
      k.src_port = static_cast<uint16_t>(p);
      counts[ecmp_member(header_hash(h, 99, k, false), 0, 8)] += 1;
    }
    double x2 = 0;
    for (const double c : counts)
      x2 += (c - 2048) * (c - 2048) / 2048;
    EXPECT_LT(x2, 50.0) << hash_algorithm_name(h);
  }
}

// ---- ECMP member selection ----

TEST(EcmpMember, SixteenBitWindowAtAnOffsetModuloMembers) {
  const uint32_t h = 0xABCD1234;
  EXPECT_EQ(ecmp_member(h, 0, 16), 0x1234u % 16);   // 4
  EXPECT_EQ(ecmp_member(h, 16, 16), 0xABCDu % 16);  // 13
  EXPECT_EQ(ecmp_member(h, 8, 16), 0xCD12u % 16);   // 2
  EXPECT_EQ(ecmp_member(h, 4, 16), 0xD123u % 16);   // 3
  EXPECT_EQ(ecmp_member(h, 0, 3), 4660u % 3);       // 1
  EXPECT_EQ(ecmp_member(h, 16, 1000), 0xABCDu % 1000);
  EXPECT_EQ(ecmp_member(h, 0, 1), 0u);
  // Only 16 bits take part: bit 16 is outside the window at offset 0.
  EXPECT_EQ(ecmp_member(0x00010000u, 0, 7), 0u);
  EXPECT_EQ(ecmp_member(0x00010000u, 1, 7), 0x8000u % 7);
  EXPECT_EQ(ecmp_member(0xFFFF0000u, 0, 5), 0u);
  EXPECT_EQ(ecmp_member(0xFFFF0000u, 16, 5), 0xFFFFu % 5);
}

TEST(EcmpMember, DisjointWindowsAreIndependent) {
  // Offsets 0 and 16 read disjoint bits: for random hashes, the pair (member at 0, member at
  // 16) is uniform over 8 x 8 = 64 cells. 64000 draws, chi-square with 63 degrees of freedom:
  // threshold 132, its 1 - 1e-6 quantile (Wilson-Hilferty).
  RandomStream rng(1, "test/windows");
  std::vector<double> cells(64, 0);
  for (int i = 0; i < 64000; ++i) {
    const auto h = static_cast<uint32_t>(rng.next_u64());
    cells[ecmp_member(h, 0, 8) * 8 + ecmp_member(h, 16, 8)] += 1;
  }
  double x2 = 0;
  for (const double c : cells)
    x2 += (c - 1000) * (c - 1000) / 1000;
  EXPECT_LT(x2, 132.0);
  // The same statistic for one window read twice (offsets 0 and 0) puts everything on the 8
  // diagonal cells: 8 * 7000^2 / 1000 + 56 * 1000 = 448000. The check can tell.
  std::vector<double> same(64, 0);
  for (int i = 0; i < 64000; ++i) {
    const auto h = static_cast<uint32_t>(rng.next_u64());
    same[ecmp_member(h, 0, 8) * 8 + ecmp_member(h, 0, 8)] += 1;
  }
  double x2_same = 0;
  for (const double c : same)
    x2_same += (c - 1000) * (c - 1000) / 1000;
  EXPECT_GT(x2_same, 100000.0);
}

TEST(HashAlgorithm, NamesRoundTrip) {
  for (const HashAlgorithm h :
       {HashAlgorithm::Crc32, HashAlgorithm::Crc16Ccitt, HashAlgorithm::Murmur3}) {
    EXPECT_EQ(parse_hash_algorithm(hash_algorithm_name(h)), h);
  }
  EXPECT_EQ(hash_algorithm_name(HashAlgorithm::Crc16Ccitt), "crc16-ccitt");
}

}  // namespace
}  // namespace rocesim::routing
