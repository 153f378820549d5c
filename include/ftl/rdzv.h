/* ftl/rdzv.h: the in-rank library's gang API: join the gang, learn who and where this rank is,
 * talk to the other ranks (allreduce, barrier), report progress, leave.
 *
 * A program started by `ftl run` calls ftl_init() first. ftl_init() joins the launcher's
 * rendezvous (every rank of this attempt, or an error naming the ones that never came, before a
 * deadline), then initialises MPI (MPI_THREAD_MULTIPLE), finds its local rank with
 * MPI_Comm_split_type, picks a GPU by local rank, and creates the NCCL communicator when every
 * rank has a GPU of its own (no more ranks on a host than GPUs), an MPI communicator otherwise;
 * the choice is agreed by all ranks (docs/gpu.md). The same binary also runs under a bare `mpirun`
 * (no FTL_RDZV_ADDR in the environment): then the launcher rendezvous is skipped and only MPI's
 * own start-up applies.
 *
 * Threads: one ftl_ctx is used by one thread at a time, except ftl_ctx_info() and
 * ftl_ctx_errmsg(), which any thread may call. Collective calls are marked; every rank of the
 * gang must make them in the same order, and they return the same result on every rank. */
#ifndef FTL_RDZV_H
#define FTL_RDZV_H

#include "ftl/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ftl/dtype.h"
#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ftl_ctx ftl_ctx;

typedef enum ftl_backend {
  FTL_BACKEND_MPI = 0,  /* host buffers, MPI collectives (CPU path) */
  FTL_BACKEND_NCCL = 1, /* device buffers over NCCL on ftl's stream, host buffers over MPI */
} ftl_backend;

typedef enum ftl_op {
  FTL_OP_SUM = 0,
  FTL_OP_MAX = 1,
  FTL_OP_MIN = 2,
  FTL_OP_PROD = 3,
} ftl_op;

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
  double parked;        /* a standby rank: how long it waited, parked, for its activation */
} ftl_startup_ms;

/* Collective. Joins the gang and returns a context in *ctx_out (destroyed by ftl_finalize).
 * argc/argv are passed to MPI_Init_thread and may be NULL. On failure *ctx_out may still be set
 * so that ftl_ctx_errmsg() can say what happened (for example, which ranks never arrived); it must
 * then be passed to ftl_finalize(), which releases it without any collective call. */
FTL_API ftl_err ftl_init(int *argc, char ***argv, ftl_ctx **ctx_out);

/* Not collective. Releases the context: destroys the communicator, tells the launcher this rank
 * is done and finalises MPI when ftl_init initialised it. Accepts NULL. */
FTL_API ftl_err ftl_finalize(ftl_ctx *ctx);

/* Borrowed; valid until ftl_finalize. Thread-safe. */
FTL_API const ftl_info *ftl_ctx_info(const ftl_ctx *ctx);
FTL_API const ftl_startup_ms *ftl_ctx_startup(const ftl_ctx *ctx);

/* The last error's detail on this context, "" when none. Thread-safe to read. */
FTL_API const char *ftl_ctx_errmsg(const ftl_ctx *ctx);

/* Collective. recv[i] = op over ranks of send[i]; send may equal recv (in place). The same call
 * serves host and device memory (docs/gpu.md): both buffers must be of one kind, and every rank
 * must pass the same kind.
 *   host memory (malloc, pinned)  reduced over MPI, on either backend;
 *   device memory (cudaMalloc, managed) of this rank's device (ftl_info.device)
 *                                 reduced by NCCL on ftl's own stream when the backend is NCCL,
 *                                 else copied through host memory and reduced over MPI.
 * Ordering: the reduction starts after all work enqueued before the call on the legacy default
 * stream, which by CUDA's rules includes every earlier kernel and copy on blocking streams (the
 * default stream and streams made without cudaStreamNonBlocking). Work on a non-blocking stream
 * or a per-thread default stream is not covered: use ftl_allreduce_on_stream. Either call returns
 * once the result is in recv, so any later work on any stream sees it. After a CUDA or NCCL error
 * the communicator is aborted and every later collective on ctx returns FTL_ERR_STATE naming
 * that first error. */
FTL_API ftl_err ftl_allreduce(ftl_ctx *ctx, const void *send, void *recv, size_t count, ftl_dtype dtype,
                              ftl_op op);

/* Collective. ftl_allreduce ordered after the work enqueued so far on cuda_stream (a cudaStream_t;
 * NULL: the legacy default stream, as ftl_allreduce): ftl records an event on it and its own
 * stream waits for that event before NCCL reads send. With host buffers the stream is waited for
 * before MPI reads them. */
FTL_API ftl_err ftl_allreduce_on_stream(ftl_ctx *ctx, const void *send, void *recv, size_t count, ftl_dtype dtype,
                                        ftl_op op, void *cuda_stream);

/* Collective. Returns FTL_OK once every rank has arrived, FTL_ERR_TIMEOUT if that did not happen
 * within timeout_ms (then the gang is broken and should end: a late rank would wait forever). */
FTL_API ftl_err ftl_barrier(ftl_ctx *ctx, int timeout_ms);

/* Collective on the CPU communicator (MPI, even on the GPU path): broadcast of host bytes. */
FTL_API ftl_err ftl_bcast_host(ftl_ctx *ctx, void *buf, size_t size, int root);

/* Not collective. Reports that this rank finished training step `step`: the launcher's progress
 * heartbeat (hang detection) and, on the first call, the end of the "first step" start-up phase.
 * Cheap enough for every step: one small non-blocking send to the launcher at most every
 * FTL_PROGRESS_INTERVAL_MS. */
FTL_API ftl_err ftl_step_done(ftl_ctx *ctx, int64_t step);

/* Not collective. ftl_step_done, and this rank did `flops` model FLOPs in that step: its own share
 * of the step's forward and backward passes as the model's shapes count them (2 per multiply-add;
 * not the hardware's, not the optimizer's), for the launcher's model FLOPs utilisation (MFU:
 * docs/gpu.md, "Useful work: MFU"). The rank's running total goes with its heartbeat, so a
 * dropped heartbeat loses nothing. flops may be 0 (a step that did no model work); a negative,
 * NaN or infinite flops is FTL_ERR_INVAL (ftl_ctx_errmsg says why) and reports nothing. Without a
 * launcher it checks flops and returns FTL_OK. */
FTL_API ftl_err ftl_step_done_flops(ftl_ctx *ctx, int64_t step, double flops);

/* Not collective; only rank 0's reports are used (other ranks' calls return FTL_OK and send
 * nothing). Reports where training stands, for the operator: `ftl run`'s progress line, the
 * `progress` events of the run's event log (loss against step for `ftl report`) and the metrics
 * textfile. step: steps done; total_steps: the run's last step (0 if unknown); loss: the training
 * loss of the latest steps (NaN if none); tokens: tokens processed so far by this process's
 * gang in this attempt (for tokens per second). Call it at the program's own logging interval
 * (or every step: sends are limited to one a second, and the final step's report is always sent).
 * Without a launcher it does nothing and returns FTL_OK. */
FTL_API ftl_err ftl_progress_report(ftl_ctx *ctx, int64_t step, int64_t total_steps, double loss, int64_t tokens);

/* Collective. Sets *stop_out to 1 on every rank when the launcher asked the job to stop (a
 * preemption: SIGTERM or SIGUSR1 to `ftl run`, Slurm's --signal, scancel), else 0 on every rank.
 * The ranks agree (an allreduce of one int on the CPU communicator), so all of them stop after the
 * same step. The program should then save a checkpoint, wait until it is committed, call
 * ftl_finalize and exit 0; `ftl run` then exits with "requeue me" (75). Cheap enough for every
 * step (one small allreduce); calling it every few steps is fine too. *reason_out, when not NULL,
 * gets a borrowed description ("preempted by SIGTERM") valid until ftl_finalize. */
FTL_API ftl_err ftl_stop_requested(ftl_ctx *ctx, int *stop_out, const char **reason_out);

/* Not collective: 1 when this rank has heard a stop request (reason as above), else 0. A program
 * that already makes a collective every step can fold this flag into it (sum or max it with its
 * gradients, as examples/finetune does) and so agree on stopping without ftl_stop_requested's
 * own allreduce. */
FTL_API int ftl_stop_pending(ftl_ctx *ctx, const char **reason_out);

/* Not collective. Tells the launcher's hang detector which kind of work follows, so the right
 * silence timeout applies: "step" (training steps, the default after the first step) or
 * "checkpoint" (a blocking checkpoint or restore). Declare "checkpoint" too after the last step,
 * before work that keeps ranks waiting on one another (rank 0 writing the final model, a held-out
 * evaluation, the last commit): under "step" the waiting ranks would be called hung once it
 * outlasts timeouts.step_s (examples/finetune/finetune.c and examples/torch-lora do so). */
FTL_API ftl_err ftl_progress_section(ftl_ctx *ctx, const char *section);

/* Not collective; thread-safe. Sends one machine-readable event to the run's event log (the
 * launcher is its only writer and adds time, attempt, rank and host). `event` is a short name
 * ("ckpt_stall"), `fields_json` a JSON object text ("{\"step\":10,\"ms\":1.5}") or NULL.
 * Without a launcher the event is logged at debug level and FTL_OK is returned. */
FTL_API ftl_err ftl_ctx_emit_event(ftl_ctx *ctx, const char *event, const char *fields_json);

/* Opaque access for ftl's own modules (checkpoint): the MPI communicator of the gang, as a
 * pointer to an MPI_Comm. Borrowed. */
FTL_API void *ftl_ctx_mpi_comm(ftl_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
