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
 * with ftl_step_done and checkpointing every --ckpt-every steps; writes the adapter to
 * RUNDIR/final/ (docs/formats/adapter.md); and reports the held-out metric of the base model
 * against the adapter's.
 *
 * Not here: the numerics (model.c), files (base_io.c, adapter_io.c, data.c), the checkpoint seam
 * (state.c). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
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
  int64_t steps, batch, rank, ckpt_every, log_every, throttle_ms;
  int ckpt_auto; /* --ckpt-every auto: the cadence controller decides */
  double ckpt_every_s; /* --ckpt-every 30s: pinned in seconds */
  double fleet_rate; /* --fleet-rate: the controller's prior failure rate per rank-hour */
  int64_t pretrain_steps, pretrain_batch, layers, embd, heads;
  double lr, alpha, pretrain_lr;
  int64_t seed;
  unsigned targets;
} opts;

static void usage(FILE *to, const char *argv0) {
  fprintf(to,
          "usage: %s --data DIR --base FILE.h5 [options]\n"
          "  fine-tune:  --steps N (300) --batch B (32, global) --lr X (3e-3) --rank R (8) --alpha A (16)\n"
          "              --targets q,v[,k,o,fc,proj] (q,v,o,fc) --seed S (1) --ckpt-every N|Ss|auto (50; 0: never;\n"
          "              30s: every 30 s of steps; auto: derived from the measured stall and failure rate,\n"
          "              docs/cadence.md; pinned cadences get their expected waste against the optimum)\n"
          "              --fleet-rate X (the cadence's prior failure rate per rank-hour; 2e-5)\n"
          "              --final-dir DIR (RUNDIR/final) --run-dir DIR (the launcher's) --log-every N (25)\n"
          "              --device auto|cpu|cuda (auto: the CUDA path when built with it and a GPU is visible)\n"
          "  base model (built only when FILE.h5 is missing): --pretrain-steps N (400) --pretrain-batch B (32)\n"
          "              --pretrain-lr X (3e-3) --layers L (2) --embd C (64) --heads H (4)\n"
          "  tests:      --throttle-ms MS (sleep after each step) --marker STR (ignored; finds the processes)\n",
          argv0);
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
              .targets = ft_lora_parse_targets("q,v,o,fc")};
  enum {
    O_DATA = 1000,
    O_BASE,
    O_FINAL,
    O_RUNDIR,
    O_STEPS,
    O_BATCH,
    O_RANK,
    O_CKPT,
    O_FLEET_RATE,
    O_LOG,
    O_THROTTLE,
    O_PSTEPS,
    O_PBATCH,
    O_LAYERS,
    O_EMBD,
    O_HEADS,
    O_LR,
    O_ALPHA,
    O_PLR,
    O_SEED,
    O_TARGETS,
    O_MARKER,
    O_DEVICE
  };
  static const struct option options[] = {{"data", required_argument, NULL, O_DATA},
                                          {"base", required_argument, NULL, O_BASE},
                                          {"final-dir", required_argument, NULL, O_FINAL},
                                          {"run-dir", required_argument, NULL, O_RUNDIR},
                                          {"steps", required_argument, NULL, O_STEPS},
                                          {"batch", required_argument, NULL, O_BATCH},
                                          {"rank", required_argument, NULL, O_RANK},
                                          {"ckpt-every", required_argument, NULL, O_CKPT},
                                          {"log-every", required_argument, NULL, O_LOG},
                                          {"throttle-ms", required_argument, NULL, O_THROTTLE},
                                          {"fleet-rate", required_argument, NULL, O_FLEET_RATE},
                                          {"pretrain-steps", required_argument, NULL, O_PSTEPS},
                                          {"pretrain-batch", required_argument, NULL, O_PBATCH},
                                          {"layers", required_argument, NULL, O_LAYERS},
                                          {"embd", required_argument, NULL, O_EMBD},
                                          {"heads", required_argument, NULL, O_HEADS},
                                          {"lr", required_argument, NULL, O_LR},
                                          {"alpha", required_argument, NULL, O_ALPHA},
                                          {"pretrain-lr", required_argument, NULL, O_PLR},
                                          {"seed", required_argument, NULL, O_SEED},
                                          {"targets", required_argument, NULL, O_TARGETS},
                                          {"marker", required_argument, NULL, O_MARKER},
                                          {"device", required_argument, NULL, O_DEVICE},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    int bad = 0;
    char *end = NULL;
    if (c == 'h') {
      usage(stdout, argv[0]);
      exit(0);
    }
    switch (c) {
    case O_DATA: o->data_dir = optarg; break;
    case O_BASE: o->base_path = optarg; break;
    case O_FINAL: o->final_dir = optarg; break;
    case O_RUNDIR: o->run_dir = optarg; break;
    case O_STEPS: bad = ftl_parse_i64(optarg, 0, 100000000, &o->steps) != FTL_OK; break;
    case O_BATCH: bad = ftl_parse_i64(optarg, 1, 1 << 20, &o->batch) != FTL_OK; break;
    case O_RANK: bad = ftl_parse_i64(optarg, 1, 1024, &o->rank) != FTL_OK; break;
    case O_CKPT:
      o->ckpt_auto = strcmp(optarg, "auto") == 0;
      if (!o->ckpt_auto && optarg[0] && optarg[strlen(optarg) - 1] == 's') {
        o->ckpt_every_s = strtod(optarg, &end);
        bad = end != optarg + strlen(optarg) - 1 || !(o->ckpt_every_s > 0);
        o->ckpt_every = 0;
        break;
      }
      bad = !o->ckpt_auto && ftl_parse_i64(optarg, 0, 100000000, &o->ckpt_every) != FTL_OK;
      break;
    case O_LOG: bad = ftl_parse_i64(optarg, 1, 100000000, &o->log_every) != FTL_OK; break;
    case O_FLEET_RATE:
      o->fleet_rate = strtod(optarg, &end);
      bad = !end || *end || !(o->fleet_rate > 0);
      break;
    case O_THROTTLE: bad = ftl_parse_i64(optarg, 0, 60000, &o->throttle_ms) != FTL_OK; break;
    case O_PSTEPS: bad = ftl_parse_i64(optarg, 0, 100000000, &o->pretrain_steps) != FTL_OK; break;
    case O_PBATCH: bad = ftl_parse_i64(optarg, 1, 1 << 20, &o->pretrain_batch) != FTL_OK; break;
    case O_LAYERS: bad = ftl_parse_i64(optarg, 1, FT_MAX_LAYERS, &o->layers) != FTL_OK; break;
    case O_EMBD: bad = ftl_parse_i64(optarg, 1, 4096, &o->embd) != FTL_OK; break;
    case O_HEADS: bad = ftl_parse_i64(optarg, 1, 4096, &o->heads) != FTL_OK; break;
    case O_SEED: bad = ftl_parse_i64(optarg, 0, INT64_MAX, &o->seed) != FTL_OK; break;
    case O_LR:
      o->lr = strtod(optarg, &end);
      bad = !end || *end || !(o->lr > 0);
      break;
    case O_PLR:
      o->pretrain_lr = strtod(optarg, &end);
      bad = !end || *end || !(o->pretrain_lr > 0);
      break;
    case O_ALPHA:
      o->alpha = strtod(optarg, &end);
      bad = !end || *end || !(o->alpha > 0);
      break;
    case O_TARGETS:
      o->targets = ft_lora_parse_targets(optarg);
      bad = !o->targets;
      break;
    case O_MARKER: break;
    case O_DEVICE:
      o->device = optarg;
      bad = strcmp(optarg, "auto") && strcmp(optarg, "cpu") && strcmp(optarg, "cuda");
      break;
    default: bad = 1; break;
    }
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
  ft_config cfg = {.block = T, .layers = (int)o->layers, .heads = (int)o->heads, .embd = (int)o->embd};
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
    int64_t b0, b1, scored = 0;
    slice(B, me->rank, me->world_size, &b0, &b1);
    for (int i = 0; i < B; i++)
      scored += d->len - d->op_at[idx[i]];
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
    ftl_step_done(ctx, step);
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
  const ftl_info *me = ftl_ctx_info(ctx);
  int R = me->rank, W = me->world_size, failed = 1;
  char msg[2048] = "", path[4096], final_dir[4096];
  ft_data train = {0}, held = {0};
  ft_params base = {0};
  ft_state st = {0};
  ft_lora grad = {0};
  ft_acts *acts = NULL;
  ft_state_ckpt *ck = NULL;
  ft_cadence_plan *plan = NULL; /* before any goto done: done destroys it */
#ifdef FT_WITH_CUDA
  ft_cuda *gpu = NULL;
#endif
  int32_t *idx = NULL;
  int *tok = NULL, *tgt = NULL;
  uint64_t base_hash = 0;
  const char *run_dir = o.run_dir ? o.run_dir : me->run_dir;

  /* The example's collectives are on host memory: ftl_allreduce reduces host buffers over MPI on
   * either backend (docs/gpu.md), so a gang that chose NCCL runs this program unchanged. */
  ftl_info where = *me; /* RUNDIR/final from the context, or from --run-dir */
  where.run_dir = run_dir;
  ftl_diag fd;
  if (o.final_dir)
    snprintf(final_dir, sizeof final_dir, "%s", o.final_dir);
  else if (ftl_adapter_final_dir(&where, final_dir, sizeof final_dir, &fd)) {
    if (R == 0) fprintf(stderr, "ftl-finetune: no run directory (not under ftl run): pass --final-dir or --run-dir\n");
    goto done;
  }
  int ok = ftl_fmt(path, sizeof path, "%s/train.txt", o.data_dir) == FTL_OK &&
           ft_data_load(path, &train, msg, sizeof msg) == 0;
  ok = ok && ftl_fmt(path, sizeof path, "%s/heldout.txt", o.data_dir) == FTL_OK &&
       ft_data_load(path, &held, msg, sizeof msg) == 0;
  if (!agree(ctx, ok)) {
    fprintf(stderr, "rank %d: data: %s\n", R, msg[0] ? msg : "another rank could not read the data");
    goto done;
  }
  msg[0] = '\0';
  if (ensure_base(ctx, &o, &base, &base_hash, msg, sizeof msg)) {
    fprintf(stderr, "rank %d: base model: %s\n", R, msg);
    goto done;
  }
  int T = ft_data_seq_len(&train);
  if (T > base.cfg.block || ft_data_seq_len(&held) != T) {
    if (R == 0)
      fprintf(stderr, "ftl-finetune: the data's sequences (%d) do not fit the base model's block (%d)\n", T,
              base.cfg.block);
    goto done;
  }
  ft_run_key key = {.base_hash = base_hash,
                    .data_hash = train.hash,
                    .seed = (uint64_t)o.seed,
                    .global_batch = o.batch,
                    .rank = o.rank,
                    .targets = o.targets,
                    .lr = o.lr,
                    .alpha = o.alpha};
  int B = (int)o.batch, max_b = (B + W - 1) / W;
  ok = ft_state_create(&st, &base.cfg, (int)o.rank, (float)o.alpha, o.targets, train.n, &key) == 0 &&
       ft_lora_create(&grad, &base.cfg, (int)o.rank, (float)o.alpha, o.targets) == 0 &&
       (idx = ftl_malloc((size_t)B * sizeof(int32_t))) && (tok = ftl_malloc((size_t)max_b * T * sizeof(int))) &&
       (tgt = ftl_malloc((size_t)max_b * T * sizeof(int))) && (acts = ft_acts_create(&base.cfg, (int)o.rank, max_b));
  if (!agree(ctx, ok)) {
    fprintf(stderr, "rank %d: out of memory\n", R);
    goto done;
  }

  /* The device: the CUDA path for the fine-tune's forward and backward passes where this build has
   * it and a GPU is visible (--device auto), GPU local_rank % count; pre-training and evaluation
   * stay on the CPU. The gradients are exchanged in host memory over MPI either way. */
  int use_gpu = 0;
#ifdef FT_WITH_CUDA
  int ndev = ft_cuda_device_count();
  use_gpu = strcmp(o.device, "cuda") == 0 || (strcmp(o.device, "auto") == 0 && ndev > 0);
  if (use_gpu && ndev < 1) use_gpu = -1;
  if (use_gpu > 0 && (ft_cuda_select_device(me->local_rank % ndev, msg, sizeof msg) ||
                      ft_cuda_create(&base, (int)o.rank, (float)o.alpha, o.targets, max_b, &gpu, msg, sizeof msg))) {
    fprintf(stderr, "rank %d: %s\n", R, msg);
    use_gpu = -2;
  }
#else
  if (strcmp(o.device, "cuda") == 0) use_gpu = -1;
#endif
  if (!agree(ctx, use_gpu >= 0)) {
    if (use_gpu == -1) fprintf(stderr, "rank %d: --device cuda: this build has no CUDA path or there is no GPU\n", R);
    goto done;
  }

  rc = ft_state_ckpt_open(ctx, &st, o.run_dir, &ck, msg, sizeof msg);
  if (rc == FTL_ERR_UNSUPPORTED) {
    if (R == 0) printf("checkpoints: %s\n", msg);
  } else if (rc) {
    fprintf(stderr, "rank %d: checkpoints: %s\n", R, msg);
    goto done;
  } else {
    rc = ft_state_ckpt_restore(ck, msg, sizeof msg);
    if (rc && rc != FTL_ERR_NOTFOUND) {
      fprintf(stderr, "rank %d: %s\n", R, msg);
      goto done;
    }
    if (R == 0) printf("checkpoints: %s\n", msg);
  }
  /* A checkpoint step must come after the last one saved or restored. */
  int64_t last_ckpt_step = st.step;
  int saved_any = 0;
  /* When to checkpoint: pinned every --ckpt-every steps, or derived (--ckpt-every auto). */
  if (ck && (o.ckpt_auto || o.ckpt_every > 0 || o.ckpt_every_s > 0)) {
    rc = ft_plan_create(ctx, o.ckpt_auto ? 0 : o.ckpt_every, o.ckpt_every_s, o.fleet_rate, st.step, &plan, msg,
                        sizeof msg);
    if (rc) {
      fprintf(stderr, "rank %d: %s\n", R, msg);
      goto done;
    }
  }

  if (R == 0) {
    char tl[64];
    ft_lora_format_targets(o.targets, tl, sizeof tl);
    printf("fine-tune: base %016" PRIx64 " (%d layers, %d channels), LoRA r=%" PRId64 " alpha=%g on %s (%zu "
           "parameters), %d ranks x %d of a global batch of %d, %" PRId64 " steps from step %" PRId64 " on the %s\n",
           base_hash, base.cfg.layers, base.cfg.embd, o.rank, o.alpha, tl, st.adapter.count, W, max_b, B, o.steps,
           st.step, use_gpu ? "GPU (CUDA path)" : "CPU");
    fflush(stdout);
  }

  /* The gradients, then in the spare floats the loss and the stop vote (preemption): one allreduce. */
  float *flat = grad.mem;
  ft_adamw opt = {.lr = (float)o.lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.0f};
  int64_t t0 = ftl_clock_ns(), first = st.step;
  double loss_acc = 0.0;
  int loss_n = 0;
  while (st.step < o.steps) {
    int64_t step_t0 = ftl_clock_ns();
    ft_state_next_batch(&st, idx, B);
    int64_t b0, b1;
    slice(B, R, W, &b0, &b1);
    /* Every rank knows the whole global batch, so each can count its scored positions alone. */
    int64_t scored = 0;
    for (int i = 0; i < B; i++)
      scored += train.len - train.op_at[idx[i]];
    memset(flat, 0, (grad.count + 2) * sizeof(float));
    float local_loss = 0.0f;
    if (b1 > b0) ft_data_fill(&train, idx + b0, (int)(b1 - b0), 1, tok, tgt);
    if (b1 > b0 && !use_gpu) {
      local_loss = (float)ft_forward(&base, &st.adapter, tok, tgt, (int)(b1 - b0), T, acts, NULL);
      ft_backward(&base, &st.adapter, NULL, &grad, acts, 1.0f / (float)scored);
    }
#ifdef FT_WITH_CUDA
    if (b1 > b0 && use_gpu) {
      double l = 0;
      if (ft_cuda_set_lora(gpu, &st.adapter, msg, sizeof msg) ||
          ft_cuda_forward(gpu, 1, tok, tgt, (int)(b1 - b0), T, &l, msg, sizeof msg) ||
          ft_cuda_backward(gpu, 1.0f / (float)scored, msg, sizeof msg) ||
          ft_cuda_grad_to_host(gpu, flat, msg, sizeof msg)) {
        fprintf(stderr, "rank %d: %s\n", R, msg);
        goto alone; /* the gang ends: the launcher sees this rank fail */
      }
      local_loss = (float)l;
    }
#endif
    flat[grad.count] = local_loss;
    const char *why = "";
    flat[grad.count + 1] = ftl_stop_pending(ctx, &why) ? 1.0f : 0.0f;
    rc = ftl_allreduce(ctx, flat, flat, grad.count + 2, FTL_DTYPE_F32, FTL_OP_SUM);
    if (rc) {
      fprintf(stderr, "rank %d: allreduce: %s: %s\n", R, ftl_strerror(rc), ftl_ctx_errmsg(ctx));
      goto alone;
    }
    st.step++;
    ft_adamw_update(&opt, st.adapter.mem, flat, st.m.mem, st.v.mem, st.adapter.count, st.step);
    ftl_step_done(ctx, st.step);
    loss_acc += flat[grad.count] / (double)scored;
    loss_n++;
    if (plan && ft_plan_due(plan, st.step) && st.step < o.steps) {
      rc = ft_state_ckpt_save(ck, msg, sizeof msg);
      last_ckpt_step = st.step;
      saved_any = 1;
      /* The first checkpoint of a run is awaited, so the cadence has a measured stall at once. */
      if (!rc && ft_plan_calibrating(plan)) rc = ft_state_ckpt_wait(ck, msg, sizeof msg);
      int64_t timed_step = -1;
      double stall_s = 0, durable_s = 0;
      int timed = ft_state_ckpt_timing(ck, &timed_step, &stall_s, &durable_s);
      ftl_err prc = rc ? rc : ft_plan_after_checkpoint(plan, st.step, timed, timed_step, stall_s, durable_s);
      if (prc && !rc) {
        rc = prc;
        snprintf(msg, sizeof msg, "cadence: %s", ftl_ctx_errmsg(ctx));
      }
      if (rc) {
        fprintf(stderr, "rank %d: %s\n", R, msg);
        goto alone;
      }
    }
    if (R == 0 && (st.step % o.log_every == 0 || st.step == o.steps)) {
      double s = (double)(ftl_clock_ns() - t0) / 1e9;
      char ckline[96] = "";
      int committed;
      int64_t last = ft_state_ckpt_last(ck, &committed);
      if (last >= 0)
        snprintf(ckline, sizeof ckline, ", checkpoint of step %" PRId64 " %s", last,
                 committed ? "committed" : "FAILED");
      printf("step %" PRId64 "/%" PRId64 " train loss %.4f (%.1f ms/step, %.0f tokens/s%s)\n", st.step, o.steps,
             loss_acc / loss_n, 1e3 * s / (double)(st.step - first), (double)(st.step - first) * B * T / s, ckline);
      fflush(stdout);
      /* The launcher draws it (ftl run's progress line) and keeps it (loss against step). */
      ftl_progress_report(ctx, st.step, o.steps, loss_acc / loss_n, (st.step - first) * B * T);
      loss_acc = 0.0;
      loss_n = 0;
    }
    /* Preemption (SIGTERM or SIGUSR1 to `ftl run`): every rank sees the request after the same
     * step; the state is saved now, the commit awaited, and the program ends cleanly, so that
     * `ftl run` exits 75 and a rerun resumes from exactly here. */
    /* Every rank saw the same sum, so every rank stops after the same step. */
    if (flat[grad.count + 1] > 0.0f) {
      if (!*why) why = "preempted (another rank heard the request)";
      if (ck && last_ckpt_step != st.step) {
        rc = ft_state_ckpt_save(ck, msg, sizeof msg);
        saved_any = 1;
      }
      /* Nothing saved by this process: the state is the one just restored, committed already. */
      if (!rc && ck && saved_any) rc = ft_state_ckpt_wait(ck, msg, sizeof msg);
      if (R == 0) {
        if (!ck) printf("%s: stopping at step %" PRId64 " without a checkpoint (none in this build)\n", why, st.step);
        else if (rc) printf("%s: the checkpoint of step %" PRId64 " failed: %s\n", why, st.step, msg);
        else printf("%s: checkpoint of step %" PRId64 " committed; stopping\n", why, st.step);
        fflush(stdout);
      }
      failed = rc != FTL_OK;
      goto done;
    }
    if (o.throttle_ms) sleep_ms(o.throttle_ms);
    /* The whole iteration is the step time the cadence converts seconds with (the throttle of
     * the tests stands for compute). */
    if (plan) ft_plan_step(plan, (double)(ftl_clock_ns() - step_t0) / 1e9);
  }

  /* What follows is not a training step: rank 0 writes the adapter while the others wait for it,
   * then all evaluate and the last checkpoint's commit is awaited. Under load that can outlast a
   * tight timeouts.step_s, which would call the waiting ranks hung after the last step and fail a
   * finished run over and over; the checkpoint timeout is the one for blocking writes. */
  ftl_progress_section(ctx, "checkpoint");
  ok = 1;
  if (R == 0) {
    ft_adapter_meta meta = {.base_hash = base_hash,
                            .data_hash = train.hash,
                            .seed = (uint64_t)o.seed,
                            .steps = st.step,
                            .world_size = W,
                            .global_batch = B,
                            .lr = o.lr};
    ok = ft_adapter_save(final_dir, &st.adapter, &meta, msg, sizeof msg) == 0;
    if (ok)
      printf("adapter written to %s/\n", final_dir);
    else
      fprintf(stderr, "rank 0: writing the adapter: %s\n", msg);
  }
  if (!agree(ctx, ok)) goto done;
  ft_metrics m[2];
  if (report(ctx, &base, &st.adapter, &held, m)) {
    fprintf(stderr, "rank %d: evaluation failed\n", R);
    goto done;
  }
  if (R == 0) {
    printf("held-out (%.0f examples): base model: loss %.3f, exact match %.1f%% | with the adapter: loss %.3f, "
           "exact match %.1f%%\n",
           m[0].examples, ft_metrics_loss(&m[0]), 100 * ft_metrics_accuracy(&m[0]), ft_metrics_loss(&m[1]),
           100 * ft_metrics_accuracy(&m[1]));
    fflush(stdout);
  }
  failed = 0;
alone:
  /* This rank failed inside the loop while the others may be blocked in a collective: it leaves
   * without another collective call (the checkpoint handle's close is one), and the launcher, seeing
   * it exit, ends the gang. */
  if (failed) ck = NULL;
done:
  ft_plan_destroy(plan);
  if (ft_state_ckpt_close(ck) && !failed) {
    fprintf(stderr, "rank %d: the last checkpoint failed\n", R);
    failed = 1;
  }
  ft_acts_destroy(acts);
#ifdef FT_WITH_CUDA
  ft_cuda_destroy(gpu);
#endif
  ftl_free(idx);
  ftl_free(tok);
  ftl_free(tgt);
  ft_lora_destroy(&grad);
  ft_state_destroy(&st);
  ft_params_destroy(&base);
  ft_data_free(&train);
  ft_data_free(&held);
  ftl_err frc = ftl_finalize(ctx);
  return failed || frc ? 1 : 0;
}
