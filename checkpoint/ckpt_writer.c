/* checkpoint/ckpt_writer.c: the writer thread that each rank runs, from a job handed over by
 * ftl_ckpt_save (ckpt_save.c) to its commit: the commit protocol those threads follow and the keep
 * rule after a commit.
 *
 * Commit protocol (the writer threads of all ranks, on the handle's own communicator, through the
 * collectives with deadlines of ckpt_coll.c, so the training loop never takes part):
 *   1. rank 0 removes a stale manifest of the same step, if any; barrier (no shard of the new
 *      step can be renamed into place while an old manifest could still commit the folder);
 *   2. each rank writes its shard (shard.c): tmp file, XXH3 on the way, fsync, rename, fsync dir;
 *   3. allgather of a fixed header (ok, error, registration signature, size, checksum, message):
 *      every rank learns the same verdict (the commit agreement);
 *   3b. with L2 on (ckpt_l2.c): each rank streams its shard to its partner rank on another host,
 *      which verifies and keeps it; a gather tells rank 0 which copies are in place;
 *   4. if all succeeded: gather of the piece records to rank 0, which writes manifest.json
 *      (tmp, fsync, rename, fsync dir: the commit) and broadcasts the outcome;
 *   5. rank 0 deletes what the keep rule lets go (never leaving fewer than two committed).
 * A step saved below L3 (ftl_ckpt_save_level) runs the same phases on this host's L1 folder
 * instead of the run directory: the shard written there, L2 copies only at level 2, and the
 * commit (commit_l1) a copy of the manifest in every host's L1 folder; no keep rule runs on the run
 * directory, and L1 keeps the newest step plus the newest one complete at L2.
 * A failure anywhere abandons that step on every rank (its shards are removed, earlier steps are
 * untouched) and is reported through ftl_ckpt_last()/ftl_ckpt_wait() and an event.
 *
 * Not here: the save API and the hand-over (ckpt_save.c), the registry and staging (ckpt_state.c),
 * MPI (ckpt_coll.c), file formats (shard.c, manifest.c), restore (ckpt_restore.c), deciding when
 * to save.
 *
 * Map: manifest; garbage collection; one job, phase by phase; the thread. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkpoint/catalog.h"
#include "checkpoint/ckpt_internal.h"
#include "checkpoint/shard.h"
#include "core/fence.h"
#include "core/fs.h"

/* ---- manifest and garbage collection ----------------------------------------------------- */

/* Rank 0: the manifest of a step saved at `level` from every rank's header and piece records, as
 * JSON text (*text_out freed by the caller); *l2_complete: every shard has an L2 copy. */
static ftl_err build_manifest(ftl_ckpt *ck, int64_t step, int level, const hdr *hdrs, const rec *recs,
                              uint64_t *total_out, char **text_out, size_t *len_out, int *l2_complete, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  ck_manifest *m = ck_manifest_alloc(ck->nregs, ck->world);
  *text_out = NULL;
  *l2_complete = 0;
  if (!m) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory building the manifest");
  m->step = step;
  m->l3 = level == FTL_CKPT_LEVEL_L3;
  /* An L1 save makes no L2 copies: what l2_stored_all holds is an earlier step's. */
  int l2 = ck->l2_on && level != FTL_CKPT_LEVEL_L1;
  *l2_complete = l2;
  m->created_unix_us = ftl_wall_us();
  snprintf(m->job_spec_hash, sizeof m->job_spec_hash, "%s", ck->job_spec_hash);
  for (int i = 0; i < ck->nregs; i++)
    m->items[i] = ck->regs[i].item;
  uint64_t total = 0;
  for (int r = 0; r < ck->world; r++) {
    ck_shard *sh = &m->shards[r];
    sh->rank = r;
    ck_shard_file_name(r, sh->file);
    sh->size_bytes = hdrs[r].size;
    sh->checksum = hdrs[r].checksum;
    if (hdrs[r].l1) snprintf(sh->l1_host, sizeof sh->l1_host, "%s", hdrs[r].host);
    for (int q = 0; q < ck->world && l2; q++)
      if (ck->l2_stored_all[(size_t)q * (size_t)ck->world + (size_t)r])
        snprintf(sh->l2_host, sizeof sh->l2_host, "%s", hdrs[q].host);
    *l2_complete &= sh->l2_host[0] != '\0';
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
  rc = ck_manifest_to_json(m, text_out, len_out, d);
  *total_out = total;
out:
  ck_manifest_free(m);
  return rc;
}

/* Rank 0, an L3 step: its manifest written into the run directory's step folder sd (the commit). */
static ftl_err write_manifest(ftl_ckpt *ck, int64_t step, const char *sd, const hdr *hdrs, const rec *recs,
                              uint64_t *total_out, int *l2_complete, ftl_diag *d) {
  char *text = NULL;
  size_t len = 0;
  char path[PATH_MAX];
  ftl_err rc = build_manifest(ck, step, FTL_CKPT_LEVEL_L3, hdrs, recs, total_out, &text, &len, l2_complete, d);
  if (rc) goto out;
  if (ftl_fmt(path, sizeof path, "%s/manifest.json", sd)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", sd);
    goto out;
  }
  rc = core_fs_write_atomic(path, text, len, "mid_manifest", ck->rank, step, d);
  /* A manifest renamed into place whose folder fsync failed must not commit the step. */
  if (rc) core_fs_table.unlink(path);
out:
  ftl_free(text);
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
    if (v[i].step == step || v[i].state == CK_STEP_REFUSED) continue;
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

/* ---- one checkpoint ---------------------------------------------------------------------- */

/* What one job carries from phase to phase. */
typedef struct job {
  int64_t step, deadline;
  int level;           /* FTL_CKPT_LEVEL_*: below L3 the step is written and committed in L1 only */
  int l1_manifest;     /* this rank (its host's lowest) put the step's manifest in its L1 folder */
  int l2_complete;     /* the committed step has an L2 copy of every shard (rank 0 says) */
  char sd[PATH_MAX];   /* the step's folder: the run directory's, or below L3 this host's L1 one */
  char own[PATH_MAX];  /* this rank's shard once written ("" before) */
  hdr mine;            /* this rank's outcome, sent in the agreement */
  ck_manifest *m;      /* this rank's one-shard manifest (its pieces) */
  int wrote;
} job;

/* Phase 1 before the barrier: the step's folder, and on rank 0 a stale manifest of a re-used step
 * number removed. Returns this rank's local outcome (the barrier follows whatever it is). */
static ftl_err open_step(ftl_ckpt *ck, job *j, ftl_err staged_err, const char *staged_msg, ftl_diag *d) {
  if (j->level < FTL_CKPT_LEVEL_L3) {
    /* Below L3 nothing goes to the run directory: the step's folder is this host's L1 one, and the
     * host's lowest rank removes a stale manifest of the same step number there. */
    ftl_err local = ck_l1_step_dir(&ck->l1, j->step, j->sd, sizeof j->sd)
                        ? ftl_diag_fail(d, FTL_ERR_STATE, "no L1 folder for a checkpoint saved at %s",
                                        ck_level_name(j->level))
                        : ftl_mkdir_p(j->sd, d);
    if (!local) local = ck_step_dir_check(ck->l1.dir, j->step, d);
    if (!local && staged_err) local = ftl_diag_fail(d, staged_err, "staging failed: %s", staged_msg);
    char mp[PATH_MAX];
    if (!local && ck->l1_leader) {
      if (ck_l1_manifest_path(&ck->l1, j->step, mp, sizeof mp))
        local = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long under %s", ck->l1.dir);
      else if (core_fs_table.unlink(mp) != 0 && errno != ENOENT)
        local = ftl_diag_fail(d, FTL_ERR_IO, "cannot remove stale %s: %s", mp, strerror(errno));
    }
    return local;
  }
  ftl_err local = ck_step_dir(ck->base, j->step, j->sd, sizeof j->sd) ? FTL_ERR_RANGE : ftl_mkdir_p(j->sd, d);
  /* Never written through: a step folder that is a symbolic link (or resolves elsewhere). */
  if (!local) local = ck_step_dir_check(ck->base, j->step, d);
  if (!local && staged_err) local = ftl_diag_fail(d, staged_err, "staging failed: %s", staged_msg);
  if (!local && ck->rank == 0) {
    char mp[PATH_MAX];
    if (ftl_fmt(mp, sizeof mp, "%s/manifest.json", j->sd))
      local = FTL_ERR_RANGE;
    else if (core_fs_table.unlink(mp) == 0)
      local = core_fs_fsync_dir(j->sd, d);
    else if (errno != ENOENT)
      local = ftl_diag_fail(d, FTL_ERR_IO, "cannot remove stale %s: %s", mp, strerror(errno));
  }
  return local;
}

/* Phase 2: this rank's shard from the staging buffer, and its piece records in ck->mine_recs. */
static ftl_err write_own_shard(ftl_ckpt *ck, job *j, ftl_diag *d) {
  ftl_err local = FTL_OK;
  j->m = ck_manifest_alloc(ck->nregs, 1);
  if (!j->m) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory in the checkpoint writer");
  ck_manifest *m = j->m;
  const void **data = ftl_calloc((size_t)ck->nregs + 1, sizeof *data);
  ck_shard *sh = &m->shards[0];
  sh->rank = ck->rank;
  ck_shard_file_name(ck->rank, sh->file);
  sh->pieces = ftl_calloc((size_t)ck->nregs + 1, sizeof *sh->pieces);
  if (!data || !sh->pieces) {
    local = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory in the checkpoint writer");
    goto out;
  }
  for (int i = 0; i < ck->nregs; i++) {
    m->items[i] = ck->regs[i].item;
    if (ck->regs[i].write_count == 0) continue;
    sh->pieces[sh->npieces] = (ck_piece){i, ck->regs[i].write_start, ck->regs[i].write_count, 0, 0, 0};
    data[sh->npieces++] = ck->stage + ck->regs[i].stage_off;
  }
  /* The L1 copy when L1 is on and there is room for it: about the bytes written plus HDF5's own. */
  char l1_dir[PATH_MAX] = "", l1_why[256] = "";
  uint64_t expect = 64 * 1024;
  for (int p = 0; p < sh->npieces; p++) {
    const reg *r = &ck->regs[sh->pieces[p].item];
    expect += (uint64_t)r->write_count * r->row_bytes;
  }
  int want_l1 = ck->l1.dir[0] && ck_l1_make_room(&ck->l1, ck->rank, j->step, expect, l1_why, sizeof l1_why) &&
                ck_l1_step_dir(&ck->l1, j->step, l1_dir, sizeof l1_dir) == FTL_OK;
  int l1_written = 0;
  if (j->level < FTL_CKPT_LEVEL_L3) {
    /* Below L3 the L1 file is the shard: written like the run directory's would be (tmp, XXH3 on
     * the way, rename), and a step that does not fit is abandoned (its level is then not met). */
    if (!want_l1) {
      local = ftl_diag_fail(d, FTL_ERR_NOSPC, "no room in L1 for a checkpoint saved at %s: %s", ck_level_name(j->level),
                            l1_why[0] ? l1_why : "no L1 folder");
      goto out;
    }
    local = ck_shard_write(j->sd, m, sh, data, ck->chunk, ck->bounce, CK_BOUNCE_BYTES, j->step, ck->world, d);
    l1_written = local == FTL_OK;
  } else {
    local = ck_shard_write_tee(j->sd, want_l1 ? l1_dir : NULL, m, sh, data, ck->chunk, ck->bounce, CK_BOUNCE_BYTES,
                               j->step, ck->world, want_l1 ? &l1_written : NULL, want_l1 ? l1_why : NULL,
                               want_l1 ? sizeof l1_why : 0, d);
  }
  if (local) goto out;
  j->mine.l1 = l1_written;
  /* Said once per handle at warn (a small /dev/shm, as in a container, would say it every step),
   * then at debug. */
  if (ck->l1.dir[0] && !l1_written)
    FTL_LOG(ck->l1.warned++ ? FTL_LOG_DEBUG : FTL_LOG_WARN, "ckpt",
            "step %lld: no L1 copy of this rank's shard (%s); the run directory has it", (long long)j->step,
            l1_why[0] ? l1_why : "no room");
  j->wrote = 1;
  j->mine.size = sh->size_bytes;
  j->mine.checksum = sh->checksum;
  rec *mine_recs = ck->mine_recs;
  for (int i = 0; i < ck->nregs; i++)
    mine_recs[i].item = -1;
  for (int p = 0; p < sh->npieces; p++) {
    const ck_piece *pc = &sh->pieces[p];
    mine_recs[pc->item] = (rec){pc->item, pc->row_start, pc->row_count, pc->file_offset, pc->size_bytes, pc->checksum};
  }
  if (ftl_fmt(j->own, sizeof j->own, "%s/%s", j->sd, sh->file)) j->own[0] = '\0';
  core_crash_point("after_shard_rename", ck->rank, j->step);
out:
  ftl_free(data);
  return local;
}

/* Phase 3: everyone learns everyone's outcome; FTL_OK only when every rank wrote its shard and
 * registered what rank 0 did. */
static ftl_err agree(ftl_ckpt *ck, job *j, ftl_err local, const char *local_msg, ftl_diag *d) {
  hdr *hdrs = ck->hdrs;
  j->mine.ok = local == FTL_OK;
  j->mine.err = (int32_t)local;
  j->mine.nregs = ck->nregs;
  snprintf(j->mine.host, sizeof j->mine.host, "%s", ftl_hostname());
  j->mine.regsig = ck_registry_signature(ck);
  if (local) ck_copy_text(j->mine.msg, sizeof j->mine.msg, local_msg);
  ftl_err rc = ck_coll_allgather(ck, &j->mine, hdrs, (int)sizeof j->mine, "the commit agreement", j->deadline, d);
  if (rc) return rc;
  for (int r = 0; r < ck->world && !rc; r++) {
    if (!hdrs[r].ok)
      rc = ftl_diag_fail(d, (ftl_err)hdrs[r].err, "rank %d: %s", r, hdrs[r].msg);
    else if (hdrs[r].regsig != hdrs[0].regsig || hdrs[r].nregs != hdrs[0].nregs)
      rc = ftl_diag_fail(d, FTL_ERR_INVAL, "rank %d registered other tensors or blobs than rank 0", r);
  }
  return rc;
}

/* Phase 4: the piece records to rank 0, which writes the manifest (the commit) and tells every rank
 * how that went. */
static ftl_err commit(ftl_ckpt *ck, job *j, ftl_ckpt_stats *st, ftl_diag *d) {
  ftl_err rc = ck_coll_gather(ck, ck->mine_recs, ck->recs, (int)(sizeof *ck->mine_recs * (size_t)ck->nregs),
                                "the gather of piece records", j->deadline, d);
  if (rc) return rc;
  struct {
    int32_t err, l2_complete;
    char msg[CK_MSG];
  } verdict;
  memset(&verdict, 0, sizeof verdict);
  if (ck->rank == 0) {
    ftl_diag md = {{0}};
    int l2c = 0;
    verdict.err = (int32_t)write_manifest(ck, j->step, j->sd, ck->hdrs, ck->recs, &st->total_bytes, &l2c, &md);
    verdict.l2_complete = l2c;
    if (verdict.err) snprintf(verdict.msg, sizeof verdict.msg, "rank 0: manifest: %.360s", md.msg);
  }
  rc = ck_coll_bcast(ck, &verdict, (int)sizeof verdict, "the commit verdict's broadcast", j->deadline, d);
  if (rc) return rc;
  if (verdict.err) return ftl_diag_fail(d, (ftl_err)verdict.err, "%s", verdict.msg);
  j->l2_complete = verdict.l2_complete;
  return FTL_OK;
}

/* Phase 4 below L3 (SCR's cache-only checkpoint): the piece records to rank 0, which builds the
 * manifest and sends its bytes to every rank; the lowest rank of each host writes it into the
 * host's L1 folder, so every host that holds a shard or a copy also holds what commits them; the
 * step is committed when every host's manifest is in place (an allgather of the outcomes), and
 * abandoned on every rank otherwise. Nothing touches the run directory. */
static ftl_err commit_l1(ftl_ckpt *ck, job *j, ftl_ckpt_stats *st, ftl_diag *d) {
  char *text = NULL;
  ftl_err rc = ck_coll_gather(ck, ck->mine_recs, ck->recs, (int)(sizeof *ck->mine_recs * (size_t)ck->nregs),
                              "the gather of piece records", j->deadline, d);
  if (rc) return rc;
  struct {
    int64_t len;
    int32_t err, l2_complete;
    char msg[CK_MSG];
  } head;
  memset(&head, 0, sizeof head);
  if (ck->rank == 0) {
    ftl_diag md = {{0}};
    size_t len = 0;
    int l2c = 0;
    head.err = (int32_t)build_manifest(ck, j->step, j->level, ck->hdrs, ck->recs, &st->total_bytes, &text, &len, &l2c,
                                       &md);
    head.len = (int64_t)len;
    head.l2_complete = l2c;
    if (head.err) snprintf(head.msg, sizeof head.msg, "rank 0: manifest: %.360s", md.msg);
  }
  rc = ck_coll_bcast(ck, &head, (int)sizeof head, "the L1 manifest's length", j->deadline, d);
  if (rc) goto out;
  if (head.err) {
    rc = ftl_diag_fail(d, (ftl_err)head.err, "%s", head.msg);
    goto out;
  }
  if (ck->rank != 0 && !(text = ftl_malloc((size_t)head.len + 1))) {
    /* This rank cannot take part in the broadcast: the others meet it at their deadline. */
    atomic_store(&ck->sync->broken, 1);
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory for the L1 manifest");
    goto out;
  }
  rc = ck_coll_bcast(ck, text, (int)head.len, "the L1 manifest's broadcast", j->deadline, d);
  if (rc) goto out;
  /* The restore agreement's records (restore never runs while a checkpoint is in flight). */
  verdict_rec mine;
  memset(&mine, 0, sizeof mine);
  char path[PATH_MAX];
  if (ck->l1_leader) {
    ftl_diag wd = {{0}};
    ftl_err wrc = ck_l1_manifest_path(&ck->l1, j->step, path, sizeof path)
                      ? ftl_diag_fail(&wd, FTL_ERR_RANGE, "path too long under %s", ck->l1.dir)
                      /* Its own temporary file: hosts that share one folder (network namespaces on
                       * one machine) write the same bytes to the same name at once. */
                      : core_fs_replace(path, text, (size_t)head.len, CORE_TMP_PER_PROCESS, NULL, ck->rank, j->step,
                                        &wd);
    j->l1_manifest = 1; /* removed again if the step is abandoned, whether or not it is there */
    if (wrc) {
      mine.err = (int32_t)wrc;
      snprintf(mine.msg, sizeof mine.msg, "the L1 manifest: %.360s", wd.msg);
    }
  }
  rc = ck_coll_allgather(ck, &mine, ck->verdicts, (int)sizeof mine, "the L1 commit's agreement", j->deadline, d);
  for (int r = 0; r < ck->world && !rc; r++)
    if (ck->verdicts[r].err) rc = ftl_diag_fail(d, (ftl_err)ck->verdicts[r].err, "rank %d: %s", r, ck->verdicts[r].msg);
  if (!rc) j->l2_complete = head.l2_complete;
out:
  ftl_free(text);
  return rc;
}

/* One checkpoint, run by the writer thread. Fills st. */
static void run_job(ftl_ckpt *ck, int64_t step, int level, int64_t t0_ns, ftl_err staged_err, const char *staged_msg,
                    ftl_ckpt_stats *st) {
  ftl_diag d = {{0}};
  job j;
  memset(&j, 0, sizeof j);
  j.step = step;
  j.level = level;
  st->level = level;
  j.deadline = ftl_deadline_after_ms(ck->timeout_ms);
  if (ck->l2_on) memset(ck->l2_stored, 0, (size_t)ck->world);

  /* 0. The fence, held until the job is over: every change this rank makes to checkpoints/ (its
   * shard's rename, and on rank 0 the stale manifest's removal, the commit and the keep rule) is
   * made while the fence names this attempt (core/fence.h). A process of an attempt the launcher
   * has moved past only votes "no". */
  core_fence_hold fence;
  ftl_err local = core_fence_enter(ck->run_dir, ck->attempt, "writing a checkpoint", j.deadline, &fence, &d);
  /* 1. Folder, stale manifest of a re-used step number, barrier. */
  if (!local) local = open_step(ck, &j, staged_err, staged_msg, &d);
  ftl_err rc = ck_coll_barrier(ck, "the commit's opening barrier", j.deadline, &d);
  if (rc) goto done;
  /* 2. This rank's shard. */
  if (!local) local = write_own_shard(ck, &j, &d);
  /* 3. Everyone learns everyone's outcome. */
  rc = agree(ck, &j, local, d.msg, &d);
  if (rc) goto done;
  /* 3b. L2: a copy of every shard on a partner host, before the manifest names where they are. A
   * copy that fails is a warning; only the gang failing abandons the step. A step saved at L1 has
   * none (that is its level). */
  if (ck->l2_on && level != FTL_CKPT_LEVEL_L1) {
    rc = ck_l2_save(ck, step, j.own, j.deadline, ck->l2_stored, &d);
    if (!rc)
      rc = ck_coll_gather(ck, ck->l2_stored, ck->l2_stored_all, ck->world, "the gather of the L2 copies", j.deadline, &d);
    if (rc) goto done;
  }
  /* 4. Rank 0 commits: in the run directory, or below L3 in every host's L1 folder. */
  rc = level == FTL_CKPT_LEVEL_L3 ? commit(ck, &j, st, &d) : commit_l1(ck, &j, st, &d);
  if (rc) goto done;
  st->durable_ms = ck_ms_since(t0_ns);
  st->shard_bytes = j.mine.size;

  /* 5. Only after an L3 commit: the run directory's commit marker (once), then garbage. A step
   * below L3 never counts in the run directory's keep rule, so it never evicts an L3 step. */
  if (ck->rank == 0 && level == FTL_CKPT_LEVEL_L3) {
    ftl_diag kd = {{0}};
    if (ck_marker_note_commit(ck->base, step, &kd))
      FTL_LOG(FTL_LOG_WARN, "ckpt", "could not write the commit marker: %s", kd.msg);
    collect_garbage(ck, step);
  }
  /* L1 keeps the newest committed step, and after an L1 save also the newest step complete at L2
   * (what the loss of a host restores from until a newer step of L2 or L3 commits). An L3 step is
   * newer than any kept below it, so it keeps only itself. */
  int64_t also = -1;
  if (j.l2_complete)
    ck->l2_step = step;
  else if (level == FTL_CKPT_LEVEL_L3)
    ck->l2_step = -1;
  else
    also = ck->l2_step;
  if (j.mine.l1) ck_l1_keep_two(&ck->l1, ck->rank, step, also);
  for (int r = 0; r < ck->world && ck->l2_on; r++)
    if (ck->l2_stored[r] || level == FTL_CKPT_LEVEL_L1) ck_l2_keep_two(&ck->l1, r, step, also);
  if (ck->l1_leader) ck_l1_drop_manifests(&ck->l1, step, also);

done:
  /* An abandoned step leaves no shard of this rank behind (the collectives already ran, so no
   * manifest can name it). Earlier steps were never touched. */
  if (rc && j.l1_manifest) {
    char mp[PATH_MAX];
    if (ck_l1_manifest_path(&ck->l1, step, mp, sizeof mp) == FTL_OK) core_fs_table.unlink(mp);
  }
  if (rc && j.wrote && j.own[0]) core_fs_table.unlink(j.own);
  if (rc && j.mine.l1) ck_l1_drop(&ck->l1, ck->rank, step);
  for (int r = 0; rc && r < ck->world && ck->l2_on; r++)
    if (ck->l2_stored[r]) ck_l2_drop(&ck->l1, r, step);
  core_fence_leave(&fence);
  st->step = step;
  st->err = rc;
  if (rc) snprintf(st->errmsg, sizeof st->errmsg, "checkpoint of step %lld abandoned: %.440s", (long long)step, d.msg);
  ck_manifest_free(j.m);
}

/* ---- the thread -------------------------------------------------------------------------- */

void *ck_writer_main(void *arg) {
  ftl_ckpt *ck = arg;
  ck_sync *s = ck->sync;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->have_job && !s->stop)
      pthread_cond_wait(&s->cv, &s->mu);
    if (!s->have_job && s->stop) break;
    int64_t step = s->job_step, t0_ns = s->job_t0_ns;
    int level = s->job_level;
    ftl_err local_err = s->job_local_err;
    char local_msg[CK_MSG];
    ck_copy_text(local_msg, sizeof local_msg, s->job_local_msg);
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
      run_job(ck, step, level, t0_ns, local_err, local_msg, &st);
    }
    if (st.err) {
      FTL_LOG(FTL_LOG_ERROR, "ckpt", "%s", st.errmsg);
      ck_emit(ck, "ckpt_abandoned",
                json_pack("{sI si ss ss sf}", "step", (json_int_t)step, "err", (int)st.err, "code",
                          ftl_err_name(st.err), "msg", st.errmsg, "stall_ms", st.stall_ms));
    } else {
      FTL_LOG(FTL_LOG_INFO, "ckpt", "step %lld committed at %s: stall %.1f ms, durable after %.1f ms", (long long)step,
              ck_level_name(level), st.stall_ms, st.durable_ms);
      ck_emit(ck, "ckpt_committed",
                json_pack("{sI sf sf sf sI sI ss}", "step", (json_int_t)step, "stall_ms", st.stall_ms, "wait_prev_ms",
                          st.wait_prev_ms, "durable_ms", st.durable_ms, "shard_bytes", (json_int_t)st.shard_bytes,
                          "total_bytes", (json_int_t)st.total_bytes, "level", ck_level_name(level)));
      core_crash_point("after_commit", ck->rank, step); /* tests: a rank dies right after a commit */
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
