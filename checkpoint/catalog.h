/* checkpoint/catalog.h: the checkpoints folder: naming of step folders, listing them with their
 * state, reading a step's manifest, marking a step bad, deleting a step (the un-commit first).
 *
 * Layout: <run_dir>/checkpoints/step-<8+ digits>/{shard-<5 digits>.h5, manifest.json}.
 * A step is committed iff manifest.json exists in its folder; a step found corrupt at restore has
 * its manifest renamed to manifest.json.bad and a bad-reason.txt written next to it.
 * <run_dir>/checkpoints/COMMITTED marks a run directory that once committed (never deleted).
 * Safety: a step folder that is a symbolic link (or resolves outside the checkpoints folder) is
 * refused, never read, written, renamed in or deleted; manifests and shards are opened with
 * O_NOFOLLOW | O_NONBLOCK and must be regular files (core_fs_open_regular, core's one reader of
 * outside files).
 *
 * Not here: MPI (callers decide which rank acts), verification of shard bytes (shard.c). */
#ifndef FTL_CKPT_CATALOG_H
#define FTL_CKPT_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/door.h"
#include "checkpoint/manifest.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "<base>/step-00000100". */
ftl_err ck_step_dir(const char *base, int64_t step, char *out, size_t size);

/* 1 and *step when name is a step folder's name ("step-" and a decimal step); 0 otherwise. The one
 * reader of the name ck_step_dir writes: the catalog, and the L1 level's folders (levels.c). */
int ck_parse_step_name(const char *name, int64_t *step);

/* FTL_OK when <base>/step-N is a real folder directly inside base (lstat: not a symbolic link;
 * realpath: it resolves inside base). FTL_ERR_STATE naming the folder when it is refused,
 * FTL_ERR_NOTFOUND when it does not exist. Everything that writes, renames or deletes in a step
 * folder checks this first. */
ftl_err ck_step_dir_check(const char *base, int64_t step, ftl_diag *d);

/* The raw bytes of <step dir>/manifest.json (step folder checked, core_fs_read_regular), freed with
 * ftl_free. FTL_ERR_CORRUPT when it is not a regular file or too big to be a manifest,
 * FTL_ERR_NOTFOUND when missing, FTL_ERR_IO when the read fails. */
ftl_err ck_read_manifest_text(const char *base, int64_t step, char **text_out, size_t *len_out, ftl_diag *d);

/* Reads and parses <step dir>/manifest.json; *text_out (optional) receives the raw bytes. */
ftl_err ck_read_manifest(const char *base, int64_t step, ck_manifest **m_out, char **text_out, size_t *len_out,
                         ftl_diag *d);

/* Marks a committed step bad (rename of the manifest + reason file, durable). */
ftl_err ck_mark_bad(const char *base, int64_t step, const char *reason, ftl_diag *d);

/* The first 4 KiB of a bad step's bad-reason.txt (opened like a manifest: never a FIFO or link),
 * without its trailing newline; "" when there is none. */
void ck_read_bad_reason(const char *base, int64_t step, char *out, size_t size);

/* Deletes a step folder: the manifest first (durably: the step stops being committed before any
 * shard goes), then everything else, then the folder. */
ftl_err ck_delete_step(const char *base, int64_t step, ftl_diag *d);

/* The commit marker, <base>/COMMITTED: written (durably) by rank 0 after the first commit of a
 * run directory, never deleted by ftl (not by the keep rule, not by marking steps bad). While it
 * exists the run directory "once committed": a restore that finds nothing usable fails instead of
 * starting from scratch (docs/checkpoint.md). Text: "ftl-ckpt-committed 1", "first_step N",
 * "created_unix_us T", one per line. */
#define CK_MARKER_NAME "COMMITTED"
int ck_marker_exists(const char *base);
/* Writes the marker unless it exists. */
ftl_err ck_marker_note_commit(const char *base, int64_t step, ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
