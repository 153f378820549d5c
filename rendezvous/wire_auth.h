/* rendezvous/wire_auth.h: ftl's one HMAC-SHA256 (the seam to OpenSSL, in rendezvous/wire_auth.c)
 * and a constant-time comparison of MACs: the wire's proofs of the token (rendezvous/wire.h) and
 * the L2 transfers' (checkpoint/ckpt_l2_tcp.c), which need the MAC and not the protocol. */
#ifndef FTL_RDZV_WIRE_AUTH_H
#define FTL_RDZV_WIRE_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "ftl/error.h"

/* HMAC-SHA256 of msg under key (the seam to OpenSSL, also for checkpoint/ckpt_l2_tcp.c's proof),
 * and a comparison of two MACs in constant time. */
ftl_err rz_wire_hmac(const void *key, size_t key_len, const void *msg, size_t len, unsigned char out[32], ftl_diag *d);
bool rz_wire_mac_equal(const void *a, const void *b, size_t n);

#endif
