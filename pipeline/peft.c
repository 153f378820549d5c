/* pipeline/peft.c: `ftl export`: the example's final adapter (docs/formats/adapter.md) in PEFT's
 * layout for LlamaForCausalLM (peft.h, docs/formats/peft-export.md), and with --base the base
 * model beside it as a Hugging Face folder (hf_base.h).
 *
 * The final folder is verified by its commit marker first; adapter.json (version 2) gives the
 * rank, alpha, targets and base configuration; every tensor of adapter.safetensors must be one
 * the config implies, F32, with PEFT's shape. The tensors are renamed (PEFT's prefix
 * "base_model.model." added), never converted, so the values are bit for bit the example's. The
 * base is taken only when its recorded content hash is the adapter's base_model_hash and, for a
 * run's snapshot input, its SHA-256 is the snapshot's. */
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
#include "pipeline/base_h5.h"
#include "pipeline/hf_base.h"
#include "pipeline/pl_util.h"
#include "pipeline/safetensors.h"
#include "pipeline/snapshot.h"

#define EXAMPLE_FORMAT "ftl-finetune-adapter"
#define EXAMPLE_VERSION 2
#define MAX_LAYERS 64

/* Features: 'C' the hidden size, 'I' the intermediate size. */
static const struct {
  const char *module; /* the example's name, which is PEFT's target_modules entry */
  const char *path;   /* under model.layers.<i>. */
  char in, out;
} modules[] = {
    {"q_proj", "self_attn.q_proj", 'C', 'C'},  {"k_proj", "self_attn.k_proj", 'C', 'C'},
    {"v_proj", "self_attn.v_proj", 'C', 'C'},  {"o_proj", "self_attn.o_proj", 'C', 'C'},
    {"gate_proj", "mlp.gate_proj", 'C', 'I'}, {"up_proj", "mlp.up_proj", 'C', 'I'},
    {"down_proj", "mlp.down_proj", 'I', 'C'},
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
  return ftl_fmt(out, size, "model.layers.%d.%s", layer, modules[k].path);
}

const char *pl_peft_target_name(const char *module) {
  int k = module_index(module);
  return k < 0 ? NULL : modules[k].module;
}

static int str_cmp(const void *x, const void *y) { return strcmp(*(const char *const *)x, *(const char *const *)y); }

/* What adapter.json says, checked: the numbers in range, the targets known and distinct. */
typedef struct example_config {
  json_t *j; /* the parsed file (owned; base_hash borrows from it) */
  int64_t rank, layers, embd, intermediate;
  double alpha;
  unsigned seen; /* bit k: modules[k] is a target */
  const char *base_hash;
} example_config;

static ftl_err read_example_config(const char *final_dir, example_config *c, ftl_diag *d) {
  char path[4096];
  char *text = NULL;
  size_t size = 0;
  ftl_err rc;
  memset(c, 0, sizeof *c);
  if (ftl_fmt(path, sizeof path, "%s/%s", final_dir, FTL_ADAPTER_JSON))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", final_dir);
  if ((rc = core_fs_read_regular(path, 1u << 20, &text, &size, d))) return rc;
  json_error_t jerr;
  json_t *j = c->j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
  ftl_free(text);
  json_t *fmt = json_object_get(j, "format"), *ver = json_object_get(j, "version"), *r = json_object_get(j, "r");
  json_t *al = json_object_get(j, "lora_alpha"), *tm = json_object_get(j, "target_modules");
  json_t *bh = json_object_get(j, "base_model_hash"), *bc = json_object_get(j, "base_config");
  json_t *layers_j = json_object_get(bc, "layers"), *embd_j = json_object_get(bc, "embd");
  json_t *inter_j = json_object_get(bc, "intermediate");
  if (json_is_string(fmt) && !strcmp(json_string_value(fmt), EXAMPLE_FORMAT) && json_is_integer(ver) &&
      json_integer_value(ver) != EXAMPLE_VERSION)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                         "%s has format version %" JSON_INTEGER_FORMAT "; this ftl exports version %d (the Llama "
                         "decoder; version 1 was the GPT-2 shaped model of earlier releases): train the adapter again",
                         path, json_integer_value(ver), EXAMPLE_VERSION);
  if (!json_is_string(fmt) || strcmp(json_string_value(fmt), EXAMPLE_FORMAT) || !json_is_integer(ver) ||
      !json_is_integer(r) || !json_is_number(al) || !json_is_array(tm) || !json_is_string(bh) ||
      !json_is_integer(layers_j) || !json_is_integer(embd_j) || !json_is_integer(inter_j))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not an adapter.json of format %s version %d", path,
                         EXAMPLE_FORMAT, EXAMPLE_VERSION);
  c->rank = json_integer_value(r);
  c->layers = json_integer_value(layers_j);
  c->embd = json_integer_value(embd_j);
  c->intermediate = json_integer_value(inter_j);
  c->alpha = json_number_value(al);
  c->base_hash = json_string_value(bh);
  if (c->rank < 1 || c->rank > 65536 || c->layers < 1 || c->layers > MAX_LAYERS || c->embd < 1 || c->embd > (1 << 20) ||
      c->intermediate < 1 || c->intermediate > (1 << 20) ||
      !isfinite(c->alpha) || json_array_size(tm) < 1 || json_array_size(tm) > N_MODULES)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                         "%s: rank, layers, embd, intermediate, lora_alpha or target_modules out of range", path);
  for (size_t i = 0; i < json_array_size(tm); i++) {
    int k = module_index(json_string_value(json_array_get(tm, i)));
    if (k < 0 || (c->seen & (1u << k)))
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: target_modules entry %zu is unknown or repeated", path, i);
    c->seen |= 1u << k;
  }
  return FTL_OK;
}

/* Every tensor the config implies, checked (F32, PEFT's shape) and given its PEFT name: into
 * out_t[0..n), named from names (both n long). path names the file in messages. */
static ftl_err map_tensors(const example_config *c, const pl_st_file *st, const char *path, pl_st_tensor *out_t,
                           char (*names)[160], ftl_diag *d) {
  size_t at = 0;
  for (int64_t l = 0; l < c->layers; l++)
    for (size_t k = 0; k < N_MODULES; k++) {
      if (!(c->seen & (1u << k))) continue;
      for (int ab = 0; ab < 2; ab++) {
        char src[96];
        snprintf(src, sizeof src, "model.layers.%d.%s.lora_%c.weight", (int)l, modules[k].path, ab ? 'B' : 'A');
        const pl_st_tensor *t = pl_st_find(st, src);
        int64_t in = modules[k].in == 'I' ? c->intermediate : c->embd;
        int64_t outf = modules[k].out == 'I' ? c->intermediate : c->embd;
        int64_t want0 = ab ? outf : c->rank, want1 = ab ? c->rank : in;
        if (!t || t->dtype != FTL_ST_F32 || t->ndim != 2 || t->shape[0] != want0 || t->shape[1] != want1)
          return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: tensor %s is missing or not F32 [%" PRId64 ", %" PRId64 "]",
                               path, src, want0, want1);
        snprintf(names[at], sizeof names[at], "base_model.model.%s", src);
        out_t[at] = *t;
        out_t[at].name = names[at];
        at++;
      }
    }
  return FTL_OK;
}

/* adapter_config.json: the keys PEFT's LoraConfig writes that servers look at; PEFT's own
 * save_pretrained writes json.dumps(indent=2, sort_keys=True) and no final newline. Keys that only
 * newer PEFT knows (exclude_modules, lora_bias, both at their defaults) are left out: PEFT 0.13's
 * LoraConfig refuses a key it does not know, and newer ones fill in the defaults. NULL when out
 * of memory. */
static char *peft_config_text(const example_config *c, const char *base_name, size_t *len) {
  json_t *cfg = json_object();
  const char *targets[N_MODULES];
  size_t nt = 0;
  for (size_t k = 0; k < N_MODULES; k++)
    if (c->seen & (1u << k)) targets[nt++] = modules[k].module;
  qsort(targets, nt, sizeof *targets, str_cmp);
  json_t *tlist = json_array();
  for (size_t i = 0; i < nt; i++)
    json_array_append_new(tlist, json_string(targets[i]));
  json_object_set_new(cfg, "alpha_pattern", json_object());
  json_object_set_new(cfg, "auto_mapping", json_null());
  json_object_set_new(cfg, "base_model_name_or_path", json_string(base_name));
  json_object_set_new(cfg, "bias", json_string("none"));
  json_object_set_new(cfg, "fan_in_fan_out", json_false());
  json_object_set_new(cfg, "inference_mode", json_true());
  json_object_set_new(cfg, "init_lora_weights", json_true());
  json_object_set_new(cfg, "layer_replication", json_null());
  json_object_set_new(cfg, "layers_pattern", json_null());
  json_object_set_new(cfg, "layers_to_transform", json_null());
  if (c->alpha == floor(c->alpha) && fabs(c->alpha) < 1e15)
    json_object_set_new(cfg, "lora_alpha", json_integer((json_int_t)c->alpha));
  else
    json_object_set_new(cfg, "lora_alpha", json_real(c->alpha));
  json_object_set_new(cfg, "lora_dropout", json_real(0.0));
  json_object_set_new(cfg, "modules_to_save", json_null());
  json_object_set_new(cfg, "peft_type", json_string("LORA"));
  json_object_set_new(cfg, "r", json_integer((json_int_t)c->rank));
  json_object_set_new(cfg, "rank_pattern", json_object());
  json_object_set_new(cfg, "revision", json_null());
  json_object_set_new(cfg, "target_modules", tlist);
  json_object_set_new(cfg, "task_type", json_string("CAUSAL_LM"));
  json_object_set_new(cfg, "use_dora", json_false());
  json_object_set_new(cfg, "use_rslora", json_false());
  char *text = pl_json_text(cfg, 0, len);
  json_decref(cfg);
  return text;
}

/* The export's two files into out_dir (made if missing): the weights, then the config. */
static ftl_err write_export(const char *out_dir, const pl_st_tensor *out_t, size_t n, const char *cfg_text,
                            size_t cfg_len, ftl_diag *d) {
  char path[4096];
  ftl_err rc;
  if ((rc = ftl_mkdir_p(out_dir, d))) return rc;
  static const pl_st_kv meta[] = {{"format", "pt"}};
  if (ftl_fmt(path, sizeof path, "%s/%s", out_dir, FTL_PEFT_WEIGHTS_NAME))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", out_dir);
  if ((rc = pl_st_write(path, out_t, n, meta, 1, d))) return rc;
  if (ftl_fmt(path, sizeof path, "%s/%s", out_dir, FTL_PEFT_CONFIG_NAME))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", out_dir);
  return core_fs_replace(path, cfg_text, cfg_len, CORE_TMP_UNPREDICTABLE, NULL, -1, -1, d);
}

/* The base next to the adapter: out_dir/base, from opts->base_path, checked against the adapter's
 * base_model_hash and (when given) the snapshot's SHA-256 of the file. */
static ftl_err export_base(const pl_peft_opts *opts, const char *base_hash, const char *out_dir, ftl_diag *d) {
  char dir[4096], hex[65];
  pl_base_model *m = NULL;
  ftl_err rc;
  if (ftl_fmt(dir, sizeof dir, "%s/%s", out_dir, FTL_PEFT_BASE_DIR))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", out_dir);
  if (opts->base_sha256) {
    if ((rc = pl_snapshot_hash_file(opts->base_path, hex, NULL, d))) return rc;
    if (strcmp(hex, opts->base_sha256))
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s changed since the run's snapshot (SHA-256 %s, the snapshot says %s)",
                           opts->base_path, hex, opts->base_sha256);
  }
  if ((rc = pl_base_h5_read(opts->base_path, &m, d))) return rc;
  if (strcmp(m->content_hash, base_hash))
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is base model %s; the adapter was trained on %s", opts->base_path,
                       m->content_hash, base_hash);
  else
    rc = pl_hf_base_write(m, dir, d);
  pl_base_model_free(m);
  return rc;
}

ftl_err pl_peft_export(const char *final_dir, const char *out_dir, const pl_peft_opts *opts, ftl_diag *d) {
  static const char *const required[] = {FTL_ADAPTER_SAFETENSORS, FTL_ADAPTER_JSON};
  char path[4096], base_name[128];
  char *cfg_text = NULL;
  size_t cfg_len = 0;
  example_config c = {0};
  pl_st_file *st = NULL;
  pl_st_tensor *out_t = NULL;
  char(*names)[160] = NULL;
  ftl_err rc;
  if (pl_peft_final_is_peft(final_dir))
    return pl_peft_copy_final(final_dir, NULL, out_dir, opts ? opts->base_path : NULL, opts ? opts->base_sha256 : NULL,
                              d);
  if ((rc = pl_adapter_commit_verify(final_dir, required, 2, d))) return rc;
  if ((rc = read_example_config(final_dir, &c, d))) goto out;
  if (ftl_fmt(path, sizeof path, "%s/%s", final_dir, FTL_ADAPTER_SAFETENSORS)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", final_dir);
    goto out;
  }
  if ((rc = pl_st_load(path, (size_t)1 << 34, NULL, &st, d))) goto out;
  size_t n = (size_t)c.layers * (size_t)__builtin_popcount(c.seen) * 2;
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
  if ((rc = map_tensors(&c, st, path, out_t, names, d))) goto out;
  if (opts && opts->base_model_name && opts->base_model_name[0])
    snprintf(base_name, sizeof base_name, "%s", opts->base_model_name);
  else
    snprintf(base_name, sizeof base_name, "ftl-finetune-base-%s", c.base_hash);
  if (!(cfg_text = peft_config_text(&c, base_name, &cfg_len))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  if ((rc = write_export(out_dir, out_t, n, cfg_text, cfg_len, d))) goto out;
  if (opts && opts->base_path) rc = export_base(opts, c.base_hash, out_dir, d);
out:
  ftl_free(cfg_text);
  ftl_free(names);
  ftl_free(out_t);
  pl_st_free(st);
  json_decref(c.j);
  return rc;
}

ftl_err pl_peft_export_run(const char *run_dir, const char *out_dir, const pl_peft_opts *opts, ftl_diag *d) {
  char final_dir[4096], export_dir[4096];
  json_t *snap = NULL;
  pl_peft_opts o = opts ? *opts : (pl_peft_opts){0};
  ftl_err rc = core_rundir_path(final_dir, sizeof final_dir, run_dir, FTL_RUNDIR_FINAL);
  if (!rc && !out_dir) rc = core_rundir_path(export_dir, sizeof export_dir, run_dir, FTL_RUNDIR_EXPORT);
  if (rc) return ftl_diag_fail(d, rc, "run directory path too long: %s", run_dir);
  if (o.with_base && !o.base_path) {
    /* The run's base: the input the locked gate names as its base (an input called "base" when
     * the run has no gate), at the path and SHA-256 its snapshot recorded. */
    if ((rc = pl_snapshot_load(run_dir, &snap, d))) {
      if (rc == FTL_ERR_NOTFOUND)
        rc = ftl_diag_fail(d, rc, "%s has no snapshot.json to find its base model in; pass --base-file FILE", run_dir);
      return rc;
    }
    const json_t *gate = pl_snapshot_gate(snap);
    const char *name = json_string_value(json_object_get(json_object_get(gate, "eval"), "base"));
    if (!name) name = "base";
    o.base_path = pl_snapshot_input_path(snap, name);
    o.base_sha256 = pl_snapshot_input_sha256(snap, name);
    if (!o.base_path || !o.base_sha256) {
      json_decref(snap);
      return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s's snapshot has no input \"%s\" (the base model); pass --base-file",
                           run_dir, name);
    }
  }
  rc = pl_peft_export(final_dir, out_dir ? out_dir : export_dir, &o, d);
  json_decref(snap);
  return rc;
}
