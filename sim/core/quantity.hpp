// Parsing of values with units as they appear in scenario files: "400Gbps", "200Gb/s", "450GB/s",
// "1.5us", "600ns", "5MB", "4MiB". A unit is mandatory: a bare "400" is rejected, because a
// silently assumed unit is the classic source of 8x and 1000x errors. Decimal prefixes (K, M, G,
// T) are powers of 1000, binary prefixes (Ki, Mi, Gi, Ti) powers of 1024. Rates ending in "bps",
// "b/s" or "bit/s" are bits per second; "B/s" is bytes per second.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "sim/core/units.hpp"

namespace rocesim {

/// Thrown by the parsers below; the message says what is wrong with the text ("missing unit",
/// "unknown unit 'Gbs'"). Callers add the file location.
class QuantityError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

Time parse_time(std::string_view text);
Bytes parse_bytes(std::string_view text);
Bandwidth parse_bandwidth(std::string_view text);

/// Units accepted by each parser, for error messages and the scenario reference.
std::string_view time_units_help();
std::string_view bytes_units_help();
std::string_view bandwidth_units_help();

/// Canonical text for a value, accepted back by the parsers ("400Gbps", "1.5us", "4MiB").
std::string to_text(Time t);
std::string to_text(Bytes b);
std::string to_text(Bandwidth b);

}  // namespace rocesim
