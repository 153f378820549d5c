/* checkpoint/ckpt_l2_stream.c: the L2 level's stream engine (checkpoint/ckpt_l2_stream.h): a
 * stream's messages over MPI point-to-point (two body chunks in flight, each slot remembering its
 * offset) or over its direct TCP connection (ckpt_l2_tcp.c), a fetched message landing straight in
 * its destination and hashed as it arrives, every stream driven to its end or the deadline; the
 * files a copy is read from or received into. What the streams carry and between whom:
 * checkpoint/ckpt_l2.c.
 *
 * Map: the stream engine over MPI; over TCP; driving them all; buffers and files. */
#include "checkpoint/ckpt_l2_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/ckpt_l2_tcp.h"
#include "core/fs.h"

/* ---- the stream engine ------------------------------------------------------------------- */


/* Where a fetched message of n bytes at off lands: its place in the destination of the need that
 * holds all of it (no copy), or else the slot's buffer. */
static unsigned char *fetch_place(const l2_stream *x, uint64_t off, uint64_t n, unsigned char *buf) {
  for (int i = 0; i < x->nneeds; i++) {
    const ck_need *nd = &x->needs[i];
    if (nd->file_offset <= off && off + n <= nd->file_offset + nd->size_bytes)
      return (unsigned char *)nd->dest + (off - nd->file_offset);
  }
  return buf;
}

/* A fetched message has arrived (messages are taken in file order): one that landed in the slot's
 * buffer gives the parts this rank needs to their destinations and its HDF5 metadata to the sparse
 * file; then every byte is hashed, while it is fresh in the cache. */
static void fetch_landed(l2_stream *x, const l2_slot *sl) {
  uint64_t off = sl->off, end = sl->off + (uint64_t)sl->cur;
  if (sl->at == sl->buf) {
    for (int i = 0; i < x->nneeds; i++) {
      const ck_need *nd = &x->needs[i];
      uint64_t lo = nd->file_offset > off ? nd->file_offset : off;
      uint64_t hi = nd->file_offset + nd->size_bytes < end ? nd->file_offset + nd->size_bytes : end;
      if (lo < hi) memcpy((char *)nd->dest + (lo - nd->file_offset), sl->buf + (lo - off), (size_t)(hi - lo));
    }
    for (uint64_t o = off; o < end && x->ver;) {
      int piece;
      uint64_t n = ck_verifier_span(x->ver, o, end - o, &piece);
      if (piece < 0 && x->fd >= 0 && !x->failed &&
          core_fs_pwrite_all(x->fd, sl->buf + (o - off), (size_t)n, o) != FTL_OK) {
        x->failed = 1;
        (void)ftl_fmt(x->why, sizeof x->why, "write at byte %llu failed: %s", (unsigned long long)o, strerror(errno));
      }
      o += n;
    }
  }
  if (x->ver) ck_verifier_feed(x->ver, sl->at, (size_t)sl->cur);
}

/* Starts one message of the stream in slot k: the prefix, the header, or the next body chunk. */
static ftl_err start_message(ftl_ckpt *ck, l2_stream *x, int k, ftl_diag *d) {
  l2_slot *sl = &x->slot[k];
  void *buf;
  if (x->stage == 0) {
    buf = x->pre;
    sl->cur = x->pre_len;
  } else if (x->stage == 1) {
    buf = &x->have;
    sl->cur = (int)sizeof x->have;
  } else {
    uint64_t left = x->size - x->next;
    sl->cur = (int)(left < L2_CHUNK ? left : L2_CHUNK);
    sl->off = x->next;
    x->next += (uint64_t)sl->cur;
    buf = sl->buf;
    if (x->fetch && !x->out) buf = fetch_place(x, sl->off, (uint64_t)sl->cur, sl->buf);
    sl->at = buf;
    /* The header promised the body: a read that fails still sends its length (zeros), which the
     * receiver's verification then refuses. */
    if (x->out && x->map) buf = x->map + sl->off;
    if (x->out && !x->map && !x->failed && core_fs_pread_all(x->fd, sl->buf, (size_t)sl->cur, sl->off) != FTL_OK) {
      x->failed = 1;
      (void)ftl_fmt(x->why, sizeof x->why, "read at byte %llu failed: %s", (unsigned long long)sl->off,
                    errno ? strerror(errno) : "the file ends early");
    }
    if (x->out && x->failed) memset(sl->buf, 0, (size_t)sl->cur);
  }
  ftl_err rc = x->out ? ck_p2p_isend(ck, buf, sl->cur, x->peer, x->tag, &sl->req, d)
                      : ck_p2p_irecv(ck, buf, sl->cur, x->peer, x->tag, &sl->req, d);
  if (!rc) sl->pending = 1;
  return rc;
}

/* Finishes what completed and starts what can start next, for one stream. */
static ftl_err step_stream(ftl_ckpt *ck, l2_stream *x, int *progress, ftl_diag *d) {
  if (x->stage == 3) return FTL_OK;
  ftl_err rc = FTL_OK;
  /* Messages are taken in file order (a fetch hashes them in that order): the pending one with
   * the lowest offset first, and none after it until it is done. */
  for (;;) {
    int k = -1;
    for (int j = 0; j < L2_SLOTS; j++)
      if (x->slot[j].pending && (k < 0 || x->slot[j].off < x->slot[k].off)) k = j;
    if (k < 0) break;
    l2_slot *sl = &x->slot[k];
    int done = 0, got = 0;
    rc = ck_p2p_test(ck, &sl->req, &done, &got, d);
    if (rc) return rc;
    if (!done) break;
    sl->pending = 0;
    *progress = 1;
    if (!x->out && got != sl->cur) {
      /* Both ends cut the stream the same way: another length is a peer out of step. */
      atomic_store(&ck->sync->broken, 1);
      return ftl_diag_fail(d, FTL_ERR_PROTO, "L2 transfer from rank %d: %d bytes where %d were due", x->peer, got,
                           sl->cur);
    }
    if (x->stage == 0) {
      x->stage = 1;
    } else if (x->stage == 1) {
      x->stage = x->have == 1 && x->size > 0 ? 2 : 3;
    } else if (x->fetch && !x->out) {
      fetch_landed(x, sl);
      x->done += (uint64_t)sl->cur;
      if (x->done >= x->size) x->stage = 3;
    } else {
      if (!x->out && x->fd >= 0 && !x->failed &&
          core_fs_pwrite_all(x->fd, sl->buf, (size_t)sl->cur, sl->off) != FTL_OK) {
        x->failed = 1;
        (void)ftl_fmt(x->why, sizeof x->why, "write at byte %llu failed: %s", (unsigned long long)sl->off,
                      strerror(errno));
      }
      x->done += (uint64_t)sl->cur;
      if (x->done >= x->size) x->stage = 3;
    }
  }
  if (x->stage == 3) return FTL_OK;
  if (x->stage == 0 && x->pre_len == 0) x->stage = 1;
  /* The prefix and the header go one at a time (slot 0); the body fills every free slot. */
  if (x->stage < 2) {
    if (x->slot[0].pending) return FTL_OK;
    *progress = 1;
    return start_message(ck, x, 0, d);
  }
  for (int k = 0; k < L2_SLOTS && x->next < x->size && !rc; k++) {
    if (x->slot[k].pending) continue;
    *progress = 1;
    rc = start_message(ck, x, k, d);
  }
  return rc;
}

/* ---- the stream engine over TCP ---------------------------------------------------------- */

/* A received body chunk is cut by the receiver alone (the byte stream has no messages): at most
 * L2_TCP_CHUNK, and never across the edge of a need, so each chunk lands either in one
 * destination or (the HDF5 metadata between them) in the bounce buffer. Each recv is hashed at once
 * while its bytes are in the cache, so it is kept to L2_TCP_RECV (256 KiB and 2 MiB did worse). */
#define L2_TCP_CHUNK L2_CHUNK
#define L2_TCP_RECV (512u << 10)
#define L2_TCP_WAKE (512u << 10)

static uint64_t tcp_chunk_end(const l2_stream *x, uint64_t off) {
  uint64_t end = x->size - off < L2_TCP_CHUNK ? x->size : off + L2_TCP_CHUNK;
  for (int i = 0; i < x->nneeds; i++) {
    const ck_need *nd = &x->needs[i];
    if (nd->file_offset > off && nd->file_offset < end) end = nd->file_offset;
    if (nd->file_offset + nd->size_bytes > off && nd->file_offset + nd->size_bytes < end)
      end = nd->file_offset + nd->size_bytes;
  }
  return end;
}

/* Moves one TCP stream as far as its socket allows. A connection that breaks or ends early is a
 * gang failure, like an MPI error: the handle is broken. */
static ftl_err tcp_step(ftl_ckpt *ck, l2_stream *x, int *progress, ftl_diag *d) {
  static const unsigned char zeros[64 << 10];
  ftl_diag sd = {{0}};
  ftl_err rc = FTL_OK;
  while (x->stage != 3 && !rc) {
    size_t moved = 0;
    if (x->stage < 2) {
      /* The prefix (save: the sender's piece records; a fetch has none), then the header: 1 when
       * the body follows. */
      unsigned char *base = x->stage == 0 ? x->pre : (unsigned char *)&x->have;
      size_t len = x->stage == 0 ? (size_t)x->pre_len : sizeof x->have;
      if (len == 0) {
        x->stage = 1;
        continue;
      }
      unsigned char *h = base + x->part;
      size_t left = len - (size_t)x->part;
      rc = x->out ? ck_l2_tcp_send(x->sock, h, left, &moved, &sd) : ck_l2_tcp_recv(x->sock, h, left, &moved, &sd);
      if (rc || !moved) break;
      x->part += moved;
      if (x->part < len) continue;
      x->part = 0;
      if (x->stage == 0)
        x->stage = 1;
      else
        x->stage = x->have == 1 && x->size > 0 ? 2 : 3;
    } else if (x->out) {
      /* From the copy's file with sendfile (the kernel takes the pages as they are: no copy in
       * this process, which a send from the mapping costs; with both ends of a fetch on the CPUs
       * of one machine that made it twice as slow); after a failed read, the promised length in
       * zeros, which the receiver's verification then refuses. */
      uint64_t left = x->size - x->next;
      size_t n = (size_t)(left < L2_CHUNK ? left : L2_CHUNK);
      int had_failed = x->failed;
      if (!x->failed)
        rc = ck_l2_tcp_sendfile(x->sock, x->fd, x->next, n, &moved, &x->failed, &sd);
      if (!rc && x->failed && !had_failed)
        (void)ftl_fmt(x->why, sizeof x->why, "read at byte %llu failed: %s", (unsigned long long)x->next,
                      errno ? strerror(errno) : "the file ends early");
      if (!rc && x->failed) rc = ck_l2_tcp_send(x->sock, zeros, n < sizeof zeros ? n : sizeof zeros, &moved, &sd);
      if (rc || (!moved && (x->failed == had_failed))) break;
      x->next += moved;
      if (x->next == x->size) x->stage = 3;
    } else if (!x->fetch) {
      /* Save's copy: a chunk into the buffer, then written to the partner file. */
      l2_slot *sl = &x->slot[0];
      if (x->part == 0) {
        uint64_t left = x->size - x->next;
        sl->off = x->next;
        sl->cur = (int)(left < L2_CHUNK ? left : L2_CHUNK);
      }
      rc = ck_l2_tcp_recv(x->sock, sl->buf + x->part, (size_t)sl->cur - (size_t)x->part, &moved, &sd);
      if (rc || !moved) break;
      x->part += moved;
      if (x->part < (uint64_t)sl->cur) continue;
      if (x->fd >= 0 && !x->failed && core_fs_pwrite_all(x->fd, sl->buf, (size_t)sl->cur, sl->off) != FTL_OK) {
        x->failed = 1;
        (void)ftl_fmt(x->why, sizeof x->why, "write at byte %llu failed: %s", (unsigned long long)sl->off,
                      strerror(errno));
      }
      x->part = 0;
      x->next += (uint64_t)sl->cur;
      x->done = x->next;
      if (x->done == x->size) x->stage = 3;
    } else {
      l2_slot *sl = &x->slot[0];
      uint64_t rest = x->size - x->next;
      /* poll wakes this rank only once L2_TCP_WAKE bytes are there (or all that is left, near the
       * end): a wake for every 64 KiB segment of the loopback cost a 512 MiB fetch here half its
       * time again (526 against 356 ms, both ends on 2 cores). */
      if (x->part == 0 && (x->next == 0 || rest < L2_TCP_WAKE))
        ck_l2_tcp_wake_at(x->sock, rest < L2_TCP_WAKE ? rest : L2_TCP_WAKE);
      if (x->part == 0) {
        sl->off = x->next;
        sl->cur = (int)(tcp_chunk_end(x, x->next) - x->next);
        sl->at = fetch_place(x, sl->off, (uint64_t)sl->cur, sl->buf);
      }
      size_t want = (size_t)sl->cur - (size_t)x->part;
      if (want > L2_TCP_RECV) want = L2_TCP_RECV;
      rc = ck_l2_tcp_recv(x->sock, sl->at + x->part, want, &moved, &sd);
      if (rc || !moved) break;
      /* Bytes in a destination are hashed now; a chunk in the bounce buffer is given out whole. */
      if (sl->at != sl->buf && x->ver) ck_verifier_feed(x->ver, sl->at + x->part, moved);
      x->part += moved;
      if (x->part < (uint64_t)sl->cur) continue;
      if (sl->at == sl->buf) fetch_landed(x, sl);
      x->part = 0;
      x->next += (uint64_t)sl->cur;
      x->done = x->next;
      if (x->done == x->size) x->stage = 3;
    }
    *progress = 1;
  }
  if (!rc) return FTL_OK;
  atomic_store(&ck->sync->broken, 1);
  return ftl_diag_fail(d, FTL_ERR_IO, "the L2 transfer of shard %d %s rank %d failed at byte %llu of %llu: %s",
                       x->shard, x->out ? "to" : "from", x->peer,
                       (unsigned long long)(x->stage < 2 ? 0 : x->next + (x->out ? 0 : x->part)),
                       (unsigned long long)x->size, sd.msg);
}

/* Drives every TCP stream to its end or the deadline, waiting in poll between moves. */
static ftl_err run_tcp_streams(ftl_ckpt *ck, l2_stream *v, int n, int64_t deadline_ms, const char *what,
                               ftl_diag *d) {
  int *socks = ftl_calloc((size_t)n + 1, sizeof *socks), *outs = ftl_calloc((size_t)n + 1, sizeof *outs);
  ftl_err rc = FTL_OK;
  ck_l2_tcp_pipe pipe_guard;
  ck_l2_tcp_quiet_pipe(&pipe_guard); /* a fetcher gone must not SIGPIPE this program */
  if (!socks || !outs) {
    atomic_store(&ck->sync->broken, 1);
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory for the L2 transfer");
    goto out;
  }
  for (;;) {
    int progress = 0, open = 0;
    for (int i = 0; i < n && !rc; i++) {
      rc = tcp_step(ck, &v[i], &progress, d);
      if (v[i].stage != 3) {
        socks[open] = v[i].sock;
        outs[open++] = v[i].out;
      }
    }
    if (rc || !open) goto out;
    if (progress) continue;
    int left = ftl_deadline_left_ms(deadline_ms);
    if (left == 0) {
      atomic_store(&ck->sync->broken, 1);
      rc = ftl_diag_fail(d, FTL_ERR_TIMEOUT, "%s did not complete within %lld ms (a rank is gone or stuck)", what,
                         (long long)ck->timeout_ms);
      goto out;
    }
    ck_l2_tcp_wait(socks, outs, open, left < 100 ? left : 100);
  }
out:
  ck_l2_tcp_restore_pipe(&pipe_guard);
  ftl_free(socks);
  ftl_free(outs);
  return rc;
}

/* Every rank (collective, ckpt_l2_tcp.c): connects the streams directly over TCP when every rank
 * can; *tcp says whether they are (the same on every rank), else they run over MPI. */
ftl_err ck_l2_connect_streams(ftl_ckpt *ck, l2_stream *v, int n, const char *what, int loud, int *tcp,
                               int64_t deadline_ms, ftl_diag *d) {
  ck_l2_link *links = ftl_calloc((size_t)n + 1, sizeof *links);
  if (!links) {
    atomic_store(&ck->sync->broken, 1); /* the others expect this rank in the set-up */
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory for the L2 connections");
  }
  for (int i = 0; i < n; i++) links[i] = (ck_l2_link){.out = v[i].out, .peer = v[i].peer, .shard = v[i].shard};
  ftl_err rc = ck_l2_tcp_connect(ck, links, n, what, loud, tcp, deadline_ms, d);
  for (int i = 0; !rc && *tcp && i < n; i++) {
    v[i].tcp = 1;
    v[i].sock = links[i].fd;
  }
  ftl_free(links);
  return rc;
}

/* Drives every stream to its end or the deadline. After an error a request may still be pending on
 * a stream's buffers: *leak is set and the caller must not free them. */
ftl_err ck_l2_run_streams(ftl_ckpt *ck, l2_stream *v, int n, int64_t deadline_ms, const char *what, int *leak,
                           ftl_diag *d) {
  /* Open MPI moves a large message's bytes over TCP only inside its calls (MPI_Test here), a socket
   * buffer at a time, and a message completes only every few milliseconds: so "no message
   * completed" does not mean idle, and any sleep between polls throttles the transfer (1 ms pauses
   * gave 85 MB/s; even 10 us ones cost a restore from L2 most of its time, the kernel's timer slack
   * making each one 60 us). While messages keep completing, the loop only yields the CPU between
   * polls (a rank on the same core still runs); once none has for 5 ms it backs off, 10 us
   * doubling to 1 ms, as a wait for a slow or gone peer should. The deadline holds throughout. */
  const int64_t spin_ns = 5000000;
  const long max_sleep_ns = 1000000;
  long sleep_ns = 10000;
  int64_t last = ftl_clock_ns();
  *leak = 0;
  if (n > 0 && v[0].tcp) return run_tcp_streams(ck, v, n, deadline_ms, what, d); /* all or none are */
  for (;;) {
    int progress = 0, open = 0;
    for (int i = 0; i < n; i++) {
      ftl_err rc = step_stream(ck, &v[i], &progress, d);
      if (rc) {
        *leak = 1;
        return rc;
      }
      open += v[i].stage != 3;
    }
    if (!open) return FTL_OK;
    if (progress) {
      last = ftl_clock_ns();
      sleep_ns = 10000;
      continue;
    }
    if (ftl_deadline_left_ms(deadline_ms) == 0) {
      *leak = 1;
      atomic_store(&ck->sync->broken, 1);
      return ftl_diag_fail(d, FTL_ERR_TIMEOUT, "%s did not complete within %lld ms (a rank is gone or stuck)", what,
                           (long long)ck->timeout_ms);
    }
    if (ftl_clock_ns() - last < spin_ns) {
      sched_yield();
      continue;
    }
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    if (sleep_ns < max_sleep_ns) sleep_ns *= 2;
  }
}

ftl_err ck_l2_alloc_bufs(l2_stream *v, int n, ftl_diag *d) {
  for (int i = 0; i < n; i++) {
    /* A sender with nothing to send, or that sends from its mapped copy, needs no body buffers. */
    if (v[i].out && (v[i].fd < 0 || v[i].map || v[i].tcp)) continue;
    for (int k = 0; k < L2_SLOTS; k++) {
      v[i].slot[k].buf = ftl_malloc(L2_CHUNK);
      if (!v[i].slot[k].buf) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory for the L2 transfer");
    }
  }
  return FTL_OK;
}

void ck_l2_free_streams(l2_stream *v, int n, int leak) {
  if (!v || leak) return; /* a pending request may still write into them */
  for (int i = 0; i < n; i++) {
    if (v[i].tcp) ck_l2_tcp_close(v[i].sock);
    if (v[i].fd >= 0) core_fs_table.close(v[i].fd);
    if (v[i].map) munmap(v[i].map, (size_t)v[i].size);
    for (int k = 0; k < L2_SLOTS; k++) ftl_free(v[i].slot[k].buf);
    if (!v[i].out) ftl_free(v[i].pre);
    ck_verifier_free(v[i].ver);
  }
  ftl_free(v);
}

/* Opens path for reading when it is a regular file of `size` bytes; else -1, why in why. */
int ck_l2_open_copy(const char *path, uint64_t size, char *why, size_t why_size) {
  ftl_diag od = {{0}};
  int fd = -1;
  uint64_t have = 0;
  if (core_fs_open_regular(path, UINT64_MAX, &fd, &have, &od) != FTL_OK) {
    (void)ftl_fmt(why, why_size, "%s", od.msg);
    return -1;
  }
  if (have != size) {
    (void)ftl_fmt(why, why_size, "%s has %llu bytes, the manifest %llu", path, (unsigned long long)have,
             (unsigned long long)size);
    core_fs_table.close(fd);
    return -1;
  }
  return fd;
}

/* Creates the file a received body goes into (its final size), or -1 with why. */
int ck_l2_create_copy(const char *path, uint64_t size, char *why, size_t why_size) {
  int fd = core_fs_table.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    (void)ftl_fmt(why, why_size, "cannot create %s: %s", path, strerror(errno));
    return -1;
  }
  if (core_fs_table.ftruncate(fd, (off_t)size) != 0) {
    (void)ftl_fmt(why, why_size, "cannot size %s: %s", path, strerror(errno));
    core_fs_table.close(fd);
    core_fs_table.unlink(path);
    return -1;
  }
  return fd;
}

