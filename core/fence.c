/* core/fence.c: the attempt fence (core/fence.h, docs/formats/fence.md): RUNDIR/fence, a small text
 * file "<attempt>\n", rewritten in place under an exclusive flock by the launcher and read under a
 * shared flock by every rank around each change to checkpoints/.
 *
 * In place rather than replaced by a rename: a flock belongs to the file, and a rename would give
 * readers a new file that the launcher's lock does not cover.
 *
 * The file sits in the run directory, where a user can plant anything: every open is core's open
 * of an outside file (core_fs_open_regular_as: no link followed, never blocking on a FIFO, nothing
 * but a regular file, of bounded size where it is read). */
#include "core/fence.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/flock.h"
#include "core/fs.h"
#include "core/rundir.h"
#include "ftl/core.h"

enum { FENCE_MAX_BYTES = 32 };

static int fence_path(char *out, size_t size, const char *run_dir) {
  return run_dir && *run_dir && core_rundir_path(out, size, run_dir, FTL_RUNDIR_FENCE) == FTL_OK;
}

/* The fence's flock by the deadline (core/flock.h); a timeout says which side held it. */
static ftl_err lock_until(int fd, int op, int64_t deadline_ms, const char *path, ftl_diag *d) {
  ftl_err rc = core_flock_until(fd, op, deadline_ms, 0, path, d);
  if (rc != FTL_ERR_TIMEOUT) return rc;
  return ftl_diag_fail(d, FTL_ERR_TIMEOUT, "%s stayed locked past the deadline (%s)", path,
                       op == LOCK_EX ? "a rank of the ended attempt is still changing its checkpoints"
                                     : "the launcher is moving the fence");
}

/* The number in an open fence file; -1 when it holds none (empty, torn, not a number). */
static int read_number(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > FENCE_MAX_BYTES) return -1;
  char buf[FENCE_MAX_BYTES + 1];
  ssize_t n = core_fs_table.pread(fd, buf, (size_t)st.st_size, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  if (n > 0 && buf[n - 1] == '\n') buf[n - 1] = '\0';
  int64_t v;
  if (ftl_parse_i64(buf, 0, INT_MAX, &v) != FTL_OK) return -1;
  return (int)v;
}

ftl_err core_fence_advance(const char *run_dir, int attempt, int64_t deadline_ms, ftl_diag *d) {
  char path[PATH_MAX];
  if (!fence_path(path, sizeof path, run_dir)) return ftl_diag_fail(d, FTL_ERR_RANGE, "run directory path too long");
  int fd = -1;
  uint64_t size = 0;
  /* No size bound: the content is replaced, never read here. */
  ftl_err rc = core_fs_open_regular_as(path, O_RDWR | O_CREAT, 0644, UINT64_MAX, &fd, &size, d);
  if (rc) return rc;
  rc = lock_until(fd, LOCK_EX, deadline_ms, path, d);
  if (rc) goto out;
  char text[32];
  int len = snprintf(text, sizeof text, "%d\n", attempt);
  /* Readers parse under the shared lock, which this exclusive one excludes: no reader sees the
   * file between the truncate and the write. No fsync: the fence guards against processes that are
   * alive, and none of an older attempt is alive after the crash of the machine that would lose
   * the write; the next launcher rewrites it before its first attempt anyway. */
  if (core_fs_table.ftruncate(fd, 0) != 0 || core_fs_pwrite_all(fd, text, (size_t)len, 0) != FTL_OK) {
    rc = ftl_diag_fail(d, core_errno_to_err(errno), "cannot write %s: %s", path, strerror(errno));
    goto out;
  }
out:
  core_fs_table.close(fd); /* releases the lock */
  return rc;
}

ftl_err core_fence_enter(const char *run_dir, int attempt, const char *what, int64_t deadline_ms,
                         core_fence_hold *h, ftl_diag *d) {
  h->fd = -1;
  char path[PATH_MAX];
  if (attempt < 0 || !fence_path(path, sizeof path, run_dir)) return FTL_OK;
  int fd = -1;
  uint64_t size = 0;
  ftl_diag open_d = {{0}};
  ftl_err rc = core_fs_open_regular(path, FENCE_MAX_BYTES, &fd, &size, &open_d);
  if (rc == FTL_ERR_NOTFOUND) return FTL_OK;
  if (rc) return ftl_diag_fail(d, rc, "%s: not %s", open_d.msg, what);
  rc = lock_until(fd, LOCK_SH, deadline_ms, path, d);
  if (rc) {
    core_fs_table.close(fd);
    return rc;
  }
  int now = read_number(fd);
  if (now != attempt) {
    core_fs_table.close(fd);
    if (now < 0) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s does not hold an attempt number: not %s", path, what);
    return ftl_diag_fail(d, FTL_ERR_FENCED, "attempt %d was superseded by attempt %d (%s): not %s", attempt, now, path,
                         what);
  }
  h->fd = fd;
  return FTL_OK;
}

void core_fence_leave(core_fence_hold *h) {
  if (h->fd >= 0) core_fs_table.close(h->fd);
  h->fd = -1;
}

int core_fence_read(const char *run_dir) {
  char path[PATH_MAX];
  if (!fence_path(path, sizeof path, run_dir)) return -1;
  int fd = -1;
  uint64_t size = 0;
  ftl_diag d = {{0}};
  if (core_fs_open_regular(path, FENCE_MAX_BYTES, &fd, &size, &d) != FTL_OK) return -1;
  int v = read_number(fd);
  core_fs_table.close(fd);
  return v;
}
