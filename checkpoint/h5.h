/* checkpoint/h5.h: the only door to HDF5. It creates a shard file's structure (groups, contiguous
 * datasets with their attributes, space allocated early and never filled) and reports where each
 * dataset's bytes live in the file, so the writer can stream the bytes itself through the file
 * seam (core/fs.h), checksumming them on the way. The result is an ordinary HDF5 file that h5dump
 * and h5py open.
 *
 * Not here: writing or reading tensor bytes (shard.c does that with pwrite/pread), parallel HDF5.
 * HDF5's automatic error printing is turned off in every thread that calls in; the first message
 * of HDF5's error stack is copied into the caller's ftl_diag. */
#ifndef FTL_CKPT_H5_H
#define FTL_CKPT_H5_H

#include <stdint.h>

#include "checkpoint/manifest.h"
#include "ftl/dtype.h"
#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ck_h5_dset {
  const char *path; /* "/tensors/<name>" or "/blobs/<name>" */
  ftl_dtype dtype;
  int ndim;                    /* of the piece and of the global tensor (0..8) */
  const int64_t *dims;         /* the piece's dims: rows of this shard, then shape[1..] */
  const int64_t *global_shape; /* ndim values */
  int64_t row_start;           /* offset of the piece along dim 0 */
  const char *layout;          /* "split", "replicated", "blob", "blob_per_rank" */
  uint64_t file_offset;        /* out: where the dataset's bytes start in the file */
  uint64_t size_bytes;         /* out: bytes of the dataset */
} ck_h5_dset;

/* Creates path (truncating) with one dataset per entry and root attributes naming the format,
 * step, rank and world size; closes it. Sets file_offset/size_bytes of every entry and
 * *file_size_out (the size HDF5 gave the file, datasets included). Entries with zero bytes are not
 * allowed (the caller leaves empty pieces out). Detail in d. Thread-safe (HDF5 is built
 * thread-safe; the calls are serialised by its global lock). */
ftl_err ck_h5_create_shard(const char *path, int64_t step, int rank, int world_size, ck_h5_dset *dsets, int n,
                           ftl_diag *d);

/* Opens the shard at path (refused unless a regular file: HDF5 would block on a FIFO) and checks
 * that its own description agrees with the manifest: the root attributes (format, version, step,
 * rank, world size) and, for every piece, the dataset's place and size, its HDF5 type, its dtype
 * and layout attributes, its extent, global_shape and offset, and no dataset the manifest does
 * not name. FTL_ERR_CORRUPT naming the file and the field on a disagreement; FTL_ERR_NOTFOUND
 * when the file is missing; FTL_ERR_IO (or NOSPC) when HDF5 reports an errno. */
ftl_err ck_h5_check_shard(const char *path, const ck_manifest *m, const ck_shard *sh, ftl_diag *d);

/* HDF5 objects (files, datasets, groups, attributes) open in this process. Every function here
 * closes all it opens on every path, so outside a call this is 0; ftl_ckpt_destroy checks it in
 * debug builds (an object left open is closed at HDF5's atexit, after the disk may be full). */
long ck_h5_open_objects(void);

#ifdef __cplusplus
}
#endif
#endif
