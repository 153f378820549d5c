/* tests/unit/test_jobspec.c: the job spec parser (launcher/jobspec.c): every field, its default
 * and its errors, the exact form of messages, files on disk, the golden files under
 * tests/data/jobspecs, the command-line form, hostile inputs (alias cycles, deep nests, node
 * floods, bad UTF-8) and every allocation failing in turn.
 *
 * Each test is a function; main runs them all in one process and a failed check exits 1 (the
 * parser keeps no global state, so the order does not matter). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "checkpoint/levels.h"
#include "ftl/core.h"
#include "ftl_test.h"
#include "launcher/jobspec.h"

/* ---- helpers ----------------------------------------------------------------------------- */

/* Parses text as "job.yaml" in the folder /base; returns the job (the caller destroys it). */
static ln_job *parse_ok(const char *text) {
  ln_job *job = NULL;
  ftl_diag d = {{0}};
  ftl_err rc = ln_job_parse_bytes(text, strlen(text), "job.yaml", "/base", &job, &d);
  if (rc != FTL_OK) FTL_TEST_FAIL_("parse of <<%s>> failed: %s: %s", text, ftl_err_name(rc), d.msg);
  CHECK(job != NULL);
  return job;
}

/* Parses text that must fail with FTL_ERR_SPEC; returns the message in a static buffer. */
static const char *parse_err(const char *text) {
  static ftl_diag d;
  ln_job *job = (ln_job *)1;
  memset(&d, 0, sizeof d);
  ftl_err rc = ln_job_parse_bytes(text, strlen(text), "job.yaml", "/base", &job, &d);
  if (rc != FTL_ERR_SPEC)
    FTL_TEST_FAIL_("parse of <<%s>> returned %s, expected FTL_ERR_SPEC (%s)", text, ftl_err_name(rc), d.msg);
  CHECK(job == NULL);
  CHECK(d.msg[0] != '\0');
  return d.msg;
}

#define CHECK_ERR(text, expected) CHECK_STR_EQ(parse_err(text), expected)
#define CHECK_ERR_HAS(text, part) CHECK_STR_CONTAINS(parse_err(text), part)

/* A growing text buffer for generated inputs. */
typedef struct text {
  char *p;
  size_t len, cap;
} text;

static void text_add(text *t, const char *s) {
  size_t n = strlen(s);
  if (t->len + n + 1 > t->cap) {
    t->cap = (t->len + n + 1) * 2;
    t->p = realloc(t->p, t->cap);
    CHECK(t->p != NULL);
  }
  memcpy(t->p + t->len, s, n + 1);
  t->len += n;
}

static char tmp_dir[] = "/tmp/ftl-test-jobspec-XXXXXX";

static void write_file(const char *path, const char *content) {
  FILE *f = fopen(path, "wb");
  if (!f) FTL_TEST_FAIL_("cannot create %s: %s", path, strerror(errno));
  CHECK(fwrite(content, 1, strlen(content), f) == strlen(content));
  CHECK(fclose(f) == 0);
}

static const char minimal[] = "ranks: 4\nprogram: ftl-allreduce-check\n";

static const char full[] = "name: allreduce-check\n"
                           "ranks: 4\n"
                           "program: ftl-allreduce-check\n"
                           "args: [\"--size\", 1024]\n"
                           "env: {OMP_NUM_THREADS: \"1\", NCCL_DEBUG: WARN}\n"
                           "hostfile: hosts.txt\n"
                           "launcher: mpirun\n"
                           "run_dir: runs/x\n"
                           "working_dir: /some/dir\n"
                           "rendezvous:\n"
                           "  timeout_s: 0.5\n";

/* ---- valid specs ------------------------------------------------------------------------- */

static void test_minimal_defaults(void) {
  ln_job *job = parse_ok(minimal);
  CHECK_STR_EQ(job->name, "job");
  CHECK_INT_EQ(job->ranks, 4);
  CHECK_STR_EQ(job->program, "ftl-allreduce-check");
  CHECK(job->args != NULL && job->args[0] == NULL);
  CHECK_INT_EQ(job->args_count, 0);
  CHECK(job->env != NULL && job->env[0] == NULL);
  CHECK_INT_EQ(job->env_count, 0);
  CHECK(job->hostfile == NULL);
  CHECK_INT_EQ(job->launcher, FTL_LAUNCH_AUTO);
  CHECK(job->run_dir == NULL);
  CHECK(job->working_dir == NULL);
  CHECK_INT_EQ(job->rendezvous_timeout_ms, 300000);
  CHECK(job->spec_path == NULL);
  CHECK_INT_EQ(strlen(job->spec_hash), 32);
  ln_job_destroy(job);
}

static void test_full(void) {
  ln_job *job = parse_ok(full);
  CHECK_STR_EQ(job->name, "allreduce-check");
  CHECK_INT_EQ(job->ranks, 4);
  CHECK_STR_EQ(job->program, "ftl-allreduce-check");
  CHECK_INT_EQ(job->args_count, 2);
  CHECK_STR_EQ(job->args[0], "--size");
  CHECK_STR_EQ(job->args[1], "1024");
  CHECK(job->args[2] == NULL);
  CHECK_INT_EQ(job->env_count, 2);
  CHECK_STR_EQ(job->env[0], "OMP_NUM_THREADS=1");
  CHECK_STR_EQ(job->env[1], "NCCL_DEBUG=WARN");
  CHECK(job->env[2] == NULL);
  CHECK_STR_EQ(job->hostfile, "/base/hosts.txt");
  CHECK_INT_EQ(job->launcher, FTL_LAUNCH_MPIRUN);
  CHECK_STR_EQ(job->run_dir, "runs/x");
  CHECK_STR_EQ(job->working_dir, "/some/dir");
  CHECK_INT_EQ(job->rendezvous_timeout_ms, 500);
  ln_job_destroy(job);
}

static void test_flow_style_and_block_lists(void) {
  ln_job *job = parse_ok("{ranks: 2, program: p, args: [a, b]}");
  CHECK_INT_EQ(job->ranks, 2);
  CHECK_INT_EQ(job->args_count, 2);
  ln_job_destroy(job);
  job = parse_ok("ranks: 2\nprogram: p\nargs:\n  - --lr\n  - 0.001\n  - true\n  - 'x y'\n  - \"\"\n");
  CHECK_INT_EQ(job->args_count, 5);
  CHECK_STR_EQ(job->args[1], "0.001");
  CHECK_STR_EQ(job->args[2], "true");
  CHECK_STR_EQ(job->args[3], "x y");
  CHECK_STR_EQ(job->args[4], "");
  ln_job_destroy(job);
  job = parse_ok("ranks: 1\nprogram: p\nargs: []\nenv: {}\nrendezvous: {}\n");
  CHECK_INT_EQ(job->args_count, 0);
  CHECK_INT_EQ(job->env_count, 0);
  CHECK_INT_EQ(job->rendezvous_timeout_ms, 300000);
  ln_job_destroy(job);
}

static void test_launcher_values(void) {
  const char *words[] = {"auto", "mpirun", "srun"};
  ln_launch_kind kinds[] = {FTL_LAUNCH_AUTO, FTL_LAUNCH_MPIRUN, FTL_LAUNCH_SRUN};
  for (int i = 0; i < 3; i++) {
    char spec[128];
    snprintf(spec, sizeof spec, "ranks: 1\nprogram: p\nlauncher: %s\n", words[i]);
    ln_job *job = parse_ok(spec);
    CHECK_INT_EQ(job->launcher, kinds[i]);
    CHECK_STR_EQ(ln_launch_kind_name(job->launcher), words[i]);
    ln_job_destroy(job);
  }
  CHECK_STR_EQ(ln_launch_kind_name((ln_launch_kind)42), "unknown");
}

static void test_ranks_bounds(void) {
  ln_job *job = parse_ok("ranks: 1\nprogram: p\n");
  CHECK_INT_EQ(job->ranks, 1);
  ln_job_destroy(job);
  job = parse_ok("ranks: 1048576\nprogram: p\n");
  CHECK_INT_EQ(job->ranks, 1048576);
  ln_job_destroy(job);
  job = parse_ok("ranks: +8\nprogram: p\n");
  CHECK_INT_EQ(job->ranks, 8);
  ln_job_destroy(job);
  /* Tags are ignored: libyaml cannot tell `!!str 4` from `4`. */
  job = parse_ok("ranks: !!int 3\nprogram: p\n");
  CHECK_INT_EQ(job->ranks, 3);
  ln_job_destroy(job);
}

static void test_timeout_values(void) {
  struct {
    const char *text;
    int64_t ms;
  } cases[] = {{"0.5", 500}, {"30", 30000}, {"86400", 86400000}, {"1e2", 100000},
               {"0.0001", 1}, {"0.3", 300}, {".25", 250},       {"2.", 2000}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char spec[128];
    snprintf(spec, sizeof spec, "ranks: 1\nprogram: p\nrendezvous:\n  timeout_s: %s\n", cases[i].text);
    ln_job *job = parse_ok(spec);
    CHECK_INT_EQ(job->rendezvous_timeout_ms, cases[i].ms);
    ln_job_destroy(job);
  }
}

static void test_paths(void) {
  ln_job *job = parse_ok("ranks: 1\nprogram: bin/train\nhostfile: ./conf/hosts\n");
  CHECK_STR_EQ(job->program, "/base/bin/train");
  CHECK_STR_EQ(job->hostfile, "/base/conf/hosts");
  ln_job_destroy(job);
  job = parse_ok("ranks: 1\nprogram: ./train\nhostfile: /etc/hosts.ftl\n");
  CHECK_STR_EQ(job->program, "/base/train");
  CHECK_STR_EQ(job->hostfile, "/etc/hosts.ftl");
  ln_job_destroy(job);
  job = parse_ok("ranks: 1\nprogram: /usr/bin/python3\nhostfile: ../hosts\n");
  CHECK_STR_EQ(job->program, "/usr/bin/python3");
  CHECK_STR_EQ(job->hostfile, "/base/../hosts");
  ln_job_destroy(job);
  /* A bare name is for PATH; run_dir and working_dir are kept as written. */
  job = parse_ok("ranks: 1\nprogram: python3\nrun_dir: out\nworking_dir: work\n");
  CHECK_STR_EQ(job->program, "python3");
  CHECK_STR_EQ(job->run_dir, "out");
  CHECK_STR_EQ(job->working_dir, "work");
  ln_job_destroy(job);

  /* No base folder: relative paths stay relative to the current one. */
  ftl_diag d = {{0}};
  const char *spec = "ranks: 1\nprogram: ./bin/x\nhostfile: hosts\n";
  CHECK_OK(ln_job_parse_bytes(spec, strlen(spec), "job.yaml", NULL, &job, &d), d.msg);
  CHECK_STR_EQ(job->program, "./bin/x");
  CHECK_STR_EQ(job->hostfile, "hosts");
  ln_job_destroy(job);
  /* A base folder given with a trailing slash does not double it. */
  CHECK_OK(ln_job_parse_bytes(spec, strlen(spec), "job.yaml", "/srv/", &job, &d), d.msg);
  CHECK_STR_EQ(job->program, "/srv/bin/x");
  ln_job_destroy(job);
}

static void test_names(void) {
  ln_job *job = parse_ok("name: a.B_c-9\nranks: 1\nprogram: p\n");
  CHECK_STR_EQ(job->name, "a.B_c-9");
  ln_job_destroy(job);
  char spec[256];
  snprintf(spec, sizeof spec, "name: %0100d\nranks: 1\nprogram: p\n", 7);
  job = parse_ok(spec);
  CHECK_INT_EQ(strlen(job->name), 100);
  ln_job_destroy(job);
  /* A name that reads as a number is still a name. */
  job = parse_ok("name: 2024\nranks: 1\nprogram: p\n");
  CHECK_STR_EQ(job->name, "2024");
  ln_job_destroy(job);

  /* Defaults come from the name given for errors. */
  struct {
    const char *file, *name;
  } cases[] = {{"job.yaml", "job"},           {"/x/y/my.job.yaml", "my.job"}, {"spec", "spec"},
               {".hidden.yaml", "hidden"},    {"weird name!.yml", "weird_name_"},
               {"/x/.yaml", "yaml"},          {NULL, "job"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ftl_diag d = {{0}};
    CHECK_OK(ln_job_parse_bytes(minimal, strlen(minimal), cases[i].file, NULL, &job, &d), d.msg);
    CHECK_STR_EQ(job->name, cases[i].name);
    ln_job_destroy(job);
  }
}

static void test_aliases(void) {
  ln_job *job = parse_ok("program: &p prog\nranks: 2\nargs: [*p, *p]\nenv: {A: *p}\n");
  CHECK_STR_EQ(job->program, "prog");
  CHECK_STR_EQ(job->args[0], "prog");
  CHECK_STR_EQ(job->args[1], "prog");
  CHECK_STR_EQ(job->env[0], "A=prog");
  ln_job_destroy(job);
  /* A whole section by alias. */
  job = parse_ok("ranks: 2\nprogram: p\nenv: &e {A: 1}\nrendezvous: &r {timeout_s: 5}\n");
  CHECK_INT_EQ(job->rendezvous_timeout_ms, 5000);
  ln_job_destroy(job);
}

/* ---- errors: their exact form ------------------------------------------------------------ */

static void test_ranks_errors(void) {
  CHECK_ERR("ranks: -2\nprogram: p\n", "job.yaml:1:8: field 'ranks': expected an integer > 0, got '-2'");
  CHECK_ERR("ranks: 0\nprogram: p\n", "job.yaml:1:8: field 'ranks': expected an integer > 0, got '0'");
  CHECK_ERR("program: p\nranks: 1048577\n", "job.yaml:2:8: field 'ranks': expected an integer <= 1048576, got '1048577'");
  CHECK_ERR("ranks: 99999999999999999999999\nprogram: p\n",
            "job.yaml:1:8: field 'ranks': expected an integer <= 1048576, got '99999999999999999999999'");
  CHECK_ERR("ranks: -99999999999999999999999\nprogram: p\n",
            "job.yaml:1:8: field 'ranks': expected an integer > 0, got '-99999999999999999999999'");
  CHECK_ERR("ranks: 4.5\nprogram: p\n",
            "job.yaml:1:8: field 'ranks': expected an integer from 1 to 1048576, got a float '4.5'");
  CHECK_ERR("ranks: four\nprogram: p\n",
            "job.yaml:1:8: field 'ranks': expected an integer from 1 to 1048576, got a string 'four'");
  CHECK_ERR("ranks: \"4\"\nprogram: p\n",
            "job.yaml:1:8: field 'ranks': expected an integer from 1 to 1048576, got a string '4'");
  CHECK_ERR("ranks: true\nprogram: p\n",
            "job.yaml:1:8: field 'ranks': expected an integer from 1 to 1048576, got a boolean 'true'");
  CHECK_ERR("ranks: [4]\nprogram: p\n",
            "job.yaml:1:8: field 'ranks': expected an integer from 1 to 1048576, got a sequence");
  CHECK_ERR("ranks: {a: 1}\nprogram: p\n",
            "job.yaml:1:8: field 'ranks': expected an integer from 1 to 1048576, got a mapping");
  CHECK_ERR("ranks: 0x10\nprogram: p\n",
            "job.yaml:1:8: field 'ranks': expected an integer from 1 to 1048576, got a string '0x10'");
  CHECK_ERR_HAS("ranks:\nprogram: p\n", "field 'ranks': missing a value");
  CHECK_ERR_HAS("ranks: ~\nprogram: p\n", "job.yaml:1:8: field 'ranks': missing a value");
  CHECK_ERR_HAS("ranks: null\nprogram: p\n", "field 'ranks': missing a value");
}

static void test_required(void) {
  CHECK_ERR("program: p\n", "job.yaml:1:1: field 'ranks': required field is missing");
  CHECK_ERR("ranks: 3\n", "job.yaml:1:1: field 'program': required field is missing");
  CHECK_ERR("program:\nranks: 1\n", "job.yaml:1:9: field 'program': missing a value");
  CHECK_ERR("program: \"\"\nranks: 1\n", "job.yaml:1:10: field 'program': expected a non-empty string, got a string ''");
  CHECK_ERR_HAS("ranks: 1\nprogram: [a]\n", "field 'program': expected a string, got a sequence");
}

static void test_unknown_fields(void) {
  CHECK_ERR("ranks: 1\nprogram: p\nfoo: 1\n",
            "job.yaml:3:1: field 'foo': unknown field (known fields: name, ranks, program, args, env, "
            "hostfile, launcher, run_dir, working_dir, rendezvous, fleet_ledger, fleet, min_ranks, restart, timeouts, "
            "preemption, checkpoint, metrics, mfu, inputs, eval, registry)");
  /* checkpoint.levels: l1, l2 and l3, l3 always, l2 only with l1; L2 opt-in, L1 by default. */
  CHECK_ERR_HAS("ranks: 1\nprogram: p\ncheckpoint: {levels: [l1]}\n", "field 'checkpoint.levels': must include l3");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\ncheckpoint: {levels: [l2, l3]}\n",
                "field 'checkpoint.levels': l2 needs l1: the partner host keeps its copies in its L1 folder");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\ncheckpoint: {levels: [l3, disk]}\n",
                "field 'checkpoint.levels': expected l1, l2 or l3, got 'disk'");
  /* An empty list is not the default (no list): it names no level at all. A level named twice is
   * a mistake, not a second copy. */
  CHECK_ERR("ranks: 1\nprogram: p\ncheckpoint: {levels: []}\n",
            "job.yaml:3:22: field 'checkpoint.levels': an empty list: must include l3: a step is committed in the run "
            "directory, the other levels are copies");
  CHECK_ERR("ranks: 1\nprogram: p\ncheckpoint:\n  levels: [l1, l1, l3]\n",
            "job.yaml:4:11: field 'checkpoint.levels': names l1 twice");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\ncheckpoint: {levels: [l3, l1, l3]}\n", "field 'checkpoint.levels': names l3 twice");
  ln_job *lv = parse_ok("ranks: 2\nprogram: p\ncheckpoint: {levels: [l1, l2, l3]}\n");
  CHECK(ln_job_ckpt_l1(lv) && ln_job_ckpt_l2(lv));
  CHECK_INT_EQ(ln_job_ckpt_l2_mode(lv), 1);
  ln_job_destroy(lv);
  lv = parse_ok("ranks: 2\nprogram: p\n");
  CHECK(ln_job_ckpt_l1(lv) && !ln_job_ckpt_l2(lv));
  /* No list: L2 follows the placement (the ranks turn it on when they span several hosts). */
  CHECK_INT_EQ(ln_job_ckpt_l2_mode(lv), LN_CKPT_L2_AUTO);
  ln_job_destroy(lv);
  lv = parse_ok("ranks: 2\nprogram: p\ncheckpoint: {levels: [l1, l3]}\n");
  CHECK_INT_EQ(ln_job_ckpt_l2_mode(lv), 0);
  ln_job_destroy(lv);
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nrestart: {standby: maybe}\n", "field 'restart.standby'");
  CHECK_ERR("ranks: 1\nprogram: p\nrendezvous:\n  timeout: 5\n",
            "job.yaml:4:3: field 'rendezvous.timeout': unknown field (known fields: timeout_s)");
  /* Case matters; YAML merge keys are not supported and read as an unknown key. */
  CHECK_ERR_HAS("Ranks: 1\nprogram: p\n", "job.yaml:1:1: field 'Ranks': unknown field");
  CHECK_ERR_HAS("base: &b {ranks: 1}\n", "field 'base': unknown field");
  CHECK_ERR_HAS("<<: {ranks: 1}\nprogram: p\n", "field '<<': unknown field");
  /* Odd keys are quoted safely. */
  CHECK_ERR_HAS("\"a'b\\nc\\0\": 1\n", "field 'a\\'b\\nc\\x00': unknown field");
  CHECK_ERR_HAS("? [a]\n: 1\n", "job.yaml:1:3: expected field names as keys, got a sequence");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nrendezvous: {? {a: 1} : 1}\n",
                "field 'rendezvous': expected field names as keys, got a mapping");
}

/* inputs:, eval: and registry: (docs/pipeline.md): values, defaults, and the same strictness. */
static void test_pipeline_sections(void) {
  ln_job *job = parse_ok("ranks: 1\nprogram: p\n");
  CHECK(job->eval.program == NULL);
  CHECK_INT_EQ(job->registry.present, 0);
  CHECK_INT_EQ(job->inputs_count, 0);
  CHECK(job->inputs && !job->inputs[0]);
  ln_job_destroy(job);
  job = parse_ok("ranks: 1\nprogram: p\ninputs: {train: data/t.txt, heldout: /d/h.txt}\n"
                 "eval:\n  program: bin/eval\n  args: [--a, \"{adapter}\"]\n  env: {X: 1}\n  data: heldout\n"
                 "  metric: exact_match\n  threshold: 0.9\n  direction: lower\n  min_gain: -1e-3\n  timeout_s: 2.5\n"
                 "registry: {}\n");
  CHECK_INT_EQ(job->inputs_count, 2);
  CHECK_STR_EQ(job->inputs[0], "train=data/t.txt"); /* kept as written, like run_dir */
  CHECK_STR_EQ(job->eval.program, "/base/bin/eval");
  CHECK_INT_EQ(job->eval.args_count, 2);
  CHECK_STR_EQ(job->eval.args[1], "{adapter}");
  CHECK_STR_EQ(job->eval.env[0], "X=1");
  CHECK(job->eval.threshold == 0.9);
  CHECK_INT_EQ(job->eval.direction, EV_LOWER_PASSES);
  CHECK_INT_EQ(job->eval.has_min_gain, 1);
  CHECK(job->eval.min_gain == -1e-3);
  CHECK_INT_EQ(job->eval.timeout_ms, 2500);
  CHECK(job->eval.base == NULL);
  CHECK_INT_EQ(job->registry.present, 1);
  CHECK(job->registry.path == NULL && job->registry.channel == NULL);
  ln_job_destroy(job);
  job = parse_ok("ranks: 1\nprogram: p\neval: {program: e, data: d, metric: m, threshold: 1}\n");
  CHECK_INT_EQ(job->eval.direction, EV_HIGHER_PASSES);
  CHECK_INT_EQ(job->eval.timeout_ms, 600000);
  CHECK_INT_EQ(job->eval.has_min_gain, 0);
  CHECK(job->eval.threshold == 1.0);
  ln_job_destroy(job);
  CHECK_ERR_HAS("ranks: 1\nprogram: p\neval: {program: e, data: d, metric: m}\n",
                "field 'eval.threshold': required field is missing");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\neval: {program: e, data: d, metric: m, threshold: 1, treshold: 2}\n",
                "field 'eval.treshold': unknown field");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\neval: {program: e, data: d, metric: m, threshold: .inf}\n",
                "field 'eval.threshold': expected a finite number, got '.inf'");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\neval: {program: e, data: d, metric: m, threshold: \"0.9\"}\n",
                "field 'eval.threshold': expected a number, got a string");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\neval: {program: e, data: d, metric: m, threshold: 1, direction: up}\n",
                "field 'eval.direction': expected one of higher, lower");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nregistry: {path: r, chanel: c}\n", "field 'registry.chanel': unknown field");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\ninputs: {1x: a}\n", "field 'inputs.1x'");
}

static void test_duplicates(void) {
  CHECK_ERR("ranks: 1\nprogram: p\nranks: 2\n", "job.yaml:3:1: field 'ranks': duplicate key (first at line 1)");
  CHECK_ERR("ranks: 1\nprogram: p\nenv:\n  A: 1\n  A: 2\n",
            "job.yaml:5:3: field 'env.A': duplicate key (first at line 4)");
  CHECK_ERR("ranks: 1\nprogram: p\nrendezvous: {timeout_s: 1, timeout_s: 2}\n",
            "job.yaml:3:28: field 'rendezvous.timeout_s': duplicate key (first at line 3)");
}

static void test_type_errors(void) {
  CHECK_ERR("ranks: 1\nprogram: p\nargs: --x\n",
            "job.yaml:3:7: field 'args': expected a sequence of strings, got a string '--x'");
  CHECK_ERR("ranks: 1\nprogram: p\nargs: [a, {b: c}]\n",
            "job.yaml:3:11: field 'args[1]': expected a string, got a mapping");
  CHECK_ERR("ranks: 1\nprogram: p\nargs: [a, [b]]\n", "job.yaml:3:11: field 'args[1]': expected a string, got a sequence");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nargs: [a, ~]\n", "field 'args[1]': missing a value");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nargs:\n", "field 'args': missing a value");
  CHECK_ERR("ranks: 1\nprogram: p\nenv: [A=1]\n",
            "job.yaml:3:6: field 'env': expected a mapping of NAME: value, got a sequence");
  CHECK_ERR("ranks: 1\nprogram: p\nenv: {A: {B: 1}}\n", "job.yaml:3:10: field 'env.A': expected a string or a number, got a mapping");
  CHECK_ERR("ranks: 1\nprogram: p\nenv: {1A: x}\n",
            "job.yaml:3:7: field 'env.1A': expected a variable name matching [A-Za-z_][A-Za-z0-9_]*");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nenv: {A-B: x}\n", "field 'env.A-B': expected a variable name");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nenv: {\"\": x}\n", "field 'env.': expected a variable name");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nenv: {[A]: x}\n", "field 'env': expected variable names as keys, got a sequence");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nenv: {A: }\n", "field 'env.A': missing a value");
  CHECK_ERR("ranks: 1\nprogram: p\nlauncher: pbs\n",
            "job.yaml:3:11: field 'launcher': expected one of auto, mpirun, srun, got a string 'pbs'");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nlauncher: [srun]\n", "expected one of auto, mpirun, srun, got a sequence");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nlauncher: SRUN\n", "got a string 'SRUN'");
  CHECK_ERR("ranks: 1\nprogram: p\nrendezvous: 30\n",
            "job.yaml:3:13: field 'rendezvous': expected a mapping, got an integer '30'");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nrendezvous:\n", "field 'rendezvous': missing a value");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nhostfile: ''\n", "field 'hostfile': expected a non-empty string");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nrun_dir: {}\n", "field 'run_dir': expected a string, got a mapping");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nworking_dir: ''\n", "field 'working_dir': expected a non-empty string");
  CHECK_ERR_HAS("ranks: 1\nprogram: \"a\\0b\"\n", "job.yaml:2:10: field 'program': contains a NUL character");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nenv: {A: \"x\\0\"}\n", "field 'env.A': contains a NUL character");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nargs: [\"\\0\"]\n", "field 'args[0]': contains a NUL character");
}

static void test_name_errors(void) {
  const char *expect = "expected 1 to 100 characters from A-Z a-z 0-9 . _ - not starting with '.'";
  CHECK_ERR_HAS("name: .x\nranks: 1\nprogram: p\n", expect);
  CHECK_ERR("name: a b\nranks: 1\nprogram: p\n", "job.yaml:1:7: field 'name': expected 1 to 100 characters from "
                                               "A-Z a-z 0-9 . _ - not starting with '.', got a string 'a b'");
  CHECK_ERR_HAS("name: a/b\nranks: 1\nprogram: p\n", expect);
  CHECK_ERR_HAS("name: ''\nranks: 1\nprogram: p\n", expect);
  CHECK_ERR_HAS("name: é\nranks: 1\nprogram: p\n", expect);
  char spec[256];
  snprintf(spec, sizeof spec, "name: %0101d\nranks: 1\nprogram: p\n", 7);
  /* The quoted value is cut after 60 characters. */
  CHECK_ERR_HAS(spec, "got an integer '000000000000000000000000000000000000000000000000000000000000...'");
}

static void test_timeout_errors(void) {
  const char *bad[] = {"0", "-1", "86400.5", "86401", "1e400", "1e-400", ".inf", "-.inf", ".nan"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char spec[128], expect[160];
    snprintf(spec, sizeof spec, "ranks: 1\nprogram: p\nrendezvous:\n  timeout_s: %s\n", bad[i]);
    snprintf(expect, sizeof expect,
             "job.yaml:4:14: field 'rendezvous.timeout_s': expected a number of seconds > 0 and <= 86400, got '%s'",
             bad[i]);
    CHECK_ERR(spec, expect);
  }
  CHECK_ERR("ranks: 1\nprogram: p\nrendezvous: {timeout_s: soon}\n",
            "job.yaml:3:25: field 'rendezvous.timeout_s': expected a number of seconds > 0 and <= 86400, got a "
            "string 'soon'");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nrendezvous: {timeout_s: \"30\"}\n", "got a string '30'");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nrendezvous: {timeout_s: [1]}\n", "got a sequence");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nrendezvous: {timeout_s: }\n", "field 'rendezvous.timeout_s': missing a value");
}

static void test_document_errors(void) {
  const char *empties[] = {"", "# nothing but a comment\n", "---\n", "~\n", "null", "--- \n...\n", "\n\n\n"};
  for (size_t i = 0; i < sizeof empties / sizeof empties[0]; i++)
    CHECK_ERR_HAS(empties[i], "the file is empty; expected a mapping of job fields");
  CHECK_ERR("- ranks: 1\n", "job.yaml:1:1: expected a mapping of job fields at the top level, got a sequence");
  CHECK_ERR("hello\n", "job.yaml:1:1: expected a mapping of job fields at the top level, got a string 'hello'");
  CHECK_ERR("42", "job.yaml:1:1: expected a mapping of job fields at the top level, got an integer '42'");
  CHECK_ERR("ranks: 1\nprogram: p\n---\nranks: 2\n",
            "job.yaml:3:1: a second YAML document starts here; a job spec is one document");
}

static void test_syntax_errors(void) {
  CHECK_ERR_HAS("ranks: [1, 2\nprogram: p\n", "job.yaml:");
  CHECK_ERR_HAS("ranks: [1, 2\nprogram: p\n", "YAML syntax error: ");
  CHECK_ERR("ranks: 1\nprogram: p: q\n", "job.yaml:2:11: YAML syntax error: mapping values are not allowed in this context");
  CHECK_ERR_HAS("ranks: 1\n  program: p\n", "YAML syntax error");
  CHECK_ERR_HAS("ranks: \"1\nprogram: p\n", "YAML syntax error: found unexpected end of stream (while scanning a quoted scalar at line 1, column 8)");
  CHECK_ERR_HAS("ranks: 1\nprogram: *nope\n", "job.yaml:2:10: YAML error: found undefined alias");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\n\tenv: {}\n", "YAML syntax error");
  CHECK_ERR_HAS("%YAML 9.9\n---\nranks: 1\n", "YAML syntax error: found incompatible YAML document");
  /* Bytes libyaml's reader rejects: bad UTF-8, control characters, a NUL. */
  CHECK_ERR("ranks: 1\nprogram: \xff\n", "job.yaml:2:10: cannot read the text: invalid leading UTF-8 octet (byte 0xFF at offset 18)");
  CHECK_ERR_HAS("ranks: 1\nprogram: a\x01\n", "job.yaml:2:11: cannot read the text: control characters are not allowed");
  const char with_nul[] = "ranks: 1\nprog\0ram: p\n";
  ln_job *job = NULL;
  ftl_diag d = {{0}};
  CHECK_INT_EQ(ln_job_parse_bytes(with_nul, sizeof with_nul - 1, "job.yaml", NULL, &job, &d), FTL_ERR_SPEC);
  CHECK_STR_CONTAINS(d.msg, "job.yaml:2:5: cannot read the text: control characters are not allowed");
  CHECK(job == NULL);
}

/* ---- hostile inputs ---------------------------------------------------------------------- */

/* Levels 1 to 9 of a billion laughs, after a level 0 anchored as &l0: each level an anchor &lN
 * holding ten aliases of level N-1, one a line: "lN: &lN [...]" (keyed) or "  - &lN [...]" (items of
 * a sequence). */
static void add_laughs(text *t, int keyed) {
  for (int level = 1; level <= 9; level++) {
    char line[256];
    int n = keyed ? snprintf(line, sizeof line, "l%d: ", level) : snprintf(line, sizeof line, "  - ");
    n += snprintf(line + n, sizeof line - (size_t)n, "&l%d [", level);
    for (int i = 0; i < 10; i++) n += snprintf(line + n, sizeof line - (size_t)n, "%s*l%d", i ? "," : "", level - 1);
    snprintf(line + n, sizeof line - (size_t)n, "]\n");
    text_add(t, line);
  }
}

static void test_alias_cycles_and_bombs(void) {
  /* An anchor holding its own alias is a cycle: it never ends when expanded, and is refused where
   * the alias stands, naming the field. */
  CHECK_ERR("ranks: 1\nprogram: p\nargs: &a [*a]\n",
            "job.yaml:3:11: field 'args[0]': the alias '*a' is inside the node it names (a cycle, which never ends "
            "when expanded)");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nenv: &e {A: *e}\n", "job.yaml:3:13: field 'env.A': the alias '*e' is inside");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nrendezvous: &r {timeout_s: *r}\n", "field 'rendezvous.timeout_s': the alias '*r'");
  CHECK_ERR_HAS("&top {ranks: 1, program: p, rendezvous: *top}\n", "field 'rendezvous': the alias '*top' is inside");
  /* A billion laughs: nine levels of ten aliases, a few hundred nodes in the graph, refused by its
   * expanded size where it passes the limit (level 5 holds 10^5 nodes). */
  text t = {0};
  text_add(&t, "ranks: 1\nprogram: p\nl0: &l0 [lol]\n");
  add_laughs(&t, 1);
  CHECK_ERR_HAS(t.p, "field 'l5[");
  CHECK_ERR_HAS(t.p, "with its aliases expanded the document has more than 100000 YAML nodes (the limit)");
  free(t.p);
  /* The same bomb inside args. */
  t = (text){0};
  text_add(&t, "ranks: 1\nprogram: p\nargs:\n  - &l0 [lol]\n");
  add_laughs(&t, 0);
  CHECK_ERR_HAS(t.p, "field 'args[5][");
  CHECK_ERR_HAS(t.p, "more than 100000 YAML nodes (the limit)");
  free(t.p);
  /* Issue 11 item 7: one anchored 100 KB string aliased 9000 times in args (a 127 KB file that
   * stood for 900 MB) is refused by the expanded size, at once, naming the item. */
  t = (text){0};
  text_add(&t, "ranks: 1\nprogram: p\nargs: [&big \"");
  char *chunk = malloc(100 * 1024 + 1);
  CHECK(chunk != NULL);
  memset(chunk, 'a', 100 * 1024);
  chunk[100 * 1024] = '\0';
  text_add(&t, chunk);
  free(chunk);
  text_add(&t, "\"");
  for (int i = 0; i < 9000; i++) text_add(&t, ",*big");
  text_add(&t, "]\n");
  int64_t t0 = ftl_clock_ms();
  CHECK_ERR_HAS(t.p, "field 'args[40]': with its aliases expanded the document holds more than 4194304 bytes of "
                     "text (the limit); a job spec is far smaller");
  CHECK(ftl_clock_ms() - t0 < 1000);
  free(t.p);
}

/* The limits on args and env (docs/job-spec.md, Limits): items, bytes of one, bytes of all. */
static void test_list_limits(void) {
  /* 4096 arguments are fine, 4097 are not. */
  text t = {0};
  text_add(&t, "ranks: 1\nprogram: p\nargs: [");
  for (int i = 0; i < 4095; i++) text_add(&t, "x,");
  text_add(&t, "y]\n");
  ln_job *job = parse_ok(t.p);
  CHECK_INT_EQ(job->args_count, 4096);
  CHECK_STR_EQ(job->args[4095], "y");
  ln_job_destroy(job);
  free(t.p);
  t = (text){0};
  text_add(&t, "ranks: 1\nprogram: p\nargs: [");
  for (int i = 0; i < 4096; i++) text_add(&t, "x,");
  text_add(&t, "y]\n");
  CHECK_ERR(t.p, "job.yaml:3:8200: field 'args[4096]': too many items: the limit is 4096 in one list");
  free(t.p);
  /* One argument of 131071 bytes is fine; 131072 is not (execve refuses it). */
  size_t n = 131072;
  char *arg = malloc(n + 1);
  CHECK(arg != NULL);
  memset(arg, 'a', n);
  arg[n] = '\0';
  t = (text){0};
  text_add(&t, "ranks: 1\nprogram: p\nargs: [a, ");
  text_add(&t, arg + 1);
  text_add(&t, "]\n");
  job = parse_ok(t.p);
  CHECK_INT_EQ(strlen(job->args[1]), 131071);
  ln_job_destroy(job);
  free(t.p);
  t = (text){0};
  text_add(&t, "ranks: 1\nprogram: p\nargs: [a, ");
  text_add(&t, arg);
  text_add(&t, "]\n");
  CHECK_ERR(t.p, "job.yaml:3:11: field 'args[1]': 131072 bytes long: the limit is 131071 bytes for one item");
  free(t.p);
  /* env: NAME=VALUE counts. */
  t = (text){0};
  text_add(&t, "ranks: 1\nprogram: p\nenv: {AB: ");
  text_add(&t, arg + 3);
  text_add(&t, "}\n");
  CHECK_ERR(t.p, "job.yaml:3:11: field 'env.AB': 131072 bytes long: the limit is 131071 bytes for one item");
  free(t.p);
  /* All arguments together: nine of 120000 bytes (one anchored, eight aliases: the file itself
   * stays small) pass 1 MiB at the ninth. */
  arg[120000] = '\0';
  t = (text){0};
  text_add(&t, "ranks: 1\nprogram: p\nargs:\n  - &a ");
  text_add(&t, arg);
  text_add(&t, "\n");
  for (int i = 1; i < 9; i++) text_add(&t, "  - *a\n");
  /* An alias's value is its anchor's node: the line and column are the anchor's, the field the alias's. */
  CHECK_ERR(t.p, "job.yaml:4:5: field 'args[8]': the list reaches 1080009 bytes here: the limit is 1048576 bytes "
                 "for one list");
  free(t.p);
  free(arg);
  /* 4097 variables. */
  t = (text){0};
  text_add(&t, "ranks: 1\nprogram: p\nenv:\n");
  for (int i = 0; i < 4097; i++) {
    char line[64];
    snprintf(line, sizeof line, "  V%d: x\n", i);
    text_add(&t, line);
  }
  CHECK_ERR(t.p, "job.yaml:4100:10: field 'env.V4096': too many items: the limit is 4096 in one list");
  free(t.p);
}

/* Names ftl or Open MPI set for the ranks are refused in `env`, naming the field. */
static void test_reserved_env(void) {
  CHECK_ERR("ranks: 1\nprogram: p\nenv: {FTL_RDZV_TOKEN: x}\n",
            "job.yaml:3:23: field 'env.FTL_RDZV_TOKEN': reserved: FTL_* variables are ftl's own, except FTL_LOG_LEVEL, "
            "FTL_BACKEND, FTL_COLLECTIVE_TIMEOUT_MS, FTL_CKPT_ALLOW_FRESH, FTL_CKPT_L2_TRANSPORT and the test-only fault "
            "injection (docs/job-spec.md)");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nenv:\n  A: 1\n  FTL_X: 2\n", "job.yaml:5:10: field 'env.FTL_X': reserved");
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nenv: {RANK: 3}\n", "field 'env.RANK': reserved: ftl sets RANK for every rank");
  const char *names[] = {"WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                         "OMPI_COMM_WORLD_RANK", "OMPI_MCA_btl", "PMIX_RANK", "PRTE_MCA_x", "FTL_JOB_ENV_PATH"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char spec[160], want[80];
    snprintf(spec, sizeof spec, "ranks: 1\nprogram: p\nenv: {%s: v}\n", names[i]);
    snprintf(want, sizeof want, "field 'env.%s': reserved", names[i]);
    CHECK_ERR_HAS(spec, want);
  }
  CHECK_ERR_HAS("ranks: 1\nprogram: p\nenv: {OMPI_MCA_btl: tcp}\n",
                "OMPI_* variables belong to Open MPI's launch of the ranks; set MCA parameters in the environment of "
                "`ftl run` instead");
  /* The allowed ones, and names that only look alike. */
  ln_job *job = parse_ok("ranks: 1\nprogram: p\nenv: {FTL_LOG_LEVEL: debug, FTL_BACKEND: mpi, FTL_CRASH_AT: x, "
                          "FTL_CKPT_CRASH_STEP: 3, FTL_COLLECTIVE_TIMEOUT_MS: 5, RANKS: 2, ftl_x: 1, FTL: 1, "
                          "MY_RANK: 1, PATH: /nonexistent}\n");
  CHECK_INT_EQ(job->env_count, 10);
  ln_job_destroy(job);
}

static void test_size_limits(void) {
  /* More than 10000 nodes. */
  text t = {0};
  text_add(&t, "ranks: 1\nprogram: p\nargs: [");
  for (int i = 0; i < 10001; i++) text_add(&t, "x,");
  text_add(&t, "x]\n");
  CHECK_ERR_HAS(t.p, "more than 10000 YAML nodes");
  free(t.p);
  ln_job *job = NULL;
  /* Deeper than 64 levels: flow and block. */
  t = (text){0};
  text_add(&t, "ranks: 1\nprogram: p\nargs: ");
  for (int i = 0; i < 100000; i++) text_add(&t, "[");
  CHECK_ERR_HAS(t.p, "job.yaml:3:70: nested deeper than 64 levels");
  free(t.p);
  t = (text){0};
  for (int i = 0; i < 70; i++) {
    char line[256];
    snprintf(line, sizeof line, "%*sk%d:\n", i, "", i);
    text_add(&t, line);
  }
  CHECK_ERR_HAS(t.p, "nested deeper than 64 levels");
  free(t.p);
  /* 64 levels are allowed by the shape check (and then fail on the field). */
  t = (text){0};
  text_add(&t, "ranks: 1\nprogram: p\nargs: ");
  for (int i = 0; i < 63; i++) text_add(&t, "[");
  for (int i = 0; i < 63; i++) text_add(&t, "]");
  CHECK_ERR_HAS(t.p, "field 'args[0]': expected a string, got a sequence");
  free(t.p);
  /* Over 1 MiB: rejected before parsing. */
  size_t big = ((size_t)1 << 20) + 1;
  char *huge = malloc(big + 1);
  CHECK(huge != NULL);
  memset(huge, '#', big);
  huge[big] = '\0';
  CHECK_ERR(huge, "job.yaml: too large for a job spec (the limit is 1048576 bytes)");
  /* A long comment just under the limit is fine. */
  memcpy(huge, "ranks: 1\nprogram: p\n", 20);
  huge[big - 1] = '\0';
  job = parse_ok(huge);
  ln_job_destroy(job);
  free(huge);
}

/* ---- hashing ----------------------------------------------------------------------------- */

static void test_spec_hash(void) {
  ln_job *a = parse_ok(minimal);
  ln_job *b = parse_ok(minimal);
  ln_job *c = parse_ok("ranks: 4\nprogram: ftl-allreduce-check\n\n");
  CHECK_STR_EQ(a->spec_hash, b->spec_hash);
  CHECK(strcmp(a->spec_hash, c->spec_hash) != 0);
  for (int i = 0; i < 32; i++) CHECK((a->spec_hash[i] >= '0' && a->spec_hash[i] <= '9') || (a->spec_hash[i] >= 'a' && a->spec_hash[i] <= 'f'));
  /* The canonical (big-endian) form, as `xxh128sum` prints it. */
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, XXH3_128bits(minimal, strlen(minimal)));
  char expect[33];
  for (int i = 0; i < 16; i++) snprintf(expect + 2 * i, 3, "%02x", canon.digest[i]);
  CHECK_STR_EQ(a->spec_hash, expect);
  ln_job_destroy(a);
  ln_job_destroy(b);
  ln_job_destroy(c);
}

/* ---- files ------------------------------------------------------------------------------- */

static void test_parse_file(void) {
  char path[PATH_MAX], sub[512], expect[PATH_MAX + 64];
  snprintf(sub, sizeof sub, "%s/specs", tmp_dir);
  CHECK(mkdir(sub, 0755) == 0);
  snprintf(path, sizeof path, "%s/my.job.yaml", sub);
  write_file(path, "ranks: 2\nprogram: bin/train\nhostfile: hosts\n");
  ln_job *job = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(ln_job_parse_file(path, &job, &d), d.msg);
  CHECK_STR_EQ(job->spec_path, path);
  CHECK_STR_EQ(job->name, "my.job");
  snprintf(expect, sizeof expect, "%s/bin/train", sub);
  CHECK_STR_EQ(job->program, expect);
  snprintf(expect, sizeof expect, "%s/hosts", sub);
  CHECK_STR_EQ(job->hostfile, expect);
  ln_job_destroy(job);

  /* A relative spec path: its folder is made absolute against the current folder. */
  char old_cwd[PATH_MAX];
  CHECK(getcwd(old_cwd, sizeof old_cwd) != NULL);
  CHECK(chdir(tmp_dir) == 0);
  CHECK_OK(ln_job_parse_file("specs/my.job.yaml", &job, &d), d.msg);
  CHECK_STR_EQ(job->spec_path, "specs/my.job.yaml");
  snprintf(expect, sizeof expect, "%s/bin/train", sub);
  CHECK_STR_EQ(job->program, expect);
  ln_job_destroy(job);
  CHECK(chdir(sub) == 0);
  CHECK_OK(ln_job_parse_file("my.job.yaml", &job, &d), d.msg);
  CHECK_STR_EQ(job->program, expect);
  ln_job_destroy(job);
  CHECK(chdir(old_cwd) == 0);

  /* Errors name the path as given. */
  snprintf(path, sizeof path, "%s/bad.yaml", sub);
  write_file(path, "ranks: 2\nprogram: p\nranks: 3\n");
  CHECK_INT_EQ(ln_job_parse_file(path, &job, &d), FTL_ERR_SPEC);
  snprintf(expect, sizeof expect, "%s:3:1: field 'ranks': duplicate key (first at line 1)", path);
  CHECK_STR_EQ(d.msg, expect);
  CHECK(job == NULL);

  snprintf(path, sizeof path, "%s/nope.yaml", sub);
  CHECK_INT_EQ(ln_job_parse_file(path, &job, &d), FTL_ERR_NOTFOUND);
  snprintf(expect, sizeof expect, "cannot read %s: No such file or directory", path);
  CHECK_STR_EQ(d.msg, expect);
  CHECK_INT_EQ(ln_job_parse_file(sub, &job, &d), FTL_ERR_IO);
  snprintf(expect, sizeof expect, "cannot read %s: Is a directory", sub);
  CHECK_STR_EQ(d.msg, expect);
  if (geteuid() != 0) {
    snprintf(path, sizeof path, "%s/secret.yaml", sub);
    write_file(path, minimal);
    CHECK(chmod(path, 0) == 0);
    CHECK_INT_EQ(ln_job_parse_file(path, &job, &d), FTL_ERR_IO);
    CHECK_STR_CONTAINS(d.msg, "Permission denied");
  }

  /* Too large on disk. */
  snprintf(path, sizeof path, "%s/big.yaml", sub);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  for (int i = 0; i < 1100; i++) {
    char line[1024];
    memset(line, '#', sizeof line);
    CHECK(fwrite(line, 1, sizeof line, f) == sizeof line);
  }
  CHECK(fclose(f) == 0);
  CHECK_INT_EQ(ln_job_parse_file(path, &job, &d), FTL_ERR_SPEC);
  CHECK_STR_CONTAINS(d.msg, "too large for a job spec");

  CHECK_INT_EQ(ln_job_parse_file(NULL, &job, &d), FTL_ERR_INVAL);
  CHECK_INT_EQ(ln_job_parse_file(path, NULL, &d), FTL_ERR_INVAL);
  CHECK_INT_EQ(ln_job_parse_bytes(NULL, 3, "x", NULL, &job, &d), FTL_ERR_INVAL);
  CHECK_INT_EQ(ln_job_parse_bytes("x", 1, "x", NULL, NULL, &d), FTL_ERR_INVAL);
  /* d may be NULL. */
  CHECK_INT_EQ(ln_job_parse_bytes("x", 1, "x", NULL, &job, NULL), FTL_ERR_SPEC);
}

/* Golden files: ok-*.yaml parse; bad-*.yaml fail with exactly the message in bad-*.err (with the
 * file named by its base name). */
static void test_golden_files(void) {
  const char *src = getenv("FTL_SOURCE_DIR");
  if (!src) src = FTL_SOURCE_DIR_DEFAULT;
  char dir_path[PATH_MAX];
  snprintf(dir_path, sizeof dir_path, "%s/tests/data/jobspecs", src);
  DIR *dir = opendir(dir_path);
  if (!dir) FTL_TEST_FAIL_("cannot open %s: %s", dir_path, strerror(errno));
  int ok = 0, bad = 0;
  struct dirent *e;
  while ((e = readdir(dir))) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 5, ".yaml") != 0) continue;
    char path[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", dir_path, e->d_name);
    char *data = NULL;
    size_t size = 0;
    ftl_diag d = {{0}};
    CHECK_OK(ftl_read_file(path, 1 << 20, &data, &size, &d), d.msg);
    ln_job *job = NULL;
    ftl_err rc = ln_job_parse_bytes(data, size, e->d_name, "/specs", &job, &d);
    if (strncmp(e->d_name, "ok-", 3) == 0) {
      if (rc != FTL_OK) FTL_TEST_FAIL_("%s: %s", e->d_name, d.msg);
      CHECK(job->ranks > 0 && job->program && job->name);
      ok++;
    } else if (strncmp(e->d_name, "bad-", 4) == 0) {
      if (rc != FTL_ERR_SPEC) FTL_TEST_FAIL_("%s: expected FTL_ERR_SPEC, got %s", e->d_name, ftl_err_name(rc));
      char err_path[PATH_MAX + 256];
      snprintf(err_path, sizeof err_path, "%.*s.err", (int)(strlen(path) - 5), path);
      char *expect = NULL;
      size_t expect_size = 0;
      CHECK_OK(ftl_read_file(err_path, 4096, &expect, &expect_size, &d), d.msg);
      while (expect_size > 0 && expect[expect_size - 1] == '\n') expect[--expect_size] = '\0';
      if (strcmp(d.msg, expect) != 0)
        FTL_TEST_FAIL_("%s:\n  got      %s\n  expected %s", e->d_name, d.msg, expect);
      ftl_free(expect);
      bad++;
    }
    ln_job_destroy(job);
    ftl_free(data);
  }
  closedir(dir);
  CHECK(ok >= 2);
  CHECK(bad >= 5);
}

/* ---- the command line -------------------------------------------------------------------- */

static void test_from_argv(void) {
  char a0[] = "/usr/bin/python3.11", a1[] = "train.py", a2[] = "--lr", a3[] = "1e-4";
  char *argv[] = {a0, a1, a2, a3, NULL};
  ln_job *job = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(ln_job_from_argv(8, 4, argv, &job, &d), d.msg);
  CHECK_STR_EQ(job->name, "train"); /* an interpreter's job is named after its script */
  CHECK_INT_EQ(job->ranks, 8);
  CHECK_STR_EQ(job->program, "/usr/bin/python3.11");
  CHECK_INT_EQ(job->args_count, 3);
  CHECK_STR_EQ(job->args[0], "train.py");
  CHECK_STR_EQ(job->args[2], "1e-4");
  CHECK(job->args[3] == NULL);
  CHECK(job->env && job->env[0] == NULL);
  CHECK_INT_EQ(job->env_count, 0);
  CHECK(job->spec_path == NULL);
  CHECK_STR_EQ(job->spec_hash, "");
  CHECK_INT_EQ(job->launcher, FTL_LAUNCH_AUTO);
  CHECK_INT_EQ(job->rendezvous_timeout_ms, 300000);
  CHECK(job->hostfile == NULL && job->run_dir == NULL && job->working_dir == NULL);
  ln_job_destroy(job);

  char prog_with_space[] = "./my prog", only_dots[] = "/x/...", nothing[] = "";
  char *one[] = {prog_with_space, NULL};
  CHECK_OK(ln_job_from_argv(1, 1, one, &job, &d), d.msg);
  CHECK_STR_EQ(job->name, "my_prog");
  CHECK_STR_EQ(job->program, "./my prog");
  CHECK_INT_EQ(job->args_count, 0);
  CHECK(job->args && job->args[0] == NULL);
  ln_job_destroy(job);
  char *dots[] = {only_dots, NULL};
  CHECK_OK(ln_job_from_argv(1, 1, dots, &job, &d), d.msg);
  CHECK_STR_EQ(job->name, "cli");
  ln_job_destroy(job);

  /* The name of an interpreter's job: its script's (options and their values passed over), the
   * module of python's -m, or the interpreter's own for inline code. */
  static const struct {
    const char *words[6];
    const char *name;
  } named[] = {
      {{"python3", "-u", "-X", "dev", "dir/a.py", NULL}, "a"},
      {{"/usr/bin/python3.11", "-m", "pkg.train", "--lr", "1", NULL}, "pkg.train"},
      {{"python3", "-c", "print(1)", NULL}, "python3"},
      {{"bash", "-o", "pipefail", "run.sh", NULL}, "run"},
      {{"sh", "-e", "x.sh", NULL}, "x"},
      {{"perl", "-e", "print 1", NULL}, "perl"},
      {{"node", "-r", "ts-node/register", "main.ts", NULL}, "main"},
      {{"python3", NULL}, "python3"},
      {{"pythonista", "a.py", NULL}, "pythonista"}, /* not python followed by a version */
      {{"./train", "--steps", "5", NULL}, "train"},
  };
  for (size_t i = 0; i < sizeof named / sizeof *named; i++) {
    char *w[6] = {NULL};
    int n = 0;
    while (named[i].words[n]) {
      w[n] = (char *)(uintptr_t)named[i].words[n];
      n++;
    }
    CHECK_OK(ln_job_from_argv(1, n, w, &job, &d), d.msg);
    CHECK_STR_EQ(job->name, named[i].name);
    ln_job_destroy(job);
  }
  /* The identity of a command line: the same words, the same hash; any other word, another. */
  char h1[33], h2[33], shown[64];
  CHECK_OK(ln_job_from_argv(2, 4, argv, &job, &d), d.msg);
  ln_job_command_hash(job, "/usr/bin/python3.11", h1);
  ln_job_command_hash(job, "/usr/bin/python3.11", h2);
  CHECK_STR_EQ(h1, h2);
  ln_job_command_hash(job, "/usr/bin/python3", h2);
  CHECK(strcmp(h1, h2) != 0);
  ln_job_command_text(job, shown, sizeof shown);
  CHECK_STR_EQ(shown, "/usr/bin/python3.11 train.py --lr 1e-4");
  ln_job_command_text(job, shown, 16);
  CHECK_STR_EQ(shown, "/usr/bin/pyt...");
  ln_job_destroy(job);

  job = (ln_job *)1;
  CHECK_INT_EQ(ln_job_from_argv(0, 4, argv, &job, &d), FTL_ERR_SPEC);
  CHECK_STR_EQ(d.msg, "-n: expected an integer > 0, got 0");
  CHECK(job == NULL);
  CHECK_INT_EQ(ln_job_from_argv(-3, 4, argv, &job, &d), FTL_ERR_SPEC);
  CHECK_STR_CONTAINS(d.msg, "-n: expected an integer > 0");
  CHECK_INT_EQ(ln_job_from_argv(1048577, 4, argv, &job, &d), FTL_ERR_SPEC);
  CHECK_STR_EQ(d.msg, "-n: expected an integer <= 1048576, got 1048577");
  CHECK_INT_EQ(ln_job_from_argv(2, 0, argv, &job, &d), FTL_ERR_SPEC);
  CHECK_STR_CONTAINS(d.msg, "no program given");
  char *empty[] = {nothing, NULL};
  CHECK_INT_EQ(ln_job_from_argv(2, 1, empty, &job, &d), FTL_ERR_SPEC);
  CHECK_INT_EQ(ln_job_from_argv(2, 1, NULL, &job, &d), FTL_ERR_SPEC);
  CHECK_INT_EQ(ln_job_from_argv(2, 1, argv, NULL, &d), FTL_ERR_INVAL);
  ln_job_destroy(NULL);
}

/* ---- allocation failures ----------------------------------------------------------------- */

/* Fails the 1st, 2nd, ... allocation of a call until one runs without reaching its turn: every
 * failure must come back as FTL_ERR_NOMEM with a message and no leak (ASan's leak check). */
typedef ftl_err (*job_call)(ln_job **job, ftl_diag *d);

static const char *sweep_path;

static ftl_err call_bytes(ln_job **job, ftl_diag *d) {
  return ln_job_parse_bytes(full, strlen(full), "job.yaml", "/base", job, d);
}
static ftl_err call_file(ln_job **job, ftl_diag *d) { return ln_job_parse_file(sweep_path, job, d); }
static ftl_err call_argv(ln_job **job, ftl_diag *d) {
  char a0[] = "prog", a1[] = "a", a2[] = "b";
  char *argv[] = {a0, a1, a2, NULL};
  return ln_job_from_argv(3, 3, argv, job, d);
}
static ftl_err call_bad(ln_job **job, ftl_diag *d) {
  const char *spec = "ranks: 1\nprogram: p\nargs: [a, b]\nenv: {A: 1, B: 2}\nlauncher: pbs\n";
  return ln_job_parse_bytes(spec, strlen(spec), "job.yaml", "/base", job, d);
}

static void sweep(const char *what, job_call call, ftl_err final_rc) {
  for (long nth = 1;; nth++) {
    ln_job *job = NULL;
    ftl_diag d = {{0}};
    ftl_alloc_fail_nth(nth);
    ftl_err rc = call(&job, &d);
    ftl_alloc_fail_nth(0);
    if (rc == FTL_ERR_NOMEM) {
      CHECK(job == NULL);
      CHECK_STR_CONTAINS(d.msg, "out of memory");
      continue;
    }
    if (rc != final_rc) FTL_TEST_FAIL_("%s: allocation %ld failing gave %s (%s)", what, nth, ftl_err_name(rc), d.msg);
    ln_job_destroy(job);
    if (nth < 3) FTL_TEST_FAIL_("%s: the sweep ended after %ld allocations", what, nth);
    break;
  }
}

static void test_alloc_failures(void) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/full.yaml", tmp_dir);
  write_file(path, full);
  sweep_path = path;
  sweep("parse_bytes", call_bytes, FTL_OK);
  sweep("parse_file", call_file, FTL_OK);
  sweep("from_argv", call_argv, FTL_OK);
  sweep("bad spec", call_bad, FTL_ERR_SPEC);
}

/* ---- main -------------------------------------------------------------------------------- */

static void remove_tree(const char *path) {
  DIR *dir = opendir(path);
  if (dir) {
    struct dirent *e;
    while ((e = readdir(dir))) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      char child[PATH_MAX + 256];
      snprintf(child, sizeof child, "%s/%s", path, e->d_name);
      remove_tree(child);
    }
    closedir(dir);
    rmdir(path);
  } else {
    unlink(path);
  }
}

/* The fault-tolerance sections: defaults, values, and errors that name the field. */
static void test_fault_tolerance_fields(void) {
  ln_job *job = parse_ok("ranks: 4\nprogram: p\n");
  CHECK_INT_EQ(job->min_ranks, 0);
  CHECK_INT_EQ(job->max_restarts, 3);
  CHECK_INT_EQ(job->backoff_ms, 50);
  CHECK_INT_EQ(job->max_backoff_ms, 30000);
  CHECK_INT_EQ(job->crash_loop, 3);
  CHECK_INT_EQ(job->probe_port, 22);
  CHECK_INT_EQ(job->startup_timeout_ms, 600000);
  CHECK_INT_EQ(job->step_timeout_ms, 180000);
  CHECK_INT_EQ(job->checkpoint_timeout_ms, 420000);
  CHECK_INT_EQ(job->node_timeout_ms, 10000);
  CHECK_INT_EQ(job->preempt_grace_ms, 30000);
  ln_job_destroy(job);
  job = parse_ok("ranks: 4\nprogram: p\nmin_ranks: 2\n"
                 "restart: {max_restarts: 0, backoff_s: 0.5, max_backoff_s: 8, crash_loop: 1, probe_port: 2222}\n"
                 "timeouts: {startup_s: 60, step_s: 2.5, checkpoint_s: 30, node_s: 4}\n"
                 "preemption: {grace_s: 90}\n");
  CHECK_INT_EQ(job->min_ranks, 2);
  CHECK_INT_EQ(job->max_restarts, 0);
  CHECK_INT_EQ(job->backoff_ms, 500);
  CHECK_INT_EQ(job->max_backoff_ms, 8000);
  CHECK_INT_EQ(job->crash_loop, 1);
  CHECK_INT_EQ(job->probe_port, 2222);
  CHECK_INT_EQ(job->startup_timeout_ms, 60000);
  CHECK_INT_EQ(job->step_timeout_ms, 2500);
  CHECK_INT_EQ(job->checkpoint_timeout_ms, 30000);
  CHECK_INT_EQ(job->node_timeout_ms, 4000);
  CHECK_INT_EQ(job->preempt_grace_ms, 90000);
  ln_job_destroy(job);
  CHECK_ERR("ranks: 2\nprogram: p\nmin_ranks: 3\n", "job.yaml:3:12: field 'min_ranks': expected at most ranks (2), got 3");
  CHECK_ERR_HAS("ranks: 2\nprogram: p\nrestart: {max_restarts: -1}\n", "field 'restart.max_restarts'");
  CHECK_ERR_HAS("ranks: 2\nprogram: p\nrestart: {crash_loop: 0}\n", "field 'restart.crash_loop'");
  CHECK_ERR_HAS("ranks: 2\nprogram: p\nrestart: {probe_port: 65536}\n", "field 'restart.probe_port'");
  CHECK_ERR_HAS("ranks: 2\nprogram: p\ntimeouts: {step_s: 0}\n", "field 'timeouts.step_s'");
  CHECK_ERR_HAS("ranks: 2\nprogram: p\ntimeouts: {hang_s: 3}\n", "field 'timeouts.hang_s': unknown field");
  CHECK_ERR_HAS("ranks: 2\nprogram: p\npreemption: 30\n", "field 'preemption'");
}

/* fleet.history_days: 7 by default, 0 to 3650, and only beside a fleet_ledger. */
static void test_fleet_history(void) {
  ln_job *job = parse_ok("ranks: 4\nprogram: p\n");
  CHECK_INT_EQ(job->fleet_history_days, 7);
  ln_job_destroy(job);
  job = parse_ok("ranks: 4\nprogram: p\nfleet_ledger: /shared/fleet.jsonl\nfleet: {history_days: 0}\n");
  CHECK_INT_EQ(job->fleet_history_days, 0);
  ln_job_destroy(job);
  job = parse_ok("ranks: 4\nprogram: p\nfleet_ledger: /shared/fleet.jsonl\nfleet: {history_days: 30}\n");
  CHECK_INT_EQ(job->fleet_history_days, 30);
  ln_job_destroy(job);
  CHECK_ERR_HAS("ranks: 2\nprogram: p\nfleet_ledger: /f\nfleet: {history_days: -1}\n", "field 'fleet.history_days'");
  CHECK_ERR_HAS("ranks: 2\nprogram: p\nfleet_ledger: /f\nfleet: {history_days: 3651}\n", "field 'fleet.history_days'");
  CHECK_ERR_HAS("ranks: 2\nprogram: p\nfleet_ledger: /f\nfleet: {history_days: 1.5}\n", "field 'fleet.history_days'");
  CHECK_ERR_HAS("ranks: 2\nprogram: p\nfleet_ledger: /f\nfleet: {days: 3}\n", "field 'fleet.days': unknown field");
  CHECK_ERR("ranks: 2\nprogram: p\nfleet: {history_days: 3}\n",
            "job.yaml:3:23: field 'fleet.history_days': has no effect without fleet_ledger (the ledger whose history "
            "it reads)");
}

/* checkpoint.l1_dir: absolute, short enough for the L1 paths below it, and where this host has it
 * not writable by every user without the sticky bit (each of which would leave L1 off on every
 * rank, checkpoint/levels.c). */
static void test_l1_dir(void) {
  CHECK_ERR("ranks: 1\nprogram: p\ncheckpoint: {l1_dir: shm}\n",
            "job.yaml:3:22: field 'checkpoint.l1_dir': expected an absolute path (the ranks of every host make "
            "their L1 folder under it), got 'shm'");
  static char spec[CK_L1_ROOT_MAX + 128];
  char dir[CK_L1_ROOT_MAX + 2];
  memset(dir, 'a', sizeof dir - 1);
  dir[0] = '/';
  dir[sizeof dir - 1] = '\0';
  snprintf(spec, sizeof spec, "ranks: 1\nprogram: p\ncheckpoint: {l1_dir: %s}\n", dir);
  char want[400];
  snprintf(want, sizeof want, "field 'checkpoint.l1_dir': too long: %d bytes, at most %d (the L1 paths below it",
           CK_L1_ROOT_MAX + 1, CK_L1_ROOT_MAX);
  CHECK_ERR_HAS(spec, want);
  /* A path of 5000 bytes (the review's), and one of exactly the limit, which is taken. */
  static char big[5200];
  snprintf(big, sizeof big, "ranks: 1\nprogram: p\ncheckpoint: {l1_dir: /%05000d}\n", 0);
  CHECK_ERR_HAS(big, "field 'checkpoint.l1_dir': too long: 5001 bytes");
  dir[CK_L1_ROOT_MAX] = '\0';
  snprintf(spec, sizeof spec, "ranks: 1\nprogram: p\ncheckpoint: {l1_dir: %s}\n", dir);
  ln_job_destroy(parse_ok(spec));
  /* A folder here that every user may write: refused without the sticky bit, taken with it. A
   * folder this host does not have is the ranks' hosts' to check. */
  char shared[64];
  snprintf(shared, sizeof shared, "%s/l1-open", tmp_dir);
  CHECK(mkdir(shared, 0700) == 0);
  CHECK(chmod(shared, 0777) == 0);
  snprintf(spec, sizeof spec, "ranks: 1\nprogram: p\ncheckpoint:\n  l1_dir: %s\n", shared);
  snprintf(want, sizeof want, "job.yaml:4:11: field 'checkpoint.l1_dir': %s is writable by every user and has no "
           "sticky bit", shared);
  CHECK_ERR_HAS(spec, want);
  CHECK(chmod(shared, 01777) == 0);
  ln_job_destroy(parse_ok(spec));
  CHECK(chmod(shared, 0755) == 0);
  ln_job_destroy(parse_ok(spec));
  CHECK(rmdir(shared) == 0);
  ln_job_destroy(parse_ok(spec));
}

int main(void) {
  struct {
    const char *name;
    void (*fn)(void);
  } tests[] = {
      {"minimal_defaults", test_minimal_defaults},
      {"full", test_full},
      {"flow_style_and_block_lists", test_flow_style_and_block_lists},
      {"launcher_values", test_launcher_values},
      {"ranks_bounds", test_ranks_bounds},
      {"timeout_values", test_timeout_values},
      {"paths", test_paths},
      {"names", test_names},
      {"aliases", test_aliases},
      {"ranks_errors", test_ranks_errors},
      {"required", test_required},
      {"unknown_fields", test_unknown_fields},
      {"pipeline_sections", test_pipeline_sections},
      {"duplicates", test_duplicates},
      {"type_errors", test_type_errors},
      {"name_errors", test_name_errors},
      {"timeout_errors", test_timeout_errors},
      {"document_errors", test_document_errors},
      {"syntax_errors", test_syntax_errors},
      {"alias_cycles_and_bombs", test_alias_cycles_and_bombs},
      {"list_limits", test_list_limits},
      {"reserved_env", test_reserved_env},
      {"size_limits", test_size_limits},
      {"spec_hash", test_spec_hash},
      {"parse_file", test_parse_file},
      {"golden_files", test_golden_files},
      {"from_argv", test_from_argv},
      {"alloc_failures", test_alloc_failures},
      {"fault_tolerance_fields", test_fault_tolerance_fields},
      {"l1_dir", test_l1_dir},
      {"fleet_history", test_fleet_history},
  };
  if (!mkdtemp(tmp_dir)) FTL_TEST_FAIL_("mkdtemp: %s", strerror(errno));
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    printf("jobspec: %s\n", tests[i].name);
    fflush(stdout);
    tests[i].fn();
  }
  remove_tree(tmp_dir);
  printf("jobspec: all %zu tests passed\n", sizeof tests / sizeof tests[0]);
  return 0;
}
