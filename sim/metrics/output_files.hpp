// Output files: where rocesim may write, and how a file appears there. Every output is written
// under a temporary name beside it ("<path>.tmp-<pid>") and renamed into place when complete,
// so a reader never sees half a file; several outputs of one command (OutputSet) are renamed
// together at the end, so they appear together or not at all. Temporaries in flight are
// removed when the write fails, when the command fails, and on SIGINT or SIGTERM; temporaries
// left by processes that no longer exist (killed with SIGKILL, a machine that lost power) are
// removed by the next write to the same path.
#pragma once

#include <string>
#include <vector>

namespace rocesim::metrics {

/// Checks, before any work, that `path` can be an output file: a non-empty name whose
/// directory exists, and either new or an existing regular file (never a FIFO, a device, a
/// socket or a directory, which a rename would replace). With `hdf5`, an existing non-empty
/// file must be an HDF5 file (results are never written over a scenario, a CSV of flows or
/// anything else given by mistake). Throws InputError naming `option`.
void check_output_path(const std::string& path, const std::string& option, bool hdf5 = false);
/// The same for an output directory: a non-empty name that is a directory or does not exist yet
/// (it is created) in an existing parent.
void check_output_dir(const std::string& dir, const std::string& option);

/// "<path>.tmp-<pid>" of this process.
std::string temporary_path(const std::string& path);
/// Removes the temporaries of `path` ("<path>.tmp-<pid>") whose process is gone.
void remove_stale_temporaries(const std::string& path);
/// Whether the file system that holds `path` has (almost) no space left.
bool disk_is_full(const std::string& path);
/// The message for a failed write of `path`: `what` went wrong, and when the file system has
/// no space left, that the disk is full.
std::string write_failure(const std::string& path, const std::string& what);

/// Removes every registered temporary on SIGINT and SIGTERM, then ends the process by the same
/// signal. Commands that handle these signals themselves (`rocesim sweep`) replace it while
/// they run.
void remove_temporaries_on_signals();

/// One output being written: its temporary, registered for removal on a signal, and removed by
/// the destructor unless commit() renamed it into place. When `path` is itself a temporary of
/// this process (a file staged by an OutputSet), it is written directly and commit() leaves it.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string path);
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  /// Where to write.
  const std::string& path() const { return tmp_; }
  /// Renames the temporary into place. Throws std::runtime_error (write_failure's message).
  void commit();

 private:
  std::string path_, tmp_;
  int slot_ = -1;
  bool staged_ = false, committed_ = false;
};

/// Outputs of one command that appear together: stage() gives the name to write each one to
/// (its temporary), commit() renames them all; the destructor removes what was not committed.
class OutputSet {
 public:
  OutputSet() = default;
  ~OutputSet();
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  std::string stage(const std::string& path);
  /// Drops a staged output (e.g. a plot that failed): it will not be committed.
  void drop(const std::string& path);
  void commit();

 private:
  struct Staged {
    std::string path, tmp;
    int slot = -1;
  };
  std::vector<Staged> staged_;
};

}  // namespace rocesim::metrics
