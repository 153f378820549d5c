/* launcher/status.c: `ftl status` (see status.h).
 *
 * Running or ended is the run-directory lock first (RUNDIR/ftl.lock, ln_run_lock_held in
 * runlock.h: a launcher holds it for its whole life), the event log second (a run_start without
 * its run_end) where there is no lock file (an older launcher).
 *
 * Map: the help text; reading the run (the event log, the ledger's restart costs and failures, the
 * last commit, the verdict); the status document (ln_status_build); printing it for people; the
 * command. */
#include "launcher/status.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/failure_record.h"
#include "core/fs.h"
#include "core/jsonl.h"
#include "core/rundir.h"
#include "ftl/cadence.h"
#include "ftl/core.h"
#include "launcher/launcher.h"
#include "launcher/runlock.h"
#include "launcher/runview.h"
#ifdef FTL_HAVE_CKPT_IO
#include "checkpoint/door.h"
#endif

const char ln_status_help[] =
    "ftl status: what a run is doing, or how it ended, from its run directory.\n"
    "\n"
    "  ftl status RUNDIR [--json]\n"
    "\n"
    "Prints: running or ended (and ftl's exit code), the progress rank 0 last reported, every attempt\n"
    "with its outcome, the failures with their causes and hosts (failures.jsonl), the checkpoint\n"
    "cadence and its inputs, the measured restart cost R (failures.jsonl's restart records), the last\n"
    "committed step, the gate's verdict and the published version, the goodput breakdown, useful work\n"
    "(goodput x MFU, for a program that reports its FLOPs: ftl_step_done_flops), GPU health (each GPU\n"
    "that is not healthy, with why) and the stragglers with their GPU's verdict beside them.\n"
    "Running means a launcher holds RUNDIR/ftl.lock. It only reads, so it is safe while the job runs.\n"
    "\n"
    "  --json   one JSON object instead (versioned; docs/formats/status.md)\n"
    "\n"
    "Exit codes: 0 printed, 2 usage error or RUNDIR is not a run directory (no events.jsonl).\n";

/* ---- reading the run ------------------------------------------------------------------------- */

typedef struct loader {
  ln_runview *rv;
  json_t *cadence; /* the latest cadence event of rank 0, whole */
  json_t *publish; /* the latest publish event */
} loader;

static ftl_err load_line(const char *line, size_t len, size_t line_no, void *ctx) {
  (void)line_no;
  loader *l = ctx;
  json_t *o = json_loadb(line, len, 0, NULL);
  if (json_is_object(o)) {
    ln_runview_add(l->rv, o);
    const char *ev = json_string_value(json_object_get(o, "event"));
    if (ev && !strcmp(ev, "cadence")) {
      json_decref(l->cadence);
      l->cadence = json_incref(o);
    } else if (ev && !strcmp(ev, "publish")) {
      json_decref(l->publish);
      l->publish = json_incref(o);
    }
  }
  json_decref(o);
  return FTL_OK;
}

static const char *str_of(const json_t *o, const char *k) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? s : "";
}

/* The restart cost R as the cadence of the run's next attempt takes it from the run's ledger (the
 * controller's own median of the newest measured restarts, so the figure is the one the ranks use),
 * and the restart records themselves. */
static json_t *restart_cost_of(const char *run_dir) {
  char path[PATH_MAX];
  ftl_cadence_config cfg;
  ftl_cadence_config_init(&cfg);
  ftl_cadence *c = NULL;
  ftl_diag ignored;
  double restart_s = cfg.restart_s;
  int samples = 0;
  if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_FAILURES) == FTL_OK &&
      ftl_cadence_create(&cfg, &c, &ignored) == FTL_OK && ftl_cadence_load_ledger(c, path, NULL, &ignored) == FTL_OK)
    ftl_cadence_restart_estimate(c, &restart_s, &samples);
  ftl_cadence_destroy(c);
  return json_pack("{s:f, s:b, s:i}", "restart_s", restart_s, "measured", samples > 0, "samples", samples);
}

static json_t *failures_of(const char *run_dir, json_t *restarts) {
  char path[PATH_MAX];
  char *data = NULL;
  size_t size = 0;
  ftl_diag ignored;
  json_t *arr = json_array();
  if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_FAILURES) ||
      core_jsonl_read(path, (size_t)64 << 20, 2000, &data, &size, &ignored) != FTL_OK)
    return arr;
  const char *p = data, *end = data + size;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    core_failure_record rec;
    ftl_diag skipped;
    static const char *const restart_keys[] = {"attempt", "restart_s", "step", "cause", "world_size", "wall_us"};
    static const char *const failure_keys[] = {"attempt",   "cause",  "rank",     "host",    "step",
                                               "exit_code", "signal", "bad_host", "message", "wall_us"};
    /* core's codec reads the line; a malformed one is skipped (the cadence warns about it). */
    if (n && core_failure_record_parse(p, n, &rec, &skipped) == FTL_OK && rec.kind != CORE_REC_EXPOSURE) {
      int restart = rec.kind == CORE_REC_RESTART;
      const char *const *keys = restart ? restart_keys : failure_keys;
      size_t nkeys = restart ? sizeof restart_keys / sizeof *restart_keys : sizeof failure_keys / sizeof *failure_keys;
      json_t *f = json_object();
      for (size_t i = 0; i < nkeys; i++) {
        json_t *v = core_failure_record_get(&rec, keys[i]);
        if (v) json_object_set_new(f, keys[i], v);
      }
      json_array_append_new(restart ? restarts : arr, f);
    }
    p += n + 1;
  }
  ftl_free(data);
  return arr;
}

static int64_t last_committed(const char *run_dir, int64_t from_events) {
#ifdef FTL_HAVE_CKPT_IO
  char base[PATH_MAX];
  ck_step_entry *steps = NULL;
  int n = 0;
  ftl_diag ignored;
  if (core_rundir_path(base, sizeof base, run_dir, FTL_RUNDIR_CHECKPOINTS) == FTL_OK &&
      ck_list_steps(base, &steps, &n, &ignored) == FTL_OK) {
    int64_t best = -1;
    for (int i = 0; i < n; i++)
      if (steps[i].state == CK_STEP_COMMITTED && steps[i].step > best) best = steps[i].step;
    ftl_free(steps);
    return best;
  }
#else
  (void)run_dir;
#endif
  return from_events;
}

static json_t *verdict_of(const char *run_dir) {
  char path[PATH_MAX];
  char *data = NULL;
  size_t len = 0;
  ftl_diag ignored;
  if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_VERDICT) ||
      core_fs_read_regular(path, 1 << 20, &data, &len, &ignored) != FTL_OK)
    return json_null();
  json_t *v = json_loadb(data, len, 0, NULL);
  ftl_free(data);
  if (!json_is_object(v)) {
    json_decref(v);
    return json_null();
  }
  json_t *out = json_object();
  static const char *const keys[] = {"passed", "metric", "value", "threshold", "direction", "reason", "ended_at"};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    json_t *x = json_object_get(v, keys[i]);
    if (x) json_object_set(out, keys[i], x);
  }
  json_decref(v);
  return out;
}

/* ---- the status document --------------------------------------------------------------------- */

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static const char *exit_meaning(int code) {
  switch (code) {
  case FTL_EXIT_OK: return "succeeded";
  case FTL_EXIT_JOB_FAILED: return "the job failed";
  case FTL_EXIT_USAGE: return "bad command line or job spec";
  case FTL_EXIT_LAUNCH: return "the gang could not be started";
  case FTL_EXIT_RDZV: return "the rendezvous deadline passed";
  case FTL_EXIT_INTERNAL: return "ftl itself failed";
  case FTL_EXIT_PREEMPTED: return "preempted: requeue, ftl run resumes";
  case FTL_EXIT_SIGINT: return "stopped by SIGINT";
  case FTL_EXIT_SIGTERM: return "stopped by SIGTERM";
  default: return "unknown exit code";
  }
}

/* Each GPU's latest health verdict (gpu_health events), in the order first seen; [] when none said. */
static json_t *gpus_json(const ln_runview *rv) {
  json_t *out = json_array();
  for (int i = 0; i < rv->n_gpus && out; i++) {
    const ln_rv_gpu *g = &rv->gpus[i];
    json_array_append_new(out, json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:I}", "host", g->host, "index", g->index,
                                         "uuid", g->uuid, "name", g->name, "verdict", g->verdict, "reason", g->reason,
                                         "since_us", (json_int_t)g->since_us));
  }
  return out;
}

/* The run's stragglers (straggler events), each with its GPU's latest verdict in its attempt (null
 * when its host read no GPU health); [] when none. */
static json_t *stragglers_json(const ln_runview *rv) {
  json_t *out = json_array();
  for (int i = 0; i < rv->n_stragglers && out; i++) {
    const ln_rv_straggler *s = &rv->stragglers[i];
    json_t *gpu = s->gpu >= 0 ? json_pack("{s:i, s:s, s:s, s:s}", "index", s->gpu, "uuid", s->uuid, "verdict",
                                          s->verdict, "reason", s->reason)
                              : json_null();
    json_array_append_new(out, json_pack("{s:i, s:i, s:s, s:i, s:f, s:f, s:f, s:b, s:I, s:o}", "attempt", s->attempt,
                                         "rank", s->rank, "host", s->host, "local_rank", s->local_rank, "ratio",
                                         s->ratio, "compute_ms", s->compute_ms, "others_median_ms",
                                         s->others_median_ms, "host_suspect", s->host_suspect, "t_us",
                                         (json_int_t)s->t_us, "gpu", gpu ? gpu : json_null()));
  }
  return out;
}

/* The standby's part of the document (docs/formats/status.md), null when the run never had one. */
/* Useful work (docs/formats/status.md: useful_work): the run's MFU so far beside goodput, the latest
 * figure's rate and peak, and the sentence; null when no rank reported FLOPs (nothing is said of
 * MFU then, not a zero). */
static json_t *useful_work_json(const ln_runview *rv, const ln_rv_goodput *g) {
  ln_mfu_run run;
  ln_runview_mfu(rv, &run);
  if (!run.reported) return json_null();
  const ln_mfu_figure *f = &rv->mfu;
  char text[600];
  ln_mfu_phrase(text, sizeof text, g->measured ? g->pct : -1, run.mfu, run.source, run.peak);
  json_t *o = json_pack("{s:o, s:o, s:o, s:s, s:s, s:o, s:o, s:o, s:f, s:i, s:b, s:s}", "mfu",
                        run.mfu >= 0 ? json_real(run.mfu) : json_null(), "mfu_pct",
                        run.mfu >= 0 ? json_real(100 * run.mfu) : json_null(), "useful_work_pct",
                        run.mfu >= 0 && g->measured ? json_real(g->pct * run.mfu) : json_null(), "peak_source",
                        ln_peak_source_name(run.source), "peak", run.peak, "model_flops_per_s",
                        f->flops_per_s >= 0 ? json_real(f->flops_per_s) : json_null(), "current_mfu",
                        f->mfu >= 0 ? json_real(f->mfu) : json_null(), "peak_flops",
                        f->peak_flops > 0 ? json_real(f->peak_flops) : json_null(), "model_flops", f->model_flops,
                        "attempt", rv->mfu_attempt, "final", rv->mfu_final, "text", text);
  return o ? o : json_null();
}

/* The useful-work line: the sentence, and while an attempt runs its latest rate. */
static void print_useful_work(const json_t *uw) {
  if (!json_is_object(uw)) return;
  printf("%s\n", json_string_value(json_object_get(uw, "text")));
  const json_t *rate = json_object_get(uw, "model_flops_per_s");
  if (json_is_true(json_object_get(uw, "final")) || !json_is_number(rate)) return;
  char r[48];
  ln_mfu_fmt_rate(r, sizeof r, json_number_value(rate));
  const json_t *cur = json_object_get(uw, "current_mfu");
  if (json_is_number(cur))
    printf("model FLOPs now: %s (MFU %.1f%%, attempt %d)\n", r, 100 * json_number_value(cur),
           (int)json_integer_value(json_object_get(uw, "attempt")));
  else
    printf("model FLOPs now: %s (attempt %d)\n", r, (int)json_integer_value(json_object_get(uw, "attempt")));
}

static json_t *standby_json(const ln_rv_standby *sb) {
  if (!sb->state[0]) return json_null();
  return json_pack("{s:s, s:i, s:I, s:o, s:I, s:i, s:i, s:i, s:i, s:s, s:s, s:I}", "state", sb->state, "for_attempt",
                   sb->for_attempt, "since_us", (json_int_t)sb->since_us, "rss_kb",
                   sb->rss_kb >= 0 ? json_integer(sb->rss_kb) : json_null(), "park_ms", (json_int_t)sb->park_ms,
                   "started", sb->started, "parked", sb->parked, "activated", sb->activated, "lost", sb->lost,
                   "reason", sb->reason, "parks_in", sb->parks_in[0] ? sb->parks_in : "ftl_init", "preloaded",
                   (json_int_t)sb->preloaded);
}

ftl_err ln_status_build(const char *run_dir, json_t **out, ftl_diag *d) {
  ln_runview rv;
  ln_runview_init(&rv, 0);
  loader l = {.rv = &rv};
  char path[PATH_MAX];
  char *data = NULL;
  size_t size = 0;
  json_t *doc = NULL;
  ftl_err rc = FTL_OK;
  if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_EVENTS)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", run_dir);
    goto out;
  }
  rc = core_jsonl_read(path, (size_t)1 << 30, 2000, &data, &size, d);
  if (rc == FTL_ERR_NOTFOUND) {
    rc = ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s is not a run directory: it has no %s", run_dir,
                       core_rundir_name(FTL_RUNDIR_EVENTS));
    goto out;
  }
  if (rc) goto out;
  if ((rc = core_jsonl_each_line(data, size, load_line, &l))) goto out;

  int held = ln_run_lock_held(run_dir);
  int running = held == 1 || (held < 0 && rv.running_run);
  const char *state = running ? "running" : rv.ended ? "ended" : rv.run_start_us ? "ended" : "new";
  const char *how = running           ? "a launcher holds the run directory"
                    : rv.ended        ? exit_meaning(rv.exit_code)
                    : rv.run_start_us ? "the launcher ended without a run_end (killed?)"
                                      : "never run";
  int64_t now = ftl_wall_us();
  doc = json_pack("{s:i, s:s, s:s, s:s, s:s, s:o, s:i, s:i}", "version", FTL_STATUS_VERSION, "run_dir", run_dir, "job",
                  rv.job, "state", state, "how", how, "lock_held", held < 0 ? json_null() : json_boolean(held == 1),
                  "restarts", rv.restarts, "max_restarts", rv.max_restarts);
  if (!doc) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  json_object_set_new(doc, "exit_code", !running && rv.ended ? json_integer(rv.exit_code) : json_null());
  json_object_set_new(doc, "stop_reason", rv.stop_reason[0] ? json_string(rv.stop_reason) : json_null());
  json_object_set_new(doc, "updated_us", json_integer(rv.last_us));
  if (rv.latest.step >= 0)
    json_object_set_new(doc, "progress",
                        json_pack("{s:I, s:I, s:o, s:o, s:i, s:I}", "step", (json_int_t)rv.latest.step, "total_steps",
                                  (json_int_t)rv.latest.total_steps, "loss", num_or_null(rv.latest.loss),
                                  "tokens_per_s",
                                  rv.latest.tokens_per_s >= 0 ? json_real(rv.latest.tokens_per_s) : json_null(),
                                  "attempt", rv.latest.attempt, "t_us", (json_int_t)rv.latest.t_us));
  else
    json_object_set_new(doc, "progress", json_null());
  json_t *attempts = json_array();
  for (int i = 0; i < rv.n_attempts; i++) {
    const ln_rv_attempt *a = &rv.attempts[i];
    int64_t end = a->end_us ? a->end_us : now;
    json_array_append_new(attempts, json_pack("{s:i, s:s, s:I, s:o, s:f, s:s, s:s, s:i, s:i, s:I, s:I, s:s}", "attempt",
                                              a->attempt, "launcher", a->launcher, "start_us", (json_int_t)a->start_us,
                                              "end_us", a->end_us ? json_integer(a->end_us) : json_null(), "duration_s",
                                              (double)(end - a->start_us) / 1e6, "outcome",
                                              a->outcome[0] ? a->outcome : "running", "cause", a->cause, "exit_code",
                                              a->exit_code, "signal", a->signal, "last_step", (json_int_t)a->last_step,
                                              "committed_step", (json_int_t)a->committed_step, "summary", a->summary));
  }
  json_object_set_new(doc, "attempts", attempts);
  json_object_set_new(doc, "standby", standby_json(&rv.standby));
  json_object_set_new(doc, "gpus", gpus_json(&rv));
  json_object_set_new(doc, "stragglers", stragglers_json(&rv));
  json_t *restarts = json_array();
  json_object_set_new(doc, "failures", failures_of(run_dir, restarts));
  json_t *cost = restart_cost_of(run_dir);
  if (cost)
    json_object_set_new(cost, "records", restarts);
  else
    json_decref(restarts);
  json_object_set_new(doc, "restart_cost", cost ? cost : json_null());
  json_t *cad = json_null();
  if (l.cadence) {
    cad = json_deep_copy(l.cadence);
    json_object_del(cad, "ts");
    json_object_del(cad, "event");
  }
  json_object_set_new(doc, "cadence", cad);
  json_object_set_new(doc, "last_committed_step", json_integer(last_committed(run_dir, rv.committed_step)));
  json_object_set_new(doc, "gate", verdict_of(run_dir));
  json_t *pub = json_null();
  if (l.publish) {
    pub = json_object();
    static const char *const keys[] = {"result", "name", "channel", "version", "message"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
      json_t *v = json_object_get(l.publish, keys[i]);
      if (v) json_object_set(pub, keys[i], v);
    }
  }
  json_object_set_new(doc, "published", pub);
  ln_rv_goodput g = ln_runview_goodput(&rv, now);
  json_object_set_new(doc, "goodput",
                      json_pack("{s:b, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:b, s:o}", "final", g.final, "wall_ms",
                                g.wall_ms, "productive_ms", g.productive_ms, "startup_ms", g.startup_ms, "ckpt_stall_ms",
                                g.stall_ms, "lost_work_ms", g.lost_ms, "teardown_ms", g.teardown_ms, "backoff_ms",
                                g.backoff_ms, "unreported_ms", g.unreported_ms, "measured", g.measured, "goodput_pct",
                                g.measured ? json_real(g.pct) : json_null()));
  json_object_set_new(doc, "useful_work", useful_work_json(&rv, &g));
  /* Whether the program reports steps at all (ftl_step_done): a program that does not shows none,
   * which is not a failure to make progress. */
  int reported = rv.latest.step >= 0;
  for (int i = 0; i < rv.n_attempts && !reported; i++) reported = rv.attempts[i].last_step >= 0 || rv.attempts[i].first_step_us;
  json_object_set_new(doc, "steps_reported", json_boolean(reported));
  *out = doc;
  doc = NULL;
out:
  json_decref(doc);
  json_decref(l.cadence);
  json_decref(l.publish);
  ftl_free(data);
  ln_runview_free(&rv);
  return rc;
}

/* ---- printing it for people ------------------------------------------------------------------ */

static void when(char *buf, size_t size, int64_t us) {
  time_t s = (time_t)(us / 1000000);
  struct tm tm;
  gmtime_r(&s, &tm);
  strftime(buf, size, "%Y-%m-%d %H:%M:%SZ", &tm);
}

static const char *str(const json_t *o, const char *k) { return str_of(o, k); }

static double num(const json_t *o, const char *k) {
  const json_t *v = json_object_get(o, k);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

/* "gpu health:" all healthy in one line, else each GPU that is not, with why. Nothing when no GPU
 * was ever read (no NVML, no GPU). */
static void print_gpus(const json_t *gpus) {
  size_t n = json_array_size(gpus), i, unwell = 0;
  const json_t *g;
  if (!n) return;
  json_array_foreach(gpus, i, g) unwell += strcmp(str(g, "verdict"), "healthy") != 0;
  if (!unwell) {
    printf("gpu health: %zu GPU%s healthy\n", n, n == 1 ? "" : "s");
    return;
  }
  printf("gpu health: %zu of %zu GPU%s not healthy\n", unwell, n, n == 1 ? "" : "s");
  json_array_foreach(gpus, i, g) {
    if (!strcmp(str(g, "verdict"), "healthy")) continue;
    printf("  host %s GPU %.0f (%s): %s: %s\n", str(g, "host"), num(g, "index"), str(g, "uuid"), str(g, "verdict"),
           str(g, "reason"));
  }
}

/* Each straggler, how much slower, and its GPU's verdict beside it (nothing of a GPU where its host
 * read none). */
static void print_stragglers(const json_t *stragglers) {
  size_t i;
  const json_t *s;
  if (json_array_size(stragglers)) printf("stragglers: %zu\n", json_array_size(stragglers));
  json_array_foreach(stragglers, i, s) {
    printf("  attempt %.0f: rank %.0f on host %s is %.1f× slower than the others (%.1f ms vs %.1f ms compute per step)",
           num(s, "attempt"), num(s, "rank"), str(s, "host"), num(s, "ratio"), num(s, "compute_ms"),
           num(s, "others_median_ms"));
    const json_t *g = json_object_get(s, "gpu");
    if (json_is_object(g) && !strcmp(str(g, "verdict"), "healthy"))
      printf("; its GPU %.0f (%s) is healthy", num(g, "index"), str(g, "uuid"));
    else if (json_is_object(g))
      printf("; its GPU %.0f (%s) is %s: %s", num(g, "index"), str(g, "uuid"), str(g, "verdict"), str(g, "reason"));
    printf("\n");
  }
}

static void print_human(const json_t *doc) {
  printf("run directory: %s\njob: %s\n", str(doc, "run_dir"), str(doc, "job"));
  const json_t *ec = json_object_get(doc, "exit_code");
  if (json_is_integer(ec))
    printf("state: %s: exit code %lld (%s)\n", str(doc, "state"), (long long)json_integer_value(ec), str(doc, "how"));
  else
    printf("state: %s (%s)\n", str(doc, "state"), str(doc, "how"));
  if (json_is_string(json_object_get(doc, "stop_reason"))) printf("stopped: %s\n", str(doc, "stop_reason"));
  const json_t *p = json_object_get(doc, "progress");
  if (json_is_object(p)) {
    printf("progress: step %.0f", num(p, "step"));
    if (num(p, "total_steps") > 0) printf("/%.0f", num(p, "total_steps"));
    if (isfinite(num(p, "loss"))) printf(", loss %.4f", num(p, "loss"));
    if (isfinite(num(p, "tokens_per_s"))) printf(", %.0f tokens/s", num(p, "tokens_per_s"));
    printf(" (attempt %.0f)\n", num(p, "attempt"));
  }
  const json_t *attempts = json_object_get(doc, "attempts");
  int reported = json_is_true(json_object_get(doc, "steps_reported"));
  printf("attempts: %zu, restarts: %.0f\n", json_array_size(attempts), num(doc, "restarts"));
  size_t i;
  const json_t *a;
  json_array_foreach(attempts, i, a) {
    char t[64];
    when(t, sizeof t, (int64_t)num(a, "start_us"));
    char steps[64], committed[64];
    if (num(a, "last_step") >= 0)
      snprintf(steps, sizeof steps, "steps to %.0f", num(a, "last_step"));
    else
      snprintf(steps, sizeof steps, "%s", reported ? "no step reached" : "steps not reported");
    if (num(a, "committed_step") >= 0)
      snprintf(committed, sizeof committed, "committed %.0f", num(a, "committed_step"));
    else
      snprintf(committed, sizeof committed, "nothing committed");
    printf("  attempt %.0f  %-7s %s  %8.1f s  %-17s %s, %s", num(a, "attempt"), str(a, "launcher"), t,
           num(a, "duration_s"), str(a, "outcome"), steps, committed);
    if (*str(a, "summary")) printf(": %s", str(a, "summary"));
    printf("\n");
  }
  const json_t *sb = json_object_get(doc, "standby");
  if (json_is_object(sb)) {
    char t[64];
    when(t, sizeof t, (int64_t)num(sb, "since_us"));
    printf("standby: %s for attempt %.0f since %s", str(sb, "state"), num(sb, "for_attempt"), t);
    if (!strcmp(str(sb, "state"), "parked") && json_is_integer(json_object_get(sb, "rss_kb")))
      printf(" (parked in %.2f s, %.1f MiB resident)", num(sb, "park_ms") / 1e3, num(sb, "rss_kb") / 1024);
    if (!strcmp(str(sb, "parks_in"), "pyrun")) {
      printf(" in ftl's Python runner");
      if (num(sb, "preloaded") >= 0) printf(" (%.0f modules imported)", num(sb, "preloaded"));
    }
    printf("; %.0f started, %.0f take-over%s, %.0f lost", num(sb, "started"), num(sb, "activated"),
           num(sb, "activated") == 1 ? "" : "s", num(sb, "lost"));
    if (*str(sb, "reason")) printf(" (last: %s)", str(sb, "reason"));
    printf("\n");
  }
  print_gpus(json_object_get(doc, "gpus"));
  print_stragglers(json_object_get(doc, "stragglers"));
  const json_t *failures = json_object_get(doc, "failures");
  if (json_array_size(failures)) printf("failures: %zu\n", json_array_size(failures));
  json_array_foreach(failures, i, a) {
    char at[48] = "";
    if (num(a, "step") >= 0) snprintf(at, sizeof at, ", step %.0f", num(a, "step"));
    printf("  attempt %.0f: %s, rank %.0f on host %s%s: %s\n", num(a, "attempt"), str(a, "cause"), num(a, "rank"),
           str(a, "host"), at, str(a, "message"));
  }
  const json_t *rc = json_object_get(doc, "restart_cost");
  if (json_is_true(json_object_get(rc, "measured"))) {
    size_t n = json_array_size(json_object_get(rc, "records"));
    printf("restart cost: R = %.2f s (measured: median of the newest %.0f of %zu restart%s, failure detected to %s)\n",
           num(rc, "restart_s"), num(rc, "samples"), n, n == 1 ? "" : "s",
           reported ? "first resumed step" : "the ranks' start: the program reports no steps");
  } else if (json_is_object(rc)) {
    printf("restart cost: R = %.0f s (assumed: no restart measured in this run)\n", num(rc, "restart_s"));
  }
  const json_t *c = json_object_get(doc, "cadence");
  if (json_is_object(c)) {
    printf("cadence: checkpoint every %.0f steps (at step %.0f; step %.3f s, stall %.3f s, MTBF %.1f h)\n",
           num(c, "interval_steps"), num(c, "step"), num(c, "step_s"), num(c, "stall_s"), num(c, "mtbf_h"));
    if (*str(c, "explanation")) printf("  %s\n", str(c, "explanation"));
  }
  double lc = num(doc, "last_committed_step");
  if (lc >= 0)
    printf("last committed step: %.0f\n", lc);
  else
    printf("last committed step: none\n");
  const json_t *g = json_object_get(doc, "gate");
  if (json_is_object(g))
    printf("gate: %s (%s %.6g, threshold %.6g)%s%s\n", json_is_true(json_object_get(g, "passed")) ? "passed" : "failed",
           str(g, "metric"), num(g, "value"), num(g, "threshold"), *str(g, "reason") ? ": " : "", str(g, "reason"));
  const json_t *pub = json_object_get(doc, "published");
  if (json_is_object(pub)) {
    if (!strcmp(str(pub, "result"), "published"))
      printf("published: %s@%s version %s\n", str(pub, "name"), str(pub, "channel"), str(pub, "version"));
    else
      printf("publish: %s %s\n", str(pub, "result"), str(pub, "message"));
  }
  const json_t *gp = json_object_get(doc, "goodput");
  if (json_is_true(json_object_get(gp, "measured")))
    printf("goodput%s: %.1f%% of %.1f s: productive %.1f s, start-up %.1f s, checkpoint stalls %.1f s, lost work %.1f "
           "s, teardown %.1f s, back-off %.1f s\n",
           json_is_true(json_object_get(gp, "final")) ? "" : " so far", num(gp, "goodput_pct"), num(gp, "wall_ms") / 1e3,
           num(gp, "productive_ms") / 1e3, num(gp, "startup_ms") / 1e3, num(gp, "ckpt_stall_ms") / 1e3,
           num(gp, "lost_work_ms") / 1e3, num(gp, "teardown_ms") / 1e3, num(gp, "backoff_ms") / 1e3);
  else
    printf("goodput: not measured (the program reports no steps: ftl_step_done); of %.1f s: start-up %.1f s, running "
           "%.1f s, teardown %.1f s, back-off %.1f s\n",
           num(gp, "wall_ms") / 1e3, num(gp, "startup_ms") / 1e3, num(gp, "unreported_ms") / 1e3,
           num(gp, "teardown_ms") / 1e3, num(gp, "backoff_ms") / 1e3);
  print_useful_work(json_object_get(doc, "useful_work"));
}

/* ---- the command ----------------------------------------------------------------------------- */

int ln_cmd_status(int argc, char **argv) {
  static const struct option options[] = {
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int json = 0, c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    if (c == 'j')
      json = 1;
    else if (c == 'h') {
      fputs(ln_status_help, stdout);
      return FTL_EXIT_OK;
    } else {
      fputs("usage: ftl status RUNDIR [--json]\n", stderr);
      return FTL_EXIT_USAGE;
    }
  }
  if (argc - optind != 1) {
    fputs("usage: ftl status RUNDIR [--json]\n", stderr);
    return FTL_EXIT_USAGE;
  }
  ftl_diag d = {{0}};
  json_t *doc = NULL;
  if (ln_status_build(argv[optind], &doc, &d)) {
    fprintf(stderr, "ftl status: %s\n", d.msg);
    return FTL_EXIT_USAGE;
  }
  if (json) {
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (text) printf("%s\n", text);
    free(text);
  } else {
    print_human(doc);
  }
  json_decref(doc);
  return FTL_EXIT_OK;
}
