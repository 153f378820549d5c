/* examples/finetune/adapter_io.c: writing and reading the final adapter (adapter_io.h). */
#include "adapter_io.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/core.h"

#define FT_ADAPTER_FORMAT "ftl-finetune-adapter"
#define FT_ADAPTER_VERSION 1
#define FT_ST_MAX_HEADER (1u << 20)

static int by_name(const void *x, const void *y) {
  const ft_tensor *a = *(const ft_tensor *const *)x, *b = *(const ft_tensor *const *)y;
  return strcmp(a->name, b->name);
}

/* A growing text buffer with printf. */
typedef struct sbuf {
  char *p;
  size_t len, cap;
  int bad;
} sbuf;

static void sb_printf(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *s, const char *fmt, ...) {
  if (s->bad) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s->p ? s->p + s->len : NULL, s->p ? s->cap - s->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      s->bad = 1;
      return;
    }
    if (s->p && s->len + (size_t)n < s->cap) {
      s->len += (size_t)n;
      return;
    }
    size_t cap = (s->cap + (size_t)n + 1) * 2;
    char *q = ftl_realloc(s->p, cap);
    if (!q) {
      s->bad = 1;
      return;
    }
    s->p = q;
    s->cap = cap;
  }
}

static int write_safetensors(const char *path, const ft_lora *a, char *msg, size_t msg_size) {
  int rc = -1, n = a->n_tensors;
  const ft_tensor **order = ftl_calloc((size_t)n, sizeof *order);
  sbuf h = {0};
  uint8_t *img = NULL;
  if (!order) goto out;
  for (int i = 0; i < n; i++)
    order[i] = &a->tensors[i];
  qsort(order, (size_t)n, sizeof *order, by_name);
  /* The reference writer's canonical form: compact JSON, __metadata__ first, tensors in layout
   * order, the header padded with spaces so the data starts 8-byte aligned. */
  sb_printf(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    size_t bytes = order[i]->count * sizeof(float);
    sb_printf(&h, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%" PRId64 ",%" PRId64 "],\"data_offsets\":[%zu,%zu]}",
              order[i]->name, order[i]->shape[0], order[i]->shape[1], off, off + bytes);
    off += bytes;
  }
  sb_printf(&h, "}");
  while (!h.bad && (8 + h.len) % 8)
    sb_printf(&h, " ");
  if (h.bad) goto out;
  size_t total = 8 + h.len + off;
  img = ftl_malloc(total);
  if (!img) goto out;
  uint64_t hl = h.len;
  for (int i = 0; i < 8; i++)
    img[i] = (uint8_t)(hl >> (8 * i));
  memcpy(img + 8, h.p, h.len);
  size_t at = 8 + h.len;
  for (int i = 0; i < n; i++) {
    /* float32 little-endian: the host order on every machine this example targets. */
    memcpy(img + at, order[i]->data, order[i]->count * sizeof(float));
    at += order[i]->count * sizeof(float);
  }
  ftl_diag d;
  if (ftl_write_file_atomic(path, img, total, &d)) {
    snprintf(msg, msg_size, "%s", d.msg);
    goto out;
  }
  rc = 0;
out:
  if (rc && !msg[0]) snprintf(msg, msg_size, "%s: out of memory", path);
  ftl_free(order);
  ftl_free(h.p);
  ftl_free(img);
  return rc;
}

int ft_adapter_save(const char *dir, const ft_lora *a, const ft_adapter_meta *m, char *msg, size_t msg_size) {
  char path[4096], hex[17], targets[64];
  ftl_diag d;
  msg[0] = '\0';
  if (ftl_mkdir_p(dir, &d)) {
    snprintf(msg, msg_size, "%s", d.msg);
    return -1;
  }
  if (ftl_fmt(path, sizeof path, "%s/adapter.safetensors", dir) || write_safetensors(path, a, msg, msg_size)) {
    if (!msg[0]) snprintf(msg, msg_size, "%s: path too long", dir);
    return -1;
  }
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
  if (withnl) {
    memcpy(withnl, text, len);
    withnl[len] = '\n';
    if (ftl_fmt(path, sizeof path, "%s/adapter.json", dir) == FTL_OK &&
        ftl_write_file_atomic(path, withnl, len + 1, &d) == FTL_OK)
      rc = 0;
    else
      snprintf(msg, msg_size, "%s: %s", path, d.msg);
  }
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

typedef struct st_entry {
  const ft_tensor *t;
  uint64_t begin, end;
} st_entry;

static int by_begin(const void *x, const void *y) {
  const st_entry *a = x, *b = y;
  return a->begin < b->begin ? -1 : a->begin > b->begin;
}

int ft_adapter_parse_safetensors(const uint8_t *bytes, size_t size, ft_lora *a, char *msg, size_t msg_size) {
  int rc = -1;
  json_t *h = NULL;
  st_entry *e = NULL;
  if (size < 8) {
    snprintf(msg, msg_size, "shorter than the 8-byte header length");
    return -1;
  }
  uint64_t hl = 0;
  for (int i = 0; i < 8; i++)
    hl |= (uint64_t)bytes[i] << (8 * i);
  if (hl > FT_ST_MAX_HEADER || hl > size - 8 || hl < 2 || bytes[8] != '{') {
    snprintf(msg, msg_size, "header length %" PRIu64 " is out of range or the header is not a JSON object", hl);
    return -1;
  }
  json_error_t jerr;
  h = json_loadb((const char *)bytes + 8, (size_t)hl, JSON_REJECT_DUPLICATES, &jerr);
  if (!json_is_object(h)) {
    snprintf(msg, msg_size, "header is not valid JSON: %s", jerr.text);
    goto out;
  }
  size_t want = (size_t)a->n_tensors + (json_object_get(h, "__metadata__") ? 1 : 0);
  if (json_object_size(h) != want) {
    snprintf(msg, msg_size, "header has %zu entries, expected %d tensors", json_object_size(h), a->n_tensors);
    goto out;
  }
  e = ftl_calloc((size_t)a->n_tensors + 1, sizeof *e);
  if (!e) {
    snprintf(msg, msg_size, "out of memory");
    goto out;
  }
  uint64_t buf = size - 8 - hl;
  for (int i = 0; i < a->n_tensors; i++) {
    const ft_tensor *t = &a->tensors[i];
    json_t *o = json_object_get(h, t->name);
    json_t *dt = json_object_get(o, "dtype"), *sh = json_object_get(o, "shape"),
           *of = json_object_get(o, "data_offsets");
    if (!json_is_object(o) || !json_is_string(dt) || strcmp(json_string_value(dt), "F32") != 0 || !json_is_array(sh) ||
        json_array_size(sh) != 2 || !json_is_array(of) || json_array_size(of) != 2) {
      snprintf(msg, msg_size, "tensor %s is missing, not F32, or malformed", t->name);
      goto out;
    }
    for (int k = 0; k < 2; k++) {
      json_t *d = json_array_get(sh, (size_t)k);
      if (!json_is_integer(d) || json_integer_value(d) != t->shape[k]) {
        snprintf(msg, msg_size, "tensor %s has the wrong shape (expected [%" PRId64 ", %" PRId64 "])", t->name,
                 t->shape[0], t->shape[1]);
        goto out;
      }
    }
    json_t *b0 = json_array_get(of, 0), *b1 = json_array_get(of, 1);
    if (!json_is_integer(b0) || !json_is_integer(b1) || json_integer_value(b0) < 0 ||
        json_integer_value(b1) < json_integer_value(b0) || (uint64_t)json_integer_value(b1) > buf ||
        (uint64_t)(json_integer_value(b1) - json_integer_value(b0)) != t->count * sizeof(float)) {
      snprintf(msg, msg_size, "tensor %s has bad data_offsets", t->name);
      goto out;
    }
    e[i].t = t;
    e[i].begin = (uint64_t)json_integer_value(b0);
    e[i].end = (uint64_t)json_integer_value(b1);
  }
  qsort(e, (size_t)a->n_tensors, sizeof *e, by_begin);
  uint64_t at = 0;
  for (int i = 0; i < a->n_tensors; i++) {
    if (e[i].begin != at) {
      snprintf(msg, msg_size, "tensor %s does not start where the previous one ends", e[i].t->name);
      goto out;
    }
    at = e[i].end;
  }
  if (at != buf) {
    snprintf(msg, msg_size, "the tensors cover %" PRIu64 " of %" PRIu64 " data bytes", at, buf);
    goto out;
  }
  for (int i = 0; i < a->n_tensors; i++)
    memcpy(e[i].t->data, bytes + 8 + hl + e[i].begin, e[i].end - e[i].begin);
  rc = 0;
out:
  ftl_free(e);
  json_decref(h);
  return rc;
}

int ft_adapter_load(const char *dir, const ft_config *cfg, ft_lora *a, ft_adapter_meta *m, char *msg, size_t msg_size) {
  char path[4096];
  char *text = NULL, *st = NULL;
  size_t size = 0;
  json_t *j = NULL;
  int rc = -1;
  ftl_diag d;
  memset(a, 0, sizeof *a);
  memset(m, 0, sizeof *m);
  if (ftl_fmt(path, sizeof path, "%s/adapter.json", dir) || ftl_read_file(path, 1 << 20, &text, &size, &d)) {
    snprintf(msg, msg_size, "%s", d.msg);
    goto out;
  }
  json_error_t jerr;
  j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
  json_t *fmt = json_object_get(j, "format"), *r = json_object_get(j, "r"), *al = json_object_get(j, "lora_alpha");
  json_t *tm = json_object_get(j, "target_modules"), *bh = json_object_get(j, "base_model_hash");
  json_t *bc = json_object_get(j, "base_config");
  if (!json_is_string(fmt) || strcmp(json_string_value(fmt), FT_ADAPTER_FORMAT) != 0 || !json_is_integer(r) ||
      !json_is_number(al) || !json_is_array(tm) || !json_is_string(bh) || !json_is_object(bc)) {
    snprintf(msg, msg_size, "%s: not an adapter.json of format %s", path, FT_ADAPTER_FORMAT);
    goto out;
  }
  ft_config c2 = {
      (int)json_integer_value(json_object_get(bc, "block")), (int)json_integer_value(json_object_get(bc, "layers")),
      (int)json_integer_value(json_object_get(bc, "heads")), (int)json_integer_value(json_object_get(bc, "embd"))};
  if (memcmp(&c2, cfg, sizeof c2) != 0) {
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
  if (ftl_fmt(path, sizeof path, "%s/adapter.safetensors", dir) || ftl_read_file(path, 1u << 30, &st, &size, &d)) {
    snprintf(msg, msg_size, "%s", d.msg);
    goto out;
  }
  char detail[512];
  if (ft_adapter_parse_safetensors((const uint8_t *)st, size, a, detail, sizeof detail)) {
    snprintf(msg, msg_size, "%s: %s", path, detail);
    goto out;
  }
  rc = 0;
out:
  if (rc) ft_lora_destroy(a);
  json_decref(j);
  ftl_free(text);
  ftl_free(st);
  return rc;
}
