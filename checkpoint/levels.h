/* checkpoint/levels.h: the checkpoint levels below the run directory (docs/checkpoint.md, "Levels").
 *
 * L1 is a node-local folder in memory (a tmpfs such as /dev/shm) that outlives the rank processes:
 * every rank keeps there a byte-identical copy of the shards it wrote of the newest committed step,
 * within a size limit, the older steps evicted. L3 is the run directory's checkpoints/, as always:
 * a step is committed by its manifest there, and the L1 copies only ever serve a restore after the
 * manifest says which shard files (sizes, checksums) the step has. A copy that is missing, short or
 * does not verify against the manifest is passed over for L3, with a message naming it.
 *
 * Layout: L1ROOT/ftl-<16 hex digits: XXH3 of the run directory's path>/step-<8 digits>/shard-<5
 * digits>.h5, so two runs on one host never share a folder, and a new boot (the memory gone) simply
 * finds nothing. The run's folder must be a private (0700) folder of this user, not a link: the
 * root is usually the world-writable /dev/shm. Written through the file seam (core/fs.h).
 *
 * L2 is a copy of a host's L1 shards in the L1 folder of a partner host (docs/checkpoint.md, "L2"):
 * L1ROOT/ftl-<hash>/step-<8 digits>/partner/shard-<5 digits>.h5, kept by the rank that received it
 * within the same size limit (per shard), its older steps evicted first. The transfer is
 * ckpt_l2.c's.
 *
 * Not here: the shard bytes (shard.c tees them into the L1 file as it writes L3's). */
#ifndef FTL_CKPT_LEVELS_H
#define FTL_CKPT_LEVELS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "checkpoint/door.h"
#include "ftl/error.h"

/* The L1 level of one handle: its folder for this run ("" when L1 is off) and its size limit. */
typedef struct ck_l1 {
  char dir[4096];     /* L1ROOT/ftl-<hash>; "" when off */
  uint64_t max_bytes; /* the most this rank keeps there (its own shards); 0: no limit of its own */
  int warned;         /* a step without a copy was reported (once at warn level) */
} ck_l1;

/* The L1 level for run_dir: root from want (NULL or "": off; ftl_ckpt_create passes the options'
 * l1_dir or the launch record's FTL_CKPT_L1_DIR), limit max_bytes (0: none of its own). A root that is not an absolute
 * folder, is longer than CK_L1_ROOT_MAX or is ck_l1_root_unguarded turns L1 off with a warning
 * naming it and why (never an error: L3 is the level that must work). */
void ck_l1_setup(ck_l1 *l1, const char *run_dir, const char *want, uint64_t max_bytes);

/* L1DIR/step-<step> into out. */
ftl_err ck_l1_step_dir(const ck_l1 *l1, int64_t step, char *out, size_t size);

/* Makes room for a shard of `bytes` of this rank (rank) at step: evicts this rank's copies of
 * other steps, oldest first, and says whether the copy fits (the limit, and the folder's free
 * space). 1: write it; 0: skip L1 for this step (why in why). Creates the step's folder. */
int ck_l1_make_room(const ck_l1 *l1, int rank, int64_t step, uint64_t bytes, char *why, size_t why_size);

/* After step committed: removes this rank's copies of every other step (and step folders left
 * empty). */
void ck_l1_keep_only(const ck_l1 *l1, int rank, int64_t step);

/* The same keeping two steps: step and also (-1: none). An L1 save keeps the newest step complete
 * at L2 besides its own (docs/checkpoint.md, "Each level at its own cadence"). */
void ck_l1_keep_two(const ck_l1 *l1, int rank, int64_t step, int64_t also);

/* Removes this rank's copy of step (an abandoned checkpoint's). */
void ck_l1_drop(const ck_l1 *l1, int rank, int64_t step);

/* An L1/L2 step (saved below L3) is committed by a copy of its manifest in every host's L1 folder,
 * L1DIR/step-<8 digits>/manifest.json, written by the host's lowest rank; the step folders of L1
 * are listed and read with the catalog's functions (checkpoint/catalog.h) on L1DIR. */
ftl_err ck_l1_manifest_path(const ck_l1 *l1, int64_t step, char *out, size_t size);

/* The steps with a manifest in this host's L1 folder, newest first, at most max; their count. */
int ck_l1_list_committed(const ck_l1 *l1, int64_t *steps, int max);

/* Removes the L1 manifests of every step but step and also (-1: none), each step's folder with it
 * once empty (the host's lowest rank, after a commit). */
void ck_l1_drop_manifests(const ck_l1 *l1, int64_t step, int64_t also);

/* The L2 copies' folder inside a step's L1 folder. */
#define CK_L2_SUB "partner"

/* L1DIR/step-<step>/partner into out. */
ftl_err ck_l2_step_dir(const ck_l1 *l1, int64_t step, char *out, size_t size);

/* ck_l1_make_room for the L2 copy of shard `shard` that this rank keeps for a partner: evicts the
 * copies of that shard of other steps, oldest first, within the same limit; creates the folder. */
int ck_l2_make_room(const ck_l1 *l1, int shard, int64_t step, uint64_t bytes, char *why, size_t why_size);

/* After step committed: removes the L2 copies of shard of every other step. */
void ck_l2_keep_only(const ck_l1 *l1, int shard, int64_t step);

/* ck_l1_keep_two for the L2 copies of shard. */
void ck_l2_keep_two(const ck_l1 *l1, int shard, int64_t step, int64_t also);

/* Removes the L2 copy of shard at step (an abandoned checkpoint's, or one that failed). */
void ck_l2_drop(const ck_l1 *l1, int shard, int64_t step);

/* This host's L1 folder of run_dir under root into out, for a reader (`ftl ckpt ls`): 1 when it
 * exists and is this user's own folder, not a link and writable by nobody else; 0 otherwise. */
int ck_l1_find_run(const char *root, const char *run_dir, char *out, size_t size);

#endif
