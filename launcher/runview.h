/* launcher/runview.h: what a run's event log says, folded into one struct: the operator's view
 * that `ftl run`'s progress line and metrics textfile (fed live, one event at a time), `ftl status`
 * and `ftl report` (fed from RUNDIR/events.jsonl) all draw from. Reading the same events the same
 * way keeps the four in agreement.
 *
 * Not here: drawing (progress.c, prom.c, status.c, report.c), the files other than the event
 * log (status.c reads the checkpoints, the failure ledger and the verdict). */
#ifndef FTL_LAUNCHER_RUNVIEW_H
#define FTL_LAUNCHER_RUNVIEW_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"
#include "launcher/mfu.h"

typedef struct ln_rv_attempt {
  int attempt;
  int64_t start_us, end_us; /* attempt_start, attempt_end (0 while it runs) */
  int64_t first_step_us;    /* the startup event: every rank past its first step (0: not yet) */
  double startup_ms;        /* launch to first step (the startup event's total_ms) */
  double phase_ms[5];       /* its slowest rank per phase: launch, rendezvous, MPI init, communicator, first step */
  char launcher[16];        /* mpirun / srun */
  char outcome[24];         /* attempt_end's; "" while it runs */
  char cause[32];
  int exit_code, signal;
  int64_t last_step, committed_step;
  double stall_ms;      /* checkpoint stalls (rank 0's ckpt_saved) */
  int64_t committed_us; /* the last ckpt_committed of the attempt (0: none) */
  int64_t failure_us;   /* its failure event (0: none) */
  double backoff_ms;    /* the pause after it (its restart event), 0 if none */
  double started_ms;    /* its last rank_started's launch_ms: every program started (-1: not all yet) */
  int started, joined;  /* ranks started (rank_started), ranks that joined ftl_init (rank_ready) */
  char summary[256];
} ln_rv_attempt;

typedef struct ln_rv_sample { /* a progress event */
  int64_t t_us;
  int attempt;
  int64_t step, total_steps;
  double loss;         /* NaN when the program sent none */
  double tokens_per_s; /* -1 when not known */
  double mfu;          /* the launcher's latest MFU at this report (0..1), -1 when none (launcher/mfu.h) */
} ln_rv_sample;

typedef struct ln_rv_mark { /* a checkpoint commit or a restart */
  int64_t t_us;
  int attempt;
  int64_t step;
} ln_rv_mark;

typedef struct ln_rv_cadence { /* a cadence event (the example fine-tune's checkpoint decisions) */
  int64_t t_us;
  int64_t step, interval_steps;
  double step_s, mtbf_h, daly_s, stall_s, waste;
} ln_rv_cadence;

typedef struct ln_rv_standby { /* the standby gang's events (launcher/standby.h) */
  char state[16];     /* "" never had one; "starting", "parked", "activated", "lost" (it died),
                         "dropped" (ended by ftl), "off" (turned off for the run) */
  int for_attempt;    /* the attempt it was for */
  int64_t since_us;   /* when it entered state */
  int64_t rss_kb;     /* its parked ranks' resident memory (sum), -1 when not known */
  int64_t park_ms;    /* start to parked */
  int started, parked, activated, lost; /* how many of each (lost: deaths only) */
  char reason[160];   /* the latest loss's or turning off's reason */
  char parks_in[16];  /* the latest start's: "ftl_init", or "pyrun" (a Python program's runner) */
  int64_t preloaded;  /* modules its runner imported before parking (pyrun), -1 when not said */
} ln_rv_standby;

typedef struct ln_rv_gpu { /* a GPU's latest health verdict (gpu_health events; docs/gpu.md) */
  char host[64];
  int index;
  char uuid[96], name[96];
  char verdict[16];   /* "healthy", "degraded", "failed" */
  char reason[256];
  int64_t since_us;   /* the event that said it */
} ln_rv_gpu;

typedef struct ln_rv_gpu_change { /* a GPU's verdict or reason changed (kept with keep_series) */
  int64_t t_us;
  int attempt;
  char host[64];
  int index;
  char uuid[96];
  char verdict[16], reason[256];
} ln_rv_gpu_change;

typedef struct ln_rv_straggler { /* a straggler event, with its GPU's health (docs/gpu.md) */
  int64_t t_us;
  int attempt, rank;
  int local_rank;                 /* as the launcher mapped it to a GPU; -1 not known */
  char host[64];
  double compute_ms, others_median_ms, ratio;
  int host_suspect;
  int gpu;                        /* its GPU's index; -1: none known (no NVML on its host) */
  char uuid[96], verdict[16], reason[256]; /* that GPU's latest in its attempt (straggler, straggler_gpu,
                                              gpu_health) */
} ln_rv_straggler;

typedef struct ln_runview {
  int keep_series; /* keep every sample/mark/cadence (report); else only the latest */
  char job[128];
  int64_t run_start_us, last_us; /* the first run_start, the latest event */
  int running_run;               /* a run_start without its run_end yet */
  int ended;                     /* a run_end was seen (the latest run_start's) */
  int exit_code;                 /* the latest run_end's */
  int restarts;                  /* restart events */
  int max_restarts;
  char stop_reason[64];     /* the latest run_stopped's */
  int attempts_ended;       /* attempt_end events (the publish provenance's count of attempts) */
  ln_rv_attempt *attempts; /* in order of attempt_start */
  int n_attempts, cap_attempts;
  ln_rv_sample *samples;
  int n_samples, cap_samples;
  ln_rv_mark *commits, *restart_marks;
  int n_commits, cap_commits, n_restart_marks, cap_restart_marks;
  ln_rv_cadence *cadences;
  int n_cadences, cap_cadences;
  ln_rv_sample latest;          /* the latest progress event (step -1: none) */
  ln_rv_sample attempt_first;   /* the first progress event of latest's attempt (the step rate) */
  ln_rv_cadence latest_cadence; /* interval_steps 0: none */
  int64_t committed_step;        /* the highest committed step seen, -1 if none */
  int64_t committed_us;
  ln_rv_standby standby;
  ln_rv_gpu *gpus;  /* one per host and GPU index, in the order first seen */
  int n_gpus, cap_gpus;
  ln_rv_gpu_change *gpu_changes; /* every verdict change, in order (keep_series only; a first healthy
                                    reading is no change) */
  int n_gpu_changes, cap_gpu_changes;
  ln_rv_straggler *stragglers; /* every straggler event, in order (at most 4096) */
  int n_stragglers, cap_stragglers;
  /* The run_goodput event, when there is one (the run ended). */
  int have_goodput;
  double gp_wall_ms, gp_productive_ms, gp_startup_ms, gp_stall_ms, gp_lost_ms, gp_teardown_ms, gp_backoff_ms, gp_pct;
  double gp_unreported_ms;
  /* Model FLOPs utilisation (the `mfu` events, launcher/mfu.h): the latest figure and its attempt,
   * and the sum of the attempts' final figures (ln_runview_mfu adds the running attempt's). */
  int have_mfu;
  int mfu_attempt, mfu_final; /* the latest is its attempt's final figure */
  ln_mfu_figure mfu;
  ln_mfu_run mfu_finals;
  /* The end of the run after training: the gate's and the publish's events (0: none), when each
   * ended; the last attempt's end is when the gate began. */
  int64_t gate_us, publish_us;
  char gate_result[16], publish_result[16], publish_version[65];
} ln_runview;

/* Starts an empty view. keep_series: 1 to keep every sample (ftl report), 0 for the latest only. */
void ln_runview_init(ln_runview *rv, int keep_series);
void ln_runview_free(ln_runview *rv);

/* Folds one event line (an object with at least "event"; "t_us" and "attempt" when present) into
 * the view. Unknown events and fields are ignored. Out of memory drops a series point, never fails. */
void ln_runview_add(ln_runview *rv, const json_t *line);

/* Folds an event log's bytes (JSON lines; lines that are not objects are skipped) into rv. Any
 * bytes are accepted (tests/fuzz/fuzz_runview.c). */
void ln_runview_add_log(ln_runview *rv, const char *data, size_t size);

/* Reads RUNDIR/events.jsonl into rv (a torn last line is skipped). FTL_ERR_NOTFOUND when there is
 * no event log. */
ftl_err ln_runview_load(ln_runview *rv, const char *run_dir, ftl_diag *d);

/* The newest committed checkpoint step the log names: rank 0's ckpt_committed events and the
 * attempts' attempt_end committed_step; -1 when none. */
int64_t ln_runview_last_committed(const ln_runview *rv);

/* The GPU whose health stands for a rank's (docs/gpu.md, "GPU health (NVML)"): of the GPUs its host
 * reported, the one with NVML index local_rank mod their count (ftl_init gives local rank k device
 * k). NULL when its host reported none (no NVML there) or local_rank < 0. */
const ln_rv_gpu *ln_runview_gpu_of_rank(const ln_runview *rv, const char *host, int local_rank);

/* The goodput breakdown: the run_goodput event's when there is one, else estimated from the
 * attempts so far with the goodput arithmetic (launcher/goodput.c) up to now_us. */
typedef struct ln_rv_goodput {
  double wall_ms, productive_ms, startup_ms, stall_ms, lost_ms, teardown_ms, backoff_ms, pct;
  double unreported_ms; /* running time of a program that reports no steps (goodput.h) */
  int measured;         /* 0: no step was ever reported, so pct says nothing (a program without ftl) */
  int final;            /* 1: the run's own run_goodput */
} ln_rv_goodput;
ln_rv_goodput ln_runview_goodput(const ln_runview *rv, int64_t now_us);

/* The run's MFU so far (launcher/mfu.h's sum of its attempts: the ended ones' final figures and the
 * running one's latest). out->reported 0: no rank ever reported FLOPs; say nothing of MFU then. */
void ln_runview_mfu(const ln_runview *rv, ln_mfu_run *out);

#endif
