/* pipeline/verdict_sign.c: Ed25519 gate keys and verdict signatures (verdict_sign.h,
 * docs/formats/verdict-signature.md), through OpenSSL's libcrypto (EVP_PKEY_ED25519; Ed25519 hashes
 * internally, so EVP_DigestSign/Verify get a NULL md).
 *
 * Why the exact bytes and not a re-serialized verdict: the package carries verdict.json byte for
 * byte, and re-serializing JSON numbers depends on the JSON library's formatting, which would make
 * a signature fail to verify on a build with another jansson. Binding the SHA-256 of the bytes is
 * both stricter (any edit breaks it) and reproducible.
 *
 * Map: message; keys (load, id, keygen); sign; verify; trust. */
#include "pipeline/verdict_sign.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "ftl/core.h"
#include "pipeline/adapter_commit.h"
#include "pipeline/package.h"
#include "pipeline/pl_util.h"

#define SIG_HEX_LEN 128
#define VERDICT_MAX_BYTES (1u << 20)

/* ---- message ------------------------------------------------------------------------------- */

static void message_of(const pl_verdict_digests *dg, char *out, size_t size) {
  snprintf(out, size,
           "ftl-verdict-signature-v1\nverdict.json %s\nadapter_config.json %s\nadapter_model.safetensors %s\n",
           dg->verdict, dg->config, dg->model);
}

/* ---- keys ---------------------------------------------------------------------------------- */

static ftl_err key_id_of(EVP_PKEY *k, char id[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  unsigned char raw[64];
  size_t n = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(k, raw, &n) != 1 || n != 32)
    return ftl_diag_fail(d, FTL_ERR_CORRUPT, "cannot get the raw Ed25519 public key");
  return pl_sha256_hex(raw, n, id);
}

/* A PEM file (bounded, regular) as a key: private when want_private, else public (a private key
 * file is accepted there too: its public half). Only Ed25519. */
static ftl_err load_key(const char *path, int want_private, EVP_PKEY **out, ftl_diag *d) {
  char *text = NULL;
  size_t size = 0;
  BIO *bio = NULL;
  EVP_PKEY *k = NULL;
  *out = NULL;
  ftl_err rc = core_fs_read_regular(path, FTL_VERDICT_KEY_MAX_BYTES, &text, &size, d);
  if (rc) return rc;
  if (!(bio = BIO_new_mem_buf(text, (int)size))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  if (want_private || strstr(text, "PRIVATE KEY"))
    k = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
  else
    k = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
  if (!k) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a PEM %s key", path, want_private ? "private" : "public");
    goto out;
  }
  if (EVP_PKEY_get_id(k) != EVP_PKEY_ED25519) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not an Ed25519 key", path);
    goto out;
  }
  *out = k;
  k = NULL;
out:
  EVP_PKEY_free(k);
  BIO_free(bio);
  ftl_free(text);
  return rc;
}

ftl_err pl_verdict_key_id_file(const char *pem_path, char key_id[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  EVP_PKEY *k = NULL;
  ftl_err rc = load_key(pem_path, 0, &k, d);
  if (!rc) rc = key_id_of(k, key_id, d);
  EVP_PKEY_free(k);
  return rc;
}

/* Writes a new file (O_EXCL|O_NOFOLLOW: an existing file or a planted link is refused), fsynced,
 * through the file seam (core/fs.h). */
static ftl_err write_new(const char *path, const void *data, size_t size, mode_t mode, ftl_diag *d) {
  return core_fs_write_new_at(AT_FDCWD, NULL, path, data, size, mode, d);
}

/* The PEM text of k (private or public) into *out (freed with ftl_free). */
static ftl_err pem_of(EVP_PKEY *k, int private_key, char **out, size_t *size, ftl_diag *d) {
  BIO *bio = BIO_new(BIO_s_mem());
  char *p = NULL;
  ftl_err rc = FTL_OK;
  *out = NULL;
  int ok = bio && (private_key ? PEM_write_bio_PrivateKey(bio, k, NULL, NULL, 0, NULL, NULL)
                               : PEM_write_bio_PUBKEY(bio, k));
  long n = ok ? BIO_get_mem_data(bio, &p) : 0;
  if (!ok || n <= 0) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "cannot encode the key as PEM");
    goto out;
  }
  if (!(*out = ftl_malloc((size_t)n))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  memcpy(*out, p, (size_t)n);
  *size = (size_t)n;
out:
  BIO_free(bio);
  return rc;
}

ftl_err pl_verdict_keygen(const char *out_prefix, char key_id[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  char priv_path[4096], pub_path[4096];
  char *priv = NULL, *pub = NULL;
  size_t priv_size = 0, pub_size = 0;
  EVP_PKEY *k = NULL;
  ftl_err rc;
  if (ftl_fmt(priv_path, sizeof priv_path, "%s.key", out_prefix) ||
      ftl_fmt(pub_path, sizeof pub_path, "%s.pub", out_prefix))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", out_prefix);
  if (!(k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519")))
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot make an Ed25519 key (libcrypto)");
  if ((rc = key_id_of(k, key_id, d)) || (rc = pem_of(k, 1, &priv, &priv_size, d)) ||
      (rc = pem_of(k, 0, &pub, &pub_size, d)))
    goto out;
  if ((rc = write_new(priv_path, priv, priv_size, 0600, d))) goto out;
  if ((rc = write_new(pub_path, pub, pub_size, 0644, d))) {
    core_fs_table.unlink(priv_path);
    goto out;
  }
out:
  if (priv) OPENSSL_cleanse(priv, priv_size);
  ftl_free(priv);
  ftl_free(pub);
  EVP_PKEY_free(k);
  return rc;
}

/* ---- sign ---------------------------------------------------------------------------------- */

/* The verdict must be a verdict: a JSON object with "version": 1 and a boolean "passed". */
static ftl_err verdict_shape(const char *bytes, size_t size, const char *what, ftl_diag *d) {
  json_error_t jerr;
  json_t *j = json_loadb(bytes, size, JSON_REJECT_DUPLICATES, &jerr);
  json_t *v = json_object_get(j, "version"), *p = json_object_get(j, "passed");
  int ok = json_is_object(j) && json_is_integer(v) && json_integer_value(v) == 1 && json_is_boolean(p);
  json_decref(j);
  if (!ok) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a verdict (a JSON object with \"version\": 1 and a boolean \"passed\")", what);
  return FTL_OK;
}

static const char *manifest_digest(const pl_package_manifest *m, const char *name) {
  for (size_t i = 0; i < m->n_files; i++)
    if (!strcmp(m->files[i].name, name)) return m->files[i].sha256;
  return NULL;
}

/* The digests of target: a package's manifest, or the files of an adapter folder. */
static ftl_err target_digests(const char *target, pl_verdict_digests *dg, int *is_package, ftl_diag *d) {
  struct stat st;
  char *man = NULL;
  size_t man_size = 0;
  pl_package_manifest *m = NULL;
  ftl_err rc = FTL_OK;
  if (lstat(target, &st)) return ftl_diag_fail(d, FTL_ERR_NOTFOUND, "%s: %s", target, strerror(errno));
  if (S_ISDIR(st.st_mode)) {
    char path[4096];
    *is_package = 0;
    if (ftl_fmt(path, sizeof path, "%s/adapter_config.json", target) ||
        (rc = pl_sha256_file(path, FTL_ADAPTER_FILE_MAX_BYTES, dg->config, NULL, d)))
      return rc ? rc : ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", target);
    if (ftl_fmt(path, sizeof path, "%s/adapter_model.safetensors", target) ||
        (rc = pl_sha256_file(path, FTL_ADAPTER_FILE_MAX_BYTES, dg->model, NULL, d)))
      return rc ? rc : ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", target);
    return FTL_OK;
  }
  if (!S_ISREG(st.st_mode)) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is neither a package file nor an adapter folder", target);
  *is_package = 1;
  if ((rc = pl_package_unpack(target, NULL, NULL, NULL, NULL, &man, &man_size, d))) goto out;
  if ((rc = pl_package_manifest_parse(man, man_size, NULL, &m, d))) goto out;
  const char *v = manifest_digest(m, FTL_PACKAGE_VERDICT), *c = manifest_digest(m, "adapter_config.json"),
             *w = manifest_digest(m, "adapter_model.safetensors");
  if (!v || !c || !w) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s lacks verdict.json, adapter_config.json or adapter_model.safetensors", target);
    goto out;
  }
  memcpy(dg->verdict, v, sizeof dg->verdict);
  memcpy(dg->config, c, sizeof dg->config);
  memcpy(dg->model, w, sizeof dg->model);
out:
  pl_package_manifest_free(m);
  ftl_free(man);
  return rc;
}

ftl_err pl_verdict_sign(const char *key_path, const char *verdict_path, const char *target, const char *out_path,
                         char key_id[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  char *verdict = NULL, *text = NULL, msg[512], id[FTL_SHA256_HEX_LEN + 1], vhex[FTL_SHA256_HEX_LEN + 1];
  char sig_hex[SIG_HEX_LEN + 1];
  unsigned char sig[64];
  size_t verdict_size = 0, sig_len = sizeof sig, text_len = 0;
  pl_verdict_digests dg;
  int is_package = 0;
  EVP_PKEY *k = NULL;
  EVP_MD_CTX *ctx = NULL;
  json_t *j = NULL;
  ftl_err rc;
  memset(&dg, 0, sizeof dg);
  if ((rc = load_key(key_path, 1, &k, d))) return rc;
  if ((rc = core_fs_read_regular(verdict_path, VERDICT_MAX_BYTES, &verdict, &verdict_size, d))) goto out;
  if ((rc = verdict_shape(verdict, verdict_size, verdict_path, d))) goto out;
  pl_sha256_hex(verdict, verdict_size, vhex);
  if ((rc = target_digests(target, &dg, &is_package, d))) goto out;
  if (is_package && strcmp(dg.verdict, vhex)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not the verdict.json inside %s (its SHA-256 differs); refused", verdict_path,
                       target);
    goto out;
  }
  memcpy(dg.verdict, vhex, sizeof dg.verdict);
  message_of(&dg, msg, sizeof msg);
  if ((rc = key_id_of(k, id, d))) goto out;
  if (!(ctx = EVP_MD_CTX_new()) || EVP_DigestSignInit(ctx, NULL, NULL, NULL, k) != 1 ||
      EVP_DigestSign(ctx, sig, &sig_len, (const unsigned char *)msg, strlen(msg)) != 1 || sig_len != 64) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "signing failed (libcrypto)");
    goto out;
  }
  core_hex(sig, sig_len, sig_hex);
  j = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s}", "format", FTL_VERDICT_SIG_FORMAT, "version",
                FTL_VERDICT_SIG_VERSION, "key_id", id, "verdict_sha256", dg.verdict, "adapter_config_sha256", dg.config,
                "adapter_model_sha256", dg.model, "signature", sig_hex);
  if (!j || !(text = pl_json_text(j, 1, &text_len))) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  if ((rc = core_fs_replace(out_path, text, text_len, CORE_TMP_UNPREDICTABLE, NULL, -1, -1, d))) goto out;
  if (key_id) memcpy(key_id, id, sizeof id);
out:
  json_decref(j);
  ftl_free(text);
  ftl_free(verdict);
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(k);
  return rc;
}

/* ---- verify -------------------------------------------------------------------------------- */

static int unhex(const char *s, unsigned char *out, size_t n) {
  if (!s || strlen(s) != 2 * n) return 0;
  for (size_t i = 0; i < 2 * n; i++) {
    char c = s[i];
    int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (v < 0) return 0;
    if (i % 2 == 0)
      out[i / 2] = (unsigned char)(v << 4);
    else
      out[i / 2] |= (unsigned char)v;
  }
  return 1;
}

ftl_err pl_verdict_verify(const char *trusted_dir, const char *sig, size_t sig_size, const pl_verdict_digests *dg,
                           char key_id[FTL_SHA256_HEX_LEN + 1], ftl_diag *d) {
  static const char *const keys[] = {"adapter_config_sha256", "adapter_model_sha256", "format", "key_id",
                                     "signature", "verdict_sha256", "version"};
  json_error_t jerr;
  char path[4096], file_id[FTL_SHA256_HEX_LEN + 1], msg[512];
  unsigned char raw[64];
  EVP_PKEY *k = NULL;
  EVP_MD_CTX *ctx = NULL;
  ftl_err rc = FTL_OK;
  if (sig_size > FTL_VERDICT_SIG_MAX_BYTES) return ftl_diag_fail(d, FTL_ERR_CORRUPT, "the verdict signature is too large");
  json_t *j = json_loadb(sig, sig_size, JSON_REJECT_DUPLICATES, &jerr);
  const char *fmt = json_string_value(json_object_get(j, "format"));
  const char *id = json_string_value(json_object_get(j, "key_id"));
  const char *s = json_string_value(json_object_get(j, "signature"));
  const char *v = json_string_value(json_object_get(j, "verdict_sha256"));
  const char *c = json_string_value(json_object_get(j, "adapter_config_sha256"));
  const char *w = json_string_value(json_object_get(j, "adapter_model_sha256"));
  json_t *ver = json_object_get(j, "version");
  int shape = json_is_object(j) && json_object_size(j) == sizeof keys / sizeof keys[0];
  for (size_t i = 0; shape && i < sizeof keys / sizeof keys[0]; i++)
    shape = json_object_get(j, keys[i]) != NULL;
  if (!shape || !fmt || strcmp(fmt, FTL_VERDICT_SIG_FORMAT) || !json_is_integer(ver) ||
      json_integer_value(ver) != FTL_VERDICT_SIG_VERSION || !pl_sha256_is_hex(id) || !unhex(s, raw, 64) ||
      !pl_sha256_is_hex(v) || !pl_sha256_is_hex(c) || !pl_sha256_is_hex(w)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "not a verdict signature of format %s version %d", FTL_VERDICT_SIG_FORMAT,
                       FTL_VERDICT_SIG_VERSION);
    goto out;
  }
  if (strcmp(v, dg->verdict) || strcmp(c, dg->config) || strcmp(w, dg->model)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT,
                       "the signature is for another %s (signed %.12s, the package has %.12s); refused",
                       strcmp(v, dg->verdict) ? "verdict.json" : strcmp(c, dg->config) ? "adapter_config.json"
                                                                                        : "adapter_model.safetensors",
                       strcmp(v, dg->verdict) ? v : strcmp(c, dg->config) ? c : w,
                       strcmp(v, dg->verdict) ? dg->verdict : strcmp(c, dg->config) ? dg->config : dg->model);
    goto out;
  }
  if (ftl_fmt(path, sizeof path, "%s/%s.pub", trusted_dir, id)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", trusted_dir);
    goto out;
  }
  rc = load_key(path, 0, &k, d);
  if (rc == FTL_ERR_NOTFOUND) {
    rc = ftl_diag_fail(d, FTL_ERR_STATE, "the verdict is signed by key %.16s…, which this registry does not trust (%s)",
                       id, path);
    goto out;
  }
  if (rc) goto out;
  if ((rc = key_id_of(k, file_id, d))) goto out;
  if (strcmp(file_id, id)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s holds the key %.16s…, not the key its name says; refused", path, file_id);
    goto out;
  }
  message_of(dg, msg, sizeof msg);
  if (!(ctx = EVP_MD_CTX_new()) || EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k) != 1) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "cannot set up verification (libcrypto)");
    goto out;
  }
  if (EVP_DigestVerify(ctx, raw, 64, (const unsigned char *)msg, strlen(msg)) != 1) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "the verdict signature does not verify with key %.16s…; refused", id);
    goto out;
  }
  if (key_id) memcpy(key_id, id, FTL_SHA256_HEX_LEN + 1);
out:
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(k);
  json_decref(j);
  return rc;
}

/* ---- trust --------------------------------------------------------------------------------- */

ftl_err pl_verdict_trust(const char *registry_root, const char *pub_path, char key_id[FTL_SHA256_HEX_LEN + 1],
                          ftl_diag *d) {
  char dir[4096], path[4096];
  char *pem = NULL;
  size_t pem_size = 0;
  EVP_PKEY *k = NULL;
  ftl_err rc = load_key(pub_path, 0, &k, d);
  if (rc) return rc;
  if ((rc = key_id_of(k, key_id, d)) || (rc = pem_of(k, 0, &pem, &pem_size, d))) goto out;
  if (ftl_fmt(dir, sizeof dir, "%s/%s", registry_root, FTL_REGISTRY_TRUSTED_KEYS) ||
      ftl_fmt(path, sizeof path, "%s/%s.pub", dir, key_id)) {
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", registry_root);
    goto out;
  }
  if ((rc = ftl_mkdir_p(dir, d))) goto out;
  /* Only the public half is stored, whatever file was given. */
  rc = core_fs_replace(path, pem, pem_size, CORE_TMP_UNPREDICTABLE, NULL, -1, -1, d);
out:
  ftl_free(pem);
  EVP_PKEY_free(k);
  return rc;
}
