/* pipeline/hf_base.c: the base model as a Hugging Face folder (hf_base.h).
 *
 * The config is the one LlamaConfig writes for this shape (the keys transformers reads; no
 * transformers_version, so the bytes do not depend on a Python install). The tokenizer is written
 * from the tokenizers library's JSON schema (documented at huggingface.co/docs/tokenizers), not
 * copied from any file. */
#include "pipeline/hf_base.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/fs.h"
#include "ftl/core.h"
#include "pipeline/pl_util.h"
#include "pipeline/safetensors.h"

unsigned pl_hf_byte_char(unsigned b) {
  /* Printable Latin-1 bytes stand for themselves; the other 68 (controls, space, DEL, NBSP, soft
   * hyphen...) take 256, 257... in byte order, GPT-2's rule so no byte maps to whitespace. */
  if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) return b;
  unsigned n = 0;
  for (unsigned x = 0; x < b; x++)
    if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff))) n++;
  return 256 + n;
}

/* The UTF-8 of code point cp (< 0x800 here) into buf. */
static void utf8(unsigned cp, char buf[4]) {
  if (cp < 0x80) {
    buf[0] = (char)cp;
    buf[1] = '\0';
  } else {
    buf[0] = (char)(0xc0 | (cp >> 6));
    buf[1] = (char)(0x80 | (cp & 0x3f));
    buf[2] = '\0';
  }
}

static json_t *config_json(const pl_base_model *m) {
  json_t *c = json_object();
  json_object_set_new(c, "architectures", json_pack("[s]", "LlamaForCausalLM"));
  json_object_set_new(c, "attention_bias", json_false());
  json_object_set_new(c, "attention_dropout", json_real(0.0));
  json_object_set_new(c, "bos_token_id", json_null());
  json_object_set_new(c, "eos_token_id", json_integer(PL_HF_EOS_BYTE));
  json_object_set_new(c, "head_dim", json_integer(m->embd / m->heads));
  json_object_set_new(c, "hidden_act", json_string("silu"));
  json_object_set_new(c, "hidden_size", json_integer(m->embd));
  json_object_set_new(c, "initializer_range", json_real(0.02));
  json_object_set_new(c, "intermediate_size", json_integer(m->intermediate));
  json_object_set_new(c, "max_position_embeddings", json_integer(m->block));
  json_object_set_new(c, "mlp_bias", json_false());
  json_object_set_new(c, "model_type", json_string("llama"));
  json_object_set_new(c, "num_attention_heads", json_integer(m->heads));
  json_object_set_new(c, "num_hidden_layers", json_integer(m->layers));
  json_object_set_new(c, "num_key_value_heads", json_integer(m->kv_heads));
  json_object_set_new(c, "pad_token_id", json_null());
  json_object_set_new(c, "pretraining_tp", json_integer(1));
  json_object_set_new(c, "rms_norm_eps", json_real(m->rms_norm_eps));
  json_object_set_new(c, "rope_scaling", json_null());
  json_object_set_new(c, "rope_theta", json_real(m->rope_theta));
  json_object_set_new(c, "tie_word_embeddings", json_true());
  json_object_set_new(c, "torch_dtype", json_string("float32"));
  json_object_set_new(c, "use_cache", json_true());
  json_object_set_new(c, "vocab_size", json_integer(m->vocab));
  return c;
}

static json_t *byte_level(int add_prefix_space, int use_regex) {
  return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", add_prefix_space, "trim_offsets",
                   1, "use_regex", use_regex);
}

static json_t *tokenizer_json(void) {
  json_t *vocab = json_object();
  for (unsigned b = 0; b < 256; b++) {
    char ch[4];
    utf8(pl_hf_byte_char(b), ch);
    json_object_set_new(vocab, ch, json_integer((json_int_t)b));
  }
  json_t *model = json_pack("{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:[]}", "type", "BPE", "dropout", "unk_token",
                            "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0,
                            "ignore_merges", 0, "vocab", vocab, "merges");
  /* The pre-tokenizer maps each byte to its character and does not split (no regex, no prefix
   * space), so every byte is one word of one character: with no merges, id == byte. */
  return json_pack("{s:s, s:n, s:n, s:[], s:n, s:o, s:n, s:o, s:o}", "version", "1.0", "truncation", "padding",
                   "added_tokens", "normalizer", "pre_tokenizer", byte_level(0, 0), "post_processor", "decoder",
                   byte_level(1, 1), "model", model);
}

static json_t *tokenizer_config_json(const pl_base_model *m) {
  return json_pack("{s:b, s:{}, s:I, s:s}", "clean_up_tokenization_spaces", 0, "added_tokens_decoder",
                   "model_max_length", (json_int_t)m->block, "tokenizer_class", "PreTrainedTokenizerFast");
}

static ftl_err write_json(const char *dir, const char *name, json_t *j, ftl_diag *d) {
  char path[4096];
  size_t len = 0;
  char *text = j ? pl_json_text(j, 1, &len) : NULL;
  json_decref(j);
  if (!text) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  ftl_err rc = ftl_fmt(path, sizeof path, "%s/%s", dir, name)
                   ? ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", dir)
                   : core_fs_replace(path, text, len, CORE_TMP_UNPREDICTABLE, NULL, -1, -1, d);
  ftl_free(text);
  return rc;
}

ftl_err pl_hf_base_write(const pl_base_model *m, const char *out_dir, ftl_diag *d) {
  char path[4096];
  ftl_err rc;
  pl_st_tensor *t = NULL;
  if ((rc = ftl_mkdir_p(out_dir, d))) return rc;
  if (!(t = ftl_calloc(m->n_tensors, sizeof *t))) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < m->n_tensors; i++) {
    const pl_base_tensor *b = &m->tensors[i];
    t[i] = (pl_st_tensor){.name = b->name, .dtype = FTL_ST_F32, .ndim = b->ndim, .data = b->data,
                           .size_bytes = (uint64_t)b->count * 4};
    t[i].shape[0] = b->shape[0];
    t[i].shape[1] = b->shape[1];
  }
  /* transformers' save_pretrained writes {"format": "pt"}; the loader wants it. */
  static const pl_st_kv meta[] = {{"format", "pt"}};
  if (ftl_fmt(path, sizeof path, "%s/%s", out_dir, PL_HF_WEIGHTS))
    rc = ftl_diag_fail(d, FTL_ERR_RANGE, "path too long: %s", out_dir);
  else
    rc = pl_st_write(path, t, m->n_tensors, meta, 1, d);
  ftl_free(t);
  if (rc) return rc;
  if ((rc = write_json(out_dir, PL_HF_CONFIG, config_json(m), d))) return rc;
  if ((rc = write_json(out_dir, PL_HF_TOKENIZER, tokenizer_json(), d))) return rc;
  if ((rc = write_json(out_dir, PL_HF_TOKENIZER_CONFIG, tokenizer_config_json(m), d))) return rc;
  return write_json(out_dir, PL_HF_SPECIAL_TOKENS, json_object(), d);
}
