/* tests/gpu/gpu_test.h: the one rule of every GPU test for "is there a GPU": skip (77) only when
 * there is none (the build has no CUDA, cudaGetDeviceCount says cudaErrorNoDevice, or there is no
 * driver and no /dev/nvidia*: rz_gpu_probe's FTL_GPU_NO_DEVICE); FAIL when a GPU is there and does
 * not work (a driver too old for the runtime, a broken install): on a GPU machine that must be
 * seen, not reported as a skip. */
#ifndef FTL_TESTS_GPU_TEST_H
#define FTL_TESTS_GPU_TEST_H

#include "ftl_test.h"
#include "rendezvous/gpu_seam.h"

/* Returns the number of GPUs (>= 1), or exits 77 / 1 as above. */
static inline int ftl_test_require_gpu(void) {
  if (!rz_gpu_compiled()) FTL_SKIP("ftl was built without CUDA");
  char why[256] = "";
  int n = 0;
  int st = rz_gpu_probe(&n, why, sizeof why);
  if (st == FTL_GPU_NO_DEVICE) FTL_SKIP("no GPU: %s", why);
  if (st != FTL_GPU_OK) FTL_TEST_FAIL_("a GPU is there but does not work: %s", why);
  return n;
}

#endif
