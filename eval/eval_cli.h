/* eval/eval_cli.h: the pipeline's commands (docs/pipeline.md, docs/cli.md).
 *
 *   ftl gate RUNDIR [--spec JOB.yaml] [--json] [--quiet]      0 passed, 1 failed, 2 error
 *   ftl publish RUNDIR [--spec JOB.yaml] [--json]            0 published, 1 verdict not passed, 2 error
 *
 * The hooks `ftl run` calls around training are eval/submit.h's (included here for the launcher's
 * main). Only the launcher's main chooses exit codes; these return them. Not thread-safe. */
#ifndef FTL_EVAL_CLI_H
#define FTL_EVAL_CLI_H

#include "eval/submit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The commands' help texts (`ftl help gate`, `ftl gate --help`). */
extern const char ev_gate_help[];
extern const char ev_publish_help[];

/* hooks: the caller's (--spec is read through hooks->gate_of_spec, the run's facts through
 * hooks->run_facts). */
int ev_cmd_gate(int argc, char **argv, const ev_hooks *hooks);
int ev_cmd_publish(int argc, char **argv, const ev_hooks *hooks);

#ifdef __cplusplus
}
#endif
#endif
