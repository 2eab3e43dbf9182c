// What the stand-in CUDA runtime (standin_cuda.cpp) offers the stand-in NCCL (standin_nccl.cpp)
// beyond the CUDA API: the virtual clock of a stream, and checks of the device buffers an
// operation touches. Test code only (tests/calibrate/standin/README.md).
#pragma once

#include <cstddef>
#include <string>

#include "cuda_runtime.h"

namespace rocesim::standin {

/// The device the calling thread has selected (cudaSetDevice), as NCCL takes it at
/// communicator creation.
int current_device();

/// Whether `stream` is a live stream of the stand-in runtime.
bool valid_stream(cudaStream_t stream);

/// The device `stream` was created on (valid_stream must hold).
int stream_device(cudaStream_t stream);

/// Work of `us` microseconds enqueued on `stream`: its clock, which events record, moves on.
void stream_advance(cudaStream_t stream, double us);

/// Work that never completes enqueued on `stream`: from now on cudaStreamQuery says
/// cudaErrorNotReady and events recorded after it never complete.
void stream_hang(cudaStream_t stream);

/// Empty when [p, p + bytes) lies inside one live device allocation; otherwise why not (for the
/// error text of the operation that was given it).
std::string check_buffer(const void* p, size_t bytes);

}  // namespace rocesim::standin
