/* examples/finetune/model_flops.c: the model FLOPs of one training step of the example's Llama
 * decoder (model.h, ft_step_flops), which the fine-tune reports with ftl_step_done_flops for ftl's
 * model FLOPs utilisation (docs/gpu.md, "Useful work: MFU"). Its own file: model.c is the numerics,
 * this is arithmetic about them; tests/finetune/finetune_flops.sh checks it against a count of its
 * own. */
#include "model.h"

/* Multiply-adds of one step, N = b t tokens, C = embd, I = intermediate, r = the LoRA rank, H heads
 * of h = C / H, V = 256, S scored positions, L layers (each term read off model.c's loops):
 *   base linears, per layer:  forward N (4 C² + 3 C I) (q, k, v, o: C -> C; gate, up: C -> I;
 *                             down: I -> C); backward the same again for the input gradient, and
 *                             once more for the weight gradient when the base trains
 *   LoRA, per adapted linear of `in` -> `out`:  forward N r (in + out) (x A^T, then its B);
 *                             backward 2 N r (in + out) (the input gradient through B and A, dA, dB)
 *   attention, per layer:     forward b H h t (t + 1) = b C t (t + 1) (the scores and the weighted
 *                             sum over the causal triangle, t (t + 1) / 2 pairs each); backward twice
 *                             that (dv and the scores' gradient; dq and dk)
 *   the LM head (tied):       forward S V C (logits only where a target is scored); backward S V C
 *                             for the input gradient, twice that when the base (the embedding) trains
 * FLOPs = 2 × (their sum). With the base frozen a token costs 4 FLOPs per base weight and 6 per
 * adapter weight, as the usual 6 N rule says of trained weights and 4 N of frozen ones. */
double ft_step_flops(const ft_config *cfg_in, int lora_rank, unsigned targets, int64_t b, int64_t t, int64_t scored,
                     int base_trainable) {
  ft_config c = *cfg_in;
  ft_config_resolve(&c);
  double N = (double)b * (double)t, C = c.embd, I = c.intermediate, r = lora_rank > 0 ? lora_rank : 0;
  double base = N * (4 * C * C + 3 * C * I) * (base_trainable ? 3 : 2);
  double lora = 0;
  for (int k = 0; k < FT_LIN_COUNT; k++)
    if (targets & (1u << k)) lora += 3 * N * r * (ft_lin_in(&c, (ft_lin)k) + ft_lin_out(&c, (ft_lin)k));
  double attention = 3 * (double)b * C * (double)t * (double)(t + 1);
  double head = (double)scored * FT_VOCAB * C * (base_trainable ? 3 : 2);
  return 2 * (c.layers * (base + lora + attention) + head);
}
