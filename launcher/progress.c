/* launcher/progress.c: `ftl run`'s live progress line (see progress.h). */
#include "launcher/progress.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "ftl/core.h"
#include "launcher/runview.h"

struct ln_progress {
  ln_progress_mode mode;
  FILE *out;
  int64_t line_interval_ms;
  int64_t last_line_ms; /* lines mode: when the last line was printed */
  int drawn;            /* tty mode: a status line is on the screen */
  ln_runview rv;
};

ftl_err ln_progress_parse_mode(const char *text, ln_progress_mode *out) {
  static const char *const names[] = {"auto", "tty", "lines", "off"};
  for (int i = 0; i < 4; i++)
    if (!strcmp(text, names[i])) {
      *out = (ln_progress_mode)i;
      return FTL_OK;
    }
  return FTL_ERR_INVAL;
}

ftl_err ln_progress_create(ln_progress_mode mode, FILE *out, int isatty_out, const char *term,
                            int64_t line_interval_ms, ln_progress **p_out, ftl_diag *d) {
  ln_progress *p = ftl_calloc(1, sizeof *p);
  if (!p) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  /* Escape sequences only where a terminal will interpret them; a batch log gets plain lines. */
  if (mode == FTL_PROGRESS_AUTO)
    mode = isatty_out && term && *term && strcmp(term, "dumb") != 0 ? FTL_PROGRESS_TTY : FTL_PROGRESS_LINES;
  p->mode = mode;
  p->out = out;
  p->line_interval_ms = line_interval_ms > 0 ? line_interval_ms : 30000;
  p->last_line_ms = -1;
  ln_runview_init(&p->rv, 0);
  *p_out = p;
  return FTL_OK;
}

ln_progress_mode ln_progress_get_mode(const ln_progress *p) { return p->mode; }

/* "1h02m", "3m05s", "42s". */
static void fmt_dur(char *buf, size_t size, double s) {
  if (!(s >= 0) || s > 1e9) {
    snprintf(buf, size, "?");
    return;
  }
  long t = (long)(s + 0.5);
  if (t >= 3600)
    snprintf(buf, size, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60)
    snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
  else
    snprintf(buf, size, "%lds", t);
}

static size_t append(char *buf, size_t size, size_t used, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static size_t append(char *buf, size_t size, size_t used, const char *fmt, ...) {
  if (used >= size) return used;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + used, size - used, fmt, ap);
  va_end(ap);
  if (n < 0) return used;
  return used + (size_t)n < size ? used + (size_t)n : size - 1;
}

void ln_progress_format(const ln_runview *rv, int64_t now_us, char *buf, size_t size) {
  const ln_rv_sample *s = &rv->latest;
  size_t u = 0;
  char d1[32], d2[32];
  buf[0] = '\0';
  if (s->step < 0) {
    u = append(buf, size, u, "ftl: %s: attempt %d starting", rv->job,
               rv->n_attempts ? rv->attempts[rv->n_attempts - 1].attempt : 0);
  } else if (s->total_steps > 0) {
    u = append(buf, size, u, "ftl: step %lld/%lld (%.0f%%)", (long long)s->step, (long long)s->total_steps,
               100.0 * (double)s->step / (double)s->total_steps);
  } else {
    u = append(buf, size, u, "ftl: step %lld", (long long)s->step);
  }
  if (s->step >= 0 && isfinite(s->loss)) u = append(buf, size, u, " loss %.4f", s->loss);
  if (s->tokens_per_s >= 0) u = append(buf, size, u, " | %.0f tok/s", s->tokens_per_s);
  /* The step rate of this attempt: the ETA and the time to the next checkpoint follow from it. */
  const ln_rv_sample *f = &rv->attempt_first;
  double rate = 0;
  if (s->step > f->step && s->t_us > f->t_us && f->attempt == s->attempt)
    rate = (double)(s->step - f->step) / ((double)(s->t_us - f->t_us) / 1e6);
  if (rate > 0 && s->total_steps > s->step) {
    fmt_dur(d1, sizeof d1, (double)(s->total_steps - s->step) / rate);
    u = append(buf, size, u, " | ETA %s", d1);
  }
  if (rv->committed_step >= 0) {
    fmt_dur(d1, sizeof d1, (double)(now_us - rv->committed_us) / 1e6);
    u = append(buf, size, u, " | ckpt %lld %s ago", (long long)rv->committed_step, d1);
    int64_t every = rv->latest_cadence.interval_steps;
    if (every > 0 && rate > 0 && s->step >= 0) {
      int64_t next = rv->committed_step + every;
      if (next <= s->step) next += ((s->step - next) / every + 1) * every; /* the next one ahead */
      fmt_dur(d2, sizeof d2, (double)(next - s->step) / rate);
      u = append(buf, size, u, ", next in ~%s", d2);
    }
  }
  u = append(buf, size, u, " | restarts %d", rv->restarts);
  ln_rv_goodput g = ln_runview_goodput(rv, now_us);
  if (g.wall_ms > 0) u = append(buf, size, u, " | goodput %.0f%%", g.pct);
  if (s->mfu >= 0) u = append(buf, size, u, " | MFU %.1f%%", 100 * s->mfu);
}

static void draw(ln_progress *p, int force_line) {
  char line[512];
  int64_t now_ms = ftl_clock_ms();
  ln_progress_format(&p->rv, ftl_wall_us(), line, sizeof line);
  if (p->mode == FTL_PROGRESS_TTY) {
    /* The line is cut to a terminal's usual width rather than wrapping, which would defeat \r. */
    /* The cursor is left at the start of the line, so a log line written meanwhile replaces the
     * status line instead of being glued to its end; the next report redraws it. */
    fprintf(p->out, "\r%.160s\x1b[K\r", line);
    fflush(p->out);
    p->drawn = 1;
  } else if (p->mode == FTL_PROGRESS_LINES) {
    if (!force_line && p->last_line_ms >= 0 && now_ms - p->last_line_ms < p->line_interval_ms) return;
    p->last_line_ms = now_ms;
    fprintf(p->out, "%s\n", line);
    fflush(p->out);
  }
}

void ln_progress_observe(void *user, const json_t *line) {
  ln_progress *p = user;
  ln_runview_add(&p->rv, line);
  if (p->mode == FTL_PROGRESS_OFF) return;
  const char *ev = json_string_value(json_object_get(line, "event"));
  if (!ev) return;
  if (!strcmp(ev, "progress")) {
    const ln_rv_sample *s = &p->rv.latest;
    draw(p, s->total_steps > 0 && s->step >= s->total_steps);
  } else if (p->mode == FTL_PROGRESS_TTY && (!strcmp(ev, "ckpt_committed") || !strcmp(ev, "restart"))) {
    draw(p, 0);
  }
}

void ln_progress_finish(ln_progress *p) {
  if (!p || !p->drawn) return;
  fputs("\r\x1b[K", p->out);
  fflush(p->out);
  p->drawn = 0;
}

void ln_progress_destroy(ln_progress *p) {
  if (!p) return;
  ln_progress_finish(p);
  ln_runview_free(&p->rv);
  ftl_free(p);
}

void ln_progress_record(ln_events *log, int attempt, int rank, const json_t *msg, json_t *extra) {
  if (rank != 0 || !json_object_get(msg, "total_steps")) {
    json_decref(extra);
    return;
  }
  json_t *fields = json_object();
  static const char *const keys[] = {"step", "total_steps", "loss", "tokens", "tokens_per_s"};
  for (size_t i = 0; fields && i < sizeof keys / sizeof *keys; i++) {
    json_t *v = json_object_get(msg, keys[i]);
    if (json_is_number(v) || json_is_null(v)) json_object_set(fields, keys[i], v);
  }
  if (fields) json_object_set_new(fields, "rank", json_integer(rank));
  if (fields && extra) json_object_update(fields, extra);
  json_decref(extra);
  ln_events_write(log, "progress", attempt, fields);
}
