/* checkpoint/ckpt_save.c: the training thread's side of a checkpoint: ftl_ckpt_save (wait for the
 * previous checkpoint, snapshot into staging, hand the job to the writer), ftl_ckpt_wait, _last and
 * _in_flight, and the wait for an idle writer that create, destroy and restore also use.
 *
 * The hand-over is the only contact with the writer thread (ckpt_writer.c): the job's fields in
 * ck->sync under sync->mu, in_flight set, the condition variable broadcast. Nothing here calls the
 * writer; the writer never calls anything here.
 *
 * Not here: the commit protocol (ckpt_writer.c), staging and the registry (ckpt_state.c). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "checkpoint/ckpt_internal.h"

ftl_err ck_wait_idle_locked(ck_sync *s, int64_t deadline_ms) {
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

/* The level a save asked for `level` goes to: the same on every rank, since l1_all and l2_on were
 * agreed at create. Below L3 needs an L1 folder on every rank; L2 needs L2 on. Said once. */
static int effective_level(ftl_ckpt *ck, int level) {
  int eff = level;
  if (eff < FTL_CKPT_LEVEL_L3 && !ck->l1_all) eff = FTL_CKPT_LEVEL_L3;
  if (eff == FTL_CKPT_LEVEL_L2 && !ck->l2_on) eff = FTL_CKPT_LEVEL_L1;
  if (eff != level && ck->rank == 0 && !ck->level_warned++)
    FTL_LOG(FTL_LOG_WARN, "ckpt", "a save at L%d is made at L%d: %s", level, eff,
            eff == FTL_CKPT_LEVEL_L3 ? "not every rank has an L1 folder (checkpoint.levels, checkpoint.l1_dir)"
                                     : "L2 is off (one host, or not asked for)");
  return eff;
}

ftl_err ftl_ckpt_save(ftl_ckpt *ck, int64_t step) { return ftl_ckpt_save_level(ck, step, FTL_CKPT_LEVEL_L3); }

ftl_err ftl_ckpt_save_level(ftl_ckpt *ck, int64_t step, int level) {
  ftl_diag d = {{0}};
  if (!ck || step < 0 || level < FTL_CKPT_LEVEL_L1 || level > FTL_CKPT_LEVEL_L3) return FTL_ERR_INVAL;
  ck_sync *s = ck->sync;
  if (atomic_load(&s->broken))
    return ck_fail(ck, FTL_ERR_STATE, "ftl_ckpt_save: the handle is broken (a collective passed its deadline)");
  /* The step this handle restored or saved last, saved again: its state is that step's already
   * (restored from its commit, or in the checkpoint of it under way), so there is nothing to save.
   * That is what a program that restored its last step does at its end (a rerun, or a restart
   * after a kill past the final commit): it finishes, and the finish saves the step it ends at. */
  if (step == ck->last_step) {
    FTL_LOG(FTL_LOG_DEBUG, "ckpt", "step %lld is this handle's last step (restored or saved): not saved again",
            (long long)step);
    return FTL_OK;
  }
  if (step < ck->last_step) {
    ftl_diag_fail(&d, FTL_ERR_INVAL, "ftl_ckpt_save: step %lld is before step %lld, the last one restored or saved",
                  (long long)step, (long long)ck->last_step);
    return ck_fail(ck, FTL_ERR_INVAL, d.msg);
  }
  int64_t t0 = ftl_clock_ns();
  /* At most one checkpoint in flight: the next waits for the previous, and the wait is stall. */
  pthread_mutex_lock(&s->mu);
  ftl_err rc = ck_wait_idle_locked(s, ftl_deadline_after_ms(ck->timeout_ms));
  pthread_mutex_unlock(&s->mu);
  if (rc) {
    ftl_diag_fail(&d, rc, "ftl_ckpt_save(step %lld): the previous checkpoint is still in flight after %lld ms",
                  (long long)step, (long long)ck->timeout_ms);
    return ck_fail(ck, rc, d.msg);
  }
  double wait_ms = ck_ms_since(t0);
  /* A failure to stage on this rank does not return early: the other ranks' writers are about to
   * meet this one in collectives, so the job still goes to the writer, which votes "no" and the
   * step is abandoned on every rank with this rank's reason. */
  if (!ck->registry_frozen || !ck->stage) rc = ftl_ckpt_prepare(ck);
  if (rc)
    ck_copy_text(d.msg, sizeof d.msg, ck->errmsg);
  else
    rc = ck_snapshot(ck, &d);
  if (rc) ck_fail(ck, rc, d.msg);
  double stall_ms = ck_ms_since(t0);
  int eff = effective_level(ck, level);
  ck->last_step = step;
  pthread_mutex_lock(&s->mu);
  s->job_step = step;
  s->job_level = eff;
  s->job_t0_ns = t0;
  s->job_stall_ms = stall_ms;
  s->job_wait_ms = wait_ms;
  s->job_local_err = rc;
  ck_copy_text(s->job_local_msg, sizeof s->job_local_msg, rc ? d.msg : "");
  s->have_job = 1;
  atomic_store(&s->in_flight, 1);
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  ck_emit(ck, "ckpt_saved",
            json_pack("{sI sf sf ss}", "step", (json_int_t)step, "stall_ms", stall_ms, "wait_prev_ms", wait_ms,
                      "level", ck_level_name(eff)));
  return FTL_OK;
}

ftl_err ftl_ckpt_wait(ftl_ckpt *ck, int64_t timeout_ms, ftl_ckpt_stats *out) {
  if (!ck) return FTL_ERR_INVAL;
  ck_sync *s = ck->sync;
  int64_t deadline = ftl_deadline_after_ms(timeout_ms < 0 ? ck->timeout_ms : timeout_ms);
  pthread_mutex_lock(&s->mu);
  ftl_err rc = ck_wait_idle_locked(s, deadline);
  if (!rc && !s->have_last) {
    /* Nothing was ever saved by this handle (a program that restored its last step and had
     * nothing left to train): nothing is pending, which is what the caller waits for. */
    if (out) {
      memset(out, 0, sizeof *out);
      out->step = -1;
    }
  } else if (!rc) {
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
