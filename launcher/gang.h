/* launcher/gang.h: how a gang is started: the mpirun or srun command line for one attempt,
 * built as an argv (never a shell string), its environment, built as an envp for that attempt
 * alone, and the lookup of the program to run. Pure functions, unit-tested without launching
 * anything. */
#ifndef FTL_LAUNCHER_GANG_H
#define FTL_LAUNCHER_GANG_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"
#include "launcher/jobspec.h"

typedef struct ln_gang_opts {
  ln_launch_kind kind;          /* resolved: FTL_LAUNCH_MPIRUN or FTL_LAUNCH_SRUN */
  int ranks;
  const char *hostfile;          /* NULL: this machine only */
  const char *ftl_exe;           /* absolute path of ftl, run on every rank as the rank agent */
  const char *agent_exe;         /* ftl-rank-agent, run instead of `ftl_exe rank-agent` when not NULL
                                    (ln_gang_agent_exe) */
  const char *program;           /* absolute path of the program */
  char *const *args;             /* NULL-terminated */
  char *const *export_names;     /* variables to pass to every rank (mpirun -x), NULL-terminated */
  int running_as_root;
  int cpu_count;                 /* of this machine, to decide on --oversubscribe */
  int sigkill_grace_s;           /* how long mpirun itself waits between TERM and KILL of ranks */
  int standby;                   /* a standby gang, beside a running step */
  int srun_nodes;                /* srun: the nodes of the attempt's plan (--nodes), its ranks placed by
                                    SLURM_HOSTFILE (--distribution=arbitrary, ln_gang_env.slurm_hostfile);
                                    0: no plan, srun places them */
  char *const *pyrun_argv;       /* a Python program through launcher/pyrun.py (launcher/pyprog.h): the
                                    whole command after `rank-agent --`, in place of program and args;
                                    NULL: the program as it is */
} ln_gang_opts;

/* AUTO becomes SRUN inside a Slurm allocation (SLURM_JOB_ID set) and MPIRUN elsewhere. */
/* Seconds between mpirun's SIGTERM and SIGKILL of the rank agents in its own teardown
 * (odls_base_sigkill_timeout): long enough for a torn-down agent to send its `stopping` word. */
#define FTL_MPIRUN_SIGKILL_GRACE_S 1

ln_launch_kind ln_gang_resolve_kind(ln_launch_kind requested, const char *slurm_job_id);

/* Builds the launch argv (NULL-terminated; free with ln_argv_free). */
ftl_err ln_gang_build_argv(const ln_gang_opts *o, char ***argv_out, ftl_diag *d);
void ln_argv_free(char **argv);

/* A NULL-terminated list of strings built one by one (each copied): the launch command, an
 * environment, the Python runner's command line (pyprog.c). An allocation that fails is remembered
 * and reported once, by ln_argv_finish. */
typedef struct ln_argv_builder {
  char **v;
  size_t n, cap;
  int oom;
} ln_argv_builder;
void ln_argv_push(ln_argv_builder *b, const char *s);
/* Hands the built list to *out: an empty list is {NULL}, never NULL; after a failed allocation
 * the list is freed and the error names what was being built. */
ftl_err ln_argv_finish(ln_argv_builder *b, char ***out, const char *what, ftl_diag *d);

/* What an attempt's gang gets in its environment besides the launcher's own (docs/cli.md). */
typedef struct ln_gang_env {
  const char *rdzv_addr;         /* FTL_RDZV_ADDR: host:port of this attempt's rendezvous */
  const char *rdzv_token;        /* FTL_RDZV_TOKEN: this attempt's token */
  int64_t rdzv_timeout_ms;       /* FTL_RDZV_TIMEOUT_MS */
  const char *run_dir;           /* FTL_RUN_DIR */
  const char *attempt_dir;       /* FTL_ATTEMPT_DIR */
  int attempt;                   /* FTL_ATTEMPT */
  const char *job_name;          /* FTL_JOB_NAME */
  const char *spec_hash;         /* FTL_JOB_SPEC_HASH ("" without a spec file) */
  int64_t kill_grace_ms;         /* FTL_KILL_GRACE_MS */
  int64_t node_timeout_ms;       /* FTL_NODE_TIMEOUT_MS */
  const char *fleet_ledger;      /* FTL_FLEET_LEDGER (NULL: empty) */
  const char *gang_hosts;        /* FTL_GANG_HOSTS: "host:ranks,..." of the attempt, for the cadence's
                                    per-host rates (NULL: empty) */
  int64_t preempt_grace_ms;      /* FTL_PREEMPT_GRACE_MS */
  const char *master_addr;       /* MASTER_ADDR */
  int master_port;               /* MASTER_PORT */
  char *const *job_env;          /* the spec's `env`: "NAME=VALUE", NULL-terminated; may be NULL;
                                    carried for the program, not applied (FTL_GANG_JOB_ENV_PREFIX) */
  int allow_root;                /* add OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1: Open MPI refuses root without */
  const char *mpi_session_base;  /* OMPI_MCA_orte_local_tmpdir_base: the folder under which mpirun keeps
                                    its session directory on this host (NULL: Open MPI's default, /tmp) */
  int standby;                   /* FTL_STANDBY=1: a standby gang, parked in ftl_init until activated */
  const char *ckpt_l1_dir;       /* FTL_CKPT_L1_DIR: the checkpoints' L1 folder ("" or NULL: no L1) */
  int64_t ckpt_l1_max_bytes;     /* FTL_CKPT_L1_MAX_BYTES (0: the folder's free space) */
  int ckpt_l2;                   /* FTL_CKPT_L2: 1 when the job's checkpoint.levels names l2, 0 when
                                    it does not, 2 ("auto": on when the gang spans several hosts) when
                                    the job gives no list (ln_job_ckpt_l2_mode) */
  int relay;                     /* FTL_RELAY: 1 when each host's agents and ranks report through a
                                    relay (launcher/relay.h) */
  int pyrun;                     /* FTL_PYRUN=1: the program runs through launcher/pyrun.py, and the
                                    agent gives it a socket (FTL_PYRUN_FD) */
  const char *preload;           /* FTL_PRELOAD: the modules a standby's pyrun.py imports before it
                                    parks, comma-separated ("" or NULL: none) */
  const char *slurm_hostfile;    /* SLURM_HOSTFILE, srun's task layout (launcher/slurm_alloc.h); NULL:
                                    not set by ftl */
  int direct_launch;             /* FTL_MPI_INIT_BARRIER=1: srun starts the ranks (no mpirun), and
                                    ftl_init holds each rank after MPI_Init until every rank is
                                    through it (rendezvous/rdzv_init.c, mpi_init_barrier) */
} ln_gang_env;

/* The names of the variables ln_gang_build_env sets (NULL-terminated), for mpirun -x. */
extern const char *const ln_gang_env_names[];

/* The job's `env` is for the program alone, not for mpirun, srun or the rank agent (a job's
 * PATH=/nonexistent must not stop mpirun from starting). It travels to the agent as one variable
 * per entry, NAME=VALUE carried as FTL_JOB_ENV_NAME=VALUE (unencoded, so each stays within the
 * kernel's limit on one string and mpirun -x takes it to other hosts like any other), and the
 * agent applies it to the program it starts (ln_gang_program_env). */
#define FTL_GANG_JOB_ENV_PREFIX "FTL_JOB_ENV_"

/* Builds the environment of one attempt's launcher process (mpirun or srun) and so of the rank
 * agents: base (the launcher's own environment, borrowed, less any FTL_JOB_ENV_ variables it
 * inherited), then the variables of e, each replacing an earlier one of the same name, then the
 * job's env under FTL_GANG_JOB_ENV_PREFIX. The launcher never puts an attempt's token or address
 * into its own environment: a child it starts later must not find a dead attempt's rendezvous.
 * Free *envp_out with ln_argv_free. */
ftl_err ln_gang_build_env(char *const *base, const ln_gang_env *e, char ***envp_out, ftl_diag *d);

/* What mpirun must export to every rank (-x NAME): ln_gang_env_names and the carried name of
 * each entry of job_env ("NAME=VALUE", NULL-terminated, may be NULL). Free with ln_argv_free. */
ftl_err ln_gang_export_names(char *const *job_env, char ***names_out, ftl_diag *d);

/* The program's environment, built by the rank agent: agent_env (its own, borrowed) less the
 * carried FTL_JOB_ENV_ variables and mpirun's OMPI_MCA_orte_local_tmpdir_base, then the job's env they carry, then place ("NAME=VALUE": RANK,
 * WORLD_SIZE, ...), each replacing an earlier one of the same name. Free with ln_argv_free. */
ftl_err ln_gang_program_env(char *const *agent_env, char *const *place, char ***envp_out, ftl_diag *d);


/* The value of name in a NULL-terminated envp, or NULL. */
const char *ln_gang_env_get(char *const *envp, const char *name);


/* The first host of an Open MPI hostfile (where rank 0 lands with the default by-slot mapping),
 * used for MASTER_ADDR; the file is read by the strict reader of launcher/hostfile.h. */
ftl_err ln_gang_first_host(const char *hostfile, char *host, size_t size, ftl_diag *d);

/* The rank agent's own binary for ftl at ftl_exe: `ftl-rank-agent` beside it (the build tree), else
 * in ../libexec/ftl/ (installed), when executable there; NULL when neither is (then `ftl
 * rank-agent` runs, the same code with all of ftl's libraries loaded). The path is written to buf.
 * Every host must have ftl at the same path (as it must already for `ftl rank-agent`). */
const char *ln_gang_agent_exe(const char *ftl_exe, char *buf, size_t size);

#endif
