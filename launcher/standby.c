/* launcher/standby.c: the standby gang's life (launcher/standby.h): started beside a running
 * attempt, parked, dropped, started again after a death, taken over by the next attempt.
 *
 * The standby is started only once the running attempt's ranks have joined the rendezvous: that
 * proves the program calls ftl_init, so its standby will park there rather than run the training
 * outside any attempt. It is started after the attempt's own start-up, so the two never compete
 * for the CPU while the attempt starts. */
#include "launcher/standby.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rundir.h"
#include "ftl/core.h"
#include "launcher/attempt_env.h"
#include "launcher/detect.h"
#include "launcher/gang.h"
#include "launcher/jobspec.h"
#include "rendezvous/wire.h"

/* The back-off before a standby that died is started again: 1 s, doubling, at most 60 s. */
static int64_t restart_backoff_ms(int deaths) {
  int64_t ms = 1000;
  for (int i = 1; i < deaths && ms < 60000; i++) ms *= 2;
  return ms < 60000 ? ms : 60000;
}

void ln_standby_init(ln_standby *sb, const ln_job *job, ln_events *events) {
  memset(sb, 0, sizeof *sb);
  /* auto (the default) is on, on one machine or several: a take-over is a restart like any other. */
  int on = job->standby != 0;
  sb->enabled = on && job->max_restarts > 0;
  sb->events = events;
  size_t used = 0;
  for (size_t i = 0; i < job->preload_count; i++) {
    size_t len = strlen(job->preload[i]);
    if (used + len + 2 > sizeof sb->preload) break;
    if (used) sb->preload[used++] = ',';
    memcpy(sb->preload + used, job->preload[i], len + 1);
    used += len;
  }
  sb->spec_preload_len = used;
  sb->gang = (core_proc){.pid = -1, .fd = {-1, -1, -1}, .term_at_ms = FTL_NO_DEADLINE, .kill_at_ms = FTL_NO_DEADLINE};
}

static void free_gang_state(ln_standby *sb) {
  ln_standby_free_hellos(sb->hello, sb->world);
  sb->hello = NULL;
  ftl_free(sb->rss_kb);
  sb->rss_kb = NULL;
  ftl_free(sb->parked_rank);
  sb->parked_rank = NULL;
  ln_gang_launch_free(&sb->launch);
  rz_rdzv_server_destroy(sb->server);
  sb->server = NULL;
  core_proc_close(&sb->gang);
  sb->gang = (core_proc){.pid = -1, .fd = {-1, -1, -1}, .term_at_ms = FTL_NO_DEADLINE, .kill_at_ms = FTL_NO_DEADLINE};
  sb->live = 0;
  sb->agents_up = sb->parked = sb->announced = sb->doomed = 0;
  sb->preloading = 0;
}

void ln_standby_free_hellos(json_t **hello, int world) {
  if (!hello) return;
  for (int i = 0; i < world; i++) json_decref(hello[i]);
  ftl_free(hello);
}

long ln_standby_rss_kb(const ln_standby *sb) {
  if (!sb->live || !sb->rss_kb) return -1;
  long sum = 0;
  for (int i = 0; i < sb->world; i++) {
    if (sb->rss_kb[i] < 0) return -1;
    sum += sb->rss_kb[i];
  }
  return sum;
}

/* Kills what is left of the gang: its ranks through their agents and mpirun's group at once (a
 * parked rank has nothing to save), then any process on this host that carries its token. */
/* How long a dropped standby's srun is given to end its step by itself once its ranks are killed
 * (it does in well under a second): a SIGKILLed srun leaves each node's slurmstepd retrying its
 * task-exit message for 2-5 s, and the job's end (or the next run of a requeued job, which numbers
 * its steps from 0 again) waits for them. */
enum { SRUN_EXIT_WAIT_MS = 1500 };

/* Ends the gang; wait_srun: a srun is first given SRUN_EXIT_WAIT_MS to exit on its own (a drop,
 * not a death found in the launcher's loop, which must not stall on it). */
static void kill_gang(ln_standby *sb, int wait_srun) {
  if (sb->server) rz_rdzv_server_signal_agents(sb->server, SIGKILL);
  if (wait_srun && sb->server && sb->launch.kind == FTL_LAUNCH_SRUN) {
    int64_t deadline = ftl_deadline_after_ms(SRUN_EXIT_WAIT_MS);
    while (sb->gang.pid > 0 && !core_proc_reap(&sb->gang) && ftl_deadline_left_ms(deadline) > 0) poll(NULL, 0, 10);
  }
  if (sb->gang.pid > 0 && !sb->gang.reaped) core_proc_kill_wait(&sb->gang);
  if (sb->token[0]) ln_sweep_token(sb->token);
}

/* The standby is gone (reason); early: before every rank parked. A death counts towards the
 * back-off and, repeated, turns the standby off for the run. */
static void lost(ln_standby *sb, const char *reason, int died) {
  int early = sb->parked < sb->world;
  int preloading = sb->preloading; /* free_gang_state forgets it */
  kill_gang(sb, !died);
  if (died) {
    sb->deaths++;
    if (early) sb->early_exits++;
    sb->retry_at_ms = ftl_clock_ms() + restart_backoff_ms(sb->deaths);
  }
  FTL_LOG(died ? FTL_LOG_WARN : FTL_LOG_INFO, "launcher", "standby gang for attempt %d %s: %s", sb->attempt,
          died ? "lost" : "dropped", reason);
  ln_events_write(sb->events, "standby_lost", sb->attempt,
                  json_pack("{s:s, s:b, s:b, s:I}", "reason", reason, "died", died, "parked", !early, "retry_in_ms",
                            (json_int_t)(died ? sb->retry_at_ms - ftl_clock_ms() : 0)));
  free_gang_state(sb);
  const char *off = NULL;
  if (died && !sb->ever_parked && sb->early_exits >= LN_STANDBY_MAX_EARLY_EXITS)
    off = preloading ? "its ranks ended before parking every time: a module it preloads may fail or exit when "
                           "imported (restart.preload, or what the attempt imported)"
                         : "its ranks ended before parking in ftl_init every time: the program may exit or fail before ftl_init";
  else if (died && sb->deaths >= LN_STANDBY_MAX_DEATHS)
    off = "it died too many times in a row";
  if (off) {
    sb->enabled = 0;
    FTL_LOG(FTL_LOG_WARN, "launcher", "standby turned off for this run: %s; restarts start cold", off);
    ln_events_write(sb->events, "standby_disabled", sb->attempt, json_pack("{s:s, s:i}", "reason", off, "deaths", sb->deaths));
  }
}

void ln_standby_drop(ln_standby *sb, const char *reason) {
  if (sb->live) lost(sb, reason, 0);
}

/* The standby's own server events: its agents and parked ranks. A loss ends it, after the server
 * has finished its turn (the server must not be destroyed under its own handler). */
static void doom(ln_standby *sb, const char *why) {
  if (sb->doomed) return;
  sb->doomed = 1;
  snprintf(sb->doom_reason, sizeof sb->doom_reason, "%s", why);
}

static void on_event(void *user, const rz_rdzv_event *ev) {
  ln_standby *sb = user;
  if (!sb->live) return;
  int known = ev->rank >= 0 && ev->rank < sb->world;
  char why[300];
  switch (ev->kind) {
    case FTL_RDZV_AGENT_HELLO:
      if (!known || sb->hello[ev->rank]) return;
      sb->hello[ev->rank] = json_deep_copy(ev->msg);
      sb->agents_up++;
      break;
    case FTL_RDZV_AGENT_ALIVE:
      /* Before parking the figure is the start-up's, still growing: only a parked rank's counts. */
      if (known && sb->parked_rank[ev->rank]) sb->rss_kb[ev->rank] = ev->hb ? (long)ev->hb->rss_kb : -1;
      break;
    case FTL_RDZV_RANK_PARKED:
      if (!known || sb->parked_rank[ev->rank]) return;
      sb->parked_rank[ev->rank] = 1;
      sb->parked++;
      if (sb->preloading && json_integer_value(json_object_get(ev->msg, "imported")) > sb->preloaded) {
        sb->preloaded = (int)json_integer_value(json_object_get(ev->msg, "imported"));
        sb->import_s = json_number_value(json_object_get(ev->msg, "import_s"));
      }
      /* The rank's own figure at parking; its agent's later reports keep it current. */
      sb->rss_kb[ev->rank] = (long)rz_wire_int(ev->msg, "rss_kb", -1);
      if (sb->parked == sb->world && !sb->announced) {
        sb->announced = 1;
        sb->ever_parked = 1;
        sb->early_exits = sb->deaths = 0;
        sb->parked_ms = ftl_clock_ms();
        long rss = ln_standby_rss_kb(sb);
        FTL_LOG(FTL_LOG_INFO, "launcher", "standby gang parked for attempt %d (%d rank%s, %.2f s to park)", sb->attempt,
                sb->world, sb->world == 1 ? "" : "s", (double)(sb->parked_ms - sb->start_ms) / 1000.0);
        json_t *fields = json_pack("{s:i, s:I, s:I}", "world_size", sb->world, "park_ms",
                                   (json_int_t)(sb->parked_ms - sb->start_ms), "rss_kb", (json_int_t)rss);
        if (fields && sb->preloading) {
          json_object_set_new(fields, "preloaded_modules", json_integer(sb->preloaded));
          json_object_set_new(fields, "import_s", json_real(sb->import_s));
          const json_t *failed = json_object_get(ev->msg, "failed");
          if (json_is_array(failed) && json_array_size(failed))
            json_object_set_new(fields, "preload_failed", json_deep_copy(failed));
        }
        ln_events_write(sb->events, "standby_parked", sb->attempt, fields);
      }
      break;
    case FTL_RDZV_AGENT_EXIT: {
      /* Its last line on stderr, when it said something: why a program would not park. */
      char tail[200] = "";
      const char *t = rz_wire_str(ev->msg, "stderr_tail", "");
      size_t len = strlen(t);
      while (len && (t[len - 1] == '\n' || t[len - 1] == '\r')) len--;
      size_t start = len;
      while (start && t[start - 1] != '\n') start--;
      if (len > start) snprintf(tail, sizeof tail, ": \"%.*s\"", (int)(len - start), t + start);
      snprintf(why, sizeof why, "rank %d's program ended (exit code %d, signal %d)%s", ev->rank,
               (int)rz_wire_int(ev->msg, "exit_code", -1), (int)rz_wire_int(ev->msg, "signal", 0), tail);
      doom(sb, why);
      break;
    }
    case FTL_RDZV_CONN_LOST:
      snprintf(why, sizeof why, "the connection of rank %d's %s dropped", ev->rank, ev->role);
      doom(sb, why);
      break;
    case FTL_RDZV_REJECTED:
      FTL_LOG(FTL_LOG_WARN, "launcher", "standby: refused a connection from %s: %s", ev->peer ? ev->peer : "?",
              ev->detail ? ev->detail : "");
      ln_events_write(sb->events, "rendezvous_rejected", sb->attempt,
                      json_pack("{s:s, s:s, s:b}", "reason", ev->detail ? ev->detail : "", "peer",
                                ev->peer ? ev->peer : "?", "standby", 1));
      break;
    default:
      break;
  }
}

/* The same way the attempt's gang is started (supervise.c's spawn_gang), with FTL_STANDBY=1. */
static ftl_err start(ln_standby *sb, const ln_attempt_opts *run, ftl_diag *d) {
  ln_attempt_opts o = *run;
  sb->live = 1; /* from here on, lost() cleans up whatever was made */
  o.attempt = run->attempt + 1;
  o.standby_launch = 1;
  sb->attempt = o.attempt;
  sb->world = o.world_size;
  ftl_fmt(sb->hostfile, sizeof sb->hostfile, "%s", o.hostfile ? o.hostfile : "");
  char attempt_dir[PATH_MAX];
  ftl_err rc;
  if (core_rundir_attempt_dir(attempt_dir, sizeof attempt_dir, o.run_dir, o.attempt))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "run directory path too long");
  sb->hello = ftl_calloc((size_t)sb->world, sizeof *sb->hello);
  sb->rss_kb = ftl_calloc((size_t)sb->world, sizeof *sb->rss_kb);
  sb->parked_rank = ftl_calloc((size_t)sb->world, sizeof *sb->parked_rank);
  if (!sb->hello || !sb->rss_kb || !sb->parked_rank) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  for (int i = 0; i < sb->world; i++) sb->rss_kb[i] = -1;
  if ((rc = ln_attempt_token(o.attempt, sb->token, sizeof sb->token))) return rc;
  if ((rc = rz_rdzv_server_create(o.rdzv_bind, sb->world, sb->token, &sb->server, d))) return rc;
  /* A parked gang reports as the running one does (supervise.c set_cadence): a standby of a
   * 131,072-rank job would otherwise cost the launcher what the gang cost before the cadence. */
  ln_detect_limits lim = {.startup_ms = o.job->startup_timeout_ms,
                          .step_ms = o.job->step_timeout_ms,
                          .checkpoint_ms = o.job->checkpoint_timeout_ms,
                          .node_ms = o.job->node_timeout_ms};
  ln_cadence cad = ln_detect_cadence(sb->world, &lim, ln_relay_on());
  sb->ping_ms = cad.ping_ms;
  rz_rdzv_server_set_cadence(sb->server, cad.batch_ms, FTL_STRAGGLER_WINDOW, cad.fence_ms);
  if ((rc = ln_gang_launch_build(&o, attempt_dir, rz_rdzv_server_port(sb->server), sb->token, &sb->launch, d))) return rc;
  static const int reset[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
  core_proc_opts po = {.file = sb->launch.argv[0],
                       .argv = sb->launch.argv,
                       .envp = sb->launch.envp,
                       .search_path = 1,
                       .cwd = o.job->working_dir,
                       .new_group = 1,
                       /* A standby has nothing to finish: when the launcher dies, so does its mpirun,
                        * and with it the agents (their parent-death signal), even those still
                        * trying to reach a rendezvous server that is gone. */
                       .pdeath_signal = SIGKILL,
                       .reset_signals = reset,
                       .n_reset_signals = sizeof reset / sizeof *reset};
  sb->start_ms = ftl_clock_ms();
  sb->next_ping_ms = sb->start_ms;
  return core_proc_spawn(&po, &sb->gang, d);
}

static void start_as(ln_standby *sb, const ln_attempt_opts *o, int preloading) {
  if (!sb->enabled || sb->live || ftl_clock_ms() < sb->retry_at_ms) return;
  ftl_diag d = {{0}};
  ln_attempt_opts how = *o;
  /* A program that calls ftl_init parks there: it runs as it is. A Python program that does not
   * parks in its runner, with the modules imported. */
  how.pyrun_argv = preloading ? o->pyrun_argv : NULL;
  how.preload = preloading ? sb->preload : NULL;
  ftl_err rc = start(sb, &how, &d);
  sb->preloading = preloading;
  sb->preloaded = -1;
  sb->import_s = 0;
  if (rc == FTL_OK) {
    size_t modules = 0;
    for (const char *c = sb->preload; preloading && *c; c++) modules += *c == ',';
    if (preloading && sb->preload[0]) modules++;
    FTL_LOG(FTL_LOG_DEBUG, "launcher", "starting a standby gang for attempt %d%s", sb->attempt,
            preloading ? " (a Python runner preloading the attempt's modules)" : "");
    ln_events_write(sb->events, "standby_started", sb->attempt,
                    json_pack("{s:i, s:s, s:s, s:I}", "world_size", sb->world, "hostfile", sb->hostfile, "parks_in",
                              preloading ? "pyrun" : "ftl_init", "preload_modules", (json_int_t)modules));
    return;
  }
  char why[400];
  ftl_fmt(why, sizeof why, "could not start: %s", d.msg); /* cut at worst: a message */
  lost(sb, why, 1);
}

void ln_standby_maybe_start(ln_standby *sb, const ln_attempt_opts *o) { start_as(sb, o, 0); }

void ln_standby_maybe_start_preloading(ln_standby *sb, const ln_attempt_opts *o) {
  if (o->pyrun_argv) start_as(sb, o, 1);
}

void ln_standby_note_imports(ln_standby *sb, int rank, const json_t *msg) {
  const json_t *modules = json_object_get(msg, "modules");
  if (!json_is_array(modules)) return;
  /* Rank 0's list is kept over another rank's: every rank runs the same program, and one list keeps
   * the standby's start-up the same on every rank. */
  if (rank != 0 && sb->preload[sb->spec_preload_len] != '\0') return;
  size_t used = sb->spec_preload_len;
  sb->preload[used] = '\0';
  size_t i;
  json_t *name;
  json_array_foreach(modules, i, name) {
    const char *s = json_string_value(name);
    if (!s || !ln_job_module_name_ok(s)) continue;
    size_t len = strlen(s);
    if (used + len + 2 > sizeof sb->preload) break;
    if (used) sb->preload[used++] = ',';
    memcpy(sb->preload + used, s, len + 1);
    used += len;
  }
}

size_t ln_standby_pollfds(const ln_standby *sb, struct pollfd *fds, size_t cap) {
  if (!sb || !sb->live || !sb->server) return 0;
  return rz_rdzv_server_pollfds(sb->server, fds, cap);
}

void ln_standby_turn(ln_standby *sb, const struct pollfd *fds, size_t n) {
  if (!sb || !sb->live) return;
  if (n) rz_rdzv_server_handle(sb->server, fds, n, on_event, sb);
  if (sb->doomed) {
    lost(sb, sb->doom_reason, 1);
    return;
  }
  if (core_proc_reap(&sb->gang)) {
    char why[128];
    snprintf(why, sizeof why, "its %s exited", sb->launch.kind == FTL_LAUNCH_SRUN ? "srun" : "mpirun");
    lost(sb, why, 1);
    return;
  }
  if (ftl_clock_ms() >= sb->next_ping_ms) {
    /* The agents end their programs after FTL_NODE_TIMEOUT_MS without a word from the launcher. */
    rz_rdzv_server_ping_agents(sb->server);
    sb->next_ping_ms = ftl_clock_ms() + (sb->ping_ms > 0 ? sb->ping_ms : 1000);
  }
}

/* Whether two hostfiles say the same (both absent counts). */
static int same_hostfile(const char *a, const char *b) {
  if (!*a && !*b) return 1;
  if (!*a || !*b) return 0;
  char *x = NULL, *y = NULL;
  size_t nx = 0, ny = 0;
  ftl_diag d;
  int same = ftl_read_file(a, 1 << 20, &x, &nx, &d) == FTL_OK && ftl_read_file(b, 1 << 20, &y, &ny, &d) == FTL_OK &&
             nx == ny && memcmp(x, y, nx) == 0;
  ftl_free(x);
  ftl_free(y);
  return same;
}

int ln_standby_ready(const ln_standby *sb, int after_attempt) {
  return sb && sb->live && sb->announced && sb->attempt == after_attempt + 1;
}

int ln_standby_fits(const ln_standby *sb, const ln_attempt_opts *o) {
  if (!sb || !sb->live || sb->attempt != o->attempt || sb->world != o->world_size) return 0;
  /* Every agent up: mpirun or srun placed the whole gang. Ranks still in their start-up park soon
   * and are activated then; a gang not even placed (srun waiting for resources, a host mpirun
   * cannot reach) might never be, and the cold path is the sure one. */
  if (sb->agents_up < sb->world) return 0;
  return same_hostfile(sb->hostfile, o->hostfile ? o->hostfile : "");
}

void ln_standby_take(ln_standby *sb, const ln_attempt_opts *o, const char *attempt_dir, rz_rdzv_server **server_out,
                     core_proc *gang_out, char *token_out, size_t token_size, json_t ***hello_out,
                     ln_gang_launch *launch_out) {
  json_t *fields = json_pack("{s:i, s:s, s:I}", "attempt", o->attempt, "attempt_dir", attempt_dir, "timeout_ms",
                             (json_int_t)o->job->rendezvous_timeout_ms);
  rz_rdzv_server_activate(sb->server, fields);
  json_decref(fields);
  ln_events_write(sb->events, "standby_activated", o->attempt,
                  json_pack("{s:i, s:i, s:I, s:I}", "world_size", sb->world, "parked_ranks", sb->parked, "parked_for_ms",
                            (json_int_t)(sb->announced ? ftl_clock_ms() - sb->parked_ms : 0), "rss_kb",
                            (json_int_t)ln_standby_rss_kb(sb)));
  FTL_LOG(FTL_LOG_INFO, "launcher", "attempt %d takes over the standby gang (%d of %d ranks parked)", o->attempt,
          sb->parked, sb->world);
  *server_out = sb->server;
  *gang_out = sb->gang;
  ftl_fmt(token_out, token_size, "%s", sb->token);
  *hello_out = sb->hello;
  ln_gang_launch_move_session(&sb->launch, launch_out);
  sb->server = NULL;
  sb->hello = NULL;
  sb->gang = (core_proc){.pid = -1, .fd = {-1, -1, -1}, .term_at_ms = FTL_NO_DEADLINE, .kill_at_ms = FTL_NO_DEADLINE};
  sb->token[0] = '\0';
  free_gang_state(sb);
}
