/* launcher/finish.h: what of a job's end is done, RUNDIR/finish.json (docs/formats/finish.md): the
 * training finished, the gate's result, the version published. `ftl run` reads it before anything
 * starts, so that a run hit after its last step (a rank or the launcher killed after the final
 * commit, during the export, the gate or the publish), a requeue or `ftl run` again finishes what
 * is left and trains nothing again, and a run already published says so and publishes nothing new.
 *
 * The record is the launcher's own account, not evidence: the training counts as finished for a job
 * with a gate only while RUNDIR/final/ is committed (its COMMIT marker, which the gate checks byte
 * for byte), and a recorded version counts only while the registry holds it. A record edited by
 * hand can make ftl redo work, or skip work whose checks then fail, never publish what was not
 * gated. */
#ifndef FTL_LAUNCHER_FINISH_H
#define FTL_LAUNCHER_FINISH_H

#include <limits.h>
#include <stdint.h>

#include "ftl/error.h"

typedef struct ln_finish {
  int trained;              /* the training ended: every rank exited 0, or final/ was committed */
  int64_t trained_wall_us;  /* when */
  int trained_attempt;      /* in which attempt */
  int gate;                 /* 1 passed, -1 failed, 0 not run (or its run cut short) */
  int64_t gate_wall_us;
  char gate_metric[128];
  double gate_value;
  int published;            /* a version went into the registry */
  int64_t published_wall_us;
  char registry[PATH_MAX];  /* the registry folder, as the locked gate names it */
  char name[128];           /* the adapter's name there */
  char channel[128];        /* the channel promoted to it ("" none) */
  char version[65];         /* the version id (SHA-256 hex) */
} ln_finish;

/* RUNDIR/finish.json into *f (zeroed first). A missing file is FTL_OK with nothing done; one that
 * cannot be read as the record (edited, torn) is FTL_ERR_CORRUPT with *f zeroed and d saying why:
 * the caller warns and redoes what it would have skipped. */
ftl_err ln_finish_load(const char *run_dir, ln_finish *f, ftl_diag *d);

/* Replaces RUNDIR/finish.json with *f, atomically and durably (the file seam). */
ftl_err ln_finish_store(const char *run_dir, const ln_finish *f, ftl_diag *d);

/* 1 when RUNDIR/final/COMMIT is there as a regular file: the program committed its final adapter,
 * which it does once, after its last step (docs/formats/adapter.md). Whether the files match it is
 * the gate's check. */
int ln_final_committed(const char *run_dir);

#endif
