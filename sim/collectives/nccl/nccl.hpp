// NCCL's vocabulary and knobs. The collectives, algorithms and protocols NCCL runs, and the
// parameters that steer them, named after NCCL's own environment variables (NCCL_ALGO,
// NCCL_PROTO, NCCL_MIN_NCHANNELS, NCCL_IB_QPS_PER_CONNECTION, NCCL_BUFFSIZE, ...) so that a
// user can paste a job's settings into a scenario. They are read from the scenario's `nccl:`
// section, and a workload's own `nccl:` section overrides them key by key.
//
// Beside NCCL's variables sit the model's own calibratable parameters (lower case):
// `launch_latency`, `base_latency_factor`, `hop_latency_factor`, `credit_latency`,
// `proxy_post_latency` and `tuning_tables` (the pinned NCCL release whose tuning constants are
// used; see tuning.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "sim/core/params.hpp"
#include "sim/core/units.hpp"
#include "sim/fabric/fabric.hpp"

namespace rocesim::collectives::nccl {

enum class Collective : uint8_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Reduce,
  AllToAll,
  AllToAllv,
  Gather,
  Scatter,
  SendRecv,
};
// The order of NCCL's tables. CollNet reduces in the switches (SHARP): Direct scatters each
// node's data to its NIC GPUs ("heads") over NVLink, Chain runs a chain to one leader. NVLS
// reduces inside the NVSwitch (multimem, one node); NVLSTree does that inside each node and
// runs a tree between nodes; PAT (NCCL 2.23 on) runs AllGather and ReduceScatter over a
// logarithmic number of peers when every server holds one rank. MSCCL is RCCL's: a schedule of
// its own that it runs before consulting its tuner (msccl.hpp), never chosen by the tuning
// model.
enum class Algorithm : uint8_t {
  Tree,
  Ring,
  CollNetDirect,
  CollNetChain,
  Nvls,
  NvlsTree,
  Pat,
  Msccl
};
inline constexpr int kAlgorithms = 8;
/// Either CollNet algorithm.
inline bool is_collnet(Algorithm a) {
  return a == Algorithm::CollNetDirect || a == Algorithm::CollNetChain;
}
/// Whether an algorithm reduces in the network's switches on `nnodes` nodes: CollNet, and NVLS
/// across nodes (NVLink SHARP inside the nodes, CollNet between them).
inline bool reduces_in_network(Algorithm a, int nnodes) {
  return nnodes > 1 && (is_collnet(a) || a == Algorithm::Nvls);
}
/// The algorithms NCCL_ALGO names and the tuner chooses among: all but MSCCL.
inline constexpr uint8_t kTunerAlgorithms =
    ((1u << kAlgorithms) - 1) & ~(1u << static_cast<int>(Algorithm::Msccl));
inline constexpr int kCollectives = 10;
enum class Protocol : uint8_t { LL, LL128, Simple };  // idem

std::string_view collective_name(Collective c);
std::string_view algorithm_name(Algorithm a);
std::string_view protocol_name(Protocol p);
/// How an operation of `bytes` ran, as tables print it: "p2p" for the point-to-point
/// collectives, "none" for another collective of no elements (NCCL returns before it makes a
/// task), "copy" for one on one rank (NCCL's one-rank path runs no algorithm), else the
/// algorithm's name.
std::string_view path_name(Collective c, int nranks, Algorithm a, int64_t bytes);
/// NCCL does nothing for a collective of no elements (enqueue.cc, taskAppend: "if (info->count
/// == 0 && info->coll != ncclFuncSend && info->coll != ncclFuncRecv) return ncclSuccess"): no
/// tuner, no kernel, no copy on one rank. Point-to-point operations of 0 bytes still run.
bool is_noop(Collective c, int64_t bytes);
/// The protocol as tables print it: "none" where path_name says "none", else its name.
std::string_view path_protocol_name(Collective c, Protocol p, int64_t bytes);
std::optional<Collective> parse_collective(std::string_view s);

/// The algorithms (bit 1 << Algorithm) or protocols (bit 1 << Protocol) NCCL may use, per
/// collective, as NCCL_ALGO and NCCL_PROTO give them.
using NcclMask = std::array<uint8_t, kCollectives>;
/// Parses NCCL_ALGO or NCCL_PROTO as NCCL does (src/enqueue.cc, parseList): a comma-separated
/// list of names, any case; a leading '^' excludes the names instead; "func:list" entries
/// separated by ';' apply per collective ("allreduce:tree,ring;allgather:ring"). Algorithm
/// names: Ring, Tree, CollNet (both), CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT. Returns the
/// unknown name on failure via `bad`.
std::optional<NcclMask> parse_nccl_list(std::string_view text, bool algorithms, std::string& bad);
/// NCCL_DEBUG as NCCL reads it: INFO or TRACE log (case-insensitive).
bool nccl_debug_info(std::string_view level);
/// Whether NCCL_DEBUG_SUBSYS's comma-separated `list` logs subsystem `name` (or ALL); a leading
/// '^' logs every subsystem but those listed. NCCL's default list is INIT,BOOTSTRAP,ENV.
bool nccl_debug_subsys(std::string_view list, std::string_view name);

/// True for collectives NCCL implements as point-to-point sends (no ring or tree).
inline bool is_p2p(Collective c) {
  return c == Collective::AllToAll || c == Collective::AllToAllv || c == Collective::Gather ||
         c == Collective::Scatter || c == Collective::SendRecv;
}

/// NCCL's protocols: how a byte of data is carried and how fine-grained the pipeline is.
struct ProtocolTraits {
  double efficiency;  // data bytes per wire byte: LL 8/16, LL128 120/128, Simple 1
  double line_bytes;  // data per synchronisation unit: the granularity of forwarding
  bool slices;        // forwards per slice of steps (Simple) rather than per line
};
/// `rccl`: RCCL's LL128 lines are 64 bytes with 56 of data (ROCm/rccl src/include/device.h).
ProtocolTraits protocol_traits(Protocol p, bool rccl = false);

inline constexpr int kNcclSteps = 8;     // NCCL_STEPS: buffer slots per connection
inline constexpr int kMaxChannels = 32;  // MAXCHANNELS

constexpr NcclMask all_algorithms() {
  NcclMask m{};
  for (uint8_t& x : m)
    x = kTunerAlgorithms;
  return m;
}
constexpr NcclMask all_protocols() {
  NcclMask m{};
  for (uint8_t& x : m)
    x = 0b111;
  return m;
}
inline bool allows(const NcclMask& m, Collective c, uint8_t index) {
  return (m[static_cast<size_t>(c)] >> index & 1u) != 0;
}

/// Member defaults mirror the table's (a test holds them equal); scenarios read every value
/// through the table.
struct NcclConfig {
  NcclMask algos = all_algorithms();    // NCCL_ALGO: what the tuner may choose, per collective
  NcclMask protos = all_protocols();    // NCCL_PROTO
  bool protos_set = false;              // NCCL_PROTO given: what it allows is enabled outright
  int nvls_enable = 2;                  // NCCL_NVLS_ENABLE (2: where the NVSwitch supports it)
  int pat_enable = 2;                   // NCCL_PAT_ENABLE (2: with one rank per server)
  bool msccl = true;                    // RCCL_MSCCL_ENABLE (RCCL only)
  std::optional<Bytes> tree_threshold;  // NCCL_TREE_THRESHOLD (releases before 2.5)
  int min_channels = 0;                 // NCCL_MIN_NCHANNELS (0: automatic)
  int max_channels = 0;                 // NCCL_MAX_NCHANNELS (0: automatic)
  int min_ctas = 0;                     // NCCL_MIN_CTAS (a lower bound like NCCL_MIN_NCHANNELS)
  int max_ctas = 0;                     // NCCL_MAX_CTAS
  int min_p2p_channels = 1;             // NCCL_MIN_P2P_NCHANNELS
  int max_p2p_channels = kMaxChannels;  // NCCL_MAX_P2P_NCHANNELS
  // NCCL_NCHANNELS_PER_NET_PEER (point-to-point); unset: as the release derives it
  std::optional<int> channels_per_net_peer;
  uint32_t qps_per_connection = 1;      // NCCL_IB_QPS_PER_CONNECTION
  bool split_data_on_qps = false;       // NCCL_IB_SPLIT_DATA_ON_QPS
  bool net_socket = false;              // NCCL_NET=Socket (else IB: NCCL's RDMA transport)
  int socket_nthreads = 0;              // NCCL_SOCKET_NTHREADS
  int nsocks_perthread = 1;             // NCCL_NSOCKS_PERTHREAD
  std::optional<Bytes> buffsize;        // NCCL_BUFFSIZE (Simple); unset: the host CPU's
  std::optional<Bytes> ll_buffsize;     // NCCL_LL_BUFFSIZE; unset: the library's (buffer())
  std::optional<Bytes> ll128_buffsize;  // NCCL_LL128_BUFFSIZE; unset: the library's
  // NCCL_P2P_NET_CHUNKSIZE; unset: the library's for the GPU and ranks (default_p2p_net_chunksize)
  std::optional<Bytes> p2p_net_chunksize;
  Bytes p2p_nvl_chunksize{512 << 10};  // NCCL_P2P_NVL_CHUNKSIZE
  std::optional<bool> pxn;             // !NCCL_PXN_DISABLE; unset: default_pxn
  bool collnet = false;                // NCCL_COLLNET_ENABLE
  std::optional<Time> net_overhead;    // NCCL_NET_OVERHEAD; unset: the host CPU's
  // The model's own parameters.
  // library: rccl (AMD) or nccl; unset: the one the tables name, else the GPUs' (for_gpus())
  std::optional<bool> rccl;
  // the release whose tuning.cc constants are pinned; empty: the library's (for_gpus())
  std::string tuning_tables;
  std::optional<Time> launch_latency;       // per operation; default: NCCL's baseLat
  double base_latency_factor = 1.0;         // scales NCCL's baseLat (without launch_latency)
  double hop_latency_factor = 1.0;          // scales NCCL's per-hop latencies (hwLat)
  Time credit_latency{};                    // receiver's time to return a credit (CTS)
  Time proxy_post_latency = Time::ns(130);  // proxy's host time per channel's network step

  bool is_rccl() const { return rccl.value_or(false); }
  Bytes buffer(Protocol p) const;  // connection buffer of a protocol (wire bytes)
  /// NCCL over sockets: the TCP connections that carry a connection's data, as NCCL's socket
  /// plugin opens them (net_socket.cc ncclNetSocketGetNsockNthread): threads x sockets per
  /// thread, at most 64 (the sockets per thread lowered to fit); with no helper thread the
  /// data goes over the connection's control socket, one connection.
  int sockets() const;
  /// The sockets each helper thread drives (NCCL_NSOCKS_PERTHREAD, lowered to fit the 64).
  int sockets_per_thread() const;
};
/// NCCL's socket plugin cuts each message into tasks of at least this many bytes, one per
/// socket in turn (net_socket.cc MIN_CHUNKSIZE).
inline constexpr int64_t kSocketMinChunk = 64 << 10;

const ParamTable& nccl_table();
/// A value of NCCL variable `key` as NCCL's environment writes it (mpirun -x, a measured
/// table's `env`), in the scenario's syntax: a size in plain bytes (NCCL_BUFFSIZE=4194304)
/// gets its unit; anything else is returned as it is.
std::string nccl_env_value(std::string_view key, std::string value);
/// NCCL's host overhead per network step when NCCL_NET_OVERHEAD is unset (getNetOverhead in
/// tuning.cc, RCCL's alike): 2 us on AMD x86 hosts, 1 us on Intel and others.
Time default_net_overhead(fabric::CpuKind cpu);
/// NCCL's Simple buffer when NCCL_BUFFSIZE is unset (init.cc computeBuffSizes): 4 MiB; 1 MiB on
/// Arm hosts in the releases that had DEFAULT_BUFFSIZE_ARM (before 2.19: of the tables here,
/// `tuning_tables` 2.8.3), not in later ones, whose computeBuffSizes no longer reads the CPU.
Bytes default_buffsize(fabric::CpuKind cpu, std::string_view release);
/// The point-to-point network chunk when NCCL_P2P_NET_CHUNKSIZE is unset: NCCL's 128 KiB; RCCL's
/// by the GPU and the communicator's ranks (ROCm/rccl's rcclSetP2pNetChunkSize): gfx942
/// (cdna3) 512 KiB from 64 ranks, gfx950 (cdna4) 256 KiB from 16 and 512 KiB from 32, 128 KiB
/// below.
Bytes default_p2p_net_chunksize(bool rccl, fabric::GpuArch arch, int nranks);
/// Whether PXN is on when NCCL_PXN_DISABLE is unset: NCCL's default, on; for RCCL on gfx942
/// from 64 ranks and on gfx950 from 32, on other GPUs NCCL's (ROCm/rccl's rcclSetPxn); a set
/// value is taken as it is.
bool default_pxn(bool rccl, fabric::GpuArch arch, int nranks);
/// `c` for a communicator of GPUs of `arch`, its library and tables chosen: the library
/// written, else the one the tables written name, else the GPUs' own (RCCL on AMD's, NCCL on
/// NVIDIA's); the tables written, else the library's (rccl-mi300, newest).
NcclConfig for_gpus(NcclConfig c, fabric::GpuArch arch);
/// `base` updated from `section` (a mapping against nccl_table()): every key, defaults
/// included, or with `only_written` just the keys the section names (a workload's overrides,
/// which the effective scenario records as written).
NcclConfig read_nccl(const ParamReader& section, NcclConfig base, bool only_written);

}  // namespace rocesim::collectives::nccl
