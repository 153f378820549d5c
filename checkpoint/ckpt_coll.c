/* checkpoint/ckpt_coll.c: the checkpoint module's collectives, each with a deadline, and every MPI
 * call the module makes, all through the MPI seam (rendezvous/mpi_seam.h) so a test can put a fake
 * MPI underneath (tests/ckpt/test_ckpt_fake_mpi.c). Each collective is started non-blocking and
 * polled with MPI_Test, sleeping between polls (20 us doubling to 2 ms), until it completes or its
 * deadline passes.
 *
 * The L2 level's point-to-point transfers (ckpt_l2.c) start their sends and receives here too and
 * poll them with ck_p2p_test, so their MPI calls stay in this file.
 *
 * Not here: what is exchanged or what the ranks conclude from it (ckpt_writer.c, ckpt_restore.c),
 * blocking collectives (a rank that is gone must not hang the writer thread). */
#include <stdio.h>
#include <time.h>

#include "checkpoint/ckpt_internal.h"
#include "rendezvous/mpi_seam.h"

/* MPI's error text for e, with the call named; marks the handle broken. */
static ftl_err mpi_fail(ftl_ckpt *ck, int e, const char *call, ftl_diag *d) {
  char s[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (ftl_mpi()->error_string(e, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "code %d", e);
  atomic_store(&ck->sync->broken, 1);
  return ftl_diag_fail(d, FTL_ERR_MPI, "%s: %s", call, s);
}

/* Finishes a collective that `call` started with return code `started`: polls *req until it
 * completes or the deadline passes. */
static ftl_err finish(ftl_ckpt *ck, int started, MPI_Request *req, const char *call, const char *what,
                      int64_t deadline_ms, ftl_diag *d) {
  if (started != MPI_SUCCESS) return mpi_fail(ck, started, call, d);
  long sleep_ns = 20000;
  for (;;) {
    int done = 0;
    int e = ftl_mpi()->test(req, &done, MPI_STATUS_IGNORE);
    if (e != MPI_SUCCESS) return mpi_fail(ck, e, call, d);
    if (done) return FTL_OK;
    if (ftl_deadline_left_ms(deadline_ms) == 0) {
      atomic_store(&ck->sync->broken, 1);
      return ftl_diag_fail(d, FTL_ERR_TIMEOUT, "%s (%s) did not complete within %lld ms (a rank is gone or stuck)",
                           what, call, (long long)ck->timeout_ms);
    }
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    if (sleep_ns < 2000000) sleep_ns *= 2;
  }
}

ftl_err ck_coll_barrier(ftl_ckpt *ck, const char *what, int64_t deadline_ms, ftl_diag *d) {
  MPI_Request req;
  return finish(ck, ftl_mpi()->ibarrier(ck->comm, &req), &req, "MPI_Ibarrier", what, deadline_ms, d);
}

ftl_err ck_coll_allgather(ftl_ckpt *ck, const void *send, void *recv, int bytes, const char *what,
                            int64_t deadline_ms, ftl_diag *d) {
  MPI_Request req;
  return finish(ck, ftl_mpi()->iallgather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, ck->comm, &req), &req,
                "MPI_Iallgather", what, deadline_ms, d);
}

ftl_err ck_coll_gather(ftl_ckpt *ck, const void *send, void *recv, int bytes, const char *what, int64_t deadline_ms,
                         ftl_diag *d) {
  MPI_Request req;
  return finish(ck, ftl_mpi()->igather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, 0, ck->comm, &req), &req,
                "MPI_Igather", what, deadline_ms, d);
}

ftl_err ck_coll_bcast_from(ftl_ckpt *ck, int root, void *buf, int bytes, const char *what, int64_t deadline_ms,
                           ftl_diag *d) {
  MPI_Request req;
  return finish(ck, ftl_mpi()->ibcast(buf, bytes, MPI_BYTE, root, ck->comm, &req), &req, "MPI_Ibcast", what,
                deadline_ms, d);
}

ftl_err ck_coll_bcast(ftl_ckpt *ck, void *buf, int bytes, const char *what, int64_t deadline_ms, ftl_diag *d) {
  return ck_coll_bcast_from(ck, 0, buf, bytes, what, deadline_ms, d);
}

ftl_err ck_coll_agree_setup(ftl_ckpt *ck, MPI_Comm gang, const int *ok, int *all_ok, int64_t deadline_ms,
                              ftl_diag *d) {
  MPI_Request req;
  return finish(ck, ftl_mpi()->iallreduce(ok, all_ok, 1, MPI_INT, MPI_MIN, gang, &req), &req, "MPI_Iallreduce",
                "the checkpoint set-up agreement", deadline_ms, d);
}

ftl_err ck_coll_open(ftl_ckpt *ck, MPI_Comm gang, int64_t deadline_ms, ftl_diag *d) {
  MPI_Request req;
  ftl_err rc = finish(ck, ftl_mpi()->comm_idup(gang, &ck->comm, &req), &req, "MPI_Comm_idup",
                      "the checkpoint communicator's duplication", deadline_ms, d);
  if (rc) return rc;
  ck->have_comm = 1;
  ftl_mpi()->comm_set_errhandler(ck->comm, MPI_ERRORS_RETURN);
  ftl_mpi()->comm_rank(ck->comm, &ck->rank);
  ftl_mpi()->comm_size(ck->comm, &ck->world);
  return FTL_OK;
}

void ck_coll_close(ftl_ckpt *ck) {
  if (ck->have_comm && !atomic_load(&ck->sync->broken)) ftl_mpi()->comm_free(&ck->comm);
  ck->have_comm = 0;
}

/* ---- point-to-point (the L2 level's transfers, ckpt_l2.c) -------------------------------- */

ftl_err ck_coll_iallgather(ftl_ckpt *ck, const void *send, void *recv, int bytes, MPI_Request *req, ftl_diag *d) {
  int e = ftl_mpi()->iallgather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, ck->comm, req);
  return e == MPI_SUCCESS ? FTL_OK : mpi_fail(ck, e, "MPI_Iallgather", d);
}

int ck_p2p_available(void) {
  return ftl_mpi()->isend != NULL && ftl_mpi()->irecv != NULL && ftl_mpi()->get_count != NULL;
}

ftl_err ck_p2p_isend(ftl_ckpt *ck, const void *buf, int bytes, int peer, int tag, MPI_Request *req, ftl_diag *d) {
  int e = ftl_mpi()->isend(buf, bytes, MPI_BYTE, peer, tag, ck->comm, req);
  return e == MPI_SUCCESS ? FTL_OK : mpi_fail(ck, e, "MPI_Isend", d);
}

ftl_err ck_p2p_irecv(ftl_ckpt *ck, void *buf, int bytes, int peer, int tag, MPI_Request *req, ftl_diag *d) {
  int e = ftl_mpi()->irecv(buf, bytes, MPI_BYTE, peer, tag, ck->comm, req);
  return e == MPI_SUCCESS ? FTL_OK : mpi_fail(ck, e, "MPI_Irecv", d);
}

ftl_err ck_p2p_test(ftl_ckpt *ck, MPI_Request *req, int *done, int *bytes, ftl_diag *d) {
  MPI_Status st;
  *done = 0;
  int e = ftl_mpi()->test(req, done, &st);
  if (e != MPI_SUCCESS) return mpi_fail(ck, e, "MPI_Test", d);
  if (*done && bytes) {
    e = ftl_mpi()->get_count(&st, MPI_BYTE, bytes);
    if (e != MPI_SUCCESS) return mpi_fail(ck, e, "MPI_Get_count", d);
  }
  return FTL_OK;
}
