/* pipeline/registry_txn.c: the registry's transactions, everything that changes it under the
 * adapter's lock (registry.h, docs/formats/registry.md): publish (trust, storing, content
 * checks), channel moves (promote, rollback) and the audit lines that record them. Reads are in
 * registry_query.c; what both need is registry_store.c.
 *
 * Crash safety: a version appears by one rename of a complete, fsynced, verified temporary folder.
 * A channel move and its audit line are one transaction: the line (with the move's sequence number)
 * is appended first, then the pointer (carrying the same number) is replaced atomically. The next
 * change of that channel, under the lock, finds a line whose pointer did not move and cancels it
 * with an "abort" line, so a command that failed never moved the channel, and `check` proves that
 * replaying the log gives every pointer exactly.
 *
 * Map: who and when, a pointer's write; the audit log (a line, finding one, repairing a publish);
 * publish's content checks; channel moves (move_locked); storing a version (the package, the
 * unpack check, PUBLISHED.json, the signature, the rename) and publish itself; promote and
 * rollback. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "ftl/core.h"
#include "pipeline/package.h"
#include "pipeline/pl_util.h"
#include "pipeline/registry.h"
#include "pipeline/registry_store.h"
#include "pipeline/safetensors.h"
#include "pipeline/verdict_sign.h"

/* ---- who, when, a pointer's write ---------------------------------------------------------- */

/* Who makes a change: --who, else the effective user (pl_effective_user). */
static const char *who_of(const pl_registry_ref *reg, char *buf, size_t size) {
  if (reg->who && reg->who[0]) return reg->who;
  pl_effective_user(buf, size);
  return buf;
}

static void now_iso(char *out, size_t size) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static ftl_err pointer_write(const pl_registry_ref *reg, const char *name, const char *channel,
                             const pl_reg_pointer *p, const char *who, const char *why, ftl_diag *d) {
  char path[4096], rel[128], when[32];
  snprintf(rel, sizeof rel, "channels/%s.json", channel);
  ftl_err rc = pl_reg_path(path, sizeof path, reg, name, rel, d);
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
static ftl_err audit(const pl_registry_ref *reg, const char *name, const char *action, const char *channel,
                     const char *from, const char *to, const char *who, const char *why, int64_t seq, json_t *extra,
                     ftl_diag *d) {
  char path[4096], when[32];
  ftl_err rc = pl_reg_path(path, sizeof path, reg, name, "audit.jsonl", d);
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
  rc = pl_jsonl_append(path, j, pl_reg_lock_ms(reg), d);
  json_decref(j);
  return rc;
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
static ftl_err audit_repair_publish(const pl_registry_ref *reg, const char *name, const char *to, const char *who,
                                    const char *why, json_t *extra, ftl_diag *d) {
  char path[4096];
  char *text = NULL;
  size_t size = 0;
  audit_find f = {.to = to};
  ftl_err rc = pl_reg_audit_read(reg, name, path, sizeof path, &text, &size, d);
  if (rc) return rc;
  if (text) pl_reg_each_line(text, size, find_line, &f);
  ftl_free(text);
  if (f.found) return FTL_OK;
  char why2[512];
  snprintf(why2, sizeof why2,
           "%s%s(recovered: the publish was made by an earlier attempt that stopped before recording it)",
           why ? why : "", why && why[0] ? " " : "");
  return audit(reg, name, "publish", NULL, NULL, to, who, why2, -1, extra, d);
}

/* ---- publish ------------------------------------------------------------------------------- */

/* What the files of an unpacked package must be besides their digests: the verdict a verdict that
 * passed, the config a JSON object with peft_type (PEFT's one required key), the weights a
 * safetensors file our strict reader accepts. */
static ftl_err check_content(const char *dir, const char *what, ftl_diag *d) {
  char path[4096];
  char *text = NULL;
  size_t size = 0;
  json_error_t jerr;
  json_t *j = NULL;
  pl_st_file *st = NULL;
  ftl_diag rd;
  ftl_err rc;
  if (ftl_fmt(path, sizeof path, "%s/%s", dir, FTL_PACKAGE_VERDICT))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
  if ((rc = core_fs_read_regular(path, 1u << 20, &text, &size, d))) goto out;
  j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
  json_t *ver = json_object_get(j, "version"), *passed = json_object_get(j, "passed");
  if (!json_is_object(j) || !json_is_integer(ver) || json_integer_value(ver) != 1 || !json_is_boolean(passed)) {
    rc =
        ftl_diag_fail(d, FTL_ERR_CORRUPT,
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
  if ((rc = core_fs_read_regular(path, 16u << 20, &text, &size, d))) goto out;
  j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
  if (!json_is_object(j) || !json_is_string(json_object_get(j, "peft_type"))) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT,
                       "%s: adapter_config.json is not a PEFT config (a JSON object with peft_type)%s%s; refused", what,
                       j ? "" : ": ", j ? "" : jerr.text);
    goto out;
  }
  ftl_free(text);
  text = NULL;
  if (ftl_fmt(path, sizeof path, "%s/adapter_model.safetensors", dir)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
    goto out;
  }
  if ((rc = core_fs_read_regular(path, PL_REG_ADAPTER_FILE_MAX_BYTES, &text, &size, d))) goto out;
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

static const char *trust_name(pl_registry_trust t) {
  return t == FTL_REGISTRY_TRUST_LOCAL_GATE   ? "local-gate"
         : t == FTL_REGISTRY_TRUST_UNVERIFIED ? "unverified"
                                              : "signed";
}

static const char *manifest_digest(const pl_package_manifest *m, const char *name) {
  for (size_t i = 0; i < m->n_files; i++)
    if (!strcmp(m->files[i].name, name)) return m->files[i].sha256;
  return NULL;
}

/* ---- channel moves ------------------------------------------------------------------------- */

/* Points channel at id (complete, checked here) or rolls it back (id NULL) under the held lock:
 * settles the channel's last move first (see the top of the file), appends the move's line, then
 * replaces the pointer. to_out (may be NULL) gets the new current. */
static ftl_err move_locked(const pl_registry_ref *reg, const char *name, const char *id, const char *channel,
                           const char *who, const char *why, char to_out[PL_REG_ID_LEN + 1], ftl_diag *d) {
  char audit_path[4096], ptr_path[4096], rel[128];
  char *text = NULL;
  size_t size = 0;
  pl_reg_pointer p = {0}, np = {0};
  pl_reg_replay *r = NULL;
  int have = 0, unapplied = 0;
  ftl_err rc;
  snprintf(rel, sizeof rel, "channels/%s.json", channel);
  if ((rc = pl_reg_path(ptr_path, sizeof ptr_path, reg, name, rel, d))) return rc;
  if (id && (rc = pl_reg_version_complete(reg, name, id, NULL, NULL, d))) return rc;
  if ((rc = pl_reg_audit_read(reg, name, audit_path, sizeof audit_path, &text, &size, d))) goto out;
  rc = pl_reg_pointer_read(reg, name, channel, &p, d);
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
  rc = pl_reg_replay_channel(text, size, audit_path, ptr_path, channel, have ? &p : NULL, r, &unapplied, d);
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
  if (!(np.history = ftl_calloc(PL_REG_HISTORY_MAX, sizeof *np.history))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  if (id) {
    if (have && !strcmp(p.current, id)) {
      if (to_out) memcpy(to_out, id, PL_REG_ID_LEN + 1);
      goto out; /* already there: nothing to move, nothing to record */
    }
    if (have) {
      /* Keep the newest PL_REG_HISTORY_MAX - 1 of the old history, then the old current. */
      size_t skip = p.n_history >= PL_REG_HISTORY_MAX ? p.n_history - (PL_REG_HISTORY_MAX - 1) : 0;
      for (size_t i = skip; i < p.n_history; i++)
        memcpy(np.history[np.n_history++], p.history[i], PL_REG_ID_LEN + 1);
      memcpy(np.history[np.n_history++], p.current, PL_REG_ID_LEN + 1);
      memcpy(np.previous, p.current, PL_REG_ID_LEN + 1);
    }
    memcpy(np.current, id, PL_REG_ID_LEN + 1);
  } else {
    if (!p.previous[0]) {
      rc = ftl_diag_fail(d, FTL_ERR_STATE, "%s@%s has no previous version to roll back to", name, channel);
      goto out;
    }
    if ((rc = pl_reg_version_complete(reg, name, p.previous, NULL, NULL, d))) goto out;
    np.n_history = p.n_history - 1;
    memcpy(np.history, p.history, np.n_history * sizeof *np.history);
    memcpy(np.current, p.previous, PL_REG_ID_LEN + 1);
    if (np.n_history) memcpy(np.previous, np.history[np.n_history - 1], PL_REG_ID_LEN + 1);
  }
  np.seq = r->seq + 1;
  pl_crash_point("promote.before_audit");
  if ((rc = audit(reg, name, id ? "promote" : "rollback", channel, have ? p.current : NULL, np.current, who, why,
                  np.seq, NULL, d)))
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
  if (to_out) memcpy(to_out, np.current, PL_REG_ID_LEN + 1);
out:
  ftl_free(r);
  pl_reg_pointer_free(&np);
  pl_reg_pointer_free(&p);
  ftl_free(text);
  return rc;
}

/* ---- publish: storing a version ------------------------------------------------------------ */

/* Into the temporary version folder dirfd (tmp): package.tar.zst, ftl's own writer's bytes of the
 * verified entries, never the bytes offered (pipeline/package.h): packaging noise a manifest does
 * not declare stays out; then MANIFEST.json. Every write through the file seam, read back. */
static ftl_err store_package(int dirfd, const char *tmp, const char *package_path, const char *id, const char *man,
                             size_t man_size, ftl_diag *d) {
  int pfd = core_fs_table.openat(dirfd, FTL_PACKAGE_FILE, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
  if (pfd < 0)
    return ftl_diag_fail(d, core_errno_to_err(errno), "cannot create %s/%s: %s", tmp, FTL_PACKAGE_FILE,
                         strerror(errno));
  pl_package_info info;
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
  if ((rc = pl_reg_verify_unpacked(adir, id, &ud)))
    return ftl_diag_fail(d, rc, "the unpacked copy does not read back as written (a torn write?): %s", ud.msg);
  return check_content(adir, package_path, d);
}

/* PUBLISHED.json into the temporary version folder dirfd (tmp). */
static ftl_err write_publication(int dirfd, const char *tmp, const char *id, pl_registry_trust trust,
                                 const char *key_id, json_t *sig_json, const char *who, ftl_diag *d) {
  char when[32];
  size_t len = 0;
  char *text = NULL;
  now_iso(when, sizeof when);
  json_t *rec = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s}", "format", PL_REG_PUBLICATION_FORMAT, "version", 1, "id", id,
                          "trust", trust_name(trust), "time", when, "who", who);
  if (rec) {
    json_object_set_new(rec, "key_id", key_id[0] ? json_string(key_id) : json_null());
    json_object_set(rec, "signature", sig_json ? sig_json : json_null());
    text = pl_json_text(rec, 1, &len);
  }
  json_decref(rec);
  ftl_err rc = text ? core_fs_write_new_at(dirfd, tmp, PL_REG_PUBLICATION_FILE, text, len, 0644, d)
                    : ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  ftl_free(text);
  return rc;
}

/* Trust SIGNED: the verdict signature (opts->signature_path, else PACKAGE.sig) binds this package's
 * verdict.json, adapter_config.json and adapter_model.safetensors (their digests in m) and
 * verifies with a key in REGISTRY/keys/trusted/. The key's id into key_id, the signature's JSON
 * into *sig_json (for the publication record). */
static ftl_err verify_signature(const pl_registry_ref *reg, const char *package_path,
                                const pl_registry_publish_opts *o, const pl_package_manifest *m,
                                char key_id[PL_REG_ID_LEN + 1], json_t **sig_json, ftl_diag *d) {
  char sig_path[4096], trusted[4096];
  char *sig = NULL;
  size_t sig_size = 0;
  pl_verdict_digests dg;
  ftl_err rc;
  const char *v = manifest_digest(m, FTL_PACKAGE_VERDICT), *c = manifest_digest(m, "adapter_config.json"),
             *w = manifest_digest(m, "adapter_model.safetensors");
  if (!v || !c || !w)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s lacks verdict.json or the adapter's files", package_path);
  memcpy(dg.verdict, v, sizeof dg.verdict);
  memcpy(dg.config, c, sizeof dg.config);
  memcpy(dg.model, w, sizeof dg.model);
  if (o->signature_path ? ftl_fmt(sig_path, sizeof sig_path, "%s", o->signature_path)
                        : ftl_fmt(sig_path, sizeof sig_path, "%s.sig", package_path))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", package_path);
  rc = core_fs_read_regular(sig_path, FTL_VERDICT_SIG_MAX_BYTES, &sig, &sig_size, d);
  if (rc == FTL_ERR_NOTFOUND)
    return ftl_diag_fail(d, FTL_ERR_STATE,
                         "%s has no verdict signature (%s): sign it with `ftl registry sign-verdict`, or publish with "
                         "--unverified (recorded forever)",
                         package_path, sig_path);
  if (rc) return rc;
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
  *sig_json = json_loadb(sig, sig_size, 0, &jerr);
out:
  ftl_free(sig);
  return rc;
}

/* A version not stored yet, under the held lock: made whole in versions/.tmp-*, fsynced, renamed
 * to vdir (versions/<id>), then its "publish" audit line. On failure nothing is left behind. */
static ftl_err store_version(const pl_registry_ref *reg, const char *name, const char *versions, const char *vdir,
                             const char *package_path, const char *id, const char *man, size_t man_size,
                             const pl_registry_publish_opts *o, const char *key_id, json_t *sig_json, const char *who,
                             json_t *extra, ftl_diag *d) {
  char tmp[4096] = "";
  int dirfd = -1;
  ftl_err rc;
  if (ftl_fmt(tmp, sizeof tmp, "%s/.tmp-%.12s-XXXXXX", versions, id))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", versions);
  /* mkdtemp makes it 0700; a published version is readable by the servers that load it. */
  if ((rc = core_fs_mkdtemp(tmp, 0755, &dirfd, d))) goto out; /* clears tmp when it made nothing */
  if ((rc = store_package(dirfd, tmp, package_path, id, man, man_size, d))) goto out;
  if ((rc = unpack_and_check(tmp, package_path, id, d))) goto out;
  if ((rc = write_publication(dirfd, tmp, id, o->trust, key_id, sig_json, who, d))) goto out;
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
  rc = audit(reg, name, "publish", NULL, NULL, id, who, o->why, -1, extra, d);
out:
  if (dirfd >= 0) core_fs_table.close(dirfd);
  if (tmp[0]) core_fs_rm_tree(tmp);
  return rc;
}

ftl_err pl_registry_publish_ex(const pl_registry_ref *reg, const char *name, const char *package_path,
                               const pl_registry_publish_opts *opts, char id_out[FTL_SHA256_HEX_LEN + 1],
                               ftl_diag *d) {
  char id[PL_REG_ID_LEN + 1], versions[4096], vdir[4096], who_buf[256], key_id[PL_REG_ID_LEN + 1] = "";
  char *man = NULL, *have = NULL;
  size_t man_size = 0, have_size = 0;
  uint64_t in_size = 0;
  int lock = -1, in = -1;
  pl_package_manifest *m = NULL;
  json_t *extra = NULL, *sig_json = NULL;
  ftl_err rc;
  pl_registry_publish_opts o = opts ? *opts : (pl_registry_publish_opts){0};
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
  if ((rc = core_fs_open_regular(package_path, PL_REG_PACKAGE_MAX_BYTES, &in, &in_size, d))) return rc;
  if ((rc = pl_package_unpack(package_path, NULL, NULL, NULL, id, &man, &man_size, d))) goto out;
  if ((rc = pl_package_manifest_parse(man, man_size, NULL, &m, d))) goto out;
  if (o.trust == FTL_REGISTRY_TRUST_SIGNED && (rc = verify_signature(reg, package_path, &o, m, key_id, &sig_json, d)))
    goto out;
  extra = json_pack("{s:s}", "trust", trust_name(o.trust));
  if (key_id[0]) json_object_set_new(extra, "key_id", json_string(key_id));
  if ((rc = pl_reg_lock_adapter(reg, name, 1, &lock, d))) goto out;
  if ((rc = pl_reg_path(versions, sizeof versions, reg, name, "versions", d))) goto out;
  pl_reg_clean_stale(reg, name);
  if (ftl_fmt(vdir, sizeof vdir, "%s/%s", versions, id)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", versions);
    goto out;
  }
  struct stat st;
  if (lstat(vdir, &st) == 0) {
    rc = pl_reg_version_complete(reg, name, id, &have, &have_size, d);
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
  } else if ((rc = store_version(reg, name, versions, vdir, package_path, id, man, man_size, &o, key_id, sig_json, who,
                                 extra, d))) {
    goto out;
  }
  if (o.channel) rc = move_locked(reg, name, id, o.channel, who, o.why, NULL, d);
out:
  if (in >= 0) close(in);
  pl_unlock(lock);
  if (!rc && id_out) memcpy(id_out, id, PL_REG_ID_LEN + 1);
  json_decref(extra);
  json_decref(sig_json);
  pl_package_manifest_free(m);
  ftl_free(have);
  ftl_free(man);
  return rc;
}

ftl_err pl_registry_publish(const pl_registry_ref *reg, const char *name, const char *package_path,
                            const char *channel, const char *why, char id_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  pl_registry_publish_opts o = {.channel = channel, .why = why, .trust = FTL_REGISTRY_TRUST_LOCAL_GATE};
  return pl_registry_publish_ex(reg, name, package_path, &o, id_out, d);
}

/* ---- promote and rollback ------------------------------------------------------------------ */

ftl_err pl_registry_promote(const pl_registry_ref *reg, const char *name, const char *version, const char *channel,
                            const char *why, ftl_diag *d) {
  char id[PL_REG_ID_LEN + 1], who_buf[256];
  int lock = -1;
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if (!pl_registry_name_ok(name)) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid adapter name", name);
  if (!pl_registry_channel_ok(channel))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid channel name", channel ? channel : "");
  ftl_err rc = pl_reg_version_lookup(reg, name, version, id, d);
  if (rc) return rc;
  if ((rc = pl_reg_lock_adapter(reg, name, 0, &lock, d))) return rc;
  pl_reg_clean_stale(reg, name);
  rc = move_locked(reg, name, id, channel, who_of(reg, who_buf, sizeof who_buf), why, NULL, d);
  pl_unlock(lock);
  return rc;
}

ftl_err pl_registry_rollback(const pl_registry_ref *reg, const char *name, const char *channel, const char *why,
                             char to_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  char who_buf[256];
  int lock = -1;
  if (!reg->root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry (give --registry or set FTL_REGISTRY)");
  if (!pl_registry_name_ok(name)) return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid adapter name", name);
  if (!pl_registry_channel_ok(channel))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "\"%s\" is not a valid channel name", channel ? channel : "");
  /* An unknown adapter is refused before anything is created for it. */
  ftl_err rc = pl_reg_lock_adapter(reg, name, 0, &lock, d);
  if (rc) return rc;
  pl_reg_clean_stale(reg, name);
  rc = move_locked(reg, name, NULL, channel, who_of(reg, who_buf, sizeof who_buf), why, to_out, d);
  pl_unlock(lock);
  return rc;
}
