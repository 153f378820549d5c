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
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
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
#include "pipeline/gate_lock.h"
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

/* What is kept of each of the evaluator's output streams; the rest is counted and dropped (an
 * evaluator printing without end must not fill the run directory's disk). */
#define EVAL_OUTPUT_KEEP_BYTES (1u << 20)
/* How long the sweep of the evaluator's leftover processes may take. */
#define SWEEP_MS 5000

typedef struct eval_run {
  int exit_code; /* -1 when killed by a signal */
  int signal;
  double wall_s;
  uint64_t out_bytes, err_bytes; /* everything the evaluator wrote, kept or not */
  int out_cut, err_cut;          /* more than EVAL_OUTPUT_KEEP_BYTES: the file ends with a note */
  int strays;                    /* processes it left behind that the gate ended */
} eval_run;

static volatile sig_atomic_t stop_signal;
static void on_stop_signal(int sig) { stop_signal = sig; }

/* One output stream: a pipe from the evaluator into a file, capped. */
typedef struct sink {
  int pipe_fd; /* read end, non-blocking; -1 at EOF */
  int file_fd;
  uint64_t total;
  int cut;
} sink;

static void sink_drain(sink *s) {
  char buf[65536];
  while (s->pipe_fd >= 0) {
    ssize_t got = read(s->pipe_fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return; /* EAGAIN: nothing more for now */
    if (got == 0) {
      close(s->pipe_fd);
      s->pipe_fd = -1;
      return;
    }
    uint64_t room = s->total < EVAL_OUTPUT_KEEP_BYTES ? EVAL_OUTPUT_KEEP_BYTES - s->total : 0;
    size_t keep = (uint64_t)got < room ? (size_t)got : (size_t)room;
    if (keep && s->file_fd >= 0 && ftl_fs_pwrite_all(s->file_fd, buf, keep, s->total) != FTL_OK) {
      close(s->file_fd);
      s->file_fd = -1;
    }
    if ((size_t)got > keep) s->cut = 1;
    s->total += (uint64_t)got;
  }
}

static void sink_close(sink *s) {
  if (s->pipe_fd >= 0) close(s->pipe_fd);
  if (s->file_fd >= 0) {
    if (s->cut) {
      char note[160];
      int n = snprintf(note, sizeof note, "\n[ftl gate: output cut at %u bytes; %" PRIu64 " bytes were written]\n",
                       EVAL_OUTPUT_KEEP_BYTES, s->total);
      if (n > 0) (void)ftl_fs_pwrite_all(s->file_fd, note, (size_t)n, EVAL_OUTPUT_KEEP_BYTES);
    }
    close(s->file_fd);
  }
  s->pipe_fd = s->file_fd = -1;
}

/* The processes whose parent is this one, from /proc (up to cap). */
static size_t list_children(pid_t *out, size_t cap) {
  size_t n = 0;
  pid_t self = getpid();
  DIR *dp = opendir("/proc");
  if (!dp) return 0;
  struct dirent *e;
  while ((e = readdir(dp)) && n < cap) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%.20s/stat", e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0) continue;
    buf[got] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse after the last ')'. */
    const char *rp = strrchr(buf, ')');
    char state;
    int ppid;
    if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == (int)self)
      out[n++] = (pid_t)strtol(e->d_name, NULL, 10);
  }
  closedir(dp);
  return n;
}

static int pid_in(pid_t p, const pid_t *set, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (set[i] == p) return 1;
  return 0;
}

/* Ends every process the evaluator left behind. The gate is a child subreaper while the evaluator
 * runs, so a descendant that escaped its process group (setsid, a double fork) is re-parented to
 * this process when its parent dies: kill and reap every child that was not there before, until
 * none is left (each kill may re-parent that one's own children here). Returns how many. */
static int sweep_strays(const pid_t *before, size_t n_before) {
  int killed = 0;
  int64_t deadline = ftl_deadline_after_ms(SWEEP_MS);
  for (;;) {
    pid_t kids[256];
    size_t n = list_children(kids, sizeof kids / sizeof *kids), found = 0;
    for (size_t i = 0; i < n; i++) {
      if (pid_in(kids[i], before, n_before)) continue;
      found++;
      kill(kids[i], SIGKILL);
      if (waitpid(kids[i], NULL, 0) == kids[i]) killed++;
    }
    if (!found || ftl_deadline_left_ms(deadline) == 0) break;
  }
  return killed;
}

/* fork + execve with its own process group, stdout/stderr through capped pipes into files, and a
 * deadline: at the deadline the group gets SIGTERM, then SIGKILL 2 s later. FTL_ERR_TIMEOUT when
 * the deadline passed. The evaluator's own process group does not get the terminal's SIGINT, so a
 * SIGINT/SIGTERM/SIGHUP to ftl while it waits is passed on the same way (FTL_ERR_INTERRUPTED).
 * Whatever way it ends, every process it started is ended too (sweep_strays): no evaluator or
 * child of one outlives the gate. */
static ftl_err spawn_wait(const char *prog, char *const *argv, char *const *envp, const char *out_path,
                          const char *err_path, int64_t timeout_ms, eval_run *r, ftl_diag *d) {
  int errpipe[2] = {-1, -1}, outpipe[2] = {-1, -1}, errout[2] = {-1, -1};
  sink so = {-1, -1, 0, 0}, se = {-1, -1, 0, 0};
  pid_t before[256];
  size_t n_before = 0;
  int was_subreaper = -1; /* -1: not asked yet, so nothing to restore */
  ftl_err rc = FTL_OK;
  if (pipe2(errpipe, O_CLOEXEC) || pipe2(outpipe, O_CLOEXEC) || pipe2(errout, O_CLOEXEC)) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "pipe: %s", strerror(errno));
    goto fail;
  }
  so.file_fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  se.file_fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (so.file_fd < 0 || se.file_fd < 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot create %s: %s", so.file_fd < 0 ? out_path : err_path, strerror(errno));
    goto fail;
  }
  if (prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper, 0, 0, 0) != 0) was_subreaper = 0;
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot become a child subreaper: %s", strerror(errno));
    goto fail;
  }
  n_before = list_children(before, sizeof before / sizeof *before);
  int64_t t0 = ftl_clock_ms();
  pid_t pid = fork();
  if (pid < 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "fork: %s", strerror(errno));
    goto fail;
  }
  if (pid == 0) {
    setpgid(0, 0);
    int in = open("/dev/null", O_RDONLY);
    if (in >= 0) dup2(in, 0);
    dup2(outpipe[1], 1);
    dup2(errout[1], 2);
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
  close(outpipe[1]);
  close(errout[1]);
  errpipe[1] = outpipe[1] = errout[1] = -1;
  so.pipe_fd = outpipe[0];
  se.pipe_fd = errout[0];
  outpipe[0] = errout[0] = -1;
  fcntl(so.pipe_fd, F_SETFL, fcntl(so.pipe_fd, F_GETFL) | O_NONBLOCK);
  fcntl(se.pipe_fd, F_SETFL, fcntl(se.pipe_fd, F_GETFL) | O_NONBLOCK);
  int exec_errno = 0;
  ssize_t got;
  do
    got = read(errpipe[0], &exec_errno, sizeof exec_errno);
  while (got < 0 && errno == EINTR);
  close(errpipe[0]);
  errpipe[0] = -1;
  int status = 0;
  if (got == (ssize_t)sizeof exec_errno) {
    waitpid(pid, &status, 0);
    rc = ftl_diag_fail(d, FTL_ERR_LAUNCH, "cannot start the evaluator %s: %s", prog, strerror(exec_errno));
    goto fail;
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
    sink_drain(&so);
    sink_drain(&se);
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
    struct pollfd pf[2] = {{.fd = so.pipe_fd, .events = POLLIN}, {.fd = se.pipe_fd, .events = POLLIN}};
    if (poll(pf, 2, 10) < 0 && errno != EINTR) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  kill(-pid, SIGKILL); /* anything the evaluator left behind in its group */
  r->strays = sweep_strays(before, n_before);
  /* Every writer is gone now; what is still in the pipes is read, with a deadline all the same. */
  int64_t drain_deadline = ftl_deadline_after_ms(1000);
  while ((so.pipe_fd >= 0 || se.pipe_fd >= 0) && ftl_deadline_left_ms(drain_deadline) > 0) {
    struct pollfd pf[2] = {{.fd = so.pipe_fd, .events = POLLIN}, {.fd = se.pipe_fd, .events = POLLIN}};
    poll(pf, 2, 10);
    sink_drain(&so);
    sink_drain(&se);
  }
  for (int i = 0; i < 3; i++)
    sigaction(sigs[i], &old[i], NULL);
  r->wall_s = (double)(ftl_clock_ms() - t0) / 1000.0;
  r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  r->out_bytes = so.total;
  r->err_bytes = se.total;
  r->out_cut = so.cut;
  r->err_cut = se.cut;
  if (timed_out < 0)
    rc = ftl_diag_fail(d, FTL_ERR_INTERRUPTED, "stopped by signal %d; the evaluator %s was ended", (int)stop_signal,
                       prog);
  else if (timed_out)
    rc = FTL_ERR_TIMEOUT;
fail:
  if (was_subreaper == 0) prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
  for (int i = 0; i < 2; i++) {
    if (errpipe[i] >= 0) close(errpipe[i]);
    if (outpipe[i] >= 0) close(outpipe[i]);
    if (errout[i] >= 0) close(errout[i]);
  }
  sink_close(&so);
  sink_close(&se);
  return rc;
}

/* ---- the baseline ------------------------------------------------------------------------- */

ftl_err ftl_gate_find_baseline(const json_t *gate, ftl_gate_baseline *b, ftl_diag *d) {
  memset(b, 0, sizeof *b);
  const json_t *reg = json_object_get(gate, "registry");
  const json_t *ev = json_object_get(gate, "eval");
  const char *channel = json_string_value(json_object_get(ev, "baseline_channel"));
  const char *metric = json_string_value(json_object_get(ev, "metric"));
  if (!json_is_object(reg) || !channel)
    return ftl_diag_fail(d, FTL_ERR_SPEC, "eval.min_gain needs a registry: section and a baseline channel");
  ftl_registry_ref ref = {.root = json_string_value(json_object_get(reg, "path"))};
  const char *name = json_string_value(json_object_get(reg, "name"));
  char spec[256], name_out[FTL_REGISTRY_NAME_MAX + 1], dir[PATH_MAX], vpath[PATH_MAX], ptr[PATH_MAX];
  snprintf(b->channel, sizeof b->channel, "%s", channel);
  snprintf(spec, sizeof spec, "%s@%s", name, channel);
  /* A registry root that is not there is an unmounted or mistyped file system, not "no
   * baseline": passing on the threshold alone there would skip min_gain silently. */
  struct stat st;
  int gone = !ref.root || stat(ref.root, &st) != 0;
  if (gone || !S_ISDIR(st.st_mode))
    return ftl_diag_fail(d, FTL_ERR_IO, "the baseline %s: the registry %s is not there (%s); min_gain cannot be checked",
                         spec, ref.root ? ref.root : "(none)", gone ? strerror(errno) : "not a folder");
  /* Only an absent channel pointer is "no baseline" (the adapter's first publish). A pointer that
   * names a version that is gone is an error. */
  if (ftl_fmt(ptr, sizeof ptr, "%s/%s/channels/%s.json", ref.root, name, channel))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long under %s", ref.root);
  if (lstat(ptr, &st) != 0) {
    if (errno == ENOENT) return FTL_OK;
    return ftl_diag_fail(d, FTL_ERR_IO, "the baseline %s: %s: %s", spec, ptr, strerror(errno));
  }
  ftl_diag inner = {{0}};
  ftl_err rc = ftl_registry_resolve(&ref, spec, name_out, b->version, &inner);
  if (rc)
    return ftl_diag_fail(d, rc == FTL_ERR_NOTFOUND ? FTL_ERR_CORRUPT : rc,
                         "the baseline %s in %s does not resolve (%s); min_gain cannot be checked against it", spec,
                         ref.root, inner.msg);
  if ((rc = ftl_registry_adapter_dir(&ref, name_out, b->version, dir, sizeof dir, &inner)))
    return ftl_diag_fail(d, rc == FTL_ERR_NOTFOUND ? FTL_ERR_CORRUPT : rc, "the baseline %s (version %.12s): %s",
                         spec, b->version, inner.msg);
  char *data = NULL;
  size_t size = 0;
  json_t *v = NULL;
  if (ftl_fmt(vpath, sizeof vpath, "%s/verdict.json", dir))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir);
  if ((rc = ftl_snapshot_read_regular(vpath, FTL_VERDICT_MAX_BYTES, 1, &data, &size, &inner)))
    return ftl_diag_fail(d, rc == FTL_ERR_NOTFOUND ? FTL_ERR_CORRUPT : rc, "the baseline %s: %s", spec, inner.msg);
  rc = ftl_verdict_parse(data, size, &v, &inner);
  ftl_free(data);
  if (rc) return ftl_diag_fail(d, rc, "the baseline %s: its verdict.json: %s", spec, inner.msg);
  b->present = 1;
  const char *m = json_string_value(json_object_get(v, "metric"));
  const json_t *val = json_object_get(v, "value");
  if (strcmp(m, metric) == 0 && json_is_number(val) && isfinite(json_number_value(val))) {
    b->value = json_number_value(val);
    b->has_value = 1;
  }
  json_decref(v);
  return FTL_OK;
}

int ftl_gate_decide(const json_t *gate, int value_ok, double value, const ftl_gate_baseline *b, double *gain_out,
                    int *has_gain, char *reason, size_t reason_size) {
  const json_t *ev = json_object_get(gate, "eval");
  const char *metric = json_string_value(json_object_get(ev, "metric"));
  int higher = !strcmp(json_string_value(json_object_get(ev, "direction")), "higher");
  double threshold = json_number_value(json_object_get(ev, "threshold"));
  const json_t *min_gain = json_object_get(ev, "min_gain");
  *has_gain = 0;
  reason[0] = '\0';
  if (!value_ok) {
    snprintf(reason, reason_size, "metric '%.200s' has no finite value", metric);
    return 0;
  }
  int passed = higher ? value >= threshold : value <= threshold;
  if (!passed)
    snprintf(reason, reason_size, "%.200s %.6g is %s the threshold %g", metric, value, higher ? "below" : "above",
             threshold);
  if (!json_is_number(min_gain) || !b || !b->present) return passed;
  if (!b->has_value) {
    if (passed)
      snprintf(reason, reason_size, "the baseline in %.100s has no value of %.200s to compare with", b->channel,
               metric);
    return 0;
  }
  double gain = higher ? value - b->value : b->value - value;
  *gain_out = gain;
  *has_gain = 1;
  if (gain < json_number_value(min_gain)) {
    if (passed)
      snprintf(reason, reason_size, "gain %+.6g over the %.100s adapter (%.6g) is less than eval.min_gain %g", gain,
               b->channel, b->value, json_number_value(min_gain));
    return 0;
  }
  return passed;
}

/* ---- the registry's gate lock ------------------------------------------------------------- */

static ftl_err lock_mismatch(ftl_diag *d, const char *where, const char *field, const char *locked, const char *now) {
  return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                       "the run's snapshot does not match the gate locked in the registry (%s): field '%s': locked "
                       "%.200s, the run has %.200s",
                       where, field, locked ? locked : "(none)", now ? now : "(none)");
}

static int str_eq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

ftl_err ftl_gate_lock_check(const char *run_dir, const json_t *snap, json_t **lock_out, ftl_diag *d) {
  *lock_out = NULL;
  const json_t *gate = ftl_snapshot_gate(snap);
  const json_t *reg = json_object_get(gate, "registry");
  if (!json_is_object(reg)) return FTL_OK;
  const char *run_id = ftl_snapshot_run_id(snap);
  if (!run_id)
    return ftl_diag_fail(d, FTL_ERR_STATE,
                         "the snapshot has no run_id: the run was submitted by an ftl that did not lock its gate in "
                         "the registry; submit it again");
  json_t *lock = NULL;
  char where[PATH_MAX];
  ftl_err rc = ftl_gate_lock_load(json_string_value(json_object_get(reg, "path")),
                                  json_string_value(json_object_get(reg, "name")), run_id, &lock, where, sizeof where, d);
  if (rc) return rc;
  char field[256], now_dir[PATH_MAX];
  const char *rd = realpath(run_dir, now_dir) ? now_dir : run_dir;
#define SAME(f, a, b)                                                                                                  \
  do {                                                                                                                 \
    if (!str_eq((a), (b))) {                                                                                           \
      rc = lock_mismatch(d, where, (f), (a), (b));                                                                     \
      goto out;                                                                                                        \
    }                                                                                                                  \
  } while (0)
#define LS(k) json_string_value(json_object_get(lock, (k)))
  SAME("run_id", LS("run_id"), run_id);
  SAME("run_dir", LS("run_dir"), rd);
  SAME("job", LS("job"), json_string_value(json_object_get(snap, "job")));
  SAME("job_spec_hash", LS("job_spec_hash"), json_string_value(json_object_get(snap, "job_spec_hash")));
  SAME("created_at", LS("submitted_at"), json_string_value(json_object_get(snap, "created_at")));
  ftl_diag inner;
  if (ftl_gate_spec_compare(json_object_get(lock, "gate"), gate, field, sizeof field, &inner)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "the run's snapshot does not match the gate locked in the registry (%s): %s",
                       where, inner.msg);
    goto out;
  }
  SAME("gate_sha256", LS("gate_sha256"), ftl_snapshot_gate_sha256(snap));
  const json_t *le = json_object_get(lock, "evaluator"), *se = ftl_snapshot_evaluator(snap);
  SAME("evaluator.path", json_string_value(json_object_get(le, "path")), json_string_value(json_object_get(se, "path")));
  SAME("evaluator.sha256", json_string_value(json_object_get(le, "sha256")),
       json_string_value(json_object_get(se, "sha256")));
  const json_t *ed = json_object_get(lock, "eval_data");
  SAME("eval_data.sha256", json_string_value(json_object_get(ed, "sha256")),
       ftl_snapshot_input_sha256(snap, json_string_value(json_object_get(ed, "input"))));
  const json_t *lb = json_object_get(lock, "base");
  if (json_is_object(lb))
    SAME("base.sha256", json_string_value(json_object_get(lb, "sha256")),
         ftl_snapshot_input_sha256(snap, json_string_value(json_object_get(lb, "input"))));
  const json_t *li = json_object_get(lock, "inputs"), *si = json_object_get(snap, "inputs");
  if (json_array_size(li) != json_array_size(si)) {
    char a[32], b[32];
    snprintf(a, sizeof a, "%zu inputs", json_array_size(li));
    snprintf(b, sizeof b, "%zu inputs", json_array_size(si));
    rc = lock_mismatch(d, where, "inputs", a, b);
    goto out;
  }
  for (size_t i = 0; i < json_array_size(li); i++) {
    const json_t *x = json_array_get(li, i), *y = json_array_get(si, i);
    static const char *const keys[] = {"name", "path", "sha256", "link"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
      const char *a = json_string_value(json_object_get(x, keys[k])), *b = json_string_value(json_object_get(y, keys[k]));
      if (!a && !b) continue;
      snprintf(field, sizeof field, "inputs[%zu].%s (input '%.64s')", i, keys[k],
               json_string_value(json_object_get(x, "name")));
      SAME(field, a, b);
    }
  }
  SAME("snapshot_digest", LS("snapshot_digest"), ftl_snapshot_digest(snap));
#undef LS
#undef SAME
  *lock_out = lock;
  lock = NULL;
out:
  json_decref(lock);
  return rc;
}

/* ---- the run directory's gate lock -------------------------------------------------------- */

ftl_err ftl_gate_rundir_lock(const char *run_dir, const char *what, int *fd_out, ftl_diag *d) {
  char dir[PATH_MAX], path[PATH_MAX];
  *fd_out = -1;
  if (ftl_rundir_path(dir, sizeof dir, run_dir, FTL_RUNDIR_GATE) || ftl_fmt(path, sizeof path, "%s/lock", dir))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", run_dir);
  ftl_err rc = ftl_mkdir_p(dir, d);
  if (rc) return rc;
  int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) return ftl_diag_fail(d, FTL_ERR_IO, "cannot open the gate's lock %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return ftl_diag_fail(d, FTL_ERR_IO, "the gate's lock %s is not a regular file", path);
  }
  int64_t timeout_ms = 30000;
  const char *env = getenv("FTL_GATE_LOCK_TIMEOUT_S");
  if (env && *env) {
    char *end = NULL;
    double v = strtod(env, &end);
    if (end == env || *end || !(v >= 0) || v > 86400) {
      close(fd);
      return ftl_diag_fail(d, FTL_ERR_SPEC, "FTL_GATE_LOCK_TIMEOUT_S=%s is not a number of seconds (0 to 86400)", env);
    }
    timeout_ms = (int64_t)(v * 1000.0 + 0.5);
  }
  int64_t deadline = ftl_deadline_after_ms(timeout_ms);
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot lock %s: %s", path, strerror(errno));
      close(fd);
      return rc;
    }
    if (ftl_deadline_left_ms(deadline) == 0) {
      /* The holder wrote who it is into the file when it took the lock. */
      char holder[256] = "";
      ssize_t got = pread(fd, holder, sizeof holder - 1, 0);
      holder[got > 0 ? got : 0] = '\0';
      holder[strcspn(holder, "\n")] = '\0';
      close(fd);
      return ftl_diag_fail(d, FTL_ERR_TIMEOUT,
                           "another gate or publish holds %s (%s) and did not finish within %.3g s "
                           "(FTL_GATE_LOCK_TIMEOUT_S)",
                           path, holder[0] ? holder : "holder unknown", (double)timeout_ms / 1000.0);
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  char who[256], when[40];
  iso_now(when);
  int n = snprintf(who, sizeof who, "%s: pid %ld on %s since %s\n", what, (long)getpid(), ftl_hostname(), when);
  if (ftruncate(fd, 0) == 0 && n > 0) (void)ftl_fs_pwrite_all(fd, who, (size_t)n, 0);
  *fd_out = fd;
  return FTL_OK;
}

void ftl_gate_rundir_unlock(int fd) {
  if (fd < 0) return;
  /* No stale holder for the next waiter to name; closing releases the flock. */
  if (ftruncate(fd, 0) != 0) {
    /* Nothing to do: the text is informative only. */
  }
  close(fd);
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
  ftl_err rc = ftl_snapshot_read_regular(path, FTL_VERDICT_MAX_BYTES, 1, &data, &size, d);
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
  json_t *snap = NULL, *verdict = NULL, *adapter_files = NULL, *base_json = NULL, *lock = NULL;
  ftl_metrics *metrics = NULL;
  char *prog = NULL;
  int run_lock = -1;
  strv argv = {0}, envp = {0};
  char started[40], ended[40];
  char final_dir[PATH_MAX], gate_dir[PATH_MAX], metrics_path[PATH_MAX], out_path[PATH_MAX], err_path[PATH_MAX];
  char verdict_path[PATH_MAX], adapter_hex[FTL_SHA256_HEX_LEN + 1], lock_where[PATH_MAX] = "";
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
  /* 0. One gate (or publish) per run directory at a time, and a verdict from an earlier gate must
   * not outlive this one whatever way it ends: removed before anything can fail. */
  if (ftl_gate_rundir_lock(o->run_dir, "ftl gate", &run_lock, d)) goto out;
  if (unlink(verdict_path) != 0 && errno != ENOENT) {
    ftl_diag_fail(d, FTL_ERR_IO, "cannot remove the old %s: %s", verdict_path, strerror(errno));
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
  /* The registry's copy of the lock is the one the job cannot rewrite. */
  if (ftl_gate_lock_check(o->run_dir, snap, &lock, d)) goto out;
  if (lock)
    snprintf(lock_where, sizeof lock_where, "%s/%s/gate-locks/%s.json",
             json_string_value(json_object_get(json_object_get(gate, "registry"), "path")),
             json_string_value(json_object_get(json_object_get(gate, "registry"), "name")), ftl_snapshot_run_id(snap));
  else if (!o->quiet)
    fprintf(stderr,
            "ftl gate: warning: no registry: section, so the gate is locked only in %s/snapshot.json; it is only "
            "as trustworthy as the run directory (whoever can write it can rewrite the gate)\n",
            o->run_dir);
  const json_t *ev = json_object_get(gate, "eval");
  const char *metric = json_string_value(json_object_get(ev, "metric"));
  const char *direction = json_string_value(json_object_get(ev, "direction"));
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
  const json_t *pinned = ftl_snapshot_evaluator(snap);
  if (!pinned) {
    ftl_diag_fail(d, FTL_ERR_STATE,
                  "the snapshot does not pin the evaluator (submitted by an older ftl, which looked eval.program up on "
                  "PATH when the gate ran); submit the run again");
    goto out;
  }

  /* 2. Every input as it was at submission. */
  if (ftl_snapshot_verify(snap, d)) goto out;
  /* 3. The adapter, committed. */
  if (ftl_adapter_commit_verify(final_dir, NULL, 0, d)) goto out;
  if (ftl_gate_hash_folder(final_dir, &adapter_files, adapter_hex, d)) goto out;

  /* 4. The evaluator: the file resolved at submission, by its absolute path, with the bytes
   * that were hashed then (not whatever PATH finds now). */
  if (ftl_mkdir_p(gate_dir, d)) goto out;
  unlink(metrics_path);
  if (!(prog = ftl_strdup(json_string_value(json_object_get(pinned, "path"))))) goto oom;
  {
    char now_hex[65];
    uint64_t now_size = 0;
    ftl_diag inner;
    if ((rc = ftl_snapshot_hash_file(prog, now_hex, &now_size, &inner))) {
      ftl_diag_fail(d, rc == FTL_ERR_NOTFOUND ? FTL_ERR_CORRUPT : rc,
                    "the evaluator %s (field 'evaluator.path') cannot be checked: %s", prog, inner.msg);
      goto out;
    }
    const char *want = json_string_value(json_object_get(pinned, "sha256"));
    if (strcmp(now_hex, want) != 0) {
      ftl_diag_fail(d, FTL_ERR_CORRUPT,
                    "the evaluator %s changed after submission (field 'evaluator.sha256'): sha256 %.12s... at "
                    "submission, %.12s... now; refused",
                    prog, want, now_hex);
      goto out;
    }
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
  if (!o->quiet && er.strays)
    fprintf(stderr, "ftl gate: ended %d process%s the evaluator left behind\n", er.strays, er.strays == 1 ? "" : "es");
  if (!o->quiet && (er.out_cut || er.err_cut))
    fprintf(stderr, "ftl gate: the evaluator's %s%s%s was cut at %u bytes (%s%s%s)\n", er.out_cut ? "stdout" : "",
            er.out_cut && er.err_cut ? " and " : "", er.err_cut ? "stderr" : "", EVAL_OUTPUT_KEEP_BYTES,
            er.out_cut ? out_path : "", er.out_cut && er.err_cut ? ", " : "", er.err_cut ? err_path : "");
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
  ftl_gate_baseline b = {0};
  if (st == FTL_METRIC_OK && json_is_number(min_gain)) {
    if (ftl_gate_find_baseline(gate, &b, d)) goto out;
    if (b.present)
      base_json = json_pack("{s:s, s:s, s:o}", "channel", b.channel, "version", b.version, "value",
                            b.has_value ? json_real(b.value) : json_null());
  }
  double gain = 0;
  int has_gain = 0;
  int passed = ftl_gate_decide(gate, st == FTL_METRIC_OK, value, &b, &gain, &has_gain, reason, sizeof reason);
  if (st != FTL_METRIC_OK)
    snprintf(reason, sizeof reason, "metric '%.200s' is %s in %.3000s", metric, ftl_metric_state_text(st),
             metrics_path);
  /* 6. The verdict. */
  iso_now(ended);
  const char *gate_sha = ftl_snapshot_gate_sha256(snap);
  const char *data_sha = ftl_snapshot_input_sha256(snap, data_name);
  const char *base_sha = base_name ? ftl_snapshot_input_sha256(snap, base_name) : NULL;
  verdict = json_pack(
      "{s:i, s:s, s:s, s:s, s:f, s:o, s:s, s:b, s:s, s:O, s:O, s:o,"
      " s:{s:s, s:o, s:s, s:s?, s:s, s:s}, s:{s:s, s:s, s:i, s:f, s:I, s:I, s:b, s:i}, s:s, s:s, s:s?}",
      "version", FTL_VERDICT_VERSION, "run_dir", o->run_dir, "metric", metric, "direction", direction, "threshold",
      threshold, "value", st == FTL_METRIC_OK ? json_real(value) : json_null(), "value_state",
      st == FTL_METRIC_OK ? "ok" : ftl_metric_state_text(st), "passed", passed, "reason", reason, "min_gain", min_gain,
      "baseline", base_json ? base_json : json_null(), "gain", has_gain ? json_real(gain) : json_null(), "digests",
      "adapter", adapter_hex, "adapter_files", adapter_files, "eval_data", data_sha, "base", base_sha, "gate_spec",
      gate_sha, "snapshot", ftl_snapshot_digest(snap), "evaluator", "program", prog, "sha256",
      json_string_value(json_object_get(pinned, "sha256")), "exit_code", er.exit_code, "wall_s", er.wall_s,
      "stdout_bytes", (json_int_t)er.out_bytes, "stderr_bytes", (json_int_t)er.err_bytes, "output_cut",
      er.out_cut || er.err_cut, "strays_ended", er.strays, "started_at", started, "ended_at", ended, "gate_lock",
      lock ? lock_where : NULL);
  adapter_files = NULL; /* stolen by "o" */
  if (!verdict) goto oom;
  if (ftl_verdict_write(o->run_dir, verdict, d)) goto out;
  res = passed ? FTL_GATE_PASSED : FTL_GATE_FAILED;
  if (verdict_out) *verdict_out = json_incref(verdict);
  goto out;
oom:
  ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
out:
  ftl_gate_rundir_unlock(run_lock);
  json_decref(verdict);
  json_decref(adapter_files);
  json_decref(base_json);
  json_decref(lock);
  json_decref(snap);
  ftl_metrics_destroy(metrics);
  ftl_free(prog);
  strv_free(&argv);
  strv_free(&envp);
  return res;
}
