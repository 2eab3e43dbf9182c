// Stand-in CUDA runtime API for testing rocesim-bench without a GPU (tests/calibrate/standin/
// README.md). Declares exactly the subset of the CUDA runtime that calibrate/bench/
// rocesim_bench.cpp calls, with the names, types and signatures of the real <cuda_runtime.h>, so
// that the bench compiles from its unchanged source against either. Implemented by
// standin_cuda.cpp: virtual GPUs whose streams keep a virtual clock that the stand-in NCCL
// advances.
#pragma once

#include <cstddef>

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidDevice = 101,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorUnknown = 999,
};
typedef enum cudaError cudaError_t;

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;

#define cudaStreamNonBlocking 0x01

/// The fields of cudaDeviceProp the bench reads (the real struct has many more).
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int pciBusID;
  int pciDeviceID;
  int pciDomainID;
};

const char* cudaGetErrorString(cudaError_t error);
const char* cudaGetErrorName(cudaError_t error);

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaRuntimeGetVersion(int* runtimeVersion);
cudaError_t cudaDriverGetVersion(int* driverVersion);

cudaError_t cudaMalloc(void** devPtr, size_t size);
cudaError_t cudaFree(void* devPtr);
cudaError_t cudaMemset(void* devPtr, int value, size_t count);

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
