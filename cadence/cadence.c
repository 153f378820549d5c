/* cadence/cadence.c: the checkpoint-interval formulas and the cadence controller.
 *
 * Map: cause classes · the controller's state and estimators
 * (Gamma-Poisson failure rate, moving medians of δ, W and R, EWMA of the step time) · derivation of
 * a decision and its sentence · what a ledger record adds to the estimate, counted once
 * (cadence/controller.h; reading, parsing and appending ledgers live in ledger.c), per host too
 * (the gang's rate from its hosts' histories: hostrate.c); the controller's per-level intervals
 * (the model itself is multilevel.c; the formulas are formulas.c).
 *
 * Deliberately not here: any I/O, any agreement across ranks, any clock. The controller only knows what it is told, which is what lets the simulator (sim.c)
 * drive the very same code through simulated time. */
#include "ftl/cadence.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cadence/controller.h"
#include "cadence/hostrate.h"
#include "core/failure_cause.h"
#include "core/failure_record.h"
#include "ftl/core.h"

#define DEFAULT_FLEET_RATE 2e-5 /* failures per rank-hour (Llama 3: 419 in 16,384 GPUs × 54 days) */
#define DEFAULT_PRIOR_EVENTS 1.0
#define DEFAULT_STALL_S 1.0
#define DEFAULT_RESTART_S 60.0
#define DEFAULT_WINDOW 8
#define MAX_WINDOW 64
#define STEP_EWMA 0.1
/* An interval longer than this many seconds is as good as never (and keeps steps in range). */
#define MAX_INTERVAL_S 1e12

/* ---- cause classes -------------------------------------------------------------------------- */

ftl_cadence_cause_class ftl_cadence_classify(const char *cause, int64_t step) {
  /* The causes and their classes are core/failure_cause.h's, the table the launcher names its
   * failures from; a name is looked up by core's record codec, in the table's order. */
  static const ftl_cadence_cause_class class_of[] = {
#define FTL_CAUSE_CLASS_(kind, name, cls) FTL_CADENCE_CAUSE_##cls,
      FTL_FAILURE_CAUSE_MAP(FTL_CAUSE_CLASS_)
#undef FTL_CAUSE_CLASS_
  };
  int i = core_failure_cause_index(cause);
  if (i < 0 || (size_t)i >= sizeof class_of / sizeof class_of[0]) return FTL_CADENCE_CAUSE_UNKNOWN;
  /* A program that dies before its first step failed to start: a bug or a bad argument, which a
   * shorter interval would not have saved any work from. */
  if ((strcmp(cause, "exit_code") == 0 || strcmp(cause, "signal") == 0) && step < 0)
    return FTL_CADENCE_CAUSE_NOT_FAILURE;
  return class_of[i];
}

/* ---- the controller ------------------------------------------------------------------------- */

typedef struct ring {
  double v[MAX_WINDOW];
  int n, next;
} ring;

/* The newest `window` values by time: restarts arrive from ledgers in file order (the run's, then
 * the fleet's, which mixes jobs), not in the order they happened, so the window keeps the largest
 * `at` rather than the last pushed. */
typedef struct timed_ring {
  double v[MAX_WINDOW];
  int64_t at[MAX_WINDOW];
  int n;
} timed_ring;

/* Restarts seen in-process (observe_restart) are newer than any ledger record (wall_us). */
#define IN_PROCESS_AT (INT64_MAX / 2)

struct ftl_cadence {
  ftl_cadence_config cfg;
  double alpha0, beta0; /* Gamma prior: α₀ events over β₀ rank-hours */
  double k, exposure_h; /* observed failures and rank-hours */
  ring stalls, durables;
  timed_ring restarts;
  int64_t restart_seq;    /* orders in-process restarts after one another */
  double step_s;          /* EWMA; 0 until known */
  int64_t last_ckpt_step; /* the next interval counts from here */
  uint64_t *keys;         /* set of records already loaded (kind, job, attempt, wall_us), for dedup */
  size_t n_keys, cap_keys;
  bool dirty, have;
  ftl_cadence_decision dec;
  char text[768];
  /* Levels (ftl_cadence_set_levels): per-level δ and W, failures by class (index: the lowest level
   * that survives them, whatever levels the job has), and the per-level decision. */
  bool have_levels, ldirty, lhave;
  ftl_cadence_levels_config lc;
  ring lstalls[FTL_CADENCE_MAX_LEVELS], ldurables[FTL_CADENCE_MAX_LEVELS];
  double kcls[FTL_CADENCE_MAX_LEVELS];
  int64_t since[FTL_CADENCE_MAX_LEVELS]; /* checkpoints since the last one of level ≥ i+1 */
  ftl_cadence_level_decision ldec;
  /* Per host (ftl_cadence_set_gang_hosts): the ledgers' failures and exposure by host, and the
   * gang's hosts; NULL / 0 until a record names a host, or no gang was given. */
  cd_host_table *host_tally;
  ftl_cadence_gang_host *gang;
  size_t n_gang;
};

void ftl_cadence_config_init(ftl_cadence_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->world_size = 1;
  cfg->fleet_rate = DEFAULT_FLEET_RATE;
  cfg->prior_events = DEFAULT_PRIOR_EVENTS;
  cfg->stall_s = DEFAULT_STALL_S;
  cfg->restart_s = DEFAULT_RESTART_S;
  cfg->window = DEFAULT_WINDOW;
}

static bool nonneg(double x) { return isfinite(x) && x >= 0; }

ftl_err ftl_cadence_create(const ftl_cadence_config *cfg, ftl_cadence **out, ftl_diag *d) {
  if (!out) return ftl_diag_fail(d, FTL_ERR_INVAL, "cadence: no output handle");
  *out = NULL;
  if (!cfg) return ftl_diag_fail(d, FTL_ERR_INVAL, "cadence: no config");
  if (cfg->world_size < 1)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "cadence: world_size %lld must be at least 1", (long long)cfg->world_size);
  const struct {
    const char *name;
    double v;
  } nums[] = {{"fleet_rate", cfg->fleet_rate},
              {"prior_events", cfg->prior_events},
              {"stall_s", cfg->stall_s},
              {"durable_s", cfg->durable_s},
              {"restart_s", cfg->restart_s},
              {"step_s", cfg->step_s},
              {"preempt_notice_s", cfg->preempt_notice_s},
              {"preempt_max_loss_s", cfg->preempt_max_loss_s},
              {"pin_s", cfg->pin_s}};
  for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
    if (!nonneg(nums[i].v))
      return ftl_diag_fail(d, FTL_ERR_INVAL, "cadence: %s = %g must be a finite number ≥ 0", nums[i].name, nums[i].v);
  if (cfg->pin_steps < 0)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "cadence: pin_steps %lld must be ≥ 0", (long long)cfg->pin_steps);
  if (cfg->window < 0 || cfg->window > MAX_WINDOW)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "cadence: window %d must be in [0, %d]", cfg->window, MAX_WINDOW);

  ftl_cadence *c = ftl_calloc(1, sizeof *c);
  if (!c) return ftl_diag_fail(d, FTL_ERR_NOMEM, "cadence: out of memory");
  c->cfg = *cfg;
  if (c->cfg.fleet_rate == 0) c->cfg.fleet_rate = DEFAULT_FLEET_RATE;
  if (c->cfg.prior_events == 0) c->cfg.prior_events = DEFAULT_PRIOR_EVENTS;
  if (c->cfg.stall_s == 0) c->cfg.stall_s = DEFAULT_STALL_S;
  if (c->cfg.restart_s == 0) c->cfg.restart_s = DEFAULT_RESTART_S;
  if (c->cfg.window == 0) c->cfg.window = DEFAULT_WINDOW;
  c->alpha0 = c->cfg.prior_events;
  c->beta0 = c->cfg.prior_events / c->cfg.fleet_rate;
  c->step_s = c->cfg.step_s;
  c->dirty = c->ldirty = true;
  *out = c;
  return FTL_OK;
}

void ftl_cadence_destroy(ftl_cadence *c) {
  if (!c) return;
  cd_host_table_free(c->host_tally);
  ftl_free(c->gang);
  ftl_free(c->keys);
  ftl_free(c);
}

static void ring_push(ring *r, int window, double v) {
  r->v[r->next] = v;
  r->next = (r->next + 1) % window;
  if (r->n < window) r->n++;
}

static void timed_push(timed_ring *r, int window, int64_t at, double v) {
  int slot = r->n;
  if (r->n >= window) {
    slot = 0;
    for (int i = 1; i < r->n; i++)
      if (r->at[i] < r->at[slot]) slot = i;
    if (at <= r->at[slot]) return; /* older than the whole window */
  } else {
    r->n++;
  }
  r->v[slot] = v;
  r->at[slot] = at;
}

/* The median of the window: robust to the one slow checkpoint (cold cache, a busy disk) or the one
 * slow restart (a host that took long to reboot) that would drag a mean for a long time. */
static double median(const double *v, int n) {
  double s[MAX_WINDOW];
  memcpy(s, v, (size_t)n * sizeof s[0]);
  for (int i = 1; i < n; i++) { /* insertion sort: n ≤ 64 */
    double x = s[i];
    int j = i - 1;
    while (j >= 0 && s[j] > x) {
      s[j + 1] = s[j];
      j--;
    }
    s[j + 1] = x;
  }
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static double ring_median(const ring *r) { return median(r->v, r->n); }

ftl_err ftl_cadence_observe_checkpoint(ftl_cadence *c, int64_t step, double stall_s, double durable_s) {
  if (!c || !nonneg(stall_s) || !isfinite(durable_s) || step < 0) return FTL_ERR_INVAL;
  ring_push(&c->stalls, c->cfg.window, stall_s);
  if (durable_s >= 0) ring_push(&c->durables, c->cfg.window, durable_s);
  c->last_ckpt_step = step;
  c->dirty = c->ldirty = true;
  return FTL_OK;
}

ftl_err ftl_cadence_observe_durable(ftl_cadence *c, double durable_s) {
  if (!c || !nonneg(durable_s)) return FTL_ERR_INVAL;
  ring_push(&c->durables, c->cfg.window, durable_s);
  c->dirty = c->ldirty = true;
  return FTL_OK;
}

ftl_err ftl_cadence_observe_steps(ftl_cadence *c, int64_t n_steps, double total_s) {
  if (!c || n_steps < 1 || !nonneg(total_s)) return FTL_ERR_INVAL;
  double mean = total_s / (double)n_steps;
  if (c->step_s <= 0) {
    c->step_s = mean;
    c->dirty = c->ldirty = true; /* the first step time makes a decision possible */
  } else {
    /* n steps of the same mean weigh like n single updates of the EWMA. */
    double w = n_steps >= 200 ? 1.0 : 1.0 - pow(1.0 - STEP_EWMA, (double)n_steps);
    c->step_s += w * (mean - c->step_s);
  }
  return FTL_OK;
}

ftl_err ftl_cadence_observe_exposure(ftl_cadence *c, double rank_hours) {
  if (!c || !nonneg(rank_hours)) return FTL_ERR_INVAL;
  c->exposure_h += rank_hours;
  return FTL_OK;
}

ftl_err ftl_cadence_observe_failure(ftl_cadence *c) {
  if (!c) return FTL_ERR_INVAL;
  c->k += 1;
  c->kcls[FTL_CADENCE_LEVEL_L3 - 1] += 1; /* no class known: the safe side */
  c->dirty = c->ldirty = true;
  return FTL_OK;
}

ftl_err ftl_cadence_observe_restart(ftl_cadence *c, int64_t restored_step, double restart_s) {
  if (!c || restored_step < 0 || !isfinite(restart_s)) return FTL_ERR_INVAL;
  if (restart_s >= 0) timed_push(&c->restarts, c->cfg.window, IN_PROCESS_AT + c->restart_seq++, restart_s);
  c->last_ckpt_step = restored_step;
  c->dirty = c->ldirty = true;
  return FTL_OK;
}

ftl_err ftl_cadence_restart_estimate(ftl_cadence *c, double *restart_s_out, int *samples_out) {
  if (!c) return FTL_ERR_INVAL;
  if (restart_s_out) *restart_s_out = c->restarts.n > 0 ? median(c->restarts.v, c->restarts.n) : c->cfg.restart_s;
  if (samples_out) *samples_out = c->restarts.n;
  return FTL_OK;
}

ftl_err ftl_cadence_set_world_size(ftl_cadence *c, int64_t world_size) {
  if (!c || world_size < 1) return FTL_ERR_INVAL;
  c->cfg.world_size = world_size;
  c->dirty = c->ldirty = true;
  return FTL_OK;
}

ftl_err ftl_cadence_pin(ftl_cadence *c, int64_t steps, double seconds) {
  if (!c || steps < 0 || !nonneg(seconds)) return FTL_ERR_INVAL;
  c->cfg.pin_steps = steps;
  c->cfg.pin_s = steps > 0 ? 0 : seconds;
  c->dirty = c->ldirty = true;
  return FTL_OK;
}

/* Seconds to whole steps, rounded to nearest, at least 1, without overflowing int64. */
static int64_t to_steps(double seconds, double step_s) {
  double n = floor(seconds / step_s + 0.5);
  if (!(n >= 1)) return 1;
  if (n > 1e15) return (int64_t)1e15;
  return (int64_t)n;
}

/* "9.8 min", "34 h", "0.31 s": the unit a person would say. */
static void human_time(char *buf, size_t size, double s) {
  ftl_err rc;
  if (s < 90)
    rc = ftl_fmt(buf, size, "%.2g s", s);
  else if (s < 5400)
    rc = ftl_fmt(buf, size, "%.3g min", s / 60);
  else if (s < 86400 * 10)
    rc = ftl_fmt(buf, size, "%.3g h", s / 3600);
  else
    rc = ftl_fmt(buf, size, "%.3g days", s / 86400);
  if (rc) buf[0] = '\0';
}

/* Appends to the explanation; a sentence cut at the buffer's end still reads, so truncation is
 * accepted here rather than reported. */
static void text_add(ftl_cadence *c, size_t *used, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void text_add(ftl_cadence *c, size_t *used, const char *fmt, ...) {
  if (*used >= sizeof c->text - 1) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(c->text + *used, sizeof c->text - *used, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  *used += (size_t)n < sizeof c->text - *used ? (size_t)n : sizeof c->text - 1 - *used;
}

/* The gang's rate from its hosts (1× the pooled rate without a gang list). */
static cd_gang_rate gang_rate(const ftl_cadence *c, double pooled) {
  if (c->n_gang == 0) return (cd_gang_rate){.factor = 1, .worst_rate = pooled};
  return cd_host_gang_rate(c->host_tally, c->gang, c->n_gang, c->cfg.world_size, c->alpha0, pooled);
}

/* What the hosts' histories did to M, in the sentence. */
static void explain_gang(ftl_cadence *c, size_t *used, const cd_gang_rate *g) {
  const ftl_cadence_gang_host *w = &c->gang[g->worst];
  if (g->factor > 0.995 && g->factor < 1.005) {
    if (c->n_gang == 1)
      text_add(c, used, "; its host has no history of its own that moves it");
    else
      text_add(c, used, "; its %zu hosts have no history of their own that moves it", c->n_gang);
    return;
  }
  char whose[48];
  if (c->n_gang == 1)
    (void)ftl_fmt(whose, sizeof whose, "its host's own history makes");
  else
    (void)ftl_fmt(whose, sizeof whose, "the %zu hosts' own histories make", c->n_gang);
  text_add(c, used, "; %s the gang's rate %.3g× the pooled one (worst: %s, %.0f failure%s in %.3g rank-hours)", whose,
           g->factor, w->host, g->worst_k, g->worst_k == 1 ? "" : "s", g->worst_e);
}

static void derive(ftl_cadence *c) {
  ftl_cadence_decision *dec = &c->dec;
  memset(dec, 0, sizeof *dec);
  dec->stall_measured = c->stalls.n > 0;
  dec->durable_measured = c->durables.n > 0;
  dec->restart_measured = c->restarts.n > 0;
  dec->stall_s = dec->stall_measured ? ring_median(&c->stalls) : c->cfg.stall_s;
  dec->durable_s = dec->durable_measured ? ring_median(&c->durables) : c->cfg.durable_s;
  (void)ftl_cadence_restart_estimate(c, &dec->restart_s, NULL);
  dec->step_s = c->step_s;
  dec->failures = c->k;
  dec->rank_hours = c->exposure_h;
  double pooled = (c->alpha0 + c->k) / (c->beta0 + c->exposure_h);
  cd_gang_rate gang = gang_rate(c, pooled);
  dec->rate = pooled * gang.factor;
  dec->mtbf_h = 1.0 / (dec->rate * (double)c->cfg.world_size);
  double m_s = dec->mtbf_h * 3600.0;
  double step = dec->step_s;

  /* The optimum, then the clamps in order of precedence: the preemption bound lowers it, W raises
   * it (two saves in flight would stall the loop anyway, so W wins), and a step is the least. */
  dec->daly_s = ftl_cadence_daly_s(dec->stall_s, m_s);
  double tau = fmin(dec->daly_s, MAX_INTERVAL_S);
  double save_s = dec->stall_s + dec->durable_s;
  bool save_fits = c->cfg.preempt_notice_s > 0 && save_s <= c->cfg.preempt_notice_s;
  int64_t steps = to_steps(tau, step);
  if (tau / step < 0.5) dec->clamps |= FTL_CADENCE_CLAMP_ONE_STEP;
  if (c->cfg.preempt_max_loss_s > 0 && !save_fits && (double)steps * step > c->cfg.preempt_max_loss_s) {
    steps = (int64_t)floor(c->cfg.preempt_max_loss_s / step);
    dec->clamps |= FTL_CADENCE_CLAMP_PREEMPT;
  }
  if (dec->durable_s > 0 && (double)steps * step < dec->durable_s) {
    steps = (int64_t)ceil(dec->durable_s / step);
    dec->clamps |= FTL_CADENCE_CLAMP_DURABLE;
    dec->clamps &= ~(unsigned)FTL_CADENCE_CLAMP_PREEMPT;
  }
  if (steps < 1) { /* a preemption bound shorter than a step */
    steps = 1;
    dec->clamps |= FTL_CADENCE_CLAMP_ONE_STEP;
  }
  if (dec->clamps & FTL_CADENCE_CLAMP_DURABLE) dec->clamps &= ~(unsigned)FTL_CADENCE_CLAMP_ONE_STEP;
  dec->optimum_steps = steps;
  dec->waste_optimum = ftl_cadence_waste((double)steps * step, dec->stall_s, dec->durable_s, dec->restart_s, m_s);

  dec->pinned = c->cfg.pin_steps > 0 || c->cfg.pin_s > 0;
  if (c->cfg.pin_steps > 0)
    dec->interval_steps = c->cfg.pin_steps;
  else if (c->cfg.pin_s > 0)
    dec->interval_steps = to_steps(c->cfg.pin_s, step);
  else
    dec->interval_steps = steps;
  dec->interval_s = (double)dec->interval_steps * step;
  dec->waste = ftl_cadence_waste(dec->interval_s, dec->stall_s, dec->durable_s, dec->restart_s, m_s);

  /* The sentence. */
  char t_int[32], t_opt[32], t_d[32], t_w[32], t_r[32], t_m[32], t_step[32];
  human_time(t_int, sizeof t_int, dec->interval_s);
  human_time(t_opt, sizeof t_opt, (double)dec->optimum_steps * step);
  human_time(t_d, sizeof t_d, dec->stall_s);
  human_time(t_w, sizeof t_w, dec->durable_s);
  human_time(t_r, sizeof t_r, dec->restart_s);
  human_time(t_m, sizeof t_m, m_s);
  human_time(t_step, sizeof t_step, step);
  size_t used = 0;
  c->text[0] = '\0';
  text_add(c, &used, "checkpoint every %lld step%s (about %s%s): ", (long long)dec->interval_steps,
           dec->interval_steps == 1 ? "" : "s", t_int, dec->pinned ? ", pinned" : "");
  text_add(c, &used,
           "δ = %s%s, W = %s%s, R = %s%s, step = %s, M = %s from %.0f failure%s in %.*f rank-hours "
           "and the prior (%.2g per rank-hour, weight %.3g) for %lld ranks",
           t_d, dec->stall_measured ? "" : " (assumed)", t_w, dec->durable_measured ? "" : " (assumed)", t_r,
           dec->restart_measured ? " (measured)" : " (assumed)", t_step, t_m, dec->failures,
           dec->failures == 1 ? "" : "s",
           dec->rank_hours >= 10 || dec->rank_hours == 0 ? 0
           : dec->rank_hours >= 1                        ? 1
                                                         : 3,
           dec->rank_hours, c->cfg.fleet_rate, c->alpha0, (long long)c->cfg.world_size);
  if (c->n_gang > 0) explain_gang(c, &used, &gang);
  if (dec->pinned) {
    text_add(c, &used, "; expected waste %.3g%% against %.3g%% at the derived every %lld steps (about %s)",
             100 * dec->waste, 100 * dec->waste_optimum, (long long)dec->optimum_steps, t_opt);
    if (dec->durable_s > 0 && dec->interval_s < dec->durable_s)
      text_add(c, &used, "; the pin is shorter than W, so each save waits for the previous one");
  } else {
    char t_daly[32];
    human_time(t_daly, sizeof t_daly, dec->daly_s);
    text_add(c, &used, "; expected waste %.3g%%", 100 * dec->waste);
    if (dec->clamps & FTL_CADENCE_CLAMP_PREEMPT) {
      char t_n[32], t_s[32];
      human_time(t_n, sizeof t_n, c->cfg.preempt_max_loss_s);
      human_time(t_s, sizeof t_s, save_s);
      if (c->cfg.preempt_notice_s > 0) {
        char t_p[32];
        human_time(t_p, sizeof t_p, c->cfg.preempt_notice_s);
        text_add(c, &used, "; Daly's %s capped at %s: a save (δ + W = %s) does not fit in the %s preemption notice",
                 t_daly, t_n, t_s, t_p);
      } else {
        text_add(c, &used, "; Daly's %s capped at %s: no preemption notice to save in", t_daly, t_n);
      }
    }
    if (dec->clamps & FTL_CADENCE_CLAMP_DURABLE)
      text_add(c, &used, "; Daly's %s raised to W = %s so that one checkpoint at most is in flight", t_daly, t_w);
    if (dec->clamps & FTL_CADENCE_CLAMP_ONE_STEP) text_add(c, &used, "; Daly's %s is shorter than a step", t_daly);
  }
  c->dirty = false;
  c->have = true;
}

ftl_err ftl_cadence_decide(ftl_cadence *c, ftl_cadence_decision *out) {
  if (!c) return FTL_ERR_INVAL;
  if (!(c->step_s > 0)) return FTL_ERR_STATE;
  if (c->dirty || !c->have) derive(c);
  if (out) *out = c->dec;
  return FTL_OK;
}

ftl_err ftl_cadence_interval_steps(ftl_cadence *c, int64_t *steps_out) {
  if (!steps_out) return FTL_ERR_INVAL;
  ftl_err rc = ftl_cadence_decide(c, NULL);
  if (rc) return rc;
  *steps_out = c->dec.interval_steps;
  return FTL_OK;
}

ftl_err ftl_cadence_due(ftl_cadence *c, int64_t step, bool *due_out) {
  if (!due_out) return FTL_ERR_INVAL;
  ftl_err rc = ftl_cadence_decide(c, NULL);
  if (rc) return rc;
  *due_out = step - c->last_ckpt_step >= c->dec.interval_steps;
  return FTL_OK;
}

const char *ftl_cadence_explain(ftl_cadence *c) {
  if (!c) return "no cadence controller";
  if (ftl_cadence_decide(c, NULL) != FTL_OK) return "no checkpoint interval yet: no step time measured";
  return c->text;
}

/* ---- levels --------------------------------------------------------------------------------- */

/* The prior's split of the fleet rate among the classes when none is given: most interruptions
 * take a process (a crash, a hang, an Xid that kills a rank), fewer a host, few the whole job. */
static const double DEFAULT_SHARE[FTL_CADENCE_MAX_LEVELS] = {0.5, 0.4, 0.1};

void ftl_cadence_levels_config_init(ftl_cadence_levels_config *lc) {
  memset(lc, 0, sizeof *lc);
  lc->levels = FTL_CADENCE_LEVELS_ALL;
  memcpy(lc->prior_share, DEFAULT_SHARE, sizeof lc->prior_share);
}

ftl_err ftl_cadence_set_levels(ftl_cadence *c, const ftl_cadence_levels_config *lc) {
  if (!c || !lc) return FTL_ERR_INVAL;
  /* L3 is the shared run directory, the one level every job has. */
  if ((lc->levels & ~FTL_CADENCE_LEVELS_ALL) || !(lc->levels & FTL_CADENCE_LEVEL_BIT(FTL_CADENCE_LEVEL_L3)))
    return FTL_ERR_INVAL;
  double shares = 0;
  for (int i = 0; i < FTL_CADENCE_MAX_LEVELS; i++) {
    if (!nonneg(lc->stall_s[i]) || !nonneg(lc->durable_s[i]) || !nonneg(lc->restart_s[i]) ||
        !nonneg(lc->prior_share[i]))
      return FTL_ERR_INVAL;
    shares += lc->prior_share[i];
  }
  c->lc = *lc;
  if (shares == 0) memcpy(c->lc.prior_share, DEFAULT_SHARE, sizeof c->lc.prior_share);
  c->have_levels = true;
  c->ldirty = true;
  return FTL_OK;
}

static bool has_level(const ftl_cadence *c, int level) {
  return level >= FTL_CADENCE_LEVEL_L1 && level <= FTL_CADENCE_MAX_LEVELS &&
         (c->lc.levels & FTL_CADENCE_LEVEL_BIT(level));
}

ftl_err ftl_cadence_observe_checkpoint_level(ftl_cadence *c, int level, double stall_s, double durable_s) {
  if (!c || !c->have_levels || !has_level(c, level) || !nonneg(stall_s) || !isfinite(durable_s)) return FTL_ERR_INVAL;
  ring_push(&c->lstalls[level - 1], c->cfg.window, stall_s);
  for (int l = FTL_CADENCE_LEVEL_L1; l <= FTL_CADENCE_MAX_LEVELS; l++)
    c->since[l - 1] = l <= level ? 0 : c->since[l - 1] + 1;
  if (durable_s >= 0) ring_push(&c->ldurables[level - 1], c->cfg.window, durable_s);
  c->ldirty = true;
  return FTL_OK;
}

ftl_err ftl_cadence_observe_failure_level(ftl_cadence *c, int level) {
  if (!c || level < FTL_CADENCE_LEVEL_L1 || level > FTL_CADENCE_MAX_LEVELS) return FTL_ERR_INVAL;
  c->k += 1;
  c->kcls[level - 1] += 1;
  c->dirty = c->ldirty = true;
  return FTL_OK;
}

static void derive_levels(ftl_cadence *c) {
  ftl_cadence_level_decision *ld = &c->ldec;
  memset(ld, 0, sizeof *ld);
  ld->levels = c->lc.levels;
  ld->step_s = c->step_s;
  double restart_default;
  (void)ftl_cadence_restart_estimate(c, &restart_default, NULL);
  /* Per class, the same Gamma prior as the single-level estimate, split by the prior's shares:
   * λ̂_i = (α₀·share_i + k_i)/(β₀ + E). With no failures seen the classes sum to the fleet rate. */
  double shares = 0, class_rate[FTL_CADENCE_MAX_LEVELS];
  for (int i = 0; i < FTL_CADENCE_MAX_LEVELS; i++)
    shares += c->lc.prior_share[i];
  /* The gang's hosts scale every class alike (their histories are not split by class). */
  double factor = gang_rate(c, (c->alpha0 + c->k) / (c->beta0 + c->exposure_h)).factor;
  for (int i = 0; i < FTL_CADENCE_MAX_LEVELS; i++)
    class_rate[i] = factor * (c->alpha0 * c->lc.prior_share[i] / shares + c->kcls[i]) / (c->beta0 + c->exposure_h);

  /* The model's levels are the job's, lowest first; a class goes to the lowest one that survives it. */
  ftl_cadence_level_cost lv[FTL_CADENCE_MAX_LEVELS];
  int model_level[FTL_CADENCE_MAX_LEVELS], n = 0;
  memset(lv, 0, sizeof lv);
  for (int l = FTL_CADENCE_LEVEL_L1; l <= FTL_CADENCE_MAX_LEVELS; l++) {
    if (!has_level(c, l)) continue;
    int i = l - 1;
    ld->stall_s[i] = c->lstalls[i].n > 0 ? ring_median(&c->lstalls[i])
                     : c->lc.stall_s[i] > 0 ? c->lc.stall_s[i]
                                            : c->cfg.stall_s;
    ld->durable_s[i] = c->ldurables[i].n > 0 ? ring_median(&c->ldurables[i])
                       : c->lc.durable_s[i] > 0 ? c->lc.durable_s[i]
                                                : c->cfg.durable_s;
    ld->restart_s[i] = c->lc.restart_s[i] > 0 ? c->lc.restart_s[i] : restart_default;
    lv[n].stall_s = ld->stall_s[i];
    lv[n].durable_s = ld->durable_s[i];
    lv[n].restart_s = ld->restart_s[i];
    model_level[n++] = l;
  }
  for (int cls = FTL_CADENCE_LEVEL_L1; cls <= FTL_CADENCE_MAX_LEVELS; cls++) {
    int at = 0;
    while (at < n - 1 && model_level[at] < cls)
      at++;
    int i = model_level[at] - 1;
    ld->rate[i] += class_rate[cls - 1];
    ld->failures[i] += c->kcls[cls - 1];
    lv[at].rate += class_rate[cls - 1] * (double)c->cfg.world_size / 3600.0; /* per second of the gang */
  }
  if (ftl_cadence_pattern_optimize(lv, n, &ld->plan) != FTL_OK) return; /* no failure rate: nothing to plan */
  ftl_cadence_pattern single;
  if (ftl_cadence_pattern_single_level(lv, n, &single) == FTL_OK) ld->waste_single = single.waste;

  /* Whole steps: level 1 rounded to nearest, at least one step and at least the W of every level
   * written (one save in flight: the checkpoint after one of level k comes a level-1 interval later,
   * and would wait for it), each level above a whole multiple of the one below. */
  double step = c->step_s;
  int64_t steps = to_steps(fmin(ld->plan.tau_s, MAX_INTERVAL_S), step);
  double w_max = 0;
  for (int k = 0; k < n && (k == 0 || ld->plan.every[k] > 0); k++)
    w_max = fmax(w_max, lv[k].durable_s);
  if (w_max > 0 && (double)steps * step < w_max) steps = (int64_t)ceil(w_max / step);
  int64_t every[FTL_CADENCE_MAX_LEVELS] = {1, 0, 0};
  ld->interval_steps[model_level[0] - 1] = steps;
  for (int k = 1; k < n && ld->plan.every[k] > 0; k++) {
    int64_t m = ld->plan.every[k];
    if (steps > (int64_t)1e15 / m) break; /* as good as never */
    every[k] = m;
    steps *= m;
    ld->interval_steps[model_level[k] - 1] = steps;
  }
  ld->waste = ftl_cadence_pattern_waste(lv, n, (double)ld->interval_steps[model_level[0] - 1] * step, every);
  c->ldirty = false;
  c->lhave = true;
}

ftl_err ftl_cadence_decide_levels(ftl_cadence *c, ftl_cadence_level_decision *out) {
  if (!c) return FTL_ERR_INVAL;
  if (!c->have_levels || !(c->step_s > 0)) return FTL_ERR_STATE;
  if (c->ldirty || !c->lhave) derive_levels(c);
  if (!c->lhave) return FTL_ERR_STATE;
  if (out) *out = c->ldec;
  return FTL_OK;
}

ftl_err ftl_cadence_due_level(ftl_cadence *c, int64_t step, int *level_out) {
  if (!level_out) return FTL_ERR_INVAL;
  *level_out = FTL_CADENCE_LEVEL_NONE;
  ftl_err rc = ftl_cadence_decide_levels(c, NULL);
  if (rc) return rc;
  int lowest = FTL_CADENCE_LEVEL_NONE;
  for (int l = FTL_CADENCE_LEVEL_L1; l <= FTL_CADENCE_MAX_LEVELS && !lowest; l++)
    if (c->ldec.interval_steps[l - 1] > 0) lowest = l;
  if (!lowest || step <= 0) return FTL_OK;
  /* The lowest level on an absolute grid: every rank that agrees on its interval agrees on the steps.
   * The levels above it by count (checkpoints since the last one of that level or higher, from
   * observe_checkpoint_level), not by dividing the step: the intervals move as δ, W and the rates
   * are learned, and a grid of a moving multiple would seldom meet the step at all. */
  int64_t base = c->ldec.interval_steps[lowest - 1];
  if (step % base != 0) return FTL_OK;
  int level = lowest;
  for (int l = lowest + 1; l <= FTL_CADENCE_MAX_LEVELS; l++) {
    int64_t every = c->ldec.interval_steps[l - 1];
    if (every > 0 && c->since[l - 1] + 1 >= every / base) level = l;
  }
  *level_out = level;
  return FTL_OK;
}

/* ---- ledger records ------------------------------------------------------------------------- */

/* FNV-1a over the fields that name one record, so the same failure (exposure, restart) read from the
 * run ledger and from the fleet ledger, or from the same ledger loaded twice, counts once. */
static uint64_t record_key(const ftl_cadence_record *r) {
  uint64_t h = 1469598103934665603ull;
  h = (h ^ (uint64_t)r->kind) * 1099511628211ull;
  const unsigned char *p = (const unsigned char *)r->job;
  for (; *p; p++)
    h = (h ^ *p) * 1099511628211ull;
  int64_t nums[2] = {r->attempt, r->wall_us};
  const unsigned char *b = (const unsigned char *)nums;
  for (size_t i = 0; i < sizeof nums; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* An open-addressing set of keys (0 marks an empty slot, so key 0 is stored as 1), kept at most half
 * full: a fleet ledger of a million records is loaded in linear time. Returns 1 if the key was new
 * (and is now remembered), 0 if seen, -1 when out of memory. */
static int remember_key(ftl_cadence *c, uint64_t key) {
  if (key == 0) key = 1;
  if (2 * (c->n_keys + 1) > c->cap_keys) {
    size_t cap = c->cap_keys ? c->cap_keys * 2 : 256;
    uint64_t *k = ftl_calloc(cap, sizeof *k);
    if (!k) return -1;
    for (size_t i = 0; i < c->cap_keys; i++) {
      if (!c->keys[i]) continue;
      size_t j = (size_t)c->keys[i] & (cap - 1);
      while (k[j])
        j = (j + 1) & (cap - 1);
      k[j] = c->keys[i];
    }
    ftl_free(c->keys);
    c->keys = k;
    c->cap_keys = cap;
  }
  size_t j = (size_t)key & (c->cap_keys - 1);
  while (c->keys[j]) {
    if (c->keys[j] == key) return 0;
    j = (j + 1) & (c->cap_keys - 1);
  }
  c->keys[j] = key;
  c->n_keys++;
  return 1;
}

int cd_take_record(ftl_cadence *c, const ftl_cadence_record *rec) {
  /* Only a record that names its moment can be recognised again; one without wall_us counts. */
  int fresh = rec->wall_us != 0 ? remember_key(c, record_key(rec)) : 1;
  if (fresh <= 0) return fresh;
  if (rec->kind == FTL_CADENCE_REC_EXPOSURE) {
    c->exposure_h += rec->rank_hours;
  } else if (rec->kind == FTL_CADENCE_REC_RESTART) {
    /* A record without wall_us is taken as newer than those with one (but older than in-process
     * restarts): it cannot be placed, and it was read after them. */
    timed_push(&c->restarts, c->cfg.window, rec->wall_us > 0 ? rec->wall_us : IN_PROCESS_AT - 1, rec->restart_s);
  } else {
    c->k += 1;
    if (rec->host[0] && cd_take_host(c, rec->host, 1, 0) < 0) return -1;
    int cls = ftl_cadence_cause_level(rec->cause, FTL_CADENCE_LEVELS_ALL);
    c->kcls[(cls >= FTL_CADENCE_LEVEL_L1 ? cls : FTL_CADENCE_LEVEL_L3) - 1] += 1;
  }
  return 1;
}

void cd_rederive(ftl_cadence *c) { c->dirty = c->ldirty = true; }

int cd_take_host(ftl_cadence *c, const char *host, double failures, double rank_hours) {
  if (!c->host_tally && !(c->host_tally = cd_host_table_new())) return -1;
  return cd_host_add(c->host_tally, host, failures, rank_hours) < 0 ? -1 : 0;
}

ftl_err ftl_cadence_set_gang_hosts(ftl_cadence *c, const ftl_cadence_gang_host *hosts, size_t n) {
  if (!c || (n > 0 && !hosts)) return FTL_ERR_INVAL;
  for (size_t i = 0; i < n; i++)
    if (hosts[i].ranks < 1 || !hosts[i].host[0] || !memchr(hosts[i].host, '\0', sizeof hosts[i].host))
      return FTL_ERR_INVAL;
  ftl_cadence_gang_host *copy = NULL;
  if (n > 0) {
    copy = ftl_calloc(n, sizeof *copy);
    if (!copy) return FTL_ERR_NOMEM;
    memcpy(copy, hosts, n * sizeof *copy);
  }
  ftl_free(c->gang);
  c->gang = copy;
  c->n_gang = n;
  c->dirty = c->ldirty = true;
  return FTL_OK;
}
