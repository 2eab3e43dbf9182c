#include "sim/metrics/output_files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "sim/core/error.hpp"

namespace rocesim::metrics {
namespace fs = std::filesystem;
namespace {

// Temporaries in flight, for the signal handler: fixed slots of plain characters, claimed and
// released through atomics, so that the handler reads them without locks or allocation.
constexpr int kSlots = 64;
constexpr size_t kMaxPath = 4096;
struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 registered
  char path[kMaxPath];
};
Slot g_slots[kSlots];

/// A slot for `path`, or -1 (a path too long, or more than kSlots outputs at once: still
/// removed on failure, only not on a signal).
int register_temporary(const std::string& path) {
  if (path.size() >= kMaxPath) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].state.store(2);
      return i;
    }
  }
  return -1;
}

void unregister_temporary(int slot) {
  if (slot >= 0) g_slots[slot].state.store(0);
}

extern "C" void remove_temporaries_and_die(int sig) {
  for (Slot& s : g_slots) {
    if (s.state.load() == 2) ::unlink(s.path);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

SourceLocation command_line() {
  return SourceLocation{std::make_shared<const std::string>("command line"), 0, 0};
}

/// What an existing path is, for "found ..." in messages.
std::string kind_of(const fs::file_status& st) {
  switch (st.type()) {
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::block:
    case fs::file_type::character:
      return "a device";
    case fs::file_type::socket:
      return "a socket";
    case fs::file_type::symlink:
      return "a symbolic link";
    default:
      return "not a regular file";
  }
}

fs::path parent_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

void remove_quietly(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
}

/// Whether a file can be made in `dir`: a probe file is created and removed (permissions alone
/// do not tell, e.g. on a read-only mount or an immutable directory, or for root). On failure,
/// throws for `option` naming `path`.
void check_writable(const fs::path& dir, const std::string& path, const std::string& option) {
  // Named by host and process: ranks of an MPI sweep on several hosts may share the directory.
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  const fs::path probe =
      dir / fmt::format(".rocesim-probe-{}-{}", host, static_cast<long>(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    const int err = errno;
    throw InputError(
        command_line(), option, "a place this process may write",
        fmt::format("'{}', where no file can be created ({})", path, std::strerror(err)));
  }
  ::close(fd);
  std::error_code ec;
  fs::remove(probe, ec);
}

/// HDF5's signature at the start of the file or of a user block (512 bytes times a power of 2).
bool is_hdf5(const std::string& path) {
  static constexpr char kSignature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  std::ifstream in(path, std::ios::binary);
  for (std::streamoff at = 0; in; at = at == 0 ? 512 : 2 * at) {
    char head[8] = {};
    in.seekg(at);
    if (!in.read(head, sizeof(head))) return false;
    if (std::memcmp(head, kSignature, sizeof(head)) == 0) return true;
  }
  return false;
}

}  // namespace

void check_output_path(const std::string& path, const std::string& option, bool hdf5) {
  if (path.empty()) throw InputError(command_line(), option, "a file name", "an empty name");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    throw InputError(command_line(), option, "a regular file or a new file name",
                     fmt::format("'{}', which is {}", path, kind_of(st)));
  }
  if (hdf5 && fs::is_regular_file(st) && fs::file_size(path, ec) > 0 && !is_hdf5(path)) {
    throw InputError(command_line(), option, "an HDF5 file to replace, or a new file name",
                     fmt::format("'{}', which exists and is not an HDF5 file", path));
  }
  const fs::path parent = parent_of(path);
  if (!fs::is_directory(parent, ec)) {
    throw InputError(
        command_line(), option, "a file in an existing directory",
        fmt::format("'{}', whose directory '{}' does not exist", path, parent.string()));
  }
  check_writable(parent, path, option);
}

void check_output_dir(const std::string& dir, const std::string& option) {
  if (dir.empty()) throw InputError(command_line(), option, "a directory name", "an empty name");
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st)) {
    throw InputError(command_line(), option, "a directory or a new directory name",
                     fmt::format("'{}', which is {}", dir, kind_of(st)));
  }
  const fs::path parent = parent_of(fs::path(dir).lexically_normal().string());
  if (!fs::exists(st) && !fs::is_directory(parent, ec)) {
    throw InputError(command_line(), option, "a directory in an existing directory",
                     fmt::format("'{}', whose parent '{}' does not exist", dir, parent.string()));
  }
  check_writable(fs::exists(st) ? fs::path(dir) : parent, dir, option);
}

std::string temporary_path(const std::string& path) {
  return fmt::format("{}.tmp-{}", path, static_cast<long>(::getpid()));
}

void remove_stale_temporaries(const std::string& path) {
  const std::string prefix = fs::path(path).filename().string() + ".tmp-";
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(parent_of(path), ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(prefix) || name.size() == prefix.size() ||
        name.size() > prefix.size() + 9)
      continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid()) continue;
    if (::kill(pid, 0) == -1 && errno == ESRCH) remove_quietly(e.path().string());
  }
}

namespace {
constexpr uintmax_t kFullBelow = 64u << 10;  // bytes free under which a disk counts as full
}  // namespace

bool disk_is_full(const std::string& path) {
  std::error_code ec;
  const fs::space_info space = fs::space(parent_of(path), ec);
  return !ec && space.available < kFullBelow;
}

std::string write_failure(const std::string& path, const std::string& what) {
  if (disk_is_full(path)) {
    std::error_code ec;
    return fmt::format("cannot write '{}': the disk is full ({} bytes free); {}", path,
                       fs::space(parent_of(path), ec).available, what);
  }
  return fmt::format("cannot write '{}': {}", path, what);
}

void remove_temporaries_on_signals() {
  struct sigaction action {};
  action.sa_handler = remove_temporaries_and_die;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

TemporaryFile::TemporaryFile(std::string path) : path_(std::move(path)) {
  const std::string suffix = fmt::format(".tmp-{}", static_cast<long>(::getpid()));
  staged_ = path_.ends_with(suffix);
  if (staged_) {
    tmp_ = path_;  // an OutputSet's: registered and committed by it
    return;
  }
  remove_stale_temporaries(path_);
  tmp_ = temporary_path(path_);
  slot_ = register_temporary(tmp_);
}

TemporaryFile::~TemporaryFile() {
  if (!committed_ && !staged_) remove_quietly(tmp_);
  unregister_temporary(slot_);
}

void TemporaryFile::commit() {
  if (staged_) {
    committed_ = true;
    return;
  }
  std::error_code ec;
  fs::rename(tmp_, path_, ec);
  if (ec) throw std::runtime_error(write_failure(path_, ec.message()));
  committed_ = true;
}

OutputSet::~OutputSet() {
  for (const Staged& s : staged_) {
    remove_quietly(s.tmp);
    unregister_temporary(s.slot);
  }
}

std::string OutputSet::stage(const std::string& path) {
  remove_stale_temporaries(path);
  Staged s{path, temporary_path(path), -1};
  s.slot = register_temporary(s.tmp);
  staged_.push_back(s);
  return s.tmp;
}

void OutputSet::drop(const std::string& path) {
  for (auto it = staged_.begin(); it != staged_.end(); ++it) {
    if (it->path == path) {
      remove_quietly(it->tmp);
      unregister_temporary(it->slot);
      staged_.erase(it);
      return;
    }
  }
}

void OutputSet::commit() {
  // Every staged file must be there before any is renamed: all or nothing.
  for (const Staged& s : staged_) {
    if (!fs::is_regular_file(s.tmp)) {
      throw std::runtime_error(write_failure(s.path, "it was not written"));
    }
  }
  for (Staged& s : staged_) {
    std::error_code ec;
    fs::rename(s.tmp, s.path, ec);
    if (ec) throw std::runtime_error(write_failure(s.path, ec.message()));
    unregister_temporary(s.slot);
  }
  staged_.clear();
}

}  // namespace rocesim::metrics
