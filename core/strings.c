/* core/strings.c: bounded formatting, integer parsing and the host name (ftl/core.h): the string
 * helpers every module uses, the file seam (core/fs.c) included. Nothing here touches a file. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftl/core.h"

ftl_err ftl_fmt(char *buf, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, size, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= size) return FTL_ERR_RANGE;
  return FTL_OK;
}

ftl_err ftl_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out) {
  if (!s || !*s) return FTL_ERR_INVAL;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end != '\0') return FTL_ERR_INVAL;
  if (errno == ERANGE || v < min || v > max) return FTL_ERR_RANGE;
  *out = (int64_t)v;
  return FTL_OK;
}

const char *ftl_hostname(void) {
  /* Computed once; a race between two first callers writes the same bytes. */
  static char name[256];
  if (!name[0]) {
    char buf[256];
    if (gethostname(buf, sizeof buf) != 0) snprintf(buf, sizeof buf, "unknown-host");
    buf[sizeof buf - 1] = '\0';
    char *dot = strchr(buf, '.');
    if (dot) *dot = '\0';
    memcpy(name, buf, sizeof name);
  }
  return name;
}
