/* tests/rendezvous/fake_gpu.h: a fake GPU seam (rendezvous/gpu_seam.h) for tests on machines
 * without a GPU: a configurable device count, device memory that is host memory the test marks,
 * NCCL set-up and collectives that succeed, fail, never finish or fail asynchronously, copies that
 * land only when the event after them is seen complete (so a sync that returns early is caught),
 * and a log of every call, in order, that checks compare with the order they expect. Included by
 * one test file each (static definitions). */
#ifndef FTL_TESTS_FAKE_GPU_H
#define FTL_TESTS_FAKE_GPU_H

#include <stdio.h>
#include <string.h>

#include "ftl_test.h"
#include "rendezvous/gpu_seam.h"

/* ---- the call log --------------------------------------------------------------------------- */

static char call_log[8192];
/* Appends "name(arg) " (or "name " when arg is NULL). */
static void log_call(const char *name, const char *arg) {
  size_t used = strlen(call_log);
  if (arg) snprintf(call_log + used, sizeof call_log - used, "%s(%s) ", name, arg);
  else snprintf(call_log + used, sizeof call_log - used, "%s ", name);
}
static void log_reset(void) { call_log[0] = 0; }

/* Handles are the addresses of these, so the log can name them. */
static char h_stream[4], h_event[8], h_comm;
static int n_streams, n_events;
static const char *name_of(const void *h) {
  static const char *names[] = {"s0", "s1", "s2", "s3", "e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7"};
  if (!h) return "legacy";
  for (int i = 0; i < 4; i++)
    if (h == &h_stream[i]) return names[i];
  for (int i = 0; i < 8; i++)
    if (h == &h_event[i]) return names[4 + i];
  return "user";
}

/* ---- the fake GPU ------------------------------------------------------------------------- */

enum { INIT_OK, INIT_SLOW, INIT_FOREVER, INIT_FAILS };
enum { COLL_OK, COLL_FAILS, COLL_ASYNC_FAILS, COLL_HANGS };
static int g_devices, g_count_status, g_init_mode, g_coll_mode, g_init_polls, g_event_polls_left;
static int n_abort, n_destroy, n_finalize, n_init, n_nccl_allreduce;
static char g_last[256];

/* Pointers the fake calls device memory: (address, device). */
static struct { const void *p; int device; } g_dev_ptrs[8];
static int n_dev_ptrs;
static void fake_device_memory(const void *p, int device) {
  g_dev_ptrs[n_dev_ptrs].p = p;
  g_dev_ptrs[n_dev_ptrs++].device = device;
}

/* Copies are deferred until the event after them is seen complete: a sync that returned early
 * would find the bytes not there yet. */
static struct { void *dst; const void *src; size_t n; } g_pending[8];
static int n_pending;
static void land_pending(void) {
  for (int i = 0; i < n_pending; i++) memcpy(g_pending[i].dst, g_pending[i].src, g_pending[i].n);
  n_pending = 0;
}

static int g_device_count(int *count) {
  *count = g_count_status == FTL_GPU_OK ? g_devices : 0;
  if (g_count_status != FTL_GPU_OK) snprintf(g_last, sizeof g_last, "fake: cudaErrorInsufficientDriver");
  return g_count_status;
}
static int g_set_device(int device) {
  char b[16];
  snprintf(b, sizeof b, "%d", device);
  log_call("set_device", b);
  return device < g_devices ? FTL_GPU_OK : FTL_GPU_FAILED;
}
static int g_pointer_kind(const void *p, rz_gpu_mem *kind, int *device) {
  *kind = FTL_GPU_MEM_HOST;
  *device = -1;
  for (int i = 0; i < n_dev_ptrs; i++)
    if (g_dev_ptrs[i].p == p) *kind = FTL_GPU_MEM_DEVICE, *device = g_dev_ptrs[i].device;
  return FTL_GPU_OK;
}
static int g_stream_create(void **s) { *s = &h_stream[n_streams++ % 4]; return FTL_GPU_OK; }
static void g_stream_destroy(void *s) { (void)s; }
static int g_stream_query(void *s) {
  (void)s;
  return g_coll_mode == COLL_HANGS || g_coll_mode == COLL_ASYNC_FAILS ? FTL_GPU_NOT_READY : FTL_GPU_OK;
}
static int g_event_create(void **e) { *e = &h_event[n_events++ % 8]; return FTL_GPU_OK; }
static void g_event_destroy(void *e) { (void)e; }
static char pair_buf[64];
static const char *pair(const void *a, const void *b) {
  snprintf(pair_buf, sizeof pair_buf, "%s,%s", name_of(a), name_of(b));
  return pair_buf;
}
static int g_event_record(void *e, void *s) { log_call("event_record", pair(e, s)); return FTL_GPU_OK; }
static int g_event_query(void *e) {
  if (g_event_polls_left > 0) {
    g_event_polls_left--;
    return FTL_GPU_NOT_READY;
  }
  if (g_event_polls_left < 0) return FTL_GPU_NOT_READY; /* never completes */
  log_call("event_done", name_of(e));
  land_pending();
  return FTL_GPU_OK;
}
static int g_stream_wait_event(void *s, void *e) { log_call("stream_wait_event", pair(s, e)); return FTL_GPU_OK; }
static int g_memcpy_async(void *dst, const void *src, size_t n, int to_device, void *s) {
  log_call(to_device ? "memcpy_h2d" : "memcpy_d2h", name_of(s));
  g_pending[n_pending].dst = dst;
  g_pending[n_pending].src = src;
  g_pending[n_pending++].n = n;
  return FTL_GPU_OK;
}
static int g_host_register(void *p, size_t n) { (void)p, (void)n; return FTL_GPU_OK; }
static void g_host_unregister(void *p) { (void)p; }
static int g_version(int *v) { *v = 1; return FTL_GPU_OK; }
static int g_unique_id(unsigned char id[FTL_NCCL_ID_BYTES]) { memset(id, 7, FTL_NCCL_ID_BYTES); return FTL_GPU_OK; }
static int g_nccl_init(void **comm, int nranks, const unsigned char id[FTL_NCCL_ID_BYTES], int rank) {
  (void)nranks, (void)id, (void)rank;
  n_init++;
  log_call("nccl_init", NULL);
  *comm = &h_comm;
  g_init_polls = 0;
  if (g_init_mode == INIT_FAILS) {
    snprintf(g_last, sizeof g_last, "ncclCommInitRankConfig: fake invalid usage");
    return FTL_GPU_FAILED;
  }
  return g_init_mode == INIT_OK ? FTL_GPU_OK : FTL_GPU_IN_PROGRESS;
}
static int g_async_error(void *comm) {
  (void)comm;
  if (g_init_mode == INIT_FOREVER) return FTL_GPU_IN_PROGRESS;
  if (g_init_mode == INIT_SLOW && g_init_polls++ < 5) return FTL_GPU_IN_PROGRESS;
  if (g_coll_mode == COLL_ASYNC_FAILS && n_nccl_allreduce > 0) {
    snprintf(g_last, sizeof g_last, "NCCL (asynchronous error): fake remote process exited");
    return FTL_GPU_FAILED;
  }
  return FTL_GPU_OK;
}
static int g_nccl_allreduce(const void *send, void *recv, size_t count, ftl_dtype dtype, ftl_op op, void *comm,
                            void *s) {
  (void)dtype, (void)op, (void)comm;
  n_nccl_allreduce++;
  log_call("nccl_allreduce", name_of(s));
  if (g_coll_mode == COLL_FAILS) {
    snprintf(g_last, sizeof g_last, "ncclAllReduce: fake unhandled cuda error");
    return FTL_GPU_FAILED;
  }
  memmove(recv, send, count * sizeof(float)); /* one rank: the sum is the input */
  return FTL_GPU_OK;
}
static int g_nccl_finalize(void *comm) { (void)comm; n_finalize++; return FTL_GPU_OK; }
static void g_nccl_destroy(void *comm) { (void)comm; n_destroy++; log_call("nccl_destroy", NULL); }
static void g_nccl_abort(void *comm) { (void)comm; n_abort++; log_call("nccl_abort", NULL); }
static const char *g_last_error(void) { return g_last; }

static const rz_gpu_ops fake_gpu = {
    .compiled = 1, .nccl_compiled = 1, .device_count = g_device_count, .set_device = g_set_device,
    .pointer_kind = g_pointer_kind, .stream_create = g_stream_create, .stream_destroy = g_stream_destroy,
    .stream_query = g_stream_query, .event_create = g_event_create, .event_destroy = g_event_destroy,
    .event_record = g_event_record, .event_query = g_event_query, .stream_wait_event = g_stream_wait_event,
    .memcpy_async = g_memcpy_async, .host_register = g_host_register, .host_unregister = g_host_unregister,
    .runtime_version = g_version, .driver_version = g_version, .nccl_version = g_version,
    .nccl_unique_id = g_unique_id, .nccl_init = g_nccl_init, .nccl_async_error = g_async_error,
    .nccl_allreduce = g_nccl_allreduce, .nccl_finalize = g_nccl_finalize, .nccl_destroy = g_nccl_destroy,
    .nccl_abort = g_nccl_abort, .last_error = g_last_error};

/* Back to a healthy fake with `devices` GPUs and an empty log. */
static void fake_gpu_reset(int devices) {
  g_devices = devices;
  g_count_status = FTL_GPU_OK, g_init_mode = INIT_OK, g_coll_mode = COLL_OK, g_event_polls_left = 0;
  n_abort = n_destroy = n_finalize = n_init = n_nccl_allreduce = 0;
  n_streams = n_events = n_dev_ptrs = n_pending = 0;
  g_last[0] = 0;
  log_reset();
}

#endif
