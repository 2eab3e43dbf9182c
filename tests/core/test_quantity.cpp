// Values with units as written in scenarios: parsing, rejection of unit-less or ill-formed text,
// and the canonical text form that must parse back to the same value.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/quantity.hpp"
#include "sim/core/rng.hpp"

namespace rocesim {
namespace {

// ---- accepted forms ----

TEST(ParseBandwidth, BitsPerSecondWithDecimalPrefixes) {
  EXPECT_EQ(parse_bandwidth("400Gbps").bits_per_second(), 400'000'000'000);
  EXPECT_EQ(parse_bandwidth("200Gb/s").bits_per_second(), 200'000'000'000);
  EXPECT_EQ(parse_bandwidth("100Gbit/s").bits_per_second(), 100'000'000'000);
  EXPECT_EQ(parse_bandwidth("1.6Tbps").bits_per_second(), 1'600'000'000'000);
  EXPECT_EQ(parse_bandwidth("25Mbps").bits_per_second(), 25'000'000);
  EXPECT_EQ(parse_bandwidth("10Kbps").bits_per_second(), 10'000);
  EXPECT_EQ(parse_bandwidth("8bps").bits_per_second(), 8);
}

TEST(ParseBandwidth, BytesPerSecondAreEightBitsEach) {
  // NVLink 4: 450 GB/s = 450e9 bytes/s * 8 = 3.6e12 bit/s.
  EXPECT_EQ(parse_bandwidth("450GB/s").bits_per_second(), 3'600'000'000'000);
  EXPECT_EQ(parse_bandwidth("50GB/s").bits_per_second(), 400'000'000'000);
  EXPECT_EQ(parse_bandwidth("1B/s").bits_per_second(), 8);
  // Binary prefixes are powers of 1024: 1 GiB/s = 2^30 * 8 bit/s.
  EXPECT_EQ(parse_bandwidth("1GiB/s").bits_per_second(), (int64_t{1} << 30) * 8);
  // The bit and byte forms of one rate agree.
  EXPECT_EQ(parse_bandwidth("50GB/s"), parse_bandwidth("400Gbps"));
}

TEST(ParseTime, UnitsArePicosecondMultiples) {
  EXPECT_EQ(parse_time("1.5us").count_ps(), 1'500'000);
  EXPECT_EQ(parse_time("600ns").count_ps(), 600'000);
  EXPECT_EQ(parse_time("7ps").count_ps(), 7);
  EXPECT_EQ(parse_time("2ms").count_ps(), 2'000'000'000);
  EXPECT_EQ(parse_time("1s").count_ps(), 1'000'000'000'000);
  EXPECT_EQ(parse_time("0.1us").count_ps(), 100'000);  // 0.1 is inexact in binary; rounded
  EXPECT_EQ(parse_time("0s").count_ps(), 0);
  EXPECT_EQ(parse_time("1e3ns").count_ps(), 1'000'000);         // exponent notation
  EXPECT_EQ(parse_time("1.5\xC2\xB5s").count_ps(), 1'500'000);  // micro sign
  EXPECT_EQ(parse_time("1.5\xCE\xBCs").count_ps(), 1'500'000);  // Greek mu
}

TEST(ParseBytes, DecimalAndBinaryPrefixes) {
  EXPECT_EQ(parse_bytes("5MB").count(), 5'000'000);
  EXPECT_EQ(parse_bytes("4MiB").count(), 4 * 1024 * 1024);
  EXPECT_EQ(parse_bytes("1KiB").count(), 1024);
  EXPECT_EQ(parse_bytes("1KB").count(), 1000);
  EXPECT_EQ(parse_bytes("1kB").count(), 1000);
  EXPECT_EQ(parse_bytes("8GB").count(), 8'000'000'000);
  EXPECT_EQ(parse_bytes("2GiB").count(), int64_t{2} << 30);
  EXPECT_EQ(parse_bytes("1TiB").count(), int64_t{1} << 40);
  EXPECT_EQ(parse_bytes("1.5KB").count(), 1500);  // fractional mantissa, whole bytes
  EXPECT_EQ(parse_bytes("0.5KiB").count(), 512);
  EXPECT_EQ(parse_bytes("12B").count(), 12);
}

TEST(ParseQuantity, SurroundingAndInnerBlanksAndPlusSign) {
  EXPECT_EQ(parse_bandwidth("  400 Gbps ").bits_per_second(), 400'000'000'000);
  EXPECT_EQ(parse_bytes("\t4 MiB").count(), 4 * 1024 * 1024);
  EXPECT_EQ(parse_time("+3us").count_ps(), 3'000'000);
}

// ---- rejected forms ----

std::string time_error(const std::string& text) {
  try {
    (void)parse_time(text);
  } catch (const QuantityError& e) {
    return e.what();
  }
  return "<accepted>";
}

std::string bytes_error(const std::string& text) {
  try {
    (void)parse_bytes(text);
  } catch (const QuantityError& e) {
    return e.what();
  }
  return "<accepted>";
}

std::string bandwidth_error(const std::string& text) {
  try {
    (void)parse_bandwidth(text);
  } catch (const QuantityError& e) {
    return e.what();
  }
  return "<accepted>";
}

TEST(ParseQuantity, MissingUnitIsRejectedAndListsTheUnits) {
  // A bare number is the classic 8x / 1000x mistake: never assume a unit.
  const std::string bw = bandwidth_error("400");
  EXPECT_NE(bw.find("no unit"), std::string::npos) << bw;
  EXPECT_NE(bw.find("Gbps"), std::string::npos) << bw;
  const std::string t = time_error("1.5");
  EXPECT_NE(t.find("no unit"), std::string::npos) << t;
  EXPECT_NE(t.find("us"), std::string::npos) << t;
  const std::string b = bytes_error("4096");
  EXPECT_NE(b.find("no unit"), std::string::npos) << b;
  EXPECT_NE(b.find("MiB"), std::string::npos) << b;
}

TEST(ParseQuantity, UnknownUnitIsRejectedAndNamed) {
  const std::string bw = bandwidth_error("400Gbs");
  EXPECT_NE(bw.find("unknown unit 'Gbs'"), std::string::npos) << bw;
  // Units are case-sensitive: "mb" could be millibits or megabytes; neither is guessed.
  EXPECT_NE(bytes_error("5mb").find("unknown unit 'mb'"), std::string::npos);
  EXPECT_NE(bandwidth_error("400gbps").find("unknown unit"), std::string::npos);
  EXPECT_NE(time_error("3sec").find("unknown unit 'sec'"), std::string::npos);
  // A unit of the wrong kind is unknown to that parser.
  EXPECT_NE(time_error("5MB").find("unknown unit 'MB'"), std::string::npos);
  EXPECT_NE(bytes_error("5us").find("unknown unit 'us'"), std::string::npos);
  EXPECT_NE(bandwidth_error("5MB").find("unknown unit 'MB'"), std::string::npos);
}

TEST(ParseQuantity, NonWholeBaseUnitsAreRejected) {
  // Byte counts, picoseconds and bits per second are integers.
  const std::string b = bytes_error("1.5B");
  EXPECT_NE(b.find("not a whole number of bytes"), std::string::npos) << b;
  EXPECT_NE(bytes_error("0.3KiB").find("not a whole number"), std::string::npos);
  EXPECT_NE(time_error("0.5ps").find("not a whole number of picoseconds"), std::string::npos);
  EXPECT_NE(bandwidth_error("1.5bps").find("not a whole number"), std::string::npos);
}

TEST(ParseQuantity, GarbageIsRejected) {
  for (const char* text : {"", "   ", "abc", "Gbps", "--5us", "5 4us", "400Gbps400", "0x10MB",
                           "inf Gbps", "nanus", "1.2.3us"}) {
    EXPECT_THROW((void)parse_bandwidth(text), QuantityError) << "'" << text << "'";
    EXPECT_THROW((void)parse_time(text), QuantityError) << "'" << text << "'";
    EXPECT_THROW((void)parse_bytes(text), QuantityError) << "'" << text << "'";
  }
}

TEST(ParseQuantity, ErrorsAreInvalidArgument) {
  // Callers that only know std::invalid_argument still catch them.
  EXPECT_THROW((void)parse_bytes("1.5B"), std::invalid_argument);
}

// ---- canonical text ----

TEST(ToText, PicksTheLargestExactUnit) {
  EXPECT_EQ(to_text(Bandwidth::gbps(400)), "400Gbps");
  EXPECT_EQ(to_text(parse_bandwidth("450GB/s")), "3600Gbps");
  EXPECT_EQ(to_text(Bandwidth::bps(1'600'000'000'000)), "1600Gbps");
  EXPECT_EQ(to_text(Bandwidth::bps(2'000'000'000'000)), "2Tbps");
  EXPECT_EQ(to_text(Bandwidth::bps(12)), "12bps");
  EXPECT_EQ(to_text(Bytes(4 * 1024 * 1024)), "4MiB");
  EXPECT_EQ(to_text(Bytes(5'000'000)), "5MB");
  EXPECT_EQ(to_text(Bytes(1536)), "1536B");
  EXPECT_EQ(to_text(Bytes(0)), "0B");
  EXPECT_EQ(to_text(Time::us(3)), "3us");
  EXPECT_EQ(to_text(Time::ns(600)), "600ns");
  EXPECT_EQ(to_text(Time::ps(0)), "0ps");
  EXPECT_EQ(to_text(Time::seconds(2)), "2s");
}

TEST(ToText, RoundTripsHandPickedValues) {
  // A large time with sub-nanosecond digits: 4492.08262696251 s scaled back by 1e12 in double
  // arithmetic would land one picosecond off, so the exact count is written instead.
  EXPECT_EQ(parse_time(to_text(Time::ps(4'492'082'626'962'510))), Time::ps(4'492'082'626'962'510));
  EXPECT_EQ(to_text(Time::ps(1'234'567)), "1.234567us");
  for (const char* s : {"1.5us", "600ns", "1ps", "1234567ps", "1.000000001s", "999999ms"}) {
    const Time t = parse_time(s);
    EXPECT_EQ(parse_time(to_text(t)), t) << s << " -> " << to_text(t);
  }
  for (const char* s : {"5MB", "4MiB", "1B", "1023B", "1.5KB", "3GiB", "7TiB", "123456789B"}) {
    const Bytes b = parse_bytes(s);
    EXPECT_EQ(parse_bytes(to_text(b)), b) << s << " -> " << to_text(b);
  }
  for (const char* s : {"400Gbps", "200Gb/s", "450GB/s", "1bps", "12345bps", "1.6Tbps"}) {
    const Bandwidth b = parse_bandwidth(s);
    EXPECT_EQ(parse_bandwidth(to_text(b)), b) << s << " -> " << to_text(b);
  }
}

TEST(ToText, RoundTripsRandomValues) {
  // Values up to 2^52, where every integer is exact in a double (the parsers read the number as
  // a double before scaling it to the integer base unit).
  RandomStream rng(7, "test/quantity");
  for (int i = 0; i < 20000; ++i) {
    const int bits = 1 + static_cast<int>(rng.below(52));
    const auto v = static_cast<int64_t>(rng.below(uint64_t{1} << bits));
    const Time t = Time::ps(v);
    ASSERT_EQ(parse_time(to_text(t)), t) << to_text(t);
    const Bytes b(v);
    ASSERT_EQ(parse_bytes(to_text(b)), b) << to_text(b);
    const Bandwidth bw = Bandwidth::bps(v);
    ASSERT_EQ(parse_bandwidth(to_text(bw)), bw) << to_text(bw);
  }
}

TEST(UnitsHelp, ListsTheAcceptedUnits) {
  EXPECT_NE(time_units_help().find("us"), std::string_view::npos);
  EXPECT_NE(bytes_units_help().find("MiB"), std::string_view::npos);
  EXPECT_NE(bandwidth_units_help().find("B/s"), std::string_view::npos);
  EXPECT_NE(bandwidth_units_help().find("Gbps"), std::string_view::npos);
}

}  // namespace
}  // namespace rocesim
