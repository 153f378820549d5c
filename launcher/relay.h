/* launcher/relay.h: a host's relay (wire version 3, docs/formats/rendezvous-wire.md "Relays"): one
 * process per host and attempt that the host's rank agents and ranks report to over a Unix socket,
 * and that speaks for all of them to the launcher over one TCP connection: the steady state batched
 * (each rank's latest step, each agent's latest alive, one line a period), everything a failure's
 * detection waits for forwarded at once, the launcher's messages to every agent or rank of the host
 * fanned out from one line.
 *
 * The first agent of a host to call ln_relay_ensure starts it (a fork of that agent, in its own
 * session, so mpirun's teardown of agents does not end it; the agent gives its program the relay's
 * address as FTL_RELAY_ADDR); mpirun still starts every rank, so
 * MPI_Init is untouched. It ends when the launcher's connection closes (closing every local
 * connection: each agent then ends its program, as when its own connection to the launcher
 * closes), at once when every agent of the host has come and gone, or when its last local
 * connection has been gone for a second (an agent missing). The agent that started it waits for
 * its end before it exits itself (ln_relay_wait): mpirun then ends after the relay, and the
 * launcher's sweep of the attempt's leftovers (ln_sweep_token) never finds it. */
#ifndef FTL_LN_RELAY_H
#define FTL_LN_RELAY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ftl/error.h"
#include "rendezvous/client.h"

/* The relay's address for env's attempt ("@ftl-relay-TOKEN"), into addr (size bytes). */
ftl_err ln_relay_address(const core_launch_env *env, char *addr, size_t size, ftl_diag *d);

/* Makes sure this host's relay for env's attempt runs: starts it when no process holds its address
 * yet (*started_out: its pid; 0 when another agent's relay already holds the address). local_agents:
 * how many agents this host runs (LOCAL_WORLD_SIZE), so the relay knows when all have gone. */
ftl_err ln_relay_ensure(const core_launch_env *env, int local_agents, pid_t *started_out, ftl_diag *d);

/* Waits until the relay this agent started (pid) has exited, at most until deadline_ms. */
void ln_relay_wait(pid_t pid, int64_t deadline_ms);

#endif
