/* rendezvous/rdzv_coll.c: the gang's collectives (include/ftl/rdzv.h): allreduce on NCCL, on MPI,
 * or staged through host memory for device buffers on the MPI path; barrier with a deadline;
 * broadcast of host bytes. The first CUDA/NCCL error breaks the context for good.
 *
 * Not here: setting up the communicator (rdzv_init.c), the launcher channel (rdzv_channel.c). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rendezvous/rz_internal.h"

static MPI_Datatype mpi_type(ftl_dtype t, int *ok) {
  *ok = 1;
  switch (t) {
    case FTL_DTYPE_F32: return MPI_FLOAT;
    case FTL_DTYPE_F64: return MPI_DOUBLE;
    case FTL_DTYPE_I32: return MPI_INT32_T;
    case FTL_DTYPE_I64: return MPI_INT64_T;
    case FTL_DTYPE_U8: return MPI_UINT8_T;
    case FTL_DTYPE_I8: return MPI_INT8_T;
    case FTL_DTYPE_U32: return MPI_UINT32_T;
    case FTL_DTYPE_U64: return MPI_UINT64_T;
    case FTL_DTYPE_F16: case FTL_DTYPE_BF16: break; /* MPI 3.1 has no half types */
  }
  *ok = 0;
  return MPI_BYTE;
}

static MPI_Op mpi_op(ftl_op op) {
  switch (op) {
    case FTL_OP_SUM: return MPI_SUM;
    case FTL_OP_MAX: return MPI_MAX;
    case FTL_OP_MIN: return MPI_MIN;
    case FTL_OP_PROD: return MPI_PROD;
  }
  return MPI_SUM;
}

static ftl_err allreduce_impl(ftl_ctx *ctx, const void *send, void *recv, size_t count, ftl_dtype dtype, ftl_op op,
                              void *stream);

ftl_err ftl_allreduce_on_stream(ftl_ctx *ctx, const void *send, void *recv, size_t count, ftl_dtype dtype, ftl_op op,
                                void *cuda_stream) {
  if (!ctx->sampling) return allreduce_impl(ctx, send, recv, count, dtype, op, cuda_stream);
  int64_t t0 = ftl_clock_ns();
  ftl_err rc = allreduce_impl(ctx, send, recv, count, dtype, op, cuda_stream);
  ctx->collective_ns += ftl_clock_ns() - t0;
  return rc;
}

ftl_err ftl_allreduce(ftl_ctx *ctx, const void *send, void *recv, size_t count, ftl_dtype dtype, ftl_op op) {
  return ftl_allreduce_on_stream(ctx, send, recv, count, dtype, op, NULL);
}

/* The first CUDA/NCCL error of a collective breaks the context: the communicator is aborted (the
 * GPU layer did that) and the error kept, so later calls name the cause, not a symptom. */
static ftl_err ctx_break(ftl_ctx *ctx, ftl_err err, const ftl_diag *detail) {
  if (!ctx->broken) {
    ctx->broken = 1;
    snprintf(ctx->broken_msg, sizeof ctx->broken_msg, "%.40s: %.1000s", ftl_err_name(err), detail->msg);
  }
  return rz_ctx_fail(ctx, err, detail);
}

static ftl_err broken_fail(ftl_ctx *ctx, const char *what) {
  ftl_diag d;
  ftl_diag_fail(&d, FTL_ERR_STATE, "%s: the context is broken since an earlier GPU error (%.900s)", what, ctx->broken_msg);
  return rz_ctx_fail(ctx, FTL_ERR_STATE, &d);
}

static ftl_err mpi_allreduce_host(ftl_ctx *ctx, const void *send, void *recv, size_t count, MPI_Datatype t,
                                  size_t elem, ftl_op op, ftl_diag *d) {
  const rz_mpi_ops *mpi = ftl_mpi();
  /* MPI counts are int: large buffers go in chunks. The blocking MPI_Allreduce is used for its
   * bandwidth; a hung peer is caught by the launcher's progress watchdog, which ends the gang. */
  for (size_t done = 0; done < count;) {
    size_t n = count - done;
    if (n > (size_t)INT_MAX / 2) n = (size_t)INT_MAX / 2;
    const void *s = send == recv ? MPI_IN_PLACE : (const char *)send + done * elem;
    ftl_err rc = ftl_mpi_check(mpi->allreduce(s, (char *)recv + done * elem, (int)n, t, mpi_op(op), ctx->comm),
                               "MPI_Allreduce", d);
    if (rc) return rc;
    done += n;
  }
  return FTL_OK;
}

/* Waits for everything enqueued so far on `stream` (NULL: the legacy default stream). */
static ftl_err stage_sync(ftl_ctx *ctx, void *stream, int64_t deadline, const char *what, ftl_diag *d) {
  const rz_gpu_ops *g = ftl_gpu();
  int st = FTL_GPU_OK;
  if (!ctx->stage_event && (st = g->event_create(&ctx->stage_event)) != FTL_GPU_OK)
    return rz_gpu_fail(st, "cudaEventCreateWithFlags", d);
  if ((st = g->event_record(ctx->stage_event, stream)) != FTL_GPU_OK) return rz_gpu_fail(st, "cudaEventRecord", d);
  return rz_gpu_event_wait(ctx->stage_event, deadline, what, d);
}

/* Device buffers on the MPI path (Open MPI here is not CUDA-aware): copied to host after the
 * caller's work on `stream`, reduced there, copied back, and waited for before returning. */
static ftl_err mpi_allreduce_staged(ftl_ctx *ctx, const void *send, void *recv, size_t count, MPI_Datatype t,
                                    size_t elem, ftl_op op, void *stream, ftl_diag *d) {
  const rz_gpu_ops *g = ftl_gpu();
  int64_t deadline = ftl_deadline_after_ms(ctx->collective_timeout_ms);
  size_t bytes = count * elem;
  if (bytes > ctx->stage_bytes) {
    char *p = ftl_realloc(ctx->stage, bytes);
    if (!p) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory staging %zu bytes of device memory", bytes);
    ctx->stage = p;
    ctx->stage_bytes = bytes;
  }
  int st = g->memcpy_async(ctx->stage, send, bytes, 0, stream);
  if (st != FTL_GPU_OK) return rz_gpu_fail(st, "cudaMemcpyAsync (device to host, staging)", d);
  ftl_err rc = stage_sync(ctx, stream, deadline, "staging copy to host", d);
  if (rc) return rc;
  rc = mpi_allreduce_host(ctx, ctx->stage, ctx->stage, count, t, elem, op, d);
  if (rc) return rc;
  st = g->memcpy_async(recv, ctx->stage, bytes, 1, stream);
  if (st != FTL_GPU_OK) return rz_gpu_fail(st, "cudaMemcpyAsync (host to device, staging)", d);
  return stage_sync(ctx, stream, deadline, "staging copy to the device", d);
}

static int on_device(rz_gpu_mem kind) { return kind == FTL_GPU_MEM_DEVICE || kind == FTL_GPU_MEM_MANAGED; }

static ftl_err allreduce_impl(ftl_ctx *ctx, const void *send, void *recv, size_t count, ftl_dtype dtype, ftl_op op,
                              void *stream) {
  /* Not zeroed: it is 1 KiB, written only on an error, and clearing it on every call costs a
   * measurable share of a small allreduce. */
  ftl_diag d;
  if (!ctx->have_comm) return rz_ctx_fail(ctx, ftl_diag_fail(&d, FTL_ERR_STATE, "ftl_allreduce before ftl_init succeeded"), &d);
  if (ctx->broken) return broken_fail(ctx, "ftl_allreduce");
  /* Memory kinds: only where a GPU was seen (a CPU-only rank pays nothing). Both buffers must be
   * of one kind; host memory always goes through MPI, device memory through NCCL when it is the
   * backend, else staged through host memory. */
  int device = 0;
  if (ctx->local_gpus > 0) {
    int sdev = -1, rdev = -1;
    rz_gpu_mem sk = rz_gpu_mem_kind(send, &sdev), rk = rz_gpu_mem_kind(recv, &rdev);
    if (on_device(sk) != on_device(rk))
      return rz_ctx_fail(ctx,
                      ftl_diag_fail(&d, FTL_ERR_INVAL, "ftl_allreduce: send is %s memory and recv is %s memory: both must be "
                                    "host or both device", on_device(sk) ? "device" : "host", on_device(rk) ? "device" : "host"),
                      &d);
    device = on_device(sk);
    if (device && ctx->info.device >= 0 && ((sk == FTL_GPU_MEM_DEVICE && sdev != ctx->info.device) ||
                                            (rk == FTL_GPU_MEM_DEVICE && rdev != ctx->info.device)))
      return rz_ctx_fail(ctx,
                      ftl_diag_fail(&d, FTL_ERR_INVAL, "ftl_allreduce: buffer on device %d, but this rank's device is %d",
                                    sk == FTL_GPU_MEM_DEVICE && sdev != ctx->info.device ? sdev : rdev, ctx->info.device),
                      &d);
  }
  if (device && ctx->info.backend == FTL_BACKEND_NCCL) {
    ftl_err rc = rz_gpu_allreduce(ctx->gpu, send, recv, count, dtype, op, stream,
                                   ftl_deadline_after_ms(ctx->collective_timeout_ms), &d);
    return rc ? ctx_break(ctx, rc, &d) : FTL_OK;
  }
  int ok;
  MPI_Datatype t = mpi_type(dtype, &ok);
  if (!ok) return rz_ctx_fail(ctx, ftl_diag_fail(&d, FTL_ERR_UNSUPPORTED, "allreduce of %s on the MPI path", ftl_dtype_name(dtype)), &d);
  size_t elem = ftl_dtype_size(dtype);
  if (device) {
    ftl_err rc = mpi_allreduce_staged(ctx, send, recv, count, t, elem, op, stream, &d);
    if (rc == FTL_ERR_CUDA || rc == FTL_ERR_TIMEOUT) return ctx_break(ctx, rc, &d);
    return rc ? rz_ctx_fail(ctx, rc, &d) : FTL_OK;
  }
  /* Host memory the caller filled from its stream (an async copy into pinned memory): wait for
   * that stream first when one was named. */
  if (stream) {
    ftl_err rc = stage_sync(ctx, stream, ftl_deadline_after_ms(ctx->collective_timeout_ms), "the caller's stream", &d);
    if (rc) return ctx_break(ctx, rc, &d);
  }
  ftl_err rc = mpi_allreduce_host(ctx, send, recv, count, t, elem, op, &d);
  return rc ? rz_ctx_fail(ctx, rc, &d) : FTL_OK;
}

ftl_err ftl_barrier(ftl_ctx *ctx, int timeout_ms) {
  ftl_diag d = {{0}};
  if (!ctx->have_comm) return rz_ctx_fail(ctx, ftl_diag_fail(&d, FTL_ERR_STATE, "ftl_barrier before ftl_init succeeded"), &d);
  if (ctx->broken) return broken_fail(ctx, "ftl_barrier");
  const rz_mpi_ops *mpi = ftl_mpi();
  MPI_Request req;
  ftl_err rc = ftl_mpi_check(mpi->ibarrier(ctx->comm, &req), "MPI_Ibarrier", &d);
  if (rc) return rz_ctx_fail(ctx, rc, &d);
  int64_t deadline = ftl_deadline_after_ms(timeout_ms);
  /* Poll with a growing pause: fast when peers are already there, cheap when they are late. */
  long pause_ns = 1000;
  for (;;) {
    int flag = 0;
    rc = ftl_mpi_check(mpi->test(&req, &flag, MPI_STATUS_IGNORE), "MPI_Test", &d);
    if (rc) return rz_ctx_fail(ctx, rc, &d);
    if (flag) return FTL_OK;
    if (ftl_deadline_left_ms(deadline) == 0) {
      /* The request cannot be cancelled (MPI 3.1); the gang is now unusable and must end. */
      ftl_diag_fail(&d, FTL_ERR_TIMEOUT, "barrier: not every rank arrived within %d ms (rank %d waited)", timeout_ms,
                    ctx->info.rank);
      return rz_ctx_fail(ctx, FTL_ERR_TIMEOUT, &d);
    }
    struct timespec ts = {0, pause_ns};
    nanosleep(&ts, NULL);
    if (pause_ns < 1000000) pause_ns *= 2;
  }
}

ftl_err ftl_bcast_host(ftl_ctx *ctx, void *buf, size_t size, int root) {
  ftl_diag d; /* written only on an error (see allreduce_impl) */
  if (!ctx->have_comm) return rz_ctx_fail(ctx, ftl_diag_fail(&d, FTL_ERR_STATE, "ftl_bcast_host before ftl_init succeeded"), &d);
  if (ctx->broken) return broken_fail(ctx, "ftl_bcast_host");
  const rz_mpi_ops *mpi = ftl_mpi();
  for (size_t done = 0; done < size;) {
    size_t n = size - done;
    if (n > (size_t)INT_MAX / 2) n = (size_t)INT_MAX / 2;
    ftl_err rc = ftl_mpi_check(mpi->bcast((char *)buf + done, (int)n, MPI_BYTE, root, ctx->comm), "MPI_Bcast", &d);
    if (rc) return rz_ctx_fail(ctx, rc, &d);
    done += n;
  }
  return FTL_OK;
}
