/* tests/pipeline/pl_test_files.h: whole-file reads and comparisons the pipeline's export and
 * package tests share (a read that fails fails the test). */
#ifndef FTL_TESTS_PL_TEST_FILES_H
#define FTL_TESTS_PL_TEST_FILES_H

#include <string.h>

#include "ftl/core.h"
#include "ftl_test.h"

/* The whole of path (at most 64 MiB); the caller frees it with ftl_free. */
static inline char *pl_test_slurp(const char *path, size_t *size) {
  char *data = NULL;
  ftl_diag d;
  if (ftl_read_file(path, 1 << 26, &data, size, &d)) FTL_TEST_FAIL_("%s", d.msg);
  return data;
}

/* 1 when the two files hold the same bytes. */
static inline int pl_test_same_file(const char *a, const char *b) {
  size_t na, nb;
  char *x = pl_test_slurp(a, &na), *y = pl_test_slurp(b, &nb);
  int same = na == nb && memcmp(x, y, na) == 0;
  ftl_free(x);
  ftl_free(y);
  return same;
}

#endif
