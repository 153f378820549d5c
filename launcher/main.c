/* launcher/main.c: the `ftl` command: argument parsing, the run directory, and exit codes.
 * Subcommands: run, ckpt, help, version, and the internal rank-agent. Only this file chooses
 * exit codes; everything below it returns ftl_err. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftl/core.h"
#include "ftl/ftl.h"
#include "launcher/gang.h"
#include "launcher/launcher.h"

#ifdef FTL_HAVE_CKPT_CLI
#include "checkpoint/ckpt_cli.h"
#endif

static const char usage_text[] =
    "usage: ftl run [OPTIONS] JOB.yaml\n"
    "       ftl run -n N [OPTIONS] -- PROGRAM [ARGS...]\n"
    "       ftl ckpt ls|verify|show RUNDIR [STEP]\n"
    "       ftl help [run|exit-codes|env]\n"
    "       ftl version\n";

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
    "      --name NAME             job name for a command-line job (default: the program's name)\n"
    "      --rendezvous-timeout S  seconds every rank has to reach ftl_init (default 300)\n"
    "      --launcher KIND         auto | mpirun | srun (default auto: srun inside Slurm)\n"
    "      --rdzv-host ADDR        address ranks use to reach this launcher (default 127.0.0.1,\n"
    "                              or this host's name with a hostfile)\n"
    "      --kill-grace-ms MS      between SIGTERM and SIGKILL when the gang is ended (default 5000)\n"
    "      --max-restarts N        restart budget for the whole job (overrides restart.max_restarts; default 3)\n"
    "\n"
    "The run directory holds job.yaml (a copy of the spec), events.jsonl (docs/formats/events.md)\n"
    "and one attempt-NNNN/ folder per attempt with rank-NNNNN.out/.err/.exit.json.\n"
    "Every rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and\n"
    "the FTL_* variables listed by `ftl help env`.\n";

static const char exit_codes_help[] =
    "ftl exit codes:\n"
    "  0    every rank exited 0\n"
    "  1    the job failed (restarts spent, crash loop, or not restartable); the first failure is named\n"
    "  2    bad command line or job spec: nothing was started\n"
    "  3    the gang could not be started (program or mpirun/srun not found)\n"
    "  4    the rendezvous deadline passed with ranks missing (they are named)\n"
    "  5    ftl itself failed (run directory not writable, out of memory)\n"
    "  75   preempted (SIGTERM/SIGUSR1): ranks stopped cleanly; requeue, `ftl run` resumes\n"
    "  130  stopped by SIGINT, 143 stopped by SIGTERM/SIGHUP without a clean stop of the ranks\n";

static const char env_help[] =
    "Variables every rank gets from `ftl run`:\n"
    "  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE   as torchrun sets them\n"
    "  MASTER_ADDR, MASTER_PORT                         rank 0's host and a free port for the program's own use\n"
    "  FTL_RDZV_ADDR, FTL_RDZV_TOKEN                    the launcher's rendezvous and this attempt's token\n"
    "  FTL_RDZV_TIMEOUT_MS                              the rendezvous deadline\n"
    "  FTL_RUN_DIR, FTL_ATTEMPT, FTL_ATTEMPT_DIR        where this run and attempt keep their files\n"
    "  FTL_JOB_NAME, FTL_JOB_SPEC_HASH                  the job's name and the XXH3-128 of its spec\n"
    "  FTL_KILL_GRACE_MS                                SIGTERM -> SIGKILL grace when the gang is ended\n"
    "Variables ftl reads:\n"
    "  FTL_LOG_LEVEL=error|warn|info|debug             log verbosity (default info)\n"
    "  FTL_BACKEND=auto|mpi|nccl                       force the collective backend in ftl_init\n"
    "  FTL_COLLECTIVE_TIMEOUT_MS                        deadline of one collective on the GPU path\n";

static int cmd_help(int argc, char **argv) {
  const char *topic = argc > 1 ? argv[1] : "";
  if (!strcmp(topic, "run")) fputs(run_help, stdout);
  else if (!strcmp(topic, "exit-codes")) fputs(exit_codes_help, stdout);
  else if (!strcmp(topic, "env")) fputs(env_help, stdout);
  else {
    fputs(usage_text, stdout);
    fputs("\nSee `ftl help run`, `ftl help exit-codes`, `ftl help env` and docs/cli.md.\n", stdout);
  }
  return FTL_EXIT_OK;
}

/* Keeps a copy of the spec in the run directory. A run directory already used by a different
 * spec is refused: mixing two jobs' checkpoints and logs would cost someone their data. */
static ftl_err adopt_run_dir(const char *run_dir, const ftl_job *job, ftl_diag *d) {
  ftl_err rc = ftl_mkdir_p(run_dir, d);
  if (rc) return rc;
  char path[PATH_MAX];
  if (ftl_fmt(path, sizeof path, "%s/job.yaml", run_dir)) return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long");
  if (!job->spec_path) return FTL_OK;
  char *spec = NULL, *existing = NULL;
  size_t spec_len = 0, existing_len = 0;
  rc = ftl_read_file(job->spec_path, 1 << 20, &spec, &spec_len, d);
  if (rc) goto out;
  ftl_diag ignored;
  if (ftl_read_file(path, 1 << 20, &existing, &existing_len, &ignored) == FTL_OK) {
    if (existing_len != spec_len || memcmp(existing, spec, spec_len) != 0) {
      rc = ftl_diag_fail(d, FTL_ERR_SPEC,
                         "run directory %s belongs to a different job spec (its job.yaml differs from %s); "
                         "use another --run-dir or remove it",
                         run_dir, job->spec_path);
    }
    goto out;
  }
  rc = ftl_write_file_atomic(path, spec, spec_len, d);
out:
  ftl_free(spec);
  ftl_free(existing);
  return rc;
}

static int cmd_run(int argc, char **argv) {
  enum { OPT_HOSTFILE = 1000, OPT_RUN_DIR, OPT_NAME, OPT_RDZV_TIMEOUT, OPT_LAUNCHER, OPT_RDZV_HOST, OPT_GRACE, OPT_RESTARTS };
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
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int64_t ranks = -1, grace_ms = 5000, max_restarts = -1;
  double rdzv_timeout_s = -1;
  const char *hostfile = NULL, *run_dir_opt = NULL, *name = NULL, *launcher = NULL, *rdzv_host = NULL;
  ftl_diag d = {{0}};
  ftl_job *job = NULL;
  ftl_events *events = NULL;
  char *program = NULL;
  int exit_code = FTL_EXIT_USAGE;
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, "+n:h", options, NULL)) != -1) {
    switch (c) {
      case 'n':
        if (ftl_parse_i64(optarg, 1, 1 << 20, &ranks) != FTL_OK) {
          fprintf(stderr, "ftl run: -n: expected an integer > 0, got '%s'\n", optarg);
          return FTL_EXIT_USAGE;
        }
        break;
      case OPT_HOSTFILE: hostfile = optarg; break;
      case OPT_RUN_DIR: run_dir_opt = optarg; break;
      case OPT_NAME: name = optarg; break;
      case OPT_LAUNCHER: launcher = optarg; break;
      case OPT_RDZV_HOST: rdzv_host = optarg; break;
      case OPT_RDZV_TIMEOUT: {
        char *end = NULL;
        rdzv_timeout_s = strtod(optarg, &end);
        if (!end || *end || !(rdzv_timeout_s > 0)) {
          fprintf(stderr, "ftl run: --rendezvous-timeout: expected seconds > 0, got '%s'\n", optarg);
          return FTL_EXIT_USAGE;
        }
        break;
      }
      case OPT_GRACE:
        if (ftl_parse_i64(optarg, 0, 3600000, &grace_ms) != FTL_OK) {
          fprintf(stderr, "ftl run: --kill-grace-ms: expected milliseconds, got '%s'\n", optarg);
          return FTL_EXIT_USAGE;
        }
        break;
      case OPT_RESTARTS:
        if (ftl_parse_i64(optarg, 0, 100000, &max_restarts) != FTL_OK) {
          fprintf(stderr, "ftl run: --max-restarts: expected an integer >= 0, got '%s'\n", optarg);
          return FTL_EXIT_USAGE;
        }
        break;
      case 'h': fputs(run_help, stdout); return FTL_EXIT_OK;
      default: fputs(usage_text, stderr); return FTL_EXIT_USAGE;
    }
  }
  int rest = argc - optind;
  char **rest_argv = argv + optind;
  if (rest >= 1 && strcmp(argv[optind - 1], "--") == 0) {
    /* ftl run -n N -- PROGRAM ARGS */
    if (ranks < 0) {
      fprintf(stderr, "ftl run: -n N is required with -- PROGRAM\n");
      return FTL_EXIT_USAGE;
    }
    if (ftl_job_from_argv((int)ranks, rest, rest_argv, &job, &d)) {
      fprintf(stderr, "ftl run: %s\n", d.msg);
      return FTL_EXIT_USAGE;
    }
  } else if (rest == 1) {
    ftl_err rc = ftl_job_parse_file(rest_argv[0], &job, &d);
    if (rc) {
      fprintf(stderr, "ftl run: %s\n", d.msg);
      return FTL_EXIT_USAGE;
    }
    if (ranks > 0) job->ranks = (int)ranks;
  } else {
    fprintf(stderr, "ftl run: expected one JOB.yaml, or -n N -- PROGRAM [ARGS...]\n%s", usage_text);
    return FTL_EXIT_USAGE;
  }
  if (name) {
    char *copy = ftl_strdup(name);
    if (!copy) goto oom;
    ftl_free(job->name);
    job->name = copy;
  }
  if (hostfile) {
    char *copy = ftl_strdup(hostfile);
    if (!copy) goto oom;
    ftl_free(job->hostfile);
    job->hostfile = copy;
  }
  if (max_restarts >= 0) job->max_restarts = (int)max_restarts;
  if (rdzv_timeout_s > 0) job->rendezvous_timeout_ms = (int64_t)(rdzv_timeout_s * 1000.0);
  if (launcher) {
    if (!strcmp(launcher, "auto")) job->launcher = FTL_LAUNCH_AUTO;
    else if (!strcmp(launcher, "mpirun")) job->launcher = FTL_LAUNCH_MPIRUN;
    else if (!strcmp(launcher, "srun")) job->launcher = FTL_LAUNCH_SRUN;
    else {
      fprintf(stderr, "ftl run: --launcher: expected auto, mpirun or srun, got '%s'\n", launcher);
      goto out;
    }
  }

  /* A program that cannot start is found here, before anything is launched or retried. */
  if (ftl_gang_find_program(job->program, getenv("PATH"), &program, &d)) {
    fprintf(stderr, "ftl run: %s%s%s\n", job->spec_path ? job->spec_path : "", job->spec_path ? ": field 'program': " : "",
            d.msg);
    exit_code = FTL_EXIT_LAUNCH;
    goto out;
  }
  char exe[PATH_MAX];
  ssize_t exe_len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (exe_len <= 0) {
    fprintf(stderr, "ftl run: cannot find my own executable: %s\n", strerror(errno));
    exit_code = FTL_EXIT_INTERNAL;
    goto out;
  }
  exe[exe_len] = '\0';

  char run_dir_buf[PATH_MAX], run_dir[PATH_MAX];
  const char *rd = run_dir_opt ? run_dir_opt : job->run_dir;
  if (!rd) {
    if (ftl_fmt(run_dir_buf, sizeof run_dir_buf, "runs/%s", job->name)) goto toolong;
    rd = run_dir_buf;
  }
  if (adopt_run_dir(rd, job, &d)) {
    fprintf(stderr, "ftl run: %s\n", d.msg);
    exit_code = FTL_EXIT_USAGE;
    goto out;
  }
  if (!realpath(rd, run_dir)) {
    fprintf(stderr, "ftl run: run directory %s: %s\n", rd, strerror(errno));
    exit_code = FTL_EXIT_INTERNAL;
    goto out;
  }
  char events_path[PATH_MAX];
  if (ftl_fmt(events_path, sizeof events_path, "%s/events.jsonl", run_dir)) goto toolong;
  if (ftl_events_open(events_path, &events, &d)) {
    fprintf(stderr, "ftl run: %s\n", d.msg);
    exit_code = FTL_EXIT_INTERNAL;
    goto out;
  }
  /* Ranks on other hosts reach the launcher by this host's name; on one machine, by loopback. */
  int multi_host = job->hostfile || ftl_gang_resolve_kind(job->launcher, getenv("SLURM_JOB_ID")) == FTL_LAUNCH_SRUN;
  if (!rdzv_host) rdzv_host = multi_host ? ftl_hostname() : "127.0.0.1";

  ftl_events_write(events, "run_start", 0,
                   json_pack("{s:s, s:s, s:i, s:s, s:s}", "job", job->name, "spec", job->spec_path ? job->spec_path : "",
                             "ranks", job->ranks, "program", program, "spec_hash", job->spec_hash));
  exit_code = ftl_run_job(job, run_dir, exe, program, multi_host ? NULL : "127.0.0.1", rdzv_host, (int)grace_ms, events);
  ftl_events_write(events, "run_end", 0, json_pack("{s:i}", "exit_code", exit_code));
  goto out;
toolong:
  fprintf(stderr, "ftl run: a path is too long\n");
  exit_code = FTL_EXIT_INTERNAL;
  goto out;
oom:
  fprintf(stderr, "ftl run: out of memory\n");
  exit_code = FTL_EXIT_INTERNAL;
out:
  ftl_events_close(events);
  ftl_free(program);
  ftl_job_destroy(job);
  return exit_code;
}

int main(int argc, char **argv) {
  ftl_log_init_from_env();
  if (argc < 2) {
    fputs(usage_text, stderr);
    return FTL_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
  if (!strcmp(cmd, "rank-agent")) return ftl_rank_agent_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) return cmd_help(argc - 1, argv + 1);
  if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
    printf("ftl %s\n", FTL_VERSION_STRING);
    return FTL_EXIT_OK;
  }
#ifdef FTL_HAVE_CKPT_CLI
  if (!strcmp(cmd, "ckpt")) return ftl_ckpt_cli_main(argc - 1, argv + 1);
#endif
  fprintf(stderr, "ftl: unknown command '%s'\n%s", cmd, usage_text);
  return FTL_EXIT_USAGE;
}
