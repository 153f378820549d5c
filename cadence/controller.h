/* cadence/controller.h: what the ledger reader (ledger.c) may tell the controller (cadence.c)
 * besides the public ftl_cadence_observe_* calls: one parsed ledger record, counted at most once.
 * Internal to cadence/; the dependency runs one way only (ledger.c calls cadence.c, never back).
 */
#ifndef FTL_CADENCE_CONTROLLER_H
#define FTL_CADENCE_CONTROLLER_H

#include "ftl/cadence.h"

/* Adds one record that counts (an exposure, a restart, or a failure already classified as one)
 * to the estimate, unless a record with the same kind, job, attempt and wall_us was taken before
 * (from this or another ledger). Returns 1 if taken, 0 if a duplicate, -1 when out of memory. */
int cd_take_record(ftl_cadence *c, const ftl_cadence_record *rec);

/* Marks the decision for re-derivation (after a ledger was read, whatever it held). */
void cd_rederive(ftl_cadence *c);

/* Adds to host's own tally (hostrate.h): a failure cd_take_record took is added there already; an
 * exposure record's per-host breakdown is added by the reader, share by share, once the record was
 * taken. 0, or -1 when out of memory (a host past the table's bound is dropped, not an error). */
int cd_take_host(ftl_cadence *c, const char *host, double failures, double rank_hours);

#endif
