/* launcher/runlock.h: the run directory's lock, RUNDIR/ftl.lock (docs/formats/ftl-lock.md), which
 * `ftl run` holds for its whole life so that two launchers never run into one run directory (a
 * requeued batch job whose old launcher still lives would otherwise write the same checkpoints and
 * final/ as it). It also says whose run directory it is: a command-line job is not run into another
 * job's run directory.
 *
 * Not here: the job.yaml comparison of two spec files (main.c's adopt_run_dir). */
#ifndef FTL_LAUNCHER_RUNLOCK_H
#define FTL_LAUNCHER_RUNLOCK_H

#include <stdint.h>

#include "ftl/error.h"
#include "launcher/jobspec.h"

typedef struct ftl_run_lock {
  int fd; /* holds the flock; -1 when not held */
} ftl_run_lock;

#define FTL_RUN_LOCK_INIT {.fd = -1}

/* Takes RUNDIR/ftl.lock (RUNDIR must exist) for job: an exclusive flock on an open descriptor
 * (close-on-exec: nothing the launcher starts inherits it) and a record inside naming this
 * launcher. A lock held by a live launcher is waited for up to wait_ms (0: not at all), then
 * refused: FTL_ERR_STATE (FTL_ERR_TIMEOUT after a wait), d naming the holder's pid, host, job and
 * start. A record left by a launcher that died (the kernel released its flock) is taken over with a
 * note on stderr. FTL_ERR_SPEC when the run directory is another job's: a command-line job (no
 * spec file) where a spec job's job.yaml lies (named with its spec hash). */
ftl_err ftl_run_lock_take(const char *run_dir, const ftl_job *job, int64_t wait_ms, ftl_run_lock *lock, ftl_diag *d);

/* Reads a lock record's bytes (docs/formats/ftl-lock.md; any bytes: the file is outside input):
 * holder gets "pid 123 on host h (job 'x', since 2026-12-01T11:00:00Z)", or a phrase for a record
 * not written yet; *released is 1 when it carries released_wall_us. Returns 1 for a record (a JSON
 * object), 0 otherwise. Pure (tests/fuzz/fuzz_runlock.c). */
int ftl_run_lock_parse(const char *data, size_t size, char *holder, size_t holder_size, int *released);

/* Marks the record released and drops the flock. Safe on a lock not held. */
void ftl_run_lock_release(ftl_run_lock *lock);

#endif
