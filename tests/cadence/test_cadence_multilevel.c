/* tests/cadence/test_cadence_multilevel.c: the multi-level model (cadence/multilevel.c) and the
 * controller's per-level intervals: failure causes to levels, the model's limit cases (one level is
 * Daly's model exactly; no failures above L1 is L1 alone at Daly's interval; equal costs are never
 * worse than single-level), a known first-order optimum, the optimizer against exhaustive search,
 * and the controller's patterns (multiples, the level due at a step, failures counted by class from
 * a ledger, the single-level decision left as it was). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cadence/sim.h"
#include "ftl/cadence.h"
#include "ftl/core.h"
#include "ftl_test.h"

#define CHECK_NEAR(a, b, tol)                                                                                          \
  do {                                                                                                                 \
    double a_ = (a), b_ = (b);                                                                                         \
    if (!(fabs(a_ - b_) <= (tol))) FTL_TEST_FAIL_("%s ≈ %s (%.6g vs %.6g, tol %.3g)", #a, #b, a_, b_, (double)(tol));  \
  } while (0)

static void test_cause_level(void) {
  const unsigned all = FTL_CADENCE_LEVELS_ALL;
  const unsigned no_l2 = FTL_CADENCE_LEVEL_BIT(FTL_CADENCE_LEVEL_L1) | FTL_CADENCE_LEVEL_BIT(FTL_CADENCE_LEVEL_L3);
  const unsigned l3 = FTL_CADENCE_LEVEL_BIT(FTL_CADENCE_LEVEL_L3);
  CHECK_INT_EQ(ftl_cadence_cause_level("exit_code", all), FTL_CADENCE_LEVEL_L1);
  CHECK_INT_EQ(ftl_cadence_cause_level("signal", all), FTL_CADENCE_LEVEL_L1);
  CHECK_INT_EQ(ftl_cadence_cause_level("hang", all), FTL_CADENCE_LEVEL_L1);
  CHECK_INT_EQ(ftl_cadence_cause_level("agent_lost", all), FTL_CADENCE_LEVEL_L1);
  CHECK_INT_EQ(ftl_cadence_cause_level("node_lost", all), FTL_CADENCE_LEVEL_L2);
  CHECK_INT_EQ(ftl_cadence_cause_level("node_lost", no_l2), FTL_CADENCE_LEVEL_L3);
  CHECK_INT_EQ(ftl_cadence_cause_level("launcher", all), FTL_CADENCE_LEVEL_L3);
  CHECK_INT_EQ(ftl_cadence_cause_level("exit_code", l3), FTL_CADENCE_LEVEL_L3);
  CHECK_INT_EQ(ftl_cadence_cause_level("hang", no_l2), FTL_CADENCE_LEVEL_L1);
  /* Not failures, unknown, or no level to survive them. */
  CHECK_INT_EQ(ftl_cadence_cause_level("rendezvous", all), FTL_CADENCE_LEVEL_NONE);
  CHECK_INT_EQ(ftl_cadence_cause_level("cannot_start", all), FTL_CADENCE_LEVEL_NONE);
  CHECK_INT_EQ(ftl_cadence_cause_level("preempted", all), FTL_CADENCE_LEVEL_NONE);
  CHECK_INT_EQ(ftl_cadence_cause_level("none", all), FTL_CADENCE_LEVEL_NONE);
  CHECK_INT_EQ(ftl_cadence_cause_level("cosmic_ray", all), FTL_CADENCE_LEVEL_NONE);
  CHECK_INT_EQ(ftl_cadence_cause_level(NULL, all), FTL_CADENCE_LEVEL_NONE);
  CHECK_INT_EQ(ftl_cadence_cause_level("node_lost", FTL_CADENCE_LEVEL_BIT(FTL_CADENCE_LEVEL_L1)), FTL_CADENCE_LEVEL_NONE);
}

static void set3(ftl_cadence_level_cost *lv, const double stall[3], const double durable[3], const double restart[3],
                 const double rate[3]) {
  for (int k = 0; k < 3; k++) {
    lv[k].stall_s = stall[k];
    lv[k].durable_s = durable[k];
    lv[k].restart_s = restart[k];
    lv[k].rate = rate[k];
  }
}

static void test_model_limits(void) {
  /* One level is Daly's exponential model, ftl_cadence_waste, exactly. */
  const double taus[] = {30, 600, 3600, 20000};
  for (size_t i = 0; i < sizeof taus / sizeof taus[0]; i++) {
    ftl_cadence_level_cost one = {.stall_s = 20, .durable_s = 45, .restart_s = 120, .rate = 1.0 / 7200};
    const int64_t every[3] = {1, 0, 0};
    double want = ftl_cadence_waste(taus[i], 20, 45, 120, 7200);
    CHECK_NEAR(ftl_cadence_pattern_waste(&one, 1, taus[i], every), want, 1e-12 + 1e-9 * want);
  }
  /* Invalid input: waste 1, INVAL. */
  ftl_cadence_level_cost lv[3];
  set3(lv, (double[]){2, 10, 60}, (double[]){0, 0, 0}, (double[]){30, 60, 300}, (double[]){1e-4, 1e-5, 1e-6});
  CHECK_NEAR(ftl_cadence_pattern_waste(lv, 3, 0, (int64_t[]){1, 2, 2}), 1, 0);
  CHECK_NEAR(ftl_cadence_pattern_waste(lv, 3, 100, (int64_t[]){2, 2, 2}), 1, 0);
  CHECK_NEAR(ftl_cadence_pattern_waste(lv, 3, 100, (int64_t[]){1, 0, 2}), 1, 0);
  /* A class that fails but whose level is never written: never finishes. */
  CHECK_NEAR(ftl_cadence_pattern_waste(lv, 3, 100, (int64_t[]){1, 4, 0}), 1, 0);
  ftl_cadence_pattern pat;
  CHECK_INT_EQ(ftl_cadence_pattern_optimize(lv, 0, &pat), FTL_ERR_INVAL);
  CHECK_INT_EQ(ftl_cadence_pattern_optimize(lv, 4, &pat), FTL_ERR_INVAL);
  ftl_cadence_level_cost none[3];
  set3(none, (double[]){2, 10, 60}, (double[]){0, 0, 0}, (double[]){30, 60, 300}, (double[]){0, 0, 0});
  CHECK_INT_EQ(ftl_cadence_pattern_optimize(none, 3, &pat), FTL_ERR_INVAL);
  CHECK_INT_EQ(ftl_cadence_pattern_brute_force(lv, 3, 0, &pat), FTL_ERR_INVAL);

  /* λ2 = λ3 = 0: L1 alone, at Daly's interval for λ1. */
  ftl_cadence_level_cost only1[3];
  set3(only1, (double[]){3, 15, 90}, (double[]){1, 20, 200}, (double[]){20, 60, 600}, (double[]){1.0 / 3600, 0, 0});
  CHECK_OK(ftl_cadence_pattern_optimize(only1, 3, &pat), "optimize");
  CHECK_INT_EQ(pat.every[0], 1);
  CHECK_INT_EQ(pat.every[1], 0);
  CHECK_INT_EQ(pat.every[2], 0);
  CHECK_NEAR(pat.tau_s, ftl_cadence_daly_s(3, 3600), 1e-9);
  CHECK_NEAR(pat.waste, ftl_cadence_waste(pat.tau_s, 3, 1, 20, 3600), 1e-12);
  /* ... and the exhaustive search agrees that writing the upper levels only costs. */
  ftl_cadence_pattern bf;
  CHECK_OK(ftl_cadence_pattern_brute_force(only1, 3, 8, &bf), "brute force");
  CHECK_INT_EQ(bf.every[1], 0);
  CHECK(pat.waste <= bf.waste * 1.001);

  /* Equal costs at every level: the multi-level plan is never worse than single-level. */
  const double mixes[][3] = {{1e-4, 1e-5, 1e-6}, {1e-5, 1e-4, 1e-5}, {1e-6, 1e-6, 1e-4}, {3e-4, 3e-4, 3e-4}};
  for (size_t m = 0; m < sizeof mixes / sizeof mixes[0]; m++) {
    ftl_cadence_level_cost eq[3];
    set3(eq, (double[]){12, 12, 12}, (double[]){30, 30, 30}, (double[]){90, 90, 90}, mixes[m]);
    ftl_cadence_pattern ml, sl;
    CHECK_OK(ftl_cadence_pattern_optimize(eq, 3, &ml), "optimize");
    CHECK_OK(ftl_cadence_pattern_single_level(eq, 3, &sl), "single");
    CHECK_INT_EQ(sl.levels, 1);
    CHECK(ml.waste <= sl.waste * (1 + 1e-9));
  }
}

static void test_known_optimum(void) {
  /* Two levels, rare failures (first order holds): level 1 at √(2δ1/λ1) = √(2·1/1e-4) ≈ 141 s, level 2
   * at √(2(δ2−δ1)/λ2) = √(2·100/1e-6) ≈ 14,142 s, i.e. every 100 level-1 checkpoints. */
  ftl_cadence_level_cost lv[2] = {{.stall_s = 1, .durable_s = 0, .restart_s = 10, .rate = 1e-4},
                                  {.stall_s = 101, .durable_s = 0, .restart_s = 100, .rate = 1e-6}};
  ftl_cadence_pattern pat;
  CHECK_OK(ftl_cadence_pattern_optimize(lv, 2, &pat), "optimize");
  CHECK_NEAR(pat.tau_s, sqrt(2.0 / 1e-4), 0.1 * sqrt(2.0 / 1e-4));
  CHECK(pat.every[1] >= 80 && pat.every[1] <= 125);
  /* The first-order waste there: Σ √(2Δλ) + Σ λR ≈ 0.01414 + 0.01414 + 0.001 + 0.0001. */
  CHECK_NEAR(pat.waste, 0.0294, 0.002);
  /* Raising λ2 never lengthens level 2's spacing. */
  double prev = INFINITY;
  for (double r2 = 1e-7; r2 <= 1e-4; r2 *= 3) {
    lv[1].rate = r2;
    CHECK_OK(ftl_cadence_pattern_optimize(lv, 2, &pat), "optimize");
    double spacing = pat.tau_s * (double)pat.every[1];
    CHECK(spacing <= prev * 1.02);
    prev = spacing;
  }
}

static void test_against_brute_force(void) {
  /* The costs of bench-cadence's levels under three failure mixes, and a hard one (costs close). */
  const double stall[3] = {2, 8, 40}, durable[3] = {2, 20, 120}, restart[3] = {30, 60, 240};
  const double total = 1.0 / 7200;
  const double mixes[][3] = {{0.8, 0.15, 0.05}, {0.4, 0.4, 0.2}, {0.1, 0.8, 0.1}, {0.34, 0.33, 0.33}};
  for (size_t m = 0; m < sizeof mixes / sizeof mixes[0]; m++) {
    ftl_cadence_level_cost lv[3];
    double rate[3] = {mixes[m][0] * total, mixes[m][1] * total, mixes[m][2] * total};
    set3(lv, stall, durable, restart, rate);
    ftl_cadence_pattern opt, bf, sl;
    CHECK_OK(ftl_cadence_pattern_optimize(lv, 3, &opt), "optimize");
    CHECK_OK(ftl_cadence_pattern_brute_force(lv, 3, 16, &bf), "brute force");
    CHECK_OK(ftl_cadence_pattern_single_level(lv, 3, &sl), "single");
    if (!(opt.waste <= 1.05 * bf.waste))
      FTL_TEST_FAIL_("mix %zu: optimizer %.5f vs brute force %.5f", m, opt.waste, bf.waste);
    CHECK(opt.waste < sl.waste);
    /* The reported waste is the model's for the reported pattern. */
    CHECK_NEAR(opt.waste, ftl_cadence_pattern_waste(lv, 3, opt.tau_s, opt.every), 1e-12);
  }
}

static ftl_cadence *make_levels(unsigned levels) {
  ftl_cadence_config cfg;
  ftl_cadence_config_init(&cfg);
  cfg.world_size = 64;
  cfg.fleet_rate = 1e-4;
  cfg.step_s = 2;
  ftl_cadence *c = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(ftl_cadence_create(&cfg, &c, &d), d.msg);
  ftl_cadence_levels_config lc;
  ftl_cadence_levels_config_init(&lc);
  lc.levels = levels;
  lc.restart_s[0] = 30;
  lc.restart_s[1] = 60;
  lc.restart_s[2] = 240;
  CHECK_OK(ftl_cadence_set_levels(c, &lc), "set_levels");
  return c;
}

static void test_controller(const char *dir) {
  ftl_cadence *c = make_levels(FTL_CADENCE_LEVELS_ALL);
  /* The single-level decision before levels are fed... */
  ftl_cadence_decision before, after;
  CHECK_OK(ftl_cadence_decide(c, &before), "decide");
  CHECK_OK(ftl_cadence_observe_checkpoint_level(c, FTL_CADENCE_LEVEL_L1, 0.5, 1), "observe");
  CHECK_OK(ftl_cadence_observe_checkpoint_level(c, FTL_CADENCE_LEVEL_L2, 4, 10), "observe");
  CHECK_OK(ftl_cadence_observe_checkpoint_level(c, FTL_CADENCE_LEVEL_L3, 30, 90), "observe");
  CHECK_INT_EQ(ftl_cadence_observe_checkpoint_level(c, 0, 1, 1), FTL_ERR_INVAL);
  CHECK_INT_EQ(ftl_cadence_observe_checkpoint_level(c, 4, 1, 1), FTL_ERR_INVAL);
  /* ... is the same after: per-level observations do not move it. */
  CHECK_OK(ftl_cadence_decide(c, &after), "decide");
  CHECK_INT_EQ(after.interval_steps, before.interval_steps);
  CHECK_NEAR(after.stall_s, before.stall_s, 0);

  ftl_cadence_level_decision ld;
  CHECK_OK(ftl_cadence_decide_levels(c, &ld), "decide_levels");
  CHECK(ld.interval_steps[0] >= 1);
  CHECK(ld.interval_steps[1] >= ld.interval_steps[0] && ld.interval_steps[1] % ld.interval_steps[0] == 0);
  CHECK(ld.interval_steps[2] >= ld.interval_steps[1] && ld.interval_steps[2] % ld.interval_steps[1] == 0);
  CHECK((double)ld.interval_steps[2] * 2 >= 90); /* at least W of its level */
  CHECK_NEAR(ld.stall_s[2], 30, 0);
  /* With no failures seen the classes' rates sum to the prior's. */
  CHECK_NEAR(ld.rate[0] + ld.rate[1] + ld.rate[2], 1e-4, 1e-12);
  CHECK(ld.waste > 0 && ld.waste < ld.waste_single);

  /* The level due at a step: checkpoints on level 1's grid, every s2/s1-th of level 2, every
   * s3/s1-th of level 3 (counted from the last L3 above). */
  int level = -1;
  const int64_t s1 = ld.interval_steps[0], r2 = ld.interval_steps[1] / s1, r3 = ld.interval_steps[2] / s1;
  if (s1 > 1) {
    CHECK_OK(ftl_cadence_due_level(c, s1 + 1, &level), "due");
    CHECK_INT_EQ(level, FTL_CADENCE_LEVEL_NONE);
  }
  CHECK_OK(ftl_cadence_due_level(c, 0, &level), "due");
  CHECK_INT_EQ(level, FTL_CADENCE_LEVEL_NONE);
  int64_t seen[4] = {0}, first3 = 0;
  for (int64_t j = 1; j <= 3 * r3; j++) {
    CHECK_OK(ftl_cadence_due_level(c, j * s1, &level), "due");
    CHECK(level >= FTL_CADENCE_LEVEL_L1 && level <= FTL_CADENCE_LEVEL_L3);
    if (level == FTL_CADENCE_LEVEL_L3 && !first3) first3 = j;
    if (level == FTL_CADENCE_LEVEL_L3) CHECK(j % r3 == 0);
    else if (level == FTL_CADENCE_LEVEL_L2) CHECK(j % r2 == 0);
    seen[level]++;
    CHECK_OK(ftl_cadence_observe_checkpoint_level(c, level, level == 3 ? 30 : level == 2 ? 4 : 0.5, -1), "observe");
  }
  CHECK_INT_EQ(first3, r3);
  CHECK_INT_EQ(seen[3], 3);
  CHECK_INT_EQ(seen[2], 3 * (r3 / r2) - 3);
  CHECK_OK(ftl_cadence_decide_levels(c, &ld), "decide_levels"); /* the same medians: the same plan */
  CHECK_INT_EQ(ld.interval_steps[0], s1);

  /* Failures by class from a ledger: host losses make L2 more frequent, process failures L1. */
  char ledger[512];
  CHECK_OK(ftl_fmt(ledger, sizeof ledger, "%s/failures.jsonl", dir), "fmt");
  ftl_diag d = {{0}};
  for (int i = 0; i < 40; i++) {
    ftl_cadence_record rec = {0};
    rec.kind = FTL_CADENCE_REC_FAILURE;
    ftl_fmt(rec.cause, sizeof rec.cause, "%s", i < 30 ? "node_lost" : "hang");
    ftl_fmt(rec.job, sizeof rec.job, "ml");
    rec.attempt = i;
    rec.step = 100;
    rec.wall_us = 1000 + i;
    CHECK_OK(ftl_cadence_fleet_append(ledger, &rec, 1000, &d), d.msg);
  }
  ftl_cadence_record expo = {0};
  expo.kind = FTL_CADENCE_REC_EXPOSURE;
  expo.rank_hours = 1000;
  expo.wall_us = 5000;
  ftl_fmt(expo.job, sizeof expo.job, "ml");
  CHECK_OK(ftl_cadence_fleet_append(ledger, &expo, 1000, &d), d.msg);
  CHECK_OK(ftl_cadence_load_ledger(c, ledger, NULL, &d), d.msg);
  ftl_cadence_level_decision ld2;
  CHECK_OK(ftl_cadence_decide_levels(c, &ld2), "decide_levels");
  CHECK_NEAR(ld2.failures[0], 10, 0);
  CHECK_NEAR(ld2.failures[1], 30, 0);
  CHECK_NEAR(ld2.failures[2], 0, 0);
  CHECK(ld2.rate[1] > ld2.rate[0]);
  CHECK(ld2.interval_steps[1] < ld.interval_steps[1]);
  /* The single-level estimate counted them too. */
  ftl_cadence_decision dec;
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK_NEAR(dec.failures, 40, 0);
  ftl_cadence_destroy(c);

  /* A job without L2: host losses go to L3, and L2 has no interval. */
  c = make_levels(FTL_CADENCE_LEVEL_BIT(FTL_CADENCE_LEVEL_L1) | FTL_CADENCE_LEVEL_BIT(FTL_CADENCE_LEVEL_L3));
  CHECK_OK(ftl_cadence_load_ledger(c, ledger, NULL, &d), d.msg);
  CHECK_OK(ftl_cadence_decide_levels(c, &ld), "decide_levels");
  CHECK_INT_EQ(ld.interval_steps[1], 0);
  CHECK_NEAR(ld.failures[2], 30, 0);
  CHECK(ld.interval_steps[2] % ld.interval_steps[0] == 0);
  CHECK_INT_EQ(ftl_cadence_observe_checkpoint_level(c, FTL_CADENCE_LEVEL_L2, 1, 1), FTL_ERR_INVAL);
  ftl_cadence_destroy(c);
  unlink(ledger);

  /* No levels set: decide_levels is a state error; a config without L3 is refused. */
  ftl_cadence_config cfg;
  ftl_cadence_config_init(&cfg);
  cfg.step_s = 1;
  ftl_cadence *plain = NULL;
  CHECK_OK(ftl_cadence_create(&cfg, &plain, &d), d.msg);
  CHECK_INT_EQ(ftl_cadence_decide_levels(plain, NULL), FTL_ERR_STATE);
  ftl_cadence_levels_config lc;
  ftl_cadence_levels_config_init(&lc);
  lc.levels = FTL_CADENCE_LEVEL_BIT(FTL_CADENCE_LEVEL_L1);
  CHECK_INT_EQ(ftl_cadence_set_levels(plain, &lc), FTL_ERR_INVAL);
  ftl_cadence_destroy(plain);
}

static void test_sim_agrees(void) {
  /* The simulator's waste for a fixed pattern is the model's, within noise (about 2,000 failures). */
  cd_sim_ml_params p = {.levels = 3, .step_s = 1, .work_s = 4e6, .world_size = 8, .seed = 7};
  const double stall[3] = {2, 8, 40}, durable[3] = {0, 0, 0}, restart[3] = {30, 60, 240};
  const double rate[3] = {0.4 / 3600, 0.4 / 3600, 0.2 / 3600};
  set3(p.lv, stall, durable, restart, rate);
  const int64_t every[3] = {1, 4, 3}, steps[3] = {300, 1200, 3600};
  double model = ftl_cadence_pattern_waste(p.lv, 3, 300, every);
  cd_sim_ml_result r;
  CHECK_OK(cd_cadence_sim_ml_run(&p, NULL, steps, &r), "sim");
  CHECK(r.completed);
  CHECK(r.failures[0] > 300 && r.failures[2] > 100);
  if (!(fabs(r.waste - model) <= 0.1 * model)) FTL_TEST_FAIL_("sim %.5f vs model %.5f", r.waste, model);
  /* Bad intervals: not multiples, top not written. */
  CHECK_INT_EQ(cd_cadence_sim_ml_run(&p, NULL, (int64_t[]){300, 1000, 3000}, &r), FTL_ERR_INVAL);
  CHECK_INT_EQ(cd_cadence_sim_ml_run(&p, NULL, (int64_t[]){300, 600, 0}, &r), FTL_ERR_INVAL);
}

int main(void) {
  ftl_log_set_level(FTL_LOG_ERROR);
  char dir[512];
  const char *tmp = getenv("TMPDIR");
  CHECK_OK(ftl_fmt(dir, sizeof dir, "%s/ftl-test-cadence-ml-XXXXXX", tmp && *tmp ? tmp : "/tmp"), "fmt");
  CHECK(mkdtemp(dir) != NULL);
  test_cause_level();
  test_model_limits();
  test_known_optimum();
  test_against_brute_force();
  test_controller(dir);
  test_sim_agrees();
  rmdir(dir);
  printf("ok\n");
  return 0;
}
