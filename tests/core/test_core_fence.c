/* tests/core/test_core_fence.c: the attempt fence (core/fence.c, docs/formats/fence.md): the
 * launcher's advance and a rank's hold on a real run directory, and what a user can plant at
 * RUNDIR/fence (a FIFO, a folder, a link, a file too large): refused at once, naming the path and what it is,
 * never blocking (an alarm fails the test if anything waits). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fence.h"
#include "ftl/core.h"
#include "ftl_test.h"

static char run[] = "/tmp/ftl-test-fence-XXXXXX";
static char fence[PATH_MAX];

static int64_t soon(void) { return ftl_deadline_after_ms(2000); }

static void test_advance_and_hold(void) {
  ftl_diag d = {{0}};
  core_fence_hold h;
  /* No fence file: nothing to hold, nothing checked. */
  CHECK_OK(core_fence_enter(run, 3, "writing a checkpoint", soon(), &h, &d), d.msg);
  CHECK_INT_EQ(h.fd, -1);
  CHECK_INT_EQ(core_fence_read(run), -1);
  CHECK_OK(core_fence_advance(run, 2, soon(), &d), d.msg);
  CHECK_INT_EQ(core_fence_read(run), 2);
  CHECK_OK(core_fence_enter(run, 2, "writing a checkpoint", soon(), &h, &d), d.msg);
  CHECK(h.fd >= 0);
  core_fence_leave(&h);
  CHECK_INT_EQ(h.fd, -1);
  CHECK_INT_EQ(core_fence_enter(run, 1, "writing a checkpoint", soon(), &h, &d), FTL_ERR_FENCED);
  CHECK_STR_CONTAINS(d.msg, "attempt 1 was superseded by attempt 2");
  CHECK_INT_EQ(unlink(fence), 0);
}

/* What each side says about a planted fence; every call returns at once. */
static void refused(const char *what_it_is) {
  ftl_diag d = {{0}};
  core_fence_hold h;
  char want[PATH_MAX + 64];
  snprintf(want, sizeof want, "%s %s", fence, what_it_is);
  memset(&d, 0, sizeof d);
  CHECK(core_fence_advance(run, 4, soon(), &d) != FTL_OK);
  CHECK_STR_CONTAINS(d.msg, want);
  memset(&d, 0, sizeof d);
  CHECK_INT_EQ(core_fence_enter(run, 4, "writing a checkpoint", soon(), &h, &d), FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, want);
  CHECK_STR_CONTAINS(d.msg, "not writing a checkpoint");
  CHECK_INT_EQ(h.fd, -1);
  CHECK_INT_EQ(core_fence_read(run), -1);
}

static void test_planted(void) {
  /* A FIFO: opened for writing it used to give "cannot write .../fence: Invalid argument", and a
   * rank's read-only open waited for a writer forever. */
  CHECK_INT_EQ(mkfifo(fence, 0666), 0);
  refused("is not a regular file (a FIFO); refused");
  CHECK_INT_EQ(unlink(fence), 0);
  CHECK_INT_EQ(mkdir(fence, 0700), 0);
  refused("is not a regular file (a folder); refused");
  CHECK_INT_EQ(rmdir(fence), 0);
  /* A link, even to a good fence file: never followed, its target left alone. */
  char target[PATH_MAX];
  snprintf(target, sizeof target, "%s/elsewhere", run);
  FILE *f = fopen(target, "w");
  CHECK(f != NULL);
  fputs("4\n", f);
  CHECK(fclose(f) == 0);
  CHECK_INT_EQ(symlink(target, fence), 0);
  refused("is a symbolic link; refused");
  CHECK_INT_EQ(unlink(fence), 0);
  /* Larger than any fence: a rank refuses it unread; the launcher rewrites it. */
  CHECK_INT_EQ(rename(target, fence), 0);
  CHECK(truncate(fence, 4096) == 0);
  ftl_diag d = {{0}};
  core_fence_hold h;
  CHECK_INT_EQ(core_fence_enter(run, 4, "writing a checkpoint", soon(), &h, &d), FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "is 4096 bytes, more than the 32 allowed");
  CHECK_OK(core_fence_advance(run, 4, soon(), &d), d.msg);
  CHECK_INT_EQ(core_fence_read(run), 4);
  CHECK_INT_EQ(unlink(fence), 0);
}

int main(void) {
  if (!mkdtemp(run)) FTL_TEST_FAIL_("mkdtemp: %s", strerror(errno));
  snprintf(fence, sizeof fence, "%s/fence", run);
  alarm(30); /* a blocked open of a FIFO ends the test, failed, instead of hanging ctest */
  test_advance_and_hold();
  test_planted();
  CHECK_INT_EQ(rmdir(run), 0);
  printf("ok\n");
  return 0;
}
