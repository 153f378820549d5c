/* pipeline/peft.c: `ftl export`: the example's final adapter (docs/formats/adapter.md) in PEFT's
 * layout (peft.h, docs/formats/peft-export.md).
 *
 * The final folder is verified by its commit marker first; adapter.json gives the rank, alpha,
 * targets and base configuration; every tensor of adapter.safetensors must be one the config
 * implies, F32, with PEFT's shape. The tensors are renamed, never converted, so the values are
 * bit for bit the example's. */
#include "pipeline/peft.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/fs.h"
#include "core/rundir.h"
#include "ftl/core.h"
#include "pipeline/adapter_commit.h"
#include "pipeline/pl_util.h"
#include "pipeline/safetensors.h"

#define EXAMPLE_FORMAT "ftl-finetune-adapter"
#define MAX_LAYERS 64

static const struct {
  const char *module;    /* the example's short name */
  const char *path;      /* under transformer.h.<i>. */
  const char *target;    /* target_modules entry */
  int in_mult, out_mult; /* features in units of C */
} modules[] = {
    {"q", "attn.q_proj", "q_proj", 1, 1}, {"k", "attn.k_proj", "k_proj", 1, 1},
    {"v", "attn.v_proj", "v_proj", 1, 1}, {"o", "attn.out_proj", "out_proj", 1, 1},
    {"fc", "mlp.fc_in", "fc_in", 1, 4},   {"proj", "mlp.fc_out", "fc_out", 4, 1},
};
#define N_MODULES (sizeof modules / sizeof modules[0])

static int module_index(const char *m) {
  for (size_t i = 0; i < N_MODULES; i++)
    if (m && strcmp(m, modules[i].module) == 0) return (int)i;
  return -1;
}

ftl_err pl_peft_module_path(const char *module, int layer, char *out, size_t size) {
  int k = module_index(module);
  if (k < 0 || layer < 0) return FTL_ERR_INVAL;
  return ftl_fmt(out, size, "transformer.h.%d.%s", layer, modules[k].path);
}

const char *pl_peft_target_name(const char *module) {
  int k = module_index(module);
  return k < 0 ? NULL : modules[k].target;
}

static int str_cmp(const void *x, const void *y) { return strcmp(*(const char *const *)x, *(const char *const *)y); }

ftl_err pl_peft_export(const char *final_dir, const char *out_dir, const ftl_peft_opts *opts, ftl_diag *d) {
  static const char *const required[] = {FTL_ADAPTER_SAFETENSORS, FTL_ADAPTER_JSON};
  char path[4096], base_name[128];
  char *text = NULL, *cfg_text = NULL;
  size_t size = 0, cfg_len = 0;
  json_t *j = NULL, *cfg = NULL;
  ftl_st_file *st = NULL;
  ftl_st_tensor *out_t = NULL;
  char(*names)[160] = NULL;
  ftl_err rc;
  if ((rc = pl_adapter_commit_verify(final_dir, required, 2, d))) return rc;
  if (ftl_fmt(path, sizeof path, "%s/%s", final_dir, FTL_ADAPTER_JSON))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", final_dir);
  if ((rc = ftl_read_file(path, 1u << 20, &text, &size, d))) goto out;
  json_error_t jerr;
  j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
  json_t *fmt = json_object_get(j, "format"), *ver = json_object_get(j, "version"), *r = json_object_get(j, "r");
  json_t *al = json_object_get(j, "lora_alpha"), *tm = json_object_get(j, "target_modules");
  json_t *bh = json_object_get(j, "base_model_hash"), *bc = json_object_get(j, "base_config");
  json_t *layers_j = json_object_get(bc, "layers"), *embd_j = json_object_get(bc, "embd");
  if (!json_is_string(fmt) || strcmp(json_string_value(fmt), EXAMPLE_FORMAT) || !json_is_integer(ver) ||
      json_integer_value(ver) != 1 || !json_is_integer(r) || !json_is_number(al) || !json_is_array(tm) ||
      !json_is_string(bh) || !json_is_integer(layers_j) || !json_is_integer(embd_j)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not an adapter.json of format %s version 1", path, EXAMPLE_FORMAT);
    goto out;
  }
  int64_t rank = json_integer_value(r), layers = json_integer_value(layers_j), embd = json_integer_value(embd_j);
  double alpha = json_number_value(al);
  if (rank < 1 || rank > 65536 || layers < 1 || layers > MAX_LAYERS || embd < 1 || embd > (1 << 20) ||
      !isfinite(alpha) || json_array_size(tm) < 1 || json_array_size(tm) > N_MODULES) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: rank, layers, embd, lora_alpha or target_modules out of range", path);
    goto out;
  }
  unsigned seen = 0;
  for (size_t i = 0; i < json_array_size(tm); i++) {
    int k = module_index(json_string_value(json_array_get(tm, i)));
    if (k < 0 || (seen & (1u << k))) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: target_modules entry %zu is unknown or repeated", path, i);
      goto out;
    }
    seen |= 1u << k;
  }
  if (ftl_fmt(path, sizeof path, "%s/%s", final_dir, FTL_ADAPTER_SAFETENSORS)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", final_dir);
    goto out;
  }
  if ((rc = pl_st_load(path, (size_t)1 << 34, NULL, &st, d))) goto out;
  size_t n = (size_t)layers * (size_t)__builtin_popcount(seen) * 2;
  if (pl_st_count(st) != n) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s has %zu tensors; adapter.json implies %zu", path, pl_st_count(st), n);
    goto out;
  }
  out_t = ftl_calloc(n, sizeof *out_t);
  names = ftl_calloc(n, sizeof *names);
  if (!out_t || !names) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  size_t at = 0;
  for (int64_t l = 0; l < layers; l++)
    for (size_t k = 0; k < N_MODULES; k++) {
      if (!(seen & (1u << k))) continue;
      for (int ab = 0; ab < 2; ab++) {
        char src[96];
        snprintf(src, sizeof src, "layers.%d.%s.lora_%c", (int)l, modules[k].module, ab ? 'B' : 'A');
        const ftl_st_tensor *t = pl_st_find(st, src);
        int64_t in = embd * modules[k].in_mult, outf = embd * modules[k].out_mult;
        int64_t want0 = ab ? outf : rank, want1 = ab ? rank : in;
        if (!t || t->dtype != FTL_ST_F32 || t->ndim != 2 || t->shape[0] != want0 || t->shape[1] != want1) {
          rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: tensor %s is missing or not F32 [%" PRId64 ", %" PRId64 "]", path,
                             src, want0, want1);
          goto out;
        }
        snprintf(names[at], sizeof names[at], "base_model.model.transformer.h.%d.%s.lora_%c.weight", (int)l,
                 modules[k].path, ab ? 'B' : 'A');
        out_t[at] = *t;
        out_t[at].name = names[at];
        at++;
      }
    }
  if (opts && opts->base_model_name && opts->base_model_name[0])
    snprintf(base_name, sizeof base_name, "%s", opts->base_model_name);
  else
    snprintf(base_name, sizeof base_name, "ftl-finetune-base-%s", json_string_value(bh));
  /* adapter_config.json: the keys PEFT's LoraConfig writes that servers look at; PEFT's own
   * save_pretrained writes json.dumps(indent=2, sort_keys=True) and no final newline. */
  cfg = json_object();
  const char *targets[N_MODULES];
  size_t nt = 0;
  for (size_t k = 0; k < N_MODULES; k++)
    if (seen & (1u << k)) targets[nt++] = modules[k].target;
  qsort(targets, nt, sizeof *targets, str_cmp);
  json_t *tlist = json_array();
  for (size_t i = 0; i < nt; i++)
    json_array_append_new(tlist, json_string(targets[i]));
  json_object_set_new(cfg, "alpha_pattern", json_object());
  json_object_set_new(cfg, "auto_mapping", json_null());
  json_object_set_new(cfg, "base_model_name_or_path", json_string(base_name));
  json_object_set_new(cfg, "bias", json_string("none"));
  json_object_set_new(cfg, "exclude_modules", json_null());
  json_object_set_new(cfg, "fan_in_fan_out", json_false());
  json_object_set_new(cfg, "inference_mode", json_true());
  json_object_set_new(cfg, "init_lora_weights", json_true());
  json_object_set_new(cfg, "layer_replication", json_null());
  json_object_set_new(cfg, "layers_pattern", json_null());
  json_object_set_new(cfg, "layers_to_transform", json_null());
  if (alpha == floor(alpha) && fabs(alpha) < 1e15)
    json_object_set_new(cfg, "lora_alpha", json_integer((json_int_t)alpha));
  else
    json_object_set_new(cfg, "lora_alpha", json_real(alpha));
  json_object_set_new(cfg, "lora_bias", json_false());
  json_object_set_new(cfg, "lora_dropout", json_real(0.0));
  json_object_set_new(cfg, "modules_to_save", json_null());
  json_object_set_new(cfg, "peft_type", json_string("LORA"));
  json_object_set_new(cfg, "r", json_integer((json_int_t)rank));
  json_object_set_new(cfg, "rank_pattern", json_object());
  json_object_set_new(cfg, "revision", json_null());
  json_object_set_new(cfg, "target_modules", tlist);
  json_object_set_new(cfg, "task_type", json_string("CAUSAL_LM"));
  json_object_set_new(cfg, "use_dora", json_false());
  json_object_set_new(cfg, "use_rslora", json_false());
  cfg_text = pl_json_text(cfg, 0, &cfg_len);
  if (!cfg_text) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  if ((rc = ftl_mkdir_p(out_dir, d))) goto out;
  static const ftl_st_kv meta[] = {{"format", "pt"}};
  if (ftl_fmt(path, sizeof path, "%s/%s", out_dir, FTL_PEFT_WEIGHTS_NAME)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", out_dir);
    goto out;
  }
  if ((rc = pl_st_write(path, out_t, n, meta, 1, d))) goto out;
  if (ftl_fmt(path, sizeof path, "%s/%s", out_dir, FTL_PEFT_CONFIG_NAME)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", out_dir);
    goto out;
  }
  rc = core_fs_replace(path, cfg_text, cfg_len, CORE_TMP_UNPREDICTABLE, NULL, -1, -1, d);
out:
  ftl_free(cfg_text);
  json_decref(cfg);
  ftl_free(names);
  ftl_free(out_t);
  pl_st_free(st);
  json_decref(j);
  ftl_free(text);
  return rc;
}

ftl_err pl_peft_export_run(const char *run_dir, const char *out_dir, const ftl_peft_opts *opts, ftl_diag *d) {
  char final_dir[4096], export_dir[4096];
  ftl_err rc = core_rundir_path(final_dir, sizeof final_dir, run_dir, FTL_RUNDIR_FINAL);
  if (!rc && !out_dir) rc = core_rundir_path(export_dir, sizeof export_dir, run_dir, FTL_RUNDIR_EXPORT);
  if (rc) return ftl_diag_fail(d, rc, "run directory path too long: %s", run_dir);
  return pl_peft_export(final_dir, out_dir ? out_dir : export_dir, opts, d);
}
