/* rendezvous/server.h: the launcher's side of the rendezvous. It listens, admits the rank agents
 * and the ranks of one attempt (checking the attempt's token so a process of an earlier attempt
 * cannot join), says "go" when every rank has joined, "fail" when the launcher gives up, and turns
 * everything ranks report afterwards into events for the launcher. Single-threaded: it plugs into
 * the launcher's poll loop. */
#ifndef FTL_RDZV_SERVER_H
#define FTL_RDZV_SERVER_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

typedef struct rz_rdzv_server rz_rdzv_server;

typedef enum rz_rdzv_event_kind {
  FTL_RDZV_AGENT_HELLO, /* a rank's agent started (msg: host, pid) */
  FTL_RDZV_RANK_JOINED, /* a rank entered ftl_init */
  FTL_RDZV_GANG_GO,     /* every rank joined; "go" was sent (rank = -1) */
  FTL_RDZV_RANK_READY,  /* start-up finished (msg: rendezvous_ms, mpi_init_ms, comm_init_ms, ...) */
  FTL_RDZV_FIRST_STEP,  /* first ftl_step_done (msg: first_step_ms) */
  FTL_RDZV_STEP,        /* progress heartbeat (msg: step) */
  FTL_RDZV_EVENT,       /* a library event for the event log (msg: event, fields) */
  FTL_RDZV_AGENT_EXIT,  /* the program of a rank ended (msg: code or signal) */
  FTL_RDZV_RANK_BYE,    /* ftl_finalize */
  FTL_RDZV_CONN_LOST,   /* a connection closed without a goodbye (role says whose) */
  FTL_RDZV_REJECTED,    /* a connection was refused (detail says why: stale token, bad rank) */
  FTL_RDZV_AGENT_ALIVE, /* the agent's heartbeat (msg: state of its program, as /proc shows it) */
  FTL_RDZV_SECTION,     /* a rank entered a section of work (msg: name: "step" or "checkpoint") */
  FTL_RDZV_AGENT_STOPPING, /* the agent was asked to stop (msg: signal, by): its host is alive */
  FTL_RDZV_RANK_PARKED, /* a standby rank finished its start-up and MPI_Init and waits in ftl_init
                           for activation (msg: rss_kb); or, said by its agent, a Python program's
                           runner parked with its modules imported (launcher/pyrun.py) */
  FTL_RDZV_IMPORTS,     /* an agent passes on what its Python program imported at start-up (msg:
                           modules, a list of names; launcher/pyrun.py) */
  FTL_RDZV_GPU_HEALTH,  /* a host's first agent says its GPUs' verdicts changed (msg: gpus;
                           launcher/gpu_watch.h) */
} rz_rdzv_event_kind;

/* A heartbeat's figures, read once by the server: FTL_RDZV_STEP and FTL_RDZV_AGENT_ALIVE carry one,
 * whether the message came whole (msg set too) or as an entry of a relay's batch (msg NULL: at
 * scale the batches are most of what the launcher reads, and building a message per entry was
 * most of their cost; docs/scale.md). */
typedef struct rz_heartbeat {
  int64_t step;            /* a step report's step, -1 when absent */
  double compute_ms;       /* its latest compute sample, -1 when absent */
  const double *samples;   /* every compute sample it brings, oldest first (a relay's batch brings the
                              period's; a message whole brings compute_ms alone) */
  int nsamples;
  bool has_flops;          /* with its model FLOPs so far (ftl_step_done_flops) */
  double flops, flops_ms;
  const char *state;       /* an alive: its program's state ("" when absent) */
  int64_t rss_kb;          /* an alive: its program's resident memory, -1 when unknown */
} rz_heartbeat;

typedef struct rz_rdzv_event {
  rz_rdzv_event_kind kind;
  int rank;             /* -1 when not known */
  const char *role;     /* "agent" or "rank" */
  const json_t *msg;    /* borrowed; NULL for CONN_LOST and GANG_GO, and for a heartbeat of a batch */
  const rz_heartbeat *hb; /* FTL_RDZV_STEP and FTL_RDZV_AGENT_ALIVE: its figures; else NULL */
  const char *detail;   /* for REJECTED */
  const char *peer;     /* who the connection is: "address:port", or "pid P uid U via relay ..." for one
                           behind a relay (what its SO_PEERCRED said); for REJECTED's event and log */
} rz_rdzv_event;

typedef void (*ftl_rdzv_event_fn)(void *user, const rz_rdzv_event *ev);

ftl_err rz_rdzv_server_create(const char *bind_addr, int world_size, const char *token, rz_rdzv_server **out,
                               ftl_diag *d);
void rz_rdzv_server_destroy(rz_rdzv_server *s);
int rz_rdzv_server_port(const rz_rdzv_server *s);

/* Fills fds (capacity cap) with what to poll; returns how many. */
size_t rz_rdzv_server_pollfds(const rz_rdzv_server *s, struct pollfd *fds, size_t cap);
/* Handles what poll reported on those fds, calling fn for each event. */
void rz_rdzv_server_handle(rz_rdzv_server *s, const struct pollfd *fds, size_t n, ftl_rdzv_event_fn fn, void *user);

int rz_rdzv_server_joined(const rz_rdzv_server *s);
/* Whether rank joined the rendezvous. */
bool rz_rdzv_server_rank_joined(const rz_rdzv_server *s, int rank);
/* Open connections from agents and ranks (direct, or virtual behind a relay). */
size_t rz_rdzv_server_connections(const rz_rdzv_server *s);
/* Relay connections (wire version 3: one per host that uses one; docs/formats/rendezvous-wire.md).
 * The counts above and below count the agents and ranks behind them, not the relays. */
size_t rz_rdzv_server_relays(const rz_rdzv_server *s);
/* Open connections from ranks (in ftl_init or after it). */
size_t rz_rdzv_server_rank_connections(const rz_rdzv_server *s);
bool rz_rdzv_server_went(const rz_rdzv_server *s);
/* The host a rank reported (agent or rank), or NULL when nothing was heard from it. */
const char *rz_rdzv_server_host(const rz_rdzv_server *s, int rank);

/* Describes the ranks that have not joined: "rank 3 (host n1), rank 5 (never started)". */
void rz_rdzv_server_describe_missing(const rz_rdzv_server *s, char *buf, size_t size);

/* Tells every rank agent to pass `signal` to its program's process group (and to SIGKILL the group
 * after its grace period). Faster than going through mpirun, and it reaches every host. */
void rz_rdzv_server_signal_agents(rz_rdzv_server *s, int signal);

/* Sends every agent a heartbeat, so an agent cut off from the launcher notices and ends its rank. */
void rz_rdzv_server_ping_agents(rz_rdzv_server *s);

/* Asks every rank that uses the library to stop (ftl_stop_requested returns 1), with a reason. */
void rz_rdzv_server_request_stop(rz_rdzv_server *s, const char *reason);

/* Activates a standby gang: every rank and agent gets {"type":"activate", ...fields} now or, if
 * it parks or says hello later, then. fields (borrowed) say which attempt the gang now is. */
void rz_rdzv_server_activate(rz_rdzv_server *s, const json_t *fields);
bool rz_rdzv_server_activated(const rz_rdzv_server *s);

/* The cadence of this gang's relays (wire version 4, `cadence`: docs/formats/rendezvous-wire.md):
 * a batch every batch_ms, each rank's step entry bringing up to `samples` compute samples of the
 * period, and (fence_ms > 0) how long the relay waits for a word from the launcher before it cuts
 * its agents off. Sent to every relay connected now and to each later one at its hello; without it
 * a relay batches every 250 ms with one sample per entry and waits timeouts.node_s. */
void rz_rdzv_server_set_cadence(rz_rdzv_server *s, int batch_ms, int samples, int64_t fence_ms);

/* Tells every joined rank that the rendezvous failed, with the reason; no rank gets "go" after. */
void rz_rdzv_server_fail(rz_rdzv_server *s, const char *reason);

#endif
