/* bench/launch/bench_launch.c: `bench-launch`, the launch benchmark, run by hand (not in ctest):
 *   1. wall time of `ftl run -n 4 -- P` against bare `mpirun -n 4 P` for the same program P
 *      (ftl-allreduce-check, one tiny iteration), alternating, median of N runs each;
 *   2. ftl_allreduce against raw MPI_Allreduce, 1 KiB to 64 MiB (bench-allreduce under mpirun).
 * Prints tables of ratios; the goals are ftl/mpirun <= 1.10 and ftl/MPI bandwidth >= 0.97.
 * Usage: bench-launch [RUNS] (default 15, at least 3), or bench-launch --smoke: the smallest size
 * (one run each, no warm-up, bench-allreduce --smoke), which the test suite runs (tests/bench) to
 * see that it completes and prints its tables; its numbers mean nothing. Expects ftl, mpirun and
 * the programs on PATH. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs argv with stdout/stderr discarded; returns wall seconds, or -1 when it failed. */
static double timed_run(const char *const argv[]) {
  double t0 = now_s();
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    FILE *null = freopen("/dev/null", "w", stdout);
    (void)null;
    null = freopen("/dev/null", "w", stderr);
    (void)null;
    execvp(argv[0], (char *const *)(uintptr_t)argv); /* exec does not write argv */
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  double dt = now_s() - t0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? dt : -1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int runs = 15, smoke = argc > 1 && strcmp(argv[1], "--smoke") == 0;
  if (smoke) {
    runs = 1;
  } else if (argc > 1) {
    char *end = NULL;
    long v = strtol(argv[1], &end, 10);
    if (*argv[1] == '\0' || *end != '\0' || v < 3 || v > 1000) {
      fprintf(stderr, "usage: bench-launch [RUNS (3-1000, default 15)] | bench-launch --smoke\n");
      return 2;
    }
    runs = (int)v;
  }
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  char run_dir[] = "/tmp/ftl-bench-launch-XXXXXX";
  if (!mkdtemp(run_dir)) return 1;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int oversubscribe = cpus < 4;
  /* The same flags ftl passes, so only ftl's own work differs. */
  const char *bare[] = {"mpirun", "--quiet", "-n", "4", oversubscribe ? "--oversubscribe" : "--quiet",
                        oversubscribe ? "--bind-to" : "--quiet", oversubscribe ? "none" : "--quiet",
                        "ftl-allreduce-check", "--iterations", "1", "--max-kib", "1", NULL};
  /* A fresh run directory for every ftl run: a second run into a finished one is refused at once ("already
   * finished", exit 0), which would time nothing. */
  char ftl_dir[sizeof run_dir + 16];
  const char *with_ftl[] = {"ftl", "run", "-n", "4", "--run-dir", ftl_dir, "--", "ftl-allreduce-check", "--iterations",
                            "1", "--max-kib", "1", NULL};
  int ftl_runs = 0;
  double *t_bare = calloc((size_t)runs, sizeof(double)), *t_ftl = calloc((size_t)runs, sizeof(double));
  if (!t_bare || !t_ftl) return 1;
  if (!smoke) {
    timed_run(bare); /* warm the page cache for both */
    snprintf(ftl_dir, sizeof ftl_dir, "%s/%d", run_dir, ftl_runs++);
    timed_run(with_ftl);
  }
  for (int i = 0; i < runs; i++) {
    /* Alternate which goes first, so a drift in machine load favours neither. */
    snprintf(ftl_dir, sizeof ftl_dir, "%s/%d", run_dir, ftl_runs++);
    if (i % 2 == 0) {
      t_bare[i] = timed_run(bare);
      t_ftl[i] = timed_run(with_ftl);
    } else {
      t_ftl[i] = timed_run(with_ftl);
      t_bare[i] = timed_run(bare);
    }
    if (t_bare[i] < 0 || t_ftl[i] < 0) {
      fprintf(stderr, "bench-launch: run %d failed (mpirun %.3f, ftl %.3f)\n", i, t_bare[i], t_ftl[i]);
      return 1;
    }
  }
  qsort(t_bare, (size_t)runs, sizeof(double), cmp_double);
  qsort(t_ftl, (size_t)runs, sizeof(double), cmp_double);
  printf("launch: 4 ranks of ftl-allreduce-check, %d runs each, alternating (seconds)\n", runs);
  printf("%-22s %8s %8s %8s\n", "", "min", "median", "max");
  printf("%-22s %8.3f %8.3f %8.3f\n", "mpirun -n 4", t_bare[0], t_bare[runs / 2], t_bare[runs - 1]);
  printf("%-22s %8.3f %8.3f %8.3f\n", "ftl run -n 4", t_ftl[0], t_ftl[runs / 2], t_ftl[runs - 1]);
  printf("%-22s %8.3f %8.3f %8s   (goal <= 1.10 at the median)\n", "ratio ftl/mpirun", t_ftl[0] / t_bare[0],
         t_ftl[runs / 2] / t_bare[runs / 2], "");
  fflush(stdout);
  char cmd_dir[64];
  snprintf(cmd_dir, sizeof cmd_dir, "rm -rf %s", run_dir);
  if (system(cmd_dir) != 0) fprintf(stderr, "bench-launch: could not remove %s\n", run_dir);

  printf("\n");
  fflush(stdout);
  const char *allreduce[] = {"mpirun", "--quiet", "-n", "2", "bench-allreduce", smoke ? "--smoke" : NULL, NULL};
  pid_t pid = fork();
  if (pid == 0) {
    execvp(allreduce[0], (char *const *)(uintptr_t)allreduce);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  free(t_bare);
  free(t_ftl);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
