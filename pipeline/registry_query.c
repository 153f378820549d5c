/* pipeline/registry_query.c: the registry's queries, everything that only reads it (registry.h,
 * docs/formats/registry.md): resolve NAME@VERSION or NAME@CHANNEL, the served folder and fetch,
 * the listing, vLLM routes and `check`. None takes the lock, except to unpack a version's served
 * folder on its first use (a cache of the stored package, verified; no pointer or log changes).
 * Changes are in registry_txn.c; what both need is registry_store.c.
 *
 * Map: resolve, the served folder (unpacked on first use) and fetch; the listing; vLLM routes;
 * check (each version byte for byte, the audit log against the pointers). */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/jsonl.h"
#include "ftl/core.h"
#include "pipeline/package.h"
#include "pipeline/pl_util.h"
#include "pipeline/registry.h"
#include "pipeline/registry_store.h"

/* ---- resolve, unpack, fetch ---------------------------------------------------------------- */

ftl_err pl_registry_resolve(const pl_registry_ref *reg, const char *spec, char *name_out,
                            char id_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  const char *at = spec ? strchr(spec, '@') : NULL;
  if (!at || strchr(at + 1, '@') || (size_t)(at - spec) > FTL_REGISTRY_NAME_MAX)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not NAME@VERSION or NAME@CHANNEL", spec ? spec : "");
  char name[FTL_REGISTRY_NAME_MAX + 1];
  memcpy(name, spec, (size_t)(at - spec));
  name[at - spec] = '\0';
  const char *rest = at + 1;
  if (!pl_registry_name_ok(name)) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid adapter name", name);
  if (pl_registry_channel_ok(rest)) {
    pl_reg_pointer p;
    ftl_err rc = pl_reg_pointer_read(reg, name, rest, &p, d);
    if (rc == FTL_OK) {
      memcpy(id_out, p.current, PL_REG_ID_LEN + 1);
      pl_reg_pointer_free(&p);
      snprintf(name_out, FTL_REGISTRY_NAME_MAX + 1, "%s", name);
      return pl_reg_version_complete(reg, name, id_out, NULL, NULL, d);
    }
    if (rc != FTL_ERR_NOTFOUND) return rc;
  }
  ftl_err rc = pl_reg_version_lookup(reg, name, rest, id_out, d);
  if (rc == FTL_ERR_INVAL && pl_registry_channel_ok(rest))
    return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s has no channel or version %s", name, rest);
  if (rc) return rc;
  snprintf(name_out, FTL_REGISTRY_NAME_MAX + 1, "%s", name);
  return pl_reg_version_complete(reg, name, id_out, NULL, NULL, d);
}

ftl_err pl_registry_adapter_dir(const pl_registry_ref *reg, const char *name, const char *id, char *out, size_t size,
                                ftl_diag *d) {
  char rel[160], pkg[4096];
  int lock = -1;
  ftl_err rc = pl_reg_version_complete(reg, name, id, NULL, NULL, d);
  if (rc) return rc;
  snprintf(rel, sizeof rel, "versions/%s/adapter", id);
  if ((rc = pl_reg_path(out, size, reg, name, rel, d))) return rc;
  snprintf(rel, sizeof rel, "versions/%s/%s", id, FTL_PACKAGE_FILE);
  if ((rc = pl_reg_path(pkg, sizeof pkg, reg, name, rel, d))) return rc;
  struct stat st;
  if (lstat(out, &st) != 0) {
    /* Versions published before publish unpacked them: unpacked here, under the lock, so that the
     * stale adapter.tmp-* a crashed unpacker leaves can be removed safely by whoever holds it. */
    if ((rc = pl_reg_lock_adapter(reg, name, 0, &lock, d))) return rc;
    pl_reg_clean_stale(reg, name);
    if (lstat(out, &st) != 0) rc = pl_package_unpack(pkg, out, id, NULL, NULL, NULL, NULL, d);
    pl_unlock(lock);
    if (rc) return rc;
  } else if (!S_ISDIR(st.st_mode)) {
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a folder", out);
  }
  return pl_reg_verify_unpacked(out, id, d);
}

ftl_err pl_registry_fetch(const pl_registry_ref *reg, const char *spec, const char *dir,
                          char id_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  char name[FTL_REGISTRY_NAME_MAX + 1], id[PL_REG_ID_LEN + 1], rel[160], pkg[4096];
  ftl_err rc = pl_registry_resolve(reg, spec, name, id, d);
  if (rc) return rc;
  if (id_out) snprintf(id_out, FTL_SHA256_HEX_LEN + 1, "%s", id);
  snprintf(rel, sizeof rel, "versions/%s/%s", id, FTL_PACKAGE_FILE);
  if ((rc = pl_reg_path(pkg, sizeof pkg, reg, name, rel, d))) return rc;
  if ((rc = pl_package_unpack(pkg, dir, id, NULL, NULL, NULL, NULL, d))) return rc;
  return pl_reg_verify_unpacked(dir, id, d);
}

/* ---- listing, routes, check ---------------------------------------------------------------- */

static int str_cmp(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* Sorted names in dir for which keep() is true (suffix stripped when given). */
typedef struct names {
  char **v;
  size_t n;
} names;

static void names_free(names *n) {
  for (size_t i = 0; i < n->n; i++)
    ftl_free(n->v[i]);
  ftl_free(n->v);
  n->v = NULL;
  n->n = 0;
}

static ftl_err list_dir(const char *dir, const char *suffix, int (*keep)(const char *), names *out, ftl_diag *d) {
  memset(out, 0, sizeof *out);
  DIR *dp = opendir(dir);
  if (!dp) return errno == ENOENT ? FTL_OK : ftl_diag_fail(d, FTL_ERR_IO, "cannot list %s: %s", dir, strerror(errno));
  size_t cap = 0;
  struct dirent *e;
  ftl_err rc = FTL_OK;
  while ((e = readdir(dp))) {
    char nm[256];
    snprintf(nm, sizeof nm, "%s", e->d_name);
    if (suffix) {
      size_t a = strlen(nm), b = strlen(suffix);
      if (a <= b || strcmp(nm + a - b, suffix)) continue;
      nm[a - b] = '\0';
    }
    if (!keep(nm)) continue;
    if (out->n == cap) {
      cap = cap ? cap * 2 : 16;
      char **v = ftl_realloc(out->v, cap * sizeof *v);
      if (!v) {
        rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
        break;
      }
      out->v = v;
    }
    if (!(out->v[out->n] = ftl_strdup(nm))) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
      break;
    }
    out->n++;
  }
  closedir(dp);
  if (rc) {
    names_free(out);
    return rc;
  }
  if (out->n) qsort(out->v, out->n, sizeof *out->v, str_cmp);
  return FTL_OK;
}

static int is_version(const char *s) { return pl_sha256_is_hex(s); }

/* The publication record of a version (NULL when it has none: published before records existed). */
static json_t *publication_read(const pl_registry_ref *reg, const char *name, const char *id, ftl_diag *d) {
  char path[4096], rel[160];
  char *text = NULL;
  size_t size = 0;
  json_error_t jerr;
  snprintf(rel, sizeof rel, "versions/%s/%s", id, PL_REG_PUBLICATION_FILE);
  if (pl_reg_path(path, sizeof path, reg, name, rel, d) || core_fs_read_regular(path, 1u << 16, &text, &size, d))
    return NULL;
  json_t *j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
  ftl_free(text);
  const char *fmt = json_string_value(json_object_get(j, "format"));
  if (!fmt || strcmp(fmt, PL_REG_PUBLICATION_FORMAT) || !json_is_string(json_object_get(j, "trust"))) {
    json_decref(j);
    ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a publication record", path);
    return NULL;
  }
  return j;
}

ftl_err pl_registry_list(const pl_registry_ref *reg, const char *name, FILE *out, ftl_diag *d) {
  names adapters = {0}, vers = {0}, chans = {0};
  char path[4096];
  ftl_err rc = FTL_OK;
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if (name) {
    if (!pl_registry_name_ok(name)) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid adapter name", name);
    adapters.v = ftl_calloc(1, sizeof *adapters.v);
    if (!adapters.v || !(adapters.v[0] = ftl_strdup(name))) {
      ftl_free(adapters.v);
      return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    }
    adapters.n = 1;
  } else if ((rc = list_dir(reg->root, NULL, pl_registry_name_ok, &adapters, d))) {
    return rc;
  }
  for (size_t a = 0; a < adapters.n; a++) {
    const char *nm = adapters.v[a];
    if ((rc = pl_reg_path(path, sizeof path, reg, nm, "versions", d)) ||
        (rc = list_dir(path, NULL, is_version, &vers, d)))
      goto out;
    if ((rc = pl_reg_path(path, sizeof path, reg, nm, "channels", d)) ||
        (rc = list_dir(path, ".json", pl_registry_channel_ok, &chans, d)))
      goto out;
    if (name && !vers.n && !chans.n) {
      rc = ftl_diag_fail(d, FTL_ERR_NOTFOUND, "no adapter %s in %s", nm, reg->root);
      goto out;
    }
    fprintf(out, "%s\n  versions:\n", nm);
    pl_reg_pointer *ptrs = ftl_calloc(chans.n ? chans.n : 1, sizeof *ptrs);
    if (!ptrs) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
      goto out;
    }
    for (size_t c = 0; c < chans.n; c++)
      if (pl_reg_pointer_read(reg, nm, chans.v[c], &ptrs[c], NULL)) memset(&ptrs[c], 0, sizeof ptrs[c]);
    for (size_t v = 0; v < vers.n; v++) {
      int complete = pl_reg_version_complete(reg, nm, vers.v[v], NULL, NULL, NULL) == FTL_OK;
      fprintf(out, "    %s%s", vers.v[v], complete ? "" : "  (INCOMPLETE)");
      int first = 1;
      for (size_t c = 0; c < chans.n; c++)
        if (!strcmp(ptrs[c].current, vers.v[v])) {
          fprintf(out, "%s%s", first ? "  [" : ", ", chans.v[c]);
          first = 0;
        }
      fprintf(out, "%s", first ? "" : "]");
      /* How the version got in, for as long as it is there: an unverified one says so. */
      json_t *pub = publication_read(reg, nm, vers.v[v], NULL);
      const char *trust = json_string_value(json_object_get(pub, "trust"));
      const char *key = json_string_value(json_object_get(pub, "key_id"));
      if (trust && !strcmp(trust, "unverified"))
        fprintf(out, "  (UNVERIFIED: published without a gate signature)");
      else if (trust && !strcmp(trust, "signed"))
        fprintf(out, "  (signed by gate key %.12s)", key ? key : "?");
      fprintf(out, "\n");
      json_decref(pub);
    }
    fprintf(out, "  channels:%s\n", chans.n ? "" : " none");
    for (size_t c = 0; c < chans.n; c++) {
      if (!ptrs[c].current[0]) {
        fprintf(out, "    %s -> (unreadable pointer)\n", chans.v[c]);
        continue;
      }
      fprintf(out, "    %s -> %.12s (previous %.12s)\n", chans.v[c], ptrs[c].current,
              ptrs[c].previous[0] ? ptrs[c].previous : "none");
    }
    for (size_t c = 0; c < chans.n; c++)
      pl_reg_pointer_free(&ptrs[c]);
    ftl_free(ptrs);
    names_free(&vers);
    names_free(&chans);
  }
out:
  names_free(&adapters);
  names_free(&vers);
  names_free(&chans);
  return rc;
}

ftl_err pl_registry_routes(const pl_registry_ref *reg, const char *channel, FILE *out, FILE *err, ftl_diag *d) {
  names adapters = {0}, chans = {0};
  char path[4096], dir[4096], abs_dir[PATH_MAX];
  ftl_err rc = FTL_OK, first = FTL_OK;
  size_t bad = 0;
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if ((rc = list_dir(reg->root, NULL, pl_registry_name_ok, &adapters, d))) return rc;
  /* One bad channel (a torn pointer, a changed folder) is reported and skipped: the others are
   * still listed, and the result is its error. */
  for (size_t a = 0; a < adapters.n; a++) {
    const char *nm = adapters.v[a];
    ftl_diag cd = {{0}};
    if ((rc = pl_reg_path(path, sizeof path, reg, nm, "channels", &cd)) ||
        (rc = list_dir(path, ".json", pl_registry_channel_ok, &chans, &cd))) {
      if (err) fprintf(err, "ftl registry routes: %s: %s\n", nm, cd.msg);
      if (!bad++) first = ftl_diag_fail(d, rc, "%s: %s", nm, cd.msg);
      continue;
    }
    for (size_t c = 0; c < chans.n; c++) {
      if (channel && strcmp(channel, chans.v[c])) continue;
      pl_reg_pointer p;
      rc = pl_reg_pointer_read(reg, nm, chans.v[c], &p, &cd);
      if (!rc) {
        rc = pl_registry_adapter_dir(reg, nm, p.current, dir, sizeof dir, &cd);
        pl_reg_pointer_free(&p);
      }
      if (!rc && !realpath(dir, abs_dir))
        rc = ftl_diag_fail(&cd, FTL_ERR_IO, "cannot resolve %s: %s", dir, strerror(errno));
      if (rc) {
        if (err) fprintf(err, "ftl registry routes: %s@%s: %s\n", nm, chans.v[c], cd.msg);
        if (!bad++) first = ftl_diag_fail(d, rc, "%s@%s: %s", nm, chans.v[c], cd.msg);
        continue;
      }
      fprintf(out, "%s@%s=%s\n", nm, chans.v[c], abs_dir);
    }
    names_free(&chans);
  }
  if (bad > 1 && d) {
    char first_msg[1024];
    snprintf(first_msg, sizeof first_msg, "%s", d->msg);
    ftl_diag_fail(d, first, "%zu channels could not be routed; the first: %s", bad, first_msg);
  }
  names_free(&adapters);
  names_free(&chans);
  return bad ? first : FTL_OK;
}

typedef struct audit_scan {
  size_t lines;
  const char *path;
  names channels; /* channels that have lines */
  ftl_diag *d;
} audit_scan;

static ftl_err scan_line(const char *line, size_t len, size_t line_no, void *ctx) {
  audit_scan *as = ctx;
  if (core_jsonl_line_torn(line, len)) return FTL_OK; /* never a record (replay_line) */
  json_error_t jerr;
  json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
  const char *channel = json_string_value(json_object_get(j, "channel"));
  int ok =
      json_is_object(j) && json_is_string(json_object_get(j, "action")) && json_is_string(json_object_get(j, "who"));
  ftl_err rc = FTL_OK;
  if (!ok) {
    rc = ftl_diag_fail(as->d, FTL_ERR_CORRUPT, "%s: line %zu is not a whole audit record", as->path, line_no);
  } else if (channel) {
    int seen = 0;
    for (size_t i = 0; !seen && i < as->channels.n; i++)
      seen = !strcmp(as->channels.v[i], channel);
    if (!seen) {
      char **v = ftl_realloc(as->channels.v, (as->channels.n + 1) * sizeof *v);
      if (!v || !(v[as->channels.n] = ftl_strdup(channel))) {
        if (v) as->channels.v = v;
        rc = ftl_diag_fail(as->d, FTL_ERR_NOMEM, "out of memory");
      } else {
        as->channels.v = v;
        as->channels.n++;
      }
    }
  }
  json_decref(j);
  if (!rc) as->lines++;
  return rc;
}

/* One stored version, byte for byte: its manifest is its id, its package reads back whole under
 * that id (every entry's digest), its unpacked folder (if any) holds exactly the declared files,
 * its publication record (if any) names it. */
static ftl_err check_version(const pl_registry_ref *reg, const char *name, const char *id, ftl_diag *d) {
  char path[4096], rel[160], pkg[4096], adir[4096];
  struct stat st;
  ftl_diag vd;
  int fd = -1;
  uint64_t psize = 0;
  ftl_err rc;
  if ((rc = pl_reg_version_complete(reg, name, id, NULL, NULL, d))) return rc;
  snprintf(rel, sizeof rel, "versions/%s/%s", id, FTL_PACKAGE_FILE);
  if ((rc = pl_reg_path(pkg, sizeof pkg, reg, name, rel, d))) return rc;
  if ((rc = core_fs_open_regular(pkg, PL_REG_PACKAGE_MAX_BYTES, &fd, &psize, d))) return rc;
  close(fd);
  if ((rc = pl_package_unpack(pkg, NULL, id, NULL, NULL, NULL, NULL, &vd)))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not the package of version %.12s: %s", pkg, id, vd.msg);
  snprintf(rel, sizeof rel, "versions/%s/adapter", id);
  if ((rc = pl_reg_path(adir, sizeof adir, reg, name, rel, d))) return rc;
  if (lstat(adir, &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a folder", adir);
    if ((rc = pl_reg_verify_unpacked(adir, id, d))) return rc;
  }
  snprintf(rel, sizeof rel, "versions/%s/%s", id, PL_REG_PUBLICATION_FILE);
  if ((rc = pl_reg_path(path, sizeof path, reg, name, rel, d))) return rc;
  if (lstat(path, &st) == 0) {
    ftl_diag pd = {{0}};
    json_t *pub = publication_read(reg, name, id, &pd);
    const char *pid = json_string_value(json_object_get(pub, "id"));
    int ok = pub && pid && !strcmp(pid, id);
    json_decref(pub);
    if (!ok)
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: %s", path,
                           pd.msg[0] ? pd.msg : "not this version's publication record");
  }
  return FTL_OK;
}

/* The audit log against the pointers already read (ptrs[i] is chans->v[i]'s): every line a whole
 * record; each channel's pointer exactly the replay of its moves; a channel the log names without
 * a pointer must have no applied move. r is scratch. The number of lines into *audit_lines (may
 * be NULL). */
static ftl_err check_log(const pl_registry_ref *reg, const char *name, const names *chans, const pl_reg_pointer *ptrs,
                         pl_reg_replay *r, size_t *audit_lines, ftl_diag *d) {
  char audit_path[4096], ptr_path[4096], rel[160];
  char *text = NULL;
  size_t size = 0;
  audit_scan as = {0};
  ftl_err rc;
  if ((rc = pl_reg_audit_read(reg, name, audit_path, sizeof audit_path, &text, &size, d))) goto out;
  as.path = audit_path;
  as.d = d;
  if (text && (rc = pl_reg_each_line(text, size, scan_line, &as))) goto out;
  for (size_t c = 0; c < chans->n; c++) {
    int unapplied = 0;
    snprintf(rel, sizeof rel, "channels/%s.json", chans->v[c]);
    if ((rc = pl_reg_path(ptr_path, sizeof ptr_path, reg, name, rel, d)) ||
        (rc = pl_reg_replay_channel(text, size, audit_path, ptr_path, chans->v[c], &ptrs[c], r, &unapplied, d)))
      goto out;
  }
  for (size_t c = 0; c < as.channels.n; c++) {
    int has_pointer = 0, unapplied = 0;
    for (size_t k = 0; !has_pointer && k < chans->n; k++)
      has_pointer = !strcmp(chans->v[k], as.channels.v[c]);
    if (has_pointer) continue;
    if (!pl_registry_channel_ok(as.channels.v[c])) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s names a channel \"%s\" that is not a valid name", audit_path,
                         as.channels.v[c]);
      goto out;
    }
    snprintf(rel, sizeof rel, "channels/%s.json", as.channels.v[c]);
    if ((rc = pl_reg_path(ptr_path, sizeof ptr_path, reg, name, rel, d)) ||
        (rc = pl_reg_replay_channel(text, size, audit_path, ptr_path, as.channels.v[c], NULL, r, &unapplied, d)))
      goto out;
  }
  if (audit_lines) *audit_lines = as.lines;
out:
  ftl_free(text);
  names_free(&as.channels);
  return rc;
}

ftl_err pl_registry_check(const pl_registry_ref *reg, const char *name, size_t *audit_lines, ftl_diag *d) {
  names vers = {0}, chans = {0};
  char path[4096];
  pl_reg_replay *r = NULL;
  pl_reg_pointer *ptrs = NULL;
  size_t n_ptrs = 0;
  struct stat st;
  ftl_err rc;
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if (!pl_registry_name_ok(name)) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid adapter name", name);
  if ((rc = pl_reg_path(path, sizeof path, reg, name, NULL, d))) return rc;
  if (lstat(path, &st) || !S_ISDIR(st.st_mode))
    return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "no adapter %s in %s", name, reg->root);
  if ((rc = pl_reg_path(path, sizeof path, reg, name, "versions", d)) ||
      (rc = list_dir(path, NULL, is_version, &vers, d)))
    goto out;
  for (size_t v = 0; v < vers.n; v++)
    if ((rc = check_version(reg, name, vers.v[v], d))) goto out;
  /* Every pointer names complete versions and is exactly what the log's moves give. The pointers
   * are read before the log: a move appends its line before it writes its pointer, so a writer
   * running meanwhile can only leave a line whose pointer is not there yet (pending, accepted),
   * never a pointer without its line. */
  if ((rc = pl_reg_path(path, sizeof path, reg, name, "channels", d)) ||
      (rc = list_dir(path, ".json", pl_registry_channel_ok, &chans, d)))
    goto out;
  if (!(r = ftl_calloc(1, sizeof *r)) || !(ptrs = ftl_calloc(chans.n ? chans.n : 1, sizeof *ptrs))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (size_t c = 0; c < chans.n; c++) {
    if ((rc = pl_reg_pointer_read(reg, name, chans.v[c], &ptrs[c], d))) goto out;
    n_ptrs = c + 1;
    rc = pl_reg_version_complete(reg, name, ptrs[c].current, NULL, NULL, d);
    for (size_t i = 0; !rc && i < ptrs[c].n_history; i++)
      rc = pl_reg_version_complete(reg, name, ptrs[c].history[i], NULL, NULL, d);
    if (rc) goto out;
  }
  rc = check_log(reg, name, &chans, ptrs, r, audit_lines, d);
out:
  for (size_t c = 0; c < n_ptrs; c++)
    pl_reg_pointer_free(&ptrs[c]);
  ftl_free(ptrs);
  ftl_free(r);
  names_free(&vers);
  names_free(&chans);
  return rc;
}
