/* eval/publish.h: publishing a gated run (docs/pipeline.md): re-verification, provenance, then
 * pipeline/'s export, package and registry. `ftl publish` and `ftl run`'s end both come here.
 * Not thread-safe for the same run directory. */
#ifndef FTL_EVAL_PUBLISH_H
#define FTL_EVAL_PUBLISH_H

#include <jansson.h>

#include "eval/inputs.h"
#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Publishes a run with a passing verdict: re-verifies the snapshot and the adapter against the
 * verdict, exports (PEFT), packages with the provenance, publishes to the locked registry and
 * promotes to its channel. The version id into id_out. FTL_ERR_STATE when the verdict did not
 * pass (nothing published). The provenance's training facts come from hooks->run_facts (hooks may
 * be NULL: unknown). */
ftl_err ev_publish_run(const char *run_dir, const json_t *given_spec, const ev_hooks *hooks, char id_out[65],
                       json_t **provenance_out, ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
