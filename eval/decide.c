/* eval/decide.c: the gate's decision (see decide.h): the baseline from the registry, the
 * threshold and the gain, and the same decision re-derived from a verdict's recorded value.
 *
 * Not here: the verdict's format (eval/verdict.c), running the evaluator (eval/gate.c). */
#include "eval/decide.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "eval/verdict.h"
#include "ftl/core.h"
#include "pipeline/registry.h"
#include "pipeline/snapshot.h"

/* ---- the baseline ------------------------------------------------------------------------- */

ftl_err ev_gate_find_baseline(const json_t *gate, ev_gate_baseline *b, ftl_diag *d) {
  memset(b, 0, sizeof *b);
  const json_t *reg = json_object_get(gate, "registry");
  const json_t *ev = json_object_get(gate, "eval");
  const char *channel = json_string_value(json_object_get(ev, "baseline_channel"));
  const char *metric = json_string_value(json_object_get(ev, "metric"));
  if (!json_is_object(reg) || !channel)
    return ftl_diag_fail(d, FTL_ERR_SPEC, "eval.min_gain needs a registry: section and a baseline channel");
  pl_registry_ref ref = {.root = json_string_value(json_object_get(reg, "path"))};
  const char *name = json_string_value(json_object_get(reg, "name"));
  char spec[256], name_out[FTL_REGISTRY_NAME_MAX + 1], dir[PATH_MAX], vpath[PATH_MAX], ptr[PATH_MAX];
  snprintf(b->channel, sizeof b->channel, "%s", channel);
  snprintf(spec, sizeof spec, "%s@%s", name, channel);
  /* A registry root that is not there is an unmounted or mistyped file system, not "no
   * baseline": passing on the threshold alone there would skip min_gain silently. */
  struct stat st;
  int gone = !ref.root || stat(ref.root, &st) != 0;
  if (gone || !S_ISDIR(st.st_mode))
    return ftl_diag_fail(d, FTL_ERR_IO,
                         "the baseline %s: the registry %s is not there (%s); min_gain cannot be checked", spec,
                         ref.root ? ref.root : "(none)", gone ? strerror(errno) : "not a folder");
  /* Only an absent channel pointer is "no baseline" (the adapter's first publish). A pointer that
   * names a version that is gone is an error. */
  if (ftl_fmt(ptr, sizeof ptr, "%s/%s/channels/%s.json", ref.root, name, channel))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long under %s", ref.root);
  if (lstat(ptr, &st) != 0) {
    if (errno == ENOENT) return FTL_OK;
    return ftl_diag_fail(d, FTL_ERR_IO, "the baseline %s: %s: %s", spec, ptr, strerror(errno));
  }
  ftl_diag inner = {{0}};
  ftl_err rc = pl_registry_resolve(&ref, spec, name_out, b->version, &inner);
  if (rc)
    return ftl_diag_fail(d, rc == FTL_ERR_NOTFOUND ? FTL_ERR_CORRUPT : rc,
                         "the baseline %s in %s does not resolve (%s); min_gain cannot be checked against it", spec,
                         ref.root, inner.msg);
  if ((rc = pl_registry_adapter_dir(&ref, name_out, b->version, dir, sizeof dir, &inner)))
    return ftl_diag_fail(d, rc == FTL_ERR_NOTFOUND ? FTL_ERR_CORRUPT : rc, "the baseline %s (version %.12s): %s", spec,
                         b->version, inner.msg);
  char *data = NULL;
  size_t size = 0;
  json_t *v = NULL;
  if (ftl_fmt(vpath, sizeof vpath, "%s/verdict.json", dir))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
  if ((rc = core_fs_read_regular(vpath, FTL_VERDICT_MAX_BYTES, &data, &size, &inner)))
    return ftl_diag_fail(d, rc == FTL_ERR_NOTFOUND ? FTL_ERR_CORRUPT : rc, "the baseline %s: %s", spec, inner.msg);
  rc = ev_verdict_parse(data, size, &v, &inner);
  ftl_free(data);
  if (rc) return ftl_diag_fail(d, rc, "the baseline %s: its verdict.json: %s", spec, inner.msg);
  b->present = 1;
  const char *m = json_string_value(json_object_get(v, "metric"));
  const json_t *val = json_object_get(v, "value");
  if (strcmp(m, metric) == 0 && json_is_number(val) && isfinite(json_number_value(val))) {
    b->value = json_number_value(val);
    b->has_value = 1;
  }
  json_decref(v);
  return FTL_OK;
}

int ev_gate_decide(const json_t *gate, int value_ok, double value, const ev_gate_baseline *b, double *gain_out,
                    int *has_gain, char *reason, size_t reason_size) {
  const json_t *ev = json_object_get(gate, "eval");
  const char *metric = json_string_value(json_object_get(ev, "metric"));
  int higher = !strcmp(json_string_value(json_object_get(ev, "direction")), "higher");
  double threshold = json_number_value(json_object_get(ev, "threshold"));
  const json_t *min_gain = json_object_get(ev, "min_gain");
  *has_gain = 0;
  reason[0] = '\0';
  if (!value_ok) {
    snprintf(reason, reason_size, "metric '%.200s' has no finite value", metric);
    return 0;
  }
  int passed = higher ? value >= threshold : value <= threshold;
  if (!passed)
    snprintf(reason, reason_size, "%.200s %.6g is %s the threshold %g", metric, value, higher ? "below" : "above",
             threshold);
  if (!json_is_number(min_gain) || !b || !b->present) return passed;
  if (!b->has_value) {
    if (passed)
      snprintf(reason, reason_size, "the baseline in %.100s has no value of %.200s to compare with", b->channel,
               metric);
    return 0;
  }
  double gain = higher ? value - b->value : b->value - value;
  *gain_out = gain;
  *has_gain = 1;
  if (gain < json_number_value(min_gain)) {
    if (passed)
      snprintf(reason, reason_size, "gain %+.6g over the %.100s adapter (%.6g) is less than eval.min_gain %g", gain,
               b->channel, b->value, json_number_value(min_gain));
    return 0;
  }
  return passed;
}

/* ---- re-deriving a verdict ------------------------------------------------------------------- */

/* `ftl publish` trusts no verdict's `passed`: the decision again, from the recorded value. */
ftl_err ev_verdict_rederive(const json_t *gate, const json_t *verdict, ftl_diag *d) {
  const json_t *ev = json_object_get(gate, "eval");
  const char *metric = json_string_value(json_object_get(ev, "metric"));
  const char *vm = json_string_value(json_object_get(verdict, "metric"));
  if (!vm || strcmp(vm, metric))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the verdict's field 'metric' (%s) is not the locked gate's (%s)",
                         vm ? vm : "?", metric);
  const json_t *val = json_object_get(verdict, "value");
  int value_ok = json_is_number(val) && isfinite(json_number_value(val));
  double value = value_ok ? json_number_value(val) : 0;
  ev_gate_baseline b = {0};
  const json_t *vb = json_object_get(verdict, "baseline");
  if (value_ok && json_is_number(json_object_get(ev, "min_gain"))) {
    ftl_err rc = ev_gate_find_baseline(gate, &b, d);
    if (rc) return rc;
    const char *seen = json_string_value(json_object_get(vb, "version"));
    if (!!seen != !!b.present || (seen && strcmp(seen, b.version)))
      return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                           "the baseline channel %s points at %.12s now, the verdict was judged against %.12s; run "
                           "`ftl gate` again",
                           b.channel, b.present ? b.version : "nothing", seen ? seen : "nothing");
  }
  char reason[1024];
  double gain = 0;
  int has_gain = 0;
  int passed = ev_gate_decide(gate, value_ok, value, &b, &gain, &has_gain, reason, sizeof reason);
  if (!passed)
    return ftl_diag_fail(d, FTL_ERR_STATE,
                         "the verdict did not pass when re-derived from its value and the locked gate (%s); nothing "
                         "published",
                         reason);
  if (!json_is_true(json_object_get(verdict, "passed")))
    return ftl_diag_fail(d, FTL_ERR_STATE, "the verdict did not pass (%s); nothing published",
                         json_string_value(json_object_get(verdict, "reason")));
  return FTL_OK;
}
