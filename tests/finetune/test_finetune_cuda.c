/* tests/finetune/test_finetune_cuda.c: the CUDA forward and backward passes against the CPU path
 * (model.c, the reference), on the example's model shape with an adapter on every linear layer
 * and a non-zero B. Skipped (77) without a GPU; failed when one is there and does not work.
 *
 * Tolerances (float32, different summation order, the GPU's expf and fused multiply-adds):
 *   summed loss:           |gpu - cpu| <= 1e-4 * |cpu|
 *   probabilities:         max |gpu - cpu| <= 1e-4
 *   adapter gradients:     ||gpu - cpu|| <= 1e-3 * ||cpu|| for every tensor
 * and the GPU path must be reproducible: a second run gives the same bytes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ftl_test.h"
#include "gpu/gpu_test.h"
#include "model.h"
#include "model_cuda.h"

int main(void) {
  ftl_test_require_gpu(); /* skip without a GPU, fail with a broken one (tests/gpu/gpu_test.h) */
  ft_config cfg = {.block = 18, .layers = 2, .heads = 4, .embd = 64};
  enum { B = 8, T = 18 };
  ft_params p;
  ft_lora a, dcpu, dgpu;
  unsigned all = (1u << FT_LIN_COUNT) - 1;
  CHECK(ft_params_create(&p, &cfg) == 0);
  CHECK(ft_lora_create(&a, &cfg, 8, 16.0f, all) == 0 && ft_lora_create(&dcpu, &cfg, 8, 16.0f, all) == 0 &&
        ft_lora_create(&dgpu, &cfg, 8, 16.0f, all) == 0);
  ft_params_init(&p, 1);
  ft_lora_init(&a, 2);
  ft_rng r;
  ft_rng_seed(&r, 3);
  for (size_t i = 0; i < a.count; i++)
    a.mem[i] += 0.02f * ft_rng_normal(&r);
  int tok[B * T], tgt[B * T];
  for (int i = 0; i < B * T; i++) {
    tok[i] = 'a' + (int)ft_rng_below(&r, 26);
    tgt[i] = i % T >= 9 ? 'a' + (int)ft_rng_below(&r, 26) : -1;
  }
  ft_acts *acts = ft_acts_create(&cfg, 8, B);
  CHECK(acts != NULL);
  double lcpu = ft_forward(&p, &a, tok, tgt, B, T, acts, NULL);
  ft_backward(&p, &a, NULL, &dcpu, acts, 0.01f);

  char msg[1024] = "";
  ft_cuda *g = NULL;
  double lgpu = 0, lgpu2 = 0;
  CHECK_OK(ft_cuda_create(&p, 8, 16.0f, all, B, &g, msg, sizeof msg), msg);
  CHECK_OK(ft_cuda_set_lora(g, &a, msg, sizeof msg), msg);
  CHECK_OK(ft_cuda_forward(g, 1, tok, tgt, B, T, &lgpu, msg, sizeof msg), msg);
  float *probs = calloc((size_t)B * T * FT_VOCAB, sizeof(float));
  CHECK(probs != NULL);
  CHECK_OK(ft_cuda_probs(g, probs, msg, sizeof msg), msg);
  CHECK_OK(ft_cuda_backward(g, 0.01f, msg, sizeof msg), msg);
  CHECK_OK(ft_cuda_grad_to_host(g, dgpu.mem, msg, sizeof msg), msg);

  printf("loss: cpu %.9g, gpu %.9g\n", lcpu, lgpu);
  if (fabs(lgpu - lcpu) > 1e-4 * fabs(lcpu)) FTL_TEST_FAIL_("loss differs: cpu %.9g gpu %.9g", lcpu, lgpu);
  const float *pc = ft_acts_logits(acts);
  double maxd = 0;
  for (int n = 0; n < B * T; n++)
    if (tgt[n] >= 0)
      for (int v = 0; v < FT_VOCAB; v++)
        maxd = fmax(maxd, fabs((double)pc[(size_t)n * FT_VOCAB + v] - probs[(size_t)n * FT_VOCAB + v]));
  printf("probabilities: max difference %.3g\n", maxd);
  if (maxd > 1e-4) FTL_TEST_FAIL_("probabilities differ by %.3g", maxd);
  for (int i = 0; i < a.n_tensors; i++) {
    double d2 = 0, c2 = 0;
    for (size_t k = 0; k < dcpu.tensors[i].count; k++) {
      double c = dcpu.tensors[i].data[k], x = dgpu.tensors[i].data[k];
      d2 += (c - x) * (c - x);
      c2 += c * c;
    }
    double rel = sqrt(d2) / fmax(sqrt(c2), 1e-20);
    printf("%-24s relative difference %.3g\n", a.tensors[i].name, rel);
    if (rel > 1e-3) FTL_TEST_FAIL_("%s: gradients differ (relative %.3g)", a.tensors[i].name, rel);
  }
  /* Reproducible on the GPU: the same inputs give the same bytes. */
  ft_lora again;
  CHECK(ft_lora_create(&again, &cfg, 8, 16.0f, all) == 0);
  CHECK_OK(ft_cuda_forward(g, 1, tok, tgt, B, T, &lgpu2, msg, sizeof msg), msg);
  CHECK_OK(ft_cuda_backward(g, 0.01f, msg, sizeof msg), msg);
  CHECK_OK(ft_cuda_grad_to_host(g, again.mem, msg, sizeof msg), msg);
  CHECK(lgpu2 == lgpu);
  CHECK(memcmp(again.mem, dgpu.mem, a.count * sizeof(float)) == 0);
  /* The base alone (use_lora 0) matches the CPU's base alone too. */
  double lb = ft_forward(&p, NULL, tok, tgt, B, T, acts, NULL), lbg = 0;
  CHECK_OK(ft_cuda_forward(g, 0, tok, tgt, B, T, &lbg, msg, sizeof msg), msg);
  if (fabs(lbg - lb) > 1e-4 * fabs(lb)) FTL_TEST_FAIL_("base loss differs: cpu %.9g gpu %.9g", lb, lbg);
  ft_lora_destroy(&again);
  ft_cuda_destroy(g);
  free(probs);
  ft_acts_destroy(acts);
  ft_lora_destroy(&a);
  ft_lora_destroy(&dcpu);
  ft_lora_destroy(&dgpu);
  ft_params_destroy(&p);
  printf("ok\n");
  return 0;
}
