/* checkpoint/h5.h: the only door to HDF5. It creates a shard file's structure (groups, contiguous
 * datasets with their attributes, space allocated early and never filled) and reports where each
 * dataset's bytes live in the file, so the writer can stream the bytes itself through the file
 * seam (fileio.h), checksumming them on the way. The result is an ordinary HDF5 file that h5dump
 * and h5py open.
 *
 * Not here: writing or reading tensor bytes (shard.c does that with pwrite/pread), parallel HDF5.
 * HDF5's automatic error printing is turned off in every thread that calls in; the first message
 * of HDF5's error stack is copied into the caller's ftl_diag. */
#ifndef FTL_CKPT_H5_H
#define FTL_CKPT_H5_H

#include <stdint.h>

#include "ftl/error.h"
#include "ftl/rdzv.h"

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

/* Opens an existing shard and checks the dataset at dset_path: its byte offset and size must be
 * file_offset/size_bytes (used by `ftl ckpt verify` to prove that the manifest and the HDF5
 * structure agree). Detail in d. */
ftl_err ck_h5_check_dataset(const char *path, const char *dset_path, uint64_t file_offset, uint64_t size_bytes,
                            ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
