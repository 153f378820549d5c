/* core/buf.h: a growable byte buffer with a size limit, the one text and byte builder of ftl
 * (the design of curl's dynbuf). Made with the most bytes it may ever hold; every add either
 * appends all its bytes or fails, and a failure (past the limit, or out of memory) frees what the
 * buffer held and stays: later adds do nothing and return the same error, so a builder can add
 * freely and check once at the end.
 *
 * The bytes are always followed by a NUL (not counted in len), so text can be used as a string.
 * Not thread-safe: one owner at a time. Memory comes from ftl's allocation hook. */
#ifndef FTL_CORE_BUF_H
#define FTL_CORE_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "ftl/error.h"

typedef struct core_buf {
  char *p;    /* the bytes and their NUL; NULL until the first add, and after a failure */
  size_t len; /* bytes held */
  size_t cap; /* bytes allocated (len + 1 at least once p is set) */
  size_t max; /* the most bytes it may hold */
  ftl_err err; /* the first failure (FTL_ERR_RANGE past max, FTL_ERR_NOMEM), or FTL_OK */
} core_buf;

/* An empty buffer that will hold at most max bytes. Allocates nothing. */
void core_buf_init(core_buf *b, size_t max);
/* Appends n bytes: FTL_OK, or the buffer's error (see above). */
ftl_err core_buf_add(core_buf *b, const void *data, size_t n);
ftl_err core_buf_addc(core_buf *b, char c);
ftl_err core_buf_adds(core_buf *b, const char *s);
ftl_err core_buf_printf(core_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ftl_err core_buf_vprintf(core_buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Hands the bytes over (NUL-terminated, freed with ftl_free; NULL if nothing was added) and
 * leaves the buffer empty, with its limit. *len_out (if not NULL) gets their length. */
char *core_buf_take(core_buf *b, size_t *len_out);
/* Frees the bytes; the buffer is empty again, with its limit and no error. */
void core_buf_free(core_buf *b);
/* FTL_OK, or the buffer's error with "<what>: out of memory" or "<what>: more than N bytes" in d. */
ftl_err core_buf_check(const core_buf *b, const char *what, ftl_diag *d);

#endif
