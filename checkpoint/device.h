/* checkpoint/device.h: the only door to the GPU in the checkpoint module: pinning the staging
 * buffers, a stream and an event for the device-to-host snapshot copies and the host-to-device
 * restore copies, and their ordering against the caller's own stream. Every call goes through
 * the GPU seam (rendezvous/gpu_seam.h), so tests fake it; in a build without CUDA every call but
 * ck_dev_compiled() fails, so device tensors are refused at registration.
 *
 * Ordering (docs/gpu.md): a snapshot or restore first makes ck_dev's non-blocking stream wait for
 * an event recorded on the caller's stream (ck_dev_after: the legacy default stream unless
 * ftl_ckpt_set_stream named one), so copies never read tensors a kernel is still writing nor
 * overwrite ones a kernel is still reading; ck_dev_sync then waits, with a deadline, until the
 * copies have landed, so a restore returns with the data in place.
 *
 * Not here: choosing the device (rendezvous picks it by local rank). */
#ifndef FTL_CKPT_DEVICE_H
#define FTL_CKPT_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ck_dev ck_dev; /* stream + events */

int ck_dev_compiled(void);
/* Creates the stream and events; detail in d. */
ftl_err ck_dev_open(ck_dev **out, ftl_diag *d);
void ck_dev_close(ck_dev *dev);
/* Page-locks host memory the copies use (cudaHostRegister) / undoes it. */
ftl_err ck_dev_pin(void *p, size_t n, ftl_diag *d);
void ck_dev_unpin(void *p);
/* Makes the copies enqueued next wait for the work enqueued so far on caller_stream (a
 * cudaStream_t; NULL: the legacy default stream). */
ftl_err ck_dev_after(ck_dev *dev, void *caller_stream, ftl_diag *d);
/* Enqueue a device-to-host / host-to-device copy on the stream. */
ftl_err ck_dev_copy_to_host_async(ck_dev *dev, void *dst, const void *src, size_t n, ftl_diag *d);
ftl_err ck_dev_copy_to_device_async(ck_dev *dev, void *dst, const void *src, size_t n, ftl_diag *d);
/* Records an event after the enqueued copies and waits for it until deadline_ms (polling):
 * FTL_ERR_TIMEOUT after it, FTL_ERR_CUDA on an error. */
ftl_err ck_dev_sync(ck_dev *dev, int64_t deadline_ms, ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
