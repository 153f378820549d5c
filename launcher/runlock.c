/* launcher/runlock.c: adopting a run directory: RUNDIR/ftl.lock, its owner and its job.yaml (see
 * runlock.h; the lock's format in docs/formats/ftl-lock.md).
 *
 * The lock is the flock on the open file, not the file: the file stays (removing it would race a
 * second launcher that opened it a moment before), and its record is only what a refused launcher
 * reports and what a taker learns about the last holder. The record is rewritten in place (a
 * rename would put a new inode beside the locked one); on release it gets "released_wall_us", so a
 * record without one under a free flock is a launcher that died. */
#include "launcher/runlock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "core/fs.h"
#include "core/rundir.h"
#include "ftl/core.h"

enum { RUN_LOCK_VERSION = 1, RUN_LOCK_POLL_MS = 100 };

/* The record's bytes now in the file into buf (NUL-terminated); its length, 0 if none. */
static size_t read_bytes(int fd, char *buf, size_t size) {
  ssize_t n = pread(fd, buf, size - 1, 0);
  if (n < 0) n = 0;
  buf[n] = '\0';
  return (size_t)n;
}

/* The record now in the file as an object, or NULL (none yet, or unreadable: a crash mid-write). */
static json_t *read_record(int fd) {
  char buf[4096];
  size_t n = read_bytes(fd, buf, sizeof buf);
  json_t *rec = n ? json_loadb(buf, n, 0, NULL) : NULL;
  if (rec && !json_is_object(rec)) {
    json_decref(rec);
    rec = NULL;
  }
  return rec;
}

static const char *rec_str(const json_t *rec, const char *key) {
  const char *s = json_string_value(json_object_get(rec, key));
  return s && *s ? s : "?";
}

int ln_run_lock_parse(const char *data, size_t size, char *holder, size_t holder_size, int *released) {
  int is_record = 0;
  *released = 0;
  json_t *rec = size ? json_loadb(data, size, 0, NULL) : NULL;
  if (!json_is_object(rec)) {
    snprintf(holder, holder_size, "another launcher (its record is not written yet)");
    goto out;
  }
  is_record = 1;
  *released = json_object_get(rec, "released_wall_us") != NULL;
  char since[40] = "?";
  json_int_t start_us = json_integer_value(json_object_get(rec, "start_wall_us"));
  time_t t = (time_t)(start_us / 1000000);
  struct tm tm;
  /* gmtime_r fails (NULL) for years it cannot hold; a silly value only reads as "?". */
  if (start_us > 0 && start_us < (json_int_t)253402300800000000LL && gmtime_r(&t, &tm))
    strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
  snprintf(holder, holder_size, "pid %lld on host %.255s (job '%.255s', since %s)",
           (long long)json_integer_value(json_object_get(rec, "pid")), rec_str(rec, "host"), rec_str(rec, "job"),
           since);
out:
  json_decref(rec);
  return is_record;
}

/* "pid 123 on host h (job 'x', since 2026-12-01T11:00:00Z)" for the record in the file; *released
 * as ln_run_lock_parse says; returns whether there is a record at all. */
static int describe_file(int fd, char *holder, size_t size, int *released) {
  char buf[4096];
  size_t n = read_bytes(fd, buf, sizeof buf);
  return ln_run_lock_parse(buf, n, holder, size, released);
}

static ftl_err write_record(int fd, json_t *rec, const char *path, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  char *text = rec ? json_dumps(rec, JSON_COMPACT) : NULL;
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory writing %s", path);
  size_t len = strlen(text);
  text[len] = '\0';
  if (core_fs_table.ftruncate(fd, 0) != 0 || core_fs_pwrite_all(fd, text, len, 0) != FTL_OK || core_fs_pwrite_all(fd, "\n", 1, len) != FTL_OK)
    rc = ftl_diag_fail(d, core_errno_to_err(errno), "cannot write %s: %s", path, strerror(errno));
  free(text);
  return rc;
}

/* The run directory is another job's: a command-line job where a spec's job.yaml lies. (A spec
 * job's own job.yaml comparison is ln_run_dir_adopt_spec's, below; command-line jobs have no spec
 * to compare, and tests and users reuse a scratch run directory for different programs.) */
static ftl_err check_owner(const char *run_dir, const ftl_job *job, ftl_diag *d) {
  char spec[PATH_MAX];
  if (!job->spec_path && core_rundir_path(spec, sizeof spec, run_dir, FTL_RUNDIR_JOB_SPEC) == FTL_OK &&
      access(spec, F_OK) == 0) {
    ftl_job *other = NULL;
    ftl_diag ignored = {{0}};
    ftl_err rc;
    if (ln_job_parse_file(spec, &other, &ignored) == FTL_OK)
      rc = ftl_diag_fail(d, FTL_ERR_SPEC,
                         "run directory %s belongs to job '%s' (spec hash %s, its %s); the command-line job '%s' "
                         "is not run into it: use another --run-dir",
                         run_dir, other->name, other->spec_hash, spec, job->name);
    else
      rc = ftl_diag_fail(d, FTL_ERR_SPEC,
                         "run directory %s belongs to the job of its spec %s; the command-line job '%s' is not run "
                         "into it: use another --run-dir",
                         run_dir, spec, job->name);
    ln_job_destroy(other);
    return rc;
  }
  return FTL_OK;
}

ftl_err ln_run_lock_take(const char *run_dir, const ftl_job *job, int64_t wait_ms, ftl_run_lock *lock, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  char path[PATH_MAX];
  json_t *rec = NULL;
  int fd = -1;
  lock->fd = -1;
  if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_LOCK))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "run directory path too long: %s", run_dir);
  fd = core_fs_table.open(path, O_RDWR | O_CREAT, 0644);
  if (fd < 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot open the run directory's lock %s: %s", path, strerror(errno));
    goto out;
  }
  /* flock cannot time out by itself: LOCK_NB, polled until the deadline. */
  int64_t deadline = ftl_deadline_after_ms(wait_ms > 0 ? wait_ms : 0);
  int said_waiting = 0;
  for (;;) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) break;
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot lock %s: %s", path, strerror(errno));
      goto out;
    }
    char holder[700];
    int released;
    describe_file(fd, holder, sizeof holder, &released);
    if (ftl_deadline_left_ms(deadline) == 0) {
      if (wait_ms > 0)
        rc = ftl_diag_fail(d, FTL_ERR_TIMEOUT,
                           "run directory %s is still in use after waiting %.1f s: its lock %s is held by %s", run_dir,
                           (double)wait_ms / 1000.0, path, holder);
      else
        rc = ftl_diag_fail(d, FTL_ERR_STATE,
                           "run directory %s is in use: its lock %s is held by %s; not starting a second launcher "
                           "into it (--wait-lock S waits for it)",
                           run_dir, path, holder);
      goto out;
    }
    if (!said_waiting) {
      fprintf(stderr, "ftl run: run directory %s is in use by %s: waiting up to %.1f s for it\n", run_dir, holder,
              (double)wait_ms / 1000.0);
      said_waiting = 1;
    }
    struct timespec ts = {0, RUN_LOCK_POLL_MS * 1000 * 1000};
    nanosleep(&ts, NULL);
  }

  char holder[700];
  int released;
  int had_record = describe_file(fd, holder, sizeof holder, &released);
  if ((rc = check_owner(run_dir, job, d))) goto out;
  if (had_record && !released) {
    fprintf(stderr, "ftl run: note: taking over the lock of %s, which ended without releasing it (a crash or a kill)\n",
            holder);
  }
  rec = json_pack("{s:i, s:I, s:s, s:I, s:s, s:s, s:s}", "version", RUN_LOCK_VERSION, "pid", (json_int_t)getpid(),
                  "host", ftl_hostname(), "start_wall_us", (json_int_t)ftl_wall_us(), "job", job->name, "spec_hash",
                  job->spec_hash, "run_dir", run_dir);
  if ((rc = write_record(fd, rec, path, d))) goto out;
  lock->fd = fd;
  fd = -1;
out:
  if (fd >= 0) close(fd); /* drops the flock if we took it */
  json_decref(rec);
  return rc;
}

/* A shared non-blocking flock fails exactly while a launcher holds the exclusive one. */
int ln_run_lock_held(const char *run_dir) {
  char path[PATH_MAX];
  if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_LOCK)) return -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  int held = 0;
  if (flock(fd, LOCK_SH | LOCK_NB) != 0) held = errno == EWOULDBLOCK ? 1 : -1;
  close(fd); /* releases our shared lock, if we got it */
  return held;
}

void ln_run_lock_release(ftl_run_lock *lock) {
  if (!lock || lock->fd < 0) return;
  json_t *rec = read_record(lock->fd);
  if (rec && json_object_set_new(rec, "released_wall_us", json_integer(ftl_wall_us())) == 0) {
    ftl_diag ignored = {{0}};
    (void)write_record(lock->fd, rec, "ftl.lock", &ignored);
  }
  json_decref(rec);
  close(lock->fd); /* closing the last descriptor releases the flock */
  lock->fd = -1;
}

/* A run directory already used by a different spec is refused: mixing two jobs' checkpoints and
 * logs would cost someone their data. */
ftl_err ln_run_dir_adopt_spec(const char *run_dir, const ftl_job *job, ftl_diag *d) {
  ftl_err rc = ftl_mkdir_p(run_dir, d);
  if (rc) return rc;
  char path[PATH_MAX];
  if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_JOB_SPEC))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", run_dir);
  if (!job->spec_path) return FTL_OK;
  char *spec = NULL, *existing = NULL;
  size_t spec_len = 0, existing_len = 0;
  rc = ftl_read_file(job->spec_path, 1 << 20, &spec, &spec_len, d);
  if (rc) goto out;
  ftl_diag ignored;
  if (ftl_read_file(path, 1 << 20, &existing, &existing_len, &ignored) == FTL_OK) {
    if (existing_len != spec_len || memcmp(existing, spec, spec_len) != 0) {
      rc = ftl_diag_fail(d, FTL_ERR_SPEC,
                         "run directory %s belongs to a different job spec (its job.yaml differs from %s); "
                         "use another --run-dir or remove it",
                         run_dir, job->spec_path);
    }
    goto out;
  }
  rc = ftl_write_file_atomic(path, spec, spec_len, d);
out:
  ftl_free(spec);
  ftl_free(existing);
  return rc;
}
