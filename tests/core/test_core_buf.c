/* tests/core/test_core_buf.c: the growable buffer with a size limit (core/buf.h): bytes and
 * printf appended and NUL-terminated, growth across many adds, the limit exact (max bytes fit,
 * one more fails with FTL_ERR_RANGE and frees what was held), the failure sticky, every
 * allocation failing in turn giving FTL_ERR_NOMEM cleanly, take and free. */
#include <stdint.h>
#include <string.h>

#include "core/buf.h"
#include "ftl/core.h"
#include "ftl_test.h"

static void test_add_and_printf(void) {
  core_buf b;
  core_buf_init(&b, 1 << 20);
  CHECK(b.p == NULL && b.len == 0);
  CHECK_OK(core_buf_adds(&b, "abc"), "adds");
  CHECK_OK(core_buf_addc(&b, '-'), "addc");
  CHECK_OK(core_buf_add(&b, "xyz", 2), "add");
  CHECK_OK(core_buf_printf(&b, "%d/%s", 42, "ok"), "printf");
  CHECK_STR_EQ(b.p, "abc-xy42/ok");
  CHECK_INT_EQ(b.len, 11);
  CHECK_OK(core_buf_add(&b, NULL, 0), "empty add");
  CHECK_INT_EQ(b.len, 11);
  /* Growth: a long printf (longer than any first allocation) and many small adds. */
  char big[5000];
  memset(big, 'q', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  CHECK_OK(core_buf_printf(&b, "[%s]", big), "long printf");
  CHECK_INT_EQ(b.len, 11 + 5001);
  for (int i = 0; i < 10000; i++)
    CHECK_OK(core_buf_addc(&b, (char)('a' + i % 26)), "many adds");
  CHECK_INT_EQ(b.len, 11 + 5001 + 10000);
  CHECK(b.p[b.len] == '\0');
  CHECK(b.p[11] == '[' && b.p[11 + 5000] == ']' && b.p[11 + 5001] == 'a');
  size_t len = 0;
  char *p = core_buf_take(&b, &len);
  CHECK_INT_EQ(len, 11 + 5001 + 10000);
  CHECK(b.p == NULL && b.len == 0 && b.max == (1 << 20));
  ftl_free(p);
  CHECK(core_buf_take(&b, &len) == NULL && len == 0);
  core_buf_free(&b);
}

static void test_limit(void) {
  core_buf b;
  ftl_diag d = {{0}};
  core_buf_init(&b, 10);
  CHECK_OK(core_buf_adds(&b, "0123456789"), "exactly max");
  CHECK_OK(core_buf_check(&b, "ten", &d), d.msg);
  CHECK_INT_EQ(core_buf_addc(&b, 'x'), FTL_ERR_RANGE);
  CHECK(b.p == NULL && b.len == 0); /* what was held is gone */
  /* Sticky: nothing more goes in, and the check says why. */
  CHECK_INT_EQ(core_buf_adds(&b, ""), FTL_ERR_RANGE);
  CHECK_INT_EQ(core_buf_printf(&b, "%d", 1), FTL_ERR_RANGE);
  CHECK_INT_EQ(core_buf_check(&b, "the thing", &d), FTL_ERR_RANGE);
  CHECK_STR_CONTAINS(d.msg, "the thing: more than 10 bytes");
  core_buf_free(&b);
  CHECK_OK(core_buf_adds(&b, "again"), "after free");
  CHECK_STR_EQ(b.p, "again");
  /* printf past the limit, whether it fits the allocation or not. */
  CHECK_INT_EQ(core_buf_printf(&b, "%s", "123456"), FTL_ERR_RANGE);
  core_buf_free(&b);
  CHECK_OK(core_buf_printf(&b, "%s", "12345"), "fits");
  CHECK_INT_EQ(core_buf_printf(&b, "%s", "123456789012345678901234567890"), FTL_ERR_RANGE);
  core_buf_free(&b);
  /* A limit of 0 holds nothing but takes empty adds. */
  core_buf_init(&b, 0);
  CHECK_OK(core_buf_add(&b, "", 0), "empty");
  CHECK_INT_EQ(core_buf_addc(&b, 'a'), FTL_ERR_RANGE);
  core_buf_free(&b);
  /* No limit at all still refuses a length that cannot be represented. */
  core_buf_init(&b, SIZE_MAX);
  CHECK_OK(core_buf_adds(&b, "ab"), "ab");
  CHECK_INT_EQ(core_buf_add(&b, "x", SIZE_MAX - 2), FTL_ERR_RANGE);
  core_buf_free(&b);
}

static void test_out_of_memory(void) {
  /* Every allocation failing in turn: the error is NOMEM, the buffer empty, nothing leaks (ASan). */
  int failures = 0;
  for (long nth = 1; nth < 50; nth++) {
    core_buf b;
    ftl_diag d = {{0}};
    core_buf_init(&b, 1 << 20);
    ftl_alloc_fail_nth(nth);
    for (int i = 0; i < 2000 && !b.err; i++)
      core_buf_printf(&b, "line %d of many\n", i);
    ftl_alloc_fail_nth(0);
    if (b.err) {
      failures++;
      CHECK_INT_EQ(b.err, FTL_ERR_NOMEM);
      CHECK(b.p == NULL && b.len == 0);
      CHECK_INT_EQ(core_buf_check(&b, "lines", &d), FTL_ERR_NOMEM);
      CHECK_STR_CONTAINS(d.msg, "lines: out of memory");
    } else {
      CHECK_INT_EQ(b.len, strlen(b.p));
    }
    core_buf_free(&b);
  }
  CHECK(failures > 3);
}

int main(void) {
  test_add_and_printf();
  test_limit();
  test_out_of_memory();
  printf("ok\n");
  return 0;
}
