/* core/util.c: bounded formatting, integer parsing, the host name, mkdir -p, whole-file reads, and
 * the public durable-file helpers (which are the file seam's, core/fs.c). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "ftl/core.h"

ftl_err ftl_fmt(char *buf, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, size, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= size) return FTL_ERR_RANGE;
  return FTL_OK;
}

ftl_err ftl_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out) {
  if (!s || !*s) return FTL_ERR_INVAL;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end != '\0') return FTL_ERR_INVAL;
  if (errno == ERANGE || v < min || v > max) return FTL_ERR_RANGE;
  *out = (int64_t)v;
  return FTL_OK;
}

const char *ftl_hostname(void) {
  /* Computed once; a race between two first callers writes the same bytes. */
  static char name[256];
  if (!name[0]) {
    char buf[256];
    if (gethostname(buf, sizeof buf) != 0) snprintf(buf, sizeof buf, "unknown-host");
    buf[sizeof buf - 1] = '\0';
    char *dot = strchr(buf, '.');
    if (dot) *dot = '\0';
    memcpy(name, buf, sizeof name);
  }
  return name;
}

ftl_err ftl_mkdir_p(const char *path, ftl_diag *d) {
  char buf[PATH_MAX];
  if (ftl_fmt(buf, sizeof buf, "%s", path)) return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
      return ftl_diag_fail(d, FTL_ERR_IO, "cannot create folder %s: %s", buf, strerror(errno));
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST)
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot create folder %s: %s", buf, strerror(errno));
  struct stat st;
  if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
    return ftl_diag_fail(d, FTL_ERR_IO, "%s exists and is not a folder", buf);
  return FTL_OK;
}

/* Both durable-file helpers of ftl/core.h are the file seam's (core/fs.c), so fault injection and
 * crash tests reach every durable file, and there is one atomic replace in the tree. */
ftl_err ftl_fsync_dir(const char *dir_path, ftl_diag *d) { return ftl_fs_fsync_dir(dir_path, d); }

ftl_err ftl_write_file_atomic(const char *path, const void *data, size_t size, ftl_diag *d) {
  return ftl_fs_write_atomic_shared(path, data, size, d);
}

ftl_err ftl_read_fd(int fd, const char *what, size_t max_bytes, char **data_out, size_t *size_out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 1 >= cap) {
      size_t ncap = cap ? cap * 2 : 4096;
      char *nbuf = ftl_realloc(buf, ncap);
      if (!nbuf) {
        rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory reading %s", what);
        goto out;
      }
      buf = nbuf;
      cap = ncap;
    }
    ssize_t n = read(fd, buf + len, cap - len - 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot read %s: %s", what, strerror(errno));
      goto out;
    }
    if (n == 0) break;
    len += (size_t)n;
    if (len > max_bytes) {
      rc = ftl_diag_fail(d, FTL_ERR_RANGE, "%s is larger than %zu bytes", what, max_bytes);
      goto out;
    }
  }
  buf[len] = '\0';
  *data_out = buf;
  *size_out = len;
  buf = NULL;
out:
  ftl_free(buf);
  return rc;
}

ftl_err ftl_read_file(const char *path, size_t max_bytes, char **data_out, size_t *size_out, ftl_diag *d) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ftl_diag_fail(d, errno == ENOENT ? FTL_ERR_NOTFOUND : FTL_ERR_IO, "cannot open %s: %s", path,
                         strerror(errno));
  ftl_err rc = ftl_read_fd(fd, path, max_bytes, data_out, size_out, d);
  close(fd);
  return rc;
}
