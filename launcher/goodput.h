/* launcher/goodput.h: the goodput arithmetic: how one attempt's wall time splits into start-up,
 * productive steps, checkpoint stalls, work lost since the last commit, teardown and back-off, and
 * the sum over a run (docs/fault-tolerance.md, the `run_goodput` event). Pure functions, so the
 * arithmetic is unit-tested (tests/launcher/test_goodput.c); printing the report is run.c's. */
#ifndef FTL_LAUNCHER_GOODPUT_H
#define FTL_LAUNCHER_GOODPUT_H

#include "launcher/launcher.h"

typedef struct ln_goodput {
  double wall_ms, startup_ms, productive_ms, stall_ms, lost_ms, teardown_ms, backoff_ms;
  double unreported_ms; /* a program that reports no steps (no rank joined ftl_init): its running time
                           from the programs' start to the end, whose split ftl cannot know */
} ln_goodput;

/* The stall one `ckpt_saved` event adds to the attempt's checkpoint stalls. Its stall_ms already
 * includes wait_prev_ms (the part spent waiting for the previous checkpoint, docs/checkpoint.md),
 * which is reported separately only to explain it: counting both would count that wait twice. */
double ln_goodput_saved_stall_ms(double stall_ms, double wait_prev_ms);

/* Splits one attempt's time. Productive: from the first step to the end (or the failure), less
 * checkpoint stalls and the work lost since the last commit. backoff_ms is the pause before it.
 * Without a first step, the attempt was starting up until it ended; but for a program that does not
 * use ftl (no rank joined) only until its ranks started, and the rest is unreported. */
ln_goodput ln_goodput_of_attempt(const ln_attempt_result *r, double backoff_ms);

/* The run's totals; wall_ms includes the back-offs. */
ln_goodput ln_goodput_sum(const ln_goodput *per, int n);

/* Productive time as a percentage of wall time (0 when there is no wall time). */
double ln_goodput_pct(const ln_goodput *total);

/* Whether the totals measure goodput at all: not for a run that reported no step, only unreported
 * running time (a program that does not call ftl_step_done). */
int ln_goodput_measured(const ln_goodput *total);

#endif
