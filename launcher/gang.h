/* launcher/gang.h: how a gang is started: the mpirun or srun command line for one attempt,
 * built as an argv (never a shell string), and the lookup of the program to run. Pure functions,
 * unit-tested without launching anything. */
#ifndef FTL_LAUNCHER_GANG_H
#define FTL_LAUNCHER_GANG_H

#include <stddef.h>

#include "ftl/error.h"
#include "launcher/jobspec.h"

typedef struct ftl_gang_opts {
  ftl_launch_kind kind;          /* resolved: FTL_LAUNCH_MPIRUN or FTL_LAUNCH_SRUN */
  int ranks;
  const char *hostfile;          /* NULL: this machine only */
  const char *ftl_exe;           /* absolute path of ftl, run on every rank as the rank agent */
  const char *program;           /* absolute path of the program */
  char *const *args;             /* NULL-terminated */
  char *const *export_names;     /* variables to pass to every rank (mpirun -x), NULL-terminated */
  int running_as_root;
  int cpu_count;                 /* of this machine, to decide on --oversubscribe */
  int sigkill_grace_s;           /* how long mpirun itself waits between TERM and KILL of ranks */
} ftl_gang_opts;

/* AUTO becomes SRUN inside a Slurm allocation (SLURM_JOB_ID set) and MPIRUN elsewhere. */
ftl_launch_kind ftl_gang_resolve_kind(ftl_launch_kind requested, const char *slurm_job_id);

/* Builds the launch argv (NULL-terminated; free with ftl_argv_free). */
ftl_err ftl_gang_build_argv(const ftl_gang_opts *o, char ***argv_out, ftl_diag *d);
void ftl_argv_free(char **argv);

/* Resolves program to an absolute executable path: a name without '/' is looked up on path_env
 * (PATH), a relative path is taken from cwd. Error names the program and why. */
ftl_err ftl_gang_find_program(const char *program, const char *path_env, char **abs_out, ftl_diag *d);

/* The first host of an Open MPI hostfile (where rank 0 lands with the default by-slot mapping),
 * used for MASTER_ADDR. */
ftl_err ftl_gang_first_host(const char *hostfile, char *host, size_t size, ftl_diag *d);

#endif
