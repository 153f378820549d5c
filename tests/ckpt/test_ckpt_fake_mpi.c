/* tests/ckpt/test_ckpt_fake_mpi.c: the checkpoint module over a fake MPI (the seam in
 * rendezvous/mpi_seam.h). MPI is never initialised here, so a checkpoint call that went around the
 * seam would fail. One rank of a world of 1 saves, commits and restores through the fake; then,
 * in a world of 2 whose other rank never comes, the restore agreement and the commit agreement
 * (their MPI_Iallgather never completes) must each return FTL_ERR_TIMEOUT naming what timed out,
 * soon after the deadline and without hanging, and the handle must still be destroyed with
 * everything freed (this test runs under ASan and TSan too). */
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/catalog.h"
#include "ftl/ftl.h"
#include "ftl_test.h"
#include "rendezvous/mpi_seam.h"

#define DEADLINE_MS 300

/* Set by the main thread, read by the writer thread's collectives. */
static atomic_int fake_world = 1, hang_allgather, fake_initialized;

/* Requests are small numbers; the one of a hung allgather never completes. */
enum { REQ_DONE = 1, REQ_HUNG = 2 };
static MPI_Request req_of(int hung) { return (MPI_Request)(uintptr_t)(hung ? REQ_HUNG : REQ_DONE); }

static int f_initialized(int *flag) {
  *flag = atomic_load(&fake_initialized);
  return MPI_SUCCESS;
}
static int f_finalized(int *flag) {
  *flag = 0;
  return MPI_SUCCESS;
}
static int f_init_thread(int *argc, char ***argv, int required, int *provided) {
  (void)argc, (void)argv;
  atomic_store(&fake_initialized, 1);
  *provided = required;
  return MPI_SUCCESS;
}
static int f_finalize(void) {
  atomic_store(&fake_initialized, 0);
  return MPI_SUCCESS;
}
static int f_comm_dup(MPI_Comm comm, MPI_Comm *out) {
  *out = comm;
  return MPI_SUCCESS;
}
static int f_comm_free(MPI_Comm *comm) {
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}
static int f_comm_rank(MPI_Comm comm, int *rank) {
  (void)comm;
  *rank = 0;
  return MPI_SUCCESS;
}
static int f_comm_size(MPI_Comm comm, int *size) {
  (void)comm;
  *size = atomic_load(&fake_world);
  return MPI_SUCCESS;
}
static int f_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out) {
  (void)type, (void)key, (void)info;
  *out = comm;
  return MPI_SUCCESS;
}
static int f_set_errhandler(MPI_Comm comm, MPI_Errhandler h) {
  (void)comm, (void)h;
  return MPI_SUCCESS;
}
static int f_allreduce(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  (void)op, (void)comm;
  int size = type == MPI_INT || type == MPI_FLOAT ? 4 : 8;
  if (send != MPI_IN_PLACE) memcpy(recv, send, (size_t)count * (size_t)size);
  return MPI_SUCCESS;
}
static int f_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  (void)buf, (void)count, (void)type, (void)root, (void)comm;
  return MPI_SUCCESS;
}
static int f_ibarrier(MPI_Comm comm, MPI_Request *req) {
  (void)comm;
  *req = req_of(0);
  return MPI_SUCCESS;
}
static int f_test(MPI_Request *req, int *flag, MPI_Status *status) {
  (void)status;
  *flag = *req != req_of(1);
  if (*flag) *req = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}
static int f_error_string(int code, char *text, int *len) {
  (void)code;
  snprintf(text, MPI_MAX_ERROR_STRING, "fake MPI failure");
  *len = (int)strlen(text);
  return MPI_SUCCESS;
}
static int f_comm_idup(MPI_Comm comm, MPI_Comm *out, MPI_Request *req) {
  *out = comm;
  *req = req_of(0);
  return MPI_SUCCESS;
}
static int f_iallreduce(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                        MPI_Request *req) {
  *req = req_of(0);
  return f_allreduce(send, recv, count, type, op, comm);
}
/* Rank 0's bytes land in every slot: the peers (if any) reported the same. */
static int f_iallgather(const void *send, int send_count, MPI_Datatype send_type, void *recv, int recv_count,
                        MPI_Datatype recv_type, MPI_Comm comm, MPI_Request *req) {
  (void)send_type, (void)recv_type, (void)comm, (void)recv_count;
  for (int r = 0; r < atomic_load(&fake_world); r++)
    memcpy((char *)recv + (size_t)r * (size_t)send_count, send, (size_t)send_count);
  *req = req_of(atomic_load(&hang_allgather));
  return MPI_SUCCESS;
}
static int f_igather(const void *send, int send_count, MPI_Datatype send_type, void *recv, int recv_count,
                     MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request *req) {
  (void)send_type, (void)recv_type, (void)comm, (void)recv_count, (void)root;
  memcpy(recv, send, (size_t)send_count);
  *req = req_of(0);
  return MPI_SUCCESS;
}
static int f_ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *req) {
  (void)buf, (void)count, (void)type, (void)root, (void)comm; /* this rank is the root */
  *req = req_of(0);
  return MPI_SUCCESS;
}

static const rz_mpi_ops fake = {
    .initialized = f_initialized,
    .finalized = f_finalized,
    .init_thread = f_init_thread,
    .finalize = f_finalize,
    .comm_dup = f_comm_dup,
    .comm_free = f_comm_free,
    .comm_rank = f_comm_rank,
    .comm_size = f_comm_size,
    .comm_split_type = f_split_type,
    .comm_set_errhandler = f_set_errhandler,
    .allreduce = f_allreduce,
    .bcast = f_bcast,
    .ibarrier = f_ibarrier,
    .test = f_test,
    .error_string = f_error_string,
    .comm_idup = f_comm_idup,
    .iallreduce = f_iallreduce,
    .iallgather = f_iallgather,
    .igather = f_igather,
    .ibcast = f_ibcast,
};

#define ROWS 6
#define COLS 4

static ftl_ckpt *open_handle(ftl_ctx *ctx, const char *run_dir, float *w, uint64_t *cursor) {
  ftl_ckpt_options o;
  ftl_ckpt_options_init(&o);
  o.run_dir = run_dir;
  o.timeout_ms = DEADLINE_MS;
  ftl_ckpt *ck = NULL;
  CHECK_OK(ftl_ckpt_create(ctx, &o, &ck), "create");
  int64_t shape[2] = {ROWS, COLS};
  CHECK_OK(ftl_ckpt_add_tensor(ck, "w", w, FTL_DTYPE_F32, 2, shape, FTL_CKPT_SPLIT, FTL_CKPT_HOST),
           ftl_ckpt_errmsg(ck));
  CHECK_OK(ftl_ckpt_add_blob(ck, "cursor", cursor, sizeof *cursor, FTL_CKPT_BLOB_GLOBAL), ftl_ckpt_errmsg(ck));
  return ck;
}

static void check_on_time(int64_t t0_ms) {
  int64_t waited = ftl_clock_ms() - t0_ms;
  CHECK(waited >= DEADLINE_MS);
  CHECK(waited < 10 * DEADLINE_MS);
}

int main(void) {
  unsetenv("FTL_RDZV_ADDR"); /* no launcher: the rendezvous is skipped */
  unsetenv("FTL_CKPT_FAULT");
  unsetenv("FTL_CKPT_CRASH_AT");
  setenv("FTL_BACKEND", "mpi", 1);
  rz_mpi_set_ops(&fake);

  char run_dir[PATH_MAX];
  const char *t = getenv("TMPDIR");
  CHECK_OK(ftl_fmt(run_dir, sizeof run_dir, "%s/ftl-ckpt-fake-mpi-XXXXXX", t && *t ? t : "/tmp"), "tmp");
  CHECK(mkdtemp(run_dir));

  /* 1. A world of 1: save, commit and restore, every MPI call through the fake. */
  ftl_ctx *ctx = NULL;
  CHECK_OK(ftl_init(NULL, NULL, &ctx), ftl_ctx_errmsg(ctx));
  float w[ROWS * COLS];
  uint64_t cursor = 42;
  for (int i = 0; i < ROWS * COLS; i++)
    w[i] = (float)i * 0.5f;
  ftl_ckpt *ck = open_handle(ctx, run_dir, w, &cursor);
  CHECK_OK(ftl_ckpt_save(ck, 1), ftl_ckpt_errmsg(ck));
  ftl_ckpt_stats st;
  CHECK_OK(ftl_ckpt_wait(ck, -1, &st), st.errmsg);
  CHECK_INT_EQ(st.step, 1);
  memset(w, 0, sizeof w);
  cursor = 0;
  ftl_ckpt_restore_info info;
  CHECK_OK(ftl_ckpt_restore(ck, &info), info.errmsg);
  CHECK_INT_EQ(info.step, 1);
  CHECK(w[ROWS * COLS - 1] == (float)(ROWS * COLS - 1) * 0.5f);
  CHECK_INT_EQ((int)cursor, 42);
  CHECK_OK(ftl_ckpt_destroy(ck), "destroy");
  CHECK_OK(ftl_finalize(ctx), "finalize");

  /* 2. A world of 2 whose rank 1 never comes: the restore agreement passes its deadline. */
  atomic_store(&fake_world, 2);
  CHECK_OK(ftl_init(NULL, NULL, &ctx), ftl_ctx_errmsg(ctx));
  CHECK_INT_EQ(ftl_ctx_info(ctx)->world_size, 2);
  ck = open_handle(ctx, run_dir, w, &cursor);
  atomic_store(&hang_allgather, 1);
  int64_t t0 = ftl_clock_ms();
  CHECK_INT_EQ(ftl_ckpt_restore(ck, &info), FTL_ERR_TIMEOUT);
  check_on_time(t0);
  CHECK_STR_CONTAINS(info.errmsg, "the restore agreement (MPI_Iallgather) did not complete within 300 ms");
  CHECK_STR_CONTAINS(ftl_ckpt_errmsg(ck), "the restore agreement");
  /* The communicator may still hold the pending request: the handle is broken, not reused. */
  CHECK_INT_EQ(ftl_ckpt_save(ck, 2), FTL_ERR_STATE);
  CHECK_OK(ftl_ckpt_destroy(ck), "destroy after a timed-out restore");

  /* 3. The same world: the commit agreement passes its deadline. The save itself returns at once;
   * the step is abandoned, this rank's shard removed, and the handle broken. */
  atomic_store(&hang_allgather, 0);
  ck = open_handle(ctx, run_dir, w, &cursor);
  atomic_store(&hang_allgather, 1);
  t0 = ftl_clock_ms();
  CHECK_OK(ftl_ckpt_save(ck, 2), ftl_ckpt_errmsg(ck));
  CHECK_INT_EQ(ftl_ckpt_wait(ck, 10 * DEADLINE_MS, &st), FTL_ERR_TIMEOUT);
  check_on_time(t0);
  CHECK_INT_EQ(st.step, 2);
  CHECK_STR_CONTAINS(st.errmsg, "checkpoint of step 2 abandoned: the commit agreement (MPI_Iallgather) did not "
                                "complete within 300 ms");
  CHECK_INT_EQ(ftl_ckpt_in_flight(ck), 0);
  char sd[PATH_MAX], shard[PATH_MAX];
  CHECK_OK(ck_step_dir(ftl_ckpt_dir(ck), 2, sd, sizeof sd), "step dir");
  CHECK_OK(ftl_fmt(shard, sizeof shard, "%s/shard-00000.h5", sd), "shard path");
  CHECK(access(shard, F_OK) != 0);
  CHECK_INT_EQ(ftl_ckpt_save(ck, 3), FTL_ERR_STATE);
  CHECK_OK(ftl_ckpt_destroy(ck), "destroy after a timed-out commit");
  CHECK_OK(ftl_finalize(ctx), "finalize");

  CHECK_INT_EQ(ftl_test_rm_rf(run_dir), 0);
  printf("ok\n");
  return 0;
}
