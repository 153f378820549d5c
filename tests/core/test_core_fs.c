/* tests/core/test_core_fs.c: the file seam (core/fs.c): failing the Nth write with ENOSPC
 * (FTL_ERR_NOSPC), a torn write that reports success, fsync and rename failures leaving the old
 * file intact, a crash in the middle of an atomic replace never exposing a partial file (a real
 * SIGKILL in a child, under the new and the old variable names), fault injection from FTL_FAULT
 * and FTL_CKPT_FAULT, a replaced table entry, ftl_write_file_atomic going through the seam, and the
 * widened table (write faults on appends, the replace's namings, read-back of a torn write,
 * exclusive new files, temporary folders, a rename that never replaces). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fs.h"
#include "ftl/core.h"
#include "ftl_test.h"

static char dir[] = "/tmp/ftl-fs-XXXXXX";

static void path_in(char *buf, size_t size, const char *name) {
  CHECK_OK(ftl_fmt(buf, size, "%s/%s", dir, name), "path");
}

static void check_content(const char *path, const char *want) {
  char *data = NULL;
  size_t size = 0;
  ftl_diag d = {{0}};
  CHECK_OK(ftl_read_file(path, 1 << 20, &data, &size, &d), d.msg);
  CHECK_STR_EQ(data, want);
  ftl_free(data);
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

static void test_errno_map(void) {
  CHECK_INT_EQ(core_errno_to_err(ENOSPC), FTL_ERR_NOSPC);
  CHECK_INT_EQ(core_errno_to_err(EDQUOT), FTL_ERR_NOSPC);
  CHECK_INT_EQ(core_errno_to_err(EIO), FTL_ERR_IO);
  CHECK_INT_EQ(core_errno_to_err(EROFS), FTL_ERR_IO);
}

static void test_nth_write_and_tear(void) {
  char path[512];
  path_in(path, sizeof path, "raw.bin");
  int fd = core_fs_table.open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  CHECK(fd >= 0);
  char buf[100];
  memset(buf, 'x', sizeof buf);
  core_fault_set(FTL_FAULT_WRITE, 2, ENOSPC); /* the second write from now */
  CHECK_OK(core_fs_pwrite_all(fd, buf, sizeof buf, 0), "first write");
  errno = 0;
  CHECK_INT_EQ(core_fs_pwrite_all(fd, buf, sizeof buf, 100), FTL_ERR_NOSPC);
  CHECK_INT_EQ(errno, ENOSPC);
  CHECK_OK(core_fs_pwrite_all(fd, buf, sizeof buf, 100), "the fault fires once");
  /* A torn write reports all its bytes written but leaves half. */
  CHECK_OK(core_fs_table.ftruncate(fd, 0), "truncate");
  core_fault_set(FTL_FAULT_TEAR, 1, 0);
  CHECK_OK(core_fs_pwrite_all(fd, buf, sizeof buf, 0), "torn write reports success");
  struct stat st;
  CHECK(fstat(fd, &st) == 0);
  CHECK_INT_EQ(st.st_size, 50);
  /* Reading past the end is a short file: FTL_ERR_CORRUPT with errno 0. */
  CHECK_INT_EQ(core_fs_pread_all(fd, buf, sizeof buf, 0), FTL_ERR_CORRUPT);
  CHECK_INT_EQ(errno, 0);
  CHECK_OK(core_fs_pread_all(fd, buf, 50, 0), "whole read");
  core_fs_table.close(fd);
  core_fault_clear();
}

/* Each failure of an atomic replace leaves the old file as it was and no temporary file. */
static void test_atomic_failures(void) {
  char path[512], tmp[600];
  path_in(path, sizeof path, "state.json");
  CHECK_OK(ftl_fmt(tmp, sizeof tmp, "%s.tmp", path), "tmp");
  ftl_diag d = {{0}};
  CHECK_OK(core_fs_write_atomic(path, "old", 3, NULL, -1, -1, &d), d.msg);
  check_content(path, "old");
  const struct {
    core_fault_op op;
    int err;
    ftl_err want;
  } cases[] = {
      {FTL_FAULT_WRITE, ENOSPC, FTL_ERR_NOSPC},
      {FTL_FAULT_WRITE, EDQUOT, FTL_ERR_NOSPC},
      {FTL_FAULT_FSYNC, EIO, FTL_ERR_IO},
      {FTL_FAULT_RENAME, EIO, FTL_ERR_IO},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    core_fault_set(cases[i].op, 1, cases[i].err);
    d.msg[0] = '\0';
    CHECK_INT_EQ(core_fs_write_atomic(path, "new contents", 12, NULL, -1, -1, &d), cases[i].want);
    CHECK_STR_CONTAINS(d.msg, "state.json");
    check_content(path, "old");
    CHECK(!exists(tmp));
    core_fault_clear();
  }
  CHECK_OK(core_fs_write_atomic(path, "new", 3, NULL, -1, -1, &d), d.msg);
  check_content(path, "new");
  CHECK(!exists(tmp));
  /* The public helper is the seam's too: an injected ENOSPC reaches it. */
  core_fault_set(FTL_FAULT_WRITE, 1, ENOSPC);
  CHECK_INT_EQ(ftl_write_file_atomic(path, "public", 6, &d), FTL_ERR_NOSPC);
  check_content(path, "new");
  core_fault_clear();
  CHECK_OK(ftl_write_file_atomic(path, "public", 6, &d), d.msg);
  check_content(path, "public");
}

/* A child writes the new contents with a crash point halfway: it dies by SIGKILL, the file still
 * holds the old contents, and only the temporary file holds the first half. */
static void crash_child(const char *path, const char *at_var, const char *rank_var, const char *rank) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    setenv(at_var, "test_mid", 1);
    if (rank_var) setenv(rank_var, rank, 1);
    ftl_diag d = {{0}};
    ftl_err rc = core_fs_write_atomic(path, "0123456789", 10, "test_mid", 3, 7, &d);
    _exit(rc == FTL_OK ? 0 : 1);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  if (rank_var && strcmp(rank, "3") != 0) {
    /* Another rank named: no crash, the replace completes. */
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return;
  }
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

static void test_crash_point(void) {
  char path[512], tmp[600];
  path_in(path, sizeof path, "manifest.json");
  CHECK_OK(ftl_fmt(tmp, sizeof tmp, "%s.tmp", path), "tmp");
  ftl_diag d = {{0}};
  const char *names[][2] = {{"FTL_CRASH_AT", "FTL_CRASH_RANK"}, {"FTL_CKPT_CRASH_AT", "FTL_CKPT_CRASH_RANK"}};
  for (int i = 0; i < 2; i++) {
    CHECK_OK(core_fs_write_atomic(path, "old", 3, NULL, -1, -1, &d), d.msg);
    crash_child(path, names[i][0], NULL, NULL);
    check_content(path, "old");
    check_content(tmp, "01234");
    crash_child(path, names[i][0], names[i][1], "3");
    check_content(path, "old");
    crash_child(path, names[i][0], names[i][1], "4");
    check_content(path, "0123456789");
  }
  /* Not named: the point is passed. */
  CHECK_OK(core_fs_write_atomic(path, "abc", 3, "test_mid", 0, 0, &d), d.msg);
  check_content(path, "abc");
}

static void test_fault_from_env(void) {
  char path[512];
  ftl_diag d = {{0}};
  path_in(path, sizeof path, "env.json");
  CHECK_OK(core_fs_write_atomic(path, "old", 3, NULL, -1, -1, &d), d.msg);
  setenv("FTL_FAULT", "write:1:ENOSPC", 1);
  core_fault_from_env();
  unsetenv("FTL_FAULT");
  CHECK_INT_EQ(core_fs_write_atomic(path, "new", 3, NULL, -1, -1, &d), FTL_ERR_NOSPC);
  setenv("FTL_CKPT_FAULT", "rename:1:EIO,bogus:1,write:x", 1); /* the old name; bad entries are skipped */
  core_fault_from_env();
  unsetenv("FTL_CKPT_FAULT");
  CHECK_INT_EQ(core_fs_write_atomic(path, "new", 3, NULL, -1, -1, &d), FTL_ERR_IO);
  CHECK_STR_CONTAINS(d.msg, "rename");
  check_content(path, "old");
  CHECK_OK(core_fs_write_atomic(path, "new", 3, NULL, -1, -1, &d), d.msg);
  check_content(path, "new");
}

static int pwrite_calls;
static ssize_t counting_pwrite(int fd, const void *buf, size_t n, off_t off) {
  pwrite_calls++;
  return pwrite(fd, buf, n, off);
}

static void test_table(void) {
  char path[512];
  ftl_diag d = {{0}};
  path_in(path, sizeof path, "table.json");
  core_fs_table.pwrite = counting_pwrite;
  CHECK_OK(core_fs_write_atomic(path, "abcd", 4, NULL, -1, -1, &d), d.msg);
  CHECK_INT_EQ(pwrite_calls, 2); /* two halves, around the crash point */
  core_fs_reset();
  CHECK_OK(core_fs_write_atomic(path, "abcd", 4, NULL, -1, -1, &d), d.msg);
  CHECK_INT_EQ(pwrite_calls, 2);
  CHECK_OK(core_fs_fsync_dir(dir, &d), d.msg);
  path_in(path, sizeof path, "no-such-folder");
  CHECK_INT_EQ(core_fs_fsync_dir(path, &d), FTL_ERR_IO);
  CHECK_STR_CONTAINS(d.msg, "no-such-folder");
}

/* The widened table (issue 19): write() shares pwrite's faults (a torn append), the one replace's
 * three namings, a torn write caught by the read-back before the rename, exclusive new files,
 * temporary folders and a rename that never replaces. */
static void test_widened(void) {
  char path[512], tmp[600], other[512];
  ftl_diag d = {{0}};
  path_in(path, sizeof path, "append.log");
  int fd = core_fs_table.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  CHECK(fd >= 0);
  core_fault_set(FTL_FAULT_WRITE, 1, ENOSPC);
  errno = 0;
  CHECK(core_fs_table.write(fd, "0123456789", 10) == -1 && errno == ENOSPC);
  core_fault_set(FTL_FAULT_TEAR, 1, 0);
  CHECK(core_fs_table.write(fd, "0123456789", 10) == 10); /* reported whole */
  core_fs_table.close(fd);
  check_content(path, "01234");
  /* Each naming; a torn write never reaches the target. */
  const core_tmp_naming namings[] = {CORE_TMP_FIXED, CORE_TMP_PER_PROCESS, CORE_TMP_UNPREDICTABLE};
  for (size_t i = 0; i < 3; i++) {
    path_in(path, sizeof path, "named.json");
    CHECK_OK(core_fs_replace(path, "old", 3, namings[i], NULL, -1, -1, &d), d.msg);
    core_fault_set(FTL_FAULT_TEAR, 2, 0);
    CHECK_INT_EQ(core_fs_replace(path, "new contents", 12, namings[i], NULL, -1, -1, &d), FTL_ERR_IO);
    CHECK_STR_CONTAINS(d.msg, "torn");
    CHECK_STR_CONTAINS(d.msg, "named.json.tmp");
    core_fault_clear();
    check_content(path, "old");
    CHECK_OK(core_fs_create_tmp(path, namings[i], tmp, sizeof tmp, &fd, &d), d.msg);
    core_fs_table.close(fd);
    CHECK(strncmp(tmp, path, strlen(path)) == 0);
    const char *suffix = tmp + strlen(path);
    if (namings[i] == CORE_TMP_FIXED) CHECK_STR_EQ(suffix, ".tmp");
    if (namings[i] == CORE_TMP_PER_PROCESS) CHECK(strncmp(suffix, ".tmp.", 5) == 0);
    if (namings[i] == CORE_TMP_UNPREDICTABLE) CHECK(strncmp(suffix, ".tmp-", 5) == 0 && strlen(suffix) == 17);
    core_fs_table.unlink(tmp);
  }
  /* A new file: exclusive, written whole or removed. */
  path_in(path, sizeof path, "new.json");
  CHECK_OK(core_fs_write_new_at(AT_FDCWD, NULL, path, "abc", 3, 0600, &d), d.msg);
  check_content(path, "abc");
  CHECK(core_fs_write_new_at(AT_FDCWD, NULL, path, "abc", 3, 0600, &d) != FTL_OK); /* exists */
  path_in(path, sizeof path, "new2.json");
  core_fault_set(FTL_FAULT_TEAR, 1, 0);
  CHECK_INT_EQ(core_fs_write_new_at(AT_FDCWD, dir, "new2.json", "abcdef", 6, 0644, &d), FTL_ERR_IO);
  CHECK_STR_CONTAINS(d.msg, path);
  core_fault_clear();
  CHECK(!exists(path));
  /* A temporary folder, 0755, and a rename that never replaces. */
  path_in(tmp, sizeof tmp, "folder.tmp-XXXXXX");
  CHECK_OK(core_fs_mkdtemp(tmp, 0755, &fd, &d), d.msg);
  struct stat st;
  CHECK(fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0755);
  core_fs_table.close(fd);
  path_in(other, sizeof other, "folder");
  CHECK(core_fs_table.rename_noreplace(tmp, other) == 0);
  CHECK(core_fs_table.mkdir(tmp, 0755) == 0);
  errno = 0;
  CHECK(core_fs_table.rename_noreplace(tmp, other) != 0 && (errno == EEXIST || errno == ENOTEMPTY));
  core_fault_set(FTL_FAULT_RENAME, 1, EIO);
  CHECK(core_fs_table.rename_noreplace(tmp, other) != 0 && errno == EIO);
  CHECK(core_fs_table.unlinkat(AT_FDCWD, tmp, AT_REMOVEDIR) == 0);
  CHECK(core_fs_table.unlinkat(AT_FDCWD, other, AT_REMOVEDIR) == 0);
  char hex[13];
  CHECK_OK(core_random_hex(hex, 6, &d), d.msg);
  CHECK_INT_EQ(strlen(hex), 12);
}

int main(void) {
  CHECK(mkdtemp(dir) != NULL);
  unsetenv("FTL_FAULT");
  unsetenv("FTL_CKPT_FAULT");
  test_errno_map();
  test_nth_write_and_tear();
  test_atomic_failures();
  test_crash_point();
  test_widened();
  test_fault_from_env();
  test_table();
  CHECK(ftl_test_rm_rf(dir) == 0);
  return 0;
}
