/* tests/ckpt/ckpt_mpi.c: the rank program of the checkpoint's MPI tests, run by run_mpi.sh
 * under a real mpirun. Every value is a function of (item, step, global byte index) (or of the
 * rank, for per-rank blobs), so any world size can check a restore bit-exactly.
 *
 *   ckpt_mpi dtypes  RUNDIR              every dtype, split and replicated, save/restore round trip,
 *                                        δ/W statistics, the one-in-flight rule
 *   ckpt_mpi write   RUNDIR STEP...      saves the test model at each step (must commit)
 *   ckpt_mpi restore RUNDIR EXPECT [BAD] restores; EXPECT is a step, "none" (fresh start) or
 *                                        "corrupt" (committed steps, none usable); BAD = bad steps
 *   ckpt_mpi faults  RUNDIR              ENOSPC / fsync / rename failures injected on rank 1
 *   ckpt_mpi flip    RUNDIR STEP RANK ITEM   (no MPI) flips one byte of ITEM in shard RANK
 *   ckpt_mpi device  RUNDIR              device tensors (skips, 77, without CUDA or a GPU) */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/catalog.h"
#include "core/fs.h"
#include "core/rundir.h"
#include "ftl/ckpt.h"
#include "ftl/core.h"
#include "ftl/rdzv.h"
#include "ftl_test.h"
#include "gpu/gpu_test.h"
#include "checkpoint/manifest.h"
#include <mpi.h>

#ifdef FTL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static int rank, world;

#define RCHECK(cond)                                                                                                   \
  do {                                                                                                                 \
    if (!(cond)) FTL_TEST_FAIL_("rank %d/%d: %s", rank, world, #cond);                                                 \
  } while (0)

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Byte g of item `id` at `step`. */
static unsigned char val(int id, int64_t step, uint64_t g) {
  return (unsigned char)mix(((uint64_t)id << 56) ^ ((uint64_t)step << 32) ^ g);
}

typedef struct tdef {
  const char *name;
  ftl_dtype dtype;
  int ndim;
  int64_t shape[3];
  ftl_ckpt_layout layout;
} tdef;

/* The test model: fewer rows than ranks for some tensors, a 0-d tensor, both layouts. */
static const tdef model[] = {
    {"w", FTL_DTYPE_F32, 2, {13, 5}, FTL_CKPT_SPLIT},      {"emb", FTL_DTYPE_BF16, 2, {3, 4}, FTL_CKPT_SPLIT},
    {"opt.m", FTL_DTYPE_F16, 1, {10}, FTL_CKPT_SPLIT},     {"bias", FTL_DTYPE_F64, 1, {7}, FTL_CKPT_REPLICATED},
    {"count", FTL_DTYPE_I64, 0, {0}, FTL_CKPT_REPLICATED}, {"table", FTL_DTYPE_U32, 3, {5, 2, 3}, FTL_CKPT_REPLICATED},
};
#define NMODEL ((int)(sizeof model / sizeof model[0]))
#define CURSOR_BYTES 24
#define RNG_BYTES 16

typedef struct state {
  void *buf[16];
  size_t bytes[16];
  int64_t row_start[16];
  size_t row_bytes[16];
  int n;
  unsigned char cursor[CURSOR_BYTES], rng[RNG_BYTES];
} state;

static void fill_rows(unsigned char *p, int id, int64_t step, int64_t row_start, size_t row_bytes, size_t bytes) {
  for (size_t k = 0; k < bytes; k++)
    p[k] = val(id, step, (uint64_t)row_start * row_bytes + k);
}

static int check_rows(const unsigned char *p, int id, int64_t step, int64_t row_start, size_t row_bytes, size_t bytes) {
  for (size_t k = 0; k < bytes; k++)
    if (p[k] != val(id, step, (uint64_t)row_start * row_bytes + k)) return 0;
  return 1;
}

static void register_defs(ftl_ckpt *ck, state *st, const tdef *defs, int n, int with_blobs) {
  st->n = n;
  for (int i = 0; i < n; i++) {
    const tdef *t = &defs[i];
    size_t rb = ftl_dtype_size(t->dtype);
    for (int k = 1; k < t->ndim; k++)
      rb *= (size_t)t->shape[k];
    int64_t rows = t->ndim ? t->shape[0] : 1, start = 0, count = rows;
    if (t->layout == FTL_CKPT_SPLIT) ftl_ckpt_split_rows(rows, rank, world, &start, &count);
    st->row_start[i] = start;
    st->row_bytes[i] = rb;
    st->bytes[i] = (size_t)count * rb;
    st->buf[i] = calloc(1, st->bytes[i] + 1);
    CHECK_OK(ftl_ckpt_add_tensor(ck, t->name, st->buf[i], t->dtype, t->ndim, t->shape, t->layout, FTL_CKPT_HOST),
             ftl_ckpt_errmsg(ck));
  }
  if (with_blobs) {
    CHECK_OK(ftl_ckpt_add_blob(ck, "cursor", st->cursor, CURSOR_BYTES, FTL_CKPT_BLOB_GLOBAL), ftl_ckpt_errmsg(ck));
    CHECK_OK(ftl_ckpt_add_blob(ck, "rng", st->rng, RNG_BYTES, FTL_CKPT_BLOB_PER_RANK), ftl_ckpt_errmsg(ck));
  }
}

static void fill_state(state *st, int64_t step) {
  for (int i = 0; i < st->n; i++)
    fill_rows(st->buf[i], i, step, st->row_start[i], st->row_bytes[i], st->bytes[i]);
  fill_rows(st->cursor, 100, step, 0, 1, CURSOR_BYTES);
  fill_rows(st->rng, 200 + rank, step, 0, 1, RNG_BYTES);
}

static void clear_state(state *st) {
  for (int i = 0; i < st->n; i++)
    memset(st->buf[i], 0xEE, st->bytes[i]);
  memset(st->cursor, 0xEE, sizeof st->cursor);
  memset(st->rng, 0xEE, sizeof st->rng);
}

static void check_state(const state *st, int64_t step, int rng_expected, const tdef *defs) {
  for (int i = 0; i < st->n; i++)
    if (!check_rows(st->buf[i], i, step, st->row_start[i], st->row_bytes[i], st->bytes[i]))
      FTL_TEST_FAIL_("rank %d/%d: tensor '%s' differs from step %lld", rank, world, defs[i].name, (long long)step);
  RCHECK(check_rows(st->cursor, 100, step, 0, 1, CURSOR_BYTES));
  if (rng_expected) RCHECK(check_rows(st->rng, 200 + rank, step, 0, 1, RNG_BYTES));
}

static void free_state(state *st) {
  for (int i = 0; i < st->n; i++)
    free(st->buf[i]);
}

static ftl_ckpt *open_ckpt(ftl_ctx *ctx, const char *rundir) {
  ftl_ckpt_options o;
  ftl_ckpt_options_init(&o);
  o.run_dir = rundir;
  o.timeout_ms = 60000;
  o.chunk_bytes = 4096; /* many chunks even for small tensors: exercises the chunk logic */
  ftl_ckpt *ck = NULL;
  CHECK_OK(ftl_ckpt_create(ctx, &o, &ck), "ftl_ckpt_create");
  return ck;
}

static void save_ok(ftl_ckpt *ck, int64_t step) {
  CHECK_OK(ftl_ckpt_save(ck, step), ftl_ckpt_errmsg(ck));
  ftl_ckpt_stats s;
  ftl_err rc = ftl_ckpt_wait(ck, -1, &s);
  if (rc) FTL_TEST_FAIL_("rank %d: step %lld: %s", rank, (long long)step, s.errmsg);
  RCHECK(s.step == step);
}

/* ---- modes ------------------------------------------------------------------------------- */

static int mode_dtypes(ftl_ctx *ctx, const char *rundir) {
  tdef defs[12];
  char names[12][16];
  for (int i = 0; i < 10; i++) {
    snprintf(names[i], sizeof names[i], "t_%s", ftl_dtype_name((ftl_dtype)i));
    defs[i] = (tdef){names[i], (ftl_dtype)i, 2, {5 + i, 3, 0}, FTL_CKPT_SPLIT};
  }
  defs[10] = (tdef){"rep_u8", FTL_DTYPE_U8, 1, {9, 0, 0}, FTL_CKPT_REPLICATED};
  defs[11] = (tdef){"rep_bf16", FTL_DTYPE_BF16, 2, {2, 3, 0}, FTL_CKPT_REPLICATED};
  ftl_ckpt *ck = open_ckpt(ctx, rundir);
  state st;
  memset(&st, 0, sizeof st);
  register_defs(ck, &st, defs, 12, 1);
  ftl_ckpt_stats s;
  RCHECK(ftl_ckpt_last(ck, &s) == FTL_ERR_NOTFOUND);
  ftl_ckpt_restore_info info;
  RCHECK(ftl_ckpt_restore(ck, &info) == FTL_ERR_NOTFOUND);
  RCHECK(info.step == -1 && info.committed_found == 0);
  /* Nothing saved yet: nothing is pending, so a wait returns at once. */
  RCHECK(ftl_ckpt_wait(ck, -1, &s) == FTL_OK && s.step == -1 && s.level == 0);
  CHECK_OK(ftl_ckpt_prepare(ck), ftl_ckpt_errmsg(ck));

  fill_state(&st, 10);
  save_ok(ck, 10);
  RCHECK(ftl_ckpt_last(ck, &s) == FTL_OK);
  RCHECK(s.step == 10 && s.err == FTL_OK && s.stall_ms > 0 && s.durable_ms >= s.stall_ms && s.shard_bytes > 0);
  if (rank == 0) RCHECK(s.total_bytes >= s.shard_bytes);
  /* Steps only move forward; the last one again is already saved: nothing is written. */
  RCHECK(ftl_ckpt_save(ck, 9) == FTL_ERR_INVAL);
  RCHECK(strstr(ftl_ckpt_errmsg(ck), "step 9 is before step 10") != NULL);
  RCHECK(ftl_ckpt_save(ck, 10) == FTL_OK && !ftl_ckpt_in_flight(ck));
  RCHECK(ftl_ckpt_last(ck, &s) == FTL_OK && s.step == 10);

  /* Two saves back to back: the second waits for the first (one in flight) and both commit. */
  fill_state(&st, 20);
  CHECK_OK(ftl_ckpt_save(ck, 20), ftl_ckpt_errmsg(ck));
  fill_state(&st, 30); /* the registered memory is free to change once save returns */
  CHECK_OK(ftl_ckpt_save(ck, 30), ftl_ckpt_errmsg(ck));
  RCHECK(ftl_ckpt_wait(ck, -1, &s) == FTL_OK);
  RCHECK(s.step == 30 && s.wait_prev_ms >= 0 && s.stall_ms >= s.wait_prev_ms);
  RCHECK(!ftl_ckpt_in_flight(ck));

  clear_state(&st);
  CHECK_OK(ftl_ckpt_restore(ck, &info), info.errmsg);
  RCHECK(info.step == 30 && info.written_world_size == world && info.committed_found == 3 && info.bad_steps == 0);
  check_state(&st, 30, 1, defs);

  /* Keep rule: 3 by default; after a fourth commit the oldest goes. */
  fill_state(&st, 40);
  save_ok(ck, 40);
  if (rank == 0) {
    ck_step_entry *v = NULL;
    int n = 0;
    CHECK_OK(ck_list_steps(ftl_ckpt_dir(ck), &v, &n, NULL), "list");
    CHECK_INT_EQ(n, 3);
    CHECK_INT_EQ(v[0].step, 40);
    CHECK_INT_EQ(v[2].step, 20);
    ftl_free(v);
  }
  CHECK_OK(ftl_ckpt_destroy(ck), "destroy");

  /* A program that registers something else (here: another global shape) cannot use these
   * steps; restore says so and does not mark the (healthy) steps bad. */
  ck = open_ckpt(ctx, rundir);
  int64_t other[2] = {999, 3};
  float *big = calloc(999 * 3, sizeof *big);
  CHECK_OK(ftl_ckpt_add_tensor(ck, names[0], big, FTL_DTYPE_F32, 2, other, FTL_CKPT_REPLICATED, FTL_CKPT_HOST),
           ftl_ckpt_errmsg(ck));
  RCHECK(ftl_ckpt_restore(ck, &info) == FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(info.errmsg, "another shape");
  RCHECK(info.bad_steps == 0);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    ck_step_entry *v = NULL;
    int n = 0;
    CHECK_OK(ck_list_steps(ftl_ckpt_dir(ck), &v, &n, NULL), "list");
    for (int i = 0; i < n; i++)
      RCHECK(v[i].state == CK_STEP_COMMITTED);
    ftl_free(v);
  }
  CHECK_OK(ftl_ckpt_destroy(ck), "destroy");
  free(big);

  /* keep = 1 is raised to 2; older folders without a manifest go, newer ones stay (they may be
   * the next step being written). */
  char keepdir[PATH_MAX], junk[PATH_MAX];
  CHECK_OK(ftl_fmt(keepdir, sizeof keepdir, "%s-keep", rundir), "path");
  ftl_ckpt_options o;
  ftl_ckpt_options_init(&o);
  o.run_dir = keepdir;
  o.keep = 1;
  CHECK_OK(ftl_ckpt_create(ctx, &o, &ck), "create");
  free_state(&st);
  memset(&st, 0, sizeof st);
  register_defs(ck, &st, defs, 0, 1);
  if (rank == 0) {
    CHECK_OK(ck_step_dir(ftl_ckpt_dir(ck), 5, junk, sizeof junk), "dir");
    CHECK_OK(ftl_mkdir_p(junk, NULL), "mkdir");
    CHECK_OK(ck_step_dir(ftl_ckpt_dir(ck), 99, junk, sizeof junk), "dir");
    CHECK_OK(ftl_mkdir_p(junk, NULL), "mkdir");
  }
  for (int64_t k = 10; k <= 30; k += 10)
    save_ok(ck, k);
  if (rank == 0) {
    ck_step_entry *v = NULL;
    int n = 0;
    CHECK_OK(ck_list_steps(ftl_ckpt_dir(ck), &v, &n, NULL), "list");
    CHECK_INT_EQ(n, 3);
    CHECK(v[0].step == 99 && v[0].state == CK_STEP_INCOMPLETE);
    CHECK(v[1].step == 30 && v[1].state == CK_STEP_COMMITTED);
    CHECK(v[2].step == 20 && v[2].state == CK_STEP_COMMITTED);
    ftl_free(v);
  }
  CHECK_OK(ftl_ckpt_destroy(ck), "destroy");
  free_state(&st);
  return 0;
}

static int mode_write(ftl_ctx *ctx, const char *rundir, int nsteps, char **steps) {
  ftl_ckpt *ck = open_ckpt(ctx, rundir);
  state st;
  memset(&st, 0, sizeof st);
  register_defs(ck, &st, model, NMODEL, 1);
  for (int i = 0; i < nsteps; i++) {
    int64_t step;
    CHECK_OK(ftl_parse_i64(steps[i], 0, INT64_MAX, &step), steps[i]);
    fill_state(&st, step);
    save_ok(ck, step);
  }
  CHECK_OK(ftl_ckpt_destroy(ck), "destroy");
  free_state(&st);
  return 0;
}

static int mode_restore(ftl_ctx *ctx, int nargs, char **args) {
  /* restore RUNDIR EXPECT [BAD] [RUNDIR EXPECT BAD]...: several run directories in one run. */
  for (int a = 0; a + 1 < nargs; a += 3) {
    const char *rundir = args[a], *expect = args[a + 1];
    int64_t bad = -1;
    if (a + 2 < nargs) CHECK_OK(ftl_parse_i64(args[a + 2], 0, 1000, &bad), args[a + 2]);
    ftl_ckpt *ck = open_ckpt(ctx, rundir);
    state st;
    memset(&st, 0, sizeof st);
    register_defs(ck, &st, model, NMODEL, 1);
    clear_state(&st);
    ftl_ckpt_restore_info info;
    ftl_err rc = ftl_ckpt_restore(ck, &info);
    if (rank == 0)
      printf("restore %s: rc %s step %lld written by %d, committed %d, bad %d: %s\n", rundir, ftl_err_name(rc),
             (long long)info.step, info.written_world_size, info.committed_found, info.bad_steps, info.errmsg);
    if (strcmp(expect, "none") == 0) {
      RCHECK(rc == FTL_ERR_NOTFOUND && info.step == -1);
    } else if (strcmp(expect, "corrupt") == 0) {
      RCHECK(rc == FTL_ERR_CORRUPT && info.step == -1 && info.committed_found > 0);
      RCHECK(strstr(info.errmsg, "none usable") != NULL);
    } else {
      int64_t step;
      CHECK_OK(ftl_parse_i64(expect, 0, INT64_MAX, &step), expect);
      if (rc) FTL_TEST_FAIL_("rank %d: restore failed: %s", rank, info.errmsg);
      RCHECK(info.step == step);
      check_state(&st, step, rank < info.written_world_size, model);
      RCHECK(info.per_rank_blobs_missing == (rank < info.written_world_size ? 0 : 1));
    }
    if (bad >= 0) RCHECK(info.bad_steps == bad);
    CHECK_OK(ftl_ckpt_destroy(ck), "destroy");
    free_state(&st);
  }
  return 0;
}

static int mode_faults(ftl_ctx *ctx, const char *rundir) {
  ftl_ckpt *ck = open_ckpt(ctx, rundir);
  state st;
  memset(&st, 0, sizeof st);
  register_defs(ck, &st, model, NMODEL, 1);
  fill_state(&st, 10);
  save_ok(ck, 10);
  struct {
    core_fault_op op;
    int err;
    ftl_err want;
    const char *text;
  } cases[] = {
      {FTL_FAULT_WRITE, ENOSPC, FTL_ERR_NOSPC, "No space left on device"},
      {FTL_FAULT_FSYNC, EIO, FTL_ERR_IO, "fsync of"},
      {FTL_FAULT_RENAME, EIO, FTL_ERR_IO, "rename of"},
  };
  int64_t step = 10;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    step += 10;
    fill_state(&st, step);
    if (rank == world - 1) core_fault_set(cases[c].op, 1, cases[c].err);
    CHECK_OK(ftl_ckpt_save(ck, step), ftl_ckpt_errmsg(ck)); /* starting is fine: the failure is async */
    ftl_ckpt_stats s;
    ftl_err rc = ftl_ckpt_wait(ck, -1, &s);
    core_fault_clear();
    if (rank == 0) printf("step %lld: %s: %s\n", (long long)step, ftl_err_name(rc), s.errmsg);
    RCHECK(rc == cases[c].want && s.err == cases[c].want && s.step == step);
    CHECK_STR_CONTAINS(s.errmsg, cases[c].text);
    char who[32];
    snprintf(who, sizeof who, "rank %d:", world - 1);
    CHECK_STR_CONTAINS(s.errmsg, who);
    /* The loop goes on: the next checkpoint commits. */
    step += 10;
    fill_state(&st, step);
    save_ok(ck, step);
  }
  /* Staging that fails on one rank (its allocation, here) abandons the step on every rank. */
  unsigned char extra[100];
  memset(extra, 7, sizeof extra);
  CHECK_OK(ftl_ckpt_add_blob(ck, "extra", extra, sizeof extra, FTL_CKPT_BLOB_PER_RANK), ftl_ckpt_errmsg(ck));
  if (rank == world - 1) ftl_alloc_fail_nth(1);
  step = 80;
  fill_state(&st, step);
  CHECK_OK(ftl_ckpt_save(ck, step), ftl_ckpt_errmsg(ck));
  {
    ftl_ckpt_stats s;
    ftl_err rc = ftl_ckpt_wait(ck, -1, &s);
    ftl_alloc_fail_nth(0);
    if (rank == 0) printf("step %lld: %s: %s\n", (long long)step, ftl_err_name(rc), s.errmsg);
    RCHECK(rc == FTL_ERR_NOMEM);
    CHECK_STR_CONTAINS(s.errmsg, "staging failed");
  }
  step = 90;
  fill_state(&st, step);
  save_ok(ck, step);
  /* Earlier checkpoints untouched, the abandoned ones never committed. */
  if (rank == 0) {
    ck_step_entry *v = NULL;
    int n = 0;
    CHECK_OK(ck_list_steps(ftl_ckpt_dir(ck), &v, &n, NULL), "list");
    for (int i = 0; i < n; i++)
      printf("  step %lld state %d\n", (long long)v[i].step, (int)v[i].state);
    for (int i = 0; i < n; i++)
      RCHECK(v[i].state == CK_STEP_COMMITTED);
    RCHECK(n == 3 && v[0].step == 90 && v[1].step == 70 && v[2].step == 50);
    ftl_free(v);
  }
  clear_state(&st);
  ftl_ckpt_restore_info info;
  CHECK_OK(ftl_ckpt_restore(ck, &info), info.errmsg);
  RCHECK(info.step == 90);
  check_state(&st, 90, 1, model);
  CHECK_OK(ftl_ckpt_destroy(ck), "destroy");
  free_state(&st);
  return 0;
}

static int mode_device(ftl_ctx *ctx, const char *rundir) {
#ifdef FTL_HAVE_CUDA
  ftl_test_require_gpu(); /* skip without a GPU, fail with a broken one */
  ftl_ckpt *ck = open_ckpt(ctx, rundir);
  int64_t shape[1] = {1 << 20};
  int64_t start, count;
  ftl_ckpt_split_rows(shape[0], rank, world, &start, &count);
  size_t bytes = (size_t)count * 4;
  unsigned char *host = malloc(bytes), *back = malloc(bytes);
  void *dev = NULL;
  RCHECK(cudaMalloc(&dev, bytes) == cudaSuccess);
  fill_rows(host, 7, 10, start, 4, bytes);
  RCHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK_OK(ftl_ckpt_add_tensor(ck, "dev_w", dev, FTL_DTYPE_F32, 1, shape, FTL_CKPT_SPLIT, FTL_CKPT_DEVICE),
           ftl_ckpt_errmsg(ck));
  save_ok(ck, 10);
  RCHECK(cudaMemset(dev, 0, bytes) == cudaSuccess);
  ftl_ckpt_restore_info info;
  CHECK_OK(ftl_ckpt_restore(ck, &info), info.errmsg);
  RCHECK(cudaMemcpy(back, dev, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  RCHECK(memcmp(host, back, bytes) == 0);
  CHECK_OK(ftl_ckpt_destroy(ck), "destroy");
  cudaFree(dev);
  free(host);
  free(back);
  return 0;
#else
  (void)ctx;
  (void)rundir;
  FTL_SKIP("built without CUDA");
#endif
}

/* Flips one byte in the middle of ITEM's piece in shard RANK of STEP (no MPI). */
static int mode_flip(const char *rundir, const char *step_text, const char *rank_text, const char *item) {
  char base[PATH_MAX], sd[PATH_MAX], path[PATH_MAX];
  int64_t step, r;
  CHECK_OK(ftl_parse_i64(step_text, 0, INT64_MAX, &step), step_text);
  CHECK_OK(ftl_parse_i64(rank_text, 0, 1 << 20, &r), rank_text);
  CHECK_OK(core_rundir_path(base, sizeof base, rundir, FTL_RUNDIR_CHECKPOINTS), "path");
  ck_manifest *m = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(ck_read_manifest(base, step, &m, NULL, NULL, &d), d.msg);
  int it = ck_manifest_find_item(m, item);
  CHECK(it >= 0 && r < m->world_size);
  const ck_shard *sh = &m->shards[r];
  const ck_piece *pc = NULL;
  for (int p = 0; p < sh->npieces; p++)
    if (sh->pieces[p].item == it) pc = &sh->pieces[p];
  CHECK(pc != NULL);
  CHECK_OK(ck_step_dir(base, step, sd, sizeof sd), "dir");
  CHECK_OK(ftl_fmt(path, sizeof path, "%s/%s", sd, sh->file), "path");
  int fd = open(path, O_RDWR);
  CHECK(fd >= 0);
  off_t at = (off_t)(pc->file_offset + pc->size_bytes / 2);
  unsigned char b;
  CHECK(pread(fd, &b, 1, at) == 1);
  b ^= 0x01;
  CHECK(pwrite(fd, &b, 1, at) == 1);
  close(fd);
  ck_manifest_free(m);
  printf("flipped byte %lld of %s\n", (long long)at, path);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: ckpt_mpi dtypes|write|restore|faults|device|flip RUNDIR ...\n");
    return 2;
  }
  const char *mode = argv[1];
  if (strcmp(mode, "flip") == 0) {
    if (argc != 6) return 2;
    return mode_flip(argv[2], argv[3], argv[4], argv[5]);
  }
  ftl_ctx *ctx = NULL;
  ftl_err rc = ftl_init(&argc, &argv, &ctx);
  if (rc) FTL_TEST_FAIL_("ftl_init: %s: %s", ftl_strerror(rc), ctx ? ftl_ctx_errmsg(ctx) : "");
  rank = ftl_ctx_info(ctx)->rank;
  world = ftl_ctx_info(ctx)->world_size;
  int ret = 2;
  if (strcmp(mode, "dtypes") == 0)
    ret = mode_dtypes(ctx, argv[2]);
  else if (strcmp(mode, "write") == 0)
    ret = mode_write(ctx, argv[2], argc - 3, argv + 3);
  else if (strcmp(mode, "restore") == 0)
    ret = mode_restore(ctx, argc - 2, argv + 2);
  else if (strcmp(mode, "faults") == 0)
    ret = mode_faults(ctx, argv[2]);
  else if (strcmp(mode, "device") == 0)
    ret = mode_device(ctx, argv[2]);
  ftl_finalize(ctx);
  return ret;
}
