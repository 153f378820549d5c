/* tests/gpu/test_gpu_nccl_allreduce.c: the GPU path of ftl_init and ftl_allreduce on real GPUs.
 * Every rank puts rank-dependent values in device memory; the result goes to a separate device
 * buffer filled with all-ones bytes first (NaN for the float types, -1 for the integers), so a
 * collective that did nothing cannot pass; it is checked on the host against the reduction
 * computed here, for float32, float64, int32, int64 and bfloat16 and each of sum, max, min and
 * prod (small integers: exact in every type). Also in place, a call on a caller's stream, and a
 * malloc'ed host buffer on the NCCL backend (reduced over MPI).
 *
 *   test_gpu_nccl_allreduce            one rank (ctest: test_gpu_nccl_allreduce)
 *   mpirun -n 2 test_gpu_nccl_allreduce  two ranks, one GPU each (ctest: ..._2ranks, through
 *                                      run_2ranks.sh, which skips with a message on one GPU)
 *   test_gpu_nccl_allreduce --count    prints the number of GPUs (77: none, 1: broken)
 * Skip (77) only without a GPU; a GPU that does not work fails (gpu_test.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/ftl.h"
#include "gpu/gpu_test.h"

#ifdef FTL_HAVE_CUDA
#include <cuda_runtime.h>

/* Rank r's value at i: 1..4, so a product over 2 ranks is at most 16 (exact in bfloat16). */
static double value(size_t i, int r) { return (double)(i % 3 + 1 + (size_t)(r % 2)); }

static double reduce(ftl_op op, size_t i, int world) {
  double acc = value(i, 0);
  for (int r = 1; r < world; r++) {
    double v = value(i, r);
    acc = op == FTL_OP_SUM ? acc + v : op == FTL_OP_PROD ? acc * v : op == FTL_OP_MAX ? (v > acc ? v : acc)
                                                                                    : (v < acc ? v : acc);
  }
  return acc;
}

static void put(void *buf, ftl_dtype t, size_t i, double v) {
  switch (t) {
    case FTL_DTYPE_F32: ((float *)buf)[i] = (float)v; break;
    case FTL_DTYPE_F64: ((double *)buf)[i] = v; break;
    case FTL_DTYPE_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case FTL_DTYPE_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case FTL_DTYPE_BF16: {
      float f = (float)v;
      uint32_t bits;
      memcpy(&bits, &f, 4);
      ((uint16_t *)buf)[i] = (uint16_t)(bits >> 16); /* exact for these small integers */
      break;
    }
    default: FTL_TEST_FAIL_("dtype %d not in this test", (int)t);
  }
}

static double get(const void *buf, ftl_dtype t, size_t i) {
  switch (t) {
    case FTL_DTYPE_F32: return ((const float *)buf)[i];
    case FTL_DTYPE_F64: return ((const double *)buf)[i];
    case FTL_DTYPE_I32: return ((const int32_t *)buf)[i];
    case FTL_DTYPE_I64: return (double)((const int64_t *)buf)[i];
    case FTL_DTYPE_BF16: {
      uint32_t bits = (uint32_t)((const uint16_t *)buf)[i] << 16;
      float f;
      memcpy(&f, &bits, 4);
      return f;
    }
    default: return -1;
  }
}

static const char *op_name(ftl_op op) {
  return op == FTL_OP_SUM ? "sum" : op == FTL_OP_MAX ? "max" : op == FTL_OP_MIN ? "min" : "prod";
}

enum { N = (1 << 18) + 3 }; /* not a multiple of anything NCCL might like */

/* One case: send on the device, recv a separate device buffer full of 0xff bytes. */
static void one_case(ftl_ctx *ctx, ftl_dtype t, ftl_op op, int in_place, void *stream) {
  const ftl_info *me = ftl_ctx_info(ctx);
  size_t elem = ftl_dtype_size(t), bytes = N * elem;
  unsigned char *host = malloc(bytes);
  CHECK(host);
  for (size_t i = 0; i < N; i++) put(host, t, i, value(i, me->rank));
  void *send = NULL, *recv = NULL;
  CHECK(cudaMalloc(&send, bytes) == cudaSuccess);
  CHECK(cudaMemcpy(send, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  if (in_place) {
    recv = send;
  } else {
    CHECK(cudaMalloc(&recv, bytes) == cudaSuccess);
    CHECK(cudaMemset(recv, 0xff, bytes) == cudaSuccess);
  }
  ftl_err rc = stream ? ftl_allreduce_on_stream(ctx, send, recv, N, t, op, stream)
                      : ftl_allreduce(ctx, send, recv, N, t, op);
  if (rc) FTL_TEST_FAIL_("%s %s: %s", ftl_dtype_name(t), op_name(op), ftl_ctx_errmsg(ctx));
  memset(host, 0, bytes);
  CHECK(cudaMemcpy(host, recv, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  for (size_t i = 0; i < N; i++) {
    double want = reduce(op, i, me->world_size), got = get(host, t, i);
    if (got != want)
      FTL_TEST_FAIL_("rank %d, %s %s%s: element %zu is %g, expected %g", me->rank, ftl_dtype_name(t), op_name(op),
                     in_place ? " in place" : "", i, got, want);
  }
  cudaFree(send);
  if (!in_place) cudaFree(recv);
  free(host);
}
#endif

int main(int argc, char **argv) {
  int gpus = ftl_test_require_gpu();
  if (argc > 1 && strcmp(argv[1], "--count") == 0) {
    printf("%d\n", gpus);
    return 0;
  }
#ifdef FTL_HAVE_CUDA
  if (!rz_gpu_nccl_compiled()) FTL_SKIP("ftl was built without NCCL");
  setenv("FTL_BACKEND", "nccl", 1);
  ftl_ctx *ctx = NULL;
  CHECK_OK(ftl_init(&argc, &argv, &ctx), ftl_ctx_errmsg(ctx));
  const ftl_info *me = ftl_ctx_info(ctx);
  CHECK_INT_EQ(me->backend, FTL_BACKEND_NCCL);
  CHECK_INT_EQ(me->device, me->local_rank);
  ftl_dtype types[] = {FTL_DTYPE_F32, FTL_DTYPE_F64, FTL_DTYPE_I32, FTL_DTYPE_I64, FTL_DTYPE_BF16};
  ftl_op ops[] = {FTL_OP_SUM, FTL_OP_MAX, FTL_OP_MIN, FTL_OP_PROD};
  for (size_t t = 0; t < sizeof types / sizeof *types; t++)
    for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) one_case(ctx, types[t], ops[o], 0, NULL);
  one_case(ctx, FTL_DTYPE_F32, FTL_OP_SUM, 1, NULL);
  /* On a caller's non-blocking stream: ordered after the work on it. */
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  one_case(ctx, FTL_DTYPE_F32, FTL_OP_SUM, 0, s);
  cudaStreamDestroy(s);
  /* malloc'ed memory on the NCCL backend: reduced over MPI, same call. */
  double h[3] = {1, 2, 3}, out[3] = {0};
  CHECK_OK(ftl_allreduce(ctx, h, out, 3, FTL_DTYPE_F64, FTL_OP_SUM), ftl_ctx_errmsg(ctx));
  CHECK(out[2] == 3.0 * me->world_size);
  int world = me->world_size;
  CHECK_OK(ftl_finalize(ctx), "finalize");
  printf("ok: NCCL allreduce on %d rank(s) (%d GPU(s) here): 5 dtypes x 4 ops, in place, on a stream, host memory\n",
         world, gpus);
  return 0;
#else
  (void)argc, (void)argv;
  FTL_SKIP("ftl was built without CUDA");
#endif
}
