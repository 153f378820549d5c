/* tests/core/test_core_owned_dir.c: folders named for the process that made them (core/owned_dir.c):
 * a made folder is private and names its maker; the sweep removes a dead maker's folder and one
 * whose pid now belongs to a later process, and keeps a live maker's, another pid namespace's, a
 * foreign name's and whatever a link points at. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/owned_dir.h"
#include "ftl/core.h"
#include "ftl_test.h"

static char parent[] = "/tmp/ftl-test-owned-XXXXXX";

static int exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

static void make_dir(const char *name, char *path, size_t size) {
  snprintf(path, size, "%s/%s", parent, name);
  CHECK_INT_EQ(mkdir(path, 0700), 0);
}

static unsigned long my_ns(void) {
  struct stat st;
  CHECK_INT_EQ(stat("/proc/self/ns/pid", &st), 0);
  return (unsigned long)st.st_ino;
}

int main(void) {
  CHECK(mkdtemp(parent) != NULL);
  ftl_diag d = {{0}};
  unsigned long ns = my_ns();

  /* Made: private, named for this process, and the sweep keeps it while the maker lives. */
  char mine[PATH_MAX];
  CHECK_OK(core_owned_dir_make(parent, "t-", "r3", mine, sizeof mine, &d), d.msg);
  struct stat st;
  CHECK_INT_EQ(lstat(mine, &st), 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK_INT_EQ((int)(st.st_mode & 0777), 0700);
  char want[96];
  snprintf(want, sizeof want, "/t-n%lu-p%d-s", ns, (int)getpid());
  CHECK_STR_CONTAINS(mine, want);
  CHECK_STR_CONTAINS(mine, "-r3-");
  core_owned_dir_sweep(parent, "t-");
  CHECK(exists(mine));
  CHECK(core_proc_stat(getpid(), NULL) == 'R');

  /* A maker that ended without removing its folder: the next make sweeps it. */
  int pipefd[2];
  CHECK_INT_EQ(pipe(pipefd), 0);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    char path[PATH_MAX];
    ftl_diag cd = {{0}};
    if (core_owned_dir_make(parent, "t-", NULL, path, sizeof path, &cd) != FTL_OK) _exit(1);
    ssize_t w = write(pipefd[1], path, strlen(path) + 1);
    _exit(w > 0 ? 0 : 1);
  }
  close(pipefd[1]);
  char dead[PATH_MAX] = "";
  CHECK(read(pipefd[0], dead, sizeof dead) > 0);
  close(pipefd[0]);
  int status = 0;
  CHECK_INT_EQ(waitpid(child, &status, 0), child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(exists(dead));

  /* Kept: another namespace's, a name not of the pattern, another prefix's. Swept: this pid with
   * another start time (the pid was reused since). A link named like a dead maker's folder is not
   * followed: what it points at stays. */
  char other_ns[PATH_MAX], foreign[PATH_MAX], other_prefix[PATH_MAX], reused[PATH_MAX], target[PATH_MAX], link[PATH_MAX];
  char name[160];
  snprintf(name, sizeof name, "t-n%lu-p%d-s1-XXXXXX", ns + 1, (int)child);
  make_dir(name, other_ns, sizeof other_ns);
  make_dir("t-nothing-to-see", foreign, sizeof foreign);
  snprintf(name, sizeof name, "u-n%lu-p%d-s1-XXXXXX", ns, (int)child);
  make_dir(name, other_prefix, sizeof other_prefix);
  snprintf(name, sizeof name, "t-n%lu-p%d-s1-XXXXXX", ns, (int)getpid());
  make_dir(name, reused, sizeof reused);
  make_dir("target", target, sizeof target);
  snprintf(link, sizeof link, "%s/t-n%lu-p%d-s1-link", parent, ns, (int)child);
  CHECK_INT_EQ(symlink(target, link), 0);

  char second[PATH_MAX];
  CHECK_OK(core_owned_dir_make(parent, "t-", NULL, second, sizeof second, &d), d.msg);
  CHECK(!exists(dead));
  CHECK(!exists(reused));
  CHECK(exists(mine));
  CHECK(exists(second));
  CHECK(exists(other_ns));
  CHECK(exists(foreign));
  CHECK(exists(other_prefix));
  CHECK(exists(link));
  CHECK(exists(target));

  /* A name that does not fit is an error, and leaves nothing. */
  char tiny[16];
  CHECK_INT_EQ(core_owned_dir_make(parent, "t-", NULL, tiny, sizeof tiny, &d), FTL_ERR_RANGE);
  CHECK_STR_CONTAINS(d.msg, "too long");

  CHECK_INT_EQ(ftl_test_rm_rf(parent), 0);
  printf("ok\n");
  return 0;
}
