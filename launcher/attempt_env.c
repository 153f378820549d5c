/* launcher/attempt_env.c: what one attempt is on this host (see attempt_env.h): its token, the
 * gang's command line and environment, and the sweep of the token's leftovers. */
#include "launcher/attempt_env.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/owned_dir.h"
#include "ftl/core.h"
#include "launcher/gang.h"
#include "launcher/slurm_alloc.h"

int ln_relay_on(void) {
  const char *v = getenv("FTL_RELAY");
  return !v || strcmp(v, "0") != 0; /* on unless FTL_RELAY=0 */
}

ftl_err ln_attempt_token(int attempt_no, char *buf, size_t size) {
  /* The attempt's secret (wire version 4 proves it, never sends it): 128 bits from getrandom. */
  char rnd[33];
  ftl_diag ignored;
  ftl_err rc = core_random_hex(rnd, 16, &ignored);
  if (rc) return rc;
  return ftl_fmt(buf, size, "%s-a%d", rnd, attempt_no);
}

/* The kernel's ephemeral ports, the ones it hands to outgoing connections and to bind(port 0):
 * [*lo, *hi] from ip_local_port_range (Linux's default 32768-60999 where it cannot be read). */
static void ephemeral_ports(int *lo, int *hi) {
  *lo = 32768;
  *hi = 60999;
  char *text = NULL;
  size_t len = 0;
  ftl_diag d;
  int a, b;
  if (ftl_read_file("/proc/sys/net/ipv4/ip_local_port_range", 64, &text, &len, &d) == FTL_OK &&
      sscanf(text, "%d %d", &a, &b) == 2 && a > 0 && a <= b && b < 65536) {
    *lo = a;
    *hi = b;
  }
  ftl_free(text);
}

/* Whether nothing listens on (or holds) TCP port on any address of this host now. */
static int port_is_free(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sin.sin_addr.s_addr = htonl(INADDR_ANY);
  int ok = bind(fd, (struct sockaddr *)&sin, sizeof sin) == 0;
  close(fd);
  return ok;
}

/* MASTER_PORT: the port the program's own rendezvous binds (torch.distributed's TCPStore on rank 0)
 * seconds later, once its interpreter has imported its libraries, or minutes later for a parked
 * standby gang. It is taken below the kernel's ephemeral range and checked free: a port from
 * inside that range (bind port 0, close, hand it on: what torchrun does) can meanwhile become the
 * local port of any outgoing connection on the host, every other job's and test's included, and
 * the program's bind then fails with EADDRINUSE. Random among the ports from 20000 up to the
 * ephemeral range, so two launchers on one host seldom meet; 29500, PyTorch's default, when no
 * free one is found in 64 tries. */
static int master_port(void) {
  int lo, hi;
  ephemeral_ports(&lo, &hi);
  int first = 20000, last = lo - 1;
  if (last < first) { /* a host whose ephemeral range starts low: take the ports above it */
    first = hi + 1;
    last = 65535;
  }
  if (first > last) return 29500;
  ftl_rng rng;
  ftl_rng_seed(&rng, (uint64_t)ftl_wall_us() ^ ((uint64_t)getpid() << 20));
  for (int i = 0; i < 64; i++) {
    int port = first + (int)(ftl_rng_next(&rng) % (uint64_t)(last - first + 1));
    if (port_is_free(port)) return port;
  }
  return 29500;
}

/* The processes on this host whose environment carries FTL_RDZV_TOKEN=token, but for this one and
 * those of process group spare_group (0: none spared): killed (SIGKILL) with kill_them, else counted. */
static int scan_token(const char *token, pid_t spare_group, int kill_them) {
  char needle[200];
  if (ftl_fmt(needle, sizeof needle, "FTL_RDZV_TOKEN=%s", token)) return 0;
  size_t nlen = strlen(needle);
  int found = 0;
  DIR *proc = opendir("/proc");
  if (!proc) return 0;
  struct dirent *e;
  pid_t self = getpid();
  while ((e = readdir(proc))) {
    int64_t pid;
    if (ftl_parse_i64(e->d_name, 1, INT_MAX, &pid) != FTL_OK || pid == self) continue;
    if (spare_group > 0 && getpgid((pid_t)pid) == spare_group) continue;
    char path[64];
    if (ftl_fmt(path, sizeof path, "/proc/%s/environ", e->d_name)) continue;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[65536];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    for (ssize_t i = 0; i + (ssize_t)nlen <= n; i++) {
      if ((i == 0 || buf[i - 1] == '\0') && memcmp(buf + i, needle, nlen) == 0 &&
          (i + (ssize_t)nlen == n || buf[i + nlen] == '\0')) {
        if (!kill_them || kill((pid_t)pid, SIGKILL) == 0) found++;
        break;
      }
    }
  }
  closedir(proc);
  return found;
}

int ln_sweep_token(const char *token) { return scan_token(token, 0, 1); }

int ln_token_holders(const char *token, pid_t spare_group) { return scan_token(token, spare_group, 0); }

void ln_gang_launch_free(ln_gang_launch *L) {
  ln_argv_free(L->argv);
  ln_argv_free(L->exports);
  ln_argv_free(L->envp);
  L->argv = L->exports = L->envp = NULL;
  if (L->session_base[0]) core_fs_rm_tree(L->session_base);
  L->session_base[0] = '\0';
}

void ln_gang_launch_move_session(ln_gang_launch *from, ln_gang_launch *to) {
  if (to->session_base[0]) core_fs_rm_tree(to->session_base);
  memcpy(to->session_base, from->session_base, sizeof to->session_base);
  from->session_base[0] = '\0';
}

/* A fresh folder for mpirun's session directory, under $TMPDIR (absolute) or /tmp, named for this
 * launcher (core/owned_dir.h): a SIGKILLed launcher cannot remove its folder, so the next launcher
 * on the host removes those of launchers that are gone. "" when none can be made (mpirun then
 * uses its default, as before). */
static void make_session_base(ln_gang_launch *L) {
  const char *tmp = getenv("TMPDIR");
  if (!tmp || tmp[0] != '/') tmp = "/tmp";
  ftl_diag d = {{0}};
  if (core_owned_dir_make(tmp, "ftl-mpirun-", NULL, L->session_base, sizeof L->session_base, &d) != FTL_OK)
    FTL_LOG(FTL_LOG_DEBUG, "launcher", "no session folder of its own for mpirun (%s): Open MPI's default", d.msg);
}

/* The first node of the Slurm allocation (SLURM_JOB_NODELIST), or this host's name when it cannot
 * be read. */
static void srun_first_node(char *out, size_t size) {
  ln_slurm_node *nodes = NULL;
  size_t count = 0;
  ftl_diag d = {{0}};
  if (ln_slurm_alloc_from_env(&nodes, &count, &d) != FTL_OK || ftl_fmt(out, size, "%s", nodes[0].name))
    ftl_fmt(out, size, "%s", ftl_hostname());
  ftl_free(nodes);
}

ftl_err ln_gang_launch_build(const ln_attempt_opts *o, const char *attempt_dir, int rdzv_port, const char *token,
                             ln_gang_launch *L, ftl_diag *d) {
  ftl_err rc;
  /* What every rank gets. Set here and exported by name (mpirun -x), so it reaches remote hosts. */
  char addr[320];
  ftl_fmt(addr, sizeof addr, "%s:%d", o->rdzv_host, rdzv_port);
  /* MASTER_ADDR is where rank 0 runs: the first host of the attempt's plan (a hostfile's, or under
   * srun the allocation's nodes', run.c); under srun without a plan the allocation's first node,
   * where srun's block distribution puts task 0 (not the launcher's host: under salloc that is the
   * login node); this machine otherwise. */
  L->kind = ln_gang_resolve_kind(o->job->launcher, getenv("SLURM_JOB_ID"));
  if (L->kind == FTL_LAUNCH_MPIRUN) make_session_base(L);
  char master_addr[256] = "127.0.0.1";
  if (o->hostfile && ln_gang_first_host(o->hostfile, master_addr, sizeof master_addr, d) != FTL_OK) return FTL_ERR_SPEC;
  if (!o->hostfile && L->kind == FTL_LAUNCH_SRUN) srun_first_node(master_addr, sizeof master_addr);
  /* srun with a plan: each rank on its node of the plan, through srun's SLURM_HOSTFILE, written beside
   * the attempt's hostfile (the plan; a standby of the next attempt shares it, and its layout). */
  char tasks_path[PATH_MAX] = "";
  int srun_nodes = 0;
  if (L->kind == FTL_LAUNCH_SRUN && o->hostfile) {
    if (ftl_fmt(tasks_path, sizeof tasks_path, "%s.tasks", o->hostfile))
      return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s.tasks", o->hostfile);
    if ((rc = ln_slurm_write_tasks(o->hostfile, o->world_size, tasks_path, &srun_nodes, NULL, 0, d))) return rc;
  }
  /* The ranks' environment: built for this attempt and given to mpirun/srun alone (execvpe), never
   * set in the launcher's own. The names are exported too (mpirun -x), so they reach remote hosts. */
  ln_gang_env genv = {.rdzv_addr = addr,
                       .rdzv_token = token,
                       .rdzv_timeout_ms = o->job->rendezvous_timeout_ms,
                       .run_dir = o->run_dir,
                       .attempt_dir = attempt_dir,
                       .attempt = o->attempt,
                       .job_name = o->job->name,
                       .spec_hash = o->job->spec_hash,
                       .kill_grace_ms = o->kill_grace_ms,
                       .node_timeout_ms = o->job->node_timeout_ms,
                       .fleet_ledger = o->job->fleet_ledger,
                       .gang_hosts = o->gang_hosts,
                       .preempt_grace_ms = o->job->preempt_grace_ms,
                       .master_addr = master_addr,
                       .master_port = master_port(),
                       .job_env = o->job->env,
                       .standby = o->standby_launch,
                       .ckpt_l1_dir = ln_job_ckpt_l1(o->job) ? ln_job_ckpt_l1_root(o->job) : "",
                       .ckpt_l1_max_bytes = (int64_t)o->job->ckpt_l1_max_mb << 20,
                       .ckpt_l2 = ln_job_ckpt_l2_mode(o->job),
                       .relay = ln_relay_on(),
                       .pyrun = o->pyrun_argv != NULL,
                       .preload = o->preload,
                       .slurm_hostfile = tasks_path[0] ? tasks_path : NULL,
                       .direct_launch = L->kind == FTL_LAUNCH_SRUN,
                       /* Open MPI refuses root without both, even with --allow-run-as-root on some builds. */
                       .allow_root = L->kind == FTL_LAUNCH_MPIRUN && geteuid() == 0,
                       .mpi_session_base = L->session_base[0] ? L->session_base : NULL};
  if ((rc = ln_gang_build_env(environ, &genv, &L->envp, d))) return rc;
  /* The job's env rides along for the program only (ln_gang_program_env in the agent). */
  if ((rc = ln_gang_export_names(o->job->env, &L->exports, d))) return rc;

  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  char agent_exe[PATH_MAX];
  ln_gang_opts g = {.kind = L->kind,
                     .ranks = o->world_size,
                     .hostfile = o->hostfile,
                     .ftl_exe = o->ftl_exe,
                     .agent_exe = ln_gang_agent_exe(o->ftl_exe, agent_exe, sizeof agent_exe),
                     .program = o->program,
                     .args = o->job->args,
                     .export_names = L->exports,
                     .running_as_root = geteuid() == 0,
                     .cpu_count = cpus > 0 ? (int)cpus : 1,
                     /* mpirun's own teardown (a lost daemon, a rank it saw die) SIGTERMs the
                      * agents and SIGKILLs them this long after: an agent needs a moment in
                      * between to tell the launcher it was torn down (its host is alive), or
                      * it vanishes as silently as a dead host's (detect.h). ftl itself ends
                      * the gang through the agents, so this is not the programs' grace. */
                     .sigkill_grace_s = FTL_MPIRUN_SIGKILL_GRACE_S,
                     .standby = o->standby_launch,
                     .srun_nodes = srun_nodes,
                     .pyrun_argv = o->pyrun_argv};
  return ln_gang_build_argv(&g, &L->argv, d);
}
