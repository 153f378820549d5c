/* tests/launcher/test_pyprog.c: which programs launcher/pyprog.c runs through pyrun.py, and the
 * command line it makes for them (word by word), and why it refuses the others. It builds a small
 * tree of its own: BIN/ftl, SHARE/ftl/pyrun.py, scripts with and without a Python #! line. No
 * process is started. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftl/core.h"
#include "ftl_test.h"
#include "launcher/jobspec.h"
#include "launcher/pyprog.h"

static char root[] = "/tmp/ftl-test-pyprog-XXXXXX";
static char exe[512], runner[512];

static void write_file(const char *rel, const char *text, int mode) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  fputs(text, f);
  fclose(f);
  chmod(path, (mode_t)mode);
}

/* plan(program, "ARGS split at spaces") and the joined result: the argv with single spaces, or
 * "refused: WHY", or "not python". */
static const char *plan(const char *program, const char *words) {
  static char out[2048];
  char copy[512], *args[32];
  int n = 0;
  snprintf(copy, sizeof copy, "%s", words);
  for (char *w = strtok(copy, " "); w && n < 31; w = strtok(NULL, " ")) args[n++] = w;
  args[n] = NULL;
  ln_pyprog p;
  ftl_diag d = {{0}};
  CHECK_OK(ln_pyprog_plan(program, args, exe, root, &p, &d), d.msg);
  if (!p.is_python) {
    snprintf(out, sizeof out, "not python");
  } else if (!p.argv) {
    snprintf(out, sizeof out, "refused: %s", p.why_not);
  } else {
    size_t used = 0;
    out[0] = '\0';
    for (char **a = p.argv; *a && used < sizeof out - 1; a++)
      used += (size_t)snprintf(out + used, sizeof out - used, "%s%s", used ? " " : "", !strcmp(*a, runner) ? "RUNNER" : *a);
  }
  ln_pyprog_free(&p);
  return out;
}

int main(void) {
  CHECK(mkdtemp(root) != NULL);
  char dir[600];
  snprintf(dir, sizeof dir, "%s/bin", root);
  CHECK(mkdir(dir, 0755) == 0);
  snprintf(dir, sizeof dir, "%s/share", root);
  CHECK(mkdir(dir, 0755) == 0);
  snprintf(dir, sizeof dir, "%s/share/ftl", root);
  CHECK(mkdir(dir, 0755) == 0);
  snprintf(exe, sizeof exe, "%s/bin/ftl", root);
  snprintf(runner, sizeof runner, "%s/bin/../share/ftl/pyrun.py", root);
  write_file("share/ftl/pyrun.py", "# the runner\n", 0644);
  write_file("train.py", "import sys\n", 0644);
  write_file("shebang.py", "#!/usr/bin/python3 -u\nprint(1)\n", 0755);
  write_file("envbang.py", "#!/usr/bin/env python3\nprint(1)\n", 0755);
  write_file("envopts.py", "#!/usr/bin/env -S python3 -u\nprint(1)\n", 0755);
  write_file("badopt.py", "#!/usr/bin/python3 -I\nprint(1)\n", 0755);
  write_file("run.sh", "#!/bin/sh\necho hi\n", 0755);

  /* Interpreters by name, with the options passed on and the script as given. */
  CHECK_STR_EQ(plan("/usr/bin/python3", "train.py --steps 3"), "/usr/bin/python3 RUNNER train.py --steps 3");
  CHECK_STR_EQ(plan("/venv/bin/python", "-u -X dev -Wignore train.py"),
               "/venv/bin/python -u -X dev -Wignore RUNNER train.py");
  CHECK_STR_EQ(plan("/usr/bin/python3.11", "-OB -m pkg.train -m x"),
               "/usr/bin/python3.11 -OB RUNNER -m pkg.train -m x");
  CHECK_STR_EQ(plan("/usr/bin/python3", "-mpkg.train a"), "/usr/bin/python3 RUNNER -m pkg.train a");
  /* Scripts with a Python #! line: the interpreter it names (env: found on PATH), its one option. */
  char prog[600];
  snprintf(prog, sizeof prog, "%s/shebang.py", root);
  char want[1400];
  snprintf(want, sizeof want, "/usr/bin/python3 -u RUNNER %s a", prog);
  CHECK_STR_EQ(plan(prog, "a"), want);
  snprintf(prog, sizeof prog, "%s/envbang.py", root);
  const char *got = plan(prog, "b");
  CHECK(strncmp(got, "/", 1) == 0 && strstr(got, "python3 RUNNER ") && strstr(got, "envbang.py b"));
  /* Refused, with why: what pyrun.py cannot run as the interpreter would. */
  CHECK_STR_CONTAINS(plan("/usr/bin/python3", "-c print(1)"), "refused: '-c': `-c CODE`");
  CHECK_STR_CONTAINS(plan("/usr/bin/python3", "- x"), "read from stdin");
  CHECK_STR_CONTAINS(plan("/usr/bin/python3", "-I train.py"), "isolated mode");
  CHECK_STR_CONTAINS(plan("/usr/bin/python3", "-i train.py"), "interactive");
  CHECK_STR_CONTAINS(plan("/usr/bin/python3", "--check-hash-based-pycs always train.py"), "long interpreter option");
  CHECK_STR_CONTAINS(plan("/usr/bin/python3", "-X"), "without its value");
  CHECK_STR_CONTAINS(plan("/usr/bin/python3", "-um pkg"), "flags and -m in one word");
  CHECK_STR_CONTAINS(plan("/usr/bin/python3", "missing.py"), "is not a regular file");
  CHECK_STR_CONTAINS(plan("/usr/bin/python3", "share"), "is not a regular file");
  CHECK_STR_EQ(plan("/usr/bin/python3", ""), "refused: no script named (an interactive interpreter)");
  snprintf(prog, sizeof prog, "%s/envopts.py", root);
  CHECK_STR_CONTAINS(plan(prog, ""), "not python"); /* env -S: its interpreter is not a plain name */
  snprintf(prog, sizeof prog, "%s/badopt.py", root);
  CHECK_STR_CONTAINS(plan(prog, ""), "the #! line's option '-I'");
  /* Not Python: as it is, nothing said. */
  snprintf(prog, sizeof prog, "%s/run.sh", root);
  CHECK_STR_EQ(plan(prog, ""), "not python");
  CHECK_STR_EQ(plan("/usr/bin/pythonic", "train.py"), "not python");
  /* No runner beside ftl: said. */
  snprintf(exe, sizeof exe, "%s/nowhere/ftl", root);
  CHECK_STR_CONTAINS(plan("/usr/bin/python3", "train.py"), "refused: no launcher runner at");

  /* restart.preload's names. */
  CHECK(ln_job_module_name_ok("torch"));
  CHECK(ln_job_module_name_ok("transformers.models.llama"));
  CHECK(ln_job_module_name_ok("_socket"));
  CHECK(!ln_job_module_name_ok(""));
  CHECK(!ln_job_module_name_ok("a..b"));
  CHECK(!ln_job_module_name_ok(".a"));
  CHECK(!ln_job_module_name_ok("a."));
  CHECK(!ln_job_module_name_ok("1abc"));
  CHECK(!ln_job_module_name_ok("a.2b"));
  CHECK(!ln_job_module_name_ok("os; rm -rf"));
  CHECK(!ln_job_module_name_ok("a,b"));
  ftl_test_rm_rf(root);
  printf("ok\n");
  return 0;
}
