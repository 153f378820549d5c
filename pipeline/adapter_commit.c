/* pipeline/adapter_commit.c: final/COMMIT, the final adapter's commit marker (adapter_commit.h,
 * docs/formats/adapter.md). The marker is JSON (sorted keys, 2-space indent, final newline):
 *   {"files": {"adapter.json": {"sha256": "...", "size": N}, ...},
 *    "format": "ftl-adapter-commit", "version": 1}
 * It holds no times, so the same adapter gives the same marker. */
#include "pipeline/adapter_commit.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "ftl/core.h"
#include "pipeline/pl_util.h"
#include "pipeline/sha256.h"

#define MARKER_MAX_BYTES (1u << 20)

ftl_err pl_adapter_commit_clear(const char *dir, ftl_diag *d) {
  char path[4096];
  if (ftl_fmt(path, sizeof path, "%s/%s", dir, FTL_ADAPTER_COMMIT_NAME))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
  if (core_fs_table.unlink(path) == 0) return core_fs_fsync_dir(dir, d);
  if (errno == ENOENT) return FTL_OK;
  return ftl_diag_fail(d, FTL_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
}

ftl_err pl_adapter_commit_write(const char *dir, const char *const *names, size_t n, ftl_diag *d) {
  char path[4096], hex[FTL_SHA256_HEX_LEN + 1];
  ftl_err rc = FTL_OK;
  json_t *j = json_object(), *files = json_object();
  char *text = NULL;
  size_t len = 0;
  if (!j || !files) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    uint64_t size = 0;
    if (!pl_safe_name(names[i], 0) || !strcmp(names[i], FTL_ADAPTER_COMMIT_NAME)) {
      rc = ftl_diag_fail(d, FTL_ERR_INVAL, "%s: not a plain file name for a commit marker", names[i]);
      goto out;
    }
    if (ftl_fmt(path, sizeof path, "%s/%s", dir, names[i])) {
      rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
      goto out;
    }
    if ((rc = pl_sha256_file(path, FTL_ADAPTER_FILE_MAX_BYTES, hex, &size, d))) goto out;
    json_t *e = json_object();
    json_object_set_new(e, "sha256", json_string(hex));
    json_object_set_new(e, "size", json_integer((json_int_t)size));
    json_object_set_new(files, names[i], e);
  }
  json_object_set(j, "files", files);
  json_object_set_new(j, "format", json_string(FTL_ADAPTER_COMMIT_FORMAT));
  json_object_set_new(j, "version", json_integer(FTL_ADAPTER_COMMIT_VERSION));
  text = pl_json_text(j, 1, &len);
  if (!text) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  if (ftl_fmt(path, sizeof path, "%s/%s", dir, FTL_ADAPTER_COMMIT_NAME)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
    goto out;
  }
  rc = core_fs_replace(path, text, len, CORE_TMP_UNPREDICTABLE, "adapter.commit", -1, -1, d);
out:
  ftl_free(text);
  json_decref(files);
  json_decref(j);
  return rc;
}

/* "a, b" of the names among `names` that exist (want_exist) or not, in dir. */
static void list_files(const char *dir, const char *const *names, size_t n, int want_exist, char *out, size_t size) {
  size_t at = 0;
  out[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    struct stat st;
    int exists = ftl_fmt(path, sizeof path, "%s/%s", dir, names[i]) == FTL_OK && stat(path, &st) == 0;
    if (exists != want_exist) continue;
    int w = snprintf(out + at, size - at, "%s%s", at ? ", " : "", names[i]);
    if (w < 0 || (size_t)w >= size - at) break;
    at += (size_t)w;
  }
  if (!at) snprintf(out, size, "none");
}

ftl_err pl_adapter_commit_verify(const char *dir, const char *const *required, size_t n_required, ftl_diag *d) {
  char path[4096], hex[FTL_SHA256_HEX_LEN + 1];
  char *text = NULL;
  size_t size = 0;
  json_t *j = NULL;
  ftl_err rc;
  ftl_diag rd;
  static const char *const example_files[] = {FTL_ADAPTER_SAFETENSORS, FTL_ADAPTER_JSON};
  if (ftl_fmt(path, sizeof path, "%s/%s", dir, FTL_ADAPTER_COMMIT_NAME))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
  rc = core_fs_read_regular(path, MARKER_MAX_BYTES, &text, &size, &rd);
  if (rc == FTL_ERR_NOTFOUND) {
    const char *const *names = required && n_required ? required : example_files;
    size_t nn = required && n_required ? n_required : 2;
    char present[512], missing[512];
    list_files(dir, names, nn, 1, present, sizeof present);
    list_files(dir, names, nn, 0, missing, sizeof missing);
    return ftl_diag_fail(d, FTL_ERR_NOTFOUND,
                         "%s has no commit marker %s: the adapter was not completely written (present: %s; "
                         "missing: %s, %s)",
                         dir, FTL_ADAPTER_COMMIT_NAME, present, missing, FTL_ADAPTER_COMMIT_NAME);
  }
  if (rc) return ftl_diag_fail(d, rc, "%s", rd.msg);
  json_error_t jerr;
  j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
  json_t *files = json_object_get(j, "files"), *fmt = json_object_get(j, "format"),
         *ver = json_object_get(j, "version");
  if (!json_is_object(j) || !json_is_object(files) || !json_is_string(fmt) ||
      strcmp(json_string_value(fmt), FTL_ADAPTER_COMMIT_FORMAT) || !json_is_integer(ver)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a commit marker of format %s", path, FTL_ADAPTER_COMMIT_FORMAT);
    goto out;
  }
  if (json_integer_value(ver) != FTL_ADAPTER_COMMIT_VERSION) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s has version %lld; this ftl reads version %d", path,
                       (long long)json_integer_value(ver), FTL_ADAPTER_COMMIT_VERSION);
    goto out;
  }
  for (size_t i = 0; i < n_required; i++)
    if (!json_object_get(files, required[i])) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s does not list %s", path, required[i]);
      goto out;
    }
  const char *name;
  json_t *e;
  json_object_foreach(files, name, e) {
    json_t *sh = json_object_get(e, "sha256"), *sz = json_object_get(e, "size");
    char fpath[4096];
    uint64_t fsize = 0;
    if (!pl_safe_name(name, 0) || !json_is_string(sh) || !json_is_integer(sz) ||
        ftl_fmt(fpath, sizeof fpath, "%s/%s", dir, name)) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: the entry of %s is malformed", path, name);
      goto out;
    }
    /* A regular file of bounded size only: final/ is written by the training program, and a
     * FIFO or device named in its marker must not hang or flood the gate. */
    ftl_err hr = pl_sha256_file(fpath, FTL_ADAPTER_FILE_MAX_BYTES, hex, &fsize, &rd);
    if (hr == FTL_ERR_NOTFOUND) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is missing (listed in %s)", fpath, path);
      goto out;
    }
    if (hr) {
      rc = ftl_diag_fail(d, hr, "%s", rd.msg);
      goto out;
    }
    if ((json_int_t)fsize != json_integer_value(sz) || strcmp(hex, json_string_value(sh))) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT,
                         "%s does not match its commit marker (size %llu, marker says %lld; or its SHA-256 differs): "
                         "it was changed or only partly rewritten after the commit",
                         fpath, (unsigned long long)fsize, (long long)json_integer_value(sz));
      goto out;
    }
  }
  rc = FTL_OK;
out:
  json_decref(j);
  ftl_free(text);
  return rc;
}
