/* launcher/prom.c: the Prometheus textfile (see prom.h). Names follow Prometheus' conventions, as
 * `promtool check metrics` lints them: base units (seconds, not hours), `_total` only on counters,
 * a HELP and a TYPE line for each; the job's name is the label FTL_PROM_JOB_LABEL, never `job`,
 * which the scraper sets on the target (the file's value would become `exported_job`). */
#include "launcher/prom.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/buf.h"
#include "ftl/core.h"
#include "launcher/runview.h"

struct ln_prom {
  char *path;
  char *job;
  int64_t last_write_ms;
  int warned;
  ln_runview rv;
};

/* The metrics text is a few kilobytes; a megabyte is a bug, not a file to write. */
#define PROM_MAX_BYTES ((size_t)1 << 20)

/* A label value: backslash, double quote and newline escaped, as the format requires. */
static void label_value(char *out, size_t size, const char *v) {
  size_t u = 0;
  for (; *v && u + 3 < size; v++) {
    if (*v == '\\' || *v == '"') {
      out[u++] = '\\';
      out[u++] = *v;
    } else if (*v == '\n') {
      out[u++] = '\\';
      out[u++] = 'n';
    } else {
      out[u++] = *v;
    }
  }
  out[u] = '\0';
}

static void metric(core_buf *b, const char *name, const char *type, const char *help, const char *labels, double v) {
  core_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
  if (isnan(v))
    core_buf_printf(b, "%s{%s} NaN\n", name, labels);
  else if (isinf(v))
    core_buf_printf(b, "%s{%s} %sInf\n", name, labels, v > 0 ? "+" : "-");
  else
    core_buf_printf(b, "%s{%s} %.17g\n", name, labels, v);
}

/* GPU health (docs/gpu.md): one ftl_gpu_health sample per GPU, its latest verdict as a number, and
 * how many are not healthy. Nothing when no GPU was read (no NVML, no GPU): an absent series, not a
 * healthy one. */
static void gpu_metrics(core_buf *b, const ln_runview *rv, const char *job_labels) {
  if (!rv->n_gpus) return;
  int unwell = 0;
  core_buf_printf(b, "# HELP ftl_gpu_health a GPU's latest health verdict: 0 healthy, 1 degraded, 2 failed\n"
                     "# TYPE ftl_gpu_health gauge\n");
  for (int i = 0; i < rv->n_gpus; i++) {
    const ln_rv_gpu *g = &rv->gpus[i];
    int v = !strcmp(g->verdict, "healthy") ? 0 : !strcmp(g->verdict, "failed") ? 2 : 1;
    char host[160], uuid[240];
    label_value(host, sizeof host, g->host);
    label_value(uuid, sizeof uuid, g->uuid);
    core_buf_printf(b, "ftl_gpu_health{%s,host=\"%s\",gpu=\"%d\",uuid=\"%s\"} %d\n", job_labels, host, g->index, uuid, v);
    unwell += v != 0;
  }
  metric(b, "ftl_gpus_not_healthy", "gauge", "GPUs whose latest health verdict is degraded or failed", job_labels,
         unwell);
}

/* Useful work (docs/gpu.md, "Useful work: MFU"): the gang's model FLOPs per second and peak (the
 * latest figure), the run's MFU and goodput × MFU. Nothing when no rank reported FLOPs, and each
 * only when known: an absent series, never a zero. */
static void mfu_metrics(core_buf *b, const ln_runview *rv, const ln_rv_goodput *g, const char *labels) {
  ln_mfu_run run;
  ln_runview_mfu(rv, &run);
  if (!run.reported) return;
  const ln_mfu_figure *f = &rv->mfu;
  if (f->flops_per_s >= 0)
    metric(b, "ftl_model_flops_per_second", "gauge",
           "the gang's model FLOPs per second over the recent window (ftl_step_done_flops)", labels, f->flops_per_s);
  if (f->peak_flops > 0)
    metric(b, "ftl_peak_flops_per_second", "gauge", "the gang's peak FLOPs per second that MFU is measured against",
           labels, f->peak_flops);
  if (run.mfu < 0) return;
  metric(b, "ftl_mfu_ratio", "gauge", "model FLOPs utilisation of the run so far (0..1)", labels, run.mfu);
  if (g->measured)
    metric(b, "ftl_useful_work_ratio", "gauge", "goodput times MFU: the useful share of the hardware so far (0..1)",
           labels, g->pct / 100.0 * run.mfu);
}

ftl_err ln_prom_format(const ln_runview *rv, const char *job, int up, int64_t now_us, char **text_out,
                        size_t *len_out, ftl_diag *d) {
  char esc[512], labels[600];
  label_value(esc, sizeof esc, job);
  snprintf(labels, sizeof labels, FTL_PROM_JOB_LABEL "=\"%s\"", esc);
  core_buf b;
  core_buf_init(&b, PROM_MAX_BYTES);
  const ln_rv_sample *s = &rv->latest;
  ln_rv_goodput g = ln_runview_goodput(rv, now_us);
  const ln_rv_cadence *c = &rv->latest_cadence;
  metric(&b, "ftl_up", "gauge", "1 while ftl run is running the job, 0 once it ended", labels, up);
  metric(&b, "ftl_step", "gauge", "the last training step rank 0 reported", labels, (double)s->step);
  metric(&b, "ftl_total_steps", "gauge", "the run's last step as the program reported it (0 unknown)", labels,
         (double)s->total_steps);
  metric(&b, "ftl_loss", "gauge", "the training loss rank 0 last reported", labels, s->loss);
  metric(&b, "ftl_tokens_per_second", "gauge", "tokens per second between rank 0's last two reports", labels,
         s->tokens_per_s >= 0 ? s->tokens_per_s : NAN);
  metric(&b, "ftl_restarts_total", "counter", "restarts of the job so far", labels, rv->restarts);
  metric(&b, "ftl_attempt", "gauge", "the number of the current (or last) attempt", labels,
         rv->n_attempts ? rv->attempts[rv->n_attempts - 1].attempt : -1);
  metric(&b, "ftl_goodput_ratio", "gauge", "productive time over wall time so far (0..1)", labels, g.pct / 100.0);
  metric(&b, "ftl_last_committed_step", "gauge", "the highest committed checkpoint step (-1 none)", labels,
         (double)rv->committed_step);
  metric(&b, "ftl_checkpoint_interval_steps", "gauge", "the cadence's checkpoint interval in steps (0 unknown)", labels,
         (double)c->interval_steps);
  metric(&b, "ftl_checkpoint_interval_seconds", "gauge", "the cadence's checkpoint interval in seconds (0 unknown)",
         labels, (double)c->interval_steps * c->step_s);
  metric(&b, "ftl_mtbf_seconds", "gauge",
         "the cadence's estimate of the gang's mean time between failures in seconds (0 unknown)", labels,
         c->mtbf_h * 3600.0);
  gpu_metrics(&b, rv, labels);
  mfu_metrics(&b, rv, &g, labels);
  metric(&b, "ftl_exit_code", "gauge", "ftl run's exit code once it ended (-1 while running)", labels,
         rv->ended ? rv->exit_code : -1);
  metric(&b, "ftl_last_update_timestamp_seconds", "gauge", "when this file was written (Unix time)", labels,
         (double)now_us / 1e6);
  if (b.err == FTL_ERR_NOMEM) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory formatting the metrics");
  if (b.err) return core_buf_check(&b, "the metrics", d);
  *text_out = core_buf_take(&b, len_out);
  return FTL_OK;
}

ftl_err ln_prom_create(const char *path, const char *job, ln_prom **out, ftl_diag *d) {
  ln_prom *m = ftl_calloc(1, sizeof *m);
  if (!m || !(m->path = ftl_strdup(path)) || !(m->job = ftl_strdup(job ? job : ""))) {
    ln_prom_destroy(m);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  }
  m->last_write_ms = -1;
  ln_runview_init(&m->rv, 0);
  *out = m;
  return FTL_OK;
}

static void write_now(ln_prom *m, int up) {
  char *text = NULL;
  size_t len = 0;
  ftl_diag d = {{0}};
  ftl_err rc = ln_prom_format(&m->rv, m->job, up, ftl_wall_us(), &text, &len, &d);
  if (!rc) rc = ftl_write_file_atomic(m->path, text, len, &d);
  ftl_free(text);
  m->last_write_ms = ftl_clock_ms();
  /* Metrics are for watching; a full disk or a wrong path must never stop the run. */
  if (rc && !m->warned) {
    m->warned = 1;
    FTL_LOG(FTL_LOG_WARN, "metrics", "cannot write the metrics textfile %s: %s", m->path, d.msg);
  }
}

void ln_prom_observe(void *user, const json_t *line) {
  ln_prom *m = user;
  ln_runview_add(&m->rv, line);
  const char *ev = json_string_value(json_object_get(line, "event"));
  if (!ev) return;
  int news = !strcmp(ev, "attempt_start") || !strcmp(ev, "attempt_end") || !strcmp(ev, "restart") ||
             !strcmp(ev, "ckpt_committed") || !strcmp(ev, "run_start") || !strcmp(ev, "cadence") ||
             !strcmp(ev, "gpu_health");
  if (news || m->last_write_ms < 0 || ftl_clock_ms() - m->last_write_ms >= FTL_PROM_MIN_INTERVAL_MS) write_now(m, 1);
}

void ln_prom_finish(ln_prom *m) {
  if (m) write_now(m, 0);
}

void ln_prom_destroy(ln_prom *m) {
  if (!m) return;
  ln_runview_free(&m->rv);
  ftl_free(m->path);
  ftl_free(m->job);
  ftl_free(m);
}
