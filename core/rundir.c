/* core/rundir.c: the names of everything under a run directory (see core/rundir.h and
 * docs/formats/run-dir.md). Only names and paths: creating the folders and writing the files is
 * each owner's job.
 *
 * Not here: the layout of the checkpoint folder below checkpoints/ (checkpoint/catalog.c). */
#include "core/rundir.h"

#include <limits.h>
#include <unistd.h>

#include "ftl/core.h"

/* Indexed by core_rundir_item; test_core_rundir checks that every item has its name. */
static const char *const item_names[FTL_RUNDIR_ITEMS_] = {
    [FTL_RUNDIR_JOB_SPEC] = "job.yaml",
    [FTL_RUNDIR_EVENTS] = "events.jsonl",
    [FTL_RUNDIR_FAILURES] = "failures.jsonl",
    [FTL_RUNDIR_CHECKPOINTS] = "checkpoints",
    [FTL_RUNDIR_FINAL] = "final",
    [FTL_RUNDIR_LOCK] = "ftl.lock",
    [FTL_RUNDIR_SNAPSHOT] = "snapshot.json",
    [FTL_RUNDIR_GATE] = "gate",
    [FTL_RUNDIR_VERDICT] = "verdict.json",
    [FTL_RUNDIR_EXPORT] = "export",
    [FTL_RUNDIR_PACKAGE] = "package",
    [FTL_RUNDIR_FENCE] = "fence",
    [FTL_RUNDIR_JOB_IDENTITY] = "job.json",
    [FTL_RUNDIR_FINISH] = "finish.json",
};

/* Attempt numbers are printed with at least four digits and ranks with five, so that folder
 * listings sort in order; larger numbers simply grow wider. */
#define ATTEMPT_MAX 100000

const char *core_rundir_name(core_rundir_item item) {
  if ((int)item < 0 || item >= FTL_RUNDIR_ITEMS_) return NULL;
  return item_names[item];
}

ftl_err core_rundir_path(char *out, size_t size, const char *run_dir, core_rundir_item item) {
  const char *name = core_rundir_name(item);
  if (!out || !run_dir || !name) return FTL_ERR_INVAL;
  return ftl_fmt(out, size, "%s/%s", run_dir, name);
}

ftl_err core_rundir_attempt_dir(char *out, size_t size, const char *run_dir, int attempt) {
  if (!out || !run_dir || attempt < 0) return FTL_ERR_INVAL;
  return ftl_fmt(out, size, "%s/attempt-%04d", run_dir, attempt);
}

ftl_err core_rundir_rank_file(char *out, size_t size, const char *attempt_dir, int rank, const char *suffix) {
  if (!out || !attempt_dir || !suffix || rank < 0) return FTL_ERR_INVAL;
  return ftl_fmt(out, size, "%s/rank-%05d.%s", attempt_dir, rank, suffix);
}

ftl_err core_rundir_attempt_hostfile(char *out, size_t size, const char *attempt_dir) {
  if (!out || !attempt_dir) return FTL_ERR_INVAL;
  return ftl_fmt(out, size, "%s/hostfile", attempt_dir);
}

int core_rundir_next_attempt(const char *run_dir) {
  char path[PATH_MAX];
  for (int i = 0; i < ATTEMPT_MAX; i++) {
    /* A run directory whose path is too long for an attempt folder has no attempts yet; the
     * caller fails when it tries to create this one. */
    if (core_rundir_attempt_dir(path, sizeof path, run_dir, i)) return i;
    if (access(path, F_OK) != 0) return i;
  }
  return ATTEMPT_MAX;
}
