/* tests/cadence/test_cadence_controller.c: the controller's estimator (Gamma-Poisson), its moving
 * estimates, its clamps (τ ≥ W, the preemption bound, whole steps ≥ 1), when it re-derives, the
 * sentence that explains each decision, and the pinned-cadence report. */
#include <math.h>

#include "ftl/cadence.h"
#include "ftl/core.h"
#include "ftl_test.h"

#define CHECK_NEAR(a, b, tol)                                                                                          \
  do {                                                                                                                 \
    double a_ = (a), b_ = (b);                                                                                         \
    if (!(fabs(a_ - b_) <= (tol))) FTL_TEST_FAIL_("%s ≈ %s (%.9g vs %.9g)", #a, #b, a_, b_);                           \
  } while (0)

static ftl_cadence *make(const ftl_cadence_config *cfg) {
  ftl_cadence *c = NULL;
  ftl_diag d = {{0}};
  CHECK_OK(ftl_cadence_create(cfg, &c, &d), d.msg);
  return c;
}

/* A controller that has seen one checkpoint (step 1: its stall and its time to durable), and its
 * decision then. */
static ftl_cadence *make_saved(const ftl_cadence_config *cfg, double stall_s, double durable_s,
                               ftl_cadence_decision *dec) {
  ftl_cadence *c = make(cfg);
  CHECK_OK(ftl_cadence_observe_checkpoint(c, 1, stall_s, durable_s), "ckpt");
  CHECK_OK(ftl_cadence_decide(c, dec), "decide");
  return c;
}

static void test_estimator(void) {
  ftl_cadence_config cfg;
  ftl_cadence_config_init(&cfg);
  cfg.world_size = 64;
  cfg.step_s = 1.5;
  ftl_cadence *c = make(&cfg);
  ftl_cadence_decision dec;
  /* Prior alone: α₀ = 1 event over β₀ = 1/2e-5 = 50,000 rank-hours; M = 1/(λ·G). */
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK_NEAR(dec.rate, 2e-5, 1e-15);
  CHECK_NEAR(dec.mtbf_h, 1.0 / (2e-5 * 64), 1e-9);
  CHECK(dec.failures == 0 && dec.rank_hours == 0);
  /* k failures over E rank-hours: λ̂ = (α₀ + k)/(β₀ + E). */
  for (int i = 0; i < 3; i++)
    CHECK_OK(ftl_cadence_observe_failure(c), "failure");
  CHECK_OK(ftl_cadence_observe_exposure(c, 96), "exposure");
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK_NEAR(dec.rate, 4.0 / 50096.0, 1e-15);
  CHECK_NEAR(dec.mtbf_h, 50096.0 / (4.0 * 64), 1e-9);
  /* Lots of evidence overrules the prior. */
  for (int i = 0; i < 997; i++)
    CHECK_OK(ftl_cadence_observe_failure(c), "failure");
  CHECK_OK(ftl_cadence_observe_exposure(c, 1e7 - 96), "exposure");
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK(fabs(dec.rate / 1e-4 - 1) < 0.01);
  /* M scales as 1/G. */
  CHECK_OK(ftl_cadence_set_world_size(c, 32), "world");
  ftl_cadence_decision dec2;
  CHECK_OK(ftl_cadence_decide(c, &dec2), "decide");
  CHECK_NEAR(dec2.mtbf_h, 2 * dec.mtbf_h, 1e-9);
  ftl_cadence_destroy(c);

  /* Prior weight: with weight 4 the same evidence moves the estimate less. */
  cfg.prior_events = 4;
  c = make(&cfg);
  CHECK_OK(ftl_cadence_observe_failure(c), "failure");
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK_NEAR(dec.rate, 5.0 / 200000.0, 1e-15);
  ftl_cadence_destroy(c);

  /* Causes: hardware-like failures count; start-up errors, rendezvous, preemption do not. */
  CHECK(ftl_cadence_classify("hang", -1) == FTL_CADENCE_CAUSE_FAILURE);
  CHECK(ftl_cadence_classify("node_lost", 5) == FTL_CADENCE_CAUSE_FAILURE);
  CHECK(ftl_cadence_classify("agent_lost", 5) == FTL_CADENCE_CAUSE_FAILURE);
  CHECK(ftl_cadence_classify("launcher", 5) == FTL_CADENCE_CAUSE_FAILURE);
  CHECK(ftl_cadence_classify("exit_code", 5) == FTL_CADENCE_CAUSE_FAILURE);
  CHECK(ftl_cadence_classify("signal", 0) == FTL_CADENCE_CAUSE_FAILURE);
  CHECK(ftl_cadence_classify("exit_code", -1) == FTL_CADENCE_CAUSE_NOT_FAILURE);
  CHECK(ftl_cadence_classify("signal", -1) == FTL_CADENCE_CAUSE_NOT_FAILURE);
  CHECK(ftl_cadence_classify("cannot_start", 5) == FTL_CADENCE_CAUSE_NOT_FAILURE);
  CHECK(ftl_cadence_classify("rendezvous", 5) == FTL_CADENCE_CAUSE_NOT_FAILURE);
  CHECK(ftl_cadence_classify("preempted", 5) == FTL_CADENCE_CAUSE_NOT_FAILURE);
  CHECK(ftl_cadence_classify("gpu_on_fire", 5) == FTL_CADENCE_CAUSE_UNKNOWN);
  CHECK(ftl_cadence_classify(NULL, 5) == FTL_CADENCE_CAUSE_UNKNOWN);
}

static void test_explain_and_estimates(void) {
  ftl_cadence_config cfg;
  ftl_cadence_config_init(&cfg);
  cfg.world_size = 8;
  ftl_cadence *c = make(&cfg);
  /* No step time yet: no decision. */
  int64_t steps = 0;
  bool due = false;
  CHECK_INT_EQ(ftl_cadence_interval_steps(c, &steps), FTL_ERR_STATE);
  CHECK_INT_EQ(ftl_cadence_due(c, 10, &due), FTL_ERR_STATE);
  CHECK_STR_CONTAINS(ftl_cadence_explain(c), "no step time");
  CHECK_OK(ftl_cadence_observe_steps(c, 1, 1.43), "step");
  CHECK_STR_CONTAINS(ftl_cadence_explain(c), "δ = 1 s (assumed)");
  for (int i = 0; i < 3; i++)
    CHECK_OK(ftl_cadence_observe_failure(c), "failure");
  CHECK_OK(ftl_cadence_observe_exposure(c, 96), "exposure");
  /* δ and W are medians of the window: one slow checkpoint does not move them. */
  CHECK_OK(ftl_cadence_observe_checkpoint(c, 10, 0.31, 2.1), "ckpt");
  CHECK_OK(ftl_cadence_observe_checkpoint(c, 20, 0.31, 2.1), "ckpt");
  CHECK_OK(ftl_cadence_observe_checkpoint(c, 30, 9.0, 40), "ckpt");
  CHECK_OK(ftl_cadence_observe_checkpoint(c, 40, 0.31, -1), "ckpt"); /* W not known yet */
  CHECK_OK(ftl_cadence_observe_durable(c, 2.1), "durable");
  ftl_cadence_decision dec;
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK_NEAR(dec.stall_s, 0.31, 1e-12);
  CHECK_NEAR(dec.durable_s, 2.1, 1e-12);
  CHECK(dec.stall_measured && dec.durable_measured && !dec.restart_measured);
  double m_s = dec.mtbf_h * 3600;
  CHECK_NEAR(dec.daly_s, ftl_cadence_daly_s(0.31, m_s), 1e-9);
  CHECK_INT_EQ(dec.interval_steps, (int64_t)floor(dec.daly_s / 1.43 + 0.5));
  CHECK(!dec.pinned && dec.clamps == 0);
  CHECK_NEAR(dec.waste, ftl_cadence_waste(dec.interval_s, 0.31, 2.1, 60, m_s), 1e-12);
  const char *text = ftl_cadence_explain(c);
  printf("%s\n", text);
  char head[96];
  CHECK_OK(ftl_fmt(head, sizeof head, "checkpoint every %lld steps (about ", (long long)dec.interval_steps), "fmt");
  CHECK(strncmp(text, head, strlen(head)) == 0);
  CHECK_STR_CONTAINS(text, "δ = 0.31 s, W = 2.1 s, R = 60 s (assumed), step = 1.4 s, M = ");
  CHECK_STR_CONTAINS(text,
                     " from 3 failures in 96 rank-hours and the prior (2e-05 per rank-hour, weight 1) for 8 ranks");
  CHECK_STR_CONTAINS(text, "expected waste ");

  /* Due: counted from the last checkpoint, then from the restored step. */
  CHECK_OK(ftl_cadence_due(c, 40 + dec.interval_steps - 1, &due), "due");
  CHECK(!due);
  CHECK_OK(ftl_cadence_due(c, 40 + dec.interval_steps, &due), "due");
  CHECK(due);
  CHECK_OK(ftl_cadence_observe_restart(c, 25, 42), "restart");
  CHECK_OK(ftl_cadence_due(c, 25 + dec.interval_steps - 1, &due), "due");
  CHECK(!due);
  CHECK_STR_CONTAINS(ftl_cadence_explain(c), "R = 42 s (measured), ");
  /* R is the median of the measured restarts; the figure the controller uses is also readable
   * without a decision (ftl status shows it). */
  CHECK_OK(ftl_cadence_observe_restart(c, 25, 10), "restart");
  CHECK_OK(ftl_cadence_observe_restart(c, 25, 12), "restart");
  double r = 0;
  int n = 0;
  CHECK_OK(ftl_cadence_restart_estimate(c, &r, &n), "estimate");
  CHECK(n == 3 && r == 12);
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK(dec.restart_measured && dec.restart_s == 12);
  CHECK_STR_CONTAINS(ftl_cadence_explain(c), "R = 12 s (measured), ");
  CHECK_INT_EQ(ftl_cadence_restart_estimate(NULL, &r, &n), FTL_ERR_INVAL);

  /* Step times alone do not re-derive (the decision changes only at a checkpoint or a failure),
   * so every rank keeps the interval it agreed on. */
  CHECK_OK(ftl_cadence_interval_steps(c, &steps), "interval");
  CHECK_OK(ftl_cadence_observe_steps(c, 100, 100 * 14.3), "steps");
  int64_t steps2 = 0;
  CHECK_OK(ftl_cadence_interval_steps(c, &steps2), "interval");
  CHECK_INT_EQ(steps2, steps);
  CHECK_OK(ftl_cadence_observe_checkpoint(c, 100, 0.31, 2.1), "ckpt");
  CHECK_OK(ftl_cadence_interval_steps(c, &steps2), "interval");
  CHECK(steps2 < steps / 5);
  /* A failure re-derives: M shrinks, so does the interval. */
  CHECK_OK(ftl_cadence_interval_steps(c, &steps), "interval");
  for (int i = 0; i < 50; i++)
    CHECK_OK(ftl_cadence_observe_failure(c), "failure");
  CHECK_OK(ftl_cadence_interval_steps(c, &steps2), "interval");
  CHECK(steps2 < steps);
  ftl_cadence_destroy(c);
}

static void test_clamps(void) {
  ftl_cadence_config cfg;
  ftl_cadence_config_init(&cfg);
  ftl_cadence_decision dec;
  /* τ ≥ W: M = 36 s (rate 1e-2 over 10,000 ranks), δ = 0.01 s → Daly ≈ 0.8 s, but W = 5 s. */
  cfg.world_size = 10000;
  cfg.fleet_rate = 1e-2;
  cfg.step_s = 0.1;
  ftl_cadence *c = make_saved(&cfg, 0.01, 5, &dec);
  CHECK_NEAR(dec.mtbf_h * 3600, 36, 1e-9);
  CHECK(dec.daly_s < 1);
  CHECK_INT_EQ(dec.interval_steps, 50);
  CHECK(dec.clamps == FTL_CADENCE_CLAMP_DURABLE);
  CHECK_STR_CONTAINS(ftl_cadence_explain(c), "raised to W = 5 s so that one checkpoint at most is in flight");
  ftl_cadence_destroy(c);

  /* Whole steps ≥ 1: a step longer than the optimum. */
  cfg.step_s = 30;
  c = make_saved(&cfg, 0.01, 0, &dec);
  CHECK_INT_EQ(dec.interval_steps, 1);
  CHECK(dec.clamps == FTL_CADENCE_CLAMP_ONE_STEP);
  CHECK_STR_CONTAINS(ftl_cadence_explain(c), "checkpoint every 1 step (about 30 s)");
  CHECK_STR_CONTAINS(ftl_cadence_explain(c), "is shorter than a step");
  ftl_cadence_destroy(c);

  /* Preemption bound: the default prior over 64 ranks gives M ≈ 781 h and Daly ≈ 40 min; a save of
   * δ + W = 41 s does not fit in a 30 s notice, so τ ≤ 600 s = 400 steps of 1.5 s. */
  ftl_cadence_config_init(&cfg);
  cfg.world_size = 64;
  cfg.step_s = 1.5;
  cfg.preempt_notice_s = 30;
  cfg.preempt_max_loss_s = 600;
  c = make_saved(&cfg, 1, 40, &dec);
  CHECK(dec.daly_s > 2000);
  CHECK_INT_EQ(dec.interval_steps, 400);
  CHECK(dec.clamps == FTL_CADENCE_CLAMP_PREEMPT);
  printf("%s\n", ftl_cadence_explain(c));
  CHECK_STR_CONTAINS(ftl_cadence_explain(c),
                     "capped at 10 min: a save (δ + W = 41 s) does not fit in the 30 s preemption notice");
  /* Once saves fit in the notice, a preemption loses nothing and the bound goes. */
  for (int i = 0; i < 8; i++)
    CHECK_OK(ftl_cadence_observe_checkpoint(c, 2 + i, 1, 10), "ckpt");
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK(dec.clamps == 0);
  CHECK(dec.interval_steps > 400);
  ftl_cadence_destroy(c);
  /* No notice at all: the bound applies whatever the save costs. */
  cfg.preempt_notice_s = 0;
  c = make_saved(&cfg, 1, 2, &dec);
  CHECK_INT_EQ(dec.interval_steps, 400);
  CHECK_STR_CONTAINS(ftl_cadence_explain(c), "no preemption notice to save in");
  /* W beats the preemption bound: two saves in flight would stall anyway. */
  CHECK_OK(ftl_cadence_observe_durable(c, 900), "durable");
  CHECK_OK(ftl_cadence_observe_durable(c, 900), "durable");
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK_INT_EQ(dec.interval_steps, 600);
  CHECK(dec.clamps == FTL_CADENCE_CLAMP_DURABLE);
  /* A preemption bound shorter than one step still checkpoints every step. */
  ftl_cadence_destroy(c);
  cfg.preempt_max_loss_s = 1;
  c = make(&cfg);
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK_INT_EQ(dec.interval_steps, 1);
  CHECK(dec.clamps & FTL_CADENCE_CLAMP_ONE_STEP);
  ftl_cadence_destroy(c);
}

static void test_pinned(void) {
  ftl_cadence_config cfg;
  ftl_cadence_config_init(&cfg);
  cfg.world_size = 1024;
  cfg.step_s = 1.5;
  cfg.pin_steps = 1000;
  ftl_cadence_decision dec;
  ftl_cadence *c = make_saved(&cfg, 5, 20, &dec);
  CHECK(dec.pinned);
  CHECK_INT_EQ(dec.interval_steps, 1000);
  double m_s = dec.mtbf_h * 3600;
  CHECK_INT_EQ(dec.optimum_steps, (int64_t)floor(ftl_cadence_daly_s(5, m_s) / 1.5 + 0.5));
  CHECK_NEAR(dec.waste, ftl_cadence_waste(1500, 5, 20, 60, m_s), 1e-12);
  CHECK(dec.waste > dec.waste_optimum);
  const char *text = ftl_cadence_explain(c);
  printf("%s\n", text);
  CHECK_STR_CONTAINS(text, "checkpoint every 1000 steps (about 25 min, pinned)");
  char want[160];
  CHECK_OK(ftl_fmt(want, sizeof want, "expected waste %.3g%% against %.3g%% at the derived every %lld steps",
                   100 * dec.waste, 100 * dec.waste_optimum, (long long)dec.optimum_steps),
           "fmt");
  CHECK_STR_CONTAINS(text, want);
  /* Pinned in seconds: 30 min of 1.5 s steps. */
  CHECK_OK(ftl_cadence_pin(c, 0, 1800), "pin");
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK(dec.pinned);
  CHECK_INT_EQ(dec.interval_steps, 1200);
  /* A pin shorter than W is honoured, and said to stall. */
  CHECK_OK(ftl_cadence_pin(c, 5, 0), "pin");
  CHECK_STR_CONTAINS(ftl_cadence_explain(c), "the pin is shorter than W");
  /* Unpinned: back to the optimum. */
  CHECK_OK(ftl_cadence_pin(c, 0, 0), "pin");
  CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
  CHECK(!dec.pinned);
  CHECK_INT_EQ(dec.interval_steps, dec.optimum_steps);
  CHECK_NEAR(dec.waste, dec.waste_optimum, 1e-15);
  ftl_cadence_destroy(c);
}

static void test_bad_input(void) {
  ftl_cadence_config cfg;
  ftl_cadence_config_init(&cfg);
  ftl_cadence *c = NULL;
  ftl_diag d = {{0}};
  cfg.world_size = 0;
  CHECK_INT_EQ(ftl_cadence_create(&cfg, &c, &d), FTL_ERR_INVAL);
  CHECK_STR_CONTAINS(d.msg, "world_size");
  CHECK(c == NULL);
  cfg.world_size = 4;
  cfg.stall_s = -1;
  CHECK_INT_EQ(ftl_cadence_create(&cfg, &c, &d), FTL_ERR_INVAL);
  CHECK_STR_CONTAINS(d.msg, "stall_s");
  cfg.stall_s = 0;
  cfg.fleet_rate = NAN;
  CHECK_INT_EQ(ftl_cadence_create(&cfg, &c, &d), FTL_ERR_INVAL);
  cfg.fleet_rate = 0;
  cfg.window = 1000;
  CHECK_INT_EQ(ftl_cadence_create(&cfg, &c, &d), FTL_ERR_INVAL);
  cfg.window = 0;
  ftl_alloc_fail_nth(1);
  CHECK_INT_EQ(ftl_cadence_create(&cfg, &c, &d), FTL_ERR_NOMEM);
  ftl_alloc_fail_nth(0);
  CHECK_OK(ftl_cadence_create(&cfg, &c, &d), d.msg);
  CHECK_INT_EQ(ftl_cadence_observe_checkpoint(c, 1, -1, 0), FTL_ERR_INVAL);
  CHECK_INT_EQ(ftl_cadence_observe_steps(c, 0, 1), FTL_ERR_INVAL);
  CHECK_INT_EQ(ftl_cadence_observe_exposure(c, -1), FTL_ERR_INVAL);
  CHECK_INT_EQ(ftl_cadence_set_world_size(c, 0), FTL_ERR_INVAL);
  CHECK_INT_EQ(ftl_cadence_pin(c, -1, 0), FTL_ERR_INVAL);
  ftl_cadence_destroy(c);
  ftl_cadence_destroy(NULL);
}

int main(void) {
  ftl_log_set_level(FTL_LOG_ERROR);
  test_estimator();
  test_explain_and_estimates();
  test_clamps();
  test_pinned();
  test_bad_input();
  printf("ok\n");
  return 0;
}
