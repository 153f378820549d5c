/* eval/verdict.h: the gate's verdict, RUNDIR/verdict.json (docs/formats/verdict.md): written
 * atomically, parsed and checked field by field, summed up in a line for people, and the copy
 * that goes into a package (without its timing fields, so the same adapter re-gated packages the
 * same).
 *
 * Not here: deciding pass or fail (eval/decide.h), running the gate (eval/gate.h). No state. */
#ifndef FTL_EVAL_VERDICT_H
#define FTL_EVAL_VERDICT_H

#include <jansson.h>
#include <stddef.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FTL_VERDICT_VERSION 1
#define FTL_VERDICT_MAX_BYTES (1u << 20)

/* Parses and checks a verdict (the reader `ftl publish` and the fuzz target use): version, types
 * of every field, digests as 64 hex digits. A new reference in *out. */
ftl_err ev_verdict_parse(const char *data, size_t size, json_t **out, ftl_diag *d);
/* Reads RUNDIR/verdict.json and parses it; FTL_ERR_NOTFOUND when there is none. */
ftl_err ev_verdict_load(const char *run_dir, json_t **out, ftl_diag *d);
/* Writes RUNDIR/verdict.json atomically (2-space indent, sorted keys). */
ftl_err ev_verdict_write(const char *run_dir, const json_t *verdict, ftl_diag *d);

/* One line for people: "gate passed: exact_match 0.998 >= 0.9 (threshold)". */
void ev_verdict_summary(const json_t *verdict, char *out, size_t size);

/* Writes the package's copy of the verdict to path, atomically: the verdict without what differs
 * between two gates of the same adapter (when it ran and for how long). */
ftl_err ev_verdict_write_package_copy(const json_t *verdict, const char *path, ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
