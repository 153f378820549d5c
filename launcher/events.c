/* launcher/events.c: the append-only JSON-lines event log (docs/formats/events.md): the event's
 * fields here, the append itself in core/jsonl.c. Lines carry no "version" field (the format page
 * versions the whole log). */
#include "launcher/events.h"

#include <stdio.h>
#include <time.h>

#include "core/jsonl.h"
#include "ftl/core.h"

struct ln_events {
  core_jsonl *log;
  int warned;
  int n_observers;
  struct {
    ftl_events_observer fn;
    void *user;
  } observers[FTL_EVENTS_MAX_OBSERVERS];
};

ftl_err ln_events_observe(ln_events *ev, ftl_events_observer fn, void *user, ftl_diag *d) {
  if (ev->n_observers >= FTL_EVENTS_MAX_OBSERVERS) return ftl_diag_fail(d, FTL_ERR_RANGE, "too many event observers");
  ev->observers[ev->n_observers].fn = fn;
  ev->observers[ev->n_observers].user = user;
  ev->n_observers++;
  return FTL_OK;
}

ftl_err ln_events_open(const char *path, ln_events **out, ftl_diag *d) {
  /* One writer (this launcher), so O_APPEND alone keeps lines whole: no lock, no fsync per event. */
  const core_jsonl_opts opts = {.lock = false, .lock_timeout_ms = 0, .fsync = false};
  ln_events *ev = ftl_calloc(1, sizeof *ev);
  if (!ev) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  ftl_err rc = core_jsonl_open(path, &opts, &ev->log, d);
  if (rc) {
    ftl_free(ev);
    return rc;
  }
  *out = ev;
  return FTL_OK;
}

void ln_events_write(ln_events *ev, const char *event, int attempt, json_t *fields) {
  if (!ev) {
    json_decref(fields);
    return;
  }
  int64_t us = ftl_wall_us();
  time_t secs = (time_t)(us / 1000000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char ts[64];
  snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
           tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(us % 1000000));
  json_t *line = json_pack("{s:s, s:I, s:s, s:i}", "ts", ts, "t_us", (json_int_t)us, "event", event, "attempt", attempt);
  if (line && fields) json_object_update_missing(line, fields);
  json_decref(fields);
  ftl_diag d = {{0}};
  if (!line) ftl_fmt(d.msg, sizeof d.msg, "out of memory building event %s", event);
  if ((!line || core_jsonl_write(ev->log, line, &d) != FTL_OK) && !ev->warned) {
    ev->warned = 1;
    FTL_LOG(FTL_LOG_WARN, "events", "cannot append to the event log: %s", d.msg);
  }
  for (int i = 0; line && i < ev->n_observers; i++) ev->observers[i].fn(ev->observers[i].user, line);
  json_decref(line);
}

void ln_events_close(ln_events *ev) {
  if (!ev) return;
  core_jsonl_close(ev->log); /* fsyncs */
  ftl_free(ev);
}
