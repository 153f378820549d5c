/* eval/gate.c: the evaluation gate (see gate.h, docs/pipeline.md, docs/formats/verdict.md).
 *
 * Map: running the evaluator (core/proc.h, with a built environment, its own process group, a
 * deadline); the run directory's gate lock; ev_gate_run's steps. The gate spec is
 * eval/gate_spec.c's, the decision eval/decide.c's, the verdict's format eval/verdict.c's,
 * the adapter folder's digest pipeline/snapshot.c's (pl_folder_digest).
 *
 * Deliberately not here: retrying a failed evaluator (a gate that passes on the second try is not
 * a gate), and any environment inherited wholesale from ftl: the evaluator gets PATH and a short
 * list of named variables (docs/pipeline.md), the snapshot's paths, and the spec's eval.env. */
#include "eval/gate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/flock.h"
#include "core/fs.h"
#include "core/jsonl.h"
#include "core/proc.h"
#include "core/rundir.h"
#include "eval/decide.h"
#include "eval/gate_spec.h"
#include "eval/metrics.h"
#include "eval/verdict.h"
#include "ftl/core.h"
#include "pipeline/adapter_commit.h"
#include "pipeline/gate_lock.h"
#include "pipeline/peft.h"
#include "pipeline/registry.h"
#include "pipeline/sha256.h"
#include "pipeline/snapshot.h"

/* ---- running the evaluator ---------------------------------------------------------------- */

typedef struct strv {
  char **v;
  size_t n, cap;
} strv;

static int strv_push(strv *s, char *owned) {
  if (!owned) return -1;
  if (s->n + 2 > s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    char **grown = ftl_realloc(s->v, cap * sizeof *grown);
    if (!grown) {
      ftl_free(owned);
      return -1;
    }
    s->v = grown;
    s->cap = cap;
  }
  s->v[s->n++] = owned;
  s->v[s->n] = NULL;
  return 0;
}

static int strv_pushf(strv *s, const char *name, const char *value) {
  size_t len = strlen(name) + strlen(value) + 2;
  char *kv = ftl_malloc(len);
  if (!kv) return -1;
  snprintf(kv, len, "%s=%s", name, value);
  return strv_push(s, kv);
}

static void strv_free(strv *s) {
  for (size_t i = 0; i < s->n; i++)
    ftl_free(s->v[i]);
  ftl_free(s->v);
  memset(s, 0, sizeof *s);
}

/* What the evaluator may see of ftl's own environment, by name. */
static const char *const passed_through[] = {"PATH",         "HOME",          "TMPDIR",       "LD_LIBRARY_PATH",
                                             "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"};

static void iso_now(char out[40]) {
  int64_t us = ftl_wall_us();
  time_t t = (time_t)(us / 1000000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char base[32];
  strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, 40, "%s.%03dZ", base, (int)(us / 1000 % 1000));
}

/* What is kept of each of the evaluator's output streams; the rest is counted and dropped (an
 * evaluator printing without end must not fill the run directory's disk). */
#define EVAL_OUTPUT_KEEP_BYTES (1u << 20)
/* How long the sweep of the evaluator's leftover processes may take. */
#define SWEEP_MS 5000
/* SIGTERM to the evaluator's group at its deadline (or on a stop signal), SIGKILL this much later. */
#define EVAL_KILL_GRACE_MS 2000

typedef struct eval_run {
  int exit_code; /* -1 when killed by a signal */
  int signal;
  double wall_s;
  uint64_t out_bytes, err_bytes; /* everything the evaluator wrote, kept or not */
  int out_cut, err_cut;          /* more than EVAL_OUTPUT_KEEP_BYTES: the file ends with a note */
  int strays;                    /* processes it left behind that the gate ended */
} eval_run;

static volatile sig_atomic_t stop_signal;
static void on_stop_signal(int sig) { stop_signal = sig; }

/* One output stream: a pipe from the evaluator into a file, capped. */
typedef struct sink {
  int pipe_fd; /* read end, non-blocking; -1 at EOF */
  int file_fd;
  uint64_t total;
  int cut;
} sink;

static void sink_drain(sink *s) {
  char buf[65536];
  while (s->pipe_fd >= 0) {
    ssize_t got = read(s->pipe_fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return; /* EAGAIN: nothing more for now */
    if (got == 0) {
      close(s->pipe_fd);
      s->pipe_fd = -1;
      return;
    }
    uint64_t room = s->total < EVAL_OUTPUT_KEEP_BYTES ? EVAL_OUTPUT_KEEP_BYTES - s->total : 0;
    size_t keep = (uint64_t)got < room ? (size_t)got : (size_t)room;
    if (keep && s->file_fd >= 0 && core_fs_pwrite_all(s->file_fd, buf, keep, s->total) != FTL_OK) {
      core_fs_table.close(s->file_fd);
      s->file_fd = -1;
    }
    if ((size_t)got > keep) s->cut = 1;
    s->total += (uint64_t)got;
  }
}

static void sink_close(sink *s) {
  if (s->pipe_fd >= 0) close(s->pipe_fd);
  if (s->file_fd >= 0) {
    if (s->cut) {
      char note[160];
      int n = snprintf(note, sizeof note, "\n[ftl gate: output cut at %u bytes; %" PRIu64 " bytes were written]\n",
                       EVAL_OUTPUT_KEEP_BYTES, s->total);
      if (n > 0) (void)core_fs_pwrite_all(s->file_fd, note, (size_t)n, EVAL_OUTPUT_KEEP_BYTES);
    }
    core_fs_table.close(s->file_fd);
  }
  s->pipe_fd = s->file_fd = -1;
}

/* The processes whose parent is this one, from /proc (up to cap). */
static size_t list_children(pid_t *out, size_t cap) {
  size_t n = 0;
  pid_t self = getpid();
  DIR *dp = opendir("/proc");
  if (!dp) return 0;
  struct dirent *e;
  while ((e = readdir(dp)) && n < cap) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%.20s/stat", e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0) continue;
    buf[got] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse after the last ')'. */
    const char *rp = strrchr(buf, ')');
    char state;
    int ppid;
    if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == (int)self)
      out[n++] = (pid_t)strtol(e->d_name, NULL, 10);
  }
  closedir(dp);
  return n;
}

static int pid_in(pid_t p, const pid_t *set, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (set[i] == p) return 1;
  return 0;
}

/* Ends every process the evaluator left behind. The gate is a child subreaper while the evaluator
 * runs, so a descendant that escaped its process group (setsid, a double fork) is re-parented to
 * this process when its parent dies: kill and reap every child that was not there before, until
 * none is left (each kill may re-parent that one's own children here). Returns how many. */
static int sweep_strays(const pid_t *before, size_t n_before) {
  int killed = 0;
  int64_t deadline = ftl_deadline_after_ms(SWEEP_MS);
  for (;;) {
    pid_t kids[256];
    size_t n = list_children(kids, sizeof kids / sizeof *kids), found = 0;
    for (size_t i = 0; i < n; i++) {
      if (pid_in(kids[i], before, n_before)) continue;
      found++;
      kill(kids[i], SIGKILL);
      if (waitpid(kids[i], NULL, 0) == kids[i]) killed++;
    }
    if (!found || ftl_deadline_left_ms(deadline) == 0) break;
  }
  return killed;
}

/* Waits for the evaluator, draining its output, until it exits or its deadline (or a stop signal)
 * passes: then its group gets SIGTERM, and SIGKILL 2 s later (core/proc.h's deadlines). Returns 0
 * when it exited by itself, 1 past the deadline, -1 after a stop signal. */
static int wait_evaluator(core_proc *p, sink *so, sink *se, int64_t timeout_ms) {
  core_proc_term_at(p, ftl_deadline_after_ms(timeout_ms), EVAL_KILL_GRACE_MS);
  int stopped = 0;
  for (;;) {
    sink_drain(so);
    sink_drain(se);
    if (stop_signal && !stopped && !p->timed_out) {
      stopped = 1;
      core_proc_signal(p, SIGTERM);
      core_proc_term_at(p, FTL_NO_DEADLINE, 0);
      core_proc_kill_at(p, ftl_deadline_after_ms(EVAL_KILL_GRACE_MS));
    }
    if (core_proc_step(p)) break; /* reaped (a failed waitpid kills the group and reaps) */
    struct pollfd pf[2] = {{.fd = so->pipe_fd, .events = POLLIN}, {.fd = se->pipe_fd, .events = POLLIN}};
    if (poll(pf, 2, 10) < 0 && errno != EINTR) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  return stopped ? -1 : p->timed_out ? 1 : 0;
}

/* Starts the evaluator through core/proc: its own process group, stdin from /dev/null, stdout and
 * stderr through pipes (drained into capped files by the caller), no signal blocked; a failed exec
 * is FTL_ERR_LAUNCH naming the program. */
static ftl_err start_evaluator(const char *prog, char *const *argv, char *const *envp, core_proc *p, sink *so,
                               sink *se, ftl_diag *d) {
  core_proc_opts po = {.file = prog,
                       .argv = argv,
                       .envp = envp,
                       .new_group = 1,
                       .clear_sigmask = 1,
                       .stdio = {{CORE_PROC_DEVNULL, -1}, {CORE_PROC_PIPE, -1}, {CORE_PROC_PIPE, -1}}};
  ftl_diag sd = {{0}};
  ftl_err rc = core_proc_spawn(&po, p, &sd);
  if (rc == FTL_ERR_LAUNCH)
    return ftl_diag_fail(d, FTL_ERR_LAUNCH, "cannot start the evaluator %s: %s", prog, strerror(p->exec_errno));
  if (rc) return ftl_diag_fail(d, rc, "starting the evaluator %s: %s", prog, sd.msg);
  so->pipe_fd = p->fd[1];
  se->pipe_fd = p->fd[2];
  p->fd[1] = p->fd[2] = -1;
  fcntl(so->pipe_fd, F_SETFL, fcntl(so->pipe_fd, F_GETFL) | O_NONBLOCK);
  fcntl(se->pipe_fd, F_SETFL, fcntl(se->pipe_fd, F_GETFL) | O_NONBLOCK);
  return FTL_OK;
}

/* The evaluator with its own process group, stdout/stderr through capped pipes into files, and a
 * deadline: at the deadline the group gets SIGTERM, then SIGKILL 2 s later. FTL_ERR_TIMEOUT when
 * the deadline passed. The evaluator's own process group does not get the terminal's SIGINT, so a
 * SIGINT/SIGTERM/SIGHUP to ftl while it waits is passed on the same way (FTL_ERR_INTERRUPTED).
 * Whatever way it ends, every process it started is ended too (sweep_strays): no evaluator or
 * child of one outlives the gate. */
static ftl_err spawn_wait(const char *prog, char *const *argv, char *const *envp, const char *out_path,
                          const char *err_path, int64_t timeout_ms, eval_run *r, ftl_diag *d) {
  sink so = {-1, -1, 0, 0}, se = {-1, -1, 0, 0};
  core_proc p = {.pid = -1, .fd = {-1, -1, -1}};
  pid_t before[256];
  size_t n_before = 0;
  int was_subreaper = -1; /* -1: not asked yet, so nothing to restore */
  ftl_err rc = FTL_OK;
  so.file_fd = core_fs_table.open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  se.file_fd = core_fs_table.open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (so.file_fd < 0 || se.file_fd < 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot create %s: %s", so.file_fd < 0 ? out_path : err_path, strerror(errno));
    goto out;
  }
  if (prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper, 0, 0, 0) != 0) was_subreaper = 0;
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot become a child subreaper: %s", strerror(errno));
    goto out;
  }
  n_before = list_children(before, sizeof before / sizeof *before);
  int64_t t0 = ftl_clock_ms();
  if ((rc = start_evaluator(prog, argv, envp, &p, &so, &se, d))) goto out;
  const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction sa = {.sa_handler = on_stop_signal}, old[3];
  sigemptyset(&sa.sa_mask);
  stop_signal = 0;
  for (int i = 0; i < 3; i++)
    sigaction(sigs[i], &sa, &old[i]);
  int timed_out = wait_evaluator(&p, &so, &se, timeout_ms);
  core_proc_signal(&p, SIGKILL); /* anything the evaluator left behind in its group */
  r->strays = sweep_strays(before, n_before);
  /* Every writer is gone now; what is still in the pipes is read, with a deadline all the same. */
  int64_t drain_deadline = ftl_deadline_after_ms(1000);
  while ((so.pipe_fd >= 0 || se.pipe_fd >= 0) && ftl_deadline_left_ms(drain_deadline) > 0) {
    struct pollfd pf[2] = {{.fd = so.pipe_fd, .events = POLLIN}, {.fd = se.pipe_fd, .events = POLLIN}};
    poll(pf, 2, 10);
    sink_drain(&so);
    sink_drain(&se);
  }
  for (int i = 0; i < 3; i++)
    sigaction(sigs[i], &old[i], NULL);
  r->wall_s = (double)(ftl_clock_ms() - t0) / 1000.0;
  r->exit_code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
  r->signal = WIFSIGNALED(p.status) ? WTERMSIG(p.status) : 0;
  r->out_bytes = so.total;
  r->err_bytes = se.total;
  r->out_cut = so.cut;
  r->err_cut = se.cut;
  if (timed_out < 0)
    rc = ftl_diag_fail(d, FTL_ERR_INTERRUPTED, "stopped by signal %d; the evaluator %s was ended", (int)stop_signal,
                       prog);
  else if (timed_out)
    rc = FTL_ERR_TIMEOUT;
out:
  if (was_subreaper == 0) prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
  core_proc_close(&p);
  sink_close(&so);
  sink_close(&se);
  return rc;
}

/* ---- the run directory's gate lock -------------------------------------------------------- */

ftl_err ev_gate_rundir_lock(const char *run_dir, const char *what, int *fd_out, ftl_diag *d) {
  char dir[PATH_MAX], path[PATH_MAX];
  *fd_out = -1;
  if (core_rundir_path(dir, sizeof dir, run_dir, FTL_RUNDIR_GATE) || ftl_fmt(path, sizeof path, "%s/lock", dir))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", run_dir);
  ftl_err rc = ftl_mkdir_p(dir, d);
  if (rc) return rc;
  int fd = core_fs_table.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) return ftl_diag_fail(d, FTL_ERR_IO, "cannot open the gate's lock %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    core_fs_table.close(fd);
    return ftl_diag_fail(d, FTL_ERR_IO, "the gate's lock %s is not a regular file", path);
  }
  int64_t timeout_ms = 30000;
  const char *env = getenv("FTL_GATE_LOCK_TIMEOUT_S");
  if (env && *env) {
    char *end = NULL;
    double v = strtod(env, &end);
    if (end == env || *end || !(v >= 0) || v > 86400) {
      core_fs_table.close(fd);
      return ftl_diag_fail(d, FTL_ERR_SPEC, "FTL_GATE_LOCK_TIMEOUT_S=%s is not a number of seconds (0 to 86400)", env);
    }
    timeout_ms = (int64_t)(v * 1000.0 + 0.5);
  }
  rc = core_flock_until(fd, LOCK_EX, ftl_deadline_after_ms(timeout_ms), 0, path, d);
  if (rc == FTL_ERR_TIMEOUT) {
    /* The holder wrote who it is into the file when it took the lock. */
    char holder[256];
    core_flock_note_read(fd, holder, sizeof holder);
    rc = ftl_diag_fail(d, FTL_ERR_TIMEOUT,
                       "another gate or publish holds %s (%s) and did not finish within %.3g s "
                       "(FTL_GATE_LOCK_TIMEOUT_S)",
                       path, holder[0] ? holder : "holder unknown", (double)timeout_ms / 1000.0);
  }
  if (rc) {
    core_fs_table.close(fd);
    return rc;
  }
  core_flock_note_write(fd, what);
  *fd_out = fd;
  return FTL_OK;
}

void ev_gate_rundir_unlock(int fd) {
  if (fd < 0) return;
  /* No stale holder for the next waiter to name; closing releases the flock. */
  if (core_fs_table.ftruncate(fd, 0) != 0) {
    /* Nothing to do: the text is informative only. */
  }
  core_fs_table.close(fd);
}

/* ---- the gate ----------------------------------------------------------------------------- */

/* What one gate holds between its steps; released by gate_free. */
typedef struct gate_ctx {
  const ev_gate_opts *o;
  json_t *snap, *lock, *adapter_files, *base_json;
  const json_t *gate, *ev, *pinned; /* borrowed from snap */
  const char *data_name, *base_name, *data_path, *base_path;
  ev_metrics *metrics;
  char *prog;
  strv argv, envp;
  eval_run er;
  double timeout_s;
  char started[40], ended[40];
  char final_dir[PATH_MAX], gate_dir[PATH_MAX], metrics_path[PATH_MAX], out_path[PATH_MAX], err_path[PATH_MAX];
  char verdict_path[PATH_MAX], adapter_hex[FTL_SHA256_HEX_LEN + 1], lock_where[PATH_MAX];
} gate_ctx;

static void gate_free(gate_ctx *g) {
  json_decref(g->adapter_files);
  json_decref(g->base_json);
  json_decref(g->lock);
  json_decref(g->snap);
  ev_metrics_destroy(g->metrics);
  ftl_free(g->prog);
  strv_free(&g->argv);
  strv_free(&g->envp);
}

static ftl_err gate_paths(gate_ctx *g, ftl_diag *d) {
  const char *rd = g->o->run_dir;
  if (core_rundir_path(g->final_dir, sizeof g->final_dir, rd, FTL_RUNDIR_FINAL) ||
      core_rundir_path(g->gate_dir, sizeof g->gate_dir, rd, FTL_RUNDIR_GATE) ||
      core_rundir_path(g->verdict_path, sizeof g->verdict_path, rd, FTL_RUNDIR_VERDICT) ||
      ftl_fmt(g->metrics_path, sizeof g->metrics_path, "%s/metrics.json", g->gate_dir) ||
      ftl_fmt(g->out_path, sizeof g->out_path, "%s/eval.out", g->gate_dir) ||
      ftl_fmt(g->err_path, sizeof g->err_path, "%s/eval.err", g->gate_dir))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", rd);
  return FTL_OK;
}

/* 1. The locked gate: the snapshot's, checked against the given spec and the registry's lock. */
static ftl_err gate_load_locked(gate_ctx *g, ftl_diag *d) {
  const ev_gate_opts *o = g->o;
  ftl_err rc = pl_snapshot_load(o->run_dir, &g->snap, d);
  if (rc == FTL_ERR_NOTFOUND)
    return ftl_diag_fail(d, rc, "%s has no snapshot.json: it was not started by `ftl run` with a job spec", o->run_dir);
  if (rc) return rc;
  if (!(g->gate = pl_snapshot_gate(g->snap)))
    return ftl_diag_fail(d, FTL_ERR_STATE, "%s was submitted without an eval: section; there is no gate to run",
                         o->run_dir);
  if ((rc = ev_gate_spec_check(g->gate, d))) return rc;
  if (o->given_spec && (rc = ev_gate_spec_compare(g->gate, o->given_spec, NULL, 0, d))) return rc;
  /* The registry's copy of the lock is the one the job cannot rewrite. */
  if ((rc = ev_gate_lock_check(o->run_dir, g->snap, &g->lock, d))) return rc;
  const json_t *reg = json_object_get(g->gate, "registry");
  if (g->lock)
    snprintf(g->lock_where, sizeof g->lock_where, "%s/%s/gate-locks/%s.json",
             json_string_value(json_object_get(reg, "path")), json_string_value(json_object_get(reg, "name")),
             pl_snapshot_run_id(g->snap));
  else if (!o->quiet)
    fprintf(stderr,
            "ftl gate: warning: no registry: section, so the gate is locked only in %s/snapshot.json; it is only "
            "as trustworthy as the run directory (whoever can write it can rewrite the gate)\n",
            o->run_dir);
  g->ev = json_object_get(g->gate, "eval");
  g->data_name = json_string_value(json_object_get(g->ev, "data"));
  g->base_name = json_string_value(json_object_get(g->ev, "base"));
  g->data_path = pl_snapshot_input_path(g->snap, g->data_name);
  g->base_path = g->base_name ? pl_snapshot_input_path(g->snap, g->base_name) : "";
  if (!g->data_path || !g->base_path)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the snapshot has no input '%s' (eval.%s)",
                         g->data_path ? g->base_name : g->data_name, g->data_path ? "base" : "data");
  if (!(g->pinned = pl_snapshot_evaluator(g->snap)))
    return ftl_diag_fail(d, FTL_ERR_STATE,
                         "the snapshot does not pin the evaluator (submitted by an older ftl, which looked "
                         "eval.program up on PATH when the gate ran); submit the run again");
  return FTL_OK;
}

/* 4a. The evaluator: the file resolved at submission, by its absolute path, with the bytes that
 * were hashed then (not whatever PATH finds now). */
static ftl_err gate_check_evaluator(gate_ctx *g, ftl_diag *d) {
  if (!(g->prog = ftl_strdup(json_string_value(json_object_get(g->pinned, "path")))))
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  char now_hex[65];
  uint64_t now_size = 0;
  ftl_diag inner;
  ftl_err rc = pl_snapshot_hash_file(g->prog, now_hex, &now_size, &inner);
  if (rc)
    return ftl_diag_fail(d, rc == FTL_ERR_NOTFOUND ? FTL_ERR_CORRUPT : rc,
                         "the evaluator %s (field 'evaluator.path') cannot be checked: %s", g->prog, inner.msg);
  const char *want = json_string_value(json_object_get(g->pinned, "sha256"));
  if (strcmp(now_hex, want) != 0)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                         "the evaluator %s changed after submission (field 'evaluator.sha256'): sha256 %.12s... at "
                         "submission, %.12s... now; refused",
                         g->prog, want, now_hex);
  return FTL_OK;
}

/* 4b. Its argv (placeholders expanded) and an environment built from scratch. */
static ftl_err gate_build_exec(gate_ctx *g, ftl_diag *d) {
  const ev_gate_opts *o = g->o;
  ev_gate_placeholders ph = {.adapter = g->final_dir,
                              .data = g->data_path,
                              .metrics = g->metrics_path,
                              .base = g->base_path,
                              .run_dir = o->run_dir};
  if (strv_push(&g->argv, ftl_strdup(g->prog))) goto oom;
  const json_t *args = json_object_get(g->ev, "args");
  for (size_t i = 0; i < json_array_size(args); i++) {
    char *x = NULL;
    ftl_err rc = ev_gate_expand(json_string_value(json_array_get(args, i)), &ph, &x, d);
    if (rc) return rc;
    if (strv_push(&g->argv, x)) goto oom;
  }
  for (size_t i = 0; i < sizeof passed_through / sizeof *passed_through; i++) {
    const char *v = getenv(passed_through[i]);
    if (v && strv_pushf(&g->envp, passed_through[i], v)) goto oom;
  }
  char snap_path[PATH_MAX];
  core_rundir_path(snap_path, sizeof snap_path, o->run_dir, FTL_RUNDIR_SNAPSHOT);
  strv *e = &g->envp;
  if (strv_pushf(e, "LC_ALL", "C") || strv_pushf(e, "FTL_SNAPSHOT", snap_path) ||
      strv_pushf(e, "FTL_RUN_DIR", o->run_dir) || strv_pushf(e, "FTL_GATE_ADAPTER", g->final_dir) ||
      strv_pushf(e, "FTL_GATE_DATA", g->data_path) || strv_pushf(e, "FTL_GATE_METRICS", g->metrics_path) ||
      strv_pushf(e, "FTL_GATE_BASE", g->base_path))
    goto oom;
  const json_t *inputs = json_object_get(g->snap, "inputs");
  for (size_t i = 0; i < json_array_size(inputs); i++) {
    const json_t *in = json_array_get(inputs, i);
    char name[160];
    pl_snapshot_input_var(in, name, sizeof name);
    if (strv_pushf(e, name, json_string_value(json_object_get(in, "path")))) goto oom;
  }
  const char *key;
  json_t *val;
  json_object_foreach(json_object_get(g->ev, "env"), key, val) if (strv_pushf(e, key, json_string_value(val))) goto oom;
  return FTL_OK;
oom:
  return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
}

/* 4c. Runs it under its deadline; an evaluator that did not exit 0 is an error (no verdict). */
static ftl_err gate_evaluate(gate_ctx *g, ftl_diag *d) {
  const ev_gate_opts *o = g->o;
  eval_run *er = &g->er;
  g->timeout_s = json_number_value(json_object_get(g->ev, "timeout_s"));
  int64_t timeout_ms = (int64_t)(g->timeout_s * 1000.0 + 0.5);
  if (timeout_ms < 1) timeout_ms = 1;
  if (!o->quiet) fprintf(stderr, "ftl gate: running the evaluator %s (deadline %g s)\n", g->prog, g->timeout_s);
  ftl_err rc = spawn_wait(g->prog, g->argv.v, g->envp.v, g->out_path, g->err_path, timeout_ms, er, d);
  if (!o->quiet && er->strays)
    fprintf(stderr, "ftl gate: ended %d process%s the evaluator left behind\n", er->strays,
            er->strays == 1 ? "" : "es");
  if (!o->quiet && (er->out_cut || er->err_cut))
    fprintf(stderr, "ftl gate: the evaluator's %s%s%s was cut at %u bytes (%s%s%s)\n", er->out_cut ? "stdout" : "",
            er->out_cut && er->err_cut ? " and " : "", er->err_cut ? "stderr" : "", EVAL_OUTPUT_KEEP_BYTES,
            er->out_cut ? g->out_path : "", er->out_cut && er->err_cut ? ", " : "", er->err_cut ? g->err_path : "");
  if (rc == FTL_ERR_TIMEOUT)
    return ftl_diag_fail(d, FTL_ERR_TIMEOUT,
                         "the evaluator %s passed its deadline (eval.timeout_s = %g s) and was killed; its output: "
                         "%s, %s",
                         g->prog, g->timeout_s, g->out_path, g->err_path);
  if (rc) return rc;
  if (er->exit_code != 0) {
    char how[64];
    if (er->signal)
      snprintf(how, sizeof how, "was killed by signal %d", er->signal);
    else
      snprintf(how, sizeof how, "exited %d", er->exit_code);
    return ftl_diag_fail(d, FTL_ERR_LAUNCH, "the evaluator %s %s; its output: %s, %s", g->prog, how, g->out_path,
                         g->err_path);
  }
  return FTL_OK;
}

/* 5 and 6. The metric, the decision (eval/decide.c) and the verdict (a new reference in *out). */
static ftl_err gate_verdict(gate_ctx *g, int *passed_out, json_t **out, ftl_diag *d) {
  ftl_err rc = ev_metrics_load(g->metrics_path, &g->metrics, d);
  if (rc) return rc;
  const char *metric = json_string_value(json_object_get(g->ev, "metric"));
  const json_t *min_gain = json_object_get(g->ev, "min_gain");
  double value = 0;
  ev_metric_state st = ev_metrics_get(g->metrics, metric, &value);
  char reason[PATH_MAX + 1024] = "";
  ev_gate_baseline b = {0};
  if (st == FTL_METRIC_OK && json_is_number(min_gain)) {
    if ((rc = ev_gate_find_baseline(g->gate, &b, d))) return rc;
    if (b.present)
      g->base_json = json_pack("{s:s, s:s, s:o}", "channel", b.channel, "version", b.version, "value",
                               b.has_value ? json_real(b.value) : json_null());
  }
  double gain = 0;
  int has_gain = 0;
  int passed = ev_gate_decide(g->gate, st == FTL_METRIC_OK, value, &b, &gain, &has_gain, reason, sizeof reason);
  if (st != FTL_METRIC_OK)
    snprintf(reason, sizeof reason, "metric '%.200s' is %s in %.3000s", metric, ev_metric_state_text(st),
             g->metrics_path);
  iso_now(g->ended);
  const json_t *snap = g->snap;
  const eval_run *er = &g->er;
  json_t *v =
      json_pack("{s:i, s:s, s:s, s:s, s:f, s:o, s:s, s:b, s:s, s:O, s:O, s:o,"
                " s:{s:s, s:o, s:s, s:s?, s:s, s:s}, s:{s:s, s:s, s:i, s:f, s:I, s:I, s:b, s:i}, s:s, s:s, s:s?}",
                "version", FTL_VERDICT_VERSION, "run_dir", g->o->run_dir, "metric", metric, "direction",
                json_string_value(json_object_get(g->ev, "direction")), "threshold",
                json_number_value(json_object_get(g->ev, "threshold")), "value",
                st == FTL_METRIC_OK ? json_real(value) : json_null(), "value_state",
                st == FTL_METRIC_OK ? "ok" : ev_metric_state_text(st), "passed", passed, "reason", reason, "min_gain",
                min_gain, "baseline", g->base_json ? g->base_json : json_null(), "gain",
                has_gain ? json_real(gain) : json_null(), "digests", "adapter", g->adapter_hex, "adapter_files",
                g->adapter_files, "eval_data", pl_snapshot_input_sha256(snap, g->data_name), "base",
                g->base_name ? pl_snapshot_input_sha256(snap, g->base_name) : NULL, "gate_spec",
                pl_snapshot_gate_sha256(snap), "snapshot", pl_snapshot_digest(snap), "evaluator", "program", g->prog,
                "sha256", json_string_value(json_object_get(g->pinned, "sha256")), "exit_code", er->exit_code, "wall_s",
                er->wall_s, "stdout_bytes", (json_int_t)er->out_bytes, "stderr_bytes", (json_int_t)er->err_bytes,
                "output_cut", er->out_cut || er->err_cut, "strays_ended", er->strays, "started_at", g->started,
                "ended_at", g->ended, "gate_lock", g->lock ? g->lock_where : NULL);
  g->adapter_files = NULL; /* stolen by "o" */
  if (!v) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  *passed_out = passed;
  *out = v;
  return FTL_OK;
}

ev_gate_result ev_gate_run(const ev_gate_opts *o, json_t **verdict_out, ftl_diag *d) {
  ev_gate_result res = FTL_GATE_ERROR;
  gate_ctx g = {.o = o};
  json_t *verdict = NULL;
  int run_lock = -1, passed = 0;
  iso_now(g.started);
  if (gate_paths(&g, d)) goto out;
  /* 0. One gate (or publish) per run directory at a time, and a verdict from an earlier gate must
   * not outlive this one whatever way it ends: removed before anything can fail. */
  if (ev_gate_rundir_lock(o->run_dir, "ftl gate", &run_lock, d)) goto out;
  if (core_fs_table.unlink(g.verdict_path) != 0 && errno != ENOENT) {
    ftl_diag_fail(d, FTL_ERR_IO, "cannot remove the old %s: %s", g.verdict_path, strerror(errno));
    goto out;
  }
  if (gate_load_locked(&g, d)) goto out;
  /* 2. Every input as it was at submission. */
  if (pl_snapshot_verify(g.snap, d)) goto out;
  /* 3. The adapter, committed; a PEFT final/ (a peft program's save_pretrained) also checked for
   * its two files and a well-formed adapter_config.json before any evaluator sees it. */
  if (pl_peft_final_is_peft(g.final_dir) ? pl_peft_final_check(g.final_dir, d)
                                         : pl_adapter_commit_verify(g.final_dir, NULL, 0, d))
    goto out;
  if (pl_folder_digest(g.final_dir, PL_FOLDER_FLAT, &g.adapter_files, g.adapter_hex, d)) goto out;
  /* 4. The evaluator, pinned, run under its deadline. */
  if (ftl_mkdir_p(g.gate_dir, d)) goto out;
  (void)core_fs_table.unlink(g.metrics_path);
  if (gate_check_evaluator(&g, d) || gate_build_exec(&g, d) || gate_evaluate(&g, d)) goto out;
  /* 5, 6. The metric, the decision, the verdict. */
  if (gate_verdict(&g, &passed, &verdict, d)) goto out;
  if (ev_verdict_write(o->run_dir, verdict, d)) goto out;
  res = passed ? FTL_GATE_PASSED : FTL_GATE_FAILED;
  if (verdict_out) *verdict_out = json_incref(verdict);
out:
  ev_gate_rundir_unlock(run_lock);
  json_decref(verdict);
  gate_free(&g);
  return res;
}
