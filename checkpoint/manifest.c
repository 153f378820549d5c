/* checkpoint/manifest.c: manifest.json <-> ck_manifest, with the validation that makes the
 * manifest safe to act on (see manifest.h and docs/formats/manifest.md).
 *
 * Map: dtype/kind tables; row arithmetic; alloc/free; serialise; parse helpers; parse; validate. */
#include "checkpoint/manifest.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/dtype_table.h"
#include "core/jsonl.h"
#include "ftl/core.h"

/* ---- tables ------------------------------------------------------------------------------ */

static const char *kind_names[] = {"split", "replicated", "blob", "blob_per_rank"};

/* The on-disk dtype names are the manifest names of core's dtype table (core/dtype_table.h). */
const char *ck_dtype_name(ftl_dtype dt) {
  const core_dtype_row *r = core_dtype_of(dt);
  return r ? r->manifest : "?";
}

int ck_dtype_parse(const char *s, ftl_dtype *out) {
  const core_dtype_row *r = core_dtype_find(s, CORE_DT_NAMED_MANIFEST);
  if (!r) return -1;
  *out = (ftl_dtype)r->ftl;
  return 0;
}

const char *ck_kind_name(ck_kind k) { return ((unsigned)k < 4u) ? kind_names[k] : "?"; }

static int kind_parse(const char *s, ck_kind *out) {
  for (int i = 0; i < 4; i++)
    if (strcmp(s, kind_names[i]) == 0) {
      *out = (ck_kind)i;
      return 0;
    }
  return -1;
}

int ck_name_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n >= CK_NAME_MAX || name[0] == '.') return 0;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
          c == '-'))
      return 0;
  }
  return 1;
}

/* ---- rows -------------------------------------------------------------------------------- */

int64_t ck_item_rows(const ck_item *it) { return it->ndim == 0 ? 1 : it->shape[0]; }

uint64_t ck_item_row_bytes(const ck_item *it, int *overflow) {
  uint64_t b = ftl_dtype_size(it->dtype);
  *overflow = 0;
  for (int k = 1; k < it->ndim; k++) {
    if (it->shape[k] < 0 || __builtin_mul_overflow(b, (uint64_t)it->shape[k], &b)) {
      *overflow = 1;
      return 0;
    }
  }
  return b;
}

void ck_split_rows(int64_t rows, int rank, int world, int64_t *start, int64_t *count) {
  int64_t base = rows / world, extra = rows % world;
  *count = base + (rank < extra ? 1 : 0);
  *start = (int64_t)rank * base + (rank < extra ? rank : extra);
}

void ck_shard_file_name(int rank, char out[CK_FILE_MAX]) { snprintf(out, CK_FILE_MAX, "shard-%05d.h5", rank); }

/* ---- alloc/free -------------------------------------------------------------------------- */

ck_manifest *ck_manifest_alloc(int nitems, int world_size) {
  ck_manifest *m = ftl_calloc(1, sizeof *m);
  if (!m) return NULL;
  m->version = CK_MANIFEST_VERSION;
  m->l3 = 1;
  m->nitems = nitems;
  m->world_size = world_size;
  m->items = ftl_calloc(nitems > 0 ? (size_t)nitems : 1, sizeof *m->items);
  m->shards = ftl_calloc(world_size > 0 ? (size_t)world_size : 1, sizeof *m->shards);
  if (!m->items || !m->shards) {
    ck_manifest_free(m);
    return NULL;
  }
  return m;
}

void ck_manifest_free(ck_manifest *m) {
  if (!m) return;
  if (m->shards)
    for (int r = 0; r < m->world_size; r++)
      ftl_free(m->shards[r].pieces);
  ftl_free(m->shards);
  ftl_free(m->items);
  ftl_free(m);
}

int ck_manifest_find_item(const ck_manifest *m, const char *name) {
  for (int i = 0; i < m->nitems; i++)
    if (strcmp(m->items[i].name, name) == 0) return i;
  return -1;
}

/* ---- serialise --------------------------------------------------------------------------- */

/* The encoder writes the text directly (one item, one shard per line) rather than building a
 * jansson tree: a manifest of 16,384 shards is some 600,000 JSON values, and the tree's one
 * allocation per value made the commit of such a step cost a second (docs/scale.md). Keys, their
 * order and the spelling of numbers are the tree's; ck_manifest_parse reads either. */

/* A string as a JSON literal: plain ASCII (ftl's names, files, hex digests, host names) directly,
 * anything else through jansson's encoder, which also refuses what is not UTF-8. */
static ftl_err add_str(core_buf *b, const char *v) {
  int plain = 1;
  for (const unsigned char *p = (const unsigned char *)v; *p && plain; p++)
    plain = *p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\';
  if (plain) {
    ftl_err rc = core_buf_addc(b, '"');
    if (!rc) rc = core_buf_adds(b, v);
    if (!rc) rc = core_buf_addc(b, '"');
    return rc;
  }
  json_t *js = json_string(v);
  char *enc = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
  json_decref(js);
  if (!enc) return FTL_ERR_INVAL;
  ftl_err rc = core_buf_adds(b, enc);
  free(enc); /* jansson's malloc */
  return rc;
}

static ftl_err add_key_str(core_buf *b, const char *key, const char *v) {
  ftl_err rc = core_buf_printf(b, "\"%s\": ", key);
  return rc ? rc : add_str(b, v);
}

static ftl_err add_hex64(core_buf *b, const char *key, uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  char hex[18];
  hex[0] = hex[17] = '"';
  for (int i = 16; i >= 1; i--, v >>= 4) hex[i] = digits[v & 15];
  ftl_err rc = core_buf_printf(b, "\"%s\": ", key);
  return rc ? rc : core_buf_add(b, hex, sizeof hex);
}

/* ", \"key\": <v>" without printf: the pieces' numbers are most of a large manifest's text. */
static ftl_err add_key_i64(core_buf *b, const char *key_lit, int64_t v) {
  char digits[24];
  int n = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    digits[sizeof digits - 1 - n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) digits[sizeof digits - 1 - n++] = '-';
  ftl_err rc = core_buf_adds(b, key_lit);
  return rc ? rc : core_buf_add(b, digits + sizeof digits - n, (size_t)n);
}

static ftl_err encode(const ck_manifest *m, core_buf *b) {
  ftl_err rc = core_buf_printf(b,
                               "{\n \"format\": \"ftl-ckpt-manifest\",\n \"version\": %d,\n \"step\": %" PRId64
                               ",\n \"world_size\": %d,\n \"created_unix_us\": %" PRId64 ",\n ",
                               m->version, m->step, m->world_size, m->created_unix_us);
  if (!rc) rc = add_key_str(b, "job_spec_hash", m->job_spec_hash);
  if (!rc) rc = core_buf_adds(b, ",\n \"checksum\": \"xxh3-64\",\n \"items\": [");
  for (int i = 0; i < m->nitems && !rc; i++) {
    const ck_item *it = &m->items[i];
    rc = core_buf_adds(b, i ? ",\n  {" : "\n  {");
    if (!rc) rc = add_key_str(b, "name", it->name);
    if (!rc) rc = core_buf_printf(b, ", \"kind\": \"%s\", \"dtype\": ", ck_kind_name(it->kind));
    if (!rc) rc = add_str(b, ck_dtype_name(it->dtype));
    if (!rc) rc = core_buf_adds(b, ", \"shape\": [");
    for (int k = 0; k < it->ndim && !rc; k++) rc = core_buf_printf(b, "%s%" PRId64, k ? ", " : "", it->shape[k]);
    if (!rc) rc = core_buf_adds(b, "]}");
  }
  if (!rc) rc = core_buf_adds(b, m->nitems ? "\n ],\n \"shards\": [" : "],\n \"shards\": [");
  int all_l1 = m->world_size > 0, all_l2 = m->world_size > 0;
  for (int r = 0; r < m->world_size && !rc; r++) {
    const ck_shard *sh = &m->shards[r];
    all_l1 &= sh->l1_host[0] != '\0';
    all_l2 &= sh->l2_host[0] != '\0';
    rc = core_buf_printf(b, "%s{\"rank\": %d, ", r ? ",\n  " : "\n  ", sh->rank);
    if (!rc) rc = add_key_str(b, "file", sh->file);
    if (!rc) rc = core_buf_printf(b, ", \"size_bytes\": %" PRId64 ", ", (int64_t)sh->size_bytes);
    if (!rc) rc = add_hex64(b, "checksum", sh->checksum);
    if (!rc && sh->l1_host[0]) {
      rc = core_buf_adds(b, ", ");
      if (!rc) rc = add_key_str(b, "l1_host", sh->l1_host);
    }
    if (!rc && sh->l2_host[0]) {
      rc = core_buf_adds(b, ", ");
      if (!rc) rc = add_key_str(b, "l2_host", sh->l2_host);
    }
    if (!rc) rc = core_buf_adds(b, ", \"pieces\": [");
    for (int p = 0; p < sh->npieces && !rc; p++) {
      const ck_piece *pc = &sh->pieces[p];
      rc = core_buf_adds(b, p ? ", {" : "{");
      if (!rc) rc = add_key_str(b, "item", m->items[pc->item].name);
      if (!rc) rc = add_key_i64(b, ", \"row_start\": ", pc->row_start);
      if (!rc) rc = add_key_i64(b, ", \"row_count\": ", pc->row_count);
      if (!rc) rc = add_key_i64(b, ", \"file_offset\": ", (int64_t)pc->file_offset);
      if (!rc) rc = add_key_i64(b, ", \"size_bytes\": ", (int64_t)pc->size_bytes);
      if (!rc) rc = core_buf_adds(b, ", ");
      if (!rc) rc = add_hex64(b, "checksum", pc->checksum);
      if (!rc) rc = core_buf_addc(b, '}');
    }
    if (!rc) rc = core_buf_adds(b, "]}");
  }
  /* The levels at which the step is complete: L3 always (this file commits it there), L1 when
   * every shard has a copy in some host's L1, L2 when every shard has a partner's copy. Readers
   * take each shard's own l1_host and l2_host. */
  if (!rc) rc = core_buf_adds(b, m->world_size ? "\n ],\n \"levels\": [" : "],\n \"levels\": [");
  if (!rc && all_l1 && (m->l3 || all_l2)) rc = core_buf_adds(b, "\"l1\", ");
  if (!rc && all_l2) rc = core_buf_adds(b, m->l3 ? "\"l2\", " : "\"l2\"");
  if (!rc && !m->l3 && all_l1 && !all_l2) rc = core_buf_adds(b, "\"l1\"");
  if (!rc) rc = core_buf_adds(b, m->l3 ? "\"l3\"]\n}\n" : "]\n}\n");
  return rc;
}

ftl_err ck_manifest_to_json(const ck_manifest *m, char **text_out, size_t *len_out, ftl_diag *d) {
  core_buf b;
  core_buf_init(&b, CK_MANIFEST_MAX_BYTES);
  ftl_err rc = encode(m, &b);
  if (rc) {
    core_buf_free(&b);
    if (rc == FTL_ERR_INVAL) return ftl_diag_fail(d, rc, "the manifest holds a string that is not UTF-8");
    if (rc == FTL_ERR_RANGE) return ftl_diag_fail(d, rc, "the manifest is larger than %u bytes", CK_MANIFEST_MAX_BYTES);
    return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory building the manifest");
  }
  *text_out = core_buf_take(&b, len_out);
  if (!*text_out) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory building the manifest");
  return FTL_OK;
}

/* ---- parse helpers ----------------------------------------------------------------------- */

static int get_int(const json_t *o, const char *key, int64_t min, int64_t max, int64_t *out) {
  json_t *v = json_object_get(o, key);
  if (!json_is_integer(v)) return -1;
  json_int_t x = json_integer_value(v);
  if (x < min || x > max) return -1;
  *out = (int64_t)x;
  return 0;
}

static const char *get_str(const json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

static int parse_hex64(const char *s, uint64_t *out) {
  if (!s || strlen(s) != 16) return -1;
  uint64_t v = 0;
  for (int i = 0; i < 16; i++) {
    char c = s[i];
    int x = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (x < 0) return -1;
    v = v << 4 | (uint64_t)x;
  }
  *out = v;
  return 0;
}

typedef struct span {
  int item;
  int shard;
  int64_t start, count;
} span;

static int cmp_span(const void *a, const void *b) {
  const span *x = a, *y = b;
  if (x->item != y->item) return x->item < y->item ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return 0;
}

typedef struct extent {
  uint64_t off, len;
} extent;

static int cmp_extent(const void *a, const void *b) {
  const extent *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off ? 1 : 0;
}

/* ---- parse ------------------------------------------------------------------------------- */

#define BAD CORE_JSON_BAD

static ftl_err validate(ck_manifest *m, ftl_diag *d);

/* items[i]: name, kind, dtype, shape (a blob is a 1-d u8 item); names unique. */
static ftl_err parse_items(ck_manifest *m, const json_t *items, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  for (int i = 0; i < m->nitems; i++) {
    json_t *o = json_array_get(items, (size_t)i);
    ck_item *it = &m->items[i];
    const char *name = json_is_object(o) ? get_str(o, "name") : NULL;
    if (!name || !ck_name_ok(name)) BAD("manifest: items[%d].name missing or not a valid name", i);
    snprintf(it->name, sizeof it->name, "%s", name);
    const char *kind = get_str(o, "kind"), *dt = get_str(o, "dtype");
    if (!kind || kind_parse(kind, &it->kind)) BAD("manifest: item '%s': field 'kind' missing or unknown", name);
    if (!dt || ck_dtype_parse(dt, &it->dtype)) BAD("manifest: item '%s': field 'dtype' missing or unknown", name);
    json_t *shape = json_object_get(o, "shape");
    if (!json_is_array(shape) || json_array_size(shape) > CK_MAX_DIMS)
      BAD("manifest: item '%s': field 'shape' missing or more than %d dims", name, CK_MAX_DIMS);
    it->ndim = (int)json_array_size(shape);
    for (int k = 0; k < it->ndim; k++) {
      json_t *v = json_array_get(shape, (size_t)k);
      if (!json_is_integer(v) || json_integer_value(v) < 0)
        BAD("manifest: item '%s': shape[%d] is not a non-negative integer", name, k);
      it->shape[k] = (int64_t)json_integer_value(v);
    }
    if ((it->kind == CK_KIND_BLOB_GLOBAL || it->kind == CK_KIND_BLOB_PER_RANK) &&
        (it->dtype != FTL_DTYPE_U8 || it->ndim != 1))
      BAD("manifest: blob '%s' is not a 1-d u8 item", name);
    if (ck_manifest_find_item(m, name) != i) BAD("manifest: item name '%s' appears twice", name);
  }
out:
  return rc;
}

/* shards[r]'s optional l1_host or l2_host (manifests before levels have none): a host name,
 * compared, never used as a path. */
static ftl_err parse_host(const json_t *o, const char *key, int r, char out[CK_HOST_MAX], ftl_diag *d) {
  ftl_err rc = FTL_OK;
  json_t *v = json_object_get(o, key);
  if (!v) return FTL_OK;
  const char *h = json_string_value(v);
  if (!h || !*h || strlen(h) >= CK_HOST_MAX || strpbrk(h, "/\\\n")) BAD("manifest: shards[%d].%s is not a host name", r, key);
  snprintf(out, CK_HOST_MAX, "%s", h);
out:
  return rc;
}

/* shards[r].pieces: each an item's rows at a place in the shard, with its checksum. */
static ftl_err parse_pieces(ck_manifest *m, int r, const json_t *pieces, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  ck_shard *sh = &m->shards[r];
  if (!json_is_array(pieces)) BAD("manifest: shards[%d].pieces missing or not an array", r);
  if (json_array_size(pieces) > (size_t)m->nitems) BAD("manifest: shards[%d] has more pieces than items", r);
  sh->npieces = (int)json_array_size(pieces);
  sh->pieces = ftl_calloc(sh->npieces > 0 ? (size_t)sh->npieces : 1, sizeof *sh->pieces);
  if (!sh->pieces) return ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory parsing the manifest");
  for (int p = 0; p < sh->npieces; p++) {
    json_t *po = json_array_get(pieces, (size_t)p);
    ck_piece *pc = &sh->pieces[p];
    int64_t v[4];
    const char *iname = json_is_object(po) ? get_str(po, "item") : NULL;
    if (!iname || (pc->item = ck_manifest_find_item(m, iname)) < 0)
      BAD("manifest: shards[%d].pieces[%d].item names no item", r, p);
    if (get_int(po, "row_start", 0, INT64_MAX, &v[0]) || get_int(po, "row_count", 1, INT64_MAX, &v[1]) ||
        get_int(po, "file_offset", 0, INT64_MAX, &v[2]) || get_int(po, "size_bytes", 1, INT64_MAX, &v[3]))
      BAD("manifest: shards[%d].pieces[%d] (item '%s'): row_start/row_count/file_offset/size_bytes missing or out of "
          "range",
          r, p, iname);
    pc->row_start = v[0];
    pc->row_count = v[1];
    pc->file_offset = (uint64_t)v[2];
    pc->size_bytes = (uint64_t)v[3];
    if (parse_hex64(get_str(po, "checksum"), &pc->checksum))
      BAD("manifest: shards[%d].pieces[%d].checksum is not 16 lowercase hex digits", r, p);
  }
out:
  return rc;
}

/* shards[r]: its rank, file name, size, checksum, hosts and pieces. */
static ftl_err parse_shard(ck_manifest *m, int r, const json_t *o, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  ck_shard *sh = &m->shards[r];
  int64_t rank, size;
  if (!json_is_object(o)) BAD("manifest: shards[%d] is not an object", r);
  if (get_int(o, "rank", 0, INT32_MAX, &rank) || rank != r) BAD("manifest: shards[%d].rank is not %d", r, r);
  sh->rank = r;
  const char *file = get_str(o, "file");
  char expect[CK_FILE_MAX];
  ck_shard_file_name(r, expect);
  if (!file || strcmp(file, expect) != 0) BAD("manifest: shards[%d].file is not \"%s\"", r, expect);
  snprintf(sh->file, sizeof sh->file, "%s", file);
  if (get_int(o, "size_bytes", 0, INT64_MAX, &size)) BAD("manifest: shards[%d].size_bytes missing or negative", r);
  sh->size_bytes = (uint64_t)size;
  if (parse_hex64(get_str(o, "checksum"), &sh->checksum))
    BAD("manifest: shards[%d].checksum is not 16 lowercase hex digits", r);
  if ((rc = parse_host(o, "l1_host", r, sh->l1_host, d)) || (rc = parse_host(o, "l2_host", r, sh->l2_host, d))) goto out;
  rc = parse_pieces(m, r, json_object_get(o, "pieces"), d);
out:
  return rc;
}

/* Optional (manifests before levels have none: L3 steps). Without "l3" the step lives in the
 * hosts' L1 folders only, so every shard must name the host whose L1 holds it. */
static ftl_err parse_levels(ck_manifest *m, const json_t *lv, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  if (!lv) return FTL_OK;
  if (!json_is_array(lv) || json_array_size(lv) < 1 || json_array_size(lv) > 3)
    BAD("manifest: field 'levels' is not a list of l1, l2, l3");
  m->l3 = 0;
  for (size_t k = 0; k < json_array_size(lv); k++) {
    const char *l = json_string_value(json_array_get(lv, k));
    if (!l || (strcmp(l, "l1") && strcmp(l, "l2") && strcmp(l, "l3"))) BAD("manifest: levels[%zu] is not l1, l2 or l3", k);
    m->l3 |= strcmp(l, "l3") == 0;
  }
  for (int r = 0; r < m->world_size && !m->l3; r++)
    if (!m->shards[r].l1_host[0])
      BAD("manifest: a step without l3 in 'levels' needs every shard's l1_host; shards[%d] has none", r);
out:
  return rc;
}

ftl_err ck_manifest_parse(const char *text, size_t len, ck_manifest **out, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  ck_manifest *m = NULL;
  json_error_t jerr;
  *out = NULL;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) BAD("manifest is not valid JSON: %s at line %d column %d", jerr.text, jerr.line, jerr.column);
  if (!json_is_object(root)) BAD("manifest: top level is not an object");
  const char *fmt = get_str(root, "format");
  if (!fmt || strcmp(fmt, "ftl-ckpt-manifest") != 0) BAD("manifest: field 'format' is not \"ftl-ckpt-manifest\"");
  int64_t version, step, world, created = 0;
  if (get_int(root, "version", 1, INT32_MAX, &version)) BAD("manifest: field 'version' missing or not an integer");
  if (version != CK_MANIFEST_VERSION)
    BAD("manifest: version %lld is not supported (this build reads version %d)", (long long)version,
        CK_MANIFEST_VERSION);
  if (get_int(root, "step", 0, INT64_MAX, &step)) BAD("manifest: field 'step' missing or negative");
  if (get_int(root, "world_size", 1, 1 << 20, &world)) BAD("manifest: field 'world_size' missing or out of range");
  if (json_object_get(root, "created_unix_us") && get_int(root, "created_unix_us", 0, INT64_MAX, &created))
    BAD("manifest: field 'created_unix_us' is not a non-negative integer");
  const char *csum = get_str(root, "checksum");
  if (!csum || strcmp(csum, "xxh3-64") != 0) BAD("manifest: field 'checksum' is not \"xxh3-64\"");
  json_t *items = json_object_get(root, "items"), *shards = json_object_get(root, "shards");
  if (!json_is_array(items)) BAD("manifest: field 'items' missing or not an array");
  if (!json_is_array(shards)) BAD("manifest: field 'shards' missing or not an array");
  if ((int64_t)json_array_size(shards) != world)
    BAD("manifest: %zu shards listed for world_size %lld", json_array_size(shards), (long long)world);
  if (json_array_size(items) > 1000000) BAD("manifest: too many items");
  m = ck_manifest_alloc((int)json_array_size(items), (int)world);
  if (!m) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory parsing the manifest");
    goto out;
  }
  m->step = step;
  m->created_unix_us = created;
  const char *jsh = get_str(root, "job_spec_hash");
  if (jsh && ftl_fmt(m->job_spec_hash, sizeof m->job_spec_hash, "%s", jsh))
    BAD("manifest: field 'job_spec_hash' is too long");
  if ((rc = parse_items(m, items, d))) goto out;
  for (int r = 0; r < m->world_size; r++)
    if ((rc = parse_shard(m, r, json_array_get(shards, (size_t)r), d))) goto out;
  if ((rc = parse_levels(m, json_object_get(root, "levels"), d))) goto out;
  rc = validate(m, d);
  if (rc) goto out;
  *out = m;
  m = NULL;
out:
  json_decref(root);
  ck_manifest_free(m);
  return rc;
}

/* Cross-field checks: sizes, placement inside the shard, coverage of every item. */
static ftl_err validate(ck_manifest *m, ftl_diag *d) {
  ftl_err rc = FTL_OK;
  span *spans = NULL;
  extent *ext = NULL;
  size_t nspans = 0, total = 0;
  for (int r = 0; r < m->world_size; r++)
    total += (size_t)m->shards[r].npieces;
  spans = ftl_calloc(total ? total : 1, sizeof *spans);
  ext = ftl_calloc((size_t)m->nitems + 1, sizeof *ext);
  if (!spans || !ext) {
    rc = ftl_diag_fail(d, FTL_ERR_NOMEM, "out of memory validating the manifest");
    goto out;
  }
  for (int r = 0; r < m->world_size; r++) {
    ck_shard *sh = &m->shards[r];
    for (int p = 0; p < sh->npieces; p++) {
      ck_piece *pc = &sh->pieces[p];
      ck_item *it = &m->items[pc->item];
      int ovf = 0;
      uint64_t rb = ck_item_row_bytes(it, &ovf), bytes = 0, end = 0;
      int64_t rows = ck_item_rows(it), last = 0;
      if (ovf || __builtin_mul_overflow(rb, (uint64_t)pc->row_count, &bytes))
        BAD("manifest: item '%s': shape overflows", it->name);
      if (__builtin_add_overflow(pc->row_start, pc->row_count, &last) || last > rows)
        BAD("manifest: shard %d, item '%s': rows %lld+%lld outside the %lld rows of the tensor", r, it->name,
            (long long)pc->row_start, (long long)pc->row_count, (long long)rows);
      if (bytes != pc->size_bytes)
        BAD("manifest: shard %d, item '%s': size_bytes %llu, but %lld rows of %llu bytes make %llu", r, it->name,
            (unsigned long long)pc->size_bytes, (long long)pc->row_count, (unsigned long long)rb,
            (unsigned long long)bytes);
      if (__builtin_add_overflow(pc->file_offset, pc->size_bytes, &end) || end > sh->size_bytes)
        BAD("manifest: shard %d, item '%s': bytes [%llu, +%llu) outside the %llu-byte file", r, it->name,
            (unsigned long long)pc->file_offset, (unsigned long long)pc->size_bytes,
            (unsigned long long)sh->size_bytes);
      if (it->kind == CK_KIND_BLOB_PER_RANK && (pc->row_start != 0 || pc->row_count != rows))
        BAD("manifest: shard %d: per-rank blob '%s' is not whole", r, it->name);
      ext[p].off = pc->file_offset;
      ext[p].len = pc->size_bytes;
      spans[nspans].item = pc->item;
      spans[nspans].shard = r;
      spans[nspans].start = pc->row_start;
      spans[nspans].count = it->kind == CK_KIND_BLOB_PER_RANK ? 0 : pc->row_count;
      nspans++;
    }
    qsort(ext, (size_t)sh->npieces, sizeof *ext, cmp_extent);
    for (int p = 1; p < sh->npieces; p++)
      if (ext[p - 1].off + ext[p - 1].len > ext[p].off) BAD("manifest: shard %d: two pieces overlap in the file", r);
    /* One piece per item per shard keeps restore's reads simple and is what the writer makes. */
    for (int p = 0; p < sh->npieces; p++)
      for (int q = p + 1; q < sh->npieces; q++)
        if (sh->pieces[p].item == sh->pieces[q].item)
          BAD("manifest: shard %d holds item '%s' twice", r, m->items[sh->pieces[p].item].name);
  }
  qsort(spans, nspans, sizeof *spans, cmp_span);
  size_t s = 0;
  for (int i = 0; i < m->nitems; i++) {
    ck_item *it = &m->items[i];
    int64_t next = 0;
    for (; s < nspans && spans[s].item == i; s++) {
      if (it->kind == CK_KIND_BLOB_PER_RANK) continue;
      if (spans[s].start != next)
        BAD("manifest: item '%s': rows %lld.. %s (shard %d)", it->name, (long long)next,
            spans[s].start > next ? "are missing" : "are stored twice", spans[s].shard);
      next += spans[s].count;
    }
    if (it->kind != CK_KIND_BLOB_PER_RANK && next != ck_item_rows(it))
      BAD("manifest: item '%s': rows %lld..%lld are in no shard", it->name, (long long)next,
          (long long)ck_item_rows(it));
  }
out:
  ftl_free(spans);
  ftl_free(ext);
  return rc;
}
