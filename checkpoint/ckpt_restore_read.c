/* checkpoint/ckpt_restore_read.c: one rank's reads of a step in a restore (ckpt_restore_read.h):
 * which copy of each shard it reads (the fastest verified one: this host's L1 copy, else the L2 copy
 * this host keeps, else one fetched from a live host's memory by ckpt_l2.c, else the run
 * directory's), the plan of the byte ranges it needs and where they land, and the reads fused with
 * the verification of the shards assigned to it.
 *
 * Map: levels (which copy); plan and load on this rank. */
#include "checkpoint/ckpt_restore_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/catalog.h"
#include "checkpoint/h5.h"
#include "core/fs.h"

/* ---- levels ------------------------------------------------------------------------------ */

/* What a restore reads when a shard's L1 copy is passed over: its L2 copy when the manifest names
 * one, else the run directory's (none for a step saved below L3). */
static const char *next_copy(const ck_manifest *m, const ck_shard *sh) {
  if (!m->l3) return sh->l2_host[0] ? "trying its L2 copy (the step has none in the run directory)"
                                    : "the step has no other copy (saved at l1)";
  return sh->l2_host[0] ? "trying its L2 copy, then the run directory's" : "reading the run directory's";
}

/* What a restore reads when a shard's L2 copy is passed over. */
static const char *after_l2(const ck_manifest *m) {
  return m->l3 ? "reading the run directory's" : "the step has no copy in the run directory (saved at l2)";
}

/* Whether this rank reads shard s of m from its host's L1 copy (checkpoint/levels.h): the manifest
 * names this host for it, and the file is there at the manifest's size. The copy is verified in
 * full before its bytes count; a copy that is missing, short or fails is passed over for the run
 * directory's, named in the log. dir gets the copy's folder. */
int ck_l1_copy_of(const ftl_ckpt *ck, const ck_manifest *m, int s, char *dir, size_t size, int quiet) {
  const ck_shard *sh = &m->shards[s];
  if (!ck->l1.dir[0] || !sh->l1_host[0] || strcmp(sh->l1_host, ftl_hostname()) != 0) return 0;
  char path[PATH_MAX];
  struct stat st;
  if (ck_l1_step_dir(&ck->l1, m->step, dir, size) || ftl_fmt(path, sizeof path, "%s/%s", dir, sh->file)) return 0;
  if (lstat(path, &st) != 0) {
    if (!quiet)
      FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld: the L1 copy %s is gone (%s): %s", (long long)m->step, path,
              strerror(errno), next_copy(m, sh));
    return 0;
  }
  if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != sh->size_bytes) {
    if (!quiet)
      FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld: the L1 copy %s has %lld bytes, the manifest %llu: %s", (long long)m->step,
              path, (long long)st.st_size, (unsigned long long)sh->size_bytes, next_copy(m, sh));
    return 0;
  }
  return 1;
}

/* The L2-level copy of shard s this rank reads, if any: one fetched from another host (got[s]: its
 * L2 copy or its owner's L1 copy, in this rank's L1 folder's partner/ under its fetched name), or
 * the L2 copy this host keeps itself when the manifest names this host for it. dir gets the copy's
 * folder and *copy the shard with the copy's file name. Missing or short copies kept here are
 * named in the log unless quiet. */
int ck_l2_copy_of(const ftl_ckpt *ck, const ck_manifest *m, int s, const unsigned char *got, char *dir, size_t size,
                      ck_shard *copy, int quiet) {
  const ck_shard *sh = &m->shards[s];
  *copy = *sh;
  if (!ck->l1.dir[0] || ck_l2_step_dir(&ck->l1, m->step, dir, size)) return 0;
  if (got && got[s]) return ck_l2_fetched_name(s, ck->rank, copy->file, sizeof copy->file) == FTL_OK;
  if (!sh->l2_host[0] || strcmp(sh->l2_host, ftl_hostname()) != 0) return 0;
  char path[PATH_MAX];
  struct stat st;
  if (ftl_fmt(path, sizeof path, "%s/%s", dir, sh->file)) return 0;
  if (lstat(path, &st) != 0) {
    if (!quiet)
      FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld: the L2 copy %s is gone (%s): %s", (long long)m->step, path,
              strerror(errno), after_l2(m));
    return 0;
  }
  if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != sh->size_bytes) {
    if (!quiet)
      FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld: the L2 copy %s has %lld bytes, the manifest %llu: %s", (long long)m->step,
              path, (long long)st.st_size, (unsigned long long)sh->size_bytes, after_l2(m));
    return 0;
  }
  return 1;
}



void ck_free_plan(ck_read_plan *p) {
  ftl_free(p->needs);
  ftl_free(p->first);
  p->needs = NULL;
  p->first = NULL;
}

/* Whether this rank reads any bytes of shard s (or verifies it: shard s is rank s % world's). */
static int needs_shard(const ftl_ckpt *ck, const ck_read_plan *p, int s) {
  return s % ck->world == ck->rank || (p->first && p->first[s + 1] > p->first[s]);
}

/* What this host's folder holds of shard s for the other ranks (CK_HOLD_*): the copy this rank
 * would read itself, its own L1 copy or the L2 copy it keeps, each where the manifest places it. */
static int host_holds(const ftl_ckpt *ck, const ck_manifest *m, int s) {
  char dir[PATH_MAX];
  ck_shard copy;
  if (ck_l1_copy_of(ck, m, s, dir, sizeof dir, 1)) return CK_HOLD_L1;
  if (ck_l2_copy_of(ck, m, s, NULL, dir, sizeof dir, &copy, 1)) return CK_HOLD_L2;
  return CK_HOLD_NONE;
}

/* Restore's fetch, on every rank (collective): the shards this rank needs and its host's folder
 * holds no copy of are fetched from a live rank whose host holds one, its L1 or its L2 copy
 * (ckpt_l2.c), into the plan's destinations; every rank says what its host holds. got:
 * m->world_size entries. Only a gang failure is returned. */
ftl_err ck_fetch_l2_copies(ftl_ckpt *ck, const ck_manifest *m, const ck_read_plan *p, unsigned char *got, int64_t deadline,
                        ftl_diag *d) {
  int W = m->world_size;
  unsigned char *want = ftl_calloc((size_t)W, 1), *hold = ftl_calloc((size_t)W, 1);
  int *none = ftl_calloc((size_t)W + 1, sizeof *none);
  if (!want || !hold || !none) {
    ftl_free(want);
    ftl_free(hold);
    ftl_free(none);
    atomic_store(&ck->sync->broken, 1);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory for the L2 requests");
  }
  /* Without a plan (it failed on this rank) this rank asks for nothing but still serves. A rank
   * without L1 asks for nothing either: a fetched copy's metadata goes to its L1 folder. */
  for (int s = 0; s < W; s++) {
    const ck_shard *sh = &m->shards[s];
    hold[s] = (unsigned char)host_holds(ck, m, s);
    want[s] = p->first && ck->l1.dir[0] && (sh->l1_host[0] || sh->l2_host[0]) && !hold[s] && needs_shard(ck, p, s);
  }
  ftl_err rc = ck_l2_fetch(ck, m, want, hold, p->needs, p->first ? p->first : none, got, deadline, d);
  ftl_free(none);
  ftl_free(want);
  ftl_free(hold);
  return rc;
}

/* Removes the copies fetched for this step (they served this restore only). */
void ck_drop_fetched(const ftl_ckpt *ck, const ck_manifest *m, const unsigned char *got) {
  char dir[PATH_MAX], name[CK_FILE_MAX], path[PATH_MAX];
  if (!got || !ck->l1.dir[0] || ck_l2_step_dir(&ck->l1, m->step, dir, sizeof dir)) return;
  for (int s = 0; s < m->world_size; s++)
    if (got[s] && ck_l2_fetched_name(s, ck->rank, name, sizeof name) == FTL_OK &&
        ftl_fmt(path, sizeof path, "%s/%s", dir, name) == FTL_OK)
      core_fs_table.unlink(path);
  /* The folder too once empty (it fails while copies are there): a fetch into a step that has no
   * L2 copies made it, and the step's folder is removed only once empty (levels.c). */
  core_fs_table.unlinkat(AT_FDCWD, dir, AT_REMOVEDIR);
}

/* ---- plan and load on this rank ---------------------------------------------------------- */



/* Copies the landed bytes of device tensors to the device: after the caller's work on its stream
 * (a kernel may still read the old values), and waited for before restore returns, so the data
 * is in place for whatever the caller enqueues next on any stream (docs/gpu.md). */
ftl_err ck_restore_to_device(ftl_ckpt *ck, const ck_landing *land, ftl_diag *d) {
  int any = 0;
  for (int k = 0; k < ck->nregs; k++) any |= land[k].temp;
  if (!any) return FTL_OK;
  ftl_err rc = ck->dev ? FTL_OK : ck_dev_open(&ck->dev, d);
  if (!rc) rc = ck_dev_after(ck->dev, ck->user_stream, d);
  for (int k = 0; k < ck->nregs && !rc; k++)
    if (land[k].temp) rc = ck_dev_copy_to_device_async(ck->dev, ck->regs[k].data, land[k].host, land[k].bytes, d);
  /* Even after a failed enqueue, wait for what was enqueued: the ck_landing buffers are freed next. */
  if (!ck->dev) return rc;
  ftl_diag sd = {{0}};
  ftl_err sync_rc = ck_dev_sync(ck->dev, ftl_deadline_after_ms(ck->timeout_ms), rc ? &sd : d);
  return rc ? rc : sync_rc;
}

typedef struct plan_need {
  int shard;
  ck_need need;
} plan_need;

static int cmp_plan(const void *a, const void *b) {
  const plan_need *x = a, *y = b;
  if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
  return x->need.file_offset < y->need.file_offset ? -1 : x->need.file_offset > y->need.file_offset ? 1 : 0;
}

/* Plans what this rank reads of manifest m: the rows it holds of every registered item, from
 * whichever shards have them, ck_landing in land. Returns WHY_*; msg says why. */
int ck_plan_local(ftl_ckpt *ck, const ck_manifest *m, const ck_landing *land, ck_read_plan *out, int *missing_blobs,
                      char *msg, size_t msg_size) {
  plan_need *plan = NULL;
  size_t np = 0, cap = 0;
  int why = WHY_OK;
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
  out->needs = ftl_calloc(np + 1, sizeof *out->needs);
  out->first = ftl_calloc((size_t)m->world_size + 1, sizeof *out->first);
  if (!out->needs || !out->first) {
    ck_free_plan(out);
    snprintf(msg, msg_size, "out of memory planning the restore");
    why = WHY_IO;
    goto out;
  }
  for (size_t k = 0, j = 0; k <= (size_t)m->world_size; k++) {
    while (j < np && plan[j].shard < (int)k) j++;
    out->first[k] = (int)j;
  }
  for (size_t k = 0; k < np; k++) out->needs[k] = plan[k].need;
out:
  ftl_free(plan);
  return why;
}

/* Loads manifest m into the registered memory on this rank, as planned (shards already fetched and
 * verified from L2, l2_got, are in place). Returns WHY_*; msg says why. */
int ck_load_local(ftl_ckpt *ck, const ck_manifest *m, const char *sd, const unsigned char *l2_got,
                      const ck_read_plan *pl, char *msg, size_t msg_size) {
  ftl_diag d = {{0}};
  int why = WHY_OK;
  void *bounce = ftl_malloc(ck->chunk);
  if (!bounce) {
    snprintf(msg, msg_size, "out of memory for the restore buffer");
    why = WHY_IO;
    goto out;
  }
  /* Shard s is verified (every byte hashed) by rank s % world, fused with that rank's reads of it;
   * the other ranks read only the ranges they need. The agreement that follows covers both. */
  for (int s = 0; s < m->world_size; s++) {
    const ck_need *needs = pl->needs + pl->first[s];
    int n = pl->first[s + 1] - pl->first[s];
    ftl_err rc = FTL_OK;
    char l1d[PATH_MAX];
    int assigned = s % ck->world == ck->rank, used_l1 = 0;
    /* A shard fetched from L2 was verified as it arrived, and its bytes are in place; its L1 copy
     * is still looked at first, so the log says what became of it. */
    int fetched = l2_got && l2_got[s];
    if ((assigned || n > 0) && ck_l1_copy_of(ck, m, s, l1d, sizeof l1d, 0) && !fetched) {
      /* Every byte of the copy hashed against the manifest before any of it counts. */
      ftl_diag ld = {{0}};
      if (ck_shard_verify_read(l1d, m, &m->shards[s], needs, n, ck->chunk, bounce, ck->chunk, &ld) == FTL_OK) {
        used_l1 = 1;
      } else {
        FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld: the L1 copy %s/%s failed verification (%s): %s", (long long)m->step,
                l1d, m->shards[s].file, ld.msg, next_copy(m, &m->shards[s]));
      }
    }
    ck_shard l2sh;
    char l2d[PATH_MAX];
    int used_l2 = fetched;
    if (!used_l1 && !used_l2 && (assigned || n > 0) && ck_l2_copy_of(ck, m, s, l2_got, l2d, sizeof l2d, &l2sh, 0)) {
      ftl_diag ld = {{0}};
      if (ck_shard_verify_read(l2d, m, &l2sh, needs, n, ck->chunk, bounce, ck->chunk, &ld) == FTL_OK)
        used_l2 = 1;
      else
        FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld: the L2 copy %s/%s (of %s, kept on %s) failed verification (%s): %s",
                (long long)m->step, l2d, l2sh.file, m->shards[s].file, m->shards[s].l2_host, ld.msg, after_l2(m));
    }
    if (used_l1)
      ck->restore_l1++;
    else if (used_l2)
      ck->restore_l2++;
    else if (!m->l3 && (assigned || n > 0))
      rc = ftl_diag_fail(&d, FTL_ERR_NOTFOUND, "%s: no verified L1 or L2 copy on this host (the step was saved at %s)",
                         m->shards[s].file, m->shards[s].l2_host[0] ? "l2" : "l1");
    else if (assigned)
      rc = ck_shard_verify_read(sd, m, &m->shards[s], needs, n, ck->chunk, bounce, ck->chunk, &d);
    else if (n > 0)
      rc = ck_shard_read(sd, &m->shards[s], needs, n, &d);
    if (!used_l1 && !used_l2 && (assigned || n > 0) && m->l3) ck->restore_l3++;
    if (rc) {
      ck_copy_text(msg, msg_size, d.msg);
      /* Only proof condemns a step: a checksum or size that disagrees, a shard that is not a
       * regular file. A missing shard or a failed read may be a storage blip: the step stays. */
      why = rc == FTL_ERR_CORRUPT ? WHY_CORRUPT : WHY_IO;
      goto out;
    }
  }
out:
  ftl_free(bounce);
  return why;
}

