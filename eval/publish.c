/* eval/publish.c: publishing a gated run (see publish.h, docs/pipeline.md): re-verification,
 * provenance, then pipeline/'s export, package and registry. `ftl publish` and the end of
 * `ftl run` (eval/submit.c) both publish here.
 *
 * Publishing trusts no verdict: it takes the run directory's gate lock, checks the snapshot against
 * the registry's gate lock, and re-derives pass or fail from the verdict's recorded value and the
 * registry's copy of the gate (eval/decide.c). The package gets a copy of the verdict without its
 * timing fields, so that re-gating and re-publishing the same adapter makes the same package,
 * hence the same version.
 *
 * Not here: the gate (eval/gate.c), the export/package/registry themselves (pipeline/). */
#include "eval/publish.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "core/failure_record.h"
#include "core/jsonl.h"
#include "core/rundir.h"
#include "eval/decide.h"
#include "eval/gate.h"
#include "eval/gate_spec.h"
#include "eval/verdict.h"
#include "ftl/core.h"
#include "ftl/ftl.h"
#include "pipeline/package.h"
#include "pipeline/peft.h"
#include "pipeline/registry.h"
#include "pipeline/snapshot.h"

/* ---- provenance --------------------------------------------------------------------------- */

/* A failure record of failures.jsonl, read by the ledger's one codec (core/failure_record.c); a
 * malformed line is not counted. */
static ftl_err failure_line(const char *line, size_t len, size_t line_no, void *ctx) {
  (void)line_no;
  core_failure_record rec;
  ftl_diag ignored;
  if (core_failure_record_parse(line, len, &rec, &ignored) == FTL_OK && rec.kind == CORE_REC_FAILURE)
    (*(int *)ctx)++;
  return FTL_OK;
}

/* Attempts, the last committed checkpoint step and the goodput from the caller's fold of the event
 * log (hooks->run_facts: the launcher's one reader of events.jsonl); failures from failures.jsonl.
 * Missing logs leave the defaults (a run directory made by hand in a test). */
static void read_facts(const char *run_dir, const ev_hooks *hooks, ev_run_facts *f, int *failures) {
  memset(f, 0, sizeof *f);
  f->last_committed_step = -1;
  *failures = 0;
  if (hooks && hooks->run_facts) hooks->run_facts(run_dir, f);
  char path[PATH_MAX];
  char *data = NULL;
  size_t size = 0;
  ftl_diag ignored;
  if (!core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_FAILURES) &&
      !core_jsonl_read(path, 64u << 20, 5000, &data, &size, &ignored)) {
    core_jsonl_each_line(data, size, failure_line, failures);
    ftl_free(data);
  }
}

static json_t *provenance(const char *run_dir, const ev_hooks *hooks, const json_t *snap, const json_t *verdict,
                          const json_t *lock) {
  const json_t *gate = pl_snapshot_gate(snap);
  const json_t *ev = json_object_get(gate, "eval"), *reg = json_object_get(gate, "registry");
  json_t *inputs = json_object();
  const json_t *arr = json_object_get(snap, "inputs");
  for (size_t i = 0; i < json_array_size(arr); i++) {
    const json_t *e = json_array_get(arr, i);
    json_object_set_new(inputs, json_string_value(json_object_get(e, "name")),
                        json_pack("{s:s, s:s, s:O}", "sha256", json_string_value(json_object_get(e, "sha256")), "kind",
                                  json_string_value(json_object_get(e, "kind")), "size", json_object_get(e, "size")));
  }
  const char *base_name = json_string_value(json_object_get(ev, "base"));
  ev_run_facts f;
  int failures;
  read_facts(run_dir, hooks, &f, &failures);
  const json_t *pinned = pl_snapshot_evaluator(snap);
  json_t *p = json_pack(
      "{s:i, s:s, s:s, s:s, s:s, s:s, s:{s:s?, s:s?}, s:{s:s, s:o}, s:s, s:{s:s, s:O, s:O, s:s, s:b},"
      " s:{s:I, s:i, s:i, s:f, s:f}, s:s, s:s}",
      "version", 1, "ftl_version", FTL_VERSION_STRING, "job", json_string_value(json_object_get(snap, "job")),
      "job_spec_hash", json_string_value(json_object_get(snap, "job_spec_hash")), "gate_spec_sha256",
      pl_snapshot_gate_sha256(snap), "adapter_sha256",
      json_string_value(json_object_get(json_object_get(verdict, "digests"), "adapter")), "base_model", "input",
      base_name, "sha256", base_name ? pl_snapshot_input_sha256(snap, base_name) : NULL, "snapshot", "digest",
      pl_snapshot_digest(snap), "inputs", inputs, "run_dir", run_dir, "gate", "metric",
      json_string_value(json_object_get(verdict, "metric")), "value", json_object_get(verdict, "value"), "threshold",
      json_object_get(verdict, "threshold"), "direction", json_string_value(json_object_get(verdict, "direction")),
      "passed", json_is_true(json_object_get(verdict, "passed")), "training", "last_checkpoint_step",
      (json_int_t)f.last_committed_step, "attempts", f.attempts, "failures", failures, "goodput_pct", f.goodput_pct,
      "wall_ms", f.wall_ms, "registry_name", json_string_value(json_object_get(reg, "name")), "registry_channel",
      json_string_value(json_object_get(reg, "channel")));
  /* Which evaluator judged it and which registry record locked the gate: no timestamps, so the
   * same adapter re-gated gives the same provenance. */
  if (p && pinned)
    json_object_set_new(
        p, "evaluator",
        json_pack("{s:O, s:O}", "path", json_object_get(pinned, "path"), "sha256", json_object_get(pinned, "sha256")));
  if (p && lock)
    json_object_set_new(
        p, "gate_lock",
        json_pack("{s:O, s:O}", "run_id", json_object_get(lock, "run_id"), "digest", json_object_get(lock, "digest")));
  return p;
}

/* ---- publishing ------------------------------------------------------------------------------ */

ftl_err ev_publish_run(const char *run_dir, const json_t *given_spec, const ev_hooks *hooks, char id_out[65],
                       json_t **provenance_out,
                        ftl_diag *d) {
  json_t *snap = NULL, *verdict = NULL, *files = NULL, *prov = NULL, *lock = NULL;
  char adapter_hex[65], final_dir[PATH_MAX], export_dir[PATH_MAX], pkg_dir[PATH_MAX], pkg_path[PATH_MAX];
  char pkg_verdict[PATH_MAX];
  int run_lock = -1;
  ftl_err rc = ev_gate_rundir_lock(run_dir, "ftl publish", &run_lock, d);
  if (rc) goto out;
  if ((rc = pl_snapshot_load(run_dir, &snap, d))) goto out;
  const json_t *gate = pl_snapshot_gate(snap);
  if (!gate) {
    rc = ftl_diag_fail(d, FTL_ERR_STATE, "%s was submitted without an eval: section; only a gated adapter is published",
                       run_dir);
    goto out;
  }
  if ((rc = ev_gate_spec_check(gate, d))) goto out;
  if (given_spec && (rc = ev_gate_spec_compare(gate, given_spec, NULL, 0, d))) goto out;
  const json_t *reg = json_object_get(gate, "registry");
  if (!json_is_object(reg)) {
    rc = ftl_diag_fail(d, FTL_ERR_SPEC, "the locked gate has no registry: section; nothing to publish to");
    goto out;
  }
  if ((rc = ev_gate_lock_check(run_dir, snap, &lock, d))) goto out;
  if ((rc = pl_snapshot_verify(snap, d))) goto out;
  rc = ev_verdict_load(run_dir, &verdict, d);
  if (rc == FTL_ERR_NOTFOUND) {
    rc = ftl_diag_fail(d, FTL_ERR_STATE, "%s has no verdict.json: run `ftl gate %s` first", run_dir, run_dir);
    goto out;
  }
  if (rc) goto out;
  const json_t *dg = json_object_get(verdict, "digests");
  const json_t *lev = json_object_get(json_object_get(lock, "gate"), "eval");
  const char *base_name = json_string_value(json_object_get(lev, "base"));
  const char *base_sha = base_name ? pl_snapshot_input_sha256(snap, base_name) : NULL;
  if (strcmp(json_string_value(json_object_get(dg, "gate_spec")), pl_snapshot_gate_sha256(snap)) ||
      strcmp(json_string_value(json_object_get(dg, "snapshot")), pl_snapshot_digest(snap)) ||
      strcmp(json_string_value(json_object_get(dg, "eval_data")),
             pl_snapshot_input_sha256(snap, json_string_value(json_object_get(lev, "data")))) ||
      (base_sha && !(json_string_value(json_object_get(dg, "base")) &&
                     !strcmp(json_string_value(json_object_get(dg, "base")), base_sha)))) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "the verdict was not made with this run's snapshot and locked gate");
    goto out;
  }
  /* The verdict's `passed` is not trusted: the decision is made again from its value and the
   * registry's copy of the gate. */
  if ((rc = ev_verdict_rederive(json_object_get(lock, "gate"), verdict, d))) goto out;
  if (core_rundir_path(final_dir, sizeof final_dir, run_dir, FTL_RUNDIR_FINAL) ||
      core_rundir_path(export_dir, sizeof export_dir, run_dir, FTL_RUNDIR_EXPORT) ||
      core_rundir_path(pkg_dir, sizeof pkg_dir, run_dir, FTL_RUNDIR_PACKAGE) ||
      ftl_fmt(pkg_verdict, sizeof pkg_verdict, "%s/%s", pkg_dir, FTL_PACKAGE_VERDICT) ||
      ftl_fmt(pkg_path, sizeof pkg_path, "%s/%s", pkg_dir, FTL_PACKAGE_FILE)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", run_dir);
    goto out;
  }
  if ((rc = pl_folder_digest(final_dir, PL_FOLDER_FLAT, &files, adapter_hex, d))) goto out;
  if (strcmp(adapter_hex, json_string_value(json_object_get(dg, "adapter")))) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s changed after the gate evaluated it; run `ftl gate` again", final_dir);
    goto out;
  }
  if (!(prov = provenance(run_dir, hooks, snap, verdict, lock))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  /* The package carries the base the gate evaluated (the snapshot's input, its SHA-256 checked
   * again as it is read), so a consumer who fetches it has both. */
  pl_peft_opts po = {.base_path = base_name ? pl_snapshot_input_path(snap, base_name) : NULL, .base_sha256 = base_sha};
  /* A PEFT final/ (a peft program's) is packaged as it is, each file checked against the gate's
   * record of it; the example's own format is converted (pipeline/peft.c). */
  if (pl_peft_final_is_peft(final_dir))
    rc = pl_peft_copy_final(final_dir, json_object_get(dg, "adapter_files"), export_dir, po.base_path, base_sha, d);
  else
    rc = pl_peft_export_run(run_dir, NULL, &po, d);
  if (rc) goto out;
  if ((rc = ftl_mkdir_p(pkg_dir, d))) goto out;
  if ((rc = ev_verdict_write_package_copy(verdict, pkg_verdict, d))) goto out;
  char id[FTL_SHA256_HEX_LEN + 1];
  if ((rc = pl_package_build(export_dir, pkg_verdict, prov, pkg_path, id, d))) goto out;
  pl_registry_ref ref = {.root = json_string_value(json_object_get(reg, "path"))};
  char why[600];
  snprintf(why, sizeof why, "ftl publish %s: gate passed (%s %.6g)", run_dir,
           json_string_value(json_object_get(verdict, "metric")), json_number_value(json_object_get(verdict, "value")));
  if ((rc = pl_registry_publish(&ref, json_string_value(json_object_get(reg, "name")), pkg_path,
                                 json_string_value(json_object_get(reg, "channel")), why, id_out, d)))
    goto out;
  if (provenance_out) *provenance_out = json_incref(prov);
out:
  ev_gate_rundir_unlock(run_lock);
  json_decref(prov);
  json_decref(files);
  json_decref(verdict);
  json_decref(lock);
  json_decref(snap);
  return rc;
}
