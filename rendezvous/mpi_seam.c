/* rendezvous/mpi_seam.c: the real MPI behind rz_mpi_ops, and MPI error translation. */
#include "rendezvous/mpi_seam.h"

#include <stdio.h>

/* MPI's prototypes differ in constness between versions; thin wrappers keep the table typed. */
static int real_initialized(int *flag) { return MPI_Initialized(flag); }
static int real_finalized(int *flag) { return MPI_Finalized(flag); }
static int real_init_thread(int *argc, char ***argv, int required, int *provided) {
  return MPI_Init_thread(argc, argv, required, provided);
}
static int real_finalize(void) { return MPI_Finalize(); }
static int real_comm_dup(MPI_Comm comm, MPI_Comm *out) { return MPI_Comm_dup(comm, out); }
static int real_comm_free(MPI_Comm *comm) { return MPI_Comm_free(comm); }
static int real_comm_rank(MPI_Comm comm, int *rank) { return MPI_Comm_rank(comm, rank); }
static int real_comm_size(MPI_Comm comm, int *size) { return MPI_Comm_size(comm, size); }
static int real_comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out) {
  return MPI_Comm_split_type(comm, type, key, info, out);
}
static int real_comm_set_errhandler(MPI_Comm comm, MPI_Errhandler handler) {
  return MPI_Comm_set_errhandler(comm, handler);
}
static int real_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  return MPI_Bcast(buf, count, type, root, comm);
}
static int real_ibarrier(MPI_Comm comm, MPI_Request *req) { return MPI_Ibarrier(comm, req); }
static int real_test(MPI_Request *req, int *flag, MPI_Status *status) { return MPI_Test(req, flag, status); }
static int real_error_string(int code, char *text, int *len) { return MPI_Error_string(code, text, len); }
static int real_comm_idup(MPI_Comm comm, MPI_Comm *out, MPI_Request *req) { return MPI_Comm_idup(comm, out, req); }
static int real_iallreduce(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                           MPI_Request *req) {
  return MPI_Iallreduce(send, recv, count, type, op, comm, req);
}
static int real_iallgather(const void *send, int send_count, MPI_Datatype send_type, void *recv, int recv_count,
                           MPI_Datatype recv_type, MPI_Comm comm, MPI_Request *req) {
  return MPI_Iallgather(send, send_count, send_type, recv, recv_count, recv_type, comm, req);
}
static int real_igather(const void *send, int send_count, MPI_Datatype send_type, void *recv, int recv_count,
                        MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request *req) {
  return MPI_Igather(send, send_count, send_type, recv, recv_count, recv_type, root, comm, req);
}
static int real_ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *req) {
  return MPI_Ibcast(buf, count, type, root, comm, req);
}
static int real_isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                      MPI_Request *req) {
  return MPI_Isend(buf, count, type, dest, tag, comm, req);
}
static int real_irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req) {
  return MPI_Irecv(buf, count, type, source, tag, comm, req);
}
static int real_get_count(const MPI_Status *status, MPI_Datatype type, int *count) {
  return MPI_Get_count(status, type, count);
}

static const rz_mpi_ops real_ops = {
    .initialized = real_initialized,
    .finalized = real_finalized,
    .init_thread = real_init_thread,
    .finalize = real_finalize,
    .comm_dup = real_comm_dup,
    .comm_free = real_comm_free,
    .comm_rank = real_comm_rank,
    .comm_size = real_comm_size,
    .comm_split_type = real_comm_split_type,
    .comm_set_errhandler = real_comm_set_errhandler,
    .allreduce = MPI_Allreduce, /* directly: the hot path, and its prototype matches */
    .bcast = real_bcast,
    .ibarrier = real_ibarrier,
    .test = real_test,
    .error_string = real_error_string,
    .comm_idup = real_comm_idup,
    .iallreduce = real_iallreduce,
    .iallgather = real_iallgather,
    .igather = real_igather,
    .ibcast = real_ibcast,
    .isend = real_isend,
    .irecv = real_irecv,
    .get_count = real_get_count,
};

const rz_mpi_ops *rz_mpi_current = &real_ops;

void rz_mpi_set_ops(const rz_mpi_ops *ops) { rz_mpi_current = ops ? ops : &real_ops; }

ftl_err rz_mpi_fail(int mpi_rc, const char *what, ftl_diag *d) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (rz_mpi_current->error_string(mpi_rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", mpi_rc);
  return ftl_diag_fail(d, FTL_ERR_MPI, "%s failed: %s", what, text);
}
