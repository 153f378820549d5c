/* launcher/jobspec.c: the job spec behind launcher/jobspec.h: its field tables, its defaults and
 * the rules across fields; the format is documented in docs/job-spec.md.
 *
 * Reading YAML, typing its values and every message's "<file>:<line>:<col>: field '<path>': ..."
 * form are the generic binder's (launcher/yaml_bind.c): this file only says which fields a job has.
 * Adding a field is one table row plus one member of ln_job; adding a section is one table plus
 * one FTL_YB_SECTION row.
 *
 * Deliberately not here: looking the program up on PATH, checking that files or folders exist,
 * anything about a run. Those belong to the launcher, which knows the host it runs on. One
 * exception: a checkpoint.l1_dir that this host has and every user may write without the sticky
 * bit is refused here, with the field's line, rather than left to turn L1 off on every rank.
 *
 * Map:
 *   limits ............ sizes that keep hostile input cheap
 *   the field tables .. one row per field
 *   reserved names .... what `env` may not set
 *   public functions .. parse (file, bytes), the command-line form, destroy */
#include "launcher/jobspec.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "checkpoint/door.h"
#include "core/fs.h"
#include "ftl/core.h"
#include "launcher/yaml_bind.h"

/* ---- limits ------------------------------------------------------------------------------ */

/* A job spec is a screenful of text. These limits are far above any real one and keep a hostile
 * or mistaken input (a log file passed by accident, an alias bomb, a deep nest) cheap to reject. */
#define JOB_MAX_BYTES ((size_t)1 << 20)
#define JOB_MAX_NODES 10000
#define JOB_MAX_DEPTH 64
#define JOB_RANKS_MAX 1048576 /* 2^20: past the largest gangs one launcher watches (131,072 measured: docs/scale.md) */
/* What aliases may expand the document to, and what `args` and `env` may hold: a program's argv
 * and envp together must fit the kernel's limit (ARG_MAX, often 2 MiB), and one string of 128 KiB
 * or more is refused by execve. */
#define JOB_MAX_EXPANDED_BYTES ((size_t)4 << 20)
#define JOB_MAX_EXPANDED_NODES ((size_t)100000)
#define JOB_MAX_LIST_ITEMS ((size_t)4096)
#define JOB_MAX_ITEM_BYTES ((size_t)131071)
#define JOB_MAX_LIST_BYTES ((size_t)1 << 20)

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* FTL_YB_ENUM stores through an int; the enums it fills must be int-sized. */
_Static_assert(sizeof(ln_launch_kind) == sizeof(int), "ln_launch_kind must be int-sized");

/* ---- the field tables -------------------------------------------------------------------- */

static const ln_yb_choice launch_choices[] = {
    {"auto", FTL_LAUNCH_AUTO},
    {"mpirun", FTL_LAUNCH_MPIRUN},
    {"srun", FTL_LAUNCH_SRUN},
    {NULL, 0},
};

static const ln_yb_field rendezvous_fields[] = {
    {.key = "timeout_s", .kind = FTL_YB_SECONDS, .offset = offsetof(ln_job, rendezvous_timeout_ms),
     .max = 86400, .def = 300 * 1000},
};
static const ln_yb_section rendezvous_section = FTL_YB_SECTION_OF(rendezvous_fields);

static const ln_yb_choice on_off_choices[] = {
    {"auto", -1}, {"on", 1}, {"off", 0}, {"true", 1}, {"false", 0}, {NULL, 0},
};

static const ln_yb_field restart_fields[] = {
    /* The standby gang (launcher/standby.h); it only ever runs when restarts are allowed. */
    {.key = "standby", .kind = FTL_YB_ENUM, .offset = offsetof(ln_job, standby), .def = -1, .choices = on_off_choices},
    {.key = "max_restarts", .kind = FTL_YB_INT, .offset = offsetof(ln_job, max_restarts), .min = 0, .max = 100000,
     .def = 3},
    {.key = "backoff_s", .kind = FTL_YB_SECONDS, .offset = offsetof(ln_job, backoff_ms), .max = 3600, .def = 50},
    {.key = "max_backoff_s", .kind = FTL_YB_SECONDS, .offset = offsetof(ln_job, max_backoff_ms), .max = 86400,
     .def = 30 * 1000},
    {.key = "crash_loop", .kind = FTL_YB_INT, .offset = offsetof(ln_job, crash_loop), .min = 1, .max = 1000, .def = 3},
    {.key = "probe_port", .kind = FTL_YB_INT, .offset = offsetof(ln_job, probe_port), .min = 1, .max = 65535,
     .def = 22},
    /* A Python program's standby (launcher/pyprog.h): its runner, and modules to import beyond
     * those the running attempt imported. */
    {.key = "python_runner", .kind = FTL_YB_ENUM, .offset = offsetof(ln_job, python_runner), .def = -1,
     .choices = on_off_choices},
    {.key = "preload", .kind = FTL_YB_ARGV, .offset = offsetof(ln_job, preload), .count_offset = offsetof(ln_job, preload_count)},
};
static const ln_yb_section restart_section = FTL_YB_SECTION_OF(restart_fields);

static const ln_yb_field timeout_fields[] = {
    {.key = "startup_s", .kind = FTL_YB_SECONDS, .offset = offsetof(ln_job, startup_timeout_ms), .max = 86400,
     .def = 600 * 1000},
    {.key = "step_s", .kind = FTL_YB_SECONDS, .offset = offsetof(ln_job, step_timeout_ms), .max = 86400,
     .def = 180 * 1000},
    {.key = "checkpoint_s", .kind = FTL_YB_SECONDS, .offset = offsetof(ln_job, checkpoint_timeout_ms), .max = 86400,
     .def = 420 * 1000},
    {.key = "node_s", .kind = FTL_YB_SECONDS, .offset = offsetof(ln_job, node_timeout_ms), .max = 3600,
     .def = 10 * 1000},
};
static const ln_yb_section timeout_section = FTL_YB_SECTION_OF(timeout_fields);

static const ln_yb_field preemption_fields[] = {
    {.key = "grace_s", .kind = FTL_YB_SECONDS, .offset = offsetof(ln_job, preempt_grace_ms), .max = 86400,
     .def = 30 * 1000},
};
static const ln_yb_section preemption_section = FTL_YB_SECTION_OF(preemption_fields);

static const ln_yb_field checkpoint_fields[] = {
    {.key = "levels", .kind = FTL_YB_ARGV, .offset = offsetof(ln_job, ckpt_levels),
     .count_offset = offsetof(ln_job, ckpt_levels_count)},
    {.key = "l1_dir", .kind = FTL_YB_STRING, .flags = FTL_YB_NONEMPTY, .offset = offsetof(ln_job, ckpt_l1_dir)},
    {.key = "l1_max_mb", .kind = FTL_YB_INT, .offset = offsetof(ln_job, ckpt_l1_max_mb), .min = 0, .max = 1 << 30,
     .def = 0},
};
static const ln_yb_section checkpoint_section = FTL_YB_SECTION_OF(checkpoint_fields);

/* `metrics:` where the run's Prometheus metrics go (launcher/prom.c writes them). The path is kept as
 * written (relative to the folder `ftl run` starts in), like run_dir: a node's textfile folder is
 * the node's, not the spec's. */
static const ln_yb_field metrics_fields[] = {
    {.key = "textfile", .kind = FTL_YB_STRING, .flags = FTL_YB_NONEMPTY, .offset = offsetof(ln_job, metrics_textfile)},
};
static const ln_yb_section metrics_section = FTL_YB_SECTION_OF(metrics_fields);

/* `fleet:` how the fleet ledger's per-host history is used (launcher/fleet.h): the window, in days,
 * whose records judge a host before the job starts; 0 reads none. */
static const ln_yb_field fleet_fields[] = {
    {.key = "history_days", .kind = FTL_YB_INT, .offset = offsetof(ln_job, fleet_history_days), .min = 0,
     .max = 3650, .def = 7},
};
static const ln_yb_section fleet_section = FTL_YB_SECTION_OF(fleet_fields);

/* `mfu:` what model FLOPs utilisation is measured against (launcher/mfu.h, docs/gpu.md "Useful work:
 * MFU"): the precision picks the peak table's column; peak_tflops, every rank's device's peak,
 * overrides the table (and the measured CPU peak). The values are ln_precision's (peak_flops.h). */
static const ln_yb_choice precision_choices[] = {
    {"bf16", 0}, {"fp16", 1}, {"tf32", 2}, {"fp32", 3}, {NULL, 0},
};
static const ln_yb_field mfu_fields[] = {
    {.key = "precision", .kind = FTL_YB_ENUM, .offset = offsetof(ln_job, mfu_precision), .def = 0,
     .choices = precision_choices},
    {.key = "peak_tflops", .kind = FTL_YB_NUMBER, .flags = FTL_YB_MARK_SET, .offset = offsetof(ln_job, mfu_peak_tflops),
     .count_offset = offsetof(ln_job, has_mfu_peak)},
};
static const ln_yb_section mfu_section = FTL_YB_SECTION_OF(mfu_fields);

/* `inputs:` NAME: PATH, read like `env` (names are variable names: the ranks get FTL_INPUT_<NAME>).
 * Paths are kept as written, relative to the folder `ftl run` starts in, like run_dir: data lives
 * with the runs, not with the spec. */

/* `eval:` the gate, locked at submission (docs/pipeline.md). */
static const ln_yb_choice direction_choices[] = {
    {"higher", EV_HIGHER_PASSES},
    {"lower", EV_LOWER_PASSES},
    {NULL, 0},
};
static const ln_yb_field eval_fields[] = {
    {.key = "program", .kind = FTL_YB_STRING, .flags = FTL_YB_REQUIRED | FTL_YB_NONEMPTY | FTL_YB_PATH_IF_SLASH,
     .offset = offsetof(ln_job, eval.program)},
    {.key = "args", .kind = FTL_YB_ARGV, .offset = offsetof(ln_job, eval.args),
     .count_offset = offsetof(ln_job, eval.args_count)},
    {.key = "env", .kind = FTL_YB_ENV, .offset = offsetof(ln_job, eval.env),
     .count_offset = offsetof(ln_job, eval.env_count)},
    {.key = "timeout_s", .kind = FTL_YB_SECONDS, .offset = offsetof(ln_job, eval.timeout_ms), .max = 7 * 86400,
     .def = 600 * 1000},
    {.key = "data", .kind = FTL_YB_STRING, .flags = FTL_YB_REQUIRED | FTL_YB_NONEMPTY,
     .offset = offsetof(ln_job, eval.data)},
    {.key = "base", .kind = FTL_YB_STRING, .flags = FTL_YB_NONEMPTY, .offset = offsetof(ln_job, eval.base)},
    {.key = "metric", .kind = FTL_YB_STRING, .flags = FTL_YB_REQUIRED | FTL_YB_NONEMPTY,
     .offset = offsetof(ln_job, eval.metric)},
    {.key = "direction", .kind = FTL_YB_ENUM, .offset = offsetof(ln_job, eval.direction), .def = EV_HIGHER_PASSES,
     .choices = direction_choices},
    {.key = "threshold", .kind = FTL_YB_NUMBER, .flags = FTL_YB_REQUIRED, .offset = offsetof(ln_job, eval.threshold)},
    {.key = "min_gain", .kind = FTL_YB_NUMBER, .flags = FTL_YB_MARK_SET, .offset = offsetof(ln_job, eval.min_gain),
     .count_offset = offsetof(ln_job, eval.has_min_gain)},
    {.key = "baseline_channel", .kind = FTL_YB_STRING, .flags = FTL_YB_NONEMPTY,
     .offset = offsetof(ln_job, eval.baseline_channel)},
};
static const ln_yb_section eval_section = FTL_YB_SECTION_OF(eval_fields);

/* `registry:` where a passing adapter is published (pipeline/registry.h). */
static const ln_yb_field registry_fields[] = {
    {.key = "path", .kind = FTL_YB_STRING, .flags = FTL_YB_NONEMPTY, .offset = offsetof(ln_job, registry.path)},
    {.key = "name", .kind = FTL_YB_STRING, .flags = FTL_YB_NONEMPTY, .offset = offsetof(ln_job, registry.name)},
    {.key = "channel", .kind = FTL_YB_STRING, .flags = FTL_YB_NONEMPTY, .offset = offsetof(ln_job, registry.channel)},
};
static const ln_yb_section registry_section = FTL_YB_SECTION_OF(registry_fields);

/* The top level, in the order the docs list it (the "known fields" list of a message follows). */
static const ln_yb_field job_fields[] = {
    {.key = "name", .kind = FTL_YB_STRING, .flags = FTL_YB_NAME, .offset = offsetof(ln_job, name)},
    {.key = "ranks", .kind = FTL_YB_INT, .flags = FTL_YB_REQUIRED, .offset = offsetof(ln_job, ranks),
     .min = 1, .max = JOB_RANKS_MAX},
    {.key = "program", .kind = FTL_YB_STRING, .flags = FTL_YB_REQUIRED | FTL_YB_NONEMPTY | FTL_YB_PATH_IF_SLASH,
     .offset = offsetof(ln_job, program)},
    {.key = "args", .kind = FTL_YB_ARGV, .offset = offsetof(ln_job, args),
     .count_offset = offsetof(ln_job, args_count)},
    {.key = "env", .kind = FTL_YB_ENV, .offset = offsetof(ln_job, env),
     .count_offset = offsetof(ln_job, env_count)},
    {.key = "hostfile", .kind = FTL_YB_STRING, .flags = FTL_YB_NONEMPTY | FTL_YB_PATH,
     .offset = offsetof(ln_job, hostfile)},
    {.key = "launcher", .kind = FTL_YB_ENUM, .offset = offsetof(ln_job, launcher),
     .def = FTL_LAUNCH_AUTO, .choices = launch_choices},
    {.key = "run_dir", .kind = FTL_YB_STRING, .flags = FTL_YB_NONEMPTY, .offset = offsetof(ln_job, run_dir)},
    {.key = "working_dir", .kind = FTL_YB_STRING, .flags = FTL_YB_NONEMPTY,
     .offset = offsetof(ln_job, working_dir)},
    {.key = "rendezvous", .kind = FTL_YB_SECTION, .sub = &rendezvous_section},
    {.key = "fleet_ledger", .kind = FTL_YB_STRING, .flags = FTL_YB_NONEMPTY | FTL_YB_PATH,
     .offset = offsetof(ln_job, fleet_ledger)},
    {.key = "fleet", .kind = FTL_YB_SECTION, .sub = &fleet_section},
    {.key = "min_ranks", .kind = FTL_YB_INT, .offset = offsetof(ln_job, min_ranks), .min = 1, .max = JOB_RANKS_MAX,
     .def = 0},
    {.key = "restart", .kind = FTL_YB_SECTION, .sub = &restart_section},
    {.key = "timeouts", .kind = FTL_YB_SECTION, .sub = &timeout_section},
    {.key = "preemption", .kind = FTL_YB_SECTION, .sub = &preemption_section},
    {.key = "checkpoint", .kind = FTL_YB_SECTION, .sub = &checkpoint_section},
    {.key = "metrics", .kind = FTL_YB_SECTION, .sub = &metrics_section},
    {.key = "mfu", .kind = FTL_YB_SECTION, .sub = &mfu_section},
    {.key = "inputs", .kind = FTL_YB_ENV, .offset = offsetof(ln_job, inputs),
     .count_offset = offsetof(ln_job, inputs_count)},
    {.key = "eval", .kind = FTL_YB_SECTION, .sub = &eval_section},
    {.key = "registry", .kind = FTL_YB_SECTION, .flags = FTL_YB_MARK_SET, .sub = &registry_section,
     .count_offset = offsetof(ln_job, registry.present)},
};
static const ln_yb_section job_section = FTL_YB_SECTION_OF(job_fields);

_Static_assert(ARRAY_LEN(job_fields) <= FTL_YB_SECTION_MAX_FIELDS, "raise FTL_YB_SECTION_MAX_FIELDS");
_Static_assert(ARRAY_LEN(rendezvous_fields) <= FTL_YB_SECTION_MAX_FIELDS, "raise FTL_YB_SECTION_MAX_FIELDS");
_Static_assert(ARRAY_LEN(restart_fields) <= FTL_YB_SECTION_MAX_FIELDS, "raise FTL_YB_SECTION_MAX_FIELDS");
_Static_assert(ARRAY_LEN(timeout_fields) <= FTL_YB_SECTION_MAX_FIELDS, "raise FTL_YB_SECTION_MAX_FIELDS");

_Static_assert(ARRAY_LEN(preemption_fields) <= FTL_YB_SECTION_MAX_FIELDS, "raise FTL_YB_SECTION_MAX_FIELDS");
_Static_assert(ARRAY_LEN(eval_fields) <= FTL_YB_SECTION_MAX_FIELDS, "raise FTL_YB_SECTION_MAX_FIELDS");
_Static_assert(ARRAY_LEN(registry_fields) <= FTL_YB_SECTION_MAX_FIELDS, "raise FTL_YB_SECTION_MAX_FIELDS");
_Static_assert(sizeof(ev_direction) == sizeof(int), "ev_direction must be int-sized");

static const ln_yb_schema job_schema = {.root = &job_section,
                                         .noun = "job spec",
                                         .root_items = "job fields",
                                         .root_example = "ranks, program, ...",
                                         .max_bytes = JOB_MAX_BYTES,
                                         .max_nodes = JOB_MAX_NODES,
                                         .max_depth = JOB_MAX_DEPTH,
                                         .max_expanded_bytes = JOB_MAX_EXPANDED_BYTES,
                                         .max_expanded_nodes = JOB_MAX_EXPANDED_NODES,
                                         .max_list_items = JOB_MAX_LIST_ITEMS,
                                         .max_item_bytes = JOB_MAX_ITEM_BYTES,
                                         .max_list_bytes = JOB_MAX_LIST_BYTES};

/* ---- reserved variable names ------------------------------------------------------------- */

/* `env` is for the program. ftl sets these itself for every rank (the rendezvous, the rank's
 * place), and Open MPI's launcher sets its own for the MPI library inside the program: a job that
 * set any of them would break its own launch, so the spec may not. */
static const char *const reserved_env_names[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                                 "MASTER_ADDR", "MASTER_PORT", NULL};
static const char *const reserved_env_prefixes[] = {"FTL_", "OMPI_", "PMIX_", "PRTE_", NULL};
/* The FTL_ variables a user sets on purpose (`ftl help env`: the ones ftl reads, and the test-only
 * fault injection of docs/checkpoint.md); every other FTL_ name is ftl's to set. */
static const char *const allowed_ftl_env_names[] = {
    "FTL_LOG_LEVEL",      "FTL_BACKEND",          "FTL_COLLECTIVE_TIMEOUT_MS", "FTL_CKPT_ALLOW_FRESH",
    "FTL_FAULT",          "FTL_CKPT_FAULT",       "FTL_CRASH_AT",              "FTL_CRASH_RANK",
    "FTL_CRASH_STEP",     "FTL_CRASH_ATTEMPT",    "FTL_CKPT_CRASH_AT",         "FTL_CKPT_CRASH_RANK",
    "FTL_CKPT_CRASH_STEP", "FTL_CKPT_CRASH_ATTEMPT", "FTL_CKPT_L2_TRANSPORT", "FTL_CKPT_L2_TCP_FAULT",
    "FTL_CKPT_L2_TCP_ANNOUNCE", NULL};

static bool name_in(const char *name, size_t len, const char *const *list) {
  for (const char *const *p = list; *p; p++)
    if (strlen(*p) == len && memcmp(*p, name, len) == 0) return true;
  return false;
}

/* Refuses a reserved name in the job's `env` (FTL_ERR_SPEC naming env.NAME), saying who owns it. */
static ftl_err check_env_names(const ln_job *job, const ln_yb_doc *doc, ftl_diag *d) {
  for (size_t i = 0; i < job->env_count; i++) {
    const char *kv = job->env[i];
    size_t len = strcspn(kv, "=");
    char path[160];
    snprintf(path, sizeof path, "env.%.*s", (int)(len < 140 ? len : 140), kv);
    if (name_in(kv, len, reserved_env_names))
      return ln_yb_fail_field(doc, path, d,
                               "reserved: ftl sets %.*s for every rank itself (docs/job-spec.md, `ftl help env`)",
                               (int)len, kv);
    if (name_in(kv, len, allowed_ftl_env_names)) continue;
    for (const char *const *p = reserved_env_prefixes; *p; p++) {
      if (strncmp(kv, *p, strlen(*p)) != 0) continue;
      if (!strcmp(*p, "FTL_"))
        return ln_yb_fail_field(doc, path, d,
                                 "reserved: FTL_* variables are ftl's own, except %s and the test-only fault "
                                 "injection (docs/job-spec.md)",
                                 "FTL_LOG_LEVEL, FTL_BACKEND, FTL_COLLECTIVE_TIMEOUT_MS, FTL_CKPT_ALLOW_FRESH, "
                                 "FTL_CKPT_L2_TRANSPORT");
      return ln_yb_fail_field(doc, path, d,
                               "reserved: %s* variables belong to Open MPI's launch of the ranks; set MCA "
                               "parameters in the environment of `ftl run` instead",
                               *p);
    }
  }
  return FTL_OK;
}

int ln_job_module_name_ok(const char *name) {
  size_t len = strlen(name);
  if (len == 0 || len > 200) return 0;
  int start = 1;
  for (const char *c = name; *c; c++) {
    if (*c == '.') {
      if (start) return 0;
      start = 1;
      continue;
    }
    if (!(isalnum((unsigned char)*c) || *c == '_') || (start && isdigit((unsigned char)*c))) return 0;
    start = 0;
  }
  return !start;
}

/* restart.preload: module names (a standby's runner imports them), at most 256. */
static ftl_err check_preload(const ln_job *job, const ln_yb_doc *doc, ftl_diag *d) {
  if (job->preload_count > 256)
    return ln_yb_fail_field(doc, "restart.preload", d, "at most 256 modules, got %zu", job->preload_count);
  for (size_t i = 0; i < job->preload_count; i++)
    if (!ln_job_module_name_ok(job->preload[i]))
      return ln_yb_fail_field(doc, "restart.preload", d, "'%s' is not a Python module name (dotted identifiers)",
                              job->preload[i]);
  return FTL_OK;
}

/* checkpoint.levels: l1, l2 and l3, each once, l3 always (it is where a step is committed); l2 only
 * with l1 (its copies live in the partner host's L1 folder). An empty list is not "no list" (the
 * default): it names no level, so it lacks l3. */
static ftl_err check_levels(const ln_job *job, const ln_yb_doc *doc, ftl_diag *d) {
  static const char *const names[] = {"l1", "l2", "l3"};
  int given = ln_yb_has_field(doc, "checkpoint.levels");
  int seen[3] = {!given, 0, !given};
  for (size_t i = 0; i < job->ckpt_levels_count; i++) {
    const char *l = job->ckpt_levels[i];
    size_t k = 0;
    while (k < 3 && strcmp(l, names[k]) != 0) k++;
    if (k == 3) return ln_yb_fail_field(doc, "checkpoint.levels", d, "expected l1, l2 or l3, got '%s'", l);
    if (seen[k]) return ln_yb_fail_field(doc, "checkpoint.levels", d, "names %s twice", l);
    seen[k] = 1;
  }
  if (!seen[2])
    return ln_yb_fail_field(doc, "checkpoint.levels", d, "%smust include l3: a step is committed in the run directory, "
                            "the other levels are copies", job->ckpt_levels_count ? "" : "an empty list: ");
  if (seen[1] && !seen[0])
    return ln_yb_fail_field(doc, "checkpoint.levels", d,
                            "l2 needs l1: the partner host keeps its copies in its L1 folder (checkpoint.l1_dir)");
  return FTL_OK;
}

/* fleet.history_days says how a fleet ledger's history is read: without one it would be ignored,
 * silently. */
static ftl_err check_fleet(const ln_job *job, const ln_yb_doc *doc, ftl_diag *d) {
  if (!job->fleet_ledger && ln_yb_has_field(doc, "fleet.history_days"))
    return ln_yb_fail_field(doc, "fleet.history_days", d, "has no effect without fleet_ledger (the ledger whose "
                            "history it reads)");
  return FTL_OK;
}

/* mfu.peak_tflops: a device's peak, so more than 0 and less than any device's by far (a petaFLOPS
 * written in FLOPS, not TFLOPS, would make every MFU a millionth of itself). */
static ftl_err check_mfu(const ln_job *job, const ln_yb_doc *doc, ftl_diag *d) {
  if (job->has_mfu_peak && !(job->mfu_peak_tflops > 0 && job->mfu_peak_tflops <= 1e6))
    return ln_yb_fail_field(doc, "mfu.peak_tflops", d,
                            "expected a device's peak in TFLOPS, more than 0 and at most 1000000, got %g",
                            job->mfu_peak_tflops);
  return FTL_OK;
}

/* checkpoint.l1_dir: every host's ranks make their L1 folder under it, whatever folder they start
 * in, and the names below it must fit PATH_MAX: either wrong would turn L1 off on every rank, with
 * only a warning in each rank's log. A root this host has and everyone may write without the
 * sticky bit is refused too (checkpoint/levels.h, ck_l1_root_unguarded); the ranks' hosts check
 * their own. */
static ftl_err check_l1_dir(const ln_job *job, const ln_yb_doc *doc, ftl_diag *d) {
  const char *dir = job->ckpt_l1_dir;
  struct stat st;
  if (!dir) return FTL_OK;
  if (dir[0] != '/')
    return ln_yb_fail_field(doc, "checkpoint.l1_dir", d,
                            "expected an absolute path (the ranks of every host make their L1 folder under it), "
                            "got '%.200s'", dir);
  if (strlen(dir) > CK_L1_ROOT_MAX)
    return ln_yb_fail_field(doc, "checkpoint.l1_dir", d,
                            "too long: %zu bytes, at most %d (the L1 paths below it, ftl-<hash>/step-N/partner/"
                            "<shard file>, must fit PATH_MAX, %d bytes)", strlen(dir), CK_L1_ROOT_MAX, PATH_MAX);
  if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && ck_l1_root_unguarded(st.st_mode))
    return ln_yb_fail_field(doc, "checkpoint.l1_dir", d,
                            "%.200s is writable by every user and has no sticky bit: any of them could rename or "
                            "delete this run's L1 folder in it (chmod +t, as /dev/shm has)", dir);
  return FTL_OK;
}

int ln_job_ckpt_l2(const ln_job *job) {
  for (size_t i = 0; i < job->ckpt_levels_count; i++)
    if (!strcmp(job->ckpt_levels[i], "l2")) return 1;
  return 0;
}

int ln_job_ckpt_l2_mode(const ln_job *job) {
  /* No list: the default depends on the placement, which only the gang knows for sure (a hostfile
   * may put every rank on its first host): the ranks turn L2 on when they span several hosts. */
  if (job->ckpt_levels_count == 0) return LN_CKPT_L2_AUTO;
  return ln_job_ckpt_l2(job);
}

int ln_job_ckpt_l1(const ln_job *job) {
  if (job->ckpt_levels_count == 0) return 1;
  for (size_t i = 0; i < job->ckpt_levels_count; i++)
    if (!strcmp(job->ckpt_levels[i], "l1")) return 1;
  return 0;
}

const char *ln_job_ckpt_l1_root(const ln_job *job) {
  return job->ckpt_l1_dir ? job->ckpt_l1_dir : ck_l1_default_root();
}

/* ---- public functions -------------------------------------------------------------------- */

/* A job name from a file or program name: the base name, less its extension when asked, with
 * characters a name may not hold turned into '_' and leading dots dropped; fallback when that
 * leaves nothing. Returns NULL only when out of memory. */
static char *name_from(const char *path, bool strip_extension, const char *fallback) {
  const char *base = path ? path : "";
  const char *slash = strrchr(base, '/');
  if (slash) base = slash + 1;
  size_t len = strlen(base);
  const char *dot = strrchr(base, '.');
  if (strip_extension && dot && dot != base) len = (size_t)(dot - base);
  while (len > 0 && base[0] == '.') base++, len--;
  if (len > FTL_YB_NAME_MAX) len = FTL_YB_NAME_MAX;
  if (len == 0) return ftl_strdup(fallback);
  char *name = ln_yb_strndup(base, len);
  if (!name) return NULL;
  for (size_t i = 0; i < len; i++)
    if (!ln_yb_name_char_ok(name[i])) name[i] = '_';
  return name;
}

/* Programs that run a script named on their command line, by family: a command-line job of one of
 * them is named after the script, so `-- python3 a.py` and `-- python3 b.py` get runs/a and runs/b,
 * not both runs/python3. Matched on the base name, a version suffix allowed (python3.11). Each
 * family says which option gives code inline (no script to name it after) and which options take
 * a value (skipped with it). */
typedef struct interpreter {
  const char *name;
  const char *inline_opt;     /* "-c": the code follows, no script */
  const char *module_opt;     /* python's "-m": a module follows, the job's name */
  const char *value_opts[3];  /* options followed by a value */
} interpreter;

static const interpreter interpreters[] = {
    {"python", "-c", "-m", {"-X", "-W", NULL}},
    {"pypy", "-c", "-m", {"-X", "-W", NULL}},
    {"bash", "-c", NULL, {"-o", "-O", NULL}},
    {"sh", "-c", NULL, {"-o", NULL, NULL}},
    {"dash", "-c", NULL, {"-o", NULL, NULL}},
    {"zsh", "-c", NULL, {"-o", NULL, NULL}},
    {"ksh", "-c", NULL, {"-o", NULL, NULL}},
    {"perl", "-e", NULL, {"-I", NULL, NULL}},
    {"ruby", "-e", NULL, {"-I", "-r", NULL}},
    {"node", "-e", NULL, {"-r", "--require", NULL}},
    {"nodejs", "-e", NULL, {"-r", "--require", NULL}},
    {"Rscript", "-e", NULL, {NULL, NULL, NULL}},
    {"julia", "-e", NULL, {"-L", NULL, NULL}},
    {"lua", "-e", NULL, {"-l", NULL, NULL}},
    {"php", "-r", NULL, {"-d", NULL, NULL}},
    {"tclsh", NULL, NULL, {NULL, NULL, NULL}},
};

static const interpreter *interpreter_of(const char *program) {
  const char *base = strrchr(program, '/');
  base = base ? base + 1 : program;
  for (size_t i = 0; i < sizeof interpreters / sizeof *interpreters; i++) {
    size_t n = strlen(interpreters[i].name);
    if (strncmp(base, interpreters[i].name, n) != 0) continue;
    const char *rest = base + n;
    while (*rest && (isdigit((unsigned char)*rest) || *rest == '.')) rest++;
    if (!*rest) return &interpreters[i];
  }
  return NULL;
}

/* What an interpreter's command line runs: the first argument that is not an option (*module 0),
 * or the module of python's -m (*module 1); NULL for code given inline or none at all. */
static const char *script_of(const interpreter *it, int argc, char *const argv[], int *module) {
  *module = 0;
  for (int i = 1; i < argc && argv[i]; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) return i + 1 < argc ? argv[i + 1] : NULL;
    if (a[0] != '-' || !a[1]) return a;
    if (it->module_opt && !strcmp(a, it->module_opt)) {
      *module = 1;
      return i + 1 < argc ? argv[i + 1] : NULL;
    }
    if (it->inline_opt && !strcmp(a, it->inline_opt)) return NULL;
    for (int k = 0; k < 3 && it->value_opts[k]; k++)
      if (!strcmp(a, it->value_opts[k])) i++;
  }
  return NULL;
}

static ln_job *job_new(void) {
  ln_job *job = ftl_calloc(1, sizeof *job);
  if (!job) return NULL;
  job->args = ftl_calloc(1, sizeof *job->args);
  job->env = ftl_calloc(1, sizeof *job->env);
  job->inputs = ftl_calloc(1, sizeof *job->inputs);
  job->eval.args = ftl_calloc(1, sizeof *job->eval.args);
  job->eval.env = ftl_calloc(1, sizeof *job->eval.env);
  job->ckpt_levels = ftl_calloc(1, sizeof *job->ckpt_levels);
  if (!job->args || !job->env || !job->inputs || !job->eval.args || !job->eval.env || !job->ckpt_levels) {
    ln_job_destroy(job);
    return NULL;
  }
  ln_yb_apply_defaults(&job_section, job);
  return job;
}

ftl_err ln_job_env_add(ln_job *job, char *const *kv, size_t count, ftl_diag *d) {
  char **grown = ftl_realloc(job->env, (job->env_count + count + 1) * sizeof *grown);
  if (!grown) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  job->env = grown;
  for (size_t i = 0; i < count; i++) {
    if (!(job->env[job->env_count] = ftl_strdup(kv[i]))) {
      job->env[job->env_count] = NULL;
      return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    }
    job->env_count++;
  }
  job->env[job->env_count] = NULL;
  return FTL_OK;
}

ev_gate_fields ln_job_gate_fields(const ln_job *job) {
  return (ev_gate_fields){.spec_path = job->spec_path,
                          .name = job->name,
                          .spec_hash = job->spec_hash,
                          .inputs = job->inputs,
                          .inputs_count = job->inputs_count,
                          .eval = &job->eval,
                          .registry = &job->registry};
}

void ln_job_destroy(ln_job *job) {
  if (!job) return;
  ftl_free(job->spec_path);
  ftl_free(job->name);
  ftl_free(job->program);
  ln_yb_free_strv(job->args);
  ln_yb_free_strv(job->env);
  ftl_free(job->hostfile);
  ftl_free(job->run_dir);
  ftl_free(job->working_dir);
  ftl_free(job->fleet_ledger);
  ftl_free(job->metrics_textfile);
  ln_yb_free_strv(job->inputs);
  ftl_free(job->eval.program);
  ln_yb_free_strv(job->eval.args);
  ln_yb_free_strv(job->eval.env);
  ln_yb_free_strv(job->ckpt_levels);
  ln_yb_free_strv(job->preload);
  ftl_free(job->ckpt_l1_dir);
  ftl_free(job->eval.metric);
  ftl_free(job->eval.baseline_channel);
  ftl_free(job->eval.data);
  ftl_free(job->eval.base);
  ftl_free(job->registry.path);
  ftl_free(job->registry.name);
  ftl_free(job->registry.channel);
  ftl_free(job);
}

const char *ln_launch_kind_name(ln_launch_kind kind) {
  for (const ln_yb_choice *ch = launch_choices; ch->word; ch++)
    if (ch->value == (int)kind) return ch->word;
  return "unknown";
}

static void hash_hex(const char *data, size_t size, char out[33]) {
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, XXH3_128bits(data, size));
  core_hex(canon.digest, 16, out);
}

void ln_job_command_hash(const ln_job *job, const char *program, char out[33]) {
  XXH3_state_t *st = XXH3_createState();
  XXH128_hash_t h = {0, 0};
  if (st && XXH3_128bits_reset(st) == XXH_OK) {
    XXH3_128bits_update(st, program, strlen(program) + 1);
    for (size_t i = 0; i < job->args_count; i++) XXH3_128bits_update(st, job->args[i], strlen(job->args[i]) + 1);
    h = XXH3_128bits_digest(st);
  }
  XXH3_freeState(st);
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, h);
  core_hex(canon.digest, 16, out);
}

/* One character of ln_job_command_text into out (size > 4); 0 when out is full, "..." then ending it. */
static int put_shown(char *out, size_t size, size_t *used, char c) {
  if (*used + 4 >= size) {
    memcpy(out + size - 4, "...", 4);
    return 0;
  }
  out[(*used)++] = (c >= 0x20 && c < 0x7f) ? c : '?';
  out[*used] = '\0';
  return 1;
}

void ln_job_command_text(const ln_job *job, char *out, size_t size) {
  size_t used = 0;
  if (size < 5) {
    if (size) out[0] = '\0';
    return;
  }
  out[0] = '\0';
  for (size_t w = 0; w <= job->args_count; w++) {
    const char *word = w == 0 ? (job->program ? job->program : "") : job->args[w - 1];
    if (w > 0 && !put_shown(out, size, &used, ' ')) return;
    for (const char *c = word; *c; c++)
      if (!put_shown(out, size, &used, *c)) return;
  }
}

/* file names the input in messages; name_source (may be NULL) gives the default job name. */
static ftl_err parse_common(const char *data, size_t size, const char *file, const char *name_source,
                            const char *base_dir, const char *spec_path, ln_job **job_out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  ln_job *job = NULL;
  ln_yb_doc *doc = NULL;

  job = job_new();
  if (!job || (spec_path && !(job->spec_path = ftl_strdup(spec_path)))) goto oom;
  hash_hex(data, size, job->spec_hash);
  rc = ln_yb_parse(data, size, &job_schema, file, base_dir, job, &doc, d);
  if (rc) goto out;
  rc = check_env_names(job, doc, d);
  if (rc) goto out;
  rc = check_preload(job, doc, d);
  if (rc) goto out;
  rc = check_levels(job, doc, d);
  if (rc) goto out;
  rc = check_l1_dir(job, doc, d);
  if (rc) goto out;
  rc = check_mfu(job, doc, d);
  if (rc) goto out;
  rc = check_fleet(job, doc, d);
  if (rc) goto out;
  if (job->min_ranks > job->ranks) {
    /* A rule across two fields: point at min_ranks, which the user set on purpose. */
    rc = ln_yb_fail_field(doc, "min_ranks", d, "expected at most ranks (%d), got %d", job->ranks, job->min_ranks);
    goto out;
  }
  if (!job->name && !(job->name = name_from(name_source, true, "job"))) goto oom;
  *job_out = job;
  job = NULL;
  goto out;
oom:
  rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "%s: out of memory while reading the job spec", file);
out:
  ln_yb_doc_free(doc);
  ln_job_destroy(job);
  return rc;
}

ftl_err ln_job_parse_bytes(const char *data, size_t size, const char *name_for_errors, const char *base_dir,
                            ln_job **job_out, ftl_diag *d) {
  if (!job_out || (!data && size > 0))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "ln_job_parse_bytes: NULL %s", job_out ? "data" : "job_out");
  *job_out = NULL;
  return parse_common(data ? data : "", size, name_for_errors ? name_for_errors : "<job spec>", name_for_errors,
                      base_dir, NULL, job_out, d);
}

/* The spec's folder, made absolute against the current folder so that the paths joined to it
 * stay right after the launcher changes folder. Falls back to the relative folder when the
 * current one cannot be named. Returns NULL only when out of memory. */
static char *spec_dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash == path ? ftl_strdup("/") : slash ? ln_yb_strndup(path, (size_t)(slash - path)) : ftl_strdup(".");
  if (!dir || dir[0] == '/') return dir;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return dir;
  char *abs = strcmp(dir, ".") == 0 ? ftl_strdup(cwd) : ln_yb_join_path(cwd, dir);
  ftl_free(dir);
  return abs;
}

ftl_err ln_job_parse_file(const char *path, ln_job **job_out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  char *data = NULL, *dir = NULL;
  size_t size = 0;
  ftl_diag read_diag = {{0}};
  if (!path || !job_out)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "ln_job_parse_file: NULL %s", path ? "job_out" : "path");
  *job_out = NULL;
  /* One byte over the limit is enough to tell "too large" apart from "exactly the limit". */
  rc = ftl_read_file(path, JOB_MAX_BYTES + 1, &data, &size, &read_diag);
  if (rc == FTL_ERR_NOTFOUND || rc == FTL_ERR_IO) {
    /* ftl_read_file returns straight after the failing open or read (a close and a free that
     * succeed leave errno alone), so errno still names the cause. */
    int err = errno;
    rc = ftl_diag_fail(d, rc, "cannot read %s: %s", path, err ? strerror(err) : read_diag.msg);
    goto out;
  }
  if (rc == FTL_ERR_RANGE) {
    rc = ftl_diag_fail(d, FTL_ERR_SPEC, "%s: too large for a job spec (the limit is %zu bytes)", path,
                       JOB_MAX_BYTES);
    goto out;
  }
  if (rc) {
    rc = ftl_diag_fail(d, rc, "%s", read_diag.msg);
    goto out;
  }
  dir = spec_dir_of(path);
  if (!dir) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "%s: out of memory while reading the job spec", path);
    goto out;
  }
  rc = parse_common(data, size, path, path, dir, path, job_out, d);
out:
  ftl_free(dir);
  ftl_free(data);
  return rc;
}

ftl_err ln_job_from_argv(int ranks, int argc, char *const argv[], ln_job **job_out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  ln_job *job = NULL;
  size_t count = 0;
  if (!job_out) return ftl_diag_fail(d, FTL_ERR_INVAL, "ln_job_from_argv: NULL job_out");
  *job_out = NULL;
  if (ranks <= 0) return ftl_diag_fail(d, FTL_ERR_SPEC, "-n: expected an integer > 0, got %d", ranks);
  if (ranks > JOB_RANKS_MAX)
    return ftl_diag_fail(d, FTL_ERR_SPEC, "-n: expected an integer <= %d, got %d", JOB_RANKS_MAX, ranks);
  if (argc < 1 || !argv || !argv[0] || !argv[0][0])
    return ftl_diag_fail(d, FTL_ERR_SPEC, "no program given (expected: ftl run -n N -- PROGRAM [ARGS...])");
  rc = FTL_ERR_NOMEM; /* every failure below is an allocation */
  job = job_new();
  if (!job) goto out;
  job->ranks = ranks;
  /* Named after what it runs: the program, or an interpreter's script (its base name without the
   * extension; a module's full dotted name). The default run directory is runs/<name>. */
  int module = 0;
  const interpreter *it = interpreter_of(argv[0]);
  const char *script = it ? script_of(it, argc, argv, &module) : NULL;
  if (!(job->name = script ? name_from(script, !module, "cli") : name_from(argv[0], false, "cli"))) goto out;
  if (!(job->program = ftl_strdup(argv[0]))) goto out;
  while ((int)count + 1 < argc && argv[count + 1]) count++;
  ln_yb_free_strv(job->args);
  if (!(job->args = ftl_calloc(count + 1, sizeof *job->args))) goto out;
  for (size_t i = 0; i < count; i++) {
    if (!(job->args[i] = ftl_strdup(argv[i + 1]))) goto out;
    job->args_count = i + 1;
  }
  *job_out = job;
  job = NULL;
  rc = FTL_OK;
out:
  if (rc) ftl_diag_fail(d, rc, "out of memory building the job from the command line");
  ln_job_destroy(job);
  return rc;
}
