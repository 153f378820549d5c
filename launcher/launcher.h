/* launcher/launcher.h: the `ftl` command's internal interface: its exit codes (documented in
 * docs/cli.md and `ftl help exit-codes`), the run of one attempt, and the subcommand entry points. */
#ifndef FTL_LAUNCHER_H
#define FTL_LAUNCHER_H

#include "ftl/error.h"
#include "launcher/events.h"
#include "launcher/jobspec.h"

/* ftl's own exit codes. Never renumbered. */
enum {
  FTL_EXIT_OK = 0,          /* every rank exited 0 */
  FTL_EXIT_JOB_FAILED = 1,  /* a rank failed (exit code or signal); ftl names the first */
  FTL_EXIT_USAGE = 2,       /* bad command line or job spec: nothing was started */
  FTL_EXIT_LAUNCH = 3,      /* the gang could not be started (program not found, mpirun missing) */
  FTL_EXIT_RDZV = 4,        /* the rendezvous deadline passed with ranks missing */
  FTL_EXIT_INTERNAL = 5,    /* ftl itself failed (run directory not writable, out of memory) */
  FTL_EXIT_SIGINT = 130,    /* stopped by SIGINT (128 + 2); the ranks were stopped too */
  FTL_EXIT_SIGTERM = 143,   /* stopped by SIGTERM (128 + 15) */
};

typedef struct ftl_attempt_opts {
  const ftl_job *job;
  const char *run_dir;      /* absolute */
  int attempt;
  const char *ftl_exe;      /* absolute path of this ftl binary */
  const char *program;      /* absolute path */
  const char *rdzv_bind;    /* address the rendezvous listens on */
  const char *rdzv_host;    /* address ranks use to reach it */
  int kill_grace_ms;        /* TERM -> KILL */
  ftl_events *events;
} ftl_attempt_opts;

typedef enum ftl_attempt_outcome {
  FTL_ATTEMPT_SUCCEEDED = 0,
  FTL_ATTEMPT_RANK_FAILED = 1,
  FTL_ATTEMPT_RDZV_FAILED = 2,
  FTL_ATTEMPT_LAUNCH_FAILED = 3,
  FTL_ATTEMPT_INTERRUPTED = 4,
} ftl_attempt_outcome;

typedef struct ftl_attempt_result {
  ftl_attempt_outcome outcome;
  int root_rank;            /* the first failing rank, -1 if none is known */
  char root_host[64];
  int exit_code;            /* of the root rank's program */
  int signal;               /* that killed it, 0 if none */
  int interrupt_signal;     /* for FTL_ATTEMPT_INTERRUPTED */
  char summary[1024];       /* one sentence for the console */
} ftl_attempt_result;

/* Runs one attempt of the job to its end. An error return means ftl could not run the attempt at
 * all (detail in d); how the job itself ended is in *res. */
ftl_err ftl_attempt_run(const ftl_attempt_opts *o, ftl_attempt_result *res, ftl_diag *d);

int ftl_rank_agent_main(int argc, char **argv);

#endif
