/* checkpoint/ckpt_restore_read.h: what one rank of a restore reads of a step (checkpoint/
 * ckpt_restore_read.c): which copy of each shard (this host's L1 copy, the L2 copy it keeps, one
 * fetched from another host's memory, the run directory's), where each needed byte lands, the
 * reads and their verification. The step's agreement and the choice of step: ckpt_restore.c.
 * Internal to checkpoint/. */
#ifndef FTL_CKPT_RESTORE_READ_H
#define FTL_CKPT_RESTORE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/manifest.h"
#include "checkpoint/shard.h"

/* WHY_GONE: a step saved below L3 that the gang cannot restore (a copy missing or corrupt, the
 * hosts' memory gone): never marked bad (nothing of it is in the run directory), never a cause
 * that may pass. */
enum { WHY_OK = 0, WHY_CORRUPT = 1, WHY_MISMATCH = 2, WHY_IO = 3, WHY_GONE = 4 };

/* What this rank reads of one step: the byte ranges it needs, sorted by shard and then offset,
 * shard s's being needs[first[s]] .. needs[first[s+1]-1]. Made before the L2 fetch, which
 * receives fetched bytes straight into these destinations. */
typedef struct ck_read_plan {
  ck_need *needs;
  int *first; /* world_size + 1 entries */
} ck_read_plan;

/* Host memory the restored rows of register i land in: the registered memory, or a temporary
 * host buffer for a device tensor (copied to the device after the agreement). */
typedef struct ck_landing {
  void *host;
  size_t bytes;
  int temp;
} ck_landing;

/* Whether this rank reads shard s of m from its host's L1 copy (checkpoint/levels.h): the manifest
 * names this host for it, and the file is there at the manifest's size. The copy is verified in
 * full before its bytes count; a copy that is missing, short or fails is passed over for the run
 * directory's, named in the log. dir gets the copy's folder. */
int ck_l1_copy_of(const ftl_ckpt *ck, const ck_manifest *m, int s, char *dir, size_t size, int quiet);

/* The L2-level copy of shard s this rank reads, if any: one fetched from another host (got[s]: its
 * L2 copy or its owner's L1 copy, in this rank's L1 folder's partner/ under its fetched name), or
 * the L2 copy this host keeps itself when the manifest names this host for it. dir gets the copy's
 * folder and *copy the shard with the copy's file name. Missing or short copies kept here are
 * named in the log unless quiet. */
int ck_l2_copy_of(const ftl_ckpt *ck, const ck_manifest *m, int s, const unsigned char *got, char *dir, size_t size,
                      ck_shard *copy, int quiet);

void ck_free_plan(ck_read_plan *p);

/* Restore's fetch, on every rank (collective): the shards this rank needs and its host's folder
 * holds no copy of are fetched from a live rank whose host holds one, its L1 or its L2 copy
 * (ckpt_l2.c), into the plan's destinations; every rank says what its host holds. got:
 * m->world_size entries. Only a gang failure is returned. */
ftl_err ck_fetch_l2_copies(ftl_ckpt *ck, const ck_manifest *m, const ck_read_plan *p, unsigned char *got, int64_t deadline,
                        ftl_diag *d);

/* Removes the copies fetched for this step (they served this restore only). */
void ck_drop_fetched(const ftl_ckpt *ck, const ck_manifest *m, const unsigned char *got);

/* Copies the landed bytes of device tensors to the device: after the caller's work on its stream
 * (a kernel may still read the old values), and waited for before restore returns, so the data
 * is in place for whatever the caller enqueues next on any stream (docs/gpu.md). */
ftl_err ck_restore_to_device(ftl_ckpt *ck, const ck_landing *land, ftl_diag *d);

/* Plans what this rank reads of manifest m: the rows it holds of every registered item, from
 * whichever shards have them, ck_landing in land. Returns WHY_*; msg says why. */
int ck_plan_local(ftl_ckpt *ck, const ck_manifest *m, const ck_landing *land, ck_read_plan *out, int *missing_blobs,
                      char *msg, size_t msg_size);

/* Loads manifest m into the registered memory on this rank, as planned (shards already fetched and
 * verified from L2, l2_got, are in place). Returns WHY_*; msg says why. */
int ck_load_local(ftl_ckpt *ck, const ck_manifest *m, const char *sd, const unsigned char *l2_got,
                      const ck_read_plan *pl, char *msg, size_t msg_size);

#endif
