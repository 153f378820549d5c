/* checkpoint/ckpt_l2_stream.h: the L2 level's stream engine (checkpoint/ckpt_l2_stream.c), shared
 * by the save's copy to the partner and the restore's fetch (checkpoint/ckpt_l2.c): one transfer
 * between this rank and a peer, over MPI point-to-point or the direct TCP transport
 * (checkpoint/ckpt_l2_tcp.c), driven by polling against a deadline. Internal to checkpoint/. */
#ifndef FTL_CKPT_L2_STREAM_H
#define FTL_CKPT_L2_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/shard.h"

/* One message of a stream at most: both ends cut the body the same way, from this constant (never
 * an option, which could differ between ranks). */
#define L2_CHUNK (4u << 20)

/* One transfer between this rank and a peer: an optional prefix, a header (1: the body follows),
 * then the body of exactly `size` bytes in L2_CHUNK messages, all under one tag. Two body messages
 * are in flight at once, so reading (or writing) one chunk overlaps the transfer of the other;
 * MPI keeps messages of one sender and tag in order, and each slot remembers its offset. */
#define L2_SLOTS 2
typedef struct l2_slot {
  MPI_Request req;
  int pending, cur;
  uint64_t off;
  unsigned char *buf;
  unsigned char *at; /* where the message lands: buf, or (restore's fetch) its place in a destination */
} l2_slot;

typedef struct l2_stream {
  int out;       /* 1: this rank sends */
  int peer, tag;
  int fd;        /* out: the copy read (-1: nothing to send); in: where the body goes (-1: drained) */
  int shard;
  uint64_t size, done, next; /* body bytes finished, and started */
  void *pre;     /* out: sent first; in: received first (pre_len bytes) */
  int pre_len;
  int32_t have;
  int stage;     /* 0 prefix, 1 header, 2 body, 3 done */
  l2_slot slot[L2_SLOTS];
  int failed;    /* a local read or write failed: the copy is not used */
  char why[256];
  /* In, restore's fetch: no copy of the bytes is kept. Each message is hashed by ver as it arrives
   * (in file order), the ranges this rank needs are received straight into their destinations
   * (needs, sorted by offset), and only the HDF5 metadata goes to fd, a sparse file the same size
   * as the shard, for the description check (ckpt_restore.c). */
  int fetch;
  unsigned char *map; /* out, restore's fetch: the copy mapped (ck_map_tmpfs), sent from in place */
  ck_verifier *ver;
  const ck_need *needs;
  int nneeds;
  /* Over the direct TCP transport (ckpt_l2_tcp.c): sock, and the bytes of the prefix, the
   * header or the current received body chunk (slot 0) moved so far. */
  int tcp, sock;
  uint64_t part;
} l2_stream;

/* Every rank (collective, ckpt_l2_tcp.c): connects the streams directly over TCP when every rank
 * can; *tcp says whether they are (the same on every rank), else they run over MPI. */
ftl_err ck_l2_connect_streams(ftl_ckpt *ck, l2_stream *v, int n, const char *what, int loud, int *tcp,
                               int64_t deadline_ms, ftl_diag *d);

/* Drives every stream to its end or the deadline. After an error a request may still be pending on
 * a stream's buffers: *leak is set and the caller must not free them. */
ftl_err ck_l2_run_streams(ftl_ckpt *ck, l2_stream *v, int n, int64_t deadline_ms, const char *what, int *leak,
                           ftl_diag *d);

ftl_err ck_l2_alloc_bufs(l2_stream *v, int n, ftl_diag *d);

void ck_l2_free_streams(l2_stream *v, int n, int leak);

/* Opens path for reading when it is a regular file of `size` bytes; else -1, why in why. */
int ck_l2_open_copy(const char *path, uint64_t size, char *why, size_t why_size);

/* Creates the file a received body goes into (its final size), or -1 with why. */
int ck_l2_create_copy(const char *path, uint64_t size, char *why, size_t why_size);

#endif
