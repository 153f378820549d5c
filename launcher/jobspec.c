/* launcher/jobspec.c: the job spec parser behind launcher/jobspec.h; the format is documented in
 * docs/job-spec.md.
 *
 * How it works: libyaml's document API (yaml_parser_load) turns the bytes into a graph of nodes,
 * each with its line and column. A table per section (job_fields, rendezvous_fields) says, for
 * each key, what kind of value it takes, its bounds and default, and where in ftl_job it goes;
 * one walker applies any table to any mapping node. Adding a field is one table row plus one
 * member of ftl_job; adding a section is one table plus one FK_SECTION row.
 *
 * Deliberately not here: looking the program up on PATH, checking that files or folders exist,
 * anything about a run. Those belong to the launcher, which knows the host it runs on.
 *
 * Map:
 *   limits ............ sizes that keep hostile input cheap
 *   scalars ........... the YAML 1.2 core-schema reading of plain scalars
 *   messages .......... "<file>:<line>:<col>: field '<path>': <what is wrong>"
 *   the field tables .. one row per field
 *   setters ........... one function per field kind
 *   the walker ........ unknown keys, duplicates, required fields
 *   loading YAML ...... a bounded event pass, then the document
 *   public functions */
#include "launcher/jobspec.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>
#include <yaml.h>

#include "ftl/core.h"

/* ---- limits ------------------------------------------------------------------------------ */

/* A job spec is a screenful of text. These limits are far above any real one and keep a hostile
 * or mistaken input (a log file passed by accident, an alias bomb, a deep nest) cheap to reject. */
#define JOB_MAX_BYTES ((size_t)1 << 20)
#define JOB_MAX_NODES 10000
#define JOB_MAX_DEPTH 64
#define JOB_RANKS_MAX 65536
#define JOB_NAME_MAX 100
#define SECTION_MAX_FIELDS 32
/* How much of a value or key a message quotes before cutting it with "...". */
#define QUOTE_MAX 60

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* FK_ENUM stores through an int; the enums it fills must be int-sized. */
_Static_assert(sizeof(ftl_launch_kind) == sizeof(int), "ftl_launch_kind must be int-sized");

/* ---- scalars ----------------------------------------------------------------------------- */

/* What a scalar means. Quoted scalars are always strings, so `ranks: "4"` is a type error, as in
 * any typed reader of YAML; plain ones are read by the YAML 1.2 core schema (not 1.1's, whose
 * `yes`/`no`/`on`/`off` booleans and leading-zero octals surprise people). Tags are ignored:
 * libyaml gives plain scalars the same default tag whether or not one was written. */
typedef enum scalar_type {
  SC_NULL,
  SC_BOOL,
  SC_INT,
  SC_FLOAT,
  SC_STRING,
} scalar_type;

static bool text_is(const char *s, size_t len, const char *word) {
  return strlen(word) == len && memcmp(s, word, len) == 0;
}

static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* [-+]?[0-9]+ : decimal only; a spec has no use for 0x or 0o counts. */
static bool text_is_int(const char *s, size_t len) {
  size_t i = 0;
  if (i < len && (s[i] == '-' || s[i] == '+')) i++;
  if (i == len) return false;
  for (; i < len; i++)
    if (!is_digit(s[i])) return false;
  return true;
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? and the core schema's .inf/.nan. Exactly
 * the forms strtod reads the same way in every locale that ftl runs in (see set_seconds). */
static bool text_is_float(const char *s, size_t len) {
  size_t i = 0, int_digits = 0, frac_digits = 0;
  if (i < len && (s[i] == '-' || s[i] == '+')) i++;
  const char *rest = s + i;
  size_t rest_len = len - i;
  if (text_is(rest, rest_len, ".inf") || text_is(rest, rest_len, ".Inf") ||
      text_is(rest, rest_len, ".INF"))
    return true;
  if (i == 0 && (text_is(s, len, ".nan") || text_is(s, len, ".NaN") || text_is(s, len, ".NAN")))
    return true;
  while (i < len && is_digit(s[i])) i++, int_digits++;
  if (i < len && s[i] == '.') {
    i++;
    while (i < len && is_digit(s[i])) i++, frac_digits++;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < len && (s[i] == '-' || s[i] == '+')) i++;
    size_t exp_digits = 0;
    while (i < len && is_digit(s[i])) i++, exp_digits++;
    if (exp_digits == 0) return false;
  }
  return i == len;
}

static const char *scalar_text(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }
static size_t scalar_len(const yaml_node_t *n) { return n->data.scalar.length; }

static scalar_type scalar_type_of(const yaml_node_t *n) {
  if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return SC_STRING;
  const char *s = scalar_text(n);
  size_t len = scalar_len(n);
  if (len == 0 || text_is(s, len, "~") || text_is(s, len, "null") || text_is(s, len, "Null") ||
      text_is(s, len, "NULL"))
    return SC_NULL;
  if (text_is(s, len, "true") || text_is(s, len, "True") || text_is(s, len, "TRUE") ||
      text_is(s, len, "false") || text_is(s, len, "False") || text_is(s, len, "FALSE"))
    return SC_BOOL;
  if (text_is_int(s, len)) return SC_INT;
  if (text_is_float(s, len)) return SC_FLOAT;
  return SC_STRING;
}

static bool node_is_null(const yaml_node_t *n) {
  return n->type == YAML_SCALAR_NODE && scalar_type_of(n) == SC_NULL;
}

/* ---- messages ---------------------------------------------------------------------------- */

/* snprintf for message fragments, where cutting a long path or value is the right outcome (the
 * diag buffer is finite anyway). A function of its own so the compiler does not flag each cut
 * as a possible mistake the way it does for snprintf. */
static void msg_fmt(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void msg_fmt(char *out, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out, size, fmt, ap);
  va_end(ap);
}

/* Copies text into out for a message: quotes and backslashes escaped, control bytes as \n, \t or
 * \xNN, cut after QUOTE_MAX bytes at a UTF-8 character boundary (libyaml has already checked
 * the input is UTF-8, so the cut leaves it valid). out is always terminated. */
static void quote_text(const char *s, size_t len, char *out, size_t size) {
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)s[i];
    char piece[8];
    if (i >= QUOTE_MAX && (ch & 0xC0) != 0x80) {
      snprintf(piece, sizeof piece, "...");
    } else if (ch == '\\' || ch == '\'') {
      snprintf(piece, sizeof piece, "\\%c", ch);
    } else if (ch == '\n') {
      snprintf(piece, sizeof piece, "\\n");
    } else if (ch == '\t') {
      snprintf(piece, sizeof piece, "\\t");
    } else if (ch < 0x20 || ch == 0x7F) {
      snprintf(piece, sizeof piece, "\\x%02x", ch);
    } else {
      piece[0] = (char)ch;
      piece[1] = '\0';
    }
    size_t n = strlen(piece);
    if (o + n + 1 > size) break;
    memcpy(out + o, piece, n);
    o += n;
    if (i >= QUOTE_MAX && (ch & 0xC0) != 0x80) break;
  }
  if (size > 0) out[o < size ? o : size - 1] = '\0';
}

/* "a string 'abc'", "an integer '4'", "a sequence": what a message says was found. */
static void describe_node(const yaml_node_t *n, char *out, size_t size) {
  if (!n) {
    snprintf(out, size, "nothing");
    return;
  }
  if (n->type == YAML_SEQUENCE_NODE) {
    snprintf(out, size, "a sequence");
    return;
  }
  if (n->type == YAML_MAPPING_NODE) {
    snprintf(out, size, "a mapping");
    return;
  }
  const char *what = "a string";
  switch (scalar_type_of(n)) {
  case SC_NULL:
    snprintf(out, size, "null");
    return;
  case SC_BOOL:
    what = "a boolean";
    break;
  case SC_INT:
    what = "an integer";
    break;
  case SC_FLOAT:
    what = "a float";
    break;
  case SC_STRING:
    break;
  }
  char quoted[4 * QUOTE_MAX + 8];
  quote_text(scalar_text(n), scalar_len(n), quoted, sizeof quoted);
  msg_fmt(out, size, "%s '%s'", what, quoted);
}

typedef struct parse_ctx {
  const char *file;     /* the name in messages */
  const char *base_dir; /* relative paths are joined to it; NULL keeps them as written */
  yaml_document_t *doc;
  ftl_job *job;
  ftl_diag *d;
} parse_ctx;

/* The one way a spec error is reported: "<file>:<line>:<col>: field '<path>': <detail>", or
 * without the field part when path is empty (errors about the file as a whole). */
static ftl_err fail_at(const parse_ctx *c, yaml_mark_t mark, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ftl_err fail_at(const parse_ctx *c, yaml_mark_t mark, const char *path, const char *fmt, ...) {
  char detail[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  if (path && path[0])
    return ftl_diag_fail(c->d, FTL_ERR_SPEC, "%s:%zu:%zu: field '%s': %s", c->file, mark.line + 1,
                         mark.column + 1, path, detail);
  return ftl_diag_fail(c->d, FTL_ERR_SPEC, "%s:%zu:%zu: %s", c->file, mark.line + 1, mark.column + 1,
                       detail);
}

static ftl_err fail_nomem(const parse_ctx *c) {
  return ftl_diag_fail(c->d, FTL_ERR_NOMEM, "%s: out of memory while reading the job spec", c->file);
}

/* "expected <expected>, got <what n is>". */
static ftl_err fail_type(const parse_ctx *c, const yaml_node_t *n, const char *path, const char *expected) {
  char found[4 * QUOTE_MAX + 32];
  describe_node(n, found, sizeof found);
  return fail_at(c, n->start_mark, path, "expected %s, got %s", expected, found);
}

/* A dotted path for messages: "rendezvous.timeout_s", or "env.<key>" with the key quoted. */
static void path_join(char *out, size_t size, const char *prefix, const char *key, size_t key_len) {
  char quoted[4 * QUOTE_MAX + 8];
  quote_text(key, key_len, quoted, sizeof quoted);
  if (prefix && prefix[0]) msg_fmt(out, size, "%s.%s", prefix, quoted);
  else msg_fmt(out, size, "%s", quoted);
}

/* ---- the field tables -------------------------------------------------------------------- */

typedef enum field_kind {
  FK_STRING,  /* a non-null scalar, kept as written; char * */
  FK_INT,     /* a decimal integer in [min, max]; int */
  FK_SECONDS, /* seconds > 0 and <= max, may be fractional; int64_t milliseconds */
  FK_ENUM,    /* one word of choices; an int-sized enum */
  FK_ARGV,    /* a sequence of scalars; NULL-terminated char ** plus a size_t count */
  FK_ENV,     /* a mapping NAME: scalar; NULL-terminated "NAME=VALUE" strings plus a count */
  FK_SECTION, /* a mapping read with its own table */
} field_kind;

enum {
  FF_REQUIRED = 1 << 0,
  FF_NONEMPTY = 1 << 1,       /* FK_STRING: "" is an error */
  FF_JOB_NAME = 1 << 2,       /* FK_STRING: [A-Za-z0-9._-]+, not starting with '.' */
  FF_PATH = 1 << 3,           /* FK_STRING: a relative path is joined to the spec's folder */
  FF_PATH_IF_SLASH = 1 << 4,  /* FK_STRING: the same, but only when it has a '/' (else: PATH) */
};

typedef struct enum_choice {
  const char *word;
  int value;
} enum_choice;

typedef struct section section;

typedef struct field {
  const char *key;
  field_kind kind;
  unsigned flags;
  size_t offset;              /* where the value goes in ftl_job */
  size_t count_offset;        /* FK_ARGV, FK_ENV: where the size_t count goes */
  int64_t min, max;           /* FK_INT: bounds; FK_SECONDS: max is the most seconds */
  int64_t def;                /* FK_INT, FK_ENUM: default value; FK_SECONDS: default in ms */
  const enum_choice *choices; /* FK_ENUM: ended by a NULL word */
  const section *sub;         /* FK_SECTION */
} field;

struct section {
  const field *fields;
  size_t count;
};

static const enum_choice launch_choices[] = {
    {"auto", FTL_LAUNCH_AUTO},
    {"mpirun", FTL_LAUNCH_MPIRUN},
    {"srun", FTL_LAUNCH_SRUN},
    {NULL, 0},
};

static const field rendezvous_fields[] = {
    {.key = "timeout_s", .kind = FK_SECONDS, .offset = offsetof(ftl_job, rendezvous_timeout_ms),
     .max = 86400, .def = 300 * 1000},
};
static const section rendezvous_section = {rendezvous_fields, ARRAY_LEN(rendezvous_fields)};

static const field restart_fields[] = {
    {.key = "max_restarts", .kind = FK_INT, .offset = offsetof(ftl_job, max_restarts), .min = 0, .max = 100000,
     .def = 3},
    {.key = "backoff_s", .kind = FK_SECONDS, .offset = offsetof(ftl_job, backoff_ms), .max = 3600, .def = 100},
    {.key = "max_backoff_s", .kind = FK_SECONDS, .offset = offsetof(ftl_job, max_backoff_ms), .max = 86400,
     .def = 30 * 1000},
    {.key = "crash_loop", .kind = FK_INT, .offset = offsetof(ftl_job, crash_loop), .min = 1, .max = 1000, .def = 3},
};
static const section restart_section = {restart_fields, ARRAY_LEN(restart_fields)};

static const field timeout_fields[] = {
    {.key = "startup_s", .kind = FK_SECONDS, .offset = offsetof(ftl_job, startup_timeout_ms), .max = 86400,
     .def = 600 * 1000},
    {.key = "step_s", .kind = FK_SECONDS, .offset = offsetof(ftl_job, step_timeout_ms), .max = 86400,
     .def = 180 * 1000},
    {.key = "checkpoint_s", .kind = FK_SECONDS, .offset = offsetof(ftl_job, checkpoint_timeout_ms), .max = 86400,
     .def = 420 * 1000},
    {.key = "node_s", .kind = FK_SECONDS, .offset = offsetof(ftl_job, node_timeout_ms), .max = 3600,
     .def = 10 * 1000},
};
static const section timeout_section = {timeout_fields, ARRAY_LEN(timeout_fields)};

static const field preemption_fields[] = {
    {.key = "grace_s", .kind = FK_SECONDS, .offset = offsetof(ftl_job, preempt_grace_ms), .max = 86400,
     .def = 30 * 1000},
};
static const section preemption_section = {preemption_fields, ARRAY_LEN(preemption_fields)};

/* The top level, in the order the docs list it (the "known fields" list of a message follows). */
static const field job_fields[] = {
    {.key = "name", .kind = FK_STRING, .flags = FF_JOB_NAME, .offset = offsetof(ftl_job, name)},
    {.key = "ranks", .kind = FK_INT, .flags = FF_REQUIRED, .offset = offsetof(ftl_job, ranks),
     .min = 1, .max = JOB_RANKS_MAX},
    {.key = "program", .kind = FK_STRING, .flags = FF_REQUIRED | FF_NONEMPTY | FF_PATH_IF_SLASH,
     .offset = offsetof(ftl_job, program)},
    {.key = "args", .kind = FK_ARGV, .offset = offsetof(ftl_job, args),
     .count_offset = offsetof(ftl_job, args_count)},
    {.key = "env", .kind = FK_ENV, .offset = offsetof(ftl_job, env),
     .count_offset = offsetof(ftl_job, env_count)},
    {.key = "hostfile", .kind = FK_STRING, .flags = FF_NONEMPTY | FF_PATH,
     .offset = offsetof(ftl_job, hostfile)},
    {.key = "launcher", .kind = FK_ENUM, .offset = offsetof(ftl_job, launcher),
     .def = FTL_LAUNCH_AUTO, .choices = launch_choices},
    {.key = "run_dir", .kind = FK_STRING, .flags = FF_NONEMPTY, .offset = offsetof(ftl_job, run_dir)},
    {.key = "working_dir", .kind = FK_STRING, .flags = FF_NONEMPTY,
     .offset = offsetof(ftl_job, working_dir)},
    {.key = "rendezvous", .kind = FK_SECTION, .sub = &rendezvous_section},
    {.key = "fleet_ledger", .kind = FK_STRING, .flags = FF_NONEMPTY | FF_PATH,
     .offset = offsetof(ftl_job, fleet_ledger)},
    {.key = "min_ranks", .kind = FK_INT, .offset = offsetof(ftl_job, min_ranks), .min = 1, .max = JOB_RANKS_MAX,
     .def = 0},
    {.key = "restart", .kind = FK_SECTION, .sub = &restart_section},
    {.key = "timeouts", .kind = FK_SECTION, .sub = &timeout_section},
    {.key = "preemption", .kind = FK_SECTION, .sub = &preemption_section},
};
static const section job_section = {job_fields, ARRAY_LEN(job_fields)};

_Static_assert(ARRAY_LEN(job_fields) <= SECTION_MAX_FIELDS, "raise SECTION_MAX_FIELDS");
_Static_assert(ARRAY_LEN(rendezvous_fields) <= SECTION_MAX_FIELDS, "raise SECTION_MAX_FIELDS");
_Static_assert(ARRAY_LEN(restart_fields) <= SECTION_MAX_FIELDS, "raise SECTION_MAX_FIELDS");
_Static_assert(ARRAY_LEN(timeout_fields) <= SECTION_MAX_FIELDS, "raise SECTION_MAX_FIELDS");

#define FIELD_AT(job, f, type) ((type *)(void *)((char *)(job) + (f)->offset))
#define COUNT_AT(job, f) ((size_t *)(void *)((char *)(job) + (f)->count_offset))

static void apply_defaults(const section *s, ftl_job *job) {
  for (size_t i = 0; i < s->count; i++) {
    const field *f = &s->fields[i];
    switch (f->kind) {
    case FK_INT:
    case FK_ENUM:
      *FIELD_AT(job, f, int) = (int)f->def;
      break;
    case FK_SECONDS:
      *FIELD_AT(job, f, int64_t) = f->def;
      break;
    case FK_SECTION:
      apply_defaults(f->sub, job);
      break;
    case FK_STRING:
    case FK_ARGV:
    case FK_ENV:
      break; /* NULL and the empty list, set by job_new */
    }
  }
}

/* ---- strings and paths ------------------------------------------------------------------- */

static char *dup_len(const char *s, size_t len) {
  char *copy = ftl_malloc(len + 1);
  if (!copy) return NULL;
  memcpy(copy, s, len);
  copy[len] = '\0';
  return copy;
}

static void free_strv(char **v) {
  if (!v) return;
  for (char **p = v; *p; p++) ftl_free(*p);
  ftl_free(v);
}

static bool name_char_ok(char ch) {
  return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || is_digit(ch) || ch == '.' ||
         ch == '_' || ch == '-';
}

/* A job name from a file or program name: the base name, less its extension when asked, with
 * characters a name may not hold turned into '_' and leading dots dropped; fallback when that
 * leaves nothing. Returns NULL only when out of memory. */
static char *name_from(const char *path, bool strip_extension, const char *fallback) {
  const char *base = path ? path : "";
  const char *slash = strrchr(base, '/');
  if (slash) base = slash + 1;
  size_t len = strlen(base);
  const char *dot = strrchr(base, '.');
  if (strip_extension && dot && dot != base) len = (size_t)(dot - base);
  while (len > 0 && base[0] == '.') base++, len--;
  if (len > JOB_NAME_MAX) len = JOB_NAME_MAX;
  if (len == 0) return ftl_strdup(fallback);
  char *name = dup_len(base, len);
  if (!name) return NULL;
  for (size_t i = 0; i < len; i++)
    if (!name_char_ok(name[i])) name[i] = '_';
  return name;
}

/* base_dir + "/" + rel, with rel's leading "./" dropped so the result reads as a person would
 * write it. rel must be relative; base_dir NULL keeps rel as written. */
static char *join_path(const char *base_dir, const char *rel) {
  if (!base_dir || !base_dir[0]) return ftl_strdup(rel);
  while (rel[0] == '.' && rel[1] == '/' && rel[2] != '\0') {
    rel += 2;
    while (rel[0] == '/' && rel[1] != '\0') rel++;
  }
  size_t blen = strlen(base_dir), rlen = strlen(rel);
  bool slash = base_dir[blen - 1] != '/';
  char *out = ftl_malloc(blen + slash + rlen + 1);
  if (!out) return NULL;
  memcpy(out, base_dir, blen);
  if (slash) out[blen] = '/';
  memcpy(out + blen + slash, rel, rlen + 1);
  return out;
}

/* ---- setters: one per field kind --------------------------------------------------------- */

/* Each setter gets a value node that is not null (the walker reports "missing a value" before)
 * and the dotted path of the field for its messages. */

static ftl_err check_no_nul(const parse_ctx *c, const yaml_node_t *n, const char *path) {
  if (memchr(scalar_text(n), '\0', scalar_len(n)))
    return fail_at(c, n->start_mark, path, "contains a NUL character (\\0)");
  return FTL_OK;
}

static ftl_err set_string(const parse_ctx *c, const field *f, const yaml_node_t *n, const char *path) {
  if (n->type != YAML_SCALAR_NODE) return fail_type(c, n, path, "a string");
  ftl_err rc = check_no_nul(c, n, path);
  if (rc) return rc;
  const char *text = scalar_text(n);
  size_t len = scalar_len(n);
  if ((f->flags & FF_NONEMPTY) && len == 0) return fail_type(c, n, path, "a non-empty string");
  if (f->flags & FF_JOB_NAME) {
    bool ok = len >= 1 && len <= JOB_NAME_MAX && text[0] != '.';
    for (size_t i = 0; ok && i < len; i++) ok = name_char_ok(text[i]);
    if (!ok)
      return fail_type(c, n, path, "1 to 100 characters from A-Z a-z 0-9 . _ - not starting with '.'");
  }
  char *value;
  if (((f->flags & FF_PATH) || ((f->flags & FF_PATH_IF_SLASH) && strchr(text, '/'))) && text[0] != '/')
    value = join_path(c->base_dir, text);
  else
    value = dup_len(text, len);
  if (!value) return fail_nomem(c);
  char **slot = FIELD_AT(c->job, f, char *);
  ftl_free(*slot);
  *slot = value;
  return FTL_OK;
}

static void describe_int_bounds(const field *f, char *out, size_t size) {
  msg_fmt(out, size, "an integer from %lld to %lld", (long long)f->min, (long long)f->max);
}

static ftl_err set_int(const parse_ctx *c, const field *f, const yaml_node_t *n, const char *path) {
  char expected[96];
  describe_int_bounds(f, expected, sizeof expected);
  if (n->type != YAML_SCALAR_NODE || scalar_type_of(n) != SC_INT) return fail_type(c, n, path, expected);
  const char *text = scalar_text(n);
  int64_t v = 0;
  ftl_err prc = ftl_parse_i64(text, INT64_MIN, INT64_MAX, &v);
  /* Digits past int64 are out of range on the side their sign says. */
  bool too_small = prc ? text[0] == '-' : v < f->min;
  bool too_big = prc ? text[0] != '-' : v > f->max;
  char quoted[4 * QUOTE_MAX + 8];
  quote_text(text, scalar_len(n), quoted, sizeof quoted);
  if (too_small) {
    if (f->min == 1) return fail_at(c, n->start_mark, path, "expected an integer > 0, got '%s'", quoted);
    return fail_at(c, n->start_mark, path, "expected an integer >= %lld, got '%s'", (long long)f->min, quoted);
  }
  if (too_big)
    return fail_at(c, n->start_mark, path, "expected an integer <= %lld, got '%s'", (long long)f->max, quoted);
  *FIELD_AT(c->job, f, int) = (int)v;
  return FTL_OK;
}

static ftl_err set_seconds(const parse_ctx *c, const field *f, const yaml_node_t *n, const char *path) {
  char expected[96];
  msg_fmt(expected, sizeof expected, "a number of seconds > 0 and <= %lld", (long long)f->max);
  scalar_type t = n->type == YAML_SCALAR_NODE ? scalar_type_of(n) : SC_STRING;
  if (n->type != YAML_SCALAR_NODE || (t != SC_INT && t != SC_FLOAT)) return fail_type(c, n, path, expected);
  /* text_is_float/int admitted only [-+]digits[.digits][e[-+]digits] (or .inf/.nan, which strtod
   * does not read and so fail below); strtod reads those the same in the C locale ftl runs in.
   * Overflow gives HUGE_VAL and underflow 0, both out of range. */
  const char *text = scalar_text(n);
  char *end = NULL;
  double v = strtod(text, &end);
  if (end != text + scalar_len(n) || !(v > 0.0) || v > (double)f->max) {
    char quoted[4 * QUOTE_MAX + 8];
    quote_text(text, scalar_len(n), quoted, sizeof quoted);
    return fail_at(c, n->start_mark, path, "expected %s, got '%s'", expected, quoted);
  }
  /* Nearest millisecond, and at least one: a positive timeout must not become "no time". */
  int64_t ms = (int64_t)(v * 1000.0 + 0.5);
  *FIELD_AT(c->job, f, int64_t) = ms > 0 ? ms : 1;
  return FTL_OK;
}

static ftl_err set_enum(const parse_ctx *c, const field *f, const yaml_node_t *n, const char *path) {
  if (n->type == YAML_SCALAR_NODE) {
    for (const enum_choice *ch = f->choices; ch->word; ch++) {
      if (text_is(scalar_text(n), scalar_len(n), ch->word)) {
        *FIELD_AT(c->job, f, int) = ch->value;
        return FTL_OK;
      }
    }
  }
  char expected[256] = "one of ";
  size_t used = strlen(expected);
  for (const enum_choice *ch = f->choices; ch->word; ch++) {
    int n_written = snprintf(expected + used, sizeof expected - used, "%s%s", ch == f->choices ? "" : ", ",
                             ch->word);
    if (n_written < 0 || (size_t)n_written >= sizeof expected - used) break;
    used += (size_t)n_written;
  }
  return fail_type(c, n, path, expected);
}

static ftl_err set_argv(const parse_ctx *c, const field *f, const yaml_node_t *n, const char *path) {
  ftl_err rc = FTL_OK;
  char **list = NULL;
  if (n->type != YAML_SEQUENCE_NODE) return fail_type(c, n, path, "a sequence of strings");
  size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
  list = ftl_calloc(count + 1, sizeof *list);
  if (!list) return fail_nomem(c);
  for (size_t i = 0; i < count; i++) {
    char item_path[320];
    msg_fmt(item_path, sizeof item_path, "%s[%zu]", path, i);
    const yaml_node_t *item = yaml_document_get_node(c->doc, n->data.sequence.items.start[i]);
    if (!item) {
      rc = fail_at(c, n->start_mark, item_path, "missing a value");
      goto out;
    }
    if (node_is_null(item)) {
      rc = fail_at(c, item->start_mark, item_path, "missing a value (write \"\" for an empty argument)");
      goto out;
    }
    if (item->type != YAML_SCALAR_NODE) {
      rc = fail_type(c, item, item_path, "a string");
      goto out;
    }
    rc = check_no_nul(c, item, item_path);
    if (rc) goto out;
    list[i] = dup_len(scalar_text(item), scalar_len(item));
    if (!list[i]) {
      rc = fail_nomem(c);
      goto out;
    }
  }
  free_strv(*FIELD_AT(c->job, f, char **));
  *FIELD_AT(c->job, f, char **) = list;
  *COUNT_AT(c->job, f) = count;
  list = NULL;
out:
  free_strv(list);
  return rc;
}

/* [A-Za-z_][A-Za-z0-9_]*: what a POSIX shell accepts as a variable name. */
static bool env_name_ok(const char *s, size_t len) {
  if (len == 0 || is_digit(s[0])) return false;
  for (size_t i = 0; i < len; i++)
    if (!(s[i] == '_' || is_digit(s[i]) || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z')))
      return false;
  return true;
}

static ftl_err set_env(const parse_ctx *c, const field *f, const yaml_node_t *n, const char *path) {
  ftl_err rc = FTL_OK;
  char **list = NULL;
  if (n->type != YAML_MAPPING_NODE) return fail_type(c, n, path, "a mapping of NAME: value");
  const yaml_node_pair_t *pairs = n->data.mapping.pairs.start;
  size_t count = (size_t)(n->data.mapping.pairs.top - pairs);
  list = ftl_calloc(count + 1, sizeof *list);
  if (!list) return fail_nomem(c);
  for (size_t i = 0; i < count; i++) {
    const yaml_node_t *key = yaml_document_get_node(c->doc, pairs[i].key);
    const yaml_node_t *value = yaml_document_get_node(c->doc, pairs[i].value);
    if (!key || !value) {
      rc = fail_at(c, n->start_mark, path, "an entry has no key or no value");
      goto out;
    }
    if (key->type != YAML_SCALAR_NODE) {
      rc = fail_type(c, key, path, "variable names as keys");
      goto out;
    }
    char key_path[320];
    path_join(key_path, sizeof key_path, path, scalar_text(key), scalar_len(key));
    if (!env_name_ok(scalar_text(key), scalar_len(key))) {
      rc = fail_at(c, key->start_mark, key_path, "expected a variable name matching [A-Za-z_][A-Za-z0-9_]*");
      goto out;
    }
    for (size_t j = 0; j < i; j++) {
      const yaml_node_t *earlier = yaml_document_get_node(c->doc, pairs[j].key);
      if (earlier && text_is(scalar_text(key), scalar_len(key), scalar_text(earlier))) {
        rc = fail_at(c, key->start_mark, key_path, "duplicate key (first at line %zu)",
                     earlier->start_mark.line + 1);
        goto out;
      }
    }
    if (node_is_null(value)) {
      rc = fail_at(c, value->start_mark, key_path, "missing a value (write \"\" for an empty one)");
      goto out;
    }
    if (value->type != YAML_SCALAR_NODE) {
      rc = fail_type(c, value, key_path, "a string or a number");
      goto out;
    }
    rc = check_no_nul(c, value, key_path);
    if (rc) goto out;
    size_t klen = scalar_len(key), vlen = scalar_len(value);
    list[i] = ftl_malloc(klen + 1 + vlen + 1);
    if (!list[i]) {
      rc = fail_nomem(c);
      goto out;
    }
    memcpy(list[i], scalar_text(key), klen);
    list[i][klen] = '=';
    memcpy(list[i] + klen + 1, scalar_text(value), vlen);
    list[i][klen + 1 + vlen] = '\0';
  }
  free_strv(*FIELD_AT(c->job, f, char **));
  *FIELD_AT(c->job, f, char **) = list;
  *COUNT_AT(c->job, f) = count;
  list = NULL;
out:
  free_strv(list);
  return rc;
}

/* ---- the walker -------------------------------------------------------------------------- */

static ftl_err walk_section(const parse_ctx *c, const section *s, const yaml_node_t *map, const char *prefix);

static ftl_err set_field(const parse_ctx *c, const field *f, const yaml_node_t *value, const char *path) {
  if (node_is_null(value)) return fail_at(c, value->start_mark, path, "missing a value");
  switch (f->kind) {
  case FK_STRING:
    return set_string(c, f, value, path);
  case FK_INT:
    return set_int(c, f, value, path);
  case FK_SECONDS:
    return set_seconds(c, f, value, path);
  case FK_ENUM:
    return set_enum(c, f, value, path);
  case FK_ARGV:
    return set_argv(c, f, value, path);
  case FK_ENV:
    return set_env(c, f, value, path);
  case FK_SECTION:
    if (value->type != YAML_MAPPING_NODE) return fail_type(c, value, path, "a mapping");
    return walk_section(c, f->sub, value, path);
  }
  return fail_at(c, value->start_mark, path, "internal error: unknown field kind %d", (int)f->kind);
}

/* Reads one mapping with one table. It descends only into FK_SECTION rows, so the depth of the
 * walk is the depth of the tables, whatever the input: libyaml shares aliased nodes and an
 * anchor may even contain its own alias (a cycle), neither of which can make this loop. */
static ftl_err walk_section(const parse_ctx *c, const section *s, const yaml_node_t *map, const char *prefix) {
  const yaml_node_t *seen[SECTION_MAX_FIELDS] = {0};
  char path[320];
  for (const yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top;
       pair++) {
    const yaml_node_t *key = yaml_document_get_node(c->doc, pair->key);
    const yaml_node_t *value = yaml_document_get_node(c->doc, pair->value);
    if (!key || !value) return fail_at(c, map->start_mark, prefix, "an entry has no key or no value");
    if (key->type != YAML_SCALAR_NODE) return fail_type(c, key, prefix, "field names as keys");
    path_join(path, sizeof path, prefix, scalar_text(key), scalar_len(key));
    const field *f = NULL;
    for (size_t i = 0; i < s->count && !f; i++)
      if (text_is(scalar_text(key), scalar_len(key), s->fields[i].key)) f = &s->fields[i];
    if (!f) {
      char known[512] = "";
      size_t used = 0;
      for (size_t i = 0; i < s->count; i++) {
        int n = snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", s->fields[i].key);
        if (n < 0 || (size_t)n >= sizeof known - used) break;
        used += (size_t)n;
      }
      return fail_at(c, key->start_mark, path, "unknown field (known fields: %s)", known);
    }
    size_t idx = (size_t)(f - s->fields);
    if (seen[idx])
      return fail_at(c, key->start_mark, path, "duplicate key (first at line %zu)", seen[idx]->start_mark.line + 1);
    seen[idx] = key;
    ftl_err rc = set_field(c, f, value, path);
    if (rc) return rc;
  }
  for (size_t i = 0; i < s->count; i++) {
    if ((s->fields[i].flags & FF_REQUIRED) && !seen[i]) {
      path_join(path, sizeof path, prefix, s->fields[i].key, strlen(s->fields[i].key));
      return fail_at(c, map->start_mark, path, "required field is missing");
    }
  }
  return FTL_OK;
}

/* ---- loading YAML ------------------------------------------------------------------------ */

/* libyaml's own error, in the same "<file>:<line>:<col>:" form. A reader error (bad UTF-8, a
 * control character) has only a byte offset, which is turned into a line and column here. */
static ftl_err yaml_fail(const parse_ctx *c, const yaml_parser_t *p, const char *data, size_t size) {
  const char *problem = p->problem ? p->problem : "unknown error";
  if (p->error == YAML_MEMORY_ERROR) return fail_nomem(c);
  if (p->error == YAML_READER_ERROR) {
    yaml_mark_t mark = {0};
    size_t end = p->problem_offset < size ? p->problem_offset : size;
    for (size_t i = 0; i < end; i++) {
      if (data[i] == '\n') mark.line++, mark.column = 0;
      else mark.column++;
    }
    if (p->problem_value != -1)
      return fail_at(c, mark, "", "cannot read the text: %s (byte 0x%02X at offset %zu)", problem,
                     (unsigned)p->problem_value & 0xFFu, p->problem_offset);
    return fail_at(c, mark, "", "cannot read the text: %s (at offset %zu)", problem, p->problem_offset);
  }
  /* Scanner and parser errors are about the text; composer errors (an undefined alias) are not. */
  const char *kind = p->error == YAML_COMPOSER_ERROR ? "YAML error" : "YAML syntax error";
  if (p->context)
    return fail_at(c, p->problem_mark, "", "%s: %s (%s at line %zu, column %zu)", kind, problem, p->context,
                   p->context_mark.line + 1, p->context_mark.column + 1);
  return fail_at(c, p->problem_mark, "", "%s: %s", kind, problem);
}

/* A first pass over libyaml's events, before any document is built: rejects syntax errors, a
 * second document, nesting deeper than JOB_MAX_DEPTH and more than JOB_MAX_NODES nodes and
 * aliases, each as soon as it is seen, so a hostile input costs no more than its first few
 * thousand events. yaml_parser_load cannot be stopped part way, hence the separate pass. */
static ftl_err check_shape(const parse_ctx *c, const char *data, size_t size) {
  ftl_err rc = FTL_OK;
  yaml_parser_t parser;
  yaml_event_t event;
  bool have_event = false;
  size_t nodes = 0, depth = 0, documents = 0;
  if (!yaml_parser_initialize(&parser)) return fail_nomem(c);
  yaml_parser_set_input_string(&parser, (const unsigned char *)data, size);
  for (;;) {
    if (!yaml_parser_parse(&parser, &event)) {
      rc = yaml_fail(c, &parser, data, size);
      goto out;
    }
    have_event = true;
    switch (event.type) {
    case YAML_DOCUMENT_START_EVENT:
      if (++documents > 1) {
        rc = fail_at(c, event.start_mark, "", "a second YAML document starts here; a job spec is one document");
        goto out;
      }
      break;
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
      nodes++;
      if (++depth > JOB_MAX_DEPTH) {
        rc = fail_at(c, event.start_mark, "", "nested deeper than %d levels", JOB_MAX_DEPTH);
        goto out;
      }
      break;
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
      depth--;
      break;
    case YAML_SCALAR_EVENT:
    case YAML_ALIAS_EVENT:
      nodes++;
      break;
    case YAML_NO_EVENT:
    case YAML_STREAM_START_EVENT:
    case YAML_STREAM_END_EVENT:
    case YAML_DOCUMENT_END_EVENT:
      break;
    }
    if (nodes > JOB_MAX_NODES) {
      rc = fail_at(c, event.start_mark, "", "more than %d YAML nodes; a job spec is far smaller", JOB_MAX_NODES);
      goto out;
    }
    bool done = event.type == YAML_STREAM_END_EVENT;
    yaml_event_delete(&event);
    have_event = false;
    if (done) break;
  }
out:
  if (have_event) yaml_event_delete(&event);
  yaml_parser_delete(&parser);
  return rc;
}

/* ---- public functions -------------------------------------------------------------------- */

static ftl_job *job_new(void) {
  ftl_job *job = ftl_calloc(1, sizeof *job);
  if (!job) return NULL;
  job->args = ftl_calloc(1, sizeof *job->args);
  job->env = ftl_calloc(1, sizeof *job->env);
  if (!job->args || !job->env) {
    ftl_job_destroy(job);
    return NULL;
  }
  apply_defaults(&job_section, job);
  return job;
}

void ftl_job_destroy(ftl_job *job) {
  if (!job) return;
  ftl_free(job->spec_path);
  ftl_free(job->name);
  ftl_free(job->program);
  free_strv(job->args);
  free_strv(job->env);
  ftl_free(job->hostfile);
  ftl_free(job->run_dir);
  ftl_free(job->working_dir);
  ftl_free(job->fleet_ledger);
  ftl_free(job);
}

const char *ftl_launch_kind_name(ftl_launch_kind kind) {
  for (const enum_choice *ch = launch_choices; ch->word; ch++)
    if (ch->value == (int)kind) return ch->word;
  return "unknown";
}

static void hash_hex(const char *data, size_t size, char out[33]) {
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, XXH3_128bits(data, size));
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < 16; i++) {
    out[2 * i] = hex[canon.digest[i] >> 4];
    out[2 * i + 1] = hex[canon.digest[i] & 0xF];
  }
  out[32] = '\0';
}

/* file names the input in messages; name_source (may be NULL) gives the default job name. */
static ftl_err parse_common(const char *data, size_t size, const char *file, const char *name_source,
                            const char *base_dir, const char *spec_path, ftl_job **job_out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  ftl_job *job = NULL;
  yaml_parser_t parser;
  yaml_document_t doc;
  bool parser_ready = false, doc_ready = false;
  parse_ctx c = {.file = file, .base_dir = base_dir, .doc = &doc, .d = d};

  if (size > JOB_MAX_BYTES) {
    rc = ftl_diag_fail(d, FTL_ERR_SPEC, "%s: too large for a job spec (the limit is %zu bytes)", file, JOB_MAX_BYTES);
    goto out;
  }
  job = job_new();
  if (!job) {
    rc = fail_nomem(&c);
    goto out;
  }
  c.job = job;
  hash_hex(data, size, job->spec_hash);
  if (spec_path && !(job->spec_path = ftl_strdup(spec_path))) {
    rc = fail_nomem(&c);
    goto out;
  }

  rc = check_shape(&c, data, size);
  if (rc) goto out;
  if (!yaml_parser_initialize(&parser)) {
    rc = fail_nomem(&c);
    goto out;
  }
  parser_ready = true;
  yaml_parser_set_input_string(&parser, (const unsigned char *)data, size);
  /* Syntax was checked above; what is left to fail here is composing (an undefined alias) and
   * memory. On failure libyaml has already freed the partial document. */
  if (!yaml_parser_load(&parser, &doc)) {
    rc = yaml_fail(&c, &parser, data, size);
    goto out;
  }
  doc_ready = true;

  const yaml_node_t *root = yaml_document_get_root_node(&doc);
  yaml_mark_t start = {0};
  if (!root || node_is_null(root)) {
    rc = fail_at(&c, root ? root->start_mark : start, "",
                 "the file is empty; expected a mapping of job fields (ranks, program, ...)");
    goto out;
  }
  if (root->type != YAML_MAPPING_NODE) {
    rc = fail_type(&c, root, "", "a mapping of job fields at the top level");
    goto out;
  }
  rc = walk_section(&c, &job_section, root, "");
  if (rc) goto out;
  if (job->min_ranks > job->ranks) {
    /* A rule across two fields: point at min_ranks, which the user set on purpose. */
    yaml_mark_t mark = root->start_mark;
    for (const yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
      const yaml_node_t *k = yaml_document_get_node(&doc, p->key);
      const yaml_node_t *v = yaml_document_get_node(&doc, p->value);
      if (k && v && k->type == YAML_SCALAR_NODE && k->data.scalar.length == 9 &&
          memcmp(k->data.scalar.value, "min_ranks", 9) == 0)
        mark = v->start_mark;
    }
    rc = fail_at(&c, mark, "min_ranks", "expected at most ranks (%d), got %d", job->ranks, job->min_ranks);
    goto out;
  }
  if (!job->name && !(job->name = name_from(name_source, true, "job"))) {
    rc = fail_nomem(&c);
    goto out;
  }
  *job_out = job;
  job = NULL;
out:
  if (doc_ready) yaml_document_delete(&doc);
  if (parser_ready) yaml_parser_delete(&parser);
  ftl_job_destroy(job);
  return rc;
}

ftl_err ftl_job_parse_bytes(const char *data, size_t size, const char *name_for_errors, const char *base_dir,
                            ftl_job **job_out, ftl_diag *d) {
  if (!job_out || (!data && size > 0))
    return ftl_diag_fail(d, FTL_ERR_INVAL, "ftl_job_parse_bytes: NULL %s", job_out ? "data" : "job_out");
  *job_out = NULL;
  return parse_common(data ? data : "", size, name_for_errors ? name_for_errors : "<job spec>", name_for_errors,
                      base_dir, NULL, job_out, d);
}

/* The spec's folder, made absolute against the current folder so that the paths joined to it
 * stay right after the launcher changes folder. Falls back to the relative folder when the
 * current one cannot be named. Returns NULL only when out of memory. */
static char *spec_dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash == path ? ftl_strdup("/") : slash ? dup_len(path, (size_t)(slash - path)) : ftl_strdup(".");
  if (!dir || dir[0] == '/') return dir;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return dir;
  char *abs = strcmp(dir, ".") == 0 ? ftl_strdup(cwd) : join_path(cwd, dir);
  ftl_free(dir);
  return abs;
}

ftl_err ftl_job_parse_file(const char *path, ftl_job **job_out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  char *data = NULL, *dir = NULL;
  size_t size = 0;
  ftl_diag read_diag = {{0}};
  if (!path || !job_out)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "ftl_job_parse_file: NULL %s", path ? "job_out" : "path");
  *job_out = NULL;
  /* One byte over the limit is enough to tell "too large" apart from "exactly the limit". */
  rc = ftl_read_file(path, JOB_MAX_BYTES + 1, &data, &size, &read_diag);
  if (rc == FTL_ERR_NOTFOUND || rc == FTL_ERR_IO) {
    /* ftl_read_file returns straight after the failing open or read (a close and a free that
     * succeed leave errno alone), so errno still names the cause. */
    int err = errno;
    rc = ftl_diag_fail(d, rc, "cannot read %s: %s", path, err ? strerror(err) : read_diag.msg);
    goto out;
  }
  if (rc == FTL_ERR_RANGE) {
    rc = ftl_diag_fail(d, FTL_ERR_SPEC, "%s: too large for a job spec (the limit is %zu bytes)", path,
                       JOB_MAX_BYTES);
    goto out;
  }
  if (rc) {
    rc = ftl_diag_fail(d, rc, "%s", read_diag.msg);
    goto out;
  }
  dir = spec_dir_of(path);
  if (!dir) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "%s: out of memory while reading the job spec", path);
    goto out;
  }
  rc = parse_common(data, size, path, path, dir, path, job_out, d);
out:
  ftl_free(dir);
  ftl_free(data);
  return rc;
}

ftl_err ftl_job_from_argv(int ranks, int argc, char *const argv[], ftl_job **job_out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  ftl_job *job = NULL;
  size_t count = 0;
  if (!job_out) return ftl_diag_fail(d, FTL_ERR_INVAL, "ftl_job_from_argv: NULL job_out");
  *job_out = NULL;
  if (ranks <= 0) return ftl_diag_fail(d, FTL_ERR_SPEC, "-n: expected an integer > 0, got %d", ranks);
  if (ranks > JOB_RANKS_MAX)
    return ftl_diag_fail(d, FTL_ERR_SPEC, "-n: expected an integer <= %d, got %d", JOB_RANKS_MAX, ranks);
  if (argc < 1 || !argv || !argv[0] || !argv[0][0])
    return ftl_diag_fail(d, FTL_ERR_SPEC, "no program given (expected: ftl run -n N -- PROGRAM [ARGS...])");
  rc = FTL_ERR_NOMEM; /* every failure below is an allocation */
  job = job_new();
  if (!job) goto out;
  job->ranks = ranks;
  if (!(job->name = name_from(argv[0], false, "cli"))) goto out;
  if (!(job->program = ftl_strdup(argv[0]))) goto out;
  while ((int)count + 1 < argc && argv[count + 1]) count++;
  free_strv(job->args);
  if (!(job->args = ftl_calloc(count + 1, sizeof *job->args))) goto out;
  for (size_t i = 0; i < count; i++) {
    if (!(job->args[i] = ftl_strdup(argv[i + 1]))) goto out;
    job->args_count = i + 1;
  }
  *job_out = job;
  job = NULL;
  rc = FTL_OK;
out:
  if (rc) ftl_diag_fail(d, rc, "out of memory building the job from the command line");
  ftl_job_destroy(job);
  return rc;
}
