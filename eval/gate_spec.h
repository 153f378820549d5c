/* eval/gate_spec.h: the gate spec, locked at submission (docs/pipeline.md,
 * docs/formats/snapshot.md "gate"): the job spec's `eval:` and `registry:` sections in a canonical
 * JSON form (sorted keys, resolved paths), its shape, the comparison of two (naming the first
 * field that differs), the placeholders of `eval.args`, and the check of a run's snapshot against
 * the gate lock in the registry (pipeline/gate_lock.h).
 *
 * Not here: running the gate (eval/gate.h), the verdict (eval/verdict.h). Not thread-safe for the
 * same objects; no state of its own. */
#ifndef FTL_EVAL_GATE_SPEC_H
#define FTL_EVAL_GATE_SPEC_H

#include <jansson.h>
#include <stddef.h>

#include "ftl/error.h"
#include "eval/inputs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The placeholders of `eval.args`; any other {word} in an argument is an error. */
typedef struct ev_gate_placeholders {
  const char *adapter; /* {adapter}: RUNDIR/final */
  const char *data;    /* {data}: the eval data input's path */
  const char *metrics; /* {metrics}: where the evaluator writes its metrics file */
  const char *base;    /* {base}: the base model input's path ("" when eval.base is not set) */
  const char *run_dir; /* {run_dir} */
} ev_gate_placeholders;

/* Expands the placeholders of one argument into a new string (*out, ftl_free). FTL_ERR_SPEC
 * naming an unknown placeholder. */
ftl_err ev_gate_expand(const char *arg, const ev_gate_placeholders *p, char **out, ftl_diag *d);

/* Checks a canonical gate spec's shape: {"eval": {...}, "registry": {...}} with every field
 * present and of the right type (see docs/formats/snapshot.md, "gate"). */
ftl_err ev_gate_spec_check(const json_t *gate, ftl_diag *d);

/* Compares two canonical gate specs. FTL_OK when equal; otherwise FTL_ERR_SPEC with the first
 * differing field named ("eval.threshold: locked at submission 0.9, given 0.95") and its dotted
 * path in field_out (may be NULL). */
ftl_err ev_gate_spec_compare(const json_t *locked, const json_t *given, char *field_out, size_t field_size,
                              ftl_diag *d);

/* The job's canonical gate spec ({"eval": ..., "registry": ...}, docs/formats/snapshot.md), or
 * NULL in *out when the job has no `eval:` section. Relative registry paths are made absolute
 * against the current folder; a missing registry path falls back to $FTL_REGISTRY. FTL_ERR_SPEC
 * naming the field for a gate spec that cannot work (eval.data naming no input, an unknown
 * placeholder, min_gain without a registry). */
ftl_err ev_gate_spec_of(const ev_gate_fields *job, json_t **out, ftl_diag *d);

/* A job spec's "NAME=VALUE" (inputs:, eval.env): the name into name (truncated to size), the value
 * returned ("" without '='). */
const char *ev_split_kv(const char *kv, char *name, size_t size);

/* Compares a run's snapshot with the gate lock in the registry its gate names (pipeline/gate_lock.h):
 * FTL_ERR_CORRUPT naming the first field that differs (the gate spec by its dotted path, the
 * evaluator, an input's digest or link, the snapshot's digest). *lock_out gets the record (a new
 * reference), or NULL with FTL_OK when the gate has no registry (then nothing but the run directory
 * vouches for the gate). */
ftl_err ev_gate_lock_check(const char *run_dir, const json_t *snap, json_t **lock_out, ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
