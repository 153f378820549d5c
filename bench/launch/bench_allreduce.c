/* bench/launch/bench_allreduce.c: ftl_allreduce against raw MPI_Allreduce of the same buffers,
 * 1 KiB to 64 MiB, in alternating rounds within one run so machine noise hits both alike.
 * Started by bench-launch under mpirun; rank 0 prints one table row per size.
 * Usage: bench-allreduce [--smoke]: --smoke is the smallest size (1 KiB to 64 KiB, 3 rounds), for
 * the test suite's smoke test (bench-launch --smoke). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/ftl.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  ftl_ctx *ctx = NULL;
  if (ftl_init(&argc, &argv, &ctx)) {
    fprintf(stderr, "ftl_init: %s\n", ftl_ctx_errmsg(ctx));
    ftl_finalize(ctx);
    return 1;
  }
  int rank = ftl_ctx_info(ctx)->rank, world = ftl_ctx_info(ctx)->world_size;
  int smoke = 0;
  for (int i = 1; i < argc; i++)
    smoke |= strcmp(argv[i], "--smoke") == 0;
  const size_t max_bytes = smoke ? (size_t)64 << 10 : (size_t)64 << 20;
  float *send = malloc(max_bytes), *recv = malloc(max_bytes);
  if (!send || !recv) return 1;
  /* Pre-fault both buffers: first touch here runs at a fraction of memcpy speed. */
  for (size_t i = 0; i < max_bytes / sizeof(float); i++) send[i] = recv[i] = (float)(i % 13);
  enum { MAX_ROUNDS = 21 };
  const int rounds = smoke ? 3 : MAX_ROUNDS;
  if (rank == 0) {
    printf("allreduce bandwidth, %d ranks, bus GB/s = 2(n-1)/n * bytes / time, median of %d alternating rounds\n", world, rounds);
    printf("%10s %12s %12s %8s\n", "size", "MPI GB/s", "ftl GB/s", "ftl/MPI");
  }
  int below = 0;
  for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
    size_t count = bytes / sizeof(float);
    /* Short batches, many rounds: a burst of noise then spoils one round of one side, and the
     * median discards it. */
    int iters = (int)(((size_t)64 << 20) / bytes);
    if (iters > 100) iters = 100;
    if (iters < 2) iters = 2;
    double t_mpi[MAX_ROUNDS], t_ftl[MAX_ROUNDS];
    for (int r = -1; r < rounds; r++) { /* round -1 warms both paths up */
      for (int which = 0; which < 2; which++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
          if (which == 0) MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
          else ftl_allreduce(ctx, send, recv, count, FTL_DTYPE_F32, FTL_OP_SUM);
        }
        double dt = (MPI_Wtime() - t0) / iters;
        /* The slowest rank defines a collective's time. */
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (r >= 0) (which == 0 ? t_mpi : t_ftl)[r] = dt;
      }
    }
    qsort(t_mpi, (size_t)rounds, sizeof(double), cmp_double);
    qsort(t_ftl, (size_t)rounds, sizeof(double), cmp_double);
    double factor = world > 1 ? 2.0 * (world - 1) / world : 1.0;
    double bw_mpi = factor * (double)bytes / t_mpi[rounds / 2] / 1e9;
    double bw_ftl = factor * (double)bytes / t_ftl[rounds / 2] / 1e9;
    double ratio = bw_ftl / bw_mpi;
    if (ratio < 0.97) below++;
    if (rank == 0) {
      char label[32];
      if (bytes >= (1 << 20)) snprintf(label, sizeof label, "%zu MiB", bytes >> 20);
      else snprintf(label, sizeof label, "%zu KiB", bytes >> 10);
      printf("%10s %12.3f %12.3f %8.3f\n", label, bw_mpi, bw_ftl, ratio);
    }
  }
  if (rank == 0) printf("sizes below the 0.97 goal: %d\n", below);
  free(send);
  free(recv);
  ftl_finalize(ctx);
  return 0;
}
