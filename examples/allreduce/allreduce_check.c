/* examples/allreduce/allreduce_check.c: the smallest real program on ftl. Every rank joins the
 * gang with ftl_init, then runs allreduces of growing size and checks each result against its
 * closed form: rank r contributes (r + 1) * (i % 7 + 1) at index i, so the sum over a world of
 * W ranks is W (W + 1) / 2 * (i % 7 + 1), exact in float32 for these sizes.
 *
 *   ftl run examples/allreduce/job.yaml
 *   ftl run -n 4 -- ftl-allreduce-check --iterations 20 --max-kib 1024
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/ftl.h"

int main(int argc, char **argv) {
  int64_t iterations = 10, max_kib = 4096;
  static const struct option options[] = {{"iterations", required_argument, NULL, 'i'},
                                          {"max-kib", required_argument, NULL, 'm'},
                                          {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "i:m:", options, NULL)) != -1) {
    if (c == 'i' && ftl_parse_i64(optarg, 1, 1000000, &iterations) == FTL_OK) continue;
    if (c == 'm' && ftl_parse_i64(optarg, 1, 1 << 20, &max_kib) == FTL_OK) continue;
    fprintf(stderr, "usage: %s [--iterations N] [--max-kib K]\n", argv[0]);
    return 2;
  }

  ftl_ctx *ctx = NULL;
  ftl_err rc = ftl_init(&argc, &argv, &ctx);
  if (rc) {
    fprintf(stderr, "ftl_init: %s: %s\n", ftl_strerror(rc), ftl_ctx_errmsg(ctx));
    ftl_finalize(ctx);
    return 1;
  }
  const ftl_info *info = ftl_ctx_info(ctx);
  int world = info->world_size, rank = info->rank;
  size_t max_count = (size_t)max_kib * 1024 / sizeof(float);
  float *buf = malloc(max_count * sizeof(float));
  if (!buf) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    ftl_finalize(ctx);
    return 1;
  }
  if (rank == 0)
    printf("allreduce check: %d ranks (%s path), %lld iterations up to %lld KiB\n", world,
           info->backend == FTL_BACKEND_NCCL ? "NCCL" : "MPI", (long long)iterations, (long long)max_kib);

  const float tri = (float)world * (float)(world + 1) / 2.0f;
  long long checked = 0, wrong = 0;
  int64_t step = 0;
  for (int64_t it = 0; it < iterations; it++) {
    for (size_t count = 256; count <= max_count; count *= 4) {
      for (size_t i = 0; i < count; i++) buf[i] = (float)(rank + 1) * (float)(i % 7 + 1);
      rc = ftl_allreduce(ctx, buf, buf, count, FTL_DTYPE_F32, FTL_OP_SUM);
      if (rc) {
        fprintf(stderr, "rank %d: allreduce: %s: %s\n", rank, ftl_strerror(rc), ftl_ctx_errmsg(ctx));
        goto done;
      }
      for (size_t i = 0; i < count; i++) {
        float want = tri * (float)(i % 7 + 1);
        if (buf[i] != want) {
          if (wrong < 5) fprintf(stderr, "rank %d: element %zu of %zu is %g, expected %g\n", rank, i, count, buf[i], want);
          wrong++;
        }
      }
      checked += (long long)count;
    }
    ftl_step_done(ctx, ++step);
  }

  /* Every rank's verdict, agreed: the job passes only if all ranks saw exact results. */
  long long total_wrong = wrong;
  rc = ftl_allreduce(ctx, &wrong, &total_wrong, 1, FTL_DTYPE_I64, FTL_OP_SUM);
  if (!rc) rc = ftl_barrier(ctx, 60000);
  if (!rc) printf("rank %d: checked %lld elements against the closed form, %lld wrong\n", rank, checked, wrong);
  if (!rc && rank == 0) printf("allreduce check %s on all %d ranks\n", total_wrong ? "FAILED" : "passed", world);
done:
  free(buf);
  ftl_err frc = ftl_finalize(ctx);
  if (rc || frc) return 1;
  return total_wrong ? 1 : 0;
}
