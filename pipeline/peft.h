/* pipeline/peft.h: the example's final adapter exported in PEFT's layout
 * (docs/formats/peft-export.md): adapter_model.safetensors with PEFT's tensor names and
 * {"format":"pt"} metadata, and adapter_config.json as PEFT writes it (sorted keys, 2-space
 * indent). Deterministic bytes: the same final/ gives the same export.
 *
 * Module path mapping (this example's byte-level Llama decoder, Hugging Face's LlamaForCausalLM):
 *   model.layers.<i>.self_attn.{q,k,v,o}_proj.lora_{A,B}.weight   (the example's adapter.safetensors)
 *   -> base_model.model.model.layers.<i>.self_attn.{q,k,v,o}_proj.lora_{A,B}.weight
 *   model.layers.<i>.mlp.{gate,up,down}_proj.lora_{A,B}.weight
 *   -> base_model.model.model.layers.<i>.mlp.{gate,up,down}_proj.lora_{A,B}.weight
 * target_modules are the short names (q_proj ... down_proj). With a base (opts->base_path or
 * with_base), OUT/base/ gets the base model as a Hugging Face folder (hf_base.h).
 *
 * Not here: training, evaluation. Thread-safety: reentrant. */
#ifndef FTL_PIPELINE_PEFT_H
#define FTL_PIPELINE_PEFT_H

#include <jansson.h>
#include <stddef.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FTL_PEFT_WEIGHTS_NAME "adapter_model.safetensors"
#define FTL_PEFT_CONFIG_NAME "adapter_config.json"
#define FTL_PEFT_BASE_DIR "base" /* the base model's Hugging Face folder inside an export */

/* The module path (without PEFT's "base_model.model." and the lora suffix) of a module name
 * ("q_proj", "gate_proj"...) in layer `layer`, into out: "model.layers.0.self_attn.q_proj".
 * FTL_ERR_INVAL for an unknown module. */
ftl_err pl_peft_module_path(const char *module, int layer, char *out, size_t size);
/* The PEFT target_modules entry of a module name (itself: "q_proj"); NULL for an unknown one. */
const char *pl_peft_target_name(const char *module);

typedef struct pl_peft_opts {
  /* base_model_name_or_path; NULL: "ftl-finetune-base-<base_model_hash>". Servers (vLLM's
   * resolver) require it to equal the served base model's id exactly. */
  const char *base_model_name;
  /* The base model file (the example's HDF5, docs/formats/base-model.md) to export as OUT/base/;
   * NULL: none, unless with_base. Its recorded content hash must be the adapter's. */
  const char *base_path;
  /* When not NULL, the SHA-256 (hex) base_path must have (the run's snapshot's). */
  const char *base_sha256;
  /* pl_peft_export_run only: find the base in the run's snapshot when base_path is NULL. */
  int with_base;
} pl_peft_opts;

/* Exports final_dir (verified first: its commit marker must be valid) into out_dir (created if
 * missing; both files written atomically). opts may be NULL. A PEFT final/ (pl_peft_final_is_peft)
 * is copied as it is (pl_peft_copy_final), its base (opts->base_path) a Hugging Face folder. */
ftl_err pl_peft_export(const char *final_dir, const char *out_dir, const pl_peft_opts *opts, ftl_diag *d);

/* The same for a run directory: RUNDIR/final -> RUNDIR/export (out_dir NULL) or out_dir. */
ftl_err pl_peft_export_run(const char *run_dir, const char *out_dir, const pl_peft_opts *opts, ftl_diag *d);

/* ---- a final/ that is already in PEFT's layout (docs/formats/adapter.md, "A PEFT final/") ----
 * A program that trains with peft (examples/hf-lora) writes final/ with save_pretrained and
 * commits it (ftl_adapter_commit); the gate evaluates it and `ftl publish` packages its two
 * files as they are, with no conversion. */

/* 1 when final_dir holds adapter_config.json (of any type: the check refuses what is not a
 * regular file), which is what marks a PEFT final/; 0 for the example's own format. */
int pl_peft_final_is_peft(const char *final_dir);

/* Checks a PEFT final/: its commit marker lists and matches adapter_config.json and
 * adapter_model.safetensors; adapter_config.json is a JSON object of a LoRA adapter (peft_type
 * "LORA", r an integer >= 1, lora_alpha a number, target_modules a list of names or a pattern,
 * base_model_name_or_path a string or null); adapter_model.safetensors parses strictly and holds
 * PEFT's names (base_model.model....). Errors name the file and the field. */
ftl_err pl_peft_final_check(const char *final_dir, ftl_diag *d);

/* Copies a checked PEFT final/ into out_dir (made if missing) as it is: adapter_config.json and
 * adapter_model.safetensors byte for byte; with want_files (the gate's entries of final/,
 * pl_folder_digest's PL_FOLDER_FLAT {path, size, sha256}), each copy must have its entry's
 * SHA-256. With base_dir (a Hugging Face model folder: exactly
 * config.json, model.safetensors, special_tokens_map.json, tokenizer.json, tokenizer_config.json,
 * as a package's base/ holds them, hf_base.h), copies it into out_dir/base (an old out_dir/base
 * is removed first, also without base_dir) and, with base_sha256,
 * checks the copy's folder digest (pl_folder_digest, PL_FOLDER_TREE) is the snapshot's. */
ftl_err pl_peft_copy_final(const char *final_dir, const json_t *want_files, const char *out_dir, const char *base_dir,
                           const char *base_sha256, ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
