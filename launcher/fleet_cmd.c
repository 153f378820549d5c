/* launcher/fleet_cmd.c: `ftl fleet LEDGER`: a fleet ledger's hosts by recent health, worst first,
 * as `ftl run` judges them before a job starts (cadence/fleet.c's per-host history; the standings
 * and their rules: docs/formats/fleet-ledger.md, "Per-host history"; --json: docs/formats/fleet.md).
 * It only reads (under the ledgers' shared lock), so it is safe while jobs append. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ftl/cadence.h"
#include "ftl/core.h"
#include "launcher/fleet.h"
#include "launcher/launcher.h"

enum { FLEET_DEFAULT_DAYS = 7, FLEET_MAX_DAYS = 3650 };

const char ln_fleet_help[] =
    "ftl fleet: a fleet ledger's hosts by recent health, worst first (docs/formats/fleet-ledger.md).\n"
    "\n"
    "  ftl fleet LEDGER [--days N] [--json]\n"
    "\n"
    "For each host with records in the window: its standing (bad: a GPU failed, or 2 or more failures\n"
    "blamed on it; degraded: a GPU whose latest verdict is degraded; ok), why, its counted failures, its\n"
    "GPUs failed and degraded, its rank-hours of exposure and when a record last named it. `ftl run`\n"
    "leaves bad hosts out of a job's hostfile plan (while the rest hold its ranks) and moves degraded\n"
    "ones behind the spares, by the same standings over the job spec's fleet.history_days.\n"
    "Malformed lines are skipped, each named PATH:LINE on stderr. It only reads.\n"
    "\n"
    "  --days N   the window: records of the last N days (1 to 3650; default 7)\n"
    "  --json     one JSON object instead (versioned; docs/formats/fleet.md)\n"
    "\n"
    "Exit codes: 0 printed, 1 LEDGER cannot be read (missing, not a regular file, over 256 MiB),\n"
    "2 usage error, 5 out of memory.\n";

static int print_text(const char *path, int days, const ftl_cadence_fleet_hosts *h, int64_t now_us) {
  int bad = 0, degraded = 0;
  for (size_t i = 0; i < h->count; i++) {
    bad += h->hosts[i].standing == FTL_CADENCE_HOST_BAD;
    degraded += h->hosts[i].standing == FTL_CADENCE_HOST_DEGRADED;
  }
  printf("fleet ledger %s: %zu host%s with records in the last %d day%s: %d bad, %d degraded\n", path, h->count,
         h->count == 1 ? "" : "s", days, days == 1 ? "" : "s", bad, degraded);
  if (h->skipped) printf("  %lld line%s skipped, the first: %s\n", (long long)h->skipped, h->skipped == 1 ? "" : "s",
                         h->first_problem);
  if (h->count == 0) return FTL_EXIT_OK;
  printf("  %-20s %-9s %8s %11s %13s %10s  %-13s %s\n", "host", "standing", "failures", "gpus failed", "gpus degraded",
         "rank-hours", "last seen", "why");
  for (size_t i = 0; i < h->count; i++) {
    const ftl_cadence_fleet_host *x = &h->hosts[i];
    char seen[48], why[512];
    ln_fleet_ago(seen, sizeof seen, now_us, x->last_seen_us);
    if (x->standing == FTL_CADENCE_HOST_OK)
      (void)ftl_fmt(why, sizeof why, "-");
    else
      ln_fleet_describe(x, now_us, why, sizeof why);
    printf("  %-20s %-9s %8lld %11lld %13lld %10.1f  %-13s %s\n", x->host, ftl_cadence_host_standing_name(x->standing),
           (long long)x->failures, (long long)x->gpus_failed, (long long)x->gpus_degraded, x->rank_hours, seen, why);
  }
  return FTL_EXIT_OK;
}

static int print_json(const char *path, int days, const ftl_cadence_fleet_hosts *h, int64_t now_us) {
  json_t *hosts = json_array();
  for (size_t i = 0; hosts && i < h->count; i++) {
    const ftl_cadence_fleet_host *x = &h->hosts[i];
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:s}", "host", x->host, "standing",
                          ftl_cadence_host_standing_name(x->standing), "reason", x->reason, "job", x->job, "failures",
                          (json_int_t)x->failures, "gpu_failures", (json_int_t)x->gpu_failures, "gpus_failed",
                          (json_int_t)x->gpus_failed, "gpus_degraded", (json_int_t)x->gpus_degraded, "rank_hours",
                          x->rank_hours, "last_seen_us", (json_int_t)x->last_seen_us, "since_us",
                          (json_int_t)x->bad_since_us, "addrs", x->addrs);
    if (!o || json_array_append_new(hosts, o)) {
      json_decref(hosts);
      hosts = NULL;
    }
  }
  json_t *out = hosts ? json_pack("{s:i, s:s, s:i, s:I, s:I, s:I, s:s, s:o}", "version", 1, "ledger", path,
                                  "window_days", days, "now_us", (json_int_t)now_us, "lines", (json_int_t)h->lines,
                                  "skipped", (json_int_t)h->skipped, "first_problem", h->first_problem, "hosts", hosts)
                      : NULL;
  char *text = out ? json_dumps(out, JSON_INDENT(2)) : NULL;
  json_decref(out);
  if (!text) {
    fprintf(stderr, "ftl fleet: out of memory\n");
    return FTL_EXIT_INTERNAL;
  }
  printf("%s\n", text);
  free(text);
  return FTL_EXIT_OK;
}

int ln_cmd_fleet(int argc, char **argv) {
  static const struct option longs[] = {{"days", required_argument, NULL, 'd'},
                                        {"json", no_argument, NULL, 'j'},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};
  int64_t days = FLEET_DEFAULT_DAYS;
  int json = 0, c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "hj", longs, NULL)) != -1) {
    switch (c) {
      case 'd':
        if (ftl_parse_i64(optarg, 1, FLEET_MAX_DAYS, &days) != FTL_OK) {
          fprintf(stderr, "ftl fleet: --days: '%s' is not a whole number of days from 1 to %d\n", optarg,
                  FLEET_MAX_DAYS);
          return FTL_EXIT_USAGE;
        }
        break;
      case 'j': json = 1; break;
      case 'h': fputs(ln_fleet_help, stdout); return FTL_EXIT_OK;
      default: fprintf(stderr, "ftl fleet: see `ftl help fleet`\n"); return FTL_EXIT_USAGE;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, optind < argc ? "ftl fleet: one LEDGER, not '%s' too (see `ftl help fleet`)\n"
                                  : "ftl fleet: which fleet ledger? usage: ftl fleet LEDGER [--days N] [--json]%s\n",
            optind < argc ? argv[argc - 1] : "");
    return FTL_EXIT_USAGE;
  }
  const char *path = argv[optind];
  int64_t now_us = ftl_wall_us();
  ftl_cadence_fleet_hosts h;
  ftl_diag d = {{0}};
  ftl_err rc = ftl_cadence_fleet_hosts_load(path, now_us, (double)days * 86400.0, &h, &d);
  if (rc == FTL_ERR_NOMEM) {
    fprintf(stderr, "ftl fleet: %s\n", d.msg);
    return FTL_EXIT_INTERNAL;
  }
  if (rc) {
    fprintf(stderr, "ftl fleet: %s%s\n", rc == FTL_ERR_NOTFOUND ? "no such fleet ledger: " : "", d.msg);
    return FTL_EXIT_JOB_FAILED;
  }
  int out = json ? print_json(path, (int)days, &h, now_us) : print_text(path, (int)days, &h, now_us);
  ftl_cadence_fleet_hosts_free(&h);
  return out;
}
