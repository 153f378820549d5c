/* cadence/hostrate.h: the controller's per-host history (docs/cadence.md, "Per-host rates"): the
 * counted failures blamed on each host and each host's exposure, tallied from the ledgers' records
 * as the controller takes them, and the gang's failure rate from them: the sum over the gang's
 * hosts of ranks × that host's rate, each shrunk toward the pooled rate.
 * Internal to cadence/ (cadence.c owns a table; ledger.c feeds exposures through controller.h).
 * Not thread-safe: the controller's caller serializes. */
#ifndef FTL_CADENCE_HOSTRATE_H
#define FTL_CADENCE_HOSTRATE_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/cadence.h"

/* Hosts remembered at most: a fleet of 65,536 hosts; the history of any beyond is not kept per
 * host (they are charged the pooled rate). */
#define CD_MAX_HOSTS 65536

typedef struct cd_host_table cd_host_table;

/* NULL when out of memory. */
cd_host_table *cd_host_table_new(void);
void cd_host_table_free(cd_host_table *t);

/* Adds failures and rank_hours to host's tally (a name longer than 63 bytes is cut, as the ledger
 * cuts it). 1 when added, 0 when the table is full (dropped), -1 when out of memory. */
int cd_host_add(cd_host_table *t, const char *host, double failures, double rank_hours);

/* host's tally; 0 (and zeros) when it has none. */
int cd_host_get(const cd_host_table *t, const char *host, double *failures, double *rank_hours);

/* What the gang's hosts make of the pooled rate. */
typedef struct cd_gang_rate {
  double rate;          /* the gang's failures per hour (not per rank-hour) */
  double factor;        /* rate ÷ (world × pooled): 1 when no host has a history */
  size_t worst;         /* index into the gang of the host with the highest rate */
  double worst_rate;    /* its rate per rank-hour */
  double worst_k, worst_e;
} cd_gang_rate;

/* Σ_h ranks_h · (α₀ + k_h)/(α₀/pooled + E_h), plus pooled for each of world's ranks on no listed
 * host. pooled > 0, alpha0 > 0. */
cd_gang_rate cd_host_gang_rate(const cd_host_table *t, const ftl_cadence_gang_host *gang, size_t n, int64_t world,
                               double alpha0, double pooled);

#endif
