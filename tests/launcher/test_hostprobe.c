/* tests/launcher/test_hostprobe.c: the host probe's classification (launcher/hostprobe.c). Only a
 * host that does not answer in time, or whose route is reported down, is unreachable: a refused
 * connection is an answer, and an error that says nothing about the host never leaves it out.
 * Also: the launcher's own host and names that do not resolve are never reported by the probe
 * (run.c names the latter itself). A real black-holed host is tests/fault/blackholed_host_excluded.sh. */
#include <errno.h>

#include "ftl/core.h"
#include "ftl_test.h"
#include "launcher/hostprobe.h"

int main(void) {
  CHECK_INT_EQ(ln_hostprobe_unreachable(0), 0);            /* accepted */
  CHECK_INT_EQ(ln_hostprobe_unreachable(ECONNREFUSED), 0); /* refused: the host answered */
  CHECK_INT_EQ(ln_hostprobe_unreachable(ETIMEDOUT), 1);
  CHECK_INT_EQ(ln_hostprobe_unreachable(EHOSTUNREACH), 1);
  CHECK_INT_EQ(ln_hostprobe_unreachable(ENETUNREACH), 1);
  CHECK_INT_EQ(ln_hostprobe_unreachable(ENETDOWN), 0); /* this host's network, not that host */
  CHECK_INT_EQ(ln_hostprobe_unreachable(EACCES), 0);
  CHECK_INT_EQ(ln_hostprobe_unreachable(EMFILE), 0);

  /* This host (by address and by name) and a name that does not resolve: nothing to report, and
   * quickly (no connection waits for the deadline). */
  const char *hosts[] = {"127.0.0.1", ftl_hostname(), "ftl-no-such-host.invalid"};
  int err[3] = {-1, -1, -1};
  int64_t t0 = ftl_clock_ms();
  ln_hostprobe_run(hosts, 3, 22, 2000, err);
  for (int i = 0; i < 3; i++) CHECK_INT_EQ(err[i], 0);
  CHECK(ftl_clock_ms() - t0 < 1900);
  ln_hostprobe_run(hosts, 0, 22, 2000, err); /* no hosts */
  printf("ok\n");
  return 0;
}
