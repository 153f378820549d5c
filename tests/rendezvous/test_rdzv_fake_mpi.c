/* tests/rendezvous/test_rdzv_fake_mpi.c: the in-rank library over a fake MPI (the seam in
 * rendezvous/mpi_seam.h): a barrier whose peers never come must return FTL_ERR_TIMEOUT near its
 * deadline, MPI errors must come back as FTL_ERR_MPI with MPI's text and the call named, and a
 * failing MPI_Init must fail ftl_init cleanly. No real MPI call is made. */
#include <stdlib.h>
#include <string.h>

#include "ftl/ftl.h"
#include "ftl_test.h"
#include "rendezvous/mpi_seam.h"

#include "fake_mpi.h"

static int fake_init_fails, fake_allreduce_fails, fake_initialized_flag;

static int f_initialized(int *flag) { *flag = fake_initialized_flag; return MPI_SUCCESS; }
static int f_init_thread(int *argc, char ***argv, int required, int *provided) {
  (void)argc, (void)argv;
  if (fake_init_fails) return MPI_ERR_OTHER;
  fake_initialized_flag = 1;
  *provided = required;
  return MPI_SUCCESS;
}
static int f_finalize(void) { fake_initialized_flag = 0; return MPI_SUCCESS; }
static int f_comm_rank(MPI_Comm comm, int *rank) { (void)comm; *rank = 0; return MPI_SUCCESS; }
static int f_comm_size(MPI_Comm comm, int *size) { (void)comm; *size = 1; return MPI_SUCCESS; }
static int f_allreduce(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  (void)op, (void)comm;
  if (fake_allreduce_fails) return MPI_ERR_OTHER;
  int size = type == MPI_INT ? 4 : type == MPI_FLOAT ? 4 : 8;
  if (send != MPI_IN_PLACE) memcpy(recv, send, (size_t)count * (size_t)size);
  return MPI_SUCCESS;
}
static int f_test(MPI_Request *req, int *flag, MPI_Status *status) { (void)req, (void)status; *flag = 0; return MPI_SUCCESS; }

/* The checkpoint's non-blocking collectives are not used here (tests/ckpt/test_ckpt_fake_mpi.c
 * fakes them): NULL. */
static const rz_mpi_ops fake = {FAKE_MPI_SHARED_OPS,
                                 .initialized = f_initialized, .init_thread = f_init_thread,
                                 .finalize = f_finalize, .comm_rank = f_comm_rank, .comm_size = f_comm_size,
                                 .allreduce = f_allreduce, .test = f_test};

int main(void) {
  unsetenv("FTL_RDZV_ADDR"); /* no launcher: the rendezvous is skipped */
  setenv("FTL_BACKEND", "mpi", 1);
  rz_mpi_set_ops(&fake);

  /* A failing MPI_Init fails ftl_init with MPI's text; the context still reports it. */
  fake_init_fails = 1;
  ftl_ctx *ctx = NULL;
  CHECK_INT_EQ(ftl_init(NULL, NULL, &ctx), FTL_ERR_MPI);
  CHECK_STR_CONTAINS(ftl_ctx_errmsg(ctx), "MPI_Init_thread failed: fake MPI failure");
  CHECK_INT_EQ(ftl_finalize(ctx), FTL_OK);
  fake_init_fails = 0;

  CHECK_OK(ftl_init(NULL, NULL, &ctx), ftl_ctx_errmsg(ctx));
  CHECK_INT_EQ(ftl_ctx_info(ctx)->world_size, 1);
  CHECK_INT_EQ(ftl_ctx_info(ctx)->backend, FTL_BACKEND_MPI);
  CHECK_INT_EQ(ftl_ctx_info(ctx)->device, -1);

  /* A barrier whose peers never arrive: FTL_ERR_TIMEOUT near the deadline, not a hang. */
  int64_t t0 = ftl_clock_ms();
  CHECK_INT_EQ(ftl_barrier(ctx, 300), FTL_ERR_TIMEOUT);
  int64_t waited = ftl_clock_ms() - t0;
  CHECK(waited >= 300);
  CHECK(waited < 3000);
  CHECK_STR_CONTAINS(ftl_ctx_errmsg(ctx), "barrier: not every rank arrived within 300 ms");

  /* An MPI error inside a collective names the call and carries MPI's text. */
  float v[4] = {1, 2, 3, 4}, out[4];
  CHECK_OK(ftl_allreduce(ctx, v, out, 4, FTL_DTYPE_F32, FTL_OP_SUM), ftl_ctx_errmsg(ctx));
  CHECK(out[3] == 4.0f);
  fake_allreduce_fails = 1;
  CHECK_INT_EQ(ftl_allreduce(ctx, v, out, 4, FTL_DTYPE_F32, FTL_OP_SUM), FTL_ERR_MPI);
  CHECK_STR_CONTAINS(ftl_ctx_errmsg(ctx), "MPI_Allreduce failed: fake MPI failure");
  /* Half floats have no MPI type: a clear refusal, not a wrong sum. */
  CHECK_INT_EQ(ftl_allreduce(ctx, v, out, 4, FTL_DTYPE_BF16, FTL_OP_SUM), FTL_ERR_UNSUPPORTED);
  CHECK_STR_CONTAINS(ftl_ctx_errmsg(ctx), "bfloat16");

  /* Without a launcher, progress and events are accepted and go nowhere. */
  CHECK_OK(ftl_step_done(ctx, 1), "step");
  CHECK_OK(ftl_ctx_emit_event(ctx, "x", "{\"a\":1}"), "event");
  CHECK_INT_EQ(ftl_ctx_emit_event(ctx, "x", "[1,2]"), FTL_ERR_INVAL);
  CHECK_OK(ftl_finalize(ctx), "finalize");
  CHECK_OK(ftl_finalize(NULL), "finalize NULL");
  printf("ok\n");
  return 0;
}
