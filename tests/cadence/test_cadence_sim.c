/* tests/cadence/test_cadence_sim.c: the simulator keeps its books (wall = compute + stalls +
 * restarts, lost = compute − useful work), is deterministic given its seed, agrees with Daly's
 * exponential waste model for a fixed interval, and, driving the real controller, ends near the
 * interval derived from the true MTBF whichever way its prior was wrong. */
#include <math.h>

#include "cadence/sim.h"
#include "ftl/core.h"
#include "ftl_test.h"

static cd_cadence_sim_params base(double mtbf_s, uint64_t seed) {
  cd_cadence_sim_params p = {.mtbf_s = mtbf_s,
                              .stall_s = 10,
                              .durable_s = 0,
                              .restart_s = 60,
                              .step_s = 1.5,
                              .work_s = 400 * mtbf_s,
                              .world_size = 64,
                              .seed = seed,
                              .window_after = 5};
  return p;
}

static void check_books(const cd_cadence_sim_result *r, const cd_cadence_sim_params *p) {
  CHECK(r->completed);
  CHECK(fabs(r->wall_s - (r->compute_s + r->stall_s + r->restart_s)) < 1e-6 * r->wall_s);
  CHECK(fabs(r->lost_s - (r->compute_s - r->work_s)) < 1e-6 * r->wall_s);
  CHECK(r->work_s >= p->work_s && r->work_s < p->work_s + p->step_s);
  CHECK(r->window_reached);
  CHECK(r->window_waste > 0 && r->window_waste < 1);
}

int main(void) {
  ftl_log_set_level(FTL_LOG_ERROR);
  /* The generator: deterministic, uniform in [0, 1), exponential with the right mean. */
  cd_sim_rng a, b;
  cd_sim_rng_seed(&a, 42);
  cd_sim_rng_seed(&b, 42);
  double sum = 0;
  for (int i = 0; i < 200000; i++) {
    CHECK(cd_sim_rng_next(&a) == cd_sim_rng_next(&b));
    double u = cd_sim_rng_uniform(&a);
    CHECK(u >= 0 && u < 1);
    sum += cd_sim_rng_exp(&b, 3.0);
  }
  CHECK(fabs(sum / 200000 / 3.0 - 1) < 0.01);

  /* A fixed interval against the model (W = 0, where Daly's model is exact up to whole steps). */
  const double mtbfs[] = {600, 3600, 6 * 3600};
  for (size_t i = 0; i < 3; i++) {
    double m = mtbfs[i];
    cd_cadence_sim_params p = base(m, 7 + i);
    int64_t steps = (int64_t)(ftl_cadence_daly_s(p.stall_s, m) / p.step_s + 0.5);
    cd_cadence_sim_result r, r2;
    CHECK_OK(cd_cadence_sim_run(&p, NULL, steps, &r), "sim");
    check_books(&r, &p);
    double model = ftl_cadence_waste((double)steps * p.step_s, p.stall_s, 0, p.restart_s, m);
    printf("M = %6.0f s: simulated waste %.4f, model %.4f, %lld failures\n", m, r.waste, model, (long long)r.failures);
    CHECK(fabs(r.waste / model - 1) < 0.06);
    /* Same seed, same run; another seed, another. */
    CHECK_OK(cd_cadence_sim_run(&p, NULL, steps, &r2), "sim");
    CHECK(r2.wall_s == r.wall_s && r2.failures == r.failures);
    p.seed++;
    CHECK_OK(cd_cadence_sim_run(&p, NULL, steps, &r2), "sim");
    CHECK(r2.wall_s != r.wall_s);
  }

  /* W > 0 costs about W per failure (the model charges it like R). */
  {
    cd_cadence_sim_params p = base(3600, 99);
    p.durable_s = 60;
    int64_t steps = (int64_t)(ftl_cadence_daly_s(p.stall_s, p.mtbf_s) / p.step_s + 0.5);
    cd_cadence_sim_result r;
    CHECK_OK(cd_cadence_sim_run(&p, NULL, steps, &r), "sim");
    check_books(&r, &p);
    double model = ftl_cadence_waste((double)steps * p.step_s, p.stall_s, p.durable_s, p.restart_s, p.mtbf_s);
    printf("W = 60 s: simulated waste %.4f, model %.4f\n", r.waste, model);
    CHECK(fabs(r.waste / model - 1) < 0.08);
    /* An interval shorter than W makes each save wait for the previous one: the wait is stall. */
    cd_cadence_sim_result r_short;
    CHECK_OK(cd_cadence_sim_run(&p, NULL, 10, &r_short), "sim");
    check_books(&r_short, &p);
    CHECK(r_short.stall_s > (double)r_short.checkpoints * (p.durable_s - 15 - 1));
  }

  /* The real controller, priors off by 10× both ways: ends near the true Daly interval. */
  const double factors[] = {0.1, 1, 10};
  for (size_t i = 0; i < 3; i++) {
    cd_cadence_sim_params p = base(3600, 1234);
    ftl_cadence_config cfg;
    ftl_cadence_config_init(&cfg);
    cfg.world_size = p.world_size;
    cfg.fleet_rate = factors[i] * 3600.0 / (p.mtbf_s * (double)p.world_size);
    cfg.restart_s = p.restart_s;
    cfg.step_s = p.step_s;
    ftl_cadence *c = NULL;
    ftl_diag d;
    CHECK_OK(ftl_cadence_create(&cfg, &c, &d), d.msg);
    cd_cadence_sim_result r;
    CHECK_OK(cd_cadence_sim_run(&p, c, 0, &r), "sim");
    check_books(&r, &p);
    double want = ftl_cadence_daly_s(p.stall_s, p.mtbf_s);
    double got = (double)r.last_interval_steps * p.step_s;
    printf("prior ×%g: final interval %.0f s, Daly for the true M %.0f s; %s\n", factors[i], got, want,
           ftl_cadence_explain(c));
    CHECK(fabs(got / want - 1) < 0.1);
    ftl_cadence_decision dec;
    /* A decision holds the figures of its derivation: the exposure of the last segment (after the
     * last checkpoint) shows once something re-derives, here one more W. */
    CHECK_OK(ftl_cadence_observe_durable(c, p.durable_s), "durable");
    CHECK_OK(ftl_cadence_decide(c, &dec), "decide");
    CHECK(dec.failures == (double)r.failures);
    if (!(fabs(dec.rank_hours / (r.wall_s * 64 / 3600) - 1) < 1e-9))
      FTL_TEST_FAIL_("exposure %.9g rank-hours, wall %.9g s", dec.rank_hours, r.wall_s);
    ftl_cadence_destroy(c);
  }
  /* Bad parameters. */
  cd_cadence_sim_params p = base(3600, 1);
  cd_cadence_sim_result r;
  CHECK_INT_EQ(cd_cadence_sim_run(&p, NULL, 0, &r), FTL_ERR_INVAL);
  p.mtbf_s = 0;
  CHECK_INT_EQ(cd_cadence_sim_run(&p, NULL, 10, &r), FTL_ERR_INVAL);
  printf("ok\n");
  return 0;
}
