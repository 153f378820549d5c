/* checkpoint/catalog.c: step folders of the checkpoints folder (see catalog.h). */
#include "catalog.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "ftl/core.h"

ftl_err ck_step_dir(const char *base, int64_t step, char *out, size_t size) {
  return ftl_fmt(out, size, "%s/step-%08lld", base, (long long)step);
}

static int cmp_desc(const void *a, const void *b) {
  const ck_step_entry *x = a, *y = b;
  return x->step > y->step ? -1 : x->step < y->step ? 1 : 0;
}

static int exists(const char *dir, const char *name) {
  char p[PATH_MAX];
  struct stat st;
  return ftl_fmt(p, sizeof p, "%s/%s", dir, name) == FTL_OK && stat(p, &st) == 0;
}

ftl_err ck_list_steps(const char *base, ck_step_entry **out, int *n_out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  ck_step_entry *v = NULL;
  int n = 0, cap = 0;
  *out = NULL;
  *n_out = 0;
  DIR *dir = opendir(base);
  if (!dir) {
    if (errno == ENOENT) return FTL_OK;
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot open %s: %s", base, strerror(errno));
  }
  struct dirent *e;
  while ((e = readdir(dir))) {
    if (strncmp(e->d_name, "step-", 5) != 0) continue;
    int64_t step;
    if (ftl_parse_i64(e->d_name + 5, 0, INT64_MAX, &step)) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      ck_step_entry *nv = ftl_realloc(v, (size_t)cap * sizeof *v);
      if (!nv) {
        rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory listing %s", base);
        goto out;
      }
      v = nv;
    }
    char sd[PATH_MAX];
    if (ftl_fmt(sd, sizeof sd, "%s/%s", base, e->d_name)) continue;
    v[n].step = step;
    v[n].state = exists(sd, "manifest.json")       ? CK_STEP_COMMITTED
                 : exists(sd, "manifest.json.bad") ? CK_STEP_BAD
                                                   : CK_STEP_INCOMPLETE;
    n++;
  }
  if (n > 1) qsort(v, (size_t)n, sizeof *v, cmp_desc);
  *out = v;
  *n_out = n;
  v = NULL;
out:
  closedir(dir);
  ftl_free(v);
  return rc;
}

ftl_err ck_read_manifest(const char *base, int64_t step, ck_manifest **m_out, char **text_out, size_t *len_out,
                         ftl_diag *d) {
  char sd[PATH_MAX], path[PATH_MAX];
  char *text = NULL;
  size_t len = 0;
  *m_out = NULL;
  if (ck_step_dir(base, step, sd, sizeof sd) || ftl_fmt(path, sizeof path, "%s/manifest.json", sd))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long under %s", base);
  ftl_err rc = ftl_read_file(path, CK_MANIFEST_MAX_BYTES, &text, &len, d);
  if (rc) return rc;
  rc = ck_manifest_parse(text, len, m_out, d);
  if (rc == FTL_OK && (*m_out)->step != step) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "manifest: step %lld in the folder of step %lld", (long long)(*m_out)->step,
                       (long long)step);
    ck_manifest_free(*m_out);
    *m_out = NULL;
  }
  if (rc == FTL_OK && text_out) {
    *text_out = text;
    *len_out = len;
    text = NULL;
  }
  ftl_free(text);
  return rc;
}

ftl_err ck_mark_bad(const char *base, int64_t step, const char *reason, ftl_diag *d) {
  char sd[PATH_MAX], from[PATH_MAX], to[PATH_MAX], why[PATH_MAX];
  if (ck_step_dir(base, step, sd, sizeof sd) || ftl_fmt(from, sizeof from, "%s/manifest.json", sd) ||
      ftl_fmt(to, sizeof to, "%s/manifest.json.bad", sd) || ftl_fmt(why, sizeof why, "%s/bad-reason.txt", sd))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long under %s", base);
  char text[1200];
  snprintf(text, sizeof text, "%s\n", reason);
  ftl_err rc = ck_write_atomic(why, text, strlen(text), NULL, 0, step, d);
  if (rc) return rc;
  if (ck_fs_table.rename(from, to) != 0)
    return ftl_diag_fail(d, FTL_ERR_IO, "rename of %s failed: %s", from, strerror(errno));
  return ck_fsync_dir(sd, d);
}

ftl_err ck_delete_step(const char *base, int64_t step, ftl_diag *d) {
  char sd[PATH_MAX], p[PATH_MAX];
  if (ck_step_dir(base, step, sd, sizeof sd) || ftl_fmt(p, sizeof p, "%s/manifest.json", sd))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long under %s", base);
  if (ck_fs_table.unlink(p) == 0) {
    ftl_err rc = ck_fsync_dir(sd, d);
    if (rc) return rc;
  } else if (errno != ENOENT) {
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot delete %s: %s", p, strerror(errno));
  }
  DIR *dir = opendir(sd);
  if (!dir) return errno == ENOENT ? FTL_OK : ftl_diag_fail(d, FTL_ERR_IO, "cannot open %s: %s", sd, strerror(errno));
  struct dirent *e;
  ftl_err rc = FTL_OK;
  while ((e = readdir(dir))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (ftl_fmt(p, sizeof p, "%s/%s", sd, e->d_name) == FTL_OK && ck_fs_table.unlink(p) != 0 && errno != ENOENT)
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot delete %s: %s", p, strerror(errno));
  }
  closedir(dir);
  if (rc) return rc;
  if (rmdir(sd) != 0 && errno != ENOENT)
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot remove folder %s: %s", sd, strerror(errno));
  return ck_fsync_dir(base, d);
}
