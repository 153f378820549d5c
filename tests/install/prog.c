/* tests/install/prog.c: a training program built outside the tree against an installed ftl: joins
 * the gang, sums over it, saves and commits a checkpoint, restores it, and (rank 0) writes its
 * final adapter through the public door into RUNDIR/final and reads it back. Prints "prog ok" on
 * success. Uses only <ftl/ftl.h>; not a test of the checkpoint or the adapter themselves
 * (tests/ckpt, tests/finetune do that). */
#include <ftl/ftl.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *what, ftl_err rc) {
  fprintf(stderr, "prog: %s: %s\n", what, ftl_strerror(rc));
  return 1;
}

int main(int argc, char **argv) {
  ftl_ctx *ctx = NULL;
  ftl_ckpt *ck = NULL;
  int ret = 1;
  ftl_err rc = ftl_init(&argc, &argv, &ctx);
  if (rc != FTL_OK) {
    ret = fail("ftl_init", rc);
    goto out;
  }
  const ftl_info *info = ftl_ctx_info(ctx);
  int one = info->rank + 1, sum = 0;
  rc = ftl_allreduce(ctx, &one, &sum, 1, FTL_DTYPE_I32, FTL_OP_SUM);
  if (rc != FTL_OK || sum != info->world_size * (info->world_size + 1) / 2) {
    ret = fail("ftl_allreduce", rc);
    goto out;
  }
  float w[8];
  for (int i = 0; i < 8; i++) w[i] = (float)i * 0.5f;
  int64_t shape[1] = {8};
  if ((rc = ftl_ckpt_create(ctx, NULL, &ck)) != FTL_OK ||
      (rc = ftl_ckpt_add_tensor(ck, "w", w, FTL_DTYPE_F32, 1, shape, FTL_CKPT_REPLICATED, FTL_CKPT_HOST)) != FTL_OK ||
      (rc = ftl_ckpt_save(ck, 1)) != FTL_OK || (rc = ftl_ckpt_wait(ck, -1, NULL)) != FTL_OK) {
    ret = fail("checkpoint save/commit", rc);
    goto out;
  }
  memset(w, 0, sizeof w);
  ftl_ckpt_restore_info ri;
  if ((rc = ftl_ckpt_restore(ck, &ri)) != FTL_OK || ri.step != 1 || w[7] != 3.5f) {
    ret = fail("checkpoint restore", rc);
    goto out;
  }
  if (info->rank == 0) {
    char dir[4096];
    ftl_diag d;
    ftl_adapter *a = NULL;
    ftl_adapter_tensor t = {.name = "w", .ndim = 1, .shape = {8}, .data = w}, back;
    static const char json[] = "{\"prog\": 1}\n";
    if ((rc = ftl_adapter_final_dir(info, dir, sizeof dir, &d)) != FTL_OK ||
        (rc = ftl_adapter_write(dir, &t, 1, json, sizeof json - 1, &d)) != FTL_OK ||
        (rc = ftl_adapter_open(dir, &a, &d)) != FTL_OK || (rc = ftl_adapter_find(a, "w", &back)) != FTL_OK ||
        back.data[7] != 3.5f || strcmp(ftl_adapter_json(a, NULL), json) != 0) {
      fprintf(stderr, "prog: %s\n", d.msg);
      ftl_adapter_close(a);
      ret = fail("the final adapter", rc ? rc : FTL_ERR_CORRUPT);
      goto out;
    }
    ftl_adapter_close(a);
  }
  ftl_step_done(ctx, 1);
  printf("prog ok rank %d of %d, sum %d, restored step %lld\n", info->rank, info->world_size, sum,
         (long long)ri.step);
  ret = 0;
out:
  ftl_ckpt_destroy(ck);
  ftl_finalize(ctx);
  return ret;
}
