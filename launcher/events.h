/* launcher/events.h: the run's event log, RUNDIR/events.jsonl: one JSON object per line, appended
 * by the launcher only (ranks send theirs over the rendezvous connection), so there is one writer
 * and lines never interleave. Format: docs/formats/events.md. */
#ifndef FTL_LAUNCHER_EVENTS_H
#define FTL_LAUNCHER_EVENTS_H

#include <jansson.h>

#include "ftl/error.h"

typedef struct ln_events ln_events;

ftl_err ln_events_open(const char *path, ln_events **out, ftl_diag *d);

/* Appends {"ts", "t_us", "event", "attempt", ...fields}. fields is stolen (may be NULL). A failed
 * write is logged once and not retried: the event log must never stop a run. */
void ln_events_write(ln_events *ev, const char *event, int attempt, json_t *fields);

/* Observers see every event as it is written (the whole line: ts, t_us, event, attempt, fields),
 * borrowed for the call: `ftl run`'s progress line and metrics textfile are drawn from the log's
 * own stream, so they say what the log says. At most FTL_EVENTS_MAX_OBSERVERS; called on the
 * launcher's one thread, in the order added. */
#define FTL_EVENTS_MAX_OBSERVERS 4
typedef void (*ftl_events_observer)(void *user, const json_t *line);
ftl_err ln_events_observe(ln_events *ev, ftl_events_observer fn, void *user, ftl_diag *d);

/* fsyncs and closes; accepts NULL. */
void ln_events_close(ln_events *ev);

#endif
