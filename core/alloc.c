/* core/alloc.c: the one allocation hook of ftl, with a fail-the-Nth switch for tests
 * (the idea of SQLite's faultsim and curl's torture tests). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ftl/core.h"

static atomic_long alloc_countdown; /* 0: off; k > 0: the kth allocation from now fails */

void ftl_alloc_fail_nth(long nth) { atomic_store(&alloc_countdown, nth > 0 ? nth : 0); }

static bool alloc_should_fail(void) {
  long left = atomic_load(&alloc_countdown);
  while (left > 0) {
    if (atomic_compare_exchange_weak(&alloc_countdown, &left, left - 1)) return left == 1;
  }
  return false;
}

void *ftl_malloc(size_t size) {
  if (alloc_should_fail()) return NULL;
  return malloc(size ? size : 1);
}

void *ftl_calloc(size_t count, size_t size) {
  if (alloc_should_fail()) return NULL;
  return calloc(count ? count : 1, size ? size : 1);
}

void *ftl_realloc(void *ptr, size_t size) {
  if (alloc_should_fail()) return NULL;
  return realloc(ptr, size ? size : 1);
}

void ftl_free(void *ptr) { free(ptr); }

char *ftl_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *copy = ftl_malloc(n);
  if (copy) memcpy(copy, s, n);
  return copy;
}
