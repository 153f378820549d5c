/* ftl/core.h: what every part of ftl shares: clocks, the allocation hook, logging, and small
 * file-system helpers whose durability rules (fsync of the file, then of its folder) the
 * checkpoint and the run directory both depend on.
 *
 * Not here: error codes (ftl/error.h), anything that talks to MPI or to the launcher. */
#ifndef FTL_CORE_H
#define FTL_CORE_H

#include "ftl/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- clocks ------------------------------------------------------------------------------ */

/* Monotonic time in nanoseconds / milliseconds: for durations and deadlines. Thread-safe. */
FTL_API int64_t ftl_clock_ns(void);
FTL_API int64_t ftl_clock_ms(void);
/* Wall-clock time in microseconds since the Unix epoch: for records read by people and by
 * other hosts. Thread-safe. */
FTL_API int64_t ftl_wall_us(void);

/* A deadline is an absolute monotonic time in ms; FTL_NO_DEADLINE never passes. */
#define FTL_NO_DEADLINE INT64_MAX
FTL_API int64_t ftl_deadline_after_ms(int64_t timeout_ms);
/* Milliseconds left (0 when passed; INT32_MAX-capped so it fits poll()). */
FTL_API int ftl_deadline_left_ms(int64_t deadline_ms);

/* ---- allocation hook --------------------------------------------------------------------- */

/* All heap memory of ftl goes through these, so a test can fail the Nth allocation.
 * ftl_free accepts NULL. Thread-safe. jansson's allocations go through them too: loading ftl
 * (its shared library, or any program linking the static one) sets json_set_alloc_funcs(ftl_malloc,
 * ftl_free) once, before main. jansson's allocator is global to the process: a program that sets
 * its own must do so before it or ftl makes any JSON value. */
FTL_API void *ftl_malloc(size_t size);
FTL_API void *ftl_calloc(size_t count, size_t size);
FTL_API void *ftl_realloc(void *ptr, size_t size);
FTL_API void ftl_free(void *ptr);
FTL_API char *ftl_strdup(const char *s);

/* Test hook: the nth allocation from now (1 = the next one) returns NULL; 0 turns it off. */
FTL_API void ftl_alloc_fail_nth(long nth);

/* ---- logging ----------------------------------------------------------------------------- */

typedef enum ftl_log_level {
  FTL_LOG_ERROR = 0,
  FTL_LOG_WARN = 1,
  FTL_LOG_INFO = 2,
  FTL_LOG_DEBUG = 3,
} ftl_log_level;

/* The current level; read without a lock by FTL_LOG (a stale read only changes one line). */
FTL_API extern int ftl_log_threshold;

/* Set once at start-up from FTL_LOG_LEVEL (error|warn|info|debug) if present. */
FTL_API void ftl_log_init_from_env(void);
FTL_API void ftl_log_set_level(ftl_log_level level);
/* Who this process is, printed on every line: rank/world (-1 when not a rank) and host. */
FTL_API void ftl_log_set_identity(int rank, int world_size);

FTL_API void ftl_log_write(ftl_log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Checks the level before evaluating the arguments. */
#define FTL_LOG(level, module, ...)                                         \
  do {                                                                      \
    if ((int)(level) <= ftl_log_threshold) ftl_log_write(level, module, __VA_ARGS__); \
  } while (0)

/* ---- strings ----------------------------------------------------------------------------- */

/* snprintf that reports truncation as FTL_ERR_RANGE instead of silently cutting. */
FTL_API ftl_err ftl_fmt(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Parses a whole decimal integer in [min, max]; FTL_ERR_INVAL or FTL_ERR_RANGE otherwise. */
FTL_API ftl_err ftl_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

/* The short host name (up to the first dot); never fails, "unknown-host" at worst. */
FTL_API const char *ftl_hostname(void);

/* ---- files ------------------------------------------------------------------------------- */

/* mkdir -p with mode 0755; existing folders are fine. Detail in d. */
FTL_API ftl_err ftl_mkdir_p(const char *path, ftl_diag *d);

/* fsync of a folder, so a rename or create inside it is durable. */
FTL_API ftl_err ftl_fsync_dir(const char *dir_path, ftl_diag *d);

/* Writes bytes to path durably and atomically: path.tmp.<pid>, write, fsync, rename,
 * fsync(folder). A reader sees the old file or the new one, never a part. Goes through ftl's file
 * seam (core/fs.c), so the tests' fault injection reaches it. */
FTL_API ftl_err ftl_write_file_atomic(const char *path, const void *data, size_t size, ftl_diag *d);

/* Reads a whole file (NUL-terminated for convenience; *size_out excludes the NUL).
 * The caller frees *data_out with ftl_free. max_bytes guards against reading a huge file. */
FTL_API ftl_err ftl_read_file(const char *path, size_t max_bytes, char **data_out, size_t *size_out,
                      ftl_diag *d);

/* The same from an open descriptor (read to its end; not closed), for callers that must hold a
 * lock on the file while they read it. `what` names the file in messages. */
FTL_API ftl_err ftl_read_fd(int fd, const char *what, size_t max_bytes, char **data_out, size_t *size_out, ftl_diag *d);

/* ---- random numbers ------------------------------------------------------------------------ */

/* xoshiro256** seeded through splitmix64: fast, reproducible from a seed on every platform, and
 * small enough to checkpoint (its state is the four words). Not for cryptography. */
typedef struct ftl_rng {
  uint64_t s[4];
} ftl_rng;

FTL_API void ftl_rng_seed(ftl_rng *r, uint64_t seed);
FTL_API uint64_t ftl_rng_next(ftl_rng *r);

#ifdef __cplusplus
}
#endif
#endif
