#include "calibrate/nicprobe/verbs.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace rocesim::nicprobe {
namespace {

void report_release_failure(const char* call, int rc) {
  const int err = rc > 0 ? rc : errno;
  std::fprintf(stderr, "rocesim-nicprobe: warning: %s failed: %s (errno %d)\n", call,
               std::strerror(err), err);
}

}  // namespace

void throw_verbs(std::string_view call, int err) {
  throw DeviceError(fmt::format("{} failed: {} (errno {})", call, std::strerror(err), err));
}

void ContextDeleter::operator()(ibv_context* p) const {
  if (const int rc = ibv_close_device(p); rc != 0) report_release_failure("ibv_close_device", rc);
}
void PdDeleter::operator()(ibv_pd* p) const {
  if (const int rc = ibv_dealloc_pd(p); rc != 0) report_release_failure("ibv_dealloc_pd", rc);
}
void MrDeleter::operator()(ibv_mr* p) const {
  if (const int rc = ibv_dereg_mr(p); rc != 0) report_release_failure("ibv_dereg_mr", rc);
}
void CqDeleter::operator()(ibv_cq* p) const {
  if (const int rc = ibv_destroy_cq(p); rc != 0) report_release_failure("ibv_destroy_cq", rc);
}
void QpDeleter::operator()(ibv_qp* p) const {
  if (const int rc = ibv_destroy_qp(p); rc != 0) report_release_failure("ibv_destroy_qp", rc);
}
void FreeDeleter::operator()(void* p) const {
  std::free(p);
}

DeviceList::DeviceList() {
  errno = 0;
  list_ = ibv_get_device_list(&count_);
  if (list_ == nullptr) {
    const int err = errno != 0 ? errno : ENOSYS;
    // ENOSYS: the kernel has no RDMA subsystem (no /sys/class/infiniband_verbs).
    throw DeviceError(fmt::format(
        "no RDMA device: ibv_get_device_list failed: {} (errno {}){}", std::strerror(err), err,
        err == ENOSYS ? "; this kernel has no RDMA support loaded (a driver such as mlx5_ib)"
                      : ""));
  }
}

DeviceList::~DeviceList() {
  if (list_ != nullptr) ibv_free_device_list(list_);
}

ibv_device* DeviceList::find(std::string_view name) const {
  for (ibv_device* d : devices()) {
    if (name == ibv_get_device_name(d)) return d;
  }
  return nullptr;
}

Context open_device(ibv_device* device) {
  return Context(check_ptr(ibv_open_device(device),
                           fmt::format("ibv_open_device({})", ibv_get_device_name(device))));
}

HostBuffer::HostBuffer(size_t bytes) {
  const long page_size = ::sysconf(_SC_PAGESIZE);
  const size_t page = page_size > 0 ? static_cast<size_t>(page_size) : 4096;
  size_ = (bytes + page - 1) / page * page;
  void* p = std::aligned_alloc(page, size_);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, size_);
  data_.reset(static_cast<uint8_t*>(p));
}

}  // namespace rocesim::nicprobe
