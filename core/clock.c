/* core/clock.c: monotonic and wall clocks, and deadlines built on the monotonic one. */
#include <limits.h>
#include <time.h>

#include "ftl/core.h"

int64_t ftl_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t ftl_clock_ms(void) { return ftl_clock_ns() / 1000000; }

int64_t ftl_wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t ftl_deadline_after_ms(int64_t timeout_ms) {
  if (timeout_ms < 0) return FTL_NO_DEADLINE;
  int64_t now = ftl_clock_ms();
  if (timeout_ms > INT64_MAX - now) return FTL_NO_DEADLINE;
  return now + timeout_ms;
}

int ftl_deadline_left_ms(int64_t deadline_ms) {
  if (deadline_ms == FTL_NO_DEADLINE) return INT_MAX;
  int64_t left = deadline_ms - ftl_clock_ms();
  if (left <= 0) return 0;
  if (left > INT_MAX) return INT_MAX;
  return (int)left;
}
