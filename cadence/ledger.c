/* cadence/ledger.c: one ledger line in and out (docs/formats/fleet-ledger.md,
 * docs/formats/failures.md) as the public ftl_cadence_record, through the one codec of the record
 * (core/failure_record.c), and the append of a record to a fleet ledger shared by jobs (or to a
 * run's failures.jsonl: the launcher's restart records).
 *
 * Concurrency is core/jsonl.c's: a writer holds an exclusive flock while it appends one line with
 * a single write() to an O_APPEND descriptor and fsyncs it (and repairs a line torn by a writer
 * that crashed); a reader (cadence.c, through ftl_jsonl_read) holds a shared flock while it reads.
 *
 * Not here: what the records mean for the estimate (cadence.c). */
#include <jansson.h>
#include <string.h>

#include "core/failure_record.h"
#include "core/jsonl.h"
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
  const ftl_jsonl_opts opts = {.lock = true, .lock_timeout_ms = timeout_ms, .fsync = true};
  rc = ftl_jsonl_append(path, o, &opts, d);
  json_decref(o);
  return rc;
}
