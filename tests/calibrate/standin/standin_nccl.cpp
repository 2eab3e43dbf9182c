// Stand-in NCCL (tests/calibrate/standin/README.md): a virtual cluster behind rocesim-bench.
// Implements the calls of include/nccl.h. No data moves (the bench does not check data); every
// operation advances its CUDA stream's virtual clock (standin_device.hpp) by the time rocesim
// predicts for it on a hidden ground-truth cluster, times seeded noise, so that the bench's
// CUDA events time the operation as they would on the cluster:
//
//    t = simulate(collective, size, ranks; scenario + truth) x exp(noise z_k),  z_k ~ N(0, 1)
//
// where simulate() is validation::validate() on a one-row nccl-tests table: the same simulation
// `rocesim validate` and `rocesim calibrate fit` run for a measured row, cached per (collective,
// size, ranks, type, reduction, root). z_k depends only on the seed and the operation's index
// k on its communicator, so every rank of an operation agrees on its time (the bench keeps the
// slowest rank's).
//
// Environment (the hidden cluster; every rank must see the same):
//   ROCESIM_STANDIN_SCENARIO=FILE   the cluster: a rocesim scenario (required at comm creation)
//   ROCESIM_STANDIN_TRUTH=K=V;...   parameter values applied over it, as `--set K=V` (the truth)
//   ROCESIM_STANDIN_NOISE=S         standard deviation of the log-normal noise (default 0)
//   ROCESIM_STANDIN_SEED=N          seed of the noise (default 1)
//   ROCESIM_STANDIN_FAIL=KIND:R:K   at operation K (1-based, warm-up included) of rank R:
//     die    the process is killed (SIGKILL), as by a crashed node or the OOM killer
//     hang   the operation never completes (a stalled fabric); nothing is reported
//     error  the operation never completes and ncclCommGetAsyncError reports ncclRemoteError, as
//            NCCL does when a network transfer fails (retry count exceeded)
//   NCCL_* variables are passed to the model as the bench records them (validate applies those
//   it models), so that what the bench records is what was simulated.
//
// Strict where the bench could go wrong: a unique id that did not come from ncclGetUniqueId
// (not broadcast), a stream of another device, buffers that overrun their device allocation for
// the operation's count (nccl-tests' buffer layout), an unbalanced group, a p2p peer out of range
// are errors, with ncclGetLastError saying which. The bench is single-threaded, and so is this.
#include <fmt/format.h>

#include <unistd.h>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "calibrate/lib/bench_report.hpp"
#include "nccl.h"
#include "sim/collectives/nccl/nccl_tests.hpp"
#include "sim/scenario/calibration.hpp"
#include "standin_device.hpp"
#include "standin_truth.hpp"
#include "validation/lib/validate.hpp"

extern char** environ;

struct ncclComm {
  int nranks = 1;
  int rank = 0;
  int device = 0;
  int ops = 0;  // operations enqueued so far
  ncclResult_t async = ncclSuccess;
};

namespace {

using rocesim::standin::check_buffer;

constexpr const char kIdMagic[] = "rocesim-standin-nccl-id";

std::string g_last_error;
int g_group_depth = 0;

/// One call enqueued inside a group.
struct Call {
  std::string collective;  // allreduce, ..., "send", "recv"
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int64_t bytes = 0;  // nccl-tests' size of the operation (send/recv: of the call)
  int64_t count = 0;
  ncclDataType_t type = ncclFloat32;
  std::string redop = "none";
  int root = -1;
  int peer = -1;
};
std::vector<Call> g_group;

ncclResult_t fail(ncclResult_t r, std::string text) {
  g_last_error = std::move(text);
  return r;
}

const char* type_name(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return "int8";
    case ncclUint8:
      return "uint8";
    case ncclInt32:
      return "int32";
    case ncclUint32:
      return "uint32";
    case ncclInt64:
      return "int64";
    case ncclUint64:
      return "uint64";
    case ncclFloat16:
      return "half";
    case ncclFloat32:
      return "float";
    case ncclFloat64:
      return "double";
    case ncclBfloat16:
      return "bfloat16";
    case ncclFloat8e4m3:
      return "fp8_e4m3";
    default:
      return nullptr;
  }
}

int type_size(ncclDataType_t t) {
  const char* name = type_name(t);
  return name != nullptr ? rocesim::collectives::nccl::nccl_tests_type_size(name).value_or(0) : 0;
}

const char* op_name(ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
      return "sum";
    case ncclProd:
      return "prod";
    case ncclMax:
      return "max";
    case ncclMin:
      return "min";
    case ncclAvg:
      return "avg";
    default:
      return nullptr;
  }
}

// ---------------------------------------------------------------------------------------------
// The ground truth

/// rocesim's time for one operation on the ground truth, in microseconds (cached).
double simulated_us(const Call& c, int nranks) {
  using Key = std::tuple<std::string, int64_t, int, std::string, std::string, int>;
  static std::map<Key, double> cache;
  const char* type = type_name(c.type);
  const Key key{c.collective, c.bytes, nranks, type, c.redop, c.root};
  if (const auto it = cache.find(key); it != cache.end()) return it->second;

  namespace validation = rocesim::validation;
  validation::NcclTestsTable t;
  t.collective = c.collective;
  t.test = validation::nccl_tests_binary(c.collective);
  t.nranks = nranks;
  t.metadata["name"] = "standin";
  for (const auto& [name, value] : rocesim::calibrate::nccl_environment(environ))
    t.metadata["env." + name] = value;
  validation::NcclTestsRow r;
  r.size_bytes = c.bytes;
  r.count = c.count;
  r.type = type;
  r.redop = c.redop;
  r.root = c.root;
  r.time_us_out = r.time_us_in = 1;  // placeholders: only the simulated time is wanted
  t.rows.push_back(r);
  validation::NcclTestsLog log;
  log.source = "rocesim stand-in NCCL";
  log.tables.push_back(std::move(t));
  const validation::ValidationReport report = validation::validate(
      {log}, std::getenv("ROCESIM_STANDIN_SCENARIO"), rocesim::standin::truth());
  const double us = report.tables.at(0).rows.at(0).simulated_time_us;
  cache.emplace(key, us);
  return us;
}

/// The injected failure for operation k of `comm`, if any: "die", "hang" or "error".
std::string injected_failure(const ncclComm& comm, int k) {
  const char* v = std::getenv("ROCESIM_STANDIN_FAIL");
  if (v == nullptr) return "";
  char kind[16] = {};
  int rank = -1, op = -1;
  if (std::sscanf(v, "%15[a-z]:%d:%d", kind, &rank, &op) != 3) return "";
  return rank == comm.rank && op == k ? kind : "";
}

// ---------------------------------------------------------------------------------------------
// Operations

/// Runs one operation of `comm` on `stream`: its time, or the injected failure.
ncclResult_t execute(ncclComm& comm, cudaStream_t stream, const Call& op) {
  const int k = ++comm.ops;
  const std::string failure = injected_failure(comm, k);
  if (failure == "die") {
    std::fprintf(stderr, "stand-in NCCL: rank %d (pid %d) killed at operation %d\n", comm.rank,
                 static_cast<int>(::getpid()), k);
    std::fflush(stderr);
    std::raise(SIGKILL);
  }
  if (failure == "hang") {
    rocesim::standin::stream_hang(stream);
    return ncclSuccess;
  }
  if (failure == "error") {
    rocesim::standin::stream_hang(stream);
    comm.async = ncclRemoteError;
    g_last_error = fmt::format(
        "NET/IB: rank {}: completion with status IBV_WC_RETRY_EXC_ERR (12) from peer rank {} "
        "(stand-in: injected at operation {})",
        comm.rank, (comm.rank + 1) % comm.nranks, k);
    return ncclSuccess;
  }
  try {
    rocesim::standin::stream_advance(
        stream,
        simulated_us(op, comm.nranks) * rocesim::standin::noise_factor(static_cast<uint64_t>(k)));
  } catch (const std::exception& e) {
    return fail(ncclInternalError, fmt::format("stand-in NCCL: the ground truth: {}", e.what()));
  }
  return ncclSuccess;
}

/// The checks every call gets: communicator, stream, data type, buffers.
ncclResult_t check_call(const char* call, ncclComm_t comm, cudaStream_t stream, ncclDataType_t type,
                        std::initializer_list<std::tuple<const char*, const void*, int64_t>> bufs) {
  if (comm == nullptr) return fail(ncclInvalidArgument, fmt::format("{}: comm is NULL", call));
  if (!rocesim::standin::valid_stream(stream))
    return fail(ncclInvalidArgument, fmt::format("{}: invalid stream", call));
  if (rocesim::standin::stream_device(stream) != comm->device) {
    return fail(ncclInvalidUsage,
                fmt::format("{}: stream of device {} given to a communicator of device {}", call,
                            rocesim::standin::stream_device(stream), comm->device));
  }
  if (type_size(type) == 0)
    return fail(ncclInvalidArgument, fmt::format("{}: unsupported data type {}", call, int(type)));
  for (const auto& [name, p, bytes] : bufs) {
    if (const std::string problem = check_buffer(p, static_cast<size_t>(bytes)); !problem.empty())
      return fail(ncclInvalidArgument, fmt::format("{}: {}: {}", call, name, problem));
  }
  return ncclSuccess;
}

/// Enqueues a call: into the group, or at once as a group of one.
ncclResult_t enqueue(Call c) {
  g_group.push_back(std::move(c));
  if (g_group_depth > 0) return ncclSuccess;
  ++g_group_depth;
  return ncclGroupEnd();
}

/// The point-to-point calls of one communicator in a group, as nccl-tests' benchmark they make:
/// a send to and a receive from every rank is alltoall (size: per-peer bytes x ranks); anything
/// else is sendrecv (size: the largest call).
Call p2p_operation(const std::vector<const Call*>& calls, int nranks) {
  Call op = *calls.front();
  std::vector<int> sends(static_cast<size_t>(nranks), 0), recvs(static_cast<size_t>(nranks), 0);
  int64_t largest = 0;
  for (const Call* c : calls) {
    (c->collective == "send" ? sends : recvs)[static_cast<size_t>(c->peer)]++;
    largest = std::max(largest, c->bytes);
  }
  const bool all = std::all_of(sends.begin(), sends.end(), [](int n) { return n == 1; }) &&
                   std::all_of(recvs.begin(), recvs.end(), [](int n) { return n == 1; });
  op.collective = all ? "alltoall" : "sendrecv";
  op.bytes = all ? largest * nranks : largest;
  op.count = largest / std::max(1, type_size(op.type));
  op.redop = "none";
  op.root = -1;
  return op;
}

}  // namespace

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  *uniqueId = ncclUniqueId{};
  std::snprintf(uniqueId->internal, sizeof uniqueId->internal, "%s:%d", kIdMagic,
                static_cast<int>(::getpid()));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  if (std::strncmp(commId.internal, kIdMagic, sizeof kIdMagic - 1) != 0) {
    return fail(ncclInvalidArgument,
                "ncclCommInitRank: the unique id does not come from ncclGetUniqueId (rank 0 "
                "creates it; every rank must receive it)");
  }
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return fail(ncclInvalidArgument,
                fmt::format("ncclCommInitRank: rank {} of {} ranks", rank, nranks));
  }
  const char* scenario = std::getenv("ROCESIM_STANDIN_SCENARIO");
  if (scenario == nullptr || *scenario == '\0') {
    return fail(ncclSystemError,
                "stand-in NCCL: ROCESIM_STANDIN_SCENARIO (the ground-truth cluster) is not set");
  }
  *comm = new ncclComm{nranks, rank, rocesim::standin::current_device(), 0, ncclSuccess};
  return ncclSuccess;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  ncclUniqueId id{};
  ncclGetUniqueId(&id);
  for (int i = 0; i < ndev; ++i) {
    if (const cudaError_t e = cudaSetDevice(devlist != nullptr ? devlist[i] : i); e != cudaSuccess)
      return fail(ncclUnhandledCudaError, fmt::format("cudaSetDevice: {}", cudaGetErrorString(e)));
    if (const ncclResult_t r = ncclCommInitRank(&comm[i], ndev, id, i); r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: comm is NULL");
  *asyncError = comm->async;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t /*comm*/) {
  return g_last_error.c_str();
}

ncclResult_t ncclGroupStart(void) {
  ++g_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (g_group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd: no group was started");
  if (--g_group_depth > 0) return ncclSuccess;
  std::vector<Call> calls;
  calls.swap(g_group);
  // Per communicator, in the order first called: its collectives one by one, its p2p calls as
  // one operation.
  std::vector<ncclComm_t> comms;
  for (const Call& c : calls) {
    if (std::find(comms.begin(), comms.end(), c.comm) == comms.end()) comms.push_back(c.comm);
  }
  for (ncclComm_t comm : comms) {
    std::vector<const Call*> p2p;
    for (const Call& c : calls) {
      if (c.comm != comm) continue;
      if (c.collective == "send" || c.collective == "recv") {
        p2p.push_back(&c);
      } else if (const ncclResult_t r = execute(*comm, c.stream, c); r != ncclSuccess) {
        return r;
      }
    }
    if (p2p.empty()) continue;
    if (const ncclResult_t r =
            execute(*comm, p2p.front()->stream, p2p_operation(p2p, comm->nranks));
        r != ncclSuccess)
      return r;
  }
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  const int64_t bytes = static_cast<int64_t>(count) * type_size(datatype);
  if (const ncclResult_t r =
          check_call("ncclAllReduce", comm, stream, datatype,
                     {{"sendbuff", sendbuff, bytes}, {"recvbuff", recvbuff, bytes}});
      r != ncclSuccess)
    return r;
  if (op_name(op) == nullptr) return fail(ncclInvalidArgument, "ncclAllReduce: unsupported op");
  return enqueue({"allreduce", comm, stream, bytes, static_cast<int64_t>(count), datatype,
                  op_name(op), -1, -1});
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  const int64_t part = static_cast<int64_t>(sendcount) * type_size(datatype);
  const int64_t n = comm != nullptr ? comm->nranks : 1;
  if (const ncclResult_t r =
          check_call("ncclAllGather", comm, stream, datatype,
                     {{"sendbuff", sendbuff, part}, {"recvbuff", recvbuff, part * n}});
      r != ncclSuccess)
    return r;
  return enqueue({"allgather", comm, stream, part * n, static_cast<int64_t>(sendcount), datatype,
                  "none", -1, -1});
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  const int64_t part = static_cast<int64_t>(recvcount) * type_size(datatype);
  const int64_t n = comm != nullptr ? comm->nranks : 1;
  if (const ncclResult_t r =
          check_call("ncclReduceScatter", comm, stream, datatype,
                     {{"sendbuff", sendbuff, part * n}, {"recvbuff", recvbuff, part}});
      r != ncclSuccess)
    return r;
  if (op_name(op) == nullptr) return fail(ncclInvalidArgument, "ncclReduceScatter: unsupported op");
  return enqueue({"reducescatter", comm, stream, part * n, static_cast<int64_t>(recvcount),
                  datatype, op_name(op), -1, -1});
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  const int64_t bytes = static_cast<int64_t>(count) * type_size(datatype);
  if (comm != nullptr && (root < 0 || root >= comm->nranks))
    return fail(ncclInvalidArgument, fmt::format("ncclBroadcast: root {} out of range", root));
  // Only the root reads its send buffer.
  const void* send = comm != nullptr && comm->rank == root ? sendbuff : recvbuff;
  if (const ncclResult_t r = check_call("ncclBroadcast", comm, stream, datatype,
                                        {{"sendbuff", send, bytes}, {"recvbuff", recvbuff, bytes}});
      r != ncclSuccess)
    return r;
  return enqueue(
      {"broadcast", comm, stream, bytes, static_cast<int64_t>(count), datatype, "none", root, -1});
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  const int64_t bytes = static_cast<int64_t>(count) * type_size(datatype);
  if (const ncclResult_t r =
          check_call("ncclSend", comm, stream, datatype, {{"sendbuff", sendbuff, bytes}});
      r != ncclSuccess)
    return r;
  if (peer < 0 || peer >= comm->nranks)
    return fail(ncclInvalidArgument, fmt::format("ncclSend: peer {} out of range", peer));
  return enqueue(
      {"send", comm, stream, bytes, static_cast<int64_t>(count), datatype, "none", -1, peer});
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  const int64_t bytes = static_cast<int64_t>(count) * type_size(datatype);
  if (const ncclResult_t r =
          check_call("ncclRecv", comm, stream, datatype, {{"recvbuff", recvbuff, bytes}});
      r != ncclSuccess)
    return r;
  if (peer < 0 || peer >= comm->nranks)
    return fail(ncclInvalidArgument, fmt::format("ncclRecv: peer {} out of range", peer));
  return enqueue(
      {"recv", comm, stream, bytes, static_cast<int64_t>(count), datatype, "none", -1, peer});
}
