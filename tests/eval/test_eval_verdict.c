/* tests/eval/test_eval_verdict.c: the verdict writer and reader (eval/gate.h), the comparison of
 * gate specs that names the differing field, and the placeholders of eval.args. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "eval/decide.h"
#include "eval/gate.h"
#include "eval/gate_spec.h"
#include "eval/verdict.h"
#include "ftl/core.h"
#include "ftl_test.h"

#define H64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static json_t *sample_verdict(int passed) {
  return json_pack("{s:i, s:s, s:s, s:s, s:f, s:f, s:s, s:b, s:s, s:n, s:n, s:n,"
                   " s:{s:s, s:[{s:s, s:i, s:s}], s:s, s:s, s:s}, s:s, s:s}",
                   "version", 1, "run_dir", "/runs/x", "metric", "exact_match", "direction", "higher", "threshold", 0.9,
                   "value", passed ? 0.998 : 0.5, "value_state", "ok", "passed", passed, "reason",
                   passed ? "" : "exact_match 0.5 is below the threshold 0.9", "min_gain", "baseline", "gain",
                   "digests", "adapter", H64, "adapter_files", "path", "adapter.json", "size", 10, "sha256", H64,
                   "eval_data", H64, "gate_spec", H64, "snapshot", H64, "started_at", "2026-12-01T10:00:00.000Z",
                   "ended_at", "2026-12-01T10:00:01.000Z");
}

static void verdict_bad(json_t *v, const char *why) {
  char *text = json_dumps(v, 0);
  json_t *out = NULL;
  ftl_diag d = {{0}};
  CHECK_INT_EQ(ev_verdict_parse(text, strlen(text), &out, &d), FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, why);
  free(text);
  json_decref(v);
}

static json_t *gate_spec(double threshold) {
  return json_pack("{s:{s:s, s:[s, s], s:{s:s}, s:f, s:s, s:s, s:f, s:n, s:n, s:s, s:s}, s:{s:s, s:s, s:s}}", "eval",
                   "program", "ftl-finetune-eval", "args", "--adapter", "{adapter}", "env", "OMP_NUM_THREADS", "1",
                   "timeout_s", 600.0, "metric", "exact_match", "direction", "higher", "threshold", threshold,
                   "min_gain", "baseline_channel", "data", "heldout", "base", "base", "registry", "path", "/reg",
                   "name", "finetune", "channel", "candidate");
}

int main(void) {
  ftl_diag d = {{0}};
  char dir[] = "/tmp/ftl-verdict-XXXXXX";
  CHECK(mkdtemp(dir));

  /* Round trip through RUNDIR/verdict.json. */
  json_t *v = sample_verdict(1), *back = NULL;
  CHECK_OK(ev_verdict_write(dir, v, &d), d.msg);
  CHECK_OK(ev_verdict_load(dir, &back, &d), d.msg);
  CHECK(json_equal(v, back));
  char line[512];
  ev_verdict_summary(back, line, sizeof line);
  CHECK_STR_CONTAINS(line, "gate passed: exact_match 0.998 (threshold >= 0.9");
  json_decref(back);
  json_decref(v);
  v = sample_verdict(0);
  ev_verdict_summary(v, line, sizeof line);
  CHECK_STR_CONTAINS(line, "gate FAILED: exact_match 0.5");
  CHECK_STR_CONTAINS(line, "below the threshold 0.9");
  json_object_set_new(v, "value", json_null());
  json_object_set_new(v, "value_state", json_string("not finite (NaN or infinite)"));
  ev_verdict_summary(v, line, sizeof line);
  CHECK_STR_CONTAINS(line, "exact_match is not finite");
  json_decref(v);

  /* The reader refuses what is not a verdict, naming the field. */
  v = sample_verdict(1);
  json_object_set_new(v, "version", json_integer(2));
  verdict_bad(v, "version 2 is not supported");
  v = sample_verdict(1);
  json_object_set_new(v, "passed", json_string("yes"));
  verdict_bad(v, "'passed'");
  v = sample_verdict(1);
  json_object_set_new(v, "direction", json_string("up"));
  verdict_bad(v, "'direction'");
  v = sample_verdict(1);
  json_object_set_new(json_object_get(v, "digests"), "gate_spec", json_string("abc"));
  verdict_bad(v, "'digests.gate_spec'");
  v = sample_verdict(1);
  json_array_append_new(json_object_get(json_object_get(v, "digests"), "adapter_files"),
                        json_pack("{s:s, s:i, s:s}", "path", "../x", "size", 1, "sha256", H64));
  verdict_bad(v, "adapter_files[1]");
  v = sample_verdict(1);
  json_object_set_new(v, "baseline", json_pack("{s:s}", "channel", "prod"));
  verdict_bad(v, "'baseline'");
  v = NULL;
  CHECK_INT_EQ(ev_verdict_parse("{\"a\":1,\"a\":1}", 13, &v, &d), FTL_ERR_CORRUPT);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/verdict.json", dir);
  unlink(path);
  CHECK_INT_EQ(ev_verdict_load(dir, &v, &d), FTL_ERR_NOTFOUND);
  rmdir(dir);

  /* Gate specs: equal, or the first differing field named with both values. */
  json_t *a = gate_spec(0.9), *b = gate_spec(0.9);
  char field[128] = "";
  CHECK_OK(ev_gate_spec_check(a, &d), d.msg);
  CHECK_OK(ev_gate_spec_compare(a, b, field, sizeof field, &d), d.msg);
  json_decref(b);
  b = gate_spec(0.95);
  CHECK_INT_EQ(ev_gate_spec_compare(a, b, field, sizeof field, &d), FTL_ERR_SPEC);
  CHECK_STR_EQ(field, "eval.threshold");
  CHECK_STR_CONTAINS(d.msg, "field 'eval.threshold'");
  CHECK_STR_CONTAINS(d.msg, "locked 0.9");
  CHECK_STR_CONTAINS(d.msg, "given 0.95");
  json_decref(b);
  b = gate_spec(0.9);
  json_object_set_new(json_object_get(b, "registry"), "channel", json_string("prod"));
  json_array_set_new(json_object_get(json_object_get(b, "eval"), "args"), 1, json_string("{data}"));
  CHECK_INT_EQ(ev_gate_spec_compare(a, b, field, sizeof field, &d), FTL_ERR_SPEC);
  CHECK_STR_EQ(field, "eval.args[1]"); /* depth first, keys sorted: eval before registry */
  json_decref(b);
  b = gate_spec(0.9);
  json_object_set_new(json_object_get(b, "eval"), "env", json_object());
  CHECK_INT_EQ(ev_gate_spec_compare(a, b, field, sizeof field, &d), FTL_ERR_SPEC);
  CHECK_STR_EQ(field, "eval.env.OMP_NUM_THREADS");
  CHECK_STR_CONTAINS(d.msg, "given (absent)");
  json_object_del(json_object_get(b, "eval"), "env");
  CHECK_INT_EQ(ev_gate_spec_check(b, &d), FTL_ERR_CORRUPT);
  json_decref(b);
  json_decref(a);

  /* Placeholders. */
  ev_gate_placeholders ph = {
      .adapter = "/r/final", .data = "/d/h.txt", .metrics = "/r/gate/m.json", .base = "/d/b.h5", .run_dir = "/r"};
  char *x = NULL;
  CHECK_OK(ev_gate_expand("--out={metrics}", &ph, &x, &d), d.msg);
  CHECK_STR_EQ(x, "--out=/r/gate/m.json");
  ftl_free(x);
  CHECK_OK(ev_gate_expand("{adapter}:{data}:{base}:{run_dir}:{}:{A}:{ x}:{", &ph, &x, &d), d.msg);
  CHECK_STR_EQ(x, "/r/final:/d/h.txt:/d/b.h5:/r:{}:{A}:{ x}:{");
  ftl_free(x);
  CHECK_INT_EQ(ev_gate_expand("{adaptor}", &ph, &x, &d), FTL_ERR_SPEC);
  CHECK_STR_CONTAINS(d.msg, "unknown placeholder {adaptor}");
  puts("ok");
  return 0;
}
