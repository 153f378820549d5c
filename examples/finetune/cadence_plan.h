/* examples/finetune/cadence_plan.h: when the fine-tune saves a checkpoint. Either every N steps
 * as the user pinned it (ftl's cadence controller then reports what that choice costs against
 * the optimum), or as the controller derives it from the measured stall, time to durable, step
 * time and the failure rate in the run's and the fleet's ledgers (docs/cadence.md). Rank 0
 * decides; the decision is shared at checkpoint steps only, so steps between pay nothing.
 *
 * With the job's checkpoint levels (L1 node memory, L2 a partner host's, L3 the run directory;
 * docs/checkpoint.md "Levels") each checkpoint also gets a level: derived, from the controller's
 * per-level intervals (ftl_cadence_due_level, docs/cadence.md "Multi-level cadence"); pinned in
 * steps, every pin_l3_every steps at L3 and the others at the lowest level. */
#ifndef FT_CADENCE_PLAN_H
#define FT_CADENCE_PLAN_H

#include <stdint.h>

#include "ftl/ftl.h"

typedef struct ft_cadence_plan ft_cadence_plan;

/* Collective. pin_steps > 0: every pin_steps steps (and with pin_l3_every > 0, a multiple of it,
 * the steps that are multiples of pin_l3_every at L3, the others below; 0: all at L3); else
 * pin_s > 0: every pin_s seconds (turned into steps from the measured step time); else derived,
 * with the prior failure rate fleet_rate per rank-hour (0: the controller's default), and per
 * level when the checkpoint handle saves below L3 (ckpt_levels: its ftl_ckpt_levels). The first
 * checkpoint step follows start_step (unless pinned in steps: 10 steps later, which also measures
 * the stall). On error msg says why. */
ftl_err ft_plan_create(ftl_ctx *ctx, unsigned ckpt_levels, int64_t pin_steps, int64_t pin_l3_every, double pin_s,
                       double fleet_rate, int64_t start_step, ft_cadence_plan **out, char *msg, size_t msg_size);

/* Not collective (the same on every rank): the level of the checkpoint due (FTL_CKPT_LEVEL_*). */
int ft_plan_level(const ft_cadence_plan *p);

/* Not collective: one training step took `seconds` (rank 0 keeps the measurement). */
void ft_plan_step(ft_cadence_plan *p, double seconds);

/* Not collective: whether a checkpoint is due after `step`. */
int ft_plan_due(const ft_cadence_plan *p, int64_t step);

/* Collective, after the checkpoint of `step` was started (its save blocked the loop save_s): gives
 * rank 0 the last finished checkpoint's timing (have_timing 0 when none; timed_level the level it
 * was saved at), re-derives the interval there, and shares the next checkpoint step and its level
 * with every rank. */
ftl_err ft_plan_after_checkpoint(ft_cadence_plan *p, int64_t step, double save_s, int have_timing, int64_t timed_step,
                                 int timed_level, double stall_s, double durable_s);

/* Not collective (the same on every rank): 1 until a checkpoint's timing has been measured. The
 * caller then waits for the checkpoint just started, so its stall and time to durable are known
 * at once: without them the controller can only assume. */
int ft_plan_calibrating(const ft_cadence_plan *p);

void ft_plan_destroy(ft_cadence_plan *p);

#endif
