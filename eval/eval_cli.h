/* eval/eval_cli.h: the pipeline's commands and the hooks `ftl run` calls around training
 * (docs/pipeline.md, docs/cli.md).
 *
 *   ftl gate RUNDIR [--spec JOB.yaml] [--json] [--quiet]      0 passed, 1 failed, 2 error
 *   ftl publish RUNDIR [--spec JOB.yaml] [--json]            0 published, 1 verdict not passed, 2 error
 *
 * `ftl run JOB.yaml` calls ftl_submit_prepare before any rank starts (the snapshot, locked with the
 * gate spec) and ftl_submit_finish after the ranks succeeded (gate, then publish and promote).
 * Only the launcher's main chooses exit codes; these return them. Not thread-safe. */
#ifndef FTL_EVAL_CLI_H
#define FTL_EVAL_CLI_H

#include <jansson.h>

#include "ftl/error.h"
#include "launcher/events.h"
#include "launcher/jobspec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The commands' help texts (`ftl help gate`, `ftl gate --help`). */
extern const char ftl_gate_help[];
extern const char ftl_publish_help[];

int ftl_cmd_gate(int argc, char **argv);
int ftl_cmd_publish(int argc, char **argv);

/* The job's canonical gate spec ({"eval": ..., "registry": ...}, docs/formats/snapshot.md), or
 * NULL in *out when the job has no `eval:` section. Relative registry paths are made absolute
 * against the current folder; a missing registry path falls back to $FTL_REGISTRY. FTL_ERR_SPEC
 * naming the field for a gate spec that cannot work (eval.data naming no input, an unknown
 * placeholder, min_gain without a registry). */
ftl_err ftl_gate_spec_from_job(const ftl_job *job, json_t **out, ftl_diag *d);

/* Before the first rank of `ftl run`: hashes the job's inputs into RUNDIR/snapshot.json with the
 * gate spec (or, when the run directory already has one, verifies the inputs and the gate against
 * it: a resumed run may not see other data), and adds FTL_SNAPSHOT and FTL_INPUT_<NAME> to the
 * ranks' environment (job->env). Nothing to do for a job without `inputs:` and `eval:`. */
ftl_err ftl_submit_prepare(ftl_job *job, const char *run_dir, ftl_diag *d);

/* After the ranks succeeded: the gate, then (on a pass, with a `registry:` section) publish and
 * promote. Prints the verdict and the version. Returns ftl's exit code: 0 passed (and published),
 * 1 the gate failed or could not run (nothing published), 5 publishing failed. */
int ftl_submit_finish(const ftl_job *job, const char *run_dir, ftl_events *events);

/* Publishes a run with a passing verdict: re-verifies the snapshot and the adapter against the
 * verdict, exports (PEFT), packages with the provenance, publishes to the locked registry and
 * promotes to its channel. The version id into id_out. FTL_ERR_STATE when the verdict did not
 * pass (nothing published). */
ftl_err ftl_publish_run(const char *run_dir, const json_t *given_spec, char id_out[65], json_t **provenance_out,
                        ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
