/* eval/gate.h: the evaluation gate, locked at submission (docs/pipeline.md).
 *
 * The gate spec is the job spec's `eval:` and `registry:` sections in a canonical JSON form
 * (sorted keys, resolved paths), recorded with its SHA-256 in RUNDIR/snapshot.json when the run is
 * submitted, and (with a registry: section) in the registry's gate lock (pipeline/gate_lock.h).
 * `ftl gate RUNDIR` then:
 *   0. takes RUNDIR/gate/lock (one gate or publish per run directory, with a deadline, naming the
 *      holder) and removes any earlier verdict, so an erring gate leaves none;
 *   1. loads the snapshot (its digest and gate_sha256 checked) and the locked gate spec from it; a
 *      gate spec given with --spec that differs is refused, naming the first differing field; the
 *      snapshot is compared with the registry's gate lock, naming the first field that differs;
 *   2. re-verifies every input of the snapshot (a file changed after submission is named);
 *   3. checks the final adapter is committed (pipeline/adapter_commit.h);
 *   4. re-hashes the evaluator pinned at submission and runs it by its absolute path, with an
 *      environment built from scratch, a deadline, its output capped, and every process it left
 *      behind ended (the gate is a child subreaper while it runs);
 *   5. reads its metrics file (eval/metrics.h), compares the metric with the threshold (and the
 *      gain over the adapter in the baseline channel, when min_gain is set), inclusively;
 *   6. writes RUNDIR/verdict.json atomically (docs/formats/verdict.md).
 * Result: 0 passed, 1 failed (including a missing or non-finite metric), 2 error (nothing
 * evaluated, no verdict left).
 *
 * Not here: the job spec's parser (launcher/jobspec.c), publishing (eval/eval_cli.c with
 * pipeline/). Not thread-safe for the same run directory; not collective. */
#ifndef FTL_EVAL_GATE_H
#define FTL_EVAL_GATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "ftl/error.h"
#include "pipeline/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FTL_VERDICT_VERSION 1
#define FTL_VERDICT_MAX_BYTES (1u << 20)

typedef enum ftl_gate_result {
  FTL_GATE_PASSED = 0,
  FTL_GATE_FAILED = 1,
  FTL_GATE_ERROR = 2,
} ftl_gate_result;

/* The placeholders of `eval.args`; any other {word} in an argument is an error. */
typedef struct ftl_gate_placeholders {
  const char *adapter; /* {adapter}: RUNDIR/final */
  const char *data;    /* {data}: the eval data input's path */
  const char *metrics; /* {metrics}: where the evaluator writes its metrics file */
  const char *base;    /* {base}: the base model input's path ("" when eval.base is not set) */
  const char *run_dir; /* {run_dir} */
} ftl_gate_placeholders;

/* Expands the placeholders of one argument into a new string (*out, ftl_free). FTL_ERR_SPEC
 * naming an unknown placeholder. */
ftl_err ftl_gate_expand(const char *arg, const ftl_gate_placeholders *p, char **out, ftl_diag *d);

/* Checks a canonical gate spec's shape: {"eval": {...}, "registry": {...}} with every field
 * present and of the right type (see docs/formats/snapshot.md, "gate"). */
ftl_err ftl_gate_spec_check(const json_t *gate, ftl_diag *d);

/* Compares two canonical gate specs. FTL_OK when equal; otherwise FTL_ERR_SPEC with the first
 * differing field named ("eval.threshold: locked at submission 0.9, given 0.95") and its dotted
 * path in field_out (may be NULL). */
ftl_err ftl_gate_spec_compare(const json_t *locked, const json_t *given, char *field_out, size_t field_size,
                              ftl_diag *d);

typedef struct ftl_gate_opts {
  const char *run_dir;      /* the run directory */
  const json_t *given_spec; /* a canonical gate spec to check against the locked one, or NULL */
  bool quiet;               /* no progress lines on stderr */
} ftl_gate_opts;

/* Runs the gate (steps above). *verdict_out (may be NULL) gets the verdict (a new reference) when
 * the result is PASSED or FAILED. On ERROR, d says why. */
ftl_gate_result ftl_gate_run(const ftl_gate_opts *o, json_t **verdict_out, ftl_diag *d);

/* The adapter in the gate's baseline channel and its value of the gate's metric (from the verdict
 * it was published with). present = 0 only when the registry is there and the channel has no
 * pointer at all (the adapter's first publish); a missing registry root, a pointer to a version that
 * is gone or a version without a readable verdict are errors. */
typedef struct ftl_gate_baseline {
  int present;
  char channel[FTL_REGISTRY_NAME_MAX + 1];
  char version[65];
  int has_value; /* the baseline's verdict has a finite value of this metric */
  double value;
} ftl_gate_baseline;
ftl_err ftl_gate_find_baseline(const json_t *gate, ftl_gate_baseline *b, ftl_diag *d);

/* The decision, from a canonical gate spec and a value: the threshold (inclusive), then, when
 * eval.min_gain is set and b is present, the gain over it. Returns passed (1) or not; the gain
 * into *gain_out (*has_gain set) and why it failed into reason. The gate and `ftl publish` (which
 * re-derives the verdict instead of trusting its `passed`) both decide here. */
int ftl_gate_decide(const json_t *gate, int value_ok, double value, const ftl_gate_baseline *b, double *gain_out,
                    int *has_gain, char *reason, size_t reason_size);

/* Compares a run's snapshot with the gate lock in the registry its gate names (pipeline/gate_lock.h):
 * FTL_ERR_CORRUPT naming the first field that differs (the gate spec by its dotted path, the
 * evaluator, an input's digest or link, the snapshot's digest). *lock_out gets the record (a new
 * reference), or NULL with FTL_OK when the gate has no registry (then nothing but the run directory
 * vouches for the gate). */
ftl_err ftl_gate_lock_check(const char *run_dir, const json_t *snap, json_t **lock_out, ftl_diag *d);

/* RUNDIR/gate/lock: an exclusive flock taken within FTL_GATE_LOCK_TIMEOUT_S (default 30 s); the
 * holder writes "what: pid N on HOST since TIME" into it, and a waiter that passes the deadline
 * gets FTL_ERR_TIMEOUT naming that holder. */
ftl_err ftl_gate_rundir_lock(const char *run_dir, const char *what, int *fd_out, ftl_diag *d);
void ftl_gate_rundir_unlock(int fd);

/* Parses and checks a verdict (the reader `ftl publish` and the fuzz target use): version, types
 * of every field, digests as 64 hex digits. A new reference in *out. */
ftl_err ftl_verdict_parse(const char *data, size_t size, json_t **out, ftl_diag *d);
/* Reads RUNDIR/verdict.json and parses it; FTL_ERR_NOTFOUND when there is none. */
ftl_err ftl_verdict_load(const char *run_dir, json_t **out, ftl_diag *d);
/* Writes RUNDIR/verdict.json atomically (2-space indent, sorted keys). */
ftl_err ftl_verdict_write(const char *run_dir, const json_t *verdict, ftl_diag *d);

/* One line for people: "gate passed: exact_match 0.998 >= 0.9 (threshold)". */
void ftl_verdict_summary(const json_t *verdict, char *out, size_t size);

/* The SHA-256 of every file of an adapter folder (sorted by name) as [{path, size, sha256}], and
 * the SHA-256 of that list's canonical JSON into hex_out. */
ftl_err ftl_gate_hash_folder(const char *dir, json_t **files_out, char hex_out[65], ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
