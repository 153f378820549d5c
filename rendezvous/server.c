/* rendezvous/server.c: the launcher's rendezvous server (see server.h and
 * docs/formats/rendezvous-wire.md). */
#include "rendezvous/server.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ftl/core.h"
#include "rendezvous/wire.h"

enum conn_role { ROLE_UNKNOWN = 0, ROLE_AGENT = 1, ROLE_RANK = 2 };

typedef struct conn {
  int fd;
  enum conn_role role;
  int rank;
  bool said_bye;
  bool parked;         /* a standby rank waiting for its activation */
  ftl_linebuf lb;
} conn;

struct ftl_rdzv_server {
  int listen_fd;
  int port;
  int world_size;
  char token[128];
  conn *conns;
  size_t nconns, cap;
  bool *joined;        /* per rank */
  char (*hosts)[64];   /* per rank, from whichever of agent/rank spoke first */
  int joined_count;
  bool went;
  bool failed;
  char fail_reason[1024];
  json_t *activation;  /* the activate message of a standby gang, once activated (owned) */
};

ftl_err rz_rdzv_server_create(const char *bind_addr, int world_size, const char *token, ftl_rdzv_server **out,
                               ftl_diag *d) {
  ftl_err rc = FTL_OK;
  ftl_rdzv_server *s = ftl_calloc(1, sizeof *s);
  if (!s) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  s->listen_fd = -1;
  s->world_size = world_size;
  if (ftl_fmt(s->token, sizeof s->token, "%s", token)) {
    rc = ftl_diag_fail(d, FTL_ERR_INVAL, "rendezvous token too long");
    goto out;
  }
  s->joined = ftl_calloc((size_t)world_size, sizeof *s->joined);
  s->hosts = ftl_calloc((size_t)world_size, sizeof *s->hosts);
  if (!s->joined || !s->hosts) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  rc = rz_tcp_listen(bind_addr, &s->listen_fd, &s->port, d);
  if (rc) goto out;
  *out = s;
  s = NULL;
out:
  rz_rdzv_server_destroy(s);
  return rc;
}

void rz_rdzv_server_destroy(ftl_rdzv_server *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nconns; i++) {
    close(s->conns[i].fd);
    rz_linebuf_free(&s->conns[i].lb);
  }
  if (s->listen_fd >= 0) close(s->listen_fd);
  json_decref(s->activation);
  ftl_free(s->conns);
  ftl_free(s->joined);
  ftl_free(s->hosts);
  ftl_free(s);
}

int rz_rdzv_server_port(const ftl_rdzv_server *s) { return s->port; }
int rz_rdzv_server_joined(const ftl_rdzv_server *s) { return s->joined_count; }
bool rz_rdzv_server_rank_joined(const ftl_rdzv_server *s, int rank) {
  return rank >= 0 && rank < s->world_size && s->joined[rank];
}
size_t rz_rdzv_server_connections(const ftl_rdzv_server *s) { return s->nconns; }
size_t rz_rdzv_server_rank_connections(const ftl_rdzv_server *s) {
  size_t n = 0;
  for (size_t i = 0; i < s->nconns; i++) n += s->conns[i].role == ROLE_RANK;
  return n;
}
bool rz_rdzv_server_went(const ftl_rdzv_server *s) { return s->went; }

const char *rz_rdzv_server_host(const ftl_rdzv_server *s, int rank) {
  if (rank < 0 || rank >= s->world_size || !s->hosts[rank][0]) return NULL;
  return s->hosts[rank];
}

size_t rz_rdzv_server_pollfds(const ftl_rdzv_server *s, struct pollfd *fds, size_t cap) {
  size_t n = 0;
  if (n < cap) fds[n++] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
  for (size_t i = 0; i < s->nconns && n < cap; i++) fds[n++] = (struct pollfd){.fd = s->conns[i].fd, .events = POLLIN};
  return n;
}

static void send_to(conn *c, json_t *msg) {
  ftl_diag ignored;
  if (msg) rz_wire_send(c->fd, msg, ftl_deadline_after_ms(2000), &ignored);
  json_decref(msg);
}

static void send_activation(const ftl_rdzv_server *s, conn *c) {
  if (s->activation) send_to(c, json_copy(s->activation));
}

static void emit(ftl_rdzv_event_fn fn, void *user, ftl_rdzv_event_kind kind, const conn *c, const json_t *msg,
                 const char *detail) {
  ftl_rdzv_event ev = {.kind = kind,
                       .rank = c ? c->rank : -1,
                       .role = c ? (c->role == ROLE_AGENT ? "agent" : c->role == ROLE_RANK ? "rank" : "unknown") : "",
                       .msg = msg,
                       .detail = detail};
  fn(user, &ev);
}

static void maybe_go(ftl_rdzv_server *s, ftl_rdzv_event_fn fn, void *user) {
  if (s->went || s->failed || s->joined_count < s->world_size) return;
  s->went = true;
  for (size_t i = 0; i < s->nconns; i++)
    if (s->conns[i].role == ROLE_RANK) send_to(&s->conns[i], json_pack("{s:s, s:i}", "type", "go", "world_size", s->world_size));
  emit(fn, user, FTL_RDZV_GANG_GO, NULL, NULL, NULL);
}

/* Returns false when the connection must be dropped. */
static bool handle_hello(ftl_rdzv_server *s, conn *c, const json_t *msg, const char *type, ftl_rdzv_event_fn fn,
                         void *user) {
  char why[256];
  const char *token = rz_wire_str(msg, "token", "");
  int64_t rank = rz_wire_int(msg, "rank", -1);
  if (strcmp(token, s->token) != 0) {
    snprintf(why, sizeof why, "%s of rank %lld has token '%.60s', not this attempt's: a process of another attempt",
             type, (long long)rank, token);
    goto reject;
  }
  if (rank < 0 || rank >= s->world_size) {
    snprintf(why, sizeof why, "%s has rank %lld outside 0..%d", type, (long long)rank, s->world_size - 1);
    goto reject;
  }
  c->rank = (int)rank;
  const char *host = rz_wire_str(msg, "host", "?");
  if (!s->hosts[rank][0]) snprintf(s->hosts[rank], sizeof s->hosts[rank], "%s", host);
  if (strcmp(type, "agent") == 0) {
    c->role = ROLE_AGENT;
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

static bool handle_message(ftl_rdzv_server *s, conn *c, const json_t *msg, ftl_rdzv_event_fn fn, void *user) {
  const char *type = rz_wire_str(msg, "type", "");
  if (c->role == ROLE_UNKNOWN) {
    if (strcmp(type, "agent") == 0 || strcmp(type, "rank") == 0) return handle_hello(s, c, msg, type, fn, user);
    emit(fn, user, FTL_RDZV_REJECTED, c, msg, "first message is not a hello");
    return false;
  }
  if (strcmp(type, "ready") == 0) emit(fn, user, FTL_RDZV_RANK_READY, c, msg, NULL);
  else if (strcmp(type, "first_step") == 0) emit(fn, user, FTL_RDZV_FIRST_STEP, c, msg, NULL);
  else if (strcmp(type, "step") == 0) emit(fn, user, FTL_RDZV_STEP, c, msg, NULL);
  else if (strcmp(type, "event") == 0) emit(fn, user, FTL_RDZV_EVENT, c, msg, NULL);
  else if (strcmp(type, "alive") == 0) emit(fn, user, FTL_RDZV_AGENT_ALIVE, c, msg, NULL);
  else if (strcmp(type, "section") == 0) emit(fn, user, FTL_RDZV_SECTION, c, msg, NULL);
  else if (strcmp(type, "stopping") == 0) emit(fn, user, FTL_RDZV_AGENT_STOPPING, c, msg, NULL);
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

static void drop_conn(ftl_rdzv_server *s, size_t i) {
  close(s->conns[i].fd);
  rz_linebuf_free(&s->conns[i].lb);
  s->conns[i] = s->conns[s->nconns - 1];
  s->nconns--;
}

static void accept_all(ftl_rdzv_server *s) {
  for (;;) {
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (s->nconns == s->cap) {
      size_t ncap = s->cap ? s->cap * 2 : 16;
      conn *nc = ftl_realloc(s->conns, ncap * sizeof *nc);
      if (!nc) {
        close(fd);
        return;
      }
      s->conns = nc;
      s->cap = ncap;
    }
    s->conns[s->nconns++] = (conn){.fd = fd, .role = ROLE_UNKNOWN, .rank = -1};
  }
}

void rz_rdzv_server_handle(ftl_rdzv_server *s, const struct pollfd *fds, size_t n, ftl_rdzv_event_fn fn, void *user) {
  /* Read the connections that were polled first (by fd: the array may have been rebuilt), then
   * accept, so indexes into s->conns stay valid while we work. */
  for (size_t k = 0; k < n; k++) {
    if (fds[k].fd == s->listen_fd || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    size_t i = 0;
    while (i < s->nconns && s->conns[i].fd != fds[k].fd) i++;
    if (i == s->nconns) continue;
    conn *c = &s->conns[i];
    bool eof = false;
    bool keep = rz_linebuf_fill(&c->lb, c->fd, &eof) == FTL_OK;
    for (;;) {
      if (!keep) break;
      json_t *msg = NULL;
      ftl_diag d;
      ftl_err rc = rz_linebuf_next(&c->lb, &msg, &d);
      if (rc == FTL_ERR_NOTFOUND) break;
      if (rc) {
        emit(fn, user, FTL_RDZV_REJECTED, c, NULL, d.msg);
        keep = false;
        break;
      }
      keep = handle_message(s, c, msg, fn, user);
      json_decref(msg);
    }
    if (!keep || eof) {
      if (!c->said_bye && c->role != ROLE_UNKNOWN) emit(fn, user, FTL_RDZV_CONN_LOST, c, NULL, NULL);
      drop_conn(s, i);
    }
  }
  for (size_t k = 0; k < n; k++)
    if (fds[k].fd == s->listen_fd && (fds[k].revents & POLLIN)) accept_all(s);
}

void rz_rdzv_server_describe_missing(const ftl_rdzv_server *s, char *buf, size_t size) {
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

void rz_rdzv_server_signal_agents(ftl_rdzv_server *s, int signal) {
  for (size_t i = 0; i < s->nconns; i++)
    if (s->conns[i].role == ROLE_AGENT) send_to(&s->conns[i], json_pack("{s:s, s:i}", "type", "signal", "signal", signal));
}

void rz_rdzv_server_ping_agents(ftl_rdzv_server *s) {
  for (size_t i = 0; i < s->nconns; i++)
    if (s->conns[i].role == ROLE_AGENT) {
      /* A ping that does not fit in the socket buffer is dropped: the next one says the same. */
      json_t *msg = json_pack("{s:s}", "type", "ping");
      ftl_diag ignored;
      if (msg) rz_wire_send_nowait(s->conns[i].fd, msg, &ignored);
      json_decref(msg);
    }
}

void rz_rdzv_server_request_stop(ftl_rdzv_server *s, const char *reason) {
  for (size_t i = 0; i < s->nconns; i++)
    if (s->conns[i].role == ROLE_RANK) send_to(&s->conns[i], json_pack("{s:s, s:s}", "type", "stop", "reason", reason));
}

void rz_rdzv_server_fail(ftl_rdzv_server *s, const char *reason) {
  if (s->failed || s->went) return;
  s->failed = true;
  snprintf(s->fail_reason, sizeof s->fail_reason, "%s", reason);
  for (size_t i = 0; i < s->nconns; i++)
    if (s->conns[i].role == ROLE_RANK)
      send_to(&s->conns[i], json_pack("{s:s, s:s}", "type", "fail", "reason", s->fail_reason));
}

void rz_rdzv_server_activate(ftl_rdzv_server *s, const json_t *fields) {
  if (s->activation) return;
  s->activation = json_deep_copy(fields);
  if (!json_is_object(s->activation)) {
    json_decref(s->activation);
    s->activation = json_object();
  }
  if (!s->activation) return;
  json_object_set_new(s->activation, "type", json_string("activate"));
  for (size_t i = 0; i < s->nconns; i++)
    /* A rank still in its rendezvous or MPI_Init hears of it when it parks. */
    if (s->conns[i].role == ROLE_AGENT || (s->conns[i].role == ROLE_RANK && s->conns[i].parked))
      send_activation(s, &s->conns[i]);
}

bool rz_rdzv_server_activated(const ftl_rdzv_server *s) { return s->activation != NULL; }
