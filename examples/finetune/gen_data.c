/* examples/finetune/gen_data.c: ftl-finetune-data, the example's deterministic data generator.
 *
 *   ftl-finetune-data --out DIR [--seed S] [--len K] [--pretrain N] [--train N] [--heldout N]
 *
 * Writes three files of one example a line (docs/finetune.md), each atomically:
 *   DIR/pretrain.txt  the base model's corpus: copy a random word ("qwertyui>qwertyui");
 *   DIR/train.txt     the fine-tune task: shift every letter by one ("qwertyui>rxfsuzvj", z -> a);
 *   DIR/heldout.txt   more of the fine-tune task, drawn from a different stream, for the metric.
 * The prompt's format (the '>' after the word) is the same in all three: a base model trained on
 * the corpus answers the fine-tune task with the copy (exact match near 0%), and the adapter has to
 * learn the shift, not where to look. (The Llama decoder has no absolute positions: its query at
 * the operator byte comes from that byte's embedding, which a separator unseen in pre-training
 * leaves random, and a LoRA adapter cannot train an embedding.) The same arguments always give the
 * same bytes. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ftl/core.h"
#include "model.h"

static int write_task(const char *dir, const char *name, int64_t n, int len, int shift, uint64_t seed) {
  char path[4096];
  size_t line = (size_t)2 * len + 2;
  char *buf = ftl_malloc((size_t)n * line);
  if (!buf || ftl_fmt(path, sizeof path, "%s/%s", dir, name)) {
    fprintf(stderr, "ftl-finetune-data: out of memory or path too long\n");
    ftl_free(buf);
    return -1;
  }
  ft_rng r;
  ft_rng_seed(&r, seed);
  for (int64_t i = 0; i < n; i++) {
    char *l = buf + (size_t)i * line;
    for (int k = 0; k < len; k++) {
      int c = (int)ft_rng_below(&r, 26);
      l[k] = (char)('a' + c);
      l[len + 1 + k] = (char)('a' + (c + shift) % 26);
    }
    l[len] = '>';
    l[2 * len + 1] = '\n';
  }
  ftl_diag d;
  int rc = ftl_write_file_atomic(path, buf, (size_t)n * line, &d) == FTL_OK ? 0 : -1;
  if (rc) fprintf(stderr, "ftl-finetune-data: %s\n", d.msg);
  ftl_free(buf);
  return rc;
}

int main(int argc, char **argv) {
  const char *out = NULL;
  int64_t seed = 7, len = 8, npre = 8192, ntrain = 4096, nheld = 512;
  static const struct option options[] = {{"out", required_argument, NULL, 'o'},
                                          {"seed", required_argument, NULL, 's'},
                                          {"len", required_argument, NULL, 'l'},
                                          {"pretrain", required_argument, NULL, 'p'},
                                          {"train", required_argument, NULL, 't'},
                                          {"heldout", required_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    int bad = 0;
    switch (c) {
    case 'o': out = optarg; break;
    case 's': bad = ftl_parse_i64(optarg, 0, INT64_MAX, &seed) != FTL_OK; break;
    case 'l': bad = ftl_parse_i64(optarg, 1, 1000, &len) != FTL_OK; break;
    case 'p': bad = ftl_parse_i64(optarg, 1, 10000000, &npre) != FTL_OK; break;
    case 't': bad = ftl_parse_i64(optarg, 1, 10000000, &ntrain) != FTL_OK; break;
    case 'h': bad = ftl_parse_i64(optarg, 1, 10000000, &nheld) != FTL_OK; break;
    default: bad = 1; break;
    }
    if (bad) out = NULL, optind = argc + 1;
  }
  if (!out || optind != argc) {
    fprintf(stderr,
            "usage: %s --out DIR [--seed S (7)] [--len K (8)] [--pretrain N (8192)] [--train N (4096)] "
            "[--heldout N (512)]\n",
            argv[0]);
    return 2;
  }
  ftl_diag d;
  if (ftl_mkdir_p(out, &d)) {
    fprintf(stderr, "ftl-finetune-data: %s\n", d.msg);
    return 1;
  }
  /* Three independent streams of the seed, so the held-out examples are not the training ones. */
  uint64_t s = (uint64_t)seed;
  if (write_task(out, "pretrain.txt", npre, (int)len, 0, s * 3 + 1) ||
      write_task(out, "train.txt", ntrain, (int)len, 1, s * 3 + 2) ||
      write_task(out, "heldout.txt", nheld, (int)len, 1, s * 3 + 3))
    return 1;
  printf("data written to %s/: pretrain.txt (%" PRId64 "), train.txt (%" PRId64 "), heldout.txt (%" PRId64 ")\n", out,
         npre, ntrain, nheld);
  return 0;
}
