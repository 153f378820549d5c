/* core/jsonl.c: the JSON-lines appender and the locked reader (see core/jsonl.h).
 *
 * A record goes out as one write() to an O_APPEND descriptor: on a local file system that keeps
 * concurrent appenders from interleaving inside a line. Under the optional exclusive flock the
 * writer also repairs a last line torn by a writer that died (it ends it with '\n' first, in the
 * same write), which a writer without the lock cannot do safely.
 *
 * Every open, write, fsync and close goes through the file seam (core/fs.h), so fault injection
 * (FTL_FAULT: a failed or torn write, a failed fsync) and the crash point `jsonl.append` (after the
 * record's write, before its fsync) reach every ledger and log.
 *
 * Not here: what the records mean (each owner's format page), durable replacement of whole files
 * (core/fs.c).
 *
 * Map: the open log; one-shot append; the locked reader; line iteration. */
#include "core/jsonl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/flock.h"
#include "core/fs.h"
#include "ftl/core.h"

struct core_jsonl {
  int fd;
  core_jsonl_opts opts;
  /* With opts.lock: held with the flock. A flock belongs to the open file, so threads writing one
   * handle would all hold it at once; this makes each locked append theirs alone, which the check
   * that the file grew by exactly the record (and the undo of a failed append) needs. */
  pthread_mutex_t mu;
  char path[PATH_MAX];
};

/* ---- the open log ---------------------------------------------------------------------------- */

ftl_err core_jsonl_open(const char *path, const core_jsonl_opts *opts, core_jsonl **out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  core_jsonl *log = NULL;
  if (!path || !out) return ftl_diag_fail(d, FTL_ERR_INVAL, "no JSON-lines path");
  *out = NULL;
  log = ftl_calloc(1, sizeof *log);
  if (!log) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory opening %s", path);
  log->fd = -1;
  pthread_mutex_init(&log->mu, NULL);
  if (opts) log->opts = *opts;
  if (ftl_fmt(log->path, sizeof log->path, "%s", path)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", path);
    goto out;
  }
  /* Read access too: the torn-line check reads the last byte. Never through a link (whoever can
   * write the folder could point the log at another file) and never a FIFO or device: a log is a
   * regular file, checked on the descriptor itself. */
  log->fd = core_fs_table.open(path, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (log->fd < 0) {
    rc = ftl_diag_fail(d, core_errno_to_err(errno), "cannot open %s: %s", path,
                       errno == ELOOP ? "it is a symbolic link" : strerror(errno));
    goto out;
  }
  struct stat st;
  if (fstat(log->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot append to %s: not a regular file", path);
    goto out;
  }
  *out = log;
  log = NULL;
out:
  core_jsonl_close(log);
  return rc;
}

/* True when the file's last byte is not '\n': a line torn by a writer that died mid-write. Only
 * meaningful under the exclusive lock, when no other writer can be mid-line. */
static bool last_line_torn(int fd) {
  struct stat st;
  char last = '\n';
  if (fstat(fd, &st) != 0 || st.st_size == 0) return false;
  return core_fs_table.pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n';
}

ftl_err core_jsonl_write(core_jsonl *log, const json_t *rec, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  char *text = NULL, *line = NULL;
  bool locked = false;
  if (!log || !rec) return ftl_diag_fail(d, FTL_ERR_INVAL, "no JSON-lines log or record");
  text = json_dumps(rec, JSON_COMPACT);
  if (!text) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "cannot encode a record for %s", log->path);
    goto out;
  }
  /* "\n" in front in case the last line is torn, the record, "\n": built once so that the whole
   * record goes out in one write(). */
  size_t n = strlen(text);
  line = ftl_malloc(n + 2);
  if (!line) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory appending to %s", log->path);
    goto out;
  }
  line[0] = '\n';
  memcpy(line + 1, text, n);
  line[n + 1] = '\n';
  bool torn = false;
  off_t before = -1; /* the file's size before this record; known under the lock */
  struct stat st;
  if (log->opts.lock) {
    pthread_mutex_lock(&log->mu);
    int64_t lock_ms = log->opts.lock_timeout_ms < 0 ? 0 : log->opts.lock_timeout_ms;
    if ((rc = core_flock_until(log->fd, LOCK_EX, ftl_deadline_after_ms(lock_ms), 0, log->path, d))) {
      pthread_mutex_unlock(&log->mu);
      goto out;
    }
    locked = true;
    torn = last_line_torn(log->fd);
    if (fstat(log->fd, &st) == 0) before = st.st_size;
  }
  const char *p = torn ? line : line + 1;
  size_t left = torn ? n + 2 : n + 1, total = left;
  while (left > 0) {
    ssize_t w = core_fs_table.write(log->fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      rc = ftl_diag_fail(d, core_errno_to_err(errno), "cannot append to %s: %s", log->path, strerror(errno));
      break;
    }
    p += w;
    left -= (size_t)w;
  }
  /* A test hook: a writer killed after its record's write (torn, under FTL_FAULT=tear:N) and
   * before the fsync, which the next locked append repairs. */
  if (!rc) core_crash_point("jsonl.append", -1, -1);
  /* Under the lock the file must have grown by exactly the record: a write reported whole that is
   * not (a torn write) is an error, not a record. */
  if (!rc && before >= 0 && (fstat(log->fd, &st) != 0 || st.st_size != before + (off_t)total))
    rc = ftl_diag_fail(d, FTL_ERR_IO, "append to %s was torn (%lld of %zu bytes reached the file)", log->path,
                       (long long)(st.st_size - before), total);
  if (rc) {
    /* Under the lock nobody else appended since: the file goes back to what it was, so a failed
     * append (ENOSPC halfway, a torn write) leaves no partial record behind the earlier ones. */
    if (before >= 0) (void)core_fs_table.ftruncate(log->fd, before);
    goto out;
  }
  if (log->opts.fsync && core_fs_table.fsync(log->fd) != 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot fsync %s: %s", log->path, strerror(errno));
    goto out;
  }
out:
  if (locked) {
    flock(log->fd, LOCK_UN);
    pthread_mutex_unlock(&log->mu);
  }
  ftl_free(line);
  free(text); /* jansson's allocator is libc's */
  return rc;
}

void core_jsonl_close(core_jsonl *log) {
  if (!log) return;
  if (log->fd >= 0) {
    core_fs_table.fsync(log->fd);
    core_fs_table.close(log->fd);
  }
  pthread_mutex_destroy(&log->mu);
  ftl_free(log);
}

/* ---- one-shot append ------------------------------------------------------------------------- */

ftl_err core_jsonl_append(const char *path, const json_t *rec, const core_jsonl_opts *opts, ftl_diag *d) {
  core_jsonl *log = NULL;
  ftl_err rc = core_jsonl_open(path, opts, &log, d);
  if (rc == FTL_OK) rc = core_jsonl_write(log, rec, d);
  if (log) {
    /* The record was fsynced by the write when opts asked for it; closing needs no second one. */
    core_fs_table.close(log->fd);
    pthread_mutex_destroy(&log->mu);
    ftl_free(log);
  }
  return rc;
}

/* ---- the locked reader ----------------------------------------------------------------------- */

ftl_err core_jsonl_read(const char *path, size_t max_bytes, int64_t lock_timeout_ms, char **data_out, size_t *size_out,
                       ftl_diag *d) {
  ftl_err rc = FTL_OK;
  if (!path || !data_out || !size_out) return ftl_diag_fail(d, FTL_ERR_INVAL, "no JSON-lines path");
  *data_out = NULL;
  *size_out = 0;
  /* O_NONBLOCK: a FIFO in the log's place must not block the reader; it is refused below. */
  int fd = core_fs_table.open(path, O_RDONLY | O_NONBLOCK, 0);
  if (fd < 0)
    return ftl_diag_fail(d, errno == ENOENT ? FTL_ERR_NOTFOUND : FTL_ERR_IO, "cannot open %s: %s", path,
                         strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    core_fs_table.close(fd);
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot read %s: not a regular file", path);
  }
  /* Under the shared lock no locked appender is mid-line, so no line is seen half-written. */
  int64_t lock_ms = lock_timeout_ms < 0 ? 0 : lock_timeout_ms;
  if ((rc = core_flock_until(fd, LOCK_SH, ftl_deadline_after_ms(lock_ms), 0, path, d)) == FTL_OK)
    rc = ftl_read_fd(fd, path, max_bytes, data_out, size_out, d);
  core_fs_table.close(fd); /* closing releases the lock */
  return rc;
}

/* ---- lines ----------------------------------------------------------------------------------- */

bool core_jsonl_line_torn(const char *line, size_t len) {
  if (!line || len == 0 || line[0] != '{') return false;
  json_error_t jerr;
  json_t *j = json_loadb(line, len, 0, &jerr);
  if (j) {
    json_decref(j);
    return false;
  }
  /* Every proper prefix of a JSON object, and nothing else, ends the input early. */
  return json_error_code(&jerr) == json_error_premature_end_of_input;
}

ftl_err core_jsonl_check_version(const json_t *rec, int want, const char *what, ftl_diag *d) {
  const json_t *ver = json_object_get(rec, "version");
  if (!json_is_integer(ver)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s'version' is missing or not an integer", what);
  if (json_integer_value(ver) != want)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%sversion %" JSON_INTEGER_FORMAT " is not supported (this ftl reads %d)",
                         what, json_integer_value(ver), want);
  return FTL_OK;
}

ftl_err core_jsonl_load_object(const char *data, size_t size, size_t max_bytes, int want, const char *what,
                               json_t **out, ftl_diag *d) {
  json_error_t jerr;
  *out = NULL;
  if (size > max_bytes) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%slarger than %zu bytes", what, max_bytes);
  json_t *j = json_loadb(data, size, JSON_REJECT_DUPLICATES, &jerr);
  if (!j) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%snot JSON: %s (line %d)", what, jerr.text, jerr.line);
  ftl_err rc = json_is_object(j) ? FTL_OK : ftl_diag_fail(d, FTL_ERR_CORRUPT, "%snot a JSON object", what);
  if (!rc && want >= 0) rc = core_jsonl_check_version(j, want, what, d);
  if (rc) {
    json_decref(j);
    return rc;
  }
  *out = j;
  return FTL_OK;
}

ftl_err core_jsonl_each_line(const char *data, size_t size, ftl_jsonl_line_fn fn, void *ctx) {
  ftl_err rc = FTL_OK;
  size_t pos = 0, line_no = 0;
  if (!fn) return FTL_ERR_INVAL;
  while (rc == FTL_OK && data && pos < size) {
    const char *line = data + pos;
    const char *nl = memchr(line, '\n', size - pos);
    size_t len = nl ? (size_t)(nl - line) : size - pos;
    pos += len + (nl ? 1 : 0);
    line_no++;
    if (len > 0) rc = fn(line, len, line_no, ctx);
  }
  return rc;
}
