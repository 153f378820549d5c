/* checkpoint/ckpt_l2.c: the L2 level (docs/checkpoint.md, "L2"): a copy of each shard in the L1
 * folder of a partner host, so the loss of one host leaves every shard in some host's memory.
 *
 * Placement: the gang's distinct host names, sorted; the partner host of host i is host (i+1) mod H;
 * the j-th rank (in rank order) of host i sends its shard to rank j mod n of the partner host's n
 * ranks. Every rank derives the same from the host names allgathered at ftl_ckpt_create. With one
 * host there is no L2.
 *
 * Transfers, in the phases where every rank already takes part (so no thread listens for anything):
 *   - save, in the writer thread between the commit agreement (every shard durable in L3) and the
 *     manifest: each rank streams its shard file to its partner rank, which writes it into
 *     partner/shard-R.h5.tmp, verifies every byte against the agreed size and checksum with the
 *     sender's piece layout (the checksum covers the layout), and renames it into place; rank 0
 *     learns which copies are in place (a gather) and names their hosts in the manifest (l2_host);
 *   - restore, on the training thread after the manifest is parsed: each rank says which shards it
 *     wants from another host and which ones its host holds a copy of (its own L1 copies, the L2
 *     copies it keeps: one allgather of two bitmaps), every rank derives the same holder for each
 *     wanted shard (plan_fetch), and that holder streams its copy to the rank that wants it, which
 *     hashes every byte against the manifest as it arrives (ckpt_restore.c uses it only then).
 * The streams of both go over a direct TCP connection each (ckpt_l2_tcp.c sets them up; every rank
 * falls back to MPI together when one cannot): Open MPI's TCP transport copies every byte through
 * its fragments and moves them only inside MPI_Test.
 * Every transfer is polled against the step's deadline, like the collectives; one that passes it,
 * an MPI error or a connection that breaks, marks the handle broken. A copy that cannot be read,
 * stored or verified is a warning and nothing more: the run directory's copy is the one that counts.
 *
 * Not here: the stream engine that moves the bytes (ckpt_l2_stream.c), the folders and their limit
 * (levels.c), verification (shard.c), MPI calls (ckpt_coll.c), sockets (ckpt_l2_tcp.c), which copy
 * a restore reads (ckpt_restore.c).
 *
 * Map: placement; save; restore's fetch. */
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

#include "checkpoint/catalog.h"
#include "checkpoint/ckpt_internal.h"
#include "checkpoint/ckpt_l2_stream.h"
#include "checkpoint/ckpt_l2_tcp.h"
#include "checkpoint/shard.h"
#include "core/fs.h"

#define L2_TAG_SAVE 19500
#define L2_TAG_FETCH 20000 /* + shard index; below MPI's smallest allowed tag bound (32767) */

/* ---- placement --------------------------------------------------------------------------- */

static int cmp_host(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

ftl_err ck_l2_place(ftl_ckpt *ck) {
  int w = ck->world, nh = 0;
  const char **sorted = ftl_calloc((size_t)w, sizeof *sorted);
  int *host_of = ftl_calloc((size_t)w, sizeof *host_of);
  ftl_err rc = FTL_OK;
  if (!sorted || !host_of || !ck->l2_partner) {
    rc = FTL_ERR_NOMEM;
    goto out;
  }
  for (int r = 0; r < w; r++) sorted[r] = ck->hosts[r].host;
  qsort(sorted, (size_t)w, sizeof *sorted, cmp_host);
  for (int r = 0; r < w; r++)
    if (nh == 0 || strcmp(sorted[nh - 1], sorted[r]) != 0) sorted[nh++] = sorted[r];
  ck->l2_hosts = nh;
  for (int r = 0; r < w; r++) {
    const char *key = ck->hosts[r].host;
    const char **hit = bsearch(&key, sorted, (size_t)nh, sizeof *sorted, cmp_host);
    host_of[r] = (int)(hit - sorted);
  }
  for (int r = 0; r < w; r++) {
    ck->l2_partner[r] = -1;
    if (nh < 2) continue;
    int j = 0, p = (host_of[r] + 1) % nh, n = 0;
    for (int q = 0; q < r; q++) j += host_of[q] == host_of[r];
    for (int q = 0; q < w; q++) n += host_of[q] == p;
    for (int q = 0, k = 0; q < w; q++) {
      if (host_of[q] != p) continue;
      if (k++ == j % n) {
        ck->l2_partner[r] = q;
        break;
      }
    }
  }
out:
  ftl_free(sorted);
  ftl_free(host_of);
  return rc;
}

/* ---- save -------------------------------------------------------------------------------- */

/* Verifies a received copy (tmp in dir) against the agreed size and checksum with the sender's
 * pieces, then renames it into place. Returns 1 when it is in place. */
static int keep_received(ftl_ckpt *ck, const char *dir, int r, const hdr *h, const rec *recs, int64_t step,
                         void *bounce) {
  ftl_diag vd = {{0}};
  ck_manifest *vm = ck_manifest_alloc(ck->nregs, 1);
  char file[CK_FILE_MAX], tmp[PATH_MAX], final[PATH_MAX];
  int ok = 0;
  ck_shard_file_name(r, file);
  if (!vm || ftl_fmt(tmp, sizeof tmp, "%s/%s.tmp", dir, file) || ftl_fmt(final, sizeof final, "%s/%s", dir, file))
    goto out;
  ck_shard *sh = &vm->shards[0];
  for (int i = 0; i < ck->nregs; i++) vm->items[i] = ck->regs[i].item;
  sh->rank = r;
  (void)ftl_fmt(sh->file, sizeof sh->file, "%s.tmp", file);
  sh->size_bytes = h->size;
  sh->checksum = h->checksum;
  sh->pieces = ftl_calloc((size_t)ck->nregs + 1, sizeof *sh->pieces);
  if (!sh->pieces) goto out;
  /* The sender's layout is outside bytes: each record must name its own item; the agreed checksum
   * then covers the layout and every byte. */
  for (int i = 0; i < ck->nregs; i++) {
    const rec *x = &recs[i];
    if (x->item < 0) continue;
    if (x->item != i || x->row_count <= 0) {
      (void)ftl_fmt(vd.msg, sizeof vd.msg, "the sender's piece records are malformed");
      goto out;
    }
    sh->pieces[sh->npieces++] =
        (ck_piece){(int)x->item, x->row_start, x->row_count, x->file_offset, x->size_bytes, x->checksum};
  }
  if (ck_shard_verify_read(dir, vm, sh, NULL, 0, L2_CHUNK, bounce, L2_CHUNK, &vd) != FTL_OK) goto out;
  if (core_fs_table.rename(tmp, final) != 0) {
    (void)ftl_fmt(vd.msg, sizeof vd.msg, "cannot rename %s: %s", tmp, strerror(errno));
    goto out;
  }
  ok = 1;
out:
  if (!ok) {
    core_fs_table.unlink(tmp);
    FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld: no L2 copy of rank %d's shard here (%s); the run directory has it",
            (long long)step, r, vd.msg[0] ? vd.msg : "out of memory");
  }
  ck_manifest_free(vm);
  return ok;
}

ftl_err ck_l2_save(ftl_ckpt *ck, int64_t step, const char *own_path, int64_t deadline_ms, unsigned char *stored,
                   ftl_diag *d) {
  const hdr *hdrs = ck->hdrs;
  int me = ck->rank, n = 1, leak = 0;
  memset(stored, 0, (size_t)ck->world);
  for (int r = 0; r < ck->world; r++) n += ck->l2_partner[r] == me;
  l2_stream *v = ftl_calloc((size_t)n, sizeof *v);
  void *bounce = NULL;
  ftl_err rc = FTL_OK;
  char l2dir[PATH_MAX] = "";
  if (!v) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory for the L2 transfer");
  for (int i = 0; i < n; i++) v[i].fd = -1;
  /* Out: this rank's shard (the L1 copy is the same bytes in memory, when there is one). */
  l2_stream *o = &v[0];
  char l1p[PATH_MAX], file[CK_FILE_MAX];
  ck_shard_file_name(me, file);
  o->out = 1;
  o->shard = me;
  o->peer = ck->l2_partner[me];
  o->tag = L2_TAG_SAVE;
  o->size = hdrs[me].size;
  o->pre = ck->mine_recs;
  o->pre_len = (int)(sizeof *ck->mine_recs * (size_t)ck->nregs);
  if (hdrs[me].l1 && ck_l1_step_dir(&ck->l1, step, l1p, sizeof l1p) == FTL_OK &&
      ftl_fmt(l1p + strlen(l1p), sizeof l1p - strlen(l1p), "/%s", file) == FTL_OK)
    o->fd = ck_l2_open_copy(l1p, o->size, o->why, sizeof o->why);
  if (o->fd < 0) o->fd = ck_l2_open_copy(own_path, o->size, o->why, sizeof o->why);
  if (o->fd < 0)
    FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld: this rank's shard is not sent to its L2 partner (rank %d): %s",
            (long long)step, o->peer, o->why);
  o->have = o->fd >= 0;
  /* In: the shards of the ranks whose partner this rank is. */
  int have_l2dir = ck->l1.dir[0] && ck_l2_step_dir(&ck->l1, step, l2dir, sizeof l2dir) == FTL_OK;
  for (int r = 0, k = 1; r < ck->world; r++) {
    if (ck->l2_partner[r] != me) continue;
    l2_stream *x = &v[k++];
    x->peer = r;
    x->shard = r;
    x->tag = L2_TAG_SAVE;
    x->size = hdrs[r].size;
    x->pre_len = (int)(sizeof(rec) * (size_t)ck->nregs);
    x->pre = ftl_calloc((size_t)ck->nregs + 1, sizeof(rec));
    if (!x->pre) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory for the L2 transfer");
      goto out;
    }
    char why[256] = "L1 is off on this rank", tmp[PATH_MAX], rf[CK_FILE_MAX];
    ck_shard_file_name(r, rf);
    if (have_l2dir && ck_l2_make_room(&ck->l1, r, step, x->size, why, sizeof why) &&
        ftl_fmt(tmp, sizeof tmp, "%s/%s.tmp", l2dir, rf) == FTL_OK)
      x->fd = ck_l2_create_copy(tmp, x->size, why, sizeof why);
    if (x->fd < 0) {
      /* Still received (the sender does not wait for a yes), only not kept. */
      FTL_LOG(ck->l1.warned++ ? FTL_LOG_DEBUG : FTL_LOG_WARN, "ckpt",
              "step %lld: no L2 copy of rank %d's shard here (%s); the run directory has it", (long long)step, r, why);
    }
  }
  int tcp = 0;
  /* Every checkpoint: said in debug only. */
  rc = ck_l2_connect_streams(ck, v, n, "the L2 save", 0, &tcp, deadline_ms, d);
  if (rc) goto out;
  rc = ck_l2_alloc_bufs(v, n, d);
  if (rc) goto out;
  int64_t t0 = ftl_clock_ns();
  rc = ck_l2_run_streams(ck, v, n, deadline_ms, "the L2 transfer to the partner hosts", &leak, d);
  if (rc) goto out;
  if (o->failed)
    FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld: the L2 copy sent to rank %d is unusable: %s", (long long)step, o->peer,
            o->why);
  bounce = ftl_malloc(L2_CHUNK);
  for (int i = 1; i < n; i++) {
    l2_stream *x = &v[i];
    if (x->fd < 0) continue;
    int closed = core_fs_table.close(x->fd) == 0;
    x->fd = -1;
    char tmp[PATH_MAX], rf[CK_FILE_MAX];
    ck_shard_file_name(x->shard, rf);
    if (ftl_fmt(tmp, sizeof tmp, "%s/%s.tmp", l2dir, rf)) continue;
    if (x->have != 1 || x->failed || !closed || !bounce) {
      core_fs_table.unlink(tmp);
      FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld: no L2 copy of rank %d's shard here (%s); the run directory has it",
              (long long)step, x->shard,
              x->have != 1 ? "the sender had none to send" : x->failed ? x->why : "close or memory failed");
      continue;
    }
    stored[x->shard] = (unsigned char)keep_received(ck, l2dir, x->shard, &hdrs[x->shard], x->pre, step, bounce);
  }
  FTL_LOG(FTL_LOG_DEBUG, "ckpt", "step %lld: L2 transfer %.1f ms", (long long)step, ck_ms_since(t0));
out:
  ftl_free(bounce);
  if (rc && !leak)
    for (int i = 1; i < n; i++) {
      char tmp[PATH_MAX], rf[CK_FILE_MAX];
      ck_shard_file_name(v[i].shard, rf);
      if (v[i].fd >= 0 && ftl_fmt(tmp, sizeof tmp, "%s/%s.tmp", l2dir, rf) == FTL_OK) core_fs_table.unlink(tmp);
    }
  ck_l2_free_streams(v, n, leak);
  return rc;
}

/* ---- restore's fetch --------------------------------------------------------------------- */

ftl_err ck_l2_fetched_name(int shard, int rank, char *out, size_t size) {
  char f[CK_FILE_MAX];
  ck_shard_file_name(shard, f);
  return ftl_fmt(out, size, "%s.fetched-%d", f, rank);
}

/* The bytes of shard sh that are HDF5 metadata (not a piece's): what a fetched copy keeps in tmpfs. */
static uint64_t metadata_bytes(const ck_shard *sh) {
  uint64_t pieces = 0;
  for (int p = 0; p < sh->npieces; p++) pieces += sh->pieces[p].size_bytes;
  return pieces < sh->size_bytes ? sh->size_bytes - pieces : 0;
}

/* One transfer restore's fetch plans for this rank: shard `shard` to (out) or from peer; peer -1:
 * this rank wants the shard and no live rank holds a copy of it. */
typedef struct fetch_pair {
  int shard, peer, out;
} fetch_pair;

/* Bit s of a bitmap of W bits. */
static int bit(const unsigned char *map, int s) { return (map[s >> 3] >> (s & 7)) & 1; }

/* The ranks that may serve shard s to the others, in rank order, into cand (world entries): the
 * ranks that hold a copy of it (their hold bits, at hold_off in each rank's record of the
 * allgather), those on the shard's l2_host when any holds it (where its copy has always been
 * fetched from), else all. Their count. */
static int holders_of(const ftl_ckpt *ck, const ck_manifest *m, const unsigned char *all, size_t stride,
                      size_t hold_off, int s, int *cand) {
  const char *l2 = m->shards[s].l2_host;
  int n = 0, on_l2 = 0;
  for (int q = 0; q < ck->world; q++) {
    if (!bit(all + (size_t)q * stride + hold_off, s)) continue;
    int here = l2[0] && strcmp(ck->hosts[q].host, l2) == 0;
    if (here && !on_l2) n = 0; /* the first holder on l2_host: only those count from now on */
    on_l2 |= here;
    if (here || !on_l2) cand[n++] = q;
  }
  return n;
}

/* Which transfers of restore's fetch this rank takes part in, from every rank's want and hold bits
 * (all: stride bytes per rank, want bits first, hold bits at hold_off). Each wanted shard is
 * served to rank q by one holder, the same on every rank: holders_of's (s + q)-th, so the ranks of
 * a holding host share the sending. *pairs (to free) gets *n of them. */
static ftl_err plan_fetch(const ftl_ckpt *ck, const ck_manifest *m, const unsigned char *all, size_t stride,
                          size_t hold_off, fetch_pair **pairs, int *n, ftl_diag *d) {
  int W = m->world_size, me = ck->rank, cap = 0;
  const unsigned char *mine = all + (size_t)me * stride;
  int *cand = ftl_calloc((size_t)ck->world, sizeof *cand);
  ftl_err rc = FTL_OK;
  *pairs = NULL;
  *n = 0;
  if (!cand) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory planning the L2 transfer");
  for (int s = 0; s < W && !rc; s++) {
    int wants = bit(mine, s), holds = bit(mine + hold_off, s);
    if (!wants && !holds) continue;
    int nc = holders_of(ck, m, all, stride, hold_off, s, cand);
    for (int q = 0; q < ck->world && !rc; q++) {
      if (q == me ? !wants : !holds || !bit(all + (size_t)q * stride, s)) continue;
      int srv = nc > 0 ? cand[(int)(((int64_t)s + q) % nc)] : -1;
      /* A rank never asks for what its own host holds (restore reads that itself). */
      if ((q != me && srv != me) || srv == q) continue;
      if (*n == cap) {
        cap = cap ? 2 * cap : 16;
        fetch_pair *grown = ftl_realloc(*pairs, (size_t)cap * sizeof *grown);
        if (!grown) {
          rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory planning the L2 transfer");
          break;
        }
        *pairs = grown;
      }
      (*pairs)[(*n)++] = (fetch_pair){s, q == me ? srv : q, q != me};
    }
  }
  ftl_free(cand);
  return rc;
}

/* "L1" when host keeps shard sh's own L1 copy, else "L2" (the copy it keeps for a partner). */
static const char *copy_level(const ck_shard *sh, const char *host) {
  return strcmp(sh->l1_host, host) == 0 ? "L1" : "L2";
}

/* This host's folders of a step's copies in memory: its L1 copies, the L2 copies it keeps. */
typedef struct copy_dirs {
  char l1[PATH_MAX], l2[PATH_MAX];
  int have_l1, have_l2;
} copy_dirs;

/* A stream this rank serves: the copy its host holds (hold: CK_HOLD_L1, the shard's own L1 copy, or
 * the L2 copy kept for its partner) opened for sending; x->have 0 with why when it is not usable. */
static void open_served_copy(const ck_manifest *m, unsigned char hold, const copy_dirs *dirs, l2_stream *x) {
  const ck_shard *sh = &m->shards[x->shard];
  const char *dir = hold == CK_HOLD_L1 ? dirs->l1 : dirs->l2;
  char path[PATH_MAX];
  (void)ftl_fmt(x->why, sizeof x->why, "L1 is off on this rank");
  if ((hold == CK_HOLD_L1 ? dirs->have_l1 : dirs->have_l2) && ftl_fmt(path, sizeof path, "%s/%s", dir, sh->file) == FTL_OK)
    x->fd = ck_l2_open_copy(path, x->size, x->why, sizeof x->why);
  x->have = x->fd >= 0;
  if (!x->have)
    FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld: the %s copy of %s asked for by rank %d is not usable here (%s)",
            (long long)m->step, hold == CK_HOLD_L1 ? "L1" : "L2", sh->file, x->peer, x->why);
}

/* A stream this rank fetches: the shard's verifier, where its bytes land (needs), and the file in
 * this host's L2 folder that keeps the fetched copy; without that file nothing lands at all. */
static void open_fetched_copy(ftl_ckpt *ck, const ck_manifest *m, const ck_need *needs, const int *first,
                              const copy_dirs *dirs, l2_stream *x) {
  const ck_shard *sh = &m->shards[x->shard];
  char path[PATH_MAX], name[CK_FILE_MAX];
  ftl_diag vd = {{0}};
  x->fetch = 1;
  x->needs = needs + first[x->shard];
  x->nneeds = first[x->shard + 1] - first[x->shard];
  (void)ftl_fmt(x->why, sizeof x->why, "L1 is off on this rank");
  if (ck_verifier_new(m, sh, &x->ver, &vd) != FTL_OK) {
    (void)ftl_fmt(x->why, sizeof x->why, "%s", vd.msg);
  } else if (dirs->have_l2 && ck_l2_make_room(&ck->l1, x->shard, m->step, metadata_bytes(sh), x->why, sizeof x->why) &&
             ck_l2_fetched_name(x->shard, ck->rank, name, sizeof name) == FTL_OK &&
             ftl_fmt(path, sizeof path, "%s/%s", dirs->l2, name) == FTL_OK) {
    x->fd = ck_l2_create_copy(path, x->size, x->why, sizeof x->why);
    if (x->fd >= 0) x->why[0] = '\0';
  }
  if (x->fd < 0) x->nneeds = 0;
}

/* After the transfer: a fetched copy counts (got[shard] = 1) only once every byte verified; any
 * other is removed from this host's L2 folder, saying why and what the restore reads instead. */
static void settle_fetched_copy(ftl_ckpt *ck, const ck_manifest *m, l2_stream *x, const char *l2dir,
                                unsigned char *got) {
  const ck_shard *sh = &m->shards[x->shard];
  const char *from = ck->hosts[x->peer].host, *level = copy_level(sh, from);
  const char *then = m->l3 ? "reading the run directory's" : "the step has no copy in the run directory";
  char name[CK_FILE_MAX], path[PATH_MAX];
  int kept = x->fd >= 0 && core_fs_table.close(x->fd) == 0;
  x->fd = -1;
  if (ck_l2_fetched_name(x->shard, ck->rank, name, sizeof name) || ftl_fmt(path, sizeof path, "%s/%s", l2dir, name))
    return;
  if (kept && x->have == 1 && !x->failed) {
    /* The promise of every level: the bytes count only once all of them verify. */
    ftl_diag vd = {{0}};
    if (ck_verifier_finish(x->ver, &vd) == FTL_OK) {
      got[x->shard] = 1;
      return;
    }
    core_fs_table.unlink(path);
    FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld: the %s copy %s (of %s, kept on %s) failed verification (%s): %s",
            (long long)m->step, level, path, sh->file, from, vd.msg, then);
    return;
  }
  core_fs_table.unlink(path);
  const char *why = x->have != 1 ? "the host had none to send" : x->failed || x->why[0] ? x->why : "close failed";
  FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld: the %s copy of %s on %s is not usable (%s): %s", (long long)m->step, level,
          sh->file, from, why, then);
}

ftl_err ck_l2_fetch(ftl_ckpt *ck, const ck_manifest *m, const unsigned char *want, const unsigned char *hold,
                    const ck_need *needs, const int *first, unsigned char *got, int64_t deadline_ms, ftl_diag *d) {
  int W = m->world_size, n = 0, leak = 0, npairs = 0;
  memset(got, 0, (size_t)W);
  /* One tag per shard: past that many shards L2 is not read (every rank decides the same). */
  if (W > 32767 - L2_TAG_FETCH) return FTL_OK;
  /* Each rank's record: a bitmap of the shards it wants, then one of the shards its host's folder
   * holds a copy of (W / 4 bytes in all, where a byte per wanted shard was W). */
  size_t map_bytes = ((size_t)W + 7) / 8, stride = 2 * map_bytes;
  unsigned char *all = ftl_calloc(stride * (size_t)ck->world + 1, 1), *mine = ftl_calloc(stride + 1, 1);
  fetch_pair *pairs = NULL;
  l2_stream *v = NULL;
  ftl_err rc = FTL_OK;
  if (!all || !mine) {
    ftl_free(all);
    ftl_free(mine);
    atomic_store(&ck->sync->broken, 1);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory for the L2 requests");
  }
  for (int s = 0; s < W; s++) {
    mine[s >> 3] |= (unsigned char)((want[s] != 0) << (s & 7));
    mine[map_bytes + (size_t)(s >> 3)] |= (unsigned char)((hold[s] != 0) << (s & 7));
  }
  rc = ck_coll_allgather(ck, mine, all, (int)stride, "the allgather of the L2 requests and copies", deadline_ms, d);
  if (rc) {
    all = mine = NULL; /* a timed-out request may still use them: left to it */
    goto out;
  }
  rc = plan_fetch(ck, m, all, stride, map_bytes, &pairs, &npairs, d);
  if (!rc) v = ftl_calloc((size_t)npairs + 1, sizeof *v);
  if (rc || !v) {
    if (!rc) rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory for the L2 transfer");
    atomic_store(&ck->sync->broken, 1); /* the peers expect these streams */
    goto out;
  }
  copy_dirs dirs;
  memset(&dirs, 0, sizeof dirs);
  dirs.have_l1 = ck->l1.dir[0] && ck_l1_step_dir(&ck->l1, m->step, dirs.l1, sizeof dirs.l1) == FTL_OK;
  dirs.have_l2 = ck->l1.dir[0] && ck_l2_step_dir(&ck->l1, m->step, dirs.l2, sizeof dirs.l2) == FTL_OK;
  for (int i = 0; i < npairs; i++) {
    const fetch_pair *pr = &pairs[i];
    const ck_shard *sh = &m->shards[pr->shard];
    if (pr->peer < 0) {
      /* Below L3 the step cannot be restored without it; at L3 the run directory has it (the
       * usual case after a host is lost with the only copy in memory). */
      FTL_LOG(m->l3 ? FTL_LOG_INFO : FTL_LOG_WARN, "ckpt",
              "step %lld: no live host holds a copy of %s in memory (L1 on %s, L2 on %s): %s", (long long)m->step,
              sh->file, sh->l1_host[0] ? sh->l1_host : "none", sh->l2_host[0] ? sh->l2_host : "none",
              m->l3 ? "reading the run directory's" : "the step has no copy in the run directory");
      continue;
    }
    l2_stream *x = &v[n++];
    x->fd = -1;
    x->out = pr->out;
    x->peer = pr->peer;
    x->shard = pr->shard;
    x->tag = L2_TAG_FETCH + pr->shard;
    x->size = sh->size_bytes;
    if (x->out) open_served_copy(m, hold[pr->shard], &dirs, x);
    else open_fetched_copy(ck, m, needs, first, &dirs, x);
  }
  int tcp = 0;
  rc = ck_l2_connect_streams(ck, v, n, "the L2 fetch", 1, &tcp, deadline_ms, d);
  if (rc) goto out;
  /* Over MPI a copy is sent from its mapping; over TCP sendfile takes it from the file itself. */
  for (int i = 0; i < n && !tcp; i++)
    if (v[i].out && v[i].fd >= 0) v[i].map = ck_map_tmpfs(v[i].fd, v[i].size);
  rc = ck_l2_alloc_bufs(v, n, d);
  if (rc) {
    atomic_store(&ck->sync->broken, 1); /* the peers expect these streams */
    goto out;
  }
  rc = ck_l2_run_streams(ck, v, n, deadline_ms, "the L2 transfer of the restore", &leak, d);
  if (rc) goto out;
  for (int i = 0; i < n; i++)
    if (!v[i].out) settle_fetched_copy(ck, m, &v[i], dirs.l2, got);
out:
  ck_l2_free_streams(v, n, leak);
  ftl_free(pairs);
  if (!leak) {
    ftl_free(all);
    ftl_free(mine);
  }
  return rc;
}
