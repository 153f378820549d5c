/* tests/unit/test_proc.c: core/proc.c with real processes: a failed exec (and chdir) reported with
 * its errno and the program's name, stdio to a file, a pipe and /dev/null, environment and working
 * folder, and the deadline that sends SIGTERM, then SIGKILL to a program that ignores SIGTERM. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/proc.h"
#include "ftl/core.h"
#include "ftl_test.h"

/* Tests own their argv strings (exec takes char *const *): copies in a static arena that lives to
 * the end (nothing for the leak checker to find). */
static char *own(const char *s) {
  static char arena[4096];
  static size_t used;
  size_t n = strlen(s) + 1;
  CHECK(used + n <= sizeof arena);
  char *c = memcpy(arena + used, s, n);
  used += n;
  return c;
}

static core_proc_opts sh(const char *script, char **argv_buf) {
  argv_buf[0] = own("sh");
  argv_buf[1] = own("-c");
  argv_buf[2] = own(script);
  argv_buf[3] = NULL;
  return (core_proc_opts){.file = "/bin/sh", .argv = argv_buf};
}

static void exec_failure_is_an_error(void) {
  char *argv[] = {own("no-such-program"), NULL};
  core_proc_opts o = {.file = "/nonexistent/no-such-program", .argv = argv, .new_group = 1};
  core_proc p;
  ftl_diag d = {{0}};
  CHECK_INT_EQ(core_proc_spawn(&o, &p, &d), FTL_ERR_LAUNCH);
  CHECK_INT_EQ(p.exec_errno, ENOENT);
  CHECK(p.reaped);
  CHECK_STR_CONTAINS(d.msg, "cannot execute /nonexistent/no-such-program");
  CHECK_STR_CONTAINS(d.msg, strerror(ENOENT));
  /* on PATH too */
  o.file = "ftl-no-such-program-on-path";
  o.search_path = 1;
  CHECK_INT_EQ(core_proc_spawn(&o, &p, &d), FTL_ERR_LAUNCH);
  CHECK_INT_EQ(p.exec_errno, ENOENT);
  CHECK_STR_CONTAINS(d.msg, "ftl-no-such-program-on-path");
  /* a folder that is not there */
  char *a2[4];
  o = sh("true", a2);
  o.cwd = "/nonexistent-folder";
  CHECK_INT_EQ(core_proc_spawn(&o, &p, &d), FTL_ERR_LAUNCH);
  CHECK_INT_EQ(p.exec_errno, ENOENT);
  CHECK_STR_CONTAINS(d.msg, "/nonexistent-folder");
}

static void stdio_to_file_pipe_and_devnull(void) {
  char path[] = "/tmp/ftl_test_proc_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  char *argv[4];
  core_proc_opts o = sh("echo out; echo err >&2; cat", argv);
  o.stdio[0] = (core_proc_stdio){CORE_PROC_DEVNULL, -1};
  o.stdio[1] = (core_proc_stdio){CORE_PROC_FD, fd};
  o.stdio[2] = (core_proc_stdio){CORE_PROC_PIPE, -1};
  core_proc p;
  ftl_diag d = {{0}};
  CHECK_INT_EQ(core_proc_spawn(&o, &p, &d), FTL_OK);
  CHECK(p.fd[0] < 0 && p.fd[1] < 0 && p.fd[2] >= 0);
  char buf[64] = {0};
  size_t got = 0;
  ssize_t n;
  while ((n = read(p.fd[2], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)n;
  CHECK_STR_EQ(buf, "err\n");
  CHECK_INT_EQ(core_proc_wait(&p, &d), FTL_OK);
  CHECK(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0); /* cat read /dev/null: EOF at once */
  core_proc_close(&p);
  char file[64] = {0};
  CHECK(pread(fd, file, sizeof file - 1, 0) == 4);
  CHECK_STR_EQ(file, "out\n");
  close(fd);
  unlink(path);
}

static void env_cwd_and_exit_code(void) {
  char *argv[4];
  char *envp[] = {own("FTL_PROC_TEST=yes"), NULL};
  core_proc_opts o = sh("test \"$FTL_PROC_TEST\" = yes && test \"$(pwd)\" = / && exit 7", argv);
  o.envp = envp;
  o.cwd = "/";
  core_proc p;
  ftl_diag d = {{0}};
  CHECK_INT_EQ(core_proc_spawn(&o, &p, &d), FTL_OK);
  CHECK_INT_EQ(core_proc_wait(&p, &d), FTL_OK);
  CHECK(WIFEXITED(p.status));
  CHECK_INT_EQ(WEXITSTATUS(p.status), 7);
}

/* A program that ignores SIGTERM is killed grace_ms after the deadline; one that does not ends on
 * the SIGTERM. Both in their own process group, so the shell's child goes too. */
static void deadline_term_then_kill(void) {
  char *argv[4];
  core_proc_opts o = sh("trap '' TERM; sleep 30; sleep 30", argv);
  o.new_group = 1;
  o.stdio[0] = (core_proc_stdio){CORE_PROC_DEVNULL, -1};
  core_proc p;
  ftl_diag d = {{0}};
  CHECK_INT_EQ(core_proc_spawn(&o, &p, &d), FTL_OK);
  int64_t t0 = ftl_clock_ms();
  core_proc_term_at(&p, ftl_deadline_after_ms(200), 300);
  CHECK_INT_EQ(core_proc_wait(&p, &d), FTL_ERR_TIMEOUT);
  int64_t took = ftl_clock_ms() - t0;
  CHECK(p.timed_out);
  CHECK(WIFSIGNALED(p.status));
  CHECK_INT_EQ(WTERMSIG(p.status), SIGKILL);
  CHECK(took >= 450 && took < 10000);
  /* The group is gone: the sleep went with the shell. It was orphaned to this process (a child
   * subreaper, below), which reaps it: a zombie would still count as a member. */
  int64_t gone_by = ftl_deadline_after_ms(5000);
  while (core_proc_signal(&p, 0) == 0 && ftl_deadline_left_ms(gone_by) > 0) {
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    usleep(10000);
  }
  CHECK_INT_EQ(core_proc_signal(&p, 0), -1);

  o = sh("sleep 30", argv);
  o.new_group = 1;
  CHECK_INT_EQ(core_proc_spawn(&o, &p, &d), FTL_OK);
  core_proc_term_at(&p, ftl_deadline_after_ms(100), 5000);
  CHECK_INT_EQ(core_proc_wait(&p, &d), FTL_ERR_TIMEOUT);
  CHECK(WIFSIGNALED(p.status));
  CHECK_INT_EQ(WTERMSIG(p.status), SIGTERM);

  /* kill_at alone, and a reset signal: SIGTERM ignored here is default again in the child. */
  signal(SIGTERM, SIG_IGN);
  const int reset[] = {SIGTERM};
  o = sh("sleep 30", argv);
  o.new_group = 1; /* the shell's sleep goes too: no orphan holds the test's output open */
  o.reset_signals = reset;
  o.n_reset_signals = 1;
  CHECK_INT_EQ(core_proc_spawn(&o, &p, &d), FTL_OK);
  signal(SIGTERM, SIG_DFL);
  CHECK_INT_EQ(core_proc_signal(&p, SIGTERM), 0);
  CHECK_INT_EQ(core_proc_wait(&p, &d), FTL_OK);
  CHECK_INT_EQ(WTERMSIG(p.status), SIGTERM);
  o = sh("sleep 30", argv);
  o.new_group = 1;
  CHECK_INT_EQ(core_proc_spawn(&o, &p, &d), FTL_OK);
  core_proc_kill_at(&p, ftl_deadline_after_ms(50));
  CHECK_INT_EQ(core_proc_wait(&p, &d), FTL_OK);
  CHECK_INT_EQ(WTERMSIG(p.status), SIGKILL);
}

int main(void) {
  prctl(PR_SET_CHILD_SUBREAPER, 1); /* orphaned grandchildren come here, to be reaped */
  exec_failure_is_an_error();
  stdio_to_file_pipe_and_devnull();
  env_cwd_and_exit_code();
  deadline_term_then_kill();
  printf("test_proc: ok\n");
  return 0;
}
