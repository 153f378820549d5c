/* rendezvous/rdzv.c: ftl_init and the gang's collectives (see include/ftl/rdzv.h).
 *
 * Start-up order and why:
 *   1. rendezvous with the launcher (TCP, with a deadline): MPI_Init itself waits for every rank
 *      with no deadline at all, so a rank that never starts would hang the others there. Joining
 *      the launcher first turns that into an error naming the missing ranks.
 *   2. MPI_Init_thread(MPI_THREAD_MULTIPLE), errors returned rather than aborting.
 *   3. local rank from MPI_Comm_split_type(SHARED), checked against the launcher's numbering.
 *   4. communicator: NCCL when every rank has a GPU of its own, MPI otherwise (one notice on
 *      rank 0); agreed by all ranks, with a deadline on NCCL's set-up (docs/gpu.md).
 * Each phase is timed and reported to the launcher, which writes the event log. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftl/core.h"
#include "ftl/rdzv.h"
#include "rendezvous/client.h"
#include "rendezvous/gpu_seam.h"
#include "rendezvous/mpi_seam.h"
#include "rendezvous/wire.h"

/* Heartbeats to the launcher are rate-limited: each one wakes the launcher, which on a busy node
 * takes the rank's core for a moment. 250 ms keeps that well under 1% of step time and is fine
 * against hang timeouts of seconds (the hang detector's latency is the timeout + this). */
#define FTL_PROGRESS_INTERVAL_MS 250
/* Progress reports (loss, tokens) are written to the run's event log by the launcher: at most one
 * a second keeps that log small on long runs whatever the program's logging interval. */
#define FTL_PROGRESS_REPORT_INTERVAL_MS 1000
/* Default deadline of one collective (FTL_COLLECTIVE_TIMEOUT_MS overrides). */
#define FTL_DEFAULT_COLLECTIVE_TIMEOUT_MS (10 * 60 * 1000)

struct ftl_ctx {
  ftl_info info;
  ftl_startup_ms startup;
  ftl_launch_env env;
  ftl_rdzv_client client;
  int have_client;
  MPI_Comm comm;      /* dup of MPI_COMM_WORLD: ftl's traffic never mixes with the program's */
  int have_comm;
  int mpi_owned;      /* ftl_init initialised MPI, so ftl_finalize finalises it */
  ftl_gpu_comm *gpu;
  int local_gpus;     /* GPUs this rank saw: device buffers are possible, so their kind is checked */
  void *stage_event;  /* MPI path with device buffers: orders the staging copies (created lazily) */
  char *stage;        /* ... and the host bytes they go through */
  size_t stage_bytes;
  /* After a CUDA or NCCL error in a collective the communicator is aborted and the context is
   * broken: every later collective returns FTL_ERR_STATE naming this first error. */
  int broken;
  char broken_msg[1100]; /* the error name and the diag text */
  int64_t collective_timeout_ms;
  int64_t ready_ns;   /* end of start-up: the first step's clock starts here */
  int64_t last_progress_ms;
  int64_t last_report_ms;    /* ftl_progress_report: the last report sent (-1: none yet) */
  int64_t last_report_tokens;
  int have_report;
  int first_step_reported;
  /* For the launcher's straggler detector: the rank's own compute time in one sampled step, told
   * apart from waiting for others by timing the collectives of that step only. One step per
   * heartbeat is sampled, so other steps' collectives pay no clock reads (a read is ~25 ns, a few
   * per cent of a small allreduce). */
  int sampling;
  int64_t sample_t0_ns;
  int64_t collective_ns;
  double compute_ms;
  pthread_mutex_t err_lock;
  ftl_diag diag;
  ftl_linebuf from_launcher; /* messages the launcher sends after "go" (stop requests) */
  int stop_requested;        /* this rank heard "stop" */
  char stop_reason[256];
};

static ftl_err ctx_fail(ftl_ctx *ctx, ftl_err err, const ftl_diag *detail) {
  pthread_mutex_lock(&ctx->err_lock);
  memcpy(&ctx->diag, detail, sizeof ctx->diag);
  pthread_mutex_unlock(&ctx->err_lock);
  return err;
}

static double ms_since(int64_t t0_ns) { return (double)(ftl_clock_ns() - t0_ns) / 1e6; }

static void report(ftl_ctx *ctx, json_t *msg) {
  if (!ctx->have_client) {
    json_decref(msg);
    return;
  }
  ftl_diag ignored;
  /* A launcher that went away is noticed by the launcher's own bookkeeping, not here: a failed
   * report must not fail the training step. */
  ftl_rdzv_client_send(&ctx->client, msg, 0, &ignored);
}

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

/* NCCL's set-up waits for every rank: bounded by the launcher's rendezvous deadline when there is
 * one, else 2 minutes, and never longer than a collective may take. */
static int64_t nccl_init_timeout_ms(const ftl_ctx *ctx) {
  int64_t ms = ctx->env.present && ctx->env.timeout_ms > 0 ? ctx->env.timeout_ms : 120000;
  return ms < ctx->collective_timeout_ms ? ms : ctx->collective_timeout_ms;
}

/* Picks NCCL only when every rank has a GPU of its own: a mixed gang cannot share one NCCL
 * communicator, and NCCL refuses two ranks of one communicator on one device. The choice is one
 * allreduce, so every rank takes the same path. */
static ftl_err init_communicator(ftl_ctx *ctx, ftl_diag *d) {
  const ftl_mpi_ops *mpi = ftl_mpi();
  ftl_err rc = FTL_OK;
  char why[256] = "";
  const char *forced = getenv("FTL_BACKEND");
  int want_nccl = forced && strcmp(forced, "nccl") == 0;
  /* Probed even under FTL_BACKEND=mpi: where there are GPUs, device buffers must be recognised
   * (and staged) on the MPI path too. */
  int local_gpus = ftl_gpu_device_count(why, sizeof why);
  ctx->local_gpus = local_gpus;
  if (forced && strcmp(forced, "mpi") == 0) {
    local_gpus = 0;
    snprintf(why, sizeof why, "FTL_BACKEND=mpi");
  }
  /* MIN over ranks of {GPUs, one GPU per local rank}: 0 in either means the MPI path. */
  int own_device = local_gpus > 0 && ctx->info.local_world_size <= local_gpus && ftl_gpu_nccl_compiled();
  int mine[2] = {local_gpus, own_device}, all[2] = {0, 0};
  rc = ftl_mpi_check(mpi->allreduce(mine, all, 2, MPI_INT, MPI_MIN, ctx->comm), "MPI_Allreduce (GPU count)", d);
  if (rc) return rc;
  ctx->info.device = -1;
  ctx->info.backend = FTL_BACKEND_MPI;
  if (all[0] == 0) {
    if (want_nccl)
      return ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "FTL_BACKEND=nccl but a rank has no GPU (%s)",
                           local_gpus ? "another rank's" : why);
    if (ctx->info.rank == 0) {
      if (local_gpus == 0) FTL_LOG(FTL_LOG_INFO, "rdzv", "no GPU (%s): using the MPI CPU path", why);
      else FTL_LOG(FTL_LOG_INFO, "rdzv", "some ranks have no GPU: using the MPI CPU path");
    }
    return FTL_OK;
  }
  if (!all[1]) {
    if (want_nccl && !ftl_gpu_nccl_compiled())
      return ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "FTL_BACKEND=nccl but ftl was built without NCCL");
    if (want_nccl)
      return ftl_diag_fail(d, FTL_ERR_UNSUPPORTED,
                           "FTL_BACKEND=nccl but a host has more ranks than GPUs (here %d ranks, %d GPUs): NCCL "
                           "cannot put two ranks on one device",
                           ctx->info.local_world_size, local_gpus);
    if (ctx->info.rank == 0 && !ftl_gpu_nccl_compiled())
      FTL_LOG(FTL_LOG_WARN, "rdzv", "GPUs but no NCCL in this build: using the MPI path (device buffers are staged)");
    else if (ctx->info.rank == 0)
      FTL_LOG(FTL_LOG_WARN, "rdzv",
              "more ranks than GPUs on a host (rank 0's: %d ranks, %d GPUs): NCCL cannot share a device, using "
              "the MPI path (device buffers are staged through host memory)",
              ctx->info.local_world_size, local_gpus);
    return FTL_OK;
  }
  ctx->info.device = ctx->info.local_rank; /* < local_gpus: every local rank has its own */
  unsigned char id[FTL_NCCL_ID_BYTES] = {0};
  int id_rc = FTL_OK;
  if (ctx->info.rank == 0) id_rc = (int)ftl_gpu_unique_id(id, d);
  /* Agree on rank 0's result before using the id, so every rank fails together. */
  int any_fail = id_rc;
  rc = ftl_mpi_check(mpi->bcast(&any_fail, 1, MPI_INT, 0, ctx->comm), "MPI_Bcast", d);
  if (rc) return rc;
  if (any_fail) return ctx->info.rank == 0 ? (ftl_err)id_rc : ftl_diag_fail(d, FTL_ERR_NCCL, "rank 0 could not create the NCCL id");
  rc = ftl_mpi_check(mpi->bcast(id, FTL_NCCL_ID_BYTES, MPI_BYTE, 0, ctx->comm), "MPI_Bcast (NCCL id)", d);
  if (rc) return rc;
  ftl_diag cd = {{0}};
  ftl_err crc = ftl_gpu_comm_create(ctx->info.device, ctx->info.world_size, ctx->info.rank, id,
                                    ftl_deadline_after_ms(nccl_init_timeout_ms(ctx)), &ctx->gpu, &cd);
  /* Agree before anyone uses the communicator: a rank whose set-up failed or timed out must not
   * leave the others inside their first collective. Each rank's wait above had a deadline, so every
   * rank reaches this allreduce. */
  int failed = crc != FTL_OK, any_failed = 1;
  rc = ftl_mpi_check(mpi->allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, ctx->comm),
                     "MPI_Allreduce (NCCL set-up)", d);
  if (!rc && any_failed) {
    if (failed) {
      memcpy(d, &cd, sizeof cd);
      rc = crc;
    } else {
      rc = ftl_diag_fail(d, FTL_ERR_NCCL, "another rank could not set up its NCCL communicator (rank %d's was ready)",
                         ctx->info.rank);
    }
  }
  if (rc) {
    if (ctx->gpu) ftl_gpu_comm_abort(ctx->gpu);
    ftl_gpu_comm_destroy(ctx->gpu, 0);
    ctx->gpu = NULL;
    ctx->info.device = -1;
    return rc;
  }
  ctx->info.backend = FTL_BACKEND_NCCL;
  return FTL_OK;
}

static ftl_err init_mpi(ftl_ctx *ctx, int *argc, char ***argv, ftl_diag *d) {
  const ftl_mpi_ops *mpi = ftl_mpi();
  ftl_err rc;
  int initialized = 0, provided = 0;
  mpi->initialized(&initialized);
  if (!initialized) {
    rc = ftl_mpi_check(mpi->init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread", d);
    if (rc) return rc;
    ctx->mpi_owned = 1;
    if (provided < MPI_THREAD_MULTIPLE)
      FTL_LOG(FTL_LOG_WARN, "rdzv", "MPI provides thread level %d, not MPI_THREAD_MULTIPLE", provided);
  }
  /* Errors come back as codes: ftl decides what a failure means, MPI does not abort for it. */
  mpi->comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  rc = ftl_mpi_check(mpi->comm_dup(MPI_COMM_WORLD, &ctx->comm), "MPI_Comm_dup", d);
  if (rc) return rc;
  ctx->have_comm = 1;
  mpi->comm_set_errhandler(ctx->comm, MPI_ERRORS_RETURN);
  rc = ftl_mpi_check(mpi->comm_rank(ctx->comm, &ctx->info.rank), "MPI_Comm_rank", d);
  if (rc) return rc;
  rc = ftl_mpi_check(mpi->comm_size(ctx->comm, &ctx->info.world_size), "MPI_Comm_size", d);
  if (rc) return rc;
  MPI_Comm local = MPI_COMM_NULL;
  rc = ftl_mpi_check(mpi->comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, ctx->info.rank, MPI_INFO_NULL, &local),
                     "MPI_Comm_split_type", d);
  if (rc) return rc;
  mpi->comm_rank(local, &ctx->info.local_rank);
  mpi->comm_size(local, &ctx->info.local_world_size);
  mpi->comm_free(&local);
  return FTL_OK;
}

/* Under the launcher, MPI's numbering must be the launcher's: otherwise RANK in the environment
 * (which PyTorch-style code reads) and the rank ftl uses would disagree. */
static ftl_err check_gang(const ftl_ctx *ctx, ftl_diag *d) {
  const ftl_launch_env *e = &ctx->env;
  if (!e->present) return FTL_OK;
  if (e->world_size >= 0 && e->world_size != ctx->info.world_size)
    return ftl_diag_fail(d, FTL_ERR_GANG, "MPI world size %d differs from WORLD_SIZE=%d set by the launcher",
                         ctx->info.world_size, e->world_size);
  if (e->rank >= 0 && e->rank != ctx->info.rank)
    return ftl_diag_fail(d, FTL_ERR_GANG, "MPI rank %d differs from RANK=%d set by the launcher", ctx->info.rank, e->rank);
  return FTL_OK;
}

ftl_err ftl_init(int *argc, char ***argv, ftl_ctx **ctx_out) {
  ftl_err rc = FTL_OK;
  ftl_diag d = {{0}};
  *ctx_out = NULL;
  ftl_log_init_from_env();
  ftl_ctx *ctx = ftl_calloc(1, sizeof *ctx);
  if (!ctx) return FTL_ERR_NOMEM;
  pthread_mutex_init(&ctx->err_lock, NULL);
  ctx->client.fd = -1;
  ctx->info.device = -1;
  ctx->info.host = ftl_hostname();
  ctx->startup = (ftl_startup_ms){-1, -1, -1};
  *ctx_out = ctx;

  rc = ftl_launch_env_read(&ctx->env, &d);
  if (rc) goto out;
  ctx->info.attempt = ctx->env.attempt;
  ctx->info.under_launcher = ctx->env.present;
  ctx->info.run_dir = ctx->env.run_dir[0] ? ctx->env.run_dir : NULL;
  ftl_log_set_identity(ctx->env.rank, ctx->env.world_size);
  ctx->collective_timeout_ms = FTL_DEFAULT_COLLECTIVE_TIMEOUT_MS;
  const char *ct = getenv("FTL_COLLECTIVE_TIMEOUT_MS");
  int64_t parsed;
  if (ct && ftl_parse_i64(ct, 1, INT64_MAX / 4, &parsed) == FTL_OK) ctx->collective_timeout_ms = parsed;

  int64_t t0 = ftl_clock_ns();
  if (ctx->env.present) {
    if (ctx->env.rank < 0 || ctx->env.world_size < 1) {
      rc = ftl_diag_fail(&d, FTL_ERR_GANG, "FTL_RDZV_ADDR is set but RANK/WORLD_SIZE are not");
      goto out;
    }
    /* The launcher's verdict normally comes first; the extra second covers a slow launcher. */
    rc = ftl_rdzv_client_open(&ctx->client, &ctx->env, "rank", ctx->env.rank,
                              ftl_deadline_after_ms(ctx->env.timeout_ms + 1000), &d);
    if (rc) goto out;
    ctx->have_client = 1;
    ctx->startup.rendezvous = ms_since(t0);
  }

  t0 = ftl_clock_ns();
  rc = init_mpi(ctx, argc, argv, &d);
  if (rc) goto out;
  ctx->startup.mpi_init = ms_since(t0);
  ftl_log_set_identity(ctx->info.rank, ctx->info.world_size);
  rc = check_gang(ctx, &d);
  if (rc) goto out;

  t0 = ftl_clock_ns();
  rc = init_communicator(ctx, &d);
  if (rc) goto out;
  ctx->startup.comm_init = ms_since(t0);
  ctx->ready_ns = ftl_clock_ns();

  report(ctx, json_pack("{s:s, s:f, s:f, s:f, s:s, s:i, s:i, s:i}", "type", "ready", "rendezvous_ms",
                        ctx->startup.rendezvous, "mpi_init_ms", ctx->startup.mpi_init, "comm_init_ms",
                        ctx->startup.comm_init, "backend", ctx->info.backend == FTL_BACKEND_NCCL ? "nccl" : "mpi",
                        "device", ctx->info.device, "local_rank", ctx->info.local_rank, "local_world_size",
                        ctx->info.local_world_size));
out:
  if (rc) {
    ctx_fail(ctx, rc, &d);
    FTL_LOG(FTL_LOG_ERROR, "rdzv", "ftl_init failed: %s", d.msg);
  }
  return rc;
}

ftl_err ftl_finalize(ftl_ctx *ctx) {
  if (!ctx) return FTL_OK;
  ftl_err rc = FTL_OK;
  ftl_diag d = {{0}};
  /* A communicator broken by an error was aborted then; a healthy one is finalized, with a
   * deadline (a peer that died makes the finalize wait: then it is aborted). */
  if (ctx->gpu) ftl_gpu_comm_destroy(ctx->gpu, ftl_deadline_after_ms(nccl_init_timeout_ms(ctx)));
  if (ctx->stage_event) ftl_gpu()->event_destroy(ctx->stage_event);
  ftl_free(ctx->stage);
  const ftl_mpi_ops *mpi = ftl_mpi();
  if (ctx->have_comm) mpi->comm_free(&ctx->comm);
  if (ctx->mpi_owned) {
    int finalized = 0;
    mpi->finalized(&finalized);
    if (!finalized) rc = ftl_mpi_check(mpi->finalize(), "MPI_Finalize", &d);
  }
  if (ctx->have_client) {
    report(ctx, json_pack("{s:s}", "type", "bye"));
    ftl_rdzv_client_close(&ctx->client);
  }
  ftl_linebuf_free(&ctx->from_launcher);
  pthread_mutex_destroy(&ctx->err_lock);
  ftl_free(ctx);
  return rc;
}

const ftl_info *ftl_ctx_info(const ftl_ctx *ctx) { return &ctx->info; }
const ftl_startup_ms *ftl_ctx_startup(const ftl_ctx *ctx) { return &ctx->startup; }
const char *ftl_ctx_errmsg(const ftl_ctx *ctx) { return ctx ? ctx->diag.msg : ""; }
void *ftl_ctx_mpi_comm(ftl_ctx *ctx) { return ctx->have_comm ? &ctx->comm : NULL; }

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
  return ctx_fail(ctx, err, detail);
}

static ftl_err broken_fail(ftl_ctx *ctx, const char *what) {
  ftl_diag d;
  ftl_diag_fail(&d, FTL_ERR_STATE, "%s: the context is broken since an earlier GPU error (%.900s)", what, ctx->broken_msg);
  return ctx_fail(ctx, FTL_ERR_STATE, &d);
}

static ftl_err mpi_allreduce_host(ftl_ctx *ctx, const void *send, void *recv, size_t count, MPI_Datatype t,
                                  size_t elem, ftl_op op, ftl_diag *d) {
  const ftl_mpi_ops *mpi = ftl_mpi();
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
  const ftl_gpu_ops *g = ftl_gpu();
  int st = FTL_GPU_OK;
  if (!ctx->stage_event && (st = g->event_create(&ctx->stage_event)) != FTL_GPU_OK)
    return ftl_gpu_fail(st, "cudaEventCreateWithFlags", d);
  if ((st = g->event_record(ctx->stage_event, stream)) != FTL_GPU_OK) return ftl_gpu_fail(st, "cudaEventRecord", d);
  return ftl_gpu_event_wait(ctx->stage_event, deadline, what, d);
}

/* Device buffers on the MPI path (Open MPI here is not CUDA-aware): copied to host after the
 * caller's work on `stream`, reduced there, copied back, and waited for before returning. */
static ftl_err mpi_allreduce_staged(ftl_ctx *ctx, const void *send, void *recv, size_t count, MPI_Datatype t,
                                    size_t elem, ftl_op op, void *stream, ftl_diag *d) {
  const ftl_gpu_ops *g = ftl_gpu();
  int64_t deadline = ftl_deadline_after_ms(ctx->collective_timeout_ms);
  size_t bytes = count * elem;
  if (bytes > ctx->stage_bytes) {
    char *p = ftl_realloc(ctx->stage, bytes);
    if (!p) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory staging %zu bytes of device memory", bytes);
    ctx->stage = p;
    ctx->stage_bytes = bytes;
  }
  int st = g->memcpy_async(ctx->stage, send, bytes, 0, stream);
  if (st != FTL_GPU_OK) return ftl_gpu_fail(st, "cudaMemcpyAsync (device to host, staging)", d);
  ftl_err rc = stage_sync(ctx, stream, deadline, "staging copy to host", d);
  if (rc) return rc;
  rc = mpi_allreduce_host(ctx, ctx->stage, ctx->stage, count, t, elem, op, d);
  if (rc) return rc;
  st = g->memcpy_async(recv, ctx->stage, bytes, 1, stream);
  if (st != FTL_GPU_OK) return ftl_gpu_fail(st, "cudaMemcpyAsync (host to device, staging)", d);
  return stage_sync(ctx, stream, deadline, "staging copy to the device", d);
}

static int on_device(ftl_gpu_mem kind) { return kind == FTL_GPU_MEM_DEVICE || kind == FTL_GPU_MEM_MANAGED; }

static ftl_err allreduce_impl(ftl_ctx *ctx, const void *send, void *recv, size_t count, ftl_dtype dtype, ftl_op op,
                              void *stream) {
  /* Not zeroed: it is 1 KiB, written only on an error, and clearing it on every call costs a
   * measurable share of a small allreduce. */
  ftl_diag d;
  if (!ctx->have_comm) return ctx_fail(ctx, ftl_diag_fail(&d, FTL_ERR_STATE, "ftl_allreduce before ftl_init succeeded"), &d);
  if (ctx->broken) return broken_fail(ctx, "ftl_allreduce");
  /* Memory kinds: only where a GPU was seen (a CPU-only rank pays nothing). Both buffers must be
   * of one kind; host memory always goes through MPI, device memory through NCCL when it is the
   * backend, else staged through host memory. */
  int device = 0;
  if (ctx->local_gpus > 0) {
    int sdev = -1, rdev = -1;
    ftl_gpu_mem sk = ftl_gpu_mem_kind(send, &sdev), rk = ftl_gpu_mem_kind(recv, &rdev);
    if (on_device(sk) != on_device(rk))
      return ctx_fail(ctx,
                      ftl_diag_fail(&d, FTL_ERR_INVAL, "ftl_allreduce: send is %s memory and recv is %s memory: both must be "
                                    "host or both device", on_device(sk) ? "device" : "host", on_device(rk) ? "device" : "host"),
                      &d);
    device = on_device(sk);
    if (device && ctx->info.device >= 0 && ((sk == FTL_GPU_MEM_DEVICE && sdev != ctx->info.device) ||
                                            (rk == FTL_GPU_MEM_DEVICE && rdev != ctx->info.device)))
      return ctx_fail(ctx,
                      ftl_diag_fail(&d, FTL_ERR_INVAL, "ftl_allreduce: buffer on device %d, but this rank's device is %d",
                                    sk == FTL_GPU_MEM_DEVICE && sdev != ctx->info.device ? sdev : rdev, ctx->info.device),
                      &d);
  }
  if (device && ctx->info.backend == FTL_BACKEND_NCCL) {
    ftl_err rc = ftl_gpu_allreduce(ctx->gpu, send, recv, count, dtype, op, stream,
                                   ftl_deadline_after_ms(ctx->collective_timeout_ms), &d);
    return rc ? ctx_break(ctx, rc, &d) : FTL_OK;
  }
  int ok;
  MPI_Datatype t = mpi_type(dtype, &ok);
  if (!ok) return ctx_fail(ctx, ftl_diag_fail(&d, FTL_ERR_UNSUPPORTED, "allreduce of %s on the MPI path", ftl_dtype_name(dtype)), &d);
  size_t elem = ftl_dtype_size(dtype);
  if (device) {
    ftl_err rc = mpi_allreduce_staged(ctx, send, recv, count, t, elem, op, stream, &d);
    if (rc == FTL_ERR_CUDA || rc == FTL_ERR_TIMEOUT) return ctx_break(ctx, rc, &d);
    return rc ? ctx_fail(ctx, rc, &d) : FTL_OK;
  }
  /* Host memory the caller filled from its stream (an async copy into pinned memory): wait for
   * that stream first when one was named. */
  if (stream) {
    ftl_err rc = stage_sync(ctx, stream, ftl_deadline_after_ms(ctx->collective_timeout_ms), "the caller's stream", &d);
    if (rc) return ctx_break(ctx, rc, &d);
  }
  ftl_err rc = mpi_allreduce_host(ctx, send, recv, count, t, elem, op, &d);
  return rc ? ctx_fail(ctx, rc, &d) : FTL_OK;
}

ftl_err ftl_barrier(ftl_ctx *ctx, int timeout_ms) {
  ftl_diag d = {{0}};
  if (!ctx->have_comm) return ctx_fail(ctx, ftl_diag_fail(&d, FTL_ERR_STATE, "ftl_barrier before ftl_init succeeded"), &d);
  if (ctx->broken) return broken_fail(ctx, "ftl_barrier");
  const ftl_mpi_ops *mpi = ftl_mpi();
  MPI_Request req;
  ftl_err rc = ftl_mpi_check(mpi->ibarrier(ctx->comm, &req), "MPI_Ibarrier", &d);
  if (rc) return ctx_fail(ctx, rc, &d);
  int64_t deadline = ftl_deadline_after_ms(timeout_ms);
  /* Poll with a growing pause: fast when peers are already there, cheap when they are late. */
  long pause_ns = 1000;
  for (;;) {
    int flag = 0;
    rc = ftl_mpi_check(mpi->test(&req, &flag, MPI_STATUS_IGNORE), "MPI_Test", &d);
    if (rc) return ctx_fail(ctx, rc, &d);
    if (flag) return FTL_OK;
    if (ftl_deadline_left_ms(deadline) == 0) {
      /* The request cannot be cancelled (MPI 3.1); the gang is now unusable and must end. */
      ftl_diag_fail(&d, FTL_ERR_TIMEOUT, "barrier: not every rank arrived within %d ms (rank %d waited)", timeout_ms,
                    ctx->info.rank);
      return ctx_fail(ctx, FTL_ERR_TIMEOUT, &d);
    }
    struct timespec ts = {0, pause_ns};
    nanosleep(&ts, NULL);
    if (pause_ns < 1000000) pause_ns *= 2;
  }
}

ftl_err ftl_bcast_host(ftl_ctx *ctx, void *buf, size_t size, int root) {
  ftl_diag d; /* written only on an error (see allreduce_impl) */
  if (!ctx->have_comm) return ctx_fail(ctx, ftl_diag_fail(&d, FTL_ERR_STATE, "ftl_bcast_host before ftl_init succeeded"), &d);
  if (ctx->broken) return broken_fail(ctx, "ftl_bcast_host");
  const ftl_mpi_ops *mpi = ftl_mpi();
  for (size_t done = 0; done < size;) {
    size_t n = size - done;
    if (n > (size_t)INT_MAX / 2) n = (size_t)INT_MAX / 2;
    ftl_err rc = ftl_mpi_check(mpi->bcast((char *)buf + done, (int)n, MPI_BYTE, root, ctx->comm), "MPI_Bcast", &d);
    if (rc) return ctx_fail(ctx, rc, &d);
    done += n;
  }
  return FTL_OK;
}

/* Reads what the launcher sent since last time, without waiting. */
static void poll_launcher(ftl_ctx *ctx) {
  if (!ctx->have_client || ctx->client.fd < 0) return;
  bool eof = false;
  if (ftl_linebuf_fill(&ctx->from_launcher, ctx->client.fd, &eof) != FTL_OK) return;
  json_t *msg = NULL;
  ftl_diag ignored;
  while (ftl_linebuf_next(&ctx->from_launcher, &msg, &ignored) == FTL_OK) {
    if (!strcmp(ftl_wire_str(msg, "type", ""), "stop")) {
      ctx->stop_requested = 1;
      snprintf(ctx->stop_reason, sizeof ctx->stop_reason, "%s", ftl_wire_str(msg, "reason", "stop requested"));
    }
    json_decref(msg);
  }
  /* A launcher that closed the connection is gone: the rank agent ends this program. */
}

ftl_err ftl_stop_requested(ftl_ctx *ctx, int *stop_out, const char **reason_out) {
  ftl_diag d; /* written only on an error (see allreduce_impl) */
  *stop_out = 0;
  if (reason_out) *reason_out = "";
  if (!ctx->have_comm) return ctx_fail(ctx, ftl_diag_fail(&d, FTL_ERR_STATE, "ftl_stop_requested before ftl_init succeeded"), &d);
  poll_launcher(ctx);
  int local = ctx->stop_requested, any = 0;
  ftl_err rc = ftl_mpi_check(ftl_mpi()->allreduce(&local, &any, 1, MPI_INT, MPI_MAX, ctx->comm), "MPI_Allreduce (stop)", &d);
  if (rc) return ctx_fail(ctx, rc, &d);
  if (any && !ctx->stop_reason[0]) snprintf(ctx->stop_reason, sizeof ctx->stop_reason, "another rank was asked to stop");
  *stop_out = any;
  if (reason_out) *reason_out = ctx->stop_reason;
  return FTL_OK;
}

int ftl_stop_pending(ftl_ctx *ctx, const char **reason_out) {
  poll_launcher(ctx);
  if (reason_out) *reason_out = ctx->stop_reason;
  return ctx->stop_requested;
}

ftl_err ftl_progress_section(ftl_ctx *ctx, const char *section) {
  if (!ctx->have_client) return FTL_OK;
  ftl_diag ignored;
  return ftl_rdzv_client_send(&ctx->client, json_pack("{s:s, s:s}", "type", "section", "name", section), 0, &ignored);
}

ftl_err ftl_step_done(ftl_ctx *ctx, int64_t step) {
  if (!ctx->have_client) return FTL_OK;
  ftl_diag ignored;
  if (ctx->sampling) {
    /* The sampled step just ended: its time less its collectives is this rank's compute. */
    ctx->compute_ms = (double)(ftl_clock_ns() - ctx->sample_t0_ns - ctx->collective_ns) / 1e6;
    ctx->sampling = 0;
  }
  if (!ctx->first_step_reported) {
    ctx->first_step_reported = 1;
    ctx->last_progress_ms = ftl_clock_ms();
    ctx->compute_ms = -1;
    ctx->sampling = 1;
    ctx->sample_t0_ns = ftl_clock_ns();
    ctx->collective_ns = 0;
    return ftl_rdzv_client_send(&ctx->client,
                                json_pack("{s:s, s:I, s:f}", "type", "first_step", "step", (json_int_t)step,
                                          "first_step_ms", ms_since(ctx->ready_ns)),
                                0, &ignored);
  }
  int64_t now = ftl_clock_ms();
  if (now - ctx->last_progress_ms < FTL_PROGRESS_INTERVAL_MS) return FTL_OK;
  ctx->last_progress_ms = now;
  double compute_ms = ctx->compute_ms;
  /* Sample the next step. */
  ctx->sampling = 1;
  ctx->collective_ns = 0;
  ctx->sample_t0_ns = ftl_clock_ns();
  /* A heartbeat that does not fit in the socket is dropped: the next one says the same, later. */
  ftl_err rc = ftl_rdzv_client_send(
      &ctx->client, json_pack("{s:s, s:I, s:f}", "type", "step", "step", (json_int_t)step, "compute_ms", compute_ms), 1,
      &ignored);
  return rc == FTL_ERR_TIMEOUT ? FTL_OK : rc;
}

ftl_err ftl_progress_report(ftl_ctx *ctx, int64_t step, int64_t total_steps, double loss, int64_t tokens) {
  if (!ctx || !ctx->have_client || ctx->info.rank != 0) return FTL_OK;
  int64_t now = ftl_clock_ms();
  int last = total_steps > 0 && step >= total_steps;
  if (ctx->have_report && !last && now - ctx->last_report_ms < FTL_PROGRESS_REPORT_INTERVAL_MS) return FTL_OK;
  /* Tokens per second between two reports of this process; the first report has no rate yet. */
  double tps = -1;
  if (ctx->have_report && now > ctx->last_report_ms && tokens >= ctx->last_report_tokens)
    tps = (double)(tokens - ctx->last_report_tokens) * 1000.0 / (double)(now - ctx->last_report_ms);
  ctx->have_report = 1;
  ctx->last_report_ms = now;
  ctx->last_report_tokens = tokens;
  /* NaN and infinities are not JSON: a diverged loss is sent as null. */
  json_t *jl = isfinite(loss) ? json_real(loss) : json_null();
  ftl_diag ignored;
  /* The heartbeat message (wire version 2 adds these fields): it also counts as progress for the
   * hang detector. Dropped when the socket is full, like any heartbeat. */
  ftl_err rc = ftl_rdzv_client_send(&ctx->client,
                                    json_pack("{s:s, s:I, s:I, s:o, s:I, s:f}", "type", "step", "step", (json_int_t)step,
                                              "total_steps", (json_int_t)total_steps, "loss", jl, "tokens",
                                              (json_int_t)tokens, "tokens_per_s", tps),
                                    1, &ignored);
  return rc == FTL_ERR_TIMEOUT ? FTL_OK : rc;
}

ftl_err ftl_ctx_emit_event(ftl_ctx *ctx, const char *event, const char *fields_json) {
  ftl_diag d = {{0}};
  json_t *fields = NULL;
  if (fields_json) {
    json_error_t jerr;
    fields = json_loads(fields_json, 0, &jerr);
    if (!json_is_object(fields)) {
      json_decref(fields);
      return ftl_diag_fail(&d, FTL_ERR_INVAL, "event fields are not a JSON object: %s", jerr.text);
    }
  }
  if (!ctx->have_client) {
    FTL_LOG(FTL_LOG_DEBUG, "event", "%s %s", event, fields_json ? fields_json : "{}");
    json_decref(fields);
    return FTL_OK;
  }
  json_t *msg = json_pack("{s:s, s:s, s:o}", "type", "event", "event", event, "fields", fields ? fields : json_object());
  return ftl_rdzv_client_send(&ctx->client, msg, 0, &d);
}
