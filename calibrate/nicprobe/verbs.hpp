// A thin RAII layer over libibverbs for rocesim-nicprobe.
//
// Every verbs object the tool creates has an owner here that releases it exactly once, in the
// order verbs requires (queue pairs before their completion queues, memory regions before their
// protection domain, everything before the device context): declare the owners in creation
// order and C++ destroys them in reverse. Every call is checked: a failure throws VerbsError
// with the call's name and errno ("ibv_modify_qp(RTR) failed: Invalid argument (errno 22)").
// Verbs reports errors two ways, both handled: calls that return an int return 0 or an errno
// value (some return -1 and set errno), calls that return a pointer return NULL and set errno.
#pragma once

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rocesim::nicprobe {

/// A verbs call failed or the device cannot run the test (port down, no address): the device is
/// unusable, exit code 3.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// "CALL failed: strerror(err) (errno err)".
[[noreturn]] void throw_verbs(std::string_view call, int err);

/// Checks a verbs call that returns 0 on success, else an errno value or -1 with errno set.
inline void check_rc(int rc, std::string_view call) {
  if (rc != 0) throw_verbs(call, rc > 0 ? rc : errno);
}

/// Checks a verbs call that returns a pointer (NULL with errno set on failure).
template <typename T>
T* check_ptr(T* p, std::string_view call) {
  if (p == nullptr) throw_verbs(call, errno);
  return p;
}

// Deleters: they run in destructors and cannot throw, so a failed release is reported on stderr.
struct ContextDeleter {
  void operator()(ibv_context* p) const;
};
struct PdDeleter {
  void operator()(ibv_pd* p) const;
};
struct MrDeleter {
  void operator()(ibv_mr* p) const;
};
struct CqDeleter {
  void operator()(ibv_cq* p) const;
};
struct QpDeleter {
  void operator()(ibv_qp* p) const;
};
struct FreeDeleter {
  void operator()(void* p) const;
};

using Context = std::unique_ptr<ibv_context, ContextDeleter>;
using Pd = std::unique_ptr<ibv_pd, PdDeleter>;
using Mr = std::unique_ptr<ibv_mr, MrDeleter>;
using Cq = std::unique_ptr<ibv_cq, CqDeleter>;
using Qp = std::unique_ptr<ibv_qp, QpDeleter>;

/// The list of ibv_get_device_list(), freed with ibv_free_device_list().
class DeviceList {
 public:
  /// Throws DeviceError when verbs cannot list devices at all (no kernel RDMA support: ENOSYS).
  DeviceList();
  ~DeviceList();
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;

  std::span<ibv_device* const> devices() const { return {list_, static_cast<size_t>(count_)}; }
  /// The device named `name`; nullptr when there is none.
  ibv_device* find(std::string_view name) const;

 private:
  ibv_device** list_ = nullptr;
  int count_ = 0;
};

/// ibv_open_device(); throws DeviceError.
Context open_device(ibv_device* device);

/// Page-aligned, zeroed host memory (the buffers the NIC reads and writes).
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t bytes);
  uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<uint8_t, FreeDeleter> data_;
  size_t size_ = 0;
};

}  // namespace rocesim::nicprobe
