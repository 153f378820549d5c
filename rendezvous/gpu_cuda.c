/* rendezvous/gpu_cuda.c: the GPU seam's table over the CUDA runtime and NCCL (see gpu_seam.h):
 * one thin wrapper per call, folding the result into FTL_GPU_* and keeping the library's text for
 * last_error(). Compiled when the CUDA toolkit is found; the NCCL calls only when NCCL is too
 * (FTL_HAVE_NCCL), else they fail saying so and ftl_init keeps to MPI. No logic here: deadlines, aborts and ordering are in gpu.c, where the fakes of
 * tests/rendezvous/test_gpu_fake.c reach them. */
#include <cuda_runtime.h>
#include <glob.h>
#ifdef FTL_HAVE_NCCL
#include <nccl.h>
#endif
#include <stdio.h>
#include <string.h>

#include "rendezvous/gpu_seam.h"

static _Thread_local char last_text[256];

static int cuda_rc(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return FTL_GPU_OK;
  if (e == cudaErrorNotReady) {
    cudaGetLastError(); /* not sticky, but clear it so a later cudaGetLastError is not confused */
    return FTL_GPU_NOT_READY;
  }
  snprintf(last_text, sizeof last_text, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
  return FTL_GPU_FAILED;
}

#ifdef FTL_HAVE_NCCL
static int nccl_rc(ncclResult_t r, const char *what) {
  if (r == ncclSuccess) return FTL_GPU_OK;
  if (r == ncclInProgress) return FTL_GPU_IN_PROGRESS;
  const char *last = ncclGetLastError(NULL);
  snprintf(last_text, sizeof last_text, "%s: %s%s%s", what, ncclGetErrorString(r), last && *last ? ": " : "",
           last ? last : "");
  return FTL_GPU_FAILED;
}
#endif

/* A device node means a GPU is there: then any failure to count it is a broken GPU or driver, not
 * "no GPU" (a driver too old for this runtime must fail the GPU tests, not skip them). */
static int have_device_node(void) {
  glob_t g;
  int found = glob("/dev/nvidia[0-9]*", 0, NULL, &g) == 0 && g.gl_pathc > 0;
  globfree(&g);
  return found;
}

static int r_device_count(int *count) {
  int n = 0; /* cudaGetDeviceCount leaves it untouched when there is no driver */
  cudaError_t e = cudaGetDeviceCount(&n);
  *count = 0;
  if (e == cudaSuccess) {
    *count = n;
    return FTL_GPU_OK;
  }
  cudaGetLastError(); /* clear the error so later CUDA calls are not confused */
  snprintf(last_text, sizeof last_text, "cudaGetDeviceCount: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
  if (e == cudaErrorNoDevice || !have_device_node()) {
    size_t len = strlen(last_text);
    if (e != cudaErrorNoDevice) snprintf(last_text + len, sizeof last_text - len, "; no /dev/nvidia*");
    return FTL_GPU_NO_DEVICE;
  }
  return FTL_GPU_FAILED;
}

static int r_set_device(int device) { return cuda_rc(cudaSetDevice(device), "cudaSetDevice"); }

static int r_pointer_kind(const void *p, ftl_gpu_mem *kind, int *device) {
  struct cudaPointerAttributes a;
  memset(&a, 0, sizeof a);
  *kind = FTL_GPU_MEM_HOST;
  *device = -1;
  cudaError_t e = cudaPointerGetAttributes(&a, p);
  if (e == cudaErrorInvalidValue) { /* CUDA < 11 said this for unregistered host memory */
    cudaGetLastError();
    return FTL_GPU_OK;
  }
  if (e != cudaSuccess) return cuda_rc(e, "cudaPointerGetAttributes");
  switch (a.type) {
    case cudaMemoryTypeUnregistered: *kind = FTL_GPU_MEM_HOST; break;
    case cudaMemoryTypeHost: *kind = FTL_GPU_MEM_PINNED; break;
    case cudaMemoryTypeDevice: *kind = FTL_GPU_MEM_DEVICE; *device = a.device; break;
    case cudaMemoryTypeManaged: *kind = FTL_GPU_MEM_MANAGED; *device = a.device; break;
  }
  return FTL_GPU_OK;
}

static int r_stream_create(void **stream) {
  cudaStream_t s = NULL;
  int rc = cuda_rc(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  *stream = s;
  return rc;
}
static void r_stream_destroy(void *stream) { if (stream) cudaStreamDestroy((cudaStream_t)stream); }
static cudaStream_t as_stream(void *stream) { return stream ? (cudaStream_t)stream : cudaStreamLegacy; }
static int r_stream_query(void *stream) { return cuda_rc(cudaStreamQuery(as_stream(stream)), "cudaStreamQuery"); }
static int r_event_create(void **event) {
  cudaEvent_t e = NULL;
  int rc = cuda_rc(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  *event = e;
  return rc;
}
static void r_event_destroy(void *event) { if (event) cudaEventDestroy((cudaEvent_t)event); }
static int r_event_record(void *event, void *stream) {
  return cuda_rc(cudaEventRecord((cudaEvent_t)event, as_stream(stream)), "cudaEventRecord");
}
static int r_event_query(void *event) { return cuda_rc(cudaEventQuery((cudaEvent_t)event), "cudaEventQuery"); }
static int r_stream_wait_event(void *stream, void *event) {
  return cuda_rc(cudaStreamWaitEvent(as_stream(stream), (cudaEvent_t)event, 0), "cudaStreamWaitEvent");
}
static int r_memcpy_async(void *dst, const void *src, size_t n, int to_device, void *stream) {
  return cuda_rc(cudaMemcpyAsync(dst, src, n, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                 as_stream(stream)),
                 "cudaMemcpyAsync");
}
static int r_host_register(void *p, size_t n) {
  return cuda_rc(cudaHostRegister(p, n, cudaHostRegisterDefault), "cudaHostRegister");
}
static void r_host_unregister(void *p) { cudaHostUnregister(p); }
static int r_runtime_version(int *v) { return cuda_rc(cudaRuntimeGetVersion(v), "cudaRuntimeGetVersion"); }
static int r_driver_version(int *v) { return cuda_rc(cudaDriverGetVersion(v), "cudaDriverGetVersion"); }

#ifdef FTL_HAVE_NCCL
static int r_nccl_version(int *v) { return nccl_rc(ncclGetVersion(v), "ncclGetVersion"); }
static int r_nccl_unique_id(unsigned char id[FTL_NCCL_ID_BYTES]) {
  ncclUniqueId uid;
  _Static_assert(sizeof uid == FTL_NCCL_ID_BYTES, "NCCL unique id size changed");
  int rc = nccl_rc(ncclGetUniqueId(&uid), "ncclGetUniqueId");
  if (rc == FTL_GPU_OK) memcpy(id, &uid, sizeof uid);
  return rc;
}
static int r_nccl_init(void **comm, int nranks, const unsigned char id[FTL_NCCL_ID_BYTES], int rank) {
  ncclUniqueId uid;
  memcpy(&uid, id, sizeof uid);
  /* Non-blocking: a blocking ncclCommInitRank waits forever for a rank that failed before it. */
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t c = NULL;
  int rc = nccl_rc(ncclCommInitRankConfig(&c, nranks, uid, rank, &config), "ncclCommInitRankConfig");
  *comm = c;
  return rc;
}
static int r_nccl_async_error(void *comm) {
  ncclResult_t state = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError((ncclComm_t)comm, &state);
  if (r != ncclSuccess) return nccl_rc(r, "ncclCommGetAsyncError");
  return nccl_rc(state, "NCCL (asynchronous error)");
}

static int nccl_type(ftl_dtype t, ncclDataType_t *out) {
  switch (t) {
    case FTL_DTYPE_F32: *out = ncclFloat32; return 1;
    case FTL_DTYPE_F64: *out = ncclFloat64; return 1;
    case FTL_DTYPE_I32: *out = ncclInt32; return 1;
    case FTL_DTYPE_I64: *out = ncclInt64; return 1;
    case FTL_DTYPE_U8: *out = ncclUint8; return 1;
    case FTL_DTYPE_F16: *out = ncclFloat16; return 1;
    case FTL_DTYPE_BF16: *out = ncclBfloat16; return 1;
    case FTL_DTYPE_I8: *out = ncclInt8; return 1;
    case FTL_DTYPE_U32: *out = ncclUint32; return 1;
    case FTL_DTYPE_U64: *out = ncclUint64; return 1;
  }
  return 0;
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

static int r_nccl_allreduce(const void *send, void *recv, size_t count, ftl_dtype dtype, ftl_op op, void *comm,
                            void *stream) {
  ncclDataType_t t;
  if (!nccl_type(dtype, &t)) {
    snprintf(last_text, sizeof last_text, "dtype %d has no NCCL type", (int)dtype);
    return FTL_GPU_FAILED;
  }
  return nccl_rc(ncclAllReduce(send, recv, count, t, nccl_op(op), (ncclComm_t)comm, as_stream(stream)),
                 "ncclAllReduce");
}
static int r_nccl_finalize(void *comm) { return nccl_rc(ncclCommFinalize((ncclComm_t)comm), "ncclCommFinalize"); }
static void r_nccl_destroy(void *comm) { ncclCommDestroy((ncclComm_t)comm); }
static void r_nccl_abort(void *comm) { ncclCommAbort((ncclComm_t)comm); }
#else
static int no_nccl(void) {
  snprintf(last_text, sizeof last_text, "ftl was built with CUDA but without NCCL");
  return FTL_GPU_FAILED;
}
static int r_nccl_version(int *v) { *v = 0; return no_nccl(); }
static int r_nccl_unique_id(unsigned char id[FTL_NCCL_ID_BYTES]) { (void)id; return no_nccl(); }
static int r_nccl_init(void **comm, int nranks, const unsigned char id[FTL_NCCL_ID_BYTES], int rank) {
  (void)nranks, (void)id, (void)rank;
  *comm = NULL;
  return no_nccl();
}
static int r_nccl_async_error(void *comm) { (void)comm; return no_nccl(); }
static int r_nccl_allreduce(const void *send, void *recv, size_t count, ftl_dtype dtype, ftl_op op, void *comm,
                            void *stream) {
  (void)send, (void)recv, (void)count, (void)dtype, (void)op, (void)comm, (void)stream;
  return no_nccl();
}
static int r_nccl_finalize(void *comm) { (void)comm; return no_nccl(); }
static void r_nccl_destroy(void *comm) { (void)comm; }
static void r_nccl_abort(void *comm) { (void)comm; }
#endif
static const char *r_last_error(void) { return last_text; }

const ftl_gpu_ops rz_gpu_build_ops = {
    .compiled = 1,
#ifdef FTL_HAVE_NCCL
    .nccl_compiled = 1,
#endif
    .device_count = r_device_count,
    .set_device = r_set_device,
    .pointer_kind = r_pointer_kind,
    .stream_create = r_stream_create,
    .stream_destroy = r_stream_destroy,
    .stream_query = r_stream_query,
    .event_create = r_event_create,
    .event_destroy = r_event_destroy,
    .event_record = r_event_record,
    .event_query = r_event_query,
    .stream_wait_event = r_stream_wait_event,
    .memcpy_async = r_memcpy_async,
    .host_register = r_host_register,
    .host_unregister = r_host_unregister,
    .runtime_version = r_runtime_version,
    .driver_version = r_driver_version,
    .nccl_version = r_nccl_version,
    .nccl_unique_id = r_nccl_unique_id,
    .nccl_init = r_nccl_init,
    .nccl_async_error = r_nccl_async_error,
    .nccl_allreduce = r_nccl_allreduce,
    .nccl_finalize = r_nccl_finalize,
    .nccl_destroy = r_nccl_destroy,
    .nccl_abort = r_nccl_abort,
    .last_error = r_last_error,
};
