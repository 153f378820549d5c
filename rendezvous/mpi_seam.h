/* rendezvous/mpi_seam.h: every MPI call of the in-rank library goes through this table, so a test
 * can put a fake in its place (a barrier that never completes, an init that fails) the way
 * SQLite's aSyscall[] lets its tests replace the OS. Only rendezvous/ and checkpoint/ include it. */
#ifndef FTL_RDZV_MPI_SEAM_H
#define FTL_RDZV_MPI_SEAM_H

#include <mpi.h>

#include "ftl/error.h"

typedef struct rz_mpi_ops {
  int (*initialized)(int *flag);
  int (*finalized)(int *flag);
  int (*init_thread)(int *argc, char ***argv, int required, int *provided);
  int (*finalize)(void);
  int (*comm_dup)(MPI_Comm comm, MPI_Comm *out);
  int (*comm_free)(MPI_Comm *comm);
  int (*comm_rank)(MPI_Comm comm, int *rank);
  int (*comm_size)(MPI_Comm comm, int *size);
  int (*comm_split_type)(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out);
  int (*comm_set_errhandler)(MPI_Comm comm, MPI_Errhandler handler);
  int (*allreduce)(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
  int (*bcast)(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
  int (*ibarrier)(MPI_Comm comm, MPI_Request *req);
  int (*test)(MPI_Request *req, int *flag, MPI_Status *status);
  int (*error_string)(int code, char *text, int *len);
  /* The non-blocking collectives the checkpoint writer and restore poll against their deadlines
   * (checkpoint/ckpt_coll.c); every buffer is bytes (MPI_BYTE) except iallreduce's. */
  int (*comm_idup)(MPI_Comm comm, MPI_Comm *out, MPI_Request *req);
  int (*iallreduce)(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                    MPI_Request *req);
  int (*iallgather)(const void *send, int send_count, MPI_Datatype send_type, void *recv, int recv_count,
                    MPI_Datatype recv_type, MPI_Comm comm, MPI_Request *req);
  int (*igather)(const void *send, int send_count, MPI_Datatype send_type, void *recv, int recv_count,
                 MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request *req);
  int (*ibcast)(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *req);
  /* Point-to-point, for the checkpoints' L2 level (a shard's bytes to or from a partner host,
   * checkpoint/ckpt_l2.c), polled with test against a deadline like the collectives. A table that
   * leaves them NULL (a test's fake) has no L2. */
  int (*isend)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req);
  int (*irecv)(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req);
  int (*get_count)(const MPI_Status *status, MPI_Datatype type, int *count);
} rz_mpi_ops;

/* The ops in use (the real MPI unless a test replaced them). Inline: it sits on the path of every
 * collective, where a call costs a visible share of a small allreduce. */
extern const rz_mpi_ops *rz_mpi_current;
static inline const rz_mpi_ops *ftl_mpi(void) { return rz_mpi_current; }

/* Test hook: replaces the table (NULL restores the real MPI). Not thread-safe; call before
 * ftl_init. */
void rz_mpi_set_ops(const rz_mpi_ops *ops);

/* Turns an MPI return code into FTL_ERR_MPI with MPI_Error_string's text in d. */
ftl_err rz_mpi_fail(int mpi_rc, const char *what, ftl_diag *d);
static inline ftl_err ftl_mpi_check(int mpi_rc, const char *what, ftl_diag *d) {
  return mpi_rc == MPI_SUCCESS ? FTL_OK : rz_mpi_fail(mpi_rc, what, d);
}

#endif
