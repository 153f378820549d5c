/* rendezvous/gpu_cuda.c: the GPU seam over the CUDA runtime and NCCL.
 *
 * Waits never block without a deadline: after enqueueing a collective we poll the stream and
 * ncclCommGetAsyncError, and abort the communicator when the deadline passes, because a plain
 * cudaStreamSynchronize on a collective whose peer died waits forever. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ftl/core.h"
#include "rendezvous/gpu_seam.h"

struct ftl_gpu_comm {
  ncclComm_t comm;
  cudaStream_t stream;
  int device;
  int broken; /* set after an abort: destroy must not wait on it again */
};

int ftl_gpu_compiled(void) { return 1; }

int ftl_gpu_device_count(char *why, size_t why_size) {
  int count = 0; /* cudaGetDeviceCount leaves it untouched when there is no driver */
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    snprintf(why, why_size, "cudaGetDeviceCount: %s", cudaGetErrorString(err));
    cudaGetLastError(); /* clear the sticky error so later CUDA calls are not confused */
    return 0;
  }
  if (count == 0) snprintf(why, why_size, "no CUDA device visible");
  return count;
}

static ftl_err nccl_check(ncclResult_t r, const char *what, ftl_diag *d) {
  if (r == ncclSuccess || r == ncclInProgress) return FTL_OK;
  return ftl_diag_fail(d, FTL_ERR_NCCL, "%s failed: %s (%s)", what, ncclGetErrorString(r), ncclGetLastError(NULL));
}

static ftl_err cuda_check(cudaError_t r, const char *what, ftl_diag *d) {
  if (r == cudaSuccess) return FTL_OK;
  return ftl_diag_fail(d, FTL_ERR_CUDA, "%s failed: %s", what, cudaGetErrorString(r));
}

ftl_err ftl_gpu_unique_id(unsigned char id[FTL_NCCL_ID_BYTES], ftl_diag *d) {
  ncclUniqueId uid;
  _Static_assert(sizeof uid == FTL_NCCL_ID_BYTES, "NCCL unique id size changed");
  ftl_err rc = nccl_check(ncclGetUniqueId(&uid), "ncclGetUniqueId", d);
  if (rc == FTL_OK) memcpy(id, &uid, sizeof uid);
  return rc;
}

ftl_err ftl_gpu_comm_create(int device, int world_size, int rank, const unsigned char id[FTL_NCCL_ID_BYTES],
                            ftl_gpu_comm **out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  ftl_gpu_comm *c = ftl_calloc(1, sizeof *c);
  if (!c) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  c->device = device;
  rc = cuda_check(cudaSetDevice(device), "cudaSetDevice", d);
  if (rc) goto out;
  rc = cuda_check(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate", d);
  if (rc) goto out;
  ncclUniqueId uid;
  memcpy(&uid, id, sizeof uid);
  rc = nccl_check(ncclCommInitRank(&c->comm, world_size, uid, rank), "ncclCommInitRank", d);
  if (rc) goto out;
  *out = c;
  c = NULL;
out:
  if (c) {
    if (c->stream) cudaStreamDestroy(c->stream);
    ftl_free(c);
  }
  return rc;
}

static ncclDataType_t nccl_type(ftl_dtype t, int *ok) {
  *ok = 1;
  switch (t) {
    case FTL_DTYPE_F32: return ncclFloat32;
    case FTL_DTYPE_F64: return ncclFloat64;
    case FTL_DTYPE_I32: return ncclInt32;
    case FTL_DTYPE_I64: return ncclInt64;
    case FTL_DTYPE_U8: return ncclUint8;
    case FTL_DTYPE_F16: return ncclFloat16;
    case FTL_DTYPE_BF16: return ncclBfloat16;
    case FTL_DTYPE_I8: return ncclInt8;
    case FTL_DTYPE_U32: return ncclUint32;
    case FTL_DTYPE_U64: return ncclUint64;
  }
  *ok = 0;
  return ncclFloat32;
}

static ncclRedOp_t nccl_op(ftl_op op) {
  switch (op) {
    case FTL_OP_SUM: return ncclSum;
    case FTL_OP_MAX: return ncclMax;
    case FTL_OP_MIN: return ncclMin;
    case FTL_OP_PROD: return ncclProd;
  }
  return ncclSum;
}

ftl_err ftl_gpu_allreduce(ftl_gpu_comm *c, const void *send, void *recv, size_t count, ftl_dtype dtype,
                          ftl_op op, int64_t deadline_ms, ftl_diag *d) {
  int ok;
  ncclDataType_t t = nccl_type(dtype, &ok);
  if (!ok) return ftl_diag_fail(d, FTL_ERR_INVAL, "dtype %d has no NCCL type", (int)dtype);
  if (c->broken) return ftl_diag_fail(d, FTL_ERR_STATE, "the NCCL communicator was aborted earlier");
  ftl_err rc = nccl_check(ncclAllReduce(send, recv, count, t, nccl_op(op), c->comm, c->stream), "ncclAllReduce", d);
  if (rc) return rc;
  for (unsigned spins = 0;; spins++) {
    cudaError_t q = cudaStreamQuery(c->stream);
    if (q == cudaSuccess) return FTL_OK;
    if (q != cudaErrorNotReady) return cuda_check(q, "cudaStreamQuery", d);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(c->comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      rc = nccl_check(async, "NCCL collective (asynchronous error)", d);
      break;
    }
    if (ftl_deadline_left_ms(deadline_ms) == 0) {
      rc = ftl_diag_fail(d, FTL_ERR_TIMEOUT, "NCCL allreduce did not complete before its deadline");
      break;
    }
    if (spins > 1000) {
      struct timespec ts = {0, 50000};
      nanosleep(&ts, NULL);
    }
  }
  ncclCommAbort(c->comm);
  c->broken = 1;
  return rc;
}

void ftl_gpu_comm_destroy(ftl_gpu_comm *c) {
  if (!c) return;
  if (!c->broken) ncclCommDestroy(c->comm);
  cudaStreamDestroy(c->stream);
  ftl_free(c);
}
