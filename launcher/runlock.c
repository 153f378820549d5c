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

#include "core/flock.h"
#include "core/fs.h"
#include "core/rundir.h"
#include "ftl/core.h"

enum { RUN_LOCK_VERSION = 1 };

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

ftl_err ln_run_lock_take(const char *run_dir, const ln_job *job, int64_t wait_ms, ln_run_lock *lock, ftl_diag *d) {
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
  /* Tried once at once; held: refused, or (--wait-lock) waited for, saying so once. */
  rc = core_flock_until(fd, LOCK_EX, ftl_clock_ms(), 0, path, d);
  if (rc == FTL_ERR_TIMEOUT && wait_ms > 0) {
    char holder[700];
    int released;
    describe_file(fd, holder, sizeof holder, &released);
    fprintf(stderr, "ftl run: run directory %s is in use by %s: waiting up to %.1f s for it\n", run_dir, holder,
            (double)wait_ms / 1000.0);
    rc = core_flock_until(fd, LOCK_EX, ftl_deadline_after_ms(wait_ms), 0, path, d);
  }
  if (rc == FTL_ERR_TIMEOUT) {
    char holder[700];
    int released;
    describe_file(fd, holder, sizeof holder, &released);
    if (wait_ms > 0)
      rc = ftl_diag_fail(d, FTL_ERR_TIMEOUT,
                         "run directory %s is still in use after waiting %.1f s: its lock %s is held by %s", run_dir,
                         (double)wait_ms / 1000.0, path, holder);
    else
      rc = ftl_diag_fail(d, FTL_ERR_STATE,
                         "run directory %s is in use: its lock %s is held by %s; not starting a second launcher "
                         "into it (--wait-lock S waits for it)",
                         run_dir, path, holder);
  }
  if (rc) goto out;

  char holder[700];
  int released;
  int had_record = describe_file(fd, holder, sizeof holder, &released);
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

void ln_run_lock_release(ln_run_lock *lock) {
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

/* ---- whose run directory it is (RUNDIR/job.json, docs/formats/job-identity.md) ---------------- */

enum { JOB_IDENTITY_VERSION = 1, JOB_IDENTITY_MAX = 64 << 10 };

/* The identity of job (run as program, as found on PATH) as the record stores it. */
static json_t *identity_of(const ln_job *job, const char *program) {
  char command[400], hash[33];
  ln_job_command_text(job, command, sizeof command);
  ln_job_command_hash(job, program, hash);
  return json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s}", "version", JOB_IDENTITY_VERSION, "kind",
                   job->spec_path ? "spec" : "command", "name", job->name, "spec", job->spec_path ? job->spec_path : "",
                   "spec_hash", job->spec_path ? job->spec_hash : "", "command", command, "command_hash", hash);
}

/* The job a record describes, for a message: "the job 'x' of spec S (spec hash 1234abcd5678)" or
 * "the command-line job 'x' (python3 x.py)". */
static void describe_identity(const json_t *id, char *out, size_t size) {
  if (!strcmp(rec_str(id, "kind"), "spec"))
    snprintf(out, size, "the job '%s' of spec %s (spec hash %.12s)", rec_str(id, "name"), rec_str(id, "spec"),
             rec_str(id, "spec_hash"));
  else
    snprintf(out, size, "the command-line job '%s' (%s)", rec_str(id, "name"), rec_str(id, "command"));
}

/* Whether two identities are one job: the same kind, and the same spec bytes (a spec job) or the
 * same program and arguments (a command-line job). The ranks are not part of it: a job may go on
 * at another world size (its checkpoints reshard). */
static int same_job(const json_t *a, const json_t *b) {
  if (strcmp(rec_str(a, "kind"), rec_str(b, "kind"))) return 0;
  const char *key = !strcmp(rec_str(a, "kind"), "spec") ? "spec_hash" : "command_hash";
  return !strcmp(rec_str(a, key), rec_str(b, key));
}

/* The identity recorded in the run directory, or NULL (*rc FTL_OK) when there is none. A run
 * directory of an earlier release has only job.yaml, from which a spec job's identity is taken;
 * one with neither was a command-line job's, or is new: it is adopted. */
static json_t *recorded_identity(const char *run_dir, ftl_err *rc, ftl_diag *d) {
  char path[PATH_MAX], spec[PATH_MAX];
  char *data = NULL;
  size_t len = 0;
  json_t *id = NULL;
  *rc = FTL_OK;
  if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_JOB_IDENTITY) ||
      core_rundir_path(spec, sizeof spec, run_dir, FTL_RUNDIR_JOB_SPEC)) {
    *rc = ftl_diag_fail(d, FTL_ERR_RANGE, "run directory path too long: %s", run_dir);
    return NULL;
  }
  ftl_diag rd = {{0}};
  ftl_err r = core_fs_read_regular(path, JOB_IDENTITY_MAX, &data, &len, &rd);
  if (r == FTL_OK) {
    id = json_loadb(data, len, 0, NULL);
    if (!json_is_object(id) || json_integer_value(json_object_get(id, "version")) != JOB_IDENTITY_VERSION ||
        !json_is_string(json_object_get(id, "kind"))) {
      *rc = ftl_diag_fail(d, FTL_ERR_SPEC,
                          "%s is not a job record this ftl reads (docs/formats/job-identity.md), so whose run directory "
                          "%s is cannot be told: it is not run into (use another --run-dir)",
                          path, run_dir);
      json_decref(id);
      id = NULL;
    }
  } else if (r != FTL_ERR_NOTFOUND) {
    *rc = ftl_diag_fail(d, r == FTL_ERR_CORRUPT ? FTL_ERR_SPEC : r, "%s", rd.msg);
  } else if (access(spec, F_OK) == 0) {
    ln_job *other = NULL;
    ftl_diag ignored = {{0}};
    int ok = ln_job_parse_file(spec, &other, &ignored) == FTL_OK;
    id = json_pack("{s:s, s:s, s:s, s:s}", "kind", "spec", "name", ok ? other->name : "?", "spec", spec, "spec_hash",
                   ok ? other->spec_hash : "?");
    ln_job_destroy(other);
  }
  ftl_free(data);
  return id;
}

ftl_err ln_run_dir_check_job(const char *run_dir, const ln_job *job, const char *program, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  json_t *have = recorded_identity(run_dir, &rc, d);
  json_t *mine = have ? identity_of(job, program) : NULL;
  if (have && !mine) rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  if (have && mine && !same_job(have, mine)) {
    char theirs[600], ours[600];
    describe_identity(have, theirs, sizeof theirs);
    describe_identity(mine, ours, sizeof ours);
    rc = ftl_diag_fail(d, FTL_ERR_SPEC,
                       "run directory %s belongs to %s; this is %s: a run directory holds one job's checkpoints and "
                       "adapter, so it is not run into (use another --run-dir, or remove %s)",
                       run_dir, theirs, ours, run_dir);
  }
  json_decref(have);
  json_decref(mine);
  return rc;
}

ftl_err ln_run_dir_adopt(const char *run_dir, const ln_job *job, const char *program, ftl_diag *d) {
  char path[PATH_MAX], spec_copy[PATH_MAX];
  char *spec = NULL, *text = NULL, *line = NULL;
  size_t spec_len = 0;
  json_t *id = NULL;
  ftl_err rc = FTL_OK;
  if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_JOB_IDENTITY) ||
      core_rundir_path(spec_copy, sizeof spec_copy, run_dir, FTL_RUNDIR_JOB_SPEC))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "run directory path too long: %s", run_dir);
  /* The spec's copy, for whoever reads the run later (and earlier releases' identity). */
  if (job->spec_path && access(spec_copy, F_OK) != 0) {
    if ((rc = ftl_read_file(job->spec_path, 1 << 20, &spec, &spec_len, d))) goto out;
    if ((rc = ftl_write_file_atomic(spec_copy, spec, spec_len, d))) goto out;
  }
  if (access(path, F_OK) == 0) goto out; /* recorded by the first run; ln_run_dir_check_job compared it */
  if (!(id = identity_of(job, program)) || !(text = json_dumps(id, JSON_SORT_KEYS | JSON_INDENT(2)))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  size_t n = strlen(text);
  if (!(line = ftl_malloc(n + 2))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  memcpy(line, text, n);
  line[n] = '\n';
  rc = ftl_write_file_atomic(path, line, n + 1, d);
out:
  ftl_free(line);
  free(text);
  json_decref(id);
  ftl_free(spec);
  return rc;
}
