/* tests/unit/test_yaml_bind.c: the YAML binder (launcher/yaml_bind.c) with a schema of its own, not
 * the job spec's: a second config is a table of rows, and its errors name file, line, column and
 * field the same way. */
#include <stddef.h>

#include "ftl/core.h"
#include "ftl_test.h"
#include "launcher/yaml_bind.h"

typedef enum { MODE_FAST = 0, MODE_SAFE = 1 } mode;

typedef struct gate_cfg {
  char *name;
  char *evaluator;
  int min_samples;
  int64_t timeout_ms;
  int mode;
  char **args;
  size_t args_count;
  char **env;
  size_t env_count;
} gate_cfg;

static const ln_yb_choice mode_choices[] = {{"fast", MODE_FAST}, {"safe", MODE_SAFE}, {NULL, 0}};

static const ln_yb_field limits_fields[] = {
    {.key = "timeout_s", .kind = FTL_YB_SECONDS, .offset = offsetof(gate_cfg, timeout_ms), .max = 3600, .def = 60000},
    {.key = "min_samples", .kind = FTL_YB_INT, .offset = offsetof(gate_cfg, min_samples), .min = 1, .max = 1000,
     .def = 10},
};
static const ln_yb_section limits_section = FTL_YB_SECTION_OF(limits_fields);

static const ln_yb_field gate_fields[] = {
    {.key = "name", .kind = FTL_YB_STRING, .flags = FTL_YB_NAME, .offset = offsetof(gate_cfg, name)},
    {.key = "evaluator", .kind = FTL_YB_STRING, .flags = FTL_YB_REQUIRED | FTL_YB_NONEMPTY | FTL_YB_PATH,
     .offset = offsetof(gate_cfg, evaluator)},
    {.key = "mode", .kind = FTL_YB_ENUM, .offset = offsetof(gate_cfg, mode), .def = MODE_SAFE, .choices = mode_choices},
    {.key = "args", .kind = FTL_YB_ARGV, .offset = offsetof(gate_cfg, args), .count_offset = offsetof(gate_cfg, args_count)},
    {.key = "env", .kind = FTL_YB_ENV, .offset = offsetof(gate_cfg, env), .count_offset = offsetof(gate_cfg, env_count)},
    {.key = "limits", .kind = FTL_YB_SECTION, .sub = &limits_section},
};
static const ln_yb_section gate_section = FTL_YB_SECTION_OF(gate_fields);

static const ln_yb_schema gate_schema = {.root = &gate_section, .noun = "gate config", .root_items = "gate fields",
                                          .root_example = "evaluator, ...", .max_bytes = 4096, .max_nodes = 100,
                                          .max_depth = 8};

static void cfg_free(gate_cfg *c) {
  ftl_free(c->name);
  ftl_free(c->evaluator);
  ln_yb_free_strv(c->args);
  ln_yb_free_strv(c->env);
  memset(c, 0, sizeof *c);
}

static ftl_err parse(const char *text, gate_cfg *c, ftl_diag *d) {
  memset(c, 0, sizeof *c);
  ln_yb_apply_defaults(&gate_section, c);
  return ln_yb_parse(text, strlen(text), &gate_schema, "gate.yaml", "/specs", c, NULL, d);
}

static void expect_error(const char *text, const char *message) {
  gate_cfg c;
  ftl_diag d = {{0}};
  ftl_err rc = parse(text, &c, &d);
  cfg_free(&c);
  if (rc != FTL_ERR_SPEC) FTL_TEST_FAIL_("expected an error for <<%s>>, got %d (%s)", text, (int)rc, d.msg);
  CHECK_STR_EQ(d.msg, message);
}

int main(void) {
  gate_cfg c;
  ftl_diag d = {{0}};
  CHECK_OK(parse("evaluator: bin/eval\nargs: [--k, 5]\nenv: {A: 1}\nlimits: {timeout_s: 0.5}\n", &c, &d), d.msg);
  CHECK_STR_EQ(c.evaluator, "/specs/bin/eval");
  CHECK(c.name == NULL);
  CHECK_INT_EQ(c.mode, MODE_SAFE);
  CHECK_INT_EQ(c.min_samples, 10);
  CHECK_INT_EQ(c.timeout_ms, 500);
  CHECK_INT_EQ(c.args_count, 2);
  CHECK_STR_EQ(c.args[1], "5");
  CHECK_STR_EQ(c.env[0], "A=1");
  cfg_free(&c);

  expect_error("mode: safe\n", "gate.yaml:1:1: field 'evaluator': required field is missing");
  expect_error("evaluator: e\nmode: slow\n",
               "gate.yaml:2:7: field 'mode': expected one of fast, safe, got a string 'slow'");
  expect_error("evaluator: e\nlimits:\n  min_samples: 0\n",
               "gate.yaml:3:16: field 'limits.min_samples': expected an integer > 0, got '0'");
  expect_error("evaluator: e\nlimits: {tmeout_s: 1}\n",
               "gate.yaml:2:10: field 'limits.tmeout_s': unknown field (known fields: timeout_s, min_samples)");
  expect_error("evaluator: e\nevaluator: f\n", "gate.yaml:2:1: field 'evaluator': duplicate key (first at line 1)");
  expect_error("evaluator:\n", "gate.yaml:1:11: field 'evaluator': missing a value");
  expect_error("", "gate.yaml:1:1: the file is empty; expected a mapping of gate fields (evaluator, ...)");
  expect_error("[1]\n", "gate.yaml:1:1: expected a mapping of gate fields at the top level, got a sequence");
  expect_error("evaluator: e\n---\nevaluator: f\n",
               "gate.yaml:2:1: a second YAML document starts here; a gate config is one document");
  expect_error("a: [[[[[[[[[[1]]]]]]]]]]\n", "gate.yaml:1:11: nested deeper than 8 levels");

  /* A rule across fields points at the field's value. */
  ln_yb_doc *doc = NULL;
  memset(&c, 0, sizeof c);
  const char *text = "evaluator: e\nlimits:\n  min_samples: 7\n";
  CHECK_OK(ln_yb_parse(text, strlen(text), &gate_schema, "gate.yaml", NULL, &c, &doc, &d), d.msg);
  CHECK_STR_EQ(c.evaluator, "e");
  CHECK_INT_EQ(ln_yb_fail_field(doc, "limits.min_samples", &d, "must be even, got %d", c.min_samples), FTL_ERR_SPEC);
  CHECK_STR_EQ(d.msg, "gate.yaml:3:16: field 'limits.min_samples': must be even, got 7");
  CHECK(ln_yb_has_field(doc, "limits.min_samples") && ln_yb_has_field(doc, "evaluator"));
  CHECK(!ln_yb_has_field(doc, "limits.timeout_s") && !ln_yb_has_field(doc, "args"));
  ln_yb_doc_free(doc);
  cfg_free(&c);

  /* An empty list is given, with a count of 0 like an absent one: only the document tells them apart. */
  memset(&c, 0, sizeof c);
  text = "evaluator: e\nargs: []\n";
  CHECK_OK(ln_yb_parse(text, strlen(text), &gate_schema, "gate.yaml", NULL, &c, &doc, &d), d.msg);
  CHECK_INT_EQ(c.args_count, 0);
  CHECK(ln_yb_has_field(doc, "args") && !ln_yb_has_field(doc, "env"));
  ln_yb_doc_free(doc);
  cfg_free(&c);

  char *joined = ln_yb_join_path("/a", "./b/c");
  CHECK_STR_EQ(joined, "/a/b/c");
  ftl_free(joined);
  printf("ok\n");
  return 0;
}
