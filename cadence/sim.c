/* cadence/sim.c: the failure simulator of cadence/sim.h.
 *
 * Time advances event to event (a segment of compute, a stall, a restart), not step by step, so
 * a run of thousands of hours costs one loop iteration per checkpoint or failure. The controller
 * is told what a training program would tell it: step times after each segment, exposure and the
 * stall and W of each checkpoint, each failure and restart.
 *
 * Not modelled: step-time noise, stragglers, failures that only slow the gang, a W that varies. */
#include "cadence/sim.h"

#include <math.h>
#include <string.h>

double cd_sim_rng_uniform(cd_sim_rng *r) { return (double)(cd_sim_rng_next(r) >> 11) * 0x1.0p-53; }

double cd_sim_rng_exp(cd_sim_rng *r, double mean) { return -mean * log1p(-cd_sim_rng_uniform(r)); }

typedef struct sim {
  const cd_cadence_sim_params *p;
  ftl_cadence *c;
  cd_cadence_sim_result *r;
  cd_sim_rng rng;
  double t;           /* wall clock */
  double next_fail;   /* wall time of the next failure */
  double exposure_t;  /* wall time up to which exposure was reported */
  int64_t w;          /* steps in the current state */
  int64_t w_durable;  /* steps in the last durable checkpoint */
  int64_t w_pending;  /* steps in the checkpoint being written, -1 if none */
  double pending_at;  /* when it becomes durable */
  int64_t since_ckpt; /* steps since the last checkpoint or restore */
  double window_t0;
  int64_t window_w0;
  ftl_err rc; /* first error from the controller */
} sim;

static void check(sim *s, ftl_err rc) {
  if (rc && !s->rc) s->rc = rc;
}

static void report_exposure(sim *s) {
  if (!s->c) return;
  check(s, ftl_cadence_observe_exposure(s->c, (s->t - s->exposure_t) * (double)s->p->world_size / 3600.0));
  s->exposure_t = s->t;
}

/* The clock has reached a failure at s->next_fail: roll back, then restart (failures may strike
 * during the restart too). */
static void fail(sim *s, double partial_compute_s) {
  cd_cadence_sim_result *r = s->r;
  s->t = s->next_fail;
  if (s->w_pending >= 0 && s->pending_at <= s->t) s->w_durable = s->w_pending;
  s->w_pending = -1;
  r->lost_s += (double)(s->w - s->w_durable) * s->p->step_s + partial_compute_s;
  s->w = s->w_durable;
  s->since_ckpt = 0;
  for (;;) {
    r->failures++;
    if (s->c) check(s, ftl_cadence_observe_failure(s->c));
    if (s->p->window_after > 0 && r->failures == s->p->window_after) {
      r->window_reached = true;
      s->window_t0 = s->t;
      s->window_w0 = s->w;
    }
    s->next_fail = s->t + cd_sim_rng_exp(&s->rng, s->p->mtbf_s);
    if (s->next_fail < s->t + s->p->restart_s) {
      r->restart_s += s->next_fail - s->t;
      s->t = s->next_fail;
      continue;
    }
    r->restart_s += s->p->restart_s;
    s->t += s->p->restart_s;
    break;
  }
  report_exposure(s);
  if (s->c) check(s, ftl_cadence_observe_restart(s->c, s->w, s->p->restart_s));
}

ftl_err cd_cadence_sim_run(const cd_cadence_sim_params *p, ftl_cadence *c, int64_t fixed_steps,
                            cd_cadence_sim_result *out) {
  if (!p || !out || !(p->mtbf_s > 0) || !(p->step_s > 0) || !(p->work_s > 0) || !(p->stall_s >= 0) ||
      !(p->durable_s >= 0) || !(p->restart_s >= 0) || p->world_size < 1 || (!c && fixed_steps < 1))
    return FTL_ERR_INVAL;
  memset(out, 0, sizeof *out);
  sim s = {.p = p, .c = c, .r = out, .w_pending = -1};
  cd_sim_rng_seed(&s.rng, p->seed);
  s.next_fail = cd_sim_rng_exp(&s.rng, p->mtbf_s);
  double give_up_s = (p->max_wall_factor > 0 ? p->max_wall_factor : 1000.0) * p->work_s;
  int64_t total = (int64_t)ceil(p->work_s / p->step_s);

  while (s.w < total && !s.rc) {
    if (s.t > give_up_s) break;
    int64_t n = fixed_steps;
    if (c) check(&s, ftl_cadence_interval_steps(c, &n));
    if (s.rc) break;
    out->last_interval_steps = n;
    int64_t todo = n - s.since_ckpt;
    if (todo < 0) todo = 0; /* the interval shrank below what has run: checkpoint now */
    if (todo > total - s.w) todo = total - s.w;
    double compute_s = (double)todo * p->step_s;
    if (s.next_fail < s.t + compute_s) {
      double ran = s.next_fail - s.t;
      int64_t done = (int64_t)floor(ran / p->step_s);
      if (done > todo) done = todo;
      out->compute_s += ran;
      s.w += done;
      if (c && done > 0) check(&s, ftl_cadence_observe_steps(c, done, (double)done * p->step_s));
      fail(&s, ran - (double)done * p->step_s);
      continue;
    }
    s.t += compute_s;
    out->compute_s += compute_s;
    s.w += todo;
    s.since_ckpt += todo;
    if (c && todo > 0) check(&s, ftl_cadence_observe_steps(c, todo, compute_s));
    if (s.w >= total) break;

    /* A checkpoint: wait for the previous one, if still being written, then stall. */
    double wait = s.w_pending >= 0 && s.pending_at > s.t ? s.pending_at - s.t : 0;
    double stall = wait + p->stall_s;
    if (s.next_fail < s.t + stall) {
      out->stall_s += s.next_fail - s.t;
      fail(&s, 0);
      continue;
    }
    double begin = s.t + wait;
    s.t += stall;
    out->stall_s += stall;
    if (s.w_pending >= 0) s.w_durable = s.w_pending; /* durable by `begin` at the latest */
    s.w_pending = s.w;
    s.pending_at = fmax(s.t, begin + p->durable_s);
    s.since_ckpt = 0;
    out->checkpoints++;
    report_exposure(&s);
    if (c) check(&s, ftl_cadence_observe_checkpoint(c, s.w, stall, p->durable_s));
  }
  report_exposure(&s);
  out->completed = s.w >= total;
  out->wall_s = s.t;
  out->work_s = (double)s.w * p->step_s;
  out->waste = out->wall_s > 0 ? 1.0 - out->work_s / out->wall_s : 0;
  if (out->window_reached && out->completed) {
    out->window_wall_s = s.t - s.window_t0;
    out->window_work_s = (double)(s.w - s.window_w0) * p->step_s;
    out->window_waste = out->window_wall_s > 0 ? 1.0 - out->window_work_s / out->window_wall_s : 0;
  }
  return s.rc;
}

/* ---- multi-level runs ----------------------------------------------------------------------- */

typedef struct ml_sim {
  const cd_sim_ml_params *p;
  ftl_cadence *c;
  cd_sim_ml_result *r;
  cd_sim_rng rng[FTL_CADENCE_MAX_LEVELS]; /* one stream per class: the same trace for every policy */
  double next_fail[FTL_CADENCE_MAX_LEVELS];
  int64_t every[FTL_CADENCE_MAX_LEVELS]; /* the intervals in force */
  double t, exposure_t;
  int64_t w;
  int64_t dur[FTL_CADENCE_MAX_LEVELS]; /* steps in the newest durable checkpoint of level ≥ k+1 */
  int64_t pend_w;                      /* the checkpoint being made durable, -1 if none */
  int pend_level;
  double pend_at;
  ftl_err rc;
} ml_sim;

static void ml_check(ml_sim *s, ftl_err rc) {
  if (rc && !s->rc) s->rc = rc;
}

static void ml_exposure(ml_sim *s) {
  if (!s->c) return;
  ml_check(s, ftl_cadence_observe_exposure(s->c, (s->t - s->exposure_t) * (double)s->p->world_size / 3600.0));
  s->exposure_t = s->t;
}

static int ml_next_class(const ml_sim *s) {
  int k = 0;
  for (int i = 1; i < s->p->levels; i++)
    if (s->next_fail[i] < s->next_fail[k]) k = i;
  return k;
}

static void ml_commit(ml_sim *s) {
  for (int k = 0; k < s->pend_level; k++)
    if (s->dur[k] < s->pend_w) s->dur[k] = s->pend_w;
  s->pend_w = -1;
}

static void ml_intervals(ml_sim *s) {
  if (!s->c) return;
  ftl_cadence_level_decision d;
  ml_check(s, ftl_cadence_decide_levels(s->c, &d));
  if (!s->rc)
    for (int k = 0; k < s->p->levels; k++)
      s->every[k] = d.interval_steps[k];
}

/* The clock reaches the earliest failure: roll back, restart (failures may strike during it). */
static void ml_fail(ml_sim *s, double partial_s) {
  cd_sim_ml_result *r = s->r;
  int cls = ml_next_class(s);
  s->t = s->next_fail[cls];
  if (s->pend_w >= 0 && s->pend_at <= s->t) ml_commit(s);
  s->pend_w = -1;
  r->lost_s += partial_s;
  double restart = 0;
  for (;;) {
    r->failures[cls]++;
    if (s->c) ml_check(s, ftl_cadence_observe_failure_level(s->c, cls + 1));
    int64_t back = s->dur[cls];
    r->lost_s += (double)(s->w - back) * s->p->step_s;
    s->w = back;
    for (int k = 0; k < s->p->levels; k++)
      if (s->dur[k] > back) s->dur[k] = back; /* newer copies below this class are of a future undone */
    int from = s->p->levels - 1;
    for (int k = cls; k < s->p->levels; k++)
      if (s->every[k] > 0) {
        from = k;
        break;
      }
    restart = s->p->lv[from].restart_s;
    s->next_fail[cls] = s->t + cd_sim_rng_exp(&s->rng[cls], 1.0 / s->p->lv[cls].rate);
    int next = ml_next_class(s);
    if (s->next_fail[next] < s->t + restart) {
      r->restart_s += s->next_fail[next] - s->t;
      s->t = s->next_fail[next];
      cls = next;
      continue;
    }
    r->restart_s += restart;
    s->t += restart;
    break;
  }
  ml_exposure(s);
  if (s->c) ml_check(s, ftl_cadence_observe_restart(s->c, s->w, restart));
  ml_intervals(s);
}

ftl_err cd_cadence_sim_ml_run(const cd_sim_ml_params *p, ftl_cadence *c, const int64_t *interval_steps,
                              cd_sim_ml_result *out) {
  if (!p || !out || p->levels < 1 || p->levels > FTL_CADENCE_MAX_LEVELS || !(p->step_s > 0) || !(p->work_s > 0) ||
      p->world_size < 1 || (!c && !interval_steps))
    return FTL_ERR_INVAL;
  for (int k = 0; k < p->levels; k++)
    if (!(p->lv[k].stall_s >= 0) || !(p->lv[k].durable_s >= 0) || !(p->lv[k].restart_s >= 0) ||
        !(p->lv[k].rate >= 0) || !isfinite(p->lv[k].rate))
      return FTL_ERR_INVAL;
  if (!c) {
    if (interval_steps[p->levels - 1] < 1) return FTL_ERR_INVAL;
    for (int k = 0, below = 0; k < p->levels; k++) {
      if (interval_steps[k] < 0) return FTL_ERR_INVAL;
      if (interval_steps[k] == 0) continue;
      if (below > 0 && interval_steps[k] % interval_steps[below - 1] != 0) return FTL_ERR_INVAL;
      below = k + 1;
    }
  }
  memset(out, 0, sizeof *out);
  ml_sim s = {.p = p, .c = c, .r = out, .pend_w = -1};
  for (int k = 0; k < p->levels; k++) {
    cd_sim_rng_seed(&s.rng[k], p->seed * 0x9E3779B97F4A7C15ull + (uint64_t)k + 1);
    s.next_fail[k] = p->lv[k].rate > 0 ? cd_sim_rng_exp(&s.rng[k], 1.0 / p->lv[k].rate) : INFINITY;
    if (!c) s.every[k] = interval_steps[k];
  }
  ml_intervals(&s);
  double give_up_s = (p->max_wall_factor > 0 ? p->max_wall_factor : 1000.0) * p->work_s;
  int64_t total = (int64_t)ceil(p->work_s / p->step_s);

  while (s.w < total && !s.rc) {
    if (s.t > give_up_s) break;
    int64_t s1 = 0;
    for (int k = 0; k < p->levels && !s1; k++)
      s1 = s.every[k];
    if (s1 < 1) {
      s.rc = FTL_ERR_STATE;
      break;
    }
    int64_t todo = (s.w / s1 + 1) * s1 - s.w;
    if (todo > total - s.w) todo = total - s.w;
    double compute_s = (double)todo * p->step_s;
    double fail_at = s.next_fail[ml_next_class(&s)];
    if (fail_at < s.t + compute_s) {
      double ran = fail_at - s.t;
      int64_t done = (int64_t)floor(ran / p->step_s);
      if (done > todo) done = todo;
      s.w += done;
      if (c && done > 0) ml_check(&s, ftl_cadence_observe_steps(c, done, (double)done * p->step_s));
      ml_fail(&s, ran - (double)done * p->step_s);
      continue;
    }
    s.t += compute_s;
    s.w += todo;
    if (c && todo > 0) ml_check(&s, ftl_cadence_observe_steps(c, todo, compute_s));
    if (s.w >= total) break;

    int level = 0; /* of this checkpoint: the controller's, or the highest whose interval divides the step */
    if (c) ml_check(&s, ftl_cadence_due_level(c, s.w, &level));
    for (int k = p->levels - 1; k >= 0 && !level && !c; k--)
      if (s.every[k] > 0 && s.w % s.every[k] == 0) level = k + 1;
    if (level < 1) level = 1; /* the controller's grid moved under this step: a level-1 checkpoint */
    const ftl_cadence_level_cost *lc = &p->lv[level - 1];
    double wait = s.pend_w >= 0 && s.pend_at > s.t ? s.pend_at - s.t : 0;
    double stall = wait + lc->stall_s;
    if (s.next_fail[ml_next_class(&s)] < s.t + stall) {
      out->stall_s += s.next_fail[ml_next_class(&s)] - s.t;
      ml_fail(&s, 0);
      continue;
    }
    double begin = s.t + wait;
    s.t += stall;
    out->stall_s += stall;
    if (s.pend_w >= 0) ml_commit(&s); /* durable by `begin` at the latest */
    s.pend_w = s.w;
    s.pend_level = level;
    s.pend_at = fmax(s.t, begin + lc->durable_s);
    out->checkpoints[level - 1]++;
    ml_exposure(&s);
    if (c) ml_check(&s, ftl_cadence_observe_checkpoint_level(c, level, stall, lc->durable_s));
    ml_intervals(&s);
  }
  ml_exposure(&s);
  out->completed = s.w >= total;
  out->wall_s = s.t;
  out->work_s = (double)s.w * p->step_s;
  out->waste = out->wall_s > 0 ? 1.0 - out->work_s / out->wall_s : 0;
  return s.rc;
}
