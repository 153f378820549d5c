/* cadence/formulas.c: the checkpoint-interval formulas of ftl/cadence.h (Young, Daly, and the two
 * waste models), apart from the controller so that the multi-level model (multilevel.c) and the
 * controller (cadence.c) both use them without calling each other in a circle. Pure. */
#include "ftl/cadence.h"

#include <math.h>

/* ---- formulas ------------------------------------------------------------------------------- */

static bool valid_dm(double stall_s, double mtbf_s) {
  return isfinite(stall_s) && isfinite(mtbf_s) && stall_s >= 0 && mtbf_s > 0;
}

double ftl_cadence_young_s(double stall_s, double mtbf_s) {
  if (!valid_dm(stall_s, mtbf_s)) return 0;
  return sqrt(2.0 * stall_s * mtbf_s);
}

double ftl_cadence_daly_s(double stall_s, double mtbf_s) {
  if (!valid_dm(stall_s, mtbf_s)) return 0;
  if (stall_s >= 2.0 * mtbf_s) return mtbf_s;
  double x = stall_s / (2.0 * mtbf_s);
  return sqrt(2.0 * stall_s * mtbf_s) * (1.0 + sqrt(x) / 3.0 + x / 9.0) - stall_s;
}

double ftl_cadence_waste_first_order(double interval_s, double stall_s, double durable_s, double restart_s,
                                     double mtbf_s) {
  if (!valid_dm(stall_s, mtbf_s) || !(interval_s > 0)) return 1.0;
  if (!(durable_s > 0)) durable_s = 0;
  if (!(restart_s > 0)) restart_s = 0;
  return stall_s / interval_s + (interval_s / 2.0 + durable_s + restart_s) / mtbf_s;
}

double ftl_cadence_waste(double interval_s, double stall_s, double durable_s, double restart_s, double mtbf_s) {
  if (!valid_dm(stall_s, mtbf_s) || !(interval_s > 0)) return 1.0;
  if (!(durable_s > 0)) durable_s = 0;
  if (!(restart_s > 0)) restart_s = 0;
  /* log(wall/work) = log M + (R+W)/M + log(e^{(τ+δ)/M} − 1) − log τ, computed in logs so an
   * interval many times M gives a waste near 1 rather than an overflow. */
  double a = (interval_s + stall_s) / mtbf_s;
  double log_expm1 = a > 30 ? a : log(expm1(a));
  double log_ratio = log(mtbf_s) + (restart_s + durable_s) / mtbf_s + log_expm1 - log(interval_s);
  if (!(log_ratio > 0)) return 0;
  return -expm1(-log_ratio);
}
