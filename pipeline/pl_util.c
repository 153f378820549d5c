/* pipeline/pl_util.c: helpers shared inside pipeline/ (pl_util.h). */
#include "pipeline/pl_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/jsonl.h"
#include "ftl/core.h"

void pl_buf_put(pl_buf *b, const void *data, size_t n) {
  if (b->bad) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = (b->len + n + 1) * 2;
    char *q = ftl_realloc(b->p, cap);
    if (!q) {
      b->bad = 1;
      return;
    }
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->len, data, n);
  b->len += n;
  b->p[b->len] = '\0';
}

void pl_buf_putc(pl_buf *b, char c) { pl_buf_put(b, &c, 1); }
void pl_buf_puts(pl_buf *b, const char *s) { pl_buf_put(b, s, strlen(s)); }

void pl_buf_printf(pl_buf *b, const char *fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->bad = 1;
    return;
  }
  if ((size_t)n < sizeof small) {
    pl_buf_put(b, small, (size_t)n);
    return;
  }
  char *big = ftl_malloc((size_t)n + 1);
  if (!big) {
    b->bad = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  pl_buf_put(b, big, (size_t)n);
  ftl_free(big);
}

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

ftl_err pl_write_atomic(const char *path, const void *data, size_t size, const char *crash_name, ftl_diag *d) {
  return ftl_fs_write_atomic(path, data, size, crash_name, -1, -1, d);
}

ftl_err pl_lock(const char *path, int64_t timeout_ms, int *fd_out, ftl_diag *d) {
  *fd_out = -1;
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return ftl_diag_fail(d, FTL_ERR_IO, "cannot open the lock %s: %s", path, strerror(errno));
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
