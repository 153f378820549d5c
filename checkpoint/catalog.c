/* checkpoint/catalog.c: step folders of the checkpoints folder (see catalog.h). */
#include "checkpoint/catalog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
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
  return ftl_fmt(p, sizeof p, "%s/%s", dir, name) == FTL_OK && lstat(p, &st) == 0;
}

ftl_err ck_step_dir_check(const char *base, int64_t step, ftl_diag *d) {
  char sd[PATH_MAX], real_base[PATH_MAX], real_sd[PATH_MAX];
  if (ck_step_dir(base, step, sd, sizeof sd)) return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long under %s", base);
  struct stat st;
  if (lstat(sd, &st) != 0)
    return ftl_diag_fail(d, errno == ENOENT ? FTL_ERR_NOTFOUND : FTL_ERR_IO, "%s: %s", sd, strerror(errno));
  if (S_ISLNK(st.st_mode))
    return ftl_diag_fail(d, FTL_ERR_STATE, "%s is a symbolic link: refused (a step folder is never followed out of %s)",
                         sd, base);
  if (!S_ISDIR(st.st_mode)) return ftl_diag_fail(d, FTL_ERR_STATE, "%s is not a folder: refused", sd);
  /* Any other way out (a bind mount, a folder renamed under us) shows in the resolved paths. */
  size_t n = 0;
  if (!realpath(base, real_base) || !realpath(sd, real_sd) || (n = strlen(real_base), strncmp(real_sd, real_base, n)) ||
      real_sd[n] != '/' || strchr(real_sd + n + 1, '/'))
    return ftl_diag_fail(d, FTL_ERR_STATE, "%s does not resolve to a folder directly inside %s: refused", sd, base);
  return FTL_OK;
}

ftl_err ck_read_manifest_text(const char *base, int64_t step, char **text_out, size_t *len_out, ftl_diag *d) {
  char sd[PATH_MAX], path[PATH_MAX];
  *text_out = NULL;
  *len_out = 0;
  if (ck_step_dir(base, step, sd, sizeof sd) || ftl_fmt(path, sizeof path, "%s/manifest.json", sd))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long under %s", base);
  ftl_err rc = ck_step_dir_check(base, step, d);
  if (rc) return rc;
  /* Core's one reader of outside files: a link, FIFO or folder there, or a file too big to be a
   * manifest, is a malformed manifest (FTL_ERR_CORRUPT); a failed read is the storage's. */
  return core_fs_read_regular(path, CK_MANIFEST_MAX_BYTES, text_out, len_out, d);
}

int ck_parse_step_name(const char *name, int64_t *step) {
  return strncmp(name, "step-", 5) == 0 && ftl_parse_i64(name + 5, 0, INT64_MAX, step) == FTL_OK;
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
    int64_t step;
    if (!ck_parse_step_name(e->d_name, &step)) continue;
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
    struct stat st;
    if (lstat(sd, &st) != 0 || !S_ISDIR(st.st_mode))
      v[n].state = CK_STEP_REFUSED;
    else
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
  char *text = NULL;
  size_t len = 0;
  *m_out = NULL;
  ftl_err rc = ck_read_manifest_text(base, step, &text, &len, d);
  if (rc) return rc;
  rc = ck_manifest_parse(text, len, m_out, d);
  if (rc == FTL_OK && (*m_out)->step != step) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "manifest: step mismatch: step %lld in the folder of step %lld",
                       (long long)(*m_out)->step, (long long)step);
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
  ftl_err rc = ck_step_dir_check(base, step, d);
  if (rc) return rc;
  char text[1200];
  snprintf(text, sizeof text, "%s\n", reason);
  rc = core_fs_write_atomic(why, text, strlen(text), NULL, 0, step, d);
  if (rc) return rc;
  if (core_fs_table.rename(from, to) != 0)
    return ftl_diag_fail(d, FTL_ERR_IO, "rename of %s failed: %s", from, strerror(errno));
  return core_fs_fsync_dir(sd, d);
}

ftl_err ck_delete_step(const char *base, int64_t step, ftl_diag *d) {
  char sd[PATH_MAX], p[PATH_MAX];
  if (ck_step_dir(base, step, sd, sizeof sd) || ftl_fmt(p, sizeof p, "%s/manifest.json", sd))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long under %s", base);
  ftl_err crc = ck_step_dir_check(base, step, d);
  if (crc == FTL_ERR_NOTFOUND) return FTL_OK;
  if (crc) return crc;
  if (core_fs_table.unlink(p) == 0) {
    ftl_err rc = core_fs_fsync_dir(sd, d);
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
    if (ftl_fmt(p, sizeof p, "%s/%s", sd, e->d_name) == FTL_OK && core_fs_table.unlink(p) != 0 && errno != ENOENT)
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot delete %s: %s", p, strerror(errno));
  }
  closedir(dir);
  if (rc) return rc;
  if (core_fs_table.unlinkat(AT_FDCWD, sd, AT_REMOVEDIR) != 0 && errno != ENOENT)
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot remove folder %s: %s", sd, strerror(errno));
  return core_fs_fsync_dir(base, d);
}

void ck_read_bad_reason(const char *base, int64_t step, char *out, size_t size) {
  char sd[PATH_MAX], p[PATH_MAX], *text = NULL;
  size_t len = 0;
  out[0] = '\0';
  if (ck_step_dir(base, step, sd, sizeof sd) || ftl_fmt(p, sizeof p, "%s/bad-reason.txt", sd) ||
      ck_step_dir_check(base, step, NULL) || core_fs_read_regular(p, 4096, &text, &len, NULL))
    return;
  while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
    text[--len] = '\0';
  snprintf(out, size, "%s", text);
  ftl_free(text);
}

/* ---- the commit marker ------------------------------------------------------------------ */

static ftl_err marker_path(const char *base, char *out, size_t size) {
  return ftl_fmt(out, size, "%s/%s", base, CK_MARKER_NAME);
}

int ck_marker_exists(const char *base) {
  char p[PATH_MAX];
  struct stat st;
  return marker_path(base, p, sizeof p) == FTL_OK && lstat(p, &st) == 0;
}

ftl_err ck_marker_note_commit(const char *base, int64_t step, ftl_diag *d) {
  char p[PATH_MAX];
  if (marker_path(base, p, sizeof p)) return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long under %s", base);
  if (ck_marker_exists(base)) return FTL_OK;
  char text[128];
  snprintf(text, sizeof text, "ftl-ckpt-committed 1\nfirst_step %lld\ncreated_unix_us %lld\n", (long long)step,
           (long long)ftl_wall_us());
  return core_fs_write_atomic(p, text, strlen(text), NULL, 0, step, d);
}
