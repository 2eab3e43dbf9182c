// What a scenario may ask of this machine's memory: estimates made before building, against
// what the machine has available, so that a scenario too large is refused at once with its
// estimate instead of ending in std::bad_alloc or the kernel's OOM killer minutes later.
#pragma once

#include <cstdint>
#include <string>

namespace rocesim {

/// Bytes this machine can still give the process: MemAvailable of /proc/meminfo (physical
/// memory where that is not readable), or ROCESIM_MEMORY_LIMIT (bytes) when it is set and
/// smaller.
uint64_t available_memory_bytes();

/// "about 12.3 GiB" for messages.
std::string format_memory(double bytes);

}  // namespace rocesim
