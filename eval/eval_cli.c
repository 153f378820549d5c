/* eval/eval_cli.c: the commands `ftl gate` and `ftl publish` (see eval_cli.h, docs/pipeline.md):
 * their options, their output and exit codes.
 *
 * Not here: the gate (eval/gate.c), publishing (eval/publish.c). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval_cli.h"
#include "eval/gate.h"
#include "eval/gate_spec.h"
#include "eval/publish.h"
#include "eval/verdict.h"
#include "ftl/core.h"

enum { EXIT_PASS = 0, EXIT_FAIL = 1, EXIT_ERROR = 2 };

const char ev_gate_help[] =
    "usage: ftl gate RUNDIR [--spec JOB.yaml] [--json] [--quiet]\n"
    "Verifies the run's snapshot, runs the evaluator locked at submission and writes RUNDIR/verdict.json.\n"
    "  --spec JOB.yaml  refuse unless this job spec's eval:/registry: equal the locked gate (names the field)\n"
    "  --json           print the verdict as JSON on stdout\n"
    "  --quiet          no progress lines\n"
    "Exit: 0 passed, 1 failed (below the threshold, a missing or non-finite metric), 2 error.\n";

const char ev_publish_help[] =
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

/* The canonical gate spec of --spec FILE (a job spec, read by the caller's hook), or NULL without
 * --spec. */
static ftl_err given_gate(const char *spec, const ev_hooks *hooks, json_t **out, ftl_diag *d) {
  *out = NULL;
  if (!spec) return FTL_OK;
  if (!hooks || !hooks->gate_of_spec) return ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "--spec cannot be read here");
  ftl_err rc = hooks->gate_of_spec(spec, out, d);
  if (!rc && !*out)
    rc = ftl_diag_fail(d, FTL_ERR_SPEC, "%s has no eval: section to compare with the locked gate", spec);
  return rc;
}

static int abs_run_dir(const char *cmd, const char *rd, char out[PATH_MAX]) {
  if (!realpath(rd, out)) {
    fprintf(stderr, "ftl %s: run directory %s: %s\n", cmd, rd, strerror(errno));
    return -1;
  }
  return 0;
}

int ev_cmd_gate(int argc, char **argv, const ev_hooks *hooks) {
  cli_opts o = {0};
  int rc = parse_opts(argc, argv, ev_gate_help, &o);
  if (rc >= 0) return rc;
  ftl_diag d = {{0}};
  json_t *given = NULL, *verdict = NULL;
  char run_dir[PATH_MAX];
  if (abs_run_dir("gate", o.run_dir, run_dir)) return EXIT_ERROR;
  if (given_gate(o.spec, hooks, &given, &d)) {
    fprintf(stderr, "ftl gate: refused: %s\n", d.msg);
    return EXIT_ERROR;
  }
  ev_gate_opts go = {.run_dir = run_dir, .given_spec = given, .quiet = o.quiet != 0};
  ev_gate_result g = ev_gate_run(&go, &verdict, &d);
  json_decref(given);
  if (g == FTL_GATE_ERROR) {
    fprintf(stderr, "ftl gate: refused: %s\n", d.msg);
    return EXIT_ERROR;
  }
  char line[1024];
  ev_verdict_summary(verdict, line, sizeof line);
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

int ev_cmd_publish(int argc, char **argv, const ev_hooks *hooks) {
  cli_opts o = {0};
  int rc = parse_opts(argc, argv, ev_publish_help, &o);
  if (rc >= 0) return rc;
  ftl_diag d = {{0}};
  json_t *given = NULL, *prov = NULL;
  char run_dir[PATH_MAX], id[65] = "";
  if (abs_run_dir("publish", o.run_dir, run_dir)) return EXIT_ERROR;
  if (given_gate(o.spec, hooks, &given, &d)) {
    fprintf(stderr, "ftl publish: refused: %s\n", d.msg);
    return EXIT_ERROR;
  }
  ftl_err err = ev_publish_run(run_dir, given, hooks, id, &prov, &d);
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
