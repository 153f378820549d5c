/* launcher/run.c: a job from its first attempt to its end: the restart policy, the failure ledger
 * and the goodput report.
 *
 * Policy, in the order it is applied after a failed attempt:
 *   1. a failure a restart cannot fix (the program cannot start) ends the job;
 *   2. the restart budget (restart.max_restarts) is for the whole job, not per host or rank;
 *   3. a crash loop (restart.crash_loop failures in a row at the same step) ends the job with a
 *      report rather than burning the budget;
 *   4. a host blamed for the failure (lost, or holding a hung rank) is left out of later attempts;
 *      spare hosts in the hostfile then take its place, or the gang continues with fewer ranks
 *      when min_ranks allows (the checkpoint reshards);
 *   5. an exponential back-off (restart.backoff_s, doubling up to restart.max_backoff_s) separates
 *      attempts; the ranks of the next attempt restore the last committed step themselves.
 * Failures are appended to RUNDIR/failures.jsonl (docs/formats/failures.md), which outlives runs. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftl/core.h"
#include "ftl/cadence.h"
#include "launcher/launcher.h"

typedef struct host_entry {
  char name[256];
  int slots;
  char line[1024]; /* the hostfile line as written, so other options (max_slots) pass through */
  int bad;
  int suspect; /* a straggler ran there */
} host_entry;

typedef struct host_plan {
  host_entry *hosts;
  size_t count;
} host_plan;

static ftl_err read_hostfile(const char *path, host_plan *plan, ftl_diag *d) {
  FILE *f = fopen(path, "r");
  if (!f) return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "cannot read hostfile %s: %s", path, strerror(errno));
  char line[1024];
  ftl_err rc = FTL_OK;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = '\0';
    char *s = line;
    while (*s == ' ' || *s == '\t') s++;
    if (!*s || *s == '#') continue;
    host_entry *grown = ftl_realloc(plan->hosts, (plan->count + 1) * sizeof *grown);
    if (!grown) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
      break;
    }
    plan->hosts = grown;
    host_entry *h = &plan->hosts[plan->count++];
    memset(h, 0, sizeof *h);
    snprintf(h->line, sizeof h->line, "%s", s);
    size_t len = strcspn(s, " \t#");
    snprintf(h->name, sizeof h->name, "%.*s", (int)len, s);
    /* Open MPI counts a host without slots= as one slot; max_slots= is another option. */
    h->slots = 1;
    for (const char *p = strstr(s, "slots="); p; p = strstr(p + 1, "slots=")) {
      if (p - s >= 4 && !strncmp(p - 4, "max_", 4)) continue;
      char num[16];
      int64_t v;
      snprintf(num, sizeof num, "%.*s", (int)strspn(p + 6, "0123456789"), p + 6);
      if (ftl_parse_i64(num, 1, 1 << 20, &v) == FTL_OK) h->slots = (int)v;
      break;
    }
  }
  fclose(f);
  return rc;
}

/* Writes this attempt's hostfile (bad hosts left out) and says how many ranks it can hold. */
static ftl_err write_attempt_hostfile(const host_plan *plan, const char *path, int *slots_out, ftl_diag *d) {
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (!mem) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  int slots = 0;
  fprintf(mem, "# written by ftl for this attempt; hosts left out after failures are commented\n");
  for (size_t i = 0; i < plan->count; i++) {
    const host_entry *h = &plan->hosts[i];
    if (h->bad) {
      fprintf(mem, "# left out: %s\n", h->line);
      continue;
    }
    fprintf(mem, "%s\n", h->line);
    slots += h->slots;
  }
  fclose(mem);
  ftl_err rc = ftl_write_file_atomic(path, text, len, d);
  free(text);
  *slots_out = slots;
  return rc;
}

/* A hostfile may name a host by its name or by an address: either matches. */
static int host_matches(const char *entry, const char *name, const char *addrs) {
  if (!strcmp(entry, name)) return 1;
  size_t len = strlen(entry);
  for (const char *p = addrs; p && *p;) {
    size_t n = strcspn(p, " ");
    if (n == len && !strncmp(p, entry, n)) return 1;
    p += n;
    while (*p == ' ') p++;
  }
  return 0;
}

static int next_attempt(const char *run_dir) {
  char path[PATH_MAX];
  for (int i = 0; i < 100000; i++) {
    if (ftl_fmt(path, sizeof path, "%s/attempt-%04d", run_dir, i)) return i;
    if (access(path, F_OK) != 0) return i;
  }
  return 100000;
}

/* Appends one line to the run's ledger (RUNDIR/failures.jsonl), fsynced: the ledger must survive
 * what comes next. One writer (this launcher), so O_APPEND alone keeps lines whole. */
static void run_ledger_append(const char *run_dir, json_t *rec) {
  char path[PATH_MAX];
  char *text = rec ? json_dumps(rec, JSON_COMPACT) : NULL;
  json_decref(rec);
  if (!text || ftl_fmt(path, sizeof path, "%s/failures.jsonl", run_dir)) {
    free(text);
    return;
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) {
    size_t n = strlen(text);
    text[n] = '\n'; /* json_dumps leaves room for the NUL this replaces */
    if (write(fd, text, n + 1) != (ssize_t)(n + 1)) FTL_LOG(FTL_LOG_WARN, "launcher", "cannot append to %s", path);
    fsync(fd);
    close(fd);
  }
  free(text);
}

static void fleet_append(const ftl_job *job, const ftl_cadence_record *rec) {
  if (!job->fleet_ledger) return;
  ftl_diag d = {{0}};
  if (ftl_cadence_fleet_append(job->fleet_ledger, rec, 10000, &d) != FTL_OK)
    FTL_LOG(FTL_LOG_WARN, "launcher", "fleet ledger: %s", d.msg);
}

/* The failure (if the attempt failed) and the attempt's exposure (wall time x ranks), in the run's
 * ledger and the fleet's: the cadence controller estimates the failure rate from both. The same
 * wall_us in both lets a reader of the two count a failure once. */
static void ledger_record(const ftl_job *job, const char *run_dir, int attempt, int world, const ftl_attempt_result *r,
                          int failed) {
  int64_t now_us = ftl_wall_us();
  if (failed) {
    run_ledger_append(run_dir, json_pack("{s:i, s:s, s:I, s:s, s:i, s:i, s:s, s:i, s:s, s:I, s:i, s:i, s:f, s:s, s:s}",
                                         "version", 1, "record", "failure", "wall_us", (json_int_t)now_us, "job",
                                         job->name, "attempt", attempt, "world_size", world, "cause",
                                         ftl_failure_kind_name(r->kind), "rank", r->root_rank, "host", r->root_host,
                                         "step", (json_int_t)r->last_step, "exit_code", r->exit_code, "signal",
                                         r->signal, "detect_lag_ms", r->detect_lag_ms, "bad_host", r->bad_host,
                                         "message", r->summary));
    ftl_cadence_record rec = {.kind = FTL_CADENCE_REC_FAILURE, .wall_us = now_us, .attempt = attempt,
                              .step = r->last_step, .world_size = world};
    snprintf(rec.cause, sizeof rec.cause, "%s", ftl_failure_kind_name(r->kind));
    snprintf(rec.job, sizeof rec.job, "%s", job->name);
    snprintf(rec.host, sizeof rec.host, "%s", r->root_host);
    fleet_append(job, &rec);
  }
  double rank_hours = r->end_ms / 3.6e6 * world;
  if (rank_hours <= 0) return;
  run_ledger_append(run_dir, json_pack("{s:i, s:s, s:I, s:s, s:i, s:i, s:s, s:f}", "version", 1, "record", "exposure",
                                       "wall_us", (json_int_t)now_us + 1, "job", job->name, "attempt", attempt,
                                       "world_size", world, "host", ftl_hostname(), "rank_hours", rank_hours));
  ftl_cadence_record rec = {.kind = FTL_CADENCE_REC_EXPOSURE, .wall_us = now_us + 1, .attempt = attempt, .step = -1,
                            .world_size = world, .rank_hours = rank_hours};
  snprintf(rec.job, sizeof rec.job, "%s", job->name);
  snprintf(rec.host, sizeof rec.host, "%s", ftl_hostname());
  fleet_append(job, &rec);
}

static volatile sig_atomic_t backoff_signal;
static void on_backoff_signal(int sig) { backoff_signal = sig; }

/* Sleeps ms unless SIGINT/SIGTERM/SIGUSR1/SIGHUP arrives first; returns that signal or 0. */
static int backoff_sleep(int64_t ms) {
  const int sigs[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};
  struct sigaction sa = {.sa_handler = on_backoff_signal}, old[4];
  sigemptyset(&sa.sa_mask);
  backoff_signal = 0;
  for (int i = 0; i < 4; i++) sigaction(sigs[i], &sa, &old[i]);
  int64_t deadline = ftl_deadline_after_ms(ms);
  while (!backoff_signal && ftl_deadline_left_ms(deadline) > 0) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  for (int i = 0; i < 4; i++) sigaction(sigs[i], &old[i], NULL);
  return backoff_signal;
}

typedef struct goodput {
  double wall_ms, startup_ms, productive_ms, stall_ms, lost_ms, teardown_ms, backoff_ms;
} goodput;

/* Splits one attempt's time. Productive: from the first step to the end (or the failure), less
 * checkpoint stalls and the work lost since the last commit. */
static goodput attempt_goodput(const ftl_attempt_result *r, double backoff_ms) {
  goodput g = {.wall_ms = r->end_ms, .backoff_ms = backoff_ms, .stall_ms = r->ckpt_stall_ms};
  double stop = r->failure_ms >= 0 ? r->failure_ms : r->end_ms;
  if (r->first_step_ms < 0) {
    g.startup_ms = stop;
    g.teardown_ms = r->end_ms - stop;
    return g;
  }
  g.startup_ms = r->first_step_ms;
  double steps_ms = stop - r->first_step_ms;
  if (r->outcome == FTL_ATTEMPT_FAILED || r->outcome == FTL_ATTEMPT_INTERRUPTED) {
    double since = r->committed_at_ms > r->first_step_ms ? r->committed_at_ms : r->first_step_ms;
    g.lost_ms = stop - since;
  }
  g.productive_ms = steps_ms - g.lost_ms - g.stall_ms;
  if (g.productive_ms < 0) g.productive_ms = 0;
  g.teardown_ms = r->end_ms - stop;
  return g;
}

static void report_goodput(ftl_events *events, int first_attempt, const goodput *per, int n) {
  goodput t = {0};
  for (int i = 0; i < n; i++) {
    t.wall_ms += per[i].wall_ms + per[i].backoff_ms;
    t.startup_ms += per[i].startup_ms;
    t.productive_ms += per[i].productive_ms;
    t.stall_ms += per[i].stall_ms;
    t.lost_ms += per[i].lost_ms;
    t.teardown_ms += per[i].teardown_ms;
    t.backoff_ms += per[i].backoff_ms;
  }
  double pct = t.wall_ms > 0 ? 100.0 * t.productive_ms / t.wall_ms : 0;
  ftl_events_write(events, "run_goodput", first_attempt + n - 1,
                   json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "attempts", n, "wall_ms", t.wall_ms,
                             "productive_ms", t.productive_ms, "startup_ms", t.startup_ms, "ckpt_stall_ms", t.stall_ms,
                             "lost_work_ms", t.lost_ms, "teardown_ms", t.teardown_ms, "backoff_ms", t.backoff_ms,
                             "goodput_pct", pct));
  fprintf(stderr, "ftl: goodput %.1f%% of %.1f s over %d attempt%s\n", pct, t.wall_ms / 1000, n, n == 1 ? "" : "s");
  fprintf(stderr, "  %-7s %9s %10s %11s %10s %8s %10s %9s\n", "attempt", "wall s", "start-up s", "productive s",
          "ckpt stall", "lost s", "teardown s", "backoff s");
  for (int i = 0; i < n; i++)
    fprintf(stderr, "  %-7d %9.2f %10.2f %11.2f %10.2f %8.2f %10.2f %9.2f\n", first_attempt + i, per[i].wall_ms / 1000,
            per[i].startup_ms / 1000, per[i].productive_ms / 1000, per[i].stall_ms / 1000, per[i].lost_ms / 1000,
            per[i].teardown_ms / 1000, per[i].backoff_ms / 1000);
}

int ftl_run_job(const ftl_job *job, const char *run_dir, const char *ftl_exe, const char *program,
                const char *rdzv_bind, const char *rdzv_host, int kill_grace_ms, ftl_events *events) {
  ftl_diag d = {{0}};
  host_plan plan = {0};
  goodput *per = NULL;
  int exit_code = FTL_EXIT_JOB_FAILED;
  int first_attempt = next_attempt(run_dir), attempt = first_attempt;
  int restarts = 0, same_step_failures = 0, n_attempts = 0;
  int64_t prev_fail_step = INT64_MIN, backoff_ms = job->backoff_ms;
  double pending_backoff_ms = 0;
  char suspect[64] = "";

  if (job->hostfile && read_hostfile(job->hostfile, &plan, &d)) {
    fprintf(stderr, "ftl run: %s\n", d.msg);
    return FTL_EXIT_USAGE;
  }
  per = ftl_calloc((size_t)job->max_restarts + 2, sizeof *per);
  if (!per) {
    fprintf(stderr, "ftl run: out of memory\n");
    return FTL_EXIT_INTERNAL;
  }

  for (;;) {
    int world = job->ranks;
    char hostfile[PATH_MAX] = "";
    if (job->hostfile) {
      char dir[PATH_MAX];
      int slots = 0;
      if (ftl_fmt(dir, sizeof dir, "%s/attempt-%04d", run_dir, attempt) || ftl_mkdir_p(dir, &d) ||
          ftl_fmt(hostfile, sizeof hostfile, "%s/hostfile", dir) ||
          write_attempt_hostfile(&plan, hostfile, &slots, &d)) {
        fprintf(stderr, "ftl run: %s\n", d.msg[0] ? d.msg : "path too long");
        exit_code = FTL_EXIT_INTERNAL;
        break;
      }
      if (slots < world) {
        int min = job->min_ranks > 0 ? job->min_ranks : job->ranks;
        if (slots < min) {
          fprintf(stderr, "ftl: job '%s' cannot go on: the hosts left hold %d slot%s, fewer than the %d ranks it needs%s\n",
                  job->name, slots, slots == 1 ? "" : "s", min, job->min_ranks > 0 ? " (min_ranks)" : "");
          ftl_events_write(events, "run_stopped", attempt, json_pack("{s:s, s:i}", "reason", "not enough hosts", "slots", slots));
          break;
        }
        FTL_LOG(FTL_LOG_WARN, "launcher", "continuing with %d ranks instead of %d (min_ranks %d)", slots, job->ranks, min);
        world = slots;
      }
    }

    ftl_attempt_opts o = {.job = job,
                          .world_size = world,
                          .hostfile = job->hostfile ? hostfile : NULL,
                          .run_dir = run_dir,
                          .attempt = attempt,
                          .ftl_exe = ftl_exe,
                          .program = program,
                          .rdzv_bind = rdzv_bind,
                          .rdzv_host = rdzv_host,
                          .kill_grace_ms = kill_grace_ms,
                          .events = events};
    ftl_attempt_result res;
    if (ftl_attempt_run(&o, &res, &d)) {
      fprintf(stderr, "ftl run: %s\n", d.msg);
      exit_code = FTL_EXIT_INTERNAL;
      break;
    }
    per[n_attempts++] = attempt_goodput(&res, pending_backoff_ms);
    int failed = res.outcome == FTL_ATTEMPT_FAILED || res.outcome == FTL_ATTEMPT_RDZV_FAILED;
    ledger_record(job, run_dir, attempt, world, &res, failed);

    if (res.outcome == FTL_ATTEMPT_SUCCEEDED) {
      fprintf(stderr, "ftl: job '%s' finished: %s\n", job->name, res.summary);
      exit_code = FTL_EXIT_OK;
      break;
    }
    if (res.outcome == FTL_ATTEMPT_PREEMPTED) {
      fprintf(stderr, "ftl: job '%s' %s; run `ftl run` again on %s to resume (exit %d: requeue)\n", job->name,
              res.summary, run_dir, FTL_EXIT_PREEMPTED);
      exit_code = FTL_EXIT_PREEMPTED;
      break;
    }
    if (res.outcome == FTL_ATTEMPT_INTERRUPTED) {
      fprintf(stderr, "ftl: job '%s' %s\n", job->name, res.summary);
      exit_code = res.interrupt_signal == SIGINT ? FTL_EXIT_SIGINT : FTL_EXIT_SIGTERM;
      break;
    }
    if (res.outcome == FTL_ATTEMPT_LAUNCH_FAILED) {
      fprintf(stderr, "ftl: job '%s' could not start: %s\n", job->name, res.summary);
      exit_code = FTL_EXIT_LAUNCH;
      break;
    }

    /* A failed attempt: FTL_ATTEMPT_FAILED or FTL_ATTEMPT_RDZV_FAILED. */
    int rdzv = res.outcome == FTL_ATTEMPT_RDZV_FAILED;
    exit_code = rdzv ? FTL_EXIT_RDZV : FTL_EXIT_JOB_FAILED;
    if (res.interrupt_signal) {
      /* Asked to stop (a preemption) and a rank failed on the way out: never relaunch a job the
       * scheduler is taking away. The last committed checkpoint is what a rerun resumes from. */
      fprintf(stderr, "ftl: job '%s' failed while stopping on signal %d: %s\n", job->name, res.interrupt_signal,
              res.summary);
      exit_code = FTL_EXIT_SIGTERM;
      break;
    }
    if (!res.retryable) {
      fprintf(stderr, "ftl: job '%s' failed: %s; not restarted (a restart cannot fix this)\n", job->name, res.summary);
      if (res.kind == FTL_FAIL_EXEC) exit_code = FTL_EXIT_LAUNCH;
      break;
    }
    /* "The same step" is judged by progress. For a program that checkpoints through ftl, progress
     * is a newer committed checkpoint (what a restart keeps); otherwise the highest step reported
     * (at most every 250 ms, so "the same" is within that resolution). An attempt that fails
     * without getting past the previous failure adds to the loop; one that got further starts it
     * over. */
    int64_t kept = res.committed_step > res.restored_step ? res.committed_step : res.restored_step;
    int64_t reached = kept >= 0 ? kept : res.last_step;
    same_step_failures = reached <= prev_fail_step ? same_step_failures + 1 : 1;
    if (reached > prev_fail_step) {
      prev_fail_step = reached;
      /* Progress since the last failure: these are independent failures, not one that keeps
       * coming back, so the back-off starts over. */
      backoff_ms = job->backoff_ms;
    }
    if (same_step_failures >= job->crash_loop) {
      fprintf(stderr,
              "ftl: job '%s' failed: crash loop: %d attempts in a row failed at step %lld without getting further; "
              "last failure: %s\n",
              job->name, same_step_failures, (long long)res.last_step, res.summary);
      ftl_events_write(events, "run_stopped", attempt,
                       json_pack("{s:s, s:I, s:i}", "reason", "crash loop", "step", (json_int_t)res.last_step,
                                 "failures", same_step_failures));
      break;
    }
    if (restarts >= job->max_restarts) {
      fprintf(stderr, "ftl: job '%s' failed: %s; the restart budget (%d) is spent\n", job->name, res.summary,
              job->max_restarts);
      ftl_events_write(events, "run_stopped", attempt, json_pack("{s:s, s:i}", "reason", "restart budget spent", "restarts", restarts));
      break;
    }
    if (res.suspect_host[0]) {
      for (size_t i = 0; i < plan.count; i++)
        if (host_matches(plan.hosts[i].name, res.suspect_host, "")) plan.hosts[i].suspect = 1;
      snprintf(suspect, sizeof suspect, "%s", res.suspect_host);
    }
    /* Blamed: a lost host, a hung rank's host, or a host already suspect (a straggler) whose
     * rank failed. */
    const char *blame = res.bad_host[0]                                  ? res.bad_host
                        : res.kind == FTL_FAIL_HANG                      ? res.root_host
                        : suspect[0] && !strcmp(suspect, res.root_host) ? res.root_host
                                                                         : "";
    if (blame[0]) {
      int excluded = 0;
      for (size_t i = 0; i < plan.count; i++)
        if (!plan.hosts[i].bad && host_matches(plan.hosts[i].name, blame, res.bad_host_addrs))
          plan.hosts[i].bad = excluded = 1;
      if (excluded) {
        FTL_LOG(FTL_LOG_WARN, "launcher", "leaving host %s out of the next attempts", blame);
        ftl_events_write(events, "host_excluded", attempt, json_pack("{s:s}", "host", blame));
      } else if (!job->hostfile) {
        FTL_LOG(FTL_LOG_INFO, "launcher", "host %s is suspect, but this job runs on it alone: keeping it", blame);
      }
    }
    restarts++;
    FTL_LOG(FTL_LOG_WARN, "launcher", "attempt %d failed (%s); restart %d of %d in %.1f s", attempt,
            ftl_failure_kind_name(res.kind), restarts, job->max_restarts, (double)backoff_ms / 1000.0);
    ftl_events_write(events, "restart", attempt,
                     json_pack("{s:i, s:i, s:I, s:s}", "restart", restarts, "max_restarts", job->max_restarts,
                               "backoff_ms", (json_int_t)backoff_ms, "after", ftl_failure_kind_name(res.kind)));
    int64_t t0 = ftl_clock_ms();
    int sig = backoff_sleep(backoff_ms);
    pending_backoff_ms = (double)(ftl_clock_ms() - t0);
    if (sig) {
      /* Nothing runs during the back-off, and the last commit is on disk: a stop now is clean. */
      int preempt = sig == SIGTERM || sig == SIGUSR1;
      fprintf(stderr, "ftl: job '%s' stopped by signal %d during the back-off%s\n", job->name, sig,
              preempt ? "; run `ftl run` again to resume" : "");
      exit_code = preempt ? FTL_EXIT_PREEMPTED : FTL_EXIT_SIGINT;
      break;
    }
    backoff_ms = backoff_ms * 2 < job->max_backoff_ms ? backoff_ms * 2 : job->max_backoff_ms;
    attempt++;
  }
  if (n_attempts > 0) report_goodput(events, first_attempt, per, n_attempts);
  ftl_free(per);
  ftl_free(plan.hosts);
  return exit_code;
}
