/* launcher/hostprobe.h: is a host there at all? After an attempt whose ranks never started by the
 * launch deadline (mpirun waits silently for a host it cannot reach), run.c asks each host of the
 * hostfile for a TCP connection to one port (ssh's, by default: mpirun reaches hosts through it),
 * all at once and within one deadline. A host that accepts or refuses the connection answered; one
 * that does not answer by the deadline, or whose route is reported down, cannot be reached. This
 * says nothing about whether mpirun could start a daemon there (that is the attempt's business);
 * it only finds hosts that are gone from the network, so they can be left out
 * (docs/fault-tolerance.md). The classification is a pure function (tests/launcher/test_hostprobe.c). */
#ifndef FTL_LAUNCHER_HOSTPROBE_H
#define FTL_LAUNCHER_HOSTPROBE_H

#include <stddef.h>
#include <stdint.h>

/* Whether one connection attempt says the host cannot be reached: err is 0 (accepted), the
 * connect's error (ECONNREFUSED: the host answered), or ETIMEDOUT when nothing came back by the
 * deadline. Only a timeout, EHOSTUNREACH and ENETUNREACH count: any other error says nothing
 * about the host, and a host is never left out on a doubt. */
int ln_hostprobe_unreachable(int err);

/* Tries a TCP connection to `port` on each of hosts[0..n) at once, all within timeout_ms, and sets
 * err[i] to the error that makes host i unreachable (ETIMEDOUT, EHOSTUNREACH, ENETUNREACH), or 0
 * when it answered, is this host itself (one of its addresses is local), or its name does not
 * resolve (run.c says so itself) or no socket could be made (nothing is known). */
void ln_hostprobe_run(const char *const *hosts, size_t n, int port, int timeout_ms, int *err);

#endif
