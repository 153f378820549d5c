/* launcher/eval_hooks.h: the hooks the launcher hands eval (eval/inputs.h): a job spec's gate, a
 * run's facts, the run's event log. Part of the `ftl` executable (eval is optional in a build). */
#ifndef FTL_LAUNCHER_EVAL_HOOKS_H
#define FTL_LAUNCHER_EVAL_HOOKS_H

#include "eval/inputs.h"
#include "launcher/events.h"

/* The hooks for eval's commands and `ftl run`'s end; events may be NULL (no event recorded). */
ev_hooks ln_eval_hooks(ln_events *events);

#endif
