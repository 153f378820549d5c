/* launcher/slurm_alloc.c: the Slurm allocation as a host plan (see slurm_alloc.h): Slurm's hostlist
 * expanded, the tasks per node read, and srun's task layout for an attempt written.
 *
 * Strict, because both variables are outside bytes: a name holds letters, digits, '.', '-' and '_'
 * only; a range is digits; every refusal quotes the text at fault (ln_hostfile_quote). Bounded: a
 * name at most LN_SLURM_NAME_MAX bytes, at most MAX_GROUPS bracketed ranges in one name (Slurm's
 * multi-dimensional lists use a few), at most LN_SLURM_MAX_NODES nodes, checked as they are made,
 * so no input expands without end. */
#include "launcher/slurm_alloc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/proc.h"
#include "ftl/core.h"
#include "launcher/hostfile.h"

enum { MAX_GROUPS = 8 };
#define VAR_NODES "SLURM_JOB_NODELIST"
#define VAR_TASKS "SLURM_TASKS_PER_NODE"

typedef struct expansion {
  const char *var, *text; /* for messages */
  ln_slurm_node *nodes;
  size_t count, cap;
  ftl_diag *d;
  ftl_err rc;
} expansion;

/* Fails the expansion once (the first error is the one said), quoting the whole variable. Returns 0,
 * so that a caller may `return refuse(...)`. */
static int refuse(expansion *x, ftl_err rc, const char *why) {
  if (x->rc) return 0;
  char q[200];
  ln_hostfile_quote(x->text, strlen(x->text), q, sizeof q);
  x->rc = rc == FTL_ERR_NOMEM ? ftl_diag_fail(x->d, rc, "out of memory expanding %s", x->var)
                              : ftl_diag_fail(x->d, rc, "%s '%s': %s", x->var, q, why);
  return 0;
}

static int name_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' ||
         ch == '_';
}

static int push_name(expansion *x, const char *name, size_t len) {
  if (x->rc) return 0;
  if (len == 0) return refuse(x, FTL_ERR_SPEC, "an empty node name");
  for (size_t i = 0; i < len; i++)
    if (!name_char(name[i])) return refuse(x, FTL_ERR_SPEC, "a node name holds a character other than a letter, a digit, '.', '-' or '_'");
  if (x->count >= LN_SLURM_MAX_NODES) {
    char why[96];
    snprintf(why, sizeof why, "names more than %d nodes", LN_SLURM_MAX_NODES);
    return refuse(x, FTL_ERR_SPEC, why);
  }
  if (x->count == x->cap) {
    size_t ncap = x->cap ? x->cap * 2 : 16;
    ln_slurm_node *nv = ftl_realloc(x->nodes, ncap * sizeof *nv);
    if (!nv) return refuse(x, FTL_ERR_NOMEM, "");
    x->nodes = nv;
    x->cap = ncap;
  }
  ln_slurm_node *n = &x->nodes[x->count++];
  memcpy(n->name, name, len);
  n->name[len] = '\0';
  n->tasks = 0;
  return 0;
}

/* A run of digits [s, s+len) as a number (at most 9 digits); -1 when it is not one. */
static long digits(const char *s, size_t len) {
  if (len == 0 || len > 9) return -1;
  long v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

/* Expands rest (len bytes) after the name's first prefix_len bytes, already in name; groups: the
 * bracketed ranges met so far. */
static int expand(expansion *x, char *name, size_t prefix_len, const char *rest, size_t len, int groups) {
  const char *open = memchr(rest, '[', len);
  size_t head = open ? (size_t)(open - rest) : len;
  if (prefix_len + head > LN_SLURM_NAME_MAX) return refuse(x, FTL_ERR_SPEC, "a node name longer than 255 bytes");
  memcpy(name + prefix_len, rest, head);
  if (!open) return push_name(x, name, prefix_len + head);
  if (++groups > MAX_GROUPS) return refuse(x, FTL_ERR_SPEC, "more than 8 bracketed ranges in one node name");
  const char *inner = open + 1;
  const char *close = memchr(inner, ']', len - head - 1);
  if (!close) return refuse(x, FTL_ERR_SPEC, "a '[' without its ']'");
  const char *after = close + 1;
  size_t after_len = len - (size_t)(after - rest);
  for (const char *r = inner; r < close && !x->rc;) {
    const char *comma = memchr(r, ',', (size_t)(close - r));
    const char *end = comma ? comma : close;
    const char *dash = memchr(r, '-', (size_t)(end - r));
    size_t lo_len = dash ? (size_t)(dash - r) : (size_t)(end - r);
    long lo = digits(r, lo_len), hi = dash ? digits(dash + 1, (size_t)(end - dash - 1)) : lo;
    if (lo < 0 || hi < 0) return refuse(x, FTL_ERR_SPEC, "a range in brackets is not N or N-M (up to 9 digits each)");
    if (hi < lo) return refuse(x, FTL_ERR_SPEC, "a range in brackets ends before it starts");
    for (long v = lo; v <= hi && !x->rc; v++) {
      char num[16];
      int w = snprintf(num, sizeof num, "%0*ld", (int)lo_len, v);
      size_t at = prefix_len + head;
      if (at + (size_t)w > LN_SLURM_NAME_MAX) return refuse(x, FTL_ERR_SPEC, "a node name longer than 255 bytes");
      memcpy(name + at, num, (size_t)w);
      expand(x, name, at + (size_t)w, after, after_len, groups);
    }
    r = comma ? comma + 1 : close;
    if (comma && r == close) return refuse(x, FTL_ERR_SPEC, "a range in brackets is not N or N-M (up to 9 digits each)");
  }
  return inner == close ? refuse(x, FTL_ERR_SPEC, "empty brackets") : 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp((*(ln_slurm_node *const *)a)->name, (*(ln_slurm_node *const *)b)->name);
}

/* Refuses a node named twice (sorted pointers: a list of many nodes stays n log n). */
static int refuse_duplicates(expansion *x) {
  if (x->rc || x->count < 2) return 0;
  ln_slurm_node **by = ftl_malloc(x->count * sizeof *by);
  if (!by) return refuse(x, FTL_ERR_NOMEM, "");
  for (size_t i = 0; i < x->count; i++) by[i] = &x->nodes[i];
  qsort(by, x->count, sizeof *by, by_name);
  for (size_t i = 1; i < x->count; i++)
    if (!strcmp(by[i - 1]->name, by[i]->name)) {
      char why[LN_SLURM_NAME_MAX + 40];
      snprintf(why, sizeof why, "names node %s twice", by[i]->name);
      refuse(x, FTL_ERR_SPEC, why);
      break;
    }
  ftl_free(by);
  return 0;
}

/* One item of tasks per node at *p: "N" or "N(xM)" and its comma; 0 at the end of the text, -1
 * when the text is not Slurm's. */
static int next_tasks(const char **p, long *count, long *repeat) {
  const char *s = *p;
  if (!*s) return 0;
  size_t n = strspn(s, "0123456789");
  *count = digits(s, n);
  *repeat = 1;
  s += n;
  if (*count < 0) return -1;
  if (!strncmp(s, "(x", 2)) {
    size_t m = strspn(s + 2, "0123456789");
    *repeat = digits(s + 2, m);
    if (*repeat < 1 || s[2 + m] != ')') return -1;
    s += 3 + m;
  }
  if (*s == ',' && s[1]) s++;
  else if (*s) return -1;
  *p = s;
  return 1;
}

int ln_slurm_tasks_on_node(const char *tasks_per_node, int node_id) {
  const char *p = tasks_per_node ? tasks_per_node : "";
  long count, repeat, node = 0;
  int r;
  while ((r = next_tasks(&p, &count, &repeat)) > 0) {
    if (node_id < node + repeat) return node_id >= 0 ? (int)count : -1;
    node += repeat;
  }
  return -1;
}

/* Gives each node its count from tasks_per_node, which must cover every node, no more. */
static void assign_tasks(expansion *x, const char *tasks_per_node) {
  if (x->rc) return;
  expansion t = {.var = VAR_TASKS, .text = tasks_per_node, .d = x->d};
  const char *p = tasks_per_node;
  long count, repeat;
  size_t covered = 0;
  int r;
  while ((r = next_tasks(&p, &count, &repeat)) > 0) {
    if (count < 1 || count > FTL_HOSTFILE_SLOTS_MAX) {
      refuse(&t, FTL_ERR_SPEC, "a node's count of tasks is not from 1 to 1048576");
      break;
    }
    size_t from = covered;
    covered += (size_t)repeat;
    for (size_t i = from; i < covered && i < x->count; i++) x->nodes[i].tasks = (int)count;
  }
  if (r < 0) refuse(&t, FTL_ERR_SPEC, "expected counts such as 2(x3),1");
  if (!t.rc && covered != x->count) {
    char why[160];
    snprintf(why, sizeof why, "covers %zu node%s, but %s names %zu", covered, covered == 1 ? "" : "s", VAR_NODES,
             x->count);
    refuse(&t, FTL_ERR_SPEC, why);
  }
  x->rc = t.rc;
}

ftl_err ln_slurm_nodes_parse(const char *nodelist, const char *tasks_per_node, ln_slurm_node **nodes_out,
                             size_t *count_out, ftl_diag *d) {
  expansion x = {.var = VAR_NODES, .text = nodelist ? nodelist : "", .d = d};
  *nodes_out = NULL;
  *count_out = 0;
  size_t len = strnlen(x.text, LN_SLURM_VAR_MAX + 1);
  if (len > LN_SLURM_VAR_MAX) return ftl_diag_fail(d, FTL_ERR_SPEC, "%s is longer than %d bytes", VAR_NODES, LN_SLURM_VAR_MAX);
  if (!tasks_per_node || strnlen(tasks_per_node, LN_SLURM_VAR_MAX + 1) > LN_SLURM_VAR_MAX)
    return ftl_diag_fail(d, FTL_ERR_SPEC, "%s is %s", VAR_TASKS, tasks_per_node ? "too long" : "not set");
  if (len == 0) refuse(&x, FTL_ERR_SPEC, "names no node");
  char name[LN_SLURM_NAME_MAX + 1];
  /* Items are separated by commas outside brackets. */
  for (size_t i = 0, start = 0, depth = 0; i <= len && !x.rc; i++) {
    char ch = x.text[i];
    if (ch == '[') depth++;
    else if (ch == ']' && depth == 0) refuse(&x, FTL_ERR_SPEC, "a ']' without its '['");
    else if (ch == ']') depth--;
    if ((ch == ',' && depth == 0) || ch == '\0') {
      expand(&x, name, 0, x.text + start, i - start, 0);
      start = i + 1;
    }
  }
  refuse_duplicates(&x);
  assign_tasks(&x, tasks_per_node);
  if (x.rc) {
    ftl_free(x.nodes);
    return x.rc;
  }
  *nodes_out = x.nodes;
  *count_out = x.count;
  return FTL_OK;
}

ftl_err ln_slurm_alloc_from_env(ln_slurm_node **nodes_out, size_t *count_out, ftl_diag *d) {
  const char *list = getenv("SLURM_JOB_NODELIST");
  if (!list || !*list) list = getenv("SLURM_NODELIST");
  const char *tasks = getenv("SLURM_TASKS_PER_NODE");
  *nodes_out = NULL;
  *count_out = 0;
  if (!list || !*list || !tasks || !*tasks)
    return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "not inside a Slurm allocation (%s or %s is not set)", VAR_NODES, VAR_TASKS);
  return ln_slurm_nodes_parse(list, tasks, nodes_out, count_out, d);
}

ftl_err ln_slurm_write_tasks(const char *hostfile, int world, const char *tasks_path, int *nodes_out,
                             char *first_node, size_t size, ftl_diag *d) {
  ln_hostfile_host *hosts = NULL;
  size_t count = 0;
  char *text = NULL;
  size_t len = 0;
  ftl_err rc = ln_hostfile_read(hostfile, &hosts, &count, d);
  if (rc) return rc;
  FILE *mem = open_memstream(&text, &len);
  if (!mem) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  int left = world, nodes = 0;
  for (size_t i = 0; i < count && left > 0; i++, nodes++) {
    if (i == 0 && first_node && ftl_fmt(first_node, size, "%s", hosts[i].name)) {
      rc = ftl_diag_fail(d, FTL_ERR_SPEC, "host name too long in %s", hostfile);
      break;
    }
    for (int k = 0; k < hosts[i].slots && left > 0; k++, left--) fprintf(mem, "%s\n", hosts[i].name);
  }
  fclose(mem);
  if (rc) goto out;
  if (left > 0) {
    rc = ftl_diag_fail(d, FTL_ERR_SPEC, "the nodes of %s hold %d fewer slots than the attempt's %d ranks", hostfile,
                       left, world);
    goto out;
  }
  *nodes_out = nodes;
  rc = ftl_write_file_atomic(tasks_path, text, len, d);
out:
  free(text);
  ftl_free(hosts);
  return rc;
}

int ln_slurm_parse_job_state(const char *text, size_t len, char *state, size_t size) {
  static const char key[] = "JobState=";
  const size_t klen = sizeof key - 1;
  for (size_t i = 0; i + klen <= len; i++) {
    if ((i > 0 && text[i - 1] != ' ' && text[i - 1] != '\n') || memcmp(text + i, key, klen)) continue;
    size_t n = 0;
    const char *v = text + i + klen;
    while (i + klen + n < len && ((v[n] >= 'A' && v[n] <= 'Z') || v[n] == '_')) n++;
    if (n == 0 || n > 31 || n >= size) return -1;
    memcpy(state, v, n);
    state[n] = '\0';
    return 0;
  }
  return -1;
}

ftl_err ln_slurm_job_state(const char *job_id, int timeout_ms, char *state, size_t size, ftl_diag *d) {
  char a0[] = "scontrol", a1[] = "show", a2[] = "job", a3[] = "-o", id[32];
  if (ftl_fmt(id, sizeof id, "%s", job_id)) return ftl_diag_fail(d, FTL_ERR_INVAL, "not a Slurm job id: %.40s", job_id);
  char *argv[] = {a0, a1, a2, a3, id, NULL};
  static const int reset[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE};
  core_proc_opts po = {.file = "scontrol",
                       .argv = argv,
                       .search_path = 1,
                       .reset_signals = reset,
                       .n_reset_signals = sizeof reset / sizeof *reset,
                       .stdio = {{CORE_PROC_DEVNULL, -1}, {CORE_PROC_PIPE, -1}, {CORE_PROC_DEVNULL, -1}}};
  core_proc p = {.pid = -1, .fd = {-1, -1, -1}, .term_at_ms = FTL_NO_DEADLINE, .kill_at_ms = FTL_NO_DEADLINE};
  ftl_diag sd = {{0}};
  if (core_proc_spawn(&po, &p, &sd) != FTL_OK)
    return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "cannot run scontrol: %s", sd.msg);
  /* One job's line is a few kilobytes: it fits the pipe, so scontrol never blocks on it and is read
   * once it has exited (or been killed at the deadline). */
  core_proc_kill_at(&p, ftl_deadline_after_ms(timeout_ms));
  (void)core_proc_wait(&p, &sd);
  int killed = WIFSIGNALED(p.status) && WTERMSIG(p.status) == SIGKILL;
  char buf[16384];
  size_t len = 0;
  ssize_t n;
  while (len < sizeof buf && (n = read(p.fd[1], buf + len, sizeof buf - len)) > 0) len += (size_t)n;
  core_proc_close(&p);
  if (killed) return ftl_diag_fail(d, FTL_ERR_TIMEOUT, "scontrol show job %s did not answer within %d ms", job_id, timeout_ms);
  if (ln_slurm_parse_job_state(buf, len, state, size))
    return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "scontrol show job %s names no JobState", job_id);
  return FTL_OK;
}
