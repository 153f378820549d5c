/* eval/verdict.c: the gate's verdict in and out (see verdict.h, docs/formats/verdict.md): the
 * atomic write through core's file seam, the strict reader, the summary line, and the package's
 * timing-free copy.
 *
 * Not here: the decision it records (eval/decide.c). */
#include "eval/verdict.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "core/jsonl.h"
#include "core/rundir.h"
#include "ftl/core.h"
#include "pipeline/sha256.h"
#include "pipeline/snapshot.h"

/* ---- the verdict ----------------------------------------------------------------------------- */

ftl_err ev_verdict_write(const char *run_dir, const json_t *verdict, ftl_diag *d) {
  char path[PATH_MAX];
  if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_VERDICT))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", run_dir);
  char *text = json_dumps(verdict, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  size_t n = strlen(text);
  text[n] = '\n';
  ftl_err rc = core_fs_write_atomic(path, text, n + 1, "verdict_write", -1, -1, d);
  free(text);
  return rc;
}

static int hex64(const json_t *v) { return json_is_string(v) && pl_sha256_is_hex(json_string_value(v)); }
static int num_or_null(const json_t *v) { return json_is_null(v) || json_is_number(v); }

ftl_err ev_verdict_parse(const char *data, size_t size, json_t **out, ftl_diag *d) {
  json_t *v = NULL;
  ftl_err rc = core_jsonl_load_object(data, size, FTL_VERDICT_MAX_BYTES, FTL_VERDICT_VERSION, "verdict: ", &v, d);
  if (rc) return rc;
#define BAD CORE_JSON_BAD
  if (!json_is_boolean(json_object_get(v, "passed"))) BAD("verdict: 'passed' is not a boolean");
  static const char *const strings[] = {"metric", "direction", "value_state", "reason", "started_at", "ended_at"};
  for (size_t i = 0; i < sizeof strings / sizeof *strings; i++)
    if (!json_is_string(json_object_get(v, strings[i]))) BAD("verdict: '%s' is not a string", strings[i]);
  const char *dir = json_string_value(json_object_get(v, "direction"));
  if (strcmp(dir, "higher") && strcmp(dir, "lower")) BAD("verdict: 'direction' is neither higher nor lower");
  if (!json_is_number(json_object_get(v, "threshold"))) BAD("verdict: 'threshold' is not a number");
  if (!num_or_null(json_object_get(v, "value"))) BAD("verdict: 'value' is neither a number nor null");
  if (!num_or_null(json_object_get(v, "min_gain"))) BAD("verdict: 'min_gain' is neither a number nor null");
  if (!num_or_null(json_object_get(v, "gain"))) BAD("verdict: 'gain' is neither a number nor null");
  const json_t *b = json_object_get(v, "baseline");
  if (!json_is_null(b)) {
    if (!json_is_object(b) || !json_is_string(json_object_get(b, "channel")) || !hex64(json_object_get(b, "version")) ||
        !num_or_null(json_object_get(b, "value")))
      BAD("verdict: 'baseline' is neither null nor {channel, version, value}");
  }
  const json_t *dg = json_object_get(v, "digests");
  if (!json_is_object(dg)) BAD("verdict: 'digests' is not an object");
  static const char *const digests[] = {"adapter", "eval_data", "gate_spec", "snapshot"};
  for (size_t i = 0; i < sizeof digests / sizeof *digests; i++)
    if (!hex64(json_object_get(dg, digests[i]))) BAD("verdict: 'digests.%s' is not 64 hex digits", digests[i]);
  const json_t *files = json_object_get(dg, "adapter_files");
  if (!json_is_array(files)) BAD("verdict: 'digests.adapter_files' is not an array");
  for (size_t i = 0; i < json_array_size(files); i++) {
    const json_t *f = json_array_get(files, i);
    const char *p = json_string_value(json_object_get(f, "path"));
    if (!p || !p[0] || strchr(p, '/') || !hex64(json_object_get(f, "sha256")) ||
        !json_is_integer(json_object_get(f, "size")))
      BAD("verdict: 'digests.adapter_files[%zu]' is not {path, size, sha256}", i);
  }
#undef BAD
  *out = v;
  v = NULL;
out:
  json_decref(v);
  return rc;
}

ftl_err ev_verdict_load(const char *run_dir, json_t **out, ftl_diag *d) {
  return pl_rundir_load_record(run_dir, FTL_RUNDIR_VERDICT, FTL_VERDICT_MAX_BYTES, ev_verdict_parse, 0, out, d);
}

void ev_verdict_summary(const json_t *v, char *out, size_t size) {
  int passed = json_is_true(json_object_get(v, "passed"));
  const char *metric = json_string_value(json_object_get(v, "metric"));
  const char *dir = json_string_value(json_object_get(v, "direction"));
  double thr = json_number_value(json_object_get(v, "threshold"));
  const json_t *val = json_object_get(v, "value");
  const char *op = !strcmp(dir ? dir : "", "higher") ? ">=" : "<=";
  if (!json_is_number(val)) {
    snprintf(out, size, "gate %s: %s is %s (threshold %s %g)", passed ? "passed" : "FAILED", metric,
             json_string_value(json_object_get(v, "value_state")), op, thr);
    return;
  }
  int n = snprintf(out, size, "gate %s: %s %.6g (threshold %s %g", passed ? "passed" : "FAILED", metric,
                   json_number_value(val), op, thr);
  const json_t *gain = json_object_get(v, "gain");
  if (n > 0 && (size_t)n < size && json_is_number(gain))
    n += snprintf(out + n, size - (size_t)n, "; gain %+.6g over %s, at least %g", json_number_value(gain),
                  json_string_value(json_object_get(json_object_get(v, "baseline"), "channel")),
                  json_number_value(json_object_get(v, "min_gain")));
  if (n > 0 && (size_t)n < size) {
    const char *reason = json_string_value(json_object_get(v, "reason"));
    snprintf(out + n, size - (size_t)n, ")%s%s", passed || !reason || !reason[0] ? "" : ": ", passed ? "" : reason);
  }
}

/* The package's copy: written next to the package (see verdict.h). */
ftl_err ev_verdict_write_package_copy(const json_t *verdict, const char *path, ftl_diag *d) {
  json_t *copy = json_deep_copy(verdict);
  if (!copy) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  json_object_set_new(copy, "started_at", json_string(""));
  json_object_set_new(copy, "ended_at", json_string(""));
  json_t *ev = json_object_get(copy, "evaluator");
  if (json_is_object(ev)) json_object_del(ev, "wall_s");
  char *text = json_dumps(copy, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
  json_decref(copy);
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  size_t n = strlen(text);
  text[n] = '\n';
  ftl_err rc = ftl_write_file_atomic(path, text, n + 1, d);
  free(text);
  return rc;
}
