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
 * Not here: deciding which pieces a rank writes or needs (ckpt.c). */
#include "checkpoint/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

ftl_err ck_shard_write(const char *dir, const ck_manifest *m, ck_shard *sh, const void *const *data, size_t chunk_bytes,
                       void *bounce, size_t bounce_bytes, int64_t step, int world_size, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  char path[PATH_MAX], tmp[PATH_MAX];
  ck_h5_dset *ds = NULL;
  char(*names)[CK_NAME_MAX + 16] = NULL;
  int64_t(*dims)[CK_MAX_DIMS] = NULL;
  seg *segs = NULL;
  uint64_t *hashes = NULL;
  unsigned char *triples = NULL;
  int fd = -1, np = sh->npieces;
  if (ftl_fmt(path, sizeof path, "%s/%s", dir, sh->file) || ftl_fmt(tmp, sizeof tmp, "%s/%s.tmp", dir, sh->file))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s/%s", dir, sh->file);
  size_t cap = (size_t)np * 2 + 1;
  ds = ftl_calloc((size_t)np + 1, sizeof *ds);
  names = ftl_calloc((size_t)np + 1, sizeof *names);
  dims = ftl_calloc((size_t)np + 1, sizeof *dims);
  segs = ftl_calloc(cap, sizeof *segs);
  hashes = ftl_calloc(cap, sizeof *hashes);
  triples = ftl_calloc(cap, 24);
  if (!ds || !names || !dims || !segs || !hashes || !triples) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory writing %s", path);
    goto out;
  }
  uint64_t total = 0;
  for (int p = 0; p < np; p++) {
    ck_piece *pc = &sh->pieces[p];
    const ck_item *it = &m->items[pc->item];
    int blob = it->kind == CK_KIND_BLOB_GLOBAL || it->kind == CK_KIND_BLOB_PER_RANK, ovf = 0;
    snprintf(names[p], sizeof names[p], "/%s/%s", blob ? "blobs" : "tensors", it->name);
    dims[p][0] = pc->row_count;
    for (int k = 1; k < it->ndim; k++)
      dims[p][k] = it->shape[k];
    ds[p] = (ck_h5_dset){.path = names[p],
                         .dtype = it->dtype,
                         .ndim = it->ndim,
                         .dims = dims[p],
                         .global_shape = it->shape,
                         .row_start = pc->row_start,
                         .layout = ck_kind_name(it->kind)};
    pc->size_bytes = ck_item_row_bytes(it, &ovf) * (uint64_t)pc->row_count;
    total += pc->size_bytes;
  }
  int64_t t0 = ftl_clock_ns();
  /* Whatever is in the way (a leftover, or a FIFO or link someone put there) goes first: HDF5
   * opens with O_CREAT|O_TRUNC and would write through a link or wait on a FIFO. */
  if (core_fs_table.unlink(tmp) != 0 && errno != ENOENT) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot remove the leftover %s: %s", tmp, strerror(errno));
    goto out;
  }
  rc = ck_h5_create_shard(tmp, step, sh->rank, world_size, ds, np, d);
  if (rc) goto out;
  int64_t t1 = ftl_clock_ns();
  for (int p = 0; p < np; p++) {
    if (ds[p].size_bytes != sh->pieces[p].size_bytes) {
      rc = ftl_diag_fail(d, FTL_ERR_HDF5, "HDF5 gave %s %llu bytes, expected %llu", names[p],
                         (unsigned long long)ds[p].size_bytes, (unsigned long long)sh->pieces[p].size_bytes);
      goto out;
    }
    sh->pieces[p].file_offset = ds[p].file_offset;
  }
  fd = core_fs_table.open(tmp, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot reopen %s: %s", tmp, strerror(errno));
    goto out;
  }
  uint64_t fsize = (uint64_t)st.st_size;
  for (int p = 0; p < np; p++) {
    uint64_t end = sh->pieces[p].file_offset + sh->pieces[p].size_bytes;
    if (end > fsize) fsize = end;
  }
  /* Also when the size is right: the truncate gives back what h5.c reserved beyond the end. */
  if (core_fs_table.ftruncate(fd, (off_t)fsize) != 0) {
    rc = ftl_diag_fail(d, core_errno_to_err(errno), "cannot extend %s: %s", tmp, strerror(errno));
    goto out;
  }
  int nseg = build_segments(sh, fsize, segs);
  if (nseg < 0) {
    rc = ftl_diag_fail(d, FTL_ERR_HDF5, "HDF5 placed datasets of %s on top of each other", tmp);
    goto out;
  }
  uint64_t written = 0;
  int crashed = 0;
  for (int s = 0; s < nseg; s++) {
    XXH3_state_t st3;
    XXH3_64bits_reset(&st3);
    const char *src = segs[s].piece >= 0 ? data[segs[s].piece] : NULL;
    for (uint64_t done = 0; done < segs[s].len;) {
      size_t n = (size_t)(segs[s].len - done);
      if (src) {
        if (n > chunk_bytes) n = chunk_bytes;
        CK_HASH_UPDATE(&st3, src + done, n);
        rc = core_fs_pwrite_all(fd, src + done, n, segs[s].off + done);
        if (rc) {
          rc = ftl_diag_fail(d, rc, "write of %zu bytes at %llu to %s failed: %s", n,
                             (unsigned long long)(segs[s].off + done), tmp, strerror(errno));
          goto out;
        }
        /* Start the disk on these bytes now, so the fsync below finds little left to do. A hint:
         * its failure changes nothing (the fsync is what makes the bytes durable). */
        (void)sync_file_range(fd, (off_t)(segs[s].off + done), (off_t)n, SYNC_FILE_RANGE_WRITE);
        written += n;
        if (!crashed && total > 0 && written * 2 >= total) {
          crashed = 1;
          core_crash_point("mid_shard", sh->rank, step);
        }
      } else {
        if (n > bounce_bytes) n = bounce_bytes;
        rc = core_fs_pread_all(fd, bounce, n, segs[s].off + done);
        if (rc) {
          rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot read back HDF5 metadata of %s: %s", tmp,
                             errno ? strerror(errno) : "short file");
          goto out;
        }
        CK_HASH_UPDATE(&st3, bounce, n);
      }
      done += n;
    }
    hashes[s] = (uint64_t)XXH3_64bits_digest(&st3);
    if (segs[s].piece >= 0) sh->pieces[segs[s].piece].checksum = hashes[s];
  }
  sh->size_bytes = fsize;
  sh->checksum = file_checksum(segs, hashes, nseg, triples);
  int64_t t2 = ftl_clock_ns();
  /* The training job will not read these bytes again before a restart: drop them from the cache. */
  bool renamed = false;
  rc = core_fs_commit_tmp(&fd, tmp, path, true, &renamed, d);
  /* A failed fsync of the folder comes after the rename: the shard is not durable, so it goes. */
  if (rc && renamed) core_fs_table.unlink(path);
  if (rc) goto out;
  FTL_LOG(FTL_LOG_DEBUG, "ckpt", "%s: %llu bytes: HDF5 structure %.1f ms, write+hash %.1f ms, fsync+rename %.1f ms",
          path, (unsigned long long)fsize, (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
          (double)(ftl_clock_ns() - t2) / 1e6);
out:
  if (fd >= 0) core_fs_table.close(fd);
  if (rc) core_fs_table.unlink(tmp);
  ftl_free(triples);
  ftl_free(hashes);
  ftl_free(segs);
  ftl_free(dims);
  ftl_free(names);
  ftl_free(ds);
  return rc;
}

/* ---- read -------------------------------------------------------------------------------- */

static ftl_err open_shard(const char *dir, const ck_shard *sh, int *fd_out, uint64_t *size_out, ftl_diag *d) {
  char path[PATH_MAX];
  if (ftl_fmt(path, sizeof path, "%s/%s", dir, sh->file))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s/%s", dir, sh->file);
  int fd = -1;
  ftl_err orc = ck_open_regular(path, O_RDONLY, &fd, d);
  if (orc) return orc;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    core_fs_table.close(fd);
    return ftl_diag_fail(d, FTL_ERR_IO, "%s: cannot stat: %s", sh->file, strerror(errno));
  }
  if ((uint64_t)st.st_size != sh->size_bytes) {
    core_fs_table.close(fd);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: size is %lld bytes, the manifest says %llu", sh->file,
                         (long long)st.st_size, (unsigned long long)sh->size_bytes);
  }
  /* One sequential pass: ask for read-ahead. */
  posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  *fd_out = fd;
  *size_out = (uint64_t)st.st_size;
  return FTL_OK;
}

ftl_err ck_shard_verify_read(const char *dir, const ck_manifest *m, const ck_shard *sh, const ck_need *needs,
                             int nneeds, size_t chunk_bytes, void *bounce, size_t bounce_bytes, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  int fd = -1, bad_piece = -1;
  uint64_t fsize = 0;
  size_t cap = (size_t)sh->npieces * 2 + 1;
  seg *segs = ftl_calloc(cap, sizeof *segs);
  uint64_t *hashes = ftl_calloc(cap, sizeof *hashes);
  unsigned char *triples = ftl_calloc(cap, 24);
  if (!segs || !hashes || !triples) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory verifying %s", sh->file);
    goto out;
  }
  if (chunk_bytes > bounce_bytes) chunk_bytes = bounce_bytes;
  rc = open_shard(dir, sh, &fd, &fsize, d);
  if (rc) goto out;
  int nseg = build_segments(sh, fsize, segs);
  if (nseg < 0) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: pieces overlap or pass the end of the file", sh->file);
    goto out;
  }
  int ni = 0;
  for (int s = 0; s < nseg; s++) {
    XXH3_state_t st3;
    XXH3_64bits_reset(&st3);
    uint64_t p = segs[s].off, end = segs[s].off + segs[s].len;
    while (p < end) {
      uint64_t q = end;
      if (q - p > chunk_bytes) q = p + chunk_bytes;
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
      CK_HASH_UPDATE(&st3, dst, (size_t)(q - p));
      p = q;
    }
    hashes[s] = (uint64_t)XXH3_64bits_digest(&st3);
    if (segs[s].piece >= 0 && bad_piece < 0 && hashes[s] != sh->pieces[segs[s].piece].checksum)
      bad_piece = segs[s].piece;
  }
  if (bad_piece >= 0) {
    char label[CK_NAME_MAX + 64];
    piece_label(m, &sh->pieces[bad_piece], label, sizeof label);
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: checksum mismatch in %s", sh->file, label);
    goto out;
  }
  if (file_checksum(segs, hashes, nseg, triples) != sh->checksum) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: checksum mismatch in the HDF5 metadata (the tensors verify)", sh->file);
    goto out;
  }
out:
  if (fd >= 0) core_fs_table.close(fd);
  ftl_free(triples);
  ftl_free(hashes);
  ftl_free(segs);
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
