/* pipeline/hf_base.h: the example's base model written as a Hugging Face LlamaForCausalLM folder
 * (docs/formats/peft-export.md, "The base"): config.json, model.safetensors (F32, Hugging Face's
 * names, the LM head tied to the embedding and not stored), and a byte-level tokenizer that
 * transformers' AutoTokenizer loads offline with token id == byte value: tokenizer.json (a BPE
 * model without merges over GPT-2's 256 byte characters, ByteLevel pre-tokenizer and decoder),
 * tokenizer_config.json and special_tokens_map.json.
 *
 * Deterministic bytes (sorted keys, no times), each file through core's atomic replace.
 * Not here: reading the base file (base_h5.h), the adapter (peft.h). Reentrant. */
#ifndef FTL_PIPELINE_HF_BASE_H
#define FTL_PIPELINE_HF_BASE_H

#include "ftl/error.h"
#include "pipeline/base_h5.h"

#define PL_HF_CONFIG "config.json"
#define PL_HF_WEIGHTS "model.safetensors"
#define PL_HF_TOKENIZER "tokenizer.json"
#define PL_HF_TOKENIZER_CONFIG "tokenizer_config.json"
#define PL_HF_SPECIAL_TOKENS "special_tokens_map.json"

/* The line byte ends every example (docs/finetune.md): the eos_token_id of config.json. */
#define PL_HF_EOS_BYTE 10

/* Writes m into out_dir (made if missing). */
ftl_err pl_hf_base_write(const pl_base_model *m, const char *out_dir, ftl_diag *d);

/* GPT-2's bytes_to_unicode: the code point that stands for byte b in a ByteLevel vocabulary. */
unsigned pl_hf_byte_char(unsigned b);

#endif
