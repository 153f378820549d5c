/* pipeline/archive_seam.h: the pipeline's only door to libarchive (archive_seam.c), so the rest
 * of pipeline/ never sees an archive handle and a test could link a fake in its place.
 *
 * Writing: a reproducible pax (restricted) tar compressed with zstd, into memory or into a file
 * descriptor through the file seam (core/fs.h): every entry a regular file, mode 0644, uid/gid 0,
 * no user or group names, mtime 0 (no atime/ctime), in the order given. Entry data reaches
 * libarchive in fixed 64 KiB pieces whoever feeds it and however, so the bytes depend on the
 * entries alone (pl_package_build and pl_package_canonicalize make the same bytes).
 *
 * Reading: only the tar format and the zstd filter are enabled; entries are reported with their
 * type so the caller can refuse anything that is not a plain file. Beside libarchive's tar reader,
 * the decompressed stream is walked block by block (a tar has no other structure to hide in), and
 * what libarchive reads past silently is refused: zstd inside zstd, a NUL byte in a pax path, a
 * pax global header, a tar without its two-block end-of-archive marker, and any byte after that
 * marker other than zero padding (at most PL_AR_MAX_PADDING). The compressed input is walked frame
 * by frame too: a zstd skippable frame, or bytes after the last frame that are not a frame, are
 * refused. The input is a regular file of bounded size.
 *
 * Not here: what a package holds (pipeline/package.c). Internal to pipeline/. Thread-safety: one
 * handle per thread. */
#ifndef FTL_PIPELINE_ARCHIVE_SEAM_H
#define FTL_PIPELINE_ARCHIVE_SEAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ftl/error.h"
#include "pipeline/sha256.h"

/* The fixed zstd level of packages (a different level gives other bytes, same content). */
#define PL_ARCHIVE_ZSTD_LEVEL "19"
/* Zero bytes allowed after the end-of-archive marker (tar writers pad to their record size). */
#define PL_AR_MAX_PADDING ((uint64_t)1 << 20)
/* The largest pax extended header read (ftl writes none). */
#define PL_AR_MAX_PAX ((uint64_t)1 << 20)

typedef struct pl_archive_w pl_archive_w;
/* Into memory (pl_aw_finish). */
ftl_err pl_aw_open(pl_archive_w **out, ftl_diag *d);
/* Into fd from offset 0 on, through core_fs_pwrite_all (core/fs.h); fd stays the caller's, nothing
 * is fsynced here. crash_name (or NULL): a crash point after the first bytes reach fd. */
ftl_err pl_aw_open_fd(int fd, const char *crash_name, pl_archive_w **out, ftl_diag *d);
/* A whole entry; the same as pl_aw_begin + pl_aw_data + pl_aw_end. */
ftl_err pl_aw_add(pl_archive_w *w, const char *name, const void *data, size_t size, ftl_diag *d);
/* An entry streamed: its header (size bytes of data to come), the data in any pieces, the end
 * (refused unless exactly size bytes came). */
ftl_err pl_aw_begin(pl_archive_w *w, const char *name, uint64_t size, ftl_diag *d);
ftl_err pl_aw_data(pl_archive_w *w, const void *data, size_t n, ftl_diag *d);
ftl_err pl_aw_end(pl_archive_w *w, ftl_diag *d);
/* Finishes a memory archive; its bytes into *bytes (freed with ftl_free). Destroys w either way. */
ftl_err pl_aw_finish(pl_archive_w *w, uint8_t **bytes, size_t *size, ftl_diag *d);
/* Finishes an fd archive: the bytes written and their SHA-256 (either may be NULL). Destroys w
 * either way. */
ftl_err pl_aw_finish_fd(pl_archive_w *w, uint64_t *size, char hex[FTL_SHA256_HEX_LEN + 1], ftl_diag *d);
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
/* path must name a regular file (links followed) of at most max_bytes; it is opened without
 * blocking (a FIFO is refused, never waited on). */
ftl_err pl_ar_open_file(const char *path, uint64_t max_bytes, pl_archive_r **out, ftl_diag *d);
/* bytes are borrowed until pl_ar_close. */
ftl_err pl_ar_open_memory(const void *bytes, size_t size, pl_archive_r **out, ftl_diag *d);
/* The next entry's header; *eof set at the end of the archive, once the rest of the stream has
 * been checked to be zero padding and the input to end with its last zstd frame. */
ftl_err pl_ar_next(pl_archive_r *r, pl_ar_entry *e, int *eof, ftl_diag *d);
/* True when the input is zstd-compressed, once (valid after open). */
int pl_ar_is_zstd(pl_archive_r *r);
/* Reads up to n bytes of the current entry's data; 0 at its end. */
ftl_err pl_ar_read(pl_archive_r *r, void *buf, size_t n, size_t *got, ftl_diag *d);
/* After the end: how many input (compressed) bytes there were, and their SHA-256. */
ftl_err pl_ar_input_digest(pl_archive_r *r, uint64_t *size, char hex[FTL_SHA256_HEX_LEN + 1], ftl_diag *d);
/* Accepts NULL. */
void pl_ar_close(pl_archive_r *r);

#endif
