/* launcher/prom.h: the run's metrics in Prometheus' text exposition format, written atomically
 * (path.tmp.<pid>, rename) to a file node_exporter's textfile collector reads: the spec's
 * `metrics: {textfile: PATH}` or FTL_METRICS_TEXTFILE. Drawn, like the progress line, from the
 * run's event stream (an observer of launcher/events.c); rewritten at most every
 * FTL_PROM_MIN_INTERVAL_MS on progress, at once on attempts, restarts and commits, and at the
 * end (ftl_up 0). The metrics are listed in docs/formats/metrics-textfile.md.
 *
 * Not here: a scrape endpoint (ftl serves nothing; node_exporter does). */
#ifndef FTL_LAUNCHER_PROM_H
#define FTL_LAUNCHER_PROM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

#define FTL_PROM_MIN_INTERVAL_MS 2000
/* The label every sample carries, the job's name. Not `job` (nor `instance`, `__*`): Prometheus
 * sets those on the scraped target and would rename the file's own to `exported_job`. */
#define FTL_PROM_JOB_LABEL "ftl_job"

struct ln_runview;
typedef struct ln_prom ln_prom;

/* path: the textfile (borrowed for the call); job: the job's name, the FTL_PROM_JOB_LABEL value. */
ftl_err ln_prom_create(const char *path, const char *job, ln_prom **out, ftl_diag *d);

/* An ftl_events_observer. */
void ln_prom_observe(void *user, const json_t *line);

/* Writes the last state with ftl_up 0 (the run is over). Accepts NULL. */
void ln_prom_finish(ln_prom *m);
void ln_prom_destroy(ln_prom *m);

/* The exposition text for a view (the pure part, tested), job the FTL_PROM_JOB_LABEL value:
 * *text_out freed with ftl_free. */
ftl_err ln_prom_format(const struct ln_runview *rv, const char *job, int up, int64_t now_us, char **text_out,
                        size_t *len_out, ftl_diag *d);

#endif
