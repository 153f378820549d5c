/* eval/inputs.h: what eval takes from its caller, so that eval never reaches up into the launcher
 * (docs/architecture.md, "Folders run one way"): the job spec's `eval:` and `registry:` sections
 * and the few job fields the gate is locked with (the launcher parses the spec and fills
 * ev_gate_fields), the run's facts a publication records (the launcher folds its event log), and
 * the hooks through which eval's commands and `ftl run`'s end reach back: parse a job spec for
 * --spec, read a run's facts, record an event.
 *
 * Types only; no functions of its own. */
#ifndef FTL_EVAL_INPUTS_H
#define FTL_EVAL_INPUTS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

/* `eval.direction`: which way the gate's metric is better. */
typedef enum ev_direction {
  EV_HIGHER_PASSES = 0, /* passes when value >= threshold */
  EV_LOWER_PASSES = 1,  /* passes when value <= threshold */
} ev_direction;

/* The job spec's `eval:` section: the gate, locked at submission (docs/pipeline.md); program is
 * NULL without the section. */
typedef struct ev_eval_section {
  char *program;          /* `eval.program`: as written, or resolved against the spec's folder when it has a '/' */
  char **args;            /* `eval.args`: NULL-terminated, with {adapter} {data} {metrics} {base} {run_dir} */
  size_t args_count;
  char **env;             /* `eval.env`: "KEY=VALUE", NULL-terminated */
  size_t env_count;
  int64_t timeout_ms;     /* `eval.timeout_s`: the evaluator's deadline; default 600 s */
  char *metric;           /* `eval.metric`: the metric's name in the metrics file */
  int direction;          /* `eval.direction`: ev_direction */
  double threshold;       /* `eval.threshold` */
  double min_gain;        /* `eval.min_gain`, when has_min_gain */
  int has_min_gain;
  char *baseline_channel; /* `eval.baseline_channel`: may be NULL (then registry.channel) */
  char *data;             /* `eval.data`: the name of the input that is the eval data */
  char *base;             /* `eval.base`: the name of the input that is the base model; may be NULL */
} ev_eval_section;

/* The job spec's `registry:` section: where a passing adapter is published. */
typedef struct ev_registry_section {
  int present;   /* the section was given */
  char *path;    /* `registry.path`: may be NULL (then $FTL_REGISTRY) */
  char *name;    /* `registry.name`: may be NULL (then the job's name) */
  char *channel; /* `registry.channel`: may be NULL (then "candidate") */
} ev_registry_section;

/* What of a job the gate is locked with, borrowed from the caller's parsed spec. */
typedef struct ev_gate_fields {
  const char *spec_path;   /* for messages ("job.yaml: field 'eval.data': ..."); NULL: "job" */
  const char *name;        /* the job's name (the registry's default adapter name, the snapshot's job) */
  const char *spec_hash;   /* the spec's hash, recorded in the snapshot */
  char *const *inputs;     /* `inputs:` "NAME=PATH", inputs_count of them */
  size_t inputs_count;
  const ev_eval_section *eval;
  const ev_registry_section *registry;
} ev_gate_fields;

/* The variables the ranks need to read their inputs through the snapshot ("KEY=VALUE" strings,
 * count of them), made by ev_submit_prepare, freed by ev_rank_vars_free; the caller adds them to
 * the ranks' environment. */
typedef struct ev_rank_vars {
  char **kv;
  size_t count;
} ev_rank_vars;

/* A run's facts as its event log tells them, recorded in a publication's provenance. */
typedef struct ev_run_facts {
  int attempts;                /* attempts that ended */
  int64_t last_committed_step; /* -1: none known */
  int have_goodput;
  double goodput_pct, wall_ms;
} ev_run_facts;

/* The caller's side of eval's commands and of `ftl run`'s end (the launcher fills it). Each hook
 * may be NULL: no --spec can be read, the facts stay unknown, no event is recorded. */
typedef struct ev_hooks {
  /* The canonical gate spec of the job spec at spec_path (--spec), or NULL in *gate_out when it has
   * no eval: section; errors name the file and field. */
  ftl_err (*gate_of_spec)(const char *spec_path, json_t **gate_out, ftl_diag *d);
  /* The run's facts from its event log; missing logs leave *out as it was (unknown). */
  void (*run_facts)(const char *run_dir, ev_run_facts *out);
  /* Records an event of the run ("gate", "publish"); fields is taken (stolen). */
  void (*event)(void *ctx, const char *type, json_t *fields);
  void *event_ctx;
} ev_hooks;

#endif
