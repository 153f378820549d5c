/* checkpoint/ckpt_writer.c: a checkpoint from ftl_ckpt_save to its commit. The save (wait for the
 * previous checkpoint, snapshot, hand over), the writer thread that each rank runs, the commit
 * protocol those threads follow, the keep rule after a commit, and ftl_ckpt_wait/last.
 *
 * Commit protocol (the writer threads of all ranks, on the handle's own communicator, through the
 * collectives with deadlines of ckpt_coll.c, so the training loop never takes part):
 *   1. rank 0 removes a stale manifest of the same step, if any; barrier (no shard of the new
 *      step can be renamed into place while an old manifest could still commit the folder);
 *   2. each rank writes its shard (shard.c): tmp file, XXH3 on the way, fsync, rename, fsync dir;
 *   3. allgather of a fixed header (ok, error, registration signature, size, checksum, message):
 *      every rank learns the same verdict (the commit agreement);
 *   4. if all succeeded: gather of the piece records to rank 0, which writes manifest.json
 *      (tmp, fsync, rename, fsync dir: the commit) and broadcasts the outcome;
 *   5. rank 0 deletes what the keep rule lets go (never leaving fewer than two committed).
 * A failure anywhere abandons that step on every rank (its shards are removed, earlier steps are
 * untouched) and is reported through ftl_ckpt_last()/ftl_ckpt_wait() and an event.
 *
 * Not here: the registry and staging (ckpt_state.c), MPI (ckpt_coll.c), file formats (shard.c,
 * manifest.c), restore (ckpt_restore.c), deciding when to save.
 *
 * Map: manifest; garbage collection; one job; the thread; save/wait. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkpoint/catalog.h"
#include "checkpoint/ckpt_internal.h"
#include "checkpoint/shard.h"
#include "core/fs.h"

/* ---- manifest and garbage collection ----------------------------------------------------- */

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
  rc = ftl_fs_write_atomic(path, text, len, "mid_manifest", ck->rank, step, d);
  /* A manifest renamed into place whose folder fsync failed must not commit the step. */
  if (rc) ftl_fs_table.unlink(path);
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
  /* Never written through: a step folder that is a symbolic link (or resolves elsewhere). */
  if (!local) local = ck_step_dir_check(ck->base, step, &d);
  if (!local && staged_err) local = ftl_diag_fail(&d, staged_err, "staging failed: %s", staged_msg);
  if (!local && ck->rank == 0) {
    char mp[PATH_MAX];
    if (ftl_fmt(mp, sizeof mp, "%s/manifest.json", sd))
      local = FTL_ERR_RANGE;
    else if (ftl_fs_table.unlink(mp) == 0)
      local = ftl_fs_fsync_dir(sd, &d);
    else if (errno != ENOENT)
      local = ftl_diag_fail(&d, FTL_ERR_IO, "cannot remove stale %s: %s", mp, strerror(errno));
  }
  rc = ckpt_coll_barrier(ck, "the commit's opening barrier", deadline, &d);
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
        ftl_crash_point("after_shard_rename", ck->rank, step);
      }
    }
    ftl_free(data);
  }

  /* 3. Everyone learns everyone's outcome. */
  mine.ok = local == FTL_OK;
  mine.err = (int32_t)local;
  mine.nregs = ck->nregs;
  mine.regsig = ckpt_registry_signature(ck);
  if (local) ckpt_copy_text(mine.msg, sizeof mine.msg, d.msg);
  rc = ckpt_coll_allgather(ck, &mine, hdrs, (int)sizeof mine, "the commit agreement", deadline, &d);
  if (rc) goto done;
  for (int r = 0; r < ck->world && !rc; r++) {
    if (!hdrs[r].ok)
      rc = ftl_diag_fail(&d, (ftl_err)hdrs[r].err, "rank %d: %s", r, hdrs[r].msg);
    else if (hdrs[r].regsig != hdrs[0].regsig || hdrs[r].nregs != hdrs[0].nregs)
      rc = ftl_diag_fail(&d, FTL_ERR_INVAL, "rank %d registered other tensors or blobs than rank 0", r);
  }
  if (rc) goto done;

  /* 4. Rank 0 commits. */
  rc = ckpt_coll_gather(ck, mine_recs, recs, (int)(sizeof *mine_recs * (size_t)ck->nregs),
                        "the gather of piece records", deadline, &d);
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
  rc = ckpt_coll_bcast(ck, &verdict, (int)sizeof verdict, "the commit verdict's broadcast", deadline, &d);
  if (rc) goto done;
  if (verdict.err) {
    rc = ftl_diag_fail(&d, (ftl_err)verdict.err, "%s", verdict.msg);
    goto done;
  }
  st->durable_ms = ckpt_ms_since(t0_ns);
  st->shard_bytes = mine.size;

  /* 5. Only after the commit: the run directory's commit marker (once), then garbage. */
  if (ck->rank == 0) {
    ftl_diag kd = {{0}};
    if (ck_marker_note_commit(ck->base, step, &kd))
      FTL_LOG(FTL_LOG_WARN, "ckpt", "could not write the commit marker: %s", kd.msg);
    collect_garbage(ck, step);
  }

done:
  /* An abandoned step leaves no shard of this rank behind (the collectives already ran, so no
   * manifest can name it). Earlier steps were never touched. */
  if (rc && wrote && own[0]) ftl_fs_table.unlink(own);
  st->step = step;
  st->err = rc;
  if (rc) snprintf(st->errmsg, sizeof st->errmsg, "checkpoint of step %lld abandoned: %.440s", (long long)step, d.msg);
  ck_manifest_free(m);
}

/* ---- the thread -------------------------------------------------------------------------- */

void *ckpt_writer_main(void *arg) {
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
    ckpt_copy_text(local_msg, sizeof local_msg, s->job_local_msg);
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
      ckpt_emit(ck, "ckpt_abandoned",
                json_pack("{sI si ss ss sf}", "step", (json_int_t)step, "err", (int)st.err, "code",
                          ftl_err_name(st.err), "msg", st.errmsg, "stall_ms", st.stall_ms));
    } else {
      FTL_LOG(FTL_LOG_INFO, "ckpt", "step %lld committed: stall %.1f ms, durable after %.1f ms", (long long)step,
              st.stall_ms, st.durable_ms);
      ckpt_emit(ck, "ckpt_committed",
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

ftl_err ckpt_wait_idle_locked(ck_sync *s, int64_t deadline_ms) {
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
    return ckpt_fail(ck, FTL_ERR_STATE, "ftl_ckpt_save: the handle is broken (a collective passed its deadline)");
  if (step <= ck->last_step) {
    ftl_diag_fail(&d, FTL_ERR_INVAL, "ftl_ckpt_save: step %lld is not after step %lld", (long long)step,
                  (long long)ck->last_step);
    return ckpt_fail(ck, FTL_ERR_INVAL, d.msg);
  }
  int64_t t0 = ftl_clock_ns();
  /* At most one checkpoint in flight: the next waits for the previous, and the wait is stall. */
  pthread_mutex_lock(&s->mu);
  ftl_err rc = ckpt_wait_idle_locked(s, ftl_deadline_after_ms(ck->timeout_ms));
  pthread_mutex_unlock(&s->mu);
  if (rc) {
    ftl_diag_fail(&d, rc, "ftl_ckpt_save(step %lld): the previous checkpoint is still in flight after %lld ms",
                  (long long)step, (long long)ck->timeout_ms);
    return ckpt_fail(ck, rc, d.msg);
  }
  double wait_ms = ckpt_ms_since(t0);
  /* A failure to stage on this rank does not return early: the other ranks' writers are about to
   * meet this one in collectives, so the job still goes to the writer, which votes "no" and the
   * step is abandoned on every rank with this rank's reason. */
  if (!ck->registry_frozen || !ck->stage) rc = ftl_ckpt_prepare(ck);
  if (rc)
    ckpt_copy_text(d.msg, sizeof d.msg, ck->errmsg);
  else
    rc = ckpt_snapshot(ck, &d);
  if (rc) ckpt_fail(ck, rc, d.msg);
  double stall_ms = ckpt_ms_since(t0);
  ck->last_step = step;
  pthread_mutex_lock(&s->mu);
  s->job_step = step;
  s->job_t0_ns = t0;
  s->job_stall_ms = stall_ms;
  s->job_wait_ms = wait_ms;
  s->job_local_err = rc;
  ckpt_copy_text(s->job_local_msg, sizeof s->job_local_msg, rc ? d.msg : "");
  s->have_job = 1;
  atomic_store(&s->in_flight, 1);
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  ckpt_emit(ck, "ckpt_saved",
            json_pack("{sI sf sf}", "step", (json_int_t)step, "stall_ms", stall_ms, "wait_prev_ms", wait_ms));
  return FTL_OK;
}

ftl_err ftl_ckpt_wait(ftl_ckpt *ck, int64_t timeout_ms, ftl_ckpt_stats *out) {
  if (!ck) return FTL_ERR_INVAL;
  ck_sync *s = ck->sync;
  int64_t deadline = ftl_deadline_after_ms(timeout_ms < 0 ? ck->timeout_ms : timeout_ms);
  pthread_mutex_lock(&s->mu);
  ftl_err rc = ckpt_wait_idle_locked(s, deadline);
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
