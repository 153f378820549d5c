/* launcher/policy.h: the restart policy as a pure decision. Given the job's limits, the history of
 * the attempts so far and how the last one ended, it says what happens next: restart after a
 * back-off of N ms (possibly with a host left out, possibly with fewer ranks), or stop with an exit
 * code and a reason. It starts nothing, sleeps for nothing and writes nothing: run.c carries the
 * decision out (the ledger, the events, the hostfile, the back-off), so every rule below is
 * unit-tested with a table (tests/launcher/test_policy.c).
 *
 * The rules, in the order they are applied after an attempt (docs/fault-tolerance.md):
 *   1. success, a clean preemption (75), an interruption (130/143) and a gang that cannot be
 *      launched (3) end the job; so does a failure while ftl was stopping (143: never relaunch a
 *      job the scheduler is taking away);
 *   2. a failure a restart cannot fix (the program cannot start) ends the job;
 *   3. a crash loop (restart.crash_loop failures in a row, none past the previous one's progress,
 *      judged by committed checkpoints when there are any) ends the job with a report;
 *   4. the restart budget (restart.max_restarts) is the whole job's;
 *   5. a host blamed for the failure (lost, holding a hung rank, or a straggler's host whose rank
 *      failed) is left out; spares take its place, or the gang shrinks down to min_ranks, or the
 *      job stops when neither is possible;
 *   5b. a host whose latest GPU health report named a degraded GPU (thermal throttling, a corrected
 *      ECC storm, a pending remap: docs/gpu.md) is left out too, but only while the hosts left still
 *      hold every rank: a spare takes its place; a degraded GPU still computes, so it never costs
 *      the gang a rank (it is kept, and the decision says so);
 *   6. the back-off doubles after each failure up to restart.max_backoff_s, and starts over after
 *      an attempt that got further than the previous failure.
 * Not thread-safe state is kept by the caller; every function here is reentrant. */
#ifndef FTL_LAUNCHER_POLICY_H
#define FTL_LAUNCHER_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/launcher.h"

/* The job's limits, as the policy needs them (ln_policy_config_of fills it from a job). */
typedef struct ln_policy_config {
  int ranks;              /* what the job asks for */
  int min_ranks;          /* fewest ranks to continue with; 0 means exactly `ranks` */
  int max_restarts;       /* restart budget of the whole job */
  int crash_loop;         /* failures in a row without progress that stop the job */
  int64_t backoff_ms;     /* first pause before a relaunch */
  int64_t max_backoff_ms; /* cap of the doubling pause */
  int have_hostfile;      /* the job runs on a host plan: a hostfile's hosts, or under srun the Slurm
                             allocation's nodes (run.c sets it; else: this host alone) */
} ln_policy_config;

ln_policy_config ln_policy_config_of(const ln_job *job);

/* One line of the job's hostfile, or one node of the Slurm allocation ("NODE slots=TASKS"). */
typedef struct ln_policy_host {
  char name[256];   /* host name or address, as the hostfile writes it */
  char line[1024];  /* the line as written, so other options (max_slots) pass through */
  int slots;
  int bad;          /* left out of later attempts */
} ln_policy_host;

/* What the policy remembers from one attempt to the next. */
typedef struct ln_policy_state {
  int restarts;            /* relaunches so far */
  int same_step_failures;  /* failures in a row that got no further than the one before */
  int64_t prev_fail_step;  /* progress at the last failure that got further; INT64_MIN: none */
  int64_t backoff_ms;      /* the pause before the next relaunch */
  char suspect[64];        /* the last straggler's host, "" if none */
} ln_policy_state;

void ln_policy_state_init(ln_policy_state *s, const ln_policy_config *cfg);

typedef enum ln_policy_action {
  FTL_POLICY_STOP = 0,     /* end the job with exit_code */
  FTL_POLICY_RESTART = 1,  /* relaunch after backoff_ms with world_size ranks */
} ln_policy_action;

/* Why the job stops (FTL_POLICY_STOP), or FTL_STOP_NONE for a restart. */
typedef enum ln_policy_stop {
  FTL_STOP_NONE = 0,
  FTL_STOP_SUCCEEDED,      /* every rank exited 0 */
  FTL_STOP_PREEMPTED,      /* the ranks stopped cleanly on a preemption: 75 */
  FTL_STOP_INTERRUPTED,    /* SIGINT (130), SIGTERM/SIGHUP (143) */
  FTL_STOP_CANNOT_LAUNCH,  /* mpirun/srun could not be started: 3 */
  FTL_STOP_WHILE_STOPPING, /* a rank failed while ftl was stopping the job: 143 */
  FTL_STOP_NOT_RETRYABLE,  /* the program cannot start: 3; else 1 */
  FTL_STOP_CRASH_LOOP,
  FTL_STOP_BUDGET,         /* restart.max_restarts spent */
  FTL_STOP_NO_HOSTS,       /* the hosts left hold fewer slots than min_ranks (or ranks) */
} ln_policy_stop;

const char *ln_policy_stop_name(ln_policy_stop why);

typedef struct ln_policy_decision {
  ln_policy_action action;
  ln_policy_stop why;
  int exit_code;             /* STOP: ftl's exit code */
  int64_t backoff_ms;        /* RESTART: the pause before the next attempt */
  int world_size;            /* RESTART: ranks of the next attempt (fewer than `ranks`: shrunk) */
  char exclude_host[64];     /* a host blamed for this failure, "" if none (see excluded) */
  int excluded;              /* hostfile lines that exclude_host newly leaves out */
  int slots;                 /* slots the remaining hosts hold (hostfile jobs) */
  /* Rule 5b: each degraded host of res->degraded, in its order, with what was decided. */
  struct {
    int of;                  /* index into res->degraded */
    int left_out;            /* 1: left out (a spare takes its place); 0: kept, no spare */
  } degraded[LN_MAX_DEGRADED_HOSTS];
  int n_degraded;
  char message[1400];        /* one line for the console, without "ftl: " and the newline; for a
                                restart, what follows "attempt N " */
  ln_policy_state next;     /* the history including this attempt */
} ln_policy_decision;

/* Decides what follows an attempt that ended as res. hosts[0..nhosts) is the hostfile plan
 * (nhosts may be 0); it is read, not changed: ln_policy_apply_hosts carries out an exclusion.
 * job_name and run_dir are only quoted in the message. */
void ln_policy_decide(const ln_policy_config *cfg, const ln_policy_state *history, const ln_attempt_result *res,
                       const ln_policy_host *hosts, size_t nhosts, const char *job_name, const char *run_dir,
                       ln_policy_decision *out);

/* Marks the hosts the decision leaves out as bad (the blamed host and the degraded ones it leaves
 * out). */
void ln_policy_apply_hosts(const ln_policy_decision *dec, const ln_attempt_result *res, ln_policy_host *hosts,
                            size_t nhosts);

/* The ranks an attempt gets on the hosts not left out: `ranks`, or fewer down to min_ranks.
 * Returns 0 and sets *world, or -1 when the slots left are too few (*slots says how many). */
int ln_policy_world_size(const ln_policy_config *cfg, const ln_policy_host *hosts, size_t nhosts, int *world,
                          int *slots);

/* A hostfile may name a host by its name or by one of its addresses (space-separated). */
int ln_policy_host_matches(const char *entry, const char *name, const char *addrs);

/* ftl's exit code when sig arrives during a back-off: nothing runs then and the last commit is on
 * disk, so SIGTERM/SIGUSR1 are a clean preemption (75); SIGINT is 130, SIGHUP 143. */
int ln_policy_backoff_signal_exit(int sig);

#endif
