/* pipeline/registry_store.c: the registry folder as both sides see it (registry_store.h,
 * docs/formats/registry.md): names and paths; the channel pointer's codec and reader; the audit
 * log's reader and the replay of a channel's moves; versions (complete?, lookup by prefix, the
 * check of an unpacked folder); the adapter's lock and the removal of what dead writers left.
 * Changes are made in registry_txn.c, reads in registry_query.c; neither calls the other.
 *
 * Map: names and paths; channel pointers (codec, reader); the audit log (reading, replay of a
 * channel); versions (the completeness check, removal of what dead writers left, the adapter's
 * lock, lookup by prefix, the check of an unpacked folder).
 *
 * Everything read from the registry is opened O_NOFOLLOW|O_NONBLOCK and checked to be a regular
 * file of bounded size (core_fs_read_regular): a FIFO or device planted in it is refused, never waited
 * on while the lock is held. A version folder is a real folder, never a link followed out of the
 * registry (pl_reg_version_complete). */
#include "pipeline/registry_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "core/jsonl.h"
#include "ftl/core.h"
#include "pipeline/package.h"
#include "pipeline/pl_util.h"
#include "pipeline/sha256.h"

/* ---- names and paths ----------------------------------------------------------------------- */

const char *pl_registry_root_from_env(void) {
  const char *s = getenv("FTL_REGISTRY");
  return s && s[0] ? s : NULL;
}

int pl_registry_name_ok(const char *s) {
  return s && pl_safe_name(s, 0) && s[0] != '-' && strlen(s) <= FTL_REGISTRY_NAME_MAX;
}

int pl_registry_channel_ok(const char *s) { return pl_registry_name_ok(s) && !pl_sha256_is_hex(s); }

int64_t pl_reg_lock_ms(const pl_registry_ref *reg) { return reg->lock_timeout_ms > 0 ? reg->lock_timeout_ms : 30000; }

ftl_err pl_reg_path(char *out, size_t size, const pl_registry_ref *reg, const char *name, const char *rest,
                    ftl_diag *d) {
  if (ftl_fmt(out, size, "%s/%s%s%s", reg->root, name, rest ? "/" : "", rest ? rest : ""))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "registry path too long under %s", reg->root);
  return FTL_OK;
}

/* ---- channel pointers ---------------------------------------------------------------------- */

void pl_reg_pointer_free(pl_reg_pointer *p) {
  ftl_free(p->history);
  memset(p, 0, sizeof *p);
}

ftl_err pl_reg_pointer_parse(const char *bytes, size_t size, pl_reg_pointer *p, ftl_diag *d) {
  json_error_t jerr;
  ftl_err rc = FTL_ERR_CORRUPT;
  memset(p, 0, sizeof *p);
  if (size > PL_REG_POINTER_MAX_BYTES) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the channel pointer is too large");
  json_t *j = json_loadb(bytes, size, JSON_REJECT_DUPLICATES, &jerr);
  json_t *fmt = json_object_get(j, "format"), *ver = json_object_get(j, "version");
  json_t *cur = json_object_get(j, "current"), *prev = json_object_get(j, "previous");
  json_t *hist = json_object_get(j, "history"), *seq = json_object_get(j, "seq");
  if (!json_is_object(j) || !json_is_string(fmt) || strcmp(json_string_value(fmt), FTL_REGISTRY_CHANNEL_FORMAT) ||
      !json_is_integer(ver)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "not a channel pointer of format %s", FTL_REGISTRY_CHANNEL_FORMAT);
    goto out;
  }
  if (json_integer_value(ver) != FTL_REGISTRY_VERSION) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "channel pointer version %lld; this ftl reads version %d",
                       (long long)json_integer_value(ver), FTL_REGISTRY_VERSION);
    goto out;
  }
  if (!pl_sha256_is_hex(json_string_value(cur)) || !(json_is_null(prev) || pl_sha256_is_hex(json_string_value(prev))) ||
      !json_is_array(hist) || json_array_size(hist) > PL_REG_HISTORY_MAX ||
      (seq && (!json_is_integer(seq) || json_integer_value(seq) < 1))) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "channel pointer: current, previous, history or seq is malformed");
    goto out;
  }
  size_t n = json_array_size(hist);
  p->history = ftl_calloc(n ? n : 1, sizeof *p->history);
  if (!p->history) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    const char *h = json_string_value(json_array_get(hist, i));
    if (!pl_sha256_is_hex(h)) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "channel pointer: history entry %zu is not a version id", i);
      goto out;
    }
    memcpy(p->history[i], h, PL_REG_ID_LEN + 1);
  }
  p->n_history = n;
  p->seq = seq ? (int64_t)json_integer_value(seq) : -1;
  memcpy(p->current, json_string_value(cur), PL_REG_ID_LEN + 1);
  if (json_is_string(prev)) memcpy(p->previous, json_string_value(prev), PL_REG_ID_LEN + 1);
  /* previous is the last of history: the two must agree. */
  if ((n == 0) != (p->previous[0] == '\0') || (n && strcmp(p->history[n - 1], p->previous))) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "channel pointer: previous is not the last entry of history");
    goto out;
  }
  rc = FTL_OK;
out:
  if (rc) pl_reg_pointer_free(p);
  json_decref(j);
  return rc;
}

ftl_err pl_registry_channel_parse(const char *bytes, size_t size, char current[FTL_SHA256_HEX_LEN + 1],
                                  char previous[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  pl_reg_pointer p;
  ftl_err rc = pl_reg_pointer_parse(bytes, size, &p, d);
  if (rc) return rc;
  memcpy(current, p.current, PL_REG_ID_LEN + 1);
  memcpy(previous, p.previous, PL_REG_ID_LEN + 1);
  pl_reg_pointer_free(&p);
  return FTL_OK;
}

/* FTL_ERR_NOTFOUND when the channel has no pointer yet. */
ftl_err pl_reg_pointer_read(const pl_registry_ref *reg, const char *name, const char *channel, pl_reg_pointer *p,
                            ftl_diag *d) {
  char path[4096], rel[128];
  char *text = NULL;
  size_t size = 0;
  ftl_diag rd;
  memset(p, 0, sizeof *p);
  snprintf(rel, sizeof rel, "channels/%s.json", channel);
  ftl_err rc = pl_reg_path(path, sizeof path, reg, name, rel, d);
  if (rc) return rc;
  rc = core_fs_read_regular(path, PL_REG_POINTER_MAX_BYTES, &text, &size, &rd);
  if (rc == FTL_ERR_NOTFOUND) return ftl_diag_fail(d, rc, "%s@%s: no such channel", name, channel);
  if (rc) return ftl_diag_fail(d, rc, "%s", rd.msg);
  rc = pl_reg_pointer_parse(text, size, p, &rd);
  if (rc) ftl_diag_fail(d, rc, "%s: %s", path, rd.msg);
  ftl_free(text);
  return rc;
}

/* ---- the audit log: reading, replay of a channel ------------------------------------------- */

/* The whole log (empty when there is none yet): a regular file, bounded. */
ftl_err pl_reg_audit_read(const pl_registry_ref *reg, const char *name, char *path, size_t path_size, char **text,
                          size_t *size, ftl_diag *d) {
  *text = NULL;
  *size = 0;
  ftl_err rc = pl_reg_path(path, path_size, reg, name, "audit.jsonl", d);
  if (rc) return rc;
  rc = core_fs_read_regular(path, PL_REG_AUDIT_MAX_BYTES, text, size, d);
  return rc == FTL_ERR_NOTFOUND ? FTL_OK : rc;
}

/* Splits data into lines, calling fn for each non-empty one. */
ftl_err pl_reg_each_line(const char *data, size_t size, ftl_err (*fn)(const char *, size_t, size_t, void *),
                         void *ctx) {
  size_t start = 0, no = 1;
  for (size_t i = 0; i <= size; i++)
    if (i == size || data[i] == '\n') {
      if (i > start) {
        ftl_err rc = fn(data + start, i - start, no, ctx);
        if (rc) return rc;
      }
      start = i + 1;
      no++;
    }
  return FTL_OK;
}

static ftl_err replay_apply(pl_reg_replay *r, const char *action, const char *from, const char *to, size_t line_no) {
  if (strcmp(from, r->current))
    return ftl_diag_fail(r->d, FTL_ERR_CORRUPT, "%s: line %zu moves %s from %.12s, but the log had it at %.12s",
                         r->path, line_no, r->channel, from[0] ? from : "(nothing)",
                         r->current[0] ? r->current : "(nothing)");
  if (!strcmp(action, "promote")) {
    if (r->current[0]) {
      if (r->n_history == PL_REG_HISTORY_MAX) {
        memmove(r->history, r->history + 1, (PL_REG_HISTORY_MAX - 1) * sizeof r->history[0]);
        r->n_history--;
      }
      memcpy(r->history[r->n_history++], r->current, PL_REG_ID_LEN + 1);
    }
  } else {
    if (!r->n_history || strcmp(r->history[r->n_history - 1], to))
      return ftl_diag_fail(r->d, FTL_ERR_CORRUPT,
                           "%s: line %zu rolls %s back to %.12s, which was not its previous version", r->path, line_no,
                           r->channel, to);
    r->n_history--;
  }
  memcpy(r->current, to, PL_REG_ID_LEN + 1);
  r->seq++;
  return FTL_OK;
}

static ftl_err replay_commit(pl_reg_replay *r) {
  if (!r->pending) return FTL_OK;
  r->pending = 0;
  return replay_apply(r, r->pend_action, r->pend_from, r->pend_to, r->pend_line);
}

static ftl_err replay_line(const char *line, size_t len, size_t line_no, void *ctx) {
  pl_reg_replay *r = ctx;
  json_error_t jerr;
  ftl_err rc = FTL_OK;
  /* A line torn by a writer that died mid-append (ended by the next append's '\n') was never a
   * record: its command failed before it moved anything. */
  if (core_jsonl_line_torn(line, len)) return FTL_OK;
  json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
  const char *action = json_string_value(json_object_get(j, "action"));
  const char *channel = json_string_value(json_object_get(j, "channel"));
  json_t *from_j = json_object_get(j, "from"), *to_j = json_object_get(j, "to"), *seq_j = json_object_get(j, "seq");
  const char *from = json_string_value(from_j), *to = json_string_value(to_j);
  if (!json_is_object(j) || !action || !json_is_string(json_object_get(j, "who"))) {
    rc = ftl_diag_fail(r->d, FTL_ERR_CORRUPT, "%s: line %zu is not a whole audit record", r->path, line_no);
    goto out;
  }
  if (!channel || strcmp(channel, r->channel)) goto out;
  int move = !strcmp(action, "promote") || !strcmp(action, "rollback");
  if (!move && strcmp(action, "abort")) {
    rc = ftl_diag_fail(r->d, FTL_ERR_CORRUPT, "%s: line %zu has an unknown action \"%s\"", r->path, line_no, action);
    goto out;
  }
  if (!pl_sha256_is_hex(to) || !(json_is_null(from_j) || pl_sha256_is_hex(from)) ||
      (seq_j && (!json_is_integer(seq_j) || json_integer_value(seq_j) < 1)) || (!move && !seq_j)) {
    rc = ftl_diag_fail(r->d, FTL_ERR_CORRUPT, "%s: line %zu: from, to or seq is malformed", r->path, line_no);
    goto out;
  }
  r->any = 1;
  int64_t seq = seq_j ? (int64_t)json_integer_value(seq_j) : 0;
  if (!move) {
    if (!r->pending || r->pend_seq != seq) {
      rc = ftl_diag_fail(r->d, FTL_ERR_CORRUPT, "%s: line %zu cancels move %lld of %s, which is not the pending one",
                         r->path, line_no, (long long)seq, r->channel);
      goto out;
    }
    r->pending = 0;
    goto out;
  }
  /* A pending move followed by another was applied: moves wait for the one before to settle. */
  if ((rc = replay_commit(r))) goto out;
  if (!seq_j) {
    rc = replay_apply(r, action, from ? from : "", to, line_no);
    goto out;
  }
  if (seq != r->seq + 1) {
    rc = ftl_diag_fail(r->d, FTL_ERR_CORRUPT, "%s: line %zu is move %lld of %s; the log expected move %lld", r->path,
                       line_no, (long long)seq, r->channel, (long long)(r->seq + 1));
    goto out;
  }
  r->pending = 1;
  r->pend_seq = seq;
  r->pend_line = line_no;
  snprintf(r->pend_action, sizeof r->pend_action, "%s", action);
  snprintf(r->pend_from, sizeof r->pend_from, "%s", from ? from : "");
  snprintf(r->pend_to, sizeof r->pend_to, "%s", to);
out:
  json_decref(j);
  return rc;
}

/* Replays the log for channel and settles its last move against the pointer p (NULL: none):
 * applied when the pointer carries its seq, not applied (*unapplied set) when the pointer is one
 * move behind. Then the replayed state must be the pointer, field by field. */
ftl_err pl_reg_replay_channel(const char *text, size_t size, const char *audit_path, const char *ptr_path,
                              const char *channel, const pl_reg_pointer *p, pl_reg_replay *r, int *unapplied,
                              ftl_diag *d) {
  memset(r, 0, sizeof *r);
  r->channel = channel;
  r->path = audit_path;
  r->d = d;
  *unapplied = 0;
  ftl_err rc = text ? pl_reg_each_line(text, size, replay_line, r) : FTL_OK;
  if (rc) return rc;
  int64_t pseq = !p ? 0 : p->seq >= 0 ? p->seq : r->seq; /* a pointer without seq: as many as applied */
  if (r->pending) {
    if (pseq == r->pend_seq) {
      if ((rc = replay_commit(r))) return rc;
    } else if (pseq == r->pend_seq - 1) {
      *unapplied = 1;
    } else {
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is at move %lld, but %s records move %lld of %s last", ptr_path,
                           (long long)pseq, audit_path, (long long)r->pend_seq, channel);
    }
  }
  if (!p) {
    if (r->current[0])
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s records moves of channel %s, but %s does not exist", audit_path,
                           channel, ptr_path);
    return FTL_OK;
  }
  int same = !strcmp(p->current, r->current) && p->n_history == r->n_history && (p->seq < 0 || p->seq == r->seq);
  for (size_t i = 0; same && i < p->n_history; i++)
    same = !strcmp(p->history[i], r->history[i]);
  if (!same)
    return ftl_diag_fail(
        d, FTL_ERR_CORRUPT,
        "%s (at %.12s, move %lld, %zu earlier) is not what %s records for %s (at %.12s, move %lld, %zu "
        "earlier)",
        ptr_path, p->current, (long long)p->seq, p->n_history, audit_path, channel,
        r->current[0] ? r->current : "(nothing)", (long long)r->seq, r->n_history);
  return FTL_OK;
}

/* ---- versions ------------------------------------------------------------------------------ */

/* Refuses a version folder that is not a real folder of the registry's: everything under
 * versions/<id>/ is read and served by path, so a symbolic link planted there (or a file system
 * mounted there) would serve another tree's files as this version. The adapter's folder and its
 * versions/ are opened O_NOFOLLOW from the registry's root, the version folder O_NOFOLLOW from
 * versions/ (openat), and it must be on versions/' own file system, where ftl's rename put it.
 * A writer who can rename inside versions/ can replace a version anyway: this is against a planted
 * link, not a racing writer. */
static ftl_err version_dir_check(const pl_registry_ref *reg, const char *name, const char *id, ftl_diag *d) {
  const char *parts[] = {name, "versions", id};
  char shown[4096];
  struct stat up, st;
  int fd = core_fs_table.open(reg->root, O_RDONLY | O_DIRECTORY, 0), nfd = -1;
  ftl_err rc = FTL_OK;
  if (fd < 0 && errno == ENOENT) return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s has no version %s", name, id);
  if (fd < 0) return ftl_diag_fail(d, core_errno_to_err(errno), "cannot open %s: %s", reg->root, strerror(errno));
  snprintf(shown, sizeof shown, "%s", reg->root);
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    size_t at = strlen(shown);
    snprintf(shown + at, sizeof shown - at, "/%s", parts[i]);
    nfd = core_fs_table.openat(fd, parts[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (nfd < 0) {
      int e = errno;
      if (e == ENOENT)
        rc = ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s has no version %s", name, id);
      else if (e == ELOOP || e == ENOTDIR)
        rc = ftl_diag_fail(d, FTL_ERR_CORRUPT,
                           "version %.12s of %s: %s is a symbolic link or not a folder; a version is served only "
                           "from the registry's own folders; refused",
                           id, name, shown);
      else
        rc = ftl_diag_fail(d, core_errno_to_err(e), "version %.12s of %s: cannot open %s: %s", id, name, shown,
                           strerror(e));
      goto out;
    }
    if (i == 2 && (fstat(fd, &up) || fstat(nfd, &st))) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "version %.12s of %s: cannot stat %s: %s", id, name, shown, strerror(errno));
      goto out;
    }
    if (i == 2 && st.st_dev != up.st_dev) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT,
                         "version %.12s of %s: %s is on another file system than its versions/ folder (mounted "
                         "there?); a version is served only from the registry's own folders; refused",
                         id, name, shown);
      goto out;
    }
    core_fs_table.close(fd);
    fd = nfd;
    nfd = -1;
  }
out:
  if (nfd >= 0) core_fs_table.close(nfd);
  core_fs_table.close(fd);
  return rc;
}

/* FTL_OK when versions/<id>/ is a real folder of the registry's holding a package (a regular file)
 * and a MANIFEST.json whose SHA-256 is id. The manifest bytes into *man (may be NULL; freed with
 * ftl_free). */
ftl_err pl_reg_version_complete(const pl_registry_ref *reg, const char *name, const char *id, char **man,
                                size_t *man_size, ftl_diag *d) {
  char path[4096], rel[160], hex[PL_REG_ID_LEN + 1];
  char *text = NULL;
  size_t size = 0;
  struct stat st;
  ftl_diag rd;
  if (man) *man = NULL;
  if (!pl_sha256_is_hex(id)) return ftl_diag_fail(d, FTL_ERR_INVAL, "%s is not a version id", id);
  snprintf(rel, sizeof rel, "versions/%s/%s", id, FTL_PACKAGE_MANIFEST);
  ftl_err rc = pl_reg_path(path, sizeof path, reg, name, rel, d);
  if (rc) return rc;
  if ((rc = version_dir_check(reg, name, id, d))) return rc;
  rc = core_fs_read_regular(path, PL_REG_MANIFEST_MAX_BYTES, &text, &size, &rd);
  if (rc == FTL_ERR_NOTFOUND) return ftl_diag_fail(d, rc, "%s has no version %s", name, id);
  if (rc) return ftl_diag_fail(d, rc, "%s", rd.msg);
  pl_sha256_hex(text, size, hex);
  if (strcmp(hex, id)) {
    ftl_free(text);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: its SHA-256 is %s, not the version id", path, hex);
  }
  snprintf(rel, sizeof rel, "versions/%s/%s", id, FTL_PACKAGE_FILE);
  if ((rc = pl_reg_path(path, sizeof path, reg, name, rel, d))) {
    ftl_free(text);
    return rc;
  }
  if (lstat(path, &st) || !S_ISREG(st.st_mode) || st.st_size == 0) {
    ftl_free(text);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is missing, empty or not a regular file", path);
  }
  if (man) {
    *man = text;
    if (man_size) *man_size = size;
  } else {
    ftl_free(text);
  }
  return FTL_OK;
}

/* Calls fn(dir/entry) for each entry of dir whose name starts with prefix. */
static void each_prefixed(const char *dir, const char *prefix, void (*fn)(const char *)) {
  DIR *dp = opendir(dir);
  if (!dp) return;
  struct dirent *e;
  size_t n = strlen(prefix);
  while ((e = readdir(dp))) {
    char p[4096];
    if (strncmp(e->d_name, prefix, n) || ftl_fmt(p, sizeof p, "%s/%s", dir, e->d_name)) continue;
    fn(p);
  }
  closedir(dp);
}

static void unlink_path(const char *p) { core_fs_table.unlink(p); }

/* Removes what writers that died left behind: versions/.tmp-* (a publish), versions/<id>/adapter.tmp-*
 * (an unpack), channels/<channel>.json.tmp-* (a pointer write). Only under the lock: every writer
 * of these holds it, so none of them is in use. */
void pl_reg_clean_stale(const pl_registry_ref *reg, const char *name) {
  char dir[4096];
  DIR *dp;
  if (pl_reg_path(dir, sizeof dir, reg, name, "versions", NULL)) return;
  each_prefixed(dir, ".tmp-", core_fs_rm_tree);
  if ((dp = opendir(dir))) {
    struct dirent *e;
    while ((e = readdir(dp))) {
      char v[4096];
      if (!pl_sha256_is_hex(e->d_name) || ftl_fmt(v, sizeof v, "%s/%s", dir, e->d_name)) continue;
      each_prefixed(v, "adapter.tmp-", core_fs_rm_tree);
    }
    closedir(dp);
  }
  if (pl_reg_path(dir, sizeof dir, reg, name, "channels", NULL)) return;
  DIR *cp = opendir(dir);
  if (!cp) return;
  struct dirent *e;
  while ((e = readdir(cp))) {
    char p[4096];
    if (!strstr(e->d_name, ".json.tmp-") || ftl_fmt(p, sizeof p, "%s/%s", dir, e->d_name)) continue;
    unlink_path(p);
  }
  closedir(cp);
}

/* Takes the adapter's lock. create: make the adapter's folders first (publish); otherwise the
 * adapter must exist, and nothing is created for one that does not (beyond its .lock). */
ftl_err pl_reg_lock_adapter(const pl_registry_ref *reg, const char *name, int create, int *fd, ftl_diag *d) {
  char path[4096];
  struct stat st;
  ftl_err rc = pl_reg_path(path, sizeof path, reg, name, NULL, d);
  if (rc) return rc;
  if (!create) {
    if (lstat(path, &st) || !S_ISDIR(st.st_mode))
      return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "no adapter %s in %s", name, reg->root);
  } else {
    if ((rc = ftl_mkdir_p(path, d))) return rc;
    if ((rc = pl_reg_path(path, sizeof path, reg, name, "versions", d)) || (rc = ftl_mkdir_p(path, d))) return rc;
    if ((rc = pl_reg_path(path, sizeof path, reg, name, "channels", d)) || (rc = ftl_mkdir_p(path, d))) return rc;
  }
  if ((rc = pl_reg_path(path, sizeof path, reg, name, ".lock", d))) return rc;
  return pl_lock(path, pl_reg_lock_ms(reg), fd, d);
}

/* A version given as an id or a unique prefix (>= 8 hex digits) -> the id. */
ftl_err pl_reg_version_lookup(const pl_registry_ref *reg, const char *name, const char *v, char id[PL_REG_ID_LEN + 1],
                              ftl_diag *d) {
  size_t n = strlen(v);
  if (n < 8 || n > PL_REG_ID_LEN)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a version id (8 to 64 hex digits)", v);
  for (size_t i = 0; i < n; i++)
    if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f')))
      return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a version id (lowercase hex)", v);
  char versions[4096];
  ftl_err rc = pl_reg_path(versions, sizeof versions, reg, name, "versions", d);
  if (rc) return rc;
  DIR *dp = opendir(versions);
  if (!dp) return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s has no versions in %s", name, reg->root);
  int found = 0;
  struct dirent *e;
  while ((e = readdir(dp)))
    if (pl_sha256_is_hex(e->d_name) && !strncmp(e->d_name, v, n)) {
      if (found++) break;
      memcpy(id, e->d_name, PL_REG_ID_LEN + 1);
    }
  closedir(dp);
  if (!found) return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s has no version %s", name, v);
  if (found > 1) return ftl_diag_fail(d, FTL_ERR_INVAL, "%s: version prefix %s is ambiguous", name, v);
  return FTL_OK;
}

/* Checks an unpacked folder against the manifest it holds (and that against id): it must hold
 * exactly MANIFEST.json and the declared files, each a regular file of its declared size and
 * SHA-256. Servers read more than the weights (a pickle adapter_model.bin, a tokenizer config with
 * a chat template), so an undeclared file is refused as firmly as a changed one. */
/* 1 when dir/base is a folder (not a link) whose entries are all base files (the caller's
 * manifest lists base files, so it lists them all: its parser's rule). */
static int base_folder_ok(const char *dir) {
  char path[4096], name[300];
  struct stat st;
  if (ftl_fmt(path, sizeof path, "%s/%s", dir, FTL_PACKAGE_BASE_DIR) || lstat(path, &st) || !S_ISDIR(st.st_mode))
    return 0;
  DIR *dp = opendir(path);
  if (!dp) return 0;
  int ok = 1;
  struct dirent *e;
  while (ok && (e = readdir(dp))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    ok = !ftl_fmt(name, sizeof name, "%s/%s", FTL_PACKAGE_BASE_DIR, e->d_name) && pl_package_is_base_file(name);
  }
  closedir(dp);
  return ok;
}

ftl_err pl_reg_verify_unpacked(const char *dir, const char *id, ftl_diag *d) {
  char path[4096], hex[PL_REG_ID_LEN + 1];
  char *text = NULL;
  size_t size = 0;
  pl_package_manifest *m = NULL;
  DIR *dp = NULL;
  ftl_diag rd;
  ftl_err rc;
  if (ftl_fmt(path, sizeof path, "%s/%s", dir, FTL_PACKAGE_MANIFEST))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
  if ((rc = core_fs_read_regular(path, PL_REG_MANIFEST_MAX_BYTES, &text, &size, d))) return rc;
  if ((rc = pl_package_manifest_parse(text, size, NULL, &m, d))) goto out;
  if (strcmp(m->id, id)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s does not belong to version %s", path, id);
    goto out;
  }
  if (!(dp = opendir(dir))) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot list %s: %s", dir, strerror(errno));
    goto out;
  }
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, FTL_PACKAGE_MANIFEST)) continue;
    int declared = 0;
    for (size_t i = 0; !declared && i < m->n_files; i++)
      declared = !strcmp(e->d_name, m->files[i].name);
    /* The base's folder: a real folder holding exactly the base files' leaves. */
    if (!declared && m->n_base && !strcmp(e->d_name, FTL_PACKAGE_BASE_DIR))
      declared = base_folder_ok(dir);
    if (!declared) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT,
                         "%s/%s is not declared in its manifest; a served folder holds exactly its declared files "
                         "(remove %s to unpack again)",
                         dir, e->d_name, dir);
      goto out;
    }
  }
  for (size_t i = 0; i < m->n_files; i++) {
    uint64_t fsize = 0;
    if (ftl_fmt(path, sizeof path, "%s/%s", dir, m->files[i].name)) {
      rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
      goto out;
    }
    rc = pl_sha256_file(path, m->files[i].size, hex, &fsize, &rd);
    if (rc || fsize != m->files[i].size || strcmp(hex, m->files[i].sha256)) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT,
                         "%s is missing or was changed after unpacking%s%s (remove %s to unpack again)", path,
                         rc ? ": " : "", rc ? rd.msg : "", dir);
      goto out;
    }
  }
out:
  if (dp) closedir(dp);
  pl_package_manifest_free(m);
  ftl_free(text);
  return rc;
}
