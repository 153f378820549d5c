/* core/error.c: the string table behind ftl_err (see include/ftl/error.h). */
#include "ftl/error.h"

#include <stdio.h>

const char *ftl_strerror(ftl_err err) {
  switch (err) {
#define FTL_ERR_STR_(name, num, msg) \
  case FTL_ERR_##name:               \
    return msg;
    FTL_ERROR_MAP(FTL_ERR_STR_)
#undef FTL_ERR_STR_
  }
  return "unknown error";
}

const char *ftl_err_name(ftl_err err) {
  switch (err) {
#define FTL_ERR_NAME_(name, num, msg) \
  case FTL_ERR_##name:                \
    return "FTL_ERR_" #name;
    FTL_ERROR_MAP(FTL_ERR_NAME_)
#undef FTL_ERR_NAME_
  }
  return "FTL_ERR_UNKNOWN";
}

ftl_err ftl_diag_vfail(ftl_diag *d, ftl_err err, const char *fmt, va_list ap) {
  if (d) vsnprintf(d->msg, sizeof d->msg, fmt, ap);
  return err;
}

ftl_err ftl_diag_prefix(ftl_diag *d, ftl_err err, const char *fmt, ...) {
  if (!d) return err;
  char context[sizeof d->msg], inner[sizeof d->msg];
  snprintf(inner, sizeof inner, "%s", d->msg);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(context, sizeof context, fmt, ap);
  va_end(ap);
  return ftl_diag_fail(d, err, "%s: %s", context, inner);
}

ftl_err ftl_diag_fail(ftl_diag *d, ftl_err err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ftl_diag_vfail(d, err, fmt, ap);
  va_end(ap);
  return err;
}
