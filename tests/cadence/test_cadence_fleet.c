/* tests/cadence/test_cadence_fleet.c: the fleet's per-host history (cadence/fleet.c) and the
 * cadence's per-host rates (cadence/hostrate.c): a ledger of mixed records summarised per host
 * (standings bad / degraded / ok with their reasons, the window, the order, skipped lines named by
 * PATH:LINE, a torn last line, a missing file, a folder), the gpu_health record and an exposure's
 * per-host shares appended and read back, FTL_GANG_HOSTS parsed, and a gang on a host with a bad
 * history getting a shorter interval than the same gang on clean hosts, while hosts without a
 * history decide exactly as the pooled rate does. */
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftl/cadence.h"
#include "ftl/core.h"
#include "ftl_test.h"

static char dir[256];

static void path_in(char *buf, size_t size, const char *name) {
  CHECK_OK(ftl_fmt(buf, size, "%s/%s", dir, name), "path");
}

#define HOUR_US 3600000000LL
#define NOW_US (1764460800000000LL + 30 * 24 * HOUR_US)
#define WEEK_S (7 * 86400.0)

/* Lines of a fleet ledger, each with its wall_us as hours before NOW_US. */
static char *ledger_text(void) {
  static const struct {
    int hours_ago;
    const char *body;
  } lines[] = {
      {30, "\"record\":\"exposure\",\"job\":\"lora-7b\",\"attempt\":0,\"world_size\":24,\"rank_hours\":24,"
           "\"hosts\":{\"n01\":8,\"n17\":8,\"n05\":8}"},
      {2, "\"record\":\"gpu_health\",\"job\":\"lora-7b\",\"attempt\":0,\"host\":\"n17\",\"gpu\":\"GPU-abcd\","
          "\"gpu_name\":\"NVIDIA H100\",\"gpu_index\":3,\"verdict\":\"failed\",\"reason\":\"row remapping failed\""},
      {2, "\"record\":\"failure\",\"job\":\"lora-7b\",\"attempt\":0,\"host\":\"n17\",\"step\":50,"
          "\"cause\":\"gpu_failed\",\"gpu\":\"GPU-abcd\""},
      {5, "\"record\":\"gpu_health\",\"job\":\"lora-7b\",\"host\":\"n05\",\"gpu\":\"GPU-x\",\"verdict\":\"degraded\","
          "\"reason\":\"thermal throttling\""},
      {4, "\"record\":\"gpu_health\",\"job\":\"lora-7b\",\"host\":\"n05\",\"gpu\":\"GPU-y\",\"verdict\":\"degraded\","
          "\"reason\":\"PCIe replays\""},
      {3, "\"record\":\"gpu_health\",\"job\":\"lora-7b\",\"host\":\"n05\",\"gpu\":\"GPU-y\",\"verdict\":\"healthy\","
          "\"reason\":\"healthy\""},
      {6, "\"record\":\"gpu_health\",\"job\":\"j2\",\"host\":\"n06\",\"gpu\":\"GPU-z\",\"verdict\":\"degraded\","
          "\"reason\":\"NVLink errors\""},
      {1, "\"record\":\"gpu_health\",\"job\":\"j2\",\"host\":\"n06\",\"gpu\":\"GPU-z\",\"verdict\":\"healthy\","
          "\"reason\":\"healthy\""},
      {20, "\"record\":\"failure\",\"job\":\"j2\",\"host\":\"n08\",\"step\":9,\"cause\":\"node_lost\""},
      {10, "\"record\":\"failure\",\"job\":\"j3\",\"host\":\"n08\",\"step\":9,\"cause\":\"hang\","
           "\"addrs\":\"10.0.0.8 10.1.0.8\""},
      {10, "\"record\":\"failure\",\"job\":\"j3\",\"host\":\"n09\",\"step\":9,\"cause\":\"exit_code\""},
      {9, "\"record\":\"failure\",\"job\":\"j3\",\"host\":\"n09\",\"step\":9,\"cause\":\"exit_code\""},
      {9, "\"record\":\"failure\",\"job\":\"j3\",\"host\":\"n11\",\"step\":-1,\"cause\":\"signal\""},
      {24 * 8, "\"record\":\"failure\",\"job\":\"old\",\"host\":\"n10\",\"step\":9,\"cause\":\"gpu_failed\""},
  };
  size_t cap = 16384, used = 0;
  char *text = malloc(cap);
  CHECK(text != NULL);
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    used += (size_t)snprintf(text + used, cap - used, "{\"version\":1,\"wall_us\":%lld,%s}\n",
                             (long long)(NOW_US - lines[i].hours_ago * HOUR_US), lines[i].body);
  /* a malformed line (line 15) and a torn last line */
  used += (size_t)snprintf(text + used, cap - used, "{\"version\":1,\"record\":\"gpu_health\",\"host\":\"n1\"}\n");
  used += (size_t)snprintf(text + used, cap - used, "{\"version\":1,\"record\":\"fail");
  return text;
}

static void test_summaries(void) {
  char *text = ledger_text();
  ftl_cadence_fleet_hosts h;
  ftl_diag d = {{0}};
  CHECK_OK(ftl_cadence_fleet_hosts_parse(text, strlen(text), "fleet.jsonl", NOW_US, WEEK_S, &h, &d), d.msg);
  CHECK_INT_EQ(h.skipped, 2);
  CHECK_STR_CONTAINS(h.first_problem, "fleet.jsonl:15:");
  CHECK_STR_CONTAINS(h.first_problem, "\"gpu\"");
  /* worst first: the bad hosts (n08 with two failures, then n17), the degraded n05, then the rest */
  CHECK(h.count == 7);
  CHECK_STR_EQ(h.hosts[0].host, "n08");
  CHECK_INT_EQ(h.hosts[0].standing, FTL_CADENCE_HOST_BAD);
  CHECK_STR_EQ(h.hosts[0].reason, "2 failures blamed on it (newest: hang)");
  CHECK_STR_EQ(h.hosts[0].job, "j3");
  CHECK_STR_EQ(h.hosts[0].addrs, "10.0.0.8 10.1.0.8");
  CHECK_STR_EQ(h.hosts[1].host, "n17");
  CHECK_INT_EQ(h.hosts[1].standing, FTL_CADENCE_HOST_BAD);
  CHECK_STR_EQ(h.hosts[1].reason, "GPU GPU-abcd failed (row remapping failed)");
  CHECK_INT_EQ(h.hosts[1].gpu_failures, 1);
  CHECK_INT_EQ(h.hosts[1].gpus_failed, 1);
  CHECK_INT_EQ(h.hosts[1].failures, 1);
  CHECK(h.hosts[1].rank_hours == 8);
  CHECK_INT_EQ(h.hosts[1].bad_since_us, NOW_US - 2 * HOUR_US);
  CHECK_STR_EQ(h.hosts[1].job, "lora-7b");
  CHECK_STR_EQ(h.hosts[2].host, "n05");
  CHECK_INT_EQ(h.hosts[2].standing, FTL_CADENCE_HOST_DEGRADED);
  CHECK_INT_EQ(h.hosts[2].gpus_degraded, 1); /* GPU-y came back healthy */
  CHECK_STR_EQ(h.hosts[2].reason, "GPU GPU-x degraded (thermal throttling)");
  CHECK_INT_EQ(h.hosts[2].last_seen_us, NOW_US - 3 * HOUR_US);
  /* the program's own exits do not make n09 bad; a crash before the first step is not counted */
  const ftl_cadence_fleet_host *n09 = ftl_cadence_fleet_hosts_find(&h, "n09");
  CHECK(n09 && n09->standing == FTL_CADENCE_HOST_OK && n09->failures == 2);
  const ftl_cadence_fleet_host *n11 = ftl_cadence_fleet_hosts_find(&h, "n11");
  CHECK(n11 && n11->standing == FTL_CADENCE_HOST_OK && n11->failures == 0);
  const ftl_cadence_fleet_host *n06 = ftl_cadence_fleet_hosts_find(&h, "n06");
  CHECK(n06 && n06->standing == FTL_CADENCE_HOST_OK && n06->gpus_degraded == 0);
  CHECK(ftl_cadence_fleet_hosts_find(&h, "n01") != NULL);
  /* n10's failure is 8 days old: outside the window */
  CHECK(ftl_cadence_fleet_hosts_find(&h, "n10") == NULL);
  CHECK_STR_EQ(ftl_cadence_host_standing_name(FTL_CADENCE_HOST_BAD), "bad");
  ftl_cadence_fleet_hosts_free(&h);
  /* a window of 9 days takes n10 in, bad */
  CHECK_OK(ftl_cadence_fleet_hosts_parse(text, strlen(text), "fleet.jsonl", NOW_US, 9 * 86400.0, &h, &d), d.msg);
  const ftl_cadence_fleet_host *n10 = ftl_cadence_fleet_hosts_find(&h, "n10");
  CHECK(n10 && n10->standing == FTL_CADENCE_HOST_BAD);
  CHECK_STR_EQ(n10->reason, "a GPU failed (gpu_failed)");
  CHECK_STR_EQ(n10->job, "old");
  ftl_cadence_fleet_hosts_free(&h);
  /* a window of an hour: only n06's return to health, so nothing stands against anyone */
  CHECK_OK(ftl_cadence_fleet_hosts_parse(text, strlen(text), "fleet.jsonl", NOW_US, 3600.0 + 1, &h, &d), d.msg);
  CHECK(h.count == 1 && h.hosts[0].standing == FTL_CADENCE_HOST_OK);
  ftl_cadence_fleet_hosts_free(&h);
  CHECK_INT_EQ(ftl_cadence_fleet_hosts_parse(text, strlen(text), "x", NOW_US, -1, &h, &d), FTL_ERR_INVAL);
  /* Out of memory is reported, not a partial history. */
  ftl_alloc_fail_nth(1);
  CHECK_INT_EQ(ftl_cadence_fleet_hosts_parse(text, strlen(text), "x", NOW_US, WEEK_S, &h, &d), FTL_ERR_NOMEM);
  ftl_alloc_fail_nth(0);
  CHECK(h.hosts == NULL && h.count == 0);
  free(text);
}

static void test_file(void) {
  char path[512], missing[512];
  path_in(path, sizeof path, "fleet.jsonl");
  path_in(missing, sizeof missing, "none.jsonl");
  ftl_diag d = {{0}};
  ftl_cadence_fleet_hosts h;
  CHECK_INT_EQ(ftl_cadence_fleet_hosts_load(missing, NOW_US, WEEK_S, &h, &d), FTL_ERR_NOTFOUND);
  CHECK_INT_EQ(ftl_cadence_fleet_hosts_load(dir, NOW_US, WEEK_S, &h, &d), FTL_ERR_IO);
  CHECK_STR_CONTAINS(d.msg, "not a regular file");
  /* The launcher's records as ftl_cadence_fleet_append writes them, read back. */
  ftl_cadence_host_hours shares[2] = {{"n01", 4}, {"n02", 2.5}};
  ftl_cadence_record rec = {.kind = FTL_CADENCE_REC_EXPOSURE, .wall_us = NOW_US - HOUR_US, .attempt = 0,
                            .world_size = 3, .rank_hours = 6.5, .hosts = shares, .n_hosts = 2};
  CHECK_OK(ftl_cadence_fleet_append(path, &rec, 1000, &d), d.msg);
  ftl_cadence_record g = {.kind = FTL_CADENCE_REC_GPU_HEALTH, .wall_us = NOW_US - HOUR_US + 1, .attempt = 0,
                          .gpu_index = 1};
  snprintf(g.job, sizeof g.job, "lora-7b");
  snprintf(g.host, sizeof g.host, "n02");
  snprintf(g.gpu, sizeof g.gpu, "GPU-beef");
  snprintf(g.verdict, sizeof g.verdict, "degraded");
  snprintf(g.reason, sizeof g.reason, "thermal throttling");
  CHECK_OK(ftl_cadence_fleet_append(path, &g, 1000, &d), d.msg);
  snprintf(g.verdict, sizeof g.verdict, "grumpy");
  CHECK_INT_EQ(ftl_cadence_fleet_append(path, &g, 1000, &d), FTL_ERR_INVAL);
  CHECK_OK(ftl_cadence_fleet_hosts_load(path, NOW_US, WEEK_S, &h, &d), d.msg);
  CHECK(h.count == 2 && h.skipped == 0);
  CHECK_STR_EQ(h.hosts[0].host, "n02");
  CHECK_INT_EQ(h.hosts[0].standing, FTL_CADENCE_HOST_DEGRADED);
  CHECK(h.hosts[0].rank_hours == 2.5);
  ftl_cadence_fleet_hosts_free(&h);
  /* The public parser sees the new fields (the shares are counted, not kept). */
  char *text = NULL;
  size_t len = 0;
  CHECK_OK(ftl_read_file(path, 1 << 20, &text, &len, &d), d.msg);
  ftl_cadence_record back;
  CHECK_OK(ftl_cadence_parse_record(text, strcspn(text, "\n"), &back, &d), d.msg);
  CHECK(back.kind == FTL_CADENCE_REC_EXPOSURE && back.n_hosts == 2 && back.hosts == NULL);
  const char *second = strchr(text, '\n') + 1;
  CHECK_OK(ftl_cadence_parse_record(second, strcspn(second, "\n"), &back, &d), d.msg);
  CHECK(back.kind == FTL_CADENCE_REC_GPU_HEALTH && back.gpu_index == 1);
  CHECK_STR_EQ(back.gpu, "GPU-beef");
  CHECK_STR_EQ(back.verdict, "degraded");
  ftl_free(text);
}

static void test_gang_hosts(void) {
  ftl_cadence_gang_host g[4];
  size_t n = 0;
  ftl_diag d = {{0}};
  CHECK_OK(ftl_cadence_parse_gang_hosts("n01:8,n02:4", g, 4, &n, &d), d.msg);
  CHECK(n == 2 && g[1].ranks == 4);
  CHECK_STR_EQ(g[1].host, "n02");
  CHECK_OK(ftl_cadence_parse_gang_hosts("", g, 4, &n, &d), d.msg);
  CHECK(n == 0);
  static const char *const bad[] = {"n01", "n01:", ":4", "n01:0", "n01:x", "n01:4,,n02:1", "a:1,b:1,c:1,d:1,e:1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    CHECK_INT_EQ(ftl_cadence_parse_gang_hosts(bad[i], g, 4, &n, &d), FTL_ERR_INVAL);
    CHECK(d.msg[0] != '\0');
  }
}

static ftl_cadence *controller(const char *ledger, int64_t world) {
  ftl_cadence_config cfg;
  ftl_cadence_config_init(&cfg);
  cfg.world_size = world;
  cfg.step_s = 1;
  cfg.stall_s = 5;
  ftl_cadence *c = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(ftl_cadence_create(&cfg, &c, &d), d.msg);
  if (ledger) CHECK_OK(ftl_cadence_load_ledger(c, ledger, NULL, &d), d.msg);
  return c;
}

static ftl_cadence_decision decide_on(const char *ledger, const char *gang) {
  ftl_cadence *c = controller(ledger, 16);
  if (gang) {
    ftl_cadence_gang_host g[8];
    size_t n = 0;
    ftl_diag d = {{0}};
    CHECK_OK(ftl_cadence_parse_gang_hosts(gang, g, 8, &n, &d), d.msg);
    CHECK_OK(ftl_cadence_set_gang_hosts(c, g, n), "set gang");
  }
  ftl_cadence_decision dec;
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  if (ledger && gang && strstr(gang, "bad1")) CHECK_STR_CONTAINS(ftl_cadence_explain(c), "worst: bad1, 6 failures");
  /* the sentence docs/cadence.md quotes */
  if (ledger && gang && !strcmp(gang, "bad1:8,ok1:8"))
    CHECK_STR_CONTAINS(ftl_cadence_explain(c), "; the 2 hosts' own histories make the gang's rate 3.79× the pooled one "
                                                "(worst: bad1, 6 failures in 400 rank-hours)");
  ftl_cadence_destroy(c);
  return dec;
}

/* The gang's rate from its hosts: a host with failures shortens the interval of a gang on it; hosts
 * with no history decide exactly as the pooled rate. */
static void test_per_host_cadence(void) {
  char path[512];
  path_in(path, sizeof path, "hosts.jsonl");
  ftl_diag d = {{0}};
  ftl_cadence_host_hours shares[4] = {{"bad1", 400}, {"ok1", 400}, {"ok2", 400}, {"ok3", 400}};
  ftl_cadence_record e = {.kind = FTL_CADENCE_REC_EXPOSURE, .wall_us = 1, .rank_hours = 1600, .hosts = shares,
                          .n_hosts = 4};
  CHECK_OK(ftl_cadence_fleet_append(path, &e, 1000, &d), d.msg);
  for (int i = 0; i < 6; i++) {
    ftl_cadence_record f = {.kind = FTL_CADENCE_REC_FAILURE, .wall_us = 10 + i, .attempt = i, .step = 5};
    snprintf(f.cause, sizeof f.cause, "node_lost");
    snprintf(f.host, sizeof f.host, "bad1");
    CHECK_OK(ftl_cadence_fleet_append(path, &f, 1000, &d), d.msg);
  }
  ftl_cadence_decision pooled = decide_on(path, NULL);
  ftl_cadence_decision clean = decide_on(path, "ok1:8,ok2:8");
  ftl_cadence_decision dirty = decide_on(path, "bad1:8,ok1:8");
  /* bad1: (1 + 6) / (1/λ + 400) against λ for the pool: its gang fails more often */
  CHECK(dirty.mtbf_h < pooled.mtbf_h && clean.mtbf_h > pooled.mtbf_h);
  CHECK(dirty.interval_steps < clean.interval_steps);
  CHECK(dirty.rate > clean.rate);
  /* no history of its own: the same decision as the pooled rate */
  ftl_cadence_decision fresh = decide_on(path, "new1:8,new2:8");
  CHECK_INT_EQ(fresh.interval_steps, pooled.interval_steps);
  CHECK(fabs(fresh.mtbf_h - pooled.mtbf_h) < 1e-9 * pooled.mtbf_h);
  /* and with no ledger at all, a gang list changes nothing */
  ftl_cadence_decision none = decide_on(NULL, NULL), none_gang = decide_on(NULL, "bad1:16");
  CHECK_INT_EQ(none.interval_steps, none_gang.interval_steps);
  ftl_cadence *q = controller(NULL, 16);
  ftl_cadence_gang_host one = {"n01", 16};
  CHECK_OK(ftl_cadence_set_gang_hosts(q, &one, 1), "set gang");
  CHECK_OK(ftl_cadence_decide(q, NULL), "decide");
  CHECK_STR_CONTAINS(ftl_cadence_explain(q), "its host has no history of its own that moves it");
  ftl_cadence_destroy(q);
  CHECK(fabs(none.mtbf_h - none_gang.mtbf_h) < 1e-9 * none.mtbf_h);
  /* ranks on no listed host are charged the pooled rate */
  ftl_cadence_decision part = decide_on(path, "bad1:8");
  CHECK(fabs(part.mtbf_h - dirty.mtbf_h) < 0.2 * dirty.mtbf_h);
  ftl_cadence *c = controller(NULL, 4);
  ftl_cadence_gang_host bad = {"h", 0};
  CHECK_INT_EQ(ftl_cadence_set_gang_hosts(c, &bad, 1), FTL_ERR_INVAL);
  CHECK_INT_EQ(ftl_cadence_set_gang_hosts(c, NULL, 1), FTL_ERR_INVAL);
  CHECK_OK(ftl_cadence_set_gang_hosts(c, NULL, 0), "clear");
  ftl_cadence_destroy(c);
  /* From the environment: FTL_GANG_HOSTS as the launcher sets it; a malformed value is ignored. */
  c = controller(NULL, 16);
  setenv("FTL_FLEET_LEDGER", path, 1);
  setenv("FTL_GANG_HOSTS", "bad1:8,ok1:8", 1);
  unsetenv("FTL_RUN_DIR");
  CHECK_OK(ftl_cadence_load_from_env(c, NULL, NULL, &d), d.msg);
  ftl_cadence_decision env_dec;
  CHECK_OK(ftl_cadence_decide(c, &env_dec), "decide");
  CHECK_INT_EQ(env_dec.interval_steps, dirty.interval_steps);
  ftl_cadence_destroy(c);
  c = controller(NULL, 16);
  setenv("FTL_GANG_HOSTS", "bad1:eight", 1);
  CHECK_OK(ftl_cadence_load_from_env(c, NULL, NULL, &d), d.msg);
  CHECK_OK(ftl_cadence_decide(c, &env_dec), "decide");
  CHECK_INT_EQ(env_dec.interval_steps, pooled.interval_steps);
  ftl_cadence_destroy(c);
  unsetenv("FTL_GANG_HOSTS");
  unsetenv("FTL_FLEET_LEDGER");
}

int main(void) {
  ftl_log_set_level(FTL_LOG_ERROR);
  const char *tmp = getenv("TMPDIR");
  CHECK_OK(ftl_fmt(dir, sizeof dir, "%s/ftl-test-fleet-XXXXXX", tmp && *tmp ? tmp : "/tmp"), "fmt");
  CHECK(mkdtemp(dir) != NULL);
  test_summaries();
  test_file();
  test_gang_hosts();
  test_per_host_cadence();
  const char *names[] = {"fleet.jsonl", "hosts.jsonl"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char p[512];
    path_in(p, sizeof p, names[i]);
    unlink(p);
  }
  rmdir(dir);
  printf("ok\n");
  return 0;
}
