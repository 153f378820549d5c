/* tests/cadence/test_cadence_moody.c: cadence/moody.c, our implementation of the SC'10 multi-level
 * model of Moody et al., against the results its authors published with the model's code
 * (LLNL/SCR-model, LLNL-CODE-817266, regressionFiles/): every figure below is copied from those
 * files as they print it (Python's 12 significant digits), and ours must print the same digits.
 * Then the model's limits: no failures of a class changes nothing when its level is dropped, and
 * ftl's own model (cadence/multilevel.c) agrees with the paper's where their assumptions meet. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cadence/moody.h"
#include "ftl/cadence.h"
#include "ftl/core.h"
#include "ftl_test.h"

/* The printed form of the reference files: Python 2's str() of a float, "%.12g" plus ".0" on a
 * whole number. */
static void py_str(char *out, size_t size, double x) {
  snprintf(out, size, "%.12g", x);
  if (!strpbrk(out, ".e") && strlen(out) + 2 < size) strcat(out, ".0");
}

#define CHECK_PRINTS(value, text)                                                                   \
  do {                                                                                              \
    char got_[64];                                                                                  \
    py_str(got_, sizeof got_, (value));                                                             \
    if (strcmp(got_, (text)) != 0) FTL_TEST_FAIL_("%s prints %s, the published model %s", #value, got_, (text)); \
  } while (0)

/* The "made_up" 3-level machine of the published code: C = 9, 50, 438 s (read = write), failure
 * rates 7.78e-6, 5.19e-7, 3.0e-8 per second; its -o factor multiplies the top level's cost, -f every
 * rate. */
static cd_moody_params made_up(double o, double f, int64_t v1, int64_t v2, double t) {
  cd_moody_params p = {.levels = 3, .compute_s = t, .count = {v1, v2, 1}};
  const double c[3] = {9, 50, 438 * o}, rate[3] = {7.78e-6, 5.19e-7, 3.0e-8};
  for (int k = 0; k < 3; k++) {
    p.write_s[k] = p.read_s[k] = c[k];
    p.rate[k] = rate[k] * f;
  }
  return p;
}

typedef struct row {
  double t;
  const char *time, *efficiency;
} row;

static void check_rows(double o, double f, int64_t v1, int64_t v2, const row *rows, int n) {
  for (int i = 0; i < n; i++) {
    cd_moody_params p = made_up(o, f, v1, v2, rows[i].t);
    cd_moody_result r;
    CHECK_OK(cd_moody_evaluate(&p, &r), "evaluate");
    CHECK_INT_EQ((long long)r.intervals, (v1 + 1) * (v2 + 1));
    CHECK_PRINTS(r.time_s, rows[i].time);
    CHECK_PRINTS(r.efficiency, rows[i].efficiency);
  }
}

/* test_intervalTime_0_40000_500_3_1.0_200_0_2.0_2.0.data: V = 200, 0, 1 (no level 2), o = 2, f = 2. */
static void test_published_no_l2(void) {
  static const row rows[] = {
      {0, "2689.18911599", "0.0"},
      {500, "109859.789426", "0.914802408828"},
      {1000, "230605.02413", "0.871620211913"},
      {5000, "1972684.51109", "0.509458047827"},
      {20000, "161769827.387", "0.0248501223308"},
      {40000, "181333178783.0", "4.43382730835e-05"},
  };
  check_rows(2, 2, 200, 0, rows, (int)(sizeof rows / sizeof rows[0]));
}

/* test_intervalTime_0_40000_500_3_1.0_400_400_1.0_1.0.data: V = 400, 400, 1, o = 1, f = 1: all three
 * levels nested; from t = 2500 s on, a period is so long that the model gives up (0). */
static void test_published_three_levels(void) {
  static const row rows[] = {
      {0, "1498358.87143", "0.0"},
      {500, "414149343.282", "0.194134075797"},
      {1000, "7657224038.22", "0.0209999079559"},
      {1500, "182473011056.0", "0.00132184753572"},
      {2000, "6.19412623841e+12", "5.19204787926e-05"},
      {2500, "0.0", "0.0"},
      {40000, "0.0", "0.0"},
  };
  check_rows(1, 1, 400, 400, rows, (int)(sizeof rows / sizeof rows[0]));
}

static void test_bad_input(void) {
  cd_moody_result r;
  cd_moody_params p = made_up(1, 1, 10, 2, 100);
  CHECK_OK(cd_moody_evaluate(&p, &r), "valid");
  CHECK(r.efficiency > 0 && r.efficiency < 1);
  cd_moody_params bad = p;
  bad.levels = 4;
  CHECK_INT_EQ(cd_moody_evaluate(&bad, &r), FTL_ERR_INVAL);
  bad = p;
  bad.count[2] = 2; /* one period ends in one top-level checkpoint */
  CHECK_INT_EQ(cd_moody_evaluate(&bad, &r), FTL_ERR_INVAL);
  bad = p;
  bad.rate[0] = bad.rate[1] = bad.rate[2] = 0;
  CHECK_INT_EQ(cd_moody_evaluate(&bad, &r), FTL_ERR_INVAL);
  bad = p;
  bad.write_s[1] = NAN;
  CHECK_INT_EQ(cd_moody_evaluate(&bad, &r), FTL_ERR_INVAL);
  bad = p;
  bad.compute_s = 0;
  bad.write_s[0] = 0; /* an interval of no time */
  CHECK_INT_EQ(cd_moody_evaluate(&bad, &r), FTL_ERR_INVAL);
  bad = p;
  bad.count[0] = -1;
  CHECK_INT_EQ(cd_moody_evaluate(&bad, &r), FTL_ERR_INVAL);
  CHECK_INT_EQ(cd_moody_evaluate(NULL, &r), FTL_ERR_INVAL);
}

/* ftl's model (cadence/multilevel.c) on the paper's terms: the stall is the checkpoint's whole cost,
 * nothing is in flight after it (W = 0), a restart costs the read. The two differ only in what a
 * failure during a recovery does (ftl's restarts the recovery; the paper's may escalate it), so on
 * runs whose recoveries are short against the time between failures they must agree closely. */
static void test_agrees_with_ftl_model(void) {
  const double c[3] = {2, 20, 120}, share[3] = {0.6, 0.3, 0.1}, mtbf = 4 * 3600.0;
  /* Every level written (V_1, V_2 ≥ 1): with V_2 = 0 the paper restores a level-2 failure from level
   * 3 at level 3's read cost, where ftl's model, whose level-3 checkpoint is also a level-2 one (the
   * same save puts the partner's copy), charges level 2's. */
  const int64_t v[3][2] = {{3, 2}, {9, 1}, {1, 5}};
  for (int i = 0; i < 3; i++) {
    cd_moody_params p = {.levels = 3, .compute_s = 240, .count = {v[i][0], v[i][1], 1}};
    ftl_cadence_level_cost lv[3];
    for (int k = 0; k < 3; k++) {
      p.write_s[k] = p.read_s[k] = c[k];
      p.rate[k] = share[k] / mtbf;
      lv[k] = (ftl_cadence_level_cost){.stall_s = c[k], .durable_s = 0, .restart_s = c[k], .rate = p.rate[k]};
    }
    cd_moody_result r;
    CHECK_OK(cd_moody_evaluate(&p, &r), "evaluate");
    /* V_k checkpoints of level k between two of level k+1: every (V_k+1)-th is of the level above;
     * V_2 = 0 is no level 2 at all (every level-2 position is level 3). */
    const int64_t every[3] = {1, v[i][0] + 1, v[i][1] + 1};
    double ftl_waste = ftl_cadence_pattern_waste(lv, 3, 240, every);
    double paper_waste = 1.0 - r.efficiency;
    if (!(fabs(ftl_waste - paper_waste) <= 0.02 * paper_waste))
      FTL_TEST_FAIL_("pattern %d: ftl's model %.5f, the paper's %.5f", i, ftl_waste, paper_waste);
  }
}

int main(void) {
  ftl_log_set_level(FTL_LOG_ERROR);
  test_published_no_l2();
  test_published_three_levels();
  test_bad_input();
  test_agrees_with_ftl_model();
  printf("ok\n");
  return 0;
}
