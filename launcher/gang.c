/* launcher/gang.c: the mpirun / srun command line of an attempt, and program lookup. */
#include "launcher/gang.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftl/core.h"

ftl_launch_kind ftl_gang_resolve_kind(ftl_launch_kind requested, const char *slurm_job_id) {
  if (requested != FTL_LAUNCH_AUTO) return requested;
  return slurm_job_id && *slurm_job_id ? FTL_LAUNCH_SRUN : FTL_LAUNCH_MPIRUN;
}

void ftl_argv_free(char **argv) {
  if (!argv) return;
  for (char **p = argv; *p; p++) ftl_free(*p);
  ftl_free(argv);
}

typedef struct argv_builder {
  char **v;
  size_t n, cap;
  int oom;
} argv_builder;

static void push(argv_builder *b, const char *s) {
  if (b->oom) return;
  if (b->n + 2 > b->cap) {
    size_t ncap = b->cap ? b->cap * 2 : 32;
    char **nv = ftl_realloc(b->v, ncap * sizeof *nv);
    if (!nv) {
      b->oom = 1;
      return;
    }
    b->v = nv;
    b->cap = ncap;
  }
  char *copy = ftl_strdup(s);
  if (!copy) {
    b->oom = 1;
    return;
  }
  b->v[b->n++] = copy;
  b->v[b->n] = NULL;
}

static void push_int(argv_builder *b, long v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%ld", v);
  push(b, buf);
}

ftl_err ftl_gang_build_argv(const ftl_gang_opts *o, char ***argv_out, ftl_diag *d) {
  argv_builder b = {0};
  if (o->ranks < 1) return ftl_diag_fail(d, FTL_ERR_INVAL, "ranks must be > 0, not %d", o->ranks);
  if (o->kind == FTL_LAUNCH_SRUN) {
    push(&b, "srun");
    push(&b, "--ntasks");
    push_int(&b, o->ranks);
    /* A rank that fails ends the step at once instead of leaving the others waiting. */
    push(&b, "--kill-on-bad-exit=1");
    push(&b, "--export=ALL");
    push(&b, "--unbuffered");
  } else {
    push(&b, "mpirun");
    /* No "helpful" banners: ftl reports what failed itself, naming the rank and host. */
    push(&b, "--quiet");
    push(&b, "-n");
    push_int(&b, o->ranks);
    if (o->running_as_root) push(&b, "--allow-run-as-root");
    if (o->hostfile) {
      push(&b, "--hostfile");
      push(&b, o->hostfile);
    } else if (o->ranks > o->cpu_count) {
      /* More ranks than cores on one machine: allowed, and then binding ranks to cores would
       * stack them, so binding is off. */
      push(&b, "--oversubscribe");
      push(&b, "--bind-to");
      push(&b, "none");
    }
    /* When a rank fails, mpirun's own clean-up waits this long between TERM and KILL of the other
     * ranks. ftl has already ended them through their agents by then, so it need not wait. */
    push(&b, "--mca");
    push(&b, "odls_base_sigkill_timeout");
    push_int(&b, o->sigkill_grace_s);
    for (char *const *e = o->export_names; e && *e; e++) {
      push(&b, "-x");
      push(&b, *e);
    }
  }
  push(&b, o->ftl_exe);
  push(&b, "rank-agent");
  push(&b, "--");
  push(&b, o->program);
  for (char *const *a = o->args; a && *a; a++) push(&b, *a);
  if (b.oom) {
    ftl_argv_free(b.v);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory building the launch command");
  }
  *argv_out = b.v;
  return FTL_OK;
}

static int is_executable_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

ftl_err ftl_gang_find_program(const char *program, const char *path_env, char **abs_out, ftl_diag *d) {
  char buf[PATH_MAX];
  if (!program || !*program) return ftl_diag_fail(d, FTL_ERR_SPEC, "no program to run");
  if (strchr(program, '/')) {
    if (!realpath(program, buf))
      return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "program '%s' does not exist", program);
    if (!is_executable_file(buf))
      return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "program '%s' is not an executable file", program);
    *abs_out = ftl_strdup(buf);
    return *abs_out ? FTL_OK : FTL_ERR_NOMEM;
  }
  const char *p = path_env ? path_env : "";
  while (*p) {
    const char *end = strchr(p, ':');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > 0 && ftl_fmt(buf, sizeof buf, "%.*s/%s", (int)len, p, program) == FTL_OK && is_executable_file(buf)) {
      char real[PATH_MAX];
      *abs_out = ftl_strdup(realpath(buf, real) ? real : buf);
      return *abs_out ? FTL_OK : FTL_ERR_NOMEM;
    }
    p += len;
    if (*p == ':') p++;
  }
  return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "program '%s' was not found on PATH", program);
}

ftl_err ftl_gang_first_host(const char *hostfile, char *host, size_t size, ftl_diag *d) {
  FILE *f = fopen(hostfile, "r");
  if (!f) return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "cannot read hostfile %s", hostfile);
  char line[1024];
  ftl_err rc = ftl_diag_fail(d, FTL_ERR_SPEC, "hostfile %s names no host", hostfile);
  while (fgets(line, sizeof line, f)) {
    char *s = line;
    while (isspace((unsigned char)*s)) s++;
    if (!*s || *s == '#') continue;
    size_t len = 0;
    while (s[len] && !isspace((unsigned char)s[len]) && s[len] != '#') len++;
    if (len >= size) {
      rc = ftl_diag_fail(d, FTL_ERR_SPEC, "host name too long in %s", hostfile);
      break;
    }
    memcpy(host, s, len);
    host[len] = '\0';
    rc = FTL_OK;
    break;
  }
  fclose(f);
  return rc;
}
