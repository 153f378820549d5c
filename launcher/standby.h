/* launcher/standby.h: the standby gang (docs/fault-tolerance.md, "Warm restarts").
 *
 * While an attempt runs, ftl keeps a second gang of the same program on the same placement,
 * started the same way (mpirun with the attempt's hostfile, or srun) with FTL_STANDBY=1: its ranks
 * run the program's own start-up and MPI_Init, then park inside ftl_init on the launcher's socket
 * (rdzv_init.c), and its agents hold the program's output and write nothing under the run
 * directory (agent.c). It is no part of any attempt. When the attempt fails and the placement is
 * unchanged, the next attempt takes the standby over instead of starting cold
 * (ln_standby_take): the launcher moves the fence (core/fence.h), then activates the parked ranks.
 *
 * A standby that cannot serve (a lost or excluded host, a world size that changed) is dropped and
 * the cold path runs; one that dies is started again after a back-off and never fails the job; a
 * program whose standby ranks keep ending before they park has its standby turned off for the run.
 * One owner: run.c holds the ln_standby for the whole job; supervise.c services it in its loop. */
#ifndef FTL_LAUNCHER_STANDBY_H
#define FTL_LAUNCHER_STANDBY_H

#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "core/proc.h"
#include "launcher/attempt_env.h"
#include "launcher/launcher.h"
#include "rendezvous/server.h"

/* Standby ranks that end before they park this many times in a row turn the standby off. */
#define LN_STANDBY_MAX_EARLY_EXITS 3
/* Deaths of any kind in a row after which the standby is turned off for the run. */
#define LN_STANDBY_MAX_DEATHS 10

typedef struct ln_standby {
  int enabled;            /* restart.standby and restarts allowed, and not turned off since */
  ln_events *events;
  /* the gang, while live */
  int live;
  int attempt;            /* the attempt it would become */
  int world;
  char hostfile[PATH_MAX]; /* "" for this machine only */
  char token[96];
  rz_rdzv_server *server;
  core_proc gang;
  ln_gang_launch launch;
  json_t **hello;         /* per rank: the agent's hello, replayed to the attempt that takes it */
  long *rss_kb;           /* per rank: the parked program's resident memory, as its agent says */
  char *parked_rank;      /* per rank: parked */
  int agents_up, parked, announced;
  int64_t start_ms, parked_ms;
  int doomed;             /* lost during the server's turn: ended after it */
  char doom_reason[300];
  int ever_parked;        /* some standby of this run parked */
  /* restarts of a standby that died */
  int early_exits, deaths;
  int64_t retry_at_ms;
  int64_t next_ping_ms;
  int ping_ms;              /* the gang's cadence (ln_detect_cadence), as the attempt's */
  /* A Python program that does not call ftl_init (launcher/pyprog.h): its standby runs pyrun.py,
   * which imports `preload` (restart.preload, then what the running attempt's rank reported it
   * imported at start-up) and parks; preloading says the live gang is such a one. */
  int preloading;
  char preload[16384];     /* comma-separated module names */
  size_t spec_preload_len; /* the part of preload that is restart.preload's */
  int preloaded;           /* modules a parked rank imported (its runner's word), -1 unknown */
  double import_s;
} ln_standby;

void ln_standby_init(ln_standby *sb, const ln_job *job, ln_events *events);

/* Starts a standby for the attempt after o's (same world size, hostfile and program) when none is
 * live, it is enabled, and its back-off has passed. A failure to start is logged and retried after
 * the back-off, never an error of the attempt. */
void ln_standby_maybe_start(ln_standby *sb, const ln_attempt_opts *o);
/* The same for a Python program that does not call ftl_init: its standby runs o->pyrun_argv with
 * FTL_PRELOAD (launcher/pyrun.py) and parks with the modules imported. */
void ln_standby_maybe_start_preloading(ln_standby *sb, const ln_attempt_opts *o);

/* What rank `rank` of the running attempt reported its Python program imported at start-up (msg:
 * {"modules": [...]}, launcher/pyrun.py): kept, after restart.preload's, for the next standby. Names
 * that are not module names are dropped. */
void ln_standby_note_imports(ln_standby *sb, int rank, const json_t *msg);

/* What to poll (capacity cap); how many were written. */
size_t ln_standby_pollfds(const ln_standby *sb, struct pollfd *fds, size_t cap);
/* One turn: what poll said on fds, the standby's mpirun reaped, its agents pinged each second. */
void ln_standby_turn(ln_standby *sb, const struct pollfd *fds, size_t n);

/* Whether a standby is parked, every rank of it, ready to follow attempt after_attempt. */
int ln_standby_ready(const ln_standby *sb, int after_attempt);

/* Whether the live standby can become the attempt o describes: same attempt number, world size and
 * hostfile contents, every agent of it up, and none of its ranks gone. */
int ln_standby_fits(const ln_standby *sb, const ln_attempt_opts *o);

/* Ends a live standby (its ranks killed, its processes swept) with the reason in the event log. */
void ln_standby_drop(ln_standby *sb, const char *reason);

/* The take-over: hands the live standby's server and gang to the caller, which becomes attempt o
 * (attempt_dir is its folder), and activates the parked ranks (ranks that have not parked yet are
 * activated when they do). *hello_out gets the agents' hellos (per rank, owned by the caller: free
 * with ln_standby_free_hellos) to replay; launch_out its mpirun's session folder, which the caller's
 * ln_gang_launch_free removes once that mpirun is reaped. The standby is no longer live after this. */
void ln_standby_take(ln_standby *sb, const ln_attempt_opts *o, const char *attempt_dir, rz_rdzv_server **server_out,
                     core_proc *gang_out, char *token_out, size_t token_size, json_t ***hello_out,
                     ln_gang_launch *launch_out);
void ln_standby_free_hellos(json_t **hello, int world);

/* The parked ranks' resident memory in KiB (sum), -1 when unknown. */
long ln_standby_rss_kb(const ln_standby *sb);

#endif
