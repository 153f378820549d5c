/* ftl/rdzv.h: the in-rank library's gang API: join the gang, learn who and where this rank is,
 * talk to the other ranks (allreduce, barrier), report progress, leave.
 *
 * A program started by `ftl run` calls ftl_init() first. ftl_init() joins the launcher's
 * rendezvous (every rank of this attempt, or an error naming the ones that never came, before a
 * deadline), then initialises MPI (MPI_THREAD_MULTIPLE), finds its local rank with
 * MPI_Comm_split_type, picks a GPU by local rank, and creates the NCCL communicator when there
 * are GPUs, an MPI communicator otherwise. The same binary also runs under a bare `mpirun`
 * (no FTL_RDZV_ADDR in the environment): then the launcher rendezvous is skipped and only MPI's
 * own start-up applies.
 *
 * Threads: one ftl_ctx is used by one thread at a time, except ftl_ctx_info() and
 * ftl_ctx_errmsg(), which any thread may call. Collective calls are marked; every rank of the
 * gang must make them in the same order, and they return the same result on every rank. */
#ifndef FTL_RDZV_H
#define FTL_RDZV_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ftl_ctx ftl_ctx;

typedef enum ftl_backend {
  FTL_BACKEND_MPI = 0,  /* host buffers, MPI collectives (CPU path) */
  FTL_BACKEND_NCCL = 1, /* device buffers, NCCL collectives on ftl's stream (GPU path) */
} ftl_backend;

typedef enum ftl_dtype {
  FTL_DTYPE_F32 = 0,
  FTL_DTYPE_F64 = 1,
  FTL_DTYPE_I32 = 2,
  FTL_DTYPE_I64 = 3,
  FTL_DTYPE_U8 = 4,
  FTL_DTYPE_F16 = 5,
  FTL_DTYPE_BF16 = 6,
  FTL_DTYPE_I8 = 7,
  FTL_DTYPE_U32 = 8,
  FTL_DTYPE_U64 = 9,
} ftl_dtype;

typedef enum ftl_op {
  FTL_OP_SUM = 0,
  FTL_OP_MAX = 1,
  FTL_OP_MIN = 2,
  FTL_OP_PROD = 3,
} ftl_op;

/* Bytes of one element; 0 for a value not in the enum. */
size_t ftl_dtype_size(ftl_dtype dtype);
const char *ftl_dtype_name(ftl_dtype dtype);

typedef struct ftl_info {
  int rank;             /* in the gang, 0..world_size-1 */
  int world_size;
  int local_rank;       /* among the ranks on this host (MPI_Comm_split_type SHARED) */
  int local_world_size;
  int device;           /* CUDA device index used, -1 on the CPU path */
  ftl_backend backend;
  int attempt;          /* launcher attempt number (0 for the first, and without a launcher) */
  int under_launcher;   /* 1 when started by `ftl run` */
  const char *run_dir;  /* the run directory, or NULL without a launcher */
  const char *host;
} ftl_info;

/* Phase timings of this rank's start-up, in milliseconds (-1 when a phase did not run). */
typedef struct ftl_startup_ms {
  double rendezvous;
  double mpi_init;
  double comm_init;
} ftl_startup_ms;

/* Collective. Joins the gang and returns a context in *ctx_out (destroyed by ftl_finalize).
 * argc/argv are passed to MPI_Init_thread and may be NULL. On failure *ctx_out may still be set
 * so that ftl_ctx_errmsg() can say what happened (for example, which ranks never arrived); it must
 * then be passed to ftl_finalize(), which releases it without any collective call. */
ftl_err ftl_init(int *argc, char ***argv, ftl_ctx **ctx_out);

/* Not collective. Releases the context: destroys the communicator, tells the launcher this rank
 * is done and finalises MPI when ftl_init initialised it. Accepts NULL. */
ftl_err ftl_finalize(ftl_ctx *ctx);

/* Borrowed; valid until ftl_finalize. Thread-safe. */
const ftl_info *ftl_ctx_info(const ftl_ctx *ctx);
const ftl_startup_ms *ftl_ctx_startup(const ftl_ctx *ctx);

/* The last error's detail on this context, "" when none. Thread-safe to read. */
const char *ftl_ctx_errmsg(const ftl_ctx *ctx);

/* Collective. recv[i] = op over ranks of send[i]; send may equal recv (in place). On the NCCL
 * backend both are device pointers and the call returns once the result is in recv. */
ftl_err ftl_allreduce(ftl_ctx *ctx, const void *send, void *recv, size_t count, ftl_dtype dtype,
                      ftl_op op);

/* Collective. Returns FTL_OK once every rank has arrived, FTL_ERR_TIMEOUT if that did not happen
 * within timeout_ms (then the gang is broken and should end: a late rank would wait forever). */
ftl_err ftl_barrier(ftl_ctx *ctx, int timeout_ms);

/* Collective on the CPU communicator (MPI, even on the GPU path): broadcast of host bytes. */
ftl_err ftl_bcast_host(ftl_ctx *ctx, void *buf, size_t size, int root);

/* Not collective. Reports that this rank finished training step `step`: the launcher's progress
 * heartbeat (hang detection) and, on the first call, the end of the "first step" start-up phase.
 * Cheap enough for every step: one small non-blocking send to the launcher at most every
 * FTL_PROGRESS_INTERVAL_MS. */
ftl_err ftl_step_done(ftl_ctx *ctx, int64_t step);

/* Collective. Sets *stop_out to 1 on every rank when the launcher asked the job to stop (a
 * preemption: SIGTERM or SIGUSR1 to `ftl run`, Slurm's --signal, scancel), else 0 on every rank.
 * The ranks agree (an allreduce of one int on the CPU communicator), so all of them stop after the
 * same step. The program should then save a checkpoint, wait until it is committed, call
 * ftl_finalize and exit 0; `ftl run` then exits with "requeue me" (75). Cheap enough for every
 * step (one small allreduce); calling it every few steps is fine too. *reason_out, when not NULL,
 * gets a borrowed description ("preempted by SIGTERM") valid until ftl_finalize. */
ftl_err ftl_stop_requested(ftl_ctx *ctx, int *stop_out, const char **reason_out);

/* Not collective: 1 when this rank has heard a stop request (reason as above), else 0. A program
 * that already makes a collective every step can fold this flag into it (sum or max it with its
 * gradients, as examples/finetune does) and so agree on stopping without ftl_stop_requested's
 * own allreduce. */
int ftl_stop_pending(ftl_ctx *ctx, const char **reason_out);

/* Not collective. Tells the launcher's hang detector which kind of work follows, so the right
 * silence timeout applies: "step" (training steps, the default after the first step) or
 * "checkpoint" (a blocking checkpoint or restore). */
ftl_err ftl_progress_section(ftl_ctx *ctx, const char *section);

/* Not collective; thread-safe. Sends one machine-readable event to the run's event log (the
 * launcher is its only writer and adds time, attempt, rank and host). `event` is a short name
 * ("ckpt_stall"), `fields_json` a JSON object text ("{\"step\":10,\"ms\":1.5}") or NULL.
 * Without a launcher the event is logged at debug level and FTL_OK is returned. */
ftl_err ftl_ctx_emit_event(ftl_ctx *ctx, const char *event, const char *fields_json);

/* Opaque access for ftl's own modules (checkpoint): the MPI communicator of the gang, as a
 * pointer to an MPI_Comm. Borrowed. */
void *ftl_ctx_mpi_comm(ftl_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
