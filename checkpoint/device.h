/* checkpoint/device.h: the only door to CUDA in the checkpoint module: pinning the staging
 * buffers, a stream and an event for device-to-host snapshot copies, host-to-device copies on
 * restore. In a build without CUDA (FTL_HAVE_CUDA undefined) every call but ck_dev_compiled()
 * returns FTL_ERR_UNSUPPORTED, so device tensors are refused at registration.
 *
 * Not here: choosing the device (rendezvous picks it by local rank). */
#ifndef FTL_CKPT_DEVICE_H
#define FTL_CKPT_DEVICE_H

#include <stddef.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ck_dev ck_dev; /* stream + event */

int ck_dev_compiled(void);
/* Creates the stream and event; detail in d. */
ftl_err ck_dev_open(ck_dev **out, ftl_diag *d);
void ck_dev_close(ck_dev *dev);
/* Page-locks host memory the copies use (cudaHostRegister) / undoes it. */
ftl_err ck_dev_pin(void *p, size_t n, ftl_diag *d);
void ck_dev_unpin(void *p);
/* Enqueues a device-to-host copy on the stream. */
ftl_err ck_dev_copy_to_host_async(ck_dev *dev, void *dst, const void *src, size_t n, ftl_diag *d);
/* Records the event after the enqueued copies and waits for it. */
ftl_err ck_dev_sync(ck_dev *dev, ftl_diag *d);
/* Synchronous host-to-device copy. */
ftl_err ck_dev_copy_to_device(void *dst, const void *src, size_t n, ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
