/* tests/rendezvous/test_gpu_ckpt_fake.c: a device tensor through ftl_ckpt_save and
 * ftl_ckpt_restore over the fake GPU seam (fake_gpu.h: "device" memory is host memory, copies land
 * only when the event after them is seen complete) and a real one-rank MPI: the order of the GPU
 * calls (event on the caller's stream -> copy stream waits -> copy -> event -> wait), and restore
 * returning only once the bytes have landed in the device tensor. No GPU needed. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_gpu.h"
#include "ftl/ftl.h"

enum { N = 1000 };

int main(int argc, char **argv) {
  unsetenv("FTL_RDZV_ADDR");
  setenv("FTL_BACKEND", "mpi", 1); /* the gang's backend does not matter here */
  setenv("FTL_LOG_LEVEL", "error", 1);
  rz_gpu_set_ops(&fake_gpu);
  fake_gpu_reset(1);
  ftl_ctx *ctx = NULL;
  CHECK_OK(ftl_init(&argc, &argv, &ctx), ftl_ctx_errmsg(ctx));

  char dir[] = "/tmp/ftl-gpu-ckpt-fake-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  ftl_ckpt_options o;
  ftl_ckpt_options_init(&o);
  o.run_dir = dir;
  o.timeout_ms = 10000;
  ftl_ckpt *ck = NULL;
  CHECK_OK(ftl_ckpt_create(ctx, &o, &ck), "create");
  static float w[N], want[N];
  for (int i = 0; i < N; i++) w[i] = want[i] = (float)i * 0.5f;
  fake_device_memory(w, 0);
  int64_t shape[1] = {N};
  CHECK_OK(ftl_ckpt_add_tensor(ck, "w", w, FTL_DTYPE_F32, 1, shape, FTL_CKPT_REPLICATED, FTL_CKPT_DEVICE),
           ftl_ckpt_errmsg(ck));
  CHECK_OK(ftl_ckpt_prepare(ck), ftl_ckpt_errmsg(ck)); /* the copy stream s0, events e0 (caller), e1 (done) */

  /* Save: the snapshot waits for the legacy default stream, then copies, then waits for the copy. */
  log_reset();
  g_event_polls_left = 3;
  CHECK_OK(ftl_ckpt_save(ck, 10), ftl_ckpt_errmsg(ck));
  ftl_ckpt_stats st;
  CHECK_OK(ftl_ckpt_wait(ck, -1, &st), st.errmsg);
  CHECK_STR_EQ(call_log, "event_record(e0,legacy) stream_wait_event(s0,e0) memcpy_d2h(s0) event_record(e1,s0) "
                         "event_done(e1) ");

  /* Restore after the caller's own stream; the bytes are in place when it returns. */
  static char user_stream;
  ftl_ckpt_set_stream(ck, &user_stream);
  memset(w, 0, sizeof w);
  log_reset();
  g_event_polls_left = 3;
  ftl_ckpt_restore_info info;
  CHECK_OK(ftl_ckpt_restore(ck, &info), info.errmsg);
  CHECK_INT_EQ(info.step, 10);
  CHECK_STR_EQ(call_log, "event_record(e0,user) stream_wait_event(s0,e0) memcpy_h2d(s0) event_record(e1,s0) "
                         "event_done(e1) ");
  CHECK(memcmp(w, want, sizeof w) == 0);

  CHECK_OK(ftl_ckpt_destroy(ck), "destroy");
  CHECK_OK(ftl_finalize(ctx), "finalize");
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  rz_gpu_set_ops(NULL);
  printf("ok\n");
  return 0;
}
