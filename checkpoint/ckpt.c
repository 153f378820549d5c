/* checkpoint/ckpt.c: the in-rank checkpoint API (include/ftl/ckpt.h): the registry of tensors and
 * blobs, the staging buffers, the writer thread and its commit protocol, garbage collection, and
 * restore at any world size. docs/checkpoint.md explains the protocol; this file implements it.
 *
 * Commit protocol (the writer threads of all ranks, on a communicator duplicated for them, with
 * non-blocking collectives polled against a deadline, so the training loop never takes part):
 *   1. rank 0 removes a stale manifest of the same step, if any; Ibarrier (no shard of the new
 *      step can be renamed into place while an old manifest could still commit the folder);
 *   2. each rank writes its shard (shard.c): tmp file, XXH3 on the way, fsync, rename, fsync dir;
 *   3. Iallgather of a fixed header (ok, error, registration signature, size, checksum, message):
 *      every rank learns the same verdict;
 *   4. if all succeeded: Igather of the piece records to rank 0, which writes manifest.json
 *      (tmp, fsync, rename, fsync dir: the commit) and Ibcasts the outcome;
 *   5. rank 0 deletes what the keep rule lets go (never leaving fewer than two committed).
 * A failure anywhere abandons that step on every rank (its shards are removed, earlier steps are
 * untouched) and is reported through ftl_ckpt_last()/ftl_ckpt_wait() and an event.
 *
 * Threads: the training thread owns the registry and the staging buffers between checkpoints;
 * ftl_ckpt_save hands them to the writer under the mutex (in_flight = 1) and gets them back when
 * the writer clears in_flight under the same mutex. The writer never touches registered memory.
 *
 * Not here: file formats (shard.c, manifest.c), CUDA calls (device.c), deciding when to save.
 *
 * Map: registry; staging; collectives with deadlines; events; writer (job, thread); save/wait;
 * garbage collection; restore; create/destroy. */
#include "ftl/ckpt.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "device.h"
#include "fileio.h"
#include "ftl/core.h"
#include "manifest.h"
#include "shard.h"

#define CK_DEFAULT_KEEP 3
#define CK_DEFAULT_TIMEOUT_MS 600000
#define CK_DEFAULT_CHUNK (8u << 20)
#define CK_BOUNCE_BYTES (1u << 20)
#define CK_MSG 400

/* What each rank tells the others after writing its shard. */
typedef struct hdr {
  int32_t ok, err;
  int32_t nregs, pad;
  uint64_t regsig, size, checksum;
  char msg[CK_MSG];
} hdr;

/* One piece record per registered item (item -1: this rank wrote none of it). */
typedef struct rec {
  int64_t item, row_start, row_count;
  uint64_t file_offset, size_bytes, checksum;
} rec;

/* What each rank tells the others after trying to load a step. */
typedef struct verdict_rec {
  int32_t why, err;
  char msg[CK_MSG];
} verdict_rec;

typedef struct reg {
  ck_item item;
  void *data;
  ftl_ckpt_mem mem;
  uint64_t row_bytes;
  int64_t held_start, held_count;   /* rows this rank holds in data */
  int64_t write_start, write_count; /* rows this rank writes */
  size_t stage_off;                 /* of the written rows in the staging buffer */
} reg;

/* What the training thread and the writer share, behind one mutex. Kept apart from the handle so
 * the thread-safe readers can lock it through a const handle. */
typedef struct ck_sync {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC */
  int have_job, stop, have_last;
  atomic_int in_flight;
  atomic_int broken; /* the communicator is unusable (a collective passed its deadline) */
  /* the job */
  int64_t job_step, job_t0_ns;
  double job_stall_ms, job_wait_ms;
  ftl_err job_local_err; /* staging failed on this rank: the writer only votes "no" */
  char job_local_msg[CK_MSG];
  ftl_ckpt_stats last;
} ck_sync;

struct ftl_ckpt {
  ftl_ctx *ctx;
  MPI_Comm comm;
  int have_comm;
  int rank, world;
  char base[PATH_MAX]; /* <run_dir>/checkpoints */
  int keep;
  int64_t timeout_ms;
  size_t chunk;
  reg *regs;
  int nregs, cap;
  int registry_frozen; /* staging sized for the registry: a new registration re-prepares */
  unsigned char *stage;
  size_t stage_bytes;
  int stage_pinned;
  ck_dev *dev;
  void *bounce; /* writer's scratch for HDF5 metadata segments */
  /* The writer's exchange buffers, allocated ahead (hdrs at create, piece records by prepare) so
   * the writer never fails to allocate what it needs to take part in the collectives. */
  struct hdr *hdrs;
  struct verdict_rec *verdicts; /* restore's agreement, world size entries */
  struct rec *mine_recs, *recs;
  int64_t last_step;
  int setup_ok[2]; /* create's agreement, kept in the handle for the non-blocking allreduce */
  pthread_t thread;
  int thread_started;
  ck_sync *sync;
  char errmsg[1024];
};

static ftl_err fail(ftl_ckpt *ck, ftl_err rc, const char *msg) {
  if (rc) {
    snprintf(ck->errmsg, sizeof ck->errmsg, "%s", msg);
    FTL_LOG(FTL_LOG_ERROR, "ckpt", "%s", msg);
  }
  return rc;
}

/* Bounded copy that cuts long detail instead of failing (messages are for people). */
static void copy_text(char *dst, size_t size, const char *src) {
  size_t n = strnlen(src, size - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

static double ms_since(int64_t t0_ns) { return (double)(ftl_clock_ns() - t0_ns) / 1e6; }

/* ---- registry ---------------------------------------------------------------------------- */

void ftl_ckpt_options_init(ftl_ckpt_options *o) {
  memset(o, 0, sizeof *o);
  o->keep = CK_DEFAULT_KEEP;
  o->timeout_ms = CK_DEFAULT_TIMEOUT_MS;
  o->chunk_bytes = CK_DEFAULT_CHUNK;
}

void ftl_ckpt_split_rows(int64_t rows, int rank, int world_size, int64_t *start, int64_t *count) {
  ck_split_rows(rows, rank, world_size, start, count);
}

static ftl_err add_item(ftl_ckpt *ck, const ck_item *it, void *data, ftl_ckpt_mem mem) {
  ftl_diag d = {{0}};
  if (atomic_load(&ck->sync->in_flight))
    return fail(ck, FTL_ERR_STATE, "cannot register state while a checkpoint is in flight");
  for (int i = 0; i < ck->nregs; i++)
    if (strcmp(ck->regs[i].item.name, it->name) == 0) {
      ftl_diag_fail(&d, FTL_ERR_INVAL, "'%s' is registered twice", it->name);
      return fail(ck, FTL_ERR_INVAL, d.msg);
    }
  int ovf = 0;
  uint64_t rb = ck_item_row_bytes(it, &ovf), total = 0;
  int64_t rows = ck_item_rows(it);
  if (ovf || __builtin_mul_overflow(rb, (uint64_t)rows, &total) || total > (uint64_t)SIZE_MAX / 2) {
    ftl_diag_fail(&d, FTL_ERR_RANGE, "'%s': shape too large", it->name);
    return fail(ck, FTL_ERR_RANGE, d.msg);
  }
  if (ck->nregs == ck->cap) {
    int ncap = ck->cap ? ck->cap * 2 : 16;
    reg *n = ftl_realloc(ck->regs, (size_t)ncap * sizeof *n);
    if (!n) return fail(ck, FTL_ERR_NOMEM, "out of memory registering state");
    ck->regs = n;
    ck->cap = ncap;
  }
  reg *r = &ck->regs[ck->nregs];
  memset(r, 0, sizeof *r);
  r->item = *it;
  r->data = data;
  r->mem = mem;
  r->row_bytes = rb;
  switch (it->kind) {
  case CK_KIND_SPLIT:
    ck_split_rows(rows, ck->rank, ck->world, &r->held_start, &r->held_count);
    r->write_start = r->held_start;
    r->write_count = r->held_count;
    break;
  case CK_KIND_REPLICATED:
    r->held_start = 0;
    r->held_count = rows;
    ck_split_rows(rows, ck->rank, ck->world, &r->write_start, &r->write_count);
    break;
  case CK_KIND_BLOB_GLOBAL:
    r->held_start = 0;
    r->held_count = rows;
    r->write_start = 0;
    r->write_count = ck->rank == 0 ? rows : 0;
    break;
  case CK_KIND_BLOB_PER_RANK:
    r->held_start = 0;
    r->held_count = rows;
    r->write_start = 0;
    r->write_count = rows;
    break;
  }
  ck->nregs++;
  ck->registry_frozen = 0;
  return FTL_OK;
}

ftl_err ftl_ckpt_add_tensor(ftl_ckpt *ck, const char *name, void *data, ftl_dtype dtype, int ndim,
                            const int64_t *global_shape, ftl_ckpt_layout layout, ftl_ckpt_mem mem) {
  ftl_diag d = {{0}};
  if (!ck || !name) return FTL_ERR_INVAL;
  if (!ck_name_ok(name)) {
    ftl_diag_fail(&d, FTL_ERR_INVAL, "tensor name '%s' is not 1-127 bytes of [A-Za-z0-9_.-]", name);
    return fail(ck, FTL_ERR_INVAL, d.msg);
  }
  if (ck_dtype_size(dtype) == 0 || ndim < 0 || ndim > FTL_CKPT_MAX_DIMS || (ndim > 0 && !global_shape) ||
      (layout != FTL_CKPT_SPLIT && layout != FTL_CKPT_REPLICATED) || (mem != FTL_CKPT_HOST && mem != FTL_CKPT_DEVICE)) {
    ftl_diag_fail(&d, FTL_ERR_INVAL, "tensor '%s': bad dtype, ndim, shape, layout or memory kind", name);
    return fail(ck, FTL_ERR_INVAL, d.msg);
  }
  if (mem == FTL_CKPT_DEVICE && !ck_dev_compiled()) {
    ftl_diag_fail(&d, FTL_ERR_UNSUPPORTED, "tensor '%s': device tensors need a build with CUDA", name);
    return fail(ck, FTL_ERR_UNSUPPORTED, d.msg);
  }
  ck_item it;
  memset(&it, 0, sizeof it);
  snprintf(it.name, sizeof it.name, "%s", name);
  it.dtype = dtype;
  it.kind = layout == FTL_CKPT_SPLIT ? CK_KIND_SPLIT : CK_KIND_REPLICATED;
  it.ndim = ndim;
  for (int k = 0; k < ndim; k++) {
    if (global_shape[k] < 0) {
      ftl_diag_fail(&d, FTL_ERR_INVAL, "tensor '%s': negative dimension", name);
      return fail(ck, FTL_ERR_INVAL, d.msg);
    }
    it.shape[k] = global_shape[k];
  }
  /* A tensor with bytes to hold needs memory to hold them. */
  int ovf = 0;
  if (!data && ck_item_row_bytes(&it, &ovf) * (uint64_t)ck_item_rows(&it) > 0 && !ovf) {
    int64_t s, c;
    ck_split_rows(ck_item_rows(&it), ck->rank, ck->world, &s, &c);
    if (layout == FTL_CKPT_REPLICATED || c > 0) {
      ftl_diag_fail(&d, FTL_ERR_INVAL, "tensor '%s': data is NULL", name);
      return fail(ck, FTL_ERR_INVAL, d.msg);
    }
  }
  return add_item(ck, &it, data, mem);
}

ftl_err ftl_ckpt_add_blob(ftl_ckpt *ck, const char *name, void *data, size_t size_bytes, ftl_ckpt_blob_scope scope) {
  ftl_diag d = {{0}};
  if (!ck || !name) return FTL_ERR_INVAL;
  if (!ck_name_ok(name) || (size_bytes > 0 && !data) ||
      (scope != FTL_CKPT_BLOB_GLOBAL && scope != FTL_CKPT_BLOB_PER_RANK)) {
    ftl_diag_fail(&d, FTL_ERR_INVAL, "blob '%s': bad name, data or scope", name);
    return fail(ck, FTL_ERR_INVAL, d.msg);
  }
  ck_item it;
  memset(&it, 0, sizeof it);
  snprintf(it.name, sizeof it.name, "%s", name);
  it.dtype = FTL_DTYPE_U8;
  it.kind = scope == FTL_CKPT_BLOB_GLOBAL ? CK_KIND_BLOB_GLOBAL : CK_KIND_BLOB_PER_RANK;
  it.ndim = 1;
  it.shape[0] = (int64_t)size_bytes;
  return add_item(ck, &it, data, FTL_CKPT_HOST);
}

/* A hash of what every rank must register identically (not the pointers). */
static uint64_t registry_signature(const ftl_ckpt *ck) {
  uint64_t h = 0x66746c636b7074ull;
  for (int i = 0; i < ck->nregs; i++) {
    const ck_item *it = &ck->regs[i].item;
    /* Field by field: the struct's padding bytes are not part of the registration. */
    int64_t f[3 + CK_MAX_DIMS] = {(int64_t)it->dtype, (int64_t)it->kind, (int64_t)it->ndim};
    for (int k = 0; k < it->ndim; k++)
      f[3 + k] = it->shape[k];
    uint64_t x[3] = {h, ck_hash(it->name, strlen(it->name)), ck_hash(f, sizeof f)};
    h = ck_hash(x, sizeof x);
  }
  return h;
}

/* ---- staging ----------------------------------------------------------------------------- */

static int has_device(const ftl_ckpt *ck) {
  for (int i = 0; i < ck->nregs; i++)
    if (ck->regs[i].mem == FTL_CKPT_DEVICE) return 1;
  return 0;
}

static void free_stage(ftl_ckpt *ck) {
  if (ck->stage_pinned) ck_dev_unpin(ck->stage);
  ck->stage_pinned = 0;
  ftl_free(ck->stage);
  ck->stage = NULL;
  ck->stage_bytes = 0;
}

ftl_err ftl_ckpt_prepare(ftl_ckpt *ck) {
  ftl_diag d = {{0}};
  if (!ck) return FTL_ERR_INVAL;
  if (atomic_load(&ck->sync->in_flight)) return fail(ck, FTL_ERR_STATE, "ftl_ckpt_prepare: a checkpoint is in flight");
  size_t off = 0;
  for (int i = 0; i < ck->nregs; i++) {
    reg *r = &ck->regs[i];
    r->stage_off = off;
    off += (size_t)(r->row_bytes * (uint64_t)r->write_count);
    off = (off + 63) & ~(size_t)63;
  }
  if (off == 0) off = 64;
  if (off != ck->stage_bytes) {
    free_stage(ck);
    ck->stage = ftl_malloc(off);
    if (!ck->stage) {
      ftl_diag_fail(&d, FTL_ERR_NOMEM, "cannot allocate %zu bytes of staging", off);
      return fail(ck, FTL_ERR_NOMEM, d.msg);
    }
    ck->stage_bytes = off;
    /* First touch of fresh pages runs at 160-330 MB/s here: pay it now, not in the first save. */
    memset(ck->stage, 0, off);
  }
  /* The piece records are used only after every rank reported success, which needs this prepare
   * to have succeeded here: stale or missing ones are never read. */
  ftl_free(ck->mine_recs);
  ftl_free(ck->recs);
  ck->mine_recs = ftl_calloc((size_t)ck->nregs + 1, sizeof *ck->mine_recs);
  ck->recs = ck->rank == 0 ? ftl_calloc((size_t)ck->world * (size_t)ck->nregs + 1, sizeof *ck->recs) : NULL;
  if (!ck->mine_recs || (ck->rank == 0 && !ck->recs)) {
    ck->registry_frozen = 0;
    return fail(ck, FTL_ERR_NOMEM, "cannot allocate the writer's piece records");
  }
  if (has_device(ck)) {
    ftl_err rc = FTL_OK;
    if (!ck->dev) rc = ck_dev_open(&ck->dev, &d);
    if (!rc && !ck->stage_pinned) {
      rc = ck_dev_pin(ck->stage, ck->stage_bytes, &d);
      if (!rc) ck->stage_pinned = 1;
    }
    if (rc) return fail(ck, rc, d.msg);
  }
  ck->registry_frozen = 1;
  return FTL_OK;
}

/* Copies this rank's written rows into staging: the only part of a checkpoint the loop waits for. */
static ftl_err snapshot(ftl_ckpt *ck, ftl_diag *d) {
  int device = 0;
  for (int i = 0; i < ck->nregs; i++) {
    reg *r = &ck->regs[i];
    size_t n = (size_t)(r->row_bytes * (uint64_t)r->write_count);
    if (n == 0) continue;
    const char *src = (const char *)r->data + (size_t)(r->write_start - r->held_start) * r->row_bytes;
    if (r->mem == FTL_CKPT_DEVICE) {
      ftl_err rc = ck_dev_copy_to_host_async(ck->dev, ck->stage + r->stage_off, src, n, d);
      if (rc) return rc;
      device = 1;
    } else {
      memcpy(ck->stage + r->stage_off, src, n);
    }
  }
  return device ? ck_dev_sync(ck->dev, d) : FTL_OK;
}

/* ---- collectives with deadlines ---------------------------------------------------------- */

/* Polls a non-blocking collective until it completes or the deadline passes. After a timeout the
 * communicator is marked broken: the request is still pending and another collective on it
 * could match the wrong peers. */
static ftl_err wait_req(ftl_ckpt *ck, MPI_Request *req, int64_t deadline_ms, const char *what, ftl_diag *d) {
  long sleep_ns = 20000;
  for (;;) {
    int done = 0;
    int e = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (e != MPI_SUCCESS) {
      char s[MPI_MAX_ERROR_STRING];
      int len = 0;
      MPI_Error_string(e, s, &len);
      atomic_store(&ck->sync->broken, 1);
      return ftl_diag_fail(d, FTL_ERR_MPI, "%s: %s", what, s);
    }
    if (done) return FTL_OK;
    if (ftl_deadline_left_ms(deadline_ms) == 0) {
      atomic_store(&ck->sync->broken, 1);
      return ftl_diag_fail(d, FTL_ERR_TIMEOUT, "%s did not complete within %lld ms (a rank is gone or stuck)", what,
                           (long long)ck->timeout_ms);
    }
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    if (sleep_ns < 2000000) sleep_ns *= 2;
  }
}

static ftl_err mpi_rc(ftl_ckpt *ck, int e, const char *what, ftl_diag *d) {
  if (e == MPI_SUCCESS) return FTL_OK;
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(e, s, &len);
  atomic_store(&ck->sync->broken, 1);
  return ftl_diag_fail(d, FTL_ERR_MPI, "%s: %s", what, s);
}

static ftl_err coll_barrier(ftl_ckpt *ck, int64_t deadline, ftl_diag *d) {
  MPI_Request req;
  ftl_err rc = mpi_rc(ck, MPI_Ibarrier(ck->comm, &req), "MPI_Ibarrier", d);
  return rc ? rc : wait_req(ck, &req, deadline, "the checkpoint barrier", d);
}

static ftl_err coll_allgather(ftl_ckpt *ck, const void *send, void *recv, int bytes, int64_t deadline, ftl_diag *d) {
  MPI_Request req;
  ftl_err rc =
      mpi_rc(ck, MPI_Iallgather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, ck->comm, &req), "MPI_Iallgather", d);
  return rc ? rc : wait_req(ck, &req, deadline, "the checkpoint allgather", d);
}

static ftl_err coll_gather(ftl_ckpt *ck, const void *send, void *recv, int bytes, int64_t deadline, ftl_diag *d) {
  MPI_Request req;
  ftl_err rc =
      mpi_rc(ck, MPI_Igather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, 0, ck->comm, &req), "MPI_Igather", d);
  return rc ? rc : wait_req(ck, &req, deadline, "the checkpoint gather", d);
}

static ftl_err coll_bcast(ftl_ckpt *ck, void *buf, int bytes, int64_t deadline, ftl_diag *d) {
  MPI_Request req;
  ftl_err rc = mpi_rc(ck, MPI_Ibcast(buf, bytes, MPI_BYTE, 0, ck->comm, &req), "MPI_Ibcast", d);
  return rc ? rc : wait_req(ck, &req, deadline, "the checkpoint broadcast", d);
}

/* ---- events ------------------------------------------------------------------------------ */

/* Sends one event; json_pack-style format. Failures to report are logged, never fatal. */
static void emit(ftl_ckpt *ck, const char *event, json_t *fields) {
  if (!fields) return;
  char *text = json_dumps(fields, JSON_COMPACT);
  json_decref(fields);
  if (!text) return;
  if (ck->ctx) {
    ftl_err rc = ftl_ctx_emit_event(ck->ctx, event, text);
    if (rc) FTL_LOG(FTL_LOG_DEBUG, "ckpt", "event %s not sent: %s", event, ftl_strerror(rc));
  }
  free(text);
}

/* ---- writer ------------------------------------------------------------------------------ */

static ftl_err write_manifest(ftl_ckpt *ck, int64_t step, const char *sd, const hdr *hdrs, const rec *recs,
                              uint64_t *total_out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  char *text = NULL;
  size_t len = 0;
  char path[PATH_MAX];
  ck_manifest *m = ck_manifest_alloc(ck->nregs, ck->world);
  if (!m) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory building the manifest");
  m->step = step;
  m->created_unix_us = ftl_wall_us();
  const char *jsh = getenv("FTL_JOB_SPEC_HASH");
  if (jsh) snprintf(m->job_spec_hash, sizeof m->job_spec_hash, "%s", jsh);
  for (int i = 0; i < ck->nregs; i++)
    m->items[i] = ck->regs[i].item;
  uint64_t total = 0;
  for (int r = 0; r < ck->world; r++) {
    ck_shard *sh = &m->shards[r];
    sh->rank = r;
    ck_shard_file_name(r, sh->file);
    sh->size_bytes = hdrs[r].size;
    sh->checksum = hdrs[r].checksum;
    total += sh->size_bytes;
    sh->pieces = ftl_calloc((size_t)ck->nregs + 1, sizeof *sh->pieces);
    if (!sh->pieces) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory building the manifest");
      goto out;
    }
    for (int i = 0; i < ck->nregs; i++) {
      const rec *x = &recs[(size_t)r * (size_t)ck->nregs + (size_t)i];
      if (x->item < 0) continue;
      sh->pieces[sh->npieces++] =
          (ck_piece){(int)x->item, x->row_start, x->row_count, x->file_offset, x->size_bytes, x->checksum};
    }
  }
  rc = ck_manifest_to_json(m, &text, &len, d);
  if (rc) goto out;
  if (ftl_fmt(path, sizeof path, "%s/manifest.json", sd)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", sd);
    goto out;
  }
  rc = ck_write_atomic(path, text, len, "mid_manifest", ck->rank, step, d);
  /* A manifest renamed into place whose folder fsync failed must not commit the step. */
  if (rc) ck_fs_table.unlink(path);
  *total_out = total;
out:
  ftl_free(text);
  ck_manifest_free(m);
  return rc;
}

/* Rank 0, after a commit of `step`: deletes committed steps beyond keep (never fewer than two
 * committed remain), older steps that never committed, and bad steps older than the oldest kept. */
static void collect_garbage(ftl_ckpt *ck, int64_t step) {
  ck_step_entry *v = NULL;
  int n = 0;
  ftl_diag d = {{0}};
  if (ck_list_steps(ck->base, &v, &n, &d)) {
    FTL_LOG(FTL_LOG_WARN, "ckpt", "garbage collection skipped: %s", d.msg);
    return;
  }
  /* Newest first; the step just committed is always kept and counts towards keep. */
  int keep = ck->keep < 2 ? 2 : ck->keep, kept = 1;
  int64_t oldest_kept = step;
  for (int i = 0; i < n; i++) {
    if (v[i].state != CK_STEP_COMMITTED || v[i].step == step || kept >= keep) continue;
    kept++;
    if (v[i].step < oldest_kept) oldest_kept = v[i].step;
  }
  kept = 1;
  for (int i = 0; i < n; i++) {
    int del = 0;
    if (v[i].step == step) continue;
    if (v[i].state == CK_STEP_COMMITTED) del = ++kept > keep;
    /* Only older ones: by now the other ranks may already be writing the next step, whose folder
     * has no manifest yet. Newer leftovers of a crashed attempt go once a commit passes them. */
    else if (v[i].state == CK_STEP_INCOMPLETE)
      del = v[i].step < step;
    else
      del = v[i].step < oldest_kept;
    if (!del) continue;
    if (ck_delete_step(ck->base, v[i].step, &d))
      FTL_LOG(FTL_LOG_WARN, "ckpt", "could not delete step %lld: %s", (long long)v[i].step, d.msg);
    else
      FTL_LOG(FTL_LOG_DEBUG, "ckpt", "deleted step %lld", (long long)v[i].step);
  }
  ftl_free(v);
}

/* One checkpoint, run by the writer thread. Fills st. */
static void run_job(ftl_ckpt *ck, int64_t step, int64_t t0_ns, ftl_err staged_err, const char *staged_msg,
                    ftl_ckpt_stats *st) {
  ftl_diag d = {{0}};
  ftl_err rc = FTL_OK;
  char sd[PATH_MAX], own[PATH_MAX] = "";
  hdr mine, *hdrs = ck->hdrs;
  rec *mine_recs = ck->mine_recs, *recs = ck->recs;
  ck_manifest *m = NULL;
  int64_t deadline = ftl_deadline_after_ms(ck->timeout_ms);
  int wrote = 0;
  memset(&mine, 0, sizeof mine);

  /* 1. Folder, stale manifest of a re-used step number, barrier. */
  ftl_err local = ck_step_dir(ck->base, step, sd, sizeof sd) ? FTL_ERR_RANGE : ftl_mkdir_p(sd, &d);
  if (!local && staged_err) local = ftl_diag_fail(&d, staged_err, "staging failed: %s", staged_msg);
  if (!local && ck->rank == 0) {
    char mp[PATH_MAX];
    if (ftl_fmt(mp, sizeof mp, "%s/manifest.json", sd))
      local = FTL_ERR_RANGE;
    else if (ck_fs_table.unlink(mp) == 0)
      local = ck_fsync_dir(sd, &d);
    else if (errno != ENOENT)
      local = ftl_diag_fail(&d, FTL_ERR_IO, "cannot remove stale %s: %s", mp, strerror(errno));
  }
  rc = coll_barrier(ck, deadline, &d);
  if (rc) goto done;

  /* 2. This rank's shard. */
  if (!local) {
    m = ck_manifest_alloc(ck->nregs, 1);
    if (!m) local = ftl_diag_fail(&d, FTL_ERR_NOMEM, "out of memory in the checkpoint writer");
  }
  if (!local) {
    const void **data = ftl_calloc((size_t)ck->nregs + 1, sizeof *data);
    ck_shard *sh = &m->shards[0];
    sh->rank = ck->rank;
    ck_shard_file_name(ck->rank, sh->file);
    sh->pieces = ftl_calloc((size_t)ck->nregs + 1, sizeof *sh->pieces);
    if (!data || !sh->pieces) {
      local = ftl_diag_fail(&d, FTL_ERR_NOMEM, "out of memory in the checkpoint writer");
    } else {
      for (int i = 0; i < ck->nregs; i++) {
        m->items[i] = ck->regs[i].item;
        if (ck->regs[i].write_count == 0) continue;
        sh->pieces[sh->npieces] = (ck_piece){i, ck->regs[i].write_start, ck->regs[i].write_count, 0, 0, 0};
        data[sh->npieces++] = ck->stage + ck->regs[i].stage_off;
      }
      local = ck_shard_write(sd, m, sh, data, ck->chunk, ck->bounce, CK_BOUNCE_BYTES, step, ck->world, &d);
      if (!local) {
        wrote = 1;
        mine.size = sh->size_bytes;
        mine.checksum = sh->checksum;
        for (int i = 0; i < ck->nregs; i++)
          mine_recs[i].item = -1;
        for (int p = 0; p < sh->npieces; p++) {
          const ck_piece *pc = &sh->pieces[p];
          mine_recs[pc->item] =
              (rec){pc->item, pc->row_start, pc->row_count, pc->file_offset, pc->size_bytes, pc->checksum};
        }
        if (ftl_fmt(own, sizeof own, "%s/%s", sd, sh->file)) own[0] = '\0';
        ck_crash_point("after_shard_rename", ck->rank, step);
      }
    }
    ftl_free(data);
  }

  /* 3. Everyone learns everyone's outcome. */
  mine.ok = local == FTL_OK;
  mine.err = (int32_t)local;
  mine.nregs = ck->nregs;
  mine.regsig = registry_signature(ck);
  if (local) copy_text(mine.msg, sizeof mine.msg, d.msg);
  rc = coll_allgather(ck, &mine, hdrs, (int)sizeof mine, deadline, &d);
  if (rc) goto done;
  for (int r = 0; r < ck->world && !rc; r++) {
    if (!hdrs[r].ok)
      rc = ftl_diag_fail(&d, (ftl_err)hdrs[r].err, "rank %d: %s", r, hdrs[r].msg);
    else if (hdrs[r].regsig != hdrs[0].regsig || hdrs[r].nregs != hdrs[0].nregs)
      rc = ftl_diag_fail(&d, FTL_ERR_INVAL, "rank %d registered other tensors or blobs than rank 0", r);
  }
  if (rc) goto done;

  /* 4. Rank 0 commits. */
  rc = coll_gather(ck, mine_recs, recs, (int)(sizeof *mine_recs * (size_t)ck->nregs), deadline, &d);
  if (rc) goto done;
  struct {
    int32_t err, pad;
    char msg[CK_MSG];
  } verdict;
  memset(&verdict, 0, sizeof verdict);
  if (ck->rank == 0) {
    ftl_diag md = {{0}};
    verdict.err = (int32_t)write_manifest(ck, step, sd, hdrs, recs, &st->total_bytes, &md);
    if (verdict.err) snprintf(verdict.msg, sizeof verdict.msg, "rank 0: manifest: %.360s", md.msg);
  }
  rc = coll_bcast(ck, &verdict, (int)sizeof verdict, deadline, &d);
  if (rc) goto done;
  if (verdict.err) {
    rc = ftl_diag_fail(&d, (ftl_err)verdict.err, "%s", verdict.msg);
    goto done;
  }
  st->durable_ms = ms_since(t0_ns);
  st->shard_bytes = mine.size;

  /* 5. Only after the commit: garbage. */
  if (ck->rank == 0) collect_garbage(ck, step);

done:
  /* An abandoned step leaves no shard of this rank behind (the collectives already ran, so no
   * manifest can name it). Earlier steps were never touched. */
  if (rc && wrote && own[0]) ck_fs_table.unlink(own);
  st->step = step;
  st->err = rc;
  if (rc) snprintf(st->errmsg, sizeof st->errmsg, "checkpoint of step %lld abandoned: %.440s", (long long)step, d.msg);
  ck_manifest_free(m);
}

static void *writer_main(void *arg) {
  ftl_ckpt *ck = arg;
  ck_sync *s = ck->sync;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->have_job && !s->stop)
      pthread_cond_wait(&s->cv, &s->mu);
    if (!s->have_job && s->stop) break;
    int64_t step = s->job_step, t0_ns = s->job_t0_ns;
    ftl_err local_err = s->job_local_err;
    char local_msg[CK_MSG];
    copy_text(local_msg, sizeof local_msg, s->job_local_msg);
    ftl_ckpt_stats st;
    memset(&st, 0, sizeof st);
    st.stall_ms = s->job_stall_ms;
    st.wait_prev_ms = s->job_wait_ms;
    s->have_job = 0;
    pthread_mutex_unlock(&s->mu);

    if (atomic_load(&s->broken)) {
      st.step = step;
      st.err = FTL_ERR_STATE;
      snprintf(st.errmsg, sizeof st.errmsg, "checkpoint of step %lld not written: the handle is broken",
               (long long)step);
    } else {
      run_job(ck, step, t0_ns, local_err, local_msg, &st);
    }
    if (st.err) {
      FTL_LOG(FTL_LOG_ERROR, "ckpt", "%s", st.errmsg);
      emit(ck, "ckpt_abandoned",
           json_pack("{sI si ss ss sf}", "step", (json_int_t)step, "err", (int)st.err, "code", ftl_err_name(st.err),
                     "msg", st.errmsg, "stall_ms", st.stall_ms));
    } else {
      FTL_LOG(FTL_LOG_INFO, "ckpt", "step %lld committed: stall %.1f ms, durable after %.1f ms", (long long)step,
              st.stall_ms, st.durable_ms);
      emit(ck, "ckpt_committed",
           json_pack("{sI sf sf sf sI sI}", "step", (json_int_t)step, "stall_ms", st.stall_ms, "wait_prev_ms",
                     st.wait_prev_ms, "durable_ms", st.durable_ms, "shard_bytes", (json_int_t)st.shard_bytes,
                     "total_bytes", (json_int_t)st.total_bytes));
    }

    pthread_mutex_lock(&s->mu);
    s->last = st;
    s->have_last = 1;
    atomic_store(&s->in_flight, 0);
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* ---- save / wait ------------------------------------------------------------------------- */

/* Waits, mutex held, until nothing is in flight or the deadline passes. */
static ftl_err wait_idle_locked(ck_sync *s, int64_t deadline_ms) {
  while (atomic_load(&s->in_flight)) {
    if (deadline_ms == FTL_NO_DEADLINE) {
      pthread_cond_wait(&s->cv, &s->mu);
      continue;
    }
    int left = ftl_deadline_left_ms(deadline_ms);
    if (left == 0) return FTL_ERR_TIMEOUT;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += left / 1000;
    ts.tv_nsec += (long)(left % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
  }
  return FTL_OK;
}

ftl_err ftl_ckpt_save(ftl_ckpt *ck, int64_t step) {
  ftl_diag d = {{0}};
  if (!ck || step < 0) return FTL_ERR_INVAL;
  ck_sync *s = ck->sync;
  if (atomic_load(&s->broken))
    return fail(ck, FTL_ERR_STATE, "ftl_ckpt_save: the handle is broken (a collective passed its deadline)");
  if (step <= ck->last_step) {
    ftl_diag_fail(&d, FTL_ERR_INVAL, "ftl_ckpt_save: step %lld is not after step %lld", (long long)step,
                  (long long)ck->last_step);
    return fail(ck, FTL_ERR_INVAL, d.msg);
  }
  int64_t t0 = ftl_clock_ns();
  /* At most one checkpoint in flight: the next waits for the previous, and the wait is stall. */
  pthread_mutex_lock(&s->mu);
  ftl_err rc = wait_idle_locked(s, ftl_deadline_after_ms(ck->timeout_ms));
  pthread_mutex_unlock(&s->mu);
  if (rc) {
    ftl_diag_fail(&d, rc, "ftl_ckpt_save(step %lld): the previous checkpoint is still in flight after %lld ms",
                  (long long)step, (long long)ck->timeout_ms);
    return fail(ck, rc, d.msg);
  }
  double wait_ms = ms_since(t0);
  /* A failure to stage on this rank does not return early: the other ranks' writers are about to
   * meet this one in collectives, so the job still goes to the writer, which votes "no" and the
   * step is abandoned on every rank with this rank's reason. */
  if (!ck->registry_frozen || !ck->stage) rc = ftl_ckpt_prepare(ck);
  if (rc)
    copy_text(d.msg, sizeof d.msg, ck->errmsg);
  else
    rc = snapshot(ck, &d);
  if (rc) fail(ck, rc, d.msg);
  double stall_ms = ms_since(t0);
  ck->last_step = step;
  pthread_mutex_lock(&s->mu);
  s->job_step = step;
  s->job_t0_ns = t0;
  s->job_stall_ms = stall_ms;
  s->job_wait_ms = wait_ms;
  s->job_local_err = rc;
  copy_text(s->job_local_msg, sizeof s->job_local_msg, rc ? d.msg : "");
  s->have_job = 1;
  atomic_store(&s->in_flight, 1);
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  emit(ck, "ckpt_saved",
       json_pack("{sI sf sf}", "step", (json_int_t)step, "stall_ms", stall_ms, "wait_prev_ms", wait_ms));
  return FTL_OK;
}

ftl_err ftl_ckpt_wait(ftl_ckpt *ck, int64_t timeout_ms, ftl_ckpt_stats *out) {
  if (!ck) return FTL_ERR_INVAL;
  ck_sync *s = ck->sync;
  int64_t deadline = ftl_deadline_after_ms(timeout_ms < 0 ? ck->timeout_ms : timeout_ms);
  pthread_mutex_lock(&s->mu);
  ftl_err rc = wait_idle_locked(s, deadline);
  if (!rc && !s->have_last) rc = FTL_ERR_NOTFOUND;
  if (!rc) {
    if (out) *out = s->last;
    rc = s->last.err;
  }
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int ftl_ckpt_in_flight(const ftl_ckpt *ck) { return ck ? atomic_load(&ck->sync->in_flight) : 0; }

ftl_err ftl_ckpt_last(const ftl_ckpt *ck, ftl_ckpt_stats *out) {
  if (!ck || !out) return FTL_ERR_INVAL;
  ck_sync *s = ck->sync;
  pthread_mutex_lock(&s->mu);
  ftl_err rc = s->have_last ? FTL_OK : FTL_ERR_NOTFOUND;
  if (!rc) *out = s->last;
  pthread_mutex_unlock(&s->mu);
  return rc;
}

const char *ftl_ckpt_errmsg(const ftl_ckpt *ck) { return ck ? ck->errmsg : ""; }
const char *ftl_ckpt_dir(const ftl_ckpt *ck) { return ck ? ck->base : ""; }

/* ---- restore ----------------------------------------------------------------------------- */

enum { WHY_OK = 0, WHY_CORRUPT = 1, WHY_MISMATCH = 2, WHY_IO = 3 };

typedef struct plan_need {
  int shard;
  ck_need need;
} plan_need;

static int cmp_plan(const void *a, const void *b) {
  const plan_need *x = a, *y = b;
  if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
  return x->need.file_offset < y->need.file_offset ? -1 : x->need.file_offset > y->need.file_offset ? 1 : 0;
}

/* Host memory the restored rows of register i land in: the registered memory, or a temporary
 * host buffer for a device tensor (copied to the device after the agreement). */
typedef struct landing {
  void *host;
  size_t bytes;
  int temp;
} landing;

/* Loads manifest m into the registered memory on this rank. Returns WHY_*; msg says why. */
static int load_local(ftl_ckpt *ck, const ck_manifest *m, const char *sd, landing *land, int *missing_blobs, char *msg,
                      size_t msg_size) {
  ftl_diag d = {{0}};
  plan_need *plan = NULL;
  size_t np = 0, cap = 0;
  int why = WHY_OK;
  void *bounce = NULL;
  *missing_blobs = 0;
  for (int i = 0; i < ck->nregs; i++) {
    reg *r = &ck->regs[i];
    int mi = ck_manifest_find_item(m, r->item.name);
    if (mi < 0) {
      snprintf(msg, msg_size, "'%s' is registered but not in the checkpoint", r->item.name);
      why = WHY_MISMATCH;
      goto out;
    }
    const ck_item *it = &m->items[mi];
    if (it->dtype != r->item.dtype || it->ndim != r->item.ndim || it->kind != r->item.kind ||
        memcmp(it->shape, r->item.shape, sizeof it->shape) != 0) {
      snprintf(msg, msg_size, "'%s' is registered as %s %s with another shape than the checkpoint's %s %s",
               r->item.name, ck_kind_name(r->item.kind), ck_dtype_name(r->item.dtype), ck_kind_name(it->kind),
               ck_dtype_name(it->dtype));
      why = WHY_MISMATCH;
      goto out;
    }
    /* The rows this rank needs: what it holds. */
    int64_t a = r->held_start, b = r->held_start + r->held_count;
    for (int s = 0; s < m->world_size && a < b; s++) {
      const ck_shard *sh = &m->shards[s];
      if (it->kind == CK_KIND_BLOB_PER_RANK && s != ck->rank) continue;
      for (int p = 0; p < sh->npieces; p++) {
        const ck_piece *pc = &sh->pieces[p];
        if (pc->item != mi) continue;
        int64_t lo = pc->row_start > a ? pc->row_start : a;
        int64_t hi = pc->row_start + pc->row_count < b ? pc->row_start + pc->row_count : b;
        if (lo >= hi) continue;
        if (np == cap) {
          cap = cap ? cap * 2 : 64;
          plan_need *n = ftl_realloc(plan, cap * sizeof *n);
          if (!n) {
            snprintf(msg, msg_size, "out of memory planning the restore");
            why = WHY_IO;
            goto out;
          }
          plan = n;
        }
        plan[np].shard = s;
        plan[np].need.file_offset = pc->file_offset + (uint64_t)(lo - pc->row_start) * r->row_bytes;
        plan[np].need.size_bytes = (uint64_t)(hi - lo) * r->row_bytes;
        plan[np].need.dest = (char *)land[i].host + (size_t)(lo - a) * r->row_bytes;
        np++;
      }
    }
    if (it->kind == CK_KIND_BLOB_PER_RANK && r->held_count > 0 && ck->rank >= m->world_size) (*missing_blobs)++;
  }
  if (np > 1) qsort(plan, np, sizeof *plan, cmp_plan);
  bounce = ftl_malloc(ck->chunk);
  if (!bounce) {
    snprintf(msg, msg_size, "out of memory for the restore buffer");
    why = WHY_IO;
    goto out;
  }
  /* Shard s is verified (every byte hashed) by rank s % world, fused with that rank's reads of it;
   * the other ranks read only the ranges they need. The agreement that follows covers both. */
  size_t k = 0;
  for (int s = 0; s < m->world_size; s++) {
    size_t k0 = k;
    ck_need *needs = NULL;
    while (k < np && plan[k].shard == s)
      k++;
    int n = (int)(k - k0);
    if (n > 0) {
      needs = ftl_calloc((size_t)n, sizeof *needs);
      if (!needs) {
        snprintf(msg, msg_size, "out of memory planning the restore");
        why = WHY_IO;
        goto out;
      }
      for (int j = 0; j < n; j++)
        needs[j] = plan[k0 + (size_t)j].need;
    }
    ftl_err rc = FTL_OK;
    if (s % ck->world == ck->rank)
      rc = ck_shard_verify_read(sd, m, &m->shards[s], needs, n, ck->chunk, bounce, ck->chunk, &d);
    else if (n > 0)
      rc = ck_shard_read(sd, &m->shards[s], needs, n, &d);
    ftl_free(needs);
    if (rc) {
      copy_text(msg, msg_size, d.msg);
      why = (rc == FTL_ERR_CORRUPT || rc == FTL_ERR_NOTFOUND) ? WHY_CORRUPT : WHY_IO;
      goto out;
    }
  }
out:
  ftl_free(bounce);
  ftl_free(plan);
  return why;
}

/* Tries one committed step; returns WHY_* agreed by all ranks, with the first failing rank's
 * message in msg. */
static int try_step(ftl_ckpt *ck, int64_t step, landing *land, int *written_world, int *missing_blobs, char *msg,
                    size_t msg_size, ftl_err *coll_rc, ftl_diag *d) {
  int64_t deadline = ftl_deadline_after_ms(ck->timeout_ms);
  char sd[PATH_MAX];
  char *text = NULL;
  ck_manifest *m = NULL;
  verdict_rec mine, *all = ck->verdicts;
  int why = WHY_OK;
  memset(&mine, 0, sizeof mine);
  *coll_rc = FTL_OK;
  if (ck_step_dir(ck->base, step, sd, sizeof sd)) {
    snprintf(msg, msg_size, "path too long");
    return WHY_IO;
  }
  /* Rank 0 reads the manifest, everyone parses the same bytes. */
  struct {
    int64_t len;
    char err[CK_MSG];
  } head;
  memset(&head, 0, sizeof head);
  if (ck->rank == 0) {
    char mp[PATH_MAX];
    size_t len = 0;
    ftl_diag rd = {{0}};
    if (ftl_fmt(mp, sizeof mp, "%s/manifest.json", sd) || ftl_read_file(mp, CK_MANIFEST_MAX_BYTES, &text, &len, &rd)) {
      head.len = -1;
      copy_text(head.err, sizeof head.err, rd.msg);
    } else {
      head.len = (int64_t)len;
    }
  }
  *coll_rc = coll_bcast(ck, &head, (int)sizeof head, deadline, d);
  if (*coll_rc) goto out;
  if (head.len < 0) {
    snprintf(msg, msg_size, "%s", head.err);
    why = WHY_CORRUPT;
    goto out;
  }
  if (ck->rank != 0) {
    text = ftl_malloc((size_t)head.len + 1);
    if (!text) {
      *coll_rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory for the manifest");
      atomic_store(&ck->sync->broken, 1);
      goto out;
    }
  }
  *coll_rc = coll_bcast(ck, text, (int)head.len, deadline, d);
  if (*coll_rc) goto out;
  ftl_diag pd = {{0}};
  if (ck_manifest_parse(text, (size_t)head.len, &m, &pd)) {
    mine.why = WHY_CORRUPT;
    copy_text(mine.msg, sizeof mine.msg, pd.msg);
  } else if (m->step != step) {
    mine.why = WHY_CORRUPT;
    snprintf(mine.msg, sizeof mine.msg, "manifest: step %lld in the folder of step %lld", (long long)m->step,
             (long long)step);
  } else {
    *written_world = m->world_size;
    mine.why = load_local(ck, m, sd, land, missing_blobs, mine.msg, sizeof mine.msg);
  }
  *coll_rc = coll_allgather(ck, &mine, all, (int)sizeof mine, deadline, d);
  if (*coll_rc) goto out;
  /* Corruption outranks a mismatch (it is what marks a step bad), which outranks I/O. */
  int first = -1;
  for (int r = 0; r < ck->world; r++)
    if (all[r].why != WHY_OK && (first < 0 || (all[r].why == WHY_CORRUPT && all[first].why != WHY_CORRUPT))) first = r;
  if (first >= 0) {
    why = all[first].why;
    snprintf(msg, msg_size, "rank %d: %s", first, all[first].msg);
  }
out:
  ck_manifest_free(m);
  ftl_free(text);
  return why;
}

ftl_err ftl_ckpt_restore(ftl_ckpt *ck, ftl_ckpt_restore_info *info) {
  ftl_ckpt_restore_info local_info;
  ftl_diag d = {{0}};
  ftl_err rc = FTL_OK;
  landing *land = NULL;
  int64_t *steps = NULL;
  if (!ck) return FTL_ERR_INVAL;
  if (!info) info = &local_info;
  memset(info, 0, sizeof *info);
  info->step = -1;
  int64_t t0 = ftl_clock_ns();
  ck_sync *s = ck->sync;
  pthread_mutex_lock(&s->mu);
  rc = wait_idle_locked(s, ftl_deadline_after_ms(ck->timeout_ms));
  pthread_mutex_unlock(&s->mu);
  if (rc) return fail(ck, rc, "ftl_ckpt_restore: a checkpoint is still in flight");
  if (atomic_load(&s->broken)) return fail(ck, FTL_ERR_STATE, "ftl_ckpt_restore: the handle is broken");

  land = ftl_calloc((size_t)ck->nregs + 1, sizeof *land);
  if (!land) {
    rc = ftl_diag_fail(&d, FTL_ERR_NOMEM, "out of memory in restore");
    goto out;
  }
  for (int i = 0; i < ck->nregs; i++) {
    reg *r = &ck->regs[i];
    land[i].bytes = (size_t)(r->row_bytes * (uint64_t)r->held_count);
    if (r->mem == FTL_CKPT_DEVICE && land[i].bytes > 0) {
      land[i].host = ftl_malloc(land[i].bytes);
      land[i].temp = 1;
      if (!land[i].host) {
        rc = ftl_diag_fail(&d, FTL_ERR_NOMEM, "out of memory staging '%s' for the device", r->item.name);
        goto out;
      }
    } else {
      land[i].host = r->data;
    }
  }

  /* Rank 0 lists the committed steps; everyone gets the same list. */
  int64_t n = 0;
  ck_step_entry *v = NULL;
  int nv = 0;
  ftl_diag ld = {{0}};
  if (ck->rank == 0) {
    if (ck_list_steps(ck->base, &v, &nv, &ld))
      n = -1;
    else
      for (int i = 0; i < nv; i++)
        n += v[i].state == CK_STEP_COMMITTED;
  }
  int64_t deadline = ftl_deadline_after_ms(ck->timeout_ms);
  rc = coll_bcast(ck, &n, (int)sizeof n, deadline, &d);
  if (rc) {
    ftl_free(v);
    goto out;
  }
  if (n < 0) {
    ftl_free(v);
    rc = ftl_diag_fail(&d, FTL_ERR_IO, "cannot list checkpoints%s%s", ck->rank == 0 ? ": " : " (see rank 0)",
                       ck->rank == 0 ? ld.msg : "");
    goto out;
  }
  steps = ftl_calloc((size_t)n + 1, sizeof *steps);
  if (!steps) {
    ftl_free(v);
    atomic_store(&s->broken, 1);
    rc = ftl_diag_fail(&d, FTL_ERR_NOMEM, "out of memory in restore");
    goto out;
  }
  if (ck->rank == 0)
    for (int i = 0, j = 0; i < nv; i++)
      if (v[i].state == CK_STEP_COMMITTED) steps[j++] = v[i].step;
  ftl_free(v);
  rc = coll_bcast(ck, steps, (int)(sizeof *steps * (size_t)n), deadline, &d);
  if (rc) goto out;
  info->committed_found = (int)n;

  size_t used = 0;
  for (int64_t i = 0; i < n; i++) {
    char why_msg[CK_MSG + 32] = "";
    int written = 0, missing = 0;
    ftl_err crc = FTL_OK;
    int why = try_step(ck, steps[i], land, &written, &missing, why_msg, sizeof why_msg, &crc, &d);
    if (crc) {
      rc = crc;
      goto out;
    }
    if (why == WHY_OK) {
      for (int k = 0; k < ck->nregs && !rc; k++)
        if (land[k].temp) rc = ck_dev_copy_to_device(ck->regs[k].data, land[k].host, land[k].bytes, &d);
      if (rc) goto out;
      info->step = steps[i];
      info->written_world_size = written;
      info->per_rank_blobs_missing = missing;
      ck->last_step = steps[i];
      break;
    }
    FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld cannot be restored: %s", (long long)steps[i], why_msg);
    int n_written = snprintf(info->errmsg + used, sizeof info->errmsg - used, "%sstep %lld: %s", used ? "; " : "",
                             (long long)steps[i], why_msg);
    if (n_written > 0) used += (size_t)n_written < sizeof info->errmsg - used ? (size_t)n_written : 0;
    if (why == WHY_CORRUPT) {
      info->bad_steps++;
      if (ck->rank == 0) {
        ftl_diag bd = {{0}};
        if (ck_mark_bad(ck->base, steps[i], why_msg, &bd))
          FTL_LOG(FTL_LOG_WARN, "ckpt", "could not mark step %lld bad: %s", (long long)steps[i], bd.msg);
        emit(ck, "ckpt_bad", json_pack("{sI ss}", "step", (json_int_t)steps[i], "reason", why_msg));
      }
    }
  }
  if (info->step < 0) {
    if (n == 0) {
      rc = FTL_ERR_NOTFOUND;
      snprintf(info->errmsg, sizeof info->errmsg, "no committed checkpoint in %.900s: a fresh start", ck->base);
    } else {
      rc = FTL_ERR_CORRUPT;
      char tmp[sizeof info->errmsg];
      snprintf(tmp, sizeof tmp, "%s", info->errmsg);
      snprintf(info->errmsg, sizeof info->errmsg, "%lld committed checkpoint(s) in %.200s, none usable: %.700s",
               (long long)n, ck->base, tmp);
      FTL_LOG(FTL_LOG_ERROR, "ckpt", "%s", info->errmsg);
    }
    ftl_diag_fail(&d, rc, "%s", info->errmsg);
  }
out:
  info->restore_ms = ms_since(t0);
  if (rc == FTL_OK) {
    FTL_LOG(FTL_LOG_INFO, "ckpt", "restored step %lld (written by %d ranks) in %.1f ms", (long long)info->step,
            info->written_world_size, info->restore_ms);
    emit(ck, "ckpt_restored",
         json_pack("{sI si si sf}", "step", (json_int_t)info->step, "written_world_size", info->written_world_size,
                   "bad_steps", info->bad_steps, "restore_ms", info->restore_ms));
  } else if (rc == FTL_ERR_NOTFOUND) {
    emit(ck, "ckpt_fresh_start", json_pack("{si}", "committed_found", 0));
  } else {
    if (!info->errmsg[0]) snprintf(info->errmsg, sizeof info->errmsg, "%s", d.msg);
    fail(ck, rc, d.msg);
    emit(ck, "ckpt_restore_failed", json_pack("{si ss ss}", "err", (int)rc, "code", ftl_err_name(rc), "msg", d.msg));
  }
  if (land)
    for (int i = 0; i < ck->nregs; i++)
      if (land[i].temp) ftl_free(land[i].host);
  ftl_free(land);
  ftl_free(steps);
  return rc;
}

/* ---- create / destroy -------------------------------------------------------------------- */

ftl_err ftl_ckpt_create(ftl_ctx *ctx, const ftl_ckpt_options *opts, ftl_ckpt **out) {
  ftl_ckpt_options o;
  ftl_diag d = {{0}};
  ftl_err rc = FTL_OK;
  ftl_ckpt *ck = NULL;
  pthread_condattr_t ca;
  int mu_ok = 0, cv_ok = 0;
  if (!ctx || !out) return FTL_ERR_INVAL;
  *out = NULL;
  if (opts)
    o = *opts;
  else
    ftl_ckpt_options_init(&o);
  if (o.timeout_ms <= 0) o.timeout_ms = CK_DEFAULT_TIMEOUT_MS;
  if (o.chunk_bytes < 4096) o.chunk_bytes = CK_DEFAULT_CHUNK;
  if (o.keep <= 0) o.keep = CK_DEFAULT_KEEP;
  if (o.keep < 2) o.keep = 2;
  const ftl_info *inf = ftl_ctx_info(ctx);
  MPI_Comm *gang = ftl_ctx_mpi_comm(ctx);
  const char *run_dir = o.run_dir ? o.run_dir : (inf ? inf->run_dir : NULL);
  /* Every rank evaluates the same inputs, so every rank returns the same error here. */
  if (!inf || !gang) return FTL_ERR_STATE;
  if (!run_dir || !*run_dir) return FTL_ERR_INVAL;

  ck = ftl_calloc(1, sizeof *ck);
  if (!ck) return FTL_ERR_NOMEM;
  ck->sync = ftl_calloc(1, sizeof *ck->sync);
  ck->bounce = ftl_malloc(CK_BOUNCE_BYTES);
  if (!ck->sync || !ck->bounce) {
    rc = FTL_ERR_NOMEM;
    goto out;
  }
  ck->ctx = ctx;
  ck->keep = o.keep;
  ck->timeout_ms = o.timeout_ms;
  ck->chunk = o.chunk_bytes;
  ck->last_step = -1;
  ck->sync->last.step = -1;
  if (ftl_fmt(ck->base, sizeof ck->base, "%s/checkpoints", run_dir)) {
    rc = FTL_ERR_RANGE;
    goto out;
  }
  rc = ftl_mkdir_p(ck->base, &d);
  if (rc) FTL_LOG(FTL_LOG_ERROR, "ckpt", "%s", d.msg);
  ck->hdrs = ftl_calloc((size_t)(inf->world_size > 0 ? inf->world_size : 1), sizeof *ck->hdrs);
  ck->verdicts = ftl_calloc((size_t)(inf->world_size > 0 ? inf->world_size : 1), sizeof *ck->verdicts);
  if (!rc && (!ck->hdrs || !ck->verdicts)) rc = FTL_ERR_NOMEM;
  /* Agree on the folder before anything collective depends on it. Non-blocking collectives with
   * the handle's deadline; after a timeout the pending request still points into the handle, so
   * the handle is deliberately leaked rather than freed under it. */
  int64_t deadline = ftl_deadline_after_ms(ck->timeout_ms);
  MPI_Request req;
  ftl_err crc = FTL_OK;
  ck->setup_ok[0] = rc == FTL_OK;
  if (MPI_Iallreduce(&ck->setup_ok[0], &ck->setup_ok[1], 1, MPI_INT, MPI_MIN, *gang, &req) != MPI_SUCCESS)
    crc = FTL_ERR_MPI;
  else
    crc = wait_req(ck, &req, deadline, "the checkpoint set-up allreduce", &d);
  if (crc == FTL_ERR_TIMEOUT) {
    FTL_LOG(FTL_LOG_ERROR, "ckpt", "%s", d.msg);
    return crc;
  }
  if (crc) {
    rc = crc;
    goto out;
  }
  if (!ck->setup_ok[1]) {
    rc = rc ? rc : FTL_ERR_IO;
    goto out;
  }
  if (MPI_Comm_idup(*gang, &ck->comm, &req) != MPI_SUCCESS) {
    rc = FTL_ERR_MPI;
    goto out;
  }
  crc = wait_req(ck, &req, deadline, "the checkpoint communicator's MPI_Comm_idup", &d);
  if (crc == FTL_ERR_TIMEOUT) {
    FTL_LOG(FTL_LOG_ERROR, "ckpt", "%s", d.msg);
    return crc;
  }
  if (crc) {
    rc = crc;
    goto out;
  }
  ck->have_comm = 1;
  MPI_Comm_set_errhandler(ck->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(ck->comm, &ck->rank);
  MPI_Comm_size(ck->comm, &ck->world);
  if (ck->world != inf->world_size) {
    rc = FTL_ERR_STATE;
    goto out;
  }
  ck_fault_from_env();
  if (pthread_mutex_init(&ck->sync->mu, NULL) != 0) {
    rc = FTL_ERR_NOMEM;
    goto out;
  }
  mu_ok = 1;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  cv_ok = pthread_cond_init(&ck->sync->cv, &ca) == 0;
  pthread_condattr_destroy(&ca);
  if (!cv_ok) {
    rc = FTL_ERR_NOMEM;
    goto out;
  }
  if (pthread_create(&ck->thread, NULL, writer_main, ck) != 0) {
    rc = FTL_ERR_NOMEM;
    goto out;
  }
  ck->thread_started = 1;
  *out = ck;
  ck = NULL;
out:
  if (ck) {
    if (cv_ok) pthread_cond_destroy(&ck->sync->cv);
    if (mu_ok) pthread_mutex_destroy(&ck->sync->mu);
    if (ck->have_comm) MPI_Comm_free(&ck->comm);
    ftl_free(ck->hdrs);
    ftl_free(ck->verdicts);
    ftl_free(ck->bounce);
    ftl_free(ck->sync);
    ftl_free(ck);
  }
  return rc;
}

ftl_err ftl_ckpt_destroy(ftl_ckpt *ck) {
  if (!ck) return FTL_OK;
  ck_sync *s = ck->sync;
  ftl_err rc = FTL_OK;
  pthread_mutex_lock(&s->mu);
  rc = wait_idle_locked(s, ftl_deadline_after_ms(ck->timeout_ms));
  s->stop = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  if (rc) {
    /* The writer is stuck in a collective past its deadline: it cannot be joined safely, so it is
     * detached and the handle's memory is deliberately left to it. */
    pthread_detach(ck->thread);
    return fail(ck, FTL_ERR_TIMEOUT, "ftl_ckpt_destroy: the writer did not finish in time");
  }
  if (ck->thread_started) pthread_join(ck->thread, NULL);
  if (ck->have_comm && !atomic_load(&s->broken)) MPI_Comm_free(&ck->comm);
  ck_dev_close(ck->dev);
  free_stage(ck);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  ftl_free(ck->bounce);
  ftl_free(ck->hdrs);
  ftl_free(ck->verdicts);
  ftl_free(ck->mine_recs);
  ftl_free(ck->recs);
  ftl_free(ck->regs);
  ftl_free(ck->sync);
  ftl_free(ck);
  return FTL_OK;
}
