/* rendezvous/gpu_seam.h: every CUDA runtime and NCCL call of the in-rank library (rendezvous/ and
 * checkpoint/) goes through one table of small functions, so a test can put a fake in its place
 * (a device count, an NCCL init that never finishes, a collective that fails, a log of the order
 * of calls) the way rendezvous/mpi_seam.h fakes MPI. gpu_cuda.c fills the table with the real
 * calls when ftl is built with CUDA and NCCL; gpu_none.c, the build without them, answers "no
 * device". Nothing else includes cuda_runtime.h or nccl.h.
 *
 * The logic on top of the table (deadlines, aborts, ordering, memory kinds) is in gpu.c, which
 * every build compiles, so the fakes test the code that runs on a GPU machine.
 *
 * Not here: choosing the backend and agreeing on it (rdzv_init.c). */
#ifndef FTL_RDZV_GPU_SEAM_H
#define FTL_RDZV_GPU_SEAM_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"
#include "ftl/rdzv.h"

#define FTL_NCCL_ID_BYTES 128

/* What one seam call returns: CUDA's and NCCL's many codes folded into what ftl acts on. The
 * text of a FTL_GPU_NO_DEVICE or FTL_GPU_FAILED is in ops->last_error() (per thread). */
enum {
  FTL_GPU_OK = 0,
  FTL_GPU_NOT_READY = 1,   /* cudaErrorNotReady: a stream/event query while work is pending */
  FTL_GPU_IN_PROGRESS = 2, /* ncclInProgress: a non-blocking NCCL call not finished yet */
  FTL_GPU_NO_DEVICE = 3,   /* cudaErrorNoDevice, no driver library, no /dev/nvidia*: "no GPU" */
  FTL_GPU_FAILED = 4,      /* anything else: a GPU that is there and does not work */
};

/* Where a pointer lives (cudaPointerGetAttributes). */
typedef enum rz_gpu_mem {
  FTL_GPU_MEM_HOST = 0,    /* pageable host memory (malloc), unknown to CUDA */
  FTL_GPU_MEM_PINNED = 1,  /* page-locked host memory (cudaMallocHost, cudaHostRegister) */
  FTL_GPU_MEM_DEVICE = 2,  /* cudaMalloc */
  FTL_GPU_MEM_MANAGED = 3, /* cudaMallocManaged */
} rz_gpu_mem;

/* Stream handles are cudaStream_t passed as void *; NULL means the legacy default stream
 * (cudaStreamLegacy), which waits for all earlier work of every blocking stream. */
typedef struct rz_gpu_ops {
  int compiled;      /* 1 when the CUDA runtime is behind the table, 0 for gpu_none.c */
  int nccl_compiled; /* 1 when NCCL is too */
  /* CUDA runtime */
  int (*device_count)(int *count);
  int (*set_device)(int device);
  int (*pointer_kind)(const void *p, rz_gpu_mem *kind, int *device);
  int (*stream_create)(void **stream); /* non-blocking stream */
  void (*stream_destroy)(void *stream);
  int (*stream_query)(void *stream);
  int (*event_create)(void **event);
  void (*event_destroy)(void *event);
  int (*event_record)(void *event, void *stream);
  int (*event_query)(void *event);
  int (*stream_wait_event)(void *stream, void *event);
  int (*memcpy_async)(void *dst, const void *src, size_t n, int to_device, void *stream);
  int (*host_register)(void *p, size_t n);
  void (*host_unregister)(void *p);
  int (*runtime_version)(int *version);
  int (*driver_version)(int *version);
  /* NCCL; communicators are ncclComm_t as void *. init uses ncclCommInitRankConfig with
   * blocking = 0: it returns OK or IN_PROGRESS, and async_error says when it is done. */
  int (*nccl_version)(int *version);
  int (*nccl_unique_id)(unsigned char id[FTL_NCCL_ID_BYTES]);
  int (*nccl_init)(void **comm, int nranks, const unsigned char id[FTL_NCCL_ID_BYTES], int rank);
  int (*nccl_async_error)(void *comm); /* OK, IN_PROGRESS or FAILED */
  int (*nccl_allreduce)(const void *send, void *recv, size_t count, ftl_dtype dtype, ftl_op op, void *comm,
                        void *stream);
  int (*nccl_finalize)(void *comm);
  void (*nccl_destroy)(void *comm);
  void (*nccl_abort)(void *comm);
  const char *(*last_error)(void);
} rz_gpu_ops;

/* The table in use (the build's own unless a test replaced it). */
extern const rz_gpu_ops *rz_gpu_current;
static inline const rz_gpu_ops *ftl_gpu(void) { return rz_gpu_current; }
/* The build's own table (gpu_cuda.c or gpu_none.c). */
extern const rz_gpu_ops rz_gpu_build_ops;

/* Test hook: replaces the table (NULL restores the build's). Not thread-safe; call before
 * ftl_init. */
void rz_gpu_set_ops(const rz_gpu_ops *ops);

/* ---- gpu.c: the logic over the table ---------------------------------------------------- */

typedef struct rz_gpu_comm rz_gpu_comm;

/* Whether this build has the CUDA runtime (and NCCL) compiled in. */
int rz_gpu_compiled(void);
int rz_gpu_nccl_compiled(void);

/* Number of usable GPUs in *count. Returns FTL_GPU_OK (count may be 0), FTL_GPU_NO_DEVICE (no
 * device, no driver: *count 0) or FTL_GPU_FAILED (a device is there but the driver is too old
 * or broken: *count 0); why says which. */
int rz_gpu_probe(int *count, char *why, size_t why_size);

/* The count alone (0 when none or broken, with why). */
int rz_gpu_device_count(char *why, size_t why_size);

/* Where p lives; pageable host memory when the build has no CUDA or CUDA does not know p. */
rz_gpu_mem rz_gpu_mem_kind(const void *p, int *device);

/* Rank 0 makes the NCCL unique id; it is then broadcast over MPI. */
ftl_err rz_gpu_unique_id(unsigned char id[FTL_NCCL_ID_BYTES], ftl_diag *d);

/* Selects the device, creates ftl's stream and event and the communicator (non-blocking init),
 * and polls it until it is ready or deadline_ms passes: then, or on an error, the communicator is
 * aborted and FTL_ERR_TIMEOUT / FTL_ERR_NCCL returned. Not collective by itself: the caller agrees
 * on the outcome across ranks before using the communicator. */
ftl_err rz_gpu_comm_create(int device, int world_size, int rank, const unsigned char id[FTL_NCCL_ID_BYTES],
                            int64_t deadline_ms, rz_gpu_comm **out, ftl_diag *d);

/* Allreduce of device memory. Ordering: ftl's stream first waits for an event recorded on
 * `stream` (NULL: the legacy default stream), so the collective reads what the caller's earlier
 * kernels wrote; the call returns once the result is in recv. Polls the stream and NCCL's
 * asynchronous error until deadline_ms; on a deadline or an error the communicator is aborted and
 * every later call returns FTL_ERR_STATE. */
ftl_err rz_gpu_allreduce(rz_gpu_comm *comm, const void *send, void *recv, size_t count, ftl_dtype dtype,
                          ftl_op op, void *stream, int64_t deadline_ms, ftl_diag *d);

/* 1 after an abort (a failed collective): the communicator must not be used again. */
int rz_gpu_comm_broken(const rz_gpu_comm *comm);

/* Aborts the communicator (ncclCommAbort: never waits on peers). Idempotent. */
void rz_gpu_comm_abort(rz_gpu_comm *comm);

/* Releases the communicator: ncclCommFinalize polled until deadline_ms then ncclCommDestroy, or
 * ncclCommAbort when it was broken or the finalize did not finish. Accepts NULL. */
void rz_gpu_comm_destroy(rz_gpu_comm *comm, int64_t deadline_ms);

/* Waits for an event (polling: every wait has a deadline). FTL_ERR_TIMEOUT / FTL_ERR_CUDA. */
ftl_err rz_gpu_event_wait(void *event, int64_t deadline_ms, const char *what, ftl_diag *d);

/* FTL_ERR_CUDA with the seam's last error text, naming the call. */
ftl_err rz_gpu_fail(int status, const char *what, ftl_diag *d);

#endif
