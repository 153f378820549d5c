/* pipeline/gate_lock.c: the registry's copy of a run's locked gate (see gate_lock.h,
 * docs/formats/gate-lock.md): build the record from a snapshot, store it once under the adapter's
 * registry lock with an audit line, read it back without trusting it.
 *
 * Uses the registry's layout (REGISTRY/<name>/.lock, audit.jsonl) and pipeline/pl_util.h for the
 * lock, the atomic write, the audit append and `who` (pl_effective_user, as the registry spells
 * it).
 *
 * Deliberately not here: comparing a snapshot with the record (eval/gate.c), any way to replace
 * or delete a record (a lock that can be rewritten by ftl is not a lock). */
#include "pipeline/gate_lock.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/jsonl.h"
#include "ftl/core.h"
#include "pipeline/pl_util.h"
#include "pipeline/registry.h"
#include "pipeline/sha256.h"
#include "pipeline/snapshot.h"

static void now_iso(char out[32]) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static ftl_err canonical_sha(const json_t *j, char hex[65], ftl_diag *d) {
  char *text = pl_snapshot_canonical(j);
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  ftl_err rc = pl_sha256_hex(text, strlen(text), hex);
  free(text);
  return rc ? ftl_diag_fail(d, rc, "SHA-256 failed") : FTL_OK;
}

/* SHA-256 of the record's canonical form without "digest". */
static ftl_err record_digest(const json_t *rec, char hex[65], ftl_diag *d) {
  json_t *copy = json_deep_copy(rec);
  if (!copy) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  json_object_del(copy, "digest");
  ftl_err rc = canonical_sha(copy, hex, d);
  json_decref(copy);
  return rc;
}

static json_t *input_digest(const json_t *snap, const char *name) {
  if (!name) return json_null();
  const json_t *e = pl_snapshot_find_input(snap, name);
  return json_pack("{s:s, s:s?}", "input", name, "sha256", json_string_value(json_object_get(e, "sha256")));
}

ftl_err pl_gate_lock_build(const json_t *snap, const char *run_dir, json_t **out, ftl_diag *d) {
  const json_t *gate = pl_snapshot_gate(snap);
  const json_t *reg = json_object_get(gate, "registry");
  const json_t *ev = json_object_get(gate, "eval");
  const json_t *evaluator = pl_snapshot_evaluator(snap);
  const char *run_id = pl_snapshot_run_id(snap);
  char who[512], when[32], hex[65];
  if (!json_is_object(reg) || !run_id || !evaluator)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "a gate lock needs a snapshot with a registry, a run id and an evaluator");
  json_t *inputs = json_array();
  const json_t *arr = json_object_get(snap, "inputs");
  for (size_t i = 0; inputs && i < json_array_size(arr); i++) {
    const json_t *e = json_array_get(arr, i);
    json_array_append_new(inputs, json_pack("{s:O, s:O, s:O, s:O*}", "name", json_object_get(e, "name"), "path",
                                            json_object_get(e, "path"), "sha256", json_object_get(e, "sha256"),
                                            "link", json_object_get(e, "link")));
  }
  pl_effective_user(who, sizeof who);
  now_iso(when);
  json_t *rec = json_pack(
      "{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:O, s:s, s:O, s:o, s:o, s:o}", "format",
      FTL_GATE_LOCK_FORMAT, "version", FTL_GATE_LOCK_VERSION, "run_id", run_id, "run_dir", run_dir, "job",
      json_string_value(json_object_get(snap, "job")), "job_spec_hash",
      json_string_value(json_object_get(snap, "job_spec_hash")), "submitted_at",
      json_string_value(json_object_get(snap, "created_at")), "locked_at", when, "who", who, "name",
      json_string_value(json_object_get(reg, "name")), "snapshot_digest", pl_snapshot_digest(snap), "gate", gate,
      "gate_sha256", pl_snapshot_gate_sha256(snap), "evaluator", evaluator, "eval_data",
      input_digest(snap, json_string_value(json_object_get(ev, "data"))), "base",
      input_digest(snap, json_string_value(json_object_get(ev, "base"))), "inputs", inputs);
  if (!rec) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory building the gate lock");
  ftl_err rc = record_digest(rec, hex, d);
  if (!rc) json_object_set_new(rec, "digest", json_string(hex));
  if (rc) {
    json_decref(rec);
    return rc;
  }
  *out = rec;
  return FTL_OK;
}

static ftl_err lock_path(char *out, size_t size, const char *root, const char *name, const char *run_id,
                         ftl_diag *d) {
  if (ftl_fmt(out, size, "%s/%s/gate-locks%s%s%s", root, name, run_id ? "/" : "", run_id ? run_id : "",
              run_id ? ".json" : ""))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "registry path too long under %s", root);
  return FTL_OK;
}

ftl_err pl_gate_lock_store(const char *root, const char *name, const json_t *rec, int64_t lock_timeout_ms,
                            ftl_diag *d) {
  char adapter[PATH_MAX], dir[PATH_MAX], path[PATH_MAX], lockp[PATH_MAX], audit[PATH_MAX];
  const char *run_id = json_string_value(json_object_get(rec, "run_id"));
  char *text = NULL, *have = NULL;
  size_t len = 0, have_len = 0;
  int lock = -1;
  json_t *line = NULL;
  ftl_err rc = FTL_OK;
  if (!root || !pl_registry_name_ok(name) || !run_id)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "gate lock: no registry, a bad adapter name or no run id");
  if (ftl_fmt(adapter, sizeof adapter, "%s/%s", root, name) || ftl_fmt(lockp, sizeof lockp, "%s/.lock", adapter) ||
      ftl_fmt(audit, sizeof audit, "%s/audit.jsonl", adapter) ||
      (rc = lock_path(dir, sizeof dir, root, name, NULL, d)) || (rc = lock_path(path, sizeof path, root, name, run_id, d)))
    return rc ? rc : ftl_diag_fail(d, FTL_ERR_RANGE, "registry path too long under %s", root);
  if ((rc = ftl_mkdir_p(dir, d))) goto out;
  if ((rc = pl_lock(lockp, lock_timeout_ms > 0 ? lock_timeout_ms : 30000, &lock, d))) goto out;
  if (!(text = pl_json_text(rec, 1, &len))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  /* Under the lock: a record is never replaced, so the same run cannot re-lock another gate. */
  rc = core_fs_read_regular(path, FTL_GATE_LOCK_MAX_BYTES, &have, &have_len, d);
  if (rc == FTL_OK) {
    if (have_len != len || memcmp(have, text, len) != 0)
      rc = ftl_diag_fail(d, FTL_ERR_STATE, "%s already holds another gate lock for run %s; it is never replaced", path,
                         run_id);
    goto out;
  }
  if (rc != FTL_ERR_NOTFOUND) goto out;
  if ((rc = core_fs_replace(path, text, len, CORE_TMP_UNPREDICTABLE, "gate_lock.write", -1, -1, d))) goto out;
  char who[512], when[32];
  pl_effective_user(who, sizeof who);
  now_iso(when);
  char why[PATH_MAX + 200];
  snprintf(why, sizeof why, "ftl run: gate locked for the run %s (gate sha256 %.12s)",
           json_string_value(json_object_get(rec, "run_dir")),
           json_string_value(json_object_get(rec, "gate_sha256")));
  /* The registry's audit-line keys first (docs/formats/registry.md), then this action's own. */
  line = json_pack("{s:i, s:s, s:I, s:s, s:s, s:s, s:n, s:n, s:n, s:s, s:s, s:O}", "version", 1, "time", when,
                   "time_us", (json_int_t)ftl_wall_us(), "who", who, "action", "gate_lock", "name", name, "channel",
                   "from", "to", "why", why, "run_id", run_id, "gate_sha256", json_object_get(rec, "gate_sha256"));
  if (!line) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  rc = pl_jsonl_append(audit, line, lock_timeout_ms > 0 ? lock_timeout_ms : 30000, d);
out:
  pl_unlock(lock);
  json_decref(line);
  ftl_free(text);
  ftl_free(have);
  return rc;
}

static int hex_len(const json_t *v, size_t n) {
  const char *s = json_string_value(v);
  if (!s || strlen(s) != n) return 0;
  for (; *s; s++)
    if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return 0;
  return 1;
}

static int digest_ref(const json_t *v) {
  return json_is_null(v) || (json_is_object(v) && json_is_string(json_object_get(v, "input")) &&
                             hex_len(json_object_get(v, "sha256"), 64));
}

ftl_err pl_gate_lock_parse(const char *data, size_t size, json_t **out, ftl_diag *d) {
  char hex[65];
  json_t *rec = NULL;
  /* The version is checked after the format, with the lock's own message. */
  ftl_err rc = core_jsonl_load_object(data, size, FTL_GATE_LOCK_MAX_BYTES, -1, "gate lock: ", &rec, d);
  if (rc) return rc;
#define BAD CORE_JSON_BAD
  const char *fmt = json_string_value(json_object_get(rec, "format"));
  if (!fmt || strcmp(fmt, FTL_GATE_LOCK_FORMAT)) BAD("gate lock: 'format' is not \"%s\"", FTL_GATE_LOCK_FORMAT);
  if (!json_is_integer(json_object_get(rec, "version")) ||
      json_integer_value(json_object_get(rec, "version")) != FTL_GATE_LOCK_VERSION)
    BAD("gate lock: 'version' is not %d (this ftl reads only that)", FTL_GATE_LOCK_VERSION);
  static const char *const strings[] = {"run_dir", "job", "job_spec_hash", "submitted_at", "locked_at", "who", "name"};
  for (size_t i = 0; i < sizeof strings / sizeof *strings; i++)
    if (!json_is_string(json_object_get(rec, strings[i]))) BAD("gate lock: '%s' is not a string", strings[i]);
  if (!hex_len(json_object_get(rec, "run_id"), 32)) BAD("gate lock: 'run_id' is not 32 hex digits");
  static const char *const digests[] = {"snapshot_digest", "gate_sha256", "digest"};
  for (size_t i = 0; i < sizeof digests / sizeof *digests; i++)
    if (!hex_len(json_object_get(rec, digests[i]), 64)) BAD("gate lock: '%s' is not 64 hex digits", digests[i]);
  if (!json_is_object(json_object_get(rec, "gate"))) BAD("gate lock: 'gate' is not an object");
  const json_t *ev = json_object_get(rec, "evaluator");
  const char *ep = json_string_value(json_object_get(ev, "path"));
  if (!ep || ep[0] != '/' || !hex_len(json_object_get(ev, "sha256"), 64) ||
      !json_is_integer(json_object_get(ev, "size")))
    BAD("gate lock: 'evaluator' is not {path (absolute), sha256, size}");
  if (!digest_ref(json_object_get(rec, "eval_data")) || json_is_null(json_object_get(rec, "eval_data")))
    BAD("gate lock: 'eval_data' is not {input, sha256}");
  if (!digest_ref(json_object_get(rec, "base"))) BAD("gate lock: 'base' is neither null nor {input, sha256}");
  const json_t *inputs = json_object_get(rec, "inputs");
  if (!json_is_array(inputs)) BAD("gate lock: 'inputs' is not an array");
  for (size_t i = 0; i < json_array_size(inputs); i++) {
    const json_t *e = json_array_get(inputs, i);
    if (!json_is_string(json_object_get(e, "name")) || !json_is_string(json_object_get(e, "path")) ||
        !hex_len(json_object_get(e, "sha256"), 64))
      BAD("gate lock: 'inputs[%zu]' is not {name, path, sha256}", i);
  }
  if ((rc = canonical_sha(json_object_get(rec, "gate"), hex, d))) goto out;
  if (strcmp(hex, json_string_value(json_object_get(rec, "gate_sha256"))))
    BAD("gate lock: 'gate_sha256' is not the SHA-256 of its 'gate'");
  if ((rc = record_digest(rec, hex, d))) goto out;
  if (strcmp(hex, json_string_value(json_object_get(rec, "digest"))))
    BAD("gate lock: its digest does not match its content (edited in the registry?)");
#undef BAD
  *out = rec;
  rec = NULL;
out:
  json_decref(rec);
  return rc;
}

ftl_err pl_gate_lock_load(const char *root, const char *name, const char *run_id, json_t **out, char *path_out,
                           size_t path_size, ftl_diag *d) {
  char path[PATH_MAX];
  char *data = NULL;
  size_t size = 0;
  struct stat st = {0};
  if (!root) return ftl_diag_fail(d, FTL_ERR_INVAL, "no registry to read the gate lock from");
  int gone = stat(root, &st) != 0;
  if (gone || !S_ISDIR(st.st_mode))
    return ftl_diag_fail(d, FTL_ERR_IO, "the registry %s is not there (%s); its gate lock cannot be checked", root,
                         gone ? strerror(errno) : "not a folder");
  ftl_err rc = lock_path(path, sizeof path, root, name, run_id, d);
  if (rc) return rc;
  if (path_out) snprintf(path_out, path_size, "%s", path);
  rc = core_fs_read_regular(path, FTL_GATE_LOCK_MAX_BYTES, &data, &size, d);
  if (rc == FTL_ERR_NOTFOUND)
    return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "the registry %s holds no gate lock for this run (%s)", root, path);
  if (rc) return rc;
  rc = pl_gate_lock_parse(data, size, out, d);
  ftl_free(data);
  if (rc) ftl_diag_prefix(d, rc, "%s", path);
  return rc;
}
