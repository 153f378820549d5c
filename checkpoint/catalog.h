/* checkpoint/catalog.h: the checkpoints folder: naming of step folders, listing them with their
 * state, reading a step's manifest, marking a step bad, deleting a step (the un-commit first).
 *
 * Layout: <run_dir>/checkpoints/step-<8+ digits>/{shard-<5 digits>.h5, manifest.json}.
 * A step is committed iff manifest.json exists in its folder; a step found corrupt at restore has
 * its manifest renamed to manifest.json.bad and a bad-reason.txt written next to it.
 *
 * Not here: MPI (callers decide which rank acts), verification of shard bytes (shard.c). */
#ifndef FTL_CKPT_CATALOG_H
#define FTL_CKPT_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "manifest.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ck_step_state {
  CK_STEP_INCOMPLETE = 0, /* no manifest: never committed (a crash, or an abandoned checkpoint) */
  CK_STEP_COMMITTED = 1,
  CK_STEP_BAD = 2, /* was committed, then failed verification at a restore */
} ck_step_state;

typedef struct ck_step_entry {
  int64_t step;
  ck_step_state state;
} ck_step_entry;

/* "<base>/step-00000100". */
ftl_err ck_step_dir(const char *base, int64_t step, char *out, size_t size);

/* Lists the step folders of base, newest first; *out freed with ftl_free. A missing base is an
 * empty list. */
ftl_err ck_list_steps(const char *base, ck_step_entry **out, int *n_out, ftl_diag *d);

/* Reads and parses <step dir>/manifest.json; *text_out (optional) receives the raw bytes. */
ftl_err ck_read_manifest(const char *base, int64_t step, ck_manifest **m_out, char **text_out, size_t *len_out,
                         ftl_diag *d);

/* Marks a committed step bad (rename of the manifest + reason file, durable). */
ftl_err ck_mark_bad(const char *base, int64_t step, const char *reason, ftl_diag *d);

/* Deletes a step folder: the manifest first (durably: the step stops being committed before any
 * shard goes), then everything else, then the folder. */
ftl_err ck_delete_step(const char *base, int64_t step, ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
