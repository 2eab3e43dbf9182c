// Per-rank programs of a training job, and the runner that plays them on the simulated fabric.
//
// A rank runs its program as a GPU runs CUDA streams: each stream is a sequence of instructions
// taken in order, one at a time. Compute takes a time; a collective starts when every member of
// its communicator has reached it (NCCL's rendezvous) and ends for all at once; a send posts a
// transfer to a neighbouring pipeline stage and goes on; a receive waits for the next transfer
// from that neighbour; a wait holds its stream until another stream of the rank has done a
// number of instructions (a CUDA event). Ranks with the same role (pipeline stage) share one
// program, so a step over 32,768 GPUs costs a few counters per rank, not a graph per rank.
//
// The runner accounts each rank's compute stream: computing, blocked on a collective of a kind
// (exposed communication), blocked before a collective began because other ranks had not
// reached it (waiting for stragglers), or blocked on a pipeline receive (bubble). The four add
// up to the rank's step.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "sim/collectives/nccl/collective.hpp"
#include "sim/engine/simulation.hpp"

namespace rocesim::training {

inline constexpr int kStreams = 3;
enum Stream : uint8_t { kCompute = 0, kReduce = 1, kGather = 2 };

/// Communicator families: each rank belongs to at most one instance of each.
enum class Family : uint8_t { Dp, Tp, Ep, ExpertDp, Hpz };
inline constexpr int kFamilies = 5;

/// What an instruction is for, in the breakdown.
enum class Purpose : uint8_t {
  Forward,
  Backward,
  Recompute,
  Optimizer,
  Gradients,   // data-parallel gradient reduction
  Parameters,  // data-parallel parameter gathers
  Tensor,      // tensor-parallel AllReduce
  Experts,     // expert-parallel AlltoAll
  Pipeline,    // pipeline sends
};
inline constexpr int kPurposes = 9;
std::string_view purpose_name(Purpose p);

struct Instr {
  enum class Kind : uint8_t { Compute, Collective, Send, Recv, Wait };
  Kind kind = Kind::Compute;
  Purpose purpose = Purpose::Forward;
  Family family = Family::Dp;                                                   // Collective
  collectives::nccl::Collective op = collectives::nccl::Collective::AllReduce;  // Collective
  uint8_t stream = 0;  // Wait: the stream waited on
  uint8_t peer = 0;    // Send: 0 to the next stage, 1 to the previous; Recv: 0 from the
                       // previous stage, 1 from the next
  uint32_t count = 0;  // Wait: until the stream has done this many instructions
  double seconds = 0;  // Compute
  int64_t bytes = 0;   // Collective (nccl-tests' size), Send
};

struct Program {
  std::array<std::vector<Instr>, kStreams> streams;
  /// Appends to a stream; returns the count of its instructions after it (for waits).
  uint32_t add(Stream s, const Instr& i) {
    streams[s].push_back(i);
    return static_cast<uint32_t>(streams[s].size());
  }
  uint32_t size(Stream s) const { return static_cast<uint32_t>(streams[s].size()); }
};

struct Plan {
  std::vector<fabric::NodeId> gpus;  // per rank
  std::vector<uint16_t> role;        // per rank: its program
  std::vector<Program> programs;
  struct Communicators {
    std::vector<std::vector<uint32_t>> instances;  // member ranks, in communicator order
    std::vector<int32_t> of_rank;                  // instance of each rank, -1: none
  };
  std::array<Communicators, kFamilies> families;
  std::vector<std::array<int32_t, 2>> peers;  // per rank: next stage, previous stage (-1: none)
  std::vector<double> slowdown;               // per rank: compute time factor
  engine::ConnectionSpec p2p_connection;      // pipeline sends
  double expert_imbalance = 0;                // AlltoAllv's (the router's load imbalance)
  uint64_t seed = 0;                          // of the AlltoAllv draws, one per operation
};

/// Per rank: seconds of the compute stream by state.
struct RankTime {
  double compute = 0;
  std::array<double, kPurposes> computed{};  // compute by pass: forward, backward, ...
  std::array<double, kPurposes> exposed{};   // blocked on communication of each purpose
  double bubble = 0;                         // blocked on a pipeline receive
  double waiting = 0;                        // blocked until the other ranks reached a collective
  double tail = 0;  // through its program before the last rank (the step's end)
  double total() const;
};

/// One span of a stream, for the timeline trace.
struct Span {
  uint32_t rank;
  uint8_t stream;
  Purpose purpose;
  bool collective;
  collectives::nccl::Collective op;
  Time start, end;
};

class ProgramRunner {
 public:
  ProgramRunner(const fabric::Fabric& f, Plan plan, const collectives::nccl::NcclConfig& nccl);
  /// Records spans of these ranks (sorted) for the trace.
  void trace_ranks(std::vector<uint32_t> ranks) { traced_ = std::move(ranks); }

  void start(engine::Simulation& sim, engine::WorkloadId id);
  void on_transfer_done(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag);
  void on_timer(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag);
  bool done() const { return finished_ranks_ == plan_.gpus.size(); }

  const Plan& plan() const { return plan_; }
  std::span<const RankTime> times() const { return times_; }
  Time started() const { return start_; }
  Time ended() const { return end_; }
  /// Mean over ranks of the time spent in collectives of each purpose (overlapped or not).
  std::array<double, kPurposes> communication() const;
  uint64_t collectives_run() const { return collectives_run_; }
  std::span<const Span> spans() const { return spans_; }

 private:
  enum class State : uint8_t { Ready, Running, Arrived, Blocked };
  struct RankState {
    std::array<uint32_t, kStreams> pc{};
    std::array<State, kStreams> state{};
    std::array<Time, kStreams> since{};     // when the current instruction began waiting
    std::array<Time, kStreams> op_start{};  // when its last collective started
    std::array<uint32_t, 2> received{}, consumed{};
    bool finished = false;
    Time through{};  // when it finished its program
  };
  static constexpr uint64_t kP2pBit = uint64_t{1} << 62;

  const Instr& current(uint32_t r, int s) const;
  void advance(engine::Simulation& sim, engine::WorkloadId id, uint32_t r, int s);
  void wake(engine::Simulation& sim, engine::WorkloadId id, uint32_t r);
  void complete(engine::Simulation& sim, engine::WorkloadId id, uint32_t r, int s);
  size_t runner_index(Family f, uint32_t instance, int s) const;
  void start_collective(engine::Simulation& sim, engine::WorkloadId id, size_t runner,
                        const Instr& in);
  void collective_done(engine::Simulation& sim, engine::WorkloadId id, size_t runner);
  void record(uint32_t r, int s, const Instr& in, Time start, Time end);

  const fabric::Fabric& f_;
  Plan plan_;
  collectives::nccl::NcclConfig nccl_;
  std::vector<RankState> ranks_;
  std::vector<RankTime> times_;
  std::array<size_t, kFamilies + 1> family_offset_{};
  std::vector<std::unique_ptr<collectives::nccl::OpRunner>> runners_;
  std::vector<uint32_t> arrivals_;
  std::vector<Instr> running_;                            // per runner: the collective in progress
  std::vector<std::array<engine::ConnectionId, 2>> p2p_;  // per rank, per direction
  std::array<double, kPurposes> comm_rank_seconds_{};
  uint64_t collectives_run_ = 0;
  size_t finished_ranks_ = 0;
  Time start_{}, end_{};
  std::vector<uint32_t> traced_;
  std::vector<Span> spans_;
};

}  // namespace rocesim::training
