/* launcher/attempt_env.h: what one attempt is on this host, apart from watching it: the token that
 * marks its processes, the command line and environment mpirun or srun is started with (built for
 * this attempt alone: the launcher's own environment never holds an attempt's token), and the sweep
 * that kills whatever still carries the token once the attempt is over. supervise.c uses them. */
#ifndef FTL_LAUNCHER_ATTEMPT_ENV_H
#define FTL_LAUNCHER_ATTEMPT_ENV_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "ftl/error.h"
#include "launcher/launcher.h"

/* A fresh token for attempt_no ("<32 hex digits>-a<N>": 128 bits from getrandom), the attempt's
 * secret: the job's processes get it in their environment and prove it on the wire, never send it. */
ftl_err ln_attempt_token(int attempt_no, char *buf, size_t size);

/* 1 unless `ftl run` was started with FTL_RELAY=0: each host's agents and ranks report through its
 * relay (launcher/relay.h), one connection per host instead of two per rank. */
int ln_relay_on(void);

/* Kills every process on this host whose environment carries FTL_RDZV_TOKEN=token: the program's
 * grandchildren that left its process group, or a rank that mpirun failed to reap. Returns how
 * many it killed. */
int ln_sweep_token(const char *token);

/* How many processes on this host carry the token outside process group spare_group (mpirun's:
 * what is left of the gang once mpirun is ended, a host's relay in its own session among them). */
int ln_token_holders(const char *token, pid_t spare_group);

/* What mpirun or srun is started with: its argv, and the ranks' environment (envp) with the names
 * it exports (mpirun -x). */
typedef struct ln_gang_launch {
  ln_launch_kind kind;
  char **argv, **exports, **envp;
  /* mpirun's session folder base on this host (Open MPI's orte_local_tmpdir_base), a folder of
   * this gang's own, $TMPDIR/ftl-mpirun-... (core/owned_dir.h; "" under srun or when none could
   * be made). mpirun removes its session directory when it exits by itself, but ftl ends some
   * gangs with SIGKILL (a standby at the run's end, a warm restart's old gang), and each such
   * mpirun left about 8 MB in /tmp. */
  char session_base[PATH_MAX];
} ln_gang_launch;

/* Builds L for attempt o (its folder attempt_dir; the rendezvous at o->rdzv_host:rdzv_port, with
 * token). Free with ln_gang_launch_free, also after a failure, and only once the gang's mpirun is
 * reaped: the free removes L->session_base. */
ftl_err ln_gang_launch_build(const ln_attempt_opts *o, const char *attempt_dir, int rdzv_port, const char *token,
                             ln_gang_launch *L, ftl_diag *d);

void ln_gang_launch_free(ln_gang_launch *L);

/* Moves from's session folder to to (a standby gang taken over by an attempt): to removes it. */
void ln_gang_launch_move_session(ln_gang_launch *from, ln_gang_launch *to);

#endif
