/* core/evloop.c: the readiness set (epoll), the timer heap and the descriptor limit (evloop.h).
 * The heap keeps each id's position so that re-arming or cancelling a timer is O(log n), not a
 * search. */
#include "core/evloop.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ftl/core.h"

struct core_evloop {
  int ep;
};

ftl_err core_evloop_create(core_evloop **out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  core_evloop *l = ftl_calloc(1, sizeof *l);
  if (!l) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
  l->ep = epoll_create1(EPOLL_CLOEXEC);
  if (l->ep < 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "epoll_create1: %s", strerror(errno));
    goto out;
  }
  *out = l;
  l = NULL;
out:
  core_evloop_destroy(l);
  return rc;
}

void core_evloop_destroy(core_evloop *l) {
  if (!l) return;
  if (l->ep >= 0) close(l->ep);
  ftl_free(l);
}

int core_evloop_fd(const core_evloop *l) { return l->ep; }

ftl_err core_evloop_add(core_evloop *l, int fd, void *ptr, ftl_diag *d) {
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ptr};
  if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) != 0)
    return ftl_diag_fail(d, errno == ENOMEM || errno == ENOSPC ? FTL_ERR_NOMEM : FTL_ERR_IO, "epoll_ctl(ADD, %d): %s",
                         fd, strerror(errno));
  return FTL_OK;
}

void core_evloop_del(core_evloop *l, int fd) { epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL); }

int core_evloop_wait(core_evloop *l, core_evloop_event *evs, int max, int timeout_ms) {
  struct epoll_event ready[256];
  if (max > (int)(sizeof ready / sizeof *ready)) max = (int)(sizeof ready / sizeof *ready);
  if (timeout_ms < 0) timeout_ms = 0; /* every blocking wait has a deadline: the caller's */
  int n = epoll_wait(l->ep, ready, max, timeout_ms);
  if (n < 0) return errno == EINTR ? 0 : -1;
  for (int i = 0; i < n; i++) {
    unsigned e = ready[i].events, out = 0;
    if (e & EPOLLIN) out |= CORE_EV_IN;
    if (e & EPOLLOUT) out |= CORE_EV_OUT;
    if (e & (EPOLLHUP | EPOLLRDHUP)) out |= CORE_EV_HUP;
    if (e & EPOLLERR) out |= CORE_EV_ERR;
    evs[i] = (core_evloop_event){.ptr = ready[i].data.ptr, .events = out};
  }
  return n;
}

/* --- the timer heap ------------------------------------------------------------------------ */

typedef struct timer_slot {
  int64_t due_ms;
  int id;
} timer_slot;

struct core_timers {
  int n_ids, count;
  timer_slot *heap; /* heap[0] is the earliest */
  int *pos;         /* per id: its index in heap, -1 when not armed */
};

ftl_err core_timers_create(int n_ids, core_timers **out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  core_timers *t = ftl_calloc(1, sizeof *t);
  if (!t || n_ids < 1) {
    rc = t ? ftl_diag_fail(d, FTL_ERR_INVAL, "a timer heap needs at least one id")
           : ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  t->n_ids = n_ids;
  t->heap = ftl_calloc((size_t)n_ids, sizeof *t->heap);
  t->pos = ftl_calloc((size_t)n_ids, sizeof *t->pos);
  if (!t->heap || !t->pos) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (int i = 0; i < n_ids; i++)
    t->pos[i] = -1;
  *out = t;
  t = NULL;
out:
  core_timers_destroy(t);
  return rc;
}

void core_timers_destroy(core_timers *t) {
  if (!t) return;
  ftl_free(t->heap);
  ftl_free(t->pos);
  ftl_free(t);
}

static void place(core_timers *t, int i, timer_slot s) {
  t->heap[i] = s;
  t->pos[s.id] = i;
}

static void sift_up(core_timers *t, int i) {
  timer_slot s = t->heap[i];
  while (i > 0) {
    int parent = (i - 1) / 2;
    if (t->heap[parent].due_ms <= s.due_ms) break;
    place(t, i, t->heap[parent]);
    i = parent;
  }
  place(t, i, s);
}

static void sift_down(core_timers *t, int i) {
  timer_slot s = t->heap[i];
  for (;;) {
    int c = 2 * i + 1;
    if (c >= t->count) break;
    if (c + 1 < t->count && t->heap[c + 1].due_ms < t->heap[c].due_ms) c++;
    if (t->heap[c].due_ms >= s.due_ms) break;
    place(t, i, t->heap[c]);
    i = c;
  }
  place(t, i, s);
}

static void remove_at(core_timers *t, int i) {
  t->pos[t->heap[i].id] = -1;
  t->count--;
  if (i == t->count) return;
  place(t, i, t->heap[t->count]);
  sift_down(t, i);
  sift_up(t, t->pos[t->heap[i].id] >= 0 ? t->pos[t->heap[i].id] : i);
}

void core_timers_set(core_timers *t, int id, int64_t due_ms) {
  if (id < 0 || id >= t->n_ids) return;
  int i = t->pos[id];
  if (i < 0) {
    i = t->count++;
    place(t, i, (timer_slot){.due_ms = due_ms, .id = id});
    sift_up(t, i);
    return;
  }
  int64_t was = t->heap[i].due_ms;
  t->heap[i].due_ms = due_ms;
  if (due_ms < was)
    sift_up(t, i);
  else
    sift_down(t, i);
}

void core_timers_cancel(core_timers *t, int id) {
  if (id < 0 || id >= t->n_ids || t->pos[id] < 0) return;
  remove_at(t, t->pos[id]);
}

int64_t core_timers_next_due(const core_timers *t) { return t->count ? t->heap[0].due_ms : INT64_MAX; }

int core_timers_pop_due(core_timers *t, int64_t now_ms) {
  if (!t->count || t->heap[0].due_ms > now_ms) return -1;
  int id = t->heap[0].id;
  remove_at(t, 0);
  return id;
}

/* --- the descriptor limit ------------------------------------------------------------------ */

ftl_err core_fd_limit_raise(long need, const char *what, ftl_diag *d) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return ftl_diag_fail(d, FTL_ERR_IO, "getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
  if (rl.rlim_cur != rl.rlim_max) {
    struct rlimit want = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
  }
  if (rl.rlim_cur != RLIM_INFINITY && need > 0 && (rlim_t)need > rl.rlim_cur)
    return ftl_diag_fail(d, FTL_ERR_RANGE,
                         "%s needs %ld open descriptors and the descriptor limit (RLIMIT_NOFILE, `ulimit -n`; hard "
                         "limit `ulimit -Hn` %llu) allows %llu: raise the hard limit (limits.conf, systemd's "
                         "LimitNOFILE, a container's --ulimit nofile=) or run fewer ranks per launcher",
                         what, need, (unsigned long long)rl.rlim_max, (unsigned long long)rl.rlim_cur);
  return FTL_OK;
}
