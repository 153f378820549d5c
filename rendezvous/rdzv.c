/* rendezvous/rdzv.c: ftl_init and the gang's collectives (see include/ftl/rdzv.h).
 *
 * Start-up order and why:
 *   1. rendezvous with the launcher (TCP, with a deadline): MPI_Init itself waits for every rank
 *      with no deadline at all, so a rank that never starts would hang the others there. Joining
 *      the launcher first turns that into an error naming the missing ranks.
 *   2. MPI_Init_thread(MPI_THREAD_MULTIPLE), errors returned rather than aborting.
 *   3. local rank from MPI_Comm_split_type(SHARED), checked against the launcher's numbering.
 *   4. communicator: NCCL when every rank has a GPU, MPI otherwise (one notice on rank 0).
 * Each phase is timed and reported to the launcher, which writes the event log. */
#include <limits.h>
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
  int64_t collective_timeout_ms;
  int64_t ready_ns;   /* end of start-up: the first step's clock starts here */
  int64_t last_progress_ms;
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

size_t ftl_dtype_size(ftl_dtype dtype) {
  switch (dtype) {
    case FTL_DTYPE_F32: case FTL_DTYPE_I32: case FTL_DTYPE_U32: return 4;
    case FTL_DTYPE_F64: case FTL_DTYPE_I64: case FTL_DTYPE_U64: return 8;
    case FTL_DTYPE_U8: case FTL_DTYPE_I8: return 1;
    case FTL_DTYPE_F16: case FTL_DTYPE_BF16: return 2;
  }
  return 0;
}

const char *ftl_dtype_name(ftl_dtype dtype) {
  switch (dtype) {
    case FTL_DTYPE_F32: return "float32";
    case FTL_DTYPE_F64: return "float64";
    case FTL_DTYPE_I32: return "int32";
    case FTL_DTYPE_I64: return "int64";
    case FTL_DTYPE_U8: return "uint8";
    case FTL_DTYPE_F16: return "float16";
    case FTL_DTYPE_BF16: return "bfloat16";
    case FTL_DTYPE_I8: return "int8";
    case FTL_DTYPE_U32: return "uint32";
    case FTL_DTYPE_U64: return "uint64";
  }
  return "unknown";
}

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

/* Picks NCCL only when every rank has a GPU: a mixed gang cannot share one NCCL communicator. */
static ftl_err init_communicator(ftl_ctx *ctx, ftl_diag *d) {
  const ftl_mpi_ops *mpi = ftl_mpi();
  ftl_err rc = FTL_OK;
  char why[256] = "";
  const char *forced = getenv("FTL_BACKEND");
  int local_gpus = 0;
  if (!forced || strcmp(forced, "mpi") != 0) local_gpus = ftl_gpu_device_count(why, sizeof why);
  else snprintf(why, sizeof why, "FTL_BACKEND=mpi");
  int min_gpus = local_gpus;
  rc = ftl_mpi_check(mpi->allreduce(&local_gpus, &min_gpus, 1, MPI_INT, MPI_MIN, ctx->comm),
                     "MPI_Allreduce (GPU count)", d);
  if (rc) return rc;
  ctx->info.device = -1;
  ctx->info.backend = FTL_BACKEND_MPI;
  if (min_gpus == 0) {
    if (forced && strcmp(forced, "nccl") == 0)
      return ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "FTL_BACKEND=nccl but a rank has no GPU (%s)", why);
    if (ctx->info.rank == 0) {
      if (local_gpus == 0) FTL_LOG(FTL_LOG_INFO, "rdzv", "no GPU (%s): using the MPI CPU path", why);
      else FTL_LOG(FTL_LOG_INFO, "rdzv", "some ranks have no GPU: using the MPI CPU path");
    }
    return FTL_OK;
  }
  ctx->info.device = ctx->info.local_rank % local_gpus;
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
  rc = ftl_gpu_comm_create(ctx->info.device, ctx->info.world_size, ctx->info.rank, id, &ctx->gpu, d);
  if (rc) return rc;
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
  if (ctx->gpu) ftl_gpu_comm_destroy(ctx->gpu);
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

static ftl_err allreduce_impl(ftl_ctx *ctx, const void *send, void *recv, size_t count, ftl_dtype dtype, ftl_op op);

ftl_err ftl_allreduce(ftl_ctx *ctx, const void *send, void *recv, size_t count, ftl_dtype dtype, ftl_op op) {
  if (!ctx->sampling) return allreduce_impl(ctx, send, recv, count, dtype, op);
  int64_t t0 = ftl_clock_ns();
  ftl_err rc = allreduce_impl(ctx, send, recv, count, dtype, op);
  ctx->collective_ns += ftl_clock_ns() - t0;
  return rc;
}

static ftl_err allreduce_impl(ftl_ctx *ctx, const void *send, void *recv, size_t count, ftl_dtype dtype, ftl_op op) {
  /* Not zeroed: it is 1 KiB, written only on an error, and clearing it on every call costs a
   * measurable share of a small allreduce. */
  ftl_diag d;
  if (!ctx->have_comm) return ctx_fail(ctx, ftl_diag_fail(&d, FTL_ERR_STATE, "ftl_allreduce before ftl_init succeeded"), &d);
  if (ctx->info.backend == FTL_BACKEND_NCCL) {
    ftl_err rc = ftl_gpu_allreduce(ctx->gpu, send, recv, count, dtype, op,
                                   ftl_deadline_after_ms(ctx->collective_timeout_ms), &d);
    return rc ? ctx_fail(ctx, rc, &d) : FTL_OK;
  }
  int ok;
  MPI_Datatype t = mpi_type(dtype, &ok);
  if (!ok) return ctx_fail(ctx, ftl_diag_fail(&d, FTL_ERR_UNSUPPORTED, "allreduce of %s on the MPI path", ftl_dtype_name(dtype)), &d);
  size_t elem = ftl_dtype_size(dtype);
  const ftl_mpi_ops *mpi = ftl_mpi();
  /* MPI counts are int: large buffers go in chunks. The blocking MPI_Allreduce is used for its
   * bandwidth; a hung peer is caught by the launcher's progress watchdog, which ends the gang. */
  for (size_t done = 0; done < count;) {
    size_t n = count - done;
    if (n > (size_t)INT_MAX / 2) n = (size_t)INT_MAX / 2;
    const void *s = send == recv ? MPI_IN_PLACE : (const char *)send + done * elem;
    ftl_err rc = ftl_mpi_check(mpi->allreduce(s, (char *)recv + done * elem, (int)n, t, mpi_op(op), ctx->comm),
                               "MPI_Allreduce", &d);
    if (rc) return ctx_fail(ctx, rc, &d);
    done += n;
  }
  return FTL_OK;
}

ftl_err ftl_barrier(ftl_ctx *ctx, int timeout_ms) {
  ftl_diag d = {{0}};
  if (!ctx->have_comm) return ctx_fail(ctx, ftl_diag_fail(&d, FTL_ERR_STATE, "ftl_barrier before ftl_init succeeded"), &d);
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
