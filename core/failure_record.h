/* core/failure_record.h: the one codec of the failure ledger's record: a line of a run's
 * failures.jsonl (docs/formats/failures.md) or of a fleet ledger (docs/formats/fleet-ledger.md),
 * a `failure`, `exposure`, `restart` or `gpu_health` record (the last, and an exposure's per-host
 * `hosts`, only in fleet ledgers). Every writer (the launcher's ledger, the cadence's
 * fleet append) encodes here and every reader (the cadence's ledger loading, `ftl status`, the
 * publish provenance) parses here, so a field is spelled, typed and bounded in one place. The
 * cause names are core/failure_cause.h's table, looked up here.
 *
 * Not here: the append itself (core/jsonl.c), what a record means for the estimate (cadence/).
 * Internal to ftl (not installed). Thread-safe (no state). */
#ifndef FTL_CORE_FAILURE_RECORD_H
#define FTL_CORE_FAILURE_RECORD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The numbers are ftl_cadence_record_kind's (include/ftl/cadence.h). */
typedef enum core_record_kind {
  CORE_REC_FAILURE = 1,
  CORE_REC_EXPOSURE = 2,
  CORE_REC_RESTART = 3,
  CORE_REC_GPU_HEALTH = 4, /* a GPU's verdict changed during an attempt (fleet ledgers) */
} core_record_kind;

/* Exposure of one record: a million rank-hours is already 100k ranks for ten hours. */
#define CORE_FR_MAX_RANK_HOURS 1e9
/* One restart of more than a year is not a restart time but a clock gone wrong. */
#define CORE_FR_MAX_RESTART_S (86400.0 * 366)
/* A line is a few hundred bytes; a longer one is not ours. */
#define CORE_FR_MAX_LINE_BYTES 65536
/* An exposure's per-host breakdown: at most this many hosts in one record (a writer splits a larger
 * gang's into several records, whose exposures add up); 256 names of 63 bytes fit in a line. */
#define CORE_FR_MAX_HOSTS 256

/* One host's share of an exposure: its ranks × the attempt's wall time. */
typedef struct core_fr_host {
  char host[64];
  double rank_hours;
} core_fr_host;

/* The optional fields of a record, X(BIT, "name", TYPE, member): TYPE INT (int64_t), STR (a char
 * array) or REAL (double). A parsed record's `present` has CORE_FR_<BIT> for each field the line
 * had, and CORE_FR_RECORD for the "record" field (absent means "failure"). The six detail fields
 * (rank to message) are the launcher's failure records' (run ledger); on encode, each one whose
 * bit is set is written. */
#define CORE_FR_FIELD_MAP(X)                                                                                           \
  X(WALL_US, "wall_us", INT, wall_us)                                                                                  \
  X(JOB, "job", STR, job)                                                                                              \
  X(HOST, "host", STR, host)                                                                                           \
  X(ATTEMPT, "attempt", INT, attempt)                                                                                  \
  X(STEP, "step", INT, step)                                                                                           \
  X(WORLD_SIZE, "world_size", INT, world_size)                                                                         \
  X(CAUSE, "cause", STR, cause)                                                                                        \
  X(RANK, "rank", INT, rank)                                                                                           \
  X(EXIT_CODE, "exit_code", INT, exit_code)                                                                            \
  X(SIGNAL, "signal", INT, signal)                                                                                     \
  X(DETECT_LAG, "detect_lag_ms", REAL, detect_lag_ms)                                                                  \
  X(BAD_HOST, "bad_host", STR, bad_host)                                                                               \
  X(MESSAGE, "message", STR, message)                                                                                  \
  X(GPU, "gpu", STR, gpu)                                                                                              \
  X(GPU_NAME, "gpu_name", STR, gpu_name)                                                                               \
  X(GPU_INDEX, "gpu_index", INT, gpu_index)                                                                            \
  X(VERDICT, "verdict", STR, verdict)                                                                                  \
  X(REASON, "reason", STR, reason)                                                                                    \
  X(ADDRS, "addrs", STR, addrs)

enum {
  CORE_FR_IDX_RECORD,
#define CORE_FR_IDX_(bit, name, type, member) CORE_FR_IDX_##bit,
  CORE_FR_FIELD_MAP(CORE_FR_IDX_)
#undef CORE_FR_IDX_
  CORE_FR_IDX_HOSTS,
};
enum {
  CORE_FR_RECORD = 1u << CORE_FR_IDX_RECORD,
#define CORE_FR_BIT_(bit, name, type, member) CORE_FR_##bit = 1u << CORE_FR_IDX_##bit,
  CORE_FR_FIELD_MAP(CORE_FR_BIT_)
#undef CORE_FR_BIT_
  CORE_FR_HOSTS = 1u << CORE_FR_IDX_HOSTS, /* an exposure's "hosts" */
};
#define CORE_FR_DETAIL                                                                                                 \
  (CORE_FR_RANK | CORE_FR_EXIT_CODE | CORE_FR_SIGNAL | CORE_FR_DETECT_LAG | CORE_FR_BAD_HOST | CORE_FR_MESSAGE)

/* One record. Strings are copied (truncated to fit, NUL-terminated). */
typedef struct core_failure_record {
  core_record_kind kind;
  unsigned present;   /* CORE_FR_* (parse: the fields the line had; encode: the detail fields to write) */
  char cause[32];     /* failures; restarts: the failure's cause ("" when absent) */
  char job[128];      /* "" when absent */
  char host[64];      /* "" when absent */
  int64_t wall_us;    /* 0 when absent */
  int64_t attempt;    /* -1 when absent */
  int64_t step;       /* -1 when absent (restarts: the step the gang restored) */
  int64_t world_size; /* 0 when absent */
  double rank_hours;  /* exposure only */
  double restart_s;   /* restarts only */
  /* The launcher's failure detail: the root-cause rank (-1: none known), its exit code and signal,
   * the detection lag, the host left out and the sentence printed. */
  int64_t rank, exit_code, signal;
  double detect_lag_ms;
  char bad_host[64];
  char message[1024];
  /* The GPU: a gpu_failed failure's (gpu, when known) and a gpu_health record's (all five; gpu,
   * verdict and host are required there). */
  char gpu[96];       /* NVML's UUID; longer is refused, not cut: it is an identity */
  char gpu_name[96];  /* NVML's name, cut to fit */
  int64_t gpu_index;  /* NVML's index; -1 when absent */
  char verdict[16];   /* "healthy", "degraded" or "failed" */
  char reason[256];   /* the verdict's reason, cut to fit */
  /* The host's IPv4 addresses as its agents reported them, space-separated (failures, gpu_health;
   * optional): a hostfile may name the host by address. Cut at a whole address to fit. */
  char addrs[256];
  /* An exposure's per-host breakdown. Encode: n_hosts entries of hosts (borrowed; none when 0).
   * Parse: n_hosts is how many the line had; hosts is NULL unless the caller gave a buffer
   * (core_failure_record_parse_hosts), which then holds them. */
  const core_fr_host *hosts;
  size_t n_hosts;
} core_failure_record;

/* An empty record of this kind: attempt, step, rank and gpu_index -1, the rest zero. */
void core_failure_record_init(core_failure_record *r, core_record_kind kind);

/* The record as a ledger line's JSON object (a new reference in *out), "version" first; wall_us as
 * given. FTL_ERR_INVAL for a failure without a cause, an unknown kind, rank_hours or restart_s out
 * of their bounds, a gpu_health record without host, gpu or a known verdict, more than
 * CORE_FR_MAX_HOSTS hosts or a host's share out of bounds; FTL_ERR_NOMEM. */
ftl_err core_failure_record_encode(const core_failure_record *r, json_t **out, ftl_diag *d);

/* Parses one line (without its newline; need not be NUL-terminated). Unknown fields are ignored.
 * FTL_ERR_CORRUPT for a line that is not a JSON object, lacks a required field or has a field of
 * the wrong type (the message names the field); FTL_ERR_UNSUPPORTED for another version. */
ftl_err core_failure_record_parse(const char *line, size_t len, core_failure_record *out, ftl_diag *d);

/* The same, and an exposure's "hosts" copied into hosts[0..max) (out->hosts points there; a line
 * never has more than CORE_FR_MAX_HOSTS, so a buffer that long holds any). */
ftl_err core_failure_record_parse_hosts(const char *line, size_t len, core_failure_record *out, core_fr_host *hosts,
                                        size_t max, ftl_diag *d);

/* Sets r->addrs from a space-separated list of addresses, cut at a whole address to fit. */
void core_failure_record_set_addrs(core_failure_record *r, const char *addrs);

/* 1 when verdict is "healthy", "degraded" or "failed". */
int core_gpu_verdict_known(const char *verdict);

/* One field of a parsed record by its ledger name, as JSON (a new reference), or NULL when the line
 * did not have it (or the name is not a field of the record's kind): what `ftl status` shows of
 * a record is the fields it had. */
json_t *core_failure_record_get(const core_failure_record *r, const char *key);

/* "failure", "exposure", "restart", "gpu_health"; NULL for another kind. */
const char *core_record_kind_name(core_record_kind kind);

/* The cause names of core/failure_cause.h, in its order: the i-th (NULL past the end), and the
 * index of a name (-1 when it is not one). */
const char *core_failure_cause_name(int i);
int core_failure_cause_index(const char *name);

#ifdef __cplusplus
}
#endif
#endif
