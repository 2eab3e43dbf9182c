#include "sim/training/program.hpp"

#include <algorithm>

#include "sim/core/error.hpp"

namespace rocesim::training {

using collectives::nccl::OpRunner;

std::string_view purpose_name(Purpose p) {
  switch (p) {
    case Purpose::Forward:
      return "forward";
    case Purpose::Backward:
      return "backward";
    case Purpose::Recompute:
      return "recompute";
    case Purpose::Optimizer:
      return "optimizer";
    case Purpose::Gradients:
      return "dp_gradients";
    case Purpose::Parameters:
      return "dp_parameters";
    case Purpose::Tensor:
      return "tp";
    case Purpose::Experts:
      return "ep";
    case Purpose::Pipeline:
      return "pp";
  }
  return "?";
}

double RankTime::total() const {
  double t = compute + bubble + waiting + tail;
  for (double e : exposed)
    t += e;
  return t;
}

ProgramRunner::ProgramRunner(const fabric::Fabric& f, Plan plan,
                             const collectives::nccl::NcclConfig& nccl)
    : f_(f), plan_(std::move(plan)), nccl_(nccl) {
  const size_t n = plan_.gpus.size();
  ROCESIM_CHECK(plan_.role.size() == n && plan_.peers.size() == n && plan_.slowdown.size() == n,
                "a plan has a role, peers and a slowdown per rank");
  for (int fam = 0; fam < kFamilies; ++fam) {
    family_offset_[fam + 1] = family_offset_[fam] + plan_.families[fam].instances.size() * kStreams;
  }
  ROCESIM_CHECK(family_offset_[kFamilies] < OpRunner::kMaxRunners, "runner ids fit a tag");
  runners_.resize(family_offset_[kFamilies]);
  arrivals_.assign(family_offset_[kFamilies], 0);
  running_.resize(family_offset_[kFamilies]);
}

size_t ProgramRunner::runner_index(Family fam, uint32_t instance, int s) const {
  return family_offset_[static_cast<size_t>(fam)] + size_t{instance} * kStreams +
         static_cast<size_t>(s);
}

const Instr& ProgramRunner::current(uint32_t r, int s) const {
  return plan_.programs[plan_.role[r]].streams[s][ranks_[r].pc[s]];
}

std::array<double, kPurposes> ProgramRunner::communication() const {
  std::array<double, kPurposes> out{};
  const auto n = static_cast<double>(plan_.gpus.size());
  for (int p = 0; p < kPurposes; ++p)
    out[p] = comm_rank_seconds_[p] / n;
  return out;
}

void ProgramRunner::start(engine::Simulation& sim, engine::WorkloadId id) {
  const size_t n = plan_.gpus.size();
  ranks_.assign(n, RankState{});
  times_.assign(n, RankTime{});
  p2p_.assign(n, {engine::ConnectionId(-1), engine::ConnectionId(-1)});
  start_ = sim.now();
  for (uint32_t r = 0; r < n; ++r) {
    for (int s = 0; s < kStreams; ++s)
      advance(sim, id, r, s);
  }
}

void ProgramRunner::record(uint32_t r, int s, const Instr& in, Time start, Time end) {
  if (!std::binary_search(traced_.begin(), traced_.end(), r)) return;
  spans_.push_back(Span{r, static_cast<uint8_t>(s), in.purpose, in.kind == Instr::Kind::Collective,
                        in.op, start, end});
}

void ProgramRunner::advance(engine::Simulation& sim, engine::WorkloadId id, uint32_t r, int s) {
  RankState& st = ranks_[r];
  const std::vector<Instr>& prog = plan_.programs[plan_.role[r]].streams[s];
  const Time now = sim.now();
  const auto block = [&](int stream) {  // from now unless already blocked
    if (st.state[stream] == State::Blocked) return;
    st.state[stream] = State::Blocked;
    st.since[stream] = now;
  };
  while (true) {
    if (st.state[s] == State::Running || st.state[s] == State::Arrived) return;
    if (st.pc[s] == prog.size()) break;
    const Instr& in = prog[st.pc[s]];
    switch (in.kind) {
      case Instr::Kind::Compute: {
        st.state[s] = State::Running;
        st.since[s] = now;
        const Time d = Time::seconds(in.seconds * plan_.slowdown[r]);
        sim.timer(id, now + d, uint64_t{r} * kStreams + static_cast<uint64_t>(s));
        return;
      }
      case Instr::Kind::Collective: {
        st.state[s] = State::Arrived;
        st.since[s] = now;
        const std::vector<int32_t>& of_rank =
            plan_.families[static_cast<size_t>(in.family)].of_rank;
        ROCESIM_CHECK(r < of_rank.size() && of_rank[r] >= 0,
                      "a collective's rank belongs to its communicator");
        const int32_t inst = of_rank[r];
        const size_t k = runner_index(in.family, static_cast<uint32_t>(inst), s);
        const size_t members =
            plan_.families[static_cast<size_t>(in.family)].instances[inst].size();
        if (++arrivals_[k] == members) {
          arrivals_[k] = 0;
          start_collective(sim, id, k, in);
        }
        return;
      }
      case Instr::Kind::Send: {
        engine::ConnectionId& c = p2p_[r][in.peer];
        const int32_t dst = plan_.peers[r][in.peer];
        ROCESIM_CHECK(dst >= 0, "a pipeline send has a peer stage");
        if (c == engine::ConnectionId(-1)) {
          c = sim.connect(plan_.gpus[r], plan_.gpus[static_cast<size_t>(dst)],
                          plan_.p2p_connection);
        }
        sim.transfer(id, c, Bytes(in.bytes), kP2pBit | (uint64_t(dst) << 1) | in.peer);
        ++st.pc[s];
        continue;
      }
      case Instr::Kind::Recv: {
        if (st.received[in.peer] > st.consumed[in.peer]) {
          ++st.consumed[in.peer];
          if (st.state[s] == State::Blocked && s == kCompute) {
            times_[r].bubble += (now - st.since[s]).in_seconds();
          }
          st.state[s] = State::Ready;
          ++st.pc[s];
          continue;
        }
        block(s);
        return;
      }
      case Instr::Kind::Wait: {
        if (st.pc[in.stream] >= in.count) {
          if (st.state[s] == State::Blocked && s == kCompute) {
            // Blocked until the awaited instruction ended: before its collective began, other
            // ranks had not reached it; after, the collective itself was exposed.
            const Instr& w = plan_.programs[plan_.role[r]].streams[in.stream][in.count - 1];
            const Time began = w.kind == Instr::Kind::Collective
                                   ? std::max(st.since[s], st.op_start[in.stream])
                                   : now;
            times_[r].waiting += (std::min(began, now) - st.since[s]).in_seconds();
            times_[r].exposed[static_cast<size_t>(w.purpose)] += (now - began).in_seconds();
          }
          st.state[s] = State::Ready;
          ++st.pc[s];
          continue;
        }
        block(s);
        return;
      }
    }
  }
  // The stream is through its program.
  if (st.finished) return;
  for (int t = 0; t < kStreams; ++t) {
    const size_t size = plan_.programs[plan_.role[r]].streams[t].size();
    if (st.pc[t] != size) return;
  }
  st.finished = true;
  st.through = now;
  if (++finished_ranks_ == plan_.gpus.size()) {
    // Until the last rank ends, a rank that is through waits.
    end_ = now;
    for (size_t i = 0; i < times_.size(); ++i)
      times_[i].tail = (end_ - ranks_[i].through).in_seconds();
  }
}

void ProgramRunner::wake(engine::Simulation& sim, engine::WorkloadId id, uint32_t r) {
  for (int s = 0; s < kStreams; ++s) {
    if (ranks_[r].state[s] == State::Blocked) advance(sim, id, r, s);
  }
}

void ProgramRunner::complete(engine::Simulation& sim, engine::WorkloadId id, uint32_t r, int s) {
  RankState& st = ranks_[r];
  const Instr& in = current(r, s);
  if (s == kCompute) {
    const double took = (sim.now() - st.since[s]).in_seconds();
    times_[r].compute += took;
    times_[r].computed[static_cast<size_t>(in.purpose)] += took;
  }
  record(r, s, in, st.since[s], sim.now());
  ++st.pc[s];
  st.state[s] = State::Ready;
  wake(sim, id, r);
  advance(sim, id, r, s);
}

void ProgramRunner::start_collective(engine::Simulation& sim, engine::WorkloadId id, size_t k,
                                     const Instr& in) {
  const auto fam = static_cast<size_t>(in.family);
  const auto s = static_cast<int>(k - family_offset_[fam]) % kStreams;
  const size_t inst = (k - family_offset_[fam]) / kStreams;
  const std::vector<uint32_t>& members = plan_.families[fam].instances[inst];
  if (!runners_[k]) {
    std::vector<fabric::NodeId> gpus;
    gpus.reserve(members.size());
    for (uint32_t m : members)
      gpus.push_back(plan_.gpus[m]);
    runners_[k] = std::make_unique<OpRunner>(f_, std::move(gpus), nccl_, static_cast<uint32_t>(k));
  }
  for (uint32_t m : members)
    ranks_[m].op_start[s] = sim.now();
  running_[k] = in;
  ++collectives_run_;
  runners_[k]->start(sim, id, in.op, in.bytes, 0, plan_.expert_imbalance,
                     plan_.seed + collectives_run_);
}

void ProgramRunner::collective_done(engine::Simulation& sim, engine::WorkloadId id, size_t k) {
  const Instr in = running_[k];
  const auto fam = static_cast<size_t>(in.family);
  const auto s = static_cast<int>(k - family_offset_[fam]) % kStreams;
  const size_t inst = (k - family_offset_[fam]) / kStreams;
  const std::vector<uint32_t>& members = plan_.families[fam].instances[inst];
  const Time now = sim.now();
  const Time began = ranks_[members.front()].op_start[s];
  comm_rank_seconds_[static_cast<size_t>(in.purpose)] +=
      (now - began).in_seconds() * static_cast<double>(members.size());
  for (uint32_t m : members) {
    RankState& st = ranks_[m];
    if (s == kCompute) {
      times_[m].waiting += (began - st.since[s]).in_seconds();
      times_[m].exposed[static_cast<size_t>(in.purpose)] += (now - began).in_seconds();
    }
    record(m, s, in, began, now);
  }
  // Wake the other streams first: a wait on this stream reads the collective's start.
  for (uint32_t m : members) {
    RankState& st = ranks_[m];
    ++st.pc[s];
    st.state[s] = State::Ready;
  }
  for (uint32_t m : members)
    wake(sim, id, m);
  for (uint32_t m : members)
    advance(sim, id, m, s);
}

void ProgramRunner::on_transfer_done(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) {
  const int64_t k = OpRunner::runner_of(tag);
  if (k >= 0) {
    OpRunner& runner = *runners_[static_cast<size_t>(k)];
    runner.on_transfer_done(sim, id, tag);
    if (runner.done()) collective_done(sim, id, static_cast<size_t>(k));
    return;
  }
  ROCESIM_CHECK((tag & kP2pBit) != 0, "a runner's transfer tag");
  const auto r = static_cast<uint32_t>((tag & ~kP2pBit) >> 1);
  ++ranks_[r].received[tag & 1];
  wake(sim, id, r);
}

void ProgramRunner::on_timer(engine::Simulation& sim, engine::WorkloadId id, uint64_t tag) {
  const int64_t k = OpRunner::runner_of(tag);
  if (k >= 0) {
    OpRunner& runner = *runners_[static_cast<size_t>(k)];
    runner.on_timer(sim, id, tag);
    if (runner.done()) collective_done(sim, id, static_cast<size_t>(k));
    return;
  }
  complete(sim, id, static_cast<uint32_t>(tag / kStreams), static_cast<int>(tag % kStreams));
}

}  // namespace rocesim::training
