/* core/fence.h: the attempt fence, the one rule that keeps a process of an ended attempt from
 * writing checkpoints after the next attempt has started (docs/formats/fence.md).
 *
 * RUNDIR/fence holds the number of the attempt allowed to change checkpoints/. The launcher
 * advances it before every attempt starts (a cold start or a standby's take-over), under an
 * exclusive flock; every rank takes a shared flock on it around each change it makes to
 * checkpoints/ (a shard's rename, a manifest's commit, a stale manifest's removal, the keep rule's
 * deletions) and makes the change only while the fence names its own attempt. So once the fence
 * has moved, no process of an older attempt, whatever it is still doing, can commit or remove a
 * step: a change already under way finished before the fence moved, and every later one sees the
 * new number and is refused with FTL_ERR_FENCED.
 *
 * A run directory without a fence file (a program run without the launcher) has no fence. */
#ifndef FTL_CORE_FENCE_H
#define FTL_CORE_FENCE_H

#include <stdint.h>

#include "ftl/error.h"

/* Sets the fence to attempt, waiting until deadline_ms (absolute, ftl_deadline_after_ms) for
 * changes under way to finish. FTL_ERR_TIMEOUT names the run directory when one did not. */
ftl_err core_fence_advance(const char *run_dir, int attempt, int64_t deadline_ms, ftl_diag *d);

/* A shared hold on the fence, taken around one change to checkpoints/. */
typedef struct core_fence_hold {
  int fd; /* -1: no fence file, nothing held */
} core_fence_hold;

/* Takes the shared hold when run_dir has a fence (waiting until deadline_ms for an advance under
 * way), and checks that it names attempt. FTL_OK with the hold taken (or none needed: no run
 * directory, no fence file, attempt < 0); FTL_ERR_FENCED naming both attempts when the fence names
 * another one (nothing held). what says what was to be done, for the message. */
ftl_err core_fence_enter(const char *run_dir, int attempt, const char *what, int64_t deadline_ms,
                         core_fence_hold *h, ftl_diag *d);

/* Releases a hold (a hold with fd -1 is fine). */
void core_fence_leave(core_fence_hold *h);

/* The attempt the fence names, or -1 when run_dir has none (or it cannot be read). */
int core_fence_read(const char *run_dir);

#endif
