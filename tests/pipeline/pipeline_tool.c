/* tests/pipeline/pipeline_tool.c: the pipeline's library calls as a command, for the script
 * tests (the `ftl` subcommands cover export and the registry; this adds what only `ftl publish`
 * would do, and fixtures):
 *   pipeline_tool make-final DIR [SEED [TARGETS [LAYERS]]]  an example adapter (8 channels, r 2; q_proj,v_proj,gate_proj; 1 layer)
 *   pipeline_tool export FINAL OUT                      PEFT export
 *   pipeline_tool package EXPORT VERDICT OUT [TAG]      a package, provenance {"tag": TAG}; prints the id
 *   pipeline_tool unpack PKG DIR [MAX_TOTAL_BYTES]      read back (DIR "-": verify only)
 *   pipeline_tool canonicalize PKG OUT [ID [MAX_TOTAL_BYTES]]  ftl's bytes of PKG's entries into OUT (ID "-": any);
 *                                                       prints "ID identical|rewritten OFFERED CANONICAL"
 *   pipeline_tool publish REG NAME PKG [CHANNEL]        publish (and point CHANNEL at it)
 *   pipeline_tool promote REG NAME VERSION CHANNEL
 *   pipeline_tool rollback REG NAME CHANNEL
 *   pipeline_tool resolve REG SPEC                      prints the id
 *   pipeline_tool check REG NAME                        prints the number of audit records
 * FTL_FAULT (core/fs.h) is applied at the start, as `ftl registry` does.
 * Exit 0 on success, 1 with the message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter_io.h"
#include "core/fs.h"
#include "ftl/core.h"
#include "pipeline/pipeline.h"

static int report(ftl_err rc, const ftl_diag *d) {
  if (rc) {
    fprintf(stderr, "error: %s (%s)\n", d->msg, ftl_err_name(rc));
    return 1;
  }
  return 0;
}

static int make_final(const char *dir, uint64_t seed, const char *targets, int layers) {
  ft_config cfg = {.block = 8, .layers = layers, .heads = 2, .embd = 8};
  ft_lora a;
  char msg[1024];
  if (ft_lora_create(&a, &cfg, 2, 4.0f, ft_lora_parse_targets(targets))) return 1;
  ft_lora_init(&a, seed);
  /* B is zero after init; give it values too, so the export's values are all checked. */
  ft_rng r;
  ftl_rng_seed(&r, seed + 1);
  for (int i = 0; i < a.n_tensors; i++)
    for (size_t k = 0; k < a.tensors[i].count; k++)
      a.tensors[i].data[k] = (float)((int64_t)(ftl_rng_next(&r) >> 40) - (1 << 23)) / (float)(1 << 23);
  ft_adapter_meta meta = {.base_hash = 0x0123456789abcdefULL,
                          .data_hash = 0xfedcba9876543210ULL,
                          .seed = seed,
                          .steps = 10,
                          .world_size = 2,
                          .global_batch = 8,
                          .lr = 0.01};
  int rc = ft_adapter_save(dir, &a, &meta, msg, sizeof msg);
  if (rc) fprintf(stderr, "error: %s\n", msg);
  ft_lora_destroy(&a);
  return rc ? 1 : 0;
}

int main(int argc, char **argv) {
  ftl_diag d = {{0}};
  char id[FTL_SHA256_HEX_LEN + 1];
  ftl_log_init_from_env();
  core_fault_from_env();
  if (argc < 2) return 2;
  const char *cmd = argv[1];
  if (!strcmp(cmd, "make-final") && argc >= 3)
    return make_final(argv[2], argc > 3 ? strtoull(argv[3], NULL, 10) : 1, argc > 4 ? argv[4] : "q_proj,v_proj,gate_proj",
                      argc > 5 ? (int)strtol(argv[5], NULL, 10) : 1);
  if (!strcmp(cmd, "export") && argc == 4) return report(pl_peft_export(argv[2], argv[3], NULL, &d), &d);
  if (!strcmp(cmd, "package") && argc >= 5) {
    json_t *prov = json_pack("{s:s, s:s, s:i}", "tag", argc > 5 ? argv[5] : "test", "base_model_hash",
                             "0123456789abcdef", "checkpoint_step", 10);
    ftl_err rc = pl_package_build(argv[2], argv[3], prov, argv[4], id, &d);
    json_decref(prov);
    if (!rc) printf("%s\n", id);
    return report(rc, &d);
  }
  if (!strcmp(cmd, "unpack") && argc >= 4) {
    pl_package_limits lim = {0};
    if (argc > 4) lim.max_total_bytes = strtoull(argv[4], NULL, 10);
    ftl_err rc = pl_package_unpack(argv[2], strcmp(argv[3], "-") ? argv[3] : NULL, NULL, &lim, id, NULL, NULL, &d);
    if (!rc) printf("%s\n", id);
    return report(rc, &d);
  }
  if (!strcmp(cmd, "canonicalize") && argc >= 4 && argc <= 6) {
    pl_package_info info;
    pl_package_limits lim = {0};
    if (argc > 5) lim.max_total_bytes = strtoull(argv[5], NULL, 10);
    const char *want = argc > 4 && strcmp(argv[4], "-") ? argv[4] : NULL;
    ftl_err rc = pl_package_canonicalize_to(argv[2], argv[3], want, &lim, &info, &d);
    if (!rc)
      printf("%s %s %llu %llu\n", info.id, info.identical ? "identical" : "rewritten",
             (unsigned long long)info.offered_bytes, (unsigned long long)info.canonical_bytes);
    pl_package_info_release(&info);
    return report(rc, &d);
  }
  pl_registry_ref reg = {.root = argc > 2 ? argv[2] : NULL, .who = "pipeline_tool", .lock_timeout_ms = 60000};
  if (!strcmp(cmd, "publish") && argc >= 5) {
    ftl_err rc = pl_registry_publish(&reg, argv[3], argv[4], argc > 5 ? argv[5] : NULL, "test", id, &d);
    if (!rc) printf("%s\n", id);
    return report(rc, &d);
  }
  if (!strcmp(cmd, "promote") && argc == 6)
    return report(pl_registry_promote(&reg, argv[3], argv[4], argv[5], "test", &d), &d);
  if (!strcmp(cmd, "rollback") && argc == 5) {
    ftl_err rc = pl_registry_rollback(&reg, argv[3], argv[4], "test", id, &d);
    if (!rc) printf("%s\n", id);
    return report(rc, &d);
  }
  if (!strcmp(cmd, "resolve") && argc == 4) {
    char name[FTL_REGISTRY_NAME_MAX + 1];
    ftl_err rc = pl_registry_resolve(&reg, argv[3], name, id, &d);
    if (!rc) printf("%s\n", id);
    return report(rc, &d);
  }
  if (!strcmp(cmd, "check") && argc == 4) {
    size_t lines = 0;
    ftl_err rc = pl_registry_check(&reg, argv[3], &lines, &d);
    if (!rc) printf("%zu\n", lines);
    return report(rc, &d);
  }
  fprintf(stderr, "pipeline_tool: bad command line\n");
  return 2;
}
