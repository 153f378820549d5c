/* tests/launcher/test_slurm_alloc.c: a Slurm allocation read as a host plan (launcher/slurm_alloc.c):
 * the hostlist syntax expanded (ranges, zero padding, several groups, several items), the tasks per
 * node given to each node, the exact message of each refusal (naming the variable and the text),
 * srun's task layout for an attempt's plan (hosts left out skipped, slot by slot), and the JobState
 * read from scontrol's output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftl/core.h"
#include "ftl_test.h"
#include "launcher/slurm_alloc.h"

/* The nodes of (list, tasks) as "name:tasks,..." */
static const char *expand(const char *list, const char *tasks) {
  static char out[4096];
  ln_slurm_node *nodes = NULL;
  size_t count = 0;
  ftl_diag d = {{0}};
  CHECK_OK(ln_slurm_nodes_parse(list, tasks, &nodes, &count, &d), d.msg);
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < count && used + 300 < sizeof out; i++)
    used += (size_t)snprintf(out + used, sizeof out - used, "%s%s:%d", i ? "," : "", nodes[i].name, nodes[i].tasks);
  ftl_free(nodes);
  return out;
}

static const char *refused(const char *list, const char *tasks) {
  static ftl_diag d;
  ln_slurm_node *nodes = NULL;
  size_t count = 0;
  memset(&d, 0, sizeof d);
  ftl_err rc = ln_slurm_nodes_parse(list, tasks, &nodes, &count, &d);
  if (rc != FTL_ERR_SPEC) FTL_TEST_FAIL_("<<%s>> <<%s>> gave %s, expected FTL_ERR_SPEC", list, tasks, ftl_err_name(rc));
  CHECK(nodes == NULL && count == 0);
  return d.msg;
}

static void test_expand(void) {
  CHECK_STR_EQ(expand("node1", "8"), "node1:8");
  CHECK_STR_EQ(expand("ftl123-h[1-4]", "2(x4)"), "ftl123-h1:2,ftl123-h2:2,ftl123-h3:2,ftl123-h4:2");
  CHECK_STR_EQ(expand("gpu[01-03,07],login2", "2(x3),1,4"), "gpu01:2,gpu02:2,gpu03:2,gpu07:1,login2:4");
  CHECK_STR_EQ(expand("n[8-10]", "1(x3)"), "n8:1,n9:1,n10:1");
  CHECK_STR_EQ(expand("r[1-2]-n[1-2].x", "1(x2),3(x2)"), "r1-n1.x:1,r1-n2.x:1,r2-n1.x:3,r2-n2.x:3");
  CHECK_STR_EQ(expand("a,b_c,d.e", "1,2,3"), "a:1,b_c:2,d.e:3");
  CHECK_STR_EQ(expand("n[009-011]", "1(x3)"), "n009:1,n010:1,n011:1");
  CHECK_INT_EQ(ln_slurm_tasks_on_node("2(x3),1", 0), 2);
  CHECK_INT_EQ(ln_slurm_tasks_on_node("2(x3),1", 2), 2);
  CHECK_INT_EQ(ln_slurm_tasks_on_node("2(x3),1", 3), 1);
  CHECK_INT_EQ(ln_slurm_tasks_on_node("2(x3),1", 4), -1);
  CHECK_INT_EQ(ln_slurm_tasks_on_node("2(x3", 0), -1);
  CHECK_INT_EQ(ln_slurm_tasks_on_node(NULL, 0), -1);
}

static void test_refused(void) {
  CHECK_STR_EQ(refused("gpu[1-", "1"), "SLURM_JOB_NODELIST 'gpu[1-': a '[' without its ']'");
  CHECK_STR_EQ(refused("gpu1]", "1"), "SLURM_JOB_NODELIST 'gpu1]': a ']' without its '['");
  CHECK_STR_EQ(refused("gpu[3-1]", "1"), "SLURM_JOB_NODELIST 'gpu[3-1]': a range in brackets ends before it starts");
  CHECK_STR_EQ(refused("gpu[a-b]", "1"),
               "SLURM_JOB_NODELIST 'gpu[a-b]': a range in brackets is not N or N-M (up to 9 digits each)");
  CHECK_STR_EQ(refused("gpu[1,]", "1"),
               "SLURM_JOB_NODELIST 'gpu[1,]': a range in brackets is not N or N-M (up to 9 digits each)");
  CHECK_STR_EQ(refused("gpu[]", "1"), "SLURM_JOB_NODELIST 'gpu[]': empty brackets");
  CHECK_STR_EQ(refused("a,,b", "1(x3)"), "SLURM_JOB_NODELIST 'a,,b': an empty node name");
  CHECK_STR_EQ(refused("", "1"), "SLURM_JOB_NODELIST '': names no node");
  CHECK_STR_EQ(refused("a b", "1"),
               "SLURM_JOB_NODELIST 'a b': a node name holds a character other than a letter, a digit, '.', '-' or '_'");
  CHECK_STR_EQ(refused("n[1-2],n2", "1(x3)"), "SLURM_JOB_NODELIST 'n[1-2],n2': names node n2 twice");
  CHECK_STR_EQ(refused("n[1-999999999]", "1"), "SLURM_JOB_NODELIST 'n[1-999999999]': names more than 65536 nodes");
  CHECK_STR_EQ(refused("n[1][1][1][1][1][1][1][1][1]", "1"),
               "SLURM_JOB_NODELIST 'n[1][1][1][1][1][1][1][1][1]': more than 8 bracketed ranges in one node name");
  CHECK_STR_EQ(refused("n[1-4]", "2(x3)"), "SLURM_TASKS_PER_NODE '2(x3)': covers 3 nodes, but SLURM_JOB_NODELIST names 4");
  CHECK_STR_EQ(refused("n[1-2]", "2(x3"), "SLURM_TASKS_PER_NODE '2(x3': expected counts such as 2(x3),1");
  CHECK_STR_EQ(refused("n[1-2]", "0,1"), "SLURM_TASKS_PER_NODE '0,1': a node's count of tasks is not from 1 to 1048576");
  CHECK_STR_EQ(refused("n[1-2]", "1,"), "SLURM_TASKS_PER_NODE '1,': expected counts such as 2(x3),1");
  CHECK_STR_EQ(refused("n1", NULL), "SLURM_TASKS_PER_NODE is not set");
  char long_name[300] = "n";
  memset(long_name + 1, 'a', 260);
  long_name[261] = '\0';
  CHECK_STR_CONTAINS(refused(long_name, "1"), "a node name longer than 255 bytes");
}

static void test_write_tasks(void) {
  char dir[] = "/tmp/ftl-test-slurm-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char hostfile[128], tasks[128];
  snprintf(hostfile, sizeof hostfile, "%s/hostfile", dir);
  snprintf(tasks, sizeof tasks, "%s/hostfile.tasks", dir);
  const char *plan = "# written by ftl\nh1 slots=2\n# left out: h2 slots=2\nh3 slots=2\nh4 slots=2\n";
  ftl_diag d = {{0}};
  CHECK_OK(ftl_write_file_atomic(hostfile, plan, strlen(plan), &d), d.msg);
  int nodes = 0;
  char first[64];
  CHECK_OK(ln_slurm_write_tasks(hostfile, 5, tasks, &nodes, first, sizeof first, &d), d.msg);
  CHECK_INT_EQ(nodes, 3);
  CHECK_STR_EQ(first, "h1");
  char *text = NULL;
  size_t len = 0;
  CHECK_OK(ftl_read_file(tasks, 4096, &text, &len, &d), d.msg);
  CHECK_STR_EQ(text, "h1\nh1\nh3\nh3\nh4\n");
  ftl_free(text);
  CHECK_INT_EQ(ln_slurm_write_tasks(hostfile, 7, tasks, &nodes, first, sizeof first, &d), FTL_ERR_SPEC);
  CHECK_STR_CONTAINS(d.msg, "hold 1 fewer slots than the attempt's 7 ranks");
  unlink(tasks);
  unlink(hostfile);
  rmdir(dir);
}

static void test_job_state(void) {
  char state[32];
  const char *line = "JobId=7 JobName=ftl-finetune UserId=root(0) JobState=COMPLETING Reason=None Dependency=(null)";
  CHECK_INT_EQ(ln_slurm_parse_job_state(line, strlen(line), state, sizeof state), 0);
  CHECK_STR_EQ(state, "COMPLETING");
  const char *first = "JobState=RUNNING Reason=None";
  CHECK_INT_EQ(ln_slurm_parse_job_state(first, strlen(first), state, sizeof state), 0);
  CHECK_STR_EQ(state, "RUNNING");
  const char *none = "slurm_load_jobs error: Invalid job id specified";
  CHECK_INT_EQ(ln_slurm_parse_job_state(none, strlen(none), state, sizeof state), -1);
  const char *glued = "XJobState=RUNNING";
  CHECK_INT_EQ(ln_slurm_parse_job_state(glued, strlen(glued), state, sizeof state), -1);
  const char *empty = "JobId=7 JobState= Reason=x";
  CHECK_INT_EQ(ln_slurm_parse_job_state(empty, strlen(empty), state, sizeof state), -1);
}

int main(void) {
  test_expand();
  test_refused();
  test_write_tasks();
  test_job_state();
  printf("slurm_alloc: all tests passed\n");
  return 0;
}
