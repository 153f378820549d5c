/* launcher/eval_hooks.c: the launcher's side of eval (eval/inputs.h). eval never calls up into the
 * launcher (docs/architecture.md, "Folders run one way"); what it needs from it comes through these
 * hooks: a job spec's gate for `ftl gate/publish --spec` (the launcher's one job spec parser), a
 * run's facts for a publication's provenance (the launcher's one fold of events.jsonl), and the
 * event log that records the gate's and the publish's outcome at the end of `ftl run`. */
#include "launcher/eval_hooks.h"

#include "launcher/jobspec.h"
#include "launcher/runview.h"

#ifdef FTL_HAVE_EVAL
#include "eval/gate_spec.h"

static ftl_err gate_of_spec(const char *spec_path, json_t **gate_out, ftl_diag *d) {
  ln_job *job = NULL;
  *gate_out = NULL;
  ftl_err rc = ln_job_parse_file(spec_path, &job, d);
  if (rc) return rc;
  ev_gate_fields fields = ln_job_gate_fields(job);
  rc = ev_gate_spec_of(&fields, gate_out, d);
  ln_job_destroy(job);
  return rc;
}
#endif

static void run_facts(const char *run_dir, ev_run_facts *out) {
  ln_runview rv;
  ftl_diag ignored;
  ln_runview_init(&rv, 0);
  if (ln_runview_load(&rv, run_dir, &ignored) == FTL_OK) {
    out->attempts = rv.attempts_ended;
    out->last_committed_step = ln_runview_last_committed(&rv);
    out->have_goodput = rv.have_goodput;
    if (rv.have_goodput) {
      out->goodput_pct = rv.gp_pct;
      out->wall_ms = rv.gp_wall_ms;
    }
  }
  ln_runview_free(&rv);
}

static void event(void *ctx, const char *type, json_t *fields) { ln_events_write(ctx, type, 0, fields); }

ev_hooks ln_eval_hooks(ln_events *events) {
  return (ev_hooks){
#ifdef FTL_HAVE_EVAL
      .gate_of_spec = gate_of_spec,
#endif
      .run_facts = run_facts,
      .event = events ? event : NULL,
      .event_ctx = events};
}
