/* core/failure_record.c: the failure ledger's record in and out (see failure_record.h,
 * docs/formats/failures.md, docs/formats/fleet-ledger.md): the encoder, the strict parser and the
 * lookups of the cause names. */
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
  }
  return NULL;
}

void core_failure_record_init(core_failure_record *r, core_record_kind kind) {
  memset(r, 0, sizeof *r);
  r->kind = kind;
  r->attempt = -1;
  r->step = -1;
  r->rank = -1;
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
    return ftl_diag_fail(d, FTL_ERR_INVAL, "record kind %d is not failure, exposure or restart", (int)r->kind);
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
  else
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "record \"%s\" is not \"failure\", \"exposure\" or \"restart\"", kind);
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
  return get_str(o, "message", out->message, sizeof out->message, 0, p, CORE_FR_MESSAGE, d);
}

/* Everything after the head: the common fields, then the kind's own. */
static ftl_err parse_body(json_t *o, core_failure_record *out, ftl_diag *d) {
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
  if (out->kind == CORE_REC_EXPOSURE) return get_bounded(o, "rank_hours", CORE_FR_MAX_RANK_HOURS, &out->rank_hours, d);
  /* A restart's cause is only said, not classified: a restart record never moves M. */
  if ((rc = get_str(o, "cause", out->cause, sizeof out->cause, 0, p, CORE_FR_CAUSE, d))) return rc;
  return get_bounded(o, "restart_s", CORE_FR_MAX_RESTART_S, &out->restart_s, d);
}

ftl_err core_failure_record_parse(const char *line, size_t len, core_failure_record *out, ftl_diag *d) {
  if (!line || !out) return ftl_diag_fail(d, FTL_ERR_INVAL, "no line or no record");
  core_failure_record_init(out, CORE_REC_FAILURE);
  if (len > CORE_FR_MAX_LINE_BYTES) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "line of %zu bytes is too long", len);
  json_error_t jerr;
  json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!o) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "not JSON: %s (column %d)", jerr.text, jerr.column);
  ftl_err rc = json_is_object(o) ? FTL_OK : ftl_diag_fail(d, FTL_ERR_CORRUPT, "not a JSON object");
  if (!rc) rc = parse_head(o, out, d);
  if (!rc) rc = parse_body(o, out, d);
  json_decref(o);
  return rc;
}
