// Listing one RDMA device: what `ibv_devinfo -v` and `show_gids` print, as a report entry.
//
// Verbs flow: ibv_open_device() -> ibv_query_device() (firmware, vendor, limits, port count) ->
// per port ibv_query_port() (state, link layer, speed and width codes, MTUs, LIDs, GID table
// size) -> the GID table: ibv_query_gid_table() where the installed rdma-core has it (every valid
// entry with its type, RoCE v1 or v2, and its network interface), else ibv_query_gid() per index
// with the type and interface from sysfs (/sys/class/infiniband/DEV/ports/P/gid_attrs/). The
// PCI address and NUMA node come from sysfs. The context is closed on return.
#pragma once

#include <infiniband/verbs.h>

#include "calibrate/lib/nicprobe_report.hpp"

namespace rocesim::nicprobe {

/// The device's entry of the report. Throws DeviceError (verbs.hpp) when a verbs call fails.
calibrate::NicProbeDevice probe_device(ibv_device* device);

}  // namespace rocesim::nicprobe
