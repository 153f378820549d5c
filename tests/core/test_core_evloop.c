/* tests/core/test_core_evloop.c: core/evloop.h. The timer heap pops in due order, and re-arming or
 * cancelling a timer moves or removes it (checked against a plain scan over many random changes);
 * the readiness set reports a ready pipe by its pointer, is itself pollable, and forgets a removed
 * descriptor; the descriptor limit is raised to the hard one and a need above it is refused with
 * the limit named. */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/evloop.h"
#include "ftl/core.h"
#include "ftl_test.h"

enum { IDS = 200 };

/* A small deterministic generator (xorshift), so a failure repeats. */
static uint64_t next_u64(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void test_timers(void) {
  ftl_diag d = {{0}};
  core_timers *t = NULL;
  CHECK_OK(core_timers_create(IDS, &t, &d), d.msg);
  CHECK(core_timers_next_due(t) == INT64_MAX);
  CHECK_INT_EQ(core_timers_pop_due(t, 1000), -1);
  core_timers_set(t, 3, 30);
  core_timers_set(t, 1, 10);
  core_timers_set(t, 2, 20);
  CHECK(core_timers_next_due(t) == 10);
  core_timers_set(t, 1, 40); /* moved later */
  CHECK_INT_EQ(core_timers_pop_due(t, 25), 2);
  CHECK_INT_EQ(core_timers_pop_due(t, 25), -1);
  core_timers_cancel(t, 3);
  CHECK_INT_EQ(core_timers_pop_due(t, 100), 1);
  CHECK_INT_EQ(core_timers_pop_due(t, 100), -1);

  /* Random sets, moves and cancels against a plain array. */
  int64_t due[IDS];
  for (int i = 0; i < IDS; i++)
    due[i] = -1;
  uint64_t s = 88172645463325252ull;
  for (int round = 0; round < 20000; round++) {
    int id = (int)(next_u64(&s) % IDS);
    if (next_u64(&s) % 4 == 0) {
      core_timers_cancel(t, id);
      due[id] = -1;
    } else {
      due[id] = (int64_t)(next_u64(&s) % 100000);
      core_timers_set(t, id, due[id]);
    }
    int64_t min = INT64_MAX;
    for (int i = 0; i < IDS; i++)
      if (due[i] >= 0 && due[i] < min) min = due[i];
    CHECK(core_timers_next_due(t) == min);
  }
  int64_t last = -1;
  for (int id; (id = core_timers_pop_due(t, INT64_MAX - 1)) >= 0;) {
    CHECK(due[id] >= last);
    last = due[id];
    due[id] = -1;
  }
  for (int i = 0; i < IDS; i++)
    CHECK_INT_EQ((int)due[i], -1);
  core_timers_destroy(t);
  core_timers_destroy(NULL);
}

static void test_evloop(void) {
  ftl_diag d = {{0}};
  core_evloop *l = NULL;
  int p[2], q[2];
  CHECK(pipe(p) == 0 && pipe(q) == 0);
  CHECK_OK(core_evloop_create(&l, &d), d.msg);
  static int tag_p, tag_q;
  CHECK_OK(core_evloop_add(l, p[0], &tag_p, &d), d.msg);
  CHECK_OK(core_evloop_add(l, q[0], &tag_q, &d), d.msg);
  core_evloop_event evs[4];
  CHECK_INT_EQ(core_evloop_wait(l, evs, 4, 0), 0);
  struct pollfd pf = {.fd = core_evloop_fd(l), .events = POLLIN};
  CHECK_INT_EQ(poll(&pf, 1, 0), 0);
  CHECK(write(q[1], "x", 1) == 1);
  CHECK_INT_EQ(poll(&pf, 1, 1000), 1); /* the set's own descriptor says a member is ready */
  CHECK_INT_EQ(core_evloop_wait(l, evs, 4, 1000), 1);
  CHECK(evs[0].ptr == &tag_q);
  CHECK(evs[0].events & CORE_EV_IN);
  core_evloop_del(l, q[0]);
  CHECK_INT_EQ(core_evloop_wait(l, evs, 4, 0), 0);
  close(p[1]); /* the writer gone: a hang-up, reported with the pointer */
  CHECK_INT_EQ(core_evloop_wait(l, evs, 4, 1000), 1);
  CHECK(evs[0].ptr == &tag_p);
  CHECK(evs[0].events & CORE_EV_HUP);
  core_evloop_destroy(l);
  core_evloop_destroy(NULL);
  close(p[0]);
  close(q[0]);
  close(q[1]);
}

static void test_fd_limit(void) {
  ftl_diag d = {{0}};
  struct rlimit rl;
  CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
  CHECK_OK(core_fd_limit_raise(16, "a test", &d), d.msg);
  struct rlimit after;
  CHECK(getrlimit(RLIMIT_NOFILE, &after) == 0);
  CHECK(after.rlim_cur == rl.rlim_max);
  if (rl.rlim_max != RLIM_INFINITY) {
    CHECK_INT_EQ(core_fd_limit_raise((long)rl.rlim_max + 1, "a gang of this size", &d), FTL_ERR_RANGE);
    CHECK_STR_CONTAINS(d.msg, "RLIMIT_NOFILE");
    CHECK_STR_CONTAINS(d.msg, "a gang of this size");
  }
}

int main(void) {
  test_timers();
  test_evloop();
  test_fd_limit();
  printf("ok\n");
  return 0;
}
