/* tests/core/test_core_rundir.c: every run-directory path from core/rundir.c: the names of the
 * fixed items, attempt folders and rank files, truncation reported as FTL_ERR_RANGE (never a cut
 * path), bad arguments, and the next attempt number on a real folder. */
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/rundir.h"
#include "ftl/core.h"
#include "ftl_test.h"

static void test_names(void) {
  static const struct {
    core_rundir_item item;
    const char *name;
  } want[] = {
      {FTL_RUNDIR_JOB_SPEC, "job.yaml"},
      {FTL_RUNDIR_EVENTS, "events.jsonl"},
      {FTL_RUNDIR_FAILURES, "failures.jsonl"},
      {FTL_RUNDIR_CHECKPOINTS, "checkpoints"},
      {FTL_RUNDIR_FINAL, "final"},
      {FTL_RUNDIR_LOCK, "ftl.lock"},
      {FTL_RUNDIR_SNAPSHOT, "snapshot.json"},
      {FTL_RUNDIR_GATE, "gate"},
      {FTL_RUNDIR_VERDICT, "verdict.json"},
      {FTL_RUNDIR_EXPORT, "export"},
      {FTL_RUNDIR_PACKAGE, "package"},
      {FTL_RUNDIR_FENCE, "fence"},
      {FTL_RUNDIR_JOB_IDENTITY, "job.json"},
      {FTL_RUNDIR_FINISH, "finish.json"},
  };
  CHECK_INT_EQ(sizeof want / sizeof want[0], FTL_RUNDIR_ITEMS_);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char path[64];
    CHECK_STR_EQ(core_rundir_name(want[i].item), want[i].name);
    CHECK_OK(core_rundir_path(path, sizeof path, "/r", want[i].item), want[i].name);
    CHECK(path[0] == '/' && path[1] == 'r' && path[2] == '/');
    CHECK_STR_EQ(path + 3, want[i].name);
  }
  CHECK(core_rundir_name(FTL_RUNDIR_ITEMS_) == NULL);
  CHECK(core_rundir_name((core_rundir_item)-1) == NULL);
  char path[64];
  CHECK_INT_EQ(core_rundir_path(path, sizeof path, "/r", FTL_RUNDIR_ITEMS_), FTL_ERR_INVAL);
  CHECK_INT_EQ(core_rundir_path(path, sizeof path, NULL, FTL_RUNDIR_EVENTS), FTL_ERR_INVAL);
}

static void test_attempts_and_ranks(void) {
  char a[128], f[128];
  CHECK_OK(core_rundir_attempt_dir(a, sizeof a, "/runs/x", 0), "attempt 0");
  CHECK_STR_EQ(a, "/runs/x/attempt-0000");
  CHECK_OK(core_rundir_attempt_dir(a, sizeof a, "/runs/x", 12345), "attempt 12345");
  CHECK_STR_EQ(a, "/runs/x/attempt-12345");
  CHECK_INT_EQ(core_rundir_attempt_dir(a, sizeof a, "/runs/x", -1), FTL_ERR_INVAL);
  CHECK_OK(core_rundir_attempt_dir(a, sizeof a, "/runs/x", 3), "attempt 3");
  CHECK_OK(core_rundir_rank_file(f, sizeof f, a, 7, "err"), "rank file");
  CHECK_STR_EQ(f, "/runs/x/attempt-0003/rank-00007.err");
  CHECK_OK(core_rundir_rank_file(f, sizeof f, a, 0, "exit.json"), "exit record");
  CHECK_STR_EQ(f, "/runs/x/attempt-0003/rank-00000.exit.json");
  CHECK_INT_EQ(core_rundir_rank_file(f, sizeof f, a, -1, "out"), FTL_ERR_INVAL);
  CHECK_INT_EQ(core_rundir_rank_file(f, sizeof f, a, 1, NULL), FTL_ERR_INVAL);
  CHECK_OK(core_rundir_attempt_hostfile(f, sizeof f, a), "hostfile");
  CHECK_STR_EQ(f, "/runs/x/attempt-0003/hostfile");
}

/* A buffer one byte short of the path is FTL_ERR_RANGE; the exact size fits. */
static void test_truncation(void) {
  const char *want = "/runs/x/events.jsonl";
  size_t need = strlen(want) + 1;
  char buf[64];
  CHECK_INT_EQ(core_rundir_path(buf, need - 1, "/runs/x", FTL_RUNDIR_EVENTS), FTL_ERR_RANGE);
  CHECK_OK(core_rundir_path(buf, need, "/runs/x", FTL_RUNDIR_EVENTS), "exact fit");
  CHECK_STR_EQ(buf, want);
  CHECK_INT_EQ(core_rundir_attempt_dir(buf, strlen("/r/attempt-0001"), "/r", 1), FTL_ERR_RANGE);
  CHECK_INT_EQ(core_rundir_rank_file(buf, strlen("/a/rank-00001.out"), "/a", 1, "out"), FTL_ERR_RANGE);
  /* A run directory as long as PATH_MAX leaves no room for anything under it. */
  char *longdir = malloc(PATH_MAX + 1);
  CHECK(longdir != NULL);
  memset(longdir, 'd', PATH_MAX);
  longdir[PATH_MAX] = '\0';
  char path[PATH_MAX];
  CHECK_INT_EQ(core_rundir_path(path, sizeof path, longdir, FTL_RUNDIR_FAILURES), FTL_ERR_RANGE);
  CHECK_INT_EQ(core_rundir_next_attempt(longdir), 0);
  free(longdir);
}

static void test_next_attempt(void) {
  char dir[] = "/tmp/ftl-rundir-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  CHECK_INT_EQ(core_rundir_next_attempt(dir), 0);
  char a[PATH_MAX];
  for (int i = 0; i < 3; i++) {
    CHECK_OK(core_rundir_attempt_dir(a, sizeof a, dir, i), "attempt");
    CHECK(mkdir(a, 0755) == 0);
  }
  CHECK_INT_EQ(core_rundir_next_attempt(dir), 3);
  for (int i = 2; i >= 0; i--) {
    CHECK_OK(core_rundir_attempt_dir(a, sizeof a, dir, i), "attempt");
    CHECK(rmdir(a) == 0);
  }
  CHECK(rmdir(dir) == 0);
}

int main(void) {
  test_names();
  test_attempts_and_ranks();
  test_truncation();
  test_next_attempt();
  return 0;
}
