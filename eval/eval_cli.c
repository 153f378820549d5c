/* eval/eval_cli.c: `ftl gate` and `ftl publish` (see eval_cli.h, docs/pipeline.md), and the
 * publishing of a gated run: re-verification, provenance, then pipeline/'s export, package and
 * registry.
 *
 * Publishing trusts no verdict: it takes the run directory's gate lock, checks the snapshot against
 * the registry's gate lock, and re-derives pass or fail from the verdict's recorded value and the
 * registry's copy of the gate (threshold, then min_gain against a baseline that must still be the
 * one the gate compared with). The package gets a copy of the verdict without its timing fields, so
 * that re-gating and re-publishing the same adapter makes the same package, hence the same version.
 *
 * Not here: the gate (eval/gate.c), the export/package/registry themselves (pipeline/). */
#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/jsonl.h"
#include "core/rundir.h"
#include "eval/eval_cli.h"
#include "eval/gate.h"
#include "ftl/core.h"
#include "ftl/ftl.h"
#include "pipeline/gate_lock.h"
#include "pipeline/package.h"
#include "pipeline/peft.h"
#include "pipeline/registry.h"
#include "pipeline/snapshot.h"

enum { EXIT_PASS = 0, EXIT_FAIL = 1, EXIT_ERROR = 2 };

const char ftl_gate_help[] =
    "usage: ftl gate RUNDIR [--spec JOB.yaml] [--json] [--quiet]\n"
    "Verifies the run's snapshot, runs the evaluator locked at submission and writes RUNDIR/verdict.json.\n"
    "  --spec JOB.yaml  refuse unless this job spec's eval:/registry: equal the locked gate (names the field)\n"
    "  --json           print the verdict as JSON on stdout\n"
    "  --quiet          no progress lines\n"
    "Exit: 0 passed, 1 failed (below the threshold, a missing or non-finite metric), 2 error.\n";

const char ftl_publish_help[] =
    "usage: ftl publish RUNDIR [--spec JOB.yaml] [--json]\n"
    "Publishes a run whose verdict passed: PEFT export, package, registry version, channel promoted.\n"
    "  --spec JOB.yaml  refuse unless this job spec's eval:/registry: equal the locked gate (names the field)\n"
    "  --json           print {version, name, channel, provenance} as JSON on stdout\n"
    "Exit: 0 published, 1 the verdict did not pass (nothing published), 2 error.\n";

typedef struct cli_opts {
  const char *run_dir;
  const char *spec;
  int json, quiet;
} cli_opts;

/* Shared option parsing; returns -1 to go on, or an exit code. */
static int parse_opts(int argc, char **argv, const char *usage, cli_opts *o) {
  enum { OPT_SPEC = 1000, OPT_JSON, OPT_QUIET };
  static const struct option options[] = {{"spec", required_argument, NULL, OPT_SPEC},
                                          {"json", no_argument, NULL, OPT_JSON},
                                          {"quiet", no_argument, NULL, OPT_QUIET},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    switch (c) {
    case OPT_SPEC: o->spec = optarg; break;
    case OPT_JSON: o->json = 1; break;
    case OPT_QUIET: o->quiet = 1; break;
    case 'h': fputs(usage, stdout); return EXIT_PASS;
    default: fputs(usage, stderr); return EXIT_ERROR;
    }
  }
  if (optind + 1 != argc) {
    fputs(usage, stderr);
    return EXIT_ERROR;
  }
  o->run_dir = argv[optind];
  return -1;
}

/* The canonical gate spec of --spec FILE (a job spec), or NULL without --spec. */
static ftl_err given_gate(const char *spec, json_t **out, ftl_diag *d) {
  *out = NULL;
  if (!spec) return FTL_OK;
  ftl_job *job = NULL;
  ftl_err rc = ftl_job_parse_file(spec, &job, d);
  if (rc) return rc;
  rc = ftl_gate_spec_from_job(job, out, d);
  if (!rc && !*out)
    rc = ftl_diag_fail(d, FTL_ERR_SPEC, "%s has no eval: section to compare with the locked gate", spec);
  ftl_job_destroy(job);
  return rc;
}

static int abs_run_dir(const char *cmd, const char *rd, char out[PATH_MAX]) {
  if (!realpath(rd, out)) {
    fprintf(stderr, "ftl %s: run directory %s: %s\n", cmd, rd, strerror(errno));
    return -1;
  }
  return 0;
}

int ftl_cmd_gate(int argc, char **argv) {
  cli_opts o = {0};
  int rc = parse_opts(argc, argv, ftl_gate_help, &o);
  if (rc >= 0) return rc;
  ftl_diag d = {{0}};
  json_t *given = NULL, *verdict = NULL;
  char run_dir[PATH_MAX];
  if (abs_run_dir("gate", o.run_dir, run_dir)) return EXIT_ERROR;
  if (given_gate(o.spec, &given, &d)) {
    fprintf(stderr, "ftl gate: refused: %s\n", d.msg);
    return EXIT_ERROR;
  }
  ftl_gate_opts go = {.run_dir = run_dir, .given_spec = given, .quiet = o.quiet != 0};
  ftl_gate_result g = ftl_gate_run(&go, &verdict, &d);
  json_decref(given);
  if (g == FTL_GATE_ERROR) {
    fprintf(stderr, "ftl gate: refused: %s\n", d.msg);
    return EXIT_ERROR;
  }
  char line[1024];
  ftl_verdict_summary(verdict, line, sizeof line);
  if (o.json) {
    char *text = json_dumps(verdict, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    if (text) puts(text);
    free(text);
    fprintf(stderr, "ftl %s\n", line);
  } else {
    printf("ftl %s\n", line);
  }
  json_decref(verdict);
  return g == FTL_GATE_PASSED ? EXIT_PASS : EXIT_FAIL;
}

/* ---- provenance --------------------------------------------------------------------------- */

typedef struct run_facts {
  int attempts;
  int64_t last_committed_step;
  double goodput_pct, wall_ms;
  int failures;
} run_facts;

static ftl_err event_line(const char *line, size_t len, size_t line_no, void *ctx) {
  (void)line_no;
  run_facts *f = ctx;
  json_t *j = json_loadb(line, len, 0, NULL);
  const char *ev = json_string_value(json_object_get(j, "event"));
  if (ev && !strcmp(ev, "attempt_end")) {
    f->attempts++;
    json_int_t s = json_integer_value(json_object_get(j, "committed_step"));
    if (json_is_integer(json_object_get(j, "committed_step")) && s > f->last_committed_step) f->last_committed_step = s;
  } else if (ev && !strcmp(ev, "ckpt_committed") && json_is_integer(json_object_get(j, "step"))) {
    json_int_t s = json_integer_value(json_object_get(j, "step"));
    if (s > f->last_committed_step) f->last_committed_step = s;
  } else if (ev && !strcmp(ev, "run_goodput")) {
    f->goodput_pct = json_number_value(json_object_get(j, "goodput_pct"));
    f->wall_ms = json_number_value(json_object_get(j, "wall_ms"));
  }
  json_decref(j);
  return FTL_OK;
}

static ftl_err failure_line(const char *line, size_t len, size_t line_no, void *ctx) {
  (void)line_no;
  json_t *j = json_loadb(line, len, 0, NULL);
  const char *rec = json_string_value(json_object_get(j, "record"));
  if (rec && !strcmp(rec, "failure")) ((run_facts *)ctx)->failures++;
  json_decref(j);
  return FTL_OK;
}

/* Attempts, the last committed checkpoint step and the goodput from events.jsonl; failures from
 * failures.jsonl. Missing logs leave the defaults (a run directory made by hand in a test). */
static void read_facts(const char *run_dir, run_facts *f) {
  memset(f, 0, sizeof *f);
  f->last_committed_step = -1;
  char path[PATH_MAX];
  char *data = NULL;
  size_t size = 0;
  ftl_diag ignored;
  if (!ftl_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_EVENTS) &&
      !ftl_jsonl_read(path, 64u << 20, 5000, &data, &size, &ignored)) {
    ftl_jsonl_each_line(data, size, event_line, f);
    ftl_free(data);
  }
  data = NULL;
  if (!ftl_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_FAILURES) &&
      !ftl_jsonl_read(path, 64u << 20, 5000, &data, &size, &ignored)) {
    ftl_jsonl_each_line(data, size, failure_line, f);
    ftl_free(data);
  }
}

static json_t *provenance(const char *run_dir, const json_t *snap, const json_t *verdict, const json_t *lock) {
  const json_t *gate = ftl_snapshot_gate(snap);
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
  run_facts f;
  read_facts(run_dir, &f);
  const json_t *pinned = ftl_snapshot_evaluator(snap);
  json_t *p = json_pack(
      "{s:i, s:s, s:s, s:s, s:s, s:s, s:{s:s?, s:s?}, s:{s:s, s:o}, s:s, s:{s:s, s:O, s:O, s:s, s:b},"
      " s:{s:I, s:i, s:i, s:f, s:f}, s:s, s:s}",
      "version", 1, "ftl_version", FTL_VERSION_STRING, "job", json_string_value(json_object_get(snap, "job")),
      "job_spec_hash", json_string_value(json_object_get(snap, "job_spec_hash")), "gate_spec_sha256",
      ftl_snapshot_gate_sha256(snap), "adapter_sha256",
      json_string_value(json_object_get(json_object_get(verdict, "digests"), "adapter")), "base_model", "input",
      base_name, "sha256", base_name ? ftl_snapshot_input_sha256(snap, base_name) : NULL, "snapshot", "digest",
      ftl_snapshot_digest(snap), "inputs", inputs, "run_dir", run_dir, "gate", "metric",
      json_string_value(json_object_get(verdict, "metric")), "value", json_object_get(verdict, "value"), "threshold",
      json_object_get(verdict, "threshold"), "direction", json_string_value(json_object_get(verdict, "direction")),
      "passed", json_is_true(json_object_get(verdict, "passed")), "training", "last_checkpoint_step",
      (json_int_t)f.last_committed_step, "attempts", f.attempts, "failures", f.failures, "goodput_pct", f.goodput_pct,
      "wall_ms", f.wall_ms, "registry_name", json_string_value(json_object_get(reg, "name")), "registry_channel",
      json_string_value(json_object_get(reg, "channel")));
  /* Which evaluator judged it and which registry record locked the gate: no timestamps, so the
   * same adapter re-gated gives the same provenance. */
  if (p && pinned)
    json_object_set_new(p, "evaluator",
                        json_pack("{s:O, s:O}", "path", json_object_get(pinned, "path"), "sha256",
                                  json_object_get(pinned, "sha256")));
  if (p && lock)
    json_object_set_new(p, "gate_lock",
                        json_pack("{s:O, s:O}", "run_id", json_object_get(lock, "run_id"), "digest",
                                  json_object_get(lock, "digest")));
  return p;
}

/* Re-derives the verdict from its recorded value and the registry's copy of the gate. FTL_OK when
 * it passes; FTL_ERR_STATE ("did not pass") when it does not; FTL_ERR_CORRUPT when the verdict's
 * own fields contradict the gate or the baseline moved since the gate ran. */
static ftl_err rederive(const json_t *gate, const json_t *verdict, ftl_diag *d) {
  const json_t *ev = json_object_get(gate, "eval");
  const char *metric = json_string_value(json_object_get(ev, "metric"));
  const char *vm = json_string_value(json_object_get(verdict, "metric"));
  if (!vm || strcmp(vm, metric))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the verdict's field 'metric' (%s) is not the locked gate's (%s)",
                         vm ? vm : "?", metric);
  const json_t *val = json_object_get(verdict, "value");
  int value_ok = json_is_number(val) && isfinite(json_number_value(val));
  double value = value_ok ? json_number_value(val) : 0;
  ftl_gate_baseline b = {0};
  const json_t *vb = json_object_get(verdict, "baseline");
  if (value_ok && json_is_number(json_object_get(ev, "min_gain"))) {
    ftl_err rc = ftl_gate_find_baseline(gate, &b, d);
    if (rc) return rc;
    const char *seen = json_string_value(json_object_get(vb, "version"));
    if (!!seen != !!b.present || (seen && strcmp(seen, b.version)))
      return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                           "the baseline channel %s points at %.12s now, the verdict was judged against %.12s; run "
                           "`ftl gate` again",
                           b.channel, b.present ? b.version : "nothing", seen ? seen : "nothing");
  }
  char reason[1024];
  double gain = 0;
  int has_gain = 0;
  int passed = ftl_gate_decide(gate, value_ok, value, &b, &gain, &has_gain, reason, sizeof reason);
  if (!passed)
    return ftl_diag_fail(d, FTL_ERR_STATE,
                         "the verdict did not pass when re-derived from its value and the locked gate (%s); nothing "
                         "published",
                         reason);
  if (!json_is_true(json_object_get(verdict, "passed")))
    return ftl_diag_fail(d, FTL_ERR_STATE, "the verdict did not pass (%s); nothing published",
                         json_string_value(json_object_get(verdict, "reason")));
  return FTL_OK;
}

/* The package's copy of the verdict: the verdict without what differs between two gates of the
 * same adapter (when it ran and for how long), written next to the package. */
static ftl_err package_verdict(const json_t *verdict, const char *path, ftl_diag *d) {
  json_t *copy = json_deep_copy(verdict);
  if (!copy) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  json_object_set_new(copy, "started_at", json_string(""));
  json_object_set_new(copy, "ended_at", json_string(""));
  json_t *ev = json_object_get(copy, "evaluator");
  if (json_is_object(ev)) json_object_del(ev, "wall_s");
  char *text = json_dumps(copy, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
  json_decref(copy);
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  size_t n = strlen(text);
  text[n] = '\n';
  ftl_err rc = ftl_write_file_atomic(path, text, n + 1, d);
  free(text);
  return rc;
}

ftl_err ftl_publish_run(const char *run_dir, const json_t *given_spec, char id_out[65], json_t **provenance_out,
                        ftl_diag *d) {
  json_t *snap = NULL, *verdict = NULL, *files = NULL, *prov = NULL, *lock = NULL;
  char adapter_hex[65], final_dir[PATH_MAX], export_dir[PATH_MAX], pkg_dir[PATH_MAX], pkg_path[PATH_MAX];
  char pkg_verdict[PATH_MAX];
  int run_lock = -1;
  ftl_err rc = ftl_gate_rundir_lock(run_dir, "ftl publish", &run_lock, d);
  if (rc) goto out;
  if ((rc = ftl_snapshot_load(run_dir, &snap, d))) goto out;
  const json_t *gate = ftl_snapshot_gate(snap);
  if (!gate) {
    rc = ftl_diag_fail(d, FTL_ERR_STATE, "%s was submitted without an eval: section; only a gated adapter is published",
                       run_dir);
    goto out;
  }
  if ((rc = ftl_gate_spec_check(gate, d))) goto out;
  if (given_spec && (rc = ftl_gate_spec_compare(gate, given_spec, NULL, 0, d))) goto out;
  const json_t *reg = json_object_get(gate, "registry");
  if (!json_is_object(reg)) {
    rc = ftl_diag_fail(d, FTL_ERR_SPEC, "the locked gate has no registry: section; nothing to publish to");
    goto out;
  }
  if ((rc = ftl_gate_lock_check(run_dir, snap, &lock, d))) goto out;
  if ((rc = ftl_snapshot_verify(snap, d))) goto out;
  rc = ftl_verdict_load(run_dir, &verdict, d);
  if (rc == FTL_ERR_NOTFOUND) {
    rc = ftl_diag_fail(d, FTL_ERR_STATE, "%s has no verdict.json: run `ftl gate %s` first", run_dir, run_dir);
    goto out;
  }
  if (rc) goto out;
  const json_t *dg = json_object_get(verdict, "digests");
  const json_t *lev = json_object_get(json_object_get(lock, "gate"), "eval");
  const char *base_name = json_string_value(json_object_get(lev, "base"));
  const char *base_sha = base_name ? ftl_snapshot_input_sha256(snap, base_name) : NULL;
  if (strcmp(json_string_value(json_object_get(dg, "gate_spec")), ftl_snapshot_gate_sha256(snap)) ||
      strcmp(json_string_value(json_object_get(dg, "snapshot")), ftl_snapshot_digest(snap)) ||
      strcmp(json_string_value(json_object_get(dg, "eval_data")),
             ftl_snapshot_input_sha256(snap, json_string_value(json_object_get(lev, "data")))) ||
      (base_sha && !(json_string_value(json_object_get(dg, "base")) &&
                     !strcmp(json_string_value(json_object_get(dg, "base")), base_sha)))) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "the verdict was not made with this run's snapshot and locked gate");
    goto out;
  }
  /* The verdict's `passed` is not trusted: the decision is made again from its value and the
   * registry's copy of the gate. */
  if ((rc = rederive(json_object_get(lock, "gate"), verdict, d))) goto out;
  if (ftl_rundir_path(final_dir, sizeof final_dir, run_dir, FTL_RUNDIR_FINAL) ||
      ftl_rundir_path(export_dir, sizeof export_dir, run_dir, FTL_RUNDIR_EXPORT) ||
      ftl_rundir_path(pkg_dir, sizeof pkg_dir, run_dir, FTL_RUNDIR_PACKAGE) ||
      ftl_fmt(pkg_verdict, sizeof pkg_verdict, "%s/%s", pkg_dir, FTL_PACKAGE_VERDICT) ||
      ftl_fmt(pkg_path, sizeof pkg_path, "%s/%s", pkg_dir, FTL_PACKAGE_FILE)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", run_dir);
    goto out;
  }
  if ((rc = ftl_gate_hash_folder(final_dir, &files, adapter_hex, d))) goto out;
  if (strcmp(adapter_hex, json_string_value(json_object_get(dg, "adapter")))) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s changed after the gate evaluated it; run `ftl gate` again", final_dir);
    goto out;
  }
  if (!(prov = provenance(run_dir, snap, verdict, lock))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  if ((rc = ftl_peft_export_run(run_dir, NULL, NULL, d))) goto out;
  if ((rc = ftl_mkdir_p(pkg_dir, d))) goto out;
  if ((rc = package_verdict(verdict, pkg_verdict, d))) goto out;
  char id[FTL_SHA256_HEX_LEN + 1];
  if ((rc = ftl_package_build(export_dir, pkg_verdict, prov, pkg_path, id, d))) goto out;
  ftl_registry_ref ref = {.root = json_string_value(json_object_get(reg, "path"))};
  char why[600];
  snprintf(why, sizeof why, "ftl publish %s: gate passed (%s %.6g)", run_dir,
           json_string_value(json_object_get(verdict, "metric")), json_number_value(json_object_get(verdict, "value")));
  if ((rc = ftl_registry_publish(&ref, json_string_value(json_object_get(reg, "name")), pkg_path,
                                 json_string_value(json_object_get(reg, "channel")), why, id_out, d)))
    goto out;
  if (provenance_out) *provenance_out = json_incref(prov);
out:
  ftl_gate_rundir_unlock(run_lock);
  json_decref(prov);
  json_decref(files);
  json_decref(verdict);
  json_decref(lock);
  json_decref(snap);
  return rc;
}

int ftl_cmd_publish(int argc, char **argv) {
  cli_opts o = {0};
  int rc = parse_opts(argc, argv, ftl_publish_help, &o);
  if (rc >= 0) return rc;
  ftl_diag d = {{0}};
  json_t *given = NULL, *prov = NULL;
  char run_dir[PATH_MAX], id[65] = "";
  if (abs_run_dir("publish", o.run_dir, run_dir)) return EXIT_ERROR;
  if (given_gate(o.spec, &given, &d)) {
    fprintf(stderr, "ftl publish: refused: %s\n", d.msg);
    return EXIT_ERROR;
  }
  ftl_err err = ftl_publish_run(run_dir, given, id, &prov, &d);
  json_decref(given);
  if (err) {
    fprintf(stderr, "ftl publish: refused: %s\n", d.msg);
    return err == FTL_ERR_STATE && strstr(d.msg, "did not pass") ? EXIT_FAIL : EXIT_ERROR;
  }
  const char *name = json_string_value(json_object_get(prov, "registry_name"));
  const char *channel = json_string_value(json_object_get(prov, "registry_channel"));
  if (o.json) {
    json_t *j = json_pack("{s:s, s:s, s:s, s:O}", "version", id, "name", name, "channel", channel, "provenance", prov);
    char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    if (text) puts(text);
    free(text);
    json_decref(j);
  } else {
    printf("ftl: published %s version %s; %s@%s -> %.12s\n", name, id, name, channel, id);
  }
  json_decref(prov);
  return EXIT_PASS;
}
