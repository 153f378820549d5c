/* tests/finetune/fuzz_adapter.c: libFuzzer harness for the adapter's safetensors reader (outside
 * bytes: an adapter comes from another run, another machine, a registry). The expected adapter is
 * tiny (1 block, 4 channels, rank 2 on q and v: four tensors); any input must be refused with a
 * message or accepted, never read out of bounds. An accepted input must describe exactly the
 * expected tensors, so the reader's own contiguity rule makes its size exact. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adapter_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ft_config cfg = {.block = 4, .layers = 1, .heads = 1, .embd = 4};
  ft_lora a;
  char msg[512];
  if (ft_lora_create(&a, &cfg, 2, 4.0f, ft_lora_parse_targets("q_proj,v_proj"))) return 0;
  if (ft_adapter_parse_safetensors(data, size, &a, msg, sizeof msg) == 0) {
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++)
      hl |= (uint64_t)data[i] << (8 * i);
    if (size != 8 + hl + a.count * sizeof(float)) abort();
  } else if (!msg[0]) {
    abort(); /* a refusal always says why */
  }
  ft_lora_destroy(&a);
  return 0;
}
