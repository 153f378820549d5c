/* pipeline/gate_lock.h: the registry's copy of a run's locked gate (docs/formats/gate-lock.md).
 *
 *   REGISTRY/<name>/gate-locks/<run_id>.json
 *
 * At submission (`ftl run`, eval/submit.c) the canonical gate spec, the evaluator (absolute path
 * and content SHA-256), the eval data's and every input's digests and the job's identity are
 * recorded here, in the registry the job will publish to, under the adapter's lock (the same
 * REGISTRY/<name>/.lock the registry takes) and with a `gate_lock` line in its audit log. The run
 * directory is writable by the job being judged; the registry is not meant to be, so `ftl gate`
 * and `ftl publish` check the run's snapshot against this record and refuse a mismatch by field.
 * A record is written once and never replaced.
 *
 * Not here: the comparison of a snapshot with the record (eval/gate.c, ev_gate_lock_check), the
 * rest of the registry (pipeline/registry_txn.c, registry_query.c). Reentrant; processes coordinate through the lock. */
#ifndef FTL_PIPELINE_GATE_LOCK_H
#define FTL_PIPELINE_GATE_LOCK_H

#include <jansson.h>
#include <stddef.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FTL_GATE_LOCK_FORMAT "ftl-gate-lock"
#define FTL_GATE_LOCK_VERSION 1
#define FTL_GATE_LOCK_MAX_BYTES (1u << 20)

/* The record of a snapshot (borrowed): its gate must have a registry, and it must have a run_id
 * and a pinned evaluator (pipeline/snapshot.h). A new reference in *out. */
ftl_err pl_gate_lock_build(const json_t *snap, const char *run_dir, json_t **out, ftl_diag *d);

/* Stores rec in the registry at root (created when missing, as a first publish does) for adapter
 * name: under REGISTRY/<name>/.lock (deadline lock_timeout_ms, 0: 30 s), written atomically, then
 * a `gate_lock` audit line. The same record again is a no-op; another under the same run_id is
 * FTL_ERR_STATE. */
ftl_err pl_gate_lock_store(const char *root, const char *name, const json_t *rec, int64_t lock_timeout_ms,
                            ftl_diag *d);

/* Parses and checks a record: format, version, every field's type, gate_sha256 against gate, the
 * record's digest. FTL_ERR_CORRUPT naming what is wrong. A new reference in *out. */
ftl_err pl_gate_lock_parse(const char *data, size_t size, json_t **out, ftl_diag *d);

/* Reads the record of run_id (a regular file, bounded, no links) into *out; its path into path_out.
 * FTL_ERR_NOTFOUND when the registry root is there but holds no record for the run; FTL_ERR_IO
 * naming the root when the root itself is missing (an unmounted file system is not "no record"). */
ftl_err pl_gate_lock_load(const char *root, const char *name, const char *run_id, json_t **out, char *path_out,
                           size_t path_size, ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
