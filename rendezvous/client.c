/* rendezvous/client.c: connecting to the launcher, joining the rendezvous, and sending reports. */
#include "rendezvous/client.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/net.h"
#include "ftl/core.h"
#include "rendezvous/wire.h"

/* A relay is a process of the job's owner: a listener of another user's (on an abstract name
 * anyone may take) is refused before the hello, which would give it a proof for its own nonce. */
static ftl_err check_relay_owner(int fd, const char *to, ftl_diag *d) {
  pid_t pid;
  uid_t uid;
  ftl_err rc = core_net_unix_peer(fd, &pid, &uid, d);
  if (rc) return rc;
  if (uid != getuid())
    return ftl_diag_fail(d, FTL_ERR_RDZV, "the relay at %s is a process of uid %u (pid %d), not of this job's uid %u",
                         to, (unsigned)uid, (int)pid, (unsigned)getuid());
  return FTL_OK;
}

ftl_err rz_rdzv_client_open(rz_rdzv_client *c, const core_launch_env *env, const char *role, int rank,
                             int64_t deadline_ms, ftl_diag *d) {
  return rz_rdzv_client_open_with(c, env, role, rank, NULL, deadline_ms, d);
}

ftl_err rz_rdzv_client_open_with(rz_rdzv_client *c, const core_launch_env *env, const char *role, int rank,
                                  const json_t *extra, int64_t deadline_ms, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  json_t *msg = NULL;
  rz_linebuf lb = {0};
  c->fd = -1;
  pthread_mutex_init(&c->send_lock, NULL);
  /* Through the host's relay when there is one (wire version 3): it speaks for this host. */
  const char *to = env->relay[0] ? env->relay : env->addr;
  char peer[320], nonce[FTL_WIRE_NONCE_HEX + 1], proof[FTL_WIRE_PROOF_HEX + 1];
  snprintf(peer, sizeof peer, "%s %s", env->relay[0] ? "the relay at" : "the launcher at", to);
  rc = core_net_connect(to, deadline_ms, &c->fd, d);
  if (rc) goto out;
  if (env->relay[0] && (rc = check_relay_owner(c->fd, to, d))) goto out;
  /* The token is never sent: the hello proves it with an HMAC of the listener's fresh nonce. */
  if ((rc = rz_wire_read_challenge(c->fd, &lb, peer, deadline_ms, nonce, d))) goto out;
  if ((rc = rz_wire_proof(env->token, nonce, role, rank, proof, d))) goto out;
  msg = json_pack("{s:s, s:i, s:s, s:i, s:i, s:s, s:I, s:I}", "type", role, "version", FTL_WIRE_VERSION, "proof",
                  proof, "rank", rank, "world_size", env->world_size, "host", ftl_hostname(), "pid",
                  (json_int_t)getpid(), "wall_us", (json_int_t)ftl_wall_us());
  if (!msg) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  if (extra) json_object_update_missing(msg, (json_t *)(uintptr_t)extra); /* only read */
  rc = rz_wire_send(c->fd, msg, deadline_ms, d);
  json_decref(msg);
  msg = NULL;
  if (rc) goto out;
  if (strcmp(role, "rank") != 0) goto out;

  /* Wait for the verdict: "go" once every rank joined, "fail" when the deadline passed first. */
  for (;;) {
    ftl_err nrc = rz_linebuf_next(&lb, &msg, d);
    if (nrc == FTL_OK) break;
    if (nrc != FTL_ERR_NOTFOUND) {
      rc = nrc;
      goto out;
    }
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    int left = ftl_deadline_left_ms(deadline_ms);
    if (left == 0) {
      rc = ftl_diag_fail(d, FTL_ERR_TIMEOUT, "no answer from the launcher at %s before the rendezvous deadline",
                         to);
      goto out;
    }
    if (poll(&pfd, 1, left) < 0) continue;
    bool eof = false;
    rc = rz_linebuf_fill(&lb, c->fd, &eof);
    if (rc) goto out;
    if (eof && !memchr(lb.data ? lb.data : "", '\n', lb.len)) {
      rc = ftl_diag_fail(d, FTL_ERR_RDZV, "the launcher at %s closed the connection during the rendezvous",
                         to);
      goto out;
    }
  }
  const char *type = rz_wire_str(msg, "type", "");
  if (strcmp(type, "go") == 0) goto out;
  if (strcmp(type, "fail") == 0) {
    rc = ftl_diag_fail(d, FTL_ERR_RDZV, "%s", rz_wire_str(msg, "reason", "the launcher failed the rendezvous"));
    goto out;
  }
  rc = ftl_diag_fail(d, FTL_ERR_PROTO, "unexpected '%s' from the launcher during the rendezvous", type);
out:
  json_decref(msg);
  rz_linebuf_free(&lb);
  if (rc && c->fd >= 0) {
    close(c->fd);
    c->fd = -1;
  }
  return rc;
}

ftl_err rz_rdzv_client_send(rz_rdzv_client *c, json_t *msg, int nowait, ftl_diag *d) {
  if (!msg) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  ftl_err rc = FTL_OK;
  if (c->fd < 0) goto out;
  pthread_mutex_lock(&c->send_lock);
  rc = nowait ? rz_wire_send_nowait(c->fd, msg, d) : rz_wire_send(c->fd, msg, ftl_deadline_after_ms(10000), d);
  pthread_mutex_unlock(&c->send_lock);
out:
  json_decref(msg);
  return rc;
}

void rz_rdzv_client_close(rz_rdzv_client *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  pthread_mutex_destroy(&c->send_lock);
}
