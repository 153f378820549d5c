/* tests/probe.h: what the rank programs of the script tests (tests/fault/fault_probe.c,
 * tests/launcher/gang_probe.c) share: their command line (each option a whole number into an
 * int64_t, or a flag, plus --marker) and joining the gang. Header-only: each probe is one .c file. */
#ifndef FTL_TESTS_PROBE_H
#define FTL_TESTS_PROBE_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ftl/ftl.h"

/* One option: a number (num, parsed within lo..hi) or, where flag is set, a flag without a value. */
typedef struct probe_opt {
  const char *name;
  int64_t *num;
  int64_t lo, hi;
  int *flag;
} probe_opt;

#define PROBE_NUM(name, var, lo, hi) {(name), &(var), (lo), (hi), NULL}
#define PROBE_FLAG(name, var) {(name), NULL, 0, 0, &(var)}
#define PROBE_MAX_OPTS 30

/* Parses argv against the n options, and --marker, which is ignored: it is only there so that a
 * test finds its leftover processes by their command line. 0, or 2 (a usage error) for an unknown
 * option or a value that is not a whole number within its bounds. */
static inline int probe_parse_opts(int argc, char **argv, const probe_opt *opts, int n) {
  struct option table[PROBE_MAX_OPTS + 2];
  if (n < 0 || n > PROBE_MAX_OPTS) return 2;
  for (int i = 0; i < n; i++)
    table[i] = (struct option){opts[i].name, opts[i].flag ? no_argument : required_argument, NULL, i + 1};
  table[n] = (struct option){"marker", required_argument, NULL, n + 1};
  table[n + 1] = (struct option){NULL, 0, NULL, 0};
  int c;
  while ((c = getopt_long(argc, argv, "", table, NULL)) != -1) {
    if (c < 1 || c > n + 1) return 2;
    if (c == n + 1) continue;
    const probe_opt *o = &opts[c - 1];
    if (o->flag)
      *o->flag = 1;
    else if (ftl_parse_i64(optarg, o->lo, o->hi, o->num) != FTL_OK)
      return 2;
  }
  return 0;
}

/* Takes "--NAME VALUE" out of argv (and *argc) and returns VALUE, or NULL when it is not there: an
 * option whose value is a path, which probe_opt's whole numbers do not hold. */
static inline const char *probe_take_path(int *argc, char **argv, const char *name) {
  for (int i = 1; i + 1 < *argc; i++)
    if (argv[i][0] == '-' && argv[i][1] == '-' && strcmp(argv[i] + 2, name) == 0) {
      const char *value = argv[i + 1];
      memmove(argv + i, argv + i + 2, (size_t)(*argc - i - 1) * sizeof *argv); /* with argv[argc] (NULL) */
      *argc -= 2;
      return value;
    }
  return NULL;
}

/* ftl_init for a probe called name: the context, or NULL after printing why on stderr. */
static inline ftl_ctx *probe_join(const char *name, int *argc, char ***argv) {
  ftl_ctx *ctx = NULL;
  ftl_err rc = ftl_init(argc, argv, &ctx);
  if (rc == FTL_OK) return ctx;
  fprintf(stderr, "%s: ftl_init: %s: %s\n", name, ftl_strerror(rc), ftl_ctx_errmsg(ctx));
  ftl_finalize(ctx);
  return NULL;
}

#endif
