/* cadence/ledger.c: failure ledgers in and out (docs/formats/fleet-ledger.md,
 * docs/formats/failures.md): one line as the public ftl_cadence_record, through the one codec of
 * the record (core/failure_record.c); the append of a record to a fleet ledger shared by jobs (or
 * to a run's failures.jsonl: the launcher's restart records); the loading of whole ledgers into
 * a controller (ftl_cadence_load_ledger/_from_env), exposures' per-host shares included, and the
 * gang's hosts (FTL_GANG_HOSTS) it is given from the environment.
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

_Static_assert(sizeof(ftl_cadence_host_hours) == sizeof(core_fr_host) &&
                   offsetof(ftl_cadence_host_hours, rank_hours) == offsetof(core_fr_host, rank_hours) &&
                   sizeof(((ftl_cadence_host_hours *)0)->host) == sizeof(((core_fr_host *)0)->host),
               "the public per-host share is core's");
_Static_assert(FTL_CADENCE_MAX_RECORD_HOSTS == CORE_FR_MAX_HOSTS, "one bound on an exposure's hosts");

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
  memcpy(out->gpu, c->gpu, sizeof out->gpu);
  memcpy(out->gpu_name, c->gpu_name, sizeof out->gpu_name);
  out->gpu_index = c->gpu_index;
  memcpy(out->verdict, c->verdict, sizeof out->verdict);
  memcpy(out->reason, c->reason, sizeof out->reason);
  memcpy(out->addrs, c->addrs, sizeof out->addrs);
  out->n_hosts = c->n_hosts;
}

/* One line as the public record, and an exposure's per-host shares into hosts (may be NULL). */
static ftl_err parse_line(const char *line, size_t len, ftl_cadence_record *out, core_fr_host *hosts, ftl_diag *d) {
  core_failure_record c;
  ftl_err rc = core_failure_record_parse_hosts(line, len, &c, hosts, hosts ? CORE_FR_MAX_HOSTS : 0, d);
  from_core(&c, out);
  if (!rc && out->kind == FTL_CADENCE_REC_FAILURE) out->cls = ftl_cadence_classify(out->cause, out->step);
  return rc;
}

ftl_err ftl_cadence_parse_record(const char *line, size_t len, ftl_cadence_record *out, ftl_diag *d) {
  if (!line || !out) return ftl_diag_fail(d, FTL_ERR_INVAL, "no line or no record");
  return parse_line(line, len, out, NULL, d);
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
  memcpy(c.gpu, rec->gpu, sizeof c.gpu);
  memcpy(c.gpu_name, rec->gpu_name, sizeof c.gpu_name);
  memcpy(c.verdict, rec->verdict, sizeof c.verdict);
  memcpy(c.reason, rec->reason, sizeof c.reason);
  c.gpu[sizeof c.gpu - 1] = c.gpu_name[sizeof c.gpu_name - 1] = c.verdict[sizeof c.verdict - 1] = '\0';
  c.reason[sizeof c.reason - 1] = '\0';
  char addrs[sizeof rec->addrs + 1];
  memcpy(addrs, rec->addrs, sizeof rec->addrs);
  addrs[sizeof rec->addrs] = '\0';
  core_failure_record_set_addrs(&c, addrs);
  c.gpu_index = rec->gpu_index;
  c.hosts = (const core_fr_host *)(const void *)rec->hosts; /* the same layout (asserted above) */
  c.n_hosts = rec->n_hosts;
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
  core_fr_host *hosts = ftl_calloc(CORE_FR_MAX_HOSTS, sizeof *hosts);
  if (!hosts) return ftl_diag_fail(d, FTL_ERR_NOMEM, "cadence: out of memory reading %s", path);
  ftl_err rc = core_jsonl_read(path, MAX_LEDGER_BYTES, LEDGER_LOCK_TIMEOUT_MS, &data, &size, d);
  if (rc) {
    ftl_free(hosts);
    return rc;
  }
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
    ftl_err prc = nl ? parse_line(line, len, &rec, hosts, &pd) : FTL_ERR_CORRUPT;
    if (!nl && prc) ftl_fmt(pd.msg, sizeof pd.msg, "last line has no newline (a write in progress or torn)");
    if (prc) {
      stats->skipped++;
      FTL_LOG(FTL_LOG_WARN, "cadence", "%s:%lld: skipped ledger line: %s", path, (long long)lineno, pd.msg);
      if (!stats->first_problem[0] &&
          ftl_fmt(stats->first_problem, sizeof stats->first_problem, "%s:%lld: %s", path, (long long)lineno, pd.msg))
        stats->first_problem[sizeof stats->first_problem - 1] = '\0';
      continue;
    }
    if (rec.kind == FTL_CADENCE_REC_GPU_HEALTH) continue; /* a verdict, not a failure: the fleet's host history */
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
    if (!fresh) {
      stats->duplicates++;
    } else if (rec.kind == FTL_CADENCE_REC_EXPOSURE) {
      stats->rank_hours += rec.rank_hours;
      for (size_t i = 0; i < rec.n_hosts && i < CORE_FR_MAX_HOSTS && fresh > 0; i++)
        if (cd_take_host(c, hosts[i].host, 0, hosts[i].rank_hours) < 0) fresh = -1;
      if (fresh < 0) {
        rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "cadence: out of memory reading %s", path);
        break;
      }
    } else if (rec.kind == FTL_CADENCE_REC_RESTART) {
      stats->restarts++;
    } else {
      stats->failures++;
    }
  }
  ftl_free(data);
  ftl_free(hosts);
  cd_rederive(c);
  return rc;
}

/* ---- the gang's hosts --------------------------------------------------------------------- */

/* At most this many hosts in FTL_GANG_HOSTS (its bound, CORE_GANG_HOSTS_MAX bytes, holds fewer). */
#define MAX_GANG_HOSTS 8192

ftl_err ftl_cadence_parse_gang_hosts(const char *value, ftl_cadence_gang_host *hosts, size_t max, size_t *n_out,
                                     ftl_diag *d) {
  *n_out = 0;
  if (!value || !*value) return FTL_OK;
  const char *p = value;
  for (size_t i = 1; *p; i++) {
    size_t len = strcspn(p, ",");
    const char *colon = memchr(p, ':', len);
    int64_t ranks = 0;
    char num[24] = "";
    size_t name_len = colon ? (size_t)(colon - p) : 0, num_len = colon ? len - name_len - 1 : 0;
    if (num_len > 0 && num_len < sizeof num) memcpy(num, colon + 1, num_len);
    if (!colon || name_len == 0 || name_len >= sizeof hosts[0].host || ftl_parse_i64(num, 1, 1 << 24, &ranks))
      return ftl_diag_fail(d, FTL_ERR_INVAL, "entry %zu ('%.*s') is not host:ranks (a name of 1 to %zu bytes, "
                           "ranks from 1)", i, (int)(len < 80 ? len : 80), p, sizeof hosts[0].host - 1);
    if (*n_out == max) return ftl_diag_fail(d, FTL_ERR_INVAL, "more than %zu hosts", max);
    memcpy(hosts[*n_out].host, p, name_len);
    hosts[*n_out].host[name_len] = '\0';
    hosts[(*n_out)++].ranks = ranks;
    p += len;
    if (*p == ',') p++;
  }
  return FTL_OK;
}

/* The gang's hosts the launcher named: a malformed list only loses the per-host refinement, so it
 * is warned about and the pooled rate kept. Only out of memory is an error. */
static ftl_err gang_from_env(ftl_cadence *c, const char *value, ftl_diag *d) {
  if (!*value) return FTL_OK;
  ftl_cadence_gang_host *hosts = ftl_calloc(MAX_GANG_HOSTS, sizeof *hosts);
  if (!hosts) return ftl_diag_fail(d, FTL_ERR_NOMEM, "cadence: out of memory");
  size_t n = 0;
  ftl_diag pd = {{0}};
  ftl_err rc = ftl_cadence_parse_gang_hosts(value, hosts, MAX_GANG_HOSTS, &n, &pd);
  if (rc)
    FTL_LOG(FTL_LOG_WARN, "cadence", "FTL_GANG_HOSTS ignored (the pooled failure rate is used): %s", pd.msg);
  else
    rc = ftl_cadence_set_gang_hosts(c, hosts, n);
  ftl_free(hosts);
  return rc == FTL_ERR_NOMEM ? ftl_diag_fail(d, FTL_ERR_NOMEM, "cadence: out of memory") : FTL_OK;
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
  return gang_from_env(c, env.gang_hosts, d);
}
