/* tests/gpu/test_gpu_nccl_allreduce.c: the GPU path of ftl_init and ftl_allreduce on one rank:
 * NCCL communicator on device 0, an allreduce of device memory, the result checked on the host
 * against the CPU reference (the input itself, for one rank; exact for these integers in float).
 * Exits 77 (skipped) when ftl was built without CUDA/NCCL or no GPU is visible. */
#include <stdio.h>
#include <stdlib.h>

#include "ftl/ftl.h"
#include "ftl_test.h"
#include "rendezvous/gpu_seam.h"

#ifdef FTL_HAVE_NCCL
#include <cuda_runtime.h>
#endif

int main(int argc, char **argv) {
  if (!ftl_gpu_compiled()) FTL_SKIP("ftl was built without CUDA and NCCL");
  char why[256] = "";
  if (ftl_gpu_device_count(why, sizeof why) == 0) FTL_SKIP("no GPU: %s", why);
#ifdef FTL_HAVE_NCCL
  setenv("FTL_BACKEND", "nccl", 1);
  ftl_ctx *ctx = NULL;
  CHECK_OK(ftl_init(&argc, &argv, &ctx), ftl_ctx_errmsg(ctx));
  CHECK_INT_EQ(ftl_ctx_info(ctx)->backend, FTL_BACKEND_NCCL);
  CHECK(ftl_ctx_info(ctx)->device >= 0);
  enum { N = 1 << 20 };
  float *host = malloc(N * sizeof(float)), *dev = NULL;
  CHECK(host);
  for (int i = 0; i < N; i++) host[i] = (float)(i % 1000);
  CHECK(cudaMalloc((void **)&dev, N * sizeof(float)) == cudaSuccess);
  CHECK(cudaMemcpy(dev, host, N * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  int world = ftl_ctx_info(ctx)->world_size;
  CHECK_OK(ftl_allreduce(ctx, dev, dev, N, FTL_DTYPE_F32, FTL_OP_SUM), ftl_ctx_errmsg(ctx));
  CHECK(cudaMemcpy(host, dev, N * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int i = 0; i < N; i++)
    if (host[i] != (float)(i % 1000) * (float)world) FTL_TEST_FAIL_("element %d is %g", i, host[i]);
  cudaFree(dev);
  free(host);
  CHECK_OK(ftl_finalize(ctx), "finalize");
  printf("ok: NCCL allreduce of %d floats on %d rank(s)\n", N, world);
  return 0;
#else
  (void)argc, (void)argv;
  return 77;
#endif
}
