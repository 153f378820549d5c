/* tests/pipeline/test_peft_final.c: a final/ already in PEFT's layout (pipeline/peft.h,
 * pipeline/peft_final.c, docs/formats/adapter.md "A PEFT final/"), made here from the files
 * `ftl export` writes for an adapter and a base the example's own writers make, committed through
 * the public door ftl_adapter_commit:
 *   - it is recognised by adapter_config.json (the example's own final/ is not), checked, and
 *     copied byte for byte with its base folder (the copy's digest the expected one); pl_peft_export
 *     (`ftl export`) takes the same path;
 *   - refused, naming the file: no COMMIT, COMMIT not listing the weights, a listed file missing
 *     or a FIFO (never waited on), a malformed adapter_config.json, peft_type not LORA, r not an
 *     integer, weights not under PEFT's names, a copy that is not the gate's file, a base folder
 *     with a file a package cannot carry, a base that is a file, a base whose digest is not the
 *     snapshot's. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapter_io.h"
#include "base_io.h"
#include "ftl/adapter.h"
#include "ftl/core.h"
#include "ftl_test.h"
#include "pl_test_files.h"
#include "pipeline/peft.h"
#include "pipeline/pipeline.h"
#include "pipeline/snapshot.h"

/* from/name -> to/name. */
static void copy(const char *from, const char *to, const char *name) {
  char p[4096];
  size_t n;
  ftl_diag d;
  snprintf(p, sizeof p, "%s/%s", from, name);
  char *data = pl_test_slurp(p, &n);
  snprintf(p, sizeof p, "%s/%s", to, name);
  CHECK_OK(ftl_write_file_atomic(p, data, n, &d), d.msg);
  ftl_free(data);
}

static void put(const char *dir, const char *name, const char *text) {
  char p[4096];
  ftl_diag d;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  CHECK_OK(ftl_write_file_atomic(p, text, strlen(text), &d), d.msg);
}

static const char *const both[] = {"adapter_config.json", "adapter_model.safetensors"};

/* A PEFT final/ in dir from the export's two files, committed. */
static void make_final(const char *exp, const char *dir) {
  ftl_diag d;
  CHECK_OK(ftl_mkdir_p(dir, &d), d.msg);
  copy(exp, dir, both[0]);
  copy(exp, dir, both[1]);
  CHECK_OK(ftl_adapter_commit(dir, both, 2, &d), d.msg);
}

/* The check refuses dir with code want, the message holding needle. */
static void refused(const char *dir, ftl_err want, const char *needle) {
  ftl_diag d = {{0}};
  ftl_err rc = pl_peft_final_check(dir, &d);
  if (rc != want) FTL_TEST_FAIL_("check of %s returned %d, expected %d (%s)", dir, (int)rc, (int)want, d.msg);
  CHECK_STR_CONTAINS(d.msg, needle);
}

/* dir/adapter_config.json rewritten as text and committed (so only its content is at fault), then
 * refused with want naming needle. */
static void config_refused(const char *dir, const char *text, ftl_err want, const char *needle) {
  ftl_diag d;
  put(dir, both[0], text);
  CHECK_OK(ftl_adapter_commit(dir, both, 2, &d), d.msg);
  refused(dir, want, needle);
}

int main(void) {
  char root[] = "/tmp/ftl-test-peft-final.XXXXXX", p[4096], q[4096], msg[1024];
  CHECK(mkdtemp(root));
  char cfinal[1024], base_path[1024], exp[1024], fin[1024], out[1024], bad[1024], base_dir[1100];
  snprintf(cfinal, sizeof cfinal, "%s/cfinal", root);
  snprintf(base_path, sizeof base_path, "%s/base.h5", root);
  snprintf(exp, sizeof exp, "%s/export", root);
  snprintf(fin, sizeof fin, "%s/final", root);
  snprintf(out, sizeof out, "%s/out", root);
  snprintf(bad, sizeof bad, "%s/bad", root);
  snprintf(base_dir, sizeof base_dir, "%s/base", exp);
  ftl_diag d = {{0}};

  /* The example's adapter and base, exported: PEFT's two files and a Hugging Face base folder. */
  ft_config cfg = {.block = 8, .layers = 2, .heads = 2, .embd = 16};
  ft_params base;
  CHECK(ft_params_create(&base, &cfg) == 0);
  ft_params_init(&base, 7);
  CHECK_OK(ft_base_save(base_path, &base, "test", msg, sizeof msg), msg);
  ft_lora a;
  CHECK(ft_lora_create(&a, &cfg, 2, 4.0f, ft_lora_parse_targets("q_proj,v_proj")) == 0);
  ft_lora_init(&a, 3);
  ft_adapter_meta meta = {.base_hash = ft_params_hash(&base), .steps = 1, .world_size = 1, .global_batch = 1};
  CHECK_OK(ft_adapter_save(cfinal, &a, &meta, msg, sizeof msg), msg);
  pl_peft_opts po = {.base_path = base_path};
  CHECK_OK(pl_peft_export(cfinal, exp, &po, &d), d.msg);

  /* Recognised, checked, copied as it is. */
  make_final(exp, fin);
  CHECK(pl_peft_final_is_peft(fin));
  CHECK(!pl_peft_final_is_peft(cfinal));
  CHECK_OK(pl_peft_final_check(fin, &d), d.msg);
  char want[65];
  json_t *files = NULL, *gate_files = NULL;
  CHECK_OK(pl_folder_digest(base_dir, PL_FOLDER_TREE, &files, want, &d), d.msg);
  json_decref(files);
  CHECK_OK(pl_folder_digest(fin, PL_FOLDER_FLAT, &gate_files, q, &d), d.msg);
  CHECK_OK(pl_peft_copy_final(fin, gate_files, out, base_dir, want, &d), d.msg);
  for (size_t i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s/%s", fin, both[i]);
    snprintf(q, sizeof q, "%s/%s", out, both[i]);
    if (!pl_test_same_file(p, q)) FTL_TEST_FAIL_("%s is not copied byte for byte", both[i]);
  }
  static const char *const base_files[] = {"config.json", "model.safetensors", "special_tokens_map.json",
                                           "tokenizer.json", "tokenizer_config.json"};
  for (size_t i = 0; i < 5; i++) {
    snprintf(p, sizeof p, "%s/%s", base_dir, base_files[i]);
    snprintf(q, sizeof q, "%s/base/%s", out, base_files[i]);
    if (!pl_test_same_file(p, q)) FTL_TEST_FAIL_("base/%s is not copied byte for byte", base_files[i]);
  }
  snprintf(q, sizeof q, "%s/COMMIT", out);
  CHECK(access(q, F_OK) != 0); /* the package gets the adapter's files, not final/'s marker */
  /* `ftl export` of a PEFT final/ is the same copy. */
  snprintf(q, sizeof q, "%s/out2", root);
  pl_peft_opts po2 = {.base_path = base_dir, .base_sha256 = want};
  CHECK_OK(pl_peft_export(fin, q, &po2, &d), d.msg);
  snprintf(p, sizeof p, "%s/out2/adapter_model.safetensors", root);
  snprintf(q, sizeof q, "%s/adapter_model.safetensors", fin);
  CHECK(pl_test_same_file(p, q));

  /* Not the gate's files: the entry of the weights with another digest. */
  json_t *other = json_deep_copy(gate_files);
  for (size_t i = 0; i < json_array_size(other); i++) {
    json_t *e = json_array_get(other, i);
    if (!strcmp(json_string_value(json_object_get(e, "path")), "adapter_model.safetensors"))
      json_object_set_new(e, "sha256", json_string("00000000000000000000000000000000000000000000000000000000000000ff"));
  }
  CHECK(pl_peft_copy_final(fin, other, out, base_dir, want, &d) == FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "adapter_model.safetensors is not the file the gate evaluated");
  json_decref(other);
  json_decref(gate_files);

  /* The base: its digest not the snapshot's, a file it cannot carry, a file instead of a folder. */
  CHECK(pl_peft_copy_final(fin, NULL, out, base_dir, "1111111111111111111111111111111111111111111111111111111111111111",
                           &d) == FTL_ERR_CORRUPT);
  CHECK_STR_CONTAINS(d.msg, "changed since the run's snapshot");
  put(base_dir, "generation_config.json", "{}");
  CHECK(pl_peft_copy_final(fin, NULL, out, base_dir, NULL, &d) == FTL_ERR_SPEC);
  CHECK_STR_CONTAINS(d.msg, "holds generation_config.json");
  snprintf(p, sizeof p, "%s/generation_config.json", base_dir);
  CHECK(unlink(p) == 0);
  CHECK(pl_peft_copy_final(fin, NULL, out, base_path, NULL, &d) == FTL_ERR_SPEC);
  CHECK_STR_CONTAINS(d.msg, "is not a folder");
  snprintf(p, sizeof p, "%s/tokenizer.json", base_dir);
  snprintf(q, sizeof q, "%s/tokenizer.json.away", root);
  CHECK(rename(p, q) == 0);
  CHECK(pl_peft_copy_final(fin, NULL, out, base_dir, NULL, &d) == FTL_ERR_NOTFOUND);
  CHECK_STR_CONTAINS(d.msg, "has no tokenizer.json");
  CHECK(rename(q, p) == 0);

  /* Bad final/s, each refused naming the file. */
  make_final(exp, bad);
  snprintf(p, sizeof p, "%s/COMMIT", bad);
  CHECK(unlink(p) == 0);
  refused(bad, FTL_ERR_NOTFOUND, "has no commit marker COMMIT");
  CHECK_OK(ftl_adapter_commit(bad, both, 1, &d), d.msg); /* the config alone */
  refused(bad, FTL_ERR_CORRUPT, "does not list adapter_model.safetensors");
  CHECK_OK(ftl_adapter_commit(bad, both, 2, &d), d.msg);
  snprintf(p, sizeof p, "%s/adapter_model.safetensors", bad);
  CHECK(unlink(p) == 0);
  refused(bad, FTL_ERR_CORRUPT, "bad/adapter_model.safetensors is missing (listed in");
  /* A FIFO where a listed file was: refused, not waited on. */
  CHECK(mkfifo(p, 0600) == 0);
  refused(bad, FTL_ERR_CORRUPT, "adapter_model.safetensors is not a regular file");
  CHECK(unlink(p) == 0);
  copy(exp, bad, both[1]);

  config_refused(bad, "{\"peft_type\": \"LORA\", \"r\": 8,", FTL_ERR_CORRUPT, "bad/adapter_config.json is not valid JSON");
  config_refused(bad, "[1, 2]", FTL_ERR_CORRUPT, "adapter_config.json is not a JSON object");
  config_refused(bad, "{\"peft_type\": \"IA3\", \"r\": 8, \"lora_alpha\": 16, \"target_modules\": [\"q_proj\"]}", FTL_ERR_CORRUPT, "adapter_config.json: 'peft_type' is not \"LORA\"");
  config_refused(bad, "{\"peft_type\": \"LORA\", \"r\": \"8\", \"lora_alpha\": 16, \"target_modules\": [\"q_proj\"]}", FTL_ERR_CORRUPT, "adapter_config.json: 'r' is not an integer >= 1");
  config_refused(bad, "{\"peft_type\": \"LORA\", \"r\": 8, \"lora_alpha\": 16, \"target_modules\": []}", FTL_ERR_CORRUPT, "'target_modules' is neither a non-empty list nor a pattern");
  /* A config that is fine, over the example's own tensors (not PEFT's names). */
  copy(exp, bad, both[0]);
  snprintf(p, sizeof p, "%s/adapter.safetensors", cfinal);
  snprintf(q, sizeof q, "%s/adapter_model.safetensors", bad);
  size_t n;
  char *data = pl_test_slurp(p, &n);
  CHECK_OK(ftl_write_file_atomic(q, data, n, &d), d.msg);
  ftl_free(data);
  CHECK_OK(ftl_adapter_commit(bad, both, 2, &d), d.msg);
  refused(bad, FTL_ERR_CORRUPT, "is not under PEFT's prefix base_model.model.");
  /* An export of a refused final/ writes nothing new: refused the same way. */
  snprintf(q, sizeof q, "%s/out3", root);
  CHECK(pl_peft_export(bad, q, NULL, &d) == FTL_ERR_CORRUPT);
  CHECK(access(q, F_OK) != 0);

  ft_lora_destroy(&a);
  ft_params_destroy(&base);
  CHECK(ftl_test_rm_rf(root) == 0);
  printf("ok\n");
  return 0;
}
