/* examples/finetune/adapter_io.c: writing and reading the final adapter (adapter_io.h) through
 * ftl's public door (ftl/adapter.h): adapter.safetensors and adapter.json, then final/COMMIT with
 * their SHA-256, written last. Only public headers: it builds against an installed ftl. */
#include "adapter_io.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/adapter.h"
#include "ftl/core.h"

#define FT_ADAPTER_FORMAT "ftl-finetune-adapter"
#define FT_ADAPTER_VERSION 2

/* The tensors as the door takes them (names and data borrowed from a). */
static ftl_adapter_tensor *door_tensors(const ft_lora *a) {
  ftl_adapter_tensor *t = ftl_calloc((size_t)a->n_tensors + 1, sizeof *t);
  if (!t) return NULL;
  for (int i = 0; i < a->n_tensors; i++) {
    const ft_tensor *x = &a->tensors[i];
    t[i] = (ftl_adapter_tensor){.name = x->name, .ndim = 2, .shape = {x->shape[0], x->shape[1]}, .data = x->data};
  }
  return t;
}

int ft_adapter_save(const char *dir, const ft_lora *a, const ft_adapter_meta *m, char *msg, size_t msg_size) {
  char hex[17], targets[64];
  ftl_diag d;
  msg[0] = '\0';
  json_t *j = json_object(), *cfg = json_object(), *tm = json_array(), *tr = json_object();
  int rc = -1;
  if (!j || !cfg || !tm || !tr) goto out;
  json_object_set_new(j, "format", json_string(FT_ADAPTER_FORMAT));
  json_object_set_new(j, "version", json_integer(FT_ADAPTER_VERSION));
  json_object_set_new(j, "peft_type", json_string("LORA"));
  json_object_set_new(j, "r", json_integer(a->rank));
  json_object_set_new(j, "lora_alpha", json_real(a->alpha));
  ft_lora_format_targets(a->targets, targets, sizeof targets);
  for (int k = 0; k < FT_LIN_COUNT; k++)
    if (a->targets & (1u << k)) json_array_append_new(tm, json_string(ft_lin_name((ft_lin)k)));
  json_object_set(j, "target_modules", tm);
  snprintf(hex, sizeof hex, "%016" PRIx64, m->base_hash);
  json_object_set_new(j, "base_model_hash", json_string(hex));
  json_object_set_new(cfg, "vocab", json_integer(FT_VOCAB));
  json_object_set_new(cfg, "block", json_integer(a->cfg.block));
  json_object_set_new(cfg, "layers", json_integer(a->cfg.layers));
  json_object_set_new(cfg, "heads", json_integer(a->cfg.heads));
  json_object_set_new(cfg, "embd", json_integer(a->cfg.embd));
  json_object_set_new(cfg, "intermediate", json_integer(a->cfg.intermediate));
  json_object_set_new(cfg, "kv_heads", json_integer(a->cfg.kv_heads));
  json_object_set_new(cfg, "rms_norm_eps", json_real(a->cfg.rms_eps));
  json_object_set_new(cfg, "rope_theta", json_real(a->cfg.rope_theta));
  json_object_set(j, "base_config", cfg);
  snprintf(hex, sizeof hex, "%016" PRIx64, m->data_hash);
  json_object_set_new(tr, "data_hash", json_string(hex));
  json_object_set_new(tr, "seed", json_integer((json_int_t)m->seed));
  json_object_set_new(tr, "steps", json_integer(m->steps));
  json_object_set_new(tr, "world_size", json_integer(m->world_size));
  json_object_set_new(tr, "global_batch", json_integer(m->global_batch));
  json_object_set_new(tr, "lr", json_real(m->lr));
  json_object_set(j, "training", tr);
  char *text = json_dumps(j, JSON_SORT_KEYS | JSON_INDENT(2));
  if (!text) goto out;
  size_t len = strlen(text);
  char *withnl = ftl_malloc(len + 2);
  ftl_adapter_tensor *t = door_tensors(a);
  if (withnl && t) {
    memcpy(withnl, text, len);
    withnl[len] = '\n';
    /* The door removes the marker first and writes it back last: a crash or a full disk in
     * between leaves a final/ that readers refuse, never a half adapter that looks whole. */
    if (ftl_adapter_write(dir, t, (size_t)a->n_tensors, withnl, len + 1, &d) == FTL_OK)
      rc = 0;
    else
      snprintf(msg, msg_size, "%s", d.msg);
  }
  ftl_free(t);
  ftl_free(withnl);
  free(text);
out:
  if (rc && !msg[0]) snprintf(msg, msg_size, "%s: cannot write adapter.json", dir);
  json_decref(j);
  json_decref(cfg);
  json_decref(tm);
  json_decref(tr);
  return rc;
}

/* The door's strict reader has checked the layout (header bounds, JSON, dtypes, offsets contiguous
 * and covering the file); here: exactly the tensors this adapter has, F32, its shapes. */
static int take_tensors(const ftl_adapter *f, ft_lora *a, char *msg, size_t msg_size) {
  if (ftl_adapter_count(f) != (size_t)a->n_tensors) {
    snprintf(msg, msg_size, "the file has %zu tensors, expected %d", ftl_adapter_count(f), a->n_tensors);
    return -1;
  }
  for (int i = 0; i < a->n_tensors; i++) {
    const ft_tensor *t = &a->tensors[i];
    ftl_adapter_tensor x;
    if (ftl_adapter_find(f, t->name, &x) != FTL_OK || x.ndim != 2 || x.shape[0] != t->shape[0] ||
        x.shape[1] != t->shape[1]) {
      snprintf(msg, msg_size, "tensor %s is missing, not F32, or not of shape [%" PRId64 ", %" PRId64 "]", t->name,
               t->shape[0], t->shape[1]);
      return -1;
    }
  }
  for (int i = 0; i < a->n_tensors; i++) {
    ftl_adapter_tensor x;
    ftl_adapter_find(f, a->tensors[i].name, &x);
    memcpy(a->tensors[i].data, x.data, a->tensors[i].count * sizeof(float));
  }
  return 0;
}

int ft_adapter_parse_safetensors(const uint8_t *bytes, size_t size, ft_lora *a, char *msg, size_t msg_size) {
  ftl_adapter *f = NULL;
  ftl_diag d;
  msg[0] = '\0';
  if (ftl_adapter_parse(bytes, size, &f, &d)) {
    snprintf(msg, msg_size, "%s", d.msg);
    return -1;
  }
  int rc = take_tensors(f, a, msg, msg_size);
  ftl_adapter_close(f);
  return rc;
}

int ft_adapter_load(const char *dir, const ft_config *cfg, ft_lora *a, ft_adapter_meta *m, char *msg, size_t msg_size) {
  char path[4096];
  const char *text = NULL;
  size_t size = 0;
  json_t *j = NULL;
  ftl_adapter *f = NULL;
  int rc = -1;
  ftl_diag d;
  memset(a, 0, sizeof *a);
  memset(m, 0, sizeof *m);
  /* The marker checked against both files, both read, the tensors parsed strictly. */
  if (ftl_adapter_open(dir, &f, &d)) {
    snprintf(msg, msg_size, "%s", d.msg);
    goto out;
  }
  text = ftl_adapter_json(f, &size);
  if (ftl_fmt(path, sizeof path, "%s/adapter.json", dir)) {
    snprintf(msg, msg_size, "%s: path too long", dir);
    goto out;
  }
  json_error_t jerr;
  j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
  json_t *fmt = json_object_get(j, "format"), *r = json_object_get(j, "r"), *al = json_object_get(j, "lora_alpha");
  json_t *tm = json_object_get(j, "target_modules"), *bh = json_object_get(j, "base_model_hash");
  json_t *bc = json_object_get(j, "base_config"), *ver = json_object_get(j, "version");
  if (!json_is_string(fmt) || strcmp(json_string_value(fmt), FT_ADAPTER_FORMAT) != 0 || !json_is_integer(r) ||
      !json_is_number(al) || !json_is_array(tm) || !json_is_string(bh) || !json_is_object(bc) ||
      !json_is_integer(ver)) {
    snprintf(msg, msg_size, "%s: not an adapter.json of format %s", path, FT_ADAPTER_FORMAT);
    goto out;
  }
  if (json_integer_value(ver) != FT_ADAPTER_VERSION) {
    snprintf(msg, msg_size,
             "%s: adapter format version %" JSON_INTEGER_FORMAT ", this program reads version %d (the Llama "
             "decoder's names; version 1 was the GPT-2 shaped model of earlier releases)",
             path, json_integer_value(ver), FT_ADAPTER_VERSION);
    goto out;
  }
  ft_config c2 = {.block = (int)json_integer_value(json_object_get(bc, "block")),
                  .layers = (int)json_integer_value(json_object_get(bc, "layers")),
                  .heads = (int)json_integer_value(json_object_get(bc, "heads")),
                  .embd = (int)json_integer_value(json_object_get(bc, "embd")),
                  .intermediate = (int)json_integer_value(json_object_get(bc, "intermediate")),
                  .kv_heads = (int)json_integer_value(json_object_get(bc, "kv_heads")),
                  .rms_eps = json_number_value(json_object_get(bc, "rms_norm_eps")),
                  .rope_theta = json_number_value(json_object_get(bc, "rope_theta"))};
  /* Every field is required: a missing one reads as 0, which ft_config_equal would take as the
   * default. */
  if (!c2.intermediate || !c2.kv_heads || !(c2.rms_eps > 0) || !(c2.rope_theta > 0) || !ft_config_equal(&c2, cfg)) {
    snprintf(msg, msg_size, "%s: made for another base configuration", path);
    goto out;
  }
  unsigned targets = 0;
  for (size_t i = 0; i < json_array_size(tm); i++) {
    unsigned bit =
        json_is_string(json_array_get(tm, i)) ? ft_lora_parse_targets(json_string_value(json_array_get(tm, i))) : 0;
    if (!bit) {
      snprintf(msg, msg_size, "%s: unknown target module", path);
      goto out;
    }
    targets |= bit;
  }
  json_int_t rank = json_integer_value(r);
  if (rank < 1 || rank > 4096 || ft_lora_create(a, cfg, (int)rank, (float)json_number_value(al), targets)) {
    snprintf(msg, msg_size, "%s: bad rank or targets", path);
    goto out;
  }
  m->base_hash = strtoull(json_string_value(bh), NULL, 16);
  json_t *tr = json_object_get(j, "training");
  m->data_hash = strtoull(
      json_string_value(json_object_get(tr, "data_hash")) ? json_string_value(json_object_get(tr, "data_hash")) : "0",
      NULL, 16);
  m->seed = (uint64_t)json_integer_value(json_object_get(tr, "seed"));
  m->steps = json_integer_value(json_object_get(tr, "steps"));
  m->world_size = (int)json_integer_value(json_object_get(tr, "world_size"));
  m->global_batch = (int)json_integer_value(json_object_get(tr, "global_batch"));
  m->lr = json_number_value(json_object_get(tr, "lr"));
  char detail[512];
  if (take_tensors(f, a, detail, sizeof detail)) {
    snprintf(msg, msg_size, "%s/adapter.safetensors: %s", dir, detail);
    goto out;
  }
  rc = 0;
out:
  if (rc) ft_lora_destroy(a);
  json_decref(j);
  ftl_adapter_close(f);
  return rc;
}
