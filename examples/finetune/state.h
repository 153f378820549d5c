/* examples/finetune/state.h: the fine-tune's training state, everything a resumed run needs to
 * continue bit for bit, and the one seam through which it is checkpointed (state.c).
 *
 * The state: the adapter, AdamW's first and second moments, the number of steps done, the data
 * order (this epoch's permutation of the training set, the epoch and the position in it) and the
 * data-order random number generator. The base weights are not part of it: only their content
 * hash, which a restore checks. Every rank holds the same state (data parallelism): tensors are
 * registered replicated, scalars as global blobs.
 *
 * Checkpoints go through ftl's checkpoint module (include/ftl/ckpt.h) when the example is built
 * with it (FT_WITH_CKPT, set by CMake when the ftl_ckpt target exists); otherwise
 * ft_state_ckpt_open returns FTL_ERR_UNSUPPORTED and the program runs without checkpoints. */
#ifndef FTL_EXAMPLES_FINETUNE_STATE_H
#define FTL_EXAMPLES_FINETUNE_STATE_H

#include <stdint.h>

#include "ftl/ftl.h"
#include "model.h"

/* Settings that must not change across a resume (checked on restore). */
typedef struct ft_run_key {
  uint64_t base_hash;
  uint64_t data_hash;
  uint64_t seed;
  int64_t global_batch;
  int64_t rank;
  int64_t targets;
  double lr;
  double alpha;
} ft_run_key;

typedef struct ft_state {
  ft_lora adapter, m, v; /* same layout; m and v are AdamW's moments */
  int64_t step;          /* optimizer steps done */
  int64_t cursor[2];     /* epoch, position in this epoch's order */
  ft_rng rng;            /* draws each epoch's permutation */
  int32_t *order;        /* [n_examples] */
  int64_t n_examples;
  ft_run_key key;
} ft_state;

/* Allocates the state for a fresh start: adapter initialised from seed, moments zero, step 0,
 * the first epoch's order drawn. 0 or -1 (out of memory). */
int ft_state_create(ft_state *s, const ft_config *cfg, int rank, float alpha, unsigned targets, int64_t n_examples,
                    const ft_run_key *key);
void ft_state_destroy(ft_state *s);

/* The next count example indices of the data order, advancing the cursor (and drawing a new
 * permutation at the end of an epoch). */
void ft_state_next_batch(ft_state *s, int32_t *idx, int count);

/* ---- the checkpoint seam ---- */

typedef struct ft_state_ckpt ft_state_ckpt;

/* 1 when this build checkpoints through ftl_ckpt. */
int ft_state_ckpt_available(void);

/* Collective. Opens checkpointing of s in run_dir/checkpoints (run_dir NULL: the launcher's run
 * directory) and registers the state. FTL_ERR_UNSUPPORTED in a build without ftl_ckpt. On error
 * *out is NULL and msg says why. */
ftl_err ft_state_ckpt_open(ftl_ctx *ctx, ft_state *s, const char *run_dir, ft_state_ckpt **out, char *msg,
                           size_t msg_size);

/* Not collective: the checkpoint levels the handle agreed (ftl_ckpt_levels, a set of
 * FTL_CKPT_LEVEL_BIT), the same on every rank; L3 alone in a build without ftl_ckpt. */
unsigned ft_state_ckpt_levels(const ft_state_ckpt *c);

/* Collective. Loads the newest committed checkpoint into s. FTL_OK: resumed (s->step is the step
 * it was saved after); FTL_ERR_NOTFOUND: nothing committed, s is untouched; FTL_ERR_STATE: the
 * checkpoint was made by a run with other settings (another base, data, seed...); others: failure.
 * msg says what happened. */
ftl_err ft_state_ckpt_restore(ft_state_ckpt *c, char *msg, size_t msg_size);

/* Collective. Starts an asynchronous checkpoint of the state as it is after s->step steps, at
 * `level` (FTL_CKPT_LEVEL_*: ftl_ckpt_save_level; L3 for a checkpoint that must outlive the hosts). */
ftl_err ft_state_ckpt_save(ft_state_ckpt *c, int level, char *msg, size_t msg_size);

/* Not collective, never blocks: the step of the last checkpoint that finished, and in *ok whether
 * it was committed; -1 when none has finished yet (or without checkpoints; c may be NULL). */
int64_t ft_state_ckpt_last(const ft_state_ckpt *c, int *ok);

/* Not collective, never blocks: the last finished checkpoint's step, level, stall (δ) and time to
 * durable at its level (W) in seconds; 0 when none has finished or it was abandoned. */
int ft_state_ckpt_timing(const ft_state_ckpt *c, int64_t *step, int *level, double *stall_s, double *durable_s);

/* Not collective. Waits until the last checkpoint started is durable and committed (or abandoned);
 * FTL_OK only when it was committed. msg says why not. */
ftl_err ft_state_ckpt_wait(ft_state_ckpt *c, char *msg, size_t msg_size);

/* Collective. Waits for the checkpoint in flight and closes. Accepts NULL. */
ftl_err ft_state_ckpt_close(ft_state_ckpt *c);

#endif
