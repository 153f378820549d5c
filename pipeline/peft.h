/* pipeline/peft.h: the example's final adapter exported in PEFT's layout
 * (docs/formats/peft-export.md): adapter_model.safetensors with PEFT's tensor names and
 * {"format":"pt"} metadata, and adapter_config.json as PEFT writes it (sorted keys, 2-space
 * indent). Deterministic bytes: the same final/ gives the same export.
 *
 * Module path mapping (this example's byte-level transformer, named as GPT-J names the same
 * layers, nn.Linear with separate q/k/v and a C -> 4C -> C MLP):
 *   layers.<i>.q    -> base_model.model.transformer.h.<i>.attn.q_proj
 *   layers.<i>.k    -> base_model.model.transformer.h.<i>.attn.k_proj
 *   layers.<i>.v    -> base_model.model.transformer.h.<i>.attn.v_proj
 *   layers.<i>.o    -> base_model.model.transformer.h.<i>.attn.out_proj
 *   layers.<i>.fc   -> base_model.model.transformer.h.<i>.mlp.fc_in
 *   layers.<i>.proj -> base_model.model.transformer.h.<i>.mlp.fc_out
 * each followed by .lora_A.weight / .lora_B.weight.
 *
 * Not here: training, evaluation. Thread-safety: reentrant. */
#ifndef FTL_PIPELINE_PEFT_H
#define FTL_PIPELINE_PEFT_H

#include <stddef.h>

#include "ftl/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FTL_PEFT_WEIGHTS_NAME "adapter_model.safetensors"
#define FTL_PEFT_CONFIG_NAME "adapter_config.json"

/* The PEFT module path (without "base_model.model." and the lora suffix) of the example's short
 * module name ("q", "fc"...) in block `layer`, into out. FTL_ERR_INVAL for an unknown module. */
ftl_err pl_peft_module_path(const char *module, int layer, char *out, size_t size);
/* The PEFT target_modules suffix of a short name ("q" -> "q_proj"); NULL for an unknown one. */
const char *pl_peft_target_name(const char *module);

typedef struct ftl_peft_opts {
  /* base_model_name_or_path; NULL: "ftl-finetune-base-<base_model_hash>". Servers (vLLM's
   * resolver) require it to equal the served base model's id exactly. */
  const char *base_model_name;
} ftl_peft_opts;

/* Exports final_dir (verified first: its commit marker must be valid) into out_dir (created if
 * missing; both files written atomically). opts may be NULL. */
ftl_err pl_peft_export(const char *final_dir, const char *out_dir, const ftl_peft_opts *opts, ftl_diag *d);

/* The same for a run directory: RUNDIR/final -> RUNDIR/export (out_dir NULL) or out_dir. */
ftl_err pl_peft_export_run(const char *run_dir, const char *out_dir, const ftl_peft_opts *opts, ftl_diag *d);

#ifdef __cplusplus
}
#endif
#endif
