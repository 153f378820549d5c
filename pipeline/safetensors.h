/* pipeline/safetensors.h: safetensors files (https://github.com/huggingface/safetensors), written in
 * the reference writer's canonical form and read by a strict parser.
 *
 * Layout: 8-byte little-endian header length N; N bytes of JSON (an object: optional
 * "__metadata__" of string values, then one entry per tensor {"dtype","shape","data_offsets"});
 * then the byte buffer, offsets relative to its start.
 *
 * The writer (pl_st_encode / pl_st_write) produces exactly what the reference Rust writer does
 * for the same tensors: compact JSON, "__metadata__" first (its keys sorted), tensors laid out by
 * dtype in descending alignment and then by name (byte order), each entry's keys in the order
 * dtype, shape, data_offsets, the header padded with spaces so the buffer starts 8-byte aligned.
 * Same tensors -> same bytes.
 *
 * The reader (pl_st_parse) is stricter than the reference: header length within the limit and
 * inside the file, first byte '{', only spaces after the JSON, no duplicate keys, "__metadata__"
 * values strings only, each tensor entry exactly the three keys, a known dtype, integer shape and
 * offsets <= 2^48-1 with overflow-checked sizes, end - begin equal to the tensor's size, and the
 * tensors contiguous from 0 to the end of the file (no holes, no overlap, nothing after).
 *
 * Not here: what the tensors mean (pipeline/peft.h, examples/finetune/adapter_io.c). Values are not
 * checked (NaN/Inf may appear). Thread-safety: every function is reentrant; no global state. */
#ifndef FTL_PIPELINE_SAFETENSORS_H
#define FTL_PIPELINE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The dtypes of the format, in the reference's order (increasing alignment). */
typedef enum pl_st_dtype {
  FTL_ST_BOOL = 0,
  FTL_ST_F4,
  FTL_ST_F6_E2M3,
  FTL_ST_F6_E3M2,
  FTL_ST_U8,
  FTL_ST_I8,
  FTL_ST_F8_E5M2,
  FTL_ST_F8_E4M3,
  FTL_ST_F8_E8M0,
  FTL_ST_F8_E4M3FNUZ,
  FTL_ST_F8_E5M2FNUZ,
  FTL_ST_I16,
  FTL_ST_U16,
  FTL_ST_F16,
  FTL_ST_BF16,
  FTL_ST_I32,
  FTL_ST_U32,
  FTL_ST_F32,
  FTL_ST_C64,
  FTL_ST_F64,
  FTL_ST_I64,
  FTL_ST_U64,
  FTL_ST_DTYPE_COUNT_
} pl_st_dtype;

/* "F32" etc.; NULL for a bad value. */
const char *pl_st_dtype_name(pl_st_dtype t);
/* Bits per element (4, 6, 8, 16, 32, 64); 0 for a bad value. */
int pl_st_dtype_bits(pl_st_dtype t);
/* FTL_OK and *out, or FTL_ERR_INVAL for an unknown name. */
ftl_err pl_st_dtype_parse(const char *name, pl_st_dtype *out);

#define FTL_ST_MAX_DIMS 8
/* Sizes and offsets in the format are at most 2^48 - 1 (the reference's JSON schema). */
#define FTL_ST_MAX_VALUE ((int64_t)(((uint64_t)1 << 48) - 1))

/* One tensor. name and data are borrowed (by the writer from the caller; by a parsed file from
 * the bytes it was parsed from). data holds size_bytes little-endian bytes, row-major. */
typedef struct pl_st_tensor {
  const char *name;
  pl_st_dtype dtype;
  int ndim; /* 0 (a scalar) to FTL_ST_MAX_DIMS */
  int64_t shape[FTL_ST_MAX_DIMS];
  const void *data;
  uint64_t size_bytes; /* must equal prod(shape) * bits / 8 */
} pl_st_tensor;

/* One "__metadata__" entry (both borrowed). */
typedef struct pl_st_kv {
  const char *key;
  const char *value;
} pl_st_kv;

/* prod(shape) * bits / 8 into *out; FTL_ERR_RANGE on overflow or a size over FTL_ST_MAX_VALUE,
 * FTL_ERR_INVAL when the bits do not end on a byte boundary or a dimension is negative. */
ftl_err pl_st_tensor_bytes(pl_st_dtype dtype, int ndim, const int64_t *shape, uint64_t *out);

/* Encodes tensors (any order; names unique) and metadata (may be NULL/0; keys unique) into a
 * new buffer (*out, freed by the caller with ftl_free). */
ftl_err pl_st_encode(const pl_st_tensor *tensors, size_t n, const pl_st_kv *meta, size_t n_meta, uint8_t **out,
                      size_t *out_size, ftl_diag *d);

/* Encodes and writes path atomically and durably (tmp + fsync + rename + fsync of the folder). */
ftl_err pl_st_write(const char *path, const pl_st_tensor *tensors, size_t n, const pl_st_kv *meta, size_t n_meta,
                     ftl_diag *d);

/* Reader limits; zero fields take the defaults. */
typedef struct pl_st_limits {
  uint64_t max_header_bytes; /* default 100,000,000 (the reference's cap) */
  size_t max_tensors;        /* default 1,000,000 */
} pl_st_limits;

/* A parsed file: its tensors (sorted by name) and metadata (sorted by key). */
typedef struct pl_st_file pl_st_file;

/* Parses bytes[0..size) strictly (limits may be NULL). The file borrows bytes: tensor data points
 * into them, so they must outlive it. Every refusal is FTL_ERR_CORRUPT with a sentence in d. */
ftl_err pl_st_parse(const uint8_t *bytes, size_t size, const pl_st_limits *limits, pl_st_file **out, ftl_diag *d);

/* Reads path (at most max_bytes) and parses it; the file owns the bytes. */
ftl_err pl_st_load(const char *path, size_t max_bytes, const pl_st_limits *limits, pl_st_file **out, ftl_diag *d);

size_t pl_st_count(const pl_st_file *f);
/* The i-th tensor by name order (borrowed from f); NULL when i is out of range. */
const pl_st_tensor *pl_st_at(const pl_st_file *f, size_t i);
/* The tensor of that name, or NULL. */
const pl_st_tensor *pl_st_find(const pl_st_file *f, const char *name);
size_t pl_st_meta_count(const pl_st_file *f);
const pl_st_kv *pl_st_meta_at(const pl_st_file *f, size_t i);
/* The metadata value of key, or NULL. */
const char *pl_st_meta_get(const pl_st_file *f, const char *key);
/* Accepts NULL. */
void pl_st_free(pl_st_file *f);

#ifdef __cplusplus
}
#endif
#endif
