/* pipeline/pl_util.c: helpers shared inside pipeline/ (pl_util.h). */
#include "pipeline/pl_util.h"

#include <dirent.h>
#include <pwd.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/jsonl.h"
#include "ftl/core.h"
#include "pipeline/sha256.h"

char *pl_json_text(const json_t *j, int newline, size_t *len_out) {
  char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
  if (!text) return NULL;
  size_t len = strlen(text);
  char *out = ftl_malloc(len + 2);
  if (out) {
    memcpy(out, text, len);
    if (newline) out[len++] = '\n';
    out[len] = '\0';
    if (len_out) *len_out = len;
  }
  free(text);
  return out;
}

void pl_crash_point(const char *name) {
  if (name && name[0]) ftl_crash_point(name, -1, -1);
}

ftl_err pl_fsync_dir(const char *dir, ftl_diag *d) { return ftl_fs_fsync_dir(dir, d); }

ftl_err pl_random_hex(char *out, size_t n, ftl_diag *d) {
  unsigned char raw[64];
  static const char digits[] = "0123456789abcdef";
  if (n > sizeof raw) return ftl_diag_fail(d, FTL_ERR_RANGE, "too many random bytes asked for");
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(raw + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return ftl_diag_fail(d, FTL_ERR_IO, "getrandom failed: %s", strerror(errno));
    got += (size_t)r;
  }
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[raw[i] >> 4];
    out[2 * i + 1] = digits[raw[i] & 15];
  }
  out[2 * n] = '\0';
  return FTL_OK;
}

/* The registry's folders may be writable by others (a shared registry): the temporary name is
 * random and created exclusively without following links, so a planted PATH.tmp link can neither
 * redirect the write nor become the published file. */
ftl_err pl_write_atomic(const char *path, const void *data, size_t size, const char *crash_name, ftl_diag *d) {
  char tmp[4096], rnd[13];
  int fd = -1;
  ftl_err rc = FTL_OK;
  for (int attempt = 0; fd < 0; attempt++) {
    if ((rc = pl_random_hex(rnd, 6, d))) return rc;
    if (ftl_fmt(tmp, sizeof tmp, "%s.tmp-%s", path, rnd)) return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", path);
    fd = ftl_fs_table.open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
    if (fd < 0 && (errno != EEXIST || attempt >= 8))
      return ftl_diag_fail(d, ftl_errno_to_err(errno), "cannot create %s: %s", tmp, strerror(errno));
  }
  rc = ftl_fs_fill_and_commit(&fd, tmp, path, data, size, crash_name, -1, -1, d);
  if (fd >= 0) ftl_fs_table.close(fd);
  if (rc) ftl_fs_table.unlink(tmp);
  return rc;
}

ftl_err pl_open_regular(const char *path, uint64_t max_bytes, int *fd_out, uint64_t *size_out, ftl_diag *d) {
  struct stat st;
  *fd_out = -1;
  /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. */
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s does not exist", path);
    if (errno == ELOOP) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is a symbolic link; refused", path);
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  }
  if (fstat(fd, &st)) {
    close(fd);
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a regular file (a FIFO, device, socket or folder); refused",
                         path);
  }
  if ((uint64_t)st.st_size > max_bytes) {
    close(fd);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is %lld bytes, more than the %llu allowed; refused", path,
                         (long long)st.st_size, (unsigned long long)max_bytes);
  }
  *fd_out = fd;
  *size_out = (uint64_t)st.st_size;
  return FTL_OK;
}

ftl_err pl_read_regular(const char *path, size_t max_bytes, char **data_out, size_t *size_out, ftl_diag *d) {
  int fd = -1;
  uint64_t size = 0;
  *data_out = NULL;
  if (size_out) *size_out = 0;
  ftl_err rc = pl_open_regular(path, max_bytes, &fd, &size, d);
  if (rc) return rc;
  char *buf = ftl_malloc((size_t)size + 1);
  if (!buf) {
    close(fd);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory reading %s", path);
  }
  rc = ftl_fs_pread_all(fd, buf, (size_t)size, 0);
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

ftl_err pl_sha256_regular(const char *path, uint64_t max_bytes, char hex[65], uint64_t *size_out, ftl_diag *d) {
  static __thread unsigned char buf[1 << 16];
  int fd = -1;
  uint64_t size = 0, at = 0;
  ftl_sha256 *h = NULL;
  ftl_err rc = pl_open_regular(path, max_bytes, &fd, &size, d);
  if (rc) return rc;
  if ((rc = ftl_sha256_begin(&h))) {
    rc = ftl_diag_fail(d, rc, "out of memory hashing %s", path);
    goto out;
  }
  /* Exactly the recorded size: a file that grows while it is read is not read further. */
  while (at < size) {
    size_t n = size - at < sizeof buf ? (size_t)(size - at) : sizeof buf;
    if ((rc = ftl_fs_pread_all(fd, buf, n, at))) {
      rc = ftl_diag_fail(d, rc, "cannot read %s", path);
      goto out;
    }
    ftl_sha256_update(h, buf, n);
    at += n;
  }
  rc = ftl_sha256_end(h, hex);
  h = NULL;
  if (size_out) *size_out = size;
out:
  ftl_sha256_abort(h);
  close(fd);
  return rc;
}

static void rm_tree_at(int parent, const char *name, int depth) {
  int dfd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd >= 0) {
    DIR *dp = fdopendir(dfd);
    if (dp) {
      struct dirent *e;
      while ((e = readdir(dp))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (unlinkat(dfd, e->d_name, 0) != 0 && errno == EISDIR && depth > 0) rm_tree_at(dfd, e->d_name, depth - 1);
      }
      closedir(dp);
    } else {
      close(dfd);
    }
  }
  unlinkat(parent, name, AT_REMOVEDIR);
}

void pl_rm_tree(const char *dir) { rm_tree_at(AT_FDCWD, dir, 4); }

ftl_err pl_lock(const char *path, int64_t timeout_ms, int *fd_out, ftl_diag *d) {
  *fd_out = -1;
  struct stat st;
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) return ftl_diag_fail(d, FTL_ERR_IO, "cannot open the lock %s: %s", path, strerror(errno));
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    close(fd);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the lock %s is not a regular file; refused", path);
  }
  ftl_err rc = ftl_flock_deadline(fd, LOCK_EX, timeout_ms, path, d);
  if (rc) {
    close(fd);
    return rc;
  }
  *fd_out = fd;
  return FTL_OK;
}

void pl_unlock(int fd) {
  if (fd >= 0) close(fd); /* closing the descriptor releases the flock */
}

ftl_err pl_jsonl_append(const char *path, const json_t *rec, int64_t lock_timeout_ms, ftl_diag *d) {
  ftl_jsonl_opts o = {.lock = true, .lock_timeout_ms = lock_timeout_ms, .fsync = true};
  return ftl_jsonl_append(path, rec, &o, d);
}

void pl_rmdir_files(const char *dir) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd >= 0) {
    DIR *dp = fdopendir(dfd);
    if (dp) {
      struct dirent *e;
      while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(dfd, e->d_name, 0);
      closedir(dp);
    } else {
      close(dfd);
    }
  }
  rmdir(dir);
}

int pl_safe_name(const char *name, int allow_dot) {
  size_t n = 0;
  if (!name || !name[0]) return 0;
  if (!strcmp(name, ".") || !strcmp(name, "..")) return 0;
  if (name[0] == '.' && !allow_dot) return 0;
  if (strstr(name, "..")) return 0;
  for (; name[n]; n++) {
    char c = name[n];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return 0;
  }
  return n <= 255;
}

void pl_effective_user(char *buf, size_t size) {
  uid_t uid = geteuid();
  struct passwd pw, *found = NULL;
  char pwbuf[4096];
  if (getpwuid_r(uid, &pw, pwbuf, sizeof pwbuf, &found) == 0 && found && found->pw_name && found->pw_name[0])
    snprintf(buf, size, "%s@%s", found->pw_name, ftl_hostname());
  else
    snprintf(buf, size, "%lu@%s", (unsigned long)uid, ftl_hostname());
}
