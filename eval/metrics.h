/* eval/metrics.h: the metrics file an evaluator writes for the gate (docs/formats/metrics.md):
 *
 *   {"version": 1, "metrics": {"exact_match": 0.998, "loss": 0.046}}
 *
 * The parser is strict about the shape (an object, an integer version this ftl reads, a "metrics"
 * object, no duplicate keys) and tolerant about the values: a metric may be any JSON value, and
 * the non-standard literals NaN, Infinity and -Infinity that Python's json module writes are
 * accepted, so that a non-finite result fails the gate (exit 1) instead of being an unreadable
 * file (exit 2); so is a number too large for a double (1e309 reads as Infinity). Other top-level
 * fields are ignored (evaluators may add context). ev_metrics_load reads only a regular file of
 * at most FTL_METRICS_MAX_BYTES, opened without blocking or following a link (a FIFO is refused).
 *
 * Not here: the comparison with the threshold (eval/gate.c). Thread-safe (no shared state). */
#ifndef FTL_EVAL_METRICS_H
#define FTL_EVAL_METRICS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FTL_METRICS_VERSION 1
#define FTL_METRICS_MAX_BYTES (1u << 20)
#define FTL_METRICS_MAX_NAME 128

/* A parsed metrics file: the "metrics" object (owned; values as parsed, non-finite literals
 * turned into the strings "NaN", "Infinity", "-Infinity"). Destroyed by ev_metrics_destroy. */
typedef struct ev_metrics ev_metrics;

/* Parses bytes. FTL_ERR_CORRUPT with the reason (and line) for a file of the wrong shape. */
ftl_err ev_metrics_parse(const char *data, size_t size, ev_metrics **out, ftl_diag *d);
/* Reads and parses a file; FTL_ERR_NOTFOUND when it does not exist. */
ftl_err ev_metrics_load(const char *path, ev_metrics **out, ftl_diag *d);
void ev_metrics_destroy(ev_metrics *m);

typedef enum ev_metric_state {
  FTL_METRIC_OK = 0,        /* a finite number */
  FTL_METRIC_MISSING = 1,   /* no such name */
  FTL_METRIC_NONFINITE = 2, /* NaN, Infinity or -Infinity */
  FTL_METRIC_NOT_NUMBER = 3 /* a string, null, an object... */
} ev_metric_state;

/* Looks a metric up; *value is set only for FTL_METRIC_OK. */
ev_metric_state ev_metrics_get(const ev_metrics *m, const char *name, double *value);
/* The names, for messages ("exact_match, loss"); borrowed view of the object. */
const json_t *ev_metrics_object(const ev_metrics *m);
const char *ev_metric_state_text(ev_metric_state s);

/* Writes a metrics file atomically (used by evaluators written in C and by tests). */
ftl_err ev_metrics_write(const char *path, const json_t *metrics, ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
