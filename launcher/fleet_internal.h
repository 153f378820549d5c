/* launcher/fleet_internal.h: the launcher's fleet state (launcher/fleet.h), shared by fleet.c (an
 * attempt's notes and records) and fleet_plan.c (the decision before the first attempt). Internal
 * to those two files. */
#ifndef FTL_LAUNCHER_FLEET_INTERNAL_H
#define FTL_LAUNCHER_FLEET_INTERNAL_H

#include <stdint.h>

#include "ftl/cadence.h"

/* One GPU whose verdict changed during the attempt. */
typedef struct ln_fleet_change {
  char host[64];
  char addrs[256];
  char gpu[96];
  char name[96];
  int index;
  char verdict[16];
  char reason[256];
  int64_t wall_us;
} ln_fleet_change;

struct ln_fleet {
  const char *ledger;           /* the job's fleet_ledger (borrowed: the job outlives this) */
  int history_days;             /* fleet.history_days; 0: no history read */
  int by_srun;                  /* srun places the ranks: without a plan of the allocation's nodes (run.c)
                                   nothing says where they run (no FTL_GANG_HOSTS; the shares from the
                                   hellos alone); with one, srun places them as the plan says */
  ftl_cadence_fleet_hosts hist; /* the per-host history at the job's start */
  int have_hist;
  /* this attempt */
  int world;
  int *rank_host;               /* per rank: index into hosts, -1 before its hello */
  struct {
    char host[64];
    char addrs[256];
    int ranks;
  } *hosts;                     /* the hosts the agents said hello from */
  size_t n_hosts;
  struct {
    char host[64];
    char gpu[96];
    char verdict[16];
  } *seen;                      /* GPUs last said not healthy */
  size_t n_seen;
  ln_fleet_change *changes;
  size_t n_changes;
  int dropped;                  /* changes past the bound */
  struct {
    char host[64];
    int ranks;
  } *plan;                      /* the attempt's hosts as planned (the shares without hellos) */
  size_t n_plan;
  char *gang;                   /* FTL_GANG_HOSTS's value */
};

#endif
