/* core/fs.c: ftl's file seam (a table of syscalls), its fault injection and the crash points used
 * by the crash tests. See core/fs.h for the contract. Every durable file of ftl (checkpoints, the
 * final adapter, run-directory records, packages, the registry, ledgers, logs) goes through this
 * one seam; the old FTL_CKPT_* variable names keep working for existing scripts.
 *
 * Not here: paths (core/rundir.c), appends of JSON lines (core/jsonl.c: O_APPEND and a lock, through
 * this table's write), the file helpers above the seam (core/files.c calls this file; this file
 * uses only the strings and the log of ftl/core.h, never core/files.c).
 *
 * Map: fault counters; the default table (real syscalls behind the fault checks); environment
 * parsing; crash points; loop-until-done helpers; durable atomic replace; new files, temporary
 * folders and random names. */
#include "core/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftl/core.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* ---- fault counters ---------------------------------------------------------------------- */

static _Atomic long fault_left[FTL_FAULT_OPS_];
static _Atomic int fault_errno[FTL_FAULT_OPS_];

void core_fault_set(core_fault_op op, long nth, int err) {
  if ((int)op < 0 || op >= FTL_FAULT_OPS_) return;
  atomic_store(&fault_errno[op], err ? err : EIO);
  atomic_store(&fault_left[op], nth > 0 ? nth : 0);
}

void core_fault_clear(void) {
  for (int i = 0; i < FTL_FAULT_OPS_; i++)
    atomic_store(&fault_left[i], 0);
}

/* True exactly once: on the nth call after core_fault_set. */
static int fault_fires(core_fault_op op) {
  long left = atomic_load(&fault_left[op]);
  while (left > 0) {
    if (atomic_compare_exchange_weak(&fault_left[op], &left, left - 1)) return left == 1;
  }
  return 0;
}

/* ---- the default table ------------------------------------------------------------------- */

static int fs_open(const char *path, int flags, mode_t mode) { return open(path, flags | O_CLOEXEC, mode); }
static int fs_close(int fd) { return close(fd); }

/* The write faults of pwrite and write: -1 with the fault's errno, or a torn write (half the
 * bytes, full success reported) through `half`. -2: no fault, do the real call. */
static ssize_t write_fault(ssize_t (*half)(int, const void *, size_t, off_t), int fd, const void *buf, size_t n,
                           off_t off) {
  if (fault_fires(FTL_FAULT_WRITE)) {
    errno = atomic_load(&fault_errno[FTL_FAULT_WRITE]);
    return -1;
  }
  if (fault_fires(FTL_FAULT_TEAR)) {
    ssize_t w = half(fd, buf, n / 2, off);
    return w < 0 ? w : (ssize_t)n;
  }
  return -2;
}

static ssize_t real_pwrite(int fd, const void *buf, size_t n, off_t off) { return pwrite(fd, buf, n, off); }
static ssize_t real_write(int fd, const void *buf, size_t n, off_t off) {
  (void)off;
  return write(fd, buf, n);
}

static ssize_t fs_pwrite(int fd, const void *buf, size_t n, off_t off) {
  ssize_t f = write_fault(real_pwrite, fd, buf, n, off);
  return f != -2 ? f : pwrite(fd, buf, n, off);
}

static ssize_t fs_write(int fd, const void *buf, size_t n) {
  ssize_t f = write_fault(real_write, fd, buf, n, 0);
  return f != -2 ? f : write(fd, buf, n);
}

static ssize_t fs_pread(int fd, void *buf, size_t n, off_t off) { return pread(fd, buf, n, off); }
static ssize_t fs_read(int fd, void *buf, size_t n) { return read(fd, buf, n); }

static int fs_fsync(int fd) {
  if (fault_fires(FTL_FAULT_FSYNC)) {
    errno = atomic_load(&fault_errno[FTL_FAULT_FSYNC]);
    return -1;
  }
  return fsync(fd);
}

static int rename_fault(void) {
  if (!fault_fires(FTL_FAULT_RENAME)) return 0;
  errno = atomic_load(&fault_errno[FTL_FAULT_RENAME]);
  return 1;
}

static int fs_rename(const char *from, const char *to) { return rename_fault() ? -1 : rename(from, to); }

static int fs_rename_noreplace(const char *from, const char *to) {
  if (rename_fault()) return -1;
  int k = renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
  if (k == 0 || (errno != EINVAL && errno != ENOSYS)) return k;
  /* No RENAME_NOREPLACE on this file system: check, then rename. */
  struct stat st;
  if (lstat(to, &st) == 0) {
    errno = EEXIST;
    return -1;
  }
  return rename(from, to);
}

static int fs_unlink(const char *path) { return unlink(path); }
static int fs_ftruncate(int fd, off_t size) { return ftruncate(fd, size); }
static int fs_openat(int dirfd, const char *name, int flags, mode_t mode) {
  return openat(dirfd, name, flags | O_CLOEXEC, mode);
}
static int fs_mkdir(const char *path, mode_t mode) { return mkdir(path, mode); }
static char *fs_mkdtemp(char *tmpl) { return mkdtemp(tmpl); }
static int fs_fchmod(int fd, mode_t mode) { return fchmod(fd, mode); }
static int fs_unlinkat(int dirfd, const char *name, int flags) { return unlinkat(dirfd, name, flags); }
static int fs_symlink(const char *target, const char *path) { return symlink(target, path); }
static int fs_fallocate(int fd, int mode, off_t offset, off_t len) { return fallocate(fd, mode, offset, len); }

/* The real table, spelled once for the static initializer and for core_fs_reset. */
#define REAL_TABLE                                                                                                     \
  {                                                                                                                    \
    .open = fs_open, .close = fs_close, .pwrite = fs_pwrite, .pread = fs_pread, .fsync = fs_fsync,                     \
    .rename = fs_rename, .unlink = fs_unlink, .ftruncate = fs_ftruncate, .openat = fs_openat, .write = fs_write,       \
    .read = fs_read, .mkdir = fs_mkdir, .mkdtemp = fs_mkdtemp, .fchmod = fs_fchmod, .unlinkat = fs_unlinkat,           \
    .rename_noreplace = fs_rename_noreplace, .symlink = fs_symlink, .fallocate = fs_fallocate,                         \
  }

core_fs core_fs_table = REAL_TABLE;

void core_fs_reset(void) {
  const core_fs real = REAL_TABLE;
  core_fs_table = real;
}

/* ---- environment ------------------------------------------------------------------------- */

static int errno_by_name(const char *s) {
  if (!s || !*s || strcmp(s, "EIO") == 0) return EIO;
  if (strcmp(s, "ENOSPC") == 0) return ENOSPC;
  if (strcmp(s, "EDQUOT") == 0) return EDQUOT;
  if (strcmp(s, "EROFS") == 0) return EROFS;
  return EIO;
}

/* The value of a variable under its current name, or else under its old name (FTL_CKPT_*), so
 * scripts written before the seam moved to core keep working. NULL when neither is set. */
static const char *env_either(const char *name, const char *old_name) {
  const char *v = getenv(name);
  if (v && *v) return v;
  v = getenv(old_name);
  return v && *v ? v : NULL;
}

/* Applies one FTL_FAULT-style list ("write:N:ENOSPC,tear:N"); var names it in warnings. */
static void fault_apply(const char *var, const char *env) {
  char buf[256];
  if (ftl_fmt(buf, sizeof buf, "%s", env)) {
    FTL_LOG(FTL_LOG_WARN, "fs", "%s: longer than %zu bytes, ignored", var, sizeof buf - 1);
    return;
  }
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *colon = strchr(tok, ':');
    if (!colon) continue;
    *colon = '\0';
    char *num = colon + 1;
    char *err = strchr(num, ':');
    if (err) *err++ = '\0';
    int64_t nth = 0;
    if (ftl_parse_i64(num, 1, LONG_MAX, &nth)) {
      FTL_LOG(FTL_LOG_WARN, "fs", "%s: bad count '%s' ignored", var, num);
      continue;
    }
    core_fault_op op;
    if (strcmp(tok, "write") == 0)
      op = FTL_FAULT_WRITE;
    else if (strcmp(tok, "fsync") == 0)
      op = FTL_FAULT_FSYNC;
    else if (strcmp(tok, "rename") == 0)
      op = FTL_FAULT_RENAME;
    else if (strcmp(tok, "tear") == 0)
      op = FTL_FAULT_TEAR;
    else {
      FTL_LOG(FTL_LOG_WARN, "fs", "%s: unknown call '%s' ignored", var, tok);
      continue;
    }
    core_fault_set(op, (long)nth, errno_by_name(err));
  }
}

void core_fault_from_env(void) {
  /* Both are applied, the old name first, so a script that sets both gets the new one's counts. */
  const char *old = getenv("FTL_CKPT_FAULT"), *cur = getenv("FTL_FAULT");
  if (old && *old) fault_apply("FTL_CKPT_FAULT", old);
  if (cur && *cur) fault_apply("FTL_FAULT", cur);
}

/* ---- crash points ------------------------------------------------------------------------ */

void core_crash_point(const char *name, int rank, int64_t step) {
  const char *at = env_either("FTL_CRASH_AT", "FTL_CKPT_CRASH_AT");
  if (!at || strcmp(at, name) != 0) return;
  int64_t v = 0;
  const char *r = env_either("FTL_CRASH_RANK", "FTL_CKPT_CRASH_RANK");
  if (r && (ftl_parse_i64(r, 0, INT32_MAX, &v) || v != rank)) return;
  const char *s = env_either("FTL_CRASH_STEP", "FTL_CKPT_CRASH_STEP");
  if (s && (ftl_parse_i64(s, 0, INT64_MAX, &v) || v != step)) return;
  /* Under `ftl run`, only in the attempt named (default: the first), so the relaunch that
   * follows the crash passes the same point and carries on. */
  const char *a = env_either("FTL_CRASH_ATTEMPT", "FTL_CKPT_CRASH_ATTEMPT"), *cur = getenv("FTL_ATTEMPT");
  int64_t want = 0, now = 0;
  int any = a && !strcmp(a, "any"); /* every attempt: a crash loop */
  if (!any && a && *a && ftl_parse_i64(a, 0, INT64_MAX, &want)) return;
  if (!any && cur && *cur && (ftl_parse_i64(cur, 0, INT64_MAX, &now) || now != want)) return;
  FTL_LOG(FTL_LOG_WARN, "fs", "crash point %s reached (rank %d, step %lld): SIGKILL", name, rank, (long long)step);
  /* A test hook, not error handling: the process must die here as if the node had failed. */
  kill(getpid(), SIGKILL);
}

/* ---- helpers ----------------------------------------------------------------------------- */

/* What a file that is not a regular one is, for messages. */
static const char *kind_of(mode_t mode) {
  return S_ISFIFO(mode) ? "a FIFO" : S_ISDIR(mode) ? "a folder" : S_ISSOCK(mode) ? "a socket" : "a device";
}

ftl_err core_fs_open_regular_as(const char *path, int flags, mode_t mode, uint64_t max_bytes, int *fd_out,
                                uint64_t *size_out, ftl_diag *d) {
  struct stat st;
  *fd_out = -1;
  /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. */
  int fd = core_fs_table.open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == ENOENT) return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s does not exist", path);
    if (errno == ELOOP) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is a symbolic link; refused", path);
    /* Opened for writing: a FIFO without a reader or a socket (ENXIO), a folder (EISDIR). */
    if (errno == ENXIO)
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a regular file (a FIFO or socket); refused", path);
    if (errno == EISDIR) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a regular file (a folder); refused", path);
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  }
  if (fstat(fd, &st)) {
    int e = errno;
    close(fd);
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot stat %s: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a regular file (%s); refused", path, kind_of(st.st_mode));
  }
  if ((uint64_t)st.st_size > max_bytes) {
    close(fd);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is %lld bytes, more than the %llu allowed; refused", path,
                         (long long)st.st_size, (unsigned long long)max_bytes);
  }
  /* A regular file's reads never block: the flag, needed only for the open, is dropped so that
   * whatever the descriptor is handed to (HDF5, a mapping, a sendfile) sees a plain one. */
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  *fd_out = fd;
  *size_out = (uint64_t)st.st_size;
  return FTL_OK;
}

ftl_err core_fs_open_regular(const char *path, uint64_t max_bytes, int *fd_out, uint64_t *size_out, ftl_diag *d) {
  return core_fs_open_regular_as(path, O_RDONLY, 0, max_bytes, fd_out, size_out, d);
}

ftl_err core_fs_read_regular(const char *path, size_t max_bytes, char **data_out, size_t *size_out, ftl_diag *d) {
  int fd = -1;
  uint64_t size = 0;
  *data_out = NULL;
  if (size_out) *size_out = 0;
  ftl_err rc = core_fs_open_regular(path, max_bytes, &fd, &size, d);
  if (rc) return rc;
  char *buf = ftl_malloc((size_t)size + 1);
  if (!buf) {
    close(fd);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory reading %s", path);
  }
  rc = core_fs_pread_all(fd, buf, (size_t)size, 0);
  close(fd);
  if (rc) {
    ftl_free(buf);
    return ftl_diag_fail(d, rc, "cannot read %s: %s", path, rc == FTL_ERR_CORRUPT ? "shorter than its size" : strerror(errno));
  }
  buf[size] = '\0';
  *data_out = buf;
  if (size_out) *size_out = (size_t)size;
  return FTL_OK;
}


ftl_err core_errno_to_err(int e) { return (e == ENOSPC || e == EDQUOT) ? FTL_ERR_NOSPC : FTL_ERR_IO; }

ftl_err core_fs_pwrite_all(int fd, const void *buf, size_t n, uint64_t off) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = core_fs_table.pwrite(fd, p, n, (off_t)off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return core_errno_to_err(errno);
    if (w == 0) {
      errno = EIO;
      return FTL_ERR_IO;
    }
    p += w;
    n -= (size_t)w;
    off += (uint64_t)w;
  }
  return FTL_OK;
}

ftl_err core_fs_pread_all(int fd, void *buf, size_t n, uint64_t off) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = core_fs_table.pread(fd, p, n, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return FTL_ERR_IO;
    if (r == 0) {
      errno = 0;
      return FTL_ERR_CORRUPT;
    }
    p += r;
    n -= (size_t)r;
    off += (uint64_t)r;
  }
  return FTL_OK;
}

ftl_err core_fs_fsync_dir(const char *dir, ftl_diag *d) {
  int fd = core_fs_table.open(dir, O_RDONLY | O_DIRECTORY, 0);
  if (fd < 0) return ftl_diag_fail(d, FTL_ERR_IO, "cannot open folder %s: %s", dir, strerror(errno));
  ftl_err rc = FTL_OK;
  if (core_fs_table.fsync(fd) != 0)
    rc = ftl_diag_fail(d, FTL_ERR_IO, "fsync of folder %s failed: %s", dir, strerror(errno));
  core_fs_table.close(fd);
  return rc;
}

/* The folder of path into out: "." for a bare name, "/" for a file directly under /. */
static ftl_err dir_of(const char *path, char *out, size_t size) {
  const char *slash = strrchr(path, '/');
  if (!slash) return ftl_fmt(out, size, ".");
  if (slash == path) return ftl_fmt(out, size, "/");
  return ftl_fmt(out, size, "%.*s", (int)(slash - path), path);
}

ftl_err core_fs_commit_tmp(int *fd, const char *tmp, const char *path, bool drop_cache, bool *renamed, ftl_diag *d) {
  char dir[PATH_MAX];
  if (renamed) *renamed = false;
  if (dir_of(path, dir, sizeof dir)) return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", path);
  if (core_fs_table.fsync(*fd) != 0) return ftl_diag_fail(d, FTL_ERR_IO, "fsync of %s failed: %s", tmp, strerror(errno));
  /* The bytes are durable; a writer that will not read them again gives their page-cache pages
   * back rather than growing the cache by a file per checkpoint. */
  if (drop_cache) (void)posix_fadvise(*fd, 0, 0, POSIX_FADV_DONTNEED);
  core_fs_table.close(*fd);
  *fd = -1;
  if (core_fs_table.rename(tmp, path) != 0)
    return ftl_diag_fail(d, FTL_ERR_IO, "rename of %s to %s failed: %s", tmp, path, strerror(errno));
  if (renamed) *renamed = true;
  ftl_diag fd_d;
  ftl_err rc = core_fs_fsync_dir(dir, &fd_d);
  /* The file is in place, its rename not yet durable: the message names both. */
  if (rc) ftl_diag_fail(d, rc, "%s was renamed into place, but %s", path, fd_d.msg);
  return rc;
}

/* The temporary name for `naming` into tmp. */
static ftl_err tmp_name(const char *path, core_tmp_naming naming, char *tmp, size_t size, ftl_diag *d) {
  char rnd[13];
  ftl_err rc = FTL_OK;
  if (naming == CORE_TMP_UNPREDICTABLE && (rc = core_random_hex(rnd, 6, d))) return rc;
  if (naming == CORE_TMP_FIXED)
    rc = ftl_fmt(tmp, size, "%s.tmp", path);
  else if (naming == CORE_TMP_PER_PROCESS)
    rc = ftl_fmt(tmp, size, "%s.tmp.%ld", path, (long)getpid());
  else
    rc = ftl_fmt(tmp, size, "%s.tmp-%s", path, rnd);
  return rc ? ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", path) : FTL_OK;
}

ftl_err core_fs_create_tmp(const char *path, core_tmp_naming naming, char *tmp, size_t tmp_size, int *fd, ftl_diag *d) {
  ftl_err rc;
  *fd = -1;
  if (naming != CORE_TMP_FIXED && naming != CORE_TMP_PER_PROCESS && naming != CORE_TMP_UNPREDICTABLE)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "unknown temporary naming %d for %s", (int)naming, path);
  for (int attempt = 0;; attempt++) {
    if ((rc = tmp_name(path, naming, tmp, tmp_size, d))) return rc;
    /* A predictable name: a stale temporary (a writer that died) is removed first, and the new
     * one is created exclusively without following links, so a PATH.tmp planted as a link by
     * someone who can write the folder is neither written through nor renamed into place (if it
     * is planted again in between, the create fails instead). */
    if (naming != CORE_TMP_UNPREDICTABLE && core_fs_table.unlink(tmp) != 0 && errno != ENOENT)
      return ftl_diag_fail(d, core_errno_to_err(errno), "cannot remove the stale %s: %s", tmp, strerror(errno));
    /* Read access too: core_fs_replace reads back what it wrote. */
    *fd = core_fs_table.open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
    if (*fd >= 0) return FTL_OK;
    /* An unpredictable name that exists already: draw another (eight times at most). */
    if (naming == CORE_TMP_UNPREDICTABLE && errno == EEXIST && attempt < 8) continue;
    return ftl_diag_fail(d, core_errno_to_err(errno), "cannot create %s: %s", tmp,
                         errno == EEXIST && naming != CORE_TMP_UNPREDICTABLE
                             ? "it appeared again after the stale one was removed (another writer?)"
                             : strerror(errno));
  }
}

/* Reads back what was just written to fd (from the page cache, through the seam) and compares it
 * with data: a write the device reported whole but that is not (FTL_FAULT=tear:N, a file system
 * that lies about a short write) fails here, before anything is renamed into place. Bytes lost
 * below the page cache are for the reader's checksum. */
static ftl_err verify_written(int fd, const void *data, size_t size, const char *what, ftl_diag *d) {
  char buf[16384];
  struct stat st;
  if (fstat(fd, &st) != 0) return ftl_diag_fail(d, FTL_ERR_IO, "cannot stat %s: %s", what, strerror(errno));
  if ((uint64_t)st.st_size != (uint64_t)size)
    return ftl_diag_fail(d, FTL_ERR_IO, "%s holds %lld bytes after writing %zu: a torn write", what,
                         (long long)st.st_size, size);
  for (size_t at = 0; at < size;) {
    size_t n = size - at < sizeof buf ? size - at : sizeof buf;
    if (core_fs_pread_all(fd, buf, n, at) != FTL_OK || memcmp(buf, (const char *)data + at, n) != 0)
      return ftl_diag_fail(d, FTL_ERR_IO, "%s does not read back as written: a torn write", what);
    at += n;
  }
  return FTL_OK;
}

/* Writes data into *fd with the crash point (or NULL) halfway, reads it back, then
 * core_fs_commit_tmp. */
static ftl_err fill_and_commit(int *fd, const char *tmp, const char *path, const void *data, size_t size,
                               const char *crash_name, int rank, int64_t step, ftl_diag *d) {
  size_t half = size / 2;
  ftl_err rc = core_fs_pwrite_all(*fd, data, half, 0);
  if (rc == FTL_OK && crash_name && crash_name[0]) core_crash_point(crash_name, rank, step);
  if (rc == FTL_OK) rc = core_fs_pwrite_all(*fd, (const char *)data + half, size - half, half);
  if (rc) return ftl_diag_fail(d, rc, "write to %s failed: %s", tmp, strerror(errno));
  if ((rc = verify_written(*fd, data, size, tmp, d))) return rc;
  return core_fs_commit_tmp(fd, tmp, path, false, NULL, d);
}

ftl_err core_fs_replace(const char *path, const void *data, size_t size, core_tmp_naming naming, const char *crash_name,
                        int rank, int64_t step, ftl_diag *d) {
  char tmp[PATH_MAX];
  int fd = -1;
  ftl_err rc = core_fs_create_tmp(path, naming, tmp, sizeof tmp, &fd, d);
  if (rc) return rc; /* only a temporary file this call created is removed on failure */
  rc = fill_and_commit(&fd, tmp, path, data, size, crash_name, rank, step, d);
  if (fd >= 0) core_fs_table.close(fd);
  if (rc) core_fs_table.unlink(tmp);
  return rc;
}

ftl_err core_fs_write_atomic(const char *path, const void *data, size_t size, const char *crash_name, int rank,
                            int64_t step, ftl_diag *d) {
  return core_fs_replace(path, data, size, CORE_TMP_FIXED, crash_name, rank, step, d);
}

/* ---- new files and temporary folders ----------------------------------------------------- */

ftl_err core_fs_write_new_at(int dirfd, const char *shown_dir, const char *name, const void *data, size_t size,
                             mode_t mode, ftl_diag *d) {
  char shown[PATH_MAX];
  if (ftl_fmt(shown, sizeof shown, "%s%s%s", shown_dir ? shown_dir : "", shown_dir ? "/" : "", name))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", name);
  /* Read access too: what was written is read back before the fsync. */
  int fd = core_fs_table.openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
  if (fd < 0) return ftl_diag_fail(d, core_errno_to_err(errno), "cannot create %s: %s", shown, strerror(errno));
  ftl_err rc = core_fs_pwrite_all(fd, data, size, 0);
  if (rc) ftl_diag_fail(d, rc, "cannot write %s: %s", shown, strerror(errno));
  if (!rc) rc = verify_written(fd, data, size, shown, d);
  if (!rc && core_fs_table.fsync(fd) != 0)
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot fsync %s: %s", shown, strerror(errno));
  core_fs_table.close(fd);
  if (rc) core_fs_table.unlinkat(dirfd, name, 0);
  return rc;
}

ftl_err core_fs_mkdtemp(char *tmpl, mode_t mode, int *dirfd, ftl_diag *d) {
  *dirfd = -1;
  if (!core_fs_table.mkdtemp(tmpl)) {
    int e = errno;
    const char *slash = strrchr(tmpl, '/');
    ftl_err rc = ftl_diag_fail(d, core_errno_to_err(e), "cannot create a temporary folder in %.*s: %s",
                               slash ? (int)(slash - tmpl) : 1, slash ? tmpl : ".", strerror(e));
    tmpl[0] = '\0';
    return rc;
  }
  *dirfd = core_fs_table.open(tmpl, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
  if (*dirfd < 0) return ftl_diag_fail(d, FTL_ERR_IO, "cannot open %s: %s", tmpl, strerror(errno));
  if (core_fs_table.fchmod(*dirfd, mode) != 0)
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot chmod %s: %s", tmpl, strerror(errno));
  return FTL_OK;
}

void core_hex(const void *bytes, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  const unsigned char *b = bytes;
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[b[i] >> 4];
    out[2 * i + 1] = digits[b[i] & 15];
  }
  out[2 * n] = '\0';
}

ftl_err core_random_hex(char *out, size_t n, ftl_diag *d) {
  unsigned char raw[64];
  if (n > sizeof raw) return ftl_diag_fail(d, FTL_ERR_RANGE, "too many random bytes asked for");
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(raw + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return ftl_diag_fail(d, FTL_ERR_IO, "getrandom failed: %s", strerror(errno));
    got += (size_t)r;
  }
  core_hex(raw, n, out);
  return FTL_OK;
}

/* Removals go through the seam like the writes they undo. */
static void rm_tree_at(int parent, const char *name, int depth) {
  int dfd = core_fs_table.openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (dfd >= 0) {
    DIR *dp = fdopendir(dfd);
    if (dp) {
      struct dirent *e;
      while ((e = readdir(dp))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (core_fs_table.unlinkat(dfd, e->d_name, 0) != 0 && errno == EISDIR && depth > 0)
          rm_tree_at(dfd, e->d_name, depth - 1);
      }
      closedir(dp);
    } else {
      core_fs_table.close(dfd);
    }
  }
  core_fs_table.unlinkat(parent, name, AT_REMOVEDIR);
}

void core_fs_rm_tree(const char *dir) { rm_tree_at(AT_FDCWD, dir, 6); }
