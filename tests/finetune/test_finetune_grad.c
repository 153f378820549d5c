/* tests/finetune/test_finetune_grad.c: the backward pass against finite differences.
 *
 * A tiny Llama decoder (2 layers, 16 channels, 2 heads of 8, intermediate 48, 7 positions) with an
 * adapter on every linear layer (q/k/v/o_proj, gate/up/down_proj), random base weights (the
 * RMSNorm weights too) and a random non-zero B (so gradients flow through both A and B). The ops
 * covered: RMSNorm (input, post-attention, final), the rotary embedding on q and k, causal
 * attention, SwiGLU, the tied embedding / LM head.
 * For a sample of adapter parameters (all of them for A and B of each adapter), and of base
 * parameters in the pre-training mode, the analytic gradient of the summed masked cross-entropy
 * is compared with the central difference (f(x+h) - f(x-h)) / 2h computed in float, h = 3e-3.
 * Tolerance: |analytic - numeric| <= 2e-2 * max(1, |numeric|) for every checked parameter, and
 * the relative error of the whole checked vector below 1e-2. */
#include <math.h>

#include "ftl_test.h"
#include "model.h"

#ifndef H_STEP
#define H_STEP 3e-3f
#endif
static const int B = 2, T = 7;
static int tokens[14], targets[14];

static double loss_of(const ft_params *p, const ft_lora *a, ft_acts *acts) {
  return ft_forward(p, a, tokens, targets, B, T, acts, NULL);
}

static void check(const char *what, float *param, const float *grad, size_t n, size_t stride, const ft_params *p,
                  const ft_lora *a, ft_acts *acts) {
  double num2 = 0, diff2 = 0;
  int checked = 0;
  for (size_t i = 0; i < n; i += stride) {
    float keep = param[i], h = H_STEP;
    param[i] = keep + h;
    double lp = loss_of(p, a, acts);
    param[i] = keep - h;
    double lm = loss_of(p, a, acts);
    param[i] = keep;
    double num = (lp - lm) / (2.0 * h), ana = grad[i];
    if (fabs(ana - num) > 2e-2 * fmax(1.0, fabs(num)))
      FTL_TEST_FAIL_("%s[%zu]: analytic %.6f, numeric %.6f", what, i, ana, num);
    num2 += num * num;
    diff2 += (ana - num) * (ana - num);
    checked++;
  }
  double rel = sqrt(diff2) / fmax(1e-12, sqrt(num2));
  printf("%-48s %4d checked, relative error %.2e\n", what, checked, rel);
  /* A gradient that is zero or tiny by structure has only noise to compare with; the element-wise
   * check above covers it. */
  if (sqrt(num2) > 1e-3 && rel > 1e-2) FTL_TEST_FAIL_("%s: relative error %.3e > 1e-2", what, rel);
}

int main(void) {
  ft_config cfg = {.block = 8, .layers = 2, .heads = 2, .embd = 16};
  ft_params p, dp;
  ft_lora a, da;
  CHECK(ft_params_create(&p, &cfg) == 0 && ft_params_create(&dp, &cfg) == 0);
  CHECK(ft_lora_create(&a, &cfg, 3, 6.0f, (1u << FT_LIN_COUNT) - 1) == 0);
  CHECK(ft_lora_create(&da, &cfg, 3, 6.0f, (1u << FT_LIN_COUNT) - 1) == 0);
  ft_params_init(&p, 11);
  ft_rng r;
  ft_rng_seed(&r, 5);
  /* Larger weights than GPT-2's init so that every path carries a visible gradient. */
  for (size_t i = 0; i < p.count; i++)
    p.mem[i] += 0.2f * ft_rng_normal(&r);
  ft_lora_init(&a, 3);
  for (size_t i = 0; i < a.count; i++)
    a.mem[i] += 0.3f * ft_rng_normal(&r);
  for (int i = 0; i < B * T; i++) {
    tokens[i] = 'a' + (int)ft_rng_below(&r, 26);
    targets[i] = (i % T) >= 2 ? 'a' + (int)ft_rng_below(&r, 26) : -1;
  }
  ft_acts *acts = ft_acts_create(&cfg, 3, B);
  CHECK(acts != NULL);

  /* Fine-tune mode: base frozen, adapter gradients only. */
  loss_of(&p, &a, acts);
  ft_backward(&p, &a, NULL, &da, acts, 1.0f);
  for (int i = 0; i < a.n_tensors; i++)
    check(a.tensors[i].name, a.tensors[i].data, da.tensors[i].data, a.tensors[i].count, 1, &p, &a, acts);

  /* Pre-training mode: every base tensor (a sample of each), with the adapter present. */
  memset(da.mem, 0, da.count * sizeof(float));
  loss_of(&p, &a, acts);
  ft_backward(&p, &a, &dp, &da, acts, 1.0f);
  for (int i = 0; i < p.n_tensors; i++) {
    size_t n = p.tensors[i].count, stride = n > 40 ? n / 40 : 1;
    check(p.tensors[i].name, p.tensors[i].data, dp.tensors[i].data, n, stride, &p, &a, acts);
  }
  ft_acts_destroy(acts);
  ft_params_destroy(&p);
  ft_params_destroy(&dp);
  ft_lora_destroy(&a);
  ft_lora_destroy(&da);
  printf("ok\n");
  return 0;
}
