/* eval/submit.c: what `ftl run` does around training when the job spec has `inputs:` and `eval:`
 * (docs/pipeline.md): the snapshot, locked with the canonical gate spec, before any rank starts;
 * the gate, then publish and promote, after the ranks succeeded. Also the canonical gate spec of a
 * job, which `ftl gate --spec` and `ftl publish --spec` compare with the locked one.
 *
 * At submission the evaluator is resolved (PATH as `ftl run` sees it) to an absolute path and its
 * bytes are pinned in the snapshot; with a registry: section the lock is also recorded in the
 * registry (pipeline/gate_lock.h), before the snapshot is written, so that a run whose lock could
 * not be recorded never starts.
 *
 * Not here: hashing (pipeline/snapshot.c), the gate itself (eval/gate.c), publishing
 * (eval/eval_cli.c over pipeline/). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rundir.h"
#include "eval/eval_cli.h"
#include "eval/gate.h"
#include "ftl/core.h"
#include "launcher/gang.h"
#include "pipeline/gate_lock.h"
#include "pipeline/registry.h"
#include "pipeline/snapshot.h"

/* "NAME=VALUE" -> name (into buf) and value. */
static const char *split_kv(const char *kv, char *name, size_t size) {
  const char *eq = strchr(kv, '=');
  size_t n = eq ? (size_t)(eq - kv) : strlen(kv);
  snprintf(name, size, "%.*s", (int)n, kv);
  return eq ? eq + 1 : "";
}

static int has_input(const ftl_job *job, const char *name) {
  char n[256];
  for (size_t i = 0; i < job->inputs_count; i++) {
    split_kv(job->inputs[i], n, sizeof n);
    if (!strcmp(n, name)) return 1;
  }
  return 0;
}

static ftl_err spec_err(const ftl_job *job, ftl_diag *d, const char *field, const char *what) {
  return ftl_diag_fail(d, FTL_ERR_SPEC, "%s: field '%s': %s", job->spec_path ? job->spec_path : "job", field, what);
}

ftl_err ftl_gate_spec_from_job(const ftl_job *job, json_t **out, ftl_diag *d) {
  *out = NULL;
  if (!job->eval.program) {
    if (job->registry.present)
      return spec_err(job, d, "registry", "needs an eval: section (only a gated adapter is published)");
    return FTL_OK;
  }
  ftl_err rc = FTL_OK;
  json_t *gate = NULL, *args = json_array(), *env = json_object();
  if (!args || !env) goto oom;
  /* eval.data and eval.base name inputs, so the gate reads them through the snapshot. */
  if (!has_input(job, job->eval.data)) {
    char what[512];
    snprintf(what, sizeof what, "'%s' is not one of the job's inputs: (eval data must be snapshotted)", job->eval.data);
    rc = spec_err(job, d, "eval.data", what);
    goto out;
  }
  if (job->eval.base && !has_input(job, job->eval.base)) {
    char what[512];
    snprintf(what, sizeof what, "'%s' is not one of the job's inputs:", job->eval.base);
    rc = spec_err(job, d, "eval.base", what);
    goto out;
  }
  ftl_gate_placeholders ph = {"a", "d", "m", "b", "r"};
  for (size_t i = 0; i < job->eval.args_count; i++) {
    char *x = NULL;
    ftl_diag inner;
    if (ftl_gate_expand(job->eval.args[i], &ph, &x, &inner)) {
      char field[64];
      snprintf(field, sizeof field, "eval.args[%zu]", i);
      rc = spec_err(job, d, field, inner.msg);
      goto out;
    }
    ftl_free(x);
    json_array_append_new(args, json_string(job->eval.args[i]));
  }
  for (size_t i = 0; i < job->eval.env_count; i++) {
    char name[256];
    const char *v = split_kv(job->eval.env[i], name, sizeof name);
    json_object_set_new(env, name, json_string(v));
  }
  const char *baseline = job->eval.baseline_channel;
  if (job->eval.has_min_gain && !job->registry.present) {
    rc = spec_err(job, d, "eval.min_gain", "needs a registry: section (the baseline is the adapter in a channel)");
    goto out;
  }
  if (job->eval.has_min_gain && !baseline) baseline = job->registry.channel ? job->registry.channel : "candidate";
  if (baseline && !job->eval.has_min_gain) {
    rc = spec_err(job, d, "eval.baseline_channel", "has no effect without eval.min_gain");
    goto out;
  }
  json_t *reg = json_null();
  if (job->registry.present) {
    const char *root = job->registry.path ? job->registry.path : ftl_registry_root_from_env();
    if (!root) {
      rc = spec_err(job, d, "registry.path", "required (or set FTL_REGISTRY)");
      goto out;
    }
    char abs[PATH_MAX], cwd[PATH_MAX];
    if (root[0] == '/')
      snprintf(abs, sizeof abs, "%s", root);
    else if (!getcwd(cwd, sizeof cwd) || ftl_fmt(abs, sizeof abs, "%s/%s", cwd, root)) {
      rc = spec_err(job, d, "registry.path", "cannot be made absolute");
      goto out;
    }
    const char *name = job->registry.name ? job->registry.name : job->name;
    const char *channel = job->registry.channel ? job->registry.channel : "candidate";
    if (!ftl_registry_name_ok(name)) {
      rc = spec_err(job, d, job->registry.name ? "registry.name" : "name",
                    "not a registry name (1-64 characters of A-Z a-z 0-9 . _ -, not starting with . or -)");
      goto out;
    }
    if (!ftl_registry_channel_ok(channel) || (baseline && !ftl_registry_channel_ok(baseline))) {
      rc = spec_err(job, d, ftl_registry_channel_ok(channel) ? "eval.baseline_channel" : "registry.channel",
                    "not a channel name (1-64 characters of A-Z a-z 0-9 . _ -, not 64 hex digits)");
      goto out;
    }
    reg = json_pack("{s:s, s:s, s:s}", "path", abs, "name", name, "channel", channel);
  }
  gate = json_pack("{s:{s:s, s:O, s:O, s:f, s:s, s:s, s:f, s:o, s:o, s:s, s:o}, s:o}", "eval", "program",
                   job->eval.program, "args", args, "env", env, "timeout_s", (double)job->eval.timeout_ms / 1000.0,
                   "metric", job->eval.metric, "direction", job->eval.direction == FTL_EVAL_LOWER ? "lower" : "higher",
                   "threshold", job->eval.threshold, "min_gain",
                   job->eval.has_min_gain ? json_real(job->eval.min_gain) : json_null(), "baseline_channel",
                   baseline ? json_string(baseline) : json_null(), "data", job->eval.data, "base",
                   job->eval.base ? json_string(job->eval.base) : json_null(), "registry", reg);
  if (!gate) goto oom;
  if ((rc = ftl_gate_spec_check(gate, d))) goto out;
  *out = gate;
  gate = NULL;
  goto out;
oom:
  rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
out:
  json_decref(gate);
  json_decref(args);
  json_decref(env);
  return rc;
}

static ftl_err env_add(ftl_job *job, const char *name, const char *value, ftl_diag *d) {
  size_t len = strlen(name) + strlen(value) + 2;
  char *kv = ftl_malloc(len);
  char **grown = kv ? ftl_realloc(job->env, (job->env_count + 2) * sizeof *grown) : NULL;
  if (!grown) {
    ftl_free(kv);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  }
  snprintf(kv, len, "%s=%s", name, value);
  job->env = grown;
  job->env[job->env_count++] = kv;
  job->env[job->env_count] = NULL;
  return FTL_OK;
}

/* The evaluator resolved and pinned into the snapshot, then (with a registry) the lock recorded in
 * the registry. The evaluator is resolved here, once: a gate that looked it up on its own PATH
 * would run whatever that PATH finds first. */
static ftl_err pin_gate(const json_t *gate, const char *run_dir, json_t *snap, ftl_diag *d) {
  const json_t *ev = json_object_get(gate, "eval");
  const json_t *reg = json_object_get(gate, "registry");
  char *prog = NULL, abs_run[PATH_MAX];
  json_t *rec = NULL;
  ftl_err rc = ftl_gang_find_program(json_string_value(json_object_get(ev, "program")), getenv("PATH"), &prog, d);
  if (rc) {
    ftl_diag_prefix(d, rc == FTL_ERR_NOMEM ? rc : FTL_ERR_SPEC, "field 'eval.program'");
    rc = rc == FTL_ERR_NOMEM ? rc : FTL_ERR_SPEC;
    goto out;
  }
  if ((rc = ftl_snapshot_pin_evaluator(snap, prog, d))) goto out;
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
  if ((rc = ftl_gate_lock_build(snap, abs_run, &rec, d))) goto out;
  rc = ftl_gate_lock_store(json_string_value(json_object_get(reg, "path")),
                           json_string_value(json_object_get(reg, "name")), rec, 0, d);
  if (rc) {
    ftl_diag_prefix(d, rc, "cannot lock the gate in the registry %s", json_string_value(json_object_get(reg, "path")));
    goto out;
  }
  fprintf(stderr, "ftl: gate locked in the registry: %s/%s/gate-locks/%s.json\n",
          json_string_value(json_object_get(reg, "path")), json_string_value(json_object_get(reg, "name")),
          ftl_snapshot_run_id(snap));
out:
  json_decref(rec);
  ftl_free(prog);
  return rc;
}

ftl_err ftl_submit_prepare(ftl_job *job, const char *run_dir, ftl_diag *d) {
  if (!job->inputs_count && !job->eval.program) return FTL_OK;
  json_t *gate = NULL, *snap = NULL;
  ftl_snapshot_input *in = NULL;
  char(*names)[128] = NULL;
  ftl_err rc = ftl_gate_spec_from_job(job, &gate, d);
  if (rc) goto out;
  char snap_path[PATH_MAX];
  if (ftl_rundir_path(snap_path, sizeof snap_path, run_dir, FTL_RUNDIR_SNAPSHOT)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", run_dir);
    goto out;
  }
  if (access(snap_path, F_OK) == 0) {
    /* A run directory that already has a snapshot is resumed: same inputs, same gate. */
    if ((rc = ftl_snapshot_load(run_dir, &snap, d))) goto out;
    const json_t *locked = ftl_snapshot_gate(snap);
    if (gate || locked) {
      if (!gate || !locked) {
        rc = ftl_diag_fail(d, FTL_ERR_SPEC, "the gate of %s was locked %s an eval: section; this job has %s one",
                           snap_path, locked ? "with" : "without", gate ? "" : "no");
        goto out;
      }
      if ((rc = ftl_gate_spec_compare(locked, gate, NULL, 0, d))) goto out;
      json_t *lock = NULL;
      rc = ftl_gate_lock_check(run_dir, snap, &lock, d);
      json_decref(lock);
      if (rc) goto out;
    }
    if ((rc = ftl_snapshot_verify(snap, d))) goto out;
    fprintf(stderr, "ftl: inputs verified against %s (digest %.12s)\n", snap_path, ftl_snapshot_digest(snap));
  } else {
    in = ftl_calloc(job->inputs_count ? job->inputs_count : 1, sizeof *in);
    names = ftl_calloc(job->inputs_count ? job->inputs_count : 1, sizeof *names);
    if (!in || !names) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
      goto out;
    }
    for (size_t i = 0; i < job->inputs_count; i++) {
      in[i].path = split_kv(job->inputs[i], names[i], sizeof names[i]);
      in[i].name = names[i];
    }
    fprintf(stderr, "ftl: hashing %zu input%s into %s\n", job->inputs_count, job->inputs_count == 1 ? "" : "s",
            snap_path);
    if ((rc = ftl_snapshot_build(in, job->inputs_count, job->name, job->spec_hash, gate, &snap, d))) goto out;
    if (gate && (rc = pin_gate(gate, run_dir, snap, d))) goto out;
    if ((rc = ftl_snapshot_write(run_dir, snap, d))) goto out;
  }
  /* The ranks read their inputs through the record. */
  if ((rc = env_add(job, "FTL_SNAPSHOT", snap_path, d))) goto out;
  const json_t *inputs = json_object_get(snap, "inputs");
  for (size_t i = 0; i < json_array_size(inputs); i++) {
    const json_t *e = json_array_get(inputs, i);
    char var[160];
    ftl_snapshot_input_var(e, var, sizeof var);
    if ((rc = env_add(job, var, json_string_value(json_object_get(e, "path")), d))) goto out;
  }
out:
  ftl_free(in);
  ftl_free(names);
  json_decref(gate);
  json_decref(snap);
  return rc;
}

int ftl_submit_finish(const ftl_job *job, const char *run_dir, ftl_events *events) {
  if (!job->eval.program) return 0;
  ftl_diag d = {{0}};
  json_t *verdict = NULL;
  char line[1024];
  ftl_gate_opts o = {.run_dir = run_dir};
  ftl_gate_result g = ftl_gate_run(&o, &verdict, &d);
  if (g == FTL_GATE_ERROR) {
    fprintf(stderr, "ftl: the gate could not run: %s; nothing published\n", d.msg);
    ftl_events_write(events, "gate", 0, json_pack("{s:s, s:s}", "result", "error", "message", d.msg));
    return 1;
  }
  ftl_verdict_summary(verdict, line, sizeof line);
  printf("ftl: %s\n", line);
  fflush(stdout);
  ftl_events_write(events, "gate", 0,
                   json_pack("{s:s, s:s, s:O}", "result", g == FTL_GATE_PASSED ? "passed" : "failed", "metric",
                             json_string_value(json_object_get(verdict, "metric")), "value",
                             json_object_get(verdict, "value")));
  json_decref(verdict);
  if (g == FTL_GATE_FAILED) {
    fprintf(stderr, "ftl: the gate failed; nothing published (verdict: %s/verdict.json)\n", run_dir);
    return 1;
  }
  if (!job->registry.present) {
    fprintf(stderr, "ftl: no registry: section; nothing to publish\n");
    return 0;
  }
  char id[65] = "";
  json_t *prov = NULL;
  if (ftl_publish_run(run_dir, NULL, id, &prov, &d)) {
    fprintf(stderr, "ftl: publishing failed: %s\n", d.msg);
    ftl_events_write(events, "publish", 0, json_pack("{s:s, s:s}", "result", "error", "message", d.msg));
    return 5;
  }
  const char *name = json_string_value(json_object_get(prov, "registry_name"));
  const char *channel = json_string_value(json_object_get(prov, "registry_channel"));
  printf("ftl: published %s version %s; %s@%s -> %.12s\n", name, id, name, channel, id);
  ftl_events_write(
      events, "publish", 0,
      json_pack("{s:s, s:s, s:s, s:s}", "result", "published", "name", name, "channel", channel, "version", id));
  json_decref(prov);
  return 0;
}
