/* core/evloop.h: the launcher's event seam. Three small things a loop over many descriptors needs,
 * kept apart from the loops that use them (launcher/supervise.c, rendezvous/server.c) so that those
 * stay about what the events mean:
 *   - core_evloop: a readiness set over epoll(7). Its own descriptor is pollable (readable when a
 *     member is ready), so a caller can nest a set of thousands inside a poll() of a few; a wait
 *     costs what is ready, not what is watched (poll() scans every descriptor on every call).
 *   - core_timers: a binary min-heap of deadlines named by small integer ids (set, cancel, the
 *     next one due, pop the due ones): a loop sleeps until its next timer instead of scanning.
 *   - core_fd_limit_raise: the soft descriptor limit raised to the hard one, and an error naming the
 *     limit when what a caller needs does not fit.
 * Not here: reading, writing or framing (the callers), and anything but Linux (epoll). Neither the
 * set nor the heap is thread-safe: each belongs to one loop. */
#ifndef FTL_CORE_EVLOOP_H
#define FTL_CORE_EVLOOP_H

#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

typedef struct core_evloop core_evloop;

enum { CORE_EV_IN = 1, CORE_EV_OUT = 2, CORE_EV_HUP = 4, CORE_EV_ERR = 8 };

typedef struct core_evloop_event {
  void *ptr;       /* what the descriptor was added with (borrowed) */
  unsigned events; /* CORE_EV_* */
} core_evloop_event;

ftl_err core_evloop_create(core_evloop **out, ftl_diag *d);
/* Closes the set's own descriptor (not its members'); accepts NULL. */
void core_evloop_destroy(core_evloop *l);
/* The set's descriptor: poll it for POLLIN to learn that core_evloop_wait has something. */
int core_evloop_fd(const core_evloop *l);
/* Watches fd for input (level-triggered); ptr comes back with its events. */
ftl_err core_evloop_add(core_evloop *l, int fd, void *ptr, ftl_diag *d);
/* Stops watching fd (call before closing it). */
void core_evloop_del(core_evloop *l, int fd);
/* Up to max ready members, waiting at most timeout_ms (0: none; never forever: -1 is taken as 0).
 * Returns how many, 0 on EINTR, or -1 with errno set. */
int core_evloop_wait(core_evloop *l, core_evloop_event *evs, int max, int timeout_ms);

typedef struct core_timers core_timers;

/* A heap for timers 0..n_ids-1. */
ftl_err core_timers_create(int n_ids, core_timers **out, ftl_diag *d);
void core_timers_destroy(core_timers *t);
/* Arms timer id for due_ms (moving it when armed already). */
void core_timers_set(core_timers *t, int id, int64_t due_ms);
void core_timers_cancel(core_timers *t, int id);
/* The earliest due time, or INT64_MAX when none is armed. */
int64_t core_timers_next_due(const core_timers *t);
/* The next timer due at or before now_ms, disarmed, or -1 when none is. */
int core_timers_pop_due(core_timers *t, int64_t now_ms);

/* Raises the soft RLIMIT_NOFILE to the hard limit; FTL_ERR_RANGE, naming the limit and `what`,
 * when `need` descriptors do not fit under the hard limit. */
ftl_err core_fd_limit_raise(long need, const char *what, ftl_diag *d);

#endif
