/* core/proc.h: starting a child program and ending it on time, the one fork/exec of the tree
 * (libuv's uv_spawn is the design model).
 *
 * core_proc_spawn forks and execs with, as asked: its own process group (so it, and whatever it
 * starts, can be signalled as one), each of stdin/stdout/stderr inherited, /dev/null, a given
 * descriptor or a new pipe, an environment and a working folder, a parent-death signal (Linux
 * PR_SET_PDEATHSIG), named signals reset to their default, and one more descriptor kept across
 * exec (the rank agent's socket to launcher/pyrun.py). A child that cannot change to its
 * folder or exec its program says so over a close-on-exec pipe before it exits: the spawn then
 * fails with the errno and the program's name (FTL_ERR_LAUNCH) rather than leaving a child that
 * "exited 127". Signals are blocked in the parent around fork, so no handler of the parent runs in
 * the child before exec.
 *
 * Ending: a deadline (core_proc_term_at) sends SIGTERM when it passes and SIGKILL a grace later;
 * core_proc_kill_at arms the SIGKILL alone. Both go to the process group when the child has one.
 * A caller with its own poll loop calls core_proc_step each turn; core_proc_wait blocks (10 ms
 * turns) until the child is reaped, acting on the same deadlines.
 *
 * core_proc_find_program resolves a program named on a command line or in a job spec as exec would
 * (PATH for a bare name), to the absolute path ftl then runs or pins.
 *
 * Not here: reading the pipes (the caller polls the descriptors it asked for). */
#ifndef FTL_CORE_PROC_H
#define FTL_CORE_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ftl/error.h"

/* What one of the child's descriptors 0, 1, 2 is. */
typedef enum core_proc_stdio_kind {
  CORE_PROC_INHERIT = 0, /* the parent's own */
  CORE_PROC_DEVNULL,     /* /dev/null (read-only for stdin, write-only for stdout/stderr) */
  CORE_PROC_FD,          /* fd (left open in the parent; the caller closes it) */
  CORE_PROC_PIPE,        /* a new pipe: the parent's end (close-on-exec) lands in core_proc.fd[i] */
} core_proc_stdio_kind;

typedef struct core_proc_stdio {
  core_proc_stdio_kind kind;
  int fd; /* CORE_PROC_FD only */
} core_proc_stdio;

typedef struct core_proc_opts {
  const char *file;        /* the program: a path, or a name looked up on PATH with search_path */
  char *const *argv;       /* argv[0] included, NULL-terminated */
  char *const *envp;       /* the child's environment; NULL: the parent's (environ) */
  int search_path;         /* 1: execvpe (PATH of the caller's environment); 0: execve */
  const char *cwd;         /* changed to before exec; NULL: the parent's */
  int new_group;           /* 1: setpgid(0, 0) in the child (and in the parent, whichever runs first) */
  int pdeath_signal;       /* sent to the child when its parent thread dies (0: none) */
  const int *reset_signals;/* set to SIG_DFL in the child (an ignored signal stays ignored across exec) */
  size_t n_reset_signals;
  int clear_sigmask;       /* 1: the child execs with no signal blocked; 0: with the parent's mask */
  core_proc_stdio stdio[3];
  int keep_fd;             /* >= 3: a descriptor the child keeps across exec (its close-on-exec flag is
                              cleared in the child alone); 0 or -1: none */
} core_proc_opts;

typedef struct core_proc {
  pid_t pid;           /* > 0 once spawned */
  int group;           /* the child leads its own process group */
  int reaped;          /* waited for: status holds how it ended */
  int status;          /* waitpid's status */
  int exec_errno;      /* why the child could not start (0: it did); set when spawn fails so */
  int fd[3];           /* the parent's ends of CORE_PROC_PIPE descriptors, else -1 */
  int timed_out;       /* the term_at deadline passed and SIGTERM was sent */
  int64_t term_at_ms;  /* SIGTERM at this time, then SIGKILL kill_grace_ms later (FTL_NO_DEADLINE: none) */
  int64_t kill_grace_ms;
  int64_t kill_at_ms;  /* SIGKILL at this time (FTL_NO_DEADLINE: none) */
} core_proc;

/* Starts the child. On FTL_OK, p describes it (pid, group, fd[]). FTL_ERR_LAUNCH when the child
 * could not change to cwd or exec file (p->exec_errno; the child is already reaped; d says "cannot
 * execute FILE: REASON" or "cannot change to the folder CWD for FILE: REASON"); FTL_ERR_IO when a
 * pipe, /dev/null or fork failed. On failure no descriptor of p is left open. */
ftl_err core_proc_spawn(const core_proc_opts *o, core_proc *p, ftl_diag *d);

/* Sends sig to the child's process group (or to the child alone when it has none). Returns
 * kill's result. The group is signalled even after the child is reaped: what it left behind. */
int core_proc_signal(const core_proc *p, int sig);

/* Reaps the child if it has ended, without blocking. 1 when it is reaped (now or before). */
int core_proc_reap(core_proc *p);

/* Arms the ending: SIGTERM at deadline_ms, then SIGKILL grace_ms later. FTL_NO_DEADLINE disarms. */
void core_proc_term_at(core_proc *p, int64_t deadline_ms, int64_t grace_ms);

/* Arms SIGKILL alone at deadline_ms (FTL_NO_DEADLINE disarms). */
void core_proc_kill_at(core_proc *p, int64_t deadline_ms);

/* One turn of a caller's loop: reaps without blocking, and while the child lives sends whatever
 * its deadlines call for now. 1 when the child is reaped. */
int core_proc_step(core_proc *p);

/* Blocks until the child is reaped, acting on its deadlines (10 ms turns). FTL_ERR_TIMEOUT when
 * the term_at deadline passed (the child was ended), FTL_OK otherwise. */
ftl_err core_proc_wait(core_proc *p, ftl_diag *d);

/* SIGKILL to the group (or child) and a blocking reap, unless already reaped. */
void core_proc_kill_wait(core_proc *p);

/* Closes the parent's pipe ends still open. Does not wait for or signal the child. */
void core_proc_close(core_proc *p);

/* A regular file this process may execute (stat follows links). */
int core_proc_is_executable(const char *path);

/* Resolves program to an absolute executable path: a name without '/' is looked up on path_env
 * (PATH), a relative path is taken from cwd. keep_name: the folders are resolved but a symbolic
 * link named last stays the link (the job's program: a virtual environment's bin/python is a link
 * to the system's interpreter and finds its venv only when run by its own path); 0: every link
 * resolved (the gate's evaluator, pinned by what it is). Error names the program and why. */
ftl_err core_proc_find_program(const char *program, const char *path_env, int keep_name, char **abs_out, ftl_diag *d);

#endif
