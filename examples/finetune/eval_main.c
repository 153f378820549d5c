/* examples/finetune/eval_main.c: ftl-finetune-eval, the example's evaluation program.
 *
 *   ftl-finetune-eval --base base.h5 [--adapter RUNDIR/final] --data heldout.txt [--out eval.json]
 *                     [--metrics metrics.json]
 *   ftl-finetune-eval --base base.h5 [--adapter RUNDIR/final] --dump-logits FILE --text STRING
 *
 * Loads the base model (checking its content hash) and, when given, the adapter (checking that it
 * was trained on this base), computes the held-out metrics of the base alone and with the adapter
 * (evaluate.h) and writes them as one JSON object (docs/finetune.md) to --out (then prints a
 * one-line summary) or to stdout. --metrics also writes the gate's metrics file
 * (docs/formats/metrics.md): {"version": 1, "metrics": {...}}, the adapter's numbers when an
 * adapter is given (the base model's otherwise), the base model's as base_*, and the gains over
 * the base: improvement (exact match) and loss_gain (nats per answer byte).
 * --dump-logits writes the logits of base (+ adapter) for the bytes of STRING (token = byte, one
 * sequence, positions 0..t-1, t <= block) as raw little-endian float32 [t, 256], row-major, for a
 * cross-check against Hugging Face transformers (docs/finetune.md, "Logits for a cross-check").
 * One process; no ftl gang. Exit 0 on success, 1 on any failure, 2 on a bad command line. */
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "adapter_io.h"
#include "base_io.h"
#include "data.h"
#include "evaluate.h"
#include "ftl/core.h"

static json_t *metrics_json(const ft_metrics *m) {
  return json_pack("{s:f, s:f, s:i, s:i}", "loss", ft_metrics_loss(m), "exact_match", ft_metrics_accuracy(m), "exact",
                   (json_int_t)m->exact, "examples", (json_int_t)m->examples);
}

/* The gate's metrics file (docs/formats/metrics.md), written atomically. */
static int write_metrics(const char *path, const ft_metrics *base, const ft_metrics *adapter) {
  const ft_metrics *m = adapter ? adapter : base;
  json_t *root = json_pack("{s:i, s:{s:f, s:f, s:I, s:I, s:f, s:f, s:f, s:f}}", "version", 1, "metrics", "exact_match",
                           ft_metrics_accuracy(m), "loss", ft_metrics_loss(m), "exact", (json_int_t)m->exact,
                           "examples", (json_int_t)m->examples, "base_exact_match", ft_metrics_accuracy(base),
                           "base_loss", ft_metrics_loss(base), "improvement",
                           ft_metrics_accuracy(m) - ft_metrics_accuracy(base), "loss_gain",
                           ft_metrics_loss(base) - ft_metrics_loss(m));
  char *text = root ? json_dumps(root, JSON_SORT_KEYS | JSON_INDENT(2) | JSON_REAL_PRECISION(17)) : NULL;
  json_decref(root);
  if (!text) {
    fprintf(stderr, "ftl-finetune-eval: out of memory\n");
    return -1;
  }
  size_t len = strlen(text);
  text[len] = '\n'; /* json_dumps leaves room for the NUL this replaces */
  ftl_diag dg;
  ftl_err wr = ftl_write_file_atomic(path, text, len + 1, &dg);
  free(text);
  if (wr) {
    fprintf(stderr, "ftl-finetune-eval: %s\n", dg.msg);
    return -1;
  }
  return 0;
}

static void usage(FILE *to, const char *argv0) {
  fprintf(to,
          "usage: %s --base FILE.h5 [--adapter DIR] --data FILE [--out FILE.json] [--metrics FILE.json]\n"
          "       %s --base FILE.h5 [--adapter DIR] --dump-logits FILE --text STRING\n"
          "  --data FILE          held-out examples (one a line); the metrics of the base alone and with the\n"
          "                       adapter go to --out (or stdout) and, with --metrics, the gate's metrics file\n"
          "  --dump-logits FILE   the logits of the base (with the adapter when given) for the bytes of\n"
          "                       --text STRING (token id = byte value, positions 0..t-1, t <= the block):\n"
          "                       raw little-endian float32 [t, 256], row-major, t * 1024 bytes; FILE (a\n"
          "                       regular file's path) is replaced atomically\n",
          argv0, argv0);
}

/* The logits for text's bytes, written atomically as little-endian float32 [t, 256]. */
static int dump_logits(const ft_params *base, const ft_lora *lora, const char *text, const char *path) {
  size_t t = strlen(text);
  int rc = -1;
  int *tok = NULL;
  uint8_t *bytes = NULL;
  ft_acts *acts = NULL;
  struct stat st;
  /* The file is replaced by a rename: a device or a folder there (/dev/null) would be replaced too. */
  if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    fprintf(stderr, "ftl-finetune-eval: %s exists and is not a regular file; --dump-logits replaces it\n", path);
    return -1;
  }
  if (t < 1 || t > (size_t)base->cfg.block) {
    fprintf(stderr, "ftl-finetune-eval: --text must hold 1 to %d bytes (the base model's block), not %zu\n",
            base->cfg.block, t);
    return -1;
  }
  tok = ftl_malloc(t * sizeof *tok);
  bytes = ftl_malloc(t * FT_VOCAB * 4);
  acts = ft_acts_create(&base->cfg, lora ? lora->rank : 0, 1);
  if (!tok || !bytes || !acts) {
    fprintf(stderr, "ftl-finetune-eval: out of memory\n");
    goto out;
  }
  for (size_t i = 0; i < t; i++)
    tok[i] = (unsigned char)text[i];
  ft_forward(base, lora, tok, NULL, 1, (int)t, acts, NULL);
  const float *lg = ft_acts_logits(acts);
  /* Spelled out byte by byte: the file is little-endian whatever the host is. */
  for (size_t i = 0; i < t * FT_VOCAB; i++) {
    uint32_t u;
    memcpy(&u, &lg[i], 4);
    for (int k = 0; k < 4; k++)
      bytes[4 * i + (size_t)k] = (uint8_t)(u >> (8 * k));
  }
  ftl_diag dg;
  if (ftl_write_file_atomic(path, bytes, t * FT_VOCAB * 4, &dg)) {
    fprintf(stderr, "ftl-finetune-eval: %s\n", dg.msg);
    goto out;
  }
  printf("logits of %zu positions x %d written to %s\n", t, FT_VOCAB, path);
  rc = 0;
out:
  ftl_free(tok);
  ftl_free(bytes);
  ft_acts_destroy(acts);
  return rc;
}

int main(int argc, char **argv) {
  const char *base_path = NULL, *adapter_dir = NULL, *data_path = NULL, *out = NULL, *metrics_out = NULL;
  const char *dump_path = NULL, *dump_text = NULL;
  static const struct option options[] = {{"base", required_argument, NULL, 'b'},
                                          {"adapter", required_argument, NULL, 'a'},
                                          {"data", required_argument, NULL, 'd'},
                                          {"out", required_argument, NULL, 'o'},
                                          {"metrics", required_argument, NULL, 'm'},
                                          {"dump-logits", required_argument, NULL, 'L'},
                                          {"text", required_argument, NULL, 't'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    if (c == 'b')
      base_path = optarg;
    else if (c == 'a')
      adapter_dir = optarg;
    else if (c == 'd')
      data_path = optarg;
    else if (c == 'o')
      out = optarg;
    else if (c == 'm')
      metrics_out = optarg;
    else if (c == 'L')
      dump_path = optarg;
    else if (c == 't')
      dump_text = optarg;
    else if (c == 'h') {
      usage(stdout, argv[0]);
      return 0;
    } else
      base_path = NULL, optind = argc + 1;
  }
  int dumping = dump_path || dump_text;
  if (!base_path || optind != argc || (dumping ? !dump_path || !dump_text || data_path || out || metrics_out : !data_path)) {
    usage(stderr, argv[0]);
    return 2;
  }
  char msg[2048];
  int rc = 1;
  ft_params base = {0};
  ft_lora lora = {0};
  ft_data d = {0};
  ft_adapter_meta meta;
  ft_acts *acts = NULL;
  json_t *j = NULL;
  char *text = NULL;
  uint64_t hash = 0;
  if (ft_base_load(base_path, &base, &hash, msg, sizeof msg) ||
      (!dumping && ft_data_load(data_path, &d, msg, sizeof msg))) {
    fprintf(stderr, "ftl-finetune-eval: %s\n", msg);
    goto out;
  }
  if (adapter_dir) {
    if (ft_adapter_load(adapter_dir, &base.cfg, &lora, &meta, msg, sizeof msg)) {
      fprintf(stderr, "ftl-finetune-eval: %s\n", msg);
      goto out;
    }
    if (meta.base_hash != hash) {
      fprintf(stderr,
              "ftl-finetune-eval: the adapter in %s was trained on base %016" PRIx64 ", not %s (%016" PRIx64 ")\n",
              adapter_dir, meta.base_hash, base_path, hash);
      goto out;
    }
  }
  if (dumping) {
    rc = dump_logits(&base, adapter_dir ? &lora : NULL, dump_text, dump_path) ? 1 : 0;
    goto out;
  }
  if (ft_data_seq_len(&d) > base.cfg.block) {
    fprintf(stderr, "ftl-finetune-eval: %s: sequences longer than the base model's block\n", data_path);
    goto out;
  }
  acts = ft_acts_create(&base.cfg, adapter_dir ? lora.rank : 0, 64);
  ft_metrics mb = {0}, ma = {0};
  if (!acts || ft_evaluate(&base, NULL, &d, 0, d.n, 64, acts, &mb) ||
      (adapter_dir && ft_evaluate(&base, &lora, &d, 0, d.n, 64, acts, &ma))) {
    fprintf(stderr, "ftl-finetune-eval: out of memory\n");
    goto out;
  }
  char hex[17];
  snprintf(hex, sizeof hex, "%016" PRIx64, hash);
  j = json_pack("{s:s, s:s, s:s, s:o}", "metric", "exact_match", "data", data_path, "base_model_hash", hex, "base",
                metrics_json(&mb));
  if (j && adapter_dir) {
    json_object_set_new(j, "adapter", metrics_json(&ma));
    json_object_set_new(j, "adapter_dir", json_string(adapter_dir));
    json_object_set_new(j, "improvement", json_real(ft_metrics_accuracy(&ma) - ft_metrics_accuracy(&mb)));
  }
  text = j ? json_dumps(j, JSON_SORT_KEYS | JSON_INDENT(2)) : NULL;
  if (!text) goto out;
  if (!out)
    printf("%s\n", text);
  else if (adapter_dir)
    printf("held-out exact match: base model %.1f%% -> with the adapter %.1f%% (%+.1f points); loss %.3f -> %.3f "
           "nats/byte\n",
           100 * ft_metrics_accuracy(&mb), 100 * ft_metrics_accuracy(&ma),
           100 * (ft_metrics_accuracy(&ma) - ft_metrics_accuracy(&mb)), ft_metrics_loss(&mb), ft_metrics_loss(&ma));
  else
    printf("held-out exact match: base model %.1f%%, loss %.3f nats/byte\n", 100 * ft_metrics_accuracy(&mb),
           ft_metrics_loss(&mb));
  if (out) {
    size_t len = strlen(text);
    char *withnl = ftl_malloc(len + 2);
    ftl_diag dg;
    if (!withnl) goto out;
    memcpy(withnl, text, len);
    withnl[len] = '\n';
    ftl_err wr = ftl_write_file_atomic(out, withnl, len + 1, &dg);
    ftl_free(withnl);
    if (wr) {
      fprintf(stderr, "ftl-finetune-eval: %s\n", dg.msg);
      goto out;
    }
  }
  if (metrics_out && write_metrics(metrics_out, &mb, adapter_dir ? &ma : NULL)) goto out;
  rc = 0;
out:
  free(text);
  json_decref(j);
  ft_acts_destroy(acts);
  ft_lora_destroy(&lora);
  ft_params_destroy(&base);
  ft_data_free(&d);
  return rc;
}
