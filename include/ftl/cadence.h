/* ftl/cadence.h: how often to checkpoint, derived from the measured checkpoint cost and the
 * measured failure rate (docs/cadence.md).
 *
 * Four parts:
 *   1. the formulas: Young's and Daly's optimum interval and the expected waste of an interval;
 *   2. the controller (ftl_cadence): fed what a run observes (checkpoint stall δ, time to durable
 *      W, restart time R, step time, failures, exposure), it answers with an interval in whole
 *      steps and a sentence that explains it;
 *   3. failure ledgers: the run's RUNDIR/failures.jsonl (docs/formats/failures.md) and a fleet
 *      ledger shared by jobs (docs/formats/fleet-ledger.md), read into the controller's estimate
 *      (failures and exposure into M, measured restarts into R) and appended to safely by
 *      concurrent writers;
 *   4. multi-level checkpoints (L1 node memory, L2 partner copy, L3 shared directory): the model of a
 *      nested pattern of levels and its optimizer, failure causes to levels, and the controller's
 *      per-level intervals (ftl_cadence_set_levels, ftl_cadence_decide_levels, ftl_cadence_due_level).
 *
 * Units: times in seconds (double), exposure in rank-hours (one rank for one hour of wall time;
 * with one GPU per rank this is a GPU-hour), failure rates per rank-hour, the gang's MTBF in hours.
 *
 * Not here: agreement across ranks. The controller is local to one process. The intended use is
 * that rank 0 runs it and the decision is made the same on every rank by the caller (for example
 * broadcast, or agreed as part of a checkpoint commit), so every rank checkpoints at the same step.
 * Not here either: writing the ledgers' run-side records (the launcher does that). */
#ifndef FTL_CADENCE_H
#define FTL_CADENCE_H

#include "ftl/export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- formulas (pure; thread-safe) ------------------------------------------------------------- */

/* Young (1974): √(2δM). stall_s ≥ 0, mtbf_s > 0; returns 0 for invalid input. */
FTL_API double ftl_cadence_young_s(double stall_s, double mtbf_s);

/* Daly (2006), higher order: √(2δM)·[1 + ⅓√(δ/2M) + ⅑(δ/2M)] − δ for δ < 2M, and M for δ ≥ 2M.
 * Returns 0 for invalid input (negative δ, M ≤ 0, not finite). */
FTL_API double ftl_cadence_daly_s(double stall_s, double mtbf_s);

/* Expected waste fraction of compute interval τ, first order: δ/τ + (τ/2 + W + R)/M.
 * Can exceed 1 where the first-order model does not hold (τ comparable to M). */
FTL_API double ftl_cadence_waste_first_order(double interval_s, double stall_s, double durable_s, double restart_s,
                                     double mtbf_s);

/* Expected waste fraction from Daly's exponential model, with W charged like restart time
 * (a failure inside the W window also loses the checkpoint being written):
 *   wall / work = M·e^{(R+W)/M}·(e^{(τ+δ)/M} − 1) / τ,  waste = 1 − work / wall.
 * Always in [0, 1]; this is the figure the controller reports. */
FTL_API double ftl_cadence_waste(double interval_s, double stall_s, double durable_s, double restart_s, double mtbf_s);

/* ---- failure causes --------------------------------------------------------------------------- */

typedef enum ftl_cadence_cause_class {
  FTL_CADENCE_CAUSE_FAILURE = 0,     /* counts toward the failure rate: moves M */
  FTL_CADENCE_CAUSE_NOT_FAILURE = 1, /* a user error, a misconfiguration, a planned preemption */
  FTL_CADENCE_CAUSE_UNKNOWN = 2,     /* a cause this version does not know: not counted, warned */
} ftl_cadence_cause_class;

/* Classifies a ledger `cause` (docs/cadence.md has the table). `step` is the record's highest
 * step (-1 when no step ran): a crash (exit_code, signal) before the first step is a start-up
 * error of the program, not a hardware failure. Thread-safe. */
FTL_API ftl_cadence_cause_class ftl_cadence_classify(const char *cause, int64_t step);

/* ---- ledger records --------------------------------------------------------------------------- */

typedef enum ftl_cadence_record_kind {
  FTL_CADENCE_REC_FAILURE = 1,  /* a failure record (run ledger line, or fleet "failure") */
  FTL_CADENCE_REC_EXPOSURE = 2, /* an "exposure" record */
  FTL_CADENCE_REC_RESTART = 3,  /* a "restart" record: one measured restart time R */
  FTL_CADENCE_REC_GPU_HEALTH = 4, /* a "gpu_health" record: a GPU's verdict changed (fleet ledgers) */
} ftl_cadence_record_kind;

/* One host's share of an exposure record (its ranks × the attempt's wall time). */
typedef struct ftl_cadence_host_hours {
  char host[64];
  double rank_hours;
} ftl_cadence_host_hours;

/* An exposure record has at most this many hosts in its breakdown (a larger gang's is written as
 * several records, whose exposures add up). */
#define FTL_CADENCE_MAX_RECORD_HOSTS 256

/* One parsed ledger line. Strings are copied (truncated to fit, NUL-terminated; a GPU's UUID and a
 * verdict too long to fit are refused instead). */
typedef struct ftl_cadence_record {
  ftl_cadence_record_kind kind;
  ftl_cadence_cause_class cls; /* failures only */
  char cause[32];              /* failures; restarts: the failure's cause ("" when absent) */
  char job[128];               /* "" when absent */
  char host[64];               /* "" when absent */
  int64_t wall_us;             /* 0 when absent */
  int64_t attempt;             /* -1 when absent */
  int64_t step;                /* -1 when absent (restarts: the step the gang restored) */
  int64_t world_size;          /* 0 when absent */
  double rank_hours;           /* exposure only */
  double restart_s;            /* restarts only: the failure's detection to the first resumed step */
  /* gpu_health records (and a gpu_failed failure's gpu, when known) */
  char gpu[96];                /* NVML's UUID of the GPU; "" when absent */
  char gpu_name[96];           /* NVML's name */
  int64_t gpu_index;           /* NVML's index; -1 when absent (append: written as given) */
  char verdict[16];            /* "healthy", "degraded" or "failed" */
  char reason[256];            /* why */
  char addrs[256];             /* failures, gpu_health: the host's IPv4 addresses, space-separated ("": none
                                  known); append cuts them at a whole address */
  /* An exposure's per-host breakdown. Append: n_hosts entries (borrowed; at most
   * FTL_CADENCE_MAX_RECORD_HOSTS); parse: how many the line had, hosts NULL (the breakdown is read
   * by ftl_cadence_load_ledger and ftl_cadence_fleet_hosts_load). */
  const ftl_cadence_host_hours *hosts;
  size_t n_hosts;
} ftl_cadence_record;

/* Parses one line (without its newline; need not be NUL-terminated). Unknown fields are ignored.
 * FTL_ERR_CORRUPT for a line that is not a JSON object or lacks a required field (detail in d,
 * naming the field); FTL_ERR_UNSUPPORTED for a version this code does not read. Thread-safe. */
FTL_API ftl_err ftl_cadence_parse_record(const char *line, size_t len, ftl_cadence_record *out, ftl_diag *d);

/* What one ledger contributed. */
typedef struct ftl_cadence_load_stats {
  int64_t lines;           /* non-empty lines read */
  int64_t failures;        /* counted failures */
  int64_t not_failures;    /* records of causes that do not move M (and unknown causes) */
  int64_t duplicates;      /* records already loaded (same kind, job, attempt, wall_us) */
  int64_t skipped;         /* malformed lines (each one logged as a warning) */
  double rank_hours;       /* exposure added */
  int64_t restarts;        /* measured restarts taken into R */
  char first_problem[512]; /* "PATH:LINE: reason" of the first skipped line, "" if none */
} ftl_cadence_load_stats;

/* Appends one record to a fleet ledger (docs/formats/fleet-ledger.md), or to a run's
 * failures.jsonl (the launcher's restart records go through here to both): opens with O_APPEND,
 * takes an exclusive flock (waiting at most timeout_ms), repairs a torn last line left by a
 * crashed writer, writes the line with one write(), fsyncs, unlocks. Safe for any number of
 * writers in any number of processes on a file system with flock. The record is borrowed.
 * kind, and for failures cause, must be set (restarts: restart_s ≥ 0); wall_us 0 means now.
 * Thread-safe. Detail in d. */
FTL_API ftl_err ftl_cadence_fleet_append(const char *path, const ftl_cadence_record *rec, int64_t timeout_ms, ftl_diag *d);

/* ---- the fleet's per-host history (docs/formats/fleet-ledger.md, "Per-host history") ------------ */

typedef enum ftl_cadence_host_standing {
  FTL_CADENCE_HOST_OK = 0,       /* nothing against it in the window */
  FTL_CADENCE_HOST_DEGRADED = 1, /* a GPU whose latest verdict in the window is degraded */
  FTL_CADENCE_HOST_BAD = 2,      /* a GPU failed in the window, or ≥ 2 counted failures blamed on it */
} ftl_cadence_host_standing;

/* "ok", "degraded", "bad". */
FTL_API const char *ftl_cadence_host_standing_name(ftl_cadence_host_standing s);

/* One host's history in the window. */
typedef struct ftl_cadence_fleet_host {
  char host[64];
  ftl_cadence_host_standing standing;
  int64_t failures;        /* counted failures blamed on it (ftl_cadence_classify says FAILURE) */
  int64_t gpu_failures;    /* of which cause gpu_failed, plus gpu_health records saying failed */
  int64_t gpus_degraded;   /* GPUs (by UUID) whose latest verdict is degraded */
  int64_t gpus_failed;     /* GPUs whose latest verdict is failed */
  double rank_hours;       /* exposure on it (exposure records' per-host breakdown) */
  int64_t last_seen_us;    /* newest record naming it (wall_us); 0 when none had a time */
  int64_t bad_since_us;    /* when the newest event behind its standing happened (0: none) */
  char reason[256];        /* what stands against it: "GPU GPU-abcd failed (row remapping failed)" */
  char job[128];           /* the job of the newest event behind its standing ("" when not said) */
  char addrs[256];         /* its IPv4 addresses from the newest record that said them (a hostfile may
                              name it by address), space-separated; "" when none did */
} ftl_cadence_fleet_host;

typedef struct ftl_cadence_fleet_hosts {
  ftl_cadence_fleet_host *hosts; /* worst first (bad, degraded, ok; then most failures, then name) */
  size_t count;
  int64_t lines, skipped;        /* lines read; malformed lines skipped (each warned about) */
  char first_problem[512];       /* "PATH:LINE: reason" of the first skipped line, "" if none */
} ftl_cadence_fleet_hosts;

/* Reads a fleet ledger (shared flock, at most 256 MiB, as ftl_cadence_load_ledger) into per-host
 * summaries of the records whose wall_us is within window_s seconds before now_us (records without
 * wall_us count as recent). FTL_ERR_NOTFOUND when the file does not exist; FTL_ERR_IO / FTL_ERR_CORRUPT
 * when it is not a regular file or cannot be read; FTL_ERR_RANGE over 256 MiB; FTL_ERR_NOMEM.
 * Free out with ftl_cadence_fleet_hosts_free. Thread-safe. */
FTL_API ftl_err ftl_cadence_fleet_hosts_load(const char *path, int64_t now_us, double window_s,
                                             ftl_cadence_fleet_hosts *out, ftl_diag *d);
/* The same from bytes in memory (name is used in messages as PATH). */
FTL_API ftl_err ftl_cadence_fleet_hosts_parse(const char *data, size_t size, const char *name, int64_t now_us,
                                              double window_s, ftl_cadence_fleet_hosts *out, ftl_diag *d);
/* The summary of host in h, or NULL. */
FTL_API const ftl_cadence_fleet_host *ftl_cadence_fleet_hosts_find(const ftl_cadence_fleet_hosts *h, const char *host);
/* Accepts a zeroed or NULL h. */
FTL_API void ftl_cadence_fleet_hosts_free(ftl_cadence_fleet_hosts *h);

/* ---- the controller --------------------------------------------------------------------------- */

typedef struct ftl_cadence ftl_cadence;

typedef struct ftl_cadence_config {
  int64_t world_size;        /* G: ranks in the gang (required, ≥ 1) */
  double fleet_rate;         /* prior failure rate per rank-hour; 0 → 2e-5 */
  double prior_events;       /* weight of the prior in failures (α₀); 0 → 1 */
  double stall_s;            /* δ until a checkpoint has been measured; 0 → 1 s */
  double durable_s;          /* W until measured (from the start of the save, as ftl_ckpt_stats) */
  double restart_s;          /* R until measured; 0 → 60 s */
  double step_s;             /* step time until measured; 0 → unknown (interval needs one step) */
  double preempt_notice_s;   /* notice before a preemption ends the gang; 0 → none */
  double preempt_max_loss_s; /* when a save does not fit in that notice: τ ≤ this; 0 → no bound */
  int64_t pin_steps;         /* > 0: checkpoint every pin_steps steps, whatever the optimum */
  double pin_s;              /* > 0 (and no pin_steps): every pin_s seconds of steps */
  int window;                /* checkpoints in the moving median of δ and W; 0 → 8 (max 64) */
} ftl_cadence_config;

/* Fills the defaults above (world_size 1). Thread-safe. */
FTL_API void ftl_cadence_config_init(ftl_cadence_config *cfg);

/* Why the interval is not the optimum (bits of ftl_cadence_decision.clamps). */
enum {
  FTL_CADENCE_CLAMP_DURABLE = 1,  /* raised to W: at most one checkpoint in flight */
  FTL_CADENCE_CLAMP_PREEMPT = 2,  /* lowered to the preemption bound */
  FTL_CADENCE_CLAMP_ONE_STEP = 4, /* raised to one step */
};

typedef struct ftl_cadence_decision {
  int64_t interval_steps;                       /* checkpoint every this many steps (≥ 1) */
  double interval_s;                            /* interval_steps × step_s */
  int64_t optimum_steps;                        /* the derived interval (clamped), whether pinned or not */
  double daly_s;                                /* Daly's τ before clamps and rounding */
  double stall_s, durable_s, restart_s, step_s; /* the estimates used */
  double mtbf_h;                                /* the gang's M */
  double rate;                                  /* λ̂ per rank-hour */
  double failures;                              /* k: counted failures (ledgers and this run) */
  double rank_hours;                            /* E: exposure (ledgers and this run) */
  double waste;                                 /* expected waste fraction of interval_steps */
  double waste_optimum;                         /* expected waste fraction of optimum_steps */
  unsigned clamps;                              /* FTL_CADENCE_CLAMP_* of the derived interval */
  bool pinned;                                  /* interval_steps is the user's pin */
  bool stall_measured, durable_measured, restart_measured;
} ftl_cadence_decision;

/* Creates a controller; cfg is borrowed (copied). *out is destroyed by ftl_cadence_destroy.
 * FTL_ERR_INVAL for a bad config (detail in d). Not collective. Thread-safe. */
FTL_API ftl_err ftl_cadence_create(const ftl_cadence_config *cfg, ftl_cadence **out, ftl_diag *d);
/* Accepts NULL. */
FTL_API void ftl_cadence_destroy(ftl_cadence *c);

/* Everything below takes a controller that only one thread uses at a time (the handle has no
 * lock; callers serialize). Pointers are borrowed unless said otherwise. */

/* Reads a ledger (the run's failures.jsonl or a fleet ledger, one format per line, all kinds
 * may be mixed) into the estimate: failures and exposure into M, restart records into R (as
 * ftl_cadence_observe_restart's, the newest `window` of them by wall_us). Malformed lines are
 * skipped and each is logged as a warning naming PATH:LINE; a record already loaded (same kind,
 * job, attempt and wall_us, from this or another ledger) is not counted twice, so loading a
 * ledger again is harmless.
 * FTL_ERR_NOTFOUND when the file does not exist, FTL_ERR_IO when it cannot be read. stats may
 * be NULL. Marks the decision for re-derivation. */
FTL_API ftl_err ftl_cadence_load_ledger(ftl_cadence *c, const char *path, ftl_cadence_load_stats *stats, ftl_diag *d);

/* The history a training program starts from: $FTL_RUN_DIR/failures.jsonl (the launcher's run
 * ledger) and the fleet ledger named by $FTL_FLEET_LEDGER, each loaded if its variable is set and
 * the file exists (a missing file is no history, not an error); and the gang's hosts from
 * $FTL_GANG_HOSTS (ftl_cadence_set_gang_hosts; a malformed value is warned about and ignored). Other errors (unreadable file, out
 * of memory) are returned with detail in d. Either stats pointer may be NULL. Reads the
 * environment: not safe against a concurrent setenv. */
FTL_API ftl_err ftl_cadence_load_from_env(ftl_cadence *c, ftl_cadence_load_stats *run_stats,
                                  ftl_cadence_load_stats *fleet_stats, ftl_diag *d);

/* A checkpoint at `step` blocked the loop stall_s (δ, including any wait for the previous one)
 * and became durable durable_s after its start (W; < 0 when not known yet: report it later with
 * ftl_cadence_observe_durable). Re-derives the interval (the next one counts from `step`). */
FTL_API ftl_err ftl_cadence_observe_checkpoint(ftl_cadence *c, int64_t step, double stall_s, double durable_s);
FTL_API ftl_err ftl_cadence_observe_durable(ftl_cadence *c, double durable_s);

/* n_steps steps took total_s seconds of wall time (one step: n_steps = 1). Updates the step-time
 * estimate (EWMA, weight 0.1 per step); does not re-derive an existing decision by itself. */
FTL_API ftl_err ftl_cadence_observe_steps(ftl_cadence *c, int64_t n_steps, double total_s);

/* rank_hours of exposure (wall time × ranks, stalls and restarts included) passed. */
FTL_API ftl_err ftl_cadence_observe_exposure(ftl_cadence *c, double rank_hours);

/* A failure that counts (a hardware-like failure of this run seen in-process, as the simulator
 * does); use ftl_cadence_load_ledger for failures recorded by the launcher. Re-derives. */
FTL_API ftl_err ftl_cadence_observe_failure(ftl_cadence *c);

/* The gang restarted from restored_step (the next interval counts from it); restart_s is the
 * measured restart time R (< 0: not measured). R is the median of the newest `window` measured
 * restarts; one observed here is newer than any read from a ledger. Re-derives. */
FTL_API ftl_err ftl_cadence_observe_restart(ftl_cadence *c, int64_t restored_step, double restart_s);

/* The restart time R the controller uses now: the median of the newest `window` measured restarts
 * (observe_restart and the ledgers' restart records), or cfg.restart_s when none was measured.
 * *samples_out: how many measured restarts that median is over (0: R is assumed). Needs no step
 * time. Either out may be NULL. */
FTL_API ftl_err ftl_cadence_restart_estimate(ftl_cadence *c, double *restart_s_out, int *samples_out);

/* The gang changed size (elastic shrink or grow). Re-derives. */
FTL_API ftl_err ftl_cadence_set_world_size(ftl_cadence *c, int64_t world_size);

/* One host of the gang and the ranks it runs. */
typedef struct ftl_cadence_gang_host {
  char host[64];
  int64_t ranks;
} ftl_cadence_gang_host;

/* The gang's hosts (copied): from now on the gang's failure rate is the sum over them of ranks ×
 * that host's rate, each host's rate shrunk toward the pooled rate λ̂:
 * (α₀ + k_h) / (α₀/λ̂ + E_h), k_h the counted failures blamed on the host and E_h its exposure
 * (rank-hours) in the ledgers loaded (docs/cadence.md, "Per-host rates"). Ranks not on a listed
 * host are charged λ̂. n 0 goes back to the pooled rate alone. A host with no history gets λ̂, so
 * a gang of such hosts decides as without the list. FTL_ERR_INVAL for n > 0 without hosts or a
 * host with ranks < 1. Re-derives. */
FTL_API ftl_err ftl_cadence_set_gang_hosts(ftl_cadence *c, const ftl_cadence_gang_host *hosts, size_t n);

/* Parses FTL_GANG_HOSTS's value ("host:ranks,host:ranks", docs/formats/launch-env.md) into at most
 * max hosts (*n_out of them). FTL_ERR_INVAL, naming what is wrong, for a malformed value. */
FTL_API ftl_err ftl_cadence_parse_gang_hosts(const char *value, ftl_cadence_gang_host *hosts, size_t max, size_t *n_out,
                                            ftl_diag *d);

/* Pins a fixed cadence (steps > 0, or seconds > 0), or unpins (both 0). Re-derives. */
FTL_API ftl_err ftl_cadence_pin(ftl_cadence *c, int64_t steps, double seconds);

/* The current decision (derived again only if something that re-derives was observed).
 * FTL_ERR_STATE when no step time is known yet. out may be NULL. */
FTL_API ftl_err ftl_cadence_decide(ftl_cadence *c, ftl_cadence_decision *out);
FTL_API ftl_err ftl_cadence_interval_steps(ftl_cadence *c, int64_t *steps_out);

/* Whether a checkpoint is due after `step` completed: step − last checkpoint (or restored) step
 * ≥ the interval. FTL_ERR_STATE when no step time is known yet. */
FTL_API ftl_err ftl_cadence_due(ftl_cadence *c, int64_t step, bool *due_out);

/* The sentence explaining the current decision, e.g. "checkpoint every 412 steps (about 9.8 min):
 * δ = 0.31 s, W = 2.1 s, R = 4.2 s (measured), M = 34 h from 3 failures in 96 rank-hours and the
 * prior; ..."; an estimate not measured yet says "(assumed)". Borrowed: valid until the next call on c. Never NULL. */
FTL_API const char *ftl_cadence_explain(ftl_cadence *c);


/* ---- multi-level checkpoints (docs/cadence.md, "Multi-level cadence") ---------------------------
 *
 * Levels: L1 = each host's newest shards in node-local memory, L2 = a copy of them on a partner
 * host, L3 = the shared run directory. A checkpoint of level k is also one of every level below it
 * (it is written there first), and a failure of class i (the lowest level that survives it) is
 * restored from the newest checkpoint of level ≥ i. The model and its optimizer (cadence/
 * multilevel.c) follow the Markov model of Moody, Bronevetsky, Mohror and de Supinski (SC'10): a
 * periodic, nested pattern, failures of every class striking compute, checkpoints and restarts. */

enum {
  FTL_CADENCE_LEVEL_NONE = 0, /* not a failure; or, from ftl_cadence_due_level: no checkpoint due */
  FTL_CADENCE_LEVEL_L1 = 1,   /* node-local memory: survives a process failure */
  FTL_CADENCE_LEVEL_L2 = 2,   /* partner copy: survives the loss of one host (or link) */
  FTL_CADENCE_LEVEL_L3 = 3,   /* shared run directory: survives the loss of the job */
  FTL_CADENCE_MAX_LEVELS = 3,
};
/* A set of levels a job has: FTL_CADENCE_LEVEL_BIT(FTL_CADENCE_LEVEL_L1) | ... */
#define FTL_CADENCE_LEVEL_BIT(level) (1u << ((level) - 1))
#define FTL_CADENCE_LEVELS_ALL 7u

/* The lowest level of `levels` (a set of FTL_CADENCE_LEVEL_BIT) that survives a failure of ledger
 * cause `cause`: a process failure (exit_code, signal, hang, agent_lost) → L1; a lost host
 * (node_lost) → L2; a lost job (launcher: the whole launch failed) → L3; each taken up to the
 * lowest level the job has at or above it. FTL_CADENCE_LEVEL_NONE for a cause that is not a failure
 * (ftl_cadence_classify's table, without its step rule), an unknown cause, or no level at or
 * above it. Pure; thread-safe. */
FTL_API int ftl_cadence_cause_level(const char *cause, unsigned levels);

/* One level of the model, as seen by the pattern (index 0 is the lowest level the job writes). */
typedef struct ftl_cadence_level_cost {
  double stall_s;   /* δ_i: the loop blocked per checkpoint of this level (lower levels included) */
  double durable_s; /* W_i: from the start of that save until it is durable at this level */
  double restart_s; /* R_i: restart from this level */
  double rate;      /* λ_i per second: failures for which this level is the lowest survivor */
} ftl_cadence_level_cost;

/* A periodic pattern: a checkpoint every tau_s seconds of compute; the j-th one (j = 1, 2, ...)
 * is of level k+1 when j is a multiple of every[1]·…·every[k]. every[0] is 1; every[k] ≥ 1 for
 * the levels written, 0 for a level never written (and every level above it). */
typedef struct ftl_cadence_pattern {
  int levels; /* levels in the model, 1..FTL_CADENCE_MAX_LEVELS */
  double tau_s;
  int64_t every[FTL_CADENCE_MAX_LEVELS];
  double waste; /* the model's expected waste fraction of this pattern */
} ftl_cadence_pattern;

/* The model's expected waste fraction (1 − useful compute / wall time, in [0, 1]) of a pattern.
 * Returns 1 for an invalid pattern or costs. Pure; thread-safe. */
FTL_API double ftl_cadence_pattern_waste(const ftl_cadence_level_cost *lv, int levels, double tau_s,
                                         const int64_t *every);

/* The optimized pattern: the first-order optimum (each level's spacing at Young's interval for its
 * own rate and the cost it adds over the level below), rounded to integer ratios and refined on the
 * full model. With a single level written it is Daly's interval for that level. FTL_ERR_INVAL for
 * bad input (levels outside 1..3, negative or non-finite figures, no failures at all). */
FTL_API ftl_err ftl_cadence_pattern_optimize(const ftl_cadence_level_cost *lv, int levels, ftl_cadence_pattern *out);

/* The best pattern by exhaustive search: every[k] in 1..max_every for each level above the first
 * (and "never" for each), tau_s minimized for each. For checking the optimizer; cost grows like
 * (max_every+1)^(levels−1) patterns. FTL_ERR_INVAL as above, or max_every outside 1..256. */
FTL_API ftl_err ftl_cadence_pattern_brute_force(const ftl_cadence_level_cost *lv, int levels, int max_every,
                                               ftl_cadence_pattern *out);

/* The single-level plan on the same terms: only the top level (lv[levels−1]), at Daly's interval
 * for the total failure rate; every failure restores from it. out->levels is 1 and out->waste is
 * the model's waste of that plan. FTL_ERR_INVAL as above. */
FTL_API ftl_err ftl_cadence_pattern_single_level(const ftl_cadence_level_cost *lv, int levels,
                                                ftl_cadence_pattern *out);

/* ---- the controller with levels --------------------------------------------------------------- */

/* Levels for the controller (ftl_cadence_set_levels). */
typedef struct ftl_cadence_levels_config {
  unsigned levels;                                /* FTL_CADENCE_LEVEL_BIT set; must hold L3 */
  double stall_s[FTL_CADENCE_MAX_LEVELS];         /* δ of level i+1 until measured; 0 → cfg.stall_s */
  double durable_s[FTL_CADENCE_MAX_LEVELS];       /* W until measured; 0 → cfg.durable_s */
  double restart_s[FTL_CADENCE_MAX_LEVELS];       /* R from that level until measured; 0 → cfg.restart_s */
  double prior_share[FTL_CADENCE_MAX_LEVELS];     /* the prior's split of the fleet rate by class;
                                                     all 0 → 0.5 / 0.4 / 0.1 */
} ftl_cadence_levels_config;

/* Fills the defaults above (all three levels). Thread-safe. */
FTL_API void ftl_cadence_levels_config_init(ftl_cadence_levels_config *lc);

/* Turns on per-level cadence (lc borrowed, copied). Failures already counted keep their classes.
 * FTL_ERR_INVAL for a bad config. Re-derives. */
FTL_API ftl_err ftl_cadence_set_levels(ftl_cadence *c, const ftl_cadence_levels_config *lc);

/* A checkpoint of `level` blocked the loop stall_s and was durable at that level durable_s after its
 * start (< 0: not known). Moving medians per level, as observe_checkpoint's. Does not move the
 * single-level estimates. FTL_ERR_INVAL for a level the controller does not have. Re-derives. */
FTL_API ftl_err ftl_cadence_observe_checkpoint_level(ftl_cadence *c, int level, double stall_s, double durable_s);

/* A failure that counts, of a known class (the lowest level that survives it, 1..3); also counts as
 * ftl_cadence_observe_failure does. (observe_failure alone, with no class, counts toward L3: the
 * safe side.) Re-derives. */
FTL_API ftl_err ftl_cadence_observe_failure_level(ftl_cadence *c, int level);

typedef struct ftl_cadence_level_decision {
  unsigned levels;                                /* the levels the controller has */
  int64_t interval_steps[FTL_CADENCE_MAX_LEVELS]; /* level i+1 every this many steps (a multiple of the
                                                     level below's); 0: not written (or not configured) */
  double rate[FTL_CADENCE_MAX_LEVELS];            /* λ̂_i per rank-hour, prior included */
  double failures[FTL_CADENCE_MAX_LEVELS];        /* counted failures of each class */
  double stall_s[FTL_CADENCE_MAX_LEVELS], durable_s[FTL_CADENCE_MAX_LEVELS], restart_s[FTL_CADENCE_MAX_LEVELS];
  ftl_cadence_pattern plan;                       /* the optimized pattern over the configured levels */
  double waste;                                   /* the model's waste of interval_steps */
  double waste_single;                            /* the single-level plan's (top level at Daly's) */
  double step_s;
} ftl_cadence_level_decision;

/* The per-level decision. FTL_ERR_STATE when no step time is known yet or no levels were set. */
FTL_API ftl_err ftl_cadence_decide_levels(ftl_cadence *c, ftl_cadence_level_decision *out);

/* The highest level due at `step` (> 0); 0 when none. A checkpoint is due at the multiples of the
 * lowest level's interval (an absolute grid from step 0); it is of level k when at least
 * interval_steps[k−1] / (the lowest level's interval) checkpoints have passed since the last one of
 * level ≥ k, counted from observe_checkpoint_level (so report each checkpoint with its level).
 * FTL_ERR_STATE as decide_levels. */
FTL_API ftl_err ftl_cadence_due_level(ftl_cadence *c, int64_t step, int *level_out);

#ifdef __cplusplus
}
#endif
#endif
