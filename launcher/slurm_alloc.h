/* launcher/slurm_alloc.h: the Slurm allocation ftl runs in, read as a host plan (docs/fault-tolerance.md,
 * "Under Slurm"): the nodes of SLURM_JOB_NODELIST, in Slurm's hostlist syntax ("gpu[01-03,07],login2",
 * expanded here), each with the tasks SLURM_TASKS_PER_NODE gives it ("2(x3),1"). run.c plans every
 * attempt on these nodes as on a hostfile's hosts (a lost node left out, a spare node taking its
 * place, min_ranks deciding when none is left), and srun places each attempt's ranks exactly as the
 * plan says (ln_slurm_write_tasks: srun's arbitrary distribution).
 *
 * Also what Slurm says of the job now (ln_slurm_job_state: `scontrol show job`), asked before a
 * relaunch: Slurm ending the job is no failure to restart from.
 *
 * Slurm's variables and scontrol's output are outside bytes: the parsers are strict (a message
 * names the variable and the text at fault) and fuzzed (tests/fuzz/fuzz_slurm_alloc.c). Pure but
 * for ln_slurm_alloc_from_env (reads the environment), ln_slurm_write_tasks (reads the plan, writes
 * one file) and ln_slurm_job_state (runs scontrol). */
#ifndef FTL_LAUNCHER_SLURM_ALLOC_H
#define FTL_LAUNCHER_SLURM_ALLOC_H

#include <stddef.h>

#include "ftl/error.h"

/* The most nodes one allocation may name here: 16,384 hosts of 8 ranks is the launcher's largest
 * measured gang (docs/scale.md); this leaves room beyond it. */
#define LN_SLURM_MAX_NODES 65536
/* The longest variable read (SLURM_JOB_NODELIST is compressed: even the largest clusters' lists
 * are a few kilobytes). */
#define LN_SLURM_VAR_MAX 65536
#define LN_SLURM_NAME_MAX 255 /* a node name, as a DNS name */

typedef struct ln_slurm_node {
  char name[LN_SLURM_NAME_MAX + 1];
  int tasks; /* tasks Slurm allocated on it, >= 1 */
} ln_slurm_node;

/* Expands nodelist (Slurm's hostlist syntax: names separated by commas, each with any number of
 * bracketed ranges "[1-3,07]", zero-padded to the width of the low bound as written) and gives each
 * node its count from tasks_per_node ("N" or "N(xM)", separated by commas, covering every node).
 * *nodes_out (ftl_free) gets *count_out >= 1 distinct nodes in the list's order. Errors
 * (FTL_ERR_SPEC), each naming the variable and the text at fault:
 *   "SLURM_JOB_NODELIST 'gpu[1-': a '[' without its ']'"
 *   "SLURM_TASKS_PER_NODE '2(x3)' covers 3 nodes, but SLURM_JOB_NODELIST names 4"
 * FTL_ERR_NOMEM when out of memory. */
ftl_err ln_slurm_nodes_parse(const char *nodelist, const char *tasks_per_node, ln_slurm_node **nodes_out,
                             size_t *count_out, ftl_diag *d);

/* The tasks on node node_id (from 0) of tasks_per_node ("2(x3),1"), or -1 when the text is not
 * Slurm's or has no such node. What a rank agent reads for its local world size. */
int ln_slurm_tasks_on_node(const char *tasks_per_node, int node_id);

/* The allocation this process runs in (SLURM_JOB_NODELIST, or SLURM_NODELIST where an older Slurm
 * sets only that; SLURM_TASKS_PER_NODE), as ln_slurm_nodes_parse gives it. FTL_ERR_NOTFOUND
 * when the variables are not set (not inside an allocation). */
ftl_err ln_slurm_alloc_from_env(ln_slurm_node **nodes_out, size_t *count_out, ftl_diag *d);

/* srun's task layout for an attempt: the plan (hostfile, an attempt's as run.c writes it: hosts left
 * out are comments) filled slot by slot in order, as mpirun fills a hostfile, up to world ranks;
 * one node name per task, written to tasks_path (srun's SLURM_HOSTFILE with
 * --distribution=arbitrary: rank i runs on line i's node). *nodes_out: how many nodes the ranks
 * use (srun's --nodes); first_node (size bytes) gets rank 0's node. FTL_ERR_SPEC when the hosts
 * left hold fewer than world slots. */
ftl_err ln_slurm_write_tasks(const char *hostfile, int world, const char *tasks_path, int *nodes_out,
                             char *first_node, size_t size, ftl_diag *d);

/* The JobState of `scontrol show job -o` output (text, len bytes: the first " JobState=" or one at
 * the start), e.g. "RUNNING", "COMPLETING", "PENDING", into state (size bytes). 0, or -1 when the
 * text names none, or one that is not capital letters and '_' (at most 31). */
int ln_slurm_parse_job_state(const char *text, size_t len, char *state, size_t size);

/* What Slurm says of job job_id now: `scontrol show job -o JOBID`, run with a deadline of
 * timeout_ms (then killed), its JobState in state. FTL_ERR_NOTFOUND when scontrol cannot be run or
 * says no state, FTL_ERR_TIMEOUT when it did not answer in time. */
ftl_err ln_slurm_job_state(const char *job_id, int timeout_ms, char *state, size_t size, ftl_diag *d);

#endif
