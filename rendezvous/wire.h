/* rendezvous/wire.h: the launcher <-> rank wire format, shared by both ends.
 *
 * One message is one JSON object on one line ("\n"-terminated), at most FTL_WIRE_MAX_LINE bytes.
 * The messages and their fields are documented in docs/formats/rendezvous-wire.md. This file
 * holds only framing (a line buffer for non-blocking reads, whole-message sends with a deadline)
 * and the proof of the token (wire_auth.c); the sockets are core's (core/net.h), what the messages
 * mean lives in client.c and server.c. */
#ifndef FTL_RDZV_WIRE_H
#define FTL_RDZV_WIRE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "ftl/error.h"
#include "rendezvous/wire_auth.h"

#define FTL_WIRE_MAX_LINE 65536
#define FTL_WIRE_VERSION 4 /* 2: `step` may carry a progress report; 3: relays, one connection per host;
                            * 4: every connection answers a challenge with a proof of the token, which
                            * is never sent (docs/formats/rendezvous-wire.md) */

typedef struct rz_linebuf {
  char *data;
  size_t len;
  size_t cap;
} rz_linebuf;

void rz_linebuf_free(rz_linebuf *lb);

/* Reads what is available on a non-blocking fd into lb. FTL_OK with *eof set when the peer closed;
 * FTL_ERR_PROTO when a line grew past FTL_WIRE_MAX_LINE. */
ftl_err rz_linebuf_fill(rz_linebuf *lb, int fd, bool *eof);

/* Takes the next complete line out of lb and parses it as a JSON object. FTL_ERR_NOTFOUND when
 * no complete line is buffered; FTL_ERR_PROTO (with detail) when the line is not a JSON object.
 * *msg_out is a new reference on success. */
ftl_err rz_linebuf_next(rz_linebuf *lb, json_t **msg_out, ftl_diag *d);

/* Parses one line (without its newline) as a message object: used by rz_linebuf_next and by the
 * fuzz target. */
ftl_err rz_wire_parse(const char *line, size_t len, json_t **msg_out, ftl_diag *d);

/* Sends msg as one line, waiting at most until deadline_ms for the socket to take it. */
ftl_err rz_wire_send(int fd, const json_t *msg, int64_t deadline_ms, ftl_diag *d);

/* Sends without waiting: FTL_ERR_TIMEOUT when the socket buffer is full (the caller may drop a
 * message that the next one supersedes, such as a progress heartbeat). A message the socket took
 * only in part is finished within a second (a line cut short would break the framing). */
ftl_err rz_wire_send_nowait(int fd, const json_t *msg, ftl_diag *d);

/* A message encoded once for many peers (the launcher's ping and signal to every agent):
 * rz_wire_encode gives its line, newline included (freed with ftl_free); rz_wire_send_line sends
 * it as rz_wire_send does (nowait: as rz_wire_send_nowait, deadline_ms unused). */
ftl_err rz_wire_encode(const json_t *msg, char **line_out, size_t *len_out, ftl_diag *d);
ftl_err rz_wire_send_line(int fd, const char *line, size_t len, int64_t deadline_ms, bool nowait, ftl_diag *d);

/* A relay's batch line read without building JSON (docs/scale.md: at 16k ranks the launcher's
 * parse of batches was half its steady CPU). Only the compact layout relays write is taken:
 *   {"type":"batch"[,"step":[[RANK,STEP,COMPUTE[,FLOPS,FLOPS_MS]],...]][,"alive":[[RANK,"STATE",RSS_KB],...]]}
 * COMPUTE is one number (the latest heartbeat's compute_ms) or, from a relay told the launcher's
 * cadence (docs/formats/rendezvous-wire.md), a list of 1 to FTL_WIRE_MAX_SAMPLES numbers: every
 * compute sample of the period, oldest first. No spaces; integers of at most 18 digits, STATE 1 to
 * 8 letters or '?'; a number is read as strtod reads it (plain decimals without strtod's cost:
 * rz_wire_number); FTL_ERR_NOTFOUND for anything else, which the caller then parses as any message
 * (jansson). The whole line is checked before fn sees its first entry, so a line is taken whole or
 * not at all. */
#define FTL_WIRE_MAX_SAMPLES 16
typedef struct rz_batch_entry {
  bool alive;       /* an agent's alive (state, rss_kb), else a rank's step (step, compute_ms) */
  int64_t rank;
  int64_t step;     /* or rss_kb */
  double compute_ms; /* the latest sample: samples[nsamples - 1] */
  double samples[FTL_WIRE_MAX_SAMPLES]; /* oldest first; one (compute_ms) in the single-number form */
  int nsamples;
  bool has_flops;   /* a rank's step with its model FLOPs so far (ftl_step_done_flops) */
  double flops, flops_ms;
  char state[9];
} rz_batch_entry;
ftl_err rz_wire_batch_parse(const char *line, size_t len, void (*fn)(void *user, const rz_batch_entry *e), void *user);

/* One JSON-ish number at the start of p[0..len) (the characters strtod takes: sign, digits, '.',
 * exponent): its length, or 0 when it is not a finite number. The value is strtod's, bit for bit;
 * a plain decimal of at most 2^53 in its digits and a power of ten of at most 22 is computed
 * without strtod (one exact multiply or divide: correctly rounded), anything else goes to strtod. */
size_t rz_wire_number(const char *p, size_t len, double *out);

/* --- proof of membership (wire version 4; rendezvous/wire_auth.c) ---------------------------
 * Whoever accepts a connection (the launcher, a relay) sends {"type":"challenge","nonce":HEX} first;
 * the hello carries "proof": HMAC-SHA256 of the nonce, role and rank under the attempt's token,
 * never the token. */
#define FTL_WIRE_NONCE_HEX 32 /* 16 random bytes */
#define FTL_WIRE_PROOF_HEX 64
#define FTL_WIRE_NAME_HEX 24  /* a public name derived from a secret: 96 bits */

/* A fresh nonce (getrandom), as hex. */
ftl_err rz_wire_nonce(char out[FTL_WIRE_NONCE_HEX + 1], ftl_diag *d);
/* Sends the challenge for nonce on a fresh connection (without waiting). */
ftl_err rz_wire_send_challenge(int fd, const char *nonce, ftl_diag *d);
/* Reads the peer's challenge (the first line; what follows stays in lb) until deadline_ms; peer
 * names the other end in errors. */
ftl_err rz_wire_read_challenge(int fd, rz_linebuf *lb, const char *peer, int64_t deadline_ms,
                               char nonce[FTL_WIRE_NONCE_HEX + 1], ftl_diag *d);
/* The proof a hello of (role, rank) carries for nonce under token (rank -1 for a relay). */
ftl_err rz_wire_proof(const char *token, const char *nonce, const char *role, long long rank,
                      char out[FTL_WIRE_PROOF_HEX + 1], ftl_diag *d);
/* Whether proof is that proof (compared in constant time). */
bool rz_wire_proof_ok(const char *token, const char *nonce, const char *role, long long rank, const char *proof);
/* A name for something of the attempt that others may see (a relay's abstract socket): derived
 * from the token and purpose, from which the token cannot be found. */
ftl_err rz_wire_public_name(const char *token, const char *purpose, char out[FTL_WIRE_NAME_HEX + 1], ftl_diag *d);

/* Small typed getters: absent or wrong-typed fields give the fallback. */
int64_t rz_wire_int(const json_t *msg, const char *key, int64_t fallback);
double rz_wire_num(const json_t *msg, const char *key, double fallback);
const char *rz_wire_str(const json_t *msg, const char *key, const char *fallback);

#endif
