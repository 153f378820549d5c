/* launcher/jobspec.h: the job spec (JOB.yaml) as ftl reads it: parse, validate, describe.
 *
 * The parser rejects what it does not know: an unknown field is an error, as is a value of the
 * wrong type, and every error names the file, line and field. The format is documented in
 * docs/job-spec.md. Not thread-safe; not collective (the launcher alone reads job specs). */
#ifndef FTL_LAUNCHER_JOBSPEC_H
#define FTL_LAUNCHER_JOBSPEC_H

#include <stddef.h>
#include <stdint.h>

#include "eval/inputs.h"
#include "ftl/error.h"

typedef enum ln_launch_kind {
  FTL_LAUNCH_AUTO = 0, /* srun inside a Slurm allocation (SLURM_JOB_ID set), mpirun otherwise */
  FTL_LAUNCH_MPIRUN = 1,
  FTL_LAUNCH_SRUN = 2,
} ln_launch_kind;

typedef struct ln_job {
  char *spec_path;          /* the file it came from, NULL when built from the command line */
  char *name;               /* `name`; defaults to the file's base name without extension */
  int ranks;                /* `ranks`: > 0 */
  char *program;            /* `program`: a path, or a name looked up on PATH */
  char **args;              /* `args`: NULL-terminated; never NULL (empty list) */
  size_t args_count;
  char **env;               /* `env`: "KEY=VALUE" strings, NULL-terminated; never NULL */
  size_t env_count;
  char *hostfile;           /* `hostfile`: resolved relative to the spec's folder; may be NULL */
  ln_launch_kind launcher; /* `launcher`: auto | mpirun | srun */
  char *run_dir;            /* `run_dir`: may be NULL (then runs/<name>/) */
  char *working_dir;        /* `working_dir`: may be NULL (the launcher's cwd) */
  int64_t rendezvous_timeout_ms; /* `rendezvous.timeout_s` (seconds, may be fractional); default 300 s */
  char spec_hash[33];       /* XXH3-128 of the spec's bytes as 32 hex digits; "" without a file */
  int min_ranks;            /* `min_ranks`: fewest ranks to continue with after losing a host;
                               0 (the default) means exactly `ranks` */
  /* `restart:` what ftl does when an attempt fails */
  int max_restarts;         /* `restart.max_restarts`: budget for the whole job; default 3 */
  int standby;              /* `restart.standby`: on (1), off (0) or auto (-1, the default: on,
                               kept apart from on so a later rule can refine it): keep a standby gang parked
                               for a warm restart (launcher/standby.h) */
  int64_t backoff_ms;       /* `restart.backoff_s`: first pause before a relaunch; doubles; default 0.05 s */
  int64_t max_backoff_ms;   /* `restart.max_backoff_s`: cap of the pause; default 30 s */
  int crash_loop;           /* `restart.crash_loop`: failures in a row without progress past the
                               same step that stop the job; default 3 */
  int python_runner;       /* `restart.python_runner`: off (0), or auto/on (-1/1, the default): a Python
                               program runs through launcher/pyrun.py when restarts are allowed, and the
                               standby of one that does not call ftl_init parks there with the attempt's
                               modules imported (launcher/pyprog.h) */
  char **preload;           /* `restart.preload`: modules that standby imports too, NULL-terminated (may be
                               NULL when not given) */
  size_t preload_count;
  int probe_port;           /* `restart.probe_port`: the TCP port that tells whether a host is
                               there after ranks never started (hostprobe.h); default 22 (ssh) */
  /* `timeouts:` how long a rank may be silent before it is called hung, by section */
  int64_t startup_timeout_ms;    /* `timeouts.startup_s`: launch to first step; default 600 s */
  int64_t step_timeout_ms;       /* `timeouts.step_s`: between progress reports; default 180 s */
  int64_t checkpoint_timeout_ms; /* `timeouts.checkpoint_s`: inside a checkpoint; default 420 s */
  int64_t node_timeout_ms;       /* `timeouts.node_s`: a host's agents silent; default 10 s */
  char *fleet_ledger;       /* `fleet_ledger`: a failure/exposure ledger shared by the fleet's jobs
                               (docs/formats/fleet-ledger.md); may be NULL */
  int fleet_history_days;   /* `fleet.history_days`: the days of the fleet ledger's per-host history that
                               judge the hostfile's hosts before the first attempt; 0: none; default 7 */
  /* `preemption:` */
  /* `checkpoint:` the levels of the ranks' checkpoints (docs/checkpoint.md, "Levels") */
  char **ckpt_levels;       /* `checkpoint.levels`: NULL-terminated, each "l1", "l2" or "l3", each at most
                               once; empty: not given (`[]` is refused), the default, [l1, l3] on one
                               host, [l1, l2, l3] on several */
  size_t ckpt_levels_count;
  char *ckpt_l1_dir;        /* `checkpoint.l1_dir`: node-local memory folder, absolute, at most
                               CK_L1_ROOT_MAX bytes; NULL: /dev/shm */
  int ckpt_l1_max_mb;       /* `checkpoint.l1_max_mb`: per rank; 0: the folder's free space */
  int64_t preempt_grace_ms; /* `preemption.grace_s`: time ranks get to checkpoint and stop after
                               SIGTERM/SIGUSR1 before they are killed; default 30 s */
  char *metrics_textfile;   /* `metrics.textfile`: Prometheus textfile, as written; may be NULL */
  /* `mfu:` what model FLOPs utilisation is measured against (launcher/mfu.h) */
  int mfu_precision;        /* `mfu.precision`: bf16 (0, the default), fp16, tf32, fp32: ln_precision */
  double mfu_peak_tflops;   /* `mfu.peak_tflops`: every rank's device's peak; > 0 when has_mfu_peak */
  int has_mfu_peak;
  /* `inputs:` the files and folders the job reads (docs/pipeline.md), hashed into
     RUNDIR/snapshot.json at submission: "NAME=PATH" strings, NULL-terminated; never NULL */
  char **inputs;
  size_t inputs_count;
  /* `eval:` the gate, locked at submission (docs/pipeline.md); program is NULL without the section */
  ev_eval_section eval;
  /* `registry:` where a passing adapter is published */
  ev_registry_section registry;
} ln_job;

/* Parses and validates the file at path into a new job (*job_out, freed by ln_job_destroy).
 * Errors: FTL_ERR_NOTFOUND / FTL_ERR_IO when unreadable, FTL_ERR_SPEC for anything wrong inside,
 * with d->msg like "job.yaml:3:8: field 'ranks': expected an integer > 0, got '-2'". */
ftl_err ln_job_parse_file(const char *path, ln_job **job_out, ftl_diag *d);

/* The same for bytes in memory; name_for_errors is used as the file name in messages and
 * relative paths are resolved against base_dir (may be NULL: the current folder). */
ftl_err ln_job_parse_bytes(const char *data, size_t size, const char *name_for_errors,
                            const char *base_dir, ln_job **job_out, ftl_diag *d);

/* A job from the command line (`ftl run -n N -- PROGRAM ARGS...`): program = argv[0]. */
ftl_err ln_job_from_argv(int ranks, int argc, char *const argv[], ln_job **job_out, ftl_diag *d);

void ln_job_destroy(ln_job *job);

/* Adds "KEY=VALUE" strings (a copy of each) to the ranks' environment (job->env), after the spec's:
 * the variables eval's submission returns (FTL_SNAPSHOT, FTL_INPUT_<NAME>). */
ftl_err ln_job_env_add(ln_job *job, char *const *kv, size_t count, ftl_diag *d);

/* What of the job the gate is locked with, for eval (eval/inputs.h); borrowed from job. */
ev_gate_fields ln_job_gate_fields(const ln_job *job);

/* What a command-line job runs, for its identity (launcher/runlock.c): out gets the XXH3-128 of the
 * program as found and every argument (each NUL-terminated) as 32 hex digits. */
void ln_job_command_hash(const ln_job *job, const char *program, char out[33]);

/* The job's command line for a message: the program as given and its arguments, separated by
 * spaces, a byte outside printable ASCII shown as '?', cut with "..." to fit size. */
void ln_job_command_text(const ln_job *job, char *out, size_t size);

const char *ln_launch_kind_name(ln_launch_kind kind);

/* Whether the job's checkpoints keep an L1 copy (checkpoint.levels names l1, or is not given). */
int ln_job_ckpt_l1(const ln_job *job);

/* The root of the L1 folders on every host: the job's checkpoint.l1_dir, else FTL_CKPT_L1_DIR from
 * ftl run's own environment when it names an absolute folder (a site's or a test's default), else
 * /dev/shm (ck_l1_default_root, checkpoint/levels.h, which `ftl ckpt` uses too). The one place ftl
 * run decides it (the ranks' setting and the clean-up after a job). */
const char *ln_job_ckpt_l1_root(const ln_job *job);

/* Whether the job's checkpoint.levels names l2 (asks for an L2 copy on a partner host). */
int ln_job_ckpt_l2(const ln_job *job);

/* What the ranks get as FTL_CKPT_L2: 1 when checkpoint.levels names l2, 0 when a list without it is
 * given, LN_CKPT_L2_AUTO when none is (the default: L1 and L3 on one host; L1, L2 and L3 on
 * several, decided by the ranks from where they run). */
#define LN_CKPT_L2_AUTO 2
int ln_job_ckpt_l2_mode(const ln_job *job);

/* Whether name is a Python module name as restart.preload takes it (and a standby's runner is
 * given): dotted identifiers of [A-Za-z0-9_], none starting with a digit, at most 200 bytes. */
int ln_job_module_name_ok(const char *name);

#endif
