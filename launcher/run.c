/* launcher/run.c: a job from its first attempt to its end: the restart policy, the failure ledger
 * and the goodput report.
 *
 * The policy itself (budget, crash loops, back-off, bad hosts, min_ranks) is a pure decision in
 * policy.c and the goodput arithmetic is goodput.c; this file carries them out: it runs the
 * attempts on a host plan (the job's hostfile, or under srun the Slurm allocation's nodes:
 * slurm_alloc.h), writes each attempt's hostfile (hosts left out are commented), sleeps the back-off
 * (a signal cuts it short), records the ledgers and prints the goodput report. The ranks of the
 * next attempt restore the last committed step themselves.
 * Failures are appended to RUNDIR/failures.jsonl (docs/formats/failures.md), which outlives runs,
 * and so is each restart's measured cost R (the restart meter below), which the cadence of later
 * attempts and later runs starts from.
 *
 * Map: the host plan (a hostfile's, a Slurm allocation's) and hostfiles; the ledgers (the run's
 * failures.jsonl, the fleet ledger); the restart meter; leaving out unreachable hosts; the back-off
 * and the goodput report; the job's steps (the attempt's hosts, a stop, an exclusion, Slurm ending
 * the job, the meter, restart or stop) and ln_run_job. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef FTL_HAVE_CKPT_IO
#include "checkpoint/door.h"
#endif
#include "core/failure_record.h"
#include "core/jsonl.h"
#include "core/rundir.h"
#include "ftl/cadence.h"
#include "ftl/core.h"
#include "launcher/finish.h"
#include "launcher/fleet.h"
#include "launcher/gang.h"
#include "launcher/goodput.h"
#include "launcher/hostfile.h"
#include "launcher/hostprobe.h"
#include "launcher/launcher.h"
#include "launcher/policy.h"
#include "launcher/pyprog.h"
#include "launcher/slurm_alloc.h"
#include "launcher/standby.h"
#ifdef FTL_HAVE_SNAPSHOT
#include "pipeline/snapshot.h"
#endif

/* ---- the host plan and hostfiles ----------------------------------------------------------- */

typedef struct host_plan {
  ln_policy_host *hosts;
  size_t count;
} host_plan;

/* The job's hostfile, by the strict reader (launcher/hostfile.h; `ftl run` has already refused a
 * bad one before anything started), as the policy's hosts. */
static ftl_err read_hostfile(const char *path, host_plan *plan, ftl_diag *d) {
  ln_hostfile_host *hosts = NULL;
  size_t count = 0;
  ftl_err rc = ln_hostfile_read(path, &hosts, &count, d);
  if (rc) return rc;
  plan->hosts = ftl_calloc(count, sizeof *plan->hosts);
  if (!plan->hosts) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  plan->count = count;
  for (size_t i = 0; i < count; i++) {
    snprintf(plan->hosts[i].name, sizeof plan->hosts[i].name, "%s", hosts[i].name);
    snprintf(plan->hosts[i].line, sizeof plan->hosts[i].line, "%s", hosts[i].line);
    plan->hosts[i].slots = hosts[i].slots;
  }
out:
  ftl_free(hosts);
  return rc;
}

/* Under srun without a hostfile, the allocation's nodes (SLURM_JOB_NODELIST), each with the tasks
 * Slurm gave it (SLURM_TASKS_PER_NODE) as its slots, are the plan, as a hostfile's hosts are: the
 * ranks fill them in order, the nodes beyond are spares, a lost node is left out of the next step
 * (ln_slurm_write_tasks places the ranks). No plan, and srun places the ranks as it likes, when
 * the variables cannot be read or the allocation holds too few tasks for the job (said once). */
static void read_allocation(const ln_job *job, host_plan *plan) {
  if (job->hostfile || ln_gang_resolve_kind(job->launcher, getenv("SLURM_JOB_ID")) != FTL_LAUNCH_SRUN) return;
  ln_slurm_node *nodes = NULL;
  size_t count = 0;
  ftl_diag d = {{0}};
  if (ln_slurm_alloc_from_env(&nodes, &count, &d) != FTL_OK) {
    FTL_LOG(FTL_LOG_WARN, "launcher", "srun places the ranks as it likes, and a lost node cannot be left out: %s",
            d.msg);
    return;
  }
  long tasks = 0;
  for (size_t i = 0; i < count; i++) tasks += nodes[i].tasks;
  int need = job->min_ranks > 0 ? job->min_ranks : job->ranks;
  if (tasks < need) {
    FTL_LOG(FTL_LOG_WARN, "launcher", "srun places the ranks as it likes, and a lost node cannot be left out: the "
            "allocation holds %ld task%s (SLURM_TASKS_PER_NODE), fewer than the job's %d ranks", tasks,
            tasks == 1 ? "" : "s", need);
    goto out;
  }
  plan->hosts = ftl_calloc(count, sizeof *plan->hosts);
  if (!plan->hosts) {
    FTL_LOG(FTL_LOG_WARN, "launcher", "out of memory planning on the allocation's nodes: srun places the ranks");
    goto out;
  }
  plan->count = count;
  int used = 0;
  for (long left = job->ranks; used < (int)count && left > 0; used++) left -= nodes[used].tasks;
  for (size_t i = 0; i < count; i++) {
    snprintf(plan->hosts[i].name, sizeof plan->hosts[i].name, "%s", nodes[i].name);
    snprintf(plan->hosts[i].line, sizeof plan->hosts[i].line, "%s slots=%d", nodes[i].name, nodes[i].tasks);
    plan->hosts[i].slots = nodes[i].tasks;
  }
  FTL_LOG(FTL_LOG_INFO, "launcher", "Slurm allocation: %zu node%s of %ld task%s; the ranks start on %d, %zu spare",
          count, count == 1 ? "" : "s", tasks, tasks == 1 ? "" : "s", used, count - (size_t)used);
out:
  ftl_free(nodes);
}

/* Writes this attempt's hostfile (bad hosts left out). */
static ftl_err write_attempt_hostfile(const host_plan *plan, const char *path, ftl_diag *d) {
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (!mem) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  fprintf(mem, "# written by ftl for this attempt; hosts left out after failures are commented\n");
  for (size_t i = 0; i < plan->count; i++) {
    const ln_policy_host *h = &plan->hosts[i];
    if (h->bad) {
      fprintf(mem, "# left out: %s\n", h->line);
      continue;
    }
    fprintf(mem, "%s\n", h->line);
  }
  fclose(mem);
  ftl_err rc = ftl_write_file_atomic(path, text, len, d);
  free(text);
  return rc;
}

/* ---- the ledgers --------------------------------------------------------------------------- */

/* Appends one record, encoded by core's codec, to the run's ledger (RUNDIR/failures.jsonl),
 * fsynced: the ledger must survive what comes next. Locked, because training programs read it (the cadence) while
 * this launcher appends; a failed append is logged and the run goes on. */
static void run_ledger_append(const char *run_dir, const core_failure_record *r) {
  char path[PATH_MAX];
  ftl_diag d = {{0}};
  json_t *rec = NULL;
  const core_jsonl_opts opts = {.lock = true, .lock_timeout_ms = 10000, .fsync = true};
  if (core_failure_record_encode(r, &rec, &d) != FTL_OK) {
    FTL_LOG(FTL_LOG_WARN, "launcher", "ledger record for %s: %s", run_dir, d.msg);
  } else if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_FAILURES)) {
    FTL_LOG(FTL_LOG_WARN, "launcher", "run directory path too long for its ledger: %s", run_dir);
  } else if (core_jsonl_append(path, rec, &opts, &d) != FTL_OK) {
    FTL_LOG(FTL_LOG_WARN, "launcher", "%s", d.msg);
  }
  json_decref(rec);
}

static void fleet_append(const ln_job *job, const ftl_cadence_record *rec) {
  if (!job->fleet_ledger) return;
  ftl_diag d = {{0}};
  if (ftl_cadence_fleet_append(job->fleet_ledger, rec, 10000, &d) != FTL_OK)
    FTL_LOG(FTL_LOG_WARN, "launcher", "fleet ledger: %s", d.msg);
}

/* The failure (if the attempt failed) and the attempt's exposure (wall time x ranks), in the run's
 * ledger and the fleet's: the cadence controller estimates the failure rate from both. The same
 * wall_us in both lets a reader of the two count a failure once. With a fleet ledger, the GPU
 * verdicts that changed come first, and the failure's GPU and the exposure by host (fleet.h). */
static void ledger_record(const ln_job *job, const char *run_dir, int attempt, int world, const ln_attempt_result *r,
                          int failed, ln_fleet *fleet) {
  int64_t now_us = ftl_wall_us();
  ln_fleet_gpu_records(fleet, job, attempt, world);
  if (failed) {
    core_failure_record f;
    core_failure_record_init(&f, CORE_REC_FAILURE);
    f.present = CORE_FR_DETAIL;
    f.wall_us = now_us;
    f.attempt = attempt;
    f.world_size = world;
    f.step = r->last_step;
    f.rank = r->root_rank;
    f.exit_code = r->exit_code;
    f.signal = r->signal;
    f.detect_lag_ms = r->detect_lag_ms;
    snprintf(f.cause, sizeof f.cause, "%s", ln_failure_kind_name(r->kind));
    snprintf(f.job, sizeof f.job, "%s", job->name);
    snprintf(f.host, sizeof f.host, "%s", r->root_host);
    snprintf(f.bad_host, sizeof f.bad_host, "%s", r->bad_host);
    snprintf(f.message, sizeof f.message, "%s", r->summary);
    run_ledger_append(run_dir, &f);
    ftl_cadence_record rec = {.kind = FTL_CADENCE_REC_FAILURE, .wall_us = now_us, .attempt = attempt,
                              .step = r->last_step, .world_size = world};
    snprintf(rec.cause, sizeof rec.cause, "%s", ln_failure_kind_name(r->kind));
    snprintf(rec.job, sizeof rec.job, "%s", job->name);
    snprintf(rec.host, sizeof rec.host, "%s", r->root_host_unblamed ? "" : r->root_host);
    ln_fleet_fill_failure(fleet, &rec);
    fleet_append(job, &rec);
  }
  double rank_hours = r->end_ms / 3.6e6 * world;
  if (rank_hours <= 0) return;
  if (fleet) { /* both ledgers get the same records, split by host */
    ftl_cadence_record x = {.kind = FTL_CADENCE_REC_EXPOSURE, .wall_us = now_us + 1, .attempt = attempt, .step = -1,
                            .world_size = world, .rank_hours = rank_hours};
    snprintf(x.job, sizeof x.job, "%s", job->name);
    snprintf(x.host, sizeof x.host, "%s", ftl_hostname());
    char path[PATH_MAX];
    ln_fleet_exposure_record(fleet, core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_FAILURES) ? NULL : path, &x);
    return;
  }
  core_failure_record e;
  core_failure_record_init(&e, CORE_REC_EXPOSURE);
  e.wall_us = now_us + 1;
  e.attempt = attempt;
  e.world_size = world;
  e.rank_hours = rank_hours;
  snprintf(e.job, sizeof e.job, "%s", job->name);
  snprintf(e.host, sizeof e.host, "%s", ftl_hostname());
  run_ledger_append(run_dir, &e);
  ftl_cadence_record rec = {.kind = FTL_CADENCE_REC_EXPOSURE, .wall_us = now_us + 1, .attempt = attempt, .step = -1,
                            .world_size = world, .rank_hours = rank_hours};
  snprintf(rec.job, sizeof rec.job, "%s", job->name);
  snprintf(rec.host, sizeof rec.host, "%s", ftl_hostname());
  fleet_append(job, &rec);
}

/* ---- the restart meter ------------------------------------------------------------------------
 * The cost R of each restart after a failure, measured as the cadence means it: from the failure's
 * detection (the `failure` event, or `rendezvous_failed`) to the first resumed step (the `startup`
 * event of the next attempt whose ranks all got past a step), on this launcher's monotonic clock.
 * Attempts between the two that failed before a step (a crash at start, a rendezvous that did not
 * form) are part of that one restart. It is drawn from the event stream (an observer, like the
 * progress line), so the record is written the moment R is known, in both ledgers, with the
 * cadence's own encoder (ftl_cadence_fleet_append): the ranks of later attempts and later runs read
 * it back with ftl_cadence_load_ledger. The ranks of the attempt that closes a measurement have
 * loaded the ledgers before it is known; the attempts after it start from it.
 *
 * File-scope because events outlive ln_run_job (main writes run_end after it) and an observer
 * cannot be removed: the meter is inactive outside ln_run_job. */
typedef struct restart_meter {
  int active;
  const ln_job *job;
  const char *run_dir;
  int world;              /* ranks of the attempt running */
  int64_t failed_ns;      /* ftl_clock_ns() when the pending failure was detected; < 0: none */
  int failed_attempt;
  char cause[32];         /* the pending failure's cause */
  int restored_attempt;   /* rank 0's ckpt_restored: which attempt, which step */
  int64_t restored_step;
  int steps_seen;         /* some rank of the run reported a first step (the program calls ftl_step_done) */
  int started;            /* rank_started events of the attempt after the pending failure */
} restart_meter;
static restart_meter meter;

/* Appends to a ledger at most this long: the meter runs on the launcher's one thread, between
 * the supervision loop's checks. */
#define METER_LOCK_TIMEOUT_MS 2000

static void meter_record(restart_meter *m, int attempt, double restart_s, const char *until) {
  ftl_cadence_record rec = {.kind = FTL_CADENCE_REC_RESTART,
                            .wall_us = ftl_wall_us(),
                            .attempt = attempt,
                            .step = m->restored_attempt == attempt ? m->restored_step : -1,
                            .world_size = m->world,
                            .restart_s = restart_s};
  snprintf(rec.cause, sizeof rec.cause, "%s", m->cause);
  snprintf(rec.job, sizeof rec.job, "%s", m->job->name);
  snprintf(rec.host, sizeof rec.host, "%s", ftl_hostname());
  FTL_LOG(FTL_LOG_INFO, "launcher", "restart cost R = %.2f s: attempt %d's failure (%s) detected to attempt %d's %s",
          restart_s, m->failed_attempt, m->cause, attempt, until);
  char path[PATH_MAX];
  ftl_diag d = {{0}};
  if (core_rundir_path(path, sizeof path, m->run_dir, FTL_RUNDIR_FAILURES))
    FTL_LOG(FTL_LOG_WARN, "launcher", "run directory path too long for its ledger: %s", m->run_dir);
  else if (ftl_cadence_fleet_append(path, &rec, METER_LOCK_TIMEOUT_MS, &d) != FTL_OK)
    FTL_LOG(FTL_LOG_WARN, "launcher", "%s", d.msg);
  if (m->job->fleet_ledger && ftl_cadence_fleet_append(m->job->fleet_ledger, &rec, METER_LOCK_TIMEOUT_MS, &d) != FTL_OK)
    FTL_LOG(FTL_LOG_WARN, "launcher", "fleet ledger: %s", d.msg);
}

/* An ftl_events_observer. ckpt_restored is rank 0's (the checkpoint module's, through the
 * rendezvous connection); failure, rendezvous_failed and startup are the supervisor's own. */
static void meter_observe(void *user, const json_t *line) {
  restart_meter *m = user;
  if (!m->active) return;
  const char *ev = json_string_value(json_object_get(line, "event"));
  int attempt = (int)json_integer_value(json_object_get(line, "attempt"));
  if (!ev) return;
  if (!strcmp(ev, "failure") || !strcmp(ev, "rendezvous_failed")) {
    if (m->failed_ns >= 0) return; /* the restart of an earlier failure has not finished yet */
    m->failed_ns = ftl_clock_ns();
    m->failed_attempt = attempt;
    m->started = 0;
    const char *cause = json_string_value(json_object_get(line, "cause"));
    snprintf(m->cause, sizeof m->cause, "%s", cause ? cause : "rendezvous");
  } else if (!strcmp(ev, "ckpt_restored") && json_integer_value(json_object_get(line, "rank")) == 0) {
    m->restored_attempt = attempt;
    m->restored_step = (int64_t)json_integer_value(json_object_get(line, "step"));
  } else if (!strcmp(ev, "first_step")) {
    m->steps_seen = 1;
  } else if (!strcmp(ev, "startup") && m->failed_ns >= 0 && attempt > m->failed_attempt) {
    double restart_s = (double)(ftl_clock_ns() - m->failed_ns) / 1e9;
    m->failed_ns = -1;
    meter_record(m, attempt, restart_s > 0 ? restart_s : 0, "first step");
  } else if (!strcmp(ev, "rank_started") && m->failed_ns >= 0 && attempt > m->failed_attempt && !m->steps_seen &&
             ++m->started == m->world) {
    /* A program that has reported no step (one that does not use ftl) is measured to its ranks'
     * start: its own start-up and resume are not seen, so this R is the restart's lower bound. */
    double restart_s = (double)(ftl_clock_ns() - m->failed_ns) / 1e9;
    m->failed_ns = -1;
    meter_record(m, attempt, restart_s > 0 ? restart_s : 0, "ranks' start (the program reports no steps)");
  }
}

/* ---- unreachable hosts --------------------------------------------------------------------- */

/* The probe's deadline, all hosts at once (hostprobe.h): a host that answers at all does so in
 * well under a second; this is paid only after an attempt whose ranks never started. */
#define HOST_PROBE_TIMEOUT_MS 2000

/* After an attempt that mpirun could not place (it failed with no rank to blame, or ranks never
 * started by the launch deadline), hostfile hosts that cannot be reached are left out: Open MPI
 * starts a daemon on every host of the hostfile, spares included, so one such host fails every
 * attempt. Two kinds: names that do not resolve on this host, where mpirun's ssh resolves them;
 * and, when ranks never started by the launch deadline (mpirun waits silently for a daemon it
 * cannot start), hosts that do not answer a TCP connection to restart.probe_port (a black-holed
 * host: its network is down). Each is left out like a blamed host (named in the output and, as
 * bad_host, in the ledger); spares then take over. Only after a failure: a name that ssh alone
 * knows (an alias in its config) or a port a firewall drops is never left out of a gang that
 * starts. Returns how many hosts were left out; the first is res's bad host. */
static int leave_out_unreachable(host_plan *plan, ln_attempt_result *res, ln_events *events, int attempt,
                                 int probe_port) {
  int launch_failed = (res->outcome == FTL_ATTEMPT_FAILED && res->kind == FTL_FAIL_LAUNCHER) ||
                      res->outcome == FTL_ATTEMPT_RDZV_FAILED;
  int found = 0;
  int *gai = NULL, *probe_err = NULL;
  const char **probed = NULL;
  size_t n_probed = 0;
  if (!launch_failed || res->bad_host[0] || plan->count == 0) goto out;
  gai = ftl_calloc(plan->count, sizeof *gai);
  probe_err = ftl_calloc(plan->count, sizeof *probe_err);
  probed = ftl_calloc(plan->count, sizeof *probed);
  if (!gai || !probe_err || !probed) goto out; /* nothing is known: no host is left out */
  for (size_t i = 0; i < plan->count; i++) {
    if (plan->hosts[i].bad) continue;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    gai[i] = getaddrinfo(plan->hosts[i].name, NULL, &hints, &ai);
    if (ai) freeaddrinfo(ai);
    if (gai[i] == 0) probed[n_probed++] = plan->hosts[i].name;
  }
  if (res->never_started > 0 && n_probed > 0) {
    int *err = ftl_calloc(n_probed, sizeof *err);
    if (err) {
      ln_hostprobe_run(probed, n_probed, probe_port, HOST_PROBE_TIMEOUT_MS, err);
      /* probed[] holds the resolvable good hosts in plan order: map the answers back. */
      for (size_t i = 0, k = 0; i < plan->count && k < n_probed; i++)
        if (!plan->hosts[i].bad && gai[i] == 0) probe_err[i] = err[k++];
    }
    ftl_free(err);
  }
  char names[512] = "";
  size_t used = 0;
  for (size_t i = 0; i < plan->count; i++) {
    ln_policy_host *h = &plan->hosts[i];
    if (h->bad || (gai[i] == 0 && probe_err[i] == 0)) continue;
    h->bad = 1;
    if (!found++) {
      /* Cut at 63 bytes at worst: the host is already left out above; these only name it. */
      (void)ftl_fmt(res->bad_host, sizeof res->bad_host, "%s", h->name);
      (void)ftl_fmt(res->root_host, sizeof res->root_host, "%s", h->name);
    }
    char reason[160], why[64];
    if (gai[i] != 0) {
      (void)ftl_fmt(reason, sizeof reason, "%s", gai_strerror(gai[i])); /* cut at worst: only a message */
      (void)ftl_fmt(why, sizeof why, "the name does not resolve");
      FTL_LOG(FTL_LOG_ERROR, "launcher", "host %s cannot be reached: its name does not resolve (%s); leaving it out",
              h->name, reason);
    } else {
      (void)ftl_fmt(reason, sizeof reason, "no answer on TCP port %d within %.1f s: %s", probe_port,
                    HOST_PROBE_TIMEOUT_MS / 1000.0, strerror(probe_err[i]));
      (void)ftl_fmt(why, sizeof why, "no answer on port %d", probe_port);
      FTL_LOG(FTL_LOG_ERROR, "launcher", "host %s cannot be reached: %s (restart.probe_port); leaving it out", h->name,
              reason);
    }
    if (used < sizeof names)
      used += (size_t)snprintf(names + used, sizeof names - used, "%s%s (%s)", used ? ", " : "", h->name, why);
    ln_events_write(events, "host_unreachable", attempt, json_pack("{s:s, s:s}", "host", h->name, "reason", reason));
  }
  if (found) {
    char summary[sizeof res->summary];
    ftl_fmt(summary, sizeof summary, "unreachable host%s %s: %s", found == 1 ? "" : "s", names,
            res->summary); /* truncated at worst: it is only a message */
    memcpy(res->summary, summary, sizeof summary);
  }
out:
  ftl_free(gai);
  ftl_free(probe_err);
  ftl_free(probed);
  return found;
}

/* ---- the back-off and the goodput report --------------------------------------------------- */

static volatile sig_atomic_t backoff_signal;
static void on_backoff_signal(int sig) { backoff_signal = sig; }

/* Sleeps ms unless SIGINT/SIGTERM/SIGUSR1/SIGHUP arrives first; returns that signal or 0. A live
 * standby gang is looked after meanwhile (its agents pinged, its death noticed). */
static int backoff_sleep(int64_t ms, ln_standby *sb) {
  const int sigs[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};
  struct sigaction sa = {.sa_handler = on_backoff_signal}, old[4];
  sigemptyset(&sa.sa_mask);
  backoff_signal = 0;
  for (int i = 0; i < 4; i++) sigaction(sigs[i], &sa, &old[i]);
  int64_t deadline = ftl_deadline_after_ms(ms);
  while (!backoff_signal && ftl_deadline_left_ms(deadline) > 0) {
    struct pollfd fds[256];
    size_t n = ln_standby_pollfds(sb, fds, sizeof fds / sizeof *fds);
    int left = ftl_deadline_left_ms(deadline);
    int pr = poll(fds, (nfds_t)n, left < 20 ? left : 20);
    ln_standby_turn(sb, fds, pr > 0 ? n : 0);
  }
  for (int i = 0; i < 4; i++) sigaction(sigs[i], &old[i], NULL);
  return backoff_signal;
}

/* Useful work: goodput × MFU, on the run_goodput event and one line of the summary; nothing when no
 * rank reported FLOPs (docs/gpu.md, "Useful work: MFU"). */
static void report_useful_work(json_t *fields, const ln_mfu_run *mfu, int measured, double pct) {
  if (!mfu->reported) return;
  char line[600];
  ln_mfu_phrase(line, sizeof line, measured ? pct : -1, mfu->mfu, mfu->source, mfu->peak);
  fprintf(stderr, "ftl: %s\n", line);
  if (!fields) return;
  json_object_set_new(fields, "mfu_peak_source", json_string(ln_peak_source_name(mfu->source)));
  json_object_set_new(fields, "mfu_peak", json_string(mfu->peak));
  if (mfu->mfu < 0) return;
  json_object_set_new(fields, "mfu_pct", json_real(100 * mfu->mfu));
  if (measured) json_object_set_new(fields, "useful_work_pct", json_real(pct * mfu->mfu));
}

static void report_goodput(ln_events *events, int first_attempt, const ln_goodput *per, int n, const ln_mfu_run *mfu) {
  ln_goodput t = ln_goodput_sum(per, n);
  double pct = ln_goodput_pct(&t);
  int measured = ln_goodput_measured(&t);
  json_t *fields = json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "attempts", n, "wall_ms", t.wall_ms,
                             "productive_ms", t.productive_ms, "startup_ms", t.startup_ms, "ckpt_stall_ms", t.stall_ms,
                             "lost_work_ms", t.lost_ms, "teardown_ms", t.teardown_ms, "backoff_ms", t.backoff_ms,
                             "unreported_ms", t.unreported_ms);
  /* No goodput_pct for a run that reported no step: its productive time is not known, not 0. */
  if (fields && measured) json_object_set_new(fields, "goodput_pct", json_real(pct));
  if (measured)
    fprintf(stderr, "ftl: goodput %.1f%% of %.1f s over %d attempt%s\n", pct, t.wall_ms / 1000, n, n == 1 ? "" : "s");
  else
    fprintf(stderr,
            "ftl: goodput not measured: the program reports no steps (ftl_step_done), so its %.1f s of running are "
            "not split; %.1f s over %d attempt%s\n",
            t.unreported_ms / 1000, t.wall_ms / 1000, n, n == 1 ? "" : "s");
  report_useful_work(fields, mfu, measured, pct);
  ln_events_write(events, "run_goodput", first_attempt + n - 1, fields);
  fprintf(stderr, "  %-7s %9s %10s %11s %10s %8s %10s %9s%s\n", "attempt", "wall s", "start-up s", "productive s",
          "ckpt stall", "lost s", "teardown s", "backoff s", t.unreported_ms > 0 ? " running s" : "");
  for (int i = 0; i < n; i++) {
    fprintf(stderr, "  %-7d %9.2f %10.2f %11.2f %10.2f %8.2f %10.2f %9.2f", first_attempt + i, per[i].wall_ms / 1000,
            per[i].startup_ms / 1000, per[i].productive_ms / 1000, per[i].stall_ms / 1000, per[i].lost_ms / 1000,
            per[i].teardown_ms / 1000, per[i].backoff_ms / 1000);
    if (t.unreported_ms > 0) fprintf(stderr, " %9.2f", per[i].unreported_ms / 1000);
    fprintf(stderr, "\n");
  }
}

/* ---- the job ------------------------------------------------------------------------------- */

enum { RUN_GO_ON = -1 }; /* plan_attempt_hosts: the attempt can start */

/* The attempt's hostfile (the hosts still in the plan, in the attempt's folder) and its world size
 * (fewer ranks than the job's down to min_ranks when hosts were left out). RUN_GO_ON, or ftl's
 * exit code when the job cannot go on. */
static int plan_attempt_hosts(const ln_job *job, const ln_policy_config *cfg, const host_plan *plan,
                              const char *run_dir, int attempt, ln_events *events, char *hostfile, size_t size,
                              int *world) {
  ftl_diag d = {{0}};
  char dir[PATH_MAX];
  int slots = 0;
  if (core_rundir_attempt_dir(dir, sizeof dir, run_dir, attempt) || ftl_mkdir_p(dir, &d) ||
      core_rundir_attempt_hostfile(hostfile, size, dir) || write_attempt_hostfile(plan, hostfile, &d)) {
    fprintf(stderr, "ftl run: %s\n", d.msg[0] ? d.msg : "path too long");
    return FTL_EXIT_INTERNAL;
  }
  int min = job->min_ranks > 0 ? job->min_ranks : job->ranks;
  if (ln_policy_world_size(cfg, plan->hosts, plan->count, world, &slots) != 0) {
    fprintf(stderr, "ftl: job '%s' cannot go on: the hosts left hold %d slot%s, fewer than the %d ranks it needs%s\n",
            job->name, slots, slots == 1 ? "" : "s", min, job->min_ranks > 0 ? " (min_ranks)" : "");
    ln_events_write(events, "run_stopped", attempt, json_pack("{s:s, s:i}", "reason", "not enough hosts", "slots", slots));
    return FTL_EXIT_JOB_FAILED;
  }
  if (*world < job->ranks)
    FTL_LOG(FTL_LOG_WARN, "launcher", "continuing with %d ranks instead of %d (min_ranks %d)", *world, job->ranks, min);
  return RUN_GO_ON;
}

/* The run_stopped event of a policy's stop. */
static void write_stopped(ln_events *events, int attempt, const ln_policy_decision *dec, const ln_attempt_result *res) {
  if (dec->why == FTL_STOP_CRASH_LOOP)
    ln_events_write(events, "run_stopped", attempt,
                     json_pack("{s:s, s:I, s:i}", "reason", "crash loop", "step", (json_int_t)res->last_step, "failures",
                               dec->next.same_step_failures));
  else if (dec->why == FTL_STOP_BUDGET)
    ln_events_write(events, "run_stopped", attempt,
                     json_pack("{s:s, s:i}", "reason", "restart budget spent", "restarts", dec->next.restarts));
  else if (dec->why == FTL_STOP_NO_HOSTS)
    ln_events_write(events, "run_stopped", attempt, json_pack("{s:s, s:i}", "reason", "not enough hosts", "slots", dec->slots));
}

/* The failed host the policy named, and the hosts with a degraded GPU (rule 5b), left out of the
 * plan when it decided so; a degraded host kept for want of a spare is said too. */
static void exclude_host(const ln_policy_decision *dec, const ln_attempt_result *res,
                         host_plan *plan, ln_events *events, int attempt) {
  ln_policy_apply_hosts(dec, res, plan->hosts, plan->count);
  for (int k = 0; k < dec->n_degraded; k++) {
    const char *host = res->degraded[dec->degraded[k].of].host, *why = res->degraded[dec->degraded[k].of].why;
    if (dec->degraded[k].left_out) {
      FTL_LOG(FTL_LOG_WARN, "launcher", "leaving host %s out of the next attempts: its %s (a spare takes its place)",
              host, why);
      ln_events_write(events, "host_excluded", attempt,
                      json_pack("{s:s, s:s, s:s}", "host", host, "reason", "gpu_degraded", "detail", why));
    } else {
      FTL_LOG(FTL_LOG_WARN, "launcher", "keeping host %s in the next attempt although its %s: no spare host can "
              "take its place", host, why);
      ln_events_write(events, "host_kept_degraded", attempt, json_pack("{s:s, s:s}", "host", host, "detail", why));
    }
  }
  if (!dec->exclude_host[0]) return;
  if (dec->excluded) {
    FTL_LOG(FTL_LOG_WARN, "launcher", "leaving host %s out of the next attempts", dec->exclude_host);
    ln_events_write(events, "host_excluded", attempt,
                    json_pack("{s:s, s:s}", "host", dec->exclude_host, "reason", ln_failure_kind_name(res->kind)));
  } else if (!plan->count) {
    FTL_LOG(FTL_LOG_INFO, "launcher", "the failure was on host %s, but this job runs there alone: nothing to leave out",
            dec->exclude_host);
  }
}

/* The restart meter (meter_observe) set on this job's event log. Once per process: the meter is
 * file-scope, and an observer is never removed. */
static void start_metering(const ln_job *job, const char *run_dir, ln_events *events) {
  static ln_events *metered;
  ftl_diag d = {{0}};
  if (events && metered != events) {
    if (ln_events_observe(events, meter_observe, &meter, &d) == FTL_OK)
      metered = events;
    else
      FTL_LOG(FTL_LOG_WARN, "launcher", "restart costs will not be measured: %s", d.msg);
  }
  meter = (restart_meter){.active = 1, .job = job, .run_dir = run_dir, .failed_ns = -1, .restored_attempt = -1};
}

/* After a failed attempt: the policy's decision (stop, or restart after a back-off without the bad
 * host), the back-off itself, and a relaunch's check of the inputs. RUN_GO_ON to start the next
 * attempt, else ftl's exit code. */
static int restart_or_stop(const ln_job *job, const ln_policy_config *cfg, ln_policy_state *history,
                           ln_attempt_result *res, host_plan *plan, const char *run_dir, ln_events *events,
                           int attempt, int unreachable, int64_t ended_at, ln_standby *standby,
                           double *pending_backoff_ms) {
  ln_policy_decision dec;
  ln_policy_decide(cfg, history, res, plan->hosts, plan->count, job->name, run_dir, &dec);
  *history = dec.next;
  if (dec.action == FTL_POLICY_STOP) {
    fprintf(stderr, "ftl: %s\n", dec.message);
    if (unreachable && dec.why == FTL_STOP_NO_HOSTS) fprintf(stderr, "ftl: left out: %s\n", res->summary);
    write_stopped(events, attempt, &dec, res);
    return dec.exit_code;
  }
  exclude_host(&dec, res, plan, events, attempt);
  FTL_LOG(FTL_LOG_WARN, "launcher", "attempt %d %s", attempt, dec.message);
  ln_events_write(events, "restart", attempt,
                  json_pack("{s:i, s:i, s:I, s:s}", "restart", history->restarts, "max_restarts", job->max_restarts,
                            "backoff_ms", (json_int_t)dec.backoff_ms, "after", ln_failure_kind_name(res->kind)));
  int64_t t0 = ftl_clock_ms();
  /* The back-off is counted from the failure itself (its detection less the detection lag the
   * agent measured): the detection, the old gang's teardown and the bookkeeping since (ledger,
   * policy) are part of the pause (a warm restart's teardown is most of it). */
  int64_t pause_ms = dec.backoff_ms - (t0 - ended_at);
  if (res->failure_ms >= 0 && res->end_ms >= res->failure_ms)
    pause_ms -= (int64_t)(res->end_ms - res->failure_ms +
                          (res->detect_lag_ms > 0 && res->detect_lag_ms < 1000 ? res->detect_lag_ms : 0)); /* clocks of two hosts */
  int sig = backoff_sleep(pause_ms > 0 ? pause_ms : 0, standby);
  *pending_backoff_ms = (double)(ftl_clock_ms() - t0);
  if (sig) {
    int exit_code = ln_policy_backoff_signal_exit(sig);
    fprintf(stderr, "ftl: job '%s' stopped by signal %d during the back-off%s\n", job->name, sig,
            exit_code == FTL_EXIT_PREEMPTED ? "; run `ftl run` again to resume" : "");
    return exit_code;
  }
#ifdef FTL_HAVE_SNAPSHOT
  /* A relaunch reads the same inputs as the first attempt, or none: an input changed since
   * submission ends the job, naming the file (docs/pipeline.md). */
  ftl_diag vd = {{0}};
  ftl_err vrc = pl_snapshot_verify_run_dir(run_dir, &vd);
  if (vrc && vrc != FTL_ERR_NOTFOUND) {
    fprintf(stderr, "ftl: job '%s' not relaunched: %s\n", job->name, vd.msg);
    ln_events_write(events, "run_stopped", attempt, json_pack("{s:s, s:s}", "reason", "input changed", "message", vd.msg));
    return FTL_EXIT_JOB_FAILED;
  }
#endif
  return RUN_GO_ON;
}

/* Under srun, a failed attempt may be Slurm ending the job (scontrol requeue, a preemption, scancel,
 * a time limit): each node's slurmd signals the steps' tasks first and the batch step, ftl's, only
 * once they have ended, so the ranks' SIGTERM deaths can reach ftl seconds before its own SIGTERM
 * (a step slow to end holds it back: measured, 2.5 s). Before it counts a failure and relaunches,
 * ftl asks Slurm (scontrol, 3 s at most): a job no longer RUNNING is not relaunched (a new step
 * would be refused: "Job is pending execution") and its ranks' deaths are no failure; ftl exits
 * 143, stopped without a clean stop, and Slurm requeues or ends the job itself. 1 when so. */
enum { SLURM_STATE_TIMEOUT_MS = 3000 };
static int slurm_ends_job(const ln_job *job, ln_events *events, int attempt) {
  const char *id = getenv("SLURM_JOB_ID");
  if (!id || !*id || ln_gang_resolve_kind(job->launcher, id) != FTL_LAUNCH_SRUN) return 0;
  char state[32];
  ftl_diag d = {{0}};
  if (ln_slurm_job_state(id, SLURM_STATE_TIMEOUT_MS, state, sizeof state, &d) != FTL_OK) {
    FTL_LOG(FTL_LOG_WARN, "launcher", "cannot ask Slurm whether it is ending job %s (%s): relaunching", id, d.msg);
    return 0;
  }
  if (!strcmp(state, "RUNNING")) return 0;
  fprintf(stderr, "ftl: job '%s' not relaunched: Slurm is ending job %s (JobState=%s), which it requeues or ends "
          "itself; a rerun resumes from the last commit\n", job->name, id, state);
  ln_events_write(events, "run_stopped", attempt,
                  json_pack("{s:s, s:s, s:s}", "reason", "slurm ends the job", "slurm_job_id", id, "job_state", state));
  return 1;
}

/* A Python program that may never call ftl_init runs through launcher/pyrun.py whenever it may be
 * restarted (restarts allowed, restart.python_runner not off): its standby then parks in the runner
 * with the modules the attempt imported, and a cold restart's ranks wait for rank 0's TCPStore rather
 * than torch's one-second retry (pyrun.py). A Python program that
 * cannot run so is said once, with why; its restarts are cold unless it calls ftl_init. Only an
 * out of memory is an error. */
static ftl_err plan_python_runner(const ln_job *job, const char *program, const char *ftl_exe, ln_events *events,
                                  int attempt, ln_pyprog *out) {
  if (job->max_restarts == 0 || job->python_runner == 0) return FTL_OK;
  ftl_diag d = {{0}};
  ftl_err rc = ln_pyprog_plan(program, job->args, ftl_exe, job->working_dir, out, &d);
  if (rc) return rc;
  if (!out->is_python) return FTL_OK;
  if (out->argv) {
    ln_events_write(events, "python_runner", attempt, json_pack("{s:b, s:s}", "used", 1, "runner", out->runner));
    return FTL_OK;
  }
  FTL_LOG(FTL_LOG_WARN, "launcher", "the standby cannot preload this Python program (%s): its restarts are cold "
          "unless it calls ftl.init()", out->why_not);
  ln_events_write(events, "python_runner", attempt, json_pack("{s:b, s:s}", "used", 0, "reason", out->why_not));
  return FTL_OK;
}

int ln_run_job(const ln_job *job, const char *run_dir, const char *ftl_exe, const char *program,
                const char *rdzv_bind, const char *rdzv_host, int kill_grace_ms, ln_events *events) {
  ftl_diag d = {{0}};
  host_plan plan = {0};
  ln_goodput *per = NULL;
  ln_mfu_run mfu_sum; /* the attempts' model FLOPs utilisation, for the summary's useful work */
  ln_mfu_run_init(&mfu_sum);
  int exit_code = FTL_EXIT_JOB_FAILED;
  int first_attempt = core_rundir_next_attempt(run_dir), attempt = first_attempt;
  int n_attempts = 0;
  double pending_backoff_ms = 0;
  ln_policy_config cfg = ln_policy_config_of(job);
  ln_policy_state history;
  ln_policy_state_init(&history, &cfg);
  ln_standby standby;
  ln_standby_init(&standby, job, events);
  ln_pyprog pyprog = {0};
  int calls_ftl_init = 0; /* some attempt's ranks joined the rendezvous: the program uses the library */

  if (job->hostfile && read_hostfile(job->hostfile, &plan, &d)) {
    fprintf(stderr, "ftl run: %s\n", d.msg);
    return FTL_EXIT_USAGE;
  }
  read_allocation(job, &plan);
  cfg.have_hostfile = plan.count > 0; /* the policy's hosts: a hostfile's, or the allocation's nodes */
  per = ftl_calloc((size_t)job->max_restarts + 2, sizeof *per);
  if (!per || plan_python_runner(job, program, ftl_exe, events, first_attempt, &pyprog) != FTL_OK) {
    fprintf(stderr, "ftl run: out of memory\n");
    ftl_free(per);
    return FTL_EXIT_INTERNAL;
  }
  start_metering(job, run_dir, events);
  ln_fleet *fleet = ln_fleet_open(job); /* the fleet's per-host history, and this job's records in it */
  ln_fleet_plan_start(fleet, job, plan.hosts, plan.count, events, first_attempt);

  for (;;) {
    int world = job->ranks;
    char hostfile[PATH_MAX] = "";
    int planned = plan.count ? plan_attempt_hosts(job, &cfg, &plan, run_dir, attempt, events, hostfile,
                                                  sizeof hostfile, &world)
                             : RUN_GO_ON;
    if (planned != RUN_GO_ON) {
      exit_code = planned;
      break;
    }

    ln_attempt_opts o = {.job = job,
                          .world_size = world,
                          .hostfile = plan.count ? hostfile : NULL,
                          .run_dir = run_dir,
                          .attempt = attempt,
                          .ftl_exe = ftl_exe,
                          .program = program,
                          .rdzv_bind = rdzv_bind,
                          .rdzv_host = rdzv_host,
                          .kill_grace_ms = kill_grace_ms,
                          .events = events,
                          .standby = &standby,
                          .pyrun_argv = pyprog.argv,
                          /* what the runner of a cold attempt learns from them: whether the
                           * program starts torch.distributed (launcher/pyrun.py); not for one
                           * that calls ftl_init, whose ranks meet there first */
                          .preload = pyprog.argv && !calls_ftl_init ? standby.preload : NULL,
                          .fleet = fleet,
                          .gang_hosts = ln_fleet_attempt_begin(fleet, plan.hosts, plan.count, world)};
    ln_attempt_result res;
    meter.world = world;
    ftl_err rc_run = ln_attempt_run(&o, &res, &d);
    int64_t ended_at = ftl_clock_ms(); /* res.end_ms's moment, near enough: the back-off counts from it */
    if (rc_run) {
      fprintf(stderr, "ftl run: %s\n", d.msg);
      exit_code = FTL_EXIT_INTERNAL;
      break;
    }
    per[n_attempts++] = ln_goodput_of_attempt(&res, pending_backoff_ms);
    ln_mfu_run_add(&mfu_sum, &res.mfu);
    if (res.joined > 0) calls_ftl_init = 1;
    int failed = res.outcome == FTL_ATTEMPT_FAILED || res.outcome == FTL_ATTEMPT_RDZV_FAILED;
    int slurm_ending = failed && slurm_ends_job(job, events, attempt);
    if (slurm_ending) failed = 0; /* Slurm ended the ranks: no failure of theirs (slurm_ends_job) */
    int unreachable = job->hostfile ? leave_out_unreachable(&plan, &res, events, attempt, job->probe_port) : 0;
    ledger_record(job, run_dir, attempt, world, &res, failed, fleet);
    if (slurm_ending) {
      exit_code = FTL_EXIT_SIGTERM;
      break;
    }
    /* A failure after the program committed its final adapter came after the training's end:
     * nothing is restarted, since the next attempt would only train again what final/ holds. */
    if (failed && ln_final_committed(run_dir)) {
      fprintf(stderr, "ftl: %s after the training ended (final/ committed): not restarting\n", res.summary);
      ln_events_write(events, "trained_before_failure", attempt, json_pack("{s:s}", "cause", ln_failure_kind_name(res.kind)));
      exit_code = FTL_EXIT_OK;
      break;
    }

    int next = restart_or_stop(job, &cfg, &history, &res, &plan, run_dir, events, attempt, unreachable, ended_at,
                               &standby, &pending_backoff_ms);
    if (next != RUN_GO_ON) {
      exit_code = next;
      break;
    }
    attempt++;
  }
  ln_standby_drop(&standby, exit_code == FTL_EXIT_OK ? "the job is over" : "the job stopped");
  ln_pyprog_free(&pyprog);
#ifdef FTL_HAVE_CKPT_IO
  /* A finished job restores from nothing more: its L1 copies on this host go (other hosts' are
   * replaced by their next run's or gone with a reboot). A stopped job keeps them: a requeue on
   * the same host restores from memory. */
  if (exit_code == FTL_EXIT_OK && ln_job_ckpt_l1(job))
    ck_l1_forget_run(ln_job_ckpt_l1_root(job), run_dir);
#endif
  meter.active = 0;
  if (n_attempts > 0) report_goodput(events, first_attempt, per, n_attempts, &mfu_sum);
  ftl_free(per);
  ftl_free(plan.hosts);
  ln_fleet_close(fleet);
  return exit_code;
}
