/* tests/core/test_core_failure_record.c: the one codec of the failure ledger's record
 * (core/failure_record.c): each kind round-trips through encode and parse with every field, every
 * cause name of core/failure_cause.h is found and survives the trip, the launcher's detail fields
 * are written only when asked for, the fleet ledger's gpu_health records and per-host exposure
 * round-trip, and malformed lines are refused with a message naming the field. */
#include <stdlib.h>
#include <string.h>

#include "core/failure_cause.h"
#include "core/failure_record.h"
#include "ftl_test.h"

/* Encodes r, dumps it as the appender does (compact), parses the line back into *back. */
static void round_trip(const core_failure_record *r, core_failure_record *back) {
  json_t *o = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(core_failure_record_encode(r, &o, &d), d.msg);
  char *text = json_dumps(o, JSON_COMPACT);
  CHECK(text != NULL);
  CHECK_OK(core_failure_record_parse(text, strlen(text), back, &d), d.msg);
  free(text);
  json_decref(o);
}

static void test_failure(void) {
  core_failure_record r, b;
  core_failure_record_init(&r, CORE_REC_FAILURE);
  r.present = CORE_FR_DETAIL;
  r.wall_us = 1764462600000000;
  r.attempt = 2;
  r.world_size = 64;
  r.step = 5210;
  r.rank = 17;
  r.exit_code = 3;
  r.signal = 9;
  r.detect_lag_ms = 12.5;
  snprintf(r.cause, sizeof r.cause, "signal");
  snprintf(r.job, sizeof r.job, "lora-7b");
  snprintf(r.host, sizeof r.host, "n17");
  snprintf(r.bad_host, sizeof r.bad_host, "n17");
  snprintf(r.message, sizeof r.message, "rank 17 on n17 was killed by signal 9");
  round_trip(&r, &b);
  CHECK_INT_EQ(b.kind, CORE_REC_FAILURE);
  CHECK(b.present & CORE_FR_RECORD);
  CHECK_INT_EQ(b.wall_us, r.wall_us);
  CHECK_INT_EQ(b.attempt, 2);
  CHECK_INT_EQ(b.world_size, 64);
  CHECK_INT_EQ(b.step, 5210);
  CHECK_INT_EQ(b.rank, 17);
  CHECK_INT_EQ(b.exit_code, 3);
  CHECK_INT_EQ(b.signal, 9);
  CHECK(b.detect_lag_ms == 12.5);
  CHECK_STR_EQ(b.cause, "signal");
  CHECK_STR_EQ(b.job, "lora-7b");
  CHECK_STR_EQ(b.host, "n17");
  CHECK_STR_EQ(b.bad_host, "n17");
  CHECK_STR_EQ(b.message, r.message);
  CHECK_INT_EQ(b.present & CORE_FR_DETAIL, CORE_FR_DETAIL);
  json_t *v = core_failure_record_get(&b, "rank");
  CHECK(json_integer_value(v) == 17);
  json_decref(v);
  v = core_failure_record_get(&b, "message");
  CHECK_STR_EQ(json_string_value(v), r.message);
  json_decref(v);
  v = core_failure_record_get(&b, "detect_lag_ms");
  CHECK(json_real_value(v) == 12.5);
  json_decref(v);
  CHECK(core_failure_record_get(&b, "nonesuch") == NULL);
  CHECK(core_failure_record_get(&b, "rank_hours") == NULL);
  /* Without detail (the fleet's failure records), none of the six fields is written. */
  r.present = 0;
  round_trip(&r, &b);
  CHECK_INT_EQ(b.present & CORE_FR_DETAIL, 0);
  CHECK_INT_EQ(b.rank, -1);
  CHECK(core_failure_record_get(&b, "message") == NULL);
}

static void test_exposure_and_restart(void) {
  core_failure_record r, b;
  core_failure_record_init(&r, CORE_REC_EXPOSURE);
  r.wall_us = 5;
  r.attempt = 0;
  r.world_size = 8;
  r.rank_hours = 1.25;
  snprintf(r.job, sizeof r.job, "j");
  snprintf(r.host, sizeof r.host, "h");
  round_trip(&r, &b);
  CHECK_INT_EQ(b.kind, CORE_REC_EXPOSURE);
  CHECK(b.rank_hours == 1.25);
  CHECK_INT_EQ(b.world_size, 8);
  CHECK_INT_EQ(b.step, -1);
  CHECK(!(b.present & CORE_FR_STEP));

  core_failure_record_init(&r, CORE_REC_RESTART);
  r.wall_us = 6;
  r.attempt = 1;
  r.world_size = 8;
  r.step = 10;
  r.restart_s = 0.477;
  snprintf(r.cause, sizeof r.cause, "node_lost");
  round_trip(&r, &b);
  CHECK_INT_EQ(b.kind, CORE_REC_RESTART);
  CHECK(b.restart_s == 0.477);
  CHECK_INT_EQ(b.step, 10);
  CHECK_STR_EQ(b.cause, "node_lost");
  CHECK_STR_EQ(core_record_kind_name(CORE_REC_RESTART), "restart");
}

/* The fleet ledger's records of issue 35: a GPU's verdict, a failure's GPU, an exposure by host. */
static void test_gpu_and_hosts(void) {
  core_failure_record r, b;
  core_failure_record_init(&r, CORE_REC_GPU_HEALTH);
  r.wall_us = 7;
  r.attempt = 2;
  r.gpu_index = 3;
  snprintf(r.job, sizeof r.job, "lora-7b");
  snprintf(r.host, sizeof r.host, "n17");
  snprintf(r.gpu, sizeof r.gpu, "GPU-abcd");
  snprintf(r.gpu_name, sizeof r.gpu_name, "NVIDIA H100 80GB HBM3");
  snprintf(r.verdict, sizeof r.verdict, "degraded");
  snprintf(r.reason, sizeof r.reason, "thermal throttling");
  round_trip(&r, &b);
  CHECK_INT_EQ(b.kind, CORE_REC_GPU_HEALTH);
  CHECK_STR_EQ(b.gpu, "GPU-abcd");
  CHECK_STR_EQ(b.verdict, "degraded");
  CHECK_STR_EQ(b.reason, "thermal throttling");
  CHECK_STR_EQ(b.gpu_name, "NVIDIA H100 80GB HBM3");
  CHECK_INT_EQ(b.gpu_index, 3);
  CHECK_STR_EQ(core_record_kind_name(CORE_REC_GPU_HEALTH), "gpu_health");
  json_t *v = core_failure_record_get(&b, "verdict");
  CHECK(v && !strcmp(json_string_value(v), "degraded"));
  json_decref(v);
  /* no verdict, or one not known: the encoder refuses it */
  json_t *o = NULL;
  ftl_diag d = {{0}};
  snprintf(r.verdict, sizeof r.verdict, "meh");
  CHECK_INT_EQ(core_failure_record_encode(&r, &o, &d), FTL_ERR_INVAL);
  CHECK_STR_CONTAINS(d.msg, "verdict");

  core_failure_record_init(&r, CORE_REC_FAILURE);
  snprintf(r.cause, sizeof r.cause, "gpu_failed");
  snprintf(r.gpu, sizeof r.gpu, "GPU-ffff");
  round_trip(&r, &b);
  CHECK_STR_EQ(b.gpu, "GPU-ffff");

  core_fr_host hosts[3] = {{"n01", 8.0}, {"n02", 4.5}, {"n03", 0}};
  core_failure_record_init(&r, CORE_REC_EXPOSURE);
  r.rank_hours = 12.5;
  r.hosts = hosts;
  r.n_hosts = 3;
  CHECK_OK(core_failure_record_encode(&r, &o, &d), d.msg);
  char *text = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  CHECK_STR_CONTAINS(text, "\"hosts\":{\"n01\":8.0,\"n02\":4.5,\"n03\":0.0}");
  core_fr_host back[CORE_FR_MAX_HOSTS];
  CHECK_OK(core_failure_record_parse_hosts(text, strlen(text), &b, back, CORE_FR_MAX_HOSTS, &d), d.msg);
  CHECK_INT_EQ((int)b.n_hosts, 3);
  CHECK(b.hosts == back && !strcmp(back[1].host, "n02") && back[1].rank_hours == 4.5);
  CHECK(b.present & CORE_FR_HOSTS);
  /* without a buffer the count is still known, the names are not kept */
  CHECK_OK(core_failure_record_parse(text, strlen(text), &b, &d), d.msg);
  CHECK_INT_EQ((int)b.n_hosts, 3);
  CHECK(b.hosts == NULL);
  free(text);
  hosts[1].rank_hours = -1;
  CHECK_INT_EQ(core_failure_record_encode(&r, &o, &d), FTL_ERR_INVAL);
  CHECK_STR_CONTAINS(d.msg, "hosts[1]");

  /* A host's addresses are cut at a whole address, on the way out and on the way in. */
  char many[400] = "";
  for (int i = 0; i < 30; i++)
    snprintf(many + strlen(many), sizeof many - strlen(many), "%s10.0.0.%d", i ? " " : "", 100 + i);
  core_failure_record_init(&r, CORE_REC_FAILURE);
  snprintf(r.cause, sizeof r.cause, "hang");
  core_failure_record_set_addrs(&r, many);
  size_t n = strlen(r.addrs);
  CHECK(n > 200 && n < sizeof r.addrs && !strncmp(many, r.addrs, n) && many[n] == ' ');
  round_trip(&r, &b);
  CHECK_STR_EQ(b.addrs, r.addrs);
  char line[600];
  snprintf(line, sizeof line, "{\"version\":1,\"cause\":\"hang\",\"addrs\":\"%s\"}", many);
  CHECK_OK(core_failure_record_parse(line, strlen(line), &b, &d), d.msg);
  CHECK_STR_EQ(b.addrs, r.addrs);
}

static void test_causes(void) {
  static const char *const names[] = {
#define NAME_(kind, name, cls) name,
      FTL_FAILURE_CAUSE_MAP(NAME_)
#undef NAME_
  };
  int n = (int)(sizeof names / sizeof *names);
  for (int i = 0; i < n; i++) {
    CHECK_STR_EQ(core_failure_cause_name(i), names[i]);
    CHECK_INT_EQ(core_failure_cause_index(names[i]), i);
    core_failure_record r, b;
    core_failure_record_init(&r, CORE_REC_FAILURE);
    snprintf(r.cause, sizeof r.cause, "%s", names[i]);
    round_trip(&r, &b);
    CHECK_STR_EQ(b.cause, names[i]);
  }
  CHECK(core_failure_cause_name(n) == NULL);
  CHECK(core_failure_cause_name(-1) == NULL);
  CHECK_INT_EQ(core_failure_cause_index("meteor"), -1);
  CHECK_INT_EQ(core_failure_cause_index(NULL), -1);
}

/* Each malformed line is refused, and the message names what is wrong. */
static void test_malformed(void) {
  static const struct {
    const char *line;
    ftl_err rc;
    const char *names;
  } bad[] = {
      {"{\"version\":1,\"record\":\"failure\"}", FTL_ERR_CORRUPT, "\"cause\""},
      {"{\"version\":1,\"record\":\"failure\",\"cause\":\"hang\",\"rank\":\"x\"}", FTL_ERR_CORRUPT, "\"rank\""},
      {"{\"version\":1,\"record\":\"failure\",\"cause\":7}", FTL_ERR_CORRUPT, "\"cause\""},
      {"{\"version\":1,\"record\":\"failure\",\"cause\":\"hang\",\"message\":1}", FTL_ERR_CORRUPT, "\"message\""},
      {"{\"version\":1,\"record\":\"failure\",\"cause\":\"hang\",\"detect_lag_ms\":\"1\"}", FTL_ERR_CORRUPT,
       "\"detect_lag_ms\""},
      {"{\"version\":1,\"record\":\"exposure\"}", FTL_ERR_CORRUPT, "\"rank_hours\""},
      {"{\"version\":1,\"record\":\"exposure\",\"rank_hours\":-1}", FTL_ERR_CORRUPT, "rank_hours"},
      {"{\"version\":1,\"record\":\"restart\",\"restart_s\":\"2\"}", FTL_ERR_CORRUPT, "\"restart_s\""},
      {"{\"version\":1,\"record\":\"failure\",\"cause\":\"hang\",\"attempt\":1.5}", FTL_ERR_CORRUPT, "\"attempt\""},
      {"{\"version\":1,\"record\":\"failure\",\"cause\":\"hang\",\"world_size\":-2}", FTL_ERR_CORRUPT, "world_size"},
      {"{\"version\":1,\"record\":\"meteor\"}", FTL_ERR_CORRUPT, "meteor"},
      {"{\"record\":\"failure\",\"cause\":\"hang\"}", FTL_ERR_CORRUPT, "\"version\""},
      {"{\"version\":2,\"record\":\"failure\",\"cause\":\"hang\"}", FTL_ERR_UNSUPPORTED, "version 2"},
      {"[1,2]", FTL_ERR_CORRUPT, "not a JSON object"},
      {"{\"version\":1,\"version\":1}", FTL_ERR_CORRUPT, "not JSON"},
      {"{\"version\":1,\"record\":\"gpu_health\",\"gpu\":\"GPU-a\",\"verdict\":\"failed\"}", FTL_ERR_CORRUPT,
       "\"host\""},
      {"{\"version\":1,\"record\":\"gpu_health\",\"host\":\"n1\",\"verdict\":\"failed\"}", FTL_ERR_CORRUPT,
       "\"gpu\""},
      {"{\"version\":1,\"record\":\"gpu_health\",\"host\":\"n1\",\"gpu\":\"GPU-a\"}", FTL_ERR_CORRUPT,
       "\"verdict\""},
      {"{\"version\":1,\"record\":\"gpu_health\",\"host\":\"n1\",\"gpu\":\"GPU-a\",\"verdict\":\"sad\"}",
       FTL_ERR_CORRUPT, "sad"},
      {"{\"version\":1,\"record\":\"gpu_health\",\"host\":\"n1\",\"gpu\":\"GPU-a\",\"verdict\":\"failed\","
       "\"gpu_index\":-7}",
       FTL_ERR_CORRUPT, "gpu_index"},
      {"{\"version\":1,\"record\":\"gpu_health\",\"host\":\"n1\",\"gpu\":\"GPU-"
       "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789\","
       "\"verdict\":\"failed\"}",
       FTL_ERR_CORRUPT, "\"gpu\" is longer"},
      {"{\"version\":1,\"record\":\"failure\",\"cause\":\"gpu_failed\",\"gpu\":3}", FTL_ERR_CORRUPT, "\"gpu\""},
      {"{\"version\":1,\"record\":\"exposure\",\"rank_hours\":1,\"hosts\":[1]}", FTL_ERR_CORRUPT, "\"hosts\""},
      {"{\"version\":1,\"record\":\"exposure\",\"rank_hours\":1,\"hosts\":{\"n1\":\"x\"}}", FTL_ERR_CORRUPT,
       "\"n1\""},
      {"{\"version\":1,\"record\":\"exposure\",\"rank_hours\":1,\"hosts\":{\"n1\":-2}}", FTL_ERR_CORRUPT,
       "rank-hours"},
      {"{\"version\":1,\"record\":\"exposure\",\"rank_hours\":1,\"hosts\":{\"\":2}}", FTL_ERR_CORRUPT,
       "host name of 0 bytes"},
      {"{\"version\":1,\"record\":\"exposure\",\"rank_hours\":1,\"hosts\":{\"n1\":2,\"n1\":3}}", FTL_ERR_CORRUPT,
       "not JSON"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    core_failure_record b;
    ftl_diag d = {{0}};
    ftl_err rc = core_failure_record_parse(bad[i].line, strlen(bad[i].line), &b, &d);
    if (rc != bad[i].rc) fprintf(stderr, "line %s: %s\n", bad[i].line, d.msg);
    CHECK_INT_EQ(rc, bad[i].rc);
    CHECK_STR_CONTAINS(d.msg, bad[i].names);
  }
  /* The encoder refuses what the parser would. */
  core_failure_record r;
  json_t *o = NULL;
  ftl_diag d = {{0}};
  core_failure_record_init(&r, CORE_REC_FAILURE);
  CHECK_INT_EQ(core_failure_record_encode(&r, &o, &d), FTL_ERR_INVAL);
  CHECK_STR_CONTAINS(d.msg, "cause");
  core_failure_record_init(&r, CORE_REC_RESTART);
  r.restart_s = -1;
  CHECK_INT_EQ(core_failure_record_encode(&r, &o, &d), FTL_ERR_INVAL);
  CHECK_STR_CONTAINS(d.msg, "restart_s");
  CHECK(o == NULL);
  /* A line without "record" is a failure (the run ledger's oldest lines). */
  const char *old = "{\"version\":1,\"cause\":\"hang\",\"step\":3}";
  core_failure_record b;
  CHECK_OK(core_failure_record_parse(old, strlen(old), &b, &d), d.msg);
  CHECK_INT_EQ(b.kind, CORE_REC_FAILURE);
  CHECK(!(b.present & CORE_FR_RECORD));
}

/* More than CORE_FR_MAX_HOSTS hosts in one exposure is refused, naming the field. */
static void test_too_many_hosts(void) {
  char *line = malloc(65536);
  CHECK(line != NULL);
  size_t used = (size_t)snprintf(line, 65536, "{\"version\":1,\"record\":\"exposure\",\"rank_hours\":1,\"hosts\":{");
  for (int i = 0; i <= CORE_FR_MAX_HOSTS; i++)
    used += (size_t)snprintf(line + used, 65536 - used, "%s\"h%d\":1", i ? "," : "", i);
  used += (size_t)snprintf(line + used, 65536 - used, "}}");
  core_failure_record b;
  ftl_diag d = {{0}};
  CHECK_INT_EQ(core_failure_record_parse(line, used, &b, &d), FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "more than 256");
  free(line);
}

int main(void) {
  test_failure();
  test_exposure_and_restart();
  test_causes();
  test_gpu_and_hosts();
  test_malformed();
  test_too_many_hosts();
  return 0;
}
