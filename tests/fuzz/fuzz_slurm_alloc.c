/* tests/fuzz/fuzz_slurm_alloc.c: libFuzzer harness for the Slurm allocation's parsers
 * (launcher/slurm_alloc.c): the bytes up to the first newline are SLURM_JOB_NODELIST, the rest
 * SLURM_TASKS_PER_NODE; all of them are also scontrol's output, whose JobState is read.
 *
 * Any bytes must give either nodes that keep the promises of slurm_alloc.h (at least one, at most
 * LN_SLURM_MAX_NODES, each with a valid name of 1..LN_SLURM_NAME_MAX bytes and 1..1048576 tasks, no
 * name twice, each node's tasks what ln_slurm_tasks_on_node says) or an error with a message, never
 * a crash, a leak or a hang. Broken promises trap so the fuzzer keeps the input. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ftl/core.h"
#include "launcher/slurm_alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0; /* the parsers' own bounds are tested by the unit test */
  /* The same bytes as scontrol's output: a state, if any, is 1..31 capital letters or '_'. */
  char state[32];
  if (ln_slurm_parse_job_state((const char *)data, size, state, sizeof state) == 0) {
    size_t n = strnlen(state, sizeof state);
    require(n >= 1 && n <= 31);
    for (size_t k = 0; k < n; k++) require((state[k] >= 'A' && state[k] <= 'Z') || state[k] == '_');
  }
  char buf[4098];
  memcpy(buf, data, size);
  buf[size] = '\0';
  char *nl = memchr(buf, '\n', size);
  const char *tasks = "1";
  if (nl) {
    *nl = '\0';
    tasks = nl + 1;
  }
  ln_slurm_node *nodes = NULL;
  size_t count = 0;
  ftl_diag d = {{0}};
  ftl_err rc = ln_slurm_nodes_parse(buf, tasks, &nodes, &count, &d);
  if (rc != FTL_OK) {
    require(nodes == NULL && count == 0);
    require(d.msg[0] != '\0');
    require(memchr(d.msg, '\0', sizeof d.msg) != NULL);
    return 0;
  }
  require(nodes != NULL && count >= 1 && count <= LN_SLURM_MAX_NODES);
  for (size_t i = 0; i < count; i++) {
    size_t len = strnlen(nodes[i].name, sizeof nodes[i].name);
    require(len >= 1 && len <= LN_SLURM_NAME_MAX);
    require(nodes[i].tasks >= 1 && nodes[i].tasks <= 1048576);
    require(ln_slurm_tasks_on_node(tasks, (int)i) == nodes[i].tasks);
    for (size_t k = 0; k < len; k++) require(nodes[i].name[k] != ',' && nodes[i].name[k] != '[');
    if (count < 256)
      for (size_t j = 0; j < i; j++) require(strcmp(nodes[j].name, nodes[i].name) != 0);
  }
  ftl_free(nodes);
  return 0;
}
