/* pipeline/safetensors.c: the canonical safetensors writer and the strict reader (safetensors.h).
 *
 * Map: dtype lookup (core's table); sizes; JSON string escaping as serde_json does it; the encoder (layout order,
 * header, padding, buffer); the parser (header bounds, JSON, entries, contiguity); accessors. */
#include "pipeline/safetensors.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/dtype_table.h"
#include "core/fs.h"
#include "ftl/core.h"
#include "pipeline/pl_util.h"

/* The dtypes are core's table (core/dtype_table.h), whose rows are safetensors' own list in its
 * order: pl_st_dtype numbers the same rows. */
_Static_assert(FTL_ST_DTYPE_COUNT_ == (int)CORE_DT_COUNT && FTL_ST_BOOL == (int)CORE_DT_BOOL &&
                   FTL_ST_U8 == (int)CORE_DT_U8 && FTL_ST_F8_E5M2FNUZ == (int)CORE_DT_F8_E5M2FNUZ &&
                   FTL_ST_F16 == (int)CORE_DT_F16 && FTL_ST_BF16 == (int)CORE_DT_BF16 &&
                   FTL_ST_F32 == (int)CORE_DT_F32 && FTL_ST_C64 == (int)CORE_DT_C64 && FTL_ST_U64 == (int)CORE_DT_U64,
               "pl_st_dtype and core_dtype_id number the same rows");

const char *pl_st_dtype_name(pl_st_dtype t) {
  const core_dtype_row *r = core_dtype_row_at((int)t);
  return r ? r->safetensors : NULL;
}

int pl_st_dtype_bits(pl_st_dtype t) {
  const core_dtype_row *r = core_dtype_row_at((int)t);
  return r ? r->bits : 0;
}

ftl_err pl_st_dtype_parse(const char *name, pl_st_dtype *out) {
  const core_dtype_row *r = core_dtype_find(name, CORE_DT_NAMED_SAFETENSORS);
  if (!r) return FTL_ERR_INVAL;
  *out = (pl_st_dtype)r->id;
  return FTL_OK;
}

ftl_err pl_st_tensor_bytes(pl_st_dtype dtype, int ndim, const int64_t *shape, uint64_t *out) {
  int bits = pl_st_dtype_bits(dtype);
  if (!bits || ndim < 0 || ndim > FTL_ST_MAX_DIMS) return FTL_ERR_INVAL;
  uint64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return FTL_ERR_INVAL;
    if (shape[i] > FTL_ST_MAX_VALUE) return FTL_ERR_RANGE;
    uint64_t s = (uint64_t)shape[i];
    if (s && n > (uint64_t)FTL_ST_MAX_VALUE / s) return FTL_ERR_RANGE;
    n *= s;
  }
  /* n <= 2^48, bits <= 64: the product fits in 64 bits. */
  uint64_t nbits = n * (uint64_t)bits;
  if (nbits % 8) return FTL_ERR_INVAL;
  if (nbits / 8 > (uint64_t)FTL_ST_MAX_VALUE) return FTL_ERR_RANGE;
  *out = nbits / 8;
  return FTL_OK;
}

/* ---- encoder ------------------------------------------------------------------------------- */

/* A JSON string as serde_json writes it: '"' and '\\' escaped, the short escapes for \b \f \n \r
 * \t, \u00xx (lowercase) for the other control bytes, everything else (UTF-8 included) as is. */
static void put_json_string(core_buf *b, const char *s) {
  static const char hex[] = "0123456789abcdef";
  core_buf_addc(b, '"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    unsigned char c = *p;
    switch (c) {
    case '"': core_buf_adds(b, "\\\""); break;
    case '\\': core_buf_adds(b, "\\\\"); break;
    case '\b': core_buf_adds(b, "\\b"); break;
    case '\f': core_buf_adds(b, "\\f"); break;
    case '\n': core_buf_adds(b, "\\n"); break;
    case '\r': core_buf_adds(b, "\\r"); break;
    case '\t': core_buf_adds(b, "\\t"); break;
    default:
      if (c < 0x20) {
        char e[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
        core_buf_adds(b, e);
      } else {
        core_buf_addc(b, (char)c);
      }
    }
  }
  core_buf_addc(b, '"');
}

static int by_layout(const void *x, const void *y) {
  const pl_st_tensor *a = *(const pl_st_tensor *const *)x, *b = *(const pl_st_tensor *const *)y;
  if (a->dtype != b->dtype) return a->dtype > b->dtype ? -1 : 1; /* descending alignment */
  return strcmp(a->name, b->name);
}

static int by_name_only(const void *x, const void *y) {
  return strcmp((*(const pl_st_tensor *const *)x)->name, (*(const pl_st_tensor *const *)y)->name);
}

static int kv_by_key(const void *x, const void *y) {
  return strcmp((*(const pl_st_kv *const *)x)->key, (*(const pl_st_kv *const *)y)->key);
}

/* The inputs checked (names, sizes, metadata present and unique) and ordered: order[] in layout
 * order, mo[] by key. */
static ftl_err encode_order(const pl_st_tensor *tensors, size_t n, const pl_st_kv *meta, size_t n_meta,
                            const pl_st_tensor **order, const pl_st_kv **mo, ftl_diag *d) {
  for (size_t i = 0; i < n; i++) {
    uint64_t bytes;
    const pl_st_tensor *t = &tensors[i];
    if (!t->name || strcmp(t->name, "__metadata__") == 0)
      return ftl_diag_fail(d, FTL_ERR_INVAL, "tensor %zu has no name or the reserved name __metadata__", i);
    if (pl_st_tensor_bytes(t->dtype, t->ndim, t->shape, &bytes) || bytes != t->size_bytes || (bytes && !t->data))
      return ftl_diag_fail(d, FTL_ERR_INVAL, "tensor %s: dtype, shape and size (%" PRIu64 " bytes) do not agree",
                           t->name, t->size_bytes);
    order[i] = t;
  }
  for (size_t i = 0; i < n_meta; i++) {
    if (!meta[i].key || !meta[i].value)
      return ftl_diag_fail(d, FTL_ERR_INVAL, "metadata entry %zu has no key or value", i);
    mo[i] = &meta[i];
  }
  qsort(order, n, sizeof *order, by_layout);
  qsort(mo, n_meta, sizeof *mo, kv_by_key);
  /* Names unique: checked in name order (the layout order groups by dtype first). */
  qsort(order, n, sizeof *order, by_name_only);
  for (size_t i = 1; i < n; i++)
    if (strcmp(order[i - 1]->name, order[i]->name) == 0)
      return ftl_diag_fail(d, FTL_ERR_INVAL, "tensor name %s appears twice", order[i]->name);
  qsort(order, n, sizeof *order, by_layout);
  for (size_t i = 1; i < n_meta; i++)
    if (strcmp(mo[i - 1]->key, mo[i]->key) == 0)
      return ftl_diag_fail(d, FTL_ERR_INVAL, "metadata key %s appears twice", mo[i]->key);
  return FTL_OK;
}

/* The header JSON into h, padded with spaces to a multiple of 8; the data bytes' total into *data.
 * A full buffer is left in h->err for the caller. */
static ftl_err encode_header(core_buf *h, const pl_st_tensor *const *order, size_t n, const pl_st_kv *const *mo,
                             size_t n_meta, uint64_t *data, ftl_diag *d) {
  core_buf_addc(h, '{');
  if (n_meta) {
    core_buf_adds(h, "\"__metadata__\":{");
    for (size_t i = 0; i < n_meta; i++) {
      if (i) core_buf_addc(h, ',');
      put_json_string(h, mo[i]->key);
      core_buf_addc(h, ':');
      put_json_string(h, mo[i]->value);
    }
    core_buf_addc(h, '}');
  }
  uint64_t off = 0;
  for (size_t i = 0; i < n; i++) {
    if (i || n_meta) core_buf_addc(h, ',');
    put_json_string(h, order[i]->name);
    core_buf_printf(h, ":{\"dtype\":\"%s\",\"shape\":[", pl_st_dtype_name(order[i]->dtype));
    for (int k = 0; k < order[i]->ndim; k++)
      core_buf_printf(h, "%s%" PRId64, k ? "," : "", order[i]->shape[k]);
    core_buf_printf(h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + order[i]->size_bytes);
    off += order[i]->size_bytes;
    if (off > (uint64_t)FTL_ST_MAX_VALUE)
      return ftl_diag_fail(d, FTL_ERR_RANGE, "the tensors add up to more than 2^48 bytes");
  }
  core_buf_addc(h, '}');
  while (!h->err && h->len % 8)
    core_buf_addc(h, ' ');
  *data = off;
  return FTL_OK;
}

ftl_err pl_st_encode(const pl_st_tensor *tensors, size_t n, const pl_st_kv *meta, size_t n_meta, uint8_t **out,
                     size_t *out_size, ftl_diag *d) {
  ftl_err rc = FTL_ERR_NOMEM;
  const pl_st_tensor **order = NULL;
  const pl_st_kv **mo = NULL;
  core_buf h;
  core_buf_init(&h, (size_t)FTL_ST_MAX_VALUE); /* a header is a value of the format like any */
  uint8_t *img = NULL;
  uint64_t off = 0;
  *out = NULL;
  *out_size = 0;
  order = ftl_calloc(n ? n : 1, sizeof *order);
  mo = ftl_calloc(n_meta ? n_meta : 1, sizeof *mo);
  if (!order || !mo) goto fail_nomem;
  if ((rc = encode_order(tensors, n, meta, n_meta, order, mo, d))) goto out;
  if ((rc = encode_header(&h, order, n, mo, n_meta, &off, d))) goto out;
  if (h.err == FTL_ERR_RANGE) {
    rc = core_buf_check(&h, "safetensors header", d);
    goto out;
  }
  if (h.err) goto fail_nomem;
  size_t total = 8 + h.len + (size_t)off;
  img = ftl_malloc(total ? total : 1);
  if (!img) goto fail_nomem;
  uint64_t hl = h.len;
  for (int i = 0; i < 8; i++)
    img[i] = (uint8_t)(hl >> (8 * i));
  memcpy(img + 8, h.p, h.len);
  size_t at = 8 + h.len;
  for (size_t i = 0; i < n; i++) {
    if (order[i]->size_bytes) memcpy(img + at, order[i]->data, (size_t)order[i]->size_bytes);
    at += (size_t)order[i]->size_bytes;
  }
  *out = img;
  *out_size = total;
  img = NULL;
  rc = FTL_OK;
  goto out;
fail_nomem:
  rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory encoding a safetensors file");
out:
  ftl_free(img);
  ftl_free(order);
  ftl_free(mo);
  core_buf_free(&h);
  return rc;
}

ftl_err pl_st_write(const char *path, const pl_st_tensor *tensors, size_t n, const pl_st_kv *meta, size_t n_meta,
                     ftl_diag *d) {
  uint8_t *img = NULL;
  size_t size = 0;
  ftl_err rc = pl_st_encode(tensors, n, meta, n_meta, &img, &size, d);
  if (rc == FTL_OK) rc = core_fs_replace(path, img, size, CORE_TMP_UNPREDICTABLE, NULL, -1, -1, d);
  ftl_free(img);
  return rc;
}

/* ---- parser -------------------------------------------------------------------------------- */

struct pl_st_file {
  uint8_t *owned;
  pl_st_tensor *t; /* sorted by name; names owned */
  size_t n;
  pl_st_kv *meta; /* sorted by key; strings owned */
  size_t n_meta;
};

void pl_st_free(pl_st_file *f) {
  if (!f) return;
  for (size_t i = 0; i < f->n; i++)
    ftl_free((void *)(uintptr_t)f->t[i].name);
  for (size_t i = 0; i < f->n_meta; i++) {
    ftl_free((void *)(uintptr_t)f->meta[i].key);
    ftl_free((void *)(uintptr_t)f->meta[i].value);
  }
  ftl_free(f->t);
  ftl_free(f->meta);
  ftl_free(f->owned);
  ftl_free(f);
}

typedef struct span {
  uint64_t begin, end;
  size_t idx;
} span;

static int span_cmp(const void *x, const void *y) {
  const span *a = x, *b = y;
  if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
  if (a->end != b->end) return a->end < b->end ? -1 : 1;
  return 0;
}

static int tensor_by_name(const void *x, const void *y) {
  return strcmp(((const pl_st_tensor *)x)->name, ((const pl_st_tensor *)y)->name);
}

static int kv_cmp(const void *x, const void *y) {
  return strcmp(((const pl_st_kv *)x)->key, ((const pl_st_kv *)y)->key);
}

/* An integer in [0, FTL_ST_MAX_VALUE], or -1. */
static int64_t json_u48(const json_t *v) {
  if (!json_is_integer(v)) return -1;
  json_int_t x = json_integer_value(v);
  return x < 0 || x > FTL_ST_MAX_VALUE ? -1 : (int64_t)x;
}

#define NOMEM_PARSING "out of memory parsing a safetensors header"

/* The 8-byte length and the header it gives: bounded, a JSON object, followed only by space
 * padding. The object into *h; its length into *hl. */
static ftl_err parse_header(const uint8_t *bytes, size_t size, uint64_t max_header, json_t **h, uint64_t *hl_out,
                            ftl_diag *d) {
  *h = NULL;
  if (size < 8) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "shorter than the 8-byte header length (%zu bytes)", size);
  uint64_t hl = 0;
  for (int i = 0; i < 8; i++)
    hl |= (uint64_t)bytes[i] << (8 * i);
  if (hl > max_header)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "header length %" PRIu64 " is over the limit of %" PRIu64 " bytes", hl,
                         max_header);
  if (hl > size - 8)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "header length %" PRIu64 " runs past the end of the file (%zu bytes)", hl,
                         size);
  if (hl < 2 || bytes[8] != '{') return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the header does not start with '{'");
  json_error_t jerr;
  json_t *j = json_loadb((const char *)bytes + 8, (size_t)hl, JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK, &jerr);
  if (!j)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the header is not valid JSON: %s (at byte %d)", jerr.text, jerr.position);
  if (!json_is_object(j)) {
    json_decref(j);
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the header is not a JSON object");
  }
  /* With JSON_DISABLE_EOF_CHECK, position is how far the parser read; only padding may follow. */
  for (size_t i = (size_t)jerr.position; i < hl; i++)
    if (bytes[8 + i] != ' ') {
      json_decref(j);
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "byte %zu of the header after the JSON object is not a space padding",
                           i);
    }
  *h = j;
  *hl_out = hl;
  return FTL_OK;
}

/* __metadata__: an object of strings, into f->meta sorted by key. */
static ftl_err parse_meta(json_t *meta, pl_st_file *f, ftl_diag *d) {
  if (!json_is_object(meta)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "__metadata__ is not an object");
  f->meta = ftl_calloc(json_object_size(meta) ? json_object_size(meta) : 1, sizeof *f->meta);
  if (!f->meta) return ftl_diag_fail(d, FTL_ERR_NOMEM, NOMEM_PARSING);
  const char *k;
  json_t *v;
  json_object_foreach(meta, k, v) {
    if (!json_is_string(v)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "__metadata__ value of %s is not a string", k);
    f->meta[f->n_meta].key = ftl_strdup(k);
    f->meta[f->n_meta].value = ftl_strdup(json_string_value(v));
    f->n_meta++;
    if (!f->meta[f->n_meta - 1].key || !f->meta[f->n_meta - 1].value)
      return ftl_diag_fail(d, FTL_ERR_NOMEM, NOMEM_PARSING);
  }
  qsort(f->meta, f->n_meta, sizeof *f->meta, kv_cmp);
  return FTL_OK;
}

/* One tensor entry o (named name) into f->t[f->n] and its byte range into sp[f->n]; data is the
 * data section, buf its size. */
static ftl_err parse_entry(const char *name, const json_t *o, const uint8_t *data, uint64_t buf, pl_st_file *f,
                           span *sp, ftl_diag *d) {
  json_t *dt = json_object_get(o, "dtype"), *sh = json_object_get(o, "shape"), *of = json_object_get(o, "data_offsets");
  if (!json_is_object(o) || json_object_size(o) != 3 || !json_is_string(dt) || !json_is_array(sh) ||
      !json_is_array(of) || json_array_size(of) != 2)
    return ftl_diag_fail(
        d, FTL_ERR_CORRUPT,
        "tensor %s is not exactly {\"dtype\": string, \"shape\": array, \"data_offsets\": [begin, end]}", name);
  pl_st_tensor *t = &f->t[f->n];
  if (pl_st_dtype_parse(json_string_value(dt), &t->dtype))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "tensor %s has an unknown dtype %s", name, json_string_value(dt));
  if (json_array_size(sh) > FTL_ST_MAX_DIMS)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "tensor %s has %zu dimensions (at most %d)", name, json_array_size(sh),
                         FTL_ST_MAX_DIMS);
  t->ndim = (int)json_array_size(sh);
  for (int k = 0; k < t->ndim; k++)
    if ((t->shape[k] = json_u48(json_array_get(sh, (size_t)k))) < 0)
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "tensor %s: dimension %d is not an integer in [0, 2^48)", name, k);
  if (pl_st_tensor_bytes(t->dtype, t->ndim, t->shape, &t->size_bytes))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "tensor %s: its size overflows or does not end on a byte boundary", name);
  int64_t b0 = json_u48(json_array_get(of, 0)), b1 = json_u48(json_array_get(of, 1));
  if (b0 < 0 || b1 < b0)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "tensor %s: data_offsets are not integers 0 <= begin <= end < 2^48", name);
  if ((uint64_t)(b1 - b0) != t->size_bytes)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                         "tensor %s: data_offsets span %" PRId64 " bytes, its dtype and shape need %" PRIu64, name,
                         b1 - b0, t->size_bytes);
  if ((uint64_t)b1 > buf)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                         "tensor %s: data_offsets end at %" PRId64 ", past the %" PRIu64 " data bytes", name, b1, buf);
  t->name = ftl_strdup(name);
  f->n++;
  if (!t->name) return ftl_diag_fail(d, FTL_ERR_NOMEM, NOMEM_PARSING);
  t->data = data + b0;
  sp[f->n - 1] = (span){(uint64_t)b0, (uint64_t)b1, f->n - 1};
  return FTL_OK;
}

/* The tensors' ranges (sp, f->n of them; sorted here) tile the buf data bytes exactly. */
static ftl_err check_contiguous(const pl_st_file *f, span *sp, uint64_t buf, ftl_diag *d) {
  if (f->n) qsort(sp, f->n, sizeof *sp, span_cmp);
  uint64_t at = 0;
  for (size_t i = 0; i < f->n; i++) {
    if (sp[i].begin != at)
      return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                           "tensor %s starts at %" PRIu64 ", not where the previous one ends (%" PRIu64 "): %s",
                           f->t[sp[i].idx].name, sp[i].begin, at, sp[i].begin < at ? "overlap" : "a hole");
    at = sp[i].end;
  }
  if (at != buf)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the tensors cover %" PRIu64 " of the %" PRIu64 " data bytes", at, buf);
  return FTL_OK;
}

ftl_err pl_st_parse(const uint8_t *bytes, size_t size, const pl_st_limits *limits, pl_st_file **out, ftl_diag *d) {
  ftl_err rc;
  json_t *h = NULL;
  pl_st_file *f = NULL;
  span *sp = NULL;
  uint64_t hl = 0;
  uint64_t max_header = limits && limits->max_header_bytes ? limits->max_header_bytes : 100000000u;
  size_t max_tensors = limits && limits->max_tensors ? limits->max_tensors : 1000000u;
  *out = NULL;
  if ((rc = parse_header(bytes, size, max_header, &h, &hl, d))) return rc;
  json_t *meta = json_object_get(h, "__metadata__");
  size_t n = json_object_size(h) - (meta ? 1 : 0);
  if (n > max_tensors) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%zu tensors is over the limit of %zu", n, max_tensors);
    goto out;
  }
  f = ftl_calloc(1, sizeof *f);
  if (!f) goto nomem;
  f->t = ftl_calloc(n ? n : 1, sizeof *f->t);
  sp = ftl_calloc(n ? n : 1, sizeof *sp);
  if (!f->t || !sp) goto nomem;
  if (meta && (rc = parse_meta(meta, f, d))) goto out;
  uint64_t buf = size - 8 - hl;
  const char *name;
  json_t *o;
  json_object_foreach(h, name, o) {
    if (o == meta) continue;
    if ((rc = parse_entry(name, o, bytes + 8 + hl, buf, f, sp, d))) goto out;
  }
  if ((rc = check_contiguous(f, sp, buf, d))) goto out;
  if (f->n) qsort(f->t, f->n, sizeof *f->t, tensor_by_name);
  *out = f;
  f = NULL;
  rc = FTL_OK;
  goto out;
nomem:
  rc = ftl_diag_fail(d, FTL_ERR_NOMEM, NOMEM_PARSING);
out:
  ftl_free(sp);
  pl_st_free(f);
  json_decref(h);
  return rc;
}

ftl_err pl_st_load(const char *path, size_t max_bytes, const pl_st_limits *limits, pl_st_file **out, ftl_diag *d) {
  char *data = NULL;
  size_t size = 0;
  *out = NULL;
  ftl_err rc = ftl_read_file(path, max_bytes, &data, &size, d);
  if (rc) return rc;
  rc = pl_st_parse((const uint8_t *)data, size, limits, out, d);
  if (rc) {
    ftl_diag_prefix(d, rc, "%s", path);
    ftl_free(data);
    return rc;
  }
  (*out)->owned = (uint8_t *)data;
  return FTL_OK;
}

size_t pl_st_count(const pl_st_file *f) { return f ? f->n : 0; }
const pl_st_tensor *pl_st_at(const pl_st_file *f, size_t i) { return f && i < f->n ? &f->t[i] : NULL; }
const pl_st_tensor *pl_st_find(const pl_st_file *f, const char *name) {
  if (!f || !name || !f->n) return NULL;
  pl_st_tensor key = {.name = name};
  return bsearch(&key, f->t, f->n, sizeof *f->t, tensor_by_name);
}
size_t pl_st_meta_count(const pl_st_file *f) { return f ? f->n_meta : 0; }
const pl_st_kv *pl_st_meta_at(const pl_st_file *f, size_t i) { return f && i < f->n_meta ? &f->meta[i] : NULL; }
const char *pl_st_meta_get(const pl_st_file *f, const char *key) {
  if (!f || !key || !f->n_meta) return NULL;
  pl_st_kv k = {.key = key};
  const pl_st_kv *r = bsearch(&k, f->meta, f->n_meta, sizeof *f->meta, kv_cmp);
  return r ? r->value : NULL;
}
