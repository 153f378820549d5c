/* rendezvous/gpu_cuda.c: the GPU seam's table over the CUDA runtime and NCCL (see gpu_seam.h):
 * one thin wrapper per call, folding the result into FTL_GPU_* and keeping the library's text for
 * last_error(). Compiled when the CUDA toolkit is found; the NCCL calls only when NCCL is too
 * (FTL_HAVE_NCCL), else they fail saying so and ftl_init keeps to MPI. No logic here: deadlines,
 * aborts and ordering are in gpu.c, where the fakes of tests/rendezvous/test_gpu_fake.c reach them.
 *
 * The two libraries are loaded when first needed (core_dl_open: their sonames, FTL_CUDART_SONAME
 * and FTL_NCCL_SONAME, then the build's folders), never linked: libftl.so and every program
 * built on it load and run on a host without CUDA or NCCL (a CPU node, a login node), where the
 * seam answers "no device" (no CUDA runtime) or NCCL fails (no NCCL) and ftl_init takes the MPI
 * CPU path. The headers give the types and the names; the calls go through the table below. */
#include <cuda_runtime.h>
#include <dlfcn.h> /* dlsym */
#include <glob.h>
#ifdef FTL_HAVE_NCCL
#include <nccl.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/dl.h"
#include "rendezvous/gpu_seam.h"

static _Thread_local char last_text[256];

/* The calls this file makes, resolved by name from the loaded libraries. */
#define CUDA_CALLS(X)                                                                                                  \
  X(cudaGetDeviceCount) X(cudaGetLastError) X(cudaGetErrorString) X(cudaGetErrorName) X(cudaSetDevice)                \
  X(cudaPointerGetAttributes) X(cudaStreamCreateWithFlags) X(cudaStreamDestroy) X(cudaStreamQuery)                    \
  X(cudaEventCreateWithFlags) X(cudaEventDestroy) X(cudaEventRecord) X(cudaEventQuery) X(cudaStreamWaitEvent)         \
  X(cudaMemcpyAsync) X(cudaHostRegister) X(cudaHostUnregister) X(cudaRuntimeGetVersion) X(cudaDriverGetVersion)
#ifdef FTL_HAVE_NCCL
#define NCCL_CALLS(X)                                                                                                  \
  X(ncclGetLastError) X(ncclGetErrorString) X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRankConfig)           \
  X(ncclCommGetAsyncError) X(ncclAllReduce) X(ncclCommFinalize) X(ncclCommDestroy) X(ncclCommAbort)
#else
#define NCCL_CALLS(X)
#endif
#define DECLARE(f) __typeof__(&f) f;
static struct {
  CUDA_CALLS(DECLARE)
  NCCL_CALLS(DECLARE)
} lib;
#undef DECLARE

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int cuda_loaded, nccl_loaded;
static char cuda_missing[160], nccl_missing[160];

/* Resolves every name of a list from handle h; 0 (and why naming it) when one is missing. */
#define RESOLVE(f)                                                                                                     \
  if (ok && !(*(void **)&lib.f = dlsym(h, #f))) {                                                                      \
    snprintf(why, why_size, "%s has no %s", soname, #f);                                                               \
    ok = 0;                                                                                                            \
  }

static int resolve_cuda(void *h, const char *soname, char *why, size_t why_size) {
  int ok = 1;
  CUDA_CALLS(RESOLVE)
  return ok;
}

#ifdef FTL_HAVE_NCCL
static int resolve_nccl(void *h, const char *soname, char *why, size_t why_size) {
  int ok = 1;
  NCCL_CALLS(RESOLVE)
  return ok;
}
#endif
#undef RESOLVE

static void load_libraries(void) {
  void *h = core_dl_open(FTL_CUDART_SONAME, FTL_CUDA_LIB_DIR, cuda_missing, sizeof cuda_missing);
  cuda_loaded = h && resolve_cuda(h, FTL_CUDART_SONAME, cuda_missing, sizeof cuda_missing);
#ifdef FTL_HAVE_NCCL
  /* NCCL is only of use with the runtime. */
  h = cuda_loaded ? core_dl_open(FTL_NCCL_SONAME, FTL_NCCL_LIB_DIR, nccl_missing, sizeof nccl_missing) : NULL;
  if (!cuda_loaded) snprintf(nccl_missing, sizeof nccl_missing, "no CUDA runtime");
  nccl_loaded = h && resolve_nccl(h, FTL_NCCL_SONAME, nccl_missing, sizeof nccl_missing);
#endif
}

/* Whether the runtime is there; without it every call answers FTL_GPU_NO_DEVICE, saying why. */
static int have_cuda(void) {
  pthread_once(&load_once, load_libraries);
  if (!cuda_loaded)
    snprintf(last_text, sizeof last_text, "no CUDA runtime on this host (%s): the CPU path", cuda_missing);
  return cuda_loaded;
}

static int cuda_rc(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return FTL_GPU_OK;
  if (e == cudaErrorNotReady) {
    lib.cudaGetLastError(); /* not sticky, but clear it so a later cudaGetLastError is not confused */
    return FTL_GPU_NOT_READY;
  }
  snprintf(last_text, sizeof last_text, "%s: %s (%s)", what, lib.cudaGetErrorString(e), lib.cudaGetErrorName(e));
  return FTL_GPU_FAILED;
}

#ifdef FTL_HAVE_NCCL
static int nccl_rc(ncclResult_t r, const char *what) {
  if (r == ncclSuccess) return FTL_GPU_OK;
  if (r == ncclInProgress) return FTL_GPU_IN_PROGRESS;
  const char *last = lib.ncclGetLastError(NULL);
  snprintf(last_text, sizeof last_text, "%s: %s%s%s", what, lib.ncclGetErrorString(r), last && *last ? ": " : "",
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
  *count = 0;
  if (!have_cuda()) return FTL_GPU_NO_DEVICE;
  int n = 0; /* cudaGetDeviceCount leaves it untouched when there is no driver */
  cudaError_t e = lib.cudaGetDeviceCount(&n);
  *count = 0;
  if (e == cudaSuccess) {
    *count = n;
    return FTL_GPU_OK;
  }
  lib.cudaGetLastError(); /* clear the error so later CUDA calls are not confused */
  snprintf(last_text, sizeof last_text, "cudaGetDeviceCount: %s (%s)", lib.cudaGetErrorString(e),
           lib.cudaGetErrorName(e));
  if (e == cudaErrorNoDevice || !have_device_node()) {
    size_t len = strlen(last_text);
    if (e != cudaErrorNoDevice) snprintf(last_text + len, sizeof last_text - len, "; no /dev/nvidia*");
    return FTL_GPU_NO_DEVICE;
  }
  return FTL_GPU_FAILED;
}

static int r_set_device(int device) {
  return have_cuda() ? cuda_rc(lib.cudaSetDevice(device), "cudaSetDevice") : FTL_GPU_NO_DEVICE;
}

static int r_pointer_kind(const void *p, rz_gpu_mem *kind, int *device) {
  struct cudaPointerAttributes a;
  memset(&a, 0, sizeof a);
  *kind = FTL_GPU_MEM_HOST;
  *device = -1;
  if (!have_cuda()) return FTL_GPU_OK; /* no runtime: no memory of CUDA's either */
  cudaError_t e = lib.cudaPointerGetAttributes(&a, p);
  if (e == cudaErrorInvalidValue) { /* CUDA < 11 said this for unregistered host memory */
    lib.cudaGetLastError();
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
  *stream = NULL;
  if (!have_cuda()) return FTL_GPU_NO_DEVICE;
  int rc = cuda_rc(lib.cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  *stream = s;
  return rc;
}
static void r_stream_destroy(void *stream) {
  if (stream && have_cuda()) lib.cudaStreamDestroy((cudaStream_t)stream);
}
static cudaStream_t as_stream(void *stream) { return stream ? (cudaStream_t)stream : cudaStreamLegacy; }
static int r_stream_query(void *stream) {
  return have_cuda() ? cuda_rc(lib.cudaStreamQuery(as_stream(stream)), "cudaStreamQuery") : FTL_GPU_NO_DEVICE;
}
static int r_event_create(void **event) {
  cudaEvent_t e = NULL;
  *event = NULL;
  if (!have_cuda()) return FTL_GPU_NO_DEVICE;
  int rc = cuda_rc(lib.cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  *event = e;
  return rc;
}
static void r_event_destroy(void *event) {
  if (event && have_cuda()) lib.cudaEventDestroy((cudaEvent_t)event);
}
static int r_event_record(void *event, void *stream) {
  if (!have_cuda()) return FTL_GPU_NO_DEVICE;
  return cuda_rc(lib.cudaEventRecord((cudaEvent_t)event, as_stream(stream)), "cudaEventRecord");
}
static int r_event_query(void *event) {
  return have_cuda() ? cuda_rc(lib.cudaEventQuery((cudaEvent_t)event), "cudaEventQuery") : FTL_GPU_NO_DEVICE;
}
static int r_stream_wait_event(void *stream, void *event) {
  if (!have_cuda()) return FTL_GPU_NO_DEVICE;
  return cuda_rc(lib.cudaStreamWaitEvent(as_stream(stream), (cudaEvent_t)event, 0), "cudaStreamWaitEvent");
}
static int r_memcpy_async(void *dst, const void *src, size_t n, int to_device, void *stream) {
  if (!have_cuda()) return FTL_GPU_NO_DEVICE;
  return cuda_rc(lib.cudaMemcpyAsync(dst, src, n, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                     as_stream(stream)),
                 "cudaMemcpyAsync");
}
static int r_host_register(void *p, size_t n) {
  if (!have_cuda()) return FTL_GPU_NO_DEVICE;
  return cuda_rc(lib.cudaHostRegister(p, n, cudaHostRegisterDefault), "cudaHostRegister");
}
static void r_host_unregister(void *p) {
  if (have_cuda()) lib.cudaHostUnregister(p);
}
static int r_runtime_version(int *v) {
  *v = 0;
  return have_cuda() ? cuda_rc(lib.cudaRuntimeGetVersion(v), "cudaRuntimeGetVersion") : FTL_GPU_NO_DEVICE;
}
static int r_driver_version(int *v) {
  *v = 0;
  return have_cuda() ? cuda_rc(lib.cudaDriverGetVersion(v), "cudaDriverGetVersion") : FTL_GPU_NO_DEVICE;
}

#ifdef FTL_HAVE_NCCL
/* Whether NCCL is there (with the runtime); without it every NCCL call fails, saying why, and
 * ftl_init keeps to MPI. */
static int have_nccl(void) {
  if (!have_cuda()) return 0;
  if (!nccl_loaded) snprintf(last_text, sizeof last_text, "NCCL is not on this host (%s)", nccl_missing);
  return nccl_loaded;
}

static int r_nccl_version(int *v) {
  *v = 0;
  return have_nccl() ? nccl_rc(lib.ncclGetVersion(v), "ncclGetVersion") : FTL_GPU_FAILED;
}
static int r_nccl_unique_id(unsigned char id[FTL_NCCL_ID_BYTES]) {
  if (!have_nccl()) return FTL_GPU_FAILED;
  ncclUniqueId uid;
  _Static_assert(sizeof uid == FTL_NCCL_ID_BYTES, "NCCL unique id size changed");
  int rc = nccl_rc(lib.ncclGetUniqueId(&uid), "ncclGetUniqueId");
  if (rc == FTL_GPU_OK) memcpy(id, &uid, sizeof uid);
  return rc;
}
static int r_nccl_init(void **comm, int nranks, const unsigned char id[FTL_NCCL_ID_BYTES], int rank) {
  *comm = NULL;
  if (!have_nccl()) return FTL_GPU_FAILED;
  ncclUniqueId uid;
  memcpy(&uid, id, sizeof uid);
  /* Non-blocking: a blocking ncclCommInitRank waits forever for a rank that failed before it. */
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t c = NULL;
  int rc = nccl_rc(lib.ncclCommInitRankConfig(&c, nranks, uid, rank, &config), "ncclCommInitRankConfig");
  *comm = c;
  return rc;
}
static int r_nccl_async_error(void *comm) {
  if (!have_nccl()) return FTL_GPU_FAILED;
  ncclResult_t state = ncclSuccess;
  ncclResult_t r = lib.ncclCommGetAsyncError((ncclComm_t)comm, &state);
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
  if (!have_nccl()) return FTL_GPU_FAILED;
  if (!nccl_type(dtype, &t)) {
    snprintf(last_text, sizeof last_text, "dtype %d has no NCCL type", (int)dtype);
    return FTL_GPU_FAILED;
  }
  return nccl_rc(lib.ncclAllReduce(send, recv, count, t, nccl_op(op), (ncclComm_t)comm, as_stream(stream)),
                 "ncclAllReduce");
}
static int r_nccl_finalize(void *comm) {
  return have_nccl() ? nccl_rc(lib.ncclCommFinalize((ncclComm_t)comm), "ncclCommFinalize") : FTL_GPU_FAILED;
}
static void r_nccl_destroy(void *comm) {
  if (have_nccl()) lib.ncclCommDestroy((ncclComm_t)comm);
}
static void r_nccl_abort(void *comm) {
  if (have_nccl()) lib.ncclCommAbort((ncclComm_t)comm);
}
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

const rz_gpu_ops rz_gpu_build_ops = {
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
