/* pipeline/registry_store.h: inside pipeline/ only: the registry folder as both of its sides see it
 * (registry_txn.c changes it, registry_query.c reads it; docs/formats/registry.md).
 *
 * Here: the limits and file names, paths under an adapter, the channel pointer's codec and reader,
 * the audit log's reader and the replay of a channel's moves, a version's completeness, lookup by
 * prefix and the check of an unpacked folder, and the adapter's lock with the removal of what dead
 * writers left (taken by transactions, and by the serve side to unpack a version on first use).
 *
 * Thread-safety: reentrant; processes coordinate through the lock. */
#ifndef FTL_PIPELINE_REGISTRY_STORE_H
#define FTL_PIPELINE_REGISTRY_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"
#include "pipeline/registry.h"

#define PL_REG_HISTORY_MAX 100
#define PL_REG_POINTER_MAX_BYTES (1u << 20)
#define PL_REG_MANIFEST_MAX_BYTES (1u << 20)
#define PL_REG_AUDIT_MAX_BYTES ((size_t)1 << 30)
#define PL_REG_PACKAGE_MAX_BYTES ((uint64_t)16 << 30)
#define PL_REG_ADAPTER_FILE_MAX_BYTES ((uint64_t)8 << 30)
#define PL_REG_PUBLICATION_FILE "PUBLISHED.json"
#define PL_REG_PUBLICATION_FORMAT "ftl-registry-publication"
#define PL_REG_ID_LEN FTL_SHA256_HEX_LEN

typedef char pl_reg_id[PL_REG_ID_LEN + 1];

/* A channel pointer, parsed. */
typedef struct pl_reg_pointer {
  pl_reg_id current, previous; /* previous "" when none */
  pl_reg_id *history;          /* earlier currents, oldest first; history[n-1] == previous */
  size_t n_history;
  int64_t seq; /* moves of this channel so far; -1: written before pointers carried it */
} pl_reg_pointer;

/* A channel's history as its audit lines tell it. Lines with a seq are moves recorded before the
 * pointer was written (pending until a later line or the pointer shows them applied; an "abort"
 * with the same seq cancels one); lines without one come from registries written before seq
 * existed, when the line followed the move (so they were applied). */
typedef struct pl_reg_replay {
  const char *channel, *path;
  pl_reg_id current;
  pl_reg_id history[PL_REG_HISTORY_MAX];
  size_t n_history;
  int64_t seq; /* applied moves */
  int pending;
  char pend_action[16];
  pl_reg_id pend_from, pend_to;
  int64_t pend_seq;
  size_t pend_line;
  int any; /* the channel has lines */
  ftl_diag *d;
} pl_reg_replay;

/* The lock's deadline: reg->lock_timeout_ms, 30 s when unset. */
int64_t pl_reg_lock_ms(const pl_registry_ref *reg);

/* REGISTRY/<name>[/<rest>] into out (rest may be NULL). */
ftl_err pl_reg_path(char *out, size_t size, const pl_registry_ref *reg, const char *name, const char *rest,
                    ftl_diag *d);

/* The pointer codec: parse (p owned by the caller after FTL_OK; freed with pl_reg_pointer_free)
 * and read channels/<channel>.json (FTL_ERR_NOTFOUND when the channel has no pointer yet). */
void pl_reg_pointer_free(pl_reg_pointer *p);
ftl_err pl_reg_pointer_parse(const char *bytes, size_t size, pl_reg_pointer *p, ftl_diag *d);
ftl_err pl_reg_pointer_read(const pl_registry_ref *reg, const char *name, const char *channel, pl_reg_pointer *p,
                            ftl_diag *d);

/* The whole audit log (empty when there is none yet): a regular file, bounded; its path into path. */
ftl_err pl_reg_audit_read(const pl_registry_ref *reg, const char *name, char *path, size_t path_size, char **text,
                          size_t *size, ftl_diag *d);

/* Splits data into lines, calling fn(line, len, line_no, ctx) for each non-empty one. */
ftl_err pl_reg_each_line(const char *data, size_t size, ftl_err (*fn)(const char *, size_t, size_t, void *), void *ctx);

/* Replays the log for channel and settles its last move against the pointer p (NULL: none):
 * applied when the pointer carries its seq, not applied (*unapplied set) when the pointer is one
 * move behind. Then the replayed state must be the pointer, field by field. */
ftl_err pl_reg_replay_channel(const char *text, size_t size, const char *audit_path, const char *ptr_path,
                              const char *channel, const pl_reg_pointer *p, pl_reg_replay *r, int *unapplied,
                              ftl_diag *d);

/* FTL_OK when versions/<id>/ holds a package (a regular file) and a MANIFEST.json whose SHA-256
 * is id. The adapter's folder, versions/ and versions/<id>/ must be real folders (opened
 * O_NOFOLLOW from the registry's root), the last on versions/' file system: a link planted there
 * is refused (FTL_ERR_CORRUPT, naming the version), never followed out of the registry. Every
 * query and move of a version passes here first. The manifest bytes into *man (may be NULL;
 * freed with ftl_free). */
ftl_err pl_reg_version_complete(const pl_registry_ref *reg, const char *name, const char *id, char **man,
                                size_t *man_size, ftl_diag *d);

/* A version given as an id or a unique prefix (>= 8 hex digits) -> the id. */
ftl_err pl_reg_version_lookup(const pl_registry_ref *reg, const char *name, const char *v, char id[PL_REG_ID_LEN + 1],
                              ftl_diag *d);

/* Checks an unpacked folder against the manifest it holds (and that against id): exactly
 * MANIFEST.json and the declared files, each of its declared size and SHA-256. */
ftl_err pl_reg_verify_unpacked(const char *dir, const char *id, ftl_diag *d);

/* Takes the adapter's lock (released with pl_unlock). create: make the adapter's folders first
 * (publish); otherwise the adapter must exist, and nothing is created for one that does not
 * (beyond its .lock). */
ftl_err pl_reg_lock_adapter(const pl_registry_ref *reg, const char *name, int create, int *fd, ftl_diag *d);

/* Removes what writers that died left behind (temporary version folders, unpacks, pointer
 * writes). Only under the lock. */
void pl_reg_clean_stale(const pl_registry_ref *reg, const char *name);

#endif
