/* core/proc.c: spawning a child program and ending it on time, and finding a program on PATH (see
 * proc.h).
 *
 * The child between fork and exec only makes system calls: everything that can fail for a reason
 * the caller should hear (pipes, /dev/null) is opened in the parent first. The child's report of a
 * failed chdir or exec is two ints, {stage, errno}, written at once to a close-on-exec pipe: an
 * exec that works closes the pipe, so the parent reads either nothing (EOF: started) or the report. */
#include "core/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ftl/core.h"

enum { STAGE_CHDIR = 1, STAGE_EXEC = 2 };

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* The child's descriptors for 0, 1, 2 as the parent prepared them (-1: inherit), and the ends the
 * parent keeps. */
typedef struct stdio_plan {
  int child[3];
  int parent[3];
  int devnull_rd, devnull_wr;
} stdio_plan;

static void plan_close(stdio_plan *s, int keep_parent_ends) {
  for (int i = 0; i < 3; i++) {
    /* a CORE_PROC_FD descriptor is the caller's; only pipe ends are ours */
    if (s->parent[i] >= 0) close_fd(&s->child[i]);
    if (!keep_parent_ends) close_fd(&s->parent[i]);
  }
  close_fd(&s->devnull_rd);
  close_fd(&s->devnull_wr);
}

static ftl_err plan_stdio(const core_proc_opts *o, stdio_plan *s, ftl_diag *d) {
  for (int i = 0; i < 3; i++) s->child[i] = s->parent[i] = -1;
  s->devnull_rd = s->devnull_wr = -1;
  for (int i = 0; i < 3; i++) {
    const core_proc_stdio *io = &o->stdio[i];
    switch (io->kind) {
      case CORE_PROC_INHERIT: break;
      case CORE_PROC_FD:
        if (io->fd < 0) return ftl_diag_fail(d, FTL_ERR_INVAL, "spawn %s: descriptor %d for fd %d", o->file, io->fd, i);
        s->child[i] = io->fd;
        break;
      case CORE_PROC_DEVNULL: {
        int *nul = i == 0 ? &s->devnull_rd : &s->devnull_wr;
        if (*nul < 0) *nul = open("/dev/null", (i == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
        if (*nul < 0) return ftl_diag_fail(d, FTL_ERR_IO, "cannot open /dev/null: %s", strerror(errno));
        s->child[i] = *nul;
        break;
      }
      case CORE_PROC_PIPE: {
        int p[2];
        if (pipe2(p, O_CLOEXEC) != 0) return ftl_diag_fail(d, FTL_ERR_IO, "pipe: %s", strerror(errno));
        s->child[i] = i == 0 ? p[0] : p[1];
        s->parent[i] = i == 0 ? p[1] : p[0];
        break;
      }
    }
  }
  return FTL_OK;
}

static void report_and_exit(int fd, int stage) {
  int msg[2] = {stage, errno};
  ssize_t ignored = write(fd, msg, sizeof msg);
  (void)ignored;
  _exit(127);
}

/* In the child, after fork: never returns. */
static void child_exec(const core_proc_opts *o, const stdio_plan *s, int report_fd, pid_t parent,
                       const sigset_t *parent_mask) {
  if (o->new_group) setpgid(0, 0);
  if (o->pdeath_signal > 0) {
    prctl(PR_SET_PDEATHSIG, o->pdeath_signal);
    if (getppid() != parent) raise(o->pdeath_signal); /* the parent went before the request took effect */
  }
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  sigemptyset(&dfl.sa_mask);
  for (size_t i = 0; i < o->n_reset_signals; i++) sigaction(o->reset_signals[i], &dfl, NULL);
  /* A source among 0..2 that is not its own slot could be overwritten by an earlier dup2: moved up. */
  int src[3];
  for (int i = 0; i < 3; i++) {
    src[i] = s->child[i];
    if (src[i] >= 0 && src[i] < 3 && src[i] != i) src[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 3);
  }
  for (int i = 0; i < 3; i++) {
    if (s->child[i] < 0) continue;
    if (src[i] < 0) report_and_exit(report_fd, STAGE_EXEC);
    if (src[i] == i) fcntl(i, F_SETFD, 0); /* dup2 onto itself would leave close-on-exec set */
    else if (dup2(src[i], i) < 0) report_and_exit(report_fd, STAGE_EXEC);
  }
  /* A descriptor the program is to keep (close-on-exec in the parent, so no other child gets it). */
  if (o->keep_fd >= 3 && fcntl(o->keep_fd, F_SETFD, 0) != 0) report_and_exit(report_fd, STAGE_EXEC);
  if (o->cwd && chdir(o->cwd) != 0) report_and_exit(report_fd, STAGE_CHDIR);
  sigset_t mask;
  if (o->clear_sigmask) sigemptyset(&mask);
  else mask = *parent_mask;
  sigprocmask(SIG_SETMASK, &mask, NULL);
  char *const *envp = o->envp ? o->envp : environ;
  if (o->search_path) execvpe(o->file, o->argv, envp);
  else execve(o->file, o->argv, envp);
  report_and_exit(report_fd, STAGE_EXEC);
}

static void reap_blocking(core_proc *p) {
  while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR) {
  }
  p->reaped = 1;
}

ftl_err core_proc_spawn(const core_proc_opts *o, core_proc *p, ftl_diag *d) {
  *p = (core_proc){.pid = -1, .fd = {-1, -1, -1}, .term_at_ms = FTL_NO_DEADLINE, .kill_at_ms = FTL_NO_DEADLINE};
  stdio_plan s;
  int report[2] = {-1, -1};
  ftl_err rc = plan_stdio(o, &s, d);
  if (rc) goto fail;
  if (pipe2(report, O_CLOEXEC) != 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "pipe: %s", strerror(errno));
    goto fail;
  }
  /* No handler of the parent may run in the child before it resets them: all blocked over fork. */
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) child_exec(o, &s, report[1], parent, &old);
  int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (pid < 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "fork: %s", strerror(fork_errno));
    goto fail;
  }
  p->pid = pid;
  p->group = o->new_group;
  if (o->new_group) setpgid(pid, pid); /* also here: whichever runs first, the group exists before any kill */
  close_fd(&report[1]);
  plan_close(&s, 1);
  for (int i = 0; i < 3; i++) p->fd[i] = s.parent[i];
  int msg[2] = {0, 0};
  ssize_t got;
  do
    got = read(report[0], msg, sizeof msg);
  while (got < 0 && errno == EINTR);
  close_fd(&report[0]);
  if (got == (ssize_t)sizeof msg) {
    reap_blocking(p);
    p->exec_errno = msg[1];
    core_proc_close(p);
    if (msg[0] == STAGE_CHDIR)
      return ftl_diag_fail(d, FTL_ERR_LAUNCH, "cannot change to the folder %s for %s: %s", o->cwd, o->file,
                           strerror(msg[1]));
    return ftl_diag_fail(d, FTL_ERR_LAUNCH, "cannot execute %s: %s", o->file, strerror(msg[1]));
  }
  return FTL_OK;
fail:
  plan_close(&s, 0);
  close_fd(&report[0]);
  close_fd(&report[1]);
  return rc;
}

int core_proc_signal(const core_proc *p, int sig) {
  if (p->pid <= 0) return -1;
  if (p->group) return kill(-p->pid, sig);
  return p->reaped ? -1 : kill(p->pid, sig);
}

int core_proc_reap(core_proc *p) {
  if (p->reaped || p->pid <= 0) return p->reaped;
  pid_t w = waitpid(p->pid, &p->status, WNOHANG);
  if (w == p->pid) p->reaped = 1;
  else if (w < 0 && errno != EINTR) {
    /* Not ours to wait for any more (SIGCHLD ignored, or reaped elsewhere): nothing to wait on. */
    core_proc_signal(p, SIGKILL);
    p->reaped = 1;
  }
  return p->reaped;
}

void core_proc_term_at(core_proc *p, int64_t deadline_ms, int64_t grace_ms) {
  p->term_at_ms = deadline_ms;
  p->kill_grace_ms = grace_ms;
}

void core_proc_kill_at(core_proc *p, int64_t deadline_ms) { p->kill_at_ms = deadline_ms; }

int core_proc_step(core_proc *p) {
  if (core_proc_reap(p)) return 1;
  if (p->term_at_ms != FTL_NO_DEADLINE && ftl_deadline_left_ms(p->term_at_ms) == 0) {
    core_proc_signal(p, SIGTERM);
    p->timed_out = 1;
    p->term_at_ms = FTL_NO_DEADLINE;
    int64_t kill_at = ftl_deadline_after_ms(p->kill_grace_ms);
    if (kill_at < p->kill_at_ms) p->kill_at_ms = kill_at;
  }
  if (p->kill_at_ms != FTL_NO_DEADLINE && ftl_deadline_left_ms(p->kill_at_ms) == 0) {
    core_proc_signal(p, SIGKILL);
    p->kill_at_ms = FTL_NO_DEADLINE;
  }
  return 0;
}

ftl_err core_proc_wait(core_proc *p, ftl_diag *d) {
  while (!core_proc_step(p)) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (p->timed_out)
    return ftl_diag_fail(d, FTL_ERR_TIMEOUT, "process %d ran past its deadline and was ended", (int)p->pid);
  return FTL_OK;
}

void core_proc_kill_wait(core_proc *p) {
  if (p->pid <= 0 || p->reaped) return;
  core_proc_signal(p, SIGKILL);
  reap_blocking(p);
}

void core_proc_close(core_proc *p) {
  for (int i = 0; i < 3; i++) close_fd(&p->fd[i]);
}

/* ---- finding a program on PATH ------------------------------------------------------------ */

int core_proc_is_executable(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* path made absolute into out (PATH_MAX bytes): with keep_name, only its folder is resolved and its
 * last component kept as written, so a symbolic link stays the link; else realpath() of it all. */
static int absolute_path(const char *path, int keep_name, char *out) {
  if (!keep_name) return realpath(path, out) ? 0 : -1;
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  int dir_len = slash ? (int)(slash - path) : 0;
  char dir[PATH_MAX], real[PATH_MAX];
  if (!*name || ftl_fmt(dir, sizeof dir, "%.*s", dir_len, path) != FTL_OK ||
      !realpath(dir_len ? dir : (slash ? "/" : "."), real))
    return -1;
  return ftl_fmt(out, PATH_MAX, "%s%s%s", real, strcmp(real, "/") ? "/" : "", name) == FTL_OK ? 0 : -1;
}

ftl_err core_proc_find_program(const char *program, const char *path_env, int keep_name, char **abs_out, ftl_diag *d) {
  char buf[PATH_MAX];
  if (!program || !*program) return ftl_diag_fail(d, FTL_ERR_SPEC, "no program to run");
  if (strchr(program, '/')) {
    if (absolute_path(program, keep_name, buf) || access(buf, F_OK))
      return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "program '%s' does not exist", program);
    if (!core_proc_is_executable(buf))
      return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "program '%s' is not an executable file", program);
    *abs_out = ftl_strdup(buf);
    return *abs_out ? FTL_OK : FTL_ERR_NOMEM;
  }
  const char *p = path_env ? path_env : "";
  while (*p) {
    const char *end = strchr(p, ':');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > 0 && ftl_fmt(buf, sizeof buf, "%.*s/%s", (int)len, p, program) == FTL_OK && core_proc_is_executable(buf)) {
      char real[PATH_MAX];
      *abs_out = ftl_strdup(absolute_path(buf, keep_name, real) == 0 ? real : buf);
      return *abs_out ? FTL_OK : FTL_ERR_NOMEM;
    }
    p += len;
    if (*p == ':') p++;
  }
  return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "program '%s' was not found on PATH", program);
}
