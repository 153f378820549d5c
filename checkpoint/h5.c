/* checkpoint/h5.c: HDF5 calls of the checkpoint module (see h5.h). Layout choices, each for a
 * measured reason (../docs/formats/shard.md): contiguous datasets (chunking costs 2x), no
 * Fletcher-32 filter (about 2.4 s per 256 MiB here), allocation at create time with no fill, so
 * the dataset's address is fixed before any byte of it is written and HDF5 never writes raw data.
 *
 * Map: HDF5's errors; file types and attributes; creating a shard (closed once, its space
 * reserved, its datasets allocated unfilled); reading a shard's own description back (attributes,
 * dtype classes, each piece's dataset checked against the manifest).
 *
 * Not here: any tensor byte (shard.c streams them through the file seam). */
#include "checkpoint/h5.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/dtype_table.h"
#include "core/fs.h"
#include "ftl/core.h"

/* ---- HDF5's errors ---------------------------------------------------------------------- */

/* HDF5 keeps its error stack per thread; its default printer is turned off in each thread. */
static void h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* What a walk of HDF5's error stack found: the API-level message (the first, walking down), the
 * innermost one (where the failure was detected, often the sec2 driver's, which carries the
 * errno), and that errno when a message states one ("errno = 28"). */
typedef struct h5_stack {
  char top[240], inner[240];
  int err_no;
} h5_stack;

static herr_t h5_walk_cb(unsigned n, const H5E_error2_t *e, void *arg) {
  h5_stack *w = arg;
  if (!e->desc || !e->desc[0]) return 0;
  const char *fn = e->func_name ? e->func_name : "?";
  if (n == 0 || !w->top[0]) snprintf(w->top, sizeof w->top, "%.200s (in %.30s)", e->desc, fn);
  snprintf(w->inner, sizeof w->inner, "%.200s (in %.30s)", e->desc, fn);
  for (char *c = w->inner; *c; c++)
    if (*c == '\n' || *c == '\r') *c = ' ';
  const char *en = strstr(e->desc, "errno = ");
  if (en) {
    long v = strtol(en + 8, NULL, 10);
    if (v > 0 && v < 4096) w->err_no = (int)v;
  }
  return 0;
}

/* Turns HDF5's error stack (H5Ewalk2) into one sentence: "cannot <what> <path>: <errno text>
 * (HDF5: <API message>)" when a message carries an errno, else "cannot <what> <path>: HDF5: <API
 * message>; <innermost message>". The stack is cleared. */
static ftl_err h5_fail(ftl_diag *d, const char *what, const char *path) {
  h5_stack w;
  memset(&w, 0, sizeof w);
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, h5_walk_cb, &w);
  H5Eclear2(H5E_DEFAULT);
  if (!w.top[0])
    return ftl_diag_fail(d, FTL_ERR_HDF5, "cannot %s %s: HDF5 failed and left no error on its stack", what, path);
  /* An errno makes it the storage's failure (ENOSPC/EDQUOT: FTL_ERR_NOSPC, else FTL_ERR_IO), so a
   * full disk reads the same whether HDF5 or the seam met it. */
  ftl_err e = w.err_no ? core_errno_to_err(w.err_no) : FTL_ERR_HDF5;
  int same = strcmp(w.top, w.inner) == 0;
  /* With an errno the innermost message (the sec2 driver's: a timestamp, a descriptor, buffer
   * addresses) adds nothing a reader needs. */
  if (w.err_no) return ftl_diag_fail(d, e, "cannot %s %s: %s (HDF5: %.200s)", what, path, strerror(w.err_no), w.top);
  return ftl_diag_fail(d, e, "cannot %s %s: HDF5: %.200s%s%.200s", what, path, w.top, same ? "" : "; ",
                       same ? "" : w.inner);
}

long ck_h5_open_objects(void) {
  ssize_t n = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  return n < 0 ? 0 : (long)n;
}

/* ---- types and attributes --------------------------------------------------------------- */

/* The file type of each dtype: little-endian always, so a shard reads the same everywhere.
 * f16 and bf16 are IEEE-style floats HDF5 1.10 has no predefined type for; h5py reads the f16
 * one as float16. The caller closes the returned type. */
static hid_t h5_type(ftl_dtype dt) {
  hid_t t = H5I_INVALID_HID;
  switch (dt) {
  case FTL_DTYPE_F32: return H5Tcopy(H5T_IEEE_F32LE);
  case FTL_DTYPE_F64: return H5Tcopy(H5T_IEEE_F64LE);
  case FTL_DTYPE_I32: return H5Tcopy(H5T_STD_I32LE);
  case FTL_DTYPE_I64: return H5Tcopy(H5T_STD_I64LE);
  case FTL_DTYPE_U8: return H5Tcopy(H5T_STD_U8LE);
  case FTL_DTYPE_I8: return H5Tcopy(H5T_STD_I8LE);
  case FTL_DTYPE_U32: return H5Tcopy(H5T_STD_U32LE);
  case FTL_DTYPE_U64: return H5Tcopy(H5T_STD_U64LE);
  case FTL_DTYPE_F16:
  case FTL_DTYPE_BF16: {
    int bf = dt == FTL_DTYPE_BF16;
    t = H5Tcopy(H5T_IEEE_F32LE);
    if (t < 0) return t;
    /* Order matters: fields must fit the precision, and the precision the size. */
    if (H5Tset_fields(t, 15, bf ? 7 : 10, bf ? 8 : 5, 0, bf ? 7 : 10) < 0 || H5Tset_precision(t, 16) < 0 ||
        H5Tset_size(t, 2) < 0 || H5Tset_ebias(t, bf ? 127 : 15) < 0) {
      H5Tclose(t);
      return H5I_INVALID_HID;
    }
    return t;
  }
  }
  return H5I_INVALID_HID;
}

static int attr_str(hid_t obj, const char *name, const char *value) {
  int rc = -1;
  hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR), a = H5I_INVALID_HID;
  if (t < 0 || s < 0 || H5Tset_size(t, strlen(value) + 1) < 0) goto out;
  a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0 || H5Awrite(a, t, value) < 0) goto out;
  rc = 0;
out:
  if (a >= 0) H5Aclose(a);
  if (s >= 0) H5Sclose(s);
  if (t >= 0) H5Tclose(t);
  return rc;
}

/* An int64 attribute: a 1-d array of n values, or (n == 0) an empty one (H5S_NULL), which is how a
 * 0-d tensor's global_shape and offset are stored. */
static int attr_i64s(hid_t obj, const char *name, const int64_t *v, int n) {
  int rc = -1;
  hsize_t dim = (hsize_t)n;
  hid_t s = n > 0 ? H5Screate_simple(1, &dim, NULL) : H5Screate(H5S_NULL), a = H5I_INVALID_HID;
  if (s < 0) goto out;
  a = H5Acreate2(obj, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0 || (n > 0 && H5Awrite(a, H5T_NATIVE_INT64, v) < 0)) goto out;
  rc = 0;
out:
  if (a >= 0) H5Aclose(a);
  if (s >= 0) H5Sclose(s);
  return rc;
}

static int attr_i64(hid_t obj, const char *name, int64_t v) {
  int rc = -1;
  hid_t s = H5Screate(H5S_SCALAR), a = H5I_INVALID_HID;
  if (s < 0) goto out;
  a = H5Acreate2(obj, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0 || H5Awrite(a, H5T_NATIVE_INT64, &v) < 0) goto out;
  rc = 0;
out:
  if (a >= 0) H5Aclose(a);
  if (s >= 0) H5Sclose(s);
  return rc;
}

/* ---- creating a shard ------------------------------------------------------------------- */

/* Closes the file, once. A flush or close that fails (a full disk) leaves HDF5 1.10 with the file
 * identifier registered and its file half destroyed, even once space is freed: any later call on
 * it, or HDF5's own atexit, crashes the process (measured here). So it is never called twice, and
 * ck_h5_create_shard reserves the file's space before HDF5 writes any metadata. */
static herr_t h5_close_file(hid_t f, const char *path) {
  herr_t r = H5Fclose(f);
  if (r < 0) FTL_LOG(FTL_LOG_ERROR, "ckpt", "HDF5: the close of %s failed; HDF5 keeps it open until exit", path);
  return r;
}

/* The space a shard needs: its datasets' bytes, plus HDF5's metadata, measured at about 0.7 KiB
 * per dataset with the superblock, groups and attributes; 8 KiB + 1 KiB per dataset leaves a
 * margin. */
static uint64_t shard_reserve_bytes(const ck_h5_dset *dsets, int n) {
  uint64_t total = 8192 + 1024 * (uint64_t)n;
  for (int i = 0; i < n; i++) {
    uint64_t b = ftl_dtype_size(dsets[i].dtype);
    for (int k = 0; k < dsets[i].ndim; k++)
      b *= (uint64_t)dsets[i].dims[k];
    total += b;
  }
  return total;
}

/* Reserves the file's blocks beyond its end (FALLOC_FL_KEEP_SIZE: the size HDF5 sees is
 * unchanged), so neither HDF5's metadata writes nor the tensor bytes written later can meet a
 * full disk. 0, or the errno; a file system without fallocate is not an error (0). */
static int reserve_file(const char *path, uint64_t bytes) {
  int fd = core_fs_table.open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0) return errno;
  int e = core_fs_table.fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes) == 0 ? 0 : errno;
  core_fs_table.close(fd);
  return (e == EOPNOTSUPP || e == ENOSYS) ? 0 : e;
}

ftl_err ck_h5_create_shard(const char *path, int64_t step, int rank, int world_size, ck_h5_dset *dsets, int n,
                           ftl_diag *d) {
  ftl_err rc = FTL_OK;
  hid_t f = H5I_INVALID_HID, gt = H5I_INVALID_HID, gb = H5I_INVALID_HID, dcpl = H5I_INVALID_HID;
  hid_t fapl = H5I_INVALID_HID;
  h5_quiet();
  fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0 || H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0) {
    rc = h5_fail(d, "prepare the creation of shard", path);
    goto out;
  }
  f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  if (f < 0) {
    rc = h5_fail(d, "create shard", path);
    goto out;
  }
  /* Before HDF5 has anything more to write: the whole file's space. On a full disk this fails
   * here, cleanly, and the close below has only the superblock of an empty file to write. */
  uint64_t want = shard_reserve_bytes(dsets, n);
  int fe = reserve_file(path, want);
  if (fe) {
    rc = ftl_diag_fail(d, core_errno_to_err(fe), "cannot create shard %s: %s (reserving %llu bytes)", path,
                       strerror(fe), (unsigned long long)want);
    goto out;
  }
  if (attr_str(f, "ftl_format", "ftl-ckpt-shard") < 0 || attr_i64(f, "format_version", 1) < 0 ||
      attr_i64(f, "step", step) < 0 || attr_i64(f, "rank", rank) < 0 || attr_i64(f, "world_size", world_size) < 0) {
    rc = h5_fail(d, "write the root attributes of shard", path);
    goto out;
  }
  gt = H5Gcreate2(f, "tensors", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  gb = H5Gcreate2(f, "blobs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (gt < 0 || gb < 0 || dcpl < 0 || H5Pset_layout(dcpl, H5D_CONTIGUOUS) < 0 ||
      H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) < 0 || H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0) {
    rc = h5_fail(d, "create the groups of shard", path);
    goto out;
  }
  for (int i = 0; i < n; i++) {
    ck_h5_dset *ds = &dsets[i];
    hsize_t dims[8];
    int64_t offset[8] = {0};
    int nd = ds->ndim;
    for (int k = 0; k < nd; k++)
      dims[k] = (hsize_t)ds->dims[k];
    offset[0] = ds->row_start;
    hid_t t = h5_type(ds->dtype);
    hid_t s = nd > 0 ? H5Screate_simple(nd, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t dset = (t >= 0 && s >= 0) ? H5Dcreate2(f, ds->path, t, s, H5P_DEFAULT, dcpl, H5P_DEFAULT) : H5I_INVALID_HID;
    int ok = dset >= 0 && attr_str(dset, "dtype", ck_dtype_name(ds->dtype)) == 0 &&
             attr_i64s(dset, "global_shape", ds->global_shape, nd) == 0 && attr_i64s(dset, "offset", offset, nd) == 0 &&
             attr_str(dset, "layout", ds->layout) == 0;
    haddr_t addr = ok ? H5Dget_offset(dset) : HADDR_UNDEF;
    hsize_t bytes = ok ? H5Dget_storage_size(dset) : 0;
    if (dset >= 0) H5Dclose(dset);
    if (s >= 0) H5Sclose(s);
    if (t >= 0) H5Tclose(t);
    if (!ok || addr == HADDR_UNDEF) {
      char what[300];
      snprintf(what, sizeof what, "create dataset %.200s in shard", ds->path);
      rc = h5_fail(d, what, path);
      goto out;
    }
    ds->file_offset = (uint64_t)addr;
    ds->size_bytes = (uint64_t)bytes;
  }
  /* Everything of the file is closed before the file, so the close below is the real one: its
   * metadata flush happens here, and its failure (a full disk) is seen and reported. */
  H5Pclose(dcpl);
  H5Gclose(gb);
  H5Gclose(gt);
  dcpl = gb = gt = H5I_INVALID_HID;
  if (H5Fflush(f, H5F_SCOPE_LOCAL) < 0) {
    rc = h5_fail(d, "write the metadata of shard", path);
    goto out;
  }
  hid_t fc = f;
  f = H5I_INVALID_HID;
  if (h5_close_file(fc, path) < 0) {
    rc = h5_fail(d, "close shard", path);
    goto out;
  }
out:
  if (dcpl >= 0) H5Pclose(dcpl);
  if (gb >= 0) H5Gclose(gb);
  if (gt >= 0) H5Gclose(gt);
  if (f >= 0) {
    h5_close_file(f, path);
    H5Eclear2(H5E_DEFAULT);
  }
  if (fapl >= 0) H5Pclose(fapl);
  return rc;
}

/* ---- reading a shard's own description back --------------------------------------------- */

/* An int64 attribute as written by attr_i64s/attr_i64: H5S_NULL (0 values), scalar (1) or 1-d. */
static int read_attr_i64s(hid_t obj, const char *name, int64_t *v, int max, int *n_out) {
  int rc = -1;
  hid_t a = H5I_INVALID_HID, s = H5I_INVALID_HID;
  if (H5Aexists(obj, name) <= 0) goto out;
  a = H5Aopen(obj, name, H5P_DEFAULT);
  s = a >= 0 ? H5Aget_space(a) : H5I_INVALID_HID;
  if (s < 0) goto out;
  H5S_class_t cls = H5Sget_simple_extent_type(s);
  int n = 0;
  if (cls == H5S_SCALAR) {
    n = 1;
  } else if (cls == H5S_SIMPLE) {
    hsize_t dim = 0;
    if (H5Sget_simple_extent_ndims(s) != 1 || H5Sget_simple_extent_dims(s, &dim, NULL) != 1 || dim > (hsize_t)max)
      goto out;
    n = (int)dim;
  } else if (cls != H5S_NULL) {
    goto out;
  }
  if (n > 0 && H5Aread(a, H5T_NATIVE_INT64, v) < 0) goto out;
  *n_out = n;
  rc = 0;
out:
  if (s >= 0) H5Sclose(s);
  if (a >= 0) H5Aclose(a);
  return rc;
}

/* A fixed-length string attribute into buf (NUL-terminated); -1 if absent, of another type or
 * longer than buf. */
static int read_attr_str(hid_t obj, const char *name, char *buf, size_t size) {
  int rc = -1;
  hid_t a = H5I_INVALID_HID, t = H5I_INVALID_HID, mt = H5I_INVALID_HID;
  if (H5Aexists(obj, name) <= 0) goto out;
  a = H5Aopen(obj, name, H5P_DEFAULT);
  t = a >= 0 ? H5Aget_type(a) : H5I_INVALID_HID;
  if (t < 0 || H5Tget_class(t) != H5T_STRING || H5Tis_variable_str(t) != 0) goto out;
  size_t sz = H5Tget_size(t);
  if (sz == 0 || sz >= size) goto out;
  mt = H5Tcopy(H5T_C_S1);
  if (mt < 0 || H5Tset_size(mt, sz) < 0 || H5Aread(a, mt, buf) < 0) goto out;
  buf[sz] = '\0';
  rc = 0;
out:
  if (mt >= 0) H5Tclose(mt);
  if (t >= 0) H5Tclose(t);
  if (a >= 0) H5Aclose(a);
  return rc;
}

/* The class of a dtype, from core's table (core/dtype_table.h). */
static int dtype_is_float(ftl_dtype dt) {
  const core_dtype_row *r = core_dtype_of(dt);
  return r && r->cls == CORE_DT_FLOAT;
}

static int dtype_is_signed(ftl_dtype dt) {
  const core_dtype_row *r = core_dtype_of(dt);
  return r && r->cls == CORE_DT_SIGNED;
}

/* Checks one piece's dataset against the manifest; 0 ok, else a message in why. */
static int check_piece(hid_t f, const ck_manifest *m, const ck_piece *pc, char *why, size_t why_size) {
  const ck_item *it = &m->items[pc->item];
  int blob = it->kind == CK_KIND_BLOB_GLOBAL || it->kind == CK_KIND_BLOB_PER_RANK, bad = 1;
  char dpath[CK_NAME_MAX + 16], text[32];
  snprintf(dpath, sizeof dpath, "/%s/%s", blob ? "blobs" : "tensors", it->name);
  hid_t ds = H5I_INVALID_HID, sp = H5I_INVALID_HID, ty = H5I_INVALID_HID;
  int64_t v[CK_MAX_DIMS];
  int nv = 0;
  if (H5Lexists(f, blob ? "/blobs" : "/tensors", H5P_DEFAULT) <= 0 || H5Lexists(f, dpath, H5P_DEFAULT) <= 0 ||
      (ds = H5Dopen2(f, dpath, H5P_DEFAULT)) < 0) {
    snprintf(why, why_size, "dataset %s named by the manifest is not in the file", dpath);
    goto out;
  }
  haddr_t addr = H5Dget_offset(ds);
  hsize_t bytes = H5Dget_storage_size(ds);
  if (addr == HADDR_UNDEF || (uint64_t)addr != pc->file_offset || (uint64_t)bytes != pc->size_bytes) {
    snprintf(why, why_size, "dataset %s is at byte %llu (%llu bytes), the manifest says %llu (%llu bytes)", dpath,
             (unsigned long long)addr, (unsigned long long)bytes, (unsigned long long)pc->file_offset,
             (unsigned long long)pc->size_bytes);
    goto out;
  }
  if (read_attr_str(ds, "dtype", text, sizeof text) || strcmp(text, ck_dtype_name(it->dtype)) != 0) {
    snprintf(why, why_size, "dtype mismatch: the manifest says '%s' is %s, its dataset %s says %s", it->name,
             ck_dtype_name(it->dtype), dpath, text[0] ? text : "nothing");
    goto out;
  }
  ty = H5Dget_type(ds);
  H5T_class_t tc = ty >= 0 ? H5Tget_class(ty) : H5T_NO_CLASS;
  if (ty < 0 || H5Tget_size(ty) != ftl_dtype_size(it->dtype) ||
      (dtype_is_float(it->dtype)
           ? tc != H5T_FLOAT
           : (tc != H5T_INTEGER || (H5Tget_sign(ty) == H5T_SGN_2) != dtype_is_signed(it->dtype)))) {
    snprintf(why, why_size, "dtype mismatch: the manifest says '%s' is %s, the HDF5 type of %s is not", it->name,
             ck_dtype_name(it->dtype), dpath);
    goto out;
  }
  text[0] = '\0';
  if (read_attr_str(ds, "layout", text, sizeof text) || strcmp(text, ck_kind_name(it->kind)) != 0) {
    snprintf(why, why_size, "layout mismatch: the manifest says '%s' is %s, its dataset %s says %s", it->name,
             ck_kind_name(it->kind), dpath, text[0] ? text : "nothing");
    goto out;
  }
  /* The dataset's own extent: the piece's rows, then the rest of the global shape. */
  sp = H5Dget_space(ds);
  hsize_t dims[CK_MAX_DIMS];
  int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
  int have_gs = read_attr_i64s(ds, "global_shape", v, CK_MAX_DIMS, &nv) == 0;
  int shape_ok =
      have_gs && nv == it->ndim && nd == it->ndim && (nd == 0 || H5Sget_simple_extent_dims(sp, dims, NULL) == nd);
  for (int k = 0; shape_ok && k < nd; k++)
    shape_ok = (int64_t)dims[k] == (k == 0 ? pc->row_count : it->shape[k]);
  for (int k = 0; shape_ok && k < nv; k++)
    shape_ok = v[k] == it->shape[k];
  if (!shape_ok) {
    char ms[160] = "", fs[160] = "";
    size_t u = 0;
    for (int k = 0; k < it->ndim && u < sizeof ms; k++)
      u += (size_t)snprintf(ms + u, sizeof ms - u, "%s%lld", k ? "," : "", (long long)it->shape[k]);
    u = 0;
    for (int k = 0; have_gs && k < nv && u < sizeof fs; k++)
      u += (size_t)snprintf(fs + u, sizeof fs - u, "%s%lld", k ? "," : "", (long long)v[k]);
    snprintf(why, why_size,
             "shape mismatch: the manifest says '%s' is [%s] (rows %lld..%lld here), dataset %s holds "
             "%d dims of global shape [%s]",
             it->name, ms, (long long)pc->row_start, (long long)(pc->row_start + pc->row_count - 1), dpath, nd, fs);
    goto out;
  }
  if (it->ndim > 0 && (read_attr_i64s(ds, "offset", v, CK_MAX_DIMS, &nv) || nv != it->ndim || v[0] != pc->row_start)) {
    snprintf(why, why_size, "offset mismatch: the manifest puts rows of '%s' at %lld, dataset %s says %lld", it->name,
             (long long)pc->row_start, dpath, nv > 0 ? (long long)v[0] : -1LL);
    goto out;
  }
  bad = 0;
out:
  if (sp >= 0) H5Sclose(sp);
  if (ty >= 0) H5Tclose(ty);
  if (ds >= 0) H5Dclose(ds);
  H5Eclear2(H5E_DEFAULT);
  return bad;
}

static hsize_t group_links(hid_t f, const char *g) {
  H5G_info_t gi;
  if (H5Lexists(f, g, H5P_DEFAULT) <= 0 || H5Gget_info_by_name(f, g, &gi, H5P_DEFAULT) < 0) return 0;
  return gi.nlinks;
}

ftl_err ck_h5_check_shard(const char *path, const ck_manifest *m, const ck_shard *sh, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  hid_t f = H5I_INVALID_HID, fapl = H5I_INVALID_HID;
  char why[700] = "", text[32] = "";
  const char *file = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  h5_quiet();
  /* HDF5 would open a FIFO and wait on it forever, and follow a symlink anywhere. */
  struct stat st;
  if (lstat(path, &st) != 0)
    return ftl_diag_fail(d, errno == ENOENT ? FTL_ERR_NOTFOUND : FTL_ERR_IO, "%s: cannot stat: %s", file,
                         strerror(errno));
  if (!S_ISREG(st.st_mode)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: not a regular file", file);
  fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0 || H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0) {
    rc = h5_fail(d, "open shard", path);
    goto out;
  }
  f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
  if (f < 0) {
    rc = h5_fail(d, "open shard", path);
    if (rc == FTL_ERR_HDF5) rc = FTL_ERR_CORRUPT;
    goto out;
  }
  int64_t v[CK_MAX_DIMS];
  int nv = 0;
  struct {
    const char *name;
    int64_t want;
  } root[] = {{"format_version", 1}, {"step", m->step}, {"rank", sh->rank}, {"world_size", m->world_size}};
  if (read_attr_str(f, "ftl_format", text, sizeof text) || strcmp(text, "ftl-ckpt-shard") != 0) {
    snprintf(why, sizeof why, "not an ftl shard (its ftl_format attribute is '%s')", text);
  } else {
    for (size_t i = 0; i < sizeof root / sizeof root[0] && !why[0]; i++)
      if (read_attr_i64s(f, root[i].name, v, 1, &nv) || nv != 1 || v[0] != root[i].want)
        snprintf(why, sizeof why, "%s mismatch: the manifest says %s %lld, the shard's own attribute says %s",
                 root[i].name, root[i].name, (long long)root[i].want,
                 nv == 1 ? (snprintf(text, sizeof text, "%lld", (long long)v[0]), text) : "nothing");
  }
  for (int p = 0; p < sh->npieces && !why[0]; p++)
    check_piece(f, m, &sh->pieces[p], why, sizeof why);
  if (!why[0] && group_links(f, "/tensors") + group_links(f, "/blobs") != (hsize_t)sh->npieces)
    snprintf(why, sizeof why, "the file holds %llu datasets, the manifest names %d",
             (unsigned long long)(group_links(f, "/tensors") + group_links(f, "/blobs")), sh->npieces);
  H5Eclear2(H5E_DEFAULT);
  if (why[0]) rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: %s", file, why);
out:
  if (f >= 0) h5_close_file(f, path);
  if (fapl >= 0) H5Pclose(fapl);
  H5Eclear2(H5E_DEFAULT);
  return rc;
}
