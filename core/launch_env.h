/* core/launch_env.h: the launcher-to-rank contract, read once: every variable `ftl run` sets for a
 * rank's process (launcher/attempt_env.c, launcher/gang.c, the rank agent) and every setting of the
 * library a user may give through the environment, parsed into one record
 * (docs/formats/launch-env.md lists them all). ftl_init reads it into its context; the modules
 * take their settings from the context's record (the checkpoint handle at ftl_ckpt_create, the
 * rendezvous at ftl_init) or from their options, never from getenv of their own. Programs that use
 * no ftl_ctx (the rank agent, the cadence's ftl_cadence_load_from_env) read it themselves.
 *
 * Not here: test hooks and fault injection (FTL_FAULT, FTL_CRASH_*: core/fs.c;
 * FTL_CKPT_L2_TCP_FAULT, FTL_CKPT_L2_TCP_ANNOUNCE: checkpoint/ckpt_l2_tcp.c), the log level
 * (FTL_LOG_LEVEL: core/log.c), and the variables the agent gives a program for PyTorch
 * (MASTER_ADDR and the like), which ftl reads only as RANK and WORLD_SIZE here. */
#ifndef FTL_CORE_LAUNCH_ENV_H
#define FTL_CORE_LAUNCH_ENV_H

#include <limits.h>
#include <stdint.h>

#include "ftl/error.h"

/* FTL_GANG_HOSTS's longest value: about 2,000 hosts of short names; a larger gang's is not set. */
#define CORE_GANG_HOSTS_MAX 32767

typedef struct core_launch_env {
  /* The rendezvous: set by `ftl run` for every rank. */
  int present;        /* FTL_RDZV_ADDR is set: started by `ftl run` */
  char addr[300];     /* FTL_RDZV_ADDR host:port */
  char relay[160];    /* FTL_RELAY_ADDR: this host's relay ("@NAME", launcher/relay.h), connected to
                         instead of addr when set; "" otherwise */
  char token[128];    /* FTL_RDZV_TOKEN: the attempt's secret, proved and never sent */
  int64_t timeout_ms; /* FTL_RDZV_TIMEOUT_MS: what is left of the rendezvous deadline at launch */
  int rank, world_size, local_rank, local_world_size; /* RANK, WORLD_SIZE, ... (-1 if absent) */
  int attempt;        /* FTL_ATTEMPT (0 when absent) */
  int has_attempt;    /* FTL_ATTEMPT is set: a process the launcher started, which answers to the fence */
  char run_dir[PATH_MAX];    /* FTL_RUN_DIR */
  char job_spec_hash[65];    /* FTL_JOB_SPEC_HASH, recorded in each checkpoint's manifest */
  char fleet_ledger[PATH_MAX]; /* FTL_FLEET_LEDGER: the fleet's failure ledger, read by the cadence */
  char gang_hosts[CORE_GANG_HOSTS_MAX + 1]; /* FTL_GANG_HOSTS: "host:ranks,..." of this attempt, read by the
                                               cadence (its per-host rates); "" when absent or too long
                                               (warned, never fatal: the cadence then pools) */
  int standby;               /* FTL_STANDBY=1: a rank of the standby gang, which parks in ftl_init */
  int mpi_init_barrier;      /* FTL_MPI_INIT_BARRIER=1: after MPI_Init, wait for every rank to be
                                through it before any MPI message (srun's direct launch) */
  /* The checkpoint levels the job asked for (checkpoint.levels). */
  char ckpt_l1_dir[PATH_MAX]; /* FTL_CKPT_L1_DIR: the L1 root ("": no L1) */
  uint64_t ckpt_l1_max_bytes; /* FTL_CKPT_L1_MAX_BYTES (0: the folder's free space) */
  int ckpt_l2;                /* FTL_CKPT_L2: 0 off, 1 asked for ("1"), 2 "auto" (on with several hosts) */
  /* Settings a user may give (none set by `ftl run`). */
  char backend[8];                 /* FTL_BACKEND: "mpi", "nccl" or "" (chosen by the GPUs seen) */
  int64_t collective_timeout_ms;   /* FTL_COLLECTIVE_TIMEOUT_MS (0: the library's default) */
  int64_t standby_park_timeout_ms; /* FTL_STANDBY_PARK_TIMEOUT_MS (0: the library's default) */
  int ckpt_l2_mpi;                 /* FTL_CKPT_L2_TRANSPORT=mpi: the L2 transfers over MPI, not TCP */
  int ckpt_allow_fresh;            /* FTL_CKPT_ALLOW_FRESH=1: a run directory that committed before may
                                      start from nothing (ftl_ckpt_options.allow_fresh) */
} core_launch_env;

/* Reads every variable of the record from this process's environment now. A malformed value of a
 * variable the launcher sets (a number, a relay address, a value too long) is an error naming the
 * variable; a malformed setting a user gave is logged and its default kept, as before. */
ftl_err core_launch_env_read(core_launch_env *env, ftl_diag *d);

#endif
