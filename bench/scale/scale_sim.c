/* bench/scale/scale_sim.c: a whole simulated gang behind one fake `mpirun` (bench/scale/run.sh).
 *
 * The real `ftl run` starts this program as its mpirun (run.sh puts a folder holding a link named
 * mpirun first on PATH). It reads the world size from mpirun's `-n`, the rendezvous address and
 * token from the environment the launcher built for the attempt, and its own options from the
 * program's arguments after `--` (the job spec's args). It then plays every rank and every rank's
 * agent over loopback TCP with the real wire protocol (docs/formats/rendezvous-wire.md): a few
 * worker processes (each its own descriptor limit), each multiplexing thousands of connections with
 * epoll. With --ranks-per-host K (default 8) it plays hosts of K ranks as wire version 3 has them:
 * one relay connection per host, the agents' and ranks' messages forwarded in envelopes (fwd), the
 * steady state batched every 250 ms (each rank's latest step, each agent's due alive), the
 * launcher's go, signal and ping read once per host; --ranks-per-host 0 plays the version 2 shape,
 * two connections per rank. It measures, from the gang's side:
 *   attempt 0: the rendezvous (the last hello sent to the last "go" read), the launcher's CPU and RSS
 *              in steady state (/proc/<launcher>/schedstat and status; the launcher is our parent), the
 *              detection of a killed rank (its agent's exit report to the first "signal" any agent
 *              reads) and the tear-down (the exit report to the last agent signalled and gone);
 *   attempt 1: the restart's rendezvous and the restart's gap (the kill to this attempt's start),
 *              then a clean end (every rank says bye, every agent reports exit 0).
 * Each attempt appends one line of key=value figures to the --out file; run.sh makes the table.
 *
 * Not here: the table (run.sh), anything of a real rank (no MPI, no program, no checkpoint). It is
 * a benchmark program, not library code: it exits with its own codes (0, 1 after the kill, as
 * mpirun does when a rank died, 2 on an error, with the reason on stderr). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rendezvous/wire.h" /* the proof of the token (rz_wire_proof) */

enum { ROLE_AGENT = 0, ROLE_RANK = 1, ROLE_RELAY = 2 };
enum { OUT_CAP = 8192, RELAY_OUT_CAP = 1 << 20, IN_CAP = 4096, MAX_WORKERS = 64, LINE_MAX = 65536 };
enum { STEP_PERIOD_MS = 250, ALIVE_PERIOD_MS = 1000, DEADLINE_MS = 180000 };

typedef struct conn {
  int fd;
  int rank;
  int role;
  int connected;
  int closed;
  int challenged; /* the launcher's challenge was read and the hello sent (wire version 4) */
  char in[IN_CAP];
  size_t in_len;
  char *out;
  size_t out_len, out_cap;
  int64_t next_batch; /* a relay: its next batch (0: its ranks have not gone yet) */
} conn;

typedef struct opts {
  int world;
  int attempt;
  int kill_rank;
  int steady_ms;
  int per_worker;
  int rate; /* ranks connecting per second, all workers together */
  int per_host; /* ranks per simulated host behind one relay connection; 0: a connection per rank and agent */
  const char *out;
  char host[128];
  char port[16];
  const char *token;
} opts;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static int64_t now_ms(void) { return now_ns() / 1000000; }
static int64_t wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("ftl-scale-sim: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  _exit(2);
}

static int parse_int(const char *s, int lo, int hi, const char *what) {
  char *end = NULL;
  errno = 0;
  long v = s ? strtol(s, &end, 10) : 0;
  if (!s || errno || end == s || *end || v < lo || v > hi)
    die("%s must be an integer in %d..%d, not '%s'", what, lo, hi, s ? s : "");
  return (int)v;
}

/* The integer at the start of s (a field of a launcher's line), clamped to lo..hi. */
static int parse_int_prefix(const char *s, int lo, int hi) {
  long v = strtol(s, NULL, 10);
  return (int)(v < lo ? lo : v > hi ? hi : v);
}

/* Raises the soft descriptor limit to the hard one and checks that `need` fit. */
static void raise_fd_limit(long need) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) die("getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) die("setrlimit(RLIMIT_NOFILE): %s", strerror(errno));
  }
  if (rl.rlim_max != RLIM_INFINITY && (long)rl.rlim_max < need)
    die("a worker needs %ld descriptors and the hard limit (RLIMIT_NOFILE, ulimit -Hn) is %ld: use a smaller "
        "--per-worker or raise the limit",
        need, (long)rl.rlim_max);
}

/* --- one worker: ranks [lo, hi) ---------------------------------------------------------------- */

typedef struct worker {
  const opts *o;
  int lo, hi, n;
  int ctl; /* socketpair to the parent */
  int ep;
  conn *agents, *ranks;
  conn *hosts;      /* relay mode: one connection per host of o->per_host ranks */
  char *gone;       /* relay mode, per rank: 1 its rank's connection closed, 2 its agent's too */
  int64_t *next_step, *next_alive;
  int64_t step_no;
  int connected_upto; /* ranks whose connections were started */
  int go_count, signalled, agents_open, ranks_open;
  int64_t first_hello_ns, last_hello_ns, last_go_ns;
  int64_t first_signal_ns, all_signal_ns, gone_ns;
  int reported_go, reported_gone, steady, bye;
  int batch_ms, samples; /* relay mode: the launcher's cadence (250 ms and one number until it says) */
} worker;

__attribute__((format(printf, 2, 3))) static void ctl_say(worker *w, const char *fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof line) die("control line too long");
  if (write(w->ctl, line, (size_t)n) != n) die("worker: write to the parent: %s", strerror(errno));
}

static void flush(worker *w, conn *c) {
  while (c->out_len > 0 && !c->closed) {
    ssize_t n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      memmove(c->out, c->out + n, c->out_len - (size_t)n);
      c->out_len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
      epoll_ctl(w->ep, EPOLL_CTL_MOD, c->fd, &ev);
      return;
    }
    return; /* the launcher closed it: the EPOLLIN side sees the end */
  }
}

/* Queues one line; `droppable` lines (steps, alive) are dropped while the launcher is behind. */
__attribute__((format(printf, 4, 5))) static void say(worker *w, conn *c, int droppable, const char *fmt, ...) {
  if (c->closed) return;
  static char line[LINE_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n + 1 >= sizeof line) die("message too long");
  line[n++] = '\n';
  if (droppable && c->out_len > c->out_cap / 2) return;
  if (c->out_len + (size_t)n > c->out_cap)
    die("rank %d: the launcher reads nothing (%zu bytes queued)", c->rank, c->out_len);
  memcpy(c->out + c->out_len, line, (size_t)n);
  c->out_len += (size_t)n;
  if (c->connected) flush(w, c);
}

static void close_conn(worker *w, conn *c) {
  if (c->closed) return;
  if (c->connected) flush(w, c);
  epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->closed = 1;
  if (c->role == ROLE_RANK)
    w->ranks_open--;
  else
    w->agents_open--; /* an agent's, or a relay's */
}

static void start_conn(worker *w, conn *c, int rank, int role) {
  const opts *o = w->o;
  c->rank = rank;
  c->challenged = 0;
  c->role = role;
  c->out_cap = role == ROLE_RELAY ? RELAY_OUT_CAP : OUT_CAP;
  if (!c->out && !(c->out = malloc(c->out_cap))) die("out of memory");
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) die("socket: %s (rank %d): the descriptor limit (RLIMIT_NOFILE)?", strerror(errno), rank);
  /* Spread the sources over 127.0.0.2..: 2 x 16k connections to one port need more than the one
   * source address's ephemeral ports; the port is chosen at connect time. */
  int one = 1;
  setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in src = {.sin_family = AF_INET, .sin_port = 0};
  src.sin_addr.s_addr = htonl(0x7f000002u + (uint32_t)((rank * 2 + (role & 1)) / 8192));
  if (bind(c->fd, (struct sockaddr *)&src, sizeof src) != 0) die("bind: %s", strerror(errno));
  struct sockaddr_in dst = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)parse_int(o->port, 1, 65535, "the rendezvous port"))};
  if (inet_pton(AF_INET, o->host, &dst.sin_addr) != 1) die("rendezvous host %s is not an IPv4 address", o->host);
  int r = connect(c->fd, (struct sockaddr *)&dst, sizeof dst);
  if (r != 0 && errno != EINPROGRESS) die("connect to %s:%s: %s", o->host, o->port, strerror(errno));
  struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
  if (epoll_ctl(w->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) die("epoll_ctl: %s", strerror(errno));
  if (role == ROLE_RANK)
    w->ranks_open++;
  else
    w->agents_open++;
  /* The hello waits for the launcher's challenge (send_hellos). */
}

/* The launcher's challenge came (its first line): the hello with the proof of the token for it
 * (rendezvous/wire.h), as a real agent, rank or relay sends it. */
static void send_hellos(worker *w, conn *c, const char *line) {
  const opts *o = w->o;
  int rank = c->rank, role = c->role;
  const char *p = strstr(line, "\"nonce\":\"");
  char nonce[FTL_WIRE_NONCE_HEX + 1] = "", proof[FTL_WIRE_PROOF_HEX + 1];
  if (!strstr(line, "\"type\":\"challenge\"") || !p || strlen(p + 9) < FTL_WIRE_NONCE_HEX + 1)
    die("rank %d: the launcher's first line is not a challenge: %.200s", rank, line);
  memcpy(nonce, p + 9, FTL_WIRE_NONCE_HEX);
  ftl_diag d;
  const char *as = role == ROLE_RELAY ? "relay" : role == ROLE_AGENT ? "agent" : "rank";
  if (rz_wire_proof(o->token, nonce, as, role == ROLE_RELAY ? -1 : rank, proof, &d) != FTL_OK)
    die("rank %d: cannot make the proof: %s", rank, d.msg);
  c->challenged = 1;
  int64_t t = now_ns();
  if (!w->first_hello_ns) w->first_hello_ns = t;
  w->last_hello_ns = t;
  if (role == ROLE_RELAY) {
    /* The relay's hello, then every agent's and rank's of its host, as the relay forwards them
     * (proven to the relay: no proof in the envelope). */
    int end = rank + o->per_host < w->hi ? rank + o->per_host : w->hi;
    say(w, c, 0, "{\"type\":\"relay\",\"version\":%d,\"proof\":\"%s\",\"host\":\"sim-host\",\"pid\":%d}",
        FTL_WIRE_VERSION, proof, (int)getpid());
    for (int q = rank; q < end; q++)
      for (int k = 0; k < 2; k++)
        say(w, c, 0,
            "{\"type\":\"fwd\",\"role\":\"%s\",\"rank\":%d,\"msg\":{\"type\":\"%s\",\"version\":%d,"
            "\"rank\":%d,\"world_size\":%d,\"host\":\"sim-host\",\"pid\":%d,\"wall_us\":%" PRId64 "%s}}",
            k ? "rank" : "agent", q, k ? "rank" : "agent", FTL_WIRE_VERSION, q, o->world, (int)getpid(), wall_us(),
            k ? "" : ",\"addrs\":\"127.0.0.1\"");
    return;
  }
  say(w, c, 0,
      "{\"type\":\"%s\",\"version\":%d,\"proof\":\"%s\",\"rank\":%d,\"world_size\":%d,\"host\":\"%s\",\"pid\":%d,"
      "\"wall_us\":%" PRId64 "%s}",
      role == ROLE_AGENT ? "agent" : "rank", FTL_WIRE_VERSION, proof, rank, o->world, "sim-host", (int)getpid(), wall_us(),
      role == ROLE_AGENT ? ",\"addrs\":\"127.0.0.1\"" : "");
}

/* The agent heard "signal": it says it is stopping, its program dies of the signal, it reports. */
static void agent_signalled(worker *w, conn *a, int sig) {
  conn *r = &w->ranks[a->rank - w->lo];
  int64_t t = now_ns();
  if (!w->first_signal_ns) w->first_signal_ns = t;
  w->signalled++;
  say(w, a, 0, "{\"type\":\"stopping\",\"signal\":%d,\"by\":\"launcher\"}", sig);
  close_conn(w, r);
  say(w, a, 0, "{\"type\":\"exit\",\"exit_code\":-1,\"signal\":%d,\"exec_error\":\"\",\"wall_us\":%" PRId64 "}", sig,
      wall_us());
  flush(w, a); /* the agent's connection stays open until the parent's Q (on_command) */
}

/* --- relay mode: a host's agents and ranks behind one connection ------------------------------ */

static int host_end(const worker *w, const conn *h) { return h->rank + w->o->per_host < w->hi ? h->rank + w->o->per_host : w->hi; }

/* Rank r's rank connection, then its agent's, ends at the relay: `closed` for each, the agent's
 * exit report (and, when signalled, its `stopping` word) first. sig < 0: a clean end with bye. */
static void relay_end_rank(worker *w, conn *h, int r, int sig, int signalled) {
  int i = r - w->lo;
  if (w->gone[i] == 2) return;
  if (signalled) say(w, h, 0, "{\"type\":\"fwd\",\"role\":\"agent\",\"rank\":%d,\"msg\":{\"type\":\"stopping\",\"signal\":%d,\"by\":\"launcher\"}}", r, sig);
  if (sig < 0) say(w, h, 0, "{\"type\":\"fwd\",\"role\":\"rank\",\"rank\":%d,\"msg\":{\"type\":\"bye\"}}", r);
  say(w, h, 0, "{\"type\":\"closed\",\"role\":\"rank\",\"rank\":%d}", r);
  say(w, h, 0,
      "{\"type\":\"fwd\",\"role\":\"agent\",\"rank\":%d,\"msg\":{\"type\":\"exit\",\"exit_code\":%d,\"signal\":%d,"
      "\"exec_error\":\"\",\"wall_us\":%" PRId64 "}}",
      r, sig < 0 ? 0 : -1, sig < 0 ? 0 : sig, wall_us());
  say(w, h, 0, "{\"type\":\"closed\",\"role\":\"agent\",\"rank\":%d}", r);
  w->gone[i] = 2;
}

static void on_relay_line(worker *w, conn *h, const char *line) {
  int end = host_end(w, h);
  if (strstr(line, "\"type\":\"cadence\"")) {
    /* The launcher's cadence (a relay's batch period and samples per step entry), as launcher/relay.c
     * takes it: every relay of the gang gets the same. */
    const char *ms = strstr(line, "\"batch_ms\":"), *k = strstr(line, "\"samples\":");
    if (ms) w->batch_ms = parse_int_prefix(ms + 11, 50, 60000);
    if (k) w->samples = parse_int_prefix(k + 10, 1, 16);
  } else if (strstr(line, "\"type\":\"go\"")) {
    for (int r = h->rank; r < end; r++) {
      w->go_count++;
      say(w, h, 0,
          "{\"type\":\"fwd\",\"role\":\"rank\",\"rank\":%d,\"msg\":{\"type\":\"ready\",\"rendezvous_ms\":1,"
          "\"mpi_init_ms\":0,\"comm_init_ms\":0,\"backend\":\"sim\",\"device\":-1,\"local_rank\":%d,"
          "\"local_world_size\":%d,\"parked_ms\":-1}}",
          r, r - h->rank, end - h->rank);
      say(w, h, 0, "{\"type\":\"fwd\",\"role\":\"rank\",\"rank\":%d,\"msg\":{\"type\":\"first_step\",\"step\":0,\"first_step_ms\":1}}", r);
      w->next_step[r - w->lo] = 1; /* reporting: its steps go in the host's batches */
    }
    w->last_go_ns = now_ns();
    h->next_batch = now_ms() + w->batch_ms * (int64_t)((h->rank / w->o->per_host) % 64) / 64;
  } else if (strstr(line, "\"type\":\"fail\"")) {
    die("host of rank %d: the launcher failed the rendezvous: %s", h->rank, line);
  } else if (strstr(line, "\"type\":\"signal\"")) {
    const char *p = strstr(line, "\"signal\":");
    int sig = 15;
    if (p && (p = strstr(p + 9, "\"signal\":"))) sig = (int)strtol(p + 9, NULL, 10);
    int64_t t = now_ns();
    if (!w->first_signal_ns) w->first_signal_ns = t;
    for (int r = h->rank; r < end; r++)
      if (w->gone[r - w->lo] != 2) {
        relay_end_rank(w, h, r, sig, 1);
        w->signalled++;
      }
    flush(w, h); /* the relay's connection stays open until the parent's Q (on_command) */
  }
}

/* The host's batch: every rank's latest step (with the compute of each of its steps of the period,
 * one every 250 ms, once the launcher said its cadence), and the alive of each agent whose second is
 * up. */
static void relay_batch(worker *w, conn *h) {
  static char line[LINE_MAX];
  int64_t t = now_ms();
  size_t len = 0;
  int end = host_end(w, h), n = 0;
  int k = w->batch_ms / STEP_PERIOD_MS;
  if (k < 1) k = 1;
  if (k > w->samples) k = w->samples;
  char compute[16 * 8 + 3] = "10.0";
  if (w->samples) {
    size_t c = 0;
    for (int i = 0; i < k; i++) c += (size_t)snprintf(compute + c, sizeof compute - c, "%s10.000", i ? "," : "[");
    snprintf(compute + c, sizeof compute - c, "]");
  }
  len += (size_t)snprintf(line + len, sizeof line - len, "{\"type\":\"batch\",\"step\":[");
  for (int r = h->rank; r < end; r++) {
    if (w->gone[r - w->lo] || !w->next_step[r - w->lo]) continue;
    len += (size_t)snprintf(line + len, sizeof line - len, "%s[%d,%" PRId64 ",%s]", n++ ? "," : "", r, ++w->step_no, compute);
  }
  len += (size_t)snprintf(line + len, sizeof line - len, "],\"alive\":[");
  n = 0;
  for (int r = h->rank; r < end; r++) {
    int i = r - w->lo;
    if (w->gone[i] == 2 || t < w->next_alive[i]) continue;
    len += (size_t)snprintf(line + len, sizeof line - len, "%s[%d,\"S\",1000]", n++ ? "," : "", r);
    w->next_alive[i] += ALIVE_PERIOD_MS;
    if (w->next_alive[i] < t) w->next_alive[i] = t + ALIVE_PERIOD_MS;
  }
  if (len + 3 >= sizeof line) die("a batch of %d ranks is longer than %d bytes", end - h->rank, LINE_MAX);
  say(w, h, 1, "%s]}", line);
}

static void on_line(worker *w, conn *c, const char *line) {
  if (!c->challenged) {
    send_hellos(w, c, line);
    return;
  }
  if (c->role == ROLE_RELAY) {
    on_relay_line(w, c, line);
    return;
  }
  if (c->role == ROLE_RANK) {
    if (strstr(line, "\"type\":\"go\"")) {
      w->go_count++;
      w->last_go_ns = now_ns();
      say(w, c, 0,
          "{\"type\":\"ready\",\"rendezvous_ms\":1,\"mpi_init_ms\":0,\"comm_init_ms\":0,\"backend\":\"sim\","
          "\"device\":-1,\"local_rank\":%d,\"local_world_size\":%d,\"parked_ms\":-1}",
          c->rank, w->o->world);
      say(w, c, 0, "{\"type\":\"first_step\",\"step\":0,\"first_step_ms\":1}");
      w->next_step[c->rank - w->lo] = now_ms() + STEP_PERIOD_MS * (int64_t)(c->rank % 64) / 64;
    } else if (strstr(line, "\"type\":\"fail\"")) {
      die("rank %d: the launcher failed the rendezvous: %s", c->rank, line);
    }
    return;
  }
  if (strstr(line, "\"type\":\"signal\"")) {
    const char *p = strstr(line, "\"signal\":");
    int sig = 15;
    if (p && (p = strstr(p + 9, "\"signal\":"))) sig = (int)strtol(p + 9, NULL, 10);
    agent_signalled(w, c, sig);
  }
}

static void on_readable(worker *w, conn *c) {
  for (;;) {
    if (c->closed) return;
    ssize_t n = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len - 1, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      /* The launcher closed it: after the attempt's end that is normal; before, it is lost. */
      close_conn(w, c);
      return;
    }
    c->in_len += (size_t)n;
    c->in[c->in_len] = '\0';
    char *start = c->in, *nl;
    while ((nl = memchr(start, '\n', c->in_len - (size_t)(start - c->in)))) {
      *nl = '\0';
      on_line(w, c, start);
      if (c->closed) return;
      start = nl + 1;
    }
    size_t left = c->in_len - (size_t)(start - c->in);
    memmove(c->in, start, left);
    c->in_len = left;
    if (c->in_len >= sizeof c->in - 1) die("rank %d: a launcher line longer than %d bytes", c->rank, IN_CAP);
  }
}

static void on_event(worker *w, conn *c, uint32_t events) {
  if (c->closed) return;
  if (!c->connected && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err) die("rank %d: connect: %s", c->rank, strerror(err));
    c->connected = 1;
  }
  if (events & EPOLLOUT) {
    flush(w, c);
    if (!c->out_len && !c->closed) {
      struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
      epoll_ctl(w->ep, EPOLL_CTL_MOD, c->fd, &ev);
    }
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(w, c);
}

/* The reports of steady state: each rank's step every 250 ms, each agent's alive every second
 * (relay mode: one batch per host every 250 ms). */
static void tick(worker *w) {
  int64_t t = now_ms();
  if (w->hosts) {
    for (int k = 0; k * w->o->per_host < w->n; k++) {
      conn *h = &w->hosts[k];
      if (!h->next_batch || t < h->next_batch || h->closed || !h->connected) continue;
      relay_batch(w, h);
      h->next_batch += w->batch_ms;
      if (h->next_batch < t) h->next_batch = t + w->batch_ms;
    }
    return;
  }
  for (int i = 0; i < w->n; i++) {
    conn *r = &w->ranks[i], *a = &w->agents[i];
    if (w->next_step[i] && t >= w->next_step[i] && !r->closed && r->connected) {
      say(w, r, 1, "{\"type\":\"step\",\"step\":%" PRId64 ",\"compute_ms\":10.0}", ++w->step_no);
      w->next_step[i] += STEP_PERIOD_MS;
      if (w->next_step[i] < t) w->next_step[i] = t + STEP_PERIOD_MS;
    }
    if (w->next_alive[i] && t >= w->next_alive[i] && !a->closed && a->connected) {
      say(w, a, 1, "{\"type\":\"alive\",\"state\":\"S\",\"rss_kb\":1000}");
      w->next_alive[i] += ALIVE_PERIOD_MS;
      if (w->next_alive[i] < t) w->next_alive[i] = t + ALIVE_PERIOD_MS;
    }
  }
}

static void on_command(worker *w, const char *cmd) {
  if (cmd[0] == 'Q') {
    /* The parent has written its figures: the torn-down gang's connections close now, as a real
     * gang's do once its agents are gone (the launcher may then end mpirun at once, not before). */
    if (w->hosts) {
      for (int k = 0; k * w->o->per_host < w->n; k++) close_conn(w, &w->hosts[k]);
    } else {
      for (int i = 0; i < w->n; i++) {
        close_conn(w, &w->ranks[i]);
        close_conn(w, &w->agents[i]);
      }
    }
    _exit(0);
  }
  if (cmd[0] == 'K') {
    int rank = parse_int(cmd + 2, 0, w->o->world - 1, "the rank to kill");
    if (rank < w->lo || rank >= w->hi) die("kill of rank %d sent to the wrong worker", rank);
    int64_t t = now_ns();
    if (w->hosts) {
      /* Its relay forwards the agent's exit report at once: nothing of the kill is batched. */
      relay_end_rank(w, &w->hosts[(rank - w->lo) / w->o->per_host], rank, 9, 0);
    } else {
      conn *r = &w->ranks[rank - w->lo], *a = &w->agents[rank - w->lo];
      close_conn(w, r);
      say(w, a, 0, "{\"type\":\"exit\",\"exit_code\":-1,\"signal\":9,\"exec_error\":\"\",\"wall_us\":%" PRId64 "}",
          wall_us());
      close_conn(w, a);
    }
    w->signalled++; /* it will hear no signal: it is gone */
    ctl_say(w, "k %" PRId64 " %" PRId64 "\n", t, wall_us());
  } else if (cmd[0] == 'B' && w->hosts) {
    for (int k = 0; k * w->o->per_host < w->n; k++) {
      conn *h = &w->hosts[k];
      for (int r = h->rank; r < host_end(w, h); r++) relay_end_rank(w, h, r, -1, 0);
      close_conn(w, h);
    }
    w->bye = 1;
  } else if (cmd[0] == 'B') {
    for (int i = 0; i < w->n; i++) {
      say(w, &w->ranks[i], 0, "{\"type\":\"bye\"}");
      close_conn(w, &w->ranks[i]);
      say(w, &w->agents[i], 0,
          "{\"type\":\"exit\",\"exit_code\":0,\"signal\":0,\"exec_error\":\"\",\"wall_us\":%" PRId64 "}", wall_us());
      close_conn(w, &w->agents[i]);
    }
    w->bye = 1;
  }
}

static void worker_main(worker *w) {
  const opts *o = w->o;
  int per_host = o->per_host;
  int nhosts = per_host ? (w->n + per_host - 1) / per_host : 0;
  raise_fd_limit(per_host ? nhosts + 32L : 2L * w->n + 32);
  w->ep = epoll_create1(EPOLL_CLOEXEC);
  if (per_host) {
    w->hosts = calloc((size_t)nhosts, sizeof *w->hosts);
    w->gone = calloc((size_t)w->n, 1);
    if (!w->hosts || !w->gone) die("out of memory");
  } else {
    w->agents = calloc((size_t)w->n, sizeof *w->agents);
    w->ranks = calloc((size_t)w->n, sizeof *w->ranks);
    if (!w->agents || !w->ranks) die("out of memory");
  }
  w->next_step = calloc((size_t)w->n, sizeof *w->next_step);
  w->next_alive = calloc((size_t)w->n, sizeof *w->next_alive);
  if (w->ep < 0 || !w->next_step || !w->next_alive) die("out of memory");
  struct epoll_event cev = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(w->ep, EPOLL_CTL_ADD, w->ctl, &cev);
  int64_t start = now_ms(), deadline = start + DEADLINE_MS;
  int workers = (o->world + o->per_worker - 1) / o->per_worker;
  double rate_per_ms = (double)o->rate / 1000.0 / workers;
  struct epoll_event evs[512];
  char cmd[256];
  size_t cmd_len = 0;
  for (;;) {
    if (now_ms() > deadline) die("worker of ranks %d..%d: no end within %d s", w->lo, w->hi - 1, DEADLINE_MS / 1000);
    /* Paced arrivals, as mpirun's daemons start the agents and the ranks over time. */
    int due = (int)((double)(now_ms() - start + 1) * rate_per_ms);
    while (w->connected_upto < w->n && w->connected_upto < due) {
      int i = w->connected_upto;
      if (per_host) {
        /* A host connects when its first rank is due, with all its agents and ranks. */
        start_conn(w, &w->hosts[i / per_host], w->lo + i, ROLE_RELAY);
        int end = i + per_host < w->n ? i + per_host : w->n;
        for (int k = i; k < end; k++) w->next_alive[k] = now_ms() + ALIVE_PERIOD_MS * (int64_t)(k % 4 + 1) / 4;
        w->connected_upto = end;
        continue;
      }
      w->connected_upto++;
      start_conn(w, &w->agents[i], w->lo + i, ROLE_AGENT);
      w->next_alive[i] = now_ms() + ALIVE_PERIOD_MS;
      start_conn(w, &w->ranks[i], w->lo + i, ROLE_RANK);
    }
    int timeout = w->connected_upto < w->n ? 1 : 10;
    int n = epoll_wait(w->ep, evs, (int)(sizeof evs / sizeof *evs), timeout);
    if (n < 0 && errno != EINTR) die("epoll_wait: %s", strerror(errno));
    for (int k = 0; k < n; k++) {
      if (!evs[k].data.ptr) {
        ssize_t m = read(w->ctl, cmd + cmd_len, sizeof cmd - cmd_len - 1);
        if (m <= 0) _exit(2); /* the parent is gone */
        cmd_len += (size_t)m;
        cmd[cmd_len] = '\0';
        char *nl;
        while ((nl = strchr(cmd, '\n'))) {
          *nl = '\0';
          on_command(w, cmd);
          memmove(cmd, nl + 1, strlen(nl + 1) + 1);
          cmd_len = strlen(cmd);
        }
        continue;
      }
      on_event(w, evs[k].data.ptr, evs[k].events);
    }
    tick(w);
    if (!w->reported_go && w->go_count == w->n) {
      w->reported_go = 1;
      ctl_say(w, "G %" PRId64 " %" PRId64 " %" PRId64 "\n", w->first_hello_ns, w->last_hello_ns, w->last_go_ns);
    }
    if (!w->reported_gone && w->signalled == w->n && w->first_signal_ns) {
      w->all_signal_ns = now_ns();
      w->reported_gone = 1;
      ctl_say(w, "S %" PRId64 " %" PRId64 "\n", w->first_signal_ns, w->all_signal_ns);
    }
    if (w->bye && w->agents_open == 0 && w->ranks_open == 0) {
      ctl_say(w, "D\n");
      _exit(0);
    }

  }
}

/* --- the parent: forks the workers, runs the attempt's script, writes the figures ------------------ */

typedef struct parent {
  const opts *o;
  int nw;
  int ctl[MAX_WORKERS];
  pid_t pid[MAX_WORKERS];
  char buf[MAX_WORKERS][512];
  size_t len[MAX_WORKERS];
  int eof[MAX_WORKERS]; /* the worker has exited (after its last line, normally) */
} parent;

/* Reads the next control line of any worker until `deadline_ms`; returns its index and the line, -1
 * when the deadline passed, -2 when every worker has exited with nothing more to say. */
static int next_line(parent *p, char *line, size_t size, int64_t deadline_ms) {
  for (;;) {
    for (int i = 0; i < p->nw; i++) {
      char *nl = memchr(p->buf[i], '\n', p->len[i]);
      if (!nl) continue;
      size_t n = (size_t)(nl - p->buf[i]);
      if (n >= size) die("control line too long");
      memcpy(line, p->buf[i], n);
      line[n] = '\0';
      memmove(p->buf[i], nl + 1, p->len[i] - n - 1);
      p->len[i] -= n + 1;
      return i;
    }
    int64_t left = deadline_ms - now_ms();
    if (left <= 0) return -1;
    struct pollfd fds[MAX_WORKERS];
    int open = 0;
    for (int i = 0; i < p->nw; i++) {
      fds[i] = (struct pollfd){.fd = p->eof[i] ? -1 : p->ctl[i], .events = POLLIN};
      open += !p->eof[i];
    }
    if (!open) return -2;
    int r = poll(fds, (nfds_t)p->nw, (int)left);
    if (r < 0 && errno != EINTR) die("poll: %s", strerror(errno));
    for (int i = 0; i < p->nw && r > 0; i++) {
      if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
      ssize_t m = read(p->ctl[i], p->buf[i] + p->len[i], sizeof p->buf[i] - p->len[i]);
      if (m <= 0) {
        p->eof[i] = 1;
        continue;
      }
      p->len[i] += (size_t)m;
    }
  }
}

static void wait_all(parent *p, char kind, int64_t *vals, int nvals, int64_t deadline_ms, const char *what) {
  /* vals: per field, min for the first field, max for the others */
  for (int k = 0; k < nvals; k++)
    vals[k] = k == 0 ? INT64_MAX : 0;
  for (int got = 0; got < p->nw;) {
    char line[512];
    int i = next_line(p, line, sizeof line, deadline_ms);
    if (i == -2) die("the workers ended before %s", what);
    if (i < 0) die("timed out waiting for %s", what);
    if (line[0] != kind) continue;
    char *s = line + 1;
    for (int k = 0; k < nvals; k++) {
      int64_t v = strtoll(s, &s, 10);
      if (k == 0 ? v < vals[k] : v > vals[k]) vals[k] = v;
    }
    got++;
  }
}

/* The launcher's CPU time so far in ns and its resident memory. The time is the kernel's own count
 * (/proc/PID/schedstat, the one thread's time on a CPU, in ns: the launcher is single-threaded), so
 * a few percent over a few seconds is read to better than the 10 ms ticks of /proc/PID/stat, which
 * is the fallback where schedstat is missing. */
static int launcher_cpu_ns(pid_t pid, long long *ns, long *rss_kb) {
  char path[64], buf[2048];
  snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
  FILE *f = fopen(path, "r");
  unsigned long long run_ns = 0;
  int have = f && fscanf(f, "%llu", &run_ns) == 1;
  if (f) fclose(f);
  if (!have) {
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (!(f = fopen(path, "r"))) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    /* after ") ": state(3) ... utime(14) stime(15) */
    unsigned long long ut = 0, st = 0;
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return -1;
    run_ns = (ut + st) * (1000000000ULL / (unsigned long long)sysconf(_SC_CLK_TCK));
  }
  *ns = (long long)run_ns;
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  f = fopen(path, "r");
  if (!f) return -1;
  *rss_kb = -1;
  while (fgets(buf, sizeof buf, f))
    if (!strncmp(buf, "VmRSS:", 6)) *rss_kb = strtol(buf + 6, NULL, 10);
  fclose(f);
  return 0;
}

/* FTL_SCALE_PERF=PATH: `perf record -g` of the launcher over the steady window, into PATH (what
 * docs/scale.md's profiles were made with); 0 when not asked for or perf cannot start. */
static pid_t start_perf(pid_t launcher, int ms) {
  const char *path = getenv("FTL_SCALE_PERF");
  if (!path || !*path) return 0;
  char pid_s[16], secs[32];
  snprintf(pid_s, sizeof pid_s, "%d", (int)launcher);
  snprintf(secs, sizeof secs, "%.3f", ms / 1000.0);
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
    }
    execlp("perf", "perf", "record", "-g", "-p", pid_s, "-o", path, "--", "sleep", secs, (char *)NULL);
    _exit(127);
  }
  return pid;
}

static void append_out(const opts *o, const char *line) {
  FILE *f = fopen(o->out, "a");
  if (!f) die("cannot open %s: %s", o->out, strerror(errno));
  fputs(line, f);
  fclose(f);
}

int main(int argc, char **argv) {
  opts o = {.world = 0, .kill_rank = -1, .steady_ms = 3000, .per_worker = 4096, .rate = 20000, .per_host = 8};
  int64_t started_wall_us = wall_us();
  pid_t launcher = getppid();
  int i = 1;
  for (; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], "-n") && i + 1 < argc) o.world = parse_int(argv[++i], 1, 1 << 20, "-n");
  if (o.world < 1) die("no -n N in mpirun's arguments");
  /* After "--": the program (ignored) and the job's args, which are ours. */
  for (i += 2; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--out"))
      o.out = v;
    else if (!strcmp(argv[i], "--kill-rank"))
      o.kill_rank = parse_int(v, 0, o.world - 1, "--kill-rank");
    else if (!strcmp(argv[i], "--steady-ms"))
      o.steady_ms = parse_int(v, 100, 600000, "--steady-ms");
    else if (!strcmp(argv[i], "--per-worker"))
      o.per_worker = parse_int(v, 1, 1 << 20, "--per-worker");
    else if (!strcmp(argv[i], "--rate"))
      o.rate = parse_int(v, 1, 100000000, "--rate");
    else if (!strcmp(argv[i], "--ranks-per-host"))
      o.per_host = parse_int(v, 0, 4096, "--ranks-per-host");
    else
      die("unknown option %s", argv[i]);
    i++;
  }
  if (!o.out) die("--out FILE is required");
  if (o.kill_rank < 0) o.kill_rank = o.world / 2;
  /* A host never straddles two workers. */
  if (o.per_host && o.per_worker % o.per_host) o.per_worker = (o.per_worker / o.per_host + 1) * o.per_host;
  const char *addr = getenv("FTL_RDZV_ADDR"), *attempt = getenv("FTL_ATTEMPT");
  o.token = getenv("FTL_RDZV_TOKEN");
  if (!addr || !o.token || !attempt) die("FTL_RDZV_ADDR, FTL_RDZV_TOKEN and FTL_ATTEMPT must be set (run by ftl run)");
  o.attempt = parse_int(attempt, 0, 1 << 30, "FTL_ATTEMPT");
  const char *colon = strrchr(addr, ':');
  if (!colon || (size_t)(colon - addr) >= sizeof o.host || strlen(colon + 1) >= sizeof o.port)
    die("FTL_RDZV_ADDR '%s' is not host:port", addr);
  memcpy(o.host, addr, (size_t)(colon - addr));
  o.host[colon - addr] = '\0';
  snprintf(o.port, sizeof o.port, "%s", colon + 1);
  if (!strcmp(o.host, "localhost")) snprintf(o.host, sizeof o.host, "127.0.0.1");

  /* The launcher's CPU over the whole rendezvous: on a loaded machine the wall times say as much
   * about the other tenants as about ftl; this says what ftl itself spent. */
  long long rdzv_t0 = 0, rdzv_t1 = 0;
  long rss_ignored = 0;
  if (launcher_cpu_ns(launcher, &rdzv_t0, &rss_ignored))
    die("cannot read /proc/%d/stat (the launcher)", (int)launcher);
  parent p = {.o = &o, .nw = (o.world + o.per_worker - 1) / o.per_worker};
  if (p.nw > MAX_WORKERS) die("%d workers are more than %d: raise --per-worker", p.nw, MAX_WORKERS);
  raise_fd_limit(2L * p.nw + 32);
  signal(SIGPIPE, SIG_IGN);
  for (int k = 0; k < p.nw; k++) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) die("socketpair: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
      close(sv[0]);
      for (int j = 0; j < k; j++)
        close(p.ctl[j]);
      worker w = {.o = &o, .lo = k * o.per_worker, .ctl = sv[1], .batch_ms = STEP_PERIOD_MS};
      w.hi = w.lo + o.per_worker < o.world ? w.lo + o.per_worker : o.world;
      w.n = w.hi - w.lo;
      worker_main(&w);
    }
    close(sv[1]);
    p.ctl[k] = sv[0];
    p.pid[k] = pid;
  }
  int64_t deadline = now_ms() + DEADLINE_MS;
  int64_t go[3];
  wait_all(&p, 'G', go, 3, deadline, "every rank's go");
  double rdzv_ms = (double)(go[2] - go[1]) / 1e6, join_ms = (double)(go[2] - go[0]) / 1e6;
  if (launcher_cpu_ns(launcher, &rdzv_t1, &rss_ignored))
    die("cannot read /proc/%d/stat (the launcher)", (int)launcher);
  double rdzv_cpu_ms = (double)(rdzv_t1 - rdzv_t0) / 1e6;
  char line[1024];
  if (o.attempt > 0) { /* a restart: attempts count from 0 */
    for (int k = 0; k < p.nw; k++)
      if (write(p.ctl[k], "B\n", 2) != 2) die("write to worker: %s", strerror(errno));
    int64_t none[1];
    wait_all(&p, 'D', none, 0, deadline, "the clean end");
    snprintf(line, sizeof line,
             "attempt=%d n=%d rdzv_ms=%.2f join_ms=%.2f rdzv_cpu_ms=%.1f start_wall_us=%" PRId64 "\n", o.attempt,
             o.world, rdzv_ms, join_ms, rdzv_cpu_ms, started_wall_us);
    append_out(&o, line);
    for (int k = 0; k < p.nw; k++)
      waitpid(p.pid[k], NULL, 0);
    return 0;
  }
  /* Steady state: time to settle, then the launcher's CPU over --steady-ms. Settling is the
   * launcher's reading of every rank's ready and first_step (and writing their events), a burst
   * that takes seconds past 16k ranks on a loaded machine: a second, or N/8 ms where that is longer. */
  char scratch[512];
  int dummy = next_line(&p, scratch, sizeof scratch, now_ms() + (o.world / 8 > 1000 ? o.world / 8 : 1000));
  if (dummy == -2) die("the workers ended in steady state");
  if (dummy >= 0) die("unexpected report from worker %d: %s", dummy, scratch);
  long long t0 = 0, t1 = 0;
  long rss0 = 0, rss1 = 0;
  int64_t w0 = now_ns();
  if (launcher_cpu_ns(launcher, &t0, &rss0)) die("cannot read /proc/%d/stat (the launcher)", (int)launcher);
  pid_t perf = start_perf(launcher, o.steady_ms);
  dummy = next_line(&p, scratch, sizeof scratch, now_ms() + o.steady_ms);
  if (perf > 0) waitpid(perf, NULL, 0);
  if (dummy == -2) die("the workers ended in steady state");
  if (dummy >= 0) die("unexpected report from worker %d: %s", dummy, scratch);
  if (launcher_cpu_ns(launcher, &t1, &rss1)) die("cannot read /proc/%d/stat (the launcher)", (int)launcher);
  double secs = (double)(now_ns() - w0) / 1e9;
  double cpu_pct = 100.0 * (double)(t1 - t0) / 1e9 / secs;
  /* The kill: the owning worker closes the rank's connection and its agent reports SIGKILL. */
  int owner = o.kill_rank / o.per_worker;
  snprintf(scratch, sizeof scratch, "K %d\n", o.kill_rank);
  if (write(p.ctl[owner], scratch, strlen(scratch)) != (ssize_t)strlen(scratch)) die("write to worker");
  int64_t kill_ns = 0, kill_wall = 0;
  for (;;) {
    int k = next_line(&p, scratch, sizeof scratch, deadline);
    if (k < 0) die("no word of the kill (%s)", k == -2 ? "the workers ended" : "timed out");
    if (scratch[0] == 'k' && sscanf(scratch + 2, "%" SCNd64 " %" SCNd64, &kill_ns, &kill_wall) == 2) break;
  }
  int64_t sig[2];
  wait_all(&p, 'S', sig, 2, deadline, "every agent's signal");
  double detect_ms = (double)(sig[0] - kill_ns) / 1e6, teardown_ms = (double)(sig[1] - kill_ns) / 1e6;
  snprintf(line, sizeof line,
           "attempt=%d n=%d rdzv_ms=%.2f join_ms=%.2f rdzv_cpu_ms=%.1f cpu_pct=%.2f rss_kb=%ld detect_ms=%.2f "
           "teardown_ms=%.2f kill_wall_us=%" PRId64 "\n",
           o.attempt, o.world, rdzv_ms, join_ms, rdzv_cpu_ms, cpu_pct, rss1, detect_ms, teardown_ms, kill_wall);
  append_out(&o, line);
  /* Written: the workers may close the gang's connections and go (the launcher ends this "mpirun"
   * once every rank's exit is reported and every connection closed, without its teardown). */
  for (int k = 0; k < p.nw; k++)
    if (write(p.ctl[k], "Q\n", 2) != 2) die("write to worker");
  for (int k = 0; k < p.nw; k++)
    waitpid(p.pid[k], NULL, 0);
  return 1;
}
