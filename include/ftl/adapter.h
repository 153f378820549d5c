/* ftl/adapter.h: the final adapter, the one output of a fine-tune, written and read back as a
 * committed unit (docs/formats/adapter.md). A folder, normally RUNDIR/final, holds
 *   adapter.safetensors  the tensors (float32, little-endian, canonical safetensors: sorted,
 *                        deterministic bytes, "__metadata__": {"format": "pt"})
 *   adapter.json         the program's description of them (its bytes, as given)
 *   COMMIT               both files' name, size and SHA-256, written last
 * Writing removes COMMIT first and writes it back last, each file atomically and durably (tmp,
 * fsync, rename, fsync of the folder), so a crash or a full disk on the way leaves a folder that
 * every reader refuses, never half an adapter that looks whole. Reading checks COMMIT against the
 * files before anything else, then parses the safetensors file strictly.
 *
 * Not here: what the tensors mean (the program's), exporting to PEFT (`ftl export`), packages and
 * the registry (`ftl registry`). Thread-safety: reentrant; an ftl_adapter is read-only once open. */
#ifndef FTL_ADAPTER_H
#define FTL_ADAPTER_H

#include "ftl/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"
#include "ftl/rdzv.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FTL_ADAPTER_MAX_DIMS 8
/* What ftl_adapter_open reads at most: adapter.json, and adapter.safetensors. */
#define FTL_ADAPTER_MAX_JSON_BYTES ((size_t)1 << 20)
#define FTL_ADAPTER_MAX_BYTES ((size_t)1 << 30)

/* One float32 tensor, row-major: prod(shape) elements. Borrowed: by ftl_adapter_write from the
 * caller; from the open adapter by ftl_adapter_find (valid until ftl_adapter_close). */
typedef struct ftl_adapter_tensor {
  const char *name; /* unique, not "__metadata__" */
  int ndim;         /* 0 (a scalar) to FTL_ADAPTER_MAX_DIMS */
  int64_t shape[FTL_ADAPTER_MAX_DIMS];
  const float *data;
} ftl_adapter_tensor;

/* The run's final folder, RUNDIR/final, from the gang's context (ftl_ctx_info): FTL_ERR_NOTFOUND
 * when info has no run directory (not started by `ftl run`), FTL_ERR_RANGE when out is too small. */
FTL_API ftl_err ftl_adapter_final_dir(const ftl_info *info, char *out, size_t size, ftl_diag *d);

/* Writes the adapter into dir (made if missing): COMMIT removed, adapter.safetensors from the
 * tensors, adapter.json from json[0..json_len), then COMMIT. Call it on one rank. */
FTL_API ftl_err ftl_adapter_write(const char *dir, const ftl_adapter_tensor *tensors, size_t n, const char *json,
                                  size_t json_len, ftl_diag *d);

/* Commits an adapter that the program wrote itself in another layout (PEFT's save_pretrained:
 * adapter_config.json, adapter_model.safetensors, README.md): writes dir/COMMIT, atomically and
 * last, with each of names[0..n) (bare file names in dir, every one already durable) and its size
 * and SHA-256. The gate and `ftl publish` take such a folder as final/ (docs/formats/adapter.md,
 * "A PEFT final/"). Removing an old COMMIT before rewriting the files is the caller's (a fresh
 * folder renamed into place has none). Call it on one rank. */
FTL_API ftl_err ftl_adapter_commit(const char *dir, const char *const *names, size_t n, ftl_diag *d);

/* A committed adapter read back. */
typedef struct ftl_adapter ftl_adapter;

/* Checks dir/COMMIT against both files (FTL_ERR_NOTFOUND without one, FTL_ERR_CORRUPT when it
 * does not match), reads them (bounded above; regular files only) and parses the tensors strictly
 * (FTL_ERR_CORRUPT with the reason). */
FTL_API ftl_err ftl_adapter_open(const char *dir, ftl_adapter **out, ftl_diag *d);
/* Parses a safetensors image alone (no folder, no COMMIT, no adapter.json): for tools and fuzzing.
 * The adapter borrows bytes, which must outlive it. */
FTL_API ftl_err ftl_adapter_parse(const void *bytes, size_t size, ftl_adapter **out, ftl_diag *d);
/* adapter.json's bytes (NUL-terminated) and their length; "" and 0 for a parsed image. */
FTL_API const char *ftl_adapter_json(const ftl_adapter *a, size_t *len_out);
/* How many tensors the file has. */
FTL_API size_t ftl_adapter_count(const ftl_adapter *a);
/* The tensor of that name: FTL_ERR_NOTFOUND when there is none, FTL_ERR_UNSUPPORTED when it is not
 * float32. */
FTL_API ftl_err ftl_adapter_find(const ftl_adapter *a, const char *name, ftl_adapter_tensor *out);
/* Accepts NULL. */
FTL_API void ftl_adapter_close(ftl_adapter *a);

#ifdef __cplusplus
}
#endif
#endif
