/* pipeline/archive_seam.h: the pipeline's only door to libarchive (archive_seam.c), so the rest
 * of pipeline/ never sees an archive handle and a test could link a fake in its place.
 *
 * Writing: a reproducible pax (restricted) tar compressed with zstd, into memory: every entry a
 * regular file, mode 0644, uid/gid 0, no user or group names, mtime 0 (no atime/ctime), in the
 * order given. Reading: only the tar format and the zstd filter are enabled; entries are reported
 * with their type so the caller can refuse anything that is not a plain file.
 *
 * Internal to pipeline/. Thread-safety: one handle per thread. */
#ifndef FTL_PIPELINE_ARCHIVE_SEAM_H
#define FTL_PIPELINE_ARCHIVE_SEAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ftl/error.h"

/* The fixed zstd level of packages (a different level gives other bytes, same content). */
#define PL_ARCHIVE_ZSTD_LEVEL "19"

typedef struct pl_archive_w pl_archive_w;
ftl_err pl_aw_open(pl_archive_w **out, ftl_diag *d);
ftl_err pl_aw_add(pl_archive_w *w, const char *name, const void *data, size_t size, ftl_diag *d);
/* Finishes the archive; its bytes into *bytes (freed with ftl_free). Destroys w either way. */
ftl_err pl_aw_finish(pl_archive_w *w, uint8_t **bytes, size_t *size, ftl_diag *d);
/* Destroys w without finishing; accepts NULL. */
void pl_aw_abort(pl_archive_w *w);

typedef enum pl_ar_type {
  PL_AR_REGULAR = 0,
  PL_AR_DIR,
  PL_AR_SYMLINK,
  PL_AR_HARDLINK,
  PL_AR_OTHER, /* device, FIFO, socket, anything else */
} pl_ar_type;

typedef struct pl_ar_entry {
  const char *name; /* borrowed until the next pl_ar_next */
  pl_ar_type type;
  int size_set;
  int64_t size;
  int sparse; /* has a sparse map */
} pl_ar_entry;

typedef struct pl_archive_r pl_archive_r;
ftl_err pl_ar_open_file(const char *path, pl_archive_r **out, ftl_diag *d);
/* bytes are borrowed until pl_ar_close. */
ftl_err pl_ar_open_memory(const void *bytes, size_t size, pl_archive_r **out, ftl_diag *d);
/* The next entry's header; *eof set at the end of the archive. */
ftl_err pl_ar_next(pl_archive_r *r, pl_ar_entry *e, int *eof, ftl_diag *d);
/* True when the input is zstd-compressed (valid after the first pl_ar_next). */
int pl_ar_is_zstd(pl_archive_r *r);
/* Reads up to n bytes of the current entry's data; 0 at its end. */
ftl_err pl_ar_read(pl_archive_r *r, void *buf, size_t n, size_t *got, ftl_diag *d);
/* Accepts NULL. */
void pl_ar_close(pl_archive_r *r);

#endif
