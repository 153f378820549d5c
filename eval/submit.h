/* eval/submit.h: the hooks `ftl run` calls around training when the job spec has `inputs:` and
 * `eval:` (docs/pipeline.md): the snapshot, locked with the gate spec, before any rank starts; the
 * gate, then publish and promote, after the ranks succeeded. Not thread-safe. */
#ifndef FTL_EVAL_SUBMIT_H
#define FTL_EVAL_SUBMIT_H

#include <limits.h>

#include "ftl/error.h"
#include "eval/inputs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Before the first rank of `ftl run`: hashes the job's inputs into RUNDIR/snapshot.json with the
 * gate spec (or, when the run directory already has one, verifies the inputs and the gate against
 * it: a resumed run may not see other data), and returns in *vars (zeroed by the caller; freed with
 * ev_rank_vars_free, also on error) FTL_SNAPSHOT and FTL_INPUT_<NAME>, the variables the caller
 * gives the ranks. Nothing to do for a job without `inputs:` and `eval:`. */
ftl_err ev_submit_prepare(const ev_gate_fields *job, const char *run_dir, ev_rank_vars *vars, ftl_diag *d);
void ev_rank_vars_free(ev_rank_vars *vars);

/* What the end of a run did, for the run's finish record (launcher/finish.h). */
typedef struct ev_finish_result {
  int gate;                 /* 1 passed, -1 failed, 0 not run or could not run */
  char metric[128];
  double value;
  int published;            /* a version is in the registry: published now (or already there, the same) */
  char registry[PATH_MAX];  /* as the locked gate names it */
  char name[128];
  char channel[128];
  char version[65];
} ev_finish_result;

/* After the training finished: the gate. Prints the verdict; *out says it (gate 1 passed, -1
 * failed, 0 could not run). Returns ftl's exit code: 0 passed, 1 failed or could not run. Nothing
 * to do without `eval:`. The outcome is recorded as a "gate" event through hooks->event. */
int ev_submit_gate(const ev_gate_fields *job, const char *run_dir, const ev_hooks *hooks, ev_finish_result *out);

/* After the gate passed (now, or in an earlier `ftl run` of the run directory: the publish checks
 * the verdict again itself): with a `registry:` section, publish and promote. Prints the version;
 * fills out's published fields. Returns 0 published (or nothing to publish to), 5 publishing
 * failed. Publishing the same gated adapter again makes the same version (a no-op). The run's facts
 * come from hooks->run_facts; the outcome is recorded as a "publish" event. */
int ev_submit_publish(const ev_gate_fields *job, const char *run_dir, const ev_hooks *hooks, ev_finish_result *out);

/* Whether the registry the run's locked gate names holds NAME@VERSION (registry must be that
 * registry's path, as the gate names it): a run's recorded publication is believed only so. */
int ev_submit_published(const char *run_dir, const char *registry, const char *name, const char *version);

#ifdef __cplusplus
}
#endif
#endif
