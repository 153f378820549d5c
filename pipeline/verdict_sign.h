/* pipeline/verdict_sign.h: gate keys and verdict signatures (docs/formats/verdict-signature.md).
 *
 * A gate that judged an adapter signs, with an Ed25519 key (OpenSSL libcrypto), a message that
 * binds the exact bytes of its verdict.json to the exact adapter it judged:
 *
 *   "ftl-verdict-signature-v1\n"
 *   "verdict.json <sha256 hex>\n"
 *   "adapter_config.json <sha256 hex>\n"
 *   "adapter_model.safetensors <sha256 hex>\n"
 *
 * so a signature cannot be moved to another adapter, another config or an edited verdict. The
 * signature file is JSON (sorted keys): format, version, key_id, the three digests, signature (128
 * hex digits). A key id is the SHA-256 of the raw 32-byte public key. Keys are PEM files: KEY.key
 * (PKCS#8 private, mode 0600) and KEY.pub (SubjectPublicKeyInfo). A registry trusts the public keys
 * in REGISTRY/keys/trusted/<key id>.pub.
 *
 * Not here: whether a verdict passed (the registry checks that too, signed or not), the
 * registry's use of the result (pipeline/registry_txn.c). Thread-safety: reentrant. */
#ifndef FTL_PIPELINE_VERDICT_SIGN_H
#define FTL_PIPELINE_VERDICT_SIGN_H

#include <stddef.h>

#include "ftl/error.h"
#include "pipeline/sha256.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FTL_VERDICT_SIG_FORMAT "ftl-verdict-signature"
#define FTL_VERDICT_SIG_VERSION 1
#define FTL_VERDICT_SIG_MAX_BYTES 4096
#define FTL_VERDICT_KEY_MAX_BYTES 4096
/* The folder of a registry that holds its trusted gate keys, relative to the registry root. */
#define FTL_REGISTRY_TRUSTED_KEYS "keys/trusted"

/* The three digests a signature binds (each 64 lowercase hex digits). */
typedef struct pl_verdict_digests {
  char verdict[FTL_SHA256_HEX_LEN + 1];
  char config[FTL_SHA256_HEX_LEN + 1];
  char model[FTL_SHA256_HEX_LEN + 1];
} pl_verdict_digests;

/* Makes a key pair: out_prefix.key (private, 0600) and out_prefix.pub; neither may exist. The key
 * id into key_id. */
ftl_err pl_verdict_keygen(const char *out_prefix, char key_id[FTL_SHA256_HEX_LEN + 1], ftl_diag *d);

/* The key id of a public (or private) key PEM file. */
ftl_err pl_verdict_key_id_file(const char *pem_path, char key_id[FTL_SHA256_HEX_LEN + 1], ftl_diag *d);

/* Signs verdict_path for target: a package (its manifest's digests; verdict_path must be the
 * package's verdict.json byte for byte) or an adapter folder (adapter_config.json and
 * adapter_model.safetensors hashed there). The verdict must be a verdict (version 1, boolean
 * passed). Writes the signature to out_path atomically; the key id into key_id (may be NULL). */
ftl_err pl_verdict_sign(const char *key_path, const char *verdict_path, const char *target, const char *out_path,
                         char key_id[FTL_SHA256_HEX_LEN + 1], ftl_diag *d);

/* Verifies signature bytes against the digests and a key of trusted_dir (<key id>.pub, whose own
 * key id must match its name). FTL_OK and the key id; FTL_ERR_CORRUPT when the signature is
 * malformed, binds other digests or does not verify; FTL_ERR_STATE when its key is not trusted. */
ftl_err pl_verdict_verify(const char *trusted_dir, const char *sig, size_t sig_size, const pl_verdict_digests *dg,
                           char key_id[FTL_SHA256_HEX_LEN + 1], ftl_diag *d);

/* Adds a public key to registry_root/keys/trusted/ under its key id (a no-op when there). */
ftl_err pl_verdict_trust(const char *registry_root, const char *pub_path, char key_id[FTL_SHA256_HEX_LEN + 1],
                          ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
