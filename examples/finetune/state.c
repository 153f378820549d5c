/* examples/finetune/state.c: the training state and its checkpoint seam (state.h).
 *
 * Registration, in this order on every rank: for each adapter tensor T, "adapter.T", "adam_m.T"
 * and "adam_v.T" (float32, replicated); "data.order" (int32 [n], replicated); the global blobs
 * "train.step", "data.cursor", "data.rng" and "run.key". Replicated tensors are written a slice
 * per rank by ftl_ckpt, so the writing is shared; restore gives every rank the whole state, at
 * any world size (a different world size changes the arithmetic of the gradient sum, so only the
 * same world size resumes bit for bit). */
#include "state.h"

#include <stdio.h>
#include <string.h>

#ifdef FT_WITH_CKPT
#include "ftl/ckpt.h"
#endif

static void draw_order(ft_state *s) {
  for (int64_t i = 0; i < s->n_examples; i++)
    s->order[i] = (int32_t)i;
  for (int64_t i = s->n_examples - 1; i > 0; i--) {
    int64_t j = (int64_t)ft_rng_below(&s->rng, (uint64_t)i + 1);
    int32_t t = s->order[i];
    s->order[i] = s->order[j];
    s->order[j] = t;
  }
}

int ft_state_create(ft_state *s, const ft_config *cfg, int rank, float alpha, unsigned targets, int64_t n_examples,
                    const ft_run_key *key) {
  memset(s, 0, sizeof *s);
  s->key = *key;
  s->n_examples = n_examples;
  if (ft_lora_create(&s->adapter, cfg, rank, alpha, targets) || ft_lora_create(&s->m, cfg, rank, alpha, targets) ||
      ft_lora_create(&s->v, cfg, rank, alpha, targets) || n_examples < 1 ||
      !(s->order = ftl_calloc((size_t)n_examples, sizeof(int32_t)))) {
    ft_state_destroy(s);
    return -1;
  }
  ft_lora_init(&s->adapter, key->seed ^ 0x4C6F5241ull /* "LoRA" */);
  ft_rng_seed(&s->rng, key->seed ^ 0x44617461ull /* "Data" */);
  draw_order(s);
  return 0;
}

void ft_state_destroy(ft_state *s) {
  if (!s) return;
  ft_lora_destroy(&s->adapter);
  ft_lora_destroy(&s->m);
  ft_lora_destroy(&s->v);
  ftl_free(s->order);
  s->order = NULL;
}

void ft_state_next_batch(ft_state *s, int32_t *idx, int count) {
  for (int i = 0; i < count; i++) {
    if (s->cursor[1] >= s->n_examples) {
      s->cursor[0]++;
      s->cursor[1] = 0;
      draw_order(s);
    }
    idx[i] = s->order[s->cursor[1]++];
  }
}

#ifdef FT_WITH_CKPT

struct ft_state_ckpt {
  ftl_ckpt *ck;
  ft_state *s;
  ft_run_key saved_key; /* registered as "run.key": what the checkpoint holds */
};

int ft_state_ckpt_available(void) { return 1; }

unsigned ft_state_ckpt_levels(const ft_state_ckpt *c) { return ftl_ckpt_levels(c ? c->ck : NULL); }

static ftl_err add_lora(ftl_ckpt *ck, const char *prefix, ft_lora *a, char *msg, size_t msg_size) {
  for (int i = 0; i < a->n_tensors; i++) {
    char name[FTL_CKPT_NAME_MAX + 1];
    ft_tensor *t = &a->tensors[i];
    snprintf(name, sizeof name, "%s.%s", prefix, t->name);
    ftl_err rc =
        ftl_ckpt_add_tensor(ck, name, t->data, FTL_DTYPE_F32, t->ndim, t->shape, FTL_CKPT_REPLICATED, FTL_CKPT_HOST);
    if (rc) {
      snprintf(msg, msg_size, "registering %s: %s: %s", name, ftl_strerror(rc), ftl_ckpt_errmsg(ck));
      return rc;
    }
  }
  return FTL_OK;
}

ftl_err ft_state_ckpt_open(ftl_ctx *ctx, ft_state *s, const char *run_dir, ft_state_ckpt **out, char *msg,
                           size_t msg_size) {
  *out = NULL;
  ft_state_ckpt *c = ftl_calloc(1, sizeof *c);
  if (!c) {
    snprintf(msg, msg_size, "out of memory");
    return FTL_ERR_NOMEM;
  }
  c->s = s;
  c->saved_key = s->key;
  ftl_ckpt_options o;
  ftl_ckpt_options_init(&o);
  o.run_dir = run_dir;
  ftl_err rc = ftl_ckpt_create(ctx, &o, &c->ck);
  if (rc) {
    snprintf(msg, msg_size, "ftl_ckpt_create: %s: %s", ftl_strerror(rc), ftl_ctx_errmsg(ctx));
    goto out;
  }
  if ((rc = add_lora(c->ck, "adapter", &s->adapter, msg, msg_size)) ||
      (rc = add_lora(c->ck, "adam_m", &s->m, msg, msg_size)) || (rc = add_lora(c->ck, "adam_v", &s->v, msg, msg_size)))
    goto out;
  int64_t n = s->n_examples;
  if ((rc = ftl_ckpt_add_tensor(c->ck, "data.order", s->order, FTL_DTYPE_I32, 1, &n, FTL_CKPT_REPLICATED,
                                FTL_CKPT_HOST)) ||
      (rc = ftl_ckpt_add_blob(c->ck, "train.step", &s->step, sizeof s->step, FTL_CKPT_BLOB_GLOBAL)) ||
      (rc = ftl_ckpt_add_blob(c->ck, "data.cursor", s->cursor, sizeof s->cursor, FTL_CKPT_BLOB_GLOBAL)) ||
      (rc = ftl_ckpt_add_blob(c->ck, "data.rng", &s->rng, sizeof s->rng, FTL_CKPT_BLOB_GLOBAL)) ||
      (rc = ftl_ckpt_add_blob(c->ck, "run.key", &c->saved_key, sizeof c->saved_key, FTL_CKPT_BLOB_GLOBAL)) ||
      (rc = ftl_ckpt_prepare(c->ck))) {
    snprintf(msg, msg_size, "registering the state: %s: %s", ftl_strerror(rc), ftl_ckpt_errmsg(c->ck));
    goto out;
  }
out:
  if (rc) {
    ftl_ckpt_destroy(c->ck);
    ftl_free(c);
    return rc;
  }
  *out = c;
  return FTL_OK;
}

ftl_err ft_state_ckpt_restore(ft_state_ckpt *c, char *msg, size_t msg_size) {
  ftl_ckpt_restore_info info;
  ftl_err rc = ftl_ckpt_restore(c->ck, &info);
  if (rc == FTL_ERR_NOTFOUND) {
    snprintf(msg, msg_size, "no committed checkpoint: starting at step 0");
    c->saved_key = c->s->key;
    return rc;
  }
  if (rc) {
    snprintf(msg, msg_size, "restore failed: %s: %s", ftl_strerror(rc),
             info.errmsg[0] ? info.errmsg : ftl_ckpt_errmsg(c->ck));
    return rc;
  }
  /* Every rank restored the same bytes, so every rank reaches the same verdict here. */
  if (memcmp(&c->saved_key, &c->s->key, sizeof c->saved_key) != 0) {
    snprintf(msg, msg_size,
             "checkpoint of step %lld was made by a run with other settings (base model, data, seed, batch, rank, "
             "targets, lr or alpha); use another run directory",
             (long long)info.step);
    return FTL_ERR_STATE;
  }
  if (info.step != c->s->step) {
    snprintf(msg, msg_size, "checkpoint step %lld holds train.step %lld", (long long)info.step, (long long)c->s->step);
    return FTL_ERR_CORRUPT;
  }
  snprintf(msg, msg_size, "resumed from the checkpoint of step %lld (written by %d ranks, %d committed found, %.1f ms)",
           (long long)info.step, info.written_world_size, info.committed_found, info.restore_ms);
  return FTL_OK;
}

ftl_err ft_state_ckpt_save(ft_state_ckpt *c, int level, char *msg, size_t msg_size) {
  c->saved_key = c->s->key;
  ftl_err rc = ftl_ckpt_save_level(c->ck, c->s->step, level);
  if (rc)
    snprintf(msg, msg_size, "checkpoint of step %lld: %s: %s", (long long)c->s->step, ftl_strerror(rc),
             ftl_ckpt_errmsg(c->ck));
  return rc;
}

int ft_state_ckpt_timing(const ft_state_ckpt *c, int64_t *step, int *level, double *stall_s, double *durable_s) {
  ftl_ckpt_stats stats;
  if (!c || ftl_ckpt_last(c->ck, &stats) != FTL_OK || stats.err != FTL_OK) return 0;
  *step = stats.step;
  *level = stats.level;
  *stall_s = stats.stall_ms / 1e3;
  *durable_s = stats.durable_ms / 1e3;
  return 1;
}

ftl_err ft_state_ckpt_wait(ft_state_ckpt *c, char *msg, size_t msg_size) {
  ftl_ckpt_stats stats;
  memset(&stats, 0, sizeof stats);
  ftl_err rc = ftl_ckpt_wait(c->ck, -1, &stats);
  /* An abandoned checkpoint's detail (rank, file, errno) is in its statistics, not on the handle. */
  if (rc)
    snprintf(msg, msg_size, "checkpoint of step %lld: %s: %s", (long long)c->s->step, ftl_strerror(rc),
             stats.errmsg[0] ? stats.errmsg : ftl_ckpt_errmsg(c->ck));
  return rc;
}

int64_t ft_state_ckpt_last(const ft_state_ckpt *c, int *ok) {
  ftl_ckpt_stats stats;
  *ok = 0;
  if (!c || ftl_ckpt_last(c->ck, &stats) != FTL_OK) return -1;
  *ok = stats.err == FTL_OK;
  return stats.step;
}

ftl_err ft_state_ckpt_close(ft_state_ckpt *c) {
  if (!c) return FTL_OK;
  ftl_err rc = ftl_ckpt_wait(c->ck, -1, NULL);
  ftl_err rc2 = ftl_ckpt_destroy(c->ck);
  ftl_free(c);
  return rc ? rc : rc2;
}

#else /* !FT_WITH_CKPT */

/* Built without ftl's checkpoint module: the program runs, but cannot resume. */
struct ft_state_ckpt {
  int unused;
};

int ft_state_ckpt_available(void) { return 0; }

unsigned ft_state_ckpt_levels(const ft_state_ckpt *c) {
  (void)c;
  return FTL_CKPT_LEVEL_BIT(FTL_CKPT_LEVEL_L3);
}

ftl_err ft_state_ckpt_open(ftl_ctx *ctx, ft_state *s, const char *run_dir, ft_state_ckpt **out, char *msg,
                           size_t msg_size) {
  (void)ctx;
  (void)s;
  (void)run_dir;
  *out = NULL;
  snprintf(msg, msg_size, "this build has no checkpoint module (ftl_ckpt): the run cannot resume");
  return FTL_ERR_UNSUPPORTED;
}

ftl_err ft_state_ckpt_restore(ft_state_ckpt *c, char *msg, size_t msg_size) {
  (void)c;
  snprintf(msg, msg_size, "no checkpoint module");
  return FTL_ERR_UNSUPPORTED;
}

ftl_err ft_state_ckpt_save(ft_state_ckpt *c, int level, char *msg, size_t msg_size) {
  (void)c, (void)level;
  snprintf(msg, msg_size, "no checkpoint module");
  return FTL_ERR_UNSUPPORTED;
}

int ft_state_ckpt_timing(const ft_state_ckpt *c, int64_t *step, int *level, double *stall_s, double *durable_s) {
  (void)c, (void)step, (void)level, (void)stall_s, (void)durable_s;
  return 0;
}

ftl_err ft_state_ckpt_wait(ft_state_ckpt *c, char *msg, size_t msg_size) {
  (void)c;
  snprintf(msg, msg_size, "no checkpoint module");
  return FTL_ERR_UNSUPPORTED;
}

int64_t ft_state_ckpt_last(const ft_state_ckpt *c, int *ok) {
  (void)c;
  *ok = 0;
  return -1;
}

ftl_err ft_state_ckpt_close(ft_state_ckpt *c) {
  (void)c;
  return FTL_OK;
}

#endif
