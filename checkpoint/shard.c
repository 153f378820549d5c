/* checkpoint/shard.c: writing and reading one shard file (see shard.h, docs/formats/shard.md).
 *
 * A shard is an HDF5 file whose structure h5.c creates with every dataset's space allocated and
 * unfilled; this file then streams the file from byte 0 to its end as a list of segments: each
 * dataset is a segment (its bytes come from staging and are written here), and each stretch
 * between datasets is a segment of HDF5 metadata (read back from the file). Every segment gets an
 * XXH3-64; the file's checksum is the XXH3-64 of the (offset, length, hash) triples in file order.
 * So one pass computes the per-tensor checksums (which name the tensor at fault) and the whole-
 * file checksum (which covers HDF5's own bytes too), and readers verify in one pass as well.
 *
 * Map: hashing and segments; write (a shard, and its copy teed into L1); read (opening a shard);
 * the verifier; reads of a shard's pieces (verified: hashed in place in a tmpfs mapping, or in
 * blocks; plain).
 *
 * Not here: deciding which pieces a rank writes or needs (ckpt.c). */
#include "checkpoint/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>
#if defined(__x86_64__) && defined(__has_include)
#if __has_include(<xxh_x86dispatch.h>)
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#define CK_HASH_UPDATE XXH3_64bits_update_dispatch
#define CK_HASH_ONESHOT XXH3_64bits_dispatch
#endif
#endif
#ifndef CK_HASH_UPDATE
#define CK_HASH_UPDATE XXH3_64bits_update
#define CK_HASH_ONESHOT XXH3_64bits
#endif

#include "core/fs.h"
#include "ftl/core.h"
#include "checkpoint/catalog.h"
#include "checkpoint/h5.h"

/* ---- hashing and segments ---------------------------------------------------------------- */

uint64_t ck_hash(const void *p, size_t n) { return (uint64_t)CK_HASH_ONESHOT(p, n); }

/* A stretch of the file: a piece (index >= 0) or HDF5 metadata (-1). */
typedef struct seg {
  uint64_t off, len;
  int piece;
} seg;

static int cmp_seg(const void *a, const void *b) {
  const seg *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off ? 1 : 0;
}

/* Fills segs (capacity 2*npieces+1) in file order and returns their count, or -1 if pieces overlap
 * or run past the file's end. */
static int build_segments(const ck_shard *sh, uint64_t file_size, seg *segs) {
  int n = 0;
  for (int p = 0; p < sh->npieces; p++)
    segs[n++] = (seg){sh->pieces[p].file_offset, sh->pieces[p].size_bytes, p};
  qsort(segs, (size_t)n, sizeof *segs, cmp_seg);
  int out = n;
  uint64_t pos = 0;
  /* Append the gaps after the pieces, then sort everything again. */
  for (int i = 0; i < n; i++) {
    if (segs[i].off < pos) return -1;
    if (segs[i].off > pos) segs[out++] = (seg){pos, segs[i].off - pos, -1};
    pos = segs[i].off + segs[i].len;
  }
  if (pos > file_size) return -1;
  if (pos < file_size) segs[out++] = (seg){pos, file_size - pos, -1};
  qsort(segs, (size_t)out, sizeof *segs, cmp_seg);
  return out;
}

static void put_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t file_checksum(const seg *segs, const uint64_t *hashes, int nseg, unsigned char *triples) {
  for (int i = 0; i < nseg; i++) {
    put_le64(triples + 24 * i, segs[i].off);
    put_le64(triples + 24 * i + 8, segs[i].len);
    put_le64(triples + 24 * i + 16, hashes[i]);
  }
  return ck_hash(triples, (size_t)nseg * 24);
}

static void piece_label(const ck_manifest *m, const ck_piece *pc, char *buf, size_t size) {
  const ck_item *it = &m->items[pc->item];
  int blob = it->kind == CK_KIND_BLOB_GLOBAL || it->kind == CK_KIND_BLOB_PER_RANK;
  snprintf(buf, size, "%s '%s' (rows %lld..%lld)", blob ? "blob" : "tensor", it->name, (long long)pc->row_start,
           (long long)(pc->row_start + pc->row_count - 1));
}

/* ---- write ------------------------------------------------------------------------------- */

/* One shard write in progress: its paths, its scratch (freed by writer_free) and what the steps
 * below learn on the way (the temporary file, its size, its segments). */
typedef struct writer {
  const ck_manifest *m;
  ck_shard *sh;
  int64_t step;
  char path[PATH_MAX], tmp[PATH_MAX];
  ck_h5_dset *ds;
  char (*names)[CK_NAME_MAX + 16];
  int64_t (*dims)[CK_MAX_DIMS];
  seg *segs;
  uint64_t *hashes;
  unsigned char *triples;
  int fd, np, nseg, crashed;
  uint64_t total, fsize, written;
  /* The L1 copy (checkpoint/levels.h), written with the same bytes at the same offsets as they go
   * to the run directory's file; -1 when there is none or it was given up. */
  int l1_fd;
  char l1_path[PATH_MAX], l1_tmp[PATH_MAX], l1_why[200];
} writer;

/* The L1 copy is best effort: a failure gives it up (and says why), never the shard. */
static void l1_give_up(writer *w, const char *why) {
  if (w->l1_fd < 0) return;
  (void)ftl_fmt(w->l1_why, sizeof w->l1_why, "%s: %s", w->l1_tmp, why);
  core_fs_table.close(w->l1_fd);
  core_fs_table.unlink(w->l1_tmp);
  w->l1_fd = -1;
}

static void l1_put(writer *w, const void *src, size_t n, uint64_t off) {
  if (w->l1_fd >= 0 && core_fs_pwrite_all(w->l1_fd, src, n, off) != FTL_OK) l1_give_up(w, strerror(errno));
}

static ftl_err writer_alloc(writer *w, ftl_diag *d) {
  size_t cap = (size_t)w->np * 2 + 1;
  w->ds = ftl_calloc((size_t)w->np + 1, sizeof *w->ds);
  w->names = ftl_calloc((size_t)w->np + 1, sizeof *w->names);
  w->dims = ftl_calloc((size_t)w->np + 1, sizeof *w->dims);
  w->segs = ftl_calloc(cap, sizeof *w->segs);
  w->hashes = ftl_calloc(cap, sizeof *w->hashes);
  w->triples = ftl_calloc(cap, 24);
  if (!w->ds || !w->names || !w->dims || !w->segs || !w->hashes || !w->triples)
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory writing %s", w->path);
  return FTL_OK;
}

static void writer_free(writer *w) {
  ftl_free(w->triples);
  ftl_free(w->hashes);
  ftl_free(w->segs);
  ftl_free(w->dims);
  ftl_free(w->names);
  ftl_free(w->ds);
}

/* The HDF5 dataset of each piece (its path, shape and layout), each piece's size, and their total. */
static void describe_datasets(writer *w) {
  w->total = 0;
  for (int p = 0; p < w->np; p++) {
    ck_piece *pc = &w->sh->pieces[p];
    const ck_item *it = &w->m->items[pc->item];
    int blob = it->kind == CK_KIND_BLOB_GLOBAL || it->kind == CK_KIND_BLOB_PER_RANK, ovf = 0;
    snprintf(w->names[p], sizeof w->names[p], "/%s/%s", blob ? "blobs" : "tensors", it->name);
    w->dims[p][0] = pc->row_count;
    for (int k = 1; k < it->ndim; k++)
      w->dims[p][k] = it->shape[k];
    w->ds[p] = (ck_h5_dset){.path = w->names[p],
                            .dtype = it->dtype,
                            .ndim = it->ndim,
                            .dims = w->dims[p],
                            .global_shape = it->shape,
                            .row_start = pc->row_start,
                            .layout = ck_kind_name(it->kind)};
    pc->size_bytes = ck_item_row_bytes(it, &ovf) * (uint64_t)pc->row_count;
    w->total += pc->size_bytes;
  }
}

/* The temporary file with its HDF5 structure; each piece learns its offset in it. */
static ftl_err create_structure(writer *w, int world_size, ftl_diag *d) {
  /* Whatever is in the way (a leftover, or a FIFO or link someone put there) goes first: HDF5
   * opens with O_CREAT|O_TRUNC and would write through a link or wait on a FIFO. */
  if (core_fs_table.unlink(w->tmp) != 0 && errno != ENOENT)
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot remove the leftover %s: %s", w->tmp, strerror(errno));
  ftl_err rc = ck_h5_create_shard(w->tmp, w->step, w->sh->rank, world_size, w->ds, w->np, d);
  if (rc) return rc;
  for (int p = 0; p < w->np; p++) {
    if (w->ds[p].size_bytes != w->sh->pieces[p].size_bytes)
      return ftl_diag_fail(d, FTL_ERR_HDF5, "HDF5 gave %s %llu bytes, expected %llu", w->names[p],
                           (unsigned long long)w->ds[p].size_bytes, (unsigned long long)w->sh->pieces[p].size_bytes);
    w->sh->pieces[p].file_offset = w->ds[p].file_offset;
  }
  return FTL_OK;
}

/* Reopens the temporary file, sets its final size and lays it out as segments. */
static ftl_err open_and_size(writer *w, ftl_diag *d) {
  w->fd = core_fs_table.open(w->tmp, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
  struct stat st;
  if (w->fd < 0 || fstat(w->fd, &st) != 0)
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot reopen %s: %s", w->tmp, strerror(errno));
  w->fsize = (uint64_t)st.st_size;
  for (int p = 0; p < w->np; p++) {
    uint64_t end = w->sh->pieces[p].file_offset + w->sh->pieces[p].size_bytes;
    if (end > w->fsize) w->fsize = end;
  }
  /* Also when the size is right: the truncate gives back what h5.c reserved beyond the end. */
  if (core_fs_table.ftruncate(w->fd, (off_t)w->fsize) != 0)
    return ftl_diag_fail(d, core_errno_to_err(errno), "cannot extend %s: %s", w->tmp, strerror(errno));
  w->nseg = build_segments(w->sh, w->fsize, w->segs);
  if (w->nseg < 0) return ftl_diag_fail(d, FTL_ERR_HDF5, "HDF5 placed datasets of %s on top of each other", w->tmp);
  return FTL_OK;
}

/* Writes n bytes of a piece at off, hashing them on the way; the crash point "mid_shard" fires
 * once half of all the pieces' bytes are written. */
static ftl_err write_chunk(writer *w, XXH3_state_t *st3, const char *src, size_t n, uint64_t off, ftl_diag *d) {
  CK_HASH_UPDATE(st3, src, n);
  l1_put(w, src, n, off);
  ftl_err rc = core_fs_pwrite_all(w->fd, src, n, off);
  if (rc)
    return ftl_diag_fail(d, rc, "write of %zu bytes at %llu to %s failed: %s", n, (unsigned long long)off, w->tmp,
                         strerror(errno));
  /* Start the disk on these bytes now, so the fsync below finds little left to do. A hint:
   * its failure changes nothing (the fsync is what makes the bytes durable). */
  (void)sync_file_range(w->fd, (off_t)off, (off_t)n, SYNC_FILE_RANGE_WRITE);
  w->written += n;
  if (!w->crashed && w->total > 0 && w->written * 2 >= w->total) {
    w->crashed = 1;
    core_crash_point("mid_shard", w->sh->rank, w->step);
  }
  return FTL_OK;
}

/* One pass over the file in order: the pieces' bytes are written, the metadata between them read
 * back, and every segment hashed; then the shard's size and checksums are set. */
static ftl_err stream_segments(writer *w, const void *const *data, size_t chunk_bytes, void *bounce,
                               size_t bounce_bytes, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  for (int s = 0; s < w->nseg; s++) {
    const seg *sg = &w->segs[s];
    XXH3_state_t st3;
    XXH3_64bits_reset(&st3);
    const char *src = sg->piece >= 0 ? data[sg->piece] : NULL;
    for (uint64_t done = 0; done < sg->len;) {
      size_t n = (size_t)(sg->len - done);
      if (src) {
        if (n > chunk_bytes) n = chunk_bytes;
        rc = write_chunk(w, &st3, src + done, n, sg->off + done, d);
        if (rc) return rc;
      } else {
        if (n > bounce_bytes) n = bounce_bytes;
        rc = core_fs_pread_all(w->fd, bounce, n, sg->off + done);
        if (rc)
          return ftl_diag_fail(d, FTL_ERR_IO, "cannot read back HDF5 metadata of %s: %s", w->tmp,
                               errno ? strerror(errno) : "short file");
        CK_HASH_UPDATE(&st3, bounce, n);
        l1_put(w, bounce, n, sg->off + done);
      }
      done += n;
    }
    w->hashes[s] = (uint64_t)XXH3_64bits_digest(&st3);
    if (sg->piece >= 0) w->sh->pieces[sg->piece].checksum = w->hashes[s];
  }
  w->sh->size_bytes = w->fsize;
  w->sh->checksum = file_checksum(w->segs, w->hashes, w->nseg, w->triples);
  return FTL_OK;
}

ftl_err ck_shard_write(const char *dir, const ck_manifest *m, ck_shard *sh, const void *const *data, size_t chunk_bytes,
                       void *bounce, size_t bounce_bytes, int64_t step, int world_size, ftl_diag *d) {
  return ck_shard_write_tee(dir, NULL, m, sh, data, chunk_bytes, bounce, bounce_bytes, step, world_size, NULL, NULL, 0,
                            d);
}

/* Opens the L1 copy's temporary file at the shard's final size (after open_and_size). */
static void l1_open(writer *w, const char *l1_dir) {
  if (!l1_dir) return;
  if (ftl_fmt(w->l1_path, sizeof w->l1_path, "%s/%s", l1_dir, w->sh->file) ||
      ftl_fmt(w->l1_tmp, sizeof w->l1_tmp, "%s/%s.tmp", l1_dir, w->sh->file)) {
    (void)ftl_fmt(w->l1_why, sizeof w->l1_why, "path too long: %s", l1_dir);
    return;
  }
  w->l1_fd = core_fs_table.open(w->l1_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (w->l1_fd < 0) {
    (void)ftl_fmt(w->l1_why, sizeof w->l1_why, "cannot create %s: %s", w->l1_tmp, strerror(errno));
    return;
  }
  if (core_fs_table.ftruncate(w->l1_fd, (off_t)w->fsize) != 0) l1_give_up(w, strerror(errno));
}

/* After the shard is committed in the run directory: the L1 copy takes its name. In memory, so no
 * fsync: it does not outlive the host, and is never the only copy. */
static void l1_commit(writer *w, int *l1_written) {
  if (w->l1_fd < 0) return;
  if (core_fs_table.close(w->l1_fd) != 0) {
    w->l1_fd = -1;
    core_fs_table.unlink(w->l1_tmp);
    (void)ftl_fmt(w->l1_why, sizeof w->l1_why, "%s: close: %s", w->l1_tmp, strerror(errno));
    return;
  }
  w->l1_fd = -1;
  if (core_fs_table.rename(w->l1_tmp, w->l1_path) != 0) {
    (void)ftl_fmt(w->l1_why, sizeof w->l1_why, "cannot rename %s: %s", w->l1_tmp, strerror(errno));
    core_fs_table.unlink(w->l1_tmp);
    return;
  }
  *l1_written = 1;
}

ftl_err ck_shard_write_tee(const char *dir, const char *l1_dir, const ck_manifest *m, ck_shard *sh,
                           const void *const *data, size_t chunk_bytes, void *bounce, size_t bounce_bytes, int64_t step,
                           int world_size, int *l1_written, char *l1_why, size_t l1_why_size, ftl_diag *d) {
  writer w = {.m = m, .sh = sh, .step = step, .fd = -1, .np = sh->npieces, .l1_fd = -1};
  if (l1_written) *l1_written = 0;
  if (ftl_fmt(w.path, sizeof w.path, "%s/%s", dir, sh->file) ||
      ftl_fmt(w.tmp, sizeof w.tmp, "%s/%s.tmp", dir, sh->file))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s/%s", dir, sh->file);
  ftl_err rc = writer_alloc(&w, d);
  if (rc) goto out;
  describe_datasets(&w);
  int64_t t0 = ftl_clock_ns();
  rc = create_structure(&w, world_size, d);
  if (rc) goto out;
  int64_t t1 = ftl_clock_ns();
  rc = open_and_size(&w, d);
  if (rc) goto out;
  if (l1_written) l1_open(&w, l1_dir);
  rc = stream_segments(&w, data, chunk_bytes, bounce, bounce_bytes, d);
  if (rc) goto out;
  int64_t t2 = ftl_clock_ns();
  /* The training job will not read these bytes again before a restart: drop them from the cache. */
  bool renamed = false;
  rc = core_fs_commit_tmp(&w.fd, w.tmp, w.path, true, &renamed, d);
  /* A failed fsync of the folder comes after the rename: the shard is not durable, so it goes. */
  if (rc && renamed) core_fs_table.unlink(w.path);
  if (rc) goto out;
  if (l1_written) l1_commit(&w, l1_written);
  FTL_LOG(FTL_LOG_DEBUG, "ckpt", "%s: %llu bytes: HDF5 structure %.1f ms, write+hash %.1f ms, fsync+rename %.1f ms",
          w.path, (unsigned long long)w.fsize, (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
          (double)(ftl_clock_ns() - t2) / 1e6);
out:
  if (w.fd >= 0) core_fs_table.close(w.fd);
  if (rc) core_fs_table.unlink(w.tmp);
  if (w.l1_fd >= 0) l1_give_up(&w, "the shard itself failed");
  if (l1_why && l1_why_size) snprintf(l1_why, l1_why_size, "%s", w.l1_why);
  writer_free(&w);
  return rc;
}

/* ---- read -------------------------------------------------------------------------------- */

static ftl_err open_shard(const char *dir, const ck_shard *sh, int *fd_out, uint64_t *size_out, ftl_diag *d) {
  char path[PATH_MAX];
  if (ftl_fmt(path, sizeof path, "%s/%s", dir, sh->file))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s/%s", dir, sh->file);
  int fd = -1;
  uint64_t have = 0;
  ftl_err orc = core_fs_open_regular(path, UINT64_MAX, &fd, &have, d);
  if (orc) return orc;
  if (have != sh->size_bytes) {
    core_fs_table.close(fd);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: size is %llu bytes, the manifest says %llu", sh->file,
                         (unsigned long long)have, (unsigned long long)sh->size_bytes);
  }
  /* One sequential pass: ask for read-ahead. */
  posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  *fd_out = fd;
  *size_out = have;
  return FTL_OK;
}

/* ---- the verifier ------------------------------------------------------------------------ */

/* Fed the file's bytes in order, from wherever they come (a file read here, an L2 transfer in
 * ckpt_l2.c), it keeps one XXH3 state for the segment it is in and checks each piece's checksum as
 * its segment ends, then the file checksum at the end: so a shard is verified in the same pass
 * that lands its bytes, never in a second pass over them. */
struct ck_verifier {
  const ck_manifest *m;
  const ck_shard *sh;
  seg *segs;
  uint64_t *hashes;
  unsigned char *triples;
  int nseg, cur, bad_piece;
  uint64_t pos, size;
  XXH3_state_t *st; /* inside st_mem, aligned as XXH3 wants (the allocator promises only 16) */
  unsigned char st_mem[sizeof(XXH3_state_t) + 64];
};

/* Closes every segment that ends at pos (zero-length ones too) and starts the next. */
static void verifier_settle(ck_verifier *v) {
  while (v->cur < v->nseg && v->pos == v->segs[v->cur].off + v->segs[v->cur].len) {
    const seg *sg = &v->segs[v->cur];
    v->hashes[v->cur] = (uint64_t)XXH3_64bits_digest(v->st);
    if (sg->piece >= 0 && v->bad_piece < 0 && v->hashes[v->cur] != v->sh->pieces[sg->piece].checksum)
      v->bad_piece = sg->piece;
    XXH3_64bits_reset(v->st);
    v->cur++;
  }
}

ftl_err ck_verifier_new(const ck_manifest *m, const ck_shard *sh, ck_verifier **out, ftl_diag *d) {
  size_t cap = (size_t)sh->npieces * 2 + 1;
  ck_verifier *v = ftl_calloc(1, sizeof *v);
  *out = NULL;
  if (!v) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory verifying %s", sh->file);
  v->m = m;
  v->sh = sh;
  v->size = sh->size_bytes;
  v->bad_piece = -1;
  v->st = (XXH3_state_t *)(void *)(v->st_mem + (64 - (uintptr_t)v->st_mem % 64) % 64);
  v->segs = ftl_calloc(cap, sizeof *v->segs);
  v->hashes = ftl_calloc(cap, sizeof *v->hashes);
  v->triples = ftl_calloc(cap, 24);
  if (!v->segs || !v->hashes || !v->triples) {
    ck_verifier_free(v);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory verifying %s", sh->file);
  }
  v->nseg = build_segments(sh, v->size, v->segs);
  if (v->nseg < 0) {
    ck_verifier_free(v);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: pieces overlap or pass the end of the file", sh->file);
  }
  XXH3_64bits_reset(v->st);
  verifier_settle(v);
  *out = v;
  return FTL_OK;
}

void ck_verifier_free(ck_verifier *v) {
  if (!v) return;
  ftl_free(v->triples);
  ftl_free(v->hashes);
  ftl_free(v->segs);
  ftl_free(v);
}

void ck_verifier_feed(ck_verifier *v, const void *p, size_t n) {
  const char *c = p;
  while (n > 0 && v->cur < v->nseg) {
    uint64_t left = v->segs[v->cur].off + v->segs[v->cur].len - v->pos;
    size_t k = left < n ? (size_t)left : n;
    CK_HASH_UPDATE(v->st, c, k);
    v->pos += k;
    c += k;
    n -= k;
    verifier_settle(v);
  }
  v->pos += n; /* bytes past the end: finish calls the copy oversized */
}

uint64_t ck_verifier_span(const ck_verifier *v, uint64_t off, uint64_t max, int *piece) {
  *piece = -1;
  for (int i = 0; i < v->nseg; i++) {
    const seg *sg = &v->segs[i];
    if (off < sg->off || off - sg->off >= sg->len) continue;
    *piece = sg->piece;
    uint64_t left = sg->off + sg->len - off;
    return left < max ? left : max;
  }
  return max;
}

ftl_err ck_verifier_finish(ck_verifier *v, ftl_diag *d) {
  if (v->pos != v->size)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: %llu bytes where the manifest says %llu", v->sh->file,
                         (unsigned long long)v->pos, (unsigned long long)v->size);
  if (v->bad_piece >= 0) {
    char label[CK_NAME_MAX + 64];
    piece_label(v->m, &v->sh->pieces[v->bad_piece], label, sizeof label);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: checksum mismatch in %s", v->sh->file, label);
  }
  if (file_checksum(v->segs, v->hashes, v->nseg, v->triples) != v->sh->checksum)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: checksum mismatch in the HDF5 metadata (the tensors verify)",
                         v->sh->file);
  return FTL_OK;
}

/* ---- reads of a shard's pieces ----------------------------------------------------------- */

#define CK_VERIFY_BLOCK (256u << 10)

unsigned char *ck_map_tmpfs(int fd, uint64_t size) {
  struct statfs fs;
  if (size == 0 || size > SIZE_MAX || fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC) return NULL;
  void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return NULL;
  (void)madvise(p, (size_t)size, MADV_SEQUENTIAL);
  return p;
}

/* Copies n bytes whose source was just hashed (so is in cache) into a destination that will not
 * be read again soon: with streaming stores, which write the destination's lines without first
 * reading them into the cache. A plain memcpy reads every destination line it writes, a third of
 * the restore's memory traffic. Falls back to memcpy where the CPU or compiler has no such store. */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void copy_stream_avx2(char *dst, const char *src, size_t n) {
  size_t head = (32 - (uintptr_t)dst % 32) % 32;
  if (head > n) head = n;
  memcpy(dst, src, head);
  size_t i = head;
  for (; i + 128 <= n; i += 128) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(src + i + 32));
    __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(src + i + 64));
    __m256i e = _mm256_loadu_si256((const __m256i *)(const void *)(src + i + 96));
    _mm256_stream_si256((__m256i *)(void *)(dst + i), a);
    _mm256_stream_si256((__m256i *)(void *)(dst + i + 32), b);
    _mm256_stream_si256((__m256i *)(void *)(dst + i + 64), c);
    _mm256_stream_si256((__m256i *)(void *)(dst + i + 96), e);
  }
  memcpy(dst + i, src + i, n - i);
}
#endif

static void copy_stream(void *dst, const void *src, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (n >= 4096 && __builtin_cpu_supports("avx2")) {
    copy_stream_avx2(dst, src, n);
    return;
  }
#endif
  memcpy(dst, src, n);
}

/* Orders the streaming stores before whatever the caller does next (they are weakly ordered). */
static void copy_stream_fence(void) {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

/* The verified read of a copy in memory (ck_map_tmpfs): the file's pages are hashed in place and
 * only the needed bytes copied out, each block right after its hash while it is in cache. A read()
 * would copy every byte, needed or not, through a buffer first. */
static ftl_err verify_mapped(const unsigned char *map, uint64_t fsize, const ck_need *needs, int nneeds,
                             ck_verifier *v, ftl_diag *d) {
  int ni = 0;
  for (uint64_t p = 0; p < fsize;) {
    uint64_t q = fsize - p > CK_VERIFY_BLOCK ? p + CK_VERIFY_BLOCK : fsize;
    while (ni < nneeds && needs[ni].file_offset + needs[ni].size_bytes <= p)
      ni++;
    char *dst = NULL;
    if (ni < nneeds && needs[ni].file_offset <= p) {
      uint64_t nend = needs[ni].file_offset + needs[ni].size_bytes;
      if (q > nend) q = nend;
      dst = (char *)needs[ni].dest + (p - needs[ni].file_offset);
    } else if (ni < nneeds && needs[ni].file_offset < q) {
      q = needs[ni].file_offset;
    }
    ck_verifier_feed(v, map + p, (size_t)(q - p));
    if (dst) copy_stream(dst, map + p, (size_t)(q - p));
    p = q;
  }
  copy_stream_fence();
  return ck_verifier_finish(v, d);
}

/* The verified read hashes what it reads in blocks small enough to be hashed while they are still
 * in the CPU's cache (a read of 8 MiB and then its hash costs a second trip through memory), and
 * asks the kernel for the next window of the file while it hashes this one, so the disk is busy
 * during the hashing rather than after it. */
ftl_err ck_shard_verify_read(const char *dir, const ck_manifest *m, const ck_shard *sh, const ck_need *needs,
                             int nneeds, size_t chunk_bytes, void *bounce, size_t bounce_bytes, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  int fd = -1;
  uint64_t fsize = 0, ahead = 0;
  ck_verifier *v = NULL;
  size_t block = CK_VERIFY_BLOCK;
  if (block > bounce_bytes) block = bounce_bytes;
  if (chunk_bytes < block) chunk_bytes = block;
  rc = open_shard(dir, sh, &fd, &fsize, d);
  if (rc) goto out;
  rc = ck_verifier_new(m, sh, &v, d);
  if (rc) goto out;
  unsigned char *map = ck_map_tmpfs(fd, fsize);
  if (map) {
    rc = verify_mapped(map, fsize, needs, nneeds, v, d);
    munmap(map, (size_t)fsize);
    goto out;
  }
  int ni = 0;
  for (uint64_t p = 0; p < fsize;) {
    /* Read-ahead: one window (the I/O chunk) past the block being read. A hint: if it fails, the
     * reads below still read. */
    if (ahead < fsize && ahead < p + chunk_bytes) {
      (void)posix_fadvise(fd, (off_t)ahead, (off_t)chunk_bytes, POSIX_FADV_WILLNEED);
      ahead += chunk_bytes;
    }
    uint64_t q = fsize - p > block ? p + block : fsize;
    while (ni < nneeds && needs[ni].file_offset + needs[ni].size_bytes <= p)
      ni++;
    char *dst;
    if (ni < nneeds && needs[ni].file_offset <= p) {
      uint64_t nend = needs[ni].file_offset + needs[ni].size_bytes;
      if (q > nend) q = nend;
      dst = (char *)needs[ni].dest + (p - needs[ni].file_offset);
    } else {
      if (ni < nneeds && needs[ni].file_offset < q) q = needs[ni].file_offset;
      dst = bounce;
    }
    rc = core_fs_pread_all(fd, dst, (size_t)(q - p), p);
    if (rc) {
      rc = ftl_diag_fail(d, rc, "%s: read at byte %llu failed: %s", sh->file, (unsigned long long)p,
                         errno ? strerror(errno) : "file ends early");
      goto out;
    }
    ck_verifier_feed(v, dst, (size_t)(q - p));
    p = q;
  }
  rc = ck_verifier_finish(v, d);
out:
  ck_verifier_free(v);
  if (fd >= 0) core_fs_table.close(fd);
  return rc;
}

ftl_err ck_shard_read(const char *dir, const ck_shard *sh, const ck_need *needs, int nneeds, ftl_diag *d) {
  int fd = -1;
  uint64_t fsize = 0;
  ftl_err rc = open_shard(dir, sh, &fd, &fsize, d);
  if (rc) return rc;
  for (int i = 0; i < nneeds && !rc; i++) {
    rc = core_fs_pread_all(fd, needs[i].dest, (size_t)needs[i].size_bytes, needs[i].file_offset);
    if (rc)
      rc = ftl_diag_fail(d, rc, "%s: read at byte %llu failed: %s", sh->file, (unsigned long long)needs[i].file_offset,
                         errno ? strerror(errno) : "file ends early");
  }
  core_fs_table.close(fd);
  return rc;
}
