/* examples/finetune/finetune.c: ftl-finetune, the example fine-tune (docs/finetune.md).
 *
 *   ftl run examples/finetune/job.yaml
 *   ftl run -n 4 -- ftl-finetune --data DIR --base base.h5 --steps 300
 *
 * Every rank: joins the gang (ftl_init); makes sure the base model exists (when --base names a
 * missing file, the gang pre-trains it data-parallel from DIR/pretrain.txt and rank 0 saves it,
 * so a later run reuses it); loads it and checks its content hash; restores the newest committed
 * checkpoint of the run directory, if any; trains the LoRA adapter on its slice of each global
 * batch of DIR/train.txt, averaging adapter gradients with ftl_allreduce, reporting each step
 * with its model FLOPs (ftl_step_done_flops; model_flops.c) and checkpointing every --ckpt-every
 * steps; writes the adapter to RUNDIR/final/ (docs/formats/adapter.md); and reports the held-out
 * metric of the base model against the adapter's.
 *
 * Not here: the numerics (model.c), files (base_io.c, adapter_io.c, data.c), the checkpoint seam
 * (state.c). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "adapter_io.h"
#include "base_io.h"
#include "data.h"
#include "evaluate.h"
#include "ftl/ftl.h"
#include "model.h"
#include "cadence_plan.h"
#include "state.h"
#ifdef FT_WITH_CUDA
#include "model_cuda.h"
#endif

typedef struct opts {
  const char *data_dir, *base_path, *final_dir, *run_dir, *device;
  const char *hold_file; /* --hold-file: tests only */
  int64_t steps, batch, rank, ckpt_every, log_every, throttle_ms;
  int64_t ckpt_l3_every; /* --ckpt-l3-every M: pinned, the checkpoints at multiples of M at L3, the others below */
  int ckpt_auto; /* --ckpt-every auto: the cadence controller decides */
  double ckpt_every_s; /* --ckpt-every 30s: pinned in seconds */
  double fleet_rate; /* --fleet-rate: the controller's prior failure rate per rank-hour */
  int64_t pretrain_steps, pretrain_batch, layers, embd, heads, intermediate;
  double lr, alpha, pretrain_lr;
  int64_t seed;
  unsigned targets;
} opts;

static void usage(FILE *to, const char *argv0) {
  fprintf(to,
          "usage: %s --data DIR --base FILE.h5 [options]\n"
          "  fine-tune:  --steps N (300) --batch B (32, global) --lr X (3e-3) --rank R (8) --alpha A (16)\n"
          "              --targets LIST of q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj\n"
          "              (q_proj,v_proj,o_proj,gate_proj,up_proj) --seed S (1) --ckpt-every N|Ss|auto (50; 0: never;\n"
          "              30s: every 30 s of steps; auto: derived from the measured stall and failure rate,\n"
          "              docs/cadence.md; pinned cadences get their expected waste against the optimum)\n"
          "              --fleet-rate X (the cadence's prior failure rate per rank-hour; 2e-5)\n"
          "              --ckpt-l3-every M (with --ckpt-every N, a multiple of N: the checkpoints at multiples of\n"
          "              M go to the run directory (L3), the others only to node memory (L1, or L2 on several\n"
          "              hosts); 0: all at L3; auto picks each checkpoint's level itself, docs/finetune.md)\n"
          "              --final-dir DIR (RUNDIR/final) --run-dir DIR (the launcher's) --log-every N (25)\n"
          "              --device auto|cpu|cuda (auto: the CUDA path when built with it and a GPU is visible)\n"
          "  base model (built only when FILE.h5 is missing): --pretrain-steps N (400) --pretrain-batch B (32)\n"
          "              --pretrain-lr X (3e-3) --layers L (2) --embd C (64) --heads H (4)\n"
          "              --intermediate I (the SwiGLU MLP's width; 0: 8/3 C rounded up to a multiple of 8)\n"
          "  tests:      --throttle-ms MS (sleep after each step) --marker STR (ignored; finds the processes)\n"
          "              --hold-file PATH (before each step, wait while PATH exists: a test's window)\n",
          argv0);
}

/* How an option's value is read: into the opts field at off (a string, an integer in [lo, hi], a
 * positive number), or by its own rule. */
typedef enum { OPT_STR, OPT_I64, OPT_POS_F64, OPT_CKPT, OPT_TARGETS, OPT_DEVICE, OPT_IGNORE } opt_kind;

typedef struct opt_spec {
  const char *name;
  opt_kind kind;
  size_t off;
  int64_t lo, hi;
} opt_spec;

#define OPT_FIELD(f) offsetof(opts, f)

/* Every option but --help, each taking a value; getopt_long gets them in this order. */
static const opt_spec opt_specs[] = {
    {"data", OPT_STR, OPT_FIELD(data_dir), 0, 0},
    {"base", OPT_STR, OPT_FIELD(base_path), 0, 0},
    {"final-dir", OPT_STR, OPT_FIELD(final_dir), 0, 0},
    {"run-dir", OPT_STR, OPT_FIELD(run_dir), 0, 0},
    {"steps", OPT_I64, OPT_FIELD(steps), 0, 100000000},
    {"batch", OPT_I64, OPT_FIELD(batch), 1, 1 << 20},
    {"rank", OPT_I64, OPT_FIELD(rank), 1, 1024},
    {"ckpt-every", OPT_CKPT, 0, 0, 0},
    {"ckpt-l3-every", OPT_I64, OPT_FIELD(ckpt_l3_every), 0, 100000000},
    {"log-every", OPT_I64, OPT_FIELD(log_every), 1, 100000000},
    {"throttle-ms", OPT_I64, OPT_FIELD(throttle_ms), 0, 60000},
    {"fleet-rate", OPT_POS_F64, OPT_FIELD(fleet_rate), 0, 0},
    {"pretrain-steps", OPT_I64, OPT_FIELD(pretrain_steps), 0, 100000000},
    {"pretrain-batch", OPT_I64, OPT_FIELD(pretrain_batch), 1, 1 << 20},
    {"layers", OPT_I64, OPT_FIELD(layers), 1, FT_MAX_LAYERS},
    {"embd", OPT_I64, OPT_FIELD(embd), 1, 4096},
    {"heads", OPT_I64, OPT_FIELD(heads), 1, 4096},
    {"intermediate", OPT_I64, OPT_FIELD(intermediate), 0, 16384},
    {"lr", OPT_POS_F64, OPT_FIELD(lr), 0, 0},
    {"alpha", OPT_POS_F64, OPT_FIELD(alpha), 0, 0},
    {"pretrain-lr", OPT_POS_F64, OPT_FIELD(pretrain_lr), 0, 0},
    {"seed", OPT_I64, OPT_FIELD(seed), 0, INT64_MAX},
    {"targets", OPT_TARGETS, 0, 0, 0},
    {"marker", OPT_IGNORE, 0, 0, 0},
    {"hold-file", OPT_STR, OPT_FIELD(hold_file), 0, 0},
    {"device", OPT_DEVICE, 0, 0, 0},
};
#define NOPT_SPECS (sizeof opt_specs / sizeof opt_specs[0])
enum { OPT_VAL0 = 1000 }; /* getopt_long's code for opt_specs[i] is OPT_VAL0 + i */

/* --ckpt-every N|Ss|auto. Returns nonzero when the value is bad. */
static int parse_ckpt_every(const char *arg, opts *o) {
  o->ckpt_auto = strcmp(arg, "auto") == 0;
  if (!o->ckpt_auto && arg[0] && arg[strlen(arg) - 1] == 's') {
    char *end = NULL;
    o->ckpt_every_s = strtod(arg, &end);
    o->ckpt_every = 0;
    return end != arg + strlen(arg) - 1 || !(o->ckpt_every_s > 0);
  }
  return !o->ckpt_auto && ftl_parse_i64(arg, 0, 100000000, &o->ckpt_every) != FTL_OK;
}

/* Reads one option's value into o. Returns nonzero when the value is bad. */
static int parse_value(const opt_spec *s, const char *arg, opts *o) {
  void *field = (char *)o + s->off;
  switch (s->kind) {
  case OPT_STR: *(const char **)field = arg; return 0;
  case OPT_I64: return ftl_parse_i64(arg, s->lo, s->hi, (int64_t *)field) != FTL_OK;
  case OPT_POS_F64: {
    char *end = NULL;
    double *v = field;
    *v = strtod(arg, &end);
    return !end || *end || !(*v > 0);
  }
  case OPT_CKPT: return parse_ckpt_every(arg, o);
  case OPT_TARGETS: o->targets = ft_lora_parse_targets(arg); return !o->targets;
  case OPT_DEVICE: o->device = arg; return strcmp(arg, "auto") && strcmp(arg, "cpu") && strcmp(arg, "cuda");
  case OPT_IGNORE: return 0;
  }
  return 1;
}

static int parse_opts(int argc, char **argv, opts *o) {
  *o = (opts){.steps = 300,
              .batch = 32,
              .rank = 8,
              .ckpt_every = 50,
              .log_every = 25,
              .pretrain_steps = 400,
              .pretrain_batch = 32,
              .layers = 2,
              .embd = 64,
              .heads = 4,
              .lr = 3e-3,
              .alpha = 16,
              .pretrain_lr = 3e-3,
              .seed = 1,
              .device = "auto",
              .targets = ft_lora_parse_targets("q_proj,v_proj,o_proj,gate_proj,up_proj")};
  struct option options[NOPT_SPECS + 2];
  for (size_t i = 0; i < NOPT_SPECS; i++)
    options[i] = (struct option){opt_specs[i].name, required_argument, NULL, OPT_VAL0 + (int)i};
  options[NOPT_SPECS] = (struct option){"help", no_argument, NULL, 'h'};
  options[NOPT_SPECS + 1] = (struct option){NULL, 0, NULL, 0};
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    if (c == 'h') {
      usage(stdout, argv[0]);
      exit(0);
    }
    int bad = c >= OPT_VAL0 && c < OPT_VAL0 + (int)NOPT_SPECS ? parse_value(&opt_specs[c - OPT_VAL0], optarg, o) : 1;
    if (bad) {
      if (c != '?') fprintf(stderr, "%s: bad value for an option: '%s'\n", argv[0], optarg ? optarg : "");
      usage(stderr, argv[0]);
      return -1;
    }
  }
  if (!o->data_dir || !o->base_path || optind != argc) {
    usage(stderr, argv[0]);
    return -1;
  }
  /* The L3 checkpoints are some of the pinned ones: on the same grid. */
  if (o->ckpt_l3_every > 0 && (o->ckpt_auto || o->ckpt_every_s > 0 || o->ckpt_every <= 0 ||
                               o->ckpt_l3_every % o->ckpt_every != 0)) {
    fprintf(stderr, "%s: --ckpt-l3-every %lld needs --ckpt-every N (in steps) that divides it\n", argv[0],
            (long long)o->ckpt_l3_every);
    return -1;
  }
  return 0;
}

/* The gang's verdict on a local success flag: 1 only if every rank succeeded. */
static int agree(ftl_ctx *ctx, int ok) {
  int32_t v = ok ? 1 : 0;
  if (ftl_allreduce(ctx, &v, &v, 1, FTL_DTYPE_I32, FTL_OP_MIN)) return 0;
  return v == 1;
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* The slice [*begin, *end) of n items that rank owns. */
static void slice(int64_t n, int rank, int world, int64_t *begin, int64_t *end) {
  *begin = n * rank / world;
  *end = n * (rank + 1) / world;
}

/* Collective: pre-trains a base model on d with full gradients averaged over the gang.
 * Deterministic for a given seed and world size. Like the fine-tune, only the answers are scored:
 * the prompts are random letters, and their loss would only add noise to the gradient (with it,
 * this small model stays on the plateau of predicting letter frequencies for much longer). */
static int pretrain(ftl_ctx *ctx, const opts *o, const ft_data *d, ft_params *p, char *msg, size_t msg_size) {
  const ftl_info *me = ftl_ctx_info(ctx);
  int T = ft_data_seq_len(d), B = (int)o->pretrain_batch, rc = -1;
  ft_config cfg = {.block = T,
                   .layers = (int)o->layers,
                   .heads = (int)o->heads,
                   .embd = (int)o->embd,
                   .intermediate = (int)o->intermediate};
  ft_config_resolve(&cfg);
  ft_params g = {0};
  float *m = NULL, *v = NULL;
  int32_t *idx = NULL;
  int *tok = NULL, *tgt = NULL;
  ft_acts *acts = NULL;
  if (ft_config_check(&cfg, msg, msg_size)) return -1;
  int max_b = (B + me->world_size - 1) / me->world_size;
  if (ft_params_create(p, &cfg) || ft_params_create(&g, &cfg) || !(m = ftl_calloc(p->count, sizeof(float))) ||
      !(v = ftl_calloc(p->count, sizeof(float))) || !(idx = ftl_malloc((size_t)B * sizeof(int32_t))) ||
      !(tok = ftl_malloc((size_t)max_b * T * sizeof(int))) || !(tgt = ftl_malloc((size_t)max_b * T * sizeof(int))) ||
      !(acts = ft_acts_create(&cfg, 0, max_b))) {
    snprintf(msg, msg_size, "out of memory");
    goto out;
  }
  ft_params_init(p, (uint64_t)o->seed);
  ft_rng rng;
  ft_rng_seed(&rng, (uint64_t)o->seed ^ 0x50726554ull /* "PreT" */);
  float *flat = g.mem; /* the gradients and, in the spare float, the loss: one allreduce */
  ft_adamw opt = {.lr = (float)o->pretrain_lr, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.0f};
  int64_t t0 = ftl_clock_ns();
  for (int64_t step = 1; step <= o->pretrain_steps; step++) {
    for (int i = 0; i < B; i++)
      idx[i] = (int32_t)ft_rng_below(&rng, (uint64_t)d->n);
    int64_t b0, b1, scored = 0, mine = 0;
    slice(B, me->rank, me->world_size, &b0, &b1);
    for (int i = 0; i < B; i++) {
      scored += d->len - d->op_at[idx[i]];
      if (i >= b0 && i < b1) mine += d->len - d->op_at[idx[i]];
    }
    memset(flat, 0, (g.count + 1) * sizeof(float));
    if (b1 > b0) {
      ft_data_fill(d, idx + b0, (int)(b1 - b0), 1, tok, tgt);
      flat[g.count] = (float)ft_forward(p, NULL, tok, tgt, (int)(b1 - b0), T, acts, NULL);
      ft_backward(p, NULL, &g, NULL, acts, 1.0f / (float)scored);
    }
    if (ftl_allreduce(ctx, flat, flat, g.count + 1, FTL_DTYPE_F32, FTL_OP_SUM)) {
      snprintf(msg, msg_size, "allreduce: %s", ftl_ctx_errmsg(ctx));
      goto out;
    }
    /* A short linear warm-up keeps the first steps of Adam from overshooting. */
    ft_adamw so = opt;
    if (step < 20) so.lr = opt.lr * (float)step / 20.0f;
    ft_adamw_update(&so, p->mem, flat, m, v, p->count, step);
    ftl_step_done_flops(ctx, step, ft_step_flops(&cfg, 0, 0, b1 - b0, T, mine, 1)); /* the base trains */
    if (me->rank == 0 && (step % o->log_every == 0 || step == o->pretrain_steps)) {
      double s = (double)(ftl_clock_ns() - t0) / 1e9;
      printf("base model: step %" PRId64 "/%" PRId64 " loss %.4f (%.0f tokens/s)\n", step, o->pretrain_steps,
             flat[g.count] / (double)scored, (double)step * B * T / s);
      fflush(stdout);
    }
  }
  rc = 0;
out:
  if (rc && !msg[0]) snprintf(msg, msg_size, "out of memory");
  ft_params_destroy(&g);
  ftl_free(m);
  ftl_free(v);
  ftl_free(idx);
  ftl_free(tok);
  ftl_free(tgt);
  ft_acts_destroy(acts);
  return rc;
}

/* Collective: the base model at o->base_path, built first when missing. */
static int ensure_base(ftl_ctx *ctx, const opts *o, ft_params *base, uint64_t *hash, char *msg, size_t msg_size) {
  const ftl_info *me = ftl_ctx_info(ctx);
  int32_t missing = me->rank == 0 ? access(o->base_path, F_OK) != 0 : 0;
  if (ftl_bcast_host(ctx, &missing, sizeof missing, 0)) {
    snprintf(msg, msg_size, "bcast: %s", ftl_ctx_errmsg(ctx));
    return -1;
  }
  if (missing) {
    char path[4096];
    ft_data pre;
    ft_params p = {0};
    int ok = ftl_fmt(path, sizeof path, "%s/pretrain.txt", o->data_dir) == FTL_OK &&
             ft_data_load(path, &pre, msg, msg_size) == 0;
    if (!agree(ctx, ok)) {
      if (!msg[0]) snprintf(msg, msg_size, "another rank could not read the pre-training data");
      if (ok) ft_data_free(&pre);
      return -1;
    }
    if (me->rank == 0)
      printf("base model %s not found: pre-training it (%" PRId64 " steps, %d ranks, %" PRId64 " examples)\n",
             o->base_path, o->pretrain_steps, me->world_size, pre.n);
    ok = pretrain(ctx, o, &pre, &p, msg, msg_size) == 0;
    if (ok && me->rank == 0) {
      char prov[256];
      snprintf(prov, sizeof prov,
               "pre-trained by ftl-finetune: data xxh3 %016" PRIx64 ", %" PRId64 " steps of %" PRId64
               " on %d ranks, seed %" PRId64,
               pre.hash, o->pretrain_steps, o->pretrain_batch, me->world_size, o->seed);
      ok = ft_base_save(o->base_path, &p, prov, msg, msg_size) == 0;
      if (ok) printf("base model saved: %s (content hash %016" PRIx64 ")\n", o->base_path, ft_params_hash(&p));
    }
    ft_params_destroy(&p);
    ft_data_free(&pre);
    if (!agree(ctx, ok)) {
      if (!msg[0]) snprintf(msg, msg_size, "building the base model failed on another rank");
      return -1;
    }
  }
  int ok = ft_base_load(o->base_path, base, hash, msg, msg_size) == 0;
  if (!agree(ctx, ok)) {
    if (!msg[0]) snprintf(msg, msg_size, "loading the base model failed on another rank");
    if (ok) ft_params_destroy(base);
    return -1;
  }
  return 0;
}

/* Collective: held-out metrics of the base alone and with the adapter, split over the ranks. */
static int report(ftl_ctx *ctx, const ft_params *base, const ft_lora *lora, const ft_data *held, ft_metrics out[2]) {
  const ftl_info *me = ftl_ctx_info(ctx);
  int64_t b0, b1;
  slice(held->n, me->rank, me->world_size, &b0, &b1);
  ft_acts *acts = ft_acts_create(&base->cfg, lora->rank, 64);
  memset(out, 0, 2 * sizeof *out);
  int ok = acts && ft_evaluate(base, NULL, held, b0, b1, 64, acts, &out[0]) == 0 &&
           ft_evaluate(base, lora, held, b0, b1, 64, acts, &out[1]) == 0;
  ft_acts_destroy(acts);
  if (!agree(ctx, ok)) return -1;
  return ftl_allreduce(ctx, out, out, 8, FTL_DTYPE_F64, FTL_OP_SUM) == FTL_OK ? 0 : -1;
}

/* One rank's fine-tune: what main's steps below set up, use and tear down (run_teardown frees it). */
typedef struct run {
  ftl_ctx *ctx;
  const opts *o;
  int R, W, B, T, max_b;
  int use_gpu; /* 1: the CUDA path; 0: the CPU; < 0: the device asked for is not there */
  char msg[2048], final_dir[4096];
  ft_data train, held;
  ft_params base;
  uint64_t base_hash;
  ft_state st;
  ft_lora grad;
  ft_acts *acts;
  ft_state_ckpt *ck;
  ft_cadence_plan *plan;
#ifdef FT_WITH_CUDA
  ft_cuda *gpu;
#endif
  int32_t *idx;
  int *tok, *tgt;
  int64_t last_ckpt_step; /* a checkpoint step must come after the last one saved or restored */
  int saved_any;
} run;

/* How the training loop ended. */
typedef enum {
  LOOP_FINISHED, /* all --steps done: the finish follows */
  LOOP_STOPPED,  /* preempted: the state was saved (or not: r->failed says) */
  LOOP_ALONE     /* this rank failed inside a collective step and leaves without another */
} loop_end;

/* RUNDIR/final from the context, or from --run-dir, unless --final-dir names it. */
static int find_final_dir(run *r) {
  const ftl_info *me = ftl_ctx_info(r->ctx);
  /* The example's collectives are on host memory: ftl_allreduce reduces host buffers over MPI on
   * either backend (docs/gpu.md), so a gang that chose NCCL runs this program unchanged. */
  ftl_info where = *me; /* RUNDIR/final from the context, or from --run-dir */
  where.run_dir = r->o->run_dir ? r->o->run_dir : me->run_dir;
  ftl_diag fd;
  if (r->o->final_dir)
    snprintf(r->final_dir, sizeof r->final_dir, "%s", r->o->final_dir);
  else if (ftl_adapter_final_dir(&where, r->final_dir, sizeof r->final_dir, &fd)) {
    if (r->R == 0)
      fprintf(stderr, "ftl-finetune: no run directory (not under ftl run): pass --final-dir or --run-dir\n");
    return -1;
  }
  return 0;
}

/* Collective: the training and held-out data, and the base model (built first when missing). */
static int load_data_and_base(run *r) {
  char path[4096];
  int ok = ftl_fmt(path, sizeof path, "%s/train.txt", r->o->data_dir) == FTL_OK &&
           ft_data_load(path, &r->train, r->msg, sizeof r->msg) == 0;
  ok = ok && ftl_fmt(path, sizeof path, "%s/heldout.txt", r->o->data_dir) == FTL_OK &&
       ft_data_load(path, &r->held, r->msg, sizeof r->msg) == 0;
  if (!agree(r->ctx, ok)) {
    fprintf(stderr, "rank %d: data: %s\n", r->R, r->msg[0] ? r->msg : "another rank could not read the data");
    return -1;
  }
  r->msg[0] = '\0';
  if (ensure_base(r->ctx, r->o, &r->base, &r->base_hash, r->msg, sizeof r->msg)) {
    fprintf(stderr, "rank %d: base model: %s\n", r->R, r->msg);
    return -1;
  }
  r->T = ft_data_seq_len(&r->train);
  if (r->T > r->base.cfg.block || ft_data_seq_len(&r->held) != r->T) {
    if (r->R == 0)
      fprintf(stderr, "ftl-finetune: the data's sequences (%d) do not fit the base model's block (%d)\n", r->T,
              r->base.cfg.block);
    return -1;
  }
  return 0;
}

/* Collective: the training state (keyed by what makes a checkpoint resumable) and the buffers of
 * one step. */
static int create_state(run *r) {
  const opts *o = r->o;
  ft_run_key key = {.base_hash = r->base_hash,
                    .data_hash = r->train.hash,
                    .seed = (uint64_t)o->seed,
                    .global_batch = o->batch,
                    .rank = o->rank,
                    .targets = o->targets,
                    .lr = o->lr,
                    .alpha = o->alpha};
  r->B = (int)o->batch;
  r->max_b = (r->B + r->W - 1) / r->W;
  int B = r->B, max_b = r->max_b, T = r->T;
  int ok = ft_state_create(&r->st, &r->base.cfg, (int)o->rank, (float)o->alpha, o->targets, r->train.n, &key) == 0 &&
           ft_lora_create(&r->grad, &r->base.cfg, (int)o->rank, (float)o->alpha, o->targets) == 0 &&
           (r->idx = ftl_malloc((size_t)B * sizeof(int32_t))) &&
           (r->tok = ftl_malloc((size_t)max_b * T * sizeof(int))) &&
           (r->tgt = ftl_malloc((size_t)max_b * T * sizeof(int))) &&
           (r->acts = ft_acts_create(&r->base.cfg, (int)o->rank, max_b));
  if (!agree(r->ctx, ok)) {
    fprintf(stderr, "rank %d: out of memory\n", r->R);
    return -1;
  }
  return 0;
}

/* Collective: the device. The CUDA path for the fine-tune's forward and backward passes where this
 * build has it and a GPU is visible (--device auto), GPU local_rank % count; pre-training and
 * evaluation stay on the CPU. The gradients are exchanged in host memory over MPI either way. */
static int choose_device(run *r) {
  const opts *o = r->o;
  r->use_gpu = 0;
#ifdef FT_WITH_CUDA
  int ndev = ft_cuda_device_count();
  r->use_gpu = strcmp(o->device, "cuda") == 0 || (strcmp(o->device, "auto") == 0 && ndev > 0);
  if (r->use_gpu && ndev < 1) r->use_gpu = -1;
  if (r->use_gpu > 0 &&
      (ft_cuda_select_device(ftl_ctx_info(r->ctx)->local_rank % ndev, r->msg, sizeof r->msg) ||
       ft_cuda_create(&r->base, (int)o->rank, (float)o->alpha, o->targets, r->max_b, &r->gpu, r->msg, sizeof r->msg))) {
    fprintf(stderr, "rank %d: %s\n", r->R, r->msg);
    r->use_gpu = -2;
  }
#else
  if (strcmp(o->device, "cuda") == 0) r->use_gpu = -1;
#endif
  if (!agree(r->ctx, r->use_gpu >= 0)) {
    if (r->use_gpu == -1)
      fprintf(stderr, "rank %d: --device cuda: this build has no CUDA path or there is no GPU\n", r->R);
    return -1;
  }
  return 0;
}

/* Collective: the run directory's checkpoints opened and the newest committed one restored, and
 * the plan of when to checkpoint: pinned every --ckpt-every steps, or derived (--ckpt-every auto). */
static int open_checkpoints(run *r) {
  const opts *o = r->o;
  ftl_err rc = ft_state_ckpt_open(r->ctx, &r->st, o->run_dir, &r->ck, r->msg, sizeof r->msg);
  if (rc == FTL_ERR_UNSUPPORTED) {
    if (r->R == 0) printf("checkpoints: %s\n", r->msg);
  } else if (rc) {
    fprintf(stderr, "rank %d: checkpoints: %s\n", r->R, r->msg);
    return -1;
  } else {
    rc = ft_state_ckpt_restore(r->ck, r->msg, sizeof r->msg);
    if (rc && rc != FTL_ERR_NOTFOUND) {
      fprintf(stderr, "rank %d: %s\n", r->R, r->msg);
      return -1;
    }
    if (r->R == 0) printf("checkpoints: %s\n", r->msg);
  }
  r->last_ckpt_step = r->st.step;
  r->saved_any = 0;
  if (r->ck && (o->ckpt_auto || o->ckpt_every > 0 || o->ckpt_every_s > 0)) {
    rc = ft_plan_create(r->ctx, ft_state_ckpt_levels(r->ck), o->ckpt_auto ? 0 : o->ckpt_every, o->ckpt_auto ? 0 : o->ckpt_l3_every,
                        o->ckpt_every_s, o->fleet_rate, r->st.step, &r->plan, r->msg, sizeof r->msg);
    if (rc) {
      fprintf(stderr, "rank %d: %s\n", r->R, r->msg);
      return -1;
    }
  }
  return 0;
}

static void print_banner(const run *r) {
  if (r->R != 0) return;
  const opts *o = r->o;
  char tl[64];
  ft_lora_format_targets(o->targets, tl, sizeof tl);
  printf("fine-tune: base %016" PRIx64 " (%d layers, %d channels), LoRA r=%" PRId64 " alpha=%g on %s (%zu "
         "parameters), %d ranks x %d of a global batch of %d, %" PRId64 " steps from step %" PRId64 " on the %s\n",
         r->base_hash, r->base.cfg.layers, r->base.cfg.embd, o->rank, o->alpha, tl, r->st.adapter.count, r->W, r->max_b,
         r->B, o->steps, r->st.step, r->use_gpu ? "GPU (CUDA path)" : "CPU");
  fflush(stdout);
}

/* Collective: one training step. This rank's slice of the global batch forward and backward; the
 * gradients, then in the spare floats the loss and the stop vote (preemption), summed over the
 * gang in one allreduce; the optimizer step. Sets *scored (the batch's scored positions) and *why
 * (this rank's stop request, "" when none). Returns nonzero when this rank must leave alone. */
static int train_step(run *r, const ft_adamw *opt, int64_t *scored_out, const char **why) {
  int B = r->B, T = r->T;
  float *flat = r->grad.mem;
  ft_state_next_batch(&r->st, r->idx, B);
  int64_t b0, b1;
  slice(B, r->R, r->W, &b0, &b1);
  /* Every rank knows the whole global batch, so each can count its scored positions alone. */
  int64_t scored = 0, mine = 0;
  for (int i = 0; i < B; i++) {
    scored += r->train.len - r->train.op_at[r->idx[i]];
    if (i >= b0 && i < b1) mine += r->train.len - r->train.op_at[r->idx[i]];
  }
  *scored_out = scored;
  memset(flat, 0, (r->grad.count + 2) * sizeof(float));
  float local_loss = 0.0f;
  if (b1 > b0) ft_data_fill(&r->train, r->idx + b0, (int)(b1 - b0), 1, r->tok, r->tgt);
  if (b1 > b0 && !r->use_gpu) {
    local_loss = (float)ft_forward(&r->base, &r->st.adapter, r->tok, r->tgt, (int)(b1 - b0), T, r->acts, NULL);
    ft_backward(&r->base, &r->st.adapter, NULL, &r->grad, r->acts, 1.0f / (float)scored);
  }
#ifdef FT_WITH_CUDA
  if (b1 > b0 && r->use_gpu) {
    double l = 0;
    if (ft_cuda_set_lora(r->gpu, &r->st.adapter, r->msg, sizeof r->msg) ||
        ft_cuda_forward(r->gpu, 1, r->tok, r->tgt, (int)(b1 - b0), T, &l, r->msg, sizeof r->msg) ||
        ft_cuda_backward(r->gpu, 1.0f / (float)scored, r->msg, sizeof r->msg) ||
        ft_cuda_grad_to_host(r->gpu, flat, r->msg, sizeof r->msg)) {
      fprintf(stderr, "rank %d: %s\n", r->R, r->msg);
      return -1; /* the gang ends: the launcher sees this rank fail */
    }
    local_loss = (float)l;
  }
#endif
  flat[r->grad.count] = local_loss;
  *why = "";
  flat[r->grad.count + 1] = ftl_stop_pending(r->ctx, why) ? 1.0f : 0.0f;
  ftl_err rc = ftl_allreduce(r->ctx, flat, flat, r->grad.count + 2, FTL_DTYPE_F32, FTL_OP_SUM);
  if (rc) {
    fprintf(stderr, "rank %d: allreduce: %s: %s\n", r->R, ftl_strerror(rc), ftl_ctx_errmsg(r->ctx));
    return -1;
  }
  r->st.step++;
  ft_adamw_update(opt, r->st.adapter.mem, flat, r->st.m.mem, r->st.v.mem, r->st.adapter.count, r->st.step);
  /* This rank's share of the step's model FLOPs (its slice, its scored positions): ftl's MFU. */
  ftl_step_done_flops(r->ctx, r->st.step,
                      ft_step_flops(&r->base.cfg, (int)r->o->rank, r->o->targets, b1 - b0, T, mine, 0));
  return 0;
}

/* The checkpoint the plan calls for after this step, if any, and what its timing teaches the plan.
 * Returns nonzero when this rank must leave alone. */
static int checkpoint_if_due(run *r) {
  if (!(r->plan && ft_plan_due(r->plan, r->st.step) && r->st.step < r->o->steps)) return 0;
  int64_t t0 = ftl_clock_ns();
  ftl_err rc = ft_state_ckpt_save(r->ck, ft_plan_level(r->plan), r->msg, sizeof r->msg);
  double save_s = (double)(ftl_clock_ns() - t0) / 1e9;
  r->last_ckpt_step = r->st.step;
  r->saved_any = 1;
  /* The first checkpoint of a run is awaited, so the cadence has a measured stall at once. */
  if (!rc && ft_plan_calibrating(r->plan)) rc = ft_state_ckpt_wait(r->ck, r->msg, sizeof r->msg);
  int64_t timed_step = -1;
  int timed_level = 0;
  double stall_s = 0, durable_s = 0;
  int timed = ft_state_ckpt_timing(r->ck, &timed_step, &timed_level, &stall_s, &durable_s);
  ftl_err prc = rc ? rc
                   : ft_plan_after_checkpoint(r->plan, r->st.step, save_s, timed, timed_step, timed_level, stall_s,
                                              durable_s);
  if (prc && !rc) {
    rc = prc;
    snprintf(r->msg, sizeof r->msg, "cadence: %s", ftl_ctx_errmsg(r->ctx));
  }
  if (rc) {
    fprintf(stderr, "rank %d: %s\n", r->R, r->msg);
    return -1;
  }
  return 0;
}

/* Rank 0's progress line of the steps since the last one (loss, speed, the last checkpoint). */
static void log_progress(const run *r, int64_t t0, int64_t first, double loss_acc, int loss_n) {
  const opts *o = r->o;
  int64_t step = r->st.step;
  int B = r->B, T = r->T;
  double s = (double)(ftl_clock_ns() - t0) / 1e9;
  char ckline[96] = "";
  int committed;
  int64_t last = ft_state_ckpt_last(r->ck, &committed);
  if (last >= 0)
    snprintf(ckline, sizeof ckline, ", checkpoint of step %" PRId64 " %s", last, committed ? "committed" : "FAILED");
  printf("step %" PRId64 "/%" PRId64 " train loss %.4f (%.1f ms/step, %.0f tokens/s%s)\n", step, o->steps,
         loss_acc / loss_n, 1e3 * s / (double)(step - first), (double)(step - first) * B * T / s, ckline);
  fflush(stdout);
  /* The launcher draws it (ftl run's progress line) and keeps it (loss against step). */
  ftl_progress_report(r->ctx, step, o->steps, loss_acc / loss_n, (step - first) * B * T);
}

/* Preemption (SIGTERM or SIGUSR1 to `ftl run`): every rank sees the request after the same step;
 * the state is saved now, the commit awaited, and the program ends cleanly, so that `ftl run`
 * exits 75 and a rerun resumes from exactly here. Returns nonzero when the checkpoint failed. */
static int stop_preempted(run *r, const char *why) {
  ftl_err rc = FTL_OK;
  if (!*why) why = "preempted (another rank heard the request)";
  if (r->ck && r->last_ckpt_step != r->st.step) {
    /* Saved at L3: the job stops, and a requeue may land on other hosts. */
    rc = ft_state_ckpt_save(r->ck, FTL_CKPT_LEVEL_L3, r->msg, sizeof r->msg);
    r->saved_any = 1;
  }
  /* Nothing saved by this process: the state is the one just restored, committed already. */
  if (!rc && r->ck && r->saved_any) rc = ft_state_ckpt_wait(r->ck, r->msg, sizeof r->msg);
  if (r->R == 0) {
    int64_t step = r->st.step;
    if (!r->ck)
      printf("%s: stopping at step %" PRId64 " without a checkpoint (none in this build)\n", why, step);
    else if (rc)
      printf("%s: the checkpoint of step %" PRId64 " failed: %s\n", why, step, r->msg);
    else
      printf("%s: checkpoint of step %" PRId64 " committed; stopping\n", why, step);
    fflush(stdout);
  }
  return rc != FTL_OK;
}

/* Collective: the steps from the restored one to --steps. *failed is set when it ends in a stop. */
static loop_end train_loop(run *r, int *failed) {
  const opts *o = r->o;
  ft_adamw opt = {.lr = (float)o->lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.0f};
  int64_t t0 = ftl_clock_ns(), first = r->st.step;
  double loss_acc = 0.0;
  int loss_n = 0;
  while (r->st.step < o->steps) {
    int64_t step_t0 = ftl_clock_ns(), scored = 0;
    const char *why = "";
    if (train_step(r, &opt, &scored, &why)) return LOOP_ALONE;
    loss_acc += r->grad.mem[r->grad.count] / (double)scored;
    loss_n++;
    if (checkpoint_if_due(r)) return LOOP_ALONE;
    if (r->R == 0 && (r->st.step % o->log_every == 0 || r->st.step == o->steps)) {
      log_progress(r, t0, first, loss_acc, loss_n);
      loss_acc = 0.0;
      loss_n = 0;
    }
    /* Every rank saw the same sum, so every rank stops after the same step. */
    if (r->grad.mem[r->grad.count + 1] > 0.0f) {
      *failed = stop_preempted(r, why);
      return LOOP_STOPPED;
    }
    if (o->throttle_ms) sleep_ms(o->throttle_ms);
    /* A test's window (the forgeries of tests/fault/ft_stranger.sh): every rank waits here, so the
     * job outlasts what the test does, whatever the machine's speed; the result is unchanged. */
    while (o->hold_file && access(o->hold_file, F_OK) == 0) sleep_ms(20);
    /* The whole iteration is the step time the cadence converts seconds with (the throttle of
     * the tests stands for compute). */
    if (r->plan) ft_plan_step(r->plan, (double)(ftl_clock_ns() - step_t0) / 1e9);
  }
  return LOOP_FINISHED;
}

/* Collective: rank 0 writes the adapter while the others wait for it, then all report the held-out
 * metrics of the base model against the adapter's. */
static int finish(run *r) {
  int ok = 1;
  /* The last step is committed before the adapter is written (the cadence's steps need not include
   * it): a rank lost during the export or the evaluation restarts from it with nothing left to
   * train, and the export is all that is done again. Its failure (a full disk) costs only that:
   * the adapter is still written (the outcome is the same on every rank). */
  if (r->ck && r->last_ckpt_step != r->st.step) {
    ftl_err rc = ft_state_ckpt_save(r->ck, FTL_CKPT_LEVEL_L3, r->msg, sizeof r->msg);
    r->last_ckpt_step = r->st.step;
    r->saved_any = 1;
    if (!rc) rc = ft_state_ckpt_wait(r->ck, r->msg, sizeof r->msg);
    if (rc && r->R == 0) fprintf(stderr, "rank 0: the last step's checkpoint failed (%s); writing the adapter\n", r->msg);
  }
  if (r->R == 0) {
    ft_adapter_meta meta = {.base_hash = r->base_hash,
                            .data_hash = r->train.hash,
                            .seed = (uint64_t)r->o->seed,
                            .steps = r->st.step,
                            .world_size = r->W,
                            .global_batch = r->B,
                            .lr = r->o->lr};
    ok = ft_adapter_save(r->final_dir, &r->st.adapter, &meta, r->msg, sizeof r->msg) == 0;
    if (ok)
      printf("adapter written to %s/\n", r->final_dir);
    else
      fprintf(stderr, "rank 0: writing the adapter: %s\n", r->msg);
  }
  if (!agree(r->ctx, ok)) return -1;
  ft_metrics m[2];
  if (report(r->ctx, &r->base, &r->st.adapter, &r->held, m)) {
    fprintf(stderr, "rank %d: evaluation failed\n", r->R);
    return -1;
  }
  if (r->R == 0) {
    printf("held-out (%.0f examples): base model: loss %.3f, exact match %.1f%% | with the adapter: loss %.3f, "
           "exact match %.1f%%\n",
           m[0].examples, ft_metrics_loss(&m[0]), 100 * ft_metrics_accuracy(&m[0]), ft_metrics_loss(&m[1]),
           100 * ft_metrics_accuracy(&m[1]));
    fflush(stdout);
  }
  return 0;
}

/* Frees what the steps made; the checkpoint handle's close awaits the last commit (collective).
 * Returns the run's verdict: nonzero when it failed. */
static int run_teardown(run *r, int failed) {
  ft_plan_destroy(r->plan);
  if (ft_state_ckpt_close(r->ck) && !failed) {
    fprintf(stderr, "rank %d: the last checkpoint failed\n", r->R);
    failed = 1;
  }
  ft_acts_destroy(r->acts);
#ifdef FT_WITH_CUDA
  ft_cuda_destroy(r->gpu);
#endif
  ftl_free(r->idx);
  ftl_free(r->tok);
  ftl_free(r->tgt);
  ft_lora_destroy(&r->grad);
  ft_state_destroy(&r->st);
  ft_params_destroy(&r->base);
  ft_data_free(&r->train);
  ft_data_free(&r->held);
  return failed;
}

int main(int argc, char **argv) {
  opts o;
  if (parse_opts(argc, argv, &o)) return 2;
  ftl_ctx *ctx = NULL;
  ftl_err rc = ftl_init(&argc, &argv, &ctx);
  if (rc) {
    fprintf(stderr, "ftl_init: %s: %s\n", ftl_strerror(rc), ftl_ctx_errmsg(ctx));
    ftl_finalize(ctx);
    return 1;
  }
  run r = {.ctx = ctx, .o = &o, .R = ftl_ctx_info(ctx)->rank, .W = ftl_ctx_info(ctx)->world_size};
  int failed = 1;
  if (find_final_dir(&r) || load_data_and_base(&r) || create_state(&r) || choose_device(&r) || open_checkpoints(&r))
    goto done;
  print_banner(&r);
  loop_end end = train_loop(&r, &failed);
  if (end == LOOP_ALONE) {
    /* This rank failed inside the loop while the others may be blocked in a collective: it leaves
     * without another collective call (the checkpoint handle's close is one), and the launcher,
     * seeing it exit, ends the gang. */
    r.ck = NULL;
    goto done;
  }
  if (end == LOOP_STOPPED) goto done;
  /* What follows is not a training step: rank 0 writes the adapter while the others wait for it,
   * then all evaluate and the last checkpoint's commit is awaited. Under load that can outlast a
   * tight timeouts.step_s, which would call the waiting ranks hung after the last step and fail a
   * finished run over and over; the checkpoint timeout is the one for blocking writes. */
  ftl_progress_section(ctx, "checkpoint");
  failed = finish(&r) != 0;
done:
  failed = run_teardown(&r, failed);
  ftl_err frc = ftl_finalize(ctx);
  return failed || frc ? 1 : 0;
}
