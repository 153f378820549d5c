/* launcher/yaml_bind.h: a table-driven binder from a YAML document to a C struct, with errors that
 * name the file, line, column and field. The job spec (jobspec.c) is its first user; a new spec
 * section, or another small config file, is a table of rows, not a copy of a parser.
 *
 * A schema is a tree of sections; a section is a table of fields; a field row says the key, the
 * kind of value it takes (string, integer, seconds, choice, argument list, environment, nested
 * section), flags (required, non-empty, a name, a path relative to the file), bounds, a default,
 * and the offset in the target struct where the value goes. One walker applies any table to any
 * mapping: unknown keys, duplicate keys, null values and missing required fields are errors.
 *
 * How values are read (YAML 1.2 core schema, quoted means string, tags ignored, anchors and
 * aliases followed, merge keys unsupported, size/node/depth/expansion/list limits) and every message's form are
 * documented for the job spec in docs/job-spec.md; they hold for every user of the binder:
 *   <file>:<line>:<column>: field '<dotted.path>': <what is wrong>
 *
 * Deliberately not here: any knowledge of what the fields mean (rules across fields, defaults that
 * depend on the file's name, looking programs up): those stay with each schema's owner.
 * Not thread-safe per document; reentrant otherwise (no global state). */
#ifndef FTL_LAUNCHER_YAML_BIND_H
#define FTL_LAUNCHER_YAML_BIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftl/error.h"

/* What a field holds, and the C type at its offset. */
typedef enum ln_yb_kind {
  FTL_YB_STRING,  /* a non-null scalar, kept as written; char * (owned, freed by the target's owner) */
  FTL_YB_INT,     /* a decimal integer in [min, max]; int */
  FTL_YB_SECONDS, /* seconds > 0 and <= max, may be fractional; int64_t milliseconds (at least 1) */
  FTL_YB_ENUM,    /* one word of choices; an int-sized enum */
  FTL_YB_ARGV,    /* a sequence of scalars; NULL-terminated char ** plus a size_t count at count_offset */
  FTL_YB_ENV,     /* a mapping NAME: scalar; NULL-terminated "NAME=VALUE" strings plus a size_t count */
  FTL_YB_SECTION, /* a mapping read with its own table (sub) into the same target */
  FTL_YB_NUMBER,  /* a finite number, integer or float (.inf and .nan refused); double */
} ln_yb_kind;

enum {
  FTL_YB_REQUIRED = 1 << 0,
  FTL_YB_NONEMPTY = 1 << 1,      /* FTL_YB_STRING: "" is an error */
  FTL_YB_NAME = 1 << 2,          /* FTL_YB_STRING: 1 to FTL_YB_NAME_MAX of [A-Za-z0-9._-], not starting with '.' */
  FTL_YB_PATH = 1 << 3,          /* FTL_YB_STRING: a relative path is joined to the file's folder */
  FTL_YB_PATH_IF_SLASH = 1 << 4, /* FTL_YB_STRING: the same, only when it has a '/' (else a name on PATH) */
  FTL_YB_MARK_SET = 1 << 5,      /* any kind: the int at count_offset becomes 1 when the key is given, so an
                                    optional number or a section of defaults can tell "absent" apart */
};

#define FTL_YB_NAME_MAX 100
/* The most rows one section may have (the walker tracks duplicates in an array this long). */
#define FTL_YB_SECTION_MAX_FIELDS 32

typedef struct ln_yb_choice {
  const char *word;
  int value;
} ln_yb_choice;

typedef struct ln_yb_section ln_yb_section;

typedef struct ln_yb_field {
  const char *key;
  ln_yb_kind kind;
  unsigned flags;
  size_t offset;                /* where the value goes in the target */
  size_t count_offset;          /* FTL_YB_ARGV, FTL_YB_ENV: where the size_t count goes;
                                   FTL_YB_MARK_SET: where the int "was given" flag goes */
  int64_t min, max;             /* FTL_YB_INT: bounds; FTL_YB_SECONDS: max is the most seconds */
  int64_t def;                  /* FTL_YB_INT, FTL_YB_ENUM: default; FTL_YB_SECONDS: default in ms */
  const ln_yb_choice *choices; /* FTL_YB_ENUM: ended by a NULL word */
  const ln_yb_section *sub;    /* FTL_YB_SECTION */
} ln_yb_field;

struct ln_yb_section {
  const ln_yb_field *fields;
  size_t count;
};

#define FTL_YB_SECTION_OF(rows) {(rows), sizeof(rows) / sizeof((rows)[0])}

/* A whole file's schema: the top-level table, the limits, and the words its messages use. */
typedef struct ln_yb_schema {
  const ln_yb_section *root;
  const char *noun;          /* "job spec": "too large for a job spec", "a job spec is one document" */
  const char *root_items;    /* "job fields": "expected a mapping of job fields at the top level" */
  const char *root_example;  /* "ranks, program, ...": what an empty file is told to hold */
  size_t max_bytes;          /* the file's size limit */
  size_t max_nodes;          /* YAML nodes (scalars, sequences, mappings, aliases each once) */
  size_t max_depth;          /* nesting */
  /* What the document becomes with every alias replaced by what it names (0: the FTL_YB_DEFAULT_
   * value): a few bytes of aliases can stand for gigabytes, which the node limit does not see.
   * An alias to a collection that holds it (a cycle) is infinite and always refused. */
  size_t max_expanded_bytes; /* scalar text, each alias counting its whole anchor's */
  size_t max_expanded_nodes; /* nodes, the same way */
  /* Every FTL_YB_ARGV and FTL_YB_ENV field (0: the default): what a program's argv or envp can
   * take; Linux refuses one string of 128 KiB or more (MAX_ARG_STRLEN) with E2BIG. */
  size_t max_list_items;     /* items (arguments, variables) in one list */
  size_t max_item_bytes;     /* bytes of one argument, or of one NAME=VALUE */
  size_t max_list_bytes;     /* bytes of one list's items together, each counting one more for its end */
} ln_yb_schema;

/* The deepest nesting any schema may allow (the first pass keeps one entry per open level). */
#define FTL_YB_MAX_DEPTH_LIMIT 256
#define FTL_YB_DEFAULT_EXPANDED_BYTES ((size_t)4 << 20)
#define FTL_YB_DEFAULT_EXPANDED_NODES ((size_t)100000)
#define FTL_YB_DEFAULT_LIST_ITEMS ((size_t)4096)
#define FTL_YB_DEFAULT_ITEM_BYTES ((size_t)131071)
#define FTL_YB_DEFAULT_LIST_BYTES ((size_t)1 << 20)

/* A parsed document, kept after binding for rules across fields (ln_yb_fail_field). */
typedef struct ln_yb_doc ln_yb_doc;

/* Sets every field of section (and its sub-sections) in target to its default: integers, choices
 * and seconds get def; strings and lists are left as they are (the owner sets NULL / empty). */
void ln_yb_apply_defaults(const ln_yb_section *section, void *target);

/* Parses data (size bytes; file names it in messages; relative paths are joined to base_dir, NULL:
 * kept as written) and binds its top-level mapping to schema->root into target. Errors:
 * FTL_ERR_SPEC with the message in d, FTL_ERR_NOMEM. On success *doc_out (when not NULL) gets the
 * document, freed by ln_yb_doc_free; on failure it is NULL. Fields already bound when an error is
 * found stay in target (the owner frees target as a whole). */
ftl_err ln_yb_parse(const char *data, size_t size, const ln_yb_schema *schema, const char *file,
                     const char *base_dir, void *target, ln_yb_doc **doc_out, ftl_diag *d);

/* An error about a field whose value is valid alone but not with another's: FTL_ERR_SPEC with
 * "<file>:<line>:<col>: field '<path>': <detail>", pointing at the value of path (a top-level key,
 * or section.key) when the document has it, else at the top-level mapping. */
ftl_err ln_yb_fail_field(const ln_yb_doc *doc, const char *path, ftl_diag *d, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Whether the document gives path (a top-level key, or section.key) at all: a list's count of 0
 * cannot tell an empty list from an absent one. */
bool ln_yb_has_field(const ln_yb_doc *doc, const char *path);

void ln_yb_doc_free(ln_yb_doc *doc);

/* Helpers the owners of targets use too. */
void ln_yb_free_strv(char **v);                        /* a NULL-terminated list; accepts NULL */
char *ln_yb_strndup(const char *s, size_t len);        /* NULL when out of memory */
bool ln_yb_name_char_ok(char ch);                      /* [A-Za-z0-9._-] */
/* base_dir + "/" + rel, with rel's leading "./" dropped; base_dir NULL or "" keeps rel. */
char *ln_yb_join_path(const char *base_dir, const char *rel);

#endif
