/* pipeline/sha256.h: SHA-256 through OpenSSL's libcrypto (EVP), as lowercase hex.
 *
 * The pipeline's digests (the adapter's commit marker, the package manifest, the registry's
 * version ids) are all SHA-256 of bytes. Internal to ftl. Thread-safe. */
#ifndef FTL_PIPELINE_SHA256_H
#define FTL_PIPELINE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FTL_SHA256_HEX_LEN 64

/* Incremental digest. */
typedef struct pl_sha256 pl_sha256;
ftl_err pl_sha256_begin(pl_sha256 **out);
ftl_err pl_sha256_update(pl_sha256 *h, const void *data, size_t size);
/* Writes 64 hex digits and a NUL into hex[65]; destroys h. */
ftl_err pl_sha256_end(pl_sha256 *h, char hex[FTL_SHA256_HEX_LEN + 1]);
/* Destroys h without a digest; accepts NULL. */
void pl_sha256_abort(pl_sha256 *h);

/* One shot over a buffer. */
ftl_err pl_sha256_hex(const void *data, size_t size, char hex[FTL_SHA256_HEX_LEN + 1]);

/* Of a whole file from outside, opened as core's one reader does (core_fs_open_regular: no link,
 * a regular file of at most max_bytes) and hashed to exactly its recorded size (a file that grows
 * meanwhile is not read further); its size into *size_out when not NULL. FTL_ERR_NOTFOUND when
 * missing, FTL_ERR_CORRUPT naming the file when refused. */
ftl_err pl_sha256_file(const char *path, uint64_t max_bytes, char hex[FTL_SHA256_HEX_LEN + 1], uint64_t *size_out,
                       ftl_diag *d);

/* True when s is exactly 64 lowercase hex digits. */
int pl_sha256_is_hex(const char *s);

#ifdef __cplusplus
}
#endif
#endif
