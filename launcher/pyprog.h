/* launcher/pyprog.h: whether the job's program is a Python program that the launcher can start
 * through its runner, launcher/pyrun.py, so that a standby can park with the program's modules
 * already imported (docs/fault-tolerance.md, "Warm restarts for Python programs").
 *
 * A Python program is `python3 [OPTIONS] SCRIPT ARGS`, `python3 [OPTIONS] -m MODULE ARGS` (any
 * interpreter named python, python3 or pythonX.Y, a virtual environment's included) or a script
 * whose first line is `#!.../python3 [OPTION]` or `#!/usr/bin/env python3`. The runner is put
 * between the interpreter (with its options) and the script: `python3 -u pyrun.py train.py ARGS`.
 *
 * What cannot run so is said, and the program then runs as it is (restarts are cold unless it
 * calls ftl_init): `-c CODE`, a script read from stdin, `-i`, `-I` and `-P` (they change sys.path or
 * the interpreter's end), interpreter options the runner does not know, a script that is not a
 * regular file (a folder or a zip with __main__.py), no pyrun.py beside ftl. */
#ifndef FTL_LAUNCHER_PYPROG_H
#define FTL_LAUNCHER_PYPROG_H

#include "ftl/error.h"

typedef struct ln_pyprog {
  /* The command line that runs the program through pyrun.py (NULL-terminated, owned), NULL when it
   * is not a Python program or cannot run so. */
  char **argv;
  int is_python;        /* the program is Python (argv may still be NULL: why_not says why) */
  char why_not[320];    /* a Python program that cannot run through pyrun.py: why */
  char runner[4096];    /* pyrun.py's path, when found */
} ln_pyprog;

/* Plans how to run program (an absolute path, as core_proc_find_program resolved it) with args
 * (NULL-terminated) through pyrun.py, found at ftl_exe's ../share/ftl/pyrun.py; cwd: the ranks'
 * working folder (a relative script is looked up there), NULL for this process's. Only an out of
 * memory is an error: whatever stops the plan is said in p->why_not. Free with ln_pyprog_free. */
ftl_err ln_pyprog_plan(const char *program, char *const *args, const char *ftl_exe, const char *cwd, ln_pyprog *p,
                       ftl_diag *d);
void ln_pyprog_free(ln_pyprog *p);

#endif
