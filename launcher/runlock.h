/* launcher/runlock.h: adopting a run directory, the one owner of it for `ftl run` and `ftl status`:
 * its lock, RUNDIR/ftl.lock (docs/formats/ftl-lock.md), which `ftl run` holds for its whole life so
 * that two launchers never run into one run directory (a requeued batch job whose old launcher
 * still lives would otherwise write the same checkpoints and final/ as it); whose run directory it
 * is (RUNDIR/job.json: one job per run directory, whichever kind came first); its copy of the job
 * spec, RUNDIR/job.yaml; and whether a launcher holds it now (`ftl status`). */
#ifndef FTL_LAUNCHER_RUNLOCK_H
#define FTL_LAUNCHER_RUNLOCK_H

#include <stdint.h>

#include "ftl/error.h"
#include "launcher/jobspec.h"

typedef struct ln_run_lock {
  int fd; /* holds the flock; -1 when not held */
} ln_run_lock;

#define FTL_RUN_LOCK_INIT {.fd = -1}

/* Takes RUNDIR/ftl.lock (RUNDIR must exist) for job: an exclusive flock on an open descriptor
 * (close-on-exec: nothing the launcher starts inherits it) and a record inside naming this
 * launcher. A lock held by a live launcher is waited for up to wait_ms (0: not at all), then
 * refused: FTL_ERR_STATE (FTL_ERR_TIMEOUT after a wait), d naming the holder's pid, host, job and
 * start. A record left by a launcher that died (the kernel released its flock) is taken over with a
 * note on stderr. */
ftl_err ln_run_lock_take(const char *run_dir, const ln_job *job, int64_t wait_ms, ln_run_lock *lock, ftl_diag *d);

/* Reads a lock record's bytes (docs/formats/ftl-lock.md; any bytes: the file is outside input):
 * holder gets "pid 123 on host h (job 'x', since 2026-12-01T11:00:00Z)", or a phrase for a record
 * not written yet; *released is 1 when it carries released_wall_us. Returns 1 for a record (a JSON
 * object), 0 otherwise. Pure (tests/fuzz/fuzz_runlock.c). */
int ln_run_lock_parse(const char *data, size_t size, char *holder, size_t holder_size, int *released);

/* Marks the record released and drops the flock. Safe on a lock not held. */
void ln_run_lock_release(ln_run_lock *lock);

/* Whether a launcher holds RUNDIR/ftl.lock now: 1 held, 0 free, -1 no lock file (an older
 * launcher's run directory: decide from the events). Only reads: safe while the job runs. */
int ln_run_lock_held(const char *run_dir);

/* Whose run directory it is (RUNDIR/job.json, docs/formats/job-identity.md), after
 * ln_run_lock_take: FTL_ERR_SPEC (d naming both jobs) when it records another job than job, run as
 * program: another kind (a spec job and a command-line job), another spec (its bytes' hash), or
 * another program or arguments. A run directory of an earlier release has only job.yaml: a spec
 * job's, compared as one. Nothing is written: a refused submission leaves nothing behind. */
ftl_err ln_run_dir_check_job(const char *run_dir, const ln_job *job, const char *program, ftl_diag *d);

/* Records the run directory as job's once the submission is taken (ftl run's inputs checked):
 * RUNDIR/job.json the first time, and a copy of a spec job's file, RUNDIR/job.yaml. */
ftl_err ln_run_dir_adopt(const char *run_dir, const ln_job *job, const char *program, ftl_diag *d);

#endif
