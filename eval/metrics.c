/* eval/metrics.c: the evaluator's metrics file (see metrics.h, docs/formats/metrics.md).
 *
 * jansson rejects NaN and Infinity, which Python and others write for non-finite floats; a
 * pre-pass copies the text and turns those bare literals (outside strings) into the strings
 * "NaN", "Infinity", "-Infinity", so the file parses and the value reads as non-finite. A number
 * too large for a double (1e309) is turned into "Infinity" or "-Infinity" the same way: jansson
 * would call it an overflow, and it is a non-finite result, not a malformed file.
 *
 * The file is the evaluator's, so it is read as outside input: opened without blocking and without
 * following a link, checked to be a regular file of at most FTL_METRICS_MAX_BYTES, and read no
 * further than that (an evaluator that leaves a FIFO there must not hang the gate). */
#include "eval/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/jsonl.h"
#include "ftl/core.h"

struct ev_metrics {
  json_t *root;    /* the whole file */
  json_t *metrics; /* borrowed from root */
};

static int is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int is_number_char(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* Copies data to a new NUL-terminated buffer with bare NaN/Infinity/-Infinity quoted, and numbers
 * that overflow a double written as the quoted infinity of their sign. */
static char *quote_nonfinite(const char *data, size_t size, size_t *out_len) {
  /* A literal grows by 2 bytes (the quotes) and is at least 3 bytes long; an overflowing number is
   * at least 5 bytes ("1e309") and becomes at most 11 ("\"-Infinity\""). */
  size_t cap = 3 * size + 16;
  char *out = ftl_malloc(cap);
  if (!out) return NULL;
  size_t o = 0;
  int in_string = 0;
  for (size_t i = 0; i < size;) {
    char c = data[i];
    if (in_string) {
      out[o++] = c;
      if (c == '\\' && i + 1 < size)
        out[o++] = data[++i];
      else if (c == '"')
        in_string = 0;
      i++;
      continue;
    }
    if (c == '"') {
      in_string = 1;
      out[o++] = c;
      i++;
      continue;
    }
    static const char *const lits[] = {"-Infinity", "Infinity", "NaN"};
    int done = 0;
    for (int k = 0; k < 3 && !done; k++) {
      size_t n = strlen(lits[k]);
      if (i + n <= size && !memcmp(data + i, lits[k], n) && (i == 0 || !is_ident(data[i - 1])) &&
          (i + n == size || !is_ident(data[i + n]))) {
        out[o++] = '"';
        memcpy(out + o, lits[k], n);
        o += n;
        out[o++] = '"';
        i += n;
        done = 1;
      }
    }
    if (!done && (c == '-' || (c >= '0' && c <= '9')) && (i == 0 || !is_ident(data[i - 1]))) {
      size_t n = 0;
      while (i + n < size && is_number_char(data[i + n]))
        n++;
      char num[64];
      int overflow = 0;
      if (n < sizeof num) {
        memcpy(num, data + i, n);
        num[n] = '\0';
        char *end = NULL;
        errno = 0;
        double x = strtod(num, &end);
        overflow = end == num + n && errno == ERANGE && isinf(x);
        if (overflow) {
          const char *lit = x < 0 ? "\"-Infinity\"" : "\"Infinity\"";
          memcpy(out + o, lit, strlen(lit));
          o += strlen(lit);
        }
      }
      if (!overflow) {
        memcpy(out + o, data + i, n);
        o += n;
      }
      i += n;
      done = 1;
    }
    if (!done) out[o++] = data[i++];
  }
  out[o] = '\0';
  *out_len = o;
  return out;
}

ftl_err ev_metrics_parse(const char *data, size_t size, ev_metrics **out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  json_error_t jerr;
  json_t *root = NULL;
  ev_metrics *m = NULL;
  size_t len = 0;
  if (size > FTL_METRICS_MAX_BYTES)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "larger than %u bytes", FTL_METRICS_MAX_BYTES);
  if (memchr(data, '\0', size)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "contains a NUL byte");
  char *text = quote_nonfinite(data, size, &len);
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  ftl_free(text);
  if (!root) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "not JSON: %s (line %d)", jerr.text, jerr.line);
  if (!json_is_object(root)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "expected a JSON object {\"version\": 1, \"metrics\": {...}}");
    goto out;
  }
  if ((rc = core_jsonl_check_version(root, FTL_METRICS_VERSION, "", d))) goto out;
  json_t *metrics = json_object_get(root, "metrics");
  if (!json_is_object(metrics)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "'metrics' is missing or not an object");
    goto out;
  }
  const char *key;
  json_t *value;
  json_object_foreach(metrics, key, value) {
    size_t n = strlen(key);
    if (n == 0 || n > FTL_METRICS_MAX_NAME) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "a metric name must have 1 to %d characters", FTL_METRICS_MAX_NAME);
      goto out;
    }
  }
  m = ftl_calloc(1, sizeof *m);
  if (!m) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  m->root = root;
  m->metrics = metrics;
  root = NULL;
  *out = m;
out:
  json_decref(root);
  return rc;
}

ftl_err ev_metrics_load(const char *path, ev_metrics **out, ftl_diag *d) {
  char *data = NULL;
  size_t size = 0;
  /* Read as outside input (see the top of this file): core's one reader of such files. */
  ftl_err rc = core_fs_read_regular(path, FTL_METRICS_MAX_BYTES, &data, &size, d);
  if (rc) return ftl_diag_prefix(d, rc, "metrics file");
  rc = ev_metrics_parse(data, size, out, d);
  ftl_free(data);
  if (rc) ftl_diag_prefix(d, rc, "metrics file %s", path);
  return rc;
}

void ev_metrics_destroy(ev_metrics *m) {
  if (!m) return;
  json_decref(m->root);
  ftl_free(m);
}

ev_metric_state ev_metrics_get(const ev_metrics *m, const char *name, double *value) {
  const json_t *v = m && name ? json_object_get(m->metrics, name) : NULL;
  if (!v) return FTL_METRIC_MISSING;
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    if (!strcmp(s, "NaN") || !strcmp(s, "Infinity") || !strcmp(s, "-Infinity")) return FTL_METRIC_NONFINITE;
    return FTL_METRIC_NOT_NUMBER;
  }
  if (!json_is_number(v)) return FTL_METRIC_NOT_NUMBER;
  double x = json_number_value(v);
  if (!isfinite(x)) return FTL_METRIC_NONFINITE;
  *value = x;
  return FTL_METRIC_OK;
}

const json_t *ev_metrics_object(const ev_metrics *m) { return m ? m->metrics : NULL; }

const char *ev_metric_state_text(ev_metric_state s) {
  switch (s) {
  case FTL_METRIC_OK: return "a finite number";
  case FTL_METRIC_MISSING: return "missing";
  case FTL_METRIC_NONFINITE: return "not finite (NaN or infinite)";
  case FTL_METRIC_NOT_NUMBER: return "not a number";
  }
  return "?";
}

ftl_err ev_metrics_write(const char *path, const json_t *metrics, ftl_diag *d) {
  json_t *root = json_pack("{s:i, s:O}", "version", FTL_METRICS_VERSION, "metrics", (json_t *)(uintptr_t)metrics);
  if (!root) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  char *text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
  json_decref(root);
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  size_t n = strlen(text);
  text[n] = '\n';
  ftl_err rc = core_fs_write_atomic(path, text, n + 1, NULL, -1, -1, d);
  free(text);
  return rc;
}
