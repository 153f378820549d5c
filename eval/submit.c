/* eval/submit.c: what `ftl run` does around training when the job spec has `inputs:` and `eval:`
 * (docs/pipeline.md): the snapshot, locked with the canonical gate spec, before any rank starts;
 * the gate, then publish and promote, after the ranks succeeded.
 *
 * At submission the evaluator is resolved (PATH as `ftl run` sees it) to an absolute path and its
 * bytes are pinned in the snapshot; with a registry: section the lock is also recorded in the
 * registry (pipeline/gate_lock.h), before the snapshot is written, so that a run whose lock could
 * not be recorded never starts.
 *
 * Not here: hashing (pipeline/snapshot.c), the gate itself (eval/gate.c), publishing
 * (eval/publish.c over pipeline/), the gate spec of a job (eval/gate_spec.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rundir.h"
#include "eval/gate.h"
#include "eval/gate_spec.h"
#include "eval/publish.h"
#include "eval/submit.h"
#include "eval/verdict.h"
#include "ftl/core.h"
#include "core/proc.h"
#include "pipeline/gate_lock.h"
#include "pipeline/registry.h"
#include "pipeline/snapshot.h"

static ftl_err var_add(ev_rank_vars *vars, const char *name, const char *value, ftl_diag *d) {
  size_t len = strlen(name) + strlen(value) + 2;
  char *kv = ftl_malloc(len);
  char **grown = kv ? ftl_realloc(vars->kv, (vars->count + 2) * sizeof *grown) : NULL;
  if (!grown) {
    ftl_free(kv);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  }
  snprintf(kv, len, "%s=%s", name, value);
  vars->kv = grown;
  vars->kv[vars->count++] = kv;
  vars->kv[vars->count] = NULL;
  return FTL_OK;
}

void ev_rank_vars_free(ev_rank_vars *vars) {
  for (size_t i = 0; i < vars->count; i++) ftl_free(vars->kv[i]);
  ftl_free(vars->kv);
  vars->kv = NULL;
  vars->count = 0;
}

/* Records an event through the caller's hook, if it gave one; fields is taken. */
static void record(const ev_hooks *h, const char *type, json_t *fields) {
  if (h && h->event) h->event(h->event_ctx, type, fields);
  else json_decref(fields);
}

/* The evaluator resolved and pinned into the snapshot, then (with a registry) the lock recorded in
 * the registry. The evaluator is resolved here, once: a gate that looked it up on its own PATH
 * would run whatever that PATH finds first. */
static ftl_err pin_gate(const json_t *gate, const char *run_dir, json_t *snap, ftl_diag *d) {
  const json_t *ev = json_object_get(gate, "eval");
  const json_t *reg = json_object_get(gate, "registry");
  char *prog = NULL, abs_run[PATH_MAX];
  json_t *rec = NULL;
  ftl_err rc = core_proc_find_program(json_string_value(json_object_get(ev, "program")), getenv("PATH"), 0, &prog, d);
  if (rc) {
    ftl_diag_prefix(d, rc == FTL_ERR_NOMEM ? rc : FTL_ERR_SPEC, "field 'eval.program'");
    rc = rc == FTL_ERR_NOMEM ? rc : FTL_ERR_SPEC;
    goto out;
  }
  if ((rc = pl_snapshot_pin_evaluator(snap, prog, d))) goto out;
  if (!json_is_object(reg)) {
    fprintf(stderr,
            "ftl: warning: no registry: section, so the gate is locked only in the run directory's snapshot.json; "
            "it is only as trustworthy as the run directory\n");
    goto out;
  }
  if (!realpath(run_dir, abs_run)) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot resolve the run directory %s: %s", run_dir, strerror(errno));
    goto out;
  }
  if ((rc = pl_gate_lock_build(snap, abs_run, &rec, d))) goto out;
  rc = pl_gate_lock_store(json_string_value(json_object_get(reg, "path")),
                           json_string_value(json_object_get(reg, "name")), rec, 0, d);
  if (rc) {
    ftl_diag_prefix(d, rc, "cannot lock the gate in the registry %s", json_string_value(json_object_get(reg, "path")));
    goto out;
  }
  fprintf(stderr, "ftl: gate locked in the registry: %s/%s/gate-locks/%s.json\n",
          json_string_value(json_object_get(reg, "path")), json_string_value(json_object_get(reg, "name")),
          pl_snapshot_run_id(snap));
out:
  json_decref(rec);
  ftl_free(prog);
  return rc;
}

/* The registry folder and adapter name the run's locked gate publishes to (its snapshot's): 1, or
 * 0 when the run has none. name may be NULL. */
static int locked_registry(const char *run_dir, char *path, size_t path_size, char *name, size_t name_size) {
  json_t *snap = NULL;
  ftl_diag d = {{0}};
  int found = 0;
  if (pl_snapshot_load(run_dir, &snap, &d) == FTL_OK) {
    const json_t *reg = json_object_get(pl_snapshot_gate(snap), "registry");
    const char *p = json_string_value(json_object_get(reg, "path")), *n = json_string_value(json_object_get(reg, "name"));
    if (p && n) {
      snprintf(path, path_size, "%s", p);
      if (name) snprintf(name, name_size, "%s", n);
      found = 1;
    }
  }
  json_decref(snap);
  return found;
}

ftl_err ev_submit_prepare(const ev_gate_fields *job, const char *run_dir, ev_rank_vars *vars, ftl_diag *d) {
  if (!job->inputs_count && !job->eval->program) return FTL_OK;
  json_t *gate = NULL, *snap = NULL;
  pl_snapshot_input *in = NULL;
  char(*names)[128] = NULL;
  ftl_err rc = ev_gate_spec_of(job, &gate, d);
  if (rc) goto out;
  char snap_path[PATH_MAX];
  if (core_rundir_path(snap_path, sizeof snap_path, run_dir, FTL_RUNDIR_SNAPSHOT)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", run_dir);
    goto out;
  }
  if (access(snap_path, F_OK) == 0) {
    /* A run directory that already has a snapshot is resumed: same inputs, same gate. */
    if ((rc = pl_snapshot_load(run_dir, &snap, d))) goto out;
    const json_t *locked = pl_snapshot_gate(snap);
    if (gate || locked) {
      if (!gate || !locked) {
        rc = ftl_diag_fail(d, FTL_ERR_SPEC, "the gate of %s was locked %s an eval: section; this job has %s one",
                           snap_path, locked ? "with" : "without", gate ? "" : "no");
        goto out;
      }
      if ((rc = ev_gate_spec_compare(locked, gate, NULL, 0, d))) goto out;
      json_t *lock = NULL;
      rc = ev_gate_lock_check(run_dir, snap, &lock, d);
      json_decref(lock);
      if (rc) goto out;
    }
    if ((rc = pl_snapshot_verify(snap, d))) goto out;
    fprintf(stderr, "ftl: inputs verified against %s (digest %.12s)\n", snap_path, pl_snapshot_digest(snap));
  } else {
    in = ftl_calloc(job->inputs_count ? job->inputs_count : 1, sizeof *in);
    names = ftl_calloc(job->inputs_count ? job->inputs_count : 1, sizeof *names);
    if (!in || !names) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
      goto out;
    }
    for (size_t i = 0; i < job->inputs_count; i++) {
      in[i].path = ev_split_kv(job->inputs[i], names[i], sizeof names[i]);
      in[i].name = names[i];
    }
    fprintf(stderr, "ftl: hashing %zu input%s into %s\n", job->inputs_count, job->inputs_count == 1 ? "" : "s",
            snap_path);
    if ((rc = pl_snapshot_build(in, job->inputs_count, job->name, job->spec_hash, gate, &snap, d))) goto out;
    if (gate && (rc = pin_gate(gate, run_dir, snap, d))) goto out;
    if ((rc = pl_snapshot_write(run_dir, snap, d))) goto out;
  }
  /* The ranks read their inputs through the record. */
  if ((rc = var_add(vars, "FTL_SNAPSHOT", snap_path, d))) goto out;
  const json_t *inputs = json_object_get(snap, "inputs");
  for (size_t i = 0; i < json_array_size(inputs); i++) {
    const json_t *e = json_array_get(inputs, i);
    char var[160];
    pl_snapshot_input_var(e, var, sizeof var);
    if ((rc = var_add(vars, var, json_string_value(json_object_get(e, "path")), d))) goto out;
  }
out:
  if (rc) ev_rank_vars_free(vars);
  ftl_free(in);
  ftl_free(names);
  json_decref(gate);
  json_decref(snap);
  return rc;
}

int ev_submit_gate(const ev_gate_fields *job, const char *run_dir, const ev_hooks *hooks, ev_finish_result *out) {
  memset(out, 0, sizeof *out);
  if (!job->eval->program) return 0;
  ftl_diag d = {{0}};
  json_t *verdict = NULL;
  char line[1024];
  ev_gate_opts o = {.run_dir = run_dir};
  ev_gate_result g = ev_gate_run(&o, &verdict, &d);
  if (g == FTL_GATE_ERROR) {
    fprintf(stderr, "ftl: the gate could not run: %s; nothing published\n", d.msg);
    record(hooks, "gate", json_pack("{s:s, s:s}", "result", "error", "message", d.msg));
    return 1;
  }
  ev_verdict_summary(verdict, line, sizeof line);
  printf("ftl: %s\n", line);
  fflush(stdout);
  const char *metric = json_string_value(json_object_get(verdict, "metric"));
  record(hooks, "gate",
                   json_pack("{s:s, s:s, s:O}", "result", g == FTL_GATE_PASSED ? "passed" : "failed", "metric", metric,
                             "value", json_object_get(verdict, "value")));
  out->gate = g == FTL_GATE_PASSED ? 1 : -1;
  snprintf(out->metric, sizeof out->metric, "%s", metric ? metric : "");
  out->value = json_number_value(json_object_get(verdict, "value"));
  json_decref(verdict);
  if (g == FTL_GATE_FAILED) {
    fprintf(stderr, "ftl: the gate failed; nothing published (verdict: %s/verdict.json)\n", run_dir);
    return 1;
  }
  return 0;
}

int ev_submit_publish(const ev_gate_fields *job, const char *run_dir, const ev_hooks *hooks, ev_finish_result *out) {
  out->published = 0;
  if (!job->registry->present) {
    fprintf(stderr, "ftl: no registry: section; nothing to publish\n");
    return 0;
  }
  ftl_diag d = {{0}};
  char id[65] = "";
  json_t *prov = NULL;
  if (ev_publish_run(run_dir, NULL, hooks, id, &prov, &d)) {
    fprintf(stderr, "ftl: publishing failed: %s\n", d.msg);
    record(hooks, "publish", json_pack("{s:s, s:s}", "result", "error", "message", d.msg));
    return 5;
  }
  const char *name = json_string_value(json_object_get(prov, "registry_name"));
  const char *channel = json_string_value(json_object_get(prov, "registry_channel"));
  printf("ftl: published %s version %s; %s@%s -> %.12s\n", name, id, name, channel, id);
  record(hooks, "publish",
      json_pack("{s:s, s:s, s:s, s:s}", "result", "published", "name", name, "channel", channel, "version", id));
  out->published = 1;
  locked_registry(run_dir, out->registry, sizeof out->registry, NULL, 0);
  snprintf(out->name, sizeof out->name, "%s", name ? name : "");
  snprintf(out->channel, sizeof out->channel, "%s", channel ? channel : "");
  snprintf(out->version, sizeof out->version, "%s", id);
  json_decref(prov);
  return 0;
}

int ev_submit_published(const char *run_dir, const char *registry, const char *name, const char *version) {
  char locked[PATH_MAX], locked_name[FTL_REGISTRY_NAME_MAX + 1];
  if (!locked_registry(run_dir, locked, sizeof locked, locked_name, sizeof locked_name) || strcmp(locked, registry) ||
      strcmp(locked_name, name))
    return 0;
  char spec[256], got_name[FTL_REGISTRY_NAME_MAX + 1], got_id[FTL_SHA256_HEX_LEN + 1];
  pl_registry_ref ref = {.root = registry};
  ftl_diag d = {{0}};
  if (ftl_fmt(spec, sizeof spec, "%s@%s", name, version)) return 0;
  return pl_registry_resolve(&ref, spec, got_name, got_id, &d) == FTL_OK && !strcmp(got_id, version);
}
