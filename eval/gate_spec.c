/* eval/gate_spec.c: the gate spec, locked at submission (see gate_spec.h, docs/formats/snapshot.md):
 * the placeholders of eval.args; the canonical gate spec's shape and the comparison of two; the
 * gate spec of a job spec; the check of a run's snapshot against the registry's gate lock.
 *
 * Map: placeholders; the canonical gate spec (its shape, the comparison of two); the gate spec of
 * a job; the registry's gate lock.
 *
 * Not here: running the gate (eval/gate.c), the lock record itself (pipeline/gate_lock.c). */
#include "eval/gate_spec.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftl/core.h"
#include "pipeline/gate_lock.h"
#include "pipeline/registry.h"
#include "pipeline/snapshot.h"

/* ---- placeholders ------------------------------------------------------------------------- */

ftl_err ev_gate_expand(const char *arg, const ev_gate_placeholders *p, char **out, ftl_diag *d) {
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  if (!mem) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  ftl_err rc = FTL_OK;
  for (const char *s = arg; *s;) {
    const char *close = *s == '{' ? strchr(s, '}') : NULL;
    size_t n = close ? (size_t)(close - s - 1) : 0;
    int word = close && n > 0 && strspn(s + 1, "abcdefghijklmnopqrstuvwxyz_") == n;
    if (!word) {
      fputc(*s++, mem);
      continue;
    }
    const char *v = NULL;
    if (n == 7 && !strncmp(s + 1, "adapter", n))
      v = p->adapter;
    else if (n == 4 && !strncmp(s + 1, "data", n))
      v = p->data;
    else if (n == 7 && !strncmp(s + 1, "metrics", n))
      v = p->metrics;
    else if (n == 4 && !strncmp(s + 1, "base", n))
      v = p->base;
    else if (n == 7 && !strncmp(s + 1, "run_dir", n))
      v = p->run_dir;
    else {
      rc = ftl_diag_fail(d, FTL_ERR_SPEC,
                         "unknown placeholder {%.*s} (known: {adapter}, {data}, {metrics}, {base}, {run_dir})", (int)n,
                         s + 1);
      break;
    }
    fputs(v ? v : "", mem);
    s = close + 1;
  }
  fclose(mem);
  if (rc || !buf) {
    free(buf);
    return rc ? rc : ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  }
  *out = ftl_strdup(buf);
  free(buf);
  return *out ? FTL_OK : ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
}

/* ---- the canonical gate spec -------------------------------------------------------------- */

typedef enum { T_STRING, T_NUMBER, T_STRINGS, T_ENV, T_OPT_NUMBER, T_OPT_STRING } field_type;
typedef struct spec_field {
  const char *name;
  field_type type;
} spec_field;

static const spec_field eval_fields[] = {
    {"program", T_STRING},   {"args", T_STRINGS},        {"env", T_ENV},
    {"timeout_s", T_NUMBER}, {"metric", T_STRING},       {"direction", T_STRING},
    {"threshold", T_NUMBER}, {"min_gain", T_OPT_NUMBER}, {"baseline_channel", T_OPT_STRING},
    {"data", T_STRING},      {"base", T_OPT_STRING},
};
static const spec_field registry_fields[] = {{"path", T_STRING}, {"name", T_STRING}, {"channel", T_STRING}};

static ftl_err check_fields(const json_t *obj, const char *section, const spec_field *f, size_t n, ftl_diag *d) {
  if (!json_is_object(obj)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "gate spec: '%s' is not an object", section);
  if (json_object_size(obj) != n)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "gate spec: '%s' has %zu fields, expected %zu", section,
                         json_object_size(obj), n);
  for (size_t i = 0; i < n; i++) {
    const json_t *v = json_object_get(obj, f[i].name);
    int ok = 0;
    switch (f[i].type) {
    case T_STRING: ok = json_is_string(v); break;
    case T_NUMBER: ok = json_is_number(v) && isfinite(json_number_value(v)); break;
    case T_OPT_NUMBER: ok = json_is_null(v) || (json_is_number(v) && isfinite(json_number_value(v))); break;
    case T_OPT_STRING: ok = json_is_null(v) || json_is_string(v); break;
    case T_STRINGS:
      ok = json_is_array(v);
      for (size_t k = 0; ok && k < json_array_size(v); k++)
        ok = json_is_string(json_array_get(v, k));
      break;
    case T_ENV: {
      ok = json_is_object(v);
      const char *key;
      const json_t *val;
      if (ok) json_object_foreach((json_t *)(uintptr_t)v, key, val) ok = ok && json_is_string(val);
      break;
    }
    }
    if (!ok)
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "gate spec: '%s.%s' is missing or of the wrong type", section,
                           f[i].name);
  }
  return FTL_OK;
}

ftl_err ev_gate_spec_check(const json_t *gate, ftl_diag *d) {
  if (!json_is_object(gate)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "gate spec: not an object");
  const json_t *reg = json_object_get(gate, "registry");
  if (json_object_size(gate) != 2 || !json_object_get(gate, "eval") || !reg)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "gate spec: expected exactly 'eval' and 'registry'");
  ftl_err rc =
      check_fields(json_object_get(gate, "eval"), "eval", eval_fields, sizeof eval_fields / sizeof *eval_fields, d);
  if (rc) return rc;
  const char *dir = json_string_value(json_object_get(json_object_get(gate, "eval"), "direction"));
  if (strcmp(dir, "higher") && strcmp(dir, "lower"))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "gate spec: 'eval.direction' is neither higher nor lower");
  if (json_is_null(reg)) return FTL_OK;
  return check_fields(reg, "registry", registry_fields, sizeof registry_fields / sizeof *registry_fields, d);
}

static void value_text(const json_t *v, char *out, size_t size) {
  if (!v) {
    snprintf(out, size, "(absent)");
    return;
  }
  char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
  snprintf(out, size, "%.200s", text ? text : "?");
  free(text);
}

/* Depth-first, keys in sorted order: the first leaf that differs. */
static int first_difference(const json_t *a, const json_t *b, char *path, size_t size) {
  if (json_is_object(a) && json_is_object(b)) {
    /* The union of the keys, sorted. */
    json_t *keys = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)(uintptr_t)a, k, v) json_object_set_new(keys, k, json_true());
    json_object_foreach((json_t *)(uintptr_t)b, k, v) json_object_set_new(keys, k, json_true());
    size_t n = json_object_size(keys), i = 0;
    const char **sorted = ftl_calloc(n ? n : 1, sizeof *sorted);
    json_object_foreach(keys, k, v) if (sorted) sorted[i++] = k;
    int found = 0;
    for (size_t x = 0; sorted && x < n; x++)
      for (size_t y = x + 1; y < n; y++)
        if (strcmp(sorted[y], sorted[x]) < 0) {
          const char *t = sorted[x];
          sorted[x] = sorted[y];
          sorted[y] = t;
        }
    size_t base = strlen(path);
    for (size_t x = 0; sorted && x < n && !found; x++) {
      snprintf(path + base, size - base, "%s%s", base ? "." : "", sorted[x]);
      found = first_difference(json_object_get(a, sorted[x]), json_object_get(b, sorted[x]), path, size);
      if (!found) path[base] = '\0';
    }
    ftl_free(sorted);
    json_decref(keys);
    return found;
  }
  if (json_is_array(a) && json_is_array(b) && json_array_size(a) == json_array_size(b)) {
    size_t base = strlen(path);
    for (size_t i = 0; i < json_array_size(a); i++) {
      snprintf(path + base, size - base, "[%zu]", i);
      if (first_difference(json_array_get(a, i), json_array_get(b, i), path, size)) return 1;
      path[base] = '\0';
    }
    return 0;
  }
  if (!a && !b) return 0;
  return !(a && b && json_equal((json_t *)(uintptr_t)a, (json_t *)(uintptr_t)b));
}

ftl_err ev_gate_spec_compare(const json_t *locked, const json_t *given, char *field_out, size_t field_size,
                              ftl_diag *d) {
  char path[512] = "";
  if (!first_difference(locked, given, path, sizeof path)) return FTL_OK;
  /* Walk back to the values at that path for the message. */
  const json_t *a = locked, *b = given;
  char copy[512];
  snprintf(copy, sizeof copy, "%s", path);
  for (char *save = NULL, *tok = strtok_r(copy, ".", &save); tok; tok = strtok_r(NULL, ".", &save)) {
    char *br = strchr(tok, '[');
    if (br) *br = '\0';
    a = json_object_get(a, tok);
    b = json_object_get(b, tok);
    while (br) {
      size_t idx = strtoul(br + 1, NULL, 10);
      a = json_array_get(a, idx);
      b = json_array_get(b, idx);
      br = strchr(br + 1, '[');
    }
  }
  char va[256], vb[256];
  value_text(a, va, sizeof va);
  value_text(b, vb, sizeof vb);
  if (field_out) snprintf(field_out, field_size, "%s", path);
  return ftl_diag_fail(d, FTL_ERR_SPEC, "field '%s' differs from the gate locked at submission: locked %s, given %s",
                       path[0] ? path : "(the whole gate spec)", va, vb);
}

/* ---- the gate spec of a job ------------------------------------------------------------------ */

const char *ev_split_kv(const char *kv, char *name, size_t size) {
  const char *eq = strchr(kv, '=');
  size_t n = eq ? (size_t)(eq - kv) : strlen(kv);
  snprintf(name, size, "%.*s", (int)n, kv);
  return eq ? eq + 1 : "";
}

static int has_input(const ev_gate_fields *job, const char *name) {
  char n[256];
  for (size_t i = 0; i < job->inputs_count; i++) {
    ev_split_kv(job->inputs[i], n, sizeof n);
    if (!strcmp(n, name)) return 1;
  }
  return 0;
}

static ftl_err spec_err(const ev_gate_fields *job, ftl_diag *d, const char *field, const char *what) {
  return ftl_diag_fail(d, FTL_ERR_SPEC, "%s: field '%s': %s", job->spec_path ? job->spec_path : "job", field, what);
}

ftl_err ev_gate_spec_of(const ev_gate_fields *job, json_t **out, ftl_diag *d) {
  *out = NULL;
  if (!job->eval->program) {
    if (job->registry->present)
      return spec_err(job, d, "registry", "needs an eval: section (only a gated adapter is published)");
    return FTL_OK;
  }
  ftl_err rc = FTL_OK;
  json_t *gate = NULL, *args = json_array(), *env = json_object();
  if (!args || !env) goto oom;
  /* eval.data and eval.base name inputs, so the gate reads them through the snapshot. */
  if (!has_input(job, job->eval->data)) {
    char what[512];
    snprintf(what, sizeof what, "'%s' is not one of the job's inputs: (eval data must be snapshotted)", job->eval->data);
    rc = spec_err(job, d, "eval.data", what);
    goto out;
  }
  if (job->eval->base && !has_input(job, job->eval->base)) {
    char what[512];
    snprintf(what, sizeof what, "'%s' is not one of the job's inputs:", job->eval->base);
    rc = spec_err(job, d, "eval.base", what);
    goto out;
  }
  ev_gate_placeholders ph = {"a", "d", "m", "b", "r"};
  for (size_t i = 0; i < job->eval->args_count; i++) {
    char *x = NULL;
    ftl_diag inner;
    if (ev_gate_expand(job->eval->args[i], &ph, &x, &inner)) {
      char field[64];
      snprintf(field, sizeof field, "eval.args[%zu]", i);
      rc = spec_err(job, d, field, inner.msg);
      goto out;
    }
    ftl_free(x);
    json_array_append_new(args, json_string(job->eval->args[i]));
  }
  for (size_t i = 0; i < job->eval->env_count; i++) {
    char name[256];
    const char *v = ev_split_kv(job->eval->env[i], name, sizeof name);
    json_object_set_new(env, name, json_string(v));
  }
  const char *baseline = job->eval->baseline_channel;
  if (job->eval->has_min_gain && !job->registry->present) {
    rc = spec_err(job, d, "eval.min_gain", "needs a registry: section (the baseline is the adapter in a channel)");
    goto out;
  }
  if (job->eval->has_min_gain && !baseline) baseline = job->registry->channel ? job->registry->channel : "candidate";
  if (baseline && !job->eval->has_min_gain) {
    rc = spec_err(job, d, "eval.baseline_channel", "has no effect without eval.min_gain");
    goto out;
  }
  json_t *reg = json_null();
  if (job->registry->present) {
    const char *root = job->registry->path ? job->registry->path : pl_registry_root_from_env();
    if (!root) {
      rc = spec_err(job, d, "registry.path", "required (or set FTL_REGISTRY)");
      goto out;
    }
    char abs[PATH_MAX], cwd[PATH_MAX];
    if (root[0] == '/')
      snprintf(abs, sizeof abs, "%s", root);
    else if (!getcwd(cwd, sizeof cwd) || ftl_fmt(abs, sizeof abs, "%s/%s", cwd, root)) {
      rc = spec_err(job, d, "registry.path", "cannot be made absolute");
      goto out;
    }
    const char *name = job->registry->name ? job->registry->name : job->name;
    const char *channel = job->registry->channel ? job->registry->channel : "candidate";
    if (!pl_registry_name_ok(name)) {
      rc = spec_err(job, d, job->registry->name ? "registry.name" : "name",
                    "not a registry name (1-64 characters of A-Z a-z 0-9 . _ -, not starting with . or -)");
      goto out;
    }
    if (!pl_registry_channel_ok(channel) || (baseline && !pl_registry_channel_ok(baseline))) {
      rc = spec_err(job, d, pl_registry_channel_ok(channel) ? "eval.baseline_channel" : "registry.channel",
                    "not a channel name (1-64 characters of A-Z a-z 0-9 . _ -, not 64 hex digits)");
      goto out;
    }
    reg = json_pack("{s:s, s:s, s:s}", "path", abs, "name", name, "channel", channel);
  }
  gate = json_pack("{s:{s:s, s:O, s:O, s:f, s:s, s:s, s:f, s:o, s:o, s:s, s:o}, s:o}", "eval", "program",
                   job->eval->program, "args", args, "env", env, "timeout_s", (double)job->eval->timeout_ms / 1000.0,
                   "metric", job->eval->metric, "direction", job->eval->direction == EV_LOWER_PASSES ? "lower" : "higher",
                   "threshold", job->eval->threshold, "min_gain",
                   job->eval->has_min_gain ? json_real(job->eval->min_gain) : json_null(), "baseline_channel",
                   baseline ? json_string(baseline) : json_null(), "data", job->eval->data, "base",
                   job->eval->base ? json_string(job->eval->base) : json_null(), "registry", reg);
  if (!gate) goto oom;
  if ((rc = ev_gate_spec_check(gate, d))) goto out;
  *out = gate;
  gate = NULL;
  goto out;
oom:
  rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
out:
  json_decref(gate);
  json_decref(args);
  json_decref(env);
  return rc;
}

/* ---- the registry's gate lock ------------------------------------------------------------- */

static ftl_err lock_mismatch(ftl_diag *d, const char *where, const char *field, const char *locked, const char *now) {
  return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                       "the run's snapshot does not match the gate locked in the registry (%s): field '%s': locked "
                       "%.200s, the run has %.200s",
                       where, field, locked ? locked : "(none)", now ? now : "(none)");
}

static int str_eq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

ftl_err ev_gate_lock_check(const char *run_dir, const json_t *snap, json_t **lock_out, ftl_diag *d) {
  *lock_out = NULL;
  const json_t *gate = pl_snapshot_gate(snap);
  const json_t *reg = json_object_get(gate, "registry");
  if (!json_is_object(reg)) return FTL_OK;
  const char *run_id = pl_snapshot_run_id(snap);
  if (!run_id)
    return ftl_diag_fail(d, FTL_ERR_STATE,
                         "the snapshot has no run_id: the run was submitted by an ftl that did not lock its gate in "
                         "the registry; submit it again");
  json_t *lock = NULL;
  char where[PATH_MAX];
  ftl_err rc =
      pl_gate_lock_load(json_string_value(json_object_get(reg, "path")),
                         json_string_value(json_object_get(reg, "name")), run_id, &lock, where, sizeof where, d);
  if (rc) return rc;
  char field[256], now_dir[PATH_MAX];
  const char *rd = realpath(run_dir, now_dir) ? now_dir : run_dir;
#define SAME(f, a, b)                                                                                                  \
  do {                                                                                                                 \
    if (!str_eq((a), (b))) {                                                                                           \
      rc = lock_mismatch(d, where, (f), (a), (b));                                                                     \
      goto out;                                                                                                        \
    }                                                                                                                  \
  } while (0)
#define LS(k) json_string_value(json_object_get(lock, (k)))
  SAME("run_id", LS("run_id"), run_id);
  SAME("run_dir", LS("run_dir"), rd);
  SAME("job", LS("job"), json_string_value(json_object_get(snap, "job")));
  SAME("job_spec_hash", LS("job_spec_hash"), json_string_value(json_object_get(snap, "job_spec_hash")));
  SAME("created_at", LS("submitted_at"), json_string_value(json_object_get(snap, "created_at")));
  ftl_diag inner;
  if (ev_gate_spec_compare(json_object_get(lock, "gate"), gate, field, sizeof field, &inner)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "the run's snapshot does not match the gate locked in the registry (%s): %s",
                       where, inner.msg);
    goto out;
  }
  SAME("gate_sha256", LS("gate_sha256"), pl_snapshot_gate_sha256(snap));
  const json_t *le = json_object_get(lock, "evaluator"), *se = pl_snapshot_evaluator(snap);
  SAME("evaluator.path", json_string_value(json_object_get(le, "path")),
       json_string_value(json_object_get(se, "path")));
  SAME("evaluator.sha256", json_string_value(json_object_get(le, "sha256")),
       json_string_value(json_object_get(se, "sha256")));
  const json_t *ed = json_object_get(lock, "eval_data");
  SAME("eval_data.sha256", json_string_value(json_object_get(ed, "sha256")),
       pl_snapshot_input_sha256(snap, json_string_value(json_object_get(ed, "input"))));
  const json_t *lb = json_object_get(lock, "base");
  if (json_is_object(lb))
    SAME("base.sha256", json_string_value(json_object_get(lb, "sha256")),
         pl_snapshot_input_sha256(snap, json_string_value(json_object_get(lb, "input"))));
  const json_t *li = json_object_get(lock, "inputs"), *si = json_object_get(snap, "inputs");
  if (json_array_size(li) != json_array_size(si)) {
    char a[32], b[32];
    snprintf(a, sizeof a, "%zu inputs", json_array_size(li));
    snprintf(b, sizeof b, "%zu inputs", json_array_size(si));
    rc = lock_mismatch(d, where, "inputs", a, b);
    goto out;
  }
  for (size_t i = 0; i < json_array_size(li); i++) {
    const json_t *x = json_array_get(li, i), *y = json_array_get(si, i);
    static const char *const keys[] = {"name", "path", "sha256", "link"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
      const char *a = json_string_value(json_object_get(x, keys[k])),
                 *b = json_string_value(json_object_get(y, keys[k]));
      if (!a && !b) continue;
      snprintf(field, sizeof field, "inputs[%zu].%s (input '%.64s')", i, keys[k],
               json_string_value(json_object_get(x, "name")));
      SAME(field, a, b);
    }
  }
  SAME("snapshot_digest", LS("snapshot_digest"), pl_snapshot_digest(snap));
#undef LS
#undef SAME
  *lock_out = lock;
  lock = NULL;
out:
  json_decref(lock);
  return rc;
}
