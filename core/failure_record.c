/* core/failure_record.c: the failure ledger's record in and out (see failure_record.h,
 * docs/formats/failures.md, docs/formats/fleet-ledger.md): the encoder, the strict parser (the
 * fleet ledger's gpu_health records and per-host exposure included) and the lookups of the cause
 * names. */
#include "core/failure_record.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "core/failure_cause.h"
#include "core/jsonl.h"
#include "ftl/core.h"

static const char *const cause_names[] = {
#define NAME_(kind, name, cls) name,
    FTL_FAILURE_CAUSE_MAP(NAME_)
#undef NAME_
};
#define N_CAUSES ((int)(sizeof cause_names / sizeof *cause_names))

const char *core_failure_cause_name(int i) { return i >= 0 && i < N_CAUSES ? cause_names[i] : NULL; }

int core_failure_cause_index(const char *name) {
  for (int i = 0; name && i < N_CAUSES; i++)
    if (!strcmp(cause_names[i], name)) return i;
  return -1;
}

const char *core_record_kind_name(core_record_kind kind) {
  switch (kind) {
  case CORE_REC_FAILURE: return "failure";
  case CORE_REC_EXPOSURE: return "exposure";
  case CORE_REC_RESTART: return "restart";
  case CORE_REC_GPU_HEALTH: return "gpu_health";
  }
  return NULL;
}

int core_gpu_verdict_known(const char *verdict) {
  return verdict && (!strcmp(verdict, "healthy") || !strcmp(verdict, "degraded") || !strcmp(verdict, "failed"));
}

void core_failure_record_init(core_failure_record *r, core_record_kind kind) {
  memset(r, 0, sizeof *r);
  r->kind = kind;
  r->attempt = -1;
  r->step = -1;
  r->rank = -1;
  r->gpu_index = -1;
}

/* ---- encode ----------------------------------------------------------------------------------- */

/* Sets o[key] = v (stolen); a NULL v (out of memory) marks the object bad. */
static void put(json_t *o, const char *key, json_t *v, int *bad) {
  if (!v || json_object_set_new(o, key, v)) *bad = 1;
}

static ftl_err check_bounds(const core_failure_record *r, ftl_diag *d) {
  if (r->kind == CORE_REC_FAILURE && !r->cause[0])
    return ftl_diag_fail(d, FTL_ERR_INVAL, "a failure record needs a cause");
  if (r->kind == CORE_REC_EXPOSURE &&
      (!isfinite(r->rank_hours) || r->rank_hours < 0 || r->rank_hours > CORE_FR_MAX_RANK_HOURS))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "rank_hours %g is not in [0, %g]", r->rank_hours, CORE_FR_MAX_RANK_HOURS);
  if (r->kind == CORE_REC_RESTART &&
      (!isfinite(r->restart_s) || r->restart_s < 0 || r->restart_s > CORE_FR_MAX_RESTART_S))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "restart_s %g is not in [0, %g]", r->restart_s, CORE_FR_MAX_RESTART_S);
  if (!core_record_kind_name(r->kind))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "record kind %d is not failure, exposure, restart or gpu_health",
                         (int)r->kind);
  if (r->kind == CORE_REC_GPU_HEALTH && (!r->host[0] || !r->gpu[0] || !core_gpu_verdict_known(r->verdict)))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "a gpu_health record needs a host, a gpu and a verdict (healthy, degraded "
                         "or failed)");
  if (r->n_hosts > CORE_FR_MAX_HOSTS || (r->n_hosts > 0 && (!r->hosts || r->kind != CORE_REC_EXPOSURE)))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "%zu hosts: an exposure record has at most %d", r->n_hosts,
                         CORE_FR_MAX_HOSTS);
  for (size_t i = 0; i < r->n_hosts; i++)
    if (!r->hosts[i].host[0] || !memchr(r->hosts[i].host, '\0', sizeof r->hosts[i].host) ||
        !isfinite(r->hosts[i].rank_hours) || r->hosts[i].rank_hours < 0 ||
        r->hosts[i].rank_hours > CORE_FR_MAX_RANK_HOURS)
      return ftl_diag_fail(d, FTL_ERR_INVAL, "hosts[%zu]: no name, or rank_hours not in [0, %g]", i,
                           CORE_FR_MAX_RANK_HOURS);
  return FTL_OK;
}

/* The launcher's failure detail, each field whose bit is set. */
static void put_detail(json_t *o, const core_failure_record *r, int *bad) {
  if (r->present & CORE_FR_RANK) put(o, "rank", json_integer((json_int_t)r->rank), bad);
  if (r->present & CORE_FR_EXIT_CODE) put(o, "exit_code", json_integer((json_int_t)r->exit_code), bad);
  if (r->present & CORE_FR_SIGNAL) put(o, "signal", json_integer((json_int_t)r->signal), bad);
  if (r->present & CORE_FR_DETECT_LAG) put(o, "detect_lag_ms", json_real(r->detect_lag_ms), bad);
  if (r->present & CORE_FR_BAD_HOST) put(o, "bad_host", json_string(r->bad_host), bad);
  if (r->present & CORE_FR_MESSAGE) put(o, "message", json_string(r->message), bad);
  if (r->gpu[0]) put(o, "gpu", json_string(r->gpu), bad);
  if (r->addrs[0]) put(o, "addrs", json_string(r->addrs), bad);
}

/* An exposure's per-host breakdown, {"n01": 8.0, ...}, when it has one. */
static void put_hosts(json_t *o, const core_failure_record *r, int *bad) {
  if (r->n_hosts == 0) return;
  json_t *h = json_object();
  for (size_t i = 0; h && i < r->n_hosts; i++)
    if (json_object_set_new(h, r->hosts[i].host, json_real(r->hosts[i].rank_hours))) *bad = 1;
  put(o, "hosts", h, bad);
}

/* A gpu_health record's own fields. */
static void put_gpu(json_t *o, const core_failure_record *r, int *bad) {
  put(o, "gpu", json_string(r->gpu), bad);
  put(o, "gpu_name", json_string(r->gpu_name), bad);
  put(o, "gpu_index", json_integer((json_int_t)r->gpu_index), bad);
  put(o, "verdict", json_string(r->verdict), bad);
  put(o, "reason", json_string(r->reason), bad);
  if (r->addrs[0]) put(o, "addrs", json_string(r->addrs), bad);
}

ftl_err core_failure_record_encode(const core_failure_record *r, json_t **out, ftl_diag *d) {
  *out = NULL;
  ftl_err rc = check_bounds(r, d);
  if (rc) return rc;
  json_t *o = json_object();
  int bad = !o;
  if (o) {
    put(o, "version", json_integer(FTL_RECORD_VERSION), &bad);
    put(o, "record", json_string(core_record_kind_name(r->kind)), &bad);
    put(o, "wall_us", json_integer((json_int_t)r->wall_us), &bad);
    put(o, "job", json_string(r->job), &bad);
    put(o, "host", json_string(r->host), &bad);
    put(o, "attempt", json_integer((json_int_t)r->attempt), &bad);
    put(o, "world_size", json_integer((json_int_t)r->world_size), &bad);
    if (r->kind == CORE_REC_EXPOSURE) {
      put(o, "rank_hours", json_real(r->rank_hours), &bad);
      put_hosts(o, r, &bad);
    } else if (r->kind == CORE_REC_GPU_HEALTH) {
      put_gpu(o, r, &bad);
    } else {
      put(o, "step", json_integer((json_int_t)r->step), &bad);
      if (r->kind == CORE_REC_RESTART) put(o, "restart_s", json_real(r->restart_s), &bad);
      put(o, "cause", json_string(r->cause), &bad);
      if (r->kind == CORE_REC_FAILURE) put_detail(o, r, &bad);
    }
  }
  if (bad) {
    json_decref(o);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "cannot encode a %s record", core_record_kind_name(r->kind));
  }
  *out = o;
  return FTL_OK;
}

/* ---- fields by name --------------------------------------------------------------------------- */

json_t *core_failure_record_get(const core_failure_record *r, const char *key) {
  enum { T_INT, T_STR, T_REAL };
  static const struct {
    const char *key;
    unsigned bit;
    int type;
    size_t off;
  } fields[] = {
#define ROW_(bit, name, type, member) {name, CORE_FR_##bit, T_##type, offsetof(core_failure_record, member)},
      CORE_FR_FIELD_MAP(ROW_)
#undef ROW_
  };
  if (!strcmp(key, "rank_hours")) return r->kind == CORE_REC_EXPOSURE ? json_real(r->rank_hours) : NULL;
  if (!strcmp(key, "restart_s")) return r->kind == CORE_REC_RESTART ? json_real(r->restart_s) : NULL;
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
    if (strcmp(fields[i].key, key) || !(r->present & fields[i].bit)) continue;
    const char *at = (const char *)r + fields[i].off;
    if (fields[i].type == T_STR) return json_string(at);
    if (fields[i].type == T_REAL) return json_real(*(const double *)(const void *)at);
    return json_integer((json_int_t) * (const int64_t *)(const void *)at);
  }
  return NULL;
}

/* ---- parse ------------------------------------------------------------------------------------ */

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

/* An optional integer field: absent → def; present but not an integer → error; present → bit. */
static ftl_err get_int(json_t *o, const char *key, int64_t def, int64_t *out, unsigned *present, unsigned bit,
                       ftl_diag *d) {
  json_t *v = json_object_get(o, key);
  if (!v) {
    *out = def;
    return FTL_OK;
  }
  if (!json_is_integer(v)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"%s\" is not an integer", key);
  *out = (int64_t)json_integer_value(v);
  *present |= bit;
  return FTL_OK;
}

static ftl_err get_str(json_t *o, const char *key, char *dst, size_t size, int required, unsigned *present,
                       unsigned bit, ftl_diag *d) {
  json_t *v = json_object_get(o, key);
  dst[0] = '\0';
  if (!v) return required ? ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"%s\" is missing", key) : FTL_OK;
  if (!json_is_string(v)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"%s\" is not a string", key);
  copy_str(dst, size, json_string_value(v));
  *present |= bit;
  return FTL_OK;
}

/* A string that names something (a GPU's UUID, a verdict): cut, it would name something else, so
 * one too long for dst is refused. */
static ftl_err get_id(json_t *o, const char *key, char *dst, size_t size, int required, unsigned *present,
                      unsigned bit, ftl_diag *d) {
  json_t *v = json_object_get(o, key);
  if (v && json_is_string(v) && json_string_length(v) >= size)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"%s\" is longer than %zu bytes", key, size - 1);
  return get_str(o, key, dst, size, required, present, bit, d);
}

void core_failure_record_set_addrs(core_failure_record *r, const char *addrs) {
  size_t n = addrs ? strlen(addrs) : 0;
  if (n >= sizeof r->addrs) {
    n = sizeof r->addrs - 1;
    while (n > 0 && addrs[n] != ' ') n--;
  }
  memcpy(r->addrs, addrs ? addrs : "", n);
  r->addrs[n] = '\0';
}

/* "addrs": cut to fit at a whole address (half an address would name another host). */
static ftl_err get_addrs(json_t *o, core_failure_record *out, ftl_diag *d) {
  ftl_err rc = get_str(o, "addrs", out->addrs, sizeof out->addrs, 0, &out->present, CORE_FR_ADDRS, d);
  json_t *v = json_object_get(o, "addrs");
  if (!rc && v && json_string_length(v) >= sizeof out->addrs) {
    const char *last = strrchr(out->addrs, ' ');
    size_t keep = last ? (size_t)(last - out->addrs) : 0;
    if (json_string_value(v)[sizeof out->addrs - 1] == ' ') keep = sizeof out->addrs - 1; /* cut at a space */
    out->addrs[keep] = '\0';
  }
  return rc;
}

/* The object's version and kind. The run ledger's oldest lines have no "record": a failure. */
static ftl_err parse_head(json_t *o, core_failure_record *out, ftl_diag *d) {
  int64_t version = -1;
  unsigned ignored = 0;
  ftl_err rc = get_int(o, "version", -1, &version, &ignored, 0, d);
  if (rc) return rc;
  if (version == -1) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"version\" is missing");
  if (version != FTL_RECORD_VERSION)
    return ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "version %lld is not %d", (long long)version, FTL_RECORD_VERSION);
  char kind[32];
  if ((rc = get_str(o, "record", kind, sizeof kind, 0, &out->present, CORE_FR_RECORD, d))) return rc;
  if (kind[0] == '\0' || strcmp(kind, "failure") == 0)
    out->kind = CORE_REC_FAILURE;
  else if (strcmp(kind, "exposure") == 0)
    out->kind = CORE_REC_EXPOSURE;
  else if (strcmp(kind, "restart") == 0)
    out->kind = CORE_REC_RESTART;
  else if (strcmp(kind, "gpu_health") == 0)
    out->kind = CORE_REC_GPU_HEALTH;
  else
    return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                         "record \"%s\" is not \"failure\", \"exposure\", \"restart\" or \"gpu_health\"", kind);
  return FTL_OK;
}

/* The launcher's failure detail: every field optional, each of its type when present. */
static ftl_err parse_detail(json_t *o, core_failure_record *out, ftl_diag *d) {
  unsigned *p = &out->present;
  ftl_err rc;
  if ((rc = get_int(o, "rank", -1, &out->rank, p, CORE_FR_RANK, d))) return rc;
  if ((rc = get_int(o, "exit_code", 0, &out->exit_code, p, CORE_FR_EXIT_CODE, d))) return rc;
  if ((rc = get_int(o, "signal", 0, &out->signal, p, CORE_FR_SIGNAL, d))) return rc;
  json_t *lag = json_object_get(o, "detect_lag_ms");
  if (lag && !json_is_number(lag)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"detect_lag_ms\" is not a number");
  if (lag) {
    out->detect_lag_ms = json_number_value(lag);
    *p |= CORE_FR_DETECT_LAG;
  }
  if ((rc = get_str(o, "bad_host", out->bad_host, sizeof out->bad_host, 0, p, CORE_FR_BAD_HOST, d))) return rc;
  if ((rc = get_id(o, "gpu", out->gpu, sizeof out->gpu, 0, p, CORE_FR_GPU, d))) return rc;
  if ((rc = get_addrs(o, out, d))) return rc;
  return get_str(o, "message", out->message, sizeof out->message, 0, p, CORE_FR_MESSAGE, d);
}

/* A gpu_health record: the host, the GPU's identity and its verdict are required; the name and
 * the reason are text, cut to fit. */
static ftl_err parse_gpu(json_t *o, core_failure_record *out, ftl_diag *d) {
  unsigned *p = &out->present;
  ftl_err rc;
  if (!out->host[0]) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"host\" is missing (a gpu_health record)");
  if ((rc = get_id(o, "gpu", out->gpu, sizeof out->gpu, 1, p, CORE_FR_GPU, d))) return rc;
  if ((rc = get_id(o, "verdict", out->verdict, sizeof out->verdict, 1, p, CORE_FR_VERDICT, d))) return rc;
  if (!core_gpu_verdict_known(out->verdict))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"verdict\": \"%s\" is not healthy, degraded or failed",
                         out->verdict);
  if ((rc = get_str(o, "gpu_name", out->gpu_name, sizeof out->gpu_name, 0, p, CORE_FR_GPU_NAME, d))) return rc;
  if ((rc = get_int(o, "gpu_index", -1, &out->gpu_index, p, CORE_FR_GPU_INDEX, d))) return rc;
  if (out->gpu_index < -1 || out->gpu_index > 65535)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"gpu_index\": %lld is not in [0, 65535]",
                         (long long)out->gpu_index);
  if ((rc = get_addrs(o, out, d))) return rc;
  return get_str(o, "reason", out->reason, sizeof out->reason, 0, p, CORE_FR_REASON, d);
}

/* An exposure's optional "hosts": an object of at most CORE_FR_MAX_HOSTS host names (1 to 63
 * bytes) to rank-hours in [0, CORE_FR_MAX_RANK_HOURS], copied into hosts[0..max) when given. */
static ftl_err parse_hosts(json_t *o, core_failure_record *out, core_fr_host *hosts, size_t max, ftl_diag *d) {
  json_t *h = json_object_get(o, "hosts");
  if (!h) return FTL_OK;
  if (!json_is_object(h)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"hosts\" is not an object");
  size_t n = json_object_size(h);
  if (n > CORE_FR_MAX_HOSTS)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"hosts\" has %zu hosts, more than %d", n, CORE_FR_MAX_HOSTS);
  const char *name;
  json_t *v;
  size_t i = 0;
  json_object_foreach(h, name, v) {
    size_t len = strlen(name);
    if (len == 0 || len >= sizeof hosts[0].host)
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"hosts\": a host name of %zu bytes (1 to %zu)", len,
                           sizeof hosts[0].host - 1);
    double x = json_is_number(v) ? json_number_value(v) : -1;
    if (!isfinite(x) || x < 0 || x > CORE_FR_MAX_RANK_HOURS)
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "field \"hosts\": \"%.63s\" is not a number of rank-hours in [0, %g]",
                           name, CORE_FR_MAX_RANK_HOURS);
    if (hosts && i < max) {
      memcpy(hosts[i].host, name, len + 1);
      hosts[i].rank_hours = x;
    }
    i++;
  }
  out->n_hosts = n;
  out->hosts = hosts;
  out->present |= CORE_FR_HOSTS;
  return FTL_OK;
}

/* Everything after the head: the common fields, then the kind's own. */
static ftl_err parse_body(json_t *o, core_failure_record *out, core_fr_host *hosts, size_t max, ftl_diag *d) {
  unsigned *p = &out->present;
  ftl_err rc;
  if ((rc = get_str(o, "job", out->job, sizeof out->job, 0, p, CORE_FR_JOB, d))) return rc;
  if ((rc = get_str(o, "host", out->host, sizeof out->host, 0, p, CORE_FR_HOST, d))) return rc;
  if ((rc = get_int(o, "wall_us", 0, &out->wall_us, p, CORE_FR_WALL_US, d))) return rc;
  if ((rc = get_int(o, "attempt", -1, &out->attempt, p, CORE_FR_ATTEMPT, d))) return rc;
  if ((rc = get_int(o, "step", -1, &out->step, p, CORE_FR_STEP, d))) return rc;
  if ((rc = get_int(o, "world_size", 0, &out->world_size, p, CORE_FR_WORLD_SIZE, d))) return rc;
  if (out->world_size < 0)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "world_size %lld is negative", (long long)out->world_size);
  if (out->kind == CORE_REC_FAILURE) {
    if ((rc = get_str(o, "cause", out->cause, sizeof out->cause, 1, p, CORE_FR_CAUSE, d))) return rc;
    return parse_detail(o, out, d);
  }
  if (out->kind == CORE_REC_EXPOSURE) {
    if ((rc = get_bounded(o, "rank_hours", CORE_FR_MAX_RANK_HOURS, &out->rank_hours, d))) return rc;
    return parse_hosts(o, out, hosts, max, d);
  }
  if (out->kind == CORE_REC_GPU_HEALTH) return parse_gpu(o, out, d);
  /* A restart's cause is only said, not classified: a restart record never moves M. */
  if ((rc = get_str(o, "cause", out->cause, sizeof out->cause, 0, p, CORE_FR_CAUSE, d))) return rc;
  return get_bounded(o, "restart_s", CORE_FR_MAX_RESTART_S, &out->restart_s, d);
}

ftl_err core_failure_record_parse(const char *line, size_t len, core_failure_record *out, ftl_diag *d) {
  return core_failure_record_parse_hosts(line, len, out, NULL, 0, d);
}

ftl_err core_failure_record_parse_hosts(const char *line, size_t len, core_failure_record *out, core_fr_host *hosts,
                                        size_t max, ftl_diag *d) {
  if (!line || !out) return ftl_diag_fail(d, FTL_ERR_INVAL, "no line or no record");
  core_failure_record_init(out, CORE_REC_FAILURE);
  if (len > CORE_FR_MAX_LINE_BYTES) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "line of %zu bytes is too long", len);
  json_error_t jerr;
  json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!o) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "not JSON: %s (column %d)", jerr.text, jerr.column);
  ftl_err rc = json_is_object(o) ? FTL_OK : ftl_diag_fail(d, FTL_ERR_CORRUPT, "not a JSON object");
  if (!rc) rc = parse_head(o, out, d);
  if (!rc) rc = parse_body(o, out, hosts, max, d);
  json_decref(o);
  return rc;
}
