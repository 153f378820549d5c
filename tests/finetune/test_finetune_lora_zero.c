/* tests/finetune/test_finetune_lora_zero.c: an adapter with B = 0 (PEFT's initialisation) leaves
 * the base model's outputs exactly unchanged, on every linear layer at once and for any A; and
 * the adapter's files round-trip bit for bit (write, read back, same bytes and same outputs). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "adapter_io.h"
#include "ftl/core.h"
#include "ftl_test.h"
#include "model.h"

int main(void) {
  ft_config cfg = {.block = 12, .layers = 2, .heads = 4, .embd = 32};
  const int B = 3, T = 12;
  ft_params p;
  ft_lora a;
  CHECK(ft_params_create(&p, &cfg) == 0);
  CHECK(ft_lora_create(&a, &cfg, 4, 8.0f, (1u << FT_LIN_COUNT) - 1) == 0);
  ft_params_init(&p, 1);
  ft_lora_init(&a, 2); /* random A, B = 0 */
  int tokens[36];
  ft_rng r;
  ft_rng_seed(&r, 9);
  for (int i = 0; i < B * T; i++)
    tokens[i] = (int)ft_rng_below(&r, 256);
  ft_acts *x = ft_acts_create(&cfg, 4, B), *y = ft_acts_create(&cfg, 4, B);
  CHECK(x && y);
  ft_forward(&p, NULL, tokens, NULL, B, T, x, NULL);
  ft_forward(&p, &a, tokens, NULL, B, T, y, NULL);
  const float *lx = ft_acts_logits(x), *ly = ft_acts_logits(y);
  for (int i = 0; i < B * T * FT_VOCAB; i++)
    if (lx[i] != ly[i]) FTL_TEST_FAIL_("logit %d: base %.9g, base + zero adapter %.9g", i, lx[i], ly[i]);
  printf("B = 0: %d logits identical to the base model's\n", B * T * FT_VOCAB);

  /* A non-zero B changes them (the check above is not vacuous). */
  for (size_t i = 0; i < a.count; i++)
    a.mem[i] += 0.01f;
  ft_forward(&p, &a, tokens, NULL, B, T, y, NULL);
  int changed = 0;
  for (int i = 0; i < B * T * FT_VOCAB; i++)
    changed += lx[i] != ly[i];
  CHECK(changed > 0);

  /* Files: write, read back into a fresh adapter, compare bytes. */
  char dir[] = "/tmp/ftl-test-adapter.XXXXXX", msg[1024];
  CHECK(mkdtemp(dir) != NULL);
  ft_adapter_meta meta = {
      .base_hash = 0x1234, .data_hash = 0x99, .seed = 3, .steps = 10, .world_size = 4, .global_batch = 8, .lr = 1e-3};
  CHECK_OK(ft_adapter_save(dir, &a, &meta, msg, sizeof msg), msg);
  ft_lora b;
  ft_adapter_meta m2;
  CHECK_OK(ft_adapter_load(dir, &cfg, &b, &m2, msg, sizeof msg), msg);
  CHECK_INT_EQ(b.count, a.count);
  CHECK(memcmp(a.mem, b.mem, a.count * sizeof(float)) == 0);
  CHECK(m2.base_hash == 0x1234 && m2.steps == 10 && m2.world_size == 4 && b.rank == 4 && b.alpha == 8.0f);
  /* Truncated or altered files are refused, never half-read. */
  char path[4200];
  snprintf(path, sizeof path, "%s/adapter.safetensors", dir);
  char *bytes = NULL;
  size_t size = 0;
  ftl_diag d;
  CHECK_OK(ftl_read_file(path, 1 << 24, &bytes, &size, &d), d.msg);
  CHECK(ft_adapter_parse_safetensors((const uint8_t *)bytes, size - 4, &b, msg, sizeof msg) != 0);
  CHECK_STR_CONTAINS(msg, "data_offsets");
  CHECK(ft_adapter_parse_safetensors((const uint8_t *)bytes, 7, &b, msg, sizeof msg) != 0);
  ftl_free(bytes);
  unlink(path);
  snprintf(path, sizeof path, "%s/adapter.json", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/COMMIT", dir);
  unlink(path);
  rmdir(dir);
  ft_lora_destroy(&b);
  ft_acts_destroy(x);
  ft_acts_destroy(y);
  ft_lora_destroy(&a);
  ft_params_destroy(&p);
  printf("ok\n");
  return 0;
}
