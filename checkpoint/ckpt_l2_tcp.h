/* checkpoint/ckpt_l2_tcp.h: the L2 transfers' direct TCP transport (ckpt_l2_tcp.c), for the
 * stream engine of ckpt_l2.c. Private to checkpoint/ckpt*.c. */
#ifndef FTL_CKPT_L2_TCP_H
#define FTL_CKPT_L2_TCP_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "checkpoint/ckpt_internal.h"

/* One stream's end on this rank: it serves (out) shard to peer, or fetches it from peer. fd: the
 * connected socket (non-blocking, close-on-exec) once ck_l2_tcp_connect says tcp; else -1. */
typedef struct ck_l2_link {
  int out, peer, shard;
  int fd;
} ck_l2_link;

/* The set-up's formats (docs/checkpoint.md, "L2"), shared with its unit test. What each rank tells
 * the others in the first allgather: */
#define CK_L2_TCP_ADDRS 8
#define CK_L2_TCP_TOKEN 16
typedef struct ck_l2_tcp_rec {
  unsigned char token[CK_L2_TCP_TOKEN]; /* random, drawn by each rank that listens, per restore */
  uint32_t addr[CK_L2_TCP_ADDRS];       /* IPv4, network byte order, the loopback last */
  uint16_t port;                        /* 0: this rank does not listen */
  uint8_t naddr;
  uint8_t ok; /* this rank can and may use TCP */
} ck_l2_tcp_rec;
/* What the server sends first on every connection it accepts: a fresh nonce, which the fetcher's
 * hello must answer (a hello read off one connection is refused on the next). */
#define CK_L2_TCP_CHALLENGE_MAGIC {'L', '2', 'c', 'h'}
#define CK_L2_TCP_NONCE 16
typedef struct ck_l2_tcp_challenge {
  char magic[4];
  unsigned char nonce[CK_L2_TCP_NONCE];
} ck_l2_tcp_challenge;
/* The fetcher's answer (the server answers CK_L2_TCP_ACK, or closes it): mac is HMAC-SHA256 under
 * the server's token of ck_l2_tcp_proof_text (the nonce, from, to, shard): the token itself never
 * crosses the network. */
#define CK_L2_TCP_HELLO_MAGIC {'f', 't', 'l', '-', 'l', '2', 0, 2}
#define CK_L2_TCP_ACK {'L', '2', 'o', 'k'}
#define CK_L2_TCP_MAC 32
typedef struct ck_l2_tcp_hello {
  char magic[8];
  unsigned char mac[CK_L2_TCP_MAC];
  int32_t from, to, shard;              /* the fetcher's rank, the server's, the shard */
} ck_l2_tcp_hello;
/* The MAC a hello of (from, to, shard) carries for nonce under token (also the unit test's). */
ftl_err ck_l2_tcp_mac(const unsigned char token[CK_L2_TCP_TOKEN], const unsigned char nonce[CK_L2_TCP_NONCE],
                      int32_t from, int32_t to, int32_t shard, unsigned char mac[CK_L2_TCP_MAC], ftl_diag *d);

/* Every rank, collective (two allgathers on the handle's communicator, whether or not it has
 * links): sets up a connection for each link of every rank. *tcp = 1 when every link of every
 * rank is connected, the same on every rank; else every fd is -1 (and *tcp = 0): the transfer goes
 * over MPI. FTL_CKPT_L2_TRANSPORT=mpi on any rank makes it 0. Only a gang failure is returned (a
 * collective past the deadline, an MPI error: the handle is then broken). The log says "<what>
 * goes over TCP" or "... over MPI: <why>" (a warning on the rank where TCP failed; info when loud,
 * else debug, on the others). */
ftl_err ck_l2_tcp_connect(ftl_ckpt *ck, ck_l2_link *links, int n, const char *what, int loud, int *tcp,
                          int64_t deadline_ms, ftl_diag *d);

/* The socket calls of a connected stream, non-blocking: each moves what it can without waiting
 * (*moved: the bytes, 0 when the socket has no room or no data) and fails (FTL_ERR_IO, d saying
 * why, the peer's rank named by the caller) only when the connection is broken or, for recv, ended.
 * ck_l2_tcp_sendfile sends n bytes of file fd from off; a read of the file that fails sets
 * *file_failed (and errno) and sends nothing. */
ftl_err ck_l2_tcp_send(int sock, const void *p, size_t n, size_t *moved, ftl_diag *d);
/* Around every call of ck_l2_tcp_sendfile (which may raise SIGPIPE when the peer is gone): blocks
 * SIGPIPE in this thread, then takes back what the calls raised and restores the mask. */
typedef struct ck_l2_tcp_pipe {
  sigset_t old, pending_before;
} ck_l2_tcp_pipe;
void ck_l2_tcp_quiet_pipe(ck_l2_tcp_pipe *g);
void ck_l2_tcp_restore_pipe(const ck_l2_tcp_pipe *g);
ftl_err ck_l2_tcp_sendfile(int sock, int fd, uint64_t off, size_t n, size_t *moved, int *file_failed, ftl_diag *d);
ftl_err ck_l2_tcp_recv(int sock, void *p, size_t n, size_t *moved, ftl_diag *d);
/* Waits until one of socks (out[i]: to send, else to receive) is ready or wait_ms pass. */
void ck_l2_tcp_wait(const int *socks, const int *out, int n, int wait_ms);
/* A receiver's poll wakes for sock only once bytes are there (SO_RCVLOWAT; a recv still takes
 * whatever has come). */
void ck_l2_tcp_wake_at(int sock, uint64_t bytes);
void ck_l2_tcp_close(int sock);

#endif
