/* launcher/report.c: `ftl report RUNDIR -o report.html`: one self-contained page about a run
 * (inline CSS and SVG drawn here; no script, font or image fetched from anywhere): loss against
 * step with checkpoints and restarts marked, a timeline of the attempts (start-up, training, lost
 * work, teardown, back-off; GPUs turning degraded or failed marked), the goodput breakdown as a
 * stacked bar, useful work (goodput × MFU, and MFU against step, for a program that reports its
 * FLOPs), GPU health (each GPU's verdict, its changes, the stragglers beside their GPU's), and
 * the checkpoint cadence over time (the interval and M, the gang's mean time between failures).
 * Drawn from the same event fold as `ftl status` (runview.c), so the two agree.
 *
 * Map: output and SVG helpers (frames, nice ticks, axes, lines, marks); the loss plot; the
 * timeline of the attempts (GPU marks, bars, rows, legend); the goodput bar; the MFU plot; the
 * cadence plot; the page's text (summary, useful work, attempts table, standby, GPU health and
 * stragglers, cadence and gate); the page and the command.
 *
 * Why one file: the page is one document, and every section writes it through the same few static
 * helpers (the escaping of text, the SVG frame, ticks and axes, the bars); split, those would be
 * exported for the sole use of this page's own parts. Each section is its own function, called in
 * order by build_page.
 *
 * Not here: anything interactive, anything that needs a network. */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/rundir.h"
#include "ftl/core.h"
#include "launcher/launcher.h"
#include "launcher/runview.h"
#include "launcher/status.h"

const char ln_report_help[] =
    "ftl report: one self-contained HTML page about a run, with plots.\n"
    "\n"
    "  ftl report RUNDIR [-o FILE]\n"
    "\n"
    "  -o, --output FILE   where to write it (default ./report.html)\n"
    "\n"
    "Loss against step (checkpoints and restarts marked), a timeline of the attempts (start-up, training,\n"
    "lost work, teardown, back-off; a GPU turning degraded or failed), the goodput breakdown, useful work\n"
    "(goodput x MFU and MFU against step, for a program that reports its FLOPs), GPU health\n"
    "(each GPU's verdict, its changes, the stragglers with their GPU's verdict) and the checkpoint cadence\n"
    "over time (interval and M). Inline CSS and SVG only: it opens offline. Works while the job runs and\n"
    "after.\n"
    "Exit codes: 0 written, 2 usage error or RUNDIR is not a run directory, 5 the file cannot be written.\n";

/* ---- output and SVG helpers ------------------------------------------------------------------ */

/* The page: loss and cadence curves of a long run are a few megabytes; past this it is refused. */
#define REPORT_MAX_BYTES ((size_t)256 << 20)

typedef core_buf out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  core_buf_vprintf(o, fmt, ap);
  va_end(ap);
}

/* Text into HTML/SVG: the five characters that matter escaped. */
static void put_text(out *o, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '&': put(o, "&amp;"); break;
    case '<': put(o, "&lt;"); break;
    case '>': put(o, "&gt;"); break;
    case '"': put(o, "&quot;"); break;
    case '\'': put(o, "&#39;"); break;
    default: put(o, "%c", *s);
    }
  }
}

/* A plot's frame: the drawing area inside the margins and the data ranges it maps. */
typedef struct frame {
  double x0, y0, w, h; /* drawing area in pixels */
  double xmin, xmax, ymin, ymax;
} frame;

static double px(const frame *f, double x) { return f->x0 + (x - f->xmin) / (f->xmax - f->xmin) * f->w; }
static double py(const frame *f, double y) { return f->y0 + f->h - (y - f->ymin) / (f->ymax - f->ymin) * f->h; }

static void fix_range(double *lo, double *hi) {
  if (!isfinite(*lo) || !isfinite(*hi)) *lo = 0, *hi = 1;
  if (*hi - *lo < 1e-12) {
    double pad = fabs(*hi) > 0 ? fabs(*hi) * 0.1 : 1;
    *lo -= pad;
    *hi += pad;
  }
}

static void svg_open(out *o, int width, int height, const char *label) {
  put(o,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
      "aria-label=\"",
      width, height, width, height);
  put_text(o, label);
  put(o, "\">\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", width, height);
}

/* A tick spacing of 1, 2 or 5 times a power of ten that puts 4 to 8 ticks on [lo, hi]: ticks a
 * reader can read (9.26, 6.952, 4.644 are not). */
static double nice_step(double lo, double hi) {
  double span = hi - lo;
  if (!(span > 0) || !isfinite(span)) return 1;
  double raw = span / 5, mag = pow(10, floor(log10(raw))), r = raw / mag;
  return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * mag;
}

/* Widens [*lo, *hi] to multiples of its nice step, so the frame ends on ticks. */
static void nice_range(double *lo, double *hi) {
  double step = nice_step(*lo, *hi);
  *lo = floor(*lo / step + 1e-9) * step;
  *hi = ceil(*hi / step - 1e-9) * step;
}

/* A tick's label: as few digits as its step needs (0.25, 1200, 3e+06). */
static void put_tick(out *o, double x, double y, const char *anchor, double v, double step) {
  int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
  if (fabs(v) < step * 1e-6) v = 0; /* no -0 */
  put(o, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"%s\">", x, y, anchor);
  if (fabs(v) >= 1e6)
    put(o, "%.3g</text>\n", v);
  else
    put(o, "%.*f</text>\n", decimals > 6 ? 6 : decimals, v);
}

/* Axes with ticks at nice values (nice_step) and the labels. */
static void axes(out *o, const frame *f, const char *xlabel, const char *ylabel) {
  put(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" stroke=\"#444\"/>\n", f->x0,
      f->y0, f->w, f->h);
  double xs = nice_step(f->xmin, f->xmax), ys = nice_step(f->ymin, f->ymax);
  for (double xv = ceil(f->xmin / xs - 1e-9) * xs; xv <= f->xmax + xs * 1e-9; xv += xs) {
    double x = px(f, xv);
    put(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x, f->y0, x, f->y0 + f->h);
    put_tick(o, x, f->y0 + f->h + 14, "middle", xv, xs);
  }
  for (double yv = ceil(f->ymin / ys - 1e-9) * ys; yv <= f->ymax + ys * 1e-9; yv += ys) {
    double y = py(f, yv);
    put(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", f->x0, y, f->x0 + f->w, y);
    put_tick(o, f->x0 - 4, y + 4, "end", yv, ys);
  }
  put(o, "<text x=\"%.1f\" y=\"%.1f\" class=\"axis\" text-anchor=\"middle\">", f->x0 + f->w / 2, f->y0 + f->h + 30);
  put_text(o, xlabel);
  double lx = f->x0 - 66; /* left of the tick labels, whichever plot of a row this is */
  put(o,
      "</text>\n<text x=\"%.1f\" y=\"%.1f\" class=\"axis\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">",
      lx, f->y0 + f->h / 2, lx, f->y0 + f->h / 2);
  put_text(o, ylabel);
  put(o, "</text>\n");
}

static void polyline(out *o, const frame *f, const double *xs, const double *ys, int n, const char *color) {
  put(o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
  for (int i = 0; i < n; i++)
    if (isfinite(ys[i])) put(o, "%.1f,%.1f ", px(f, xs[i]), py(f, ys[i]));
  put(o, "\"/>\n");
  for (int i = 0; i < n; i++)
    if (isfinite(ys[i]))
      put(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", px(f, xs[i]), py(f, ys[i]), color);
}

static void vmark(out *o, const frame *f, double x, const char *color, const char *label) {
  if (x < f->xmin || x > f->xmax) return;
  put(o,
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"4 "
      "3\">"
      "<title>",
      px(f, x), f->y0, px(f, x), f->y0 + f->h, color);
  put_text(o, label);
  put(o, "</title></line>\n");
}

static void empty_note(out *o, const frame *f, const char *why) {
  put(o, "<text x=\"%.1f\" y=\"%.1f\" class=\"note\" text-anchor=\"middle\">", f->x0 + f->w / 2, f->y0 + f->h / 2);
  put_text(o, why);
  put(o, "</text>\n");
}

/* ---- the loss plot --------------------------------------------------------------------------- */

static void plot_loss(out *o, const ln_runview *rv) {
  svg_open(o, 1000, 320, "training loss against step, checkpoints and restarts marked");
  frame f = {
      .x0 = 84, .y0 = 20, .w = 886, .h = 250, .xmin = INFINITY, .xmax = -INFINITY, .ymin = INFINITY, .ymax = -INFINITY};
  int n = rv->n_samples, have = 0;
  double *xs = ftl_calloc((size_t)(n ? n : 1), sizeof *xs), *ys = ftl_calloc((size_t)(n ? n : 1), sizeof *ys);
  for (int i = 0; xs && ys && i < n; i++) {
    xs[i] = (double)rv->samples[i].step;
    ys[i] = rv->samples[i].loss;
    if (xs[i] < f.xmin) f.xmin = xs[i];
    if (xs[i] > f.xmax) f.xmax = xs[i];
    if (isfinite(ys[i])) {
      have++;
      if (ys[i] < f.ymin) f.ymin = ys[i];
      if (ys[i] > f.ymax) f.ymax = ys[i];
    }
  }
  for (int i = 0; i < rv->n_commits; i++) {
    double s = (double)rv->commits[i].step;
    if (s > f.xmax) f.xmax = s;
    if (s < f.xmin) f.xmin = s;
  }
  if (f.xmin > 0 && f.xmin < INFINITY) f.xmin = 0;
  fix_range(&f.xmin, &f.xmax);
  fix_range(&f.ymin, &f.ymax);
  nice_range(&f.xmin, &f.xmax);
  nice_range(&f.ymin, &f.ymax);
  axes(o, &f, "step", "training loss");
  char label[96];
  for (int i = 0; i < rv->n_commits; i++) {
    snprintf(label, sizeof label, "checkpoint committed at step %lld", (long long)rv->commits[i].step);
    vmark(o, &f, (double)rv->commits[i].step, "#2a9d8f", label);
  }
  for (int i = 0; i < rv->n_attempts; i++) {
    const ln_rv_attempt *a = &rv->attempts[i];
    if (i + 1 < rv->n_attempts && a->last_step >= 0) {
      snprintf(label, sizeof label, "attempt %d ended (%s) at step %lld; resumed from %lld", a->attempt, a->outcome,
               (long long)a->last_step, (long long)a->committed_step);
      vmark(o, &f, (double)a->last_step, "#d62828", label);
    }
  }
  if (have && xs && ys)
    polyline(o, &f, xs, ys, n, "#1d3557");
  else
    empty_note(o, &f, "no loss reported (the program does not call ftl_progress_report)");
  put(o, "<text x=\"80\" y=\"14\" class=\"legend\"><tspan fill=\"#1d3557\">&#9632; loss</tspan>  "
         "<tspan fill=\"#2a9d8f\">&#9474; checkpoint committed</tspan>  <tspan fill=\"#d62828\">&#9474; attempt "
         "ended, restart</tspan></text>\n</svg>\n");
  ftl_free(xs);
  ftl_free(ys);
}

/* ---- the timeline ---------------------------------------------------------------------------- */

static void bar(out *o, double x, double y, double w, double h, const char *color, const char *title) {
  if (!(w > 0.05)) return;
  put(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>", x, y, w, h, color);
  put_text(o, title);
  put(o, "</title></rect>\n");
}

static const char *const C_STARTUP = "#8ecae6", *const C_TRAIN = "#2a9d8f", *const C_STALL = "#e9c46a",
                         *const C_LOST = "#d62828", *const C_TEAR = "#f4a261", *const C_BACKOFF = "#adb5bd",
                         *const C_UNREPORTED = "#b5c99a", *const C_GATE = "#9b5de5", *const C_PUBLISH = "#f15bb5",
                         *const C_GPU_DEGRADED = "#f4b400", *const C_GPU_FAILED = "#9d0208";
static const char *const PHASE_NAMES[5] = {"launch", "rendezvous", "MPI init", "communicator", "first step"};
static const char *const PHASE_SHADES[5] = {"#219ebc", "#48cae4", "#0077b6", "#90e0ef", "#023e8a"};

/* Whether the run reports steps: a program that does not use ftl shows none, and its running time
 * is drawn as such rather than as a start-up that never ended. */
static int run_reports_steps(const ln_runview *rv) {
  for (int i = 0; i < rv->n_attempts; i++)
    if (rv->attempts[i].first_step_us || rv->attempts[i].last_step >= 0 || rv->attempts[i].joined) return 1;
  return rv->n_samples > 0;
}

/* Whether any GPU turned degraded or failed in the run (its marks and their legend are drawn). */
static int any_gpu_marks(const ln_runview *rv) {
  for (int k = 0; k < rv->n_gpu_changes; k++)
    if (strcmp(rv->gpu_changes[k].verdict, "healthy") != 0) return 1;
  return 0;
}

/* An attempt's GPU verdict changes to degraded (amber) or failed (red): a triangle above its row
 * where the change was said, its title naming the host, GPU and reason. */
static void draw_gpu_marks(out *o, const frame *f, const ln_runview *rv, int attempt, double y, int64_t t0) {
  for (int k = 0; k < rv->n_gpu_changes; k++) {
    const ln_rv_gpu_change *c = &rv->gpu_changes[k];
    if (c->attempt != attempt || !strcmp(c->verdict, "healthy")) continue;
    double x = px(f, (double)(c->t_us - t0) / 1e6);
    if (x < f->x0 || x > f->x0 + f->w) continue;
    put(o, "<path d=\"M %.1f %.1f L %.1f %.1f L %.1f %.1f Z\" fill=\"%s\" stroke=\"#222\" stroke-width=\"0.5\"><title>",
        x - 5, y - 7, x + 5, y - 7, x, y + 2, strcmp(c->verdict, "failed") ? C_GPU_DEGRADED : C_GPU_FAILED);
    char what[96];
    snprintf(what, sizeof what, "GPU %d (", c->index);
    put_text(o, what);
    put_text(o, c->uuid);
    put_text(o, ") on host ");
    put_text(o, c->host);
    put_text(o, ": ");
    put_text(o, c->verdict);
    put_text(o, ": ");
    put_text(o, c->reason);
    put(o, "</title></path>\n");
  }
}

/* Attempt i's row of the timeline: start-up (its phases in the lower half), training or running,
 * checkpoint stalls, lost work, teardown, back-off, commits, and its outcome. */
static void draw_attempt_row(out *o, const frame *f, const ln_runview *rv, int i, int64_t t0, int64_t now_us) {
  const ln_rv_attempt *a = &rv->attempts[i];
  char title[160];
  double y = f->y0 + i * 34.0 + 6, h = 22;
  double s = (double)(a->start_us - t0) / 1e6;
  double end = (double)((a->end_us ? a->end_us : now_us) - t0) / 1e6;
  double fail = a->failure_us ? (double)(a->failure_us - t0) / 1e6 : end;
  if (fail > end) fail = end;
  /* Without a first step: a program that reports none ran from its ranks' start (drawn as such),
   * one that does was starting up until it ended. */
  int unreported = !a->first_step_us && !a->joined && a->started > 0 && s + a->started_ms / 1e3 < fail;
  double first = a->first_step_us ? (double)(a->first_step_us - t0) / 1e6 : unreported ? s + a->started_ms / 1e3 : end;
  put(o, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">attempt %d</text>\n", f->x0 - 6, y + 15,
      a->attempt);
  snprintf(title, sizeof title, "attempt %d start-up: %.1f s (launch to %s)", a->attempt, first - s,
           unreported ? "the ranks' start" : "first step");
  bar(o, px(f, s), y, px(f, first) - px(f, s), h, C_STARTUP, title);
  if (unreported) {
    snprintf(title, sizeof title, "attempt %d running: %.1f s (the program reports no steps)", a->attempt, fail - first);
    bar(o, px(f, first), y, px(f, fail) - px(f, first), h, C_UNREPORTED, title);
  }
  /* Its phases (the slowest rank's each, so they need not add up to the whole), in shades along
   * the start-up bar's lower half, scaled into it. */
  double phase_sum = 0;
  for (int k = 0; k < 5; k++)
    phase_sum += a->phase_ms[k] > 0 ? a->phase_ms[k] : 0;
  if (phase_sum > 0 && first > s) {
    double x = px(f, s), span = px(f, first) - px(f, s);
    for (int k = 0; k < 5; k++) {
      if (!(a->phase_ms[k] > 0)) continue;
      double w = span * a->phase_ms[k] / phase_sum;
      snprintf(title, sizeof title, "attempt %d start-up, %s: %.0f ms (slowest rank)", a->attempt, PHASE_NAMES[k],
               a->phase_ms[k]);
      bar(o, x, y + h / 2, w, h / 2, PHASE_SHADES[k], title);
      x += w;
    }
  }
  snprintf(title, sizeof title, "attempt %d training: %.1f s", a->attempt, fail - first);
  if (fail > first && !unreported) bar(o, px(f, first), y, px(f, fail) - px(f, first), h, C_TRAIN, title);
  /* Stalls are not placed in time in the log; their total is drawn at the end of training. */
  double stall = a->stall_ms / 1e3;
  if (stall > 0 && fail > first) {
    snprintf(title, sizeof title, "attempt %d checkpoint stalls: %.2f s in total", a->attempt, stall);
    bar(o, px(f, fail - stall), y + h - 6, px(f, fail) - px(f, fail - stall), 6, C_STALL, title);
  }
  int failed = !strcmp(a->outcome, "failed") || !strcmp(a->outcome, "interrupted");
  if (failed && fail > first && !unreported) { /* without steps nothing says what was lost */
    double since = a->committed_us ? (double)(a->committed_us - t0) / 1e6 : first;
    if (since < first) since = first;
    snprintf(title, sizeof title, "attempt %d lost work: %.1f s since the last commit", a->attempt, fail - since);
    bar(o, px(f, since), y, px(f, fail) - px(f, since), h, C_LOST, title);
  }
  snprintf(title, sizeof title, "attempt %d teardown: %.1f s", a->attempt, end - fail);
  bar(o, px(f, fail), y, px(f, end) - px(f, fail), h, C_TEAR, title);
  if (a->backoff_ms > 0) {
    snprintf(title, sizeof title, "back-off before the next attempt: %.1f s", a->backoff_ms / 1e3);
    bar(o, px(f, end), y + 8, px(f, end + a->backoff_ms / 1e3) - px(f, end), 6, C_BACKOFF, title);
  }
  draw_gpu_marks(o, f, rv, a->attempt, y, t0);
  for (int k = 0; k < rv->n_commits; k++) {
    if (rv->commits[k].attempt != a->attempt) continue;
    double x = px(f, (double)(rv->commits[k].t_us - t0) / 1e6);
    put(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#264653\" stroke-width=\"2\"/>\n", x,
        y - 3, x, y + 3);
  }
  /* A GPU that failed its health check ended it: said so, not only "failed". */
  const char *label = !a->outcome[0] ? "running" : !strcmp(a->cause, "gpu_failed") ? "failed: GPU failed" : a->outcome;
  double room = 20 + 6.0 * (double)strlen(label);
  put(o, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\">",
      px(f, end) + 4 > f->x0 + f->w - room ? f->x0 + f->w - room : px(f, end) + 4, y + 15);
  put_text(o, label);
  put(o, "</text>\n");
}

/* The row after the last attempt: its gate (from the attempt's end to the gate's verdict) and the
 * publish. */
static void draw_end_row(out *o, const frame *f, const ln_runview *rv, int64_t t0, int64_t now_us) {
  char title[160];
  const ln_rv_attempt *last = &rv->attempts[rv->n_attempts - 1];
  double y = f->y0 + rv->n_attempts * 34.0 + 6, h = 22;
  double from = (double)((last->end_us ? last->end_us : now_us) - t0) / 1e6;
  put(o, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">gate, publish</text>\n", f->x0 - 6, y + 15);
  if (rv->gate_us) {
    double g = (double)(rv->gate_us - t0) / 1e6;
    snprintf(title, sizeof title, "gate: %.1f s (%s)", g - from, rv->gate_result[0] ? rv->gate_result : "?");
    bar(o, px(f, from), y, px(f, g) - px(f, from), h, C_GATE, title);
    from = g;
  }
  if (rv->publish_us) {
    double p = (double)(rv->publish_us - t0) / 1e6;
    snprintf(title, sizeof title, "publish: %.1f s (%s%s%.12s)", p - from, rv->publish_result,
             rv->publish_version[0] ? " version " : "", rv->publish_version);
    bar(o, px(f, from), y, px(f, p) - px(f, from), h, C_PUBLISH, title);
    from = p;
  }
  put(o, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\">", px(f, from) + 4 > f->x0 + f->w - 90 ? f->x0 + f->w - 90 : px(f, from) + 4,
      y + 15);
  put_text(o, rv->publish_result[0] ? rv->publish_result : rv->gate_result);
  put(o, "</text>\n");
}

/* The timeline's legend: the bars' colours, and the start-up phases' shades when any were drawn. */
static void draw_timeline_legend(out *o, const frame *f, const ln_runview *rv, int end_row) {
  put(o,
      "<text x=\"110\" y=\"14\" class=\"legend\"><tspan fill=\"%s\">&#9632; start-up</tspan>  <tspan fill=\"%s\">"
      "&#9632; training</tspan>  <tspan fill=\"%s\">&#9632; checkpoint stalls</tspan>  <tspan fill=\"%s\">&#9632; "
      "lost work</tspan>  <tspan fill=\"%s\">&#9632; teardown</tspan>  <tspan fill=\"%s\">&#9632; back-off</tspan>  ",
      C_STARTUP, C_TRAIN, C_STALL, C_LOST, C_TEAR, C_BACKOFF);
  if (!run_reports_steps(rv)) put(o, "<tspan fill=\"%s\">&#9632; running (no steps reported)</tspan>  ", C_UNREPORTED);
  if (end_row) put(o, "<tspan fill=\"%s\">&#9632; gate</tspan>  <tspan fill=\"%s\">&#9632; publish</tspan>  ", C_GATE, C_PUBLISH);
  put(o, "<tspan fill=\"#264653\">| commit</tspan></text>\n");
  /* The start-up bar's lower half: its phases, each the slowest rank's (programs that use ftl). */
  int phases = 0;
  for (int i = 0; i < rv->n_attempts; i++)
    for (int k = 0; k < 5; k++) phases |= rv->attempts[i].phase_ms[k] > 0;
  if (phases) {
    put(o, "<text x=\"110\" y=\"%.1f\" class=\"legend\">start-up phases (lower half, slowest rank each): ",
        f->y0 + f->h + 50);
    for (int k = 0; k < 5; k++) put(o, "<tspan fill=\"%s\">&#9632; %s</tspan>  ", PHASE_SHADES[k], PHASE_NAMES[k]);
    put(o, "</text>\n");
  }
  if (any_gpu_marks(rv))
    put(o, "<text x=\"110\" y=\"%.1f\" class=\"legend\">GPU health (above a row, when said): <tspan fill=\"%s\">"
           "&#9660; a GPU degraded</tspan>  <tspan fill=\"%s\">&#9660; a GPU failed</tspan></text>\n",
        f->y0 + f->h + (phases ? 66 : 50), C_GPU_DEGRADED, C_GPU_FAILED);
}

static void plot_timeline(out *o, const ln_runview *rv, int64_t now_us) {
  int end_row = rv->gate_us || rv->publish_us; /* the gate and the publish after the last attempt */
  int rows = (rv->n_attempts ? rv->n_attempts : 1) + end_row;
  int height = 90 + rows * 34 + (any_gpu_marks(rv) ? 16 : 0);
  svg_open(o, 1000, height, "timeline of the attempts");
  int64_t t0 = rv->run_start_us ? rv->run_start_us : (rv->n_attempts ? rv->attempts[0].start_us : now_us);
  int64_t t1 = rv->last_us > t0 ? rv->last_us : t0 + 1000000;
  frame f = {.x0 = 110,
             .y0 = 20,
             .w = 860,
             .h = rows * 34.0,
             .xmin = 0,
             .xmax = (double)(t1 - t0) / 1e6,
             .ymin = 0,
             .ymax = rows};
  fix_range(&f.xmin, &f.xmax);
  nice_range(&f.xmin, &f.xmax);
  put(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" stroke=\"#444\"/>\n", f.x0, f.y0,
      f.w, f.h);
  double xs = nice_step(f.xmin, f.xmax);
  for (double xv = 0; xv <= f.xmax + xs * 1e-9; xv += xs) put_tick(o, px(&f, xv), f.y0 + f.h + 14, "middle", xv, xs);
  put(o, "<text x=\"%.1f\" y=\"%.1f\" class=\"axis\" text-anchor=\"middle\">seconds since the run started</text>\n",
      f.x0 + f.w / 2, f.y0 + f.h + 30);
  for (int i = 0; i < rv->n_attempts; i++) draw_attempt_row(o, &f, rv, i, t0, now_us);
  if (!rv->n_attempts) empty_note(o, &f, "no attempts yet");
  if (end_row && rv->n_attempts) draw_end_row(o, &f, rv, t0, now_us);
  draw_timeline_legend(o, &f, rv, end_row);
  put(o, "</svg>\n");
}

/* ---- the goodput bar ------------------------------------------------------------------------- */

static void plot_goodput(out *o, const ln_rv_goodput *g) {
  struct {
    const char *name, *color;
    double ms;
  } parts[] = {{"productive", C_TRAIN, g->productive_ms},
               {"start-up", C_STARTUP, g->startup_ms},
               {"checkpoint stalls", C_STALL, g->stall_ms},
               {"lost work", C_LOST, g->lost_ms},
               {"teardown", C_TEAR, g->teardown_ms},
               {"back-off", C_BACKOFF, g->backoff_ms},
               {"running (no steps)", C_UNREPORTED, g->unreported_ms}};
  size_t n_parts = g->unreported_ms > 0 ? 7 : 6;
  /* The legend's items side by side, each as wide as its label (the tick font's digits and letters
   * average under 6.5 px), wrapping to a second row rather than running past the picture's edge. */
  char labels[7][64];
  double item_x[7], item_y[7], lx = 20, ly = 72;
  for (size_t i = 0; i < n_parts; i++) {
    snprintf(labels[i], sizeof labels[i], "%s %.1f s", parts[i].name, parts[i].ms / 1e3);
    double item_w = 16 + 6.5 * (double)strlen(labels[i]) + 28;
    if (lx > 20 && lx + item_w > 990) {
      lx = 20;
      ly += 20;
    }
    item_x[i] = lx;
    item_y[i] = ly;
    lx += item_w;
  }
  svg_open(o, 1000, (int)ly + 38, "goodput breakdown");
  double total = 0;
  for (size_t i = 0; i < n_parts; i++)
    total += parts[i].ms > 0 ? parts[i].ms : 0;
  double x = 20, w = 960;
  char title[128];
  put(o, "<rect x=\"20\" y=\"20\" width=\"960\" height=\"36\" fill=\"#f1f1f1\" stroke=\"#444\"/>\n");
  for (size_t i = 0; i < n_parts && total > 0; i++) {
    if (!(parts[i].ms > 0)) continue;
    double pw = parts[i].ms / total * w;
    snprintf(title, sizeof title, "%s: %.1f s (%.1f%%)", parts[i].name, parts[i].ms / 1e3, 100 * parts[i].ms / total);
    bar(o, x, 20, pw, 36, parts[i].color, title);
    if (pw > 70) {
      put(o, "<text x=\"%.1f\" y=\"43\" class=\"barlabel\" text-anchor=\"middle\">%.0f%%</text>\n", x + pw / 2,
          100 * parts[i].ms / total);
    }
    x += pw;
  }
  for (size_t i = 0; i < n_parts; i++) {
    put(o,
        "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\" "
        "class=\"tick\">",
        item_x[i], item_y[i], parts[i].color, item_x[i] + 16, item_y[i] + 10);
    put_text(o, labels[i]);
    put(o, "</text>\n");
  }
  put(o, "</svg>\n");
}

/* ---- the MFU plot ---------------------------------------------------------------------------- */

/* MFU against step: the launcher's latest figure at each of rank 0's progress reports (the recent
 * window's, launcher/mfu.h). */
static void plot_mfu(out *o, const ln_runview *rv) {
  svg_open(o, 1000, 280, "model FLOPs utilisation against step");
  frame f = {.x0 = 84, .y0 = 20, .w = 886, .h = 210, .xmin = INFINITY, .xmax = -INFINITY, .ymin = 0, .ymax = -INFINITY};
  int n = rv->n_samples, k = 0;
  double *xs = ftl_calloc((size_t)(n ? n : 1), sizeof *xs), *ys = ftl_calloc((size_t)(n ? n : 1), sizeof *ys);
  for (int i = 0; xs && ys && i < n; i++) {
    if (rv->samples[i].mfu < 0) continue;
    xs[k] = (double)rv->samples[i].step;
    ys[k] = 100 * rv->samples[i].mfu;
    if (xs[k] < f.xmin) f.xmin = xs[k];
    if (xs[k] > f.xmax) f.xmax = xs[k];
    if (ys[k] > f.ymax) f.ymax = ys[k];
    k++;
  }
  if (f.ymax > 0) f.ymax *= 1.15; /* room above a flat line, which would lie on the frame */
  fix_range(&f.xmin, &f.xmax);
  fix_range(&f.ymin, &f.ymax);
  nice_range(&f.xmin, &f.xmax);
  nice_range(&f.ymin, &f.ymax);
  axes(o, &f, "step", "MFU (%)");
  if (k >= 2)
    polyline(o, &f, xs, ys, k, "#6a4c93");
  else
    empty_note(o, &f, "fewer than two progress reports with an MFU (ftl_progress_report, ftl_step_done_flops)");
  put(o, "</svg>\n");
  ftl_free(xs);
  ftl_free(ys);
}

/* ---- the cadence plot ------------------------------------------------------------------------ */

static void plot_cadence(out *o, const ln_runview *rv) {
  int n = rv->n_cadences;
  svg_open(o, 1000, 300, "checkpoint cadence over time: interval and M");
  frame a = {.x0 = 84, .y0 = 20, .w = 386, .h = 220}, b = {.x0 = 620, .y0 = 20, .w = 350, .h = 220};
  double *xs = ftl_calloc((size_t)(n ? n : 1), sizeof *xs), *iv = ftl_calloc((size_t)(n ? n : 1), sizeof *iv),
         *mh = ftl_calloc((size_t)(n ? n : 1), sizeof *mh);
  a.xmin = b.xmin = a.ymin = b.ymin = 0;
  a.xmax = b.xmax = a.ymax = b.ymax = -INFINITY;
  int64_t t0 = rv->run_start_us;
  for (int i = 0; xs && iv && mh && i < n; i++) {
    xs[i] = (double)(rv->cadences[i].t_us - t0) / 1e6;
    iv[i] = (double)rv->cadences[i].interval_steps;
    mh[i] = rv->cadences[i].mtbf_h;
    if (xs[i] > a.xmax) a.xmax = b.xmax = xs[i];
    if (iv[i] > a.ymax) a.ymax = iv[i];
    if (mh[i] > b.ymax) b.ymax = mh[i];
  }
  fix_range(&a.xmin, &a.xmax);
  fix_range(&b.xmin, &b.xmax);
  fix_range(&a.ymin, &a.ymax);
  fix_range(&b.ymin, &b.ymax);
  axes(o, &a, "seconds since the run started", "checkpoint interval (steps)");
  axes(o, &b, "seconds since the run started", "M: mean time between failures (h)");
  if (n && xs && iv && mh) {
    polyline(o, &a, xs, iv, n, "#6a4c93");
    polyline(o, &b, xs, mh, n, "#e76f51");
  } else {
    empty_note(o, &a, "no cadence events");
    empty_note(o, &b, "no cadence events");
  }
  put(o, "</svg>\n");
  ftl_free(xs);
  ftl_free(iv);
  ftl_free(mh);
}

/* ---- the page's text ------------------------------------------------------------------------- */

/* A string member of a status document, "" when absent or not a string. */
static const char *sval(const json_t *obj, const char *key) {
  const char *v = json_string_value(json_object_get(obj, key));
  return v ? v : "";
}

static void stamp(char *buf, size_t size, int64_t us) {
  time_t s = (time_t)(us / 1000000);
  struct tm tm;
  gmtime_r(&s, &tm);
  strftime(buf, size, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

/* The page's head and its first paragraph: the run's state, attempts, committed step, goodput and
 * publication. */
static void put_summary(out *o, const ln_runview *rv, const char *run_dir, const json_t *st, const ln_rv_goodput *gp,
                        int64_t now) {
  char t[64];
  put(o, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>ftl report: ");
  put_text(o, rv->job);
  put(o, "</title>\n<style>\nbody{font-family:sans-serif;margin:24px;color:#222;background:#fff;max-width:1040px}\n"
         "h1{font-size:22px}h2{font-size:17px;margin-top:28px}h3{font-size:14px}table{border-collapse:collapse;font-size:13px}\n"
         "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#eee}\n"
         "svg{display:block;margin:8px 0}.tick{font-size:11px;fill:#333}.axis{font-size:12px;fill:#111}\n"
         ".legend{font-size:12px}.note{font-size:13px;fill:#888}.barlabel{font-size:12px;fill:#fff;font-weight:bold}\n"
         ".ok{color:#2a9d8f}.bad{color:#d62828}.warn{color:#b5830a}\n</style></head><body>\n<h1>ftl run report: ");
  put_text(o, rv->job);
  put(o, "</h1>\n<p>Run directory <code>");
  put_text(o, run_dir);
  const json_t *ec = json_object_get(st, "exit_code");
  put(o, "</code>. State: <b class=\"%s\">", json_is_integer(ec) && json_integer_value(ec) != 0 ? "bad" : "ok");
  put_text(o, json_string_value(json_object_get(st, "state")));
  if (json_is_integer(ec)) put(o, ", exit code %lld", (long long)json_integer_value(ec));
  put(o, "</b> (");
  put_text(o, json_string_value(json_object_get(st, "how")));
  stamp(t, sizeof t, now);
    long long committed = (long long)json_integer_value(json_object_get(st, "last_committed_step"));
  put(o, "). Attempts: %d, restarts: %d", rv->n_attempts, rv->restarts);
  if (committed >= 0)
    put(o, ", last committed step: %lld", committed);
  else
    put(o, ", no step committed through ftl");
  if (gp->measured)
    put(o, ", goodput%s %.1f%%", gp->final ? "" : " so far", gp->pct);
  else
    put(o, ", goodput not measured (the program reports no steps)");
  const json_t *uw = json_object_get(st, "useful_work");
  if (json_is_number(json_object_get(uw, "useful_work_pct")))
    put(o, " × MFU %.1f%% = useful work %.1f%%", json_number_value(json_object_get(uw, "mfu_pct")),
        json_number_value(json_object_get(uw, "useful_work_pct")));
  else if (json_is_number(json_object_get(uw, "mfu_pct")))
    put(o, ", MFU %.1f%%", json_number_value(json_object_get(uw, "mfu_pct")));
  const json_t *pub = json_object_get(st, "published");
  if (!strcmp(sval(pub, "result"), "published")) {
    put(o, ", published <b>");
    put_text(o, sval(pub, "name"));
    put(o, "@");
    put_text(o, sval(pub, "channel"));
    put(o, "</b> version <code>");
    put_text(o, sval(pub, "version"));
    put(o, "</code>");
  }
  put(o, ". Written %s.</p>\n", t);
}

/* Useful work: goodput × MFU said (ftl status's useful_work), the latest rate and peak, and MFU
 * against step. Nothing for a program that reports no FLOPs. */
static void put_useful_work(out *o, const ln_runview *rv, const json_t *st) {
  const json_t *uw = json_object_get(st, "useful_work");
  if (!json_is_object(uw)) return;
  put(o, "<h2>Useful work</h2>\n<p><b>");
  put_text(o, sval(uw, "text"));
  put(o, "</b>.");
  char rate[48], peak[48];
  const ln_mfu_figure *f = &rv->mfu;
  if (f->flops_per_s >= 0 && f->peak_flops > 0) {
    ln_mfu_fmt_rate(rate, sizeof rate, f->flops_per_s);
    ln_mfu_fmt_rate(peak, sizeof peak, f->peak_flops);
    put(o, " Attempt %d%s: %s of model FLOPs over the last %.0f s against a peak of %s.", rv->mfu_attempt,
        rv->mfu_final ? " (its end)" : " (latest)", rate, f->window_s, peak);
  }
  put(o, " MFU is the model FLOPs the program reports (ftl_step_done_flops) per second over the peak of the "
         "devices its ranks use; goodput × MFU is the share of the hardware's time that did useful work "
         "(docs/gpu.md, \"Useful work: MFU\").</p>\n");
  plot_mfu(o, rv);
}

/* The attempts' table: when each started, how long it ran, how it ended, its steps. */
static void put_attempts(out *o, const ln_runview *rv, int64_t now, int reports_steps) {
  char t[64];
  put(o, "<table><tr><th>attempt</th><th>launcher</th><th>started</th><th>seconds</th><th>outcome</th><th>cause</th>"
         "<th>last step</th><th>committed</th><th>summary</th></tr>\n");
  for (int i = 0; i < rv->n_attempts; i++) {
    const ln_rv_attempt *a = &rv->attempts[i];
    stamp(t, sizeof t, a->start_us);
    put(o, "<tr><td>%d</td><td>", a->attempt);
    put_text(o, a->launcher);
    put(o, "</td><td>%s</td><td>%.1f</td><td>", t, (double)((a->end_us ? a->end_us : now) - a->start_us) / 1e6);
    put_text(o, a->outcome[0] ? a->outcome : "running");
    put(o, "</td><td>");
    put_text(o, a->cause);
    put(o, "</td><td>");
    if (a->last_step >= 0)
      put(o, "%lld", (long long)a->last_step);
    else
      put(o, "%s", reports_steps ? "none reached" : "not reported");
    put(o, "</td><td>");
    if (a->committed_step >= 0)
      put(o, "%lld", (long long)a->committed_step);
    else
      put(o, "none");
    put(o, "</td><td>");
    put_text(o, a->summary);
    put(o, "</td></tr>\n");
  }
  put(o, "</table>\n");
}

/* The standby gang (launcher/standby.h): warm restarts, and what they cost while parked. */
static void put_standby(out *o, const ln_rv_standby *sb) {
  char t[64];
  if (sb->state[0]) {
    stamp(t, sizeof t, sb->since_us);
    put(o, "<p>Standby gang: ");
    put_text(o, sb->state);
    put(o, " for attempt %d since %s", sb->for_attempt, t);
    if (sb->rss_kb >= 0) put(o, " (parked in %.2f s, %.1f MiB resident)", (double)sb->park_ms / 1e3, (double)sb->rss_kb / 1024);
    put(o, "; %d started, %d parked, %d take-over%s, %d lost", sb->started, sb->parked, sb->activated,
        sb->activated == 1 ? "" : "s", sb->lost);
    if (sb->reason[0]) {
      put(o, " (last: ");
      put_text(o, sb->reason);
      put(o, ")");
    }
    put(o, ".</p>\n");
  }
}

/* A verdict in a table cell, coloured: healthy, degraded, failed. */
static void put_verdict(out *o, const char *verdict) {
  put(o, "<td class=\"%s\">", !strcmp(verdict, "healthy") ? "ok" : !strcmp(verdict, "failed") ? "bad" : "warn");
  put_text(o, verdict);
  put(o, "</td>");
}

/* The stragglers the launcher found, how much slower, and their GPU's verdict beside them. */
static void put_stragglers(out *o, const ln_runview *rv) {
  if (!rv->n_stragglers) {
    put(o, "<p>No straggler was found (a rank whose compute per step is over 1.5&#215; the others' median).</p>\n");
    return;
  }
  put(o, "<h3>Stragglers</h3>\n<table><tr><th>attempt</th><th>rank</th><th>host</th><th>slower</th><th>compute per "
         "step (ms)</th><th>others' median (ms)</th><th>its GPU</th><th>verdict</th><th>reason</th></tr>\n");
  for (int i = 0; i < rv->n_stragglers; i++) {
    const ln_rv_straggler *s = &rv->stragglers[i];
    put(o, "<tr><td>%d</td><td>%d</td><td>", s->attempt, s->rank);
    put_text(o, s->host);
    put(o, "</td><td>%.1f&#215;</td><td>%.1f</td><td>%.1f</td>", s->ratio, s->compute_ms, s->others_median_ms);
    if (s->gpu < 0) {
      put(o, "<td colspan=\"3\">no GPU health read on its host</td></tr>\n");
      continue;
    }
    put(o, "<td>%d (", s->gpu);
    put_text(o, s->uuid);
    put(o, ")</td>");
    put_verdict(o, s->verdict);
    put(o, "<td>");
    put_text(o, strcmp(s->verdict, "healthy") ? s->reason : "");
    put(o, "</td></tr>\n");
  }
  put(o, "</table>\n");
}

/* GPU health (docs/gpu.md, "GPU health (NVML)"): each GPU's latest verdict, the changes of verdict
 * through the run, and the stragglers with their GPU's verdict. */
static void put_gpu_health(out *o, const ln_runview *rv) {
  char t[64];
  put(o, "<h2>GPU health</h2>\n");
  if (!rv->n_gpus) {
    put(o, "<p>No GPU health was read in this run (no NVML, no driver or no GPU on its hosts).</p>\n");
  } else {
    int unwell = 0;
    for (int i = 0; i < rv->n_gpus; i++) unwell += strcmp(rv->gpus[i].verdict, "healthy") != 0;
    put(o, "<p>%d GPU%s, %d not healthy (the latest verdict of each).</p>\n<table><tr><th>host</th><th>GPU</th>"
           "<th>UUID</th><th>name</th><th>verdict</th><th>reason</th><th>since</th></tr>\n",
        rv->n_gpus, rv->n_gpus == 1 ? "" : "s", unwell);
    for (int i = 0; i < rv->n_gpus; i++) {
      const ln_rv_gpu *g = &rv->gpus[i];
      stamp(t, sizeof t, g->since_us);
      put(o, "<tr><td>");
      put_text(o, g->host);
      put(o, "</td><td>%d</td><td>", g->index);
      put_text(o, g->uuid);
      put(o, "</td><td>");
      put_text(o, g->name);
      put(o, "</td>");
      put_verdict(o, g->verdict);
      put(o, "<td>");
      put_text(o, strcmp(g->verdict, "healthy") ? g->reason : "");
      put(o, "</td><td>%s</td></tr>\n", t);
    }
    put(o, "</table>\n");
  }
  if (rv->n_gpu_changes) {
    put(o, "<h3>Changes of verdict</h3>\n<table><tr><th>when</th><th>attempt</th><th>host</th><th>GPU</th><th>UUID</th>"
           "<th>verdict</th><th>reason</th></tr>\n");
    for (int i = 0; i < rv->n_gpu_changes; i++) {
      const ln_rv_gpu_change *c = &rv->gpu_changes[i];
      stamp(t, sizeof t, c->t_us);
      put(o, "<tr><td>%s</td><td>%d</td><td>", t, c->attempt);
      put_text(o, c->host);
      put(o, "</td><td>%d</td><td>", c->index);
      put_text(o, c->uuid);
      put(o, "</td>");
      put_verdict(o, c->verdict);
      put(o, "<td>");
      put_text(o, c->reason);
      put(o, "</td></tr>\n");
    }
    put(o, "</table>\n");
  }
  put_stragglers(o, rv);
}

/* The cadence's decisions, the restart cost they start from, and the gate's verdict. */
static void put_cadence_and_gate(out *o, const ln_runview *rv, const json_t *st, int reports_steps) {
  put(o, "<h2>Checkpoint cadence</h2>\n");
  if (rv->n_cadences > 0)
    plot_cadence(o, rv);
  else
    put(o, "<p>No cadence decisions in this run: the program checkpoints on its own schedule (ftl's adaptive cadence, "
           "docs/cadence.md, runs in programs that ask it, as the example fine-tune does).</p>\n");
  const json_t *cad = json_object_get(st, "cadence");
  if (json_is_string(json_object_get(cad, "explanation"))) {
    put(o, "<p>Latest decision: ");
    put_text(o, json_string_value(json_object_get(cad, "explanation")));
    put(o, "</p>\n");
  }
  /* The restart cost the cadence of a next attempt starts from (status.c: the run ledger's
   * measured restarts, through the controller's own median). */
  const json_t *cost = json_object_get(st, "restart_cost");
  if (json_is_object(cost)) {
    double r = json_number_value(json_object_get(cost, "restart_s"));
    size_t n = json_array_size(json_object_get(cost, "records"));
    if (json_is_true(json_object_get(cost, "measured")))
      put(o,
          "<p>Restart cost: R = %.2f s (measured: median of the newest %lld of %zu restart%s, from the failure's "
          "detection to %s).</p>\n",
          r, (long long)json_integer_value(json_object_get(cost, "samples")), n, n == 1 ? "" : "s",
          reports_steps ? "the first resumed step" : "the ranks' start: the program reports no steps");
    else
      put(o, "<p>Restart cost: R = %.0f s (assumed: no restart measured in this run).</p>\n", r);
  }
  const json_t *gate = json_object_get(st, "gate");
  if (json_is_object(gate)) {
    put(o, "<h2>Gate</h2>\n<p>%s: ", json_is_true(json_object_get(gate, "passed")) ? "passed" : "failed");
    put_text(o, json_string_value(json_object_get(gate, "metric")) ? json_string_value(json_object_get(gate, "metric"))
                                                                   : "");
    put(o, " = %.6g (threshold %.6g)</p>\n", json_number_value(json_object_get(gate, "value")),
        json_number_value(json_object_get(gate, "threshold")));
  }
}

/* ---- the page and the command ---------------------------------------------------------------- */

static ftl_err build_page(const char *run_dir, out *o, ftl_diag *d) {
  ln_runview rv;
  ln_runview_init(&rv, 1);
  json_t *st = NULL;
  ftl_err rc = ln_runview_load(&rv, run_dir, d);
  if (rc == FTL_ERR_NOTFOUND) rc = ftl_diag_fail(d, rc, "%s is not a run directory: it has no events.jsonl", run_dir);
  if (rc) goto out;
  if ((rc = ln_status_build(run_dir, &st, d))) goto out;
  int64_t now = ftl_wall_us();
  ln_rv_goodput g = ln_runview_goodput(&rv, now);
  int reports_steps = run_reports_steps(&rv);
  put_summary(o, &rv, run_dir, st, &g, now);
  put(o, "<h2>Loss against step</h2>\n");
  if (rv.n_samples > 0)
    plot_loss(o, &rv);
  else
    put(o, "<p>No loss reported: the program does not call ftl_progress_report (docs/cli.md, \"Watching a run\")%s.</p>\n",
        reports_steps ? "" : ", nor ftl_step_done");
  put(o, "<h2>Attempts</h2>\n");
  plot_timeline(o, &rv, now);
  put_attempts(o, &rv, now, reports_steps);
  put_standby(o, &rv.standby);
  put_gpu_health(o, &rv);
  put(o, "<h2>Goodput</h2>\n");
  plot_goodput(o, &g);
  put_useful_work(o, &rv, st);
  put_cadence_and_gate(o, &rv, st, reports_steps);
  put(o, "</body></html>\n");
  if (o->err == FTL_ERR_NOMEM) rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory writing the report");
  else if (o->err) rc = core_buf_check(o, "the report", d);
out:
  json_decref(st);
  ln_runview_free(&rv);
  return rc;
}

int ln_cmd_report(int argc, char **argv) {
  static const struct option options[] = {
      {"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  const char *output = NULL;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "o:h", options, NULL)) != -1) {
    if (c == 'o')
      output = optarg;
    else if (c == 'h') {
      fputs(ln_report_help, stdout);
      return FTL_EXIT_OK;
    } else {
      fputs("usage: ftl report RUNDIR [-o FILE]\n", stderr);
      return FTL_EXIT_USAGE;
    }
  }
  if (argc - optind != 1) {
    fputs("usage: ftl report RUNDIR [-o FILE]\n", stderr);
    return FTL_EXIT_USAGE;
  }
  const char *run_dir = argv[optind];
  /* Not inside the run directory by default: that tree is ftl's own (docs/formats/run-dir.md). */
  if (!output) output = "report.html";
  out o;
  core_buf_init(&o, REPORT_MAX_BYTES);
  ftl_diag d = {{0}};
  int exit_code = FTL_EXIT_OK;
  if (build_page(run_dir, &o, &d)) {
    fprintf(stderr, "ftl report: %s\n", d.msg);
    exit_code = FTL_EXIT_USAGE;
  } else if (ftl_write_file_atomic(output, o.p ? o.p : "", o.len, &d)) {
    fprintf(stderr, "ftl report: %s\n", d.msg);
    exit_code = FTL_EXIT_INTERNAL;
  } else {
    printf("ftl report: wrote %s\n", output);
  }
  core_buf_free(&o);
  return exit_code;
}
