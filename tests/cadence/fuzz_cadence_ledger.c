/* tests/cadence/fuzz_cadence_ledger.c: libFuzzer harness for the ledger-line parser: arbitrary
 * bytes (a corrupt, torn or hostile ledger) split into lines as the loader splits them, each
 * parsed, and each record's cause classified; then the whole input summarised per host as a fleet
 * ledger (cadence/fleet.c: gpu_health records, per-host exposure, standings), whose summaries
 * must be well-formed, worst first. */
#include <stdint.h>
#include <string.h>

#include "ftl/cadence.h"
#include "ftl/core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The per-host summaries of the input as a fleet ledger, over all time and over a day. */
static void check_summaries(const char *p, size_t size) {
  const double windows[] = {1e12, 86400};
  for (size_t w = 0; w < 2; w++) {
    ftl_cadence_fleet_hosts h;
    ftl_diag d;
    if (ftl_cadence_fleet_hosts_parse(p, size, "fuzz", 1700000000000000LL, windows[w], &h, &d) != FTL_OK) continue;
    for (size_t i = 0; i < h.count; i++) {
      const ftl_cadence_fleet_host *x = &h.hosts[i];
      if (!memchr(x->host, '\0', sizeof x->host) || !memchr(x->reason, '\0', sizeof x->reason)) __builtin_trap();
      if (x->failures < 0 || x->gpu_failures < 0 || x->gpus_degraded < 0 || !(x->rank_hours >= 0)) __builtin_trap();
      if (x->standing != FTL_CADENCE_HOST_OK && x->standing != FTL_CADENCE_HOST_DEGRADED &&
          x->standing != FTL_CADENCE_HOST_BAD)
        __builtin_trap();
      if (x->standing != FTL_CADENCE_HOST_OK && !x->reason[0]) __builtin_trap();
      if (i > 0 && h.hosts[i - 1].standing < x->standing) __builtin_trap();
      if (ftl_cadence_fleet_hosts_find(&h, x->host) == NULL) __builtin_trap();
    }
    ftl_cadence_fleet_hosts_free(&h);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int quiet;
  if (!quiet) {
    ftl_log_set_level(FTL_LOG_ERROR);
    quiet = 1;
  }
  const char *p = (const char *)data;
  size_t pos = 0;
  while (pos < size) {
    const char *nl = memchr(p + pos, '\n', size - pos);
    size_t len = nl ? (size_t)(nl - (p + pos)) : size - pos;
    ftl_cadence_record rec;
    ftl_diag d;
    if (ftl_cadence_parse_record(p + pos, len, &rec, &d) == FTL_OK) {
      /* The strings must be terminated and the class consistent with the cause. */
      if (strlen(rec.cause) >= sizeof rec.cause || strlen(rec.job) >= sizeof rec.job) __builtin_trap();
      if (rec.kind == FTL_CADENCE_REC_FAILURE && rec.cls != ftl_cadence_classify(rec.cause, rec.step)) __builtin_trap();
      if (rec.kind == FTL_CADENCE_REC_EXPOSURE && !(rec.rank_hours >= 0)) __builtin_trap();
      if (rec.n_hosts > FTL_CADENCE_MAX_RECORD_HOSTS || rec.hosts != NULL) __builtin_trap();
      if (strlen(rec.gpu) >= sizeof rec.gpu || strlen(rec.reason) >= sizeof rec.reason) __builtin_trap();
    }
    pos += len + 1;
  }
  check_summaries(p, size);
  return 0;
}
