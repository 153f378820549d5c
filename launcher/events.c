/* launcher/events.c: the append-only JSON-lines event log (docs/formats/events.md). */
#include "launcher/events.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftl/core.h"

struct ftl_events {
  int fd;
  int warned;
};

ftl_err ftl_events_open(const char *path, ftl_events **out, ftl_diag *d) {
  ftl_events *ev = ftl_calloc(1, sizeof *ev);
  if (!ev) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  ev->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (ev->fd < 0) {
    ftl_free(ev);
    return ftl_diag_fail(d, FTL_ERR_IO, "cannot open event log %s: %s", path, strerror(errno));
  }
  *out = ev;
  return FTL_OK;
}

void ftl_events_write(ftl_events *ev, const char *event, int attempt, json_t *fields) {
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
  char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
  json_decref(line);
  if (!text) return;
  size_t len = strlen(text);
  text[len] = '\n'; /* json_dumps left room for the NUL we overwrite; the write below is bounded */
  ssize_t n = write(ev->fd, text, len + 1);
  if (n != (ssize_t)(len + 1) && !ev->warned) {
    ev->warned = 1;
    FTL_LOG(FTL_LOG_WARN, "events", "cannot append to the event log: %s", n < 0 ? strerror(errno) : "short write");
  }
  free(text);
}

void ftl_events_close(ftl_events *ev) {
  if (!ev) return;
  fsync(ev->fd);
  close(ev->fd);
  ftl_free(ev);
}
