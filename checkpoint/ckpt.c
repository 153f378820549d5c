/* checkpoint/ckpt.c: the checkpoint handle (include/ftl/ckpt.h): options, create and destroy (the
 * set-up agreement, the handle's own communicator, the writer thread), the handle's last error,
 * events, and the accessors. docs/checkpoint.md explains the whole protocol; the other files of
 * the API each do one part of it (checkpoint/ckpt_internal.h lists them).
 *
 * Not here: the registry and staging (ckpt_state.c), MPI calls (ckpt_coll.c), the writer thread
 * and the commit (ckpt_writer.c), restore (ckpt_restore.c), file formats (shard.c, manifest.c),
 * CUDA calls (device.c), deciding when to save.
 *
 * Map: options; accessors; create/destroy. The helpers every file of the API shares (the last
 * error, events, elapsed time) are checkpoint/ckpt_shared.c's, a leaf, so this file calls the
 * others and none of them calls back into it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/h5.h"
#include "core/fs.h"
#include "core/rundir.h"
#include "rendezvous/launch.h"

void ftl_ckpt_options_init(ftl_ckpt_options *o) {
  memset(o, 0, sizeof *o);
  o->keep = CK_DEFAULT_KEEP;
  o->timeout_ms = CK_DEFAULT_TIMEOUT_MS;
  o->chunk_bytes = CK_DEFAULT_CHUNK;
}

const char *ftl_ckpt_errmsg(const ftl_ckpt *ck) { return ck ? ck->errmsg : ""; }
const char *ftl_ckpt_dir(const ftl_ckpt *ck) { return ck ? ck->base : ""; }

/* ---- create / destroy -------------------------------------------------------------------- */

/* Releases what a handle holds (its writer thread already joined or never started); create's
 * failure path passes a partly built one. mu_ok/cv_ok: sync's mutex/condition were initialised.
 * Accepts NULL. */
static void free_handle(ftl_ckpt *ck, int mu_ok, int cv_ok) {
  if (!ck) return;
  ck_coll_close(ck);
  ck_dev_close(ck->dev);
  ck_free_stage(ck);
  if (cv_ok) pthread_cond_destroy(&ck->sync->cv);
  if (mu_ok) pthread_mutex_destroy(&ck->sync->mu);
  ftl_free(ck->bounce);
  ftl_free(ck->hdrs);
  ftl_free(ck->verdicts);
  ftl_free(ck->mine_recs);
  ftl_free(ck->recs);
  ftl_free(ck->hosts);
  ftl_free(ck->l2_partner);
  ftl_free(ck->l2_stored);
  ftl_free(ck->l2_stored_all);
  ftl_free(ck->regs);
  ftl_free(ck->sync);
  ftl_free(ck);
}

/* Every rank's host, and whether L2 is on: asked for on every rank (FTL_CKPT_L2=1 or auto), over a seam
 * with point-to-point, on more than one host. Collective; the same outcome on every rank. */
static ftl_err setup_hosts(ftl_ckpt *ck, int64_t deadline, ftl_diag *d) {
  size_t w = (size_t)ck->world;
  ck_host_rec mine;
  memset(&mine, 0, sizeof mine);
  snprintf(mine.host, sizeof mine.host, "%s", ftl_hostname());
  /* 1: asked for (checkpoint.levels names l2); 2: "auto", the default of `ftl run` without a list,
   * on exactly when the gang spans several hosts, and silent when it does not. */
  const core_launch_env *env = rz_ctx_launch_env(ck->ctx);
  mine.l2 = env && ck_p2p_available() ? env->ckpt_l2 : 0; /* FTL_CKPT_L2 */
  mine.l1 = ck->l1.dir[0] != '\0';
  ftl_err rc = ck_coll_allgather(ck, &mine, ck->hosts, (int)sizeof mine, "the allgather of the ranks' hosts", deadline, d);
  if (rc) return rc;
  int all_l2 = 1;
  ck->l1_all = 1;
  ck->l1_leader = 1;
  for (size_t r = 0; r < w; r++) {
    ck->hosts[r].host[CK_HOST_MAX - 1] = '\0';
    all_l2 &= ck->hosts[r].l2 == 1 || ck->hosts[r].l2 == 2;
    ck->l1_all &= ck->hosts[r].l1 == 1;
    if ((int)r < ck->rank && strcmp(ck->hosts[r].host, mine.host) == 0) ck->l1_leader = 0;
  }
  rc = ck_l2_place(ck);
  if (rc) return ftl_diag_fail(d, rc, "out of memory placing the L2 copies");
  if (!all_l2 || ck->l2_hosts < 2) {
    if (mine.l2 == 1 && ck->rank == 0)
      FTL_LOG(FTL_LOG_WARN, "ckpt", "L2 off: %s", ck->l2_hosts < 2 ? "the gang runs on one host (L2 needs a partner host)"
                                                                : "not asked for on every rank");
    return FTL_OK;
  }
  ck->l2_on = 1;
  return FTL_OK;
}

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
  /* The launch record ftl_init read (core/launch_env.h): the module's settings from the environment. */
  const core_launch_env *env = rz_ctx_launch_env(ctx);
  ck->allow_fresh = o.allow_fresh || (env && env->ckpt_allow_fresh);
  ck->l2_mpi = env && env->ckpt_l2_mpi;
  if (env) snprintf(ck->job_spec_hash, sizeof ck->job_spec_hash, "%s", env->job_spec_hash);
  ck->timeout_ms = o.timeout_ms;
  ck->chunk = o.chunk_bytes;
  ck->last_step = -1;
  ck->l2_step = -1;
  ck->sync->last.step = -1;
  /* Only a process the launcher started (FTL_ATTEMPT set) answers to the fence: a program run by
   * hand on a run directory is no attempt of it. */
  ck->attempt = env && env->has_attempt ? inf->attempt : -1;
  ck_l1_setup(&ck->l1, run_dir, o.l1_dir ? o.l1_dir : env ? env->ckpt_l1_dir : NULL,
              o.l1_max_bytes ? o.l1_max_bytes : env ? env->ckpt_l1_max_bytes : 0);
  if (ftl_fmt(ck->run_dir, sizeof ck->run_dir, "%s", run_dir) ||
      core_rundir_path(ck->base, sizeof ck->base, run_dir, FTL_RUNDIR_CHECKPOINTS)) {
    rc = FTL_ERR_RANGE;
    goto out;
  }
  rc = ftl_mkdir_p(ck->base, &d);
  if (rc) FTL_LOG(FTL_LOG_ERROR, "ckpt", "%s", d.msg);
  ck->hdrs = ftl_calloc((size_t)(inf->world_size > 0 ? inf->world_size : 1), sizeof *ck->hdrs);
  ck->verdicts = ftl_calloc((size_t)(inf->world_size > 0 ? inf->world_size : 1), sizeof *ck->verdicts);
  /* The hosts' exchange and the L2 bookkeeping (rank 0 gathers which copies each rank keeps):
   * allocated before the agreement, so a rank short of memory fails create on every rank. */
  size_t wn = (size_t)(inf->world_size > 0 ? inf->world_size : 1);
  ck->hosts = ftl_calloc(wn, sizeof *ck->hosts);
  ck->l2_partner = ftl_calloc(wn, sizeof *ck->l2_partner);
  ck->l2_stored = ftl_calloc(wn, 1);
  if (inf->rank == 0) ck->l2_stored_all = ftl_calloc(wn * wn, 1);
  if (!rc && (!ck->hdrs || !ck->verdicts || !ck->hosts || !ck->l2_partner || !ck->l2_stored ||
              (inf->rank == 0 && !ck->l2_stored_all)))
    rc = FTL_ERR_NOMEM;
  /* Agree on the folder before anything collective depends on it. Non-blocking collectives with
   * the handle's deadline; after a timeout the pending request still points into the handle, so
   * the handle is deliberately leaked rather than freed under it. */
  int64_t deadline = ftl_deadline_after_ms(ck->timeout_ms);
  ck->setup_ok[0] = rc == FTL_OK;
  ftl_err crc = ck_coll_agree_setup(ck, *gang, &ck->setup_ok[0], &ck->setup_ok[1], deadline, &d);
  if (!crc && !ck->setup_ok[1]) {
    rc = rc ? rc : FTL_ERR_IO;
    goto out;
  }
  if (!crc) crc = ck_coll_open(ck, *gang, deadline, &d);
  if (!crc && ck->world != inf->world_size) {
    rc = FTL_ERR_STATE;
    goto out;
  }
  if (!crc) crc = setup_hosts(ck, deadline, &d);
  if (crc == FTL_ERR_TIMEOUT) {
    FTL_LOG(FTL_LOG_ERROR, "ckpt", "%s", d.msg);
    return crc;
  }
  if (crc) {
    rc = crc;
    goto out;
  }
  core_fault_from_env();
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
  if (pthread_create(&ck->thread, NULL, ck_writer_main, ck) != 0) {
    rc = FTL_ERR_NOMEM;
    goto out;
  }
  ck->thread_started = 1;
  *out = ck;
  ck = NULL;
out:
  free_handle(ck, mu_ok, cv_ok);
  return rc;
}

ftl_err ftl_ckpt_destroy(ftl_ckpt *ck) {
  if (!ck) return FTL_OK;
  ck_sync *s = ck->sync;
  ftl_err rc = FTL_OK;
  pthread_mutex_lock(&s->mu);
  rc = ck_wait_idle_locked(s, ftl_deadline_after_ms(ck->timeout_ms));
  s->stop = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  if (rc) {
    /* The writer is stuck in a collective past its deadline: it cannot be joined safely, so it is
     * detached and the handle's memory is deliberately left to it. */
    pthread_detach(ck->thread);
    return ck_fail(ck, FTL_ERR_TIMEOUT, "ftl_ckpt_destroy: the writer did not finish in time");
  }
  if (ck->thread_started) pthread_join(ck->thread, NULL);
#ifndef NDEBUG
  /* Debug builds: the writer closed every HDF5 object it opened, on every path (another handle in
   * this process may still hold one, so this only logs). */
  long open_h5 = ck_h5_open_objects();
  if (open_h5 > 0) FTL_LOG(FTL_LOG_ERROR, "ckpt", "ftl_ckpt_destroy: %ld HDF5 object(s) still open", open_h5);
#endif
  free_handle(ck, 1, 1);
  return FTL_OK;
}

unsigned ftl_ckpt_levels(const ftl_ckpt *ck) {
  if (!ck) return 0;
  unsigned set = FTL_CKPT_LEVEL_BIT(FTL_CKPT_LEVEL_L3);
  /* As ftl_ckpt_save_level lowers a level (ckpt_save.c): L1 needs every rank's folder, L2 also L2. */
  if (ck->l1_all) set |= FTL_CKPT_LEVEL_BIT(FTL_CKPT_LEVEL_L1);
  if (ck->l1_all && ck->l2_on) set |= FTL_CKPT_LEVEL_BIT(FTL_CKPT_LEVEL_L2);
  return set;
}
