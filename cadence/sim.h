/* cadence/sim.h: a discrete-event simulator of a training run under Poisson failures, driving the
 * real cadence controller (the same ftl_cadence code a training program uses) or a fixed interval.
 * Used by tests/cadence and bench/cadence; not part of the public API a training program includes.
 *
 * The model (docs/cadence.md, "The simulator"): compute in steps of step_s; a checkpoint blocks
 * stall_s (plus any wait for the previous one still being written) and becomes durable durable_s
 * after it started; failures arrive as a Poisson process over wall time (during compute, stalls and
 * restarts alike) with mean mtbf_s; a failure rolls back to the last durable checkpoint and costs
 * restart_s, during which another failure may come. Deterministic given the seed. */
#ifndef FTL_CADENCE_SIM_H
#define FTL_CADENCE_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "ftl/cadence.h"
#include "ftl/core.h"

/* ftl's generator (xoshiro256**, ftl/core.h): the same sequence on every machine. */
typedef ftl_rng cd_sim_rng;
static inline void cd_sim_rng_seed(cd_sim_rng *r, uint64_t seed) { ftl_rng_seed(r, seed); }
static inline uint64_t cd_sim_rng_next(cd_sim_rng *r) { return ftl_rng_next(r); }
/* Uniform in [0, 1) with 53 random bits. */
double cd_sim_rng_uniform(cd_sim_rng *r);
/* Exponential with the given mean. */
double cd_sim_rng_exp(cd_sim_rng *r, double mean);

typedef struct cd_cadence_sim_params {
  double mtbf_s;      /* true MTBF of the gang */
  double stall_s;     /* δ per checkpoint */
  double durable_s;   /* W, from the start of a save */
  double restart_s;   /* R */
  double step_s;      /* time of one step */
  double work_s;      /* useful compute the run must finish */
  int64_t world_size; /* G, for the exposure reported to the controller */
  uint64_t seed;
  int window_after;       /* also measure the waste after this many failures (0: no window) */
  double max_wall_factor; /* give up once wall time exceeds this × work_s (0 → 1000) */
} cd_cadence_sim_params;

typedef struct cd_cadence_sim_result {
  double wall_s;    /* = compute_s + stall_s + restart_s */
  double compute_s; /* all compute, kept or lost */
  double lost_s;    /* compute rolled back by failures */
  double stall_s;   /* checkpoint stalls (including waits and stalls cut by a failure) */
  double restart_s; /* restarts (including restarts cut by a failure) */
  double work_s;    /* useful compute: whole steps reaching the end */
  double waste;     /* 1 − work_s / wall_s */
  int64_t failures, checkpoints;
  int64_t last_interval_steps;
  bool completed;      /* false: gave up at max_wall_factor */
  bool window_reached; /* the window_after-th failure happened */
  double window_wall_s, window_work_s, window_waste;
} cd_cadence_sim_result;

/* Runs one simulated run. With c (borrowed; the caller created and configured it) the interval is
 * the controller's, asked again after every checkpoint and restart and fed every observation;
 * with c NULL it is fixed_steps. FTL_ERR_INVAL for bad parameters. Thread-safe for distinct c. */
ftl_err cd_cadence_sim_run(const cd_cadence_sim_params *p, ftl_cadence *c, int64_t fixed_steps,
                            cd_cadence_sim_result *out);

/* ---- multi-level runs (docs/cadence.md, "Multi-level cadence") ----------------------------------
 * The same model with levels: failures of each class (the lowest level that survives them) arrive
 * as independent Poisson processes over wall time, each class from its own generator, so every
 * policy run with one seed meets the same failures at the same wall times (the same trace). A
 * checkpoint of level k is one of every level below it too and stalls lv[k−1].stall_s (plus any wait
 * for the previous one); it is durable at those levels lv[k−1].durable_s after its start. A failure
 * of class i rolls back to the newest durable checkpoint of level ≥ i and restarts in the R of the
 * lowest level written at or above i (a checkpoint of a higher level is also in the lower ones). */
typedef struct cd_sim_ml_params {
  int levels;                                   /* 1..FTL_CADENCE_MAX_LEVELS: level k is lv[k−1] */
  ftl_cadence_level_cost lv[FTL_CADENCE_MAX_LEVELS]; /* true costs, and each class's rate per second */
  double step_s, work_s;
  int64_t world_size; /* for the exposure reported to the controller */
  uint64_t seed;
  double max_wall_factor; /* give up past this × work_s (0 → 1000) */
} cd_sim_ml_params;

typedef struct cd_sim_ml_result {
  double wall_s, work_s, waste, lost_s, stall_s, restart_s;
  int64_t failures[FTL_CADENCE_MAX_LEVELS];    /* by class */
  int64_t checkpoints[FTL_CADENCE_MAX_LEVELS]; /* by level */
  bool completed;
} cd_sim_ml_result;

/* With c (borrowed; levels set on it, all of 1..p->levels) the intervals are the controller's
 * (ftl_cadence_decide_levels, asked after every checkpoint and restart, fed every observation); with
 * c NULL they are interval_steps[k−1] for level k (each a multiple of the one below; 0: not written;
 * the top level must be written). FTL_ERR_INVAL for bad parameters. */
ftl_err cd_cadence_sim_ml_run(const cd_sim_ml_params *p, ftl_cadence *c, const int64_t *interval_steps,
                              cd_sim_ml_result *out);

#endif
