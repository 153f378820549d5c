/* pipeline/package.h: the package `ftl publish` makes and the registry stores
 * (docs/formats/package.md).
 *
 * A pax tar (libarchive's restricted pax) compressed with zstd (level 19, single-threaded),
 * reproducible: MANIFEST.json first, then the files in byte order of their names; every entry a
 * regular file, mode 0644, uid/gid 0, empty uname/gname, mtime 0, no atime/ctime. Files:
 *   adapter_config.json, adapter_model.safetensors   the PEFT export (pipeline/peft.h)
 *   verdict.json                                      the gate's verdict, as given
 *   provenance.json                                   the caller's provenance object
 * MANIFEST.json lists every other entry's name, size and SHA-256; the package's version id is the
 * SHA-256 (64 hex digits) of the MANIFEST.json bytes, so it names the content, not the
 * compression. Two packages of the same inputs are byte-identical.
 *
 * Reading (pl_package_unpack) trusts nothing: only regular files named in the manifest, in its
 * order, with its sizes; no '/', '..', absolute names, links, devices or FIFOs; no entry beyond the
 * declared ones; every SHA-256 checked; the total bounded (a zstd bomb stops at the declared
 * sizes); no two names that fold alike (differ only by case or trailing dots); nothing hidden
 * where libarchive reads past (zstd inside zstd, a NUL in a pax path, a pax global header, a
 * missing end-of-archive marker, data after it, a zstd skippable frame, bytes after the last zstd
 * frame: refused, archive_seam.h). Files are written with O_EXCL|O_NOFOLLOW into a fresh mkdtemp
 * folder next to the target, which must then hold exactly the declared files, and is renamed into
 * place only when everything checked out.
 *
 * Taking a package in (pl_package_canonicalize): the offered bytes are never stored; ftl's writer
 * re-makes the package from the verified entries, so packaging noise (modes, owners, times, pax
 * records, zstd frames, padding, compression level) is dropped, and an untampered ftl-made
 * package comes out byte-identical (same version id anyway).
 *
 * Thread-safety: reentrant. */
#ifndef FTL_PIPELINE_PACKAGE_H
#define FTL_PIPELINE_PACKAGE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"
#include "pipeline/sha256.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FTL_PACKAGE_MANIFEST "MANIFEST.json"
#define FTL_PACKAGE_FORMAT "ftl-package"
/* Version 2 may carry the base model (FTL_PACKAGE_BASE_DIR); version 1, which ftl still reads and
 * writes for a package without it, may not. */
#define FTL_PACKAGE_VERSION 2
#define FTL_PACKAGE_VERSION_NO_BASE 1
/* The one folder a package may hold: the base model's Hugging Face files, all of them or none. */
#define FTL_PACKAGE_BASE_DIR "base"
#define FTL_PACKAGE_VERDICT "verdict.json"
#define FTL_PACKAGE_PROVENANCE "provenance.json"
/* The file name packages get in the registry and in RUNDIR/package/. */
#define FTL_PACKAGE_FILE "package.tar.zst"

/* The base files a package may hold, in byte order ("base/config.json", ...), and their count. */
extern const char *const pl_package_base_files[];
#define PL_PACKAGE_N_BASE 5
/* 1 when name is one of pl_package_base_files. */
int pl_package_is_base_file(const char *name);

/* Limits of the reader; zero fields take the defaults. */
typedef struct pl_package_limits {
  uint64_t max_total_bytes;    /* sum of the declared sizes; default 8 GiB */
  uint64_t max_manifest_bytes; /* default 1 MiB */
  size_t max_entries;          /* files in the manifest; default 64 */
  uint64_t max_package_bytes;  /* the package file itself (compressed); default max_total_bytes +
                                  1/64 of it + 64 MiB */
} pl_package_limits;

/* Builds a package from export_dir (adapter_config.json + adapter_model.safetensors), the
 * verdict file (must hold "version": 1 and "passed": true, else FTL_ERR_STATE) and provenance
 * (borrowed; written as provenance.json, sorted keys). Writes out_path atomically; the version id
 * into id_out. */
ftl_err pl_package_build(const char *export_dir, const char *verdict_path, const json_t *provenance,
                          const char *out_path, char id_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d);

/* A parsed MANIFEST.json. */
typedef struct pl_package_file {
  char *name;
  uint64_t size;
  char sha256[FTL_SHA256_HEX_LEN + 1];
} pl_package_file;
typedef struct pl_package_manifest {
  pl_package_file *files; /* sorted by name, unique */
  size_t n_files;
  size_t n_base; /* how many of files are base files: 0 or PL_PACKAGE_N_BASE */
  char id[FTL_SHA256_HEX_LEN + 1]; /* SHA-256 of the bytes parsed */
} pl_package_manifest;

/* Parses manifest bytes strictly (format, version, names from the allowed set of characters,
 * sorted and unique, sizes within limits, the required files present). limits may be NULL. */
ftl_err pl_package_manifest_parse(const void *bytes, size_t size, const pl_package_limits *limits,
                                   pl_package_manifest **out, ftl_diag *d);
void pl_package_manifest_free(pl_package_manifest *m);

/* Reads and checks the package at pkg_path. target_dir NULL: verify only (nothing written).
 * Otherwise target_dir must not exist; it appears, complete and verified, or not at all.
 * expected_id (or NULL) must equal the manifest's SHA-256. The id into id_out (may be NULL), the
 * manifest bytes into *manifest_out (may be NULL; freed with ftl_free). Refusals are
 * FTL_ERR_CORRUPT with a sentence naming the entry. */
ftl_err pl_package_unpack(const char *pkg_path, const char *target_dir, const char *expected_id,
                           const pl_package_limits *limits, char id_out[FTL_SHA256_HEX_LEN + 1], char **manifest_out,
                           size_t *manifest_size_out, ftl_diag *d);

/* The same checks over a package held in memory, verify only (the fuzz target's entry). */
ftl_err pl_package_verify_memory(const void *bytes, size_t size, const pl_package_limits *limits,
                                  char id_out[FTL_SHA256_HEX_LEN + 1], ftl_diag *d);

/* What pl_package_canonicalize made. */
typedef struct pl_package_info {
  char id[FTL_SHA256_HEX_LEN + 1]; /* the version id (SHA-256 of MANIFEST.json) */
  char *manifest;                  /* the MANIFEST.json bytes; owned, pl_package_info_release */
  size_t manifest_size;
  uint64_t offered_bytes;   /* size of the offered file */
  uint64_t canonical_bytes; /* bytes written */
  int identical;            /* the offered file was already byte for byte canonical */
} pl_package_info;

/* Takes a package in: reads the package at offered_path with pl_package_unpack's checks (all of
 * them: a refusal is FTL_ERR_CORRUPT with a sentence naming offered_path and the entry or the
 * problem), and writes into out_fd the bytes ftl's own writer makes of the verified entries:
 * MANIFEST.json then the declared files, each mode 0644, uid/gid 0, no names, mtime 0, one zstd
 * frame at ftl's level, a proper end-of-archive and nothing after it. What the offered file carried
 * besides (modes, setuid bits, owners, times, extra pax records, several zstd frames, zero
 * padding) is not in the output; the version id is the same.
 *
 * out_fd: borrowed, an empty regular file open for writing; bytes go from offset 0 through the
 * file seam (core/fs.h: pwrite, then fsync) and nothing else is done to it (not closed, not
 * renamed). On failure its contents are undefined and the caller removes the file. The entries
 * are streamed (memory stays small whatever their size), so bytes reach out_fd before the last
 * check passed: only FTL_OK makes them a package.
 * expected_id (or NULL): the manifest's SHA-256 must be this. limits may be NULL (defaults).
 * crash_name (or NULL): a crash point (FTL_CRASH_AT) after the first bytes reach out_fd.
 * info: filled on FTL_OK (release it with pl_package_info_release); zeroed, nothing to release,
 * on failure. Thread-safety: reentrant. */
ftl_err pl_package_canonicalize(const char *offered_path, int out_fd, const char *expected_id,
                                 const pl_package_limits *limits, const char *crash_name, pl_package_info *info,
                                 ftl_diag *d);
/* The same into out_path, replaced atomically: a temporary file next to it with an unpredictable
 * name (O_EXCL|O_NOFOLLOW), fsync, rename, fsync of the folder, all through the file seam; the
 * temporary file is removed on every failure. Crash point: package.canonicalize.write. */
ftl_err pl_package_canonicalize_to(const char *offered_path, const char *out_path, const char *expected_id,
                                    const pl_package_limits *limits, pl_package_info *info, ftl_diag *d);
/* Frees what info holds; accepts NULL and a zeroed info. */
void pl_package_info_release(pl_package_info *info);

#ifdef __cplusplus
}
#endif
#endif
