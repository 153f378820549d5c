/* tests/pipeline/test_base_export.c: `ftl export --base` (pipeline/peft.h, hf_base.h, base_h5.h)
 * and a package that carries the base (package.h), on a base model and an adapter the example's
 * own writers make (2 layers, 16 channels, 2 heads, intermediate 48):
 *   - OUT/base/ holds exactly config.json, model.safetensors, tokenizer.json,
 *     tokenizer_config.json, special_tokens_map.json; config.json has LlamaForCausalLM's fields
 *     with the base's numbers; model.safetensors holds every base tensor under Hugging Face's
 *     name, F32, its shape, the values bit for bit, and nothing else (the LM head is tied);
 *   - tokenizer.json maps each of the 256 GPT-2 byte characters to its byte (id == byte), with a
 *     ByteLevel pre-tokenizer (no prefix space, no regex) and decoder, a BPE model, no merges;
 *   - the adapter's tensors carry PEFT's Llama names;
 *   - two exports are byte-identical; a base whose content hash is not the adapter's, or whose
 *     SHA-256 is not the expected one, is refused;
 *   - a package built from the export is version 2, lists the base files, and unpacks to
 *     base/ with the same bytes; an adapter.json of version 1 is refused with a message saying so. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapter_io.h"
#include "base_io.h"
#include "ftl/core.h"
#include "ftl_test.h"
#include "pl_test_files.h"
#include "pipeline/hf_base.h"
#include "pipeline/pipeline.h"

static json_t *load_json(const char *dir, const char *name) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  json_error_t e;
  json_t *j = json_load_file(p, JSON_REJECT_DUPLICATES, &e);
  if (!j) FTL_TEST_FAIL_("%s: %s", p, e.text);
  return j;
}

static int64_t jint(const json_t *j, const char *k) { return json_integer_value(json_object_get(j, k)); }

int main(void) {
  char root[] = "/tmp/ftl-test-base-export.XXXXXX", p[4096], q[4096], msg[1024];
  CHECK(mkdtemp(root));
  char final_dir[1024], base_path[1024], exp1[1024], exp2[1024], base1[1100];
  snprintf(final_dir, sizeof final_dir, "%s/final", root);
  snprintf(base_path, sizeof base_path, "%s/base.h5", root);
  snprintf(exp1, sizeof exp1, "%s/export1", root);
  snprintf(exp2, sizeof exp2, "%s/export2", root);
  snprintf(base1, sizeof base1, "%s/base", exp1);
  ftl_diag d = {{0}};

  ft_config cfg = {.block = 8, .layers = 2, .heads = 2, .embd = 16};
  ft_params base;
  CHECK(ft_params_create(&base, &cfg) == 0);
  CHECK_INT_EQ(base.cfg.intermediate, 48);
  ft_params_init(&base, 7);
  CHECK_OK(ft_base_save(base_path, &base, "test", msg, sizeof msg), msg);
  ft_lora a;
  CHECK(ft_lora_create(&a, &cfg, 2, 4.0f, ft_lora_parse_targets("q_proj,k_proj,down_proj")) == 0);
  ft_lora_init(&a, 3);
  ft_adapter_meta meta = {.base_hash = ft_params_hash(&base), .steps = 1, .world_size = 1, .global_batch = 1};
  CHECK_OK(ft_adapter_save(final_dir, &a, &meta, msg, sizeof msg), msg);

  pl_peft_opts po = {.base_path = base_path};
  CHECK_OK(pl_peft_export(final_dir, exp1, &po, &d), d.msg);
  CHECK_OK(pl_peft_export(final_dir, exp2, &po, &d), d.msg);
  static const char *const files[] = {"config.json", "model.safetensors", "special_tokens_map.json",
                                      "tokenizer.json", "tokenizer_config.json"};
  for (size_t i = 0; i < 5; i++) {
    snprintf(p, sizeof p, "%s/base/%s", exp1, files[i]);
    snprintf(q, sizeof q, "%s/base/%s", exp2, files[i]);
    if (!pl_test_same_file(p, q)) FTL_TEST_FAIL_("%s differs between two exports", files[i]);
  }
  CHECK(pl_test_same_file(strcat(strcpy(p, exp1), "/adapter_model.safetensors"),
                  strcat(strcpy(q, exp2), "/adapter_model.safetensors")));

  /* config.json */
  json_t *c = load_json(base1, "config.json");
  CHECK_STR_EQ(json_string_value(json_array_get(json_object_get(c, "architectures"), 0)), "LlamaForCausalLM");
  CHECK_STR_EQ(json_string_value(json_object_get(c, "model_type")), "llama");
  CHECK_STR_EQ(json_string_value(json_object_get(c, "hidden_act")), "silu");
  CHECK_STR_EQ(json_string_value(json_object_get(c, "torch_dtype")), "float32");
  CHECK_INT_EQ(jint(c, "hidden_size"), 16);
  CHECK_INT_EQ(jint(c, "intermediate_size"), 48);
  CHECK_INT_EQ(jint(c, "num_hidden_layers"), 2);
  CHECK_INT_EQ(jint(c, "num_attention_heads"), 2);
  CHECK_INT_EQ(jint(c, "num_key_value_heads"), 2);
  CHECK_INT_EQ(jint(c, "head_dim"), 8);
  CHECK_INT_EQ(jint(c, "max_position_embeddings"), 8);
  CHECK_INT_EQ(jint(c, "vocab_size"), 256);
  CHECK_INT_EQ(jint(c, "eos_token_id"), 10);
  CHECK(json_real_value(json_object_get(c, "rms_norm_eps")) == 1e-5);
  CHECK(json_real_value(json_object_get(c, "rope_theta")) == 10000.0);
  CHECK(json_is_true(json_object_get(c, "tie_word_embeddings")));
  CHECK(json_is_false(json_object_get(c, "attention_bias")) && json_is_false(json_object_get(c, "mlp_bias")));
  json_decref(c);

  /* model.safetensors: every base tensor, by name, F32, bit for bit; nothing else. */
  pl_st_file *st = NULL;
  snprintf(p, sizeof p, "%s/model.safetensors", base1);
  CHECK_OK(pl_st_load(p, 1 << 26, NULL, &st, &d), d.msg);
  CHECK_STR_EQ(pl_st_meta_get(st, "format"), "pt");
  CHECK_INT_EQ(pl_st_count(st), base.n_tensors);
  CHECK_INT_EQ(base.n_tensors, 2 + 2 * 9);
  CHECK(pl_st_find(st, "lm_head.weight") == NULL);
  CHECK(pl_st_find(st, "model.layers.1.mlp.down_proj.weight") != NULL);
  CHECK(pl_st_find(st, "model.layers.0.post_attention_layernorm.weight") != NULL);
  for (int i = 0; i < base.n_tensors; i++) {
    const ft_tensor *o = &base.tensors[i];
    const pl_st_tensor *t = pl_st_find(st, o->name);
    if (!t) FTL_TEST_FAIL_("model.safetensors lacks %s", o->name);
    CHECK(t->dtype == FTL_ST_F32 && t->ndim == o->ndim && t->shape[0] == o->shape[0]);
    if (o->ndim == 2) CHECK(t->shape[1] == o->shape[1]);
    CHECK(memcmp(t->data, o->data, o->count * sizeof(float)) == 0);
  }
  pl_st_free(st);

  /* The adapter under PEFT's Llama names. */
  snprintf(p, sizeof p, "%s/adapter_model.safetensors", exp1);
  CHECK_OK(pl_st_load(p, 1 << 26, NULL, &st, &d), d.msg);
  CHECK_INT_EQ(pl_st_count(st), 2 * 3 * 2);
  const pl_st_tensor *t = pl_st_find(st, "base_model.model.model.layers.1.mlp.down_proj.lora_A.weight");
  CHECK(t && t->shape[0] == 2 && t->shape[1] == 48);
  CHECK(pl_st_find(st, "base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight") != NULL);
  pl_st_free(st);

  /* The tokenizer: id == byte. */
  json_t *tk = load_json(base1, "tokenizer.json");
  json_t *model = json_object_get(tk, "model"), *vocab = json_object_get(model, "vocab");
  CHECK_STR_EQ(json_string_value(json_object_get(model, "type")), "BPE");
  CHECK_INT_EQ(json_array_size(json_object_get(model, "merges")), 0);
  CHECK_INT_EQ(json_object_size(vocab), 256);
  int seen[256] = {0};
  const char *key;
  json_t *val;
  json_object_foreach(vocab, key, val) {
    int64_t b = json_integer_value(val);
    CHECK(b >= 0 && b < 256 && !seen[b]);
    seen[b] = 1;
    /* The key is the UTF-8 of GPT-2's character for byte b. */
    unsigned cp = pl_hf_byte_char((unsigned)b);
    char want[4] = {0};
    if (cp < 0x80)
      want[0] = (char)cp;
    else
      want[0] = (char)(0xc0 | (cp >> 6)), want[1] = (char)(0x80 | (cp & 0x3f));
    CHECK_STR_EQ(key, want);
  }
  CHECK_INT_EQ(jint(vocab, "a"), 'a');
  CHECK_INT_EQ(jint(vocab, "\xc4\xa0"), ' '); /* U+0120: GPT-2's space */
  CHECK_INT_EQ(jint(vocab, "\xc4\x8a"), '\n'); /* U+010A: GPT-2's newline */
  CHECK_INT_EQ(jint(vocab, "\xc4\x80"), 0);    /* U+0100: byte 0 */
  json_t *pre = json_object_get(tk, "pre_tokenizer"), *dec = json_object_get(tk, "decoder");
  CHECK_STR_EQ(json_string_value(json_object_get(pre, "type")), "ByteLevel");
  CHECK(json_is_false(json_object_get(pre, "add_prefix_space")) && json_is_false(json_object_get(pre, "use_regex")));
  CHECK_STR_EQ(json_string_value(json_object_get(dec, "type")), "ByteLevel");
  json_decref(tk);
  json_t *tc = load_json(base1, "tokenizer_config.json");
  CHECK_STR_EQ(json_string_value(json_object_get(tc, "tokenizer_class")), "PreTrainedTokenizerFast");
  json_decref(tc);

  /* A base that is not the adapter's, or not the expected bytes, is refused. */
  ft_params other;
  CHECK(ft_params_create(&other, &cfg) == 0);
  ft_params_init(&other, 8);
  snprintf(p, sizeof p, "%s/other.h5", root);
  CHECK_OK(ft_base_save(p, &other, "test", msg, sizeof msg), msg);
  pl_peft_opts po2 = {.base_path = p};
  snprintf(q, sizeof q, "%s/export3", root);
  CHECK(pl_peft_export(final_dir, q, &po2, &d) == FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "the adapter was trained on");
  pl_peft_opts po3 = {.base_path = base_path,
                       .base_sha256 = "0000000000000000000000000000000000000000000000000000000000000000"};
  CHECK(pl_peft_export(final_dir, q, &po3, &d) == FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "changed since the run's snapshot");
  ft_params_destroy(&other);

  /* A package with the base. */
  char verdict[1024], pk[1024], id[65], out[1024];
  snprintf(verdict, sizeof verdict, "%s/verdict.json", root);
  static const char vtext[] = "{\"passed\": true, \"version\": 1}\n";
  CHECK_OK(ftl_write_file_atomic(verdict, vtext, strlen(vtext), &d), d.msg);
  snprintf(pk, sizeof pk, "%s/p.tar.zst", root);
  json_t *prov = json_pack("{s:s}", "tag", "test");
  CHECK_OK(pl_package_build(exp1, verdict, prov, pk, id, &d), d.msg);
  json_decref(prov);
  snprintf(out, sizeof out, "%s/unpacked", root);
  char *man = NULL;
  size_t man_size = 0;
  CHECK_OK(pl_package_unpack(pk, out, id, NULL, NULL, &man, &man_size, &d), d.msg);
  CHECK_STR_CONTAINS(man, "\"version\": 2");
  CHECK_STR_CONTAINS(man, "\"name\": \"base/model.safetensors\"");
  ftl_free(man);
  for (size_t i = 0; i < 5; i++) {
    snprintf(p, sizeof p, "%s/base/%s", out, files[i]);
    snprintf(q, sizeof q, "%s/base/%s", exp1, files[i]);
    if (!pl_test_same_file(p, q)) FTL_TEST_FAIL_("unpacked base/%s differs from the export's", files[i]);
  }
  CHECK(pl_test_same_file(strcat(strcpy(p, out), "/adapter_config.json"), strcat(strcpy(q, exp1), "/adapter_config.json")));

  /* A version 1 adapter.json (the GPT-2 shaped model's) is refused, saying so. */
  snprintf(p, sizeof p, "%s/adapter.json", final_dir);
  size_t n;
  char *text = pl_test_slurp(p, &n);
  char *v = strstr(text, "\"version\": 2");
  CHECK(v != NULL);
  v[11] = '1';
  CHECK_OK(ftl_write_file_atomic(p, text, n, &d), d.msg);
  ftl_free(text);
  /* Committed again, so that the version (not the marker) is what is refused. */
  static const char *const committed[] = {FTL_ADAPTER_SAFETENSORS, FTL_ADAPTER_JSON};
  CHECK_OK(pl_adapter_commit_write(final_dir, committed, 2, &d), d.msg);
  snprintf(q, sizeof q, "%s/export4", root);
  CHECK(pl_peft_export(final_dir, q, NULL, &d) == FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "version 1 was the GPT-2 shaped model");
  ft_adapter_meta m2;
  ft_lora b2;
  CHECK(ft_adapter_load(final_dir, &base.cfg, &b2, &m2, msg, sizeof msg) != 0);
  CHECK_STR_CONTAINS(msg, "adapter format version 1");

  ft_lora_destroy(&a);
  ft_params_destroy(&base);
  printf("ok\n");
  return 0;
}
