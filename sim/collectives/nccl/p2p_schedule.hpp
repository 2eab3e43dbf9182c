// NCCL's schedule of grouped point-to-point operations (the sends and receives of an AlltoAll,
// a Gather, a Scatter or a Send/Recv issued between ncclGroupStart and ncclGroupEnd), as NCCL
// 2.19 and later plan them (init.cc ncclP2pSchedule, include/channel.h, enqueue.cc
// scheduleP2pTasksToPlan / addP2pToPlan / addWorkBatchToPlan; read, not copied):
//
//  * Rounds. Rank r's round k pairs a send to r + d_k with a receive from r - d_k. Across nodes
//    of equal size L, d_k steps through node distances in the order of the triangular numbers
//    modulo the next power of two of the node count (0, 1, 3, 6, ..., skipping distances past
//    the count), and within each node distance through the L local distances in order; a
//    communicator whose nodes differ in size is one flat group of ranks, stepped through the
//    same way. The send of round k from r and the receive of round k at r + d_k are the same
//    transfer.
//  * Channels. Round k's work goes to the channel base of its group of 8 rounds within its node
//    distance (ceil(L / 8) bases per node distance; on one node the round itself), its bits
//    reversed over log2 C (C the p2p channels, a power of two), and part p of a split operation
//    to base + p (mod C).
//  * Batches. A channel's CTA runs its work in batches of at most 8 operations of distinct
//    rounds, appended in round order, one batch after the other: a batch ends when every
//    send and receive in it has; the next one starts then.
//
// So a rank has at most 8 rounds in flight per channel: an AlltoAll on 4,096 GPUs (512 nodes of
// 8) with 16 p2p channels runs in 63 or 64 batches per channel, not all 4,095 peers at once.
//
// rocesim runs the batches as waves over the communicator and its channels: batch k of every
// channel starts on every rank when batch k - 1 of every channel has ended on every rank, and
// a transfer runs in the later of its send's and its receive's batch. NCCL synchronises
// pairwise instead (a send of batch k starts once its sender and its receiver both run batch
// k of that channel). Where every rank's batches hold the same rounds and the channels' batches
// the same work, as in an AlltoAll, the waves keep in step anyway: the completion times were
// the same, to the picosecond, as with waves per channel on 256 GPUs (64 KiB to 256 MiB) and
// 512 GPUs (64 KiB to 64 MiB), and within 0.12 % of pairwise starts on 256 GPUs (the order of
// posting, which picks a message's QP and path, differs). Starts at their own instants,
// pairwise or per channel, cost the max-min model far more to simulate (a component of every
// flow re-solved at each): 26.8 s pairwise against 2.9 s for 1 MiB on 512 GPUs; over 300 s
// per channel against 10.6 s for 1 GiB on 1,024 GPUs.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace rocesim::collectives::nccl {

class P2pSchedule {
 public:
  /// Operations of distinct rounds in one batch of a channel (NCCL_MAX_DEV_WORK_P2P_PER_BATCH).
  static constexpr int kPerBatch = 8;

  /// `node_of[r]` and `local_of[r]`: rank r's node (0 .. nodes - 1) and its index among the
  /// ranks of that node, in rank order; `channels`: the p2p channels, a power of two.
  P2pSchedule(const std::vector<int>& node_of, const std::vector<int>& local_of, int channels);

  /// The round of rank `from`'s send to `to`, which is also `to`'s receive from `from`.
  int round(int from, int to) const;
  /// The channel that carries part `part` of a round's operation.
  int channel(int round, int part) const;
  int channels() const { return channels_; }
  int ranks() const { return static_cast<int>(node_of_.size()); }

 private:
  std::vector<int> node_of_, local_of_;
  int nodes_ = 1;
  int local_size_ = 1;  // ranks per node; the whole communicator when flat
  bool flat_ = false;
  int channels_ = 1;
  int channel_bits_ = 0;
  std::vector<int> node_pos_;  // node distance -> its place in the node order
  std::vector<int> flat_pos_;  // rank distance -> its round (flat)
};

/// How many parts (each on its own channel, base + p) NCCL splits one send or receive of
/// `bytes` into, across nodes (enqueue.cc addP2pToPlan, NCCL 2.22 on; read, not copied):
/// `per_peer` is p2pnChannelsPerPeer (a power of two), the most parts; the fewest, nChannelsMin,
/// is per_peer halved while it times `ranks` exceeds the p2p `channels` ("one channel per
/// operation"). An operation starts with the fewest, or as many parts of step / 2 as its bytes
/// make if that is fewer, and doubles them, up to per_peer, while a part is over `step` bytes
/// (NCCL's p2pChunkSize, NCCL_P2P_NET_CHUNKSIZE across nodes). So a 1 MiB pair of an AlltoAll
/// on 1,024 ranks takes 2 parts and a 64 KiB one 1, where 16 ranks give each 2 from 128 KiB.
int p2p_parts(int64_t bytes, int per_peer, int ranks, int channels, int64_t step);

/// The most parts of a point-to-point operation of a communicator of `ranks` across nodes, with
/// `channels` its channels (p2pnChannels before NCCL rounds it to a power of two); read, not
/// copied. `in_paths` (NCCL 2.22 to 2.28, paths.cc ncclTopoGetNchannels and
/// ncclTopoComputeP2pChannels): p2pnChannelsPerPeer, the least of `channels` and a network
/// peer's channels, rounded up to a power of two; a network peer takes `per_net_peer`
/// (NCCL_NCHANNELS_PER_NET_PEER) where it is set, else 2 halved while they times the ranks
/// exceed 4 times `channels`, then at least `nics` (the GPU's NICs, NCCL's
/// getLocalNetCountByBw). Otherwise (earlier releases, RCCL's model: group.cc / enqueue.cc
/// nChannelsMax): p2pnChannelsPerPeer from `per_net_peer`, else `net_default` (2; 1 in NCCL
/// 2.8), within `channels`, halved as the operation is enqueued while it times the ranks
/// exceeds 4 times the rounded channels ("avoid overloading channels with 8+ operations"),
/// whatever the setting. Either way, beyond twice as many ranks as channels (64 on 32 channels)
/// a pair of GPUs with one NIC each is one connection whatever its size. A peer over NVLink
/// takes 2 per NVLink, which does not bind below 32 on the GPUs rocesim models.
int p2p_channels_per_peer(std::optional<int> per_net_peer, bool in_paths, int net_default,
                          int ranks, int channels, int nics);

/// Triangular numbers modulo the next power of two of n, those below n, in order: the order in
/// which NCCL visits distances 0 .. n - 1 (every one exactly once).
std::vector<int> triangular_order(int n);
/// The low `bits` bits of x in reverse order.
uint32_t reverse_bits(uint32_t x, int bits);

}  // namespace rocesim::collectives::nccl
