/* launcher/mfu.c: model FLOPs utilisation of an attempt and of a run (see mfu.h).
 *
 * Map: the ranks' and hosts' state; what they report; each rank's device peak and the gang's;
 * the figure and its events; the run's sum and the sentence. */
#include "launcher/mfu.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ftl/core.h"
#include "launcher/gpu_health.h"

/* ---- the ranks' and hosts' state ----------------------------------------------------------- */

/* A rank's recent reports: one kept every RING_SPACING_MS of its clock, enough to span the window. */
enum { RING = 16, RING_SPACING_MS = 2500, MAX_HOST_GPUS = 64 };

typedef struct sample {
  double t_ms, flops;
} sample;

typedef struct mfu_rank {
  int noted;      /* its ready was seen */
  int host;       /* index in hosts, -1 when not known */
  int local_rank, cpus;
  int reports;    /* FLOPs reports taken */
  sample first, last;
  sample *ring;   /* RING kept reports, allocated with the first */
  int ring_n, ring_at;
} mfu_rank;

typedef struct mfu_host {
  char name[64];
  int ranks;                     /* noted ranks on it */
  int n_gpus;                    /* 0: its agent reported none (no NVML, no GPU) */
  char gpus[MAX_HOST_GPUS][96];  /* by NVML index */
} mfu_host;

struct ln_mfu {
  ln_mfu_opts o;
  int world;
  mfu_rank *ranks;
  mfu_host *hosts;
  int n_hosts, cap_hosts;
  int any;
  ln_mfu_figure fig;       /* the latest figure (ln_mfu_tick) */
  int have_fig;
  int64_t next_event_ms;   /* when the next `mfu` event is due (0: at the first tick with FLOPs) */
};

ftl_err ln_mfu_create(int world, const ln_mfu_opts *o, ln_mfu **out, ftl_diag *d) {
  ln_mfu *m = ftl_calloc(1, sizeof *m);
  if (!m || !(m->ranks = ftl_calloc((size_t)(world > 0 ? world : 1), sizeof *m->ranks))) {
    ftl_free(m);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  }
  m->o = *o;
  m->world = world;
  for (int i = 0; i < world; i++)
    m->ranks[i].host = -1;
  *out = m;
  return FTL_OK;
}

void ln_mfu_destroy(ln_mfu *m) {
  if (!m) return;
  for (int i = 0; i < m->world; i++)
    ftl_free(m->ranks[i].ring);
  ftl_free(m->ranks);
  ftl_free(m->hosts);
  ftl_free(m);
}

/* The host's index, added when new; -1 when out of memory or name is empty. */
static int host_index(ln_mfu *m, const char *name) {
  if (!name || !*name) return -1;
  for (int i = 0; i < m->n_hosts; i++)
    if (!strncmp(m->hosts[i].name, name, sizeof m->hosts[i].name - 1)) return i;
  if (m->n_hosts == m->cap_hosts) {
    int cap = m->cap_hosts ? 2 * m->cap_hosts : 8;
    mfu_host *grown = ftl_realloc(m->hosts, (size_t)cap * sizeof *grown);
    if (!grown) return -1;
    m->hosts = grown;
    m->cap_hosts = cap;
  }
  mfu_host *h = &m->hosts[m->n_hosts];
  memset(h, 0, sizeof *h);
  snprintf(h->name, sizeof h->name, "%s", name);
  return m->n_hosts++;
}

/* ---- what they report ---------------------------------------------------------------------- */

void ln_mfu_note_rank(ln_mfu *m, int rank, const char *host, int local_rank, int cpus) {
  if (!m || rank < 0 || rank >= m->world) return;
  mfu_rank *r = &m->ranks[rank];
  int h = host_index(m, host);
  if (r->noted && r->host >= 0) m->hosts[r->host].ranks--;
  r->noted = 1;
  r->host = h;
  r->local_rank = local_rank >= 0 ? local_rank : 0;
  r->cpus = cpus;
  if (h >= 0) m->hosts[h].ranks++;
}

void ln_mfu_note_gpus(ln_mfu *m, const char *host, const json_t *gpus) {
  if (!m || !json_is_array(gpus)) return;
  int h = host_index(m, host);
  if (h < 0) return;
  mfu_host *hs = &m->hosts[h];
  size_t i;
  const json_t *g;
  int n = 0;
  json_array_foreach(gpus, i, g) {
    json_int_t index = json_integer_value(json_object_get(g, "index"));
    const char *name = json_string_value(json_object_get(g, "name"));
    if (index < 0 || index >= MAX_HOST_GPUS || !name) continue;
    snprintf(hs->gpus[index], sizeof hs->gpus[index], "%s", name);
    if ((int)index + 1 > n) n = (int)index + 1;
  }
  hs->n_gpus = n;
}

static void ring_put(mfu_rank *r, sample s) {
  r->ring[r->ring_at] = s;
  r->ring_at = (r->ring_at + 1) % RING;
  if (r->ring_n < RING) r->ring_n++;
}

void ln_mfu_note_flops(ln_mfu *m, int rank, const json_t *msg) {
  const json_t *jf = json_object_get(msg, "flops"), *jt = json_object_get(msg, "flops_ms");
  if (json_is_number(jf) && json_is_number(jt)) ln_mfu_note_flops_at(m, rank, json_number_value(jf), json_number_value(jt));
}

void ln_mfu_note_flops_at(ln_mfu *m, int rank, double flops, double flops_ms) {
  if (!m || rank < 0 || rank >= m->world) return;
  sample s = {flops_ms, flops};
  if (!isfinite(s.flops) || !isfinite(s.t_ms) || s.flops < 0) return;
  mfu_rank *r = &m->ranks[rank];
  if (r->reports && (s.t_ms < r->last.t_ms || s.flops < r->last.flops)) return;
  if (!r->ring && !(r->ring = ftl_calloc(RING, sizeof *r->ring))) return;
  if (!r->reports) r->first = s;
  /* The ring keeps one report per spacing: the newest of each becomes the next kept one. */
  if (!r->ring_n || s.t_ms - r->ring[(r->ring_at + RING - 1) % RING].t_ms >= RING_SPACING_MS) ring_put(r, s);
  r->last = s;
  r->reports++;
  m->any = 1;
}

int ln_mfu_any(const ln_mfu *m) { return m && m->any; }

/* ---- each rank's device peak and the gang's ------------------------------------------------ */

const char *ln_peak_source_name(ln_peak_source s) {
  static const char *const names[] = {"", "spec", "table", "cpu", "mixed", "pending", "unknown"};
  return (unsigned)s < sizeof names / sizeof *names ? names[s] : "";
}

ln_peak_source ln_peak_source_parse(const char *name) {
  for (int s = LN_PEAK_SPEC; name && s <= LN_PEAK_UNKNOWN; s++)
    if (!strcmp(name, ln_peak_source_name((ln_peak_source)s))) return (ln_peak_source)s;
  return LN_PEAK_NONE;
}

/* The gang's peak, being summed: per source, and the first device of each kind for the words. */
typedef struct gang_peak {
  double sum;
  int n_gpu, n_cpu, n_spec;
  int gpu_same;               /* every GPU rank has first_gpu's name */
  const char *first_gpu, *first_model;
  double first_gpu_peak;
  int cores_same, first_cores; /* the CPU ranks' cores each */
  int unknown, pending;
  char unknown_why[160];
} gang_peak;

/* Adds rank r's device peak to g. */
static void add_rank_peak(const ln_mfu *m, const mfu_rank *r, double cpu_core_flops, int cpu_done, gang_peak *g) {
  if (m->o.peak_tflops > 0) {
    g->sum += m->o.peak_tflops * 1e12;
    g->n_spec++;
    return;
  }
  const mfu_host *h = r->host >= 0 ? &m->hosts[r->host] : NULL;
  if (h && h->n_gpus > 0) {
    const char *name = h->gpus[ln_gpu_index_of_local_rank(r->local_rank, h->n_gpus)], *model = "";
    double p = 0;
    ftl_err rc = ln_peak_lookup(name, m->o.precision, &p, &model);
    if (rc) {
      if (!g->unknown++)
        snprintf(g->unknown_why, sizeof g->unknown_why,
                 rc == FTL_ERR_UNSUPPORTED ? "no %s peak for '%.80s' in the table; set mfu.peak_tflops"
                                           : "%.0sno peak for '%.80s'; set mfu.peak_tflops",
                 ln_precision_name(m->o.precision), *name ? name : "an unnamed GPU");
      return;
    }
    if (!g->n_gpu++) {
      g->first_gpu = name;
      g->first_model = model;
      g->first_gpu_peak = p;
      g->gpu_same = 1;
    } else if (strcmp(name, g->first_gpu) != 0) {
      g->gpu_same = 0;
    }
    g->sum += p;
    return;
  }
  if (!cpu_done) {
    g->pending++;
    return;
  }
  /* The rank's share of its host's cores: what it can use when every rank there computes. */
  int ranks_here = h && h->ranks > 0 ? h->ranks : 1;
  int cores = r->cpus > 0 ? r->cpus / ranks_here : 1;
  if (cores < 1) cores = 1;
  if (!g->n_cpu++) {
    g->first_cores = cores;
    g->cores_same = 1;
  } else if (cores != g->first_cores) {
    g->cores_same = 0;
  }
  g->sum += cpu_core_flops * cores;
}

/* Says the gang's peak in words into f->peak and sets f->source and f->peak_flops. */
static void describe_peak(const ln_mfu *m, const gang_peak *g, double cpu_core_flops, ln_mfu_figure *f) {
  int n = g->n_gpu + g->n_cpu + g->n_spec;
  if (g->unknown) {
    f->source = LN_PEAK_UNKNOWN;
    snprintf(f->peak, sizeof f->peak, "%s", g->unknown_why);
    return;
  }
  if (g->pending) {
    f->source = LN_PEAK_PENDING;
    snprintf(f->peak, sizeof f->peak, "the CPU peak is being measured");
    return;
  }
  if (n == 0 || !(g->sum > 0)) {
    f->source = LN_PEAK_UNKNOWN;
    snprintf(f->peak, sizeof f->peak, "no rank's device is known; set mfu.peak_tflops");
    return;
  }
  f->peak_flops = g->sum;
  if (g->n_spec) {
    f->source = LN_PEAK_SPEC;
    snprintf(f->peak, sizeof f->peak, "the job spec's peak (mfu.peak_tflops %g per rank × %d rank%s)",
             m->o.peak_tflops, n, n == 1 ? "" : "s");
  } else if (g->n_gpu && !g->n_cpu) {
    f->source = LN_PEAK_TABLE;
    if (g->gpu_same)
      snprintf(f->peak, sizeof f->peak, "%d × %.80s (%s, %s %.1f TFLOPS each)", n, g->first_gpu, g->first_model,
               ln_precision_name(m->o.precision), g->first_gpu_peak / 1e12);
    else
      snprintf(f->peak, sizeof f->peak, "the ranks' GPUs (%d, of several models: %s %.1f TFLOPS in all)", n,
               ln_precision_name(m->o.precision), g->sum / 1e12);
  } else if (g->n_cpu && !g->n_gpu) {
    f->source = LN_PEAK_CPU;
    if (g->cores_same)
      snprintf(f->peak, sizeof f->peak, "a measured CPU GEMM peak (%.2f GFLOP/s per core × %d core%s per rank × %d rank%s)",
               cpu_core_flops / 1e9, g->first_cores, g->first_cores == 1 ? "" : "s", n, n == 1 ? "" : "s");
    else
      snprintf(f->peak, sizeof f->peak, "a measured CPU GEMM peak (%.2f GFLOP/s per core × each rank's cores: %.2f "
               "GFLOP/s in all)", cpu_core_flops / 1e9, g->sum / 1e9);
  } else {
    f->source = LN_PEAK_MIXED;
    snprintf(f->peak, sizeof f->peak, "the ranks' devices (%d GPUs from the table, %d CPU ranks at a measured CPU GEMM "
             "peak: %.1f TFLOPS in all)", g->n_gpu, g->n_cpu, g->sum / 1e12);
  }
}

/* ---- the figure and its event -------------------------------------------------------------- */

/* Adds rank r's rates to f: the window's and the training time's. */
static void add_rank_rates(const mfu_rank *r, ln_mfu_figure *f) {
  f->model_flops += r->last.flops;
  if (r->reports < 2 || !(r->last.t_ms > r->first.t_ms)) return;
  double span = r->last.t_ms - r->first.t_ms, rate = (r->last.flops - r->first.flops) * 1000 / span;
  if (!isfinite(rate)) return; /* a rank's nonsense (a step of a nanosecond) is not the gang's figure */
  f->avg_flops_per_s = (f->avg_flops_per_s < 0 ? 0 : f->avg_flops_per_s) + rate;
  f->train_flops += r->last.flops - r->first.flops;
  if (span / 1000 > f->train_s) f->train_s = span / 1000;
  /* The window's start: the newest kept report at least the window old, else the oldest kept. */
  const sample *w = NULL, *oldest = NULL;
  for (int k = 0; k < r->ring_n; k++) {
    const sample *s = &r->ring[(r->ring_at + RING - r->ring_n + k) % RING];
    if (!oldest) oldest = s;
    if (s->t_ms <= r->last.t_ms - LN_MFU_WINDOW_MS) w = s;
  }
  if (!w) w = oldest;
  if (!w || !(r->last.t_ms > w->t_ms)) return;
  rate = (r->last.flops - w->flops) * 1000 / (r->last.t_ms - w->t_ms);
  if (!isfinite(rate)) return;
  f->flops_per_s = (f->flops_per_s < 0 ? 0 : f->flops_per_s) + rate;
  if ((r->last.t_ms - w->t_ms) / 1000 > f->window_s) f->window_s = (r->last.t_ms - w->t_ms) / 1000;
}

void ln_mfu_compute(ln_mfu *m, ln_mfu_figure *f) {
  memset(f, 0, sizeof *f);
  f->flops_per_s = f->avg_flops_per_s = f->mfu = f->avg_mfu = -1;
  if (!m || !m->any) return;
  for (int i = 0; i < m->world; i++)
    if (m->ranks[i].reports) {
      f->ranks++;
      add_rank_rates(&m->ranks[i], f);
    }
  double cpu = 0;
  int cpu_done = ln_cpu_peak_get(&cpu);
  gang_peak g = {0};
  for (int i = 0; i < m->world; i++) {
    const mfu_rank *r = &m->ranks[i];
    if (!r->noted && !r->reports) continue;
    add_rank_peak(m, r, cpu, cpu_done, &g);
  }
  if (g.pending) ln_cpu_peak_start();
  describe_peak(m, &g, cpu, f);
  if (f->peak_flops > 0 && f->flops_per_s >= 0) f->mfu = f->flops_per_s / f->peak_flops;
  if (f->peak_flops > 0 && f->avg_flops_per_s >= 0) f->avg_mfu = f->avg_flops_per_s / f->peak_flops;
}

json_t *ln_mfu_event_fields(const ln_mfu_figure *f, int final) {
  json_t *o = json_pack("{s:i, s:f, s:f, s:f, s:s, s:s}", "ranks", f->ranks, "model_flops", f->model_flops, "train_s",
                        f->train_s, "train_flops", f->train_flops, "peak_source", ln_peak_source_name(f->source),
                        "peak", f->peak);
  if (!o) return NULL;
  /* Only what is known: a figure not yet measured is absent, never a zero. */
  if (f->flops_per_s >= 0) {
    json_object_set_new(o, "model_flops_per_s", json_real(f->flops_per_s));
    json_object_set_new(o, "window_s", json_real(f->window_s));
  }
  if (f->avg_flops_per_s >= 0) json_object_set_new(o, "avg_model_flops_per_s", json_real(f->avg_flops_per_s));
  if (f->peak_flops > 0) json_object_set_new(o, "peak_flops", json_real(f->peak_flops));
  if (f->mfu >= 0) json_object_set_new(o, "mfu", json_real(f->mfu));
  if (f->avg_mfu >= 0) json_object_set_new(o, "avg_mfu", json_real(f->avg_mfu));
  if (final) json_object_set_new(o, "final", json_true());
  return o;
}

static double num_or(const json_t *o, const char *key, double fallback) {
  const json_t *v = json_object_get(o, key);
  return json_is_number(v) && isfinite(json_number_value(v)) ? json_number_value(v) : fallback;
}

void ln_mfu_figure_from_event(const json_t *line, ln_mfu_figure *f, int *final_out) {
  memset(f, 0, sizeof *f);
  double ranks = num_or(line, "ranks", 0);
  f->ranks = ranks > 0 && ranks < 1e9 ? (int)ranks : 0;
  f->model_flops = num_or(line, "model_flops", 0);
  f->flops_per_s = num_or(line, "model_flops_per_s", -1);
  f->window_s = num_or(line, "window_s", 0);
  f->avg_flops_per_s = num_or(line, "avg_model_flops_per_s", -1);
  f->train_s = num_or(line, "train_s", 0);
  f->train_flops = num_or(line, "train_flops", 0);
  f->source = ln_peak_source_parse(json_string_value(json_object_get(line, "peak_source")));
  f->peak_flops = num_or(line, "peak_flops", 0);
  const char *peak = json_string_value(json_object_get(line, "peak"));
  snprintf(f->peak, sizeof f->peak, "%s", peak ? peak : "");
  f->mfu = num_or(line, "mfu", -1);
  f->avg_mfu = num_or(line, "avg_mfu", -1);
  if (final_out) *final_out = json_is_true(json_object_get(line, "final"));
}

void ln_mfu_tick(ln_mfu *m, ln_events *events, int attempt) {
  if (!m || !m->any) return;
  ln_mfu_compute(m, &m->fig);
  m->have_fig = 1;
  int64_t now = ftl_clock_ms();
  if (m->next_event_ms && now < m->next_event_ms) return;
  /* The first once some rank has a rate (a figure with nothing but totals says little). */
  if (!m->next_event_ms && m->fig.flops_per_s < 0) return;
  m->next_event_ms = now + LN_MFU_EVENT_EVERY_MS;
  ln_events_write(events, "mfu", attempt, ln_mfu_event_fields(&m->fig, 0));
}

void ln_mfu_finish(ln_mfu *m, ln_events *events, int attempt, ln_mfu_figure *out) {
  memset(out, 0, sizeof *out);
  if (!m || !m->any) return;
  ln_mfu_compute(m, &m->fig);
  double cpu;
  if (m->fig.source == LN_PEAK_PENDING && ln_cpu_peak_wait(ftl_clock_ms() + LN_MFU_CPU_WAIT_MS, &cpu))
    ln_mfu_compute(m, &m->fig);
  if (m->fig.source == LN_PEAK_PENDING) { /* the attempt's last word: not "being measured" any more */
    m->fig.source = LN_PEAK_UNKNOWN;
    snprintf(m->fig.peak, sizeof m->fig.peak, "the CPU peak was not measured in time");
  }
  m->have_fig = 1;
  *out = m->fig;
  ln_events_write(events, "mfu", attempt, ln_mfu_event_fields(&m->fig, 1));
}

json_t *ln_mfu_progress_fields(const ln_mfu *m) {
  if (!m || !m->have_fig || m->fig.flops_per_s < 0) return NULL;
  json_t *o = json_pack("{s:f}", "model_flops_per_s", m->fig.flops_per_s);
  if (o && m->fig.mfu >= 0) json_object_set_new(o, "mfu", json_real(m->fig.mfu));
  return o;
}

/* ---- the run's sum and the sentence -------------------------------------------------------- */

void ln_mfu_run_init(ln_mfu_run *r) {
  memset(r, 0, sizeof *r);
  r->mfu = -1;
}

void ln_mfu_run_add(ln_mfu_run *r, const ln_mfu_figure *f) {
  if (!f || f->ranks == 0) return;
  r->reported = 1;
  /* Read back from an event log, a figure may hold anything: only finite sums are taken. */
  double flops = r->flops + f->train_flops, peak_s = r->peak_flop_s + f->peak_flops * f->train_s;
  if (f->peak_flops > 0 && f->train_s > 0 && f->train_flops >= 0 && isfinite(flops) && isfinite(peak_s) &&
      peak_s > 0) {
    r->flops = flops;
    r->peak_flop_s = peak_s;
    r->train_s += f->train_s;
    r->mfu = r->flops / r->peak_flop_s;
    r->source = f->source;
    snprintf(r->peak, sizeof r->peak, "%s", f->peak);
    return;
  }
  if (r->mfu >= 0) return; /* an earlier attempt's figure stands */
  /* Nothing known yet: say why (an unknown device; the CPU peak still being measured; a rank that
   * reported once only, which gives no rate). */
  r->source = f->source == LN_PEAK_UNKNOWN || f->source == LN_PEAK_PENDING ? f->source : LN_PEAK_NONE;
  snprintf(r->peak, sizeof r->peak, "%s", f->peak);
}

void ln_mfu_phrase(char *buf, size_t size, double goodput_pct, double mfu, ln_peak_source source, const char *peak) {
  if (mfu < 0) {
    if (source == LN_PEAK_PENDING)
      snprintf(buf, size, "MFU not measured yet (%s)", peak);
    else if (source == LN_PEAK_UNKNOWN)
      snprintf(buf, size, "MFU unknown (%s)", peak);
    else
      snprintf(buf, size, "MFU not measured yet (fewer than two FLOPs reports of a rank)");
    return;
  }
  if (goodput_pct >= 0)
    snprintf(buf, size, "goodput %.1f%% × MFU %.1f%% = useful work %.1f%% (MFU of %s)", goodput_pct, 100 * mfu,
             goodput_pct * mfu, peak);
  else
    snprintf(buf, size, "MFU %.1f%% of %s", 100 * mfu, peak);
}

void ln_mfu_fmt_rate(char *buf, size_t size, double v) {
  static const char *const units[] = {"", "k", "M", "G", "T", "P", "E"};
  int u = 0;
  while (v >= 1000 && u < 6) {
    v /= 1000;
    u++;
  }
  snprintf(buf, size, "%.*f %sFLOP/s", v < 10 ? 2 : v < 100 ? 1 : 0, v, units[u]);
}
