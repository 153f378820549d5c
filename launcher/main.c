/* launcher/main.c: the `ftl` command: the subcommand table, `ftl run`'s argument parsing, the run
 * directory, and exit codes. Only this file chooses exit codes; everything below it returns ftl_err.
 *
 * A subcommand is one row of `subcommands` below: its name, its handler (argv[0] is the
 * subcommand's name), a one-line summary for `ftl help`, and its help text for `ftl help NAME`.
 * Help topics that are not commands (exit-codes, env) are rows of `topics`.
 *
 * Map: the help texts (`ftl run`, exit codes, env, ckpt, rank-agent, help); the subcommand table
 * and the help topics; `ftl help` and the usage lines; `ftl run`'s command line (spec or program,
 * the hostfile check, the options, the job, the overrides); `ftl run`'s steps (the run directory,
 * the observers, the programs, the inputs, a run finished before, finish.json); cmd_run; main.
 *
 * Why one file (issue 33): some 160 of its lines are the help texts, kept beside the table whose
 * rows point at them. The rest is the `ftl` command's front end: `ftl run`'s steps share a private
 * run_opts and the RUN_GO_ON convention with cmd_run, and each step is a short call into the file
 * that does the work (jobspec.c, runlock.c, events.c, progress.c, finish.c, run.c). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/rundir.h"
#include "core/proc.h"
#include "ftl/core.h"
#include "ftl/ftl.h"
#include "launcher/fleet.h"
#include "launcher/gang.h"
#include "launcher/gpu_health.h"
#include "launcher/hostfile.h"
#include "launcher/launcher.h"
#include "launcher/prom.h"
#include "launcher/finish.h"
#include "launcher/progress.h"
#include "launcher/runlock.h"
#include "launcher/status.h"
#include "launcher/version.h"

#ifdef FTL_HAVE_CKPT_CLI
#include "checkpoint/door.h"
#endif
#ifdef FTL_HAVE_EVAL
#include "eval/eval_cli.h"
#include "launcher/eval_hooks.h"
#endif
#ifdef FTL_HAVE_PIPELINE_CLI
#include "pipeline/pipeline_cli.h"
#endif

/* ---- help texts ------------------------------------------------------------------------------ */

static const char run_help[] =
    "ftl run: start every rank of a job through MPI (mpirun, or srun inside a Slurm allocation), or none.\n"
    "\n"
    "  ftl run [OPTIONS] JOB.yaml\n"
    "  ftl run -n N [OPTIONS] -- PROGRAM [ARGS...]\n"
    "\n"
    "Options:\n"
    "  -n, --ranks N               number of ranks (overrides the job spec's `ranks`)\n"
    "      --hostfile FILE         Open MPI hostfile (overrides `hostfile`)\n"
    "      --run-dir DIR           run directory (default: runs/<job name>/)\n"
    "      --name NAME             job name for a command-line job (default: what it runs, the program's\n"
    "                              name, or an interpreter's script: python3 train.py -> train)\n"
    "      --rendezvous-timeout S  seconds every rank has to reach ftl_init (default 300)\n"
    "      --launcher KIND         auto | mpirun | srun (default auto: srun inside Slurm)\n"
    "      --rdzv-host ADDR        address ranks use to reach this launcher (default 127.0.0.1,\n"
    "                              or this host's name with a hostfile)\n"
    "      --kill-grace-ms MS      between SIGTERM and SIGKILL when the gang is ended (default 5000)\n"
    "      --max-restarts N        restart budget for the whole job (overrides restart.max_restarts; default 3)\n"
    "      --standby, --no-standby keep (or not) a standby gang parked for warm restarts (overrides\n"
    "                              restart.standby; default: on whenever restarts are allowed)\n"
    "      --wait-lock S           wait up to S seconds for the run directory's lock (RUNDIR/ftl.lock) held by\n"
    "                              another launcher (default 0: refuse at once, exit 2, naming its pid and host)\n"
    "      --progress MODE         auto | tty | lines | off: rank 0's progress (step, loss, tokens/s, ETA,\n"
    "                              checkpoint, restarts, goodput) on stderr, redrawn in place on a terminal\n"
    "                              (tty), or a plain line every --progress-interval (lines; batch logs);\n"
    "                              default auto: tty when stderr is a terminal and TERM is not dumb\n"
    "      --progress-interval S   seconds between the lines of --progress lines (default 30)\n"
    "      --metrics-textfile FILE Prometheus metrics, rewritten atomically every few seconds (overrides\n"
    "                              `metrics.textfile` and FTL_METRICS_TEXTFILE; docs/formats/metrics-textfile.md)\n"
    "\n"
    "The run directory holds one job: job.json says which (another job is refused, exit 2;\n"
    "docs/formats/job-identity.md), job.yaml is a copy of the spec, events.jsonl the events\n"
    "(docs/formats/events.md), finish.json what of the end is done (docs/formats/finish.md), and one\n"
    "attempt-NNNN/ folder per attempt with rank-NNNNN.out/.err/.exit.json. A run whose training\n"
    "finished is not trained again: ftl run gates and publishes what is left, or says\n"
    "'already finished: published NAME version ID' and exits 0. Ctrl-C stops the ranks at their\n"
    "next step (exit 130, resumable; twice: at once); a closed stdout (| head) does not stop ftl.\n"
    "Every rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and\n"
    "the FTL_* variables listed by `ftl help env`.\n";

static const char exit_codes_help[] =
    "ftl exit codes:\n"
    "  0    every rank exited 0 (with eval: and registry: in the spec: the gate passed and the adapter\n"
    "       was published and promoted); or the run had already finished so ('already finished')\n"
    "  1    the job failed (restarts spent, crash loop, or not restartable); the first failure is named;\n"
    "       or the evaluation gate failed or could not run: nothing was published\n"
    "  2    bad command line or job spec, or the run directory is in use by another launcher or\n"
    "       belongs to another job (docs/formats/ftl-lock.md): nothing was started\n"
    "  3    the gang could not be started (program or mpirun/srun not found)\n"
    "  4    the rendezvous deadline passed with ranks missing (they are named)\n"
    "  5    ftl itself failed (run directory not writable, out of memory, publishing failed)\n"
    "  75   preempted (SIGTERM/SIGUSR1): ranks stopped cleanly, or before the gang formed (nothing\n"
    "       lost); requeue, `ftl run` resumes\n"
    "  130  stopped by SIGINT (Ctrl-C; not a failure: ftl run resumes), 143 stopped by SIGTERM/SIGHUP\n"
    "       without a clean stop of the ranks\n"
    "`ftl gate`: 0 passed, 1 failed (threshold not met, metric missing or not finite), 2 error (an input\n"
    "changed after submission, a gate spec that differs from the locked one, the evaluator's deadline).\n"
    "`ftl publish`: 0 published, 1 the verdict did not pass (nothing published), 2 error.\n";

static const char env_help[] =
    "Variables every rank gets from `ftl run` (set in the environment built for each attempt):\n"
    "  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE   as torchrun sets them (the rank agent)\n"
    "  MASTER_ADDR, MASTER_PORT                         rank 0's host and a free port for the program's own use\n"
    "  FTL_RDZV_ADDR, FTL_RDZV_TOKEN                    this attempt's rendezvous address and token\n"
    "  FTL_RDZV_TIMEOUT_MS                              the rendezvous deadline\n"
    "  FTL_RUN_DIR, FTL_ATTEMPT, FTL_ATTEMPT_DIR        where this run and attempt keep their files\n"
    "  FTL_JOB_NAME, FTL_JOB_SPEC_HASH                  the job's name and the XXH3-128 of its spec\n"
    "  FTL_KILL_GRACE_MS                                SIGTERM -> SIGKILL grace when the gang is ended\n"
    "  FTL_NODE_TIMEOUT_MS                              timeouts.node_s: an agent that hears nothing from\n"
    "                                                   ftl this long ends its rank\n"
    "  FTL_PREEMPT_GRACE_MS                             preemption.grace_s (bounds the checkpoint interval)\n"
    "  FTL_CKPT_L1_DIR, FTL_CKPT_L1_MAX_BYTES           the checkpoints' L1 level: node-local memory folder (\"\": off)\n"
    "                                                   and the most one rank keeps there (checkpoint.levels)\n"
    "  FTL_CKPT_L2                                      1: each shard also copied to a partner host's L1 folder\n"
    "                                                   (checkpoint.levels names l2); auto (no levels given):\n"
    "                                                   the same when the gang spans several hosts; 0: never\n"
    "  FTL_RELAY                                        1 (the default): each host's agents and ranks report\n"
    "                                                   through one relay per host, one connection to ftl\n"
    "                                                   (wire version 3, docs/formats/rendezvous-wire.md\n"
    "                                                   \"Relays\"); FTL_RELAY=0 for `ftl run`: two per rank\n"
    "  FTL_RELAY_ADDR                                   the program's: its host's relay (@NAME), which ftl_init\n"
    "                                                   reports to instead of FTL_RDZV_ADDR (set by its agent)\n"
    "  OMPI_MCA_btl_vader_backing_directory,            the program's: a folder of its own under /dev/shm for\n"
    "  OMPI_MCA_btl_sm_backing_directory                Open MPI's shared-memory file, removed when the program\n"
    "                                                   ends, however it ends (set by its agent unless set already)\n";
/* Three literals: one would pass the 4095 characters C17 promises to support. */
static const char env_help_more[] =
    "  FTL_STANDBY                                      1 in a standby gang: ftl_init parks after MPI_Init until\n"
    "                                                   the launcher activates it (docs/fault-tolerance.md)\n"
    "  FTL_MPI_INIT_BARRIER                             1 under srun: ftl_init holds each rank after MPI_Init\n"
    "                                                   until every rank is through it (docs/fault-tolerance.md,\n"
    "                                                   \"Under Slurm\")\n"
    "  FTL_PYRUN, FTL_PYRUN_FD, FTL_PRELOAD             a Python program run through share/ftl/pyrun.py: 1, its\n"
    "                                                   socket to its agent, the modules its standby imports\n"
    "                                                   before parking (removed before the program runs;\n"
    "                                                   restart.python_runner)\n"
    "  FTL_FLEET_LEDGER                                 the spec's fleet_ledger, or empty\n"
    "  FTL_GANG_HOSTS                                   with a fleet_ledger: the attempt's host:ranks,... (the\n"
    "                                                   cadence's per-host failure rates; docs/cadence.md)\n"
    "  and the spec's `env` (for the program only: mpirun, srun and the rank agent run without it;\n"
    "  it reaches the agents as FTL_JOB_ENV_<NAME>, which the program does not see; names ftl or\n"
    "  Open MPI set are refused in it, docs/job-spec.md); as root with mpirun,\n"
    "  OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1.\n"
    "A job with `inputs:` also gives its ranks FTL_SNAPSHOT (the digests of its inputs) and\n"
    "FTL_INPUT_<NAME> (each input's path). The evaluation gate's evaluator gets FTL_RUN_DIR,\n"
    "FTL_SNAPSHOT, FTL_INPUT_<NAME>, FTL_GATE_ADAPTER, FTL_GATE_BASE, FTL_GATE_DATA and FTL_GATE_METRICS.\n";
static const char env_reads_help[] =
    "\n"
    "Variables ftl reads:\n"
    "  FTL_LOG_LEVEL=error|warn|info|debug              log verbosity (default info)\n"
    "  FTL_BACKEND=auto|mpi|nccl                        force the collective backend in ftl_init (auto: NCCL when\n"
    "                                                   every rank has a GPU of its own; docs/gpu.md)\n"
    "  FTL_COLLECTIVE_TIMEOUT_MS                        deadline of one collective on the GPU path (default 10 min;\n"
    "                                                   also bounds NCCL's set-up, at most 2 min without a launcher)\n"
    "  FTL_STANDBY_PARK_TIMEOUT_MS                      how long a standby rank waits parked for its activation\n"
    "                                                   before it gives up (default a day; ftl starts another)\n"
    "  FTL_CKPT_ALLOW_FRESH=1                           the ranks' checkpoint library may start fresh in a run\n"
    "                                                   directory whose checkpoints are all unusable\n"
    "  FTL_CKPT_L2_TRANSPORT=tcp|mpi                    how L2 checkpoint copies travel between hosts (default tcp:\n"
    "                                                   direct connections; mpi: MPI point-to-point)\n"
    "  FTL_LIBRARY                                      the libftl.so the Python binding loads (docs/python.md)\n"
    "  PATH                                             where `ftl run` looks up a program named without '/'\n"
    "  SLURM_JOB_ID                                     `--launcher auto` uses srun inside a Slurm allocation\n"
    "  SLURM_JOB_NODELIST (or SLURM_NODELIST),\n"
    "  SLURM_TASKS_PER_NODE                             under srun, each attempt is planned on the allocation's\n"
    "                                                   nodes: a lost node left out, a spare taking its place\n"
    "  SLURM_HOSTFILE                                   set for srun: each rank's node (--distribution=arbitrary)\n"
    "  FTL_REGISTRY                                     the adapter registry's folder, when a command is given none\n"
    "  FTL_GATE_LOCK_TIMEOUT_S                          how long `ftl gate`/`ftl publish` wait for the run's gate lock\n"
    "                                                   (default 30; another gate of the same run holds it)\n"
    "  FTL_METRICS_TEXTFILE                             `ftl run`'s Prometheus textfile when the spec names none\n"
    "  TERM                                             `ftl run --progress auto` draws in place unless it is dumb\n"
    "  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE   the rank agent's place under mpirun\n"
    "  SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,\n"
    "  SLURM_STEP_TASKS_PER_NODE, SLURM_TASKS_PER_NODE        the rank agent's place under srun\n"
    "  every variable above that ftl sets for the ranks   read back by the rank agent and ftl_init\n"
    "Test-only fault injection (docs/checkpoint.md):\n"
    "  FTL_FAULT (old name FTL_CKPT_FAULT)              fail the Nth write/fsync/rename of the file seam\n"
    "  FTL_CRASH_AT, FTL_CRASH_RANK, FTL_CRASH_STEP, FTL_CRASH_ATTEMPT (old names FTL_CKPT_CRASH_*)\n"
    "                                                   SIGKILL the process at a named point\n"
    "  FTL_CKPT_L2_TCP_FAULT=listen:RANK|connect:RANK   that rank's L2 listener or connections fail (MPI is used)\n"
    "  FTL_CKPT_L2_TCP_ANNOUNCE=DIR                     L2 listeners write their address to DIR, wait while DIR/hold;\n"
    "                                                   no fetch starts while DIR/hold-fetch\n"
    "  FTL_NVML_FAKE=FILE                               GPU health reads recorded NVML states from FILE instead of\n"
    "                                                   libnvidia-ml (docs/formats/nvml-fake.md); %h in FILE is\n"
    "                                                   the host's name\n"
    "  FTL_GPU_HEALTH_MS=MS                             between the rank agent's GPU health checks (default 5000)\n";

static const char ckpt_help[] =
    "ftl ckpt: look at a run's checkpoints (docs/checkpoint.md).\n"
    "\n"
    "  ftl ckpt ls RUNDIR              the committed steps\n"
    "  ftl ckpt verify RUNDIR [STEP]   check every shard's checksum (default: every committed step)\n"
    "  ftl ckpt show RUNDIR STEP       the manifest of one step\n"
    "\n"
    "RUNDIR is a run directory (checkpoints in RUNDIR/checkpoints) or a checkpoints folder.\n"
    "verify and show take --level l1|l2|l3: l3 the run directory's copies (the default); l1 and l2\n"
    "this host's copies in its L1 folder of the run (FTL_CKPT_L1_DIR, else /dev/shm): the shards' own\n"
    "copies, or the partner copies kept there.\n"
    "Exit codes: 0 success, 1 a checkpoint failed verification (or none was found), 2 usage or I/O error.\n";

static const char agent_help[] =
    "ftl rank-agent -- PROGRAM [ARGS...]: internal. `ftl run` starts it on every rank (through mpirun or\n"
    "srun) to start the program, log its output, forward signals and report how it ended.\n";

static const char help_help[] =
    "ftl help: the commands, one command's help, or a topic.\n"
    "\n"
    "  ftl help             every command's usage and a one-line summary of each\n"
    "  ftl help COMMAND     that command's options and exit codes (also `ftl COMMAND --help`)\n"
    "  ftl help exit-codes  what ftl's exit codes mean\n"
    "  ftl help env         every environment variable ftl sets or reads\n"
    "\n"
    "The same, with the job spec's fields, is in the man pages (docs/man/: ftl(1), ftl-COMMAND(1),\n"
    "ftl-job(5), ftl-env(7)) and in docs/cli.md.\n"
    "Exit codes: 0, or 2 for an unknown command or topic (the list is printed on stderr).\n";

/* ---- the subcommand table -------------------------------------------------------------------- */

static int cmd_help(int argc, char **argv);
static int cmd_run(int argc, char **argv);

#ifdef FTL_HAVE_CKPT_CLI
static int cmd_ckpt(int argc, char **argv) {
  if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    fputs(ckpt_help, stdout);
    return FTL_EXIT_OK;
  }
  return ck_ckpt_cli_main(argc, argv);
}
#endif

/* The subcommands. A new one is a row: name, handler, summary, help text, usage line(s). */
typedef struct subcommand {
  const char *name;
  int (*handler)(int argc, char **argv); /* argv[0] is name; returns ftl's exit code */
  const char *summary;                   /* one line for `ftl help` */
  const char *help;                      /* `ftl help NAME` */
  const char *usage;                     /* its usage line(s), each ending in '\n' */
  int internal;                          /* started by ftl itself; listed apart */
} subcommand;

#ifdef FTL_HAVE_EVAL
/* eval's commands, handed the launcher's hooks (a --spec read by the job spec parser, the run's
 * facts from its event log). */
static int cmd_gate(int argc, char **argv) {
  ev_hooks hooks = ln_eval_hooks(NULL);
  return ev_cmd_gate(argc, argv, &hooks);
}

static int cmd_publish(int argc, char **argv) {
  ev_hooks hooks = ln_eval_hooks(NULL);
  return ev_cmd_publish(argc, argv, &hooks);
}
#endif

static const subcommand subcommands[] = {
    {"run", cmd_run, "start every rank of a job, watch it, restart it after failures", run_help,
     "ftl run [OPTIONS] JOB.yaml\nftl run -n N [OPTIONS] -- PROGRAM [ARGS...]\n", 0},
#ifdef FTL_HAVE_CKPT_CLI
    {"ckpt", cmd_ckpt, "list, verify and show a run's checkpoints", ckpt_help,
     "ftl ckpt ls|verify|show RUNDIR [STEP]\n", 0},
#endif
#ifdef FTL_HAVE_EVAL
    {"gate", cmd_gate, "evaluate a run's adapter against the gate locked at submission", ev_gate_help,
     "ftl gate RUNDIR [--spec JOB.yaml] [--json] [--quiet]\n", 0},
    {"publish", cmd_publish, "publish a run whose gate passed and promote it to its channel", ev_publish_help,
     "ftl publish RUNDIR [--spec JOB.yaml] [--json]\n", 0},
#endif
#ifdef FTL_HAVE_PIPELINE_CLI
    {"export", pl_cmd_export, "write a run's final adapter in PEFT's layout", pl_export_help,
     "ftl export RUNDIR [-o DIR] [--base-name NAME]\n", 0},
    {"registry", pl_cmd_registry, "list, route, fetch and check the adapter registry", pl_registry_help,
     "ftl registry ls [NAME] | routes [--channel C] | fetch NAME@VERSION|NAME@CHANNEL DIR | check NAME\n", 0},
    {"promote", pl_cmd_promote, "point a registry channel at a published version", pl_promote_help,
     "ftl promote NAME VERSION --to CHANNEL [--why TEXT]\n", 0},
    {"rollback", pl_cmd_rollback, "move a registry channel back to its previous version", pl_rollback_help,
     "ftl rollback NAME --channel CHANNEL [--why TEXT]\n", 0},
#endif
    {"status", ln_cmd_status, "what a run is doing, or how it ended", ln_status_help,
     "ftl status RUNDIR [--json]\n", 0},
    {"report", ln_cmd_report, "one self-contained HTML page about a run, with plots", ln_report_help,
     "ftl report RUNDIR [-o FILE]\n", 0},
    {"gpus", ln_cmd_gpus, "this host's GPUs and each one's health verdict (NVML)", ln_gpus_help,
     "ftl gpus [--interval MS] [--json] [--quiet]\n", 0},
    {"fleet", ln_cmd_fleet, "a fleet ledger's hosts by recent health, worst first", ln_fleet_help,
     "ftl fleet LEDGER [--days N] [--json]\n", 0},
    {"help", cmd_help, "this list, a command's help, or a topic", help_help,
     "ftl help [COMMAND|exit-codes|env]\n", 0},
    {"version", ln_cmd_version, "print ftl's version and what the build compiled in (CUDA, NCCL, HDF5, MPI)",
     ln_version_help, "ftl version\n", 0},
    {"rank-agent", ln_rank_agent_main, "internal: the process `ftl run` starts on every rank", agent_help,
     "ftl rank-agent -- PROGRAM [ARGS...]\n", 1},
};
enum { N_SUBCOMMANDS = sizeof subcommands / sizeof subcommands[0] };

/* Help topics that are not commands. */
static const struct {
  const char *name, *summary, *text;
} topics[] = {
    {"exit-codes", "what ftl's exit codes mean", exit_codes_help},
    {"env", "every environment variable ftl sets or reads", env_help},
};

/* ---- ftl help and the usage lines ------------------------------------------------------------ */

static const subcommand *find_subcommand(const char *name) {
  for (size_t i = 0; i < N_SUBCOMMANDS; i++)
    if (!strcmp(subcommands[i].name, name)) return &subcommands[i];
  return NULL;
}

/* The usage lines of every public command, as `ftl` with no arguments prints them. */
static void print_usage(FILE *out) {
  const char *lead = "usage: ";
  for (size_t i = 0; i < N_SUBCOMMANDS; i++) {
    if (subcommands[i].internal) continue;
    for (const char *p = subcommands[i].usage; *p;) {
      size_t n = strcspn(p, "\n");
      fprintf(out, "%s%.*s\n", lead, (int)n, p);
      lead = "       ";
      p += n + (p[n] == '\n');
    }
  }
}

static int cmd_help(int argc, char **argv) {
  const char *topic = argc > 1 ? argv[1] : "";
  const subcommand *c = *topic ? find_subcommand(topic) : NULL;
  if (c) {
    fputs(c->help, stdout);
    return FTL_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof topics / sizeof topics[0]; i++) {
    if (!strcmp(topics[i].name, topic)) {
      fputs(topics[i].text, stdout);
      if (topics[i].text == env_help) {
        fputs(env_help_more, stdout);
        fputs(env_reads_help, stdout);
      }
      return FTL_EXIT_OK;
    }
  }
  FILE *out = *topic ? stderr : stdout;
  if (*topic) fprintf(stderr, "ftl help: no command or topic '%s'\n", topic);
  print_usage(out);
  fputs("\nCommands:\n", out);
  for (size_t i = 0; i < N_SUBCOMMANDS; i++)
    if (!subcommands[i].internal) fprintf(out, "  %-12s %s\n", subcommands[i].name, subcommands[i].summary);
  fputs("Topics:\n", out);
  for (size_t i = 0; i < sizeof topics / sizeof topics[0]; i++)
    fprintf(out, "  %-12s %s\n", topics[i].name, topics[i].summary);
  fputs("Internal:\n", out);
  for (size_t i = 0; i < N_SUBCOMMANDS; i++)
    if (subcommands[i].internal) fprintf(out, "  %-12s %s\n", subcommands[i].name, subcommands[i].summary);
  fputs("\n`ftl help COMMAND` or `ftl help TOPIC` for more; docs/cli.md has it all.\n", out);
  return *topic ? FTL_EXIT_USAGE : FTL_EXIT_OK;
}

/* ---- ftl run: the command line --------------------------------------------------------------- */

/* A name that says "job spec": ends in .yaml or .yml. */
static int has_yaml_extension(const char *path) {
  size_t n = strlen(path);
  return (n > 5 && !strcmp(path + n - 5, ".yaml")) || (n > 4 && !strcmp(path + n - 4, ".yml"));
}

/* `ftl run -n 4 /bin/true` (the `--` forgotten): what was meant, and how to say it. ranks < 0: no -n. */
static void say_not_a_spec(const char *what, const char *why, int64_t ranks, int argc, char **argv) {
  char n[32] = "N";
  if (ranks > 0) snprintf(n, sizeof n, "%lld", (long long)ranks);
  fprintf(stderr, "ftl run: %s is not a job spec (%s); to run a program use: ftl run -n %s --", what, why, n);
  for (int i = 0; i < argc; i++) fprintf(stderr, " %s", argv[i]);
  fputc('\n', stderr);
}

/* The job's hostfile, read strictly before anything starts: a bad line, an empty file, or fewer
 * slots in all than the ranks need is a usage error (exit 2) naming the file. */
static int check_hostfile(const ln_job *job) {
  ftl_diag d = {{0}};
  ln_hostfile_host *hosts = NULL;
  size_t count = 0;
  int exit_code = FTL_EXIT_OK;
  ftl_err rc = ln_hostfile_read(job->hostfile, &hosts, &count, &d);
  if (rc) {
    fprintf(stderr, "ftl run: %s\n", d.msg);
    exit_code = rc == FTL_ERR_NOMEM ? FTL_EXIT_INTERNAL : FTL_EXIT_USAGE;
    goto out;
  }
  int slots = ln_hostfile_total_slots(hosts, count);
  int need = job->min_ranks > 0 ? job->min_ranks : job->ranks;
  if (slots < need) {
    fprintf(stderr, "ftl run: hostfile %s holds %d slot%s in all (%zu host%s), fewer than the %d ranks %s\n",
            job->hostfile, slots, slots == 1 ? "" : "s", count, count == 1 ? "" : "s", need,
            job->min_ranks > 0 ? "of min_ranks" : "of the job");
    exit_code = FTL_EXIT_USAGE;
  }
out:
  ftl_free(hosts);
  return exit_code;
}

/* A seconds option of `ftl run`: > 0 (or >= 0 where zero is allowed) and at most max, else it says
 * why on stderr and returns nonzero. The one reading of "seconds" for every such flag. */
static int parse_seconds_opt(const char *flag, const char *arg, int allow_zero, double max, double *out) {
  char *end = NULL;
  double v = strtod(arg, &end);
  if (!end || *end || !(allow_zero ? v >= 0 : v > 0) || v > max) {
    fprintf(stderr, "ftl run: %s: expected seconds %s 0, got '%s'\n", flag, allow_zero ? ">=" : ">", arg);
    return 1;
  }
  *out = v;
  return 0;
}

/* `ftl run`'s options, as given. */
typedef struct run_opts {
  int64_t ranks, grace_ms, max_restarts;
  int standby; /* --standby (1), --no-standby (0), neither (-1) */
  double rdzv_timeout_s, wait_lock_s, progress_interval_s;
  ln_progress_mode progress_mode;
  const char *metrics, *hostfile, *run_dir, *name, *launcher, *rdzv_host;
} run_opts;

enum { RUN_GO_ON = -1 }; /* the step went well: no exit code yet */

/* Reads the options; argv[optind..] is then the job (a spec, or -- PROGRAM ARGS). */
static int parse_run_options(int argc, char **argv, run_opts *ro) {
  enum { OPT_HOSTFILE = 1000, OPT_RUN_DIR, OPT_NAME, OPT_RDZV_TIMEOUT, OPT_LAUNCHER, OPT_RDZV_HOST, OPT_GRACE, OPT_RESTARTS, OPT_WAIT_LOCK, OPT_PROGRESS, OPT_PROGRESS_INTERVAL, OPT_METRICS, OPT_STANDBY, OPT_NO_STANDBY };
  static const struct option options[] = {
      {"ranks", required_argument, NULL, 'n'},
      {"hostfile", required_argument, NULL, OPT_HOSTFILE},
      {"run-dir", required_argument, NULL, OPT_RUN_DIR},
      {"name", required_argument, NULL, OPT_NAME},
      {"rendezvous-timeout", required_argument, NULL, OPT_RDZV_TIMEOUT},
      {"launcher", required_argument, NULL, OPT_LAUNCHER},
      {"rdzv-host", required_argument, NULL, OPT_RDZV_HOST},
      {"kill-grace-ms", required_argument, NULL, OPT_GRACE},
      {"max-restarts", required_argument, NULL, OPT_RESTARTS},
      {"wait-lock", required_argument, NULL, OPT_WAIT_LOCK},
      {"progress", required_argument, NULL, OPT_PROGRESS},
      {"progress-interval", required_argument, NULL, OPT_PROGRESS_INTERVAL},
      {"metrics-textfile", required_argument, NULL, OPT_METRICS},
      {"standby", no_argument, NULL, OPT_STANDBY},
      {"no-standby", no_argument, NULL, OPT_NO_STANDBY},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  *ro = (run_opts){.ranks = -1, .grace_ms = 5000, .max_restarts = -1, .standby = -1, .rdzv_timeout_s = -1, .progress_interval_s = 30,
                   .progress_mode = FTL_PROGRESS_AUTO};
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, "+n:h", options, NULL)) != -1) {
    switch (c) {
      case 'n':
        if (ftl_parse_i64(optarg, 1, 1 << 20, &ro->ranks) != FTL_OK) {
          fprintf(stderr, "ftl run: -n: expected an integer > 0, got '%s'\n", optarg);
          return FTL_EXIT_USAGE;
        }
        break;
      case OPT_HOSTFILE: ro->hostfile = optarg; break;
      case OPT_RUN_DIR: ro->run_dir = optarg; break;
      case OPT_NAME: ro->name = optarg; break;
      case OPT_LAUNCHER: ro->launcher = optarg; break;
      case OPT_RDZV_HOST: ro->rdzv_host = optarg; break;
      case OPT_RDZV_TIMEOUT:
        if (parse_seconds_opt("--rendezvous-timeout", optarg, 0, HUGE_VAL, &ro->rdzv_timeout_s)) return FTL_EXIT_USAGE;
        break;
      case OPT_GRACE:
        if (ftl_parse_i64(optarg, 0, 3600000, &ro->grace_ms) != FTL_OK) {
          fprintf(stderr, "ftl run: --kill-grace-ms: expected milliseconds, got '%s'\n", optarg);
          return FTL_EXIT_USAGE;
        }
        break;
      case OPT_WAIT_LOCK:
        if (parse_seconds_opt("--wait-lock", optarg, 1, 1e6, &ro->wait_lock_s)) return FTL_EXIT_USAGE;
        break;
      case OPT_RESTARTS:
        if (ftl_parse_i64(optarg, 0, 100000, &ro->max_restarts) != FTL_OK) {
          fprintf(stderr, "ftl run: --max-restarts: expected an integer >= 0, got '%s'\n", optarg);
          return FTL_EXIT_USAGE;
        }
        break;
      case OPT_PROGRESS:
        if (ln_progress_parse_mode(optarg, &ro->progress_mode) != FTL_OK) {
          fprintf(stderr, "ftl run: --progress: expected auto, tty, lines or off, got '%s'\n", optarg);
          return FTL_EXIT_USAGE;
        }
        break;
      case OPT_PROGRESS_INTERVAL:
        if (parse_seconds_opt("--progress-interval", optarg, 0, 86400, &ro->progress_interval_s)) return FTL_EXIT_USAGE;
        break;
      case OPT_METRICS: ro->metrics = optarg; break;
      case OPT_STANDBY: ro->standby = 1; break;
      case OPT_NO_STANDBY: ro->standby = 0; break;
      case 'h': fputs(run_help, stdout); return FTL_EXIT_OK;
      default: print_usage(stderr); return FTL_EXIT_USAGE;
    }
  }
  return RUN_GO_ON;
}

/* The job from what follows the options: -- PROGRAM ARGS, or one spec file (-n overrides its ranks). */
static int read_job(int argc, char **argv, const run_opts *ro, ln_job **job) {
  ftl_diag d = {{0}};
  int rest = argc - optind;
  char **rest_argv = argv + optind;
  if (rest >= 1 && strcmp(argv[optind - 1], "--") == 0) {
    /* ftl run -n N -- PROGRAM ARGS */
    if (ro->ranks < 0) {
      fprintf(stderr, "ftl run: -n N is required with -- PROGRAM\n");
      return FTL_EXIT_USAGE;
    }
    if (ln_job_from_argv((int)ro->ranks, rest, rest_argv, job, &d)) {
      fprintf(stderr, "ftl run: %s\n", d.msg);
      return FTL_EXIT_USAGE;
    }
  } else if (rest == 1 || (rest > 1 && ro->ranks > 0 && !has_yaml_extension(rest_argv[0]))) {
    /* A program where a spec belongs (the `--` forgotten) is said so, not read as YAML. */
    if (!has_yaml_extension(rest_argv[0]) && (rest > 1 || core_proc_is_executable(rest_argv[0]))) {
      say_not_a_spec(rest_argv[0], core_proc_is_executable(rest_argv[0]) ? "it is an executable" : "a spec comes alone",
                     ro->ranks, rest, rest_argv);
      return FTL_EXIT_USAGE;
    }
    ftl_err rc = ln_job_parse_file(rest_argv[0], job, &d);
    if (rc) {
      fprintf(stderr, "ftl run: %s\n", d.msg);
      if (!has_yaml_extension(rest_argv[0]))
        say_not_a_spec(rest_argv[0], "it does not read as one", ro->ranks, rest, rest_argv);
      return rc == FTL_ERR_NOMEM ? FTL_EXIT_INTERNAL : FTL_EXIT_USAGE;
    }
    if (ro->ranks > 0) (*job)->ranks = (int)ro->ranks;
  } else {
    fprintf(stderr, "ftl run: expected one JOB.yaml, or -n N -- PROGRAM [ARGS...]\n");
    print_usage(stderr);
    return FTL_EXIT_USAGE;
  }
  return RUN_GO_ON;
}

/* The options that override the job's fields. */
static int apply_overrides(ln_job *job, const run_opts *ro) {
  if (ro->name) {
    char *copy = ftl_strdup(ro->name);
    if (!copy) goto oom;
    ftl_free(job->name);
    job->name = copy;
  }
  if (ro->hostfile) {
    char *copy = ftl_strdup(ro->hostfile);
    if (!copy) goto oom;
    ftl_free(job->hostfile);
    job->hostfile = copy;
  }
  if (ro->max_restarts >= 0) job->max_restarts = (int)ro->max_restarts;
  if (ro->standby >= 0) job->standby = ro->standby;
  if (ro->rdzv_timeout_s > 0) job->rendezvous_timeout_ms = (int64_t)(ro->rdzv_timeout_s * 1000.0);
  if (ro->launcher) {
    if (!strcmp(ro->launcher, "auto")) job->launcher = FTL_LAUNCH_AUTO;
    else if (!strcmp(ro->launcher, "mpirun")) job->launcher = FTL_LAUNCH_MPIRUN;
    else if (!strcmp(ro->launcher, "srun")) job->launcher = FTL_LAUNCH_SRUN;
    else {
      fprintf(stderr, "ftl run: --launcher: expected auto, mpirun or srun, got '%s'\n", ro->launcher);
      return FTL_EXIT_USAGE;
    }
  }
  return RUN_GO_ON;
oom:
  fprintf(stderr, "ftl run: out of memory\n");
  return FTL_EXIT_INTERNAL;
}

/* ---- ftl run: the steps ---------------------------------------------------------------------- */

/* The run directory made and locked, and checked to be this job's or nobody's (runlock.h); run_dir
 * gets its real path, *created whether this launcher made the folder (a refused submission then
 * takes it away again: forget_new_run_dir). */
static int open_run_dir(const ln_job *job, const run_opts *ro, const char *program, ln_run_lock *lock, char *run_dir,
                        int *created) {
  ftl_diag d = {{0}};
  char run_dir_buf[PATH_MAX];
  const char *rd = ro->run_dir ? ro->run_dir : job->run_dir;
  if (!rd) {
    if (ftl_fmt(run_dir_buf, sizeof run_dir_buf, "runs/%s", job->name)) {
      fprintf(stderr, "ftl run: a path is too long\n");
      return FTL_EXIT_INTERNAL;
    }
    rd = run_dir_buf;
  }
  struct stat st;
  *created = stat(rd, &st) != 0;
  /* A run directory that cannot be made is ftl's failure (exit 5), like any file it cannot write. */
  if (ftl_mkdir_p(rd, &d)) {
    fprintf(stderr, "ftl run: cannot write the run directory %s: %s\n", rd, d.msg);
    return FTL_EXIT_INTERNAL;
  }
  if (!realpath(rd, run_dir)) {
    fprintf(stderr, "ftl run: run directory %s: %s\n", rd, strerror(errno));
    return FTL_EXIT_INTERNAL;
  }
  /* One launcher per run directory, for its whole life (docs/formats/ftl-lock.md). */
  ftl_err lock_rc = ln_run_lock_take(run_dir, job, (int64_t)(ro->wait_lock_s * 1000.0), lock, &d);
  if (lock_rc) {
    /* In use by another launcher: refused (2); a lock that cannot be written: 5. */
    fprintf(stderr, "ftl run: %s\n", d.msg);
    return lock_rc == FTL_ERR_STATE || lock_rc == FTL_ERR_TIMEOUT || lock_rc == FTL_ERR_SPEC ? FTL_EXIT_USAGE
                                                                                             : FTL_EXIT_INTERNAL;
  }
  /* One job per run directory, whichever kind came first (docs/formats/job-identity.md). */
  ftl_err job_rc = ln_run_dir_check_job(run_dir, job, program, &d);
  if (job_rc) {
    fprintf(stderr, "ftl run: %s\n", d.msg);
    return job_rc == FTL_ERR_SPEC ? FTL_EXIT_USAGE : FTL_EXIT_INTERNAL;
  }
  return RUN_GO_ON;
}

/* A submission refused before anything started leaves nothing that binds the folder: a run
 * directory this launcher made is removed again (its lock file, then the folder, which holds
 * nothing else: the job's records are written only once it is taken). */
static void forget_new_run_dir(const char *run_dir) {
  char lock[PATH_MAX];
  if (!run_dir[0] || core_rundir_path(lock, sizeof lock, run_dir, FTL_RUNDIR_LOCK)) return;
  (void)core_fs_table.unlink(lock);
  if (core_fs_table.unlinkat(AT_FDCWD, run_dir, AT_REMOVEDIR) != 0)
    FTL_LOG(FTL_LOG_DEBUG, "launcher", "the run directory %s stays: %s", run_dir, strerror(errno));
}

/* The event log and the operator's views drawn from it (launcher/progress.h, prom.h). */
static int open_observers(const ln_job *job, const run_opts *ro, const char *run_dir, ln_events **events,
                          ln_progress **progress, ln_prom **metrics) {
  ftl_diag d = {{0}};
  char events_path[PATH_MAX];
  if (core_rundir_path(events_path, sizeof events_path, run_dir, FTL_RUNDIR_EVENTS)) {
    fprintf(stderr, "ftl run: a path is too long\n");
    return FTL_EXIT_INTERNAL;
  }
  if (ln_events_open(events_path, events, &d)) {
    fprintf(stderr, "ftl run: %s\n", d.msg);
    return FTL_EXIT_INTERNAL;
  }
  const char *metrics_path = ro->metrics ? ro->metrics : job->metrics_textfile;
  if (!metrics_path && getenv("FTL_METRICS_TEXTFILE") && *getenv("FTL_METRICS_TEXTFILE"))
    metrics_path = getenv("FTL_METRICS_TEXTFILE");
  if (ln_progress_create(ro->progress_mode, stderr, isatty(STDERR_FILENO), getenv("TERM"),
                          (int64_t)(ro->progress_interval_s * 1000.0), progress, &d) ||
      ln_events_observe(*events, ln_progress_observe, *progress, &d) ||
      (metrics_path && (ln_prom_create(metrics_path, job->name, metrics, &d) ||
                        ln_events_observe(*events, ln_prom_observe, *metrics, &d)))) {
    fprintf(stderr, "ftl run: %s\n", d.msg);
    return FTL_EXIT_INTERNAL;
  }
  return RUN_GO_ON;
}

/* The job's program, found before anything is launched or retried (a name without '/' on the
 * job's PATH when its env sets one: the PATH the program will have; else on ftl's own), and ftl's
 * own executable (the rank agent). */
static int find_programs(const ln_job *job, char **program, char *exe, size_t exe_size) {
  ftl_diag d = {{0}};
  const char *lookup_path = ln_gang_env_get(job->env, "PATH");
  if (!lookup_path) lookup_path = getenv("PATH");
  if (core_proc_find_program(job->program, lookup_path, 1, program, &d)) {
    fprintf(stderr, "ftl run: %s%s%s\n", job->spec_path ? job->spec_path : "", job->spec_path ? ": field 'program': " : "",
            d.msg);
    return FTL_EXIT_LAUNCH;
  }
  ssize_t exe_len = readlink("/proc/self/exe", exe, exe_size - 1);
  if (exe_len <= 0) {
    fprintf(stderr, "ftl run: cannot find my own executable: %s\n", strerror(errno));
    return FTL_EXIT_INTERNAL;
  }
  exe[exe_len] = '\0';
  return RUN_GO_ON;
}

/* The inputs are hashed (and the gate locked) before any rank starts; a resumed run is checked
 * against that record instead (docs/pipeline.md). Without the pipeline such a job cannot run. */
static int prepare_inputs(ln_job *job, const char *run_dir) {
#ifdef FTL_HAVE_EVAL
  ftl_diag d = {{0}};
  ev_gate_fields fields = ln_job_gate_fields(job);
  ev_rank_vars vars = {0};
  if (ev_submit_prepare(&fields, run_dir, &vars, &d)) {
    fprintf(stderr, "ftl run: %s\n", d.msg);
    return FTL_EXIT_USAGE;
  }
  /* The ranks read their inputs through the snapshot: its path and each input's, in their env. */
  ftl_err rc = ln_job_env_add(job, vars.kv, vars.count, &d);
  ev_rank_vars_free(&vars);
  if (rc) {
    fprintf(stderr, "ftl run: %s\n", d.msg);
    return FTL_EXIT_INTERNAL;
  }
#else
  (void)run_dir;
  if (job->inputs_count || job->eval.program) {
    fprintf(stderr, "ftl run: this ftl was built without the pipeline (libarchive, libcrypto): it cannot run a job "
                    "with inputs: or eval:\n");
    return FTL_EXIT_USAGE;
  }
#endif
  return RUN_GO_ON;
}

/* The run directory recorded as this job's, now that the submission is taken (runlock.h). */
static int adopt_run_dir(const ln_job *job, const char *program, const char *run_dir) {
  ftl_diag d = {{0}};
  if (ln_run_dir_adopt(run_dir, job, program, &d) == FTL_OK) return RUN_GO_ON;
  fprintf(stderr, "ftl run: cannot write the run directory %s: %s\n", run_dir, d.msg);
  return FTL_EXIT_INTERNAL;
}

/* A run whose training finished before this `ftl run` (a rerun, a requeue, a launcher killed after
 * the final commit): nothing is trained again. With nothing left to do, says what the run is and
 * returns its exit code (0 finished or published, 1 its gate failed); RUN_GO_ON when the gate or
 * the publish is left. */
static int say_finished(const ln_job *job, const char *run_dir, const ln_finish *fin) {
  if (!job->eval.program) {
    printf("ftl: already finished: job '%s' trained to its end%s; nothing to do (%s; another --run-dir trains "
           "again)\n",
           job->name, ln_final_committed(run_dir) ? " and committed its final adapter" : "", run_dir);
    return FTL_EXIT_OK;
  }
#ifdef FTL_HAVE_EVAL
  if (fin->published && ev_submit_published(run_dir, fin->registry, fin->name, fin->version)) {
    printf("ftl: already finished: published %s version %s%s%s (registry %s); nothing to do\n", fin->name,
           fin->version, fin->channel[0] ? ", channel " : "", fin->channel, fin->registry);
    return FTL_EXIT_OK;
  }
  if (fin->gate < 0) {
    printf("ftl: already finished: the gate failed (%s %.6g); nothing was published (verdict: %s/verdict.json)\n",
           fin->gate_metric, fin->gate_value, run_dir);
    return FTL_EXIT_JOB_FAILED;
  }
#else
  (void)fin;
#endif
  fprintf(stderr, "ftl: job '%s' finished its training before (final/ committed): %s left\n", job->name,
          fin->gate > 0 ? "the publish is" : "the gate and the publish are");
  return RUN_GO_ON;
}

/* Records what of the end is done (launcher/finish.h); a record that cannot be written only costs
 * a later rerun the work it would have skipped. */
static void store_finish(const char *run_dir, const ln_finish *fin) {
  ftl_diag d = {{0}};
  if (ln_finish_store(run_dir, fin, &d) != FTL_OK)
    FTL_LOG(FTL_LOG_WARN, "launcher", "%s: a rerun will redo what it records", d.msg);
}

/* ---- cmd_run and main ------------------------------------------------------------------------ */

static int cmd_run(int argc, char **argv) {
  /* A closed stdout or stderr (`ftl run ... | head -1`, a tee killed by Ctrl-C) never kills the
   * launcher: its writes there fail and are dropped, and the run goes on to its end, its events
   * and run_end included. mpirun inherits this, so it does not die of the ranks' output either;
   * the rank agent gives the program the default back (launcher/agent.c). */
  signal(SIGPIPE, SIG_IGN);
  run_opts ro;
  ln_run_lock run_lock = FTL_RUN_LOCK_INIT;
  ln_progress *progress = NULL;
  ln_prom *metrics = NULL;
  ln_job *job = NULL;
  ln_events *events = NULL;
  char *program = NULL;
  char exe[PATH_MAX], run_dir[PATH_MAX] = "";
  int created = 0;
  ln_finish fin;
  ftl_diag d = {{0}};
  int exit_code = parse_run_options(argc, argv, &ro);
  if (exit_code != RUN_GO_ON) return exit_code;
  if ((exit_code = read_job(argc, argv, &ro, &job)) != RUN_GO_ON) return exit_code;
  if ((exit_code = apply_overrides(job, &ro)) != RUN_GO_ON) goto out;
  if (job->hostfile && (exit_code = check_hostfile(job)) != FTL_EXIT_OK) goto out;
  if ((exit_code = find_programs(job, &program, exe, sizeof exe)) != RUN_GO_ON) goto out;
  if ((exit_code = open_run_dir(job, &ro, program, &run_lock, run_dir, &created)) != RUN_GO_ON) goto refused;
  if ((exit_code = prepare_inputs(job, run_dir)) != RUN_GO_ON) goto refused;
  if ((exit_code = adopt_run_dir(job, program, run_dir)) != RUN_GO_ON) goto out;
  if (ln_finish_load(run_dir, &fin, &d) != FTL_OK)
    fprintf(stderr, "ftl run: warning: %s; whatever of the job's end it recorded is done again\n", d.msg);
  /* The training is over once final/ is committed (a gated job's only proof of it), or, for a job
   * without a gate, once its ranks all ended well (the record says so). */
  int trained_before = ln_final_committed(run_dir) || (fin.trained && !job->eval.program);
  if (trained_before && (exit_code = say_finished(job, run_dir, &fin)) != RUN_GO_ON) goto out;
  if ((exit_code = open_observers(job, &ro, run_dir, &events, &progress, &metrics)) != RUN_GO_ON) goto out;
  /* Ranks on other hosts reach the launcher by this host's name; on one machine, by loopback. */
  int multi_host = job->hostfile || ln_gang_resolve_kind(job->launcher, getenv("SLURM_JOB_ID")) == FTL_LAUNCH_SRUN;
  const char *rdzv_host = ro.rdzv_host ? ro.rdzv_host : multi_host ? ftl_hostname() : "127.0.0.1";

  ln_events_write(events, "run_start", 0,
                   json_pack("{s:s, s:s, s:i, s:s, s:s, s:I, s:s, s:s, s:b}", "job", job->name, "spec",
                             job->spec_path ? job->spec_path : "", "ranks", job->ranks, "program", program, "spec_hash",
                             job->spec_hash, "pid", (json_int_t)getpid(), "host", ftl_hostname(), "slurm_job_id",
                             getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "", "trained_before", trained_before));
  exit_code = FTL_EXIT_OK;
  if (!trained_before)
    exit_code = ln_run_job(job, run_dir, exe, program, multi_host ? NULL : "127.0.0.1", rdzv_host, (int)ro.grace_ms,
                           events);
  /* Tests: the launcher dies with the training over and not yet recorded (a requeue then). */
  if (exit_code == FTL_EXIT_OK) core_crash_point("run.after_training", -1, -1);
  if (exit_code == FTL_EXIT_OK && !fin.trained) {
    fin.trained = 1;
    fin.trained_wall_us = ftl_wall_us();
    fin.trained_attempt = core_rundir_next_attempt(run_dir) - 1;
    store_finish(run_dir, &fin);
  }
#ifdef FTL_HAVE_EVAL
  /* Trained: the gate, then publish and promote (0 published, 1 gate failed, 5 publishing failed),
   * each recorded as it ends. A gate that passed before is not run again: publish checks its
   * verdict itself. */
  if (exit_code == FTL_EXIT_OK && job->eval.program) {
    ev_finish_result r = {0};
    ev_gate_fields fields = ln_job_gate_fields(job);
    ev_hooks hooks = ln_eval_hooks(events);
    if (!(trained_before && fin.gate > 0)) {
      exit_code = ev_submit_gate(&fields, run_dir, &hooks, &r);
      if (r.gate) {
        fin.gate = r.gate;
        fin.gate_wall_us = ftl_wall_us();
        snprintf(fin.gate_metric, sizeof fin.gate_metric, "%s", r.metric);
        fin.gate_value = r.value;
        store_finish(run_dir, &fin);
      }
    } else {
      fprintf(stderr, "ftl: the gate passed before (%s %.6g; %s/verdict.json): publishing\n", fin.gate_metric,
              fin.gate_value, run_dir);
    }
    if (exit_code == FTL_EXIT_OK) {
      exit_code = ev_submit_publish(&fields, run_dir, &hooks, &r);
      if (r.published) {
        core_crash_point("run.after_publish", -1, -1); /* tests: published, not yet recorded */
        fin.published = 1;
        fin.published_wall_us = ftl_wall_us();
        snprintf(fin.registry, sizeof fin.registry, "%s", r.registry);
        snprintf(fin.name, sizeof fin.name, "%s", r.name);
        snprintf(fin.channel, sizeof fin.channel, "%s", r.channel);
        snprintf(fin.version, sizeof fin.version, "%s", r.version);
        store_finish(run_dir, &fin);
      }
    }
  }
#endif
  ln_events_write(events, "run_end", 0, json_pack("{s:i}", "exit_code", exit_code));
  goto out;
refused:
  if (created) forget_new_run_dir(run_dir);
out:
  ln_progress_destroy(progress); /* clears a status line left on the terminal */
  ln_prom_finish(metrics);     /* the last state, ftl_up 0 */
  ln_prom_destroy(metrics);
  ln_events_close(events);
  ln_run_lock_release(&run_lock);
  ftl_free(program);
  ln_job_destroy(job);
  return exit_code;
}

int main(int argc, char **argv) {
  ftl_log_init_from_env();
  if (argc < 2) {
    print_usage(stderr);
    return FTL_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) cmd = "help";
  if (!strcmp(cmd, "--version")) cmd = "version";
  const subcommand *c = find_subcommand(cmd);
  if (c) return c->handler(argc - 1, argv + 1);
  fprintf(stderr, "ftl: unknown command '%s'\n", cmd);
  print_usage(stderr);
  return FTL_EXIT_USAGE;
}
