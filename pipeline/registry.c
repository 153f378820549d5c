/* pipeline/registry.c: the adapter registry, a folder (registry.h, docs/formats/registry.md).
 *
 * Map: names and paths; channel pointers (parse, read, write); the audit log (append, replay of a
 * channel's moves); version folders (complete?, stale temporaries, publish with its trust and
 * content checks); promote/rollback under the lock; resolve, unpack, fetch; listing, routes, check.
 *
 * Crash safety: a version appears by one rename of a complete, fsynced, verified temporary folder.
 * A channel move and its audit line are one transaction: the line (with the move's sequence number)
 * is appended first, then the pointer (carrying the same number) is replaced atomically. The next
 * change of that channel, under the lock, finds a line whose pointer did not move and cancels it
 * with an "abort" line, so a command that failed never moved the channel, and `check` proves that
 * replaying the log gives every pointer exactly.
 *
 * Everything read from the registry is opened O_NOFOLLOW|O_NONBLOCK and checked to be a regular
 * file of bounded size (pl_read_regular): a FIFO or device planted in it is refused, never waited
 * on while the lock is held. */
#include "pipeline/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/jsonl.h"
#include "ftl/core.h"
#include "pipeline/package.h"
#include "pipeline/pl_util.h"
#include "pipeline/safetensors.h"
#include "pipeline/verdict_sign.h"

#define HISTORY_MAX 100
#define POINTER_MAX_BYTES (1u << 20)
#define MANIFEST_MAX_BYTES (1u << 20)
#define AUDIT_MAX_BYTES ((size_t)1 << 30)
#define PACKAGE_MAX_BYTES ((uint64_t)16 << 30)
#define ADAPTER_FILE_MAX_BYTES ((uint64_t)8 << 30)
#define PUBLICATION_FILE "PUBLISHED.json"
#define PUBLICATION_FORMAT "ftl-registry-publication"
#define ID_LEN FTL_SHA256_HEX_LEN

typedef char id_t_[ID_LEN + 1];

/* ---- names and paths ----------------------------------------------------------------------- */

const char *pl_registry_root_from_env(void) {
  const char *s = getenv("FTL_REGISTRY");
  return s && s[0] ? s : NULL;
}

int pl_registry_name_ok(const char *s) {
  return s && pl_safe_name(s, 0) && s[0] != '-' && strlen(s) <= FTL_REGISTRY_NAME_MAX;
}

int pl_registry_channel_ok(const char *s) { return pl_registry_name_ok(s) && !pl_sha256_is_hex(s); }

static int64_t lock_ms(const ftl_registry_ref *reg) { return reg->lock_timeout_ms > 0 ? reg->lock_timeout_ms : 30000; }

/* Who makes a change: --who, else the effective user (pl_effective_user). */
static const char *who_of(const ftl_registry_ref *reg, char *buf, size_t size) {
  if (reg->who && reg->who[0]) return reg->who;
  pl_effective_user(buf, size);
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
  int64_t seq;             /* moves of this channel so far; -1: written before pointers carried it */
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
  if (!pl_sha256_is_hex(json_string_value(cur)) ||
      !(json_is_null(prev) || pl_sha256_is_hex(json_string_value(prev))) || !json_is_array(hist) ||
      json_array_size(hist) > HISTORY_MAX || (seq && (!json_is_integer(seq) || json_integer_value(seq) < 1))) {
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
    memcpy(p->history[i], h, ID_LEN + 1);
  }
  p->n_history = n;
  p->seq = seq ? (int64_t)json_integer_value(seq) : -1;
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

ftl_err pl_registry_channel_parse(const char *bytes, size_t size, char current[FTL_SHA256_HEX_LEN + 1],
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
  rc = pl_read_regular(path, POINTER_MAX_BYTES, &text, &size, &rd);
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
  json_object_set_new(j, "seq", json_integer((json_int_t)p->seq));
  json_object_set_new(j, "time", json_string(when));
  json_object_set_new(j, "who", json_string(who));
  json_object_set_new(j, "why", json_string(why ? why : ""));
  size_t len = 0;
  char *text = pl_json_text(j, 1, &len);
  json_decref(j);
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  rc = core_fs_replace(path, text, len, CORE_TMP_UNPREDICTABLE, "promote.channel_write", -1, -1, d);
  ftl_free(text);
  return rc;
}

/* ---- the audit log ------------------------------------------------------------------------- */

/* One line; seq >= 1 for channel moves and aborts (-1: none); extra (may be NULL, borrowed) adds
 * its keys at the end, in its order. */
static ftl_err audit(const ftl_registry_ref *reg, const char *name, const char *action, const char *channel,
                     const char *from, const char *to, const char *who, const char *why, int64_t seq,
                     json_t *extra, ftl_diag *d) {
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
  if (seq > 0) json_object_set_new(j, "seq", json_integer((json_int_t)seq));
  const char *k;
  json_t *v;
  json_object_foreach(extra, k, v) json_object_set(j, k, v);
  rc = pl_jsonl_append(path, j, lock_ms(reg), d);
  json_decref(j);
  return rc;
}

/* The whole log (empty when there is none yet): a regular file, bounded. */
static ftl_err audit_read(const ftl_registry_ref *reg, const char *name, char *path, size_t path_size, char **text,
                          size_t *size, ftl_diag *d) {
  *text = NULL;
  *size = 0;
  ftl_err rc = path_of(path, path_size, reg, name, "audit.jsonl", d);
  if (rc) return rc;
  rc = pl_read_regular(path, AUDIT_MAX_BYTES, text, size, d);
  return rc == FTL_ERR_NOTFOUND ? FTL_OK : rc;
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

typedef struct audit_find {
  const char *to;
  int found; /* a publish line with that "to" */
} audit_find;

static ftl_err find_line(const char *line, size_t len, size_t line_no, void *ctx) {
  (void)line_no;
  audit_find *f = ctx;
  json_error_t jerr;
  json_t *j = json_loadb(line, len, 0, &jerr);
  const char *action = json_string_value(json_object_get(j, "action"));
  const char *to = json_string_value(json_object_get(j, "to"));
  if (action && to && !strcmp(action, "publish") && !strcmp(to, f->to)) f->found = 1;
  json_decref(j);
  return FTL_OK;
}

/* After a crash between a version's rename and its publish line, the retry finds the version
 * already stored: it appends the missing line then (marked "recovered"), so the log stays complete. */
static ftl_err audit_repair_publish(const ftl_registry_ref *reg, const char *name, const char *to, const char *who,
                                   const char *why, json_t *extra, ftl_diag *d) {
  char path[4096];
  char *text = NULL;
  size_t size = 0;
  audit_find f = {.to = to};
  ftl_err rc = audit_read(reg, name, path, sizeof path, &text, &size, d);
  if (rc) return rc;
  if (text) each_line(text, size, find_line, &f);
  ftl_free(text);
  if (f.found) return FTL_OK;
  char why2[512];
  snprintf(why2, sizeof why2,
           "%s%s(recovered: the publish was made by an earlier attempt that stopped before recording it)",
           why ? why : "", why && why[0] ? " " : "");
  return audit(reg, name, "publish", NULL, NULL, to, who, why2, -1, extra, d);
}

/* A channel's history as its audit lines tell it. Lines with a seq are moves recorded before the
 * pointer was written (pending until a later line or the pointer shows them applied; an "abort"
 * with the same seq cancels one); lines without one come from registries written before seq
 * existed, when the line followed the move (so they were applied). */
typedef struct replay {
  const char *channel, *path;
  id_t_ current;
  id_t_ history[HISTORY_MAX];
  size_t n_history;
  int64_t seq; /* applied moves */
  int pending;
  char pend_action[16];
  id_t_ pend_from, pend_to;
  int64_t pend_seq;
  size_t pend_line;
  int any; /* the channel has lines */
  ftl_diag *d;
} replay;

static ftl_err replay_apply(replay *r, const char *action, const char *from, const char *to, size_t line_no) {
  if (strcmp(from, r->current))
    return ftl_diag_fail(r->d, FTL_ERR_CORRUPT, "%s: line %zu moves %s from %.12s, but the log had it at %.12s", r->path,
                         line_no, r->channel, from[0] ? from : "(nothing)", r->current[0] ? r->current : "(nothing)");
  if (!strcmp(action, "promote")) {
    if (r->current[0]) {
      if (r->n_history == HISTORY_MAX) {
        memmove(r->history, r->history + 1, (HISTORY_MAX - 1) * sizeof r->history[0]);
        r->n_history--;
      }
      memcpy(r->history[r->n_history++], r->current, ID_LEN + 1);
    }
  } else {
    if (!r->n_history || strcmp(r->history[r->n_history - 1], to))
      return ftl_diag_fail(r->d, FTL_ERR_CORRUPT, "%s: line %zu rolls %s back to %.12s, which was not its previous version",
                           r->path, line_no, r->channel, to);
    r->n_history--;
  }
  memcpy(r->current, to, ID_LEN + 1);
  r->seq++;
  return FTL_OK;
}

static ftl_err replay_commit(replay *r) {
  if (!r->pending) return FTL_OK;
  r->pending = 0;
  return replay_apply(r, r->pend_action, r->pend_from, r->pend_to, r->pend_line);
}

static ftl_err replay_line(const char *line, size_t len, size_t line_no, void *ctx) {
  replay *r = ctx;
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
static ftl_err replay_channel(const char *text, size_t size, const char *audit_path, const char *ptr_path,
                              const char *channel, const pointer *p, replay *r, int *unapplied, ftl_diag *d) {
  memset(r, 0, sizeof *r);
  r->channel = channel;
  r->path = audit_path;
  r->d = d;
  *unapplied = 0;
  ftl_err rc = text ? each_line(text, size, replay_line, r) : FTL_OK;
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
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s records moves of channel %s, but %s does not exist", audit_path, channel,
                           ptr_path);
    return FTL_OK;
  }
  int same = !strcmp(p->current, r->current) && p->n_history == r->n_history && (p->seq < 0 || p->seq == r->seq);
  for (size_t i = 0; same && i < p->n_history; i++)
    same = !strcmp(p->history[i], r->history[i]);
  if (!same)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                         "%s (at %.12s, move %lld, %zu earlier) is not what %s records for %s (at %.12s, move %lld, %zu "
                         "earlier)",
                         ptr_path, p->current, (long long)p->seq, p->n_history, audit_path, channel,
                         r->current[0] ? r->current : "(nothing)", (long long)r->seq, r->n_history);
  return FTL_OK;
}

/* ---- versions ------------------------------------------------------------------------------ */

/* FTL_OK when versions/<id>/ holds a package (a regular file) and a MANIFEST.json whose SHA-256
 * is id. The manifest bytes into *man (may be NULL; freed with ftl_free). */
static ftl_err version_complete(const ftl_registry_ref *reg, const char *name, const char *id, char **man,
                                size_t *man_size, ftl_diag *d) {
  char path[4096], rel[160], hex[ID_LEN + 1];
  char *text = NULL;
  size_t size = 0;
  struct stat st;
  ftl_diag rd;
  if (man) *man = NULL;
  if (!pl_sha256_is_hex(id)) return ftl_diag_fail(d, FTL_ERR_INVAL, "%s is not a version id", id);
  snprintf(rel, sizeof rel, "versions/%s/%s", id, FTL_PACKAGE_MANIFEST);
  ftl_err rc = path_of(path, sizeof path, reg, name, rel, d);
  if (rc) return rc;
  rc = pl_read_regular(path, MANIFEST_MAX_BYTES, &text, &size, &rd);
  if (rc == FTL_ERR_NOTFOUND) return ftl_diag_fail(d, rc, "%s has no version %s", name, id);
  if (rc) return ftl_diag_fail(d, rc, "%s", rd.msg);
  pl_sha256_hex(text, size, hex);
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
static void clean_stale(const ftl_registry_ref *reg, const char *name) {
  char dir[4096];
  DIR *dp;
  if (path_of(dir, sizeof dir, reg, name, "versions", NULL)) return;
  each_prefixed(dir, ".tmp-", pl_rm_tree);
  if ((dp = opendir(dir))) {
    struct dirent *e;
    while ((e = readdir(dp))) {
      char v[4096];
      if (!pl_sha256_is_hex(e->d_name) || ftl_fmt(v, sizeof v, "%s/%s", dir, e->d_name)) continue;
      each_prefixed(v, "adapter.tmp-", pl_rm_tree);
    }
    closedir(dp);
  }
  if (path_of(dir, sizeof dir, reg, name, "channels", NULL)) return;
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
static ftl_err lock_adapter(const ftl_registry_ref *reg, const char *name, int create, int *fd, ftl_diag *d) {
  char path[4096];
  struct stat st;
  ftl_err rc = path_of(path, sizeof path, reg, name, NULL, d);
  if (rc) return rc;
  if (!create) {
    if (lstat(path, &st) || !S_ISDIR(st.st_mode))
      return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "no adapter %s in %s", name, reg->root);
  } else {
    if ((rc = ftl_mkdir_p(path, d))) return rc;
    if ((rc = path_of(path, sizeof path, reg, name, "versions", d)) || (rc = ftl_mkdir_p(path, d))) return rc;
    if ((rc = path_of(path, sizeof path, reg, name, "channels", d)) || (rc = ftl_mkdir_p(path, d))) return rc;
  }
  if ((rc = path_of(path, sizeof path, reg, name, ".lock", d))) return rc;
  return pl_lock(path, lock_ms(reg), fd, d);
}

/* What the files of an unpacked package must be besides their digests: the verdict a verdict that
 * passed, the config a JSON object with peft_type (PEFT's one required key), the weights a
 * safetensors file our strict reader accepts. */
static ftl_err check_content(const char *dir, const char *what, ftl_diag *d) {
  char path[4096];
  char *text = NULL;
  size_t size = 0;
  json_error_t jerr;
  json_t *j = NULL;
  ftl_st_file *st = NULL;
  ftl_diag rd;
  ftl_err rc;
  if (ftl_fmt(path, sizeof path, "%s/%s", dir, FTL_PACKAGE_VERDICT))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
  if ((rc = pl_read_regular(path, 1u << 20, &text, &size, d))) goto out;
  j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
  json_t *ver = json_object_get(j, "version"), *passed = json_object_get(j, "passed");
  if (!json_is_object(j) || !json_is_integer(ver) || json_integer_value(ver) != 1 || !json_is_boolean(passed)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT,
                       "%s: verdict.json is not a verdict (a JSON object with \"version\": 1 and a boolean \"passed\"); "
                       "refused",
                       what);
    goto out;
  }
  if (!json_is_true(passed)) {
    rc = ftl_diag_fail(d, FTL_ERR_STATE, "%s: verdict.json says \"passed\": false; a failed gate is never published",
                       what);
    goto out;
  }
  json_decref(j);
  ftl_free(text);
  text = NULL;
  if (ftl_fmt(path, sizeof path, "%s/adapter_config.json", dir)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
    goto out;
  }
  if ((rc = pl_read_regular(path, 16u << 20, &text, &size, d))) goto out;
  j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
  if (!json_is_object(j) || !json_is_string(json_object_get(j, "peft_type"))) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: adapter_config.json is not a PEFT config (a JSON object with peft_type)%s%s; refused",
                       what, j ? "" : ": ", j ? "" : jerr.text);
    goto out;
  }
  ftl_free(text);
  text = NULL;
  if (ftl_fmt(path, sizeof path, "%s/adapter_model.safetensors", dir)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
    goto out;
  }
  if ((rc = pl_read_regular(path, ADAPTER_FILE_MAX_BYTES, &text, &size, d))) goto out;
  if (pl_st_parse((const uint8_t *)text, size, NULL, &st, &rd)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: adapter_model.safetensors is not a valid safetensors file: %s; refused",
                       what, rd.msg);
    goto out;
  }
out:
  pl_st_free(st);
  json_decref(j);
  ftl_free(text);
  return rc;
}

static const char *trust_name(ftl_registry_trust t) {
  return t == FTL_REGISTRY_TRUST_LOCAL_GATE ? "local-gate" : t == FTL_REGISTRY_TRUST_UNVERIFIED ? "unverified" : "signed";
}

static const char *manifest_digest(const ftl_package_manifest *m, const char *name) {
  for (size_t i = 0; i < m->n_files; i++)
    if (!strcmp(m->files[i].name, name)) return m->files[i].sha256;
  return NULL;
}

/* Points channel at id (complete, checked here) or rolls it back (id NULL) under the held lock:
 * settles the channel's last move first (see the top of the file), appends the move's line, then
 * replaces the pointer. to_out (may be NULL) gets the new current. */
static ftl_err move_locked(const ftl_registry_ref *reg, const char *name, const char *id, const char *channel,
                           const char *who, const char *why, char to_out[ID_LEN + 1], ftl_diag *d) {
  char audit_path[4096], ptr_path[4096], rel[128];
  char *text = NULL;
  size_t size = 0;
  pointer p = {0}, np = {0};
  replay *r = NULL;
  int have = 0, unapplied = 0;
  ftl_err rc;
  snprintf(rel, sizeof rel, "channels/%s.json", channel);
  if ((rc = path_of(ptr_path, sizeof ptr_path, reg, name, rel, d))) return rc;
  if (id && (rc = version_complete(reg, name, id, NULL, NULL, d))) return rc;
  if ((rc = audit_read(reg, name, audit_path, sizeof audit_path, &text, &size, d))) goto out;
  rc = pointer_read(reg, name, channel, &p, d);
  if (rc == FTL_OK) {
    have = 1;
  } else if (rc == FTL_ERR_NOTFOUND && id) {
    rc = FTL_OK;
  } else {
    goto out;
  }
  if (!(r = ftl_calloc(1, sizeof *r))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  rc = replay_channel(text, size, audit_path, ptr_path, channel, have ? &p : NULL, r, &unapplied, d);
  /* A pointer written before pointers carried seq may disagree with a log that lost lines (the
   * old order appended the line after the move): it is taken as it is, and its next move
   * continues the log's numbering. `check` still reports the disagreement. */
  if (rc && have && p.seq < 0) rc = FTL_OK;
  if (rc) {
    char why_not[1024];
    snprintf(why_not, sizeof why_not, "%s", d ? d->msg : "");
    ftl_diag_fail(d, rc, "%s; refusing to move %s@%s until this is repaired (ftl registry check %s)", why_not, name,
                  channel, name);
    goto out;
  }
  if (unapplied) {
    char why2[256];
    snprintf(why2, sizeof why2, "(recovered: the %s recorded as move %lld never reached the pointer; cancelled)",
             r->pend_action, (long long)r->pend_seq);
    if ((rc = audit(reg, name, "abort", channel, r->pend_from, r->pend_to, who, why2, r->pend_seq, NULL, d))) goto out;
  }
  if (!(np.history = ftl_calloc(HISTORY_MAX, sizeof *np.history))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  if (id) {
    if (have && !strcmp(p.current, id)) {
      if (to_out) memcpy(to_out, id, ID_LEN + 1);
      goto out; /* already there: nothing to move, nothing to record */
    }
    if (have) {
      /* Keep the newest HISTORY_MAX - 1 of the old history, then the old current. */
      size_t skip = p.n_history >= HISTORY_MAX ? p.n_history - (HISTORY_MAX - 1) : 0;
      for (size_t i = skip; i < p.n_history; i++)
        memcpy(np.history[np.n_history++], p.history[i], ID_LEN + 1);
      memcpy(np.history[np.n_history++], p.current, ID_LEN + 1);
      memcpy(np.previous, p.current, ID_LEN + 1);
    }
    memcpy(np.current, id, ID_LEN + 1);
  } else {
    if (!p.previous[0]) {
      rc = ftl_diag_fail(d, FTL_ERR_STATE, "%s@%s has no previous version to roll back to", name, channel);
      goto out;
    }
    if ((rc = version_complete(reg, name, p.previous, NULL, NULL, d))) goto out;
    np.n_history = p.n_history - 1;
    memcpy(np.history, p.history, np.n_history * sizeof *np.history);
    memcpy(np.current, p.previous, ID_LEN + 1);
    if (np.n_history) memcpy(np.previous, np.history[np.n_history - 1], ID_LEN + 1);
  }
  np.seq = r->seq + 1;
  pl_crash_point("promote.before_audit");
  if ((rc = audit(reg, name, id ? "promote" : "rollback", channel, have ? p.current : NULL, np.current, who, why, np.seq,
                  NULL, d)))
    goto out; /* nothing moved */
  pl_crash_point("promote.after_audit");
  if ((rc = pointer_write(reg, name, channel, &np, who, why, d))) {
    char why_not[1024];
    snprintf(why_not, sizeof why_not, "%s", d ? d->msg : "");
    ftl_diag_fail(d, rc,
                  "%s; %s@%s did not move: its move %lld is recorded as pending and the next change of the channel "
                  "settles it (cancels it, or keeps it if the pointer did reach the disk)",
                  why_not, name, channel, (long long)np.seq);
    goto out;
  }
  if (to_out) memcpy(to_out, np.current, ID_LEN + 1);
out:
  ftl_free(r);
  pointer_free(&np);
  pointer_free(&p);
  ftl_free(text);
  return rc;
}

static ftl_err verify_unpacked(const char *dir, const char *id, ftl_diag *d);

/* Into the temporary version folder dirfd (tmp): package.tar.zst, ftl's own writer's bytes of the
 * verified entries, never the bytes offered (pipeline/package.h): packaging noise a manifest does
 * not declare stays out; then MANIFEST.json. Every write through the file seam, read back. */
static ftl_err store_package(int dirfd, const char *tmp, const char *package_path, const char *id, const char *man,
                             size_t man_size, ftl_diag *d) {
  int pfd = core_fs_table.openat(dirfd, FTL_PACKAGE_FILE, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
  if (pfd < 0)
    return ftl_diag_fail(d, core_errno_to_err(errno), "cannot create %s/%s: %s", tmp, FTL_PACKAGE_FILE, strerror(errno));
  ftl_package_info info;
  ftl_diag cd;
  ftl_err rc = pl_package_canonicalize(package_path, pfd, id, NULL, "publish.version_write", &info, &cd);
  core_fs_table.close(pfd);
  if (rc) {
    /* A failure of the offered package names its path; one of the copy being written (a write,
     * its fsync) is named here. */
    if (strstr(cd.msg, package_path)) return ftl_diag_fail(d, rc, "%s", cd.msg);
    return ftl_diag_fail(d, rc, "%s/%s: %s", tmp, FTL_PACKAGE_FILE, cd.msg);
  }
  int same_manifest = info.manifest_size == man_size && !memcmp(info.manifest, man, man_size);
  pl_package_info_release(&info);
  if (!same_manifest) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s changed while it was being published", package_path);
  return core_fs_write_new_at(dirfd, tmp, FTL_PACKAGE_MANIFEST, man, man_size, 0644, d);
}

/* Publish's own check: the stored copy (tmp/package.tar.zst) unpacks whole, under the same id, into
 * the folder that will be served (tmp/adapter); that folder reads back from the disk as the
 * manifest says; then what the files say is checked there. */
static ftl_err unpack_and_check(const char *tmp, const char *package_path, const char *id, ftl_diag *d) {
  char pkg[4096], adir[4096];
  ftl_diag ud;
  ftl_err rc;
  if (ftl_fmt(pkg, sizeof pkg, "%s/%s", tmp, FTL_PACKAGE_FILE) || ftl_fmt(adir, sizeof adir, "%s/adapter", tmp))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", tmp);
  if ((rc = pl_package_unpack(pkg, adir, id, NULL, NULL, NULL, NULL, &ud))) {
    /* The copy was verified as it was written: one that does not read back was damaged on its way
     * to the disk. */
    if (rc == FTL_ERR_CORRUPT)
      return ftl_diag_fail(d, rc, "the stored copy does not read back as written (a torn write?): %s", ud.msg);
    return ftl_diag_fail(d, rc, "%s", ud.msg);
  }
  /* Read back before anything judges it: a torn write there is the disk's fault, not the
   * package's. */
  if ((rc = verify_unpacked(adir, id, &ud)))
    return ftl_diag_fail(d, rc, "the unpacked copy does not read back as written (a torn write?): %s", ud.msg);
  return check_content(adir, package_path, d);
}

/* PUBLISHED.json into the temporary version folder dirfd (tmp). */
static ftl_err write_publication(int dirfd, const char *tmp, const char *id, ftl_registry_trust trust,
                                 const char *key_id, json_t *sig_json, const char *who, ftl_diag *d) {
  char when[32];
  size_t len = 0;
  char *text = NULL;
  now_iso(when, sizeof when);
  json_t *rec = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s}", "format", PUBLICATION_FORMAT, "version", 1, "id", id,
                          "trust", trust_name(trust), "time", when, "who", who);
  if (rec) {
    json_object_set_new(rec, "key_id", key_id[0] ? json_string(key_id) : json_null());
    json_object_set(rec, "signature", sig_json ? sig_json : json_null());
    text = pl_json_text(rec, 1, &len);
  }
  json_decref(rec);
  ftl_err rc = text ? core_fs_write_new_at(dirfd, tmp, PUBLICATION_FILE, text, len, 0644, d)
                    : ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  ftl_free(text);
  return rc;
}

ftl_err pl_registry_publish_ex(const ftl_registry_ref *reg, const char *name, const char *package_path,
                                const ftl_registry_publish_opts *opts, char id_out[FTL_SHA256_HEX_LEN + 1],
                                ftl_diag *d) {
  char id[ID_LEN + 1], versions[4096], vdir[4096], tmp[4096] = "", who_buf[256], sig_path[4096];
  char trusted[4096], key_id[ID_LEN + 1] = "";
  char *man = NULL, *have = NULL, *sig = NULL;
  size_t man_size = 0, have_size = 0, sig_size = 0;
  uint64_t in_size = 0;
  int lock = -1, dirfd = -1, in = -1;
  ftl_package_manifest *m = NULL;
  json_t *extra = NULL, *sig_json = NULL;
  ftl_err rc;
  ftl_registry_publish_opts o = opts ? *opts : (ftl_registry_publish_opts){0};
  const char *who = who_of(reg, who_buf, sizeof who_buf);
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if (!pl_registry_name_ok(name)) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid adapter name", name);
  if (o.channel && !pl_registry_channel_ok(o.channel))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid channel name", o.channel);
  if (o.trust != FTL_REGISTRY_TRUST_SIGNED && o.trust != FTL_REGISTRY_TRUST_LOCAL_GATE &&
      o.trust != FTL_REGISTRY_TRUST_UNVERIFIED)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "unknown publication trust %d", (int)o.trust);
  /* The package must be a bounded regular file (checked without blocking: a FIFO is refused, not
   * waited on) before anything reads it; what is stored is re-made from its verified entries and
   * checked again below, so what is stored is what was checked. */
  if ((rc = pl_open_regular(package_path, PACKAGE_MAX_BYTES, &in, &in_size, d))) return rc;
  if ((rc = pl_package_unpack(package_path, NULL, NULL, NULL, id, &man, &man_size, d))) goto out;
  if ((rc = pl_package_manifest_parse(man, man_size, NULL, &m, d))) goto out;
  if (o.trust == FTL_REGISTRY_TRUST_SIGNED) {
    ftl_verdict_digests dg;
    const char *v = manifest_digest(m, FTL_PACKAGE_VERDICT), *c = manifest_digest(m, "adapter_config.json"),
               *w = manifest_digest(m, "adapter_model.safetensors");
    if (!v || !c || !w) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s lacks verdict.json or the adapter's files", package_path);
      goto out;
    }
    memcpy(dg.verdict, v, sizeof dg.verdict);
    memcpy(dg.config, c, sizeof dg.config);
    memcpy(dg.model, w, sizeof dg.model);
    if (o.signature_path ? ftl_fmt(sig_path, sizeof sig_path, "%s", o.signature_path)
                         : ftl_fmt(sig_path, sizeof sig_path, "%s.sig", package_path)) {
      rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", package_path);
      goto out;
    }
    rc = pl_read_regular(sig_path, FTL_VERDICT_SIG_MAX_BYTES, &sig, &sig_size, d);
    if (rc == FTL_ERR_NOTFOUND) {
      rc = ftl_diag_fail(d, FTL_ERR_STATE,
                         "%s has no verdict signature (%s): sign it with `ftl registry sign-verdict`, or publish with "
                         "--unverified (recorded forever)",
                         package_path, sig_path);
      goto out;
    }
    if (rc) goto out;
    if (ftl_fmt(trusted, sizeof trusted, "%s/%s", reg->root, FTL_REGISTRY_TRUSTED_KEYS)) {
      rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", reg->root);
      goto out;
    }
    ftl_diag vd;
    if ((rc = pl_verdict_verify(trusted, sig, sig_size, &dg, key_id, &vd))) {
      rc = ftl_diag_fail(d, rc, "%s: %s", sig_path, vd.msg);
      goto out;
    }
    json_error_t jerr;
    sig_json = json_loadb(sig, sig_size, 0, &jerr);
  }
  extra = json_pack("{s:s}", "trust", trust_name(o.trust));
  if (key_id[0]) json_object_set_new(extra, "key_id", json_string(key_id));
  if ((rc = lock_adapter(reg, name, 1, &lock, d))) goto out;
  if ((rc = path_of(versions, sizeof versions, reg, name, "versions", d))) goto out;
  clean_stale(reg, name);
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
    /* The same version again: nothing to store (its publication record stays as it was); record
     * it only if an interrupted attempt did not. */
    if ((rc = audit_repair_publish(reg, name, id, who, o.why, extra, d))) goto out;
  } else {
    if (ftl_fmt(tmp, sizeof tmp, "%s/.tmp-%.12s-XXXXXX", versions, id)) {
      rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", versions);
      tmp[0] = '\0';
      goto out;
    }
    /* mkdtemp makes it 0700; a published version is readable by the servers that load it. */
    if ((rc = core_fs_mkdtemp(tmp, 0755, &dirfd, d))) goto out;
    if ((rc = store_package(dirfd, tmp, package_path, id, man, man_size, d))) goto out;
    if ((rc = unpack_and_check(tmp, package_path, id, d))) goto out;
    if ((rc = write_publication(dirfd, tmp, id, o.trust, key_id, sig_json, who, d))) goto out;
    if (core_fs_table.fsync(dirfd)) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot fsync %s: %s", tmp, strerror(errno));
      goto out;
    }
    pl_crash_point("publish.before_rename");
    if (core_fs_table.rename(tmp, vdir)) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot rename %s to %s: %s", tmp, vdir, strerror(errno));
      goto out;
    }
    tmp[0] = '\0';
    if ((rc = core_fs_fsync_dir(versions, d))) goto out;
    pl_crash_point("publish.after_rename");
    if ((rc = audit(reg, name, "publish", NULL, NULL, id, who, o.why, -1, extra, d))) goto out;
  }
  if (o.channel) rc = move_locked(reg, name, id, o.channel, who, o.why, NULL, d);
out:
  if (dirfd >= 0) core_fs_table.close(dirfd);
  if (in >= 0) close(in);
  if (tmp[0]) pl_rm_tree(tmp);
  pl_unlock(lock);
  if (!rc && id_out) memcpy(id_out, id, ID_LEN + 1);
  json_decref(extra);
  json_decref(sig_json);
  pl_package_manifest_free(m);
  ftl_free(sig);
  ftl_free(have);
  ftl_free(man);
  return rc;
}

ftl_err pl_registry_publish(const ftl_registry_ref *reg, const char *name, const char *package_path,
                             const char *channel, const char *why, char id_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  ftl_registry_publish_opts o = {.channel = channel, .why = why, .trust = FTL_REGISTRY_TRUST_LOCAL_GATE};
  return pl_registry_publish_ex(reg, name, package_path, &o, id_out, d);
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
    if (pl_sha256_is_hex(e->d_name) && !strncmp(e->d_name, v, n)) {
      if (found++) break;
      memcpy(id, e->d_name, ID_LEN + 1);
    }
  closedir(dp);
  if (!found) return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s has no version %s", name, v);
  if (found > 1) return ftl_diag_fail(d, FTL_ERR_INVAL, "%s: version prefix %s is ambiguous", name, v);
  return FTL_OK;
}

ftl_err pl_registry_promote(const ftl_registry_ref *reg, const char *name, const char *version, const char *channel,
                             const char *why, ftl_diag *d) {
  char id[ID_LEN + 1], who_buf[256];
  int lock = -1;
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if (!pl_registry_name_ok(name)) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid adapter name", name);
  if (!pl_registry_channel_ok(channel))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid channel name", channel ? channel : "");
  ftl_err rc = version_lookup(reg, name, version, id, d);
  if (rc) return rc;
  if ((rc = lock_adapter(reg, name, 0, &lock, d))) return rc;
  clean_stale(reg, name);
  rc = move_locked(reg, name, id, channel, who_of(reg, who_buf, sizeof who_buf), why, NULL, d);
  pl_unlock(lock);
  return rc;
}

ftl_err pl_registry_rollback(const ftl_registry_ref *reg, const char *name, const char *channel, const char *why,
                              char to_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  char who_buf[256];
  int lock = -1;
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if (!pl_registry_name_ok(name)) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid adapter name", name);
  if (!pl_registry_channel_ok(channel))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid channel name", channel ? channel : "");
  /* An unknown adapter is refused before anything is created for it. */
  ftl_err rc = lock_adapter(reg, name, 0, &lock, d);
  if (rc) return rc;
  clean_stale(reg, name);
  rc = move_locked(reg, name, NULL, channel, who_of(reg, who_buf, sizeof who_buf), why, to_out, d);
  pl_unlock(lock);
  return rc;
}

/* ---- resolve, unpack, fetch ---------------------------------------------------------------- */

ftl_err pl_registry_resolve(const ftl_registry_ref *reg, const char *spec, char *name_out,
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
  if (rc == FTL_ERR_INVAL && pl_registry_channel_ok(rest))
    return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s has no channel or version %s", name, rest);
  if (rc) return rc;
  snprintf(name_out, FTL_REGISTRY_NAME_MAX + 1, "%s", name);
  return version_complete(reg, name, id_out, NULL, NULL, d);
}

/* Checks an unpacked folder against the manifest it holds (and that against id): it must hold
 * exactly MANIFEST.json and the declared files, each a regular file of its declared size and
 * SHA-256. Servers read more than the weights (a pickle adapter_model.bin, a tokenizer config with
 * a chat template), so an undeclared file is refused as firmly as a changed one. */
static ftl_err verify_unpacked(const char *dir, const char *id, ftl_diag *d) {
  char path[4096], hex[ID_LEN + 1];
  char *text = NULL;
  size_t size = 0;
  ftl_package_manifest *m = NULL;
  DIR *dp = NULL;
  ftl_diag rd;
  ftl_err rc;
  if (ftl_fmt(path, sizeof path, "%s/%s", dir, FTL_PACKAGE_MANIFEST))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
  if ((rc = pl_read_regular(path, MANIFEST_MAX_BYTES, &text, &size, d))) return rc;
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
    rc = pl_sha256_regular(path, m->files[i].size, hex, &fsize, &rd);
    if (rc || fsize != m->files[i].size || strcmp(hex, m->files[i].sha256)) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is missing or was changed after unpacking%s%s (remove %s to unpack again)",
                         path, rc ? ": " : "", rc ? rd.msg : "", dir);
      goto out;
    }
  }
out:
  if (dp) closedir(dp);
  pl_package_manifest_free(m);
  ftl_free(text);
  return rc;
}

ftl_err pl_registry_adapter_dir(const ftl_registry_ref *reg, const char *name, const char *id, char *out, size_t size,
                                 ftl_diag *d) {
  char rel[160], pkg[4096];
  int lock = -1;
  ftl_err rc = version_complete(reg, name, id, NULL, NULL, d);
  if (rc) return rc;
  snprintf(rel, sizeof rel, "versions/%s/adapter", id);
  if ((rc = path_of(out, size, reg, name, rel, d))) return rc;
  snprintf(rel, sizeof rel, "versions/%s/%s", id, FTL_PACKAGE_FILE);
  if ((rc = path_of(pkg, sizeof pkg, reg, name, rel, d))) return rc;
  struct stat st;
  if (lstat(out, &st) != 0) {
    /* Versions published before publish unpacked them: unpacked here, under the lock, so that the
     * stale adapter.tmp-* a crashed unpacker leaves can be removed safely by whoever holds it. */
    if ((rc = lock_adapter(reg, name, 0, &lock, d))) return rc;
    clean_stale(reg, name);
    if (lstat(out, &st) != 0) rc = pl_package_unpack(pkg, out, id, NULL, NULL, NULL, NULL, d);
    pl_unlock(lock);
    if (rc) return rc;
  } else if (!S_ISDIR(st.st_mode)) {
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a folder", out);
  }
  return verify_unpacked(out, id, d);
}

ftl_err pl_registry_fetch(const ftl_registry_ref *reg, const char *spec, const char *dir, ftl_diag *d) {
  char name[FTL_REGISTRY_NAME_MAX + 1], id[ID_LEN + 1], rel[160], pkg[4096];
  ftl_err rc = pl_registry_resolve(reg, spec, name, id, d);
  if (rc) return rc;
  snprintf(rel, sizeof rel, "versions/%s/%s", id, FTL_PACKAGE_FILE);
  if ((rc = path_of(pkg, sizeof pkg, reg, name, rel, d))) return rc;
  if ((rc = pl_package_unpack(pkg, dir, id, NULL, NULL, NULL, NULL, d))) return rc;
  return verify_unpacked(dir, id, d);
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
static json_t *publication_read(const ftl_registry_ref *reg, const char *name, const char *id, ftl_diag *d) {
  char path[4096], rel[160];
  char *text = NULL;
  size_t size = 0;
  json_error_t jerr;
  snprintf(rel, sizeof rel, "versions/%s/%s", id, PUBLICATION_FILE);
  if (path_of(path, sizeof path, reg, name, rel, d) || pl_read_regular(path, 1u << 16, &text, &size, d)) return NULL;
  json_t *j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
  ftl_free(text);
  const char *fmt = json_string_value(json_object_get(j, "format"));
  if (!fmt || strcmp(fmt, PUBLICATION_FORMAT) || !json_is_string(json_object_get(j, "trust"))) {
    json_decref(j);
    ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a publication record", path);
    return NULL;
  }
  return j;
}

ftl_err pl_registry_list(const ftl_registry_ref *reg, const char *name, FILE *out, ftl_diag *d) {
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
    if ((rc = path_of(path, sizeof path, reg, nm, "versions", d)) || (rc = list_dir(path, NULL, is_version, &vers, d)))
      goto out;
    if ((rc = path_of(path, sizeof path, reg, nm, "channels", d)) ||
        (rc = list_dir(path, ".json", pl_registry_channel_ok, &chans, d)))
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

ftl_err pl_registry_routes(const ftl_registry_ref *reg, const char *channel, FILE *out, FILE *err, ftl_diag *d) {
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
    if ((rc = path_of(path, sizeof path, reg, nm, "channels", &cd)) ||
        (rc = list_dir(path, ".json", pl_registry_channel_ok, &chans, &cd))) {
      if (err) fprintf(err, "ftl registry routes: %s: %s\n", nm, cd.msg);
      if (!bad++) first = ftl_diag_fail(d, rc, "%s: %s", nm, cd.msg);
      continue;
    }
    for (size_t c = 0; c < chans.n; c++) {
      if (channel && strcmp(channel, chans.v[c])) continue;
      pointer p;
      rc = pointer_read(reg, nm, chans.v[c], &p, &cd);
      if (!rc) {
        rc = pl_registry_adapter_dir(reg, nm, p.current, dir, sizeof dir, &cd);
        pointer_free(&p);
      }
      if (!rc && !realpath(dir, abs_dir)) rc = ftl_diag_fail(&cd, FTL_ERR_IO, "cannot resolve %s: %s", dir, strerror(errno));
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

ftl_err pl_registry_check(const ftl_registry_ref *reg, const char *name, size_t *audit_lines, ftl_diag *d) {
  names vers = {0}, chans = {0};
  char path[4096], audit_path[4096], ptr_path[4096], rel[160];
  char *text = NULL;
  size_t size = 0;
  replay *r = NULL;
  pointer *ptrs = NULL;
  size_t n_ptrs = 0;
  audit_scan as = {0};
  struct stat st;
  ftl_err rc;
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if (!pl_registry_name_ok(name)) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid adapter name", name);
  if ((rc = path_of(path, sizeof path, reg, name, NULL, d))) return rc;
  if (lstat(path, &st) || !S_ISDIR(st.st_mode)) return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "no adapter %s in %s", name, reg->root);
  /* Every stored version, byte for byte: its manifest is its id, its package reads back whole
   * under that id (every entry's digest), its unpacked folder holds exactly the declared files. */
  if ((rc = path_of(path, sizeof path, reg, name, "versions", d)) || (rc = list_dir(path, NULL, is_version, &vers, d)))
    goto out;
  for (size_t v = 0; v < vers.n; v++) {
    char pkg[4096], adir[4096];
    ftl_diag vd;
    int fd = -1;
    uint64_t psize = 0;
    if ((rc = version_complete(reg, name, vers.v[v], NULL, NULL, d))) goto out;
    snprintf(rel, sizeof rel, "versions/%s/%s", vers.v[v], FTL_PACKAGE_FILE);
    if ((rc = path_of(pkg, sizeof pkg, reg, name, rel, d))) goto out;
    if ((rc = pl_open_regular(pkg, PACKAGE_MAX_BYTES, &fd, &psize, d))) goto out;
    close(fd);
    if ((rc = pl_package_unpack(pkg, NULL, vers.v[v], NULL, NULL, NULL, NULL, &vd))) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not the package of version %.12s: %s", pkg, vers.v[v], vd.msg);
      goto out;
    }
    snprintf(rel, sizeof rel, "versions/%s/adapter", vers.v[v]);
    if ((rc = path_of(adir, sizeof adir, reg, name, rel, d))) goto out;
    if (lstat(adir, &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a folder", adir);
        goto out;
      }
      if ((rc = verify_unpacked(adir, vers.v[v], d))) goto out;
    }
    snprintf(rel, sizeof rel, "versions/%s/%s", vers.v[v], PUBLICATION_FILE);
    if ((rc = path_of(path, sizeof path, reg, name, rel, d))) goto out;
    if (lstat(path, &st) == 0) {
      ftl_diag pd = {{0}};
      json_t *pub = publication_read(reg, name, vers.v[v], &pd);
      const char *pid = json_string_value(json_object_get(pub, "id"));
      int ok = pub && pid && !strcmp(pid, vers.v[v]);
      json_decref(pub);
      if (!ok) {
        rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: %s", path, pd.msg[0] ? pd.msg : "not this version's publication record");
        goto out;
      }
    }
  }
  /* Every pointer names complete versions and is exactly what the log's moves give. The pointers
   * are read before the log: a move appends its line before it writes its pointer, so a writer
   * running meanwhile can only leave a line whose pointer is not there yet (pending, accepted),
   * never a pointer without its line. */
  if ((rc = path_of(path, sizeof path, reg, name, "channels", d)) ||
      (rc = list_dir(path, ".json", pl_registry_channel_ok, &chans, d)))
    goto out;
  if (!(r = ftl_calloc(1, sizeof *r)) || !(ptrs = ftl_calloc(chans.n ? chans.n : 1, sizeof *ptrs))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (size_t c = 0; c < chans.n; c++) {
    if ((rc = pointer_read(reg, name, chans.v[c], &ptrs[c], d))) goto out;
    n_ptrs = c + 1;
    rc = version_complete(reg, name, ptrs[c].current, NULL, NULL, d);
    for (size_t i = 0; !rc && i < ptrs[c].n_history; i++)
      rc = version_complete(reg, name, ptrs[c].history[i], NULL, NULL, d);
    if (rc) goto out;
  }
  if ((rc = audit_read(reg, name, audit_path, sizeof audit_path, &text, &size, d))) goto out;
  as.path = audit_path;
  as.d = d;
  if (text && (rc = each_line(text, size, scan_line, &as))) goto out;
  for (size_t c = 0; c < chans.n; c++) {
    int unapplied = 0;
    snprintf(rel, sizeof rel, "channels/%s.json", chans.v[c]);
    if ((rc = path_of(ptr_path, sizeof ptr_path, reg, name, rel, d)) ||
        (rc = replay_channel(text, size, audit_path, ptr_path, chans.v[c], &ptrs[c], r, &unapplied, d)))
      goto out;
  }
  for (size_t c = 0; c < as.channels.n; c++) {
    int has_pointer = 0, unapplied = 0;
    for (size_t k = 0; !has_pointer && k < chans.n; k++)
      has_pointer = !strcmp(chans.v[k], as.channels.v[c]);
    if (has_pointer) continue;
    if (!pl_registry_channel_ok(as.channels.v[c])) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s names a channel \"%s\" that is not a valid name", audit_path,
                         as.channels.v[c]);
      goto out;
    }
    snprintf(rel, sizeof rel, "channels/%s.json", as.channels.v[c]);
    if ((rc = path_of(ptr_path, sizeof ptr_path, reg, name, rel, d)) ||
        (rc = replay_channel(text, size, audit_path, ptr_path, as.channels.v[c], NULL, r, &unapplied, d)))
      goto out;
  }
  if (audit_lines) *audit_lines = as.lines;
out:
  for (size_t c = 0; c < n_ptrs; c++)
    pointer_free(&ptrs[c]);
  ftl_free(ptrs);
  ftl_free(r);
  ftl_free(text);
  names_free(&as.channels);
  names_free(&vers);
  names_free(&chans);
  return rc;
}
