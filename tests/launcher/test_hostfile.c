/* tests/launcher/test_hostfile.c: the strict hostfile reader (launcher/hostfile.c): what it accepts
 * (hosts, addresses, slots=, max_slots=, comments, blank lines, CRLF) and the exact message of each
 * refusal, which names the file, the line and the bad text. */
#include <stdio.h>
#include <string.h>

#include "ftl/core.h"
#include "ftl_test.h"
#include "launcher/hostfile.h"

static const char *parse_err(const char *text) {
  static ftl_diag d;
  ln_hostfile_host *hosts = NULL;
  size_t count = 0;
  memset(&d, 0, sizeof d);
  ftl_err rc = ln_hostfile_parse(text, strlen(text), "hosts.txt", &hosts, &count, &d);
  if (rc != FTL_ERR_SPEC) FTL_TEST_FAIL_("<<%s>> gave %s, expected FTL_ERR_SPEC", text, ftl_err_name(rc));
  CHECK(hosts == NULL && count == 0);
  return d.msg;
}

static void test_good(void) {
  const char *text = "# the cluster\n"
                     "node1 slots=8\n"
                     "\n"
                     "  node2.example.com   slots=4 max_slots=16   # the big one\n"
                     "10.0.0.3\t# one slot\r\n"
                     "::1 max_slots=2\n"
                     "n_5";
  ln_hostfile_host *hosts = NULL;
  size_t count = 0;
  ftl_diag d = {{0}};
  CHECK_OK(ln_hostfile_parse(text, strlen(text), "hosts.txt", &hosts, &count, &d), d.msg);
  CHECK_INT_EQ(count, 5);
  CHECK_STR_EQ(hosts[0].name, "node1");
  CHECK_INT_EQ(hosts[0].slots, 8);
  CHECK_INT_EQ(hosts[0].max_slots, 0);
  CHECK_INT_EQ(hosts[0].line_no, 2);
  CHECK_STR_EQ(hosts[1].name, "node2.example.com");
  CHECK_STR_EQ(hosts[1].line, "node2.example.com   slots=4 max_slots=16");
  CHECK_INT_EQ(hosts[1].slots, 4);
  CHECK_INT_EQ(hosts[1].max_slots, 16);
  CHECK_STR_EQ(hosts[2].name, "10.0.0.3");
  CHECK_INT_EQ(hosts[2].slots, 1);
  CHECK_STR_EQ(hosts[3].name, "::1");
  CHECK_INT_EQ(hosts[3].slots, 1);
  CHECK_STR_EQ(hosts[4].name, "n_5");
  CHECK_INT_EQ(hosts[4].line_no, 7);
  CHECK_INT_EQ(ln_hostfile_total_slots(hosts, count), 8 + 4 + 1 + 1 + 1);
  ftl_free(hosts);
}

static void test_refused(void) {
  CHECK_STR_EQ(parse_err(""), "hostfile hosts.txt: names no host (the file is empty); expected lines like 'node1 slots=8'");
  CHECK_STR_EQ(parse_err("# only\n\n  \n"),
               "hostfile hosts.txt: names no host (only blank lines and comments); expected lines like 'node1 slots=8'");
  CHECK_STR_EQ(parse_err("node1\n!!garbage@@ x\n"),
               "hostfile hosts.txt:2: expected a host name or address (then slots=N, max_slots=N), got '!!garbage@@'");
  CHECK_STR_EQ(parse_err("slots=4\n"),
               "hostfile hosts.txt:1: expected a host name or address (then slots=N, max_slots=N), got 'slots=4'");
  CHECK_STR_EQ(parse_err("node1 cpus=4\n"), "hostfile hosts.txt:1: unknown option 'cpus=4' (expected slots=N or max_slots=N)");
  CHECK_STR_EQ(parse_err("node1 slots = 4\n"), "hostfile hosts.txt:1: unknown option 'slots' (expected slots=N or max_slots=N)");
  CHECK_STR_EQ(parse_err("node1 slots=four\n"), "hostfile hosts.txt:1: slots: expected an integer from 1 to 1048576, got 'slots=four'");
  CHECK_STR_EQ(parse_err("node1 slots=0\n"), "hostfile hosts.txt:1: slots: expected an integer from 1 to 1048576, got 'slots=0'");
  CHECK_STR_EQ(parse_err("node1 slots=+4\n"), "hostfile hosts.txt:1: slots: expected an integer from 1 to 1048576, got 'slots=+4'");
  CHECK_STR_EQ(parse_err("node1 slots=\n"), "hostfile hosts.txt:1: unknown option 'slots=' (expected slots=N or max_slots=N)");
  CHECK_STR_EQ(parse_err("node1 max_slots=99999999999999999999\n"),
               "hostfile hosts.txt:1: max_slots: expected an integer from 1 to 1048576, got 'max_slots=99999999999999999999'");
  CHECK_STR_EQ(parse_err("node1 slots=2 slots=3\n"), "hostfile hosts.txt:1: 'slots=3' given twice for host node1");
  CHECK_STR_EQ(parse_err("node1 slots=8 max_slots=4\n"), "hostfile hosts.txt:1: max_slots=4 is less than slots=8 for host node1");
  CHECK_STR_EQ(parse_err("node1\n# x\nnode1 slots=2\n"),
               "hostfile hosts.txt:3: host node1 is already on line 1; give each host once with all its slots");
  const char with_nul[] = "node1\0 slots=2\n";
  ln_hostfile_host *hosts = NULL;
  size_t count = 0;
  ftl_diag d = {{0}};
  CHECK_INT_EQ(ln_hostfile_parse(with_nul, sizeof with_nul - 1, "hosts.txt", &hosts, &count, &d), FTL_ERR_SPEC);
  CHECK_STR_EQ(d.msg, "hostfile hosts.txt:1: control character (byte 0x00) in 'node1\\x00 slots=2'; a hostfile is text");
  CHECK_STR_EQ(parse_err("n\xc3\xa9ud\n"),
               "hostfile hosts.txt:1: expected a host name or address (then slots=N, max_slots=N), got 'n\\xc3\\xa9ud'");
  char long_line[1100];
  memset(long_line, 'n', 1024);
  long_line[1024] = '\0';
  CHECK_STR_CONTAINS(parse_err(long_line), "hostfile hosts.txt:1: line longer than 1023 bytes: 'nnnnn");
  char long_name[300];
  memset(long_name, 'a', 256);
  long_name[256] = '\0';
  CHECK_STR_CONTAINS(parse_err(long_name), "hostfile hosts.txt:1: expected a host name or address");
}

static void test_read(void) {
  ln_hostfile_host *hosts = NULL;
  size_t count = 0;
  ftl_diag d = {{0}};
  CHECK_INT_EQ(ln_hostfile_read("/nonexistent/hosts", &hosts, &count, &d), FTL_ERR_NOTFOUND);
  CHECK_STR_EQ(d.msg, "cannot read hostfile /nonexistent/hosts: No such file or directory");
  CHECK_INT_EQ(ln_hostfile_read("/", &hosts, &count, &d), FTL_ERR_IO);
  CHECK_STR_CONTAINS(d.msg, "cannot read hostfile /: ");
}

int main(void) {
  test_good();
  test_refused();
  test_read();
  printf("hostfile: all tests passed\n");
  return 0;
}
