/* launcher/gpus_cmd.c: `ftl gpus`: this host's GPUs read through NVML once (or twice, --interval
 * apart) and judged as a rank agent judges them before an attempt (launcher/gpu_health.h), for an
 * operator, a Slurm prolog or HealthCheckProgram, and scripts/gpu-check.sh on a real GPU. The exit
 * code is the verdict, so a script can drain a node on it. Nothing here is new logic: the sampler
 * and the verdict are gpu_health.c's. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "ftl/core.h"
#include "launcher/gpu_health.h"
#include "launcher/launcher.h"

enum { GPUS_MAX = 64, GPUS_EXIT_FAILED = 1, GPUS_EXIT_DEGRADED = 6 };

const char ln_gpus_help[] =
    "ftl gpus: this host's GPUs through NVML, and each one's health verdict (docs/gpu.md).\n"
    "\n"
    "  ftl gpus [--interval MS] [--json] [--quiet]\n"
    "\n"
    "  --interval MS   read twice, MS apart (1 to 600000), and judge what rose in between as a rank\n"
    "                  agent's periodic check does (corrected ECC, NVLink and PCIe errors, XIDs); without\n"
    "                  it, one reading judged on its own, as the check before a rank starts\n"
    "  --json          one JSON object: available, why, gpus[] (index, uuid, name, pci_bus_id,\n"
    "                  verdict, reason, and each field read)\n"
    "  --quiet         print nothing; the exit code says it\n"
    "\n"
    "No NVML, no driver or no GPU: says so and exits 0 (there is nothing to judge).\n"
    "Exit codes: 0 every GPU healthy (or none), 1 a GPU failed its check, 6 a GPU is degraded (none\n"
    "failed), 2 usage error, 5 out of memory.\n";

static json_t *reading_json(const ln_gpu_reading *r, const ln_gpu_verdict *v) {
  json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s}", "index", r->index, "uuid", r->uuid, "name", r->name,
                        "pci_bus_id", r->pci_bus_id, "verdict", ln_gpu_verdict_name(v->kind), "reason", v->reason);
  if (!o) return NULL;
  json_t *fields = json_object();
  for (int f = 0; f < LN_GPU_FIELDS && fields; f++)
    if (r->state[f] != LN_GPU_KNOWN)
      json_object_set_new(fields, ln_gpu_field_name((ln_gpu_field)f),
                          json_string(r->state[f] == LN_GPU_UNSUPPORTED ? "unsupported" : "unknown"));
  json_object_set_new(o, "not_read", fields ? fields : json_object());
  json_object_set_new(o, "ecc", json_pack("{s:I, s:I, s:I, s:I}", "corrected_volatile",
                                          (json_int_t)r->ecc_corrected_volatile, "uncorrected_volatile",
                                          (json_int_t)r->ecc_uncorrected_volatile, "corrected_aggregate",
                                          (json_int_t)r->ecc_corrected_aggregate, "uncorrected_aggregate",
                                          (json_int_t)r->ecc_uncorrected_aggregate));
  json_object_set_new(o, "remapped_rows", json_pack("{s:i, s:i, s:b, s:b}", "corrected", (int)r->remapped_rows_corrected,
                                                    "uncorrected", (int)r->remapped_rows_uncorrected, "pending",
                                                    r->remap_pending, "failure", r->remap_failure));
  json_object_set_new(o, "throttle_reasons", json_integer((json_int_t)r->throttle_reasons));
  json_object_set_new(o, "temperature_c", json_integer(r->temperature_c));
  json_object_set_new(o, "power_mw", json_integer(r->power_mw));
  json_object_set_new(o, "pcie_replay", json_integer(r->pcie_replay));
  json_object_set_new(o, "nvlink", json_pack("{s:i, s:I, s:I}", "active_links", r->nvlink_active_links, "crc_errors",
                                             (json_int_t)r->nvlink_crc_errors, "replay_errors",
                                             (json_int_t)r->nvlink_replay_errors));
  json_t *xids = json_array();
  for (int i = 0; i < r->xid_count && i < LN_GPU_MAX_XIDS && xids; i++) json_array_append_new(xids, json_integer(r->xids[i]));
  json_object_set_new(o, "xids", xids ? xids : json_array());
  return o;
}

static void print_reading(const ln_gpu_reading *r, const ln_gpu_verdict *v) {
  printf("GPU %d  %s  %s  %s\n", r->index, r->uuid, r->name, r->pci_bus_id);
  printf("  verdict: %s%s%s\n", ln_gpu_verdict_name(v->kind), v->kind == LN_GPU_HEALTHY ? "" : ": ",
         v->kind == LN_GPU_HEALTHY ? "" : v->reason);
  if (r->state[LN_GPU_FIELD_TEMPERATURE] == LN_GPU_KNOWN || r->state[LN_GPU_FIELD_POWER] == LN_GPU_KNOWN)
    printf("  temperature %u C, power %.1f W\n", r->temperature_c, r->power_mw / 1000.0);
  if (r->state[LN_GPU_FIELD_ECC] == LN_GPU_KNOWN)
    printf("  ECC corrected %llu (lifetime %llu), uncorrected %llu (lifetime %llu)\n",
           (unsigned long long)r->ecc_corrected_volatile, (unsigned long long)r->ecc_corrected_aggregate,
           (unsigned long long)r->ecc_uncorrected_volatile, (unsigned long long)r->ecc_uncorrected_aggregate);
  if (r->state[LN_GPU_FIELD_REMAPPED_ROWS] == LN_GPU_KNOWN)
    printf("  rows remapped %u corrected, %u uncorrected%s%s\n", r->remapped_rows_corrected,
           r->remapped_rows_uncorrected, r->remap_pending ? ", a remap pending" : "",
           r->remap_failure ? ", REMAP FAILED" : "");
  if (r->state[LN_GPU_FIELD_THROTTLE] == LN_GPU_KNOWN)
    printf("  clock throttle reasons 0x%llx\n", (unsigned long long)r->throttle_reasons);
  if (r->state[LN_GPU_FIELD_PCIE_REPLAY] == LN_GPU_KNOWN) printf("  PCIe replays %u\n", r->pcie_replay);
  if (r->state[LN_GPU_FIELD_NVLINK] == LN_GPU_KNOWN)
    printf("  NVLink: %d active links, %llu CRC and %llu replay errors\n", r->nvlink_active_links,
           (unsigned long long)r->nvlink_crc_errors, (unsigned long long)r->nvlink_replay_errors);
  for (int i = 0; i < r->xid_count && i < LN_GPU_MAX_XIDS; i++) printf("  XID %u\n", r->xids[i]);
  int unread = 0;
  for (int f = 0; f < LN_GPU_FIELDS; f++) unread += r->state[f] != LN_GPU_KNOWN;
  if (unread) {
    printf("  not read:");
    for (int f = 0; f < LN_GPU_FIELDS; f++)
      if (r->state[f] != LN_GPU_KNOWN)
        printf(" %s (%s)", ln_gpu_field_name((ln_gpu_field)f), r->state[f] == LN_GPU_UNSUPPORTED ? "unsupported" : "failed");
    printf("\n");
  }
}

/* Reads, waits interval_ms when > 0 and reads again, judges; prints as asked. Returns the exit code. */
static int check_gpus(ln_gpu_sampler *s, int64_t interval_ms, int json, int quiet) {
  static ln_gpu_reading first[GPUS_MAX], cur[GPUS_MAX];
  int n = 0, n0 = 0;
  ln_gpu_sampler_read(s, first, GPUS_MAX, &n0);
  n = n0;
  if (interval_ms > 0 && n0 > 0) {
    struct timespec ts = {.tv_sec = interval_ms / 1000, .tv_nsec = (interval_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    ln_gpu_sampler_read(s, cur, GPUS_MAX, &n);
  }
  const ln_gpu_reading *last = interval_ms > 0 && n0 > 0 ? cur : first;
  int worst = LN_GPU_HEALTHY;
  json_t *arr = json ? json_array() : NULL;
  for (int i = 0; i < n; i++) {
    ln_gpu_verdict v;
    ln_gpu_verdict_of(interval_ms > 0 && i < n0 ? &first[i] : NULL, &last[i], NULL, &v);
    if ((int)v.kind > worst) worst = (int)v.kind;
    if (arr) json_array_append_new(arr, reading_json(&last[i], &v));
    else if (!quiet) print_reading(&last[i], &v);
  }
  const char *why = ln_gpu_sampler_available(s) ? (n ? "" : "NVML sees no GPU on this host") : ln_gpu_sampler_why(s);
  if (arr) {
    json_t *top = json_pack("{s:b, s:s, s:o}", "available", ln_gpu_sampler_available(s) && n > 0, "why", why, "gpus", arr);
    if (!top) return FTL_EXIT_INTERNAL;
    if (!quiet) {
      json_dumpf(top, stdout, JSON_COMPACT);
      printf("\n");
    }
    json_decref(top);
  } else if (!quiet && !n) {
    printf("GPU health: not available: %s\n", why);
  }
  return worst == LN_GPU_FAILED ? GPUS_EXIT_FAILED : worst == LN_GPU_DEGRADED ? GPUS_EXIT_DEGRADED : FTL_EXIT_OK;
}

int ln_cmd_gpus(int argc, char **argv) {
  static const struct option longs[] = {{"interval", required_argument, NULL, 'i'},
                                        {"json", no_argument, NULL, 'j'},
                                        {"quiet", no_argument, NULL, 'q'},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};
  int64_t interval_ms = 0;
  int json = 0, quiet = 0, c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "hjq", longs, NULL)) != -1) {
    switch (c) {
      case 'i':
        if (ftl_parse_i64(optarg, 1, 600000, &interval_ms) != FTL_OK) {
          fprintf(stderr, "ftl gpus: --interval: '%s' is not a number of milliseconds from 1 to 600000\n", optarg);
          return FTL_EXIT_USAGE;
        }
        break;
      case 'j': json = 1; break;
      case 'q': quiet = 1; break;
      case 'h': fputs(ln_gpus_help, stdout); return FTL_EXIT_OK;
      default: fprintf(stderr, "ftl gpus: see `ftl help gpus`\n"); return FTL_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "ftl gpus: unexpected argument '%s' (see `ftl help gpus`)\n", argv[optind]);
    return FTL_EXIT_USAGE;
  }
  ln_gpu_sampler *s = NULL;
  ftl_diag d = {{0}};
  if (ln_gpu_sampler_open(&s, &d) != FTL_OK) {
    fprintf(stderr, "ftl gpus: %s\n", d.msg);
    return FTL_EXIT_INTERNAL;
  }
  int rc = check_gpus(s, interval_ms, json, quiet);
  ln_gpu_sampler_close(s);
  return rc;
}
