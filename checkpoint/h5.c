/* checkpoint/h5.c: HDF5 calls of the checkpoint module (see h5.h). Layout choices, each for a
 * measured reason (../docs/formats/shard.md): contiguous datasets (chunking costs 2x), no
 * Fletcher-32 filter (about 2.4 s per 256 MiB here), allocation at create time with no fill, so
 * the dataset's address is fixed before any byte of it is written and HDF5 never writes raw data.
 *
 * Not here: any tensor byte (shard.c streams them through the file seam). */
#include "h5.h"

#include <hdf5.h>
#include <stdio.h>
#include <string.h>

#include "ftl/core.h"

/* HDF5 keeps its error stack per thread; its default printer is turned off in each thread. */
static void h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

static herr_t h5_first_err(unsigned n, const H5E_error2_t *e, void *arg) {
  char *buf = arg;
  if (n == 0 && e->desc) snprintf(buf, 256, "%s (in %s)", e->desc, e->func_name ? e->func_name : "?");
  return 0;
}

static ftl_err h5_fail(ftl_diag *d, const char *what, const char *path) {
  char detail[256] = "no detail on HDF5's error stack";
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, h5_first_err, detail);
  H5Eclear2(H5E_DEFAULT);
  return ftl_diag_fail(d, FTL_ERR_HDF5, "HDF5: %s %s failed: %s", what, path, detail);
}

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

static const char *dtype_text(ftl_dtype dt) {
  static const char *names[] = {"f32", "f64", "i32", "i64", "u8", "f16", "bf16", "i8", "u32", "u64"};
  return ((unsigned)dt < sizeof names / sizeof names[0]) ? names[dt] : "?";
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

ftl_err ck_h5_create_shard(const char *path, int64_t step, int rank, int world_size, ck_h5_dset *dsets, int n,
                           ftl_diag *d) {
  ftl_err rc = FTL_OK;
  hid_t f = H5I_INVALID_HID, gt = H5I_INVALID_HID, gb = H5I_INVALID_HID, dcpl = H5I_INVALID_HID;
  h5_quiet();
  f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) {
    rc = h5_fail(d, "create", path);
    goto out;
  }
  if (attr_str(f, "ftl_format", "ftl-ckpt-shard") < 0 || attr_i64(f, "format_version", 1) < 0 ||
      attr_i64(f, "step", step) < 0 || attr_i64(f, "rank", rank) < 0 || attr_i64(f, "world_size", world_size) < 0) {
    rc = h5_fail(d, "root attributes of", path);
    goto out;
  }
  gt = H5Gcreate2(f, "tensors", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  gb = H5Gcreate2(f, "blobs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (gt < 0 || gb < 0 || dcpl < 0 || H5Pset_layout(dcpl, H5D_CONTIGUOUS) < 0 ||
      H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) < 0 || H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0) {
    rc = h5_fail(d, "groups/properties of", path);
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
    int ok = dset >= 0 && attr_str(dset, "dtype", dtype_text(ds->dtype)) == 0 &&
             attr_i64s(dset, "global_shape", ds->global_shape, nd) == 0 && attr_i64s(dset, "offset", offset, nd) == 0 &&
             attr_str(dset, "layout", ds->layout) == 0;
    haddr_t addr = ok ? H5Dget_offset(dset) : HADDR_UNDEF;
    hsize_t bytes = ok ? H5Dget_storage_size(dset) : 0;
    if (dset >= 0) H5Dclose(dset);
    if (s >= 0) H5Sclose(s);
    if (t >= 0) H5Tclose(t);
    if (!ok || addr == HADDR_UNDEF) {
      rc = h5_fail(d, ds->path, path);
      goto out;
    }
    ds->file_offset = (uint64_t)addr;
    ds->size_bytes = (uint64_t)bytes;
  }
  if (H5Fclose(f) < 0) {
    f = H5I_INVALID_HID;
    rc = h5_fail(d, "close", path);
    goto out;
  }
  f = H5I_INVALID_HID;
out:
  if (dcpl >= 0) H5Pclose(dcpl);
  if (gb >= 0) H5Gclose(gb);
  if (gt >= 0) H5Gclose(gt);
  if (f >= 0) H5Fclose(f);
  return rc;
}

ftl_err ck_h5_check_dataset(const char *path, const char *dset_path, uint64_t file_offset, uint64_t size_bytes,
                            ftl_diag *d) {
  ftl_err rc = FTL_OK;
  hid_t f = H5I_INVALID_HID, ds = H5I_INVALID_HID;
  h5_quiet();
  f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    rc = h5_fail(d, "open", path);
    goto out;
  }
  ds = H5Dopen2(f, dset_path, H5P_DEFAULT);
  if (ds < 0) {
    rc = h5_fail(d, dset_path, path);
    goto out;
  }
  haddr_t addr = H5Dget_offset(ds);
  hsize_t bytes = H5Dget_storage_size(ds);
  if (addr == HADDR_UNDEF || (uint64_t)addr != file_offset || (uint64_t)bytes != size_bytes)
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT,
                       "%s: dataset %s is at byte %llu (%llu bytes), manifest says %llu (%llu bytes)", path, dset_path,
                       (unsigned long long)addr, (unsigned long long)bytes, (unsigned long long)file_offset,
                       (unsigned long long)size_bytes);
out:
  if (ds >= 0) H5Dclose(ds);
  if (f >= 0) H5Fclose(f);
  return rc;
}
