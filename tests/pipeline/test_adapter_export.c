/* tests/pipeline/test_adapter_export.c: the final adapter as a committed unit, the PEFT export
 * and the package (pipeline/adapter_commit.h, peft.h, package.h), on an adapter the example's own
 * writer makes (1 layer, 8 channels, intermediate 24, rank 2 on q_proj, v_proj, gate_proj):
 *   - final/COMMIT is written; a final/ without it (a crash between the files) or with a file
 *     changed after it is refused by the example's loader and by the export, naming the file;
 *   - the export's adapter_config.json equals the golden file (written by Python's json.dumps as
 *     PEFT does), its tensors carry PEFT's names and the example's values bit for bit, and two
 *     exports are byte-identical;
 *   - two packages of the same adapter are byte-identical; the id is the SHA-256 of MANIFEST.json;
 *     unpacking gives the files back; a verdict that did not pass is not packaged. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapter_io.h"
#include "ftl/core.h"
#include "ftl_test.h"
#include "pl_test_files.h"
#include "pipeline/pipeline.h"

static void put(const char *path, const char *text) {
  ftl_diag d;
  CHECK_OK(ftl_write_file_atomic(path, text, strlen(text), &d), d.msg);
}

int main(void) {
  char root[] = "/tmp/ftl-test-export.XXXXXX", p[4096], q[4096], msg[1024];
  CHECK(mkdtemp(root));
  char final_dir[1024], exp1[1024], exp2[1024];
  snprintf(final_dir, sizeof final_dir, "%s/final", root);
  snprintf(exp1, sizeof exp1, "%s/export1", root);
  snprintf(exp2, sizeof exp2, "%s/export2", root);
  ftl_diag d = {{0}};

  ft_config cfg = {.block = 8, .layers = 1, .heads = 2, .embd = 8};
  ft_lora a, b;
  CHECK_OK(ft_lora_create(&a, &cfg, 2, 4.0f, ft_lora_parse_targets("q_proj,v_proj,gate_proj")), "create");
  ft_lora_init(&a, 3);
  for (int i = 0; i < a.n_tensors; i++)
    for (size_t k = 0; k < a.tensors[i].count; k++)
      a.tensors[i].data[k] += 0.001f * (float)(i + 1) * (float)k;
  ft_adapter_meta meta = {.base_hash = 0x0123456789abcdefULL,
                          .data_hash = 1,
                          .seed = 3,
                          .steps = 10,
                          .world_size = 2,
                          .global_batch = 8,
                          .lr = 0.01};
  CHECK_OK(ft_adapter_save(final_dir, &a, &meta, msg, sizeof msg), msg);

  /* The commit marker. */
  static const char *const files[] = {FTL_ADAPTER_SAFETENSORS, FTL_ADAPTER_JSON};
  CHECK_OK(pl_adapter_commit_verify(final_dir, files, 2, &d), d.msg);
  ft_adapter_meta m2;
  CHECK_OK(ft_adapter_load(final_dir, &cfg, &b, &m2, msg, sizeof msg), msg);
  ft_lora_destroy(&b);
  snprintf(p, sizeof p, "%s/COMMIT", final_dir);
  snprintf(q, sizeof q, "%s/COMMIT.keep", root);
  CHECK(rename(p, q) == 0);
  /* A crash after the first file: adapter.json missing too. */
  char j1[4096], j2[4096];
  snprintf(j1, sizeof j1, "%s/adapter.json", final_dir);
  snprintf(j2, sizeof j2, "%s/adapter.json.keep", root);
  CHECK(rename(j1, j2) == 0);
  CHECK(pl_adapter_commit_verify(final_dir, files, 2, &d) == FTL_ERR_NOTFOUND);
  CHECK_STR_CONTAINS(d.msg, "no commit marker");
  CHECK_STR_CONTAINS(d.msg, "present: adapter.safetensors");
  CHECK_STR_CONTAINS(d.msg, "missing: adapter.json, COMMIT");
  CHECK(ft_adapter_load(final_dir, &cfg, &b, &m2, msg, sizeof msg) != 0);
  CHECK_STR_CONTAINS(msg, "no commit marker");
  CHECK(pl_peft_export(final_dir, exp1, NULL, &d) == FTL_ERR_NOTFOUND);
  CHECK_STR_CONTAINS(d.msg, "not completely written");
  CHECK(rename(j2, j1) == 0);
  CHECK(pl_adapter_commit_verify(final_dir, files, 2, &d) == FTL_ERR_NOTFOUND);
  CHECK(rename(q, p) == 0);
  CHECK_OK(pl_adapter_commit_verify(final_dir, files, 2, &d), d.msg);
  /* A file changed after the commit. */
  size_t jn;
  char *jtext = pl_test_slurp(j1, &jn);
  put(j1, "{}\n");
  CHECK(pl_adapter_commit_verify(final_dir, files, 2, &d) == FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "adapter.json does not match its commit marker");
  CHECK(ft_adapter_load(final_dir, &cfg, &b, &m2, msg, sizeof msg) != 0);
  CHECK_STR_CONTAINS(msg, "does not match");
  ftl_write_file_atomic(j1, jtext, jn, &d);
  ftl_free(jtext);
  CHECK_OK(pl_adapter_commit_verify(final_dir, files, 2, &d), d.msg);
  /* The marker itself is deterministic: saving again gives the same bytes. */
  size_t c1n, c2n;
  char *c1 = pl_test_slurp(p, &c1n);
  CHECK_OK(ft_adapter_save(final_dir, &a, &meta, msg, sizeof msg), msg);
  char *c2 = pl_test_slurp(p, &c2n);
  CHECK(c1n == c2n && memcmp(c1, c2, c1n) == 0);
  CHECK_STR_CONTAINS(c1, "\"format\": \"ftl-adapter-commit\"");
  ftl_free(c1);
  ftl_free(c2);

  /* The PEFT export. */
  CHECK_OK(pl_peft_export(final_dir, exp1, NULL, &d), d.msg);
  CHECK_OK(pl_peft_export(final_dir, exp2, NULL, &d), d.msg);
  char e1[4096], e2[4096];
  snprintf(e1, sizeof e1, "%s/adapter_config.json", exp1);
  snprintf(e2, sizeof e2, "%s/adapter_config.json", exp2);
  CHECK(pl_test_same_file(e1, e2));
  snprintf(q, sizeof q, "%s/tests/pipeline/data/adapter_config.golden.json",
           getenv("FTL_SOURCE_DIR") ? getenv("FTL_SOURCE_DIR") : "..");
  if (!pl_test_same_file(e1, q)) {
    size_t n;
    char *t = pl_test_slurp(e1, &n);
    FTL_TEST_FAIL_("%s differs from the golden %s:\n%s", e1, q, t);
  }
  snprintf(e1, sizeof e1, "%s/adapter_model.safetensors", exp1);
  snprintf(e2, sizeof e2, "%s/adapter_model.safetensors", exp2);
  CHECK(pl_test_same_file(e1, e2));
  pl_st_file *st = NULL;
  CHECK_OK(pl_st_load(e1, 1 << 26, NULL, &st, &d), d.msg);
  CHECK_STR_EQ(pl_st_meta_get(st, "format"), "pt");
  CHECK_INT_EQ(pl_st_meta_count(st), 1);
  CHECK_INT_EQ(pl_st_count(st), 6);
  static const struct {
    const char *peft, *ours;
    int64_t s0, s1;
  } want[] = {
      {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", "model.layers.0.self_attn.q_proj.lora_A.weight",
       2, 8},
      {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", "model.layers.0.self_attn.q_proj.lora_B.weight",
       8, 2},
      {"base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight", "model.layers.0.self_attn.v_proj.lora_A.weight",
       2, 8},
      {"base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight", "model.layers.0.self_attn.v_proj.lora_B.weight",
       8, 2},
      {"base_model.model.model.layers.0.mlp.gate_proj.lora_A.weight", "model.layers.0.mlp.gate_proj.lora_A.weight", 2,
       8},
      {"base_model.model.model.layers.0.mlp.gate_proj.lora_B.weight", "model.layers.0.mlp.gate_proj.lora_B.weight", 24,
       2},
  };
  for (size_t i = 0; i < 6; i++) {
    const pl_st_tensor *t = pl_st_find(st, want[i].peft);
    if (!t) FTL_TEST_FAIL_("export lacks %s", want[i].peft);
    CHECK(t->dtype == FTL_ST_F32 && t->ndim == 2 && t->shape[0] == want[i].s0 && t->shape[1] == want[i].s1);
    const ft_tensor *o = NULL;
    for (int k = 0; k < a.n_tensors; k++)
      if (!strcmp(a.tensors[k].name, want[i].ours)) o = &a.tensors[k];
    CHECK(o && memcmp(o->data, t->data, o->count * sizeof(float)) == 0);
  }
  pl_st_free(st);
  pl_peft_opts po = {.base_model_name = "org/base-model"};
  char exp3[1024];
  snprintf(exp3, sizeof exp3, "%s/export3", root);
  CHECK_OK(pl_peft_export(final_dir, exp3, &po, &d), d.msg);
  snprintf(p, sizeof p, "%s/adapter_config.json", exp3);
  size_t n3;
  char *t3 = pl_test_slurp(p, &n3);
  CHECK_STR_CONTAINS(t3, "\"base_model_name_or_path\": \"org/base-model\"");
  ftl_free(t3);

  /* The package. */
  char verdict[1024], pk1[1024], pk2[1024], id1[65], id2[65], id3[65];
  snprintf(verdict, sizeof verdict, "%s/verdict.json", root);
  put(verdict, "{\"passed\": true, \"version\": 1, \"metric\": \"exact_match\", \"value\": 0.9}\n");
  snprintf(pk1, sizeof pk1, "%s/p1.tar.zst", root);
  snprintf(pk2, sizeof pk2, "%s/p2.tar.zst", root);
  json_t *prov = json_pack("{s:s, s:[s], s:i, s:f}", "base_model_hash", "0123456789abcdef", "snapshot_digests", "aa",
                           "checkpoint_step", 10, "goodput", 0.9);
  CHECK_OK(pl_package_build(exp1, verdict, prov, pk1, id1, &d), d.msg);
  CHECK_OK(pl_package_build(exp2, verdict, prov, pk2, id2, &d), d.msg);
  CHECK(pl_test_same_file(pk1, pk2));
  CHECK_STR_EQ(id1, id2);
  char out[1024], *man = NULL;
  size_t man_size = 0;
  snprintf(out, sizeof out, "%s/unpacked", root);
  CHECK_OK(pl_package_unpack(pk1, out, id1, NULL, id3, &man, &man_size, &d), d.msg);
  CHECK_STR_EQ(id3, id1);
  char mh[65];
  pl_sha256_hex(man, man_size, mh);
  CHECK_STR_EQ(mh, id1);
  CHECK_STR_CONTAINS(man, "\"name\": \"adapter_config.json\"");
  ftl_free(man);
  snprintf(p, sizeof p, "%s/adapter_model.safetensors", out);
  CHECK(pl_test_same_file(p, e1));
  snprintf(p, sizeof p, "%s/verdict.json", out);
  CHECK(pl_test_same_file(p, verdict));
  snprintf(p, sizeof p, "%s/MANIFEST.json", out);
  CHECK(access(p, F_OK) == 0);
  /* Unpacking onto an existing folder, or with the wrong expected id, is refused. */
  CHECK(pl_package_unpack(pk1, out, NULL, NULL, NULL, NULL, NULL, &d) == FTL_ERR_STATE);
  snprintf(out, sizeof out, "%s/unpacked2", root);
  CHECK(pl_package_unpack(pk1, out, "00000000000000000000000000000000000000000000000000000000000000ff", NULL, NULL,
                           NULL, NULL, &d) == FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "not the expected");
  CHECK(access(out, F_OK) != 0);
  /* Another provenance is another version. */
  json_object_set_new(prov, "checkpoint_step", json_integer(11));
  CHECK_OK(pl_package_build(exp1, verdict, prov, pk2, id2, &d), d.msg);
  CHECK(strcmp(id1, id2) != 0);
  /* Verdicts that do not allow packaging. */
  put(verdict, "{\"passed\": false, \"version\": 1}\n");
  CHECK(pl_package_build(exp1, verdict, prov, pk2, id2, &d) == FTL_ERR_STATE);
  CHECK_STR_CONTAINS(d.msg, "did not pass");
  put(verdict, "{\"passed\": true, \"version\": 2}\n");
  CHECK(pl_package_build(exp1, verdict, prov, pk2, id2, &d) == FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "version 1");
  json_decref(prov);
  ft_lora_destroy(&a);
  if (ftl_test_rm_rf(root)) return 1;
  printf("ok\n");
  return 0;
}
