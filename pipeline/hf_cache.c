/* pipeline/hf_cache.c: a fetched base in the Hugging Face cache (see hf_cache.h). The entry is
 * what the cache's reader (huggingface_hub's try_to_load_from_cache) looks for:
 *   ROOT/models--NAME/refs/main              the revision, 40 hex digits, no newline
 *   ROOT/models--NAME/snapshots/REV/FILE     a link to the fetched base/FILE, one per file
 * written afresh at every fetch of a version (its old links removed first). */
#include "pipeline/hf_cache.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "core/fs.h"
#include "ftl/core.h"

enum { CONFIG_MAX_BYTES = 1 << 20, NAME_MAX_LEN = 96 };

ftl_err pl_hf_cache_root(char *out, size_t size, ftl_diag *d) {
  const char *v;
  if ((v = getenv("HF_HUB_CACHE")) && *v) return ftl_fmt(out, size, "%s", v);
  if ((v = getenv("HF_HOME")) && *v) return ftl_fmt(out, size, "%s/hub", v);
  if ((v = getenv("XDG_CACHE_HOME")) && *v) return ftl_fmt(out, size, "%s/huggingface/hub", v);
  if ((v = getenv("HOME")) && *v) return ftl_fmt(out, size, "%s/.cache/huggingface/hub", v);
  return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "no Hugging Face cache: none of HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME, HOME");
}

/* A name ftl's exports write: "ftl-" and [A-Za-z0-9._-], a repository id of the cache's form. */
static int ftl_name(const char *s) {
  size_t n = strlen(s);
  if (n < 5 || n > NAME_MAX_LEN || strncmp(s, "ftl-", 4) || strstr(s, "..")) return 0;
  for (size_t i = 0; i < n; i++)
    if (!(s[i] == '-' || s[i] == '_' || s[i] == '.' || (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
          (s[i] >= 'A' && s[i] <= 'Z')))
      return 0;
  return 1;
}

static int hex40(const char *s) {
  if (strlen(s) != 40) return 0;
  for (int i = 0; i < 40; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

/* The base's name from dir/adapter_config.json into name (size bytes). */
static ftl_err base_name_of(const char *dir, char *name, size_t size, ftl_diag *d) {
  char path[PATH_MAX];
  char *data = NULL;
  size_t len = 0;
  json_t *cfg = NULL;
  if (ftl_fmt(path, sizeof path, "%s/adapter_config.json", dir))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
  ftl_err rc = core_fs_read_regular(path, CONFIG_MAX_BYTES, &data, &len, d);
  if (rc) goto out;
  cfg = json_loadb(data, len, 0, NULL);
  const char *v = json_string_value(json_object_get(cfg, "base_model_name_or_path"));
  if (!v) {
    rc = ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s names no base (base_model_name_or_path)", path);
  } else if (!ftl_name(v)) {
    rc = ftl_diag_fail(d, FTL_ERR_NOTFOUND,
                       "%s names its base '%.200s', a name ftl did not write: transformers resolves it itself", path, v);
  } else if (ftl_fmt(name, size, "%s", v)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "the base's name is too long");
  }
out:
  json_decref(cfg);
  ftl_free(data);
  return rc;
}

/* mkdir that takes an existing folder. */
static ftl_err make_dir(const char *path, ftl_diag *d) {
  if (core_fs_table.mkdir(path, 0755) == 0 || errno == EEXIST) return FTL_OK;
  return ftl_diag_fail(d, FTL_ERR_IO, "cannot make %s: %s", path, strerror(errno));
}

ftl_err pl_hf_cache_register(const char *dir, const char *rev, char *name_out, size_t name_size, char *where_out,
                             size_t where_size, ftl_diag *d) {
  char base[PATH_MAX], real_base[PATH_MAX], root[PATH_MAX], repo[PATH_MAX], p[PATH_MAX], snap[PATH_MAX];
  struct stat st;
  DIR *dp = NULL;
  ftl_err rc;
  if (!hex40(rev)) return ftl_diag_fail(d, FTL_ERR_INVAL, "pl_hf_cache_register: revision %s is not 40 hex digits", rev);
  if (ftl_fmt(base, sizeof base, "%s/base", dir) || ftl_fmt(p, sizeof p, "%s/config.json", base))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
  if (lstat(p, &st) != 0 || !S_ISREG(st.st_mode) || !realpath(base, real_base))
    return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s holds no base model folder (base/config.json)", dir);
  if ((rc = base_name_of(dir, name_out, name_size, d))) return rc;
  if ((rc = pl_hf_cache_root(root, sizeof root, d))) return rc;
  if ((rc = ftl_mkdir_p(root, d))) return rc;
  if (ftl_fmt(repo, sizeof repo, "%s/models--%s", root, name_out) || ftl_fmt(snap, sizeof snap, "%s/snapshots/%s", repo, rev))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", root);
  if ((rc = make_dir(repo, d))) return rc;
  if (ftl_fmt(p, sizeof p, "%s/snapshots", repo) || (rc = make_dir(p, d))) return rc ? rc : FTL_ERR_RANGE;
  if (ftl_fmt(p, sizeof p, "%s/refs", repo) || (rc = make_dir(p, d))) return rc ? rc : FTL_ERR_RANGE;
  /* The revision's links afresh: an earlier fetch of the version may have been elsewhere. */
  core_fs_rm_tree(snap);
  if ((rc = make_dir(snap, d))) return rc;
  if (!(dp = opendir(real_base))) return ftl_diag_fail(d, FTL_ERR_IO, "cannot list %s: %s", real_base, strerror(errno));
  struct dirent *e;
  while ((e = readdir(dp))) {
    char target[PATH_MAX], link[PATH_MAX];
    if (e->d_name[0] == '.') continue;
    if (ftl_fmt(target, sizeof target, "%s/%s", real_base, e->d_name) ||
        ftl_fmt(link, sizeof link, "%s/%s", snap, e->d_name)) {
      rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", real_base);
      goto out;
    }
    if (lstat(target, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (core_fs_table.symlink(target, link) != 0) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot link %s to %s: %s", link, target, strerror(errno));
      goto out;
    }
  }
  /* refs/main last: a reader that finds it finds the snapshot whole. */
  if (ftl_fmt(p, sizeof p, "%s/refs/main", repo)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", repo);
    goto out;
  }
  if ((rc = ftl_write_file_atomic(p, rev, 40, d))) goto out;
  if (ftl_fmt(where_out, where_size, "%s", repo)) rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", repo);
out:
  if (dp) closedir(dp);
  return rc;
}
