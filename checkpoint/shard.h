/* checkpoint/shard.h: one rank's shard file of one step: write it (HDF5 structure via h5.c, then
 * the bytes streamed through the file seam with XXH3 computed on the way, fsync, rename, fsync of
 * the folder), and read it back (whole-file verification fused with the reads a rank needs, or
 * plain ranged reads). The checksum rules are in docs/formats/shard.md.
 *
 * Not here: MPI, staging, the manifest's JSON (manifest.c). */
#ifndef FTL_CKPT_SHARD_H
#define FTL_CKPT_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/manifest.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes dir/<sh->file> from pieces (sh->pieces[i].item/row_start/row_count set by the caller,
 * data[i] the bytes of piece i). Sets each piece's file_offset, size_bytes and checksum and the
 * shard's size_bytes and checksum. The file is durable under its final name on return.
 * bounce is scratch of bounce_bytes (>= 4096). Crash point "mid_shard" fires halfway through
 * the bytes. On failure the temporary file is removed and d names the file and the call. */
ftl_err ck_shard_write(const char *dir, const ck_manifest *m, ck_shard *sh, const void *const *data, size_t chunk_bytes,
                       void *bounce, size_t bounce_bytes, int64_t step, int world_size, ftl_diag *d);

/* The same, with a copy in the L1 folder l1_dir (checkpoint/levels.h) when l1_written is given:
 * the same bytes at the same offsets, so the copy verifies against the manifest like the shard.
 * *l1_written: 1 when the copy is in place; otherwise l1_why says why not (the shard itself is
 * unaffected by any failure of its copy). */
ftl_err ck_shard_write_tee(const char *dir, const char *l1_dir, const ck_manifest *m, ck_shard *sh,
                           const void *const *data, size_t chunk_bytes, void *bounce, size_t bounce_bytes, int64_t step,
                           int world_size, int *l1_written, char *l1_why, size_t l1_why_size, ftl_diag *d);

/* A byte range of a shard file a rank wants, and where it goes. */
typedef struct ck_need {
  uint64_t file_offset, size_bytes;
  void *dest;
} ck_need;

/* Streams the whole shard: checks its size, every piece's checksum and the file checksum, and
 * reads the needs (sorted by file_offset, not overlapping, each inside one piece) straight into
 * their destinations on the way, in blocks of 256 KiB (at most bounce_bytes) each hashed as soon
 * as it is read, with read-ahead asked for chunk_bytes ahead. A file in tmpfs (an L1 or L2 copy)
 * is hashed in place through ck_map_tmpfs and only the needs copied out. FTL_ERR_CORRUPT when the file is short or a checksum differs
 * (d names the shard and the tensor), FTL_ERR_NOTFOUND when it is missing, FTL_ERR_IO otherwise. */
ftl_err ck_shard_verify_read(const char *dir, const ck_manifest *m, const ck_shard *sh, const ck_need *needs,
                             int nneeds, size_t chunk_bytes, void *bounce, size_t bounce_bytes, ftl_diag *d);

/* The verifier behind ck_shard_verify_read, for bytes that arrive some other way (an L2 transfer,
 * ckpt_l2.c): fed the whole file in order, in pieces of any size, it checks the size, every piece's
 * checksum and the file checksum, with ck_shard_verify_read's messages. m and sh must outlive it. */
typedef struct ck_verifier ck_verifier;
ftl_err ck_verifier_new(const ck_manifest *m, const ck_shard *sh, ck_verifier **out, ftl_diag *d);
void ck_verifier_feed(ck_verifier *v, const void *p, size_t n);
/* FTL_OK when what was fed is the manifest's file; else FTL_ERR_CORRUPT, d naming the shard and what. */
ftl_err ck_verifier_finish(ck_verifier *v, ftl_diag *d);
void ck_verifier_free(ck_verifier *v);
/* The stretch of the file from off that is one piece's bytes (*piece its index) or HDF5 metadata
 * only (*piece -1), at most max bytes: its length. */
uint64_t ck_verifier_span(const ck_verifier *v, uint64_t off, uint64_t max, int *piece);

/* fd's file mapped read-only, or NULL: only a file in tmpfs (the L1 folder's usual home), whose
 * pages are memory and never fail to read, so reading them in place costs no copy. A file on a
 * disk could fail a read as SIGBUS, so it is never mapped and its readers use pread. A copy is in
 * this user's private L1 folder and ftl only ever replaces or removes it, which leaves a mapping
 * intact; a copy truncated by hand while mapped would end the reader with SIGBUS, which a library
 * cannot catch for its caller. munmap it with size. */
unsigned char *ck_map_tmpfs(int fd, uint64_t size);

/* Reads the needs without verifying (another rank verifies this shard). */
ftl_err ck_shard_read(const char *dir, const ck_shard *sh, const ck_need *needs, int nneeds, ftl_diag *d);

/* XXH3-64 of a buffer (runtime-dispatched SIMD where the library has it). */
uint64_t ck_hash(const void *p, size_t n);

#ifdef __cplusplus
}
#endif
#endif
