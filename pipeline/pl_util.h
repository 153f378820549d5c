/* pipeline/pl_util.h: small helpers shared by the pipeline's files (internal to pipeline/):
 * canonical JSON text, crash points of the file seam (core/fs.h), the registry's lock, and folder
 * removal (through the seam).
 *
 * Not here: any format. */
#ifndef FTL_PIPELINE_PL_UTIL_H
#define FTL_PIPELINE_PL_UTIL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

/* JSON as Python's json.dumps(indent=2, sort_keys=True) writes it (ASCII only), plus a final
 * newline when newline is set. NUL-terminated, freed with ftl_free; NULL when out of memory. */
char *pl_json_text(const json_t *j, int newline, size_t *len_out);

/* The pipeline's durable writes are core's (core/fs.h): core_fs_replace with
 * CORE_TMP_UNPREDICTABLE (the registry's folders may be writable by others), core_fs_fsync_dir,
 * core_fs_write_new_at, core_fs_mkdtemp. */
/* A named crash point (FTL_CRASH_AT=name kills the process here); a no-op otherwise. */
void pl_crash_point(const char *name);

/* Appends rec as one line to path under an exclusive flock (deadline), fsynced. */
ftl_err pl_jsonl_append(const char *path, const json_t *rec, int64_t lock_timeout_ms, ftl_diag *d);

/* Opens (creating) path and takes an exclusive flock within timeout_ms; the fd into *fd_out. */
ftl_err pl_lock(const char *path, int64_t timeout_ms, int *fd_out, ftl_diag *d);
void pl_unlock(int fd);

/* "NAME@HOST": the effective user's passwd name (its numeric uid when it has none) and this host;
 * never $USER, which a cron job, a container or `env -i` leaves unset or wrong. The registry's
 * default `who` in pointers and audit lines. */
void pl_effective_user(char *buf, size_t size);

/* True when name is a plain file name: 1-255 bytes of [A-Za-z0-9._-], not "." or "..", not
 * starting with '.' unless allow_dot. */
int pl_safe_name(const char *name, int allow_dot);

#endif
