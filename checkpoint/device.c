/* checkpoint/device.c: CUDA calls of the checkpoint module (see device.h). Compiled with the
 * CUDA runtime when FTL_HAVE_CUDA is defined, as stubs otherwise. */
#include "device.h"

#include "ftl/core.h"

#ifdef FTL_HAVE_CUDA
#include <cuda_runtime_api.h>

struct ck_dev {
  cudaStream_t stream;
  cudaEvent_t event;
};

int ck_dev_compiled(void) { return 1; }

static ftl_err cuda_fail(ftl_diag *d, const char *what, cudaError_t e) {
  return ftl_diag_fail(d, FTL_ERR_CUDA, "CUDA: %s failed: %s", what, cudaGetErrorString(e));
}

ftl_err ck_dev_open(ck_dev **out, ftl_diag *d) {
  ck_dev *dev = ftl_calloc(1, sizeof *dev);
  if (!dev) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  cudaError_t e = cudaStreamCreateWithFlags(&dev->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    ftl_free(dev);
    return cuda_fail(d, "cudaStreamCreate", e);
  }
  e = cudaEventCreateWithFlags(&dev->event, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    cudaStreamDestroy(dev->stream);
    ftl_free(dev);
    return cuda_fail(d, "cudaEventCreate", e);
  }
  *out = dev;
  return FTL_OK;
}

void ck_dev_close(ck_dev *dev) {
  if (!dev) return;
  cudaEventDestroy(dev->event);
  cudaStreamDestroy(dev->stream);
  ftl_free(dev);
}

ftl_err ck_dev_pin(void *p, size_t n, ftl_diag *d) {
  cudaError_t e = cudaHostRegister(p, n, cudaHostRegisterDefault);
  return e == cudaSuccess ? FTL_OK : cuda_fail(d, "cudaHostRegister", e);
}

void ck_dev_unpin(void *p) { cudaHostUnregister(p); }

ftl_err ck_dev_copy_to_host_async(ck_dev *dev, void *dst, const void *src, size_t n, ftl_diag *d) {
  cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, dev->stream);
  return e == cudaSuccess ? FTL_OK : cuda_fail(d, "cudaMemcpyAsync", e);
}

ftl_err ck_dev_sync(ck_dev *dev, ftl_diag *d) {
  cudaError_t e = cudaEventRecord(dev->event, dev->stream);
  if (e == cudaSuccess) e = cudaEventSynchronize(dev->event);
  return e == cudaSuccess ? FTL_OK : cuda_fail(d, "cudaEventSynchronize", e);
}

ftl_err ck_dev_copy_to_device(void *dst, const void *src, size_t n, ftl_diag *d) {
  cudaError_t e = cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice);
  return e == cudaSuccess ? FTL_OK : cuda_fail(d, "cudaMemcpy", e);
}

#else

struct ck_dev {
  int unused;
};

int ck_dev_compiled(void) { return 0; }

static ftl_err no_cuda(ftl_diag *d) {
  return ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "device tensors need a build with CUDA (FTL_WITH_CUDA)");
}

ftl_err ck_dev_open(ck_dev **out, ftl_diag *d) {
  *out = NULL;
  return no_cuda(d);
}
void ck_dev_close(ck_dev *dev) { (void)dev; }
ftl_err ck_dev_pin(void *p, size_t n, ftl_diag *d) {
  (void)p;
  (void)n;
  return no_cuda(d);
}
void ck_dev_unpin(void *p) { (void)p; }
ftl_err ck_dev_copy_to_host_async(ck_dev *dev, void *dst, const void *src, size_t n, ftl_diag *d) {
  (void)dev;
  (void)dst;
  (void)src;
  (void)n;
  return no_cuda(d);
}
ftl_err ck_dev_sync(ck_dev *dev, ftl_diag *d) {
  (void)dev;
  return no_cuda(d);
}
ftl_err ck_dev_copy_to_device(void *dst, const void *src, size_t n, ftl_diag *d) {
  (void)dst;
  (void)src;
  (void)n;
  return no_cuda(d);
}

#endif
