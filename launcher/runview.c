/* launcher/runview.c: folds a run's events into the operator's view (see runview.h).
 *
 * Map: init and free; the series' growth and the JSON field readers; the folds of several events
 * (an attempt's start-up and end, a restart, a commit, progress, the cadence, the standby, GPU
 * health and its changes, stragglers, goodput, MFU); ln_runview_add, which sends each event to its
 * fold; reading the event log; the queries (the last commit, a rank's GPU, goodput so far, MFU). */
#include "launcher/runview.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/jsonl.h"
#include "core/rundir.h"
#include "ftl/core.h"
#include "launcher/goodput.h"
#include "launcher/gpu_health.h"
#include "launcher/launcher.h"

/* The event log of a long run can be large; a view of more than this is refused rather than
 * read into memory whole. */
#define RV_MAX_LOG_BYTES ((size_t)1 << 30)

void ln_runview_init(ln_runview *rv, int keep_series) {
  memset(rv, 0, sizeof *rv);
  rv->keep_series = keep_series;
  rv->exit_code = -1;
  rv->committed_step = -1;
  rv->latest.step = -1;
  rv->latest.loss = NAN;
  rv->latest.tokens_per_s = -1;
  rv->latest.mfu = -1;
  ln_mfu_run_init(&rv->mfu_finals);
}

void ln_runview_free(ln_runview *rv) {
  if (!rv) return;
  ftl_free(rv->attempts);
  ftl_free(rv->samples);
  ftl_free(rv->commits);
  ftl_free(rv->restart_marks);
  ftl_free(rv->cadences);
  ftl_free(rv->gpus);
  ftl_free(rv->gpu_changes);
  ftl_free(rv->stragglers);
  memset(rv, 0, sizeof *rv);
}

/* Appends one element of size `size` to *arr (grown by doubling); NULL when out of memory. */
static void *grow(void **arr, int *n, int *cap, size_t size) {
  if (*n == *cap) {
    int ncap = *cap ? *cap * 2 : 16;
    void *p = ftl_realloc(*arr, (size_t)ncap * size);
    if (!p) return NULL;
    *arr = p;
    *cap = ncap;
  }
  char *slot = (char *)*arr + (size_t)(*n)++ * size;
  memset(slot, 0, size);
  return slot;
}

/* Numbers from the log are clamped to +-2^53 (counts and microseconds far beyond any real run), so
 * the arithmetic on them (differences, ETA) can never overflow, whatever bytes the file holds. */
#define RV_INT_LIMIT 9007199254740992.0

static int64_t jint(const json_t *o, const char *k, int64_t fb) {
  const json_t *v = json_object_get(o, k);
  double x;
  if (json_is_integer(v))
    x = (double)json_integer_value(v);
  else if (json_is_real(v))
    x = json_real_value(v);
  else
    return fb;
  if (!(x == x)) return fb; /* NaN */
  if (x > RV_INT_LIMIT) x = RV_INT_LIMIT;
  if (x < -RV_INT_LIMIT) x = -RV_INT_LIMIT;
  return (int64_t)x;
}

/* Attempt numbers, restarts, exit codes: small by nature; anything else is clamped into an int. */
static int jsmall(const json_t *o, const char *k, int fb) {
  int64_t v = jint(o, k, fb);
  return v > 1000000000 ? 1000000000 : v < -1000000000 ? -1000000000 : (int)v;
}

static double jnum(const json_t *o, const char *k, double fb) {
  const json_t *v = json_object_get(o, k);
  return json_is_number(v) ? json_number_value(v) : fb;
}

static void jstr(const json_t *o, const char *k, char *out, size_t size) {
  const json_t *v = json_object_get(o, k);
  snprintf(out, size, "%s", json_is_string(v) ? json_string_value(v) : "");
}

/* The attempt record for number n: the latest with that number (a rerun of ftl on the same run
 * directory starts at a new number, so numbers are unique in practice). */
static ln_rv_attempt *find_attempt(ln_runview *rv, int n) {
  for (int i = rv->n_attempts - 1; i >= 0; i--)
    if (rv->attempts[i].attempt == n) return &rv->attempts[i];
  return NULL;
}

/* One standby_* event (what: the part after "standby_"). */
static void add_standby(ln_rv_standby *sb, const char *what, const json_t *line, int attempt, int64_t t) {
  static const struct {
    const char *event, *state;
  } map[] = {{"started", "starting"}, {"parked", "parked"}, {"activated", "activated"}, {"lost", "lost"},
             {"disabled", "off"}};
  for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
    if (strcmp(what, map[i].event) != 0) continue;
    snprintf(sb->state, sizeof sb->state, "%s", map[i].state);
    sb->for_attempt = attempt;
    sb->since_us = t;
    if (i == 0) {
      sb->started++;
      sb->rss_kb = -1;
      sb->preloaded = -1;
      jstr(line, "parks_in", sb->parks_in, sizeof sb->parks_in);
    } else if (i == 1) {
      sb->parked++;
      sb->rss_kb = jint(line, "rss_kb", -1);
      sb->park_ms = jint(line, "park_ms", 0);
      sb->preloaded = jint(line, "preloaded_modules", -1);
    } else if (i == 2) {
      sb->activated++;
    } else {
      /* A standby ended by ftl itself (the job is over, a stop, a placement it cannot serve) was
       * dropped; one that died was lost. */
      int died = i == 3 && json_is_true(json_object_get(line, "died"));
      if (i == 3 && !died) snprintf(sb->state, sizeof sb->state, "dropped");
      if (died) sb->lost++;
      jstr(line, "reason", sb->reason, sizeof sb->reason);
    }
  }
}

/* A GPU's verdict as said in the straggler events' `gpu` object, onto a straggler. */
static void straggler_gpu_from(ln_rv_straggler *s, const json_t *g) {
  if (!json_is_object(g)) return;
  s->gpu = jsmall(g, "index", -1);
  jstr(g, "uuid", s->uuid, sizeof s->uuid);
  jstr(g, "verdict", s->verdict, sizeof s->verdict);
  jstr(g, "reason", s->reason, sizeof s->reason);
}

/* A gpu_health event: each GPU's verdict replaces what its host and index said before (at most 4096
 * GPUs are kept: a run's event log is the user's, and may say anything). A verdict or reason that
 * differs from the GPU's previous one is a change (a first reading only when it is not healthy),
 * and the attempt's stragglers on that GPU take it. */
static void add_gpu_health(ln_runview *rv, const json_t *line, int n, int64_t t) {
  char host[64];
  jstr(line, "host", host, sizeof host);
  const json_t *gpus = json_object_get(line, "gpus");
  size_t i;
  const json_t *g;
  json_array_foreach(gpus, i, g) {
    int index = jsmall(g, "index", -1);
    ln_rv_gpu *slot = NULL;
    for (int k = 0; k < rv->n_gpus && !slot; k++)
      if (rv->gpus[k].index == index && !strcmp(rv->gpus[k].host, host)) slot = &rv->gpus[k];
    /* What it said before: a GPU first seen was healthy as far as anyone knew. */
    char was_verdict[16] = "healthy", was_reason[256] = "";
    if (slot) {
      memcpy(was_verdict, slot->verdict, sizeof was_verdict);
      memcpy(was_reason, slot->reason, sizeof was_reason);
    }
    if (!slot && rv->n_gpus < 4096) {
      slot = grow((void **)&rv->gpus, &rv->n_gpus, &rv->cap_gpus, sizeof *slot);
      if (slot) memset(slot, 0, sizeof *slot);
    }
    if (!slot) continue;
    snprintf(slot->host, sizeof slot->host, "%s", host);
    slot->index = index;
    jstr(g, "uuid", slot->uuid, sizeof slot->uuid);
    jstr(g, "name", slot->name, sizeof slot->name);
    jstr(g, "verdict", slot->verdict, sizeof slot->verdict);
    jstr(g, "reason", slot->reason, sizeof slot->reason);
    slot->since_us = t;
    int changed = strcmp(was_verdict, slot->verdict) != 0 || (was_reason[0] && strcmp(was_reason, slot->reason) != 0);
    if (changed && rv->keep_series && rv->n_gpu_changes < 4096) {
      ln_rv_gpu_change *c = grow((void **)&rv->gpu_changes, &rv->n_gpu_changes, &rv->cap_gpu_changes, sizeof *c);
      if (c) {
        *c = (ln_rv_gpu_change){.t_us = t, .attempt = n, .index = index};
        snprintf(c->host, sizeof c->host, "%s", host);
        snprintf(c->uuid, sizeof c->uuid, "%s", slot->uuid);
        snprintf(c->verdict, sizeof c->verdict, "%s", slot->verdict);
        snprintf(c->reason, sizeof c->reason, "%s", slot->reason);
      }
    }
    for (int k = 0; k < rv->n_stragglers; k++) {
      ln_rv_straggler *s = &rv->stragglers[k];
      if (s->attempt == n && s->gpu == index && !strcmp(s->host, host)) straggler_gpu_from(s, g);
    }
  }
}

/* A straggler event (once per rank and attempt), or a straggler_gpu event: its GPU's verdict said
 * after it. */
static void add_straggler(ln_runview *rv, const json_t *line, int n, int64_t t, int gpu_only) {
  int rank = jsmall(line, "rank", -1);
  ln_rv_straggler *s = NULL;
  if (gpu_only) {
    for (int k = rv->n_stragglers - 1; k >= 0 && !s; k--)
      if (rv->stragglers[k].attempt == n && rv->stragglers[k].rank == rank) s = &rv->stragglers[k];
    if (s) straggler_gpu_from(s, json_object_get(line, "gpu"));
    return;
  }
  if (rv->n_stragglers >= 4096 ||
      !(s = grow((void **)&rv->stragglers, &rv->n_stragglers, &rv->cap_stragglers, sizeof *s)))
    return;
  *s = (ln_rv_straggler){.t_us = t,
                          .attempt = n,
                          .rank = rank,
                          .local_rank = jsmall(line, "local_rank", -1),
                          .compute_ms = jnum(line, "compute_ms", 0),
                          .others_median_ms = jnum(line, "others_median_ms", 0),
                          .ratio = jnum(line, "ratio", 0),
                          .host_suspect = json_is_true(json_object_get(line, "host_suspect")),
                          .gpu = -1};
  if (!(s->ratio > 0) && s->others_median_ms > 0) s->ratio = s->compute_ms / s->others_median_ms;
  jstr(line, "host", s->host, sizeof s->host);
  straggler_gpu_from(s, json_object_get(line, "gpu"));
}

/* ---- one event each ------------------------------------------------------------------------ */

static void add_attempt_start(ln_runview *rv, const json_t *line, int n, int64_t t) {
  ln_rv_attempt *a = grow((void **)&rv->attempts, &rv->n_attempts, &rv->cap_attempts, sizeof *a);
  if (!a) return;
  a->attempt = n;
  a->start_us = t;
  a->last_step = a->committed_step = -1;
  jstr(line, "launcher", a->launcher, sizeof a->launcher);
  if (!rv->job[0]) jstr(line, "job", rv->job, sizeof rv->job);
}

static void add_startup(ln_rv_attempt *a, const json_t *line, int64_t t) {
  static const char *const phases[5] = {"launch_ms", "rendezvous_ms", "mpi_init_ms", "comm_init_ms", "first_step_ms"};
  a->first_step_us = t;
  a->startup_ms = jnum(line, "total_ms", 0);
  for (int i = 0; i < 5; i++) a->phase_ms[i] = jnum(line, phases[i], 0);
}

static void add_attempt_end(ln_rv_attempt *a, const json_t *line, int64_t t) {
  a->end_us = t;
  jstr(line, "outcome", a->outcome, sizeof a->outcome);
  jstr(line, "cause", a->cause, sizeof a->cause);
  jstr(line, "summary", a->summary, sizeof a->summary);
  a->exit_code = jsmall(line, "exit_code", 0);
  a->signal = jsmall(line, "signal", 0);
  int64_t last = jint(line, "last_step", -1); /* heartbeats; a later progress report may know more */
  if (last > a->last_step) a->last_step = last;
  a->committed_step = jint(line, "committed_step", a->committed_step);
}

static void add_restart(ln_runview *rv, ln_rv_attempt *a, const json_t *line, int n, int64_t t) {
  rv->restarts = jsmall(line, "restart", rv->restarts < 1000000000 ? rv->restarts + 1 : rv->restarts);
  rv->max_restarts = jsmall(line, "max_restarts", rv->max_restarts);
  if (a) a->backoff_ms = jnum(line, "backoff_ms", 0);
  if (rv->keep_series) {
    ln_rv_mark *m = grow((void **)&rv->restart_marks, &rv->n_restart_marks, &rv->cap_restart_marks, sizeof *m);
    if (m) *m = (ln_rv_mark){.t_us = t, .attempt = n, .step = a ? a->committed_step : -1};
  }
}

static void add_goodput(ln_runview *rv, const json_t *line) {
  rv->have_goodput = 1;
  rv->gp_wall_ms = jnum(line, "wall_ms", 0);
  rv->gp_productive_ms = jnum(line, "productive_ms", 0);
  rv->gp_startup_ms = jnum(line, "startup_ms", 0);
  rv->gp_stall_ms = jnum(line, "ckpt_stall_ms", 0);
  rv->gp_lost_ms = jnum(line, "lost_work_ms", 0);
  rv->gp_teardown_ms = jnum(line, "teardown_ms", 0);
  rv->gp_backoff_ms = jnum(line, "backoff_ms", 0);
  rv->gp_pct = jnum(line, "goodput_pct", -1); /* absent: not measured (the program reports no steps) */
  rv->gp_unreported_ms = jnum(line, "unreported_ms", 0);
}

/* Rank 0's commit of a step (every rank reports its own; one is the run's). */
static void add_commit(ln_runview *rv, ln_rv_attempt *a, const json_t *line, int n, int64_t t) {
  int64_t step = jint(line, "step", -1);
  if (a && step > a->committed_step) {
    a->committed_step = step;
    a->committed_us = t;
  }
  if (step > rv->committed_step) rv->committed_step = step;
  rv->committed_us = t;
  if (rv->keep_series) {
    ln_rv_mark *m = grow((void **)&rv->commits, &rv->n_commits, &rv->cap_commits, sizeof *m);
    if (m) *m = (ln_rv_mark){.t_us = t, .attempt = n, .step = step};
  }
}

static void add_progress(ln_runview *rv, ln_rv_attempt *a, const json_t *line, int n, int64_t t) {
  ln_rv_sample s = {.t_us = t,
                     .attempt = n,
                     .step = jint(line, "step", -1),
                     .total_steps = jint(line, "total_steps", 0),
                     .loss = jnum(line, "loss", NAN),
                     .tokens_per_s = jnum(line, "tokens_per_s", -1),
                     .mfu = jnum(line, "mfu", -1)};
  if (rv->latest.step < 0 || rv->latest.attempt != n) rv->attempt_first = s;
  rv->latest = s;
  if (a && s.step > a->last_step) a->last_step = s.step;
  if (rv->keep_series) {
    ln_rv_sample *p = grow((void **)&rv->samples, &rv->n_samples, &rv->cap_samples, sizeof *p);
    if (p) *p = s;
  }
}

/* An `mfu` event: the latest figure; an attempt's final one joins the run's sum. */
static void add_mfu(ln_runview *rv, const json_t *line, int n) {
  ln_mfu_figure f;
  int final = 0;
  ln_mfu_figure_from_event(line, &f, &final);
  if (f.ranks == 0) return;
  rv->have_mfu = 1;
  rv->mfu = f;
  rv->mfu_attempt = n;
  rv->mfu_final = final;
  if (final) ln_mfu_run_add(&rv->mfu_finals, &f);
}

static void add_cadence(ln_runview *rv, const json_t *line, int64_t t) {
  ln_rv_cadence c = {.t_us = t,
                      .step = jint(line, "step", -1),
                      .interval_steps = jint(line, "interval_steps", 0),
                      .step_s = jnum(line, "step_s", 0),
                      .mtbf_h = jnum(line, "mtbf_h", 0),
                      .daly_s = jnum(line, "daly_s", 0),
                      .stall_s = jnum(line, "stall_s", 0),
                      .waste = jnum(line, "waste", 0)};
  rv->latest_cadence = c;
  if (rv->keep_series) {
    ln_rv_cadence *p = grow((void **)&rv->cadences, &rv->n_cadences, &rv->cap_cadences, sizeof *p);
    if (p) *p = c;
  }
}

void ln_runview_add(ln_runview *rv, const json_t *line) {
  const char *ev = json_string_value(json_object_get(line, "event"));
  if (!ev) return;
  int64_t t = jint(line, "t_us", rv->last_us);
  int n = jsmall(line, "attempt", 0);
  if (t > rv->last_us) rv->last_us = t;
  ln_rv_attempt *a = find_attempt(rv, n);
  if (!strcmp(ev, "attempt_end") && rv->attempts_ended < 1000000000) rv->attempts_ended++;
  if (!strcmp(ev, "run_start")) {
    if (!rv->run_start_us) rv->run_start_us = t;
    jstr(line, "job", rv->job, sizeof rv->job);
    rv->running_run = 1;
    rv->ended = 0;
  } else if (!strcmp(ev, "run_end")) {
    rv->running_run = 0;
    rv->ended = 1;
    rv->exit_code = jsmall(line, "exit_code", -1);
  } else if (!strcmp(ev, "attempt_start")) {
    add_attempt_start(rv, line, n, t);
  } else if (!strcmp(ev, "gate")) {
    rv->gate_us = t;
    jstr(line, "result", rv->gate_result, sizeof rv->gate_result);
  } else if (!strcmp(ev, "publish")) {
    rv->publish_us = t;
    jstr(line, "result", rv->publish_result, sizeof rv->publish_result);
    jstr(line, "version", rv->publish_version, sizeof rv->publish_version);
  } else if (!strcmp(ev, "rank_started") && a) {
    a->started++;
    double launch_ms = jnum(line, "launch_ms", 0);
    if (launch_ms > a->started_ms) a->started_ms = launch_ms;
  } else if (!strcmp(ev, "rank_ready") && a) {
    a->joined++;
  } else if (!strcmp(ev, "startup") && a) {
    add_startup(a, line, t);
  } else if (!strcmp(ev, "failure") && a) {
    if (!a->failure_us) a->failure_us = t;
  } else if (!strcmp(ev, "attempt_end") && a) {
    add_attempt_end(a, line, t);
  } else if (!strcmp(ev, "restart")) {
    add_restart(rv, a, line, n, t);
  } else if (!strncmp(ev, "standby_", 8)) {
    add_standby(&rv->standby, ev + 8, line, n, t);
  } else if (!strcmp(ev, "gpu_health")) {
    add_gpu_health(rv, line, n, t);
  } else if (!strcmp(ev, "straggler") || !strcmp(ev, "straggler_gpu")) {
    add_straggler(rv, line, n, t, ev[9] != '\0');
  } else if (!strcmp(ev, "run_stopped")) {
    jstr(line, "reason", rv->stop_reason, sizeof rv->stop_reason);
  } else if (!strcmp(ev, "run_goodput")) {
    add_goodput(rv, line);
  } else if (!strcmp(ev, "ckpt_committed") && jsmall(line, "rank", 0) == 0) {
    add_commit(rv, a, line, n, t);
  } else if (!strcmp(ev, "ckpt_saved") && jsmall(line, "rank", 0) == 0 && a) {
    a->stall_ms += ln_goodput_saved_stall_ms(jnum(line, "stall_ms", 0), jnum(line, "wait_prev_ms", 0));
  } else if (!strcmp(ev, "progress")) {
    add_progress(rv, a, line, n, t);
  } else if (!strcmp(ev, "mfu")) {
    add_mfu(rv, line, n);
  } else if (!strcmp(ev, "cadence") && jsmall(line, "rank", 0) == 0) {
    add_cadence(rv, line, t);
  }
}

static ftl_err add_line(const char *line, size_t len, size_t line_no, void *ctx) {
  (void)line_no;
  json_error_t jerr;
  json_t *o = json_loadb(line, len, 0, &jerr);
  /* A torn line (a launcher killed mid-write) or a foreign one is skipped, not fatal. */
  if (json_is_object(o)) ln_runview_add(ctx, o);
  json_decref(o);
  return FTL_OK;
}

ftl_err ln_runview_load(ln_runview *rv, const char *run_dir, ftl_diag *d) {
  char path[PATH_MAX];
  char *data = NULL;
  size_t size = 0;
  if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_EVENTS))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", run_dir);
  ftl_err rc = core_jsonl_read(path, RV_MAX_LOG_BYTES, 2000, &data, &size, d);
  if (rc) return rc;
  ln_runview_add_log(rv, data, size);
  ftl_free(data);
  return FTL_OK;
}

void ln_runview_add_log(ln_runview *rv, const char *data, size_t size) {
  (void)core_jsonl_each_line(data, size, add_line, rv); /* add_line never fails */
}

int64_t ln_runview_last_committed(const ln_runview *rv) {
  int64_t best = rv->committed_step;
  for (int i = 0; i < rv->n_attempts; i++)
    if (rv->attempts[i].committed_step > best) best = rv->attempts[i].committed_step;
  return best;
}

const ln_rv_gpu *ln_runview_gpu_of_rank(const ln_runview *rv, const char *host, int local_rank) {
  int count = 0;
  if (!host || local_rank < 0) return NULL;
  for (int k = 0; k < rv->n_gpus; k++) count += !strcmp(rv->gpus[k].host, host);
  for (int k = 0; count && k < rv->n_gpus; k++)
    if (rv->gpus[k].index == ln_gpu_index_of_local_rank(local_rank, count) && !strcmp(rv->gpus[k].host, host)) return &rv->gpus[k];
  return NULL;
}

static ln_attempt_outcome outcome_of(const char *name) {
  static const char *const names[] = {"succeeded",     "failed",      "rendezvous_failed",
                                      "launch_failed", "interrupted", "preempted"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!strcmp(names[i], name)) return (ln_attempt_outcome)i;
  return FTL_ATTEMPT_SUCCEEDED; /* still running: nothing is lost yet */
}

ln_rv_goodput ln_runview_goodput(const ln_runview *rv, int64_t now_us) {
  ln_rv_goodput g = {0};
  if (rv->have_goodput) {
    g = (ln_rv_goodput){.wall_ms = rv->gp_wall_ms,
                         .productive_ms = rv->gp_productive_ms,
                         .startup_ms = rv->gp_startup_ms,
                         .stall_ms = rv->gp_stall_ms,
                         .lost_ms = rv->gp_lost_ms,
                         .teardown_ms = rv->gp_teardown_ms,
                         .backoff_ms = rv->gp_backoff_ms,
                         .pct = rv->gp_pct,
                         .unreported_ms = rv->gp_unreported_ms,
                         .measured = rv->gp_pct >= 0,
                         .final = 1};
    if (g.pct < 0) g.pct = 0;
    return g;
  }
  ln_goodput total = {0};
  for (int i = 0; i < rv->n_attempts; i++) {
    const ln_rv_attempt *a = &rv->attempts[i];
    int64_t end = a->end_us ? a->end_us : now_us;
    if (end < a->start_us) end = a->start_us;
    ln_attempt_result r = {.outcome = outcome_of(a->outcome),
                            .first_step_ms = a->first_step_us ? (double)(a->first_step_us - a->start_us) / 1000 : -1,
                            .failure_ms = a->failure_us ? (double)(a->failure_us - a->start_us) / 1000 : -1,
                            .end_ms = (double)(end - a->start_us) / 1000,
                            .committed_at_ms = a->committed_us ? (double)(a->committed_us - a->start_us) / 1000 : -1,
                            .ckpt_stall_ms = a->stall_ms,
                            .started_ms = a->started > 0 ? a->started_ms : -1,
                            .joined = a->joined};
    ln_goodput one = ln_goodput_of_attempt(&r, a->backoff_ms), sum = ln_goodput_sum(&one, 1);
    total.wall_ms += sum.wall_ms;
    total.startup_ms += sum.startup_ms;
    total.productive_ms += sum.productive_ms;
    total.stall_ms += sum.stall_ms;
    total.lost_ms += sum.lost_ms;
    total.teardown_ms += sum.teardown_ms;
    total.backoff_ms += sum.backoff_ms;
    total.unreported_ms += sum.unreported_ms;
  }
  g = (ln_rv_goodput){.wall_ms = total.wall_ms,
                       .unreported_ms = total.unreported_ms,
                       .measured = ln_goodput_measured(&total),
                       .productive_ms = total.productive_ms,
                       .startup_ms = total.startup_ms,
                       .stall_ms = total.stall_ms,
                       .lost_ms = total.lost_ms,
                       .teardown_ms = total.teardown_ms,
                       .backoff_ms = total.backoff_ms,
                       .pct = ln_goodput_pct(&total)};
  return g;
}

void ln_runview_mfu(const ln_runview *rv, ln_mfu_run *out) {
  *out = rv->mfu_finals;
  if (rv->have_mfu && !rv->mfu_final) ln_mfu_run_add(out, &rv->mfu);
}
