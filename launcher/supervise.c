/* launcher/supervise.c: one attempt of a job, from spawning the gang to knowing how every rank
 * ended, with the failure detectors that end it early.
 *
 * The launcher is one thread around one poll() loop: the rendezvous server's sockets (ranks and
 * their agents report there; one epoll set, polled as one descriptor: rendezvous/server.c), a
 * self-pipe for signals (SIGCHLD, and the ones we act on), and timers in a heap (core/evloop.h):
 * the detectors' scans over every rank run every 100 ms, not on every message (docs/scale.md).
 * Detectors, with their latency:
 *   - a rank that exits or is killed: its agent reports at once (milliseconds);
 *   - a hang: a rank silent for its section's timeout (start-up, step, checkpoint), + <= 100 ms;
 *   - a lost host: every agent on it silent for timeouts.node_s (agents report every second);
 *   - a lost agent: a connection dropped without an exit report, blamed after 250 ms unless a
 *     rank failure arrives meanwhile (mpirun kills the other agents when a rank fails).
 * The detectors themselves are pure functions of the ranks' state and the clock (detect.c); this
 * file feeds them and acts on what they find. The first failure is the root cause; the whole gang
 * is then ended at once through the agents rather than by waiting for mpirun. After mpirun is
 * gone, any local process that still carries this attempt's token is killed, so nothing of the job
 * outlives the attempt on this host.
 *
 * An attempt goes through explicit phases (ln_attempt_phase, attempt_state.h; logged on change):
 * launching, rendezvous, running, stopping (a preemption), ending (ftl ends the gang), draining
 * (mpirun is gone, the last reports are read), ended. The phases' rules, the judging of exit
 * reports and the attempt's conclusion are pure functions there; this file holds the I/O. The
 * gang's launcher process gets its environment as an envp built for this attempt
 * (attempt_env.h): the launcher's own environment never holds an attempt's token or rendezvous
 * address, so nothing it starts later inherits a dead attempt's.
 *
 * mpirun or srun is started through core/proc.h (its own process group; its SIGKILL at the ending
 * deadline is core_proc_kill_at's).
 *
 * Map: rank state and phases; ending the gang and the root cause; the rendezvous server's events;
 * the detectors' glue; preemption; the conclusion; the attempt's set-up; spawning the gang; the
 * poll loop and its turns; finishing.
 *
 * Why one file (issue 33): what is left here is the attempt's I/O, and every part of it (the
 * rendezvous events' handlers, the detectors' glue, preemption, set-up, spawning, the poll loop)
 * reads and writes one private struct, attempt, that no other file should see. What needs no
 * attempt already lives elsewhere: the phases' rules, the judging of exit reports and the
 * conclusion (attempt_state.c) and the detectors (detect.c), both pure; the token, the gang's
 * command line and environment and the sweep of leftovers (attempt_env.c); the standby gang
 * (standby.c).
 *
 * Not here: deciding whether to restart (policy.c, run.c). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/evloop.h"
#include "core/failure_record.h"
#include "core/fence.h"
#include "core/proc.h"
#include "core/rundir.h"
#include "ftl/core.h"
#include "launcher/attempt_env.h"
#include "launcher/attempt_state.h"
#include "launcher/detect.h"
#include "launcher/fleet.h"
#include "launcher/gang.h"
#include "launcher/goodput.h"
#include "launcher/hostfile.h"
#include "launcher/launcher.h"
#include "launcher/progress.h"
#include "launcher/runview.h"
#include "launcher/sigpipe.h"
#include "launcher/standby.h"
#include "rendezvous/server.h"
#include "rendezvous/wire.h"

static const char *msg_str(const json_t *msg, const char *key) { return rz_wire_str(msg, key, ""); }

/* ---- rank state and phases ------------------------------------------------------------------- */

/* What the launcher keeps about one rank besides what the detectors read (ln_rank_watch). */
typedef struct rank_state {
  int64_t hello_ms;     /* agent said hello (launcher clock) */
  char addrs[512];      /* the agent's host addresses */
  double phases[3];     /* rendezvous, mpi_init, comm_init as the rank measured them */
  int ready;
  int joined;           /* said its rank's hello to the rendezvous */
  double first_step_ms;
  int first_step_seen;
  int exit_code, signal;
  int imports_reported; /* its Python runner said what the program imported at start-up (pyrun.py) */
  int has_local_rank, local_rank; /* its ready report's local_rank (which GPU is its: stragglers) */
  double straggler_ratio;         /* reported a straggler this many times the others' median (0: not) */
  int straggler_gpu_said;         /* its GPU was said not healthy beside its straggling (once) */
} rank_state;

typedef struct attempt {
  const ln_attempt_opts *o;
  ln_attempt_result *res;
  rz_rdzv_server *server;
  rank_state *ranks;
  ln_rank_watch *watch;   /* what the detectors read, one per rank */
  ln_detect_limits limits;
  int world;
  char attempt_dir[PATH_MAX];
  int64_t start_ms;
  int64_t rdzv_deadline_ms;
  core_proc gang;          /* mpirun or srun, in its own process group */
  int64_t rejections;      /* connections refused (rendezvous_rejected): the first ones are logged */
  ln_phases ph;
  int64_t stop_deadline_ms;
  int have_root;           /* the root cause is recorded */
  const char *token;       /* this attempt's (ln_attempt_run's buffer) */
  int imports_reported;    /* ranks whose Python runner reported its start-up imports: all of them
                              means the program's start-up is over (launcher/pyrun.py) */
  int lost_rank;           /* an agent whose connection dropped without an exit report, or -1 */
  int64_t lost_ms;
  /* A rank killed by a SIGTERM ftl did not send (or failing while an agent has vanished), held for
   * LOST_AGENT_SETTLE_MS before it is named the root cause: when a host is lost, mpirun ends the
   * ranks on the other hosts with SIGTERM, and those deaths can be reported before the lost host's
   * agents are seen to vanish. */
  int term_rank;           /* or -1 */
  int term_code, term_sig;
  int64_t term_ms;
  double term_lag_ms;
  int agents_up;           /* agents that said hello */
  int first_step_count;
  int early_stop;          /* a stop request came before the gang formed: the ranks were ended at
                              once and the stop is clean (nothing of this attempt was trained) */
  int64_t rdzv_end_ms;     /* the rendezvous failed and the joined ranks were told why: the gang is
                              ended once they have gone (they return from ftl_init with the reason,
                              which must reach their output first), or at this deadline */
  int detect_due;          /* the detectors' timer fired: check_running runs them this turn */
  int64_t hosts_due_ms, hangs_due_ms; /* before these the scans cannot find anything (detect.h) */
  int batch_ms, ping_ms;   /* the gang's cadence: its relays' batch period, the agents' ping (cadence) */
  int hosts_dirty;         /* the watch's hosts are to be copied again, all of them (refresh_hosts) */
  int warm;                /* this attempt took over the standby gang (launcher/standby.h) */
  json_t **standby_hello;  /* its agents' hellos, replayed as this attempt's (owned) */
  ln_gang_launch *launch;  /* how the gang is started; a taken-over standby's session folder lands here */
  ln_mfu *mfu;             /* model FLOPs utilisation: the ranks' FLOPs and devices (mfu.h) */
  ln_runview gpu_view;     /* each host's latest GPU verdicts in this attempt (its gpu_health events,
                              folded as ftl status folds them), said beside a straggler */
  int stragglers;          /* ranks reported as stragglers */
} attempt;

static int was(const attempt *a, ln_attempt_phase p) { return ln_phase_was(&a->ph, p); }
static int reaped(const attempt *a) { return a->ph.phase >= LN_PHASE_DRAINING; }

/* Moves the attempt to phase p (ln_phase_enter's rules) and logs the change. */
static void set_phase(attempt *a, ln_attempt_phase p) {
  ln_attempt_phase from = a->ph.phase;
  if (!ln_phase_enter(&a->ph, p)) return;
  FTL_LOG(FTL_LOG_DEBUG, "launcher", "attempt %d: %s -> %s (%.0f ms)", a->o->attempt, ln_phase_name(from),
          ln_phase_name(p), a->start_ms ? (double)(ftl_clock_ms() - a->start_ms) : 0.0);
}

/* The life phases follow from the agents and the rendezvous. */
static void update_life_phase(attempt *a) {
  ln_attempt_phase p = ln_life_phase(a->ph.phase, rz_rdzv_server_joined(a->server), rz_rdzv_server_went(a->server),
                                     a->agents_up, a->world);
  if (p != a->ph.phase) set_phase(a, p);
}

/* The detectors read each rank's host as the rendezvous server last heard it. A host is learnt
 * from a hello only: each hello's rank has its copy made then (note_host), and the whole copy is
 * made only at the start and after an event of no known rank (not on every scan: at 16k ranks that
 * was a fifth of the launcher's steady CPU, and O(N) per scan through the rendezvous; docs/scale.md). */
static void note_host(attempt *a, int rank) {
  if (rank >= 0 && rank < a->world) a->watch[rank].host = rz_rdzv_server_host(a->server, rank);
  else a->hosts_dirty = 1;
}

static void refresh_hosts(attempt *a) {
  if (!a->hosts_dirty) return;
  a->hosts_dirty = 0;
  for (int i = 0; i < a->world; i++) a->watch[i].host = rz_rdzv_server_host(a->server, i);
}

static double since_start(const attempt *a) { return (double)(ftl_clock_ms() - a->start_ms); }

/* ---- ending the gang and the root cause ------------------------------------------------------ */

/* Ends the gang: the agents pass the signal to their programs at once and SIGKILL them after the
 * grace period. mpirun is not signalled here: it would take a second or more to pass the signal on
 * and then SIGKILL the agents early, cutting the grace short. It exits when its ranks have; if it
 * has not by the deadline, its whole process group is killed. */
static void terminate_gang(attempt *a, int sig) {
  if (reaped(a)) return;
  if (a->ph.phase != LN_PHASE_ENDING) {
    set_phase(a, LN_PHASE_ENDING);
    core_proc_kill_at(&a->gang, ftl_deadline_after_ms(a->o->kill_grace_ms + 2000));
  }
  rz_rdzv_server_signal_agents(a->server, sig);
}

/* Records the root cause (the first failure only), logs it, and ends the gang. */
static void set_root(attempt *a, ln_failure_kind kind, int rank, int code, int sig, const char *how_override,
                     const char *bad_host) {
  if (a->have_root) return;
  a->have_root = 1;
  ln_attempt_result *r = a->res;
  r->outcome = FTL_ATTEMPT_FAILED;
  r->kind = kind;
  r->root_rank = rank;
  r->retryable = kind != FTL_FAIL_EXEC;
  const char *host = rank >= 0 ? rz_rdzv_server_host(a->server, rank) : NULL;
  snprintf(r->root_host, sizeof r->root_host, "%s", host ? host : (bad_host ? bad_host : "unknown"));
  if (bad_host) {
    snprintf(r->bad_host, sizeof r->bad_host, "%s", bad_host);
    for (int i = 0; i < a->world; i++) {
      const char *h = rz_rdzv_server_host(a->server, i);
      if (h && !strcmp(h, bad_host) && a->ranks[i].addrs[0]) {
        snprintf(r->bad_host_addrs, sizeof r->bad_host_addrs, "%s", a->ranks[i].addrs);
        break;
      }
    }
  }
  r->exit_code = code;
  r->signal = sig;
  r->failure_ms = since_start(a);
  char how[400];
  ln_root_how(how, sizeof how, how_override, code, sig);
  char err_path[PATH_MAX];
  if (rank >= 0 && core_rundir_rank_file(err_path, sizeof err_path, a->attempt_dir, rank, "err"))
    snprintf(err_path, sizeof err_path, "the attempt folder");
  if (rank >= 0)
    ftl_fmt(r->summary, sizeof r->summary, "rank %d on host %s %s (the first failure; its output: %s)", rank,
            r->root_host, how, err_path);
  else
    ftl_fmt(r->summary, sizeof r->summary, "%s", how);
  int64_t step = rank >= 0 ? a->watch[rank].last_step : r->last_step;
  ln_events_write(a->o->events, "failure", a->o->attempt,
                   json_pack("{s:i, s:s, s:i, s:i, s:s, s:I, s:f, s:s}", "rank", rank, "host", r->root_host,
                             "exit_code", code, "signal", sig, "cause", ln_failure_kind_name(kind), "step",
                             (json_int_t)step, "detect_lag_ms", r->detect_lag_ms, "message", r->summary));
  FTL_LOG(FTL_LOG_ERROR, "launcher", "%s", r->summary);
  /* With a standby parked to take over, the survivors are killed at once: a failed attempt keeps
   * nothing but its commits (a checkpoint in flight cannot finish without the failed rank), and
   * every moment they linger delays the take-over. Without one they get the usual grace. */
  terminate_gang(a, ln_standby_ready(a->o->standby, a->o->attempt) ? SIGKILL : SIGTERM);
}

static void log_startup_summary(attempt *a) {
  if (a->res->first_step_ms >= 0 || a->first_step_count < a->world) return;
  a->res->first_step_ms = since_start(a);
  double launch = 0, phases[3] = {0, 0, 0}, first = 0;
  for (int i = 0; i < a->world; i++) {
    rank_state *s = &a->ranks[i];
    double l = (double)(s->hello_ms - a->start_ms);
    if (l > launch) launch = l;
    for (int k = 0; k < 3; k++)
      if (s->phases[k] > phases[k]) phases[k] = s->phases[k];
    if (s->first_step_ms > first) first = s->first_step_ms;
  }
  ln_events_write(a->o->events, "startup", a->o->attempt,
                   json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "launch_ms", launch, "rendezvous_ms", phases[0],
                             "mpi_init_ms", phases[1], "comm_init_ms", phases[2], "first_step_ms", first, "total_ms",
                             a->res->first_step_ms));
  FTL_LOG(FTL_LOG_INFO, "launcher",
          "start-up (slowest rank per phase): launch %.0f ms, rendezvous %.0f ms, MPI init %.0f ms, "
          "communicator %.0f ms, first step %.0f ms",
          launch, phases[0], phases[1], phases[2], first);
}

enum { LOST_AGENT_SETTLE_MS = 250 };
/* Refused connections logged one by one per attempt (docs/security.md: a stranger's loop of
 * connections must not grow the event log without bound); the rest are counted in attempt_end. */
enum { LN_REJECTIONS_LOGGED = 200 };

/* Agents vanished without an exit report: a lost host or a lost agent (detect.c). */
static void blame_lost_agent(attempt *a) {
  ln_detection f;
  if (a->have_root) return;
  refresh_hosts(a);
  if (!ln_detect_vanished(a->watch, a->world, a->lost_rank, ftl_hostname(), &f)) return;
  set_root(a, f.kind, f.rank, -1, 0, f.message, f.host);
}

/* The held SIGTERM death (see attempt.term_rank) once it has settled, or at the end: a lost host
 * or agent seen meanwhile is the cause; otherwise the rank is. */
static void blame_term_death(attempt *a, int at_end) {
  if (a->term_rank < 0 || a->have_root) return;
  if (!at_end && ftl_clock_ms() - a->term_ms < LOST_AGENT_SETTLE_MS) return;
  /* ftl was asked to stop meanwhile (a scheduler signals the ranks and ftl at once): the death
   * is part of that stop, not a failure of its own. */
  if (ln_held_death_was_stop(was(a, LN_PHASE_STOPPING), a->early_stop, a->res->interrupt_signal)) {
    a->term_rank = -1;
    return;
  }
  if (a->lost_rank >= 0) blame_lost_agent(a);
  if (a->have_root) return;
  a->res->detect_lag_ms = a->term_lag_ms;
  set_root(a, a->term_sig ? FTL_FAIL_SIGNAL : FTL_FAIL_EXIT, a->term_rank, a->term_code, a->term_sig, NULL, NULL);
}

/* ---- the rendezvous server's events ---------------------------------------------------------- */

static void note_progress(ln_rank_watch *w) { w->progress_ms = ftl_clock_ms(); }

/* Library events the launcher itself reads: checkpoint commits and restores (rank 0 speaks for
 * the gang: they are collective), and checkpoint stalls for goodput. */
static void note_library_event(attempt *a, int rank, const char *name, const json_t *fields) {
  if (rank != 0) return;
  ln_attempt_result *r = a->res;
  int64_t step = rz_wire_int(fields, "step", -1);
  if (!strcmp(name, "ckpt_committed") && step > r->committed_step) {
    r->committed_step = step;
    r->committed_at_ms = since_start(a);
  } else if (!strcmp(name, "ckpt_saved")) {
    r->ckpt_stall_ms += ln_goodput_saved_stall_ms(rz_wire_num(fields, "stall_ms", 0), rz_wire_num(fields, "wait_prev_ms", 0));
  } else if (!strcmp(name, "ckpt_restored")) {
    r->restored_step = step;
  }
}

/* A rank's heartbeat, from its figures (rendezvous/server.h: a relay's batch brings no message, and
 * every compute sample of its period, each a report of the stragglers' window). */
static void on_heartbeat(attempt *a, const rz_rdzv_event *ev, ln_rank_watch *w) {
  const rz_heartbeat *hb = ev->hb;
  note_progress(w);
  if (hb->has_flops) ln_mfu_note_flops_at(a->mfu, ev->rank, hb->flops, hb->flops_ms);
  w->section = FTL_SECTION_STEP;
  if (hb->step >= 0) w->last_step = hb->step;
  if (w->last_step > a->res->last_step) a->res->last_step = w->last_step;
  for (int k = 0; k < hb->nsamples; k++)
    if (hb->samples[k] >= 0) ln_detect_note_compute(w, hb->samples[k]);
  /* rank 0's progress report (a step whole, with total_steps): a `progress` event, with the latest
   * MFU when there is one */
  if (ev->rank == 0 && ev->msg && json_object_get(ev->msg, "total_steps"))
    ln_progress_record(a->o->events, a->o->attempt, ev->rank, ev->msg, ln_mfu_progress_fields(a->mfu));
}

/* A rank's first step (start-up is over) or a later one. */
static void on_step(attempt *a, const rz_rdzv_event *ev, rank_state *s, ln_rank_watch *w, int first) {
  if (!first && ev->hb) {
    on_heartbeat(a, ev, w);
    return;
  }
  note_progress(w);
  ln_mfu_note_flops(a->mfu, ev->rank, ev->msg);
  w->section = FTL_SECTION_STEP;
  w->last_step = rz_wire_int(ev->msg, "step", w->last_step);
  if (w->last_step > a->res->last_step) a->res->last_step = w->last_step;
  if (!first) return;
  s->first_step_ms = rz_wire_num(ev->msg, "first_step_ms", 0);
  if (!s->first_step_seen) {
    s->first_step_seen = 1;
    a->first_step_count++;
  }
  ln_events_write(a->o->events, "first_step", a->o->attempt,
                   json_pack("{s:i, s:f, s:I}", "rank", ev->rank, "first_step_ms", s->first_step_ms, "step",
                             (json_int_t)w->last_step));
  log_startup_summary(a);
}

/* An agent's report of how its program ended (ln_judge_exit says what it means). */
static void on_agent_exit(attempt *a, const rz_rdzv_event *ev, rank_state *s, ln_rank_watch *w) {
  w->exited = 1;
  w->alive_ms = ftl_clock_ms(); /* its last word: its host was there then (detect.c) */
  s->exit_code = (int)rz_wire_int(ev->msg, "exit_code", -1);
  s->signal = (int)rz_wire_int(ev->msg, "signal", 0);
  const char *exec_error = msg_str(ev->msg, "exec_error");
  ln_events_write(a->o->events, "rank_exit", a->o->attempt,
                   json_pack("{s:i, s:s, s:i, s:i, s:I}", "rank", ev->rank, "host",
                             rz_rdzv_server_host(a->server, ev->rank) ? rz_rdzv_server_host(a->server, ev->rank) : "?",
                             "exit_code", s->exit_code, "signal", s->signal, "step", (json_int_t)w->last_step));
  ln_exit_report rep = {.exit_code = s->exit_code,
                        .signal = s->signal,
                        .exec_error = *exec_error != '\0',
                        .ending = was(a, LN_PHASE_ENDING),
                        .stopping = was(a, LN_PHASE_STOPPING),
                        .early_stop = a->early_stop,
                        .agent_lost = a->lost_rank >= 0,
                        .have_root = a->have_root};
  ln_exit_verdict verdict = ln_judge_exit(&rep);
  int64_t wall_us = rz_wire_int(ev->msg, "wall_us", 0);
  if (verdict == LN_EXIT_HELD) {
    if (a->term_rank < 0) {
      a->term_rank = ev->rank;
      a->term_code = s->exit_code;
      a->term_sig = s->signal;
      a->term_ms = ftl_clock_ms();
      a->term_lag_ms = wall_us > 0 ? (double)(ftl_wall_us() - wall_us) / 1000.0 : 0;
    }
  } else if (verdict == LN_EXIT_ROOT) {
    if (wall_us > 0) a->res->detect_lag_ms = (double)(ftl_wall_us() - wall_us) / 1000.0;
    char what[300];
    if (*exec_error) {
      snprintf(what, sizeof what, "could not start its program: %s", exec_error);
      set_root(a, FTL_FAIL_EXEC, ev->rank, s->exit_code, s->signal, what, NULL);
    } else {
      set_root(a, s->signal ? FTL_FAIL_SIGNAL : FTL_FAIL_EXIT, ev->rank, s->exit_code, s->signal, NULL, NULL);
    }
  }
}

/* An agent's hello: its rank's agent is up (the attempt started once every rank's is). */
static void on_agent_hello(attempt *a, const rz_rdzv_event *ev, rank_state *s, ln_rank_watch *w) {
  s->hello_ms = w->alive_ms = ftl_clock_ms();
  if (!w->has_agent && !w->lost_ns && ++a->agents_up == a->world && a->res->started_ms < 0)
    a->res->started_ms = since_start(a);
  w->has_agent = 1;
  snprintf(s->addrs, sizeof s->addrs, "%s", msg_str(ev->msg, "addrs"));
  ln_fleet_note_rank(a->o->fleet, ev->rank, msg_str(ev->msg, "host"), s->addrs); /* the exposure's hosts */
  /* An agent that comes up after the gang is being ended (a stop before the rendezvous, or a root
   * cause while mpirun still places the gang) is told at once, not left to run. */
  if (a->ph.phase == LN_PHASE_ENDING) rz_rdzv_server_signal_agents(a->server, SIGTERM);
  ln_events_write(a->o->events, "rank_started", a->o->attempt,
                  json_pack("{s:i, s:s, s:I, s:I}", "rank", ev->rank, "host", msg_str(ev->msg, "host"), "pid",
                            (json_int_t)rz_wire_int(ev->msg, "pid", -1), "launch_ms",
                            (json_int_t)(s->hello_ms - a->start_ms)));
}

/* The agent was asked to stop (a teardown's SIGTERM, or ftl's): its host is alive, whatever becomes
 * of its connection next (detect.c, ln_detect_vanished). */
static void on_agent_stopping(attempt *a, const rz_rdzv_event *ev, ln_rank_watch *w) {
  w->alive_ms = ftl_clock_ms();
  if (w->stopping_ms) return;
  w->stopping_ms = w->alive_ms;
  w->stop_signal = (int)rz_wire_int(ev->msg, "signal", 0);
  const char *host = rz_rdzv_server_host(a->server, ev->rank);
  ln_events_write(a->o->events, "agent_stopping", a->o->attempt,
                  json_pack("{s:i, s:s, s:i, s:s}", "rank", ev->rank, "host", host ? host : "?", "signal",
                            w->stop_signal, "by", msg_str(ev->msg, "by")));
}

/* A rank is through ftl_init: its phases' times. */
static void on_rank_ready(attempt *a, const rz_rdzv_event *ev, rank_state *s, ln_rank_watch *w) {
  note_progress(w);
  s->phases[0] = rz_wire_num(ev->msg, "rendezvous_ms", 0);
  s->phases[1] = rz_wire_num(ev->msg, "mpi_init_ms", 0);
  s->phases[2] = rz_wire_num(ev->msg, "comm_init_ms", 0);
  s->ready = 1;
  w->ready = 1;
  const json_t *lr = json_object_get(ev->msg, "local_rank");
  if (json_is_integer(lr) && json_integer_value(lr) >= 0 && json_integer_value(lr) < a->world) {
    s->has_local_rank = 1;
    s->local_rank = (int)json_integer_value(lr);
  }
  ln_mfu_note_rank(a->mfu, ev->rank, rz_rdzv_server_host(a->server, ev->rank), (int)rz_wire_int(ev->msg, "local_rank", 0),
                   (int)rz_wire_int(ev->msg, "cpus", 0));
  ln_events_write(a->o->events, "rank_ready", a->o->attempt,
                  json_pack("{s:i, s:f, s:f, s:f, s:s, s:I}", "rank", ev->rank, "rendezvous_ms", s->phases[0],
                            "mpi_init_ms", s->phases[1], "comm_init_ms", s->phases[2], "backend",
                            msg_str(ev->msg, "backend"), "device", (json_int_t)rz_wire_int(ev->msg, "device", -1)));
}

/* An event the library sent (a checkpoint saved, restored...): noted, then logged with its rank. */
static void on_library_event(attempt *a, const rz_rdzv_event *ev, ln_rank_watch *w) {
  if (w) note_progress(w);
  const json_t *src = json_object_get(ev->msg, "fields");
  note_library_event(a, ev->rank, msg_str(ev->msg, "event"), src);
  json_t *fields = json_deep_copy(src);
  if (!json_is_object(fields)) {
    json_decref(fields);
    fields = json_object();
  }
  json_object_set_new(fields, "rank", json_integer(ev->rank));
  ln_events_write(a->o->events, msg_str(ev->msg, "event"), a->o->attempt, fields);
}

/* An agent's connection dropped. Not the root cause yet: when a rank fails, mpirun kills the other
 * agents, and their connections can drop before the failed rank's own exit report is read. A lost
 * agent is the root cause only if no rank reports a failure within LOST_AGENT_SETTLE_MS. */
static void on_agent_lost(attempt *a, const rz_rdzv_event *ev, ln_rank_watch *w) {
  w->has_agent = 0;
  if (!w->exited) w->lost_ns = ftl_clock_ns();
  /* An agent that said it was asked to stop went because of someone else's failure. */
  if (!w->exited && !w->stopping_ms && !was(a, LN_PHASE_ENDING) && a->lost_rank < 0) {
    a->lost_rank = ev->rank;
    a->lost_ms = ftl_clock_ms();
  }
}

/* A refused connection. Each refusal is shown, up to a bound: a stranger who connects in a loop
 * must not fill the disk with the run's log. Past it, one line says they go on, and attempt_end
 * counts them. */
static void on_rejected(attempt *a, const rz_rdzv_event *ev) {
  if (++a->rejections <= LN_REJECTIONS_LOGGED) {
    FTL_LOG(FTL_LOG_WARN, "launcher", "refused a rendezvous connection from %s: %s", ev->peer ? ev->peer : "?",
            ev->detail ? ev->detail : "");
    ln_events_write(a->o->events, "rendezvous_rejected", a->o->attempt,
                    json_pack("{s:s, s:s}", "reason", ev->detail ? ev->detail : "", "peer", ev->peer ? ev->peer : "?"));
  } else if (a->rejections == LN_REJECTIONS_LOGGED + 1) {
    FTL_LOG(FTL_LOG_WARN, "launcher", "more than %d rendezvous connections refused in this attempt: the next are "
            "counted, not logged one by one", LN_REJECTIONS_LOGGED);
  }
}

/* Keeps res->degraded in step with a host's latest GPU report: the host is listed while that report
 * names a degraded GPU (the first such GPU is the reason given), and dropped when a later report
 * says all its GPUs are healthy again. The policy reads the list after the attempt. */
static void note_degraded_host(attempt *a, const char *host, int rank, const json_t *gpus) {
  ln_attempt_result *r = a->res;
  const json_t *worst = NULL;
  size_t i;
  const json_t *g;
  json_array_foreach(gpus, i, g) if (!strcmp(msg_str(g, "verdict"), "degraded") && !worst) worst = g;
  int at = -1;
  for (int k = 0; k < r->n_degraded; k++)
    if (!strcmp(r->degraded[k].host, host)) at = k;
  if (!worst) {
    if (at >= 0) {
      memmove(&r->degraded[at], &r->degraded[at + 1], (size_t)(r->n_degraded - at - 1) * sizeof r->degraded[0]);
      r->n_degraded--;
    }
    return;
  }
  if (at < 0) {
    if (r->n_degraded == LN_MAX_DEGRADED_HOSTS) return; /* more than 16 at once: the first are acted on */
    at = r->n_degraded++;
  }
  snprintf(r->degraded[at].host, sizeof r->degraded[at].host, "%s", host);
  snprintf(r->degraded[at].addrs, sizeof r->degraded[at].addrs, "%s",
           rank >= 0 && rank < a->world ? a->ranks[rank].addrs : "");
  snprintf(r->degraded[at].why, sizeof r->degraded[at].why, "GPU %lld (%.60s) is degraded: %.60s",
           (long long)json_integer_value(json_object_get(worst, "index")), msg_str(worst, "uuid"),
           msg_str(worst, "reason"));
}

/* ---- a straggler's GPU ---------------------------------------------------------------------- */

/* The GPU whose health stands for rank i's (ln_runview_gpu_of_rank: local rank mod its host's GPUs):
 * its local rank as its ready report said, else its place among its host's ranks in rank order.
 * NULL when its host said nothing of its GPUs (no NVML there: then nothing is said of a GPU). */
static const ln_rv_gpu *rank_gpu(attempt *a, int i, int *local_out) {
  int local = a->ranks[i].has_local_rank ? a->ranks[i].local_rank : ln_detect_local_rank(a->watch, a->world, i);
  if (local_out) *local_out = local;
  return ln_runview_gpu_of_rank(&a->gpu_view, a->watch[i].host, local);
}

/* "its GPU 1 (GPU-...) is degraded: thermal throttling" (a healthy one is said too: the slowness is
 * then not the GPU's), and the event's gpu object. */
static void gpu_clause(const ln_rv_gpu *g, char *out, size_t size) {
  if (!strcmp(g->verdict, "healthy"))
    snprintf(out, size, "its GPU %d (%.96s) is healthy", g->index, g->uuid);
  else
    snprintf(out, size, "its GPU %d (%.96s) is %s: %.200s", g->index, g->uuid, g->verdict, g->reason);
}

static json_t *gpu_object(const ln_rv_gpu *g) {
  return json_pack("{s:i, s:s, s:s, s:s, s:s}", "index", g->index, "uuid", g->uuid, "name", g->name, "verdict",
                   g->verdict, "reason", g->reason);
}

/* A host's new GPU verdicts against the stragglers already reported on it: a rank whose GPU is now
 * degraded or failed is said so once (a straggler_gpu event and a log line), the other way round
 * from check_stragglers, which says the GPU's verdict when it finds the straggler. */
static void note_straggler_gpus(attempt *a, const char *host, const json_t *gpus) {
  json_t *line = json_pack("{s:s, s:s, s:O}", "event", "gpu_health", "host", host, "gpus", gpus);
  if (line) ln_runview_add(&a->gpu_view, line);
  json_decref(line);
  if (!a->stragglers) return;
  refresh_hosts(a);
  for (int i = 0; i < a->world; i++) {
    rank_state *s = &a->ranks[i];
    if (!a->watch[i].straggler_reported || s->straggler_gpu_said || !a->watch[i].host || strcmp(a->watch[i].host, host))
      continue;
    const ln_rv_gpu *g = rank_gpu(a, i, NULL);
    if (!g || !strcmp(g->verdict, "healthy")) continue;
    s->straggler_gpu_said = 1;
    char clause[400];
    gpu_clause(g, clause, sizeof clause);
    FTL_LOG(FTL_LOG_WARN, "launcher", "straggler: rank %d on host %s (%.1f× slower than the others' median, "
            "reported before) now: %s", i, host, s->straggler_ratio, clause);
    ln_events_write(a->o->events, "straggler_gpu", a->o->attempt,
                    json_pack("{s:i, s:s, s:f, s:o}", "rank", i, "host", host, "ratio", s->straggler_ratio, "gpu",
                              gpu_object(g)));
  }
}

/* A host's GPU verdicts changed (launcher/gpu_watch.h): logged; a failed GPU ends the attempt with
 * cause gpu_failed and its host as the bad one (a spare, with a hostfile, takes its place); a
 * degraded one is noted for the policy (note_degraded_host). */
static void on_gpu_health(attempt *a, const rz_rdzv_event *ev) {
  const char *host = rz_rdzv_server_host(a->server, ev->rank);
  const json_t *gpus = json_object_get(ev->msg, "gpus");
  if (!json_is_array(gpus) || json_array_size(gpus) > 64) return;
  ln_events_write(a->o->events, "gpu_health", a->o->attempt,
                  json_pack("{s:i, s:s, s:O}", "rank", ev->rank, "host", host ? host : "unknown", "gpus", gpus));
  size_t i;
  const json_t *g;
  if (host) note_degraded_host(a, host, ev->rank, gpus);
  /* For the fleet ledger after the attempt (fleet.h): kept in memory here, written by run.c. */
  if (host)
    ln_fleet_note_gpus(a->o->fleet, host, ev->rank >= 0 && ev->rank < a->world ? a->ranks[ev->rank].addrs : "", gpus,
                       ftl_wall_us());
  if (host) ln_mfu_note_gpus(a->mfu, host, gpus);
  json_array_foreach(gpus, i, g) {
    const char *verdict = msg_str(g, "verdict");
    if (strcmp(verdict, "healthy") != 0)
      FTL_LOG(strcmp(verdict, "failed") ? FTL_LOG_WARN : FTL_LOG_ERROR, "launcher", "GPU %lld (%s) on host %s is %s: %.300s",
              (long long)json_integer_value(json_object_get(g, "index")), msg_str(g, "uuid"), host ? host : "unknown",
              verdict, msg_str(g, "reason"));
    if (strcmp(verdict, "failed") != 0 || a->have_root || was(a, LN_PHASE_STOPPING)) continue;
    char how[400];
    snprintf(how, sizeof how, "had GPU %lld (%.96s) fail its health check: %.200s",
             (long long)json_integer_value(json_object_get(g, "index")), msg_str(g, "uuid"), msg_str(g, "reason"));
    set_root(a, FTL_FAIL_GPU, ev->rank, 0, 0, how, host);
  }
  if (host) note_straggler_gpus(a, host, gpus);
}

static void on_event(void *user, const rz_rdzv_event *ev) {
  attempt *a = user;
  int attempt_no = a->o->attempt;
  ln_events *log = a->o->events;
  int known = ev->rank >= 0 && ev->rank < a->world;
  rank_state *s = known ? &a->ranks[ev->rank] : NULL;
  ln_rank_watch *w = known ? &a->watch[ev->rank] : NULL;
  if (ev->kind == FTL_RDZV_AGENT_HELLO || ev->kind == FTL_RDZV_RANK_JOINED || ev->kind == FTL_RDZV_REJECTED)
    note_host(a, ev->rank);
  switch (ev->kind) {
    case FTL_RDZV_AGENT_HELLO:
      if (s) on_agent_hello(a, ev, s, w);
      break;
    case FTL_RDZV_AGENT_ALIVE:
      if (!s) return;
      w->alive_ms = ftl_clock_ms();
      w->state = ev->hb ? ev->hb->state[0] : msg_str(ev->msg, "state")[0];
      if (w->state != 'T') w->stopped_ms = 0;
      else if (!w->stopped_ms) w->stopped_ms = w->alive_ms;
      break;
    case FTL_RDZV_AGENT_STOPPING:
      if (w) on_agent_stopping(a, ev, w);
      break;
    case FTL_RDZV_RANK_JOINED:
      if (!s) return;
      s->joined = 1;
      note_progress(w);
      ln_events_write(log, "rank_joined", attempt_no, json_pack("{s:i}", "rank", ev->rank));
      update_life_phase(a);
      break;
    case FTL_RDZV_GANG_GO:
      update_life_phase(a);
      ln_events_write(log, "rendezvous_complete", attempt_no,
                       json_pack("{s:i, s:f}", "world_size", a->world, "ms_since_launch", since_start(a)));
      break;
    case FTL_RDZV_RANK_READY:
      if (s) on_rank_ready(a, ev, s, w);
      break;
    case FTL_RDZV_FIRST_STEP:
    case FTL_RDZV_STEP:
      if (s) on_step(a, ev, s, w, ev->kind == FTL_RDZV_FIRST_STEP);
      break;
    case FTL_RDZV_SECTION:
      if (!s) return;
      note_progress(w);
      w->section = !strcmp(msg_str(ev->msg, "name"), "checkpoint") ? FTL_SECTION_CHECKPOINT
                   : s->first_step_seen                             ? FTL_SECTION_STEP
                                                                    : FTL_SECTION_STARTUP;
      break;
    case FTL_RDZV_EVENT:
      on_library_event(a, ev, w);
      break;
    case FTL_RDZV_AGENT_EXIT:
      if (s) on_agent_exit(a, ev, s, w);
      break;
    case FTL_RDZV_RANK_BYE:
      ln_mfu_note_flops(a->mfu, ev->rank, ev->msg); /* the last steps' FLOPs (ftl_finalize) */
      break;
    case FTL_RDZV_RANK_PARKED:
      /* A rank of the standby this attempt took over, parking late: the server activates it. */
      if (w) note_progress(w);
      break;
    case FTL_RDZV_GPU_HEALTH:
      if (s) on_gpu_health(a, ev);
      break;
    case FTL_RDZV_IMPORTS:
      if (!s || s->imports_reported) break;
      s->imports_reported = 1;
      a->imports_reported++;
      if (a->o->standby) ln_standby_note_imports(a->o->standby, ev->rank, ev->msg);
      if (ev->rank == 0) {
        const json_t *mods = json_object_get(ev->msg, "modules");
        ln_events_write(log, "python_imports", attempt_no,
                        json_pack("{s:i, s:I, s:f}", "rank", ev->rank, "modules", (json_int_t)json_array_size(mods),
                                  "settled_s", json_number_value(json_object_get(ev->msg, "settled_s"))));
      }
      break;
    case FTL_RDZV_CONN_LOST:
      if (w && strcmp(ev->role, "agent") == 0) on_agent_lost(a, ev, w);
      break;
    case FTL_RDZV_REJECTED:
      on_rejected(a, ev);
      break;
  }
}

/* ---- the detectors' glue --------------------------------------------------------------------- */

/* The detectors (detect.c) on the ranks' state now; the first finding is the root cause. The scans
 * are due every DETECT_EVERY_MS (the detectors' latency, "+ <= 100 ms"); each runs when detect.h
 * says it may find something, and besides at least once a second, or once per batch period where
 * that is longer (what the ranks report changes no faster): at 128k ranks a scan is milliseconds. */
enum { DETECT_EVERY_MS = 100, DETECT_FULL_SCAN_MS = 1000 };

static int64_t next_scan(const attempt *a, int64_t now, int64_t due) {
  int64_t most = now + (a->batch_ms > DETECT_FULL_SCAN_MS ? a->batch_ms : DETECT_FULL_SCAN_MS);
  return due < most ? due : most;
}

static void check_hosts(attempt *a) {
  ln_detection f;
  int64_t now = ftl_clock_ms(), due = now;
  if (now < a->hosts_due_ms) return;
  refresh_hosts(a);
  if (ln_detect_lost_host_due(a->watch, a->world, &a->limits, now, &f, &due))
    set_root(a, f.kind, f.rank, -1, 0, f.message, f.host);
  a->hosts_due_ms = next_scan(a, now, due);
}

static void check_hangs(attempt *a) {
  ln_detection f;
  int64_t now = ftl_clock_ms(), due = now;
  if (now < a->hangs_due_ms) return;
  refresh_hosts(a);
  if (ln_detect_hang_due(a->watch, a->world, &a->limits, now, &f, &due)) {
    if (!a->have_root && f.unpinned) a->res->root_host_unblamed = 1;
    set_root(a, f.kind, f.rank, -1, 0, f.message, NULL);
  }
  a->hangs_due_ms = next_scan(a, now, due);
}

/* Reports stragglers (once per rank and attempt), with how much slower and, where its host reads
 * GPU health, its GPU's verdict beside it ("rank 5 is 2.9x slower; its GPU is thermal-throttling").
 * In a gang over several hosts the straggler's host is marked suspect: a suspect host that later
 * fails is left out, not just restarted on. On one host there is nothing to exclude, so the warning
 * says what it means and marks nothing; ranks that oversubscribe this host's cores get the laxer
 * ratio, as time slicing alone slows one. */
static void check_stragglers(attempt *a) {
  ln_straggler found[8];
  refresh_hosts(a);
  int one_host = ln_detect_one_host(a->watch, a->world);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  double ratio = one_host && cpus > 0 && a->world > cpus ? FTL_STRAGGLER_RATIO_SHARED : FTL_STRAGGLER_RATIO;
  int n = ln_detect_stragglers(a->watch, a->world, ratio, found, (int)(sizeof found / sizeof *found));
  for (int k = 0; k < n; k++) {
    int i = found[k].rank, local = -1;
    a->watch[i].straggler_reported = 1;
    a->stragglers++;
    const char *host = a->watch[i].host ? a->watch[i].host : "?";
    double slower = found[k].others_median_ms > 0 ? found[k].compute_ms / found[k].others_median_ms : 0;
    a->ranks[i].straggler_ratio = slower;
    const ln_rv_gpu *g = rank_gpu(a, i, &local);
    char clause[420] = "", then[160];
    if (g) {
      clause[0] = ';';
      clause[1] = ' ';
      gpu_clause(g, clause + 2, sizeof clause - 2);
      a->ranks[i].straggler_gpu_said = strcmp(g->verdict, "healthy") != 0;
    }
    if (one_host) {
      snprintf(then, sizeof then, "with one host there is nothing to exclude");
    } else {
      if (a->watch[i].host && !a->res->suspect_host[0]) snprintf(a->res->suspect_host, sizeof a->res->suspect_host, "%s", host);
      snprintf(then, sizeof then, "host %.64s is suspect: if it fails, it is left out of the next attempts", host);
    }
    FTL_LOG(FTL_LOG_WARN, "launcher",
            "straggler: rank %d on host %s is %.1f× slower than the others (%.1f ms vs %.1f ms median compute per "
            "step over the last %d reports)%s; %s",
            i, host, slower, found[k].compute_ms, found[k].others_median_ms, FTL_STRAGGLER_WINDOW, clause, then);
    json_t *ev = json_pack("{s:i, s:s, s:f, s:f, s:f, s:i, s:b}", "rank", i, "host", host, "compute_ms",
                           found[k].compute_ms, "others_median_ms", found[k].others_median_ms, "ratio", slower,
                           "local_rank", local, "host_suspect", !one_host);
    if (ev && g) json_object_set_new(ev, "gpu", gpu_object(g));
    ln_events_write(a->o->events, "straggler", a->o->attempt, ev);
  }
}

/* The gang did not form in time. The missing ranks are the root cause; joined ranks failing in
 * ftl_init follow from it. Every joined rank is told why, and the gang is ended once the joined
 * ranks have gone (ftl_init returns the reason to them, and they report it), or after the kill
 * grace: a SIGTERM sent with the reason would often overtake it, and the ranks would die without
 * saying why. */
static void fail_rendezvous(attempt *a, const char *reason) {
  ln_attempt_result *res = a->res;
  rz_rdzv_server_fail(a->server, reason);
  a->have_root = 1;
  res->outcome = FTL_ATTEMPT_RDZV_FAILED;
  res->kind = FTL_FAIL_RDZV;
  res->retryable = 1;
  res->failure_ms = since_start(a);
  snprintf(res->summary, sizeof res->summary, "%s", reason);
  ln_events_write(a->o->events, "rendezvous_failed", a->o->attempt, json_pack("{s:s}", "reason", reason));
  FTL_LOG(FTL_LOG_ERROR, "launcher", "%s", reason);
  if (rz_rdzv_server_rank_connections(a->server) == 0) {
    terminate_gang(a, SIGTERM);
    return;
  }
  a->rdzv_end_ms = ftl_deadline_after_ms(a->o->kill_grace_ms);
}

/* Ends the gang after a failed rendezvous once the joined ranks have gone or the grace is over.
 * Gone means ended, as their agents report it: not their connections closed, since ftl_init closes
 * a rank's connection before it returns the reason, and a SIGTERM sent then would often end the
 * rank before it said why. */
static void end_after_rendezvous(attempt *a) {
  if (!a->rdzv_end_ms || a->ph.phase >= LN_PHASE_ENDING) return;
  int joined_running = 0;
  for (int i = 0; i < a->world; i++) joined_running += a->ranks[i].joined && !a->watch[i].exited;
  if (joined_running == 0 || ftl_deadline_left_ms(a->rdzv_end_ms) == 0) terminate_gang(a, SIGTERM);
}

/* ---- preemption ------------------------------------------------------------------------------ */

/* Asks the ranks to stop cleanly (preemption). Programs that use the library get a stop request
 * and the preemption grace to checkpoint; programs that do not get the signal itself. Before the
 * gang has formed (launching, or a rendezvous still pending) nothing of this attempt has been
 * trained and no rank can take a stop request (it is not in ftl_init yet, or waits there for the
 * others): the ranks are ended at once, mpirun stops placing the rest, and the stop is clean (75:
 * the requeued job resumes from the last commit). Waiting for the gang to form only to stop it
 * would run training on until the kill grace. */
static void request_stop(attempt *a, int sig) {
  if (a->early_stop || was(a, LN_PHASE_STOPPING)) return;
  int went = rz_rdzv_server_went(a->server);
  char reason[128];
  if (!went && !a->have_root && (a->ph.phase == LN_PHASE_LAUNCHING || a->ph.phase == LN_PHASE_RENDEZVOUS)) {
    a->early_stop = 1;
    snprintf(reason, sizeof reason, "preempted by %s before the gang formed", ln_signal_name(sig));
    FTL_LOG(FTL_LOG_WARN, "launcher", "%s (%d of %d agents up, %d ranks joined): ending the ranks at once", reason,
            a->agents_up, a->world, rz_rdzv_server_joined(a->server));
    rz_rdzv_server_fail(a->server, reason); /* ranks waiting in ftl_init return at once */
    terminate_gang(a, SIGTERM);
    if (!reaped(a)) kill(a->gang.pid, SIGTERM); /* no more agents placed; mpirun ends the ones it has */
    return;
  }
  int library_ranks = 0;
  for (int i = 0; i < a->world; i++) library_ranks += a->ranks[i].ready;
  if (!library_ranks && !went) {
    terminate_gang(a, SIGTERM);
    return;
  }
  set_phase(a, LN_PHASE_STOPPING);
  a->stop_deadline_ms = ftl_deadline_after_ms(a->o->job->preempt_grace_ms);
  snprintf(reason, sizeof reason, "%s by %s", sig == SIGINT ? "interrupted" : "preempted", ln_signal_name(sig));
  rz_rdzv_server_request_stop(a->server, reason);
  FTL_LOG(FTL_LOG_WARN, "launcher", "%s: asked the ranks to checkpoint and stop (grace %.0f s)", reason,
          (double)a->o->job->preempt_grace_ms / 1000.0);
}

/* ---- the conclusion -------------------------------------------------------------------------- */

/* How the attempt ended, once mpirun is gone and the root cause (if any) is known (ln_conclude). */
static void conclude(attempt *a) {
  ln_attempt_result *res = a->res;
  res->joined = rz_rdzv_server_joined(a->server);
  int st = a->gang.status;
  ln_conclusion_in in = {.outcome = res->outcome,
                         .mpirun_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
                         .world = a->world,
                         .all_zero = 1,
                         .first_missing = -1,
                         .early_stop = a->early_stop,
                         .stopping = was(a, LN_PHASE_STOPPING),
                         .have_root = a->have_root,
                         .interrupt_signal = res->interrupt_signal,
                         .last_step = res->last_step,
                         .committed_step = res->committed_step};
  for (int i = 0; i < a->world; i++) {
    if (!a->watch[i].exited && in.first_missing < 0) in.first_missing = i;
    if (!a->watch[i].exited || a->ranks[i].exit_code != 0 || a->ranks[i].signal != 0) in.all_zero = 0;
  }
  if (in.first_missing >= 0) in.first_missing_host = rz_rdzv_server_host(a->server, in.first_missing);
  ln_conclusion c;
  ln_conclude(&in, &c);
  if (c.kind == LN_CONCLUDE_LAUNCHER) {
    set_root(a, FTL_FAIL_LAUNCHER, -1, in.mpirun_code, 0, c.summary, NULL);
  } else if (c.kind == LN_CONCLUDE_SET) {
    res->outcome = c.outcome;
    snprintf(res->summary, sizeof res->summary, "%s", c.summary);
  }
}

/* ---- the attempt's set-up -------------------------------------------------------------------- */

/* The attempt's folder, the ranks' state, the token and the rendezvous server. */
static ftl_err attempt_init(attempt *a, char *token, size_t token_size, ftl_diag *d) {
  const ln_attempt_opts *o = a->o;
  ln_attempt_result *res = a->res;
  ftl_err rc;
  memset(res, 0, sizeof *res);
  res->root_rank = -1;
  res->last_step = res->restored_step = res->committed_step = -1;
  res->first_step_ms = res->started_ms = res->failure_ms = res->end_ms = res->committed_at_ms = -1;
  if (core_rundir_attempt_dir(a->attempt_dir, sizeof a->attempt_dir, o->run_dir, o->attempt))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "run directory path too long");
  if ((rc = ftl_mkdir_p(a->attempt_dir, d))) return rc;
  a->ranks = ftl_calloc((size_t)a->world, sizeof *a->ranks);
  a->watch = ftl_calloc((size_t)a->world, sizeof *a->watch);
  if (!a->ranks || !a->watch) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  for (int i = 0; i < a->world; i++) a->watch[i].last_step = -1;
  ln_mfu_opts mo = {.precision = (ln_precision)o->job->mfu_precision,
                    .peak_tflops = o->job->has_mfu_peak ? o->job->mfu_peak_tflops : 0};
  if ((rc = ln_mfu_create(a->world, &mo, &a->mfu, d))) return rc;
  a->limits = (ln_detect_limits){.startup_ms = o->job->startup_timeout_ms,
                                  .step_ms = o->job->step_timeout_ms,
                                  .checkpoint_ms = o->job->checkpoint_timeout_ms,
                                  .node_ms = o->job->node_timeout_ms};
  /* No process of an earlier attempt changes checkpoints/ from here on (core/fence.h). Their ranks
   * have been ended; the wait covers one caught in the middle of a change. */
  if ((rc = core_fence_advance(o->run_dir, o->attempt, ftl_deadline_after_ms(o->kill_grace_ms + 10000), d)))
    return rc;
  ln_standby *sb = o->standby;
  if (sb && sb->live && ln_standby_fits(sb, o)) {
    ln_standby_take(sb, o, a->attempt_dir, &a->server, &a->gang, token, token_size, &a->standby_hello, a->launch);
    a->warm = 1;
    return FTL_OK;
  }
  if (sb && sb->live) {
    char why[160];
    snprintf(why, sizeof why, "it cannot serve attempt %d (%s)", o->attempt,
             sb->world != o->world_size   ? "another world size"
             : sb->attempt != o->attempt  ? "another attempt"
             : sb->agents_up < sb->world ? "not every rank of it was placed yet"
                                          : "another placement");
    ln_standby_drop(sb, why);
  }
  if ((rc = ln_attempt_token(o->attempt, token, token_size))) return rc;
  /* Two connections per rank (its agent's and its own), as many again for a standby gang; with
   * relays one per host (the hostfile's hosts; this one without a hostfile). */
  long conns = 2L * a->world;
  const char *what = "a gang of this size (two connections per rank)";
  if (ln_relay_on()) {
    ln_hostfile_host *hosts = NULL;
    size_t nhosts = 1;
    ftl_diag hd;
    if (o->hostfile && ln_hostfile_read(o->hostfile, &hosts, &nhosts, &hd) != FTL_OK) nhosts = (size_t)a->world;
    ftl_free(hosts);
    conns = nhosts < (size_t)a->world ? (long)nhosts : a->world;
    what = "a gang on this many hosts (one relay connection per host)";
  }
  long need = conns * (o->standby && o->standby->enabled ? 2 : 1) + 64;
  if ((rc = core_fd_limit_raise(need, what, d))) return rc;
  return rz_rdzv_server_create(o->rdzv_bind, a->world, token, &a->server, d);
}

/* ---- spawning the gang ----------------------------------------------------------------------- */

/* The signals the launcher acts on while an attempt runs (the self-pipe, sigpipe.h). */
static const int handled[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
enum { N_HANDLED = sizeof handled / sizeof *handled };

/* Starts mpirun or srun in its own process group (a Ctrl-C at the terminal reaches ftl, which
 * decides), in the job's working folder. One that cannot start is the attempt's outcome
 * (launch_failed), not an error of ftl's. */
static void on_event(void *user, const rz_rdzv_event *ev);

/* The warm path: the standby's gang is this attempt's. What its agents and ranks said while it
 * was parked is replayed as this attempt's own start-up (hello, joined, the gang's go), so the
 * detectors and the event log see a gang that formed now. */
static void adopt_standby(attempt *a) {
  const ln_attempt_opts *o = a->o;
  ln_events_write(o->events, "attempt_start", o->attempt,
                   json_pack("{s:s, s:i, s:s, s:s, s:b}", "job", o->job->name, "world_size", a->world, "launcher",
                             "standby", "attempt_dir", a->attempt_dir, "standby", 1));
  FTL_LOG(FTL_LOG_INFO, "launcher", "job '%s': attempt %d takes over the parked standby gang (%d rank%s)", o->job->name,
          o->attempt, a->world, a->world == 1 ? "" : "s");
  a->start_ms = ftl_clock_ms();
  a->rdzv_deadline_ms = a->start_ms + o->job->rendezvous_timeout_ms;
  for (int i = 0; i < a->world; i++) {
    if (!a->standby_hello || !a->standby_hello[i]) continue;
    rz_rdzv_event hello = {.kind = FTL_RDZV_AGENT_HELLO, .rank = i, .role = "agent", .msg = a->standby_hello[i]};
    on_event(a, &hello);
  }
  for (int i = 0; i < a->world; i++) {
    rz_rdzv_event joined = {.kind = FTL_RDZV_RANK_JOINED, .rank = i, .role = "rank", .msg = NULL};
    if (rz_rdzv_server_rank_joined(a->server, i)) on_event(a, &joined);
  }
  if (rz_rdzv_server_went(a->server)) {
    rz_rdzv_event go = {.kind = FTL_RDZV_GANG_GO, .rank = -1, .role = ""};
    on_event(a, &go);
  }
}

static ftl_err spawn_gang(attempt *a, const ln_gang_launch *L, ftl_diag *d) {
  const ln_attempt_opts *o = a->o;
  if (a->warm) {
    adopt_standby(a);
    return FTL_OK;
  }
  json_t *argv_json = json_array();
  for (char **p = L->argv; *p; p++) json_array_append_new(argv_json, json_string(*p));
  const char *tool = L->kind == FTL_LAUNCH_SRUN ? "srun" : "mpirun";
  ln_events_write(o->events, "attempt_start", o->attempt,
                   json_pack("{s:s, s:i, s:s, s:s, s:o}", "job", o->job->name, "world_size", a->world, "launcher",
                             tool, "attempt_dir", a->attempt_dir, "argv", argv_json));
  FTL_LOG(FTL_LOG_INFO, "launcher", "job '%s': starting %d rank%s with %s (attempt %d, run directory %s)", o->job->name,
          a->world, a->world == 1 ? "" : "s", tool, o->attempt, o->run_dir);

  a->start_ms = ftl_clock_ms();
  a->rdzv_deadline_ms = a->start_ms + o->job->rendezvous_timeout_ms;
  core_proc_opts po = {.file = L->argv[0],
                       .argv = L->argv,
                       .envp = L->envp,
                       .search_path = 1,
                       .cwd = o->job->working_dir,
                       .new_group = 1,
                       /* A launcher that dies (SIGKILL, the OOM killer) cannot end its gang: the
                        * kernel does, with the signal mpirun and srun take as "end the job", which
                        * they pass to their ranks. Without it an mpirun whose ranks were still in
                        * MPI_Init lived on for seconds, waiting on PMIx peers that had gone. */
                       .pdeath_signal = SIGTERM,
                       .reset_signals = handled,
                       .n_reset_signals = N_HANDLED};
  ftl_diag spawn_d = {{0}};
  ftl_err rc = core_proc_spawn(&po, &a->gang, &spawn_d);
  if (rc == FTL_ERR_LAUNCH) {
    ln_attempt_result *res = a->res;
    set_phase(a, LN_PHASE_DRAINING);
    res->outcome = FTL_ATTEMPT_LAUNCH_FAILED;
    res->kind = FTL_FAIL_EXEC;
    snprintf(res->summary, sizeof res->summary, "cannot start %s%s%s: %s", L->argv[0], o->job->working_dir ? " in " : "",
             o->job->working_dir ? o->job->working_dir : "", strerror(a->gang.exec_errno));
    return FTL_OK;
  }
  if (rc) return ftl_diag_fail(d, FTL_ERR_LAUNCH, "%s", spawn_d.msg);
  return FTL_OK;
}

/* ---- the poll loop and its turns ------------------------------------------------------------- */

/* The self-pipe's signals. Signals come first in a turn: when a scheduler signals ftl and the
 * ranks at once (Slurm's requeue, a cluster's drain), the ranks' deaths it causes must be seen as
 * the stop's consequences. */
static void on_signals(attempt *a) {
  const ln_attempt_opts *o = a->o;
  int sig;
  while ((sig = ln_sigpipe_next()) != 0) {
    if (sig == SIGCHLD) {
      if (!reaped(a) && core_proc_reap(&a->gang)) set_phase(a, LN_PHASE_DRAINING);
      continue;
    }
    ln_events_write(o->events, "signal", o->attempt, json_pack("{s:i, s:s}", "signal", sig, "name", ln_signal_name(sig)));
    if (sig == SIGUSR2) {
      FTL_LOG(FTL_LOG_INFO, "launcher", "received SIGUSR2: passing it to the ranks");
      rz_rdzv_server_signal_agents(a->server, sig);
      continue;
    }
    if (!a->res->interrupt_signal) a->res->interrupt_signal = sig;
    /* A stop of the job stops both gangs: the standby has nothing to save. */
    if (o->standby) ln_standby_drop(o->standby, sig == SIGINT ? "interrupted" : "the job was asked to stop");
    if (sig == SIGTERM || sig == SIGUSR1) {
      request_stop(a, sig); /* preemption: Slurm's --signal, scancel, a cluster's drain */
      continue;
    }
    /* Ctrl-C: the ranks stop as for a preemption (the library's at their next step, a checkpoint
     * committed; the others by SIGTERM, which a Python program dies of without a traceback), and a
     * second Ctrl-C stops them at once. Either way ftl exits 130 and a rerun resumes. */
    if (sig == SIGINT && !was(a, LN_PHASE_STOPPING) && a->ph.phase < LN_PHASE_ENDING) {
      int library_ranks = 0;
      for (int i = 0; i < a->world; i++) library_ranks += a->ranks[i].ready;
      if (library_ranks)
        fprintf(stderr, "ftl: interrupted: the ranks stop at their next step (Ctrl-C again stops them at once)\n");
      else
        fprintf(stderr, "ftl: interrupted: stopping the ranks\n");
      request_stop(a, sig);
      continue;
    }
    FTL_LOG(FTL_LOG_WARN, "launcher", "received %s: stopping the ranks", ln_signal_name(sig));
    terminate_gang(a, SIGTERM);
  }
}

/* The gang must be complete by the rendezvous deadline: every rank's agent started (for any
 * program: mpirun may hang on a host it cannot reach), and, for programs that use the library
 * (some rank joined), every rank joined. */
static void check_rendezvous_deadline(attempt *a) {
  const ln_attempt_opts *o = a->o;
  if (a->have_root || ftl_clock_ms() < a->rdzv_deadline_ms) return;
  int agents = 0;
  for (int i = 0; i < a->world; i++) agents += a->ranks[i].hello_ms > 0;
  char missing[700], reason[1024];
  if (agents < a->world) {
    size_t used = 0;
    missing[0] = '\0';
    /* With a plan (a hostfile, or the Slurm allocation's), each missing rank is named with the host
     * the plan put it on: ranks fill the plan's hosts in order, slot by slot (mpirun's by-slot
     * mapping; srun's block layout of the same plan). */
    ln_hostfile_host *plan = NULL;
    size_t nplan = 0;
    ftl_diag pd = {{0}};
    if (o->hostfile && ln_hostfile_read(o->hostfile, &plan, &nplan, &pd) != FTL_OK) nplan = 0;
    for (int i = 0; i < a->world && used + 96 < sizeof missing; i++) {
      if (a->ranks[i].hello_ms) continue;
      const char *host = NULL;
      for (size_t h = 0, first = 0; h < nplan && !host; first += (size_t)plan[h].slots, h++)
        if ((size_t)i < first + (size_t)plan[h].slots) host = plan[h].name;
      if (host) used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d on %.60s", used ? ", " : "", i, host);
      else used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d", used ? ", " : "", i);
    }
    ftl_free(plan);
    snprintf(reason, sizeof reason,
             "launch deadline of %.1f s passed with %d of %d ranks never started (ranks %s): mpirun or srun "
             "could not place the whole gang",
             (double)o->job->rendezvous_timeout_ms / 1000.0, a->world - agents, a->world, missing);
    fail_rendezvous(a, reason);
    a->res->never_started = a->world - agents; /* run.c then probes the hosts (hostprobe.h) */
    kill(a->gang.pid, SIGTERM); /* the agents that did start are told; mpirun itself may be stuck */
  } else if (!rz_rdzv_server_went(a->server) && rz_rdzv_server_joined(a->server) > 0) {
    rz_rdzv_server_describe_missing(a->server, missing, sizeof missing);
    snprintf(reason, sizeof reason, "rendezvous deadline of %.1f s passed with %d of %d ranks missing: %s",
             (double)o->job->rendezvous_timeout_ms / 1000.0, a->world - rz_rdzv_server_joined(a->server), a->world,
             missing);
    fail_rendezvous(a, reason);
  }
}

/* The detectors and deadlines of a turn, while ftl is not ending the gang. */
static void check_running(attempt *a) {
  update_life_phase(a);
  check_rendezvous_deadline(a);
  end_after_rendezvous(a);
  if (a->lost_rank >= 0 && ftl_clock_ms() - a->lost_ms >= LOST_AGENT_SETTLE_MS) blame_lost_agent(a);
  blame_term_death(a, 0);
  /* The scans over every rank run on their timer (watch_gang), not on every message. */
  if (a->detect_due && !a->have_root && !was(a, LN_PHASE_STOPPING)) check_hosts(a);
  if (a->detect_due && !a->have_root && !was(a, LN_PHASE_STOPPING)) check_hangs(a);
  a->detect_due = 0;
  if (a->ph.phase == LN_PHASE_STOPPING && ftl_deadline_left_ms(a->stop_deadline_ms) == 0) {
    FTL_LOG(FTL_LOG_ERROR, "launcher", "the ranks did not stop within the preemption grace: ending them");
    terminate_gang(a, SIGTERM);
  }
}

/* A failed attempt, once every rank's program is known gone (its exit reported, or its agent
 * lost): mpirun's own teardown is not waited for (it sleeps a full second between its SIGTERM and
 * SIGKILL of the agents, FTL_MPIRUN_SIGKILL_GRACE_S); its group is killed and the next attempt,
 * cold or warm, goes ahead. Nothing is lost: the agents have said all they had to say, and the
 * token sweep (finish_attempt) takes whatever of theirs is left on this host. torchrun starts its
 * new workers as soon as the old ones are reaped; a cold restart that waited out mpirun's second
 * was the gap between them (issue 34).
 * srun is waited for instead (up to the ending deadline terminate_gang armed: the kill grace + 2 s):
 * once its tasks have ended it ends the step and exits within a second, while a SIGKILLed srun
 * leaves each node's slurmstepd retrying its task-exit message for 2-5 s, holding the step's CPUs
 * (issue 36). Not when a host was lost: srun then waits for Slurm to declare the node down
 * (SlurmdTimeout, tens of seconds), and nothing is left to hear from it. */
static int can_skip_teardown(const attempt *a) {
  if (a->ph.phase != LN_PHASE_ENDING || !a->have_root) return 0;
  if (!a->res->bad_host[0] && ln_gang_resolve_kind(a->o->job->launcher, getenv("SLURM_JOB_ID")) == FTL_LAUNCH_SRUN)
    return 0;
  for (int i = 0; i < a->world; i++)
    if (!a->watch[i].exited && a->watch[i].has_agent) return 0;
  /* Every connection closed too (the relays' own included), and nothing of the attempt left on
   * this host outside mpirun's group: a host's relay (its own session) ends once its agents have,
   * milliseconds later, and one killed by the sweep instead would be a leftover of the attempt. */
  return rz_rdzv_server_connections(a->server) + rz_rdzv_server_relays(a->server) == 0 &&
         ln_token_holders(a->token, a->gang.pid) == 0;
}

/* The loop's timers (core/evloop.h's heap): the agents' ping (every ping_ms), the stragglers' check
 * and the MFU figure (once per batch period, at least a second: nothing new comes between batches),
 * the detectors' scans over every rank (due every 100 ms, run when detect.h says they may find
 * something: check_hosts, check_hangs). */
enum { TIMER_PING, TIMER_REPORTS, TIMER_DETECT, N_TIMERS };

/* The gang's cadence (ln_detect_cadence: the relays' batch and the agents' ping grow with the gang,
 * within a quarter of the shortest limit), and the bar for another agent's silence that goes with
 * it. The relays are told at once (those of a taken-over standby too); a relay of an older release
 * ignores it and keeps 250 ms. */
static void set_cadence(attempt *a) {
  ln_cadence c = ln_detect_cadence(a->world, &a->limits, ln_relay_on());
  a->batch_ms = c.batch_ms;
  a->ping_ms = c.ping_ms;
  a->limits.missed_ms = c.missed_ms;
  rz_rdzv_server_set_cadence(a->server, a->batch_ms, FTL_STRAGGLER_WINDOW, c.fence_ms);
}

/* Interrupt moderation, as a network card's: in a gang of thousands the relays' lines come one by
 * one, each a wake-up of the launcher (at 16k ranks the wake-ups were a third of its steady CPU,
 * docs/scale.md). A wake-up that follows the previous busy one by less than COALESCE_US first waits
 * out the rest, so whatever came meanwhile is read in one turn: at most 250 busy wake-ups a second
 * however many hosts report, each at most 4 ms later than it could have been (a killed rank's report
 * too: its detection stays within milliseconds). Smaller gangs, whose lines are few, never wait. */
enum { COALESCE_US = 4000, COALESCE_FROM_RANKS = 4096 };

static void coalesce(const attempt *a, int64_t busy_ns, int timeout_ms) {
  if (a->world < COALESCE_FROM_RANKS || busy_ns < 0) return;
  int64_t wait_ns = busy_ns + (int64_t)COALESCE_US * 1000 - ftl_clock_ns();
  if (wait_ns > (int64_t)timeout_ms * 1000000) wait_ns = (int64_t)timeout_ms * 1000000;
  if (wait_ns <= 0) return;
  struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)wait_ns};
  nanosleep(&ts, NULL);
}

/* Whether the next standby may start: once this attempt's ranks have run past their first step for
 * as long as their start-up took (at most STANDBY_AFTER_MAX_MS). The standby's own start-up takes
 * about as long, so a job that ends sooner would only drop it unparked: started at the first step,
 * its mpirun, agents and MPI_Init compete with the job's last steps and its end for the CPU, and its
 * drop delays the exit (bench-launch: a tenth of `ftl run -n 4`'s wall time). A failure in that
 * window restarts cold, as it would have with a standby still starting. */
enum { STANDBY_AFTER_MAX_MS = 1000 };

/* The drain after mpirun is reaped (watch_gang): until DRAIN_QUIET_MS without a read, at most
 * DRAIN_MAX_MS in all. */
enum { DRAIN_QUIET_MS = 300, DRAIN_MAX_MS = 30000 };

static int standby_due(const attempt *a) {
  double first = a->res->first_step_ms;
  if (first < 0) return 0;
  return since_start(a) - first >= (first < STANDBY_AFTER_MAX_MS ? first : STANDBY_AFTER_MAX_MS);
}

/* The poll loop: the rendezvous server (one descriptor: its readiness set, rendezvous/server.c),
 * the self-pipe, and the timers, until mpirun is reaped and the agents' last reports are read. */
static ftl_err watch_gang(attempt *a, ftl_diag *d) {
  ln_standby *sb = a->o->standby;
  size_t cap = (size_t)a->world * 4 + 32; /* this attempt's connections and the standby's */
  struct pollfd *fds = ftl_calloc(cap, sizeof *fds);
  if (!fds) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  core_timers *timers = NULL;
  ftl_err rc = core_timers_create(N_TIMERS, &timers, d);
  int64_t drain_until = FTL_NO_DEADLINE, drain_end = FTL_NO_DEADLINE;
  int64_t turn_ms = -1, busy_ns = -1;
  if (!rc) {
    core_timers_set(timers, TIMER_PING, ftl_clock_ms());
    core_timers_set(timers, TIMER_REPORTS, ftl_clock_ms());
    core_timers_set(timers, TIMER_DETECT, ftl_clock_ms());
  }
  while (!rc) {
    /* Every step of a turn is bounded well under a second; one that was not is worth a line. */
    if (turn_ms >= 0 && ftl_clock_ms() - turn_ms > 1000)
      FTL_LOG(FTL_LOG_WARN, "launcher", "a turn of the launcher's loop took %.1f s",
              (double)(ftl_clock_ms() - turn_ms) / 1000.0);
    for (int t; (t = core_timers_pop_due(timers, ftl_clock_ms())) >= 0;) {
      if (t == TIMER_PING) {
        rz_rdzv_server_ping_agents(a->server);
        core_timers_set(timers, TIMER_PING, ftl_clock_ms() + a->ping_ms);
      } else if (t == TIMER_REPORTS) {
        check_stragglers(a);
        ln_mfu_tick(a->mfu, a->o->events, a->o->attempt);
        core_timers_set(timers, TIMER_REPORTS, ftl_clock_ms() + (a->batch_ms > 1000 ? a->batch_ms : 1000));
      } else {
        a->detect_due = 1;
        core_timers_set(timers, TIMER_DETECT, ftl_clock_ms() + DETECT_EVERY_MS);
      }
    }
    size_t n = rz_rdzv_server_pollfds(a->server, fds, cap / 2);
    size_t sb_first = n + 1;
    fds[n++] = (struct pollfd){.fd = ln_sigpipe_fd(), .events = POLLIN};
    size_t sb_n = ln_standby_pollfds(sb, fds + sb_first, cap - sb_first);
    size_t n_all = sb_first + sb_n;
    int64_t to_timer = core_timers_next_due(timers) - ftl_clock_ms();
    int timeout = to_timer < 0 ? 0 : to_timer > 100 ? 100 : (int)to_timer;
    /* Ending a failed attempt with every connection closed: what is left to wait for (a relay's
     * exit, can_skip_teardown) says nothing on a descriptor, so the loop looks every 5 ms. */
    if (a->ph.phase == LN_PHASE_ENDING && a->have_root && !reaped(a) &&
        rz_rdzv_server_connections(a->server) + rz_rdzv_server_relays(a->server) == 0 && timeout > 5)
      timeout = 5;
    if (drain_until != FTL_NO_DEADLINE && ftl_deadline_left_ms(drain_until) < timeout)
      timeout = ftl_deadline_left_ms(drain_until);
    coalesce(a, busy_ns, timeout);
    int64_t polled_ms = ftl_clock_ms();
    int pr = poll(fds, (nfds_t)n_all, timeout);
    if (pr > 0) busy_ns = ftl_clock_ns();
    if (pr < 0 && errno != EINTR) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "poll: %s", strerror(errno));
      break;
    }
    /* A wake-up seconds after its timeout: the launcher itself was not scheduled. Said, because
     * the detectors that follow judge the agents' silence by this clock. */
    int64_t overslept_ms = ftl_clock_ms() - polled_ms - timeout;
    if (overslept_ms > 2000)
      FTL_LOG(FTL_LOG_WARN, "launcher", "the launcher was not scheduled for %.1f s", (double)overslept_ms / 1000.0);
    turn_ms = ftl_clock_ms();
    if (pr > 0 && (fds[n - 1].revents & POLLIN)) on_signals(a);
    if (pr > 0) rz_rdzv_server_handle(a->server, fds, n - 1, on_event, a);
    if (sb) {
      ln_standby_turn(sb, fds + sb_first, pr > 0 ? sb_n : 0);
      /* The next standby once this attempt's ranks are past their first step: they call ftl_init
       * (so a standby parks there), and their start-up no longer competes for the CPU. For a Python
       * program without ftl_init: once every rank's runner has said the program stopped importing
       * (its start-up is over), a standby that parks in the runner with those modules imported. */
      int running = a->ph.phase == LN_PHASE_RUNNING && !a->have_root;
      if (running && standby_due(a)) ln_standby_maybe_start(sb, a->o);
      else if (running && a->imports_reported == a->world && rz_rdzv_server_joined(a->server) == 0)
        ln_standby_maybe_start_preloading(sb, a->o);
    }
    if (!reaped(a) && core_proc_reap(&a->gang)) set_phase(a, LN_PHASE_DRAINING);
    if (a->ph.phase < LN_PHASE_ENDING) check_running(a);
    if (!reaped(a) && can_skip_teardown(a)) {
      core_proc_kill_wait(&a->gang);
      set_phase(a, LN_PHASE_DRAINING);
    }
    /* Ending: mpirun's whole group is SIGKILLed at the deadline terminate_gang armed. */
    if (!reaped(a) && core_proc_step(&a->gang)) set_phase(a, LN_PHASE_DRAINING);
    if (reaped(a)) {
      /* Let the agents' last reports arrive, then stop. They are sent before the agents exit, so
       * they are normally here already; a large gang's take a while to read (tens of thousands of
       * exit reports), so the drain lasts while they keep coming: it ends DRAIN_QUIET_MS after the
       * last read, and at most DRAIN_MAX_MS after mpirun was reaped. */
      if (drain_end == FTL_NO_DEADLINE) drain_end = ftl_deadline_after_ms(DRAIN_MAX_MS);
      int read_reports = 0; /* this attempt's connections only: a parked standby's reports go on */
      for (size_t i = 0; pr > 0 && i + 1 < n; i++)
        if (fds[i].revents) read_reports = 1;
      if (drain_until == FTL_NO_DEADLINE || read_reports) drain_until = ftl_deadline_after_ms(DRAIN_QUIET_MS);
      if (ftl_deadline_left_ms(drain_end) < ftl_deadline_left_ms(drain_until)) drain_until = drain_end;
      if (ftl_deadline_left_ms(drain_until) == 0 || rz_rdzv_server_connections(a->server) == 0) break;
    }
  }
  core_timers_destroy(timers);
  ftl_free(fds);
  return rc;
}

/* ---- finishing ------------------------------------------------------------------------------- */

/* After the loop: mpirun reaped for sure, the held blames settled, leftovers swept, the outcome
 * concluded and the attempt_end event written. */
static void finish_attempt(attempt *a, const char *token, ftl_err rc) {
  const ln_attempt_opts *o = a->o;
  ln_attempt_result *res = a->res;
  if (a->gang.pid > 0 && !reaped(a)) {
    core_proc_kill_wait(&a->gang);
    set_phase(a, LN_PHASE_DRAINING);
  }
  if (a->lost_rank >= 0) blame_lost_agent(a);
  blame_term_death(a, 1);
  res->end_ms = since_start(a);
  int swept = ln_sweep_token(token);
  if (swept) {
    FTL_LOG(FTL_LOG_WARN, "launcher", "killed %d leftover process%s of this attempt", swept, swept == 1 ? "" : "es");
    ln_events_write(o->events, "leftovers_killed", o->attempt, json_pack("{s:i}", "count", swept));
  }
  if (rc == FTL_OK && a->gang.pid > 0) conclude(a);
  if (a->gang.pid > 0) set_phase(a, LN_PHASE_ENDED);
  ln_mfu_finish(a->mfu, o->events, o->attempt, &res->mfu);
  json_t *end = json_pack("{s:s, s:s, s:i, s:i, s:i, s:s, s:I, s:I, s:f}", "outcome", ln_outcome_name(res->outcome),
                           "cause", ln_failure_kind_name(res->kind), "root_rank", res->root_rank, "exit_code",
                           res->exit_code, "signal", res->signal, "summary", res->summary, "last_step",
                           (json_int_t)res->last_step, "committed_step", (json_int_t)res->committed_step,
                           "duration_ms", res->end_ms);
  if (end && a->rejections > 0) json_object_set_new(end, "rejected_connections", json_integer(a->rejections));
  ln_events_write(o->events, "attempt_end", o->attempt, end);
}

ftl_err ln_attempt_run(const ln_attempt_opts *o, ln_attempt_result *res, ftl_diag *d) {
  attempt a = {.o = o,
               .res = res,
               .world = o->world_size,
               .gang = {.pid = -1, .fd = {-1, -1, -1}, .term_at_ms = FTL_NO_DEADLINE, .kill_at_ms = FTL_NO_DEADLINE},
               .ph = LN_PHASES_INIT,
               .lost_rank = -1,
               .term_rank = -1,
               .hosts_dirty = 1};
  ln_gang_launch L = {FTL_LAUNCH_MPIRUN, NULL, NULL, NULL, ""};
  a.launch = &L;
  ln_runview_init(&a.gpu_view, 0);
  char token[96];
  struct sigaction old[N_HANDLED];
  a.token = token;
  ftl_err rc = attempt_init(&a, token, sizeof token, d);
  if (!rc) set_cadence(&a);
  if (!rc && !a.warm) rc = ln_gang_launch_build(o, a.attempt_dir, rz_rdzv_server_port(a.server), token, &L, d);
  if (rc) goto out;
  if ((rc = ln_sigpipe_open(handled, N_HANDLED, old, d))) goto out;
  rc = spawn_gang(&a, &L, d);
  if (rc == FTL_OK && !reaped(&a)) rc = watch_gang(&a, d);
  ln_sigpipe_close(handled, N_HANDLED, old);
  finish_attempt(&a, token, rc);
out:
  ln_gang_launch_free(&L);
  ln_standby_free_hellos(a.standby_hello, a.world);
  ln_runview_free(&a.gpu_view);
  ln_mfu_destroy(a.mfu);
  ftl_free(a.ranks);
  ftl_free(a.watch);
  rz_rdzv_server_destroy(a.server);
  return rc;
}
