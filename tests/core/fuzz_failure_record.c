/* tests/core/fuzz_failure_record.c: libFuzzer harness for the failure ledger's record codec
 * (core/failure_record.c): arbitrary bytes (a corrupt, torn or hostile ledger) split into lines
 * as the readers split them (core_jsonl_each_line), each parsed; a record that parses must have terminated strings, a
 * known kind, its bounded numbers in bounds (an exposure's per-host shares, a gpu_health record's
 * required fields), and encode again into a line that parses to the same fields. Broken promises trap so the fuzzer keeps the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure_record.h"
#include "core/jsonl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) __builtin_trap();
}

static void check_record(const core_failure_record *r) {
  require(memchr(r->cause, '\0', sizeof r->cause) && memchr(r->job, '\0', sizeof r->job));
  require(memchr(r->host, '\0', sizeof r->host) && memchr(r->message, '\0', sizeof r->message));
  require(memchr(r->bad_host, '\0', sizeof r->bad_host) != NULL);
  require(memchr(r->gpu, '\0', sizeof r->gpu) && memchr(r->gpu_name, '\0', sizeof r->gpu_name));
  require(memchr(r->verdict, '\0', sizeof r->verdict) && memchr(r->reason, '\0', sizeof r->reason));
  if (r->kind == CORE_REC_GPU_HEALTH) require(r->host[0] && r->gpu[0] && core_gpu_verdict_known(r->verdict));
  require(r->n_hosts <= CORE_FR_MAX_HOSTS && (r->n_hosts == 0 || r->kind == CORE_REC_EXPOSURE));
  for (size_t i = 0; i < r->n_hosts; i++)
    require(r->hosts[i].host[0] && memchr(r->hosts[i].host, '\0', sizeof r->hosts[i].host) &&
            r->hosts[i].rank_hours >= 0 && r->hosts[i].rank_hours <= CORE_FR_MAX_RANK_HOURS);
  require(core_record_kind_name(r->kind) != NULL);
  if (r->kind == CORE_REC_EXPOSURE) require(r->rank_hours >= 0 && r->rank_hours <= CORE_FR_MAX_RANK_HOURS);
  if (r->kind == CORE_REC_RESTART) require(r->restart_s >= 0 && r->restart_s <= CORE_FR_MAX_RESTART_S);
  require(r->world_size >= 0);
}

/* What parses encodes, and parses again to the same fields. */
static void check_again(const core_failure_record *r) {
  json_t *o = NULL;
  ftl_diag d;
  if (r->kind == CORE_REC_FAILURE && !r->cause[0]) return; /* "cause":"" parses; the encoder wants one */
  require(core_failure_record_encode(r, &o, &d) == FTL_OK);
  char *text = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (!text) return;
  core_failure_record b;
  static core_fr_host hosts[CORE_FR_MAX_HOSTS];
  require(core_failure_record_parse_hosts(text, strlen(text), &b, hosts, CORE_FR_MAX_HOSTS, &d) == FTL_OK);
  free(text);
  require(b.kind == r->kind && b.wall_us == r->wall_us && b.attempt == r->attempt && b.world_size == r->world_size);
  require(!strcmp(b.cause, r->cause) && !strcmp(b.job, r->job) && !strcmp(b.host, r->host));
  require(!strcmp(b.gpu, r->gpu) && !strcmp(b.verdict, r->verdict) && b.n_hosts == r->n_hosts);
  for (size_t i = 0; i < b.n_hosts; i++) require(!strcmp(b.hosts[i].host, r->hosts[i].host));
}

/* One line, as the readers hand it over (core_jsonl_each_line). */
static ftl_err one_line(const char *line, size_t len, size_t line_no, void *ctx) {
  (void)line_no;
  (void)ctx;
  core_failure_record rec;
  ftl_diag d;
  static core_fr_host hosts[CORE_FR_MAX_HOSTS];
  if (core_failure_record_parse_hosts(line, len, &rec, hosts, CORE_FR_MAX_HOSTS, &d) == FTL_OK) {
    check_record(&rec);
    check_again(&rec);
  }
  return FTL_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)core_jsonl_each_line((const char *)data, size, one_line, NULL);
  return 0;
}
