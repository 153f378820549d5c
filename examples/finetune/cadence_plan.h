/* examples/finetune/cadence_plan.h: when the fine-tune saves a checkpoint. Either every N steps
 * as the user pinned it (ftl's cadence controller then reports what that choice costs against
 * the optimum), or as the controller derives it from the measured stall, time to durable, step
 * time and the failure rate in the run's and the fleet's ledgers (docs/cadence.md). Rank 0
 * decides; the decision is shared at checkpoint steps only, so steps between pay nothing. */
#ifndef FT_CADENCE_PLAN_H
#define FT_CADENCE_PLAN_H

#include <stdint.h>

#include "ftl/ftl.h"

typedef struct ft_cadence_plan ft_cadence_plan;

/* Collective. pin_steps > 0: every pin_steps steps; else pin_s > 0: every pin_s seconds (turned
 * into steps from the measured step time); else derived, with the prior failure rate fleet_rate
 * per rank-hour (0: the controller's default). The first checkpoint step follows start_step
 * (unless pinned in steps: 10 steps later, which also measures the stall). On error msg says why. */
ftl_err ft_plan_create(ftl_ctx *ctx, int64_t pin_steps, double pin_s, double fleet_rate, int64_t start_step,
                       ft_cadence_plan **out, char *msg, size_t msg_size);

/* Not collective: one training step took `seconds` (rank 0 keeps the measurement). */
void ft_plan_step(ft_cadence_plan *p, double seconds);

/* Not collective: whether a checkpoint is due after `step`. */
int ft_plan_due(const ft_cadence_plan *p, int64_t step);

/* Collective, after the checkpoint of `step` was started: gives rank 0 the last finished
 * checkpoint's timing (have_timing 0 when none), re-derives the interval there, and shares the
 * next checkpoint step with every rank. */
ftl_err ft_plan_after_checkpoint(ft_cadence_plan *p, int64_t step, int have_timing, int64_t timed_step,
                                 double stall_s, double durable_s);

/* Not collective (the same on every rank): 1 until a checkpoint's timing has been measured. The
 * caller then waits for the checkpoint just started, so its stall and time to durable are known
 * at once: without them the controller can only assume. */
int ft_plan_calibrating(const ft_cadence_plan *p);

void ft_plan_destroy(ft_cadence_plan *p);

#endif
