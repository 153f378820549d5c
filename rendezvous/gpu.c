/* rendezvous/gpu.c: the GPU logic of the in-rank library over the seam's table (gpu_seam.h):
 * probing for devices, memory kinds, the NCCL communicator's life (non-blocking init with a
 * deadline, abort on any error), and the allreduce's ordering against the caller's stream.
 * Compiled in every build, so tests/rendezvous/test_gpu_fake.c runs this code with a fake table.
 *
 * Why poll: a blocking NCCL init, cudaStreamSynchronize or cudaEventSynchronize on work whose
 * peer died waits forever; every wait here polls with a deadline and aborts the communicator
 * when it passes. Not here: choosing and agreeing on the backend (rdzv_init.c). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ftl/core.h"
#include "rendezvous/gpu_seam.h"

struct rz_gpu_comm {
  void *comm;   /* ncclComm_t */
  void *stream; /* ftl's non-blocking stream: NCCL runs here */
  void *ready;  /* event recorded on the caller's stream, waited on by ftl's stream */
  int device;
  int broken;   /* aborted: never used or destroyed again */
};

const rz_gpu_ops *rz_gpu_current = &rz_gpu_build_ops;

void rz_gpu_set_ops(const rz_gpu_ops *ops) { rz_gpu_current = ops ? ops : &rz_gpu_build_ops; }

int rz_gpu_compiled(void) { return ftl_gpu()->compiled; }
int rz_gpu_nccl_compiled(void) { return ftl_gpu()->nccl_compiled; }

ftl_err rz_gpu_fail(int status, const char *what, ftl_diag *d) {
  const char *text = ftl_gpu()->last_error();
  ftl_err code = status == FTL_GPU_NO_DEVICE ? FTL_ERR_UNSUPPORTED : FTL_ERR_CUDA;
  return ftl_diag_fail(d, code, "%s failed: %s", what, text && *text ? text : "unknown CUDA error");
}

static ftl_err nccl_fail(const char *what, ftl_diag *d) {
  const char *text = ftl_gpu()->last_error();
  return ftl_diag_fail(d, FTL_ERR_NCCL, "%s failed: %s", what, text && *text ? text : "unknown NCCL error");
}

int rz_gpu_probe(int *count, char *why, size_t why_size) {
  const rz_gpu_ops *g = ftl_gpu();
  int n = 0;
  int st = g->device_count(&n);
  *count = 0;
  if (st == FTL_GPU_OK && n > 0) {
    *count = n;
    return FTL_GPU_OK;
  }
  if (st == FTL_GPU_OK) {
    snprintf(why, why_size, "no CUDA device visible");
    return FTL_GPU_NO_DEVICE;
  }
  snprintf(why, why_size, "%s", g->last_error());
  return st == FTL_GPU_NO_DEVICE ? FTL_GPU_NO_DEVICE : FTL_GPU_FAILED;
}

int rz_gpu_device_count(char *why, size_t why_size) {
  int n = 0;
  rz_gpu_probe(&n, why, why_size);
  return n;
}

rz_gpu_mem rz_gpu_mem_kind(const void *p, int *device) {
  rz_gpu_mem kind = FTL_GPU_MEM_HOST;
  int dev = -1;
  /* A pointer CUDA cannot describe is not one NCCL can use: host. */
  if (ftl_gpu()->pointer_kind(p, &kind, &dev) != FTL_GPU_OK) kind = FTL_GPU_MEM_HOST, dev = -1;
  if (device) *device = dev;
  return kind;
}

ftl_err rz_gpu_unique_id(unsigned char id[FTL_NCCL_ID_BYTES], ftl_diag *d) {
  if (ftl_gpu()->nccl_unique_id(id) != FTL_GPU_OK) return nccl_fail("ncclGetUniqueId", d);
  return FTL_OK;
}

static void pause_after(unsigned spins) {
  if (spins < 1000) return; /* the first polls are free: a fast collective ends in microseconds */
  struct timespec ts = {0, spins < 10000 ? 50000 : 1000000};
  nanosleep(&ts, NULL);
}

/* Polls the communicator's asynchronous state until it leaves ncclInProgress. */
static ftl_err nccl_wait_ready(void *comm, int64_t deadline_ms, const char *what, ftl_diag *d) {
  const rz_gpu_ops *g = ftl_gpu();
  for (unsigned spins = 0;; spins++) {
    int st = g->nccl_async_error(comm);
    if (st == FTL_GPU_OK) return FTL_OK;
    if (st != FTL_GPU_IN_PROGRESS) return nccl_fail(what, d);
    if (ftl_deadline_left_ms(deadline_ms) == 0)
      return ftl_diag_fail(d, FTL_ERR_TIMEOUT, "%s did not finish before its deadline", what);
    pause_after(spins);
  }
}

ftl_err rz_gpu_event_wait(void *event, int64_t deadline_ms, const char *what, ftl_diag *d) {
  const rz_gpu_ops *g = ftl_gpu();
  for (unsigned spins = 0;; spins++) {
    int st = g->event_query(event);
    if (st == FTL_GPU_OK) return FTL_OK;
    if (st != FTL_GPU_NOT_READY) return rz_gpu_fail(st, what, d);
    if (ftl_deadline_left_ms(deadline_ms) == 0)
      return ftl_diag_fail(d, FTL_ERR_TIMEOUT, "%s: the GPU work did not finish before its deadline", what);
    pause_after(spins);
  }
}

ftl_err rz_gpu_comm_create(int device, int world_size, int rank, const unsigned char id[FTL_NCCL_ID_BYTES],
                            int64_t deadline_ms, rz_gpu_comm **out, ftl_diag *d) {
  const rz_gpu_ops *g = ftl_gpu();
  ftl_err rc = FTL_OK;
  int st;
  *out = NULL;
  rz_gpu_comm *c = ftl_calloc(1, sizeof *c);
  if (!c) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  c->device = device;
  if ((st = g->set_device(device)) != FTL_GPU_OK) {
    rc = rz_gpu_fail(st, "cudaSetDevice", d);
    goto out;
  }
  if ((st = g->stream_create(&c->stream)) != FTL_GPU_OK) {
    rc = rz_gpu_fail(st, "cudaStreamCreateWithFlags", d);
    goto out;
  }
  if ((st = g->event_create(&c->ready)) != FTL_GPU_OK) {
    rc = rz_gpu_fail(st, "cudaEventCreateWithFlags", d);
    goto out;
  }
  st = g->nccl_init(&c->comm, world_size, id, rank);
  if (st != FTL_GPU_OK && st != FTL_GPU_IN_PROGRESS) {
    rc = nccl_fail("ncclCommInitRankConfig", d);
    goto out;
  }
  rc = nccl_wait_ready(c->comm, deadline_ms, "ncclCommInitRankConfig (non-blocking)", d);
  if (rc) goto out;
  *out = c;
  c = NULL;
out:
  if (c) {
    /* A communicator half made (or waiting on a rank that failed) is aborted, never destroyed:
     * ncclCommDestroy would wait on the peers. */
    if (c->comm) g->nccl_abort(c->comm);
    g->event_destroy(c->ready);
    g->stream_destroy(c->stream);
    ftl_free(c);
  }
  return rc;
}

int rz_gpu_comm_broken(const rz_gpu_comm *c) { return c && c->broken; }

void rz_gpu_comm_abort(rz_gpu_comm *c) {
  if (!c || c->broken) return;
  ftl_gpu()->nccl_abort(c->comm);
  c->broken = 1;
}

ftl_err rz_gpu_allreduce(rz_gpu_comm *c, const void *send, void *recv, size_t count, ftl_dtype dtype,
                          ftl_op op, void *stream, int64_t deadline_ms, ftl_diag *d) {
  const rz_gpu_ops *g = ftl_gpu();
  ftl_err rc = FTL_OK;
  int st;
  if (c->broken) return ftl_diag_fail(d, FTL_ERR_STATE, "the NCCL communicator was aborted earlier");
  /* Order after the caller's work: ftl's stream is non-blocking, so without this NCCL could read
   * gradients a kernel on the caller's stream is still writing. */
  if ((st = g->event_record(c->ready, stream)) != FTL_GPU_OK) {
    rc = rz_gpu_fail(st, "cudaEventRecord (caller's stream)", d);
    goto out;
  }
  if ((st = g->stream_wait_event(c->stream, c->ready)) != FTL_GPU_OK) {
    rc = rz_gpu_fail(st, "cudaStreamWaitEvent", d);
    goto out;
  }
  st = g->nccl_allreduce(send, recv, count, dtype, op, c->comm, c->stream);
  if (st != FTL_GPU_OK && st != FTL_GPU_IN_PROGRESS) {
    rc = nccl_fail("ncclAllReduce", d);
    goto out;
  }
  /* On a non-blocking communicator the enqueue itself may still be in progress: until it is done
   * the stream looks idle, so wait for NCCL first, then for the stream. */
  if (st == FTL_GPU_IN_PROGRESS) {
    rc = nccl_wait_ready(c->comm, deadline_ms, "ncclAllReduce (enqueue)", d);
    if (rc) goto out;
  }
  for (unsigned spins = 0;; spins++) {
    st = g->stream_query(c->stream);
    if (st == FTL_GPU_OK) break;
    if (st != FTL_GPU_NOT_READY) {
      rc = rz_gpu_fail(st, "cudaStreamQuery (NCCL allreduce)", d);
      goto out;
    }
    int async = g->nccl_async_error(c->comm);
    if (async != FTL_GPU_OK && async != FTL_GPU_IN_PROGRESS) {
      rc = nccl_fail("NCCL allreduce", d);
      goto out;
    }
    if (ftl_deadline_left_ms(deadline_ms) == 0) {
      rc = ftl_diag_fail(d, FTL_ERR_TIMEOUT, "NCCL allreduce did not complete before its deadline");
      goto out;
    }
    pause_after(spins);
  }
out:
  /* Any failure leaves the communicator in an unknown state (peers may be inside the collective):
   * abort it now, so no one waits on it again. */
  if (rc) rz_gpu_comm_abort(c);
  return rc;
}

void rz_gpu_comm_destroy(rz_gpu_comm *c, int64_t deadline_ms) {
  if (!c) return;
  const rz_gpu_ops *g = ftl_gpu();
  if (!c->broken) {
    /* Finalize flushes NCCL's outstanding work; on a non-blocking communicator it is polled. A
     * finalize that fails or runs past the deadline (a peer gone) ends in an abort instead. */
    ftl_diag ignored;
    int st = g->nccl_finalize(c->comm);
    if ((st == FTL_GPU_OK || st == FTL_GPU_IN_PROGRESS) &&
        nccl_wait_ready(c->comm, deadline_ms, "ncclCommFinalize", &ignored) == FTL_OK)
      g->nccl_destroy(c->comm);
    else
      g->nccl_abort(c->comm);
  }
  g->event_destroy(c->ready);
  g->stream_destroy(c->stream);
  ftl_free(c);
}
