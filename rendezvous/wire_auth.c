/* rendezvous/wire_auth.c: how a connection proves it belongs to the attempt without saying its
 * secret (wire version 4, docs/formats/rendezvous-wire.md "Proof"). The one place ftl calls
 * OpenSSL's HMAC-SHA256 (rendezvous/wire_auth.h): the seam to swap it. Who is at the other end of
 * a Unix socket is core's (core/net.h).
 *
 * The attempt's token (FTL_RDZV_TOKEN) reaches only the job's own processes, through their
 * environment. Whoever accepts a connection sends a fresh random nonce first; the hello answers
 * with HMAC(token, nonce, role, rank). The token itself never crosses a socket, and a proof is good
 * for one connection only: a line read off one (or guessed) is refused on the next. */
#include "rendezvous/wire.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/fs.h"
#include "ftl/core.h"

ftl_err rz_wire_hmac(const void *key, size_t key_len, const void *msg, size_t len, unsigned char out[32], ftl_diag *d) {
  unsigned int n = 0;
  if (key_len == 0 || key_len > 1024) return ftl_diag_fail(d, FTL_ERR_INVAL, "HMAC key of %zu bytes", key_len);
  if (!HMAC(EVP_sha256(), key, (int)key_len, msg, len, out, &n) || n != 32)
    return ftl_diag_fail(d, FTL_ERR_IO, "HMAC-SHA256 failed (OpenSSL)");
  return FTL_OK;
}

bool rz_wire_mac_equal(const void *a, const void *b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

/* HMAC-SHA256(token, text) into 32 bytes. */
static ftl_err hmac(const char *token, const char *text, size_t text_len, unsigned char out[32], ftl_diag *d) {
  if (!token || !token[0]) return ftl_diag_fail(d, FTL_ERR_INVAL, "no FTL_RDZV_TOKEN: not started by ftl run");
  return rz_wire_hmac(token, strlen(token), text, text_len, out, d);
}

ftl_err rz_wire_nonce(char out[FTL_WIRE_NONCE_HEX + 1], ftl_diag *d) {
  return core_random_hex(out, FTL_WIRE_NONCE_HEX / 2, d);
}

ftl_err rz_wire_proof(const char *token, const char *nonce, const char *role, long long rank,
                      char out[FTL_WIRE_PROOF_HEX + 1], ftl_diag *d) {
  char text[256];
  int len = snprintf(text, sizeof text, "ftl-rdzv-%d\n%s\n%s\n%lld", FTL_WIRE_VERSION, nonce, role, rank);
  if (len < 0 || (size_t)len >= sizeof text) return ftl_diag_fail(d, FTL_ERR_PROTO, "challenge nonce too long");
  unsigned char mac[32];
  ftl_err rc = hmac(token, text, (size_t)len, mac, d);
  if (rc) return rc;
  core_hex(mac, sizeof mac, out);
  return FTL_OK;
}

bool rz_wire_proof_ok(const char *token, const char *nonce, const char *role, long long rank, const char *proof) {
  char want[FTL_WIRE_PROOF_HEX + 1];
  ftl_diag ignored;
  if (!proof || strlen(proof) != FTL_WIRE_PROOF_HEX || !nonce || strlen(nonce) != FTL_WIRE_NONCE_HEX) return false;
  if (rz_wire_proof(token, nonce, role, rank, want, &ignored) != FTL_OK) return false;
  /* In constant time: how much of a guess matched must not show in how long the refusal took. */
  return rz_wire_mac_equal(want, proof, FTL_WIRE_PROOF_HEX);
}

ftl_err rz_wire_public_name(const char *token, const char *purpose, char out[FTL_WIRE_NAME_HEX + 1], ftl_diag *d) {
  unsigned char mac[32];
  ftl_err rc = hmac(token, purpose, strlen(purpose), mac, d);
  if (rc) return rc;
  core_hex(mac, FTL_WIRE_NAME_HEX / 2, out);
  return FTL_OK;
}

ftl_err rz_wire_send_challenge(int fd, const char *nonce, ftl_diag *d) {
  char line[128];
  int len = snprintf(line, sizeof line, "{\"type\":\"challenge\",\"version\":%d,\"nonce\":\"%s\"}\n", FTL_WIRE_VERSION,
                     nonce);
  if (len < 0 || (size_t)len >= sizeof line) return ftl_diag_fail(d, FTL_ERR_PROTO, "challenge nonce too long");
  /* A fresh connection's buffer is empty: the line goes at once or the peer is already gone. */
  return rz_wire_send_line(fd, line, (size_t)len, 0, true, d);
}

ftl_err rz_wire_read_challenge(int fd, rz_linebuf *lb, const char *peer, int64_t deadline_ms,
                               char nonce[FTL_WIRE_NONCE_HEX + 1], ftl_diag *d) {
  json_t *msg = NULL;
  ftl_err rc;
  for (;;) {
    rc = rz_linebuf_next(lb, &msg, d);
    if (rc == FTL_OK) break;
    if (rc != FTL_ERR_NOTFOUND) return rc;
    int left = ftl_deadline_left_ms(deadline_ms);
    if (left == 0) return ftl_diag_fail(d, FTL_ERR_TIMEOUT, "no challenge from %s before the deadline", peer);
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, left) < 0 && errno != EINTR) return ftl_diag_fail(d, FTL_ERR_IO, "poll: %s", strerror(errno));
    bool eof = false;
    if ((rc = rz_linebuf_fill(lb, fd, &eof))) return ftl_diag_fail(d, rc, "%s sent a line past the wire's limit", peer);
    if (eof && !memchr(lb->data ? lb->data : "", '\n', lb->len))
      return ftl_diag_fail(d, FTL_ERR_RDZV, "%s closed the connection before its challenge", peer);
  }
  const char *type = rz_wire_str(msg, "type", "");
  const char *got = rz_wire_str(msg, "nonce", "");
  rc = FTL_OK;
  if (strcmp(type, "challenge") != 0)
    rc = ftl_diag_fail(d, FTL_ERR_PROTO,
                       "%s said '%.40s' where its challenge was due: it speaks wire version %lld, this library "
                       "version %d (an ftl launcher and library of different releases)",
                       peer, type, (long long)rz_wire_int(msg, "version", 0), FTL_WIRE_VERSION);
  else if (strlen(got) != FTL_WIRE_NONCE_HEX || strspn(got, "0123456789abcdef") != FTL_WIRE_NONCE_HEX)
    rc = ftl_diag_fail(d, FTL_ERR_PROTO, "%s sent a malformed challenge", peer);
  else memcpy(nonce, got, FTL_WIRE_NONCE_HEX + 1);
  json_decref(msg);
  return rc;
}

