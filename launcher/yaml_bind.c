/* launcher/yaml_bind.c: the table-driven YAML binder behind launcher/yaml_bind.h.
 *
 * How it works: libyaml's document API (yaml_parser_load) turns the bytes into a graph of nodes,
 * each with its line and column, after a bounded first pass over libyaml's events has rejected
 * syntax errors, second documents, deep nests and node floods cheaply. One walker then applies a
 * section's table to a mapping node, calling one setter per field kind.
 *
 * Map:
 *   scalars ........... the YAML 1.2 core-schema reading of plain scalars
 *   messages .......... "<file>:<line>:<col>: field '<path>': <what is wrong>"
 *   defaults, strings
 *   setters ........... one function per field kind
 *   the walker ........ unknown keys, duplicates, required fields
 *   loading YAML ...... a bounded event pass, then the document
 *   public functions .. parse and bind, errors across fields
 *
 * Why one file (issue 33): it is the one file that includes libyaml's header. Its scalars,
 * messages, setters, walker and loading all work on libyaml's nodes, events or marks, and all but
 * the scalars report through one private context (parse_ctx, fail_at), so every message keeps one
 * form; split, they would need a private header that shows libyaml's types to a second file. The
 * schemas are not here: each lives with its owner (the job spec's in jobspec.c). */
#include "launcher/yaml_bind.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "ftl/core.h"

/* How much of a value or key a message quotes before cutting it with "...". */
#define QUOTE_MAX 60

#define FIELD_AT(target, f, type) ((type *)(void *)((char *)(target) + (f)->offset))
#define COUNT_AT(target, f) ((size_t *)(void *)((char *)(target) + (f)->count_offset))

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
  void *target;         /* what the fields are bound into */
  const ln_yb_schema *schema;
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
  return ftl_diag_fail(c->d, FTL_ERR_NOMEM, "%s: out of memory while reading the %s", c->file, c->schema->noun);
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

/* A schema's limit, or the binder's default where the schema leaves it 0. */
static size_t limit_or(size_t v, size_t def) { return v ? v : def; }

/* The list limits of FTL_YB_ARGV and FTL_YB_ENV, checked item by item before anything is copied,
 * so an alias repeated thousands of times costs nothing: index is the item's place, item_bytes its
 * size, *total the list's bytes so far (each item one more for its end, as in an argv). */
static ftl_err check_list_item(const parse_ctx *c, yaml_mark_t mark, const char *item_path, size_t index,
                               size_t item_bytes, size_t *total) {
  const ln_yb_schema *s = c->schema;
  size_t max_items = limit_or(s->max_list_items, FTL_YB_DEFAULT_LIST_ITEMS);
  size_t max_item = limit_or(s->max_item_bytes, FTL_YB_DEFAULT_ITEM_BYTES);
  size_t max_total = limit_or(s->max_list_bytes, FTL_YB_DEFAULT_LIST_BYTES);
  if (index >= max_items)
    return fail_at(c, mark, item_path, "too many items: the limit is %zu in one list", max_items);
  if (item_bytes > max_item)
    return fail_at(c, mark, item_path, "%zu bytes long: the limit is %zu bytes for one item", item_bytes, max_item);
  *total += item_bytes + 1;
  if (*total > max_total)
    return fail_at(c, mark, item_path, "the list reaches %zu bytes here: the limit is %zu bytes for one list", *total,
                   max_total);
  return FTL_OK;
}

/* ---- defaults, strings and paths --------------------------------------------------------- */

void ln_yb_apply_defaults(const ln_yb_section *s, void *target) {
  for (size_t i = 0; i < s->count; i++) {
    const ln_yb_field *f = &s->fields[i];
    switch (f->kind) {
    case FTL_YB_INT:
    case FTL_YB_ENUM:
      *FIELD_AT(target, f, int) = (int)f->def;
      break;
    case FTL_YB_SECONDS:
      *FIELD_AT(target, f, int64_t) = f->def;
      break;
    case FTL_YB_SECTION:
      ln_yb_apply_defaults(f->sub, target);
      break;
    case FTL_YB_NUMBER:
      *FIELD_AT(target, f, double) = (double)f->def;
      break;
    case FTL_YB_STRING:
    case FTL_YB_ARGV:
    case FTL_YB_ENV:
      break; /* NULL and the empty list, set by the target's owner */
    }
  }
}

char *ln_yb_strndup(const char *s, size_t len) {
  char *copy = ftl_malloc(len + 1);
  if (!copy) return NULL;
  memcpy(copy, s, len);
  copy[len] = '\0';
  return copy;
}

void ln_yb_free_strv(char **v) {
  if (!v) return;
  for (char **p = v; *p; p++) ftl_free(*p);
  ftl_free(v);
}

bool ln_yb_name_char_ok(char ch) {
  return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || is_digit(ch) || ch == '.' ||
         ch == '_' || ch == '-';
}

/* base_dir + "/" + rel, with rel's leading "./" dropped so the result reads as a person would
 * write it. rel must be relative; base_dir NULL keeps rel as written. */
char *ln_yb_join_path(const char *base_dir, const char *rel) {
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

/* One entry of an argv or env list: not null (empty_what names what "" would write instead), a
 * scalar (else "expected <want>"), no NUL, and the list still within its limits with this entry's
 * prefix_bytes + its own bytes (an env entry is NAME=value). One set of rules for both lists. */
static ftl_err check_list_scalar(const parse_ctx *c, const yaml_node_t *item, const char *path, const char *empty_what,
                                 const char *want, size_t index, size_t prefix_bytes, size_t *total) {
  if (node_is_null(item))
    return fail_at(c, item->start_mark, path, "missing a value (write \"\" for an empty %s)", empty_what);
  if (item->type != YAML_SCALAR_NODE) return fail_type(c, item, path, want);
  ftl_err rc = check_no_nul(c, item, path);
  if (rc) return rc;
  return check_list_item(c, item->start_mark, path, index, prefix_bytes + scalar_len(item), total);
}

static ftl_err set_string(const parse_ctx *c, const ln_yb_field *f, const yaml_node_t *n, const char *path) {
  if (n->type != YAML_SCALAR_NODE) return fail_type(c, n, path, "a string");
  ftl_err rc = check_no_nul(c, n, path);
  if (rc) return rc;
  const char *text = scalar_text(n);
  size_t len = scalar_len(n);
  if ((f->flags & FTL_YB_NONEMPTY) && len == 0) return fail_type(c, n, path, "a non-empty string");
  if (f->flags & FTL_YB_NAME) {
    bool ok = len >= 1 && len <= FTL_YB_NAME_MAX && text[0] != '.';
    for (size_t i = 0; ok && i < len; i++) ok = ln_yb_name_char_ok(text[i]);
    if (!ok)
      return fail_type(c, n, path, "1 to 100 characters from A-Z a-z 0-9 . _ - not starting with '.'");
  }
  char *value;
  if (((f->flags & FTL_YB_PATH) || ((f->flags & FTL_YB_PATH_IF_SLASH) && strchr(text, '/'))) && text[0] != '/')
    value = ln_yb_join_path(c->base_dir, text);
  else
    value = ln_yb_strndup(text, len);
  if (!value) return fail_nomem(c);
  char **slot = FIELD_AT(c->target, f, char *);
  ftl_free(*slot);
  *slot = value;
  return FTL_OK;
}

static void describe_int_bounds(const ln_yb_field *f, char *out, size_t size) {
  msg_fmt(out, size, "an integer from %lld to %lld", (long long)f->min, (long long)f->max);
}

static ftl_err set_int(const parse_ctx *c, const ln_yb_field *f, const yaml_node_t *n, const char *path) {
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
  *FIELD_AT(c->target, f, int) = (int)v;
  return FTL_OK;
}

static ftl_err set_seconds(const parse_ctx *c, const ln_yb_field *f, const yaml_node_t *n, const char *path) {
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
  *FIELD_AT(c->target, f, int64_t) = ms > 0 ? ms : 1;
  return FTL_OK;
}

static ftl_err set_number(const parse_ctx *c, const ln_yb_field *f, const yaml_node_t *n, const char *path) {
  scalar_type t = n->type == YAML_SCALAR_NODE ? scalar_type_of(n) : SC_STRING;
  if (n->type != YAML_SCALAR_NODE || (t != SC_INT && t != SC_FLOAT)) return fail_type(c, n, path, "a number");
  /* As in set_seconds: strtod reads what text_is_float/int admitted, and not .inf/.nan. */
  const char *text = scalar_text(n);
  char *end = NULL;
  double v = strtod(text, &end);
  if (end != text + scalar_len(n) || !isfinite(v)) {
    char quoted[4 * QUOTE_MAX + 8];
    quote_text(text, scalar_len(n), quoted, sizeof quoted);
    return fail_at(c, n->start_mark, path, "expected a finite number, got '%s'", quoted);
  }
  *FIELD_AT(c->target, f, double) = v;
  return FTL_OK;
}

static ftl_err set_enum(const parse_ctx *c, const ln_yb_field *f, const yaml_node_t *n, const char *path) {
  if (n->type == YAML_SCALAR_NODE) {
    for (const ln_yb_choice *ch = f->choices; ch->word; ch++) {
      if (text_is(scalar_text(n), scalar_len(n), ch->word)) {
        *FIELD_AT(c->target, f, int) = ch->value;
        return FTL_OK;
      }
    }
  }
  char expected[256] = "one of ";
  size_t used = strlen(expected);
  for (const ln_yb_choice *ch = f->choices; ch->word; ch++) {
    int n_written = snprintf(expected + used, sizeof expected - used, "%s%s", ch == f->choices ? "" : ", ",
                             ch->word);
    if (n_written < 0 || (size_t)n_written >= sizeof expected - used) break;
    used += (size_t)n_written;
  }
  return fail_type(c, n, path, expected);
}

static ftl_err set_argv(const parse_ctx *c, const ln_yb_field *f, const yaml_node_t *n, const char *path) {
  ftl_err rc = FTL_OK;
  char **list = NULL;
  if (n->type != YAML_SEQUENCE_NODE) return fail_type(c, n, path, "a sequence of strings");
  size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start), total = 0;
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
    rc = check_list_scalar(c, item, item_path, "argument", "a string", i, 0, &total);
    if (rc) goto out;
    list[i] = ln_yb_strndup(scalar_text(item), scalar_len(item));
    if (!list[i]) {
      rc = fail_nomem(c);
      goto out;
    }
  }
  ln_yb_free_strv(*FIELD_AT(c->target, f, char **));
  *FIELD_AT(c->target, f, char **) = list;
  *COUNT_AT(c->target, f) = count;
  list = NULL;
out:
  ln_yb_free_strv(list);
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

static ftl_err set_env(const parse_ctx *c, const ln_yb_field *f, const yaml_node_t *n, const char *path) {
  ftl_err rc = FTL_OK;
  char **list = NULL;
  if (n->type != YAML_MAPPING_NODE) return fail_type(c, n, path, "a mapping of NAME: value");
  const yaml_node_pair_t *pairs = n->data.mapping.pairs.start;
  size_t count = (size_t)(n->data.mapping.pairs.top - pairs), total = 0;
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
    size_t klen = scalar_len(key);
    rc = check_list_scalar(c, value, key_path, "one", "a string or a number", i, klen + 1, &total);
    if (rc) goto out;
    size_t vlen = scalar_len(value);
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
  ln_yb_free_strv(*FIELD_AT(c->target, f, char **));
  *FIELD_AT(c->target, f, char **) = list;
  *COUNT_AT(c->target, f) = count;
  list = NULL;
out:
  ln_yb_free_strv(list);
  return rc;
}

/* ---- the walker -------------------------------------------------------------------------- */

static ftl_err walk_section(const parse_ctx *c, const ln_yb_section *s, const yaml_node_t *map, const char *prefix);

static ftl_err set_field(const parse_ctx *c, const ln_yb_field *f, const yaml_node_t *value, const char *path) {
  if (node_is_null(value)) return fail_at(c, value->start_mark, path, "missing a value");
  if (f->flags & FTL_YB_MARK_SET) *(int *)(void *)((char *)c->target + f->count_offset) = 1;
  switch (f->kind) {
  case FTL_YB_STRING:
    return set_string(c, f, value, path);
  case FTL_YB_INT:
    return set_int(c, f, value, path);
  case FTL_YB_SECONDS:
    return set_seconds(c, f, value, path);
  case FTL_YB_ENUM:
    return set_enum(c, f, value, path);
  case FTL_YB_ARGV:
    return set_argv(c, f, value, path);
  case FTL_YB_ENV:
    return set_env(c, f, value, path);
  case FTL_YB_NUMBER:
    return set_number(c, f, value, path);
  case FTL_YB_SECTION:
    if (value->type != YAML_MAPPING_NODE) return fail_type(c, value, path, "a mapping");
    return walk_section(c, f->sub, value, path);
  }
  return fail_at(c, value->start_mark, path, "internal error: unknown field kind %d", (int)f->kind);
}

/* Reads one mapping with one table. It descends only into FTL_YB_SECTION rows, so the depth of the
 * walk is the depth of the tables, whatever the input: libyaml shares aliased nodes and an
 * anchor may even contain its own alias (a cycle), neither of which can make this loop. */
static ftl_err walk_section(const parse_ctx *c, const ln_yb_section *s, const yaml_node_t *map, const char *prefix) {
  const yaml_node_t *seen[FTL_YB_SECTION_MAX_FIELDS] = {0};
  char path[320];
  for (const yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top;
       pair++) {
    const yaml_node_t *key = yaml_document_get_node(c->doc, pair->key);
    const yaml_node_t *value = yaml_document_get_node(c->doc, pair->value);
    if (!key || !value) return fail_at(c, map->start_mark, prefix, "an entry has no key or no value");
    if (key->type != YAML_SCALAR_NODE) return fail_type(c, key, prefix, "field names as keys");
    path_join(path, sizeof path, prefix, scalar_text(key), scalar_len(key));
    const ln_yb_field *f = NULL;
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
    if ((s->fields[i].flags & FTL_YB_REQUIRED) && !seen[i]) {
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

/* What the first pass keeps per anchor: the expanded size of the node it names. */
typedef struct anchor_entry {
  char *name;     /* owned; NULL: a free slot */
  size_t bytes;   /* scalar text with every alias inside replaced */
  size_t nodes;
  bool open;      /* a collection still being read: an alias to it is a cycle */
} anchor_entry;

/* Anchors by name: open addressing, sized once for the node limit (an anchor is on a node, so
 * there are never more anchors than nodes, and the table is at most half full). A name defined
 * again replaces the earlier definition here; libyaml's loader then refuses the file anyway. */
typedef struct anchor_table {
  anchor_entry *slots;
  size_t cap; /* a power of two */
} anchor_table;

static size_t anchor_hash(const char *name) {
  size_t h = 1469598103934665603u; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 1099511628211u;
  return h;
}

/* The entry for name: the existing one, or a free slot (name NULL) where it would go. */
static anchor_entry *anchor_find(const anchor_table *t, const char *name) {
  size_t i = anchor_hash(name) & (t->cap - 1);
  while (t->slots[i].name && strcmp(t->slots[i].name, name) != 0) i = (i + 1) & (t->cap - 1);
  return &t->slots[i];
}

static void anchor_table_free(anchor_table *t) {
  for (size_t i = 0; t->slots && i < t->cap; i++) ftl_free(t->slots[i].name);
  ftl_free(t->slots);
}

/* One open sequence or mapping in the first pass: where it is for messages, and the expanded size
 * of what it holds so far. */
typedef struct open_node {
  bool is_map;
  size_t children;     /* complete children so far (a mapping's keys and values both count) */
  char key[4 * QUOTE_MAX + 8]; /* a mapping: its latest key, quoted, for the value's path */
  anchor_entry *anchor; /* its anchor's entry, or NULL */
  size_t bytes, nodes;
} open_node;

typedef struct shape_pass {
  open_node stack[FTL_YB_MAX_DEPTH_LIMIT + 1];
  size_t depth;
  anchor_table anchors;
  size_t bytes, nodes; /* the whole document, expanded */
} shape_pass;

/* The dotted path of the node an event is about ("args[41]", "env.A"), for messages. A key's
 * path is its mapping's, like the walker's messages about keys. */
static void shape_path(const shape_pass *sp, bool event_is_key, char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < sp->depth; i++) {
    const open_node *o = &sp->stack[i];
    if (o->is_map && i + 1 == sp->depth && event_is_key) break;
    if (o->is_map) msg_fmt(out + used, size - used, "%s%s", used ? "." : "", o->key);
    else msg_fmt(out + used, size - used, "[%zu]", o->children);
    used = strlen(out);
  }
}

/* A node of expanded size (bytes, nodes) is complete at the current level: it counts for its
 * parent, and in a mapping a key's text becomes the path of the value after it. */
static void shape_add(shape_pass *sp, const char *key, size_t key_len, size_t bytes, size_t nodes) {
  if (sp->depth == 0) return;
  open_node *o = &sp->stack[sp->depth - 1];
  if (o->is_map && o->children % 2 == 0) {
    if (key) quote_text(key, key_len, o->key, sizeof o->key);
    else msg_fmt(o->key, sizeof o->key, "?");
  }
  o->children++;
  o->bytes += bytes;
  o->nodes += nodes;
}

/* A node starts here with an anchor: its entry (made open until the node ends), or NULL. */
static ftl_err shape_anchor(const parse_ctx *c, shape_pass *sp, const yaml_char_t *anchor, anchor_entry **out) {
  *out = NULL;
  if (!anchor) return FTL_OK;
  if (!sp->anchors.slots) {
    size_t cap = 64;
    while (cap < 2 * c->schema->max_nodes + 2) cap *= 2;
    sp->anchors.slots = ftl_calloc(cap, sizeof *sp->anchors.slots);
    if (!sp->anchors.slots) return fail_nomem(c);
    sp->anchors.cap = cap;
  }
  anchor_entry *e = anchor_find(&sp->anchors, (const char *)anchor);
  if (!e->name && !(e->name = ftl_strdup((const char *)anchor))) return fail_nomem(c);
  e->bytes = e->nodes = 0;
  e->open = true;
  *out = e;
  return FTL_OK;
}

/* Counts a node of expanded size (bytes, nodes) into the whole document and refuses a document
 * that grows past the schema's limits, naming where. */
static ftl_err shape_grow(const parse_ctx *c, shape_pass *sp, const yaml_event_t *ev, bool is_key, size_t bytes,
                          size_t nodes) {
  size_t max_bytes = limit_or(c->schema->max_expanded_bytes, FTL_YB_DEFAULT_EXPANDED_BYTES);
  size_t max_nodes = limit_or(c->schema->max_expanded_nodes, FTL_YB_DEFAULT_EXPANDED_NODES);
  sp->bytes += bytes;
  sp->nodes += nodes;
  if (sp->bytes <= max_bytes && sp->nodes <= max_nodes) return FTL_OK;
  char path[320];
  shape_path(sp, is_key, path, sizeof path);
  if (sp->bytes > max_bytes)
    return fail_at(c, ev->start_mark, path,
                   "with its aliases expanded the document holds more than %zu bytes of text (the limit); "
                   "a %s is far smaller", max_bytes, c->schema->noun);
  return fail_at(c, ev->start_mark, path,
                 "with its aliases expanded the document has more than %zu YAML nodes (the limit); a %s is far smaller",
                 max_nodes, c->schema->noun);
}

/* The event pass's work on one event: depth, node counts and the expansion of aliases. */
static ftl_err shape_event(const parse_ctx *c, shape_pass *sp, const yaml_event_t *ev) {
  ftl_err rc = FTL_OK;
  const open_node *top = sp->depth ? &sp->stack[sp->depth - 1] : NULL;
  bool is_key = top && top->is_map && top->children % 2 == 0;
  anchor_entry *anchor = NULL;
  switch (ev->type) {
  case YAML_SEQUENCE_START_EVENT:
  case YAML_MAPPING_START_EVENT: {
    if (sp->depth + 1 > c->schema->max_depth || sp->depth + 1 > FTL_YB_MAX_DEPTH_LIMIT)
      return fail_at(c, ev->start_mark, "", "nested deeper than %zu levels", c->schema->max_depth);
    bool is_map = ev->type == YAML_MAPPING_START_EVENT;
    const yaml_char_t *name = is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
    if ((rc = shape_grow(c, sp, ev, is_key, 0, 1))) return rc;
    if ((rc = shape_anchor(c, sp, name, &anchor))) return rc;
    open_node *o = &sp->stack[sp->depth++];
    memset(o, 0, sizeof *o);
    o->is_map = is_map;
    o->anchor = anchor;
    o->nodes = 1;
    return FTL_OK;
  }
  case YAML_SEQUENCE_END_EVENT:
  case YAML_MAPPING_END_EVENT: {
    if (sp->depth == 0) return FTL_OK;
    open_node done = sp->stack[--sp->depth];
    if (done.anchor) {
      done.anchor->bytes = done.bytes;
      done.anchor->nodes = done.nodes;
      done.anchor->open = false;
    }
    shape_add(sp, NULL, 0, done.bytes, done.nodes);
    return FTL_OK;
  }
  case YAML_SCALAR_EVENT: {
    size_t len = ev->data.scalar.length;
    if ((rc = shape_grow(c, sp, ev, is_key, len, 1))) return rc;
    if ((rc = shape_anchor(c, sp, ev->data.scalar.anchor, &anchor))) return rc;
    if (anchor) {
      anchor->bytes = len;
      anchor->nodes = 1;
      anchor->open = false;
    }
    shape_add(sp, (const char *)ev->data.scalar.value, len, len, 1);
    return FTL_OK;
  }
  case YAML_ALIAS_EVENT: {
    /* An undefined alias is left to the loader, which names it in libyaml's words. */
    const anchor_entry *e = sp->anchors.slots ? anchor_find(&sp->anchors, (const char *)ev->data.alias.anchor) : NULL;
    size_t bytes = e && e->name ? e->bytes : 0, nodes = e && e->name ? e->nodes : 1;
    if (e && e->name && e->open) {
      char path[320], quoted[4 * QUOTE_MAX + 8];
      shape_path(sp, is_key, path, sizeof path);
      quote_text(e->name, strlen(e->name), quoted, sizeof quoted);
      return fail_at(c, ev->start_mark, path,
                     "the alias '*%s' is inside the node it names (a cycle, which never ends when expanded)", quoted);
    }
    if ((rc = shape_grow(c, sp, ev, is_key, bytes, nodes))) return rc;
    /* An aliased key is a scalar's text only when the anchor named one; its path reads "?" else. */
    shape_add(sp, NULL, 0, bytes, nodes);
    return FTL_OK;
  }
  case YAML_NO_EVENT:
  case YAML_STREAM_START_EVENT:
  case YAML_STREAM_END_EVENT:
  case YAML_DOCUMENT_START_EVENT:
  case YAML_DOCUMENT_END_EVENT:
    return FTL_OK;
  }
  return FTL_OK;
}

/* A first pass over libyaml's events, before any document is built: rejects syntax errors, a
 * second document, nesting deeper than the schema's depth, more than its node limit nodes and
 * aliases, and a document that aliases make larger than its expansion limits (the "billion
 * laughs"), each as soon as it is seen, so a hostile input costs no more than its first few
 * thousand events. yaml_parser_load cannot be stopped part way, hence the separate pass; libyaml
 * shares aliased nodes rather than copying them, so only this pass can tell what they add up to. */
static ftl_err check_shape(const parse_ctx *c, const char *data, size_t size) {
  ftl_err rc = FTL_OK;
  yaml_parser_t parser;
  yaml_event_t event;
  bool have_event = false;
  size_t nodes = 0, documents = 0;
  shape_pass *sp = ftl_calloc(1, sizeof *sp);
  if (!sp) return fail_nomem(c);
  if (!yaml_parser_initialize(&parser)) {
    ftl_free(sp);
    return fail_nomem(c);
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)data, size);
  for (;;) {
    if (!yaml_parser_parse(&parser, &event)) {
      rc = yaml_fail(c, &parser, data, size);
      goto out;
    }
    have_event = true;
    if (event.type == YAML_DOCUMENT_START_EVENT && ++documents > 1) {
      rc = fail_at(c, event.start_mark, "", "a second YAML document starts here; a %s is one document", c->schema->noun);
      goto out;
    }
    if (event.type == YAML_SEQUENCE_START_EVENT || event.type == YAML_MAPPING_START_EVENT ||
        event.type == YAML_SCALAR_EVENT || event.type == YAML_ALIAS_EVENT)
      nodes++;
    if (nodes > c->schema->max_nodes) {
      rc = fail_at(c, event.start_mark, "", "more than %zu YAML nodes; a %s is far smaller", c->schema->max_nodes, c->schema->noun);
      goto out;
    }
    rc = shape_event(c, sp, &event);
    if (rc) goto out;
    bool done = event.type == YAML_STREAM_END_EVENT;
    yaml_event_delete(&event);
    have_event = false;
    if (done) break;
  }
out:
  if (have_event) yaml_event_delete(&event);
  yaml_parser_delete(&parser);
  anchor_table_free(&sp->anchors);
  ftl_free(sp);
  return rc;
}

/* ---- public functions -------------------------------------------------------------------- */

struct ln_yb_doc {
  yaml_document_t doc;
  const char *file; /* borrowed from the caller of ln_yb_parse, like the messages' file name */
};

ftl_err ln_yb_parse(const char *data, size_t size, const ln_yb_schema *schema, const char *file,
                     const char *base_dir, void *target, ln_yb_doc **doc_out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  yaml_parser_t parser;
  bool parser_ready = false, doc_ready = false;
  ln_yb_doc *yd = NULL;
  if (doc_out) *doc_out = NULL;
  parse_ctx c = {.file = file, .base_dir = base_dir, .target = target, .schema = schema, .d = d};
  if (size > schema->max_bytes)
    return ftl_diag_fail(d, FTL_ERR_SPEC, "%s: too large for a %s (the limit is %zu bytes)", file, schema->noun,
                         schema->max_bytes);
  yd = ftl_calloc(1, sizeof *yd);
  if (!yd) return fail_nomem(&c);
  yd->file = file;
  c.doc = &yd->doc;
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
  if (!yaml_parser_load(&parser, &yd->doc)) {
    rc = yaml_fail(&c, &parser, data, size);
    goto out;
  }
  doc_ready = true;

  const yaml_node_t *root = yaml_document_get_root_node(&yd->doc);
  yaml_mark_t start = {0};
  if (!root || node_is_null(root)) {
    rc = fail_at(&c, root ? root->start_mark : start, "", "the file is empty; expected a mapping of %s (%s)",
                 schema->root_items, schema->root_example);
    goto out;
  }
  if (root->type != YAML_MAPPING_NODE) {
    char expected[160];
    msg_fmt(expected, sizeof expected, "a mapping of %s at the top level", schema->root_items);
    rc = fail_type(&c, root, "", expected);
    goto out;
  }
  rc = walk_section(&c, schema->root, root, "");
out:
  if (parser_ready) yaml_parser_delete(&parser);
  if (rc == FTL_OK && doc_out) {
    *doc_out = yd;
    return FTL_OK;
  }
  if (doc_ready) yaml_document_delete(&yd->doc);
  ftl_free(yd);
  return rc;
}

/* The value node of key in mapping map, or NULL. */
static const yaml_node_t *mapping_value(yaml_document_t *doc, const yaml_node_t *map, const char *key, size_t len) {
  if (!map || map->type != YAML_MAPPING_NODE) return NULL;
  for (const yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    const yaml_node_t *k = yaml_document_get_node(doc, p->key);
    const yaml_node_t *v = yaml_document_get_node(doc, p->value);
    if (k && v && k->type == YAML_SCALAR_NODE && scalar_len(k) == len && memcmp(scalar_text(k), key, len) == 0)
      return v;
  }
  return NULL;
}

/* The value of path (a top-level key, or section.key) in doc, or NULL; *mark (may be NULL) gets
 * where the deepest part of it found starts, else the top-level mapping. */
static const yaml_node_t *path_value(const ln_yb_doc *doc, const char *path, yaml_mark_t *mark) {
  yaml_document_t *ydoc = (yaml_document_t *)(uintptr_t)&doc->doc; /* libyaml's getters are not const */
  const yaml_node_t *root = yaml_document_get_root_node(ydoc);
  if (mark) *mark = root ? root->start_mark : (yaml_mark_t){0};
  const yaml_node_t *at = root;
  for (const char *p = path; at && *p;) {
    size_t n = strcspn(p, ".");
    at = mapping_value(ydoc, at, p, n);
    if (at && mark) *mark = at->start_mark;
    p += n + (p[n] == '.');
  }
  return at;
}

bool ln_yb_has_field(const ln_yb_doc *doc, const char *path) { return doc && path_value(doc, path, NULL); }

ftl_err ln_yb_fail_field(const ln_yb_doc *doc, const char *path, ftl_diag *d, const char *fmt, ...) {
  char detail[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  yaml_mark_t mark;
  path_value(doc, path, &mark);
  return ftl_diag_fail(d, FTL_ERR_SPEC, "%s:%zu:%zu: field '%s': %s", doc->file, mark.line + 1, mark.column + 1, path,
                       detail);
}

void ln_yb_doc_free(ln_yb_doc *doc) {
  if (!doc) return;
  yaml_document_delete(&doc->doc);
  ftl_free(doc);
}
