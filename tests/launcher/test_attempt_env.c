/* tests/launcher/test_attempt_env.c: an attempt's rendezvous token and address reach its ranks
 * through the environment built for that attempt (ln_gang_build_env), never through the
 * launcher's own: after an attempt, a child the launcher starts must not see that attempt's token.
 * The first part checks the builder alone; the second runs two real attempts (mpirun, one rank,
 * /bin/sh) through ln_attempt_run and a later child after each. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftl/core.h"
#include "ftl_test.h"
#include "launcher/gang.h"
#include "launcher/launcher.h"

static int count_name(char **envp, const char *name) {
  int n = 0;
  size_t len = strlen(name);
  for (char **p = envp; *p; p++) n += !strncmp(*p, name, len) && (*p)[len] == '=';
  return n;
}

static void test_builder(void) {
  ftl_diag d = {{0}};
  static char b0[] = "PATH=/usr/bin:/bin", b1[] = "FTL_RDZV_TOKEN=stale-from-elsewhere", b2[] = "HOME=/root",
              b3[] = "MASTER_PORT=1", b4[] = "FTL_JOB_ENV_STALE=from-another-job";
  char *base[] = {b0, b1, b2, b3, b4, NULL};
  static char j0[] = "OMP_NUM_THREADS=1", j1[] = "PATH=/nonexistent";
  char *job_env[] = {j0, j1, NULL};
  ln_gang_env e = {.rdzv_addr = "127.0.0.1:4000", .rdzv_token = "tok-a0", .rdzv_timeout_ms = 5000,
                    .run_dir = "/runs/x", .attempt_dir = "/runs/x/attempt-0000", .attempt = 0, .job_name = "x",
                    .spec_hash = "", .kill_grace_ms = 2000, .node_timeout_ms = 10000, .preempt_grace_ms = 30000,
                    .master_addr = "n0", .master_port = 29500, .job_env = job_env, .allow_root = 1,
                    .mpi_session_base = "/tmp/ftl-mpirun-abc123"};
  char **envp = NULL;
  CHECK_OK(ln_gang_build_env(base, &e, &envp, &d), d.msg);
  CHECK_STR_EQ(ln_gang_env_get(envp, "FTL_RDZV_TOKEN"), "tok-a0");
  CHECK_INT_EQ(count_name(envp, "FTL_RDZV_TOKEN"), 1);
  CHECK_STR_EQ(ln_gang_env_get(envp, "FTL_RDZV_ADDR"), "127.0.0.1:4000");
  /* The job's env is carried for the program, not applied to mpirun and the agents. */
  CHECK_STR_EQ(ln_gang_env_get(envp, "PATH"), "/usr/bin:/bin");
  CHECK(ln_gang_env_get(envp, "OMP_NUM_THREADS") == NULL);
  CHECK_STR_EQ(ln_gang_env_get(envp, "FTL_JOB_ENV_OMP_NUM_THREADS"), "1");
  CHECK_STR_EQ(ln_gang_env_get(envp, "FTL_JOB_ENV_PATH"), "/nonexistent");
  CHECK(ln_gang_env_get(envp, "FTL_JOB_ENV_STALE") == NULL); /* inherited from elsewhere: dropped */
  CHECK_STR_EQ(ln_gang_env_get(envp, "MASTER_PORT"), "29500");
  CHECK_INT_EQ(count_name(envp, "MASTER_PORT"), 1);
  /* mpirun exports the carried names to every host. */
  char **names = NULL;
  CHECK_OK(ln_gang_export_names(job_env, &names, &d), d.msg);
  size_t n_names = 0;
  while (names[n_names]) n_names++;
  CHECK_STR_EQ(names[n_names - 2], "FTL_JOB_ENV_OMP_NUM_THREADS");
  CHECK_STR_EQ(names[n_names - 1], "FTL_JOB_ENV_PATH");
  CHECK_STR_EQ(names[0], ln_gang_env_names[0]);
  ln_argv_free(names);
  /* The agent's program gets the job's env back under its own names, after the agent's own, with
   * its place last; nothing of how it travelled. */
  char **prog = NULL;
  static char place0[] = "RANK=3";
  char *place[] = {place0, NULL};
  CHECK_OK(ln_gang_program_env(envp, place, &prog, &d), d.msg);
  CHECK_STR_EQ(ln_gang_env_get(prog, "PATH"), "/nonexistent");
  CHECK_STR_EQ(ln_gang_env_get(prog, "OMP_NUM_THREADS"), "1");
  CHECK_STR_EQ(ln_gang_env_get(prog, "RANK"), "3");
  CHECK_STR_EQ(ln_gang_env_get(prog, "FTL_RDZV_TOKEN"), "tok-a0");
  CHECK_INT_EQ(count_name(prog, "PATH"), 1);
  for (char **p = prog; *p; p++) CHECK(strncmp(*p, "FTL_JOB_ENV_", 12) != 0);
  /* mpirun's session folder is for mpirun: Open MPI refuses a program that inherits it. */
  CHECK(ln_gang_env_get(prog, "OMPI_MCA_orte_local_tmpdir_base") == NULL);
  ln_argv_free(prog);
  CHECK_STR_EQ(ln_gang_env_get(envp, "FTL_FLEET_LEDGER"), "");
  CHECK_STR_EQ(ln_gang_env_get(envp, "OMPI_ALLOW_RUN_AS_ROOT"), "1");
  CHECK_STR_EQ(ln_gang_env_get(envp, "OMPI_MCA_orte_local_tmpdir_base"), "/tmp/ftl-mpirun-abc123");
  for (int i = 0; ln_gang_env_names[i]; i++) CHECK(ln_gang_env_get(envp, ln_gang_env_names[i]) != NULL);
  ln_argv_free(envp);

  /* The next attempt's environment, built from the same base, holds only its own token. */
  e.rdzv_token = "tok-a1";
  e.attempt = 1;
  e.allow_root = 0;
  e.mpi_session_base = NULL;
  CHECK_OK(ln_gang_build_env(base, &e, &envp, &d), d.msg);
  CHECK(ln_gang_env_get(envp, "OMPI_MCA_orte_local_tmpdir_base") == NULL);
  CHECK_STR_EQ(ln_gang_env_get(envp, "FTL_RDZV_TOKEN"), "tok-a1");
  CHECK_STR_EQ(ln_gang_env_get(envp, "FTL_ATTEMPT"), "1");
  CHECK(ln_gang_env_get(envp, "OMPI_ALLOW_RUN_AS_ROOT") == NULL);
  CHECK_STR_EQ(ln_gang_env_get(envp, "FTL_MPI_INIT_BARRIER"), "0"); /* mpirun */
  ln_argv_free(envp);
  /* srun: ftl_init holds the ranks after MPI_Init until all are through it (rdzv_init.c). */
  e.direct_launch = 1;
  CHECK_OK(ln_gang_build_env(base, &e, &envp, &d), d.msg);
  CHECK_STR_EQ(ln_gang_env_get(envp, "FTL_MPI_INIT_BARRIER"), "1");
  ln_argv_free(envp);
  CHECK_STR_EQ(getenv("PATH") ? "set" : "unset", "set"); /* the builder never touched ours */
}

/* What a child started now sees of name ("unset" when absent). */
static void child_sees(const char *name, char *out, size_t size) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "printf '%%s' \"${%s-unset}\"", name);
  FILE *p = popen(cmd, "r");
  CHECK(p != NULL);
  size_t n = fread(out, 1, size - 1, p);
  out[n] = '\0';
  pclose(p);
}

static void read_text(const char *path, char *out, size_t size) {
  char *data = NULL;
  size_t len = 0;
  ftl_diag d = {{0}};
  CHECK_OK(ftl_read_file(path, 4096, &data, &len, &d), d.msg);
  snprintf(out, size, "%.*s", (int)len, data);
  ftl_free(data);
}

/* How many entries a folder holds (-1: it cannot be read). */
static int count_entries(const char *dir) {
  DIR *dp = opendir(dir);
  if (!dp) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(dp));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      fprintf(stderr, "left in TMPDIR: %s\n", e->d_name);
      n++;
    }
  closedir(dp);
  return n;
}

static void test_attempts(void) {
  const char *bin = getenv("FTL_BIN_DIR");
  if (!bin) FTL_SKIP("FTL_BIN_DIR is not set (run under ctest)");
  char ftl_exe[PATH_MAX], tmpl[] = "/tmp/ftl-attempt-env.XXXXXX";
  snprintf(ftl_exe, sizeof ftl_exe, "%s/ftl", bin);
  CHECK(mkdtemp(tmpl) != NULL);
  /* mpirun's session folders go under this TMPDIR, in a folder of the attempt's own that is gone
   * once the attempt is over. */
  char tmpdir[PATH_MAX];
  snprintf(tmpdir, sizeof tmpdir, "%s/tmp", tmpl);
  CHECK(mkdir(tmpdir, 0700) == 0);
  char *old_tmpdir = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
  setenv("TMPDIR", tmpdir, 1);
  ftl_diag d = {{0}};
  ln_job *job = NULL;
  static char a0[] = "/bin/sh", a1[] = "-c",
              a2[] = "printf '%s %s %s' \"$FTL_RDZV_TOKEN\" \"$FTL_RDZV_ADDR\" "
                     "\"${OMPI_MCA_orte_local_tmpdir_base:-unset}\" > \"$FTL_ATTEMPT_DIR/seen.txt\"";
  char *argv[] = {a0, a1, a2, NULL};
  CHECK_OK(ln_job_from_argv(1, 3, argv, &job, &d), d.msg);
  job->rendezvous_timeout_ms = 30000;
  char seen[2][256], child[256];
  for (int attempt = 0; attempt < 2; attempt++) {
    ln_attempt_opts o = {.job = job, .world_size = 1, .run_dir = tmpl, .attempt = attempt, .ftl_exe = ftl_exe,
                          .program = "/bin/sh", .rdzv_bind = "127.0.0.1", .rdzv_host = "127.0.0.1",
                          .kill_grace_ms = 2000, .events = NULL};
    ln_attempt_result res;
    CHECK_OK(ln_attempt_run(&o, &res, &d), d.msg);
    if (res.outcome != FTL_ATTEMPT_SUCCEEDED) FTL_TEST_FAIL_("attempt %d: %s", attempt, res.summary);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/attempt-%04d/seen.txt", tmpl, attempt);
    read_text(path, seen[attempt], sizeof seen[attempt]);
    fprintf(stderr, "attempt %d: the rank saw '%s'\n", attempt, seen[attempt]);
    CHECK(strlen(seen[attempt]) > 20);
    CHECK(strstr(seen[attempt], "127.0.0.1:") != NULL);
    CHECK(strstr(seen[attempt], " unset") != NULL); /* the program never sees mpirun's session folder */
    CHECK_INT_EQ(count_entries(tmpdir), 0);
    /* The launcher's own environment holds nothing of the attempt, so a later child sees nothing. */
    CHECK(getenv("FTL_RDZV_TOKEN") == NULL);
    CHECK(getenv("FTL_RDZV_ADDR") == NULL);
    CHECK(getenv("FTL_ATTEMPT_DIR") == NULL);
    child_sees("FTL_RDZV_TOKEN", child, sizeof child);
    CHECK_STR_EQ(child, "unset");
    child_sees("FTL_RDZV_ADDR", child, sizeof child);
    CHECK_STR_EQ(child, "unset");
  }
  CHECK(strcmp(seen[0], seen[1]) != 0); /* each attempt had its own token and address */
  if (old_tmpdir) setenv("TMPDIR", old_tmpdir, 1);
  else unsetenv("TMPDIR");
  free(old_tmpdir);
  ln_job_destroy(job);
  CHECK_INT_EQ(ftl_test_rm_rf(tmpl), 0);
}

int main(void) {
  unsetenv("FTL_RDZV_TOKEN");
  unsetenv("FTL_RDZV_ADDR");
  unsetenv("FTL_ATTEMPT_DIR");
  test_builder();
  test_attempts();
  printf("ok\n");
  return 0;
}
