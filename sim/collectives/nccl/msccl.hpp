// RCCL's MSCCL algorithms: hand-written schedules (XML files in ROCm/rccl tools/msccl-algorithms,
// installed with the library) that RCCL runs instead of its own rings and trees when one matches
// the operation (src/misc/msccl/msccl_lifecycle.cc, mscclInternalSchedulerSelectAlgo). RCCL
// looks for one before its tuner, so NCCL_ALGO and NCCL_PROTO do not steer it.
//
// When: RCCL_MSCCL_ENABLE (default 1), and the node matched a rome model whose options say
// mscclEnabled=1: model 79, 8 GPUs in an all-to-all xGMI mesh and no NIC (a communicator inside
// one server: RCCL trims the NICs then), the MI300X platform (src/graph/rome_models.cc). A
// schedule matches the collective, the rank count, in- or out-of-place, minBytes <= size <=
// maxBytes and an element count divisible by its chunks per loop.
//
// The AllReduce schedules for 8 ranks, out of place (what nccl-tests reports) are all-pairs:
// every rank sends to every other directly over its own xGMI link, either its whole buffer
// (one pass, then each reduces the 7 copies it received) or the 1/8 block each peer owns
// (reduce-scatter) and then, reduced, its own block to every peer (all-gather).
#pragma once

#include <cstdint>
#include <string_view>

#include "sim/collectives/nccl/nccl.hpp"

namespace rocesim::collectives::nccl {

struct MscclAlgorithm {
  std::string_view file;  // the XML in ROCm/rccl tools/msccl-algorithms
  int64_t min_bytes, max_bytes;
  Protocol protocol;
  int channels;         // its nchannels: each peer connection runs on every channel
  int chunks_per_loop;  // the element count must be a multiple of it
  bool one_pass;        // each rank sends its whole buffer to every peer (no all-gather pass)
};

/// The element size MSCCL's divisibility rule is applied with: fp32, nccl-tests' default (the
/// operation itself carries only its bytes).
inline constexpr int64_t kMscclElementBytes = 4;

/// The schedule RCCL's internal MSCCL scheduler picks for an out-of-place AllReduce of `bytes`
/// on `nranks` ranks of an MSCCL-enabled node, or nullptr (RCCL's own algorithms then run).
const MscclAlgorithm* msccl_allreduce(int nranks, int64_t bytes);

}  // namespace rocesim::collectives::nccl
