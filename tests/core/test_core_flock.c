/* tests/core/test_core_flock.c: the one flock wait (core/flock.c): free, it is taken at once; held
 * by another process, it gives up at its deadline (not before, not long after) naming the file and
 * the holder's note, whose control bytes are shown as '?'; taken as soon as the holder lets go. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/flock.h"
#include "ftl/core.h"
#include "ftl_test.h"

static char dir[] = "/tmp/ftl-test-flock-XXXXXX";

int main(void) {
  CHECK(mkdtemp(dir) != NULL);
  char path[256];
  snprintf(path, sizeof path, "%s/lock", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  CHECK(fd >= 0);
  ftl_diag d = {{0}};

  /* Free: taken at once, shared or exclusive; the note names this process. */
  CHECK_OK(core_flock_until(fd, LOCK_EX, ftl_clock_ms(), 1, path, &d), d.msg);
  core_flock_note_write(fd, "gate");
  char note[256];
  core_flock_note_read(fd, note, sizeof note);
  char want[64];
  snprintf(want, sizeof want, "gate: pid %ld on ", (long)getpid());
  CHECK_STR_CONTAINS(note, want);
  CHECK_STR_CONTAINS(note, " since 20");
  CHECK(strchr(note, '\n') == NULL);
  CHECK_INT_EQ(flock(fd, LOCK_UN), 0);

  /* Held by a child (its own open file): a deadline 300 ms away is met, and the error names the
   * file and the holder's note. The child's note carries a control byte, shown as '?'. */
  int ready[2], release[2];
  CHECK_INT_EQ(pipe(ready), 0);
  CHECK_INT_EQ(pipe(release), 0);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    int cfd = open(path, O_RDWR);
    if (cfd < 0 || flock(cfd, LOCK_EX) != 0) _exit(1);
    const char text[] = "publish\033[2J: pid 1 on elsewhere since then\n";
    if (ftruncate(cfd, 0) != 0 || pwrite(cfd, text, sizeof text - 1, 0) < 0) _exit(1);
    char c = 'x';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    if (read(release[0], &c, 1) != 1) _exit(1);
    _exit(0); /* the lock goes with the process */
  }
  char c;
  CHECK_INT_EQ(read(ready[0], &c, 1), 1);
  int64_t t0 = ftl_clock_ms();
  CHECK_INT_EQ(core_flock_until(fd, LOCK_SH, ftl_deadline_after_ms(300), 1, path, &d), FTL_ERR_TIMEOUT);
  int64_t took = ftl_clock_ms() - t0;
  fprintf(stderr, "gave up after %lld ms: %s\n", (long long)took, d.msg);
  CHECK(took >= 290 && took < 2000);
  CHECK_STR_CONTAINS(d.msg, path);
  CHECK_STR_CONTAINS(d.msg, "stayed locked by another process");
  CHECK_STR_CONTAINS(d.msg, "(publish?[2J: pid 1 on elsewhere since then)");
  /* Without the note asked for, none is read. */
  CHECK_INT_EQ(core_flock_until(fd, LOCK_EX, ftl_clock_ms(), 0, path, &d), FTL_ERR_TIMEOUT);
  CHECK(strstr(d.msg, "publish") == NULL);

  /* Released while waiting: taken then, well before the deadline. */
  CHECK_INT_EQ(write(release[1], "x", 1), 1);
  t0 = ftl_clock_ms();
  CHECK_OK(core_flock_until(fd, LOCK_EX, ftl_deadline_after_ms(10000), 1, path, &d), d.msg);
  CHECK(ftl_clock_ms() - t0 < 5000);
  int status = 0;
  CHECK_INT_EQ(waitpid(child, &status, 0), child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  /* Not a descriptor: an I/O error naming the file, not a wait. */
  CHECK_INT_EQ(core_flock_until(-1, LOCK_EX, ftl_deadline_after_ms(1000), 0, "nothing", &d), FTL_ERR_IO);
  CHECK_STR_CONTAINS(d.msg, "cannot lock nothing");

  close(fd);
  CHECK_INT_EQ(ftl_test_rm_rf(dir), 0);
  printf("ok\n");
  return 0;
}
