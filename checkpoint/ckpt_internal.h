/* checkpoint/ckpt_internal.h: what the files of the in-rank checkpoint API (include/ftl/ckpt.h)
 * share: the handle, the registry entry, the records the ranks exchange, and each file's entry
 * points. Private to checkpoint/ckpt*.c; nothing else includes it.
 *
 * The files and their one job each:
 *   ckpt.c          the handle: create/destroy, options, accessors
 *   ckpt_shared.c   the helpers all of them call (last error, events, elapsed time): a leaf
 *   ckpt_state.c    the registry of tensors and blobs, the staging buffers, the snapshot into them
 *   ckpt_coll.c     the collectives with deadlines, every MPI call of the module, over the MPI seam
 *   ckpt_save.c     ftl_ckpt_save/wait/last: the training thread's hand-over to the writer
 *   ckpt_writer.c   the writer thread, the commit protocol, garbage collection
 *   ckpt_restore.c  restore at any world size and its agreement
 *   ckpt_l2.c       the L2 level: partner placement, the transfers of save and restore
 *   l2_tcp.c        the L2 fetch's direct TCP transport: its set-up and socket calls (l2_tcp.h)
 *
 * Threads: the training thread owns the registry and the staging buffers between checkpoints;
 * ftl_ckpt_save hands them to the writer under sync->mu (in_flight = 1) and gets them back when
 * the writer clears in_flight under the same mutex. The writer never touches registered memory. */
#ifndef FTL_CKPT_INTERNAL_H
#define FTL_CKPT_INTERNAL_H

#include <jansson.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "checkpoint/device.h"
#include "checkpoint/levels.h"
#include "checkpoint/manifest.h"
#include "checkpoint/shard.h"
#include "ftl/ckpt.h"
#include "ftl/core.h"

#define CK_DEFAULT_KEEP 3
#define CK_DEFAULT_TIMEOUT_MS 600000
#define CK_DEFAULT_CHUNK (8u << 20)
#define CK_BOUNCE_BYTES (1u << 20)
#define CK_MSG 400

/* What each rank tells the others after writing its shard. */
typedef struct hdr {
  int32_t ok, err;
  int32_t nregs, l1; /* l1: this rank's L1 copy of its shard is in place */
  uint64_t regsig, size, checksum;
  char host[CK_HOST_MAX]; /* this rank's host, for the manifest's l1_host */
  char msg[CK_MSG];
} hdr;

/* One piece record per registered item (item -1: this rank wrote none of it). */
typedef struct rec {
  int64_t item, row_start, row_count;
  uint64_t file_offset, size_bytes, checksum;
} rec;

/* What each rank tells the others at create: its host (L1 and L2 placement), whether it was
 * asked for L2 (FTL_CKPT_L2: 0 no, 1 yes, 2 "auto": on when the gang spans several hosts) and
 * whether its L1 folder is usable (a save below L3 needs one on every rank). */
typedef struct ck_host_rec {
  char host[CK_HOST_MAX];
  int32_t l2, l1;
} ck_host_rec;

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
  int job_level; /* FTL_CKPT_LEVEL_*: where the step goes (ftl_ckpt_save_level, after fallbacks) */
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
  char run_dir[PATH_MAX]; /* whose fence (core/fence.h) every change to base is made under */
  int attempt;            /* this process's attempt (FTL_ATTEMPT), which the fence must name */
  ck_l1 l1;               /* the node-local memory level (checkpoint/levels.h) */
  int restore_l1, restore_l2, restore_l3; /* the last restore's shards read from each level on this rank */
  struct ck_host_rec *hosts;  /* every rank's host, allgathered at create (world entries) */
  int l2_on;                  /* L2 copies are made: asked for (FTL_CKPT_L2=1 or auto) on every rank, several hosts */
  int l2_hosts;               /* distinct hosts of the gang */
  int l1_all;                 /* every rank has an L1 folder: saves below L3 are possible */
  int l1_leader;              /* this rank is the lowest rank on its host: it keeps the host's copy
                                 of an L1/L2 step's manifest in the L1 folder */
  int64_t l2_step;            /* the newest step complete at L2 this handle committed or restored
                                 (-1: none): an L1 save keeps its copies, as they are what a lost
                                 host restores from (docs/checkpoint.md, "Each level at its own cadence") */
  int level_warned;           /* a save's level was raised (said once) */
  int *l2_partner;            /* each rank's partner rank (ckpt_l2.c); -1: none */
  unsigned char *l2_stored, *l2_stored_all; /* save: the shards this rank keeps for a partner; all of them (rank 0) */
  int keep;
  int allow_fresh; /* options.allow_fresh or FTL_CKPT_ALLOW_FRESH=1 */
  int l2_mpi;      /* the L2 transfers over MPI only (FTL_CKPT_L2_TRANSPORT=mpi, the launch record) */
  char job_spec_hash[65]; /* the launch record's FTL_JOB_SPEC_HASH, recorded in each manifest */
  int64_t timeout_ms;
  size_t chunk;
  reg *regs;
  int nregs, cap;
  int registry_frozen; /* staging sized for the registry: a new registration re-prepares */
  unsigned char *stage;
  size_t stage_bytes;
  int stage_pinned;
  ck_dev *dev;
  void *user_stream; /* ftl_ckpt_set_stream: device copies wait for it (NULL: legacy default) */
  void *bounce; /* writer's scratch for HDF5 metadata segments */
  /* The writer's exchange buffers, allocated ahead (hdrs at create, piece records by prepare) so
   * the writer never fails to allocate what it needs to take part in the collectives. */
  struct hdr *hdrs;
  struct verdict_rec *verdicts; /* restore's agreement and the L1 commit's (never at once), world entries */
  struct rec *mine_recs, *recs;
  int64_t last_step;
  int setup_ok[2]; /* create's agreement, kept in the handle for the non-blocking allreduce */
  pthread_t thread;
  int thread_started;
  ck_sync *sync;
  char errmsg[1024];
};

/* ---- ckpt_shared.c ----------------------------------------------------------------------- */

/* Keeps msg as the handle's last error and logs it when rc is not FTL_OK; returns rc. */
ftl_err ck_fail(ftl_ckpt *ck, ftl_err rc, const char *msg);
/* Bounded copy that cuts long detail instead of failing (messages are for people). */
void ck_copy_text(char *dst, size_t size, const char *src);
double ck_ms_since(int64_t t0_ns);
/* "l1", "l2", "l3" for FTL_CKPT_LEVEL_* (events and logs). */
const char *ck_level_name(int level);
/* Sends one event (fields from json_pack, consumed; NULL is ignored). Failures to report are
 * logged, never fatal. */
void ck_emit(ftl_ckpt *ck, const char *event, json_t *fields);

/* ---- ckpt_state.c ------------------------------------------------------------------------ */

/* A hash of what every rank must register identically (not the pointers). */
uint64_t ck_registry_signature(const ftl_ckpt *ck);
/* Copies this rank's written rows into staging: the only part of a checkpoint the loop waits for. */
ftl_err ck_snapshot(ftl_ckpt *ck, ftl_diag *d);
void ck_free_stage(ftl_ckpt *ck);

/* ---- ckpt_coll.c ------------------------------------------------------------------------- */

/* Every collective below is non-blocking underneath and polled until `deadline_ms` (absolute,
 * ftl_deadline_after_ms). `what` names the collective for people ("the commit agreement"); a
 * timeout says "<what> (<MPI call>) did not complete within <timeout_ms> ms". After a timeout or
 * an MPI error the handle is marked broken: the request may still be pending, and another
 * collective on the communicator could match the wrong peers. */
ftl_err ck_coll_barrier(ftl_ckpt *ck, const char *what, int64_t deadline_ms, ftl_diag *d);
ftl_err ck_coll_allgather(ftl_ckpt *ck, const void *send, void *recv, int bytes, const char *what,
                            int64_t deadline_ms, ftl_diag *d);
ftl_err ck_coll_gather(ftl_ckpt *ck, const void *send, void *recv, int bytes, const char *what, int64_t deadline_ms,
                         ftl_diag *d);
ftl_err ck_coll_bcast(ftl_ckpt *ck, void *buf, int bytes, const char *what, int64_t deadline_ms, ftl_diag *d);
/* The same from rank root (an L1/L2 step's manifest is read by a rank whose host keeps it). */
ftl_err ck_coll_bcast_from(ftl_ckpt *ck, int root, void *buf, int bytes, const char *what, int64_t deadline_ms,
                           ftl_diag *d);
/* On the gang's communicator (the handle's own does not exist yet): every rank learns whether
 * every rank's *ok is true, in *all_ok; ok and all_ok must live in the handle (a timed-out request
 * may still write them). */
ftl_err ck_coll_agree_setup(ftl_ckpt *ck, MPI_Comm gang, const int *ok, int *all_ok, int64_t deadline_ms,
                              ftl_diag *d);
/* Duplicates the gang's communicator into ck->comm (errors returned, not fatal) and fills
 * ck->rank and ck->world. */
ftl_err ck_coll_open(ftl_ckpt *ck, MPI_Comm gang, int64_t deadline_ms, ftl_diag *d);
/* Frees ck->comm unless the handle is broken (a pending request may still use it). */
void ck_coll_close(ftl_ckpt *ck);

/* An allgather only started, for a caller that must keep serving sockets while it completes (the
 * L2 transport's agreement, l2_tcp.c): poll req with ck_p2p_test against a deadline. */
ftl_err ck_coll_iallgather(ftl_ckpt *ck, const void *send, void *recv, int bytes, MPI_Request *req, ftl_diag *d);

/* Point-to-point for the L2 transfers, polled by the caller with ck_p2p_test (an MPI error marks
 * the handle broken). *bytes gets the received count when done. ck_p2p_available: the seam has
 * them (a test's fake may not). */
int ck_p2p_available(void);
ftl_err ck_p2p_isend(ftl_ckpt *ck, const void *buf, int bytes, int peer, int tag, MPI_Request *req, ftl_diag *d);
ftl_err ck_p2p_irecv(ftl_ckpt *ck, void *buf, int bytes, int peer, int tag, MPI_Request *req, ftl_diag *d);
ftl_err ck_p2p_test(ftl_ckpt *ck, MPI_Request *req, int *done, int *bytes, ftl_diag *d);

/* ---- ckpt_l2.c --------------------------------------------------------------------------- */

/* Fills ck->l2_partner and ck->l2_hosts from ck->hosts (the same on every rank). */
ftl_err ck_l2_place(ftl_ckpt *ck);
/* Writer thread, every rank, after the commit agreement: sends this rank's shard (own_path, or its
 * L1 copy) to its partner and keeps the shards sent to it; stored[s] = 1 for each one in place
 * (world entries). Only a gang failure (MPI, the deadline) is returned; the rest are warnings. */
ftl_err ck_l2_save(ftl_ckpt *ck, int64_t step, const char *own_path, int64_t deadline_ms, unsigned char *stored,
                   ftl_diag *d);
/* What a rank's host folder holds of a shard, for restore's fetch: its own L1 copy (the manifest's
 * l1_host is this host), or the L2 copy kept for a partner (l2_host), at the manifest's size. */
enum { CK_HOLD_NONE = 0, CK_HOLD_L1 = 1, CK_HOLD_L2 = 2 };
/* Restore, every rank (one allgather, then the transfers): want[s] says this rank wants shard s of m
 * from another host, hold[s] (CK_HOLD_*) what its host's folder holds of it (m->world_size entries
 * each). Each wanted shard is served by one live rank that holds a copy, the same choice on every
 * rank: a rank on the shard's l2_host when one holds it, else any holder, spread over the holders
 * by shard and asking rank. The ranges of shard s this rank needs are needs[first[s]] ..
 * needs[first[s+1]-1] (sorted by offset; first has m->world_size + 1 entries): they are received
 * straight into their destinations, and every byte of the shard is hashed against the manifest as
 * it arrives. got[s] = 1 when the whole shard verified: its needs are in place, and its HDF5
 * metadata (only that: a sparse file) is in its L1 folder's partner/ under ck_l2_fetched_name for
 * the description check. A copy that fails, or a shard no live rank holds, is named in a log line
 * and got[s] stays 0 (whatever landed is to be read again from L3). Only a gang failure is
 * returned. */
ftl_err ck_l2_fetch(ftl_ckpt *ck, const ck_manifest *m, const unsigned char *want, const unsigned char *hold,
                    const ck_need *needs, const int *first, unsigned char *got, int64_t deadline_ms, ftl_diag *d);
ftl_err ck_l2_fetched_name(int shard, int rank, char *out, size_t size);

/* ---- ckpt_writer.c ----------------------------------------------------------------------- */

/* The writer thread's body; arg is the handle. */
void *ck_writer_main(void *arg);

/* ---- ckpt_save.c ------------------------------------------------------------------------- */

/* Waits, s->mu held, until nothing is in flight or the deadline passes (FTL_ERR_TIMEOUT). */
ftl_err ck_wait_idle_locked(ck_sync *s, int64_t deadline_ms);

#endif
