/* launcher/gang.c: the mpirun / srun command line of an attempt, its environment, the rank
 * program's environment, program lookup and the hostfile. */
#include "launcher/gang.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftl/core.h"
#include "launcher/hostfile.h"

ln_launch_kind ln_gang_resolve_kind(ln_launch_kind requested, const char *slurm_job_id) {
  if (requested != FTL_LAUNCH_AUTO) return requested;
  return slurm_job_id && *slurm_job_id ? FTL_LAUNCH_SRUN : FTL_LAUNCH_MPIRUN;
}

void ln_argv_free(char **argv) {
  if (!argv) return;
  for (char **p = argv; *p; p++) ftl_free(*p);
  ftl_free(argv);
}

void ln_argv_push(ln_argv_builder *b, const char *s) {
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

ftl_err ln_argv_finish(ln_argv_builder *b, char ***out, const char *what, ftl_diag *d) {
  if (!b->oom && !b->v) {
    b->v = ftl_calloc(1, sizeof *b->v);
    if (!b->v) b->oom = 1;
  }
  if (b->oom) {
    ln_argv_free(b->v);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory building %s", what);
  }
  *out = b->v;
  return FTL_OK;
}

static void push_int(ln_argv_builder *b, long v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%ld", v);
  ln_argv_push(b, buf);
}

ftl_err ln_gang_build_argv(const ln_gang_opts *o, char ***argv_out, ftl_diag *d) {
  ln_argv_builder b = {0};
  if (o->ranks < 1) return ftl_diag_fail(d, FTL_ERR_INVAL, "ranks must be > 0, not %d", o->ranks);
  if (o->kind == FTL_LAUNCH_SRUN) {
    ln_argv_push(&b, "srun");
    ln_argv_push(&b, "--ntasks");
    push_int(&b, o->ranks);
    /* A rank that fails ends the step at once instead of leaving the others waiting. */
    ln_argv_push(&b, "--kill-on-bad-exit=1");
    ln_argv_push(&b, "--export=ALL");
    ln_argv_push(&b, "--unbuffered");
    /* Every step shares the allocation's resources: a standby beside the running attempt's step, and
     * a relaunch beside a step Slurm still counts as running. A step that had a task on a lost node
     * holds its CPUs on the surviving nodes until the job ends, even once the node is DOWN (measured
     * with Slurm 22.05: over 90 s, with --no-kill): a step that waits for them would wait that long.
     * ftl itself runs one gang at a time (the fence, core/fence.h). */
    ln_argv_push(&b, "--overlap");
    if (o->srun_nodes > 0) {
      /* The attempt's plan (slurm_alloc.h): these nodes, each rank where SLURM_HOSTFILE puts it. */
      ln_argv_push(&b, "--nodes");
      push_int(&b, o->srun_nodes);
      ln_argv_push(&b, "--distribution=arbitrary");
    }
  } else {
    ln_argv_push(&b, "mpirun");
    /* No "helpful" banners: ftl reports what failed itself, naming the rank and host. */
    ln_argv_push(&b, "--quiet");
    ln_argv_push(&b, "-n");
    push_int(&b, o->ranks);
    if (o->running_as_root) ln_argv_push(&b, "--allow-run-as-root");
    if (o->hostfile) {
      ln_argv_push(&b, "--hostfile");
      ln_argv_push(&b, o->hostfile);
    } else if (o->ranks > o->cpu_count) {
      /* More ranks than cores on one machine: allowed, and then binding ranks to cores would
       * stack them, so binding is off. */
      ln_argv_push(&b, "--oversubscribe");
      ln_argv_push(&b, "--bind-to");
      ln_argv_push(&b, "none");
    }
    /* When a rank fails or a daemon is lost, mpirun's own clean-up waits this long between TERM
     * and KILL of the other ranks' agents: ftl ends the gang through the agents itself, but a
     * torn-down agent must get to say so before it dies (FTL_MPIRUN_SIGKILL_GRACE_S). */
    ln_argv_push(&b, "--mca");
    ln_argv_push(&b, "odls_base_sigkill_timeout");
    push_int(&b, o->sigkill_grace_s);
    for (char *const *e = o->export_names; e && *e; e++) {
      ln_argv_push(&b, "-x");
      ln_argv_push(&b, *e);
    }
  }
  if (o->agent_exe) {
    ln_argv_push(&b, o->agent_exe);
  } else {
    ln_argv_push(&b, o->ftl_exe);
    ln_argv_push(&b, "rank-agent");
  }
  ln_argv_push(&b, "--");
  if (o->pyrun_argv) {
    for (char *const *a = o->pyrun_argv; *a; a++) ln_argv_push(&b, *a);
  } else {
    ln_argv_push(&b, o->program);
    for (char *const *a = o->args; a && *a; a++) ln_argv_push(&b, *a);
  }
  return ln_argv_finish(&b, argv_out, "the launch command", d);
}

const char *ln_gang_agent_exe(const char *ftl_exe, char *buf, size_t size) {
  const char *slash = ftl_exe ? strrchr(ftl_exe, '/') : NULL;
  if (!slash) return NULL;
  int dir_len = (int)(slash - ftl_exe);
  static const char *const places[] = {"/ftl-rank-agent", "/../libexec/ftl/ftl-rank-agent"};
  for (size_t i = 0; i < sizeof places / sizeof *places; i++) {
    int n = snprintf(buf, size, "%.*s%s", dir_len, ftl_exe, places[i]);
    if (n > 0 && (size_t)n < size && access(buf, X_OK) == 0) return buf;
  }
  return NULL;
}

ftl_err ln_gang_first_host(const char *hostfile, char *host, size_t size, ftl_diag *d) {
  ln_hostfile_host *hosts = NULL;
  size_t count = 0;
  ftl_err rc = ln_hostfile_read(hostfile, &hosts, &count, d);
  if (rc == FTL_OK) {
    if (strlen(hosts[0].name) >= size) rc = ftl_diag_fail(d, FTL_ERR_SPEC, "host name too long in %s", hostfile);
    else memcpy(host, hosts[0].name, strlen(hosts[0].name) + 1);
  }
  ftl_free(hosts);
  return rc;
}

const char *const ln_gang_env_names[] = {"FTL_RDZV_ADDR", "FTL_RDZV_TOKEN", "FTL_RDZV_TIMEOUT_MS", "FTL_RUN_DIR",
                                          "FTL_ATTEMPT_DIR", "FTL_ATTEMPT", "FTL_JOB_NAME", "FTL_JOB_SPEC_HASH",
                                          "FTL_KILL_GRACE_MS", "FTL_NODE_TIMEOUT_MS", "FTL_FLEET_LEDGER",
                                          "FTL_MPI_INIT_BARRIER", "FTL_GANG_HOSTS", "FTL_PREEMPT_GRACE_MS",
                                          "FTL_STANDBY", "FTL_CKPT_L1_DIR",
                                          "FTL_CKPT_L1_MAX_BYTES", "FTL_CKPT_L2", "FTL_RELAY", "MASTER_ADDR", "MASTER_PORT",
                                          "FTL_PYRUN", "FTL_PRELOAD", NULL};

static size_t name_len(const char *kv) {
  const char *eq = strchr(kv, '=');
  return eq ? (size_t)(eq - kv) : strlen(kv);
}

/* Sets "name=value" (value NULL: kv is already "NAME=VALUE"), replacing an entry of that name. */
static void env_set(ln_argv_builder *b, const char *name, const char *value) {
  if (b->oom) return;
  char *kv = NULL;
  if (value) {
    size_t n = strlen(name), m = strlen(value);
    kv = ftl_malloc(n + m + 2);
    if (!kv) {
      b->oom = 1;
      return;
    }
    memcpy(kv, name, n);
    kv[n] = '=';
    memcpy(kv + n + 1, value, m + 1);
  } else {
    kv = ftl_strdup(name);
    if (!kv) {
      b->oom = 1;
      return;
    }
  }
  size_t len = name_len(kv);
  for (size_t i = 0; i < b->n; i++) {
    if (name_len(b->v[i]) == len && !strncmp(b->v[i], kv, len)) {
      ftl_free(b->v[i]);
      b->v[i] = kv;
      return;
    }
  }
  ln_argv_push(b, kv);
  ftl_free(kv);
}

static void env_set_int(ln_argv_builder *b, const char *name, long long v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", v);
  env_set(b, name, buf);
}

static int has_job_env_prefix(const char *kv) {
  return strncmp(kv, FTL_GANG_JOB_ENV_PREFIX, sizeof FTL_GANG_JOB_ENV_PREFIX - 1) == 0;
}

/* Sets the job's "NAME=VALUE" as FTL_JOB_ENV_NAME=VALUE: carried to the rank agent, not applied. */
static void env_set_job(ln_argv_builder *b, const char *kv) {
  if (b->oom) return;
  size_t n = strlen(kv);
  char *prefixed = ftl_malloc(sizeof FTL_GANG_JOB_ENV_PREFIX + n);
  if (!prefixed) {
    b->oom = 1;
    return;
  }
  memcpy(prefixed, FTL_GANG_JOB_ENV_PREFIX, sizeof FTL_GANG_JOB_ENV_PREFIX - 1);
  memcpy(prefixed + sizeof FTL_GANG_JOB_ENV_PREFIX - 1, kv, n + 1);
  env_set(b, prefixed, NULL);
  ftl_free(prefixed);
}

ftl_err ln_gang_build_env(char *const *base, const ln_gang_env *e, char ***envp_out, ftl_diag *d) {
  ln_argv_builder b = {0};
  *envp_out = NULL;
  /* A job variable carried for someone else's job (an ftl run started by a rank) is not ours. */
  for (char *const *p = base; p && *p; p++)
    if (strchr(*p, '=') && !has_job_env_prefix(*p)) env_set(&b, *p, NULL);
  env_set(&b, "FTL_RDZV_ADDR", e->rdzv_addr ? e->rdzv_addr : "");
  env_set(&b, "FTL_RDZV_TOKEN", e->rdzv_token ? e->rdzv_token : "");
  env_set_int(&b, "FTL_RDZV_TIMEOUT_MS", e->rdzv_timeout_ms);
  env_set(&b, "FTL_RUN_DIR", e->run_dir ? e->run_dir : "");
  env_set(&b, "FTL_ATTEMPT_DIR", e->attempt_dir ? e->attempt_dir : "");
  env_set_int(&b, "FTL_ATTEMPT", e->attempt);
  env_set(&b, "FTL_JOB_NAME", e->job_name ? e->job_name : "");
  env_set(&b, "FTL_JOB_SPEC_HASH", e->spec_hash ? e->spec_hash : "");
  env_set_int(&b, "FTL_KILL_GRACE_MS", e->kill_grace_ms);
  env_set_int(&b, "FTL_NODE_TIMEOUT_MS", e->node_timeout_ms);
  env_set(&b, "FTL_FLEET_LEDGER", e->fleet_ledger ? e->fleet_ledger : "");
  env_set(&b, "FTL_GANG_HOSTS", e->gang_hosts ? e->gang_hosts : "");
  env_set_int(&b, "FTL_PREEMPT_GRACE_MS", e->preempt_grace_ms);
  env_set_int(&b, "FTL_STANDBY", e->standby ? 1 : 0);
  env_set(&b, "FTL_CKPT_L1_DIR", e->ckpt_l1_dir ? e->ckpt_l1_dir : "");
  env_set_int(&b, "FTL_CKPT_L1_MAX_BYTES", e->ckpt_l1_max_bytes);
  env_set(&b, "FTL_CKPT_L2", e->ckpt_l2 == 2 ? "auto" : e->ckpt_l2 ? "1" : "0");
  env_set_int(&b, "FTL_RELAY", e->relay ? 1 : 0);
  env_set(&b, "MASTER_ADDR", e->master_addr ? e->master_addr : "127.0.0.1");
  env_set_int(&b, "MASTER_PORT", e->master_port);
  env_set_int(&b, "FTL_PYRUN", e->pyrun ? 1 : 0);
  if (e->slurm_hostfile) env_set(&b, "SLURM_HOSTFILE", e->slurm_hostfile);
  env_set(&b, "FTL_PRELOAD", e->preload ? e->preload : "");
  for (char *const *p = e->job_env; p && *p; p++)
    if (strchr(*p, '=')) env_set_job(&b, *p);
  if (e->allow_root) {
    env_set(&b, "OMPI_ALLOW_RUN_AS_ROOT", "1");
    env_set(&b, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  }
  if (e->mpi_session_base) env_set(&b, "OMPI_MCA_orte_local_tmpdir_base", e->mpi_session_base);
  env_set_int(&b, "FTL_MPI_INIT_BARRIER", e->direct_launch ? 1 : 0);
  return ln_argv_finish(&b, envp_out, "the ranks' environment", d);
}

ftl_err ln_gang_export_names(char *const *job_env, char ***names_out, ftl_diag *d) {
  ln_argv_builder b = {0};
  *names_out = NULL;
  for (size_t i = 0; ln_gang_env_names[i]; i++) ln_argv_push(&b, ln_gang_env_names[i]);
  for (char *const *p = job_env; p && *p; p++) {
    if (b.oom) break;
    size_t n = name_len(*p);
    char *name = ftl_malloc(sizeof FTL_GANG_JOB_ENV_PREFIX + n);
    if (!name) {
      b.oom = 1;
      break;
    }
    memcpy(name, FTL_GANG_JOB_ENV_PREFIX, sizeof FTL_GANG_JOB_ENV_PREFIX - 1);
    memcpy(name + sizeof FTL_GANG_JOB_ENV_PREFIX - 1, *p, n);
    name[sizeof FTL_GANG_JOB_ENV_PREFIX - 1 + n] = '\0';
    ln_argv_push(&b, name);
    ftl_free(name);
  }
  return ln_argv_finish(&b, names_out, "the launch command", d);
}

/* Set for mpirun alone: an MPI program that inherits it is refused by Open MPI, since mpirun hands
 * its processes the session folder as orte_tmpdir_base and the two may not be given together. */
static int for_mpirun_only(const char *kv) {
  static const char name[] = "OMPI_MCA_orte_local_tmpdir_base=";
  return !strncmp(kv, name, sizeof name - 1);
}

ftl_err ln_gang_program_env(char *const *agent_env, char *const *place, char ***envp_out, ftl_diag *d) {
  ln_argv_builder b = {0};
  *envp_out = NULL;
  for (char *const *p = agent_env; p && *p; p++)
    if (strchr(*p, '=') && !has_job_env_prefix(*p) && !for_mpirun_only(*p)) env_set(&b, *p, NULL);
  for (char *const *p = agent_env; p && *p; p++)
    if (has_job_env_prefix(*p) && strchr(*p, '=')) env_set(&b, *p + sizeof FTL_GANG_JOB_ENV_PREFIX - 1, NULL);
  for (char *const *p = place; p && *p; p++)
    if (strchr(*p, '=')) env_set(&b, *p, NULL);
  return ln_argv_finish(&b, envp_out, "the program's environment", d);
}

const char *ln_gang_env_get(char *const *envp, const char *name) {
  size_t len = strlen(name);
  for (char *const *p = envp; p && *p; p++)
    if (!strncmp(*p, name, len) && (*p)[len] == '=') return *p + len + 1;
  return NULL;
}
