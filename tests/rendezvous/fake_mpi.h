/* tests/rendezvous/fake_mpi.h: the parts of a fake MPI (the seam in rendezvous/mpi_seam.h) that
 * every single-process fake answers the same way: one communicator that duplicates and splits to
 * itself, broadcasts that leave the buffer as it is (this rank is the root), an ibarrier that is
 * done at once, and a fixed error text. FAKE_MPI_SHARED_OPS fills those fields of an rz_mpi_ops;
 * the test gives its own initialized, init_thread, finalize, comm_rank, comm_size, allreduce and
 * test, the calls its checks steer.
 *
 * Not here: the checkpoint's non-blocking collectives (tests/ckpt/test_ckpt_fake_mpi.c fakes
 * them with requests it can hold back). Included by one test file each (static definitions). */
#ifndef FTL_TESTS_FAKE_MPI_H
#define FTL_TESTS_FAKE_MPI_H

#include <stdio.h>
#include <string.h>

#include "rendezvous/mpi_seam.h"

static inline int fake_mpi_finalized(int *flag) {
  *flag = 0;
  return MPI_SUCCESS;
}
static inline int fake_mpi_comm_dup(MPI_Comm comm, MPI_Comm *out) {
  *out = comm;
  return MPI_SUCCESS;
}
static inline int fake_mpi_comm_free(MPI_Comm *comm) {
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}
static inline int fake_mpi_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out) {
  (void)type, (void)key, (void)info;
  *out = comm;
  return MPI_SUCCESS;
}
static inline int fake_mpi_set_errhandler(MPI_Comm comm, MPI_Errhandler h) {
  (void)comm, (void)h;
  return MPI_SUCCESS;
}
static inline int fake_mpi_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  (void)buf, (void)count, (void)type, (void)root, (void)comm;
  return MPI_SUCCESS;
}
static inline int fake_mpi_ibarrier(MPI_Comm comm, MPI_Request *req) {
  (void)comm;
  *req = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}
static inline int fake_mpi_error_string(int code, char *text, int *len) {
  (void)code;
  snprintf(text, MPI_MAX_ERROR_STRING, "fake MPI failure");
  *len = (int)strlen(text);
  return MPI_SUCCESS;
}

#define FAKE_MPI_SHARED_OPS                                                                                            \
  .finalized = fake_mpi_finalized, .comm_dup = fake_mpi_comm_dup, .comm_free = fake_mpi_comm_free,                     \
  .comm_split_type = fake_mpi_split_type, .comm_set_errhandler = fake_mpi_set_errhandler, .bcast = fake_mpi_bcast,     \
  .ibarrier = fake_mpi_ibarrier, .error_string = fake_mpi_error_string

#endif
