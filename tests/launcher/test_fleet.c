/* tests/launcher/test_fleet.c: the fleet ledger from the launcher's side (launcher/fleet.h). The
 * start-of-job decision as a table: a hostfile plan and the fleet's history in, each host's action
 * (kept, left out, kept although bad, moved behind the spares) and the plan's new order out. Then an
 * attempt's notes: the GPU verdicts that changed become gpu_health records (a repeat does not, a
 * return to health does), a gpu_failed failure gets its GPU and host addresses, the exposure is
 * split by the hosts the agents said hello from (in records of at most 256 hosts that add up), and
 * FTL_GANG_HOSTS names the plan's hosts as mpirun fills them. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "ftl/core.h"
#include "ftl_test.h"
#include "launcher/fleet.h"
#include "launcher/fleet_internal.h"

static char dir[256];

#define NOW_US (1800000000LL * 1000000LL)
#define HOUR_US 3600000000LL

/* The history: n17 bad (a GPU failed; it has an address), n08 bad (two failures), n05 degraded, n01 ok. */
static void history(ftl_cadence_fleet_hosts *h) {
  char text[4096];
  int64_t t = NOW_US - HOUR_US;
  snprintf(text, sizeof text,
           "{\"version\":1,\"record\":\"gpu_health\",\"wall_us\":%lld,\"job\":\"lora-7b\",\"host\":\"n17\","
           "\"gpu\":\"GPU-abcd\",\"verdict\":\"failed\",\"reason\":\"row remapping failed\",\"addrs\":\"10.0.0.17\"}\n"
           "{\"version\":1,\"record\":\"failure\",\"wall_us\":%lld,\"host\":\"n08\",\"step\":3,\"cause\":\"node_lost\"}\n"
           "{\"version\":1,\"record\":\"failure\",\"wall_us\":%lld,\"host\":\"n08\",\"step\":3,\"cause\":\"hang\"}\n"
           "{\"version\":1,\"record\":\"gpu_health\",\"wall_us\":%lld,\"host\":\"n05\",\"gpu\":\"GPU-x\","
           "\"verdict\":\"degraded\",\"reason\":\"thermal throttling\"}\n"
           "{\"version\":1,\"record\":\"exposure\",\"wall_us\":%lld,\"rank_hours\":2,\"hosts\":{\"n01\":2}}\n",
           (long long)t, (long long)t, (long long)t + 1, (long long)t, (long long)t);
  ftl_diag d = {{0}};
  CHECK_OK(ftl_cadence_fleet_hosts_parse(text, strlen(text), "fleet", NOW_US, 7 * 86400.0, h, &d), d.msg);
  CHECK(h->count == 4);
}

typedef struct row {
  const char *plan;     /* "name:slots ..." ('!' before a name: already bad) */
  int ranks;
  int with_history;
  const char *actions;  /* one letter per host: k kept, o left out, b kept although bad, m moved */
  const char *order;    /* the plan's new order, names */
  int decided;
} row;

static const row rows[] = {
    /* a bad host left out, a degraded one moved behind the spare */
    {"n01:2 n17:2 n05:2 n09:2", 4, 1, "komk", "n01 n17 n09 n05", 2},
    /* named by address: the history knows n17's */
    {"10.0.0.17:2 n01:2", 2, 1, "ok", "10.0.0.17 n01", 1},
    /* no spare: the bad host is kept, and goes last */
    {"n17:2 n01:2", 4, 1, "bk", "n01 n17", 1},
    /* two bad hosts, room for both to go */
    {"n08:2 n17:2 n01:2 n09:2", 4, 1, "ookk", "n08 n17 n01 n09", 2},
    /* room for one: the worst first (n08: two failures, sorted before n17) */
    {"n08:2 n17:2 n01:2 n09:2", 6, 1, "obkk", "n08 n01 n09 n17", 2},
    /* no history: nothing moves */
    {"n17:2 n05:2", 2, 0, "kk", "n17 n05", 0},
    /* a host already left out is not judged again */
    {"!n17:2 n05:2 n01:2", 2, 1, "kmk", "n17 n01 n05", 1},
};

static size_t parse_plan(const char *text, ln_policy_host *hosts) {
  size_t n = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save), n++) {
    memset(&hosts[n], 0, sizeof hosts[n]);
    if (*tok == '!') {
      hosts[n].bad = 1;
      tok++;
    }
    char *colon = strrchr(tok, ':');
    *colon = '\0';
    snprintf(hosts[n].name, sizeof hosts[n].name, "%s", tok);
    snprintf(hosts[n].line, sizeof hosts[n].line, "%s slots=%s", tok, colon + 1);
    hosts[n].slots = atoi(colon + 1);
  }
  return n;
}

static void test_decide(void) {
  ftl_cadence_fleet_hosts hist;
  history(&hist);
  CHECK_STR_EQ(hist.hosts[0].host, "n08");
  for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
    ln_policy_host hosts[8];
    size_t n = parse_plan(rows[r].plan, hosts);
    ln_fleet_action action[8];
    const ftl_cadence_fleet_host *match[8];
    size_t order[8];
    int decided = ln_fleet_decide(hosts, n, rows[r].ranks, rows[r].with_history ? &hist : NULL, action, match, order);
    char got[16] = "", names[256] = "";
    for (size_t i = 0; i < n; i++) {
      got[i] = "kobm"[action[i]];
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? " " : "", hosts[order[i]].name);
    }
    if (strcmp(got, rows[r].actions) || strcmp(names, rows[r].order) || decided != rows[r].decided)
      fprintf(stderr, "row %zu (%s, ranks %d): actions %s order '%s' decided %d\n", r, rows[r].plan, rows[r].ranks, got,
              names, decided);
    CHECK_STR_EQ(got, rows[r].actions);
    CHECK_STR_EQ(names, rows[r].order);
    CHECK_INT_EQ(decided, rows[r].decided);
  }
  /* the sentence a left-out host gets */
  char why[512];
  ln_fleet_describe(ftl_cadence_fleet_hosts_find(&hist, "n17"), NOW_US + HOUR_US, why, sizeof why);
  CHECK_STR_EQ(why, "GPU GPU-abcd failed (row remapping failed) 2 h ago in job lora-7b");
  ftl_cadence_fleet_hosts_free(&hist);
}

static json_t *gpus(const char *uuid, const char *verdict, const char *reason) {
  return json_pack("[{s:i, s:s, s:s, s:s, s:s}]", "index", 0, "uuid", uuid, "name", "NVIDIA H100", "verdict", verdict,
                   "reason", reason);
}

/* One attempt's notes, and the records they become. */
static void test_attempt(void) {
  char ledger[512], run_ledger[512];
  CHECK_OK(ftl_fmt(ledger, sizeof ledger, "%s/fleet.jsonl", dir), "fmt");
  CHECK_OK(ftl_fmt(run_ledger, sizeof run_ledger, "%s/failures.jsonl", dir), "fmt");
  ln_job job;
  memset(&job, 0, sizeof job);
  char name[] = "lora-7b";
  job.name = name;
  job.ranks = 6;
  job.fleet_ledger = ledger;
  job.fleet_history_days = 7;
  CHECK(ln_fleet_open(NULL) == NULL);
  ln_fleet *f = ln_fleet_open(&job);
  CHECK(f != NULL);
  ln_policy_host hosts[4];
  size_t n = parse_plan("n01:4 n02:4 n03:4", hosts);
  hosts[1].bad = 1;
  CHECK_STR_EQ(ln_fleet_attempt_begin(f, hosts, n, 6), "n01:4,n03:2");
  /* without a hostfile: this host, every rank */
  CHECK(strstr(ln_fleet_attempt_begin(f, NULL, 0, 3), ":3") != NULL);
  CHECK_STR_EQ(ln_fleet_attempt_begin(f, hosts, n, 6), "n01:4,n03:2");
  for (int r = 0; r < 6; r++) ln_fleet_note_rank(f, r, r < 4 ? "n01" : "n03", r < 4 ? "10.0.0.1" : "10.0.0.3");
  json_t *a = gpus("GPU-aa", "healthy", "healthy"), *b = gpus("GPU-aa", "degraded", "thermal throttling"),
         *c = gpus("GPU-aa", "failed", "uncorrectable ECC"), *h = gpus("GPU-cc", "healthy", "healthy");
  ln_fleet_note_gpus(f, "n01", "10.0.0.1", a, NOW_US);     /* healthy from the start: nothing */
  ln_fleet_note_gpus(f, "n01", "10.0.0.1", b, NOW_US + 1); /* degraded */
  ln_fleet_note_gpus(f, "n01", "10.0.0.1", b, NOW_US + 2); /* the same again: nothing */
  ln_fleet_note_gpus(f, "n03", "10.0.0.3", h, NOW_US + 3); /* another host, healthy: nothing */
  ln_fleet_note_gpus(f, "n01", "10.0.0.1", c, NOW_US + 4); /* failed */
  ln_fleet_gpu_records(f, &job, 0, 6);
  ftl_cadence_record fail = {.kind = FTL_CADENCE_REC_FAILURE, .wall_us = NOW_US + 10, .step = 5, .world_size = 6};
  snprintf(fail.cause, sizeof fail.cause, "gpu_failed");
  snprintf(fail.host, sizeof fail.host, "n01");
  ln_fleet_fill_failure(f, &fail);
  CHECK_STR_EQ(fail.gpu, "GPU-aa");
  CHECK_STR_EQ(fail.addrs, "10.0.0.1");
  ftl_cadence_record expo = {.kind = FTL_CADENCE_REC_EXPOSURE, .wall_us = NOW_US + 11, .step = -1, .world_size = 6,
                             .rank_hours = 3};
  ln_fleet_exposure_record(f, run_ledger, &expo);
  ftl_cadence_fleet_hosts hist;
  ftl_diag d = {{0}};
  CHECK_OK(ftl_cadence_fleet_hosts_load(ledger, NOW_US + 20, 86400, &hist, &d), d.msg);
  CHECK(hist.count == 2 && hist.skipped == 0);
  CHECK_STR_EQ(hist.hosts[0].host, "n01");
  CHECK_INT_EQ(hist.hosts[0].standing, FTL_CADENCE_HOST_BAD);
  CHECK_STR_EQ(hist.hosts[0].reason, "GPU GPU-aa failed (uncorrectable ECC)");
  CHECK(hist.hosts[0].rank_hours == 2 && hist.hosts[1].rank_hours == 1);
  CHECK_STR_EQ(hist.hosts[0].addrs, "10.0.0.1");
  ftl_cadence_fleet_hosts_free(&hist);
  char *text = NULL;
  size_t len = 0;
  CHECK_OK(ftl_read_file(ledger, 1 << 20, &text, &len, &d), d.msg);
  CHECK_STR_CONTAINS(text, "\"verdict\":\"degraded\"");
  CHECK_STR_CONTAINS(text, "\"hosts\":{\"n01\":2.0,\"n03\":1.0}");
  int records = 0;
  for (const char *p = text; (p = strstr(p, "\"record\":\"gpu_health\"")); p++) records++;
  CHECK_INT_EQ(records, 2);
  ftl_free(text);
  /* the run's ledger has the same exposure record */
  CHECK_OK(ftl_read_file(run_ledger, 1 << 20, &text, &len, &d), d.msg);
  CHECK_STR_CONTAINS(text, "\"hosts\":{\"n01\":2.0,\"n03\":1.0}");
  ftl_free(text);

  /* A new attempt starts over: the GPU failed again is a change again; back to health is too. */
  ln_fleet_attempt_begin(f, hosts, n, 6);
  ln_fleet_note_gpus(f, "n01", "10.0.0.1", c, NOW_US + 30);
  ln_fleet_note_gpus(f, "n01", "10.0.0.1", a, NOW_US + 31);
  CHECK_INT_EQ((int)f->n_changes, 2);
  json_decref(a);
  json_decref(b);
  json_decref(c);
  json_decref(h);
  ln_fleet_close(f);
  unlink(ledger);
  unlink(run_ledger);
}

/* A gang of 300 hosts: its exposure in two records (256 + 44 hosts) that add up. */
static void test_big_exposure(void) {
  char ledger[512];
  CHECK_OK(ftl_fmt(ledger, sizeof ledger, "%s/big.jsonl", dir), "fmt");
  ln_job job;
  memset(&job, 0, sizeof job);
  char name[] = "big";
  job.name = name;
  job.fleet_ledger = ledger;
  ln_fleet *f = ln_fleet_open(&job);
  CHECK(f != NULL);
  ln_fleet_attempt_begin(f, NULL, 0, 600);
  for (int r = 0; r < 600; r++) {
    char host[32];
    snprintf(host, sizeof host, "node-%03d", r / 2);
    ln_fleet_note_rank(f, r, host, "");
  }
  ftl_cadence_record expo = {.kind = FTL_CADENCE_REC_EXPOSURE, .wall_us = NOW_US, .step = -1, .world_size = 600,
                             .rank_hours = 600};
  ln_fleet_exposure_record(f, NULL, &expo);
  ln_fleet_close(f);
  ftl_cadence_config cfg;
  ftl_cadence_config_init(&cfg);
  ftl_cadence *c = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(ftl_cadence_create(&cfg, &c, &d), d.msg);
  ftl_cadence_load_stats st;
  CHECK_OK(ftl_cadence_load_ledger(c, ledger, &st, &d), d.msg);
  CHECK_INT_EQ(st.lines, 2);
  CHECK(fabs(st.rank_hours - 600) < 1e-9);
  ftl_cadence_destroy(c);
  ftl_cadence_fleet_hosts hist;
  CHECK_OK(ftl_cadence_fleet_hosts_load(ledger, NOW_US, 86400, &hist, &d), d.msg);
  CHECK(hist.count == 300);
  for (size_t i = 0; i < hist.count; i++) CHECK(fabs(hist.hosts[i].rank_hours - 2) < 1e-9);
  ftl_cadence_fleet_hosts_free(&hist);
  unlink(ledger);
}

int main(void) {
  ftl_log_set_level(FTL_LOG_ERROR);
  const char *tmp = getenv("TMPDIR");
  CHECK_OK(ftl_fmt(dir, sizeof dir, "%s/ftl-test-fleet-XXXXXX", tmp && *tmp ? tmp : "/tmp"), "fmt");
  CHECK(mkdtemp(dir) != NULL);
  test_decide();
  test_attempt();
  test_big_exposure();
  rmdir(dir);
  printf("ok\n");
  return 0;
}
