/* tests/eval/test_eval_metrics.c: the metrics file's parser (eval/metrics.h): the accepted shape,
 * every refusal with a reason, and NaN/Infinity read as non-finite rather than as a broken file;
 * so are numbers that overflow a double (±1e309); a FIFO in place of the metrics file is refused
 * at once instead of hanging the reader. */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eval/metrics.h"
#include "ftl/core.h"
#include "ftl_test.h"

static ev_metrics *parse_ok(const char *text) {
  ev_metrics *m = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(ev_metrics_parse(text, strlen(text), &m, &d), d.msg);
  return m;
}

static void parse_bad(const char *text, const char *why) {
  ev_metrics *m = NULL;
  ftl_diag d = {{0}};
  ftl_err rc = ev_metrics_parse(text, strlen(text), &m, &d);
  if (rc != FTL_ERR_CORRUPT) FTL_TEST_FAIL_("'%s' parsed (rc %d), expected a refusal", text, (int)rc);
  CHECK(m == NULL);
  CHECK_STR_CONTAINS(d.msg, why);
}

int main(void) {
  double v = -1;
  ev_metrics *m = parse_ok("{\"version\": 1, \"metrics\": {\"exact_match\": 0.998, \"loss\": 4, \"note\": \"x\"},"
                            " \"evaluator\": {\"name\": \"ftl-finetune-eval\"}}");
  CHECK_INT_EQ(ev_metrics_get(m, "exact_match", &v), FTL_METRIC_OK);
  CHECK(fabs(v - 0.998) < 1e-12);
  CHECK_INT_EQ(ev_metrics_get(m, "loss", &v), FTL_METRIC_OK);
  CHECK(v == 4.0);
  CHECK_INT_EQ(ev_metrics_get(m, "note", &v), FTL_METRIC_NOT_NUMBER);
  CHECK_INT_EQ(ev_metrics_get(m, "accuracy", &v), FTL_METRIC_MISSING);
  ev_metrics_destroy(m);

  /* Python's json.dump writes these for non-finite floats: a failed gate, not an unreadable file. */
  m = parse_ok("{\"version\":1,\"metrics\":{\"a\":NaN,\"b\":Infinity,\"c\":-Infinity,\"d\":\"NaN inside\",\"NaN\":1}}");
  CHECK_INT_EQ(ev_metrics_get(m, "a", &v), FTL_METRIC_NONFINITE);
  CHECK_INT_EQ(ev_metrics_get(m, "b", &v), FTL_METRIC_NONFINITE);
  CHECK_INT_EQ(ev_metrics_get(m, "c", &v), FTL_METRIC_NONFINITE);
  CHECK_INT_EQ(ev_metrics_get(m, "d", &v), FTL_METRIC_NOT_NUMBER);
  CHECK_INT_EQ(ev_metrics_get(m, "NaN", &v), FTL_METRIC_OK); /* a key is a string, left alone */
  ev_metrics_destroy(m);
  m = parse_ok("{\"version\":1,\"metrics\":{}}");
  CHECK_INT_EQ(ev_metrics_get(m, "x", &v), FTL_METRIC_MISSING);
  ev_metrics_destroy(m);

  parse_bad("", "not JSON");
  parse_bad("[1]", "expected a JSON object");
  parse_bad("{\"metrics\":{}}", "'version'");
  parse_bad("{\"version\":2,\"metrics\":{}}", "version 2 is not supported");
  parse_bad("{\"version\":\"1\",\"metrics\":{}}", "'version'");
  parse_bad("{\"version\":1}", "'metrics'");
  parse_bad("{\"version\":1,\"metrics\":[1]}", "'metrics'");
  parse_bad("{\"version\":1,\"metrics\":{\"a\":1,\"a\":2}}", "duplicate");
  parse_bad("{\"version\":1,\"metrics\":{\"\":1}}", "1 to 128 characters");
  parse_bad("{\"version\":1,\"metrics\":{\"a\":NaNa}}", "not JSON");
  parse_bad("{\"version\":1,\"metrics\":{\"a\":1}} trailing", "not JSON");
  char nul[] = "{\"version\":1,\"metrics\":{}}";
  nul[5] = '\0';
  {
    ev_metrics *x = NULL;
    ftl_diag d = {{0}};
    CHECK_INT_EQ(ev_metrics_parse(nul, sizeof nul - 1, &x, &d), FTL_ERR_CORRUPT);
    CHECK_STR_CONTAINS(d.msg, "NUL");
  }

  /* The writer's output reads back. */
  char path[] = "/tmp/ftl-metrics-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  json_t *obj = json_pack("{s:f, s:i}", "exact_match", 0.5, "n", 3);
  ftl_diag d = {{0}};
  CHECK_OK(ev_metrics_write(path, obj, &d), d.msg);
  json_decref(obj);
  m = NULL;
  CHECK_OK(ev_metrics_load(path, &m, &d), d.msg);
  CHECK_INT_EQ(ev_metrics_get(m, "exact_match", &v), FTL_METRIC_OK);
  CHECK(v == 0.5);
  CHECK_INT_EQ(ev_metrics_get(m, "n", &v), FTL_METRIC_OK);
  ev_metrics_destroy(m);
  unlink(path);
  CHECK_INT_EQ(ev_metrics_load(path, &m, &d), FTL_ERR_NOTFOUND);

  /* Too large for a double: not finite, as Infinity is; jansson alone calls it "not JSON". */
  m = parse_ok("{\"version\":1,\"metrics\":{\"a\":1e309,\"b\":-1e309,\"c\":1e-400,\"d\":[2e400],\"e\":12}}");
  CHECK_INT_EQ(ev_metrics_get(m, "a", &v), FTL_METRIC_NONFINITE);
  CHECK_INT_EQ(ev_metrics_get(m, "b", &v), FTL_METRIC_NONFINITE);
  CHECK_INT_EQ(ev_metrics_get(m, "c", &v), FTL_METRIC_OK);
  CHECK(v == 0.0);
  CHECK_INT_EQ(ev_metrics_get(m, "d", &v), FTL_METRIC_NOT_NUMBER);
  CHECK_INT_EQ(ev_metrics_get(m, "e", &v), FTL_METRIC_OK);
  CHECK(v == 12.0);
  ev_metrics_destroy(m);

  /* A FIFO where the metrics file belongs: refused at once (opening it would wait for a writer). */
  CHECK(mkfifo(path, 0600) == 0);
  ftl_err frc = ev_metrics_load(path, &m, &d);
  CHECK(frc != FTL_OK);
  CHECK_STR_CONTAINS(d.msg, "not a regular file");
  unlink(path);
  puts("ok");
  return 0;
}
