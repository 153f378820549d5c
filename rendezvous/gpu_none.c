/* rendezvous/gpu_none.c: the GPU seam's table in a build without CUDA/NCCL. It reports no
 * device and pageable host memory for every pointer, so ftl_init takes the MPI path and device
 * tensors are refused; the calls that need a GPU say the build has none. */
#include <stdio.h>

#include "rendezvous/gpu_seam.h"

static const char none_text[] = "ftl was built without CUDA and NCCL";

static int n_device_count(int *count) { *count = 0; return FTL_GPU_NO_DEVICE; }
static int n_fail_int(int x) { (void)x; return FTL_GPU_FAILED; }
static int n_pointer_kind(const void *p, rz_gpu_mem *kind, int *device) {
  (void)p;
  *kind = FTL_GPU_MEM_HOST;
  *device = -1;
  return FTL_GPU_OK;
}
static int n_create(void **h) { *h = NULL; return FTL_GPU_FAILED; }
static void n_release(void *h) { (void)h; }
static int n_query(void *h) { (void)h; return FTL_GPU_FAILED; }
static int n_pair(void *a, void *b) { (void)a, (void)b; return FTL_GPU_FAILED; }
static int n_memcpy_async(void *dst, const void *src, size_t n, int to_device, void *stream) {
  (void)dst, (void)src, (void)n, (void)to_device, (void)stream;
  return FTL_GPU_FAILED;
}
static int n_host_register(void *p, size_t n) { (void)p, (void)n; return FTL_GPU_FAILED; }
static int n_version(int *v) { *v = 0; return FTL_GPU_FAILED; }
static int n_unique_id(unsigned char id[FTL_NCCL_ID_BYTES]) { (void)id; return FTL_GPU_FAILED; }
static int n_nccl_init(void **comm, int nranks, const unsigned char id[FTL_NCCL_ID_BYTES], int rank) {
  (void)nranks, (void)id, (void)rank;
  *comm = NULL;
  return FTL_GPU_FAILED;
}
static int n_allreduce(const void *send, void *recv, size_t count, ftl_dtype dtype, ftl_op op, void *comm,
                       void *stream) {
  (void)send, (void)recv, (void)count, (void)dtype, (void)op, (void)comm, (void)stream;
  return FTL_GPU_FAILED;
}
static const char *n_last_error(void) { return none_text; }

const rz_gpu_ops rz_gpu_build_ops = {
    .compiled = 0,
    .device_count = n_device_count,
    .set_device = n_fail_int,
    .pointer_kind = n_pointer_kind,
    .stream_create = n_create,
    .stream_destroy = n_release,
    .stream_query = n_query,
    .event_create = n_create,
    .event_destroy = n_release,
    .event_record = n_pair,
    .event_query = n_query,
    .stream_wait_event = n_pair,
    .memcpy_async = n_memcpy_async,
    .host_register = n_host_register,
    .host_unregister = n_release,
    .runtime_version = n_version,
    .driver_version = n_version,
    .nccl_version = n_version,
    .nccl_unique_id = n_unique_id,
    .nccl_init = n_nccl_init,
    .nccl_async_error = n_query,
    .nccl_allreduce = n_allreduce,
    .nccl_finalize = n_query,
    .nccl_destroy = n_release,
    .nccl_abort = n_release,
    .last_error = n_last_error,
};
