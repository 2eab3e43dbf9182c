// Stand-in for <cuda_bf16.h> (tests/calibrate/standin/README.md): rocesim-bench includes it for
// the bfloat16 type macro only; no bfloat16 arithmetic is needed without kernels.
#pragma once

#include "cuda_runtime.h"

#define __CUDA_BF16_TYPES_EXIST__
