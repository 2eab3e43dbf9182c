// Stand-in CUDA runtime (tests/calibrate/standin/README.md): virtual GPUs for running
// rocesim-bench without one. Implements the calls of include/cuda_runtime.h.
//
//  * Devices: ROCESIM_STANDIN_GPUS per node (default 1), or a comma list with one count per
//    virtual node ("2,1"), of which this process takes entry ROCESIM_STANDIN_NODE (default 0;
//    standin-node.sh sets it). Each has 80 GiB and a PCI bus id that is unique across virtual
//    nodes: domain = node, bus = 0x10 + device.
//  * Memory: device pointers are address space without access (mmap PROT_NONE): a host access to
//    one crashes, as on a real GPU; cudaMemset checks its range and does nothing else.
//  * Streams keep a virtual clock in microseconds; the stand-in NCCL advances it by the duration
//    of each operation (standin_device.hpp). Work completes at once unless it hangs:
//    cudaStreamQuery is cudaSuccess, or cudaErrorNotReady forever after a hung operation. An
//    event records its stream's clock; cudaEventElapsedTime is the difference, in milliseconds.
//  * Strict where the bench could go wrong: unknown devices, streams, events and pointers, an
//    event that was never recorded, an allocation larger than the device, are errors. At exit,
//    objects never released are reported on stderr as "stand-in CUDA: ...".
#include <fmt/format.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "standin_device.hpp"

struct CUstream_st {
  int device = 0;
  double clock_us = 0;  // when the work enqueued so far ends
  bool hung = false;
};

struct CUevent_st {
  bool recorded = false;
  bool pending = false;  // recorded behind hung work
  double at_us = 0;
};

namespace {

constexpr size_t kDeviceMemory = size_t{80} << 30;

struct Runtime {
  std::mutex mutex;
  std::map<const char*, size_t> allocations;  // start -> size
  std::set<CUstream_st*> streams;
  std::set<CUevent_st*> events;

  ~Runtime() {
    if (allocations.empty() && streams.empty() && events.empty()) return;
    std::fprintf(stderr,
                 "stand-in CUDA: %zu device allocations, %zu streams and %zu events never "
                 "released\n",
                 allocations.size(), streams.size(), events.size());
  }
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

thread_local int g_device = 0;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::atoi(v);
}

/// This process's virtual node.
int node() {
  return std::max(0, env_int("ROCESIM_STANDIN_NODE", 0));
}

/// The GPUs of this process's virtual node.
int device_count() {
  const char* v = std::getenv("ROCESIM_STANDIN_GPUS");
  if (v == nullptr || *v == '\0') return 1;
  std::vector<int> counts;
  std::string text(v);
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    counts.push_back(std::atoi(text.substr(start, comma - start).c_str()));
    start = comma + 1;
  }
  const size_t n = static_cast<size_t>(node());
  return std::max(0, n < counts.size() ? counts[n] : counts.back());
}

bool valid_device(int device) {
  return device >= 0 && device < device_count();
}

}  // namespace

namespace rocesim::standin {

int current_device() {
  return g_device;
}

bool valid_stream(cudaStream_t stream) {
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  return r.streams.count(stream) != 0;
}

int stream_device(cudaStream_t stream) {
  return stream->device;
}

void stream_advance(cudaStream_t stream, double us) {
  stream->clock_us += us;
}

void stream_hang(cudaStream_t stream) {
  stream->hung = true;
}

std::string check_buffer(const void* p, size_t bytes) {
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  const char* c = static_cast<const char*>(p);
  auto it = r.allocations.upper_bound(c);
  if (it == r.allocations.begin()) return fmt::format("{} is not a device pointer", p);
  --it;
  if (c >= it->first + it->second) return fmt::format("{} is not a device pointer", p);
  const size_t offset = static_cast<size_t>(c - it->first);
  if (bytes > it->second - offset) {
    return fmt::format("{} bytes at offset {} overrun the {}-byte device allocation", bytes, offset,
                       it->second);
  }
  return "";
}

}  // namespace rocesim::standin

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInitializationError:
      return "initialization error";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorUnknown:
      break;
  }
  return "unknown error";
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError:
      return "cudaErrorInitializationError";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorUnknown:
      break;
  }
  return "cudaErrorUnknown";
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count();
  return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!valid_device(device)) return cudaErrorInvalidDevice;
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "rocesim stand-in GPU");
  prop->totalGlobalMem = kDeviceMemory;
  prop->pciDomainID = node();
  prop->pciBusID = 0x10 + device;
  prop->pciDeviceID = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  if (!valid_device(device)) return cudaErrorInvalidDevice;
  if (len <= 0) return cudaErrorInvalidValue;
  std::snprintf(pciBusId, static_cast<size_t>(len), "%04x:%02x:00.0", node(), 0x10 + device);
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) return cudaErrorInvalidDevice;
  g_device = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  *runtimeVersion = 12080;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* driverVersion) {
  *driverVersion = 12080;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  if (devPtr == nullptr) return cudaErrorInvalidValue;
  if (size == 0 || size > kDeviceMemory) return cudaErrorMemoryAllocation;
  void* p = ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return cudaErrorMemoryAllocation;
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  r.allocations[static_cast<const char*>(p)] = size;
  *devPtr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* devPtr) {
  if (devPtr == nullptr) return cudaSuccess;
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  const auto it = r.allocations.find(static_cast<const char*>(devPtr));
  if (it == r.allocations.end()) return cudaErrorInvalidValue;
  ::munmap(devPtr, it->second);
  r.allocations.erase(it);
  return cudaSuccess;
}

cudaError_t cudaMemset(void* devPtr, int /*value*/, size_t count) {
  return rocesim::standin::check_buffer(devPtr, count).empty() ? cudaSuccess
                                                               : cudaErrorInvalidValue;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int /*flags*/) {
  auto* s = new CUstream_st;
  s->device = g_device;
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  r.streams.insert(s);
  *pStream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  if (r.streams.erase(stream) == 0) return cudaErrorInvalidResourceHandle;
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (!rocesim::standin::valid_stream(stream)) return cudaErrorInvalidResourceHandle;
  return stream->hung ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  auto* e = new CUevent_st;
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  r.events.insert(e);
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  if (r.events.erase(event) == 0) return cudaErrorInvalidResourceHandle;
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  // The legacy default stream (0) is never used by the bench: refuse it rather than guess.
  if (!rocesim::standin::valid_stream(stream)) return cudaErrorInvalidResourceHandle;
  {
    Runtime& r = runtime();
    std::lock_guard lock(r.mutex);
    if (r.events.count(event) == 0) return cudaErrorInvalidResourceHandle;
  }
  event->recorded = true;
  event->pending = stream->hung;
  event->at_us = stream->clock_us;
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  {
    Runtime& r = runtime();
    std::lock_guard lock(r.mutex);
    if (r.events.count(start) == 0 || r.events.count(end) == 0)
      return cudaErrorInvalidResourceHandle;
  }
  if (!start->recorded || !end->recorded) return cudaErrorInvalidResourceHandle;
  if (start->pending || end->pending) return cudaErrorNotReady;
  *ms = static_cast<float>((end->at_us - start->at_us) * 1e-3);
  return cudaSuccess;
}
