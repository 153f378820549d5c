/* examples/finetune/base_io.c: the base model in HDF5 (base_io.h, docs/formats/base-model.md).
 *
 * One file, at the root: one float32 little-endian dataset per tensor named as in model.h's table
 * (Hugging Face's LlamaForCausalLM names: "model.embed_tokens.weight",
 * "model.layers.0.self_attn.q_proj.weight", ...), and attributes format, version (2), vocab, block,
 * layers, heads, embd, intermediate, kv_heads, rms_norm_eps, rope_theta, tie_word_embeddings,
 * content_hash (16 hex digits) and provenance. Version 1 (the GPT-2 shaped model of earlier
 * releases) is refused with a message saying so. HDF5's automatic error printing is turned off;
 * failures are reported with the file and the tensor at fault. */
#include "base_io.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "ftl/core.h"

#define FT_BASE_FORMAT "ftl-finetune-base"
#define FT_BASE_VERSION 2

uint64_t ft_params_hash(const ft_params *p) {
  XXH3_state_t *st = XXH3_createState();
  if (!st) return 0;
  XXH3_64bits_reset(st);
  int32_t cfg[7] = {FT_VOCAB,      p->cfg.block, p->cfg.layers, p->cfg.heads, p->cfg.embd, p->cfg.intermediate,
                    p->cfg.kv_heads};
  double fcfg[2] = {p->cfg.rms_eps, p->cfg.rope_theta};
  XXH3_64bits_update(st, cfg, sizeof cfg);
  XXH3_64bits_update(st, fcfg, sizeof fcfg);
  for (int i = 0; i < p->n_tensors; i++) {
    const ft_tensor *t = &p->tensors[i];
    XXH3_64bits_update(st, t->name, strlen(t->name) + 1);
    XXH3_64bits_update(st, t->shape, sizeof t->shape);
    XXH3_64bits_update(st, t->data, t->count * sizeof(float));
  }
  uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

static int put_int(hid_t obj, const char *name, int value) {
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = sp < 0 ? -1 : H5Acreate2(obj, name, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
  int rc = a < 0 || H5Awrite(a, H5T_NATIVE_INT, &value) < 0 ? -1 : 0;
  if (a >= 0) H5Aclose(a);
  if (sp >= 0) H5Sclose(sp);
  return rc;
}

static int put_f64(hid_t obj, const char *name, double value) {
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = sp < 0 ? -1 : H5Acreate2(obj, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
  int rc = a < 0 || H5Awrite(a, H5T_NATIVE_DOUBLE, &value) < 0 ? -1 : 0;
  if (a >= 0) H5Aclose(a);
  if (sp >= 0) H5Sclose(sp);
  return rc;
}

/* A scalar attribute read as mem_type (HDF5 converts). */
static int get_scalar(hid_t obj, const char *name, hid_t mem_type, void *value) {
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  int rc = a < 0 || H5Aread(a, mem_type, value) < 0 ? -1 : 0;
  if (a >= 0) H5Aclose(a);
  return rc;
}

static int get_f64(hid_t obj, const char *name, double *value) { return get_scalar(obj, name, H5T_NATIVE_DOUBLE, value); }

static int put_str(hid_t obj, const char *name, const char *value) {
  hid_t ty = H5Tcopy(H5T_C_S1);
  if (ty < 0) return -1;
  H5Tset_size(ty, strlen(value) + 1);
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = sp < 0 ? -1 : H5Acreate2(obj, name, ty, sp, H5P_DEFAULT, H5P_DEFAULT);
  int rc = a < 0 || H5Awrite(a, ty, value) < 0 ? -1 : 0;
  if (a >= 0) H5Aclose(a);
  if (sp >= 0) H5Sclose(sp);
  H5Tclose(ty);
  return rc;
}

static int get_int(hid_t obj, const char *name, int *value) { return get_scalar(obj, name, H5T_NATIVE_INT, value); }

static int get_str(hid_t obj, const char *name, char *buf, size_t size) {
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  if (a < 0) return -1;
  hid_t ty = H5Aget_type(a);
  int rc = -1;
  if (ty >= 0 && H5Tget_class(ty) == H5T_STRING && !H5Tis_variable_str(ty) && H5Tget_size(ty) < size) {
    hid_t mem = H5Tcopy(ty);
    if (mem >= 0) {
      memset(buf, 0, size);
      rc = H5Aread(a, mem, buf) < 0 ? -1 : 0;
      H5Tclose(mem);
    }
  }
  if (ty >= 0) H5Tclose(ty);
  H5Aclose(a);
  return rc;
}

/* The file is built in memory (HDF5's core driver, no backing store) and its image written with the
 * public durable replace (ftl_write_file_atomic: temporary file, fsync, rename, fsync of the
 * folder), so the example needs no atomic replace of its own. */
int ft_base_save(const char *path, const ft_params *p, const char *provenance, char *msg, size_t msg_size) {
  char hex[17];
  hid_t f = -1, dcpl = -1, fapl = -1;
  void *img = NULL;
  int rc = -1;
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  snprintf(hex, sizeof hex, "%016" PRIx64, ft_params_hash(p));
  fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0 || H5Pset_fapl_core(fapl, (size_t)1 << 20, 0) < 0) {
    snprintf(msg, msg_size, "%s: cannot set up an in-memory HDF5 file", path);
    goto out;
  }
  f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (f < 0 || dcpl < 0 || H5Pset_obj_track_times(dcpl, 0) < 0) {
    snprintf(msg, msg_size, "%s: cannot create the HDF5 file", path);
    goto out;
  }
  if (put_str(f, "format", FT_BASE_FORMAT) || put_int(f, "version", FT_BASE_VERSION) || put_int(f, "vocab", FT_VOCAB) ||
      put_int(f, "block", p->cfg.block) || put_int(f, "layers", p->cfg.layers) || put_int(f, "heads", p->cfg.heads) ||
      put_int(f, "embd", p->cfg.embd) || put_int(f, "intermediate", p->cfg.intermediate) ||
      put_int(f, "kv_heads", p->cfg.kv_heads) || put_f64(f, "rms_norm_eps", p->cfg.rms_eps) ||
      put_f64(f, "rope_theta", p->cfg.rope_theta) || put_int(f, "tie_word_embeddings", 1) ||
      put_str(f, "content_hash", hex) ||
      put_str(f, "provenance", provenance ? provenance : "")) {
    snprintf(msg, msg_size, "%s: cannot write the attributes", path);
    goto out;
  }
  for (int i = 0; i < p->n_tensors; i++) {
    const ft_tensor *t = &p->tensors[i];
    hsize_t dims[2] = {(hsize_t)t->shape[0], (hsize_t)t->shape[1]};
    hid_t sp = H5Screate_simple(t->ndim, dims, NULL);
    hid_t ds = sp < 0 ? -1 : H5Dcreate2(f, t->name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    int bad = ds < 0 || H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0;
    if (ds >= 0) H5Dclose(ds);
    if (sp >= 0) H5Sclose(sp);
    if (bad) {
      snprintf(msg, msg_size, "%s: cannot write tensor %s", path, t->name);
      goto out;
    }
  }
  ssize_t n = H5Fflush(f, H5F_SCOPE_LOCAL) < 0 ? -1 : H5Fget_file_image(f, NULL, 0);
  if (n <= 0 || !(img = ftl_malloc((size_t)n)) || H5Fget_file_image(f, img, (size_t)n) != n) {
    snprintf(msg, msg_size, "%s: cannot take the HDF5 file's image", path);
    goto out;
  }
  ftl_diag d = {{0}};
  if (ftl_write_file_atomic(path, img, (size_t)n, &d)) {
    snprintf(msg, msg_size, "%s", d.msg);
    goto out;
  }
  rc = 0;
out:
  ftl_free(img);
  if (dcpl >= 0) H5Pclose(dcpl);
  if (f >= 0) H5Fclose(f);
  if (fapl >= 0) H5Pclose(fapl);
  return rc;
}

int ft_base_load(const char *path, ft_params *p, uint64_t *hash_out, char *msg, size_t msg_size) {
  hid_t f = -1;
  int rc = -1, version = 0, vocab = 0, tied = 0;
  char format[64], hex[32], want[17];
  ft_config cfg = {0};
  memset(p, 0, sizeof *p);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  if (access(path, F_OK) != 0) {
    snprintf(msg, msg_size, "%s: not found", path);
    return -1;
  }
  f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    snprintf(msg, msg_size, "%s: not an HDF5 file", path);
    goto out;
  }
  if (get_str(f, "format", format, sizeof format) || strcmp(format, FT_BASE_FORMAT) != 0 ||
      get_int(f, "version", &version)) {
    snprintf(msg, msg_size, "%s: not a base model of format %s", path, FT_BASE_FORMAT);
    goto out;
  }
  if (version != FT_BASE_VERSION) {
    snprintf(msg, msg_size,
             "%s: base model format version %d, this program reads version %d (the Llama decoder; version 1 was "
             "the GPT-2 shaped model of earlier releases): delete the file and let ftl-finetune pre-train it again",
             path, version, FT_BASE_VERSION);
    goto out;
  }
  if (get_int(f, "vocab", &vocab) || vocab != FT_VOCAB || get_int(f, "block", &cfg.block) ||
      get_int(f, "layers", &cfg.layers) || get_int(f, "heads", &cfg.heads) || get_int(f, "embd", &cfg.embd) ||
      get_int(f, "intermediate", &cfg.intermediate) || get_int(f, "kv_heads", &cfg.kv_heads) ||
      get_f64(f, "rms_norm_eps", &cfg.rms_eps) || get_f64(f, "rope_theta", &cfg.rope_theta) ||
      get_int(f, "tie_word_embeddings", &tied) || tied != 1 || get_str(f, "content_hash", hex, sizeof hex)) {
    snprintf(msg, msg_size, "%s: missing or bad configuration attributes", path);
    goto out;
  }
  if (ft_config_check(&cfg, msg, msg_size)) goto out;
  if (ft_params_create(p, &cfg)) {
    snprintf(msg, msg_size, "%s: out of memory", path);
    goto out;
  }
  for (int i = 0; i < p->n_tensors; i++) {
    ft_tensor *t = &p->tensors[i];
    hid_t ds = H5Dopen2(f, t->name, H5P_DEFAULT);
    hid_t sp = ds < 0 ? -1 : H5Dget_space(ds);
    hsize_t dims[2] = {0, 0};
    int nd = sp < 0 ? -1 : H5Sget_simple_extent_dims(sp, dims, NULL);
    int bad = nd != t->ndim || dims[0] != (hsize_t)t->shape[0] || (nd == 2 && dims[1] != (hsize_t)t->shape[1]);
    if (!bad) bad = H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0;
    if (sp >= 0) H5Sclose(sp);
    if (ds >= 0) H5Dclose(ds);
    if (bad) {
      snprintf(msg, msg_size, "%s: tensor %s is missing, has the wrong shape or cannot be read", path, t->name);
      goto out;
    }
  }
  uint64_t h = ft_params_hash(p);
  snprintf(want, sizeof want, "%016" PRIx64, h);
  if (strcmp(want, hex) != 0) {
    snprintf(msg, msg_size, "%s: content hash %s does not match the weights (%s)", path, hex, want);
    goto out;
  }
  *hash_out = h;
  rc = 0;
out:
  if (f >= 0) H5Fclose(f);
  if (rc) ft_params_destroy(p);
  return rc;
}
