/* eval/gate.c: the evaluation gate (see gate.h, docs/pipeline.md, docs/formats/verdict.md).
 *
 * Map: placeholders; the canonical gate spec's shape and comparison; hashing a folder; running
 * the evaluator (fork/exec with a built environment, its own process group, a deadline); the
 * baseline from the registry; the verdict (build, write, read, summary); ftl_gate_run.
 *
 * Deliberately not here: retrying a failed evaluator (a gate that passes on the second try is not
 * a gate), and any environment inherited wholesale from ftl: the evaluator gets PATH and a short
 * list of named variables (docs/pipeline.md), the snapshot's paths, and the spec's eval.env. */
#include "eval/gate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/jsonl.h"
#include "core/rundir.h"
#include "eval/metrics.h"
#include "ftl/core.h"
#include "launcher/gang.h"
#include "pipeline/adapter_commit.h"
#include "pipeline/registry.h"
#include "pipeline/sha256.h"
#include "pipeline/snapshot.h"

/* ---- placeholders ------------------------------------------------------------------------- */

ftl_err ftl_gate_expand(const char *arg, const ftl_gate_placeholders *p, char **out, ftl_diag *d) {
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  if (!mem) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  ftl_err rc = FTL_OK;
  for (const char *s = arg; *s;) {
    const char *close = *s == '{' ? strchr(s, '}') : NULL;
    size_t n = close ? (size_t)(close - s - 1) : 0;
    int word = close && n > 0 && strspn(s + 1, "abcdefghijklmnopqrstuvwxyz_") == n;
    if (!word) {
      fputc(*s++, mem);
      continue;
    }
    const char *v = NULL;
    if (n == 7 && !strncmp(s + 1, "adapter", n))
      v = p->adapter;
    else if (n == 4 && !strncmp(s + 1, "data", n))
      v = p->data;
    else if (n == 7 && !strncmp(s + 1, "metrics", n))
      v = p->metrics;
    else if (n == 4 && !strncmp(s + 1, "base", n))
      v = p->base;
    else if (n == 7 && !strncmp(s + 1, "run_dir", n))
      v = p->run_dir;
    else {
      rc = ftl_diag_fail(d, FTL_ERR_SPEC,
                         "unknown placeholder {%.*s} (known: {adapter}, {data}, {metrics}, {base}, {run_dir})", (int)n,
                         s + 1);
      break;
    }
    fputs(v ? v : "", mem);
    s = close + 1;
  }
  fclose(mem);
  if (rc || !buf) {
    free(buf);
    return rc ? rc : ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  }
  *out = ftl_strdup(buf);
  free(buf);
  return *out ? FTL_OK : ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
}

/* ---- the canonical gate spec -------------------------------------------------------------- */

typedef enum { T_STRING, T_NUMBER, T_STRINGS, T_ENV, T_OPT_NUMBER, T_OPT_STRING } field_type;
typedef struct spec_field {
  const char *name;
  field_type type;
} spec_field;

static const spec_field eval_fields[] = {
    {"program", T_STRING},   {"args", T_STRINGS},        {"env", T_ENV},
    {"timeout_s", T_NUMBER}, {"metric", T_STRING},       {"direction", T_STRING},
    {"threshold", T_NUMBER}, {"min_gain", T_OPT_NUMBER}, {"baseline_channel", T_OPT_STRING},
    {"data", T_STRING},      {"base", T_OPT_STRING},
};
static const spec_field registry_fields[] = {{"path", T_STRING}, {"name", T_STRING}, {"channel", T_STRING}};

static ftl_err check_fields(const json_t *obj, const char *section, const spec_field *f, size_t n, ftl_diag *d) {
  if (!json_is_object(obj)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "gate spec: '%s' is not an object", section);
  if (json_object_size(obj) != n)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "gate spec: '%s' has %zu fields, expected %zu", section,
                         json_object_size(obj), n);
  for (size_t i = 0; i < n; i++) {
    const json_t *v = json_object_get(obj, f[i].name);
    int ok = 0;
    switch (f[i].type) {
    case T_STRING: ok = json_is_string(v); break;
    case T_NUMBER: ok = json_is_number(v) && isfinite(json_number_value(v)); break;
    case T_OPT_NUMBER: ok = json_is_null(v) || (json_is_number(v) && isfinite(json_number_value(v))); break;
    case T_OPT_STRING: ok = json_is_null(v) || json_is_string(v); break;
    case T_STRINGS:
      ok = json_is_array(v);
      for (size_t k = 0; ok && k < json_array_size(v); k++)
        ok = json_is_string(json_array_get(v, k));
      break;
    case T_ENV: {
      ok = json_is_object(v);
      const char *key;
      const json_t *val;
      if (ok) json_object_foreach((json_t *)(uintptr_t)v, key, val) ok = ok && json_is_string(val);
      break;
    }
    }
    if (!ok)
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "gate spec: '%s.%s' is missing or of the wrong type", section,
                           f[i].name);
  }
  return FTL_OK;
}

ftl_err ftl_gate_spec_check(const json_t *gate, ftl_diag *d) {
  if (!json_is_object(gate)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "gate spec: not an object");
  const json_t *reg = json_object_get(gate, "registry");
  if (json_object_size(gate) != 2 || !json_object_get(gate, "eval") || !reg)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "gate spec: expected exactly 'eval' and 'registry'");
  ftl_err rc =
      check_fields(json_object_get(gate, "eval"), "eval", eval_fields, sizeof eval_fields / sizeof *eval_fields, d);
  if (rc) return rc;
  const char *dir = json_string_value(json_object_get(json_object_get(gate, "eval"), "direction"));
  if (strcmp(dir, "higher") && strcmp(dir, "lower"))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "gate spec: 'eval.direction' is neither higher nor lower");
  if (json_is_null(reg)) return FTL_OK;
  return check_fields(reg, "registry", registry_fields, sizeof registry_fields / sizeof *registry_fields, d);
}

static void value_text(const json_t *v, char *out, size_t size) {
  if (!v) {
    snprintf(out, size, "(absent)");
    return;
  }
  char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
  snprintf(out, size, "%.200s", text ? text : "?");
  free(text);
}

/* Depth-first, keys in sorted order: the first leaf that differs. */
static int first_difference(const json_t *a, const json_t *b, char *path, size_t size) {
  if (json_is_object(a) && json_is_object(b)) {
    /* The union of the keys, sorted. */
    json_t *keys = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)(uintptr_t)a, k, v) json_object_set_new(keys, k, json_true());
    json_object_foreach((json_t *)(uintptr_t)b, k, v) json_object_set_new(keys, k, json_true());
    size_t n = json_object_size(keys), i = 0;
    const char **sorted = ftl_calloc(n ? n : 1, sizeof *sorted);
    json_object_foreach(keys, k, v) if (sorted) sorted[i++] = k;
    int found = 0;
    for (size_t x = 0; sorted && x < n; x++)
      for (size_t y = x + 1; y < n; y++)
        if (strcmp(sorted[y], sorted[x]) < 0) {
          const char *t = sorted[x];
          sorted[x] = sorted[y];
          sorted[y] = t;
        }
    size_t base = strlen(path);
    for (size_t x = 0; sorted && x < n && !found; x++) {
      snprintf(path + base, size - base, "%s%s", base ? "." : "", sorted[x]);
      found = first_difference(json_object_get(a, sorted[x]), json_object_get(b, sorted[x]), path, size);
      if (!found) path[base] = '\0';
    }
    ftl_free(sorted);
    json_decref(keys);
    return found;
  }
  if (json_is_array(a) && json_is_array(b) && json_array_size(a) == json_array_size(b)) {
    size_t base = strlen(path);
    for (size_t i = 0; i < json_array_size(a); i++) {
      snprintf(path + base, size - base, "[%zu]", i);
      if (first_difference(json_array_get(a, i), json_array_get(b, i), path, size)) return 1;
      path[base] = '\0';
    }
    return 0;
  }
  if (!a && !b) return 0;
  return !(a && b && json_equal((json_t *)(uintptr_t)a, (json_t *)(uintptr_t)b));
}

ftl_err ftl_gate_spec_compare(const json_t *locked, const json_t *given, char *field_out, size_t field_size,
                              ftl_diag *d) {
  char path[512] = "";
  if (!first_difference(locked, given, path, sizeof path)) return FTL_OK;
  /* Walk back to the values at that path for the message. */
  const json_t *a = locked, *b = given;
  char copy[512];
  snprintf(copy, sizeof copy, "%s", path);
  for (char *save = NULL, *tok = strtok_r(copy, ".", &save); tok; tok = strtok_r(NULL, ".", &save)) {
    char *br = strchr(tok, '[');
    if (br) *br = '\0';
    a = json_object_get(a, tok);
    b = json_object_get(b, tok);
    while (br) {
      size_t idx = strtoul(br + 1, NULL, 10);
      a = json_array_get(a, idx);
      b = json_array_get(b, idx);
      br = strchr(br + 1, '[');
    }
  }
  char va[256], vb[256];
  value_text(a, va, sizeof va);
  value_text(b, vb, sizeof vb);
  if (field_out) snprintf(field_out, field_size, "%s", path);
  return ftl_diag_fail(d, FTL_ERR_SPEC, "field '%s' differs from the gate locked at submission: locked %s, given %s",
                       path[0] ? path : "(the whole gate spec)", va, vb);
}

/* ---- hashing a folder --------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

ftl_err ftl_gate_hash_folder(const char *dir, json_t **files_out, char hex_out[65], ftl_diag *d) {
  DIR *dp = NULL;
  char **names = NULL;
  size_t n = 0, cap = 0;
  json_t *files = json_array();
  ftl_err rc = FTL_OK;
  if (!files) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  dp = opendir(dir);
  if (!dp) {
    rc = ftl_diag_fail(d, errno == ENOENT ? FTL_ERR_NOTFOUND : FTL_ERR_IO, "cannot list %s: %s", dir, strerror(errno));
    goto out;
  }
  struct dirent *e;
  while ((e = readdir(dp))) {
    char full[PATH_MAX];
    struct stat st;
    if (e->d_name[0] == '.' || ftl_fmt(full, sizeof full, "%s/%s", dir, e->d_name) || stat(full, &st) ||
        !S_ISREG(st.st_mode))
      continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      char **grown = ftl_realloc(names, cap * sizeof *grown);
      if (!grown) {
        rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
        goto out;
      }
      names = grown;
    }
    if (!(names[n] = ftl_strdup(e->d_name))) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
      goto out;
    }
    n++;
  }
  qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    char full[PATH_MAX], hex[FTL_SHA256_HEX_LEN + 1];
    uint64_t size = 0;
    if (ftl_fmt(full, sizeof full, "%s/%s", dir, names[i])) {
      rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
      goto out;
    }
    if ((rc = ftl_sha256_file(full, hex, &size, d))) goto out;
    json_array_append_new(files,
                          json_pack("{s:s, s:I, s:s}", "path", names[i], "size", (json_int_t)size, "sha256", hex));
  }
  char *text = ftl_snapshot_canonical(files);
  if (!text) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  rc = ftl_sha256_hex(text, strlen(text), hex_out);
  free(text);
  if (rc) goto out;
  *files_out = files;
  files = NULL;
out:
  if (dp) closedir(dp);
  for (size_t i = 0; i < n; i++)
    ftl_free(names[i]);
  ftl_free(names);
  json_decref(files);
  return rc;
}

/* ---- running the evaluator ---------------------------------------------------------------- */

typedef struct strv {
  char **v;
  size_t n, cap;
} strv;

static int strv_push(strv *s, char *owned) {
  if (!owned) return -1;
  if (s->n + 2 > s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    char **grown = ftl_realloc(s->v, cap * sizeof *grown);
    if (!grown) {
      ftl_free(owned);
      return -1;
    }
    s->v = grown;
    s->cap = cap;
  }
  s->v[s->n++] = owned;
  s->v[s->n] = NULL;
  return 0;
}

static int strv_pushf(strv *s, const char *name, const char *value) {
  size_t len = strlen(name) + strlen(value) + 2;
  char *kv = ftl_malloc(len);
  if (!kv) return -1;
  snprintf(kv, len, "%s=%s", name, value);
  return strv_push(s, kv);
}

static void strv_free(strv *s) {
  for (size_t i = 0; i < s->n; i++)
    ftl_free(s->v[i]);
  ftl_free(s->v);
  memset(s, 0, sizeof *s);
}

/* What the evaluator may see of ftl's own environment, by name. */
static const char *const passed_through[] = {"PATH",         "HOME",          "TMPDIR",       "LD_LIBRARY_PATH",
                                             "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"};

static void iso_now(char out[40]) {
  int64_t us = ftl_wall_us();
  time_t t = (time_t)(us / 1000000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char base[32];
  strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, 40, "%s.%03dZ", base, (int)(us / 1000 % 1000));
}

typedef struct eval_run {
  int exit_code; /* -1 when killed by a signal */
  int signal;
  double wall_s;
} eval_run;

static volatile sig_atomic_t stop_signal;
static void on_stop_signal(int sig) { stop_signal = sig; }

/* fork + execve with its own process group, stdout/stderr to files, and a deadline: at the deadline
 * the group gets SIGTERM, then SIGKILL 2 s later. FTL_ERR_TIMEOUT when the deadline passed. The
 * evaluator's own process group does not get the terminal's SIGINT, so a SIGINT/SIGTERM/SIGHUP to
 * ftl while it waits is passed on the same way (FTL_ERR_INTERRUPTED): no evaluator outlives ftl. */
static ftl_err spawn_wait(const char *prog, char *const *argv, char *const *envp, const char *out_path,
                          const char *err_path, int64_t timeout_ms, eval_run *r, ftl_diag *d) {
  int errpipe[2];
  if (pipe2(errpipe, O_CLOEXEC)) return ftl_diag_fail(d, FTL_ERR_IO, "pipe: %s", strerror(errno));
  int64_t t0 = ftl_clock_ms();
  pid_t pid = fork();
  if (pid < 0) {
    close(errpipe[0]);
    close(errpipe[1]);
    return ftl_diag_fail(d, FTL_ERR_IO, "fork: %s", strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);
    int in = open("/dev/null", O_RDONLY);
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in >= 0) dup2(in, 0);
    if (out >= 0) dup2(out, 1);
    if (err >= 0) dup2(err, 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(prog, argv, envp);
    int e = errno;
    if (write(errpipe[1], &e, sizeof e) < 0) _exit(127);
    _exit(127);
  }
  setpgid(pid, pid);
  close(errpipe[1]);
  int exec_errno = 0;
  ssize_t got;
  do
    got = read(errpipe[0], &exec_errno, sizeof exec_errno);
  while (got < 0 && errno == EINTR);
  close(errpipe[0]);
  int status = 0;
  if (got == (ssize_t)sizeof exec_errno) {
    waitpid(pid, &status, 0);
    return ftl_diag_fail(d, FTL_ERR_LAUNCH, "cannot start the evaluator %s: %s", prog, strerror(exec_errno));
  }
  int64_t deadline = ftl_deadline_after_ms(timeout_ms);
  int timed_out = 0;
  const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction sa = {.sa_handler = on_stop_signal}, old[3];
  sigemptyset(&sa.sa_mask);
  stop_signal = 0;
  for (int i = 0; i < 3; i++)
    sigaction(sigs[i], &sa, &old[i]);
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    if (stop_signal && !timed_out) {
      timed_out = -1;
      kill(-pid, SIGTERM);
      deadline = ftl_deadline_after_ms(2000);
    } else if (!timed_out && ftl_deadline_left_ms(deadline) == 0) {
      timed_out = 1;
      kill(-pid, SIGTERM);
      deadline = ftl_deadline_after_ms(2000);
    } else if (timed_out && ftl_deadline_left_ms(deadline) == 0) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  kill(-pid, SIGKILL); /* anything the evaluator left behind in its group */
  for (int i = 0; i < 3; i++)
    sigaction(sigs[i], &old[i], NULL);
  r->wall_s = (double)(ftl_clock_ms() - t0) / 1000.0;
  r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (timed_out < 0)
    return ftl_diag_fail(d, FTL_ERR_INTERRUPTED, "stopped by signal %d; the evaluator %s was ended", (int)stop_signal,
                         prog);
  if (timed_out) return FTL_ERR_TIMEOUT;
  return FTL_OK;
}

/* ---- the baseline ------------------------------------------------------------------------- */

typedef struct baseline {
  int present;
  char version[FTL_SHA256_HEX_LEN + 1];
  double value;
  ftl_metric_state state;
} baseline;

/* The adapter in registry/name@channel, and the value of `metric` in the verdict it was published
 * with. No version in that channel: not present (the first adapter has nothing to beat). */
static ftl_err find_baseline(const json_t *reg, const char *channel, const char *metric, baseline *b, ftl_diag *d) {
  memset(b, 0, sizeof *b);
  ftl_registry_ref ref = {.root = json_string_value(json_object_get(reg, "path"))};
  const char *name = json_string_value(json_object_get(reg, "name"));
  char spec[256], name_out[FTL_REGISTRY_NAME_MAX + 1], dir[PATH_MAX], vpath[PATH_MAX];
  ftl_diag ignored;
  snprintf(spec, sizeof spec, "%s@%s", name, channel);
  struct stat st;
  if (stat(ref.root, &st) != 0) return FTL_OK;
  ftl_err rc = ftl_registry_resolve(&ref, spec, name_out, b->version, &ignored);
  if (rc == FTL_ERR_NOTFOUND) return FTL_OK;
  if (rc) return ftl_diag_fail(d, rc, "baseline %s in %s: %s", spec, ref.root, ignored.msg);
  if ((rc = ftl_registry_adapter_dir(&ref, name_out, b->version, dir, sizeof dir, d))) return rc;
  char *data = NULL;
  size_t size = 0;
  json_t *v = NULL;
  if (ftl_fmt(vpath, sizeof vpath, "%s/verdict.json", dir))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
  if ((rc = ftl_read_file(vpath, FTL_VERDICT_MAX_BYTES, &data, &size, d))) return rc;
  rc = ftl_verdict_parse(data, size, &v, d);
  ftl_free(data);
  if (rc) return ftl_diag_fail(d, rc, "baseline %s: its verdict.json: %s", spec, d ? d->msg : "");
  b->present = 1;
  const char *m = json_string_value(json_object_get(v, "metric"));
  const json_t *val = json_object_get(v, "value");
  if (strcmp(m, metric) != 0 || !json_is_number(val)) {
    b->state = FTL_METRIC_MISSING;
  } else {
    b->value = json_number_value(val);
    b->state = FTL_METRIC_OK;
  }
  json_decref(v);
  return FTL_OK;
}

/* ---- verdicts ----------------------------------------------------------------------------- */

ftl_err ftl_verdict_write(const char *run_dir, const json_t *verdict, ftl_diag *d) {
  char path[PATH_MAX];
  if (ftl_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_VERDICT))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", run_dir);
  char *text = json_dumps(verdict, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  size_t n = strlen(text);
  text[n] = '\n';
  ftl_err rc = ftl_fs_write_atomic(path, text, n + 1, "verdict_write", -1, -1, d);
  free(text);
  return rc;
}

static int hex64(const json_t *v) { return json_is_string(v) && ftl_sha256_is_hex(json_string_value(v)); }
static int num_or_null(const json_t *v) { return json_is_null(v) || json_is_number(v); }

ftl_err ftl_verdict_parse(const char *data, size_t size, json_t **out, ftl_diag *d) {
  json_error_t jerr;
  ftl_err rc = FTL_OK;
  if (size > FTL_VERDICT_MAX_BYTES) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "verdict larger than 1 MiB");
  json_t *v = json_loadb(data, size, JSON_REJECT_DUPLICATES, &jerr);
  if (!v) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "verdict is not JSON: %s (line %d)", jerr.text, jerr.line);
#define BAD(...)                                                                                                       \
  do {                                                                                                                 \
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, __VA_ARGS__);                                                               \
    goto out;                                                                                                          \
  } while (0)
  if (!json_is_object(v)) BAD("verdict is not a JSON object");
  if ((rc = ftl_jsonl_check_version(v, FTL_VERDICT_VERSION, "verdict: ", d))) goto out;
  if (!json_is_boolean(json_object_get(v, "passed"))) BAD("verdict: 'passed' is not a boolean");
  static const char *const strings[] = {"metric", "direction", "value_state", "reason", "started_at", "ended_at"};
  for (size_t i = 0; i < sizeof strings / sizeof *strings; i++)
    if (!json_is_string(json_object_get(v, strings[i]))) BAD("verdict: '%s' is not a string", strings[i]);
  const char *dir = json_string_value(json_object_get(v, "direction"));
  if (strcmp(dir, "higher") && strcmp(dir, "lower")) BAD("verdict: 'direction' is neither higher nor lower");
  if (!json_is_number(json_object_get(v, "threshold"))) BAD("verdict: 'threshold' is not a number");
  if (!num_or_null(json_object_get(v, "value"))) BAD("verdict: 'value' is neither a number nor null");
  if (!num_or_null(json_object_get(v, "min_gain"))) BAD("verdict: 'min_gain' is neither a number nor null");
  if (!num_or_null(json_object_get(v, "gain"))) BAD("verdict: 'gain' is neither a number nor null");
  const json_t *b = json_object_get(v, "baseline");
  if (!json_is_null(b)) {
    if (!json_is_object(b) || !json_is_string(json_object_get(b, "channel")) || !hex64(json_object_get(b, "version")) ||
        !num_or_null(json_object_get(b, "value")))
      BAD("verdict: 'baseline' is neither null nor {channel, version, value}");
  }
  const json_t *dg = json_object_get(v, "digests");
  if (!json_is_object(dg)) BAD("verdict: 'digests' is not an object");
  static const char *const digests[] = {"adapter", "eval_data", "gate_spec", "snapshot"};
  for (size_t i = 0; i < sizeof digests / sizeof *digests; i++)
    if (!hex64(json_object_get(dg, digests[i]))) BAD("verdict: 'digests.%s' is not 64 hex digits", digests[i]);
  const json_t *files = json_object_get(dg, "adapter_files");
  if (!json_is_array(files)) BAD("verdict: 'digests.adapter_files' is not an array");
  for (size_t i = 0; i < json_array_size(files); i++) {
    const json_t *f = json_array_get(files, i);
    const char *p = json_string_value(json_object_get(f, "path"));
    if (!p || !p[0] || strchr(p, '/') || !hex64(json_object_get(f, "sha256")) ||
        !json_is_integer(json_object_get(f, "size")))
      BAD("verdict: 'digests.adapter_files[%zu]' is not {path, size, sha256}", i);
  }
#undef BAD
  *out = v;
  v = NULL;
out:
  json_decref(v);
  return rc;
}

ftl_err ftl_verdict_load(const char *run_dir, json_t **out, ftl_diag *d) {
  char path[PATH_MAX];
  char *data = NULL;
  size_t size = 0;
  if (ftl_rundir_path(path, sizeof path, run_dir, FTL_RUNDIR_VERDICT))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", run_dir);
  ftl_err rc = ftl_read_file(path, FTL_VERDICT_MAX_BYTES, &data, &size, d);
  if (rc) return rc;
  rc = ftl_verdict_parse(data, size, out, d);
  ftl_free(data);
  return rc;
}

void ftl_verdict_summary(const json_t *v, char *out, size_t size) {
  int passed = json_is_true(json_object_get(v, "passed"));
  const char *metric = json_string_value(json_object_get(v, "metric"));
  const char *dir = json_string_value(json_object_get(v, "direction"));
  double thr = json_number_value(json_object_get(v, "threshold"));
  const json_t *val = json_object_get(v, "value");
  const char *op = !strcmp(dir ? dir : "", "higher") ? ">=" : "<=";
  if (!json_is_number(val)) {
    snprintf(out, size, "gate %s: %s is %s (threshold %s %g)", passed ? "passed" : "FAILED", metric,
             json_string_value(json_object_get(v, "value_state")), op, thr);
    return;
  }
  int n = snprintf(out, size, "gate %s: %s %.6g (threshold %s %g", passed ? "passed" : "FAILED", metric,
                   json_number_value(val), op, thr);
  const json_t *gain = json_object_get(v, "gain");
  if (n > 0 && (size_t)n < size && json_is_number(gain))
    n += snprintf(out + n, size - (size_t)n, "; gain %+.6g over %s, at least %g", json_number_value(gain),
                  json_string_value(json_object_get(json_object_get(v, "baseline"), "channel")),
                  json_number_value(json_object_get(v, "min_gain")));
  if (n > 0 && (size_t)n < size) {
    const char *reason = json_string_value(json_object_get(v, "reason"));
    snprintf(out + n, size - (size_t)n, ")%s%s", passed || !reason || !reason[0] ? "" : ": ", passed ? "" : reason);
  }
}

/* ---- the gate ----------------------------------------------------------------------------- */

ftl_gate_result ftl_gate_run(const ftl_gate_opts *o, json_t **verdict_out, ftl_diag *d) {
  ftl_gate_result res = FTL_GATE_ERROR;
  json_t *snap = NULL, *verdict = NULL, *adapter_files = NULL, *base_json = NULL, *gain_json = NULL;
  ftl_metrics *metrics = NULL;
  char *prog = NULL;
  strv argv = {0}, envp = {0};
  char started[40], ended[40];
  char final_dir[PATH_MAX], gate_dir[PATH_MAX], metrics_path[PATH_MAX], out_path[PATH_MAX], err_path[PATH_MAX];
  char verdict_path[PATH_MAX], adapter_hex[FTL_SHA256_HEX_LEN + 1];
  iso_now(started);
  if (ftl_rundir_path(final_dir, sizeof final_dir, o->run_dir, FTL_RUNDIR_FINAL) ||
      ftl_rundir_path(gate_dir, sizeof gate_dir, o->run_dir, FTL_RUNDIR_GATE) ||
      ftl_rundir_path(verdict_path, sizeof verdict_path, o->run_dir, FTL_RUNDIR_VERDICT) ||
      ftl_fmt(metrics_path, sizeof metrics_path, "%s/metrics.json", gate_dir) ||
      ftl_fmt(out_path, sizeof out_path, "%s/eval.out", gate_dir) ||
      ftl_fmt(err_path, sizeof err_path, "%s/eval.err", gate_dir)) {
    ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", o->run_dir);
    goto out;
  }
  /* 1. The locked gate. */
  ftl_err rc = ftl_snapshot_load(o->run_dir, &snap, d);
  if (rc == FTL_ERR_NOTFOUND) {
    ftl_diag_fail(d, rc, "%s has no snapshot.json: it was not started by `ftl run` with a job spec", o->run_dir);
    goto out;
  }
  if (rc) goto out;
  const json_t *gate = ftl_snapshot_gate(snap);
  if (!gate) {
    ftl_diag_fail(d, FTL_ERR_STATE, "%s was submitted without an eval: section; there is no gate to run", o->run_dir);
    goto out;
  }
  if (ftl_gate_spec_check(gate, d)) goto out;
  if (o->given_spec && ftl_gate_spec_compare(gate, o->given_spec, NULL, 0, d)) goto out;
  const json_t *ev = json_object_get(gate, "eval");
  const char *metric = json_string_value(json_object_get(ev, "metric"));
  const char *direction = json_string_value(json_object_get(ev, "direction"));
  int higher = !strcmp(direction, "higher");
  double threshold = json_number_value(json_object_get(ev, "threshold"));
  const json_t *min_gain = json_object_get(ev, "min_gain");
  const char *data_name = json_string_value(json_object_get(ev, "data"));
  const char *base_name = json_string_value(json_object_get(ev, "base"));
  const char *data_path = ftl_snapshot_input_path(snap, data_name);
  const char *base_path = base_name ? ftl_snapshot_input_path(snap, base_name) : "";
  if (!data_path || !base_path) {
    ftl_diag_fail(d, FTL_ERR_CORRUPT, "the snapshot has no input '%s' (eval.%s)", data_path ? base_name : data_name,
                  data_path ? "base" : "data");
    goto out;
  }

  /* 2. Every input as it was at submission. */
  if (ftl_snapshot_verify(snap, d)) goto out;
  /* 3. The adapter, committed. */
  if (ftl_adapter_commit_verify(final_dir, NULL, 0, d)) goto out;
  if (ftl_gate_hash_folder(final_dir, &adapter_files, adapter_hex, d)) goto out;

  /* 4. The evaluator. A verdict from an earlier gate must not outlive this one. */
  if (unlink(verdict_path) != 0 && errno != ENOENT) {
    ftl_diag_fail(d, FTL_ERR_IO, "cannot remove the old %s: %s", verdict_path, strerror(errno));
    goto out;
  }
  if (ftl_mkdir_p(gate_dir, d)) goto out;
  unlink(metrics_path);
  const char *program = json_string_value(json_object_get(ev, "program"));
  const char *path_env = getenv("PATH");
  if (ftl_gang_find_program(program, path_env, &prog, d)) {
    ftl_diag_prefix(d, FTL_ERR_LAUNCH, "field 'eval.program'");
    goto out;
  }
  ftl_gate_placeholders ph = {
      .adapter = final_dir, .data = data_path, .metrics = metrics_path, .base = base_path, .run_dir = o->run_dir};
  if (strv_push(&argv, ftl_strdup(prog))) goto oom;
  const json_t *args = json_object_get(ev, "args");
  for (size_t i = 0; i < json_array_size(args); i++) {
    char *x = NULL;
    if (ftl_gate_expand(json_string_value(json_array_get(args, i)), &ph, &x, d)) goto out;
    if (strv_push(&argv, x)) goto oom;
  }
  for (size_t i = 0; i < sizeof passed_through / sizeof *passed_through; i++) {
    const char *v = getenv(passed_through[i]);
    if (v && strv_pushf(&envp, passed_through[i], v)) goto oom;
  }
  char snap_path[PATH_MAX];
  ftl_rundir_path(snap_path, sizeof snap_path, o->run_dir, FTL_RUNDIR_SNAPSHOT);
  if (strv_pushf(&envp, "LC_ALL", "C") || strv_pushf(&envp, "FTL_SNAPSHOT", snap_path) ||
      strv_pushf(&envp, "FTL_RUN_DIR", o->run_dir) || strv_pushf(&envp, "FTL_GATE_ADAPTER", final_dir) ||
      strv_pushf(&envp, "FTL_GATE_DATA", data_path) || strv_pushf(&envp, "FTL_GATE_METRICS", metrics_path) ||
      strv_pushf(&envp, "FTL_GATE_BASE", base_path))
    goto oom;
  const json_t *inputs = json_object_get(snap, "inputs");
  for (size_t i = 0; i < json_array_size(inputs); i++) {
    const json_t *e = json_array_get(inputs, i);
    char name[160];
    ftl_snapshot_input_var(e, name, sizeof name);
    if (strv_pushf(&envp, name, json_string_value(json_object_get(e, "path")))) goto oom;
  }
  const char *key;
  json_t *val;
  json_object_foreach(json_object_get(ev, "env"), key,
                      val) if (strv_pushf(&envp, key, json_string_value(val))) goto oom;

  double timeout_s = json_number_value(json_object_get(ev, "timeout_s"));
  int64_t timeout_ms = (int64_t)(timeout_s * 1000.0 + 0.5);
  if (timeout_ms < 1) timeout_ms = 1;
  char deadline_text[32];
  snprintf(deadline_text, sizeof deadline_text, "%g s", timeout_s);
  if (!o->quiet) fprintf(stderr, "ftl gate: running the evaluator %s (deadline %s)\n", prog, deadline_text);
  eval_run er = {0};
  rc = spawn_wait(prog, argv.v, envp.v, out_path, err_path, timeout_ms, &er, d);
  if (rc == FTL_ERR_TIMEOUT) {
    ftl_diag_fail(d, FTL_ERR_TIMEOUT,
                  "the evaluator %s passed its deadline (eval.timeout_s = %g s) and was killed; its output: %s, %s",
                  prog, timeout_s, out_path, err_path);
    goto out;
  }
  if (rc) goto out;
  if (er.exit_code != 0) {
    char how[64];
    if (er.signal)
      snprintf(how, sizeof how, "was killed by signal %d", er.signal);
    else
      snprintf(how, sizeof how, "exited %d", er.exit_code);
    ftl_diag_fail(d, FTL_ERR_LAUNCH, "the evaluator %s %s; its output: %s, %s", prog, how, out_path, err_path);
    goto out;
  }
  /* 5. The metric. */
  if (ftl_metrics_load(metrics_path, &metrics, d)) goto out;
  double value = 0;
  ftl_metric_state st = ftl_metrics_get(metrics, metric, &value);
  char reason[PATH_MAX + 1024] = "";
  int passed = 0;
  if (st != FTL_METRIC_OK) {
    snprintf(reason, sizeof reason, "metric '%.200s' is %s in %.3000s", metric, ftl_metric_state_text(st),
             metrics_path);
  } else {
    passed = higher ? value >= threshold : value <= threshold;
    if (!passed)
      snprintf(reason, sizeof reason, "%.200s %.6g is %s the threshold %g", metric, value, higher ? "below" : "above",
               threshold);
  }
  if (st == FTL_METRIC_OK && json_is_number(min_gain)) {
    const json_t *reg = json_object_get(gate, "registry");
    const char *channel = json_string_value(json_object_get(ev, "baseline_channel"));
    baseline b;
    if (!json_is_object(reg) || !channel) {
      ftl_diag_fail(d, FTL_ERR_SPEC, "eval.min_gain needs a registry: section and a baseline channel");
      goto out;
    }
    if (find_baseline(reg, channel, metric, &b, d)) goto out;
    if (b.present) {
      base_json = json_pack("{s:s, s:s, s:o}", "channel", channel, "version", b.version, "value",
                            b.state == FTL_METRIC_OK ? json_real(b.value) : json_null());
      if (b.state != FTL_METRIC_OK) {
        if (passed)
          snprintf(reason, sizeof reason, "the baseline %.100s@%.100s has no value of %.200s to compare with",
                   json_string_value(json_object_get(reg, "name")), channel, metric);
        passed = 0;
      } else {
        double gain = higher ? value - b.value : b.value - value;
        gain_json = json_real(gain);
        if (gain < json_number_value(min_gain)) {
          if (passed)
            snprintf(reason, sizeof reason, "gain %+.6g over the %.100s adapter (%.6g) is less than eval.min_gain %g",
                     gain, channel, b.value, json_number_value(min_gain));
          passed = 0;
        }
      }
    }
  }
  /* 6. The verdict. */
  iso_now(ended);
  const char *gate_sha = ftl_snapshot_gate_sha256(snap);
  const char *data_sha = ftl_snapshot_input_sha256(snap, data_name);
  const char *base_sha = base_name ? ftl_snapshot_input_sha256(snap, base_name) : NULL;
  verdict =
      json_pack("{s:i, s:s, s:s, s:s, s:f, s:o, s:s, s:b, s:s, s:O, s:O, s:O,"
                " s:{s:s, s:o, s:s, s:s?, s:s, s:s}, s:{s:s, s:i, s:f}, s:s, s:s}",
                "version", FTL_VERDICT_VERSION, "run_dir", o->run_dir, "metric", metric, "direction", direction,
                "threshold", threshold, "value", st == FTL_METRIC_OK ? json_real(value) : json_null(), "value_state",
                st == FTL_METRIC_OK ? "ok" : ftl_metric_state_text(st), "passed", passed, "reason", reason, "min_gain",
                min_gain, "baseline", base_json ? base_json : json_null(), "gain", gain_json ? gain_json : json_null(),
                "digests", "adapter", adapter_hex, "adapter_files", adapter_files, "eval_data", data_sha, "base",
                base_sha, "gate_spec", gate_sha, "snapshot", ftl_snapshot_digest(snap), "evaluator", "program", prog,
                "exit_code", er.exit_code, "wall_s", er.wall_s, "started_at", started, "ended_at", ended);
  adapter_files = NULL; /* stolen by "o" */
  if (!verdict) goto oom;
  if (ftl_verdict_write(o->run_dir, verdict, d)) goto out;
  res = passed ? FTL_GATE_PASSED : FTL_GATE_FAILED;
  if (verdict_out) *verdict_out = json_incref(verdict);
  goto out;
oom:
  ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
out:
  json_decref(verdict);
  json_decref(adapter_files);
  json_decref(base_json);
  json_decref(gain_json);
  json_decref(snap);
  ftl_metrics_destroy(metrics);
  ftl_free(prog);
  strv_free(&argv);
  strv_free(&envp);
  return res;
}
