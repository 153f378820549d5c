/* cadence/moody.c: the SC'10 multi-level model of Moody et al. (cadence/moody.h), our C
 * implementation of the paper's Markov chain, written to check ftl's own model against it
 * (docs/cadence.md, "The paper's model").
 *
 * Every part of a run is summarised by how it ends: p0, the probability that it ends done, with t0
 * the time it then took; p[i], the probability that a failure of class i ends it first (a failure it
 * cannot absorb itself), with t[i] the expected time spent until then. Parts compose:
 *   - a segment of T seconds (compute plus a checkpoint, or a recovery) under Poisson failures;
 *   - in sequence (the second starts only if the first ends done);
 *   - with recovery at level k: failures of class ≤ k end in a recovery from the level-k checkpoint
 *     and a retry, so only classes above k leave;
 *   - repeated n times.
 * The run (level L) is built from the bottom: the part between two level-k checkpoints is the first
 * interval after a level-k checkpoint, then V_{k−1} level-(k−1) parts, the last ending in a level-k
 * checkpoint; each with recovery at its own level.
 *
 * The model gives up (a zero summary) where a retry loop would almost surely never end, as the
 * paper's does (its published model code, LLNL-CODE-817266, with the same 1e-6): that keeps the
 * answers identical to the paper's model where the period is far longer than the time between
 * failures, where no plan is worth anything anyway. */
#include "cadence/moody.h"

#include <math.h>
#include <string.h>

enum { MAXL = FTL_CADENCE_MAX_LEVELS };
#define MOODY_EPS 1e-6

/* How a part of the run ends; classes are 1-based (index 0 unused). */
typedef struct ending {
  double p0, t0;
  double p[MAXL + 1], t[MAXL + 1];
} ending;

typedef struct model {
  const cd_moody_params *in;
  int L;
  double lam; /* all classes together */
  ending recovery[MAXL + 1];
} model;

static const ending GAVE_UP = {0};

/* A segment of T seconds: done with e^{−λT}; else the first failure is of class i with its share of
 * the rate, after the mean time of a failure known to fall inside T. */
static ending segment(const model *m, double T) {
  ending e = {.p0 = exp(-m->lam * T), .t0 = T};
  double failed = 1.0 - e.p0;
  double when = failed > 0 ? (1.0 - (m->lam * T + 1.0) * e.p0) / (m->lam * failed) : 0;
  for (int i = 1; i <= m->L; i++) {
    e.p[i] = m->in->rate[i - 1] * failed / m->lam;
    e.t[i] = when;
  }
  return e;
}

static ending part_with_recovery(const model *m, int k, int c);

/* n parts of level k ending in level-k checkpoints, then one ending in a level-c checkpoint (n ≥ 0):
 * classes ≤ k are absorbed inside each, so only those above end the whole. */
static ending repeated(const model *m, int k, int c, int64_t n) {
  ending a = n > 0 ? part_with_recovery(m, k, k) : GAVE_UP;
  ending b = part_with_recovery(m, k, c);
  ending e = {0};
  double x = a.p0, xn = pow(x, (double)n), xn1 = pow(x, (double)n + 1);
  /* Σ_{j<n} x^j, and Σ_{j<n} j·x^j (the parts done before the one that fails). */
  double geo = (1.0 - xn) / (1.0 - x);
  double geo_j = (x - (double)n * xn + ((double)n - 1.0) * xn1) / ((1.0 - x) * (1.0 - x));
  e.p0 = xn * b.p0;
  e.t0 = (double)n * a.t0 + b.t0;
  for (int i = k + 1; i <= m->L; i++) {
    e.p[i] = geo * a.p[i] + xn * b.p[i];
    double spent = geo * a.p[i] * a.t[i] + geo_j * a.p[i] * a.t0 + xn * b.p[i] * ((double)n * a.t0 + b.t[i]);
    e.t[i] = e.p[i] > 0 ? spent / e.p[i] : 0;
  }
  return e;
}

/* The part of the run that ends in a level-c checkpoint and starts after one of level k (c ≥ k),
 * without recovery: for k = 1 one interval; above, the first part of level k−1 and then the
 * V_{k−1} that follow it (when level k−1 is written at all). */
static ending part(const model *m, int k, int c) {
  if (k == 1) return segment(m, m->in->compute_s + m->in->write_s[c - 1]);
  int64_t v = m->in->count[k - 2];
  if (v == 0) return part(m, k - 1, c);
  ending a = part(m, k - 1, k - 1);
  ending b = repeated(m, k - 1, c, v - 1);
  ending e = {.p0 = a.p0 * b.p0, .t0 = a.t0 + b.t0};
  for (int i = 1; i <= m->L; i++) {
    e.p[i] = a.p[i] + a.p0 * b.p[i];
    double spent = a.p[i] * a.t[i] + a.p0 * b.p[i] * (a.t0 + b.t[i]);
    e.t[i] = e.p[i] > 0 ? spent / e.p[i] : 0;
  }
  return e;
}

/* part(k, c) retried after each failure of class ≤ k, from a recovery of level k. */
static ending part_with_recovery(const model *m, int k, int c) {
  const ending y = part(m, k, c), *r = &m->recovery[k];
  /* Failures the part hands to the recovery, and their mean time. */
  double p_fail = 0, t_fail = 0;
  for (int i = 1; i <= k; i++) {
    p_fail += y.p[i];
    t_fail += y.p[i] * y.t[i];
  }
  t_fail = p_fail > 0 ? t_fail / p_fail : 0;
  /* A recovery restarts itself after a failure of a class below k, or of any class at the top. */
  int restarts = k == m->L ? k : k - 1;
  double p_again = 0, t_again = 0;
  for (int i = 1; i <= restarts; i++) {
    p_again += r->p[i];
    t_again += r->p[i] * r->t[i];
  }
  t_again = p_again > 0 ? t_again / p_again : 0;
  if (p_again - 1.0 > MOODY_EPS) return GAVE_UP;
  double retries = p_again / (1.0 - p_again);
  double p_recovered = r->p0 / (1.0 - p_again), t_recovered = r->t0 + retries * t_again;
  /* A recovery ended by a class that is not retried: class k (its own copy is gone) counts as the
   * class above. */
  double p_esc[MAXL + 1] = {0}, t_esc[MAXL + 1] = {0};
  for (int i = k + 1; i <= m->L; i++) {
    if (i == k + 1) {
      double both = r->p[k] + r->p[i];
      p_esc[i] = both / (1.0 - p_again);
      t_esc[i] = (both > 0 ? (r->p[k] * r->t[k] + r->p[i] * r->t[i]) / both : 0) + retries * t_again;
    } else {
      p_esc[i] = r->p[i] / (1.0 - p_again);
      t_esc[i] = r->t[i] + retries * t_again;
    }
  }
  double loop = p_fail * p_recovered; /* one failed try followed by a recovery that worked */
  if (p_fail - 1.0 > MOODY_EPS || p_fail + y.p0 - 1.0 > MOODY_EPS || 1.0 - loop < MOODY_EPS) return GAVE_UP;
  double loops = loop / (1.0 - loop);
  ending e = {.p0 = y.p0 / (1.0 - loop), .t0 = y.t0 + loops * (t_fail + t_recovered)};
  for (int i = k + 1; i <= m->L; i++) {
    double direct = y.p[i], via = p_fail * p_esc[i];
    e.p[i] = (direct + via) / (1.0 - loop);
    double mean = direct + via > 0 ? (direct * y.t[i] + via * (t_fail + t_esc[i])) / (direct + via) : 0;
    e.t[i] = mean + loops * (t_fail + t_recovered);
  }
  return e;
}

static int finite_nonneg(double x) { return isfinite(x) && x >= 0; }

ftl_err cd_moody_evaluate(const cd_moody_params *p, cd_moody_result *out) {
  if (!p || !out || p->levels < 1 || p->levels > MAXL || !finite_nonneg(p->compute_s)) return FTL_ERR_INVAL;
  model m = {.in = p, .L = p->levels};
  for (int i = 0; i < p->levels; i++) {
    /* An interval of no time at all would make a part certain to succeed, and its repetitions a
     * division by zero. */
    if (!finite_nonneg(p->write_s[i]) || !finite_nonneg(p->read_s[i]) || !finite_nonneg(p->rate[i]) ||
        p->count[i] < 0 || !(p->compute_s + p->write_s[i] > 0))
      return FTL_ERR_INVAL;
    m.lam += p->rate[i];
  }
  if (!(m.lam > 0) || p->count[p->levels - 1] != 1) return FTL_ERR_INVAL;
  for (int k = 1; k <= m.L; k++) m.recovery[k] = segment(&m, p->read_s[k - 1]);
  memset(out, 0, sizeof *out);
  out->intervals = 1;
  for (int k = 0; k < m.L - 1; k++) out->intervals *= (double)(p->count[k] + 1);
  ending run = part_with_recovery(&m, m.L, m.L);
  out->time_s = run.t0;
  out->efficiency = run.t0 != 0 ? out->intervals * p->compute_s / run.t0 : 0;
  return FTL_OK;
}
