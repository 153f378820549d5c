/* core/rundir.h: the one owner of every path under a run directory (docs/formats/run-dir.md).
 *
 * Every file or folder that ftl writes under RUNDIR is named here and nowhere else: the launcher,
 * the rank agent, the checkpoint module, the cadence ledger reader, the gate and the publisher ask
 * this module for the path. The layout itself (which part owns which file, and its format page) is
 * documented in docs/formats/run-dir.md.
 *
 * Internal to ftl (not installed). Not here: what goes inside the files (each owner's format). */
#ifndef FTL_CORE_RUNDIR_H
#define FTL_CORE_RUNDIR_H

#include <stddef.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The fixed entries directly under RUNDIR. */
typedef enum core_rundir_item {
  FTL_RUNDIR_JOB_SPEC = 0,  /* job.yaml: the spec the run was started with (launcher) */
  FTL_RUNDIR_EVENTS,        /* events.jsonl: the event log (launcher, docs/formats/events.md) */
  FTL_RUNDIR_FAILURES,      /* failures.jsonl: the run's failure/exposure ledger (launcher, cadence) */
  FTL_RUNDIR_CHECKPOINTS,   /* checkpoints/: committed steps (checkpoint module) */
  FTL_RUNDIR_FINAL,         /* final/: the program's final adapter (the program, via pipeline) */
  FTL_RUNDIR_LOCK,          /* ftl.lock: held by the launcher for its whole life */
  FTL_RUNDIR_SNAPSHOT,      /* snapshot.json: digests of the job's inputs (pipeline) */
  FTL_RUNDIR_GATE,          /* gate/: the evaluator's output and logs (eval) */
  FTL_RUNDIR_VERDICT,       /* verdict.json: the gate's verdict (eval) */
  FTL_RUNDIR_EXPORT,        /* export/: the adapter in PEFT layout (pipeline) */
  FTL_RUNDIR_PACKAGE,       /* package/: the publishable package (pipeline) */
  FTL_RUNDIR_FENCE,         /* fence: the attempt allowed to write checkpoints (launcher; core/fence.h) */
  FTL_RUNDIR_JOB_IDENTITY,  /* job.json: which job the run directory is (launcher, docs/formats/job-identity.md) */
  FTL_RUNDIR_FINISH,        /* finish.json: what of the job's end is done (launcher, docs/formats/finish.md) */
  FTL_RUNDIR_ITEMS_
} core_rundir_item;

/* The commit marker of RUNDIR/final/ (docs/formats/adapter.md), written last by the program's final
 * adapter commit (pipeline/adapter_commit.c) and looked for by the launcher (launcher/finish.c). */
#define CORE_RUNDIR_FINAL_COMMIT "COMMIT"

/* The bare name of an item ("events.jsonl"); never NULL for a valid item. */
const char *core_rundir_name(core_rundir_item item);

/* RUNDIR/<name of item> into out. FTL_ERR_RANGE if it does not fit, FTL_ERR_INVAL for a bad item. */
ftl_err core_rundir_path(char *out, size_t size, const char *run_dir, core_rundir_item item);

/* RUNDIR/attempt-NNNN (attempt >= 0). */
ftl_err core_rundir_attempt_dir(char *out, size_t size, const char *run_dir, int attempt);

/* ATTEMPT_DIR/rank-NNNNN.<suffix> ("out", "err", "exit.json"). Takes the attempt folder, because the
 * rank agent is handed that folder and not the run directory. */
ftl_err core_rundir_rank_file(char *out, size_t size, const char *attempt_dir, int rank, const char *suffix);

/* ATTEMPT_DIR/hostfile: the hostfile an attempt was launched with (bad hosts commented out).
 * Added after the contract, alongside it. */
ftl_err core_rundir_attempt_hostfile(char *out, size_t size, const char *attempt_dir);

/* The first attempt number whose folder does not exist yet (0 for a fresh run directory). */
int core_rundir_next_attempt(const char *run_dir);

#ifdef __cplusplus
}
#endif
#endif
