/* pipeline/adapter_api.c: the public door to the final adapter (include/ftl/adapter.h), over the
 * pipeline's safetensors codec (safetensors.c) and commit marker (adapter_commit.c). Part of
 * libftl, with those files and their helpers (the ftl_adapter_io library), so a program built
 * against the installed ftl writes and reads its adapter the way ftl's own tools check it. */
#include "ftl/adapter.h"

#include <string.h>

#include "core/fs.h"
#include "core/rundir.h"
#include "ftl/core.h"
#include "pipeline/adapter_commit.h"
#include "pipeline/safetensors.h"

/* The header of an adapter's safetensors file: a few hundred bytes per tensor. */
#define ADAPTER_MAX_HEADER ((uint64_t)1 << 20)

struct ftl_adapter {
  pl_st_file *st;
  char *json;   /* adapter.json's bytes, NUL-terminated (ftl_adapter_open), or NULL */
  size_t json_len;
  char *bytes;  /* adapter.safetensors' bytes the tensors point into (open), or NULL (parse) */
};

static const char *const files[] = {FTL_ADAPTER_SAFETENSORS, FTL_ADAPTER_JSON};

ftl_err ftl_adapter_final_dir(const ftl_info *info, char *out, size_t size, ftl_diag *d) {
  if (!info || !info->run_dir || !info->run_dir[0])
    return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "no run directory (not started by ftl run)");
  /* The run directory's paths are core/rundir.h's (docs/formats/run-dir.md). */
  if (core_rundir_path(out, size, info->run_dir, FTL_RUNDIR_FINAL))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "the final folder's path is too long: %s/%s", info->run_dir,
                         core_rundir_name(FTL_RUNDIR_FINAL));
  return FTL_OK;
}

ftl_err ftl_adapter_write(const char *dir, const ftl_adapter_tensor *tensors, size_t n, const char *json,
                          size_t json_len, ftl_diag *d) {
  char path[4096];
  ftl_err rc = FTL_OK;
  if (!dir || (n && !tensors) || (json_len && !json))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "ftl_adapter_write: no folder, tensors or JSON");
  pl_st_tensor *t = ftl_calloc(n + 1, sizeof *t);
  if (!t) return ftl_diag_fail(d, FTL_ERR_NOMEM, "%s: out of memory", dir);
  for (size_t i = 0; i < n; i++) {
    const ftl_adapter_tensor *x = &tensors[i];
    uint64_t bytes = 0;
    if (x->ndim < 0 || x->ndim > FTL_ADAPTER_MAX_DIMS) {
      rc = ftl_diag_fail(d, FTL_ERR_INVAL, "tensor %s: %d dimensions", x->name ? x->name : "?", x->ndim);
      goto out;
    }
    t[i] = (pl_st_tensor){.name = x->name, .dtype = FTL_ST_F32, .ndim = x->ndim, .data = x->data};
    memcpy(t[i].shape, x->shape, sizeof x->shape[0] * (size_t)x->ndim);
    if ((rc = pl_st_tensor_bytes(FTL_ST_F32, x->ndim, x->shape, &bytes))) {
      rc = ftl_diag_fail(d, rc, "tensor %s: bad shape", x->name ? x->name : "?");
      goto out;
    }
    t[i].size_bytes = bytes;
  }
  /* The marker goes first and comes back last: a crash or a full disk in between leaves a folder
   * that readers refuse, never a half adapter that looks whole. float32 little-endian is the host
   * order everywhere ftl runs. */
  static const pl_st_kv meta[] = {{"format", "pt"}};
  if ((rc = ftl_mkdir_p(dir, d)) || (rc = pl_adapter_commit_clear(dir, d))) goto out;
  if (ftl_fmt(path, sizeof path, "%s/" FTL_ADAPTER_SAFETENSORS, dir)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "%s: path too long", dir);
    goto out;
  }
  if ((rc = pl_st_write(path, t, n, meta, 1, d))) goto out;
  if (ftl_fmt(path, sizeof path, "%s/" FTL_ADAPTER_JSON, dir)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "%s: path too long", dir);
    goto out;
  }
  if ((rc = ftl_write_file_atomic(path, json ? json : "", json_len, d))) goto out;
  rc = pl_adapter_commit_write(dir, files, 2, d);
out:
  ftl_free(t);
  return rc;
}

ftl_err ftl_adapter_commit(const char *dir, const char *const *names, size_t n, ftl_diag *d) {
  if (!dir || !names || !n) return ftl_diag_fail(d, FTL_ERR_INVAL, "ftl_adapter_commit: no folder or no file names");
  for (size_t i = 0; i < n; i++)
    if (!names[i]) return ftl_diag_fail(d, FTL_ERR_INVAL, "ftl_adapter_commit: file name %zu is NULL", i);
  return pl_adapter_commit_write(dir, names, n, d);
}

static ftl_err parse_into(ftl_adapter *a, const void *bytes, size_t size, ftl_diag *d) {
  pl_st_limits lim = {.max_header_bytes = ADAPTER_MAX_HEADER};
  return pl_st_parse(bytes, size, &lim, &a->st, d);
}

ftl_err ftl_adapter_parse(const void *bytes, size_t size, ftl_adapter **out, ftl_diag *d) {
  *out = NULL;
  ftl_adapter *a = ftl_calloc(1, sizeof *a);
  if (!a) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  ftl_err rc = parse_into(a, bytes, size, d);
  if (rc) {
    ftl_adapter_close(a);
    return rc;
  }
  *out = a;
  return FTL_OK;
}

ftl_err ftl_adapter_open(const char *dir, ftl_adapter **out, ftl_diag *d) {
  char path[4096];
  size_t size = 0;
  *out = NULL;
  ftl_err rc = pl_adapter_commit_verify(dir, files, 2, d);
  if (rc) return rc;
  ftl_adapter *a = ftl_calloc(1, sizeof *a);
  if (!a) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  if (ftl_fmt(path, sizeof path, "%s/" FTL_ADAPTER_JSON, dir)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "%s: path too long", dir);
    goto out;
  }
  if ((rc = core_fs_read_regular(path, FTL_ADAPTER_MAX_JSON_BYTES, &a->json, &a->json_len, d))) goto out;
  if (ftl_fmt(path, sizeof path, "%s/" FTL_ADAPTER_SAFETENSORS, dir)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "%s: path too long", dir);
    goto out;
  }
  if ((rc = core_fs_read_regular(path, FTL_ADAPTER_MAX_BYTES, &a->bytes, &size, d))) goto out;
  if ((rc = parse_into(a, a->bytes, size, d))) {
    char why[sizeof d->msg];
    memcpy(why, d->msg, sizeof why);
    rc = ftl_diag_fail(d, rc, "%s: %.900s", path, why);
  }
out:
  if (rc) {
    ftl_adapter_close(a);
    return rc;
  }
  *out = a;
  return FTL_OK;
}

const char *ftl_adapter_json(const ftl_adapter *a, size_t *len_out) {
  if (len_out) *len_out = a && a->json ? a->json_len : 0;
  return a && a->json ? a->json : "";
}

size_t ftl_adapter_count(const ftl_adapter *a) { return a && a->st ? pl_st_count(a->st) : 0; }

ftl_err ftl_adapter_find(const ftl_adapter *a, const char *name, ftl_adapter_tensor *out) {
  const pl_st_tensor *x = a && a->st && name ? pl_st_find(a->st, name) : NULL;
  if (!x) return FTL_ERR_NOTFOUND;
  if (x->dtype != FTL_ST_F32) return FTL_ERR_UNSUPPORTED;
  memset(out, 0, sizeof *out);
  out->name = x->name;
  out->ndim = x->ndim;
  memcpy(out->shape, x->shape, sizeof x->shape[0] * (size_t)x->ndim);
  out->data = x->data;
  return FTL_OK;
}

void ftl_adapter_close(ftl_adapter *a) {
  if (!a) return;
  pl_st_free(a->st);
  ftl_free(a->json);
  ftl_free(a->bytes);
  ftl_free(a);
}
