/* pipeline/registry.h: the adapter registry, a folder (docs/formats/registry.md).
 *
 *   REGISTRY/<name>/versions/<id>/package.tar.zst   immutable: made as versions/.tmp-* and renamed
 *   REGISTRY/<name>/versions/<id>/MANIFEST.json     the package's manifest (its SHA-256 is <id>)
 *   REGISTRY/<name>/versions/<id>/adapter/          unpacked lazily (routes, fetch), verified
 *   REGISTRY/<name>/channels/<channel>.json         a pointer, replaced atomically
 *   REGISTRY/<name>/audit.jsonl                     who, when, action, from, to, why
 *   REGISTRY/<name>/.lock                           flock, taken with a deadline around writes
 *
 * A version is never rewritten: publishing the same id again is a no-op success; a folder under
 * that id with other content is refused. A channel only ever points at a complete version
 * (checked under the lock before the pointer is written). Rollback moves a channel back to the
 * version it pointed at before (its pointer keeps that history).
 *
 * Names: adapters and channels are 1-64 characters of [A-Za-z0-9._-], not starting with '.' or
 * '-'; a channel name may not be 64 hex digits (that is a version id). A version may be given as
 * its id or a unique prefix of at least 8 hex digits.
 *
 * Thread-safety: reentrant; processes coordinate through the lock. */
#ifndef FTL_PIPELINE_REGISTRY_H
#define FTL_PIPELINE_REGISTRY_H

#include <stdint.h>
#include <stdio.h>

#include "ftl/error.h"
#include "pipeline/sha256.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FTL_REGISTRY_CHANNEL_FORMAT "ftl-registry-channel"
#define FTL_REGISTRY_VERSION 1
#define FTL_REGISTRY_NAME_MAX 64

/* Which registry, and who acts on it (all borrowed). */
typedef struct pl_registry_ref {
  const char *root;        /* the registry folder (created on the first publish) */
  const char *who;         /* recorded in pointers and the audit log; NULL: the effective user's name (or uid) @ host */
  int64_t lock_timeout_ms; /* deadline for the lock; 0: 30 s */
} pl_registry_ref;

/* The registry folder from $FTL_REGISTRY (NULL when unset or empty). */
const char *pl_registry_root_from_env(void);

/* True when s is a valid adapter or channel name (see above). */
int pl_registry_name_ok(const char *s);
int pl_registry_channel_ok(const char *s);

/* How a published version's verdict is vouched for (recorded in versions/<id>/PUBLISHED.json and
 * the publish audit line, shown by `ftl registry ls`). */
typedef enum pl_registry_trust {
  FTL_REGISTRY_TRUST_SIGNED = 0,     /* a verdict signature by a key in REGISTRY/keys/trusted/ (the default) */
  FTL_REGISTRY_TRUST_LOCAL_GATE = 1, /* the caller re-derived the verdict itself (`ftl publish` of a gated run) */
  FTL_REGISTRY_TRUST_UNVERIFIED = 2, /* `--unverified`: stored, and marked so for as long as the version exists */
} pl_registry_trust;

typedef struct pl_registry_publish_opts {
  const char *channel;        /* also point this channel at the version (NULL: none) */
  const char *why;            /* recorded */
  pl_registry_trust trust;   /* SIGNED unless set */
  const char *signature_path; /* SIGNED: the verdict signature; NULL: PACKAGE.sig */
} pl_registry_publish_opts;

/* Publishes the package file under name: opens it as a bounded regular file and checks it
 * completely (pl_package_unpack), checks its trust (SIGNED: the signature binds this package's
 * verdict.json, adapter_config.json and adapter_model.safetensors and verifies with a trusted key),
 * then under the lock stores it as versions/<id>/ from the same descriptor, unpacks the stored copy
 * into versions/<id>/adapter/ and checks what it says: verdict.json a verdict that passed
 * (refused otherwise, signed or not), adapter_config.json a JSON object with peft_type,
 * adapter_model.safetensors a valid safetensors file. A version already there with the same
 * manifest is a no-op success. Appends a "publish" audit line; with opts->channel also points it
 * at the version (as pl_registry_promote, under the same lock). id_out (may be NULL) gets the
 * version id. opts may be NULL (SIGNED, no channel). */
ftl_err pl_registry_publish_ex(const pl_registry_ref *reg, const char *name, const char *package_path,
                                const pl_registry_publish_opts *opts, char id_out[FTL_SHA256_HEX_LEN + 1],
                                ftl_diag *d);

/* pl_registry_publish_ex with trust FTL_REGISTRY_TRUST_LOCAL_GATE: for `ftl publish`, which
 * re-derives the verdict of the run it publishes; never for a package built elsewhere. */
ftl_err pl_registry_publish(const pl_registry_ref *reg, const char *name, const char *package_path,
                             const char *channel, const char *why, char id_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d);

/* Points channel at version (an id or unique prefix), which must exist complete. The move and its
 * audit line are one transaction (docs/formats/registry.md): on failure the channel has not moved.
 * An unknown adapter is refused, creating nothing. */
ftl_err pl_registry_promote(const pl_registry_ref *reg, const char *name, const char *version, const char *channel,
                             const char *why, ftl_diag *d);

/* Moves channel back to the version it pointed at before the last promote (FTL_ERR_STATE when it
 * has none; FTL_ERR_NOTFOUND, creating nothing, for an unknown adapter or channel). The version
 * now current into to_out (may be NULL). */
ftl_err pl_registry_rollback(const pl_registry_ref *reg, const char *name, const char *channel, const char *why,
                              char to_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d);

/* "NAME@VERSION" or "NAME@CHANNEL" -> the adapter name (into name_out, at least
 * FTL_REGISTRY_NAME_MAX + 1 bytes) and the version id. A channel of that name wins over a version
 * prefix. FTL_ERR_INVAL for a malformed spec, FTL_ERR_NOTFOUND when it does not resolve. */
ftl_err pl_registry_resolve(const pl_registry_ref *reg, const char *spec, char *name_out,
                             char id_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d);

/* The unpacked, verified folder of a version (versions/<id>/adapter/, unpacked on first use under
 * the lock) into out. It must hold exactly its declared files (an extra file is refused). */
ftl_err pl_registry_adapter_dir(const pl_registry_ref *reg, const char *name, const char *id, char *out, size_t size,
                                 ftl_diag *d);

/* Unpacks spec's package into dir (must not exist), verified (exactly the declared files); the
 * version id into id_out (may be NULL). */
ftl_err pl_registry_fetch(const pl_registry_ref *reg, const char *spec, const char *dir,
                          char id_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d);

/* Human listing: adapters (or one), their versions and channels, to out. */
ftl_err pl_registry_list(const pl_registry_ref *reg, const char *name, FILE *out, ftl_diag *d);

/* One vLLM --lora-modules argument per channel ("NAME@CHANNEL=PATH"; only that channel when not
 * NULL), PATH the unpacked version folder. A channel that cannot be routed (torn pointer, changed
 * folder) is reported on err (may be NULL) and skipped; the others are still printed, and the
 * result is then the first one's error (its message in d). */
ftl_err pl_registry_routes(const pl_registry_ref *reg, const char *channel, FILE *out, FILE *err, ftl_diag *d);

/* Checks one adapter's registry: every stored version byte for byte (MANIFEST.json hashes to its
 * id, package.tar.zst reads back whole under that id, its adapter/ folder holds exactly the
 * declared files with their digests, its publication record names it); every channel pointer
 * parses, names existing complete versions (current and history) and equals the replay of the
 * audit log's moves for that channel (sequence numbers, cancelled moves); every audit line is a
 * whole record. The number of audit lines into *audit_lines (may be NULL). Read-only (no lock). */
ftl_err pl_registry_check(const pl_registry_ref *reg, const char *name, size_t *audit_lines, ftl_diag *d);

/* Parses a channel pointer (the fuzz target's entry): FTL_OK and the current/previous ids
 * (previous "" when none), or FTL_ERR_CORRUPT. */
ftl_err pl_registry_channel_parse(const char *bytes, size_t size, char current[FTL_SHA256_HEX_LEN + 1],
                                   char previous[FTL_SHA256_HEX_LEN + 1], ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
