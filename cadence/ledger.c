/* cadence/ledger.c: failure ledgers in and out (docs/formats/fleet-ledger.md,
 * docs/formats/failures.md): one line parsed into a failure, exposure or restart record, the append
 * of a record to a fleet ledger shared by jobs (or to a run's failures.jsonl: the launcher's restart
 * records), and the loading of whole ledgers into a controller (ftl_cadence_load_ledger/_from_env).
 *
 * Concurrency is core/jsonl.c's: a writer holds an exclusive flock while it appends one line with
 * a single write() to an O_APPEND descriptor and fsyncs it (and repairs a line torn by a writer
 * that crashed); a reader (the loading below, through ftl_jsonl_read) holds a shared flock while it
 * reads.
 *
 * Not here: what the records mean for the estimate (cadence.c, reached through
 * cadence/controller.h: this file calls the controller, the controller never calls this file). */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cadence/controller.h"
#include "core/jsonl.h"
#include "core/rundir.h"
#include "ftl/cadence.h"
#include "ftl/core.h"

/* A whole ledger read at once: 256 MiB is about a million records. */
#define MAX_LEDGER_BYTES ((size_t)256 << 20)
#define LEDGER_LOCK_TIMEOUT_MS 10000
/* A line is a few hundred bytes; a longer one is not ours. */
#define MAX_LINE_BYTES 65536
/* Exposure of one record: a million rank-hours is already 100k ranks for ten hours. */
#define MAX_RANK_HOURS 1e9
/* One restart of more than a year is not a restart time but a clock gone wrong. */
#define MAX_RESTART_S (86400.0 * 366)

/* A required number field in [0, max]. */
static ftl_err get_bounded(json_t *o, const char *key, double max, double *out, ftl_diag *d) {
  json_t *v = json_object_get(o, key);
  if (!v || !json_is_number(v))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"%s\" is %s", key, v ? "not a number" : "missing");
  double x = json_number_value(v);
  if (!isfinite(x) || x < 0 || x > max)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s %g is not in [0, %g]", key, x, max);
  *out = x;
  return FTL_OK;
}

static void copy_str(char *dst, size_t size, const char *src) {
  size_t n = strlen(src);
  if (n >= size) n = size - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* An optional integer field: absent → def; present but not an integer → error. */
static ftl_err get_int(json_t *o, const char *key, int64_t def, int64_t *out, ftl_diag *d) {
  json_t *v = json_object_get(o, key);
  if (!v) {
    *out = def;
    return FTL_OK;
  }
  if (!json_is_integer(v)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"%s\" is not an integer", key);
  *out = (int64_t)json_integer_value(v);
  return FTL_OK;
}

static ftl_err get_str(json_t *o, const char *key, char *dst, size_t size, bool required, ftl_diag *d) {
  json_t *v = json_object_get(o, key);
  dst[0] = '\0';
  if (!v) return required ? ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"%s\" is missing", key) : FTL_OK;
  if (!json_is_string(v)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"%s\" is not a string", key);
  copy_str(dst, size, json_string_value(v));
  return FTL_OK;
}

ftl_err ftl_cadence_parse_record(const char *line, size_t len, ftl_cadence_record *out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  json_t *o = NULL;
  if (!line || !out) return ftl_diag_fail(d, FTL_ERR_INVAL, "no line or no record");
  memset(out, 0, sizeof *out);
  out->attempt = -1;
  out->step = -1;
  if (len > MAX_LINE_BYTES) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "line of %zu bytes is too long", len);
  json_error_t jerr;
  o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!o) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "not JSON: %s (column %d)", jerr.text, jerr.column);
    goto out;
  }
  if (!json_is_object(o)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "not a JSON object");
    goto out;
  }
  int64_t version = -1;
  if ((rc = get_int(o, "version", -1, &version, d))) goto out;
  if (version == -1) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"version\" is missing");
    goto out;
  }
  if (version != FTL_RECORD_VERSION) {
    rc = ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "version %lld is not %d", (long long)version, FTL_RECORD_VERSION);
    goto out;
  }
  /* The run ledger (failures.jsonl) has no "record" field: every line is a failure. */
  char kind[32];
  if ((rc = get_str(o, "record", kind, sizeof kind, false, d))) goto out;
  if (kind[0] == '\0' || strcmp(kind, "failure") == 0) {
    out->kind = FTL_CADENCE_REC_FAILURE;
  } else if (strcmp(kind, "exposure") == 0) {
    out->kind = FTL_CADENCE_REC_EXPOSURE;
  } else if (strcmp(kind, "restart") == 0) {
    out->kind = FTL_CADENCE_REC_RESTART;
  } else {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "record \"%s\" is not \"failure\", \"exposure\" or \"restart\"", kind);
    goto out;
  }
  if ((rc = get_str(o, "job", out->job, sizeof out->job, false, d))) goto out;
  if ((rc = get_str(o, "host", out->host, sizeof out->host, false, d))) goto out;
  if ((rc = get_int(o, "wall_us", 0, &out->wall_us, d))) goto out;
  if ((rc = get_int(o, "attempt", -1, &out->attempt, d))) goto out;
  if ((rc = get_int(o, "step", -1, &out->step, d))) goto out;
  if ((rc = get_int(o, "world_size", 0, &out->world_size, d))) goto out;
  if (out->world_size < 0) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "world_size %lld is negative", (long long)out->world_size);
    goto out;
  }
  if (out->kind == FTL_CADENCE_REC_FAILURE) {
    if ((rc = get_str(o, "cause", out->cause, sizeof out->cause, true, d))) goto out;
    out->cls = ftl_cadence_classify(out->cause, out->step);
  } else if (out->kind == FTL_CADENCE_REC_EXPOSURE) {
    if ((rc = get_bounded(o, "rank_hours", MAX_RANK_HOURS, &out->rank_hours, d))) goto out;
  } else {
    /* The failure's cause is only said, not classified: a restart record never moves M. */
    if ((rc = get_str(o, "cause", out->cause, sizeof out->cause, false, d))) goto out;
    if ((rc = get_bounded(o, "restart_s", MAX_RESTART_S, &out->restart_s, d))) goto out;
  }
out:
  json_decref(o);
  return rc;
}

ftl_err ftl_cadence_fleet_append(const char *path, const ftl_cadence_record *rec, int64_t timeout_ms, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  json_t *o = NULL;
  if (!path || !rec) return ftl_diag_fail(d, FTL_ERR_INVAL, "no fleet ledger path or record");
  int64_t wall_us = rec->wall_us ? rec->wall_us : ftl_wall_us();
  if (rec->kind == FTL_CADENCE_REC_FAILURE) {
    if (!rec->cause[0]) return ftl_diag_fail(d, FTL_ERR_INVAL, "a failure record needs a cause");
    o = json_pack("{s:i, s:s, s:I, s:s, s:s, s:I, s:I, s:I, s:s}", "version", FTL_RECORD_VERSION, "record", "failure",
                  "wall_us", (json_int_t)wall_us, "job", rec->job, "host", rec->host, "attempt",
                  (json_int_t)rec->attempt, "world_size", (json_int_t)rec->world_size, "step", (json_int_t)rec->step,
                  "cause", rec->cause);
  } else if (rec->kind == FTL_CADENCE_REC_EXPOSURE) {
    if (!isfinite(rec->rank_hours) || rec->rank_hours < 0 || rec->rank_hours > MAX_RANK_HOURS)
      return ftl_diag_fail(d, FTL_ERR_INVAL, "rank_hours %g is not in [0, %g]", rec->rank_hours, MAX_RANK_HOURS);
    o = json_pack("{s:i, s:s, s:I, s:s, s:s, s:I, s:I, s:f}", "version", FTL_RECORD_VERSION, "record", "exposure",
                  "wall_us", (json_int_t)wall_us, "job", rec->job, "host", rec->host, "attempt",
                  (json_int_t)rec->attempt, "world_size", (json_int_t)rec->world_size, "rank_hours", rec->rank_hours);
  } else if (rec->kind == FTL_CADENCE_REC_RESTART) {
    if (!isfinite(rec->restart_s) || rec->restart_s < 0 || rec->restart_s > MAX_RESTART_S)
      return ftl_diag_fail(d, FTL_ERR_INVAL, "restart_s %g is not in [0, %g]", rec->restart_s, MAX_RESTART_S);
    o = json_pack("{s:i, s:s, s:I, s:s, s:s, s:I, s:I, s:I, s:f, s:s}", "version", FTL_RECORD_VERSION, "record",
                  "restart", "wall_us", (json_int_t)wall_us, "job", rec->job, "host", rec->host, "attempt",
                  (json_int_t)rec->attempt, "world_size", (json_int_t)rec->world_size, "step", (json_int_t)rec->step,
                  "restart_s", rec->restart_s, "cause", rec->cause);
  } else {
    return ftl_diag_fail(d, FTL_ERR_INVAL, "record kind %d is not failure, exposure or restart", (int)rec->kind);
  }
  if (!o) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "cannot encode a fleet ledger record");
    goto out;
  }
  /* Locked (other jobs append to the same ledger, and the lock lets a writer repair a line torn by
   * one that died) and fsynced: the record must survive what comes next. */
  const ftl_jsonl_opts opts = {.lock = true, .lock_timeout_ms = timeout_ms, .fsync = true};
  rc = ftl_jsonl_append(path, o, &opts, d);
out:
  json_decref(o);
  return rc;
}

/* ---- loading ledgers ----------------------------------------------------------------------- */

ftl_err ftl_cadence_load_ledger(ftl_cadence *c, const char *path, ftl_cadence_load_stats *stats, ftl_diag *d) {
  ftl_cadence_load_stats local;
  if (!stats) stats = &local;
  memset(stats, 0, sizeof *stats);
  if (!c || !path) return ftl_diag_fail(d, FTL_ERR_INVAL, "cadence: no controller or ledger path");
  char *data = NULL;
  size_t size = 0;
  ftl_err rc = ftl_jsonl_read(path, MAX_LEDGER_BYTES, LEDGER_LOCK_TIMEOUT_MS, &data, &size, d);
  if (rc) return rc;
  int64_t lineno = 0;
  size_t pos = 0;
  while (pos < size) {
    const char *line = data + pos;
    const char *nl = memchr(line, '\n', size - pos);
    size_t len = nl ? (size_t)(nl - line) : size - pos;
    pos += len + (nl ? 1 : 0);
    lineno++;
    size_t start = 0;
    while (start < len && (line[start] == ' ' || line[start] == '\t' || line[start] == '\r'))
      start++;
    if (start == len) continue;
    stats->lines++;
    ftl_cadence_record rec;
    ftl_diag pd = {{0}};
    ftl_err prc = nl ? ftl_cadence_parse_record(line, len, &rec, &pd) : FTL_ERR_CORRUPT;
    if (!nl && prc) ftl_fmt(pd.msg, sizeof pd.msg, "last line has no newline (a write in progress or torn)");
    if (prc) {
      stats->skipped++;
      FTL_LOG(FTL_LOG_WARN, "cadence", "%s:%lld: skipped ledger line: %s", path, (long long)lineno, pd.msg);
      if (!stats->first_problem[0] &&
          ftl_fmt(stats->first_problem, sizeof stats->first_problem, "%s:%lld: %s", path, (long long)lineno, pd.msg))
        stats->first_problem[sizeof stats->first_problem - 1] = '\0';
      continue;
    }
    if (rec.kind == FTL_CADENCE_REC_FAILURE && rec.cls != FTL_CADENCE_CAUSE_FAILURE) {
      if (rec.cls == FTL_CADENCE_CAUSE_UNKNOWN)
        FTL_LOG(FTL_LOG_WARN, "cadence", "%s:%lld: cause \"%s\" unknown to this version: not counted", path,
                (long long)lineno, rec.cause);
      stats->not_failures++;
      continue;
    }
    int fresh = cd_take_record(c, &rec);
    if (fresh < 0) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "cadence: out of memory reading %s", path);
      break;
    }
    if (!fresh)
      stats->duplicates++;
    else if (rec.kind == FTL_CADENCE_REC_EXPOSURE)
      stats->rank_hours += rec.rank_hours;
    else if (rec.kind == FTL_CADENCE_REC_RESTART)
      stats->restarts++;
    else
      stats->failures++;
  }
  ftl_free(data);
  cd_rederive(c);
  return rc;
}

ftl_err ftl_cadence_load_from_env(ftl_cadence *c, ftl_cadence_load_stats *run_stats,
                                  ftl_cadence_load_stats *fleet_stats, ftl_diag *d) {
  ftl_cadence_load_stats local_run, local_fleet;
  if (!run_stats) run_stats = &local_run;
  if (!fleet_stats) fleet_stats = &local_fleet;
  memset(run_stats, 0, sizeof *run_stats);
  memset(fleet_stats, 0, sizeof *fleet_stats);
  if (!c) return ftl_diag_fail(d, FTL_ERR_INVAL, "cadence: no controller");
  const char *run_dir = getenv("FTL_RUN_DIR");
  if (run_dir && *run_dir) {
    char path[PATH_MAX];
    if (ftl_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_FAILURES))
      return ftl_diag_fail(d, FTL_ERR_RANGE, "cadence: FTL_RUN_DIR is too long");
    ftl_err rc = ftl_cadence_load_ledger(c, path, run_stats, d);
    if (rc && rc != FTL_ERR_NOTFOUND) return rc;
  }
  const char *fleet = getenv("FTL_FLEET_LEDGER");
  if (fleet && *fleet) {
    ftl_err rc = ftl_cadence_load_ledger(c, fleet, fleet_stats, d);
    if (rc && rc != FTL_ERR_NOTFOUND) return rc;
  }
  return FTL_OK;
}
