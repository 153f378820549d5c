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
 * Here: running it (the evaluator under a deadline) and the run directory's gate lock. The gate
 * spec's shape and lock check are eval/gate_spec.h's, the decision eval/decide.h's, the verdict's
 * format eval/verdict.h's. Not here: the job spec's parser (launcher/jobspec.c), publishing
 * (eval/publish.c with pipeline/). Not thread-safe for the same run directory; not collective. */
#ifndef FTL_EVAL_GATE_H
#define FTL_EVAL_GATE_H

#include <jansson.h>
#include <stdbool.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ev_gate_result {
  FTL_GATE_PASSED = 0,
  FTL_GATE_FAILED = 1,
  FTL_GATE_ERROR = 2,
} ev_gate_result;

typedef struct ev_gate_opts {
  const char *run_dir;      /* the run directory */
  const json_t *given_spec; /* a canonical gate spec to check against the locked one, or NULL */
  bool quiet;               /* no progress lines on stderr */
} ev_gate_opts;

/* Runs the gate (steps above). *verdict_out (may be NULL) gets the verdict (a new reference) when
 * the result is PASSED or FAILED. On ERROR, d says why. */
ev_gate_result ev_gate_run(const ev_gate_opts *o, json_t **verdict_out, ftl_diag *d);

/* RUNDIR/gate/lock: an exclusive flock taken within FTL_GATE_LOCK_TIMEOUT_S (default 30 s); the
 * holder writes "what: pid N on HOST since TIME" into it, and a waiter that passes the deadline
 * gets FTL_ERR_TIMEOUT naming that holder. */
ftl_err ev_gate_rundir_lock(const char *run_dir, const char *what, int *fd_out, ftl_diag *d);
void ev_gate_rundir_unlock(int fd);

#ifdef __cplusplus
}
#endif
#endif
