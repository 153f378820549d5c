/* checkpoint/ckpt_l2_tcp.c: the direct TCP transport of the L2 transfers (docs/checkpoint.md,
 * "L2"): one plain TCP connection per stream of ckpt_l2.c's engine, so a fetched shard goes from
 * the server's copy (sendfile) into the fetcher's destinations (recv) with one copy, where Open
 * MPI's TCP transport copies every byte through its own fragments and moves them only inside
 * MPI_Test. A save's copy to the partner uses it too. Below, "server" is a stream's sender (it
 * listens) and "fetcher" its receiver (it connects).
 *
 * Set-up, over the handle's communicator (trusted, unlike the network):
 *   1. every rank that serves a stream listens (an ephemeral port on all addresses, rendezvous's
 *      core_net_listen) and draws a random token; one allgather, made by every rank, carries each
 *      rank's port, token, IPv4 addresses (core_net_host_ipv4, loopback last) and whether it can and may
 *      use TCP (FTL_CKPT_L2_TRANSPORT). If any rank cannot or may not, every rank stops here;
 *   2. each fetcher connects to its server, trying the server's addresses in order; the server
 *      sends every connection it accepts a fresh nonce, and the fetcher answers with a hello (magic,
 *      an HMAC-SHA256 under the server's token of the nonce and of its own rank, the server's rank
 *      and the shard, then those three in the clear); the server answers a hello that matches one
 *      of its streams with an ack and closes any other connection: a stranger without the token
 *      reads nothing but a nonce, the token never crosses the network, a hello copied off one
 *      connection is refused on another, and a fetcher that reached the wrong listener tries the
 *      next address. Meanwhile an allgather of each fetcher's result runs
 *      (started when its connections are settled, polled while the server keeps answering), so
 *      every rank learns whether every stream is connected; if one is not, every rank closes its
 *      sockets and the engine runs over MPI as before.
 * The data itself (a header, then the body) and its checks are the engine's (ckpt_l2.c); the
 * checksums prove integrity, the proof of the token only keeps strangers out.
 *
 * Not here: which rank serves which shard, or what a stream carries (ckpt_l2.c); MPI calls
 * (ckpt_coll.c). */
#include "checkpoint/ckpt_l2_tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/net.h"
#include "rendezvous/wire_auth.h"

#define TCP_PENDING 64          /* accepted connections not yet proven, at most */
#define TCP_CONNECT_MS 2000     /* per address: a SYN that is dropped moves on to the next one */
#define TCP_ACK_MS 5000         /* per address: a listener that never answers is not the server */

typedef ck_l2_tcp_rec tcp_rec;
typedef ck_l2_tcp_hello tcp_hello;
typedef ck_l2_tcp_challenge tcp_challenge;
static const char hello_magic[8] = CK_L2_TCP_HELLO_MAGIC;
static const char ack_magic[4] = CK_L2_TCP_ACK;
static const char challenge_magic[4] = CK_L2_TCP_CHALLENGE_MAGIC;

/* An accepted connection until its hello is read: the nonce it was sent. */
typedef struct pending {
  int fd;
  size_t got;
  unsigned char nonce[CK_L2_TCP_NONCE];
  char peer[64];   /* "address:port", for the refusal's warning */
  tcp_hello h;
} pending;

/* "address:port" of an accepted IPv4 connection. */
static void describe_peer(int fd, char *out, size_t size) {
  struct sockaddr_in sin;
  socklen_t sl = sizeof sin;
  char host[INET_ADDRSTRLEN] = "?";
  if (getpeername(fd, (struct sockaddr *)&sin, &sl) != 0 || sin.sin_family != AF_INET) {
    (void)ftl_fmt(out, size, "?");
    return;
  }
  inet_ntop(AF_INET, &sin.sin_addr, host, sizeof host);
  (void)ftl_fmt(out, size, "%s:%d", host, ntohs(sin.sin_port));
}

/* A fetcher's connection attempt: state 0 connecting, 1 reading the challenge, 2 sending the
 * hello, 3 awaiting the ack, 4 connected, 5 every address failed. */
enum { AT_CONNECTING, AT_CHALLENGE, AT_HELLO, AT_ACK, AT_CONNECTED, AT_FAILED };
typedef struct attempt {
  int state, addr, fd;
  size_t moved;
  int64_t until_ms;
  tcp_challenge ch;
  tcp_hello h;
  char why[160];
} attempt;

ftl_err ck_l2_tcp_mac(const unsigned char token[CK_L2_TCP_TOKEN], const unsigned char nonce[CK_L2_TCP_NONCE],
                      int32_t from, int32_t to, int32_t shard, unsigned char mac[CK_L2_TCP_MAC], ftl_diag *d) {
  unsigned char text[8 + CK_L2_TCP_NONCE + 12];
  int32_t ids[3] = {from, to, shard};
  memcpy(text, "ftl-l2-2", 8);
  memcpy(text + 8, nonce, CK_L2_TCP_NONCE);
  memcpy(text + 8 + CK_L2_TCP_NONCE, ids, sizeof ids);
  return rz_wire_hmac(token, CK_L2_TCP_TOKEN, text, sizeof text, mac, d);
}


/* The hello of fetching link k from the server whose record is r, answering nonce. */
static ftl_err hello_of(const ftl_ckpt *ck, const ck_l2_link *k, const tcp_rec *r, const unsigned char *nonce,
                        tcp_hello *h, ftl_diag *d) {
  memset(h, 0, sizeof *h);
  memcpy(h->magic, hello_magic, sizeof h->magic);
  h->from = ck->rank;
  h->to = k->peer;
  h->shard = k->shard;
  return ck_l2_tcp_mac(r->token, nonce, h->from, h->to, h->shard, h->mac, d);
}

/* FTL_CKPT_L2_TCP_FAULT=listen:RANK or connect:RANK (the tests' fault, docs/checkpoint.md): that
 * rank's listener, or every connection it makes, fails as if the network refused it. */
static int fault_at(const char *what, int rank) {
  const char *f = getenv("FTL_CKPT_L2_TCP_FAULT");
  size_t n = strlen(what);
  int64_t r = -1;
  return f && !strncmp(f, what, n) && f[n] == ':' && ftl_parse_i64(f + n + 1, 0, INT_MAX, &r) == FTL_OK && r == rank;
}

/* FTL_CKPT_L2_TCP_ANNOUNCE=DIR (tests only, docs/checkpoint.md): a rank that listens writes
 * DIR/rank-R.a<ATTEMPT>.port ("ADDRESS:PORT" lines, its addresses) and, while DIR/hold exists,
 * waits (30 s at most) before the set-up goes on: a test's window to connect to the listener from
 * elsewhere (tests/fault/ft_l2.sh spare_stranger). Then, while DIR/hold-fetch exists (30 s at
 * most), no rank starts its own fetches' connections, but every server answers what connects: the
 * set-up cannot end before the test's connections were answered, whatever the machine's speed. */
static int held_for_tests(const char *name, int64_t since_ms) {
  const char *dir = getenv("FTL_CKPT_L2_TCP_ANNOUNCE");
  char path[PATH_MAX];
  if (!dir || !*dir || ftl_fmt(path, sizeof path, "%s/%s", dir, name)) return 0;
  return access(path, F_OK) == 0 && ftl_clock_ms() - since_ms < 30000;
}

static void announce_for_tests(const ftl_ckpt *ck, const tcp_rec *mine) {
  const char *dir = getenv("FTL_CKPT_L2_TCP_ANNOUNCE");
  char path[PATH_MAX], text[CK_L2_TCP_ADDRS * 32] = "";
  size_t len = 0;
  ftl_diag d;
  if (!dir || !*dir || ftl_fmt(path, sizeof path, "%s/rank-%d.a%d.port", dir, ck->rank, ck->attempt)) return;
  for (int i = 0; i < mine->naddr; i++) {
    char host[INET_ADDRSTRLEN];
    struct in_addr a = {.s_addr = mine->addr[i]};
    int w = snprintf(text + len, sizeof text - len, "%s:%u\n", inet_ntop(AF_INET, &a, host, sizeof host) ? host : "?",
                     (unsigned)mine->port);
    if (w > 0 && (size_t)w < sizeof text - len) len += (size_t)w;
  }
  if (core_fs_write_atomic(path, text, len, NULL, ck->rank, -1, &d) != FTL_OK) return;
  for (int64_t since = ftl_clock_ms(); held_for_tests("hold", since);) usleep(20000);
}

void ck_l2_tcp_close(int sock) {
  if (sock >= 0) close(sock);
}

/* Starts attempt a at the server's next address (r: the server's record); AT_FAILED when none is left. */
static void attempt_next(attempt *a, const tcp_rec *r) {
  ck_l2_tcp_close(a->fd);
  a->fd = -1;
  while (a->addr < r->naddr) {
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(r->port)};
    sin.sin_addr.s_addr = r->addr[a->addr++];
    a->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (a->fd < 0) {
      (void)ftl_fmt(a->why, sizeof a->why, "socket: %s", strerror(errno));
      continue;
    }
    a->moved = 0;
    a->until_ms = ftl_clock_ms() + TCP_CONNECT_MS;
    if (connect(a->fd, (struct sockaddr *)&sin, sizeof sin) == 0 || errno == EINPROGRESS) {
      a->state = AT_CONNECTING;
      return;
    }
    (void)ftl_fmt(a->why, sizeof a->why, "connect: %s", strerror(errno));
    close(a->fd);
    a->fd = -1;
  }
  a->state = AT_FAILED;
}

/* Moves attempt a (fetching link k, r: the server's record) on as far as its socket allows
 * (revents from poll, 0: none yet). */
static void attempt_step(const ftl_ckpt *ck, attempt *a, const ck_l2_link *k, const tcp_rec *r, short revents) {
  for (;;) {
    if (a->state >= AT_CONNECTED) return;
    if (ftl_clock_ms() > a->until_ms) {
      (void)ftl_fmt(a->why, sizeof a->why, "%s timed out", a->state == AT_CONNECTING ? "connect" : "the server's answer");
      attempt_next(a, r);
      continue;
    }
    if (a->state == AT_CONNECTING) {
      if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return;
      int err = 0;
      socklen_t sl = sizeof err;
      if (getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &err, &sl) != 0) err = errno;
      if (err) {
        (void)ftl_fmt(a->why, sizeof a->why, "connect: %s", strerror(err));
        attempt_next(a, r);
        revents = 0;
        continue;
      }
      a->state = AT_CHALLENGE;
      a->moved = 0;
      a->until_ms = ftl_clock_ms() + TCP_ACK_MS;
    }
    if (a->state == AT_CHALLENGE) {
      ssize_t n = recv(a->fd, (char *)&a->ch + a->moved, sizeof a->ch - a->moved, 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n > 0) a->moved += (size_t)n;
      if (n > 0 && a->moved < sizeof a->ch) return;
      if (n <= 0 || memcmp(a->ch.magic, challenge_magic, sizeof challenge_magic) != 0) {
        (void)ftl_fmt(a->why, sizeof a->why, "%s", n < 0 ? strerror(errno) : "no challenge (not the server)");
        attempt_next(a, r);
        revents = 0;
        continue;
      }
      ftl_diag md;
      if (hello_of(ck, k, r, a->ch.nonce, &a->h, &md) != FTL_OK) {
        (void)ftl_fmt(a->why, sizeof a->why, "%s", md.msg);
        a->state = AT_FAILED;
        return;
      }
      a->state = AT_HELLO;
      a->moved = 0;
    }
    if (a->state == AT_HELLO) {
      ssize_t n = send(a->fd, (const char *)&a->h + a->moved, sizeof a->h - a->moved, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0) {
        (void)ftl_fmt(a->why, sizeof a->why, "send: %s", strerror(errno));
        attempt_next(a, r);
        revents = 0;
        continue;
      }
      a->moved += (size_t)n;
      if (a->moved < sizeof a->h) return;
      a->state = AT_ACK;
      a->moved = 0;
      a->until_ms = ftl_clock_ms() + TCP_ACK_MS;
    }
    char ack[sizeof ack_magic];
    ssize_t n = recv(a->fd, ack + a->moved, sizeof ack - a->moved, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0 || memcmp(ack + a->moved, ack_magic + a->moved, (size_t)n) != 0) {
      (void)ftl_fmt(a->why, sizeof a->why, "%s", n < 0 ? strerror(errno) : "refused (not the server, or a wrong proof)");
      attempt_next(a, r);
      revents = 0;
      continue;
    }
    a->moved += (size_t)n;
    if (a->moved == sizeof ack) a->state = AT_CONNECTED;
  }
}

/* Refusals of one set-up shown one by one (a warning and an l2_rejected event each): a stranger
 * who connects in a loop must not flood the rank's log and the run's events. */
enum { L2_REFUSALS_SHOWN = 16 };

/* Reads what has come of pending connection p's hello; when it is whole, gives the connection to
 * the link it names (answering with the ack) or closes it (*refusals counts those whose whole
 * hello was wrong). */
static void pending_step(ftl_ckpt *ck, pending *p, const unsigned char *token, ck_l2_link *links, int n,
                         int *refusals) {
  ssize_t k = recv(p->fd, (char *)&p->h + p->got, sizeof p->h - p->got, 0);
  if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (k > 0) p->got += (size_t)k;
  if (k > 0 && p->got < sizeof p->h) return;
  int link = -1;
  unsigned char want[CK_L2_TCP_MAC];
  ftl_diag md;
  if (k > 0 && !memcmp(p->h.magic, hello_magic, sizeof hello_magic) && p->h.to == ck->rank &&
      ck_l2_tcp_mac(token, p->nonce, p->h.from, p->h.to, p->h.shard, want, &md) == FTL_OK &&
      rz_wire_mac_equal(want, p->h.mac, sizeof want))
    for (int i = 0; i < n && link < 0; i++)
      if (links[i].out && links[i].fd < 0 && links[i].peer == p->h.from && links[i].shard == p->h.shard) link = i;
  /* A fresh socket has room for 4 bytes: a short send is a broken connection. */
  if (link >= 0 && send(p->fd, ack_magic, sizeof ack_magic, MSG_NOSIGNAL) == (ssize_t)sizeof ack_magic) {
    links[link].fd = p->fd;
  } else {
    if (k > 0 && ++*refusals <= L2_REFUSALS_SHOWN) {
      FTL_LOG(FTL_LOG_WARN, "ckpt", "an L2 connection from %s was refused: it did not name one of this rank's "
                                    "transfers with a proof of this restore's token", p->peer);
      ck_emit(ck, "l2_rejected", json_pack("{s:s, s:s}", "peer", p->peer, "reason",
                                           "no valid proof of the restore's token for one of this rank's transfers"));
    }
    close(p->fd);
  }
  p->fd = -1;
}

/* Starts the connection of each of this rank's fetches (all: every rank's record). */
static void start_fetches(const ftl_ckpt *ck, const ck_l2_link *links, int n, const tcp_rec *all, attempt *at) {
  for (int i = 0; i < n; i++) {
    if (links[i].out) continue;
    const tcp_rec *r = &all[links[i].peer];
    if (r->port == 0 || r->naddr == 0 || fault_at("connect", ck->rank)) {
      at[i].state = AT_FAILED;
      (void)ftl_fmt(at[i].why, sizeof at[i].why, "%s", r->port ? "fault injected (FTL_CKPT_L2_TCP_FAULT)"
                                                                 : "the server does not listen");
      continue;
    }
    attempt_next(&at[i], r);
  }
}

static void close_links(ck_l2_link *links, int n) {
  for (int i = 0; i < n; i++) {
    ck_l2_tcp_close(links[i].fd);
    links[i].fd = -1;
  }
}

/* What one set-up holds, freed (and its sockets closed) by setup_free. A buffer an MPI request may
 * still write into after a timeout is left to it (set to NULL) rather than freed. */
typedef struct setup {
  int listen_fd, npend, started, deferred, refusals;
  int may;             /* FTL_CKPT_L2_TRANSPORT lets this rank use TCP */
  int64_t step2_ms;
  tcp_rec mine;
  tcp_rec *all;        /* every rank's record (step 1's allgather) */
  unsigned char *oks;  /* every rank's "all my fetches connected"; oks[world] is this rank's own */
  attempt *at;         /* this rank's fetches, by link */
  pending *pend;       /* accepted connections until their hello is read */
  struct pollfd *pfd;
  int *who;            /* what pfd[j] is: a link (>= 0), the listener (-1), pend[-2 - who] */
  MPI_Request req;
  char why[200];       /* why this rank cannot or may not use TCP */
} setup;

static int setup_alloc(setup *s, int world, int n) {
  memset(s, 0, sizeof *s);
  s->listen_fd = -1;
  s->all = ftl_calloc((size_t)world, sizeof *s->all);
  s->oks = ftl_calloc((size_t)world + 1, 1);
  s->at = ftl_calloc((size_t)n + 1, sizeof *s->at);
  s->pend = ftl_calloc(TCP_PENDING, sizeof *s->pend);
  s->pfd = ftl_calloc((size_t)n + TCP_PENDING + 1, sizeof *s->pfd);
  s->who = ftl_calloc((size_t)n + TCP_PENDING + 1, sizeof *s->who);
  for (int i = 0; s->at && i < n; i++) s->at[i].fd = -1;
  for (int i = 0; s->pend && i < TCP_PENDING; i++) s->pend[i].fd = -1;
  return s->all && s->oks && s->at && s->pend && s->pfd && s->who ? 0 : -1;
}

static void setup_free(setup *s, int n) {
  for (int i = 0; s->at && i < n; i++) ck_l2_tcp_close(s->at[i].fd);
  for (int i = 0; s->pend && i < s->npend; i++) ck_l2_tcp_close(s->pend[i].fd);
  ck_l2_tcp_close(s->listen_fd);
  ftl_free(s->all);
  ftl_free(s->oks);
  ftl_free(s->at);
  ftl_free(s->pend);
  ftl_free(s->pfd);
  ftl_free(s->who);
}

/* Step 1 on this rank: whether it may use TCP and, when it serves a stream, its token, addresses
 * and listener (s->mine; s->why says why not). */
static void listen_here(ftl_ckpt *ck, setup *s, int serves) {
  tcp_rec *mine = &s->mine;
  s->may = !ck->l2_mpi; /* FTL_CKPT_L2_TRANSPORT, from the launch record */
  mine->ok = (uint8_t)s->may;
  if (!mine->ok) (void)ftl_fmt(s->why, sizeof s->why, "FTL_CKPT_L2_TRANSPORT=mpi");
  if (!mine->ok || !serves) return;
  ftl_diag ld = {{0}};
  int port = 0;
  size_t got = 0;
  while (got < sizeof mine->token) {
    ssize_t k = getrandom(mine->token + got, sizeof mine->token - got, 0);
    if (k < 0 && errno != EINTR) break;
    if (k > 0) got += (size_t)k;
  }
  mine->naddr = (uint8_t)core_net_host_ipv4(mine->addr, CK_L2_TCP_ADDRS);
  if (got < sizeof mine->token) {
    mine->ok = 0;
    (void)ftl_fmt(s->why, sizeof s->why, "getrandom: %s", strerror(errno));
  } else if (mine->naddr == 0) {
    mine->ok = 0;
    (void)ftl_fmt(s->why, sizeof s->why, "this host has no IPv4 address that is up");
  } else if (fault_at("listen", ck->rank)) {
    mine->ok = 0;
    (void)ftl_fmt(s->why, sizeof s->why, "cannot listen: fault injected (FTL_CKPT_L2_TCP_FAULT)");
  } else if (core_net_listen(NULL, &s->listen_fd, &port, &ld) != FTL_OK) {
    mine->ok = 0;
    (void)ftl_fmt(s->why, sizeof s->why, "%s", ld.msg);
  } else {
    mine->port = (uint16_t)port;
    announce_for_tests(ck, mine);
  }
}

/* Takes the connections waiting on the listener, sending each its challenge first (a fresh
 * socket has room for it): its hello must answer this nonce. */
static void accept_pending(setup *s) {
  while (s->listen_fd >= 0) {
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (s->npend == TCP_PENDING) {
      close(fd);
      continue;
    }
    tcp_challenge ch;
    memcpy(ch.magic, challenge_magic, sizeof ch.magic);
    if (getrandom(ch.nonce, sizeof ch.nonce, 0) != (ssize_t)sizeof ch.nonce ||
        send(fd, &ch, sizeof ch, MSG_NOSIGNAL) != (ssize_t)sizeof ch) {
      close(fd);
      continue;
    }
    pending *p = &s->pend[s->npend++];
    *p = (pending){.fd = fd};
    memcpy(p->nonce, ch.nonce, sizeof ch.nonce);
    describe_peer(fd, p->peer, sizeof p->peer);
  }
}

/* One wait on every socket of the set-up (briefly once the agreement is under way: MPI moves only
 * when tested), then the steps it lets go on: fetches, hellos read, new connections accepted. */
static void poll_sockets(ftl_ckpt *ck, setup *s, ck_l2_link *links, int n, int64_t deadline_ms) {
  int np = 0;
  if (s->listen_fd >= 0) {
    s->pfd[np] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
    s->who[np++] = -1;
  }
  for (int i = 0; i < s->npend; i++) {
    s->pfd[np] = (struct pollfd){.fd = s->pend[i].fd, .events = POLLIN};
    s->who[np++] = -2 - i;
  }
  for (int i = 0; i < n && !s->deferred; i++)
    if (!links[i].out && s->at[i].state < AT_CONNECTED) {
      int out = s->at[i].state == AT_CONNECTING || s->at[i].state == AT_HELLO;
      s->pfd[np] = (struct pollfd){.fd = s->at[i].fd, .events = out ? POLLOUT : POLLIN};
      s->who[np++] = i;
    }
  int wait_ms = s->started ? 1 : 50;
  int left = ftl_deadline_left_ms(deadline_ms);
  if (left < wait_ms) wait_ms = left;
  if (poll(s->pfd, (nfds_t)np, wait_ms) <= 0) return;
  for (int j = 0; j < np; j++) {
    int w = s->who[j];
    if (!s->pfd[j].revents) continue;
    if (w >= 0) attempt_step(ck, &s->at[w], &links[w], &s->all[links[w].peer], s->pfd[j].revents);
    else if (w <= -2) pending_step(ck, &s->pend[-2 - w], s->mine.token, links, n, &s->refusals);
  }
  /* Settled pending connections leave the table; then new ones are accepted. */
  int k = 0;
  for (int i = 0; i < s->npend; i++)
    if (s->pend[i].fd >= 0) s->pend[k++] = s->pend[i];
  s->npend = k;
  accept_pending(s);
}

/* Once every fetch of this rank is settled: its result into the agreement (an allgather polled
 * while the server side keeps answering). */
static ftl_err start_agreement(ftl_ckpt *ck, setup *s, const ck_l2_link *links, int n, const char *what,
                               ftl_diag *d) {
  unsigned char *own = &s->oks[ck->world];
  *own = 1;
  for (int i = 0; i < n; i++)
    if (!links[i].out && s->at[i].state != AT_CONNECTED) {
      *own = 0;
      FTL_LOG(FTL_LOG_WARN, "ckpt", "%s goes over MPI: no connection to rank %d for shard %d (%s)", what,
              links[i].peer, links[i].shard, s->at[i].why);
    }
  ftl_err rc = ck_coll_iallgather(ck, own, s->oks, 1, &s->req, d);
  if (rc) s->oks = NULL;
  else s->started = 1;
  return rc;
}

/* Step 2: connect, answer, agree (the connections are started once no test holds them), until
 * the agreement has every rank's result or the deadline passes. */
static ftl_err connect_and_agree(ftl_ckpt *ck, setup *s, ck_l2_link *links, int n, const char *what,
                                 int64_t deadline_ms, ftl_diag *d) {
  s->step2_ms = ftl_clock_ms();
  s->deferred = held_for_tests("hold-fetch", s->step2_ms);
  if (!s->deferred) start_fetches(ck, links, n, s->all, s->at);
  for (;;) {
    int open = 0;
    ftl_err rc;
    if (s->deferred && !held_for_tests("hold-fetch", s->step2_ms)) {
      s->deferred = 0;
      start_fetches(ck, links, n, s->all, s->at);
    }
    for (int i = 0; i < n && !s->deferred; i++) {
      if (links[i].out) continue;
      attempt_step(ck, &s->at[i], &links[i], &s->all[links[i].peer], 0); /* the timeouts, and what needs no wait */
      open += s->at[i].state < AT_CONNECTED;
    }
    if (!open && !s->started && !s->deferred && (rc = start_agreement(ck, s, links, n, what, d))) return rc;
    if (s->started) {
      int done = 0;
      if ((rc = ck_p2p_test(ck, &s->req, &done, NULL, d))) {
        s->oks = NULL;
        return rc;
      }
      if (done) return FTL_OK;
    }
    if (ftl_deadline_left_ms(deadline_ms) == 0) {
      atomic_store(&ck->sync->broken, 1);
      if (s->started) s->oks = NULL; /* the request may still write into it */
      return ftl_diag_fail(d, FTL_ERR_TIMEOUT, "the L2 connections were not set up within %lld ms (a rank is gone or "
                           "stuck)", (long long)ck->timeout_ms);
    }
    poll_sockets(ck, s, links, n, deadline_ms);
  }
}

/* After the agreement: every fetcher was answered, so every server holds its connections; the
 * fetchers' sockets become their links'. *tcp 1 when every rank connected. */
static ftl_err adopt_connections(ftl_ckpt *ck, setup *s, ck_l2_link *links, int n, const char *what, int info,
                                 int *tcp, ftl_diag *d) {
  for (int r = 0; r < ck->world; r++)
    if (!s->oks[r]) {
      if (r != ck->rank && n) FTL_LOG(info, "ckpt", "%s goes over MPI: rank %d could not connect", what, r);
      return FTL_OK;
    }
  for (int i = 0; i < n; i++)
    if (!links[i].out) {
      links[i].fd = s->at[i].fd;
      s->at[i].fd = -1;
    }
  for (int i = 0; i < n; i++)
    if (links[i].fd < 0) {
      /* Cannot be while every fetcher says it was answered; kept as a refusal, not a crash. */
      atomic_store(&ck->sync->broken, 1);
      return ftl_diag_fail(d, FTL_ERR_PROTO, "L2 connection for shard %d with rank %d missing after the agreement",
                           links[i].shard, links[i].peer);
    }
  *tcp = 1;
  if (n) FTL_LOG(info, "ckpt", "%s goes over TCP (%d connections)", what, n);
  return FTL_OK;
}

ftl_err ck_l2_tcp_connect(ftl_ckpt *ck, ck_l2_link *links, int n, const char *what, int loud, int *tcp,
                          int64_t deadline_ms, ftl_diag *d) {
  const int info = loud ? FTL_LOG_INFO : FTL_LOG_DEBUG;
  int serves = 0;
  ftl_err rc = FTL_OK;
  setup s;
  *tcp = 0;
  for (int i = 0; i < n; i++) {
    links[i].fd = -1;
    serves += links[i].out;
  }
  if (setup_alloc(&s, ck->world, n)) {
    /* The others expect this rank in both allgathers: without memory it cannot take part. */
    atomic_store(&ck->sync->broken, 1);
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory for the L2 connections");
    goto out;
  }
  /* Step 1: this rank's listener, token and addresses, then everyone's. */
  listen_here(ck, &s, serves);
  rc = ck_coll_allgather(ck, &s.mine, s.all, (int)sizeof s.mine, "the allgather of the L2 connections", deadline_ms, d);
  if (rc) {
    s.all = NULL; /* a timed-out request may still write into it */
    goto out;
  }
  for (int r = 0; r < ck->world; r++)
    if (!s.all[r].ok) {
      /* Said on the ranks with transfers, this rank's own reason first; a warning only where TCP
       * failed. */
      if (n && !s.mine.ok)
        FTL_LOG(s.may ? FTL_LOG_WARN : info, "ckpt", "%s goes over MPI: %s", what, s.why);
      else if (n)
        FTL_LOG(info, "ckpt", "%s goes over MPI: rank %d cannot or may not use TCP", what, r);
      goto out;
    }
  if ((rc = connect_and_agree(ck, &s, links, n, what, deadline_ms, d))) goto out;
  rc = adopt_connections(ck, &s, links, n, what, info, tcp, d);
out:
  if (!*tcp) close_links(links, n);
  setup_free(&s, n);
  return rc;
}

ftl_err ck_l2_tcp_send(int sock, const void *p, size_t n, size_t *moved, ftl_diag *d) {
  ssize_t k = send(sock, p, n, MSG_NOSIGNAL);
  *moved = k > 0 ? (size_t)k : 0;
  if (k >= 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return FTL_OK;
  return ftl_diag_fail(d, FTL_ERR_IO, "send: %s", strerror(errno));
}

ftl_err ck_l2_tcp_sendfile(int sock, int fd, uint64_t off, size_t n, size_t *moved, int *file_failed, ftl_diag *d) {
  off_t o = (off_t)off;
  *moved = 0;
  ssize_t k = sendfile(sock, fd, &o, n);
  if (k > 0) {
    *moved = (size_t)k;
    return FTL_OK;
  }
  if (k == 0) { /* the file ends early */
    errno = 0;
    *file_failed = 1;
    return FTL_OK;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return FTL_OK;
  /* sendfile names neither end: a broken connection is one of these, anything else the file's. */
  if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN || errno == ETIMEDOUT)
    return ftl_diag_fail(d, FTL_ERR_IO, "sendfile: %s", strerror(errno));
  *file_failed = 1;
  return FTL_OK;
}

ftl_err ck_l2_tcp_recv(int sock, void *p, size_t n, size_t *moved, ftl_diag *d) {
  ssize_t k = recv(sock, p, n, 0);
  *moved = k > 0 ? (size_t)k : 0;
  if (k > 0) return FTL_OK;
  if (k == 0) return ftl_diag_fail(d, FTL_ERR_IO, "the connection ended early");
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return FTL_OK;
  return ftl_diag_fail(d, FTL_ERR_IO, "recv: %s", strerror(errno));
}

/* sendfile has no MSG_NOSIGNAL, and a library must not change the process's SIGPIPE: a fetcher
 * that closed would kill the program. So SIGPIPE is blocked in this thread while its streams run,
 * and one they raised is taken back (sigtimedwait) unless one was pending before (libcurl's way).
 * Even a sendfile that sent some bytes may raise it (seen: 64 KiB sent, then the peer's reset). */
void ck_l2_tcp_quiet_pipe(ck_l2_tcp_pipe *g) {
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigemptyset(&g->pending_before);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old);
  sigpending(&g->pending_before);
}

void ck_l2_tcp_restore_pipe(const ck_l2_tcp_pipe *g) {
  sigset_t pipe_set, now_pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigemptyset(&now_pending);
  sigpending(&now_pending);
  if (sigismember(&now_pending, SIGPIPE) && !sigismember(&g->pending_before, SIGPIPE)) {
    const struct timespec now = {0, 0};
    while (sigtimedwait(&pipe_set, NULL, &now) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

void ck_l2_tcp_wake_at(int sock, uint64_t bytes) {
  int v = bytes > INT_MAX ? INT_MAX : bytes < 1 ? 1 : (int)bytes;
  (void)setsockopt(sock, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v);
}

void ck_l2_tcp_wait(const int *socks, const int *out, int n, int wait_ms) {
  struct pollfd *fds = ftl_calloc((size_t)n + 1, sizeof *fds);
  if (!fds) {
    /* Without memory for the wait: a short sleep, then every stream is tried again. */
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
    return;
  }
  for (int i = 0; i < n; i++) fds[i] = (struct pollfd){.fd = socks[i], .events = out[i] ? POLLOUT : POLLIN};
  (void)poll(fds, (nfds_t)n, wait_ms);
  ftl_free(fds);
}
