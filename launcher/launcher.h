/* launcher/launcher.h: the `ftl` command's internal interface: its exit codes (documented in
 * docs/cli.md and `ftl help exit-codes`), the run of one attempt, and the subcommand entry points. */
#ifndef FTL_LAUNCHER_H
#define FTL_LAUNCHER_H

#include "core/failure_cause.h"
#include "ftl/error.h"
#include "launcher/events.h"
#include "launcher/jobspec.h"
#include "launcher/mfu.h"

/* ftl's own exit codes. Never renumbered. */
enum {
  FTL_EXIT_OK = 0,          /* every rank exited 0 */
  FTL_EXIT_JOB_FAILED = 1,  /* the job failed (after any restarts); ftl names the first failure */
  FTL_EXIT_USAGE = 2,       /* bad command line or job spec: nothing was started */
  FTL_EXIT_LAUNCH = 3,      /* the gang could not be started (program not found, mpirun missing) */
  FTL_EXIT_RDZV = 4,        /* the rendezvous deadline passed with ranks missing, restarts spent */
  FTL_EXIT_INTERNAL = 5,    /* ftl itself failed (run directory not writable, out of memory) */
  FTL_EXIT_PREEMPTED = 75,  /* stopped cleanly on SIGTERM/SIGUSR1: requeue me (EX_TEMPFAIL);
                               `ftl run` on the same run directory resumes */
  FTL_EXIT_SIGINT = 130,    /* stopped by SIGINT (128 + 2); the ranks were stopped too */
  FTL_EXIT_SIGTERM = 143,   /* stopped by SIGTERM (128 + 15) without a clean stop of the ranks */
};

typedef struct ln_attempt_opts {
  const ln_job *job;
  int world_size;           /* ranks of this attempt (job->ranks, fewer after losing hosts) */
  const char *hostfile;     /* this attempt's hostfile (bad hosts left out), or NULL */
  const char *run_dir;      /* absolute */
  int attempt;
  const char *ftl_exe;      /* absolute path of this ftl binary */
  const char *program;      /* absolute path */
  const char *rdzv_bind;    /* address the rendezvous listens on */
  const char *rdzv_host;    /* address ranks use to reach it */
  int kill_grace_ms;        /* TERM -> KILL */
  ln_events *events;
  struct ln_standby *standby; /* the job's standby gang (launcher/standby.h), or NULL: none */
  int standby_launch;       /* these options start a standby gang for `attempt` (FTL_STANDBY=1) */
  char *const *pyrun_argv;  /* a Python program run through launcher/pyrun.py (launcher/pyprog.h), or
                               NULL: the program as it is */
  const char *preload;      /* a standby's pyrun.py imports these before parking (FTL_PRELOAD) */
  struct ln_fleet *fleet;   /* the job's fleet-ledger notes (launcher/fleet.h): the supervisor notes each
                               rank's host and each GPU verdict change there; NULL: none kept */
  const char *gang_hosts;   /* FTL_GANG_HOSTS for the ranks ("host:ranks,..."), or NULL: not set */
} ln_attempt_opts;

typedef enum ln_attempt_outcome {
  FTL_ATTEMPT_SUCCEEDED = 0,
  FTL_ATTEMPT_FAILED = 1,        /* a rank crashed, hung, or its host was lost */
  FTL_ATTEMPT_RDZV_FAILED = 2,
  FTL_ATTEMPT_LAUNCH_FAILED = 3,
  FTL_ATTEMPT_INTERRUPTED = 4,   /* SIGINT, or a stop the ranks did not finish cleanly */
  FTL_ATTEMPT_PREEMPTED = 5,     /* a stop request the ranks honoured: all exited 0 */
} ln_attempt_outcome;

/* What kind of failure ended an attempt (the failure ledger's `cause`): FTL_FAIL_NONE = 0,
 * FTL_FAIL_EXIT, ... in the order of core/failure_cause.h, which also names them. */
typedef enum ln_failure_kind {
#define FTL_FAIL_ENUM_(kind, name, cls) FTL_FAIL_##kind,
  FTL_FAILURE_CAUSE_MAP(FTL_FAIL_ENUM_)
#undef FTL_FAIL_ENUM_
} ln_failure_kind;

/* The ledger's `cause` for kind ("exit_code"); "unknown" for a value outside the table. */
const char *ln_failure_kind_name(ln_failure_kind kind);

enum { LN_MAX_DEGRADED_HOSTS = 16 };

typedef struct ln_attempt_result {
  ln_attempt_outcome outcome;
  ln_failure_kind kind;
  int root_rank;            /* the first failing rank, -1 if none is known */
  char root_host[64];
  int root_host_unblamed;   /* the failure does not point at root_host (a hang where ranks on other
                               hosts stopped at the same point): not left out for it, nor charged
                               with it in the fleet ledger */
  int exit_code;            /* of the root rank's program */
  int signal;               /* that killed it, 0 if none */
  int interrupt_signal;     /* the signal ftl received, if any */
  int retryable;            /* a relaunch could help (not: a program that cannot start) */
  char bad_host[64];        /* a host to leave out of the next attempt, "" if none */
  char bad_host_addrs[512]; /* its IPv4 addresses as its agents reported them, space-separated */
  char suspect_host[64];    /* a straggler's host, "" if none */
  /* Hosts whose latest GPU health report named a degraded GPU (docs/gpu.md): left out of the next
   * attempt when the other hosts still hold every rank (the policy's rule 5b), never to shrink */
  struct {
    char host[64];
    char addrs[512];        /* as bad_host_addrs */
    char why[160];          /* "GPU 1 (GPU-...) is degraded: thermal throttling" */
  } degraded[LN_MAX_DEGRADED_HOSTS];
  int n_degraded;
  int never_started;        /* ranks whose agents had not started when the launch deadline ended
                               the attempt (mpirun may wait silently for a host it cannot reach);
                               0 otherwise */
  int64_t last_step;        /* highest step any rank reported, -1 if none */
  int64_t restored_step;    /* the step the ranks restored, -1 if none reported */
  int64_t committed_step;   /* highest committed checkpoint step reported, -1 if none */
  int joined;               /* ranks that joined the rendezvous (ftl_init): 0 for a program without ftl */
  /* for goodput (milliseconds since the attempt started; -1 when it did not happen) */
  double first_step_ms;     /* all ranks past their first step */
  double started_ms;        /* every rank's agent up: the programs started */
  double failure_ms;        /* the root failure was detected */
  double end_ms;            /* mpirun reaped */
  double detect_lag_ms;     /* root failure happened -> detected (from the agent's clock) */
  double committed_at_ms;   /* when committed_step was committed */
  double ckpt_stall_ms;     /* sum of checkpoint stalls (rank 0) */
  ln_mfu_figure mfu;        /* model FLOPs utilisation at the end (ranks 0: no FLOPs reported; mfu.h) */
  char summary[1024];       /* one sentence for the console */
} ln_attempt_result;

/* Runs one attempt of the job to its end. An error return means ftl could not run the attempt at
 * all (detail in d); how the job itself ended is in *res. */
ftl_err ln_attempt_run(const ln_attempt_opts *o, ln_attempt_result *res, ftl_diag *d);

/* Runs the job: attempts, restarts (budget, back-off, crash loops, bad hosts left out) and the
 * goodput report. Returns ftl's exit code. */
int ln_run_job(const ln_job *job, const char *run_dir, const char *ftl_exe, const char *program,
                const char *rdzv_bind, const char *rdzv_host, int kill_grace_ms, ln_events *events);

int ln_rank_agent_main(int argc, char **argv);

#endif
