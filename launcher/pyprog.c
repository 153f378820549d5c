/* launcher/pyprog.c: a Python program's command line taken apart and put back together with
 * launcher/pyrun.py between the interpreter and the script (launcher/pyprog.h). */
#include "launcher/pyprog.h"

#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/proc.h"
#include "ftl/core.h"
#include "launcher/gang.h"

/* python, python3, python3.11: the names an interpreter goes by. */
static int python_name(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (strncmp(base, "python", 6) != 0) return 0;
  for (const char *c = base + 6; *c; c++)
    if (!isdigit((unsigned char)*c) && *c != '.') return 0;
  return 1;
}

/* Interpreter options the runner passes on unchanged: flags that change neither sys.path[0] nor
 * what runs (-u unbuffered, -O, -B, -E, -s, -S, -b, -q, -v, -d, -R), and -X/-W with their value. */
enum opt_kind { OPT_BAD, OPT_FLAGS, OPT_WITH_VALUE, OPT_MODULE, OPT_END };

static enum opt_kind classify(const char *a, const char **why) {
  if (strcmp(a, "-") == 0) {
    *why = "the script is read from stdin";
    return OPT_BAD;
  }
  if (a[0] != '-' || strcmp(a, "--") == 0) return OPT_END;
  if (a[1] == '-') {
    *why = "a long interpreter option";
    return OPT_BAD;
  }
  for (const char *c = a + 1; *c; c++) {
    switch (*c) {
      case 'u': case 'O': case 'B': case 'E': case 's': case 'S': case 'b': case 'q': case 'v': case 'd': case 'R':
        continue;
      case 'X': case 'W':
        return OPT_WITH_VALUE; /* the rest of this word, or the next word, is its value */
      case 'm':
        return OPT_MODULE;
      case 'c': *why = "`-c CODE` is not a file the standby can run"; return OPT_BAD;
      case 'i': *why = "-i (an interactive end)"; return OPT_BAD;
      case 'I': *why = "-I (isolated mode leaves the script's folder off sys.path)"; return OPT_BAD;
      case 'P': *why = "-P (leaves the script's folder off sys.path)"; return OPT_BAD;
      default: *why = "an interpreter option the runner does not know"; return OPT_BAD;
    }
  }
  return OPT_FLAGS;
}

/* The script must be a file the runner can read and compile, as the interpreter would. */
static int regular_script(const char *script, const char *cwd, char *why, size_t why_size) {
  char path[PATH_MAX];
  if (script[0] != '/' && cwd) {
    if (ftl_fmt(path, sizeof path, "%s/%s", cwd, script)) return 0;
  } else if (ftl_fmt(path, sizeof path, "%s", script)) {
    return 0;
  }
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
    ftl_fmt(why, why_size, "the script %s is not a regular file (a folder or a zip with __main__.py runs cold)", script);
    return 0;
  }
  return 1;
}

/* The interpreter a script's first line names, and its one option ("" when none); 0 when the file
 * does not start with a Python #! line. */
static int shebang(const char *program, char *interp, size_t interp_size, char *opt, size_t opt_size, char *why,
                   size_t why_size) {
  char line[256] = "";
  int fd = open(program, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return 0;
  struct stat st;
  ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, line, sizeof line - 1) : -1;
  close(fd);
  if (n < 2 || line[0] != '#' || line[1] != '!') return 0;
  line[n] = '\0';
  char *end = strchr(line, '\n');
  if (!end) return 0;
  *end = '\0';
  char *p = line + 2;
  while (*p == ' ' || *p == '\t') p++;
  char *word = p;
  while (*p && *p != ' ' && *p != '\t') p++;
  if (*p) *p++ = '\0';
  while (*p == ' ' || *p == '\t') p++;
  char *arg = p; /* the kernel passes the rest of the line as one argument */
  size_t len = strlen(arg);
  while (len && (arg[len - 1] == ' ' || arg[len - 1] == '\t' || arg[len - 1] == '\r')) arg[--len] = '\0';
  const char *base = strrchr(word, '/');
  base = base ? base + 1 : word;
  if (strcmp(base, "env") == 0) {
    if (!python_name(arg)) return 0;
    if (strchr(arg, ' ')) {
      ftl_fmt(why, why_size, "the #! line passes options through env");
      return -1;
    }
    char *found = NULL;
    ftl_diag d;
    if (core_proc_find_program(arg, getenv("PATH"), 1, &found, &d) != FTL_OK) {
      ftl_fmt(why, why_size, "%s", d.msg); /* cut at worst: a message */
      return -1;
    }
    int over = ftl_fmt(interp, interp_size, "%s", found);
    ftl_free(found);
    opt[0] = '\0';
    return over ? 0 : 1;
  }
  if (!python_name(word)) return 0;
  if (ftl_fmt(interp, interp_size, "%s", word) || ftl_fmt(opt, opt_size, "%s", arg)) return 0;
  return 1;
}

ftl_err ln_pyprog_plan(const char *program, char *const *args, const char *ftl_exe, const char *cwd, ln_pyprog *p,
                       ftl_diag *d) {
  memset(p, 0, sizeof *p);
  ln_argv_builder b = {0};
  char interp[PATH_MAX], opt[256] = "";
  char *const *rest = args;
  int from_shebang = 0;
  if (python_name(program)) {
    if (ftl_fmt(interp, sizeof interp, "%s", program)) return FTL_OK;
  } else {
    int sb = shebang(program, interp, sizeof interp, opt, sizeof opt, p->why_not, sizeof p->why_not);
    if (sb == 0) return FTL_OK; /* not Python */
    p->is_python = 1;
    if (sb < 0) return FTL_OK;
    from_shebang = 1;
  }
  p->is_python = 1;

  /* pyrun.py beside the binary: BIN/../share/ftl/pyrun.py, in a build tree as once installed. */
  char exe_dir[PATH_MAX];
  if (ftl_fmt(exe_dir, sizeof exe_dir, "%s", ftl_exe)) return FTL_OK;
  char *slash = strrchr(exe_dir, '/');
  if (slash) *slash = '\0';
  struct stat st;
  if (ftl_fmt(p->runner, sizeof p->runner, "%s/../share/ftl/pyrun.py", exe_dir) || stat(p->runner, &st) != 0 ||
      !S_ISREG(st.st_mode)) {
    ftl_fmt(p->why_not, sizeof p->why_not, "no launcher runner at %s (ftl's share/ftl/pyrun.py)", p->runner);
    return FTL_OK;
  }

  ln_argv_push(&b, interp);
  const char *why = NULL;
  if (from_shebang && opt[0]) {
    enum opt_kind k = classify(opt, &why);
    if (k != OPT_FLAGS) {
      ftl_fmt(p->why_not, sizeof p->why_not, "the #! line's option '%s': %s", opt,
               why ? why : "an interpreter option the runner does not know");
      goto refuse;
    }
    ln_argv_push(&b, opt);
  }
  const char *module = NULL, *script = from_shebang ? program : NULL;
  while (!script && !module) {
    const char *a = *rest;
    if (!a) {
      ftl_fmt(p->why_not, sizeof p->why_not, "no script named (an interactive interpreter)");
      goto refuse;
    }
    enum opt_kind k = classify(a, &why);
    if (k == OPT_BAD) {
      ftl_fmt(p->why_not, sizeof p->why_not, "'%s': %s", a, why);
      goto refuse;
    }
    if (k == OPT_END) {
      if (strcmp(a, "--") == 0) {
        ftl_fmt(p->why_not, sizeof p->why_not, "'--' before the script");
        goto refuse;
      }
      script = a;
      rest++;
      break;
    }
    if (k == OPT_FLAGS) {
      ln_argv_push(&b, a);
      rest++;
      continue;
    }
    /* The letter taking a value: its value is the rest of this word, or the next word. */
    const char *at = strpbrk(a, k == OPT_MODULE ? "m" : "XW");
    if (k == OPT_MODULE && at != a + 1) {
      ftl_fmt(p->why_not, sizeof p->why_not, "'%s': flags and -m in one word", a);
      goto refuse;
    }
    const char *value = at[1] ? at + 1 : rest[1];
    if (!value) {
      ftl_fmt(p->why_not, sizeof p->why_not, "'%s' without its value", a);
      goto refuse;
    }
    if (k == OPT_MODULE) {
      module = value;
    } else {
      ln_argv_push(&b, a);
      if (!at[1]) ln_argv_push(&b, value);
    }
    rest += at[1] ? 1 : 2;
  }
  if (script && !regular_script(script, cwd, p->why_not, sizeof p->why_not)) goto refuse;
  ln_argv_push(&b, p->runner);
  if (module) {
    ln_argv_push(&b, "-m");
    ln_argv_push(&b, module);
  } else {
    ln_argv_push(&b, script);
  }
  for (char *const *a = rest; a && *a; a++) ln_argv_push(&b, *a);
  return ln_argv_finish(&b, &p->argv, "the Python runner's command line", d);
refuse:
  ln_argv_free(b.v);
  return FTL_OK;
}

void ln_pyprog_free(ln_pyprog *p) {
  ln_argv_free(p->argv);
  p->argv = NULL;
}
