/* tests/cadence/test_cadence_formulas.c: Young's and Daly's intervals against Daly's worked cases,
 * the Young limit, and the two waste models (first order, and the exponential model whose minimum
 * Daly's formula approximates). */
#include <math.h>

#include "ftl/cadence.h"
#include "ftl_test.h"

#define CHECK_NEAR(a, b, tol)                                                                                          \
  do {                                                                                                                 \
    double a_ = (a), b_ = (b);                                                                                         \
    if (!(fabs(a_ - b_) <= (tol))) FTL_TEST_FAIL_("%s ≈ %s (%.6g vs %.6g, tol %.3g)", #a, #b, a_, b_, (double)(tol));  \
  } while (0)

/* The minimiser of the exponential waste model, by golden-section search on log τ. */
static double argmin_waste(double stall, double mtbf) {
  double lo = log(stall * 1e-3 + 1e-9), hi = log(mtbf * 10);
  const double g = 0.6180339887498949;
  for (int i = 0; i < 200; i++) {
    double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
    if (ftl_cadence_waste(exp(a), stall, 0, 0, mtbf) < ftl_cadence_waste(exp(b), stall, 0, 0, mtbf))
      hi = b;
    else
      lo = a;
  }
  return exp(0.5 * (lo + hi));
}

int main(void) {
  /* Daly (2006), δ = 5 min: M = 24 h → 116.7 min, 6 h → 56.7 min, 15 min → 9.1 min. */
  CHECK_NEAR(ftl_cadence_daly_s(300, 24 * 3600) / 60, 116.7, 0.05);
  CHECK_NEAR(ftl_cadence_daly_s(300, 6 * 3600) / 60, 56.7, 0.05);
  CHECK_NEAR(ftl_cadence_daly_s(300, 15 * 60) / 60, 9.1, 0.05);
  /* δ ≥ 2M: τ = M. */
  CHECK_NEAR(ftl_cadence_daly_s(300, 150), 150, 1e-9);
  CHECK_NEAR(ftl_cadence_daly_s(300, 100), 100, 1e-9);
  /* Young: √(2δM), and Daly → Young as δ/M → 0, with the gap shrinking like √(δ/M). */
  CHECK_NEAR(ftl_cadence_young_s(300, 24 * 3600), 7200, 1e-6);
  double prev_gap = 1;
  for (double m = 1e3; m <= 1e11; m *= 100) {
    double gap = fabs(ftl_cadence_daly_s(1, m) / ftl_cadence_young_s(1, m) - 1);
    CHECK(gap < prev_gap);
    CHECK(gap < 2 * sqrt(1 / m));
    prev_gap = gap;
  }
  CHECK(prev_gap < 1e-5);
  /* Invalid input. */
  CHECK(ftl_cadence_daly_s(-1, 100) == 0);
  CHECK(ftl_cadence_daly_s(1, 0) == 0);
  CHECK(ftl_cadence_daly_s(NAN, 10) == 0);
  CHECK(ftl_cadence_young_s(1, INFINITY) == 0);

  /* First-order waste: δ/τ + (τ/2 + W + R)/M. */
  CHECK_NEAR(ftl_cadence_waste_first_order(600, 6, 30, 60, 36000), 6.0 / 600 + (300 + 30 + 60) / 36000.0, 1e-12);
  /* Exponential model: in [0, 1], near the first order when τ ≪ M, minimal near Daly's τ. */
  double fo = ftl_cadence_waste_first_order(600, 6, 0, 60, 360000);
  double ex = ftl_cadence_waste(600, 6, 0, 60, 360000);
  CHECK(fabs(ex - fo) < 0.05 * fo);
  CHECK(ftl_cadence_waste(1e9, 6, 0, 60, 3600) > 0.999);
  CHECK(ftl_cadence_waste(1e9, 6, 0, 60, 3600) <= 1.0);
  CHECK(ftl_cadence_waste(600, 0, 0, 0, 1e12) >= 0);
  CHECK(ftl_cadence_waste(0, 6, 0, 60, 3600) == 1.0);
  /* W costs like R. */
  CHECK_NEAR(ftl_cadence_waste(600, 6, 30, 60, 36000), ftl_cadence_waste(600, 6, 0, 90, 36000), 1e-12);
  const double cases[][2] = {{300, 24 * 3600}, {300, 6 * 3600}, {300, 15 * 60}, {10, 600}, {1, 3.6e6}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double d = cases[i][0], m = cases[i][1];
    double tau = ftl_cadence_daly_s(d, m), best = argmin_waste(d, m);
    /* Daly's formula is a perturbation solution: within 3% of the true minimiser for δ < M/3,
     * and its waste within 0.1% of the minimum. */
    CHECK(fabs(tau / best - 1) < 0.03);
    CHECK(ftl_cadence_waste(tau, d, 0, 0, m) <= ftl_cadence_waste(best, d, 0, 0, m) * 1.001 + 1e-12);
    CHECK(ftl_cadence_waste(tau, d, 0, 0, m) < ftl_cadence_waste(tau / 2, d, 0, 0, m));
    CHECK(ftl_cadence_waste(tau, d, 0, 0, m) < ftl_cadence_waste(tau * 2, d, 0, 0, m));
  }
  printf("ok\n");
  return 0;
}
