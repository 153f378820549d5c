/* eval/gate.h: the evaluation gate, locked at submission (docs/pipeline.md).
 *
 * The gate spec is the job spec's `eval:` and `registry:` sections in a canonical JSON form
 * (sorted keys, resolved paths), recorded with its SHA-256 in RUNDIR/snapshot.json when the run is
 * submitted. `ftl gate RUNDIR` then:
 *   1. loads the snapshot (its own digest checked) and the locked gate spec from it; a gate spec
 *      given with --spec that differs is refused, naming the first differing field;
 *   2. re-verifies every input of the snapshot (a file changed after submission is named);
 *   3. checks the final adapter is committed (pipeline/adapter_commit.h);
 *   4. runs the evaluator with an environment built from scratch and a deadline;
 *   5. reads its metrics file (eval/metrics.h), compares the metric with the threshold (and the
 *      gain over the adapter in the baseline channel, when min_gain is set), inclusively;
 *   6. writes RUNDIR/verdict.json atomically (docs/formats/verdict.md).
 * Result: 0 passed, 1 failed (including a missing or non-finite metric), 2 error (nothing
 * evaluated, no verdict written).
 *
 * Not here: the job spec's parser (launcher/jobspec.c), publishing (eval/eval_cli.c with
 * pipeline/). Not thread-safe for the same run directory; not collective. */
#ifndef FTL_EVAL_GATE_H
#define FTL_EVAL_GATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "ftl/error.h"

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
