// rocesim-bench: NCCL collectives on real GPUs, timed like nccl-tests, recorded for rocesim's
// validation and calibration (calibrate/bench/README.md).
//
// Two modes. MPI (default): one rank per GPU, across nodes (mpirun, srun); the GPU is the rank's
// index among the ranks of its node modulo the visible devices, and the NCCL communicator is
// bootstrapped with an ncclUniqueId broadcast over MPI. Single process (--single-process): one
// process drives every local GPU (or --gpus N) through ncclCommInitAll and group calls; MPI is
// not used. Built without MPI (ROCESIM_BENCH_MPI 0, where configure found none) only the second
// mode exists; started by hand without --single-process it runs one GPU in it.
//
// Per collective: -w warm-up operations at the largest and at the smallest size (as nccl-tests),
// then per size -n timed operations out of place and -n in place. Each operation is timed with
// its own CUDA event pair on the GPU's stream; per iteration the slowest rank counts (max over
// the ranks, MPI_Allreduce MAX, or over the GPUs of the process); the statistics and the table
// come from calibrate/lib/bench_report.hpp. Buffers are zeroed with cudaMemset (no kernels, no
// data check: #wrong is N/A).
//
// Every CUDA, NCCL and MPI call is checked; a failure names the call and its error string, and
// during the sweep the collective and size. Exit codes: 0 success, 1 a failure during the run (an
// operation that failed or, with -T, did not complete in time; or the dataset cannot be written),
// 2 bad command line, 3 no CUDA device, two ranks on one GPU, or NCCL/MPI failed to start. After
// MPI_Init, a failure on one rank aborts the job (MPI_Abort with that code) so that no rank waits
// forever on it; the dataset is written by rank 0 only after every collective completed, so a
// failed run leaves none.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>
#include <unistd.h>

#ifndef ROCESIM_BENCH_MPI
#define ROCESIM_BENCH_MPI 1
#endif
#if ROCESIM_BENCH_MPI
#include <mpi.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/bench/bench_options.hpp"
#include "calibrate/lib/bench_report.hpp"
#include "sim/metrics/table.hpp"

#ifndef ROCESIM_VERSION
#define ROCESIM_VERSION "0.0.0"
#endif

namespace {

using namespace rocesim::calibrate;

class BenchFailure : public std::runtime_error {
 public:
  BenchFailure(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

void cuda_check(cudaError_t e, const char* call, int code = kBenchExitFailure) {
  if (e == cudaSuccess) return;
  throw BenchFailure(
      code, fmt::format("{} failed: {} ({})", call, cudaGetErrorString(e), cudaGetErrorName(e)));
}

void nccl_check(ncclResult_t r, const char* call, int code = kBenchExitFailure) {
  if (r == ncclSuccess) return;
  const char* last = ncclGetLastError(nullptr);
  const std::string detail = last != nullptr && *last != '\0' ? fmt::format(" ({})", last) : "";
  throw BenchFailure(code, fmt::format("{} failed: {}{}", call, ncclGetErrorString(r), detail));
}

#if ROCESIM_BENCH_MPI
void mpi_check(int rc, const char* call, int code = kBenchExitFailure) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  throw BenchFailure(code, fmt::format("{} failed: {}", call,
                                       length > 0 ? std::string(text, static_cast<size_t>(length))
                                                  : fmt::format("MPI error {}", rc)));
}
#endif

std::optional<ncclDataType_t> nccl_type(const std::string& t) {
  if (t == "int8" || t == "char") return ncclInt8;
  if (t == "uint8") return ncclUint8;
  if (t == "int32" || t == "int") return ncclInt32;
  if (t == "uint32") return ncclUint32;
  if (t == "int64") return ncclInt64;
  if (t == "uint64") return ncclUint64;
  if (t == "half" || t == "float16") return ncclFloat16;
  if (t == "float" || t == "float32") return ncclFloat32;
  if (t == "double" || t == "float64") return ncclFloat64;
#if defined(__CUDA_BF16_TYPES_EXIST__) || NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
  if (t == "bfloat16") return ncclBfloat16;
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
  if (t == "fp8_e4m3") return ncclFloat8e4m3;
#endif
  return std::nullopt;
}

std::optional<ncclRedOp_t> nccl_op(const std::string& op) {
  if (op == "sum") return ncclSum;
  if (op == "prod") return ncclProd;
  if (op == "min") return ncclMin;
  if (op == "max") return ncclMax;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
  if (op == "avg") return ncclAvg;
#endif
  return std::nullopt;
}

/// The rank a launcher gave this process before MPI_Init, if any launcher did.
std::optional<int> launcher_rank() {
  for (const char* name :
       {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "MV2_COMM_WORLD_RANK"}) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') {
      try {
        return std::stoi(v);
      } catch (const std::exception&) {
        return 0;
      }
    }
  }
  return std::nullopt;
}

/// How many ranks a launcher started, when it says (1 otherwise).
int launcher_size() {
  for (const char* name :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", "MV2_COMM_WORLD_SIZE"}) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') {
      try {
        return std::max(1, std::stoi(v));
      } catch (const std::exception&) {
        return 1;
      }
    }
  }
  return 1;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

/// Why this process has no CUDA device; empty when it has `count` > 0.
std::string no_device_reason(int& count) {
  count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    count = 0;
    return fmt::format("cudaGetDeviceCount failed: {} ({})", cudaGetErrorString(e),
                       cudaGetErrorName(e));
  }
  if (count == 0) return "cudaGetDeviceCount found 0 devices";
  return "";
}

std::string no_device_message(const std::string& where, const std::string& reason) {
  return fmt::format(
      "rocesim-bench: {}no CUDA device: {}. rocesim-bench measures NCCL on NVIDIA GPUs; check "
      "nvidia-smi and CUDA_VISIBLE_DEVICES.\n",
      where, reason);
}

std::string cuda_version_text(int v) {
  return fmt::format("{}.{}", v / 1000, v % 1000 / 10);
}

// ---------------------------------------------------------------------------------------------
// The GPUs of this process and the benchmark loop

struct Gpu {
  int device = 0;
  int rank = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  char* send = nullptr;
  char* recv = nullptr;
  std::vector<cudaEvent_t> start, stop;
};

struct Bench {
  bool mpi = true;
  int timeout_s = 0;  // -T: 0 waits forever
  int nranks = 1;
  bool printer = true;  // prints the tables (rank 0)
  std::vector<Gpu> gpus;
  const BenchOptions* opt = nullptr;
  BenchRun run;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
};

RankRecord describe_gpu(const Gpu& g) {
  RankRecord r;
  r.rank = g.rank;
  r.host = host_name();
  r.pid = static_cast<int64_t>(::getpid());
  r.device = g.device;
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, g.device), "cudaGetDeviceProperties");
  r.gpu = prop.name;
  char bus[64] = {};
  cuda_check(cudaDeviceGetPCIBusId(bus, sizeof bus, g.device), "cudaDeviceGetPCIBusId");
  r.bus_id = bus;
  r.nics = list_rdma_devices();
  return r;
}

/// The largest size the GPU memory allows: nccl-tests' (total memory - 1 GiB) / 2 for a send and a
/// receive buffer.
int64_t memory_limit_bytes(const Gpu& g) {
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, g.device), "cudaGetDeviceProperties");
  const int64_t total = static_cast<int64_t>(prop.totalGlobalMem);
  return std::max<int64_t>(0, (total - (int64_t{1} << 30)) / 2);
}

void setup_gpu(Gpu& g, int64_t buffer_bytes, int iters) {
  cuda_check(cudaSetDevice(g.device), "cudaSetDevice");
  cuda_check(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking),
             "cudaStreamCreateWithFlags");
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(buffer_bytes, 256));
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, bytes), "cudaMalloc (send buffer)");
  g.send = static_cast<char*>(p);
  cuda_check(cudaMalloc(&p, bytes), "cudaMalloc (receive buffer)");
  g.recv = static_cast<char*>(p);
  cuda_check(cudaMemset(g.send, 0, bytes), "cudaMemset");
  cuda_check(cudaMemset(g.recv, 0, bytes), "cudaMemset");
  g.start.resize(static_cast<size_t>(iters));
  g.stop.resize(static_cast<size_t>(iters));
  for (size_t i = 0; i < g.start.size(); ++i) {
    cuda_check(cudaEventCreate(&g.start[i]), "cudaEventCreate");
    cuda_check(cudaEventCreate(&g.stop[i]), "cudaEventCreate");
  }
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

void teardown_gpu(Gpu& g) {
  cuda_check(cudaSetDevice(g.device), "cudaSetDevice");
  for (size_t i = 0; i < g.start.size(); ++i) {
    cuda_check(cudaEventDestroy(g.start[i]), "cudaEventDestroy");
    cuda_check(cudaEventDestroy(g.stop[i]), "cudaEventDestroy");
  }
  g.start.clear();
  g.stop.clear();
  cuda_check(cudaFree(g.send), "cudaFree");
  cuda_check(cudaFree(g.recv), "cudaFree");
  cuda_check(cudaStreamDestroy(g.stream), "cudaStreamDestroy");
  nccl_check(ncclCommDestroy(g.comm), "ncclCommDestroy");
  g.comm = nullptr;
}

/// Waits for the GPU's stream, watching NCCL for asynchronous errors (a peer that died) as
/// nccl-tests does, so that a broken run fails instead of hanging; with -T, for at most
/// `timeout_s` seconds.
void wait_stream(const Gpu& g, int timeout_s) {
  cuda_check(cudaSetDevice(g.device), "cudaSetDevice");
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const cudaError_t e = cudaStreamQuery(g.stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) cuda_check(e, "cudaStreamQuery");
    ncclResult_t async = ncclSuccess;
    nccl_check(ncclCommGetAsyncError(g.comm, &async), "ncclCommGetAsyncError");
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    if (async == ncclInProgress) continue;
#endif
    nccl_check(async, "NCCL operation (asynchronous error)");
    if (timeout_s > 0 &&
        std::chrono::steady_clock::now() - start > std::chrono::seconds(timeout_s)) {
      throw BenchFailure(kBenchExitFailure,
                         fmt::format("timed out: the GPU's work did not complete within -T {} s "
                                     "(a stalled network, or a rank that stopped taking part)",
                                     timeout_s));
    }
  }
}

/// Enqueues one operation of `c` on one GPU (inside the caller's NCCL group).
void launch(const Bench& b, const Gpu& g, BenchCollective c, const BenchSize& s, bool in_place) {
  const int n = b.nranks;
  const int r = g.rank;
  const size_t count = static_cast<size_t>(s.count);
  const size_t part = static_cast<size_t>(s.count) * static_cast<size_t>(b.run.type_size);
  char* const send = in_place ? g.recv : g.send;
  char* const recv = g.recv;
  switch (c) {
    case BenchCollective::AllReduce:
      nccl_check(ncclAllReduce(send, recv, count, b.type, b.op, g.comm, g.stream), "ncclAllReduce");
      break;
    case BenchCollective::AllGather:
      // In place: each rank's part already sits at its offset in the result.
      nccl_check(ncclAllGather(in_place ? recv + static_cast<size_t>(r) * part : send, recv, count,
                               b.type, g.comm, g.stream),
                 "ncclAllGather");
      break;
    case BenchCollective::ReduceScatter:
      // In place: the result is the rank's part of the input.
      nccl_check(ncclReduceScatter(send, in_place ? recv + static_cast<size_t>(r) * part : recv,
                                   count, b.type, b.op, g.comm, g.stream),
                 "ncclReduceScatter");
      break;
    case BenchCollective::AlltoAll:
      nccl_check(ncclGroupStart(), "ncclGroupStart");
      for (int p = 0; p < n; ++p) {
        const size_t offset = static_cast<size_t>(p) * part;
        nccl_check(ncclSend(send + offset, count, b.type, p, g.comm, g.stream), "ncclSend");
        nccl_check(ncclRecv(recv + offset, count, b.type, p, g.comm, g.stream), "ncclRecv");
      }
      nccl_check(ncclGroupEnd(), "ncclGroupEnd");
      break;
    case BenchCollective::SendRecv:
      nccl_check(ncclGroupStart(), "ncclGroupStart");
      nccl_check(ncclSend(send, count, b.type, (r + 1) % n, g.comm, g.stream), "ncclSend");
      nccl_check(ncclRecv(recv, count, b.type, (r - 1 + n) % n, g.comm, g.stream), "ncclRecv");
      nccl_check(ncclGroupEnd(), "ncclGroupEnd");
      break;
    case BenchCollective::Broadcast:
      nccl_check(ncclBroadcast(send, recv, count, b.type, b.run.root, g.comm, g.stream),
                 "ncclBroadcast");
      break;
  }
}

/// One operation on every GPU of the process, as one NCCL group.
void launch_all(Bench& b, BenchCollective c, const BenchSize& s, bool in_place) {
  nccl_check(ncclGroupStart(), "ncclGroupStart");
  for (const Gpu& g : b.gpus)
    launch(b, g, c, s, in_place);
  nccl_check(ncclGroupEnd(), "ncclGroupEnd");
}

void barrier(const Bench& b) {
  for (const Gpu& g : b.gpus)
    wait_stream(g, b.timeout_s);
#if ROCESIM_BENCH_MPI
  if (b.mpi) mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
#endif
}

/// -n operations back to back, each between its own event pair; per iteration the time of the
/// slowest rank, in microseconds.
std::vector<double> timed_batch(Bench& b, BenchCollective c, const BenchSize& s, bool in_place) {
  const int iters = b.run.iters;
  barrier(b);
  for (int i = 0; i < iters; ++i) {
    const size_t k = static_cast<size_t>(i);
    for (Gpu& g : b.gpus) {
      cuda_check(cudaSetDevice(g.device), "cudaSetDevice");
      cuda_check(cudaEventRecord(g.start[k], g.stream), "cudaEventRecord");
    }
    launch_all(b, c, s, in_place);
    for (Gpu& g : b.gpus) {
      cuda_check(cudaSetDevice(g.device), "cudaSetDevice");
      cuda_check(cudaEventRecord(g.stop[k], g.stream), "cudaEventRecord");
    }
  }
  for (const Gpu& g : b.gpus)
    wait_stream(g, b.timeout_s);
  std::vector<double> us(static_cast<size_t>(iters), 0.0);
  for (const Gpu& g : b.gpus) {
    cuda_check(cudaSetDevice(g.device), "cudaSetDevice");
    for (size_t k = 0; k < us.size(); ++k) {
      float ms = 0;
      cuda_check(cudaEventElapsedTime(&ms, g.start[k], g.stop[k]), "cudaEventElapsedTime");
      us[k] = std::max(us[k], static_cast<double>(ms) * 1e3);
    }
  }
#if ROCESIM_BENCH_MPI
  if (b.mpi) {
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, us.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce");
  }
#endif
  return us;
}

void print(const Bench& b, const std::string& text) {
  if (!b.printer) return;
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

/// Runs `f`; a failure in it is rethrown with `what` (the collective and size) in its message.
template <typename F>
auto during(const std::string& what, F&& f) {
  try {
    return f();
  } catch (const BenchFailure& e) {
    throw BenchFailure(e.code(), fmt::format("{}: {}", what, e.what()));
  }
}

BenchTable run_collective(Bench& b, BenchCollective c) {
  BenchTable t;
  t.collective = c;
  t.text = format_table_header(b.run, c);
  print(b, t.text);
  const int n = b.nranks;
  const int ts = b.run.type_size;
  // Warm-up at the largest and at the smallest size, as nccl-tests.
  for (const int64_t requested : {b.run.sweep.max_bytes, b.run.sweep.min_bytes}) {
    const BenchSize s = bench_size(c, requested, n, ts);
    during(fmt::format("{} warm-up at {} B", bench_binary(c), s.size_bytes), [&] {
      for (int w = 0; w < b.run.warmup; ++w)
        launch_all(b, c, s, false);
    });
  }
  during(fmt::format("{} warm-up", bench_binary(c)), [&] { barrier(b); });
  for (const int64_t requested : bench_sweep(b.run.sweep)) {
    const BenchSize s = bench_size(c, requested, n, ts);
    const TimeStats out_of_place =
        during(fmt::format("{} at {} B, out of place", bench_binary(c), s.size_bytes),
               [&] { return time_stats(timed_batch(b, c, s, false)); });
    const TimeStats in_place =
        during(fmt::format("{} at {} B, in place", bench_binary(c), s.size_bytes),
               [&] { return time_stats(timed_batch(b, c, s, true)); });
    BenchRow row = make_bench_row(c, s, b.run.root, n, out_of_place, in_place);
    const std::string line = format_table_row(b.run, c, row);
    t.text += line;
    print(b, line);
    t.rows.push_back(std::move(row));
  }
  const std::string footer = format_table_footer(c, t.rows);
  t.text += footer;
  print(b, footer);
  return t;
}

/// Facts every mode records; `ranks` must be filled already.
void describe_run(Bench& b, const BenchOptions& opt) {
  BenchRun& run = b.run;
  run.rocesim_version = ROCESIM_VERSION;
  run.mode = b.mpi ? "mpi" : "single-process";
  int nccl = 0;
  nccl_check(ncclGetVersion(&nccl), "ncclGetVersion");
  int runtime = 0, driver = 0;
  cuda_check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  cuda_check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  run.cuda_runtime = cuda_version_text(runtime);
  run.cuda_driver = cuda_version_text(driver);
  run.nccl_version = fmt::format("{}+cuda{}", nccl_version_string(nccl), run.cuda_runtime);
#if ROCESIM_BENCH_MPI
  if (b.mpi) {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    mpi_check(MPI_Get_library_version(text, &length), "MPI_Get_library_version");
    std::string v(text, static_cast<size_t>(std::max(length, 0)));
    v = v.substr(0, v.find_first_of("\r\n"));
    while (!v.empty() && (v.back() == ' ' || v.back() == '\0'))
      v.pop_back();
    run.mpi_library = v;
  }
#endif
  run.command = opt.command;
  run.env = nccl_environment(::environ);
  run.gpus_per_process = static_cast<int>(b.gpus.size());
  run.name = opt.name;
  run.iters = opt.iters;
  run.warmup = opt.warmup;
  run.datatype = opt.datatype;
  run.type_size = opt.type_size;
  run.redop = opt.redop;
  run.root = opt.root;
}

/// Lowers the largest size to what every GPU's memory holds (nccl-tests' rule); `limit` is the
/// smallest limit over the GPUs of the job.
void fit_sweep(Bench& b, const BenchOptions& opt, int64_t limit) {
  b.run.sweep = opt.sweep;
  if (opt.sweep.max_bytes <= limit) return;
  if (opt.sweep.min_bytes > limit) {
    throw BenchFailure(kBenchExitNoGpu,
                       fmt::format("the smallest size -b {} B does not fit in GPU memory (at most "
                                   "{} B per buffer)",
                                   opt.sweep.min_bytes, limit));
  }
  b.run.requested_max_bytes = opt.sweep.max_bytes;
  b.run.sweep.max_bytes = limit;
}

void finish(Bench& b, const BenchOptions& opt, const std::vector<BenchTable>& tables) {
  if (!b.printer || opt.output.empty()) return;
  try {
    rocesim::metrics::write_text_file(opt.output, bench_dataset_yaml(b.run, tables));
  } catch (const std::exception& e) {
    throw BenchFailure(kBenchExitFailure, fmt::format("writing the dataset: {}", e.what()));
  }
  print(b, fmt::format("# rocesim-bench: dataset written to {}\n", opt.output));
}

/// Checks that need no GPU and give every rank the same answer. Returns the message or empty.
std::string usage_problem(const BenchOptions& opt, int nranks, bool check_output) {
  const bool broadcast = std::find(opt.collectives.begin(), opt.collectives.end(),
                                   BenchCollective::Broadcast) != opt.collectives.end();
  if (broadcast && opt.root >= nranks)
    return fmt::format("-r: expected a rank below {} (the ranks of the job); found {}", nranks,
                       opt.root);
  if (!nccl_type(opt.datatype)) {
    return fmt::format("-d: {} is not supported by the NCCL rocesim-bench was built with ({})",
                       opt.datatype, NCCL_VERSION_CODE);
  }
  if (!nccl_op(opt.redop)) {
    return fmt::format("-o: {} is not supported by the NCCL rocesim-bench was built with ({})",
                       opt.redop, NCCL_VERSION_CODE);
  }
  if (check_output && !opt.output.empty()) {
    if (const auto problem = output_problem(opt.output))
      return "cannot write the dataset: " + *problem;
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// Single process: one process, every local GPU

int run_single_process(const BenchOptions& opt) {
  int count = 0;
  if (const std::string reason = no_device_reason(count); !reason.empty()) {
    std::cerr << no_device_message("", reason);
    return kBenchExitNoGpu;
  }
  const int n = opt.gpus > 0 ? opt.gpus : count;
  if (n > count) {
    std::cerr << fmt::format(
        "rocesim-bench: --gpus {}: this process sees only {} CUDA device{} (check "
        "CUDA_VISIBLE_DEVICES)\n",
        n, count, count == 1 ? "" : "s");
    return kBenchExitNoGpu;
  }
  if (const std::string problem = usage_problem(opt, n, true); !problem.empty()) {
    std::cerr << fmt::format("rocesim-bench: {}\n", problem);
    return kBenchExitUsage;
  }
  try {
    Bench b;
    b.mpi = false;
    b.nranks = n;
    b.opt = &opt;
    b.timeout_s = opt.timeout_s;
    b.type = *nccl_type(opt.datatype);
    b.op = *nccl_op(opt.redop);
    b.gpus.resize(static_cast<size_t>(n));
    std::vector<int> devices;
    int64_t limit = INT64_MAX;
    for (int i = 0; i < n; ++i) {
      Gpu& g = b.gpus[static_cast<size_t>(i)];
      g.device = i;
      g.rank = i;
      devices.push_back(i);
      limit = std::min(limit, memory_limit_bytes(g));
      b.run.ranks.push_back(describe_gpu(g));
    }
    std::vector<ncclComm_t> comms(static_cast<size_t>(n), nullptr);
    nccl_check(ncclCommInitAll(comms.data(), n, devices.data()), "ncclCommInitAll",
               kBenchExitNoGpu);
    for (size_t i = 0; i < comms.size(); ++i)
      b.gpus[i].comm = comms[i];
    describe_run(b, opt);
    fit_sweep(b, opt, limit);
    for (Gpu& g : b.gpus)
      setup_gpu(g, b.run.sweep.max_bytes, opt.iters);

    std::vector<BenchTable> tables;
    for (const BenchCollective c : opt.collectives)
      tables.push_back(run_collective(b, c));
    finish(b, opt, tables);
    for (Gpu& g : b.gpus)
      teardown_gpu(g);
  } catch (const BenchFailure& f) {
    std::cerr << fmt::format("rocesim-bench: {}\n", f.what());
    return f.code();
  } catch (const std::exception& e) {
    std::cerr << fmt::format("rocesim-bench: {}\n", e.what());
    return kBenchExitFailure;
  }
  return kBenchExitOk;
}

// ---------------------------------------------------------------------------------------------
// MPI: one rank per GPU
#if ROCESIM_BENCH_MPI

/// Rank 0's text (rank records) from every rank, in rank order; empty elsewhere.
std::vector<std::string> gather_text(const std::string& mine, int rank, int size) {
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(rank == 0 ? static_cast<size_t>(size) : 0);
  mpi_check(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD),
            "MPI_Gather");
  std::vector<int> offsets(lengths.size(), 0);
  int total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    offsets[i] = total;
    total += lengths[i];
  }
  std::vector<char> all(static_cast<size_t>(std::max(total, 1)));
  mpi_check(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                        MPI_CHAR, 0, MPI_COMM_WORLD),
            "MPI_Gatherv");
  std::vector<std::string> out;
  for (size_t i = 0; i < lengths.size(); ++i) {
    out.emplace_back(all.data() + offsets[i], static_cast<size_t>(lengths[i]));
  }
  return out;
}

/// Whether two ranks landed on one GPU (the same PCI bus id on the same host): a node running
/// more ranks than it has GPUs, such as a node with fewer GPUs than the others. NCCL would refuse
/// the communicator ("Duplicate GPU detected"); this names the ranks, the host and the counts.
/// Empty on every rank when each rank has its own GPU; otherwise non-empty on every rank, and
/// on rank 0 (which prints it) the message.
std::string shared_gpu_problem(int device, int count, int rank, int size, const std::string& host) {
  char bus[64] = {};
  cuda_check(cudaDeviceGetPCIBusId(bus, sizeof bus, device), "cudaDeviceGetPCIBusId",
             kBenchExitNoGpu);
  const std::vector<std::string> all =
      gather_text(fmt::format("{}\t{}\t{}\t{}", host, bus, device, count), rank, size);
  std::string problem;
  // rank 0: the first rank whose (host, bus id) an earlier rank already has.
  std::vector<std::vector<std::string>> fields;
  for (const std::string& line : all) {
    std::vector<std::string> f;
    size_t start = 0;
    for (size_t tab = line.find('\t'); tab != std::string::npos; tab = line.find('\t', start)) {
      f.push_back(line.substr(start, tab - start));
      start = tab + 1;
    }
    f.push_back(line.substr(start));
    fields.push_back(std::move(f));
  }
  for (size_t r = 0; r < fields.size() && problem.empty(); ++r) {
    for (size_t q = 0; q < r; ++q) {
      if (fields[q][0] != fields[r][0] || fields[q][1] != fields[r][1]) continue;
      const std::string& h = fields[r][0];
      const auto on_host =
          std::count_if(fields.begin(), fields.end(),
                        [&](const std::vector<std::string>& x) { return x[0] == h; });
      problem = fmt::format(
          "rank {} on {} would share CUDA device {} (PCI {}) with rank {}: {} runs {} ranks but "
          "they see {} CUDA device{}; start at most one rank per GPU on every node (check the "
          "launcher's tasks per node and CUDA_VISIBLE_DEVICES)",
          r, h, fields[r][2], fields[r][1], q, h, on_host, fields[r][3],
          fields[r][3] == "1" ? "" : "s");
      break;
    }
  }
  int flag = problem.empty() ? 0 : 1;
  mpi_check(MPI_Bcast(&flag, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast", kBenchExitNoGpu);
  return flag != 0 ? (problem.empty() ? "two ranks share a GPU" : problem) : "";
}

int run_mpi(const BenchOptions& opt, bool launched) {
  int count = 0;
  const std::string reason = no_device_reason(count);
  if (!launched && !reason.empty()) {
    // Started by hand: no other rank waits for this one; do not start MPI at all.
    std::cerr << no_device_message("", reason);
    return kBenchExitNoGpu;
  }
  if (const int rc = MPI_Init(nullptr, nullptr); rc != MPI_SUCCESS) {
    std::cerr << fmt::format("rocesim-bench: MPI_Init failed (error {})\n", rc);
    return kBenchExitNoGpu;
  }
  int rank = 0, size = 1;
  const std::string host = host_name();
  try {
    mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
              kBenchExitNoGpu);
    mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank", kBenchExitNoGpu);
    mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size", kBenchExitNoGpu);

    // Every rank needs a GPU; the ranks without one say so, and all stop.
    int has_gpu = reason.empty() ? 1 : 0;
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, &has_gpu, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce", kBenchExitNoGpu);
    if (has_gpu == 0) {
      if (!reason.empty())
        std::cerr << no_device_message(fmt::format("rank {} on {}: ", rank, host), reason);
      MPI_Finalize();
      return kBenchExitNoGpu;
    }
    // Command-line checks that depend on the job (the same answer on every rank).
    int problem_flag = 0;
    std::string problem = usage_problem(opt, size, rank == 0);
    problem_flag = problem.empty() ? 0 : 1;
    mpi_check(MPI_Bcast(&problem_flag, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    if (problem_flag != 0) {
      if (rank == 0) std::cerr << fmt::format("rocesim-bench: {}\n", problem);
      MPI_Finalize();
      return kBenchExitUsage;
    }

    Bench b;
    b.mpi = true;
    b.nranks = size;
    b.printer = rank == 0;
    b.opt = &opt;
    b.timeout_s = opt.timeout_s;
    b.type = *nccl_type(opt.datatype);
    b.op = *nccl_op(opt.redop);
    b.gpus.resize(1);
    Gpu& g = b.gpus.front();
    g.rank = rank;

    // The GPU: this rank's index among the ranks of its node.
    MPI_Comm local = MPI_COMM_NULL;
    mpi_check(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local),
        "MPI_Comm_split_type", kBenchExitNoGpu);
    int local_rank = 0;
    mpi_check(MPI_Comm_rank(local, &local_rank), "MPI_Comm_rank", kBenchExitNoGpu);
    mpi_check(MPI_Comm_free(&local), "MPI_Comm_free", kBenchExitNoGpu);
    g.device = local_rank % count;
    cuda_check(cudaSetDevice(g.device), "cudaSetDevice", kBenchExitNoGpu);
    if (const std::string shared = shared_gpu_problem(g.device, count, rank, size, host);
        !shared.empty()) {
      if (rank == 0) std::cerr << fmt::format("rocesim-bench: {}\n", shared);
      MPI_Finalize();
      return kBenchExitNoGpu;
    }

    // NCCL, bootstrapped over MPI.
    ncclUniqueId id{};
    if (rank == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId", kBenchExitNoGpu);
    mpi_check(MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast",
              kBenchExitNoGpu);
    nccl_check(ncclCommInitRank(&g.comm, size, id, rank), "ncclCommInitRank", kBenchExitNoGpu);

    // What the run was: every rank's record at rank 0; the memory limit of the smallest GPU.
    const RankRecord me = describe_gpu(g);
    const std::vector<std::string> records = gather_text(encode_rank_record(me), rank, size);
    for (const std::string& r : records)
      b.run.ranks.push_back(decode_rank_record(r));
    if (rank != 0) {
      // Only rank 0 prints and writes, but every rank needs the rank count for the sizes.
      b.run.ranks.assign(static_cast<size_t>(size), me);
    }
    int64_t limit = memory_limit_bytes(g);
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, &limit, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce");
    describe_run(b, opt);
    fit_sweep(b, opt, limit);
    setup_gpu(g, b.run.sweep.max_bytes, opt.iters);

    std::vector<BenchTable> tables;
    for (const BenchCollective c : opt.collectives)
      tables.push_back(run_collective(b, c));
    finish(b, opt, tables);
    mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    teardown_gpu(g);
  } catch (const std::exception& e) {
    const auto* f = dynamic_cast<const BenchFailure*>(&e);
    const int code = f != nullptr ? f->code() : kBenchExitFailure;
    std::cerr << fmt::format("rocesim-bench: rank {} on {}: {}\n", rank, host, e.what());
    std::cerr.flush();
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
    MPI_Finalize();
    return code;
  }
  MPI_Finalize();
  return kBenchExitOk;
}
#endif  // ROCESIM_BENCH_MPI

/// The single-process mode, refused (exit 2) where a launcher started several processes:
/// rank 0 says why, `why` holding a {} for their count.
int run_one_process(const BenchOptions& opt, const std::optional<int>& rank, std::string_view why) {
  if (const int n = launcher_size(); n > 1) {
    if (!rank || *rank == 0) {
      std::cerr << "rocesim-bench: " << fmt::format(fmt::runtime(why), n) << "\n";
    }
    return kBenchExitUsage;
  }
  return run_single_process(opt);
}

}  // namespace

int main(int argc, char** argv) {
  const ParsedBenchArgs args = parse_bench_args(argc, argv);
  // Under a launcher every rank parses the same line: only rank 0 speaks.
  const std::optional<int> rank = launcher_rank();
  if (!args.options) {
    if (!rank || *rank == 0) {
      std::cout << args.out;
      std::cerr << args.err;
    }
    return args.exit_code;
  }
  if (args.options->single_process) {
    return run_one_process(*args.options, rank,
                           "--single-process drives every GPU of a node from one process, but "
                           "the launcher started {} processes; start one (mpirun -np 1, srun -n "
                           "1), or leave out --single-process for one rank per GPU");
  }
#if ROCESIM_BENCH_MPI
  return run_mpi(*args.options, rank.has_value());
#else
  // Built without MPI: one process, as nccl-tests built without it runs.
  BenchOptions one = *args.options;
  if (one.gpus == 0) one.gpus = 1;  // by hand, as an MPI build runs: one rank on one GPU
  return run_one_process(one, rank,
                         "this build has no MPI (configure found none), so it cannot run one "
                         "rank per GPU under a launcher that started {} processes; run one "
                         "process per node with --single-process, or rebuild with Open MPI "
                         "(libopenmpi-dev)");
#endif
}
