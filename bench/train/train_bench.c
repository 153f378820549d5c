/* bench/train/train_bench.c: bench-train, the cost of ftl's per-step calls in the example
 * fine-tune's training step, and the CPU path's speed.
 *
 *   bench/train/run.sh [BUILD_DIR] [--rounds N] [--steps-per-round N] [--batch B] [--pass-reps N]
 *
 * Part 1, throughput: tokens per second of the CPU path (forward only; forward + backward of the
 * adapter; forward + backward of every weight, as in pre-training) on the job's model shape.
 * Part 2, overhead: the same training step (forward, backward, allreduce, AdamW) measured three
 * ways, interleaved round by round so that the noise of a shared machine falls on all three alike:
 *   bare        the step alone;
 *   step_done   the step + ftl_step_done (the launcher's progress heartbeat);
 *   + ckpt      the step + ftl_step_done + the checkpoint calls a step makes when no checkpoint
 *               is due (the due check, and ftl_ckpt_last for the progress line; every step here,
 *               an upper bound: the example calls it only on log lines).
 * The table gives the median step time of each, its ratio to bare, and the mean time spent inside
 * the ftl calls (mean and median, microseconds) and the mean as a share of the bare step (the
 * overhead without the step's own noise; goal < 1%).
 * The full run is not part of ctest; tests/bench/train_smoke.sh runs the smallest size
 * (--rounds 2 --steps-per-round 2 --pass-reps 3) and checks that both tables are printed: part 1's
 * repetitions are part of the size too, since under ASan (a Debug build) 60 of them take most of a
 * minute on a 2-core machine. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/ftl.h"
#include "model.h"
#include "state.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct bench {
  ftl_ctx *ctx;
  ft_params p;
  ft_state st;
  ft_lora g;
  ft_acts *acts;
  int *tok, *tgt;
  int b, t;
} bench;

/* One training step of the example (finetune.c's loop body without its ftl calls). */
static void train_step(bench *x) {
  memset(x->g.mem, 0, (x->g.count + 1) * sizeof(float));
  x->g.mem[x->g.count] = (float)ft_forward(&x->p, &x->st.adapter, x->tok, x->tgt, x->b, x->t, x->acts, NULL);
  ft_backward(&x->p, &x->st.adapter, NULL, &x->g, x->acts, 1.0f / (float)(x->b * 9));
  ftl_allreduce(x->ctx, x->g.mem, x->g.mem, x->g.count + 1, FTL_DTYPE_F32, FTL_OP_SUM);
  x->st.step++;
  ft_adamw o = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.0f};
  ft_adamw_update(&o, x->st.adapter.mem, x->g.mem, x->st.m.mem, x->st.v.mem, x->st.adapter.count, x->st.step);
}

int main(int argc, char **argv) {
  int64_t rounds = 40, per_round = 5, batch = 8, pass_reps = 60;
  static const struct option options[] = {{"rounds", required_argument, NULL, 'r'},
                                          {"steps-per-round", required_argument, NULL, 's'},
                                          {"batch", required_argument, NULL, 'b'},
                                          {"pass-reps", required_argument, NULL, 'p'},
                                          {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    if (c == 'r' && ftl_parse_i64(optarg, 1, 100000, &rounds) == FTL_OK) continue;
    if (c == 's' && ftl_parse_i64(optarg, 1, 100000, &per_round) == FTL_OK) continue;
    if (c == 'b' && ftl_parse_i64(optarg, 1, 4096, &batch) == FTL_OK) continue;
    if (c == 'p' && ftl_parse_i64(optarg, 1, 100000, &pass_reps) == FTL_OK) continue;
    fprintf(stderr, "usage: %s [--rounds N (40)] [--steps-per-round N (5)] [--batch B (8)] [--pass-reps N (60)]\n",
            argv[0]);
    return 2;
  }
  bench x = {0};
  ftl_err rc = ftl_init(&argc, &argv, &x.ctx);
  if (rc) {
    fprintf(stderr, "ftl_init: %s: %s\n", ftl_strerror(rc), ftl_ctx_errmsg(x.ctx));
    ftl_finalize(x.ctx);
    return 1;
  }
  const ftl_info *me = ftl_ctx_info(x.ctx);
  if (!me->under_launcher)
    printf("note: not started by `ftl run`: ftl_step_done has no launcher to talk to (use bench/train/run.sh)\n");
  /* The job's shape (examples/finetune/job.yaml): 2 layers, 64 channels, 4 heads, 18 positions,
   * LoRA rank 8 on q, v, o, fc; 8 sequences per rank (a global batch of 32 on 4 ranks). */
  ft_config cfg = {.block = 18, .layers = 2, .heads = 4, .embd = 64};
  x.b = (int)batch;
  x.t = 18;
  ft_run_key key = {.seed = 1, .global_batch = batch, .rank = 8, .lr = 1e-3, .alpha = 16};
  unsigned targets = ft_lora_parse_targets("q_proj,v_proj,o_proj,gate_proj,up_proj");
  ft_params dp = {0};
  int fail = ft_params_create(&x.p, &cfg) || ft_params_create(&dp, &cfg) ||
             ft_state_create(&x.st, &cfg, 8, 16.0f, targets, 64, &key) ||
             ft_lora_create(&x.g, &cfg, 8, 16.0f, targets) || !(x.acts = ft_acts_create(&cfg, 8, x.b)) ||
             !(x.tok = calloc((size_t)x.b * x.t, sizeof(int))) || !(x.tgt = calloc((size_t)x.b * x.t, sizeof(int)));
  if (fail) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  ft_params_init(&x.p, 1);
  ft_rng r;
  ft_rng_seed(&r, 2);
  for (size_t i = 0; i < x.st.adapter.count; i++)
    x.st.adapter.mem[i] += 0.01f * ft_rng_normal(&r);
  for (int i = 0; i < x.b * x.t; i++) {
    x.tok[i] = 'a' + (int)ft_rng_below(&r, 26);
    x.tgt[i] = i % x.t >= 9 ? 'a' + (int)ft_rng_below(&r, 26) : -1;
  }

  /* Part 1: throughput. The three passes are interleaved and each reported by its median, so a
   * busy neighbour on a shared machine slows all three alike. */
  printf("CPU path, one process: %d layers, %d channels, %d heads, %d positions, batch %d, LoRA r=8 on q,v,o,gate,up_proj\n",
         cfg.layers, cfg.embd, cfg.heads, x.t, x.b);
  printf("  %-36s %12s %12s\n", "pass", "ms/batch", "tokens/s");
  const char *names[3] = {"forward (evaluation)", "forward + backward (fine-tune)", "forward + backward (pre-train)"};
  double *pass_ms[3];
  for (int mode = 0; mode < 3; mode++)
    if (!(pass_ms[mode] = calloc((size_t)pass_reps, sizeof(double)))) {
      fprintf(stderr, "out of memory\n");
      return 1;
    }
  for (int64_t rep = -3; rep < pass_reps; rep++) /* three rounds of warm-up */
    for (int mode = 0; mode < 3; mode++) {
      int64_t t0 = ftl_clock_ns();
      ft_forward(&x.p, mode == 2 ? NULL : &x.st.adapter, x.tok, x.tgt, x.b, x.t, x.acts, NULL);
      if (mode == 1) ft_backward(&x.p, &x.st.adapter, NULL, &x.g, x.acts, 1e-2f);
      if (mode == 2) ft_backward(&x.p, NULL, &dp, NULL, x.acts, 1e-2f);
      if (rep >= 0) pass_ms[mode][rep] = (double)(ftl_clock_ns() - t0) / 1e6;
    }
  for (int mode = 0; mode < 3; mode++) {
    double ms = median(pass_ms[mode], (int)pass_reps);
    printf("  %-36s %12.2f %12.0f\n", names[mode], ms, (double)x.b * x.t / (ms / 1e3));
    free(pass_ms[mode]);
  }

  /* Part 2: overhead of ftl's per-step calls. */
  char dir[] = "/tmp/ftl-train-bench.XXXXXX", msg[1024];
  ft_state_ckpt *ck = NULL;
  const char *run_dir = me->run_dir ? me->run_dir : mkdtemp(dir);
  rc = ft_state_ckpt_open(x.ctx, &x.st, run_dir, &ck, msg, sizeof msg);
  int have_ckpt = rc == FTL_OK;
  if (!have_ckpt) printf("note: %s; the third row measures the due check only\n", msg);
  const int64_t every = 1000000; /* never due during the bench */
  size_t total = (size_t)rounds * (size_t)per_round;
  double *t[3], *tc[3], in_calls[3] = {0, 0, 0};
  for (int m = 0; m < 3; m++) {
    t[m] = calloc(total, sizeof(double));
    tc[m] = calloc(total, sizeof(double));
    if (!t[m] || !tc[m]) return 1;
  }
  for (int i = 0; i < 10; i++)
    train_step(&x); /* warm-up */
  volatile int64_t sink = 0;
  for (int64_t rd = 0; rd < rounds; rd++) {
    for (int k = 0; k < 3; k++) {
      int mode = (int)((rd + k) % 3); /* rotate the order so no mode always runs first */
      for (int64_t s = 0; s < per_round; s++) {
        int64_t t0 = ftl_clock_ns();
        train_step(&x);
        int64_t t1 = ftl_clock_ns();
        if (mode >= 1) ftl_step_done(x.ctx, x.st.step);
        if (mode == 2) {
          if (ck && x.st.step % every == 0) ft_state_ckpt_save(ck, FTL_CKPT_LEVEL_L3, msg, sizeof msg);
          int ok;
          sink += ft_state_ckpt_last(ck, &ok);
        }
        int64_t t2 = ftl_clock_ns();
        in_calls[mode] += (double)(t2 - t1) / 1e6;
        tc[mode][rd * per_round + s] = (double)(t2 - t1) / 1e3;
        t[mode][rd * per_round + s] = (double)(t2 - t0) / 1e6;
      }
    }
  }
  (void)sink;
  double med[3];
  for (int m = 0; m < 3; m++)
    med[m] = median(t[m], (int)total);
  printf(
      "\nper-step overhead, %zu steps each, interleaved: median step time, and the time spent inside the ftl calls\n",
      total);
  printf("  %-46s %9s %8s %9s %9s %9s %9s\n", "step", "ms/step", "ratio", "overhead", "calls us", "median", "in calls");
  const char *rows[3] = {"bare (forward, backward, allreduce, AdamW)", "+ ftl_step_done",
                         have_ckpt ? "+ ftl_step_done + checkpoint calls (none due)" : "+ ftl_step_done + due check"};
  for (int m = 0; m < 3; m++)
    printf("  %-46s %9.3f %8.4f %8.2f%% %9.2f %9.2f %8.3f%%\n", rows[m], med[m], med[m] / med[0],
           100.0 * (med[m] / med[0] - 1.0), 1e3 * in_calls[m] / (double)total, median(tc[m], (int)total),
           100.0 * in_calls[m] / (double)total / med[0]);
  /* The step-time ratio carries the machine's noise (about +-1% on a shared 2-core machine); the
   * time inside the calls is the overhead itself. */
  double worst = (in_calls[1] > in_calls[2] ? in_calls[1] : in_calls[2]) / (double)total / med[0];
  printf("goal: ftl's per-step calls cost under 1%% of a step: %s (%.3f%% measured inside the calls)\n",
         worst < 0.01 ? "met" : "NOT met", 100.0 * worst);
  ft_state_ckpt_close(ck);
  for (int m = 0; m < 3; m++) {
    free(t[m]);
    free(tc[m]);
  }
  free(x.tok);
  free(x.tgt);
  ft_acts_destroy(x.acts);
  ft_lora_destroy(&x.g);
  ft_state_destroy(&x.st);
  ft_params_destroy(&dp);
  ft_params_destroy(&x.p);
  ftl_finalize(x.ctx);
  return 0;
}
