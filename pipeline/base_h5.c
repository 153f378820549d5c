/* pipeline/base_h5.c: the example's base model file read through HDF5 (base_h5.h). The tensor
 * table (names and shapes from the configuration) is the one docs/formats/base-model.md states,
 * which examples/finetune/model.c lays out. */
#include "pipeline/base_h5.h"

#include <stdio.h>
#include <string.h>

#include "ftl/core.h"

#define BASE_FORMAT "ftl-finetune-base"
#define BASE_VERSION 2
#define MAX_LAYERS 64

void pl_base_model_free(pl_base_model *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n_tensors; i++)
    ftl_free(m->tensors[i].data);
  ftl_free(m->tensors);
  ftl_free(m);
}

#ifdef PL_HAVE_HDF5
#include <hdf5.h>

static int get_int(hid_t f, const char *name, int *v) {
  hid_t a = H5Aopen(f, name, H5P_DEFAULT);
  int rc = a < 0 || H5Aread(a, H5T_NATIVE_INT, v) < 0 ? -1 : 0;
  if (a >= 0) H5Aclose(a);
  return rc;
}

static int get_f64(hid_t f, const char *name, double *v) {
  hid_t a = H5Aopen(f, name, H5P_DEFAULT);
  int rc = a < 0 || H5Aread(a, H5T_NATIVE_DOUBLE, v) < 0 ? -1 : 0;
  if (a >= 0) H5Aclose(a);
  return rc;
}

static int get_str(hid_t f, const char *name, char *buf, size_t size) {
  hid_t a = H5Aopen(f, name, H5P_DEFAULT);
  if (a < 0) return -1;
  hid_t ty = H5Aget_type(a);
  int rc = -1;
  if (ty >= 0 && H5Tget_class(ty) == H5T_STRING && !H5Tis_variable_str(ty) && H5Tget_size(ty) < size) {
    memset(buf, 0, size);
    rc = H5Aread(a, ty, buf) < 0 ? -1 : 0;
  }
  if (ty >= 0) H5Tclose(ty);
  H5Aclose(a);
  return rc;
}

/* The table: name and shape of tensor i of the configuration, in file order. */
static void table_entry(const pl_base_model *m, size_t i, pl_base_tensor *t) {
  static const char *const lin[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                     "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
  size_t per_layer = 9, last = 1 + (size_t)m->layers * per_layer;
  int C = m->embd, I = m->intermediate;
  memset(t, 0, sizeof *t);
  if (i == 0) {
    snprintf(t->name, sizeof t->name, "model.embed_tokens.weight");
    t->ndim = 2, t->shape[0] = m->vocab, t->shape[1] = C;
  } else if (i == last) {
    snprintf(t->name, sizeof t->name, "model.norm.weight");
    t->ndim = 1, t->shape[0] = C;
  } else {
    int l = (int)((i - 1) / per_layer), k = (int)((i - 1) % per_layer);
    if (k == 0 || k == 5) {
      snprintf(t->name, sizeof t->name, "model.layers.%d.%s.weight", l,
               k == 0 ? "input_layernorm" : "post_attention_layernorm");
      t->ndim = 1, t->shape[0] = C;
    } else {
      int j = k < 5 ? k - 1 : k - 2;
      snprintf(t->name, sizeof t->name, "model.layers.%d.%s.weight", l, lin[j]);
      t->ndim = 2;
      t->shape[0] = j == 4 || j == 5 ? I : C;
      t->shape[1] = j == 6 ? I : C;
    }
  }
  t->count = (size_t)t->shape[0] * (size_t)(t->ndim == 2 ? t->shape[1] : 1);
}

ftl_err pl_base_h5_read(const char *path, pl_base_model **out, ftl_diag *d) {
  char format[64], hash[64];
  int version = 0;
  ftl_err rc = FTL_ERR_CORRUPT;
  pl_base_model *m = NULL;
  *out = NULL;
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: not an HDF5 file (or it cannot be read)", path);
  if (get_str(f, "format", format, sizeof format) || strcmp(format, BASE_FORMAT) || get_int(f, "version", &version)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: not a base model of format %s", path, BASE_FORMAT);
    goto out;
  }
  if (version != BASE_VERSION) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT,
                       "%s: base model format version %d; this ftl exports version %d (the Llama decoder; version 1 "
                       "was the GPT-2 shaped model of earlier releases, which has no Hugging Face export)",
                       path, version, BASE_VERSION);
    goto out;
  }
  if (!(m = ftl_calloc(1, sizeof *m))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  if (get_int(f, "vocab", &m->vocab) || get_int(f, "block", &m->block) || get_int(f, "layers", &m->layers) ||
      get_int(f, "heads", &m->heads) || get_int(f, "embd", &m->embd) ||
      get_int(f, "intermediate", &m->intermediate) || get_int(f, "kv_heads", &m->kv_heads) ||
      get_f64(f, "rms_norm_eps", &m->rms_norm_eps) || get_f64(f, "rope_theta", &m->rope_theta) ||
      get_int(f, "tie_word_embeddings", &m->tie_word_embeddings) ||
      get_str(f, "content_hash", hash, sizeof hash) || strlen(hash) != 16) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: missing or bad configuration attributes", path);
    goto out;
  }
  if (m->vocab != 256 || m->block < 2 || m->block > 4096 || m->layers < 1 || m->layers > MAX_LAYERS || m->heads < 1 ||
      m->embd < 1 || m->embd > 4096 || m->embd % m->heads || (m->embd / m->heads) % 2 || m->kv_heads != m->heads ||
      m->intermediate < 1 || m->intermediate > 16384 || !(m->rms_norm_eps > 0 && m->rms_norm_eps < 1) ||
      !(m->rope_theta > 1 && m->rope_theta < 1e12) || m->tie_word_embeddings != 1) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: configuration out of range", path);
    goto out;
  }
  memcpy(m->content_hash, hash, sizeof m->content_hash);
  m->n_tensors = 2 + (size_t)m->layers * 9;
  H5G_info_t gi = {0};
  if (H5Gget_info(f, &gi) < 0 || gi.nlinks != m->n_tensors) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: holds %llu objects; its configuration implies %zu tensors", path,
                       (unsigned long long)gi.nlinks, m->n_tensors);
    goto out;
  }
  if (!(m->tensors = ftl_calloc(m->n_tensors, sizeof *m->tensors))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < m->n_tensors; i++) {
    pl_base_tensor *t = &m->tensors[i];
    table_entry(m, i, t);
    if (!(t->data = ftl_malloc(t->count * sizeof(float)))) {
      rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
      goto out;
    }
    hid_t ds = H5Dopen2(f, t->name, H5P_DEFAULT);
    hid_t sp = ds < 0 ? -1 : H5Dget_space(ds);
    hid_t ty = ds < 0 ? -1 : H5Dget_type(ds);
    hsize_t dims[2] = {0, 0};
    int nd = sp < 0 || H5Sget_simple_extent_ndims(sp) > 2 ? -1 : H5Sget_simple_extent_dims(sp, dims, NULL);
    int bad = nd != t->ndim || dims[0] != (hsize_t)t->shape[0] || (nd == 2 && dims[1] != (hsize_t)t->shape[1]) ||
              ty < 0 || H5Tequal(ty, H5T_IEEE_F32LE) <= 0;
    if (!bad) bad = H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0;
    if (ty >= 0) H5Tclose(ty);
    if (sp >= 0) H5Sclose(sp);
    if (ds >= 0) H5Dclose(ds);
    if (bad) {
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: tensor %s is missing, not float32 of its shape, or unreadable", path,
                         t->name);
      goto out;
    }
  }
  *out = m;
  m = NULL;
  rc = FTL_OK;
out:
  pl_base_model_free(m);
  H5Fclose(f);
  return rc;
}

#else

ftl_err pl_base_h5_read(const char *path, pl_base_model **out, ftl_diag *d) {
  *out = NULL;
  return ftl_diag_fail(d, FTL_ERR_UNSUPPORTED, "%s: this ftl was built without HDF5 and cannot read a base model",
                       path);
}

#endif
