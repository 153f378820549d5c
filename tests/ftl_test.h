/* tests/ftl_test.h: the tiny assertion header of ftl's tests. A failed check prints both values
 * and file:line and exits 1; FTL_SKIP exits 77, which ctest reports as skipped. */
#ifndef FTL_TEST_H
#define FTL_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FTL_TEST_FAIL_(...)                                   \
  do {                                                        \
    fprintf(stderr, "%s:%d: check failed: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                             \
    fprintf(stderr, "\n");                                    \
    exit(1);                                                  \
  } while (0)

#define CHECK(cond)                                \
  do {                                             \
    if (!(cond)) FTL_TEST_FAIL_("%s", #cond);      \
  } while (0)

#define CHECK_INT_EQ(a, b)                                                                   \
  do {                                                                                       \
    long long a_ = (long long)(a), b_ = (long long)(b);                                      \
    if (a_ != b_) FTL_TEST_FAIL_("%s == %s (%lld != %lld)", #a, #b, a_, b_);                 \
  } while (0)

#define CHECK_STR_EQ(a, b)                                                                   \
  do {                                                                                       \
    const char *a_ = (a), *b_ = (b);                                                         \
    if (!a_ || !b_ || strcmp(a_, b_) != 0)                                                   \
      FTL_TEST_FAIL_("%s == %s (\"%s\" != \"%s\")", #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
  } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                                      \
  do {                                                                                       \
    const char *h_ = (hay), *n_ = (needle);                                                  \
    if (!h_ || !strstr(h_, n_)) FTL_TEST_FAIL_("\"%s\" contains \"%s\"", h_ ? h_ : "(null)", n_); \
  } while (0)

/* Checks an ftl_err is FTL_OK, printing its name and a detail string when not. */
#define CHECK_OK(expr, detail)                                                               \
  do {                                                                                       \
    int rc_ = (int)(expr);                                                                   \
    if (rc_ != 0) FTL_TEST_FAIL_("%s returned %d (%s)", #expr, rc_, (detail));               \
  } while (0)

#define FTL_SKIP(...)                          \
  do {                                         \
    fprintf(stderr, "skipped: ");              \
    fprintf(stderr, __VA_ARGS__);              \
    fprintf(stderr, "\n");                     \
    exit(77);                                  \
  } while (0)

/* Removes a scratch folder the test made, and all below it (rm -rf): the shell's exit status, 0
 * when removed; -1 for a path with a quote in it or too long. */
static inline int ftl_test_rm_rf(const char *path) {
  char cmd[4200];
  int n = snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  if (strchr(path, '\'') || n < 0 || (size_t)n >= sizeof cmd) return -1;
  return system(cmd);
}

#endif
