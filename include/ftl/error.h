/* ftl/error.h: the one error type of ftl and its string table.
 *
 * Every fallible function in ftl returns an ftl_err. FTL_OK is 0 and codes are never renumbered:
 * new ones are added at the end of the table. Detail (errno text, the MPI error string, the file
 * or field at fault) is kept on the handle the call was made on, or in an ftl_diag the caller
 * passes, never only in a log line. */
#ifndef FTL_ERROR_H
#define FTL_ERROR_H

#include "ftl/export.h"

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, number, message). The single source of the enum and of ftl_strerror(). */
#define FTL_ERROR_MAP(X)                                                    \
  X(OK, 0, "success")                                                       \
  X(NOMEM, 1, "out of memory")                                              \
  X(INVAL, 2, "invalid argument")                                           \
  X(IO, 3, "input/output error")                                            \
  X(SPEC, 4, "invalid job spec")                                            \
  X(NOTFOUND, 5, "not found")                                               \
  X(TIMEOUT, 6, "deadline passed")                                          \
  X(MPI, 7, "MPI error")                                                    \
  X(NCCL, 8, "NCCL error")                                                  \
  X(CUDA, 9, "CUDA error")                                                  \
  X(RDZV, 10, "rendezvous failed")                                          \
  X(PROTO, 11, "protocol error")                                            \
  X(LAUNCH, 12, "launch failed")                                            \
  X(STATE, 13, "call not valid in this state")                              \
  X(HDF5, 14, "HDF5 error")                                                 \
  X(CORRUPT, 15, "data failed verification")                                \
  X(NOSPC, 16, "no space left on device")                                   \
  X(UNSUPPORTED, 17, "not supported")                                       \
  X(INTERRUPTED, 18, "interrupted by a signal")                             \
  X(GANG, 19, "gang does not match the launch")                             \
  X(RANGE, 20, "value out of range")                                        \
  X(FENCED, 21, "superseded by a newer attempt")

typedef enum ftl_err {
#define FTL_ERR_ENUM_(name, num, msg) FTL_ERR_##name = num,
  FTL_ERROR_MAP(FTL_ERR_ENUM_)
#undef FTL_ERR_ENUM_
} ftl_err;

#define FTL_OK FTL_ERR_OK

/* Static text for a code; never NULL, "unknown error" for a number not in the table. */
FTL_API const char *ftl_strerror(ftl_err err);

/* The symbolic name of a code ("FTL_ERR_TIMEOUT"), for logs and JSON records. */
FTL_API const char *ftl_err_name(ftl_err err);

/* Detail for a failed call that has no handle of its own (the job-spec parser, the CLI).
 * The caller owns it; the callee writes one sentence that names the file, field or rank. */
typedef struct ftl_diag {
  char msg[1024];
} ftl_diag;

/* Writes the detail (printf-style) and returns err, so a callee can `return ftl_diag_fail(...)`.
 * d may be NULL, in which case only err is returned. */
FTL_API ftl_err ftl_diag_fail(ftl_diag *d, ftl_err err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
FTL_API ftl_err ftl_diag_vfail(ftl_diag *d, ftl_err err, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* Puts the context (printf-style) and ": " before the detail a callee wrote, e.g. the file a
 * parser was reading, and returns err. d may be NULL. */
FTL_API ftl_err ftl_diag_prefix(ftl_diag *d, ftl_err err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
