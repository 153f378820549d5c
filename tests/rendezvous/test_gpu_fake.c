/* tests/rendezvous/test_gpu_fake.c: the GPU paths of the in-rank library over a fake GPU seam
 * (rendezvous/gpu_seam.h) and a fake MPI (rendezvous/mpi_seam.h), on a machine without a GPU:
 *   1. backend choice: NCCL only when every local rank has its own device (1, 2, 4 ranks over 1
 *      and 2 fake devices), agreed by all ranks (a peer's answer changes ours);
 *   2. memory kinds: host buffers go through MPI on the NCCL backend, device ones through NCCL,
 *      mixed ones are refused; device buffers on the MPI backend are staged through host memory;
 *   3. NCCL set-up: a non-blocking init that never finishes ends in FTL_ERR_TIMEOUT on time with
 *      ncclCommAbort called; a peer's failure fails every rank;
 *   4. ordering: event on the caller's stream -> ftl's stream waits -> collective; checkpoint
 *      copies after the caller's stream, and their sync waits until the (deferred) bytes landed;
 *   5. after a NCCL error the communicator is aborted (never destroyed) and later calls return
 *      FTL_ERR_STATE naming the first error.
 * Each fake call is appended to a log, and the checks read the order of calls from it. */
#include <stdlib.h>
#include <string.h>

#include "checkpoint/device.h"
#include "ftl/ftl.h"
#include "ftl_test.h"
#include "rendezvous/gpu_seam.h"
#include "rendezvous/mpi_seam.h"

#include "fake_gpu.h"
#include "fake_mpi.h"

/* ---- the fake MPI: rank `f_rank` of `f_size` ranks on one host ----------------------------- */

static int f_rank, f_size = 1, mpi_initialized, mpi_allreduces;
/* What the other ranks contribute to the next int allreduces: MIN of 2 (GPU count, own device)
 * and MAX of 1 (set-up failed). -1: no peer opinion. */
static int peer_min[2] = {-1, -1}, peer_max = -1;

static int f_initialized(int *flag) { *flag = mpi_initialized; return MPI_SUCCESS; }
static int f_init_thread(int *argc, char ***argv, int required, int *provided) {
  (void)argc, (void)argv;
  mpi_initialized = 1;
  *provided = required;
  return MPI_SUCCESS;
}
static int f_finalize(void) { mpi_initialized = 0; return MPI_SUCCESS; }
static int f_comm_rank(MPI_Comm comm, int *rank) { (void)comm; *rank = f_rank; return MPI_SUCCESS; }
static int f_comm_size(MPI_Comm comm, int *size) { (void)comm; *size = f_size; return MPI_SUCCESS; }
static int f_allreduce(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  (void)comm;
  int size = type == MPI_INT || type == MPI_FLOAT ? 4 : 8;
  if (send != MPI_IN_PLACE) memcpy(recv, send, (size_t)count * (size_t)size);
  int *v = recv;
  if (type == MPI_INT && op == MPI_MIN && count == 2) {
    for (int i = 0; i < 2; i++)
      if (peer_min[i] >= 0 && peer_min[i] < v[i]) v[i] = peer_min[i];
    return MPI_SUCCESS;
  }
  if (type == MPI_INT && op == MPI_MAX && count == 1) {
    if (peer_max > v[0]) v[0] = peer_max;
    return MPI_SUCCESS;
  }
  /* A reduction of data: every rank contributed the same values (sum = world x value). */
  if (type == MPI_FLOAT && op == MPI_SUM)
    for (int i = 0; i < count; i++) ((float *)recv)[i] *= (float)f_size;
  mpi_allreduces++;
  log_call("mpi_allreduce", NULL);
  return MPI_SUCCESS;
}
static int f_test(MPI_Request *req, int *flag, MPI_Status *status) { (void)req, (void)status; *flag = 1; return MPI_SUCCESS; }
static const rz_mpi_ops fake_mpi = {FAKE_MPI_SHARED_OPS,
                                     .initialized = f_initialized, .init_thread = f_init_thread,
                                     .finalize = f_finalize, .comm_rank = f_comm_rank, .comm_size = f_comm_size,
                                     .allreduce = f_allreduce, .test = f_test};

static void reset(int rank, int size, int devices) {
  f_rank = rank, f_size = size;
  peer_min[0] = peer_min[1] = peer_max = -1;
  mpi_allreduces = 0;
  fake_gpu_reset(devices);
  unsetenv("FTL_BACKEND");
}

/* ftl_init on rank `rank` of `size` with `devices` fake GPUs: its backend and device. */
static void expect_backend(int rank, int size, int devices, ftl_backend backend, int device) {
  reset(rank, size, devices);
  ftl_ctx *ctx = NULL;
  CHECK_OK(ftl_init(NULL, NULL, &ctx), ftl_ctx_errmsg(ctx));
  if ((int)ftl_ctx_info(ctx)->backend != (int)backend || ftl_ctx_info(ctx)->device != device)
    FTL_TEST_FAIL_("rank %d of %d, %d GPUs: backend %d device %d, expected %d %d", rank, size, devices,
                   (int)ftl_ctx_info(ctx)->backend, ftl_ctx_info(ctx)->device, (int)backend, device);
  CHECK_INT_EQ(n_init, backend == FTL_BACKEND_NCCL ? 1 : 0);
  CHECK_OK(ftl_finalize(ctx), "finalize");
  if (backend == FTL_BACKEND_NCCL) CHECK_INT_EQ(n_destroy, 1);
  CHECK_INT_EQ(n_abort, 0);
}

static void test_backend_choice(void) {
  expect_backend(0, 1, 1, FTL_BACKEND_NCCL, 0);
  expect_backend(0, 2, 1, FTL_BACKEND_MPI, -1); /* two ranks, one GPU: NCCL would refuse it */
  expect_backend(1, 2, 1, FTL_BACKEND_MPI, -1);
  expect_backend(0, 2, 2, FTL_BACKEND_NCCL, 0);
  expect_backend(1, 2, 2, FTL_BACKEND_NCCL, 1);
  expect_backend(3, 4, 2, FTL_BACKEND_MPI, -1);
  expect_backend(2, 4, 4, FTL_BACKEND_NCCL, 2);
  expect_backend(0, 4, 0, FTL_BACKEND_MPI, -1);

  /* Collective: this rank has its own GPU, another host's rank does not: every rank takes MPI. */
  reset(0, 2, 2);
  peer_min[1] = 0;
  ftl_ctx *ctx = NULL;
  CHECK_OK(ftl_init(NULL, NULL, &ctx), ftl_ctx_errmsg(ctx));
  CHECK_INT_EQ(ftl_ctx_info(ctx)->backend, FTL_BACKEND_MPI);
  CHECK_INT_EQ(n_init, 0);
  CHECK_OK(ftl_finalize(ctx), "finalize");

  /* Forced NCCL with more ranks than GPUs: a clear refusal, not NCCL's "duplicate GPU". */
  reset(0, 2, 1);
  setenv("FTL_BACKEND", "nccl", 1);
  CHECK_INT_EQ(ftl_init(NULL, NULL, &ctx), FTL_ERR_UNSUPPORTED);
  CHECK_STR_CONTAINS(ftl_ctx_errmsg(ctx), "more ranks than GPUs (here 2 ranks, 1 GPUs)");
  CHECK_OK(ftl_finalize(ctx), "finalize");
  unsetenv("FTL_BACKEND");

  /* FTL_BACKEND=mpi keeps MPI even with a GPU of its own. */
  reset(0, 1, 1);
  setenv("FTL_BACKEND", "mpi", 1);
  CHECK_OK(ftl_init(NULL, NULL, &ctx), ftl_ctx_errmsg(ctx));
  CHECK_INT_EQ(ftl_ctx_info(ctx)->backend, FTL_BACKEND_MPI);
  CHECK_INT_EQ(n_init, 0);
  CHECK_OK(ftl_finalize(ctx), "finalize");
  unsetenv("FTL_BACKEND");

  /* A driver that is there but broken counts as no GPU for the backend (the CPU path still runs). */
  reset(0, 1, 1);
  g_count_status = FTL_GPU_FAILED;
  CHECK_OK(ftl_init(NULL, NULL, &ctx), ftl_ctx_errmsg(ctx));
  CHECK_INT_EQ(ftl_ctx_info(ctx)->backend, FTL_BACKEND_MPI);
  CHECK_OK(ftl_finalize(ctx), "finalize");
  char why[256];
  int n = 0;
  CHECK_INT_EQ(rz_gpu_probe(&n, why, sizeof why), FTL_GPU_FAILED);
  CHECK_STR_CONTAINS(why, "InsufficientDriver");
  printf("backend choice: ok\n");
}

static void test_memory_kinds(void) {
  float host_in[4] = {1, 2, 3, 4}, host_out[4], dev_a[4] = {1, 2, 3, 4}, dev_b[4];
  /* NCCL backend (one rank, one GPU): host buffers through MPI, device ones through NCCL. */
  reset(0, 1, 1);
  fake_device_memory(dev_a, 0);
  fake_device_memory(dev_b, 0);
  ftl_ctx *ctx = NULL;
  CHECK_OK(ftl_init(NULL, NULL, &ctx), ftl_ctx_errmsg(ctx));
  CHECK_INT_EQ(ftl_ctx_info(ctx)->backend, FTL_BACKEND_NCCL);
  CHECK_OK(ftl_allreduce(ctx, host_in, host_out, 4, FTL_DTYPE_F32, FTL_OP_SUM), ftl_ctx_errmsg(ctx));
  CHECK_INT_EQ(mpi_allreduces, 1);
  CHECK_INT_EQ(n_nccl_allreduce, 0);
  CHECK(host_out[3] == 4.0f);
  CHECK_OK(ftl_allreduce(ctx, dev_a, dev_b, 4, FTL_DTYPE_F32, FTL_OP_SUM), ftl_ctx_errmsg(ctx));
  CHECK_INT_EQ(n_nccl_allreduce, 1);
  CHECK_INT_EQ(mpi_allreduces, 1);
  CHECK(dev_b[2] == 3.0f);
  /* Mixed kinds would put this rank in NCCL and a peer in MPI: refused. */
  CHECK_INT_EQ(ftl_allreduce(ctx, dev_a, host_out, 4, FTL_DTYPE_F32, FTL_OP_SUM), FTL_ERR_INVAL);
  CHECK_STR_CONTAINS(ftl_ctx_errmsg(ctx), "send is device memory and recv is host memory");
  /* Another device's memory: refused before NCCL sees it. */
  float other[4];
  fake_device_memory(other, 1);
  CHECK_INT_EQ(ftl_allreduce(ctx, other, other, 4, FTL_DTYPE_F32, FTL_OP_SUM), FTL_ERR_INVAL);
  CHECK_STR_CONTAINS(ftl_ctx_errmsg(ctx), "buffer on device 1, but this rank's device is 0");
  CHECK_OK(ftl_finalize(ctx), "finalize");

  /* MPI backend on a GPU machine (2 ranks, 1 GPU): device buffers staged through host memory,
   * each copy waited for before its bytes are used. */
  reset(0, 2, 1);
  float dev_c[4] = {1, 2, 3, 4};
  fake_device_memory(dev_c, 0);
  CHECK_OK(ftl_init(NULL, NULL, &ctx), ftl_ctx_errmsg(ctx));
  CHECK_INT_EQ(ftl_ctx_info(ctx)->backend, FTL_BACKEND_MPI);
  log_reset();
  g_event_polls_left = 3; /* the first copy takes a while: the MPI step must wait for it */
  CHECK_OK(ftl_allreduce(ctx, dev_c, dev_c, 4, FTL_DTYPE_F32, FTL_OP_SUM), ftl_ctx_errmsg(ctx));
  CHECK_STR_EQ(call_log, "memcpy_d2h(legacy) event_record(e0,legacy) event_done(e0) mpi_allreduce "
                         "memcpy_h2d(legacy) event_record(e0,legacy) event_done(e0) ");
  CHECK(dev_c[0] == 2.0f && dev_c[3] == 8.0f); /* two ranks of the same values */
  CHECK_OK(ftl_finalize(ctx), "finalize");
  printf("memory kinds: ok\n");
}

static void test_init_deadline(void) {
  /* A non-blocking init that never finishes (a peer failed before its own init): a timeout on
   * time, the communicator aborted, never destroyed. */
  reset(0, 1, 1);
  g_init_mode = INIT_FOREVER;
  setenv("FTL_COLLECTIVE_TIMEOUT_MS", "300", 1);
  ftl_ctx *ctx = NULL;
  int64_t t0 = ftl_clock_ms();
  CHECK_INT_EQ(ftl_init(NULL, NULL, &ctx), FTL_ERR_TIMEOUT);
  int64_t waited = ftl_clock_ms() - t0;
  CHECK(waited >= 300 && waited < 5000);
  CHECK_STR_CONTAINS(ftl_ctx_errmsg(ctx), "ncclCommInitRankConfig (non-blocking) did not finish before its deadline");
  CHECK_INT_EQ(n_abort, 1);
  CHECK_INT_EQ(n_destroy, 0);
  CHECK_OK(ftl_finalize(ctx), "finalize");
  CHECK_INT_EQ(n_abort, 1);

  /* A slow init is fine: it is polled until ready. */
  reset(0, 1, 1);
  g_init_mode = INIT_SLOW;
  CHECK_OK(ftl_init(NULL, NULL, &ctx), ftl_ctx_errmsg(ctx));
  CHECK_INT_EQ(ftl_ctx_info(ctx)->backend, FTL_BACKEND_NCCL);
  CHECK_OK(ftl_finalize(ctx), "finalize");

  /* This rank's init worked, another's failed: agreed, so this rank fails too and aborts its own
   * communicator instead of entering a collective with a rank that is not there. */
  reset(0, 2, 2);
  peer_max = 1;
  CHECK_INT_EQ(ftl_init(NULL, NULL, &ctx), FTL_ERR_NCCL);
  CHECK_STR_CONTAINS(ftl_ctx_errmsg(ctx), "another rank could not set up its NCCL communicator");
  CHECK_INT_EQ(n_abort, 1);
  CHECK_INT_EQ(n_destroy, 0);
  CHECK_OK(ftl_finalize(ctx), "finalize");

  /* NCCL's own error comes back with its text. */
  reset(0, 1, 1);
  g_init_mode = INIT_FAILS;
  CHECK_INT_EQ(ftl_init(NULL, NULL, &ctx), FTL_ERR_NCCL);
  CHECK_STR_CONTAINS(ftl_ctx_errmsg(ctx), "fake invalid usage");
  CHECK_OK(ftl_finalize(ctx), "finalize");
  unsetenv("FTL_COLLECTIVE_TIMEOUT_MS");
  printf("NCCL set-up deadline: ok\n");
}

static void test_ordering(void) {
  float a[4] = {1, 2, 3, 4}, b[4];
  reset(0, 1, 1);
  fake_device_memory(a, 0);
  fake_device_memory(b, 0);
  ftl_ctx *ctx = NULL;
  CHECK_OK(ftl_init(NULL, NULL, &ctx), ftl_ctx_errmsg(ctx));
  /* ftl's stream is s0 and its event e0 (created at init). */
  log_reset();
  CHECK_OK(ftl_allreduce(ctx, a, b, 4, FTL_DTYPE_F32, FTL_OP_SUM), ftl_ctx_errmsg(ctx));
  CHECK_STR_EQ(call_log, "event_record(e0,legacy) stream_wait_event(s0,e0) nccl_allreduce(s0) ");
  log_reset();
  static char user_stream;
  CHECK_OK(ftl_allreduce_on_stream(ctx, a, b, 4, FTL_DTYPE_F32, FTL_OP_SUM, &user_stream), ftl_ctx_errmsg(ctx));
  CHECK_STR_EQ(call_log, "event_record(e0,user) stream_wait_event(s0,e0) nccl_allreduce(s0) ");
  CHECK_OK(ftl_finalize(ctx), "finalize");

  /* Checkpoint copies: after the caller's stream, then a sync that returns only once the bytes
   * are there (the fake lands a copy only when its event is seen complete). */
  reset(0, 1, 1);
  ck_dev *dev = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(ck_dev_open(&dev, &d), d.msg); /* stream s0, events e0 (caller) and e1 (done) */
  float device_tensor[4] = {9, 9, 9, 9}, staged[4] = {0};
  CHECK_OK(ck_dev_after(dev, NULL, &d), d.msg);
  CHECK_OK(ck_dev_copy_to_host_async(dev, staged, device_tensor, sizeof staged, &d), d.msg);
  g_event_polls_left = 5;
  CHECK_OK(ck_dev_sync(dev, ftl_deadline_after_ms(2000), &d), d.msg);
  CHECK(staged[3] == 9.0f);
  CHECK_STR_EQ(call_log, "event_record(e0,legacy) stream_wait_event(s0,e0) memcpy_d2h(s0) event_record(e1,s0) "
                         "event_done(e1) ");
  /* Restore: host bytes to the device after the caller's stream, landed before the sync returns. */
  log_reset();
  float landed[4] = {5, 6, 7, 8};
  CHECK_OK(ck_dev_after(dev, &user_stream, &d), d.msg);
  CHECK_OK(ck_dev_copy_to_device_async(dev, device_tensor, landed, sizeof landed, &d), d.msg);
  CHECK(device_tensor[0] == 9.0f); /* not there yet */
  g_event_polls_left = 5;
  CHECK_OK(ck_dev_sync(dev, ftl_deadline_after_ms(2000), &d), d.msg);
  CHECK(device_tensor[0] == 5.0f && device_tensor[3] == 8.0f);
  CHECK_STR_EQ(call_log, "event_record(e0,user) stream_wait_event(s0,e0) memcpy_h2d(s0) event_record(e1,s0) "
                         "event_done(e1) ");
  /* A copy that never completes: a timeout, not a hang. */
  CHECK_OK(ck_dev_copy_to_device_async(dev, device_tensor, landed, sizeof landed, &d), d.msg);
  g_event_polls_left = -1;
  CHECK_INT_EQ(ck_dev_sync(dev, ftl_deadline_after_ms(200), &d), FTL_ERR_TIMEOUT);
  CHECK_STR_CONTAINS(d.msg, "did not finish before its deadline");
  g_event_polls_left = 0;
  ck_dev_close(dev);
  printf("ordering: ok\n");
}

static void test_broken_after_error(void) {
  float a[4] = {1, 2, 3, 4};
  for (int mode = COLL_FAILS; mode <= COLL_HANGS; mode++) {
    reset(0, 1, 1);
    fake_device_memory(a, 0);
    setenv("FTL_COLLECTIVE_TIMEOUT_MS", "300", 1);
    ftl_ctx *ctx = NULL;
    CHECK_OK(ftl_init(NULL, NULL, &ctx), ftl_ctx_errmsg(ctx));
    g_coll_mode = mode;
    ftl_err first = ftl_allreduce(ctx, a, a, 4, FTL_DTYPE_F32, FTL_OP_SUM);
    const char *expect = mode == COLL_FAILS ? "fake unhandled cuda error"
                         : mode == COLL_ASYNC_FAILS ? "fake remote process exited"
                                                    : "did not complete before its deadline";
    CHECK_INT_EQ(first, mode == COLL_HANGS ? FTL_ERR_TIMEOUT : FTL_ERR_NCCL);
    CHECK_STR_CONTAINS(ftl_ctx_errmsg(ctx), expect);
    CHECK_INT_EQ(n_abort, 1);
    /* Every later collective: FTL_ERR_STATE naming the first error; NCCL is not called again. */
    g_coll_mode = COLL_OK;
    CHECK_INT_EQ(ftl_allreduce(ctx, a, a, 4, FTL_DTYPE_F32, FTL_OP_SUM), FTL_ERR_STATE);
    CHECK_STR_CONTAINS(ftl_ctx_errmsg(ctx), "broken since an earlier GPU error");
    CHECK_STR_CONTAINS(ftl_ctx_errmsg(ctx), expect);
    CHECK_INT_EQ(n_nccl_allreduce, 1);
    CHECK_INT_EQ(ftl_barrier(ctx, 100), FTL_ERR_STATE);
    float h = 1;
    CHECK_INT_EQ(ftl_allreduce(ctx, &h, &h, 1, FTL_DTYPE_F32, FTL_OP_SUM), FTL_ERR_STATE);
    /* Finalize does not destroy (or abort twice) an aborted communicator. */
    CHECK_OK(ftl_finalize(ctx), "finalize");
    CHECK_INT_EQ(n_abort, 1);
    CHECK_INT_EQ(n_destroy, 0);
    CHECK_INT_EQ(n_finalize, 0);
  }
  unsetenv("FTL_COLLECTIVE_TIMEOUT_MS");
  printf("broken after an error: ok\n");
}

int main(void) {
  unsetenv("FTL_RDZV_ADDR"); /* no launcher: the rendezvous is skipped */
  setenv("FTL_LOG_LEVEL", "error", 1);
  rz_mpi_set_ops(&fake_mpi);
  rz_gpu_set_ops(&fake_gpu);
  test_backend_choice();
  test_memory_kinds();
  test_init_deadline();
  test_ordering();
  test_broken_after_error();
  rz_gpu_set_ops(NULL);
  rz_mpi_set_ops(NULL);
  printf("ok\n");
  return 0;
}
