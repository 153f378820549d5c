/* launcher/mfu.h: model FLOPs utilisation of an attempt (docs/gpu.md, "Useful work: MFU"): the
 * gang's model FLOPs per second, from the running totals its ranks report
 * (ftl_step_done_flops), over the gang's peak, the sum of each rank's device's peak
 * (launcher/peak_flops.h): the job spec's mfu.peak_tflops, else the table's row for the GPU the
 * rank uses (local rank mod the GPUs its host's agent reported), else a measured CPU peak times the
 * rank's share of its host's cores. Two figures: over the recent window (LN_MFU_WINDOW_MS of each
 * rank's own clock) and over the attempt's training time so far (each rank's first report to its
 * last). Rates come from two reports of one rank, timed by that rank's clock, so neither the
 * heartbeats' throttle nor a relay's batching blurs them.
 *
 * Also here: the attempt's `mfu` events (docs/formats/events.md), the sum over a run's attempts and
 * the one sentence every view prints ("goodput 92.1% × MFU 38.0% = useful work 35.0%"). Not here:
 * feeding it the ranks' messages (supervise.c), reading the events back (runview.c). Not
 * thread-safe. */
#ifndef FTL_LAUNCHER_MFU_H
#define FTL_LAUNCHER_MFU_H

#include <jansson.h>
#include <stddef.h>

#include "ftl/error.h"
#include "launcher/events.h"
#include "launcher/peak_flops.h"

#define LN_MFU_WINDOW_MS 30000
/* How often the launcher writes an `mfu` event while FLOPs arrive (and once at the attempt's end). */
#define LN_MFU_EVENT_EVERY_MS 10000
/* How long an attempt's end waits for a CPU peak still being measured (it takes about a second). */
#define LN_MFU_CPU_WAIT_MS 3000

typedef struct ln_mfu_opts {
  ln_precision precision; /* the table's column (the job spec's mfu.precision; default bf16) */
  double peak_tflops;     /* mfu.peak_tflops: every rank's device's peak, overriding the table; 0: none */
} ln_mfu_opts;

typedef struct ln_mfu ln_mfu;

ftl_err ln_mfu_create(int world, const ln_mfu_opts *o, ln_mfu **out, ftl_diag *d);
void ln_mfu_destroy(ln_mfu *m);

/* A rank is through ftl_init (its `ready`): its host, its local rank and its host's online CPUs. */
void ln_mfu_note_rank(ln_mfu *m, int rank, const char *host, int local_rank, int cpus);
/* A host's GPUs as its agent reported them (a gpu_health message's gpus: index, name). */
void ln_mfu_note_gpus(ln_mfu *m, const char *host, const json_t *gpus);
/* A rank's message that may carry its FLOPs so far (first_step, step, bye: flops, flops_ms);
 * one without them, or one older than the last taken, is ignored. */
void ln_mfu_note_flops(ln_mfu *m, int rank, const json_t *msg);
/* The same from figures already read (a heartbeat of a relay's batch: rendezvous/server.h). */
void ln_mfu_note_flops_at(ln_mfu *m, int rank, double flops, double flops_ms);
/* Whether any rank reported FLOPs this attempt. */
int ln_mfu_any(const ln_mfu *m);

/* Where the gang's peak came from. */
typedef enum ln_peak_source {
  LN_PEAK_NONE = 0, /* no rank reported FLOPs */
  LN_PEAK_SPEC,     /* the job spec's mfu.peak_tflops */
  LN_PEAK_TABLE,    /* the GPUs' names in the table */
  LN_PEAK_CPU,      /* the measured CPU GEMM peak */
  LN_PEAK_MIXED,    /* GPUs from the table and CPUs measured */
  LN_PEAK_PENDING,  /* the CPU peak is still being measured */
  LN_PEAK_UNKNOWN,  /* a rank's device is not in the table and no override: never a guess */
} ln_peak_source;

/* "spec", "table", "cpu", "mixed", "pending", "unknown" ("" for none). */
const char *ln_peak_source_name(ln_peak_source s);

typedef struct ln_mfu_figure {
  int ranks;               /* ranks that reported FLOPs (0: nothing to say) */
  double model_flops;      /* the gang's FLOPs so far this attempt (the ranks' latest totals) */
  double flops_per_s;      /* over the recent window; -1 until some rank reported twice */
  double window_s;
  double avg_flops_per_s;  /* over the training time so far; -1 as above */
  double train_s;          /* the training time: the longest rank's first report to its last */
  double train_flops;      /* the FLOPs of that time (a rank's first report's are before it) */
  ln_peak_source source;
  double peak_flops;       /* the gang's peak FLOP/s; 0 when not known */
  char peak[200];          /* what it is, said as such: "2 × NVIDIA H100 80GB HBM3 (H100 SXM, bf16
                              989.4 TFLOPS each)", "a measured CPU GEMM peak (...)"; for unknown the
                              reason: "no peak for 'NAME'; set mfu.peak_tflops" */
  double mfu, avg_mfu;     /* 0..1 (more only if the peak is wrong); -1 when not known */
} ln_mfu_figure;

/* The figure now. Starts the CPU peak's measurement when a rank needs it (it is then pending). */
void ln_mfu_compute(ln_mfu *m, ln_mfu_figure *f);

/* The `mfu` event's fields (docs/formats/events.md) for f; final: the attempt's last. */
json_t *ln_mfu_event_fields(const ln_mfu_figure *f, int final);

/* The figure an `mfu` event says (ln_mfu_event_fields' inverse; any object is accepted, its
 * missing or wrong-typed fields read as not known). *final_out, when not NULL: its `final`. */
void ln_mfu_figure_from_event(const json_t *line, ln_mfu_figure *f, int *final_out);

/* The launcher loop's once-a-second turn: the figure recomputed (O(ranks)), and an `mfu` event
 * written every LN_MFU_EVENT_EVERY_MS while FLOPs arrive. Nothing without FLOPs. */
void ln_mfu_tick(ln_mfu *m, ln_events *events, int attempt);
/* The attempt's end: a CPU peak still being measured awaited (LN_MFU_CPU_WAIT_MS at most), the
 * final `mfu` event written and the figure copied to *out (ranks 0 when no FLOPs came). */
void ln_mfu_finish(ln_mfu *m, ln_events *events, int attempt, ln_mfu_figure *out);
/* For rank 0's `progress` event: {"mfu", "model_flops_per_s"} of the latest figure (a new
 * reference), or NULL when there is none yet. */
json_t *ln_mfu_progress_fields(const ln_mfu *m);

/* A run's attempts summed (run.c's summary): their training FLOPs over their peak-seconds. */
typedef struct ln_mfu_run {
  int reported;            /* some attempt's ranks reported FLOPs */
  double flops, peak_flop_s, train_s; /* over the attempts with a known peak */
  double mfu;              /* flops / peak_flop_s, -1 when no attempt's peak is known */
  ln_peak_source source;   /* the last known attempt's; while none is known, UNKNOWN or PENDING (the
                              reason's), or NONE (a rank reported once only: no rate yet) */
  char peak[200];          /* its peak (or the reason none is known) */
} ln_mfu_run;

void ln_mfu_run_init(ln_mfu_run *r);
/* Adds an attempt's figure: its final one, or a running attempt's latest (ln_runview_mfu). */
void ln_mfu_run_add(ln_mfu_run *r, const ln_mfu_figure *attempt);

/* The sentence: "goodput 92.1% × MFU 38.0% = useful work 35.0% (MFU of PEAK)", without the goodput
 * part when goodput_pct < 0 ("MFU 38.0% of PEAK"); "MFU unknown (REASON)" when mfu < 0 with an
 * unknown source, "MFU not measured yet (the CPU peak is being measured)" while pending. */
void ln_mfu_phrase(char *buf, size_t size, double goodput_pct, double mfu, ln_peak_source source, const char *peak);

/* A rate of FLOPs for people: "39.9 GFLOP/s", "1.98 PFLOP/s". */
void ln_mfu_fmt_rate(char *buf, size_t size, double flops_per_s);

/* "spec" ... back to the enum (runview reads the events); LN_PEAK_NONE for anything else. */
ln_peak_source ln_peak_source_parse(const char *name);

#endif
