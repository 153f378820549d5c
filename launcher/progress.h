/* launcher/progress.h: `ftl run`'s live progress: one status line redrawn in place on a terminal,
 * plain periodic lines in a batch log (--progress auto|tty|lines|off). It is drawn from the
 * run's own event stream (an observer of launcher/events.c), so it says what events.jsonl says;
 * the numbers are rank 0's progress reports (ftl_progress_report), drawn once for the gang.
 *
 * Also here: ln_progress_record, the hook that turns rank 0's progress report on the wire into a
 * `progress` event (supervise.c calls it).
 *
 * Not here: the event arithmetic (runview.c), the metrics textfile (prom.c). */
#ifndef FTL_LAUNCHER_PROGRESS_H
#define FTL_LAUNCHER_PROGRESS_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "ftl/error.h"
#include "launcher/events.h"

typedef enum ln_progress_mode {
  FTL_PROGRESS_AUTO = 0, /* tty when stderr is a terminal and TERM is set and not "dumb", else lines */
  FTL_PROGRESS_TTY,      /* one line, redrawn in place ("\r" + clear to the end of the line) */
  FTL_PROGRESS_LINES,    /* a plain line every interval (and at the last step) */
  FTL_PROGRESS_OFF,
} ln_progress_mode;

/* "auto", "tty", "lines", "off"; FTL_ERR_INVAL otherwise. */
ftl_err ln_progress_parse_mode(const char *text, ln_progress_mode *out);

typedef struct ln_progress ln_progress;

/* out: where to draw (stderr; borrowed). isatty_out/term: what AUTO decides from (the caller
 * passes isatty(2) and getenv("TERM"), so tests can choose). line_interval_ms: the lines mode's
 * period. */
ftl_err ln_progress_create(ln_progress_mode mode, FILE *out, int isatty_out, const char *term,
                            int64_t line_interval_ms, ln_progress **p_out, ftl_diag *d);

/* The resolved mode (never AUTO). */
ln_progress_mode ln_progress_get_mode(const ln_progress *p);

/* An ftl_events_observer: folds the event and redraws when it is news. */
void ln_progress_observe(void *user, const json_t *line);

/* Formats the status line for the view so far into buf (no newline): the pure part, tested. */
struct ln_runview;
void ln_progress_format(const struct ln_runview *rv, int64_t now_us, char *buf, size_t size);

/* Clears the status line on a terminal (before ftl's final lines). Accepts NULL. */
void ln_progress_finish(ln_progress *p);
void ln_progress_destroy(ln_progress *p);

/* supervise.c's hook: a `step` message from rank 0 that carries a progress report (wire version
 * 2: total_steps, loss, tokens, tokens_per_s) becomes a `progress` event, with extra's fields
 * (the latest MFU, launcher/mfu.h; consumed, may be NULL). Others are ignored. */
void ln_progress_record(ln_events *log, int attempt, int rank, const json_t *msg, json_t *extra);

#endif
