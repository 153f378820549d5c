/* launcher/finish.c: RUNDIR/finish.json, what of the job's end is done (see finish.h, the format in
 * docs/formats/finish.md). One small JSON document, replaced whole through the file seam after each
 * part of the end (trained, gated, published); read bounded, as a regular file. */
#include "launcher/finish.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "core/fs.h"
#include "core/rundir.h"
#include "ftl/core.h"

enum { FINISH_VERSION = 1, FINISH_MAX_BYTES = 64 << 10 };

static const char *str_of(const json_t *v) { return json_is_string(v) ? json_string_value(v) : ""; }

static void copy_str(char *out, size_t size, const json_t *v) { snprintf(out, size, "%s", str_of(v)); }

ftl_err ln_finish_load(const char *run_dir, ln_finish *f, ftl_diag *d) {
  char path[PATH_MAX];
  char *data = NULL;
  size_t len = 0;
  json_t *doc = NULL;
  memset(f, 0, sizeof *f);
  if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_FINISH))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "run directory path too long: %s", run_dir);
  ftl_err rc = core_fs_read_regular(path, FINISH_MAX_BYTES, &data, &len, d);
  if (rc == FTL_ERR_NOTFOUND) return FTL_OK;
  if (rc) goto out;
  doc = json_loadb(data, len, 0, NULL);
  if (!json_is_object(doc) || json_integer_value(json_object_get(doc, "version")) != FINISH_VERSION) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a finish record of version %d", path, FINISH_VERSION);
    goto out;
  }
  const json_t *t = json_object_get(doc, "trained"), *g = json_object_get(doc, "gate"),
               *p = json_object_get(doc, "published");
  if (json_is_object(t)) {
    f->trained = 1;
    f->trained_wall_us = json_integer_value(json_object_get(t, "wall_us"));
    f->trained_attempt = (int)json_integer_value(json_object_get(t, "attempt"));
  }
  if (json_is_object(g)) {
    const char *result = str_of(json_object_get(g, "result"));
    f->gate = !strcmp(result, "passed") ? 1 : !strcmp(result, "failed") ? -1 : 0;
    f->gate_wall_us = json_integer_value(json_object_get(g, "wall_us"));
    copy_str(f->gate_metric, sizeof f->gate_metric, json_object_get(g, "metric"));
    f->gate_value = json_number_value(json_object_get(g, "value"));
  }
  if (json_is_object(p)) {
    copy_str(f->registry, sizeof f->registry, json_object_get(p, "registry"));
    copy_str(f->name, sizeof f->name, json_object_get(p, "name"));
    copy_str(f->channel, sizeof f->channel, json_object_get(p, "channel"));
    copy_str(f->version, sizeof f->version, json_object_get(p, "version"));
    f->published_wall_us = json_integer_value(json_object_get(p, "wall_us"));
    f->published = f->registry[0] && f->name[0] && strlen(f->version) == 64;
  }
out:
  if (rc) memset(f, 0, sizeof *f);
  json_decref(doc);
  ftl_free(data);
  return rc;
}

ftl_err ln_finish_store(const char *run_dir, const ln_finish *f, ftl_diag *d) {
  char path[PATH_MAX];
  if (core_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_FINISH))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "run directory path too long: %s", run_dir);
  json_t *doc = json_pack("{s:i}", "version", FINISH_VERSION);
  if (doc && f->trained)
    json_object_set_new(doc, "trained",
                        json_pack("{s:I, s:i}", "wall_us", (json_int_t)f->trained_wall_us, "attempt",
                                  f->trained_attempt));
  if (doc && f->gate)
    json_object_set_new(doc, "gate",
                        json_pack("{s:I, s:s, s:s, s:f}", "wall_us", (json_int_t)f->gate_wall_us, "result",
                                  f->gate > 0 ? "passed" : "failed", "metric", f->gate_metric, "value", f->gate_value));
  if (doc && f->published)
    json_object_set_new(doc, "published",
                        json_pack("{s:I, s:s, s:s, s:s, s:s}", "wall_us", (json_int_t)f->published_wall_us, "registry",
                                  f->registry, "name", f->name, "channel", f->channel, "version", f->version));
  char *text = doc ? json_dumps(doc, JSON_SORT_KEYS | JSON_INDENT(2)) : NULL;
  json_decref(doc);
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  size_t n = strlen(text);
  char *line = ftl_malloc(n + 2);
  ftl_err rc;
  if (!line) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  } else {
    memcpy(line, text, n);
    line[n] = '\n';
    rc = ftl_write_file_atomic(path, line, n + 1, d);
  }
  ftl_free(line);
  free(text);
  return rc;
}

int ln_final_committed(const char *run_dir) {
  char final_dir[PATH_MAX], commit[PATH_MAX + 8];
  struct stat st;
  if (core_rundir_path(final_dir, sizeof final_dir, run_dir, FTL_RUNDIR_FINAL) ||
      ftl_fmt(commit, sizeof commit, "%s/" CORE_RUNDIR_FINAL_COMMIT, final_dir))
    return 0;
  return lstat(commit, &st) == 0 && S_ISREG(st.st_mode);
}
