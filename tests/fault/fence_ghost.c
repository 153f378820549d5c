/* tests/fault/fence_ghost.c: a process of an ended attempt that outlived it (ft_standby.sh fence).
 *
 * It is started with a rank's identity (FTL_RUN_DIR, FTL_ATTEMPT) but outside the gang's process
 * tree and without its token, so nothing of ftl's can end it: the stand-in for a rank on a host cut
 * off from the launcher, or one stuck in the kernel while the next attempt took over. It waits for
 * the file named by --go-file, then tries what such a rank could still try: to checkpoint step
 * --step, the newest step the next attempt committed (a rank 0's commit first removes a stale
 * manifest of its step: the most dangerous write there is). The fence must refuse it.
 * Exit 0: refused with FTL_ERR_FENCED (the message is printed); 1: it committed; 2: another error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftl/ftl.h"

int main(int argc, char **argv) {
  const char *go_file = NULL;
  int64_t step = -1;
  setvbuf(stdout, NULL, _IOLBF, 0); /* the test reads this output whatever ends the process */
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--go-file")) go_file = argv[i + 1];
    else if (!strcmp(argv[i], "--step")) step = atoll(argv[i + 1]);
  }
  if (!go_file) {
    fprintf(stderr, "usage: fence_ghost --go-file FILE [--step N]\n");
    return 2;
  }
  /* Bounded: a test that never says go must not leave this behind. */
  for (int i = 0; i < 1200 && access(go_file, F_OK) != 0; i++) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (step < 0) {
    FILE *f = fopen(go_file, "r");
    long long s = -1;
    if (f && fscanf(f, "%lld", &s) == 1) step = s;
    if (f) fclose(f);
  }
  if (step < 0) {
    fprintf(stderr, "fence_ghost: no step to write\n");
    return 2;
  }
  ftl_ctx *ctx = NULL;
  ftl_ckpt *ck = NULL;
  int rc = 2;
  if (ftl_init(&argc, &argv, &ctx) != FTL_OK) {
    fprintf(stderr, "fence_ghost: ftl_init: %s\n", ftl_ctx_errmsg(ctx));
    goto out;
  }
  printf("fence_ghost: attempt %d, run directory %s, writing step %lld\n", ftl_ctx_info(ctx)->attempt,
         ftl_ctx_info(ctx)->run_dir ? ftl_ctx_info(ctx)->run_dir : "(none)", (long long)step);
  if (ftl_ckpt_create(ctx, NULL, &ck) != FTL_OK) {
    fprintf(stderr, "fence_ghost: ftl_ckpt_create failed\n");
    goto out;
  }
  static int64_t payload = 42;
  ftl_ckpt_stats st;
  if (ftl_ckpt_add_blob(ck, "ghost", &payload, sizeof payload, FTL_CKPT_BLOB_GLOBAL) != FTL_OK ||
      ftl_ckpt_prepare(ck) != FTL_OK || ftl_ckpt_save(ck, step) != FTL_OK) {
    fprintf(stderr, "fence_ghost: %s\n", ftl_ckpt_errmsg(ck));
    goto out;
  }
  ftl_err wrc = ftl_ckpt_wait(ck, 60000, &st);
  if (wrc == FTL_OK && st.err == FTL_OK) {
    printf("fence_ghost: COMMITTED step %lld\n", (long long)step);
    rc = 1;
  } else if (st.err == FTL_ERR_FENCED || wrc == FTL_ERR_FENCED) {
    printf("fence_ghost: refused: %s\n", st.errmsg);
    rc = 0;
  } else {
    printf("fence_ghost: failed otherwise (%s): %s\n", ftl_err_name(st.err ? st.err : wrc), st.errmsg);
  }
out:
  ftl_ckpt_destroy(ck);
  ftl_finalize(ctx);
  return rc;
}
