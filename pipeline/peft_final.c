/* pipeline/peft_final.c: a final/ that a PEFT program wrote in PEFT's own layout (peft.h,
 * docs/formats/adapter.md "A PEFT final/"): recognised by its adapter_config.json, checked for the
 * gate and for `ftl publish`, and copied as it is into the export that is packaged, with the
 * base model's Hugging Face folder (the job's base input) beside it.
 *
 * Nothing is converted: the two files go into the package byte for byte, so what the gate
 * evaluated is what a consumer loads. The base folder must hold exactly a package's base files
 * (package.h), so the published base/ is the input the snapshot hashed, checked by digest. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "ftl/core.h"
#include "pipeline/adapter_commit.h"
#include "pipeline/hf_base.h"
#include "pipeline/peft.h"
#include "pipeline/pl_util.h"
#include "pipeline/safetensors.h"
#include "pipeline/sha256.h"
#include "pipeline/snapshot.h"

#define PEFT_CONFIG_MAX_BYTES ((size_t)1 << 20)
/* An adapter is small next to its base; the package reader's whole limit is 8 GiB. */
#define PEFT_WEIGHTS_MAX_BYTES ((size_t)4 << 30)
#define BASE_FILE_MAX_BYTES ((size_t)8 << 30)
#define PEFT_PREFIX "base_model.model."

/* The base folder's files, as a package's base/ holds them (package.h's pl_package_base_files). */
static const char *const base_files[] = {PL_HF_CONFIG, PL_HF_WEIGHTS, PL_HF_SPECIAL_TOKENS, PL_HF_TOKENIZER,
                                         PL_HF_TOKENIZER_CONFIG};
#define N_BASE_FILES (sizeof base_files / sizeof base_files[0])

int pl_peft_final_is_peft(const char *final_dir) {
  char path[4096];
  struct stat st;
  return ftl_fmt(path, sizeof path, "%s/%s", final_dir, FTL_PEFT_CONFIG_NAME) == FTL_OK && lstat(path, &st) == 0;
}

/* adapter_config.json: the fields a loader (peft, vLLM) needs to apply the adapter, typed. */
static ftl_err check_config(const char *path, ftl_diag *d) {
  char *text = NULL;
  size_t size = 0;
  json_t *j = NULL;
  ftl_err rc = core_fs_read_regular(path, PEFT_CONFIG_MAX_BYTES, &text, &size, d);
  if (rc) return rc;
  json_error_t jerr;
  j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
  if (!j) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not valid JSON: %s (line %d, column %d)", path, jerr.text, jerr.line,
                       jerr.column);
    goto out;
  }
  if (!json_is_object(j)) {
    rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not a JSON object", path);
    goto out;
  }
  const json_t *pt = json_object_get(j, "peft_type"), *r = json_object_get(j, "r");
  const json_t *al = json_object_get(j, "lora_alpha"), *tm = json_object_get(j, "target_modules");
  const json_t *bn = json_object_get(j, "base_model_name_or_path");
  const char *bad = NULL;
  if (!json_is_string(pt))
    bad = "'peft_type' is not a string";
  else if (strcmp(json_string_value(pt), "LORA"))
    bad = "'peft_type' is not \"LORA\" (ftl publishes LoRA adapters)";
  else if (!json_is_integer(r) || json_integer_value(r) < 1)
    bad = "'r' is not an integer >= 1";
  else if (!json_is_number(al) || !isfinite(json_number_value(al)))
    bad = "'lora_alpha' is not a number";
  else if (!(json_is_string(tm) || (json_is_array(tm) && json_array_size(tm) > 0)))
    bad = "'target_modules' is neither a non-empty list nor a pattern";
  else if (bn && !json_is_string(bn) && !json_is_null(bn))
    bad = "'base_model_name_or_path' is neither a string nor null";
  for (size_t i = 0; !bad && json_is_array(tm) && i < json_array_size(tm); i++)
    if (!json_is_string(json_array_get(tm, i))) bad = "'target_modules' holds something other than names";
  if (bad) rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: %s", path, bad);
out:
  json_decref(j);
  ftl_free(text);
  return rc;
}

/* adapter_model.safetensors: read as a regular file of bounded size (a FIFO a program left there
 * must not hang the gate), a strict parse, at least one tensor, every one under PEFT's prefix. */
static ftl_err check_weights(const char *path, ftl_diag *d) {
  pl_st_file *st = NULL;
  char *data = NULL;
  size_t size = 0;
  ftl_err rc = core_fs_read_regular(path, PEFT_WEIGHTS_MAX_BYTES, &data, &size, d);
  if (rc) return rc;
  if ((rc = pl_st_parse((const uint8_t *)data, size, NULL, &st, d))) {
    ftl_diag_prefix(d, rc, "%s", path);
    goto out;
  }
  if (pl_st_count(st) == 0) rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s holds no tensor", path);
  for (size_t i = 0; !rc && i < pl_st_count(st); i++) {
    const char *name = pl_st_at(st, i)->name;
    if (strncmp(name, PEFT_PREFIX, strlen(PEFT_PREFIX)))
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s: tensor %s is not under PEFT's prefix %s", path, name, PEFT_PREFIX);
  }
out:
  pl_st_free(st);
  ftl_free(data);
  return rc;
}

ftl_err pl_peft_final_check(const char *final_dir, ftl_diag *d) {
  static const char *const required[] = {FTL_PEFT_CONFIG_NAME, FTL_PEFT_WEIGHTS_NAME};
  char path[4096];
  ftl_err rc = pl_adapter_commit_verify(final_dir, required, 2, d);
  if (rc) return rc;
  if (ftl_fmt(path, sizeof path, "%s/%s", final_dir, FTL_PEFT_CONFIG_NAME))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", final_dir);
  if ((rc = check_config(path, d))) return rc;
  if (ftl_fmt(path, sizeof path, "%s/%s", final_dir, FTL_PEFT_WEIGHTS_NAME))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", final_dir);
  return check_weights(path, d);
}

/* from_dir/name -> to_dir/name, read as a regular file of at most max_bytes, written through
 * core's atomic replace. With want_sha256, the bytes read must have that digest (the gate's record
 * of the file) before anything is written: final/ is read again after the gate, and a file changed
 * since is refused, naming it. */
static ftl_err copy_file(const char *from_dir, const char *to_dir, const char *name, size_t max_bytes,
                         const char *want_sha256, ftl_diag *d) {
  char from[4096], to[4096], got[FTL_SHA256_HEX_LEN + 1];
  char *data = NULL;
  size_t size = 0;
  if (ftl_fmt(from, sizeof from, "%s/%s", from_dir, name) || ftl_fmt(to, sizeof to, "%s/%s", to_dir, name))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", from_dir);
  ftl_err rc = core_fs_read_regular(from, max_bytes, &data, &size, d);
  if (!rc && want_sha256) {
    if ((rc = pl_sha256_hex(data, size, got)))
      ftl_diag_fail(d, rc, "cannot hash %s", from);
    else if (strcmp(want_sha256, got))
      rc = ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s is not the file the gate evaluated (changed after the gate?)", from);
  }
  if (!rc) rc = core_fs_replace(to, data, size, CORE_TMP_UNPREDICTABLE, NULL, -1, -1, d);
  ftl_free(data);
  return rc;
}

/* The SHA-256 the gate recorded for name in its adapter_files list, or NULL. */
static const char *gate_digest_of(const json_t *files, const char *name) {
  for (size_t k = 0; k < json_array_size(files); k++) {
    const json_t *e = json_array_get(files, k);
    const char *path = json_string_value(json_object_get(e, "path"));
    if (path && !strcmp(path, name)) return json_string_value(json_object_get(e, "sha256"));
  }
  return NULL;
}

static int is_base_file(const char *name) {
  for (size_t i = 0; i < N_BASE_FILES; i++)
    if (!strcmp(name, base_files[i])) return 1;
  return 0;
}

/* The base folder holds the package's base files and nothing else: a file the package could not
 * carry would make the published base differ from the one the gate evaluated. */
static ftl_err check_base_listing(const char *base_dir, ftl_diag *d) {
  struct stat bs;
  if (stat(base_dir, &bs) == 0 && !S_ISDIR(bs.st_mode))
    return ftl_diag_fail(d, FTL_ERR_SPEC,
                         "the base model %s is not a folder: a PEFT adapter's base is a Hugging Face model folder "
                         "(%s, %s, ...; `ftl export --base-file FILE` makes one from the example's base file)",
                         base_dir, base_files[0], base_files[1]);
  DIR *dp = opendir(base_dir);
  if (!dp)
    return ftl_diag_fail(d, errno == ENOENT ? FTL_ERR_NOTFOUND : FTL_ERR_IO, "cannot open the base model folder %s: %s",
                         base_dir, strerror(errno));
  ftl_err rc = FTL_OK;
  struct dirent *e;
  while (!rc && (e = readdir(dp)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !is_base_file(e->d_name))
      rc = ftl_diag_fail(
          d, FTL_ERR_SPEC, "the base model folder %s holds %s; a package's base/ carries exactly %s, %s, %s, %s and %s",
          base_dir, e->d_name, base_files[0], base_files[1], base_files[2], base_files[3], base_files[4]);
  closedir(dp);
  for (size_t i = 0; !rc && i < N_BASE_FILES; i++) {
    char path[4096];
    struct stat st;
    if (ftl_fmt(path, sizeof path, "%s/%s", base_dir, base_files[i]))
      rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", base_dir);
    else if (lstat(path, &st) != 0)
      rc = ftl_diag_fail(d, FTL_ERR_NOTFOUND, "the base model folder %s has no %s", base_dir, base_files[i]);
  }
  return rc;
}

ftl_err pl_peft_copy_final(const char *final_dir, const json_t *want_files, const char *out_dir, const char *base_dir,
                           const char *base_sha256, ftl_diag *d) {
  char dir[4096], hex[65];
  json_t *files = NULL;
  ftl_err rc = pl_peft_final_check(final_dir, d);
  if (rc) return rc;
  if ((rc = ftl_mkdir_p(out_dir, d))) return rc;
  /* The copies must be the files the gate hashed (final/ is read again here, after the gate). */
  const char *want_weights = NULL, *want_config = NULL;
  if (want_files) {
    want_weights = gate_digest_of(want_files, FTL_PEFT_WEIGHTS_NAME);
    want_config = gate_digest_of(want_files, FTL_PEFT_CONFIG_NAME);
    const char *missing = !want_config ? FTL_PEFT_CONFIG_NAME : !want_weights ? FTL_PEFT_WEIGHTS_NAME : NULL;
    if (missing)
      return ftl_diag_fail(d, FTL_ERR_CORRUPT, "%s/%s is not the file the gate evaluated (changed after the gate?)",
                           final_dir, missing);
  }
  if ((rc = copy_file(final_dir, out_dir, FTL_PEFT_WEIGHTS_NAME, PEFT_WEIGHTS_MAX_BYTES, want_weights, d)) ||
      (rc = copy_file(final_dir, out_dir, FTL_PEFT_CONFIG_NAME, PEFT_CONFIG_MAX_BYTES, want_config, d)))
    return rc;
  if (ftl_fmt(dir, sizeof dir, "%s/%s", out_dir, FTL_PEFT_BASE_DIR))
    return ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", out_dir);
  core_fs_rm_tree(dir); /* an older export's base would be packaged with this adapter: replaced whole, or gone */
  if (!base_dir) return FTL_OK;
  if ((rc = check_base_listing(base_dir, d))) return rc;
  if ((rc = ftl_mkdir_p(dir, d))) return rc;
  for (size_t i = 0; i < N_BASE_FILES; i++)
    if ((rc = copy_file(base_dir, dir, base_files[i], BASE_FILE_MAX_BYTES, NULL, d))) return rc;
  if (!base_sha256) return FTL_OK;
  /* The snapshot's digest of a folder depends only on its files' names and bytes, so the copy
   * has the input's digest exactly when it is the input as the snapshot hashed it. */
  if ((rc = pl_folder_digest(dir, PL_FOLDER_TREE, &files, hex, d))) return rc;
  json_decref(files);
  if (strcmp(hex, base_sha256))
    return ftl_diag_fail(d, FTL_ERR_CORRUPT,
                         "the base model folder %s changed since the run's snapshot (its copy's digest %.12s..., the "
                         "snapshot says %.12s...)",
                         base_dir, hex, base_sha256);
  return FTL_OK;
}
