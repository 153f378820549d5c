/* launcher/detect.h: the failure detectors of one attempt, as pure functions of what the launcher
 * knows about each rank and of a clock passed in (so tests drive a fake one: tests/launcher/
 * test_detect.c). supervise.c feeds the rank state from the agents' and ranks' reports and acts on
 * what a detector finds (the root cause, the straggler event); nothing here sends, logs or sleeps.
 *
 * The detectors and what they read (docs/fault-tolerance.md has the latencies):
 *   - lost host:   every agent on a host silent for timeouts.node_s (agents report every second);
 *                  one agent silent while the others on its host still report is a lost agent;
 *   - hang:        a rank that reported progress once and then none for its section's timeout; in
 *                  a hung collective every rank goes silent, so the culprit is a stopped process,
 *                  else the rank furthest behind. A rank whose process its agent sees stopped
 *                  (state T) for FTL_DETECT_STOPPED_MS is hung at once, whatever the timeout: a
 *                  stopped process makes no progress until someone continues it;
 *   - vanished:    agents whose connections dropped without an exit report. An agent asked to
 *                  stop (a teardown's SIGTERM from mpirun or srun, or ftl's own) says so first
 *                  (the `stopping` word), so its host is known alive whatever the order in which
 *                  the connections are read: a host is lost only when all its agents vanished
 *                  without a word (never the launcher's own host). Exactly one such host is lost;
 *                  two or more cannot be told apart, so none is blamed (the finding says so and
 *                  excludes nothing rather than the wrong host); with none, the first agent that
 *                  vanished without a word is lost; agents that all said why they went are the
 *                  consequence of something else, and nothing is found here;
 *   - straggler:   a rank whose median compute per step over its last FTL_STRAGGLER_WINDOW reports
 *                  is over FTL_STRAGGLER_RATIO times the others' median and FTL_STRAGGLER_MIN_MS
 *                  more (FTL_STRAGGLER_RATIO_SHARED when the ranks share too few cores: there the
 *                  scheduler alone makes a rank 2x slower for a while).
 * A finished agent (its exit reported) is never silent, and its last word (the exit report) counts
 * as its host answering: a host is lost only if nothing of it was heard for timeouts.node_s. */
#ifndef FTL_LAUNCHER_DETECT_H
#define FTL_LAUNCHER_DETECT_H

#include <stdint.h>

#include "launcher/launcher.h"

enum { FTL_SECTION_STARTUP = 0, FTL_SECTION_STEP = 1, FTL_SECTION_CHECKPOINT = 2 };

#define FTL_STRAGGLER_WINDOW 10
#define FTL_STRAGGLER_RATIO 1.5
#define FTL_STRAGGLER_MIN_MS 2.0
/* Ranks oversubscribing their cores (4 ranks on 2): time slicing alone makes one rank's compute
 * per step up to twice the others' for a whole window in a normal run. */
#define FTL_STRAGGLER_RATIO_SHARED 2.5

/* A process seen stopped (state T) this long is hung: a few of its agent's reports (one a second),
 * so a momentary stop (a profiler's sample, a job-control blip) is not one. */
#define FTL_DETECT_STOPPED_MS 3000

/* Another agent on a host whose agent is past timeouts.node_s counts as silent too once it has
 * missed this long: agents report every second, and the others' last report may have come a
 * moment after this one's, so the bar for them is lower. */
#define FTL_DETECT_MISSED_MS 1500

/* What the detectors know about one rank (times on the launcher's monotonic clock, in ms). */
typedef struct ln_rank_watch {
  const char *host;     /* where its agent runs; NULL until known (borrowed) */
  int has_agent;        /* its agent is connected */
  int exited;           /* its agent reported how the program ended */
  int64_t alive_ms;     /* its agent's last heartbeat, or its exit report */
  int64_t lost_ns;      /* when its agent's connection dropped without an exit report; 0 if not */
  int64_t stopping_ms;  /* when its agent said it was asked to stop (its host was alive then); 0: never */
  int stop_signal;      /* the signal it was asked to stop with */
  int64_t progress_ms;  /* last sign of progress (joined, ready, a step, an event); 0: none yet */
  int64_t last_step;    /* -1 before the first */
  int section;          /* FTL_SECTION_* it last reported */
  int ready;            /* through ftl_init (its MPI and communicator up; the `ready` report) */
  char state;           /* its program's scheduler state as the agent last saw it ('T': stopped) */
  int64_t stopped_ms;   /* since when the agent has seen it stopped ('T' in every report); 0: not */
  double compute_ms[FTL_STRAGGLER_WINDOW]; /* compute per step in its recent reports (a ring) */
  int compute_count;    /* reports so far */
  int straggler_reported;
} ln_rank_watch;

typedef struct ln_detect_limits {
  int64_t startup_ms, step_ms, checkpoint_ms; /* silence allowed per section */
  int64_t node_ms;                            /* a host's agents' silence */
  int64_t missed_ms; /* FTL_DETECT_MISSED_MS, or more where relays batch the agents' reports over a longer
                        period (their last report may be that much older); 0: FTL_DETECT_MISSED_MS */
} ln_detect_limits;

typedef struct ln_detection {
  ln_failure_kind kind;  /* FTL_FAIL_NODE, FTL_FAIL_AGENT_LOST or FTL_FAIL_HANG */
  int rank;               /* the rank to name; -1 for a host */
  const char *host;       /* the host to blame (FTL_FAIL_NODE), else NULL; borrowed from the watch */
  int unpinned;           /* FTL_FAIL_HANG: the named rank does not stand out (ranks on other hosts
                             stopped at the same point: a collective that never completed), so
                             its host is not to blame; 0 otherwise */
  char message[300];      /* what happened, for the failure's summary */
} ln_detection;

/* How often a gang of n ranks reports (docs/formats/rendezvous-wire.md, "The cadence"): its relays'
 * batch period and the launcher's ping to its agents. Both grow with the gang so the lines the
 * launcher reads and writes stay bounded, n / FTL_CADENCE_BATCH_RANKS_PER_S and
 * n / FTL_CADENCE_PING_RANKS_PER_S seconds (at 8 ranks a host about 2,048 batch lines and 256 pings
 * a second: a ping costs the launcher a send, dearer than a read, and only has to come often
 * enough for the agents' fence, timeouts.node_s); never under the 250 ms and 1 s of smaller gangs,
 * and never over a quarter of the shortest silence lim allows (node_s, each section's timeout), so
 * every limit still spans four reports. missed_ms: ln_detect_limits.missed_ms for that batch period
 * (another agent's last report may be a period older). */
#define FTL_CADENCE_BATCH_RANKS_PER_S 16384
#define FTL_CADENCE_PING_RANKS_PER_S 2048
#define FTL_CADENCE_BATCH_FLOOR_MS 250
#define FTL_CADENCE_PING_FLOOR_MS 1000
/* relayed: the gang reports through relays, which fence their agents themselves (relay.c: the
 * kernel ends their launcher connection when what they send goes unacknowledged for node_s, and
 * they pass the launcher's word on as a ping of their own each second). Their ping then only has to
 * show that the launcher's process still runs, so it is not held under a quarter of node_s but grows
 * to FTL_CADENCE_RELAY_PING_MAX_MS, and a relay gives up on a silent launcher after fence_ms: node_s
 * where the ping is what it would be without relays, else four pings. */
#define FTL_CADENCE_RELAY_PING_MAX_MS 15000
typedef struct ln_cadence {
  int batch_ms, ping_ms;
  int64_t missed_ms;
  int64_t fence_ms; /* how long a relay waits for a word from the launcher before it cuts its agents off */
} ln_cadence;
ln_cadence ln_detect_cadence(int n, const ln_detect_limits *lim, int relayed);

/* Records one compute-per-step report in the rank's window. */
void ln_detect_note_compute(ln_rank_watch *w, double compute_ms);

/* The silence allowed in a section. */
int64_t ln_detect_section_timeout(const ln_detect_limits *lim, int section);
const char *ln_detect_section_name(int section);

/* Each returns 1 and fills *out when it finds a failure, else 0. r[0..n) are the ranks. */
int ln_detect_lost_host(const ln_rank_watch *r, int n, const ln_detect_limits *lim, int64_t now_ms,
                         ln_detection *out);
int ln_detect_hang(const ln_rank_watch *r, int n, const ln_detect_limits *lim, int64_t now_ms, ln_detection *out);
/* The same two, saying besides (when they find nothing) the earliest time at which they could
 * (*due_ms): the first rank's silence to reach its limit as things stand. Every report the
 * launcher notes sets a time of "now" (detect.h's users: supervise.c), so none brings a limit
 * closer than now + the shortest limit, which bounds *due_ms too: until then a scan over every
 * rank finds nothing, and at 100k ranks the launcher skips it (docs/scale.md). */
int ln_detect_lost_host_due(const ln_rank_watch *r, int n, const ln_detect_limits *lim, int64_t now_ms,
                            ln_detection *out, int64_t *due_ms);
int ln_detect_hang_due(const ln_rank_watch *r, int n, const ln_detect_limits *lim, int64_t now_ms, ln_detection *out,
                       int64_t *due_ms);
/* lost_rank: the first agent that vanished (-1: none); self_host: the launcher's host, never lost.
 * Returns 0 also when every vanished agent had said it was asked to stop (nothing of its own
 * failed). An ambiguous finding (several hosts vanished without a word) is FTL_FAIL_AGENT_LOST
 * with host NULL and a message naming the hosts. */
int ln_detect_vanished(const ln_rank_watch *r, int n, int lost_rank, const char *self_host, ln_detection *out);

typedef struct ln_straggler {
  int rank;
  double compute_ms;        /* its median compute per step */
  double others_median_ms;  /* the other ranks' */
} ln_straggler;

/* Finds stragglers not reported yet (at most cap, into out); every rank needs a full window.
 * Returns how many; the caller marks them reported. ratio: FTL_STRAGGLER_RATIO, or
 * FTL_STRAGGLER_RATIO_SHARED for ranks that oversubscribe their cores. O(n): each rank's median of
 * its window, and the gang's order statistics around the middle by selection, not a sort. */
int ln_detect_stragglers(const ln_rank_watch *r, int n, double ratio, ln_straggler *out, int cap);

/* 1 when every rank whose host is known runs on the same host (nothing to exclude there). */
int ln_detect_one_host(const ln_rank_watch *r, int n);

/* Rank i's place among the ranks on its host, counted in rank order (mpirun's default by-slot
 * placement gives it as the local rank): where a rank's own word (its ready report's local_rank)
 * is missing. -1 when its host is not known. */
int ln_detect_local_rank(const ln_rank_watch *r, int n, int i);

#endif
