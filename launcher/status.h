/* launcher/status.h: `ftl status RUNDIR [--json]`: what a run is doing or how it ended, from its
 * files alone (so it works while the job runs, from another shell or host, and afterwards):
 * the run-directory lock, events.jsonl, failures.jsonl, the checkpoints, verdict.json. The JSON
 * form is versioned: docs/formats/status.md.
 *
 * Not here: anything that writes to the run directory (status only reads). */
#ifndef FTL_LAUNCHER_STATUS_H
#define FTL_LAUNCHER_STATUS_H

#include <jansson.h>

#include "ftl/error.h"

#define FTL_STATUS_VERSION 1

extern const char ln_status_help[];
extern const char ln_report_help[];

/* Builds the status document (docs/formats/status.md) of run_dir: *out a new reference. */
ftl_err ln_status_build(const char *run_dir, json_t **out, ftl_diag *d);

/* `ftl status` and `ftl report` (report.c): argv[0] is the command's name; return ftl's exit code. */
int ln_cmd_status(int argc, char **argv);
int ln_cmd_report(int argc, char **argv);

#endif
