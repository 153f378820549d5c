/* launcher/goodput.c: the goodput arithmetic (see goodput.h). */
#include "launcher/goodput.h"

double ln_goodput_saved_stall_ms(double stall_ms, double wait_prev_ms) {
  (void)wait_prev_ms; /* a part of stall_ms, not an addition to it */
  return stall_ms > 0 ? stall_ms : 0;
}

ln_goodput ln_goodput_of_attempt(const ln_attempt_result *r, double backoff_ms) {
  ln_goodput g = {.wall_ms = r->end_ms, .backoff_ms = backoff_ms, .stall_ms = r->ckpt_stall_ms};
  double stop = r->failure_ms >= 0 ? r->failure_ms : r->end_ms;
  if (r->first_step_ms < 0) {
    g.startup_ms = stop;
    if (r->joined == 0 && r->started_ms > 0 && r->started_ms < stop) {
      g.startup_ms = r->started_ms;
      g.unreported_ms = stop - r->started_ms;
    }
    g.teardown_ms = r->end_ms - stop;
    return g;
  }
  g.startup_ms = r->first_step_ms;
  double steps_ms = stop - r->first_step_ms;
  if (r->outcome == FTL_ATTEMPT_FAILED || r->outcome == FTL_ATTEMPT_INTERRUPTED) {
    double since = r->committed_at_ms > r->first_step_ms ? r->committed_at_ms : r->first_step_ms;
    g.lost_ms = stop - since;
  }
  g.productive_ms = steps_ms - g.lost_ms - g.stall_ms;
  if (g.productive_ms < 0) g.productive_ms = 0;
  g.teardown_ms = r->end_ms - stop;
  return g;
}

ln_goodput ln_goodput_sum(const ln_goodput *per, int n) {
  ln_goodput t = {0};
  for (int i = 0; i < n; i++) {
    t.wall_ms += per[i].wall_ms + per[i].backoff_ms;
    t.startup_ms += per[i].startup_ms;
    t.productive_ms += per[i].productive_ms;
    t.stall_ms += per[i].stall_ms;
    t.lost_ms += per[i].lost_ms;
    t.teardown_ms += per[i].teardown_ms;
    t.backoff_ms += per[i].backoff_ms;
    t.unreported_ms += per[i].unreported_ms;
  }
  return t;
}

int ln_goodput_measured(const ln_goodput *total) { return !(total->productive_ms <= 0 && total->unreported_ms > 0); }

double ln_goodput_pct(const ln_goodput *total) {
  return total->wall_ms > 0 ? 100.0 * total->productive_ms / total->wall_ms : 0;
}
