/* pipeline/archive_seam.c: the one file that talks to libarchive (archive_seam.h).
 *
 * Map: the writer (memory or fd sink, entries fed in fixed pieces); the reader's input (a bounded
 * regular file or memory, hashed as it is read); the walk of the decompressed tar stream and the
 * walk of the input's zstd frames, which catch what libarchive reads past; the reader itself (a
 * raw-format archive that decompresses, teeing into the walk and into a tar-format archive that
 * parses entries).
 *
 * Why one file (issue 33): it is the seam, the one file that includes libarchive's headers
 * (archive.h, archive_entry.h), so the rest of pipeline/ never sees an archive handle and a test
 * could link a fake in its place (archive_seam.h). The two walks use no libarchive type, but they
 * live in the reader's handle (pl_archive_r), are fed as it reads, and exist only to catch what
 * this reader lets through: a fake seam would replace them along with it.
 *
 * Not here: the package's rules (pipeline/package.c). */
#include "pipeline/archive_seam.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/fs.h"
#include "ftl/core.h"
#include "pipeline/pl_util.h"

/* ---- writer -------------------------------------------------------------------------------- */

/* Entry data is handed to libarchive in pieces of exactly this size (the last one shorter), so
 * the zstd stream does not depend on how the caller split its data. */
#define AW_PIECE ((size_t)1 << 16)

struct pl_archive_w {
  struct archive *a;
  core_buf out;      /* memory sink (bounded by what its caller adds, so only by memory here) */
  int fd;            /* fd sink when >= 0 */
  uint64_t off;      /* bytes written to fd */
  pl_sha256 *h;     /* of the bytes written to fd */
  const char *crash; /* crash point after the first write to fd */
  ftl_err sink_rc;   /* the fd sink's failure, errno in sink_errno */
  int sink_errno;
  unsigned char *piece; /* AW_PIECE bytes */
  size_t piece_len;
  const char *name; /* the entry being streamed (borrowed) */
  uint64_t left;    /* its bytes still to come */
  int in_entry;
};

static la_ssize_t w_write(struct archive *a, void *ctx, const void *buf, size_t n) {
  (void)a;
  pl_archive_w *w = ctx;
  if (w->fd < 0) {
    return core_buf_add(&w->out, buf, n) ? -1 : (la_ssize_t)n;
  }
  ftl_err rc = core_fs_pwrite_all(w->fd, buf, n, w->off);
  if (rc) {
    w->sink_rc = rc;
    w->sink_errno = errno;
    return -1;
  }
  pl_sha256_update(w->h, buf, n);
  if (!w->off && w->crash) pl_crash_point(w->crash);
  w->off += n;
  return (la_ssize_t)n;
}

static int w_close(struct archive *a, void *ctx) {
  (void)a;
  (void)ctx;
  return ARCHIVE_OK;
}

void pl_aw_abort(pl_archive_w *w) {
  if (!w) return;
  if (w->a) archive_write_free(w->a);
  core_buf_free(&w->out);
  ftl_free(w->piece);
  pl_sha256_abort(w->h);
  ftl_free(w);
}

static ftl_err aw_open(int fd, const char *crash, pl_archive_w **out, ftl_diag *d) {
  *out = NULL;
  pl_archive_w *w = ftl_calloc(1, sizeof *w);
  if (!w || !(w->piece = ftl_malloc(AW_PIECE)) || !(w->a = archive_write_new()) ||
      (fd >= 0 && pl_sha256_begin(&w->h))) {
    pl_aw_abort(w);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory creating an archive");
  }
  w->fd = fd;
  w->crash = crash;
  core_buf_init(&w->out, SIZE_MAX);
  /* ARCHIVE_WARN from the zstd filter means libarchive would run an external zstd program:
   * refused, its output is not ours to pin. Default threads (single-threaded format). */
  if (archive_write_set_format_pax_restricted(w->a) != ARCHIVE_OK ||
      archive_write_add_filter_zstd(w->a) != ARCHIVE_OK ||
      archive_write_set_filter_option(w->a, "zstd", "compression-level", PL_ARCHIVE_ZSTD_LEVEL) != ARCHIVE_OK ||
      archive_write_set_bytes_in_last_block(w->a, 1) != ARCHIVE_OK ||
      archive_write_open2(w->a, w, NULL, w_write, w_close, NULL) != ARCHIVE_OK) {
    ftl_err rc = ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "libarchive cannot write pax+zstd here: %s",
                               archive_error_string(w->a) ? archive_error_string(w->a) : "no libzstd");
    pl_aw_abort(w);
    return rc;
  }
  *out = w;
  return FTL_OK;
}

ftl_err pl_aw_open(pl_archive_w **out, ftl_diag *d) { return aw_open(-1, NULL, out, d); }

ftl_err pl_aw_open_fd(int fd, const char *crash_name, pl_archive_w **out, ftl_diag *d) {
  if (fd < 0) return ftl_diag_fail(d, FTL_ERR_INVAL, "no file descriptor to write the archive to");
  return aw_open(fd, crash_name, out, d);
}

/* The archive's error, or the fd sink's when that is what failed. */
static ftl_err aw_fail(pl_archive_w *w, const char *what, ftl_diag *d) {
  if (w->sink_rc)
    return ftl_diag_fail(d, w->sink_rc, "%s: cannot write the archive: %s", what, strerror(w->sink_errno));
  return ftl_diag_fail(d, FTL_ERR_IO, "%s: %s", what,
                       archive_error_string(w->a) ? archive_error_string(w->a) : "out of memory");
}

ftl_err pl_aw_begin(pl_archive_w *w, const char *name, uint64_t size, ftl_diag *d) {
  if (w->in_entry) return ftl_diag_fail(d, FTL_ERR_STATE, "archive entry %s begun inside %s", name, w->name);
  struct archive_entry *e = archive_entry_new();
  ftl_err rc = FTL_OK;
  if (!e) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  archive_entry_set_pathname(e, name);
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_size(e, (la_int64_t)size);
  archive_entry_set_mtime(e, 0, 0);
  archive_entry_set_uid(e, 0);
  archive_entry_set_gid(e, 0);
  if (archive_write_header(w->a, e) != ARCHIVE_OK) {
    char what[320];
    snprintf(what, sizeof what, "cannot add %s to the archive", name);
    rc = aw_fail(w, what, d);
  } else {
    w->name = name;
    w->left = size;
    w->piece_len = 0;
    w->in_entry = 1;
  }
  archive_entry_free(e);
  return rc;
}

static ftl_err aw_flush_piece(pl_archive_w *w, ftl_diag *d) {
  size_t at = 0;
  while (at < w->piece_len) {
    la_ssize_t n = archive_write_data(w->a, w->piece + at, w->piece_len - at);
    if (n <= 0) {
      char what[320];
      snprintf(what, sizeof what, "cannot write %s into the archive", w->name);
      return aw_fail(w, what, d);
    }
    at += (size_t)n;
  }
  w->piece_len = 0;
  return FTL_OK;
}

ftl_err pl_aw_data(pl_archive_w *w, const void *data, size_t n, ftl_diag *d) {
  const unsigned char *p = data;
  if (!w->in_entry) return ftl_diag_fail(d, FTL_ERR_STATE, "archive data outside an entry");
  if (n > w->left)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "%s: more data than the %llu bytes its header says", w->name,
                         (unsigned long long)w->left);
  w->left -= n;
  while (n) {
    size_t k = AW_PIECE - w->piece_len < n ? AW_PIECE - w->piece_len : n;
    memcpy(w->piece + w->piece_len, p, k);
    w->piece_len += k;
    p += k;
    n -= k;
    if (w->piece_len == AW_PIECE) {
      ftl_err rc = aw_flush_piece(w, d);
      if (rc) return rc;
    }
  }
  return FTL_OK;
}

ftl_err pl_aw_end(pl_archive_w *w, ftl_diag *d) {
  if (!w->in_entry) return ftl_diag_fail(d, FTL_ERR_STATE, "archive entry ended outside an entry");
  if (w->left)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "%s: %llu bytes short of its header's size", w->name,
                         (unsigned long long)w->left);
  ftl_err rc = aw_flush_piece(w, d);
  w->in_entry = 0;
  return rc;
}

ftl_err pl_aw_add(pl_archive_w *w, const char *name, const void *data, size_t size, ftl_diag *d) {
  ftl_err rc = pl_aw_begin(w, name, size, d);
  if (!rc) rc = pl_aw_data(w, data, size, d);
  if (!rc) rc = pl_aw_end(w, d);
  return rc;
}

static ftl_err aw_close(pl_archive_w *w, ftl_diag *d) {
  if (w->in_entry) return ftl_diag_fail(d, FTL_ERR_STATE, "archive finished inside entry %s", w->name);
  if (archive_write_close(w->a) != ARCHIVE_OK || w->out.err) return aw_fail(w, "cannot finish the archive", d);
  return FTL_OK;
}

ftl_err pl_aw_finish(pl_archive_w *w, uint8_t **bytes, size_t *size, ftl_diag *d) {
  *bytes = NULL;
  *size = 0;
  ftl_err rc = aw_close(w, d);
  if (!rc) {
    *bytes = (uint8_t *)core_buf_take(&w->out, size);
  }
  pl_aw_abort(w);
  return rc;
}

ftl_err pl_aw_finish_fd(pl_archive_w *w, uint64_t *size, char hex[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  ftl_err rc = aw_close(w, d);
  if (!rc) {
    char h[FTL_SHA256_HEX_LEN + 1];
    rc = pl_sha256_end(w->h, h);
    w->h = NULL;
    if (rc) {
      ftl_diag_fail(d, rc, "cannot hash the archive");
    } else {
      if (size) *size = w->off;
      if (hex) memcpy(hex, h, sizeof h);
    }
  }
  pl_aw_abort(w);
  return rc;
}

/* ---- the walk of the decompressed stream ----------------------------------------------------- */

/* A tar is a sequence of 512-byte blocks: a header, its data rounded up to a block, the next
 * header... then two zero blocks. The walk follows that and pax's `size` and `path` records, no
 * more: everything else about an entry is libarchive's to parse and package.c's to refuse. */
enum { W_HEADER, W_PAX, W_SKIP, W_END1, W_TRAIL };

typedef struct walk {
  int state;
  unsigned char blk[512];
  size_t blk_have;
  uint64_t skip; /* W_SKIP: bytes to pass over */
  char *pax;     /* W_PAX: the extended header's records */
  size_t pax_len, pax_need;
  uint64_t pax_pad; /* its padding, passed over afterwards */
  int have_size;    /* a pax `size` record for the next header */
  uint64_t next_size;
  uint64_t headers; /* headers seen, for messages */
  uint64_t trail;   /* zero bytes after the end-of-archive marker */
  int failed;
  char msg[sizeof(((ftl_diag *)0)->msg)];
} walk;

__attribute__((format(printf, 2, 3))) static void walk_fail(walk *k, const char *fmt, ...) {
  if (k->failed) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(k->msg, sizeof k->msg, fmt, ap);
  va_end(ap);
  k->failed = 1;
}

static int block_is_zero(const unsigned char *b) {
  for (size_t i = 0; i < 512; i++)
    if (b[i]) return 0;
  return 1;
}

/* The ustar size field: octal, or base-256 when its first byte has the high bit set. */
static uint64_t header_size(const unsigned char *h) {
  const unsigned char *f = h + 124;
  uint64_t v = 0;
  if (f[0] & 0x80) {
    for (int i = 1; i < 12; i++)
      v = (v << 8) | f[i];
    return v;
  }
  int i = 0;
  while (i < 12 && (f[i] == ' ' || f[i] == '\0'))
    i++;
  for (; i < 12 && f[i] >= '0' && f[i] <= '7'; i++)
    v = (v << 3) | (uint64_t)(f[i] - '0');
  return v;
}

static uint64_t round_block(uint64_t n) { return (n + 511) & ~(uint64_t)511; }

/* Pax records "LEN key=value\n". A malformed one ends the walk's reading of the header quietly:
 * libarchive warns about it and the reader refuses the warning. */
static void walk_pax(walk *k) {
  size_t at = 0;
  while (at < k->pax_len) {
    uint64_t len = 0;
    size_t i = at;
    while (i < k->pax_len && k->pax[i] >= '0' && k->pax[i] <= '9' && len < k->pax_len)
      len = len * 10 + (uint64_t)(k->pax[i++] - '0');
    /* At least the digits, the space, '=' and the newline. */
    if (i >= k->pax_len || k->pax[i] != ' ' || len < (i - at) + 3 || len > k->pax_len - at) return;
    const char *key = k->pax + i + 1, *end = k->pax + at + len - 1;
    const char *eq = memchr(key, '=', (size_t)(end - key));
    if (*end != '\n' || !eq) return;
    size_t klen = (size_t)(eq - key), vlen = (size_t)(end - eq - 1);
    const char *val = eq + 1;
    if ((klen == 4 && !memcmp(key, "path", 4)) || (klen == 8 && !memcmp(key, "linkpath", 8))) {
      if (memchr(val, '\0', vlen)) {
        walk_fail(k,
                  "header %llu: its pax %.*s record holds a NUL byte (\"%.*s\" and %zu bytes after the NUL, which "
                  "readers disagree about); refused",
                  (unsigned long long)k->headers, (int)klen, key, (int)strnlen(val, vlen > 200 ? 200 : vlen), val,
                  vlen - strnlen(val, vlen) - 1);
        return;
      }
    } else if (klen == 4 && !memcmp(key, "size", 4)) {
      uint64_t v = 0;
      for (size_t j = 0; j < vlen && val[j] >= '0' && val[j] <= '9' && v < ((uint64_t)1 << 60); j++)
        v = v * 10 + (uint64_t)(val[j] - '0');
      k->have_size = 1;
      k->next_size = v;
    }
    at += (size_t)len;
  }
}

static void walk_header(walk *k) {
  const unsigned char *h = k->blk;
  k->blk_have = 0;
  if (k->state == W_END1) {
    if (block_is_zero(h))
      k->state = W_TRAIL;
    else
      walk_fail(k, "the package holds data after the end of the archive (a header after a zero block); refused");
    return;
  }
  if (block_is_zero(h)) {
    k->state = W_END1;
    return;
  }
  k->headers++;
  uint64_t size = header_size(h);
  char type = (char)h[156];
  /* libarchive applies a global header's records to nothing and reports nothing, but other readers
   * apply them (a `path`, a `size`) to every later entry: a second reading of the same bytes. */
  if (type == 'g') {
    walk_fail(k,
              "header %llu is a pax global header, which would change how every later entry is read (a package "
              "has none); refused",
              (unsigned long long)k->headers);
    return;
  }
  if (type == 'x') {
    if (size > PL_AR_MAX_PAX) {
      walk_fail(k, "header %llu: a pax header of %llu bytes, over the limit of %llu; refused",
                (unsigned long long)k->headers, (unsigned long long)size, (unsigned long long)PL_AR_MAX_PAX);
      return;
    }
    ftl_free(k->pax);
    if (!(k->pax = ftl_malloc(size ? (size_t)size : 1))) {
      walk_fail(k, "out of memory");
      return;
    }
    k->pax_len = 0;
    k->pax_need = (size_t)size;
    k->pax_pad = round_block(size) - size;
    k->state = W_PAX;
    return;
  }
  if (k->have_size) size = k->next_size;
  k->have_size = 0;
  /* Links, devices and FIFOs carry no data whatever their size field says (as libarchive reads
   * them); package.c refuses them anyway. */
  if (type == '1' || type == '2' || type == '3' || type == '4' || type == '6') size = 0;
  k->skip = round_block(size);
  k->state = k->skip ? W_SKIP : W_HEADER;
}

static void walk_feed(walk *k, const unsigned char *p, size_t n) {
  while (n && !k->failed) {
    switch (k->state) {
    case W_HEADER:
    case W_END1: {
      size_t m = 512 - k->blk_have < n ? 512 - k->blk_have : n;
      memcpy(k->blk + k->blk_have, p, m);
      k->blk_have += m;
      p += m;
      n -= m;
      if (k->blk_have == 512) walk_header(k);
      break;
    }
    case W_PAX: {
      size_t m = k->pax_need - k->pax_len < n ? k->pax_need - k->pax_len : n;
      memcpy(k->pax + k->pax_len, p, m);
      k->pax_len += m;
      p += m;
      n -= m;
      if (k->pax_len == k->pax_need) {
        walk_pax(k);
        k->skip = k->pax_pad;
        k->state = k->skip ? W_SKIP : W_HEADER;
      }
      break;
    }
    case W_SKIP: {
      size_t m = k->skip < n ? (size_t)k->skip : n;
      k->skip -= m;
      p += m;
      n -= m;
      if (!k->skip) k->state = W_HEADER;
      break;
    }
    default: /* W_TRAIL */
      for (size_t i = 0; i < n; i++)
        if (p[i]) {
          walk_fail(k,
                    "the package holds data after the end of the archive (a non-zero byte at offset %llu past "
                    "its end-of-archive marker: another archive or a payload no manifest declares); refused",
                    (unsigned long long)(k->trail + i));
          return;
        }
      k->trail += n;
      n = 0;
      if (k->trail > PL_AR_MAX_PADDING)
        walk_fail(k, "the package holds more than %llu bytes of padding after the end of the archive; refused",
                  (unsigned long long)PL_AR_MAX_PADDING);
    }
  }
}

/* At the end of the decompressed stream. */
static void walk_end(walk *k) {
  if (k->failed || k->state == W_TRAIL) return;
  if (k->state == W_HEADER && !k->blk_have)
    walk_fail(k, "the archive stops after its last entry, without the two zero blocks that end a tar (cut short?); "
                 "refused");
  else if (k->state == W_END1 && !k->blk_have)
    walk_fail(k, "the archive ends with one zero block, not the two that end a tar; refused");
  else
    walk_fail(k, "the archive is cut short inside header %llu or its data; refused", (unsigned long long)k->headers);
}

/* ---- the walk of the compressed input --------------------------------------------------------- */

/* A zstd stream is a sequence of frames (RFC 8878): a frame is a magic number, a header whose length
 * its descriptor byte gives, blocks (a 3-byte header: last-block flag, type, size) and an optional
 * 4-byte checksum. The walk follows that much, to see where each frame ends and what comes next:
 * libzstd passes over a skippable frame (magic 0x184D2A50..0x184D2A5F) without a word, and what
 * libarchive says of bytes that are no frame depends on where they fall, so both are refused here,
 * by offset. Input that does not start with a frame is not zstd: the walk leaves it alone. */
#define Z_MAGIC_FRAME 0xFD2FB528u
#define Z_MAGIC_SKIPPABLE 0x184D2A50u /* the low 4 bits are free */

enum { Z_MAGIC, Z_DESC, Z_BLOCK, Z_OFF };

typedef struct zwalk {
  int state;
  unsigned char b[4]; /* the field being read */
  size_t have, need;
  uint64_t skip;   /* bytes to pass over (a block's content, a checksum) */
  int checksum;    /* the current frame ends with one */
  uint64_t off;    /* input bytes walked */
  uint64_t at;     /* where the current frame started */
  uint64_t frames; /* frames begun */
  int failed;
  char msg[sizeof(((ftl_diag *)0)->msg)];
} zwalk;

__attribute__((format(printf, 2, 3))) static void zwalk_fail(zwalk *z, const char *fmt, ...) {
  if (z->failed) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(z->msg, sizeof z->msg, fmt, ap);
  va_end(ap);
  z->failed = 1;
}

/* The field in z->b is whole: what it says, and the next field. */
static void zwalk_field(zwalk *z) {
  static const unsigned dict_len[4] = {0, 1, 2, 4}, fcs_len[4] = {0, 2, 4, 8};
  uint32_t v = (uint32_t)z->b[0] | (uint32_t)z->b[1] << 8 | (uint32_t)z->b[2] << 16 | (uint32_t)z->b[3] << 24;
  z->have = 0;
  switch (z->state) {
  case Z_MAGIC:
    if (v == Z_MAGIC_FRAME) {
      z->frames++;
      z->state = Z_DESC;
      z->need = 1;
    } else if ((v & ~0xFu) == Z_MAGIC_SKIPPABLE) {
      zwalk_fail(z,
                 "the package holds a zstd skippable frame at offset %llu (bytes the decompressor passes over "
                 "without a word: a payload no manifest declares); refused",
                 (unsigned long long)z->at);
    } else if (!z->frames) {
      z->state = Z_OFF;
    } else {
      zwalk_fail(z,
                 "the package holds data after the end of the archive (offset %llu, after its last zstd frame, "
                 "is not a zstd frame); refused",
                 (unsigned long long)z->at);
    }
    break;
  case Z_DESC: {
    unsigned single = (v >> 5) & 1, fcs = v >> 6;
    z->checksum = (v >> 2) & 1;
    /* The rest of the header (window, dictionary id, content size) is passed over. */
    z->skip = (single ? 0 : 1) + dict_len[v & 3] + (fcs || !single ? fcs_len[fcs] : 1);
    z->state = Z_BLOCK;
    z->need = 3;
    break;
  }
  default: /* Z_BLOCK */
    if (((v >> 1) & 3) == 3) {
      zwalk_fail(z, "the zstd frame at offset %llu holds a block of the reserved type; refused",
                 (unsigned long long)z->at);
      break;
    }
    z->skip = ((v >> 1) & 3) == 1 ? 1 : v >> 3; /* an RLE block's content is its one byte */
    z->need = 3;
    if (v & 1) {
      z->skip += z->checksum ? 4 : 0;
      z->state = Z_MAGIC;
      z->need = 4;
    }
  }
  memset(z->b, 0, sizeof z->b);
}

static void zwalk_feed(zwalk *z, const unsigned char *p, size_t n) {
  while (n && !z->failed && z->state != Z_OFF) {
    if (z->skip) {
      size_t m = z->skip < n ? (size_t)z->skip : n;
      z->skip -= m;
      z->off += m;
      p += m;
      n -= m;
      continue;
    }
    if (z->state == Z_MAGIC && !z->have) z->at = z->off;
    z->b[z->have++] = *p++;
    n--;
    z->off++;
    if (z->have == z->need) zwalk_field(z);
  }
}

/* At the end of the input. */
static void zwalk_end(zwalk *z) {
  if (z->failed || z->state == Z_OFF || !z->frames) return;
  if (z->state == Z_MAGIC && !z->skip && z->have)
    zwalk_fail(z,
               "the package holds data after the end of the archive (%zu bytes at offset %llu, after its last zstd "
               "frame, that are not a frame); refused",
               z->have, (unsigned long long)z->at);
  else if (z->state != Z_MAGIC || z->skip)
    zwalk_fail(z, "the zstd frame at offset %llu is cut short; refused", (unsigned long long)z->at);
}

/* ---- reader -------------------------------------------------------------------------------- */

#define AR_BUF ((size_t)1 << 16)

struct pl_archive_r {
  struct archive *raw; /* the input, decompressed (raw format) */
  struct archive *a;   /* the tar reader, fed from raw through tee_read */
  int fd;              /* file input when >= 0 */
  const unsigned char *mem;
  uint64_t in_size, in_off, in_max;
  pl_sha256 *in_h; /* of the input bytes */
  int in_failed;
  char in_msg[256];
  unsigned char *inbuf, *buf; /* AR_BUF each */
  int raw_eof, raw_failed;
  zwalk z; /* of the input */
  walk k;  /* of the decompressed stream */
};

void pl_ar_close(pl_archive_r *r) {
  if (!r) return;
  if (r->a) archive_read_free(r->a);
  if (r->raw) archive_read_free(r->raw);
  if (r->fd >= 0) core_fs_table.close(r->fd);
  pl_sha256_abort(r->in_h);
  ftl_free(r->inbuf);
  ftl_free(r->buf);
  ftl_free(r->k.pax);
  ftl_free(r);
}

/* The input as libarchive's read callback: from the file through the seam, or from memory,
 * never more than in_max bytes (a file that grows after its size was checked stops there), walked
 * frame by frame on its way (a problem the walk finds stops the reader at once). */
static la_ssize_t in_read(struct archive *a, void *ctx, const void **out) {
  pl_archive_r *r = ctx;
  size_t n = 0;
  if (r->mem) {
    n = r->in_size - r->in_off < AR_BUF ? (size_t)(r->in_size - r->in_off) : AR_BUF;
    *out = r->mem + r->in_off;
  } else {
    for (;;) {
      ssize_t k = core_fs_table.pread(r->fd, r->inbuf, AR_BUF, (off_t)r->in_off);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) {
        snprintf(r->in_msg, sizeof r->in_msg, "cannot read the package: %s", strerror(errno));
        r->in_failed = 1;
        archive_set_error(a, EIO, "%s", r->in_msg);
        return -1;
      }
      n = (size_t)k;
      break;
    }
    *out = r->inbuf;
    if (r->in_off + n > r->in_max) {
      snprintf(r->in_msg, sizeof r->in_msg, "the package grew past the limit of %llu bytes while it was read",
               (unsigned long long)r->in_max);
      r->in_failed = 1;
      archive_set_error(a, EFBIG, "%s", r->in_msg);
      return -1;
    }
  }
  if (n)
    zwalk_feed(&r->z, *out, n);
  else
    zwalk_end(&r->z);
  if (r->z.failed) {
    archive_set_error(a, EINVAL, "%s", r->z.msg);
    return -1;
  }
  pl_sha256_update(r->in_h, *out, n);
  r->in_off += n;
  return (la_ssize_t)n;
}

/* The tar reader's input: the decompressed stream, walked on its way through. A problem the walk
 * finds stops the tar reader too (so a bomb after the end stops at the first bad byte). */
static la_ssize_t tee_read(struct archive *a, void *ctx, const void **out) {
  pl_archive_r *r = ctx;
  *out = r->buf;
  if (r->k.failed) {
    archive_set_error(a, EINVAL, "%s", r->k.msg);
    return -1;
  }
  if (r->raw_eof) return 0;
  la_ssize_t n = archive_read_data(r->raw, r->buf, AR_BUF);
  if (n < 0) {
    r->raw_failed = 1;
    archive_set_error(a, EINVAL, "%s", archive_error_string(r->raw) ? archive_error_string(r->raw) : "?");
    return -1;
  }
  if (n == 0) {
    r->raw_eof = 1;
    walk_end(&r->k);
  } else {
    walk_feed(&r->k, r->buf, (size_t)n);
  }
  /* A problem at the end of the stream waits for pl_ar_next's check at the archive's end, where
   * it is the last thing left to say. */
  if (r->k.failed && n > 0) {
    archive_set_error(a, EINVAL, "%s", r->k.msg);
    return -1;
  }
  return n;
}

/* The most telling message for a failure of the tar reader: the walk's, the input's, the
 * decompressor's, or libarchive's own. */
static ftl_err ar_fail(pl_archive_r *r, const char *fallback, ftl_diag *d) {
  if (r->in_failed) return ftl_diag_fail(d, FTL_ERR_IO, "%s", r->in_msg);
  if (r->z.failed) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s", r->z.msg);
  if (r->k.failed) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s", r->k.msg);
  if (r->raw_failed)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the compressed stream is damaged: %s",
                         archive_error_string(r->raw) ? archive_error_string(r->raw) : "?");
  return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the archive is damaged: %s",
                       archive_error_string(r->a) ? archive_error_string(r->a) : fallback);
}

static ftl_err ar_open(pl_archive_r *r, ftl_diag *d) {
  struct archive_entry *ae = NULL;
  if (pl_sha256_begin(&r->in_h) || !(r->buf = ftl_malloc(AR_BUF)) || (!r->mem && !(r->inbuf = ftl_malloc(AR_BUF))) ||
      !(r->raw = archive_read_new()) || !(r->a = archive_read_new()))
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory opening an archive");
  /* Only what a package is: the zstd filter, and tar; no other format's reader is reachable from
   * outside bytes (the raw format only hands the decompressed bytes on). */
  if (archive_read_support_filter_zstd(r->raw) != ARCHIVE_OK || archive_read_support_format_raw(r->raw) != ARCHIVE_OK ||
      archive_read_support_format_tar(r->a) != ARCHIVE_OK)
    return ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "libarchive cannot read tar+zstd here: %s",
                         archive_error_string(r->raw) ? archive_error_string(r->raw) : "?");
  if (archive_read_open2(r->raw, r, NULL, in_read, NULL, NULL) != ARCHIVE_OK) {
    if (r->in_failed || r->z.failed) return ar_fail(r, "?", d);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "not a package: %s",
                         archive_error_string(r->raw) ? archive_error_string(r->raw) : "unreadable");
  }
  /* libarchive bids filters again on what a filter put out, so a zstd stream inside a zstd stream
   * would be undone twice and read as if it were a package. Filters: zstd, then the input. */
  if (archive_filter_count(r->raw) > 2)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the package is compressed %d times (zstd inside zstd); refused",
                         archive_filter_count(r->raw) - 1);
  if (archive_read_next_header(r->raw, &ae) != ARCHIVE_OK) {
    if (r->in_failed || r->z.failed) return ar_fail(r, "?", d);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "not a package: %s",
                         archive_error_string(r->raw) ? archive_error_string(r->raw) : "unreadable");
  }
  if (archive_read_open2(r->a, r, NULL, tee_read, NULL, NULL) != ARCHIVE_OK) return ar_fail(r, "not a tar", d);
  return FTL_OK;
}

static ftl_err ar_new(pl_archive_r **out, ftl_diag *d) {
  *out = ftl_calloc(1, sizeof **out);
  if (!*out) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory opening an archive");
  (*out)->fd = -1;
  (*out)->z.need = 4;
  return FTL_OK;
}

ftl_err pl_ar_open_file(const char *path, uint64_t max_bytes, pl_archive_r **out, ftl_diag *d) {
  pl_archive_r *r = NULL;
  struct stat st;
  ftl_err rc = ar_new(&r, d);
  if (rc) return rc;
  /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below. */
  r->fd = core_fs_table.open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
  if (r->fd < 0) {
    rc = ftl_diag_fail(d, errno == ENOENT ? FTL_ERR_NOTFOUND : FTL_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    goto out;
  }
  if (fstat(r->fd, &st)) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
    goto out;
  }
  if (!S_ISREG(st.st_mode)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a regular file; refused", path);
    goto out;
  }
  if ((uint64_t)st.st_size > max_bytes) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is %llu bytes, over the limit of %llu for a package; refused", path,
                       (unsigned long long)st.st_size, (unsigned long long)max_bytes);
    goto out;
  }
  r->in_max = max_bytes;
  ftl_diag od;
  if ((rc = ar_open(r, &od))) {
    ftl_diag_fail(d, rc, "%s: %s", path, od.msg);
    goto out;
  }
  *out = r;
  r = NULL;
out:
  pl_ar_close(r);
  return rc;
}

ftl_err pl_ar_open_memory(const void *bytes, size_t size, pl_archive_r **out, ftl_diag *d) {
  pl_archive_r *r = NULL;
  ftl_err rc = ar_new(&r, d);
  if (rc) return rc;
  r->mem = bytes ? bytes : (const unsigned char *)"";
  r->in_size = r->in_max = size;
  if ((rc = ar_open(r, d))) {
    pl_ar_close(r);
    return rc;
  }
  *out = r;
  return FTL_OK;
}

/* After the tar reader's end: the rest of the decompressed stream goes through the walk, which
 * accepts zero padding only and must have seen the end-of-archive marker; then the rest of the
 * input through the frame walk, which must end at the end of a zstd frame. */
static ftl_err ar_drain(pl_archive_r *r, ftl_diag *d) {
  while (!r->raw_eof && !r->k.failed) {
    la_ssize_t n = archive_read_data(r->raw, r->buf, AR_BUF);
    if (n < 0) {
      r->raw_failed = 1;
      break;
    }
    if (n == 0) {
      r->raw_eof = 1;
      walk_end(&r->k);
    } else {
      walk_feed(&r->k, r->buf, (size_t)n);
    }
  }
  /* The decompressor has had the whole input when it ends, but that is libarchive's habit, not
   * its promise: whatever is left is walked too, up to the input's end (which ends the walk). */
  while (!r->k.failed && !r->raw_failed && !r->in_failed && !r->z.failed) {
    const void *p;
    if (in_read(r->raw, r, &p) <= 0) break;
  }
  if (r->in_failed || r->z.failed || r->k.failed || r->raw_failed) return ar_fail(r, "?", d);
  return FTL_OK;
}

ftl_err pl_ar_next(pl_archive_r *r, pl_ar_entry *e, int *eof, ftl_diag *d) {
  struct archive_entry *ae = NULL;
  memset(e, 0, sizeof *e);
  *eof = 0;
  int st = archive_read_next_header(r->a, &ae);
  if (st == ARCHIVE_EOF) {
    ftl_err rc = ar_drain(r, d);
    if (!rc) *eof = 1;
    return rc;
  }
  /* ARCHIVE_WARN (a header the reader had to guess about) is refused like an error. */
  if (st != ARCHIVE_OK) return ar_fail(r, "unreadable header", d);
  e->name = archive_entry_pathname(ae);
  if (!e->name) e->name = "";
  mode_t ft = archive_entry_filetype(ae);
  if (archive_entry_hardlink(ae))
    e->type = PL_AR_HARDLINK;
  else if (ft == AE_IFLNK || archive_entry_symlink(ae))
    e->type = PL_AR_SYMLINK;
  else if (ft == AE_IFREG)
    e->type = PL_AR_REGULAR;
  else if (ft == AE_IFDIR)
    e->type = PL_AR_DIR;
  else
    e->type = PL_AR_OTHER;
  e->size_set = archive_entry_size_is_set(ae) != 0;
  e->size = archive_entry_size(ae);
  e->sparse = archive_entry_sparse_count(ae) > 0;
  return FTL_OK;
}

int pl_ar_is_zstd(pl_archive_r *r) { return archive_filter_code(r->raw, 0) == ARCHIVE_FILTER_ZSTD; }

ftl_err pl_ar_read(pl_archive_r *r, void *buf, size_t n, size_t *got, ftl_diag *d) {
  la_ssize_t k = archive_read_data(r->a, buf, n);
  *got = 0;
  if (k < 0) return ar_fail(r, "unreadable data", d);
  *got = (size_t)k;
  return FTL_OK;
}

ftl_err pl_ar_input_digest(pl_archive_r *r, uint64_t *size, char hex[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  /* At the archive's end the input was walked to its end (ar_drain); whatever a caller that
   * stopped earlier left is hashed too, so the digest is of the whole input. */
  while (!r->mem && !r->in_failed) {
    const void *p;
    la_ssize_t n = in_read(r->raw, r, &p);
    if (n <= 0) break;
  }
  if (r->in_failed) return ftl_diag_fail(d, FTL_ERR_IO, "%s", r->in_msg);
  if (r->z.failed) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s", r->z.msg);
  if (r->mem) {
    pl_sha256_update(r->in_h, r->mem + r->in_off, (size_t)(r->in_size - r->in_off));
    r->in_off = r->in_size;
  }
  ftl_err rc = pl_sha256_end(r->in_h, hex);
  r->in_h = NULL;
  if (rc) return ftl_diag_fail(d, rc, "cannot hash the package");
  *size = r->in_off;
  return FTL_OK;
}
