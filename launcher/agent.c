/* launcher/agent.c: `ftl rank-agent -- PROGRAM ARGS`, the small process that mpirun or srun
 * starts for every rank. It gives the program the variables a PyTorch program understands
 * (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE; MASTER_ADDR/PORT come from the launcher),
 * keeps its output in the attempt's per-rank log files while passing it through, forwards
 * signals to the program's whole process group, and tells the launcher at once, over the
 * rendezvous connection, how the program ended (exit code or signal) and on which host. That is
 * how ftl names the first failing rank exactly, for programs that never link ftl too. Open MPI's
 * shared-memory file of the rank lives in a folder the agent makes and removes (make_sm_dir), so
 * killed ranks do not leave host memory behind.
 *
 * A Python program run through launcher/pyrun.py (FTL_PYRUN=1) gets one end of a socket pair
 * (FTL_PYRUN_FD): the runner's word (what the program imported at start-up; a standby's "parked")
 * goes to the launcher as the rank's, and a standby's activation comes down it.
 *
 * In a standby gang (FTL_STANDBY=1, docs/fault-tolerance.md) the agent writes nothing under the
 * run directory and shows nothing on the console until the launcher activates the gang: the
 * program's output is held in memory (up to STANDBY_HELD_MAX bytes a stream) and released, to the
 * console and the new attempt's log files, on activation. A standby never activated leaves no
 * trace in the run directory.
 *
 * It deliberately does not restart anything: the launcher decides, for the whole gang.
 *
 * Map: the rank's place (Open MPI's or Slurm's variables); the program's output (the console, which
 * must never stop the agent, the log files, a standby's held output); small reports (memory, a
 * stop, the exit record); the agent's state; Open MPI's shared-memory folder; set-up (the launcher
 * reached directly or through the host's relay) and the program's spawn; signals and the
 * activation; the Python runner's word; the alive reports' thread; the launcher's connection; the
 * loop; the exit report and the entry point (ln_rank_agent_main).
 *
 * Why one file (issue 33): it is one small program's whole life, and the parts from the
 * shared-memory folder on all work on one private struct, agent (the connection, the program, both
 * output streams, the alive thread), that no other file should see. What other processes share
 * lives elsewhere already: the program's environment (gang.c), the relay (relay.c), spawning and
 * process groups (core/proc.c), owned folders (core/owned_dir.c). The output streams need no agent
 * and are the one part that could move out; nothing else uses them. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/fs.h"
#include "core/net.h"
#include "core/owned_dir.h"
#include "core/proc.h"
#include "core/rundir.h"
#include "ftl/core.h"
#include "launcher/detect.h"
#include "launcher/gang.h"
#include "launcher/gpu_watch.h"
#include "launcher/launcher.h"
#include "launcher/relay.h"
#include "launcher/sigpipe.h"
#include "launcher/slurm_alloc.h"
#include "rendezvous/client.h"
#include "rendezvous/wire.h"

/* ---- the rank's place ------------------------------------------------------------------------ */

/* This host's IPv4 addresses, space-separated: a hostfile may name hosts by address, and the
 * launcher must match a host it blames to its hostfile line. */
static void host_addresses(char *out, size_t size) {
  uint32_t addr[32];
  int n = core_net_host_ipv4(addr, 32);
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    char text[INET_ADDRSTRLEN];
    if (!inet_ntop(AF_INET, &addr[i], text, sizeof text)) continue;
    int k = snprintf(out + used, size - used, "%s%s", used ? " " : "", text);
    if (k < 0 || (size_t)k >= size - used) break;
    used += (size_t)k;
  }
}

typedef struct rank_place {
  int rank, world_size, local_rank, local_world_size;
} rank_place;

static ftl_err read_place(rank_place *pl, ftl_diag *d) {
  const char *r = getenv("OMPI_COMM_WORLD_RANK");
  int64_t v[4] = {0, 0, 0, 0};
  const char *names[4];
  if (r) {
    names[0] = "OMPI_COMM_WORLD_RANK";
    names[1] = "OMPI_COMM_WORLD_SIZE";
    names[2] = "OMPI_COMM_WORLD_LOCAL_RANK";
    names[3] = "OMPI_COMM_WORLD_LOCAL_SIZE";
  } else if (getenv("SLURM_PROCID")) {
    names[0] = "SLURM_PROCID";
    names[1] = "SLURM_NTASKS";
    names[2] = "SLURM_LOCALID";
    names[3] = NULL;
  } else {
    return ftl_diag_fail(d, FTL_ERR_GANG, "rank-agent: neither Open MPI (OMPI_COMM_WORLD_RANK) nor Slurm "
                                          "(SLURM_PROCID) placed this process; it must be started by `ftl run`");
  }
  for (int i = 0; i < 4; i++) {
    if (!names[i]) continue;
    const char *s = getenv(names[i]);
    if (ftl_parse_i64(s, 0, INT_MAX, &v[i]) != FTL_OK)
      return ftl_diag_fail(d, FTL_ERR_GANG, "rank-agent: %s='%s' is not a number", names[i], s ? s : "");
  }
  if (!names[3]) {
    int64_t node = 0;
    ftl_parse_i64(getenv("SLURM_NODEID"), 0, INT_MAX, &node);
    const char *tpn = getenv("SLURM_STEP_TASKS_PER_NODE");
    if (!tpn) tpn = getenv("SLURM_TASKS_PER_NODE");
    v[3] = ln_slurm_tasks_on_node(tpn, (int)node); /* "2(x3),1": node i's count */
    if (v[3] < 1) return ftl_diag_fail(d, FTL_ERR_GANG, "rank-agent: cannot tell the local size from Slurm's variables");
  }
  *pl = (rank_place){(int)v[0], (int)v[1], (int)v[2], (int)v[3]};
  return FTL_OK;
}

/* ---- the program's output -------------------------------------------------------------------- */

/* Passes program output through, line by line with a "[rank N] " prefix, and keeps it unprefixed
 * in the rank's log file. The console (mpirun's or srun's output pipe) is the one outside reader
 * this agent depends on, and the agent must never stop on it: it is the rank's heartbeat, and a
 * blocked or killed agent reads as a lost host. So a console that takes nothing for
 * CONSOLE_STALL_MS is left behind (lines are dropped there until it takes output again; the log
 * file keeps every line), and a console whose reader is gone (EPIPE: mpirun's daemon exited) is
 * given up, without the SIGPIPE that would kill the agent silently. */
typedef struct out_stream {
  int pipe_fd;
  int log_fd;
  int console_fd;        /* -1 once its reader is gone */
  int console_stalled;   /* the last write found the console full: do not wait for it again */
  long console_dropped;  /* lines (or their ends) not shown on the console */
  char pending[8192];
  size_t pending_len;
  int holding;           /* a parked standby: output goes to held, nowhere else */
  core_buf held;
  size_t held_dropped;   /* bytes past STANDBY_HELD_MAX */
} out_stream;

enum { STANDBY_HELD_MAX = 1 << 20 };

enum { CONSOLE_STALL_MS = 250 };

/* The rank's log files, through the file seam like every file ftl keeps. */
static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = core_fs_table.write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

/* Writes to the console without ever blocking for long: it waits for room (poll, then writes at
 * most PIPE_BUF bytes, which a pipe with room takes whole) up to CONSOLE_STALL_MS, or not at all
 * while the console is stalled. */
static void console_write(out_stream *s, const char *p, size_t n) {
  if (s->console_fd < 0) return;
  int64_t deadline = ftl_deadline_after_ms(s->console_stalled ? 0 : CONSOLE_STALL_MS);
  while (n > 0) {
    struct pollfd pf = {.fd = s->console_fd, .events = POLLOUT};
    int pr = poll(&pf, 1, ftl_deadline_left_ms(deadline));
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0 || (pf.revents & (POLLERR | POLLNVAL))) {
      s->console_fd = -1;
      return;
    }
    if (pr == 0) {
      s->console_stalled = 1;
      s->console_dropped++;
      return;
    }
    ssize_t w = write(s->console_fd, p, n < PIPE_BUF ? n : PIPE_BUF);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) {
      s->console_fd = -1; /* EPIPE: nobody reads it any more */
      return;
    }
    p += w;
    n -= (size_t)w;
  }
  s->console_stalled = 0;
}

static void console_line(out_stream *s, const char *prefix, const char *p, size_t n) {
  char buf[8192 + 64];
  size_t plen = strlen(prefix);
  if (plen + n > sizeof buf) {
    console_write(s, prefix, plen);
    console_write(s, p, n);
    return;
  }
  memcpy(buf, prefix, plen);
  memcpy(buf + plen, p, n);
  console_write(s, buf, plen + n); /* one write per line keeps ranks' lines whole */
}

static void flush_pending(out_stream *s, const char *prefix, int final) {
  size_t start = 0;
  for (size_t i = 0; i < s->pending_len; i++) {
    if (s->pending[i] != '\n') continue;
    console_line(s, prefix, s->pending + start, i + 1 - start);
    start = i + 1;
  }
  if (start == 0 && (s->pending_len == sizeof s->pending || (final && s->pending_len))) {
    console_line(s, prefix, s->pending, s->pending_len);
    if (final && s->pending[s->pending_len - 1] != '\n') console_write(s, "\n", 1);
    start = s->pending_len;
  }
  memmove(s->pending, s->pending + start, s->pending_len - start);
  s->pending_len -= start;
}

static int pump(out_stream *s, const char *prefix) {
  ssize_t n = read(s->pipe_fd, s->pending + s->pending_len, sizeof s->pending - s->pending_len);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 1;
  if (n <= 0) {
    flush_pending(s, prefix, 1);
    close(s->pipe_fd);
    s->pipe_fd = -1;
    return 0;
  }
  if (s->holding) {
    if (core_buf_add(&s->held, s->pending + s->pending_len, (size_t)n) != FTL_OK) s->held_dropped += (size_t)n;
    return 1;
  }
  if (s->log_fd >= 0) write_all(s->log_fd, s->pending + s->pending_len, (size_t)n);
  s->pending_len += (size_t)n;
  flush_pending(s, prefix, 0);
  return 1;
}

/* The activation: what the stream held goes to its log file and the console, in order, and later
 * output flows as for any rank. */
static void release_held(out_stream *s, const char *prefix) {
  s->holding = 0;
  const char *p = s->held.p ? s->held.p : "";
  size_t left = s->held.len;
  if (s->log_fd >= 0 && left) write_all(s->log_fd, p, left);
  while (left > 0) {
    size_t room = sizeof s->pending - s->pending_len, k = left < room ? left : room;
    memcpy(s->pending + s->pending_len, p, k);
    s->pending_len += k;
    p += k;
    left -= k;
    flush_pending(s, prefix, 0);
  }
  if (s->held_dropped && s->log_fd >= 0) {
    char note[160];
    int len = snprintf(note, sizeof note, "ftl rank-agent: %zu bytes of output while parked as a standby were dropped\n",
                       s->held_dropped);
    if (len > 0) write_all(s->log_fd, note, (size_t)len);
  }
  core_buf_free(&s->held);
}

static int open_log(const char *attempt_dir, int rank, const char *suffix) {
  char path[PATH_MAX];
  if (!attempt_dir || core_rundir_rank_file(path, sizeof path, attempt_dir, rank, suffix)) return -1;
  return core_fs_table.open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
}

/* ---- small reports --------------------------------------------------------------------------- */

/* A process's resident memory in KiB (/proc/PID/statm), or -1. */
static long resident_kib(pid_t pid) {
  char path[64], buf[128];
  snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  long size = 0, resident = -1;
  if (sscanf(buf, "%ld %ld", &size, &resident) != 2 || resident < 0) return -1;
  long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? resident * (page / 1024) : -1;
}

/* Tells the launcher, once, that this agent was asked to stop (by: "signal" for a signal from
 * outside, such as mpirun's or srun's teardown; "launcher" for ftl's own request), before it
 * passes the signal on: the word reaches the launcher ahead of this connection's close, so its
 * host is known to be alive whatever else the launcher reads in the same moment (detect.h). */
static void say_stopping(rz_rdzv_client *client, int *said, int sig, const char *by) {
  if (*said || client->fd < 0) return;
  *said = 1;
  ftl_diag ignored;
  rz_rdzv_client_send(client, json_pack("{s:s, s:i, s:s}", "type", "stopping", "signal", sig, "by", by), 1, &ignored);
}

static void write_exit_record(const char *attempt_dir, int rank, int code, int sig, int64_t start_us) {
  char path[PATH_MAX];
  if (!attempt_dir || core_rundir_rank_file(path, sizeof path, attempt_dir, rank, "exit.json")) return;
  json_t *rec = json_pack("{s:i, s:s, s:I, s:i, s:i, s:I, s:I}", "rank", rank, "host", ftl_hostname(), "pid",
                          (json_int_t)getpid(), "exit_code", code, "signal", sig, "start_us", (json_int_t)start_us,
                          "end_us", (json_int_t)ftl_wall_us());
  char *text = rec ? json_dumps(rec, JSON_INDENT(2)) : NULL;
  json_decref(rec);
  if (!text) return;
  ftl_diag ignored;
  ftl_write_file_atomic(path, text, strlen(text), &ignored);
  free(text);
}

/* ---- the agent's state ----------------------------------------------------------------------- */

/* The alive reports go out from a thread of their own, every second, whatever the agent's loop is
 * doing: the launcher calls a host lost from their silence alone, and the loop also writes the
 * program's output to its log files and the console, where a slow disk or a stalled reader must
 * not read as a dead host (the flake hunt saw two hosts' agents fall 3-4 s behind at once, on a
 * quiet machine, and one host called lost for it). A report says the program's state ('X': ended,
 * its output still draining), read from /proc. The thread only sends: the connection's lock makes
 * that safe beside the loop's own sends, and the loop stops the thread before it closes the
 * connection. */
typedef struct alive_reporter {
  rz_rdzv_client *client;
  pid_t pid;                 /* the program */
  atomic_int program_reaped; /* set by the loop once it has reaped the program */
  /* The host's GPUs (launcher/gpu_watch.h), watched by its first rank's agent from this thread once
   * watch_gpus is set (at the start; a standby's at its activation). gpu: opened by the main thread
   * before the program starts, or by this thread when it is set later. */
  atomic_int watch_gpus;
  ln_gpu_watch *gpu;
  int64_t gpu_due_ms;
  int stop_fd;               /* an eventfd: the loop's word to stop (-1 until started) */
  int started;
  pthread_t thread;
} alive_reporter;

/* One agent's state while its program runs. */
typedef struct agent {
  rank_place pl;
  rz_rdzv_client client;
  core_proc proc;
  out_stream out, err;
  rz_linebuf from_launcher;
  pid_t parent;         /* mpirun's daemon or srun: when it goes, getppid() changes */
  int exec_errno;       /* the program could not start (0: it did) */
  int said_stopping;
  int64_t grace_ms;     /* between a forwarded ending signal and the program's SIGKILL */
  int64_t fence_ms;     /* FTL_NODE_TIMEOUT_MS: silence from the launcher that cuts this rank off */
  int64_t heard_ms;
  alive_reporter alive;
  char prefix[32];
  int standby;          /* FTL_STANDBY=1: parked until the launcher's activation */
  char attempt_dir[PATH_MAX]; /* "" until known (a standby: its activation) */
  pid_t relay_pid;      /* the host's relay when this agent started it (launcher/relay.h), else 0 */
  int direct_in_relayed; /* connected to the launcher directly in a gang of relays (its relay failed):
                            the launcher's pings may come at the relays' slower cadence */
  char sm_dir[96];      /* the program's shared-memory folder (make_sm_dir), removed at the end; "" none */
  /* A Python program run through launcher/pyrun.py (FTL_PYRUN=1): the agent's end of their socket
   * pair, and the child's until the spawn (-1: none). */
  int pyrun_fd, pyrun_child_fd;
  rz_linebuf from_pyrun;
} agent;

/* ---- Open MPI's shared-memory folder --------------------------------------------------------- */

/* Open MPI's shared-memory transport (btl vader in 4.x, sm in 5.x) backs each rank with a file in
 * /dev/shm that the rank removes in MPI_Finalize, or mpirun when the job ends. A rank killed along
 * with its mpirun, which a fault-tolerant launcher sees all the time, leaves its file behind: host
 * memory that nothing frees, restart after restart, in the same tmpfs as the L1 checkpoints. So
 * each rank's file goes in a folder of the agent's making, removed when the program has ended
 * however it ended. Open MPI hands the file's full name to the host's other ranks, so one folder
 * per rank serves. A backing folder the user set is theirs and left alone; without /dev/shm there
 * is nothing to do. */
/* "ftl-mpi-sm-n<pid namespace>-p<agent pid>-s<start ticks>-r<rank>-XXXXXX" (core/owned_dir.h):
 * whose the folder is. An agent SIGKILLed before its program's end (mpirun kills its children a
 * second after its own SIGTERM; a lost launcher's gang goes that way) cannot remove its folder, so
 * each agent that starts removes those of dead agents: what a killed gang leaves is gone once the
 * next gang on the host is up. */
#define SM_DIR_PREFIX "ftl-mpi-sm-"

/* Removes the program's shared-memory folder, once it has ended. */
static void drop_sm_dir(agent *ag) {
  if (!ag->sm_dir[0]) return;
  core_fs_rm_tree(ag->sm_dir);
  ag->sm_dir[0] = '\0';
}

/* Makes the folder (after sweeping the dead agents'): the two variables out, each "NAME=VALUE",
 * or "" when there is no folder. */
static void make_sm_dir(agent *ag, char vars[2][192]) {
  static const char *names[2] = {"OMPI_MCA_btl_vader_backing_directory", "OMPI_MCA_btl_sm_backing_directory"};
  struct stat st;
  vars[0][0] = vars[1][0] = '\0';
  if (stat("/dev/shm", &st) != 0 || !S_ISDIR(st.st_mode)) return;
  if (getenv(names[0]) || getenv(names[1])) {
    core_owned_dir_sweep("/dev/shm", SM_DIR_PREFIX);
    return;
  }
  char tmpl[sizeof ag->sm_dir], tag[32];
  snprintf(tag, sizeof tag, "r%d", ag->pl.rank);
  ftl_diag d = {{0}};
  if (core_owned_dir_make("/dev/shm", SM_DIR_PREFIX, tag, tmpl, sizeof tmpl, &d) != FTL_OK) {
    FTL_LOG(FTL_LOG_DEBUG, "agent", "no shared-memory folder for the program (%s): Open MPI's default", d.msg);
    return;
  }
  snprintf(ag->sm_dir, sizeof ag->sm_dir, "%s", tmpl);
  for (int i = 0; i < 2; i++)
    snprintf(vars[i], sizeof vars[i], "%s=%s", names[i], ag->sm_dir);
}

/* ---- set-up and spawning --------------------------------------------------------------------- */

/* The rank's place, the program's environment, the parent-death signal and the launcher
 * connection. FTL_EXIT_OK, or the exit code to return at once. */
static int agent_setup(agent *ag, char ***prog_env, ftl_diag *d) {
  core_launch_env env;
  if (read_place(&ag->pl, d) || core_launch_env_read(&env, d)) {
    fprintf(stderr, "ftl rank-agent: %s\n", d->msg);
    return FTL_EXIT_LAUNCH;
  }
  ftl_log_init_from_env();
  ftl_log_set_identity(ag->pl.rank, ag->pl.world_size);
  env.rank = ag->pl.rank;
  env.world_size = ag->pl.world_size;

  /* If mpirun or its daemon (our parent) goes, so do we, and with us the program: SIGTERM rather
   * than SIGKILL, so this agent first tells the launcher it was torn down (say_stopping) and its
   * host is known alive. When a host dies, mpirun's daemons elsewhere exit at once, and an agent
   * killed outright with them would look as dead as the lost host's own (detect.h). The program
   * then gets the usual grace before its SIGKILL. */
  ag->parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != ag->parent) raise(SIGTERM); /* the parent went before the request took effect */
  /* Orphaned grandchildren of the program come to us, so the final sweep of its process group
   * finds them. */
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  char relay_var[sizeof env.relay + 16] = "";
  if (env.present) {
    char addrs[512];
    host_addresses(addrs, sizeof addrs);
    json_t *extra = json_pack("{s:s}", "addrs", addrs);
    ftl_err crc = FTL_ERR_IO;
    const char *relay = getenv("FTL_RELAY");
    if (relay && !strcmp(relay, "1")) {
      /* Through the host's relay (wire version 3, launcher/relay.h): started by whichever agent of
       * this host comes first. Should it fail, this agent and its program connect directly: the
       * launcher takes both kinds in one gang. */
      core_launch_env via = env;
      ftl_diag rd = {{0}};
      if (ln_relay_address(&env, via.relay, sizeof via.relay, &rd) == FTL_OK &&
          ln_relay_ensure(&env, ag->pl.local_world_size, &ag->relay_pid, &rd) == FTL_OK)
        crc = rz_rdzv_client_open_with(&ag->client, &via, "agent", ag->pl.rank, extra, ftl_deadline_after_ms(15000), &rd);
      if (crc == FTL_OK) snprintf(relay_var, sizeof relay_var, "FTL_RELAY_ADDR=%s", via.relay);
      else FTL_LOG(FTL_LOG_WARN, "agent", "no relay on this host (%s): connecting to the launcher directly", rd.msg);
    }
    if (crc != FTL_OK) {
      env.relay[0] = '\0';
      crc = rz_rdzv_client_open_with(&ag->client, &env, "agent", ag->pl.rank, extra, ftl_deadline_after_ms(15000), d);
      ag->direct_in_relayed = relay && !strcmp(relay, "1");
    }
    json_decref(extra);
    if (crc != FTL_OK) {
      FTL_LOG(FTL_LOG_ERROR, "agent", "cannot reach the launcher at %s: %s", env.addr, d->msg);
      return FTL_EXIT_LAUNCH;
    }
  }
  /* The program's environment: this agent's (the attempt's, as ftl run built it), the job's `env`
   * it carried (FTL_JOB_ENV_*, for the program alone) and where the rank sits, built here and given
   * to execve rather than set in the agent's own; with a relay, the relay's address to report to
   * (FTL_RELAY_ADDR: FTL_RDZV_ADDR stays the launcher's, as every rank has always seen it). */
  char place[4][48];
  snprintf(place[0], sizeof place[0], "RANK=%d", ag->pl.rank);
  snprintf(place[1], sizeof place[1], "WORLD_SIZE=%d", ag->pl.world_size);
  snprintf(place[2], sizeof place[2], "LOCAL_RANK=%d", ag->pl.local_rank);
  snprintf(place[3], sizeof place[3], "LOCAL_WORLD_SIZE=%d", ag->pl.local_world_size);
  char sm_vars[2][192];
  make_sm_dir(ag, sm_vars);
  char pyrun_var[48] = "";
  const char *pyrun = getenv("FTL_PYRUN");
  if (pyrun && !strcmp(pyrun, "1") && ag->client.fd >= 0) {
    /* pyrun.py's socket: its imports and its parking come up it, the activation goes down. */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
      ag->pyrun_fd = sv[0];
      ag->pyrun_child_fd = sv[1];
      snprintf(pyrun_var, sizeof pyrun_var, "FTL_PYRUN_FD=%d", sv[1]);
    } else {
      FTL_LOG(FTL_LOG_WARN, "agent", "no socket for the Python runner (%s): its standby cannot park", strerror(errno));
    }
  }
  char *overrides[9];
  int n_over = 0;
  for (int i = 0; i < 4; i++) overrides[n_over++] = place[i];
  if (relay_var[0]) overrides[n_over++] = relay_var;
  for (int i = 0; i < 2; i++)
    if (sm_vars[i][0]) overrides[n_over++] = sm_vars[i];
  if (pyrun_var[0]) overrides[n_over++] = pyrun_var;
  overrides[n_over] = NULL;
  if (ln_gang_program_env(environ, overrides, prog_env, d)) {
    fprintf(stderr, "ftl rank-agent: %s\n", d->msg);
    return FTL_EXIT_LAUNCH;
  }
  return FTL_EXIT_OK;
}

/* The signals the agent passes to the program's group (SIGCHLD: the program ended). */
static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD};

/* Starts the program in its own process group, its stdout and stderr through pipes to this agent,
 * SIGKILLed if the agent dies. A program that cannot be executed is not an error here: it is
 * reported to the launcher as the rank's exit (127, exec_error). */
static ftl_err spawn_program(agent *ag, char **argv, char **prog_env, ftl_diag *d) {
  ftl_err rc = ln_sigpipe_open(forwarded, sizeof forwarded / sizeof *forwarded, NULL, d);
  if (rc) return rc;
  /* A console whose reader is gone must not kill this agent (console_write); the program gets
   * the default back (an ignored signal would stay ignored across exec). */
  struct sigaction ignore_pipe = {.sa_handler = SIG_IGN};
  sigemptyset(&ignore_pipe.sa_mask);
  sigaction(SIGPIPE, &ignore_pipe, NULL);
  const int reset[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE};
  core_proc_opts po = {.file = argv[0],
                       .argv = argv,
                       .envp = prog_env,
                       .new_group = 1,
                       .pdeath_signal = SIGKILL,
                       .reset_signals = reset,
                       .n_reset_signals = sizeof reset / sizeof *reset,
                       .stdio = {{CORE_PROC_INHERIT, -1}, {CORE_PROC_PIPE, -1}, {CORE_PROC_PIPE, -1}},
                       .keep_fd = ag->pyrun_child_fd};
  rc = core_proc_spawn(&po, &ag->proc, d);
  if (ag->pyrun_child_fd >= 0) close(ag->pyrun_child_fd); /* the program's now */
  ag->pyrun_child_fd = -1;
  if (rc == FTL_ERR_LAUNCH) {
    ag->exec_errno = ag->proc.exec_errno;
    FTL_LOG(FTL_LOG_ERROR, "agent", "%s", d->msg); /* "cannot execute PROGRAM: REASON" */
    return FTL_OK;
  }
  if (rc) return rc;
  ag->out.pipe_fd = ag->proc.fd[1];
  ag->err.pipe_fd = ag->proc.fd[2];
  ag->proc.fd[1] = ag->proc.fd[2] = -1;
  return FTL_OK;
}

/* ---- signals and the activation -------------------------------------------------------------- */

/* Passes an ending signal (or any other) to the program's group; an ending one arms its SIGKILL. */
static void pass_signal(agent *ag, int sig, int ending, const char *by) {
  if (ending && !ag->proc.reaped) say_stopping(&ag->client, &ag->said_stopping, sig, by);
  if (!ag->proc.reaped) core_proc_signal(&ag->proc, sig);
  if (ending && ag->proc.kill_at_ms == FTL_NO_DEADLINE) core_proc_kill_at(&ag->proc, ftl_deadline_after_ms(ag->grace_ms));
}

static void on_signals(agent *ag) {
  int sig;
  while ((sig = ln_sigpipe_next()) != 0) {
    if (sig == SIGCHLD) {
      core_proc_reap(&ag->proc);
      continue;
    }
    int ending = sig == SIGTERM || sig == SIGINT || sig == SIGHUP;
    pass_signal(ag, sig, ending, getppid() != ag->parent ? "parent_gone" : "signal");
  }
}

/* The attempt's folder and the rank's log files in it (none for a parked standby). */
static void open_attempt_logs(agent *ag) {
  ftl_diag d = {{0}};
  if (!ag->attempt_dir[0]) return;
  if (ftl_mkdir_p(ag->attempt_dir, &d) != FTL_OK) {
    FTL_LOG(FTL_LOG_WARN, "agent", "%s; rank output is not logged to files", d.msg);
    ag->attempt_dir[0] = '\0';
    return;
  }
  ag->out.log_fd = open_log(ag->attempt_dir, ag->pl.rank, "out");
  ag->err.log_fd = open_log(ag->attempt_dir, ag->pl.rank, "err");
}

/* The launcher made this standby gang an attempt: its folder and logs now, and the held output;
 * a parked Python runner gets the activation itself (it may still be importing: then it reads it
 * once it parks). */
static void activate(agent *ag, const json_t *msg, const char *attempt_dir) {
  ag->standby = 0;
  if (ag->pl.local_rank == 0) atomic_store(&ag->alive.watch_gpus, 1); /* the alive thread's first pass is now */
  if (ag->pyrun_fd >= 0) {
    char *line = json_dumps(msg, JSON_COMPACT);
    if (line) {
      size_t len = strlen(line);
      line[len] = '\n'; /* json_dumps' NUL: the line's end */
      write_all(ag->pyrun_fd, line, len + 1);
      free(line);
    }
  }
  if (ftl_fmt(ag->attempt_dir, sizeof ag->attempt_dir, "%s", attempt_dir)) ag->attempt_dir[0] = '\0';
  open_attempt_logs(ag);
  release_held(&ag->out, ag->prefix);
  release_held(&ag->err, ag->prefix);
}

/* pyrun.py's word, passed to the launcher as this rank's: "parked" (a standby's runner has imported
 * its modules and waits) and "imports" (what the program imported at start-up). Its socket closing
 * only ends the passing on. */
static void on_pyrun(agent *ag) {
  bool eof = false;
  json_t *msg = NULL;
  ftl_diag ignored;
  ftl_err rc = rz_linebuf_fill(&ag->from_pyrun, ag->pyrun_fd, &eof);
  while (rc == FTL_OK && rz_linebuf_next(&ag->from_pyrun, &msg, &ignored) == FTL_OK) {
    const char *type = rz_wire_str(msg, "type", "");
    if (ag->client.fd >= 0 && ((!strcmp(type, "parked") && ag->standby) || !strcmp(type, "imports"))) {
      rz_rdzv_client_send(&ag->client, msg, 0, &ignored);
      continue;
    }
    json_decref(msg);
  }
  if (eof || rc != FTL_OK) {
    close(ag->pyrun_fd);
    ag->pyrun_fd = -1;
  }
}

/* ---- the alive reports ----------------------------------------------------------------------- */

/* The GPUs' turn in the alive thread: a pass when one is due; what changed goes to the launcher. */
static void watch_gpus_turn(alive_reporter *r) {
  if (!atomic_load(&r->watch_gpus) || ftl_clock_ms() < r->gpu_due_ms) return;
  ftl_diag d = {{0}};
  if (!r->gpu && ln_gpu_watch_open(&r->gpu, &d) != FTL_OK) {
    atomic_store(&r->watch_gpus, 0);
    return;
  }
  json_t *msg = ln_gpu_watch_pass(r->gpu);
  if (msg) rz_rdzv_client_send(r->client, msg, 0, &d);
  r->gpu_due_ms = ftl_clock_ms() + ln_gpu_watch_interval_ms();
}

static void *alive_main(void *arg) {
  alive_reporter *r = arg;
  int64_t due = ftl_clock_ms();
  int first = 1;
  for (;;) {
    int64_t now = ftl_clock_ms();
    if (now >= due) {
      /* A report seconds late means this whole process was not scheduled: the launcher may call
       * its host lost for it, so the log says which side was silent. */
      if (!first && now - due > 2000)
        FTL_LOG(FTL_LOG_WARN, "agent", "this alive report is %.1f s late (the agent was not scheduled)",
                (double)(now - due) / 1000.0);
      first = 0;
      int reaped = atomic_load(&r->program_reaped);
      char state[2] = {reaped ? 'X' : core_proc_stat(r->pid, NULL), '\0'};
      long rss = reaped ? -1 : resident_kib(r->pid);
      ftl_diag ignored;
      rz_rdzv_client_send(r->client, json_pack("{s:s, s:s, s:I}", "type", "alive", "state", state, "rss_kb", (json_int_t)rss),
                          1, &ignored);
      due = ftl_clock_ms() + 1000;
      continue;
    }
    watch_gpus_turn(r);
    int64_t wake = due;
    if (atomic_load(&r->watch_gpus) && r->gpu_due_ms < wake) wake = r->gpu_due_ms;
    now = ftl_clock_ms();
    struct pollfd pf = {.fd = r->stop_fd, .events = POLLIN};
    int pr = poll(&pf, 1, wake > now ? (int)(wake - now) : 0);
    if (pr > 0) break;
    if (pr < 0 && errno != EINTR) break;
  }
  return NULL;
}

/* Starts the reports for the program just spawned; without a thread the loop is left to notice
 * nothing, so the failure is logged (the launcher will call the host lost in node_s). */
static void alive_start(agent *ag) {
  alive_reporter *r = &ag->alive;
  r->client = &ag->client;
  r->pid = ag->proc.pid;
  atomic_store(&r->program_reaped, ag->proc.reaped);
  r->stop_fd = eventfd(0, EFD_CLOEXEC);
  int err = r->stop_fd < 0 ? errno : pthread_create(&r->thread, NULL, alive_main, r);
  if (err) {
    FTL_LOG(FTL_LOG_ERROR, "agent", "cannot start the alive reports: %s", strerror(err));
    if (r->stop_fd >= 0) close(r->stop_fd);
    r->stop_fd = -1;
    return;
  }
  r->started = 1;
}

/* Stops the reports and waits for the thread (it is between reports or in a non-blocking send). */
static void alive_stop(agent *ag) {
  alive_reporter *r = &ag->alive;
  if (!r->started) return;
  uint64_t one = 1;
  ssize_t ignored = write(r->stop_fd, &one, sizeof one);
  (void)ignored;
  pthread_join(r->thread, NULL);
  close(r->stop_fd);
  r->stop_fd = -1;
  r->started = 0;
}

/* ---- the launcher's connection --------------------------------------------------------------- */

/* The launcher's connection is done with (its EOF, or the fence): the reports stop first. */
static void close_launcher(agent *ag) {
  alive_stop(ag);
  rz_rdzv_client_close(&ag->client);
}

/* The launcher's messages: signals to pass on (the pings only count as word from it); EOF: it is gone. */
static void on_launcher(agent *ag) {
  bool eof = false;
  json_t *msg = NULL;
  ftl_diag ignored;
  rz_linebuf_fill(&ag->from_launcher, ag->client.fd, &eof);
  ag->heard_ms = ftl_clock_ms();
  while (rz_linebuf_next(&ag->from_launcher, &msg, &ignored) == FTL_OK) {
    int sig = (int)rz_wire_int(msg, "signal", 0);
    const char *type = rz_wire_str(msg, "type", "");
    if (!strcmp(type, "signal") && sig > 0 && sig < 65)
      pass_signal(ag, sig, sig == SIGTERM || sig == SIGINT, "launcher");
    else if (!strcmp(type, "fenced")) /* the relay's last word: why the connection closes */
      FTL_LOG(FTL_LOG_ERROR, "agent", "the host's relay gave up on the launcher: %s", rz_wire_str(msg, "reason", "?"));
    else if (!strcmp(type, "activate") && ag->standby)
      activate(ag, msg, rz_wire_str(msg, "attempt_dir", ""));
    json_decref(msg);
  }
  if (eof) {
    /* The launcher is gone: nobody would notice this rank any more, so it ends now. */
    FTL_LOG(FTL_LOG_ERROR, "agent", "lost the launcher; ending the program");
    close_launcher(ag);
    if (!ag->proc.reaped) core_proc_signal(&ag->proc, SIGKILL);
  }
}

/* One turn's timer: the fence (no word from the launcher). */
static void agent_timers(agent *ag) {
  rz_rdzv_client *client = &ag->client;
  if (client->fd >= 0 && !ag->proc.reaped && ag->fence_ms > 0 && ftl_clock_ms() - ag->heard_ms > ag->fence_ms) {
    FTL_LOG(FTL_LOG_ERROR, "agent", "no word from the launcher for %.1f s: ending the program",
            (double)(ftl_clock_ms() - ag->heard_ms) / 1000.0);
    close_launcher(ag);
    core_proc_signal(&ag->proc, SIGKILL);
  }
}

/* ---- the loop -------------------------------------------------------------------------------- */

/* A turn's handler that took more than a second: said, with what it was doing, since the loop is
 * what passes the program's output on and signals to it. */
static void note_slow(int64_t t0_ms, const char *what) {
  int64_t took = ftl_clock_ms() - t0_ms;
  if (took > 1000) FTL_LOG(FTL_LOG_WARN, "agent", "%s took %.1f s", what, (double)took / 1000.0);
}

/* Until the program is reaped and its output drained: its output passed through, signals passed
 * on, the launcher heard; the alive reports (alive_main) run beside it until then. */
static void watch_program(agent *ag, ftl_diag *d) {
  int64_t parsed;
  ag->grace_ms = 5000;
  if (ftl_parse_i64(getenv("FTL_KILL_GRACE_MS"), 0, 3600000, &parsed) == FTL_OK) ag->grace_ms = parsed;
  /* The launcher pings every second. An agent that hears nothing for FTL_NODE_TIMEOUT_MS is cut
   * off (its link is down): the launcher has already given up on this host, so the rank ends
   * here rather than linger beside the next attempt. */
  ag->heard_ms = ftl_clock_ms();
  if (ftl_parse_i64(getenv("FTL_NODE_TIMEOUT_MS"), 1, INT64_MAX / 4, &parsed) == FTL_OK) {
    ag->fence_ms = parsed;
    /* A direct connection: a dead or cut-off launcher host ends it after node_s without a word
     * (core_net_set_peer_timeout). In a gang of relays the launcher pings as seldom as it pings
     * them (detect.h), so silence alone is judged over four of the longest pings. */
    core_net_set_peer_timeout(ag->client.fd, parsed); /* nothing on a relay's Unix socket */
    if (ag->direct_in_relayed && ag->fence_ms < 4 * FTL_CADENCE_RELAY_PING_MAX_MS)
      ag->fence_ms = 4 * FTL_CADENCE_RELAY_PING_MAX_MS;
  }
  /* The agent says it is alive every second, with its program's state ('X': exited, output still
   * draining): the launcher notices a lost host by the silence, and a stopped (SIGSTOP) program by
   * its state. Also after the program is reaped, while its last output drains (a stray grandchild
   * may hold the pipes): until the exit report goes out, silence would read as a lost host. */
  if (ag->client.fd >= 0) alive_start(ag);
  while (!ag->proc.reaped || ag->out.pipe_fd >= 0 || ag->err.pipe_fd >= 0) {
    agent_timers(ag);
    struct pollfd fds[5] = {{.fd = ln_sigpipe_fd(), .events = POLLIN},
                            {.fd = ag->client.fd, .events = POLLIN}, /* launcher gone: EOF */
                            {.fd = ag->out.pipe_fd, .events = POLLIN},
                            {.fd = ag->err.pipe_fd, .events = POLLIN},
                            {.fd = ag->pyrun_fd, .events = POLLIN}};
    /* Whether the program had ended before this poll began: only then does a quiet poll mean that
     * everything it wrote has been read. A program reaped after the poll returned (it wrote its
     * last lines and exited while this agent was not scheduled) may have left output in the pipes:
     * the agent polls once more for it. */
    int ended_before_poll = ag->proc.reaped;
    int timeout = ended_before_poll ? 200 : ftl_deadline_left_ms(ag->proc.kill_at_ms);
    if (timeout > 200) timeout = 200;
    int pr = poll(fds, 5, timeout);
    if (pr < 0 && errno != EINTR) break;
    if (!ag->proc.reaped) core_proc_step(&ag->proc); /* the SIGKILL a grace after an ending signal */
    atomic_store(&ag->alive.program_reaped, ag->proc.reaped);
    if (pr <= 0) {
      /* 200 ms without output or EOF from an ended program: its pipes are held open by a stray
       * grandchild, whose end the agent does not wait for. */
      if (ended_before_poll && pr == 0) break;
      continue;
    }
    int64_t t0 = ftl_clock_ms();
    if (fds[0].revents & POLLIN) on_signals(ag);
    atomic_store(&ag->alive.program_reaped, ag->proc.reaped);
    if (ag->client.fd >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) on_launcher(ag);
    if (ag->pyrun_fd >= 0 && (fds[4].revents & (POLLIN | POLLHUP | POLLERR))) on_pyrun(ag);
    note_slow(t0, "handling signals and the launcher's messages");
    t0 = ftl_clock_ms();
    if (ag->out.pipe_fd >= 0 && (fds[2].revents & (POLLIN | POLLHUP | POLLERR))) pump(&ag->out, ag->prefix);
    note_slow(t0, "passing on the program's stdout (log file and console)");
    t0 = ftl_clock_ms();
    if (ag->err.pipe_fd >= 0 && (fds[3].revents & (POLLIN | POLLHUP | POLLERR))) pump(&ag->err, ag->prefix);
    note_slow(t0, "passing on the program's stderr (log file and console)");
  }
  if (!ag->proc.reaped) core_proc_wait(&ag->proc, d);
  atomic_store(&ag->alive.program_reaped, 1);
  alive_stop(ag); /* before the exit report: the launcher hears nothing of this rank after it */
  core_proc_signal(&ag->proc, SIGKILL); /* whatever the program left behind in its group goes with it */
}

/* ---- the end: the exit report, the entry point ----------------------------------------------- */

/* How the program ended: in the rank's exit record and to the launcher. Returns the agent's exit code. */
static int report_exit(agent *ag, int64_t start_us, ftl_diag *d) {
  const char *attempt_dir = ag->attempt_dir[0] ? ag->attempt_dir : NULL;
  if (ag->out.console_dropped + ag->err.console_dropped > 0 && ag->err.log_fd >= 0) {
    char note[200];
    int len = snprintf(note, sizeof note,
                       "ftl rank-agent: %ld line(s) were not shown on the console (it took no output for %d ms); "
                       "this rank's log files hold them all\n",
                       ag->out.console_dropped + ag->err.console_dropped, (int)CONSOLE_STALL_MS);
    if (len > 0) write_all(ag->err.log_fd, note, (size_t)len);
  }
  int status = ag->proc.status;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (ag->exec_errno) code = 127;
  write_exit_record(attempt_dir, ag->pl.rank, code, sig, start_us);
  if (ag->standby && ag->err.held.len) {
    /* A standby rank that ended before its activation: the end of what it said on stderr is the
     * one clue to why (the launcher logs that the standby was lost). */
    size_t n = ag->err.held.len, keep = n < 2048 ? n : 2048;
    fprintf(stderr, "ftl rank-agent: standby rank %d ended before its activation; the end of its stderr:\n%.*s%s",
            ag->pl.rank, (int)keep, ag->err.held.p + n - keep, ag->err.held.p[n - 1] == '\n' ? "" : "\n");
  }
  if (ag->client.fd >= 0) {
    json_t *msg = json_pack("{s:s, s:i, s:i, s:s, s:I}", "type", "exit", "exit_code", code, "signal", sig, "exec_error",
                            ag->exec_errno ? strerror(ag->exec_errno) : "", "wall_us", (json_int_t)ftl_wall_us());
    /* A standby rank that ended unactivated: the launcher names why from its last words. */
    if (msg && ag->standby && ag->err.held.len) {
      size_t n = ag->err.held.len, keep = n < 400 ? n : 400;
      json_object_set_new(msg, "stderr_tail", json_stringn(ag->err.held.p + n - keep, keep));
    }
    rz_rdzv_client_send(&ag->client, msg, 0, d);
  }
  return sig ? 128 + sig : code;
}

int ln_rank_agent_main(int argc, char **argv) {
  int64_t start_us = ftl_wall_us();
  ftl_diag d = {{0}};
  agent ag = {.client = {.fd = -1},
              .alive = {.stop_fd = -1},
              .proc = {.pid = -1, .fd = {-1, -1, -1}, .kill_at_ms = FTL_NO_DEADLINE, .term_at_ms = FTL_NO_DEADLINE},
              .out = {.pipe_fd = -1, .log_fd = -1, .console_fd = STDOUT_FILENO},
              .err = {.pipe_fd = -1, .log_fd = -1, .console_fd = STDERR_FILENO},
              .pyrun_fd = -1,
              .pyrun_child_fd = -1};
  int exit_code = FTL_EXIT_LAUNCH;
  char **prog_env = NULL;

  if (argc < 3 || strcmp(argv[1], "--") != 0) {
    fprintf(stderr, "ftl rank-agent: usage: ftl rank-agent -- PROGRAM [ARGS...] (started by `ftl run`)\n");
    return FTL_EXIT_USAGE;
  }
  int setup = agent_setup(&ag, &prog_env, &d);
  if (setup != FTL_EXIT_OK) {
    if (!prog_env) { /* said on stderr */
      drop_sm_dir(&ag);
      return setup;
    }
    goto out;                    /* the launcher could not be reached (logged) */
  }

  const char *standby = getenv("FTL_STANDBY");
  ag.standby = standby && strcmp(standby, "1") == 0 && ag.client.fd >= 0;
  if (ag.standby) {
    /* Nothing under the run directory, nothing on the console, until the activation. */
    ag.out.holding = ag.err.holding = 1;
    core_buf_init(&ag.out.held, STANDBY_HELD_MAX);
    core_buf_init(&ag.err.held, STANDBY_HELD_MAX);
  } else {
    const char *attempt_dir = getenv("FTL_ATTEMPT_DIR");
    if (attempt_dir && ftl_fmt(ag.attempt_dir, sizeof ag.attempt_dir, "%s", attempt_dir)) ag.attempt_dir[0] = '\0';
    open_attempt_logs(&ag);
  }
  if (!ag.standby && ag.client.fd >= 0 && ag.pl.local_rank == 0) {
    /* The host's GPUs before its rank starts (a failed one ends the attempt at once, supervise.c);
     * the alive thread goes on every FTL_GPU_HEALTH_MS. */
    ftl_diag gd = {{0}};
    if (ln_gpu_watch_open(&ag.alive.gpu, &gd) == FTL_OK) {
      json_t *msg = ln_gpu_watch_pass(ag.alive.gpu);
      if (msg) rz_rdzv_client_send(&ag.client, msg, 0, &gd);
      ag.alive.gpu_due_ms = ftl_clock_ms() + ln_gpu_watch_interval_ms();
      atomic_store(&ag.alive.watch_gpus, 1);
    }
  }
  if (spawn_program(&ag, argv + 2, prog_env, &d)) {
    FTL_LOG(FTL_LOG_ERROR, "agent", "%s", d.msg);
    goto out;
  }
  if (ag.pl.world_size > 1) snprintf(ag.prefix, sizeof ag.prefix, "[rank %d] ", ag.pl.rank);
  watch_program(&ag, &d);
  exit_code = report_exit(&ag, start_us, &d);
  /* At once, before the waits below: a gang torn down by mpirun is SIGKILLed a second after. */
  drop_sm_dir(&ag);
out:
  rz_linebuf_free(&ag.from_launcher);
  rz_linebuf_free(&ag.from_pyrun);
  if (ag.pyrun_fd >= 0) close(ag.pyrun_fd);
  if (ag.pyrun_child_fd >= 0) close(ag.pyrun_child_fd);
  ln_argv_free(prog_env);
  if (ag.client.fd >= 0) rz_rdzv_client_close(&ag.client);
  /* The relay this agent started ends once the host's other agents have; mpirun (which waits for
   * this agent) then outlives it. Bounded: an agent that never comes is waited for a second. */
  ln_relay_wait(ag.relay_pid, ftl_deadline_after_ms(ag.grace_ms + 5000));
  if (ag.out.log_fd >= 0) close(ag.out.log_fd);
  if (ag.err.log_fd >= 0) close(ag.err.log_fd);
  if (ag.out.pipe_fd >= 0) close(ag.out.pipe_fd);
  if (ag.err.pipe_fd >= 0) close(ag.err.pipe_fd);
  core_buf_free(&ag.out.held);
  core_buf_free(&ag.err.held);
  ln_gpu_watch_close(ag.alive.gpu);
  core_proc_close(&ag.proc);
  drop_sm_dir(&ag);
  return exit_code;
}
