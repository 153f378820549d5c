/* cadence/ledger.c: failure ledgers in and out (docs/formats/fleet-ledger.md,
 * docs/formats/failures.md): one line as the public ftl_cadence_record, through the one codec of
 * the record (core/failure_record.c); the append of a record to a fleet ledger shared by jobs (or
 * to a run's failures.jsonl: the launcher's restart records); and the loading of whole ledgers into
 * a controller (ftl_cadence_load_ledger/_from_env).
 *
 * Concurrency is core/jsonl.c's: a writer holds an exclusive flock while it appends one line with
 * a single write() to an O_APPEND descriptor and fsyncs it (and repairs a line torn by a writer
 * that crashed); a reader (the loading below, through core_jsonl_read) holds a shared flock while it
 * reads.
 *
 * Not here: what the records mean for the estimate (cadence.c, reached through
 * cadence/controller.h: this file calls the controller, the controller never calls this file). */
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cadence/controller.h"
#include "core/failure_record.h"
#include "core/jsonl.h"
#include "core/launch_env.h"
#include "core/rundir.h"
#include "ftl/cadence.h"
#include "ftl/core.h"

/* The public record and core's are the same fields; core's also carries the launcher's detail,
 * which the cadence does not need. */
static void from_core(const core_failure_record *c, ftl_cadence_record *out) {
  memset(out, 0, sizeof *out);
  out->kind = (ftl_cadence_record_kind)c->kind;
  memcpy(out->cause, c->cause, sizeof out->cause);
  memcpy(out->job, c->job, sizeof out->job);
  memcpy(out->host, c->host, sizeof out->host);
  out->wall_us = c->wall_us;
  out->attempt = c->attempt;
  out->step = c->step;
  out->world_size = c->world_size;
  out->rank_hours = c->rank_hours;
  out->restart_s = c->restart_s;
}

ftl_err ftl_cadence_parse_record(const char *line, size_t len, ftl_cadence_record *out, ftl_diag *d) {
  if (!line || !out) return ftl_diag_fail(d, FTL_ERR_INVAL, "no line or no record");
  core_failure_record c;
  ftl_err rc = core_failure_record_parse(line, len, &c, d);
  from_core(&c, out);
  if (!rc && out->kind == FTL_CADENCE_REC_FAILURE) out->cls = ftl_cadence_classify(out->cause, out->step);
  return rc;
}

ftl_err ftl_cadence_fleet_append(const char *path, const ftl_cadence_record *rec, int64_t timeout_ms, ftl_diag *d) {
  if (!path || !rec) return ftl_diag_fail(d, FTL_ERR_INVAL, "no fleet ledger path or record");
  core_failure_record c;
  core_failure_record_init(&c, (core_record_kind)rec->kind);
  c.wall_us = rec->wall_us ? rec->wall_us : ftl_wall_us();
  memcpy(c.cause, rec->cause, sizeof c.cause);
  memcpy(c.job, rec->job, sizeof c.job);
  memcpy(c.host, rec->host, sizeof c.host);
  c.cause[sizeof c.cause - 1] = c.job[sizeof c.job - 1] = c.host[sizeof c.host - 1] = '\0';
  c.attempt = rec->attempt;
  c.step = rec->step;
  c.world_size = rec->world_size;
  c.rank_hours = rec->rank_hours;
  c.restart_s = rec->restart_s;
  json_t *o = NULL;
  ftl_err rc = core_failure_record_encode(&c, &o, d);
  if (rc) return rc;
  /* Locked (other jobs append to the same ledger, and the lock lets a writer repair a line torn by
   * one that died) and fsynced: the record must survive what comes next. */
  const core_jsonl_opts opts = {.lock = true, .lock_timeout_ms = timeout_ms, .fsync = true};
  rc = core_jsonl_append(path, o, &opts, d);
  json_decref(o);
  return rc;
}

/* A whole ledger read at once: 256 MiB is about a million records. */
#define MAX_LEDGER_BYTES ((size_t)256 << 20)
#define LEDGER_LOCK_TIMEOUT_MS 10000

/* ---- loading ledgers ----------------------------------------------------------------------- */

ftl_err ftl_cadence_load_ledger(ftl_cadence *c, const char *path, ftl_cadence_load_stats *stats, ftl_diag *d) {
  ftl_cadence_load_stats local;
  if (!stats) stats = &local;
  memset(stats, 0, sizeof *stats);
  if (!c || !path) return ftl_diag_fail(d, FTL_ERR_INVAL, "cadence: no controller or ledger path");
  char *data = NULL;
  size_t size = 0;
  ftl_err rc = core_jsonl_read(path, MAX_LEDGER_BYTES, LEDGER_LOCK_TIMEOUT_MS, &data, &size, d);
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
  /* The launch record (core/launch_env.h): FTL_RUN_DIR and FTL_FLEET_LEDGER, as ftl run sets them. */
  core_launch_env env;
  ftl_err erc = core_launch_env_read(&env, d);
  if (erc) return erc;
  const char *run_dir = env.run_dir;
  if (*run_dir) {
    char path[PATH_MAX];
    if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_FAILURES))
      return ftl_diag_fail(d, FTL_ERR_RANGE, "cadence: FTL_RUN_DIR is too long");
    ftl_err rc = ftl_cadence_load_ledger(c, path, run_stats, d);
    if (rc && rc != FTL_ERR_NOTFOUND) return rc;
  }
  const char *fleet = env.fleet_ledger;
  if (*fleet) {
    ftl_err rc = ftl_cadence_load_ledger(c, fleet, fleet_stats, d);
    if (rc && rc != FTL_ERR_NOTFOUND) return rc;
  }
  return FTL_OK;
}
