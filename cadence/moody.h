/* cadence/moody.h: the multi-level checkpointing model of Moody, Bronevetsky, Mohror and de Supinski,
 * "Design, Modeling, and Evaluation of a Scalable Multi-level Checkpointing System" (SC'10), the
 * model behind SCR, as a second opinion on ftl's own (cadence/multilevel.c, docs/cadence.md "The
 * paper's model"). Used by tests/cadence and bench/cadence; not part of the public API.
 *
 * The paper's terms: L levels; failures of class i (1..L: the lowest level that survives them) come
 * as Poisson processes of rate λ_i; compute comes in intervals of t seconds, each followed by a
 * checkpoint; a checkpoint of level k costs C_k and a recovery from it R_k; the run is nested: V_1
 * checkpoints of level 1 between two of level 2, V_2 of level 2 between two of level 3, ..., and
 * one of level L, which ends the run (V_L = 1). A failure of class i during compute or a checkpoint restarts from the newest
 * checkpoint of level ≥ i; a failure during a recovery from level k restarts that recovery when its
 * class is below k (or k is the top level), and otherwise turns it into a failure of the class above
 * (the level-k copy is gone with it). The answer is the expected wall time of the run and its
 * efficiency, the compute time over it. */
#ifndef FTL_CADENCE_MOODY_H
#define FTL_CADENCE_MOODY_H

#include <stdint.h>

#include "ftl/cadence.h"
#include "ftl/error.h"

typedef struct cd_moody_params {
  int levels;                                /* L: 1..FTL_CADENCE_MAX_LEVELS */
  double compute_s;                          /* t: compute between two checkpoints, ≥ 0 */
  double write_s[FTL_CADENCE_MAX_LEVELS];    /* C_k: a checkpoint of level k+1, its whole cost */
  double read_s[FTL_CADENCE_MAX_LEVELS];     /* R_k: a recovery from level k+1 */
  double rate[FTL_CADENCE_MAX_LEVELS];       /* λ_k per second: failures of class k+1 */
  int64_t count[FTL_CADENCE_MAX_LEVELS];     /* V_k: see above; V_L = 1 */
} cd_moody_params;

typedef struct cd_moody_result {
  double time_s;     /* the run's expected wall time; 0 where the model gives up (below) */
  double intervals;  /* compute intervals in the run: (V_1+1)·…·(V_{L−1}+1) */
  double efficiency; /* intervals·t / time_s; 0 where the model gives up */
} cd_moody_result;

/* The model's answer for p. Where a part of the run would succeed with a probability below 1e-6
 * (a period far longer than the time between failures) the model gives up on it, as the paper's
 * does, and time_s and efficiency are 0. FTL_ERR_INVAL for L outside 1..3, a negative or
 * non-finite figure, no failures at all, a count below 0, V_L other than 1, or t = 0 with a
 * checkpoint that costs nothing. */
ftl_err cd_moody_evaluate(const cd_moody_params *p, cd_moody_result *out);

#endif
