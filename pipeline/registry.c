/* pipeline/registry.c: the adapter registry, a folder (registry.h, docs/formats/registry.md).
 *
 * Map: names and paths; channel pointers (parse, read, write); version folders (complete?,
 * publish); promote/rollback under the lock; resolve, unpack, fetch; listing, routes, check.
 *
 * Crash safety: a version appears by one rename of a complete, fsynced, verified temporary folder;
 * a channel pointer is replaced by one atomic write, and only after the version it names was
 * checked complete under the lock; the audit line is appended after the pointer write (a crash
 * between them leaves the move done and its line missing, never a line for a move not made). */
#include "pipeline/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ftl/core.h"
#include "pipeline/package.h"
#include "pipeline/pl_util.h"

#define HISTORY_MAX 100
#define POINTER_MAX_BYTES (1u << 20)
#define ID_LEN FTL_SHA256_HEX_LEN

typedef char id_t_[ID_LEN + 1];

/* ---- names and paths ----------------------------------------------------------------------- */

const char *ftl_registry_root_from_env(void) {
  const char *s = getenv("FTL_REGISTRY");
  return s && s[0] ? s : NULL;
}

int ftl_registry_name_ok(const char *s) {
  return s && pl_safe_name(s, 0) && s[0] != '-' && strlen(s) <= FTL_REGISTRY_NAME_MAX;
}

int ftl_registry_channel_ok(const char *s) { return ftl_registry_name_ok(s) && !ftl_sha256_is_hex(s); }

static int64_t lock_ms(const ftl_registry_ref *reg) { return reg->lock_timeout_ms > 0 ? reg->lock_timeout_ms : 30000; }

/* The default `who`: the effective user's name (its passwd entry; the numeric uid when it has
 * none), never $USER, which a cron job, a container or `env -i` leaves unset or wrong. */
static const char *who_of(const ftl_registry_ref *reg, char *buf, size_t size) {
  if (reg->who && reg->who[0]) return reg->who;
  uid_t uid = geteuid();
  struct passwd pw, *found = NULL;
  char pwbuf[4096];
  if (getpwuid_r(uid, &pw, pwbuf, sizeof pwbuf, &found) == 0 && found && found->pw_name && found->pw_name[0])
    snprintf(buf, size, "%s@%s", found->pw_name, ftl_hostname());
  else
    snprintf(buf, size, "%lu@%s", (unsigned long)uid, ftl_hostname());
  return buf;
}

static ftl_err path_of(char *out, size_t size, const ftl_registry_ref *reg, const char *name, const char *rest,
                       ftl_diag *d) {
  if (ftl_fmt(out, size, "%s/%s%s%s", reg->root, name, rest ? "/" : "", rest ? rest : ""))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "registry path too long under %s", reg->root);
  return FTL_OK;
}

static void now_iso(char *out, size_t size) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- channel pointers ---------------------------------------------------------------------- */

typedef struct pointer {
  id_t_ current, previous; /* previous "" when none */
  id_t_ *history;          /* earlier currents, oldest first; history[n-1] == previous */
  size_t n_history;
} pointer;

static void pointer_free(pointer *p) {
  ftl_free(p->history);
  memset(p, 0, sizeof *p);
}

static ftl_err pointer_parse(const char *bytes, size_t size, pointer *p, ftl_diag *d) {
  json_error_t jerr;
  ftl_err rc = FTL_ERR_CORRUPT;
  memset(p, 0, sizeof *p);
  if (size > POINTER_MAX_BYTES) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the channel pointer is too large");
  json_t *j = json_loadb(bytes, size, JSON_REJECT_DUPLICATES, &jerr);
  json_t *fmt = json_object_get(j, "format"), *ver = json_object_get(j, "version");
  json_t *cur = json_object_get(j, "current"), *prev = json_object_get(j, "previous");
  json_t *hist = json_object_get(j, "history");
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
  if (!ftl_sha256_is_hex(json_string_value(cur)) ||
      !(json_is_null(prev) || ftl_sha256_is_hex(json_string_value(prev))) || !json_is_array(hist) ||
      json_array_size(hist) > HISTORY_MAX) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "channel pointer: current, previous or history is malformed");
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
    if (!ftl_sha256_is_hex(h)) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "channel pointer: history entry %zu is not a version id", i);
      goto out;
    }
    memcpy(p->history[i], h, ID_LEN + 1);
  }
  p->n_history = n;
  memcpy(p->current, json_string_value(cur), ID_LEN + 1);
  if (json_is_string(prev)) memcpy(p->previous, json_string_value(prev), ID_LEN + 1);
  /* previous is the last of history: the two must agree. */
  if ((n == 0) != (p->previous[0] == '\0') || (n && strcmp(p->history[n - 1], p->previous))) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "channel pointer: previous is not the last entry of history");
    goto out;
  }
  rc = FTL_OK;
out:
  if (rc) pointer_free(p);
  json_decref(j);
  return rc;
}

ftl_err ftl_registry_channel_parse(const char *bytes, size_t size, char current[FTL_SHA256_HEX_LEN + 1],
                                   char previous[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  pointer p;
  ftl_err rc = pointer_parse(bytes, size, &p, d);
  if (rc) return rc;
  memcpy(current, p.current, ID_LEN + 1);
  memcpy(previous, p.previous, ID_LEN + 1);
  pointer_free(&p);
  return FTL_OK;
}

/* FTL_ERR_NOTFOUND when the channel has no pointer yet. */
static ftl_err pointer_read(const ftl_registry_ref *reg, const char *name, const char *channel, pointer *p,
                            ftl_diag *d) {
  char path[4096], rel[128];
  char *text = NULL;
  size_t size = 0;
  ftl_diag rd;
  memset(p, 0, sizeof *p);
  snprintf(rel, sizeof rel, "channels/%s.json", channel);
  ftl_err rc = path_of(path, sizeof path, reg, name, rel, d);
  if (rc) return rc;
  rc = ftl_read_file(path, POINTER_MAX_BYTES, &text, &size, &rd);
  if (rc == FTL_ERR_NOTFOUND) return ftl_diag_fail(d, rc, "%s@%s: no such channel", name, channel);
  if (rc) return ftl_diag_fail(d, rc, "%s", rd.msg);
  rc = pointer_parse(text, size, p, &rd);
  if (rc) ftl_diag_fail(d, rc, "%s: %s", path, rd.msg);
  ftl_free(text);
  return rc;
}

static ftl_err pointer_write(const ftl_registry_ref *reg, const char *name, const char *channel, const pointer *p,
                             const char *who, const char *why, ftl_diag *d) {
  char path[4096], rel[128], when[32];
  snprintf(rel, sizeof rel, "channels/%s.json", channel);
  ftl_err rc = path_of(path, sizeof path, reg, name, rel, d);
  if (rc) return rc;
  now_iso(when, sizeof when);
  json_t *j = json_object(), *hist = json_array();
  for (size_t i = 0; i < p->n_history; i++)
    json_array_append_new(hist, json_string(p->history[i]));
  json_object_set_new(j, "format", json_string(FTL_REGISTRY_CHANNEL_FORMAT));
  json_object_set_new(j, "version", json_integer(FTL_REGISTRY_VERSION));
  json_object_set_new(j, "name", json_string(name));
  json_object_set_new(j, "channel", json_string(channel));
  json_object_set_new(j, "current", json_string(p->current));
  json_object_set_new(j, "previous", p->previous[0] ? json_string(p->previous) : json_null());
  json_object_set_new(j, "history", hist);
  json_object_set_new(j, "time", json_string(when));
  json_object_set_new(j, "who", json_string(who));
  json_object_set_new(j, "why", json_string(why ? why : ""));
  size_t len = 0;
  char *text = pl_json_text(j, 1, &len);
  json_decref(j);
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  rc = pl_write_atomic(path, text, len, "promote.channel_write", d);
  ftl_free(text);
  return rc;
}

static ftl_err audit(const ftl_registry_ref *reg, const char *name, const char *action, const char *channel,
                     const char *from, const char *to, const char *who, const char *why, ftl_diag *d) {
  char path[4096], when[32];
  ftl_err rc = path_of(path, sizeof path, reg, name, "audit.jsonl", d);
  if (rc) return rc;
  now_iso(when, sizeof when);
  json_t *j = json_object();
  json_object_set_new(j, "version", json_integer(1));
  json_object_set_new(j, "time", json_string(when));
  json_object_set_new(j, "time_us", json_integer((json_int_t)ftl_wall_us()));
  json_object_set_new(j, "who", json_string(who));
  json_object_set_new(j, "action", json_string(action));
  json_object_set_new(j, "name", json_string(name));
  json_object_set_new(j, "channel", channel ? json_string(channel) : json_null());
  json_object_set_new(j, "from", from && from[0] ? json_string(from) : json_null());
  json_object_set_new(j, "to", to && to[0] ? json_string(to) : json_null());
  json_object_set_new(j, "why", json_string(why ? why : ""));
  rc = pl_jsonl_append(path, j, lock_ms(reg), d);
  json_decref(j);
  return rc;
}

typedef struct audit_find {
  const char *action, *channel, *to;
  int found;                /* publish: a line with action and to */
  char last_to[ID_LEN + 1]; /* promote: the "to" of the channel's last move */
} audit_find;

static ftl_err find_line(const char *line, size_t len, size_t line_no, void *ctx) {
  (void)line_no;
  audit_find *f = ctx;
  json_error_t jerr;
  json_t *j = json_loadb(line, len, 0, &jerr);
  const char *action = json_string_value(json_object_get(j, "action"));
  const char *channel = json_string_value(json_object_get(j, "channel"));
  const char *to = json_string_value(json_object_get(j, "to"));
  if (action && to) {
    if (!f->channel && !strcmp(action, f->action) && !strcmp(to, f->to)) f->found = 1;
    if (f->channel && channel && !strcmp(channel, f->channel) && strcmp(action, "publish"))
      snprintf(f->last_to, sizeof f->last_to, "%s", to);
  }
  json_decref(j);
  return FTL_OK;
}

static ftl_err each_line(const char *data, size_t size, ftl_err (*fn)(const char *, size_t, size_t, void *), void *ctx);

/* After a crash between a registry change and its audit line, the retry finds the change already
 * made: it appends the missing line then (marked "recovered"), so the log stays complete. */
static ftl_err audit_repair(const ftl_registry_ref *reg, const char *name, const char *action, const char *channel,
                            const char *to, const char *who, const char *why, ftl_diag *d) {
  char path[4096];
  char *text = NULL;
  size_t size = 0;
  audit_find f = {.action = action, .channel = channel, .to = to};
  ftl_err rc = path_of(path, sizeof path, reg, name, "audit.jsonl", d);
  if (rc) return rc;
  rc = ftl_read_file(path, (size_t)1 << 30, &text, &size, d);
  if (rc && rc != FTL_ERR_NOTFOUND) return rc;
  if (text) each_line(text, size, find_line, &f);
  ftl_free(text);
  if (channel ? !strcmp(f.last_to, to) : f.found) return FTL_OK;
  char why2[512];
  snprintf(why2, sizeof why2, "%s%s(recovered: the %s was made by an earlier attempt that stopped before recording it)",
           why ? why : "", why && why[0] ? " " : "", action);
  return audit(reg, name, action, channel, NULL, to, who, why2, d);
}

/* ---- versions ------------------------------------------------------------------------------ */

/* FTL_OK when versions/<id>/ holds a package and a MANIFEST.json whose SHA-256 is id. The
 * manifest bytes into *man (may be NULL; freed with ftl_free). */
static ftl_err version_complete(const ftl_registry_ref *reg, const char *name, const char *id, char **man,
                                size_t *man_size, ftl_diag *d) {
  char path[4096], rel[160], hex[ID_LEN + 1];
  char *text = NULL;
  size_t size = 0;
  struct stat st;
  ftl_diag rd;
  if (man) *man = NULL;
  if (!ftl_sha256_is_hex(id)) return ftl_diag_fail(d, FTL_ERR_INVAL, "%s is not a version id", id);
  snprintf(rel, sizeof rel, "versions/%s/%s", id, FTL_PACKAGE_MANIFEST);
  ftl_err rc = path_of(path, sizeof path, reg, name, rel, d);
  if (rc) return rc;
  rc = ftl_read_file(path, 1u << 20, &text, &size, &rd);
  if (rc == FTL_ERR_NOTFOUND) return ftl_diag_fail(d, rc, "%s has no version %s", name, id);
  if (rc) return ftl_diag_fail(d, rc, "%s", rd.msg);
  ftl_sha256_hex(text, size, hex);
  if (strcmp(hex, id)) {
    ftl_free(text);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: its SHA-256 is %s, not the version id", path, hex);
  }
  snprintf(rel, sizeof rel, "versions/%s/%s", id, FTL_PACKAGE_FILE);
  if ((rc = path_of(path, sizeof path, reg, name, rel, d))) {
    ftl_free(text);
    return rc;
  }
  if (lstat(path, &st) || !S_ISREG(st.st_mode) || st.st_size == 0) {
    ftl_free(text);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is missing or empty", path);
  }
  if (man) {
    *man = text;
    if (man_size) *man_size = size;
  } else {
    ftl_free(text);
  }
  return FTL_OK;
}

/* Copies src into dirfd/name (O_EXCL), fsynced, with the crash point halfway. */
static ftl_err copy_file(const char *src, int dirfd, const char *name, const char *crash, ftl_diag *d) {
  static __thread char buf[1 << 16];
  ftl_err rc = FTL_OK;
  struct stat st;
  int in = open(src, O_RDONLY | O_CLOEXEC), out = -1;
  if (in < 0 || fstat(in, &st)) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot open %s: %s", src, strerror(errno));
    goto done;
  }
  out = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (out < 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot create %s: %s", name, strerror(errno));
    goto done;
  }
  off_t done_bytes = 0, half = st.st_size / 2;
  int crashed = 0;
  for (;;) {
    ssize_t n = read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot read %s: %s", src, strerror(errno));
      goto done;
    }
    if (n == 0) break;
    for (ssize_t at = 0; at < n;) {
      ssize_t w = write(out, buf + at, (size_t)(n - at));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        rc = ftl_diag_fail(d, (errno == ENOSPC || errno == EDQUOT) ? FTL_ERR_NOSPC : FTL_ERR_IO, "cannot write %s: %s",
                           name, strerror(errno));
        goto done;
      }
      at += w;
    }
    done_bytes += n;
    if (!crashed && done_bytes >= half) {
      crashed = 1;
      pl_crash_point(crash);
    }
  }
  if (fsync(out)) rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot fsync %s: %s", name, strerror(errno));
done:
  if (in >= 0) close(in);
  if (out >= 0) close(out);
  return rc;
}

/* Removes versions/.tmp-* left by publishers that died (only called under the lock, so none is
 * in use). */
static void clean_stale(const char *versions) {
  DIR *dp = opendir(versions);
  if (!dp) return;
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (strncmp(e->d_name, ".tmp-", 5)) continue;
    char p[4096];
    if (ftl_fmt(p, sizeof p, "%s/%s", versions, e->d_name) == FTL_OK) pl_rmdir_files(p);
  }
  closedir(dp);
}

/* Points channel at id (complete, checked here) under the held lock. */
static ftl_err promote_locked(const ftl_registry_ref *reg, const char *name, const char *id, const char *channel,
                              const char *action, const char *who, const char *why, ftl_diag *d) {
  pointer p;
  ftl_err rc = version_complete(reg, name, id, NULL, NULL, d);
  if (rc) return rc;
  rc = pointer_read(reg, name, channel, &p, d);
  if (rc == FTL_ERR_NOTFOUND) {
    memset(&p, 0, sizeof p);
    rc = FTL_OK;
  }
  if (rc) return rc;
  if (p.current[0] && !strcmp(p.current, id)) {
    pointer_free(&p);
    /* Already there: nothing to move; record it only if an interrupted attempt did not. */
    return audit_repair(reg, name, action, channel, id, who, why, d);
  }
  pointer np = {0};
  np.history = ftl_calloc(HISTORY_MAX, sizeof *np.history);
  if (!np.history) {
    pointer_free(&p);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  }
  if (p.current[0]) {
    /* Keep the newest HISTORY_MAX - 1 of the old history, then the old current. */
    size_t skip = p.n_history >= HISTORY_MAX ? p.n_history - (HISTORY_MAX - 1) : 0;
    for (size_t i = skip; i < p.n_history; i++)
      memcpy(np.history[np.n_history++], p.history[i], ID_LEN + 1);
    memcpy(np.history[np.n_history++], p.current, ID_LEN + 1);
    memcpy(np.previous, p.current, ID_LEN + 1);
  }
  memcpy(np.current, id, ID_LEN + 1);
  rc = pointer_write(reg, name, channel, &np, who, why, d);
  if (!rc) {
    pl_crash_point("promote.before_audit");
    rc = audit(reg, name, action, channel, p.current, id, who, why, d);
  }
  pointer_free(&np);
  pointer_free(&p);
  return rc;
}

static ftl_err lock_adapter(const ftl_registry_ref *reg, const char *name, int *fd, ftl_diag *d) {
  char path[4096];
  ftl_err rc = path_of(path, sizeof path, reg, name, NULL, d);
  if (rc) return rc;
  if ((rc = ftl_mkdir_p(path, d))) return rc;
  if ((rc = path_of(path, sizeof path, reg, name, "versions", d)) || (rc = ftl_mkdir_p(path, d))) return rc;
  if ((rc = path_of(path, sizeof path, reg, name, "channels", d)) || (rc = ftl_mkdir_p(path, d))) return rc;
  if ((rc = path_of(path, sizeof path, reg, name, ".lock", d))) return rc;
  return pl_lock(path, lock_ms(reg), fd, d);
}

ftl_err ftl_registry_publish(const ftl_registry_ref *reg, const char *name, const char *package_path,
                             const char *channel, const char *why, char id_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  char id[ID_LEN + 1], versions[4096], vdir[4096], tmp[4096] = "", who_buf[256], pkg[4096];
  char *man = NULL, *have = NULL;
  size_t man_size = 0, have_size = 0;
  int lock = -1, dirfd = -1;
  ftl_err rc;
  const char *who = who_of(reg, who_buf, sizeof who_buf);
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if (!ftl_registry_name_ok(name)) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid adapter name", name);
  if (channel && !ftl_registry_channel_ok(channel))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid channel name", channel);
  /* The whole package is checked before anything is stored. */
  if ((rc = ftl_package_unpack(package_path, NULL, NULL, NULL, id, &man, &man_size, d))) return rc;
  if ((rc = lock_adapter(reg, name, &lock, d))) goto out;
  if ((rc = path_of(versions, sizeof versions, reg, name, "versions", d))) goto out;
  clean_stale(versions);
  if (ftl_fmt(vdir, sizeof vdir, "%s/%s", versions, id)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", versions);
    goto out;
  }
  struct stat st;
  if (lstat(vdir, &st) == 0) {
    rc = version_complete(reg, name, id, &have, &have_size, d);
    if (rc == FTL_OK && (have_size != man_size || memcmp(have, man, man_size))) rc = FTL_ERR_CORRUPT;
    if (rc) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT,
                         "%s exists with other or incomplete content; refusing to replace a "
                         "published version",
                         vdir);
      goto out;
    }
    /* The same version again: nothing to store; record it only if an interrupted attempt did not. */
    if ((rc = audit_repair(reg, name, "publish", NULL, id, who, why, d))) goto out;
  } else {
    if (ftl_fmt(tmp, sizeof tmp, "%s/.tmp-%.12s-XXXXXX", versions, id) || !mkdtemp(tmp)) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot create a temporary folder in %s: %s", versions, strerror(errno));
      tmp[0] = '\0';
      goto out;
    }
    /* mkdtemp makes it 0700; a published version is readable by the servers that load it. */
    if ((dirfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || fchmod(dirfd, 0755)) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot open %s: %s", tmp, strerror(errno));
      goto out;
    }
    if ((rc = copy_file(package_path, dirfd, FTL_PACKAGE_FILE, "publish.version_write", d))) goto out;
    int fd = openat(dirfd, FTL_PACKAGE_MANIFEST, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, man, man_size) != (ssize_t)man_size || fsync(fd)) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot write %s/%s: %s", tmp, FTL_PACKAGE_MANIFEST, strerror(errno));
      if (fd >= 0) close(fd);
      goto out;
    }
    close(fd);
    /* Publish's own check: the stored copy reads back whole, under the same id. */
    if (ftl_fmt(pkg, sizeof pkg, "%s/%s", tmp, FTL_PACKAGE_FILE) ||
        (rc = ftl_package_unpack(pkg, NULL, id, NULL, NULL, NULL, NULL, d)))
      goto out;
    if (fsync(dirfd)) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot fsync %s: %s", tmp, strerror(errno));
      goto out;
    }
    pl_crash_point("publish.before_rename");
    if (rename(tmp, vdir)) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot rename %s to %s: %s", tmp, vdir, strerror(errno));
      goto out;
    }
    tmp[0] = '\0';
    if ((rc = pl_fsync_dir(versions, d))) goto out;
    pl_crash_point("publish.after_rename");
    if ((rc = audit(reg, name, "publish", NULL, NULL, id, who, why, d))) goto out;
  }
  if (channel) rc = promote_locked(reg, name, id, channel, "promote", who, why, d);
out:
  if (dirfd >= 0) close(dirfd);
  if (tmp[0]) pl_rmdir_files(tmp);
  pl_unlock(lock);
  if (!rc && id_out) memcpy(id_out, id, ID_LEN + 1);
  ftl_free(have);
  ftl_free(man);
  return rc;
}

/* A version given as an id or a unique prefix (>= 8 hex digits) -> the id. */
static ftl_err version_lookup(const ftl_registry_ref *reg, const char *name, const char *v, char id[ID_LEN + 1],
                              ftl_diag *d) {
  size_t n = strlen(v);
  if (n < 8 || n > ID_LEN) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a version id (8 to 64 hex digits)", v);
  for (size_t i = 0; i < n; i++)
    if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f')))
      return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a version id (lowercase hex)", v);
  char versions[4096];
  ftl_err rc = path_of(versions, sizeof versions, reg, name, "versions", d);
  if (rc) return rc;
  DIR *dp = opendir(versions);
  if (!dp) return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s has no versions in %s", name, reg->root);
  int found = 0;
  struct dirent *e;
  while ((e = readdir(dp)))
    if (ftl_sha256_is_hex(e->d_name) && !strncmp(e->d_name, v, n)) {
      if (found++) break;
      memcpy(id, e->d_name, ID_LEN + 1);
    }
  closedir(dp);
  if (!found) return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s has no version %s", name, v);
  if (found > 1) return ftl_diag_fail(d, FTL_ERR_INVAL, "%s: version prefix %s is ambiguous", name, v);
  return FTL_OK;
}

ftl_err ftl_registry_promote(const ftl_registry_ref *reg, const char *name, const char *version, const char *channel,
                             const char *why, ftl_diag *d) {
  char id[ID_LEN + 1], who_buf[256];
  int lock = -1;
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if (!ftl_registry_name_ok(name)) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid adapter name", name);
  if (!ftl_registry_channel_ok(channel))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid channel name", channel ? channel : "");
  ftl_err rc = version_lookup(reg, name, version, id, d);
  if (rc) return rc;
  if ((rc = lock_adapter(reg, name, &lock, d))) return rc;
  rc = promote_locked(reg, name, id, channel, "promote", who_of(reg, who_buf, sizeof who_buf), why, d);
  pl_unlock(lock);
  return rc;
}

ftl_err ftl_registry_rollback(const ftl_registry_ref *reg, const char *name, const char *channel, const char *why,
                              char to_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  char who_buf[256];
  const char *who = who_of(reg, who_buf, sizeof who_buf);
  int lock = -1;
  pointer p = {0};
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if (!ftl_registry_name_ok(name)) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid adapter name", name);
  if (!ftl_registry_channel_ok(channel))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid channel name", channel ? channel : "");
  ftl_err rc = lock_adapter(reg, name, &lock, d);
  if (rc) return rc;
  if ((rc = pointer_read(reg, name, channel, &p, d))) goto out;
  if (!p.previous[0]) {
    rc = ftl_diag_fail(d, FTL_ERR_STATE, "%s@%s has no previous version to roll back to", name, channel);
    goto out;
  }
  if ((rc = version_complete(reg, name, p.previous, NULL, NULL, d))) goto out;
  pointer np = p;
  np.n_history = p.n_history - 1;
  memcpy(np.current, p.previous, ID_LEN + 1);
  if (np.n_history)
    memcpy(np.previous, p.history[np.n_history - 1], ID_LEN + 1);
  else
    np.previous[0] = '\0';
  if ((rc = pointer_write(reg, name, channel, &np, who, why, d))) goto out;
  if ((rc = audit(reg, name, "rollback", channel, p.current, np.current, who, why, d))) goto out;
  if (to_out) memcpy(to_out, np.current, ID_LEN + 1);
out:
  pointer_free(&p);
  pl_unlock(lock);
  return rc;
}

/* ---- resolve, unpack, fetch ---------------------------------------------------------------- */

ftl_err ftl_registry_resolve(const ftl_registry_ref *reg, const char *spec, char *name_out,
                             char id_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  const char *at = spec ? strchr(spec, '@') : NULL;
  if (!at || strchr(at + 1, '@') || (size_t)(at - spec) > FTL_REGISTRY_NAME_MAX)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not NAME@VERSION or NAME@CHANNEL", spec ? spec : "");
  char name[FTL_REGISTRY_NAME_MAX + 1];
  memcpy(name, spec, (size_t)(at - spec));
  name[at - spec] = '\0';
  const char *rest = at + 1;
  if (!ftl_registry_name_ok(name)) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid adapter name", name);
  if (ftl_registry_channel_ok(rest)) {
    pointer p;
    ftl_err rc = pointer_read(reg, name, rest, &p, d);
    if (rc == FTL_OK) {
      memcpy(id_out, p.current, ID_LEN + 1);
      pointer_free(&p);
      snprintf(name_out, FTL_REGISTRY_NAME_MAX + 1, "%s", name);
      return version_complete(reg, name, id_out, NULL, NULL, d);
    }
    if (rc != FTL_ERR_NOTFOUND) return rc;
  }
  ftl_err rc = version_lookup(reg, name, rest, id_out, d);
  if (rc == FTL_ERR_INVAL && ftl_registry_channel_ok(rest))
    return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s has no channel or version %s", name, rest);
  if (rc) return rc;
  snprintf(name_out, FTL_REGISTRY_NAME_MAX + 1, "%s", name);
  return version_complete(reg, name, id_out, NULL, NULL, d);
}

/* Checks an unpacked folder against the manifest it holds (and that against id). */
static ftl_err verify_unpacked(const char *dir, const char *id, ftl_diag *d) {
  char path[4096], hex[ID_LEN + 1];
  char *text = NULL;
  size_t size = 0;
  ftl_package_manifest *m = NULL;
  ftl_err rc;
  if (ftl_fmt(path, sizeof path, "%s/%s", dir, FTL_PACKAGE_MANIFEST))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
  if ((rc = ftl_read_file(path, 1u << 20, &text, &size, d))) return rc;
  if ((rc = ftl_package_manifest_parse(text, size, NULL, &m, d))) goto out;
  if (strcmp(m->id, id)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s does not belong to version %s", path, id);
    goto out;
  }
  for (size_t i = 0; i < m->n_files; i++) {
    uint64_t fsize = 0;
    if (ftl_fmt(path, sizeof path, "%s/%s", dir, m->files[i].name) || ftl_sha256_file(path, hex, &fsize, NULL) ||
        fsize != m->files[i].size || strcmp(hex, m->files[i].sha256)) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is missing or was changed after unpacking (remove %s to unpack again)",
                         path, dir);
      goto out;
    }
  }
out:
  ftl_package_manifest_free(m);
  ftl_free(text);
  return rc;
}

ftl_err ftl_registry_adapter_dir(const ftl_registry_ref *reg, const char *name, const char *id, char *out, size_t size,
                                 ftl_diag *d) {
  char rel[160], pkg[4096];
  ftl_err rc = version_complete(reg, name, id, NULL, NULL, d);
  if (rc) return rc;
  snprintf(rel, sizeof rel, "versions/%s/adapter", id);
  if ((rc = path_of(out, size, reg, name, rel, d))) return rc;
  snprintf(rel, sizeof rel, "versions/%s/%s", id, FTL_PACKAGE_FILE);
  if ((rc = path_of(pkg, sizeof pkg, reg, name, rel, d))) return rc;
  struct stat st;
  if (lstat(out, &st) != 0) {
    rc = ftl_package_unpack(pkg, out, id, NULL, NULL, NULL, NULL, d);
    if (rc == FTL_ERR_STATE) rc = FTL_OK; /* another process unpacked it first */
    if (rc) return rc;
  } else if (!S_ISDIR(st.st_mode)) {
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a folder", out);
  }
  return verify_unpacked(out, id, d);
}

ftl_err ftl_registry_fetch(const ftl_registry_ref *reg, const char *spec, const char *dir, ftl_diag *d) {
  char name[FTL_REGISTRY_NAME_MAX + 1], id[ID_LEN + 1], rel[160], pkg[4096];
  ftl_err rc = ftl_registry_resolve(reg, spec, name, id, d);
  if (rc) return rc;
  snprintf(rel, sizeof rel, "versions/%s/%s", id, FTL_PACKAGE_FILE);
  if ((rc = path_of(pkg, sizeof pkg, reg, name, rel, d))) return rc;
  return ftl_package_unpack(pkg, dir, id, NULL, NULL, NULL, NULL, d);
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

static int is_version(const char *s) { return ftl_sha256_is_hex(s); }

ftl_err ftl_registry_list(const ftl_registry_ref *reg, const char *name, FILE *out, ftl_diag *d) {
  names adapters = {0}, vers = {0}, chans = {0};
  char path[4096];
  ftl_err rc = FTL_OK;
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if (name) {
    if (!ftl_registry_name_ok(name)) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid adapter name", name);
    adapters.v = ftl_calloc(1, sizeof *adapters.v);
    if (!adapters.v || !(adapters.v[0] = ftl_strdup(name))) {
      ftl_free(adapters.v);
      return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    }
    adapters.n = 1;
  } else if ((rc = list_dir(reg->root, NULL, ftl_registry_name_ok, &adapters, d))) {
    return rc;
  }
  for (size_t a = 0; a < adapters.n; a++) {
    const char *nm = adapters.v[a];
    if ((rc = path_of(path, sizeof path, reg, nm, "versions", d)) || (rc = list_dir(path, NULL, is_version, &vers, d)))
      goto out;
    if ((rc = path_of(path, sizeof path, reg, nm, "channels", d)) ||
        (rc = list_dir(path, ".json", ftl_registry_channel_ok, &chans, d)))
      goto out;
    if (name && !vers.n && !chans.n) {
      rc = ftl_diag_fail(d, FTL_ERR_NOTFOUND, "no adapter %s in %s", nm, reg->root);
      goto out;
    }
    fprintf(out, "%s\n  versions:\n", nm);
    pointer *ptrs = ftl_calloc(chans.n ? chans.n : 1, sizeof *ptrs);
    if (!ptrs) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
      goto out;
    }
    for (size_t c = 0; c < chans.n; c++)
      if (pointer_read(reg, nm, chans.v[c], &ptrs[c], NULL)) memset(&ptrs[c], 0, sizeof ptrs[c]);
    for (size_t v = 0; v < vers.n; v++) {
      int complete = version_complete(reg, nm, vers.v[v], NULL, NULL, NULL) == FTL_OK;
      fprintf(out, "    %s%s", vers.v[v], complete ? "" : "  (INCOMPLETE)");
      int first = 1;
      for (size_t c = 0; c < chans.n; c++)
        if (!strcmp(ptrs[c].current, vers.v[v])) {
          fprintf(out, "%s%s", first ? "  [" : ", ", chans.v[c]);
          first = 0;
        }
      fprintf(out, "%s\n", first ? "" : "]");
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
      pointer_free(&ptrs[c]);
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

ftl_err ftl_registry_routes(const ftl_registry_ref *reg, const char *channel, FILE *out, ftl_diag *d) {
  names adapters = {0}, chans = {0};
  char path[4096], dir[4096], abs_dir[PATH_MAX];
  ftl_err rc = FTL_OK;
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if ((rc = list_dir(reg->root, NULL, ftl_registry_name_ok, &adapters, d))) return rc;
  for (size_t a = 0; a < adapters.n; a++) {
    const char *nm = adapters.v[a];
    if ((rc = path_of(path, sizeof path, reg, nm, "channels", d)) ||
        (rc = list_dir(path, ".json", ftl_registry_channel_ok, &chans, d)))
      goto out;
    for (size_t c = 0; c < chans.n; c++) {
      if (channel && strcmp(channel, chans.v[c])) continue;
      pointer p;
      if ((rc = pointer_read(reg, nm, chans.v[c], &p, d))) goto out;
      rc = ftl_registry_adapter_dir(reg, nm, p.current, dir, sizeof dir, d);
      pointer_free(&p);
      if (rc) goto out;
      if (!realpath(dir, abs_dir)) {
        rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot resolve %s: %s", dir, strerror(errno));
        goto out;
      }
      fprintf(out, "%s@%s=%s\n", nm, chans.v[c], abs_dir);
    }
    names_free(&chans);
  }
out:
  names_free(&adapters);
  names_free(&chans);
  return rc;
}

typedef struct audit_count {
  size_t lines;
  const char *path;
  ftl_diag *d;
} audit_count;

static ftl_err count_line(const char *line, size_t len, size_t line_no, void *ctx) {
  audit_count *ac = ctx;
  json_error_t jerr;
  json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
  int ok =
      json_is_object(j) && json_is_string(json_object_get(j, "action")) && json_is_string(json_object_get(j, "who"));
  json_decref(j);
  if (!ok) return ftl_diag_fail(ac->d, FTL_ERR_CORRUPT, "%s: line %zu is not a whole audit record", ac->path, line_no);
  ac->lines++;
  return FTL_OK;
}

/* Splits data into lines, calling fn for each non-empty one. */
static ftl_err each_line(const char *data, size_t size, ftl_err (*fn)(const char *, size_t, size_t, void *),
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

ftl_err ftl_registry_check(const ftl_registry_ref *reg, const char *name, size_t *audit_lines, ftl_diag *d) {
  names vers = {0}, chans = {0};
  char path[4096];
  char *text = NULL;
  size_t size = 0;
  ftl_err rc;
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if ((rc = path_of(path, sizeof path, reg, name, "versions", d)) || (rc = list_dir(path, NULL, is_version, &vers, d)))
    goto out;
  for (size_t v = 0; v < vers.n; v++)
    if ((rc = version_complete(reg, name, vers.v[v], NULL, NULL, d))) goto out;
  if ((rc = path_of(path, sizeof path, reg, name, "channels", d)) ||
      (rc = list_dir(path, ".json", ftl_registry_channel_ok, &chans, d)))
    goto out;
  for (size_t c = 0; c < chans.n; c++) {
    pointer p;
    if ((rc = pointer_read(reg, name, chans.v[c], &p, d))) goto out;
    rc = version_complete(reg, name, p.current, NULL, NULL, d);
    for (size_t i = 0; !rc && i < p.n_history; i++)
      rc = version_complete(reg, name, p.history[i], NULL, NULL, d);
    pointer_free(&p);
    if (rc) goto out;
  }
  if ((rc = path_of(path, sizeof path, reg, name, "audit.jsonl", d))) goto out;
  audit_count ac = {0, path, d};
  rc = ftl_read_file(path, (size_t)1 << 30, &text, &size, d);
  if (rc == FTL_ERR_NOTFOUND) {
    rc = FTL_OK;
  } else if (rc == FTL_OK) {
    rc = each_line(text, size, count_line, &ac);
  }
  if (!rc && audit_lines) *audit_lines = ac.lines;
out:
  ftl_free(text);
  names_free(&vers);
  names_free(&chans);
  return rc;
}
