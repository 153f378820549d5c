/* tests/ckpt/test_ckpt_l2.c: the L2 level's pieces that need no MPI: the partner placement (every
 * rank's partner on the next host of the sorted host list, never its own host, spread over the
 * partner host's ranks, none with one host) and the partner copies' folder (the limit per shard,
 * oldest step evicted first, keep-only after a commit, drop, and the run's removal with them), and
 * the L1 roots that turn the level off (every user may write it without the sticky bit, too long).
 * The transfers themselves are tested on real hosts by tests/fault/ft_l2.sh. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/levels.h"
#include "ftl/core.h"
#include "ftl_test.h"

/* Places ranks on hosts (names, in rank order) and returns the partner array in out. */
static void place(const char *const *names, int n, int *out) {
  ftl_ckpt ck;
  memset(&ck, 0, sizeof ck);
  ck.world = n;
  ck.hosts = calloc((size_t)n, sizeof *ck.hosts);
  ck.l2_partner = calloc((size_t)n, sizeof *ck.l2_partner);
  CHECK(ck.hosts && ck.l2_partner);
  for (int r = 0; r < n; r++) snprintf(ck.hosts[r].host, sizeof ck.hosts[r].host, "%s", names[r]);
  CHECK_INT_EQ(ck_l2_place(&ck), FTL_OK);
  memcpy(out, ck.l2_partner, sizeof *out * (size_t)n);
  free(ck.hosts);
  free(ck.l2_partner);
}

static void test_placement(void) {
  int p[8];
  /* 3 hosts x 2 ranks, as ft_l2.sh: h1 -> h2, h2 -> h3, h3 -> h1, rank j of a host to rank j. */
  const char *three[] = {"h1", "h1", "h2", "h2", "h3", "h3"};
  place(three, 6, p);
  int want3[] = {2, 3, 4, 5, 0, 1};
  for (int r = 0; r < 6; r++) CHECK_INT_EQ(p[r], want3[r]);
  /* Hosts not in rank order, sorted by name: b's partner is c, c's is a, a's is b. */
  const char *mixed[] = {"b", "a", "c", "b", "a", "c"};
  place(mixed, 6, p);
  int wantm[] = {2, 0, 1, 5, 3, 4};
  for (int r = 0; r < 6; r++) CHECK_INT_EQ(p[r], wantm[r]);
  /* Uneven hosts: 3 ranks on x send to y's 1 rank; y's rank to x's first. */
  const char *uneven[] = {"x", "x", "x", "y"};
  place(uneven, 4, p);
  int wantu[] = {3, 3, 3, 0};
  for (int r = 0; r < 4; r++) CHECK_INT_EQ(p[r], wantu[r]);
  /* One host: no partner at all. */
  const char *one[] = {"solo", "solo", "solo"};
  place(one, 3, p);
  for (int r = 0; r < 3; r++) CHECK_INT_EQ(p[r], -1);
}

static void put(const char *path, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  for (size_t i = 0; i < n; i++) fputc((int)(i & 0xff), f);
  CHECK(fclose(f) == 0);
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static void test_folder(void) {
  char root[] = "/tmp/ftl-test-l2-XXXXXX", run[PATH_MAX], why[256], d[PATH_MAX], f4[PATH_MAX], f5[PATH_MAX];
  CHECK(mkdtemp(root) != NULL);
  snprintf(run, sizeof run, "%s/run", root);
  CHECK(mkdir(run, 0700) == 0);
  ck_l1 l1;
  ck_l1_setup(&l1, run, root, 10000);
  CHECK(l1.dir[0] != '\0');
  /* Shard 4's copy of step 4, then of step 5 within a 10000-byte limit: step 4's goes first. */
  CHECK_INT_EQ(ck_l2_make_room(&l1, 4, 4, 6000, why, sizeof why), 1);
  CHECK_INT_EQ(ck_l2_step_dir(&l1, 4, d, sizeof d), FTL_OK);
  CHECK_STR_CONTAINS(d, "/step-00000004/partner");
  CHECK_INT_EQ(ftl_fmt(f4, sizeof f4, "%s/shard-00004.h5", d), FTL_OK);
  put(f4, 6000);
  CHECK_INT_EQ(ck_l2_make_room(&l1, 4, 5, 6000, why, sizeof why), 1);
  CHECK(!exists(f4));
  CHECK_INT_EQ(ck_l2_step_dir(&l1, 5, d, sizeof d), FTL_OK);
  CHECK_INT_EQ(ftl_fmt(f5, sizeof f5, "%s/shard-00004.h5", d), FTL_OK);
  put(f5, 6000);
  /* Larger than the limit: refused, saying why. */
  CHECK_INT_EQ(ck_l2_make_room(&l1, 5, 5, 20000, why, sizeof why), 0);
  CHECK_STR_CONTAINS(why, "larger than the L1 limit");
  /* The rank's own L1 copy of the same step is another file: the limit is per shard. */
  CHECK_INT_EQ(ck_l1_make_room(&l1, 4, 5, 6000, why, sizeof why), 1);
  CHECK(exists(f5));
  /* Keep-only after a commit of step 6 removes step 5's copy (and its empty folders), drop removes
   * an abandoned step's. */
  CHECK_INT_EQ(ck_l2_make_room(&l1, 4, 6, 100, why, sizeof why), 1);
  CHECK_INT_EQ(ck_l2_step_dir(&l1, 6, d, sizeof d), FTL_OK);
  CHECK_INT_EQ(ftl_fmt(f4, sizeof f4, "%s/shard-00004.h5", d), FTL_OK);
  put(f4, 100);
  ck_l2_keep_only(&l1, 4, 6);
  CHECK(!exists(f5));
  CHECK(exists(f4));
  ck_l2_drop(&l1, 4, 6);
  CHECK(!exists(f4));
  /* The run's removal takes the partner copies (and a fetched one) with it. */
  CHECK_INT_EQ(ck_l2_make_room(&l1, 1, 7, 100, why, sizeof why), 1);
  CHECK_INT_EQ(ck_l2_step_dir(&l1, 7, d, sizeof d), FTL_OK);
  CHECK_INT_EQ(ftl_fmt(f4, sizeof f4, "%s/shard-00001.h5.fetched-3", d), FTL_OK);
  put(f4, 100);
  ck_l1_forget_run(root, run);
  CHECK(!exists(l1.dir));
  CHECK(rmdir(run) == 0);
  CHECK(rmdir(root) == 0);
}

/* ck_l1_setup for run under root, its warnings (stderr) into said. */
static void setup_capturing(ck_l1 *l1, const char *run, const char *root, char *said, size_t size) {
  char log[] = "/tmp/ftl-test-l1log-XXXXXX";
  int fd = mkstemp(log), saved = dup(2);
  CHECK(fd >= 0 && saved >= 0);
  fflush(stderr);
  CHECK(dup2(fd, 2) == 2);
  ck_l1_setup(l1, run, root, 0);
  fflush(stderr);
  CHECK(dup2(saved, 2) == 2);
  close(saved);
  ssize_t n = pread(fd, said, size - 1, 0);
  said[n > 0 ? n : 0] = '\0';
  close(fd);
  unlink(log);
}

/* A root another user could rename our folder in, or one too long for the paths below it: L1 off
 * with a warning naming the root and why, nothing made there. The sticky bit makes the same root
 * fine. */
static void test_root(void) {
  char root[] = "/tmp/ftl-test-l1root-XXXXXX", run[PATH_MAX], said[8192];
  CHECK(mkdtemp(root) != NULL);
  snprintf(run, sizeof run, "%s/run", root);
  CHECK(mkdir(run, 0700) == 0);
  CHECK(chmod(root, 0777) == 0);
  ck_l1 l1;
  setup_capturing(&l1, run, root, said, sizeof said);
  CHECK_STR_EQ(l1.dir, "");
  CHECK_STR_CONTAINS(said, root);
  CHECK_STR_CONTAINS(said, "L1 off: the L1 folder");
  CHECK_STR_CONTAINS(said, "is writable by every user and has no sticky bit");
  char found[PATH_MAX];
  CHECK_INT_EQ(ck_l1_find_run(root, run, found, sizeof found), 0);
  CHECK(chmod(root, 01777) == 0);
  setup_capturing(&l1, run, root, said, sizeof said);
  CHECK(l1.dir[0] != '\0');
  CHECK(exists(l1.dir));
  CHECK_STR_EQ(said, "");
  ck_l1_forget_run(root, run);
  CHECK(!exists(l1.dir));
  CHECK(chmod(root, 0700) == 0);
  /* A folder whose path is longer than CK_L1_ROOT_MAX (folders of 250 bytes, one in another). */
  char deep[PATH_MAX];
  snprintf(deep, sizeof deep, "%s", root);
  while (strlen(deep) <= CK_L1_ROOT_MAX) {
    size_t n = strlen(deep);
    deep[n] = '/';
    memset(deep + n + 1, 'd', 250);
    deep[n + 251] = '\0';
    CHECK(mkdir(deep, 0700) == 0);
  }
  setup_capturing(&l1, run, deep, said, sizeof said);
  CHECK_STR_EQ(l1.dir, "");
  CHECK_STR_CONTAINS(said, "bytes long, more than the");
  CHECK_INT_EQ(ftl_test_rm_rf(root), 0);
}

int main(void) {
  test_placement();
  test_folder();
  test_root();
  printf("ok\n");
  return 0;
}
