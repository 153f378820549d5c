/* checkpoint/device.c: the checkpoint module's GPU calls (see device.h), over the GPU seam of
 * rendezvous/gpu_seam.h: the real CUDA runtime in a build with CUDA and NCCL, "no GPU" without,
 * a fake in tests/rendezvous/test_gpu_fake.c. */
#include "checkpoint/device.h"

#include "ftl/core.h"
#include "rendezvous/gpu_seam.h"

struct ck_dev {
  void *stream; /* non-blocking: the copies overlap the caller's compute */
  void *caller; /* recorded on the caller's stream, waited on by ours */
  void *done;   /* recorded after the copies, polled by ck_dev_sync */
};

int ck_dev_compiled(void) { return ftl_gpu()->compiled; }

ftl_err ck_dev_open(ck_dev **out, ftl_diag *d) {
  const rz_gpu_ops *g = ftl_gpu();
  ftl_err rc = FTL_OK;
  int st;
  *out = NULL;
  ck_dev *dev = ftl_calloc(1, sizeof *dev);
  if (!dev) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  if ((st = g->stream_create(&dev->stream)) != FTL_GPU_OK) {
    rc = rz_gpu_fail(st, "CUDA: cudaStreamCreateWithFlags", d);
    goto out;
  }
  if ((st = g->event_create(&dev->caller)) != FTL_GPU_OK || (st = g->event_create(&dev->done)) != FTL_GPU_OK) {
    rc = rz_gpu_fail(st, "CUDA: cudaEventCreateWithFlags", d);
    goto out;
  }
  *out = dev;
  dev = NULL;
out:
  ck_dev_close(dev);
  return rc;
}

void ck_dev_close(ck_dev *dev) {
  if (!dev) return;
  const rz_gpu_ops *g = ftl_gpu();
  if (dev->done) g->event_destroy(dev->done);
  if (dev->caller) g->event_destroy(dev->caller);
  if (dev->stream) g->stream_destroy(dev->stream);
  ftl_free(dev);
}

ftl_err ck_dev_pin(void *p, size_t n, ftl_diag *d) {
  int st = ftl_gpu()->host_register(p, n);
  return st == FTL_GPU_OK ? FTL_OK : rz_gpu_fail(st, "CUDA: cudaHostRegister", d);
}

void ck_dev_unpin(void *p) { ftl_gpu()->host_unregister(p); }

ftl_err ck_dev_after(ck_dev *dev, void *caller_stream, ftl_diag *d) {
  const rz_gpu_ops *g = ftl_gpu();
  int st = g->event_record(dev->caller, caller_stream);
  if (st != FTL_GPU_OK) return rz_gpu_fail(st, "CUDA: cudaEventRecord (caller's stream)", d);
  st = g->stream_wait_event(dev->stream, dev->caller);
  return st == FTL_GPU_OK ? FTL_OK : rz_gpu_fail(st, "CUDA: cudaStreamWaitEvent", d);
}

ftl_err ck_dev_copy_to_host_async(ck_dev *dev, void *dst, const void *src, size_t n, ftl_diag *d) {
  int st = ftl_gpu()->memcpy_async(dst, src, n, 0, dev->stream);
  return st == FTL_GPU_OK ? FTL_OK : rz_gpu_fail(st, "CUDA: cudaMemcpyAsync (device to host)", d);
}

ftl_err ck_dev_copy_to_device_async(ck_dev *dev, void *dst, const void *src, size_t n, ftl_diag *d) {
  int st = ftl_gpu()->memcpy_async(dst, src, n, 1, dev->stream);
  return st == FTL_GPU_OK ? FTL_OK : rz_gpu_fail(st, "CUDA: cudaMemcpyAsync (host to device)", d);
}

ftl_err ck_dev_sync(ck_dev *dev, int64_t deadline_ms, ftl_diag *d) {
  int st = ftl_gpu()->event_record(dev->done, dev->stream);
  if (st != FTL_GPU_OK) return rz_gpu_fail(st, "CUDA: cudaEventRecord", d);
  return rz_gpu_event_wait(dev->done, deadline_ms, "CUDA: device copies", d);
}
