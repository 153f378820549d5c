/* core/jsonl.h: the one JSON-lines appender and reader of ftl, used by the event log
 * (events.jsonl), the run's failure ledger (failures.jsonl), the fleet ledger and the registry's
 * audit log.
 *
 * A record is one JSON object on one line, written with a single write() to an O_APPEND descriptor
 * so concurrent appenders on a local file system never interleave. With `lock` set, the writer
 * also holds an exclusive flock (taken with a deadline) for the append, which covers file systems
 * where O_APPEND is not atomic and lets the writer repair a last line torn by a writer that died:
 * a last byte other than '\n' is ended with a '\n' first, so the torn record is one bad line and
 * not two (core_jsonl_line_torn recognises it). Under the lock a failed append (ENOSPC halfway, a
 * torn write the file system reported whole) is also undone: the file is truncated back to its
 * size before the record, so earlier records are never followed by a partial one. Readers that
 * want whole lines take the shared lock (core_jsonl_read).
 *
 * Everything goes through the file seam (core/fs.h): FTL_FAULT reaches every ledger and log, and
 * the crash point `jsonl.append` kills the writer after a record's write, before its fsync.
 *
 * Every record ftl writes carries "version": FTL_RECORD_VERSION unless its format page says
 * otherwise; a reader refuses a newer major version by name.
 *
 * Internal to ftl (not installed). Thread-safety: a handle may be written from several threads
 * (each record is one write()); open/close are not thread-safe on the same handle. */
#ifndef FTL_CORE_JSONL_H
#define FTL_CORE_JSONL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version written into records (events, ledgers, registry audit lines). */
#define FTL_RECORD_VERSION 1

typedef struct core_jsonl_opts {
  bool lock;                /* hold an exclusive flock around each append (shared files) */
  int64_t lock_timeout_ms;  /* deadline for taking the lock; FTL_ERR_TIMEOUT when it passes */
  bool fsync;               /* fsync after each record (ledgers: the record must survive a crash) */
} core_jsonl_opts;

/* An open log, for writers that append many records (the event log). */
typedef struct core_jsonl core_jsonl;

ftl_err core_jsonl_open(const char *path, const core_jsonl_opts *opts, core_jsonl **out, ftl_diag *d);
/* Appends rec (borrowed) as one line. */
ftl_err core_jsonl_write(core_jsonl *log, const json_t *rec, ftl_diag *d);
/* fsyncs and closes; accepts NULL. */
void core_jsonl_close(core_jsonl *log);

/* One-shot: open, append rec (borrowed) as one line, close. */
ftl_err core_jsonl_append(const char *path, const json_t *rec, const core_jsonl_opts *opts, ftl_diag *d);

/* Reads the whole file under a shared flock taken within lock_timeout_ms (NUL-terminated; the
 * caller frees *data_out with ftl_free). FTL_ERR_NOTFOUND when the file does not exist. */
ftl_err core_jsonl_read(const char *path, size_t max_bytes, int64_t lock_timeout_ms, char **data_out,
                       size_t *size_out, ftl_diag *d);

/* Calls fn once per non-empty line (without its '\n'); stops at the first non-OK return and returns
 * it. Lines longer than max_line_bytes are passed as they are; the callback decides. */
typedef ftl_err (*ftl_jsonl_line_fn)(const char *line, size_t len, size_t line_no, void *ctx);
ftl_err core_jsonl_each_line(const char *data, size_t size, ftl_jsonl_line_fn fn, void *ctx);

/* True when line (without its '\n') is a record cut short: a proper prefix of a JSON object, what a
 * writer that died in the middle of an append leaves behind (ended by the next locked append's
 * '\n'). Such a line was never a record, so readers may pass over it; anything else that does not
 * parse is damage, not a torn append. */
bool core_jsonl_line_torn(const char *line, size_t len);

/* The version check every reader of a versioned JSON document does: rec's "version" must be an
 * integer equal to want; otherwise FTL_ERR_CORRUPT with "<what>'version' is missing or not an
 * integer" or "<what>version N is not supported (this ftl reads M)" (what: a prefix such as
 * "verdict: ", or ""). */
ftl_err core_jsonl_check_version(const json_t *rec, int want, const char *what, ftl_diag *d);

/* The start of every reader of a whole versioned JSON document (the snapshot, the verdict, the
 * gate lock): at most max_bytes, JSON with no duplicate key, an object, and (want >= 0) of version
 * want as core_jsonl_check_version checks it. *out: a new reference. FTL_ERR_CORRUPT with
 * "<what>larger than N bytes", "<what>not JSON: ... (line L)" or "<what>not a JSON object". */
ftl_err core_jsonl_load_object(const char *data, size_t size, size_t max_bytes, int want, const char *what,
                               json_t **out, ftl_diag *d);

/* A document reader's refusal: FTL_ERR_CORRUPT with the message (printf-style) into the reader's
 * `d` and `rc`, then to its `out:` cleanup. The readers name it BAD (#define BAD CORE_JSON_BAD). */
#define CORE_JSON_BAD(...)                                                                                             \
  do {                                                                                                                 \
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, __VA_ARGS__);                                                               \
    goto out;                                                                                                          \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif
