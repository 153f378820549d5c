/* rendezvous/gpu_seam.h: the CUDA runtime and NCCL calls of the in-rank library, behind one small
 * interface. gpu_cuda.c implements it when ftl is built with CUDA and NCCL; gpu_none.c, the
 * build without them, answers "no GPU" so the CPU path is taken. Nothing else includes
 * cuda_runtime.h or nccl.h. */
#ifndef FTL_RDZV_GPU_SEAM_H
#define FTL_RDZV_GPU_SEAM_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"
#include "ftl/rdzv.h"

#define FTL_NCCL_ID_BYTES 128

typedef struct ftl_gpu_comm ftl_gpu_comm;

/* Number of usable GPUs (0 when none); why is filled with the reason when 0. Never an error:
 * no GPU is an answer, not a failure. */
int ftl_gpu_device_count(char *why, size_t why_size);

/* Whether this build has the NCCL path compiled in. */
int ftl_gpu_compiled(void);

/* Rank 0 makes the NCCL unique id; it is then broadcast over MPI. */
ftl_err ftl_gpu_unique_id(unsigned char id[FTL_NCCL_ID_BYTES], ftl_diag *d);

/* Selects the device and creates the communicator, its stream and event. */
ftl_err ftl_gpu_comm_create(int device, int world_size, int rank, const unsigned char id[FTL_NCCL_ID_BYTES],
                            ftl_gpu_comm **out, ftl_diag *d);

/* Enqueues the allreduce on ftl's stream and waits for it until deadline_ms, polling NCCL's
 * asynchronous error; on a deadline or an async error the communicator is aborted. */
ftl_err ftl_gpu_allreduce(ftl_gpu_comm *comm, const void *send, void *recv, size_t count, ftl_dtype dtype,
                          ftl_op op, int64_t deadline_ms, ftl_diag *d);

/* Destroys (or aborts, when it failed) the communicator. Accepts NULL. */
void ftl_gpu_comm_destroy(ftl_gpu_comm *comm);

#endif
