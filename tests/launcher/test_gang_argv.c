/* tests/launcher/test_gang_argv.c: the mpirun/srun command lines ftl builds, checked word by word,
 * and the program lookup. No process is launched here. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftl/core.h"
#include "ftl_test.h"
#include "core/proc.h"
#include "launcher/gang.h"

static int has_seq(char **argv, const char *a, const char *b) {
  for (char **p = argv; *p; p++)
    if (!strcmp(*p, a) && (!b || (p[1] && !strcmp(p[1], b)))) return 1;
  return 0;
}

static int index_of(char **argv, const char *a) {
  for (int i = 0; argv[i]; i++)
    if (!strcmp(argv[i], a)) return i;
  return -1;
}

int main(void) {
  ftl_diag d = {{0}};
  static char arg0[] = "--iterations", arg1[] = "3", exp0[] = "FTL_RDZV_ADDR", exp1[] = "MASTER_ADDR";
  char *args[] = {arg0, arg1, NULL};
  char *exports[] = {exp0, exp1, NULL};
  ln_gang_opts o = {.kind = FTL_LAUNCH_MPIRUN,
                     .ranks = 4,
                     .ftl_exe = "/opt/ftl/bin/ftl",
                     .program = "/opt/bin/train",
                     .args = args,
                     .export_names = exports,
                     .running_as_root = 1,
                     .cpu_count = 2,
                     .sigkill_grace_s = 6};
  char **argv = NULL;
  CHECK_OK(ln_gang_build_argv(&o, &argv, &d), d.msg);
  CHECK_STR_EQ(argv[0], "mpirun");
  CHECK(has_seq(argv, "-n", "4"));
  CHECK(has_seq(argv, "--allow-run-as-root", NULL));
  CHECK(has_seq(argv, "--oversubscribe", NULL)); /* 4 ranks on 2 cores */
  CHECK(has_seq(argv, "odls_base_sigkill_timeout", "6"));
  CHECK(has_seq(argv, "-x", "FTL_RDZV_ADDR"));
  CHECK(has_seq(argv, "-x", "MASTER_ADDR"));
  /* The agent comes before the program, and the program's own arguments are passed verbatim. */
  int agent = index_of(argv, "rank-agent");
  CHECK(agent > 0);
  CHECK_STR_EQ(argv[agent - 1], "/opt/ftl/bin/ftl");
  CHECK_STR_EQ(argv[agent + 1], "--");
  CHECK_STR_EQ(argv[agent + 2], "/opt/bin/train");
  CHECK_STR_EQ(argv[agent + 3], "--iterations");
  CHECK_STR_EQ(argv[agent + 4], "3");
  CHECK(argv[agent + 5] == NULL);
  ln_argv_free(argv);

  /* The agent's own binary, when there is one, runs in its place: the same arguments after "--". */
  o.agent_exe = "/opt/ftl/libexec/ftl/ftl-rank-agent";
  CHECK_OK(ln_gang_build_argv(&o, &argv, &d), d.msg);
  CHECK(index_of(argv, "rank-agent") < 0);
  agent = index_of(argv, "/opt/ftl/libexec/ftl/ftl-rank-agent");
  CHECK(agent > 0);
  CHECK_STR_EQ(argv[agent + 1], "--");
  CHECK_STR_EQ(argv[agent + 2], "/opt/bin/train");
  ln_argv_free(argv);
  o.agent_exe = NULL;
  /* Found beside ftl (the build tree), else in ../libexec/ftl/ (installed); neither: NULL. */
  {
    char dir[] = "/tmp/ftl-agent-exe.XXXXXX", path[4096], bin[4200], buf[4096];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/bin", dir);
    CHECK(mkdir(path, 0755) == 0);
    snprintf(bin, sizeof bin, "%s/bin/ftl", dir);
    CHECK(ln_gang_agent_exe(bin, buf, sizeof buf) == NULL);
    snprintf(path, sizeof path, "%s/libexec", dir);
    CHECK(mkdir(path, 0755) == 0);
    snprintf(path, sizeof path, "%s/libexec/ftl", dir);
    CHECK(mkdir(path, 0755) == 0);
    snprintf(path, sizeof path, "%s/libexec/ftl/ftl-rank-agent", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    CHECK(ln_gang_agent_exe(bin, buf, sizeof buf) == NULL); /* not executable */
    CHECK(chmod(path, 0755) == 0);
    CHECK(ln_gang_agent_exe(bin, buf, sizeof buf) != NULL);
    CHECK_STR_CONTAINS(buf, "/bin/../libexec/ftl/ftl-rank-agent");
    unlink(path);
    snprintf(path, sizeof path, "%s/libexec/ftl", dir);
    rmdir(path);
    snprintf(path, sizeof path, "%s/libexec", dir);
    rmdir(path);
    snprintf(path, sizeof path, "%s/bin", dir);
    rmdir(path);
    rmdir(dir);
  }

  /* With a hostfile: no oversubscription decided by ftl; the hostfile is passed. Not root. */
  o.hostfile = "hosts.txt";
  o.running_as_root = 0;
  CHECK_OK(ln_gang_build_argv(&o, &argv, &d), d.msg);
  CHECK(has_seq(argv, "--hostfile", "hosts.txt"));
  CHECK(!has_seq(argv, "--oversubscribe", NULL));
  CHECK(!has_seq(argv, "--allow-run-as-root", NULL));
  ln_argv_free(argv);

  /* srun inside Slurm. */
  o.kind = FTL_LAUNCH_SRUN;
  o.hostfile = NULL;
  CHECK_OK(ln_gang_build_argv(&o, &argv, &d), d.msg);
  CHECK_STR_EQ(argv[0], "srun");
  CHECK(has_seq(argv, "--ntasks", "4"));
  CHECK(has_seq(argv, "--kill-on-bad-exit=1", NULL));
  CHECK(!has_seq(argv, "-x", NULL));
  /* Every step shares the allocation's resources (a step stuck on a lost node holds its CPUs). */
  CHECK(has_seq(argv, "--overlap", NULL));
  CHECK(!has_seq(argv, "--nodes", NULL)); /* no plan: srun places the ranks */
  CHECK(!has_seq(argv, "--distribution=arbitrary", NULL));
  ln_argv_free(argv);
  /* A standby's srun too. */
  o.standby = 1;
  CHECK_OK(ln_gang_build_argv(&o, &argv, &d), d.msg);
  CHECK(has_seq(argv, "--overlap", NULL));
  ln_argv_free(argv);
  o.standby = 0;
  /* The allocation's plan: its nodes, each rank where the layout (SLURM_HOSTFILE) puts it. */
  o.srun_nodes = 3;
  CHECK_OK(ln_gang_build_argv(&o, &argv, &d), d.msg);
  CHECK(has_seq(argv, "--nodes", "3"));
  CHECK(has_seq(argv, "--distribution=arbitrary", NULL));
  CHECK(index_of(argv, "--nodes") < index_of(argv, "rank-agent"));
  ln_argv_free(argv);
  o.srun_nodes = 0;

  o.ranks = 0;
  CHECK_INT_EQ(ln_gang_build_argv(&o, &argv, &d), FTL_ERR_INVAL);

  CHECK_INT_EQ(ln_gang_resolve_kind(FTL_LAUNCH_AUTO, "1234"), FTL_LAUNCH_SRUN);
  CHECK_INT_EQ(ln_gang_resolve_kind(FTL_LAUNCH_AUTO, NULL), FTL_LAUNCH_MPIRUN);
  CHECK_INT_EQ(ln_gang_resolve_kind(FTL_LAUNCH_AUTO, ""), FTL_LAUNCH_MPIRUN);
  CHECK_INT_EQ(ln_gang_resolve_kind(FTL_LAUNCH_MPIRUN, "1234"), FTL_LAUNCH_MPIRUN);

  /* Program lookup. */
  char *found = NULL;
  CHECK_OK(core_proc_find_program("sh", "/nonexistent:/bin:/usr/bin", 1, &found, &d), d.msg);
  CHECK(found[0] == '/');
  free(found);
  CHECK_INT_EQ(core_proc_find_program("definitely-not-a-program", "/bin:/usr/bin", 1, &found, &d), FTL_ERR_NOTFOUND);
  CHECK_STR_CONTAINS(d.msg, "definitely-not-a-program");
  CHECK_INT_EQ(core_proc_find_program("./nope/x", "/bin", 1, &found, &d), FTL_ERR_NOTFOUND);
  /* A folder is not a program. */
  CHECK_INT_EQ(core_proc_find_program("/tmp", "/bin", 1, &found, &d), FTL_ERR_NOTFOUND);
  CHECK_STR_CONTAINS(d.msg, "not an executable");
  /* A link named last: kept for the job's program (a venv's bin/python), resolved for the gate's. */
  char ldir[] = "/tmp/ftl-gang-link-XXXXXX", link[PATH_MAX], want[PATH_MAX], target[PATH_MAX];
  CHECK(mkdtemp(ldir) != NULL);
  CHECK(realpath(ldir, want) != NULL);
  CHECK(realpath("/bin/sh", target) != NULL);
  CHECK_OK(ftl_fmt(link, sizeof link, "%s/py", ldir), "link path");
  CHECK(symlink("/bin/sh", link) == 0);
  CHECK_OK(ftl_fmt(want + strlen(want), sizeof want - strlen(want), "/py"), "want path");
  CHECK_OK(core_proc_find_program(link, "/bin", 1, &found, &d), d.msg);
  CHECK_STR_EQ(found, want);
  free(found);
  CHECK_OK(core_proc_find_program(link, "/bin", 0, &found, &d), d.msg);
  CHECK_STR_EQ(found, target);
  free(found);
  CHECK_OK(core_proc_find_program("py", ldir, 1, &found, &d), d.msg);
  CHECK_STR_EQ(found, want);
  free(found);
  unlink(link);
  rmdir(ldir);

  /* Hostfile: the first host, with comments and slots. */
  char path[] = "/tmp/ftl-hostfile-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  const char text[] = "# cluster\n\n  node7 slots=2\nnode8 slots=2\n";
  CHECK(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
  close(fd);
  char host[64];
  CHECK_OK(ln_gang_first_host(path, host, sizeof host, &d), d.msg);
  CHECK_STR_EQ(host, "node7");
  unlink(path);
  CHECK_INT_EQ(ln_gang_first_host(path, host, sizeof host, &d), FTL_ERR_NOTFOUND);
  printf("ok\n");
  return 0;
}
