/* rendezvous/rdzv_init.c: ftl_init, ftl_finalize and the context's accessors (include/ftl/rdzv.h).
 *
 * Start-up order and why:
 *   1. rendezvous with the launcher (TCP, with a deadline): MPI_Init itself waits for every rank
 *      with no deadline at all, so a rank that never starts would hang the others there. Joining
 *      the launcher first turns that into an error naming the missing ranks.
 *   2. MPI_Init_thread(MPI_THREAD_MULTIPLE), errors returned rather than aborting.
 *   3. local rank from MPI_Comm_split_type(SHARED), checked against the launcher's numbering.
 *   3a. a standby gang (FTL_STANDBY=1, docs/fault-tolerance.md) parks here: it has paid for the
 *      program's start-up and MPI_Init, and waits on the launcher's socket, touching no device
 *      and no file of the run, until the launcher activates it as an attempt (or dismisses it).
 *   4. communicator: NCCL when every rank has a GPU of its own, MPI otherwise (one notice on
 *      rank 0); agreed by all ranks, with a deadline on NCCL's set-up (docs/gpu.md).
 * Each phase is timed and reported to the launcher, which writes the event log.
 *
 * Not here: the collectives (rdzv_coll.c), the launcher channel after start-up (rdzv_channel.c). */
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rendezvous/launch.h"
#include "rendezvous/rz_internal.h"

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
  const rz_mpi_ops *mpi = ftl_mpi();
  ftl_err rc = FTL_OK;
  char why[256] = "";
  const char *forced = ctx->env.backend[0] ? ctx->env.backend : NULL; /* FTL_BACKEND */
  int want_nccl = forced && strcmp(forced, "nccl") == 0;
  /* Probed even under FTL_BACKEND=mpi: where there are GPUs, device buffers must be recognised
   * (and staged) on the MPI path too. */
  int local_gpus = rz_gpu_device_count(why, sizeof why);
  ctx->local_gpus = local_gpus;
  if (forced && strcmp(forced, "mpi") == 0) {
    local_gpus = 0;
    snprintf(why, sizeof why, "FTL_BACKEND=mpi");
  }
  /* MIN over ranks of {GPUs, one GPU per local rank}: 0 in either means the MPI path. */
  int own_device = local_gpus > 0 && ctx->info.local_world_size <= local_gpus && rz_gpu_nccl_compiled();
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
    if (want_nccl && !rz_gpu_nccl_compiled())
      return ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "FTL_BACKEND=nccl but ftl was built without NCCL");
    if (want_nccl)
      return ftl_diag_fail(d, FTL_ERR_UNSUPPORTED,
                           "FTL_BACKEND=nccl but a host has more ranks than GPUs (here %d ranks, %d GPUs): NCCL "
                           "cannot put two ranks on one device",
                           ctx->info.local_world_size, local_gpus);
    if (ctx->info.rank == 0 && !rz_gpu_nccl_compiled())
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
  if (ctx->info.rank == 0) id_rc = (int)rz_gpu_unique_id(id, d);
  /* Agree on rank 0's result before using the id, so every rank fails together. */
  int any_fail = id_rc;
  rc = ftl_mpi_check(mpi->bcast(&any_fail, 1, MPI_INT, 0, ctx->comm), "MPI_Bcast", d);
  if (rc) return rc;
  if (any_fail) return ctx->info.rank == 0 ? (ftl_err)id_rc : ftl_diag_fail(d, FTL_ERR_NCCL, "rank 0 could not create the NCCL id");
  rc = ftl_mpi_check(mpi->bcast(id, FTL_NCCL_ID_BYTES, MPI_BYTE, 0, ctx->comm), "MPI_Bcast (NCCL id)", d);
  if (rc) return rc;
  ftl_diag cd = {{0}};
  ftl_err crc = rz_gpu_comm_create(ctx->info.device, ctx->info.world_size, ctx->info.rank, id,
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
    if (ctx->gpu) rz_gpu_comm_abort(ctx->gpu);
    rz_gpu_comm_destroy(ctx->gpu, 0);
    ctx->gpu = NULL;
    ctx->info.device = -1;
    return rc;
  }
  ctx->info.backend = FTL_BACKEND_NCCL;
  return FTL_OK;
}

static ftl_err next_from_launcher(ftl_ctx *ctx, int64_t deadline, json_t **msg_out, ftl_diag *d);

/* After MPI_Init under srun (FTL_MPI_INIT_BARRIER=1): "mpi_up" to the launcher, then nothing until
 * its "mpi_go", which it sends once every rank of the gang said "mpi_up". Open MPI 4.1's MPI_Init
 * waits in two PMIx fences, and Slurm's PMIx server releases the processes of a fence at different
 * moments: a rank through both could send its first message (MPI_Comm_dup's) to one still waiting
 * in the first, whose PML has not yet registered the callback for it, and that rank crashed calling
 * a NULL function or lost the message and hung (1 start in about 16 of 6 ranks on 3 nodes; the
 * race of open-mpi/ompi#12495). Bounded by the collective timeout; "fail" or "stop" ends it. */
static ftl_err mpi_init_barrier(ftl_ctx *ctx, ftl_diag *d) {
  int64_t deadline = ftl_deadline_after_ms(ctx->collective_timeout_ms);
  ftl_err rc = rz_rdzv_client_send(&ctx->client, json_pack("{s:s}", "type", "mpi_up"), 0, d);
  for (int go = 0; !rc && !go;) {
    json_t *msg = NULL;
    ftl_diag wd;
    ftl_err wrc = next_from_launcher(ctx, deadline, &msg, &wd);
    if (wrc == FTL_ERR_TIMEOUT)
      return ftl_diag_fail(d, wrc, "not every rank was through MPI_Init within %lld ms",
                           (long long)ctx->collective_timeout_ms);
    if (wrc) return ftl_diag_fail(d, wrc, "%s while the ranks were in MPI_Init", wd.msg);
    const char *type = rz_wire_str(msg, "type", "");
    go = !strcmp(type, "mpi_go");
    if (!strcmp(type, "fail") || !strcmp(type, "stop"))
      rc = ftl_diag_fail(d, FTL_ERR_RDZV, "the launcher ended the start-up after MPI_Init: %s",
                         rz_wire_str(msg, "reason", type));
    json_decref(msg);
  }
  return rc;
}

static ftl_err init_mpi(ftl_ctx *ctx, int *argc, char ***argv, ftl_diag *d) {
  const rz_mpi_ops *mpi = ftl_mpi();
  ftl_err rc;
  int initialized = 0, provided = 0;
  mpi->initialized(&initialized);
  if (!initialized) {
    rc = ftl_mpi_check(mpi->init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread", d);
    if (rc) return rc;
    ctx->mpi_owned = 1;
    if (provided < MPI_THREAD_MULTIPLE)
      FTL_LOG(FTL_LOG_WARN, "rdzv", "MPI provides thread level %d, not MPI_THREAD_MULTIPLE", provided);
    if (ctx->have_client && ctx->env.mpi_init_barrier && (rc = mpi_init_barrier(ctx, d))) return rc;
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
  const core_launch_env *e = &ctx->env;
  if (!e->present) return FTL_OK;
  if (e->world_size >= 0 && e->world_size != ctx->info.world_size)
    return ftl_diag_fail(d, FTL_ERR_GANG, "MPI world size %d differs from WORLD_SIZE=%d set by the launcher",
                         ctx->info.world_size, e->world_size);
  if (e->rank >= 0 && e->rank != ctx->info.rank)
    return ftl_diag_fail(d, FTL_ERR_GANG, "MPI rank %d differs from RANK=%d set by the launcher", ctx->info.rank, e->rank);
  return FTL_OK;
}

/* Resident memory of this process in KiB (/proc/self/statm), or -1. */
static long resident_kib(void) {
  FILE *f = fopen("/proc/self/statm", "re");
  if (!f) return -1;
  long size = 0, resident = -1;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  fclose(f);
  long page = sysconf(_SC_PAGESIZE);
  return resident < 0 || page <= 0 ? -1 : resident * (page / 1024);
}

/* A parked rank waits at most this long (FTL_STANDBY_PARK_TIMEOUT_MS, default a day): the launcher
 * replaces a standby whose ranks gave up. */
#define STANDBY_PARK_DEFAULT_MS (24LL * 3600 * 1000)

/* Takes what the activation says: this gang is now attempt N, with its folder. The environment is
 * updated too, for a program that reads FTL_ATTEMPT after ftl_init. */
static ftl_err take_activation(ftl_ctx *ctx, const json_t *msg, ftl_diag *d) {
  int64_t attempt = rz_wire_int(msg, "attempt", -1);
  const char *attempt_dir = rz_wire_str(msg, "attempt_dir", "");
  if (attempt < 0 || attempt > (1 << 24))
    return ftl_diag_fail(d, FTL_ERR_PROTO, "the launcher's activation names no attempt");
  ctx->env.attempt = (int)attempt;
  ctx->env.has_attempt = 1;
  ctx->env.standby = 0;
  ctx->info.attempt = (int)attempt;
  int64_t timeout_ms = rz_wire_int(msg, "timeout_ms", -1);
  if (timeout_ms > 0) ctx->env.timeout_ms = timeout_ms;
  char num[24];
  snprintf(num, sizeof num, "%d", (int)attempt);
  setenv("FTL_ATTEMPT", num, 1);
  if (*attempt_dir) setenv("FTL_ATTEMPT_DIR", attempt_dir, 1);
  unsetenv("FTL_STANDBY");
  return FTL_OK;
}

/* The standby's wait: "parked" to the launcher, then nothing but its socket until "activate"
 * (FTL_OK), its close or a "stop" (FTL_ERR_RDZV: dismissed), or the park deadline. No busy-wait:
 * one poll() a second. */
static ftl_err park(ftl_ctx *ctx, ftl_diag *d) {
  int64_t limit = ctx->env.standby_park_timeout_ms > 0 ? ctx->env.standby_park_timeout_ms : STANDBY_PARK_DEFAULT_MS;
  int64_t deadline = ftl_deadline_after_ms(limit);
  ftl_err rc = rz_rdzv_client_send(&ctx->client,
                                    json_pack("{s:s, s:i, s:f, s:f}", "type", "parked", "rss_kb", (int)resident_kib(),
                                              "rendezvous_ms", ctx->startup.rendezvous, "mpi_init_ms",
                                              ctx->startup.mpi_init),
                                    0, d);
  for (int done = 0; !rc && !done;) {
    json_t *msg = NULL;
    ftl_diag wd;
    ftl_err wrc = next_from_launcher(ctx, deadline, &msg, &wd);
    if (wrc == FTL_ERR_TIMEOUT)
      return ftl_diag_fail(d, wrc, "parked as a standby for %lld ms without activation", (long long)limit);
    if (wrc == FTL_ERR_RDZV)
      return ftl_diag_fail(d, wrc, "the launcher dismissed this standby gang (it closed the connection)");
    if (wrc) return ftl_diag_fail(d, wrc, "%s while parked", wd.msg);
    const char *type = rz_wire_str(msg, "type", "");
    if (!strcmp(type, "activate")) rc = take_activation(ctx, msg, d);
    else if (!strcmp(type, "stop")) rc = ftl_diag_fail(d, FTL_ERR_RDZV, "the launcher dismissed this standby gang");
    done = !strcmp(type, "activate") || !strcmp(type, "stop"); /* pings and the like are passed over */
    json_decref(msg);
  }
  return rc;
}

/* The launcher's next message (*msg_out, the caller's to free), waiting for it until deadline:
 * FTL_ERR_TIMEOUT then, FTL_ERR_RDZV when the launcher closed the connection. No busy-wait: the
 * socket is polled, at most a second at a time. */
static ftl_err next_from_launcher(ftl_ctx *ctx, int64_t deadline, json_t **msg_out, ftl_diag *d) {
  for (;;) {
    ftl_diag pd;
    ftl_err nrc = rz_linebuf_next(&ctx->from_launcher, msg_out, &pd);
    if (nrc == FTL_OK) return FTL_OK;
    if (nrc != FTL_ERR_NOTFOUND) return ftl_diag_fail(d, nrc, "from the launcher: %s", pd.msg);
    int left = ftl_deadline_left_ms(deadline);
    if (left == 0) return ftl_diag_fail(d, FTL_ERR_TIMEOUT, "no word from the launcher");
    struct pollfd pfd = {.fd = ctx->client.fd, .events = POLLIN};
    if (poll(&pfd, 1, left < 1000 ? left : 1000) <= 0) continue;
    bool eof = false;
    if (rz_linebuf_fill(&ctx->from_launcher, ctx->client.fd, &eof) != FTL_OK || eof)
      return ftl_diag_fail(d, FTL_ERR_RDZV, "the launcher closed the connection");
  }
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
  ctx->startup = (ftl_startup_ms){-1, -1, -1, -1};
  *ctx_out = ctx;

  rc = core_launch_env_read(&ctx->env, &d);
  if (rc) goto out;
  ctx->info.attempt = ctx->env.attempt;
  ctx->info.under_launcher = ctx->env.present;
  ctx->info.run_dir = ctx->env.run_dir[0] ? ctx->env.run_dir : NULL;
  ftl_log_set_identity(ctx->env.rank, ctx->env.world_size);
  ctx->collective_timeout_ms =
      ctx->env.collective_timeout_ms > 0 ? ctx->env.collective_timeout_ms : FTL_DEFAULT_COLLECTIVE_TIMEOUT_MS;

  int64_t t0 = ftl_clock_ns();
  if (ctx->env.present) {
    if (ctx->env.rank < 0 || ctx->env.world_size < 1) {
      rc = ftl_diag_fail(&d, FTL_ERR_GANG, "FTL_RDZV_ADDR is set but RANK/WORLD_SIZE are not");
      goto out;
    }
    /* The launcher's verdict normally comes first; the extra second covers a slow launcher. */
    rc = rz_rdzv_client_open(&ctx->client, &ctx->env, "rank", ctx->env.rank,
                              ftl_deadline_after_ms(ctx->env.timeout_ms + 1000), &d);
    if (rc) goto out;
    ctx->have_client = 1;
    ctx->startup.rendezvous = rz_ms_since(t0);
  }

  t0 = ftl_clock_ns();
  rc = init_mpi(ctx, argc, argv, &d);
  if (rc) goto out;
  ctx->startup.mpi_init = rz_ms_since(t0);
  ftl_log_set_identity(ctx->info.rank, ctx->info.world_size);
  rc = check_gang(ctx, &d);
  if (rc) goto out;
  if (ctx->have_client && ctx->env.standby) {
    int64_t parked_at = ftl_clock_ns();
    rc = park(ctx, &d);
    if (rc) goto out;
    ctx->startup.parked = rz_ms_since(parked_at);
    ftl_log_set_identity(ctx->info.rank, ctx->info.world_size);
  }

  t0 = ftl_clock_ns();
  rc = init_communicator(ctx, &d);
  if (rc) goto out;
  ctx->startup.comm_init = rz_ms_since(t0);
  ctx->ready_ns = ftl_clock_ns();

  /* cpus: the host's online CPUs, the launcher's share of them per rank for a CPU rank's peak
   * FLOPS (docs/gpu.md, "Useful work: MFU"). */
  rz_report(ctx, json_pack("{s:s, s:f, s:f, s:f, s:f, s:s, s:i, s:i, s:i, s:I}", "type", "ready", "parked_ms",
                        ctx->startup.parked, "rendezvous_ms",
                        ctx->startup.rendezvous, "mpi_init_ms", ctx->startup.mpi_init, "comm_init_ms",
                        ctx->startup.comm_init, "backend", ctx->info.backend == FTL_BACKEND_NCCL ? "nccl" : "mpi",
                        "device", ctx->info.device, "local_rank", ctx->info.local_rank, "local_world_size",
                        ctx->info.local_world_size, "cpus", (json_int_t)sysconf(_SC_NPROCESSORS_ONLN)));
out:
  if (rc) {
    rz_ctx_fail(ctx, rc, &d);
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
  if (ctx->gpu) rz_gpu_comm_destroy(ctx->gpu, ftl_deadline_after_ms(nccl_init_timeout_ms(ctx)));
  if (ctx->stage_event) ftl_gpu()->event_destroy(ctx->stage_event);
  ftl_free(ctx->stage);
  const rz_mpi_ops *mpi = ftl_mpi();
  if (ctx->have_comm) mpi->comm_free(&ctx->comm);
  if (ctx->mpi_owned) {
    int finalized = 0;
    mpi->finalized(&finalized);
    if (!finalized) rc = ftl_mpi_check(mpi->finalize(), "MPI_Finalize", &d);
  }
  if (ctx->have_client) {
    /* With the FLOPs of the last steps, which the heartbeats' throttle may have held back. */
    rz_report(ctx, rz_with_flops(ctx, json_pack("{s:s}", "type", "bye")));
    rz_rdzv_client_close(&ctx->client);
  }
  rz_linebuf_free(&ctx->from_launcher);
  pthread_mutex_destroy(&ctx->err_lock);
  ftl_free(ctx);
  return rc;
}

const ftl_info *ftl_ctx_info(const ftl_ctx *ctx) { return &ctx->info; }
const ftl_startup_ms *ftl_ctx_startup(const ftl_ctx *ctx) { return &ctx->startup; }
const char *ftl_ctx_errmsg(const ftl_ctx *ctx) { return ctx ? ctx->diag.msg : ""; }
void *ftl_ctx_mpi_comm(ftl_ctx *ctx) { return ctx->have_comm ? &ctx->comm : NULL; }

const core_launch_env *rz_ctx_launch_env(const ftl_ctx *ctx) { return ctx ? &ctx->env : NULL; }
