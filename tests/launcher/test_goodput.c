/* tests/launcher/test_goodput.c: the goodput arithmetic (launcher/goodput.c). A checkpoint save's
 * stall_ms already includes its wait for the previous checkpoint (wait_prev_ms): adding the two
 * counted that wait twice and made productive time too small. */
#include <math.h>

#include "ftl_test.h"
#include "launcher/goodput.h"

#define CHECK_MS(a, b)                                                                          \
  do {                                                                                          \
    double a_ = (a), b_ = (b);                                                                  \
    if (fabs(a_ - b_) > 1e-9) FTL_TEST_FAIL_("%s == %s (%.3f != %.3f)", #a, #b, a_, b_);        \
  } while (0)

static ln_attempt_result attempt(ln_attempt_outcome outcome) {
  ln_attempt_result r;
  memset(&r, 0, sizeof r);
  r.outcome = outcome;
  r.first_step_ms = r.started_ms = r.failure_ms = r.end_ms = r.committed_at_ms = -1;
  return r;
}

int main(void) {
  /* Two saves of 100 ms, each with 40 ms of waiting for the previous one inside it. */
  ln_attempt_result ok = attempt(FTL_ATTEMPT_SUCCEEDED);
  ok.ckpt_stall_ms += ln_goodput_saved_stall_ms(100, 40);
  ok.ckpt_stall_ms += ln_goodput_saved_stall_ms(100, 40);
  CHECK_MS(ok.ckpt_stall_ms, 200);
  CHECK_MS(ln_goodput_saved_stall_ms(-1, 0), 0);
  ok.first_step_ms = 1000;
  ok.end_ms = 11000;
  ln_goodput g = ln_goodput_of_attempt(&ok, 0);
  CHECK_MS(g.startup_ms, 1000);
  CHECK_MS(g.stall_ms, 200);
  CHECK_MS(g.productive_ms, 10000 - 200);
  CHECK_MS(g.lost_ms, 0);
  CHECK_MS(g.teardown_ms, 0);

  /* A failure at 8 s, last commit at 5 s, gang gone at 8.5 s, after a 250 ms back-off. */
  ln_attempt_result bad = attempt(FTL_ATTEMPT_FAILED);
  bad.first_step_ms = 1000;
  bad.committed_at_ms = 5000;
  bad.failure_ms = 8000;
  bad.end_ms = 8500;
  bad.ckpt_stall_ms = 300;
  ln_goodput f = ln_goodput_of_attempt(&bad, 250);
  CHECK_MS(f.startup_ms, 1000);
  CHECK_MS(f.lost_ms, 3000);
  CHECK_MS(f.productive_ms, 7000 - 3000 - 300);
  CHECK_MS(f.teardown_ms, 500);
  CHECK_MS(f.backoff_ms, 250);

  /* An attempt that never reached its first step is all start-up (and teardown). */
  ln_attempt_result early = attempt(FTL_ATTEMPT_RDZV_FAILED);
  early.failure_ms = 5000;
  early.end_ms = 5200;
  ln_goodput e = ln_goodput_of_attempt(&early, 0);
  CHECK_MS(e.startup_ms, 5000);
  CHECK_MS(e.teardown_ms, 200);
  CHECK_MS(e.productive_ms, 0);

  /* A library program that failed before its first step (a rank joined): start-up too, even with
   * every rank started. */
  early.started_ms = 300;
  early.joined = 2;
  e = ln_goodput_of_attempt(&early, 0);
  CHECK_MS(e.startup_ms, 5000);
  CHECK_MS(e.unreported_ms, 0);
  early.started_ms = -1;
  early.joined = 0;

  /* A program that does not use ftl (no rank joined, so no steps ever): start-up until its ranks
   * started, then running time whose split is not known; goodput is not measured. */
  ln_attempt_result plain = attempt(FTL_ATTEMPT_FAILED);
  plain.started_ms = 400;
  plain.failure_ms = 9000;
  plain.end_ms = 10000;
  ln_goodput u = ln_goodput_of_attempt(&plain, 0);
  CHECK_MS(u.startup_ms, 400);
  CHECK_MS(u.unreported_ms, 8600);
  CHECK_MS(u.lost_ms, 0);
  CHECK_MS(u.productive_ms, 0);
  CHECK_MS(u.teardown_ms, 1000);
  ln_goodput ut = ln_goodput_sum(&u, 1);
  CHECK_MS(ut.unreported_ms, 8600);
  CHECK(!ln_goodput_measured(&ut));

  ln_goodput per[3] = {e, f, g};
  ln_goodput t = ln_goodput_sum(per, 3);
  CHECK_MS(t.wall_ms, 5200 + 8500 + 250 + 11000);
  CHECK_MS(t.productive_ms, 3700 + 9800);
  CHECK_MS(t.stall_ms, 500);
  CHECK_MS(ln_goodput_pct(&t), 100.0 * 13500 / 24950);
  CHECK(ln_goodput_measured(&t));
  ln_goodput none = {0};
  CHECK_MS(ln_goodput_pct(&none), 0);
  printf("ok\n");
  return 0;
}
