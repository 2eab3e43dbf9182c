#include "sim/collectives/nccl/msccl.hpp"

#include <array>

namespace rocesim::collectives::nccl {
namespace {

// The out-of-place AllReduce schedules for 8 ranks of ROCm/rccl tools/msccl-algorithms, each
// file's <algo> attributes (proto, nchannels, nchunksperloop, minBytes, maxBytes) as read at
// commits 4e1b8c1c (ll-1pass-op, ll-64tb-op) and aad52400 (ll-32tb-op, simple-op). Their size
// ranges do not overlap, so the scheduler's file order does not matter.
constexpr std::array<MscclAlgorithm, 4> kAllReduce8{{
    {"allreduce-allpairs-8n-ll-1pass-op.xml", 0, 25599, Protocol::LL, 2, 16, true},
    {"allreduce-allpairs-8n-ll-32tb-op.xml", 25600, 65536, Protocol::LL, 4, 256, false},
    {"allreduce-allpairs-8n-ll-64tb-op.xml", 65537, 524287, Protocol::LL, 8, 512, false},
    {"allreduce-allpairs-8n-simple-op.xml", 524288, 16777216, Protocol::Simple, 8, 512, false},
}};

}  // namespace

const MscclAlgorithm* msccl_allreduce(int nranks, int64_t bytes) {
  if (nranks != 8 || bytes <= 0) return nullptr;
  const int64_t count = bytes / kMscclElementBytes;
  for (const MscclAlgorithm& a : kAllReduce8) {
    if (count > 0 && count % a.chunks_per_loop == 0 && bytes >= a.min_bytes &&
        bytes <= a.max_bytes) {
      return &a;
    }
  }
  return nullptr;
}

}  // namespace rocesim::collectives::nccl
