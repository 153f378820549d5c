/* examples/finetune/adapter_io.h: the final adapter on disk (docs/formats/adapter.md):
 * DIR/adapter.safetensors (the LoRA tensors, float32, PEFT shapes) and DIR/adapter.json (rank,
 * alpha, targets, the base model's configuration and content hash, how it was trained).
 *
 * Both files are written deterministically (sorted names and keys, no times), so the same
 * training gives byte-identical files; each by tmp + fsync + rename; then DIR/COMMIT (their
 * SHA-256), last, all through ftl's public door (ftl/adapter.h). A DIR without a valid COMMIT is
 * refused on load. */
#ifndef FTL_EXAMPLES_FINETUNE_ADAPTER_IO_H
#define FTL_EXAMPLES_FINETUNE_ADAPTER_IO_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* What adapter.json says besides the tensors. */
typedef struct ft_adapter_meta {
  uint64_t base_hash;
  uint64_t data_hash;
  uint64_t seed;
  int64_t steps;
  int world_size;
  int global_batch;
  double lr;
} ft_adapter_meta;

/* Writes both files into dir (created if missing). 0 or -1 with msg. */
int ft_adapter_save(const char *dir, const ft_lora *a, const ft_adapter_meta *meta, char *msg, size_t msg_size);

/* Reads dir's adapter for a base of configuration cfg into *a (created here; destroyed by the
 * caller). The commit marker is checked first; the safetensors header is parsed strictly: exactly the tensors adapter.json implies,
 * F32, the right shapes, contiguous and covering the buffer. 0 or -1 with msg. */
int ft_adapter_load(const char *dir, const ft_config *cfg, ft_lora *a, ft_adapter_meta *meta, char *msg,
                    size_t msg_size);

/* Parses a safetensors image into the already created adapter a (its tensors' names and shapes
 * are what is expected). 0 or -1 with msg. Exposed for the fuzz target. */
int ft_adapter_parse_safetensors(const uint8_t *bytes, size_t size, ft_lora *a, char *msg, size_t msg_size);

#endif
