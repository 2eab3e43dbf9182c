// MPI for the commands that spread work over processes (`mpirun -np N rocesim sweep ...`).
// Built with Open MPI when CMake finds it (ROCESIM_HAVE_MPI); MPI is started only in a process
// that mpirun launched (its environment says so), so a plain `rocesim` never pays for it.
// Without MPI, or outside mpirun, there is one process: rank 0 of 1.
#pragma once

#include <cstdint>
#include <vector>

namespace rocesim::cli::mpi {

/// Starts MPI when launched by mpirun; safe to call once at start-up.
void init(int* argc, char*** argv);
/// Ends MPI if it was started.
void finalize();
int rank();
int size();
void barrier();
/// Rank 0's `values` on every rank.
void broadcast(std::vector<uint32_t>& values);
/// The largest of every rank's `value`.
int max_all(int value);

}  // namespace rocesim::cli::mpi
