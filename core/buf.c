/* core/buf.c: the growable byte buffer with a size limit (core/buf.h). */
#include "core/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ftl/core.h"

void core_buf_init(core_buf *b, size_t max) {
  memset(b, 0, sizeof *b);
  b->max = max;
}

void core_buf_free(core_buf *b) {
  ftl_free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
  b->err = FTL_OK;
}

/* The failure that stays: what was held goes (the caller cannot use half a text). */
static ftl_err fail(core_buf *b, ftl_err err) {
  ftl_free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
  b->err = err;
  return err;
}

/* Room for n more bytes and the NUL. */
static ftl_err reserve(core_buf *b, size_t n) {
  if (b->err) return b->err;
  if (n > b->max - b->len) return fail(b, FTL_ERR_RANGE);
  size_t need = b->len + n + 1; /* len + n <= max < SIZE_MAX unless max is SIZE_MAX */
  if (need == 0) return fail(b, FTL_ERR_RANGE);
  if (b->p && need <= b->cap) return FTL_OK;
  /* Doubling, from 64, never past max + 1 (need is never past it). */
  size_t cap = b->cap < 64 ? 64 : b->cap;
  while (cap < need)
    cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  size_t most = b->max < SIZE_MAX ? b->max + 1 : SIZE_MAX;
  if (cap > most) cap = most;
  char *p = ftl_realloc(b->p, cap);
  if (!p) return fail(b, FTL_ERR_NOMEM);
  b->p = p;
  b->cap = cap;
  return FTL_OK;
}

ftl_err core_buf_add(core_buf *b, const void *data, size_t n) {
  ftl_err rc = reserve(b, n);
  if (rc) return rc;
  if (n) memcpy(b->p + b->len, data, n);
  b->len += n;
  b->p[b->len] = '\0';
  return FTL_OK;
}

ftl_err core_buf_addc(core_buf *b, char c) { return core_buf_add(b, &c, 1); }

ftl_err core_buf_adds(core_buf *b, const char *s) { return core_buf_add(b, s, strlen(s)); }

ftl_err core_buf_vprintf(core_buf *b, const char *fmt, va_list ap) {
  if (b->err) return b->err;
  va_list again;
  va_copy(again, ap);
  /* First into what is free (often enough), then, knowing the length, once more into room made. */
  size_t room = b->p ? b->cap - b->len : 0;
  int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
  ftl_err rc = FTL_OK;
  if (n < 0) {
    rc = fail(b, FTL_ERR_INVAL);
  } else if ((size_t)n < room) {
    if ((size_t)n > b->max - b->len) {
      rc = fail(b, FTL_ERR_RANGE);
    } else {
      b->len += (size_t)n;
    }
  } else if (!(rc = reserve(b, (size_t)n))) {
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, again);
    b->len += (size_t)n;
  }
  va_end(again);
  return rc;
}

ftl_err core_buf_printf(core_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ftl_err rc = core_buf_vprintf(b, fmt, ap);
  va_end(ap);
  return rc;
}

char *core_buf_take(core_buf *b, size_t *len_out) {
  char *p = b->p;
  if (len_out) *len_out = b->len;
  b->p = NULL;
  b->len = b->cap = 0;
  return p;
}

ftl_err core_buf_check(const core_buf *b, const char *what, ftl_diag *d) {
  if (!b->err) return FTL_OK;
  if (b->err == FTL_ERR_NOMEM) return ftl_diag_fail(d, FTL_ERR_NOMEM, "%s: out of memory", what);
  if (b->err == FTL_ERR_RANGE) return ftl_diag_fail(d, FTL_ERR_RANGE, "%s: more than %zu bytes", what, b->max);
  return ftl_diag_fail(d, b->err, "%s: cannot format text", what);
}
