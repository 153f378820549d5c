/* checkpoint/ckpt_restore.c: ftl_ckpt_restore, at any world size. Rank 0 lists the committed steps
 * and reads each manifest; every rank parses the same bytes, plans the byte ranges it needs from
 * each shard, verifies the shards assigned to it (shard s by rank s % world, fused with its own
 * reads) and reads the rest; then the ranks agree (the restore agreement) on the step, or on why
 * it cannot be used. A bad step is marked bad on disk by rank 0 and the next older one is tried.
 * Each shard is read from the fastest verified copy: this host's L1 copy, else the L2 copy this host
 * keeps, else a copy fetched from a live host that holds one in memory (its owner's L1 copy or its
 * partner's L2 copy, by ckpt_l2.c), else the run directory's (L3).
 * Steps saved below L3 are committed in the hosts' L1 folders: rank 0 gathers them with the run
 * directory's list, and such a step restores only from L1/L2 copies (else an older step is tried).
 *
 * Not here: which copy of a shard a rank reads, its plan and its reads (ckpt_restore_read.c), file
 * formats and checksums (shard.c, manifest.c), step folders (catalog.c), MPI (ckpt_coll.c), CUDA
 * calls (device.c).
 *
 * Map: try one step (agreement); restore. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/catalog.h"
#include "checkpoint/ckpt_internal.h"
#include "checkpoint/ckpt_restore_read.h"
#include "checkpoint/h5.h"
#include "checkpoint/shard.h"
#include "core/fs.h"

/* ---- one step, agreed -------------------------------------------------------------------- */

/* The run directory's copies of the shards marked in l3_check, each checked against the manifest's
 * description (ck_h5_check_shard); the first that fails sets *why (corrupt, or I/O when it cannot
 * be read) and msg. */
static void check_l3_descriptions(const ftl_ckpt *ck, const ck_manifest *m, const char *sd,
                                  const unsigned char *l3_check, int *why, char *msg, size_t msg_size) {
  for (int sh = ck->rank; sh < m->world_size && *why == WHY_OK; sh += ck->world) {
    if (!l3_check[sh]) continue;
    char path[PATH_MAX];
    ftl_diag hd = {{0}};
    ftl_err hrc = ftl_fmt(path, sizeof path, "%s/%s", sd, m->shards[sh].file)
                      ? ftl_diag_fail(&hd, FTL_ERR_RANGE, "path too long")
                      : ck_h5_check_shard(path, m, &m->shards[sh], &hd);
    if (hrc) {
      *why = hrc == FTL_ERR_CORRUPT ? WHY_CORRUPT : WHY_IO;
      ck_copy_text(msg, msg_size, hd.msg);
    }
  }
}

/* Where one try's time goes, phase by phase (a debug line; bench/ckpt is read with it). */
typedef struct try_times {
  int64_t start, fetch, check, load, l3check, agree;
} try_times;

/* The step's manifest read on root (rank 0 for the run directory's steps, the L1 folder's reader
 * otherwise) and broadcast, so every rank parses the same bytes: WHY_OK with *text_out (*len_out
 * bytes, ftl_free), or why the step cannot be used with msg. A failed collective is *coll_rc. */
static int share_manifest(ftl_ckpt *ck, int64_t step, int src, int64_t deadline, char **text_out, size_t *len_out,
                          char *msg, size_t msg_size, ftl_err *coll_rc, ftl_diag *d) {
  int root = src > 0 ? src - 1 : 0;
  struct {
    int64_t len;
    int32_t why, pad;
    char err[CK_MSG];
  } head;
  memset(&head, 0, sizeof head);
  if (ck->rank == root) {
    size_t len = 0;
    ftl_diag rd = {{0}};
    ftl_err mrc = ck_read_manifest_text(src > 0 ? ck->l1.dir : ck->base, step, text_out, &len, &rd);
    if (mrc) {
      head.len = -1;
      /* A manifest that is malformed or not a regular file condemns the step; one that cannot be
       * read now (gone, EIO, a refused folder) does not. */
      head.why = mrc == FTL_ERR_CORRUPT ? WHY_CORRUPT : WHY_IO;
      snprintf(head.err, sizeof head.err, "manifest.json: %.380s", rd.msg);
    } else {
      head.len = (int64_t)len;
    }
  }
  *coll_rc = ck_coll_bcast_from(ck, root, &head, (int)sizeof head, "the broadcast of the manifest's length", deadline, d);
  if (*coll_rc) return WHY_OK;
  if (head.len < 0) {
    snprintf(msg, msg_size, "%s", head.err);
    return head.why;
  }
  if (ck->rank != root && !(*text_out = ftl_malloc((size_t)head.len + 1))) {
    *coll_rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory for the manifest");
    atomic_store(&ck->sync->broken, 1);
    return WHY_OK;
  }
  *len_out = (size_t)head.len;
  *coll_rc = ck_coll_bcast_from(ck, root, *text_out, (int)head.len, "the manifest's broadcast", deadline, d);
  return WHY_OK;
}

/* The manifest parsed and checked against where it was found (step, level): WHY_OK with *m, or
 * WHY_CORRUPT with why in msg. */
static int parse_manifest(const char *text, size_t len, int64_t step, int src, ck_manifest **m, char *msg,
                          size_t msg_size) {
  ftl_diag pd = {{0}};
  if (ck_manifest_parse(text, len, m, &pd)) {
    ck_copy_text(msg, msg_size, pd.msg);
    return WHY_CORRUPT;
  }
  if ((*m)->step != step) {
    snprintf(msg, msg_size, "manifest: step mismatch: step %lld in the folder of step %lld", (long long)(*m)->step,
             (long long)step);
    return WHY_CORRUPT;
  }
  if ((*m)->l3 != (src == 0)) {
    snprintf(msg, msg_size, "manifest: its levels %s l3, but it is in %s", (*m)->l3 ? "name" : "do not name",
             src ? "an L1 folder" : "the run directory");
    return WHY_CORRUPT;
  }
  return WHY_OK;
}

/* The manifest's own description against each of this rank's shards' (step, rank, dtypes, shapes,
 * layouts; shard s by rank s % world, like its checksums): an edited manifest is proof of
 * corruption even when the edit made it match what this program registered. A copy in memory is
 * checked here, before the reads; the run directory's file after them (check_l3_descriptions, for
 * the shards marked in l3_check): its HDF5 metadata is then in the page cache, where before the
 * reads it was a few small reads that queued behind the other ranks' streams (40 ms of a 700 ms
 * restore), and HDF5 parses only bytes the checksums have passed. */
static void check_memory_descriptions(ftl_ckpt *ck, const ck_manifest *m, const unsigned char *l2_got,
                                      unsigned char *l3_check, verdict_rec *mine) {
  for (int sh = ck->rank; sh < m->world_size && mine->why == WHY_OK; sh += ck->world) {
    char path[PATH_MAX], l1d[PATH_MAX];
    ftl_diag hd = {{0}};
    /* An L1 copy whose description checks spares the run directory's file this read; one that
     * does not is passed over (load_local then verifies the run directory's). */
    if (ck_l1_copy_of(ck, m, sh, l1d, sizeof l1d, m->l3) &&
        ftl_fmt(path, sizeof path, "%s/%s", l1d, m->shards[sh].file) == FTL_OK &&
        ck_h5_check_shard(path, m, &m->shards[sh], &hd) == FTL_OK)
      continue;
    ck_shard l2sh;
    if (ck_l2_copy_of(ck, m, sh, l2_got, l1d, sizeof l1d, &l2sh, m->l3) &&
        ftl_fmt(path, sizeof path, "%s/%s", l1d, l2sh.file) == FTL_OK && ck_h5_check_shard(path, m, &l2sh, &hd) == FTL_OK)
      continue;
    if (m->l3) {
      l3_check[sh] = 1;
      continue;
    }
    char seen[CK_MSG];
    ck_copy_text(seen, sizeof seen, hd.msg);
    ftl_diag_fail(&hd, FTL_ERR_NOTFOUND, "%s: no usable L1 or L2 copy on this host (the step was saved at %s)%s%.300s",
                  m->shards[sh].file, m->shards[sh].l2_host[0] ? "l2" : "l1", seen[0] ? ": " : "", seen);
    mine->why = WHY_IO;
    ck_copy_text(mine->msg, sizeof mine->msg, hd.msg);
  }
}

/* This rank's part of a step whose manifest checked: where every byte lands, the copies fetched
 * from other hosts' memory, the description checks, the reads and their verification; its
 * verdict into *mine (l2_got and l3_check are made here, freed by the caller). A failed collective
 * is *coll_rc. */
static void restore_here(ftl_ckpt *ck, ck_manifest *m, const char *sd, ck_landing *land, ck_read_plan *plan,
                         unsigned char **l2_got, unsigned char **l3_check, int *missing_blobs, verdict_rec *mine,
                         try_times *t, int64_t deadline, ftl_err *coll_rc, ftl_diag *d) {
  /* Where every byte this rank needs lands, before any is fetched: L2 bytes go straight there.
   * A registry mismatch found here is reported after the description check below, which may
   * prove the step corrupt instead. */
  char plan_msg[sizeof mine->msg] = "";
  int plan_why = ck_plan_local(ck, m, land, plan, missing_blobs, plan_msg, sizeof plan_msg);
  t->fetch = ftl_clock_ns();
  /* Copies in other hosts' memory come over the network first, every rank taking part when the
   * manifest names any copy in memory and the gang spans several hosts (the same bytes and hosts
   * on every rank, so the same decision). */
  int in_memory = 0;
  for (int s = 0; s < m->world_size; s++) in_memory |= m->shards[s].l1_host[0] || m->shards[s].l2_host[0];
  if (in_memory && ck->l2_hosts > 1 && ck_p2p_available()) {
    *l2_got = ftl_calloc((size_t)m->world_size, 1);
    *coll_rc = *l2_got ? ck_fetch_l2_copies(ck, m, plan, *l2_got, deadline, d)
                       : ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory for the L2 requests");
    if (!*l2_got) atomic_store(&ck->sync->broken, 1);
    if (*coll_rc) return;
  }
  t->check = ftl_clock_ns();
  if (!(*l3_check = ftl_calloc((size_t)m->world_size, 1))) {
    mine->why = WHY_IO;
    snprintf(mine->msg, sizeof mine->msg, "out of memory for the description check");
  }
  check_memory_descriptions(ck, m, *l2_got, *l3_check, mine);
  if (mine->why == WHY_OK && plan_why != WHY_OK) {
    /* A mismatch reads nothing; the description may still prove the step corrupt instead. */
    check_l3_descriptions(ck, m, sd, *l3_check, &mine->why, mine->msg, sizeof mine->msg);
    if (mine->why == WHY_OK) {
      mine->why = plan_why;
      ck_copy_text(mine->msg, sizeof mine->msg, plan_msg);
    }
  }
  t->load = ftl_clock_ns();
  if (mine->why == WHY_OK) mine->why = ck_load_local(ck, m, sd, *l2_got, plan, mine->msg, sizeof mine->msg);
  t->l3check = ftl_clock_ns();
  if (mine->why == WHY_OK) check_l3_descriptions(ck, m, sd, *l3_check, &mine->why, mine->msg, sizeof mine->msg);
  t->agree = ftl_clock_ns();
}

/* The step's verdict from every rank's: corruption outranks a mismatch (it is what marks a step
 * bad), which outranks I/O; the first such rank's message into msg. */
static int agreed_why(const ftl_ckpt *ck, const verdict_rec *all, char *msg, size_t msg_size) {
  int first = -1;
  for (int r = 0; r < ck->world; r++)
    if (all[r].why != WHY_OK && (first < 0 || (all[r].why == WHY_CORRUPT && all[first].why != WHY_CORRUPT))) first = r;
  if (first < 0) return WHY_OK;
  snprintf(msg, msg_size, "rank %d: %s", first, all[first].msg);
  return all[first].why;
}

/* Tries one committed step; returns WHY_* agreed by all ranks, with the first failing rank's
 * message in msg. src: 0 for a step of the run directory, r + 1 for a step saved below L3 whose
 * manifest rank r reads from its host's L1 folder. */
static int try_step(ftl_ckpt *ck, int64_t step, int src, ck_landing *land, int *written_world, int *missing_blobs,
                    char *msg, size_t msg_size, ftl_err *coll_rc, ftl_diag *d) {
  /* ckpt_restored says where the step loaded was read from, not the steps passed over before it. */
  ck->restore_l1 = ck->restore_l2 = ck->restore_l3 = 0;
  int64_t deadline = ftl_deadline_after_ms(ck->timeout_ms);
  try_times tt = {.start = ftl_clock_ns()};
  char sd[PATH_MAX];
  char *text = NULL;
  size_t len = 0;
  ck_manifest *m = NULL;
  unsigned char *l2_got = NULL, *l3_check = NULL;
  ck_read_plan plan = {NULL, NULL};
  verdict_rec mine, *all = ck->verdicts;
  memset(&mine, 0, sizeof mine);
  *coll_rc = FTL_OK;
  if (ck_step_dir(ck->base, step, sd, sizeof sd)) {
    snprintf(msg, msg_size, "path too long");
    return WHY_IO;
  }
  int why = share_manifest(ck, step, src, deadline, &text, &len, msg, msg_size, coll_rc, d);
  if (*coll_rc || why != WHY_OK) goto out;
  mine.why = parse_manifest(text, len, step, src, &m, mine.msg, sizeof mine.msg);
  if (mine.why == WHY_OK) {
    *written_world = m->world_size;
    restore_here(ck, m, sd, land, &plan, &l2_got, &l3_check, missing_blobs, &mine, &tt, deadline, coll_rc, d);
    if (*coll_rc) goto out;
  }
  *coll_rc = ck_coll_allgather(ck, &mine, all, (int)sizeof mine, "the restore agreement", deadline, d);
  if (*coll_rc) goto out;
  if (tt.agree)
    FTL_LOG(FTL_LOG_DEBUG, "ckpt", "step %lld: restore phases: manifest and plan %.1f ms, L2 fetch %.1f ms, "
            "description check %.1f ms, reads and verification %.1f ms, agreement %.1f ms", (long long)step,
            (double)(tt.fetch - tt.start) / 1e6, (double)(tt.check - tt.fetch) / 1e6,
            (double)(tt.load - tt.check + tt.agree - tt.l3check) / 1e6, (double)(tt.l3check - tt.load) / 1e6,
            ck_ms_since(tt.agree));
  why = agreed_why(ck, all, msg, msg_size);
  /* What an L1 save keeps besides its own step (ckpt_writer.c): the newest step complete at L2. */
  if (why == WHY_OK) {
    int l2_all = m->world_size > 0;
    for (int s = 0; s < m->world_size; s++) l2_all &= m->shards[s].l2_host[0] != '\0';
    ck->l2_step = l2_all ? step : -1;
  }
out:
  if (m) ck_drop_fetched(ck, m, l2_got);
  ck_free_plan(&plan);
  ftl_free(l2_got);
  ftl_free(l3_check);
  ck_manifest_free(m);
  ftl_free(text);
  return why;
}

/* ---- restore ----------------------------------------------------------------------------- */

/* Where each registered item's rows land: its own memory, or a host buffer for a device tensor. */
static ftl_err alloc_landing(ftl_ckpt *ck, ck_landing **out, ftl_diag *d) {
  ck_landing *land = ftl_calloc((size_t)ck->nregs + 1, sizeof *land);
  *out = land;
  if (!land) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory in restore");
  for (int i = 0; i < ck->nregs; i++) {
    reg *r = &ck->regs[i];
    land[i].bytes = (size_t)(r->row_bytes * (uint64_t)r->held_count);
    if (r->mem == FTL_CKPT_DEVICE && land[i].bytes > 0) {
      land[i].host = ftl_malloc(land[i].bytes);
      land[i].temp = 1;
      if (!land[i].host) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory staging '%s' for the device", r->item.name);
    } else {
      land[i].host = r->data;
    }
  }
  return FTL_OK;
}

static void free_landing(ftl_ckpt *ck, ck_landing *land) {
  if (land)
    for (int i = 0; i < ck->nregs; i++)
      if (land[i].temp) ftl_free(land[i].host);
  ftl_free(land);
}

/* What rank 0 tells every rank about the folder: how many steps are committed (-1: cannot list),
 * whether any ever was (the commit marker, steps marked bad), and the steps marked bad earlier;
 * and how many steps saved below L3 the hosts' L1 folders commit besides (nl1). */
typedef struct folder_head {
  int64_t n, ever, nl1;
  char hist[CK_MSG];
} folder_head;

/* The steps below L3 each rank reports from its host's L1 folder (it keeps one or two). */
#define CK_L1_LISTED 4

/* Rank 0: merges the steps the ranks' L1 folders commit (l1[r * CK_L1_LISTED + k], -1 for none)
 * into the committed steps[0..n) of the run directory (src 0), newest first; each step below L3
 * once, read by the lowest rank that has it (src r + 1); a step number the run directory commits
 * is the run directory's. Returns how many were added (steps and src have room for them). */
static int64_t merge_l1_steps(const ftl_ckpt *ck, const int64_t *l1, int64_t *steps, int *src, int64_t n) {
  int64_t total = n;
  for (int r = 0; r < ck->world; r++)
    for (int k = 0; k < CK_L1_LISTED; k++) {
      int64_t s = l1[(size_t)r * CK_L1_LISTED + (size_t)k];
      int dup = s < 0;
      for (int64_t i = 0; i < total && !dup; i++) dup = steps[i] == s;
      if (dup) continue;
      /* Insertion, newest first. */
      int64_t i = total++;
      for (; i > 0 && steps[i - 1] < s; i--) {
        steps[i] = steps[i - 1];
        src[i] = src[i - 1];
      }
      steps[i] = s;
      src[i] = r + 1;
    }
  return total - n;
}

/* Rank 0 lists the committed steps and what the folder remembers, and gathers the steps the hosts'
 * L1 folders commit; everyone gets the same: the head, then every committed step newest first in
 * *steps_out (n + nl1 + 1 entries, for the caller to free), where each one is in *src_out (0: the
 * run directory; r + 1: an L1 folder, read by rank r), and *whys_out the same size, zeroed. */
static ftl_err list_committed(ftl_ckpt *ck, folder_head *head, int64_t **steps_out, int **whys_out, int **src_out,
                              ftl_diag *d) {
  ck_step_entry *v = NULL;
  int nv = 0;
  ftl_diag ld = {{0}};
  int64_t l1_mine[CK_L1_LISTED], *l1_all = NULL;
  memset(head, 0, sizeof *head);
  for (int k = 0; k < CK_L1_LISTED; k++) l1_mine[k] = -1;
  ck_l1_list_committed(&ck->l1, l1_mine, CK_L1_LISTED);
  int64_t deadline = ftl_deadline_after_ms(ck->timeout_ms);
  if (ck->rank == 0 && !(l1_all = ftl_calloc((size_t)ck->world * CK_L1_LISTED, sizeof *l1_all))) {
    atomic_store(&ck->sync->broken, 1);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory in restore");
  }
  ftl_err rc = ck_coll_gather(ck, l1_mine, l1_all, (int)sizeof l1_mine, "the gather of the L1 steps", deadline, d);
  if (rc) goto out;
  if (ck->rank == 0) {
    if (ck_list_steps(ck->base, &v, &nv, &ld)) {
      head->n = -1;
    } else {
      size_t hu = 0;
      head->ever = ck_marker_exists(ck->base);
      for (int i = 0; i < nv; i++) {
        head->n += v[i].state == CK_STEP_COMMITTED;
        if (v[i].state != CK_STEP_BAD) continue;
        head->ever = 1;
        char why[160];
        ck_read_bad_reason(ck->base, v[i].step, why, sizeof why);
        int w = snprintf(head->hist + hu, sizeof head->hist - hu, "%sstep %lld marked bad (%s)", hu ? "; " : "",
                         (long long)v[i].step, why[0] ? why : "no reason recorded");
        if (w > 0) hu += (size_t)w < sizeof head->hist - hu ? (size_t)w : sizeof head->hist - hu - 1;
      }
    }
  }
  /* The L1 folders' steps count when the run directory can be listed (else restore stops anyway). */
  int64_t cap = (ck->rank == 0 ? head->n : 0) + (int64_t)ck->world * CK_L1_LISTED + 1;
  int64_t *merged = NULL;
  int *msrc = NULL;
  if (ck->rank == 0 && head->n >= 0) {
    merged = ftl_calloc((size_t)cap, sizeof *merged);
    msrc = ftl_calloc((size_t)cap, sizeof *msrc);
    if (!merged || !msrc) {
      ftl_free(merged);
      ftl_free(msrc);
      atomic_store(&ck->sync->broken, 1);
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory in restore");
      goto out;
    }
    for (int i = 0, j = 0; i < nv; i++)
      if (v[i].state == CK_STEP_COMMITTED) merged[j++] = v[i].step;
    head->nl1 = merge_l1_steps(ck, l1_all, merged, msrc, head->n);
  }
  rc = ck_coll_bcast(ck, head, (int)sizeof *head, "the broadcast of the committed steps' count", deadline, d);
  int64_t n = head->n + head->nl1;
  if (rc) goto out_merged;
  if (head->n < 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot list checkpoints%s%s", ck->rank == 0 ? ": " : " (see rank 0)",
                       ck->rank == 0 ? ld.msg : "");
    goto out_merged;
  }
  int64_t *steps = *steps_out = ftl_calloc((size_t)n + 1, sizeof *steps);
  *whys_out = ftl_calloc((size_t)n + 1, sizeof **whys_out);
  int *src = *src_out = ftl_calloc((size_t)n + 1, sizeof *src);
  if (!steps || !*whys_out || !src) {
    atomic_store(&ck->sync->broken, 1);
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory in restore");
    goto out_merged;
  }
  if (ck->rank == 0) {
    memcpy(steps, merged, sizeof *steps * (size_t)n);
    memcpy(src, msrc, sizeof *src * (size_t)n);
  }
  rc = ck_coll_bcast(ck, steps, (int)(sizeof *steps * (size_t)n), "the broadcast of the committed steps", deadline,
                       d);
  if (!rc && head->nl1 > 0)
    rc = ck_coll_bcast(ck, src, (int)(sizeof *src * (size_t)n), "the broadcast of where the steps are", deadline, d);
out_merged:
  ftl_free(merged);
  ftl_free(msrc);
out:
  ftl_free(l1_all);
  ftl_free(v);
  return rc;
}

/* Tries the committed steps newest first until one restores; a corrupt one is marked bad (rank 0).
 * info->step stays -1 when none did; *transient counts the steps refused for a cause that may pass.
 * An error of the gang (not of a step) is returned. */
static ftl_err restore_newest(ftl_ckpt *ck, const int64_t *steps, const int *src, int64_t n, int *whys, ck_landing *land,
                              ftl_ckpt_restore_info *info, int *transient, ftl_diag *d) {
  size_t used = 0;
  for (int64_t i = 0; i < n; i++) {
    char why_msg[CK_MSG + 32] = "";
    int written = 0, missing = 0;
    ftl_err crc = FTL_OK;
    int why = try_step(ck, steps[i], src[i], land, &written, &missing, why_msg, sizeof why_msg, &crc, d);
    if (crc) return crc;
    /* A step saved below L3 the gang cannot restore is passed over for an older one (an L3 step at
     * worst): its copies are in the hosts' memory only, so nothing is marked and nothing may pass. */
    if (src[i] && why != WHY_OK) why = WHY_GONE;
    whys[i] = why;
    if (why == WHY_OK) {
      ftl_err rc = ck_restore_to_device(ck, land, d);
      if (rc) return rc;
      info->step = steps[i];
      info->written_world_size = written;
      info->per_rank_blobs_missing = missing;
      ck->last_step = steps[i];
      return FTL_OK;
    }
    *transient += why == WHY_IO;
    FTL_LOG(FTL_LOG_WARN, "ckpt", "step %lld%s cannot be restored: %s%s", (long long)steps[i],
            why == WHY_GONE ? " (saved below L3, in the hosts' memory)" : "", why_msg,
            why == WHY_IO ? " (left as it is: the cause may pass)" : why == WHY_GONE ? ": trying an older step" : "");
    int n_written = snprintf(info->errmsg + used, sizeof info->errmsg - used, "%sstep %lld%s: %s%s", used ? "; " : "",
                             (long long)steps[i], why == WHY_GONE ? " (below L3)" : "", why_msg,
                             why == WHY_IO ? " (not marked bad: may pass)" : "");
    if (n_written > 0) used += (size_t)n_written < sizeof info->errmsg - used ? (size_t)n_written : 0;
    if (why == WHY_CORRUPT) {
      info->bad_steps++;
      if (ck->rank == 0) {
        ftl_diag bd = {{0}};
        if (ck_mark_bad(ck->base, steps[i], why_msg, &bd))
          FTL_LOG(FTL_LOG_WARN, "ckpt", "could not mark step %lld bad: %s", (long long)steps[i], bd.msg);
        ck_emit(ck, "ckpt_bad", json_pack("{sI ss}", "step", (json_int_t)steps[i], "reason", why_msg));
      }
    }
  }
  return FTL_OK;
}

/* No step restored: a fresh start (none ever committed, or allowed), or a refusal that says why. */
static ftl_err no_usable_step(ftl_ckpt *ck, const int64_t *steps, int64_t n_all, const int *whys,
                              const folder_head *head, int transient, ftl_ckpt_restore_info *info, ftl_diag *d) {
  ftl_err rc;
  /* Only the run directory's steps count here: a step below L3 never was durable, so losing every
   * one of them is no reason to refuse a fresh start, and marking one bad is not possible. */
  int64_t n = head->n;
  char tried[sizeof info->errmsg];
  snprintf(tried, sizeof tried, "%s", info->errmsg);
  if (n == 0 && !head->ever) {
    rc = FTL_ERR_NOTFOUND;
    snprintf(info->errmsg, sizeof info->errmsg, "no committed checkpoint in %.900s: a fresh start", ck->base);
  } else if (ck->allow_fresh) {
    /* The caller chose to start over. What could not be used is kept, marked bad, so the new
     * run's steps and its keep rule never mix with the old ones. */
    rc = FTL_ERR_NOTFOUND;
    for (int64_t i = 0; i < n_all && ck->rank == 0; i++) {
      if (whys[i] == WHY_CORRUPT || whys[i] == WHY_GONE) continue;
      ftl_diag bd = {{0}};
      if (ck_mark_bad(ck->base, steps[i], "discarded by a fresh start (FTL_CKPT_ALLOW_FRESH=1)", &bd))
        FTL_LOG(FTL_LOG_WARN, "ckpt", "could not set step %lld aside: %s", (long long)steps[i], bd.msg);
    }
    snprintf(info->errmsg, sizeof info->errmsg,
             "no usable checkpoint in %.200s, a fresh start allowed by FTL_CKPT_ALLOW_FRESH (%.300s%s%.300s)",
             ck->base, tried[0] ? tried : "", tried[0] && head->hist[0] ? "; " : "", head->hist);
    FTL_LOG(FTL_LOG_WARN, "ckpt", "%s", info->errmsg);
  } else {
    rc = transient ? FTL_ERR_IO : FTL_ERR_CORRUPT;
    if (n > 0)
      snprintf(info->errmsg, sizeof info->errmsg, "%lld committed checkpoint(s) in %.200s, none usable: %.500s%s%.150s",
               (long long)n, ck->base, tried, head->hist[0] ? "; earlier: " : "", head->hist);
    else
      snprintf(info->errmsg, sizeof info->errmsg,
               "no usable checkpoint in %.200s, none usable of the steps this run directory committed before "
               "(%.500s)",
               ck->base, head->hist[0] ? head->hist : "checkpoints/" CK_MARKER_NAME " exists");
    size_t u = strlen(info->errmsg);
    snprintf(info->errmsg + u, sizeof info->errmsg - u, "; %s",
             transient ? "not starting from scratch: a step may become readable again, run again later"
                       : "not starting from scratch: restore a step (rename its manifest.json.bad back) or "
                         "set FTL_CKPT_ALLOW_FRESH=1 to start at step 0");
    FTL_LOG(FTL_LOG_ERROR, "ckpt", "%s", info->errmsg);
  }
  return ftl_diag_fail(d, rc, "%s", info->errmsg);
}

/* The outcome, logged and sent as an event. */
static void report_restore(ftl_ckpt *ck, ftl_err rc, ftl_ckpt_restore_info *info, const ftl_diag *d) {
  if (rc == FTL_OK) {
    /* The levels read from, joined by '+': "l1", "l2", "l3", "l1+l3", "l2+l3", ... ("l3" when this
     * rank needed no shard). */
    char level[16] = "";
    /* l2: a copy another host made (the partner's copy kept here) or keeps (fetched over the
     * network, whether it is that host's own L1 copy or an L2 copy). */
    const char *said[3] = {"L1 (host memory)", "L2 (a partner's copy here, or a copy fetched from another host)",
                           "L3 (the run directory)"};
    char where[192] = "";
    int counts[3] = {ck->restore_l1, ck->restore_l2, ck->restore_l3};
    if (!counts[0] && !counts[1]) counts[2] = counts[2] ? counts[2] : 1;
    for (int k = 0; k < 3; k++) {
      if (!counts[k]) continue;
      size_t u = strlen(level), v = strlen(where);
      snprintf(level + u, sizeof level - u, "%sl%d", u ? "+" : "", k + 1);
      snprintf(where + v, sizeof where - v, "%s%s", v ? " and " : "", said[k]);
    }
    FTL_LOG(FTL_LOG_INFO, "ckpt", "restored step %lld (written by %d ranks) in %.1f ms from %s", (long long)info->step,
            info->written_world_size, info->restore_ms, where);
    ck_emit(ck, "ckpt_restored",
              json_pack("{sI si si sf ss si si si}", "step", (json_int_t)info->step, "written_world_size",
                        info->written_world_size, "bad_steps", info->bad_steps, "restore_ms", info->restore_ms, "level",
                        level, "l1_shards", ck->restore_l1, "l2_shards", ck->restore_l2, "l3_shards", ck->restore_l3));
  } else if (rc == FTL_ERR_NOTFOUND) {
    ck_emit(ck, "ckpt_fresh_start",
              json_pack("{si sb}", "committed_found", info->committed_found, "allowed", ck->allow_fresh != 0));
  } else {
    if (!info->errmsg[0]) snprintf(info->errmsg, sizeof info->errmsg, "%s", d->msg);
    ck_fail(ck, rc, d->msg);
    ck_emit(ck, "ckpt_restore_failed",
              json_pack("{si ss ss}", "err", (int)rc, "code", ftl_err_name(rc), "msg", d->msg));
  }
}

ftl_err ftl_ckpt_restore(ftl_ckpt *ck, ftl_ckpt_restore_info *info) {
  ftl_ckpt_restore_info local_info;
  ftl_diag d = {{0}};
  ftl_err rc = FTL_OK;
  ck_landing *land = NULL;
  int64_t *steps = NULL;
  int *whys = NULL, *src = NULL;
  folder_head head;
  if (!ck) return FTL_ERR_INVAL;
  if (!info) info = &local_info;
  memset(info, 0, sizeof *info);
  info->step = -1;
  int64_t t0 = ftl_clock_ns();
  ck_sync *s = ck->sync;
  pthread_mutex_lock(&s->mu);
  rc = ck_wait_idle_locked(s, ftl_deadline_after_ms(ck->timeout_ms));
  pthread_mutex_unlock(&s->mu);
  if (rc) return ck_fail(ck, rc, "ftl_ckpt_restore: a checkpoint is still in flight");
  if (atomic_load(&s->broken)) return ck_fail(ck, FTL_ERR_STATE, "ftl_ckpt_restore: the handle is broken");

  ck->restore_l1 = ck->restore_l2 = ck->restore_l3 = 0;
  if ((rc = alloc_landing(ck, &land, &d))) goto out;
  if ((rc = list_committed(ck, &head, &steps, &whys, &src, &d))) goto out;
  int64_t n = head.n + head.nl1;
  info->committed_found = (int)n;
  int transient = 0;
  if ((rc = restore_newest(ck, steps, src, n, whys, land, info, &transient, &d))) goto out;
  if (info->step < 0) rc = no_usable_step(ck, steps, n, whys, &head, transient, info, &d);
out:
  info->restore_ms = ck_ms_since(t0);
  report_restore(ck, rc, info, &d);
  free_landing(ck, land);
  ftl_free(steps);
  ftl_free(whys);
  ftl_free(src);
  return rc;
}
