/* checkpoint/ckpt_state.c: what a checkpoint saves. The registry of tensors and blobs (which rows
 * of each this rank holds and which it writes), the staging buffer they are copied into
 * (allocated once, pre-faulted and, with device tensors, pinned), and the snapshot, the copy the
 * training loop waits for.
 *
 * Not here: writing the staged bytes (ckpt_writer.c), loading them back (ckpt_restore.c), CUDA
 * calls (device.c). Runs on the training thread only, never while a checkpoint is in flight.
 *
 * Map: split rows; registration; registry signature; staging (prepare); snapshot. */
#include <stdio.h>
#include <string.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/shard.h"

void ftl_ckpt_split_rows(int64_t rows, int rank, int world_size, int64_t *start, int64_t *count) {
  ck_split_rows(rows, rank, world_size, start, count);
}

/* ---- registration ------------------------------------------------------------------------ */

static ftl_err add_item(ftl_ckpt *ck, const ck_item *it, void *data, ftl_ckpt_mem mem) {
  ftl_diag d = {{0}};
  if (atomic_load(&ck->sync->in_flight))
    return ck_fail(ck, FTL_ERR_STATE, "cannot register state while a checkpoint is in flight");
  for (int i = 0; i < ck->nregs; i++)
    if (strcmp(ck->regs[i].item.name, it->name) == 0) {
      ftl_diag_fail(&d, FTL_ERR_INVAL, "'%s' is registered twice", it->name);
      return ck_fail(ck, FTL_ERR_INVAL, d.msg);
    }
  int ovf = 0;
  uint64_t rb = ck_item_row_bytes(it, &ovf), total = 0;
  int64_t rows = ck_item_rows(it);
  if (ovf || __builtin_mul_overflow(rb, (uint64_t)rows, &total) || total > (uint64_t)SIZE_MAX / 2) {
    ftl_diag_fail(&d, FTL_ERR_RANGE, "'%s': shape too large", it->name);
    return ck_fail(ck, FTL_ERR_RANGE, d.msg);
  }
  if (ck->nregs == ck->cap) {
    int ncap = ck->cap ? ck->cap * 2 : 16;
    reg *n = ftl_realloc(ck->regs, (size_t)ncap * sizeof *n);
    if (!n) return ck_fail(ck, FTL_ERR_NOMEM, "out of memory registering state");
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

/* An item with its name (already checked), dtype, kind and rank; the shape is the caller's. */
static void item_init(ck_item *it, const char *name, ftl_dtype dtype, ck_kind kind, int ndim) {
  memset(it, 0, sizeof *it);
  snprintf(it->name, sizeof it->name, "%s", name);
  it->dtype = dtype;
  it->kind = kind;
  it->ndim = ndim;
}

ftl_err ftl_ckpt_add_tensor(ftl_ckpt *ck, const char *name, void *data, ftl_dtype dtype, int ndim,
                            const int64_t *global_shape, ftl_ckpt_layout layout, ftl_ckpt_mem mem) {
  ftl_diag d = {{0}};
  if (!ck || !name) return FTL_ERR_INVAL;
  if (!ck_name_ok(name)) {
    ftl_diag_fail(&d, FTL_ERR_INVAL, "tensor name '%s' is not 1-127 bytes of [A-Za-z0-9_.-]", name);
    return ck_fail(ck, FTL_ERR_INVAL, d.msg);
  }
  if (ftl_dtype_size(dtype) == 0 || ndim < 0 || ndim > FTL_CKPT_MAX_DIMS || (ndim > 0 && !global_shape) ||
      (layout != FTL_CKPT_SPLIT && layout != FTL_CKPT_REPLICATED) || (mem != FTL_CKPT_HOST && mem != FTL_CKPT_DEVICE)) {
    ftl_diag_fail(&d, FTL_ERR_INVAL, "tensor '%s': bad dtype, ndim, shape, layout or memory kind", name);
    return ck_fail(ck, FTL_ERR_INVAL, d.msg);
  }
  if (mem == FTL_CKPT_DEVICE && !ck_dev_compiled()) {
    ftl_diag_fail(&d, FTL_ERR_UNSUPPORTED, "tensor '%s': device tensors need a build with CUDA", name);
    return ck_fail(ck, FTL_ERR_UNSUPPORTED, d.msg);
  }
  ck_item it;
  item_init(&it, name, dtype, layout == FTL_CKPT_SPLIT ? CK_KIND_SPLIT : CK_KIND_REPLICATED, ndim);
  for (int k = 0; k < ndim; k++) {
    if (global_shape[k] < 0) {
      ftl_diag_fail(&d, FTL_ERR_INVAL, "tensor '%s': negative dimension", name);
      return ck_fail(ck, FTL_ERR_INVAL, d.msg);
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
      return ck_fail(ck, FTL_ERR_INVAL, d.msg);
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
    return ck_fail(ck, FTL_ERR_INVAL, d.msg);
  }
  ck_item it;
  item_init(&it, name, FTL_DTYPE_U8, scope == FTL_CKPT_BLOB_GLOBAL ? CK_KIND_BLOB_GLOBAL : CK_KIND_BLOB_PER_RANK, 1);
  it.shape[0] = (int64_t)size_bytes;
  return add_item(ck, &it, data, FTL_CKPT_HOST);
}

uint64_t ck_registry_signature(const ftl_ckpt *ck) {
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

void ck_free_stage(ftl_ckpt *ck) {
  if (ck->stage_pinned) ck_dev_unpin(ck->stage);
  ck->stage_pinned = 0;
  ftl_free(ck->stage);
  ck->stage = NULL;
  ck->stage_bytes = 0;
}

void ftl_ckpt_set_stream(ftl_ckpt *ck, void *cuda_stream) { ck->user_stream = cuda_stream; }

ftl_err ftl_ckpt_prepare(ftl_ckpt *ck) {
  ftl_diag d = {{0}};
  if (!ck) return FTL_ERR_INVAL;
  if (atomic_load(&ck->sync->in_flight))
    return ck_fail(ck, FTL_ERR_STATE, "ftl_ckpt_prepare: a checkpoint is in flight");
  size_t off = 0;
  for (int i = 0; i < ck->nregs; i++) {
    reg *r = &ck->regs[i];
    r->stage_off = off;
    off += (size_t)(r->row_bytes * (uint64_t)r->write_count);
    off = (off + 63) & ~(size_t)63;
  }
  if (off == 0) off = 64;
  if (off != ck->stage_bytes) {
    ck_free_stage(ck);
    ck->stage = ftl_malloc(off);
    if (!ck->stage) {
      ftl_diag_fail(&d, FTL_ERR_NOMEM, "cannot allocate %zu bytes of staging", off);
      return ck_fail(ck, FTL_ERR_NOMEM, d.msg);
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
    return ck_fail(ck, FTL_ERR_NOMEM, "cannot allocate the writer's piece records");
  }
  if (has_device(ck)) {
    ftl_err rc = FTL_OK;
    if (!ck->dev) rc = ck_dev_open(&ck->dev, &d);
    if (!rc && !ck->stage_pinned) {
      rc = ck_dev_pin(ck->stage, ck->stage_bytes, &d);
      if (!rc) ck->stage_pinned = 1;
    }
    if (rc) return ck_fail(ck, rc, d.msg);
  }
  ck->registry_frozen = 1;
  return FTL_OK;
}

ftl_err ck_snapshot(ftl_ckpt *ck, ftl_diag *d) {
  int device = 0;
  /* The copies run on the checkpoint's own non-blocking stream: order them after the caller's
   * work first, or they could read tensors a kernel is still writing (docs/gpu.md). */
  if (has_device(ck)) {
    ftl_err rc = ck_dev_after(ck->dev, ck->user_stream, d);
    if (rc) return rc;
  }
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
  return device ? ck_dev_sync(ck->dev, ftl_deadline_after_ms(ck->timeout_ms), d) : FTL_OK;
}
