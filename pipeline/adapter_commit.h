/* pipeline/adapter_commit.h: the final adapter as a committed unit (docs/formats/adapter.md,
 * "Commit marker").
 *
 * A program writes its adapter files into final/ (each atomically), then calls
 * pl_adapter_commit_write, which writes final/COMMIT last (atomically): the name, size and
 * SHA-256 of each file. A reader (evaluation, export) calls pl_adapter_commit_verify first and
 * refuses a final/ whose marker is missing, unreadable, or does not match the files, naming what
 * is missing or different. So a crash or a full disk between the two files leaves a final/ that
 * no reader takes for a whole adapter.
 *
 * Not here: the files' formats (the program's). Thread-safety: reentrant. */
#ifndef FTL_PIPELINE_ADAPTER_COMMIT_H
#define FTL_PIPELINE_ADAPTER_COMMIT_H

#include <stddef.h>
#include <stdint.h>

#include "core/rundir.h"
#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FTL_ADAPTER_COMMIT_NAME CORE_RUNDIR_FINAL_COMMIT
#define FTL_ADAPTER_COMMIT_FORMAT "ftl-adapter-commit"
#define FTL_ADAPTER_COMMIT_VERSION 1
/* The largest file of an adapter any reader takes (the size of a whole package): final/ is written
 * by the training program, so each file is read as a regular file of at most this size. */
#define FTL_ADAPTER_FILE_MAX_BYTES ((uint64_t)8 << 30)

/* The example's adapter files, in the order they are written. */
#define FTL_ADAPTER_SAFETENSORS "adapter.safetensors"
#define FTL_ADAPTER_JSON "adapter.json"

/* Removes dir/COMMIT (if any) and fsyncs dir: call before rewriting the files, so a crash while
 * they are replaced leaves "no marker" rather than a marker over half-new files. */
ftl_err pl_adapter_commit_clear(const char *dir, ftl_diag *d);

/* Hashes dir/<names[i]> (bare names, no '/') and writes dir/COMMIT atomically (deterministic
 * bytes: sorted keys, no times). */
ftl_err pl_adapter_commit_write(const char *dir, const char *const *names, size_t n, ftl_diag *d);

/* Checks dir/COMMIT: present, well formed, format/version known, every listed file present with
 * its size and SHA-256, and (when required is not NULL) every name of required[] listed.
 * FTL_ERR_NOTFOUND when the marker is missing (the message names the files that exist and those
 * that do not), FTL_ERR_CORRUPT when something does not match (the message names the file). */
ftl_err pl_adapter_commit_verify(const char *dir, const char *const *required, size_t n_required, ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
