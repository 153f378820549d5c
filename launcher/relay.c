/* launcher/relay.c: a host's relay (see relay.h; the messages: docs/formats/rendezvous-wire.md,
 * "Relays"). One poll() loop over the launcher's connection, the listener and the host's local
 * connections (a few per rank of this host: nothing here grows with the gang). Every local line is
 * parsed (a line that is not a message closes its connection, as the launcher would), so what goes
 * up is always well-formed and within the launcher's line limit.
 *
 * Map: limits, state and the relay's address; sending up to the launcher; local connections
 * (closing one, what may wait for a batch, refusals, binding, their messages and reads); the
 * launcher's messages; the batch; accepting locals and reading the launcher; the relay's loop
 * (relay_run); starting the relay and waiting for it (ln_relay_ensure, ln_relay_wait). */
#include "launcher/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/net.h"
#include "ftl/core.h"
#include "rendezvous/wire.h"

/* ---- limits, state, the relay's address ------------------------------------------------------ */

/* The batch period until the launcher says its cadence (and then its bounds), a batch line's budget
 * (under the launcher's FTL_WIRE_MAX_LINE), how long the relay outlives its last local connection,
 * how long it waits for the first, and the most local connections it takes. */
enum {
  BATCH_MS = 250,
  BATCH_MIN_MS = 50,
  BATCH_MAX_MS = 60000,
  BATCH_LINE_MAX = 60 * 1024,
  LINGER_MS = 1000,
  FIRST_WAIT_MS = 60000,
  SEND_MS = 2000,
  MAX_LOCALS = 4096,
  LOCAL_PING_MS = 1000
};

enum local_role { LOCAL_UNKNOWN = 0, LOCAL_AGENT, LOCAL_RANK };

typedef struct local {
  int fd;
  enum local_role role;
  int rank;
  pid_t pid;       /* its process and user (SO_PEERCRED), for the refusal's event */
  uid_t uid;
  char nonce[FTL_WIRE_NONCE_HEX + 1]; /* the challenge its hello must answer */
  rz_linebuf lb;
  json_t *pending; /* the latest message that waits for the next batch (may_wait), or NULL */
  double samples[FTL_WIRE_MAX_SAMPLES]; /* a rank: the compute of its steps that waited, oldest first */
  int nsamples;
  char state_sent[9]; /* an agent: the state of its last alive that went up ("" before the first) */
} local;

typedef struct relay {
  const core_launch_env *env;
  int listen_fd, up_fd;
  rz_linebuf up_lb;
  local **locals;
  size_t n, cap;
  bool had_local;
  int expected_agents, agents_seen; /* the host's agents, and how many said hello so far */
  int64_t *bound;  /* every (role, rank) a local connection was bound to, as role * 2^25 + rank: each
                      is bound once in the relay's life (a refused or ended one is never rebound) */
  size_t nbound, cap_bound;
  int64_t idle_since_ms, next_batch_ms;
  size_t pending;
  int batch_ms;    /* the period: BATCH_MS until the launcher's cadence says another */
  int samples;     /* the compute samples a step entry brings (the cadence's); 0: one, as a number */
  /* The fence, the relay's for its agents: the kernel ends the launcher connection when what the
   * relay sends goes unacknowledged for timeouts.node_s (a dead or cut-off launcher host); a
   * launcher process heard from for none of fence_ms (node_s until the cadence says more: its pings
   * grow with the gang) is given up too. Meanwhile the agents hear the relay's own ping each second. */
  int64_t fence_ms, heard_ms, next_ping_ms;
} relay;

ftl_err ln_relay_address(const core_launch_env *env, char *addr, size_t size, ftl_diag *d) {
  if (!env->token[0]) return ftl_diag_fail(d, FTL_ERR_INVAL, "relay: no FTL_RDZV_TOKEN to name the relay by");
  /* Abstract names are listed for everyone in /proc/net/unix: the name is derived from the token,
   * never the token itself. */
  char name[FTL_WIRE_NAME_HEX + 1];
  ftl_err rc = rz_wire_public_name(env->token, "ftl-relay-name", name, d);
  if (rc) return rc;
  if (ftl_fmt(addr, size, "@ftl-relay-%s", name)) return ftl_diag_fail(d, FTL_ERR_RANGE, "relay: address too long");
  return FTL_OK;
}

/* ---- sending up ------------------------------------------------------------------------------ */

static const char *role_name(enum local_role r) { return r == LOCAL_AGENT ? "agent" : "rank"; }

/* Sends one message (stolen) to the launcher; false when it cannot (the relay then ends). */
static bool up_send(relay *r, json_t *msg) {
  char *line = NULL;
  size_t len = 0;
  ftl_diag d;
  bool ok = msg && rz_wire_encode(msg, &line, &len, &d) == FTL_OK;
  /* A message that would break the launcher's limit is not sent (its local connection is refused
   * by the caller); the relay itself must never be cut off for one. */
  if (ok && len > FTL_WIRE_MAX_LINE) ok = false;
  else if (ok) ok = rz_wire_send_line(r->up_fd, line, len, ftl_deadline_after_ms(SEND_MS), false, &d) == FTL_OK;
  ftl_free(line);
  json_decref(msg);
  return ok;
}

static bool forward(relay *r, local *l, json_t *msg_borrowed) {
  return up_send(r, json_pack("{s:s, s:s, s:i, s:O}", "type", "fwd", "role", role_name(l->role), "rank", l->rank, "msg",
                              msg_borrowed));
}

static void put_entry(const relay *r, const local *l, core_buf *b);
static bool send_batch_line(relay *r, core_buf *b);

/* Forgets what l had waiting for the batch. */
static void drop_pending(relay *r, local *l) {
  if (l->pending) r->pending--;
  json_decref(l->pending);
  l->pending = NULL;
  l->nsamples = 0;
}

/* A local connection's batched message goes now (before one of its own that must not wait): a
 * rank's steps as a batch of one entry, so none of the period's samples is lost; an alive whole. */
static bool flush_pending(relay *r, local *l) {
  if (!l->pending) return true;
  bool ok;
  if (l->role == LOCAL_RANK && r->samples) {
    core_buf b;
    core_buf_init(&b, FTL_WIRE_MAX_LINE);
    core_buf_adds(&b, "{\"type\":\"batch\",\"step\":[");
    put_entry(r, l, &b);
    ok = send_batch_line(r, &b);
  } else {
    ok = forward(r, l, l->pending);
  }
  if (l->role == LOCAL_AGENT) snprintf(l->state_sent, sizeof l->state_sent, "%s", rz_wire_str(l->pending, "state", ""));
  drop_pending(r, l);
  return ok;
}

/* ---- local connections ----------------------------------------------------------------------- */

static void close_local(relay *r, size_t i, bool tell) {
  local *l = r->locals[i];
  if (tell && l->role != LOCAL_UNKNOWN) {
    flush_pending(r, l);
    up_send(r, json_pack("{s:s, s:s, s:i}", "type", "closed", "role", role_name(l->role), "rank", l->rank));
  }
  drop_pending(r, l);
  close(l->fd);
  rz_linebuf_free(&l->lb);
  ftl_free(l);
  r->locals[i] = r->locals[--r->n];
  if (r->n == 0) r->idle_since_ms = ftl_clock_ms();
}

/* A state the batch's compact layout carries as it is: 1 to 8 letters or '?' (a /proc state). */
static bool plain_state(const char *st) {
  size_t n = 0;
  for (; st[n]; n++)
    if (n == 8 || !((st[n] >= 'A' && st[n] <= 'Z') || (st[n] >= 'a' && st[n] <= 'z') || st[n] == '?')) return false;
  return n > 0;
}

/* Whether msg may wait for the next batch: a rank's step heartbeat ({type, step, compute_ms}, with
 * flops and flops_ms or without: not a progress report, which the launcher logs as an event) or an
 * agent's alive ({type, state, rss_kb}) unless its program is stopped (T) or was at its last alive
 * sent up: a stop, and its end, are told at once, as a direct agent tells them every second (the
 * launcher judges a stop over a few reports, detect.h, which a longer batch period must not thin
 * out; a running program's R and S come and go and wait). A message with any other field goes at
 * once, whole. */
static bool may_wait(const local *l, const json_t *msg, const char *type) {
  size_t n = json_object_size(msg);
  if (l->role == LOCAL_RANK && !strcmp(type, "step") && (n == 3 || n == 5))
    return json_is_integer(json_object_get(msg, "step")) && json_is_number(json_object_get(msg, "compute_ms")) &&
           (n == 3 || (json_is_number(json_object_get(msg, "flops")) && json_is_number(json_object_get(msg, "flops_ms"))));
  if (n != 3) return false;
  if (l->role == LOCAL_AGENT && !strcmp(type, "alive")) {
    const char *state = rz_wire_str(msg, "state", "");
    return plain_state(state) && strcmp(state, "T") != 0 && strcmp(l->state_sent, "T") != 0 &&
           json_is_integer(json_object_get(msg, "rss_kb"));
  }
  return false;
}

/* Tells the launcher that a local connection was turned away and why (it logs it as every refusal,
 * with the pid and uid); false, so the caller closes it. */
static bool refuse_local(relay *r, const local *l, const char *why) {
  up_send(r, json_pack("{s:s, s:s, s:I, s:I}", "type", "refused", "reason", why, "pid", (json_int_t)l->pid, "uid",
                       (json_int_t)l->uid));
  return false;
}

/* Records (role, rank) as bound; false when it was already, now or before. */
static bool bind_once(relay *r, enum local_role role, int rank) {
  int64_t key = (int64_t)role * ((int64_t)1 << 25) + rank;
  for (size_t i = 0; i < r->nbound; i++)
    if (r->bound[i] == key) return false;
  if (r->nbound == r->cap_bound) {
    size_t ncap = r->cap_bound ? r->cap_bound * 2 : 16;
    int64_t *nb = ftl_realloc(r->bound, ncap * sizeof *nb);
    if (!nb) return false;
    r->bound = nb;
    r->cap_bound = ncap;
  }
  r->bound[r->nbound++] = key;
  return true;
}

/* One message from a local connection; false when the connection must be closed. */
static bool on_local_message(relay *r, local *l, json_t *msg) {
  const char *type = rz_wire_str(msg, "type", "");
  if (l->role == LOCAL_UNKNOWN) {
    /* Its hello: the relay checks the proof (the launcher trusts the relay for its locals), binds
     * the connection to the (role, rank) it proved, once, and forwards under that binding only. The
     * launcher checks the rank against the gang. */
    int64_t rank = rz_wire_int(msg, "rank", -1);
    char why[200];
    if ((strcmp(type, "agent") && strcmp(type, "rank")) || rank < 0 || rank > (1 << 24)) {
      snprintf(why, sizeof why, "first message is not an agent's or a rank's hello");
      return refuse_local(r, l, why);
    }
    if (!rz_wire_proof_ok(r->env->token, l->nonce, type, rank, rz_wire_str(msg, "proof", NULL))) {
      snprintf(why, sizeof why, "%s of rank %lld has no valid proof of this attempt's token", type, (long long)rank);
      return refuse_local(r, l, why);
    }
    enum local_role role = !strcmp(type, "agent") ? LOCAL_AGENT : LOCAL_RANK;
    if (!bind_once(r, role, (int)rank)) {
      snprintf(why, sizeof why, "%s of rank %lld said hello twice", type, (long long)rank);
      return refuse_local(r, l, why);
    }
    l->role = role;
    l->rank = (int)rank;
    r->agents_seen += l->role == LOCAL_AGENT;
    json_object_del(msg, "proof"); /* proven here; nothing of the secret goes further */
    return up_send(r, json_pack("{s:s, s:s, s:i, s:I, s:I, s:O}", "type", "fwd", "role", role_name(l->role), "rank",
                                l->rank, "peer_pid", (json_int_t)l->pid, "peer_uid", (json_int_t)l->uid, "msg", msg));
  }
  if (may_wait(l, msg, type)) {
    if (!l->pending) r->pending++;
    json_decref(l->pending);
    l->pending = json_incref(msg);
    if (l->role == LOCAL_RANK) { /* its compute joins the period's samples (the latest kept) */
      int keep = r->samples > 0 ? r->samples : 1;
      if (l->nsamples == keep) memmove(l->samples, l->samples + 1, (size_t)--l->nsamples * sizeof *l->samples);
      l->samples[l->nsamples++] = rz_wire_num(msg, "compute_ms", 0);
    }
    return true;
  }
  /* At once, after its own batched message, so its order is kept (a section after a step). */
  bool ok = flush_pending(r, l) && forward(r, l, msg);
  if (l->role == LOCAL_AGENT && !strcmp(type, "alive"))
    snprintf(l->state_sent, sizeof l->state_sent, "%s", rz_wire_str(msg, "state", ""));
  return ok;
}

/* Reads what local i sent; false when it must be closed (closed by its peer, a bad line). */
static bool read_local(relay *r, local *l) {
  bool eof = false;
  if (rz_linebuf_fill(&l->lb, l->fd, &eof) != FTL_OK) return false;
  for (;;) {
    json_t *msg = NULL;
    ftl_diag d;
    ftl_err rc = rz_linebuf_next(&l->lb, &msg, &d);
    if (rc == FTL_ERR_NOTFOUND) break;
    if (rc != FTL_OK) return false;
    bool keep = on_local_message(r, l, msg);
    json_decref(msg);
    if (!keep) return false;
  }
  return !eof;
}

/* ---- the launcher's messages ----------------------------------------------------------------- */

/* One line to every local connection of a role, or to the one of rank (rank >= 0); nowait: not sent
 * to a connection whose buffer is full (a ping, which the next one repeats). */
static void to_locals(relay *r, enum local_role role, int64_t rank, const char *line, size_t len, bool nowait) {
  ftl_diag d;
  for (size_t i = 0; i < r->n; i++) {
    const local *l = r->locals[i];
    if (l->role == role && (rank < 0 || l->rank == rank))
      rz_wire_send_line(l->fd, line, len, ftl_deadline_after_ms(SEND_MS), nowait, &d);
  }
}

/* The launcher's message: to every local connection of a role, or to one (to_rank). */
static void on_launcher_message(relay *r, json_t *msg) {
  const char *to = rz_wire_str(msg, "to", "");
  enum local_role role = !strcmp(to, "agent") ? LOCAL_AGENT : !strcmp(to, "rank") ? LOCAL_RANK : LOCAL_UNKNOWN;
  int64_t to_rank = rz_wire_int(msg, "to_rank", -1);
  if (role == LOCAL_UNKNOWN && !strcmp(rz_wire_str(msg, "type", ""), "cadence")) {
    /* The gang's cadence: the batch period, and the samples a step entry brings (the launcher's
     * stragglers' window), within bounds a line can hold. */
    int64_t ms = rz_wire_int(msg, "batch_ms", BATCH_MS), k = rz_wire_int(msg, "samples", 1);
    r->batch_ms = (int)(ms < BATCH_MIN_MS ? BATCH_MIN_MS : ms > BATCH_MAX_MS ? BATCH_MAX_MS : ms);
    r->samples = (int)(k < 1 ? 1 : k > FTL_WIRE_MAX_SAMPLES ? FTL_WIRE_MAX_SAMPLES : k);
    int64_t fence = rz_wire_int(msg, "fence_ms", 0);
    if (fence > r->fence_ms && fence <= 24LL * 3600 * 1000) r->fence_ms = fence; /* never under node_s */
    if (r->next_batch_ms > ftl_clock_ms() + r->batch_ms) r->next_batch_ms = ftl_clock_ms() + r->batch_ms;
    return;
  }
  if (role == LOCAL_UNKNOWN) return; /* for the relay itself: a refusal (fail) is followed by the close */
  if (!strcmp(rz_wire_str(msg, "type", ""), "drop")) {
    for (size_t i = 0; i < r->n; i++)
      if (r->locals[i]->role == role && r->locals[i]->rank == to_rank) {
        close_local(r, i, false);
        break;
      }
    return;
  }
  json_object_del(msg, "to");
  json_object_del(msg, "to_rank");
  char *line = NULL;
  size_t len = 0;
  ftl_diag d;
  if (rz_wire_encode(msg, &line, &len, &d) != FTL_OK) return;
  to_locals(r, role, to_rank, line, len, false);
  ftl_free(line);
}

/* ---- the batch ------------------------------------------------------------------------------- */

/* A number of an entry: a compute sample rounded to the microsecond (a short plain decimal, which
 * the launcher reads without strtod: rz_wire_number), anything else exactly. */
static void put_num(core_buf *b, double v, bool sample) {
  if (sample) core_buf_printf(b, "%.3f", v);
  else core_buf_printf(b, "%.17g", v);
}

/* The batch entry of l's waiting message (may_wait), written as the launcher's fast path reads it
 * (rendezvous/wire.h): [rank,step,compute] for a rank's step, compute the period's samples
 * [s1,...] when the launcher said its cadence (else the latest one, exactly, as a number), and
 * flops,flops_ms after it with its FLOPs; [rank,"state",rss_kb] for an agent's alive. */
static void put_entry(const relay *r, const local *l, core_buf *b) {
  const json_t *m = l->pending;
  if (l->role == LOCAL_AGENT) {
    core_buf_printf(b, "[%d,\"%s\",%lld]", l->rank, rz_wire_str(m, "state", "?"), (long long)rz_wire_int(m, "rss_kb", -1));
    return;
  }
  core_buf_printf(b, "[%d,%lld,", l->rank, (long long)rz_wire_int(m, "step", 0));
  if (r->samples) {
    for (int k = 0; k < l->nsamples; k++) {
      core_buf_addc(b, k ? ',' : '[');
      put_num(b, l->samples[k], true);
    }
    core_buf_addc(b, ']');
  } else {
    put_num(b, rz_wire_num(m, "compute_ms", 0), false);
  }
  if (json_object_get(m, "flops")) {
    core_buf_addc(b, ',');
    put_num(b, rz_wire_num(m, "flops", 0), false);
    core_buf_addc(b, ',');
    put_num(b, rz_wire_num(m, "flops_ms", 0), false);
  }
  core_buf_addc(b, ']');
}

/* Ends and sends one batch line (the current one of b); false when the launcher cannot take it. */
static bool send_batch_line(relay *r, core_buf *b) {
  ftl_diag d;
  bool ok = core_buf_adds(b, "]}\n") == FTL_OK &&
            rz_wire_send_line(r->up_fd, b->p, b->len, ftl_deadline_after_ms(SEND_MS), false, &d) == FTL_OK;
  core_buf_free(b);
  return ok;
}

/* The batch: every pending message, the steps and the alives in lines of their own, each line at
 * most BATCH_LINE_MAX bytes (an entry is a few numbers, up to FTL_WIRE_MAX_SAMPLES samples, and a
 * state of at most 8 letters). */
static bool send_batch(relay *r) {
  static const struct {
    enum local_role role;
    const char *head;
  } parts[] = {{LOCAL_RANK, "{\"type\":\"batch\",\"step\":["}, {LOCAL_AGENT, "{\"type\":\"batch\",\"alive\":["}};
  core_buf b, entry;
  core_buf_init(&b, FTL_WIRE_MAX_LINE);
  core_buf_init(&entry, FTL_WIRE_MAX_LINE);
  bool ok = true;
  for (size_t p = 0; p < 2 && r->pending > 0 && ok; p++) {
    size_t count = 0;
    for (size_t i = 0; i < r->n && ok; i++) {
      local *l = r->locals[i];
      if (!l->pending || l->role != parts[p].role) continue;
      entry.len = 0;
      put_entry(r, l, &entry);
      if (l->role == LOCAL_AGENT) snprintf(l->state_sent, sizeof l->state_sent, "%s", rz_wire_str(l->pending, "state", ""));
      drop_pending(r, l);
      if (count && b.len + entry.len + 4 > BATCH_LINE_MAX) {
        ok = send_batch_line(r, &b);
        count = 0;
      }
      core_buf_adds(&b, count ? "," : parts[p].head);
      core_buf_add(&b, entry.p, entry.len);
      count++;
    }
    if (ok && count) ok = send_batch_line(r, &b);
  }
  core_buf_free(&b);
  core_buf_free(&entry);
  return ok;
}

/* ---- accepting locals, reading the launcher -------------------------------------------------- */

static void accept_locals(relay *r) {
  for (;;) {
    int fd = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return;
    local *l = r->n < MAX_LOCALS ? ftl_calloc(1, sizeof *l) : NULL;
    if (l && r->n == r->cap) {
      size_t ncap = r->cap ? r->cap * 2 : 16;
      local **nl = ftl_realloc(r->locals, ncap * sizeof *nl);
      if (!nl) {
        ftl_free(l);
        l = NULL;
      } else {
        r->locals = nl;
        r->cap = ncap;
      }
    }
    if (!l) {
      close(fd);
      continue;
    }
    *l = (local){.fd = fd, .role = LOCAL_UNKNOWN, .rank = -1, .pid = -1, .uid = (uid_t)-1};
    /* Another user's process is turned away before it can say anything: the abstract name is
     * open to every process of the host's network namespace. */
    ftl_diag d;
    if (core_net_unix_peer(fd, &l->pid, &l->uid, &d) != FTL_OK || l->uid != getuid()) {
      char why[160];
      snprintf(why, sizeof why, "a local connection of uid %lld, not the job's uid %u", (long long)l->uid,
               (unsigned)getuid());
      refuse_local(r, l, why);
      close(fd);
      ftl_free(l);
      continue;
    }
    if (rz_wire_nonce(l->nonce, &d) != FTL_OK || rz_wire_send_challenge(fd, l->nonce, &d) != FTL_OK) {
      close(fd);
      ftl_free(l);
      continue;
    }
    r->locals[r->n++] = l;
    r->had_local = true;
  }
}

/* The launcher's side: false once it is gone (the relay then ends). */
static bool read_launcher(relay *r) {
  bool eof = false;
  if (rz_linebuf_fill(&r->up_lb, r->up_fd, &eof) != FTL_OK) return false;
  r->heard_ms = ftl_clock_ms();
  for (;;) {
    json_t *msg = NULL;
    ftl_diag d;
    ftl_err rc = rz_linebuf_next(&r->up_lb, &msg, &d);
    if (rc == FTL_ERR_NOTFOUND) break;
    if (rc != FTL_OK) return false;
    on_launcher_message(r, msg);
    json_decref(msg);
  }
  return !eof;
}

/* ---- the relay's loop ------------------------------------------------------------------------ */

/* The agents' word from the launcher, once a second while the relay hears it (the launcher's own
 * ping comes less often in a large gang: detect.h, "relayed"). */
static void ping_agents(relay *r) {
  static const char line[] = "{\"type\":\"ping\"}\n";
  to_locals(r, LOCAL_AGENT, -1, line, sizeof line - 1, true);
}

/* The launcher silent for fence_ms: its agents are told why, then the relay ends (closing every
 * local connection, so each agent ends its program). */
static bool fenced(relay *r) {
  if (r->fence_ms <= 0 || ftl_clock_ms() - r->heard_ms <= r->fence_ms) return false;
  char line[200];
  int n = snprintf(line, sizeof line, "{\"type\":\"fenced\",\"reason\":\"no word from the launcher for %.1f s\"}\n",
                   (double)(ftl_clock_ms() - r->heard_ms) / 1000.0);
  to_locals(r, LOCAL_AGENT, -1, line, (size_t)n, true);
  return true;
}

/* The relay's life, in the forked child; returns its exit code. */
static int relay_run(relay *r) {
  ftl_diag d = {{0}};
  char nonce[FTL_WIRE_NONCE_HEX + 1], proof[FTL_WIRE_PROOF_HEX + 1];
  int64_t deadline = ftl_deadline_after_ms(15000);
  if (core_net_connect(r->env->addr, deadline, &r->up_fd, &d) != FTL_OK) return 1;
  int64_t node_ms = 0;
  if (ftl_parse_i64(getenv("FTL_NODE_TIMEOUT_MS"), 1, INT64_MAX / 4, &node_ms) == FTL_OK) {
    r->fence_ms = node_ms;
    core_net_set_peer_timeout(r->up_fd, node_ms);
  }
  if (rz_wire_read_challenge(r->up_fd, &r->up_lb, "the launcher", deadline, nonce, &d) != FTL_OK ||
      rz_wire_proof(r->env->token, nonce, "relay", -1, proof, &d) != FTL_OK)
    return 1;
  if (!up_send(r, json_pack("{s:s, s:i, s:s, s:s, s:I}", "type", "relay", "version", FTL_WIRE_VERSION, "proof", proof,
                            "host", ftl_hostname(), "pid", (json_int_t)getpid())))
    return 1;
  fcntl(r->listen_fd, F_SETFL, fcntl(r->listen_fd, F_GETFL) | O_NONBLOCK);
  int64_t start = ftl_clock_ms();
  r->next_batch_ms = start + r->batch_ms;
  r->heard_ms = start;
  r->next_ping_ms = start + LOCAL_PING_MS;
  struct pollfd *fds = NULL;
  size_t fds_cap = 0;
  int code = 0;
  for (;;) {
    if (r->n == 0 && r->had_local && r->agents_seen >= r->expected_agents) break; /* every agent came and went */
    if (r->n == 0 && r->had_local && ftl_clock_ms() - r->idle_since_ms >= LINGER_MS) break;
    if (!r->had_local && ftl_clock_ms() - start >= FIRST_WAIT_MS) break;
    if (fds_cap < r->n + 2) {
      size_t ncap = r->n + 2 + 16;
      struct pollfd *nf = ftl_realloc(fds, ncap * sizeof *nf);
      if (!nf) {
        code = 1;
        break;
      }
      fds = nf;
      fds_cap = ncap;
    }
    fds[0] = (struct pollfd){.fd = r->up_fd, .events = POLLIN};
    fds[1] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
    size_t polled = r->n;
    for (size_t i = 0; i < polled; i++) fds[i + 2] = (struct pollfd){.fd = r->locals[i]->fd, .events = POLLIN};
    int timeout = ftl_deadline_left_ms(r->next_batch_ms < r->next_ping_ms ? r->next_batch_ms : r->next_ping_ms);
    int pr = poll(fds, (nfds_t)(polled + 2), timeout > r->batch_ms ? r->batch_ms : timeout);
    if (pr < 0 && errno != EINTR) {
      code = 1;
      break;
    }
    /* The locals first, back to front: closing local i moves the last one into its place, which was
     * read already. Then the launcher (whose `drop` may close a local: fds no longer match after). */
    for (size_t i = polled; pr > 0 && i-- > 0;)
      if ((fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) && !read_local(r, r->locals[i])) close_local(r, i, true);
    if (pr > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) && !read_launcher(r)) break;
    if (pr > 0 && (fds[1].revents & POLLIN)) accept_locals(r);
    if (ftl_clock_ms() >= r->next_batch_ms) {
      if (!send_batch(r)) break;
      r->next_batch_ms = ftl_clock_ms() + r->batch_ms;
    }
    if (fenced(r)) break;
    if (ftl_clock_ms() >= r->next_ping_ms) {
      ping_agents(r);
      r->next_ping_ms = ftl_clock_ms() + LOCAL_PING_MS;
    }
  }
  ftl_free(fds);
  return code;
}

/* ---- starting and waiting -------------------------------------------------------------------- */

ftl_err ln_relay_ensure(const core_launch_env *env, int local_agents, pid_t *started_out, ftl_diag *d) {
  char name[160];
  *started_out = 0;
  struct sockaddr_un sa;
  socklen_t sl;
  ftl_err rc = ln_relay_address(env, name, sizeof name, d);
  if (!rc) rc = core_net_unix_address(name, &sa, &sl, d);
  if (rc) return rc;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ftl_diag_fail(d, FTL_ERR_IO, "relay: socket: %s", strerror(errno));
  /* The abstract name is the lock: whoever binds it first runs the relay. */
  if (bind(fd, (struct sockaddr *)&sa, sl) != 0) {
    int err = errno;
    close(fd);
    if (err == EADDRINUSE) return FTL_OK;
    return ftl_diag_fail(d, FTL_ERR_IO, "relay: cannot bind %s: %s", name, strerror(err));
  }
  if (listen(fd, 4096) != 0) {
    close(fd);
    return ftl_diag_fail(d, FTL_ERR_IO, "relay: listen: %s", strerror(errno));
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(fd);
    return ftl_diag_fail(d, FTL_ERR_IO, "relay: fork: %s", strerror(errno));
  }
  if (pid == 0) {
    /* Its own session: mpirun's teardown signals the agents, and the relay must outlive them long
     * enough to pass on what they say. Nothing of mpirun's output pipes is held open by it. */
    setsid();
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
      close(null);
    }
    relay r = {.env = env,
               .listen_fd = fd,
               .up_fd = -1,
               .expected_agents = local_agents > 0 ? local_agents : 1,
               .batch_ms = BATCH_MS};
    int code = relay_run(&r);
    while (r.n > 0) close_local(&r, r.n - 1, false);
    ftl_free(r.bound);
    _exit(code);
  }
  close(fd);
  *started_out = pid;
  return FTL_OK;
}

void ln_relay_wait(pid_t pid, int64_t deadline_ms) {
  while (pid > 0) {
    pid_t w = waitpid(pid, NULL, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) return;
    if (ftl_deadline_left_ms(deadline_ms) == 0) return;
    usleep(5000);
  }
}
