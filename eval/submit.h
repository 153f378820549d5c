/* eval/submit.h: the hooks `ftl run` calls around training when the job spec has `inputs:` and
 * `eval:` (docs/pipeline.md): the snapshot, locked with the gate spec, before any rank starts; the
 * gate, then publish and promote, after the ranks succeeded. Not thread-safe. */
#ifndef FTL_EVAL_SUBMIT_H
#define FTL_EVAL_SUBMIT_H

#include "ftl/error.h"
#include "launcher/events.h"
#include "launcher/jobspec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Before the first rank of `ftl run`: hashes the job's inputs into RUNDIR/snapshot.json with the
 * gate spec (or, when the run directory already has one, verifies the inputs and the gate against
 * it: a resumed run may not see other data), and adds FTL_SNAPSHOT and FTL_INPUT_<NAME> to the
 * ranks' environment (job->env). Nothing to do for a job without `inputs:` and `eval:`. */
ftl_err ev_submit_prepare(ftl_job *job, const char *run_dir, ftl_diag *d);

/* After the ranks succeeded: the gate, then (on a pass, with a `registry:` section) publish and
 * promote. Prints the verdict and the version. Returns ftl's exit code: 0 passed (and published),
 * 1 the gate failed or could not run (nothing published), 5 publishing failed. */
int ev_submit_finish(const ftl_job *job, const char *run_dir, ftl_events *events);

#ifdef __cplusplus
}
#endif
#endif
