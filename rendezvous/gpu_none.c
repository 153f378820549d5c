/* rendezvous/gpu_none.c: the GPU seam of a build without CUDA/NCCL. It reports no devices, so
 * ftl_init always takes the MPI path; the other calls are unreachable and say so. */
#include <stdio.h>

#include "rendezvous/gpu_seam.h"

int ftl_gpu_compiled(void) { return 0; }

int ftl_gpu_device_count(char *why, size_t why_size) {
  snprintf(why, why_size, "ftl was built without CUDA and NCCL");
  return 0;
}

ftl_err ftl_gpu_unique_id(unsigned char id[FTL_NCCL_ID_BYTES], ftl_diag *d) {
  (void)id;
  return ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "built without NCCL");
}

ftl_err ftl_gpu_comm_create(int device, int world_size, int rank, const unsigned char id[FTL_NCCL_ID_BYTES],
                            ftl_gpu_comm **out, ftl_diag *d) {
  (void)device, (void)world_size, (void)rank, (void)id, (void)out;
  return ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "built without NCCL");
}

ftl_err ftl_gpu_allreduce(ftl_gpu_comm *comm, const void *send, void *recv, size_t count, ftl_dtype dtype,
                          ftl_op op, int64_t deadline_ms, ftl_diag *d) {
  (void)comm, (void)send, (void)recv, (void)count, (void)dtype, (void)op, (void)deadline_ms;
  return ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "built without NCCL");
}

void ftl_gpu_comm_destroy(ftl_gpu_comm *comm) { (void)comm; }
