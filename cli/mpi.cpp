#include "cli/mpi.hpp"

#include <cstdlib>

#ifdef ROCESIM_HAVE_MPI
#include <mpi.h>
#endif

namespace rocesim::cli::mpi {
namespace {

bool g_started = false;
int g_rank = 0;
int g_size = 1;

/// Whether mpirun (Open MPI, or a PMI launcher) started this process.
bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

}  // namespace

void init(int* argc, char*** argv) {
#ifdef ROCESIM_HAVE_MPI
  if (g_started || !launched_by_mpirun()) return;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  g_started = true;
#else
  (void)argc;
  (void)argv;
#endif
}

void finalize() {
#ifdef ROCESIM_HAVE_MPI
  if (g_started) MPI_Finalize();
  g_started = false;
#endif
}

int rank() {
  return g_rank;
}

int size() {
  return g_size;
}

void barrier() {
#ifdef ROCESIM_HAVE_MPI
  if (g_started) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void broadcast(std::vector<uint32_t>& values) {
#ifdef ROCESIM_HAVE_MPI
  if (!g_started) return;
  auto n = static_cast<unsigned long long>(values.size());
  MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  values.resize(static_cast<size_t>(n));
  if (n > 0) MPI_Bcast(values.data(), static_cast<int>(n), MPI_UINT32_T, 0, MPI_COMM_WORLD);
#else
  (void)values;
#endif
}

int max_all(int value) {
#ifdef ROCESIM_HAVE_MPI
  if (!g_started) return value;
  int out = value;
  MPI_Allreduce(&value, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return out;
#else
  return value;
#endif
}

}  // namespace rocesim::cli::mpi
