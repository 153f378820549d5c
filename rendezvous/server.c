/* rendezvous/server.c: the launcher's rendezvous server (see server.h and
 * docs/formats/rendezvous-wire.md).
 *
 * Built for gangs of thousands (docs/scale.md): the listener and every connection sit in one
 * readiness set (core/evloop.h, epoll), whose single descriptor is what the launcher polls, so a
 * turn costs the connections that have something to say, not all of them; each ready connection
 * is found by the pointer it was registered with (no search by descriptor); reads go through one
 * shared buffer, and a connection keeps a buffer of its own only while it holds part of a line
 * (a connection between messages costs its struct alone).
 *
 * Since wire version 3 a host may speak through one connection, its relay (launcher/relay.c):
 * each agent and rank behind it is a virtual connection here (a struct without a descriptor, found
 * by rank in an index), so supervise.c sees the same events from either path. Messages to every
 * agent or rank of a relay (go, fail, stop, signal, ping) go once per relay, which fans them out.
 *
 * Map: the state, create/destroy and queries, sending, events and refusals; hellos and messages;
 * relays (virtual connections, forwarded lines, batches, a lost relay); connections (dropping,
 * accepting, reading); one turn (rz_rdzv_server_handle) and the launcher's requests.
 *
 * Why one file: every part works on the one connection struct and the server's indexes of them
 * (by rank, by relay, the readiness set), which no other file should see; the relays' virtual
 * connections are the same struct, so splitting relays out would put that struct in a header for
 * two files' sake. What is shared already lives apart: the wire (wire.c), its proofs (wire_auth.c),
 * the event loop (core/evloop.c). */
#include "rendezvous/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/evloop.h"
#include "core/net.h"
#include "ftl/core.h"
#include "rendezvous/wire.h"

enum conn_role { ROLE_UNKNOWN = 0, ROLE_AGENT = 1, ROLE_RANK = 2, ROLE_RELAY = 3 };

/* What one turn reads at most before returning to the caller's loop (signals, timers): a flood
 * of reports cannot starve them; what is left is still ready at the next turn (level-triggered). */
enum { READY_BATCH = 256, READY_BATCHES_PER_TURN = 8, SCRATCH_BYTES = 64 * 1024 };

typedef struct conn conn;
struct conn {
  int fd;              /* for a virtual connection: its relay's */
  enum conn_role role;
  int rank;
  bool said_bye;
  bool parked;         /* a standby rank waiting for its activation */
  size_t slot;         /* its index in rz_rdzv_server.conns, or in its relay's locals */
  rz_linebuf lb;      /* a partial line only; empty (no allocation) between messages */
  conn *relay;         /* a virtual connection: the relay it speaks through; NULL: its own socket */
  char nonce[FTL_WIRE_NONCE_HEX]; /* the challenge its hello must answer (a direct connection; hex,
                                     no NUL: at 16k ranks each byte here is 32 KiB) */
  int32_t peer_pid, peer_uid; /* a virtual connection: its process, as its relay's SO_PEERCRED saw it;
                                 a direct one's peer is read from its socket when a refusal names it */
  conn **locals;       /* a relay: its virtual connections */
  size_t nlocals, cap_locals;
};

struct rz_rdzv_server {
  int listen_fd;
  int port;
  int world_size;
  char token[128];
  core_evloop *loop;   /* the listener (registered with the server itself) and every connection */
  conn **conns;        /* each allocated on its own, so the pointer epoll holds stays valid */
  size_t nconns, cap;
  size_t rank_conns;   /* connections that said a rank's hello (virtual ones too) */
  size_t relays;       /* relay connections */
  size_t nvirtual;     /* virtual connections behind them */
  conn **by_rank[2];   /* virtual connections by rank: [0] agents, [1] ranks (allocated with the
                          first relay; a relay's lines name their sender by rank, found in O(1)) */
  const conn **via[2]; /* the relay of each virtual connection by rank ([0] agents, [1] ranks): a batch's
                          entries are checked against it (8 bytes a rank, contiguous for a host's
                          ranks) without reaching for the connection itself, a cache miss per entry */
  char *scratch;       /* SCRATCH_BYTES: where every read lands first */
  bool *joined;        /* per rank */
  bool *agent_seen;    /* per rank: its agent said hello (on either path: once) */
  char (*hosts)[64];   /* per rank, from whichever of agent/rank spoke first */
  int joined_count;
  bool went;
  bool *mpi_up;        /* per rank: through MPI_Init (`mpi_up`, under srun's direct launch) */
  int mpi_up_count;
  bool mpi_went;       /* `mpi_go` sent: every rank was through MPI_Init */
  bool failed;
  bool accept_warned;
  char fail_reason[1024];
  json_t *activation;  /* the activate message of a standby gang, once activated (owned) */
  int cadence_ms;      /* the relays' batch period and samples per step entry (set_cadence); 0: none */
  int cadence_samples; /* told (a relay then batches every 250 ms, one sample per entry) */
  int64_t cadence_fence_ms; /* the relays' wait for a word from the launcher; 0: not told */
};

ftl_err rz_rdzv_server_create(const char *bind_addr, int world_size, const char *token, rz_rdzv_server **out,
                               ftl_diag *d) {
  ftl_err rc = FTL_OK;
  rz_rdzv_server *s = ftl_calloc(1, sizeof *s);
  if (!s) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  s->listen_fd = -1;
  s->world_size = world_size;
  if (ftl_fmt(s->token, sizeof s->token, "%s", token)) {
    rc = ftl_diag_fail(d, FTL_ERR_INVAL, "rendezvous token too long");
    goto out;
  }
  s->joined = ftl_calloc((size_t)world_size, sizeof *s->joined);
  s->agent_seen = ftl_calloc((size_t)world_size, sizeof *s->agent_seen);
  s->hosts = ftl_calloc((size_t)world_size, sizeof *s->hosts);
  s->mpi_up = ftl_calloc((size_t)world_size, sizeof *s->mpi_up);
  s->scratch = ftl_malloc(SCRATCH_BYTES);
  if (!s->joined || !s->agent_seen || !s->hosts || !s->mpi_up || !s->scratch) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  if ((rc = core_evloop_create(&s->loop, d))) goto out;
  rc = core_net_listen(bind_addr, &s->listen_fd, &s->port, d);
  if (rc) goto out;
  if ((rc = core_evloop_add(s->loop, s->listen_fd, s, d))) goto out;
  *out = s;
  s = NULL;
out:
  rz_rdzv_server_destroy(s);
  return rc;
}

void rz_rdzv_server_destroy(rz_rdzv_server *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nconns; i++) {
    conn *c = s->conns[i];
    for (size_t k = 0; k < c->nlocals; k++) ftl_free(c->locals[k]);
    ftl_free(c->locals);
    close(c->fd);
    rz_linebuf_free(&c->lb);
    ftl_free(c);
  }
  ftl_free(s->by_rank[0]);
  ftl_free(s->by_rank[1]);
  ftl_free(s->via[0]);
  ftl_free(s->via[1]);
  if (s->listen_fd >= 0) close(s->listen_fd);
  core_evloop_destroy(s->loop);
  json_decref(s->activation);
  ftl_free(s->scratch);
  ftl_free(s->conns);
  ftl_free(s->joined);
  ftl_free(s->agent_seen);
  ftl_free(s->mpi_up);
  ftl_free(s->hosts);
  ftl_free(s);
}

int rz_rdzv_server_port(const rz_rdzv_server *s) { return s->port; }
int rz_rdzv_server_joined(const rz_rdzv_server *s) { return s->joined_count; }
bool rz_rdzv_server_rank_joined(const rz_rdzv_server *s, int rank) {
  return rank >= 0 && rank < s->world_size && s->joined[rank];
}
size_t rz_rdzv_server_connections(const rz_rdzv_server *s) { return s->nconns - s->relays + s->nvirtual; }
size_t rz_rdzv_server_relays(const rz_rdzv_server *s) { return s->relays; }
size_t rz_rdzv_server_rank_connections(const rz_rdzv_server *s) { return s->rank_conns; }
bool rz_rdzv_server_went(const rz_rdzv_server *s) { return s->went; }

const char *rz_rdzv_server_host(const rz_rdzv_server *s, int rank) {
  if (rank < 0 || rank >= s->world_size || !s->hosts[rank][0]) return NULL;
  return s->hosts[rank];
}

size_t rz_rdzv_server_pollfds(const rz_rdzv_server *s, struct pollfd *fds, size_t cap) {
  if (cap < 1) return 0;
  fds[0] = (struct pollfd){.fd = core_evloop_fd(s->loop), .events = POLLIN};
  return 1;
}

/* A message for one virtual connection goes through its relay, addressed (to, to_rank). */
static void send_to(conn *c, json_t *msg) {
  ftl_diag ignored;
  if (msg && c->relay) {
    json_object_set_new(msg, "to", json_string(c->role == ROLE_AGENT ? "agent" : "rank"));
    json_object_set_new(msg, "to_rank", json_integer(c->rank));
  }
  if (msg) rz_wire_send(c->fd, msg, ftl_deadline_after_ms(2000), &ignored);
  json_decref(msg);
}

/* Sends msg (stolen) to every connection of `role`: once to each direct one, once to each relay
 * (addressed to all its connections of that role). nowait: as rz_wire_send_nowait (a ping the next
 * one supersedes). Each form is encoded once. */
static void send_to_all(rz_rdzv_server *s, enum conn_role role, json_t *msg, bool nowait) {
  char *line = NULL, *rline = NULL;
  size_t len = 0, rlen = 0;
  ftl_diag ignored;
  if (!msg || rz_wire_encode(msg, &line, &len, &ignored) != FTL_OK) goto out;
  if (s->relays) {
    json_object_set_new(msg, "to", json_string(role == ROLE_AGENT ? "agent" : "rank"));
    if (rz_wire_encode(msg, &rline, &rlen, &ignored) != FTL_OK) goto out;
  }
  int64_t deadline = nowait ? FTL_NO_DEADLINE : ftl_deadline_after_ms(2000);
  for (size_t i = 0; i < s->nconns; i++) {
    conn *c = s->conns[i];
    if (c->role == role) rz_wire_send_line(c->fd, line, len, deadline, nowait, &ignored);
    else if (c->role == ROLE_RELAY && rline) rz_wire_send_line(c->fd, rline, rlen, deadline, nowait, &ignored);
  }
out:
  ftl_free(line);
  ftl_free(rline);
  json_decref(msg);
}

/* The gang's cadence to one relay (rz_rdzv_server_set_cadence), when one was set. */
static void send_cadence(const rz_rdzv_server *s, conn *relay) {
  if (!s->cadence_ms) return;
  ftl_diag ignored;
  json_t *m = json_pack("{s:s, s:i, s:i}", "type", "cadence", "batch_ms", s->cadence_ms, "samples", s->cadence_samples);
  if (m && s->cadence_fence_ms > 0) json_object_set_new(m, "fence_ms", json_integer(s->cadence_fence_ms));
  if (m) rz_wire_send(relay->fd, m, ftl_deadline_after_ms(2000), &ignored);
  json_decref(m);
}

static void send_activation(const rz_rdzv_server *s, conn *c) {
  if (s->activation) send_to(c, json_copy(s->activation));
}

/* "address:port" of a TCP peer, for refusals. */
static void describe_peer(int fd, char *out, size_t size) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  char host[INET6_ADDRSTRLEN] = "?";
  int port = -1;
  snprintf(out, size, "?");
  if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0) return;
  if (ss.ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
  }
  snprintf(out, size, "%s:%d", host, port);
}

/* Who a connection is, for a refusal: its address, or (behind a relay) its process and the relay's. */
static void describe_conn(const conn *c, char *out, size_t size) {
  char addr[80];
  describe_peer(c->fd, addr, sizeof addr);
  if (c->relay) snprintf(out, size, "pid %d uid %d via relay %s", (int)c->peer_pid, (int)c->peer_uid, addr);
  else snprintf(out, size, "%s", addr);
}

static const char *role_of(const conn *c) {
  return c ? (c->role == ROLE_AGENT ? "agent" : c->role == ROLE_RANK ? "rank" : "unknown") : "";
}

static void emit(ftl_rdzv_event_fn fn, void *user, rz_rdzv_event_kind kind, const conn *c, const json_t *msg,
                 const char *detail) {
  char peer[160] = "";
  if (c && kind == FTL_RDZV_REJECTED) describe_conn(c, peer, sizeof peer);
  rz_rdzv_event ev = {.kind = kind, .rank = c ? c->rank : -1, .role = role_of(c), .msg = msg, .detail = detail, .peer = peer};
  fn(user, &ev);
}

/* A heartbeat (FTL_RDZV_STEP or FTL_RDZV_AGENT_ALIVE) with its figures; msg NULL for a batch's entry. */
static void emit_heartbeat(ftl_rdzv_event_fn fn, void *user, rz_rdzv_event_kind kind, const conn *c,
                           const json_t *msg, const rz_heartbeat *hb) {
  rz_rdzv_event ev = {.kind = kind, .rank = c->rank, .role = role_of(c), .msg = msg, .hb = hb, .peer = ""};
  fn(user, &ev);
}

/* The figures of a heartbeat that came whole (a direct connection's, or one a relay forwarded). */
static void emit_heartbeat_msg(ftl_rdzv_event_fn fn, void *user, rz_rdzv_event_kind kind, const conn *c,
                               const json_t *msg) {
  double compute = rz_wire_num(msg, "compute_ms", -1);
  const json_t *flops = json_object_get(msg, "flops"), *flops_ms = json_object_get(msg, "flops_ms");
  rz_heartbeat hb = {.step = rz_wire_int(msg, "step", -1),
                     .compute_ms = compute,
                     .samples = &compute,
                     .nsamples = json_is_number(json_object_get(msg, "compute_ms")),
                     .has_flops = json_is_number(flops) && json_is_number(flops_ms),
                     .flops = json_number_value(flops),
                     .flops_ms = json_number_value(flops_ms),
                     .state = rz_wire_str(msg, "state", ""),
                     .rss_kb = rz_wire_int(msg, "rss_kb", -1)};
  emit_heartbeat(fn, user, kind, c, msg, &hb);
}

/* A rank through MPI_Init (rdzv_init.c, mpi_init_barrier): once all are, `mpi_go` to every rank. */
static void note_mpi_up(rz_rdzv_server *s, const conn *c) {
  if (c->rank < 0 || c->rank >= s->world_size || s->mpi_up[c->rank] || s->mpi_went) return;
  s->mpi_up[c->rank] = true;
  if (++s->mpi_up_count < s->world_size) return;
  s->mpi_went = true;
  send_to_all(s, ROLE_RANK, json_pack("{s:s}", "type", "mpi_go"), false);
}

static void maybe_go(rz_rdzv_server *s, ftl_rdzv_event_fn fn, void *user) {
  if (s->went || s->failed || s->joined_count < s->world_size) return;
  s->went = true;
  send_to_all(s, ROLE_RANK, json_pack("{s:s, s:i}", "type", "go", "world_size", s->world_size), false);
  emit(fn, user, FTL_RDZV_GANG_GO, NULL, NULL, NULL);
}

/* ---- hellos and messages --------------------------------------------------------------------- */

/* Whether msg's proof answers the challenge c was sent. */
static bool nonce_proven(const rz_rdzv_server *s, const conn *c, const char *role, int64_t rank, const json_t *msg) {
  char nonce[FTL_WIRE_NONCE_HEX + 1];
  memcpy(nonce, c->nonce, FTL_WIRE_NONCE_HEX);
  nonce[FTL_WIRE_NONCE_HEX] = '\0';
  return rz_wire_proof_ok(s->token, nonce, role, rank, rz_wire_str(msg, "proof", NULL));
}

/* Returns false when the connection must be dropped. */
static bool handle_hello(rz_rdzv_server *s, conn *c, const json_t *msg, const char *type, ftl_rdzv_event_fn fn,
                         void *user) {
  char why[256], who[64];
  int64_t rank = rz_wire_int(msg, "rank", -1);
  snprintf(who, sizeof who, "%s %lld", strcmp(type, "agent") == 0 ? "the agent of rank" : "rank", (long long)rank);
  /* A direct connection proves the token for this connection's nonce; a relayed one was proven to
   * its relay (launcher/relay.c), which proved itself here. */
  if (!c->relay && rz_wire_int(msg, "version", 0) < FTL_WIRE_VERSION) {
    snprintf(why, sizeof why,
             "%s speaks wire version %lld, without a proof of the attempt's token: this launcher needs version %d "
             "(an ftl library of the same release)",
             who, (long long)rz_wire_int(msg, "version", 0), FTL_WIRE_VERSION);
    goto reject;
  }
  if (!c->relay && !nonce_proven(s, c, type, rank, msg)) {
    snprintf(why, sizeof why,
             "%s has no valid proof of this attempt's token: a process of another attempt, or not of this job", who);
    goto reject;
  }
  if (rank < 0 || rank >= s->world_size) {
    snprintf(why, sizeof why, "%s has rank %lld outside 0..%d", type, (long long)rank, s->world_size - 1);
    goto reject;
  }
  if (strcmp(type, "agent") == 0 && s->agent_seen[rank]) {
    /* An agent says hello once, on whichever path: a second would take over the first's reports
     * (a rank's second join is refused the same way, below). */
    snprintf(why, sizeof why, "%s said hello twice", who);
    goto reject;
  }
  c->rank = (int)rank;
  const char *host = rz_wire_str(msg, "host", "?");
  if (!s->hosts[rank][0]) snprintf(s->hosts[rank], sizeof s->hosts[rank], "%s", host);
  if (strcmp(type, "agent") == 0) {
    c->role = ROLE_AGENT;
    s->agent_seen[rank] = true;
    if (c->relay) {
      s->by_rank[0][rank] = c;
      s->via[0][rank] = c->relay;
    }
    emit(fn, user, FTL_RDZV_AGENT_HELLO, c, msg, NULL);
    send_activation(s, c);
    return true;
  }
  c->role = ROLE_RANK;
  if (s->joined[rank]) {
    snprintf(why, sizeof why, "rank %lld joined twice", (long long)rank);
    c->role = ROLE_UNKNOWN;
    goto reject;
  }
  s->joined[rank] = true;
  s->joined_count++;
  s->rank_conns++;
  if (c->relay) {
    s->by_rank[1][rank] = c;
    s->via[1][rank] = c->relay;
  }
  emit(fn, user, FTL_RDZV_RANK_JOINED, c, msg, NULL);
  if (s->failed) {
    send_to(c, json_pack("{s:s, s:s}", "type", "fail", "reason", s->fail_reason));
    return true;
  }
  if (s->went) {
    /* Cannot happen with unique ranks; kept so a logic slip never leaves a rank waiting. */
    send_to(c, json_pack("{s:s, s:i}", "type", "go", "world_size", s->world_size));
    return true;
  }
  maybe_go(s, fn, user);
  return true;
reject:
  send_to(c, json_pack("{s:s, s:s}", "type", "fail", "reason", why));
  emit(fn, user, FTL_RDZV_REJECTED, c, msg, why);
  return false;
}

static bool handle_relay_message(rz_rdzv_server *s, conn *c, const json_t *msg, const char *type,
                                 ftl_rdzv_event_fn fn, void *user);
static bool handle_relay_hello(rz_rdzv_server *s, conn *c, const json_t *msg, ftl_rdzv_event_fn fn, void *user);

static bool handle_message(rz_rdzv_server *s, conn *c, const json_t *msg, ftl_rdzv_event_fn fn, void *user) {
  const char *type = rz_wire_str(msg, "type", "");
  if (c->role == ROLE_RELAY) return handle_relay_message(s, c, msg, type, fn, user);
  if (c->role == ROLE_UNKNOWN) {
    if (strcmp(type, "agent") == 0 || strcmp(type, "rank") == 0) return handle_hello(s, c, msg, type, fn, user);
    if (strcmp(type, "relay") == 0 && !c->relay) return handle_relay_hello(s, c, msg, fn, user);
    emit(fn, user, FTL_RDZV_REJECTED, c, msg, "first message is not a hello");
    return false;
  }
  if (strcmp(type, "ready") == 0) emit(fn, user, FTL_RDZV_RANK_READY, c, msg, NULL);
  else if (strcmp(type, "mpi_up") == 0 && c->role == ROLE_RANK) note_mpi_up(s, c);
  else if (strcmp(type, "first_step") == 0) emit(fn, user, FTL_RDZV_FIRST_STEP, c, msg, NULL);
  else if (strcmp(type, "step") == 0) emit_heartbeat_msg(fn, user, FTL_RDZV_STEP, c, msg);
  else if (strcmp(type, "event") == 0) emit(fn, user, FTL_RDZV_EVENT, c, msg, NULL);
  else if (strcmp(type, "alive") == 0) emit_heartbeat_msg(fn, user, FTL_RDZV_AGENT_ALIVE, c, msg);
  else if (strcmp(type, "section") == 0) emit(fn, user, FTL_RDZV_SECTION, c, msg, NULL);
  else if (strcmp(type, "stopping") == 0) emit(fn, user, FTL_RDZV_AGENT_STOPPING, c, msg, NULL);
  else if (strcmp(type, "imports") == 0 && c->role == ROLE_AGENT) emit(fn, user, FTL_RDZV_IMPORTS, c, msg, NULL);
  else if (strcmp(type, "gpu_health") == 0 && c->role == ROLE_AGENT) emit(fn, user, FTL_RDZV_GPU_HEALTH, c, msg, NULL);
  else if (strcmp(type, "parked") == 0) {
    c->parked = true;
    emit(fn, user, FTL_RDZV_RANK_PARKED, c, msg, NULL);
    send_activation(s, c); /* a rank that parks after the activation goes on at once */
  } else if (strcmp(type, "exit") == 0) {
    c->said_bye = true;
    emit(fn, user, FTL_RDZV_AGENT_EXIT, c, msg, NULL);
  } else if (strcmp(type, "bye") == 0) {
    c->said_bye = true;
    emit(fn, user, FTL_RDZV_RANK_BYE, c, msg, NULL);
  } else {
    /* Unknown types are ignored, so a newer rank library can talk to an older launcher. */
    FTL_LOG(FTL_LOG_DEBUG, "rdzv", "ignoring message of type '%s' from rank %d", type, c->rank);
  }
  return true;
}

/* --- relays (wire version 3) ---------------------------------------------------------------- */

static bool handle_relay_hello(rz_rdzv_server *s, conn *c, const json_t *msg, ftl_rdzv_event_fn fn, void *user) {
  char why[256];
  if (rz_wire_int(msg, "version", 0) < FTL_WIRE_VERSION ||
      !nonce_proven(s, c, "relay", -1, msg)) {
    snprintf(why, sizeof why,
             "relay of host %.64s has no valid proof of this attempt's token: a process of another attempt, or not of "
             "this job",
             rz_wire_str(msg, "host", "?"));
    goto reject;
  }
  if (!s->by_rank[0]) {
    for (int k = 0; k < 2; k++) {
      s->by_rank[k] = ftl_calloc((size_t)s->world_size, sizeof *s->by_rank[k]);
      s->via[k] = ftl_calloc((size_t)s->world_size, sizeof *s->via[k]);
    }
    if (!s->by_rank[0] || !s->by_rank[1] || !s->via[0] || !s->via[1]) {
      for (int k = 0; k < 2; k++) {
        ftl_free(s->by_rank[k]);
        ftl_free(s->via[k]);
        s->by_rank[k] = NULL;
        s->via[k] = NULL;
      }
      snprintf(why, sizeof why, "out of memory for the relays' index");
      goto reject;
    }
  }
  c->role = ROLE_RELAY;
  s->relays++;
  send_cadence(s, c);
  FTL_LOG(FTL_LOG_DEBUG, "rdzv", "relay of host %s connected", rz_wire_str(msg, "host", "?"));
  return true;
reject:
  send_to(c, json_pack("{s:s, s:s}", "type", "fail", "reason", why));
  emit(fn, user, FTL_RDZV_REJECTED, c, msg, why);
  return false;
}

/* ---- relays ---------------------------------------------------------------------------------- */

/* The virtual connection of (role, rank) behind relay r, or NULL: a relay speaks for its own. */
static conn *local_at(const rz_rdzv_server *s, const conn *r, int k, int64_t rank) {
  if (k < 0 || rank < 0 || rank >= s->world_size) return NULL;
  conn *v = s->by_rank[k][rank];
  return v && v->relay == r ? v : NULL;
}

static conn *local_of(const rz_rdzv_server *s, const conn *r, const char *role, int64_t rank) {
  return local_at(s, r, strcmp(role, "agent") == 0 ? 0 : strcmp(role, "rank") == 0 ? 1 : -1, rank);
}

static void drop_virtual(rz_rdzv_server *s, conn *v) {
  conn *r = v->relay;
  int k = v->role == ROLE_AGENT ? 0 : v->role == ROLE_RANK ? 1 : -1;
  if (k >= 0 && v->rank >= 0 && s->by_rank[k][v->rank] == v) {
    s->by_rank[k][v->rank] = NULL;
    s->via[k][v->rank] = NULL;
  }
  if (v->role == ROLE_RANK) s->rank_conns--;
  size_t i = v->slot;
  r->locals[i] = r->locals[r->nlocals - 1];
  r->locals[i]->slot = i;
  r->nlocals--;
  s->nvirtual--;
  ftl_free(v);
}

/* A relay's new virtual connection (its first line is a hello); NULL when out of memory. */
static conn *add_virtual(rz_rdzv_server *s, conn *r) {
  if (r->nlocals == r->cap_locals) {
    size_t ncap = r->cap_locals ? r->cap_locals * 2 : 16;
    conn **nl = ftl_realloc(r->locals, ncap * sizeof *nl);
    if (!nl) return NULL;
    r->locals = nl;
    r->cap_locals = ncap;
  }
  conn *v = ftl_calloc(1, sizeof *v);
  if (!v) return NULL;
  *v = (conn){.fd = r->fd, .role = ROLE_UNKNOWN, .rank = -1, .relay = r, .slot = r->nlocals};
  r->locals[r->nlocals++] = v;
  s->nvirtual++;
  return v;
}

/* Tells the relay to close the local connection of v (refused), then forgets it. */
static void refuse_virtual(rz_rdzv_server *s, conn *v, const char *role, int64_t rank) {
  ftl_diag ignored;
  json_t *m = json_pack("{s:s, s:s, s:I}", "type", "drop", "to", role, "to_rank", (json_int_t)rank);
  if (m) rz_wire_send(v->relay->fd, m, ftl_deadline_after_ms(2000), &ignored);
  json_decref(m);
  drop_virtual(s, v);
}

/* One relayed message: {"type":"fwd","role":R,"rank":N,"msg":{...}}. */
static void handle_fwd(rz_rdzv_server *s, conn *r, const json_t *env, ftl_rdzv_event_fn fn, void *user) {
  const char *role = rz_wire_str(env, "role", "");
  int64_t rank = rz_wire_int(env, "rank", -1);
  const json_t *msg = json_object_get(env, "msg");
  if (!json_is_object(msg) || !json_is_string(json_object_get(msg, "type"))) {
    emit(fn, user, FTL_RDZV_REJECTED, r, NULL, "a relayed message is not an object with a string 'type'");
    return;
  }
  conn *v = local_of(s, r, role, rank);
  if (!v) {
    const char *type = rz_wire_str(msg, "type", "");
    if (strcmp(type, role) != 0 || (strcmp(role, "agent") != 0 && strcmp(role, "rank") != 0)) {
      emit(fn, user, FTL_RDZV_REJECTED, r, msg, "a relayed message from a connection that said no hello");
      return;
    }
    if (rz_wire_int(msg, "rank", -2) != rank) {
      emit(fn, user, FTL_RDZV_REJECTED, r, msg, "a relayed hello whose rank is not its envelope's");
      return;
    }
    if (!(v = add_virtual(s, r))) return;
    /* Who it is, as the relay's SO_PEERCRED saw it: for a refusal's event. */
    v->peer_pid = (int32_t)rz_wire_int(env, "peer_pid", -1);
    v->peer_uid = (int32_t)rz_wire_int(env, "peer_uid", -1);
  }
  if (!handle_message(s, v, msg, fn, user)) refuse_virtual(s, v, role, rank);
}

/* One entry of a relay's batch, as its rank's heartbeat: the same from either parse (the fast path,
 * rz_wire_batch_parse, or jansson's for a line in another layout). No message is built for it. */
static void batch_event(rz_rdzv_server *s, conn *r, const rz_batch_entry *e, ftl_rdzv_event_fn fn, void *user) {
  int k = e->alive ? 0 : 1;
  if (e->rank < 0 || e->rank >= s->world_size || s->via[k][e->rank] != r) return; /* a relay speaks for its own */
  rz_heartbeat hb = {.step = -1, .compute_ms = -1, .samples = e->samples, .state = "", .rss_kb = -1};
  if (e->alive) {
    hb.state = e->state;
    hb.rss_kb = e->step;
  } else {
    hb.step = e->step;
    hb.compute_ms = e->compute_ms;
    hb.nsamples = e->nsamples;
    hb.has_flops = e->has_flops;
    hb.flops = e->flops;
    hb.flops_ms = e->flops_ms;
  }
  rz_rdzv_event ev = {.kind = e->alive ? FTL_RDZV_AGENT_ALIVE : FTL_RDZV_STEP,
                      .rank = (int)e->rank,
                      .role = e->alive ? "agent" : "rank",
                      .hb = &hb,
                      .peer = ""};
  fn(user, &ev);
}

/* A step entry's compute from jansson: a number, or the list of the period's samples. */
static bool json_samples(const json_t *compute, rz_batch_entry *e) {
  if (json_is_number(compute)) {
    e->compute_ms = e->samples[0] = json_number_value(compute);
    e->nsamples = 1;
    return true;
  }
  size_t n = json_array_size(compute), k;
  const json_t *x;
  if (!json_is_array(compute) || n == 0 || n > FTL_WIRE_MAX_SAMPLES) return false;
  json_array_foreach(compute, k, x) {
    if (!json_is_number(x)) return false;
    e->samples[k] = json_number_value(x);
  }
  e->nsamples = (int)n;
  e->compute_ms = e->samples[n - 1];
  return true;
}

/* The steady state of a host in one line, when it is not in the compact layout the fast path takes
 * (the relays write that one): each local rank's latest step heartbeat as [rank, step, compute]
 * ([..., flops, flops_ms] with its FLOPs; compute a number or the period's samples) and each local
 * agent's latest alive as [rank, state, rss_kb]. A malformed entry is skipped. */
static void handle_batch(rz_rdzv_server *s, conn *r, const json_t *msg, ftl_rdzv_event_fn fn, void *user) {
  const json_t *list = json_object_get(msg, "step"), *e;
  size_t i;
  if (json_is_array(list)) json_array_foreach(list, i, e) {
      const json_t *rank = json_array_get(e, 0), *step = json_array_get(e, 1);
      const json_t *flops = json_array_get(e, 3), *flops_ms = json_array_get(e, 4);
      size_t n = json_array_size(e);
      rz_batch_entry be = {.alive = false, .has_flops = n == 5};
      if ((n != 3 && n != 5) || !json_is_integer(rank) || !json_is_integer(step) ||
          !json_samples(json_array_get(e, 2), &be))
        continue;
      if (n == 5 && (!json_is_number(flops) || !json_is_number(flops_ms))) continue;
      be.rank = json_integer_value(rank);
      be.step = json_integer_value(step);
      be.flops = json_number_value(flops);
      be.flops_ms = json_number_value(flops_ms);
      batch_event(s, r, &be, fn, user);
    }
  list = json_object_get(msg, "alive");
  if (json_is_array(list)) json_array_foreach(list, i, e) {
      const json_t *rank = json_array_get(e, 0), *state = json_array_get(e, 1), *rss = json_array_get(e, 2);
      if (json_array_size(e) != 3 || !json_is_integer(rank) || !json_is_string(state) || !json_is_integer(rss)) continue;
      rz_batch_entry be = {.alive = true, .rank = json_integer_value(rank), .step = json_integer_value(rss)};
      snprintf(be.state, sizeof be.state, "%s", json_string_value(state));
      batch_event(s, r, &be, fn, user);
    }
}

static bool handle_relay_message(rz_rdzv_server *s, conn *c, const json_t *msg, const char *type,
                                 ftl_rdzv_event_fn fn, void *user) {
  if (strcmp(type, "fwd") == 0) {
    handle_fwd(s, c, msg, fn, user);
  } else if (strcmp(type, "batch") == 0) {
    handle_batch(s, c, msg, fn, user);
  } else if (strcmp(type, "refused") == 0) {
    /* The relay turned a local connection away itself (another user's, no valid proof, a second
     * hello for a rank): shown as every refusal is, with who it was. */
    char why[512], who[160];
    snprintf(why, sizeof why, "%s", rz_wire_str(msg, "reason", "refused by the relay"));
    char relay_addr[80];
    describe_peer(c->fd, relay_addr, sizeof relay_addr);
    snprintf(who, sizeof who, "pid %lld uid %lld via relay %s", (long long)rz_wire_int(msg, "pid", -1),
             (long long)rz_wire_int(msg, "uid", -1), relay_addr);
    rz_rdzv_event ev = {.kind = FTL_RDZV_REJECTED, .rank = -1, .role = "unknown", .detail = why, .peer = who};
    fn(user, &ev);
  } else if (strcmp(type, "closed") == 0) {
    /* A local connection ended, after every line it sent: lost unless it said goodbye. */
    conn *v = local_of(s, c, rz_wire_str(msg, "role", ""), rz_wire_int(msg, "rank", -1));
    if (v && !v->said_bye) emit(fn, user, FTL_RDZV_CONN_LOST, v, NULL, NULL);
    if (v) drop_virtual(s, v);
  } else {
    FTL_LOG(FTL_LOG_DEBUG, "rdzv", "ignoring relay message of type '%s'", type);
  }
  return true;
}

/* A relay's connection closed: every agent and rank behind it that had not said goodbye is lost,
 * as if each had dropped its own connection (supervise.c and detect.c judge them as ever). */
static void lose_relay(rz_rdzv_server *s, conn *r, ftl_rdzv_event_fn fn, void *user) {
  size_t silent = 0;
  for (size_t i = 0; i < r->nlocals; i++) silent += !r->locals[i]->said_bye && r->locals[i]->role != ROLE_UNKNOWN;
  if (silent)
    FTL_LOG(FTL_LOG_WARN, "rdzv", "a host's relay closed its connection: %zu agent%s and rank%s behind it lost with it",
            silent, silent == 1 ? "" : "s", silent == 1 ? "" : "s");
  while (r->nlocals > 0) {
    conn *v = r->locals[r->nlocals - 1];
    if (!v->said_bye && v->role != ROLE_UNKNOWN) emit(fn, user, FTL_RDZV_CONN_LOST, v, NULL, NULL);
    drop_virtual(s, v);
  }
}

/* ---- connections: dropping, accepting, reading ----------------------------------------------- */

static void drop_conn(rz_rdzv_server *s, conn *c) {
  core_evloop_del(s->loop, c->fd);
  close(c->fd);
  rz_linebuf_free(&c->lb);
  if (c->role == ROLE_RANK) s->rank_conns--;
  if (c->role == ROLE_RELAY) s->relays--;
  ftl_free(c->locals);
  size_t i = c->slot;
  s->conns[i] = s->conns[s->nconns - 1];
  s->conns[i]->slot = i;
  s->nconns--;
  ftl_free(c);
}

static void accept_all(rz_rdzv_server *s) {
  for (;;) {
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      /* Out of descriptors: the rank stays in the backlog (and is accepted once some close). The
       * launcher checks the limit against the world size before it starts a gang (supervise.c). */
      if ((errno == EMFILE || errno == ENFILE) && !s->accept_warned) {
        s->accept_warned = true;
        FTL_LOG(FTL_LOG_ERROR, "rdzv", "cannot accept a rank's connection: %s (the descriptor limit, ulimit -n)",
                strerror(errno));
      }
      return;
    }
    conn *c = ftl_calloc(1, sizeof *c);
    if (c && s->nconns == s->cap) {
      size_t ncap = s->cap ? s->cap * 2 : 16;
      conn **nc = ftl_realloc(s->conns, ncap * sizeof *nc);
      if (!nc) {
        ftl_free(c);
        c = NULL;
      } else {
        s->conns = nc;
        s->cap = ncap;
      }
    }
    ftl_diag ignored;
    if (!c || core_evloop_add(s->loop, fd, c, &ignored) != FTL_OK) {
      ftl_free(c);
      close(fd);
      return;
    }
    *c = (conn){.fd = fd, .role = ROLE_UNKNOWN, .rank = -1, .slot = s->nconns};
    s->conns[s->nconns++] = c;
    /* Every line the launcher sends is small and waited for (go, signal, a relay's cadence and then
     * its go): Nagle would hold one back until the peer acknowledged the last, up to its delayed
     * ACK's 40 ms, as the peers' own connections (core_net_connect) never do. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* The challenge goes first: the hello must answer it (wire version 4). A connection that cannot
     * take one short line on an empty buffer is gone already; its close is read as any other. A
     * nonce that cannot be drawn stays zeros, which no proof answers (rz_wire_proof_ok). */
    char nonce[FTL_WIRE_NONCE_HEX + 1];
    if (rz_wire_nonce(nonce, &ignored) == FTL_OK) {
      memcpy(c->nonce, nonce, FTL_WIRE_NONCE_HEX);
      rz_wire_send_challenge(fd, nonce, &ignored);
    }
  }
}

/* A relay's batch entry from the fast path (rz_wire_batch_parse): as handle_batch's. */
typedef struct batch_ctx {
  rz_rdzv_server *s;
  conn *relay;
  ftl_rdzv_event_fn fn;
  void *user;
} batch_ctx;

static void on_batch_entry(void *user, const rz_batch_entry *e) {
  batch_ctx *b = user;
  batch_event(b->s, b->relay, e, b->fn, b->user);
}

/* Handles every complete line of `data` (len bytes); returns false when the connection must go.
 * *used says how much was consumed (the rest is a partial line). */
static bool handle_lines(rz_rdzv_server *s, conn *c, const char *data, size_t len, size_t *used, ftl_rdzv_event_fn fn,
                         void *user) {
  size_t at = 0;
  bool keep = true;
  const char *nl;
  while (keep && at < len && (nl = memchr(data + at, '\n', len - at))) {
    size_t line_len = (size_t)(nl - (data + at));
    json_t *msg = NULL;
    ftl_diag d;
    batch_ctx bc = {s, c, fn, user};
    if (line_len > FTL_WIRE_MAX_LINE) {
      emit(fn, user, FTL_RDZV_REJECTED, c, NULL, "message longer than the wire's limit");
      keep = false;
    } else if (c->role == ROLE_RELAY && rz_wire_batch_parse(data + at, line_len, on_batch_entry, &bc) == FTL_OK) {
      /* a relay's batch, read without jansson (the common line at scale) */
    } else if (rz_wire_parse(data + at, line_len, &msg, &d) != FTL_OK) {
      emit(fn, user, FTL_RDZV_REJECTED, c, NULL, d.msg);
      keep = false;
    } else {
      keep = handle_message(s, c, msg, fn, user);
      json_decref(msg);
    }
    at += line_len + 1;
  }
  *used = at;
  return keep;
}

/* Keeps the partial line that ends a read; false when it is already past the wire's limit. */
static bool keep_partial(conn *c, const char *p, size_t n) {
  if (n == 0) return true;
  if (c->lb.len + n > FTL_WIRE_MAX_LINE + 1) return false;
  if (c->lb.cap < c->lb.len + n) {
    size_t ncap = c->lb.cap ? c->lb.cap : 256;
    while (ncap < c->lb.len + n) ncap *= 2;
    char *nd = ftl_realloc(c->lb.data, ncap);
    if (!nd) return false;
    c->lb.data = nd;
    c->lb.cap = ncap;
  }
  memcpy(c->lb.data + c->lb.len, p, n);
  c->lb.len += n;
  return true;
}

/* Reads what a ready connection has; false when it must be dropped (closed, reset, a bad line). */
static bool read_conn(rz_rdzv_server *s, conn *c, ftl_rdzv_event_fn fn, void *user) {
  for (;;) {
    ssize_t n = recv(c->fd, s->scratch, SCRATCH_BYTES, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false; /* closed, or reset: a closed connection for our purposes */
    size_t used = 0;
    bool keep;
    if (c->lb.len == 0) {
      /* The common case: whole lines straight from the shared buffer. */
      keep = handle_lines(s, c, s->scratch, (size_t)n, &used, fn, user);
      if (keep && !keep_partial(c, s->scratch + used, (size_t)n - used)) {
        emit(fn, user, FTL_RDZV_REJECTED, c, NULL, "message longer than the wire's limit");
        keep = false;
      }
    } else {
      keep = keep_partial(c, s->scratch, (size_t)n);
      if (!keep) emit(fn, user, FTL_RDZV_REJECTED, c, NULL, "message longer than the wire's limit");
      if (keep) {
        keep = handle_lines(s, c, c->lb.data, c->lb.len, &used, fn, user);
        memmove(c->lb.data, c->lb.data + used, c->lb.len - used);
        c->lb.len -= used;
      }
      if (c->lb.len == 0) rz_linebuf_free(&c->lb); /* between messages a connection holds no buffer */
    }
    if (!keep) return false;
    if ((size_t)n < SCRATCH_BYTES) return true; /* drained: the next readiness says when there is more */
  }
}

/* ---- one turn and the launcher's requests ---------------------------------------------------- */

void rz_rdzv_server_handle(rz_rdzv_server *s, const struct pollfd *fds, size_t n, ftl_rdzv_event_fn fn, void *user) {
  bool ready = false;
  for (size_t k = 0; k < n; k++)
    if (fds[k].fd == core_evloop_fd(s->loop) && (fds[k].revents & (POLLIN | POLLHUP | POLLERR))) ready = true;
  if (!ready) return;
  core_evloop_event evs[READY_BATCH];
  for (int batch = 0; batch < READY_BATCHES_PER_TURN; batch++) {
    int got = core_evloop_wait(s->loop, evs, READY_BATCH, 0);
    if (got <= 0) return;
    /* Connections first, then the listener, so no connection accepted in this batch is read
     * before it was reported ready. Each event names its connection: only that connection can
     * be dropped while it is handled, so the later pointers of the batch stay valid. */
    bool accept_now = false;
    for (int k = 0; k < got; k++) {
      if (evs[k].ptr == s) {
        accept_now = true;
        continue;
      }
      conn *c = evs[k].ptr;
      if (!read_conn(s, c, fn, user)) {
        if (c->role == ROLE_RELAY) lose_relay(s, c, fn, user);
        else if (!c->said_bye && c->role != ROLE_UNKNOWN) emit(fn, user, FTL_RDZV_CONN_LOST, c, NULL, NULL);
        drop_conn(s, c);
      }
    }
    if (accept_now) accept_all(s);
    if (got < READY_BATCH) return;
  }
}

void rz_rdzv_server_describe_missing(const rz_rdzv_server *s, char *buf, size_t size) {
  size_t used = 0;
  int listed = 0, missing = 0;
  buf[0] = '\0';
  for (int r = 0; r < s->world_size; r++) {
    if (s->joined[r]) continue;
    missing++;
    if (listed >= 16) continue; /* a long list helps nobody; the count says the rest */
    int w = snprintf(buf + used, size - used, "%srank %d (%s%s)", listed ? ", " : "", r,
                     s->hosts[r][0] ? "host " : "never started", s->hosts[r]);
    if (w < 0 || (size_t)w >= size - used) return;
    used += (size_t)w;
    listed++;
  }
  if (missing > listed) snprintf(buf + used, size - used, " and %d more", missing - listed);
}

void rz_rdzv_server_signal_agents(rz_rdzv_server *s, int signal) {
  send_to_all(s, ROLE_AGENT, json_pack("{s:s, s:i}", "type", "signal", "signal", signal), false);
}

void rz_rdzv_server_ping_agents(rz_rdzv_server *s) {
  /* A ping that does not fit in the socket buffer is dropped: the next one says the same. */
  send_to_all(s, ROLE_AGENT, json_pack("{s:s}", "type", "ping"), true);
}

void rz_rdzv_server_request_stop(rz_rdzv_server *s, const char *reason) {
  send_to_all(s, ROLE_RANK, json_pack("{s:s, s:s}", "type", "stop", "reason", reason), false);
}

void rz_rdzv_server_fail(rz_rdzv_server *s, const char *reason) {
  if (s->failed || s->went) return;
  s->failed = true;
  snprintf(s->fail_reason, sizeof s->fail_reason, "%s", reason);
  send_to_all(s, ROLE_RANK, json_pack("{s:s, s:s}", "type", "fail", "reason", s->fail_reason), false);
}

void rz_rdzv_server_activate(rz_rdzv_server *s, const json_t *fields) {
  if (s->activation) return;
  s->activation = json_deep_copy(fields);
  if (!json_is_object(s->activation)) {
    json_decref(s->activation);
    s->activation = json_object();
  }
  if (!s->activation) return;
  json_object_set_new(s->activation, "type", json_string("activate"));
  /* A rank still in its rendezvous or MPI_Init hears of it when it parks. */
  for (size_t i = 0; i < s->nconns; i++) {
    conn *c = s->conns[i];
    if (c->role == ROLE_AGENT || (c->role == ROLE_RANK && c->parked)) send_activation(s, c);
    for (size_t k = 0; k < c->nlocals; k++)
      if (c->locals[k]->role == ROLE_AGENT || (c->locals[k]->role == ROLE_RANK && c->locals[k]->parked))
        send_activation(s, c->locals[k]);
  }
}

bool rz_rdzv_server_activated(const rz_rdzv_server *s) { return s->activation != NULL; }

void rz_rdzv_server_set_cadence(rz_rdzv_server *s, int batch_ms, int samples, int64_t fence_ms) {
  s->cadence_ms = batch_ms > 0 ? batch_ms : 0;
  s->cadence_fence_ms = fence_ms > 0 ? fence_ms : 0;
  s->cadence_samples = samples < 1 ? 1 : samples > FTL_WIRE_MAX_SAMPLES ? FTL_WIRE_MAX_SAMPLES : samples;
  for (size_t i = 0; i < s->nconns; i++)
    if (s->conns[i]->role == ROLE_RELAY) send_cadence(s, s->conns[i]);
}
