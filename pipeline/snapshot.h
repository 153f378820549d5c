/* pipeline/snapshot.h: data snapshots. At submission (`ftl run`, before any rank starts) every input
 * the job spec names (`inputs:`: train data, eval data, base model; files or folders) is hashed
 * with SHA-256 into RUNDIR/snapshot.json, together with the job spec's hash and the canonical gate
 * spec (eval/gate.h) that the run is locked to. The record carries its own digest. Later readers
 * (an attempt relaunch, `ftl gate`, `ftl publish`) re-verify the inputs against it, so an input
 * changed after submission is refused with its file named. Format: docs/formats/snapshot.md.
 *
 * Not here: what the gate spec holds (eval/gate.c), the registry and packages (pipeline/registry_*.c, package.c).
 * Internal to ftl. Not thread-safe with respect to the same run directory; not collective (the
 * launcher and the gate, never ranks, call it). */
#ifndef FTL_PIPELINE_SNAPSHOT_H
#define FTL_PIPELINE_SNAPSHOT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rundir.h"
#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FTL_SNAPSHOT_VERSION 1
/* A snapshot record larger than this is refused (a folder of ~100k files fits). */
#define FTL_SNAPSHOT_MAX_BYTES (64u << 20)

/* One named input: a file or a folder (hashed as the sorted list of its files). */
typedef struct pl_snapshot_input {
  const char *name; /* [A-Za-z_][A-Za-z0-9_]*, as in the job spec's `inputs:` */
  const char *path; /* as written; resolved against the current folder */
} pl_snapshot_input;

/* Hashes every input and returns the record (a new reference, *out): inputs, job spec hash,
 * gate spec (borrowed, may be NULL: the run has no gate) and its SHA-256, and the record's digest.
 * A missing or unreadable input is FTL_ERR_NOTFOUND/FTL_ERR_IO naming it. */
ftl_err pl_snapshot_build(const pl_snapshot_input *inputs, size_t count, const char *job_name,
                           const char *job_spec_hash, const json_t *gate_spec, json_t **out, ftl_diag *d);

/* Pins the evaluator into a built record: `evaluator` = {path, sha256, size} of the executable at
 * abs_path (a regular file, hashed), and the record's digest refreshed. */
ftl_err pl_snapshot_pin_evaluator(json_t *snap, const char *abs_path, ftl_diag *d);

/* SHA-256 of a regular file (opened without blocking, links followed, read no further than its
 * size), for the evaluator's bytes. FTL_ERR_INVAL naming a FIFO or device. */
ftl_err pl_snapshot_hash_file(const char *path, char hex_out[65], uint64_t *size_out, ftl_diag *d);

/* Writes a record to RUNDIR/snapshot.json atomically (through core/fs.h). */
ftl_err pl_snapshot_write(const char *run_dir, const json_t *snap, ftl_diag *d);

/* Parses and checks a record from bytes: the version, every field's type, and the digest.
 * FTL_ERR_CORRUPT (with the reason) for anything wrong. A new reference in *out. */
ftl_err pl_snapshot_parse(const char *data, size_t size, json_t **out, ftl_diag *d);

/* Reads RUNDIR/snapshot.json and parses it. FTL_ERR_NOTFOUND when the run has none. */
ftl_err pl_snapshot_load(const char *run_dir, json_t **out, ftl_diag *d);

/* Re-hashes every input of the record and compares it with what was recorded at submission.
 * FTL_ERR_CORRUPT naming the input and the file that changed (content, size, a file added to or
 * removed from a folder, a file that vanished, a FIFO or device in its place, a recorded link that
 * resolves elsewhere or nowhere now). Never FTL_ERR_NOTFOUND, which pl_snapshot_verify_run_dir
 * keeps for "this run has no snapshot". */
ftl_err pl_snapshot_verify(const json_t *snap, ftl_diag *d);

/* Loads and verifies RUNDIR/snapshot.json in one call (the relaunch check). FTL_ERR_NOTFOUND when
 * the run has no snapshot. */
ftl_err pl_snapshot_verify_run_dir(const char *run_dir, ftl_diag *d);

/* Borrowed views into a parsed record (NULL when absent). */
const json_t *pl_snapshot_find_input(const json_t *snap, const char *name);
const char *pl_snapshot_input_path(const json_t *snap, const char *name);
const char *pl_snapshot_input_sha256(const json_t *snap, const char *name);
const char *pl_snapshot_digest(const json_t *snap);
const json_t *pl_snapshot_gate(const json_t *snap);
const char *pl_snapshot_gate_sha256(const json_t *snap);
const char *pl_snapshot_run_id(const json_t *snap);     /* NULL in a record made before run ids */
const json_t *pl_snapshot_evaluator(const json_t *snap); /* {path, sha256, size}, or NULL */

/* The environment variable that hands the ranks and the evaluator one entry of 'inputs':
 * FTL_INPUT_<NAME> with the name upper-cased (docs/job-spec.md), into out (truncated to size).
 * The one place that spells the rule, so `ftl run` and `ftl gate` cannot drift apart. */
void pl_snapshot_input_var(const json_t *input, char *out, size_t size);

/* The one folder digest of the tree, in the two styles whose values are stored (in locked
 * snapshots and in verdicts), so neither may change:
 *   PL_FOLDER_TREE: a snapshot's folder input: every file under dir, recursively (links
 *     followed, anything but files and folders refused, at most 100000 files), sorted by byte
 *     order of the relative path; entries {path, size, mtime_ns, sha256}; the digest is the SHA-256
 *     of sha256sum's text ("<sha256>  <path>\n" per file);
 *   PL_FOLDER_FLAT: the gate's adapter folder: the regular files at dir's top (hidden ones and
 *     anything else skipped; each opened without following a link), sorted by name; entries
 *     {path, size, sha256}; the digest is the SHA-256 of the entries' canonical JSON.
 * *files_out gets the entries (a new reference), hex_out the digest. FLAT: FTL_ERR_NOTFOUND when
 * dir is not there. */
typedef enum pl_folder_style { PL_FOLDER_TREE = 0, PL_FOLDER_FLAT = 1 } pl_folder_style;
ftl_err pl_folder_digest(const char *dir, pl_folder_style style, json_t **files_out, char hex_out[65], ftl_diag *d);

/* A JSON record of the run directory (the snapshot, the verdict): RUNDIR/<item> read as a regular
 * file of at most max_bytes, not through a link (core_fs_read_regular), then parsed; with
 * name_path, a parse error is prefixed with the file's path. FTL_ERR_NOTFOUND when there is none. */
typedef ftl_err (*pl_record_parse_fn)(const char *data, size_t size, json_t **out, ftl_diag *d);
ftl_err pl_rundir_load_record(const char *run_dir, core_rundir_item item, size_t max_bytes, pl_record_parse_fn parse,
                              int name_path, json_t **out, ftl_diag *d);

/* The canonical form used for digests: compact JSON with sorted keys (caller frees with free()). */
char *pl_snapshot_canonical(const json_t *j);

#ifdef __cplusplus
}
#endif
#endif
