/* cadence/multilevel.c: the multi-level checkpoint model (docs/cadence.md, "Multi-level cadence"):
 * the expected waste of a nested periodic pattern of L1/L2/L3 checkpoints, its optimizer, an
 * exhaustive search to check the optimizer against, the single-level plan to compare with, and the
 * map from a ledger cause to the lowest level that survives it.
 *
 * The model follows Moody, Bronevetsky, Mohror and de Supinski, "Design, Modeling, and Evaluation
 * of a Scalable Multi-level Checkpointing System" (SC'10): the run is a Markov chain over the
 * positions of one period of the pattern; failures of each class arrive as independent Poisson
 * processes over wall time (compute, checkpoints and restarts alike); a failure of class i goes back
 * to the newest checkpoint of level ≥ i. Our own derivation and code (the paper's text and tables
 * were not available to us; see docs/cadence.md). Pure: no I/O, no allocation. */
#include "ftl/cadence.h"

#include <math.h>
#include <string.h>

#include "core/failure_cause.h"
#include "core/failure_record.h"

/* A period longer than this many level-1 checkpoints is not evaluated (the model is O(period)). */
#define MAX_POSITIONS (1 << 24)
/* The optimizer never proposes a period longer than this. */
#define OPT_MAX_POSITIONS (1 << 20)
/* Points of the coarse grid on log τ before the golden-section refinement. */
#define TAU_GRID 48
#define GOLDEN_ITERS 60

/* ---- failure classes to levels -------------------------------------------------------------- */

int ftl_cadence_cause_level(const char *cause, unsigned levels) {
  if (!cause) return FTL_CADENCE_LEVEL_NONE;
  /* Which level a cause needs: the causes are core/failure_cause.h's. A process that died or hung
   * leaves its host, and so its node-local copy, intact; a host that went silent takes its memory
   * with it, so its shards must come from the partner; the launcher failing as a whole (mpirun or
   * srun dying without a rank to blame) is the job lost, so only the shared directory is sure. */
  static const struct {
    const char *name;
    int level;
  } map[] = {
      {"exit_code", FTL_CADENCE_LEVEL_L1},  {"signal", FTL_CADENCE_LEVEL_L1},
      {"hang", FTL_CADENCE_LEVEL_L1},       {"agent_lost", FTL_CADENCE_LEVEL_L1},
      {"node_lost", FTL_CADENCE_LEVEL_L2},  {"launcher", FTL_CADENCE_LEVEL_L3},
  };
  /* Only causes that count as failures (the one table's class, core/failure_cause.h) have a level.
   * Looked up here rather than through ftl_cadence_classify, which lives with the controller: the
   * controller calls this file, and this file must not call back. */
  static const bool counts[] = {
#define FTL_CAUSE_COUNTS_(kind, name, cls) FTL_CADENCE_CAUSE_##cls == FTL_CADENCE_CAUSE_FAILURE,
      FTL_FAILURE_CAUSE_MAP(FTL_CAUSE_COUNTS_)
#undef FTL_CAUSE_COUNTS_
  };
  int at = core_failure_cause_index(cause);
  if (at < 0 || (size_t)at >= sizeof counts / sizeof counts[0] || !counts[at]) return FTL_CADENCE_LEVEL_NONE;
  int need = FTL_CADENCE_LEVEL_NONE;
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(cause, map[i].name) == 0) need = map[i].level;
  /* A failure cause added to the table without a level here is taken as the worst case. */
  if (need == FTL_CADENCE_LEVEL_NONE) need = FTL_CADENCE_LEVEL_L3;
  for (int l = need; l <= FTL_CADENCE_MAX_LEVELS; l++)
    if (levels & FTL_CADENCE_LEVEL_BIT(l)) return l;
  return FTL_CADENCE_LEVEL_NONE;
}

/* ---- the model ------------------------------------------------------------------------------ */

static bool cd_costs_valid(const ftl_cadence_level_cost *lv, int levels) {
  if (!lv || levels < 1 || levels > FTL_CADENCE_MAX_LEVELS) return false;
  for (int k = 0; k < levels; k++) {
    const double v[4] = {lv[k].stall_s, lv[k].durable_s, lv[k].restart_s, lv[k].rate};
    for (int j = 0; j < 4; j++)
      if (!isfinite(v[j]) || v[j] < 0) return false;
  }
  return true;
}

/* Levels written by a pattern (every[k] ≥ 1 for k < written), or 0 when `every` is malformed. */
static int cd_written(const int64_t *every, int levels, int64_t *period) {
  if (!every || every[0] != 1) return 0;
  int written = 1;
  int64_t p = 1;
  for (int k = 1; k < levels; k++) {
    if (every[k] == 0) break;
    if (every[k] < 1 || p > MAX_POSITIONS / every[k]) return 0;
    p *= every[k];
    written++;
  }
  for (int k = written; k < levels; k++)
    if (every[k] != 0) return 0; /* a level above one never written */
  *period = p;
  return written;
}

double ftl_cadence_pattern_waste(const ftl_cadence_level_cost *lv, int levels, double tau_s, const int64_t *every) {
  if (!cd_costs_valid(lv, levels) || !isfinite(tau_s) || !(tau_s > 0)) return 1.0;
  int64_t period = 0;
  int written = cd_written(every, levels, &period);
  if (written == 0) return 1.0;
  double rate = 0;
  for (int k = 0; k < levels; k++)
    rate += lv[k].rate;
  /* A class whose lowest survivor is never written is survived by nothing: the run starts over,
   * and in the long run it never finishes. */
  for (int k = written; k < levels; k++)
    if (lv[k].rate > 0) return 1.0;

  /* N[k]: level-1 checkpoints between two checkpoints of level ≥ k+1. */
  int64_t n_at[FTL_CADENCE_MAX_LEVELS];
  n_at[0] = 1;
  for (int k = 1; k < written; k++)
    n_at[k] = n_at[k - 1] * every[k];
  /* Restart from level k, failures during it included (it starts again, as Daly's model has it), and
   * W charged like restart time: a failure in the W window also loses the save being made durable.
   * With one level this makes the model exactly ftl_cadence_waste. */
  double restart[FTL_CADENCE_MAX_LEVELS], share[FTL_CADENCE_MAX_LEVELS];
  for (int k = 0; k < written; k++) {
    double r = lv[k].restart_s + lv[k].durable_s;
    restart[k] = rate > 0 ? expm1(rate * r) / rate : r;
    share[k] = rate > 0 ? lv[k].rate / rate : 0;
  }

  /* Position s of the period (0: just after a checkpoint of the top written level). E_s, the
   * expected wall time to get from checkpoint s to checkpoint s+1, satisfies
   *   E_s = (e^{Λa}−1)/Λ + (e^{Λa}−1)·Σ_k p_k·(R'_k + D_k(s)),
   * a = τ + δ of checkpoint s+1, p_k = λ_k/Λ, and D_k(s) the expected time to redo the positions
   * from the newest checkpoint of level ≥ k up to s: the sum of their E_u, which memorylessness makes
   * the same as the first time. since[k] keeps that sum. */
  double since[FTL_CADENCE_MAX_LEVELS] = {0};
  double wall = 0;
  for (int64_t s = 0; s < period; s++) {
    int64_t next = s + 1;
    int lvl = 0; /* the level of checkpoint s+1 */
    for (int k = written - 1; k > 0; k--)
      if (next % n_at[k] == 0) {
        lvl = k;
        break;
      }
    double a = tau_s + lv[lvl].stall_s;
    double grow = rate > 0 ? expm1(rate * a) : 0;
    double e = rate > 0 ? grow / rate : a;
    double redo = 0;
    for (int k = 0; k < written; k++)
      redo += share[k] * (restart[k] + since[k]);
    e += grow * redo;
    if (!isfinite(e)) return 1.0;
    wall += e;
    for (int k = 0; k < written; k++)
      since[k] = next % n_at[k] == 0 ? 0 : since[k] + e;
  }
  if (!isfinite(wall) || !(wall > 0)) return 1.0;
  double w = 1.0 - (double)period * tau_s / wall;
  return w < 0 ? 0 : w > 1 ? 1 : w;
}

/* The best τ for a fixed `every`: a coarse grid on log τ around `guess`, then golden-section search
 * in the cells on either side of the best grid point (the waste is unimodal in τ, but flat at 1
 * far from the optimum, where a bare golden search could stall). Returns the waste; *tau_out the τ. */
static double cd_best_tau(const ftl_cadence_level_cost *lv, int levels, const int64_t *every, double guess,
                          double *tau_out) {
  const double span = log(1e4); /* guess/1e4 .. guess×1e4 */
  double lo = log(guess) - span, step = 2 * span / (TAU_GRID - 1);
  int best = 0;
  double best_w = 2;
  for (int i = 0; i < TAU_GRID; i++) {
    double w = ftl_cadence_pattern_waste(lv, levels, exp(lo + step * i), every);
    if (w < best_w) {
      best_w = w;
      best = i;
    }
  }
  double a = lo + step * (best > 0 ? best - 1 : 0), b = lo + step * (best < TAU_GRID - 1 ? best + 1 : best);
  const double g = 0.6180339887498949;
  double x1 = b - g * (b - a), x2 = a + g * (b - a);
  double f1 = ftl_cadence_pattern_waste(lv, levels, exp(x1), every);
  double f2 = ftl_cadence_pattern_waste(lv, levels, exp(x2), every);
  for (int i = 0; i < GOLDEN_ITERS; i++) {
    if (f1 < f2) {
      b = x2;
      x2 = x1;
      f2 = f1;
      x1 = b - g * (b - a);
      f1 = ftl_cadence_pattern_waste(lv, levels, exp(x1), every);
    } else {
      a = x1;
      x1 = x2;
      f1 = f2;
      x2 = a + g * (b - a);
      f2 = ftl_cadence_pattern_waste(lv, levels, exp(x2), every);
    }
  }
  double tau = exp(0.5 * (a + b));
  double w = ftl_cadence_pattern_waste(lv, levels, tau, every);
  if (best_w < w) { /* the grid point itself (a boundary of the bracket) */
    w = best_w;
    tau = exp(lo + step * best);
  }
  *tau_out = tau;
  return w;
}

static double cd_total_rate(const ftl_cadence_level_cost *lv, int levels) {
  double r = 0;
  for (int k = 0; k < levels; k++)
    r += lv[k].rate;
  return r;
}

/* A cost the first-order formulas can divide by: a save of no measurable cost still costs something,
 * or the optimum would be to checkpoint infinitely often. */
static double cd_floor_cost(double c) { return c > 1e-9 ? c : 1e-9; }

static void cd_fill(ftl_cadence_pattern *out, int levels, double tau, const int64_t *every, double waste) {
  memset(out, 0, sizeof *out);
  out->levels = levels;
  out->tau_s = tau;
  for (int k = 0; k < levels; k++)
    out->every[k] = every[k];
  out->waste = waste;
}

ftl_err ftl_cadence_pattern_optimize(const ftl_cadence_level_cost *lv, int levels, ftl_cadence_pattern *out) {
  if (!out || !cd_costs_valid(lv, levels) || !(cd_total_rate(lv, levels) > 0)) return FTL_ERR_INVAL;
  int64_t every[FTL_CADENCE_MAX_LEVELS] = {1, 0, 0};

  /* Levels above the highest class that fails are never written. */
  int written = 0;
  for (int k = 0; k < levels; k++)
    if (lv[k].rate > 0) written = k + 1;

  if (written == 1) {
    /* One level: Daly's interval for it (its class is the only one that fails). */
    double tau = ftl_cadence_daly_s(cd_floor_cost(lv[0].stall_s), 1.0 / lv[0].rate);
    cd_fill(out, levels, tau, every, ftl_cadence_pattern_waste(lv, levels, tau, every));
    return FTL_OK;
  }

  /* First order: the waste is Σ_k [Δ_k/T_k + λ_k·T_k/2] + constants, T_k the spacing of level k and
   * Δ_k = δ_k − δ_{k−1} the stall a level-k checkpoint adds over one of the level below (a level-k
   * checkpoint is one of each level below it too). Each term is Young's, so T_k = √(2Δ_k/λ_k); the
   * nesting needs T_1 ≤ T_2 ≤ T_3, and where a level's own optimum is shorter than the one below's,
   * the two are pooled into one spacing for both (pool-adjacent-violators). */
  double num[FTL_CADENCE_MAX_LEVELS], den[FTL_CADENCE_MAX_LEVELS], t[FTL_CADENCE_MAX_LEVELS] = {0};
  int first[FTL_CADENCE_MAX_LEVELS], blocks = 0;
  for (int k = 0; k < written; k++) {
    double delta = cd_floor_cost(lv[k].stall_s - (k > 0 ? lv[k - 1].stall_s : 0));
    num[blocks] = delta;
    den[blocks] = lv[k].rate;
    first[blocks] = k;
    blocks++;
    /* A block's spacing is √(2·num/den), ∞ when den = 0; merge while out of order. */
    while (blocks > 1 && num[blocks - 2] * den[blocks - 1] > num[blocks - 1] * den[blocks - 2]) {
      num[blocks - 2] += num[blocks - 1];
      den[blocks - 2] += den[blocks - 1];
      blocks--;
    }
  }
  for (int b = 0; b < blocks; b++) {
    int end = b + 1 < blocks ? first[b + 1] : written;
    for (int k = first[b]; k < end; k++)
      t[k] = sqrt(2 * num[b] / den[b]);
  }

  /* Integer ratios: each of the floor/ceil roundings of T_k/T_{k−1}, τ refined on the full model,
   * then a walk over neighbouring ratios (±1, ×/÷ 2) while the full model improves. */
  double best_w = 2, best_tau = t[0];
  int64_t best[FTL_CADENCE_MAX_LEVELS] = {1, 0, 0};
  double ratio[FTL_CADENCE_MAX_LEVELS] = {1, 1, 1};
  for (int k = 1; k < written; k++)
    ratio[k] = fmin(t[k] / t[k - 1], (double)OPT_MAX_POSITIONS);
  for (unsigned combo = 0; combo < (1u << (written - 1)); combo++) {
    int64_t cand[FTL_CADENCE_MAX_LEVELS] = {1, 0, 0};
    int64_t positions = 1;
    for (int k = 1; k < written; k++) {
      double r = (combo >> (k - 1)) & 1 ? ceil(ratio[k]) : floor(ratio[k]);
      cand[k] = r < 1 ? 1 : (int64_t)r;
      if (positions * cand[k] > OPT_MAX_POSITIONS) cand[k] = OPT_MAX_POSITIONS / positions;
      if (cand[k] < 1) cand[k] = 1;
      positions *= cand[k];
    }
    double tau, w = cd_best_tau(lv, levels, cand, t[0], &tau);
    if (w < best_w) {
      best_w = w;
      best_tau = tau;
      memcpy(best, cand, sizeof best);
    }
  }
  for (int round = 0; round < 64; round++) {
    bool moved = false;
    for (int k = 1; k < written; k++) {
      const int64_t v = best[k];
      const int64_t tries[4] = {v - 1, v + 1, v / 2, v * 2};
      for (int j = 0; j < 4; j++) {
        if (tries[j] < 1 || tries[j] == v) continue;
        int64_t cand[FTL_CADENCE_MAX_LEVELS];
        memcpy(cand, best, sizeof cand);
        cand[k] = tries[j];
        int64_t positions = 1;
        for (int q = 1; q < written; q++)
          positions *= cand[q];
        if (positions > OPT_MAX_POSITIONS) continue;
        double tau, w = cd_best_tau(lv, levels, cand, best_tau, &tau);
        if (w < best_w * (1 - 1e-12)) {
          best_w = w;
          best_tau = tau;
          memcpy(best, cand, sizeof best);
          moved = true;
          break;
        }
      }
    }
    if (!moved) break;
  }
  cd_fill(out, levels, best_tau, best, best_w);
  return FTL_OK;
}

ftl_err ftl_cadence_pattern_brute_force(const ftl_cadence_level_cost *lv, int levels, int max_every,
                                        ftl_cadence_pattern *out) {
  if (!out || !cd_costs_valid(lv, levels) || max_every < 1 || max_every > 256) return FTL_ERR_INVAL;
  double rate = cd_total_rate(lv, levels);
  if (!(rate > 0)) return FTL_ERR_INVAL;
  /* τ guesses around the scale of the problem: Young's for level 1 at the total rate. */
  double guess = sqrt(2 * cd_floor_cost(lv[0].stall_s) / rate);
  double best_w = 2, best_tau = guess;
  int64_t best[FTL_CADENCE_MAX_LEVELS] = {1, 0, 0};
  /* every[k] runs over 0 (never) and 1..max_every; a 0 ends the pattern. */
  int64_t e1_max = levels >= 2 ? max_every : 0, e2_max = levels >= 3 ? max_every : 0;
  for (int64_t e1 = 0; e1 <= e1_max; e1++) {
    for (int64_t e2 = 0; e2 <= (e1 > 0 ? e2_max : 0); e2++) {
      int64_t cand[FTL_CADENCE_MAX_LEVELS] = {1, e1, e2};
      double tau, w = cd_best_tau(lv, levels, cand, guess, &tau);
      if (w < best_w) {
        best_w = w;
        best_tau = tau;
        memcpy(best, cand, sizeof best);
      }
    }
  }
  cd_fill(out, levels, best_tau, best, best_w);
  return FTL_OK;
}

ftl_err ftl_cadence_pattern_single_level(const ftl_cadence_level_cost *lv, int levels, ftl_cadence_pattern *out) {
  if (!out || !cd_costs_valid(lv, levels) || !(cd_total_rate(lv, levels) > 0)) return FTL_ERR_INVAL;
  ftl_cadence_level_cost top = lv[levels - 1];
  top.rate = cd_total_rate(lv, levels);
  const int64_t every[FTL_CADENCE_MAX_LEVELS] = {1, 0, 0};
  double tau = ftl_cadence_daly_s(cd_floor_cost(top.stall_s), 1.0 / top.rate);
  cd_fill(out, 1, tau, every, ftl_cadence_pattern_waste(&top, 1, tau, every));
  return FTL_OK;
}
