/* core/alloc.c: the one allocation hook of ftl, with a fail-the-Nth switch for tests
 * (the idea of SQLite's faultsim and curl's torture tests), and jansson routed through it. */
#include <jansson.h>
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

/* jansson allocates through the hook, set once by a constructor rather than in ftl_init: ftl has
 * entry points that never call ftl_init (the CLI, the cadence and checkpoint-file APIs, tests and
 * tools linking the static library, the Python binding), and the allocator must be in place before
 * the first JSON value anywhere, since a value made under one allocator must not be freed by the
 * other. This file is linked into every program that uses ftl (ftl_malloc is everywhere), so the
 * constructor runs in each of them, before main, on one thread. */
__attribute__((constructor)) static void jansson_through_the_hook(void) { json_set_alloc_funcs(ftl_malloc, ftl_free); }
