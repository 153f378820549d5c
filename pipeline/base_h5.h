/* pipeline/base_h5.h: reading the example fine-tune's base model file (HDF5,
 * docs/formats/base-model.md, version 2: the Llama decoder) for `ftl export --base`.
 *
 * The pipeline's one HDF5 file (the vendor seam; checkpoint/h5.c is the checkpoint module's own).
 * The reader is strict: format and version, every configuration attribute, exactly the tensors the
 * configuration implies (names, float32, shapes) and nothing else at the root. It does not check
 * the content hash against the weights (that hash is the example's XXH3 over its table; the
 * exporter compares the file's recorded hash with the adapter's and the file's SHA-256 with the
 * run's snapshot instead).
 *
 * Without HDF5 in the build, pl_base_h5_read returns FTL_ERR_UNSUPPORTED. Thread-safety: HDF5 as
 * built by Debian is not thread-safe; call from one thread. */
#ifndef FTL_PIPELINE_BASE_H5_H
#define FTL_PIPELINE_BASE_H5_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

#define PL_BASE_NAME_MAX 96

typedef struct pl_base_tensor {
  char name[PL_BASE_NAME_MAX]; /* Hugging Face's name, "model.layers.0.self_attn.q_proj.weight" */
  int ndim;                    /* 1 or 2 */
  int64_t shape[2];
  float *data; /* owned by the pl_base_model */
  size_t count;
} pl_base_tensor;

typedef struct pl_base_model {
  int vocab, block, layers, heads, embd, intermediate, kv_heads, tie_word_embeddings;
  double rms_norm_eps, rope_theta;
  char content_hash[17]; /* 16 hex digits as recorded in the file */
  pl_base_tensor *tensors;
  size_t n_tensors;
} pl_base_model;

/* Reads path into *out (freed with pl_base_model_free). FTL_ERR_CORRUPT for a file that is not a
 * version 2 base model, with the reason in d. */
ftl_err pl_base_h5_read(const char *path, pl_base_model **out, ftl_diag *d);
void pl_base_model_free(pl_base_model *m);

#endif
