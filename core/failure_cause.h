/* core/failure_cause.h: the one table of failure causes: the `cause` a failure record carries in
 * the run's ledger (docs/formats/failures.md) and the fleet ledger (docs/formats/fleet-ledger.md).
 *
 * The launcher's enum ln_failure_kind and its names (launcher/launcher.h, supervise.c) and the
 * cadence controller's classification (cadence/cadence.c) are both generated from this table, so
 * a cause added here is named by the one and counted by the other; before, two hand-written
 * tables let a new cause silently become "unknown" to the cadence.
 *
 * X(KIND, "name", CLASS): KIND makes FTL_FAIL_<KIND>; "name" is the ledger's `cause`; CLASS makes
 * FTL_CADENCE_CAUSE_<CLASS> (include/ftl/cadence.h): FAILURE moves the failure rate, NOT_FAILURE
 * (a user error, a misconfiguration, a planned stop) does not. Software bugs count with hardware,
 * as in the published interruption statistics: what matters to the cadence is how often work is
 * lost, not whose fault it was. Append only: the launcher's enum values follow the order.
 *
 * Internal to ftl (not installed). Not here: the rule that a crash before the first step is not a
 * failure (ftl_cadence_classify). */
#ifndef FTL_CORE_FAILURE_CAUSE_H
#define FTL_CORE_FAILURE_CAUSE_H

#define FTL_FAILURE_CAUSE_MAP(X)                                                                                       \
  X(NONE, "none", NOT_FAILURE)           /* the attempt did not fail */                                                \
  X(EXIT, "exit_code", FAILURE)          /* a rank exited non-zero */                                                  \
  X(SIGNAL, "signal", FAILURE)           /* a rank was killed by a signal */                                           \
  X(HANG, "hang", FAILURE)               /* a rank made no progress for its section's timeout */                       \
  X(NODE, "node_lost", FAILURE)          /* every agent on a host went silent */                                       \
  X(AGENT_LOST, "agent_lost", FAILURE)   /* one rank agent vanished */                                                 \
  X(RDZV, "rendezvous", NOT_FAILURE)     /* ranks missing at the rendezvous deadline */                                \
  X(EXEC, "cannot_start", NOT_FAILURE)   /* the program could not be started (not retried) */                          \
  X(LAUNCHER, "launcher", FAILURE)       /* mpirun/srun failed without a rank to blame */                              \
  X(PREEMPTED, "preempted", NOT_FAILURE) /* a planned stop (written by fleet-ledger writers) */                   \
  X(GPU, "gpu_failed", FAILURE)          /* a GPU's health said failed (NVML: docs/gpu.md)  */

#endif
