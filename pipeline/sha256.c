/* pipeline/sha256.c: SHA-256 through OpenSSL's EVP interface (sha256.h). */
#include "pipeline/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"
#include "ftl/core.h"

struct pl_sha256 {
  EVP_MD_CTX *ctx;
};

ftl_err pl_sha256_begin(pl_sha256 **out) {
  *out = NULL;
  pl_sha256 *h = ftl_calloc(1, sizeof *h);
  if (!h) return FTL_ERR_NOMEM;
  h->ctx = EVP_MD_CTX_new();
  if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
    pl_sha256_abort(h);
    return FTL_ERR_NOMEM;
  }
  *out = h;
  return FTL_OK;
}

ftl_err pl_sha256_update(pl_sha256 *h, const void *data, size_t size) {
  if (size == 0) return FTL_OK;
  return EVP_DigestUpdate(h->ctx, data, size) == 1 ? FTL_OK : FTL_ERR_IO;
}

ftl_err pl_sha256_end(pl_sha256 *h, char hex[FTL_SHA256_HEX_LEN + 1]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  ftl_err rc = EVP_DigestFinal_ex(h->ctx, md, &n) == 1 && n == 32 ? FTL_OK : FTL_ERR_IO;
  core_hex(md, 32, hex);
  pl_sha256_abort(h);
  return rc;
}

void pl_sha256_abort(pl_sha256 *h) {
  if (!h) return;
  EVP_MD_CTX_free(h->ctx);
  ftl_free(h);
}

ftl_err pl_sha256_hex(const void *data, size_t size, char hex[FTL_SHA256_HEX_LEN + 1]) {
  pl_sha256 *h;
  ftl_err rc = pl_sha256_begin(&h);
  if (rc) return rc;
  rc = pl_sha256_update(h, data, size);
  if (rc) {
    pl_sha256_abort(h);
    return rc;
  }
  return pl_sha256_end(h, hex);
}

ftl_err pl_sha256_file(const char *path, uint64_t max_bytes, char hex[FTL_SHA256_HEX_LEN + 1], uint64_t *size_out,
                       ftl_diag *d) {
  static __thread unsigned char buf[1 << 16];
  int fd = -1;
  uint64_t size = 0, at = 0;
  pl_sha256 *h = NULL;
  ftl_err rc = core_fs_open_regular(path, max_bytes, &fd, &size, d);
  if (rc) return rc;
  if ((rc = pl_sha256_begin(&h))) {
    rc = ftl_diag_fail(d, rc, "out of memory hashing %s", path);
    goto out;
  }
  /* Exactly the recorded size: a file that grows while it is read is not read further. */
  while (at < size) {
    size_t n = size - at < sizeof buf ? (size_t)(size - at) : sizeof buf;
    if ((rc = core_fs_pread_all(fd, buf, n, at))) {
      rc = ftl_diag_fail(d, rc, "cannot read %s", path);
      goto out;
    }
    pl_sha256_update(h, buf, n);
    at += n;
  }
  rc = pl_sha256_end(h, hex);
  h = NULL;
  if (size_out) *size_out = size;
out:
  pl_sha256_abort(h);
  close(fd);
  return rc;
}

int pl_sha256_is_hex(const char *s) {
  if (!s) return 0;
  size_t i = 0;
  for (; s[i]; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return i == FTL_SHA256_HEX_LEN;
}
