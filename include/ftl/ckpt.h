/* ftl/ckpt.h: sharded asynchronous checkpoints. A training program registers its state (named
 * tensors, split across ranks or replicated, and small blobs), calls ftl_ckpt_save() at a step
 * boundary (the state is copied into pre-faulted staging buffers and the call returns), and a
 * background writer thread per rank makes the shard durable and commits the step with a manifest.
 * At start-up ftl_ckpt_restore() loads the newest committed step that verifies, at any world size.
 * docs/checkpoint.md tells the whole story; docs/formats/{shard,manifest}.md the on-disk formats.
 *
 * Rules every function below follows:
 * - "Collective" means every rank of the gang calls it, in the same order relative to the other
 *   collective ckpt calls, with the same arguments where stated. A collective call returns the
 *   same ftl_err on every rank.
 * - One thread uses an ftl_ckpt at a time, except the functions marked thread-safe.
 * - Pointers passed in are borrowed unless stated. Registered tensor and blob memory is borrowed
 *   for the handle's lifetime: it must stay valid (and keep its address) until ftl_ckpt_destroy.
 * - Every blocking wait has a deadline (ftl_ckpt_options.timeout_ms); FTL_ERR_TIMEOUT after it.
 *
 * Not here: when to checkpoint (the cadence issue uses ftl_ckpt_last() to read δ and W). */
#ifndef FTL_CKPT_H
#define FTL_CKPT_H

#include "ftl/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ftl/dtype.h"
#include "ftl/error.h"
#include "ftl/rdzv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ftl_ckpt ftl_ckpt;

#define FTL_CKPT_NAME_MAX 127 /* bytes of a tensor or blob name, [A-Za-z0-9_.-], not starting with '.' */
#define FTL_CKPT_MAX_DIMS 8

/* How a tensor is spread over the ranks. Rows are slices along dimension 0 (a 0-d tensor is one
 * row). */
typedef enum ftl_ckpt_layout {
  /* Each rank holds its own contiguous row range of the global tensor: the range
   * ftl_ckpt_split_rows(global_shape[0], rank, world_size) gives. On restore at another world
   * size each rank gets the rows of its new range. */
  FTL_CKPT_SPLIT = 0,
  /* Every rank holds the whole tensor (same bytes on every rank). Rank r writes only its split
   * row range, so the ranks share the writing; on restore every rank gets the whole tensor. */
  FTL_CKPT_REPLICATED = 1,
} ftl_ckpt_layout;

typedef enum ftl_ckpt_mem {
  FTL_CKPT_HOST = 0,
  FTL_CKPT_DEVICE = 1, /* CUDA device memory; FTL_ERR_UNSUPPORTED in a build without CUDA */
} ftl_ckpt_mem;

typedef enum ftl_ckpt_blob_scope {
  FTL_CKPT_BLOB_GLOBAL = 0,   /* rank 0's bytes are saved; every rank gets them back */
  FTL_CKPT_BLOB_PER_RANK = 1, /* each rank's own bytes (RNG state); see ftl_ckpt_restore_info */
} ftl_ckpt_blob_scope;

typedef struct ftl_ckpt_options {
  /* The run directory; checkpoints go to <run_dir>/checkpoints/step-<step>/. NULL: the
   * launcher's run directory (ftl_ctx_info(ctx)->run_dir); FTL_ERR_INVAL if neither exists. */
  const char *run_dir;
  /* Committed checkpoints kept; older ones are deleted after each commit. Never below 2
   * (smaller values are raised to 2). Default 3. */
  int keep;
  /* Deadline of every blocking wait (a previous checkpoint still in flight, the writers'
   * agreement, restore's agreement). Default 600000 (10 min). */
  int64_t timeout_ms;
  /* I/O and checksum granularity in bytes. Default 8 MiB. */
  size_t chunk_bytes;
  /* A run directory that ever committed a step (checkpoints/COMMITTED exists, or a step is marked
   * bad) never starts from scratch unless this is set: ftl_ckpt_restore then returns
   * FTL_ERR_NOTFOUND instead of FTL_ERR_CORRUPT/FTL_ERR_IO when no step is usable, marking the
   * unusable committed steps bad ("discarded by a fresh start"), so the data stays. Also set by
   * the environment variable FTL_CKPT_ALLOW_FRESH=1. Default 0. */
  int allow_fresh;
  /* The L1 level (docs/checkpoint.md, "Levels"): a node-local folder in memory (a tmpfs such as
   * /dev/shm) where each rank also keeps the newest committed copy of its own shard, restored from
   * before the run directory when it verifies. NULL: the environment's FTL_CKPT_L1_DIR (set by
   * `ftl run` from the job's checkpoint.levels); "": no L1. l1_max_bytes: the most one rank keeps
   * there (0: FTL_CKPT_L1_MAX_BYTES, else only the folder's free space). */
  const char *l1_dir;
  uint64_t l1_max_bytes;
} ftl_ckpt_options;

/* Statistics of one checkpoint, as seen by this rank. */
typedef struct ftl_ckpt_stats {
  int64_t step;         /* -1 when there is none yet */
  ftl_err err;          /* FTL_OK: committed; otherwise why it was abandoned */
  char errmsg[512];     /* one sentence naming the rank, file and call at fault; "" when ok */
  double stall_ms;      /* δ: time ftl_ckpt_save blocked the loop (wait for the previous + copy) */
  double wait_prev_ms;  /* the part of δ spent waiting for the previous checkpoint */
  double durable_ms;    /* W: from the start of ftl_ckpt_save until the manifest was durable
                           (on every rank: until the commit was agreed) */
  uint64_t shard_bytes; /* bytes of this rank's shard file */
  uint64_t total_bytes; /* bytes of all shards of the step (rank 0 only; 0 elsewhere) */
  int level;            /* the level the step was saved at (FTL_CKPT_LEVEL_*, after
                           ftl_ckpt_save_level's fallbacks); 0 when there is none yet */
} ftl_ckpt_stats;

typedef struct ftl_ckpt_restore_info {
  int64_t step;               /* the step loaded, -1 when none */
  int written_world_size;     /* world size that wrote it */
  int committed_found;        /* committed steps found in the folder */
  int bad_steps;              /* committed steps that failed verification (marked bad, logged) */
  int per_rank_blobs_missing; /* per-rank blobs this rank got no value for (world size grew) */
  double restore_ms;
  char errmsg[1024]; /* when restore failed: each step tried and why */
} ftl_ckpt_restore_info;

/* Fills o with the defaults above. */
FTL_API void ftl_ckpt_options_init(ftl_ckpt_options *o);

/* Collective. Creates a checkpoint handle on the gang of ctx (ctx is borrowed and must outlive
 * the handle): duplicates the gang's communicator for the writer threads and starts this rank's
 * writer thread. opts may be NULL (defaults). */
FTL_API ftl_err ftl_ckpt_create(ftl_ctx *ctx, const ftl_ckpt_options *opts, ftl_ckpt **out);

/* Collective. Waits for a checkpoint in flight (up to the deadline), stops the writer thread,
 * frees the staging buffers and the communicator, and destroys the handle. Accepts NULL. */
FTL_API ftl_err ftl_ckpt_destroy(ftl_ckpt *ck);

/* Not collective, but every rank must register the same names, dtypes, shapes and layouts in the
 * same order before the first save or restore (a mismatch makes the next save fail on every rank).
 * data: this rank's rows (FTL_CKPT_SPLIT: ftl_ckpt_split_rows rows of the global shape, C order)
 * or the whole tensor (FTL_CKPT_REPLICATED). ndim 0..8; global_shape is copied. */
FTL_API ftl_err ftl_ckpt_add_tensor(ftl_ckpt *ck, const char *name, void *data, ftl_dtype dtype, int ndim,
                            const int64_t *global_shape, ftl_ckpt_layout layout, ftl_ckpt_mem mem);

/* Not collective (same ordering rule as ftl_ckpt_add_tensor). A small host byte string of fixed
 * size (data-loader cursor, RNG state, user metadata). */
FTL_API ftl_err ftl_ckpt_add_blob(ftl_ckpt *ck, const char *name, void *data, size_t size_bytes, ftl_ckpt_blob_scope scope);

/* The rows [*start, *start + *count) of a dimension of `rows` that rank `rank` of `world_size`
 * owns under FTL_CKPT_SPLIT. Thread-safe. */
FTL_API void ftl_ckpt_split_rows(int64_t rows, int rank, int world_size, int64_t *start, int64_t *count);

/* Not collective. Allocates and pre-faults (and, with device tensors, pins) the staging buffers
 * for the registered state, so the first save does not pay for first-touch. Called by the first
 * save when not called before (then counted in that save's stall). */
FTL_API ftl_err ftl_ckpt_prepare(ftl_ckpt *ck);

/* Not collective. The CUDA stream (a cudaStream_t) whose work device tensors depend on: a save
 * copies them only after the work enqueued on it before the save, and a restore writes them only
 * after that work, then waits until the bytes have landed before it returns. NULL (the default):
 * the legacy default stream, which covers the default stream and every blocking stream but not
 * streams made with cudaStreamNonBlocking (docs/gpu.md). Host tensors are unaffected. */
FTL_API void ftl_ckpt_set_stream(ftl_ckpt *ck, void *cuda_stream);

/* Collective (same step on every rank). Starts checkpoint `step` (>= 0, after the last step this
 * handle saved or restored): if the previous checkpoint is still in flight, waits for it first (at
 * most one in flight; the wait counts as stall), copies the registered state into staging and
 * returns; the writer thread does the rest. The last step saved or restored itself is not saved
 * again: FTL_OK at once, nothing written (a program that restored its final step and saves it at
 * its end, as on a rerun of a finished run, has nothing to save). Returns an error only when the
 * checkpoint could not be started (FTL_ERR_INVAL: a step before the last one saved or restored;
 * FTL_ERR_TIMEOUT: the previous one did not finish in time; FTL_ERR_STATE: the handle is broken). Everything else,
 * including a failure to stage on this rank (out of memory, a CUDA copy), abandons the step on
 * every rank and is reported by ftl_ckpt_wait/ftl_ckpt_last, so all ranks see the same outcome.
 * The registered memory may be modified as soon as this returns. */
FTL_API ftl_err ftl_ckpt_save(ftl_ckpt *ck, int64_t step);

/* The levels a step can be saved at (docs/checkpoint.md, "Levels"). A step saved at L1 is written
 * only to each host's node-local memory folder and committed there (a manifest in every host's L1
 * folder), not to the run directory; at L2 also copied to a partner host; at L3 (ftl_ckpt_save)
 * written to the run directory and committed by its manifest there, with the L1/L2 copies the job's
 * levels ask for. */
#define FTL_CKPT_LEVEL_L1 1
#define FTL_CKPT_LEVEL_L2 2
#define FTL_CKPT_LEVEL_L3 3

/* Collective (same step and level on every rank). ftl_ckpt_save at a chosen level (1..3; level 3
 * is ftl_ckpt_save). A lower level than the handle can keep is raised, the same on every rank:
 * L1 or L2 without an L1 folder on every rank is saved at L3, L2 without L2 (one host, or not
 * asked for) at L1; ftl_ckpt_last's level says which it was. A step saved at L1 or L2 survives
 * what its level survives (a process failure; with L2 the loss of one host), never the loss of
 * the hosts' memory: only L3 steps are durable, and the keep rule of the run directory counts
 * only them. FTL_ERR_INVAL for a level outside 1..3; otherwise as ftl_ckpt_save. */
FTL_API ftl_err ftl_ckpt_save_level(ftl_ckpt *ck, int64_t step, int level);

/* Not collective. The levels this handle saves at, agreed by every rank at ftl_ckpt_create (the
 * same on every rank), as bits FTL_CKPT_LEVEL_BIT(level): L3 always; L1 when every rank has an L1
 * folder (the job's checkpoint.levels name l1, or ftl_ckpt_options.l1_dir); L2 with it when L2 is
 * on (asked for, and the gang spans several hosts). What a program's checkpoint cadence plans
 * with (ftl_cadence_levels_config.levels; examples/finetune/cadence_plan.c), rather than reading
 * the launcher's FTL_CKPT_* variables itself. 0 for NULL. */
#define FTL_CKPT_LEVEL_BIT(level) (1u << ((level) - 1)) /* as FTL_CADENCE_LEVEL_BIT: the same set */
FTL_API unsigned ftl_ckpt_levels(const ftl_ckpt *ck);

/* Not collective. Waits (up to timeout_ms; <0 means the handle's deadline) until no checkpoint
 * is in flight, then returns the result of the last one (its err; stats copied to *out if not
 * NULL). FTL_ERR_TIMEOUT when it is still in flight. When none was ever saved nothing is pending:
 * FTL_OK, and *out is zeroed with step -1 (ftl_ckpt_last says FTL_ERR_NOTFOUND then). */
FTL_API ftl_err ftl_ckpt_wait(ftl_ckpt *ck, int64_t timeout_ms, ftl_ckpt_stats *out);

/* Thread-safe, never blocks. 1 while a checkpoint is in flight on this rank, else 0. */
FTL_API int ftl_ckpt_in_flight(const ftl_ckpt *ck);

/* Thread-safe, never blocks. Copies the statistics of the last finished checkpoint (committed or
 * abandoned). FTL_ERR_NOTFOUND when none has finished yet. */
FTL_API ftl_err ftl_ckpt_last(const ftl_ckpt *ck, ftl_ckpt_stats *out);

/* Collective. Waits for a checkpoint in flight, then loads the newest committed step whose shards
 * all exist and verify (committed in the run directory, or below L3 in the hosts' L1 folders: a
 * step saved by ftl_ckpt_save_level at L1 or L2 counts when every shard verifies from an L1 or L2
 * copy this gang can reach; otherwise it is passed over, never marked bad, and never makes the
 * result FTL_ERR_IO) (size and XXH3, checked by the ranks and agreed by all; the manifest's
 * step, dtypes, shapes and layouts agree with each shard's own HDF5 attributes) into the
 * registered memory, at any world size. A committed step proven corrupt (checksum mismatch, short
 * shard, malformed manifest, a manifest that disagrees with its shards, a shard that is not a
 * regular file) is marked bad on disk (manifest.json -> manifest.json.bad, with bad-reason.txt;
 * renaming it back undoes it), logged and reported as an event, and the next older one is tried.
 * A step that fails for a cause that may pass (a missing shard, a failed read) is left as it is.
 * Returns:
 *   FTL_OK             a step was loaded (info->step);
 *   FTL_ERR_NOTFOUND   nothing was ever committed in this run directory: a fresh start
 *                      (info->step == -1); or none is usable and allow_fresh was given;
 *   FTL_ERR_CORRUPT    steps were committed here (now or before: checkpoints/COMMITTED) but none
 *                      can be loaded: never a silent fresh start; info->errmsg names every step
 *                      and file and why;
 *   FTL_ERR_IO         the same, but at least one step failed for a cause that may pass: try
 *                      again later;
 *   other codes        MPI or deadline failures.
 * A registered tensor missing from the manifest, or with another dtype or global shape, makes
 * that step unusable (not marked bad: the files are fine). On failure the registered memory
 * holds undefined bytes. info may be NULL. */
FTL_API ftl_err ftl_ckpt_restore(ftl_ckpt *ck, ftl_ckpt_restore_info *info);

/* The detail of the last failed call on this handle, "" when none. Thread-safe to read. */
FTL_API const char *ftl_ckpt_errmsg(const ftl_ckpt *ck);

/* The checkpoints folder of the handle (<run_dir>/checkpoints). Borrowed. Thread-safe. */
FTL_API const char *ftl_ckpt_dir(const ftl_ckpt *ck);

#ifdef __cplusplus
}
#endif
#endif
