/* pipeline/archive_seam.c: the one file that talks to libarchive (archive_seam.h). */
#include "pipeline/archive_seam.h"

#include <archive.h>
#include <archive_entry.h>
#include <string.h>

#include "ftl/core.h"
#include "pipeline/pl_util.h"

struct pl_archive_w {
  struct archive *a;
  pl_buf out;
};

static la_ssize_t w_write(struct archive *a, void *ctx, const void *buf, size_t n) {
  (void)a;
  pl_archive_w *w = ctx;
  pl_buf_put(&w->out, buf, n);
  return w->out.bad ? -1 : (la_ssize_t)n;
}

static int w_close(struct archive *a, void *ctx) {
  (void)a;
  (void)ctx;
  return ARCHIVE_OK;
}

void pl_aw_abort(pl_archive_w *w) {
  if (!w) return;
  if (w->a) archive_write_free(w->a);
  ftl_free(w->out.p);
  ftl_free(w);
}

ftl_err pl_aw_open(pl_archive_w **out, ftl_diag *d) {
  *out = NULL;
  pl_archive_w *w = ftl_calloc(1, sizeof *w);
  if (!w || !(w->a = archive_write_new())) {
    pl_aw_abort(w);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory creating an archive");
  }
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

ftl_err pl_aw_add(pl_archive_w *w, const char *name, const void *data, size_t size, ftl_diag *d) {
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
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot add %s to the archive: %s", name, archive_error_string(w->a));
    goto out;
  }
  const char *p = data;
  size_t left = size;
  while (left) {
    la_ssize_t n = archive_write_data(w->a, p, left);
    if (n <= 0) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot write %s into the archive: %s", name, archive_error_string(w->a));
      goto out;
    }
    p += n;
    left -= (size_t)n;
  }
out:
  archive_entry_free(e);
  return rc;
}

ftl_err pl_aw_finish(pl_archive_w *w, uint8_t **bytes, size_t *size, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  *bytes = NULL;
  *size = 0;
  if (archive_write_close(w->a) != ARCHIVE_OK || w->out.bad) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot finish the archive: %s",
                       archive_error_string(w->a) ? archive_error_string(w->a) : "out of memory");
  } else {
    *bytes = (uint8_t *)w->out.p;
    *size = w->out.len;
    w->out.p = NULL;
  }
  pl_aw_abort(w);
  return rc;
}

struct pl_archive_r {
  struct archive *a;
};

void pl_ar_close(pl_archive_r *r) {
  if (!r) return;
  if (r->a) archive_read_free(r->a);
  ftl_free(r);
}

static ftl_err ar_new(pl_archive_r **out, ftl_diag *d) {
  pl_archive_r *r = ftl_calloc(1, sizeof *r);
  *out = NULL;
  if (!r || !(r->a = archive_read_new())) {
    pl_ar_close(r);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory opening an archive");
  }
  /* Only what a package is: no other format's reader is reachable from outside bytes. */
  if (archive_read_support_format_tar(r->a) != ARCHIVE_OK || archive_read_support_filter_zstd(r->a) != ARCHIVE_OK) {
    ftl_err rc = ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "libarchive cannot read tar+zstd here: %s",
                               archive_error_string(r->a) ? archive_error_string(r->a) : "?");
    pl_ar_close(r);
    return rc;
  }
  *out = r;
  return FTL_OK;
}

ftl_err pl_ar_open_file(const char *path, pl_archive_r **out, ftl_diag *d) {
  ftl_err rc = ar_new(out, d);
  if (rc) return rc;
  if (archive_read_open_filename((*out)->a, path, 65536) != ARCHIVE_OK) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "cannot open %s as a package: %s", path, archive_error_string((*out)->a));
    pl_ar_close(*out);
    *out = NULL;
  }
  return rc;
}

ftl_err pl_ar_open_memory(const void *bytes, size_t size, pl_archive_r **out, ftl_diag *d) {
  ftl_err rc = ar_new(out, d);
  if (rc) return rc;
  if (archive_read_open_memory((*out)->a, bytes, size) != ARCHIVE_OK) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "not a package: %s", archive_error_string((*out)->a));
    pl_ar_close(*out);
    *out = NULL;
  }
  return rc;
}

ftl_err pl_ar_next(pl_archive_r *r, pl_ar_entry *e, int *eof, ftl_diag *d) {
  struct archive_entry *ae = NULL;
  memset(e, 0, sizeof *e);
  *eof = 0;
  int st = archive_read_next_header(r->a, &ae);
  if (st == ARCHIVE_EOF) {
    *eof = 1;
    return FTL_OK;
  }
  /* ARCHIVE_WARN (a header the reader had to guess about) is refused like an error. */
  if (st != ARCHIVE_OK)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the archive is damaged: %s",
                         archive_error_string(r->a) ? archive_error_string(r->a) : "unreadable header");
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

int pl_ar_is_zstd(pl_archive_r *r) { return archive_filter_code(r->a, 0) == ARCHIVE_FILTER_ZSTD; }

ftl_err pl_ar_read(pl_archive_r *r, void *buf, size_t n, size_t *got, ftl_diag *d) {
  la_ssize_t k = archive_read_data(r->a, buf, n);
  *got = 0;
  if (k < 0)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the archive is damaged: %s",
                         archive_error_string(r->a) ? archive_error_string(r->a) : "unreadable data");
  *got = (size_t)k;
  return FTL_OK;
}
