/* launcher/supervise.c: one attempt of a job, from spawning the gang to knowing how every rank
 * ended, with the failure detectors that end it early.
 *
 * The launcher is one thread around one poll() loop: the rendezvous server's sockets (ranks and
 * their agents report there), a self-pipe for signals (SIGCHLD, and the ones we act on), and
 * timers checked every 100 ms. Detectors, with their latency:
 *   - a rank that exits or is killed: its agent reports at once (milliseconds);
 *   - a hang: a rank silent for its section's timeout (start-up, step, checkpoint), + <= 100 ms;
 *   - a lost host: every agent on it silent for timeouts.node_s (agents report every second);
 *   - a lost agent: a connection dropped without an exit report, blamed after 250 ms unless a
 *     rank failure arrives meanwhile (mpirun kills the other agents when a rank fails).
 * The first failure is the root cause; the whole gang is then ended at once through the agents
 * rather than by waiting for mpirun. After mpirun is gone, any local process that still carries
 * this attempt's token is killed, so nothing of the job outlives the attempt on this host.
 *
 * Not here: deciding whether to restart (run.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ftl/core.h"
#include "launcher/gang.h"
#include "launcher/launcher.h"
#include "launcher/sigpipe.h"
#include "rendezvous/server.h"
#include "rendezvous/wire.h"

static const char *msg_str(const json_t *msg, const char *key) { return ftl_wire_str(msg, key, ""); }

const char *ftl_failure_kind_name(ftl_failure_kind kind) {
  switch (kind) {
    case FTL_FAIL_NONE: return "none";
    case FTL_FAIL_EXIT: return "exit_code";
    case FTL_FAIL_SIGNAL: return "signal";
    case FTL_FAIL_HANG: return "hang";
    case FTL_FAIL_NODE: return "node_lost";
    case FTL_FAIL_AGENT_LOST: return "agent_lost";
    case FTL_FAIL_RDZV: return "rendezvous";
    case FTL_FAIL_EXEC: return "cannot_start";
    case FTL_FAIL_LAUNCHER: return "launcher";
  }
  return "unknown";
}

enum section_kind { SECTION_STARTUP = 0, SECTION_STEP = 1, SECTION_CHECKPOINT = 2 };

/* Straggler: over its last STRAGGLER_WINDOW heartbeats, a rank's median compute time per step is
 * more than STRAGGLER_RATIO times the median of the other ranks' (and at least STRAGGLER_MIN_MS
 * more). Compute time excludes waiting in collectives, which in synchronous training is where
 * every other rank pays for the straggler. */
#define STRAGGLER_WINDOW 10
#define STRAGGLER_RATIO 1.5
#define STRAGGLER_MIN_MS 2.0

typedef struct rank_state {
  int64_t hello_ms;     /* agent said hello (launcher clock) */
  int64_t progress_ms;  /* last sign of progress: ready, a step, an event */
  int64_t alive_ms;     /* last heartbeat of its agent */
  int64_t last_step;
  int section;
  char state;           /* the program's scheduler state as the agent last saw it */
  int has_agent;
  int64_t lost_ns;      /* when its agent's connection dropped without an exit report, 0 if not */
  char addrs[512];      /* the agent's host addresses */
  double phases[3];     /* rendezvous, mpi_init, comm_init as the rank measured them */
  int ready;
  double first_step_ms;
  int first_step_seen;
  int exited;
  int exit_code, signal;
  double compute_ms[STRAGGLER_WINDOW]; /* the rank's own compute per step, recent heartbeats */
  int compute_count;
  int straggler_reported;
} rank_state;

typedef struct attempt {
  const ftl_attempt_opts *o;
  ftl_attempt_result *res;
  ftl_rdzv_server *server;
  rank_state *ranks;
  int world;
  char attempt_dir[PATH_MAX];
  int64_t start_ms;
  int64_t rdzv_deadline_ms;
  pid_t mpirun;
  int mpirun_status;
  int mpirun_reaped;
  int terminating;         /* we are ending the gang; later exits by TERM/KILL are consequences */
  int64_t kill_deadline_ms;
  int have_root;
  int lost_rank;           /* an agent whose connection dropped without an exit report, or -1 */
  int64_t lost_ms;
  int first_step_count;
  int startup_logged;
  int stop_sent;           /* a stop (preemption) was asked of the ranks */
  int64_t stop_deadline_ms;
} attempt;

static const char *signal_name(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGSTOP: return "SIGSTOP";
    default: return "signal";
  }
}

static double since_start(const attempt *a) { return (double)(ftl_clock_ms() - a->start_ms); }

/* Ends the gang: the agents pass the signal to their programs at once and SIGKILL them after the
 * grace period. mpirun is not signalled here: it would take a second or more to pass the signal on
 * and then SIGKILL the agents early, cutting the grace short. It exits when its ranks have; if it
 * has not by the deadline, its whole process group is killed. */
static void terminate_gang(attempt *a, int sig) {
  if (a->mpirun_reaped) return;
  if (!a->terminating) {
    a->terminating = 1;
    a->kill_deadline_ms = ftl_deadline_after_ms(a->o->kill_grace_ms + 2000);
  }
  ftl_rdzv_server_signal_agents(a->server, sig);
}

/* Records the root cause (the first failure only), logs it, and ends the gang. */
static void set_root(attempt *a, ftl_failure_kind kind, int rank, int code, int sig, const char *how_override,
                     const char *bad_host) {
  if (a->have_root) return;
  a->have_root = 1;
  ftl_attempt_result *r = a->res;
  r->outcome = FTL_ATTEMPT_FAILED;
  r->kind = kind;
  r->root_rank = rank;
  r->retryable = kind != FTL_FAIL_EXEC;
  const char *host = rank >= 0 ? ftl_rdzv_server_host(a->server, rank) : NULL;
  snprintf(r->root_host, sizeof r->root_host, "%s", host ? host : (bad_host ? bad_host : "unknown"));
  if (bad_host) {
    snprintf(r->bad_host, sizeof r->bad_host, "%s", bad_host);
    for (int i = 0; i < a->world; i++) {
      const char *h = ftl_rdzv_server_host(a->server, i);
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
  if (how_override) snprintf(how, sizeof how, "%s", how_override);
  else if (sig) snprintf(how, sizeof how, "was killed by signal %d (%s)", sig, signal_name(sig));
  else snprintf(how, sizeof how, "exited with code %d", code);
  if (rank >= 0)
    ftl_fmt(r->summary, sizeof r->summary, "rank %d on host %s %s (the first failure; its output: %s/rank-%05d.err)",
            rank, r->root_host, how, a->attempt_dir, rank);
  else
    ftl_fmt(r->summary, sizeof r->summary, "%s", how);
  int64_t step = rank >= 0 ? a->ranks[rank].last_step : r->last_step;
  ftl_events_write(a->o->events, "failure", a->o->attempt,
                   json_pack("{s:i, s:s, s:i, s:i, s:s, s:I, s:f, s:s}", "rank", rank, "host", r->root_host,
                             "exit_code", code, "signal", sig, "cause", ftl_failure_kind_name(kind), "step",
                             (json_int_t)step, "detect_lag_ms", r->detect_lag_ms, "message", r->summary));
  FTL_LOG(FTL_LOG_ERROR, "launcher", "%s", r->summary);
  terminate_gang(a, SIGTERM);
}

static void log_startup_summary(attempt *a) {
  if (a->startup_logged || a->first_step_count < a->world) return;
  a->startup_logged = 1;
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
  ftl_events_write(a->o->events, "startup", a->o->attempt,
                   json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "launch_ms", launch, "rendezvous_ms", phases[0],
                             "mpi_init_ms", phases[1], "comm_init_ms", phases[2], "first_step_ms", first, "total_ms",
                             a->res->first_step_ms));
  FTL_LOG(FTL_LOG_INFO, "launcher",
          "start-up (slowest rank per phase): launch %.0f ms, rendezvous %.0f ms, MPI init %.0f ms, "
          "communicator %.0f ms, first step %.0f ms",
          launch, phases[0], phases[1], phases[2], first);
}

enum { LOST_AGENT_SETTLE_MS = 250 };

/* 1 when every agent on host has vanished without an exit report; *first_ns gets the earliest. */
static int host_vanished(const attempt *a, const char *host, int64_t *first_ns) {
  int on_host = 0, gone = 0;
  *first_ns = INT64_MAX;
  for (int i = 0; i < a->world; i++) {
    const char *h = ftl_rdzv_server_host(a->server, i);
    if (!h || strcmp(h, host) != 0) continue;
    on_host++;
    if (!a->ranks[i].has_agent && !a->ranks[i].exited && a->ranks[i].lost_ns) {
      gone++;
      if (a->ranks[i].lost_ns < *first_ns) *first_ns = a->ranks[i].lost_ns;
    }
  }
  return on_host > 0 && gone == on_host;
}

/* Agents vanished without an exit report. A host all of whose agents vanished is lost, but when
 * one host dies mpirun kills the ranks on the others too, so several hosts can look lost within a
 * few milliseconds. The lost one is the first to go, and never the launcher's own host (were it
 * gone, so would be this launcher). */
static void blame_lost_agent(attempt *a) {
  if (a->lost_rank < 0 || a->have_root) return;
  const char *lost_host = NULL;
  int64_t lost_at = INT64_MAX;
  for (int i = 0; i < a->world; i++) {
    const char *h = ftl_rdzv_server_host(a->server, i);
    int64_t first_ns;
    if (!h || !strcmp(h, ftl_hostname()) || !host_vanished(a, h, &first_ns) || first_ns >= lost_at) continue;
    lost_host = h;
    lost_at = first_ns;
  }
  if (lost_host) {
    int on_host = 0;
    for (int i = 0; i < a->world; i++)
      on_host += ftl_rdzv_server_host(a->server, i) && !strcmp(ftl_rdzv_server_host(a->server, i), lost_host);
    char how[300];
    snprintf(how, sizeof how, "host %s is lost: all %d of its rank agents vanished without reporting an exit",
             lost_host, on_host);
    set_root(a, FTL_FAIL_NODE, -1, -1, 0, how, lost_host);
    return;
  }
  set_root(a, FTL_FAIL_AGENT_LOST, a->lost_rank, -1, 0,
           "lost its agent (the agent process died or its host went away)", NULL);
}

static void note_progress(attempt *a, rank_state *s) {
  (void)a;
  s->progress_ms = ftl_clock_ms();
}

/* Library events the launcher itself reads: checkpoint commits and restores (rank 0 speaks for
 * the gang: they are collective), and checkpoint stalls for goodput. */
static void note_library_event(attempt *a, int rank, const char *name, const json_t *fields) {
  if (rank != 0) return;
  ftl_attempt_result *r = a->res;
  int64_t step = ftl_wire_int(fields, "step", -1);
  if (!strcmp(name, "ckpt_committed") && step > r->committed_step) {
    r->committed_step = step;
    r->committed_at_ms = since_start(a);
  } else if (!strcmp(name, "ckpt_saved")) {
    r->ckpt_stall_ms += ftl_wire_num(fields, "stall_ms", 0) + ftl_wire_num(fields, "wait_prev_ms", 0);
  } else if (!strcmp(name, "ckpt_restored")) {
    r->restored_step = step;
  }
}

static void on_event(void *user, const ftl_rdzv_event *ev) {
  attempt *a = user;
  int attempt_no = a->o->attempt;
  ftl_events *log = a->o->events;
  rank_state *s = ev->rank >= 0 && ev->rank < a->world ? &a->ranks[ev->rank] : NULL;
  switch (ev->kind) {
    case FTL_RDZV_AGENT_HELLO:
      if (!s) return;
      s->hello_ms = s->alive_ms = ftl_clock_ms();
      s->has_agent = 1;
      snprintf(s->addrs, sizeof s->addrs, "%s", msg_str(ev->msg, "addrs"));
      ftl_events_write(log, "rank_started", attempt_no,
                       json_pack("{s:i, s:s, s:I, s:I}", "rank", ev->rank, "host", msg_str(ev->msg, "host"), "pid",
                                 (json_int_t)ftl_wire_int(ev->msg, "pid", -1), "launch_ms",
                                 (json_int_t)(s->hello_ms - a->start_ms)));
      break;
    case FTL_RDZV_AGENT_ALIVE:
      if (!s) return;
      s->alive_ms = ftl_clock_ms();
      s->state = msg_str(ev->msg, "state")[0];
      break;
    case FTL_RDZV_RANK_JOINED:
      if (!s) return;
      note_progress(a, s);
      ftl_events_write(log, "rank_joined", attempt_no, json_pack("{s:i}", "rank", ev->rank));
      break;
    case FTL_RDZV_GANG_GO:
      ftl_events_write(log, "rendezvous_complete", attempt_no,
                       json_pack("{s:i, s:f}", "world_size", a->world, "ms_since_launch", since_start(a)));
      break;
    case FTL_RDZV_RANK_READY:
      if (!s) return;
      note_progress(a, s);
      s->phases[0] = ftl_wire_num(ev->msg, "rendezvous_ms", 0);
      s->phases[1] = ftl_wire_num(ev->msg, "mpi_init_ms", 0);
      s->phases[2] = ftl_wire_num(ev->msg, "comm_init_ms", 0);
      s->ready = 1;
      ftl_events_write(log, "rank_ready", attempt_no,
                       json_pack("{s:i, s:f, s:f, s:f, s:s, s:I}", "rank", ev->rank, "rendezvous_ms", s->phases[0],
                                 "mpi_init_ms", s->phases[1], "comm_init_ms", s->phases[2], "backend",
                                 msg_str(ev->msg, "backend"), "device", (json_int_t)ftl_wire_int(ev->msg, "device", -1)));
      break;
    case FTL_RDZV_FIRST_STEP:
      if (!s) return;
      note_progress(a, s);
      s->section = SECTION_STEP;
      s->first_step_ms = ftl_wire_num(ev->msg, "first_step_ms", 0);
      s->last_step = ftl_wire_int(ev->msg, "step", s->last_step);
      if (s->last_step > a->res->last_step) a->res->last_step = s->last_step;
      if (!s->first_step_seen) {
        s->first_step_seen = 1;
        a->first_step_count++;
      }
      ftl_events_write(log, "first_step", attempt_no,
                       json_pack("{s:i, s:f, s:I}", "rank", ev->rank, "first_step_ms", s->first_step_ms, "step",
                                 (json_int_t)s->last_step));
      log_startup_summary(a);
      break;
    case FTL_RDZV_STEP:
      if (!s) return;
      note_progress(a, s);
      s->section = SECTION_STEP;
      s->last_step = ftl_wire_int(ev->msg, "step", s->last_step);
      if (s->last_step > a->res->last_step) a->res->last_step = s->last_step;
      double compute = ftl_wire_num(ev->msg, "compute_ms", -1);
      if (compute >= 0) s->compute_ms[s->compute_count++ % STRAGGLER_WINDOW] = compute;
      break;
    case FTL_RDZV_SECTION:
      if (!s) return;
      note_progress(a, s);
      s->section = !strcmp(msg_str(ev->msg, "name"), "checkpoint") ? SECTION_CHECKPOINT
                   : s->first_step_seen                             ? SECTION_STEP
                                                                    : SECTION_STARTUP;
      break;
    case FTL_RDZV_EVENT: {
      if (s) note_progress(a, s);
      const json_t *src = json_object_get(ev->msg, "fields");
      note_library_event(a, ev->rank, msg_str(ev->msg, "event"), src);
      json_t *fields = json_deep_copy(src);
      if (!json_is_object(fields)) {
        json_decref(fields);
        fields = json_object();
      }
      json_object_set_new(fields, "rank", json_integer(ev->rank));
      ftl_events_write(log, msg_str(ev->msg, "event"), attempt_no, fields);
      break;
    }
    case FTL_RDZV_AGENT_EXIT: {
      if (!s) return;
      s->exited = 1;
      s->exit_code = (int)ftl_wire_int(ev->msg, "exit_code", -1);
      s->signal = (int)ftl_wire_int(ev->msg, "signal", 0);
      const char *exec_error = msg_str(ev->msg, "exec_error");
      ftl_events_write(log, "rank_exit", attempt_no,
                       json_pack("{s:i, s:s, s:i, s:i, s:I}", "rank", ev->rank, "host",
                                 ftl_rdzv_server_host(a->server, ev->rank) ? ftl_rdzv_server_host(a->server, ev->rank) : "?",
                                 "exit_code", s->exit_code, "signal", s->signal, "step", (json_int_t)s->last_step));
      int failed = s->exit_code != 0 || s->signal != 0;
      /* Once we end the gang, ranks dying of our TERM/KILL are consequences, not causes. */
      int consequence = a->terminating && (s->signal == SIGTERM || s->signal == SIGKILL || s->exit_code == 128 + SIGTERM);
      if (failed && !consequence) {
        int64_t wall_us = ftl_wire_int(ev->msg, "wall_us", 0);
        if (wall_us > 0) a->res->detect_lag_ms = (double)(ftl_wall_us() - wall_us) / 1000.0;
        char what[300];
        if (*exec_error) {
          snprintf(what, sizeof what, "could not start its program: %s", exec_error);
          set_root(a, FTL_FAIL_EXEC, ev->rank, s->exit_code, s->signal, what, NULL);
        } else {
          set_root(a, s->signal ? FTL_FAIL_SIGNAL : FTL_FAIL_EXIT, ev->rank, s->exit_code, s->signal, NULL, NULL);
        }
      }
      break;
    }
    case FTL_RDZV_RANK_BYE:
      break;
    case FTL_RDZV_CONN_LOST:
      if (!s) return;
      /* Not the root cause yet: when a rank fails, mpirun kills the other agents, and their
       * connections can drop before the failed rank's own exit report is read. A lost agent is
       * the root cause only if no rank reports a failure within LOST_AGENT_SETTLE_MS. */
      if (strcmp(ev->role, "agent") == 0) {
        s->has_agent = 0;
        if (!s->exited) s->lost_ns = ftl_clock_ns();
        if (!s->exited && !a->terminating && a->lost_rank < 0) {
          a->lost_rank = ev->rank;
          a->lost_ms = ftl_clock_ms();
        }
      }
      break;
    case FTL_RDZV_REJECTED:
      FTL_LOG(FTL_LOG_WARN, "launcher", "refused a rendezvous connection: %s", ev->detail ? ev->detail : "");
      ftl_events_write(log, "rendezvous_rejected", attempt_no, json_pack("{s:s}", "reason", ev->detail ? ev->detail : ""));
      break;
  }
}

static int64_t section_timeout(const attempt *a, int section) {
  switch (section) {
    case SECTION_STEP: return a->o->job->step_timeout_ms;
    case SECTION_CHECKPOINT: return a->o->job->checkpoint_timeout_ms;
    default: return a->o->job->startup_timeout_ms;
  }
}

static const char *section_name(int section) {
  return section == SECTION_STEP ? "step" : section == SECTION_CHECKPOINT ? "checkpoint" : "start-up";
}

/* A host whose agents have all been silent for timeouts.node_s is lost: the host died or its link
 * is down (a dead TCP peer can take minutes to be noticed by the socket itself). */
static void check_hosts(attempt *a) {
  int64_t now = ftl_clock_ms();
  for (int i = 0; i < a->world; i++) {
    rank_state *s = &a->ranks[i];
    if (!s->has_agent || s->exited || now - s->alive_ms < a->o->job->node_timeout_ms) continue;
    const char *host = ftl_rdzv_server_host(a->server, i);
    /* The host is lost if its other agents have missed heartbeats too (agents report every
     * second; theirs may have come a moment later than this one's, so the bar for them is lower). */
    int silent = 1, ranks_on_host = 0;
    const int64_t missed_ms = 1500;
    for (int j = 0; j < a->world; j++) {
      const char *h = ftl_rdzv_server_host(a->server, j);
      if (!host || !h || strcmp(h, host) != 0) continue;
      ranks_on_host++;
      if (a->ranks[j].has_agent && !a->ranks[j].exited && now - a->ranks[j].alive_ms < missed_ms) silent = 0;
    }
    char how[300];
    if (silent) {
      snprintf(how, sizeof how, "host %s is lost: none of its %d rank agent%s answered for %.1f s", host ? host : "?",
               ranks_on_host, ranks_on_host == 1 ? "" : "s", (double)(now - s->alive_ms) / 1000.0);
      set_root(a, FTL_FAIL_NODE, -1, -1, 0, how, host ? host : "");
    } else {
      snprintf(how, sizeof how, "has a silent agent for %.1f s (its process may be stopped or starved)",
               (double)(now - s->alive_ms) / 1000.0);
      set_root(a, FTL_FAIL_AGENT_LOST, i, -1, 0, how, NULL);
    }
    return;
  }
}

/* A rank silent for its section's timeout is hung. In a hung collective every rank goes silent
 * together, so the culprit is named by evidence: a program the agent sees stopped ('T') first,
 * else the rank furthest behind. */
static void check_hangs(attempt *a) {
  int64_t now = ftl_clock_ms();
  int hung = -1;
  for (int i = 0; i < a->world; i++) {
    rank_state *s = &a->ranks[i];
    /* Only ranks that joined through the library report progress; a program that does not use
     * it has nothing to watch (and one stuck before ftl_init is the rendezvous deadline's). */
    if (s->exited || s->progress_ms == 0) continue;
    if (now - s->progress_ms >= section_timeout(a, s->section)) {
      hung = i;
      break;
    }
  }
  if (hung < 0) return;
  int culprit = -1;
  for (int i = 0; i < a->world && culprit < 0; i++)
    if (!a->ranks[i].exited && a->ranks[i].state == 'T') culprit = i;
  if (culprit < 0) {
    culprit = hung;
    for (int i = 0; i < a->world; i++)
      if (!a->ranks[i].exited && a->ranks[i].last_step < a->ranks[culprit].last_step) culprit = i;
  }
  rank_state *c = &a->ranks[culprit];
  int64_t since = c->progress_ms ? c->progress_ms : a->ranks[hung].progress_ms;
  char how[300];
  snprintf(how, sizeof how, "hung: no progress for %.1f s in its %s section (timeout %.1f s; last step %lld%s)",
           (double)(now - since) / 1000.0, section_name(c->section), (double)section_timeout(a, c->section) / 1000.0,
           (long long)c->last_step, c->state == 'T' ? "; its process is stopped" : "");
  set_root(a, FTL_FAIL_HANG, culprit, -1, 0, how, NULL);
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Reports stragglers (once per rank and attempt) and marks their host suspect: a suspect host
 * that later fails is left out, not just restarted on. */
static void check_stragglers(attempt *a) {
  if (a->world < 2) return;
  double *per_rank = ftl_calloc((size_t)a->world, sizeof *per_rank);
  double *others = ftl_calloc((size_t)a->world, sizeof *others);
  if (!per_rank || !others) goto out;
  for (int i = 0; i < a->world; i++) {
    rank_state *s = &a->ranks[i];
    if (s->compute_count < STRAGGLER_WINDOW || s->exited) goto out; /* every rank needs a full window */
    double w[STRAGGLER_WINDOW];
    memcpy(w, s->compute_ms, sizeof w);
    per_rank[i] = median(w, STRAGGLER_WINDOW);
  }
  for (int i = 0; i < a->world; i++) {
    rank_state *s = &a->ranks[i];
    if (s->straggler_reported) continue;
    int n = 0;
    for (int j = 0; j < a->world; j++)
      if (j != i) others[n++] = per_rank[j];
    double typical = median(others, n);
    if (per_rank[i] < STRAGGLER_RATIO * typical || per_rank[i] - typical < STRAGGLER_MIN_MS) continue;
    s->straggler_reported = 1;
    const char *host = ftl_rdzv_server_host(a->server, i);
    if (host && !a->res->suspect_host[0]) snprintf(a->res->suspect_host, sizeof a->res->suspect_host, "%s", host);
    FTL_LOG(FTL_LOG_WARN, "launcher",
            "straggler: rank %d on host %s computes %.1f ms per step, the others %.1f ms (median of the last %d "
            "reports); host %s is suspect",
            i, host ? host : "?", per_rank[i], typical, STRAGGLER_WINDOW, host ? host : "?");
    ftl_events_write(a->o->events, "straggler", a->o->attempt,
                     json_pack("{s:i, s:s, s:f, s:f}", "rank", i, "host", host ? host : "?", "compute_ms", per_rank[i],
                               "others_median_ms", typical));
  }
out:
  ftl_free(per_rank);
  ftl_free(others);
}

/* The gang did not form in time. The missing ranks are the root cause; joined ranks failing in
 * ftl_init follow from it. Every joined rank is told why, and the gang is ended. */
static void fail_rendezvous(attempt *a, const char *reason) {
  ftl_attempt_result *res = a->res;
  ftl_rdzv_server_fail(a->server, reason);
  a->have_root = 1;
  res->outcome = FTL_ATTEMPT_RDZV_FAILED;
  res->kind = FTL_FAIL_RDZV;
  res->retryable = 1;
  res->failure_ms = since_start(a);
  snprintf(res->summary, sizeof res->summary, "%s", reason);
  ftl_events_write(a->o->events, "rendezvous_failed", a->o->attempt, json_pack("{s:s}", "reason", reason));
  FTL_LOG(FTL_LOG_ERROR, "launcher", "%s", reason);
  terminate_gang(a, SIGTERM);
}

/* Asks the ranks to stop cleanly (preemption). Programs that use the library get a stop request
 * and the preemption grace to checkpoint; programs that do not get the signal itself. */
static void request_stop(attempt *a, int sig) {
  int library_ranks = 0;
  for (int i = 0; i < a->world; i++) library_ranks += a->ranks[i].ready;
  if (!library_ranks) {
    terminate_gang(a, SIGTERM);
    return;
  }
  if (a->stop_sent) return;
  a->stop_sent = 1;
  a->stop_deadline_ms = ftl_deadline_after_ms(a->o->job->preempt_grace_ms);
  char reason[96];
  snprintf(reason, sizeof reason, "preempted by %s", signal_name(sig));
  ftl_rdzv_server_request_stop(a->server, reason);
  FTL_LOG(FTL_LOG_WARN, "launcher", "%s: asked the ranks to checkpoint and stop (grace %.0f s)", reason,
          (double)a->o->job->preempt_grace_ms / 1000.0);
}

static ftl_err make_token(int attempt_no, char *buf, size_t size) {
  unsigned char raw[8] = {0};
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t ignored = read(fd, raw, sizeof raw);
    (void)ignored;
    close(fd);
  }
  uint64_t mix = (uint64_t)ftl_wall_us() ^ ((uint64_t)getpid() << 32);
  for (int i = 0; i < 8; i++) raw[i] ^= (unsigned char)(mix >> (8 * i));
  return ftl_fmt(buf, size, "%02x%02x%02x%02x%02x%02x%02x%02x-a%d", raw[0], raw[1], raw[2], raw[3], raw[4], raw[5],
                 raw[6], raw[7], attempt_no);
}

static int free_port(void) {
  int fd = -1, port = 0;
  ftl_diag d;
  if (ftl_tcp_listen(NULL, &fd, &port, &d) != FTL_OK) return 29500;
  close(fd);
  return port;
}

/* Kills every process on this host whose environment carries this attempt's token: the program's
 * grandchildren that left its process group, or a rank that mpirun failed to reap. */
static int sweep_token(const char *token) {
  char needle[200];
  if (ftl_fmt(needle, sizeof needle, "FTL_RDZV_TOKEN=%s", token)) return 0;
  size_t nlen = strlen(needle);
  int killed = 0;
  DIR *proc = opendir("/proc");
  if (!proc) return 0;
  struct dirent *e;
  pid_t self = getpid();
  while ((e = readdir(proc))) {
    int64_t pid;
    if (ftl_parse_i64(e->d_name, 1, INT_MAX, &pid) != FTL_OK || pid == self) continue;
    char path[64];
    if (ftl_fmt(path, sizeof path, "/proc/%s/environ", e->d_name)) continue;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[65536];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    for (ssize_t i = 0; i + (ssize_t)nlen <= n; i++) {
      if ((i == 0 || buf[i - 1] == '\0') && memcmp(buf + i, needle, nlen) == 0 &&
          (i + (ssize_t)nlen == n || buf[i + nlen] == '\0')) {
        if (kill((pid_t)pid, SIGKILL) == 0) killed++;
        break;
      }
    }
  }
  closedir(proc);
  return killed;
}

static ftl_err set_env_int(const char *name, long long v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", v);
  return setenv(name, buf, 1) == 0 ? FTL_OK : FTL_ERR_NOMEM;
}

static const char *outcome_name(ftl_attempt_outcome o) {
  switch (o) {
    case FTL_ATTEMPT_SUCCEEDED: return "succeeded";
    case FTL_ATTEMPT_FAILED: return "failed";
    case FTL_ATTEMPT_RDZV_FAILED: return "rendezvous_failed";
    case FTL_ATTEMPT_LAUNCH_FAILED: return "launch_failed";
    case FTL_ATTEMPT_INTERRUPTED: return "interrupted";
    case FTL_ATTEMPT_PREEMPTED: return "preempted";
  }
  return "unknown";
}

/* How the attempt ended, once mpirun is gone and the root cause (if any) is known. */
static void conclude(attempt *a) {
  ftl_attempt_result *res = a->res;
  int code = WIFEXITED(a->mpirun_status) ? WEXITSTATUS(a->mpirun_status) : 128 + WTERMSIG(a->mpirun_status);
  int all_zero = 1, first_missing = -1;
  for (int i = 0; i < a->world; i++) {
    if (!a->ranks[i].exited && first_missing < 0) first_missing = i;
    if (!a->ranks[i].exited || a->ranks[i].exit_code != 0 || a->ranks[i].signal != 0) all_zero = 0;
  }
  if (res->outcome == FTL_ATTEMPT_RDZV_FAILED || res->outcome == FTL_ATTEMPT_LAUNCH_FAILED) return;
  if (a->stop_sent && !a->have_root && all_zero) {
    res->outcome = FTL_ATTEMPT_PREEMPTED;
    snprintf(res->summary, sizeof res->summary, "stopped cleanly on %s after step %lld (checkpoint committed at step %lld)",
             signal_name(res->interrupt_signal), (long long)res->last_step, (long long)res->committed_step);
    return;
  }
  if (res->interrupt_signal && !(a->have_root && a->stop_sent)) {
    res->outcome = FTL_ATTEMPT_INTERRUPTED;
    snprintf(res->summary, sizeof res->summary, "stopped by %s; the ranks were stopped", signal_name(res->interrupt_signal));
    return;
  }
  if (a->have_root) return;
  if (code != 0 || !all_zero) {
    char what[300];
    if (first_missing >= 0)
      snprintf(what, sizeof what, "mpirun exited with code %d and rank %d never reported an exit (host %s)", code,
               first_missing,
               ftl_rdzv_server_host(a->server, first_missing) ? ftl_rdzv_server_host(a->server, first_missing) : "unknown");
    else
      snprintf(what, sizeof what, "mpirun exited with code %d", code);
    set_root(a, FTL_FAIL_LAUNCHER, -1, code, 0, what, NULL);
    return;
  }
  res->outcome = FTL_ATTEMPT_SUCCEEDED;
  snprintf(res->summary, sizeof res->summary, "all %d rank%s exited 0", a->world, a->world == 1 ? "" : "s");
}

ftl_err ftl_attempt_run(const ftl_attempt_opts *o, ftl_attempt_result *res, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  attempt a = {.o = o, .res = res, .world = o->world_size, .mpirun = -1, .lost_rank = -1};
  char **launch_argv = NULL;
  char **exports = NULL;
  int exec_pipe[2] = {-1, -1};
  struct pollfd *fds = NULL;
  char token[96];
  memset(res, 0, sizeof *res);
  res->root_rank = -1;
  res->last_step = res->restored_step = res->committed_step = -1;
  res->first_step_ms = res->failure_ms = res->end_ms = res->committed_at_ms = -1;

  if (ftl_fmt(a.attempt_dir, sizeof a.attempt_dir, "%s/attempt-%04d", o->run_dir, o->attempt))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "run directory path too long");
  if ((rc = ftl_mkdir_p(a.attempt_dir, d))) return rc;
  a.ranks = ftl_calloc((size_t)a.world, sizeof *a.ranks);
  fds = ftl_calloc((size_t)a.world * 2 + 16, sizeof *fds);
  if (!a.ranks || !fds) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (int i = 0; i < a.world; i++) a.ranks[i].last_step = -1;
  if ((rc = make_token(o->attempt, token, sizeof token))) goto out;
  if ((rc = ftl_rdzv_server_create(o->rdzv_bind, a.world, token, &a.server, d))) goto out;

  /* What every rank gets. Set here and exported by name (mpirun -x), so it reaches remote hosts. */
  char addr[320];
  ftl_fmt(addr, sizeof addr, "%s:%d", o->rdzv_host, ftl_rdzv_server_port(a.server));
  /* MASTER_ADDR is where rank 0 runs: the hostfile's first host; under Slurm the launcher's own
   * node, where srun places task 0 (the batch host); this machine otherwise. */
  ftl_launch_kind kind = ftl_gang_resolve_kind(o->job->launcher, getenv("SLURM_JOB_ID"));
  char master_addr[256] = "127.0.0.1";
  if (o->hostfile && ftl_gang_first_host(o->hostfile, master_addr, sizeof master_addr, d) != FTL_OK) {
    rc = FTL_ERR_SPEC;
    goto out;
  }
  if (!o->hostfile && kind == FTL_LAUNCH_SRUN) ftl_fmt(master_addr, sizeof master_addr, "%s", ftl_hostname());
  int fail = 0;
  fail |= setenv("FTL_RDZV_ADDR", addr, 1);
  fail |= setenv("FTL_RDZV_TOKEN", token, 1);
  fail |= (int)set_env_int("FTL_RDZV_TIMEOUT_MS", o->job->rendezvous_timeout_ms);
  fail |= setenv("FTL_RUN_DIR", o->run_dir, 1);
  fail |= setenv("FTL_ATTEMPT_DIR", a.attempt_dir, 1);
  fail |= (int)set_env_int("FTL_ATTEMPT", o->attempt);
  fail |= setenv("FTL_JOB_NAME", o->job->name, 1);
  fail |= setenv("FTL_JOB_SPEC_HASH", o->job->spec_hash, 1);
  fail |= (int)set_env_int("FTL_KILL_GRACE_MS", o->kill_grace_ms);
  fail |= (int)set_env_int("FTL_NODE_TIMEOUT_MS", o->job->node_timeout_ms);
  fail |= setenv("FTL_FLEET_LEDGER", o->job->fleet_ledger ? o->job->fleet_ledger : "", 1);
  fail |= (int)set_env_int("FTL_PREEMPT_GRACE_MS", o->job->preempt_grace_ms);
  fail |= setenv("MASTER_ADDR", master_addr, 1);
  fail |= (int)set_env_int("MASTER_PORT", free_port());
  static const char *const fixed_exports[] = {"FTL_RDZV_ADDR", "FTL_RDZV_TOKEN", "FTL_RDZV_TIMEOUT_MS", "FTL_RUN_DIR",
                                              "FTL_ATTEMPT_DIR", "FTL_ATTEMPT", "FTL_JOB_NAME", "FTL_JOB_SPEC_HASH",
                                              "FTL_KILL_GRACE_MS", "FTL_NODE_TIMEOUT_MS", "FTL_FLEET_LEDGER",
                                              "FTL_PREEMPT_GRACE_MS", "MASTER_ADDR", "MASTER_PORT"};
  size_t nfixed = sizeof fixed_exports / sizeof *fixed_exports;
  exports = ftl_calloc(nfixed + o->job->env_count + 1, sizeof *exports);
  if (!exports || fail) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "cannot set the ranks' environment");
    goto out;
  }
  for (size_t i = 0; i < nfixed; i++) exports[i] = (char *)(uintptr_t)fixed_exports[i];
  for (size_t i = 0; i < o->job->env_count; i++) {
    const char *kv = o->job->env[i];
    const char *eq = strchr(kv, '=');
    char name[256];
    if (!eq || (size_t)(eq - kv) >= sizeof name) continue;
    memcpy(name, kv, (size_t)(eq - kv));
    name[eq - kv] = '\0';
    setenv(name, eq + 1, 1);
    exports[nfixed + i] = (char *)(uintptr_t)(kv); /* "-x NAME=VALUE" is also accepted by mpirun */
  }

  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  ftl_gang_opts g = {.kind = kind,
                     .ranks = a.world,
                     .hostfile = o->hostfile,
                     .ftl_exe = o->ftl_exe,
                     .program = o->program,
                     .args = o->job->args,
                     .export_names = exports,
                     .running_as_root = geteuid() == 0,
                     .cpu_count = cpus > 0 ? (int)cpus : 1,
                     .sigkill_grace_s = 0};
  if ((rc = ftl_gang_build_argv(&g, &launch_argv, d))) goto out;
  if (g.kind == FTL_LAUNCH_MPIRUN && geteuid() == 0) {
    /* Open MPI refuses root without both of these, even with --allow-run-as-root on some builds. */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }

  if (pipe2(exec_pipe, O_CLOEXEC)) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "pipe: %s", strerror(errno));
    goto out;
  }
  struct sigaction old[6];
  const int handled[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
  if ((rc = ftl_sigpipe_open(handled, 6, old, d))) goto out;

  json_t *argv_json = json_array();
  for (char **p = launch_argv; *p; p++) json_array_append_new(argv_json, json_string(*p));
  ftl_events_write(o->events, "attempt_start", o->attempt,
                   json_pack("{s:s, s:i, s:s, s:s, s:o}", "job", o->job->name, "world_size", a.world, "launcher",
                             g.kind == FTL_LAUNCH_SRUN ? "srun" : "mpirun", "attempt_dir", a.attempt_dir, "argv", argv_json));
  FTL_LOG(FTL_LOG_INFO, "launcher", "job '%s': starting %d rank%s with %s (attempt %d, run directory %s)", o->job->name,
          a.world, a.world == 1 ? "" : "s", g.kind == FTL_LAUNCH_SRUN ? "srun" : "mpirun", o->attempt, o->run_dir);

  a.start_ms = ftl_clock_ms();
  a.rdzv_deadline_ms = a.start_ms + o->job->rendezvous_timeout_ms;
  a.kill_deadline_ms = FTL_NO_DEADLINE;
  a.mpirun = fork();
  if (a.mpirun < 0) {
    rc = ftl_diag_fail(d, FTL_ERR_LAUNCH, "fork: %s", strerror(errno));
    goto restore;
  }
  if (a.mpirun == 0) {
    setpgid(0, 0); /* its own group: a Ctrl-C at the terminal reaches ftl, which decides */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    for (size_t i = 0; i < 6; i++) sigaction(handled[i], &dfl, NULL);
    if (o->job->working_dir && chdir(o->job->working_dir) != 0) {
      int e = errno;
      ssize_t ignored = write(exec_pipe[1], &e, sizeof e);
      (void)ignored;
      _exit(127);
    }
    execvp(launch_argv[0], launch_argv);
    int e = errno;
    ssize_t ignored = write(exec_pipe[1], &e, sizeof e);
    (void)ignored;
    _exit(127);
  }
  setpgid(a.mpirun, a.mpirun);
  close(exec_pipe[1]);
  exec_pipe[1] = -1;
  int exec_errno = 0;
  if (read(exec_pipe[0], &exec_errno, sizeof exec_errno) == (ssize_t)sizeof exec_errno) {
    waitpid(a.mpirun, NULL, 0);
    a.mpirun_reaped = 1;
    res->outcome = FTL_ATTEMPT_LAUNCH_FAILED;
    res->kind = FTL_FAIL_EXEC;
    snprintf(res->summary, sizeof res->summary, "cannot start %s%s%s: %s", launch_argv[0],
             o->job->working_dir ? " in " : "", o->job->working_dir ? o->job->working_dir : "", strerror(exec_errno));
    goto restore;
  }

  int64_t drain_until = FTL_NO_DEADLINE;
  int64_t next_ping_ms = ftl_clock_ms();
  for (;;) {
    if (ftl_clock_ms() >= next_ping_ms) {
      ftl_rdzv_server_ping_agents(a.server);
      check_stragglers(&a);
      next_ping_ms = ftl_clock_ms() + 1000;
    }
    size_t n = ftl_rdzv_server_pollfds(a.server, fds, (size_t)a.world * 2 + 14);
    fds[n++] = (struct pollfd){.fd = ftl_sigpipe_fd(), .events = POLLIN};
    int timeout = 100;
    if (drain_until != FTL_NO_DEADLINE) timeout = ftl_deadline_left_ms(drain_until);
    if (timeout > 100) timeout = 100;
    int pr = poll(fds, (nfds_t)n, timeout);
    if (pr < 0 && errno != EINTR) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "poll: %s", strerror(errno));
      break;
    }
    if (pr > 0) ftl_rdzv_server_handle(a.server, fds, n - 1, on_event, &a);
    if (pr > 0 && (fds[n - 1].revents & POLLIN)) {
      int sig;
      while ((sig = ftl_sigpipe_next()) != 0) {
        if (sig == SIGCHLD) {
          if (!a.mpirun_reaped && waitpid(a.mpirun, &a.mpirun_status, WNOHANG) == a.mpirun) a.mpirun_reaped = 1;
          continue;
        }
        ftl_events_write(o->events, "signal", o->attempt, json_pack("{s:i, s:s}", "signal", sig, "name", signal_name(sig)));
        if (sig == SIGUSR2) {
          FTL_LOG(FTL_LOG_INFO, "launcher", "received SIGUSR2: passing it to the ranks");
          ftl_rdzv_server_signal_agents(a.server, sig);
          continue;
        }
        if (!res->interrupt_signal) res->interrupt_signal = sig;
        if (sig == SIGTERM || sig == SIGUSR1) {
          request_stop(&a, sig); /* preemption: Slurm's --signal, scancel, a cluster's drain */
          continue;
        }
        FTL_LOG(FTL_LOG_WARN, "launcher", "received %s: stopping the ranks", signal_name(sig));
        terminate_gang(&a, sig == SIGHUP ? SIGTERM : sig);
      }
    }
    if (!a.mpirun_reaped && waitpid(a.mpirun, &a.mpirun_status, WNOHANG) == a.mpirun) a.mpirun_reaped = 1;

    if (!a.mpirun_reaped && !a.terminating) {
      /* The gang must be complete by the rendezvous deadline: every rank's agent started (for
       * any program: mpirun may hang on a host it cannot reach), and, for programs that use the
       * library (some rank joined), every rank joined. */
      int agents = 0;
      for (int i = 0; i < a.world; i++) agents += a.ranks[i].hello_ms > 0;
      if (agents < a.world && ftl_clock_ms() >= a.rdzv_deadline_ms) {
        char missing[700], reason[1024];
        size_t used = 0;
        missing[0] = '\0';
        for (int i = 0; i < a.world && used + 32 < sizeof missing; i++)
          if (!a.ranks[i].hello_ms)
            used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d", used ? ", " : "", i);
        snprintf(reason, sizeof reason,
                 "launch deadline of %.1f s passed with %d of %d ranks never started (ranks %s): mpirun or srun "
                 "could not place the whole gang",
                 (double)o->job->rendezvous_timeout_ms / 1000.0, a.world - agents, a.world, missing);
        fail_rendezvous(&a, reason);
        kill(a.mpirun, SIGTERM); /* the agents that did start are told; mpirun itself may be stuck */
      } else if (!ftl_rdzv_server_went(a.server) && ftl_rdzv_server_joined(a.server) > 0 &&
          ftl_clock_ms() >= a.rdzv_deadline_ms) {
        char missing[700], reason[1024];
        ftl_rdzv_server_describe_missing(a.server, missing, sizeof missing);
        snprintf(reason, sizeof reason, "rendezvous deadline of %.1f s passed with %d of %d ranks missing: %s",
                 (double)o->job->rendezvous_timeout_ms / 1000.0, a.world - ftl_rdzv_server_joined(a.server), a.world,
                 missing);
        fail_rendezvous(&a, reason);
      }
      if (a.lost_rank >= 0 && ftl_clock_ms() - a.lost_ms >= LOST_AGENT_SETTLE_MS) blame_lost_agent(&a);
      if (!a.have_root && !a.stop_sent) check_hosts(&a);
      if (!a.have_root && !a.stop_sent) check_hangs(&a);
      if (a.stop_sent && !a.terminating && ftl_deadline_left_ms(a.stop_deadline_ms) == 0) {
        FTL_LOG(FTL_LOG_ERROR, "launcher", "the ranks did not stop within the preemption grace: ending them");
        terminate_gang(&a, SIGTERM);
      }
    }
    if (a.terminating && !a.mpirun_reaped && ftl_deadline_left_ms(a.kill_deadline_ms) == 0) {
      kill(-a.mpirun, SIGKILL);
      a.kill_deadline_ms = FTL_NO_DEADLINE;
    }
    if (a.mpirun_reaped) {
      /* Let the agents' last reports arrive (they are sent before the agents exit, so they are
       * normally already here), then stop. */
      if (drain_until == FTL_NO_DEADLINE) drain_until = ftl_deadline_after_ms(300);
      if (ftl_deadline_left_ms(drain_until) == 0 || ftl_rdzv_server_connections(a.server) == 0) break;
    }
  }

restore:
  ftl_sigpipe_close(handled, 6, old);
  if (a.mpirun > 0 && !a.mpirun_reaped) {
    kill(-a.mpirun, SIGKILL);
    waitpid(a.mpirun, &a.mpirun_status, 0);
    a.mpirun_reaped = 1;
  }
  blame_lost_agent(&a);
  res->end_ms = since_start(&a);
  int swept = sweep_token(token);
  if (swept) {
    FTL_LOG(FTL_LOG_WARN, "launcher", "killed %d leftover process%s of this attempt", swept, swept == 1 ? "" : "es");
    ftl_events_write(o->events, "leftovers_killed", o->attempt, json_pack("{s:i}", "count", swept));
  }
  if (rc == FTL_OK && a.mpirun > 0) conclude(&a);
  ftl_events_write(o->events, "attempt_end", o->attempt,
                   json_pack("{s:s, s:s, s:i, s:i, s:i, s:s, s:I, s:I, s:f}", "outcome", outcome_name(res->outcome),
                             "cause", ftl_failure_kind_name(res->kind), "root_rank", res->root_rank, "exit_code",
                             res->exit_code, "signal", res->signal, "summary", res->summary, "last_step",
                             (json_int_t)res->last_step, "committed_step", (json_int_t)res->committed_step,
                             "duration_ms", res->end_ms));
out:
  for (int i = 0; i < 2; i++)
    if (exec_pipe[i] >= 0) close(exec_pipe[i]);
  ftl_argv_free(launch_argv);
  ftl_free(exports);
  ftl_free(fds);
  ftl_free(a.ranks);
  ftl_rdzv_server_destroy(a.server);
  return rc;
}
